"""The one warm-up: an idle GPU's clock ramps up under load, so what is timed next is first preceded by load.

Every warm-up of the workbench (sampling's own, a sweep's after an idle spell, a model profile's, a hand-built
graph's) resubmits a recording through `keep_busy`."""
from __future__ import annotations

import time

GPU_WARMUP_S = 1.0  # an idle GPU's clock ramps up under load: an H200 timed small graphs 2.5x slow after 0.2 s


def keep_busy(rec, device, seconds: float = GPU_WARMUP_S, *, cpu_too: bool = False) -> None:
    """Resubmit the recording `rec` for `seconds` on GPUs (on CPU devices only when `cpu_too`), so that what is
    timed next runs at the clock a loaded GPU holds."""
    if device.info.is_cpu and not cpu_too:
        return
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        rec.submit()
