"""Pointwise int8 convolution (`q8ta_conv2d_pw`, etvk.md §3) with tunable accumulator tiles.

    spec = ConvPwSpec(ConvPwShape(1, 96, 96, 64, 64), tile_m=1, tile_n4=2, tile_k4=1, out_layout="4C1W")
    packed = prepack_weights(weight_int8, weight_scales, bias)          # host-side prepack (tile-independent)
    with ConvPwBuffers(device, spec, q_input, packed) as bufs:
        out = bufs.run(spec, qparams)                                     # int8 NCHW numpy array

Sweeps over tiles and shapes, with registers and occupancy columns, are `workbench.benchmarks.conv`.

The kernel (shaders/q8ta_conv2d_pw.glsl, variants in shaders/q8ta_conv2d_pw.yaml):
* one thread computes 4·TILE_M output widths × 4·TILE_N4 output channels of one output row, holding
  16·TILE_M·TILE_N4 int32 accumulators; per inner step it loads TILE_K4 × (TILE_M input blocks + TILE_N4 weight
  blocks) of 16 bytes each, then does the packed int8 dot products (`dot4x8_acc_sat`: OpSDotAccSat when
  `use_dot_ext`, else the portable int32 fallback of shaders/include/int8_dot.glslh);
* TILE_M, TILE_N4, TILE_K4 ∈ {1, 2, 4} are compile-time defines: every combination is its own SPIR-V;
* dispatch: global (ceil(OC4 / TILE_N4), ceil(W4 / TILE_M), N·H); local size by ET-VK's rule (8, 8, 1) when
  both x and y ≥ 6, else (4, 16, 1) when x < 6, else (16, 4, 1);
* operand addressing (`addressing`, ADDRESSINGS): "indexed" (default, as landed: every load's index computed in
  the K loop, the input's clamped to IC4 − 1) or "hoisted" (per-tile base indices computed once and advanced by a
  constant per step, loads at loop-invariant offsets; the one partial step is a peeled, clamped tail). Each is
  its own SPIR-V (defines HOIST_ADDRESSES, WEIGHT_K_INNER), with the `operands="registers"` diagnostic too.

Weight prepack (choice: a **storage buffer** of ivec4, not ET-VK's RGBA32I texture — int8 tensors are buffer-only
in the workbench's own kernels; the bytes per load are the same 16), in one of WEIGHT_ORDERS (`weight_order`):
"k4_oc4" (default): element [k4·OC4P + oc4] holds, in component j, the 4 weights w[4·oc4 + j, 4·k4 + b] (byte b =
input channel 4·k4 + b) — ET-VK's texel (x = oc4, y = k4); "oc4_k4": the same blocks at [oc4·IC4P + k4], so one
output block's input-channel blocks are consecutive and a thread's TILE_K4 weight blocks of one step are one
contiguous 16·TILE_K4-byte run (constant offsets from one base). OC4P and IC4P = OC4 and IC4 rounded up to multiples of 4
(zero-filled), so the same prepacked weights serve every TILE_N4 and TILE_K4: the last K step of a TILE_K4 > 1
kernel reads zero weights past IC4 (and a clamped, valid input block), which adds nothing, so the kernel needs no
remainder loop. Weight sums (int32), weight scales and bias (fp32) are padded to OC4P·4 the same way.

Requantization (fp32, one correctly rounded operation per step, in this order; the reference below reproduces
it bit for bit):
    adj   = acc − input_zp · Σ_ic w[oc, ic]                       (int32)
    scale = fp32(weight_scale[oc] · input_scale)
    f     = fp32(fp32(fp32(adj) · scale) + bias[oc])               (no add without bias; `precise`: never fused)
    f     = max(f, 0)                                              (ReLU)
    q     = clamp(roundEven(fp32(f · (1/output_scale))) + output_zp, −128, 127)
1/output_scale is computed on the host in fp32 (as ET-VK passes output_inv_scale). ET-VK writes
fma(adj, scale, bias) instead; Vulkan lets fma() be fused or not (lavapipe does not fuse it), so that form can
differ by 1 LSB between devices, while a multiply then an add is correctly rounded everywhere. (Measured: with
fma, or with spirv-opt's unroller dropping `precise` and re-fusing, an H200 and lavapipe disagree on 1 output in
~800k; as written, both match the reference exactly.) roundEven is round half to even (ET-VK's round() leaves the
.5 case to the implementation). Outputs are written for logical widths only; padded channel lanes of a written
word hold output_zp.
"""
from __future__ import annotations

