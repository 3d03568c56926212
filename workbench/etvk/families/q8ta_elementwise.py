"""ET-VK's `q8ta_binary` and `q8ta_unary` families (Q8taBinary.cpp, Q8taUnary.cpp; templates q8ta_binary.glsl,
q8ta_unary.glsl): per-tensor int8 in, dequantize, one fp32 op per element, requantize with the output's qparams.

The two share everything but the operand count, so they live in one module:

* kernel ``"q8ta_" + op_name`` + the output's storage suffix; the C++ registers ``et_vk.q8ta_add`` (op ``add``)
  and ``et_vk.q8ta_relu`` (op ``relu``), and the YAMLs generate ``q8ta_add_buffer`` / ``q8ta_relu_buffer`` only
  (buffer storage, no texture variants);
* bindings: t_out, t_in_a[, t_in_b], then one BufferMetadata UBO each in the same order;
* push constants, as the shader's Block declares them: in_a scale (float), zp (int)[, in_b scale, zp],
  1 / out_scale (float, ``1.0f / extract_scalar<float>``), out zp (int);
* spec constants 3.. : hashed layouts of out, in_a[, in_b], then ``create_block_config_for_tensor(out)``
  (inner = out's packed dim, outer = H if that is W else W);
* ``pick_linear_global_wg_with_block_config`` (one thread per 4×4 block of the output) and
  ``pick_square_local_wg_with_block_config`` (64×1×1 for a linear dispatch).

Every participating tensor must share the output's packed dim and packed-dim block size (the C++'s VK_CHECK_CONDs):
{4W4C, 4C1W, 4C} mix among themselves (packed C), {4W, 4H4W} among themselves (packed W).

Two things the C++ does that the shader does not follow, and what the workbench does about them:

* q8ta_add appends ``alpha`` (float) as a 7th push constant (28 B), but q8ta_binary.glsl's Block declares 6 fields
  (24 B) and OPERATOR is ``X + Y``: alpha never reaches the GPU. ET-VK's pipeline layout takes the C++'s 28 B; the
  workbench's takes the shader's 24 B, so only those are pushed. ``alpha`` other than 1 is refused here (ET-VK's own
  reference, custom_ops_lib.q8ta_add_impl, computes ``a + alpha * b``; the GPU computes ``a + b``).
* resize_q8ta_binary_node sizes the output as the broadcast of the inputs, but the shader indexes both inputs with
  the output's tensor index and their own strides (no size-1 handling, and a whole int8x4 word per packed-dim
  step): only equal shapes are correct, so the workbench refuses broadcasting with the shapes it was given.

Reference, as the shader computes it: ``vec4(q - zp) * scale`` in fp32, the op in fp32, ``round(v * inv_scale) + zp``
clamped to int8, torch rounding half to even. GLSL's ``round`` leaves the direction of .5 to the implementation and
the compiler may contract ``(q - zp) * scale + other`` into one FMA; either moves a value on a .5 boundary by 1 LSB.
So a Dispatch allows 1 LSB on at most 1% of elements (the default qparams make ties rare), as q8ta_pixel_shuffle's
requantize does. Lavapipe rounds half to even and does not contract: there the tests demand exact equality, tie-heavy
qparams (sums of quarters requantized to 1.0) included.
"""
from __future__ import annotations

import struct

import numpy as np
import torch

from ..codegen import Codegen
from ..dispatch import (Dispatch, Resource, block_config, int8_decoder, int8_layout, linear_blocks, nchw_sizes,
                        packed_words, random_int8, square_local)

# op name → (template, the fp32 op the template's OPERATOR spells), for the ops ET-VK's C++ registers at cff6f4dd32
BINARY_OPS = {"add": lambda a, b: a + b}
UNARY_OPS = {"relu": lambda x: torch.clamp_min(x, 0.0)}


def _f32(v: float) -> float:
    return float(np.float32(v))


def _variant(gen: Codegen, template: str, op: str, ops: dict, storage: str) -> str:
    generated = gen.variants_of(template)
    if op not in ops:
        raise ValueError(f"{template}: op {op!r} is not one ET-VK's C++ dispatches; expected one of "
                         f"{sorted(ops)} (this checkout's {template} generates {generated or 'nothing'})")
    if storage != "buffer":
        raise ValueError(f"{template}: ET-VK generates buffer variants only (the int8x4 layouts are buffers), "
                         f"expected storage 'buffer', got {storage!r}")
    name = f"q8ta_{op}_buffer"
    if name not in generated:
        raise ValueError(f"{template}: this checkout generates {generated or 'no variants'}, not {name!r}")
    return name


def _same_packing(out, *inputs) -> None:
    for lay in inputs:
        if lay.packed_dim != out.packed_dim or lay.packed_dim_block_size != out.packed_dim_block_size:
            raise ValueError(f"every tensor must share the output's packed dim and block size (Q8taBinary.cpp / "
                             f"Q8taUnary.cpp VK_CHECK_COND): output {out.name} is {out!r}, input {lay.name} is "
                             f"{lay!r}")


def _out_block_config(out) -> int:
    """``create_block_config_for_tensor(graph, out)``."""
    return block_config(out.packed_dim, 1 if out.packed_dim == 0 else 0)


def _fp32_dequantize(q: torch.Tensor, scale: float, zp: int) -> torch.Tensor:
    """``unpack_and_dequantize``: ``vec4(q - zp) * scale``, all fp32."""
    return (q.to(torch.int32) - zp).to(torch.float32) * torch.tensor(_f32(scale), dtype=torch.float32)


