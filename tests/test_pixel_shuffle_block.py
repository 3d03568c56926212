"""The block pixel shuffle's thread orders (tile_co) and requantize paths (magic-number arithmetic, int<->float
conversions), the requant copy, and the pixel-shuffle-block suite (quick: rows and columns, no timing asserts)."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from workbench.kernels import pixel_shuffle as K
from workbench.kernels import pixel_shuffle_block as B

PAIRS = [(a, b) for a in K.FUSED_LAYOUTS for b in K.FUSED_LAYOUTS]
# every byte value, twice (batch 2): (2, 64, 2, 2) = 512 int8
ALL_BYTES = np.stack([np.random.default_rng(s).permutation(256) - 128 for s in (0, 1)]).astype(np.int8)
ALL_BYTES_SHAPE = (2, 64, 2, 2)


def _torch_q8_reference(q, s_in, zp_in, s_out, zp_out):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's quantized tensors print a deprecation warning
        x = torch._make_per_tensor_quantized_tensor(q, s_in, zp_in).dequantize()
        return torch.quantize_per_tensor(F.pixel_shuffle(x, 2), s_out, zp_out, torch.qint8).int_repr()


def _run(device, spec, q):
    with K.Q8taPixelShuffleRun(device, spec, q) as run:
        run.run()
        return run.output()


_scale = st.floats(-18, 18).map(lambda e: float(np.float32(10.0 ** e)))  # tiny to huge, fp32 values


def _etvk_floor_passthrough(s_in, s_out, spec) -> bool:
    """ET-VK's passthrough rule took scales that differ by more than 1e-7 relative as equal (its absolute floor)."""
    return spec.passthrough and abs(s_in - s_out) > 1e-7 * abs(s_in)


def test_etvk_passthrough_rule_copies_bytes_at_tiny_scales(device):
    """ET-VK's pure-shuffle test (Q8taPixelShuffle.cpp: |s_in - s_out| <= 1e-7 · max(|s_in|, 1e-7), zero points
    equal) has an absolute floor of 1e-14: s_in = 1e-14 and s_out = 1e-15, a 10× requantize, count as equal, so the
    shuffle copies the bytes where torch's requantize saturates. The workbench's kernels keep ET-VK's rule (they
    reproduce its outputs); this pins the difference."""
    q = torch.tensor([-39, 20, 117, -60, 1, 0, -1, 12], dtype=torch.int8).reshape(1, 8, 1, 1)
    spec = B.Q8taPixelShuffleBlockSpec((1, 8, 1, 1), 2, "4W4C", "4W4C", 1e-14, 0, 1e-15, 0)
    assert spec.passthrough
    got = _run(device, spec, q)
    assert torch.equal(got, F.pixel_shuffle(q.float(), 2).to(torch.int8))  # the input's bytes, moved
    expected = _torch_q8_reference(q, 1e-14, 0, 1e-15, 0)  # × 10, saturated
    assert torch.equal(expected.int(), (F.pixel_shuffle(q.float(), 2) * 10).clamp(-128, 127).int())
    assert not torch.equal(got, expected)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=st.sampled_from(PAIRS), s_in=_scale, zp_in=st.integers(-128, 127), s_out=_scale,
       zp_out=st.integers(-128, 127))
