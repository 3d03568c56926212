"""The 4-bit GEMV at decode shapes on a GPU host (the H200 run of data/NVIDIA_H200/NOTES.md), ET-VK's GEMV in the
same run.

    python3 tools/gpu_q4_gemv.py OUT [--full | --sweep | --diag | --tiled | --xregs]

Carry .carry_gemv/ (cg.tar.xz: the workbench's glslang build + the checkout's backends/vulkan; the torchao wheel) and
unpack it to /tmp/cg; then WORKBENCH_GLSLANG_DIR=/tmp/cg/glslang WORKBENCH_EXECUTORCH=/tmp/cg/executorch. Writes
OUT/q4_gemv.csv (rows as `workbench bench q4-gemv`): M = 1, groups 32 / 128, every shape of SHAPES, the variants
of SUITE_VARIANTS from the 7th on (the earlier runs' best and the half2 ones; --full: all of them).
--sweep: OUT/q4_gemv_sweep_large.csv instead, the half2 variant's threads along K × rows × loads ahead × work-group
size at Llama-3.1-8B's three shapes, group 32 (where the fixed cost is amortised and the slope is what is left).
--diag: OUT/q4_gemv_diag.csv, the best half2 variants at every shape, group 32, each beside its loads-only build
(`diagnostic=1`: every load kept, the arithmetic replaced; `2`: the weight loads alone; wrong by design): what the
arithmetic, and what the activation and scale loads, cost.
--tiled: OUT/q4_gemv_tiled.csv, the tiled layout (4-row tiles, `layout="tiled"`) at every shape, group 32, beside
the rows layout's best: loads ahead, rows, threads along K, staged activations, capped work groups, its diagnostics.
--latest: OUT/q4_gemv_latest.csv, SUITE_VARIANTS from the 12th (the half2 builds, the tiled build), groups 32 and 128.
--mscale: OUT/q4_gemv_mscale.csv, the best variant of each build at Llama-3.1-8B's shapes at M = 1, 2, 4.
--xregs --cached: OUT/q4_gemv_cached.csv, the builds beside their cache-resident build (`diagnostic=5`: the same
arithmetic on the first 8 tiles' data): the arithmetic's own time against the stream's.
--xregs --dq8: OUT/q4_gemv_dq8.csv, the int8-activation build (`dequant="dq8"`, torchao's 8da4w numerics) at every
shape beside the weights-only stream.
--xregs: OUT/q4_gemv_xregs.csv, the tiled layout with activations in registers (`x_regs`), fp32 or fp16 (`acc16`)
sums, one tile set per work group or 1,056 work groups looping, at every shape (the variants valid there), group 32.
"""
import sys
from pathlib import Path

from workbench import vk
from workbench.benchmarks import q4_gemv as B
from workbench.measure.results import ResultsWriter

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
device = vk.get_device()
half = {"reduce": "subgroup", "scale_dtype": "half", "act_dtype": "half", "dequant": "half2"}
tiled = dict(half, layout="tiled")
if "--tiled" in sys.argv:
    pf = dict(tiled, prefetch=True)
    variants = [dict(half, threads_k=64), dict(tiled, threads_k=64, unroll=2)]  # the best of each layout so far
    variants += [dict(pf, **o) for o in (
        {"unroll": 1}, {"unroll": 2}, {"unroll": 4}, {"threads_k": 64, "unroll": 2}, {"threads_k": 64, "unroll": 4},
        {"threads_k": 128, "local_x": 256, "unroll": 2}, {"threads_k": 128, "local_x": 256, "unroll": 4},
        {"threads_k": 256, "local_x": 256, "unroll": 2}, {"rows": 8, "unroll": 2},
        {"rows": 8, "threads_k": 64, "unroll": 2}, {"unroll": 2, "local_x": 32},
        {"threads_k": 64, "unroll": 2, "act_shared": True}, {"unroll": 4, "max_groups": 1056},
        {"threads_k": 128, "local_x": 256, "unroll": 4, "diagnostic": 2},
        {"threads_k": 64, "unroll": 2, "diagnostic": 2},
        {"threads_k": 64, "unroll": 2, "diagnostic": 1})]
    df = B.bench_suite(device, ResultsWriter(out / "q4_gemv_tiled_pf"), group_sizes=(32,), ms=(1,), variants=variants)
elif "--mscale" in sys.argv:  # time against M (the arithmetic per weight byte grows with M, the traffic barely)
    variants = [dict(half, threads_k=64), dict(tiled, threads_k=64, unroll=2)]
    df = B.bench_suite(device, ResultsWriter(out / "q4_gemv_mscale"), shapes=B.SHAPES[-3:], group_sizes=(32,),
                       ms=(1, 2, 4), variants=variants)
    w = df[df.impl == "workbench"]
    print(w.pivot_table(index=["variant"], columns=["shape", "m"], values="median_us").round(2).to_string())
