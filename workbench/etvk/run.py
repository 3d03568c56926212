"""Run ET-VK's kernels on a Vulkan device, check them against torch, time them, read their statistics, and compare
two revisions — each as tidy DataFrame rows.

    gen = Codegen(source("/path/to/executorch"))
    row = run(device, gen, "q8ta_conv2d_pw", shape=(1, 64, 32, 32))       # checked, timed
    stats_rows(device, gen, ["q8ta_conv2d_pw_float"], gpus=("a740", "mali-g610", "rdna3"))
    diff(device, "/path/to/executorch", "1ee58ed3b7^", "1ee58ed3b7", ["q8ta_conv2d_pw"])
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import torch

from .. import layouts as L
from ..kernels.copy import copy_recorder
from ..measure import Way, environment, measurement_row, sample_recording
from ..vk import Launch, Launches
from ..vk import spirv as sp
from .dispatch import Dispatch
from .families import KERNELS
from .codegen import Codegen, UnknownKernelError, source

ADRENO_GPUS = ("a740", "a750", "a730")
# `etvk stats`'s offline compilers (workbench.vendors.mesa.GPUS): three Adreno, two Mali, RDNA2 and RDNA3.
VENDOR_GPUS = ("a740", "a750", "a730", "mali-g610", "mali-g52", "rdna2", "rdna3")
# Statistic names of the two kinds of driver in one vocabulary (NVIDIA's and Turnip's own names stay as well).
INSTRUCTIONS = ("Instruction Count", "Instructions", "Binary Size")


def kernel_names() -> list[str]:
    return sorted(KERNELS)


def make(gen: Codegen, kernel: str, **options) -> Dispatch:
    if kernel not in KERNELS:
        raise UnknownKernelError(f"no ET-VK kernel {kernel!r} in the workbench; known: {', '.join(kernel_names())}")
    return KERNELS[kernel](gen, **options)


def _require_features(device, spirv) -> None:
    """Every device feature the shader's capabilities need (the shader itself says what it uses)."""
    for feature in sp.needed_features(spirv.words):
        if feature.key:
            device.require(feature.key)


def allocate(device, d: Dispatch) -> list:
    made = []
    for r in d.resources:
        if r.kind == "ubo":
            made.append(device.uniform(np.frombuffer(r.data, np.uint8), name=r.name))
        elif r.kind == "buffer":
            made.append(device.buffer(r.data, name=r.name) if r.data is not None
                        else device.buffer(nbytes=r.nbytes, name=r.name))
        else:
            img = device.image(r.extent, r.fmt, name=r.name)
            if r.data is not None:
                img.upload(np.ascontiguousarray(r.data).reshape(img.shape).astype(img.dtype))
            made.append(img)
    return made


def read_back(resource) -> np.ndarray:
    return resource.download() if hasattr(resource, "extent") else resource.download(np.uint8)


def check(d: Dispatch, got: torch.Tensor, reports: list | None = None) -> dict:
    """Correctness columns: shape, largest difference, fraction of elements that differ, pass/fail; and, when any
    element differs, `mismatch_map`: the summary of a `workbench.checks.mismatch` report (count, LSB / ULP errors, first
    wrong NCHW indices, wrong words / texels of the output layout). `reports`, when given, gets the report."""
    want = d.expected
    report = mismatch_of(d, got)
    if reports is not None:
        reports.append(report)
    if tuple(got.shape) != tuple(want.shape):
        return {"max_abs_diff": np.inf, "mismatch": 1.0, "correct": False, "mismatch_map": report.summary()}
    diff = (got.to(torch.float64) - want.to(torch.float64)).abs()
    worst = float(diff.max()) if diff.numel() else 0.0
    mismatch = float((diff > 0).double().mean()) if diff.numel() else 0.0
    # every element within atol; where max_mismatch is set, only that fraction may differ at all (1-LSB ties)
    ok = worst <= d.atol and (d.max_mismatch == 0.0 or mismatch <= d.max_mismatch)
    return {"max_abs_diff": worst, "mismatch": mismatch, "correct": bool(ok),
            "mismatch_map": "" if report.exact else report.summary()}


