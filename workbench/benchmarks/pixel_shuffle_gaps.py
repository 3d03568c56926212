"""The pixel shuffle's remaining bandwidth gaps (issue 25, item 3), side by side on every layout pair, in one run.

`gaps_suite` (CLI: ``workbench bench pixel-shuffle-gaps``, rows in ``pixel_shuffle_gaps.csv``) measures at
1×256×512×512 int8 (64 MiB in, 64 MiB out; ``quick``: 1×64×64×64), with the copy at the same traffic:

* per pair, passthrough: the best block kernel of the last H200 limit run (``OLD_BEST``, role ``old-best``) and, for
  4C1W input, the staged kernel (``stage`` 4 / 8 / 16: the input through shared memory, whole-line loads, stores in
  the plain order; role ``new``);
* per pair, requantize: the old best (its thread order and math: magic, conversions or the table), the integer
  requantize (``fixed``: one multiply-add and a shift per byte, exact for these qparams) at the same thread order,
  and for 4C1W input the staged kernel with it;
* the requantize ceiling: the requant copy (the same math on a plain 16-byte copy) passthrough, magic, conversions,
  the integer path, and the integer path with saturating qparams (its clamps in);

every kernel checked against its reference on the measured device (``exact``), ``pct_of_copy`` = 100 × GB/s / the
copy's GB/s at the same traffic. A configuration that fails (compile, driver, a refused option) gets a row with
``error`` and the run goes on; each row is written as it is measured.

`pairs_suite` (CLI: ``workbench bench pixel-shuffle-pairs``; on the H200 ``tools/gpu_pixel_shuffle_pairs.py``) is the
same measurement for the pairs issue 35 still found short, 4C1W → 4C passthrough and requantize on 4C1W → 4C and
4C → 4C1W, with the variants of `PAIRS_VARIANTS` beside the gaps run's best (role ``old-best``), each kernel
measured in two rounds.

`requant_instruction_counts` is the issue-rate side of the requantize: per math, SPIR-V operation counts of the
requant copy and, where Mesa's compilers are set up, the instructions of RADV / Turnip / PanVK, as operations per
byte moved (the baseline is the same shader built with ``REQUANT_NONE``).
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from .. import layouts as L
from ..kernels.pixel_shuffle import DIFF_QP, SAME_QP, output_sizes, shape_str
from ..kernels.pixel_shuffle_block import Q8taPixelShuffleBlockSpec, Q8taRequantCopySpec
from ..measure import Rows, environment, keep_busy, measurement_row, progress, sample_recording, sampling
from ..toolchain.shaders import ShaderCompileError, compile_shader
from .copy import CopyAtTraffic
from .pixel_shuffle import _Buffers, _SharedRun, check_exact

SHAPE = (1, 256, 512, 512)
QUICK_SHAPE = (1, 64, 64, 64)
#: qparams whose requantize saturates (ratio ~3.8): the integer path keeps its clamps.
SATURATING_QP = (0.05, 0, 0.013, 5)
#: The best block kernel per pair in the H200 limit run (pixel_shuffle_limit.csv, commit 62a0663820c0): options of
#: Q8taPixelShuffleBlockSpec for passthrough and for requantize. Percent of copy there in the comments.
OLD_BEST = {
    ("4W4C", "4W4C"): ({}, {"convert": True}),                                         # 91.6 / 69.2
    ("4W4C", "4C1W"): ({"tile_co": 2, "pair_store": True}, {"tile_co": 4, "pair_store": True}),  # 91.0 / 65.4
    ("4W4C", "4C"): ({"pixel_tile": False}, {"pixel_tile": False}),                    # 90.2 / 64.8
    ("4C1W", "4W4C"): ({"tile_co": 4}, {"tile_co": 4, "convert": True}),               # 91.0 / 69.5
    ("4C1W", "4C1W"): ({"tile_co": 2, "pair_store": True}, {"tile_co": 1, "pair_store": True}),  # 90.7 / 65.5
    ("4C1W", "4C"): ({"pixel_tile": False, "tile_co": 0}, {"pixel_tile": True, "tile_co": 4, "lut": 1}),  # 82.8 / 66.1
    ("4C", "4W4C"): ({}, {"lut": 1}),                                                  # 90.9 / 76.4
    ("4C", "4C1W"): ({"tile_co": 8, "pair_store": True}, {"tile_co": 2, "pair_store": True}),  # 89.7 / 63.5
    ("4C", "4C"): ({"pixel_tile": False}, {"pixel_tile": False}),                      # 89.4 / 65.6
}
STAGES = (4, 8, 16)
REPEATS = 4  # kernel runs per recording (back to back, barriers between): the GPU stays busy between submits


def add_item(items: list, role: str, make) -> None:
    """(role, make()) onto `items`, or (role, the error message) where the spec's options refuse it."""
    try:
        items.append((role, make()))
    except ValueError as exc:
        items.append((role, f"{exc}"))


