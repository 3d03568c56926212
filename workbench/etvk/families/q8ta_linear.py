"""ET-VK's int8 linear ops: `q8ta_linear` (tiled GEMM), `q8ta_linear_gemv` (one row, 64 threads share K) and the
weight prepack both use, `pack_q8_linear_weight` — dispatched as their C++ does (Q8taLinear.cpp,
Q8taLinearGemv.cpp, ``prepack_quantized_linear_weight`` in QuantizedLinear.cpp).

What the C++ and the templates fix:

* input / output int8: ``q8ta_linear`` 4H4W (``q8ta_linear_check_packed_dim_info``: packed W block 4, outer H block
  4), ``q8ta_linear_gemv`` 4W (outer H block 1); K, the input's last dim, a multiple of 4 (``VK_CHECK_COND``).
* bindings: output, input, weight (``isampler2D``: the linear variants are generated for a texture2d weight only),
  weight sums (ivec4 buffer), weight scales (vec4), bias (vec4; a dummy when there is none), then two ``ivec4``
  UBOs, the WHCN sizes of output and input (``sizes_ubo``).
* push constants ``{float input_scale; int input_zp; float output_inv_scale; int output_zp}`` with
  ``output_inv_scale = 1.0f / output_scale``; spec constants ``apply_bias`` (3) and ``activation_type`` (4; relu 1).
* kernel name ``q8ta_linear`` / ``q8ta_linear_fallback`` (no int8 dot product) + ``_float`` (the scales' dtype).
* global size ``{ceil(N / 8), ceil(M / 4), 1}`` with ``pick_hw_square_wg_size``; gemv ``{ceil(N / 8), 1, 1}`` with
  local ``{1, 1, 64}``.
* the weight ``[N, K]`` int8 goes through ``pack_q8_linear_weight_texture2d`` into an ``rgba32i`` texture of
  ``N4 × K4`` texels, texel ``(n4, k4)`` = the 4 words of rows ``4·n4 .. +3`` (zero past N), columns ``4·k4 .. +3``.
  The workbench packs it in numpy by the same indexing (``prepack_weight``); the ``pack_q8_linear_weight`` family
  runs ET-VK's own packing shader against that numpy packing, exactly.
* weight sums ``weight.sum(1)`` (int32), scales and bias are padded to a multiple of 4 by ET-VK's export
  (patterns/quantized_linear.py). The shaders read TILE_N4 = 2 blocks of 4 per thread without a bound check, i.e.
  up to ``8·ceil(N / 8)`` entries; the workbench pads these three buffers to that (zeros) so the read stays inside
  them (robust buffer access is off); what lies past N is never written. The weight texture keeps ET-VK's extent
  (``N4 × K4``): with N4 odd the last thread's second ``texelFetch`` lands one texel past it — undefined in Vulkan
  without robust image access (lavapipe returns zeros) — and feeds only columns that are never written.

Batch: ET-VK's shaders have no term for dims beyond H — the global size and the indexing cover the output's last
two dims only (ET-VK's export calls M, ``input_shape[-2]``, the batch size and picks the gemv at M == 1). Leading
dims > 1 are refused with a ValueError; ``etvk_batch=True`` dispatches a ``[B, M, K]`` input exactly as the C++
would, so the result shows what ET-VK computes there (batch 0 only; later batches stay unwritten).

The reference is the shader's arithmetic in torch: int32 accumulation of int8 × int8, ``acc - input_zp · sum(w)``,
times ``float32(input_scale · weight_scale)``, plus bias, relu, ``round(y · inv_scale) + zp`` clamped — all in fp32,
so the comparison is exact. The float64 reference of ET-VK's own op (custom_ops_lib.py: dequantize, linear,
quantize) is measured beside it as the ``ref64_mismatch`` column (fp32 vs fp64 rounding: rare 1-LSB differences).
"""
from __future__ import annotations

import math
import struct

import numpy as np
import torch

from ..codegen import Codegen
from ..dispatch import Dispatch, Resource, create_local_wg_size, int8_layout, packed_weight_output, \
    pick_hw_square_wg_size
from ._linear import (M_PER_TILE, N_PER_TILE, int8_linear_bindings, linear_input, linear_operands, prepack_weight,
                      refuse_batch)

GEMV_WGS = 64


