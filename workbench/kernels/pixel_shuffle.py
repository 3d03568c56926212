"""Pixel shuffle: the float kernels, the fused int8x4 kernel, and the decomposed chain it replaces.

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
  shuffle) or requantize path; any ``r >= 1`` (ET-VK supports only r = 2).
* :class:`Q8taDequantizeSpec`, :class:`Q8taQuantizeSpec` and :class:`Q8taPixelShuffleChainSpec` — the decomposed
  chain ``q8ta_dequantize → float pixel shuffle → q8ta_quantize``: three dispatches, two fp32 buffers in between.

Runners (:class:`PixelShuffleRun`, :class:`Q8taPixelShuffleRun`, :class:`Q8taChainRun`) bind a spec to device
resources: they allocate and fill the buffers / images and the metadata UBOs, ``record(rec)`` adds the dispatches to
a recording, ``output()`` downloads the result as an NCHW torch tensor.  ``workbench.ops.pixel_shuffle`` and
:func:`bench_suite` use them.

Bytes moved are counted per dispatch as bytes read + bytes written once each (what a perfect cache would move):
int8 words that hold at least one logical element, fp32 / fp16 elements, whole texels of the images.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import layouts as L
from ..quant import inverse_scale
from . import KernelRun, linear_global_size, storage_global_size, texture_local_size

FLOAT_SHADER = "pixel_shuffle"
FUSED_SHADER = "q8ta_pixel_shuffle"
BLOCK_SHADER = "q8ta_pixel_shuffle_block"
#: Below this many threads the block kernel (4 output words of 16 B per thread) underfills a large GPU: on the H200
#: it lost to the per-word kernel at 3,456 threads (1×96×64×36) and won from 13,824 (1×96×128×72) on.
BLOCK_MIN_THREADS = 8192
QUANTIZE_SHADER = "q8ta_quantize"
DEQUANTIZE_SHADER = "q8ta_dequantize"
LOCAL_SIZE = (64, 1, 1)  # buffers: ET-VK's {64, 1, 1}

#: Layouts the fused kernel accepts: packed dim C with block 4 (ET-VK's "channels-packed int8" family).
FUSED_LAYOUTS = ("4W4C", "4C1W", "4C")
#: Packed-dim names accepted for float tensors → float layout base names.
PACKED_DIMS = {"width": "WIDTH_PACKED", "height": "HEIGHT_PACKED", "channels": "CHANNELS_PACKED"}
_PACKED_ALIASES = {"width": "width", "w": "width", "widthpacked": "width",
                   "height": "height", "h": "height", "heightpacked": "height",
                   "channels": "channels", "channel": "channels", "c": "channels", "channelspacked": "channels"}
STORAGES = ("buffer", "texture")
FLOAT_DTYPES = {"float32": (np.float32, 4), "float16": (np.float16, 2)}
#: ET-VK's passthrough tolerance: |s_in - s_out| <= 1e-7 * max(|s_in|, 1e-7) and equal zero points.
PASSTHROUGH_RTOL = 1e-7


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


def destination_element(n, c_in, ih, iw, r):
    """Inverse of :func:`source_element`: the output element that input element ``(n, c_in, ih, iw)`` lands in."""
    c_in, ih, iw = np.asarray(c_in), np.asarray(ih), np.asarray(iw)
    c, off = np.divmod(c_in, r * r)
    dy, dx = np.divmod(off, r)
    return n, c, ih * r + dy, iw * r + dx


def packed_dim_name(layout) -> str:
    key = "".join(ch for ch in str(layout).lower() if ch.isalnum())
    if key.endswith("texture"):
        key = key[: -len("texture")]
    if key not in _PACKED_ALIASES:
        raise ValueError(f"unknown layout (packed dim) {layout!r}; expected 'channels', 'width' or 'height'")
    return _PACKED_ALIASES[key]


def float_layout(packed: str, storage: str) -> L.Layout:
    if storage not in STORAGES:
        raise ValueError(f"unknown storage {storage!r}; expected 'buffer' or 'texture'")
    return L.get_layout(PACKED_DIMS[packed_dim_name(packed)], storage=storage)


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


def _touched_words(lay: L.Layout, sizes) -> int:
    """int32 words of an int8x4 tensor that hold at least one logical element: a word is 4 consecutive elements
    along the packed dim at one position of every other dim, so numel / size_packed * ceil(size_packed / 4)."""
    sz = L.normalize_sizes(sizes)
    packed = sz[3 - lay.packed_dim]
    return int(np.prod(sz)) // packed * math.ceil(packed / 4)


def _shape_str(sizes) -> str:
    return "x".join(str(int(s)) for s in sizes)


# ---------------------------------------------------------------------------------------------------------------------
# Specs
# ---------------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PixelShuffleSpec:
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
        object.__setattr__(self, "packed_dim", packed_dim_name(self.packed_dim))
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
    def local_size(self) -> tuple[int, int, int]:
        if self.storage == "texture":
            return texture_local_size(self.layout.extents(self.out_sizes))
        return LOCAL_SIZE

    def global_size(self, device=None) -> tuple[int, int, int]:
        return storage_global_size(device, self.layout, self.out_sizes, self.threads, LOCAL_SIZE[0])

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
                f"[{_shape_str(self.in_sizes)}] -> [{_shape_str(self.out_sizes)}], {self.threads} threads "
                f"({'texels' if self.storage == 'texture' else 'elements'}), local {self.local_size}")


@dataclass(frozen=True)
class Q8taPixelShuffleSpec(RequantPath):
    """The fused int8x4 pixel shuffle.  Quantization parameters as in torch (``out_scale``, not its inverse)."""

    in_sizes: tuple
    r: int = 2
    in_layout: str = "4W4C"
    out_layout: str = "4W4C"
    in_scale: float = 1.0
    in_zero_point: int = 0
    out_scale: float = 1.0
    out_zero_point: int = 0
    specialize_r: bool = False       # True: r as specialization constant 5 (variants *_rspec)
    output_order: bool = False       # True: thread t writes output word t (variants *_outorder)
    block: bool = False              # True: 16 words per thread, 4×4 byte transpose in registers (r = 2)
    lut: int = 0                     # block kernel, requant path: 1 a 256-entry table in shared memory, 2 the
                                     # same 32× interleaved (no bank conflicts; 32 KB)
    swizzle: bool = False            # block kernel: two-stage 4x4 byte transpose (masks and shifts per pair)
    local_x: int = LOCAL_SIZE[0]     # block kernel: local size (ET-VK's 64 elsewhere)
    pixel_tile: bool | None = None   # block kernel, 4C output: one thread per input pixel x 4 output channel blocks
                                     # (16-byte stores); None: wherever C4_out % 4 == 0
    tile_co: int | None = None       # block kernel: warps as tile_co channel blocks x 32 / tile_co width blocks
                                     # (0: channel block fastest); None: DEFAULT_TILE_CO of the pair
    convert: bool = False            # block kernel, requant without a table: int <-> float conversion instructions
                                     # (the first version) instead of the magic-number arithmetic (same results)
    pair_store: bool = False         # block kernel, 4C1W output: neighbouring lanes swap a block so that every
                                     # store instruction writes whole 32-byte sectors (needs tile_co < subgroup)
    out_sizes: tuple = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "in_sizes", L.normalize_sizes(self.in_sizes))
        object.__setattr__(self, "r", check_upscale_factor(self.r))
        object.__setattr__(self, "specialize_r", bool(self.specialize_r))
        object.__setattr__(self, "output_order", bool(self.output_order))
        object.__setattr__(self, "in_layout", fused_layout(self.in_layout, "input").name)
        object.__setattr__(self, "out_layout", fused_layout(self.out_layout, "output").name)
        _check_qparams(self.in_scale, self.in_zero_point, "input")
        _check_qparams(self.out_scale, self.out_zero_point, "output")
        object.__setattr__(self, "out_sizes", output_sizes(self.in_sizes, self.r))
        object.__setattr__(self, "block", bool(self.block))
        if self.block and not block_applies(self.in_layout, self.out_layout, self.r):
            raise ValueError(f"the block kernel needs r = 2, got r = {self.r} ({self.in_layout} → "
                             f"{self.out_layout})")
        if self.block and (self.specialize_r or self.output_order):
            raise ValueError("the block kernel has no _rspec / _outorder variants")
        if self.lut not in (0, 1, 2, False, True):
            raise ValueError(f"lut must be 0 (none), 1 (table) or 2 (bank-interleaved table), got {self.lut!r}")
        object.__setattr__(self, "lut", int(self.lut))
        object.__setattr__(self, "swizzle", bool(self.swizzle))
        if (self.lut or self.swizzle or self.local_x != LOCAL_SIZE[0]) and not self.block:
            raise ValueError("lut, swizzle and local_x are options of the block kernel only")
        aligned_4c = self.out_layout == "4C" and math.ceil(self.out_sizes[1] / 4) % 4 == 0
        if self.pixel_tile is None:
            object.__setattr__(self, "pixel_tile", bool(self.block and aligned_4c))
        elif self.pixel_tile and not (self.block and aligned_4c):
            raise ValueError(f"pixel_tile needs the block kernel, 4C output and C_out blocks in fours (C4_out % 4 "
                             f"== 0); got {self.in_layout} → {self.out_layout}, C_out = {self.out_sizes[1]}")
        if self.local_x not in (32, 64, 128, 256, 512):
            raise ValueError(f"local_x must be a power of two from 32 to 512, got {self.local_x}")
        if (self.tile_co or self.convert) and not self.block:
            raise ValueError("tile_co and convert are options of the block kernel only")
        if self.tile_co is None:
            c4_out = math.ceil(self.out_sizes[1] / 4)
            channel_blocks = c4_out // 4 if self.pixel_tile else c4_out
            object.__setattr__(self, "tile_co", default_tile_co(self.in_layout, self.out_layout, channel_blocks)
                                                    if self.block else 0)
        if self.tile_co not in TILE_CO_CHOICES:
            raise ValueError(f"tile_co must be one of {TILE_CO_CHOICES} (0: channel block fastest), "
                             f"got {self.tile_co!r}")
        object.__setattr__(self, "convert", bool(self.convert))
        object.__setattr__(self, "pair_store", bool(self.pair_store))
        if self.pair_store and not (self.block and self.out_layout == "4C1W" and self.vector_access[1]
                                    and 0 < self.tile_co < 32 and not self.pixel_tile):
            raise ValueError(f"pair_store needs the block kernel writing 16-byte blocks into 4C1W (output width a "
                             f"multiple of 4) with 0 < tile_co < 32; got {self.in_layout} → {self.out_layout}, "
                             f"output width {self.out_sizes[3]}, tile_co {self.tile_co}")
        if self.convert and self.lut:
            raise ValueError("convert picks the arithmetic requantize path; a lut replaces it (choose one)")

    dispatches = 1

    @property
    def shader(self) -> str:
        return BLOCK_SHADER if self.block else FUSED_SHADER

    @property
    def vector_access(self) -> tuple[bool, bool]:
        """Block kernel: (16-byte loads, 16-byte stores) — where a whole 4-word block is contiguous and aligned:
        4W4C always; 4C1W when the width is a multiple of 4; 4C when its channel blocks come in fours (C4 % 4 == 0;
        output: with `pixel_tile`, else one word per output pixel, neighbouring threads writing neighbouring
        words)."""
        def vec(layout, sizes, is_input):
            n, c, h, w = sizes
            if layout == "4W4C":
                return True
            if layout == "4C1W":
                return w % 4 == 0
            return (is_input or self.pixel_tile) and math.ceil(c / 4) % 4 == 0
        return vec(self.in_layout, self.in_sizes, True), vec(self.out_layout, self.out_sizes, False)

    @property
    def defines(self) -> dict:
        if self.block:
            vec_in, vec_out = self.vector_access
            return {"IN_LAYOUT": FUSED_LAYOUTS.index(self.in_layout),
                    "OUT_LAYOUT": FUSED_LAYOUTS.index(self.out_layout),
                    "VEC_IN": vec_in, "VEC_OUT": vec_out, "REQUANT_LUT": int(self.lut), "SWIZZLE": self.swizzle,
                    "PIXEL_TILE": self.pixel_tile, "TILE_CO": self.tile_co, "REQUANT_CONVERT": self.convert,
                    "PAIR_STORE": self.pair_store}
        return {"SPECIALIZE_R": self.specialize_r, "OUTPUT_ORDER": self.output_order}

    @property
    def variant(self) -> str:
        if self.block:
            vec_in, vec_out = self.vector_access
            pair = "" if (self.in_layout, self.out_layout) == ("4W4C", "4W4C") else \
                f"_{self.in_layout}_{self.out_layout}"  # 4W4C → 4W4C keeps the landed kernel's name
            return (f"{BLOCK_SHADER}{pair}" + {0: "", 1: "_lut", 2: "_lut32"}[self.lut]
                    + ("_swizzle" if self.swizzle else "") + ("_pixel" if self.pixel_tile else "")
                    + ("" if vec_in else "_wordin")
                    + ("" if vec_out else "_wordout") + (f"_l{self.local_x}" if self.local_x != 64 else "")
                    + (f"_t{self.tile_co}" if self.tile_co else "") + ("_cvt" if self.convert else "")
                    + ("_pair" if self.pair_store else ""))
        return FUSED_SHADER + ("_rspec" if self.specialize_r else "") + ("_outorder" if self.output_order else "")

    def spec_constants(self) -> dict:
        """ET-VK's order for this op: 3 input layout, 4 output layout; 5 r for the ``_rspec`` variant.
        The block kernel is 4W4C-only and takes none."""
        if self.block:
            return {}
        constants = {3: L.get_layout(self.in_layout).spec_constant(), 4: L.get_layout(self.out_layout).spec_constant()}
        if self.specialize_r:
            constants[5] = self.r
        return constants

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
    def threads(self) -> int:
        """One per output word: N · ceil(C_out / 4) · H_out · W_out (ET-VK's order), or every word of the output
        layout, padding included (``output_order``; padding threads return at once)."""
        if self.output_order:
            return L.get_layout(self.out_layout).num_words(self.out_sizes)
        if self.block:  # one per (n, ih, iw, 4 output channel blocks) or (n, ih, input width block, channel block)
            n, _, h, w = self.in_sizes
            c4_out = math.ceil(self.out_sizes[1] / 4)
            channel, width = (c4_out // 4, w) if self.pixel_tile else (c4_out, math.ceil(w / 4))
            if self.tile_co:  # whole tiles of tile_co x 32 / tile_co
                tile_w = 32 // self.tile_co
                channel = math.ceil(channel / self.tile_co) * self.tile_co
                width = math.ceil(width / tile_w) * tile_w
            return n * h * channel * width
        return self.written_words

    @property
    def written_words(self) -> int:
        n, c, h, w = self.out_sizes
        return n * math.ceil(c / 4) * h * w

    @property
    def local_size(self) -> tuple[int, int, int]:
        return (self.local_x, 1, 1)

    def global_size(self, device=None) -> tuple[int, int, int]:
        if device is None:
            return (math.ceil(self.threads / self.local_x) * self.local_x, 1, 1)
        return linear_global_size(device, self.threads, self.local_x)

    def bytes_read(self) -> int:
        return 4 * _touched_words(L.get_layout(self.in_layout), self.in_sizes)

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
                f"[{_shape_str(self.in_sizes)}] -> [{_shape_str(self.out_sizes)}], {self.threads} threads (words)")


#: Block kernel thread orders (tile_co): 0 = channel block fastest; T = warps of T channel blocks x 32 / T widths.
TILE_CO_CHOICES = (0, 1, 2, 4, 8, 16, 32)


def default_tile_co(in_layout: str, out_layout: str, channel_blocks: int) -> int:
    """The block kernel's thread order for a layout pair: where a side is 4C1W (its channel blocks lie W words apart)
    warps of 4 channel blocks x 8 width blocks (runs of 128-256 contiguous bytes on both sides), fewer channel
    blocks where the tensor has fewer (`channel_blocks`: output channel blocks, or groups of 4 of them for the pixel
    tile; padding threads would idle); else channel block fastest (4W4C and 4C keep neighbouring channel blocks
    adjacent)."""
    if "4C1W" not in (in_layout, out_layout):
        return 0
    return min(4, 1 << (max(int(channel_blocks), 1).bit_length() - 1))


def block_applies(in_layout, out_layout, r) -> bool:
    """Whether the block kernel covers this case: any channels-packed pair (4W4C, 4C1W, 4C), r = 2."""
    try:
        return (L.get_layout(in_layout).name in FUSED_LAYOUTS and L.get_layout(out_layout).name in FUSED_LAYOUTS
                and r == 2)
    except ValueError:  # unknown layouts get their error from the spec
        return False


def _check_qparams(scale, zero_point, which):
    if not np.isfinite(scale) or float(scale) <= 0:
        raise ValueError(f"{which} scale must be a finite positive number, got {scale!r}")
    if isinstance(zero_point, (bool, np.bool_)) or not isinstance(zero_point, (int, np.integer)) \
            or not -128 <= int(zero_point) <= 127:
        raise ValueError(f"{which} zero point must be an int in [-128, 127], got {zero_point!r}")


@dataclass(frozen=True)
class Q8taDequantizeSpec:
    """int8x4 (any int8 layout) → fp32 buffer (any float buffer layout); one thread per output element."""

    sizes: tuple
    in_layout: str = "4W4C"
    out_layout: str = "WIDTH_PACKED"
    scale: float = 1.0
    zero_point: int = 0

    shader = DEQUANTIZE_SHADER
    dispatches = 1
    local_size = LOCAL_SIZE

    def __post_init__(self):
        object.__setattr__(self, "sizes", L.normalize_sizes(self.sizes))
        if not L.get_layout(self.in_layout).is_int8:
            raise ValueError(f"q8ta_dequantize reads an int8x4 layout, got {self.in_layout}")
        out = L.get_layout(self.out_layout)
        if out.is_int8 or out.is_texture:
            raise ValueError(f"q8ta_dequantize writes a float buffer layout, got {out.name}")
        _check_qparams(self.scale, self.zero_point, "dequantize")

    @property
    def defines(self) -> dict:
        return {}

    def spec_constants(self) -> dict:
        return {3: L.get_layout(self.in_layout).spec_constant(), 4: L.get_layout(self.out_layout).spec_constant()}

    def push_constants(self) -> bytes:
        return np.array([self.scale], np.float32).tobytes() + np.array([self.zero_point], np.int32).tobytes()

    def metadata(self) -> tuple[bytes, bytes]:
        return (L.get_layout(self.out_layout).buffer_metadata(self.sizes),
                L.get_layout(self.in_layout).buffer_metadata(self.sizes))

    @property
    def threads(self) -> int:
        return int(np.prod(self.sizes))

    def global_size(self, device=None):
        if device is None:
            return (math.ceil(self.threads / LOCAL_SIZE[0]) * LOCAL_SIZE[0], 1, 1)
        return linear_global_size(device, self.threads, LOCAL_SIZE[0])

    def bytes_read(self) -> int:
        return 4 * _touched_words(L.get_layout(self.in_layout), self.sizes)

    def bytes_written(self) -> int:
        return 4 * self.threads

    def bytes_moved(self) -> int:
        return self.bytes_read() + self.bytes_written()

    def reference(self, q) -> np.ndarray:
        a = np.asarray(q)
        return ((a.astype(np.int32) - np.int32(self.zero_point)).astype(np.float32)
                * np.float32(self.scale)).astype(np.float32)


@dataclass(frozen=True)
class Q8taQuantizeSpec:
    """fp32 buffer (any float buffer layout) → int8x4 (any int8 layout); one thread per output word (all words,
    padding included: padding lanes get the zero point)."""

    sizes: tuple
    in_layout: str = "WIDTH_PACKED"
    out_layout: str = "4W4C"
    scale: float = 1.0
    zero_point: int = 0

    shader = QUANTIZE_SHADER
    dispatches = 1
    local_size = LOCAL_SIZE

    def __post_init__(self):
        object.__setattr__(self, "sizes", L.normalize_sizes(self.sizes))
        lay = L.get_layout(self.in_layout)
        if lay.is_int8 or lay.is_texture:
            raise ValueError(f"q8ta_quantize reads a float buffer layout, got {lay.name}")
        if not L.get_layout(self.out_layout).is_int8:
            raise ValueError(f"q8ta_quantize writes an int8x4 layout, got {self.out_layout}")
        _check_qparams(self.scale, self.zero_point, "quantize")

    @property
    def defines(self) -> dict:
        return {}

    def spec_constants(self) -> dict:
        """3 input layout, 4 output layout; the float input is addressed through its metadata strides alone, so
        the compiler drops constant 3 and it is not passed."""
        return {4: L.get_layout(self.out_layout).spec_constant()}

    def push_constants(self) -> bytes:
        return inverse_scale(self.scale).tobytes() + np.array([self.zero_point], np.int32).tobytes()

    def metadata(self) -> tuple[bytes, bytes]:
        return (L.get_layout(self.out_layout).buffer_metadata(self.sizes),
                L.get_layout(self.in_layout).buffer_metadata(self.sizes))

    @property
    def threads(self) -> int:
        return L.get_layout(self.out_layout).num_words(self.sizes)

    def global_size(self, device=None):
        if device is None:
            return (math.ceil(self.threads / LOCAL_SIZE[0]) * LOCAL_SIZE[0], 1, 1)
        return linear_global_size(device, self.threads, LOCAL_SIZE[0])

    def bytes_read(self) -> int:
        return 4 * int(np.prod(self.sizes))

    def bytes_written(self) -> int:
        return 4 * self.threads

    def bytes_moved(self) -> int:
        return self.bytes_read() + self.bytes_written()

    def reference(self, x) -> np.ndarray:
        """ET-VK's order: clamp(roundEven(x * inv_scale) + zp)."""
        s = (np.asarray(x, dtype=np.float32) * inverse_scale(self.scale)).astype(np.float32)
        return np.clip(np.rint(s).astype(np.int64) + int(self.zero_point), -128, 127).astype(np.int8)


@dataclass(frozen=True)
class Q8taPixelShuffleChainSpec:
    """The decomposed chain the fused kernel replaces: dequantize → float pixel shuffle → quantize, 3 dispatches,
    each with its own output buffer (fp32 intermediates in ``float_layout``, a contiguous buffer by default, as
    ET-VK's dequantize emits for buffers)."""

    fused: Q8taPixelShuffleSpec
    float_layout: str = "WIDTH_PACKED"

    def __post_init__(self):
        lay = L.get_layout(self.float_layout)
        if lay.is_int8 or lay.is_texture:
            raise ValueError(f"the chain's intermediates are float buffers, got {lay.name}")
        object.__setattr__(self, "float_layout", lay.name)

    @property
    def stages(self):
        f = self.fused
        packed = {L.W: "width", L.H: "height", L.C: "channels"}[L.get_layout(self.float_layout).packed_dim]
        return (Q8taDequantizeSpec(f.in_sizes, f.in_layout, self.float_layout, f.in_scale, f.in_zero_point),
                PixelShuffleSpec(f.in_sizes, f.r, "buffer", packed, "float32"),
                Q8taQuantizeSpec(f.out_sizes, self.float_layout, f.out_layout, f.out_scale, f.out_zero_point))

    @property
    def dispatches(self) -> int:
        return 3

    @property
    def threads(self) -> int:
        return sum(s.threads for s in self.stages)

    def bytes_read(self) -> int:
        return sum(s.bytes_read() for s in self.stages)

    def bytes_written(self) -> int:
        return sum(s.bytes_written() for s in self.stages)

    def bytes_moved(self) -> int:
        return sum(s.bytes_moved() for s in self.stages)

    def macs(self) -> int:
        return 0

    def reference(self, q) -> np.ndarray:
        """Stage by stage; equal to the fused kernel's result (the same fp32 operations in the same order)."""
        deq, _, quant = self.stages
        a = np.asarray(q.detach().cpu().numpy() if hasattr(q, "detach") else q).reshape(self.fused.in_sizes)
        return quant.reference(pixel_shuffle_reference(deq.reference(a), self.fused.r))


# ---------------------------------------------------------------------------------------------------------------------
# Runners: a spec bound to device resources
# ---------------------------------------------------------------------------------------------------------------------

def _as_numpy(x):
    if hasattr(x, "detach"):
        return x.detach().cpu().contiguous().numpy()
    return np.ascontiguousarray(x)


def _to_torch(a):
    import torch
    return torch.from_numpy(np.ascontiguousarray(a))


def _random_words(count: int, seed: int = 0) -> np.ndarray:
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
                a = _as_numpy(x).astype(spec.np_dtype, copy=False).reshape(spec.in_sizes)
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
            out_meta, in_meta = spec.metadata()
            self.out_meta = self._own(device.uniform(np.frombuffer(out_meta, np.uint8), name="ps-out-meta"))
            self.in_meta = self._own(device.uniform(np.frombuffer(in_meta, np.uint8), name="ps-in-meta"))
        except Exception:
            self.close()
            raise

    def record(self, rec, label: str | None = None):
        self._dispatch(rec, self.spec, [self.out, self.inp, self.out_meta, self.in_meta], label or self.spec.variant)

    def output(self):
        """The result as an NCHW torch tensor (4-D)."""
        spec, lay = self.spec, self.spec.layout
        if spec.storage == "texture":
            return _to_torch(lay.from_texels(self.out.download(), spec.out_sizes))
        flat = self.out.download(spec.np_dtype, (int(np.prod(spec.out_sizes)),))
        return _to_torch(lay.from_buffer(flat, spec.out_sizes))


class Q8taPixelShuffleRun(KernelRun):
    """The fused kernel on a device.  ``q``: int8 NCHW tensor, or None for random words (benchmarks)."""

    def __init__(self, device, spec: Q8taPixelShuffleSpec, q=None, seed: int = 0):
        super().__init__(device)
        self.spec = spec
        try:
            self.inp = self._own(device.buffer(_packed_input(spec.in_layout, spec.in_sizes, q, seed), name="q8ps-in"))
            out_words = L.get_layout(spec.out_layout).num_words(spec.out_sizes)
            self.out = self._own(device.buffer(nbytes=4 * out_words, name="q8ps-out"))
            out_meta, in_meta = spec.metadata()
            self.out_meta = self._own(device.uniform(np.frombuffer(out_meta, np.uint8), name="q8ps-out-meta"))
            self.in_meta = self._own(device.uniform(np.frombuffer(in_meta, np.uint8), name="q8ps-in-meta"))
        except Exception:
            self.close()
            raise

    def record(self, rec, label: str | None = None):
        if self.spec.pair_store and self.spec.tile_co >= self.device.info.subgroup_size:
            raise ValueError(f"pair_store swaps blocks between lanes tile_co = {self.spec.tile_co} apart: it needs "
                             f"a subgroup wider than that; {self.device.info.name} has "
                             f"{self.device.info.subgroup_size} lanes")
        self._dispatch(rec, self.spec, [self.out, self.inp, self.out_meta, self.in_meta], label or self.spec.variant)

    def output_words(self) -> np.ndarray:
        return self.out.download(np.int32)

    def output(self):
        return _to_torch(L.get_layout(self.spec.out_layout).unpack(self.output_words(), self.spec.out_sizes))


def _packed_input(layout, sizes, q, seed):
    lay = L.get_layout(layout)
    if q is None:
        return _random_words(lay.num_words(sizes), seed)
    a = _as_numpy(q)
    if a.dtype != np.int8:
        raise TypeError(f"expected an int8 tensor, got dtype {a.dtype}")
    return lay.pack(a.reshape(sizes))


class Q8taChainRun(KernelRun):
    """The decomposed chain on a device: 3 dispatches, buffers q_in → f_in → f_out → q_out."""

    LABELS = (DEQUANTIZE_SHADER, "pixel_shuffle_buffer_float", QUANTIZE_SHADER)

    def __init__(self, device, spec: Q8taPixelShuffleChainSpec, q=None, seed: int = 0):
        super().__init__(device)
        self.spec = spec
        f = spec.fused
        deq, ps, quant = spec.stages
        self.stage_specs = (deq, ps, quant)
        try:
            self.inp = self._own(device.buffer(_packed_input(f.in_layout, f.in_sizes, q, seed), name="chain-q-in"))
            self.f_in = self._own(device.buffer(nbytes=4 * int(np.prod(f.in_sizes)), name="chain-f-in"))
            self.f_out = self._own(device.buffer(nbytes=4 * int(np.prod(f.out_sizes)), name="chain-f-out"))
            self.out = self._own(device.buffer(nbytes=4 * quant.threads, name="chain-q-out"))
            self.metas = []
            for s in self.stage_specs:
                o, i = s.metadata()
                self.metas.append((self._own(device.uniform(np.frombuffer(o, np.uint8))),
                                   self._own(device.uniform(np.frombuffer(i, np.uint8)))))
        except Exception:
            self.close()
            raise

    def record(self, rec, label: str | None = None):
        ios = ((self.f_in, self.inp), (self.f_out, self.f_in), (self.out, self.f_out))
        for s, (o, i), (mo, mi), lab in zip(self.stage_specs, ios, self.metas, self.LABELS):
            self._dispatch(rec, s, [o, i, mo, mi], lab if label is None else f"{label}:{lab}")

    def output_words(self) -> np.ndarray:
        return self.out.download(np.int32)

    def intermediate(self, which: str = "in"):
        """The fp32 intermediate ("in": after dequantize, "out": after the float pixel shuffle) as NCHW torch."""
        f = self.spec.fused
        sizes = f.in_sizes if which == "in" else f.out_sizes
        buf = self.f_in if which == "in" else self.f_out
        lay = L.get_layout(self.spec.float_layout)
        return _to_torch(lay.from_buffer(buf.download(np.float32, (int(np.prod(sizes)),)), sizes))

    def output(self):
        f = self.spec.fused
        return _to_torch(L.get_layout(f.out_layout).unpack(self.output_words(), f.out_sizes))


# ---------------------------------------------------------------------------------------------------------------------
# Benchmarks
# ---------------------------------------------------------------------------------------------------------------------

#: ET-VK's PERF cases (test_q8ta_pixel_shuffle.cpp): the RefineNet decoder, inputs [1,96,H,W] → outputs
#: [1,24,32,18], [1,24,64,36], [1,24,128,72], [1,24,256,144]; r = 2.
PERF_SHAPES = (((1, 96, 16, 9), 2), ((1, 96, 32, 18), 2), ((1, 96, 64, 36), 2), ((1, 96, 128, 72), 2))
#: Large shapes: int8 tensors of 18 MiB and 64 MiB (the fp32 tensors of the chain and float kernels 4× that).
#: At 18 MiB input + output still fit in an H200's 50 MB L2; 64 MiB is DRAM-bound.
LARGE_SHAPES = (((1, 96, 512, 384), 2), ((1, 256, 512, 512), 2))
#: quick=True (tests): tiny shapes, one with r = 3 and C_out not a multiple of 4.
QUICK_SHAPES = (((1, 16, 4, 4), 2), ((2, 18, 3, 5), 3))
#: ET-VK's layout pairs (4W4C / 4C1W) plus 4C → 4C.
BENCH_LAYOUT_PAIRS = (("4W4C", "4W4C"), ("4W4C", "4C1W"), ("4C1W", "4W4C"), ("4C1W", "4C1W"), ("4C", "4C"))
#: The block kernel: every channels-packed pair.
BLOCK_LAYOUT_PAIRS = tuple((a, b) for a in FUSED_LAYOUTS for b in FUSED_LAYOUTS)
#: ET-VK's test qparams: same_qp (passthrough) and diff_qp (requantize).
SAME_QP = (0.007112, 0, 0.007112, 0)
DIFF_QP = (0.007112, 0, 0.013, 5)
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
    # the 18 MiB shape is large enough there.
    large = LARGE_SHAPES[:1] if cpu_device else LARGE_SHAPES
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
                    spec = Q8taPixelShuffleSpec(shape, r, in_l, out_l, *qp, block=True)
                    cases.append(_Case("fused", set_name, spec))
                    if spec.pixel_tile:  # the 4-width tile with word stores, to compare
                        cases.append(_Case("fused", set_name, Q8taPixelShuffleSpec(shape, r, in_l, out_l, *qp,
                                                                                   block=True, pixel_tile=False)))
                if not cpu_device:  # shared-memory tables: built per workgroup, far too slow on a CPU device
                    cases.append(_Case("fused", set_name, Q8taPixelShuffleSpec(shape, r, in_l, out_l, *DIFF_QP,
                                                                               block=True, lut=True)))
                    cases.append(_Case("fused", set_name, Q8taPixelShuffleSpec(shape, r, in_l, out_l, *DIFF_QP,
                                                                               block=True, lut=2, local_x=256)))
                if not quick and in_l == out_l:  # the transpose as two mask-and-shift stages; local size 256
                    for qp in (SAME_QP, DIFF_QP):
                        for kw in ({"swizzle": True}, {"local_x": 256}, {"swizzle": True, "local_x": 256}):
                            cases.append(_Case("fused", set_name, Q8taPixelShuffleSpec(shape, r, in_l, out_l, *qp,
                                                                                       block=True, **kw)))
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


def bench_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, shapes=None):
    """Pixel shuffle benchmarks on ``device`` → a tidy DataFrame (one row per measurement; rows also go to
    ``writer`` as they are measured).

    Rows (``impl``):

    * ``fused`` — the int8x4 kernel: ET-VK's layout pairs (and 4C → 4C) with passthrough qparams, 4W4C → 4W4C
      requantize; for 4W4C → 4W4C also the ``_rspec`` variant (r specialized instead of a push constant), both
      paths, and the ``_outorder`` variant (thread t writes output word t), passthrough;
    * ``chain`` — dequantize → float pixel shuffle → quantize (3 dispatches), passthrough and requantize qparams;
    * ``float`` — buffer / texture × W / H / C-packed fp32, and C-packed fp16;
    * ``torch`` — torch's pixel shuffle on the same device: float32, float16, int8, and the quantized
      dequantize → pixel_shuffle → quantize_per_tensor chain;
    * ``copy`` — :func:`workbench.bench.bench_copy` at the traffic of every kernel (a copy of half the bytes moved).

    Shapes: ET-VK's PERF shapes (RefineNet decoder outputs) and an 18 MiB int8 shape (``quick``: two tiny shapes,
    r = 2 and r = 3, few samples); ``shapes`` (a list of (input NCHW, r) from ``suite_shapes``) keeps only those
    (the distributed sweep runs one shape per work item).

    Columns beyond :func:`workbench.bench.measurement_row`'s: ``variant`` (shader variant), ``r_specialized``,
    ``output_order``,
    ``shape`` (input NCHW), ``out_shape``, ``r``, ``impl``, ``qpath`` (passthrough / requant), ``path`` (e.g.
    "fused-requant", "float-texture"), ``in_layout``, ``out_layout``, ``storage``, ``packed_dim``, ``dtype``,
    ``dispatches``, ``threads``, ``repeats``, ``bytes_read``, ``bytes_written``, ``copy_GBps`` (the best Vulkan copy
    at the same traffic: shader copy or vkCmdCopyBuffer), ``copy_fraction`` (GB/s / copy_GBps), ``shader_copy_GBps``
    and ``shader_copy_fraction`` (against the uvec4 shader copy alone: the roofline of a compute shader),
    ``torch_us`` and ``vs_torch`` (torch median / this median; > 1 = faster than torch), ``speedup_vs_chain`` on
    fused rows (chain median / fused median, same shape, qparams and layouts).
    """
    import pandas as pd

    from .. import bench

    env = bench.environment(device)
    cases = _bench_cases(quick, cpu_device=device.info.is_cpu, only=shapes)
    if quick:
        sample_kw = dict(min_time_s=0.005, min_samples=3, max_samples=5, warmup=1)
    else:
        sample_kw = dict(min_time_s=0.2)

    copies = bench.CopyAtTraffic(device, [c.spec.bytes_moved() for c in cases if c.spec is not None], quick=quick,
                                 show_progress=show_progress)
    copy_df = copies.frame
    copy_df["impl"] = "copy"
    copy_df["path"] = "copy"
    copy_df["shape_set"] = "copy"
    rows = []

    def emit(row):
        rows.append(row)
        if writer is not None:
            writer.append(row)

    for row in copy_df.to_dict("records"):
        emit(row)

    torch_us: dict = {}   # (shape, what) → median µs
    chain_us: dict = {}   # (shape, qpath, in_layout, out_layout) → median µs
    for case in bench.progress(cases, "pixel shuffle", enabled=show_progress):
        if case.kind == "torch":
            where, fn, sync, on_cuda, nbytes = _torch_timer(device, case.shape, case.r, case.what)
            samples = bench.sample_callable(fn, sync=sync, cuda_events=on_cuda, **sample_kw)
            row = bench.measurement_row(
                f"torch.pixel_shuffle ({where})", env, samples, bytes_moved=nbytes, shape=_shape_str(case.shape),
                out_shape=_shape_str(output_sizes(case.shape, case.r)), r=case.r, impl="torch",
                qpath="requant" if case.what == "quantized chain" else "", path=f"torch-{case.what}",
                storage="", packed_dim="", dtype=case.what, in_layout="", out_layout="", shape_set=case.shape_set,
                dispatches=0, threads=0, repeats=1, timer="cuda events" if on_cuda else "wall clock")
            torch_us[(row["shape"], case.what)] = row["median_us"]
            emit(row)
            continue
        spec = case.spec
        bytes_moved = spec.bytes_moved()
        reps = _repeats_for(bytes_moved, quick)
        runner_cls = {"float": PixelShuffleRun, "fused": Q8taPixelShuffleRun, "chain": Q8taChainRun}[case.kind]
        with runner_cls(device, spec) as run:
            with device.record(f"pixel shuffle {case.kind}") as rec:
                for _ in range(reps):
                    run.record(rec)
                gpu, host = bench.sample_recording(rec, repeats=reps, **sample_kw)
        info = dict(shape_set=case.shape_set, repeats=reps, dispatches=spec.dispatches, threads=spec.threads,
                    bytes_read=spec.bytes_read(), bytes_written=spec.bytes_written(), timer="vulkan timestamps")
        if case.kind == "float":
            kernel = "pixel_shuffle"
            info.update(variant=spec.variant, shape=_shape_str(spec.in_sizes), out_shape=_shape_str(spec.out_sizes),
                        r=spec.r, impl="float", qpath="", path=f"float-{spec.storage}", storage=spec.storage,
                        packed_dim=spec.packed_dim, dtype=spec.dtype, in_layout=spec.layout.name,
                        out_layout=spec.layout.name, r_specialized=True, global_size=str(spec.global_size(device)),
                        local_size=str(spec.local_size))
            torch_key = spec.dtype
        else:
            kernel = "q8ta_pixel_shuffle"
            f = spec if case.kind == "fused" else spec.fused
            info.update(variant=f.variant if case.kind == "fused" else " -> ".join(Q8taChainRun.LABELS),
                        r_specialized=f.specialize_r if case.kind == "fused" else False,
                        block=f.block if case.kind == "fused" else False,
                        lut=int(f.lut) if case.kind == "fused" else 0,
                        swizzle=f.swizzle if case.kind == "fused" else False,
                        pixel_tile=bool(f.pixel_tile) if case.kind == "fused" else False,
                        output_order=f.output_order if case.kind == "fused" else False,
                        shape=_shape_str(f.in_sizes), out_shape=_shape_str(f.out_sizes), r=f.r, impl=case.kind,
                        qpath=f.path, path=f"{case.kind}-{f.path}", storage="buffer", packed_dim="channels",
                        dtype="int8", in_layout=f.in_layout, out_layout=f.out_layout,
                        global_size=str(spec.global_size(device)) if case.kind == "fused" else "",
                        local_size=str(spec.local_size if case.kind == "fused" else LOCAL_SIZE))
            torch_key = "quantized chain" if f.path == "requant" else "int8"
        row = bench.measurement_row(kernel, env, gpu, host_ns=host, bytes_moved=bytes_moved, macs=0, **info)
        copies.annotate(row, bytes_moved)
        t = torch_us.get((row["shape"], torch_key), np.nan)
        row["torch_us"] = t
        row["vs_torch"] = t / row["median_us"]
        key = (row["shape"], row["qpath"], row["in_layout"], row["out_layout"])
        if case.kind == "chain":
            chain_us[key] = row["median_us"]
        row["speedup_vs_chain"] = chain_us.get(key, np.nan) / row["median_us"] if case.kind == "fused" else np.nan
        emit(row)
    return pd.DataFrame(rows)