def gap_items(shape, cpu_device: bool = False, pairs=None, ceiling: bool = True) -> list[tuple[str, object]]:
    """(role, spec) of everything the suite measures at `shape`, in order; a spec the options refuse becomes
    (role, error message). CPU devices skip the shared-memory table (built per workgroup: far too slow there).
    `pairs`: (in, out) layout pairs to keep (default all 9); `ceiling`: the requant copy rows too."""
    if pairs is not None:
        unknown = [p for p in pairs if tuple(p) not in OLD_BEST]
        if unknown:
            raise ValueError(f"unknown layout pair(s) {unknown}; pairs: {list(OLD_BEST)}")
        pairs = {tuple(p) for p in pairs}
    items = []

    def add(role, make):
        add_item(items, role, make)

    for (in_l, out_l), (pass_opts, req_opts) in OLD_BEST.items():
        if pairs is not None and (in_l, out_l) not in pairs:
            continue

        def block(qp, in_l=in_l, out_l=out_l, **kw):
            return lambda: Q8taPixelShuffleBlockSpec(shape, 2, in_l, out_l, *qp, **kw)
        add("old-best", block(SAME_QP, **pass_opts))
        if in_l == "4C1W":
            for stage in STAGES:
                add("new", block(SAME_QP, stage=stage))
        if not (cpu_device and req_opts.get("lut")):
            add("old-best", block(DIFF_QP, **req_opts))
        order = {k: v for k, v in req_opts.items() if k not in ("lut", "convert")}
        add("new", block(DIFF_QP, **order, fixed=True))
        if in_l == "4C1W":
            add("new", block(DIFF_QP, stage=8, fixed=True))
    if not ceiling:
        return items
    nbytes = L.get_layout("4W4C").num_words(shape) * 4
    for qp, kw in ((SAME_QP, {}), (DIFF_QP, {}), (DIFF_QP, {"convert": True}), (DIFF_QP, {"fixed": True}),
                   (SATURATING_QP, {}), (SATURATING_QP, {"fixed": True})):
        add("ceiling", lambda qp=qp, kw=kw: Q8taRequantCopySpec(nbytes, *qp, **kw))
    return items


