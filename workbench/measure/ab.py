"""Interleaved A/B timing: two dispatches timed alternately (A B A B …) in one sample loop, and the statistics of the
pair: medians, the ratio B/A with a bootstrap 95 % confidence interval, and a verdict.

    got = sample_interleaved(dev, record_a, record_b, rot, flush=flush, mode="submits")
    frame = ab_frame([("hot", got)])        # a row per sample (order, side, us, clock) + a summary row per set

Two ways of interleaving (`MODES`):
- "submits": A and B each in a recording of their own (one sample's dispatches: the rotation's sets, as
  `cache.sample_rotated` records them); the two recordings are submitted alternately, A first, every submit waited
  for: each side's sample is the timestamped time of its own submit;
- "command": one recording holds A and B alternately (A0 B0 A1 B1 …, a barrier before each, as every recording
  does), submitted again per sample; each dispatch is timestamped and attributed to its side by its label.

Both go through the method's own parts: the warm-up (`warmup.keep_busy`, both sides), the clock (`ClockSampler`;
each sample carries the latest SM clock reading, NaN where the device has no clock source: lavapipe), the cache
regime (`cache.Rotation`: a set of resources per dispatch when cold, an untimed sweep before each where the
rotation sweeps). The ratio's interval is a paired bootstrap (pairs of adjacent A and B samples resampled together,
so drift both sides saw cancels); the verdict says "B faster/slower by x % [lo, hi]" where the interval excludes 1,
else "no difference within noise". No speed is asserted anywhere: the verdict is the interval's.
"""
from __future__ import annotations

import time

import numpy as np

from .clocks import ClockSampler
from .method import STABILITY_ATTEMPTS, enough, label_ns, retaken, summarize_ns
from .warmup import keep_busy, mark_busy, warmup_seconds

MODES = ("submits", "command")
SIDES = ("A", "B")
CONFIDENCE = 0.95
BOOTSTRAP = 4000
#: GPU time a sample should hold at least (dispatches back to back, `repeats_for`): a lone dispatch of tens of µs
#: per submit leaves an H200 idle between submits and its clock at 345 MHz (tools/gpu_ab.sh's first run)
SAMPLE_US = 2000.0  # of the check run's dispatch, taken at whatever clock the GPU had: a floor
MAX_REPEATS = 64