def mismatch_of(d: Dispatch, got: torch.Tensor):
    """The `workbench.checks.mismatch` report of a dispatch's output: int8 (LSB) for integer outputs, else float (ULP);
    mapped onto the output's layout where the dispatch names it (`out_layout`, or `layout` with `storage`)."""
    from ..checks.mismatch import mismatch_report
    want = d.expected
    kind = "float" if want.is_floating_point() else "int8"
    name = d.params.get("out_layout") or d.params.get("layout")
    layout = None
    if name and got.dim() <= 4 and tuple(got.shape) == tuple(want.shape):
        try:
            storage = d.params.get("storage") or "buffer"
            lay = L.get_layout(name, "texture" if "texture" in str(storage).lower() else "buffer")
            lay.num_units(tuple(want.shape))
            layout = lay if lay.is_int8 == (kind == "int8") else None
        except (ValueError, KeyError):
            layout = None
    if got.dim() > 4 or want.dim() > 4:
        got, want = got.reshape(-1), want.reshape(-1)
    return mismatch_report(got, want, layout=layout, dtype_kind=kind)


def launches(d: Dispatch, spirv, made: list, earlier=()) -> list:
    """The dispatch as the runtime launches it: ET-VK's earlier dispatches of the op (`earlier`: (Step, Spirv)
    pairs), then its last one, each bound to its resources of `made` (the allocated resources, in order)."""
    out = [Launch(step_spirv, [made[i] for i in step.bindings], global_size=step.global_size,
                  push_constants=step.push_constants, spec_constants=step.spec_constants,
                  local_size=step.local_size, name=step.variant) for step, step_spirv in earlier]
    bound = made if d.bindings is None else [made[i] for i in d.bindings]
    out.append(Launch(spirv, bound, global_size=d.global_size, push_constants=d.push_constants,
                      spec_constants=d.spec_constants, local_size=d.local_size, name=d.variant))
    return out


def compiled(device, gen: Codegen, d: Dispatch):
    """(the last dispatch's Spirv, [(Step, Spirv)] of the earlier ones), each checked against the device's
    features (the family's own account first: cooperative-matrix types and sizes, subgroups)."""
    spirv = gen.compile(d.variant)
    if d.requires is not None:
        d.requires(device)
    earlier = [(step, gen.compile(step.variant)) for step in d.before]
    for s in [spirv] + [step_spirv for _, step_spirv in earlier]:
        _require_features(device, s)
    return spirv, earlier


