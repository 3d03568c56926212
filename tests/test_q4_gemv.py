"""The workbench's 4-bit group-wise GEMV (workbench.kernels.q4_gemv) against the float64 torchao reference on the
device, its weight packing, its refusals, its suite's quick rows and the vendors' comparison."""
import numpy as np
import pytest
import torch

from workbench.kernels import q4_gemv as Q
from workbench.kernels.q4_gemv import Q4GemvSpec

# (N, K, group): N not a multiple of a work group's rows (16 by default) and K not of its K chunk (32 threads x 32
# values); K = 2080 = 65 groups of 32 (a chunk and a bit); fewer rows than one work group; one row, one group.
SHAPES = [(100, 96, 32), (37, 2080, 32), (5, 256, 128), (1, 64, 64), (64, 512, 64)]
# every value of every axis of the tuning space at least once, the fp16 inputs, M > 1
VARIANTS = [{}, {"dequant": "convert"}, {"reduce": "subgroup"},
            {"reduce": "subgroup", "threads_k": 64, "local_x": 128},    # across subgroups through shared memory
            {"reduce": "subgroup", "threads_k": 4, "local_x": 32},      # several row sets per subgroup
            {"threads_k": 8, "rows": 1, "local_x": 32, "vec": 1},
            {"threads_k": 16, "rows": 2, "local_x": 64, "vec": 2},
            {"threads_k": 128, "rows": 8, "local_x": 256},
            {"threads_k": 256, "rows": 1, "local_x": 256, "dequant": "convert"},
            {"act_dtype": "half"}, {"scale_dtype": "half", "vec": 2}, {"m": 2}, {"m": 4, "reduce": "subgroup"},
            {"m": 8, "rows": 2, "dequant": "convert"}, {"m": 3, "act_dtype": "half", "scale_dtype": "half"},
            # loads ahead of use: a main loop of whole unrolled steps and a one-vector tail (K=2080: 65 vectors)
            {"unroll": 2, "threads_k": 64, "reduce": "subgroup", "dequant": "convert"},
            {"unroll": 4, "rows": 1, "threads_k": 4, "local_x": 32, "reduce": "subgroup"},
            {"unroll": 8, "rows": 2, "threads_k": 8, "local_x": 32, "vec": 1, "m": 2},
            {"rows": 2, "threads_k": 64, "reduce": "subgroup", "act_dtype": "half", "scale_dtype": "half"},
            # packed fp16 dequantize-and-multiply: every vector width, M > 1, loads ahead
            {"dequant": "half2", "act_dtype": "half"}, {"dequant": "half2", "act_dtype": "half", "vec": 1, "m": 3},
            {"dequant": "half2", "act_dtype": "half", "scale_dtype": "half", "vec": 2, "threads_k": 64,
             "reduce": "subgroup", "unroll": 2}]


def _ids(cases):
    return ["-".join(f"{k}={v}" for k, v in c.items()) or "default" for c in cases]


@pytest.mark.parametrize("shape", SHAPES, ids=[f"n{n}-k{k}-g{g}" for n, k, g in SHAPES])
def test_default_variant_matches_reference(device, shape):
    n, k, g = shape
    result = Q.check(device, Q4GemvSpec(n, k, g))
    assert result["correct"], result


@pytest.mark.parametrize("options", VARIANTS, ids=_ids(VARIANTS))
def test_every_variant_matches_reference(device, options):
    for n, k, g in ((100, 96, 32), (37, 2080, 32), (5, 256, 128)):
        spec = Q4GemvSpec(n, k, g, **options)
        result = Q.check(device, spec, seed=n)
        assert result["correct"], (spec.variant, (n, k, g), result)


def test_half2_needs_fp16_activations():
    with pytest.raises(ValueError, match="need act_dtype='half'"):
        Q4GemvSpec(8, 64, dequant="half2")


