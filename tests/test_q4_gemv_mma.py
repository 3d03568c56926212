"""The 4-bit GEMV's tensor-core build (Q4GemvSpec(dequant="mma")): what runs without cooperative matrices — its
options and refusals, the packing, the shader's widening and slot bookkeeping as a host model checked against
torchao's 8da4w reference, the SPIR-V from the workbench's glslang, the device refusal. Correctness on a GPU with
VK_KHR_cooperative_matrix: tools/gpu_q4_mma.py (lavapipe's Mesa 22.3 has none)."""
from types import SimpleNamespace

import numpy as np
import pytest

from workbench.kernels import q4_gemv as Q
from workbench.kernels.q4_gemv import Q4GemvSpec
from workbench.toolchain import glslang

MMA = {"dequant": "mma", "layout": "mma", "act_dtype": "int8", "scale_dtype": "half"}
# (N, K, group, M, mma_n, local_x, unroll): N not a multiple of 32 rows, K steps not of the batch, of the subgroups
# or of unroll, groups of 64 / 128 (a group spans K steps), tokens that leave columns unused (3 of 8), 16 tokens
AWKWARD = [(100, 224, 32, 1, 8, 64, 2), (70, 320, 64, 3, 8, 128, 4), (33, 96, 32, 16, 16, 32, 1),
           (40, 512, 128, 2, 16, 256, 8), (1, 32, 32, 1, 8, 512, 1), (257, 1056, 32, 5, 16, 128, 4)]
HOPPER = [("KHR", 16, 16, 32, "sint8", "sint32"), ("KHR", 16, 8, 32, "sint8", "sint32"),
          ("KHR", 16, 8, 16, "float16", "float32"), ("KHR", 16, 8, 16, "float16", "float16"),
          ("KHR", 16, 16, 16, "float16", "float32"), ("KHR", 16, 16, 16, "float16", "float16")]


def _spec(n, k, g, m=1, mma_n=8, local_x=128, unroll=4, **kw):
    return Q4GemvSpec(n, k, g, m=m, mma_n=mma_n, local_x=local_x, unroll=unroll, **MMA, **kw)


def _fake(entries, subgroup=32, features=None, name="Fake GPU"):
    rows = [{"extension": ext, "M": m, "N": n, "K": k, "A": a, "B": a, "C": c, "D": c, "scope": 3}
            for ext, m, n, k, a, c in entries]
    feats = {"cooperative_matrix_khr": bool(rows), "shader_int8": True, "shader_float16": True, **(features or {})}
    return SimpleNamespace(info=SimpleNamespace(name=name, subgroup_size=subgroup, features=feats),
                           cooperative_matrix_properties=lambda: rows, withheld={})


# ------------------------------------------------------------------------------------------------- options, refusals
def test_the_build_and_its_geometry():
    spec = _spec(14336, 4096, 32)
    assert spec.shader == "q4_gemv_mma" and spec.variant == "q4_gemv_m1_mma16x8x32_ks4_u4"
    assert (spec.slots, spec.batch_steps, spec.batches, spec.subgroups_k) == (8, 8, 16, 4)
    assert spec.work_groups == 14336 // 32 and spec.local_size == (128, 1, 1) and spec.rows_per_group == 32
    assert spec.defines == {"M": 1, "TN": 8, "KS": 4, "U": 4, "S": 8, "SPB": 8, "MEM_UINT": False, "DIAG": 0}
    # the weight, the scale tiles (no repeats at M = 1), the masked columns, token parameters, R[n]; the output
    assert spec.bytes_read() == 14336 * 4096 // 2 + 14336 * 128 * 2 + 4096 * 8 + 8 + 4 * 14336
    assert spec.bytes_written() == 4 * 14336
    assert spec.params()["mma_n"] == 8 and spec.weight_bytes_per_step() == 64
    assert _spec(64, 256, 32, mma_mem="uint").variant == "q4_gemv_m1_mma16x8x32_ks4_u4_w32"
    m4 = _spec(4096, 4096, 64, m=4, mma_n=16, local_x=512)
    assert (m4.slots, m4.batch_steps, m4.batches) == (4, 8, 16)
    assert m4.scale_bytes() == 128 * 16 * 32 * 16 * 2  # 4 tokens repeat each group's scale
    assert m4.with_shape(100, 256).n == 100
    assert [_spec(64, 256, 32, diagnostic=d).variant.split("_u4")[1] for d in (2, 5, 9)] == \
        ["_diag_weights", "_diag_cached", "_diag_mma"]