def repeats_for(device, dispatch_ns: float, *, sample_us: float = SAMPLE_US, most: int = MAX_REPEATS) -> int:
    """How many dispatches of a side a sample records back to back: enough for `sample_us` of GPU time at
    `dispatch_ns` each (at most `most`), so the GPU stays loaded and its clock up; 1 on CPU devices (lavapipe's
    samples are milliseconds) or where the dispatch's time is not known."""
    if device.info.is_cpu or not dispatch_ns or dispatch_ns != dispatch_ns or dispatch_ns <= 0:
        return 1
    return int(min(most, max(1, -(-sample_us * 1e3 // dispatch_ns))))


def _recorded(device, record, rot, copies_label: str, flush, per: int, record_options):
    rec = device.record(label=copies_label, **(record_options or {}))
    for i in range(per):
        if rot.flush_bytes:
            flush.record(rec)
        record(rec, i % rot.copies, copies_label)
    return rec


def sample_interleaved(device, record_a, record_b, rot, *, mode: str = "submits", flush=None, repeats: int = 1,
                       warmup: int = 2, min_pairs: int = 20, max_pairs: int = 400, min_time_s: float = 0.4,
                       max_time_s: float = 20.0, record_options: dict | None = None) -> dict:
    """Time A and B interleaved (module docstring). `record_a(rec, i, label)` / `record_b` record one dispatch of
    their side on resource set i (i < rot.copies) with `label`; `rot`: the regime's `cache.Rotation`; `flush`: the
    kernels' `copy.Flush` where `rot.flush_bytes`. Pairs are taken until `min_pairs` and `min_time_s` of GPU time
    (both sides), at most `max_pairs` or `max_time_s`. Returns {"order", "side", "gpu_ns" (per dispatch),
    "clock_mhz" (per sample), "t_s" (host seconds from the set's first sample to this sample's end), "mode",
    "dispatches" (per sample), "clock" (the set's clock columns)}."""
    if mode not in MODES:
        raise ValueError(f"expected an interleaving among {', '.join(MODES)}, got {mode!r}")
    if rot.flush_bytes and flush is None:
        raise ValueError(f"a cold rotation of {rot.copies} sets of {rot.working_set} B needs a sweep of "
                         f"{rot.flush_bytes} B before each dispatch: pass flush=")
    per = max(int(repeats), rot.copies)
    skip = {getattr(flush, "label", None)} if rot.flush_bytes else set()
    recs = []
    try:
        if mode == "submits":
            recs = [_recorded(device, rec_fn, rot, side, flush, per, record_options)
                    for side, rec_fn in zip(SIDES, (record_a, record_b))]
        else:
            rec = device.record(label="A|B", **(record_options or {}))
            recs = [rec]
            for i in range(per):
                for side, rec_fn in zip(SIDES, (record_a, record_b)):
                    if rot.flush_bytes:
                        flush.record(rec)
                    rec_fn(rec, i % rot.copies, side)
        return _loop(device, recs, mode, per, skip, warmup, min_pairs, max_pairs, min_time_s, max_time_s)
    finally:
        for rec in recs:
            rec.close()


def _loop(device, recs, mode, per, skip, warmup, min_pairs, max_pairs, min_time_s, max_time_s) -> dict:
    """The warm-up, then a set (`_set`); a set that ran below the settled clock (`method.clock_ok`) is taken again
    after a full warm-up, up to STABILITY_ATTEMPTS sets on GPUs (as `sample_recording` does); the last is returned,
    with `attempts` and the clock columns' `clock_ok`."""
    start = time.perf_counter()
    for _ in range(max(1, warmup)):
        for rec in recs:
            rec.submit()
    seconds = warmup_seconds(device) - (time.perf_counter() - start)  # once: keep_busy marks the device busy
    for rec in recs:  # the one warm-up, both sides (none on CPU devices: warmup_seconds is 0 there)
        keep_busy(rec, device, seconds / len(recs), cpu_too=True)
    attempts = 1 if device.info.is_cpu else STABILITY_ATTEMPTS

    def take():
        got = _set(device, recs, mode, per, skip, min_pairs, max_pairs, min_time_s, max_time_s)
        return got, got["clock"], True
    got, clock, taken = retaken(take, device, recs, attempts)
    return {**got, "clock": clock, "attempts": taken}


def _set(device, recs, mode, per, skip, min_pairs, max_pairs, min_time_s, max_time_s) -> dict:
    order, side, gpu, clock, when = [], [], [], [], []
    total_ns, pairs = 0.0, 0
    with ClockSampler(device, interval_ms=10) as clocks:
        t0 = time.perf_counter()
        while True:
            if mode == "submits":
                got = {}
                for rec, name in zip(recs, SIDES):
                    got[name] = label_ns(rec.submit(), device, skip)[name]
                    order.append(len(order))
                    side.append(name)
                    gpu.append(got[name] / per)
                    clock.append(clocks.latest())
                    when.append(time.perf_counter() - t0)
            else:
                got = label_ns(recs[0].submit(), device, skip)
                for name in SIDES:
                    order.append(len(order))
                    side.append(name)
                    gpu.append(got[name] / per)
                    clock.append(clocks.latest())
                    when.append(time.perf_counter() - t0)
            total_ns += got["A"] + got["B"]
            pairs += 1
            if enough(pairs, time.perf_counter() - t0, total_ns / 1e9, min_samples=min_pairs, max_samples=max_pairs,
                      min_time_s=min_time_s, max_time_s=max_time_s):
                break
    mark_busy(device)
    return {"order": np.array(order), "side": np.array(side), "gpu_ns": np.array(gpu, dtype=np.float64),
            "clock_mhz": np.array(clock, dtype=np.float64), "t_s": np.array(when, dtype=np.float64), "mode": mode,
            "dispatches": per, "clock": clocks.columns()}


def ratio_ci(a_ns, b_ns, *, confidence: float = CONFIDENCE, n_boot: int = BOOTSTRAP, seed: int = 0):
    """(median(B) / median(A), lo, hi): the ratio of medians and its bootstrap `confidence` interval (percentile).
    Equal lengths (interleaved pairs): the pairs are resampled together; otherwise each side on its own."""
    a, b = np.asarray(a_ns, np.float64), np.asarray(b_ns, np.float64)
    if a.size < 2 or b.size < 2:
        raise ValueError(f"a ratio's interval needs at least 2 samples a side, got {a.size} and {b.size}")
    ratio = float(np.median(b) / np.median(a))
    rng = np.random.default_rng(seed)
    if a.size == b.size:
        idx = rng.integers(0, a.size, size=(n_boot, a.size))
        boot = np.median(b[idx], axis=1) / np.median(a[idx], axis=1)
    else:
        boot = (np.median(b[rng.integers(0, b.size, size=(n_boot, b.size))], axis=1)
                / np.median(a[rng.integers(0, a.size, size=(n_boot, a.size))], axis=1))
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(boot, [tail, 100 - tail])
    return ratio, float(lo), float(hi)


def verdict(ratio: float, lo: float, hi: float) -> str:
    """'B faster by x % [lo, hi]' / 'B slower by x % [lo, hi]' where the interval excludes 1 (x: how much less /
    more time B takes), else 'no difference within noise (B/A r [lo, hi])'."""
    if lo > 1:
        return f"B slower by {100 * (ratio - 1):.1f} % [{100 * (lo - 1):.1f}, {100 * (hi - 1):.1f}]"
    if hi < 1:
        return f"B faster by {100 * (1 - ratio):.1f} % [{100 * (1 - hi):.1f}, {100 * (1 - lo):.1f}]"
    return f"no difference within noise (B/A {ratio:.3f} [{lo:.3f}, {hi:.3f}])"


def summary(got: dict, *, confidence: float = CONFIDENCE, seed: int = 0) -> dict:
    """The summary of one interleaved set (`sample_interleaved`'s dict): medians (µs) and statistics of each side,
    ratio B/A, its interval, the verdict, the clock."""
    a = got["gpu_ns"][got["side"] == "A"]
    b = got["gpu_ns"][got["side"] == "B"]
    ratio, lo, hi = ratio_ci(a, b, confidence=confidence, seed=seed)
    sa, sb = summarize_ns(a), summarize_ns(b)
    clock = got["clock"]
    return {"pairs": int(min(a.size, b.size)), "median_us_A": sa["median_us"], "median_us_B": sb["median_us"],
            "p10_us_A": sa["p10_us"], "p90_us_A": sa["p90_us"], "p10_us_B": sb["p10_us"], "p90_us_B": sb["p90_us"],
            "ratio": ratio, "ci_lo": lo, "ci_hi": hi, "confidence": confidence, "verdict": verdict(ratio, lo, hi),
            "interleave": got["mode"], "dispatches_per_sample": got["dispatches"],
            "sm_clock_mhz_median": clock.get("sm_clock_mhz_median"), "sm_clock_mhz_min": clock.get("sm_clock_mhz_min"),
            "max_sm_clock_mhz_limit": clock.get("max_sm_clock_mhz_limit"),
            "clock_ok": clock.get("clock_ok"), "attempts": got.get("attempts", 1),
            "clock_source": clock.get("clock_source"), "clock_note": clock.get("clock_note")}


def ab_frame(sets, extra: dict | None = None):
    """A DataFrame of interleaved sets: `sets` a list of (regime, got) pairs (`sample_interleaved`'s dicts; a dict
    {regime: got} works too): a row per sample (row "sample": cache, interleave, order, side, us, clock_mhz, t_s) and a
    summary row per set (row "summary", side "B/A": `summary`'s columns); `extra`: {regime: columns} given to that
    regime's rows (its cache columns)."""
    import pandas as pd
    rows = []
    for regime, got in (sets.items() if isinstance(sets, dict) else sets):
        more = dict((extra or {}).get(regime, {}))
        when = got.get("t_s", np.full(len(got["order"]), np.nan))
        for o, s, ns, mhz, t in zip(got["order"], got["side"], got["gpu_ns"], got["clock_mhz"], when):
            rows.append({"row": "sample", "cache": regime, "interleave": got["mode"], "order": int(o), "side": str(s),
                         "us": float(ns) / 1e3, "clock_mhz": float(mhz), "t_s": float(t), **more})
        rows.append({"row": "summary", "cache": regime, "side": "B/A", **summary(got), **more})
    return pd.DataFrame(rows)