#: Issue 35's short pairs: (in, out, qparams name) → (the gaps run's best options (pixel_shuffle_gaps.csv, commit
#: bb02128; percent of copy there), the variants against the cause). 4C1W → 4C: the 4-width tile reads 16 rows x 32
#: bytes per load instruction and stores words; `pixel_widths=4` reads 4 rows x 128 bytes and stores whole 16-byte
#: sectors. Requantize: what these pairs add to a byte's path (transpose, addressing, shuffles) comes on top of the
#: integer requantize, so fewer integer operations per byte: the two-stage transpose (`swizzle`) and the
#: two-bytes-per-multiply line (`packed`), at every thread order.
PAIRS_VARIANTS = {
    ("4C1W", "4C", "same"): ({"pixel_tile": False, "tile_co": 0},                                        # 88.2
                             [{"pixel_widths": 4, "tile_co": 0}, {"pixel_widths": 4, "tile_co": 2},
                              {"pixel_widths": 4, "tile_co": 1}, {"pixel_widths": 4, "tile_co": 0, "local_x": 128},
                              {"pixel_widths": 4, "tile_co": 0, "local_x": 256},
                              {"pixel_tile": False, "tile_co": 0, "swizzle": True},
                              {"pixel_tile": False, "tile_co": 0, "local_x": 128}]),               # 90.6 (sweep)
    ("4C1W", "4C", "diff"): ({"pixel_tile": True, "tile_co": 4, "fixed": True},                          # 83.6
                             [{"pixel_tile": True, "tile_co": 4, "fixed": True, "packed": True},
                              *({"pixel_widths": 4, "tile_co": t, "fixed": True, "packed": pk}
                                for t in (0, 2) for pk in (False, True)),
                              {"pixel_tile": False, "tile_co": 0, "swizzle": True, "fixed": True},
                              {"pixel_tile": False, "tile_co": 0, "swizzle": True, "fixed": True, "packed": True},
                              {"pixel_tile": True, "tile_co": 0, "fixed": True, "local_x": 128}]),  # 86.1 (sweep)
    ("4C", "4C1W", "same"): ({"tile_co": 8, "pair_store": True}, []),                                    # 97.7
    ("4C", "4C1W", "diff"): ({"tile_co": 2, "pair_store": True, "fixed": True},                          # 82.4
                             [{"tile_co": t, "pair_store": True, "fixed": True, "packed": pk, "swizzle": sw}
                              for t in (2, 4, 8) for pk in (False, True) for sw in (False, True)
                              if (t, pk, sw) != (2, False, False)]),
}


def pairs_items(shape) -> list[tuple[str, object]]:
    """(role, spec) of `pairs_suite` at `shape`: per entry of PAIRS_VARIANTS the old best (role ``old-best``) and
    its variants (``new``); then the requantize ceiling (the requant copy: passthrough, the integer line, packed).
    A spec its options refuse becomes (role, error message)."""
    items = []

    def add(role, make):
        add_item(items, role, make)

    for (in_l, out_l, qp_name), (best, variants) in PAIRS_VARIANTS.items():
        qp = SAME_QP if qp_name == "same" else DIFF_QP
        for role, opts in [("old-best", best)] + [("new", v) for v in variants]:
            add(role, lambda opts=opts, in_l=in_l, out_l=out_l, qp=qp:
                Q8taPixelShuffleBlockSpec(shape, 2, in_l, out_l, *qp, **opts))
    nbytes = L.get_layout("4W4C").num_words(shape) * 4
    for qp, kw in ((SAME_QP, {}), (DIFF_QP, {"fixed": True}), (DIFF_QP, {"fixed": True, "packed": True})):
        add("ceiling", lambda qp=qp, kw=kw: Q8taRequantCopySpec(nbytes, *qp, **kw))
    return items


def pairs_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, shape=None,
                rounds: int | None = None, warm_s: float | None = None):
    """Issue 35's short pixel-shuffle pairs, every variant of PAIRS_VARIANTS beside the gaps run's best, the copy at
    the same traffic and the requantize ceiling, in one run → a tidy DataFrame (`gaps_suite`'s columns). `rounds`
    (default 2, quick 1): each kernel measured that many times in turn; `warm_s` (default 0.2 s on GPUs): each
    kernel's own load before it is sampled."""
    shape = tuple(shape or (QUICK_SHAPE if quick else SHAPE))
    return gaps_suite(device, writer, quick=quick, show_progress=show_progress, shape=shape,
                      items=pairs_items(shape), rounds=rounds or (1 if quick else 2),
                      warm_s=0.0 if quick else (0.2 if warm_s is None else warm_s))