@pytest.mark.parametrize("options, match", [
    ({"act_dtype": "half"}, "tensor-core build is"),
    ({"layout": "tiled"}, "tensor-core build is"),
    ({"threads_k": 64}, "threads_k belong to the other builds"),
    ({"x_regs": True}, "x_regs belong"),
    ({"mma_n": 32}, "mma_n must be one of"),
    ({"mma_mem": "int8"}, "mma_mem must be one of"),
    ({"m": 9}, "1..mma_n tokens"),
    ({"local_x": 96}, "local_x must be one of"),
    ({"unroll": 3}, "unroll must be one of"),
    ({"diagnostic": 3}, "diagnostic 0, 2"),
    ({"group_size": 16}, "multiple of 32"),
    ({"k": 96, "group_size": 64}, "K must be a multiple of group_size"),
])
def test_refusals_name_what_was_expected_and_given(options, match):
    base = dict(n=64, k=256, group_size=32, m=1, mma_n=8, local_x=128, unroll=2, **MMA)
    with pytest.raises(ValueError, match=match) as info:
        Q4GemvSpec(**{**base, **options})
    assert "\n" not in str(info.value)


def test_the_other_builds_keep_their_limits():
    with pytest.raises(ValueError, match="mma_n and mma_mem belong to dequant='mma'"):
        Q4GemvSpec(64, 256, mma_n=16)
    with pytest.raises(ValueError, match="mma_mem belong"):
        Q4GemvSpec(64, 256, mma_mem="uint")
    with pytest.raises(ValueError, match="tensor-core build"):
        Q4GemvSpec(64, 256, layout="mma")
    with pytest.raises(ValueError, match="local_x must be one of"):  # 512 threads: the tensor-core build's only
        Q4GemvSpec(64, 256, local_x=512)
    assert Q4GemvSpec(64, 256).params()["mma_n"] == 8


def test_device_refusal_on_this_device_is_one_line(device):
    reason = Q.mma_unsupported_reason(device)
    if reason is None:
        pytest.skip(f"{device.info.name} has int8 KHR cooperative matrices: tools/gpu_q4_mma.py checks the build")
    spec = _spec(100, 224, 32)
    with pytest.raises(ValueError, match="VK_KHR_cooperative_matrix|cooperative matrix|needs") as info:
        Q.check(device, spec)
    assert "\n" not in str(info.value) and device.info.name in str(info.value)
    with pytest.raises(ValueError, match="needs"):
        Q.choose_mma_n(device)


def test_device_shapes_chosen_from_the_property_list():
    hopper = _fake(HOPPER, name="H200-like")
    assert Q.mma_sizes(hopper) == [(16, 8, 32), (16, 16, 32)]
    assert Q.mma_unsupported_reason(hopper) is None and Q.mma_unsupported_reason(hopper, 16) is None
    assert (Q.choose_mma_n(hopper, 1), Q.choose_mma_n(hopper, 8), Q.choose_mma_n(hopper, 9)) == (8, 8, 16)
    with pytest.raises(ValueError, match="N >= 17"):
        Q.choose_mma_n(hopper, 17)
    rdna = _fake([("KHR", 16, 16, 16, "sint8", "sint32"), ("KHR", 16, 16, 16, "float16", "float32")], name="RDNA")
    assert "16 x 8 x 32" in Q.mma_unsupported_reason(rdna) and "(16, 16, 16)" in Q.mma_unsupported_reason(rdna)
    assert "64 lanes" in Q.mma_unsupported_reason(_fake(HOPPER, subgroup=64))
    assert "shader_int8" in Q.mma_unsupported_reason(_fake(HOPPER, features={"shader_int8": False}))
    assert "does not offer it" in Q.mma_unsupported_reason(_fake([]))
    no_f16 = _fake([e for e in HOPPER if e[5] != "float16"])
    assert "float16 accumulator of 16 x 8" in Q.mma_unsupported_reason(no_f16)
    withheld = _fake([])
    withheld.withheld = {"cooperative_matrix_khr": "held back: the validation layer 1.3.239 predates it"}
    assert "held back" in Q.mma_unsupported_reason(withheld)


# ------------------------------------------------------------------------------------------------------- the packing
def test_weights_pack_into_32_row_tiles_and_back():
    rng = np.random.default_rng(0)
    q = rng.integers(-8, 8, (70, 96)).astype(np.int8)
    words = Q.pack_weights_mma(q)
    assert words.shape == (3, 3, 32, 4)
    assert (words[0, 1, 5] == Q.pack_weights(q)[5, 4:8]).all()
    assert (words[2, :, 6:] == 0x88888888).all()  # rows past N: zero weights
    assert (Q.unpack_weights_mma(words, 70, 96) == q).all()
    with pytest.raises(ValueError, match="K a multiple of 32, got K=40"):
        Q.pack_weights_mma(np.zeros((4, 40), np.int8))


def test_widening_gives_16q_in_the_staged_order():
    rng = np.random.default_rng(1)
    q = rng.integers(-8, 8, (32, 64)).astype(np.int8)
    staged = Q.widen_mma(Q.pack_weights_mma(q))  # [1, 2, 32, 32]
    want = 16 * q.reshape(32, 2, 32)[:, :, Q.MMA_K_PERM].astype(np.int64)
    assert (staged[0].swapaxes(0, 1).astype(np.int64) == want).all()
    assert sorted(Q.MMA_K_PERM) == list(range(32)) and list(Q.MMA_K_PERM[:8]) == [0, 2, 4, 6, 1, 3, 5, 7]


