"""Issue 25's gap variants: the integer requantize (requant_fixed: one multiply-add and a shift per byte, proven
exact on the host), the staged 4C1W input (shared memory), the pixel-shuffle-gaps suite and the instruction counts;
issue 35's for the pairs still short: the wide pixel tile (`pixel_widths=4`: 4 input widths a thread, 16-byte loads
and stores), the integer requantize two bytes per multiply (`packed`), every variant of `PAIRS_VARIANTS`, the pairs
suite and its GPU tool. Every kernel against the independent fp32 reference (requantize_reference) / torch's
pixel_shuffle."""
import runpy
from pathlib import Path

import numpy as np
import pandas as pd
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


# C_out 64 with W 8 (16-byte loads), C_out 62 (C4_out 16, a partial last block; 4C input by words) with W 6 (4C1W
# by words, a partial width block), C_out 128 (G = 8) with odd H and W 5, batch 2-3
WIDE_SHAPES = [(2, 256, 2, 8), (2, 248, 3, 6), (3, 512, 3, 5)]


@pytest.mark.parametrize("in_layout", K.FUSED_LAYOUTS)
def test_wide_pixel_tile(device, in_layout):
    """pixel_widths=4 from every input layout, passthrough and every requantize path, both thread orders, against
    torch / the fp32 reference."""
    for i, shape in enumerate(WIDE_SHAPES):
        q = _q(shape, 20 + i)
        for tile in (None, 2):
            same = B.Q8taPixelShuffleBlockSpec(shape, 2, in_layout, "4C", *K.SAME_QP, pixel_widths=4, tile_co=tile)
            assert same.pixel_tile and same.defines["PIXEL_W"] == 4 and "_pw4" in same.variant
            assert np.array_equal(_run(device, same, q), F.pixel_shuffle(q, 2).numpy()), (in_layout, shape, tile)
        for qp, kw in ((K.DIFF_QP, {}), (K.DIFF_QP, {"fixed": True}), (K.DIFF_QP, {"fixed": True, "packed": True}),
                       (SATURATING_QP, {"fixed": True})):
            spec = B.Q8taPixelShuffleBlockSpec(shape, 2, in_layout, "4C", *qp, pixel_widths=4, **kw)
            assert np.array_equal(_run(device, spec, q), spec.reference(q)), (in_layout, shape, qp, kw)


def test_wide_pixel_tile_threads():
    spec = B.Q8taPixelShuffleBlockSpec((2, 248, 3, 6), 2, "4C1W", "4C", pixel_widths=4, tile_co=0)
    assert spec.threads == 2 * 3 * 2 * 4                     # rows × width blocks (6 → 2) × G (C4_out 16 → 4)
    assert spec.vector_access == (False, True)               # W 6: 4C1W by words; 16-byte stores
    assert B.Q8taPixelShuffleBlockSpec((1, 256, 2, 8), 2, "4C1W", "4C", pixel_widths=4).vector_access == (True, True)


def test_packed_line_matches_the_fp32_reference_on_every_byte():
    """The host's proof for the two-lane form: where a line is returned it equals the fp32 reference on all 256
    inputs and keeps its lanes apart (mul · 255 + add < 2^24, add >= 0, shift 8..16, no clamp); saturating qparams
    have none and are refused by name."""
    rng = np.random.default_rng(7)
    found = 0
    for _ in range(150):
        s_in = float(np.float32(10 ** rng.uniform(-4, 1)))
        s_out = float(np.float32(s_in * 10 ** rng.uniform(-0.5, 1.0)))   # ratios ~0.1-3: mostly no saturation
        zp_in, zp_out = (int(z) for z in rng.integers(-20, 20, 2))
        form = R.fixed_point_requant(s_in, zp_in, s_out, zp_out, packed=True)
        if form is None:
            continue
        found += 1
        assert np.array_equal(form.apply(R.ALL_INT8), K.requantize_reference(R.ALL_INT8, s_in, zp_in, s_out, zp_out))
        assert not form.clamp and form.add >= 0 and 8 <= form.shift <= 16
        assert form.mul * 255 + form.add < R.PACKED_LANE_LIMIT
    assert found >= 40
    form = R.fixed_point_requant(*K.DIFF_QP, packed=True)
    assert form is not None and form != R.fixed_point_requant(*K.DIFF_QP)
    assert R.fixed_point_requant(*SATURATING_QP, packed=True) is None
    with pytest.raises(ValueError, match="no packed fixed-point requantize.*use packed=False"):
        B.Q8taPixelShuffleBlockSpec((1, 16, 2, 4), 2, "4W4C", "4W4C", *SATURATING_QP, fixed=True, packed=True)


def test_packed_requant_copy_every_byte(device):
    """The shader's two-lane arithmetic (64-bit product, carry, both lanes) on every byte value, several lines."""
    rng = np.random.default_rng(11)
    q = np.concatenate([np.random.default_rng(s).permutation(256) - 128 for s in range(4)]).astype(np.int8)
    tried = 0
    for _ in range(60):
        qp = (float(np.float32(10 ** rng.uniform(-3, 0))), int(rng.integers(-20, 20)), 0.0, int(rng.integers(-20, 20)))
        qp = (qp[0], qp[1], float(np.float32(qp[0] * 10 ** rng.uniform(-0.4, 1.0))), qp[3])
        if R.fixed_point_requant(*qp, packed=True) is None:
            continue
        spec = B.Q8taRequantCopySpec(q.size, *qp, fixed=True, packed=True)
        assert spec.variant == "q8ta_requant_copy_fix2" and spec.defines["REQUANT_PACKED"]
        with B.Q8taRequantCopyRun(device, spec, q) as run:
            run.run()
            assert np.array_equal(run.output(), spec.reference(q)), (qp, spec.fixed_form)
        tried += 1
        if tried == 8:
            break
    assert tried == 8


