"""Capture coverage of other engines (ncnn, IREE, …): one row per captured dispatch — engine, program, dispatch,
shader, entry point, local size, groups, exact, reason — with the cost of capturing and replaying it, written into one
table (``data/<device>/capture_coverage_peers.csv``) by one function, `write_rows`, which replaces an (engine,
program)'s rows and keeps every other engine's.

    from workbench.capture import coverage
    rows = coverage.rows("caps/ncnn_fp32", engine="ncnn", program="net fp32")   # replays every dispatch
    coverage.write_rows(rows, "data/llvmpipe/capture_coverage_peers.csv")

CLI: ``workbench capture coverage DIR --engine ncnn --program "net fp32" --csv data/llvmpipe/capture_coverage_peers.csv``
(``--bare-seconds S``: the program's own time without capture, for the overhead column).
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from .format import CaptureError

COLUMNS = ["engine", "program", "dispatch", "shader", "entry_point", "local_size", "groups", "exact", "reason",
           "hidden_extensions", "capture_s", "bare_s", "capture_overhead_s", "convert_dump_s", "folder_bytes",
           "capture_bytes",
           "list_s", "replay_s", "device", "driver", "commit", "date"]


def rows(folder, *, engine: str, program: str, device=None, bare_seconds: float | None = None,
         capture_seconds: float | None = None) -> pd.DataFrame:
    """Every dispatch of the capture `folder` replayed alone (`capture.replay`, a few samples) as coverage rows: the
    capture's costs (from its manifest: the program's seconds under capture, the folder's and the capture file's
    bytes; `bare_seconds`: the same program's seconds without capture, whose difference is the overhead;
    `capture_seconds`: the program's seconds under capture where measured better than the manifest's one run, e.g.
    the fastest of several), GFXReconstruct's convert and dump seconds, the list and replay seconds (this call's,
    per capture)."""
    from . import manifest, open as open_capture, replay
    if not str(engine).strip() or not str(program).strip():
        raise CaptureError(f"expected an engine and a program name for the coverage rows, got {engine!r} and "
                           f"{program!r}")
    started = time.perf_counter()
    listed = open_capture(folder)
    list_s = time.perf_counter() - started
    started = time.perf_counter()
    replayed = replay(folder, device=device, quick=True)
    replay_s = time.perf_counter() - started
    info = manifest(folder)
    seconds = info.get("seconds") or {}
    capture_s = capture_seconds if capture_seconds is not None else seconds.get("program")
    convert_dump = sum(seconds.get(k) or 0 for k in ("convert", "dump")) if seconds else None
    found = []
    for (_, listing), (_, row) in zip(listed.iterrows(), replayed.iterrows()):
        reason = row.get("reason") or ("" if row["exact"] else row.get("mismatch") or "differs")
        found.append({
            "engine": engine, "program": program, "dispatch": int(row["dispatch"]), "shader": listing["pipeline"],
            "entry_point": listing["entry_point"], "local_size": listing["local_size"], "groups": listing["groups"],
            "exact": bool(row["exact"]), "reason": reason,
            "hidden_extensions": ",".join(info.get("hidden_extensions") or []),
            "capture_s": capture_s, "bare_s": bare_seconds,
            "capture_overhead_s": None if capture_s is None or bare_seconds is None else
            round(capture_s - bare_seconds, 3), "convert_dump_s": convert_dump,
            "folder_bytes": info.get("folder_bytes"), "capture_bytes": info.get("capture_bytes"),
            "list_s": round(list_s, 3), "replay_s": round(replay_s, 3),
            "device": row.get("device"), "driver": row.get("driver"), "commit": row.get("commit"),
            "date": time.strftime("%Y-%m-%d"),
        })
    return pd.DataFrame(found, columns=COLUMNS)


def write_rows(new: pd.DataFrame, csv) -> pd.DataFrame:
    """The one writer of the peers' coverage table: `csv`'s rows of the (engine, program) pairs in `new` replaced by
    `new`, every other row kept (another engine's, another program's); returns the table written."""
    path = Path(csv)
    missing = [c for c in ("engine", "program", "dispatch", "exact", "reason") if c not in new.columns]
    if missing:
        raise CaptureError(f"expected coverage rows with columns engine, program, dispatch, exact, reason; these "
                           f"lack {', '.join(missing)}")
    old = pd.DataFrame(columns=new.columns)
    if path.is_file() and path.stat().st_size:
        try:
            old = pd.read_csv(path)
        except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError is a ValueError
            raise CaptureError(f"expected {path} to be a coverage table (CSV), cannot read it: "
                               f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        if len(old.columns) and not {"engine", "program"} <= set(old.columns):
            raise CaptureError(f"expected {path} to be a coverage table with columns engine and program, found "
                               f"{', '.join(map(str, old.columns[:6]))}")
    pairs = set(zip(new["engine"], new["program"]))
    keep = old[[(e, p) not in pairs for e, p in zip(old.get("engine", []), old.get("program", []))]] \
        if len(old) else old
    table = pd.concat([keep, new], ignore_index=True) if len(keep) else new.copy()
    ordered = [c for c in COLUMNS if c in table.columns] + [c for c in table.columns if c not in COLUMNS]
    table = table[ordered].sort_values(["engine", "program", "dispatch"], kind="stable").reset_index(drop=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
    return table


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per engine and program: dispatches, exact, % exact, and the costs (one value per capture)."""
    if not len(table):
        return pd.DataFrame(columns=["engine", "program", "dispatches", "exact", "exact_pct"])
    grouped = table.groupby(["engine", "program"], sort=True)
    out = grouped.agg(dispatches=("dispatch", "size"), exact=("exact", "sum"))
    for column in ("capture_s", "bare_s", "capture_overhead_s", "convert_dump_s", "folder_bytes", "list_s",
                   "replay_s"):
        if column in table:
            out[column] = grouped[column].first()
    out["exact_pct"] = (100 * out["exact"] / out["dispatches"]).round(1)
    return out.reset_index()
