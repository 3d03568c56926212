"""ET-VK's ``et_vk.linear_q4gsw`` (Q4gswLinear.cpp, the op ET-VK's LLM export emits for a 4-bit weight-only
linear): the fp32 GEMM ``q4gsw_linear_gemm__w_4x8``, the fp16 GEMM ``q4gsw_linear_gemm__tin__w_4x8`` with its
input transpose, the cooperative GEMV ``q4gsw_linear_gemv_coop__w_4x8`` and the weight prepack they share,
``pack_q4_linear_weight__w_4x8`` — each dispatched as the C++ does; ``linear_q4gsw`` picks among them as
``q4gsw_linear`` does (float → GEMM, half → tin GEMM, M == 1 → GEMV).

What the C++ and the templates fix:

* prepack (``prepack_q4_w_4x8_nc_buffer``): ``VK_CHECK_COND(N % 4 == 0)``, ``VK_CHECK_COND(K % 4 == 0)``; the
  ``[N, K / 2]`` bytes (two values per byte as ``value + 8``, even K in the low nibble) become an int buffer of
  ``K4 · N4_padded · 2`` ints (``N4_padded`` = N4 rounded up to even), one ivec4 per 4K × 8N block at
  ``k4 · N8 + n8``: int j, byte b = rows ``8·n8 + 2j`` (low nibble) and ``+1`` (high) at column ``4·k4 + b``;
  rows past N hold 8 (zero). Global ``{K4, N8, 1}``, ``create_local_wg_size``, push constants
  ``sizes_pc_of(packed)`` (``{2·K4·N4_padded, 1, 1, 1}``), ``orig_sizes {K, N}``, ``n4_pitch = N4_padded``.
  The linear families pack on the host (``pack_w_4x8``) unless ``prepack="shader"`` runs ET-VK's shader first;
  the ``pack_q4_linear_weight__w_4x8`` family checks the shader against the host packing exactly.
* scales ``[groups, N]`` in the IO dtype (``prepack_q4_scales``), bias in the output dtype (a dummy without).
* bindings, one layout for all three shaders: output, fp input, transposed input (a 0-element dummy on the fp32
  and GEMV paths), packed weight, scales, bias, then UBOs ``sizes_ubo(output)``, ``sizes_ubo(fp_input)``; no push
  constants; spec constants ``{apply_bias, K, group_size}`` (ids 3–5).
* GEMM ``q4gsw_linear_gemm__w_4x8_nc_<io>_<dtype>``: global ``{ceil(N / 8), ceil(M / 4), 1}``, local ``{8, 8, 1}``.
* tin GEMM ``q4gsw_linear_gemm__tin__w_4x8_nc_<io>_<dtype>``: global ``{ceil(M / 8), ceil(N / 4), 1}``, local
  ``{1, 128, 1}``, after ``transpose_cast_contig_to_vectorized_<in>_buffer_<in>_buffer`` (global ``{K, M4, 1}``,
  local ``{8, 8, 1}``, UBO ``sizes_ubo(fp_input)``) fills the transposed input, ``K · M4`` vec4s. Buffer IO only
  here (a texture input takes the ``_4x4`` transpose, not ported).
* GEMV ``q4gsw_linear_gemv_coop__w_4x8_nc_buffer_<g1w64|g4w16|g8w8>_<io>_<dtype>`` by N (≤ 1024, ≤ 4096, else):
  global ``{ceil(N8 / groups), groups, workers}``, local ``{1, groups, workers}``.
* M == 1: the C++ gates both GEMMs to ``{0, 0, 0}`` (``pick_q4gsw_linear_gemm_gated_global_wg``) and the GEMV runs;
  the GEMM families still dispatch at M == 1 as ET-VK's forced-shader tests do (``etvk_gated`` column). The GEMV
  at M != 1 is refused (the C++ gates it off).

Findings (reads past ET-VK's buffers, undefined without robust buffer access; the workbench gives them room):
the fp32 GEMM reads whole 4-row input tiles, up to 3 rows past a buffer input when M % 4 != 0 (smallest:
``shape=(3, 32)``); the tin GEMM reads the transposed input one vec4 past its end when M4 is odd (``shape=(2,
32)``); the GEMV reads one vec2 of scales and four bias values past N when N % 8 == 4 (``out_features=12``).

Batch: none of the shaders has a term for dims beyond M (global z = 1, rows indexed from 0): leading dims > 1 are
refused; ``etvk_batch=True`` dispatches as the C++ would (batch 0 only).
"""
from __future__ import annotations

import math
import struct
from dataclasses import replace

import numpy as np
import torch

