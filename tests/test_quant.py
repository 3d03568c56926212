"""workbench.quant vs torch.quantize_per_tensor / dequantize, bit-exact."""
from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.quant import dequantize_per_tensor, fma_f32, inverse_scale, quantize_per_tensor

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")       # torch's quantized-dtype deprecation notice


def torch_q(x: np.ndarray, scale, zp, dtype=torch.qint8) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.quantize_per_tensor(torch.from_numpy(np.ascontiguousarray(x, np.float32)), float(scale), int(zp),
                                         dtype).int_repr().numpy()


def test_random_values_bit_exact():
    rng = np.random.default_rng(0)
    total = 0
    for _ in range(120):
        scale = float(np.exp(rng.uniform(-10, 3)))
        zp = int(rng.integers(-128, 128))
        n = int(rng.integers(1, 3000))
        x = (rng.standard_normal(n) * scale * rng.uniform(1, 300)).astype(np.float32)
        np.testing.assert_array_equal(quantize_per_tensor(x, scale, zp), torch_q(x, scale, zp),
                                      err_msg=f"scale={scale!r} zp={zp}")
        total += n
    assert total > 100_000


def test_exact_ties_round_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 126.5, -127.5, -128.5], np.float32)
    assert quantize_per_tensor(x, 1.0, 0).tolist() == [0, 2, 2, 0, -2, -2, 4, 126, -128, -128]
    np.testing.assert_array_equal(quantize_per_tensor(x, 1.0, 0), torch_q(x, 1.0, 0))
    # zp is added before rounding: 3 + 0.5 = 3.5 -> 4 (not 3 + round(0.5) = 3)
    assert quantize_per_tensor(x, 1.0, 3).tolist() == [4, 4, 6, 2, 2, 0, 6, 127, -124, -126]
    np.testing.assert_array_equal(quantize_per_tensor(x, 1.0, 3), torch_q(x, 1.0, 3))


def test_ties_after_inverse_scale_and_fma():
    rng = np.random.default_rng(5)
    for scale in (0.0123, 0.1, 1 / 3, 0.00214854861, 2.5e-4, 7.0):
        inv = inverse_scale(scale)
        base = ((np.arange(-300, 300) + 0.5) / inv).astype(np.float32)
        xs = np.concatenate([np.nextafter(base, np.float32(np.inf)), base, np.nextafter(base, np.float32(-np.inf))])
        for zp in (-128, -5, 0, 7, 127, int(rng.integers(-128, 128))):
            np.testing.assert_array_equal(quantize_per_tensor(xs, scale, zp), torch_q(xs, scale, zp),
                                          err_msg=f"scale={scale} zp={zp}")


def test_inverse_scale_not_division():
    # fbgemm's example: x * (1/scale) = 127.5 -> 128 -> clamps to 127; x / scale = 127.49999 would give 127 too, so
    # check the unclamped int32 value through qmax
    x = np.array([0.273939937], np.float32)
    assert quantize_per_tensor(x, 0.00214854861, 0, qmin=-1000, qmax=1000)[0] == 128
    assert quantize_per_tensor(x, 0.00214854861, 0)[0] == torch_q(x, 0.00214854861, 0)[0] == 127


def test_infinities_nan_and_saturation():
    x = np.array([np.inf, -np.inf, np.nan, 1e30, -1e30, 3.4e38], np.float32)
    for zp in (0, 3, -100):
        np.testing.assert_array_equal(quantize_per_tensor(x, 0.05, zp), torch_q(x, 0.05, zp))
    assert quantize_per_tensor(x, 0.05, 0).tolist() == [127, -128, 127, 127, -128, 127]


def test_quint8_range():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(5000) * 3).astype(np.float32)
    q = quantize_per_tensor(x, 0.02, 128, qmin=0, qmax=255)
    assert q.dtype == np.uint8
    np.testing.assert_array_equal(q, torch_q(x, 0.02, 128, torch.quint8))


@settings(max_examples=60, deadline=None)
@given(scale=st.floats(1e-6, 100.0), zp=st.integers(-128, 127),
       x=st.lists(st.floats(-1e4, 1e4, width=32), min_size=1, max_size=64))
