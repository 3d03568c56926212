"""The block pixel shuffle at the limit: every channels-packed pair × thread order × requantize path at one large
shape, next to the copy at the same traffic, the requantize math on a plain copy, and torch.

`bench_suite` (CLI: ``workbench bench pixel-shuffle-limit``, rows in ``pixel_shuffle_limit.csv``) measures, at
1×256×512×512 int8 (64 MiB in, 64 MiB out; ``quick``: 1×64×128×128):

* ``block`` rows: ``Q8taPixelShuffleSpec(block=True)`` for all 9 pairs of 4W4C / 4C1W / 4C, passthrough and
  requantize; thread orders (``tile_co``), the 4-width and the pixel tile for 4C output, the requantize paths
  (magic-number arithmetic, int↔float conversions, the two shared-memory tables);
* ``requant-copy`` rows: :class:`Q8taRequantCopySpec`, the same requantize math on a 16-byte copy (passthrough: a
  copy through the same shader) — what the math costs where every access is a contiguous run;
* ``copy`` rows (:class:`workbench.bench.CopyAtTraffic`) and ``torch`` rows (``F.pixel_shuffle`` on int8 and the
  quantized dequantize → pixel_shuffle → quantize chain, CUDA on NVIDIA, else the CPU).

Every kernel is also run once on real data at a small awkward shape on the same device and compared with its
reference (column ``exact``): a wrong answer on the measured device shows in the results, not only in CI.
Input and output buffers are shared by all kernels of a layout (64 MiB shapes, ~100 kernels), and the shaders are
compiled in parallel before timing.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .. import layouts as L
from ..quant import inverse_scale
from . import KernelRun, linear_global_size, pipeline_for
from .pixel_shuffle import (DIFF_QP, FUSED_LAYOUTS, SAME_QP, Q8taPixelShuffleSpec, RequantPath, _check_qparams,
                            _random_words, _shape_str, _torch_timer, output_sizes, requantize_reference)

REQUANT_COPY_SHADER = "q8ta_requant_copy"
#: The measured shape (64 MiB int8, DRAM-bound on an H200) and the quick one (tests, lavapipe smoke runs).
SHAPE = (1, 256, 512, 512)
QUICK_SHAPE = (1, 64, 128, 128)
#: The exactness check on the measured device: C_out = 20 (C4_out = 5, not a multiple of 4 or 16), W = 13 (not a
#: multiple of 4), batch 2; C_out = 64 for the pixel tile (needs C4_out % 4 == 0) and 16-byte 4C1W accesses (W % 4).
CHECK_SHAPES = ((2, 80, 3, 13), (2, 256, 2, 8))
#: Thread orders measured where a side is 4C1W (channel blocks W words apart), and elsewhere.
TILES_4C1W = (0, 1, 2, 4, 8)
TILES_OTHER = (0, 4)


@dataclass(frozen=True)
class Q8taRequantCopySpec(RequantPath):
    """int8 requantize of a flat buffer of ``nbytes`` (a multiple of 16), 4 ivec4 per thread; ``convert``: the
    int↔float conversion form, else the magic-number arithmetic. Passthrough qparams make it a plain copy."""

    nbytes: int
    in_scale: float = 1.0
    in_zero_point: int = 0
    out_scale: float = 1.0
    out_zero_point: int = 0
    convert: bool = False
    local_x: int = 64

    shader = REQUANT_COPY_SHADER
    dispatches = 1

    def __post_init__(self):
        if int(self.nbytes) <= 0 or int(self.nbytes) % 16:
            raise ValueError(f"requant copy needs a positive multiple of 16 bytes, got {self.nbytes}")
        _check_qparams(self.in_scale, self.in_zero_point, "input")
        _check_qparams(self.out_scale, self.out_zero_point, "output")

    @property
    def variant(self) -> str:
        return REQUANT_COPY_SHADER + ("_cvt" if self.convert else "")

    @property
    def defines(self) -> dict:
        return {"REQUANT_CONVERT": bool(self.convert)}

    def spec_constants(self) -> dict:
        return {}

    @property
    def local_size(self):
        return (self.local_x, 1, 1)

    @property
    def num_vec4(self) -> int:
        return int(self.nbytes) // 16

    @property
    def threads(self) -> int:
        return math.ceil(self.num_vec4 / (4 * self.local_x)) * self.local_x

    def global_size(self, device=None):
        if device is None:
            return (self.threads, 1, 1)
        return linear_global_size(device, self.threads, self.local_x)

    def push_constants(self) -> bytes:
        return (np.array([self.in_scale, inverse_scale(self.out_scale)], np.float32).tobytes()
                + np.array([self.in_zero_point, self.out_zero_point, self.num_vec4, int(self.passthrough)],
                           np.int32).tobytes())

    def bytes_read(self) -> int:
        return int(self.nbytes)

    def bytes_written(self) -> int:
        return int(self.nbytes)

    def bytes_moved(self) -> int:
        return 2 * int(self.nbytes)

    def reference(self, q) -> np.ndarray:
        a = np.asarray(q).view(np.int8).reshape(-1)
        if self.passthrough:
            return a.copy()
        return requantize_reference(a, self.in_scale, self.in_zero_point, self.out_scale, self.out_zero_point)


class Q8taRequantCopyRun(KernelRun):
    """The requant copy on a device; ``q``: int8 array of ``spec.nbytes`` values (None: random)."""

    def __init__(self, device, spec: Q8taRequantCopySpec, q=None, seed: int = 0):
        super().__init__(device)
        self.spec = spec
        try:
            words = _random_words(spec.nbytes // 4, seed) if q is None else \
                np.ascontiguousarray(np.asarray(q, dtype=np.int8).reshape(-1)).view(np.int32)
            if words.size * 4 != spec.nbytes:
                raise ValueError(f"requant copy input: expected {spec.nbytes} int8 values, got {words.size * 4}")
            self.inp = self._own(device.buffer(words, name="rqcopy-in"))
            self.out = self._own(device.buffer(nbytes=spec.nbytes, name="rqcopy-out"))
        except Exception:
            self.close()
            raise

    def record(self, rec, label: str | None = None):
        self._dispatch(rec, self.spec, [self.out, self.inp], label or self.spec.variant)

    def output(self) -> np.ndarray:
        return self.out.download(np.int32).view(np.int8)


# ---------------------------------------------------------------------------------------------------------------------
# The suite
# ---------------------------------------------------------------------------------------------------------------------

def block_specs(shape, cpu_device: bool = False, pairs=None) -> list[Q8taPixelShuffleSpec]:
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
            base = Q8taPixelShuffleSpec(shape, 2, in_l, out_l, *SAME_QP, block=True)
            for pixel_tile in ((True, False) if base.pixel_tile else (False,)):
                for tile in tiles:
                    for qp in (SAME_QP, DIFF_QP):
                        specs.append(Q8taPixelShuffleSpec(shape, 2, in_l, out_l, *qp, block=True,
                                                          pixel_tile=pixel_tile, tile_co=tile))
            if out_l == "4C1W" and not cpu_device and base.vector_access[1]:  # whole-sector stores into 4C1W
                for tile in (t for t in tiles if 0 < t < 32):
                    for qp in (SAME_QP, DIFF_QP):
                        specs.append(Q8taPixelShuffleSpec(shape, 2, in_l, out_l, *qp, block=True, tile_co=tile,
                                                          pair_store=True))
            specs.append(Q8taPixelShuffleSpec(shape, 2, in_l, out_l, *DIFF_QP, block=True, convert=True))
            if not cpu_device:
                specs.append(Q8taPixelShuffleSpec(shape, 2, in_l, out_l, *DIFF_QP, block=True, lut=1))
                specs.append(Q8taPixelShuffleSpec(shape, 2, in_l, out_l, *DIFF_QP, block=True, lut=2, local_x=256))
    return specs


def requant_copy_specs(shape) -> list[Q8taRequantCopySpec]:
    nbytes = L.get_layout("4W4C").num_words(shape) * 4
    return [Q8taRequantCopySpec(nbytes, *SAME_QP), Q8taRequantCopySpec(nbytes, *DIFF_QP),
            Q8taRequantCopySpec(nbytes, *DIFF_QP, convert=True)]


def _with_shape(spec, shape):
    """The same block kernel (variant, options, qparams) at another shape."""
    return Q8taPixelShuffleSpec(shape, 2, spec.in_layout, spec.out_layout, spec.in_scale, spec.in_zero_point,
                                spec.out_scale, spec.out_zero_point, block=True, lut=spec.lut, swizzle=spec.swizzle,
                                local_x=spec.local_x, pixel_tile=spec.pixel_tile, tile_co=spec.tile_co,
                                convert=spec.convert, pair_store=spec.pair_store)


def check_exact(device, spec, seed: int = 0) -> bool:
    """Run `spec`'s kernel on real data at the CHECK_SHAPES it applies to and compare with its reference."""
    from .pixel_shuffle import Q8taPixelShuffleRun
    rng = np.random.default_rng(seed)
    if isinstance(spec, Q8taRequantCopySpec):
        s = Q8taRequantCopySpec(4096 + 16, spec.in_scale, spec.in_zero_point, spec.out_scale, spec.out_zero_point,
                                spec.convert, spec.local_x)  # a partial last workgroup
        q = rng.integers(-128, 128, s.nbytes, dtype=np.int8)
        with Q8taRequantCopyRun(device, s, q) as run:
            run.run()
            return bool(np.array_equal(run.output(), s.reference(q)))
    for shape in CHECK_SHAPES:
        try:
            s = _with_shape(spec, shape)
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
            buf = self.device.buffer(_random_words(words, seed=1), name=f"psb-in-{layout}") if fill else \
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
    from ..shaders import compile_shader
    jobs = {(s.shader, tuple(sorted(s.defines.items()))) for s in specs}
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda job: compile_shader(job[0], defines=dict(job[1])), jobs))


