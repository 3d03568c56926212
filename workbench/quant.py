"""Per-tensor affine quantization references, bit-exact with PyTorch on x86.

What ``torch.quantize_per_tensor(x, scale, zp, torch.qint8).int_repr()`` computes (torch 2.x CPU on x86, FBGEMM
path; determined by experiment and checked bit-exactly in ``tests/test_quant.py``):

1. ``scale`` (a Python float / double) is rounded to fp32, and ``inv_scale = 1.0f / scale_f32`` in fp32;
2. ``v = fma(x, inv_scale, float(zp))`` — **one** fp32 rounding of ``x * inv_scale + zp`` (a fused multiply-add:
   neither ``x * inv_scale`` nor ``x / scale`` is rounded separately, and zp is added *before* rounding);
3. ``q = nearbyint(v)`` with the default rounding mode: round half to **even** (0.5 → 0, 1.5 → 2, 2.5 → 2);
4. ``q = clamp(q, qmin, qmax)``; +inf → qmax, -inf → qmin, NaN → qmax (as torch returns).

Non-fused variants differ: ``nearbyint(fp32(x*inv_scale) + zp)`` disagrees with torch on ~0.3 % of random values,
``zp + nearbyint(x*inv_scale)`` and ``x / scale`` on ~2 %.  (torch's ARM/NEON path is not modelled.)

Dequantize (torch ``Tensor.dequantize()``): ``x = float(q - zp) * scale_f32`` — an exact integer difference, then one
fp32 multiply (not ``fma(scale, q, -zp*scale)``).

For shaders: GLSL ``round()`` is implementation-defined at exactly .5 (it may round half away from zero or to even),
``roundEven()`` is round-half-to-even like torch.  Reproducing torch on a GPU needs ``roundEven(fma(x, inv_scale,
float(zp)))`` with ``precise`` (so the compiler keeps the fused operation).  ET-VK's ``q8ta_quantize`` computes
``round(x * inv_scale) + zp`` instead (§4.4 of the reference): expect ±1 LSB differences at ties.
"""
from __future__ import annotations

import numpy as np

__all__ = ["quantize_per_tensor", "dequantize_per_tensor", "fma_f32", "inverse_scale"]


def _to_numpy(x):
    if type(x).__module__.startswith("torch"):
        return x.detach().cpu().numpy(), "torch"
    return np.asarray(x), "numpy"


def _from_numpy(a, kind):
    if kind == "torch":
        import torch
        return torch.from_numpy(np.ascontiguousarray(a))
    return a


def inverse_scale(scale: float) -> np.float32:
    """``1.0f / float(scale)`` in fp32, as torch and ET-VK's quantize shaders use it."""
    return np.float32(1.0) / np.float32(scale)


def fma_f32(a, b, c) -> np.ndarray:
    """Exactly rounded fp32 ``a * b + c`` (one rounding), emulated with float64 and an error-free sum.

    ``a * b`` of two fp32 is exact in float64.  Adding ``c`` may round in float64; that double rounding can only
    go wrong when the float64 sum lands exactly halfway between two fp32 values while the true sum is not there,
    so then the sum is nudged one float64 ulp towards the true value before rounding to fp32.
    """
    a64 = np.asarray(a, dtype=np.float32).astype(np.float64)
    b64 = np.asarray(b, dtype=np.float32).astype(np.float64)
    c64 = np.asarray(c, dtype=np.float32).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        p = a64 * b64
        s = p + c64
        bv = s - p
        err = (p - (s - bv)) + (c64 - bv)                     # TwoSum: p + c == s + err exactly
        f = s.astype(np.float32)
        f64 = f.astype(np.float64)
        toward = np.where(s > f64, np.float32(np.inf), np.float32(-np.inf)).astype(np.float32)
        neighbour = np.nextafter(f, toward).astype(np.float64)
        midpoint = (s != f64) & (s == (f64 + neighbour) * 0.5)
        fix = midpoint & (err != 0) & np.isfinite(s)
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        return s.astype(np.float32)


def _qdtype(qmin: int, qmax: int):
    if -128 <= qmin and qmax <= 127:
        return np.int8
    if 0 <= qmin and qmax <= 255:
        return np.uint8
    return np.int32


def quantize_per_tensor(x, scale: float, zero_point: int, qmin: int = -128, qmax: int = 127):
    """Per-tensor affine quantization, bit-exact with ``torch.quantize_per_tensor(...).int_repr()`` (see module doc).

    ``x``: numpy array or torch tensor (converted to fp32 first, as torch only quantizes fp32).  Returns the same
    library type, dtype int8 when ``[qmin, qmax]`` fits int8 (default), uint8 when it fits uint8, else int32.
    """
    if not (isinstance(qmin, (int, np.integer)) and isinstance(qmax, (int, np.integer)) and qmin <= qmax):
        raise ValueError(f"need integer qmin <= qmax, got qmin={qmin!r}, qmax={qmax!r}")
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a finite positive number, got {scale!r}")
    if not isinstance(zero_point, (int, np.integer)):
        raise ValueError(f"zero_point must be an int, got {zero_point!r}")
    a, kind = _to_numpy(x)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"quantize_per_tensor expects a real tensor, got dtype {a.dtype}")
    v = fma_f32(a.astype(np.float32), inverse_scale(scale), np.float32(zero_point))
    nan = np.isnan(v)
    with np.errstate(invalid="ignore"):
        q = np.clip(np.rint(np.where(nan, 0, v)), qmin, qmax)
    q = np.where(nan, qmax, q)
    return _from_numpy(q.astype(_qdtype(qmin, qmax)).reshape(a.shape), kind)


def dequantize_per_tensor(q, scale: float, zero_point: int):
    """``float(q - zero_point) * scale`` in fp32, bit-exact with torch's ``dequantize()``.  numpy or torch in/out."""
    if not isinstance(zero_point, (int, np.integer)):
        raise ValueError(f"zero_point must be an int, got {zero_point!r}")
    a, kind = _to_numpy(q)
    if a.dtype.kind not in "iu":
        raise TypeError(f"dequantize_per_tensor expects an integer tensor, got dtype {a.dtype}")
    d = (a.astype(np.int64) - int(zero_point)).astype(np.float32) * np.float32(scale)
    return _from_numpy(d.astype(np.float32), kind)
