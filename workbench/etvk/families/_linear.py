"""What ET-VK's int8-input linear families share (``q8ta_linear``, ``q8ta_linear_gemv``, ``linear_q8ta_q8csw_tiled``,
and the im2col path of ``conv2d_q8ta_q8csw_q8to``, whose GEMM reads the same prepacked weight): the input and argument
checks, random operands, ``pack_q8_linear_weight``'s layout in numpy, and the bindings after the output.

The shaders read TILE_N4 = 2 blocks of 4 output channels per thread (8 columns per tile) without a bound check, so the
weight sums, scales and bias are padded with zeros to a whole number of tiles; what lies past N is never written.
"""
from __future__ import annotations

import math
import struct

import numpy as np
import torch

from ..dispatch import Resource, padded, packed_words

N_PER_TILE = 8  # TILE_N4 = 2: the C++'s global size assumes it ("Each output tile contains 8 columns")
M_PER_TILE = 4  # TILE_M4 = 1


def prepack_weight(weight: np.ndarray) -> np.ndarray:
    """``pack_q8_linear_weight``'s layout for an int8 ``[N, K]`` weight (K a multiple of 4): int32 texels
    ``[K4, N4, 4]`` (texture row k4, column n4), component j = the word of weight row ``4·n4 + j`` holding columns
    ``4·k4 .. +3`` (little-endian bytes, as the staging buffer's int view reads them), zero for rows past N."""
    weight = np.ascontiguousarray(np.asarray(weight, dtype=np.int8))
    n, k = weight.shape
    if k % 4:
        raise ValueError(f"the weight's K must be a multiple of 4, got {k}")
    n4, k4 = math.ceil(n / 4), k // 4
    words = np.zeros((4 * n4, k4), dtype=np.int32)
    words[:n] = weight.view(np.int32).reshape(n, k4)
    return np.ascontiguousarray(words.reshape(n4, 4, k4).transpose(2, 0, 1))


def whcn_ivec4(sizes) -> bytes:
    """``sizes_ubo``: the tensor's sizes as a WHCN ``ivec4`` (1 for the dims it lacks)."""
    whcn = list(reversed([int(s) for s in sizes]))[:4]
    return struct.pack("<4i", *(whcn + [1] * (4 - len(whcn))))


def linear_input(op: str, shape, k_check_at: str):
    """(sizes, K, M, leading dims, batch) of a linear's input [..., M, K] (1 to 4 dims; one dim is [1, K]), K a
    multiple of 4 as ET-VK's C++ checks it (`k_check_at`: where)."""
    sizes = tuple(int(s) for s in (shape if hasattr(shape, "__len__") else (shape,)))
    if not 1 <= len(sizes) <= 4 or min(sizes) < 1:
        raise ValueError(f"{op}: the input is [..., M, K] with every size >= 1 (at most 4 dims), got {sizes}")
    if len(sizes) == 1:
        sizes = (1,) + sizes
    k, m, lead = sizes[-1], sizes[-2], sizes[:-2]
    if k % 4:
        raise ValueError(f"{op}: ET-VK needs K, the input's last dim, a multiple of 4 (VK_CHECK_COND(K % 4 == 0) in "
                         f"{k_check_at}); got K={k}")
    return sizes, k, m, lead, math.prod(lead)


def refuse_batch(op: str, lead, batch: int, etvk_batch: bool, why: str) -> None:
    """ET-VK's linear shaders cover the output's last two dims only (`why`: what in the shader shows it)."""
    if batch > 1 and not etvk_batch:
        raise ValueError(f"{op}: ET-VK's shader covers the output's last two dims only ({why}); expected leading "
                         f"dims of 1, given {lead} — fold them into M, or pass etvk_batch=True to see what ET-VK "
                         f"computes")


def linear_operands(op: str, sizes, out_features, weight, weight_scales, bias, seed: int):
    """(int8 input of `sizes`, weight [N, K] int8, N, per-channel scales [N] fp32, bias [N] fp32 or None) from a
    linear family's arguments: each random (from `seed`; the weight's first, then the input) where not given, else
    checked against the input's K and each other."""
    g = torch.Generator().manual_seed(seed)
    k = int(sizes[-1])
    if weight is None:
        if out_features is None:
            raise ValueError(f"{op}: give out_features or a weight")
        n = int(out_features)
        if n < 1:
            raise ValueError(f"{op}: out_features must be >= 1, got {n}")
        weight = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g)
    else:
        weight = torch.as_tensor(weight)
        if weight.dtype != torch.int8 or weight.dim() != 2:
            raise ValueError(f"{op}: the weight is an int8 [N, K] tensor, given {weight.dtype} {tuple(weight.shape)}")
        if weight.shape[1] != k:
            raise ValueError(f"{op}: the weight's K does not match the input's: expected a weight [N, {k}] "
                             f"(input {tuple(sizes)}), given [{weight.shape[0]}, {weight.shape[1]}]")
        if out_features is not None and int(out_features) != weight.shape[0]:
            raise ValueError(f"{op}: out_features {out_features} but the weight has {weight.shape[0]} rows")
        n = int(weight.shape[0])
        if n < 1:
            raise ValueError(f"{op}: out_features must be >= 1, got {n}")
    if weight_scales is None:
        weight_scales = (torch.rand(n, generator=g) * 0.02 + 0.005).to(torch.float32)
    weight_scales = torch.as_tensor(weight_scales, dtype=torch.float32).reshape(-1)
    if weight_scales.numel() != n:
        raise ValueError(f"{op}: one weight scale per output channel: expected {n}, given {weight_scales.numel()}")
    if bias is True:
        bias = (torch.randn(n, generator=g) * 2.0).to(torch.float32)
    elif bias is False or bias is None:
        bias = None
    else:
        bias = torch.as_tensor(bias, dtype=torch.float32).reshape(-1)
        if bias.numel() != n:
            raise ValueError(f"{op}: one bias per output channel: expected {n}, given {bias.numel()}")
    q_in = torch.randint(-128, 128, sizes, dtype=torch.int8, generator=g)
    return q_in, weight, n, weight_scales, bias


def int8_linear_bindings(lay, q_in: torch.Tensor, texels: np.ndarray, weight: torch.Tensor, weight_scales, bias,
                         out_sizes) -> list:
    """The bindings after the output, in declaration order: the int8 input packed in `lay`, the prepacked weight
    (an ``rgba32i`` texture of N4 × K4 texels, ET-VK's extent), weight sums, scales and bias (zero-padded to whole
    tiles), then the WHCN sizes of output and input."""
    sizes = tuple(q_in.shape)
    k4, n4 = texels.shape[:2]
    n_pad = N_PER_TILE * math.ceil(weight.shape[0] / N_PER_TILE)
    nchw_in = (1,) * (4 - len(sizes)) + sizes
    return [Resource("buffer", packed_words(lay, q_in.reshape(nchw_in)), name="t_packed_int8_input"),
            Resource("image", texels, extent=(n4, k4), fmt="rgba32i", name="t_packed_int8_weight"),
            Resource("buffer", padded(weight.to(torch.int32).sum(1), n_pad, np.int32), name="t_weight_sums"),
            Resource("buffer", padded(weight_scales, n_pad, np.float32), name="t_weight_scales"),
            Resource("buffer", padded(bias, n_pad, np.float32), name="t_bias"),
            Resource("ubo", whcn_ivec4(out_sizes), name="output_sizes"),
            Resource("ubo", whcn_ivec4(sizes), name="input_sizes")]
