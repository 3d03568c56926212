"""ET-VK's q8csw families (workbench.etvk.families.linear_q8ta_q8csw, .conv2d_q8ta_q8csw_q8to) against torch on the
test device (lavapipe), exactly, from a checkout.

Needs an ExecuTorch checkout (WORKBENCH_EXECUTORCH) for the dispatches; the numpy prepacks and the argument checks
that come before any template is read run without one.
"""
import dataclasses
import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from workbench import etvk
from workbench.etvk.families import KERNELS
from workbench.etvk.families.conv2d_q8ta_q8csw_q8to import flatten_weight, im2col, prepack_conv2d_weight
from workbench.vk.spirv import declared
from workbench.vk.spirv import reflect

CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set: ET-VK's q8csw templates "
                                    "come from an ExecuTorch checkout at run time (none here)")


def _ids(cases):
    return ["-".join(f"{k}={v}" for k, v in c.items()) for c in cases]


# --- linear_q8ta_q8csw_tiled ------------------------------------------------------------------------------------
# M odd and not a multiple of 4; N not a multiple of 4 or 8; K a multiple of 4 only (ET-VK requires it), K4 odd.
LINEAR = [
    dict(shape=(13, 36), out_features=10),
    dict(shape=(1, 5, 20), out_features=21),
    dict(shape=(5, 132), out_features=3, bias=False),
    dict(shape=(2, 12), out_features=17),
    dict(shape=(37, 516), out_features=75),
    dict(shape=(9, 68), out_features=24, storage="buffer"),     # buffer output: N a multiple of 8 (see the finding)
    dict(shape=(7, 20), out_features=16, storage="buffer", bias=False),
]


@needs_checkout
@pytest.mark.parametrize("options", LINEAR, ids=_ids(LINEAR))
def test_linear_q8ta_q8csw_tiled_matches_torch(etvk_row, real, options):
    row = etvk_row(real, "linear_q8ta_q8csw_tiled", options)
    assert row["variant"] == f"linear_q8ta_q8csw_tiled_{options.get('storage', 'texture3d')}_buffer_texture2d_float"
    assert row["ref64_max_abs_diff"] < 1e-3  # ET-VK's own float64 op: fp32 rounding only


@needs_checkout
def test_linear_buffer_output_with_n_not_a_multiple_of_4_lands_shifted(device, real):
    """Finding: the buffer variant stores vec4 m·N4 + n4, but ET-VK's float buffer tensors are contiguous
    (element (m, n) at m·N + n): with N % 4 != 0 every row after the first lands shifted. On lavapipe row 0
    survives; on the H200 row 0 is wrong too (measured there: the full-tile stores without an N check overlap the
    next row's words, and which store lands last is the driver's), so only lavapipe is held to row 0."""
    d = etvk.make(real, "linear_q8ta_q8csw_tiled", shape=(2, 4), out_features=3, storage="buffer")
    row = etvk.execute(device, real, d, measure=False)
    assert not row["correct"]
    if device.info.driver_name == "llvmpipe":
        first_row_only = dataclasses.replace(d, expected=d.expected[:1], decode=lambda raw: d.decode(raw)[:1])
        assert etvk.execute(device, real, first_row_only, measure=False)["correct"]


@needs_checkout
def test_linear_leading_batch_is_what_etvk_computes(device, real):
    with pytest.raises(ValueError, match=r"last two dims only.*expected leading dims of 1, given \(3,\)"):
        etvk.make(real, "linear_q8ta_q8csw_tiled", shape=(3, 5, 36), out_features=16)
    d = etvk.make(real, "linear_q8ta_q8csw_tiled", shape=(3, 5, 36), out_features=16, storage="buffer",
                  etvk_batch=True)
    assert d.global_size == (2, 2, 1)
    assert not etvk.execute(device, real, d, measure=False)["correct"]
    only_first = d.expected.clone()
    only_first[1:] = 0  # batch 0 exact; the later batches never written (the buffer starts zeroed)
    assert etvk.execute(device, real, dataclasses.replace(d, expected=only_first), measure=False)["correct"]


