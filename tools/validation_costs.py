"""What each validation mode costs per dispatch on the current Vulkan device: the same kernel (the workbench's fused
int8 pixel shuffle, 1×64×56×56, r = 2) submitted and waited for N times on a device with validation off, core, sync,
GPU-assisted and debug printf (a printf shader printing one line per invocation of a 64-invocation dispatch too).
Writes ``data/<device>/validation_costs.csv``: host wall time per submit (median, p10, p90) and GPU time.

    python tools/validation_costs.py [--runs 50] [--out data/<device>]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from workbench.toolchain import shaders
from workbench import vk
from workbench.kernels import pixel_shuffle as PS
from workbench.measure import ResultsWriter, default_results_dir, environment

MODES = {"off": dict(validation=False), "core": dict(validation=True), "sync": dict(sync_validation=True),
         "gpu": dict(gpu_assisted=True), "printf": dict(debug_printf=True)}
PRINTF_SHADERS = "tests/shaders/validation"


def _time(dev, record, runs):
    walls, gpus = [], []
    for k in range(runs + 3):
        start = time.perf_counter()
        with dev.record("cost") as rec:
            record(rec)
            rec.submit()
        if k >= 3:  # the first submits compile and warm up
            walls.append((time.perf_counter() - start) * 1e6)
            gpus.append(rec.gpu_ns / 1e3 if rec.gpu_ns is not None else float("nan"))
    q = np.percentile(walls, [10, 90])
    return {"wall_us_median": statistics.median(walls), "wall_us_p10": q[0], "wall_us_p90": q[1],
            "gpu_us_median": statistics.median(gpus)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--out")
    args = ap.parse_args()
    spec = PS.Q8taPixelShuffleSpec((1, 64, 56, 56), 2)
    out = None
    for mode, kwargs in MODES.items():
        dev = vk.Device(**kwargs)
        try:
            env = environment(dev)
            if out is None:
                out = Path(args.out) if args.out else default_results_dir(dev)
                writer = ResultsWriter(out / "validation_costs", {"kernel": spec.variant, "runs": args.runs})
            with PS.Q8taPixelShuffleRun(dev, spec) as run:
                row = _time(dev, run.record, args.runs)
            writer.append({"mode": mode, "kernel": spec.variant, "what": "pixel shuffle 1x64x56x56", **row,
                           "messages": len(dev.take_validation_messages()) if dev.instance.validation else 0, **env})
            if mode == "printf":
                spv = shaders.compile_shader("printf_each", {}, shader_dir=PRINTF_SHADERS)
                with dev.pipeline(spv, local_size=(64, 1, 1), name="printf_each") as p:
                    dst, src = dev.buffer(nbytes=4 * 64), dev.buffer(np.arange(64, dtype=np.uint32))
                    row = _time(dev, lambda rec: rec.dispatch(p, [dst, src], (64,), np.array([64], np.uint32)),
                                args.runs)
                    lines = len(dev.printf_messages(clear=True))
                    dst.close()
                    src.close()
                writer.append({"mode": mode, "kernel": "printf_each", "what": "64 invocations, one line each",
                               **row, "printf_lines": lines, **env})
            print(f"{mode}: {row['wall_us_median']:,.0f} µs per submit (host), {row['gpu_us_median']:,.1f} µs GPU",
                  flush=True)
        finally:
            dev.close()
    writer.close()
    print(f"wrote {writer.csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
