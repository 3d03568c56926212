"""Benchmarks of the pixel shuffles: `bench_suite` (every implementation at ET-VK's PERF shapes and a large one,
beside torch, the decomposed chain and the copy at the same traffic) and `limit_suite` (the block kernel at the
limit: every channels-packed pair × thread order × requantize path at one large shape, the requantize math on a
plain copy, torch; every kernel also checked for exactness on the measured device).

`limit_suite` (CLI: ``workbench bench pixel-shuffle-limit``, rows in ``pixel_shuffle_limit.csv``) measures, at
1×256×512×512 int8 (64 MiB in, 64 MiB out; ``quick``: 1×64×128×128):

* ``block`` rows: :class:`Q8taPixelShuffleBlockSpec` for all 9 pairs of 4W4C / 4C1W / 4C, passthrough and
  requantize; thread orders (``tile_co``), the 4-width and the pixel tile for 4C output, the requantize paths
  (magic-number arithmetic, int↔float conversions, the two shared-memory tables);
* ``requant-copy`` rows: :class:`Q8taRequantCopySpec`, the same requantize math on a 16-byte copy (passthrough: a
  copy through the same shader) — what the math costs where every access is a contiguous run;
* ``copy`` rows (:class:`workbench.benchmarks.copy.CopyAtTraffic`) and ``torch`` rows (``F.pixel_shuffle`` on int8
  and the quantized dequantize → pixel_shuffle → quantize chain, CUDA on NVIDIA, else the CPU).

Every kernel is also run once on real data at a small awkward shape on the same device and compared with its
reference (column ``exact``): a wrong answer on the measured device shows in the results, not only in CI.
Input and output buffers are shared by all kernels of a layout (64 MiB shapes, ~100 kernels), and the shaders are
compiled in parallel before timing.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import layouts as L
from ..kernels import KernelRun
from ..kernels.pixel_shuffle import (DIFF_QP, FUSED_LAYOUTS, LOCAL_SIZE, SAME_QP, PixelShuffleRun, PixelShuffleSpec,
                                     Q8taPixelShuffleRun, Q8taPixelShuffleSpec, output_sizes, random_words, shape_str)
from ..kernels.pixel_shuffle_block import (REQUANT_COPY_SHADER, Q8taPixelShuffleBlockSpec, Q8taRequantCopyRun,
                                           Q8taRequantCopySpec, block_applies)
from ..kernels.q8ta_quantize import Q8taChainRun, Q8taPixelShuffleChainSpec
from ..measure import Rows, environment, measurement_row, progress, sample_callable, sample_recording, sampling
from ..toolchain.shaders import compile_shader
from ..measure.cache import REGIMES, default_regime, parse_regimes, rotation
from .copy import CopyAtTraffic, time_runs

#: ET-VK's PERF cases (test_q8ta_pixel_shuffle.cpp): the RefineNet decoder, inputs [1,96,H,W] → outputs
#: [1,24,32,18], [1,24,64,36], [1,24,128,72], [1,24,256,144]; r = 2.
PERF_SHAPES = (((1, 96, 16, 9), 2), ((1, 96, 32, 18), 2), ((1, 96, 64, 36), 2), ((1, 96, 128, 72), 2))
#: Large shapes: int8 tensors of 18 MiB and 64 MiB (the fp32 tensors of the chain and float kernels 4× that).
#: At 18 MiB input + output still fit in an H200's 50 MB L2; 64 MiB is DRAM-bound.
LARGE_SHAPES = (((1, 96, 512, 384), 2), ((1, 256, 512, 512), 2))
#: The large shape on a CPU device (lavapipe): 4.5 MiB.
CPU_LARGE_SHAPES = (((1, 96, 256, 192), 2),)
#: quick=True (tests): tiny shapes, one with r = 3 and C_out not a multiple of 4.
QUICK_SHAPES = (((1, 16, 4, 4), 2), ((2, 18, 3, 5), 3))
#: ET-VK's layout pairs (4W4C / 4C1W) plus 4C → 4C.
BENCH_LAYOUT_PAIRS = (("4W4C", "4W4C"), ("4W4C", "4C1W"), ("4C1W", "4W4C"), ("4C1W", "4C1W"), ("4C", "4C"))
#: The block kernel: every channels-packed pair.
BLOCK_LAYOUT_PAIRS = tuple((a, b) for a in FUSED_LAYOUTS for b in FUSED_LAYOUTS)
TORCH_OPS = ("float32", "float16", "int8", "quantized chain")


@dataclass
class _Case:
    kind: str            # "float" | "fused" | "chain" | "torch"
    shape_set: str
    spec: object = None
    shape: tuple = ()
    r: int = 2
    what: str = ""       # torch cases: which torch op


def _bench_cases(quick: bool, cpu_device: bool = False, only=None) -> list[_Case]:
    """Per shape: torch first, then the chain, then the fused kernel, then the float kernels, so that every row's
    ratios (vs torch, vs chain) can be filled in when it is measured. `only`: (shape, r) pairs to keep."""
    cases = []
    # On a CPU device (lavapipe) a 64 MiB shape costs minutes per kernel and there is no GPU cache to escape from:
    # a 4.5 MiB shape shows the same ranking at a quarter of the 18 MiB shape's time (the main job's budget).
    large = CPU_LARGE_SHAPES if cpu_device else LARGE_SHAPES
    shape_sets = [("quick", QUICK_SHAPES)] if quick else [("PERF", PERF_SHAPES), ("large", large)]
    for set_name, shapes in shape_sets:
        for shape, r in shapes:
            if only is not None and (tuple(shape), r) not in {(tuple(s), int(k)) for s, k in only}:
                continue
            for what in TORCH_OPS:
                if not (quick and what == "float16"):
                    cases.append(_Case("torch", set_name, shape=shape, r=r, what=what))
            for qp in (SAME_QP, DIFF_QP):
                spec = Q8taPixelShuffleSpec(shape, r, "4W4C", "4W4C", *qp)
                cases.append(_Case("chain", set_name, Q8taPixelShuffleChainSpec(spec)))
            pairs = (("4W4C", "4W4C"), ("4C1W", "4C")) if quick else BENCH_LAYOUT_PAIRS
            for in_l, out_l in pairs:
                cases.append(_Case("fused", set_name, Q8taPixelShuffleSpec(shape, r, in_l, out_l, *SAME_QP)))
                cases.append(_Case("fused", set_name, Q8taPixelShuffleSpec(shape, r, in_l, out_l, *DIFF_QP)))
            for qp in (SAME_QP, DIFF_QP):  # r specialized instead of ET-VK's push constant
                cases.append(_Case("fused", set_name, Q8taPixelShuffleSpec(shape, r, "4W4C", "4W4C", *qp,
                                                                           specialize_r=True)))
            block_pairs = (("4W4C", "4W4C"), ("4C1W", "4C")) if quick else BLOCK_LAYOUT_PAIRS
            for in_l, out_l in block_pairs:  # 16 words per thread, byte transpose in registers
                if not block_applies(in_l, out_l, r):
                    continue
                for qp in (SAME_QP, DIFF_QP):
                    spec = Q8taPixelShuffleBlockSpec(shape, r, in_l, out_l, *qp)
                    cases.append(_Case("fused", set_name, spec))
                    if spec.pixel_tile:  # the 4-width tile with word stores, to compare
                        cases.append(_Case("fused", set_name, Q8taPixelShuffleBlockSpec(shape, r, in_l, out_l, *qp,
                                                                                        pixel_tile=False)))
                if not cpu_device:  # shared-memory tables: built per workgroup, far too slow on a CPU device
                    cases.append(_Case("fused", set_name, Q8taPixelShuffleBlockSpec(shape, r, in_l, out_l, *DIFF_QP,
                                                                                    lut=True)))
                    cases.append(_Case("fused", set_name, Q8taPixelShuffleBlockSpec(shape, r, in_l, out_l, *DIFF_QP,
                                                                                    lut=2, local_x=256)))
                if not quick and in_l == out_l:  # the transpose as two mask-and-shift stages; local size 256
                    for qp in (SAME_QP, DIFF_QP):
                        for kw in ({"swizzle": True}, {"local_x": 256}, {"swizzle": True, "local_x": 256}):
                            cases.append(_Case("fused", set_name, Q8taPixelShuffleBlockSpec(shape, r, in_l, out_l, *qp,
                                                                                            **kw)))
            # threads in output-memory order instead of ET-VK's (W_out fastest) order
            cases.append(_Case("fused", set_name, Q8taPixelShuffleSpec(shape, r, "4W4C", "4W4C", *SAME_QP,
                                                                       output_order=True)))
            float_cases = [("buffer", "channels", "float32"), ("texture", "channels", "float32")]
            if not quick:
                float_cases += [("buffer", "width", "float32"), ("buffer", "height", "float32"),
                                ("texture", "width", "float32"), ("texture", "height", "float32"),
                                ("buffer", "channels", "float16"), ("texture", "channels", "float16")]
            for storage, packed, dtype in float_cases:
                cases.append(_Case("float", set_name, PixelShuffleSpec(shape, r, storage, packed, dtype)))
    return cases


def _repeats_for(bytes_moved: int, quick: bool) -> int:
    """Kernel runs per recording: enough to amortise tiny kernels (about 64 MiB of traffic), at most 20."""
    if quick:
        return 2
    return max(1, min(20, int(64 * 2**20 // max(bytes_moved, 1))))


def _torch_timer(device, shape, r, what):
    """torch's pixel shuffle on the same device: CUDA (events) when the Vulkan device is an NVIDIA GPU and torch
    sees CUDA, else the CPU (lavapipe's memory is host memory).  Returns (where, fn, sync, on_cuda, bytes)."""
    import torch
    import torch.nn.functional as F
    on_cuda = device.info.vendor == "NVIDIA" and torch.cuda.is_available()
    where = "cuda" if on_cuda else "cpu"
    g = torch.Generator().manual_seed(0)
    numel = int(np.prod(shape))
    if what in ("float32", "float16"):
        x = torch.randn(shape, generator=g).to(getattr(torch, what)).to(where)
        fn = lambda: F.pixel_shuffle(x, r).contiguous()  # noqa: E731
        nbytes = 2 * numel * x.element_size()
    elif what == "int8":
        x = torch.randint(-128, 128, shape, generator=g, dtype=torch.int8).to(where)
        fn = lambda: F.pixel_shuffle(x, r).contiguous()  # noqa: E731
        nbytes = 2 * numel
    else:  # the quantized chain torch runs: dequantize → pixel_shuffle → quantize_per_tensor
        s_in, zp_in, s_out, zp_out = DIFF_QP
        qx = torch.quantize_per_tensor(torch.randn(shape, generator=g).to(where), s_in, zp_in, torch.qint8)
        fn = lambda: torch.quantize_per_tensor(F.pixel_shuffle(qx.dequantize(), r), s_out, zp_out,  # noqa: E731
                                               torch.qint8)
        nbytes = 2 * numel + 16 * numel  # int8 in and out + two fp32 round trips
    sync = torch.cuda.synchronize if on_cuda else None
    return where, fn, sync, on_cuda, nbytes


def suite_shapes(quick: bool, cpu_device: bool = False) -> list[tuple]:
    """The (input NCHW, r) pairs bench_suite measures (its `shapes` argument picks among them)."""
    return [(tuple(c.shape), c.r) for c in _bench_cases(quick, cpu_device) if c.kind == "torch"
            and c.what == "int8"]


def bench_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, shapes=None, caches=None):
    """Pixel shuffle benchmarks on ``device`` → a tidy DataFrame (one row per measurement; rows also go to
    ``writer`` as they are measured).

    Cache regimes (``cache`` column, ``measure.cache``): `caches` ("cold", "hot" or both) for every kernel, or by
    default cold where a kernel's bytes fit a GPU's last-level cache (the PERF shapes; on an H200 the 18 MiB shape too;
    on a CPU device hot: `measure.cache.default_regime`)
    and hot where they do not (they stream from DRAM either way); cold rotates copies of the kernel's buffers
    spanning 4× the last-level cache. torch rows are hot (one tensor repeated).

    Rows (``impl``):

    * ``fused`` — the int8x4 kernel: ET-VK's layout pairs (and 4C → 4C) with passthrough qparams, 4W4C → 4W4C
      requantize; for 4W4C → 4W4C also the ``_rspec`` variant (r specialized instead of a push constant), both
      paths, and the ``_outorder`` variant (thread t writes output word t), passthrough;
    * ``chain`` — dequantize → float pixel shuffle → quantize (3 dispatches), passthrough and requantize qparams;
    * ``float`` — buffer / texture × W / H / C-packed fp32, and C-packed fp16;
    * ``torch`` — torch's pixel shuffle on the same device: float32, float16, int8, and the quantized
      dequantize → pixel_shuffle → quantize_per_tensor chain;
    * ``copy`` — :func:`workbench.benchmarks.copy.bench_copy` at the traffic of every kernel (a copy of half the bytes moved).

    Shapes: ET-VK's PERF shapes (RefineNet decoder outputs) and an 18 MiB int8 shape (``quick``: two tiny shapes,
    r = 2 and r = 3, few samples); ``shapes`` (a list of (input NCHW, r) from ``suite_shapes``) keeps only those
    (the distributed sweep runs one shape per work item).

    Columns beyond :func:`workbench.measure.measurement_row`'s: ``variant`` (shader variant), ``r_specialized``,
    ``output_order``,
    ``shape`` (input NCHW), ``out_shape``, ``r``, ``impl``, ``qpath`` (passthrough / requant), ``path`` (e.g.
    "fused-requant", "float-texture"), ``in_layout``, ``out_layout``, ``storage``, ``packed_dim``, ``dtype``,
    ``dispatches``, ``threads``, ``repeats``, ``bytes_read``, ``bytes_written``, ``copy_GBps`` (the best Vulkan copy
    at the same traffic: shader copy or vkCmdCopyBuffer), ``copy_fraction`` (GB/s / copy_GBps), ``shader_copy_GBps``
    and ``shader_copy_fraction`` (against the uvec4 shader copy alone: the roofline of a compute shader),
    ``torch_us`` and ``vs_torch`` (torch median / this median; > 1 = faster than torch), ``speedup_vs_chain`` on
    fused rows (chain median / fused median, same shape, qparams and layouts).
    """

    env = environment(device)
    cases = _bench_cases(quick, cpu_device=device.info.is_cpu, only=shapes)
    sample_kw = sampling(quick)

    traffic = [c.spec.bytes_moved() for c in cases if c.spec is not None]
    chosen = {b: parse_regimes(caches) if caches else (default_regime(device, b),) for b in traffic}
    regimes = tuple(r for r in REGIMES if any(r in v for v in chosen.values()))
    copies = CopyAtTraffic(device, traffic, quick=quick, show_progress=show_progress, regimes=regimes or ("hot",))
    copy_df = copies.frame
    copy_df["impl"] = "copy"
    copy_df["path"] = "copy"
    copy_df["shape_set"] = "copy"
    rows = Rows(writer)
    rows.extend(copy_df.to_dict("records"))

    torch_us: dict = {}   # (shape, what) → median µs
    chain_us: dict = {}   # (shape, qpath, in_layout, out_layout, cache) → median µs
    for case in progress(cases, "pixel shuffle", enabled=show_progress):
        if case.kind == "torch":
            where, fn, sync, on_cuda, nbytes = _torch_timer(device, case.shape, case.r, case.what)
            samples = sample_callable(fn, sync=sync, cuda_events=on_cuda, **sample_kw)
            row = measurement_row(
                f"torch.pixel_shuffle ({where})", env, samples, bytes_moved=nbytes, shape=shape_str(case.shape),
                out_shape=shape_str(output_sizes(case.shape, case.r)), r=case.r, impl="torch",
                qpath="requant" if case.what == "quantized chain" else "", path=f"torch-{case.what}",
                storage="", packed_dim="", dtype=case.what, in_layout="", out_layout="", shape_set=case.shape_set,
                dispatches=0, threads=0, repeats=1, timer="cuda events" if on_cuda else "wall clock")
            row["cache"] = "hot"
            torch_us[(row["shape"], case.what)] = row["median_us"]
            rows.append(row)
            continue
        spec = case.spec
        bytes_moved = spec.bytes_moved()
        reps = _repeats_for(bytes_moved, quick)
        runner_cls = {"float": PixelShuffleRun, "fused": Q8taPixelShuffleRun, "chain": Q8taChainRun}[case.kind]
        for regime in chosen[bytes_moved]:
            rows.append(_bench_row(device, env, case, runner_cls, regime, reps, quick, sample_kw, copies, torch_us,
                                   chain_us))
    rows.extend(copies.finish().assign(impl="copy", path="copy", shape_set="copy").to_dict("records"))
    return pd.DataFrame(rows)


