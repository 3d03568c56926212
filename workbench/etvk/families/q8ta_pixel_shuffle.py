"""ET-VK's `q8ta_pixel_shuffle`: dispatched as its C++ does (one `make` per op)."""
from __future__ import annotations

import math
import struct

import numpy as np
import torch.nn.functional as F

from ..codegen import Codegen
from ..dispatch import (Dispatch, Resource, dequantize, int8_decoder, int8_layout, nchw_sizes, packed_words, quantize,
                        random_int8)


def q8ta_pixel_shuffle(gen: Codegen, shape=(1, 16, 8, 8), *, in_layout="4W4C", out_layout="4W4C", r: int = 2,
                       requantize: bool = False, seed: int = 0) -> Dispatch:
    """``add_q8ta_pixel_shuffle_node`` (Q8taPixelShuffle.cpp): channels-packed int8 in and out, r = 2, one thread per
    output word, local size 64."""
    n, c, h, w = nchw_sizes(shape)
    if r != 2:
        raise ValueError(f"ET-VK's q8ta_pixel_shuffle supports upscale factor 2 only, got {r}")
    if c % (r * r):
        raise ValueError(f"channels must be a multiple of r² = {r * r}, got {c}")
    inp, out = int8_layout(in_layout), int8_layout(out_layout)
    for lay in (inp, out):
        if lay.packed_dim != 2 or lay.packed_dim_block_size != 4:
            raise ValueError(f"q8ta_pixel_shuffle needs channels-packed int8 layouts (4W4C, 4C1W, 4C), got {lay.name}")
    out_sizes = (n, c // 4, h * 2, w * 2)
    q = random_int8((n, c, h, w), seed)
    in_scale, in_zp = 0.05, 2
    out_scale, out_zp = (0.07, -3) if requantize else (in_scale, in_zp)
    expected = quantize(F.pixel_shuffle(dequantize(q, in_scale, in_zp), r), out_scale, out_zp) if requantize \
        else F.pixel_shuffle(q, r)
    inv = float(np.float32(1.0) / np.float32(out_scale))
    passthrough = int(abs(in_scale - 1.0 / inv) <= 1e-7 * max(abs(in_scale), 1e-7) and in_zp == out_zp)
    push = struct.pack("<ffiiii", in_scale, inv, in_zp, out_zp, r, passthrough)
    resources = [Resource("buffer", nbytes=4 * out.num_words(out_sizes), name="t_outp"),
                 Resource("buffer", packed_words(inp, q), name="t_inp"),
                 Resource("ubo", out.buffer_metadata(out_sizes), name="outp"),
                 Resource("ubo", inp.buffer_metadata((n, c, h, w)), name="inp")]
    words = n * math.ceil(out_sizes[1] / 4) * out_sizes[2] * out_sizes[3]
    return Dispatch("q8ta_pixel_shuffle", "q8ta_pixel_shuffle", resources, push,
                    {3: inp.spec_constant(), 4: out.spec_constant()}, (words, 1, 1), (64, 1, 1), 0,
                    int8_decoder(out, out_sizes), expected, atol=1 if requantize else 0,
                    max_mismatch=0.01 if requantize else 0.0, bytes_moved=4 * inp.num_words((n, c, h, w)) + 4 * words,
                    params={"shape": "x".join(map(str, (n, c, h, w))), "in_layout": inp.name,
                            "out_layout": out.name, "r": r, "path": "requant" if requantize else "passthrough"})
