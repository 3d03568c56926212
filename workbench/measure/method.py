"""The method: how a recording (or a Python callable) is sampled, and the statistics of the samples.

Close to nvbench's "batch" measurement, with Vulkan timestamps:
- a recording holds the dispatches of one sample; it is recorded once and submitted again for every sample;
- 2 warm-up submits, then samples until at least `min_samples` were taken and `min_time_s` of GPU time passed
  (capped by `max_samples` and `max_time_s`);
- GPU time per sample = sum of the timestamped durations of the selected commands, divided by the number of
  repeats of the kernel inside the recording (repeats amortise tiny kernels);
- statistics: median, p10, p90, min, mean and standard deviation; the median is the headline; a set whose first
  and last quarters drift apart, or whose spread is wide, is measured again (`stability`);
- warm clocks: the warm-up is the one of `warmup.warmup_seconds` (a full second after the device sat idle, so a
  suite's first baseline is as warm as its kernels); where the device has a clock source (`clocks.ClockSampler`) the
  SM clock is sampled through every set, and a set whose median clock is below CLOCK_LOW of the clock the run
  settled at (the highest set median so far; at least CLOCK_OF_MAX of the GPU's maximum) is re-taken after another
  full warm-up; the row says `clock_ok` (None where there is no clock source) with the clock columns.
"""
from __future__ import annotations

import time

import numpy as np

from .clocks import ClockSampler
from .warmup import GPU_WARMUP_S, keep_busy, mark_busy, warmup_seconds


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


# A sample set's SM clock is low (the set is re-taken) below CLOCK_LOW of the highest set median this process saw on
# the device, or below CLOCK_OF_MAX of the GPU's maximum clock (the first set of a run has no history).
CLOCK_LOW = 0.90
CLOCK_OF_MAX = 0.60
_settled_mhz: dict[int, float] = {}  # id(device) -> the highest sample-set median SM clock so far


class Samples(np.ndarray):
    """Durations in ns (a numpy array) that remember how many sample sets it took to get a stable one at a warm
    clock (`attempts`) and the clock columns of the set kept (`clock`: `clocks.CLOCK_COLUMNS` and `clock_ok`)."""

    attempts = 1
    clock: dict = {}

    def __array_finalize__(self, obj):
        self.attempts = getattr(obj, "attempts", 1)
        self.clock = getattr(obj, "clock", {})


def clock_ok(device, columns: dict) -> bool | None:
    """Whether a sample set ran at the clock the run settled at (module docstring); None without a clock source.
    Records the set's median as the device's settled clock when it is the highest so far."""
    median, top = columns.get("sm_clock_mhz_median"), columns.get("max_sm_clock_mhz_limit")
    if median is None or median != median:
        return None
    settled = _settled_mhz.get(id(device), 0.0)
    floor = max(CLOCK_LOW * settled, CLOCK_OF_MAX * top if top == top and top else 0.0)
    _settled_mhz[id(device)] = max(settled, median)
    return bool(median >= floor)


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


def enough(count: int, elapsed_s: float, gpu_s: float, *, min_samples: int, max_samples: int, min_time_s: float,
           max_time_s: float) -> bool:
    """The method's stopping rule: stop at `max_samples` or after `max_time_s` (host seconds), else once there are
    `min_samples` samples and `min_time_s` of measured time (`gpu_s`)."""
    return count >= max_samples or elapsed_s >= max_time_s or (count >= min_samples and gpu_s >= min_time_s)


def label_ns(timings, device, skip=()) -> dict:
    """{label: GPU ns} of one submit's timed commands (commands of one label summed), leaving out `skip`'s labels;
    RuntimeError where the queue has no timestamps."""
    out: dict = {}
    for t in timings:
        if t.label in skip:
            continue
        if t.gpu_ns is None:
            raise RuntimeError(f"{device.info.name}: the queue has no timestamps; GPU time cannot be measured")
        out[t.label] = out.get(t.label, 0.0) + t.gpu_ns
    return out


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
        if enough(len(gpu), time.perf_counter() - start, sum(gpu) * repeats / 1e9, min_samples=min_samples,
                  max_samples=max_samples, min_time_s=min_time_s, max_time_s=max_time_s):
            break
    return np.array(gpu), np.array(host)


def sample_recording(rec, *, repeats: int = 1, labels=None, warmup: int = 2, min_samples: int = 10,
                     max_samples: int = 200, min_time_s: float = 0.2, max_time_s: float = 10.0,
                     warmup_s: float | None = None, attempts: int | None = None):
    """Submit `rec` repeatedly; returns (gpu_ns per kernel run, host_ns per kernel run) arrays.

    Warm-up: `warmup` submits, and on GPUs at least `warmup_s` of submits (default `warmup.warmup_seconds`: a full
    GPU_WARMUP_S after the device sat idle, 50 ms while it is busy), so an idle GPU's clock has ramped up. A sample
    set that is not stable (see `stability`) or ran at a low clock (`clock_ok`) is thrown away and measured again
    (after a full warm-up where the clock was low), up to `attempts` sets (default STABILITY_ATTEMPTS on GPUs, 1 on
    CPU devices, whose shared cores are noisy by nature); the last one is returned (`gpu.attempts` says how many
    were taken, `gpu.clock` its clock columns; the row's `stable` and `clock_ok` columns say whether it was)."""
    device = rec.device
    cpu = device.info.is_cpu
    if warmup_s is None:
        warmup_s = warmup_seconds(device)
    if attempts is None:
        attempts = 1 if cpu else STABILITY_ATTEMPTS
    start = time.perf_counter()
    for i in range(max(warmup, 1) if warmup_s else warmup):
        rec.submit()
    keep_busy(rec, device, warmup_s - (time.perf_counter() - start), cpu_too=True)

    def take():
        with ClockSampler(device) as clocks:
            gpu, host = _sample_once(rec, repeats, labels, min_samples, max_samples, min_time_s, max_time_s)
        return (gpu, host), clocks.columns(), stability(gpu)["stable"]
    (gpu, host), columns, attempt = retaken(take, device, [rec], attempts)
    gpu = gpu.view(Samples)
    gpu.attempts = attempt
    gpu.clock = columns
    return gpu, host


