"""Pixel shuffle: the index map and its references, the float kernels and the fused int8x4 kernel.

``(N, C·r², H, W) → (N, C, H·r, W·r)``: output element ``(n, c, oh, ow)`` reads input element
``(n, c·r² + (oh % r)·r + (ow % r), oh // r, ow // r)`` (reference ``etvk.md`` §2.1).

Kernels (shaders in ``shaders/``), each described by a small frozen spec (shader variant, specialization constants,
push constants, local and global size, bytes read / written, reference):

* :class:`PixelShuffleSpec` — float pixel shuffle (``pixel_shuffle.glsl``, YAML variants
  ``pixel_shuffle_{buffer,texture3d}_{float,half}``).  Buffers of any packed dim (W / H / C: the dim order of the
  float buffer layouts), one thread per output element; 3-D textures of any packed dim, one thread per output texel
  and up to 4 input texel reads.  Any ``r >= 1``.
* :class:`Q8taPixelShuffleSpec` — the fused int8x4 kernel (``q8ta_pixel_shuffle.glsl``) on the channels-packed int8
  family (4W4C, 4C1W, 4C; input and output layouts independent), one thread per output word; passthrough (byte
  shuffle) or requantize path; any ``r >= 1`` (ET-VK supports only r = 2).  What it shares with the block kernel
  (``kernels.pixel_shuffle_block``) is :class:`FusedPixelShuffleSpec`.

The decomposed chain the fused kernel replaces (dequantize → float pixel shuffle → quantize) is
``kernels.q8ta_quantize``; the benchmarks are ``workbench.benchmarks.pixel_shuffle``.

Runners (:class:`PixelShuffleRun`, :class:`Q8taPixelShuffleRun`) bind a spec to device resources: they allocate and
fill the buffers / images and the metadata UBOs, ``record(rec)`` adds the dispatches to a recording, ``output()``
downloads the result as an NCHW torch tensor.

Bytes moved are counted per dispatch as bytes read + bytes written once each (what a perfect cache would move):
int8 words that hold at least one logical element, fp32 / fp16 elements, whole texels of the images.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import layouts as L
from ..quant import inverse_scale
from . import KernelRun, StorageDispatch, linear_global_size

FLOAT_SHADER = "pixel_shuffle"
FUSED_SHADER = "q8ta_pixel_shuffle"
LOCAL_SIZE = (64, 1, 1)  # buffers: ET-VK's {64, 1, 1}

#: Layouts the fused kernel accepts: packed dim C with block 4 (ET-VK's "channels-packed int8" family).
FUSED_LAYOUTS = ("4W4C", "4C1W", "4C")
STORAGES = ("buffer", "texture")
FLOAT_DTYPES = {"float32": (np.float32, 4), "float16": (np.float16, 2)}
#: ET-VK's passthrough tolerance: |s_in - s_out| <= 1e-7 * max(|s_in|, 1e-7) and equal zero points.
PASSTHROUGH_RTOL = 1e-7
#: ET-VK's test qparams: same_qp (passthrough) and diff_qp (requantize).
SAME_QP = (0.007112, 0, 0.007112, 0)
DIFF_QP = (0.007112, 0, 0.013, 5)


# ---------------------------------------------------------------------------------------------------------------------
# Shape rules and the index map
# ---------------------------------------------------------------------------------------------------------------------

def check_upscale_factor(r) -> int:
    if isinstance(r, (bool, np.bool_)) or not isinstance(r, (int, np.integer)):
        raise ValueError(f"upscale_factor must be an int >= 1, got {r!r}")
    if r < 1:
        raise ValueError(f"upscale_factor must be an int >= 1, got {r}")
    return int(r)


def output_sizes(in_sizes, r) -> tuple[int, int, int, int]:
    """NCHW output sizes of a pixel shuffle with factor ``r`` (input unsqueezed to 4-D); clear errors otherwise."""
    r = check_upscale_factor(r)
    n, c, h, w = L.normalize_sizes(in_sizes)
    if c % (r * r):
        raise ValueError(f"pixel shuffle needs the input channels divisible by r² = {r * r} (upscale_factor r = {r}), "
                         f"got C = {c} (C % r² = {c % (r * r)})")
    return (n, c // (r * r), h * r, w * r)


def source_element(n, c, oh, ow, r):
    """The input element ``(n, c_in, ih, iw)`` that output element ``(n, c, oh, ow)`` reads.  Vectorised."""
    c, oh, ow = np.asarray(c), np.asarray(oh), np.asarray(ow)
    return n, c * r * r + (oh % r) * r + (ow % r), oh // r, ow // r


def float_layout(packed: str, storage: str) -> L.Layout:
    if storage not in STORAGES:
        raise ValueError(f"unknown storage {storage!r}; expected 'buffer' or 'texture'")
    return L.get_layout(L.PACKED_DIMS[L.packed_dim_name(packed)], storage=storage)


def fused_layout(name, which: str = "input") -> L.Layout:
    """A layout the fused kernel accepts, or a clear error naming the allowed ones."""
    try:
        lay = L.get_layout(name)
    except ValueError as exc:
        raise ValueError(f"q8ta_pixel_shuffle {which} layout: {exc}; allowed: {', '.join(FUSED_LAYOUTS)}") from None
    if lay.name not in FUSED_LAYOUTS:
        what = (f"packed dim {'WHCN'[lay.packed_dim]}" if lay.is_int8 else f"a float {lay.storage} layout")
        raise ValueError(f"q8ta_pixel_shuffle needs a channels-packed int8 {which} layout (packed dim C, block 4): "
                         f"one of {', '.join(FUSED_LAYOUTS)}; got {lay.name} ({what})")
    return lay


def is_passthrough(in_scale: float, in_zero_point: int, out_scale: float, out_zero_point: int) -> bool:
    """ET-VK's rule: scales equal within 1e-7 relative (floor 1e-7) and equal zero points → pure byte shuffle."""
    s_in, s_out = float(in_scale), float(out_scale)
    return abs(s_in - s_out) <= PASSTHROUGH_RTOL * max(abs(s_in), 1e-7) and int(in_zero_point) == int(out_zero_point)


