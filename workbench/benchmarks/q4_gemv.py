"""The 4-bit group-wise GEMV of LLM decode at the bandwidth limit: the workbench's ``q4_gemv`` beside ET-VK's
``q4gsw_linear_gemv_coop__w_4x8``, at real models' decode shapes, each against the copy at the same traffic
(`workbench bench q4-gemv`, rows in ``q4_gemv.csv``).

Shapes (``SHAPES``): Llama-3.2-1B (hidden 2048, MLP 8192: K=2048 N=2048 for q / o, K=2048 N=8192 for the MLP's up
and gate, K=8192 N=2048 for down), Qwen3-0.6B (hidden 1024, MLP 3072: K=1024 N=3072, K=3072 N=1024) and
Llama-3.1-8B (hidden 4096, MLP 14336: 8–29 MB of int4 weight, where a dispatch's fixed cost is amortised), group
sizes 32 / 64 / 128, M = 1 (decode) and M = 2..4 (a few tokens at once: speculative decoding, small batches).
``quick``: two small shapes (one with N not a multiple of a work group's rows, K not of its K chunk).

Rows (``impl``):

* ``workbench`` — :class:`workbench.kernels.q4_gemv.Q4GemvSpec` at each of ``SUITE_VARIANTS`` (the variant's
  fields as columns), M = 1..4;
* ``etvk`` — where an ExecuTorch checkout is configured (``$WORKBENCH_EXECUTORCH``), ET-VK's own GEMV through
  ``workbench.etvk.run`` at M = 1 (fp32 IO, no bias, its weight packed on the host as its prepack does), and at
  M > 1 what ET-VK's ``q4gsw_linear`` dispatches there (the fp32 GEMM ``q4gsw_linear_gemm__w_4x8``); without a
  checkout one ``etvk`` row per shape says why (``status`` "skipped", ``reason``);
* ``copy`` — :class:`workbench.benchmarks.copy.CopyAtTraffic` at every kernel's traffic;
* with ``field=True`` (`--field`), the field's GEMVs through torch at the same shapes and regimes, M = 1
  (``torch-int4-tinygemm``, ``cublas-fp16``: `workbench.benchmarks.field_gemv`, timed with CUDA events), or where
  torch sees no CUDA GPU one skipped row per impl.

Both kernels are timed the same way: `_repeats_for` back-to-back dispatches in one recording (ET-VK's through
``execute(back_to_back=…)``), the time per dispatch, in each cache regime of `caches` (``measure.cache``; default
cold: every decode matrix fits a large GPU's last-level cache, so one buffer repeated would time the cache): cold
rotates as many copies of the problem (weights, scales, activations, output) as span 4× the last-level cache, one
dispatch per copy; the copy baseline is rotated alike and measured again at the end of the run (``when`` "end",
``copy_drift_pct``). Traffic (``bytes``): the int4 weight N·K/2, the scales
N·K/group · 4 (2 for fp16 scales), activations M·K · 4 and the fp32 output M·N · 4 — the same count for both.
Columns beyond :func:`workbench.measure.measurement_row`'s: ``impl``, ``model``, ``layer``, ``m``, ``k``, ``n``,
``group_size``, ``variant``, the variant's fields, ``copy_GBps`` / ``copy_fraction`` (GB/s ÷ the best Vulkan copy
at the same traffic, measured in this run), ``shader_copy_GBps`` / ``shader_copy_fraction``, ``correct`` / ``exact``
(checked on this device against the float64 torchao reference within the bound of fp32 summation order —
a float GEMV has no bit-exact answer), ``max_abs_diff``, ``tolerance``, ``status`` and ``reason``.

`vendor_rows` compares the two compiled shaders on the vendors' compilers (``workbench.vendors.mesa``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..kernels import pipeline_for
from ..kernels.q4_gemv import Q4GemvRun, Q4GemvSpec, compare, expected, random_problem
from ..measure import Rows, environment, measurement_row, progress, sampling
from ..measure.cache import default_regime, parse_regimes, rotation
from .copy import CopyAtTraffic, time_runs
from .pipeline_stats import statistics_columns

ETVK_GEMV = "q4gsw_linear_gemv_coop__w_4x8"
ETVK_GEMM = "q4gsw_linear_gemm__w_4x8"  # what q4gsw_linear dispatches at M > 1 with fp32 IO


@dataclass(frozen=True)
class Shape:
    model: str
    layer: str
    k: int
    n: int


SHAPES = (Shape("Llama-3.2-1B", "attn q/o", 2048, 2048), Shape("Llama-3.2-1B", "mlp up/gate", 2048, 8192),
          Shape("Llama-3.2-1B", "mlp down", 8192, 2048), Shape("Qwen3-0.6B", "mlp up/gate", 1024, 3072),
          Shape("Qwen3-0.6B", "mlp down", 3072, 1024), Shape("Llama-3.1-8B", "attn q/o", 4096, 4096),
          Shape("Llama-3.1-8B", "mlp up/gate", 4096, 14336), Shape("Llama-3.1-8B", "mlp down", 14336, 4096))
QUICK_SHAPES = (Shape("quick", "small", 512, 256), Shape("quick", "awkward", 96, 100))
GROUP_SIZES = (32, 64, 128)
QUICK_GROUP_SIZES = (32,)
MS = (1, 2, 3, 4)
QUICK_MS = (1, 2)
#: The workbench variants measured at every shape (the tuning space is `Q4GemvSpec`'s fields, VARIANT_CHOICES).
#: The first six are the first H200 run's; the rest its sweep's best (data/NVIDIA_H200/NOTES.md): 64 threads along
#: K per row set with subgroup reduction (2–4× the work groups of the defaults at N = 2048: every SM busy), fp32
#: (convert / magic, unroll 2) and fp16 activations + scales (half the activation loads per weight byte); the last
#: four the packed-fp16 dequantize-and-multiply (half2), the last of them one warp per work group; then the tiled
#: layout's best build (data/NVIDIA_H200/q4_gemv_tiled*.csv).
SUITE_VARIANTS = ({}, {"reduce": "subgroup"}, {"dequant": "convert"}, {"rows": 2, "local_x": 64},
                  {"rows": 8, "threads_k": 16, "local_x": 64}, {"scale_dtype": "half", "act_dtype": "half"},
                  {"threads_k": 64, "reduce": "subgroup", "dequant": "convert", "unroll": 2},
                  {"threads_k": 128, "reduce": "subgroup", "dequant": "convert"},
                  {"rows": 8, "threads_k": 64, "reduce": "subgroup"},
                  {"rows": 2, "threads_k": 64, "reduce": "subgroup", "scale_dtype": "half", "act_dtype": "half"},
                  {"threads_k": 64, "reduce": "subgroup", "scale_dtype": "half", "act_dtype": "half"},
                  {"threads_k": 64, "reduce": "subgroup", "scale_dtype": "half", "act_dtype": "half",
                   "dequant": "half2"},
                  {"rows": 2, "threads_k": 64, "reduce": "subgroup", "scale_dtype": "half", "act_dtype": "half",
                   "dequant": "half2"},
                  {"rows": 8, "threads_k": 64, "reduce": "subgroup", "scale_dtype": "half", "act_dtype": "half",
                   "dequant": "half2"},
                  {"threads_k": 32, "local_x": 32, "reduce": "subgroup", "scale_dtype": "half", "act_dtype": "half",
                   "dequant": "half2"},
                  # the tiled layout (4-row tiles, one 16-byte load = 4 rows × 8 K): its best build at every M
                  {"layout": "tiled", "threads_k": 64, "unroll": 2, "reduce": "subgroup", "scale_dtype": "half",
                   "act_dtype": "half", "dequant": "half2"})
_TILED = {"layout": "tiled", "reduce": "subgroup", "scale_dtype": "half", "act_dtype": "half", "dequant": "half2"}
QUICK_VARIANTS = ({}, {"reduce": "subgroup", "dequant": "convert"}, dict(_TILED, threads_k=64, unroll=2),
                  dict(_TILED, threads_k=128, x_regs=True, max_groups=8))


def _repeats_for(bytes_moved: int, quick: bool) -> int:
    """Dispatches per recording: enough to amortise small kernels (about 64 MiB of traffic), at most 20."""
    return 2 if quick else max(1, min(20, int(64 * 2**20 // max(bytes_moved, 1))))


def specs(quick: bool = False, *, shapes=None, group_sizes=None, ms=None,
          variants=None) -> list[tuple[Shape, Q4GemvSpec]]:
    """(shape, spec) of every workbench row, in the order measured; `shapes` (Shape), `group_sizes`, `ms` and
    `variants` (Q4GemvSpec options) replace the suite's lists."""
    out = []
    for shape in shapes or (QUICK_SHAPES if quick else SHAPES):
        for group in group_sizes or (QUICK_GROUP_SIZES if quick else GROUP_SIZES):
            for m in ms or (QUICK_MS if quick else MS):
                for options in variants or (QUICK_VARIANTS if quick else SUITE_VARIANTS):
                    out.append((shape, Q4GemvSpec(shape.n, shape.k, group, m=m, **options)))
    return out


