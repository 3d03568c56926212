"""The 4-bit GEMV's tensor-core build (`Q4GemvSpec(dequant="mma")`, issue 43 item 2) on a GPU with
VK_KHR_cooperative_matrix: correctness at awkward shapes, then its builds timed cold and hot beside the best existing
builds at Llama-3.1-8B's shapes, in one run.

    python3 tools/gpu_q4_mma.py OUT [--check-only] [--all-field] [--budget S] [--shape KxN ...] [--mma-only]

1. The device's KHR int8 cooperative-matrix list (`q4_gemv.mma_sizes`) and the MMA's N chosen from it; where the
   build cannot run, the one-line reason is printed and written (OUT/q4_gemv_mma_check.csv) and the run ends.
2. Correctness (`q4_gemv.check`: torchao's 8da4w reference in float64, the build's rounding bound) of every build
   timed below and of the M > 1 builds at shapes where N is no multiple of the 32-row tile, K no multiple of a
   batch, of the subgroups' share or of the loads ahead (AWKWARD): OUT/q4_gemv_mma_check.csv. A build that fails to
   compile, to run or to be correct is printed and left out of the timing; the others go on.
3. Timing (`benchmarks.q4_gemv.bench_suite`, cold and hot, group 32, M = 1; the suite's copy of the same traffic in
   the same regime, every row checked on the device): the MMA builds (MMA_BUILDS), their diagnostics (the weight
   stream alone, the MMAs alone, the arithmetic on cache-resident data) and, from tools/gpu_numbers.py's
   FIELD_BUILDS (read from that file, one definition), those that were best at the shape in the committed
   data/NVIDIA_H200/q4_gemv_field.csv (all of them with --all-field or without that file): OUT/q4_gemv_mma.*.
   Per shape the best of each build family, cold and hot, µs and the fraction of the copy. A shape not begun
   within --budget seconds (default 120) is left out and named; a failing suite call is retried build by build.
   --shape KxN (repeatable): those of the three shapes only; --mma-only: without the existing builds;
   --no-check: straight to the timing (the suite still checks every timed row).

On the H200 (the device tool; `.gl`, `.whl_field`, `.carry_h200` carried as for tools/gpu_numbers.py --field):

    for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; python3 -m pip install -q --no-index --no-deps \\
      --target /tmp/site .whl_field/*.whl && export PYTHONPATH=/tmp/site:$PWD; mkdir -p /tmp/h && \\
      tar xJf .carry_h200/h2.tar.xz -C /tmp/h && WORKBENCH_GLSLANG_DIR=/tmp/h/h2/glslang PYTHONUNBUFFERED=1 \\
      python3 tools/gpu_q4_mma.py $OUT
"""
import ast
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import pandas as pd

from workbench import vk
from workbench.benchmarks import q4_gemv as B
from workbench.kernels import q4_gemv as Q
from workbench.measure.results import ResultsWriter

ROOT = Path(__file__).resolve().parent.parent
MMA = {"dequant": "mma", "layout": "mma", "act_dtype": "int8", "scale_dtype": "half"}
#: The builds timed: subgroups along K (local_x / 32) x K steps loaded ahead, N = the device's choice (mma_n is set
#: per device below). The first H200 tries (4096 -> 14336): 4 subgroups x 8 steps best, 16 subgroups 1.3-1.4x
#: slower, N = 16 1.9x slower (checked for correctness only, `N16_CHECKED`).
#: The last: the same bytes loaded into the matrices from uint arrays instead of uvec4 (mma_mem; ET-VK's choice).
MMA_BUILDS = [dict(MMA, local_x=128, unroll=8), dict(MMA, local_x=256, unroll=4), dict(MMA, local_x=128, unroll=4),
              dict(MMA, local_x=256, unroll=8), dict(MMA, local_x=128, unroll=8, mma_mem="uint")]
N16_CHECKED = dict(MMA, local_x=256, unroll=4, mma_n=16)
#: Diagnostic builds of the first (wrong by design): the weight stream alone, the MMAs alone, cache-resident data;
#: the MMAs alone of the uint build.
MMA_DIAGS = [dict(MMA_BUILDS[0], diagnostic=d) for d in (2, 9, 5)] + [dict(MMA_BUILDS[-1], diagnostic=9)]
#: (N, K, group, M, mma_n or None for the device's, local_x, unroll): tests/test_q4_gemv_mma.py's awkward shapes
AWKWARD = [(100, 224, 32, 1, None, 64, 2), (70, 320, 64, 3, None, 128, 4), (33, 96, 32, 16, 16, 32, 1),
           (40, 512, 128, 2, 16, 256, 8), (1, 32, 32, 1, None, 512, 1), (257, 1056, 32, 5, None, 128, 4),
           (4099, 4128, 32, 1, None, 256, 4), (1000, 14336, 32, 4, None, 512, 2), (4096, 4096, 32, 8, None, 256, 4)]
