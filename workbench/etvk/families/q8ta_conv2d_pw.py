"""ET-VK's `q8ta_conv2d_pw`: dispatched as its C++ does (one `make` per op)."""
from __future__ import annotations

import math
import struct

import numpy as np
import torch
import torch.nn.functional as F

from ...kernels import conv_pw
from ..codegen import Codegen
from ._conv import CONV_LAYOUTS
from ..dispatch import Dispatch, Resource, int8_decoder, int8_layout, nchw_sizes, packed_words, pick_hw_square_wg_size


def q8ta_conv2d_pw(gen: Codegen, shape=(1, 64, 16, 16), out_channels: int | None = None, *, out_layout="4W4C",
                   bias: bool = True, relu: bool = False, fallback: bool = False, seed: int = 0) -> Dispatch:
    """``add_q8ta_conv2d_pw_node`` + ``prepack_quantized_conv2d_pw_weight`` (Q8taConv2dPW.cpp): input 4W4C,
    output 4W4C, 4C1W or 4C, int8 weights per output channel (symmetric) in a 2-D int texture, weight sums,
    scales and bias as vec4/ivec4 buffers per block of 4 output channels."""
    n, cin, h, w = nchw_sizes(shape)
    cout = int(out_channels or cin)
    if n != 1:
        raise ValueError(f"ET-VK's q8ta_conv2d_pw computes one image: its global z is H and its indexing has no "
                         f"batch term (Q8taConv2dPW.cpp); got batch {n}")
    variant = "q8ta_conv2d_pw_fallback_float" if fallback else "q8ta_conv2d_pw_float"
    expanded = gen.expand(variant)
    tile_n4, tile_m4 = int(expanded.define("TILE_N4") or 1), int(expanded.define("TILE_M4") or 1)
    inp_lay, out_lay = int8_layout("4W4C"), int8_layout(out_layout)
    if out_lay.name not in CONV_LAYOUTS:   # q8ta_conv2d_check_packed_dim_info on the output (4W4C input only)
        raise ValueError(f"q8ta_conv2d_pw writes one of {list(CONV_LAYOUTS)}, got {out_layout!r}")
    g = torch.Generator().manual_seed(seed)
    q_in = torch.randint(-128, 128, (1, cin, h, w), dtype=torch.int8, generator=g)
    weight = torch.randint(-127, 128, (cout, cin), dtype=torch.int8, generator=g)
    w_scales = (torch.rand(cout, generator=g) * 0.02 + 0.005).to(torch.float32)
    b = (torch.randn(cout, generator=g) * 2.0).to(torch.float32) if bias else torch.zeros(cout)
    in_scale, in_zp = 0.05, 3
    acc_scale = in_scale * w_scales.to(torch.float64)
    out_scale = float((acc_scale.max() * 128 * math.sqrt(cin)).item()) / 6.0  # outputs use most of int8
    out_zp = -5
    # the reference: dequantize, conv in float64, quantize (torch's rounding)
    x = (q_in.to(torch.float64) - in_zp) * in_scale
    wf = weight.to(torch.float64) * w_scales.to(torch.float64)[:, None]
    y = F.conv2d(x, wf[:, :, None, None], b.to(torch.float64) if bias else None)
    if relu:
        y = torch.relu(y)
    expected = torch.clamp(torch.round(y / out_scale) + out_zp, -128, 127).to(torch.int8)

    oc4, ic4 = math.ceil(cout / 4), math.ceil(cin / 4)
    # the workbench's conv prepack holds the same blocks (word (k4, oc4, j) = output channel 4·oc4 + j, input
    # channels 4·k4 .. +3), padded further: ET-VK's texture is exactly its first IC4 × OC4 texels
    packed = conv_pw.prepack_weights(weight.numpy(), w_scales.numpy(), b.numpy() if bias else None)
    texels = np.ascontiguousarray(packed.weight[:ic4, :oc4])
    sums, scales, bias_v = (np.ascontiguousarray(a[:4 * oc4]) for a in (packed.weight_sums, packed.scales, packed.bias))
    out_sizes = (1, cout, h, w)
    push = struct.pack("<fifiii", in_scale, in_zp, np.float32(1.0) / np.float32(out_scale), out_zp, ic4, oc4)
    global_size = (math.ceil(oc4 / tile_n4), math.ceil(math.ceil(w / 4) / tile_m4), h)
    resources = [
        Resource("buffer", nbytes=4 * out_lay.num_words(out_sizes), name="t_packed_int8_output"),
        Resource("buffer", packed_words(inp_lay, q_in), name="t_packed_int8_input"),
        Resource("image", texels.astype(np.int32), extent=(oc4, ic4), fmt="rgba32i", name="t_packed_int8_weight"),
        Resource("buffer", sums, name="t_weight_sums"),
        Resource("buffer", scales, name="t_weight_scales"),
        Resource("buffer", bias_v, name="t_bias"),
        Resource("ubo", out_lay.buffer_metadata(out_sizes), name="outp"),
        Resource("ubo", inp_lay.buffer_metadata((1, cin, h, w)), name="inp"),
    ]
    spec = {3: int(bias), 4: int(relu), 5: out_lay.spec_constant(), 6: inp_lay.spec_constant()}
    nbytes = q_in.numel() + cout * h * w + texels.nbytes + 3 * oc4 * 16
    return Dispatch("q8ta_conv2d_pw", variant, resources, push, spec, global_size, pick_hw_square_wg_size(global_size),
                    0, int8_decoder(out_lay, out_sizes), expected, atol=1, max_mismatch=0.01, bytes_moved=nbytes,
                    macs=cout * cin * h * w,
                    params={"shape": f"1x{cin}x{h}x{w}->{cout}", "out_layout": out_lay.name, "tile_n4": tile_n4,
                            "tile_m4": tile_m4, "bias": bias, "relu": relu})
