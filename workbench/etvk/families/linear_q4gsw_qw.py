"""ET-VK's 4-bit weight-only linears of QuantizedLinear.cpp's ``add_linear_qw_node``: ``linear_q4gsw_tiled``
(M > 1) and ``linear_q4gsw_coop`` (M == 1, 64 threads share K) — what ``et_vk.linear_dq8ca_q4gsw`` runs where the
device has no int8 dot product (``quantized_linear_impl``: ``!can_use_int8_dot_product()``), and the kernels whose
weight ``pack_q4_linear_weight`` prepacks.

What the C++ and the templates fix:

* prepack (``prepack_quantized_linear_weight``, nbits 4): ``VK_CHECK_COND(K % 8 == 0)``; the ``[N, K / 2]`` bytes
  become ``N8 × K4`` int texels (texture2d, or a buffer past the device's texture limits), texel ``(k4, n8)``
  component r, nibble c = row ``8·n8 + r + 4·(c & 1)`` at column ``4·k4 + c // 2`` (``pack_q4_weight``). Packed on
  the host unless ``prepack="shader"`` runs ``pack_q4_linear_weight_<storage>`` first (the
  ``pack_q4_linear_weight`` family checks the two against each other exactly).
* kernel name (``pick_linear_qw_shader``): ``linear_q4gsw`` + ``_coop`` when ``is_gemv`` (M == 1) else ``_tiled``,
  + output storage + weight storage + dtype. (The ``linear_q4gsw_coopmat`` branch needs cooperative matrices on a
  64-lane AMD device and a half buffer output.)
* bindings: output, fp input, packed weight, scales (``[groups, N]``, width padded to 4 by the export's
  ``align_width_and_update_state_dict``), bias (a dummy without), UBOs ``sizes_ubo(output)``,
  ``sizes_ubo(fp_input)``; no push constants; spec constants ``{apply_bias, K4_per_group = ceil(group_size / 4),
  num_groups = K / group_size, N}`` (ids 3–6; the two templates read the first two).
* global ``{ceil(N / 8), ceil(M / 4), 1}`` tiled with ``pick_hw_square_wg_size``; coop ``{ceil(N / 8), M, 1}``
  with local ``{1, 1, 64}`` (``quantized_linear_global_wg_size`` / ``_local_wg_size``).

Findings: both read 8 output channels of scales and bias per thread without a bound check, one vec4 past the
(padded) tensors when N4 is odd (``out_features=12``); ``linear_q4gsw_tiled`` reads whole 4-row input tiles
(``load_input_tile_no_checks``), up to 3 rows past a buffer input when M % 4 != 0. The buffer output is written as
vec4 ``m · N4 + n4`` into ET-VK's contiguous ``[M, N]`` buffer: rows shift when N % 4 != 0 (the workbench refuses
that case; ``linear_q8ta_q8csw_tiled`` has the same store and documents it).

Batch: no term for dims beyond M; leading dims > 1 are refused, ``etvk_batch=True`` shows what ET-VK computes.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from ..codegen import Codegen
from ..dispatch import Dispatch, Resource, Step, create_local_wg_size, pick_hw_square_wg_size
from ._linear import refuse_batch, whcn_ivec4
from .linear_dq8ca_qw_coopmat import int4_source_bytes, pack_q4_weight
from .linear_q4gsw_shared import (DTYPES, STORAGES, Operands, check_choice, check_group, declared_slots, io_input,
                                  io_output, parse_input, row_params, vector_buffer)
from .linear_q8ta_q8csw import check_template

WEIGHT_STORAGES = ("texture2d", "buffer")


def scales_bias_sizes(ops: Operands, np_dtype, out_sizes, sizes) -> list:
    """The trailing bindings of every `add_linear_qw_node`-style linear (weight-only and 8da4w): the group scales with
    their width padded to 4 as the export pads it (align_width_and_update_state_dict), the bias, the output's and the
    input's sizes."""
    n = out_sizes[-1]
    n4 = math.ceil(n / 4)
    scales = np.zeros((ops.groups, 4 * n4), dtype=np_dtype)
    scales[:, :n] = ops.scales.numpy()
    return [vector_buffer("t_weight_scales", scales, np_dtype, ops.groups * 4 * n4 + 4),
            vector_buffer("t_bias", ops.bias, np_dtype, 4 * n4 + 4),
            Resource("ubo", whcn_ivec4(out_sizes), name="output_sizes"),
            Resource("ubo", whcn_ivec4(sizes), name="input_sizes")]