def buildable(shape: Shape, group: int, variants) -> list[dict]:
    """The options of `variants` that make a Q4GemvSpec at `shape` and `group` (the others refused by its checks,
    e.g. a tile that does not divide the shape): what a run of several builds at several shapes measures."""
    out = []
    for options in variants:
        try:
            Q4GemvSpec(shape.n, shape.k, group, **options)
        except ValueError:
            continue
        out.append(options)
    return out


def _codegen():
    """(ET-VK's Codegen, None) from $WORKBENCH_EXECUTORCH, or (None, why there is none)."""
    from .. import etvk
    try:
        return etvk.Codegen(etvk.source()), None
    except etvk.CheckoutError as error:
        return None, str(error)


def _etvk_dispatch(gen, shape: Shape, group: int, m: int):
    from ..etvk.run import make
    return make(gen, ETVK_GEMV if m == 1 else ETVK_GEMM, shape=(m, shape.k), out_features=shape.n,
                group_size=group, bias=False)


def _pipeline_figures(device, spec: Q4GemvSpec) -> dict:
    """The driver's registers, occupancy and binary size for `spec`'s pipeline (`pipeline_stats.statistics_columns`;
    "n/a" columns where the device reports no statistics)."""
    capture = bool(device.info.features.get("pipeline_executable_properties"))
    pipeline = pipeline_for(device, spec.shader, defines=spec.defines, local_size=spec.local_size,
                            capture_statistics=capture)
    return statistics_columns(device, pipeline, spec.local_size)