@example(pair=("4W4C", "4W4C"), s_in=0.5, zp_in=0, s_out=1.0, zp_out=1)       # ties (k + 0.5), odd zp_out
@example(pair=("4C1W", "4C"), s_in=0.5, zp_in=3, s_out=1.0, zp_out=-7)
@example(pair=("4C", "4C1W"), s_in=1.5, zp_in=-128, s_out=1.0, zp_out=127)    # extreme zero points
@example(pair=("4W4C", "4C1W"), s_in=1e18, zp_in=0, s_out=1e-18, zp_out=0)    # saturating: s overflows to inf
@example(pair=("4C1W", "4W4C"), s_in=1e-18, zp_in=5, s_out=1.0, zp_out=-3)    # tiny: everything to zp_out
@example(pair=("4C", "4C"), s_in=0.007112, zp_in=0, s_out=0.013, zp_out=5)    # ET-VK's diff_qp
@example(pair=("4W4C", "4W4C"), s_in=1e-14, zp_in=0, s_out=1e-15, zp_out=0)   # ET-VK's rule: a byte copy
def test_magic_requant_bit_exact(device, pair, s_in, zp_in, s_out, zp_out):
    """The magic-number requantize (the default block path) on every byte value, bit for bit the fp32 reference
    (requantize_reference, op for op), the conversion path where it is defined (|s| < 2^31), and torch within 1 LSB;
    the same math on the requant copy."""
    q = torch.from_numpy(ALL_BYTES.reshape(ALL_BYTES_SHAPE))
    qp = (s_in, zp_in, s_out, zp_out)
    spec = B.Q8taPixelShuffleBlockSpec(ALL_BYTES_SHAPE, 2, *pair, *qp)
    got = _run(device, spec, q)
    assert np.array_equal(got.numpy(), spec.reference(q)), (pair, qp)
    if not _etvk_floor_passthrough(s_in, s_out, spec):  # where ET-VK's rule copies bytes, torch requantizes
        assert (got.int() - _torch_q8_reference(q, *qp).int()).abs().max() <= 1, (pair, qp)
    if 255 * s_in / s_out < 2.0 ** 30:
        convert = B.Q8taPixelShuffleBlockSpec(ALL_BYTES_SHAPE, 2, *pair, *qp, convert=True)
        assert torch.equal(_run(device, convert, q), got), (pair, qp)
    copy = B.Q8taRequantCopySpec(ALL_BYTES.size, *qp)
    with B.Q8taRequantCopyRun(device, copy, ALL_BYTES) as run:
        run.run()
        assert np.array_equal(run.output(), copy.reference(ALL_BYTES)), qp


# C_out = 20 (C4_out = 5: no tile size divides it), W = 13 (not a multiple of 4), batch 2; C_out = 64 for the
# pixel tile and the 16-byte 4C1W accesses (W = 8)
@pytest.mark.parametrize("shape", [(2, 80, 3, 13), (2, 256, 2, 8)])
@pytest.mark.parametrize("pair", PAIRS)
def test_thread_orders_every_pair(device, pair, shape):
    """Every thread order (tile_co) on both tiles, passthrough and requantize, padded tiles included."""
    q = torch.randint(-128, 128, shape, generator=torch.Generator().manual_seed(7), dtype=torch.int8)
    expected = {"same": F.pixel_shuffle(q, 2),
                "diff": torch.from_numpy(K.Q8taPixelShuffleSpec(shape, 2, *pair, *K.DIFF_QP).reference(q))}
    pixel = B.Q8taPixelShuffleBlockSpec(shape, 2, *pair).pixel_tile
    options = [dict(tile_co=t, pixel_tile=False) for t in (1, 4, 32)]
    if pixel:
        options += [dict(tile_co=t, pixel_tile=True) for t in (2, 8)]
    for kw in options:
        for name, qp in (("same", K.SAME_QP), ("diff", K.DIFF_QP)):  # one pipeline: passthrough is a push constant
            spec = B.Q8taPixelShuffleBlockSpec(shape, 2, *pair, *qp, **kw)
            assert torch.equal(_run(device, spec, q), expected[name]), (pair, shape, kw, name)