from ..codegen import Codegen
from ..dispatch import Dispatch, Resource, Step, create_local_wg_size
from ._linear import refuse_batch, whcn_ivec4
from .linear_dq8ca_qw_coopmat import int4_source_bytes
from .linear_q4gsw_shared import (DTYPES, STORAGES, Operands, check_choice, check_group, declared_slots, io_input,
                                  io_output, parse_input, row_params, vector_buffer)
from .linear_q8ta_q8csw import check_template

PACK = "pack_q4_linear_weight__w_4x8_nc_buffer"
GEMM, TIN, GEMV = "q4gsw_linear_gemm__w_4x8", "q4gsw_linear_gemm__tin__w_4x8", "q4gsw_linear_gemv_coop__w_4x8"
GEMM_TILE, TIN_TILE = (4, 8), (8, 4)  # kGemmTileM/N, kTinGemmTileM/N (Q4gswLinear.h)
CPP = "Q4gswLinear.cpp"


#: the GEMV's (suffix, NUM_GROUPS, WORKERS_PER_GROUP) decompositions (its YAML's variants), in the picker's order
COOP_VARIANTS = (("_g1w64", 1, 64), ("_g4w16", 4, 16), ("_g8w8", 8, 8))


def coop_variant(n: int) -> tuple[str, int, int]:
    """``pick_coop_variant_for_N``: (suffix, NUM_GROUPS, WORKERS_PER_GROUP)."""
    return COOP_VARIANTS[0 if n <= 1024 else 1 if n <= 4096 else 2]


def coop_geometry(n: int, groups: int, workers: int) -> tuple[tuple, tuple]:
    """(global, local) work groups of the GEMV at N = `n` in a decomposition (``pick_q4gsw_nc_coop_global_wg`` /
    ``_local_wg``): ceil(N8 / NUM_GROUPS) work groups of (1, NUM_GROUPS, WORKERS)."""
    return (math.ceil(math.ceil(n / 8) / groups), groups, workers), (1, groups, workers)


def coop_variant_named(name: str) -> tuple[str, int, int]:
    """The decomposition `name` — its YAML suffix ("_g1w64") or that without the underscore ("g1w64", as the CLI
    spells it) — as (suffix, NUM_GROUPS, WORKERS_PER_GROUP); ValueError naming the decompositions in the spelling
    given."""
    spelled = {s if str(name).startswith("_") else s.lstrip("_"): (s, g, w) for s, g, w in COOP_VARIANTS}
    if name not in spelled:
        raise ValueError(f"expected a decomposition of {sorted(spelled)}, got {name!r}")
    return spelled[name]


def with_coop_variant(d: Dispatch, n: int, suffix: str) -> Dispatch:
    """The GEMV dispatch `d` (N = `n` outputs) at another of its decompositions (COOP_VARIANTS: the variant, work
    groups and local size ET-VK's picker would give it), to see what the picker's choice costs on a device."""
    suffix, groups, workers = coop_variant_named(suffix)
    old = next(v[0] for v in COOP_VARIANTS if v[0] in d.variant)
    global_size, local_size = coop_geometry(n, groups, workers)
    return replace(d, variant=d.variant.replace(old, suffix), global_size=global_size, local_size=local_size)


