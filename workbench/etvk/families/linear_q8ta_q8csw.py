"""ET-VK's ``linear_q8ta_q8csw_tiled``: int8 activations (per-tensor) × int8 per-channel symmetric weights → float
output, the shader ``add_linear_qa_qw_node`` dispatches (QuantizedLinear.cpp) for ``et_vk.linear_q8ta_q8csw`` when
the device has the int8 dot product and the input is statically quantized.

What the C++ and the template fix:

* the graph: ``quantized_linear_impl`` quantizes the float input into a 4H4W int8 buffer
  (``add_quantize_and_pack_4h4w_node``, not dispatched here: the workbench hands the shader the int8 input) and
  prepacks the ``[N, K]`` weight with ``pack_q8_linear_weight`` (the ``pack_q8_linear_weight`` family, texture2d: the
  template is generated for a texture2d weight only). ``VK_CHECK_COND(K % 4 == 0)``.
* kernel name ``linear_q8ta_q8csw_tiled`` + output storage (``texture3d`` | ``buffer``) + input storage (``buffer``)
  + weight storage (``texture2d``) + ``_float``.
* bindings: output (float, vec4 per texel), int8 input (ivec4 buffer), weight (``isampler2D``), weight sums (ivec4),
  weight scales (vec4), bias (vec4; a dummy when there is none), then the ``ivec4`` UBOs ``sizes_ubo(output)``,
  ``sizes_ubo(packed_int_input)`` (WHCN).
* push constants ``{float input_scale; int input_zp}``; spec constant ``apply_bias`` (3).
* global ``{ceil(N / 8), ceil(M / 4), 1}`` (``quantized_linear_global_wg_size``: "q8ta_q8csw_tiled" → 8 columns
  per tile), local ``pick_hw_square_wg_size``.
* output indexing: texel ``(n4, m, 0)`` of the texture, or vec4 ``m · N4 + n4`` of the buffer. Full 4-row tiles are
  stored by ``write_output_tile_no_checks``, which checks neither M nor N: with TILE_N4 = 2 and N4 odd the last
  thread also stores texel ``n4 = N4`` (outside the texture: dropped on the devices tried; undefined in Vulkan
  without robust image access).

Findings (buffer output): ET-VK's float buffer tensors are contiguous (``calculate_packed_dim_info``: a
width-packed buffer has block 1, align 1), so element ``(m, n)`` lives at float ``m · N + n``; the shader's vec4
``m · N4 + n4`` matches that only when N is a multiple of 4. With N % 4 != 0 the rows land shifted (smallest:
``shape=(2, 4), out_features=3, storage="buffer"``). With N4 odd (N = 4, 12, 20 …), a full tile's extra store
``n4 = N4`` lands on row m + 1's first texel (racing with the thread that owns it) and, for the last full row, one
vec4 past the tensor; the output buffer here has 16 bytes of room past ET-VK's size so that store stays inside it.

Batch: the shader has no term for dims beyond H (z = 0 in the texture, no batch offset in the input index): leading
dims > 1 are refused with a ValueError; ``etvk_batch=True`` dispatches a ``[B, M, K]`` input as the C++ would, the
result shows what ET-VK computes (batch 0 only).

Reference: the shader's arithmetic in torch — int32 accumulation, ``acc - input_zp · sum(w)``,
``fma(float(adjusted), float32(input_scale · weight_scale), 0)`` (one rounding: the product), then ``+ bias`` as its
own fp32 add — so the comparison is exact. A driver may fuse that multiply and add (nothing is ``precise``): the
Dispatch allows exactly the elements where the fused result differs, by at most that difference (lavapipe does
not fuse; the tests there ask for 0). ET-VK's own float64 reference (custom_ops_lib.py: dequantize_per_channel,
linear, + bias on the dequantized input) is beside it as the ``ref64_max_abs_diff`` column.
"""
from __future__ import annotations

import math
import struct

import numpy as np
import torch

from ..codegen import Codegen
from ..dispatch import Dispatch, Resource, int8_layout, pick_hw_square_wg_size
from ._linear import (M_PER_TILE, N_PER_TILE, int8_linear_bindings, linear_input, linear_operands, prepack_weight,
                      refuse_batch)

TEMPLATE = "linear_q8ta_q8csw_tiled"


def reference(q_in, weight, w_scales, bias, in_scale: float, in_zp: int, fused: bool = False) -> torch.Tensor:
    """The shader's fp32 arithmetic (linear_fp_output_tile_int8_int8_compute.glslh). `fused`: a driver that turns
    ``fma(a, b, 0) + bias`` (not ``precise``) into one fused multiply-add."""
    acc = (q_in.to(torch.int64) @ weight.to(torch.int64).T).to(torch.int32)
    adjusted = acc - in_zp * weight.to(torch.int32).sum(1)  # ivec4(-input_zp) * weight_sums + accum
    scale = torch.tensor(in_scale, dtype=torch.float32) * w_scales.to(torch.float32)
    if bias is not None and fused:  # a·b is exact in float64: one rounding of a·b + c
        return (adjusted.to(torch.float32).double() * scale.double() + bias.to(torch.float32).double()).float()
    y = adjusted.to(torch.float32) * scale  # fma(a, b, 0.0): one rounding, the product's
    if bias is not None:
        y = y + bias.to(torch.float32)
    return y


