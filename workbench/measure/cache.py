"""The cache regime of a measurement: "hot" or "cold", a column of every bandwidth row.

- **hot**: one set of inputs, dispatched again and again: whatever of it fits the last-level cache is read from
  there (every Llama-3-8B decode matrix fits an H200's 60 MB L2: a hot GEMV measures the cache);
- **cold**: the inputs are *rotated*: a recording holds `copies` sets of them, each dispatch reads the next set,
  and the sets together span at least ROTATE_FACTOR × the last-level cache, so every dispatch reads its inputs
  from DRAM (what a model's decode step does: each matrix is read once per token). The kernel and its copy
  baseline are rotated alike. Rotation, not a flush between dispatches: a large copy in between leaves the cache
  full of dirty lines that the timed kernel would then write back. Where MAX_COPIES sets of a tiny working set
  cannot span that (allocations are counted: NVIDIA allows 4,096), each dispatch is instead preceded, untimed, by
  a read-only sweep of FLUSH_FACTOR x the last-level cache (`flush_bytes`; the kernels' `copy.Flush`), which
  leaves the cache full of clean lines (SWEPT_COPIES sets then suffice).

The last-level cache: torch's CUDA properties where the Vulkan device is an NVIDIA GPU that torch sees (the H200:
60 MB), else a table of known GPUs, else the host CPU's last-level cache for CPU devices (lavapipe's memory is the
host's), else ASSUMED_LLC_BYTES; `llc_source` says which. `$WORKBENCH_LLC_BYTES` overrides it (a test's small
rotation). Cold is the default wherever a working set fits a GPU's last-level cache (`default_regime`); on a CPU
device hot, unless asked (its cache is the host's: 480 MiB on the 2-core CI machine, where a cold pixel-shuffle row
took 25 s against 0.3 s hot).
"""
from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path

REGIMES = ("hot", "cold")
ROTATE_FACTOR = 4            # the sets of a cold rotation span at least this many last-level caches
MAX_COPIES = 512             # a rotation never holds more sets than this (tiny working sets add a sweep)
FLUSH_FACTOR = 2             # the read-only sweep before each dispatch of a capped rotation: 2x the cache
SWEPT_COPIES = 2             # sets of a swept measurement (the sweep, not the rotation, empties the cache)
ASSUMED_LLC_BYTES = 128 * 2**20  # a GPU of unknown cache: larger than any 2026 GPU's L2 (cold stays cold)
KNOWN_LLC_BYTES = {"H200": 60 * 10**6, "H100": 50 * 2**20, "A100": 40 * 2**20}  # by a substring of the name
METHOD = {"hot": "one set of inputs dispatched again and again",
          "cold": f"inputs rotated through >= {ROTATE_FACTOR}x the last-level cache (a set per dispatch)",
          "cold+sweep": f"a read-only sweep of {FLUSH_FACTOR}x the last-level cache before each dispatch (untimed; "
                        f"{MAX_COPIES} sets would not span {ROTATE_FACTOR}x)"}


def last_level_cache(device) -> tuple[int, str]:
    """(bytes, source) of the last-level cache in front of `device`'s memory (module docstring). Asked per row:
    the device's answer is found once (`_device_llc`), the override read each time."""
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
    return _device_llc(info.name, info.vendor, bool(info.is_cpu))