def _bench_row(device, env, case, runner_cls, regime, reps, quick, sample_kw, copies, torch_us, chain_us) -> dict:
    """One kernel row of `bench_suite` in `regime`: as many runs (each its own buffers) as the rotation needs."""
    spec = case.spec
    bytes_moved = spec.bytes_moved()
    rot = rotation(device, bytes_moved, regime, quick=quick)
    gpu, host, per_recording, _ = time_runs(device, rot, lambda: runner_cls(device, spec), repeats=reps,
                                            label=f"pixel shuffle {case.kind}", **sample_kw)
    info = dict(shape_set=case.shape_set, repeats=per_recording, dispatches=spec.dispatches, threads=spec.threads,
                bytes_read=spec.bytes_read(), bytes_written=spec.bytes_written(), timer="vulkan timestamps")
    if case.kind == "float":
        kernel = "pixel_shuffle"
        info.update(variant=spec.variant, shape=shape_str(spec.in_sizes), out_shape=shape_str(spec.out_sizes),
                    r=spec.r, impl="float", qpath="", path=f"float-{spec.storage}", storage=spec.storage,
                    packed_dim=spec.packed_dim, dtype=spec.dtype, in_layout=spec.layout.name,
                    out_layout=spec.layout.name, r_specialized=True, global_size=str(spec.global_size(device)),
                    local_size=str(spec.local_size))
        torch_key = spec.dtype
    else:
        kernel = "q8ta_pixel_shuffle"
        f = spec if case.kind == "fused" else spec.fused
        block = isinstance(f, Q8taPixelShuffleBlockSpec)
        info.update(variant=f.variant if case.kind == "fused" else " -> ".join(Q8taChainRun.LABELS),
                    r_specialized=f.specialize_r if case.kind == "fused" and not block else False,
                    block=block,
                    lut=int(f.lut) if block else 0,
                    swizzle=f.swizzle if block else False,
                    pixel_tile=bool(f.pixel_tile) if block else False,
                    output_order=f.output_order if case.kind == "fused" and not block else False,
                    shape=shape_str(f.in_sizes), out_shape=shape_str(f.out_sizes), r=f.r, impl=case.kind,
                    qpath=f.path, path=f"{case.kind}-{f.path}", storage="buffer", packed_dim="channels",
                    dtype="int8", in_layout=f.in_layout, out_layout=f.out_layout,
                    global_size=str(spec.global_size(device)) if case.kind == "fused" else "",
                    local_size=str(spec.local_size if case.kind == "fused" else LOCAL_SIZE))
        torch_key = "quantized chain" if f.path == "requant" else "int8"
    row = measurement_row(kernel, env, gpu, host_ns=host, bytes_moved=bytes_moved, macs=0, **info,
                          **rot.columns())
    copies.annotate(row, bytes_moved)
    t = torch_us.get((row["shape"], torch_key), np.nan)
    row["torch_us"] = t
    row["vs_torch"] = t / row["median_us"]
    key = (row["shape"], row["qpath"], row["in_layout"], row["out_layout"], regime)
    if case.kind == "chain":
        chain_us[key] = row["median_us"]
    row["speedup_vs_chain"] = chain_us.get(key, np.nan) / row["median_us"] if case.kind == "fused" else np.nan
    return row


