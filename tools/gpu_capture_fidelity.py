"""Fidelity from captures on a GPU host without ExecuTorch (issue 33 item 9): each model captured on ET-VK's runtime,
its program run again for ET-VK's own times (an ETDump), every dispatch of the captured execution replayed alone
through the workbench and timed warm and cold (`workbench.etvk.model.capture_fidelity`); one tar comes back, from
which the table is computed where ExecuTorch's Inspector is (the development machine).

Carry (as for tools/gpu_capture_coverage.py): .carry_cov/cov.tar.xz (`bin/executor_runner` built by `workbench etvk
build`, `programs/<model>/` written by `workbench etvk lower`, `names.json` = capture_join.variant_names()) and
.carry_gfx/gfx.tar.xz (GFXReconstruct's tools, layer and libraries). On the host, from the repository root, in two
calls of under 10 minutes each (about 1.5-2 s per dispatch: a second of warm-up, then both ways; 70 dispatches, then
MobileNetV2's 174):

    mkdir -p /tmp/c && ([ -d /tmp/c/cov ] || tar xJf .carry_cov/cov.tar.xz -C /tmp/c) && \
    ([ -d /tmp/c/gfx ] || tar xJf .carry_gfx/gfx.tar.xz -C /tmp/c) && \
    WORKBENCH_GFXRECON_DIR=/tmp/c/gfx LD_LIBRARY_PATH=/tmp/c/gfx/lib \
    python3 tools/gpu_capture_fidelity.py $OUT residual_add float_between refinenet_like

and the same with `$OUT mobilenet_v2` (the machine kept warm: /tmp/c is unpacked once).

Writes $OUT/capture_fidelity_<device>.tar.gz (timed.csv: a row per execution dispatch and way; per model capture.json,
dispatches.csv, run.etdp and program/{summary,run}.json + run.etdp; packed again as each model ends, so a run cut
short sends back the models it finished) and $OUT/capture_fidelity.log. Back here:

    workbench capture fidelity A/capture_fidelity_<device>.tar.gz B/capture_fidelity_<device>.tar.gz \
        --csv data/<device>/capture_fidelity.csv --summary-csv data/<device>/capture_fidelity_summary.csv \
        --handport data/NVIDIA_H100_80GB_HBM3/etvk_fidelity.csv \
        --handport-csv data/<device>/capture_fidelity_handport.csv

Options: --root (default /tmp/c/cov), --runner / --programs / --names (each instead of the root's), --ways warm,cold,
--cold-between shader:128, --back-to-back 20, --runs 20 --warmup 3 (ET-VK's executions), --warm-seconds 1,
--quick (a few samples: a smoke run), --samples N (exactly N per way: a shared CPU device), --keep DIR (the
capture folders, else a temporary folder).
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench import vk  # noqa: E402
from workbench.etvk.model import build, capture_fidelity as cf  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("out", help="folder for the tar and the log ($OUT)")
parser.add_argument("models", nargs="+")
parser.add_argument("--root", default="/tmp/c/cov")
parser.add_argument("--runner")
parser.add_argument("--programs")
parser.add_argument("--names")
parser.add_argument("--ways", default="warm,cold,in-order")
parser.add_argument("--cold-between", default=cf.COLD_BETWEEN)
parser.add_argument("--back-to-back", type=int, default=20)
parser.add_argument("--runs", type=int, default=20)
parser.add_argument("--warmup", type=int, default=3)
parser.add_argument("--warm-seconds", type=float, default=1.0)
parser.add_argument("--quick", action="store_true")
parser.add_argument("--samples", type=int, default=None)
parser.add_argument("--keep", default=None)
parser.add_argument("--chains", type=int, default=1, help="in-order: the execution's chain this many times a submit")
parser.add_argument("--burst", type=int, default=0,
                    help="in-order: the submits timed N at a time, each burst after a warm-up (0: one sample set)")
parser.add_argument("--barriers", default="captured", help="in-order: captured, light, full (comma-separated)")
parser.add_argument("--memory", default="pooled", help="in-order: pooled, own, captured (comma-separated)")
args = parser.parse_args()

import json  # noqa: E402

root = Path(args.root)
runner = Path(args.runner or root / "bin" / "executor_runner")
programs = Path(args.programs or root / "programs")
names = json.loads(Path(args.names or root / "names.json").read_text())
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)
log = open(out / "capture_fidelity.log", "w")


def echo(message):
    print(message, flush=True)
    log.write(message + "\n")
    log.flush()


device = vk.get_device()
work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="capfid-"))
started = time.time()
tag = "".join(c if c.isalnum() else "_" for c in device.info.name).strip("_")
tar = out / f"capture_fidelity_{tag}.tar.gz"     # packed again as each model ends
timed = cf.measure_models({m: programs / m for m in args.models}, build.from_path(runner), work, names=names,
                          ways=args.ways.split(","), cold_between=args.cold_between, back_to_back=args.back_to_back,
                          runs=args.runs, warmup=args.warmup, warm_seconds=args.warm_seconds, quick=args.quick,
                          samples=args.samples, device=device, tar=tar, echo=echo,
                          in_order={"chains": args.chains, "burst": args.burst,
                                    "barriers": tuple(args.barriers.split(",")),
                                    "memory": tuple(args.memory.split(","))})
for (model, way), group in timed.groupby(["model", "way"], sort=False):
    echo(f"{model} {way}: {len(group)} dispatches, {group['replay_us'].sum():.1f} µs replayed")
echo(f"{device.info.name} ({device.info.driver_info}): {len(timed)} rows in {time.time() - started:.0f} s -> {tar}")
