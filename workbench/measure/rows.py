"""Rows: one tidy row per measurement (parameters as columns, statistics, throughput, stability) with the
metadata of where and from which code it was measured, and a suite's list of rows that writes each as it comes.
"""
from __future__ import annotations

import datetime as _dt
import functools
import os
import subprocess
from pathlib import Path

import numpy as np

from .. import __version__
from .clocks import nvml_clocks
from .method import stability, summarize_ns

REPO = Path(__file__).resolve().parents[2]


COMMIT_STAMP = REPO / ".workbench-commit"  # written by whoever copies the tree without .git (see DEVELOPERS.md)


@functools.lru_cache(maxsize=4)
def git_commit(repo: Path = REPO) -> str:
    """The commit of the code that runs: $WORKBENCH_COMMIT when set (whoever made a copy knows what it copied; a
    copy's own .git can be stale — the GPU machine's copy carried the session's first commit); else git where there
    is a .git; else the stamp file."""
    explicit = os.environ.get("WORKBENCH_COMMIT", "").strip()
    if explicit:
        return explicit
    if not (repo / ".git").exists():
        stamped = ""
        stamp = repo / COMMIT_STAMP.name
        if not stamped and stamp.is_file():
            stamped = stamp.read_text().strip()
        return stamped or "unknown"
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        commit = out.stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def environment(device) -> dict:
    """Metadata columns shared by every row measured on `device`."""
    info = device.info
    clocks = nvml_clocks(device)  # NVIDIA only; {} elsewhere
    return {**({"sm_clock_mhz_at_start": clocks["sm_mhz"], "max_sm_clock_mhz": clocks["max_sm_mhz"],
                "mem_clock_mhz": clocks["mem_mhz"]} if clocks else {}),
            "device": info.name, "device_type": info.device_type, "driver": info.driver_name,
            "driver_info": info.driver_info, "api_version": info.api_version,
            "workbench_version": __version__, "commit": git_commit(),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}


def measurement_row(kernel: str, env: dict, gpu_ns, *, host_ns=None, bytes_moved: int = 0, macs: int = 0,
                    **params) -> dict:
    """One tidy row: parameters as columns, statistics of the GPU time, throughput from the median."""
    row = {"kernel": kernel, **params}
    row.update(summarize_ns(gpu_ns))
    row["host_median_us"] = float(np.median(host_ns) / 1e3) if host_ns is not None and len(host_ns) else np.nan
    row["bytes"] = int(bytes_moved)
    row["macs"] = int(macs)
    seconds = row["median_us"] / 1e6
    row["GB/s"] = bytes_moved / seconds / 1e9 if bytes_moved and seconds > 0 else np.nan
    row["GOP/s"] = 2 * macs / seconds / 1e9 if macs and seconds > 0 else np.nan  # 1 MAC = 2 ops
    row.update(stability(gpu_ns))
    row["attempts"] = int(getattr(gpu_ns, "attempts", 1))
    row.update(getattr(gpu_ns, "clock", {}))  # the SM clock through the samples and `clock_ok` (method.clock_ok)
    row.update(env)
    return row


class Rows(list):
    """A suite's rows as they are measured: a list that also appends each row to `writer` (a ResultsWriter, or
    None) the moment it is added, so an interrupted suite keeps every finished row on disk."""

    def __init__(self, writer=None):
        super().__init__()
        self.writer = writer

    def append(self, row: dict) -> None:
        super().append(row)
        if self.writer is not None:
            self.writer.append(row)

    def extend(self, rows) -> None:
        for row in rows:
            self.append(row)


def progress(iterable, desc: str, total: int | None = None, enabled: bool = True):
    if not enabled:
        return iterable
    from tqdm.auto import tqdm
    return tqdm(iterable, desc=desc, total=total, leave=True)
