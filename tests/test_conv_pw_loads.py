"""The pointwise conv's operand-load options (issue 25): the "oc4_k4" weight prepack, hoisted addressing, both
together. Every option and tile exact against the independent reference on awkward shapes, the load-free diagnostic
builds run, bad combinations refused, and the `conv-loads` suite's rows (quick)."""
import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

from workbench.benchmarks import conv_loads as CL
from workbench.kernels import conv_pw as K
from workbench.ops import conv_pw as ops

QP = K.DEFAULT_QPARAMS
NEW_OPTIONS = [o for o in CL.OPTIONS if o != CL.LANDED]
# Cin, Cout not multiples of 16 (or 4), W not a multiple of any tile width (4, 8, 16), batch > 1. IC4 = 9: with
# TILE_K4 = 4 two whole steps and a tail of 1, TILE_K4 = 2 four and a tail of 1; IC4 = 8: no tail at all.
SHAPES = [(2, 35, 21, 2, 13), (3, 30, 18, 1, 9)]


def test_oc4_k4_prepack_holds_the_same_blocks_input_channel_block_fastest():
    rng = np.random.default_rng(4)
    w = rng.integers(-128, 128, (21, 35), dtype=np.int8)
    landed, inner = K.prepack_weights(w), K.prepack_weights(w, order="oc4_k4")
    assert landed.weight.shape == (12, 8, 4) and inner.weight.shape == (8, 12, 4)  # IC4P 12 (IC4 9), OC4P 8 (OC4 6)
    oc4, k4 = 5, 8  # block (k4, oc4): word j = output channel 4*oc4 + j, byte b = input channel 4*k4 + b
    assert np.array_equal(inner.weight[oc4, k4], landed.weight[k4, oc4])
    block = inner.weight[oc4, k4].astype("<i4").view(np.int8).reshape(4, 4)
    expected = np.zeros((4, 4), np.int8)
    expected[:1, :3] = w[20:21, 32:35]  # output channels 20..23 (only 20 exists), input channels 32..35 (32..34)
    assert np.array_equal(block, expected)
    for packed in (landed, inner):
        assert np.array_equal(K.unpack_weights(packed), w)
    assert np.array_equal(landed.weight_sums, inner.weight_sums)


@pytest.mark.usefixtures("dot_device")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("option", NEW_OPTIONS, ids=lambda o: "-".join(o))
def test_every_tile_of_every_option_gives_exact_accumulators(device, shape, option):
    """All 27 tiles (the raw int32 accumulator build, OpSDot + add) against torch, exactly; OpSDotAccSat on a few."""
    order, addressing = option
    q, w, _, _ = K.random_problem(shape, seed=7)
    expected = ops.reference_q8ta_conv2d_pw_accumulators(torch.from_numpy(q), torch.from_numpy(w)).numpy()
    base = K.ConvPwSpec(shape, accumulators=True, saturate=False, weight_order=order, addressing=addressing)
    with K.ConvPwBuffers(device, base, q, K.prepack_weights(w, order=order)) as bufs:
        for tile in K.ALL_TILES:
            got = bufs.run(base.with_tile(*tile), QP)
            assert np.array_equal(got, expected), f"{base.option} accumulators differ for tile {tile}"
        for tile in ((1, 1, 1), (2, 2, 4), (4, 1, 2)):
            got = bufs.run(dataclasses.replace(base.with_tile(*tile), saturate=True), QP)
            assert np.array_equal(got, expected), f"{base.option} OpSDotAccSat accumulators differ for tile {tile}"


@pytest.mark.usefixtures("dot_device")
@pytest.mark.parametrize("option", NEW_OPTIONS, ids=lambda o: "-".join(o))
def test_int8_outputs_match_the_reference(device, option):
    """The whole kernel (epilogue, 4W4C out, ReLU, bias) with each option, int8 out, against the reference: exact."""
    order, addressing = option
    shape = SHAPES[0]
    q, w, scales, bias = K.random_problem(shape, seed=2)
    expected = K.reference(q, w, scales, bias, QP, relu=True).numpy()
    base = K.ConvPwSpec(shape, saturate=False, relu=True, weight_order=order, addressing=addressing)
    with K.ConvPwBuffers(device, base, q, K.prepack_weights(w, scales, bias, order=order)) as bufs:
        for tile in ((2, 2, 4), (1, 2, 4), (4, 1, 4), (1, 4, 2)):
            got = bufs.run(base.with_tile(*tile), QP)
            assert np.array_equal(got, expected), f"{base.option} int8 outputs differ for tile {tile}"


@pytest.mark.usefixtures("dot_device")
def test_diagnostic_build_runs_for_every_option(device):
    """operands="registers" compiles and runs with every option (its results are wrong by design: the input is
    XORed with the step index, so with IC4 > 1 they differ from the reference; what it measures is the time)."""
    shape = SHAPES[0]
    q, w, _, _ = K.random_problem(shape, seed=3)
    expected = ops.reference_q8ta_conv2d_pw_accumulators(torch.from_numpy(q), torch.from_numpy(w)).numpy()
    for order, addressing in CL.OPTIONS:
        base = K.ConvPwSpec(shape, accumulators=True, saturate=False, weight_order=order, addressing=addressing,
                            operands="registers")
        with K.ConvPwBuffers(device, base, q, K.prepack_weights(w, order=order)) as bufs:
            for tile in ((2, 2, 4), (1, 1, 1)):
                got = bufs.run(base.with_tile(*tile), QP)
                assert got.shape == expected.shape and not np.array_equal(got, expected)