def execute(device, gen: Codegen, d: Dispatch, *, measure: bool = True, statistics: bool = False,
            min_time_s: float = 0.2, max_time_s: float = 5.0, back_to_back: int = 1, between: str = "none",
            barrier_timed: bool = False, full_barriers: bool = False, reports: list | None = None,
            cache: str | None = None, quick_cache: bool = False) -> dict:
    """Compile, bind, dispatch once, check against torch; then time (re-submitting one recording) when asked.
    `back_to_back`, `between`, `barrier_timed`, `full_barriers`: the way of timing (:class:`workbench.measure.Way`,
    used with `back_to_back` > 1): that many copies of the dispatch in one recording, the time per copy, what runs
    untimed before each copy (``"copy:MIB"``, or ``"shader:MIB"``: the workbench's compute-shader copy), where the
    start timestamps go and which barriers separate the copies. `cache` ("hot" / "cold", `measure.cache`): the
    resources allocated as many times as the regime's rotation needs, the op's dispatches of every set recorded in
    turn (at least `back_to_back` of its last dispatch), the last dispatch's time per copy; the row gets the
    regime's columns (`cache`, `cache_copies`, …); `quick_cache`: a quick run's capped rotation (`measure.cache`)."""
    way = Way(back_to_back, between, barrier_timed, full_barriers)
    if cache is not None and between != "none":
        raise ValueError(f"a cache regime rotates the dispatch's resources; it takes no between work, got {between!r}")
    spirv, earlier = compiled(device, gen, d)
    capture = statistics and bool(device.info.features.get("pipeline_executable_properties"))
    row = {"kernel": d.kernel, "variant": d.variant, **d.params, "source": gen.source.label,
           "source_commit": gen.source.commit,
           "generator": gen.source.generator_origin, "dot_product_shim": bool(spirv.defines.get("SHIM_APPLIED")),
           "global_size": "x".join(map(str, d.global_size)), "local_size": "x".join(map(str, d.local_size))}
    if earlier:
        row["before"] = "+".join(step.variant for step, _ in earlier)
    made = []
    try:
        made = allocate(device, d)
        todo = launches(d, spirv, made, earlier)
        last = len(todo) - 1
        with Launches(device, todo, capture_statistics={last} if capture else ()) as pipes, \
                device.record(label=d.variant) as rec:
            pipes.record(rec)
            rec.submit()
            got = d.decode(read_back(made[d.output]))
            row.update(check(d, got, reports))
            if capture:
                row.update(_driver_columns(pipes.pipeline_of(last).statistics()))
            if measure and cache is not None:
                gpu, host, columns = _rotated(device, d, spirv, earlier, made, cache, way, min_time_s,
                                               max_time_s, quick_cache)
                row.update(way.columns(), **columns)
            elif measure and way.back_to_back > 1:
                gpu, host = way.sample(device, pipes.record, label=d.variant, shader_copy=copy_recorder(device),
                                       min_time_s=min_time_s, max_time_s=max_time_s)
                row.update(way.columns())
            elif measure:
                gpu, host = sample_recording(rec, min_time_s=min_time_s, max_time_s=max_time_s)
            if measure:
                timed = measurement_row(d.kernel, environment(device), gpu, host_ns=host,
                                        bytes_moved=d.bytes_moved, macs=d.macs)
                timed.pop("kernel")
                row.update(timed)
            else:
                row.update(environment(device))
    finally:
        for r in made:
            r.close()
    return row


def _rotated(device, d: Dispatch, spirv, earlier, made, regime, way, min_time_s, max_time_s, quick=False):
    """(gpu_ns, host_ns, the regime's columns): `execute`'s timing in a cache regime (its docstring)."""
    from ..kernels.copy import flush_for
    from ..measure.cache import rotation, sample_rotated
    rot = rotation(device, max(int(d.bytes_moved), 16), regime, quick=quick)
    sets = [made]
    try:
        sets += [allocate(device, d) for _ in range(rot.copies - 1)]  # each set holds the dispatch's inputs
        todo = [launches(d, spirv, made_set, earlier) for made_set in sets]
        with Launches(device, [launch for one in todo for launch in one]) as pipes, flush_for(device, rot) as flush:
            def record_one(rec, i):
                first = sum(len(one) for one in todo[:i])
                for j, launch in enumerate(todo[i]):
                    launch.record(rec, pipes.pipeline_of(first + j))
            gpu, host, _ = sample_rotated(device, rot, record_one, repeats=way.back_to_back, label=d.variant,
                                          flush=flush, record_options=way.recording_options(),
                                          min_time_s=min_time_s, max_time_s=max_time_s)
    finally:
        for extra in sets[1:]:
            for r in extra:
                r.close()
    return gpu, host, rot.columns()


def run(device, gen: Codegen, kernel: str, *, measure: bool = True, statistics: bool = False, local_size=None,
        reports: list | None = None, **options) -> dict:
    """make + execute. `local_size` overrides ET-VK's pick (to study what the pick is worth); rows say so.
    `reports`, when given, gets the output's `workbench.checks.mismatch` report."""
    d = make(gen, kernel, **options)
    if local_size is not None:
        d = with_local_size(d, local_size)
    return execute(device, gen, d, measure=measure, statistics=statistics, reports=reports)


def with_local_size(d: Dispatch, local_size) -> Dispatch:
    local = tuple(int(v) for v in (tuple(local_size) + (1, 1))[:3])
    return dataclasses.replace(d, local_size=local, params={**d.params, "local_size_override": True})


