"""ET-VK's int8-in, int8-out convolution of the q8csw path (``et_vk.conv2d_q8ta_q8csw_q8to``, QuantizedConvolution.cpp)
and the weight prepack its direct kernel reads (``pack_q8_conv2d_weights``, ``prepack_quantized_conv2d_weight`` in
Q8taConv2d.cpp) — dispatched as the C++ does.

When the C++ picks which (``static_quantized_conv2d_impl``, input and output 4W4C; other layouts go to
``add_q8ta_conv2d_node``, depthwise — groups == C_in — to ``conv2d_dw_q8ta_q8csw_q8to``):

* ``should_use_im2col``: pointwise (1×1), or ``Kh·Kw <= 10`` and ``groups == 1`` → ``conv2d_q8ta_q8csw_q8to_linear_tiled``
  (a GEMM over an im2col matrix; the weight prepacked by ``pack_q8_linear_weight``). Its input is the output of
  ``im2col_packed_int8`` (``[K, H_out, align4(W_out)]``, 4W4C, K = ``align4(Kh·Kw·IC_g)·groups`` in (ky, kx, ic)
  order, ``input_zp`` outside the image and past the logical K) — except for a stride-1, padding-0, dilation-1
  pointwise conv, which reads the input itself (``is_s1p0d1_pointwise``). The workbench builds that im2col matrix on
  the host (the ``im2col_packed_int8`` shader is another family's); the conv shader is what is dispatched here.
* otherwise → ``conv2d_q8ta_q8csw_q8to`` (direct: per output row, a window of input words per 4 output columns),
  weight prepacked by ``pack_q8_conv2d_weights`` into texels ``(oc4·Kw + kx, ky·IC4 + ic4)``, component j = output
  channel ``4·oc4 + j``, word = input channels ``4·ic4 .. +3`` at (ky, kx).

Both: kernel name + IO storage (``buffer`` | ``texture3d``) + weight storage (``texture2d``) + ``_float``;
bindings output, input, weight (``isampler2D``), weight sums (ivec4), scales (vec4), bias (vec4, a dummy when there
is none), UBOs ``sizes_ubo(output)``, ``sizes_ubo(input or im2col)``; push constants
``{float input_scale; int input_zp; float output_inv_scale; int output_zp}`` (``1.0f / output_scale``); spec
constants 3–19 from ``GenerateSpecConstants`` (apply_bias, stride x/y, padding x/y, dilation x/y, kernel x/y,
in/out channels per group, K4_per_group, K4, K_per_group, logical_K, logical_K_per_group, groups);
global ``{ceil(C_out / C_per_tile), ceil(W_out / 4), H_out}`` (``pick_static_quantized_conv2d_global_wg_size``:
C_per_tile 8 for "linear" names, else 4), local ``pick_hw_square_wg_size``. Weight sums, scales and bias are padded to
a multiple of 4 by ET-VK's export (patterns/quantized_convolution.py); the workbench pads them to 8·ceil(C_out/8)
(zeros): the linear-tiled kernel reads TILE_N4 = 2 blocks per thread without a bound check.

Input padding lanes: a 4W4C tensor's lanes past W and past C are whatever its producer wrote; ET-VK's
``q8ta_quantize`` (block_load.glslh loads 0.0 there, quantized to ``zp``) writes the zero point, and the direct
kernel relies on it: its window load checks bounds per block of 4 columns, not per column, so columns
``W .. align4(W) - 1`` are read as data. ``input_pad_lanes="zp"`` (default) packs as q8ta_quantize would;
``"zero"`` packs zeros there (as a producer that writes 0 would) to show what that costs.

Findings (tests/test_etvk_families_q8csw.py):

* the direct kernel ignores horizontal dilation: ``perform_conv1d`` (conv2d_q8_utils.glslh) takes window column
  ``out_w · stride_x + kx``, not ``… + kx · dilation_x`` (the window itself is loaded for the dilated extent). The
  C++ sends dilated convs there whenever Kh·Kw > 10 or groups > 1; smallest: ``shape=(1, 8, 1, 3), out_channels=8,
  groups=2, kernel_size=(1, 2), dilation=(1, 2), padding=0``. Vertical dilation is right.
* the linear-tiled kernel computes 8 output channels per thread but takes the quant group of the first
  (``group_idx = n / out_channels_per_group``): a grouped pointwise conv (always sent there) with
  ``OC_g % 8 == 4`` reads the previous group's input for every second block of 4; smallest:
  ``shape=(1, 8, 1, 1), out_channels=8, groups=2, kernel_size=1, padding=0``.
* the direct kernel's window array holds MAX_WINDOW_WIDTH = 16 words and the C++ never checks
  ``3·stride_x + (Kw - 1)·dilation_x + 1`` against it (e.g. Kw 7, stride 2, dilation 2: 19): the family refuses
  such shapes rather than run a shader that writes past a local array.
* ``load_weight_block`` reads a buffer weight under ``PACKED_INT8_WEIGHTS_BUFFER``, a macro no template defines
  (the templates define WEIGHT_BUFFER): harmless today, only texture2d weights are generated.

Batch: the shaders index the output's (W, H, C) only (global z = H, no batch term): leading sizes > 1 are refused,
``etvk_batch=True`` dispatches as the C++ would (batch 0 alone is computed).

The reference is the shader's arithmetic in torch: int32 accumulation of the int8 input (padded with ``input_zp``)
× the int8 weight, ``acc - input_zp · sum(w)``, then ``float(adj) · float32(scale_w · input_scale)`` (no bias) or
``fma(float(adj), float32(scale_w · input_scale), bias)`` (bias: one rounding, computed in float64 — exact but for
double-rounding ties, which need |differences| below 2^-29 relative), ``round(y · inv_scale) + zp`` clamped.
Vulkan lets a driver compute that (not ``precise``) fma as a multiply and an add: the Dispatch allows 1 LSB on exactly
the fraction of elements where that would change the result (lavapipe fuses; the tests there ask for 0).
ET-VK's float64 reference (custom_ops_lib.py's q8ta_conv2d: dequantize, conv2d, quantize) is the ``ref64_mismatch``
column.
"""
from __future__ import annotations