@pytest.mark.parametrize("pair", PAIRS)
def test_packed_requant_every_pair(device, pair):
    """packed on every pair, default tile and the two-stage transpose, awkward shapes with batch > 1."""
    for i, shape in enumerate([(2, 80, 3, 13), (3, 36, 5, 7)]):
        q = _q(shape, 30 + i)
        for kw in ({}, {"swizzle": True}):
            spec = B.Q8taPixelShuffleBlockSpec(shape, 2, *pair, *K.DIFF_QP, fixed=True, packed=True, **kw)
            assert spec.variant.endswith("_fix2")
            assert np.array_equal(_run(device, spec, q), spec.reference(q)), (pair, shape, kw)


def test_pairs_variants_exact(device):
    """Every kernel of the pairs suite at awkward shapes (batch 2-3, partial width and channel blocks where its
    options allow them) against its reference; pair_store wider than this device's subgroup is skipped by name."""
    from workbench.benchmarks import pixel_shuffle_gaps as G
    items = G.pairs_items((1, 64, 4, 8))
    assert not [s for _, s in items if isinstance(s, str)]
    checked = 0
    for role, spec in items:
        if isinstance(spec, B.Q8taRequantCopySpec):
            continue
        for i, shape in enumerate([(2, 256, 3, 8), (3, 248, 2, 6), (2, 80, 3, 12)]):
            try:
                s = spec.with_shape(shape)
                s.check_device(device)
            except ValueError:   # the pixel tile needs C4_out % 4 == 0; pair_store a subgroup wider than tile_co
                continue
            q = _q(shape, 40 + i)
            assert np.array_equal(_run(device, s, q), s.reference(q)), (role, s.variant, shape)
            checked += 1
    assert checked >= 50


def test_pairs_options_refused_clearly():
    with pytest.raises(ValueError, match="pixel_widths must be one of"):
        B.Q8taPixelShuffleBlockSpec((1, 64, 2, 8), 2, "4C1W", "4C", pixel_widths=2)
    with pytest.raises(ValueError, match="pixel_widths=4 widens the pixel tile.*got pixel_tile=False"):
        B.Q8taPixelShuffleBlockSpec((1, 64, 2, 8), 2, "4C1W", "4C", pixel_widths=4, pixel_tile=False)
    with pytest.raises(ValueError, match="pixel_widths=4 widens the pixel tile.*4C1W → 4C1W"):
        B.Q8taPixelShuffleBlockSpec((1, 64, 2, 8), 2, "4C1W", "4C1W", pixel_widths=4)
    with pytest.raises(ValueError, match="packed .* needs fixed=True"):
        B.Q8taPixelShuffleBlockSpec((1, 64, 2, 8), 2, "4W4C", "4W4C", *K.DIFF_QP, packed=True)
    with pytest.raises(ValueError, match="packed .* needs fixed=True"):
        B.Q8taRequantCopySpec(64, *K.DIFF_QP, packed=True)


def test_pairs_tool_dry_run(device, tmp_path):
    """tools/gpu_pixel_shuffle_pairs.py at a tiny shape: one CSV, the limit table's columns first, every kernel that
    ran exact, percent of copy against the copy of the same run."""
    tool = runpy.run_path(str(Path(__file__).resolve().parents[1] / "tools" / "gpu_pixel_shuffle_pairs.py"))
    assert tool["main"]([str(tmp_path), "--quick", "--shape", "1,64,4,8"]) == 0
    df = pd.read_csv(tmp_path / "pixel_shuffle_pairs.csv")
    limit = Path(__file__).resolve().parents[1] / "data" / "NVIDIA_H200" / "pixel_shuffle_limit.csv"
    first = list(pd.read_csv(limit, nrows=0).columns)
    assert list(df.columns[:len(first)]) == first and {"variant", "role", "round", "pct_of_copy"} <= set(df.columns)
    kernels = df[df["role"] != "copy"]
    ran = kernels[kernels["error"].fillna("") == ""]
    assert set(kernels["role"]) == {"old-best", "new", "ceiling"} and ran["exact"].all()
    assert np.allclose(ran["copy_fraction"], ran["GB/s"] / ran["copy_GBps"])
    assert {"fixed", "fixed-packed"} <= set(ran["requant_math"]) and (ran["pixel_widths"] == 4).any()
    assert tool["main"]([str(tmp_path), "--shape", "1,64"]) == 2      # a one-line error, no traceback


def test_diagnostic_builds_run_and_are_refused_elsewhere(device):
    """Loads-only and stores-only builds of the 4-width tile into 4C run on the device (wrong by design); other
    outputs and the pixel tile are refused in one line."""
    from workbench.benchmarks import pixel_shuffle_gaps as G
    from workbench.benchmarks.pixel_shuffle import check_exact
    from workbench.kernels.pixel_shuffle_block import Q8taPixelShuffleBlockSpec
    shape = (1, 64, 8, 8)
    for d in (1, 2):
        spec = Q8taPixelShuffleBlockSpec(shape, 2, "4C1W", "4C", *G.SAME_QP, pixel_tile=False, tile_co=0, diagnostic=d)
        assert spec.defines["DIAG"] == d and spec.variant.endswith(("_diag_loads", "_diag_stores")[d - 1])
        assert not check_exact(device, spec)
    with pytest.raises(ValueError, match="4-width tile into 4C"):
        Q8taPixelShuffleBlockSpec(shape, 2, "4C", "4C1W", *G.SAME_QP, diagnostic=1)
