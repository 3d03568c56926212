"""Results folders: writers that never lose a finished row (CSV row by row, Parquet and JSON metadata beside it,
each replaced atomically), the one naming rule for a device's folder, and the reader of such folders."""
from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

import pandas as pd

from ..vk.interrupts import sigint_deferred
from .rows import REPO


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
        with sigint_deferred():  # a Ctrl-C lands after the row is on disk, not half-way through it
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


def atomic_write(path: Path, write) -> None:
    """write(temp_path), then rename over `path`: readers see the old file or the new one, never half of one."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(temp)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


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
