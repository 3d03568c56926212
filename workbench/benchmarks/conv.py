"""Benchmarks of the pointwise int8 conv (`workbench.kernels.conv_pw`): tile sweeps with registers and occupancy
columns, the device-filling shapes, the conv-gap diagnostic, torch doing the same math, and the tile story in
Turnip's statistics (Mesa's ir3 for Adreno).

    df = sweep(device, tiles=[(1, 1, 1), (1, 2, 1)], shapes=[(1, 96, 96, 64, 64)])
    conv_pw_adreno_table([(1, 1, 1), (1, 2, 1)], gpu=740)
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from ..vendors import mesa
from ..vendors import occupancy as occ
from ..kernels.conv_pw import (ALL_TILES, DEFAULT_QPARAMS, SHADER, ConvPwBuffers, ConvPwShape, ConvPwSpec, QParams,
                               check_tile, conv_pw_tile_figures, prepack_weights, random_problem, reference, tile_label)
from ..kernels.device_limits import device_limits
from ..measure import environment, keep_busy, measurement_row, progress, sample_callable, sample_recording
from ..toolchain.shaders import compile_shader
from ..vk.spirv import declared
from .pipeline_stats import statistics_columns


# ----------------------------------------------------------------------------------------------------------------
# Registers and occupancy columns: the driver's (pipeline_stats.statistics_columns) and the rule model's
# ----------------------------------------------------------------------------------------------------------------

def model_columns(tile_m, tile_n4, tile_k4, local_size=(8, 8, 1)) -> dict:
    """Rule-model columns for reference GPUs, from the tile alone (no device needed).

    `model_registers_lower_bound` = the int32 accumulators + the 32-bit registers of one inner step's operands
    (TILE_K4·(TILE_M + TILE_N4) ivec4): what must be live at once, before addressing, loop counters and the
    epilogue. Real compilers use more (measured on an H200: 43 / 68 / 157 registers for TILE_N4 = 1 / 2 / 4 at
    TILE_M = 1, occupancy.md B12), so the occupancies below are upper bounds: sm_90 (CUDA rules, 64-thread
    workgroup) and Adreno 740 (Mesa ir3 rules, vec4 registers = ceil(bound / 4))."""
    f = conv_pw_tile_figures(tile_m, tile_n4, tile_k4)
    bound = f.accumulator_registers + 4 * f.operand_registers_vec4
    threads = math.prod(local_size)
    nv = occ.nvidia_occupancy(bound, threads, arch="sm_90")
    ad = occ.adreno_occupancy(-(-bound // 4), 0, threads, gpu=740)
    return {"model_registers_lower_bound": bound,
            "model_sm90_occupancy_upper_bound": nv.occupancy, "model_sm90_limiter": nv.limiter,
            "model_a740_vec4_lower_bound": -(-bound // 4),
            "model_a740_occupancy_upper_bound": ad.occupancy, "model_a740_limiter": ad.limiter}


def tile_columns(spec: ConvPwSpec) -> dict:
    f = spec.tile_figures()
    return {"tile": tile_label(*spec.tile), "tile_m": spec.tile_m, "tile_n4": spec.tile_n4,
            "tile_k4": spec.tile_k4, "tile_widths": f.widths, "tile_out_channels": f.output_channels,
            "accumulators": f.accumulators, "accumulator_vec4": f.accumulator_registers_vec4,
            "operand_vec4": f.operand_registers_vec4, "tile_macs_per_byte": f.macs_per_byte,
            "tile_macs_per_step": f.macs_per_step, "tile_bytes_per_step": f.bytes_per_step}


# ----------------------------------------------------------------------------------------------------------------
# Sweeps and the benchmark suite
# ----------------------------------------------------------------------------------------------------------------

# ET-VK-like shapes (N, Cin, Cout, H, W): MobileNet / RefineNet-style 1x1 convs and the op test's perf configs
# (etvk.md §3.6: 48->48 and 128->128 at 128x128).
SUITE_SHAPES = ((1, 96, 96, 64, 64), (1, 128, 128, 64, 64), (1, 256, 256, 32, 32), (1, 48, 48, 128, 128))
SUITE_TILES = ALL_TILES
QUICK_SHAPES = ((1, 16, 12, 6, 10),)
QUICK_TILES = ((1, 1, 1), (1, 2, 1), (2, 1, 2))


def filling_shapes(device, waves: int = 8, channels=(256, 512), size: int = 128) -> tuple:
    """Shapes that fill the device, from its own limits: batch chosen so that the smallest tile (M1·N1, one thread
    per 4 widths x 4 output channels) launches at least `waves` x the resident threads (SMs x warps per SM x 32,
    `device_limits`); Cin = Cout in `channels`, H = W = `size`. () on CPU devices or where the device does not say
    how many threads it holds."""
    if device.info.is_cpu:
        return ()
    resident = device_limits(device).resident_threads
    if not resident:
        return ()
    shapes = []
    for c in channels:
        per_image = (c // 4) * (size // 4) * size
        shapes.append((-(-waves * resident // per_image), c, c, size, size))
    return tuple(shapes)


def filling_sweep(device, writer=None, *, show_progress: bool = True, shapes=None, tiles=SUITE_TILES,
                  torch: bool = True, **timing) -> pd.DataFrame:
    """Every tile on the device-filling shapes (`filling_shapes`), with both dot forms (OpSDotAccSat and OpSDot +
    add), outputs checked on image 0 (`max_lsb_diff`), `shape_kind` = "fills the device"; torch on the same GEMMs
    when `torch`. Empty where the device does not say how many threads it holds (CPU devices)."""
    shapes = filling_shapes(device) if shapes is None else shapes
    frames = []
    for saturate in (True, False):
        if shapes and (saturate or device.info.features.get("integer_dot_product")):
            frames.append(sweep(device, tiles, shapes, writer, show_progress, saturate=saturate, adreno_gpu=None,
                                check="first", shape_kind="fills the device", **timing))
    if torch and shapes:
        from ..bench import environment
        env = environment(device)
        rows = [r for shape in shapes for r in torch_rows(device, shape, env)]
        for r in rows:
            if writer is not None:
                writer.append(r)
        frames.append(pd.DataFrame(rows))
    if not frames:
        return pd.DataFrame()
    df = pd.concat(frames, ignore_index=True)
    df["shape_kind"] = "fills the device"
    return df



def _time_recording(device, bufs, spec, qparams, pipeline, *, min_time_s, max_time_s, target_us, max_repeats,
                    min_samples, warmup_s: float = 0.0):
    """Probe one dispatch, then chain enough dispatches per submit to reach ~target_us (ET-VK's probe-then-scale);
    returns (gpu_ns, host_ns, repeats). `warmup_s`: keep the device busy that long first (an idle GPU runs at a
    low clock: the first kernel of a sweep would otherwise look slow)."""
    with device.record(f"probe {spec.variant}") as probe:
        bufs.record(probe, spec, qparams, pipeline)
        probe.submit()
        probe_ns = probe.submit()[0].gpu_ns
    repeats = 1
    if probe_ns:
        repeats = int(min(max_repeats, max(1, target_us * 1e3 // max(probe_ns, 1.0))))
    with device.record(spec.variant) as rec:
        for _ in range(repeats):
            bufs.record(rec, spec, qparams, pipeline)
        # warm-up with the chained recording itself: it keeps the GPU busy (single dispatches leave it idle
        # between fences, and then its clock does not ramp up)
        keep_busy(rec, device, warmup_s, cpu_too=True)
        gpu, host = sample_recording(rec, repeats=repeats, min_samples=min_samples, min_time_s=min_time_s,
                                     max_time_s=max_time_s)
    return gpu, host, repeats


def measure(device, bufs: ConvPwBuffers, spec: ConvPwSpec, qparams: QParams = DEFAULT_QPARAMS, *, env=None,
            expected=None, capture_statistics: bool | None = None, min_time_s: float = 0.2,
            max_time_s: float = 10.0, min_samples: int = 10, target_us: float = 2000.0,
            max_repeats: int = 200, warmup_s: float = 0.0) -> dict:
    """Time one variant on prepared buffers → one tidy row (see `sweep` for the columns). `expected`: the int8
    reference output, to record the largest difference in LSB."""
    env = env or environment(device)
    if capture_statistics is None:
        capture_statistics = bool(device.info.features.get("pipeline_executable_properties"))
    pipeline = spec.pipeline(device, capture_statistics=capture_statistics)
    gpu, host, repeats = _time_recording(device, bufs, spec, qparams, pipeline, min_time_s=min_time_s,
                                         max_time_s=max_time_s, target_us=target_us, max_repeats=max_repeats,
                                         min_samples=min_samples, warmup_s=warmup_s)
    local = tuple(pipeline.local_size)
    shape = spec.shape
    row = measurement_row(SHADER, env, gpu, host_ns=host, bytes_moved=spec.bytes_moved(), macs=spec.macs(),
                          method="vulkan q8ta_conv2d_pw", shape=shape.label, **shape.as_dict(),
                          **tile_columns(spec), variant=spec.variant, use_dot_ext=spec.use_dot_ext, saturate=spec.saturate,
                          out_layout=spec.out_layout, relu=spec.relu, global_size=str(spec.global_size()),
                          local_size=str(local), repeats=repeats, timer="vulkan timestamps")
    row["GMAC/s"] = spec.macs() / (row["median_us"] * 1e3) if row["median_us"] > 0 else np.nan
    row["macs_per_byte"] = spec.macs() / spec.bytes_moved()
    row["thread_bytes_loaded"] = spec.bytes_loaded_by_threads()
    row.update(statistics_columns(device, pipeline, local))
    row.update(model_columns(*spec.tile, local))
    if expected is not None:
        expected = np.asarray(expected)
        got = bufs.read_output(spec, images=expected.shape[0])  # a reference of the first images only (large shapes)
        diff = np.abs(got.astype(np.int64) - expected.astype(np.int64))
        row["max_lsb_diff"] = int(diff.max())
        row["outputs_off_by_one"] = int((diff == 1).sum())
    return row


def sweep(device, tiles=SUITE_TILES, shapes=SUITE_SHAPES, writer=None, show_progress: bool = True, *,
          out_layout: str = "4W4C", use_dot_ext: bool | None = None, relu: bool = False,
          qparams: QParams = DEFAULT_QPARAMS, check: bool | str = True, min_time_s: float = 0.2,
          max_time_s: float = 10.0, min_samples: int = 10, target_us: float = 2000.0,
          max_repeats: int = 200, seed: int = 0, warmup_s: float | None = None,
          adreno_gpu: int | None = 740, saturate: bool = True, shape_kind: str | None = None) -> pd.DataFrame:
    """Grid of tiles × shapes → one tidy row per (shape, tile), appended to `writer` as it finishes (an
    interrupted sweep keeps what it finished).

    Columns: the shape and tile (`tile`, `tile_m`, `tile_n4`, `tile_k4`, `accumulators`, `tile_macs_per_byte`...),
    GPU time statistics (bench.sample_recording: `median_us`, `p10_us`, ...; `repeats` dispatches chained per
    submit, ET-VK's probe-then-scale), `GB/s` of compulsory traffic and `GOP/s` (2 ops per MAC; `GMAC/s` is
    ET-VK's "GFLOP/s"), `macs_per_byte` (op-level arithmetic intensity), driver `registers` and theoretical
    `occupancy` with its `occupancy_limiter` on this device (NaN / "n/a (CPU device)" where there are none),
    rule-model columns for sm_90 and Adreno 740 (`model_columns`), `max_lsb_diff` / `outputs_off_by_one` against
    the reference (when `check`), and the device metadata (device, driver, API version, commit, date).
    `warmup_s` (default 1 s on GPUs, 0 on CPU devices): the device is kept busy that long before the first
    tile of every shape (the host's reference and packing leave it idle between shapes: the landed H200 run
    recorded 5108 µs for a first tile whose neighbour took 1229 µs), so no first tile is timed at an idle clock.
    `adreno_gpu` (default 740): every tile also compiled by Mesa's Turnip for that Adreno on the no-op DRM shim
    (`workbench.vendors.mesa`), giving `a740_registers` (vec4), `a740_waves`, `a740_occupancy` and `a740_spills` next to
    the live device's columns; NaN with `a740_note` where `workbench compilers setup` has not run. None skips it."""
    tiles = [check_tile(*t) for t in tiles]
    shapes = [ConvPwShape.coerce(s) for s in shapes]
    if use_dot_ext is None:
        use_dot_ext = bool(device.info.features.get("integer_dot_product"))
    env = environment(device)
    if warmup_s is None:  # on an H200 the first tiles of a sweep measured 2-4x slow without this
        warmup_s = 0.0 if device.info.is_cpu else 1.0
    shape_warmup_s = warmup_s
    adreno_cols = _adreno_columns(tiles, adreno_gpu)
    rows = []
    bar = progress(range(len(tiles) * len(shapes)), "conv_pw sweep", total=len(tiles) * len(shapes),
                   enabled=show_progress)
    try:
        for shape in shapes:
            q_input, weight, scales, bias = random_problem(shape, seed)
            packed = prepack_weights(weight, scales, bias)
            checked = q_input if check != "first" else q_input[:1]
            expected = reference(checked, weight, scales, bias, qparams, relu).numpy() if check else None
            base = ConvPwSpec(shape, out_layout=out_layout, use_dot_ext=use_dot_ext, relu=relu, saturate=saturate)
            warmup_s = shape_warmup_s  # the host work above left the device idle
            with ConvPwBuffers(device, base, q_input, packed) as bufs:
                for tile in tiles:
                    if hasattr(bar, "set_postfix_str"):
                        bar.set_postfix_str(f"{shape.label} {tile_label(*tile)}")
                    row = measure(device, bufs, base.with_tile(*tile), qparams, env=env, expected=expected,
                                  min_time_s=min_time_s, max_time_s=max_time_s, min_samples=min_samples,
                                  target_us=target_us, max_repeats=max_repeats, warmup_s=warmup_s)
                    warmup_s = 0.0  # once per shape
                    row.update(adreno_cols.get(tile_label(*tile), {}))
                    if shape_kind:
                        row["shape_kind"] = shape_kind  # in the row as written (the results file has it too)
                    rows.append(row)
                    if writer is not None:
                        writer.append(row)
                    if hasattr(bar, "update"):
                        bar.update(1)
    finally:
        if hasattr(bar, "close"):
            bar.close()
    return pd.DataFrame(rows)


GAP_TILES = ((2, 2, 4), (1, 2, 4), (2, 1, 4), (4, 1, 4), (1, 1, 1))


def gap_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True) -> pd.DataFrame:
    """`workbench bench conv-gap`: what keeps the OpSDot + add conv below the int8-dot roof, measured. The best tiles
    on the device-filling shapes run twice: as they are (`operands` = "memory", checked against the reference) and
    as the load-free diagnostic build (`operands` = "registers": the same dot-product stream and epilogue without
    the operand loads and their addressing; wrong results by design, `status` says so). `load_cost` on the
    diagnostic rows = 1 - (memory GOP/s / registers GOP/s) of the same tile and shape. On CPU devices (no filling
    shapes) or with `quick`, a small shape."""
    shapes = QUICK_SHAPES if quick else (filling_shapes(device) or SUITE_SHAPES[:1])
    tiles = QUICK_TILES[:2] if quick else GAP_TILES
    use_dot_ext = bool(device.info.features.get("integer_dot_product"))
    timing = dict(min_time_s=0.01 if quick else 0.2, min_samples=3 if quick else 10,
                  target_us=200.0 if quick else 2000.0)
    env = environment(device)
    rows = []
    for shape in (ConvPwShape.coerce(s) for s in shapes):
        q_input, weight, scales, bias = random_problem(shape)
        packed = prepack_weights(weight, scales, bias)
        expected = reference(q_input[:1], weight, scales, bias, DEFAULT_QPARAMS, False).numpy()
        base = ConvPwSpec(shape, use_dot_ext=use_dot_ext, saturate=False)
        with ConvPwBuffers(device, base, q_input, packed) as bufs:
            warmup_s = 0.0 if device.info.is_cpu else 1.0
            for tile in tiles:
                pair = {}
                for operands in ("memory", "registers"):
                    spec = dataclasses.replace(base.with_tile(*tile), operands=operands)
                    row = measure(device, bufs, spec, env=env, expected=expected if operands == "memory" else None,
                                  warmup_s=warmup_s, **timing)
                    warmup_s = 0.0
                    row.update(operands=operands, shape_kind="fills the device" if not quick else "quick",
                               status="ok" if operands == "memory" else "diagnostic: results wrong by design")
                    pair[operands] = row
                regs, mem = pair["registers"]["GOP/s"], pair["memory"]["GOP/s"]
                pair["registers"]["load_cost"] = 1.0 - mem / regs if regs else np.nan
                for row in pair.values():
                    rows.append(row)
                    if writer is not None:
                        writer.append(row)
                if show_progress:
                    print(f"conv gap {shape.label} {tile_label(*tile)}: {mem / 1e3:,.1f} TOP/s with operand loads, "
                          f"{regs / 1e3:,.1f} without (the loads take {pair['registers']['load_cost']:.0%} of the time)")
    return pd.DataFrame(rows)


def _adreno_columns(tiles, gpu) -> dict:
    """tile label → Turnip's figures for that tile on Adreno `gpu` (see sweep)."""
    if gpu is None:
        return {}
    prefix = f"{mesa.check_gpu(gpu).name}_"
    if not mesa.is_set_up():
        empty = {prefix + k: np.nan for k in ("registers", "waves", "occupancy", "spills")}
        empty[prefix + "note"] = "run `workbench compilers setup` for Turnip's statistics"
        return {tile_label(*t): empty for t in tiles}
    table = conv_pw_adreno_table([tuple(t) for t in tiles], gpu=gpu)
    return {r["tile"]: {prefix + "registers": r["Registers used"], prefix + "waves": r["Max Waves Per Core"],
                        prefix + "occupancy": r["occupancy"], prefix + "spills": r["spills"]}
            for r in table.to_dict("records")}


# ----------------------------------------------------------------------------------------------------------------
# The tile story in Turnip's statistics (Mesa's ir3 compiler for Adreno on the no-op DRM shim; `compilers.mesa`
# collects the statistics and knows no kernel, this part knows the kernel)
# ----------------------------------------------------------------------------------------------------------------

ADRENO_DEFAULT_SHAPE = (1, 96, 96, 64, 64)  # (N, Cin, Cout, H, W): ET-VK's local size rule gives (8, 8, 1)


def adreno_job(tile, *, use_dot_ext: bool, shape=ADRENO_DEFAULT_SHAPE, local_size=None) -> dict:
    """One tile as a `mesa.stats_many` job: the compiled variant, the spec constants it declares, the local size
    (ET-VK's rule for `shape` unless given)."""
    tile_m, tile_n4, tile_k4 = check_tile(*tile)
    spec = ConvPwSpec(shape, tile_m=tile_m, tile_n4=tile_n4, tile_k4=tile_k4, use_dot_ext=use_dot_ext)
    spirv = compile_shader(SHADER, spec.defines())
    spec_constants = declared(spirv, spec.spec_constants())
    local = tuple(local_size) if local_size is not None else spec.resolved_local_size()
    return {"shader": spirv, "name": spec.variant, "spec_constants": spec_constants, "local_size": local}


def conv_pw_adreno_table(tiles=None, gpu=mesa.DEFAULT_GPU, *, use_dot_ext: bool = True,
                         shape=ADRENO_DEFAULT_SHAPE, local_size=None, root=None, errors: str = "keep"):
    """This kernel (the workbench's q8ta_conv2d_pw) compiled by Turnip for every tile (TILE_M, TILE_N4, TILE_K4).

    `tiles`: (tile_m, tile_n4, tile_k4) triples, default every one of ALL_TILES. The specialization constants and
    local size come from `ConvPwSpec(shape, tile)` (ET-VK's rule: (8, 8, 1) for the default shape, so 64
    invocations → ir3 keeps wave64); `local_size` overrides. One child process for all.
    Columns: tile, TILE_M, TILE_N4, TILE_K4, accumulators (int32 per thread), Registers used, Half-registers
    used, Max Waves Per Core, occupancy (= waves / 16), Instruction Count, STP Count, LDP Count, spills
    (STP + LDP), Subgroup Size, model waves (occupancy.adreno_occupancy from the reported registers), variant,
    gpu, local_size; plus "error" where Turnip failed on a tile (`errors="keep"`, the default here: the other
    tiles still get their row; "raise" raises mesa.MesaCompileError instead). Known: Mesa 25.0.7 segfaults in ir3
    (ir3_get_src_shared ← read_phi_src) on the a750 for the OpSDotAccSat path; `use_dot_ext=False` compiles.
    These are Mesa's ir3 figures, not those of Qualcomm's compiler (which the ET-VK PRs quote).
    """
    g = mesa.check_gpu(gpu)
    if g.vendor != "adreno":
        raise ValueError(f"conv_pw_adreno_table takes an Adreno GPU ({', '.join(mesa.gpu_names('adreno'))}), got "
                         f"{gpu!r}; conv_vendors.conv_pw_vendor_tiles takes every vendor")
    gpu_id = int(dict(g.env)["FD_GPU_ID"])
    tiles = [tuple(t) for t in (ALL_TILES if tiles is None else tiles)]
    jobs = [adreno_job(t, use_dot_ext=use_dot_ext, shape=shape, local_size=local_size) for t in tiles]
    results = mesa.stats_many(jobs, g, root=root, errors=errors)
    rows = []
    for tile, job, s in zip(tiles, jobs, results):
        model = mesa.summary(s, g, job["local_size"])
        waves = s.get("Max Waves Per Core")
        rows.append({
            "tile": tile_label(*tile), "TILE_M": tile[0], "TILE_N4": tile[1], "TILE_K4": tile[2],
            "accumulators": 16 * tile[0] * tile[1],
            "Registers used": s.get("Registers used"), "Half-registers used": s.get("Half-registers used"),
            "Max Waves Per Core": waves, "occupancy": None if waves is None else waves / g.max_waves,
            "Instruction Count": s.get("Instruction Count"), "STP Count": s.get("STP Count"),
            "LDP Count": s.get("LDP Count"),
            "spills": int(s.get("STP Count") or 0) + int(s.get("LDP Count") or 0),
            "Subgroup Size": s.get("Subgroup Size"), "model waves": model.get("model_waves"),
            "variant": job["name"], "gpu": gpu_id, "local_size": tuple(job["local_size"]),
        })
        if "error" in s:
            rows[-1]["error"] = s["error"]
    return pd.DataFrame(rows)


def conv_pw_tile_n4_check(gpu=mesa.DEFAULT_GPU, *, tile_m: int = 1, tile_k4: int = 1, root=None, **kw):
    """The seed claim (PR #19396: TILE_N4 2 → 1) checked with Turnip's ir3: TILE_N4 = 1 vs 2 (TILE_M = 1,
    TILE_K4 = 1 by default).

    Returns the two rows of `conv_pw_adreno_table`; `df.attrs["summary"]` says in one sentence what Turnip
    reports (registers, waves, occupancy for each), to be quoted rather than assumed. The PR's "28 registers,
    37 %" came from Qualcomm's offline compiler, a different compiler: the two need not agree.
    """
    kw.setdefault("errors", "raise")
    df = conv_pw_adreno_table([(tile_m, 1, tile_k4), (tile_m, 2, tile_k4)], gpu, root=root, **kw)
    one, two = df.iloc[0], df.iloc[1]
    df.attrs["summary"] = (
        f"{mesa.check_gpu(gpu).name} (Turnip ir3), q8ta_conv2d_pw M{tile_m}·K{tile_k4}, local size "
        f"{one['local_size']}: TILE_N4=1 → {one['Registers used']} vec4 registers, {one['Max Waves Per Core']} "
        f"waves ({one['occupancy']:.1%}); TILE_N4=2 → {two['Registers used']} registers, "
        f"{two['Max Waves Per Core']} waves ({two['occupancy']:.1%}); spills {one['spills']} / {two['spills']}.")
    return df


def torch_rows(device, shape, env=None, *, min_time_s: float = 0.2, seed: int = 0) -> list[dict]:
    """The same math done by torch on the same device: CUDA when the Vulkan device is an NVIDIA GPU and torch sees
    CUDA (torch._int_mm on int8 and a float16 conv2d), otherwise the CPU (torch._int_mm, an int32 matmul and a
    float32 conv2d; lavapipe's "GPU" is this CPU)."""
    import torch
    s = ConvPwShape.coerce(shape)
    env = env or environment(device)
    on_cuda = device.info.vendor == "NVIDIA" and torch.cuda.is_available()
    where = "cuda" if on_cuda else "cpu"
    gen = torch.Generator().manual_seed(seed)
    m, k, n = s.batch * s.height * s.width, s.in_channels, s.out_channels
    a8 = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=gen)
    b8 = torch.randint(-128, 128, (k, n), dtype=torch.int8, generator=gen)
    sync = torch.cuda.synchronize if on_cuda else None
    cases = []
    if on_cuda:
        # torch._int_mm on CUDA: m > 16, k and n multiples of 8 -> pad with zeros (same result, a little more work)
        kp, np_, mp = -(-k // 8) * 8, -(-n // 8) * 8, max(m, 17)
        a = torch.zeros((mp, kp), dtype=torch.int8)
        a[:m, :k] = a8
        b = torch.zeros((kp, np_), dtype=torch.int8)
        b[:k, :n] = b8
        a, b = a.cuda(), b.cuda()
        cases.append((f"torch._int_mm int8→int32 ({where})", lambda: torch._int_mm(a, b),
                      mp * kp + kp * np_ + 4 * mp * np_, f"padded to m={mp}, k={kp}, n={np_}"))
        x = torch.randn(s.input_sizes, generator=gen).half().cuda()
        w = torch.randn((n, k, 1, 1), generator=gen).half().cuda()
        cases.append((f"torch conv2d fp16 ({where})", lambda: torch.nn.functional.conv2d(x, w),
                      2 * (x.numel() + w.numel() + m * n), ""))
    else:
        cases.append((f"torch._int_mm int8→int32 ({where})", lambda: torch._int_mm(a8, b8),
                      m * k + k * n + 4 * m * n, ""))
        a32, b32 = a8.to(torch.int32), b8.to(torch.int32)
        cases.append((f"torch int32 matmul ({where})", lambda: a32 @ b32, 4 * (m * k + k * n + m * n), ""))
        x = torch.randn(s.input_sizes, generator=gen)
        w = torch.randn((n, k, 1, 1), generator=gen)
        cases.append((f"torch conv2d fp32 ({where})", lambda: torch.nn.functional.conv2d(x, w),
                      4 * (x.numel() + w.numel() + m * n), ""))
    rows = []
    for method, fn, nbytes, note in cases:
        samples = sample_callable(fn, sync=sync, cuda_events=on_cuda, min_time_s=min_time_s)
        row = measurement_row(SHADER, env, samples, bytes_moved=nbytes, macs=s.macs(), method=method,
                              shape=s.label, **s.as_dict(), tile="torch", repeats=1,
                              timer="cuda events" if on_cuda else "wall clock", note=note)
        row["GMAC/s"] = s.macs() / (row["median_us"] * 1e3) if row["median_us"] > 0 else np.nan
        rows.append(row)
    return rows


def bench_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True) -> pd.DataFrame:
    """The conv-pw benchmark suite: every tile on ET-VK-like shapes, plus torch doing the same math on the same
    device (rows labelled in `method`). `quick=True`: a tiny grid for tests."""
    tiles = QUICK_TILES if quick else SUITE_TILES
    shapes = QUICK_SHAPES if quick else SUITE_SHAPES
    min_time_s = 0.01 if quick else 0.2
    timing = dict(min_time_s=min_time_s, min_samples=3 if quick else 10, target_us=200.0 if quick else 2000.0)
    df = sweep(device, tiles, shapes, writer, show_progress, **timing)
    # ET-VK's tiles again with OpSDot + add instead of OpSDotAccSat (exact at these channel counts)
    wrap_tiles = [t for t in tiles if t[0] == 1 and t[1] <= 2]
    wrap = sweep(device, wrap_tiles, shapes, writer, show_progress, saturate=False, adreno_gpu=None, **timing)
    df = pd.concat([df, wrap], ignore_index=True)
    filling = () if quick else filling_shapes(device)
    if filling:
        df = pd.concat([df, filling_sweep(device, writer, show_progress=show_progress, shapes=filling,
                                          torch=False, **timing)], ignore_index=True)
    env = environment(device)
    rows = []
    for shape in tuple(shapes) + tuple(filling):
        for row in torch_rows(device, shape, env, min_time_s=min_time_s):
            rows.append(row)
            if writer is not None:
                writer.append(row)
    return pd.concat([df, pd.DataFrame(rows)], ignore_index=True)
