"""ET-VK's 8-bit dynamically quantized activation × 4-bit group-wise weight linear
(workbench.etvk.families.linear_dq8ca_q4gsw) against torch / torchao on the device, from a checkout; the two ET-VK
bugs it shows pinned at their smallest shapes; its refusals and its reference without a checkout."""
import os

import pytest
import torch

from workbench.etvk.families import KERNELS, takes
from workbench.etvk.families.linear_dq8ca_q4gsw import torchao_per_token, weight_sums
from workbench.etvk.families.linear_q4gsw_shared import dequantized
from workbench.kernels.q4_gemv import quantize_int4

CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set: ET-VK's dq8ca templates "
                                    "come from an ExecuTorch checkout at run time (none here)")

# prefill M % 4 != 0, each group size and both quantize variants (o4w16 below 128, o2w32 from 128), decode (the
# coop GEMV on the fp input), buffers, half, ET-VK's weight prepack, K = 384 with 3 groups of 128 (a work group
# of the quantize pass half out of range), leading unit dims
CASES = [dict(shape=(37, 256), out_features=64),
         dict(shape=(13, 256), out_features=40, group_size=64),
         dict(shape=(6, 384), out_features=32, group_size=128),
         dict(shape=(1, 5, 512), out_features=24, group_size=128, prepack="shader"),
         dict(shape=(9, 128), out_features=32, storage="buffer", weight_storage="buffer"),
         dict(shape=(7, 256), out_features=32, dtype="half", bias=False),
         dict(shape=(5, 128), out_features=16, dtype="half", storage="buffer", weight_storage="buffer",
              prepack="shader"),
         dict(shape=(1, 256), out_features=64),
         dict(shape=(1, 1, 512), out_features=40, group_size=128, storage="buffer", weight_storage="buffer"),
         dict(shape=(1, 256), out_features=36, dtype="half", bias=False)]
# real models' dimensions: whisper-tiny's nn.Linear(384, 384) at M = 1500 (ExecuTorch #22327), a 2048-token
# prefill of a 1024-wide model, Llama-3.2-1B's decode mlp up
LARGE = [dict(shape=(1500, 384), out_features=384, group_size=128),
         dict(shape=(2048, 1024), out_features=256, group_size=64),
         dict(shape=(1, 2048), out_features=8192, group_size=32)]


def _ids(cases):
    return ["-".join(f"{k}={v}" for k, v in c.items()) for c in cases]


@needs_checkout
@pytest.mark.parametrize("options", CASES + LARGE, ids=_ids(CASES + LARGE))
def test_matches_torchao_8da4w(dot_device, real, options):
    from workbench import etvk
    row = etvk.run(dot_device, real, "linear_dq8ca_q4gsw", measure=False, **options)
    assert row["correct"] and row["max_abs_diff"] <= row["tolerance"], row
    m = options["shape"][-2]
    assert ("_coop_" if m == 1 else "_tiled_") in row["variant"] and row["variant"].endswith("_zpint8")
    if m == 1:  # ET-VK's GEMV does not quantize its input: how far that is from torchao's 8da4w is a column
        assert row["ref_8da4w_max_abs_diff"] > 0


@needs_checkout
def test_tiled_family_refuses_m1_and_picks_as_the_cpp(real):
    d = KERNELS["linear_dq8ca_q4gsw"](real, shape=(8, 256), group_size=128)
    assert d.variant == "linear_dq8ca_q4gsw_tiled_texture3d_texture2d_float_zpint8"
    assert [s.variant for s in d.before] == ["choose_qparams_per_row_texture3d_float_zpint8",
                                             "quantize_and_pack_4h4w_with_group_sums_o2w32_buffer_texture3d_float_zpint8"]
    assert d.before[1].local_size == (2, 1, 32) and d.before[1].global_size == (2, 2, 1)
    gemv = KERNELS["linear_dq8ca_q4gsw"](real, shape=(1, 256))
    assert [s.variant for s in gemv.before] == ["choose_qparams_per_row_texture3d_float_zpint8"]
    with pytest.raises(ValueError, match="is_gemv"):
        KERNELS["linear_dq8ca_q4gsw_tiled"](real, shape=(1, 256))