def bench_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, shape=None, pairs=None):
    """The block kernels at one large shape → a tidy DataFrame (module docstring). Columns beyond
    :func:`workbench.bench.measurement_row`'s: ``impl`` (block / requant-copy / copy / torch), ``variant``,
    ``shape``, ``out_shape``, ``in_layout``, ``out_layout``, ``qpath``, ``path``, ``tile_co``, ``pixel_tile``,
    ``lut``, ``requant_math`` (magic / convert / lut / ""), ``local_size``, ``threads``, ``bytes_read``,
    ``bytes_written``, ``copy_GBps``, ``copy_fraction``, ``shader_copy_GBps``, ``shader_copy_fraction``,
    ``torch_us`` / ``vs_torch`` (torch int8 pixel_shuffle for passthrough, torch's quantized chain for requant),
    ``exact`` (checked on this device at CHECK_SHAPES). `shape` (NCHW input) and `pairs` narrow the run."""
    import pandas as pd

    from .. import bench

    shape = tuple(shape or (QUICK_SHAPE if quick else SHAPE))
    env = bench.environment(device)
    specs = block_specs(shape, cpu_device=device.info.is_cpu, pairs=pairs) + requant_copy_specs(shape)
    sample_kw = dict(min_time_s=0.01, min_samples=3, max_samples=5, warmup=1) if quick else dict(min_time_s=0.2)
    _compile_all(specs)
    copies = bench.CopyAtTraffic(device, [s.bytes_moved() for s in specs], quick=quick, show_progress=show_progress)
    rows = []

    def emit(row):
        rows.append(row)
        if writer is not None:
            writer.append(row)

    for row in copies.frame.assign(impl="copy", path="copy").to_dict("records"):
        emit(row)
    torch_us = {}
    for what, qpath in (("int8", "passthrough"), ("quantized chain", "requant")):
        where, fn, sync, on_cuda, nbytes = _torch_timer(device, shape, 2, what)
        samples = bench.sample_callable(fn, sync=sync, cuda_events=on_cuda, **sample_kw)
        row = bench.measurement_row(f"torch.pixel_shuffle ({where})", env, samples, bytes_moved=nbytes,
                                    shape=_shape_str(shape), out_shape=_shape_str(output_sizes(shape, 2)),
                                    impl="torch", qpath=qpath, path=f"torch-{what}", dtype=what,
                                    timer="cuda events" if on_cuda else "wall clock")
        torch_us[qpath] = row["median_us"]
        emit(row)
    buffers = _Buffers(device, shape)
    try:
        for spec in bench.progress(specs, "pixel shuffle block", enabled=show_progress):
            with _SharedRun(device, spec, buffers.for_spec(spec)) as run:
                with device.record("pixel shuffle block") as rec:
                    run.record(rec)
                    gpu, host = bench.sample_recording(rec, repeats=1, **sample_kw)
            copy_kernel = isinstance(spec, Q8taRequantCopySpec)
            math_kind = "" if spec.passthrough else ("lut" if getattr(spec, "lut", 0) else
                                                     "convert" if spec.convert else "magic")
            info = dict(variant=spec.variant, shape=_shape_str(shape), out_shape=_shape_str(output_sizes(shape, 2)),
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
            row = bench.measurement_row(REQUANT_COPY_SHADER if copy_kernel else "q8ta_pixel_shuffle_block", env,
                                        gpu, host_ns=host, bytes_moved=spec.bytes_moved(), macs=0, **info)
            copies.annotate(row, spec.bytes_moved())
            row["torch_us"] = torch_us[spec.path]
            row["vs_torch"] = row["torch_us"] / row["median_us"]
            row["exact"] = check_exact(device, spec)
            emit(row)
    finally:
        buffers.close()
    return pd.DataFrame(rows)