# W = 10: 3 input width blocks, so the last even lane has no partner; W = 8: every lane has one
@pytest.mark.parametrize("shape", [(2, 80, 3, 10), (2, 256, 2, 8)])
@pytest.mark.parametrize("in_layout", ["4W4C", "4C1W", "4C"])
def test_pair_store_into_4c1w(device, in_layout, shape):
    """Paired stores (lanes swap a block through a subgroup shuffle) give torch's answer, passthrough and
    requantize, at every thread order narrower than the subgroup; a wider one is refused with the reason."""
    q = torch.randint(-128, 128, shape, generator=torch.Generator().manual_seed(8), dtype=torch.int8)
    expected = {"same": F.pixel_shuffle(q, 2),
                "diff": torch.from_numpy(K.Q8taPixelShuffleSpec(shape, 2, in_layout, "4C1W",
                                                                *K.DIFF_QP).reference(q))}
    tiles = [t for t in (1, 2, 4, 8, 16) if t < device.info.subgroup_size]
    for t in tiles:
        for name, qp in (("same", K.SAME_QP), ("diff", K.DIFF_QP)):
            spec = B.Q8taPixelShuffleBlockSpec(shape, 2, in_layout, "4C1W", *qp, tile_co=t, pair_store=True)
            assert spec.variant.endswith("_pair")
            assert torch.equal(_run(device, spec, q), expected[name]), (in_layout, shape, t, name)
    wide = B.Q8taPixelShuffleBlockSpec(shape, 2, in_layout, "4C1W", tile_co=16, pair_store=True)
    if wide.tile_co >= device.info.subgroup_size:
        with pytest.raises(ValueError, match="subgroup wider"):
            _run(device, wide, q)
    with pytest.raises(ValueError, match="pair_store needs"):
        B.Q8taPixelShuffleBlockSpec(shape, 2, in_layout, "4W4C", tile_co=4, pair_store=True)


def test_block_options_and_errors():
    spec = B.Q8taPixelShuffleBlockSpec((2, 80, 3, 13), 2, "4W4C", "4C1W")   # C4_out 5, W4_in 4
    assert spec.tile_co == 4 and spec.variant.endswith("_t4")                      # 4C1W: tiled by default
    assert spec.threads == 2 * 3 * 8 * 8                                           # 5 → 8 blocks, 4 → 8 widths
    assert B.Q8taPixelShuffleBlockSpec((2, 80, 3, 13), 2, "4C1W", "4C1W", tile_co=32).threads \
        == 2 * 3 * 32 * 4                                                          # 5 → 32 blocks, 4 width blocks
    assert B.Q8taPixelShuffleBlockSpec((2, 80, 3, 13), 2, "4W4C", "4W4C").tile_co == 0
    pixel = B.Q8taPixelShuffleBlockSpec((2, 256, 2, 8), 2, "4C1W", "4C")
    assert pixel.pixel_tile and pixel.tile_co == 4                                 # G = 4 channel groups
    assert B.Q8taPixelShuffleBlockSpec((2, 8, 2, 8), 2, "4C", "4C1W").tile_co == 1   # C4_out = 1
    assert B.Q8taPixelShuffleBlockSpec((2, 24, 2, 8), 2, "4C1W", "4C1W").tile_co == 2  # C4_out = 2
    tiled = B.Q8taPixelShuffleBlockSpec((2, 256, 2, 8), 2, "4C1W", "4C", tile_co=8)
    assert tiled.threads == 2 * 2 * 8 * 8                                          # G = 4 → 8, W = 8 (4 per tile)
    cvt = B.Q8taPixelShuffleBlockSpec((1, 16, 2, 4), 2, "4W4C", "4W4C", *K.DIFF_QP, convert=True)
    assert cvt.variant == "q8ta_pixel_shuffle_block_cvt" and cvt.defines["REQUANT_CONVERT"]
    with pytest.raises(ValueError, match="tile_co must be one of"):
        B.Q8taPixelShuffleBlockSpec((1, 16, 2, 4), 2, tile_co=3)
    with pytest.raises(TypeError, match="unexpected keyword"):  # options of the block kernel\'s own spec
        K.Q8taPixelShuffleSpec((1, 16, 2, 4), 2, tile_co=4)
    with pytest.raises(TypeError, match="unexpected keyword"):  # options of the block kernel\'s own spec
        K.Q8taPixelShuffleSpec((1, 16, 2, 4), 2, convert=True)
    with pytest.raises(ValueError, match="choose one"):
        B.Q8taPixelShuffleBlockSpec((1, 16, 2, 4), 2, convert=True, lut=1)
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        B.Q8taRequantCopySpec(100)
    with pytest.raises(ValueError, match="output scale"):
        B.Q8taRequantCopySpec(64, 1.0, 0, 0.0, 0)