class RequantPath:
    """For specs with input and output qparams (in_scale, in_zero_point, out_scale, out_zero_point): whether they
    make the kernel a pure byte move (`passthrough`, ET-VK's rule) and the row label of that (`path`)."""

    @property
    def passthrough(self) -> bool:
        return is_passthrough(self.in_scale, self.in_zero_point, self.out_scale, self.out_zero_point)

    @property
    def path(self) -> str:
        return "passthrough" if self.passthrough else "requant"


def requantize_reference(q, in_scale, in_zero_point, out_scale, out_zero_point) -> np.ndarray:
    """The kernels' requantize in fp32, op for op: ``dq = float(q - zp_in) * scale_in``;
    ``q = clamp(roundEven(dq * inv_scale_out) + zp_out, -128, 127)`` with ``inv_scale_out = 1.0f / scale_out``.
    (torch adds zp before rounding in one fma; the two differ by at most 1 LSB.)
    Saturating for any ratio of scales: s is clamped to [-1024, 1024] first (lossless: the result is clamped to
    [-128, 127] anyway; an infinite s saturates instead of overflowing the integer conversion)."""
    q = np.asarray(q)
    dq = (q.astype(np.int32) - np.int32(in_zero_point)).astype(np.float32) * np.float32(in_scale)
    with np.errstate(over="ignore"):  # an infinite s saturates
        s = np.clip((dq * inverse_scale(out_scale)).astype(np.float32), -1024, 1024)
    return np.clip(np.rint(s).astype(np.int64) + int(out_zero_point), -128, 127).astype(np.int8)


def pixel_shuffle_reference(x: np.ndarray, r: int) -> np.ndarray:
    """NCHW numpy pixel shuffle (same as ``torch.nn.functional.pixel_shuffle``), any dtype, 4-D."""
    n, c, h, w = x.shape
    co = c // (r * r)
    return np.ascontiguousarray(x.reshape(n, co, r, r, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, co, h * r, w * r))


def touched_words(lay: L.Layout, sizes) -> int:
    """int32 words of an int8x4 tensor that hold at least one logical element: a word is 4 consecutive elements
    along the packed dim at one position of every other dim, so numel / size_packed * ceil(size_packed / 4)."""
    sz = L.normalize_sizes(sizes)
    packed = sz[3 - lay.packed_dim]
    return int(np.prod(sz)) // packed * math.ceil(packed / 4)


def shape_str(sizes) -> str:
    return "x".join(str(int(s)) for s in sizes)


def check_qparams(scale, zero_point, which):
    if not np.isfinite(scale) or float(scale) <= 0:
        raise ValueError(f"{which} scale must be a finite positive number, got {scale!r}")
    if isinstance(zero_point, (bool, np.bool_)) or not isinstance(zero_point, (int, np.integer)) \
            or not -128 <= int(zero_point) <= 127:
        raise ValueError(f"{which} zero point must be an int in [-128, 127], got {zero_point!r}")



