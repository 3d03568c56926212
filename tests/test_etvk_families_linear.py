"""ET-VK's int8 linear ops (workbench.etvk.families.q8ta_linear) against torch on the device, from a checkout.

Needs an ExecuTorch checkout (WORKBENCH_EXECUTORCH); the host-side pieces (numpy prepack, argument errors) run
without one.
"""
import dataclasses
import os

import numpy as np
import pytest
import torch

from workbench import etvk, vk
from workbench.etvk.families._linear import prepack_weight

CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set: ET-VK's linear templates "
                                    "come from an ExecuTorch checkout at run time (none here)")


# M (ET-VK's "batch size", input_shape[-2]) > 1 and not a multiple of 4; N not a multiple of 4 or 8; K a multiple
# of 4 only (ET-VK requires it), with K4 odd.
LINEAR = [
    dict(shape=(13, 36), out_features=10),
    dict(shape=(1, 6, 20), out_features=21, relu=True),
    dict(shape=(5, 132), out_features=3, bias=False),
    dict(shape=(9, 68), out_features=27, fallback=True),
    dict(shape=(2, 12), out_features=17, fallback=True, relu=True, bias=False),
    dict(shape=(37, 516), out_features=75),
]
GEMV = [
    dict(shape=(1, 36), out_features=10),
    dict(shape=(1, 1, 260), out_features=29, relu=True),
    dict(shape=(1, 20), out_features=3, bias=False),
    dict(shape=(1, 68), out_features=27, fallback=True),
    dict(shape=(1, 516), out_features=9, fallback=True, relu=True),
]
PACK = [dict(shape=(10, 36)), dict(shape=(27, 12)), dict(shape=(3, 132), storage="buffer")]


def _ids(cases):
    return ["-".join(f"{k}={v}" for k, v in c.items()) for c in cases]


@needs_checkout
@pytest.mark.parametrize("options", LINEAR, ids=_ids(LINEAR))
def test_q8ta_linear_matches_torch(etvk_row, real, options):
    row = etvk_row(real, "q8ta_linear", options, exact=True)
    assert row["variant"] == ("q8ta_linear_fallback_float" if options.get("fallback") else "q8ta_linear_float")
    assert row["ref64_mismatch"] < 0.02  # the float64 reference of ET-VK's own op: rare 1-LSB rounding differences


@needs_checkout
@pytest.mark.parametrize("options", GEMV, ids=_ids(GEMV))
def test_q8ta_linear_gemv_matches_torch(etvk_row, real, options):
    row = etvk_row(real, "q8ta_linear_gemv", options, exact=True)
    assert row["local_size"] == "1x1x64"


@needs_checkout
@pytest.mark.parametrize("options", PACK, ids=_ids(PACK))
def test_etvks_packing_shader_matches_numpy_prepack(etvk_row, real, options):
    etvk_row(real, "pack_q8_linear_weight", options, exact=True)


@needs_checkout
def test_dispatch_sizes_are_the_cpps(real):
    d = etvk.make(real, "q8ta_linear", shape=(13, 36), out_features=10)
    assert d.global_size == (2, 4, 1) and d.local_size == (4, 16, 1)  # ceil(N/8), ceil(M/4); pick_hw_square
    assert [r.name for r in d.resources] == ["t_packed_int8_output", "t_packed_int8_input", "t_packed_int8_weight",
                                             "t_weight_sums", "t_weight_scales", "t_bias", "output_sizes",
                                             "input_sizes"]
    assert d.resources[2].extent == (3, 9)  # N4 × K4 texels
    assert d.spec_constants == {3: 1, 4: 0}
    g = etvk.make(real, "q8ta_linear_gemv", shape=(1, 36), out_features=29, bias=False)
    assert g.global_size == (4, 1, 1) and g.local_size == (1, 1, 64) and g.spec_constants == {3: 0, 4: 0}


@needs_checkout
def test_leading_batch_is_what_etvk_computes(device, real):
    """A [B, M, K] input: the C++ sizes the dispatch from M and N only, so ET-VK writes batch 0 alone. By default
    the workbench refuses it; etvk_batch=True dispatches it as ET-VK would, and the rows say so."""
    with pytest.raises(ValueError, match=r"last two dims only.*expected leading dims of 1, given \(3,\)"):
        etvk.make(real, "q8ta_linear", shape=(3, 5, 36), out_features=10)
    d = etvk.make(real, "q8ta_linear", shape=(3, 5, 36), out_features=10, etvk_batch=True)
    assert d.global_size == (2, 2, 1)
    row = etvk.execute(device, real, d, measure=False)
    assert not row["correct"]
    # batch 0 exact, the later batches never written (the output buffer starts zeroed)
    only_first = d.expected.clone()
    only_first[1:] = 0
    row = etvk.execute(device, real, dataclasses.replace(d, expected=only_first), measure=False)
    assert row["correct"] and row["max_abs_diff"] == 0, row


def test_numpy_prepack_indexing():
    w = torch.arange(-60, 60, dtype=torch.int8)[:5 * 8].reshape(5, 8).numpy()
    t = prepack_weight(w)
    assert t.shape == (2, 2, 4)  # [K4, N4, 4]
    for k4 in range(2):
        for n4 in range(2):
            for j in range(4):
                row = 4 * n4 + j
                want = w[row, 4 * k4:4 * k4 + 4].view(np.int32)[0] if row < 5 else 0
                assert t[k4, n4, j] == want


@pytest.mark.parametrize("kernel", ["q8ta_linear", "q8ta_linear_gemv"])
def test_bad_inputs_are_named(kernel):
    from workbench.etvk.families import KERNELS
    gen = None  # the arguments are checked before any template is read
    with pytest.raises(ValueError, match=r"weight's K does not match.*expected a weight \[N, 36\].*given \[7, 40\]"):
        KERNELS[kernel](gen, shape=(1, 36), out_features=None, weight=torch.zeros(7, 40, dtype=torch.int8))
    with pytest.raises(ValueError, match=r"multiple of 4.*got K=30"):
        KERNELS[kernel](gen, shape=(1, 30), out_features=8)
    with pytest.raises(ValueError, match=r"one weight scale per output channel: expected 8, given 3"):
        KERNELS[kernel](gen, shape=(1, 32), out_features=8, weight_scales=torch.ones(3))


def test_gemv_refuses_more_than_one_row():
    from workbench.etvk.families import KERNELS
    with pytest.raises(ValueError, match=r"expected M=1, given M=3 — use q8ta_linear"):
        KERNELS["q8ta_linear_gemv"](None, shape=(3, 32), out_features=8)


@needs_checkout
def test_missing_int8_dot_product_is_named(device, real, monkeypatch):
    """Without the int8 dot product ET-VK picks the fallback variant; the dot-product variant says what it lacks."""
    monkeypatch.setitem(device.info.features, "integer_dot_product", False)
    with pytest.raises(vk.MissingFeatureError, match="integer_dot_product"):
        etvk.run(device, real, "q8ta_linear", measure=False)
    assert etvk.run(device, real, "q8ta_linear", measure=False, fallback=True)["correct"]
