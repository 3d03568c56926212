"""The drop-in GEMV against ET-VK's own on a GPU host (issue 43, item 3; `workbench.etvk.dropin`): ET-VK's
``q4gsw_linear_gemv_coop__w_4x8`` and the drop-in (shaders/etvk_dropin/) on the same dispatch — ET-VK's packed
weights, its bindings, spec constants and work groups — timed the workbench's one way (`etvk.run.execute`:
Vulkan timestamps, back to back in one recording, in the `measure.cache` regimes cold and hot), each checked
against torch on the device, beside the copy of the same traffic in the same regime (`benchmarks.copy.CopyAtTraffic`):
Llama-3-8B's shapes (4096→4096, 4096→14336, 14336→4096) then Llama-3.2-1B's (2048→2048, 2048→8192, 8192→2048),
group 32, M = 1, no bias (as `benchmarks.q4_gemv`'s ET-VK rows). A shape not begun by BUDGET_S is left out and
named. `--chunks` (or `--chunks=1,4,8`): also the drop-in built with CHUNK 1 and 2 (weight vectors a thread loads
per step; the committed template uses CHUNK of shaders/etvk_dropin), rows `dropin-chunk1` / `dropin-chunk2`.
`--decompositions`: every impl at each of the GEMV's three (NUM_GROUPS, WORKERS) decompositions, not only the one
ET-VK's picker gives the shape (`decomposition`, `picked`): what the picker's grid costs.
$DROPIN_BUDGET_S instead of BUDGET_S.

    python3 tools/gpu_dropin.py OUT [--chunks[=C,…]] [--decompositions] [--quick]

Carry what tools/gpu_numbers.py carries (.carry_h200/h2.tar.xz: the workbench's glslang build and the checkout's
`executorch/backends/vulkan`); on the host:

    mkdir -p /tmp/h && tar xJf .carry_h200/h2.tar.xz -C /tmp/h && WORKBENCH_GLSLANG_DIR=/tmp/h/h2/glslang \\
    WORKBENCH_EXECUTORCH=/tmp/h/h2/executorch python3 tools/gpu_dropin.py $OUT

Writes OUT/q4_gemv_dropin.{csv,parquet,json}: one row per (impl, shape, cache) with `etvk.run.execute`'s columns
(median_us, GB/s, correct, max_abs_diff, tolerance, the regime's columns), `impl` (etvk | dropin | …), `model`,
`layer`, `k`, `n`, `group_size`, `copy_fraction` and the copy rows (`impl` copy); prints per shape and regime the
µs of each and the ratio ET-VK ÷ drop-in. About 100–150 s on an H200 (--chunks: about twice that, BUDGET_S then
leaves the last shapes out and names them; --quick: a smoke run anywhere, two small shapes, 15 s on lavapipe).
"""
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from workbench import vk
from workbench.benchmarks.copy import CopyAtTraffic
from workbench.etvk import dropin
from workbench.etvk.families.linear_q4gsw_4x8 import COOP_VARIANTS, coop_variant, with_coop_variant
from workbench.etvk.run import execute
from workbench.measure import environment
from workbench.measure.results import ResultsWriter

SHAPES = (("Llama-3-8B", "attn q/o", 4096, 4096), ("Llama-3-8B", "mlp up/gate", 4096, 14336),
          ("Llama-3-8B", "mlp down", 14336, 4096), ("Llama-3.2-1B", "attn q/o", 2048, 2048),
          ("Llama-3.2-1B", "mlp up/gate", 2048, 8192), ("Llama-3.2-1B", "mlp down", 8192, 2048))
QUICK_SHAPES = (("quick", "small", 512, 512), ("quick", "awkward", 1152, 4100))
GROUP = 32
BUDGET_S = float(os.environ.get("DROPIN_BUDGET_S", 120))
REGIMES = ("cold", "hot")


