"""Hypothesis over the ops' argument space: every call either matches torch / torchao or raises one of the
documented exception types (TypeError, ValueError, NotImplementedError, vk.MissingFeatureError). Shapes stay tiny:
each example is a real dispatch on the device (validation layer on)."""
import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from workbench import ops, vk

DOCUMENTED = (TypeError, ValueError, NotImplementedError, vk.MissingFeatureError)
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

def mostly(good: list, bad: list):
    """Valid values four times out of five: most examples compute, the rest probe the refusals."""
    return st.sampled_from(good * 4 + bad)


@st.composite
def shuffle_case(draw):
    """(shape, r): channels a multiple of r² most of the time; ranks 3 and 4 mostly, 2 and 5 sometimes."""
    r = draw(mostly([1, 2, 2, 3], [0, -1, 1.5, "2", None]))
    rr = r * r if isinstance(r, int) and r > 0 else 4
    channels = draw(st.integers(1, 3)) * rr + draw(mostly([0], [1]))
    h, w = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    rank = draw(mostly([3, 4], [2, 5]))
    shape = {2: (channels, h), 3: (channels, h, w), 4: (draw(st.integers(1, 2)), channels, h, w),
             5: (1, channels, h, w, 1)}[rank]
    return shape, r


def _tensor(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 3).to(dtype)
    return torch.randint(-128, 128, shape, generator=g).to(dtype)


@FUZZ
@given(case=shuffle_case(), dtype=mostly([torch.float32, torch.float16], [torch.float64, torch.int8]),
       storage=mostly(["buffer", "texture"], ["disk"]), layout=mostly(["channels", "width", "height"], ["depth"]),
       seed=st.integers(0, 3))
def test_pixel_shuffle_matches_torch_or_refuses(device, case, dtype, storage, layout, seed):
    shape, r = case
    x = _tensor(shape, dtype, seed)
    try:
        got = ops.pixel_shuffle(x, r, storage=storage, layout=layout, device=device)
    except DOCUMENTED as exc:
        event(f"refused: {type(exc).__name__}")
        return
    event("computed")
    want = F.pixel_shuffle(x, r)  # torch must accept what we accepted
    assert got.dtype == want.dtype and torch.equal(got, want)


@FUZZ
@given(case=shuffle_case(), zp_in=mostly([-5, 0, 7], [-130, 128]), zp_out=mostly([-3, 0, 11], [200]),
       s_in=mostly([0.05, 0.013], [0.0, -1.0, float("nan")]), s_out=mostly([0.05, 0.011], [0.0]),
       fused=st.booleans(), dtype=mostly([torch.int8], [torch.uint8, torch.float32]), seed=st.integers(0, 3))
def test_q8ta_pixel_shuffle_matches_torch_or_refuses(device, case, zp_in, zp_out, s_in, s_out, fused, dtype, seed):
    shape, r = case
    q = _tensor(shape, dtype, seed)
    try:
        got = ops.q8ta_pixel_shuffle(q, r, s_in, zp_in, s_out, zp_out, fused=fused, device=device)
    except DOCUMENTED as exc:
        event(f"refused: {type(exc).__name__}")
        return
    event("computed")
    x = (q.float() - zp_in) * s_in
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.quantize_per_tensor(F.pixel_shuffle(x, r), s_out, zp_out, torch.qint8).int_repr()
    assert got.shape == want.shape and got.dtype == torch.int8
    assert (got.int() - want.int()).abs().max() <= 1  # torch rounds x·inv_scale + zp in one fma


@st.composite
def affine_case(draw):
    """(shape, block_size): blocks that divide the shape most of the time (1, the whole dim, or a divisor)."""
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=draw(mostly([4], [5])))))
    block = []
    for size in shape:
        divisors = [d for d in range(1, size + 1) if size % d == 0]
        block.append(draw(mostly(divisors, [0, size + 1] + ([4] if size % 4 else []))))
    block += draw(mostly([[]], [[1]]))
    return shape, block


@FUZZ
@given(case=affine_case(), qdtype=mostly([torch.int8, torch.uint8, torch.int32], [torch.float32]),
       xdtype=mostly([torch.float32, torch.float16], [torch.int8]), storage=mostly(["buffer", "texture"], ["cloud"]),
       layout=mostly(["width", "height", "channels"], ["x"]), use_zp=st.booleans(), seed=st.integers(0, 3))
def test_quantize_affine_matches_torchao_or_refuses(device, case, qdtype, xdtype, storage, layout, use_zp, seed):
    from torchao.quantization.quant_primitives import dequantize_affine, quantize_affine
    shape, block_size = case
    x = _tensor(shape, xdtype, seed)
    nb = [s // b if b and s % b == 0 else 1 for s, b in zip(shape, block_size)]
    g = torch.Generator().manual_seed(seed)
    scale = torch.rand(nb, generator=g) * 0.2 + 0.01
    zp = torch.randint(-3, 4, nb, generator=g).to(torch.int32) if use_zp else None
    try:
        got = ops.quantize_affine(x, block_size, scale, zp, output_dtype=qdtype, storage=storage, layout=layout,
                                  device=device)
    except DOCUMENTED as exc:
        event(f"refused: {type(exc).__name__}")
        return
    event("computed")
    zeros = zp if zp is not None else torch.zeros(nb, dtype=torch.int32)
    info = torch.iinfo(qdtype)
    want = quantize_affine(x.float(), block_size, scale, zeros, qdtype, info.min, info.max)
    assert got.dtype == qdtype and got.shape == x.shape
    assert (got.long() - want.long()).abs().max() <= 1  # x·(1/s) on the device vs torchao's x/s: ties may differ
    back = ops.dequantize_affine(got, block_size, scale, zp, storage=storage, layout=layout, device=device)
    torch.testing.assert_close(back, dequantize_affine(got, block_size, scale, zeros, qdtype, info.min, info.max,
                                                       output_dtype=torch.float32), rtol=1e-6, atol=1e-6)