import itertools
import math
import struct
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import layouts as L
from ..quant import inverse_scale
from ..toolchain.shaders import variants
from . import DeviceResources, pipeline_for
from .workgroups import pick_hw_square_wg_size as pick_local_size  # ET-VK's rule for this kernel

SHADER = "q8ta_conv2d_pw"
TILE_VALUES = (1, 2, 4)
ALL_TILES = tuple(itertools.product(TILE_VALUES, TILE_VALUES, TILE_VALUES))  # (tile_m, tile_n4, tile_k4)
INPUT_LAYOUT = "4W4C"
OUTPUT_LAYOUTS = ("4W4C", "4C1W", "4C")
WEIGHT_ORDERS = ("k4_oc4", "oc4_k4")  # prepacked element [k4·OC4P + oc4] (ET-VK's texel order) or [oc4·IC4P + k4]
ADDRESSINGS = ("indexed", "hoisted")
BINDINGS = ("out", "inp", "weight", "weight_sums", "weight_scales", "bias", "out_meta", "in_meta")
SPEC_APPLY_BIAS, SPEC_ACTIVATION, SPEC_OUT_LAYOUT, SPEC_IN_LAYOUT = 3, 4, 5, 6
MAX_IN_CHANNELS = 131072  # beyond this an int32 accumulator could saturate (|acc| ≤ Cin·128·128)

__all__ = ["ConvPwShape", "ConvPwSpec", "PackedWeights", "ConvPwBuffers", "QParams", "prepack_weights",
           "unpack_weights", "check_weight", "check_tile", "variant_name", "pick_local_size",
           "reference_accumulators", "reference_requantize", "reference", "tile_label", "random_problem",
           "ConvPwTileFigures", "conv_pw_tile_figures", "ALL_TILES", "TILE_VALUES", "OUTPUT_LAYOUTS",
           "WEIGHT_ORDERS", "ADDRESSINGS", "check_weight_order", "DEFAULT_QPARAMS"]


# ----------------------------------------------------------------------------------------------------------------
# Parameters
# ----------------------------------------------------------------------------------------------------------------

def check_tile(tile_m, tile_n4, tile_k4) -> tuple[int, int, int]:
    """The tile as ints; ValueError naming the allowed values otherwise."""
    out = []
    for name, value in (("tile_m", tile_m), ("tile_n4", tile_n4), ("tile_k4", tile_k4)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) not in TILE_VALUES:
            raise ValueError(f"{name}={value!r} is out of range: allowed values are {TILE_VALUES} "
                             f"(TILE_M = 4-width blocks, TILE_N4 = 4-output-channel blocks, TILE_K4 = "
                             f"4-input-channel blocks per thread)")
        out.append(int(value))
    return tuple(out)


def check_weight_order(order) -> str:
    if order not in WEIGHT_ORDERS:
        raise ValueError(f"weight_order must be one of {WEIGHT_ORDERS} (prepacked element [k4·OC4P + oc4] or "
                         f"[oc4·IC4P + k4]); got {order!r}")
    return order


def tile_label(tile_m, tile_n4, tile_k4) -> str:
    return f"M{tile_m}·N{tile_n4}·K{tile_k4}"


def variant_name(tile_m, tile_n4, tile_k4, use_dot_ext: bool, accumulators: bool = False,
                 saturate: bool = True) -> str:
    """The YAML variant (shaders/q8ta_conv2d_pw.yaml) of one tile setting and dot-product path."""
    tile_m, tile_n4, tile_k4 = check_tile(tile_m, tile_n4, tile_k4)
    base = SHADER + ("" if saturate else "_wrap") + ("_acc" if accumulators else "")
    return f"{base}_m{tile_m}_n{tile_n4}_k{tile_k4}_{'dot' if use_dot_ext else 'fallback'}"


# Work-group shapes a tuner may try beside ET-VK's rule (None): threads along output-channel blocks (x), width
# blocks (y) and batch × height (z); the shader bounds-checks every axis, so any shape is correct.
LOCAL_SIZE_CHOICES = (None, (16, 4, 1), (4, 16, 1), (32, 2, 1), (4, 4, 4), (16, 1, 4))