import math
import struct

import numpy as np
import torch
import torch.nn.functional as F

from ...vk.spirv import reflect
from ..codegen import Codegen
from ..dispatch import (Dispatch, Resource, int8_layout, nchw_sizes, packed_words, padded,
                        pick_hw_square_wg_size)
from ._conv import pack_conv2d_weight, weight_matrix
from ._linear import prepack_weight
from .linear_q8ta_q8csw import check_template

MAX_WINDOW_WIDTH = 16  # conv2d_q8ta_q8csw_q8to.glsl


def _pair(v, what: str) -> tuple[int, int]:
    t = tuple(int(x) for x in (v if hasattr(v, "__len__") else (v, v)))
    if len(t) != 2:
        raise ValueError(f"{what} is an int or an (h, w) pair, got {v!r}")
    return t


def should_use_im2col(kernel_size, groups: int) -> bool:
    """QuantizedConvolution.cpp's ``should_use_im2col``."""
    kh, kw = kernel_size
    return kh * kw == 1 or (kh * kw <= 10 and groups == 1)


def pack_input(q: torch.Tensor, zp: int, pad_lanes: str) -> np.ndarray:
    """4W4C words of an int8 NCHW tensor; the padding lanes hold `zp` ("zp", as q8ta_quantize writes) or 0."""
    lay = int8_layout("4W4C")
    words = packed_words(lay, q)
    if pad_lanes == "zp":
        real = packed_words(lay, torch.ones_like(q)).view(np.int8) != 0
        b = words.view(np.int8).copy()
        b[~real] = zp
        words = b.view(np.int32)
    return words


def _to_texture(words: np.ndarray, sizes) -> np.ndarray:
    """4W4C buffer words (block order h, w4, c4) → 3-D texture data (z = c4, y = h, x = w4, 4 words)."""
    n, c, h, w = sizes
    c4 = math.ceil(c / 4)
    blocks = words.reshape(n, h, math.ceil(w / 4), c4, 4).transpose(0, 3, 1, 2, 4)  # z = n·C4 + c4
    return np.ascontiguousarray(blocks).reshape(n * c4, h, math.ceil(w / 4), 4)