def test_loads_only_diagnostic_runs_and_is_wrong_by_design(device):
    """The diagnostic keeps every load and drops the arithmetic: it runs, and its output is not the GEMV's."""
    for level, suffix in ((1, "_diag_loads"), (2, "_diag_weights")):
        spec = Q4GemvSpec(64, 256, 32, act_dtype="half", diagnostic=level)
        assert spec.variant.endswith(suffix) and spec.defines["DIAG_LOADS"] == level
        assert not Q.check(device, spec)["correct"]
    with pytest.raises(ValueError, match="diagnostic is 0, 1"):
        Q4GemvSpec(64, 256, 32, act_dtype="half", diagnostic=3)


_HALF2 = {"dequant": "half2", "act_dtype": "half"}
_TILED = {"layout": "tiled", "dequant": "half2", "act_dtype": "half", "scale_dtype": "half", "reduce": "subgroup"}


_DQ8 = {"layout": "tiled", "dequant": "dq8", "act_dtype": "int8", "scale_dtype": "half", "reduce": "subgroup",
        "x_regs": True, "lane_chunks": True}


@pytest.mark.parametrize("options", [{}, _HALF2, _TILED, dict(_TILED, x_regs=True, threads_k=64, acc16=True),
                                     dict(_DQ8, threads_k=32)],
                         ids=["magic", "half2", "tiled", "tiled-x_regs-acc16", "dq8"])
def test_a_wrong_weight_is_caught(device, options):
    """The tolerance is tight enough that one flipped nibble in one row shows (the fp16 builds' looser one too)."""
    if options.get("dequant") == "dq8":
        device.require("integer_dot_product")
    spec = Q4GemvSpec(40, 256, 32, **options)
    x, q, scales = Q.random_problem(spec)
    bad = q.copy()
    bad[7, 100] = 7 if q[7, 100] < 0 else -8
    with Q.Q4GemvRun(device, spec, x, bad, scales) as run:
        run.run()
        got = run.output()
    expected, tolerance = Q.expected(spec, x, q, scales)
    err = np.abs(got - expected)
    assert err[0, 7] > tolerance and np.delete(err, 7, axis=1).max() <= tolerance


def test_pack_layout_and_roundtrip():
    q = np.arange(16, dtype=np.int8).reshape(1, 16) - 8   # -8 .. 7 along K
    words = Q.pack_weights(q)
    assert words.tolist() == [[0x76543210, 0xFEDCBA98]]   # nibble i of word j = q[8j + i] + 8
    rng = np.random.default_rng(0)
    q = rng.integers(-8, 8, (7, 96), dtype=np.int8)
    assert np.array_equal(Q.unpack_weights(Q.pack_weights(q), 96), q)


def test_quantization_is_the_etvk_export_s():
    """The same torchao int4 symmetric per-group mapping as the ET-VK families' (their `quantize_weight`)."""
    from workbench.etvk.families.linear_q4gsw_shared import dequantized, quantize_weight
    w4, scales = quantize_weight(24, 128, 32, torch.Generator().manual_seed(3))
    w = torch.randn((24, 128), generator=torch.Generator().manual_seed(3)) * 0.05
    q, s = Q.quantize_int4(w, 32)
    assert torch.equal(q, w4) and torch.equal(s, scales)
    assert int(q.min()) >= -8 and int(q.max()) <= 7
    assert torch.equal(Q.dequantize_int4(q, s, 32), dequantized(w4, scales, 32))


BAD = [(dict(n=0, k=64), "n must be a positive integer"),
       (dict(n=8, k=100, group_size=32), "K must be a multiple of group_size"),
       (dict(n=8, k=64, group_size=16), "group_size must be a multiple of 8·vec = 32"),
       (dict(n=8, k=64, m=9), "m (activation rows) must be 1..8"),
       (dict(n=8, k=64, threads_k=12), "threads_k must be one of"),
       (dict(n=8, k=64, threads_k=64, local_x=32), "local_x must be a multiple of threads_k"),
       (dict(n=8, k=64, dequant="lut"), "dequant must be one of"),
       (dict(n=8, k=64, reduce="atomic"), "reduce must be one of"),
       (dict(n=8, k=64, act_dtype="bf16"), "act_dtype must be one of"),
       (dict(n=8, k=64, rows=3), "rows must be one of"),
       (dict(n=8, k=64, unroll=3), "unroll must be one of"),
       (dict(n=8, k=64, rows=8, unroll=4), "unroll·rows (weight vectors held per thread) must be at most 16")]