def test_bad_options_are_refused_naming_expected_and_given(device):
    with pytest.raises(ValueError, match=r"weight_order must be one of \('k4_oc4', 'oc4_k4'\).*'k_major'"):
        K.ConvPwSpec((1, 8, 8, 4, 4), weight_order="k_major")
    with pytest.raises(ValueError, match=r"addressing must be one of \('indexed', 'hoisted'\).*'pointers'"):
        K.ConvPwSpec((1, 8, 8, 4, 4), addressing="pointers")
    with pytest.raises(ValueError, match="weight_order must be one of"):
        K.prepack_weights(np.ones((8, 8), np.int8), order="oc4k4")
    # weights prepacked in one order, a kernel that reads the other: refused, both named
    shape = (1, 8, 8, 4, 4)
    q, w, _, _ = K.random_problem(shape)
    spec = K.ConvPwSpec(shape, weight_order="oc4_k4")
    with K.ConvPwBuffers(device, spec, q, K.prepack_weights(w, order="oc4_k4")) as bufs:
        with pytest.raises(ValueError, match=r"prepacked in order 'oc4_k4'; the spec reads order 'k4_oc4'"):
            bufs.run(dataclasses.replace(spec, weight_order="k4_oc4"), QP)


def test_landed_option_builds_the_landed_kernel():
    """The default option adds no define: the landed SPIR-V, so "vs_landed" compares against the kernel as landed."""
    spec = K.ConvPwSpec((1, 8, 8, 4, 4), tile_m=2, tile_n4=2, tile_k4=4, saturate=False)
    assert spec.option == "k4_oc4 indexed"
    assert not {"WEIGHT_K_INNER", "HOIST_ADDRESSES"} & set(spec.defines())
    both = dataclasses.replace(spec, weight_order="oc4_k4", addressing="hoisted")
    assert both.defines()["WEIGHT_K_INNER"] == 1 and both.defines()["HOIST_ADDRESSES"] == 1


@pytest.mark.usefixtures("dot_device")
def test_loads_suite_quick_rows(device):
    """`bench conv-loads` (quick): probes, then per tile every option as built, as the diagnostic and with
    OpSDotAccSat; built rows checked (0 LSB), roof fractions, load cost and the comparison with the landed option."""
    df = CL.loads_suite(device, quick=True, show_progress=False)
    probes = df[df["kernel"] == CL.PROBE_KERNEL]
    assert set(probes["method"]) == {"int8 dot (OpSDot + add)", "int8 dot (OpSDotAccSat)"}
    conv = df[df["kernel"] == "q8ta_conv2d_pw"]
    assert len(conv) == len(CL.QUICK_TILES) * len(CL.OPTIONS) * 3
    assert set(conv["option"]) == {f"{o} {a}" for o, a in CL.OPTIONS}
    built = conv[conv["operands"] == "memory"]
    assert (built["status"] == "ok").all() and (built["max_lsb_diff"] == 0).all()
    assert conv[conv["operands"] == "registers"]["load_cost"].notna().all()
    assert (conv["roof_fraction"] > 0).all() and conv["vs_landed"].notna().all()
    landed = conv[conv["option"] == "k4_oc4 indexed"]
    assert np.allclose(landed["vs_landed"], 1.0)


def test_roof_check_takes_the_conv_loads_probes_per_method(tmp_path):
    """The suite's probe rows re-measure the folder's two int8-dot roofs: each is matched to its own method."""
    from workbench.benchmarks import roof_check as RC
    base = {"kernel": "peak", "kind": "int8_dot", "macs": 10, "median_us": 100.0, "min_us": 99.0}
    pd.DataFrame([{"kernel": "copy", "method": "shader uvec4", "timer": "vulkan timestamps", "size_mib": 256,
                   "GB/s": 100.0},
                  {**base, "method": "int8 dot (OpSDotAccSat)", "GOP/s": 25.0},
                  {**base, "method": "int8 dot (OpSDot + add)", "GOP/s": 60.0},
                  {**base, "method": "fp32 fma", "kind": "fp32_fma", "GOP/s": 50.0}]).to_csv(tmp_path / "peak.csv",
                                                                                         index=False)
    sweep = {**base, "kernel": CL.PROBE_KERNEL, "status": "ok"}
    pd.DataFrame([{**sweep, "method": "int8 dot (OpSDot + add)", "GOP/s": 61.0},
                  {**sweep, "method": "int8 dot (OpSDotAccSat)", "GOP/s": 24.0}]).to_csv(tmp_path / "conv_loads.csv",
                                                                                        index=False)
    roofs = RC.folder_roofs(tmp_path)
    assert roofs.values["int8_wrap_GOPs"] == 61.0 and roofs.sources["int8_wrap_GOPs"] == "conv_loads.csv"
    assert roofs.values["int8_sat_GOPs"] == 25.0 and roofs.sources["int8_sat_GOPs"] == "peak.csv"
