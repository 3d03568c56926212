"""What ET-VK's op families share when the workbench dispatches them as ET-VK's C++ does: the `Dispatch` a family
makes (host data in binding order, constants, sizes, the torch reference of its output), ET-VK's work-group
pickers (Common.cpp, ComputeGraph.cpp), block configs, and small helpers for int8 data and references.

The families themselves (one module each, written from ET-VK's C++ in ``runtime/graph/ops/impl``) are in
``workbench.etvk.families``; ``workbench.etvk.run`` turns a Dispatch into Vulkan objects, runs and checks it.
Layout facts (packing, BufferMetadata / TextureMetadata bytes, hashed layouts) come from ``workbench.layouts``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import layouts as L
from ..kernels.workgroups import create_local_wg_size, pick_hw_square_wg_size

__all__ = ["Resource", "Step", "Dispatch", "create_local_wg_size", "pick_hw_square_wg_size", "block_config",
           "io_block_configs", "linear_blocks", "extents_blocks", "square_local", "int8_layout", "float_layout",
           "nchw_sizes", "random_int8", "quantize", "dequantize", "packed_words", "int8_decoder", "padded",
           "packed_weight_output"]

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
class Step:
    """A dispatch ET-VK records before an op's last one (e.g. ``q8ta_im2col`` before the GEMM): its variant, the
    indices into the Dispatch's resources it binds (in binding order), its constants and sizes."""

    variant: str
    bindings: tuple
    push_constants: bytes
    spec_constants: dict
    global_size: tuple
    local_size: tuple


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
    requires: object = None  # device -> None, or raises vk.MissingFeatureError naming what the device lacks
    before: list = field(default_factory=list)  # Steps recorded first, in order, a barrier after each
    bindings: tuple | None = None  # indices of the resources the last dispatch binds; None: all, in order


# --------------------------------------------------------------------------------------------------
# ET-VK's work-group pickers (Common.cpp, ComputeGraph.cpp): the two the workbench's own kernels use too live in
# workbench.kernels.workgroups (below etvk in the package order); the block-config ones are here

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

def int8_layout(name: str) -> L.Layout:
    lay = L.get_layout(name)
    if not lay.is_int8:
        raise ValueError(f"expected an int8x4 layout (4W4C, 4C1W, 4C, 4W, 4H4W), got {name!r}")
    return lay


def float_layout(name: str, storage: str) -> L.Layout:
    lay = L.get_layout(name, storage)
    if lay.is_int8:
        raise ValueError(f"expected a float layout (WIDTH_PACKED, HEIGHT_PACKED, CHANNELS_PACKED), got {name!r}")
    return lay


def nchw_sizes(shape) -> tuple:
    return L.normalize_sizes(shape)  # 4 positive ints, NCHW, or a ValueError saying what it got


def random_int8(sizes, seed) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-128, 128, sizes, dtype=torch.int8, generator=g)


def quantize(x: torch.Tensor, scale: float, zp: int) -> torch.Tensor:
    """torch's per-tensor int8 quantize (round half to even), the reference ET-VK's tests use."""
    return torch.clamp(torch.round(x / scale) + zp, -128, 127).to(torch.int8)


def dequantize(q: torch.Tensor, scale: float, zp: int) -> torch.Tensor:
    return (q.to(torch.float32) - zp) * scale


def packed_words(lay: L.Layout, q: torch.Tensor) -> np.ndarray:
    return np.asarray(lay.pack(q.numpy()), dtype=np.int32)


def int8_decoder(lay: L.Layout, sizes):
    return lambda words: torch.from_numpy(np.asarray(lay.unpack(words.view(np.int32), sizes)))


def padded(values, length: int, dtype) -> np.ndarray:
    """`values` (a tensor, an array, or None for none) flattened into `length` entries of `dtype`, zeros after:
    the per-output-channel buffers the shaders read in whole blocks, past the last channel, without a bound check."""
    out = np.zeros(length, dtype=dtype)
    if values is not None:
        v = np.asarray(values.numpy() if isinstance(values, torch.Tensor) else values).astype(dtype).reshape(-1)
        out[: v.size] = v
    return out


def packed_weight_output(ny: int, nx: int, storage: str, name: str = "t_packed_int8_weight"):
    """(the output resource, its decoder) of a weight prepack shader: an ``rgba32i`` texture of nx × ny texels, or
    the same texels row by row in a buffer (ET-VK's choice past the device's texture limits)."""
    if storage == "texture2d":
        return (Resource("image", extent=(nx, ny), fmt="rgba32i", name=name),
                lambda tex: torch.from_numpy(np.asarray(tex, dtype=np.int32).reshape(ny, nx, 4)))
    return (Resource("buffer", nbytes=ny * nx * 16, name=name),
            lambda raw: torch.from_numpy(raw.view(np.int32).reshape(ny, nx, 4).copy()))
