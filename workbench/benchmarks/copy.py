"""The copy roofline and the runtime's own costs: device-to-device copy bandwidth (the shader copy, vkCmdCopyBuffer
and torch's copy), the copy at each kernel's traffic, dispatch overhead and pipeline churn."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from ..kernels import linear_global_size, pipeline_for
from ..kernels.copy import LOCAL_SIZE, SHADER, CopySpec, flush_for, record_copy
from ..measure import ResultsWriter, environment, measurement_row, progress, sample_callable, sample_recording
from ..measure.cache import ROTATE_FACTOR, last_level_cache, parse_regimes, rotation, sample_rotated
from ..toolchain.shaders import compile_shader
from ..vk.churn import measure as churn

COPY_SIZES_MIB = (1, 4, 16, 64, 256)


def torch_copy_timer(nbytes: int, device, copies: int = 1):
    """torch's own copy of the same bytes on the same device: CUDA when the Vulkan device is an NVIDIA GPU and
    torch sees CUDA, otherwise the CPU (lavapipe's 'device memory' is host memory). `copies` > 1: that many
    (source, destination) pairs, each call copying the next (a cold rotation, `measure.cache`)."""
    import torch
    on_cuda = device.info.vendor == "NVIDIA" and torch.cuda.is_available()
    where = "cuda" if on_cuda else "cpu"
    pairs = []
    for _ in range(max(1, copies)):
        src = torch.empty(nbytes // 4, dtype=torch.int32, device=where).random_(-1000, 1000)
        pairs.append((src, torch.empty_like(src)))
    state = {"i": 0}

    def copy():
        src, dst = pairs[state["i"] % len(pairs)]
        state["i"] += 1
        dst.copy_(src)
    return where, copy, on_cuda


def bench_copy(device, sizes_mib=COPY_SIZES_MIB, *, writer: ResultsWriter | None = None, show_progress=True,
               min_time_s: float = 0.2, repeats: int | None = None, regime: str = "hot", quick: bool = False,
               torch_too: bool = True, when: str = "") -> pd.DataFrame:
    """Device-to-device copy bandwidth: the shader copy, vkCmdCopyBuffer, and torch's copy, per size, in the
    cache `regime` (`measure.cache`: "cold" rotates (source, destination) pairs spanning 4x the last-level
    cache; `quick`: a capped rotation). `when`: a label of the row ("start" / "end" of a suite's run)."""
    env = environment(device)
    rows = []
    for mib in progress(list(sizes_mib), f"copy ({regime})", enabled=show_progress):
        spec = CopySpec(int(mib * 2**20) // 16 * 16)
        rot = rotation(device, spec.bytes_moved(), regime, quick=quick)
        reps = repeats or max(1, min(20, int(64 * 2**20 // spec.nbytes)))  # amortise small copies
        pairs = []
        try:
            for _ in range(rot.copies):
                pairs.append((device.buffer(nbytes=spec.nbytes, name="copy-src"),
                              device.buffer(nbytes=spec.nbytes, name="copy-dst")))
            for method in ("shader uvec4", "vkCmdCopyBuffer"):
                def record_one(rec, i, method=method):
                    src, dst = pairs[i]
                    if method == "shader uvec4":
                        record_copy(rec, device, spec, dst, src)
                    else:
                        rec.copy(src, dst, spec.nbytes)
                with flush_for(device, rot) as flush:
                    gpu, host, per_recording = sample_rotated(device, rot, record_one, repeats=reps,
                                                              label=f"copy {mib} MiB", flush=flush,
                                                              min_time_s=min_time_s)
                row = measurement_row("copy", env, gpu, host_ns=host, bytes_moved=spec.bytes_moved(),
                                      method=method, size_mib=mib, copy_bytes=spec.nbytes, repeats=per_recording,
                                      timer="vulkan timestamps", **rot.columns(), when=when)
                rows.append(row)
                if writer:
                    writer.append(row)
        finally:
            for src, dst in pairs:
                src.close()
                dst.close()
        if not torch_too:
            continue
        where, fn, on_cuda = torch_copy_timer(spec.nbytes, device, rot.copies)
        sync = None
        if on_cuda:
            import torch
            sync = torch.cuda.synchronize
        samples = sample_callable(fn, sync=sync, cuda_events=on_cuda, min_time_s=min_time_s)
        row = measurement_row("copy", env, samples, bytes_moved=spec.bytes_moved(), method=f"torch copy_ ({where})",
                              size_mib=mib, copy_bytes=spec.nbytes, repeats=1,
                              timer="cuda events" if on_cuda else "wall clock",
                              **rot.columns(), when=when)
        if rot.flush_bytes:  # torch's copy is rotated, never swept
            row.update(cache_flush_bytes=0, cache_method=f"torch: {rot.copies} sets rotated, no sweep (not cold)")
        rows.append(row)
        if writer:
            writer.append(row)
    return pd.DataFrame(rows)


def time_runs(device, rot, make, *, repeats: int, label: str, after=None, **sampling):
    """Time `rot.copies` kernel runs made by `make()` (each its own buffers: a `KernelRun`) in the regime of `rot`
    (`measure.sample_rotated`, with the sweep it needs), one run per dispatch; `after(runs)` is called while they
    are open (a check of what they computed). Returns (gpu_ns, host_ns, dispatches per recording, after's result)."""
    runs = []
    try:
        for _ in range(rot.copies):
            runs.append(make())
        with flush_for(device, rot) as flush:
            gpu, host, per_recording = sample_rotated(device, rot, lambda rec, i: runs[i].record(rec),
                                                      repeats=repeats, label=label, flush=flush, **sampling)
        return gpu, host, per_recording, (after(runs) if after is not None else None)
    finally:
        for run in runs:
            run.close()


def copy_bytes_for(bytes_moved: int) -> int:
    """The copy with a kernel's traffic: half its bytes (read once, written once), a multiple of 16."""
    return max(16, (int(bytes_moved) // 2 + 15) // 16 * 16)


#: The large copy whose bandwidth is the DRAM floor of a run (`dram_floor_us`): at least this many MiB, and at
#: least 4x the last-level cache (so it streams from DRAM whatever the regime).
DRAM_COPY_MIB = 256


def dispatch_floor(device, *, repeats: int = 20, min_time_s: float = 0.2) -> dict:
    """The per-dispatch floor the device shows: a copy of 16 bytes (one work group, no traffic to speak of) timed
    the way the suites time kernels (`repeats` back to back in one recording, the time per dispatch). A row."""
    env = environment(device)
    spec = CopySpec(16)
    src, dst = device.buffer(nbytes=16, name="floor-src"), device.buffer(nbytes=16, name="floor-dst")
    try:
        with device.record("dispatch floor") as rec:
            for _ in range(repeats):
                record_copy(rec, device, spec, dst, src)
            gpu, host = sample_recording(rec, repeats=repeats, min_time_s=min_time_s)
    finally:
        src.close()
        dst.close()
    return measurement_row("dispatch floor", env, gpu, host_ns=host, bytes_moved=0, method="shader uvec4, 16 B",
                           repeats=repeats, timer="vulkan timestamps")


class CopyAtTraffic:
    """The copy roofline at the traffic of each kernel of a suite, in each cache regime the suite measures: every
    distinct byte count the kernels move is copied (bench_copy) up front and again at the end of the run
    (`finish`: the same copies, `copy_drift_pct` against the start), and `annotate` puts the matching figures
    beside a kernel's row. With them, the run's floors: the DRAM floor (the bandwidth of a copy of
    max(DRAM_COPY_MIB, 4x the last-level cache)) and the per-dispatch floor (`dispatch_floor`).

    The columns `annotate` adds (one definition of "% of copy", docs/nvidia.md#percent-of-copy-one-definition):
    copy_GBps / copy_fraction (GB/s ÷ the best Vulkan copy of the same traffic in the same regime, dispatched as
    the kernel is: back to back in one recording), shader_copy_GBps / shader_copy_fraction (the uvec4 shader copy
    alone), copy_p10_us / copy_p90_us (the copy's spread: the roofline check's noise), dram_GBps / dram_floor_us /
    dram_fraction (the kernel's bytes at the large copy's bandwidth ÷ its time), dispatch_floor_us."""

    def __init__(self, device, bytes_moved, *, quick: bool = False, show_progress: bool = True,
                 regimes=("hot",)):
        self.device, self.quick, self.show_progress = device, quick, show_progress
        self.regimes = parse_regimes(regimes)
        self.sizes = sorted({copy_bytes_for(b) for b in bytes_moved})
        self.figures: dict = {}
        frames = [self._measure(regime, "start") for regime in self.regimes]
        llc = last_level_cache(device)[0]
        dram_mib = 4 if quick else max(DRAM_COPY_MIB, -(-ROTATE_FACTOR * llc // 2**20))
        dram = bench_copy(device, [dram_mib], show_progress=False, min_time_s=0.005 if quick else 0.2,
                          repeats=2 if quick else None, torch_too=False, when="dram floor")
        self.dram_GBps = float(dram["GB/s"].max())
        floor = dict(dispatch_floor(device, repeats=2 if quick else 20, min_time_s=0.005 if quick else 0.2),
                     copy_bytes=16)
        self.dispatch_floor_us = float(floor["median_us"])
        self.frame = pd.concat(frames + [dram, pd.DataFrame([floor])], ignore_index=True)

    def _measure(self, regime: str, when: str) -> pd.DataFrame:
        frame = bench_copy(self.device, [s / 2**20 for s in self.sizes], show_progress=self.show_progress,
                           min_time_s=0.005 if self.quick else 0.2, repeats=2 if self.quick else None,
                           regime=regime, quick=self.quick, when=when)
        vulkan = frame[frame["timer"] == "vulkan timestamps"]
        for key, group in vulkan.groupby("copy_bytes"):
            best = group.loc[group["GB/s"].idxmax()]
            shader = group[group["method"] == "shader uvec4"]
            self.figures.setdefault((regime, when), {})[int(key)] = {
                "copy_GBps": float(best["GB/s"]), "copy_p10_us": float(best["p10_us"]),
                "copy_p90_us": float(best["p90_us"]), "copy_median_us": float(best["median_us"]),
                "shader_copy_GBps": float(shader["GB/s"].max()) if len(shader) else np.nan}
        return frame

    def annotate(self, row: dict, bytes_moved: int, regime: str | None = None) -> dict:
        """The copy figures of the class docstring beside a kernel's `row` measured in `regime` (default: the
        row's `cache`, else the first regime); the row's `cache` column is set."""
        regime = regime or row.get("cache") or self.regimes[0]
        if regime not in self.regimes:
            raise ValueError(f"this run measured its copies {', '.join(self.regimes)}, not {regime!r}")
        row.setdefault("cache", regime)
        figures = self.figures[(regime, "start")].get(copy_bytes_for(bytes_moved), {})
        row["copy_GBps"] = figures.get("copy_GBps", np.nan)
        row["copy_fraction"] = row["GB/s"] / row["copy_GBps"]
        row["shader_copy_GBps"] = figures.get("shader_copy_GBps", np.nan)
        row["shader_copy_fraction"] = row["GB/s"] / row["shader_copy_GBps"]
        row["copy_p10_us"] = figures.get("copy_p10_us", np.nan)
        row["copy_p90_us"] = figures.get("copy_p90_us", np.nan)
        row["dram_GBps"] = self.dram_GBps
        row["dram_floor_us"] = bytes_moved / self.dram_GBps / 1e3 if self.dram_GBps > 0 else np.nan
        row["dram_fraction"] = row["dram_floor_us"] / row["median_us"] if row.get("median_us") else np.nan
        row["dispatch_floor_us"] = self.dispatch_floor_us
        return row

    def finish(self) -> pd.DataFrame:
        """The copies measured again at the end of the run: rows with `copy_drift_pct` (end ÷ start − 1 of the best
        Vulkan copy's median at each size and regime, `drift`), to append to the suite's rows."""
        frames = [self._measure(regime, "end") for regime in self.regimes]
        drift = self.drift().set_index(["cache", "copy_bytes"])["drift_pct"]
        for regime, frame in zip(self.regimes, frames):
            frame["copy_drift_pct"] = [drift.get((regime, k), np.nan) for k in frame["copy_bytes"]]
        return pd.concat(frames, ignore_index=True)

    def drift(self) -> pd.DataFrame:
        """copy_bytes, cache, start / end median µs and drift %: after `finish`."""
        rows = []
        for regime in self.regimes:
            start, end = self.figures.get((regime, "start"), {}), self.figures.get((regime, "end"), {})
            for key in sorted(start):
                if key in end:
                    rows.append({"copy_bytes": key, "cache": regime, "start_us": start[key]["copy_median_us"],
                                 "end_us": end[key]["copy_median_us"],
                                 "drift_pct": 100 * (end[key]["copy_median_us"] / start[key]["copy_median_us"] - 1)})
        return pd.DataFrame(rows, columns=["copy_bytes", "cache", "start_us", "end_us", "drift_pct"])


def copy_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True) -> pd.DataFrame:
    sizes = (1, 4, 16) if quick else COPY_SIZES_MIB
    return bench_copy(device, sizes, writer=writer, show_progress=show_progress,
                      min_time_s=0.05 if quick else 0.2)


def peak_copy_gbps(df: pd.DataFrame) -> float:
    """The copy roofline: the best Vulkan copy GB/s at the largest size measured. Smaller copies may run from the
    last-level cache (on an H200, 16 MiB source + destination fit in its 50 MB L2) and overstate DRAM bandwidth."""
    vulkan_rows = df[df["timer"] == "vulkan timestamps"]
    largest = vulkan_rows["size_mib"].max()
    return float(vulkan_rows[vulkan_rows["size_mib"] == largest]["GB/s"].max())


def pipeline_churn_rows(device, env: dict, cycles: int = 100) -> list[dict]:
    """RSS growth per 100 create/close cycles of the copy pipeline: workbench.vk (re-uses closed pipelines) next
    to the bare `vulkan` binding (what the driver itself keeps per compiled pipeline)."""
    rows = []
    for mode, what in (("workbench", "pipeline churn: same pipeline through workbench.vk"),
                       ("bare", "pipeline churn: same pipeline through the bare vulkan binding")):
        start = time.perf_counter_ns()
        m = churn(compile_shader(SHADER), mode, cycles, warmup=10, device=device)
        rows.append({"what": what, "dispatches": 0, "cycles": cycles,
                     "host_median_us": (time.perf_counter_ns() - start) / cycles / 1e3, "gpu_median_us": np.nan,
                     "rss_kib_per_100_pipelines": m["rss_growth_kib"] * 100 / cycles, **env})
    return rows


def bench_dispatch_overhead(device, dispatches: int = 200) -> pd.DataFrame:
    """Host cost of the runtime: one tiny dispatch submitted and waited for (dev.run), and the per-dispatch
    share of a recording of many tiny dispatches."""
    env = environment(device)
    spec = CopySpec(16 * 64)
    src = device.buffer(nbytes=spec.nbytes)
    dst = device.buffer(nbytes=spec.nbytes)
    rows = []
    try:
        pipeline = pipeline_for(device, SHADER, local_size=LOCAL_SIZE)
        gsize = linear_global_size(device, spec.num_vec4, LOCAL_SIZE[0])
        host, gpu = [], []
        for _ in range(dispatches // 4 + 2):
            t0 = time.perf_counter_ns()
            timing = device.run(pipeline, [dst, src], gsize, spec.push_constants())
            host.append(time.perf_counter_ns() - t0)
            gpu.append(timing.gpu_ns)
        rows.append({"what": "dev.run (record + submit + wait, 1 dispatch)", "dispatches": 1,
                     "host_median_us": float(np.median(host[2:]) / 1e3),
                     "gpu_median_us": float(np.median(gpu[2:]) / 1e3), **env})
        t0 = time.perf_counter_ns()
        with device.record("overhead") as rec:
            for _ in range(dispatches):
                record_copy(rec, device, spec, dst, src)
            t1 = time.perf_counter_ns()
            rec.submit()
            t2 = time.perf_counter_ns()
            rec.submit()
            t3 = time.perf_counter_ns()
        rows.append({"what": "recording: per dispatch, first submit (record + build + run)",
                     "dispatches": dispatches, "host_median_us": (t2 - t0) / dispatches / 1e3,
                     "gpu_median_us": rec.gpu_ns / dispatches / 1e3, **env})
        rows.append({"what": "recording: per dispatch, re-submit", "dispatches": dispatches,
                     "host_median_us": (t3 - t2) / dispatches / 1e3,
                     "gpu_median_us": rec.gpu_ns / dispatches / 1e3, **env})
        rows.append({"what": "recording: per dispatch, collecting commands only", "dispatches": dispatches,
                     "host_median_us": (t1 - t0) / dispatches / 1e3, "gpu_median_us": np.nan, **env})
        rows.extend(pipeline_churn_rows(device, env))
    finally:
        src.close()
        dst.close()
    return pd.DataFrame(rows)