@dataclass(frozen=True)
class PixelShuffleSpec(StorageDispatch):
    """Float pixel shuffle on buffers or 3-D textures.  ``in_sizes`` NCHW (unsqueezed to 4-D)."""

    in_sizes: tuple
    r: int
    storage: str = "buffer"          # "buffer" | "texture"
    packed_dim: str = "channels"     # "width" | "height" | "channels"
    dtype: str = "float32"           # "float32" | "float16"
    out_sizes: tuple = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "in_sizes", L.normalize_sizes(self.in_sizes))
        object.__setattr__(self, "r", check_upscale_factor(self.r))
        if self.storage not in STORAGES:
            raise ValueError(f"unknown storage {self.storage!r}; expected 'buffer' or 'texture'")
        object.__setattr__(self, "packed_dim", L.packed_dim_name(self.packed_dim))
        if self.dtype not in FLOAT_DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}; expected one of {', '.join(FLOAT_DTYPES)}")
        object.__setattr__(self, "out_sizes", output_sizes(self.in_sizes, self.r))

    # -- what to build ----------------------------------------------------------------------------------------------
    @property
    def layout(self) -> L.Layout:
        return float_layout(self.packed_dim, self.storage)

    @property
    def half(self) -> bool:
        return self.dtype == "float16"

    @property
    def variant(self) -> str:
        return f"pixel_shuffle_{'texture3d' if self.storage == 'texture' else 'buffer'}_" \
               f"{'half' if self.half else 'float'}"

    @property
    def shader(self) -> str:
        return FLOAT_SHADER

    @property
    def defines(self) -> dict:
        return {"TEXTURE": self.storage == "texture", "HALF": self.half}

    def spec_constants(self) -> dict:
        """ET-VK's order for this op: 3 output layout, 4 input layout, 5 r.  Buffers address the input through its
        metadata strides alone, so the compiler drops constant 4 there and it is not passed."""
        lay = self.layout.spec_constant()
        if self.storage == "buffer":
            return {3: lay, 5: self.r}
        return {3: lay, 4: lay, 5: self.r}

    def push_constants(self) -> bytes:
        return b""

    def metadata(self) -> tuple[bytes, bytes]:
        """(output, input) metadata UBO bytes: BufferMetadata or TextureMetadata."""
        return self.layout.metadata(self.out_sizes), self.layout.metadata(self.in_sizes)

    @property
    def image_format(self) -> str:
        return "rgba16f" if self.half else "rgba32f"

    @property
    def elem_nbytes(self) -> int:
        return FLOAT_DTYPES[self.dtype][1]

    @property
    def np_dtype(self):
        return FLOAT_DTYPES[self.dtype][0]

    # -- dispatch -----------------------------------------------------------------------------------------------------
    @property
    def threads(self) -> int:
        """Buffers: output elements; textures: output texels."""
        if self.storage == "texture":
            return self.layout.num_texels(self.out_sizes)
        return int(np.prod(self.out_sizes))

    @property
    def dispatch_sizes(self) -> tuple:
        return self.out_sizes

    @property
    def dispatches(self) -> int:
        return 1

    # -- cost -------------------------------------------------------------------------------------------------------
    def bytes_read(self) -> int:
        if self.storage == "texture":
            return self.layout.num_texels(self.in_sizes) * 4 * self.elem_nbytes
        return int(np.prod(self.in_sizes)) * self.elem_nbytes

    def bytes_written(self) -> int:
        if self.storage == "texture":
            return self.layout.num_texels(self.out_sizes) * 4 * self.elem_nbytes
        return int(np.prod(self.out_sizes)) * self.elem_nbytes

    def bytes_moved(self) -> int:
        return self.bytes_read() + self.bytes_written()

    def macs(self) -> int:
        return 0

    def reference(self, x):
        """NCHW numpy / torch in → NCHW numpy out (4-D)."""
        a = np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)
        return pixel_shuffle_reference(a.reshape(self.in_sizes), self.r)

    def describe(self) -> str:
        return (f"pixel_shuffle {self.storage} {self.packed_dim}-packed {self.dtype} r={self.r}: "
                f"[{shape_str(self.in_sizes)}] -> [{shape_str(self.out_sizes)}], {self.threads} threads "
                f"({'texels' if self.storage == 'texture' else 'elements'}), local {self.local_size}")


