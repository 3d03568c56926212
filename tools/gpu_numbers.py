"""Numbers that hold up, on a GPU host (data/NVIDIA_H200/NOTES.md, fifth wave): the GEMV's builds of every family
cold and hot beside ET-VK's GEMV and the copy of the same traffic in the same regime, and the pixel shuffle at its
small (PERF) shapes cold; each row with its clock columns, its cache regime and the run's floors.

    python3 tools/gpu_numbers.py OUT [--gemv] [--pixel]       (both when neither is given)

Carry .carry_h200/h2.tar.xz (`glslang/`: the workbench's glslang build, for ET-VK's GLSL dialect;
`executorch/backends/vulkan`: the checkout's shaders and generator) and `.whl` (torchao, nvidia-ml-py) with
`bash ../shared/gpu/prepare.sh torchao==0.18.0 nvidia-ml-py`; on the host:

    mkdir -p /tmp/h && tar xJf .carry_h200/h2.tar.xz -C /tmp/h && WORKBENCH_GLSLANG_DIR=/tmp/h/h2/glslang \\
    WORKBENCH_EXECUTORCH=/tmp/h/h2/executorch python3 tools/gpu_numbers.py $OUT

Writes OUT/q4_gemv.{csv,parquet,json} (the builds: the rows layout's half2 builds, the tiled build, activations in
registers, the int8-activation build, and two diagnostics: the weights-only stream and the cache-resident
arithmetic; group 32 at every shape, group 128 for the first three; M = 1) and OUT/pixel_shuffle_perf.* (the
pixel-shuffle suite at ET-VK's PERF shapes, cold), and prints per shape the best build against the copy.
"""
import sys
import time
from pathlib import Path

from workbench import vk
from workbench.benchmarks import pixel_shuffle as P
from workbench.benchmarks import q4_gemv as B
from workbench.measure.results import ResultsWriter

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
both = not ({"--gemv", "--pixel"} & set(sys.argv))
device = vk.get_device()
half = {"reduce": "subgroup", "scale_dtype": "half", "act_dtype": "half", "dequant": "half2"}
tiled = dict(half, layout="tiled")
xregs = dict(tiled, x_regs=True, threads_k=128, max_groups=1056)
BUILDS = [dict(half, threads_k=64), dict(half, rows=2, threads_k=64), dict(tiled, threads_k=64, unroll=2), xregs,
          dict(xregs, dequant="dq8", act_dtype="int8", lane_chunks=True),
          dict(xregs, diagnostic=2),                              # the weights-only stream (wrong by design)
          dict(tiled, threads_k=64, unroll=2, diagnostic=5)]      # the arithmetic on 8 tiles' data (cache-resident)
started = time.time()
if both or "--gemv" in sys.argv:
    writer = ResultsWriter(out / "q4_gemv")
    for shape in B.SHAPES:
        for group, builds in ((32, BUILDS), (128, BUILDS[:3])):
            valid = []
            for options in builds:
                try:
                    B.Q4GemvSpec(shape.n, shape.k, group, **options)
                except ValueError:
                    continue
                valid.append(options)
            df = B.bench_suite(device, writer, shapes=(shape,), group_sizes=(group,), ms=(1,), variants=valid,
                               caches=("cold", "hot"), show_progress=False)
            ok = df[df.impl.isin(["workbench", "etvk"]) & ~df.get("diagnostic", 0).fillna(0).astype(bool)]
            best = ok.groupby(["impl", "cache"])["median_us"].min().round(2).to_dict()
            print(f"{shape.k}->{shape.n} g{group}: {best} ({time.time() - started:.0f} s)", flush=True)
    writer.close()
if both or "--pixel" in sys.argv:
    writer = ResultsWriter(out / "pixel_shuffle_perf")
    df = P.bench_suite(device, writer, shapes=list(P.PERF_SHAPES), show_progress=False)
    writer.close()
    kernels = df[df.impl.isin(["fused", "chain", "float"])]
    print(kernels.groupby(["shape", "impl", "cache"])["copy_fraction"].max().round(3).to_string())
print(f"done in {time.time() - started:.0f} s", flush=True)