@functools.lru_cache(maxsize=8)
def _device_llc(name: str, vendor: str, is_cpu: bool) -> tuple[int, str]:
    if not is_cpu and vendor == "NVIDIA":
        try:
            import torch
            if torch.cuda.is_available():
                for i in range(torch.cuda.device_count()):
                    props = torch.cuda.get_device_properties(i)
                    if props.name == name or torch.cuda.device_count() == 1:
                        return int(props.L2_cache_size), "torch.cuda L2_cache_size"
        except Exception:  # noqa: BLE001 - no CUDA torch: the table next
            pass
    for known, size in KNOWN_LLC_BYTES.items():
        if known in name:
            return size, f"published L2 of the {known}"
    if is_cpu:
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
    swept: bool = False  # a sweep before each dispatch (a working set too small to rotate past the cache)
    quick: bool = False  # a quick run's capped rotation, no sweep (its rows say so)

    @property
    def rotated_bytes(self) -> int:
        return self.copies * self.working_set

    @property
    def flush_bytes(self) -> int:
        """The read-only sweep before each dispatch (`swept`): FLUSH_FACTOR caches, a multiple of 16; else 0."""
        return -(-FLUSH_FACTOR * self.llc_bytes // 16) * 16 if self.swept else 0

    def columns(self) -> dict:
        method = METHOD["cold+sweep" if self.flush_bytes else self.regime]
        if self.quick and self.regime == "cold" and self.rotated_bytes < ROTATE_FACTOR * self.llc_bytes:
            method = f"quick: {self.copies} sets rotated, no sweep (not cold)"
        return {"cache": self.regime, "cache_copies": self.copies, "cache_rotated_bytes": self.rotated_bytes,
                "cache_flush_bytes": self.flush_bytes, "llc_bytes": self.llc_bytes, "llc_source": self.llc_source,
                "cache_method": method}


def rotation(device, working_set: int, regime: str = "cold", *, max_copies: int = MAX_COPIES,
             quick: bool = False) -> Rotation:
    """The sets a measurement of `working_set` bytes (a dispatch's inputs and outputs) needs in `regime`; `quick`
    (a smoke run): at most 4 sets and no sweep. Cold: enough sets to span ROTATE_FACTOR caches, or where that
    takes more than `max_copies`, SWEPT_COPIES sets and a sweep before each dispatch."""
    if regime not in REGIMES:
        raise ValueError(f"cache regime must be one of {', '.join(REGIMES)}, got {regime!r}")
    if not isinstance(working_set, (int,)) or working_set <= 0:
        raise ValueError(f"a working set is a positive byte count, got {working_set!r}")
    llc, source = last_level_cache(device)
    needed = math.ceil(ROTATE_FACTOR * llc / working_set)
    if regime == "hot":
        return Rotation(regime, 1, int(working_set), llc, source)
    if quick:
        return Rotation(regime, max(2, min(4, needed)), int(working_set), llc, source, quick=True)
    if needed <= max_copies:
        return Rotation(regime, max(2, needed), int(working_set), llc, source)
    return Rotation(regime, SWEPT_COPIES, int(working_set), llc, source, swept=True)


def sample_rotated(device, rot: Rotation, record_one, *, repeats: int = 1, label: str = "", flush=None,
                   record_options: dict | None = None, **sampling):
    """Time a dispatch in the regime of `rot`: one recording of max(`repeats`, rot.copies) dispatches, the i-th
    recorded by ``record_one(rec, i % rot.copies)`` (set i's resources), each preceded by ``flush.record(rec)``
    where the rotation sweeps (`flush`: the kernels' `copy.Flush` of rot.flush_bytes; its commands, labelled
    ``flush.label``, are not timed); sampled by `sample_recording` with the time per dispatch. Returns (gpu_ns,
    host_ns, dispatches per recording)."""
    from .method import sample_recording
    if rot.flush_bytes and flush is None:
        raise ValueError(f"a cold rotation of {rot.copies} sets of {rot.working_set} B needs a sweep of "
                         f"{rot.flush_bytes} B before each dispatch: pass flush=")
    per_recording = max(int(repeats), rot.copies)
    with device.record(label=label, **(record_options or {})) as rec:
        for i in range(per_recording):
            if rot.flush_bytes:
                flush.record(rec)
            record_one(rec, i % rot.copies)
        labels = {c.label for c in rec.commands if c.label != flush.label} if rot.flush_bytes else None
        gpu, host = sample_recording(rec, repeats=per_recording, labels=labels, **sampling)
    return gpu, host, per_recording


def default_regime(device, working_set: int) -> str:
    """"cold" where `working_set` fits a GPU's last-level cache (a hot measurement would time the cache), else "hot"
    (a working set larger than the cache streams from DRAM either way). On a CPU device (lavapipe) "hot": its last-level
    cache is the host's (480 MiB on the 2-core CI machine), so a cold row rotates or sweeps GBs with the cores that
    also run the kernel (a pixel-shuffle row there: 25 s cold, 0.3 s hot; the main job's notebooks ran for hours),
    and its times rank kernels rather than a GPU's memory; ask for cold (`caches="cold"`) to measure it."""
    if device.info.is_cpu:
        return "hot"
    return "cold" if working_set <= last_level_cache(device)[0] else "hot"


def parse_regimes(text) -> tuple[str, ...]:
    """"cold", "hot" or "cold,hot" (a CLI option), or a sequence of names → the regimes in order; a one-line error
    otherwise."""
    parts = str(text).split(",") if isinstance(text, str) else [str(p) for p in text]
    names = tuple(dict.fromkeys(p.strip() for p in parts if p.strip()))
    if not names or any(n not in REGIMES for n in names):
        raise ValueError(f"expected cache regimes among {', '.join(REGIMES)} (comma-separated), got {text!r}")
    return names