elif "--xregs" in sys.argv:
    xr = dict(tiled, x_regs=True)
    if "--dq8" in sys.argv:  # int8 activations (8da4w numerics): integer dot products instead of packed fp16
        dq8 = dict(tiled, dequant="dq8", act_dtype="int8", x_regs=True, lane_chunks=True)
        if "--cached8" in sys.argv:  # the int8 build beside its cache-resident build
            options = [dict(dq8, threads_k=128, max_groups=1056, diagnostic=d) for d in (0, 5)]
            stem = "q4_gemv_dq8_cached"
        elif "--round2" in sys.argv:  # scales and conversions at group boundaries only; persistent group counts
            options = [dict(dq8, **o) for o in (
                {"threads_k": 128, "max_groups": 1056}, {"threads_k": 128, "max_groups": 528},
                {"threads_k": 128, "max_groups": 2112}, {"threads_k": 128, "local_x": 256, "max_groups": 1056},
                {"threads_k": 256, "local_x": 256, "max_groups": 1056}, {"threads_k": 64, "max_groups": 1056},
                {"threads_k": 128, "max_groups": 1056, "diagnostic": 5})]
            stem = "q4_gemv_dq8_round2"
        else:
            options = [dict(dq8, threads_k=t, local_x=max(128, t), max_groups=g) for t in (64, 128, 256)
                       for g in (0, 1056)]
            stem = "q4_gemv_dq8"
        options += [dict(xr, threads_k=128, max_groups=1056, diagnostic=2)]
    elif "--cached" in sys.argv:  # the arithmetic's own time: the same builds reading 8 tiles' data (cache-resident)
        options = [dict(tiled, threads_k=64, unroll=u, diagnostic=d) for u in (1, 2) for d in (0, 2, 5, 6, 7, 8)]
        if "--split" not in sys.argv:
            options += [dict(xr, threads_k=128, max_groups=1056, acc16=a, diagnostic=d) for a in (False, True)
                        for d in (0, 5)]
        stem = "q4_gemv_cached"
    elif "--lanes" in sys.argv:  # a thread's chunks consecutive in K: one scale load per group
        options = [dict(xr, threads_k=128, max_groups=1056)]
        options += [dict(xr, lane_chunks=True, **o) for o in (
            {"threads_k": 128, "max_groups": 1056}, {"threads_k": 128, "max_groups": 1056, "acc16": True},
            {"threads_k": 64, "max_groups": 1056}, {"threads_k": 256, "local_x": 256, "max_groups": 1056},
            {"threads_k": 128}, {"threads_k": 128, "max_groups": 528}, {"threads_k": 128, "max_groups": 2112},
            {"threads_k": 128, "max_groups": 1056, "diagnostic": 3},
            {"threads_k": 128, "max_groups": 1056, "diagnostic": 4})]
        stem = "q4_gemv_xregs_lanes"
    elif "--split" in sys.argv:  # where the time goes: weights, + scales, arithmetic without scales (with statistics)
        options = [dict(xr, threads_k=t, max_groups=1056, acc16=a, diagnostic=d)
                   for t in (64, 128) for a in (False, True) for d in (0, 2, 3, 4) if not (a and d in (2, 3))]
        stem = "q4_gemv_xregs_split"
    else:
        options = [dict(xr, threads_k=t, local_x=max(128, t), acc16=a, max_groups=g)
                   for t in (32, 64, 128, 256) for a in (False, True) for g in (0, 1056)]
        options += [dict(xr, rows=8, threads_k=t, local_x=max(128, t), acc16=True, max_groups=1056) for t in (64, 128)]
        options += [dict(xr, threads_k=128, max_groups=1056, diagnostic=2)]
        stem = "q4_gemv_xregs"
    writer = ResultsWriter(out / stem)
    frames = []
    for shape in B.SHAPES:
        valid = B.buildable(shape, 32, options)
        variants = [dict(half, threads_k=64), dict(tiled, threads_k=64, unroll=2)] + valid
        frames.append(B.bench_suite(device, writer, shapes=(shape,), group_sizes=(32,), ms=(1,), variants=variants))
    import pandas as pd
    df = pd.concat(frames, ignore_index=True)
elif "--diag" in sys.argv:
    best = [dict(half, rows=2, threads_k=64), dict(half, rows=4, threads_k=64), dict(half, rows=4, threads_k=32,
                                                                                      local_x=32)]
    variants = [dict(v, diagnostic=d) for v in best for d in (0, 1, 2)]
    df = B.bench_suite(device, ResultsWriter(out / "q4_gemv_diag"), group_sizes=(32,), ms=(1,), variants=variants)
elif "--sweep" in sys.argv:
    variants = [dict(half, threads_k=t, rows=r, unroll=u, local_x=lx)
                for t in (16, 32, 64) for r in (2, 4, 8) for u in (1, 2, 4) for lx in (128, 256)
                if r * u <= 16 and lx % t == 0]
    df = B.bench_suite(device, ResultsWriter(out / "q4_gemv_sweep_large"), shapes=B.SHAPES[-3:],
                       group_sizes=(32,), ms=(1,), variants=variants)
elif "--latest" in sys.argv:  # the half2 builds and the tiled build, groups 32 and 128, every shape
    df = B.bench_suite(device, ResultsWriter(out / "q4_gemv_latest"), group_sizes=(32, 128), ms=(1,),
                       variants=B.SUITE_VARIANTS[11:])
else:
    variants = B.SUITE_VARIANTS if "--full" in sys.argv else B.SUITE_VARIANTS[6:]
    df = B.bench_suite(device, ResultsWriter(out / "q4_gemv"), group_sizes=(32, 128), ms=(1,), variants=variants)
best = df[df.impl.isin(["workbench", "etvk"])].groupby(["shape", "group_size", "impl"]).copy_fraction.max()
print(best.unstack().round(3).to_string())
if "--tiled" in sys.argv or "--xregs" in sys.argv:
    ours = df[df.impl == "workbench"]
    print(ours.pivot_table(index="variant", columns="shape", values="copy_fraction").round(3).to_string())
    if "registers" in ours:
        print(ours.groupby(["variant", "shape"])[["registers", "occupancy", "binary_bytes"]].first().to_string())
