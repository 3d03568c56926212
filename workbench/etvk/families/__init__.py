"""ET-VK's op families, one module each, each a `make(gen, **options) -> Dispatch` per op written from ET-VK's C++
at the revision the conventions were read from (``backends/vulkan/runtime/graph/ops/impl``). KERNELS maps an op
name to its make function; ``workbench.etvk.run`` runs them. A family declares the options it takes by its make
function's signature (``takes``), and its input's form by the default of its ``shape`` (``shape_form``)."""
from __future__ import annotations

import inspect

from .conv2d_q8ta_q8csw_q8to import conv2d_q8ta_q8csw_q8to, conv2d_q8ta_q8csw_q8to_linear_tiled
from .linear_dq8ca_q4gsw import linear_dq8ca_q4gsw, linear_dq8ca_q4gsw_tiled
from .linear_dq8ca_qw_coopmat import linear_dq8ca_qw_coopmat, pack_q4_linear_weight
from .linear_q4gsw_4x8 import (linear_q4gsw, pack_q4_linear_weight__w_4x8, q4gsw_linear_gemm__tin__w_4x8,
                               q4gsw_linear_gemm__w_4x8, q4gsw_linear_gemv_coop__w_4x8)
from .linear_q4gsw_qw import linear_q4gsw_coop, linear_q4gsw_tiled
from .linear_q8ta_q8csw import linear_q8ta_q8csw_tiled
from .pixel_shuffle import pixel_shuffle
from .q8ta_clone import q8ta_clone
from .q8ta_conv2d import pack_q8_conv2d_weights, q8ta_conv2d, q8ta_conv2d_im2col, q8ta_im2col
from .q8ta_conv2d_dw import pack_q8_conv2d_dw_weights, q8ta_conv2d_dw
from .q8ta_conv2d_pw import q8ta_conv2d_pw
from .q8ta_conv2d_transposed import q8ta_conv2d_transposed
from .q8ta_elementwise import q8ta_binary, q8ta_unary
from .q8ta_linear import pack_q8_linear_weight, q8ta_linear, q8ta_linear_gemv
from .q8ta_pixel_shuffle import q8ta_pixel_shuffle
from .q8ta_quantize import q8ta_dequantize, q8ta_quantize

KERNELS = {
    "q8ta_conv2d_pw": q8ta_conv2d_pw,
    "q8ta_pixel_shuffle": q8ta_pixel_shuffle,
    "pixel_shuffle": pixel_shuffle,
    "q8ta_quantize": q8ta_quantize,
    "q8ta_dequantize": q8ta_dequantize,
    "q8ta_clone": q8ta_clone,
    "q8ta_linear": q8ta_linear,
    "q8ta_linear_gemv": q8ta_linear_gemv,
    "pack_q8_linear_weight": pack_q8_linear_weight,
    "q8ta_binary": q8ta_binary,
    "q8ta_unary": q8ta_unary,
    "linear_q8ta_q8csw_tiled": linear_q8ta_q8csw_tiled,
    "conv2d_q8ta_q8csw_q8to_linear_tiled": conv2d_q8ta_q8csw_q8to_linear_tiled,
    "conv2d_q8ta_q8csw_q8to": conv2d_q8ta_q8csw_q8to,
    "linear_dq8ca_qw_coopmat": linear_dq8ca_qw_coopmat,
    "pack_q4_linear_weight": pack_q4_linear_weight,
    "linear_q4gsw": linear_q4gsw,
    "q4gsw_linear_gemm__w_4x8": q4gsw_linear_gemm__w_4x8,
    "q4gsw_linear_gemm__tin__w_4x8": q4gsw_linear_gemm__tin__w_4x8,
    "q4gsw_linear_gemv_coop__w_4x8": q4gsw_linear_gemv_coop__w_4x8,
    "pack_q4_linear_weight__w_4x8": pack_q4_linear_weight__w_4x8,
    "linear_q4gsw_tiled": linear_q4gsw_tiled,
    "linear_q4gsw_coop": linear_q4gsw_coop,
    "linear_dq8ca_q4gsw": linear_dq8ca_q4gsw,
    "linear_dq8ca_q4gsw_tiled": linear_dq8ca_q4gsw_tiled,
    "q8ta_conv2d": q8ta_conv2d,
    "q8ta_conv2d_im2col": q8ta_conv2d_im2col,
    "q8ta_im2col": q8ta_im2col,
    "q8ta_conv2d_dw": q8ta_conv2d_dw,
    "q8ta_conv2d_transposed": q8ta_conv2d_transposed,
    "pack_q8_conv2d_weights": pack_q8_conv2d_weights,
    "pack_q8_conv2d_dw_weights": pack_q8_conv2d_dw_weights,
}


def takes(kernel: str) -> tuple[str, ...]:
    """The options `kernel`'s make function takes: its parameters after `gen`, in signature order."""
    return tuple(list(inspect.signature(KERNELS[kernel]).parameters)[1:])


def shape_form(kernel: str) -> tuple[int, str]:
    """(fewest sizes, how to write them) of `kernel`'s `shape`, from its default: 4 sizes are an NCHW tensor; 2 a
    linear's input [..., M, K] (or a weight [N, K]), which may have leading dims."""
    default = inspect.signature(KERNELS[kernel]).parameters["shape"].default
    return (4, "N,C,H,W") if len(default) == 4 else (2, "[..., M, K] (2 or more sizes)")