def _driver_columns(stats: dict) -> dict:
    from ..vendors import occupancy as occ
    out = {f"driver: {k}": v for k, v in stats.items()}
    regs = occ.registers_from_statistics(stats)["registers"]  # the one reading of every driver's register names
    if regs is not None:
        out["registers"] = regs
    return out


# --------------------------------------------------------------------------------------------------
# Statistics without running: the live driver (where it reports them) and the offline vendor compilers (Mesa's
# Turnip for Adreno, PanVK for Mali, RADV for AMD on no-op kernel drivers: workbench.vendors.mesa)

def stats_rows(device, gen: Codegen, variants, *, gpus=VENDOR_GPUS, dispatches: dict | None = None) -> pd.DataFrame:
    """One row per (variant, compiler): every statistic the live device's driver reports (NVIDIA, RADV, …; lavapipe
    reports none: its row says so in `error`) and every one the offline compiler reports for each GPU in `gpus`
    (names of `compilers.mesa.GPUS`: "a740", "mali-g610", "rdna2", …; Adreno ints such as 740 work too). The common
    columns (`unified_statistics`): registers, register_unit, spills, instructions, waves, max_waves, occupancy,
    model_waves; `error` says why a row has none (a compiler that crashed, refused the GPU, or is not built)."""
    from ..vendors import mesa
    targets = [mesa.check_gpu(g) for g in gpus]  # an unknown name fails before any compile
    rows = []
    for variant in variants:
        spirv = gen.compile(variant)
        d = (dispatches or {}).get(variant)
        spec = d.spec_constants if d else {}
        local = d.local_size if d else (64, 1, 1)
        base = {"variant": variant, "source": gen.source.label, "spirv_bytes": len(spirv.code)}
        if device is not None:
            live = {**base, "gpu": "live", "compiler": f"{device.info.driver_name} ({device.info.name})"}
            if device.info.features.get("pipeline_executable_properties"):
                with device.pipeline(spirv, spec_constants=spec, local_size=local, capture_statistics=True,
                                     name=variant) as pipe:
                    stats = pipe.statistics()
                rows.append({**live, **unified_statistics(stats, device.info, local), **stats})
            else:
                rows.append({**live, **unified_statistics({"error": (
                    f"{device.info.driver_name} does not expose VK_KHR_pipeline_executable_properties: no driver "
                    "statistics")})})
        for g, result in zip(targets, _offline(mesa, spirv, variant, spec, local, targets)):
            rows.append({**base, "gpu": g.name, "compiler": f"{mesa.DRIVER_TITLES[g.driver]} {g.name}",
                         **unified_statistics(result, gpu=g, local_size=local),
                         **{k: v for k, v in result.items() if k != "error"}})
    return pd.DataFrame(rows)


def _offline(mesa, spirv, variant, spec, local, gpus) -> list[dict]:
    out = []
    for g in gpus:
        try:
            out.append(mesa.stats_many([spirv], g, errors="keep", spec_constants=spec, local_size=local,
                                       name=variant)[0])
        except mesa.MesaError as error:  # not set up, or the driver refuses this GPU: a row-level error
            lines = [line for line in str(error).splitlines() if line.strip()]
            out.append({"error": " ".join(lines[:1] + lines[-2:]) if len(lines) > 1 else lines[0]})
    return out


