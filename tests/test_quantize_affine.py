"""Block-wise affine quantize / dequantize on the Vulkan device against the torch reference (torchao's definition)."""
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import ops
from workbench.kernels import quantize_affine as K
from workbench.toolchain.shaders import variants
from workbench.vk import MissingFeatureError

STORAGES = [("buffer", "width"), ("buffer", "channels"), ("buffer", "height"),
            ("texture", "width"), ("texture", "channels")]
CASES = K.reference_cases()


def _qparams(case):
    return torch.tensor(case["scale"], dtype=torch.float32), torch.tensor(case["zero_point"], dtype=torch.int32)


# ---------------------------------------------------------------------------------------------------------------------
# the reference itself
# ---------------------------------------------------------------------------------------------------------------------

def test_reference_is_torchao_definition():
    """Against a literal per-element loop: block = index // block_size, id W-fastest over num_blocks."""
    case = CASES[2]
    x = torch.rand(case["shape"], generator=torch.Generator().manual_seed(1)) * 4 - 2
    scale, zp = _qparams(case)
    q = K.torchao_quantize_affine(x, case["block_size"], scale, zp, -128, 127, torch.int8)
    ids = K.block_ids(case["shape"], case["block_size"])
    for idx in np.ndindex(*case["shape"]):
        b = ids[idx]
        nb = K.num_blocks(case["shape"], case["block_size"])
        assert b == np.ravel_multi_index(tuple(i // s for i, s in zip(idx, case["block_size"])), nb)
        inv = np.float32(1.0) / np.float32(max(np.float32(scale[b]), np.float32(1e-7)))
        v = np.float32(np.float32(x[idx]) * inv)
        want = int(np.clip(np.float32(np.round(v)) + np.float32(zp[b]), -128, 127))
        assert int(q[idx]) == want
    dq = K.torchao_dequantize_affine(q, case["block_size"], scale, zp)
    assert torch.equal(dq, (q.int() - zp[ids].int()).float() * scale[ids])


def test_granularities():
    assert K.block_size_for("per_tensor", (4, 6)) == (4, 6)
    assert K.block_size_for("per_channel", (8, 3, 2, 2)) == (1, 3, 2, 2)
    assert K.block_size_for("per_channel", (8, 6), axis=1) == (8, 1)
    assert K.block_size_for("per_token", (2, 5, 16)) == (1, 1, 16)
    assert K.block_size_for("per_group", (4, 64), group_size=32) == (1, 32)
    assert K.block_count((8, 6, 6, 6), (2, 3, 2, 3)) == 48


def test_variants_match_specs():
    """Every YAML variant is what some spec builds (same defines), and every spec names an existing variant."""
    for shader in (K.QUANTIZE_SHADER, K.DEQUANTIZE_SHADER):
        found = variants(shader)
        op = "quantize" if shader == K.QUANTIZE_SHADER else "dequantize"
        for storage in K.STORAGES:
            for fd in K.FLOAT_DTYPES:
                for qd in K.QUANT_DTYPES:
                    spec = K.AffineSpec(op, (4, 4), (2, 2), storage, "width", fd, qd)
                    assert found[spec.variant] == spec.defines, spec.variant


# ---------------------------------------------------------------------------------------------------------------------
# the reference's four cases, every storage, fp32 and fp16, quantize and dequantize: exact
# ---------------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
@pytest.mark.parametrize("storage,layout", STORAGES)
def test_reference_cases(device, case, storage, layout):
    scale, zp = _qparams(case)
    bs = case["block_size"]
    x = torch.rand(case["shape"], generator=torch.Generator().manual_seed(0))   # U[0, 1) as the C++ test
    for dtype in (torch.float32, torch.float16):
        xx = x.to(dtype)
        want = K.torchao_quantize_affine(xx, bs, scale, zp, -128, 127, torch.int8)
        got = ops.quantize_affine(xx, bs, scale, zp, -128, 127, torch.int8, storage=storage, layout=layout,
                                  device=device)
        assert got.dtype == torch.int8 and got.shape == x.shape
        assert torch.equal(got, want), (dtype, (got.int() - want.int()).abs().max())
        q = torch.randint(-128, 128, case["shape"], dtype=torch.int8, generator=torch.Generator().manual_seed(2))
        dq = ops.dequantize_affine(q, bs, scale, zp, -128, 127, output_dtype=dtype, storage=storage, layout=layout,
                                   device=device)
        assert dq.dtype == dtype
        assert torch.equal(dq, K.torchao_dequantize_affine(q, bs, scale, zp).to(dtype))   # fp32, then one rounding


@pytest.mark.parametrize("storage,layout", [("buffer", "channels"), ("texture", "width")])
@pytest.mark.parametrize("qdtype,qmin,qmax", [(torch.uint8, 0, 255), (torch.int32, -1000, 70000),
                                              (torch.int8, -8, 7)])
def test_other_dtypes_and_ranges(device, storage, layout, qdtype, qmin, qmax):
    shape, bs = (2, 6, 4, 5), (1, 3, 4, 1)
    n = K.block_count(shape, bs)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(shape, generator=g) * 50
    scale = torch.rand(n, generator=g) * 0.5 + 0.01
    zp = torch.randint(qmin, qmax + 1, (n,), generator=g)
    want = K.torchao_quantize_affine(x, bs, scale, zp, qmin, qmax, qdtype)
    got = ops.quantize_affine(x, bs, scale, zp, qmin, qmax, qdtype, storage=storage, layout=layout, device=device)
    assert got.dtype == qdtype and torch.equal(got, want)
    assert int(want.min()) >= qmin and int(want.max()) <= qmax
    back = ops.dequantize_affine(got, bs, scale, zp, qmin, qmax, storage=storage, layout=layout, device=device)
    assert torch.equal(back, K.torchao_dequantize_affine(got, bs, scale, zp))


def test_ties_round_half_to_even(device):
    """x · (1/scale) exactly k + 0.5: roundEven on the GPU, torch.round (half-to-even) in the reference."""
    x = torch.arange(-8, 8, dtype=torch.float32) + 0.5
    for storage in K.STORAGES:
        got = ops.quantize_affine(x, [16], torch.tensor([1.0]), None, storage=storage, device=device)
        assert got.tolist() == [int(v) for v in torch.round(x).tolist()]
        assert got.tolist()[:4] == [-8, -6, -6, -4]   # -7.5 → -8, -6.5 → -6, -5.5 → -6, -4.5 → -4


def test_scale_clamp_and_saturation(device):
    x = torch.tensor([[1e-6, -1e-6, 3.0, -3.0]])
    scale = torch.tensor([[0.0, 1e-9, 1.0, 1.0]])   # block (1, 1): one scale per element
    # torchao 0.18 divides by the raw scale (1/0 → inf → saturates); the kernel follows ET-VK's shader, which clamps
    # the scale to ≥ 1e-7 first: the one place the two definitions differ (scales below 1e-7)
    assert K.torchao_quantize_affine(x, (1, 1), scale, None).tolist() == [[127, -128, 3, -3]]
    want = torch.tensor([[10, -10, 3, -3]], dtype=torch.int8)
    for storage in K.STORAGES:
        assert torch.equal(ops.quantize_affine(x, (1, 1), scale, None, storage=storage, device=device), want)
    big = ops.quantize_affine(torch.tensor([1e6, -1e6]), [1], torch.tensor([1e-3, 1e-3]), None, device=device)
    assert big.tolist() == [127, -128]


def test_fp16_output_rounds_to_nearest_even(device):
    """Dequantize to fp16 over subnormals, normals and overflow: equal to torch's fp32 → fp16 (RTE) everywhere,
    also on textures (lavapipe's rgba16f store truncates; the shader rounds before storing)."""
    q = torch.arange(-70000, 70000, 37, dtype=torch.int32)[:3780].reshape(3, 1260)
    scale = torch.tensor([1e-9, 0.0137, 1.01])
    for storage in K.STORAGES:
        got = ops.dequantize_affine(q, (1, 1260), scale, None, output_dtype=torch.float16, storage=storage,
                                    device=device)
        # the kernel dequantizes in fp32 and rounds once to fp16 (ET-VK's order); torchao's fp16 output computes in
        # fp16 (q − zp overflows to inf there), so the reference is torchao's fp32 result rounded to fp16
        want = K.torchao_dequantize_affine(q, (1, 1260), scale, None).to(torch.float16)
        assert torch.equal(got, want), storage
        assert torch.isinf(want[2]).any() and (want[0].abs() < 6.1e-5).any()
    assert not torch.equal(K.torchao_dequantize_affine(q, (1, 1260), scale, None, output_dtype=torch.float16), want)


# ---------------------------------------------------------------------------------------------------------------------
# random shapes and blocks
# ---------------------------------------------------------------------------------------------------------------------

@st.composite
def shapes_and_blocks(draw):
    ndim = draw(st.integers(1, 4))
    shape, bs = [], []
    for _ in range(ndim):
        b = draw(st.integers(1, 4))
        shape.append(b * draw(st.integers(1, 3)))
        bs.append(b)
    return tuple(shape), tuple(bs)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(sb=shapes_and_blocks(), storage=st.sampled_from(STORAGES), seed=st.integers(0, 2**16),
       qdtype=st.sampled_from([torch.int8, torch.uint8, torch.int32]), half=st.booleans())
def test_random_shapes_and_blocks(device, sb, storage, seed, qdtype, half):
    shape, bs = sb
    n = K.block_count(shape, bs)
    g = torch.Generator().manual_seed(seed)
    dtype = torch.float16 if half else torch.float32
    x = (torch.randn(shape, generator=g) * 3).to(dtype)
    scale = torch.rand(n, generator=g) * 0.2 + 0.005
    lo, hi = K.QUANT_DTYPES[K.dtype_name(qdtype, "quant")][2:]
    zp = torch.randint(max(lo, -100), min(hi, 100) + 1, (n,), generator=g)
    st_, lay = storage
    q = ops.quantize_affine(x, bs, scale, zp, None, None, qdtype, storage=st_, layout=lay, device=device)
    assert torch.equal(q, K.torchao_quantize_affine(x, bs, scale, zp, None, None, qdtype))
    dq = ops.dequantize_affine(q, bs, scale, zp, output_dtype=dtype, storage=st_, layout=lay, device=device)
    assert torch.equal(dq, K.torchao_dequantize_affine(q, bs, scale, zp).to(dtype))   # fp32, then one rounding


# ---------------------------------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------------------------------

def test_bad_inputs(device):
    x = torch.randn(8, 6)
    with pytest.raises(ValueError, match=r"does not divide shape \[8, 6\].*dim 1 has size 6.*block 4"):
        ops.quantize_affine(x, (2, 4), torch.ones(8), None, device=device)
    with pytest.raises(ValueError, match="expected 2 entries.*got 3"):
        ops.quantize_affine(x, (2, 3, 1), torch.ones(8), None, device=device)
    with pytest.raises(ValueError, match=r"scale must have one entry per block: expected 8 .*got 6"):
        ops.quantize_affine(x, (2, 3), torch.ones(6), None, device=device)
    with pytest.raises(ValueError, match=r"zero_point must have one entry per block: expected 8.*got 9"):
        ops.quantize_affine(x, (2, 3), torch.ones(8), torch.zeros(9, dtype=torch.int32), device=device)
    with pytest.raises(TypeError, match="float32 or float16 input, got torch.float64"):
        ops.quantize_affine(x.double(), (2, 3), torch.ones(8), None, device=device)
    with pytest.raises(TypeError, match="unsupported quantized output dtype torch.int16"):
        ops.quantize_affine(x, (2, 3), torch.ones(8), None, output_dtype=torch.int16, device=device)
    with pytest.raises(ValueError, match=r"quant_max = 200 is outside the range of int8 \[-128, 127\]"):
        ops.quantize_affine(x, (2, 3), torch.ones(8), None, -128, 200, torch.int8, device=device)
    with pytest.raises(ValueError, match=r"quant_min = -1 is outside the range of uint8 \[0, 255\]"):
        ops.quantize_affine(x, (2, 3), torch.ones(8), None, -1, 255, torch.uint8, device=device)
    with pytest.raises(ValueError, match="quant_min must be <= quant_max"):
        ops.quantize_affine(x, (2, 3), torch.ones(8), None, 5, 4, torch.int8, device=device)
    with pytest.raises(NotImplementedError, match="zero_point_domain FLOAT is not supported"):
        ops.quantize_affine(x, (2, 3), torch.ones(8), None, zero_point_domain="FLOAT", device=device)
    with pytest.raises(ValueError, match="1 to 4 dims"):
        ops.quantize_affine(torch.randn(1, 2, 2, 2, 2), (1, 1, 1, 1, 1), torch.ones(16), None, device=device)
    with pytest.raises(ValueError, match="unknown storage"):
        ops.quantize_affine(x, (2, 3), torch.ones(8), None, storage="tex", device=device)
    with pytest.raises(TypeError, match="unsupported quantized output dtype torch.float32"):
        ops.dequantize_affine(x, (2, 3), torch.ones(8), None, device=device)
    with pytest.raises(TypeError, match="unsupported float dtype torch.int8"):
        ops.dequantize_affine(x.to(torch.int8), (2, 3), torch.ones(8), None, output_dtype=torch.int8, device=device)
    with pytest.raises(ValueError, match="integer values"):
        ops.quantize_affine(x, (2, 3), torch.ones(8), torch.full((8,), 0.5), device=device)


def test_fp16_buffers_need_16bit_storage(device, monkeypatch):
    monkeypatch.setitem(device.info.features, "storage_buffer_16bit", False)
    x = torch.randn(4, 8).half()
    with pytest.raises(MissingFeatureError, match="storage_buffer_16bit"):
        ops.quantize_affine(x, (1, 8), torch.ones(4), None, device=device)
    q = ops.quantize_affine(x, (1, 8), torch.ones(4), None, storage="texture", device=device)  # rgba16f: fine
    assert torch.equal(q, K.torchao_quantize_affine(x, (1, 8), torch.ones(4), None))


# ---------------------------------------------------------------------------------------------------------------------
# device representation and benchmarks
# ---------------------------------------------------------------------------------------------------------------------

def test_int8_buffer_words_are_packed(device):
    """int8 buffers: 4 lanes per int32 word over the float layout's linear order, last word's spare lanes 0."""
    x = torch.arange(6, dtype=torch.float32).reshape(1, 6) - 3          # -3 .. 2
    spec = K.AffineSpec("quantize", (1, 6), (1, 6), "buffer", "width", "float32", "int8")
    assert spec.threads == 2 and spec.quant_nbytes() == 8
    with K.AffineRun(device, spec, x, torch.ones(1), None) as run:
        run.run()
        words = run.out.download(np.int32)[:2]
    assert words.view(np.int8).tolist() == [-3, -2, -1, 0, 1, 2, 0, 0]


def test_bench_suite_quick(device):
    from workbench.benchmarks import quantize_affine as QB
    df = QB.bench_suite(device, quick=True, show_progress=False)
    kern = df[df["op"].isin(["quantize", "dequantize"])]
    assert len(kern) == 12 and (kern["GB/s"] > 0).all()
    assert kern["copy_GBps"].notna().all() and kern["shader_copy_GBps"].notna().all()
    assert set(kern["storage"]) == {"buffer", "texture"} and (df["op"] == "copy").any()
    assert {"granularity", "block_size", "num_blocks", "copy_fraction", "device", "commit"} <= set(df.columns)