# ---------------------------------------------------------------------------------------------------------------------
# The limit suite: the block kernel at one large shape
# ---------------------------------------------------------------------------------------------------------------------

#: The measured shape (64 MiB int8, DRAM-bound on an H200) and the quick one (tests, lavapipe smoke runs).
SHAPE = (1, 256, 512, 512)
QUICK_SHAPE = (1, 64, 128, 128)
#: The exactness check on the measured device: C_out = 20 (C4_out = 5, not a multiple of 4 or 16), W = 13 (not a
#: multiple of 4), batch 2; C_out = 64 for the pixel tile (needs C4_out % 4 == 0) and 16-byte 4C1W accesses (W % 4);
#: C_out = 62 (C4_out 16, a partial last block) with W = 6 for the pixel tile's word loads.
CHECK_SHAPES = ((2, 80, 3, 13), (2, 256, 2, 8), (2, 248, 3, 6))
#: Thread orders measured where a side is 4C1W (channel blocks W words apart), and elsewhere.
TILES_4C1W = (0, 1, 2, 4, 8)
TILES_OTHER = (0, 4)


def block_specs(shape, cpu_device: bool = False, pairs=None) -> list[Q8taPixelShuffleBlockSpec]:
    """Every block kernel the suite measures at `shape`: per pair, passthrough and requantize at each thread order
    (TILES_4C1W where a side is 4C1W, else and on CPU devices TILES_OTHER), both tiles for 4C output where the pixel
    tile applies, and at the pair's default order the conversion requantize path and the two tables (not on CPU
    devices: a table is built per workgroup, far too slow there). `pairs`: (in, out) layout pairs to keep (default all 9)."""
    specs = []
    for in_l in FUSED_LAYOUTS:
        for out_l in FUSED_LAYOUTS:
            if pairs is not None and (in_l, out_l) not in pairs:
                continue
            tiles = TILES_4C1W if "4C1W" in (in_l, out_l) and not cpu_device else TILES_OTHER
            base = Q8taPixelShuffleBlockSpec(shape, 2, in_l, out_l, *SAME_QP)
            for pixel_tile in ((True, False) if base.pixel_tile else (False,)):
                for tile in tiles:
                    for qp in (SAME_QP, DIFF_QP):
                        specs.append(Q8taPixelShuffleBlockSpec(shape, 2, in_l, out_l, *qp, pixel_tile=pixel_tile,
                                                               tile_co=tile))
            if out_l == "4C1W" and not cpu_device and base.vector_access[1]:  # whole-sector stores into 4C1W
                for tile in (t for t in tiles if 0 < t < 32):
                    for qp in (SAME_QP, DIFF_QP):
                        specs.append(Q8taPixelShuffleBlockSpec(shape, 2, in_l, out_l, *qp, tile_co=tile,
                                                               pair_store=True))
            specs.append(Q8taPixelShuffleBlockSpec(shape, 2, in_l, out_l, *DIFF_QP, convert=True))
            if not cpu_device:
                specs.append(Q8taPixelShuffleBlockSpec(shape, 2, in_l, out_l, *DIFF_QP, lut=1))
                specs.append(Q8taPixelShuffleBlockSpec(shape, 2, in_l, out_l, *DIFF_QP, lut=2, local_x=256))
    return specs