def test_requant_copy_partial_workgroup(device):
    """4 ivec4 per thread: a size that ends inside a workgroup, passthrough (a plain copy) and both math forms."""
    q = np.random.default_rng(3).integers(-128, 128, 16 * 1000, dtype=np.int8)   # 1000 ivec4: 3.9 workgroups
    for qp, convert in ((K.SAME_QP, False), (K.DIFF_QP, False), (K.DIFF_QP, True)):
        spec = B.Q8taRequantCopySpec(q.size, *qp, convert=convert)
        assert spec.threads == 256 and spec.bytes_moved() == 2 * q.size
        with B.Q8taRequantCopyRun(device, spec, q) as run:
            run.run()
            assert np.array_equal(run.output(), spec.reference(q)), (qp, convert)
    with pytest.raises(ValueError, match="expected 16016 int8 values"):
        B.Q8taRequantCopyRun(device, B.Q8taRequantCopySpec(16016), q)


def test_block_suite_quick(device, tmp_path):
    from workbench import measure
    from workbench.benchmarks import pixel_shuffle as PB
    with measure.ResultsWriter(tmp_path / "psb", measure.environment(device)) as writer:
        df = PB.limit_suite(device, writer, quick=True, show_progress=False, shape=(1, 64, 4, 8),
                           pairs=[("4W4C", "4C1W")])
    assert set(df["impl"]) == {"block", "requant-copy", "copy", "torch"}
    kernels = df[df.impl.isin(["block", "requant-copy"])]
    assert kernels["exact"].all()
    for col in ("variant", "qpath", "tile_co", "requant_math", "copy_fraction", "vs_torch", "GB/s", "bytes"):
        assert kernels[col].notna().all(), col
    block = kernels[kernels.impl == "block"]
    assert set(block["tile_co"]) == set(PB.TILES_OTHER)  # a CPU device: the short list of thread orders
    assert set(block["requant_math"]) == {"", "magic", "convert"}
    assert (kernels["bytes"] == 2 * 64 * 4 * 8).all()
    assert set(kernels[kernels.impl == "requant-copy"]["requant_math"]) == {"", "magic", "convert"}
    import pandas as pd
    assert len(pd.read_csv(tmp_path / "psb.csv")) == len(df)


def test_goals_read_the_block_suite(tmp_path):
    """`workbench roofline-check`'s goals table takes the rows of `bench pixel-shuffle-limit` beside the pixel
    shuffle suite's."""
    import pandas as pd

    from workbench import report
    row = dict(impl="block", shape="1x256x512x512", in_layout="4W4C", out_layout="4C1W", exact=True)
    pd.DataFrame([{**row, "qpath": "passthrough", "variant": "a_t4", "copy_fraction": 0.88},
                  {**row, "qpath": "passthrough", "variant": "a", "copy_fraction": 0.55},
                  {**row, "qpath": "requant", "variant": "a_t4", "copy_fraction": 0.75, "exact": False},
                  {"impl": "requant-copy", "shape": "1x256x512x512", "qpath": "requant", "variant": "q8ta_requant_copy",
                   "copy_fraction": 0.97, "exact": True},
                  {"impl": "copy", "shape": "", "copy_fraction": float("nan")}]).to_csv(
        tmp_path / "pixel_shuffle_limit.csv", index=False)
    table = report.goals(tmp_path, roofs={}).set_index("what")
    assert table.loc["pixel shuffle block kernels exact on this device", "measured"] == pytest.approx(2 / 3)
    shuffle = table[table.index.str.startswith("pixel shuffle 1x256")]
    assert shuffle["measured"].tolist() == [0.88, 0.75] and shuffle["met"].tolist() == [True, False]
    assert "best a_t4" in shuffle.index[0]
    why = table[table.index.str.startswith("requant math on a plain 16-byte copy")]
    assert why["measured"].tolist() == [0.97] and why["met"].tolist() == [None]
