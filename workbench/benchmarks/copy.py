"""The copy roofline and the runtime's own costs: device-to-device copy bandwidth (the shader copy, vkCmdCopyBuffer
and torch's copy), the copy at each kernel's traffic, dispatch overhead and pipeline churn."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from ..kernels import linear_global_size, pipeline_for
from ..kernels.copy import LOCAL_SIZE, SHADER, CopySpec, record_copy
from ..measure import ResultsWriter, environment, measurement_row, progress, sample_callable, sample_recording
from ..toolchain.shaders import compile_shader
from ..vk.churn import measure as churn

COPY_SIZES_MIB = (1, 4, 16, 64, 256)


def torch_copy_timer(nbytes: int, device):
    """torch's own copy of the same bytes on the same device: CUDA when the Vulkan device is an NVIDIA GPU and
    torch sees CUDA, otherwise the CPU (lavapipe's 'device memory' is host memory)."""
    import torch
    on_cuda = device.info.vendor == "NVIDIA" and torch.cuda.is_available()
    where = "cuda" if on_cuda else "cpu"
    src = torch.empty(nbytes // 4, dtype=torch.int32, device=where).random_(-1000, 1000)
    dst = torch.empty_like(src)
    return where, (lambda: dst.copy_(src)), on_cuda


def bench_copy(device, sizes_mib=COPY_SIZES_MIB, *, writer: ResultsWriter | None = None, show_progress=True,
               min_time_s: float = 0.2, repeats: int | None = None) -> pd.DataFrame:
    """Device-to-device copy bandwidth: the shader copy, vkCmdCopyBuffer, and torch's copy, per size."""
    env = environment(device)
    rows = []
    for mib in progress(list(sizes_mib), "copy", enabled=show_progress):
        spec = CopySpec(int(mib * 2**20) // 16 * 16)
        reps = repeats or max(1, min(20, int(64 * 2**20 // spec.nbytes)))  # amortise small copies
        src = device.buffer(nbytes=spec.nbytes, name="copy-src")
        dst = device.buffer(nbytes=spec.nbytes, name="copy-dst")
        try:
            for method in ("shader uvec4", "vkCmdCopyBuffer"):
                with device.record(f"copy {mib} MiB") as rec:
                    for r in range(reps):
                        if method == "shader uvec4":
                            record_copy(rec, device, spec, dst, src)
                        else:
                            rec.copy(src, dst, spec.nbytes)
                    gpu, host = sample_recording(rec, repeats=reps, min_time_s=min_time_s)
                row = measurement_row("copy", env, gpu, host_ns=host, bytes_moved=spec.bytes_moved(),
                                      method=method, size_mib=mib, repeats=reps, timer="vulkan timestamps")
                rows.append(row)
                if writer:
                    writer.append(row)
        finally:
            src.close()
            dst.close()
        where, fn, on_cuda = torch_copy_timer(spec.nbytes, device)
        sync = None
        if on_cuda:
            import torch
            sync = torch.cuda.synchronize
        samples = sample_callable(fn, sync=sync, cuda_events=on_cuda, min_time_s=min_time_s)
        row = measurement_row("copy", env, samples, bytes_moved=spec.bytes_moved(), method=f"torch copy_ ({where})",
                              size_mib=mib, repeats=1, timer="cuda events" if on_cuda else "wall clock")
        rows.append(row)
        if writer:
            writer.append(row)
    return pd.DataFrame(rows)


def copy_bytes_for(bytes_moved: int) -> int:
    """The copy with a kernel's traffic: half its bytes (read once, written once), a multiple of 16."""
    return max(16, (int(bytes_moved) // 2 + 15) // 16 * 16)


class CopyAtTraffic:
    """The copy roofline at the traffic of each kernel of a suite: every distinct byte count the kernels move is
    copied once (bench_copy) up front, and `annotate` puts the matching copy figures beside a kernel's row."""

    def __init__(self, device, bytes_moved, *, quick: bool = False, show_progress: bool = True):
        sizes = sorted({copy_bytes_for(b) for b in bytes_moved})
        self.frame = bench_copy(device, [s / 2**20 for s in sizes], show_progress=show_progress,
                                min_time_s=0.005 if quick else 0.2, repeats=2 if quick else None)
        self.frame["copy_bytes"] = (self.frame["size_mib"] * 2**20).round().astype(np.int64) // 16 * 16
        vulkan = self.frame[self.frame["timer"] == "vulkan timestamps"]
        self.best = vulkan.groupby("copy_bytes")["GB/s"].max().to_dict()
        self.shader = self.frame[self.frame["method"] == "shader uvec4"].groupby("copy_bytes")["GB/s"].max().to_dict()

    def annotate(self, row: dict, bytes_moved: int) -> dict:
        """copy_GBps (best Vulkan copy: shader or vkCmdCopyBuffer), copy_fraction, and the same against the uvec4
        shader copy alone (the roof of a compute shader)."""
        key = copy_bytes_for(bytes_moved)
        row["copy_GBps"] = self.best.get(key, np.nan)
        row["copy_fraction"] = row["GB/s"] / row["copy_GBps"]
        row["shader_copy_GBps"] = self.shader.get(key, np.nan)
        row["shader_copy_fraction"] = row["GB/s"] / row["shader_copy_GBps"]
        return row


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
