"""How the workbench measures, and nothing else (no kernel, no suite): sampling, statistics, tidy rows with
metadata, exports that never lose rows, and the reader of results folders.

Method (close to nvbench's "batch" measurement, with Vulkan timestamps):
- a recording holds the dispatches of one sample; it is recorded once and submitted again for every sample;
- 2 warm-up submits, then samples until at least `min_samples` were taken and `min_time_s` of GPU time passed
  (capped by `max_samples` and `max_time_s`);
- GPU time per sample = sum of the timestamped durations of the selected commands, divided by the number of
  repeats of the kernel inside the recording (repeats amortise tiny kernels);
- statistics: median, p10, p90, min, mean and standard deviation; the median is the headline.
One row per measurement: kernel, its parameters as columns, shape, device, driver, API version, samples, times,
bytes, MACs, GB/s, GOP/s, workbench version and commit, date.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .. import __version__
from .clocks import nvml_clocks

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


def summarize_ns(samples_ns) -> dict:
    """Statistics of a sample of durations in ns, reported in µs."""
    a = np.asarray(samples_ns, dtype=np.float64) / 1e3
    if a.size == 0:
        raise ValueError("no samples to summarize")
    return {"samples": int(a.size), "median_us": float(np.median(a)), "p10_us": float(np.percentile(a, 10)),
            "p90_us": float(np.percentile(a, 90)), "min_us": float(a.min()), "mean_us": float(a.mean()),
            "std_us": float(a.std(ddof=1)) if a.size > 1 else 0.0}


# A sample set is unstable (and measured again) when its first and last quarters differ by more than DRIFT (a clock
# ramping up or throttling during the set), or its p10..p90 spread exceeds SPREAD of the median.
STABILITY_DRIFT = 0.05
STABILITY_SPREAD = 0.10
STABILITY_ATTEMPTS = 3


class Samples(np.ndarray):
    """Durations in ns (a numpy array) that remember how many sample sets it took to get a stable one."""

    attempts = 1

    def __array_finalize__(self, obj):
        self.attempts = getattr(obj, "attempts", 1)


def stability(samples_ns) -> dict:
    """drift_pct (median of the last quarter vs the first, signed), spread_pct ((p90 - p10) / median) and `stable`
    (both within STABILITY_DRIFT / STABILITY_SPREAD). Fewer than 8 samples: drift is not judged."""
    a = np.asarray(samples_ns, dtype=np.float64)
    median = float(np.median(a)) if a.size else float("nan")
    spread = float((np.percentile(a, 90) - np.percentile(a, 10)) / median) if a.size and median > 0 else 0.0
    drift = 0.0
    if a.size >= 8:
        q = a.size // 4
        first, last = float(np.median(a[:q])), float(np.median(a[-q:]))
        drift = (last - first) / first if first > 0 else 0.0
    return {"drift_pct": 100 * drift, "spread_pct": 100 * spread,
            "stable": bool(abs(drift) <= STABILITY_DRIFT and spread <= STABILITY_SPREAD)}


def _sample_once(rec, repeats, labels, min_samples, max_samples, min_time_s, max_time_s):
    gpu, host = [], []
    start = time.perf_counter()
    while True:
        timings = rec.submit()
        chosen = [t for t in timings if labels is None or t.label in labels]
        if any(t.gpu_ns is None for t in chosen):
            raise RuntimeError(f"{rec.device.info.name}: the queue has no timestamps; GPU time cannot be measured")
        gpu.append(sum(t.gpu_ns for t in chosen) / repeats)
        host.append(rec.host_ns / repeats)
        elapsed = time.perf_counter() - start
        if len(gpu) >= max_samples or elapsed >= max_time_s:
            break
        if len(gpu) >= min_samples and sum(gpu) * repeats / 1e9 >= min_time_s:
            break
    return np.array(gpu), np.array(host)


GPU_WARMUP_S = 1.0  # an idle GPU's clock ramps up under load: an H200 timed small graphs 2.5x slow after 0.2 s


def keep_busy(rec, device, seconds: float = GPU_WARMUP_S) -> None:
    """Resubmit the recording `rec` for `seconds` on GPUs (not on CPU devices), so that what is timed next runs at
    the clock a loaded GPU holds."""
    if device.info.is_cpu:
        return
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        rec.submit()


def sample_recording(rec, *, repeats: int = 1, labels=None, warmup: int = 2, min_samples: int = 10,
                     max_samples: int = 200, min_time_s: float = 0.2, max_time_s: float = 10.0,
                     warmup_s: float | None = None, attempts: int | None = None):
    """Submit `rec` repeatedly; returns (gpu_ns per kernel run, host_ns per kernel run) arrays.

    Warm-up: `warmup` submits, and on GPUs at least `warmup_s` (default 50 ms) of submits, so an idle GPU's clock
    has ramped up. A sample set that is not stable (see `stability`) is thrown away and measured again, up to
    `attempts` sets (default STABILITY_ATTEMPTS on GPUs, 1 on CPU devices, whose shared cores are noisy by
    nature); the last one is returned (`gpu.attempts` says how many were taken; the row's `stable` column says
    whether the last was)."""
    cpu = rec.device.info.is_cpu
    if warmup_s is None:
        warmup_s = 0.0 if cpu else 0.05
    if attempts is None:
        attempts = 1 if cpu else STABILITY_ATTEMPTS
    start = time.perf_counter()
    for i in range(max(warmup, 1) if warmup_s else warmup):
        rec.submit()
    while time.perf_counter() - start < warmup_s:
        rec.submit()
    for attempt in range(1, max(1, attempts) + 1):
        gpu, host = _sample_once(rec, repeats, labels, min_samples, max_samples, min_time_s, max_time_s)
        if stability(gpu)["stable"]:
            break
    gpu = gpu.view(Samples)
    gpu.attempts = attempt
    return gpu, host


def sample_callable(fn, *, sync=None, warmup: int = 2, min_samples: int = 10, max_samples: int = 200,
                    min_time_s: float = 0.2, max_time_s: float = 10.0, cuda_events: bool = False):
    """Time a Python callable (e.g. a torch op): CUDA events when asked, else wall time around fn + sync."""
    for _ in range(warmup):
        fn()
        if sync:
            sync()
    out = []
    start = time.perf_counter()
    while True:
        if cuda_events:
            import torch
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            fn()
            end.record()
            end.synchronize()
            out.append(begin.elapsed_time(end) * 1e6)
        else:
            t0 = time.perf_counter_ns()
            fn()
            if sync:
                sync()
            out.append(time.perf_counter_ns() - t0)
        elapsed = time.perf_counter() - start
        if len(out) >= max_samples or elapsed >= max_time_s:
            break
        if len(out) >= min_samples and elapsed >= min_time_s:
            break
    return np.array(out, dtype=np.float64)


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
    row.update(env)
    return row


# what a quick run (`--quick`, a notebook with FULL = False) prints and records: its figures are no headline ones
QUICK_NOTE = ("quick mode: small shapes, few samples; it checks no headline figure (no roof, no goal): its rows "
              "carry quick=True")


def sampling(quick: bool, *, quick_min_time_s: float = 0.005) -> dict:
    """`sample_recording` / `sample_callable` options of a suite: a few short samples when `quick` (tests, smoke
    runs), else at least 0.2 s of samples."""
    if quick:
        return dict(min_time_s=quick_min_time_s, min_samples=3, max_samples=5, warmup=1)
    return dict(min_time_s=0.2)


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


class ResultsWriter:
    """Writes rows as they come so an interrupted run keeps what it finished.

    Each row is appended to the CSV, flushed and fsynced (SIGKILL loses at most the row in flight); the Parquet file
    and the JSON of metadata are rewritten beside it after every row through a temporary file and a rename, so the
    three always agree and are never half-written. Files of an earlier run with the same stem are removed first."""

    def __init__(self, path_stem, metadata: dict | None = None):
        self.stem = Path(path_stem)
        self.stem.parent.mkdir(parents=True, exist_ok=True)
        self.csv_path = self.stem.with_suffix(".csv")
        self.parquet_path = self.stem.with_suffix(".parquet")
        self.json_path = self.stem.with_suffix(".json")
        self.metadata = dict(metadata or {})
        self.rows: list[dict] = []
        self._columns: list[str] = []
        for path in (self.csv_path, self.parquet_path, self.json_path):
            path.unlink(missing_ok=True)
        OPEN_WRITERS.append(self)

    def append(self, row: dict) -> None:
        with _sigint_deferred():  # a Ctrl-C lands after the row is on disk, not half-way through it
            self._append(row)

    def _append(self, row: dict) -> None:
        self.rows.append(row)
        new_columns = [c for c in row if c not in self._columns]
        if new_columns:  # the first row, or columns grew: (re)write the whole CSV atomically, header included, so a
            self._columns += new_columns  # reader never meets a CSV without its header
            table = pd.DataFrame(self.rows, columns=self._columns)
            atomic_write(self.csv_path, lambda p: table.to_csv(p, index=False))
        else:
            with open(self.csv_path, "a") as out:
                pd.DataFrame([row], columns=self._columns).to_csv(out, index=False, header=False)
                out.flush()
                os.fsync(out.fileno())
        self._write_companions()

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=self._columns or None)

    def _write_companions(self) -> pd.DataFrame:
        df = self.frame()
        if len(df):
            atomic_write(self.parquet_path, lambda p: df.to_parquet(p, index=False))
        meta = {**self.metadata, "rows": len(df), "columns": list(df.columns),
                "written": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        atomic_write(self.json_path, lambda p: p.write_text(json.dumps(meta, indent=2, default=str) + "\n"))
        return df

    def close(self) -> pd.DataFrame:
        if self in OPEN_WRITERS:
            OPEN_WRITERS.remove(self)
        return self._write_companions()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


OPEN_WRITERS: list[ResultsWriter] = []  # writers of this process not closed yet (the CLI reports them on Ctrl-C)


@contextlib.contextmanager
def _sigint_deferred():
    can_block = hasattr(signal, "pthread_sigmask") and threading.current_thread() is threading.main_thread()
    if can_block:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if can_block:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def atomic_write(path: Path, write) -> None:
    """write(temp_path), then rename over `path`: readers see the old file or the new one, never half of one."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(temp)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def progress(iterable, desc: str, total: int | None = None, enabled: bool = True):
    if not enabled:
        return iterable
    from tqdm.auto import tqdm
    return tqdm(iterable, desc=desc, total=total, leave=True)


