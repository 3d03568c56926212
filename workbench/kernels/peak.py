"""The roof probes: peak packed-int8 dot throughput (both forms), peak fp32 FMA and packed-fp16 FMA throughput, one
dispatch each (measured, with the copy roof and the theoretical rates, in `workbench.benchmarks.peak`).

A probe is a true roof only if nothing a kernel can do runs faster, so each probe is built the way vkpeak / clpeak
build theirs: CHAINS independent accumulator chains per thread (no chain waits on another), UNROLL rounds per loop
trip (the loop's own instructions cost nothing), operands the compiler cannot know or hoist, enough threads for
several full waves of resident threads (SMs x warps per SM x 32 where the device says), and a sweep over local
size x CHAINS keeping the best. The iteration count is scaled so that one dispatch takes about `target_ms`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import pipeline_for
from .device_limits import device_limits

KINDS = {"int8_dot": ("peak_int8_dot", 4), "fp32_fma": ("peak_fp32_fma", 1),  # shader, MACs per instruction
         "fp16x2_fma": ("peak_fp16x2_fma", 2)}
LOCAL_SIZES = (64, 128, 256, 512, 1024)
CHAIN_COUNTS = (4, 8, 16, 32)
DEFAULT_OPERAND = 0x02FF03FE


@dataclass(frozen=True)
class PeakSpec:
    kind: str              # "int8_dot" | "fp32_fma" | "fp16x2_fma"
    threads: int
    iterations: int        # loop trips; each trip is UNROLL rounds of CHAINS instructions
    chains: int = 8
    unroll: int = 8
    local_size: int = 256
    use_dot_ext: bool = True
    saturate: bool = True  # int8_dot: OpSDotAccSat (ET-VK's choice) or OpSDot + a wrapping add

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"peak kind must be one of {sorted(KINDS)}, got {self.kind!r}")
        if self.chains not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"chains must be a power of two up to 32, got {self.chains}")
        if self.unroll not in (1, 2, 4, 8, 16):
            raise ValueError(f"unroll must be a power of two up to 16, got {self.unroll}")
        if self.local_size not in (32, 64, 128, 256, 512, 1024):
            raise ValueError(f"local_size must be a power of two from 32 to 1024, got {self.local_size}")
        if self.threads <= 0 or self.threads % self.local_size:
            raise ValueError(f"threads must be a positive multiple of the local size {self.local_size}, "
                             f"got {self.threads}")
        if self.iterations < 1:
            raise ValueError(f"iterations must be >= 1, got {self.iterations}")

    @property
    def shader(self) -> str:
        return KINDS[self.kind][0]

    def defines(self) -> dict:
        d = {"CHAINS": self.chains, "UNROLL": self.unroll}
        if self.kind == "int8_dot":
            d["USE_INT_DOT_EXT"] = int(self.use_dot_ext)
            d["SATURATE"] = int(self.saturate)
        return d

    def instructions_per_thread(self) -> int:
        return self.iterations * self.unroll * self.chains

    def macs(self) -> int:
        return self.threads * self.instructions_per_thread() * KINDS[self.kind][1]

    def push_constants(self, operand: int = DEFAULT_OPERAND, mul: float = 0.999, add: float = 1e-3) -> bytes:
        return (np.array([self.iterations, operand], dtype=np.int32).tobytes()
                + np.array([mul, add], dtype=np.float32).tobytes())

    @property
    def label(self) -> str:
        if self.kind == "int8_dot":
            if not self.use_dot_ext:
                return "int8 dot (portable fallback)" + ("" if self.saturate else ", wrapping")
            return "int8 dot (OpSDotAccSat)" if self.saturate else "int8 dot (OpSDot + add)"
        return "fp32 fma" if self.kind == "fp32_fma" else "fp16x2 fma"


def reference(spec: PeakSpec, operand: int = DEFAULT_OPERAND, mul: float = 0.999, add: float = 1e-3) -> np.ndarray:
    """What the probe stores, computed on the host with exactly `instructions_per_thread` operations per chain
    (small cases only: it loops over the instructions). int8: the packed dot with the shader's saturation or
    wrapping; fp32: exact only where every fma is exact (mul = add = 1 counts the fmas)."""
    ids = np.arange(spec.threads, dtype=np.int64)
    steps = spec.iterations * spec.unroll
    if spec.kind == "fp32_fma":
        acc = np.stack([((ids & 255) + c).astype(np.float64) for c in range(spec.chains)])
        for _ in range(steps):
            acc = acc * mul + add
        return acc.astype(np.float32).sum(axis=0, dtype=np.float32)
    if spec.kind == "fp16x2_fma":  # each lane's fma rounded once to fp16 (exact in float64 first)
        lanes = np.stack([((ids & 255) + c + h) for c in range(spec.chains) for h in (0, 1)]).astype(np.float16)
        m, a = np.float64(np.float16(mul)), np.float64(np.float16(add))
        for _ in range(steps):
            lanes = (lanes.astype(np.float64) * m + a).astype(np.float16)
        pairs = lanes.astype(np.float32).reshape(spec.chains, 2, -1)
        total = np.zeros(spec.threads, np.float32)
        for c in range(spec.chains):  # the shader's order: total += float(x) + float(y), chain by chain
            total = total + (pairs[c, 0] + pairs[c, 1])
        return total
    b = (np.int64(operand) ^ ids).astype(np.int32)
    b_lanes = b.view(np.uint32).view(np.int8).reshape(-1, 4).astype(np.int64)
    acc = np.stack([(ids + c * 0x01000193).astype(np.int32) for c in range(spec.chains)]).astype(np.int64)
    acc = ((acc + 2**31) % 2**32) - 2**31
    for _ in range(steps):
        lanes = acc.astype(np.int32).view(np.uint32).view(np.int8).reshape(spec.chains, -1, 4).astype(np.int64)
        total = acc + (lanes * b_lanes[None]).sum(axis=2)
        if spec.saturate:
            acc = np.clip(total, -2**31, 2**31 - 1)
        else:
            acc = ((total + 2**31) % 2**32) - 2**31
    total = acc.sum(axis=0)
    return (((total + 2**31) % 2**32) - 2**31).astype(np.int32)


def record(rec, device, spec: PeakSpec, out, push: bytes | None = None) -> None:
    """The probe's one dispatch into a recording."""
    if spec.kind == "int8_dot" and spec.use_dot_ext:
        device.require("integer_dot_product")
    pipeline = pipeline_for(device, spec.shader, defines=spec.defines(), local_size=(spec.local_size, 1, 1))
    rec.dispatch(pipeline, [out], (spec.threads, 1, 1), push or spec.push_constants())


def run_once(device, spec: PeakSpec, out, push: bytes | None = None) -> float:
    """One timed run of the probe: its GPU ns."""
    with device.record(spec.label) as rec:
        record(rec, device, spec, out, push)
        rec.submit()
        return rec.gpu_ns


def default_threads(device, limits=None, waves: int = 4) -> int:
    """`waves` full waves of the device's resident threads (SMs x warps per SM x subgroup size) where it says
    (so no wave is half empty); 1M threads on other GPUs; few on a CPU device (each thread is a loop there)."""
    if device.info.is_cpu:
        return 16 * 1024
    resident = (limits or device_limits(device)).resident_threads
    if resident:
        return -(-waves * resident // 1024) * 1024
    return 1024 * 1024
