"""The one warm-up: an idle GPU's clock ramps up under load, so what is timed next is first preceded by load.

Every warm-up of the workbench (sampling's own, a sweep's after an idle spell, a model profile's, a hand-built
graph's, a suite's copy baseline) resubmits a recording through `keep_busy`. `warmup_seconds` says how long the
next sample set's warm-up must be: the full GPU_WARMUP_S after the device sat idle (the first set of a process,
a pause between suites), a short one while it is kept busy."""
from __future__ import annotations

import time

GPU_WARMUP_S = 1.0  # an idle GPU's clock ramps up under load: an H200 timed small graphs 2.5x slow after 0.2 s
SHORT_WARMUP_S = 0.05  # between sample sets of a busy device
IDLE_S = 0.5  # a device that ran nothing for this long is idle: its clock may have dropped (H200: 345 MHz)

_last_busy: dict[int, float] = {}  # id(device) -> perf_counter() when its last warm-up or sample set ended


def keep_busy(rec, device, seconds: float = GPU_WARMUP_S, *, cpu_too: bool = False) -> None:
    """Resubmit the recording `rec` for `seconds` on GPUs (on CPU devices only when `cpu_too`), so that what is
    timed next runs at the clock a loaded GPU holds."""
    if device.info.is_cpu and not cpu_too:
        return
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        rec.submit()
    mark_busy(device)


def mark_busy(device) -> None:
    """Note that `device` has just run work (a sample set ended)."""
    _last_busy[id(device)] = time.perf_counter()


def warmup_seconds(device) -> float:
    """The warm-up the next sample set on `device` needs: none on CPU devices, GPU_WARMUP_S on a GPU idle for
    IDLE_S or more (or never used by this process), SHORT_WARMUP_S on a busy one."""
    if device.info.is_cpu:
        return 0.0
    last = _last_busy.get(id(device))
    return GPU_WARMUP_S if last is None or time.perf_counter() - last >= IDLE_S else SHORT_WARMUP_S