def qw_geometry(gemv: bool, n: int, m: int) -> tuple[tuple, tuple]:
    """(global, local) size of the qw linears as ET-VK picks them: the cooperative GEMV one 64-thread group per 8
    output channels and row, the tiled shader one thread per 4 × 8 tile in a square-ish group."""
    n8, m4 = math.ceil(n / 8), math.ceil(m / 4)
    if gemv:
        return (n8, m, 1), (1, 1, 64)
    global_size = (n8, m4, 1)
    return global_size, pick_hw_square_wg_size(global_size)


def checked_operands(op: str, shape, out_features, group_size, dtype, storage, weight_storage, prepack) -> tuple:
    """(sizes, M, K, leading dims, batch, N, group size) of an `add_linear_qw_node`-style call, every option and
    ET-VK's shape preconditions checked in one line each (shared by the weight-only and the 8da4w linears)."""
    check_choice(op, "dtype", dtype, tuple(DTYPES))
    check_choice(op, "storage", storage, STORAGES)
    check_choice(op, "weight_storage", weight_storage, WEIGHT_STORAGES)
    check_choice(op, "prepack", prepack, ("host", "shader"))
    sizes, m, k, lead, batch = parse_input(op, shape)
    n, group_size = int(out_features), int(group_size)
    check_group(op, k, group_size, n)
    return sizes, m, k, lead, batch, n, group_size


def packed_weight(w4, weight_storage: str, prepack: str) -> tuple:
    """(the packed int4 weight [N8, K4, 4], its resource ``t_packed_int4_weight``: filled on the host, or empty for
    ET-VK's prepack shader to fill)."""
    packed = pack_q4_weight(w4.numpy())
    n8, k4 = packed.shape[:2]
    if weight_storage == "texture2d":
        return packed, Resource("image", packed if prepack == "host" else None, extent=(k4, n8), fmt="rgba32i",
                                name="t_packed_int4_weight")
    return packed, (Resource("buffer", packed.reshape(-1), name="t_packed_int4_weight") if prepack == "host"
                    else Resource("buffer", nbytes=packed.nbytes, name="t_packed_int4_weight"))


def prepack_step(w4, weight_storage: str, resources: list, weight_slot: int) -> Step:
    """``prepack_quantized_linear_weight``'s PrepackNode (nbits 4) writing resource `weight_slot` from ET-VK's
    ``[N, K / 2]`` source bytes, which it appends to `resources`."""
    n, k = w4.shape
    k4, n8 = k // 4, math.ceil(n / 8)
    resources.append(Resource("buffer", int4_source_bytes(w4.numpy()).reshape(-1).view(np.int32),
                              name="t_int4_weight"))
    pack_global = (math.ceil(k4 / 2), n8, 1)
    return Step(f"pack_q4_linear_weight_{weight_storage}", (weight_slot, len(resources) - 1),
                struct.pack("<4i2i", 4 * k4, n8, 1, 1, k, n), {}, pack_global, create_local_wg_size(pack_global))