def _fp32_requantize(x: torch.Tensor, inv_scale: float, zp: int) -> torch.Tensor:
    """``quantize_and_pack``: ``clamp(ivec4(round(v * inv_scale) + zp), -128, 127)``."""
    t = torch.round(x * torch.tensor(inv_scale, dtype=torch.float32)) + zp
    return torch.clamp(t, -128, 127).to(torch.int8)


def _params(sizes, **more) -> dict:
    return {"shape": "x".join(map(str, sizes)), **more}


def q8ta_binary(gen: Codegen, shape=(2, 13, 5, 7), *, op: str = "add", other_shape=None, in_layout: str = "4W4C",
                other_layout: str | None = None, out_layout: str | None = None, storage: str = "buffer",
                alpha: float = 1.0, a_qparams=(0.0473, 3), b_qparams=(0.0391, -5), out_qparams=(0.0617, -2),
                seed: int = 0) -> Dispatch:
    """``add_q8ta_binary_node`` (Q8taBinary.cpp): ``out = requant(op(dequant(a), dequant(b)))``, one thread per 4×4
    block of the output. Layouts default to ``in_layout``; qparams are (scale, zero point)."""
    variant = _variant(gen, "q8ta_binary", op, BINARY_OPS, storage)
    sizes = nchw_sizes(shape)
    b_sizes = sizes if other_shape is None else nchw_sizes(other_shape)
    if b_sizes != sizes:
        raise ValueError(f"q8ta_binary: inputs of different shapes, {sizes} and {b_sizes}: the C++ sizes the output "
                         f"as their broadcast, but the shader reads both with the output's index (no broadcasting); "
                         f"expected equal shapes")
    if float(alpha) != 1.0:
        raise ValueError(f"q8ta_binary: alpha {alpha}: the C++ pushes alpha, but q8ta_binary.glsl neither declares "
                         f"nor uses it (OPERATOR 'X + Y'), so the GPU computes a + b; expected alpha 1.0")
    a_lay = int8_layout(in_layout)
    b_lay = int8_layout(other_layout or in_layout)
    out = int8_layout(out_layout or in_layout)
    _same_packing(out, a_lay, b_lay)
    (sa, za), (sb, zb), (so, zo) = a_qparams, b_qparams, out_qparams
    qa, qb = random_int8(sizes, seed), random_int8(sizes, seed + 1)
    inv = _f32(np.float32(1.0) / np.float32(so))
    expected = _fp32_requantize(BINARY_OPS[op](_fp32_dequantize(qa, sa, za), _fp32_dequantize(qb, sb, zb)), inv, zo)
    push = struct.pack("<fififi", sa, za, sb, zb, inv, zo)  # + alpha in the C++: see the docstring
    cfg = _out_block_config(out)
    global_size = linear_blocks(sizes, cfg)
    resources = [Resource("buffer", nbytes=4 * out.num_words(sizes), name="t_out"),
                 Resource("buffer", packed_words(a_lay, qa), name="t_in_a"),
                 Resource("buffer", packed_words(b_lay, qb), name="t_in_b"),
                 Resource("ubo", out.buffer_metadata(sizes), name="out_meta"),
                 Resource("ubo", a_lay.buffer_metadata(sizes), name="in_a_meta"),
                 Resource("ubo", b_lay.buffer_metadata(sizes), name="in_b_meta")]
    spec = {3: out.spec_constant(), 4: a_lay.spec_constant(), 5: b_lay.spec_constant(), 6: cfg}
    return Dispatch("q8ta_binary", variant, resources, push, spec, global_size, square_local(global_size, cfg), 0,
                    int8_decoder(out, sizes), expected, atol=1, max_mismatch=0.01,
                    bytes_moved=4 * (a_lay.num_words(sizes) + b_lay.num_words(sizes) + out.num_words(sizes)),
                    params=_params(sizes, op=op, in_layout=a_lay.name, other_layout=b_lay.name, out_layout=out.name))


def q8ta_unary(gen: Codegen, shape=(2, 13, 5, 7), *, op: str = "relu", in_layout: str = "4W4C",
               out_layout: str | None = None, storage: str = "buffer", in_qparams=(0.0473, 3),
               out_qparams=(0.0391, -100), seed: int = 0) -> Dispatch:
    """``add_q8ta_unary_node`` (Q8taUnary.cpp): ``out = requant(op(dequant(x)))``, one thread per 4×4 block."""
    variant = _variant(gen, "q8ta_unary", op, UNARY_OPS, storage)
    sizes = nchw_sizes(shape)
    inp = int8_layout(in_layout)
    out = int8_layout(out_layout or in_layout)
    _same_packing(out, inp)
    (si, zi), (so, zo) = in_qparams, out_qparams
    q = random_int8(sizes, seed)
    inv = _f32(np.float32(1.0) / np.float32(so))
    expected = _fp32_requantize(UNARY_OPS[op](_fp32_dequantize(q, si, zi)), inv, zo)
    push = struct.pack("<fifi", si, zi, inv, zo)
    cfg = _out_block_config(out)
    global_size = linear_blocks(sizes, cfg)
    resources = [Resource("buffer", nbytes=4 * out.num_words(sizes), name="t_out"),
                 Resource("buffer", packed_words(inp, q), name="t_in"),
                 Resource("ubo", out.buffer_metadata(sizes), name="out_meta"),
                 Resource("ubo", inp.buffer_metadata(sizes), name="in_meta")]
    spec = {3: out.spec_constant(), 4: inp.spec_constant(), 5: cfg}
    return Dispatch("q8ta_unary", variant, resources, push, spec, global_size, square_local(global_size, cfg), 0,
                    int8_decoder(out, sizes), expected, atol=1, max_mismatch=0.01,
                    bytes_moved=4 * (inp.num_words(sizes) + out.num_words(sizes)),
                    params=_params(sizes, op=op, in_layout=inp.name, out_layout=out.name))