def _from_texture(tex: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(tex, dtype=np.int32).transpose(1, 2, 0, 3)).reshape(-1)


def im2col(q_in: torch.Tensor, zp: int, kernel_size, stride, padding, dilation, groups: int, out_hw) -> torch.Tensor:
    """The int8 im2col matrix ``im2col_packed_int8`` makes, as an NCHW tensor ``[1, K, H_out, align4(W_out)]``:
    channel ``g·K_per_group + (ky·Kw + kx)·IC_g + ic`` = input channel ``g·IC_g + ic`` at the window position,
    ``zp`` outside the image, past the logical K of each group, and for columns past W_out."""
    _, c, h, w = q_in.shape
    kh, kw = kernel_size
    ho, wo = out_hw
    icg = c // groups
    kg = 4 * math.ceil(kh * kw * icg / 4)
    padded = F.pad(q_in.to(torch.int32), (padding[1], padding[1] + kw * dilation[1] + stride[1] * 4,
                                          padding[0], padding[0] + kh * dilation[0]), value=zp)
    out = torch.full((1, kg * groups, ho, 4 * math.ceil(wo / 4)), zp, dtype=torch.int32)
    ys = torch.arange(ho) * stride[0]
    xs = torch.arange(wo) * stride[1]
    for g in range(groups):
        for ky in range(kh):
            for kx in range(kw):
                win = padded[0, g * icg:(g + 1) * icg][:, ys[:, None] + ky * dilation[0],
                                                       xs[None, :] + kx * dilation[1]]
                k0 = g * kg + (ky * kw + kx) * icg
                out[0, k0:k0 + icg, :, :wo] = win
    return out.to(torch.int8)


def reference(q_in, weight, w_scales, bias, in_scale, in_zp, out_scale, out_zp, stride, padding, dilation, groups,
              fused: bool = True):
    """The shader's arithmetic (linear_int8_output_tile_compute.glslh). ``fused=False``: a driver that computes the
    (not ``precise``) fma as a multiply and an add."""
    x = F.pad(q_in.to(torch.float64), (padding[1], padding[1], padding[0], padding[0]), value=float(in_zp))
    acc = F.conv2d(x, weight.to(torch.float64), None, stride, 0, dilation, groups).round().to(torch.int64)
    acc = acc.to(torch.int32)  # int32 accumulation (the sums here stay far from overflow)
    sums = weight.to(torch.int32).sum((1, 2, 3))
    adjusted = acc - in_zp * sums[None, :, None, None]
    scale = (w_scales.to(torch.float32) * torch.tensor(in_scale, dtype=torch.float32))[None, :, None, None]
    if bias is None:
        y = adjusted.to(torch.float32) * scale
    elif fused:  # fma: one rounding of the exact a·b + c (a·b is exact in float64)
        y = (adjusted.to(torch.float32).double() * scale.double()
             + bias.to(torch.float32).double()[None, :, None, None]).to(torch.float32)
    else:
        y = adjusted.to(torch.float32) * scale + bias.to(torch.float32)[None, :, None, None]
    inv_scale = torch.tensor(np.float32(1.0) / np.float32(out_scale))
    q = torch.round(y * inv_scale) + torch.tensor(float(out_zp), dtype=torch.float32)
    return torch.clamp(q, -128, 127).to(torch.int8)


def reference_fp64(q_in, weight, w_scales, bias, in_scale, in_zp, out_scale, out_zp, stride, padding, dilation,
                   groups):
    """ET-VK's own reference (custom_ops_lib.py, q8ta_conv2d) in float64."""
    x = (q_in.to(torch.float64) - in_zp) * in_scale
    wf = weight.to(torch.float64) * w_scales.to(torch.float64)[:, None, None, None]
    y = F.conv2d(x, wf, bias.to(torch.float64) if bias is not None else None, stride, padding, dilation, groups)
    return torch.clamp(torch.round(y / out_scale) + out_zp, -128, 127).to(torch.int8)


