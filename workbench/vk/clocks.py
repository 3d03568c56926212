"""The clocks of the NVIDIA GPU behind a Vulkan device (NVML, else nvidia-smi), read beside the device: what a
measurement records next to its times (an idle GPU's clock ramps up under load) and what the kernels' device
limits fall back to."""
from __future__ import annotations

import shutil
import subprocess


def nvml_clocks(device) -> dict:
    """{'sm_mhz', 'max_sm_mhz', 'mem_mhz'} of the NVIDIA GPU named like `device` (NVML, else nvidia-smi); {}
    elsewhere or when neither is there."""
    if device.info.vendor != "NVIDIA":
        return {}
    try:
        import pynvml
        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        names = [pynvml.nvmlDeviceGetName(h) for h in handles]
        names = [n.decode() if isinstance(n, bytes) else n for n in names]
        h = next((h for h, n in zip(handles, names) if n == device.info.name), handles[0])
        return {"sm_mhz": float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
                "max_sm_mhz": float(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
                "mem_mhz": float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)), "source": "NVML"}
    except Exception:  # noqa: BLE001 - no NVML: try the command line
        pass
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {}
    try:
        out = subprocess.run([smi, "--query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    lines = [[v.strip() for v in line.split(",")] for line in out.strip().splitlines() if line.count(",") == 3]
    if not lines:
        return {}
    fields = next((f for f in lines if f[0] == device.info.name), lines[0])
    try:
        return {"sm_mhz": float(fields[1]), "max_sm_mhz": float(fields[2]), "mem_mhz": float(fields[3]),
                "source": "nvidia-smi"}
    except ValueError:
        return {}