# --- conv2d_q8ta_q8csw_q8to (direct) and _linear_tiled ----------------------------------------------------------
# C_in, C_out not multiples of 4; W odd (partial 4W blocks); H, W differing; asymmetric stride / padding.
DIRECT = [
    dict(),                                                                            # 5x5, padding 2
    dict(shape=(1, 7, 10, 9), out_channels=13, kernel_size=(3, 2), stride=(2, 2), padding=(1, 1), bias=False),
    dict(shape=(1, 7, 10, 9), out_channels=13, kernel_size=(3, 2), dilation=(2, 1), padding=(1, 1)),
    dict(shape=(1, 16, 7, 7), out_channels=8, groups=2, kernel_size=3, padding=1, storage="texture3d"),
    dict(shape=(1, 5, 6, 7), out_channels=3, kernel_size=(1, 11), padding=(0, 5)),
    dict(shape=(1, 6, 5, 9), out_channels=5, kernel_size=4, stride=(1, 3), padding=(2, 0), storage="texture3d"),
]
LINEAR_TILED = [
    dict(),                                                                            # 3x3, padding 1
    dict(storage="texture3d"),
    dict(kernel_size=1, padding=0),                                                    # reads the input itself
    dict(shape=(1, 7, 5, 6), out_channels=5, kernel_size=1, padding=0, storage="texture3d"),
    dict(shape=(1, 7, 10, 9), out_channels=13, kernel_size=(3, 2), stride=(2, 1), padding=(0, 1), dilation=(1, 2),
         bias=False),
    dict(shape=(1, 5, 7, 6), out_channels=9, kernel_size=1, stride=2, padding=1),       # pointwise via im2col
    dict(shape=(1, 16, 6, 5), out_channels=16, kernel_size=1, groups=2, padding=0),     # grouped pointwise, OC_g 8
]


@needs_checkout
@pytest.mark.parametrize("options", DIRECT, ids=_ids(DIRECT))
def test_conv2d_direct_matches_torch(etvk_row, real, options):
    row = etvk_row(real, "conv2d_q8ta_q8csw_q8to", options)
    assert row["ref64_mismatch"] < 0.05  # ET-VK's float64 reference: rare 1-LSB rounding differences


@needs_checkout
@pytest.mark.parametrize("options", LINEAR_TILED, ids=_ids(LINEAR_TILED))
def test_conv2d_linear_tiled_matches_torch(etvk_row, real, options):
    etvk_row(real, "conv2d_q8ta_q8csw_q8to_linear_tiled", options)


@needs_checkout
def test_direct_conv_ignores_dilation_x(device, real):
    """Finding: perform_conv1d (conv2d_q8_utils.glslh) takes window column ``out_w · stride_x + kx`` — no
    ``· dilation_x`` — so the direct kernel is wrong for any horizontal dilation > 1. The smallest shape ET-VK's C++
    sends there (groups > 1 keeps it off im2col): 8 channels, 2 groups, kernel 1x2, dilation (1, 2), W = 3. The
    im2col kernel gets the same conv right."""
    options = dict(shape=(1, 8, 1, 3), out_channels=8, groups=2, kernel_size=(1, 2), dilation=(1, 2), padding=0,
                   bias=False)
    row = etvk.run(device, real, "conv2d_q8ta_q8csw_q8to", measure=False, **options)
    assert row["cpp_pick"] == "conv2d_q8ta_q8csw_q8to" and not row["correct"], row
    assert etvk.run(device, real, "conv2d_q8ta_q8csw_q8to", measure=False, **{**options, "dilation": (2, 1),
                                                                              "kernel_size": (2, 1), "shape": (1, 8, 3, 1)})["correct"]


@needs_checkout
def test_linear_tiled_mixes_groups_when_oc_per_group_is_not_a_multiple_of_8(device, real):
    """Finding: the linear-tiled kernel computes 8 output channels per thread (TILE_N4 = 2) but takes the group of
    the first one (``group_idx = n / out_channels_per_group``): with OC_g % 8 == 4 the second block of 4 channels
    reads the previous group's input. ET-VK's C++ sends every pointwise conv there (``should_use_im2col``), grouped
    ones too; the smallest: 8 channels in, 8 out, 2 groups, 1x1, one pixel. The direct kernel gets it right."""
    options = dict(shape=(1, 8, 1, 1), out_channels=8, groups=2, kernel_size=1, padding=0)
    row = etvk.run(device, real, "conv2d_q8ta_q8csw_q8to_linear_tiled", measure=False, **options)
    assert row["cpp_pick"] == "conv2d_q8ta_q8csw_q8to_linear_tiled" and not row["correct"]
    assert row["mismatch"] == 0.5  # exactly the second group's channels
    assert etvk.run(device, real, "conv2d_q8ta_q8csw_q8to", measure=False, **options)["correct"]


