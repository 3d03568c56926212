"""ET-VK's ``et_vk.linear_dq8ca_q4gsw`` (QuantizedLinear.cpp ``quantized_linear_impl``, the op ET-VK's ``8da4w``
export emits): activations quantized to int8 per row at run time, int4 group-symmetric weights, integer dot products
per group. Three dispatches, each as the C++ records them:

1. ``choose_qparams_per_row_<storage>_<dtype>_zpint8`` (ChooseQParams.cpp ``add_choose_qparams_per_row_node``, the
   node the export's ``choose_qparams_affine`` becomes): bindings scales (``texture3d``, the IO dtype), zero points
   (``texture3d`` int8: ``rgba8i``), fp input, UBO ``sizes_ubo(input)``; push constants ``{quant_min = -128,
   quant_max = 127}`` (two ints); global ``{1, ceil(M / 4), 1}``, local ``{64, 1, 1}``. Min / max over the row, the
   scale ``(max - min) / 255`` and ATen's nudged zero point — on the host the same as torchao's
   ``choose_qparams_affine(ASYMMETRIC, per token, int8)`` that ``Int8DynamicActivationIntxWeightConfig`` runs.
2. ``quantize_and_pack_4h4w_with_group_sums_<o2w32|o4w16>_buffer_<storage>_<dtype>_zpint8``
   (QuantizeDequantize.cpp ``add_quantize_and_pack_4h4w_with_group_sums_node``): ``o2w32`` when group_size >= 128,
   else ``o4w16``; bindings packed int8 input (4H4W ivec4 buffer, block ``m4 · K4 + k4``), int8 input sums
   (``ivec4[group · M4 + m4]``), fp input, scales, zero points, UBO ``sizes_ubo(input)``; spec constant
   ``{K4_per_group = ceil(group_size / 4)}``; global ``{num_groups, ceil(M / 4), 1}``, local ``{2, 1, 32}`` or
   ``{4, 1, 16}``. At M == 1 the C++ gives it ``{0, 0, 0}`` (skipped: the GEMV does not quantize its input).
3. ``linear_dq8ca_q4gsw_<tiled|coop>_<storage>_<weight_storage>_<dtype>_zpint8`` (``add_linear_dqa_qw_node``,
   ``pick_linear_dqa_qw_shader``: ``_coop`` at M == 1): bindings output, fp input, packed int8 input, input sums,
   scales, zero points, packed weight (``pack_q4_linear_weight``: texel ``(k4, n8)``), weight sums (int,
   ``[groups, N]`` padded to a multiple of 8 by ``compute_per_group_sums``), weight scales (``[groups, N]`` padded to
   4), bias (dummy without), UBOs ``sizes_ubo(output)``, ``sizes_ubo(fp_input)``; no push constants; spec constants
   ``{apply_bias, K4_per_group, K / group_size, N}`` (ids 3–6); global ``{ceil(N / 8), ceil(M / 4), 1}`` with
   ``pick_hw_square_wg_size`` (tiled) or ``{ceil(N / 8), M, 1}`` with local ``{1, 1, 64}`` (coop).

Not here: the ``linear_dq8ca_q4gsw_coopmat`` branch (AMD, 64-lane subgroups, int8 cooperative matrices; the
``linear_dq8ca_qw_coopmat`` family), and devices without int8 dot product, where the C++ runs the weight-only
``linear_q4gsw_tiled`` / ``_coop`` (``linear_q4gsw_qw``). The zero points are int8 (``zpint8``), as torchao's
``zero_point_dtype=torch.int8`` gives them.

Reference (torch / torchao, float64): the input quantized per row as torchao's 8da4w does
(``choose_qparams_affine`` / ``quantize_affine``, asymmetric int8, per token), the weight as
``Int8DynamicActivationIntxWeightConfig(int4, PerGroup)`` (symmetric, -8..7), ``(q - zp) · s @ w_deq.T + bias``.
The shader's integer sums per group are exact; what may differ: the fp32 (or, for half buffers, fp16) multiply-adds
over the groups, ``(groups + 3) · u · max(|x_deq| @ |w_deq|.T + |bias|)``, and one activation rounding per row
where the device's ``1 / scale`` is not correctly rounded (``max s · max |w_deq|``). At M == 1 ET-VK computes the
weight-only product of the fp input (by design: "gemv is a memory bound operation"); the family checks that, and
the row's ``ref_8da4w_max_abs_diff`` says how far it is from torchao's 8da4w result.

Findings at cff6f4dd32 (the family gives ET-VK's data as its export makes it, so they show):

* ``compute_per_group_sums`` pads the weight sums' rows to a multiple of 8 but the shader indexes them with a row
  pitch of ``N4`` ivec4s: with N % 8 == 4 and 2 or more groups, every group after the first reads another group's
  sums (smallest: ``shape=(2, 64), out_features=4, group_size=32``). ``etvk_pitch=True`` lays them out as the
  shader reads them.
* ``quantize_and_pack_4h4w_with_group_sums`` adds each worker's running sum twice
  (``local_sum[m] += dotPacked4x8AccSatEXT(packed, ones, local_sum[m])``): wrong input sums, so wrong outputs,
  where a worker walks more than one block of a group, ``ceil(group_size / 4) > workers`` (group 256 on ``o2w32``;
  68..124 on ``o4w16``; smallest: ``shape=(2, 256), group_size=256``).
* its early ``return`` for out-of-range groups precedes the shared-memory ``barrier()`` when ``num_groups`` is not a
  multiple of the work group's groups (``K = 384, group_size = 128``: 3 groups, 2 per work group): a barrier not
  reached by the whole work group, undefined behaviour.
* it reads whole 4-row input tiles (``load_input_tile_no_checks``): up to 3 rows past a buffer input when M % 4 != 0
  (the workbench gives them room, as for ``linear_q4gsw_tiled``).
* with half buffers the tiled shader converts each group's int32 sum to fp16 (``VEC4_T(accum_adjusted)``, f16vec4):
  past 65504 it is infinite (a group of 64 or more columns of a constant activation row and weight 7:
  ``255 · 7 · 64 = 114240``; read from the source, not run: the family's data are random).
* ``add_choose_qparams_per_row_node`` tests ``val_is_none(quant_min)`` for ``quant_max`` too.

Batch: none of the shaders has a term for dims beyond M; leading dims > 1 are refused.
"""
from __future__ import annotations

