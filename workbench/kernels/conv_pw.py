"""Pointwise int8 convolution (`q8ta_conv2d_pw`, etvk.md §3) with tunable accumulator tiles.

    spec = ConvPwSpec(ConvPwShape(1, 96, 96, 64, 64), tile_m=1, tile_n4=2, tile_k4=1, out_layout="4C1W")
    packed = prepack_weights(weight_int8, weight_scales, bias)          # host-side prepack (tile-independent)
    with ConvPwBuffers(device, spec, q_input, packed) as bufs:
        out = bufs.run(spec, qparams)                                     # int8 NCHW numpy array
    df = sweep(device, tiles=[(1, 1, 1), (1, 2, 1)], shapes=[(1, 96, 96, 64, 64)])

The kernel (shaders/q8ta_conv2d_pw.glsl, variants in shaders/q8ta_conv2d_pw.yaml):
* one thread computes 4·TILE_M output widths × 4·TILE_N4 output channels of one output row, holding
  16·TILE_M·TILE_N4 int32 accumulators; per inner step it loads TILE_K4 × (TILE_M input blocks + TILE_N4 weight
  blocks) of 16 bytes each, then does the packed int8 dot products (`dot4x8_acc_sat`: OpSDotAccSat when
  `use_dot_ext`, else the portable int32 fallback of shaders/include/int8_dot.glslh);
* TILE_M, TILE_N4, TILE_K4 ∈ {1, 2, 4} are compile-time defines: every combination is its own SPIR-V;
* dispatch: global (ceil(OC4 / TILE_N4), ceil(W4 / TILE_M), N·H); local size by ET-VK's rule (8, 8, 1) when
  both x and y ≥ 6, else (4, 16, 1) when x < 6, else (16, 4, 1).

Weight prepack (choice: a **storage buffer** of ivec4, not ET-VK's RGBA32I texture — int8 tensors are buffer-only
in the workbench and the runtime binds storage images, not sampled textures; the bytes per load are the same 16):
element [k4·OC4P + oc4] holds, in component j, the 4 weights w[4·oc4 + j, 4·k4 + b] (byte b = input channel
4·k4 + b) — ET-VK's texel (x = oc4, y = k4). OC4P and IC4P = OC4 and IC4 rounded up to multiples of 4
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

import dataclasses
import itertools
import math
import struct
import sys
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import adreno
from .. import layouts as L
from .. import occupancy as occ
from ..quant import inverse_scale
from ..shaders import variants
from . import DeviceResources, pipeline_for

SHADER = "q8ta_conv2d_pw"
TILE_VALUES = (1, 2, 4)
ALL_TILES = tuple(itertools.product(TILE_VALUES, TILE_VALUES, TILE_VALUES))  # (tile_m, tile_n4, tile_k4)
INPUT_LAYOUT = "4W4C"
OUTPUT_LAYOUTS = ("4W4C", "4C1W", "4C")
BINDINGS = ("out", "inp", "weight", "weight_sums", "weight_scales", "bias", "out_meta", "in_meta")
SPEC_APPLY_BIAS, SPEC_ACTIVATION, SPEC_OUT_LAYOUT, SPEC_IN_LAYOUT = 3, 4, 5, 6
MAX_IN_CHANNELS = 131072  # beyond this an int32 accumulator could saturate (|acc| ≤ Cin·128·128)

__all__ = ["ConvPwShape", "ConvPwSpec", "PackedWeights", "ConvPwBuffers", "QParams", "prepack_weights",
           "unpack_weights", "check_weight", "check_tile", "variant_name", "pick_local_size",
           "reference_accumulators", "reference_requantize", "reference", "tile_label", "tile_columns", "sweep",
           "measure", "random_problem", "bench_suite", "statistics_columns", "model_columns", "torch_rows",
           "conv_pw_adreno_table", "conv_pw_tile_n4_check", "add_adreno_cli", "ADRENO_DEFAULT_SHAPE",
           "ALL_TILES", "TILE_VALUES", "OUTPUT_LAYOUTS", "SUITE_SHAPES", "QUICK_SHAPES", "QUICK_TILES",
           "DEFAULT_QPARAMS"]


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


def tile_label(tile_m, tile_n4, tile_k4) -> str:
    return f"M{tile_m}·N{tile_n4}·K{tile_k4}"


def variant_name(tile_m, tile_n4, tile_k4, use_dot_ext: bool, accumulators: bool = False,
                 saturate: bool = True) -> str:
    """The YAML variant (shaders/q8ta_conv2d_pw.yaml) of one tile setting and dot-product path."""
    tile_m, tile_n4, tile_k4 = check_tile(tile_m, tile_n4, tile_k4)
    base = SHADER + ("" if saturate else "_wrap") + ("_acc" if accumulators else "")
    return f"{base}_m{tile_m}_n{tile_n4}_k{tile_k4}_{'dot' if use_dot_ext else 'fallback'}"


def pick_local_size(global_size) -> tuple[int, int, int]:
    """ET-VK's pick_hw_square_wg_size: (8, 8, 1) if x ≥ 6 and y ≥ 6, else (4, 16, 1) if x < 6, else (16, 4, 1)."""
    x, y = int(global_size[0]), int(global_size[1])
    if x >= 6 and y >= 6:
        return (8, 8, 1)
    return (4, 16, 1) if x < 6 else (16, 4, 1)


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

    def __post_init__(self):
        object.__setattr__(self, "shape", ConvPwShape.coerce(self.shape))
        check_tile(self.tile_m, self.tile_n4, self.tile_k4)
        if self.operands not in ("memory", "registers"):
            raise ValueError(f"operands must be 'memory' or 'registers' (the load-free diagnostic); got "
                             f"{self.operands!r}")
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
        return defines

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
        (e.g. the epilogue's in the accumulator build) are not passed."""
        from ..shaders import compile_shader
        from ..vk.spirv import reflect
        defines = self.defines()
        declared = set(reflect(compile_shader(SHADER, defines).code).spec_constants)
        spec = {k: v for k, v in self.spec_constants().items() if k in declared}
        if self.use_dot_ext:
            device.require("integer_dot_product")
        return pipeline_for(device, SHADER, defines=defines, spec_constants=spec,
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

    def tile_figures(self) -> occ.ConvPwTileFigures:
        return occ.conv_pw_tile_figures(self.tile_m, self.tile_n4, self.tile_k4)

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
    """Host-prepacked weights: `weight` int32 words (IC4P, OC4P, 4), `weight_sums` int32 (OC4P·4), `scales` and
    `bias` fp32 (OC4P·4), all zero-padded (IC4P, OC4P: IC4, OC4 rounded up to multiples of 4)."""

    weight: np.ndarray
    weight_sums: np.ndarray
    scales: np.ndarray
    bias: np.ndarray
    out_channels: int
    in_channels: int
    has_bias: bool
    raw: np.ndarray = field(repr=False, default=None)  # the (Cout, Cin) int8 weight


def prepack_weights(weight, weight_scales=None, bias=None) -> PackedWeights:
    """Prepack (Cout, Cin[, 1, 1]) int8 weights into OC4 × IC4 blocks of 4×4 int8 (see the module docstring)."""
    w = check_weight(weight)
    cout, cin = w.shape
    oc4 = -(-cout // 4)
    oc4p, ic4p = -(-oc4 // 4) * 4, -(-cin // 16) * 4
    padded = np.zeros((oc4p * 4, ic4p * 4), dtype=np.int8)
    padded[:cout, :cin] = w
    # [oc4, j, k4, b] -> [k4, oc4, j, b]: word (k4, oc4, j) holds bytes b = input channels 4*k4 + b
    blocks = padded.reshape(oc4p, 4, ic4p, 4).transpose(2, 0, 1, 3)
    words = np.ascontiguousarray(blocks).view("<i4").reshape(ic4p, oc4p, 4).astype(np.int32)
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
    return PackedWeights(words, sums, scales, b, cout, cin, bias is not None, raw=w)


def unpack_weights(packed: PackedWeights) -> np.ndarray:
    """Inverse of the prepack (for tests and pictures): (Cout, Cin) int8."""
    ic4, oc4p, _ = packed.weight.shape
    blocks = np.ascontiguousarray(packed.weight).view(np.int8).reshape(ic4, oc4p, 4, 4)
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


# ----------------------------------------------------------------------------------------------------------------
# Registers and occupancy columns
# ----------------------------------------------------------------------------------------------------------------

def statistics_columns(device, pipeline, local_size) -> dict:
    """Driver statistics → registers and theoretical occupancy on `device` itself.

    NaN / "n/a (...)" where there is nothing to read: CPU devices (lavapipe: registers do not limit anything)
    and drivers without VK_KHR_pipeline_executable_properties."""
    info = device.info
    cols = {"registers": np.nan, "register_unit": None, "spills": np.nan, "scratch_bytes": np.nan,
            "occupancy": np.nan, "occupancy_limiter": None, "occupancy_model": None, "waves_or_warps": np.nan}
    if info.is_cpu:
        why = "n/a (CPU device)"
    elif not info.features.get("pipeline_executable_properties") or not pipeline.capture_statistics:
        why = "n/a (no VK_KHR_pipeline_executable_properties)"
    else:
        why = None
    if why:
        cols.update(register_unit=why, occupancy_limiter=why, occupancy_model=why)
        return cols
    stats = occ.registers_from_statistics(pipeline.statistics())
    cols.update(registers=stats["registers"] if stats["registers"] is not None else np.nan,
                register_unit=stats["register_unit"] or "n/a (driver reports none)",
                spills=stats["spills"] if stats["spills"] is not None else np.nan,
                scratch_bytes=stats["scratch_bytes"] if stats["scratch_bytes"] is not None else np.nan)
    if stats["registers"] is None:
        cols.update(occupancy_limiter="n/a (no register count)", occupancy_model="n/a")
        return cols
    try:
        o = occ.occupancy_for_device(info, stats, local_size, subgroup_size=None)
    except ValueError as error:
        cols.update(occupancy_limiter=f"n/a ({error})", occupancy_model="n/a")
        return cols
    cols.update(occupancy=o.occupancy, occupancy_limiter=o.limiter, occupancy_model=o.model,
                waves_or_warps=o.waves_or_warps_active)
    return cols


def model_columns(tile_m, tile_n4, tile_k4, local_size=(8, 8, 1)) -> dict:
    """Rule-model columns for reference GPUs, from the tile alone (no device needed).

    `model_registers_lower_bound` = the int32 accumulators + the 32-bit registers of one inner step's operands
    (TILE_K4·(TILE_M + TILE_N4) ivec4): what must be live at once, before addressing, loop counters and the
    epilogue. Real compilers use more (measured on an H200: 43 / 68 / 157 registers for TILE_N4 = 1 / 2 / 4 at
    TILE_M = 1, occupancy.md B12), so the occupancies below are upper bounds: sm_90 (CUDA rules, 64-thread
    workgroup) and Adreno 740 (Mesa ir3 rules, vec4 registers = ceil(bound / 4))."""
    f = occ.conv_pw_tile_figures(tile_m, tile_n4, tile_k4)
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
DEFAULT_QPARAMS = QParams(0.008123, 2, 0.05314, -1)  # ET-VK's op test (etvk.md §3.6)


def filling_shapes(device, waves: int = 8, channels=(256, 512), size: int = 128) -> tuple:
    """Shapes that fill the device, from its own limits: batch chosen so that the smallest tile (M1·N1, one thread
    per 4 widths x 4 output channels) launches at least `waves` x the resident threads (SMs x warps per SM x 32,
    `device_limits`); Cin = Cout in `channels`, H = W = `size`. () on CPU devices or where the device does not say
    how many threads it holds."""
    from .device_limits import device_limits
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


def random_problem(shape, seed: int = 0, bias: bool = True):
    """Random int8 input and weights, ET-VK test-style scales U[0.005, 0.015] and a small bias."""
    s = ConvPwShape.coerce(shape)
    rng = np.random.default_rng(seed)
    q_input = rng.integers(-128, 128, s.input_sizes, dtype=np.int8)
    weight = rng.integers(-128, 128, (s.out_channels, s.in_channels), dtype=np.int8)
    scales = rng.uniform(0.005, 0.015, s.out_channels).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, s.out_channels).astype(np.float32) if bias else None
    return q_input, weight, scales, b


def _time_recording(device, bufs, spec, qparams, pipeline, *, min_time_s, max_time_s, target_us, max_repeats,
                    min_samples, warmup_s: float = 0.0):
    """Probe one dispatch, then chain enough dispatches per submit to reach ~target_us (ET-VK's probe-then-scale);
    returns (gpu_ns, host_ns, repeats). `warmup_s`: keep the device busy that long first (an idle GPU runs at a
    low clock: the first kernel of a sweep would otherwise look slow)."""
    import time
    from ..bench import sample_recording
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
        start = time.perf_counter()
        while time.perf_counter() - start < warmup_s:
            rec.submit()
        gpu, host = sample_recording(rec, repeats=repeats, min_samples=min_samples, min_time_s=min_time_s,
                                     max_time_s=max_time_s)
    return gpu, host, repeats


def measure(device, bufs: ConvPwBuffers, spec: ConvPwSpec, qparams: QParams = DEFAULT_QPARAMS, *, env=None,
            expected=None, capture_statistics: bool | None = None, min_time_s: float = 0.2,
            max_time_s: float = 10.0, min_samples: int = 10, target_us: float = 2000.0,
            max_repeats: int = 200, warmup_s: float = 0.0) -> dict:
    """Time one variant on prepared buffers → one tidy row (see `sweep` for the columns). `expected`: the int8
    reference output, to record the largest difference in LSB."""
    from ..bench import environment, measurement_row
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
    (`workbench.adreno`), giving `a740_registers` (vec4), `a740_waves`, `a740_occupancy` and `a740_spills` next to
    the live device's columns; NaN with `a740_note` where `workbench adreno setup` has not run. None skips it."""
    from ..bench import environment, progress
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
    from ..bench import environment
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
    prefix = f"a{gpu}_"
    if not adreno.is_set_up():
        empty = {prefix + k: np.nan for k in ("registers", "waves", "occupancy", "spills")}
        empty[prefix + "note"] = "run `workbench adreno setup` for Turnip's statistics"
        return {tile_label(*t): empty for t in tiles}
    table = conv_pw_adreno_table([tuple(t) for t in tiles], gpu=gpu)
    return {r["tile"]: {prefix + "registers": r["Registers used"], prefix + "waves": r["Max Waves Per Core"],
                        prefix + "occupancy": r["occupancy"], prefix + "spills": r["spills"]}
            for r in table.to_dict("records")}


# ----------------------------------------------------------------------------------------------------------------
# The tile story in Turnip's statistics (Mesa's ir3 compiler for Adreno on the no-op DRM shim; `workbench.adreno`
# collects the statistics and knows no kernel, this part knows the kernel)
# ----------------------------------------------------------------------------------------------------------------

ADRENO_DEFAULT_SHAPE = (1, 96, 96, 64, 64)  # (N, Cin, Cout, H, W): ET-VK's local size rule gives (8, 8, 1)


def adreno_job(tile, *, use_dot_ext: bool, shape=ADRENO_DEFAULT_SHAPE, local_size=None) -> dict:
    """One tile as an `adreno.stats_many` job: the compiled variant, the spec constants it declares, the local size
    (ET-VK's rule for `shape` unless given)."""
    from ..shaders import compile_shader
    from ..vk.spirv import reflect
    tile_m, tile_n4, tile_k4 = check_tile(*tile)
    spec = ConvPwSpec(shape, tile_m=tile_m, tile_n4=tile_n4, tile_k4=tile_k4, use_dot_ext=use_dot_ext)
    spirv = compile_shader(SHADER, spec.defines())
    declared = set(reflect(spirv.code).spec_constants)
    spec_constants = {k: v for k, v in spec.spec_constants().items() if k in declared}
    local = tuple(local_size) if local_size is not None else spec.resolved_local_size()
    return {"shader": spirv, "name": spec.variant, "spec_constants": spec_constants, "local_size": local}


def conv_pw_adreno_table(tiles=None, gpu=adreno.DEFAULT_GPU, *, use_dot_ext: bool = True,
                         shape=ADRENO_DEFAULT_SHAPE, local_size=None, root=None, errors: str = "keep"):
    """This kernel (the workbench's q8ta_conv2d_pw) compiled by Turnip for every tile (TILE_M, TILE_N4, TILE_K4).

    `tiles`: (tile_m, tile_n4, tile_k4) triples, default every one of ALL_TILES. The specialization constants and
    local size come from `ConvPwSpec(shape, tile)` (ET-VK's rule: (8, 8, 1) for the default shape, so 64
    invocations → ir3 keeps wave64); `local_size` overrides. One child process for all.
    Columns: tile, TILE_M, TILE_N4, TILE_K4, accumulators (int32 per thread), Registers used, Half-registers
    used, Max Waves Per Core, occupancy (= waves / 16), Instruction Count, STP Count, LDP Count, spills
    (STP + LDP), Subgroup Size, model waves (occupancy.adreno_occupancy from the reported registers), variant,
    gpu, local_size; plus "error" where Turnip failed on a tile (`errors="keep"`, the default here: the other
    tiles still get their row; "raise" raises AdrenoCompileError instead). Known: Mesa 25.0.7 segfaults in ir3
    (ir3_get_src_shared ← read_phi_src) on the a750 for the OpSDotAccSat path; `use_dot_ext=False` compiles.
    These are Mesa's ir3 figures, not those of Qualcomm's compiler (which the ET-VK PRs quote).
    """
    gpu_id = adreno.check_gpu(gpu)
    tiles = [tuple(t) for t in (ALL_TILES if tiles is None else tiles)]
    jobs = [adreno_job(t, use_dot_ext=use_dot_ext, shape=shape, local_size=local_size) for t in tiles]
    results = adreno.stats_many(jobs, gpu_id, root=root, errors=errors)
    rows = []
    for tile, job, s in zip(tiles, jobs, results):
        model = adreno.model_columns(s, job["local_size"], gpu_id)
        waves = s.get("Max Waves Per Core")
        rows.append({
            "tile": tile_label(*tile), "TILE_M": tile[0], "TILE_N4": tile[1], "TILE_K4": tile[2],
            "accumulators": 16 * tile[0] * tile[1],
            "Registers used": s.get("Registers used"), "Half-registers used": s.get("Half-registers used"),
            "Max Waves Per Core": waves, "occupancy": None if waves is None else waves / adreno.MAX_WAVES,
            "Instruction Count": s.get("Instruction Count"), "STP Count": s.get("STP Count"),
            "LDP Count": s.get("LDP Count"),
            "spills": int(s.get("STP Count") or 0) + int(s.get("LDP Count") or 0),
            "Subgroup Size": s.get("Subgroup Size"), "model waves": model.get("model waves"),
            "variant": job["name"], "gpu": gpu_id, "local_size": tuple(job["local_size"]),
        })
        if "error" in s:
            rows[-1]["error"] = s["error"]
    return pd.DataFrame(rows)


def conv_pw_tile_n4_check(gpu=adreno.DEFAULT_GPU, *, tile_m: int = 1, tile_k4: int = 1, root=None, **kw):
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
        f"a{adreno.check_gpu(gpu)} (Turnip ir3), q8ta_conv2d_pw M{tile_m}·K{tile_k4}, local size "
        f"{one['local_size']}: TILE_N4=1 → {one['Registers used']} vec4 registers, {one['Max Waves Per Core']} "
        f"waves ({one['occupancy']:.1%}); TILE_N4=2 → {two['Registers used']} registers, "
        f"{two['Max Waves Per Core']} waves ({two['occupancy']:.1%}); spills {one['spills']} / {two['spills']}.")
    return df


def add_adreno_cli(adreno_subparsers) -> None:
    """`workbench adreno conv`: this kernel's tiles compiled by Turnip. `adreno_subparsers` is what
    `adreno.add_cli_parser` returns."""
    s = adreno_subparsers.add_parser("conv", help="q8ta_conv2d_pw tiles compiled by Turnip (Mesa's ir3): "
                                                  "registers, waves, spills")
    s.add_argument("--tiles", default=None, help="M,N4,K4 triples separated by ';' (default: all 27)")
    s.add_argument("--gpu", default=str(adreno.DEFAULT_GPU))
    s.add_argument("--dir", default=None)
    s.set_defaults(fn=_adreno_cli_main)


def _adreno_cli_main(args) -> int:
    tiles = None if not args.tiles else [tuple(int(v) for v in t.split(",")) for t in args.tiles.split(";")]
    try:
        table = conv_pw_adreno_table(tiles, args.gpu, root=args.dir)
    except adreno.AdrenoError as exc:
        print(f"workbench adreno conv: error: {exc}", file=sys.stderr)
        return 1
    with pd.option_context("display.max_columns", None, "display.width", 220):
        print(table.to_string(index=False))
    return 0


def torch_rows(device, shape, env=None, *, min_time_s: float = 0.2, seed: int = 0) -> list[dict]:
    """The same math done by torch on the same device: CUDA when the Vulkan device is an NVIDIA GPU and torch sees
    CUDA (torch._int_mm on int8 and a float16 conv2d), otherwise the CPU (torch._int_mm, an int32 matmul and a
    float32 conv2d; lavapipe's "GPU" is this CPU)."""
    import torch
    from ..bench import environment, measurement_row, sample_callable
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
    from ..bench import environment
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
