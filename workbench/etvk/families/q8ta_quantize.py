"""ET-VK's `q8ta_quantize` and `q8ta_dequantize`: dispatched as its C++ does (one `make` per op)."""
from __future__ import annotations

import struct

import numpy as np
import torch

from ..codegen import Codegen
from ..dispatch import (Dispatch, Resource, dequantize, extents_blocks, float_layout, int8_decoder, int8_layout,
                        io_block_configs, linear_blocks, nchw_sizes, packed_words, quantize, random_int8, square_local)


def q8ta_quantize(gen: Codegen, shape=(2, 10, 7, 9), *, storage: str = "buffer", in_layout: str = "WIDTH_PACKED",
                  out_layout: str = "4W4C", seed: int = 0) -> Dispatch:
    """``add_q8ta_quantize_node`` (Q8taQuantizeDequantize.cpp): float buffer or texture → int8x4 buffer, one thread
    per 4×4 block (block configs from the two packed dims)."""
    sizes = nchw_sizes(shape)
    flt, q8 = float_layout(in_layout, "texture" if storage == "texture3d" else "buffer"), int8_layout(out_layout)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(sizes, generator=g) * 3
    scale, zp = 0.03, -4
    expected = quantize(x, scale, zp)
    in_cfg, out_cfg = io_block_configs(q8, flt)
    if storage == "buffer":
        src = Resource("buffer", np.asarray(flt.to_buffer(x.numpy())), name="t_inp")
        meta = flt.buffer_metadata(sizes)
        global_size = linear_blocks(sizes, in_cfg)
    else:
        src = Resource("image", np.asarray(flt.to_texels(x.numpy())), extent=flt.extents(sizes), fmt="rgba32f",
                       name="t_inp")
        meta = flt.texture_metadata(sizes)
        global_size = extents_blocks(sizes, in_cfg)
    resources = [Resource("buffer", nbytes=4 * q8.num_words(sizes), name="t_outp"), src,
                 Resource("ubo", q8.buffer_metadata(sizes), name="outp"), Resource("ubo", meta, name="inp")]
    push = struct.pack("<fi", float(np.float32(1.0) / np.float32(scale)), zp)
    spec = {3: flt.spec_constant(), 4: q8.spec_constant(), 5: in_cfg, 6: out_cfg}
    return Dispatch("q8ta_quantize", f"q8ta_quantize_{storage}_float", resources, push, spec, global_size,
                    square_local(global_size, in_cfg), 0, int8_decoder(q8, sizes), expected, atol=1,
                    max_mismatch=0.01, bytes_moved=x.numel() * 5,
                    params={"shape": "x".join(map(str, sizes)), "in_layout": flt.name, "out_layout": q8.name,
                            "storage": storage})


def q8ta_dequantize(gen: Codegen, shape=(2, 10, 7, 9), *, storage: str = "buffer", in_layout: str = "4W4C",
                    out_layout: str = "WIDTH_PACKED", seed: int = 0) -> Dispatch:
    """``add_q8ta_dequantize_node``: int8x4 buffer → float buffer or texture."""
    sizes = nchw_sizes(shape)
    q8, flt = int8_layout(in_layout), float_layout(out_layout, "texture" if storage == "texture3d" else "buffer")
    q = random_int8(sizes, seed)
    scale, zp = 0.03, -4
    expected = dequantize(q, scale, zp)
    in_cfg, out_cfg = io_block_configs(flt, q8)  # C++: output block config from (output, input) packed dims
    if storage == "buffer":
        dst = Resource("buffer", nbytes=4 * flt.padded_numel(sizes), name="t_outp")
        meta = flt.buffer_metadata(sizes)
        global_size = linear_blocks(sizes, in_cfg)
        decode = lambda raw: torch.from_numpy(np.asarray(flt.from_buffer(raw.view(np.float32), sizes)))
    else:
        dst = Resource("image", extent=flt.extents(sizes), fmt="rgba32f", name="t_outp")
        meta = flt.texture_metadata(sizes)
        global_size = extents_blocks(sizes, in_cfg)
        decode = lambda tex: torch.from_numpy(np.asarray(flt.from_texels(tex, sizes)))
    resources = [dst, Resource("buffer", packed_words(q8, q), name="t_inp"), Resource("ubo", meta, name="outp"),
                 Resource("ubo", q8.buffer_metadata(sizes), name="inp")]
    spec = {3: flt.spec_constant(), 4: q8.spec_constant(), 5: out_cfg, 6: in_cfg}
    return Dispatch("q8ta_dequantize", f"q8ta_dequantize_{storage}_float", resources, struct.pack("<fi", scale, zp),
                    spec, global_size, square_local(global_size, in_cfg), 0, decode, expected, atol=1e-6,
                    bytes_moved=q.numel() * 5,
                    params={"shape": "x".join(map(str, sizes)), "in_layout": q8.name, "out_layout": flt.name,
                            "storage": storage})
