"""The block pixel shuffle (``q8ta_pixel_shuffle_block.glsl``): 16 words per thread, a 4×4 byte transpose in
registers, r = 2, every channels-packed pair (4W4C, 4C1W, 4C), with thread orders (``tile_co``), a 16-byte pixel
tile for 4C output (``pixel_widths=4``: 4 input widths a thread, 16-byte loads from 4C1W too), paired stores into
4C1W and the requantize paths (fp32 by magic numbers or conversions, tables, the integer line ``fixed`` and its
two-bytes-per-multiply form ``packed``); and the requantize math alone on a 16-byte copy
(``q8ta_requant_copy.glsl``), what that math costs where every access is a contiguous run. Their suites are
``workbench.benchmarks.pixel_shuffle.limit_suite`` and ``workbench.benchmarks.pixel_shuffle_gaps``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .. import layouts as L
from ..quant import inverse_scale
from . import KernelRun, linear_global_size
from .pixel_shuffle import (FUSED_LAYOUTS, LOCAL_SIZE, FusedPixelShuffleSpec, RequantPath, check_qparams, random_words,
                            requantize_reference)
from .requant_fixed import FixedRequant, require_fixed_point

BLOCK_SHADER = "q8ta_pixel_shuffle_block"
REQUANT_COPY_SHADER = "q8ta_requant_copy"
#: Below this many threads the block kernel (4 output words of 16 B per thread) underfills a large GPU: on the H200
#: it lost to the per-word kernel at 3,456 threads (1×96×64×36) and won from 13,824 (1×96×128×72) on.
BLOCK_MIN_THREADS = 8192


#: Block kernel thread orders (tile_co): 0 = channel block fastest; T = warps of T channel blocks x 32 / T widths.
TILE_CO_CHOICES = (0, 1, 2, 4, 8, 16, 32)
#: Block kernel local sizes (x; y = z = 1).
LOCAL_X_CHOICES = (32, 64, 128, 256, 512)
#: Requantize paths: lut 0 = none (arithmetic), 1 = a 256-entry table in shared memory, 2 = the same 32x interleaved.
LUT_CHOICES = (0, 1, 2)
#: Staged 4C1W input (stage): width blocks per workgroup tile (local size 16 x stage); 0 = not staged.
STAGE_CHOICES = (0, 4, 8, 16)
#: Pixel tile (pixel_widths): input widths per thread, 1 (4-byte loads from 4C1W) or 4 (16-byte loads, 256 bytes).
PIXEL_WIDTHS_CHOICES = (1, 4)


def fixed_form_of(spec) -> FixedRequant | None:
    """`spec.fixed` on a requantizing spec: its integer line (refused where none is exact; the two-lane form's
    where `spec.packed`), else None."""
    if not spec.fixed or spec.passthrough:
        return None
    return require_fixed_point(spec.in_scale, spec.in_zero_point, spec.out_scale, spec.out_zero_point,
                               packed=spec.packed)


def check_packed(spec) -> None:
    """`packed` runs the `fixed` line two bytes per multiply: it needs `fixed`, and (on requantizing qparams) a line
    of the two-lane form, refused by name where there is none."""
    object.__setattr__(spec, "packed", bool(spec.packed))
    if spec.packed and not spec.fixed:
        raise ValueError("packed runs the fixed requantize two bytes per multiply: it needs fixed=True")


def fixed_push_constants(spec) -> bytes:
    """The 12 bytes every requantizing shader of this module ends its push constants with: fixed_mul, fixed_add,
    fixed_shift of the integer requantize (zeros unless `spec.fixed` on a requantizing spec)."""
    form = spec.fixed_form
    return np.array(form.push_values() if form else (0, 0, 0), np.int32).tobytes()


def default_tile_co(in_layout: str, out_layout: str, channel_blocks: int) -> int:
    """The block kernel's thread order for a layout pair: where a side is 4C1W (its channel blocks lie W words apart)
    warps of 4 channel blocks x 8 width blocks (runs of 128-256 contiguous bytes on both sides), fewer channel
    blocks where the tensor has fewer (`channel_blocks`: output channel blocks, or groups of 4 of them for the pixel
    tile; padding threads would idle); else channel block fastest (4W4C and 4C keep neighbouring channel blocks
    adjacent)."""
    if "4C1W" not in (in_layout, out_layout):
        return 0
    return min(4, 1 << (max(int(channel_blocks), 1).bit_length() - 1))


def fixed_defines(spec) -> dict:
    """REQUANT_FIXED (and REQUANT_FIXED_CLAMP 0 where the host proved no input saturates) for `spec.fixed`;
    REQUANT_PACKED for `spec.packed`."""
    if not spec.fixed:
        return {}
    form = spec.fixed_form
    return {"REQUANT_FIXED": True, "REQUANT_FIXED_CLAMP": bool(form.clamp) if form else True,
            **({"REQUANT_PACKED": True} if spec.packed else {})}


def fixed_suffix(spec) -> str:
    form = spec.fixed_form if spec.fixed else None
    return "" if not spec.fixed else ("_fixsat" if form is not None and form.clamp else
                                      "_fix2" if spec.packed else "_fix")


def block_applies(in_layout, out_layout, r) -> bool:
    """Whether the block kernel covers this case: any channels-packed pair (4W4C, 4C1W, 4C), r = 2."""
    try:
        return (L.get_layout(in_layout).name in FUSED_LAYOUTS and L.get_layout(out_layout).name in FUSED_LAYOUTS
                and r == 2)
    except ValueError:  # unknown layouts get their error from the spec
        return False



@dataclass(frozen=True)
class Q8taPixelShuffleBlockSpec(FusedPixelShuffleSpec):
    """The block pixel shuffle: 16 words per thread, a 4×4 byte transpose in registers, r = 2, any channels-packed
    pair; its options choose the thread order, the tile and the requantize path."""

    lut: int = 0                     # requant path: 1 a 256-entry table in shared memory, 2 the same 32×
                                     # interleaved (no bank conflicts; 32 KB)
    swizzle: bool = False            # two-stage 4x4 byte transpose (masks and shifts per pair)
    local_x: int = LOCAL_SIZE[0]     # local size (ET-VK's 64 elsewhere)
    pixel_tile: bool | None = None   # 4C output: one thread per input pixel x 4 output channel blocks (16-byte
                                     # stores); None: wherever C4_out % 4 == 0
    tile_co: int | None = None       # warps as tile_co channel blocks x 32 / tile_co width blocks (0: channel block
                                     # fastest); None: default_tile_co of the pair
    convert: bool = False            # requant without a table: int <-> float conversion instructions (the first
                                     # version) instead of the magic-number arithmetic (same results)
    pair_store: bool = False         # 4C1W output: neighbouring lanes swap a block so that every store instruction
                                     # writes whole 32-byte sectors (needs tile_co < subgroup)
    fixed: bool = False              # requant as one integer multiply-add + shift per byte (requant_fixed: proven
                                     # exact on the host for these qparams, refused where no integer line fits)
    stage: int = 0                   # 4C1W input: stage the input through shared memory, workgroup tiles of
                                     # 16 output channel blocks x `stage` width blocks (4, 8, 16; local size
                                     # 16 x stage): loads read whole 128-byte lines, stores keep co fastest
    pixel_widths: int = 1            # pixel tile: input widths per thread; 4: 16-byte loads of 4 widths (4C1W,
                                     # 4W4C) or 4 channel blocks (4C), 256 bytes a thread; needs the pixel tile
    packed: bool = False             # fixed requant two bytes per 32 x 32 -> 64-bit multiply (a line whose two
                                     # lanes do not overlap; refused where none is exact)
    diagnostic: int = 0              # 4-width tile into 4C, wrong by design: 1 loads only, 2 stores only

    def __post_init__(self):
        super().__post_init__()
        if self.diagnostic not in (0, 1, 2):
            raise ValueError(f"diagnostic is 0, 1 (loads only) or 2 (stores only), got {self.diagnostic!r}")
        if self.diagnostic and (self.out_layout != "4C" or self.pixel_tile):
            raise ValueError(f"the diagnostic builds exist for the 4-width tile into 4C (the pair short of copy), "
                             f"got {self.in_layout} → {self.out_layout}, pixel_tile={self.pixel_tile}")
        if not block_applies(self.in_layout, self.out_layout, self.r):
            raise ValueError(f"the block kernel needs r = 2, got r = {self.r} ({self.in_layout} → "
                             f"{self.out_layout})")
        if self.lut not in LUT_CHOICES:
            raise ValueError(f"lut must be 0 (none), 1 (table) or 2 (bank-interleaved table), got {self.lut!r}")
        object.__setattr__(self, "lut", int(self.lut))
        object.__setattr__(self, "swizzle", bool(self.swizzle))
        object.__setattr__(self, "stage", int(self.stage))
        if self.stage not in STAGE_CHOICES:
            raise ValueError(f"stage must be one of {STAGE_CHOICES} (width blocks per staged tile; 0: off), "
                             f"got {self.stage!r}")
        if self.stage:
            if self.in_layout != "4C1W":
                raise ValueError(f"stage stages 4C1W input through shared memory; got input layout {self.in_layout}")
            if self.pixel_tile or self.tile_co or self.pair_store:  # None (the defaults) passes
                raise ValueError(f"stage has its own thread order: it takes no pixel_tile, tile_co or pair_store; "
                                 f"got pixel_tile={self.pixel_tile}, tile_co={self.tile_co}, "
                                 f"pair_store={self.pair_store}")
            if self.local_x not in (LOCAL_SIZE[0], 16 * self.stage):
                raise ValueError(f"stage={self.stage} sets the local size to 16 x {self.stage} = {16 * self.stage}; "
                                 f"got local_x={self.local_x}")
            object.__setattr__(self, "pixel_tile", False)
            object.__setattr__(self, "tile_co", 0)
            object.__setattr__(self, "local_x", 16 * self.stage)
        aligned_4c = self.out_layout == "4C" and math.ceil(self.out_sizes[1] / 4) % 4 == 0
        if self.pixel_widths not in PIXEL_WIDTHS_CHOICES:
            raise ValueError(f"pixel_widths must be one of {PIXEL_WIDTHS_CHOICES} (input widths per pixel-tile "
                             f"thread), got {self.pixel_widths!r}")
        object.__setattr__(self, "pixel_widths", int(self.pixel_widths))
        if self.pixel_widths != 1 and self.pixel_tile is False:
            raise ValueError(f"pixel_widths={self.pixel_widths} widens the pixel tile: it needs pixel_tile, "
                             f"got pixel_tile=False")
        if self.pixel_tile is None:
            object.__setattr__(self, "pixel_tile", bool(aligned_4c))
        elif self.pixel_tile and not aligned_4c:
            raise ValueError(f"pixel_tile needs the block kernel, 4C output and C_out blocks in fours (C4_out % 4 "
                             f"== 0); got {self.in_layout} → {self.out_layout}, C_out = {self.out_sizes[1]}")
        if self.pixel_widths != 1 and not self.pixel_tile:
            raise ValueError(f"pixel_widths={self.pixel_widths} widens the pixel tile, which needs 4C output with "
                             f"C4_out % 4 == 0; got {self.in_layout} → {self.out_layout}, C_out = {self.out_sizes[1]}")
        if self.local_x not in LOCAL_X_CHOICES:
            raise ValueError(f"local_x must be one of {LOCAL_X_CHOICES}, got {self.local_x}")
        if self.tile_co is None:
            c4_out = math.ceil(self.out_sizes[1] / 4)
            channel_blocks = c4_out // 4 if self.pixel_tile else c4_out
            object.__setattr__(self, "tile_co", default_tile_co(self.in_layout, self.out_layout, channel_blocks))
        if self.tile_co not in TILE_CO_CHOICES:
            raise ValueError(f"tile_co must be one of {TILE_CO_CHOICES} (0: channel block fastest), "
                             f"got {self.tile_co!r}")
        object.__setattr__(self, "convert", bool(self.convert))
        object.__setattr__(self, "pair_store", bool(self.pair_store))
        if self.pair_store and not (self.out_layout == "4C1W" and self.vector_access[1]
                                    and 0 < self.tile_co < 32 and not self.pixel_tile):
            raise ValueError(f"pair_store needs the block kernel writing 16-byte blocks into 4C1W (output width a "
                             f"multiple of 4) with 0 < tile_co < 32; got {self.in_layout} → {self.out_layout}, "
                             f"output width {self.out_sizes[3]}, tile_co {self.tile_co}")
        if self.convert and self.lut:
            raise ValueError("convert picks the arithmetic requantize path; a lut replaces it (choose one)")
        object.__setattr__(self, "fixed", bool(self.fixed))
        if self.fixed and (self.convert or self.lut):
            raise ValueError(f"fixed is a requantize path of its own: it takes neither convert nor lut; got "
                             f"convert={self.convert}, lut={self.lut}")
        check_packed(self)
        if self.fixed and not self.passthrough:  # refused where no exact integer line exists for these qparams
            fixed_form_of(self)

    @property
    def fixed_form(self) -> FixedRequant | None:
        """The integer requantize (mul, add, shift, clamp) for `fixed` on a requantizing spec, else None."""
        return fixed_form_of(self)

    def push_constants(self) -> bytes:
        """36 bytes: the shared 24 (scales, zero points, r, passthrough), then fixed_mul, fixed_add, fixed_shift."""
        return super().push_constants() + fixed_push_constants(self)

    shader = BLOCK_SHADER

    def check_device(self, device) -> None:
        if self.pair_store and self.tile_co >= device.info.subgroup_size:
            raise ValueError(f"pair_store swaps blocks between lanes tile_co = {self.tile_co} apart: it needs "
                             f"a subgroup wider than that; {device.info.name} has "
                             f"{device.info.subgroup_size} lanes")

    @property
    def vector_access(self) -> tuple[bool, bool]:
        """(16-byte loads, 16-byte stores) — where a whole 4-word block is contiguous and aligned: 4W4C always; 4C1W
        when the width is a multiple of 4; 4C when its channel blocks come in fours (C4 % 4 == 0; output: with
        `pixel_tile`, else one word per output pixel, neighbouring threads writing neighbouring words)."""
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
        vec_in, vec_out = self.vector_access
        return {"IN_LAYOUT": FUSED_LAYOUTS.index(self.in_layout),
                "OUT_LAYOUT": FUSED_LAYOUTS.index(self.out_layout),
                "VEC_IN": vec_in, "VEC_OUT": vec_out, "REQUANT_LUT": int(self.lut), "SWIZZLE": self.swizzle,
                "PIXEL_TILE": self.pixel_tile, "TILE_CO": self.tile_co, "REQUANT_CONVERT": self.convert,
                "PAIR_STORE": self.pair_store, "STAGE_IN": self.stage,
                **({"PIXEL_W": self.pixel_widths} if self.pixel_widths != 1 else {}),
                **({"DIAG": self.diagnostic} if self.diagnostic else {}), **fixed_defines(self)}

    @property
    def variant(self) -> str:
        vec_in, vec_out = self.vector_access
        pair = "" if (self.in_layout, self.out_layout) == ("4W4C", "4W4C") else \
            f"_{self.in_layout}_{self.out_layout}"  # 4W4C → 4W4C keeps the landed kernel's name
        return (f"{BLOCK_SHADER}{pair}" + {0: "", 1: "_lut", 2: "_lut32"}[self.lut]
                + ("_swizzle" if self.swizzle else "") + ("_pixel" if self.pixel_tile else "")
                + (f"_pw{self.pixel_widths}" if self.pixel_widths != 1 else "")
                + ("" if vec_in else "_wordin")
                + ("" if vec_out else "_wordout") + (f"_l{self.local_x}" if self.local_x != 64 else "")
                + (f"_t{self.tile_co}" if self.tile_co else "") + ("_cvt" if self.convert else "")
                + ("_pair" if self.pair_store else "") + (f"_stage{self.stage}" if self.stage else "")
                + fixed_suffix(self) + {0: "", 1: "_diag_loads", 2: "_diag_stores"}[self.diagnostic])

    def spec_constants(self) -> dict:
        """None: the layouts are compile-time defines."""
        return {}

    @property
    def threads(self) -> int:
        """One per (n, ih, iw, 4 output channel blocks) (the pixel tile) or (n, ih, input width block, channel
        block), in whole tiles of tile_co x 32 / tile_co."""
        n, _, h, w = self.in_sizes
        c4_out = math.ceil(self.out_sizes[1] / 4)
        if self.stage:  # whole workgroups of (row, stage width blocks, 16 channel blocks)
            return n * h * math.ceil(math.ceil(w / 4) / self.stage) * math.ceil(c4_out / 16) * self.local_x
        channel, width = (c4_out // 4, math.ceil(w / self.pixel_widths)) if self.pixel_tile else \
            (c4_out, math.ceil(w / 4))
        if self.tile_co:
            tile_w = 32 // self.tile_co
            channel = math.ceil(channel / self.tile_co) * self.tile_co
            width = math.ceil(width / tile_w) * tile_w
        return n * h * channel * width

    @property
    def local_size(self) -> tuple[int, int, int]:
        return (self.local_x, 1, 1)

    def with_shape(self, in_sizes) -> "Q8taPixelShuffleBlockSpec":
        """The same kernel (variant, options, qparams) at another input shape."""
        return replace(self, in_sizes=in_sizes)


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
    fixed: bool = False              # the integer requantize of the block kernel's `fixed` (same math)
    packed: bool = False             # and its two-bytes-per-multiply form (the block kernel's `packed`)

    shader = REQUANT_COPY_SHADER
    dispatches = 1

    def __post_init__(self):
        if int(self.nbytes) <= 0 or int(self.nbytes) % 16:
            raise ValueError(f"requant copy needs a positive multiple of 16 bytes, got {self.nbytes}")
        check_qparams(self.in_scale, self.in_zero_point, "input")
        check_qparams(self.out_scale, self.out_zero_point, "output")
        object.__setattr__(self, "fixed", bool(self.fixed))
        if self.fixed and self.convert:
            raise ValueError("fixed is a requantize path of its own: it takes no convert")
        check_packed(self)
        if self.fixed and not self.passthrough:  # refused where no exact integer line exists for these qparams
            fixed_form_of(self)

    @property
    def fixed_form(self) -> FixedRequant | None:
        """The integer requantize (mul, add, shift, clamp) for `fixed` on a requantizing spec, else None."""
        return fixed_form_of(self)

    @property
    def variant(self) -> str:
        return REQUANT_COPY_SHADER + ("_cvt" if self.convert else "") + fixed_suffix(self)

    @property
    def defines(self) -> dict:
        return {"REQUANT_CONVERT": bool(self.convert), **fixed_defines(self)}

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
                           np.int32).tobytes() + fixed_push_constants(self))

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
            words = random_words(spec.nbytes // 4, seed) if q is None else \
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


def fused_spec(*args, block: bool = False, **options) -> FusedPixelShuffleSpec:
    """The per-word fused kernel's spec, or the block kernel's where `block`: one switch for callers that offer
    both (``ops.q8ta_pixel_shuffle(block=...)``)."""
    from .pixel_shuffle import Q8taPixelShuffleSpec
    return (Q8taPixelShuffleBlockSpec if block else Q8taPixelShuffleSpec)(*args, **options)