SHAPES = [s for s in B.SHAPES if s.model == "Llama-3.1-8B"]


def field_builds() -> list[dict]:
    """tools/gpu_numbers.py's FIELD_BUILDS, evaluated from that file's assignments (it is a script: importing it
    would run it)."""
    tree = ast.parse((ROOT / "tools" / "gpu_numbers.py").read_text())
    names = {"half", "tiled", "xregs", "FIELD_BUILDS"}
    body = [node for node in tree.body if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id in names for t in node.targets)]
    scope: dict = {}
    exec(compile(ast.Module(body=body, type_ignores=[]), "gpu_numbers.py", "exec"), {"dict": dict}, scope)
    return scope["FIELD_BUILDS"]


def best_field_builds(shape, builds: list[dict]) -> list[dict]:
    """The builds of `builds` that were the fastest workbench build at `shape` (cold or hot) in the committed field
    run; all of them where that file or the shape is missing."""
    path = ROOT / "data" / "NVIDIA_H200" / "q4_gemv_field.csv"
    if not path.is_file():
        return builds
    df = pd.read_csv(path)
    w = df[(df.impl == "workbench") & (df.k == shape.k) & (df.n == shape.n) & (df.group_size == 32)]
    if not len(w):
        return builds
    best = set(w.loc[w.groupby("cache").median_us.idxmin(), "variant"])
    chosen = [b for b in builds if Q.Q4GemvSpec(shape.n, shape.k, 32, **b).variant in best]
    return chosen or builds


def family(row) -> str:
    if row.get("dequant") == "mma":
        return ("mma" + (" uint" if row.get("mma_mem") == "uint" else "")
                + {0: "", 2: " ◇ weights only", 5: " ◇ cached data", 9: " ◇ MMAs only"}[int(row["diagnostic"])])
    if row.get("dequant") == "dq8":
        return "dq8 (int dot)"
    return f"{row.get('dequant')} {row.get('layout')}" + (" x_regs" if row.get("x_regs") else "")