def reference_fp64(q_in, weight, w_scales, bias, in_scale: float, in_zp: int) -> torch.Tensor:
    x = (q_in.to(torch.float64) - in_zp) * in_scale
    y = x @ (weight.to(torch.float64) * w_scales.to(torch.float64)[:, None]).T
    return y + bias.to(torch.float64) if bias is not None else y


def check_template(gen: Codegen, variant: str, template: str, since: str = "") -> None:
    """A clear error when the checkout's revision has no such variant (older or newer than the conventions here)."""
    if gen is not None and variant not in gen.variants():
        have = [v for v in gen.variants() if v.startswith(template)]
        advice = (f"use a revision at or after {since}" if since else
                  "the workbench's conventions for it were read from cff6f4dd32")
        raise ValueError(f"{template}: the checkout ({gen.source.label}) has no shader variant {variant!r}"
                         f"{' (added in ' + since + ')' if since else ''}; its variants of {template}: "
                         f"{have or 'none'} — {advice}")


def linear_q8ta_q8csw_tiled(gen: Codegen, shape=(12, 64), out_features: int | None = 40, *, storage: str = "texture3d",
                            weight=None, weight_scales=None, bias=True, etvk_batch: bool = False,
                            seed: int = 0) -> Dispatch:
    """``add_linear_qa_qw_node``: int8 input ``[M, K]`` (4H4W buffer) × int8 per-channel weight ``[N, K]`` → float
    ``[M, N]`` in a width-packed ``texture3d`` (``storage="texture3d"``) or contiguous ``buffer``. `weight` (int8
    [N, K]), `weight_scales` ([N]) and `bias` ([N]; True: random, False: none) may be given."""
    op = TEMPLATE
    if storage not in ("texture3d", "buffer"):
        raise ValueError(f"{op}: the output storage is 'texture3d' or 'buffer' (the template's two variants), "
                         f"got {storage!r}")
    sizes, k, m, lead, batch = linear_input(op, shape, "quantized_linear_impl, QuantizedLinear.cpp")
    refuse_batch(op, lead, batch, etvk_batch, "global size from N and M, texel z = 0, no batch term in the input "
                                              "index")
    q_in, weight, n, weight_scales, bias = linear_operands(op, sizes, out_features, weight, weight_scales, bias, seed)
    variant = f"{op}_{storage}_buffer_texture2d_float"
    check_template(gen, variant, op)

    in_scale, in_zp = float(np.float32(0.05)), 3
    expected = reference(q_in, weight, weight_scales, bias, in_scale, in_zp)
    # the tolerance: exactly what a driver that fuses the bias add would give (none where both agree; lavapipe
    # does not fuse, the tests there ask for 0)
    other = reference(q_in, weight, weight_scales, bias, in_scale, in_zp, fused=True)
    differ = (other != expected)
    ref64 = reference_fp64(q_in, weight, weight_scales, bias, in_scale, in_zp)

    lay = int8_layout("4H4W")
    out_sizes = sizes[:-1] + (n,)
    n4 = math.ceil(n / 4)
    texels = prepack_weight(weight.numpy())
    if storage == "texture3d":
        out = Resource("image", extent=(n4, m, batch), fmt="rgba32f", name="t_output")
        decode = lambda tex: torch.from_numpy(
            np.asarray(tex, dtype=np.float32).reshape(batch, m, 4 * n4)[..., :n].copy()).reshape(out_sizes)
    else:
        # ET-VK's tensor: batch·M·N floats, contiguous; 16 bytes more hold the extra store past it (see above)
        out = Resource("buffer", nbytes=4 * batch * m * n + 16, name="t_output")
        decode = lambda raw: torch.from_numpy(raw.view(np.float32)[:batch * m * n].copy()).reshape(out_sizes)
    resources = [out, *int8_linear_bindings(lay, q_in, texels, weight, weight_scales, bias, out_sizes)]
    push = struct.pack("<fi", in_scale, in_zp)
    global_size = (math.ceil(n / N_PER_TILE), math.ceil(m / M_PER_TILE), 1)
    return Dispatch(op, variant, resources, push, {3: int(bias is not None)}, global_size,
                    pick_hw_square_wg_size(global_size), 0, decode, expected,
                    atol=float((other - expected).abs().max()) if differ.any() else 0.0,
                    max_mismatch=float(differ.double().mean()) if differ.any() else 0.0,
                    bytes_moved=q_in.numel() + 4 * batch * m * n + texels.nbytes + 3 * 16 * n4,
                    macs=batch * m * n * k,
                    params={"shape": "x".join(map(str, sizes)) + f"->{n}", "storage": storage,
                            "bias": bias is not None,
                            "ref64_max_abs_diff": float((expected.double() - ref64).abs().max())})
