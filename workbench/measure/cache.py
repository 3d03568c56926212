"""The cache regime of a measurement: "hot" or "cold", a column of every bandwidth row.

- **hot**: one set of inputs, dispatched again and again: whatever of it fits the last-level cache is read from
  there (every Llama-3-8B decode matrix fits an H200's 60 MB L2: a hot GEMV measures the cache);
- **cold**: the inputs are *rotated*: a recording holds `copies` sets of them, each dispatch reads the next set,
  and the sets together span at least ROTATE_FACTOR × the last-level cache, so every dispatch reads its inputs
  from DRAM (what a model's decode step does: each matrix is read once per token). The kernel and its copy
  baseline are rotated alike. Rotation, not a flush between dispatches: a large copy in between leaves the cache
  full of dirty lines that the timed kernel would then write back.

The last-level cache: torch's CUDA properties where the Vulkan device is an NVIDIA GPU that torch sees (the H200:
60 MB), else a table of known GPUs, else the host CPU's last-level cache for CPU devices (lavapipe's memory is the
host's), else ASSUMED_LLC_BYTES; `llc_source` says which. `$WORKBENCH_LLC_BYTES` overrides it (a test's small
rotation). Cold is the default wherever a working set fits the last-level cache (`default_regime`).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

REGIMES = ("hot", "cold")
ROTATE_FACTOR = 4            # the sets of a cold rotation span at least this many last-level caches
MAX_COPIES = 4096            # a rotation never holds more sets than this (tiny kernels: the cap is said in the row)
ASSUMED_LLC_BYTES = 128 * 2**20  # a GPU of unknown cache: larger than any 2026 GPU's L2 (cold stays cold)
KNOWN_LLC_BYTES = {"H200": 60 * 10**6, "H100": 50 * 2**20, "A100": 40 * 2**20}  # by a substring of the name
METHOD = {"hot": "one set of inputs dispatched again and again",
          "cold": f"inputs rotated through >= {ROTATE_FACTOR}x the last-level cache (a set per dispatch)"}


def last_level_cache(device) -> tuple[int, str]:
    """(bytes, source) of the last-level cache in front of `device`'s memory (module docstring)."""
    override = os.environ.get("WORKBENCH_LLC_BYTES", "").strip()
    if override:
        try:
            value = int(float(override))
        except ValueError:
            value = 0
        if value <= 0:
            raise ValueError(f"WORKBENCH_LLC_BYTES must be a positive byte count, got {override!r}")
        return value, "WORKBENCH_LLC_BYTES"
    info = device.info
    if not info.is_cpu and info.vendor == "NVIDIA":
        try:
            import torch
            if torch.cuda.is_available():
                for i in range(torch.cuda.device_count()):
                    props = torch.cuda.get_device_properties(i)
                    if props.name == info.name or torch.cuda.device_count() == 1:
                        return int(props.L2_cache_size), "torch.cuda L2_cache_size"
        except Exception:  # noqa: BLE001 - no CUDA torch: the table next
            pass
    for name, size in KNOWN_LLC_BYTES.items():
        if name in info.name:
            return size, f"published L2 of the {name}"
    if info.is_cpu:
        size = _cpu_llc_bytes()
        if size:
            return size, "the host CPU's last-level cache (sysfs)"
    return ASSUMED_LLC_BYTES, "assumed (unknown GPU)"


def _cpu_llc_bytes() -> int:
    best = (0, 0)
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level = int((index / "level").read_text())
            text = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
        try:
            size = int(text.rstrip("KMGkmg")) * scale
        except ValueError:
            continue
        best = max(best, (level, size))
    return best[1]


@dataclass(frozen=True)
class Rotation:
    """How a measurement of one working set is made in a regime: `copies` sets of the inputs in one recording
    (1 when hot), spanning `rotated_bytes`; `columns()` are the row's."""

    regime: str
    copies: int
    working_set: int
    llc_bytes: int
    llc_source: str

    @property
    def rotated_bytes(self) -> int:
        return self.copies * self.working_set

    @property
    def cold_enough(self) -> bool:
        """Whether the sets span ROTATE_FACTOR caches (False only where MAX_COPIES capped a tiny working set)."""
        return self.regime == "hot" or self.rotated_bytes >= ROTATE_FACTOR * self.llc_bytes

    def columns(self) -> dict:
        note = "" if self.cold_enough else (f"only {self.rotated_bytes / self.llc_bytes:.2f}x the last-level cache "
                                            f"rotated ({MAX_COPIES} sets at most)")
        return {"cache": self.regime, "cache_copies": self.copies, "cache_rotated_bytes": self.rotated_bytes,
                "llc_bytes": self.llc_bytes, "llc_source": self.llc_source, "cache_method": METHOD[self.regime],
                "cache_note": note}


def rotation(device, working_set: int, regime: str = "cold", *, max_copies: int = MAX_COPIES) -> Rotation:
    """The sets a measurement of `working_set` bytes (a dispatch's inputs and outputs) needs in `regime`."""
    if regime not in REGIMES:
        raise ValueError(f"cache regime must be one of {', '.join(REGIMES)}, got {regime!r}")
    if not isinstance(working_set, (int,)) or working_set <= 0:
        raise ValueError(f"a working set is a positive byte count, got {working_set!r}")
    llc, source = last_level_cache(device)
    copies = 1 if regime == "hot" else max(2, min(max_copies, math.ceil(ROTATE_FACTOR * llc / working_set)))
    return Rotation(regime, copies, int(working_set), llc, source)


def default_regime(device, working_set: int) -> str:
    """"cold" where `working_set` fits the last-level cache (a hot measurement would time the cache), else "hot"
    (a working set larger than the cache streams from DRAM either way)."""
    return "cold" if working_set <= last_level_cache(device)[0] else "hot"


def parse_regimes(text) -> tuple[str, ...]:
    """"cold", "hot" or "cold,hot" (a CLI option) → the regimes in order; a one-line error otherwise."""
    names = tuple(dict.fromkeys(p.strip() for p in str(text).split(",") if p.strip()))
    if not names or any(n not in REGIMES for n in names):
        raise ValueError(f"expected cache regimes among {', '.join(REGIMES)} (comma-separated), got {text!r}")
    return names
