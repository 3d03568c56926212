"""What ET-VK's int8 conv families share (``q8ta_conv2d``, ``q8ta_conv2d_im2col``, ``q8ta_conv2d_dw``,
``q8ta_conv2d_transposed`` and their weight packers): argument checks, ``Conv2DParams`` as
``create_conv2d_params`` (QuantizedConvolution.cpp) fills it, the export's weight matrix
(patterns/quantized_convolution.py), random quantized operands, the references, and the Dispatch of the shaders with
the sub-mul epilogue (``sub_mul_dispatch``).

The references:

* ``requantize_sub_mul`` is the epilogue of q8ta_conv2d.glsl / q8ta_conv2d_dw.glsl / q8ta_conv2d_transposed.glsl
  in their fp32 order: ``facc = vec4(acc); facc -= weight_sums * input_zp; facc *= weight_scales * input_scale;
  facc += bias; max(facc, 0); round(facc * output_inv_scale) + output_zp`` clamped. ``acc`` is the int32 dot
  product of int8 input (``input_zp`` at taps outside the input) and int8 weight, computed here in int64.
* ``requantize_fma`` is q8ta_conv2d_pw.glsl's (the im2col path's GEMM): ``acc - input_zp · sums`` in int, then
  ``fma(vec4(adjusted), weight_scales · input_scale, bias)`` (or the product alone without bias).
* Neither shader marks its multiply-add ``precise``, so a driver may compute ``x · scale + bias`` with one rounding
  or two: GLSL's ``fma`` may be split, and ``facc *= s; facc += b`` may be contracted. lavapipe splits both (seen:
  ``q8ta_conv2d_im2col`` 1x8x6x8 → 5, kernel 1×4, stride 2, padding (2, 0), dilation (2, 1), seed 328: element
  (3, 3, 0) is -55.500004 fused, -55.499996 split, so -56 vs -55 before zp). The references compute the split form
  (exact on lavapipe) and the fused one; ``contraction_tolerance`` allows 1 LSB on exactly as many elements as
  the two forms disagree on (none for most inputs: then the check is exact), and rows carry that fraction as
  ``fused_mismatch``.
* ``reference_fp64`` is ET-VK's own reference of the op (custom_ops_lib.py: dequantize, conv in float64,
  quantize); rows carry its disagreement with the device as ``ref64_mismatch`` (fp32 vs fp64 rounding: rare
  1-LSB differences).
"""
from __future__ import annotations

import math
import struct

import numpy as np
import torch
import torch.nn.functional as F

from ..codegen import Codegen, UnknownKernelError
from ..dispatch import Dispatch, Resource, int8_layout, packed_words, padded

# q8ta_conv2d_check_packed_dim_info: packed C block 4, outer W block 1 or 4 — 4C passes too (its PackedDimInfo
# differs from 4C1W only in is_block_transposed, which the check does not read; ET-VK's own harness runs conv on
# 4C buffers, and the workbench refused them until its harness geometry check showed it)
CONV_LAYOUTS = ("4W4C", "4C1W", "4C")
CONV2D_PARAMS_NBYTES = 80  # 4 ivec2 + 9 int = 68 bytes, a std140 struct member rounds to 80


def pair(value, what: str, op: str, minimum: int) -> tuple[int, int]:
    """An int or an (H, W) pair, each >= minimum."""
    vals = (value, value) if isinstance(value, (int, np.integer)) else tuple(value)
    if len(vals) != 2 or not all(isinstance(v, (int, np.integer)) for v in vals) or min(vals) < minimum:
        raise ValueError(f"{op}: {what} is an int or an (H, W) pair of ints >= {minimum}, given {value!r}")
    return int(vals[0]), int(vals[1])


def conv_layouts(op: str, in_layout: str, out_layout: str):
    lays = []
    for role, name in (("input", in_layout), ("output", out_layout)):
        lay = int8_layout(name)
        if lay.name not in CONV_LAYOUTS:
            raise ValueError(f"{op}: ET-VK's C++ needs a channels-packed int8 {role} with width as its outer dim "
                             f"(q8ta_conv2d_check_packed_dim_info): expected one of {list(CONV_LAYOUTS)}, "
                             f"given {name!r}")
        lays.append(lay)
    return lays


def refuse_batch(op: str, n: int, etvk_batch: bool) -> None:
    if n > 1 and not etvk_batch:
        raise ValueError(f"{op}: ET-VK's shader computes one image (its output index sets batch 0: "
                         f"outp_tidx.data[3] = 0, and the global size is W4 × H × C4); expected batch 1, given "
                         f"batch {n} — pass etvk_batch=True to see what ET-VK computes")