def _spec_constants(apply_bias, ks, stride, padding, dilation, icg, ocg, groups) -> dict:
    """``GenerateSpecConstants`` (ids from 3; the C++'s pairs are (x, y) = (w, h))."""
    logical_kg = ks[0] * ks[1] * icg
    kg = 4 * math.ceil(logical_kg / 4)
    values = [apply_bias, stride[1], stride[0], padding[1], padding[0], dilation[1], dilation[0], ks[1], ks[0],
              icg, ocg, kg // 4, kg * groups // 4, kg, ks[0] * ks[1] * icg * groups, logical_kg, groups]
    return {3 + i: int(v) for i, v in enumerate(values)}


def _conv_dispatch(gen: Codegen, op: str, shape, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                   storage, input_pad_lanes, etvk_batch, seed) -> Dispatch:
    n, c, h, w = nchw_sizes(shape)
    ks, st, pd, dl = (_pair(kernel_size, "kernel_size"), _pair(stride, "stride"), _pair(padding, "padding"),
                      _pair(dilation, "dilation"))
    groups = int(groups)
    cout = int(out_channels if out_channels is not None else c)
    if min(ks + st + dl) < 1 or min(pd) < 0 or cout < 1 or groups < 1:
        raise ValueError(f"{op}: kernel_size, stride, dilation >= 1, padding >= 0, out_channels >= 1, groups >= 1; "
                         f"given kernel_size={ks}, stride={st}, padding={pd}, dilation={dl}, out_channels={cout}, "
                         f"groups={groups}")
    if storage not in ("buffer", "texture3d"):
        raise ValueError(f"{op}: IO storage 'buffer' or 'texture3d' (the template's variants), got {storage!r}")
    if input_pad_lanes not in ("zp", "zero"):
        raise ValueError(f"{op}: input_pad_lanes is 'zp' (what q8ta_quantize writes) or 'zero', "
                         f"got {input_pad_lanes!r}")
    if c % groups or cout % groups:
        raise ValueError(f"{op}: channels must divide into groups: C_in={c}, C_out={cout}, groups={groups}")
    if groups == c and groups > 1:
        raise ValueError(f"{op}: groups == C_in ({c}) is a depthwise conv, which ET-VK sends to "
                         f"conv2d_dw_q8ta_q8csw_q8to (another family); expected groups < C_in")
    icg, ocg = c // groups, cout // groups
    if groups > 1 and (icg % 4 or ocg % 4):
        raise ValueError(f"{op}: a grouped conv needs channels per group that are multiples of 4 (the shaders take "
                         f"a group's first input block as group · ceil(IC_g / 4) and one group per block of 4 output "
                         f"channels); given IC_g={icg}, OC_g={ocg}")
    ho = (h + 2 * pd[0] - dl[0] * (ks[0] - 1) - 1) // st[0] + 1
    wo = (w + 2 * pd[1] - dl[1] * (ks[1] - 1) - 1) // st[1] + 1
    if ho < 1 or wo < 1:
        raise ValueError(f"{op}: the output would be empty ({ho}x{wo}) for input {h}x{w}, kernel {ks}, "
                         f"stride {st}, padding {pd}, dilation {dl}")
    if n > 1 and not etvk_batch:
        raise ValueError(f"{op}: ET-VK's shader indexes (W, H, C) only (global z = H, no batch term); expected "
                         f"batch 1, given {n} — pass etvk_batch=True to see what ET-VK computes")
    linear = op.endswith("_linear_tiled")
    window = 3 * st[1] + (ks[1] - 1) * dl[1] + 1
    if not linear and window > MAX_WINDOW_WIDTH:
        raise ValueError(f"{op}: the direct kernel keeps 3·stride_x + (Kw - 1)·dilation_x + 1 input columns in an "
                         f"array of MAX_WINDOW_WIDTH = {MAX_WINDOW_WIDTH}; given {window} (stride {st[1]}, kernel "
                         f"width {ks[1]}, dilation {dl[1]}): the shader would write past it (the C++ does not check)")
    variant = f"{op}_{storage}_texture2d_float"
    check_template(gen, variant, op)

    g = torch.Generator().manual_seed(seed)
    q_in = torch.randint(-128, 128, (n, c, h, w), dtype=torch.int8, generator=g)
    weight = torch.randint(-127, 128, (cout, icg, ks[0], ks[1]), dtype=torch.int8, generator=g)
    w_scales = (torch.rand(cout, generator=g) * 0.02 + 0.005).to(torch.float32)
    b = (torch.randn(cout, generator=g) * 2.0).to(torch.float32) if bias else None
    in_scale, in_zp, out_zp = float(np.float32(0.05)), 3, -5
    out_scale = float(np.float32(float((in_scale * w_scales.double().max() * 128 * math.sqrt(icg * ks[0] * ks[1])))
                                 / 6.0))
    args = (q_in, weight, w_scales, b, in_scale, in_zp, out_scale, out_zp, st, pd, dl, groups)
    expected, ref64 = reference(*args), reference_fp64(*args)
    differ = reference(*args, fused=False) != expected  # where an unfused fma would land 1 LSB away

    oc4, pad8 = math.ceil(cout / 4), 8 * math.ceil(cout / 8)
    kg = 4 * math.ceil(ks[0] * ks[1] * icg / 4)
    optimizable_pw = ks == (1, 1) and st == (1, 1) and pd == (0, 0) and dl == (1, 1)
    q_first = q_in[:1]  # im2col_packed_int8's sizes have no batch: it reads image 0
    if linear and not optimizable_pw:
        cols = im2col(q_first, in_zp, ks, st, pd, dl, groups, (ho, wo))
        in_sizes = (1, kg * groups, ho, 4 * math.ceil(wo / 4))
        in_words = packed_words(int8_layout("4W4C"), cols)  # no padding lanes: W and K are multiples of 4
    else:
        in_sizes = (n, c, h, w)
        in_words = pack_input(q_in, in_zp, input_pad_lanes)
    if linear:
        texels = prepack_weight(flatten_weight(weight))  # pack_q8_linear_weight of [OC, K_per_group]
    else:
        texels = prepack_conv2d_weight(weight)
    out_sizes = (1, cout, ho, wo)
    out_lay = int8_layout("4W4C")
    out_words = out_lay.num_words(out_sizes)
    if storage == "buffer":
        inp = Resource("buffer", in_words, name="t_packed_int8_input")
        out = Resource("buffer", nbytes=4 * out_words, name="t_packed_int8_output")
        raw_words = lambda raw: raw.view(np.int32)
    else:
        tex = _to_texture(in_words, in_sizes)
        inp = Resource("image", tex, extent=tex.shape[2::-1], fmt="rgba32i", name="t_packed_int8_input")
        out = Resource("image", extent=(math.ceil(wo / 4), ho, oc4), fmt="rgba32i", name="t_packed_int8_output")
        raw_words = _from_texture
    def decode(raw):  # batch 0 (the only one ET-VK's shader writes); later batches read as zeros
        first = torch.from_numpy(np.asarray(out_lay.unpack(raw_words(raw)[:out_words], out_sizes)))
        return torch.cat([first, torch.zeros((n - 1, cout, ho, wo), dtype=torch.int8)])
    sizes_ubo = lambda s: struct.pack("<4i", s[3], s[2], s[1], s[0])
    resources = [
        out, inp,
        Resource("image", texels, extent=(texels.shape[1], texels.shape[0]), fmt="rgba32i",
                 name="t_packed_int8_weight"),
        Resource("buffer", padded(weight.to(torch.int32).sum((1, 2, 3)), pad8, np.int32), name="t_weight_sums"),
        Resource("buffer", padded(w_scales, pad8, np.float32), name="t_weight_scales"),
        Resource("buffer", padded(b, pad8, np.float32), name="t_bias"),
        Resource("ubo", sizes_ubo((n, cout, ho, wo)), name="output_sizes"),
        Resource("ubo", sizes_ubo(in_sizes) if not linear or optimizable_pw
                 else struct.pack("<4i", in_sizes[3], in_sizes[2], in_sizes[1], 1),
                 name="im2col_sizes" if linear else "input_sizes"),
    ]
    # ET-VK binds every declared resource (its layouts come from the template); glslc -O drops the im2col sizes UBO
    # of the linear kernel's texture variant (only the buffer indexing reads it): bind what the module declares
    if gen is not None:
        declared_slots = {b.binding for b in reflect(bytes(gen.compile(variant).code)).bindings}
        resources = [r for i, r in enumerate(resources) if i in declared_slots]
    push = struct.pack("<fifi", in_scale, in_zp, np.float32(1.0) / np.float32(out_scale), out_zp)
    global_size = (math.ceil(cout / (8 if linear else 4)), math.ceil(wo / 4), ho)
    cpp_pick = "conv2d_q8ta_q8csw_q8to" + ("_linear_tiled" if should_use_im2col(ks, groups) else "")
    return Dispatch(op, variant, resources, push, _spec_constants(int(b is not None), ks, st, pd, dl, icg, ocg, groups),
                    global_size, pick_hw_square_wg_size(global_size), 0, decode, expected,
                    atol=1.0 if differ.any() else 0.0, max_mismatch=float(differ.double().mean()) if differ.any() else 0.0,
                    bytes_moved=4 * len(in_words) + 4 * out_words + texels.nbytes + 3 * 16 * oc4,
                    macs=n * cout * ho * wo * icg * ks[0] * ks[1],
                    params={"shape": "x".join(map(str, (n, c, h, w))) + f"->{cout}", "kernel_size": f"{ks[0]}x{ks[1]}",
                            "stride": f"{st[0]}x{st[1]}", "padding": f"{pd[0]}x{pd[1]}",
                            "dilation": f"{dl[0]}x{dl[1]}", "groups": groups, "bias": b is not None,
                            "storage": storage, "input_pad_lanes": input_pad_lanes, "cpp_pick": cpp_pick,
                            "ref64_mismatch": float((expected != ref64).double().mean())})


def conv2d_q8ta_q8csw_q8to(gen: Codegen, shape=(1, 8, 9, 11), out_channels: int | None = 12, *, kernel_size=5,
                           stride=1, padding=2, dilation=1, groups: int = 1, bias: bool = True,
                           storage: str = "buffer", input_pad_lanes: str = "zp", etvk_batch: bool = False,
                           seed: int = 0) -> Dispatch:
    """The direct kernel (ET-VK picks it for 4W4C IO when Kh·Kw > 10 or groups > 1, not pointwise, not
    depthwise): int8 NCHW input (4W4C) → int8 output (4W4C). The ``cpp_pick`` column says which kernel ET-VK's C++
    would pick for the shape."""
    return _conv_dispatch(gen, "conv2d_q8ta_q8csw_q8to", shape, out_channels, kernel_size, stride, padding, dilation,
                          groups, bias, storage, input_pad_lanes, etvk_batch, seed)


def conv2d_q8ta_q8csw_q8to_linear_tiled(gen: Codegen, shape=(1, 8, 9, 11), out_channels: int | None = 12, *,
                                        kernel_size=3, stride=1, padding=1, dilation=1, groups: int = 1,
                                        bias: bool = True, storage: str = "buffer", input_pad_lanes: str = "zp",
                                        etvk_batch: bool = False, seed: int = 0) -> Dispatch:
    """The im2col GEMM kernel (ET-VK picks it for 4W4C IO when pointwise or Kh·Kw <= 10 with groups == 1):
    reads the host-made im2col matrix (or, for a stride-1 padding-0 pointwise conv, the input itself)."""
    return _conv_dispatch(gen, "conv2d_q8ta_q8csw_q8to_linear_tiled", shape, out_channels, kernel_size, stride,
                          padding, dilation, groups, bias, storage, input_pad_lanes, etvk_batch, seed)


# the export's weight matrix and pack_q8_conv2d_weights' layout are the conv families' (one definition, in _conv)
flatten_weight = weight_matrix


def prepack_conv2d_weight(weight: torch.Tensor) -> np.ndarray:
    """``pack_q8_conv2d_weights``' texels of an int8 ``[OC, IC_g, Kh, Kw]`` weight (``_conv.pack_conv2d_weight``)."""
    oc, icg, kh, kw = weight.shape
    return pack_conv2d_weight(weight_matrix(weight), (kh, kw), icg)