def reference(q_in: torch.Tensor, weight: torch.Tensor, w_scales: torch.Tensor, bias, in_scale: float, in_zp: int,
              out_scale: float, out_zp: int, relu: bool) -> torch.Tensor:
    """The shader's arithmetic (linear_fp_output_tile_int8_int8_compute.glslh, common.glslh's quantize_and_pack)."""
    acc = (q_in.to(torch.int64) @ weight.to(torch.int64).T).to(torch.int32)
    sums = weight.to(torch.int32).sum(1)
    adjusted = acc - in_zp * sums  # ivec4(-input_zp) * weight_sums + accum
    scale = torch.tensor(in_scale, dtype=torch.float32) * w_scales.to(torch.float32)  # float * vec4, fp32
    y = adjusted.to(torch.float32) * scale  # fma(VEC4_T(adjusted), scale, 0.0)
    if bias is not None:
        y = y + bias.to(torch.float32)
    if relu:
        y = torch.clamp_min(y, 0.0)
    inv_scale = torch.tensor(np.float32(1.0) / np.float32(out_scale))  # 1.0f / output_scale in the C++
    q = torch.round(y * inv_scale) + torch.tensor(float(out_zp), dtype=torch.float32)
    return torch.clamp(q, -128, 127).to(torch.int8)


def reference_fp64(q_in, weight, w_scales, bias, in_scale, in_zp, out_scale, out_zp, relu) -> torch.Tensor:
    """ET-VK's own reference of the op (custom_ops_lib.py's q8ta_linear), in float64."""
    x = (q_in.to(torch.float64) - in_zp) * in_scale
    y = x @ (weight.to(torch.float64) * w_scales.to(torch.float64)[:, None]).T
    if bias is not None:
        y = y + bias.to(torch.float64)
    if relu:
        y = torch.relu(y)
    return torch.clamp(torch.round(y / out_scale) + out_zp, -128, 127).to(torch.int8)


def _linear_dispatch(gen: Codegen, op: str, shape, out_features, *, weight, weight_scales, bias, relu, fallback,
                     etvk_batch, seed) -> Dispatch:
    sizes, k, m, lead, batch = linear_input(op, shape, f"{'Q8taLinear' if op == 'q8ta_linear' else 'Q8taLinearGemv'}"
                                                       f".cpp")
    if op == "q8ta_linear_gemv" and m != 1:
        raise ValueError(f"q8ta_linear_gemv computes one row (its shader reads input word k4 only; ET-VK's export "
                         f"picks it when input_shape[-2] == 1): expected M=1, given M={m} — use q8ta_linear")
    refuse_batch(op, lead, batch, etvk_batch,
                 f"global size from N and {'M' if op == 'q8ta_linear' else 'N'}, no term for leading dims")
    q_in, weight, n, weight_scales, bias = linear_operands(op, sizes, out_features, weight, weight_scales, bias, seed)
    in_scale, in_zp, out_zp = 0.05, 3, -5
    # the output scale from the float64 result so the outputs use most of int8
    y64 = ((q_in.to(torch.float64) - in_zp) * in_scale) @ (weight.to(torch.float64) * weight_scales.double()[:, None]).T
    if bias is not None:
        y64 = y64 + bias.double()
    out_scale = float(np.float32(max(float(y64.abs().max()), 1e-3) / 110.0))
    args = (q_in, weight, weight_scales, bias, in_scale, in_zp, out_scale, out_zp, relu)
    expected, ref64 = reference(*args), reference_fp64(*args)

    variant = f"{op}{'_fallback' if fallback else ''}_float"
    lay = int8_layout("4H4W" if op == "q8ta_linear" else "4W")
    out_sizes = sizes[:-1] + (n,)
    n4 = math.ceil(n / 4)
    texels = prepack_weight(weight.numpy())
    nchw_out = (1,) * (4 - len(out_sizes)) + out_sizes
    resources = [Resource("buffer", nbytes=4 * lay.num_words(nchw_out), name="t_packed_int8_output"),
                 *int8_linear_bindings(lay, q_in, texels, weight, weight_scales, bias, out_sizes)]
    push = struct.pack("<fifi", in_scale, in_zp, np.float32(1.0) / np.float32(out_scale), out_zp)
    spec = {3: int(bias is not None), 4: int(bool(relu))}
    if op == "q8ta_linear":
        global_size = (math.ceil(n / N_PER_TILE), math.ceil(m / M_PER_TILE), 1)
        local_size = pick_hw_square_wg_size(global_size)
    else:
        global_size, local_size = (math.ceil(n / N_PER_TILE), 1, 1), (1, 1, GEMV_WGS)
    decode = lambda raw: torch.from_numpy(np.asarray(lay.unpack(raw.view(np.int32), nchw_out))).reshape(out_sizes)
    mismatch64 = float((expected != ref64).double().mean())
    return Dispatch(op, variant, resources, push, spec, global_size, local_size, 0, decode, expected,
                    bytes_moved=q_in.numel() + batch * m * n + texels.nbytes + 3 * 16 * n4, macs=batch * m * n * k,
                    params={"shape": "x".join(map(str, sizes)) + f"->{n}", "layout": lay.name, "bias": bias is not None,
                            "relu": bool(relu), "ref64_mismatch": mismatch64})


