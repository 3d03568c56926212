"""ET-VK's int8 depthwise conv ``q8ta_conv2d_dw`` and its weight packer ``pack_q8_conv2d_dw_weights``, dispatched
as their C++ does (Q8taConv2dDW.cpp at cff6f4dd32).

What the C++ and the templates fix:

* ``groups == in_channels`` (VK_CHECK_COND) and one output channel per input channel (the shader reads input
  channel block c4 for output block c4); input and output 4W4C or 4C1W.
* bindings output, input, weight (``isampler2D``), weight sums (``ivec4``), weight scales, bias (``vec4``; a zero
  buffer when there is none), the ``BufferMetadata`` UBOs of output and input, ``Conv2DParams``; push constants
  ``{input_scale, input_zp, 1.0f / output_scale, output_zp}``; spec constants apply_bias (3), activation_type (4),
  the hashed layouts of input (5) and output (6); global ``{W4, H, C4}`` with ``pick_q8ta_conv2d_dw_local_wg_size``.
* int32 accumulation of int8 × int8 per channel (``input_zp`` at taps outside the input), then the same fp32
  epilogue as the general conv (``_conv.requantize_sub_mul``): exact on lavapipe; a driver that contracts the
  unmarked multiply-add may differ by 1 LSB where the fused form quantizes differently (``fused_mismatch``).
* the weight: the export permutes ``[C, 1, Kh, Kw]`` to ``[Kh, Kw, C]`` (and asserts C % 4 == 0; the workbench pads
  C with zero channels instead, which is what the export's width alignment would do, so C % 4 != 0 runs too);
  ``prepack_quantized_conv2d_dw_weight`` packs it into an ``rgba32i`` texture of ``C4 × Kh·ceil(Kw / 4)`` texels
  (``_conv.pack_dw_weight``) with push constants ``sizes_pc_of`` (WHCN ``{4·C4, Kh·KW4, 1, 1}``) and
  ``orig_sizes = {Kh, Kw, C}`` (an ``ivec3``), global ``{C4, Kh·KW4, 1}`` with ``create_local_wg_size``.
  The ``pack_q8_conv2d_dw_weights`` family runs that shader against the numpy packing, exactly.

Batch: the shader writes batch 0 only (``inp_tidx.data[3] = 0; // batch = 0 since N == 1``); batch > 1 is refused
unless ``etvk_batch=True``.
"""
from __future__ import annotations

import math
import struct

import numpy as np
import torch

from ..codegen import Codegen
from ..dispatch import Dispatch, Resource, create_local_wg_size, nchw_sizes, packed_weight_output
from . import _conv as C


def pick_q8ta_conv2d_dw_local_wg_size(global_size) -> tuple:
    """``pick_q8ta_conv2d_dw_local_wg_size`` (Q8taConv2dDW.cpp)."""
    return C.conv_local_wg_size(global_size, narrow_x=False)