def expand_variant(gen: Codegen, op: str, variant: str, template: str):
    """The variant's expansion, or an UnknownKernelError naming the template and the revision that lacks it."""
    try:
        return gen.expand(variant)
    except UnknownKernelError:
        src = gen.source
        rev = src.label + (f" (commit {src.commit[:10]})" if src.commit else "")
        raise UnknownKernelError(f"{op}: ET-VK's template {template}.glsl (variant {variant!r}) is not in "
                                 f"{src.glsl_dir} at {rev}; the family was written from cff6f4dd32, which has "
                                 f"it — use a revision that has the template") from None


def conv2d_params(kernel, stride, padding, dilation, groups: int, in_channels: int, out_channels: int) -> bytes:
    """``create_conv2d_params``: HW pairs swapped to WH, K per group aligned to 4; std140, zero-padded to 80."""
    icg, ocg = in_channels // groups, out_channels // groups
    logical_kpg = kernel[0] * kernel[1] * icg
    kpg = -(-logical_kpg // 4) * 4
    body = struct.pack("<8i9i", kernel[1], kernel[0], stride[1], stride[0], padding[1], padding[0], dilation[1],
                       dilation[0], groups, ocg, icg, logical_kpg, kpg, kpg // 4, kernel[0] * kernel[1] * in_channels,
                       kpg * groups, kpg * groups // 4)
    return body + bytes(CONV2D_PARAMS_NBYTES - len(body))


def weight_matrix(weight: torch.Tensor) -> np.ndarray:
    """The export's conv weight (patterns/quantized_convolution.py): ``[OC, ICg, Kh, Kw]`` → ``[OC, Kh·Kw·ICg]``
    (permute 0, 2, 3, 1), the width padded with zeros to a multiple of 4 (``align_width_and_update_state_dict``)."""
    oc, icg, kh, kw = weight.shape
    mat = weight.permute(0, 2, 3, 1).reshape(oc, kh * kw * icg).numpy()
    k = mat.shape[1]
    out = np.zeros((oc, -(-k // 4) * 4), dtype=np.int8)
    out[:, :k] = mat
    return out


def pack_conv2d_weight(mat: np.ndarray, kernel, icg: int) -> np.ndarray:
    """``pack_q8_conv2d_weights``'s layout, in numpy: int32 texels ``[ICg4·Kh, OC4·Kw, 4]`` (texture row
    ``ky·IC4 + ic4``, column ``oc4·Kw + kx``); component j = the word of output channel ``4·oc4 + j`` holding input
    channels ``4·ic4 .. +3`` at tap (ky, kx) (zero past OC and past ICg)."""
    kh, kw = kernel
    oc = mat.shape[0]
    oc4, ic4 = -(-oc // 4), -(-icg // 4)
    w = np.zeros((4 * oc4, kh, kw, 4 * ic4), dtype=np.int8)
    w[:oc, :, :, :icg] = mat[:, :kh * kw * icg].reshape(oc, kh, kw, icg)
    words = np.ascontiguousarray(w).view(np.int32).reshape(oc4, 4, kh, kw, ic4)  # [oc4, j, ky, kx, ic4]
    return np.ascontiguousarray(words.transpose(2, 4, 0, 3, 1).reshape(kh * ic4, oc4 * kw, 4))


def dw_weight_hwc(weight: torch.Tensor) -> np.ndarray:
    """The export's depthwise weight: ``[C, 1, Kh, Kw]`` → ``[Kh, Kw, C]`` (permute 2, 3, 1, 0), C padded with zeros
    to a multiple of 4 (the export asserts C % 4 == 0 first; the padding is what its width alignment would add)."""
    c, _, kh, kw = weight.shape
    hwc = weight.permute(2, 3, 1, 0).reshape(kh, kw, c).numpy()
    out = np.zeros((kh, kw, -(-c // 4) * 4), dtype=np.int8)
    out[:, :, :c] = hwc
    return out


def pack_dw_weight(hwc: np.ndarray) -> np.ndarray:
    """``pack_q8_conv2d_dw_weights``'s layout, in numpy: int32 texels ``[Kh·KW4, C4, 4]`` (texture row
    ``ky·KW4 + kx4``, column c4); component r = the word of channels ``4·c4 .. +3`` at tap (ky, 4·kx4 + r), zero past
    Kw."""
    kh, kw, c = hwc.shape
    c4, kw4 = c // 4, -(-kw // 4)
    padded = np.zeros((kh, 4 * kw4, c), dtype=np.int8)
    padded[:, :kw] = hwc
    words = np.ascontiguousarray(padded).view(np.int32).reshape(kh, kw4, 4, c4)  # [ky, kx4, r, c4]
    return np.ascontiguousarray(words.transpose(0, 1, 3, 2).reshape(kh * kw4, c4, 4))


def random_operands(g: torch.Generator, in_sizes, weight_shape, out_channels: int, bias: bool):
    q_in = torch.randint(-128, 128, tuple(in_sizes), dtype=torch.int8, generator=g)
    weight = torch.randint(-127, 128, tuple(weight_shape), dtype=torch.int8, generator=g)
    w_scales = (torch.rand(out_channels, generator=g) * 0.02 + 0.005).to(torch.float32)
    b = (torch.randn(out_channels, generator=g) * 2.0).to(torch.float32) if bias else None
    return q_in, weight, w_scales, b


IN_SCALE, IN_ZP, OUT_ZP = 0.05, 3, -5


def output_scale(adjusted: torch.Tensor, w_scales, bias) -> float:
    """An output scale that uses most of int8 for the conv's exact result (`adjusted`, the int conv of (input - zp),
    times the scales, plus bias), fp32-representable as the C++ reads it."""
    y64 = adjusted.to(torch.float64) * (IN_SCALE * w_scales.double()).reshape(1, -1, 1, 1)
    if bias is not None:
        y64 = y64 + bias.double().reshape(1, -1, 1, 1)
    return float(np.float32(max(float(y64.abs().max()) if y64.numel() else 0.0, 1e-3) / 110.0))


def requant_push(out_scale: float) -> bytes:
    """The push constants of the requantizing conv shaders: ``{input_scale, input_zp, 1.0f / output_scale,
    output_zp}``."""
    return struct.pack("<fifi", IN_SCALE, IN_ZP, np.float32(1.0) / np.float32(out_scale), OUT_ZP)


def epilogue_spec(has_bias: bool, relu: bool, lay5, lay6) -> dict:
    """Spec constants apply_bias (3), activation_type (4, relu 1) and the hashed layouts at 5 and 6 (which tensor's
    layout goes where differs between the shaders)."""
    return {3: int(bool(has_bias)), 4: int(bool(relu)), 5: lay5.spec_constant(), 6: lay6.spec_constant()}


def _per_channel(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return v.reshape(1, -1, 1, 1).expand_as(like) if like.dim() == 4 else v


def quantize_fp32(y: torch.Tensor, out_scale: float, out_zp: int) -> torch.Tensor:
    inv = torch.tensor(np.float32(1.0) / np.float32(out_scale))  # 1.0f / output_scale in the C++
    q = torch.round(y * inv) + torch.tensor(float(out_zp), dtype=torch.float32)
    return torch.clamp(q, -128, 127).to(torch.int8)


def _scale_bias(f: torch.Tensor, scale: torch.Tensor, bias, fused: bool) -> torch.Tensor:
    """``f · scale + bias`` in fp32: two roundings, or one (``fused``: the product is exact in float64, the sum
    rounds to 53 bits then to 24 — a double rounding that differs from one rounding only when the float64 sum lands
    exactly half-way between two fp32, about 2^-29 of the time)."""
    if bias is None:
        return f * _per_channel(scale, f)
    b = _per_channel(bias.to(torch.float32), f)
    if fused:
        return (f.to(torch.float64) * _per_channel(scale.to(torch.float64), f) + b.to(torch.float64)).to(torch.float32)
    return f * _per_channel(scale, f) + b


def requantize_sub_mul(adjusted: torch.Tensor, sums: torch.Tensor, w_scales, bias, in_scale: float, in_zp: int,
                       out_scale: float, out_zp: int, relu: bool, fused: bool = False) -> torch.Tensor:
    """The general / depthwise / transposed shaders' epilogue (see the module docstring). `adjusted` is the exact
    int conv of (input - zp) with the weight, [N, OC, H, W] int64; `sums` the per-channel weight sums. ``facc *=
    scale; facc += bias`` carries no ``precise``: a driver may contract it into one fma (``fused=True``)."""
    acc = adjusted + in_zp * sums.to(torch.int64).reshape(1, -1, 1, 1)  # what the int32 accumulator holds
    f = acc.to(torch.float32)
    f = f - _per_channel(sums.to(torch.float32) * torch.tensor(float(in_zp), dtype=torch.float32), f)
    scale = w_scales.to(torch.float32) * torch.tensor(in_scale, dtype=torch.float32)
    f = _scale_bias(f, scale, bias, fused)
    if relu:
        f = torch.clamp_min(f, 0.0)
    return quantize_fp32(f, out_scale, out_zp)


def sub_mul_references(adjusted: torch.Tensor, sums: torch.Tensor, w_scales, bias, out_scale: float,
                       relu: bool) -> tuple:
    """(split, fused, float64) references of the general / depthwise / transposed shaders at the families' qparams:
    ``requantize_sub_mul`` without and with a contracted multiply-add, and ET-VK's own ``reference_fp64``."""
    split, fused = (requantize_sub_mul(adjusted, sums, w_scales, bias, IN_SCALE, IN_ZP, out_scale, OUT_ZP, relu,
                                       fused=f) for f in (False, True))
    return split, fused, reference_fp64(adjusted, w_scales, bias, IN_SCALE, out_scale, OUT_ZP, relu)


def requantize_fma(adjusted: torch.Tensor, w_scales, bias, in_scale: float, out_scale: float, out_zp: int,
                   relu: bool, fused: bool = False) -> torch.Tensor:
    """q8ta_conv2d_pw.glsl's epilogue: ``fma(vec4(acc - zp·sums), ws · input_scale, bias)`` or the product alone.
    Without ``precise`` a GLSL ``fma`` may be split into a multiply and an add, and lavapipe splits it: the default
    (``fused=False``) is what lavapipe computes, ``fused=True`` a driver that fuses."""
    f = adjusted.to(torch.float32)
    scale = w_scales.to(torch.float32) * torch.tensor(in_scale, dtype=torch.float32)
    f = _scale_bias(f, scale, bias, fused)
    if relu:
        f = torch.clamp_min(f, 0.0)
    return quantize_fp32(f, out_scale, out_zp)


def conv_local_wg_size(global_size, *, narrow_x: bool = True) -> tuple:
    """The ladder ET-VK's conv local-size pickers end with (Q8taConv2d.cpp, Q8taConv2dDW.cpp,
    Q8taConv2dTransposed.cpp): 8×1×8 where x and z are both wide, else the whole work group along the one that is
    (the depthwise picker has no `narrow_x` step)."""
    x, _, z = global_size
    if x >= 6 and z >= 6:
        return (8, 1, 8)
    if narrow_x and x < 2:
        return (1, 1, 64)
    if z < 2:
        return (64, 1, 1)
    return (16, 1, 4)


def contraction_tolerance(split: torch.Tensor, fused: torch.Tensor) -> dict:
    """Dispatch keywords for a reference whose multiply-add a driver may or may not fuse: exact where both forms
    quantize alike (atol 0); else 1 LSB on at most the fraction of elements where they differ."""
    frac = mismatch(split, fused)
    return {"atol": 1 if frac else 0, "max_mismatch": frac}


def reference_fp64(y_int: torch.Tensor, w_scales, bias, in_scale: float, out_scale: float, out_zp: int,
                   relu: bool) -> torch.Tensor:
    """ET-VK's own reference: dequantize, conv in float64 (here: the exact int conv times the scales), quantize."""
    y = y_int.to(torch.float64) * (in_scale * w_scales.to(torch.float64)).reshape(1, -1, 1, 1)
    if bias is not None:
        y = y + bias.to(torch.float64).reshape(1, -1, 1, 1)
    if relu:
        y = torch.relu(y)
    return torch.clamp(torch.round(y / out_scale) + out_zp, -128, 127).to(torch.int8)


def int_conv2d(q_in: torch.Tensor, weight: torch.Tensor, in_zp: int, stride, padding, dilation,
               groups: int) -> torch.Tensor:
    """The exact int conv of (input - zp) with the weight (float64 holds every partial sum exactly here)."""
    y = F.conv2d(q_in.to(torch.float64) - in_zp, weight.to(torch.float64), None, stride, padding, dilation, groups)
    return y.round().to(torch.int64)


def int_conv_transpose2d(q_in: torch.Tensor, weight: torch.Tensor, in_zp: int, stride, padding, output_padding,
                         groups: int) -> torch.Tensor:
    y = F.conv_transpose2d(q_in.to(torch.float64) - in_zp, weight.to(torch.float64), None, stride, padding,
                           output_padding, groups)
    return y.round().to(torch.int64)


def out_hw(op: str, h: int, w: int, kernel, stride, padding, dilation) -> tuple[int, int]:
    ho = (h + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    wo = (w + 2 * padding[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    if ho < 1 or wo < 1:
        raise ValueError(f"{op}: the output would be empty: input H×W {h}×{w}, kernel {kernel}, stride {stride}, "
                         f"padding {padding}, dilation {dilation} give {ho}×{wo}")
    return ho, wo


def channel_buffers(sums, w_scales, bias, channels: int) -> list:
    """The per-output-channel buffers every int8 conv binds after its weight: weight sums (int32), weight scales and
    bias (fp32), each padded with zeros to a multiple of 4 channels."""
    n4 = 4 * ceil4(channels)
    return [Resource("buffer", padded(sums, n4, np.int32), name="t_weight_sums"),
            Resource("buffer", padded(w_scales, n4, np.float32), name="t_weight_scales"),
            Resource("buffer", padded(bias, n4, np.float32), name="t_bias")]


def conv_resources(out, inp, out_sizes, in_sizes, q_in, texels, channels: list, params_ubo: bytes) -> list:
    """A conv shader's bindings in declaration order: output, input, the packed weight texture, the channel
    buffers, the two BufferMetadata UBOs and Conv2DParams."""
    return [Resource("buffer", nbytes=4 * out.num_words(out_sizes), name="t_packed_int8_output"),
            Resource("buffer", packed_words(inp, q_in), name="t_packed_int8_input"),
            Resource("image", texels, extent=(texels.shape[1], texels.shape[0]), fmt="rgba32i",
                     name="t_packed_int8_weight"),
            *channels,
            Resource("ubo", out.buffer_metadata(out_sizes), name="outp"),
            Resource("ubo", inp.buffer_metadata(in_sizes), name="inp"),
            Resource("ubo", params_ubo, name="conv2d_params")]


def sub_mul_dispatch(op: str, variant: str, inp, out, q_in: torch.Tensor, adjusted: torch.Tensor, texels, sums,
                     w_scales, bias, params_ubo: bytes, relu: bool, pick_local, macs: int, shape: str,
                     **columns) -> Dispatch:
    """The Dispatch of a shader with the sub-mul epilogue (general, depthwise, transposed), from the exact int result
    `adjusted` [N, OC, H, W]: its bindings and constants, global ``{W4, H, OC4}`` with the op's local-size picker
    `pick_local`, the references and their tolerance, traffic, and the row's columns (`columns` after relu)."""
    n, oc, ho, wo = out_sizes = tuple(adjusted.shape)
    out_scale = output_scale(adjusted, w_scales, bias)
    expected, fused, ref64 = sub_mul_references(adjusted, sums, w_scales, bias, out_scale, relu)
    resources = conv_resources(out, inp, out_sizes, tuple(q_in.shape), q_in, texels,
                               channel_buffers(sums, w_scales, bias, oc), params_ubo)
    global_size = (ceil4(wo), ho, ceil4(oc))
    return Dispatch(op, variant, resources, requant_push(out_scale), epilogue_spec(bias is not None, relu, inp, out),
                    global_size, pick_local(global_size), 0, decoder(out, out_sizes), expected,
                    **contraction_tolerance(expected, fused),
                    bytes_moved=q_in.numel() + math.prod(out_sizes) + texels.nbytes + 3 * 16 * ceil4(oc), macs=macs,
                    params={"shape": shape, "in_layout": inp.name, "out_layout": out.name, "bias": bias is not None,
                            "relu": bool(relu), **columns, "fused_mismatch": mismatch(expected, fused),
                            "ref64_mismatch": mismatch(expected, ref64)})


def decoder(lay, sizes):
    return lambda raw: torch.from_numpy(np.asarray(lay.unpack(raw.view(np.int32), sizes)))


def shape_text(n, c, h, w, oc, ho, wo, kernel, stride, padding, dilation, groups) -> str:
    return (f"{n}x{c}x{h}x{w}->{oc}x{ho}x{wo} k{kernel[0]}x{kernel[1]} s{stride[0]}x{stride[1]} "
            f"p{padding[0]}x{padding[1]} d{dilation[0]}x{dilation[1]} g{groups}")


def mismatch(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a != b).double().mean()) if a.numel() else 0.0


def ceil4(x: int) -> int:
    return math.ceil(x / 4)