@pytest.mark.parametrize("kwargs, message", BAD, ids=[m for _, m in BAD])
def test_bad_configs_refused_in_one_line(kwargs, message):
    with pytest.raises(ValueError) as error:
        Q4GemvSpec(**kwargs)
    text = str(error.value)
    assert message in text and "\n" not in text, text


def test_bad_operands_refused(device):
    spec = Q4GemvSpec(8, 64)
    x, q, scales = Q.random_problem(spec)
    with pytest.raises(ValueError, match=r"scales must be \(8, 2\)"):
        Q.Q4GemvRun(device, spec, x, q, scales[:, :1])
    with pytest.raises(ValueError, match="int4 values -8..7"):
        Q.pack_weights(q.astype(np.int16) * 4)


def test_traffic_counts():
    spec = Q4GemvSpec(2048, 2048, 32, m=2, scale_dtype="half")
    assert spec.bytes_moved() == 2048 * 2048 // 2 + 2048 * 64 * 2 + 2 * 2048 * 4 + 2 * 2048 * 4
    assert spec.macs() == 2 * 2048 * 2048
    assert spec.rows_per_group == 16 and spec.work_groups == 128


def test_quick_suite_rows(device, tmp_path):
    import pandas as pd

    from workbench import measure
    from workbench.benchmarks import q4_gemv as B
    with measure.ResultsWriter(tmp_path / "q4", measure.environment(device)) as writer:
        df = B.bench_suite(device, writer, quick=True, show_progress=False)
    assert set(df["impl"]) == {"copy", "workbench", "etvk"}
    ours = df[df.impl == "workbench"]
    assert len(ours) == len(B.specs(quick=True))
    for col in ("bytes", "GB/s", "copy_GBps", "copy_fraction", "exact", "correct", "max_abs_diff", "tolerance",
                "variant", "threads_k", "rows", "vec", "dequant", "reduce", "m", "k", "n", "group_size", "model"):
        assert ours[col].notna().all(), col
    assert ours["exact"].all() and (ours["max_abs_diff"] <= ours["tolerance"]).all()
    etvk = df[df.impl == "etvk"]
    assert len(etvk) == len({(s.k, s.n, s.group_size, s.m) for _, s in B.specs(quick=True)})
    ran = etvk[etvk.status == "ok"]
    assert (etvk.status == "skipped").all() or len(ran) == len(etvk)
    if len(ran):  # a checkout is configured: ET-VK's rows are timed, checked and put against the copy
        assert ran["correct"].all() and ran["copy_fraction"].notna().all()
        assert set(ran[ran.m == 1]["kernel"]) == {B.ETVK_GEMV}
    else:
        assert etvk["reason"].str.contains("WORKBENCH_EXECUTORCH").all()
    assert len(pd.read_csv(tmp_path / "q4.csv")) == len(df)


def test_vendor_rows():
    from workbench.vendors import mesa
    if not mesa.is_set_up():
        pytest.skip(f"the offline vendor compilers are not set up in {mesa.cache_root()}")
    from workbench.benchmarks import q4_gemv as B
    df = B.vendor_rows(("a740",))
    ours = df[df.impl == "workbench"]
    assert len(ours) == len(B.VENDOR_VARIANTS) and ours["error"].isna().all()
    assert (ours["instructions"] > 0).all() and (ours["registers"] > 0).all()
    assert np.allclose(ours["instructions_per_weight_byte"], ours["instructions"] / ours["weight_bytes_per_step"])