def repeats_for(bytes_moved: int, quick: bool) -> int:
    """Dispatches per recording: about 64 MiB of traffic, at most 20 (as benchmarks.q4_gemv times ET-VK's GEMV)."""
    return 2 if quick else max(1, min(20, int(64 * 2**20 // max(bytes_moved, 1))))


def chunk_variant(chunk: int, folder: Path) -> Path:
    """The drop-in with `#define CHUNK <chunk>`, written into `folder` under the template's name."""
    text = dropin.dropin_file().read_text()
    edited, count = re.subn(r"#define CHUNK \d+", f"#define CHUNK {chunk}", text)
    if count != 1:
        raise SystemExit("the drop-in has no single `#define CHUNK N` line to vary")
    path = folder / f"chunk{chunk}" / dropin.dropin_file().name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(edited)
    return path


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    quick = "--quick" in sys.argv
    device = vk.get_device()
    started = time.time()
    theirs, ours = dropin.generators()
    impls = [("etvk", theirs), ("dropin", ours)]
    tmp = tempfile.TemporaryDirectory(prefix="gpu-dropin-")
    chunks = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--chunks=")), "1,2" if "--chunks" in sys.argv
                  else "")
    impls += [(f"dropin-chunk{c}", dropin.generators(with_file=chunk_variant(int(c), Path(tmp.name)))[1])
              for c in chunks.split(",") if c]
    shapes = QUICK_SHAPES if quick else SHAPES
    cases = [(s, dropin._dispatch(theirs, s[2], s[3], GROUP, bias=False)) for s in shapes]
    decompositions = "--decompositions" in sys.argv
    copies = CopyAtTraffic(device, [d.bytes_moved for _, d in cases], quick=quick, show_progress=False,
                           regimes=REGIMES)
    writer = ResultsWriter(out / "q4_gemv_dropin")
    env = environment(device)
    for row in copies.frame.assign(impl="copy").to_dict("records"):
        writer.append(row)
    print(f"{env['device']} ({env['driver']}): copies measured ({time.time() - started:.0f} s)", flush=True)
    for i, ((model, layer, k, n), d) in enumerate(cases):
        if time.time() - started > BUDGET_S:
            print(f"{BUDGET_S} s spent; left out {', '.join(f'{s[2]}->{s[3]}' for s, _ in cases[i:])}", flush=True)
            break
        reps = repeats_for(d.bytes_moved, quick)
        got = []
        picked = coop_variant(n)[0]
        ways = [(v[0], with_coop_variant(d, n, v[0])) for v in COOP_VARIANTS] if decompositions else [(picked, d)]
        for regime in REGIMES:
            for impl, gen in impls:
                for suffix, dispatch in ways:
                    row = execute(device, gen, dispatch, measure=True, back_to_back=reps, cache=regime,
                                  quick_cache=quick, min_time_s=0.005 if quick else 0.2,
                                  max_time_s=1.0 if quick else 3.0)
                    # family: the drop-in replaces that template's code (the roofline check's arithmetic path)
                    row.update(impl=impl, family=dispatch.kernel, model=model, layer=layer, k=k, n=n, m=1,
                               group_size=GROUP,
                               shape=f"1x{k}->{n}", status="ok", exact=bool(row.get("correct")),
                               decomposition=suffix.lstrip("_"), picked=suffix == picked)
                    writer.append(copies.annotate(row, d.bytes_moved))
                    got.append(row)
        frame = pd.DataFrame(got)
        table = frame.pivot_table(index=["cache", "decomposition"], columns="impl", values="median_us")
        table["etvk / dropin"] = table["etvk"] / table["dropin"]
        wrong = frame[~frame["correct"].astype(bool)]
        print(f"{k}->{n} g{GROUP} ({time.time() - started:.0f} s): µs\n{table.round(2).to_string()}"
              + (f"\n  NOT CORRECT: {wrong[['impl', 'cache', 'max_abs_diff', 'tolerance']].to_dict('records')}"
                 if len(wrong) else ""), flush=True)
    for row in copies.finish().assign(impl="copy").to_dict("records"):
        writer.append(row)
    writer.close()
    tmp.cleanup()
    print(f"done in {time.time() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