def pack_w_4x8(w4: np.ndarray) -> np.ndarray:
    """``pack_q4_linear_weight__w_4x8``'s nc-buffer layout of an int4 ``[N, K]`` weight (values -8..7): int32
    ``[K4, N8, 4]``, N8 = ceil(N4 / 2); int j, byte b = ``(w[8·n8 + 2j, 4·k4 + b] + 8) | (w[8·n8 + 2j + 1, …] + 8)
    << 4``; rows past N hold 8."""
    w4 = np.asarray(w4, dtype=np.int64)
    n, k = w4.shape
    n8 = (math.ceil(n / 4) + 1) // 2
    nib = np.full((8 * n8, k), 8, dtype=np.int64)
    nib[:n] = w4 + 8
    nib = nib.reshape(n8, 4, 2, k // 4, 4)  # [n8, int j, odd row, k4, byte b]
    words = np.zeros((k // 4, n8, 4), dtype=np.int64)
    for b in range(4):
        for odd in range(2):
            words |= nib[:, :, odd, :, b].transpose(2, 0, 1) << (8 * b + 4 * odd)
    return words.astype(np.uint32).view(np.int32)


def _pack_step(k: int, n: int, bindings: tuple) -> Step:
    """ET-VK's prepack dispatch (``prepack_q4_w_4x8_nc_buffer``) writing binding 0 of `bindings` from binding 1."""
    k4, n4 = k // 4, n // 4
    n4_padded = (n4 + 1) & ~1
    push = struct.pack("<4i2ii", k4 * n4_padded * 2, 1, 1, 1, k, n, n4_padded)
    global_size = (k4, n4_padded // 2, 1)
    return Step(PACK, bindings, push, {}, global_size, create_local_wg_size(global_size))


def _check_n(op: str, n: int) -> None:
    if n % 4:
        raise ValueError(f"{op}: N={n} is not a multiple of 4 (VK_CHECK_COND(N % 4 == 0) in "
                         f"prepack_q4_w_4x8_nc_buffer, {CPP})")


def _dispatch(gen: Codegen, op: str, shape, out_features, group_size, dtype, storage, bias, prepack, etvk_batch,
              seed) -> Dispatch:
    check_choice(op, "dtype", dtype, tuple(DTYPES))
    check_choice(op, "storage", storage, ("buffer",) if op == TIN else STORAGES)
    check_choice(op, "prepack", prepack, ("host", "shader"))
    sizes, m, k, lead, batch = parse_input(op, shape)
    n, group_size = int(out_features), int(group_size)
    check_group(op, k, group_size, n)
    _check_n(op, n)
    if op == GEMV and m != 1:
        raise ValueError(f"{op}: the GEMV computes one row (ET-VK's pick_q4gsw_nc_coop_global_wg returns {{0, 0, 0}} "
                         f"when M != 1, {CPP}); given M={m} — use {GEMM} or {TIN}")
    refuse_batch(op, lead, batch, etvk_batch, "global z = 1 and rows indexed from 0")
    if op == GEMV:
        suffix, groups, workers = coop_variant(n)
        variant = f"{op}_nc_buffer{suffix}_{storage}_{dtype}"
    else:
        variant = f"{op}_nc_{storage}_{dtype}"
    check_template(gen, variant, op)
    # the buffer-IO fp16 templates accumulate in f16vec4 (texel_load_type); the GEMV and texture loads in vec4
    half_acc = dtype == "half" and (op == TIN or (op == GEMM and storage == "buffer"))
    ops = Operands(op, sizes, n, group_size, dtype, bias, seed, half_accumulate=half_acc)
    np_dtype = DTYPES[dtype][1]
    k4, n4, m4 = k // 4, n // 4, math.ceil(m / 4)
    packed = pack_w_4x8(ops.w4.numpy())
    out_sizes = sizes[:-1] + (n,)
    out, decode = io_output("t_output", out_sizes, storage, dtype)
    transposed = (Resource("buffer", nbytes=(k * m4 + 1) * 4 * np.dtype(np_dtype).itemsize,
                           name="t_transposed_input") if op == TIN
                  else Resource("buffer", nbytes=16, name="t_transposed_input"))  # ET-VK's 0-element dummy
    weight = (Resource("buffer", packed.reshape(-1), name="t_q4_weights") if prepack == "host"
              else Resource("buffer", nbytes=packed.nbytes, name="t_q4_weights"))
    resources = [out, io_input("t_fp_input", ops.x, storage, dtype, rows=batch * 4 * m4), transposed, weight,
                 vector_buffer("t_scales", ops.scales, np_dtype, ops.groups * n + 2),
                 vector_buffer("t_bias", ops.bias, np_dtype, n + 4),
                 Resource("ubo", whcn_ivec4(out_sizes), name="output_sizes"),
                 Resource("ubo", whcn_ivec4(sizes), name="input_sizes")]
    before = []
    if prepack == "shader":
        resources.append(Resource("buffer", int4_source_bytes(ops.w4.numpy()).reshape(-1).view(np.int32),
                                  name="t_int4_weight"))
        before.append(_pack_step(k, n, (3, len(resources) - 1)))
    if op == TIN:
        in_name = "half" if dtype == "half" else "float"
        before.append(Step(f"transpose_cast_contig_to_vectorized_{in_name}_buffer_{in_name}_buffer", (2, 1, 7), b"",
                           {}, (k, m4, 1), (8, 8, 1)))
        global_size, local_size = (math.ceil(m / TIN_TILE[0]), math.ceil(n / TIN_TILE[1]), 1), (1, 128, 1)
    elif op == GEMM:
        global_size, local_size = (math.ceil(n / GEMM_TILE[1]), math.ceil(m / GEMM_TILE[0]), 1), (8, 8, 1)
    else:
        global_size, local_size = coop_geometry(n, groups, workers)
    spec = {3: int(ops.bias is not None), 4: k, 5: group_size}
    item = np.dtype(np_dtype).itemsize
    return Dispatch(op, variant, resources, b"", spec, global_size, local_size, 0, decode, ops.expected,
                    atol=ops.atol, bytes_moved=item * (batch * m * (k + n) + ops.groups * n) + packed.nbytes,
                    macs=batch * m * n * k, before=before, bindings=declared_slots(gen, variant, 8),
                    params=row_params(sizes, n, ops, dtype, storage, prepack=prepack,
                                      etvk_gated=op != GEMV and m == 1))


def q4gsw_linear_gemm__w_4x8(gen: Codegen, shape=(37, 256), out_features: int = 64, group_size: int = 32, *,
                             dtype: str = "float", storage: str = "buffer", bias: bool = True,
                             prepack: str = "host", etvk_batch: bool = False, seed: int = 0) -> Dispatch:
    """ET-VK's fp32 prefill GEMM of ``linear_q4gsw`` (4M × 8N per thread): fp input ``[M, K]`` × int4
    group-symmetric weight ``[N, K]`` (scales per `group_size` columns) → ``[M, N]``."""
    return _dispatch(gen, GEMM, shape, out_features, group_size, dtype, storage, bias, prepack, etvk_batch, seed)


def q4gsw_linear_gemm__tin__w_4x8(gen: Codegen, shape=(37, 256), out_features: int = 64, group_size: int = 32, *,
                                  dtype: str = "half", storage: str = "buffer", bias: bool = True,
                                  prepack: str = "host", etvk_batch: bool = False, seed: int = 0) -> Dispatch:
    """ET-VK's fp16 prefill GEMM of ``linear_q4gsw`` (8M × 4N per thread, the input transposed to ``[K, M4]`` vec4s
    first by ``transpose_cast_contig_to_vectorized``, recorded before it)."""
    return _dispatch(gen, TIN, shape, out_features, group_size, dtype, storage, bias, prepack, etvk_batch, seed)


def q4gsw_linear_gemv_coop__w_4x8(gen: Codegen, shape=(1, 256), out_features: int = 64, group_size: int = 32, *,
                                  dtype: str = "float", storage: str = "buffer", bias: bool = True,
                                  prepack: str = "host", etvk_batch: bool = False, seed: int = 0) -> Dispatch:
    """ET-VK's decode GEMV of ``linear_q4gsw`` (M = 1): 64 threads per work group share K, in NUM_GROUPS groups of
    8 output channels chosen by N (``pick_coop_variant_for_N``)."""
    return _dispatch(gen, GEMV, shape, out_features, group_size, dtype, storage, bias, prepack, etvk_batch, seed)


def linear_q4gsw(gen: Codegen, shape=(1, 256), out_features: int = 64, group_size: int = 32, *,
                 dtype: str = "float", storage: str = "buffer", bias: bool = True, prepack: str = "host",
                 etvk_batch: bool = False, seed: int = 0) -> Dispatch:
    """``q4gsw_linear`` as the C++ runs it: the dispatch that does the work at this M and dtype — the GEMV at
    M == 1, else the fp32 GEMM (float) or the transposed-input GEMM (half)."""
    m = parse_input("linear_q4gsw", shape)[1]
    op = GEMV if m == 1 else (GEMM if dtype == "float" else TIN)
    return _dispatch(gen, op, shape, out_features, group_size, dtype, storage, bias, prepack, etvk_batch, seed)


def pack_q4_linear_weight__w_4x8(gen: Codegen, shape=(24, 64), *, seed: int = 0) -> Dispatch:
    """ET-VK's prepack of a 4-bit ``[N, K]`` weight for ``linear_q4gsw`` (``prepack_q4_w_4x8_nc_buffer``),
    checked exactly against ``pack_w_4x8``."""
    op = "pack_q4_linear_weight__w_4x8"
    *lead, n, k = [int(s) for s in shape] if len(shape) >= 2 else (0, 0)
    if any(s != 1 for s in lead) or min(n, k) < 1:
        raise ValueError(f"{op}: the weight is [N, K] (leading sizes 1), given {tuple(shape)}")
    _check_n(op, n)
    if k % 8:
        raise ValueError(f"{op}: K={k} is not a multiple of 8 (the source rows are K / 2 bytes read as whole uints, "
                         f"t_int4_weight[n * K8 + k8]; ET-VK's export pads them to 8 values, "
                         f"pack_4bit_weight_tensor)")
    check_template(gen, PACK, op)
    w4 = torch.randint(-8, 8, (n, k), dtype=torch.int8, generator=torch.Generator().manual_seed(seed)).numpy()
    packed = pack_w_4x8(w4)
    step = _pack_step(k, n, (0, 1))
    staged = int4_source_bytes(w4).reshape(-1).view(np.int32)
    shape_out = packed.shape
    resources = [Resource("buffer", nbytes=packed.nbytes, name="t_packed_weight"),
                 Resource("buffer", staged, name="t_int4_weight")]
    decode = lambda raw: torch.from_numpy(raw.view(np.int32).reshape(shape_out).copy())
    return Dispatch(op, PACK, resources, step.push_constants, {}, step.global_size, step.local_size, 0, decode,
                    torch.from_numpy(packed), bytes_moved=staged.nbytes + packed.nbytes,
                    params={"shape": f"{n}x{k}", "storage": "buffer"})