# The tiled layout (shaders/q4_gemv_tiled.glsl): every build — loads batched, the prefetch ring, activations staged
# in shared memory, capped work groups looping over tile sets, activations in registers (fp32 or fp16 sums, chunks
# strided or consecutive per thread), two tiles a thread, M > 1, tile sets spanning subgroups (threads_k > the
# subgroup size) or several per subgroup.
TILED_VARIANTS = [{}, {"unroll": 2, "rows": 8}, {"prefetch": True, "unroll": 4}, {"act_shared": True, "m": 2},
                  {"max_groups": 3, "unroll": 2, "prefetch": True}, {"threads_k": 8, "local_x": 32},
                  {"threads_k": 128, "local_x": 256, "m": 3},
                  {"x_regs": True, "threads_k": 64, "max_groups": 2}, {"x_regs": True, "threads_k": 128, "acc16": True},
                  {"x_regs": True, "threads_k": 64, "lane_chunks": True, "rows": 8, "max_groups": 5},
                  {"x_regs": True, "threads_k": 128, "lane_chunks": True, "acc16": True, "m": 2}]


@pytest.mark.parametrize("options", TILED_VARIANTS, ids=_ids(TILED_VARIANTS))
def test_tiled_layout_matches_reference(device, options):
    # N not a multiple of 4 (a padded tile) nor of a work group's rows; K = 2080 (65 groups); group 16 and 128
    for n, k, g in ((100, 96, 32), (37, 2080, 32), (5, 256, 128), (30, 1024, 16)):
        try:
            spec = Q4GemvSpec(n, k, g, **_TILED, **options)
        except ValueError as error:  # activations in registers: only where a thread holds at most 16 vectors
            assert "x_regs holds" in str(error) and spec_steps(k, options) * options.get("m", 1) > 16
            continue
        result = Q.check(device, spec, seed=n)
        assert result["correct"], (spec.variant, (n, k, g), result)


def spec_steps(k, options):
    return -(-k // (8 * options.get("threads_k", 32)))


def test_tiled_packing_round_trips():
    rng = np.random.default_rng(0)
    q = rng.integers(-8, 8, size=(10, 64)).astype(np.int8)
    words = Q.pack_weights_tiled(q)
    assert words.shape == (3, 8, 4) and (words[2, :, 2:] == 0x88888888).all()  # rows 10, 11: zero weights
    assert (Q.unpack_weights_tiled(words, 10, 64) == q).all()
    assert (words[1, 5, 2] == Q.pack_weights(q)[6, 5])  # tile 1, chunk 5, row 4·1 + 2
    scales = rng.random((10, 2)).astype(np.float32)
    packed = Q.pack_scales_tiled(scales).view(np.float16).reshape(3, 2, 4)
    assert np.array_equal(packed[2, 1, :2], scales[8:, 1].astype(np.float16)) and (packed[2, :, 2:] == 0).all()
    # lane_chunks: thread t's chunk s of a tile stored at s·threads_k + t (K = 64: 8 chunks, 4 threads, 2 steps)
    spec = Q4GemvSpec(10, 64, 32, **_TILED, x_regs=True, threads_k=4, lane_chunks=True)
    lc = spec.pack(q, scales)[0].reshape(3, 8, 4)
    assert spec.steps == 2 and (lc[0, 1 * 4 + 3] == words[0, 3 * 2 + 1]).all()


def test_tiled_diagnostics_run_and_are_wrong_by_design(device):
    for level, suffix in ((1, "_diag_loads"), (2, "_diag_weights"), (3, "_diag_weights_scales"),
                          (4, "_diag_no_scales"), (5, "_diag_cached")):
        spec = Q4GemvSpec(64, 256, 32, **_TILED, x_regs=level in (3, 4), threads_k=64, diagnostic=level)
        assert spec.variant.endswith(suffix)
        assert not Q.check(device, spec)["correct"]


@pytest.mark.parametrize("kwargs, message", [
    ({"dequant": "magic"}, "layout='tiled' is one build of"),
    ({"rows": 2}, "takes rows 4 or 8"),
    ({"max_groups": -1}, "max_groups must be 0"),
    ({"x_regs": True, "k": 14336, "threads_k": 32}, "x_regs holds M·ceil"),
    ({"x_regs": True, "unroll": 2}, "x_regs loads a whole tile ahead"),
    ({"acc16": True}, "acc16 is a build of x_regs"),
    ({"lane_chunks": True}, "lane_chunks is a build of x_regs"),
    ({"prefetch": "yes"}, "prefetch must be True or False"),
    ({"group_size": 12, "k": 96}, "group_size a multiple of 8"),
])
def test_tiled_refusals(kwargs, message):
    args = {"n": 8, "k": 256, "group_size": 32, **_TILED, **kwargs}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("·", ".")):
        Q4GemvSpec(**args)