def unified_statistics(stats: dict, device_info=None, local_size=(64, 1, 1), *, gpu=None) -> dict:
    """The few columns every compiler has, under one name each (the raw statistics stay beside them): registers,
    register_unit, instructions, spills, waves, max_waves, occupancy, model_waves, and error (why there are none).

    With `gpu` (an offline compiler's GPU) they come from `compilers.mesa.summary`: the compiler's own occupancy
    figure (Turnip's "Max Waves Per Core", RADV's "Subgroups per SIMD", PanVK's "Threads") beside the rule model's.
    With `device_info` (the live device) waves and occupancy are the workbench's rule model for that device, from
    its driver's register count (`occupancy.occupancy_for_device`)."""
    from ..vendors import occupancy as occ
    empty = {"registers": None, "register_unit": None, "instructions": None, "spills": None, "waves": None,
             "max_waves": None, "occupancy": None, "model_waves": None}
    if gpu is not None:
        from ..vendors import mesa
        figures = mesa.summary(stats, gpu, local_size)
        out = dict(empty)
        out.update({k: figures.get(k) for k in empty})
        if "error" in figures:
            out["error"] = figures["error"]
        return out
    from ..vendors.mesa import empty_program
    why = stats.get("error") or empty_program(stats)
    if why:
        return {**empty, "error": why}
    figures = occ.registers_from_statistics(stats)
    instructions = next((stats[k] for k in INSTRUCTIONS if k in stats), None)
    out = {**empty, "registers": figures["registers"], "register_unit": figures["register_unit"],
           "instructions": instructions, "spills": figures["spills"], "waves": figures["driver_max_waves"]}
    if device_info is not None and figures["registers"] is not None:
        try:
            o = occ.occupancy_for_device(device_info, figures, local_size, subgroup_size=None)
            out.update(occupancy=o.occupancy, occupancy_limiter=o.limiter, model_waves=o.waves_or_warps_active,
                       max_waves=o.max_waves_or_warps)
            if out["waves"] is None:
                out["waves"] = o.waves_or_warps_active
        except ValueError as error:
            out["occupancy_limiter"] = f"n/a ({error})"
    return out


# --------------------------------------------------------------------------------------------------
# Two revisions side by side (the seed PRs' workflow)

DIFF_COLUMNS = ("registers", "waves", "occupancy", "spills", "instructions", "median_us")


def diff(device, executorch, rev_a: str, rev_b: str, kernels, *, gpus=VENDOR_GPUS, measure: bool = True,
         options: dict | None = None) -> pd.DataFrame:
    """One tidy DataFrame: for each kernel and compiler, registers, waves, spills, instruction count and GPU time at
    revision A, at B, and B / A. `kernels` are ET-VK op names (`q8ta_conv2d_pw`) with their default shapes, or
    (name, options) pairs."""
    per_rev = {}
    for rev in (rev_a, rev_b):
        gen = Codegen(source(executorch, rev=rev))
        rows = []
        for item in kernels:
            name, opts = (item, dict(options or {})) if isinstance(item, str) else (item[0], dict(item[1]))
            d = make(gen, name, **opts)
            stats = stats_rows(device, gen, [d.variant], gpus=gpus, dispatches={d.variant: d})
            timed = execute(device, gen, d, measure=measure) if device is not None else {}
            if not timed.get("correct", True):
                raise AssertionError(f"{d.variant} at {rev} does not match torch: {timed}")
            for _, s in stats.iterrows():
                rows.append({"kernel": name, "variant": d.variant, "compiler": s["compiler"],
                             **{k: s.get(k) for k in DIFF_COLUMNS[:-1]}, "error": s.get("error"), **d.params})
            rows.append({"kernel": name, "variant": d.variant, "compiler": "live device (timed)",
                         "median_us": timed.get("median_us"), "correct": timed.get("correct"),
                         "device": device.info.name if device is not None else None, **d.params})
        per_rev[rev] = pd.DataFrame(rows)
    a, b = per_rev[rev_a], per_rev[rev_b]
    keys = ["kernel", "compiler"]
    merged = a.merge(b, on=keys, how="outer", suffixes=(" A", " B"))
    out = merged[keys].copy()
    out.insert(0, "rev A", rev_a)
    out.insert(1, "rev B", rev_b)
    for col in DIFF_COLUMNS:
        ca, cb = f"{col} A", f"{col} B"
        if ca in merged:
            out[ca], out[cb] = merged[ca], merged[cb]
            va, vb = pd.to_numeric(merged[ca], errors="coerce"), pd.to_numeric(merged[cb], errors="coerce")
            out[f"{col} B/A"] = vb / va
    for col in ("variant A", "variant B", "tile_n4 A", "tile_n4 B", "shape A", "error A", "error B"):
        if col in merged:
            out[col] = merged[col]
    out = out.dropna(axis=1, how="all")
    return out