@dataclass(frozen=True)
class FusedPixelShuffleSpec(RequantPath):
    """What the fused int8x4 pixel shuffles share (the per-word kernel here, the block kernel in
    ``pixel_shuffle_block``): shapes, channels-packed layouts, qparams as in torch (``out_scale``, not its inverse),
    push constants, metadata, traffic and reference."""

    in_sizes: tuple
    r: int = 2
    in_layout: str = "4W4C"
    out_layout: str = "4W4C"
    in_scale: float = 1.0
    in_zero_point: int = 0
    out_scale: float = 1.0
    out_zero_point: int = 0
    out_sizes: tuple = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "in_sizes", L.normalize_sizes(self.in_sizes))
        object.__setattr__(self, "r", check_upscale_factor(self.r))
        object.__setattr__(self, "in_layout", fused_layout(self.in_layout, "input").name)
        object.__setattr__(self, "out_layout", fused_layout(self.out_layout, "output").name)
        check_qparams(self.in_scale, self.in_zero_point, "input")
        check_qparams(self.out_scale, self.out_zero_point, "output")
        object.__setattr__(self, "out_sizes", output_sizes(self.in_sizes, self.r))

    dispatches = 1

    def check_device(self, device) -> None:
        """Raise where `device` cannot run this variant (nothing to check here)."""

    def push_constants(self) -> bytes:
        """24 bytes: float scale_in, float inv_scale_out, int zp_in, int zp_out, int r, int passthrough."""
        floats = np.array([self.in_scale, inverse_scale(self.out_scale)], dtype=np.float32).tobytes()
        ints = np.array([self.in_zero_point, self.out_zero_point, self.r, int(self.passthrough)],
                        dtype=np.int32).tobytes()
        return floats + ints

    def metadata(self) -> tuple[bytes, bytes]:
        return (L.get_layout(self.out_layout).buffer_metadata(self.out_sizes),
                L.get_layout(self.in_layout).buffer_metadata(self.in_sizes))

    @property
    def written_words(self) -> int:
        n, c, h, w = self.out_sizes
        return n * math.ceil(c / 4) * h * w

    def global_size(self, device=None) -> tuple[int, int, int]:
        local_x = self.local_size[0]
        if device is None:
            return (math.ceil(self.threads / local_x) * local_x, 1, 1)
        return linear_global_size(device, self.threads, local_x)

    def bytes_read(self) -> int:
        return 4 * touched_words(L.get_layout(self.in_layout), self.in_sizes)

    def bytes_written(self) -> int:
        return 4 * self.written_words

    def bytes_moved(self) -> int:
        return self.bytes_read() + self.bytes_written()

    def macs(self) -> int:
        return 0

    def reference(self, q) -> np.ndarray:
        """int8 NCHW in → int8 NCHW out, exactly what the shader computes."""
        a = np.asarray(q.detach().cpu().numpy() if hasattr(q, "detach") else q).reshape(self.in_sizes)
        out = pixel_shuffle_reference(a, self.r)
        if self.passthrough:
            return out
        return requantize_reference(out, self.in_scale, self.in_zero_point, self.out_scale, self.out_zero_point)

    def describe(self) -> str:
        return (f"{self.variant} {self.in_layout}->{self.out_layout} r={self.r} {self.path}: "
                f"[{shape_str(self.in_sizes)}] -> [{shape_str(self.out_sizes)}], {self.threads} threads (words)")


@dataclass(frozen=True)
class Q8taPixelShuffleSpec(FusedPixelShuffleSpec):
    """The fused int8x4 pixel shuffle, one thread per output word (ET-VK's kernel, and two variants of it)."""

    specialize_r: bool = False       # True: r as specialization constant 5 (variants *_rspec)
    output_order: bool = False       # True: thread t writes output word t (variants *_outorder)

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "specialize_r", bool(self.specialize_r))
        object.__setattr__(self, "output_order", bool(self.output_order))

    shader = FUSED_SHADER

    @property
    def defines(self) -> dict:
        return {"SPECIALIZE_R": self.specialize_r, "OUTPUT_ORDER": self.output_order}

    @property
    def variant(self) -> str:
        return FUSED_SHADER + ("_rspec" if self.specialize_r else "") + ("_outorder" if self.output_order else "")

    def spec_constants(self) -> dict:
        """ET-VK's order for this op: 3 input layout, 4 output layout; 5 r for the ``_rspec`` variant."""
        constants = {3: L.get_layout(self.in_layout).spec_constant(), 4: L.get_layout(self.out_layout).spec_constant()}
        if self.specialize_r:
            constants[5] = self.r
        return constants

    @property
    def threads(self) -> int:
        """One per output word: N · ceil(C_out / 4) · H_out · W_out (ET-VK's order), or every word of the output
        layout, padding included (``output_order``; padding threads return at once)."""
        if self.output_order:
            return L.get_layout(self.out_layout).num_words(self.out_sizes)
        return self.written_words

    @property
    def local_size(self) -> tuple[int, int, int]:
        return LOCAL_SIZE