def say(text: str):
    print(text, flush=True)


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    budget = float(sys.argv[sys.argv.index("--budget") + 1]) if "--budget" in sys.argv else 120.0
    started = time.time()
    device = vk.get_device()
    say(f"device: {device.info.name} ({device.info.driver_name} {device.info.driver_info}), subgroup "
        f"{device.info.subgroup_size}")
    say(f"KHR int8 cooperative matrices (M, N, K): {Q.mma_sizes(device) or 'none'}")
    checks = ResultsWriter(out / "q4_gemv_mma_check")
    try:
        mma_n = Q.choose_mma_n(device, 1)
    except ValueError as error:
        say(f"no tensor-core build here: {error}")
        checks.append({"impl": "workbench", "dequant": "mma", "status": "skipped", "reason": str(error),
                       "device": device.info.name})
        checks.close()
        return 0
    n16 = Q.mma_unsupported_reason(device, 16) is None
    say(f"MMA N chosen: {mma_n} (16 x {mma_n} x 32); N = 16 {'listed' if n16 else 'not listed'}")
    builds = [dict(b, mma_n=mma_n) for b in MMA_BUILDS]
    diags = [dict(b, mma_n=mma_n) for b in MMA_DIAGS]

    # ---- 2. correctness
    failed = set()
    cases = [] if "--no-check" in sys.argv else [((1000, 2080, 32, 1), b) for b in builds
                                                 + ([N16_CHECKED] if n16 and mma_n != 16 else [])]  # every timed build at a small shape (65 groups)
    for n, k, g, m, want_n, local_x, unroll in (AWKWARD if cases else []):
        try:
            tn = want_n or Q.choose_mma_n(device, m)
            if tn == 16 and not n16:
                raise ValueError("N = 16 is not listed")
        except ValueError as error:
            say(f"  skip K={k} N={n} g{g} M={m}: {error}")
            continue
        cases.append(((n, k, g, m), dict(MMA, mma_n=tn, local_x=local_x, unroll=unroll)))
        if (n, k) in ((100, 224), (257, 1056), (4099, 4128)):  # the uint loads at a few of them
            cases.append(((n, k, g, m), dict(MMA, mma_n=tn, local_x=local_x, unroll=unroll, mma_mem="uint")))
    for (n, k, g, m), options in cases:
        label = f"K={k} N={n} g{g} M={m}"
        try:
            spec = Q.Q4GemvSpec(n, k, g, m=m, **options)
            label += f" {spec.variant}"
            t0 = time.time()
            result = Q.check(device, spec, seed=n + k)
            row = {"status": "ok", "reason": "", **result}
            if not result["correct"]:
                failed.add(tuple(sorted(options.items())))
            say(f"  {'ok ' if result['correct'] else 'BAD'} {label}: max_abs_diff {result['max_abs_diff']:.3g} "
                f"(tolerance {result['tolerance']:.3g}) {time.time() - t0:.1f} s")
        except Exception as error:  # one build's failure must not stop the others
            failed.add(tuple(sorted(options.items())))
            row = {"status": "error", "reason": f"{type(error).__name__}: {error}".splitlines()[0], "correct": False}
            say(f"  ERR {label}: {row['reason']}")
            traceback.print_exc(limit=3)
        checks.append({"impl": "workbench", "k": k, "n": n, "group_size": g, "m": m, **options, **row,
                       "device": device.info.name})
    checks.close()
    say(f"correctness: {len(cases) - len(failed)} of {len(cases)} cases ok ({time.time() - started:.0f} s)")
    if "--check-only" in sys.argv:
        return 0

    # ---- 3. timing beside the best existing builds
    timed = [b for b in builds if tuple(sorted(b.items())) not in failed]
    left_out = [b for b in builds if b not in timed]
    for b in left_out:
        say(f"  not timed (failed above): {b}")
    try:
        field = field_builds()
    except Exception as error:
        say(f"FIELD_BUILDS of tools/gpu_numbers.py not read ({error}); the MMA builds alone")
        field = []
    writer = ResultsWriter(out / "q4_gemv_mma")
    started = time.time()
    wanted = [a for i, a in enumerate(sys.argv) if i and sys.argv[i - 1] == "--shape"]
    shapes = [s for s in SHAPES if not wanted or f"{s.k}x{s.n}" in wanted]
    for i, shape in enumerate(shapes):
        if time.time() - started > budget:
            say(f"budget of {budget:.0f} s spent: left out {', '.join(f'{s.k}->{s.n}' for s in shapes[i:])}")
            break
        mine = [] if "--mma-only" in sys.argv else field if "--all-field" in sys.argv else \
            best_field_builds(shape, field)
        variants = B.buildable(shape, 32, timed + diags + mine)
        frames = []
        try:
            frames.append(B.bench_suite(device, writer, shapes=(shape,), group_sizes=(32,), ms=(1,),
                                        variants=variants, caches=("cold", "hot"), show_progress=False))
        except Exception as error:
            say(f"  {shape.k}->{shape.n}: the suite failed ({type(error).__name__}: {str(error).splitlines()[0]});"
                f" build by build")
            for b in variants:
                try:
                    frames.append(B.bench_suite(device, writer, shapes=(shape,), group_sizes=(32,), ms=(1,),
                                                variants=[b], caches=("cold", "hot"), show_progress=False))
                except Exception as error:
                    say(f"    failed: {b}: {type(error).__name__}: {str(error).splitlines()[0]}")
        if frames:
            report(shape, pd.concat(frames, ignore_index=True), time.time() - started)
    writer.close()
    say(f"done in {time.time() - started:.0f} s of timing")
    return 0


def report(shape, df: pd.DataFrame, elapsed: float):
    """Per build family and regime: the best µs, its fraction of the copy of the same traffic, the copy's µs, and
    whether every row of the family was correct (diagnostics are wrong by design)."""
    w = df[(df.impl == "workbench") & (df.status == "ok")].copy()
    if not len(w):
        say(f"{shape.k}->{shape.n}: no workbench rows")
        return
    w["family"] = [family(r) for r in w.to_dict("records")]
    w["copy_us"] = w["median_us"] * w["copy_fraction"]
    lines = []
    for (fam, cache), g in w.groupby(["family", "cache"], sort=False):
        best = g.loc[g.median_us.idxmin()]
        ok = "wrong by design" if "◇" in fam else ("all correct" if g.correct.astype(bool).all() else
                                                   f"{(~g.correct.astype(bool)).sum()} NOT correct")
        lines.append(f"  {fam:24s} {cache:4s} {best.median_us:7.2f} µs  {best.copy_fraction:6.1%} of copy "
                     f"({best.copy_us:.2f} µs)  {best.variant}  [{ok}]")
    mma = w[w.family.isin(["mma", "mma uint"])]
    other = w[~w.family.str.startswith("mma")]
    ratios = []
    for cache in ("cold", "hot"):
        a, b = mma[mma.cache == cache].median_us, other[other.cache == cache].median_us
        if len(a) and len(b):
            ratios.append(f"{cache}: best existing / mma = {b.min() / a.min():.2f}x")
    say(f"{shape.k}->{shape.n} g32 M=1 ({elapsed:.0f} s)\n" + "\n".join(lines) + ("\n  " + "; ".join(ratios)
                                                                                   if ratios else ""))


if __name__ == "__main__":
    sys.exit(main())
