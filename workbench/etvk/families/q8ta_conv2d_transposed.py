"""ET-VK's int8 transposed conv ``q8ta_conv2d_transposed``, dispatched as its C++ does (Q8taConv2dTransposed.cpp at
cff6f4dd32).

What the C++, the export and the template fix:

* dilation 1 only (VK_CHECK_COND; the export does not match other dilations); grouped convs need
  ``in_channels_per_group % 4 == 0`` (VK_CHECK_COND) and, between ``1 < groups < OC``, ``out_channels_per_group %
  4 == 0`` (the export's pattern); input and output 4W4C or 4C1W; output_padding only sizes the output.
* the weight ``[IC, OCg, Kh, Kw]`` is reshaped by the export to ``[OC, Kh·Kw·ICg]`` ((groups, ICg, OCg, Kh, Kw) →
  permute (0, 2, 3, 4, 1); no kernel flip), padded to a multiple of 4, and packed by ``pack_q8_conv2d_weights``
  exactly as the regular conv's (``prepack_quantized_conv2d_weight``).
* bindings, push constants and spec constants as ``q8ta_conv2d``: output, input, weight, weight sums, scales, bias,
  the BufferMetadata of output and input, Conv2DParams; ``{input_scale, input_zp, 1.0f / output_scale,
  output_zp}``; apply_bias (3), activation_type (4), input (5) and output (6) hashed layouts; global ``{W4, H, C4}``
  with ``pick_q8ta_conv2d_transposed_local_wg_size`` (local y always 1).
* for each output (x, y) and tap (ky, kx), the input is ``((y + pad - ky) / stride, …)`` where the division is exact
  and inside the input, else ``input_zp`` — so the int accumulator minus ``input_zp · weight_sums`` is the exact int
  transposed conv of (input - zp); the epilogue is the general conv's (``_conv.requantize_sub_mul``): exact on
  lavapipe, 1 LSB allowed where a fused multiply-add would quantize differently (``fused_mismatch``).

Batch: the shader writes batch 0 only; batch > 1 is refused unless ``etvk_batch=True``.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..codegen import Codegen
from ..dispatch import Dispatch, nchw_sizes
from . import _conv as C


def pick_q8ta_conv2d_transposed_local_wg_size(global_size) -> tuple:
    """``pick_q8ta_conv2d_transposed_local_wg_size`` (Q8taConv2dTransposed.cpp)."""
    return C.conv_local_wg_size(global_size)


def q8ta_conv2d_transposed(gen: Codegen, shape=(1, 8, 5, 7), out_channels: int | None = 12, *, kernel_size=3,
                           stride=2, padding=1, output_padding=1, dilation=1, groups: int = 1,
                           in_layout: str = "4W4C", out_layout: str = "4W4C", bias: bool = True, relu: bool = False,
                           fallback: bool = False, etvk_batch: bool = False, seed: int = 0) -> Dispatch:
    """``add_q8ta_conv2d_transposed_node`` on an int8 NCHW input (torch's ``conv_transpose2d`` semantics)."""
    op = "q8ta_conv2d_transposed"
    n, c, h, w = nchw_sizes(shape)
    oc = int(out_channels if out_channels is not None else c)
    kernel = C.pair(kernel_size, "kernel_size", op, 1)
    stride, padding = C.pair(stride, "stride", op, 1), C.pair(padding, "padding", op, 0)
    out_pad = C.pair(output_padding, "output_padding", op, 0)
    dil = C.pair(dilation, "dilation", op, 1)
    groups = int(groups)
    if dil != (1, 1):
        raise ValueError(f"{op}: ET-VK supports dilation 1 only (\"q8ta_conv2d_transposed only supports dilation=1\" "
                         f"in Q8taConv2dTransposed.cpp); given {dil}")
    if oc < 1 or groups < 1 or c % groups or oc % groups:
        raise ValueError(f"{op}: groups must divide the input and output channels: given {c} in, {oc} out, "
                         f"groups {groups}")
    icg, ocg = c // groups, oc // groups
    if groups > 1 and icg % 4:
        raise ValueError(f"{op}: for groups > 1 ET-VK needs input channels per group a multiple of 4 "
                         f"(VK_CHECK_COND in Q8taConv2dTransposed.cpp); given {c} / {groups} = {icg}")
    if 1 < groups < oc and ocg % 4:
        raise ValueError(f"{op}: ET-VK's export matches grouped convs only with output channels per group a "
                         f"multiple of 4 (patterns/quantized_convolution.py); given {oc} / {groups} = {ocg}")
    if out_pad[0] >= max(stride[0], dil[0]) or out_pad[1] >= max(stride[1], dil[1]):
        raise ValueError(f"{op}: output_padding must be smaller than stride (torch's rule): given output_padding "
                         f"{out_pad}, stride {stride}")
    C.refuse_batch(op, n, etvk_batch)
    inp, out = C.conv_layouts(op, in_layout, out_layout)
    ho = (h - 1) * stride[0] - 2 * padding[0] + kernel[0] - 1 + out_pad[0] + 1
    wo = (w - 1) * stride[1] - 2 * padding[1] + kernel[1] - 1 + out_pad[1] + 1
    if ho < 1 or wo < 1:
        raise ValueError(f"{op}: the output would be empty: input {h}×{w}, kernel {kernel}, stride {stride}, "
                         f"padding {padding}, output_padding {out_pad} give {ho}×{wo}")
    variant = f"q8ta_conv2d_transposed{'_fallback' if fallback else ''}_float"
    C.expand_variant(gen, op, variant, "q8ta_conv2d_transposed")
    g = torch.Generator().manual_seed(seed)
    q_in, weight, w_scales, b = C.random_operands(g, (n, c, h, w), (c, ocg, *kernel), oc, bias)
    adjusted = C.int_conv_transpose2d(q_in, weight, C.IN_ZP, stride, padding, out_pad, groups)
    # the export's reshape: (IC, OCg, Kh, Kw) → (groups, ICg, OCg, Kh, Kw) → (OC, ICg, Kh, Kw) as a regular conv's
    regular = weight.reshape(groups, icg, ocg, *kernel).permute(0, 2, 1, 3, 4).reshape(oc, icg, *kernel)
    mat = C.weight_matrix(regular)
    sums = torch.from_numpy(mat.astype(np.int32).sum(1))
    shape_text = (f"{n}x{c}x{h}x{w}->{oc}x{ho}x{wo} k{kernel[0]}x{kernel[1]} s{stride[0]}x{stride[1]} "
                  f"p{padding[0]}x{padding[1]} op{out_pad[0]}x{out_pad[1]} g{groups}")
    return C.sub_mul_dispatch(op, variant, inp, out, q_in, adjusted, C.pack_conv2d_weight(mat, kernel, icg), sums,
                              w_scales, b, C.conv2d_params(kernel, stride, padding, dil, groups, c, oc), relu,
                              pick_q8ta_conv2d_transposed_local_wg_size,
                              macs=math.prod(q_in.shape) * ocg * kernel[0] * kernel[1], shape=shape_text)