def q8ta_conv2d_dw(gen: Codegen, shape=(1, 8, 9, 11), out_channels: int | None = None, *, kernel_size=3, stride=1,
                   padding=1, dilation=1, groups: int | None = None, in_layout: str = "4W4C",
                   out_layout: str = "4W4C", bias: bool = True, relu: bool = False, fallback: bool = False,
                   etvk_batch: bool = False, seed: int = 0) -> Dispatch:
    """``add_q8ta_conv2d_dw_node`` on an int8 NCHW input of C channels (groups = out_channels = C)."""
    op = "q8ta_conv2d_dw"
    if fallback:
        raise ValueError(f"{op}: ET-VK has one variant, q8ta_conv2d_dw_float (it multiplies unpacked ints, no dot "
                         f"product): expected fallback=False, given fallback=True")
    n, c, h, w = nchw_sizes(shape)
    if out_channels is not None and int(out_channels) != c:
        raise ValueError(f"{op}: ET-VK's depthwise shader computes one output channel per input channel: expected "
                         f"out_channels {c}, given {out_channels}")
    if groups is not None and int(groups) != c:
        raise ValueError(f"{op}: ET-VK checks groups == in_channels (Q8taConv2dDW.cpp): expected groups {c}, given "
                         f"{groups}")
    kernel = C.pair(kernel_size, "kernel_size", op, 1)
    stride, padding = C.pair(stride, "stride", op, 1), C.pair(padding, "padding", op, 0)
    dilation = C.pair(dilation, "dilation", op, 1)
    C.refuse_batch(op, n, etvk_batch)
    inp, out = C.conv_layouts(op, in_layout, out_layout)
    ho, wo = C.out_hw(op, h, w, kernel, stride, padding, dilation)
    variant = "q8ta_conv2d_dw_float"
    C.expand_variant(gen, op, variant, "q8ta_conv2d_dw")
    g = torch.Generator().manual_seed(seed)
    q_in, weight, w_scales, b = C.random_operands(g, (n, c, h, w), (c, 1, *kernel), c, bias)
    adjusted = C.int_conv2d(q_in, weight, C.IN_ZP, stride, padding, dilation, c)
    hwc = C.dw_weight_hwc(weight)
    sums = torch.from_numpy(hwc.astype(np.int32).sum((0, 1)))[:c]
    return C.sub_mul_dispatch(op, variant, inp, out, q_in, adjusted, C.pack_dw_weight(hwc), sums, w_scales, b,
                              C.conv2d_params(kernel, stride, padding, dilation, c, c, c), relu,
                              pick_q8ta_conv2d_dw_local_wg_size, macs=math.prod((n, c, ho, wo)) * kernel[0] * kernel[1],
                              shape=C.shape_text(n, c, h, w, c, ho, wo, kernel, stride, padding, dilation, c))


def pack_q8_conv2d_dw_weights(gen: Codegen, shape=(8, 1, 3, 5), *, storage: str = "texture2d", weight=None,
                              seed: int = 0) -> Dispatch:
    """ET-VK's prepack of an int8 depthwise weight ``[C, 1, Kh, Kw]`` (``prepack_quantized_conv2d_dw_weight``),
    checked exactly against ``_conv.pack_dw_weight``; ``storage="buffer"`` holds the same texels row by row."""
    op = "pack_q8_conv2d_dw_weights"
    if storage not in ("texture2d", "buffer"):
        raise ValueError(f"{op}: storage must be 'texture2d' or 'buffer', got {storage!r}")
    if weight is None:
        dims = tuple(int(s) for s in shape)
        if len(dims) != 4 or dims[1] != 1 or min(dims) < 1:
            raise ValueError(f"{op}: the depthwise weight is [C, 1, Kh, Kw] with sizes >= 1, given {tuple(shape)}")
        weight = torch.randint(-127, 128, dims, dtype=torch.int8, generator=torch.Generator().manual_seed(seed))
    weight = torch.as_tensor(weight)
    if weight.dtype != torch.int8 or weight.dim() != 4 or weight.shape[1] != 1:
        raise ValueError(f"{op}: an int8 [C, 1, Kh, Kw] weight, given {weight.dtype} {tuple(weight.shape)}")
    variant = f"pack_q8_conv2d_dw_weights_{storage}"
    C.expand_variant(gen, op, variant, "pack_q8_conv2d_dw_weights")
    c, _, kh, kw = weight.shape
    hwc = C.dw_weight_hwc(weight)
    texels = C.pack_dw_weight(hwc)
    ny, nx = texels.shape[:2]
    out, decode = packed_weight_output(ny, nx, storage)
    resources = [out, Resource("buffer", np.ascontiguousarray(hwc).view(np.int32).reshape(-1), name="t_int8_weight")]
    push = struct.pack("<4i3i", 4 * nx, ny, 1, 1, kh, kw, hwc.shape[2])
    global_size = (nx, ny, 1)
    return Dispatch(op, variant, resources, push, {}, global_size, create_local_wg_size(global_size), 0, decode,
                    torch.from_numpy(texels), bytes_moved=hwc.nbytes + texels.nbytes,
                    params={"shape": f"{c}x1x{kh}x{kw}", "storage": storage})