@needs_checkout
def test_direct_conv_reads_the_padding_lanes_as_data(device, real):
    """The direct kernel's window checks bounds per 4-column block: columns W .. align4(W) - 1 are read from the
    tensor's padding lanes, right only when they hold the zero point (what ET-VK's q8ta_quantize writes)."""
    options = dict(shape=(1, 5, 6, 7), out_channels=3)
    assert etvk.run(device, real, "conv2d_q8ta_q8csw_q8to", measure=False, **options)["correct"]
    assert not etvk.run(device, real, "conv2d_q8ta_q8csw_q8to", measure=False, input_pad_lanes="zero",
                        **options)["correct"]


@needs_checkout
def test_conv_batch_is_refused_or_shown(device, real):
    with pytest.raises(ValueError, match=r"expected batch 1, given 2"):
        etvk.make(real, "conv2d_q8ta_q8csw_q8to", shape=(2, 8, 5, 5))
    d = etvk.make(real, "conv2d_q8ta_q8csw_q8to", shape=(2, 8, 5, 5), etvk_batch=True)
    only_first = d.expected.clone()
    only_first[1:] = 0
    assert not etvk.execute(device, real, d, measure=False)["correct"]
    assert etvk.execute(device, real, dataclasses.replace(d, expected=only_first), measure=False)["correct"]


@needs_checkout
def test_cpp_pick_column(real):
    pick = lambda **o: etvk.make(real, "conv2d_q8ta_q8csw_q8to", **o).params["cpp_pick"]
    assert pick() == "conv2d_q8ta_q8csw_q8to"                                 # 5x5 = 25 > 10
    assert pick(kernel_size=3, padding=1) == "conv2d_q8ta_q8csw_q8to_linear_tiled"
    assert pick(shape=(1, 16, 5, 5), out_channels=8, groups=2, kernel_size=3, padding=1) == "conv2d_q8ta_q8csw_q8to"
    assert pick(shape=(1, 16, 5, 5), out_channels=8, groups=2, kernel_size=1, padding=0) == \
        "conv2d_q8ta_q8csw_q8to_linear_tiled"                                 # pointwise: always im2col


# --- weight packers -----------------------------------------------------------------------------------------------
PACK_CONV = [dict(), dict(shape=(5, 6, 2, 3), storage="buffer"), dict(shape=(13, 3, 1, 1)), dict(shape=(4, 9, 3, 2))]


@needs_checkout
@pytest.mark.parametrize("options", PACK_CONV, ids=_ids(PACK_CONV))
def test_pack_q8_conv2d_weights_matches_numpy(etvk_row, real, options):
    etvk_row(real, "pack_q8_conv2d_weights", options)


