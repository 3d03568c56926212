"""int8 → int8 requantization as one integer multiply-add and a shift per byte, proven exact on the host.

The kernels' requantize (``pixel_shuffle.requantize_reference``: fp32, two roundings, clamp) maps the 256 int8 input
values to int8 outputs by a non-decreasing step function. Where one integer line reproduces it,

    q(v) + 128 = clamp((mul · (v + 128) + add) >> shift, 0, 255)        (>> arithmetic: floor)

the shader needs one multiply-add and one shift per byte instead of the fp32 chain (``include/requant_int8.glslh``,
``requant_word_fixed``). The line gives the output biased by 128 (0..255), so the shader packs the four bytes
without masking them and flips their sign bits once per word. The domain has only 256 values, so :func:`fixed_point_requant` checks every one of them
against the fp32 reference and returns None where no line fits (fp32 ties that round to even on both sides, e.g. a
scale ratio of exactly 0.5): callers then keep the fp32 path. ``clamp`` says whether any input saturates; where none
does the shader leaves the two clamps out.

``packed=True`` asks for a line the shader can run on two bytes per 32 × 32 → 64-bit multiply
(``requant_word_packed``): bytes 0 and 3 (and 1 and 2) sit 24 bits apart in one operand, so their two values
``mul · u + add`` must stay below 2^24 (no carry from one into the other), ``add`` non-negative, the shift in
8..16 (the low result inside the low word, the high one inside the high word) and no input saturating (no clamp
between the lanes).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .pixel_shuffle import requantize_reference  # the fp32 reference the kernels match

#: Every int8 value, in order of v + 128 (the biased byte u the shader computes with).
ALL_INT8 = np.arange(-128, 128, dtype=np.int16).astype(np.int8)
#: Largest shift tried; products stay below 2^31 (|mul| · 255 + |add| checked per candidate).
MAX_SHIFT = 24
#: Integer multipliers tried on each side of the real slope's (scaled) value.
MUL_SEARCH = 64
#: packed=True: each lane's mul · u + add below this (lanes 24 bits apart), shifts in this range.
PACKED_LANE_LIMIT = 1 << 24
PACKED_SHIFTS = range(16, 7, -1)


@dataclass(frozen=True)
class FixedRequant:
    """q + 128 = clamp((mul · u + add) >> shift, 0, 255) for u = v + 128; clamp False: no input saturates."""

    mul: int
    add: int
    shift: int
    clamp: bool

    def apply(self, q) -> np.ndarray:
        """The formula on int8 values (host side, the shader's arithmetic in int64)."""
        u = np.asarray(q).astype(np.int64) + 128
        return (np.clip((self.mul * u + self.add) >> self.shift, 0, 255) - 128).astype(np.int8)

    def push_values(self) -> tuple[int, int, int]:
        return self.mul, self.add, self.shift


def _target(in_scale, in_zero_point, out_scale, out_zero_point) -> np.ndarray:
    return requantize_reference(ALL_INT8, in_scale, in_zero_point, out_scale, out_zero_point).astype(np.int64)


def fixed_point_requant(in_scale, in_zero_point, out_scale, out_zero_point, *,
                        packed: bool = False) -> FixedRequant | None:
    """An integer line that gives the fp32 requantize of every int8 input exactly, or None where none is found.

    For each shift (largest first) and each integer multiplier near the real slope, the constraints
    ``b(u) · 2^shift <= mul · u + add < (b(u) + 1) · 2^shift`` for the biased output b = q + 128 (one-sided at
    saturated outputs: 0 needs only the upper bound, 255 only the lower) give an interval of ``add``; the first non-empty one wins and is checked again
    on all 256 inputs. `packed`: only lines the two-lane shader form can run (module docstring)."""
    target = _target(in_scale, in_zero_point, out_scale, out_zero_point) + 128  # biased: 0..255
    u = np.arange(256, dtype=np.int64)
    low_sat, high_sat = target == 0, target == 255
    if packed and (low_sat.any() or high_sat.any()):
        return None  # a clamp per lane would undo the packing
    slope = float(np.float32(in_scale)) / float(np.float32(out_scale))
    for shift in (PACKED_SHIFTS if packed else range(MAX_SHIFT, 0, -1)):
        one = 1 << shift
        centre = int(round(slope * one))
        muls = np.arange(max(centre - MUL_SEARCH, 0), centre + MUL_SEARCH + 1, dtype=np.int64)
        if muls.size == 0 or muls[-1] * 255 >= 2**30:
            continue
        lo = target[None, :] * one - muls[:, None] * u[None, :]           # add >= lo
        hi = (target[None, :] + 1) * one - muls[:, None] * u[None, :]     # add < hi
        lo = np.where(low_sat[None, :], np.iinfo(np.int64).min // 4, lo)
        hi = np.where(high_sat[None, :], np.iinfo(np.int64).max // 4, hi)
        add_lo, add_hi = lo.max(axis=1), hi.min(axis=1)
        for i in np.flatnonzero(add_lo < add_hi):
            mul = int(muls[i])
            add = int((int(add_lo[i]) + int(add_hi[i]) - 1) // 2)
            if packed:  # the smallest add that fits keeps both lanes lowest
                add = max(int(add_lo[i]), 0)
                if add >= int(add_hi[i]) or mul * 255 + add >= PACKED_LANE_LIMIT:
                    continue
            if abs(add) + mul * 255 >= 2**31 or abs(add) >= 2**31:
                continue
            form = FixedRequant(mul, add, shift, clamp=bool(low_sat.any() or high_sat.any()))
            raw = (mul * u + add) >> shift
            if np.array_equal(form.apply(ALL_INT8).astype(np.int64) + 128, target) and (
                    form.clamp or (raw.min() >= 0 and raw.max() <= 255)):
                return form
    return None


def require_fixed_point(in_scale, in_zero_point, out_scale, out_zero_point, *, packed: bool = False) -> FixedRequant:
    """:func:`fixed_point_requant`, or a ValueError naming the qparams that no integer line reproduces."""
    form = fixed_point_requant(in_scale, in_zero_point, out_scale, out_zero_point, packed=packed)
    if form is None and packed:
        raise ValueError(f"no packed fixed-point requantize for in (scale {in_scale}, zero point {in_zero_point}) → "
                         f"out (scale {out_scale}, zero point {out_zero_point}): it needs an exact line with "
                         f"mul · 255 + add < 2^24, add >= 0, shift 8..16 and no saturation; use packed=False")
    if form is None:
        raise ValueError(f"no exact fixed-point requantize for in (scale {in_scale}, zero point {in_zero_point}) → "
                         f"out (scale {out_scale}, zero point {out_zero_point}): the fp32 results are no integer "
                         f"line (ties rounded to even); use the fp32 path (fixed=False)")
    return form