def _labels(shape: Shape, group: int, m: int) -> dict:
    return {"model": shape.model, "layer": shape.layer, "m": m, "k": shape.k, "n": shape.n, "group_size": group,
            "shape": f"{m}x{shape.k}->{shape.n}"}


def bench_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, caches=None,
                field: bool = False, ggml: str | None = None, ggml_captured=None, **narrow) -> pd.DataFrame:
    """The workbench's GEMV variants and ET-VK's GEMV at decode shapes → a tidy DataFrame (module docstring).
    `caches`: the regimes measured ("cold", "hot"; default `measure.cache.default_regime` of the smallest traffic:
    cold where it fits a GPU's last-level cache, as every decode shape fits the H200's; hot on a CPU device);
    `field`: the field's GEMVs through torch too (`field_gemv`);
    `ggml`: a ggml / llama.cpp checkout: llama.cpp's Vulkan GEMV (both paths) captured and replayed (`field_ggml`;
    `ggml_captured`: the (K, N) its capture holds, default the suite's shapes);
    `narrow`: `specs`' shapes / group_sizes / ms / variants, to run part of the suite."""
    env, rows, kw = environment(device), Rows(writer), sampling(quick)
    if caches is not None:
        caches = parse_regimes(caches)
    todo = specs(quick, **narrow)
    gen, no_checkout = _codegen()
    etvk_cases = {}
    for shape, spec in todo:
        key = (shape, spec.group_size, spec.m)
        if key not in etvk_cases:
            etvk_cases[key] = _etvk_dispatch(gen, shape, spec.group_size, spec.m) if gen is not None else None
    traffic = [s.bytes_moved() for _, s in todo] + [d.bytes_moved for d in etvk_cases.values() if d is not None]
    field_cases, field_ok, field_why = [], False, ""
    if field:
        from . import field_gemv
        shapes = list(dict.fromkeys(shape for shape, _ in todo))
        groups = tuple(dict.fromkeys(spec.group_size for _, spec in todo))
        field_cases = field_gemv.cases(shapes, groups, ms=(1,))
        field_ok, field_why = field_gemv.available()
        if field_ok:
            traffic += [c.bytes_moved for c in field_cases]
    ggml_shapes = list(dict.fromkeys((shape.k, shape.n) for shape, _ in todo if shape.k % 32 == 0)) if ggml else []
    if ggml:
        from . import field_ggml
        traffic += [field_ggml.traffic(k, n) for k, n in ggml_shapes]
    if caches is None:
        caches = (default_regime(device, min(traffic)),) if traffic else ("cold",)
    copies = CopyAtTraffic(device, traffic, quick=quick, show_progress=show_progress, regimes=caches)
    rows.extend(copies.frame.assign(impl="copy").to_dict("records"))

    for (shape, group, m), d in progress(list(etvk_cases.items()), "ET-VK q4gsw", enabled=show_progress):
        labels = _labels(shape, group, m)
        if d is None:
            rows.append({"kernel": ETVK_GEMV, "impl": "etvk", **labels, "status": "skipped",
                         "reason": no_checkout, **env})
            continue
        from ..etvk.run import execute
        reps = _repeats_for(d.bytes_moved, quick)
        for regime in caches:
            row = execute(device, gen, d, measure=True, back_to_back=reps, cache=regime, quick_cache=quick,
                          min_time_s=kw["min_time_s"], max_time_s=1.0 if quick else 5.0)
            row.update(impl="etvk", **labels, status="ok", reason="", exact=bool(row.get("correct")))
            rows.append(copies.annotate(row, d.bytes_moved))

    # One random problem per shape and dtypes (every variant checked on the same data) and one reference per
    # tolerance model; the suite is ordered by shape, so only the current shape's are kept.
    problems, wants = {}, {}
    for shape, spec in progress(todo, "q4_gemv", enabled=show_progress):
        try:  # a build this device cannot run (no cooperative matrices, no fp16 ...): a skipped row that says why
            spec.check_device(device)
        except ValueError as error:
            rows.append({"kernel": "q4_gemv", "impl": "workbench", **_labels(shape, spec.group_size, spec.m),
                         "variant": spec.variant, **spec.params(), "status": "skipped", "reason": str(error), **env})
            continue
        data_key = (spec.n, spec.k, spec.group_size, spec.m, spec.act_dtype, spec.scale_dtype)
        want_key = data_key + (spec.fp16_rounding, spec.dequant == "dq8")
        if any(key[:4] != data_key[:4] for key in problems):
            problems.clear()
            wants.clear()
        if data_key not in problems:
            problems[data_key] = random_problem(spec)
        data = problems[data_key]
        if want_key not in wants:
            wants[want_key] = expected(spec, *data)
        want = wants[want_key]
        reps = _repeats_for(spec.bytes_moved(), quick)
        figures = _pipeline_figures(device, spec)
        for regime in caches:
            rot = rotation(device, spec.bytes_moved(), regime, quick=quick)

            def check(runs, want=want):  # the dispatches timed, checked (the last set, then the first)
                checked = compare(runs[-1].output(), *want)
                return compare(runs[0].output(), *want) if len(runs) > 1 and checked["correct"] else checked
            gpu, host, per_recording, checked = time_runs(  # every copy of the problem holds the same data
                device, rot, lambda: Q4GemvRun(device, spec, *data), repeats=reps, label=spec.variant, after=check,
                **kw)
            row = measurement_row("q4_gemv", env, gpu, host_ns=host, bytes_moved=spec.bytes_moved(),
                                  macs=spec.macs(), impl="workbench", **_labels(shape, spec.group_size, spec.m),
                                  variant=spec.variant, **spec.params(), local_size=str(spec.local_size),
                                  global_size=str(spec.global_size(device)), repeats=per_recording, status="ok",
                                  reason="", **checked, exact=checked["correct"], timer="vulkan timestamps",
                                  **figures, **rot.columns())
            rows.append(copies.annotate(row, spec.bytes_moved()))
    if field:
        if field_ok:
            rows.extend(field_gemv.field_rows(field_cases, caches=caches, quick=quick, env=env, copies=copies,
                                              repeats_for=_repeats_for))
        else:
            rows.extend(field_gemv.skipped_rows(field_cases, field_why, env))
    if ggml:
        labels = {(shape.k, shape.n): _labels(shape, 32, 1) for shape, _ in todo}
        for row in field_ggml.ggml_rows(device, ggml_shapes, checkout=ggml, caches=caches, quick=quick, env=env,
                                        copies=copies, captured=ggml_captured,
                                        echo=print if show_progress else (lambda text: None)):
            rows.append({**labels.get((row.get("k"), row.get("n")), {}), **row})
    rows.extend(copies.finish().assign(impl="copy").to_dict("records"))
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------------------------
# The vendors' compilers on both shaders
# ---------------------------------------------------------------------------------------------------------------------