def test_numpy_conv_prepack_indexing():
    w = torch.randint(-127, 128, (5, 6, 2, 3), dtype=torch.int8, generator=torch.Generator().manual_seed(1))
    t = prepack_conv2d_weight(w)
    assert t.shape == (2 * 2, 3 * 2, 4)  # [IC4·Kh, Kw·OC4, 4]
    b = t.view(np.int8).reshape(4, 6, 4, 4)  # [row, col, component (oc), byte (ic)]
    for oc in range(8):
        for ic in range(8):
            for ky in range(2):
                for kx in range(3):
                    want = int(w[oc, ic, ky, kx]) if oc < 5 and ic < 6 else 0
                    assert b[ky * 2 + ic // 4, (oc // 4) * 3 + kx, oc % 4, ic % 4] == want
    flat = flatten_weight(w)
    assert flat.shape == (5, 36) and flat[3, (1 * 3 + 2) * 6 + 4] == w[3, 4, 1, 2]  # OHWI


def test_host_im2col_is_the_logical_window():
    q = torch.randint(-128, 128, (1, 3, 4, 5), dtype=torch.int8, generator=torch.Generator().manual_seed(2))
    cols = im2col(q, 7, (2, 2), (1, 2), (1, 0), (1, 1), 1, (5, 2))
    assert cols.shape == (1, 12, 5, 4)  # K = align4(2·2·3), W_out 2 → 4
    assert cols[0, 0, 0, 0] == 7  # (ky 0) row -1 is padding: the zero point
    assert cols[0, (1 * 2 + 1) * 3 + 2, 2, 1] == q[0, 2, 2, 3]  # ky 1, kx 1, ic 2 at (h 2, w 1): row 2, col 3
    assert (cols[0, :, :, 2:] == 7).all()


# --- the dispatch is the C++'s -------------------------------------------------------------------------------------
@needs_checkout
@pytest.mark.parametrize("kernel, options, push_bytes, spec_ids", [
    ("linear_q8ta_q8csw_tiled", dict(shape=(13, 36), out_features=10), 8, {3}),
    ("linear_q8ta_q8csw_tiled", dict(shape=(13, 36), out_features=10, storage="buffer"), 8, {3}),
    ("conv2d_q8ta_q8csw_q8to", dict(storage="buffer"), 16, set(range(3, 20))),
    ("conv2d_q8ta_q8csw_q8to_linear_tiled", dict(storage="buffer"), 16, set(range(3, 20))),
    ("conv2d_q8ta_q8csw_q8to_linear_tiled", dict(storage="texture3d"), 16, set(range(3, 20))),
    ("pack_q8_conv2d_weights", dict(), 32, set()),
    ("pack_q4_linear_weight", dict(), 24, set()),
])
def test_dispatch_is_the_cpps(real, kernel, options, push_bytes, spec_ids):
    d = etvk.make(real, kernel, **options)
    spirv = real.compile(d.variant)
    info = reflect(bytes(spirv.code))
    by_slot = sorted(info.bindings, key=lambda b: b.binding)
    assert [b.name.removesuffix("Buffer").removesuffix("_UBO") for b in by_slot] == [r.name for r in d.resources]
    kinds = {"buffer": ("storage_buffer",), "ubo": ("uniform_buffer",),
             "image": ("storage_image", "combined_image_sampler")}
    assert all(b.kind in kinds[r.kind] for b, r in zip(by_slot, d.resources))
    assert len(d.push_constants) == push_bytes == info.push_constant_size
    assert set(d.spec_constants) == spec_ids
    assert set(declared(spirv, d.spec_constants)) <= spec_ids


@needs_checkout
def test_sizes_are_the_cpps(real):
    d = etvk.make(real, "linear_q8ta_q8csw_tiled", shape=(13, 36), out_features=10)
    assert d.global_size == (2, 4, 1) and d.local_size == (4, 16, 1)  # ceil(N/8), ceil(M/4); pick_hw_square
    assert d.resources[0].extent == (3, 13, 1) and d.resources[2].extent == (3, 9)
    c = etvk.make(real, "conv2d_q8ta_q8csw_q8to", shape=(1, 8, 9, 11), out_channels=12, kernel_size=5, padding=2,
                  stride=(1, 2))
    assert c.global_size == (3, 2, 9)  # ceil(C_out/4), ceil(W_out/4), H_out
    # GenerateSpecConstants: apply_bias, stride x/y, padding x/y, dilation x/y, kernel x/y, IC_g, OC_g,
    # K4_per_group, K4, K_per_group, logical_K, logical_K_per_group, groups
    assert [c.spec_constants[i] for i in range(3, 20)] == [1, 2, 1, 2, 2, 1, 1, 5, 5, 8, 12, 50, 50, 200, 200, 200, 1]
    t = etvk.make(real, "conv2d_q8ta_q8csw_q8to_linear_tiled", shape=(1, 8, 9, 11), out_channels=12)
    assert t.global_size == (2, 3, 9)  # "linear" kernels: 8 output channels per thread
    p = etvk.make(real, "pack_q8_conv2d_weights", shape=(12, 8, 3, 3))
    assert p.global_size == (9, 6, 1) and p.push_constants == np.array([36, 6, 1, 1, 12, 3, 3, 8], "<i4").tobytes()


# --- errors --------------------------------------------------------------------------------------------------------
def test_bad_inputs_say_expected_and_given():
    lin, conv = KERNELS["linear_q8ta_q8csw_tiled"], KERNELS["conv2d_q8ta_q8csw_q8to"]
    with pytest.raises(ValueError, match=r"multiple of 4.*got K=30"):
        lin(None, shape=(3, 30), out_features=8)
    with pytest.raises(ValueError, match=r"weight's K does not match.*expected a weight \[N, 36\].*given \[7, 40\]"):
        lin(None, shape=(1, 36), out_features=None, weight=torch.zeros(7, 40, dtype=torch.int8))
    with pytest.raises(ValueError, match=r"one weight scale per output channel: expected 8, given 3"):
        lin(None, shape=(1, 32), out_features=8, weight_scales=torch.ones(3))
    with pytest.raises(ValueError, match=r"'texture3d' or 'buffer'.*got 'texture2d'"):
        lin(None, storage="texture2d")
    with pytest.raises(ValueError, match=r"depthwise.*conv2d_dw_q8ta_q8csw_q8to.*expected groups < C_in"):
        conv(None, shape=(1, 8, 5, 5), out_channels=8, groups=8)
    with pytest.raises(ValueError, match=r"multiples of 4.*given IC_g=3, OC_g=4"):
        conv(None, shape=(1, 6, 5, 5), out_channels=8, groups=2)
    with pytest.raises(ValueError, match=r"MAX_WINDOW_WIDTH = 16; given 19"):
        conv(None, shape=(1, 4, 5, 40), out_channels=4, kernel_size=(1, 7), stride=2, dilation=2, padding=0)
    with pytest.raises(ValueError, match=r"output would be empty"):
        conv(None, shape=(1, 4, 3, 3), kernel_size=5, padding=0)
    with pytest.raises(ValueError, match=r"input_pad_lanes is 'zp'.*got 'ones'"):
        conv(None, input_pad_lanes="ones")
    with pytest.raises(ValueError, match=r"\[OC, IC_per_group, Kh, Kw\].*given \(4, 4\)"):
        KERNELS["pack_q8_conv2d_weights"](None, shape=(4, 4))


def test_a_checkout_without_the_template_is_named():
    gen = SimpleNamespace(variants=lambda: {"linear_q8ta_q8csw_tiled_buffer_buffer_texture2d_float": None},
                          source=SimpleNamespace(label="executorch@old"))
    with pytest.raises(ValueError, match=r"checkout \(executorch@old\) has no shader variant "
                                         r"'linear_q8ta_q8csw_tiled_texture3d_buffer_texture2d_float'.*"
                                         r"linear_q8ta_q8csw_tiled_buffer_buffer_texture2d_float"):
        KERNELS["linear_q8ta_q8csw_tiled"](gen)
    with pytest.raises(ValueError, match=r"has no shader variant 'conv2d_q8ta_q8csw_q8to_buffer_texture2d_float'"
                                         r".*none"):
        KERNELS["conv2d_q8ta_q8csw_q8to"](gen)


@needs_checkout
def test_cli_lists_and_runs_them(capsys):
    from workbench.cli import main
    assert main(["etvk", "list", "q8csw_q8to", "q8ta_q8csw_tiled", "pack_q8_conv", "--executorch", CHECKOUT]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line.split()[-1] for line in out.splitlines()[2:] if line.strip()}
    assert lines["conv2d_q8ta_q8csw_q8to_linear_tiled_buffer_texture2d_float"] == \
        "conv2d_q8ta_q8csw_q8to_linear_tiled"
    assert lines["conv2d_q8ta_q8csw_q8to_buffer_texture2d_float"] == "conv2d_q8ta_q8csw_q8to"
    assert lines["linear_q8ta_q8csw_tiled_texture3d_buffer_texture2d_float"] == "linear_q8ta_q8csw_tiled"
    assert lines["pack_q8_conv2d_weights_buffer"] == "pack_q8_conv2d_weights"
    assert main(["etvk", "run", "conv2d_q8ta_q8csw_q8to", "conv2d_q8ta_q8csw_q8to_linear_tiled", "--executorch",
                 CHECKOUT, "--shape", "1,8,7,12", "--out-channels", "12"]) == 0
    assert main(["etvk", "run", "linear_q8ta_q8csw_tiled", "--executorch", CHECKOUT, "--shape", "1,1,7,12"]) == 0
    out = capsys.readouterr().out
    assert "conv2d_q8ta_q8csw_q8to_buffer_texture2d_float" in out and "linear_q8ta_q8csw_tiled_texture3d" in out
    assert "False" not in out  # every row correct
