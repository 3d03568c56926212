"""ET-VK's dispatch conventions for its int8 kernels, written here from ET-VK's C++ (``runtime/graph/ops/impl``;
digest in ``shared/reference/etvk.md``): which resources bind in which order, the metadata UBOs, push constants,
specialization constants (ids 0–2 are the local size; the templates' ``C`` counter starts at 3), weight prepacking,
and the global / local sizes ET-VK's pickers choose.

A kernel here is one function ``make(gen, ...) -> Dispatch``: host data in binding order, constants, sizes, and the
torch reference of its output. ``workbench.etvk.run`` turns a Dispatch into Vulkan objects, runs and checks it.
Layout facts (packing, BufferMetadata / TextureMetadata bytes, hashed layouts) come from ``workbench.layouts``.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from .. import layouts as L
from ..kernels import conv_pw
from .codegen import Codegen

@dataclass
class Resource:
    """One binding's host side: a storage buffer (data or zeros), a UBO, or an image (2-D / 3-D)."""

    kind: str  # "buffer" | "ubo" | "image"
    data: np.ndarray | bytes | None = None
    nbytes: int = 0
    extent: tuple = ()
    fmt: str = ""
    name: str = ""


@dataclass
class Dispatch:
    kernel: str  # ET-VK's op family, e.g. "q8ta_conv2d_pw"
    variant: str  # the generated shader's name
    resources: list
    push_constants: bytes
    spec_constants: dict
    global_size: tuple
    local_size: tuple
    output: int  # index of the resource holding the output
    decode: object  # host array of the output resource → torch tensor (NCHW)
    expected: torch.Tensor
    atol: float = 0.0  # largest |difference| allowed per element
    max_mismatch: float = 0.0  # fraction of elements allowed to differ at all (1-LSB requantize ties)
    bytes_moved: int = 0
    macs: int = 0
    params: dict = field(default_factory=dict)  # columns for the result row


# --------------------------------------------------------------------------------------------------
# ET-VK's work-group pickers (Common.cpp, ComputeGraph.cpp)

def create_local_wg_size(global_size) -> tuple:
    """``ComputeGraph::create_local_wg_size``, literally: the same three compare-and-swaps (ties keep axis order),
    the local size from the 2nd and 3rd largest extents, and the same final indexing — which is
    ``local[order[i]]``, not "the largest axis gets local[0]" (they differ when the sort is a 3-cycle)."""
    desc = [(axis, int(v)) for axis, v in enumerate(global_size)]
    if desc[0][1] < desc[1][1]:
        desc[0], desc[1] = desc[1], desc[0]
    if desc[1][1] < desc[2][1]:
        desc[1], desc[2] = desc[2], desc[1]
    if desc[0][1] < desc[1][1]:
        desc[0], desc[1] = desc[1], desc[0]
    local = [8, max(1, min(4, desc[1][1])), max(1, min(2, desc[2][1]))]
    if desc[2][1] == 1:
        if desc[1][1] == 1:
            local[0], local[1] = 64, 1
        elif desc[1][1] % 4 == 0:
            local[0], local[1] = 16, 4
        else:
            local[0], local[1] = 32, 2
    return tuple(local[desc[i][0]] for i in range(3))


def pick_hw_square_wg_size(global_size) -> tuple:
    if global_size[0] >= 6 and global_size[1] >= 6:
        return (8, 8, 1)
    return (4, 16, 1) if global_size[0] < 6 else (16, 4, 1)


def block_config(inner: int, outer: int) -> int:
    """``BlockConfig{inner, 4, outer, 4}.as_packed_int()`` (not transposed)."""
    others = [d for d in range(4) if d not in (inner, outer)]
    order = [inner, outer, others[0], others[1]]
    packed = order[0] | order[1] << 4 | order[2] << 8 | order[3] << 12
    return packed | inner << 16 | outer << 20 | 4 << 24 | 4 << 28


def io_block_configs(out: L.Layout, inp: L.Layout) -> tuple[int, int]:
    """(input, output) block configs: ``create_block_config_from_io_packed_dims`` for the output and
    ``create_block_config_from_other`` for the input."""
    inner, outer = out.packed_dim, inp.packed_dim
    if outer == inner:
        outer = 1 if inner == 0 else 0
    out_cfg = (inner, outer)
    in_cfg = out_cfg if inp.packed_dim == inner else (outer, inner)
    return block_config(*in_cfg), block_config(*out_cfg)


