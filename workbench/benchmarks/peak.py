"""The device's roofs measured: peak packed-int8 dot throughput (both forms) and peak fp32 FMA throughput from the
probes of `workbench.kernels.peak`, the copy bandwidth (`benchmarks.copy`), each against the device's theoretical
rate where derivable; and a check of the timing instruments. The roofline check of a results folder is
`benchmarks.roof_check`."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..kernels.copy import CopySpec, record_copy
from ..kernels.device_limits import device_limits, theoretical_gops
from ..kernels.peak import CHAIN_COUNTS, LOCAL_SIZES, PeakSpec, default_threads, record, run_once
from ..measure import environment, measurement_row, progress, sample_callable, sample_recording
from .copy import copy_suite, peak_copy_gbps, torch_copy_timer


def _sample(device, spec: PeakSpec, out, min_time_s: float = 0.2):
    with device.record(spec.label) as rec:
        record(rec, device, spec, out)
        return sample_recording(rec, min_time_s=min_time_s, min_samples=5, warmup=1)


def _cases(device):
    cases = [("int8_dot", True, True), ("int8_dot", True, False), ("int8_dot", False, True),
             ("fp32_fma", True, True)]
    if device.info.features.get("shader_float16"):
        cases.append(("fp16x2_fma", True, True))
    if not device.info.features.get("integer_dot_product"):
        cases = [c for c in cases if not (c[0] == "int8_dot" and c[1])]
    return cases


def bench_peak(device, writer=None, *, quick: bool = False, show_progress: bool = True,
               target_ms: float = 10.0, local_sizes=None, chain_counts=None) -> pd.DataFrame:
    """Every probe over local size x chains (one row each; `best` marks each probe's maximum, the roof), with the
    device's theoretical rate (`theoretical_GOPs`, `probe_fraction` = GOP/s / theoretical) where derivable."""
    env = environment(device)
    limits = device_limits(device)
    threads = 4096 if quick else default_threads(device, limits)
    target_ms = 1.0 if quick else target_ms
    max_local = device.info.max_workgroup_invocations
    if local_sizes is None:
        local_sizes = (64, 256) if quick or device.info.is_cpu else LOCAL_SIZES
    if chain_counts is None:
        chain_counts = (8,) if quick or device.info.is_cpu else CHAIN_COUNTS
    configs = []
    for kind, ext, saturate in _cases(device):
        chains = (8,) if not ext else chain_counts  # the fallback is not a roof: one chain count is enough
        configs += [(kind, ext, saturate, c, ls) for c in chains for ls in local_sizes if ls <= max_local]
    rows = []
    with device.buffer(nbytes=4 * threads, name="peak-out") as out:
        for kind, ext, saturate, chains, local in progress(configs, "peak", enabled=show_progress):
            probe = PeakSpec(kind, threads, 2, chains=chains, local_size=local, use_dot_ext=ext, saturate=saturate)
            run_once(device, probe, out)  # the first run may include the driver's shader compilation
            probe_ns = max(run_once(device, probe, out), 1.0)
            iterations = int(min(1 << 16, max(2, 2 * target_ms * 1e6 / probe_ns)))
            spec = PeakSpec(kind, threads, iterations, chains=chains, local_size=local, use_dot_ext=ext,
                            saturate=saturate)
            gpu, host = _sample(device, spec, out, min_time_s=0.02 if quick else 0.2)
            row = measurement_row("peak", env, gpu, host_ns=host, macs=spec.macs(), method=spec.label,
                                  kind=kind, threads=threads, iterations=iterations, chains=chains,
                                  unroll=spec.unroll, local_size=local, saturate=saturate,
                                  instructions_per_thread=spec.instructions_per_thread())
            row["ops_unit"] = "int8 ops (2 per MAC)" if kind == "int8_dot" else "FLOPs (2 per FMA)"
            theory = theoretical_gops(limits, kind) if ext else math.nan
            row["theoretical_GOPs"] = theory
            row["probe_fraction"] = row["GOP/s"] / theory if np.isfinite(theory) else math.nan
            row.update(limits.columns())
            rows.append(row)
            if writer:
                writer.append(row)
    df = pd.DataFrame(rows)
    if len(df):
        df["best"] = df["GOP/s"] == df.groupby("method")["GOP/s"].transform("max")
    return df


def best_probes(peak_df: pd.DataFrame) -> pd.DataFrame:
    """One row per probe: its best configuration (the roof), with theoretical rate and fraction."""
    cols = [c for c in ["method", "kind", "chains", "local_size", "threads", "GOP/s", "theoretical_GOPs",
                        "probe_fraction", "limits_sm_count", "limits_clock_mhz", "limits_clock_source",
                        "limits_measured_clock_mhz"] if c in peak_df.columns]
    idx = peak_df.groupby("method")["GOP/s"].idxmax()
    return peak_df.loc[idx, cols].sort_values("GOP/s", ascending=False).reset_index(drop=True)


def roofs(copy_df: pd.DataFrame, peak_df: pd.DataFrame, mma_df: pd.DataFrame | None = None) -> dict:
    """The device's roofs in one dict: copy GB/s (DRAM, the largest size); int8 GOP/s for each dot form
    (`int8_sat_GOPs` OpSDotAccSat, `int8_wrap_GOPs` OpSDot + add) and `int8_GOPs`, the higher of the two; fp32
    GFLOP/s; `fp16x2_GFLOPs` the packed-fp16 probe where it ran; `int8_mma_GOPs`, the cooperative-matrix probe where
    one ran (NaN otherwise)."""
    ext = peak_df[~peak_df["method"].str.contains("fallback")] if len(peak_df) else peak_df
    by_method = ext.groupby("method")["GOP/s"].max().to_dict()
    best = peak_df.groupby("kind")["GOP/s"].max().to_dict()
    sat = by_method.get("int8 dot (OpSDotAccSat)", math.nan)
    wrap = by_method.get("int8 dot (OpSDot + add)", math.nan)
    mma = math.nan
    if mma_df is not None and len(mma_df) and "GOP/s" in mma_df:
        probes = mma_df[mma_df.get("kernel") == "coopmat peak"] if "kernel" in mma_df else mma_df
        if "status" in probes:  # a probe whose results were wrong measured nothing: it is no roof
            probes = probes[probes["status"] == "ok"]
        mma = float(probes["GOP/s"].max()) if len(probes) else math.nan
    return {"copy_GBps": peak_copy_gbps(copy_df), "int8_GOPs": best.get("int8_dot", math.nan),
            "int8_sat_GOPs": sat, "int8_wrap_GOPs": wrap, "fp32_GFLOPs": best.get("fp32_fma", math.nan),
            "fp16x2_GFLOPs": best.get("fp16x2_fma", math.nan),
            "int8_mma_GOPs": mma}


CUDA_UVEC4_COPY = r"""
extern "C" __global__ void copy_uvec4(uint4* __restrict__ dst, const uint4* __restrict__ src, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}
"""


def _cuda_copy_samples(nbytes: int, copies: int, min_time_s: float):
    """The Vulkan copy shader's twin in CUDA (one 16-byte uint4 per thread, 256 threads per block), compiled with
    CuPy's NVRTC, timed by CUDA events around `copies` launches, and by the host's wall clock around the same."""
    import time

    import cupy as cp
    n = nbytes // 16
    src = cp.zeros(4 * n, dtype=cp.uint32)
    dst = cp.empty_like(src)
    kernel = cp.RawKernel(CUDA_UVEC4_COPY, "copy_uvec4")
    grid = ((n + 255) // 256,)
    launch = lambda: kernel(grid, (256,), (dst, src, cp.uint32(n)))  # noqa: E731
    for _ in range(3):
        launch()
    cp.cuda.Device().synchronize()
    events, wall = [], []
    start_all = time.perf_counter()
    while len(events) < 5 or time.perf_counter() - start_all < min_time_s:
        begin, end = cp.cuda.Event(), cp.cuda.Event()
        t0 = time.perf_counter_ns()
        begin.record()
        for _ in range(copies):
            launch()
        end.record()
        end.synchronize()
        wall.append((time.perf_counter_ns() - t0) / copies)
        events.append(cp.cuda.get_elapsed_time(begin, end) * 1e6 / copies)
        if len(events) >= 200:
            break
    return np.array(events), np.array(wall)


def instrument_check(device, size_mib: float = 256, copies: int = 100, quick: bool = False) -> pd.DataFrame:
    """Do the clocks agree? Vulkan: the same copies timed by GPU timestamps and by the host's wall clock around
    the submit (a long recording, so submission costs little). NVIDIA with CuPy: the same copy kernel (one 16-byte
    vector per thread) written in CUDA, timed by CUDA events — same bytes, same access pattern, other clock — and
    those events against the host's wall clock too. torch's own copy_ is listed as well: another implementation,
    so its gap measures the implementation, not the clocks."""
    env = environment(device)
    if quick:
        size_mib, copies = 1, 4
    spec = CopySpec(int(size_mib * 2**20) // 16 * 16)
    min_time = 0.05 if quick else 0.5
    with device.buffer(nbytes=spec.nbytes) as src, device.buffer(nbytes=spec.nbytes) as dst, \
            device.record("instrument check") as rec:
        for _ in range(copies):
            record_copy(rec, device, spec, dst, src)
        gpu, host = sample_recording(rec, repeats=copies, min_samples=5, min_time_s=min_time)
    vk_us = float(np.median(gpu) / 1e3)
    rows = []

    def add(check, a, a_us, b, b_us):
        rows.append({"check": check, "size_mib": size_mib, "copies_per_sample": copies, "a": a, "a_us": a_us,
                     "b": b, "b_us": b_us, "difference_pct": 100 * (b_us - a_us) / a_us, **env})

    add("same Vulkan copies: GPU timestamps vs host wall clock", "vulkan timestamps", vk_us,
        "host wall clock", float(np.median(host) / 1e3))
    import torch
    if device.info.vendor == "NVIDIA" and torch.cuda.is_available():
        try:
            events, wall = _cuda_copy_samples(spec.nbytes, copies, min_time)
        except ImportError:
            events = None
        if events is not None:
            cuda_us = float(np.median(events) / 1e3)
            add("same copy kernel: Vulkan timestamps vs CUDA events (CuPy, uint4 per thread)", "vulkan timestamps",
                vk_us, "cuda events", cuda_us)
            add("same CUDA copies: CUDA events vs host wall clock", "cuda events", cuda_us, "host wall clock",
                float(np.median(wall) / 1e3))
        where, fn, _ = torch_copy_timer(spec.nbytes, device)
        torch_us = float(np.median(sample_callable(fn, cuda_events=True, min_time_s=min_time)) / 1e3)
        add("another implementation: Vulkan shader copy vs torch copy_ (CUDA events)", "vulkan timestamps", vk_us,
            "cuda events", torch_us)
    return pd.DataFrame(rows)


def bench_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True) -> pd.DataFrame:
    """`workbench bench peak`: the copy roofline, the compute peaks and the instrument check, one frame."""
    copy_df = copy_suite(device, writer, quick=quick, show_progress=show_progress)
    copy_df["suite"] = "copy"
    peak_df = bench_peak(device, writer, quick=quick, show_progress=show_progress)
    peak_df["suite"] = "peak"
    for row in best_probes(peak_df).to_dict("records"):
        theory = row.get("theoretical_GOPs", math.nan)
        versus = f" = {100 * row['probe_fraction']:.0f}% of the theoretical {theory:,.0f}" if np.isfinite(theory) \
            else " (no theoretical rate for this device)"
        print(f"roof {row['method']}: {row['GOP/s']:,.0f} GOP/s at local size {row['local_size']}, "
              f"{row['chains']} chains{versus}")
    check_df = instrument_check(device, quick=quick)
    check_df["suite"] = "instrument check"
    check_df["kernel"] = "instrument check"
    if writer:
        for row in check_df.to_dict("records"):
            writer.append(row)
    return pd.concat([copy_df, peak_df, check_df], ignore_index=True)
