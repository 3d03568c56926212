"""Capture coverage of ET-VK's runtime on a GPU host without ExecuTorch (the H200 run of data/NVIDIA_H200/NOTES.md).

    python3 tools/gpu_capture_coverage.py OUT

Reads /tmp/c/cov (unpacked from a carried tar: `bin/executor_runner` built here by `workbench etvk build`,
`programs/<model>/` written by `workbench etvk lower`, `names.json` = capture_join.variant_names() as
{SPIR-V hash: variant}); needs GFXReconstruct's tools ($WORKBENCH_GFXRECON_DIR). Each model is run once under the
capture layer, every dispatch replayed alone through the workbench and compared byte for byte; writes
OUT/capture_coverage.csv and OUT/capture_coverage_summary.csv.
"""
import json, sys, time
from pathlib import Path
from types import SimpleNamespace
import pandas as pd
from workbench import capture, vk
from workbench.etvk.model import capture_join as cj
from workbench.measure import environment
out = Path(sys.argv[1]); root = Path("/tmp/c/cov")
names = json.loads((root / "names.json").read_text())
dev = vk.get_device(); env = environment(dev)
rows, summ = [], []
for m in ["residual_add", "float_between", "refinenet_like", "mobilenet_v2"]:
    t = time.time()
    man = cj.capture_program(SimpleNamespace(runner=root / "bin" / "executor_runner"), cj.lowered_program(root / "programs" / m), Path("/tmp/caps") / m)
    t1 = time.time()
    fr = capture.replay(Path("/tmp/caps") / m, device=dev, quick=True, names=names)
    fr.insert(0, "model", m)
    rows.append(fr)
    summ.append({"model": m, "dispatches": len(fr), "exact": int(fr["exact"].sum()), "capture_bytes": man["capture_bytes"],
                 "capture_s": round(t1 - t, 2), "replay_ms_per_dispatch": round(1e3 * (time.time() - t1) / max(len(fr), 1), 1),
                 "exceptions": "; ".join(f"{r.dispatch}: {r.reason or r.mismatch}" for r in fr[~fr["exact"]].itertuples())[:2000]})
    print(summ[-1], flush=True)
t = pd.concat(rows, ignore_index=True)
cols = [c for c in ["model", "dispatch", "pipeline", "variant", "groups", "local_size", "exact", "mismatch", "reason", "gpu_us_median", "device", "driver", "commit"] if c in t.columns]
t[cols].to_csv(out / "capture_coverage.csv", index=False)
s = pd.DataFrame(summ); s.loc[len(s)] = {"model": "all", "dispatches": s["dispatches"].sum(), "exact": s["exact"].sum()}
s.to_csv(out / "capture_coverage_summary.csv", index=False)
print(s.to_string(index=False))