#: Adreno (Turnip) and Mali (PanVK): the GPUs of the public decode reports (ExecuTorch #22968, react-native-executorch
#: #1478).
VENDOR_GPUS = ("a740", "a750", "mali-g610", "mali-g52")
#: The shape compiled: Llama-3.2-1B's q / o projection, group 32 (spec constants and local sizes come from it).
VENDOR_SHAPE = Shape("Llama-3.2-1B", "attn q/o", 2048, 2048)
VENDOR_VARIANTS = ({}, {"reduce": "subgroup"}, {"dequant": "convert"}, {"rows": 2, "local_x": 64},
                   # the H200's best (fp16 activations and scales, packed-fp16 dequantize-and-multiply)
                   {"rows": 2, "threads_k": 64, "reduce": "subgroup", "scale_dtype": "half", "act_dtype": "half",
                    "dequant": "half2"},
                   # the tiled layout's batched build (4-row tiles, the lop3 dequantize)
                   dict(_TILED, threads_k=64, unroll=2))
#: Weight bytes one thread of ET-VK's GEMV loads per iteration of its K loop: one ivec4 (4 K × 8 N int4).
ETVK_WEIGHT_BYTES_PER_STEP = 16


def vendor_rows(gpus=VENDOR_GPUS, *, shape: Shape = VENDOR_SHAPE, group_size: int = 32,
                variants=VENDOR_VARIANTS) -> pd.DataFrame:
    """One row per (shader, GPU) from the vendors' offline compilers (`workbench.vendors.mesa.stats_rows`): the
    workbench's GEMV at each of `variants` (Q4GemvSpec options; default ``VENDOR_VARIANTS``) and, where a checkout
    is configured, ET-VK's ``q4gsw_linear_gemv_coop__w_4x8`` variant its C++ picks for N (compiled by `workbench.etvk.codegen` with the
    dispatch's spec constants and local size). Columns: impl, variant, gpu, vendor, compiler, registers,
    register_unit, spills, instructions, weight_bytes_per_step (int4 weight bytes one thread loads per iteration of
    its K loop), instructions_per_weight_byte (the static instruction count ÷ that: loop body plus the one-off
    prologue and reduction, so a ranking, not a per-byte cost), occupancy, error."""
    from ..toolchain.shaders import compile_shader
    from ..vendors import mesa
    jobs, meta = [], []
    for options in variants:
        spec = Q4GemvSpec(shape.n, shape.k, group_size, **options)
        jobs.append({"shader": compile_shader(spec.shader, defines=spec.defines), "name": spec.variant,
                     "local_size": spec.local_size})
        meta.append(("workbench", spec.weight_bytes_per_step()))
    gen, no_checkout = _codegen()
    skipped = []
    if gen is not None:
        d = _etvk_dispatch(gen, shape, group_size, 1)
        jobs.append({"shader": gen.compile(d.variant), "name": d.variant, "local_size": d.local_size,
                     "spec_constants": d.spec_constants})
        meta.append(("etvk", ETVK_WEIGHT_BYTES_PER_STEP))
    else:
        skipped = [{"impl": "etvk", "variant": ETVK_GEMV, "gpu": g, "error": no_checkout} for g in gpus]
    df = mesa.stats_rows(jobs, list(gpus), errors="keep")
    by_name = {job["name"]: m for job, m in zip(jobs, meta)}
    df.insert(0, "impl", [by_name[n][0] for n in df["name"]])
    df = df.rename(columns={"name": "variant"})
    df["weight_bytes_per_step"] = [by_name[n][1] for n in df["variant"]]
    df["instructions_per_weight_byte"] = df["instructions"] / df["weight_bytes_per_step"]
    df["shape"] = f"1x{shape.k}->{shape.n}"
    df["group_size"] = group_size
    columns = ["impl", "variant", "gpu", "vendor", "compiler", "shape", "group_size", "local_size", "registers",
               "register_unit", "spills", "instructions", "weight_bytes_per_step", "instructions_per_weight_byte",
               "occupancy", "error"]
    df = pd.concat([df, pd.DataFrame(skipped)], ignore_index=True)
    for column in columns:
        if column not in df:
            df[column] = np.nan
    return df[columns]