def retaken(take, device, recs, attempts: int):
    """A sample set, taken again where it was not good, up to `attempts` sets: `take()` gives (result, clock columns,
    stable); a set is good when stable and not below the settled clock (`clock_ok`, written into its columns), and
    one below it is taken again after a full warm-up on `recs`. Returns (result, columns, attempts taken): the last
    set's."""
    for attempt in range(1, max(1, attempts) + 1):
        got, columns, stable = take()
        mark_busy(device)
        columns["clock_ok"] = ok = clock_ok(device, columns)
        if stable and ok is not False:
            break
        if ok is False and attempt < attempts:
            for rec in recs:
                keep_busy(rec, device, GPU_WARMUP_S / len(recs))
    return got, columns, attempt


def sample_callable(fn, *, sync=None, warmup: int = 2, min_samples: int = 10, max_samples: int = 200,
                    min_time_s: float = 0.2, max_time_s: float = 10.0, cuda_events: bool = False,
                    repeats: int = 1, warmup_s: float = 0.0):
    """Time a Python callable (e.g. a torch op): CUDA events when asked, else wall time around fn + sync.
    `repeats`: the operations one call of `fn` runs (a CUDA graph of several launches): each sample is the time per
    operation; `warmup_s`: `fn` called for this long first (a GPU's clock ramps up under load: GPU_WARMUP_S)."""
    for _ in range(warmup):
        fn()
        if sync:
            sync()
    until = time.perf_counter() + warmup_s
    while time.perf_counter() < until:
        fn()
    if warmup_s and sync:
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
            out.append(begin.elapsed_time(end) * 1e6 / repeats)
        else:
            t0 = time.perf_counter_ns()
            fn()
            if sync:
                sync()
            out.append((time.perf_counter_ns() - t0) / repeats)
        elapsed = time.perf_counter() - start
        if enough(len(out), elapsed, elapsed, min_samples=min_samples, max_samples=max_samples,
                  min_time_s=min_time_s, max_time_s=max_time_s):
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


def sample_each(rec, *, warmup: int = 2, min_samples: int = 10, max_samples: int = 200, min_time_s: float = 0.2,
                max_time_s: float = 10.0, warmup_s: float | None = None, burst: int = 0,
                busy=None) -> tuple[dict, dict]:
    """Submit `rec` (a recording of many dispatches, e.g. a model's in order) repeatedly, as `sample_recording`
    does (its warm-up and clock sampling), and keep every command's own time: ({label: gpu_ns array}, the clock
    columns with `clock_ok`). Labels must be unique within the recording (a later command of the same label is
    added to the earlier one).

    `burst` > 0: the samples are taken `burst` submits at a time, each burst after its own warm-up (`busy`, a
    recording that keeps the GPU busy, default `rec`, resubmitted for `warmup_seconds`, then `warmup` submits of
    `rec`), as a runtime's timed executions follow its warm-up; the clock columns are then the readings as each
    timed submit ended. A short recording resubmitted one at a time for a whole sample set lets a GPU's clock sag
    (the H200's fell to 1,222 MHz under a 60 µs model's executions, where ET-VK's 20 ran at 1,702)."""
    if isinstance(burst, bool) or not isinstance(burst, int) or burst < 0:
        raise ValueError(f"burst must be a whole number >= 0 (0: one sample set), got {burst!r}")
    device = rec.device
    if warmup_s is None:
        warmup_s = warmup_seconds(device)

    def warm(seconds: float, busy) -> None:
        keep_busy(busy, device, seconds, cpu_too=True)
        for _ in range(max(warmup, 1) if seconds else warmup):  # the timed recording's own warm-up last
            rec.submit()

    if not burst:
        warm(warmup_s, rec)
    per: dict = {}
    readings = []
    with ClockSampler(device, interval_ms=10 if burst else 100) as clocks:
        start, total_ns, count = time.perf_counter(), 0.0, 0
        while True:
            if burst and count % burst == 0:
                warm(warmup_s if not count else warmup_seconds(device), busy or rec)
            sample = label_ns(rec.submit(), device)
            readings.append(clocks.latest())
            for label, ns in sample.items():
                per.setdefault(label, []).append(ns)
            total_ns += sum(sample.values())
            count += 1
            if enough(count, time.perf_counter() - start, total_ns / 1e9, min_samples=min_samples,
                      max_samples=max_samples, min_time_s=min_time_s, max_time_s=max_time_s):
                break
    mark_busy(device)
    columns = clocks.columns(readings if burst else None)
    columns["clock_ok"] = clock_ok(device, columns)
    return {label: np.array(v) for label, v in per.items()}, columns