def test_tiled_only_options_are_refused_on_rows():
    with pytest.raises(ValueError, match="belong to layout='tiled'"):
        Q4GemvSpec(8, 64, x_regs=True)


# The int8-activation build (torchao's 8da4w numerics): thread counts whose chunks align with the scale groups and
# ones that do not (K = 14336 at 128 / 256 threads: 14 / 7 chunks a thread, 4 a group), persistent groups, M > 1.
DQ8_VARIANTS = [{"threads_k": 32}, {"threads_k": 64, "max_groups": 3}, {"threads_k": 128, "m": 2},
                {"threads_k": 256, "local_x": 256}, {"threads_k": 128, "m": 3, "max_groups": 1}]


@pytest.mark.parametrize("options", DQ8_VARIANTS, ids=_ids(DQ8_VARIANTS))
def test_dq8_matches_8da4w(device, options):
    device.require("integer_dot_product")
    for n, k, g in ((100, 96, 32), (37, 2080, 32), (5, 256, 128), (30, 1024, 16), (9, 14336, 32)):
        try:
            spec = Q4GemvSpec(n, k, g, **_DQ8, **options)
        except ValueError as error:
            assert "x_regs holds" in str(error)
            continue
        result = Q.check(device, spec, seed=n)
        assert result["correct"], (spec.variant, (n, k, g), result)


def test_dq8_reference_is_torchao_8da4w():
    """The build's reference quantizes activations as torchao's 8da4w and multiplies in float64: against torchao's
    own dequantize of the same int8 activations it agrees to float64 rounding."""
    import torch
    from torchao.quantization.quant_primitives import dequantize_affine
    spec = Q4GemvSpec(24, 128, 32, **_DQ8)
    x, q, scales = Q.random_problem(spec)
    x_q, s_x, zp = Q.quantize_activations_int8(x)
    x_deq = dequantize_affine(torch.as_tensor(x_q), (1, 128), torch.as_tensor(s_x)[:, None],
                              torch.as_tensor(zp, dtype=torch.int8)[:, None], torch.int8, quant_min=-128,
                              quant_max=127, output_dtype=torch.float32).double()
    want = (x_deq @ Q.dequantize_int4(q, scales, 32).T).numpy()
    got, tolerance = Q.reference_dq8(x, q, scales, 32)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max() and tolerance > 0
    packed = Q.pack_activations_dq8(x_q).reshape(1, 16, 4)
    lanes = packed[0, 3, :2].view(np.int8)  # the even word's 4 bytes, then the odd word's
    assert (lanes[:4] == x_q[0, 24:32:2]).all() and (lanes[4:] == x_q[0, 25:32:2]).all()  # chunk 3: even, odd
    assert packed[0, 3, 2] == -8 * int(x_q[0, 24:32].astype(np.int64).sum())


@pytest.mark.parametrize("kwargs, message", [
    ({"layout": "rows"}, "dequant='dq8' is a build of layout='tiled'"),
    ({"lane_chunks": False}, "dequant='dq8' is one build of"),
    ({"rows": 8}, "dequant='dq8' is one build of"),
    ({"act_dtype": "half"}, "layout='tiled' is one build of"),
    ({"layout": "rows", "dequant": "magic", "act_dtype": "int8"}, "int8 activations and dequant='dq8' go together"),
])
def test_dq8_refusals(kwargs, message):
    args = {"n": 8, "k": 256, "group_size": 32, **_DQ8, **kwargs}
    if kwargs.get("layout") == "rows":
        args = {k: v for k, v in args.items() if k not in ("x_regs", "lane_chunks")}
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        Q4GemvSpec(**args)


def test_buildable_keeps_the_options_a_shape_admits():
    from workbench.benchmarks import q4_gemv as B
    awkward = B.QUICK_SHAPES[1]                      # K = 96, N = 100
    assert B.buildable(awkward, 32, [{}, {"layout": "tiled"}, {"dequant": "nope"}]) == [{}]