# ---------------------------------------------------------------------------------------------------------------------
# Runners: a spec bound to device resources
# ---------------------------------------------------------------------------------------------------------------------

def as_numpy(x):
    if hasattr(x, "detach"):
        return x.detach().cpu().contiguous().numpy()
    return np.ascontiguousarray(x)


def to_torch(a):
    import torch
    return torch.from_numpy(np.ascontiguousarray(a))


def random_words(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-2**31, 2**31, count, dtype=np.int64).astype(np.int32)


class PixelShuffleRun(KernelRun):
    """Float pixel shuffle on a device.  ``x``: NCHW numpy / torch tensor (unsqueezed to 4-D), or None for random
    raw content (benchmarks)."""

    def __init__(self, device, spec: PixelShuffleSpec, x=None, seed: int = 0):
        super().__init__(device)
        self.spec = spec
        if spec.half and spec.storage == "buffer":
            device.require("storage_buffer_16bit")  # MissingFeatureError naming the feature and the device
        lay = spec.layout
        try:
            if x is not None:
                a = as_numpy(x).astype(spec.np_dtype, copy=False).reshape(spec.in_sizes)
                data = lay.encode(a)
            else:
                rng = np.random.default_rng(seed)
                if spec.storage == "texture":
                    ext = lay.extents(spec.in_sizes)
                    data = rng.standard_normal((ext[2], ext[1], ext[0], 4), dtype=np.float32).astype(spec.np_dtype)
                else:
                    data = rng.standard_normal(lay.padded_numel(spec.in_sizes), dtype=np.float32).astype(spec.np_dtype)
            if spec.storage == "texture":
                self.inp = self._own(device.image(lay.extents(spec.in_sizes), spec.image_format, name="ps-in"))
                self.inp.upload(data)
                self.out = self._own(device.image(lay.extents(spec.out_sizes), spec.image_format, name="ps-out"))
            else:
                self.inp = self._own(device.buffer(data, name="ps-in"))
                self.out = self._own(device.buffer(nbytes=int(np.prod(spec.out_sizes)) * spec.elem_nbytes,
                                                   name="ps-out"))
            self.out_meta, self.in_meta = self._own_metadata(spec, "ps")
        except Exception:
            self.close()
            raise

    def record(self, rec, label: str | None = None):
        self._dispatch(rec, self.spec, [self.out, self.inp, self.out_meta, self.in_meta], label or self.spec.variant)

    def output(self):
        """The result as an NCHW torch tensor (4-D)."""
        spec, lay = self.spec, self.spec.layout
        if spec.storage == "texture":
            return to_torch(lay.from_texels(self.out.download(), spec.out_sizes))
        flat = self.out.download(spec.np_dtype, (int(np.prod(spec.out_sizes)),))
        return to_torch(lay.from_buffer(flat, spec.out_sizes))


class Q8taPixelShuffleRun(KernelRun):
    """A fused kernel (per-word or block) on a device.  ``q``: int8 NCHW tensor, or None for random words
    (benchmarks)."""

    def __init__(self, device, spec: FusedPixelShuffleSpec, q=None, seed: int = 0):
        super().__init__(device)
        self.spec = spec
        try:
            self.inp = self._own(device.buffer(packed_input(spec.in_layout, spec.in_sizes, q, seed), name="q8ps-in"))
            out_words = L.get_layout(spec.out_layout).num_words(spec.out_sizes)
            self.out = self._own(device.buffer(nbytes=4 * out_words, name="q8ps-out"))
            self.out_meta, self.in_meta = self._own_metadata(spec, "q8ps")
        except Exception:
            self.close()
            raise

    def record(self, rec, label: str | None = None):
        self.spec.check_device(self.device)
        self._dispatch(rec, self.spec, [self.out, self.inp, self.out_meta, self.in_meta], label or self.spec.variant)

    def output_words(self) -> np.ndarray:
        return self.out.download(np.int32)

    def output(self):
        return to_torch(L.get_layout(self.spec.out_layout).unpack(self.output_words(), self.spec.out_sizes))


def packed_input(layout, sizes, q, seed):
    lay = L.get_layout(layout)
    if q is None:
        return random_words(lay.num_words(sizes), seed)
    a = as_numpy(q)
    if a.dtype != np.int8:
        raise TypeError(f"expected an int8 tensor, got dtype {a.dtype}")
    return lay.pack(a.reshape(sizes))