def q8ta_linear(gen: Codegen, shape=(12, 64), out_features: int | None = 40, *, weight=None, weight_scales=None,
                bias=True, relu: bool = False, fallback: bool = False, etvk_batch: bool = False,
                seed: int = 0) -> Dispatch:
    """``add_q8ta_linear_node``: int8 input ``[M, K]`` (4H4W) × int8 per-channel weight ``[N, K]`` → int8 ``[M, N]``
    (4H4W); `fallback` is the variant ET-VK picks without int8 dot product. `weight` (int8 [N, K]),
    `weight_scales` ([N]) and `bias` ([N], True: random, False: none) may be given."""
    return _linear_dispatch(gen, "q8ta_linear", shape, out_features, weight=weight, weight_scales=weight_scales,
                            bias=bias, relu=relu, fallback=fallback, etvk_batch=etvk_batch, seed=seed)


def q8ta_linear_gemv(gen: Codegen, shape=(1, 64), out_features: int | None = 40, *, weight=None, weight_scales=None,
                     bias=True, relu: bool = False, fallback: bool = False, etvk_batch: bool = False,
                     seed: int = 0) -> Dispatch:
    """``add_q8ta_linear_gemv_node``: int8 input ``[1, K]`` (4W) → int8 ``[1, N]`` (4W), one work group of 64
    threads per 8 output channels, reducing K through shared memory."""
    return _linear_dispatch(gen, "q8ta_linear_gemv", shape, out_features, weight=weight, weight_scales=weight_scales,
                            bias=bias, relu=relu, fallback=fallback, etvk_batch=etvk_batch, seed=seed)


def pack_q8_linear_weight(gen: Codegen, shape=(40, 64), *, storage: str = "texture2d", weight=None,
                          seed: int = 0) -> Dispatch:
    """ET-VK's prepack of an int8 ``[N, K]`` linear weight (``prepack_quantized_linear_weight``, 8-bit):
    ``pack_q8_linear_weight_{texture2d,buffer}`` (buffer only past the device's texture limits), global
    ``{N4, K4, 1}`` with ``create_local_wg_size``, push constants ``sizes_pc_of(packed)`` (WHCN ``{4·N4, K4, 1, 1}``)
    and ``orig_sizes = {K, N}``. Checked exactly against the workbench's numpy packing (``prepack_weight``)."""
    if storage not in ("texture2d", "buffer"):
        raise ValueError(f"storage must be 'texture2d' or 'buffer', got {storage!r}")
    if weight is None:
        *lead, n, k = (int(s) for s in shape)
        if any(s != 1 for s in lead) or min(n, k) < 1:
            raise ValueError(f"pack_q8_linear_weight: the weight is [N, K] (leading sizes 1), given {tuple(shape)}")
        if k % 4:
            raise ValueError(f"pack_q8_linear_weight: K must be a multiple of 4 (VK_CHECK_COND(K % 4 == 0) in "
                             f"QuantizedLinear.cpp); got K={k}")
        weight = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=torch.Generator().manual_seed(seed))
    weight = torch.as_tensor(weight)
    if weight.dtype != torch.int8 or weight.dim() != 2:
        raise ValueError(f"pack_q8_linear_weight: an int8 [N, K] weight, given {weight.dtype} {tuple(weight.shape)}")
    n, k = weight.shape
    texels = prepack_weight(weight.numpy())  # raises for K % 4
    k4, n4 = texels.shape[:2]
    staged = np.ascontiguousarray(weight.numpy()).view(np.int32).reshape(-1)  # the int8 staging buffer, int[] view
    out, decode = packed_weight_output(k4, n4, storage)
    resources = [out, Resource("buffer", staged, name="t_int8_weight")]
    push = struct.pack("<4i2i", 4 * n4, k4, 1, 1, k, n)
    global_size = (n4, k4, 1)
    return Dispatch("pack_q8_linear_weight", f"pack_q8_linear_weight_{storage}", resources, push, {}, global_size,
                    create_local_wg_size(global_size), 0, decode, torch.from_numpy(texels),
                    bytes_moved=weight.numel() + texels.nbytes,
                    params={"shape": f"{n}x{k}", "storage": storage})