def linear_blocks(sizes, config: int) -> tuple:
    """``pick_linear_global_wg_with_block_config``: one thread per 4×4 block of the output."""
    inner, outer = (config >> 16) & 0xF, (config >> 20) & 0xF
    whcn = tuple(reversed(L.normalize_sizes(sizes)))
    planes = math.prod(whcn[d] for d in range(4) if d not in (inner, outer))
    return (math.ceil(whcn[inner] / 4) * math.ceil(whcn[outer] / 4) * planes, 1, 1)


def extents_blocks(sizes, config: int) -> tuple:
    """``pick_extents_global_wg_with_block_config``."""
    inner, outer = (config >> 16) & 0xF, (config >> 20) & 0xF
    n, c, h, w = L.normalize_sizes(sizes)
    blocked = {inner, outer}
    x = math.ceil(w / 4) if 0 in blocked else w
    y = math.ceil(h / 4) if 1 in blocked else h
    z = (math.ceil(c / 4) if 2 in blocked else c) * n
    return (x, y, z)


def square_local(global_size, config: int) -> tuple:
    """``pick_square_local_wg_with_block_config``."""
    if global_size[1] == 1 and global_size[2] == 1:
        return (64, 1, 1)
    dims = {(config >> 16) & 0xF, (config >> 20) & 0xF}
    return tuple(8 if d in dims else 1 for d in range(3))


# --------------------------------------------------------------------------------------------------
# Helpers

def _int8_layout(name: str) -> L.Layout:
    lay = L.get_layout(name)
    if not lay.is_int8:
        raise ValueError(f"expected an int8x4 layout (4W4C, 4C1W, 4C, 4W, 4H4W), got {name!r}")
    return lay


def _float_layout(name: str, storage: str) -> L.Layout:
    lay = L.get_layout(name, storage)
    if lay.is_int8:
        raise ValueError(f"expected a float layout (WIDTH_PACKED, HEIGHT_PACKED, CHANNELS_PACKED), got {name!r}")
    return lay


def _sizes(shape) -> tuple:
    return L.normalize_sizes(shape)  # 4 positive ints, NCHW, or a ValueError saying what it got


def _random_int8(sizes, seed) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-128, 128, sizes, dtype=torch.int8, generator=g)


def _quantize(x: torch.Tensor, scale: float, zp: int) -> torch.Tensor:
    """torch's per-tensor int8 quantize (round half to even), the reference ET-VK's tests use."""
    return torch.clamp(torch.round(x / scale) + zp, -128, 127).to(torch.int8)


def _dequantize(q: torch.Tensor, scale: float, zp: int) -> torch.Tensor:
    return (q.to(torch.float32) - zp) * scale


def _words(lay: L.Layout, q: torch.Tensor) -> np.ndarray:
    return np.asarray(lay.pack(q.numpy()), dtype=np.int32)


def _int8_decoder(lay: L.Layout, sizes):
    return lambda words: torch.from_numpy(np.asarray(lay.unpack(words.view(np.int32), sizes)))


# --------------------------------------------------------------------------------------------------
# The kernels

def q8ta_conv2d_pw(gen: Codegen, shape=(1, 64, 16, 16), out_channels: int | None = None, *, out_layout="4W4C",
                   bias: bool = True, relu: bool = False, fallback: bool = False, seed: int = 0) -> Dispatch:
    """``add_q8ta_conv2d_pw_node`` + ``prepack_quantized_conv2d_pw_weight`` (Q8taConv2dPW.cpp): input 4W4C,
    output 4W4C or 4C1W, int8 weights per output channel (symmetric) in a 2-D int texture, weight sums,
    scales and bias as vec4/ivec4 buffers per block of 4 output channels."""
    n, cin, h, w = _sizes(shape)
    cout = int(out_channels or cin)
    if n != 1:
        raise ValueError(f"ET-VK's q8ta_conv2d_pw computes one image: its global z is H and its indexing has no "
                         f"batch term (Q8taConv2dPW.cpp); got batch {n}")
    variant = "q8ta_conv2d_pw_fallback_float" if fallback else "q8ta_conv2d_pw_float"
    expanded = gen.expand(variant)
    tile_n4, tile_m4 = int(expanded.define("TILE_N4") or 1), int(expanded.define("TILE_M4") or 1)
    inp_lay, out_lay = _int8_layout("4W4C"), _int8_layout(out_layout)
    if out_lay.name not in ("4W4C", "4C1W"):
        raise ValueError(f"q8ta_conv2d_pw writes 4W4C or 4C1W, got {out_layout!r}")
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
        Resource("buffer", _words(inp_lay, q_in), name="t_packed_int8_input"),
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
                    0, _int8_decoder(out_lay, out_sizes), expected, atol=1, max_mismatch=0.01, bytes_moved=nbytes,
                    macs=cout * cin * h * w,
                    params={"shape": f"1x{cin}x{h}x{w}->{cout}", "out_layout": out_lay.name, "tile_n4": tile_n4,
                            "tile_m4": tile_m4, "bias": bias, "relu": relu})