def test_hypothesis_bit_exact(scale, zp, x):
    x = np.array(x, np.float32)
    np.testing.assert_array_equal(quantize_per_tensor(x, scale, zp), torch_q(x, scale, zp))


def test_torch_in_torch_out_and_shape():
    x = torch.randn(2, 3, 4, 5)
    q = quantize_per_tensor(x, 0.03, -4)
    assert isinstance(q, torch.Tensor) and q.dtype == torch.int8 and q.shape == x.shape
    ref = torch.quantize_per_tensor(x, 0.03, -4, torch.qint8).int_repr()
    assert torch.equal(q, ref)
    d = dequantize_per_tensor(q, 0.03, -4)
    assert isinstance(d, torch.Tensor) and d.dtype == torch.float32
    assert torch.equal(d, torch.quantize_per_tensor(x, 0.03, -4, torch.qint8).dequantize())


def test_dequantize_bit_exact():
    q = torch.randint(-128, 128, (100_000,), dtype=torch.int8)
    for scale, zp in [(0.0123, 5), (0.1, -7), (1 / 3, 0), (7.77e-5, 127), (3.7, -128)]:
        ref = torch._make_per_tensor_quantized_tensor(q, scale, zp).dequantize().numpy()
        got = dequantize_per_tensor(q.numpy(), scale, zp)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, ref)


def test_round_trip_error_bound():
    rng = np.random.default_rng(9)
    x = rng.uniform(-5, 5, 10_000).astype(np.float32)
    scale, zp = 0.05, 2
    d = dequantize_per_tensor(quantize_per_tensor(x, scale, zp), scale, zp)
    inside = (x / scale + zp > -128) & (x / scale + zp < 127)
    assert np.max(np.abs(d[inside] - x[inside])) <= scale / 2 * 1.0001


def test_fma_f32_is_correctly_rounded():
    rng = np.random.default_rng(11)
    a = (rng.standard_normal(3000) * 10 ** rng.uniform(-6, 6, 3000)).astype(np.float32)
    b = (rng.standard_normal(3000) * 10 ** rng.uniform(-6, 6, 3000)).astype(np.float32)
    c = (rng.standard_normal(3000) * 10 ** rng.uniform(-6, 6, 3000)).astype(np.float32)
    got = fma_f32(a, b, c)
    for i in range(0, 3000, 7):
        exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        f = got[i]
        lo, hi = np.nextafter(f, np.float32(-np.inf)), np.nextafter(f, np.float32(np.inf))
        err = abs(Fraction(float(f)) - exact)
        assert err <= abs(Fraction(float(lo)) - exact) and err <= abs(Fraction(float(hi)) - exact)
    # double-rounding trap: a*b = 1 + 2^-11 + 2^-24 is exactly halfway between two fp32 values; adding a tiny c
    # leaves the float64 sum on that midpoint, but the exact sum is above it, so the correct result rounds up
    a1 = b1 = np.float32(1 + 2 ** -12)
    tiny = np.float32(2.0 ** -80)
    naive = np.float32(np.float64(a1) * np.float64(b1) + np.float64(tiny))
    assert naive == np.float32(1 + 2 ** -11)                            # ties-to-even on the wrong midpoint
    assert fma_f32(a1, b1, tiny) == np.float32(1 + 2 ** -11 + 2 ** -23)
    assert fma_f32(a1, b1, -tiny) == np.float32(1 + 2 ** -11)
    assert fma_f32(a1, b1, np.float32(0)) == np.float32(1 + 2 ** -11)   # exact tie: to even


def test_errors():
    with pytest.raises(ValueError, match="scale"):
        quantize_per_tensor(np.zeros(3, np.float32), 0.0, 0)
    with pytest.raises(ValueError, match="qmin"):
        quantize_per_tensor(np.zeros(3, np.float32), 0.1, 0, qmin=5, qmax=4)
    with pytest.raises(ValueError, match="zero_point"):
        quantize_per_tensor(np.zeros(3, np.float32), 0.1, 0.5)
    with pytest.raises(TypeError, match="integer"):
        dequantize_per_tensor(np.zeros(3, np.float32), 0.1, 0)