import math
import struct

import numpy as np
import torch

from ...kernels.q4_gemv import quantize_activations_int8
from ..codegen import Codegen
from ..dispatch import Dispatch, Resource, Step
from ._linear import refuse_batch
from .linear_q4gsw_qw import checked_operands, packed_weight, prepack_step, qw_geometry, scales_bias_sizes
from .linear_q4gsw_shared import DTYPES, Operands, declared_slots, dequantized, io_input, io_output, row_params
from .linear_q8ta_q8csw import check_template

OP = "linear_dq8ca_q4gsw"
QMIN, QMAX = -128, 127


def torchao_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(int8 q [M, K], scales [M], int8 zero points [M]) of `x` [M, K] as torchao's 8da4w quantizes activations
    (``_apply_int8_act_asym_per_token_quant_dequant``: asymmetric int8 per token, zero points int8), as tensors:
    `kernels.q4_gemv.quantize_activations_int8`, the workbench's one definition of it."""
    q, scale, zp = quantize_activations_int8(x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x)
    return torch.from_numpy(q), torch.from_numpy(scale), torch.from_numpy(zp.astype(np.int8))


def weight_sums(w4: torch.Tensor, group_size: int, pitch: int) -> np.ndarray:
    """``compute_per_group_sums``: the int4 weight's sum per group and output channel, ``[groups, pitch]`` int32
    (zeros past N; the export's pitch is N rounded up to 8)."""
    n, k = w4.shape
    sums = w4.to(torch.int32).reshape(n, k // group_size, group_size).sum(-1).T.numpy()
    out = np.zeros((k // group_size, pitch), dtype=np.int32)
    out[:, :n] = sums
    return out


def _check_m1(op: str, m: int, want_gemv: bool | None) -> None:
    if want_gemv is not None and want_gemv != (m == 1):
        raise ValueError(f"{op}: ET-VK picks linear_dq8ca_q4gsw_{'coop' if m == 1 else 'tiled'} at M={m} (is_gemv: "
                         f"size_at(-2, fp_input) == 1, pick_linear_dqa_qw_shader in QuantizedLinear.cpp)")


def _dispatch(gen: Codegen, op: str, want_gemv, shape, out_features, group_size, dtype, storage, weight_storage,
              bias, prepack, etvk_pitch, etvk_batch, seed) -> Dispatch:
    sizes, m, k, lead, batch, n, group_size = checked_operands(op, shape, out_features, group_size, dtype, storage,
                                                               weight_storage, prepack)
    _check_m1(op, m, want_gemv)
    if storage == "buffer" and n % 4:
        raise ValueError(f"{op}: with a buffer output N must be a multiple of 4: the shader stores vec4 m * N4 + n4 "
                         f"into ET-VK's contiguous [M, N] buffer (write_output_tile_with_checks), so rows shift "
                         f"otherwise; given N={n} — use storage='texture3d'")
    refuse_batch(op, lead, batch, etvk_batch, "global z = 1, rows indexed from 0")
    gemv = m == 1
    variant = f"{OP}_{'coop' if gemv else 'tiled'}_{storage}_{weight_storage}_{dtype}_zpint8"
    choose = f"choose_qparams_per_row_{storage}_{dtype}_zpint8"
    o2w32 = group_size >= 128
    quant = f"quantize_and_pack_4h4w_with_group_sums_{'o2w32' if o2w32 else 'o4w16'}_buffer_{storage}_{dtype}_zpint8"
    for name in (variant, choose) + (() if gemv else (quant,)):
        check_template(gen, name, name.split("_texture3d")[0].split("_buffer")[0])

    torch_dtype, np_dtype, fmt = DTYPES[dtype]
    half_acc = dtype == "half" and storage == "buffer"  # f16vec4 tiles; texture loads are vec4
    ops = Operands(op, sizes, n, group_size, dtype, bias, seed, half_accumulate=half_acc)
    groups, k4, n4, n8, m4 = k // group_size, k // 4, math.ceil(n / 4), math.ceil(n / 8), math.ceil(m / 4)
    x2 = ops.x.reshape(-1, k)[:m]
    q, s, zp = torchao_per_token(x2)
    w = dequantized(ops.w4, ops.scales.T.contiguous(), group_size)  # float64 [N, K]
    x_deq = (q.double() - zp.double()[:, None]) * s.double()[:, None]
    ref = x_deq @ w.T
    magnitude = x_deq.abs() @ w.abs().T
    if ops.bias is not None:
        ref, magnitude = ref + ops.bias.double(), magnitude + ops.bias.double().abs()
    ref = ref.reshape(sizes[:-1] + (n,))
    ref_8da4w_diff = None
    if gemv:  # ET-VK runs the weight-only product here; Operands' reference and bound are that
        expected, atol = ops.expected, ops.atol
        ref_8da4w_diff = float((ops.reference - ref).abs().max())
    else:
        unit = 2.0 ** -11 if half_acc else 2.0 ** -24
        peak = float(magnitude.max())
        atol = (groups + 3) * unit * peak + float(s.double().max()) * float(w.abs().max())
        if dtype == "half":  # scales stored in half, the output rounded to half
            atol += 2.0 ** -11 * peak + float(np.spacing(np.float16(float(ref.abs().max()))))
        expected = ref.to(torch_dtype)

    packed, weight = packed_weight(ops.w4, weight_storage, prepack)
    sums = weight_sums(ops.w4, group_size, 4 * n4 if etvk_pitch else 8 * n8)
    out_sizes = sizes[:-1] + (n,)
    out, decode = io_output("t_output", out_sizes, storage, dtype)
    resources = [out,
                 io_input("t_input", ops.x, storage, dtype, rows=4 * m4),
                 Resource("buffer", nbytes=16 * m4 * k4, name="t_packed_int8_input"),
                 Resource("buffer", nbytes=16 * groups * m4, name="t_int8_input_sums"),
                 Resource("image", extent=(m4, 1, 1), fmt=fmt, name="t_int8_input_scales"),
                 Resource("image", extent=(m4, 1, 1), fmt="rgba8i", name="t_int8_input_zps"),
                 weight,
                 Resource("buffer", sums.reshape(-1), name="t_weight_sums"),
                 *scales_bias_sizes(ops, np_dtype, out_sizes, sizes)]
    before = []
    if prepack == "shader":
        before.append(prepack_step(ops.w4, weight_storage, resources, 6))
    before.append(Step(choose, (4, 5, 1, 11), struct.pack("<2i", QMIN, QMAX), {}, (1, m4, 1), (64, 1, 1)))
    if not gemv:  # pick_quantize_and_pack_4h4w_with_group_sums_global_wg_size: {0, 0, 0} at M == 1
        local = (2, 1, 32) if o2w32 else (4, 1, 16)
        before.append(Step(quant, (2, 3, 1, 4, 5, 11), b"", {3: math.ceil(group_size / 4)}, (groups, m4, 1), local))
    global_size, local_size = qw_geometry(gemv, n, m)
    spec = {3: int(ops.bias is not None), 4: math.ceil(group_size / 4), 5: groups, 6: n}
    item = np.dtype(np_dtype).itemsize
    params = row_params(sizes, n, ops, dtype, storage, weight_storage=weight_storage, prepack=prepack,
                        etvk_pitch=etvk_pitch)
    params["tolerance"] = atol
    if ref_8da4w_diff is not None:
        params["ref_8da4w_max_abs_diff"] = ref_8da4w_diff
    return Dispatch(op, variant, resources, b"", spec, global_size, local_size, 0, decode, expected, atol=atol,
                    bytes_moved=item * (batch * m * (k + n) + groups * n) + packed.nbytes + (0 if gemv else m * k),
                    macs=batch * m * n * k, before=before, bindings=declared_slots(gen, variant, 12), params=params)


def linear_dq8ca_q4gsw(gen: Codegen, shape=(37, 256), out_features: int = 64, group_size: int = 32, *,
                       dtype: str = "float", storage: str = "texture3d", weight_storage: str = "texture2d",
                       bias: bool = True, prepack: str = "host", etvk_pitch: bool = False,
                       etvk_batch: bool = False, seed: int = 0) -> Dispatch:
    """``et_vk.linear_dq8ca_q4gsw`` as the C++ runs it on a device with int8 dot product: the input's per-row int8
    quantization (choose_qparams_per_row, then quantize_and_pack_4h4w_with_group_sums) recorded before
    ``linear_dq8ca_q4gsw_tiled`` (M > 1), or ``linear_dq8ca_q4gsw_coop`` on the fp input (M == 1)."""
    return _dispatch(gen, OP, None, shape, out_features, group_size, dtype, storage, weight_storage, bias, prepack,
                     etvk_pitch, etvk_batch, seed)


def linear_dq8ca_q4gsw_tiled(gen: Codegen, shape=(37, 256), out_features: int = 64, group_size: int = 32, *,
                             dtype: str = "float", storage: str = "texture3d", weight_storage: str = "texture2d",
                             bias: bool = True, prepack: str = "host", etvk_pitch: bool = False,
                             etvk_batch: bool = False, seed: int = 0) -> Dispatch:
    """``linear_dq8ca_q4gsw_tiled_<storage>_<weight_storage>_<dtype>_zpint8`` (M > 1), one thread per 4 × 8
    output tile, int8 × int4 dot products per group; its input quantization recorded before it."""
    return _dispatch(gen, f"{OP}_tiled", False, shape, out_features, group_size, dtype, storage, weight_storage,
                     bias, prepack, etvk_pitch, etvk_batch, seed)
