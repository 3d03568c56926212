"""Pointwise int8 conv (q8ta_conv2d_pw): prepack, exact accumulators for every tile, outputs within 1 LSB for every
output layout / epilogue / dot-product path, bad input errors, sweep rows, occupancy columns, pictures, explorer."""
import dataclasses
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from workbench import layouts as L, measure
from workbench.vendors import occupancy as occ
from workbench.benchmarks import conv as C
from workbench.kernels import conv_pw as K
from workbench.ops import conv_pw as ops

QP = K.DEFAULT_QPARAMS  # ET-VK's op-test qparams: in 0.008123/2, out 0.05314/-1

# Odd everything: Cin, Cout, W not multiples of 4, H odd, batch 2 (IC4 = 3, so TILE_K4 = 2 and 4 run past IC4).
ODD = (2, 10, 9, 3, 7)


def problem(shape, seed=0, bias=True):
    return K.random_problem(shape, seed, bias)


def lsb_report(got, expected):
    diff = np.abs(np.asarray(got, dtype=np.int64) - np.asarray(expected, dtype=np.int64))
    return int(diff.max()), int((diff > 0).sum())


# ---------------------------------------------------------------------------------------------------------------
# Host side: prepack, spec arithmetic (no device)


def test_prepack_blocks_match_the_definition():
    rng = np.random.default_rng(3)
    w = rng.integers(-128, 128, (9, 6), dtype=np.int8)
    packed = K.prepack_weights(w, np.linspace(0.01, 0.02, 9), np.arange(9, dtype=np.float32))
    assert packed.weight.shape == (4, 4, 4)  # IC4P=4 (IC4=2 padded), OC4P=4 (OC4=3 padded), 4 words per ivec4
    raw = packed.weight.view(np.uint8).reshape(4, 4, 4, 4)  # [k4, oc4, j, byte]
    for oc in range(12):
        for ic in range(16):
            want = w[oc, ic] if oc < 9 and ic < 6 else 0
            assert raw[ic // 4, oc // 4, oc % 4, ic % 4].view(np.int8) == want
    np.testing.assert_array_equal(K.unpack_weights(packed), w)
    np.testing.assert_array_equal(packed.weight_sums[:9], w.astype(np.int32).sum(1))
    assert not packed.weight_sums[9:].any() and not packed.scales[9:].any() and not packed.bias[9:].any()
    assert packed.scales.dtype == np.float32 and packed.bias[3] == 3.0


def test_spec_dispatch_traffic_and_tile_figures():
    spec = K.ConvPwSpec((1, 96, 96, 64, 64), tile_m=1, tile_n4=2, tile_k4=1)
    assert spec.macs() == 96 * 96 * 64 * 64  # N·Cout·H·W·Cin
    assert spec.global_size() == (12, 16, 64) and spec.resolved_local_size() == (8, 8, 1)
    assert spec.bytes_moved() == 64 * 64 * 96 + 24 * 24 * 16 + 3 * 24 * 16 + 64 * 64 * 96
    assert spec.tile_figures() == K.conv_pw_tile_figures(1, 2, 1)
    assert spec.accumulators_per_thread == 32 and spec.variant == "q8ta_conv2d_pw_m1_n2_k1_dot"
    # ET-VK's PR #19396 numbers: N4 2 -> 1 halves the accumulators, 2.67 -> 2.0 MAC/B
    assert C.tile_columns(spec)["tile_macs_per_byte"] == pytest.approx(8 / 3)
    assert C.tile_columns(spec.with_tile(1, 1, 1))["tile_macs_per_byte"] == pytest.approx(2.0)
    assert K.pick_local_size((3, 40, 1)) == (4, 16, 1) and K.pick_local_size((40, 3, 1)) == (16, 4, 1)
    table = K.variants(K.SHADER)
    assert len(table) == 216 and all(K.variant_name(*t, d, a) in table
                                     for t in K.ALL_TILES for d in (True, False) for a in (True, False))
    # the rule models: more accumulators -> a higher register bound -> no more occupancy
    small, big = C.model_columns(1, 1, 1), C.model_columns(4, 4, 1)
    assert small["model_registers_lower_bound"] < big["model_registers_lower_bound"]
    assert big["model_sm90_occupancy_upper_bound"] < small["model_sm90_occupancy_upper_bound"]
    assert big["model_a740_occupancy_upper_bound"] <= small["model_a740_occupancy_upper_bound"]


def test_reference_matches_float_math():
    """The reference's fp32 epilogue agrees with a float64 computation to within 1 LSB."""
    q, w, scales, bias = problem((1, 24, 20, 5, 6), seed=5)
    out, acc = K.reference(q, w, scales, bias, QP, relu=True, return_accumulators=True)
    acc64 = np.einsum("nchw,oc->nohw", q.astype(np.int64), w.astype(np.int64))
    np.testing.assert_array_equal(acc.numpy(), acc64)
    adj = acc64 - QP.input_zero_point * w.astype(np.int64).sum(1)[None, :, None, None]
    f = adj * (scales.astype(np.float64) * QP.input_scale)[None, :, None, None] + bias[None, :, None, None]
    q64 = np.clip(np.round(np.maximum(f, 0) / QP.output_scale) + QP.output_zero_point, -128, 127)
    assert lsb_report(out.numpy(), q64)[0] <= 1


# ---------------------------------------------------------------------------------------------------------------
# Device: exact accumulators, outputs within 1 LSB


@pytest.mark.usefixtures("dot_device")
def test_every_tile_gives_exact_accumulators(device):
    """All 27 tile settings (the debug build that writes the raw int32 accumulators) against torch, exactly."""
    q, w, _, _ = problem(ODD, seed=1)
    expected = ops.reference_q8ta_conv2d_pw_accumulators(torch.from_numpy(q), torch.from_numpy(w))
    packed = K.prepack_weights(w)
    base = K.ConvPwSpec(ODD, accumulators=True)
    with K.ConvPwBuffers(device, base, q, packed) as bufs:
        for tile in K.ALL_TILES:
            got = bufs.run(base.with_tile(*tile), QP)
            assert np.array_equal(got, expected.numpy()), f"accumulators differ for tile {tile}"
        for tile in ((1, 1, 1), (2, 2, 4), (4, 1, 2)):  # OpSDot + add instead of OpSDotAccSat: the same sums
            got = bufs.run(dataclasses.replace(base.with_tile(*tile), saturate=False), QP)
            assert np.array_equal(got, expected.numpy()), f"wrapping accumulators differ for tile {tile}"


def test_fallback_dot_product_accumulators(device):
    """The portable int32 fallback (no extension) gives the same exact accumulators."""
    q, w, _, _ = problem((1, 13, 6, 3, 5), seed=2)
    expected = K.reference_accumulators(q, w).numpy()
    for tile in ((1, 1, 1), (2, 1, 2), (1, 2, 4)):
        got = ops.q8ta_conv2d_pw_accumulators(q, w, *tile, use_dot_ext=False, device=device)
        assert got.dtype == torch.int32 and got.shape == (1, 6, 3, 5)
        assert np.array_equal(got.numpy(), expected), tile


# (shape, tile, output layout, relu, bias, dot ext): every output layout, relu on/off, bias on/off, both dot paths,
# every value of each tile axis, Cin/Cout/W not multiples of 4, H odd, batch > 1, tiny and >= 64-channel shapes.
CASES = [
    ((1, 16, 12, 6, 10), (1, 1, 1), "4W4C", False, True, True),
    ((1, 16, 12, 6, 10), (1, 1, 1), "4C1W", True, True, True),
    ((1, 16, 12, 6, 10), (1, 1, 1), "4C", False, False, True),
    (ODD, (2, 4, 1), "4W4C", True, True, True),
    (ODD, (4, 2, 4), "4C1W", False, True, True),
    (ODD, (1, 2, 2), "4C", True, False, True),
    ((1, 3, 1, 1, 1), (1, 1, 1), "4C1W", False, True, True),
    ((3, 33, 17, 5, 9), (2, 2, 2), "4W4C", False, True, True),
    ((1, 64, 68, 7, 13), (1, 2, 1), "4C", True, True, True),
    ((2, 7, 5, 3, 5), (1, 1, 1), "4W4C", True, True, False),
    ((1, 20, 9, 5, 13), (2, 1, 2), "4C1W", False, False, False),
]


@pytest.mark.parametrize("shape,tile,layout,relu,bias,dot", CASES,
                         ids=[f"{'x'.join(map(str, c[0]))}-M{c[1][0]}N{c[1][1]}K{c[1][2]}-{c[2]}"
                              f"{'-relu' if c[3] else ''}{'' if c[4] else '-nobias'}{'' if c[5] else '-fallback'}"
                              for c in CASES])
def test_outputs_within_one_lsb(device, request, shape, tile, layout, relu, bias, dot):
    if dot:
        request.getfixturevalue("dot_device")
    q, w, scales, b = problem(shape, seed=hash((shape, tile)) % 1000, bias=bias)
    args = (QP.input_scale, QP.input_zero_point, w, scales, b, QP.output_scale, QP.output_zero_point)
    got = ops.q8ta_conv2d_pw(torch.from_numpy(q), *args, relu=relu, tile_m=tile[0], tile_n4=tile[1],
                             tile_k4=tile[2], out_layout=layout, use_dot_ext=dot, device=device)
    expected = ops.reference_q8ta_conv2d_pw(q, *args, relu=relu)
    assert got.dtype == torch.int8 and tuple(got.shape) == K.ConvPwShape.coerce(shape).output_sizes
    worst, differing = lsb_report(got, expected)
    print(f"{differing} of {got.numel()} outputs differ (max {worst} LSB)")
    assert worst <= 1
    assert differing <= max(1, got.numel() // 100)  # the epilogue follows the reference's fp32 order
    if relu:
        assert int(got.min()) >= QP.output_zero_point  # ReLU before requantization: nothing below the zero point
    # the outputs are not trivial: they span a good part of the int8 range
    assert int(got.max()) - int(got.min()) > 20 or got.numel() < 8


@pytest.mark.usefixtures("dot_device")
def test_padding_lanes_hold_output_zp_and_padded_widths_stay_unwritten(device):
    shape = (1, 8, 6, 3, 5)  # Cout 6 -> lanes 2, 3 of the second channel block are padding; W 5 -> widths 5..7
    q, w, scales, b = problem(shape, seed=4)
    spec = K.ConvPwSpec(shape, out_layout="4W4C")
    with K.ConvPwBuffers(device, spec, q, K.prepack_weights(w, scales, b)) as bufs:
        bufs.run(spec, QP)
        raw = bufs.out.download(np.int32).view(np.int8).reshape(-1)
    # every padded (n, c, h, w) of the 4W4C buffer, word and lane from the closed form (etvk.md §1.4)
    n_, c_, h_, w_ = (a.ravel() for a in np.meshgrid(*(np.arange(s) for s in L.get_layout("4W4C").padded_sizes(
        (1, 6, 3, 5))), indexing="ij"))
    word = 4 * (((n_ * 3 + h_) * 2 + w_ // 4) * 2 + c_ // 4) + w_ % 4
    values = raw[4 * word + c_ % 4]
    pad_c = (c_ >= 6) & (w_ < 5)
    pad_w = w_ >= 5
    assert (values[pad_c] == QP.output_zero_point).all()
    assert (values[pad_w] == 0).all()  # the buffer starts zeroed; padded-width words are never written


@pytest.mark.usefixtures("dot_device")
def test_batch_and_layout_outputs_agree(device):
    """The same problem through the three output layouts unpacks to the same NCHW tensor."""
    q, w, scales, b = problem((2, 12, 10, 3, 6), seed=7)
    args = (QP.input_scale, QP.input_zero_point, w, scales, b, QP.output_scale, QP.output_zero_point)
    outs = [ops.q8ta_conv2d_pw(q, *args, out_layout=layout, device=device) for layout in K.OUTPUT_LAYOUTS]
    assert all(torch.equal(outs[0], o) for o in outs[1:])
    # a (Cout, Cin, 1, 1) weight as a torch tensor is accepted too
    w4 = torch.from_numpy(w).reshape(10, 12, 1, 1)
    assert torch.equal(ops.q8ta_conv2d_pw(q, *args[:2], w4, *args[3:], device=device), outs[0])


# ---------------------------------------------------------------------------------------------------------------
# Errors


def test_bad_arguments_are_clear(device):
    q, w, scales, b = problem((1, 8, 4, 2, 4))
    args = (QP.input_scale, QP.input_zero_point, w, scales, b, QP.output_scale, QP.output_zero_point)
    for bad in ({"tile_m": 3}, {"tile_n4": 0}, {"tile_k4": 8}, {"tile_m": True}, {"tile_n4": 2.0}):
        with pytest.raises(ValueError, match=r"out of range: allowed values are \(1, 2, 4\)"):
            ops.q8ta_conv2d_pw(q, *args, **bad, device=device)
    with pytest.raises(TypeError, match="weight must be int8"):
        ops.q8ta_conv2d_pw(q, *args[:2], w.astype(np.float32), *args[3:], device=device)
    with pytest.raises(TypeError, match="weight must be int8"):
        ops.q8ta_conv2d_pw(q, *args[:2], torch.from_numpy(w).to(torch.int16), *args[3:], device=device)
    with pytest.raises(ValueError, match="1x1 kernel"):
        ops.q8ta_conv2d_pw(q, *args[:2], np.zeros((4, 8, 3, 3), np.int8), *args[3:], device=device)
    with pytest.raises(ValueError, match=r"\(Cout, Cin\) or \(Cout, Cin, 1, 1\)"):
        ops.q8ta_conv2d_pw(q, *args[:2], np.zeros(8, np.int8), *args[3:], device=device)
    with pytest.raises(ValueError, match="weight has Cin=7 but the input has 8 channels"):
        ops.q8ta_conv2d_pw(q, *args[:2], np.zeros((4, 7), np.int8), *args[3:], device=device)
    with pytest.raises(ValueError, match="needs its input in layout 4W4C.*got 4C1W"):
        ops.q8ta_conv2d_pw(q, *args, in_layout="4C1W", device=device)
    with pytest.raises(ValueError, match="output layout must be one of"):
        ops.q8ta_conv2d_pw(q, *args, out_layout="4H4W", device=device)
    with pytest.raises(TypeError, match="q_input must be int8"):
        ops.q8ta_conv2d_pw(q.astype(np.float32), *args, device=device)
    with pytest.raises(ValueError, match="4-D NCHW"):
        ops.q8ta_conv2d_pw(q[0], *args, device=device)
    with pytest.raises(ValueError, match="weight_scales must have Cout=4"):
        ops.q8ta_conv2d_pw(q, *args[:3], scales[:3], *args[4:], device=device)
    with pytest.raises(ValueError, match=r"input_zero_point must be an int in \[-128, 127\]"):
        ops.q8ta_conv2d_pw(q, QP.input_scale, 300, *args[2:], device=device)
    with pytest.raises(ValueError, match="output_scale must be a finite positive"):
        ops.q8ta_conv2d_pw(q, *args[:5], 0.0, QP.output_zero_point, device=device)
    with pytest.raises(ValueError, match="a conv shape is"):
        K.ConvPwShape.coerce((1, 2, 3))


def test_dot_ext_on_a_device_without_it_is_refused(device, monkeypatch):
    from workbench.vk import MissingFeatureError
    monkeypatch.setitem(device.info.features, "integer_dot_product", False)
    q, w, scales, b = problem((1, 4, 4, 1, 4))
    with pytest.raises(MissingFeatureError, match="integer_dot_product"):
        ops.q8ta_conv2d_pw(q, 0.1, 0, w, scales, b, 0.1, 0, use_dot_ext=True, device=device)


# ---------------------------------------------------------------------------------------------------------------
# Registers and occupancy columns


def test_occupancy_columns_on_this_device_and_on_an_nvidia_like_one(device):
    cols = C.statistics_columns(device, SimpleNamespace(capture_statistics=False), (8, 8, 1))
    if device.info.is_cpu:
        assert np.isnan(cols["registers"]) and np.isnan(cols["occupancy"])
        assert cols["occupancy_limiter"] == "n/a (CPU device)"
    # an NVIDIA H100 reporting 'Register Count' 68 (TILE_N4=2 on an H200, occupancy.md B12)
    info = SimpleNamespace(name="NVIDIA H100 80GB HBM3", vendor_id=0x10DE, device_type="discrete GPU",
                           is_cpu=False, features={"pipeline_executable_properties": True})
    stats = {"Register Count": 68, "Binary Size": 4096, "Stack Size": 0, "Local Memory Size": 2**36,
             "Shared Memory Size": 0, "Subgroup Size": 32}
    pipeline = SimpleNamespace(capture_statistics=True, statistics=lambda: stats)
    cols = C.statistics_columns(SimpleNamespace(info=info), pipeline, (8, 8, 1))
    want = occ.nvidia_occupancy(68, 64, arch="sm_90")
    assert cols["registers"] == 68 and cols["register_unit"] == "scalar32" and cols["scratch_bytes"] == 0
    assert cols["binary_bytes"] == 4096  # NVIDIA's "Binary Size" (SASS bytes)
    assert cols["occupancy"] == want.occupancy and cols["occupancy_limiter"] == want.limiter


# ---------------------------------------------------------------------------------------------------------------
# Sweeps, the suite, pictures, the explorer


def test_bench_suite_quick_rows(device, tmp_path):
    with measure.ResultsWriter(tmp_path / "conv", measure.environment(device)) as writer:
        df = C.bench_suite(device, writer, quick=True, show_progress=False)
    ours = df[(df["method"] == "vulkan q8ta_conv2d_pw") & df["saturate"]]
    wrap = df[(df["method"] == "vulkan q8ta_conv2d_pw") & (df["saturate"] == False)]  # noqa: E712
    assert len(ours) == len(C.QUICK_TILES) * len(C.QUICK_SHAPES)
    assert len(wrap) >= 1 and (wrap["max_lsb_diff"] == 0).all() and wrap["variant"].str.contains("_wrap_").all()
    assert set(ours["tile"]) == {K.tile_label(*t) for t in C.QUICK_TILES}
    assert (ours["max_lsb_diff"] <= 1).all() and (ours["median_us"] > 0).all() and (ours["GOP/s"] > 0).all()
    assert (ours["macs"] == K.ConvPwShape.coerce(C.QUICK_SHAPES[0]).macs()).all()
    assert (ours["accumulators"] == 16 * ours["tile_m"] * ours["tile_n4"]).all()
    for column in ("registers", "occupancy", "occupancy_limiter", "model_sm90_occupancy_upper_bound",
                   "model_a740_occupancy_upper_bound", "macs_per_byte", "tile_macs_per_byte", "device", "driver"):
        assert column in df
    if device.info.is_cpu:
        assert ours["registers"].isna().all() and (ours["occupancy_limiter"] == "n/a (CPU device)").all()
    torch_rows = df[df["method"].str.startswith("torch")]
    assert len(torch_rows) >= 2 and (torch_rows["macs"] == ours["macs"].iloc[0]).all()
    assert len(pd.read_csv(tmp_path / "conv.csv")) == len(df)


def test_sweep_keeps_finished_rows_when_interrupted(device, tmp_path, monkeypatch):
    calls = []
    real = C.measure

    def flaky(*args, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kw)

    monkeypatch.setattr(C, "measure", flaky)
    writer = measure.ResultsWriter(tmp_path / "sweep")
    with pytest.raises(KeyboardInterrupt):
        C.sweep(device, [(1, 1, 1), (1, 2, 1)], [(1, 8, 8, 2, 4)], writer, show_progress=False,
                min_time_s=0.0, min_samples=2)
    assert len(pd.read_csv(tmp_path / "sweep.csv")) == 1


def _synthetic_sweep(with_registers: bool) -> pd.DataFrame:
    rows = []
    for m, n, k in K.ALL_TILES:
        spec = K.ConvPwSpec((1, 32, 32, 8, 8), m, n, k)
        row = {"method": "vulkan q8ta_conv2d_pw", "shape": spec.shape.label, "device": "test",
               **C.tile_columns(spec), **C.model_columns(m, n, k), "median_us": 10.0 * m * n + k,
               "p10_us": 9.0 * m * n + k, "p90_us": 11.0 * m * n + k, "GOP/s": 100.0 / (m * n + k)}
        regs = 30 + 16 * m * n if with_registers else np.nan
        row.update(registers=regs, register_unit="scalar32" if with_registers else "n/a (CPU device)",
                   occupancy=occ.nvidia_occupancy(regs, 64).occupancy if with_registers else np.nan,
                   occupancy_limiter="registers" if with_registers else "n/a (CPU device)",
                   occupancy_model="nvidia sm_90" if with_registers else "n/a (CPU device)")
        rows.append(row)
    return pd.DataFrame(rows)


@pytest.mark.parametrize("with_registers", [False, True])
def test_pictures(with_registers):
    from workbench.viz import tile_views as T
    df = _synthetic_sweep(with_registers)
    fig = T.thread_tile_view(2, 2, 1, width=13, out_channels=10, thread=(1, 0))
    assert [a for a in fig.axes[0].patches if a.get_gid() == "thread-tile"]
    assert "64 int32 accumulators" in fig.axes[0].get_title()
    assert T.tile_order(df)[:3] == ["M1·N1·K1", "M1·N1·K2", "M1·N1·K4"]
    T.time_vs_tile(df, highlight="M1·N2·K1")
    fig = T.registers_occupancy_vs_tile(df)
    texts = [t.get_gid() for ax in fig.axes for t in ax.texts]
    assert ("registers-na" in texts) != with_registers
    fig = T.gops_heatmap(df)
    labels = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "heat-label"]
    assert len(labels) == 9 and any("K4=1" in t for t in labels)
    assert fig._repr_png_().startswith(b"\x89PNG")


@pytest.mark.usefixtures("dot_device")
def test_tile_explorer_sliders_rerun_live(device):
    from workbench.viz.tile_views import TileExplorer
    explorer = TileExplorer(device, shapes=[(1, 16, 16, 4, 8), (1, 12, 8, 3, 5)], min_time_s=0.0, min_samples=2)
    try:
        assert "TILE_N4=1" in explorer.readout.value and "16 accumulators" in explorer.readout.value
        explorer.sliders["tile_n4"].value = 2
        text = explorer.readout.value
        assert "TILE_M=1 TILE_N4=2 TILE_K4=1 → 32 accumulators" in text and "median" in text
        assert "max |Δ| 0 LSB" in text or "max |Δ| 1 LSB" in text
        if device.info.is_cpu:
            assert "n/a (CPU device)" in text
        explorer.sliders["shape"].value = "1x12x3x5→8"
        explorer.set(tile_m=2, tile_k4=2)
        assert "TILE_M=2 TILE_N4=2 TILE_K4=2 → 64 accumulators" in explorer.readout.value
        assert len(explorer.history) == 4 and explorer.last_update_s > 0
        assert bytes(explorer.image.value).startswith(b"\x89PNG") and len(explorer.figure.axes) == 4
    finally:
        explorer.close()


def test_sweep_checks_first_image_of_large_batches(device):
    """check="first": the reference covers image 0 only, and the row still reports its difference (0 here)."""
    from workbench.kernels import conv_pw as K
    df = C.sweep(device, tiles=[(1, 1, 1)], shapes=[(3, 8, 12, 3, 5)], show_progress=False, check="first",
                 min_time_s=0.0, min_samples=2, target_us=10.0, adreno_gpu=None)
    assert df["max_lsb_diff"].tolist() == [0]


def test_gap_suite_pairs_memory_and_register_operand_builds(device):
    """`bench conv-gap` (quick): every tile twice; the real build is checked against the reference, the load-free
    diagnostic build is labelled wrong-by-design and carries the load cost; bad `operands` is refused."""
    df = C.gap_suite(device, quick=True, show_progress=False)
    assert len(df) == 2 * 2 and df["operands"].tolist() == ["memory", "registers"] * 2
    mem, regs = df[df["operands"] == "memory"], df[df["operands"] == "registers"]
    assert (mem["max_lsb_diff"] == 0).all() and (mem["status"] == "ok").all()
    assert regs["status"].str.startswith("diagnostic").all() and regs["load_cost"].notna().all()
    assert (df["GOP/s"] > 0).all()
    with pytest.raises(ValueError, match="operands must be"):
        K.ConvPwSpec((1, 8, 8, 4, 4), operands="cache")


# ---------------------------------------------------------------- conv tile figures (etvk.md §3.5)

def test_conv_pw_old_tile_2_67_mac_per_byte():
    old = K.conv_pw_tile_figures(1, 2, 1)
    assert old.macs_per_step == 128 and old.bytes_per_step == 48
    assert (old.input_bytes_per_step, old.weight_bytes_per_step) == (16, 32)
    assert old.macs_per_byte == pytest.approx(8 / 3) and round(old.macs_per_byte, 2) == 2.67
    assert old.accumulators == 32 and old.accumulator_registers == 32 and old.accumulator_registers_vec4 == 8
    assert old.dot_products_per_step == 32


def test_conv_pw_new_tile_2_0_mac_per_byte():
    new = K.conv_pw_tile_figures(1, 1, 1)
    assert new.macs_per_step == 64 and new.bytes_per_step == 32
    assert new.macs_per_byte == 2.0
    assert new.accumulators == 16 and new.accumulator_registers_vec4 == 4
    assert new.dot_products_per_step == 16                       # "16 dot-product ops per k4"
    assert new.macs_per_byte / K.conv_pw_tile_figures(1, 2).macs_per_byte == pytest.approx(0.75)   # −25 %


@pytest.mark.parametrize("tile_k4", [1, 2, 4])
def test_conv_pw_intensity_does_not_depend_on_tile_k4(tile_k4):
    assert K.conv_pw_tile_figures(1, 2, tile_k4).macs_per_byte == pytest.approx(8 / 3)
    assert K.conv_pw_tile_figures(1, 1, tile_k4).macs_per_byte == 2.0


def test_conv_pw_two_width_variant():
    assert K.conv_pw_tile_figures(0.5, 2).macs_per_byte == pytest.approx(64 / 48)           # 1.33, −50 %
    assert K.conv_pw_tile_figures(0.5, 2, whole_input_blocks=False).macs_per_byte == pytest.approx(1.6)
    with pytest.raises(ValueError):
        K.conv_pw_tile_figures(0.3, 1)