def results_folder_name(device_name: str) -> str:
    """The one naming rule for results folders: the device's name without its parenthesised details, every run of
    other characters than letters, digits, '.' and '-' made one '_' ("llvmpipe (LLVM 15.0.6, 256 bits)" →
    "llvmpipe", "NVIDIA H200" → "NVIDIA_H200")."""
    import re
    name = re.sub(r"\([^)]*\)", " ", device_name)
    return re.sub(r"[^A-Za-z0-9.-]+", "_", name).strip("_") or "device"


def default_results_dir(device) -> Path:
    return REPO / "data" / results_folder_name(device.info.name)


class ResultsReader:
    """Reads a results folder (``data/<device>/``, or any folder `ResultsWriter` / notebook exports wrote): one
    table per stem, from its CSV (written row by row, so it holds every finished row), else its Parquet.

        results = ResultsReader("data/NVIDIA_H200")
        results.names()                        # ['conv_pw', 'coopmat', 'copy', ...]
        results.load("conv_pw")                # DataFrame, or None where the folder has no such table
        results.load("pack_throughput", "pack")    # the first of several names that exists
        results["peak"]                        # DataFrame, or FileNotFoundError naming what the folder holds
        results.metadata("peak")               # the JSON beside the table ({} where there is none)
    """

    SUFFIXES = (".csv", ".parquet")

    def __init__(self, folder):
        self.folder = Path(folder)

    def __repr__(self) -> str:
        return f"ResultsReader({str(self.folder)!r})"

    def names(self) -> list[str]:
        """Every table the folder holds (stems with a CSV or a Parquet file)."""
        if not self.folder.is_dir():
            return []
        return sorted({p.stem for p in self.folder.iterdir() if p.suffix in self.SUFFIXES and not
                       p.name.startswith(".")})

    def path(self, name: str) -> Path | None:
        for suffix in self.SUFFIXES:
            candidate = self.folder / f"{name}{suffix}"
            if candidate.is_file():
                return candidate
        return None

    def has(self, name: str) -> bool:
        return self.path(name) is not None

    def load(self, name: str, *alternatives: str) -> pd.DataFrame | None:
        """The table `name` (or the first of `alternatives` the folder holds); None where there is none. A CSV with
        no rows yet (a run stopped before its first row) reads as an empty frame."""
        for candidate in (name, *alternatives):
            path = self.path(candidate)
            if path is None:
                continue
            if path.suffix == ".parquet":
                return pd.read_parquet(path)
            try:
                return pd.read_csv(path)
            except pd.errors.EmptyDataError:
                return pd.DataFrame()
        return None

    def __getitem__(self, name: str) -> pd.DataFrame:
        df = self.load(name)
        if df is None:
            held = ", ".join(self.names()) or "no tables"
            raise FileNotFoundError(f"no {name}.csv or {name}.parquet in {self.folder} (it holds: {held})")
        return df

    def metadata(self, name: str) -> dict:
        path = self.folder / f"{name}.json"
        return json.loads(path.read_text()) if path.is_file() else {}