def requant_copy_specs(shape) -> list[Q8taRequantCopySpec]:
    nbytes = L.get_layout("4W4C").num_words(shape) * 4
    return [Q8taRequantCopySpec(nbytes, *SAME_QP), Q8taRequantCopySpec(nbytes, *DIFF_QP),
            Q8taRequantCopySpec(nbytes, *DIFF_QP, convert=True)]


def check_exact(device, spec, seed: int = 0) -> bool:
    """Run `spec`'s kernel on real data at the CHECK_SHAPES it applies to and compare with its reference."""
    rng = np.random.default_rng(seed)
    if isinstance(spec, Q8taRequantCopySpec):
        s = Q8taRequantCopySpec(4096 + 16, spec.in_scale, spec.in_zero_point, spec.out_scale, spec.out_zero_point,
                                spec.convert, spec.local_x, fixed=spec.fixed,
                                packed=spec.packed)  # a partial last workgroup
        q = rng.integers(-128, 128, s.nbytes, dtype=np.int8)
        with Q8taRequantCopyRun(device, s, q) as run:
            run.run()
            return bool(np.array_equal(run.output(), s.reference(q)))
    for shape in CHECK_SHAPES:
        try:
            s = spec.with_shape(shape)
        except ValueError:  # the pixel tile needs C4_out % 4 == 0
            continue
        q = rng.integers(-128, 128, shape, dtype=np.int8)
        with Q8taPixelShuffleRun(device, s, q) as run:
            run.run()
            if not np.array_equal(run.output().numpy(), s.reference(q)):
                return False
    return True