def _dispatch(gen: Codegen, op: str, shape, out_features, group_size, dtype, storage, weight_storage, bias,
              prepack, etvk_batch, seed) -> Dispatch:
    sizes, m, k, lead, batch, n, group_size = checked_operands(op, shape, out_features, group_size, dtype, storage,
                                                               weight_storage, prepack)
    gemv = op == "linear_q4gsw_coop"
    if gemv != (m == 1):
        raise ValueError(f"{op}: ET-VK picks linear_q4gsw_{'coop' if m == 1 else 'tiled'} at M={m} (is_gemv: "
                         f"size_at(-2, fp_input) == 1, pick_linear_qw_shader in QuantizedLinear.cpp)")
    if storage == "buffer" and n % 4:
        raise ValueError(f"{op}: with a buffer output N must be a multiple of 4: the shader stores vec4 m * N4 + n4 "
                         f"into ET-VK's contiguous [M, N] buffer (write_output_x4), so rows shift otherwise; given "
                         f"N={n} — use storage='texture3d'")
    refuse_batch(op, lead, batch, etvk_batch, "global z = 1, rows indexed from 0")
    variant = f"{op}_{storage}_{weight_storage}_{dtype}"
    check_template(gen, variant, op)
    half_acc = dtype == "half" and storage == "buffer"  # f16vec4 tiles; texture loads are vec4
    ops = Operands(op, sizes, n, group_size, dtype, bias, seed, half_accumulate=half_acc)
    np_dtype = DTYPES[dtype][1]
    m4 = math.ceil(m / 4)
    packed, weight = packed_weight(ops.w4, weight_storage, prepack)
    out_sizes = sizes[:-1] + (n,)
    out, decode = io_output("t_output", out_sizes, storage, dtype)
    resources = [out, io_input("t_input", ops.x, storage, dtype, rows=batch * 4 * m4), weight,
                 *scales_bias_sizes(ops, np_dtype, out_sizes, sizes)]
    before = []
    if prepack == "shader":
        before.append(prepack_step(ops.w4, weight_storage, resources, 2))
    global_size, local_size = qw_geometry(gemv, n, m)
    spec = {3: int(ops.bias is not None), 4: math.ceil(group_size / 4), 5: k // group_size, 6: n}
    item = np.dtype(np_dtype).itemsize
    return Dispatch(op, variant, resources, b"", spec, global_size, local_size, 0, decode, ops.expected,
                    atol=ops.atol, bytes_moved=item * (batch * m * (k + n) + ops.groups * n) + packed.nbytes,
                    macs=batch * m * n * k, before=before, bindings=declared_slots(gen, variant, 7),
                    params=row_params(sizes, n, ops, dtype, storage, weight_storage=weight_storage,
                                      prepack=prepack))


def linear_q4gsw_tiled(gen: Codegen, shape=(37, 256), out_features: int = 64, group_size: int = 32, *,
                       dtype: str = "float", storage: str = "texture3d", weight_storage: str = "texture2d",
                       bias: bool = True, prepack: str = "host", etvk_batch: bool = False, seed: int = 0) -> Dispatch:
    """``linear_q4gsw_tiled_<storage>_<weight_storage>_<dtype>``: fp input ``[M, K]`` (M > 1) × int4
    group-symmetric weight → ``[M, N]``, one thread per 4 × 8 output tile."""
    return _dispatch(gen, "linear_q4gsw_tiled", shape, out_features, group_size, dtype, storage, weight_storage,
                     bias, prepack, etvk_batch, seed)


def linear_q4gsw_coop(gen: Codegen, shape=(1, 256), out_features: int = 64, group_size: int = 32, *,
                      dtype: str = "float", storage: str = "texture3d", weight_storage: str = "texture2d",
                      bias: bool = True, prepack: str = "host", etvk_batch: bool = False, seed: int = 0) -> Dispatch:
    """``linear_q4gsw_coop_<storage>_<weight_storage>_<dtype>``: the M == 1 case, one work group of 64 threads
    per 8 output channels reducing K through shared memory."""
    return _dispatch(gen, "linear_q4gsw_coop", shape, out_features, group_size, dtype, storage, weight_storage,
                     bias, prepack, etvk_batch, seed)
