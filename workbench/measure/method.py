"""The method: how a recording (or a Python callable) is sampled, and the statistics of the samples.

Close to nvbench's "batch" measurement, with Vulkan timestamps:
- a recording holds the dispatches of one sample; it is recorded once and submitted again for every sample;
- 2 warm-up submits, then samples until at least `min_samples` were taken and `min_time_s` of GPU time passed
  (capped by `max_samples` and `max_time_s`);
- GPU time per sample = sum of the timestamped durations of the selected commands, divided by the number of
  repeats of the kernel inside the recording (repeats amortise tiny kernels);
- statistics: median, p10, p90, min, mean and standard deviation; the median is the headline; a set whose first
  and last quarters drift apart, or whose spread is wide, is measured again (`stability`).
"""
from __future__ import annotations

import time

import numpy as np

from .warmup import keep_busy


def summarize_ns(samples_ns) -> dict:
    """Statistics of a sample of durations in ns, reported in µs."""
    a = np.asarray(samples_ns, dtype=np.float64) / 1e3
    if a.size == 0:
        raise ValueError("no samples to summarize")
    return {"samples": int(a.size), "median_us": float(np.median(a)), "p10_us": float(np.percentile(a, 10)),
            "p90_us": float(np.percentile(a, 90)), "min_us": float(a.min()), "mean_us": float(a.mean()),
            "std_us": float(a.std(ddof=1)) if a.size > 1 else 0.0}


# A sample set is unstable (and measured again) when its first and last quarters differ by more than DRIFT (a clock
# ramping up or throttling during the set), or its p10..p90 spread exceeds SPREAD of the median.
STABILITY_DRIFT = 0.05
STABILITY_SPREAD = 0.10
STABILITY_ATTEMPTS = 3


class Samples(np.ndarray):
    """Durations in ns (a numpy array) that remember how many sample sets it took to get a stable one."""

    attempts = 1

    def __array_finalize__(self, obj):
        self.attempts = getattr(obj, "attempts", 1)


def stability(samples_ns) -> dict:
    """drift_pct (median of the last quarter vs the first, signed), spread_pct ((p90 - p10) / median) and `stable`
    (both within STABILITY_DRIFT / STABILITY_SPREAD). Fewer than 8 samples: drift is not judged."""
    a = np.asarray(samples_ns, dtype=np.float64)
    median = float(np.median(a)) if a.size else float("nan")
    spread = float((np.percentile(a, 90) - np.percentile(a, 10)) / median) if a.size and median > 0 else 0.0
    drift = 0.0
    if a.size >= 8:
        q = a.size // 4
        first, last = float(np.median(a[:q])), float(np.median(a[-q:]))
        drift = (last - first) / first if first > 0 else 0.0
    return {"drift_pct": 100 * drift, "spread_pct": 100 * spread,
            "stable": bool(abs(drift) <= STABILITY_DRIFT and spread <= STABILITY_SPREAD)}


def _sample_once(rec, repeats, labels, min_samples, max_samples, min_time_s, max_time_s):
    gpu, host = [], []
    start = time.perf_counter()
    while True:
        timings = rec.submit()
        chosen = [t for t in timings if labels is None or t.label in labels]
        if any(t.gpu_ns is None for t in chosen):
            raise RuntimeError(f"{rec.device.info.name}: the queue has no timestamps; GPU time cannot be measured")
        gpu.append(sum(t.gpu_ns for t in chosen) / repeats)
        host.append(rec.host_ns / repeats)
        elapsed = time.perf_counter() - start
        if len(gpu) >= max_samples or elapsed >= max_time_s:
            break
        if len(gpu) >= min_samples and sum(gpu) * repeats / 1e9 >= min_time_s:
            break
    return np.array(gpu), np.array(host)


def sample_recording(rec, *, repeats: int = 1, labels=None, warmup: int = 2, min_samples: int = 10,
                     max_samples: int = 200, min_time_s: float = 0.2, max_time_s: float = 10.0,
                     warmup_s: float | None = None, attempts: int | None = None):
    """Submit `rec` repeatedly; returns (gpu_ns per kernel run, host_ns per kernel run) arrays.

    Warm-up: `warmup` submits, and on GPUs at least `warmup_s` (default 50 ms) of submits, so an idle GPU's clock
    has ramped up. A sample set that is not stable (see `stability`) is thrown away and measured again, up to
    `attempts` sets (default STABILITY_ATTEMPTS on GPUs, 1 on CPU devices, whose shared cores are noisy by
    nature); the last one is returned (`gpu.attempts` says how many were taken; the row's `stable` column says
    whether the last was)."""
    cpu = rec.device.info.is_cpu
    if warmup_s is None:
        warmup_s = 0.0 if cpu else 0.05
    if attempts is None:
        attempts = 1 if cpu else STABILITY_ATTEMPTS
    start = time.perf_counter()
    for i in range(max(warmup, 1) if warmup_s else warmup):
        rec.submit()
    keep_busy(rec, rec.device, warmup_s - (time.perf_counter() - start), cpu_too=True)
    for attempt in range(1, max(1, attempts) + 1):
        gpu, host = _sample_once(rec, repeats, labels, min_samples, max_samples, min_time_s, max_time_s)
        if stability(gpu)["stable"]:
            break
    gpu = gpu.view(Samples)
    gpu.attempts = attempt
    return gpu, host


def sample_callable(fn, *, sync=None, warmup: int = 2, min_samples: int = 10, max_samples: int = 200,
                    min_time_s: float = 0.2, max_time_s: float = 10.0, cuda_events: bool = False):
    """Time a Python callable (e.g. a torch op): CUDA events when asked, else wall time around fn + sync."""
    for _ in range(warmup):
        fn()
        if sync:
            sync()
    out = []
    start = time.perf_counter()
    while True:
        if cuda_events:
            import torch
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            fn()
            end.record()
            end.synchronize()
            out.append(begin.elapsed_time(end) * 1e6)
        else:
            t0 = time.perf_counter_ns()
            fn()
            if sync:
                sync()
            out.append(time.perf_counter_ns() - t0)
        elapsed = time.perf_counter() - start
        if len(out) >= max_samples or elapsed >= max_time_s:
            break
        if len(out) >= min_samples and elapsed >= min_time_s:
            break
    return np.array(out, dtype=np.float64)


# what a quick run (`--quick`, a notebook with FULL = False) prints and records: its figures are no headline ones
QUICK_NOTE = ("quick mode: small shapes, few samples; it checks no headline figure (no roof, no goal): its rows "
              "carry quick=True")


def sampling(quick: bool, *, quick_min_time_s: float = 0.005) -> dict:
    """`sample_recording` / `sample_callable` options of a suite: a few short samples when `quick` (tests, smoke
    runs), else at least 0.2 s of samples."""
    if quick:
        return dict(min_time_s=quick_min_time_s, min_samples=3, max_samples=5, warmup=1)
    return dict(min_time_s=0.2)