class _SharedRun(KernelRun):
    """One kernel on buffers shared by the suite (an input per layout, an output per layout)."""

    def __init__(self, device, spec, resources):
        super().__init__(device)
        self.spec = spec
        self.resources = resources

    def record(self, rec, label=None):
        self._dispatch(rec, self.spec, self.resources, label or self.spec.variant)


class _Buffers:
    """Random int8 input words per input layout, an output buffer per output layout, their metadata UBOs."""

    def __init__(self, device, shape):
        self.device, self.shape, self.out_shape = device, tuple(shape), output_sizes(shape, 2)
        self.owned, self.inputs, self.outputs = [], {}, {}

    def _get(self, table, layout, sizes, fill):
        if layout not in table:
            lay = L.get_layout(layout)
            words = lay.num_words(sizes)
            buf = self.device.buffer(random_words(words, seed=1), name=f"psb-in-{layout}") if fill else \
                self.device.buffer(nbytes=4 * words, name=f"psb-out-{layout}")
            meta = self.device.uniform(np.frombuffer(lay.buffer_metadata(sizes), np.uint8))
            self.owned += [buf, meta]
            table[layout] = (buf, meta)
        return table[layout]

    def for_spec(self, spec):
        if isinstance(spec, Q8taRequantCopySpec):
            return [self._get(self.outputs, "4W4C", self.out_shape, False)[0],
                    self._get(self.inputs, "4W4C", self.shape, True)[0]]
        out, out_meta = self._get(self.outputs, spec.out_layout, self.out_shape, False)
        inp, in_meta = self._get(self.inputs, spec.in_layout, self.shape, True)
        return [out, inp, out_meta, in_meta]

    def close(self):
        for obj in reversed(self.owned):
            obj.close()