@dataclass(frozen=True)
class ConvPwShape:
    """A pointwise conv problem: input (N, Cin, H, W) → output (N, Cout, H, W)."""

    batch: int
    in_channels: int
    out_channels: int
    height: int
    width: int

    def __post_init__(self):
        for name in ("batch", "in_channels", "out_channels", "height", "width"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.in_channels > MAX_IN_CHANNELS:
            raise ValueError(f"in_channels={self.in_channels} > {MAX_IN_CHANNELS}: int32 accumulators could "
                             "saturate")

    @classmethod
    def coerce(cls, shape) -> "ConvPwShape":
        """From a ConvPwShape, a dict with the field names, or a tuple (N, Cin, Cout, H, W)."""
        if isinstance(shape, cls):
            return shape
        if isinstance(shape, dict):
            return cls(**shape)
        values = tuple(int(v) for v in shape)
        if len(values) != 5:
            raise ValueError(f"a conv shape is (N, Cin, Cout, H, W), got {shape!r}")
        return cls(*values)

    @property
    def input_sizes(self) -> tuple[int, int, int, int]:
        return (self.batch, self.in_channels, self.height, self.width)

    @property
    def output_sizes(self) -> tuple[int, int, int, int]:
        return (self.batch, self.out_channels, self.height, self.width)

    @property
    def label(self) -> str:
        return f"{self.batch}x{self.in_channels}x{self.height}x{self.width}→{self.out_channels}"

    def macs(self) -> int:
        return self.batch * self.out_channels * self.height * self.width * self.in_channels

    def as_dict(self) -> dict:
        return {"batch": self.batch, "in_channels": self.in_channels, "out_channels": self.out_channels,
                "height": self.height, "width": self.width}


@dataclass(frozen=True)
class QParams:
    """Per-tensor quantization of the activation input and output."""

    input_scale: float
    input_zero_point: int
    output_scale: float
    output_zero_point: int

    def __post_init__(self):
        for name in ("input_scale", "output_scale"):
            value = getattr(self, name)
            if not isinstance(value, (int, float, np.floating, np.integer)) or not math.isfinite(value) \
                    or value <= 0:
                raise ValueError(f"{name} must be a finite positive number, got {value!r}")
        for name in ("input_zero_point", "output_zero_point"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not -128 <= value <= 127:
                raise ValueError(f"{name} must be an int in [-128, 127], got {value!r}")

    def push_constants(self) -> bytes:
        """float input_scale, int input_zp, float output_inv_scale (1/scale in fp32), int output_zp."""
        return struct.pack("<fifi", np.float32(self.input_scale), int(self.input_zero_point),
                           inverse_scale(self.output_scale), int(self.output_zero_point))


@dataclass(frozen=True)
class ConvPwSpec:
    """One dispatch of q8ta_conv2d_pw: problem shape, tile, layouts, dot-product path, epilogue."""

    shape: ConvPwShape
    tile_m: int = 1
    tile_n4: int = 1
    tile_k4: int = 1
    out_layout: str = "4W4C"
    in_layout: str = INPUT_LAYOUT
    use_dot_ext: bool = True
    relu: bool = False
    apply_bias: bool = True
    accumulators: bool = False  # debug build: write raw int32 accumulators (N, H, W, Cout) instead of int8
    local_size: tuple | None = None  # None: ET-VK's rule
    saturate: bool = True  # OpSDotAccSat as ET-VK; False: OpSDot + a wrapping add (exact for Cin <= 131072)
    operands: str = "memory"  # "registers": the diagnostic build without operand loads (REGISTER_OPERANDS, wrong results)
    weight_order: str = "k4_oc4"  # WEIGHT_ORDERS: the prepack the kernel reads (prepack_weights(order=...))
    addressing: str = "indexed"  # ADDRESSINGS: "hoisted" = base indices once per tile, constant steps, peeled tail

    def __post_init__(self):
        object.__setattr__(self, "shape", ConvPwShape.coerce(self.shape))
        check_tile(self.tile_m, self.tile_n4, self.tile_k4)
        if self.operands not in ("memory", "registers"):
            raise ValueError(f"operands must be 'memory' or 'registers' (the load-free diagnostic); got "
                             f"{self.operands!r}")
        check_weight_order(self.weight_order)
        if self.addressing not in ADDRESSINGS:
            raise ValueError(f"addressing must be one of {ADDRESSINGS} (index per load, or base indices hoisted "
                             f"out of the K loop); got {self.addressing!r}")
        in_layout = L.get_layout(self.in_layout)
        if in_layout.name != INPUT_LAYOUT:
            raise ValueError(f"q8ta_conv2d_pw needs its input in layout {INPUT_LAYOUT} (4 widths x 4 channels per "
                             f"16-byte block); got {in_layout.name}. Repack it first (workbench.layouts)")
        out_layout = L.get_layout(self.out_layout)
        if out_layout.name not in OUTPUT_LAYOUTS:
            raise ValueError(f"output layout must be one of {OUTPUT_LAYOUTS} (packed dim C with block 4, outer dim "
                             f"W with block 4 or 1); got {out_layout.name}")
        object.__setattr__(self, "in_layout", in_layout.name)
        object.__setattr__(self, "out_layout", out_layout.name)
        if self.local_size is not None:
            object.__setattr__(self, "local_size", tuple(int(v) for v in (tuple(self.local_size) + (1, 1))[:3]))

    # -- sizes ----------------------------------------------------------------------------------------------------
    @property
    def tile(self) -> tuple[int, int, int]:
        return (self.tile_m, self.tile_n4, self.tile_k4)

    @property
    def ic4(self) -> int:
        return -(-self.shape.in_channels // 4)

    @property
    def oc4(self) -> int:
        return -(-self.shape.out_channels // 4)

    @property
    def oc4p(self) -> int:
        return -(-self.oc4 // 4) * 4

    @property
    def ic4p(self) -> int:
        return -(-self.ic4 // 4) * 4

    @property
    def w4(self) -> int:
        return -(-self.shape.width // 4)

    # -- the variant ------------------------------------------------------------------------------------------------
    @property
    def variant(self) -> str:
        return variant_name(*self.tile, self.use_dot_ext, self.accumulators, self.saturate)

    def defines(self) -> dict:
        defines = dict(variants(SHADER)[self.variant])
        if self.operands == "registers":
            defines["REGISTER_OPERANDS"] = 1
        if self.weight_order == "oc4_k4":
            defines["WEIGHT_K_INNER"] = 1
        if self.addressing == "hoisted":
            defines["HOIST_ADDRESSES"] = 1
        return defines

    @property
    def option(self) -> str:
        """The operand-load option in words ("k4_oc4 indexed" is the kernel as landed)."""
        return f"{self.weight_order} {self.addressing}"

    def spec_constants(self) -> dict:
        return {SPEC_APPLY_BIAS: int(self.apply_bias), SPEC_ACTIVATION: int(self.relu),
                SPEC_OUT_LAYOUT: L.get_layout(self.out_layout).spec_constant(),
                SPEC_IN_LAYOUT: L.get_layout(self.in_layout).spec_constant()}

    def global_size(self) -> tuple[int, int, int]:
        return (-(-self.oc4 // self.tile_n4), -(-self.w4 // self.tile_m), self.shape.batch * self.shape.height)

    def resolved_local_size(self) -> tuple[int, int, int]:
        return self.local_size or pick_local_size(self.global_size())

    def threads(self) -> int:
        return math.prod(self.global_size())

    def pipeline(self, device, capture_statistics: bool = False):
        """The (cached) pipeline of this variant on `device`. Specialization constants the optimizer removed
        (e.g. the epilogue's in the accumulator build) are dropped by the runtime."""
        if self.use_dot_ext:
            device.require("integer_dot_product")
        return pipeline_for(device, SHADER, defines=self.defines(), spec_constants=self.spec_constants(),
                            local_size=self.resolved_local_size(), capture_statistics=capture_statistics)

    # -- traffic and work -------------------------------------------------------------------------------------------
    def input_nbytes(self) -> int:
        return L.get_layout(self.in_layout).num_words(self.shape.input_sizes) * 4

    def output_nbytes(self) -> int:
        if self.accumulators:
            s = self.shape
            return s.batch * s.height * s.width * s.out_channels * 4
        return L.get_layout(self.out_layout).num_words(self.shape.output_sizes) * 4

    def weight_nbytes(self) -> int:
        """Prepacked weights + weight sums + weight scales + bias."""
        return self.ic4p * self.oc4p * 16 + 3 * self.oc4p * 16

    def bytes_moved(self) -> int:
        """Compulsory traffic: the packed input, the prepacked weights (with sums, scales, bias) and the packed
        output, each once (what an ideal cache would move)."""
        return self.input_nbytes() + self.weight_nbytes() + self.output_nbytes()

    def bytes_loaded_by_threads(self) -> int:
        """What the threads load before any cache: per thread and input-channel block (IC4 rounded up to whole
        TILE_K4 steps), TILE_M input blocks and TILE_N4 weight blocks of 16 bytes."""
        steps = -(-self.ic4 // self.tile_k4) * self.tile_k4
        return self.threads() * steps * 16 * (self.tile_m + self.tile_n4)

    def macs(self) -> int:
        """N·Cout·H·W·Cin (ET-VK's FLOP count: one MAC = one "FLOP")."""
        return self.shape.macs()

    def tile_figures(self) -> "ConvPwTileFigures":
        return conv_pw_tile_figures(self.tile_m, self.tile_n4, self.tile_k4)

    @property
    def accumulators_per_thread(self) -> int:
        return 16 * self.tile_m * self.tile_n4

    def with_tile(self, tile_m, tile_n4, tile_k4) -> "ConvPwSpec":
        from dataclasses import replace
        return replace(self, tile_m=tile_m, tile_n4=tile_n4, tile_k4=tile_k4)


# ----------------------------------------------------------------------------------------------------------------
# Weights
# ----------------------------------------------------------------------------------------------------------------

def _as_numpy(x):
    if type(x).__module__.startswith("torch"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def check_weight(weight, in_channels: int | None = None) -> np.ndarray:
    """The weight as a (Cout, Cin) int8 numpy array; accepts (Cout, Cin) or (Cout, Cin, 1, 1) int8."""
    w = _as_numpy(weight)
    if w.dtype != np.int8:
        raise TypeError(f"weight must be int8 (symmetric per-output-channel quantized), got dtype {w.dtype}")
    if w.ndim == 4:
        if w.shape[2:] != (1, 1):
            raise ValueError(f"a pointwise conv needs a 1x1 kernel: weight shape (Cout, Cin, 1, 1), got {w.shape}")
        w = w.reshape(w.shape[0], w.shape[1])
    elif w.ndim != 2:
        raise ValueError(f"weight must have shape (Cout, Cin) or (Cout, Cin, 1, 1), got {w.shape}")
    if w.shape[0] < 1 or w.shape[1] < 1:
        raise ValueError(f"weight must be non-empty, got shape {w.shape}")
    if in_channels is not None and w.shape[1] != in_channels:
        raise ValueError(f"weight has Cin={w.shape[1]} but the input has {in_channels} channels "
                         f"(weight shape {tuple(w.shape)})")
    return np.ascontiguousarray(w)


@dataclass
class PackedWeights:
    """Host-prepacked weights: `weight` int32 words (IC4P, OC4P, 4) or, in order "oc4_k4", (OC4P, IC4P, 4); `weight_sums` int32 (OC4P·4), `scales` and
    `bias` fp32 (OC4P·4), all zero-padded (IC4P, OC4P: IC4, OC4 rounded up to multiples of 4)."""

    weight: np.ndarray
    weight_sums: np.ndarray
    scales: np.ndarray
    bias: np.ndarray
    out_channels: int
    in_channels: int
    has_bias: bool
    raw: np.ndarray = field(repr=False, default=None)  # the (Cout, Cin) int8 weight
    order: str = "k4_oc4"  # WEIGHT_ORDERS: `weight` is (IC4P, OC4P, 4) for "k4_oc4", (OC4P, IC4P, 4) for "oc4_k4"


def prepack_weights(weight, weight_scales=None, bias=None, order: str = "k4_oc4") -> PackedWeights:
    """Prepack (Cout, Cin[, 1, 1]) int8 weights into OC4 × IC4 blocks of 4×4 int8 (see the module docstring),
    in `order` (WEIGHT_ORDERS): the block order the kernel of the same `weight_order` reads."""
    check_weight_order(order)
    w = check_weight(weight)
    cout, cin = w.shape
    oc4 = -(-cout // 4)
    oc4p, ic4p = -(-oc4 // 4) * 4, -(-cin // 16) * 4
    padded = np.zeros((oc4p * 4, ic4p * 4), dtype=np.int8)
    padded[:cout, :cin] = w
    # [oc4, j, k4, b] -> [k4, oc4, j, b]: word (k4, oc4, j) holds bytes b = input channels 4*k4 + b
    blocks = padded.reshape(oc4p, 4, ic4p, 4).transpose(2, 0, 1, 3)
    words = np.ascontiguousarray(blocks).view("<i4").reshape(ic4p, oc4p, 4).astype(np.int32)
    if order == "oc4_k4":
        words = np.ascontiguousarray(words.transpose(1, 0, 2))  # the same blocks, input-channel block fastest
    sums = np.zeros(oc4p * 4, dtype=np.int32)
    sums[:cout] = w.astype(np.int32).sum(axis=1)
    scales = np.zeros(oc4p * 4, dtype=np.float32)
    if weight_scales is not None:
        s = np.asarray(_as_numpy(weight_scales), dtype=np.float64).reshape(-1)
        if s.size == 1:
            s = np.full(cout, s[0])
        if s.size != cout:
            raise ValueError(f"weight_scales must have Cout={cout} entries (one per output channel), got {s.size}")
        if not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise ValueError("weight_scales must be finite and positive")
        scales[:cout] = s.astype(np.float32)
    b = np.zeros(oc4p * 4, dtype=np.float32)
    if bias is not None:
        bv = np.asarray(_as_numpy(bias), dtype=np.float64).reshape(-1)
        if bv.size != cout:
            raise ValueError(f"bias must have Cout={cout} entries, got {bv.size}")
        if not np.all(np.isfinite(bv)):
            raise ValueError("bias must be finite")
        b[:cout] = bv.astype(np.float32)
    return PackedWeights(words, sums, scales, b, cout, cin, bias is not None, raw=w, order=order)


def unpack_weights(packed: PackedWeights) -> np.ndarray:
    """Inverse of the prepack (for tests and pictures): (Cout, Cin) int8."""
    words = packed.weight if packed.order == "k4_oc4" else packed.weight.transpose(1, 0, 2)
    ic4, oc4p, _ = words.shape
    blocks = np.ascontiguousarray(words).view(np.int8).reshape(ic4, oc4p, 4, 4)
    dense = blocks.transpose(1, 2, 0, 3).reshape(oc4p * 4, ic4 * 4)
    return dense[:packed.out_channels, :packed.in_channels].copy()


# ----------------------------------------------------------------------------------------------------------------
# References (torch for the integer part, fp32 emulated exactly for the epilogue)
# ----------------------------------------------------------------------------------------------------------------

def reference_accumulators(q_input, weight):
    """Exact int32 accumulators acc[n, oc, h, w] = Σ_ic q_in[n, ic, h, w] · w[oc, ic] as a torch int32 tensor."""
    import torch
    x = torch.as_tensor(_as_numpy(q_input))
    if x.dtype != torch.int8 or x.dim() != 4:
        raise ValueError(f"q_input must be an int8 NCHW tensor, got {x.dtype} of shape {tuple(x.shape)}")
    w = torch.as_tensor(check_weight(weight, x.shape[1]))
    acc = torch.einsum("nchw,oc->nohw", x.to(torch.int64), w.to(torch.int64))
    if acc.numel() and int(acc.abs().max()) > 2**31 - 1:
        raise OverflowError("accumulators exceed int32")
    return acc.to(torch.int32)


def reference_requantize(acc, weight_sums, weight_scales, bias, qparams: QParams, relu: bool = False):
    """The shader's fp32 epilogue on int32 accumulators (N, Cout, H, W) → int8 (N, Cout, H, W) numpy array.

    Same operations, same order, each rounded to fp32 once."""
    a = _as_numpy(acc).astype(np.int64)
    cout = a.shape[1]
    per_oc = (1, cout, 1, 1)
    sums = np.asarray(weight_sums, dtype=np.int64)[:cout].reshape(per_oc)
    adj = (a - int(qparams.input_zero_point) * sums).astype(np.int32)  # int32 arithmetic, as on the GPU
    adj_f = adj.astype(np.float32)
    scale = (np.asarray(weight_scales, dtype=np.float32)[:cout] * np.float32(qparams.input_scale)).astype(np.float32)
    scale = scale.reshape(per_oc)
    f = (adj_f * scale).astype(np.float32)
    if bias is not None:
        f = (f + np.asarray(bias, dtype=np.float32)[:cout].reshape(per_oc)).astype(np.float32)
    if relu:
        f = np.maximum(f, np.float32(0))
    g = (f * inverse_scale(qparams.output_scale)).astype(np.float32)
    q = np.clip(np.rint(g) + np.float32(qparams.output_zero_point), -128, 127)
    return q.astype(np.int8)


def reference(q_input, weight, weight_scales, bias, qparams: QParams, relu: bool = False,
              return_accumulators: bool = False):
    """int8 output (N, Cout, H, W) as a torch tensor (and the int32 accumulators when asked)."""
    import torch
    w = check_weight(weight)
    acc = reference_accumulators(q_input, w)
    packed = prepack_weights(w, weight_scales, bias)
    out = torch.from_numpy(reference_requantize(acc, packed.weight_sums, packed.scales,
                                                packed.bias if bias is not None else None, qparams, relu))
    return (out, acc) if return_accumulators else out


# ----------------------------------------------------------------------------------------------------------------
# Device resources and dispatch
# ----------------------------------------------------------------------------------------------------------------

class ConvPwBuffers(DeviceResources):
    """Every buffer one conv needs on a device. Tile-independent: one set serves every tile setting of the same
    shape, output layout and output kind (int8 or accumulators)."""

    def __init__(self, device, spec: ConvPwSpec, q_input, packed: PackedWeights):
        x = _as_numpy(q_input)
        if x.dtype != np.int8 or x.ndim != 4:
            raise ValueError(f"q_input must be an int8 NCHW tensor, got {x.dtype} of shape {x.shape}")
        if tuple(x.shape) != spec.shape.input_sizes:
            raise ValueError(f"q_input shape {tuple(x.shape)} does not match the spec's {spec.shape.input_sizes}")
        if (packed.out_channels, packed.in_channels) != (spec.shape.out_channels, spec.shape.in_channels):
            raise ValueError(f"weights are {packed.out_channels}x{packed.in_channels}, the spec wants "
                             f"{spec.shape.out_channels}x{spec.shape.in_channels}")
        super().__init__(device)
        self.shape = spec.shape
        self.out_layout = spec.out_layout
        self.accumulators = spec.accumulators
        self.weight_order = packed.order
        in_layout = L.get_layout(spec.in_layout)
        out_layout = L.get_layout(spec.out_layout)
        try:
            self.inp = self._own(device.buffer(in_layout.pack(x), name="conv_pw input"))
            self.out = self._own(device.buffer(nbytes=spec.output_nbytes(), name="conv_pw output"))
            self.weight = self._own(device.buffer(packed.weight, name="conv_pw weight"))
            self.weight_sums = self._own(device.buffer(packed.weight_sums, name="conv_pw weight sums"))
            self.weight_scales = self._own(device.buffer(packed.scales, name="conv_pw weight scales"))
            self.bias = self._own(device.buffer(packed.bias, name="conv_pw bias"))
            self.out_meta = self._own(device.uniform(out_layout.buffer_metadata(spec.shape.output_sizes),
                                                     name="conv_pw output meta"))
            self.in_meta = self._own(device.uniform(in_layout.buffer_metadata(spec.shape.input_sizes),
                                                    name="conv_pw input meta"))
        except Exception:
            self.close()
            raise

    def check(self, spec: ConvPwSpec):
        if spec.weight_order != self.weight_order:
            raise ValueError(f"these buffers hold weights prepacked in order {self.weight_order!r}; the spec reads "
                             f"order {spec.weight_order!r} (prepack_weights(..., order={spec.weight_order!r}))")
        if spec.shape != self.shape or spec.out_layout != self.out_layout or spec.accumulators != self.accumulators:
            raise ValueError(f"these buffers hold {self.shape.label} → {self.out_layout}"
                             f"{' accumulators' if self.accumulators else ''}; the spec asks for "
                             f"{spec.shape.label} → {spec.out_layout}{' accumulators' if spec.accumulators else ''}")

    def resources(self, pipeline) -> list:
        """The resources in the order of the pipeline's reflected bindings (unused ones are optimized away)."""
        return [getattr(self, BINDINGS[b.binding]) for b in pipeline.bindings]

    def record(self, rec, spec: ConvPwSpec, qparams: QParams, pipeline=None, label: str | None = None):
        self.check(spec)
        pipeline = pipeline or spec.pipeline(self.device)
        push = qparams.push_constants()[:pipeline.push_constant_size]
        rec.dispatch(pipeline, self.resources(pipeline), spec.global_size(), push, label=label or spec.variant)
        return pipeline

    def read_output(self, spec: ConvPwSpec, images: int | None = None) -> np.ndarray:
        """int8 NCHW (or int32 NCHW accumulators for the debug build), logical elements only; `images`: the first
        images only (the batch is outermost in every output layout)."""
        self.check(spec)
        s = self.shape
        if spec.accumulators:
            acc = self.out.download(np.int32, (s.batch, s.height, s.width, s.out_channels))
            return np.ascontiguousarray(acc.transpose(0, 3, 1, 2))[:images]
        words = self.out.download(np.int32)
        sizes = s.output_sizes if images is None else (min(images, s.batch),) + s.output_sizes[1:]
        layout = L.get_layout(spec.out_layout)
        return layout.unpack(words[:layout.num_words(sizes)], sizes)

    def run(self, spec: ConvPwSpec, qparams: QParams, pipeline=None) -> np.ndarray:
        """One dispatch, waited for; returns read_output(spec)."""
        with self.device.record(spec.variant) as rec:
            self.record(rec, spec, qparams, pipeline)
            rec.submit()
        return self.read_output(spec)


DEFAULT_QPARAMS = QParams(0.008123, 2, 0.05314, -1)  # ET-VK's op test (etvk.md §3.6)
def random_problem(shape, seed: int = 0, bias: bool = True):
    """Random int8 input and weights, ET-VK test-style scales U[0.005, 0.015] and a small bias."""
    s = ConvPwShape.coerce(shape)
    rng = np.random.default_rng(seed)
    q_input = rng.integers(-128, 128, s.input_sizes, dtype=np.int8)
    weight = rng.integers(-128, 128, (s.out_channels, s.in_channels), dtype=np.int8)
    scales = rng.uniform(0.005, 0.015, s.out_channels).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, s.out_channels).astype(np.float32) if bias else None
    return q_input, weight, scales, b


# ----------------------------------------------------------------------------------------------------------------
# Data reuse of the int8 pointwise conv tile (etvk.md §3.3 / §3.5)
# ----------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConvPwTileFigures:
    tile_m4: float                  # 4-width blocks per thread (1 → 4 widths)
    tile_n4: int                    # 4-output-channel blocks per thread
    tile_k4: int                    # 4-input-channel blocks per inner step
    widths: int
    output_channels: int
    input_channels: int
    macs_per_step: int
    dot_products_per_step: int      # dotPacked4x8AccSat calls (4 MACs each)
    input_bytes_per_step: int
    weight_bytes_per_step: int
    bytes_per_step: int
    macs_per_byte: float
    accumulators: int               # int32 accumulators held per thread
    accumulator_registers: int      # scalar 32-bit registers
    accumulator_registers_vec4: int
    operand_registers_vec4: int     # ivec4 loaded per step (input blocks + weight texels)

    def as_dict(self) -> dict:
        return asdict(self)


def conv_pw_tile_figures(tile_m: float, tile_n4: int, tile_k4: int = 1, *,
                         whole_input_blocks: bool = True) -> ConvPwTileFigures:
    """Per-thread figures of one K step of `q8ta_conv2d_pw` (etvk.md §3.5).

    `tile_m` counts 4-width blocks (ET-VK's TILE_M4; 1 means 4 widths; 0.5 the
    hypothetical 2-width tile). Accounting: int8 bytes, 1 byte per element. An input
    load is a whole 16-byte 4W4C block (4 widths × 4 channels) per k4 — unless
    `whole_input_blocks=False`, which counts only the widths used; a weight load is one
    16-byte texel (4 OC × 4 IC) per n4 and k4. Then
        MACs = (4·M4)(4·N4)(4·K4) = 64·M4·N4·K4,  bytes = 16·K4·(⌈M4⌉ + N4),
        MAC/B = 4·M4·N4 / (⌈M4⌉ + N4),
    independent of TILE_K4 (K4 cancels). So ET-VK's TILE_K4 = 1 — or any K4 — gives
    M4=1: N4=2 → 128 MAC / 48 B = 8/3 ≈ 2.67, N4=1 → 64 / 32 = 2.0. Counting int32
    words instead of int8 bytes would give a quarter of these (0.67, 0.5).
    Accumulators: ivec4 out_accum[TILE_M][TILE_N4] = 16·M4·N4 int32 (N4 2 → 1: 32 → 16).
    """
    widths = round(4 * tile_m)
    if widths <= 0 or not math.isclose(widths, 4 * tile_m):
        raise ValueError(f"tile_m must be a positive multiple of 1/4 (widths = 4·tile_m), got {tile_m}")
    if tile_n4 <= 0 or tile_k4 <= 0:
        raise ValueError(f"tile_n4 and tile_k4 must be > 0, got {tile_n4}, {tile_k4}")
    output_channels, input_channels = 4 * tile_n4, 4 * tile_k4
    input_blocks = -(-widths // 4)
    macs = widths * output_channels * input_channels
    input_bytes = (16 * input_blocks if whole_input_blocks else 4 * widths) * tile_k4
    weight_bytes = 16 * tile_n4 * tile_k4
    accumulators = widths * output_channels
    return ConvPwTileFigures(
        tile_m4=tile_m, tile_n4=tile_n4, tile_k4=tile_k4,
        widths=widths, output_channels=output_channels, input_channels=input_channels,
        macs_per_step=macs,
        dot_products_per_step=macs // 4,
        input_bytes_per_step=input_bytes,
        weight_bytes_per_step=weight_bytes,
        bytes_per_step=input_bytes + weight_bytes,
        macs_per_byte=macs / (input_bytes + weight_bytes),
        accumulators=accumulators,
        accumulator_registers=accumulators,
        accumulator_registers_vec4=-(-accumulators // 4),
        operand_registers_vec4=(input_blocks + tile_n4) * tile_k4,
    )
