"""Issue 25's gap variants: the integer requantize (requant_fixed: one multiply-add and a shift per byte, proven
exact on the host), the staged 4C1W input (shared memory), the pixel-shuffle-gaps suite and the instruction counts.
Every kernel against the independent fp32 reference (requantize_reference) / torch's pixel_shuffle."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from workbench.kernels import pixel_shuffle as K
from workbench.kernels import pixel_shuffle_block as B
from workbench.kernels import requant_fixed as R

PAIRS = [(a, b) for a in K.FUSED_LAYOUTS for b in K.FUSED_LAYOUTS]
SATURATING_QP = (0.05, 0, 0.013, 5)
# C_out 20 (C4_out 5), W 13 (not a multiple of 4), batch 2; C_out 64 and W 8 (16-byte accesses); C_out 9 (a partial
# last block), odd H and W, batch 3; C_out 72 (C4_out 18: two staged channel tiles, the second one partial)
SHAPES = [(2, 80, 3, 13), (2, 256, 2, 8), (3, 36, 5, 7), (2, 288, 1, 6)]


def _run(device, spec, q):
    with K.Q8taPixelShuffleRun(device, spec, q) as run:
        run.run()
        return run.output().numpy()


def _q(shape, seed):
    return torch.randint(-128, 128, shape, generator=torch.Generator().manual_seed(seed), dtype=torch.int8)


def test_fixed_point_matches_the_fp32_reference_on_every_byte():
    """The host's proof: where a line is returned it equals the fp32 reference on all 256 inputs (and torch within
    1 LSB); a tie-to-even pattern (ratio exactly 0.5) has no line and is refused by name."""
    rng = np.random.default_rng(5)
    found = 0
    for _ in range(200):
        s_in = float(np.float32(10 ** rng.uniform(-5, 2)))
        s_out = float(np.float32(s_in * 10 ** rng.uniform(-2.5, 2.5)))
        zp_in, zp_out = (int(z) for z in rng.integers(-128, 128, 2))
        form = R.fixed_point_requant(s_in, zp_in, s_out, zp_out)
        if form is None:
            continue
        found += 1
        expected = K.requantize_reference(R.ALL_INT8, s_in, zp_in, s_out, zp_out)
        assert np.array_equal(form.apply(R.ALL_INT8), expected), (s_in, zp_in, s_out, zp_out, form)
        assert abs(form.mul) * 255 + abs(form.add) < 2 ** 31   # int32 arithmetic in the shader
        raw = (form.mul * (R.ALL_INT8.astype(np.int64) + 128) + form.add) >> form.shift
        assert form.clamp or (raw.min() >= 0 and raw.max() <= 255)   # no clamp only where none is needed
    assert found >= 190                                        # the common case has a line
    assert not R.fixed_point_requant(*K.DIFF_QP).clamp and R.fixed_point_requant(*SATURATING_QP).clamp
    assert R.fixed_point_requant(0.5, 0, 1.0, 0) is None       # 0.5 → 0, 1.5 → 2, 2.5 → 2: no floor line
    with pytest.raises(ValueError, match="no exact fixed-point requantize"):
        B.Q8taPixelShuffleBlockSpec((1, 16, 2, 4), 2, "4W4C", "4W4C", 0.5, 0, 1.0, 0, fixed=True)


@pytest.mark.parametrize("pair", PAIRS)
def test_fixed_requant_every_pair(device, pair):
    """The integer requantize on every pair at awkward shapes, unsaturated (no clamps) and saturating qparams,
    bit for bit the fp32 reference; passthrough qparams through the same pipeline are a plain shuffle."""
    for i, shape in enumerate(SHAPES[:3]):
        q = _q(shape, i)
        for qp in (K.DIFF_QP, SATURATING_QP):
            spec = B.Q8taPixelShuffleBlockSpec(shape, 2, *pair, *qp, fixed=True)
            assert spec.defines["REQUANT_FIXED"] and len(spec.push_constants()) == 36
            assert np.array_equal(_run(device, spec, q), spec.reference(q)), (pair, shape, qp)
        same = B.Q8taPixelShuffleBlockSpec(shape, 2, *pair, *K.SAME_QP, fixed=True)
        assert np.array_equal(_run(device, same, q), F.pixel_shuffle(q, 2).numpy()), (pair, shape)


@pytest.mark.parametrize("out_layout", K.FUSED_LAYOUTS)
def test_staged_4c1w_input(device, out_layout):
    """4C1W input through shared memory, every output layout, every tile width, passthrough and both requantize
    maths, against torch / the fp32 reference (partial channel and width tiles, words and 16-byte loads)."""
    for i, shape in enumerate(SHAPES):
        q = _q(shape, 10 + i)
        for stage in B.STAGE_CHOICES[1:]:
            for qp, kw in ((K.SAME_QP, {}), (K.DIFF_QP, {}), (K.DIFF_QP, {"fixed": True})):
                spec = B.Q8taPixelShuffleBlockSpec(shape, 2, "4C1W", out_layout, *qp, stage=stage, **kw)
                assert spec.local_size == (16 * stage, 1, 1) and not spec.pixel_tile and spec.tile_co == 0
                assert np.array_equal(_run(device, spec, q), spec.reference(q)), (out_layout, shape, stage, qp, kw)


def test_requant_copy_fixed(device):
    """The ceiling kernel with the same integer math: partial last workgroup, clamped and unclamped."""
    q = np.random.default_rng(4).integers(-128, 128, 16 * 1000, dtype=np.int8)
    for qp in (K.DIFF_QP, SATURATING_QP, K.SAME_QP):
        spec = B.Q8taRequantCopySpec(q.size, *qp, fixed=True)
        assert spec.variant == "q8ta_requant_copy" + ("_fixsat" if qp is SATURATING_QP else "_fix")
        with B.Q8taRequantCopyRun(device, spec, q) as run:
            run.run()
            assert np.array_equal(run.output(), spec.reference(q)), qp


def test_gap_options_refused_clearly():
    shape = (1, 64, 2, 8)
    with pytest.raises(ValueError, match="stage stages 4C1W input.*got input layout 4W4C"):
        B.Q8taPixelShuffleBlockSpec(shape, 2, "4W4C", "4C", stage=8)
    with pytest.raises(ValueError, match="stage must be one of"):
        B.Q8taPixelShuffleBlockSpec(shape, 2, "4C1W", "4C", stage=3)
    with pytest.raises(ValueError, match="own thread order.*tile_co=4"):
        B.Q8taPixelShuffleBlockSpec(shape, 2, "4C1W", "4C", stage=8, tile_co=4)
    with pytest.raises(ValueError, match="own thread order.*pixel_tile=True"):
        B.Q8taPixelShuffleBlockSpec(shape, 2, "4C1W", "4C", stage=8, pixel_tile=True)
    with pytest.raises(ValueError, match="local size to 16 x 8 = 128; got local_x=256"):
        B.Q8taPixelShuffleBlockSpec(shape, 2, "4C1W", "4C", stage=8, local_x=256)
    with pytest.raises(ValueError, match="neither convert nor lut"):
        B.Q8taPixelShuffleBlockSpec(shape, 2, "4W4C", "4W4C", *K.DIFF_QP, fixed=True, convert=True)
    with pytest.raises(ValueError, match="neither convert nor lut"):
        B.Q8taPixelShuffleBlockSpec(shape, 2, fixed=True, lut=1)
    with pytest.raises(ValueError, match="takes no convert"):
        B.Q8taRequantCopySpec(64, *K.DIFF_QP, convert=True, fixed=True)
    staged = B.Q8taPixelShuffleBlockSpec((2, 288, 3, 13), 2, "4C1W", "4C", stage=4)
    assert staged.threads == 2 * 3 * 1 * 2 * 64       # W4 4 → 1 tile of 4, C4_out 18 → 2 tiles of 16, 64 each
    assert staged.variant.endswith("_stage4")
    from workbench.benchmarks import pixel_shuffle_gaps as G
    with pytest.raises(ValueError, match="unknown layout pair"):
        G.gap_items((1, 64, 4, 8), pairs=[("4C", "NCHW")])


def test_gaps_suite_quick(device, tmp_path):
    """One pair and the ceiling: old best, staged and integer kernels, each exact on this device, percent of copy,
    rows on disk as they come."""
    from workbench import measure
    from workbench.benchmarks import pixel_shuffle_gaps as G
    with measure.ResultsWriter(tmp_path / "gaps", measure.environment(device)) as writer:
        df = G.gaps_suite(device, writer, quick=True, show_progress=False, shape=(1, 64, 4, 8),
                          pairs=[("4C1W", "4C")])
    assert set(df["role"]) == {"copy", "old-best", "new", "ceiling"}
    kernels = df[df["role"] != "copy"]
    assert (kernels["error"] == "").all() and kernels["exact"].all()
    assert kernels["pct_of_copy"].notna().all() and (kernels["pct_of_copy"] > 0).all()
    assert {"fixed", "magic", "lut", "convert", ""} >= set(kernels["requant_math"])
    assert set(kernels[kernels["role"] == "new"]["stage"]) == {0, 4, 8, 16}
    import pandas as pd
    assert len(pd.read_csv(tmp_path / "gaps.csv")) == len(df)
    summary = G.gap_summary(df)
    assert {"4C1W->4C", "requant-copy"} <= set(summary["pair"])


def test_requant_instruction_counts_spirv():
    """SPIR-V operations per byte requantized: the integer path asks for fewer ALU operations than the
    magic-number path, and its clamps cost more (no device, no Mesa)."""
    from workbench.benchmarks import pixel_shuffle_gaps as G
    df = G.requant_instruction_counts(mesa=False).set_index("math")
    assert (df["gpu"] == "spirv").all()
    assert df.loc["none (copy)", "alu_per_byte"] == 0
    assert df.loc["fixed", "alu_per_byte"] < df.loc["fixed + clamp", "alu_per_byte"] < df.loc["magic", "alu_per_byte"]
    assert df.loc["fixed", "float"] == 0 and df.loc["magic", "float"] > 0
