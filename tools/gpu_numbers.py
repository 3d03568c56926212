"""Numbers that hold up, on a GPU host (data/NVIDIA_H200/NOTES.md, fifth wave): the GEMV's builds of every family
cold and hot beside ET-VK's GEMV and the copy of the same traffic in the same regime, and the pixel shuffle at its
small (PERF) shapes cold; each row with its clock columns, its cache regime and the run's floors.
`--field` (issue 43, item 1): the field's GEMVs through torch (torch's int4 tinygemm op, torchao's CUDA path, and
cuBLAS's fp16 GEMV; `workbench.benchmarks.field_gemv`, CUDA events) beside the workbench's best builds
(FIELD_BUILDS, per data/NVIDIA_H200/q4_gemv.csv), cold and hot, group 32, M = 1, at Llama-3.1-8B's three shapes
then Llama-3.2-1B's three and Qwen3-0.6B's two, in one run of under 5 minutes (a shape not begun by FIELD_BUDGET_S is left out and
named; $FIELD_MODELS picks models): OUT/q4_gemv_field.*. Needs no ET-VK checkout and no torchao (torch's core op): carry `.gl` and `.whl_field`
(vulkan, cffi, pycparser, nvidia_ml_py) on a host with CUDA torch. With $WORKBENCH_GGML (a ggml or llama.cpp
checkout) and GFXReconstruct's tools ($WORKBENCH_GFXRECON_DIR), llama.cpp's Vulkan GEMV too (both paths; built,
captured once at every field shape before the first is timed, then replayed: `workbench.benchmarks.field_ggml`).

    python3 tools/gpu_numbers.py OUT [--gemv] [--pixel] [--field]       (--gemv and --pixel when none is given)

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
import os
import sys
import time
from pathlib import Path

from workbench import vk
from workbench.benchmarks import pixel_shuffle as P
from workbench.benchmarks import q4_gemv as B
from workbench.measure.results import ResultsWriter

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
both = not ({"--gemv", "--pixel", "--field"} & set(sys.argv))
device = vk.get_device()
half = {"reduce": "subgroup", "scale_dtype": "half", "act_dtype": "half", "dequant": "half2"}
tiled = dict(half, layout="tiled")
xregs = dict(tiled, x_regs=True, threads_k=128, max_groups=1056)
BUILDS = [dict(half, threads_k=64), dict(half, rows=2, threads_k=64), dict(tiled, threads_k=64, unroll=2), xregs,
          dict(xregs, dequant="dq8", act_dtype="int8", lane_chunks=True),
          dict(xregs, diagnostic=2),                              # the weights-only stream (wrong by design)
          dict(tiled, threads_k=64, unroll=2, diagnostic=5)]      # the arithmetic on 8 tiles' data (cache-resident)
#: the best builds of data/NVIDIA_H200/q4_gemv.csv at the field run's shapes, group 32: the int8-activation build
#: (4096→4096, 4096→14336, 8192→2048, 2048→8192), the half2 rows builds (14336→4096 cold / hot), activations in
#: registers (2048→2048)
FIELD_BUILDS = [dict(xregs, dequant="dq8", act_dtype="int8", lane_chunks=True), dict(half, rows=2, threads_k=64),
                dict(half, threads_k=64), xregs]
#: $FIELD_MODELS (comma-separated) runs some: e.g. Qwen3-0.6B alone, its rows then joined to an earlier run's file
FIELD_MODELS = os.environ.get("FIELD_MODELS", "Llama-3.1-8B,Llama-3.2-1B,Qwen3-0.6B").split(",")
FIELD_SHAPES = [s for m in FIELD_MODELS for s in B.SHAPES if s.model == m]
if not FIELD_SHAPES:
    sys.exit(f"FIELD_MODELS: expected models of {sorted({s.model for s in B.SHAPES})}, got {FIELD_MODELS}")
FIELD_BUDGET_S = float(os.environ.get("FIELD_BUDGET_S", 200))  # a shape takes ~30-40 s: under 5 minutes
GGML = os.environ.get("WORKBENCH_GGML") or None
started = time.time()
if "--field" in sys.argv:
    writer = ResultsWriter(out / "q4_gemv_field")
    if GGML:  # build and capture before the clock of the budget starts
        from workbench.benchmarks import field_ggml
        for path in field_ggml.GGML_PATHS:
            field_ggml.capture_for(GGML, path, [(s.k, s.n) for s in FIELD_SHAPES], field_ggml.device_key(device),
                                   echo=lambda text: print(text, flush=True))
        print(f"ggml built and captured ({time.time() - started:.0f} s)", flush=True)
        started = time.time()
    for i, shape in enumerate(FIELD_SHAPES):
        if time.time() - started > FIELD_BUDGET_S:
            left = ", ".join(f"{s.k}->{s.n}" for s in FIELD_SHAPES[i:])
            print(f"field run: {FIELD_BUDGET_S} s spent; left out {left}", flush=True)
            break
        valid = B.buildable(shape, 32, FIELD_BUILDS)
        df = B.bench_suite(device, writer, shapes=(shape,), group_sizes=(32,), ms=(1,), variants=valid,
                           caches=("cold", "hot"), show_progress=False, field=True, ggml=GGML,
                           ggml_captured=[(s.k, s.n) for s in FIELD_SHAPES])
        ok = df[(df.impl.isin(["workbench", "torch-int4-tinygemm", "cublas-fp16"]) |
                 df.impl.astype(str).str.startswith("llama.cpp")) & (df.status == "ok")]
        figures = {"us": ("median_us", "min"), "copy": ("copy_fraction", "max"),
                   "cuda_copy": ("cuda_copy_fraction", "max")}
        best = ok.groupby(["impl", "cache"]).agg(**{k: v for k, v in figures.items() if v[0] in ok})
        print(f"{shape.k}->{shape.n} g32 ({time.time() - started:.0f} s)\n{best.round(3).to_string()}", flush=True)
        bad = df[df.impl.isin(["torch-int4-tinygemm", "cublas-fp16"]) & ~df.get("correct", False).fillna(False)
                 .astype(bool)]
        for r in bad.itertuples():
            why = getattr(r, "reason", "") if r.status != "ok" else \
                f"max_abs_diff {r.max_abs_diff:.3g} > tolerance {r.tolerance:.3g}"
            print(f"  {r.impl} {getattr(r, 'cache', '')}: {r.status}, not correct: {why}", flush=True)
    writer.close()
if both or "--gemv" in sys.argv:
    writer = ResultsWriter(out / "q4_gemv")
    for shape in B.SHAPES:
        for group, builds in ((32, BUILDS), (128, BUILDS[:3])):
            valid = B.buildable(shape, group, builds)
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
