"""What bounds the device, read from the device: SM count and warps per SM (VK_NV_shader_sm_builtins, else torch's
CUDA properties), the SM clock (VK_KHR_shader_clock cycles over a timestamped dispatch; NVML / nvidia-smi where
present), resident threads, and the theoretical issue rates those give.

    limits = device_limits(device)            # DeviceLimits(sm_count=132, warps_per_sm=64, clock_mhz=..., ...)
    limits.resident_threads                   # SMs x warps per SM x subgroup size (None when unknown)
    theoretical_gops(limits, "int8_dot")      # SMs x MACs/clock/SM x 2 x clock, or NaN where not derivable

Per-SM rates (MACs per clock per SM) come from a small table by architecture; a rate missing there gives NaN, never
a guess. sm_90 (H100/H200): 128 fp32 FMA lanes (Hopper tuning guide); 64 int32 lanes, hence 64 dp4a (4 MACs each) —
the Volta whitepaper's 62 TOP/s int8 for V100 is 80 SMs x 64 dp4a x 8 ops x 1.53 GHz, and Hopper keeps 64 int32
lanes per SM; dense int8 tensor cores 4096 MACs (1,979 TOP/s for 132 SMs at 1.83 GHz, the datasheet's figure).
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

import numpy as np

from ..measure.clocks import nvml_clocks

# MACs per clock per SM, by architecture; ops = 2 x MACs
ARCH_RATES = {
    "sm_90": {"fp32_fma": 128, "fp16x2_fma": 256, "int8_dot": 64 * 4, "int8_mma": 4096},
}
MAX_THREADS_PER_SM = {"sm_90": 2048}
SHADER = "device_limits"
LOCAL_X = 32


@dataclass(frozen=True)
class DeviceLimits:
    arch: str | None = None            # "sm_90", or None where not known
    sm_count: int | None = None
    warps_per_sm: int | None = None
    subgroup_size: int = 32
    sm_source: str = "unknown"         # "VK_NV_shader_sm_builtins" | "torch.cuda" | "unknown"
    clock_mhz: float = math.nan        # the clock the theoretical rates use (max SM clock where readable)
    clock_source: str = "unknown"
    measured_clock_mhz: float = math.nan   # SM cycles / timestamped ns, from VK_KHR_shader_clock
    current_clock_mhz: float = math.nan    # NVML / nvidia-smi's SM clock when read
    max_clock_mhz: float = math.nan        # NVML / nvidia-smi's max SM clock

    @property
    def resident_threads(self) -> int | None:
        if self.sm_count and self.warps_per_sm:
            return self.sm_count * self.warps_per_sm * self.subgroup_size
        return None

    def columns(self) -> dict:
        row = {f"limits_{k}": v for k, v in asdict(self).items()}
        row["limits_resident_threads"] = self.resident_threads
        return row


def nvidia_arch(device) -> str | None:
    """sm_90 for Hopper parts by name (torch's capability where CUDA is there); None otherwise."""
    if device.info.vendor != "NVIDIA":
        return None
    if re.search(r"\b(H100|H200|H800|H20|GH200)\b", device.info.name):
        return "sm_90"
    try:
        import torch
        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            arch = f"sm_{major}{minor}"
            return arch if arch in ARCH_RATES else None
    except Exception:  # noqa: BLE001 - no CUDA torch: the table lookup simply fails
        pass
    return None


def _decode_clock_words(words: np.ndarray, groups: int) -> np.ndarray:
    """Cycles per workgroup from the shader's (start lo, start hi, end lo, end hi) words."""
    w = words[4:4 + 4 * groups].astype(np.uint64).reshape(groups, 4)
    start = w[:, 0] | (w[:, 1] << np.uint64(32))
    end = w[:, 2] | (w[:, 3] << np.uint64(32))
    return (end - start).astype(np.float64)


def probe_shader_limits(device, *, groups: int | None = None, iterations: int = 200_000) -> dict:
    """Run shaders/device_limits.glsl: SM count and warps per SM (where VK_NV_shader_sm_builtins is on), and the
    SM clock (where VK_KHR_shader_clock's subgroup clock is): median cycles per workgroup / the dispatch's GPU ns.
    Returns what it could read ({} when neither feature is there)."""
    from . import pipeline_for
    features = device.info.features
    sm, clock = bool(features.get("sm_builtins")), bool(features.get("shader_subgroup_clock"))
    if not (sm or clock):
        return {}
    groups = groups or (1 if device.info.is_cpu else 1024)
    if device.info.is_cpu:
        iterations = min(iterations, 20_000)
    pipeline = pipeline_for(device, SHADER, defines={"SM_BUILTINS": int(sm), "CLOCK": int(clock)},
                            local_size=(LOCAL_X, 1, 1))
    push = np.array([iterations], np.int32).tobytes() + np.array([1.0000001], np.float32).tobytes()
    out = {}
    with device.buffer(nbytes=4 * (4 + 4 * groups), name="device limits") as buf:
        with device.record("device limits") as rec:
            rec.dispatch(pipeline, [buf], (groups * LOCAL_X, 1, 1), push)
            for _ in range(3):  # the last of three: clocks up, pipeline warm
                rec.submit()
            gpu_ns = rec.gpu_ns
        words = buf.download(np.uint32)
    if sm:
        out.update(sm_count=int(words[0]), warps_per_sm=int(words[1]))
    if clock and gpu_ns:
        cycles = _decode_clock_words(words, groups)
        out["measured_clock_mhz"] = float(np.median(cycles) / gpu_ns * 1e3)
    return out


def device_limits(device, *, measure: bool = True) -> DeviceLimits:
    """Everything above, with its source, for `device` (cached per device once measured)."""
    cache = device.__dict__.setdefault("_device_limits", {})
    if measure in cache:
        return cache[measure]
    arch = nvidia_arch(device)
    shader = probe_shader_limits(device) if measure else {}
    sm_count, warps, sm_source = shader.get("sm_count"), shader.get("warps_per_sm"), "unknown"
    if sm_count:
        sm_source = "VK_NV_shader_sm_builtins"
    elif device.info.vendor == "NVIDIA":
        try:
            import torch
            if torch.cuda.is_available():
                props = torch.cuda.get_device_properties(0)
                sm_count = props.multi_processor_count
                warps = props.max_threads_per_multi_processor // 32
                sm_source = "torch.cuda"
        except Exception:  # noqa: BLE001
            pass
    if sm_count and not warps and arch in MAX_THREADS_PER_SM:
        warps = MAX_THREADS_PER_SM[arch] // 32
    clocks = nvml_clocks(device)
    measured = shader.get("measured_clock_mhz", math.nan)
    if clocks.get("max_sm_mhz"):
        clock, clock_source = clocks["max_sm_mhz"], f"max SM clock ({clocks['source']})"
    elif np.isfinite(measured) and not device.info.is_cpu:
        clock, clock_source = measured, "VK_KHR_shader_clock cycles / timestamps"
    else:
        clock, clock_source = math.nan, "unknown"
    limits = DeviceLimits(arch=arch, sm_count=sm_count, warps_per_sm=warps,
                          subgroup_size=device.info.subgroup_size or 32, sm_source=sm_source, clock_mhz=clock,
                          clock_source=clock_source, measured_clock_mhz=measured,
                          current_clock_mhz=clocks.get("sm_mhz", math.nan),
                          max_clock_mhz=clocks.get("max_sm_mhz", math.nan))
    cache[measure] = limits
    return limits


def theoretical_gops(limits: DeviceLimits, kind: str, clock_mhz: float | None = None) -> float:
    """SMs x MACs per clock per SM x 2 ops x clock, in GOP/s; NaN where the architecture, SM count or clock is
    unknown."""
    rate = ARCH_RATES.get(limits.arch or "", {}).get(kind)
    clock = limits.clock_mhz if clock_mhz is None else clock_mhz
    if rate is None or not limits.sm_count or not np.isfinite(clock):
        return math.nan
    return limits.sm_count * rate * 2 * clock / 1e3
