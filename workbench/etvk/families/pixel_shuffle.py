"""ET-VK's `pixel_shuffle`: dispatched as its C++ does (one `make` per op)."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..codegen import Codegen
from ..dispatch import Dispatch, Resource, create_local_wg_size, float_layout, nchw_sizes


def pixel_shuffle(gen: Codegen, shape=(1, 16, 5, 7), *, storage: str = "buffer", layout: str = "CHANNELS_PACKED",
                  dtype: str = "float", r: int = 2, seed: int = 0) -> Dispatch:
    """``add_pixel_shuffle_node`` (PixelShuffle.cpp): float buffers (one thread per output element) or 3-D textures
    (one per output texel, read through a sampler3D); spec constants out layout, in layout, r."""
    n, c, h, w = nchw_sizes(shape)
    if storage not in ("buffer", "texture3d"):
        raise ValueError(f"storage must be 'buffer' or 'texture3d', got {storage!r}")
    if dtype not in ("float", "half"):
        raise ValueError(f"dtype must be 'float' or 'half', got {dtype!r}")
    if r < 1 or c % (r * r):
        raise ValueError(f"need r ≥ 1 and channels a multiple of r² (r={r}, channels={c})")
    lay = float_layout(layout, "texture" if storage == "texture3d" else "buffer")
    g = torch.Generator().manual_seed(seed)
    torch_dtype = torch.float16 if dtype == "half" else torch.float32
    x = torch.randn((n, c, h, w), generator=g).to(torch_dtype)
    expected = F.pixel_shuffle(x, r)
    out_sizes = tuple(expected.shape)
    variant = f"pixel_shuffle_{storage}_{dtype}"
    spec = {3: lay.spec_constant(), 4: lay.spec_constant(), 5: r}
    if storage == "buffer":
        data = np.asarray(lay.to_buffer(x.numpy()))
        resources = [Resource("buffer", nbytes=data.nbytes, name="t_outp"), Resource("buffer", data, name="t_inp"),
                     Resource("ubo", lay.buffer_metadata(out_sizes), name="outp"),
                     Resource("ubo", lay.buffer_metadata((n, c, h, w)), name="inp")]
        global_size = (math.prod(out_sizes), 1, 1)
        decode = lambda raw: torch.from_numpy(np.asarray(lay.from_buffer(raw.view(x.numpy().dtype), out_sizes)))
    else:
        fmt = "rgba16f" if dtype == "half" else "rgba32f"
        texels = np.asarray(lay.to_texels(x.numpy()))
        resources = [Resource("image", extent=lay.extents(out_sizes), fmt=fmt, name="t_out"),
                     Resource("image", texels, extent=lay.extents((n, c, h, w)), fmt=fmt, name="t_in"),
                     Resource("ubo", lay.texture_metadata(out_sizes), name="outp"),
                     Resource("ubo", lay.texture_metadata((n, c, h, w)), name="inp")]
        global_size = tuple(lay.logical_limits(out_sizes))
        decode = lambda tex: torch.from_numpy(np.asarray(lay.from_texels(tex, out_sizes)))
    return Dispatch("pixel_shuffle", variant, resources, b"", spec, global_size, create_local_wg_size(global_size), 0,
                    decode, expected, bytes_moved=2 * x.numel() * x.element_size(),
                    params={"shape": "x".join(map(str, (n, c, h, w))), "layout": lay.name, "storage": storage,
                            "dtype": dtype, "r": r})
