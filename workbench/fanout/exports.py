"""A fanned-out sweep on disk: one combined table, one table per device with its own metadata, and the chart."""
from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import pandas as pd

from ..measure import atomic_write

METADATA_COLUMNS = ("device", "device_type", "driver", "driver_info", "api_version", "workbench_version", "commit")


def safe_name(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(text)).strip("_")


def sweep_class(sweep_name: str):
    """The sweep class the catalogue names for `sweep_name` (it says what its device-vs-device chart shows)."""
    from .. import catalogue
    return catalogue.resolve(catalogue.sweep(sweep_name).sweep)


def chart(frame: pd.DataFrame, sweep_name: str, title: str | None = None):
    from ..viz.device_views import compare_devices
    cls = sweep_class(sweep_name)
    spec = dict(cls.chart)
    return compare_devices(cls.chart_rows(frame), spec.pop("value"), spec.pop("label"),
                           title=title or f"{sweep_name}: device vs device", **spec)


def device_metadata(rows: pd.DataFrame) -> dict:
    """The metadata of one device's rows (the columns every row of that device shares)."""
    meta = {}
    for column in METADATA_COLUMNS:
        if column in rows and rows[column].notna().any():
            meta[column] = rows[column].dropna().iloc[0]
    return meta


def export_result(result, folder, name: str) -> dict:
    """<folder>/<name>_devices.{csv,parquet,json} (every device), <folder>/<device>/<name>.{csv,parquet,json}
    (one device, its metadata), <folder>/<name>_devices.png (device vs device). Returns the paths."""
    import matplotlib.pyplot as plt
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    frame = result.frame
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    paths = {}
    stem = folder / f"{name}_devices"
    atomic_write(stem.with_suffix(".csv"), lambda p: frame.to_csv(p, index=False))  # the CSV the rows streamed to
    atomic_write(stem.with_suffix(".parquet"), lambda p: frame.to_parquet(p, index=False))
    devices = {}
    for key, rows in frame.groupby("device_key", sort=False):
        sub = folder / safe_name(key)
        sub.mkdir(exist_ok=True)
        atomic_write((sub / name).with_suffix(".csv"), lambda p: rows.to_csv(p, index=False))
        atomic_write((sub / name).with_suffix(".parquet"), lambda p: rows.to_parquet(p, index=False))
        meta = {**device_metadata(rows), "device_key": key, "workers": sorted(rows["worker"].dropna().unique()),
                "rows": len(rows), "errors": int(rows["error"].notna().sum()) if "error" in rows else 0,
                "columns": [str(c) for c in rows.columns], "written": now}
        text = json.dumps(meta, indent=2, default=str) + "\n"
        atomic_write((sub / name).with_suffix(".json"), lambda p: p.write_text(text))
        devices[key] = meta
        paths[key] = sub / f"{name}.csv"
    summary = {"sweep": name, "scheduler": result.scheduler, "items": result.items, "rows": len(frame),
               "wall_s": result.wall_s, "startup_s": result.startup_s,
               "duplicates_dropped": result.duplicates_dropped, "devices": devices,
               "workers": result.devices.to_dict("records"), "columns": [str(c) for c in frame.columns],
               "written": now}
    text = json.dumps(summary, indent=2, default=str) + "\n"
    atomic_write(stem.with_suffix(".json"), lambda p: p.write_text(text))
    paths["all"] = stem.with_suffix(".csv")
    sweep_name = frame["sweep"].dropna().iloc[0] if "sweep" in frame and frame["sweep"].notna().any() else None
    if sweep_name is not None and getattr(sweep_class(sweep_name), "chart", None):
        try:
            fig = chart(frame, sweep_name)
        except ValueError:  # every row an error: nothing to draw
            fig = None
        if fig is not None:
            fig.savefig(stem.with_suffix(".png"), dpi=110, bbox_inches="tight")
            plt.close(fig)
            paths["chart"] = stem.with_suffix(".png")
    result.paths.update(paths)
    return paths


def cost(result) -> dict:
    """What fanning out cost. `overhead_per_item_ms`: the median gap on a worker between the end of one item and
    the start of its next (reporting, scheduling, sending the item; the workers' own cost per item);
    `efficiency`: time inside items / (wall time × workers) — below 1 also where workers idle at the end because
    items differ in size."""
    import numpy as np
    frame = result.frame
    ran = frame[frame["worker"].notna() & frame["item_seconds"].notna()] if "worker" in frame else frame.iloc[:0]
    per_item = ran.groupby("item").first() if len(ran) else ran
    workers = max(1, per_item["worker"].nunique()) if len(per_item) else 1
    busy = float(per_item["item_seconds"].sum()) if len(per_item) else 0.0
    gaps = []
    if "item_started" in per_item:
        for _, mine in per_item.sort_values("item_started").groupby(["worker", "pid"]):
            ends = (mine["item_started"] + mine["item_seconds"]).to_numpy()[:-1]
            gaps.extend(mine["item_started"].to_numpy()[1:] - ends)
    return {"items": result.items, "workers": workers, "startup_s": result.startup_s, "wall_s": result.wall_s,
            "busy_s": busy, "efficiency": busy / (result.wall_s * workers) if result.wall_s else np.nan,
            "overhead_per_item_ms": 1e3 * float(np.median(gaps)) if gaps else np.nan}