def _compile_all(specs):
    """Compile every distinct shader variant in parallel (glslc runs as a child process)."""
    jobs = {(s.shader, tuple(sorted(s.defines.items()))) for s in specs}
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda job: compile_shader(job[0], defines=dict(job[1])), jobs))


def limit_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, shape=None, pairs=None):
    """The block kernels at one large shape → a tidy DataFrame (module docstring). Columns beyond
    :func:`workbench.measure.measurement_row`'s: ``impl`` (block / requant-copy / copy / torch), ``variant``,
    ``shape``, ``out_shape``, ``in_layout``, ``out_layout``, ``qpath``, ``path``, ``tile_co``, ``pixel_tile``,
    ``lut``, ``requant_math`` (magic / convert / lut / ""), ``local_size``, ``threads``, ``bytes_read``,
    ``bytes_written``, ``copy_GBps``, ``copy_fraction``, ``shader_copy_GBps``, ``shader_copy_fraction``,
    ``torch_us`` / ``vs_torch`` (torch int8 pixel_shuffle for passthrough, torch's quantized chain for requant),
    ``exact`` (checked on this device at CHECK_SHAPES). `shape` (NCHW input) and `pairs` narrow the run."""

    shape = tuple(shape or (QUICK_SHAPE if quick else SHAPE))
    env = environment(device)
    specs = block_specs(shape, cpu_device=device.info.is_cpu, pairs=pairs) + requant_copy_specs(shape)
    sample_kw = sampling(quick, quick_min_time_s=0.01)
    _compile_all(specs)
    copies = CopyAtTraffic(device, [s.bytes_moved() for s in specs], quick=quick, show_progress=show_progress)
    rows = Rows(writer)
    rows.extend(copies.frame.assign(impl="copy", path="copy").to_dict("records"))
    torch_us = {}
    for what, qpath in (("int8", "passthrough"), ("quantized chain", "requant")):
        where, fn, sync, on_cuda, nbytes = _torch_timer(device, shape, 2, what)
        samples = sample_callable(fn, sync=sync, cuda_events=on_cuda, **sample_kw)
        row = measurement_row(f"torch.pixel_shuffle ({where})", env, samples, bytes_moved=nbytes,
                              shape=shape_str(shape), out_shape=shape_str(output_sizes(shape, 2)),
                              impl="torch", qpath=qpath, path=f"torch-{what}", dtype=what,
                              timer="cuda events" if on_cuda else "wall clock")
        torch_us[qpath] = row["median_us"]
        rows.append(row)
    buffers = _Buffers(device, shape)
    try:
        for spec in progress(specs, "pixel shuffle block", enabled=show_progress):
            with _SharedRun(device, spec, buffers.for_spec(spec)) as run:
                with device.record("pixel shuffle block") as rec:
                    run.record(rec)
                    gpu, host = sample_recording(rec, repeats=1, **sample_kw)
            copy_kernel = isinstance(spec, Q8taRequantCopySpec)
            math_kind = "" if spec.passthrough else ("lut" if getattr(spec, "lut", 0) else
                                                     "convert" if spec.convert else "magic")
            info = dict(variant=spec.variant, shape=shape_str(shape), out_shape=shape_str(output_sizes(shape, 2)),
                        r=2, impl="requant-copy" if copy_kernel else "block", qpath=spec.path,
                        path=f"{'requant-copy' if copy_kernel else 'block'}-{spec.path}",
                        in_layout="" if copy_kernel else spec.in_layout,
                        out_layout="" if copy_kernel else spec.out_layout,
                        tile_co=0 if copy_kernel else spec.tile_co,
                        pixel_tile=False if copy_kernel else bool(spec.pixel_tile),
                        lut=0 if copy_kernel else int(spec.lut), requant_math=math_kind, dtype="int8",
                        local_size=str(spec.local_size), global_size=str(spec.global_size(device)),
                        threads=spec.threads, dispatches=1, repeats=1, bytes_read=spec.bytes_read(),
                        bytes_written=spec.bytes_written(), timer="vulkan timestamps")
            row = measurement_row(REQUANT_COPY_SHADER if copy_kernel else "q8ta_pixel_shuffle_block", env,
                                  gpu, host_ns=host, bytes_moved=spec.bytes_moved(), macs=0, **info)
            copies.annotate(row, spec.bytes_moved())
            row["torch_us"] = torch_us[spec.path]
            row["vs_torch"] = row["torch_us"] / row["median_us"]
            row["exact"] = check_exact(device, spec)
            rows.append(row)
    finally:
        buffers.close()
    rows.extend(copies.finish().assign(impl="copy", path="copy").to_dict("records"))  # the copies again: drift
    return pd.DataFrame(rows)