def _compile_all(specs, workers: int = 8) -> dict:
    """Compile every distinct variant in parallel; returns {(shader, defines): error message} for failures."""
    jobs = {(s.shader, tuple(sorted(s.defines.items()))) for s in specs}

    def one(job):
        try:
            compile_shader(job[0], defines=dict(job[1]))
            return job, None
        except ShaderCompileError as exc:
            return job, str(exc).splitlines()[0]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return {job: err for job, err in pool.map(one, jobs) if err}


def _info(spec, shape, role) -> dict:
    copy_kernel = isinstance(spec, Q8taRequantCopySpec)
    opts = {} if copy_kernel else {k: getattr(spec, k) for k in ("tile_co", "pixel_tile", "pair_store", "stage",
                                                                 "pixel_widths", "swizzle")}
    math = "" if spec.passthrough else ("lut" if getattr(spec, "lut", 0) else "convert" if spec.convert else
                                        "fixed-packed" if spec.fixed and spec.packed else
                                        "fixed" if spec.fixed else "magic")
    impl = "requant-copy" if copy_kernel else "block"
    return dict(role=role, variant=spec.variant, impl=impl, path=f"{impl}-{spec.path}",
                shape=shape_str(shape), out_shape=shape_str(output_sizes(shape, 2)), r=2,
                in_layout="" if copy_kernel else spec.in_layout, out_layout="" if copy_kernel else spec.out_layout,
                pair="requant-copy" if copy_kernel else f"{spec.in_layout}->{spec.out_layout}",
                qpath=spec.path, requant_math=math, tile_co=opts.get("tile_co", 0),
                pixel_tile=bool(opts.get("pixel_tile", False)), pair_store=bool(opts.get("pair_store", False)),
                stage=int(opts.get("stage", 0)), pixel_widths=int(opts.get("pixel_widths", 1)),
                swizzle=bool(opts.get("swizzle", False)), local_size=str(spec.local_size), dtype="int8",
                qparams=f"{spec.in_scale}/{spec.in_zero_point}->{spec.out_scale}/{spec.out_zero_point}")