@needs_checkout
def test_etvk_bug_weight_sums_pitch(dot_device, real):
    """compute_per_group_sums pads the sums' rows to 8, the shader reads them at a pitch of N4 ivec4s: with
    N % 8 == 4 and two groups, the second group's correction is another row's — wrong; at the shader's pitch,
    right."""
    from workbench import etvk
    smallest = dict(shape=(2, 64), out_features=4, group_size=32)
    wrong = etvk.run(dot_device, real, "linear_dq8ca_q4gsw", measure=False, **smallest)
    assert not wrong["correct"] and wrong["max_abs_diff"] > 10 * wrong["tolerance"], wrong
    right = etvk.run(dot_device, real, "linear_dq8ca_q4gsw", measure=False, etvk_pitch=True, **smallest)
    assert right["correct"], right


@needs_checkout
def test_etvk_bug_input_sums_added_twice(dot_device, real):
    """quantize_and_pack_4h4w_with_group_sums adds a worker's running sum twice when it walks more than one block of
    a group (group 256 on o2w32: 64 blocks, 32 workers): the zero-point correction is wrong; group 128 is right."""
    from workbench import etvk
    wrong = etvk.run(dot_device, real, "linear_dq8ca_q4gsw", measure=False, shape=(2, 256), group_size=256)
    assert not wrong["correct"] and wrong["max_abs_diff"] > 10 * wrong["tolerance"], wrong
    right = etvk.run(dot_device, real, "linear_dq8ca_q4gsw", measure=False, shape=(2, 256), group_size=128)
    assert right["correct"], right


REFUSED = [
    (dict(shape=(4, 96), group_size=64), "K=96 is not a multiple of group_size=64"),
    (dict(shape=(4, 96), group_size=6), "positive multiple of 4"),
    (dict(shape=(4, 12), group_size=4), "VK_CHECK_COND(K % 8 == 0)"),
    (dict(storage="buffer", out_features=10), "rows shift"),
    (dict(shape=(2, 5, 256)), "leading dims"),
    (dict(dtype="int8"), "dtype is one of"),
    (dict(weight_storage="texture3d"), "weight_storage is one of"),
]


@pytest.mark.parametrize("options,says", REFUSED, ids=[s[:24] for _, s in REFUSED])
def test_refusals_are_one_line_citing_etvk(options, says):
    with pytest.raises(ValueError) as error:
        KERNELS["linear_dq8ca_q4gsw"](None, **options)
    message = str(error.value)
    assert says in message and "\n" not in message and message.startswith("linear_dq8ca_q4gsw")


def test_cli_options_come_from_the_signatures():
    for kernel in ("linear_dq8ca_q4gsw", "linear_dq8ca_q4gsw_tiled"):
        assert takes(kernel)[:3] == ("shape", "out_features", "group_size")


def test_reference_is_torchaos_8da4w_linear():
    """The family's quantization and reference against torchao's own module: an nn.Linear quantized with
    Int8DynamicActivationIntxWeightConfig(int4, PerGroup), as export_llama_lib's 8da4w does."""
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup
    torch.manual_seed(3)
    linear = torch.nn.Linear(256, 48)
    weight = linear.weight.detach().clone()
    quantize_(linear, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(64)))
    w4, scales = quantize_int4(weight, 64)
    assert torch.equal(w4, linear.weight.qdata) and torch.equal(scales, linear.weight.scale.float())
    x = torch.randn(11, 256)
    q, s, zp = torchao_per_token(x)
    ours = ((q.double() - zp.double()[:, None]) * s.double()[:, None]) @ dequantized(w4, scales, 64).T \
        + linear.bias.detach().double()
    assert torch.allclose(ours, linear(x).double(), rtol=0, atol=1e-5)


def test_weight_sums_layout():
    w4 = torch.arange(-8, 8, dtype=torch.int8).repeat(12, 4)  # [12, 64], each row sums to -8 per 16
    sums = weight_sums(w4, 32, 16)
    assert sums.shape == (2, 16) and (sums[:, :12] == -16).all() and (sums[:, 12:] == 0).all()