def q8ta_pixel_shuffle(gen: Codegen, shape=(1, 16, 8, 8), *, in_layout="4W4C", out_layout="4W4C", r: int = 2,
                       requantize: bool = False, seed: int = 0) -> Dispatch:
    """``add_q8ta_pixel_shuffle_node`` (Q8taPixelShuffle.cpp): channels-packed int8 in and out, r = 2, one thread per
    output word, local size 64."""
    n, c, h, w = _sizes(shape)
    if r != 2:
        raise ValueError(f"ET-VK's q8ta_pixel_shuffle supports upscale factor 2 only, got {r}")
    if c % (r * r):
        raise ValueError(f"channels must be a multiple of r² = {r * r}, got {c}")
    inp, out = _int8_layout(in_layout), _int8_layout(out_layout)
    for lay in (inp, out):
        if lay.packed_dim != 2 or lay.packed_dim_block_size != 4:
            raise ValueError(f"q8ta_pixel_shuffle needs channels-packed int8 layouts (4W4C, 4C1W, 4C), got {lay.name}")
    out_sizes = (n, c // 4, h * 2, w * 2)
    q = _random_int8((n, c, h, w), seed)
    in_scale, in_zp = 0.05, 2
    out_scale, out_zp = (0.07, -3) if requantize else (in_scale, in_zp)
    expected = _quantize(F.pixel_shuffle(_dequantize(q, in_scale, in_zp), r), out_scale, out_zp) if requantize \
        else F.pixel_shuffle(q, r)
    inv = float(np.float32(1.0) / np.float32(out_scale))
    passthrough = int(abs(in_scale - 1.0 / inv) <= 1e-7 * max(abs(in_scale), 1e-7) and in_zp == out_zp)
    push = struct.pack("<ffiiii", in_scale, inv, in_zp, out_zp, r, passthrough)
    resources = [Resource("buffer", nbytes=4 * out.num_words(out_sizes), name="t_outp"),
                 Resource("buffer", _words(inp, q), name="t_inp"),
                 Resource("ubo", out.buffer_metadata(out_sizes), name="outp"),
                 Resource("ubo", inp.buffer_metadata((n, c, h, w)), name="inp")]
    words = n * math.ceil(out_sizes[1] / 4) * out_sizes[2] * out_sizes[3]
    return Dispatch("q8ta_pixel_shuffle", "q8ta_pixel_shuffle", resources, push,
                    {3: inp.spec_constant(), 4: out.spec_constant()}, (words, 1, 1), (64, 1, 1), 0,
                    _int8_decoder(out, out_sizes), expected, atol=1 if requantize else 0,
                    max_mismatch=0.01 if requantize else 0.0, bytes_moved=4 * inp.num_words((n, c, h, w)) + 4 * words,
                    params={"shape": "x".join(map(str, (n, c, h, w))), "in_layout": inp.name,
                            "out_layout": out.name, "r": r, "path": "requant" if requantize else "passthrough"})


def pixel_shuffle(gen: Codegen, shape=(1, 16, 5, 7), *, storage: str = "buffer", layout: str = "CHANNELS_PACKED",
                  dtype: str = "float", r: int = 2, seed: int = 0) -> Dispatch:
    """``add_pixel_shuffle_node`` (PixelShuffle.cpp): float buffers (one thread per output element) or 3-D textures
    (one per output texel, read through a sampler3D); spec constants out layout, in layout, r."""
    n, c, h, w = _sizes(shape)
    if storage not in ("buffer", "texture3d"):
        raise ValueError(f"storage must be 'buffer' or 'texture3d', got {storage!r}")
    if dtype not in ("float", "half"):
        raise ValueError(f"dtype must be 'float' or 'half', got {dtype!r}")
    if r < 1 or c % (r * r):
        raise ValueError(f"need r ≥ 1 and channels a multiple of r² (r={r}, channels={c})")
    lay = _float_layout(layout, "texture" if storage == "texture3d" else "buffer")
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


def q8ta_quantize(gen: Codegen, shape=(2, 10, 7, 9), *, storage: str = "buffer", in_layout: str = "WIDTH_PACKED",
                  out_layout: str = "4W4C", seed: int = 0) -> Dispatch:
    """``add_q8ta_quantize_node`` (Q8taQuantizeDequantize.cpp): float buffer or texture → int8x4 buffer, one thread
    per 4×4 block (block configs from the two packed dims)."""
    sizes = _sizes(shape)
    flt, q8 = _float_layout(in_layout, "texture" if storage == "texture3d" else "buffer"), _int8_layout(out_layout)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(sizes, generator=g) * 3
    scale, zp = 0.03, -4
    expected = _quantize(x, scale, zp)
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
                    square_local(global_size, in_cfg), 0, _int8_decoder(q8, sizes), expected, atol=1,
                    max_mismatch=0.01, bytes_moved=x.numel() * 5,
                    params={"shape": "x".join(map(str, sizes)), "in_layout": flt.name, "out_layout": q8.name,
                            "storage": storage})