def gaps_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, shape=None, pairs=None,
               ceiling: bool = True, items=None, rounds: int = 1, warm_s: float = 0.0):
    """The gap kernels on every pair → a tidy DataFrame (module docstring). Columns beyond
    :func:`workbench.measure.measurement_row`'s: ``role`` (copy / old-best / new / ceiling), ``pair``, ``variant``,
    ``impl``, ``in_layout``, ``out_layout``, ``qpath``, ``requant_math``, ``tile_co``, ``pixel_tile``,
    ``pixel_widths``, ``pair_store``, ``stage``, ``swizzle``, ``qparams``, ``round``, ``copy_GBps``,
    ``copy_fraction``, ``pct_of_copy``, ``exact``, ``error`` (empty where the kernel ran). `shape` (NCHW input),
    `pairs` and `ceiling` narrow the run; `items` ((role, spec) pairs, as `gap_items` gives) replaces its list;
    `rounds`: every kernel measured that many times, in turn (column ``round``); `warm_s`: seconds of the kernel's
    own load (`measure.keep_busy`) before each one is sampled, beside sampling's own warm-up."""
    from ..vk.errors import driver_errors

    started = time.perf_counter()
    shape = tuple(shape or (QUICK_SHAPE if quick else SHAPE))
    env = environment(device)
    if items is None:
        items = gap_items(shape, cpu_device=device.info.is_cpu, pairs=pairs, ceiling=ceiling)
    specs = [s for _, s in items if not isinstance(s, str)]
    sample_kw = sampling(quick, quick_min_time_s=0.01)
    if show_progress:
        print(f"pixel-shuffle-gaps: {len(specs)} kernels at {shape_str(shape)} on {device.info.name}; compiling",
              flush=True)
    failed = _compile_all(specs)
    copies = CopyAtTraffic(device, [s.bytes_moved() for s in specs], quick=quick, show_progress=show_progress)
    rows = Rows(writer)
    rows.extend(copies.frame.assign(role="copy", impl="copy", path="copy", pair="copy").to_dict("records"))
    carry_on = (ValueError, ShaderCompileError) + driver_errors()
    buffers = _Buffers(device, shape)
    try:
        for round_, (role, spec) in progress([(r + 1, item) for r in range(rounds) for item in items],
                                             "pixel shuffle gaps", enabled=show_progress):
            if isinstance(spec, str):  # refused by its options
                rows.append(dict(env, role=role, shape=shape_str(shape), error=spec, round=round_))
                continue
            info = dict(_info(spec, shape, role), round=round_)
            error = failed.get((spec.shader, tuple(sorted(spec.defines.items()))))
            if error is None:
                try:
                    with _SharedRun(device, spec, buffers.for_spec(spec)) as run, \
                            device.record("pixel shuffle gaps") as rec:
                        if hasattr(spec, "check_device"):  # e.g. pair_store's subgroup width
                            spec.check_device(device)
                        for _ in range(REPEATS):
                            run.record(rec)
                        keep_busy(rec, device, warm_s)
                        gpu, host = sample_recording(rec, repeats=REPEATS, **sample_kw)
                    row = measurement_row(spec.shader, env, gpu, host_ns=host, bytes_moved=spec.bytes_moved(),
                                          macs=0, threads=spec.threads, global_size=str(spec.global_size(device)),
                                          repeats=REPEATS, bytes_read=spec.bytes_read(),
                                          bytes_written=spec.bytes_written(), timer="vulkan timestamps", **info)
                    copies.annotate(row, spec.bytes_moved())
                    row["pct_of_copy"] = 100.0 * row["copy_fraction"]
                    try:  # a failing check keeps the measurement: exact False, the reason in error
                        row["exact"], row["error"] = check_exact(device, spec), ""
                    except carry_on as exc:
                        row["exact"], row["error"] = False, f"exactness check: {type(exc).__name__}: {exc}"
                    rows.append(row)
                    continue
                except carry_on as exc:
                    error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            rows.append(dict(env, **info, error=error))
    finally:
        buffers.close()
    rows.extend(copies.finish().assign(role="copy", impl="copy", path="copy", pair="copy").to_dict("records"))
    df = pd.DataFrame(rows)
    if show_progress:
        print(gap_summary(df).to_string(index=False))
        print(f"pixel-shuffle-gaps: {len(df)} rows in {time.perf_counter() - started:.0f} s", flush=True)
    return df