def test_activation_columns_hold_each_group_in_its_slot():
    spec = _spec(8, 320, 64, m=3, mma_n=8)  # slots 2: groups 0, 2, 4 in columns 0..2, groups 1, 3 in 3..5
    x = np.arange(3 * 320).reshape(3, 320) % 251 - 125
    b = Q.pack_activations_mma(x.astype(np.int8), spec).view(np.int8).reshape(10, 8, 32)
    for step in range(10):
        slot = (step * 32 // 64) % 2
        for j in range(8):
            want = x[j % 3, 32 * step + Q.MMA_K_PERM].astype(np.int8) if j // 3 == slot and j < 6 else 0
            assert (b[step, j] == want).all(), (step, j)
    with pytest.raises(ValueError, match=r"shape \(3, 320\)"):
        Q.pack_activations_mma(np.zeros((2, 320), np.int8), spec)


def test_scale_tiles_repeat_a_group_per_token():
    spec = _spec(40, 512, 128, m=2, mma_n=16)  # 4 groups, slots 8: one batch, columns 2s, 2s + 1 = group s
    s = np.arange(40 * 4, dtype=np.float32).reshape(40, 4) / 8
    tiles = Q.pack_scales_mma(s, spec).view(np.float16).reshape(2, 1, 32, 16).astype(np.float32)
    assert (tiles[0, 0, 3, :8] == np.repeat(s[3], 2)).all() and (tiles[0, 0, :, 8:] == 0).all()
    assert (tiles[1, 0, 8:] == 0).all() and (tiles[1, 0, 7, :8] == np.repeat(s[39], 2)).all()
    with pytest.raises(ValueError, match="scales of shape"):
        Q.pack_scales_mma(s[:, :2], spec)


# ------------------------------------------------------------------------------------------ the numerics, on the host
@pytest.mark.parametrize("case", AWKWARD, ids=[f"n{c[0]}-k{c[1]}-g{c[2]}-m{c[3]}-N{c[4]}" for c in AWKWARD])
def test_host_model_of_the_build_matches_8da4w(case):
    n, k, g, m, mma_n, local_x, unroll = case
    spec = _spec(n, k, g, m=m, mma_n=mma_n, local_x=local_x, unroll=unroll)
    x, q, scales = Q.random_problem(spec, seed=n)
    x_q, s_x, zp = Q.quantize_activations_int8(x)
    model = Q.mma_model(x_q, q, scales, spec)
    got = s_x[:, None] * (model - zp[:, None] * Q.row_constants(q, scales, g)[None].astype(np.float64))
    want, tolerance = Q.expected(spec, x, q, scales)
    assert np.abs(got - want).max() <= tolerance
    assert tolerance < 1e-3 * np.abs(want).max()  # a bound that still catches a wrong group or token


def test_host_model_catches_a_wrong_k_order(monkeypatch):
    spec = _spec(64, 256, 32)
    x, q, scales = Q.random_problem(spec, seed=2)
    x_q, _, _ = Q.quantize_activations_int8(x)
    right = Q.mma_model(x_q, q, scales, spec)
    monkeypatch.setattr(Q, "MMA_K_PERM", np.arange(32))  # the activations unpermuted: weights and x disagree
    assert np.abs(Q.mma_model(x_q, q, scales, spec) - right).max() > 1e-2 * np.abs(right).max()


# ---------------------------------------------------------------------------------------------------- the SPIR-V
BUILDS = [{}, {"m": 3}, {"m": 16, "mma_n": 16}, {"mma_n": 16, "unroll": 8, "local_x": 512},
          {"diagnostic": 2}, {"diagnostic": 5}, {"diagnostic": 9}, {"mma_mem": "uint"},
          {"mma_mem": "uint", "diagnostic": 9}, {"mma_mem": "uint", "m": 5, "mma_n": 16}]


@pytest.mark.skipif(not glslang.is_set_up(), reason="the workbench's glslang is not set up (GL_KHR_cooperative_matrix "
                    "needs it: python -m workbench.toolchain.glslang setup)")
@pytest.mark.parametrize("options", BUILDS, ids=["-".join(f"{k}{v}" for k, v in o.items()) or "default"
                                                  for o in BUILDS])
def test_spirv_compiles_and_multiplies_on_cooperative_matrices(options):
    from workbench.toolchain.shaders import compile_shader
    spec = _spec(4096, 4096, 32, **options)
    ops = glslang.opcodes(compile_shader(spec.shader, defines=spec.defines).code)
    assert (glslang.OP_COOPMAT_MULADD_KHR in ops) == (spec.diagnostic != 2)