def q8ta_dequantize(gen: Codegen, shape=(2, 10, 7, 9), *, storage: str = "buffer", in_layout: str = "4W4C",
                    out_layout: str = "WIDTH_PACKED", seed: int = 0) -> Dispatch:
    """``add_q8ta_dequantize_node``: int8x4 buffer → float buffer or texture."""
    sizes = _sizes(shape)
    q8, flt = _int8_layout(in_layout), _float_layout(out_layout, "texture" if storage == "texture3d" else "buffer")
    q = _random_int8(sizes, seed)
    scale, zp = 0.03, -4
    expected = _dequantize(q, scale, zp)
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
    resources = [dst, Resource("buffer", _words(q8, q), name="t_inp"), Resource("ubo", meta, name="outp"),
                 Resource("ubo", q8.buffer_metadata(sizes), name="inp")]
    spec = {3: flt.spec_constant(), 4: q8.spec_constant(), 5: out_cfg, 6: in_cfg}
    return Dispatch("q8ta_dequantize", f"q8ta_dequantize_{storage}_float", resources, struct.pack("<fi", scale, zp),
                    spec, global_size, square_local(global_size, in_cfg), 0, decode, expected, atol=1e-6,
                    bytes_moved=q.numel() * 5,
                    params={"shape": "x".join(map(str, sizes)), "in_layout": q8.name, "out_layout": flt.name,
                            "storage": storage})


def q8ta_clone(gen: Codegen, shape=(2, 10, 7, 9), *, in_layout: str = "4W4C", out_layout: str = "4C1W",
               seed: int = 0) -> Dispatch:
    """``add_q8ta_clone_node`` (Q8taClone.cpp): an int8x4 layout transition, one thread per 4×4 block."""
    sizes = _sizes(shape)
    inp, out = _int8_layout(in_layout), _int8_layout(out_layout)
    q = _random_int8(sizes, seed)
    in_cfg, out_cfg = io_block_configs(out, inp)
    global_size = linear_blocks(sizes, in_cfg)
    resources = [Resource("buffer", nbytes=4 * out.num_words(sizes), name="t_outp"),
                 Resource("buffer", _words(inp, q), name="t_inp"),
                 Resource("ubo", out.buffer_metadata(sizes), name="outp"),
                 Resource("ubo", inp.buffer_metadata(sizes), name="inp")]
    spec = {3: inp.spec_constant(), 4: out.spec_constant(), 5: in_cfg, 6: out_cfg}
    return Dispatch("q8ta_clone", "q8ta_clone", resources, b"", spec, global_size, square_local(global_size, in_cfg),
                    0, _int8_decoder(out, sizes), q.clone(),
                    bytes_moved=4 * (inp.num_words(sizes) + out.num_words(sizes)),
                    params={"shape": "x".join(map(str, sizes)), "in_layout": inp.name, "out_layout": out.name})


KERNELS = {
    "q8ta_conv2d_pw": q8ta_conv2d_pw,
    "q8ta_pixel_shuffle": q8ta_pixel_shuffle,
    "pixel_shuffle": pixel_shuffle,
    "q8ta_quantize": q8ta_quantize,
    "q8ta_dequantize": q8ta_dequantize,
    "q8ta_clone": q8ta_clone,
}