def gap_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per pair and path, the best old-best and the best new kernel (percent of copy, variant, exact); then each
    ceiling row (the requant copy) with its math and qparams."""
    pct = df["pct_of_copy"] if "pct_of_copy" in df else pd.Series(np.nan, index=df.index)
    kernels = df[df["role"].isin(["old-best", "new"]) & pct.notna()]
    out = []
    for (pair, qpath), group in kernels.groupby(["pair", "qpath"], sort=False):
        entry = {"pair": pair, "qpath": qpath}
        for role in ("old-best", "new"):
            g = group[group["role"] == role]
            if len(g):
                best = g.loc[g["pct_of_copy"].idxmax()]
                entry[f"{role} %"] = round(float(best["pct_of_copy"]), 1)
                entry[f"{role} variant"] = best["variant"]
                entry[f"{role} exact"] = bool(best["exact"])
        out.append(entry)
    for _, row in df[(df["role"] == "ceiling") & pct.notna()].iterrows():
        out.append({"pair": "requant-copy", "qpath": f"{row['qpath']} {row['requant_math']} {row['qparams']}",
                    "new %": round(float(row["pct_of_copy"]), 1), "new variant": row["variant"],
                    "new exact": bool(row["exact"])})
    return pd.DataFrame(out)


# ---------------------------------------------------------------------------------------------------------------------
# The issue-rate side: operations per byte of each requantize math
# ---------------------------------------------------------------------------------------------------------------------

#: SPIR-V opcodes by the kind of work they ask of the ALUs (SPIR-V 1.6 numbering).
SPIRV_CLASSES = {
    "float": {127, 129, 131, 133, 136, 140, 141},                       # FNegate FAdd FSub FMul FDiv FRem FMod
    "int": {126, 128, 130, 132, 134, 135, 137, 138, 139},               # SNegate IAdd ISub IMul UDiv SDiv UMod ...
    "bitwise": set(range(194, 204)),                                    # shifts, and/or/xor/not, bitfield ops
    "convert": {109, 110, 111, 112, 113, 114, 115},                     # ConvertFToU … FConvert
    "compare_select": set(range(170, 192)) | {169},                     # comparisons, Select
    "ext": {12},                                                        # ExtInst (GLSL.std.450 min/max/clamp, …)
}


def spirv_op_counts(words) -> dict:
    """Instructions inside function bodies of a SPIR-V module, by class (SPIRV_CLASSES) and in total."""
    words = np.asarray(words, dtype=np.uint32)
    counts = dict.fromkeys(SPIRV_CLASSES, 0)
    counts["total"] = 0
    i, in_function = 5, False
    while i < len(words):
        count, opcode = int(words[i] >> 16), int(words[i] & 0xFFFF)
        if opcode == 54:  # OpFunction
            in_function = True
        elif opcode == 56:  # OpFunctionEnd
            in_function = False
        elif in_function and opcode not in (248, 249, 250):  # OpLabel, OpBranch, OpBranchConditional
            counts["total"] += 1
            for name, ops in SPIRV_CLASSES.items():
                if opcode in ops:
                    counts[name] += 1
        i += max(count, 1)
    counts["alu"] = sum(counts[k] for k in SPIRV_CLASSES)
    return counts


#: The requant copy's maths compared: name → (defines, qparams for the push-constant-free compile).
REQUANT_MATHS = {
    "none (copy)": {"REQUANT_NONE": True},
    "magic": {},
    "convert": {"REQUANT_CONVERT": True},
    "fixed": {"REQUANT_FIXED": True, "REQUANT_FIXED_CLAMP": False},
    "fixed + clamp": {"REQUANT_FIXED": True, "REQUANT_FIXED_CLAMP": True},
}
#: Bytes of input each requant-copy thread requantizes (4 ivec4).
BYTES_PER_THREAD = 64


def requant_instruction_counts(gpus=("rdna3", "a740", "mali-g610"), *, mesa: bool | None = None) -> pd.DataFrame:
    """Per requantize math: SPIR-V ALU operations of the requant copy and, with Mesa's compilers (`mesa` None:
    where set up), each GPU's instruction count; ``*_per_byte`` = (count − the REQUANT_NONE build's) / 64 bytes a
    thread requantizes. Compile-only: no device needed."""
    from ..vendors import mesa as mesa_mod
    rows = []
    spirv = {name: compile_shader("q8ta_requant_copy", defines=defines) for name, defines in REQUANT_MATHS.items()}
    for name, spv in spirv.items():
        rows.append({"math": name, "gpu": "spirv", **spirv_op_counts(spv.words)})
    use_mesa = mesa_mod.is_set_up() if mesa is None else mesa
    if use_mesa:
        stats = mesa_mod.stats_rows({name: spv.code for name, spv in spirv.items()}, gpu=list(gpus),
                                    errors="keep", local_size=(64, 1, 1))
        for _, r in stats.iterrows():
            rows.append({"math": r["name"], "gpu": r["gpu"], "total": r.get("instructions"),
                         "error": r.get("error") if isinstance(r.get("error"), str) else ""})
    df = pd.DataFrame(rows)
    for gpu, group in df.groupby("gpu"):
        base = group.loc[group["math"] == "none (copy)", "total"]
        if len(base):
            df.loc[group.index, "total_per_byte"] = (group["total"] - float(base.iloc[0])) / BYTES_PER_THREAD
        if gpu == "spirv":
            base_alu = float(group.loc[group["math"] == "none (copy)", "alu"].iloc[0])
            df.loc[group.index, "alu_per_byte"] = (group["alu"] - base_alu) / BYTES_PER_THREAD
    return df
