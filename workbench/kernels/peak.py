"""The device's roofs: peak packed-int8 dot throughput, peak fp32 FMA throughput (with the copy bandwidth from
`workbench.bench`), and a check of the timing instruments.

Each peak kernel runs CHAINS independent dependency chains per thread; the iteration count is scaled from a probe
run so that one dispatch takes about `target_ms` (ET-VK's probe-then-scale, which also keeps clocks up).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import pipeline_for

LOCAL_SIZE = (256, 1, 1)
KINDS = {"int8_dot": ("peak_int8_dot", 4), "fp32_fma": ("peak_fp32_fma", 1)}  # shader, MACs per instruction


@dataclass(frozen=True)
class PeakSpec:
    kind: str              # "int8_dot" | "fp32_fma"
    threads: int
    iterations: int
    chains: int = 8
    use_dot_ext: bool = True
    saturate: bool = True  # int8_dot: OpSDotAccSat (ET-VK's choice) or OpSDot + a wrapping add

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"peak kind must be one of {sorted(KINDS)}, got {self.kind!r}")
        if self.chains not in (1, 2, 4, 8, 16):
            raise ValueError(f"chains must be a power of two up to 16, got {self.chains}")
        if self.threads % LOCAL_SIZE[0]:
            raise ValueError(f"threads must be a multiple of {LOCAL_SIZE[0]}, got {self.threads}")

    @property
    def shader(self) -> str:
        return KINDS[self.kind][0]

    def defines(self) -> dict:
        d = {"CHAINS": self.chains}
        if self.kind == "int8_dot":
            d["USE_INT_DOT_EXT"] = int(self.use_dot_ext)
            d["SATURATE"] = int(self.saturate)
        return d

    def macs(self) -> int:
        return self.threads * self.iterations * self.chains * KINDS[self.kind][1]

    def push_constants(self) -> bytes:
        return np.array([self.iterations, 1], dtype=np.int32).tobytes()

    @property
    def label(self) -> str:
        if self.kind == "int8_dot":
            if not self.use_dot_ext:
                return "int8 dot (portable fallback)" + ("" if self.saturate else ", wrapping")
            return "int8 dot (OpSDotAccSat)" if self.saturate else "int8 dot (OpSDot + add)"
        return "fp32 fma"


def _run(device, spec: PeakSpec, out, samples: bool = False, min_time_s: float = 0.2):
    from .. import bench
    if spec.kind == "int8_dot" and spec.use_dot_ext:
        device.require("integer_dot_product")
    pipeline = pipeline_for(device, spec.shader, defines=spec.defines(), local_size=LOCAL_SIZE)
    with device.record(spec.label) as rec:
        rec.dispatch(pipeline, [out], (spec.threads, 1, 1), spec.push_constants())
        if not samples:
            rec.submit()
            return rec.gpu_ns
        return bench.sample_recording(rec, min_time_s=min_time_s, min_samples=5, warmup=1)


def default_threads(device) -> int:
    """Enough threads to fill a GPU many times over; few on a CPU device (each thread is a loop there)."""
    return 16 * 1024 if device.info.is_cpu else 1024 * 1024


def bench_peak(device, writer=None, *, quick: bool = False, show_progress: bool = True,
               target_ms: float = 10.0) -> pd.DataFrame:
    from .. import bench
    env = bench.environment(device)
    threads = 4096 if quick else default_threads(device)
    target_ms = 1.0 if quick else target_ms
    cases = [("int8_dot", True, True), ("int8_dot", True, False), ("int8_dot", False, True),
             ("fp32_fma", True, True)]
    if not device.info.features.get("integer_dot_product"):
        cases = [c for c in cases if not (c[0] == "int8_dot" and c[1])]
    rows = []
    with device.buffer(nbytes=4 * threads, name="peak-out") as out:
        for kind, ext, saturate in bench.progress(cases, "peak", enabled=show_progress):
            probe = PeakSpec(kind, threads, 16, use_dot_ext=ext, saturate=saturate)
            _run(device, probe, out)  # the first run may include the driver's shader compilation
            probe_ns = max(_run(device, probe, out), 1.0)
            iterations = int(min(1 << 16, max(16, 16 * target_ms * 1e6 / probe_ns)))
            spec = PeakSpec(kind, threads, iterations, use_dot_ext=ext, saturate=saturate)
            gpu, host = _run(device, spec, out, samples=True, min_time_s=0.02 if quick else 0.2)
            row = bench.measurement_row("peak", env, gpu, host_ns=host, macs=spec.macs(), method=spec.label,
                                        kind=kind, threads=threads, iterations=iterations, chains=spec.chains,
                                        saturate=saturate)
            row["ops_unit"] = "int8 ops (2 per MAC)" if kind == "int8_dot" else "FLOPs (2 per FMA)"
            rows.append(row)
            if writer:
                writer.append(row)
    return pd.DataFrame(rows)


def roofs(copy_df: pd.DataFrame, peak_df: pd.DataFrame) -> dict:
    """The device's roofs in one dict: copy GB/s (DRAM, the largest size), int8 GOP/s, fp32 GFLOP/s."""
    from ..bench import peak_copy_gbps
    best = peak_df.groupby("kind")["GOP/s"].max().to_dict()
    return {"copy_GBps": peak_copy_gbps(copy_df), "int8_GOPs": best.get("int8_dot", math.nan),
            "fp32_GFLOPs": best.get("fp32_fma", math.nan)}


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
    from .. import bench
    from .copy import CopySpec, record_copy
    env = bench.environment(device)
    if quick:
        size_mib, copies = 1, 4
    spec = CopySpec(int(size_mib * 2**20) // 16 * 16)
    min_time = 0.05 if quick else 0.5
    with device.buffer(nbytes=spec.nbytes) as src, device.buffer(nbytes=spec.nbytes) as dst, \
            device.record("instrument check") as rec:
        for _ in range(copies):
            record_copy(rec, device, spec, dst, src)
        gpu, host = bench.sample_recording(rec, repeats=copies, min_samples=5, min_time_s=min_time)
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
        where, fn, _ = bench._torch_copy_timer(spec.nbytes, device)
        torch_us = float(np.median(bench.sample_callable(fn, cuda_events=True, min_time_s=min_time)) / 1e3)
        add("another implementation: Vulkan shader copy vs torch copy_ (CUDA events)", "vulkan timestamps", vk_us,
            "cuda events", torch_us)
    return pd.DataFrame(rows)


def bench_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True) -> pd.DataFrame:
    """`workbench bench peak`: the copy roofline, the compute peaks and the instrument check, one frame."""
    from .. import bench
    copy_df = bench.copy_suite(device, writer, quick=quick, show_progress=show_progress)
    copy_df["suite"] = "copy"
    peak_df = bench_peak(device, writer, quick=quick, show_progress=show_progress)
    peak_df["suite"] = "peak"
    check_df = instrument_check(device, quick=quick)
    check_df["suite"] = "instrument check"
    check_df["kernel"] = "instrument check"
    if writer:
        for row in check_df.to_dict("records"):
            writer.append(row)
    return pd.concat([copy_df, peak_df, check_df], ignore_index=True)
