"""A capture's dispatches replayed on every device of a Dask cluster: `CaptureReplaySweep`, one work item per
dispatch, in `workbench.fanout`'s sweep protocol (name, items(), describe(params), run(device, params, warmup_s),
key_columns, correctness_columns, chart), and `device_table`, the result with a column per device.

    from workbench import fanout
    from workbench.capture.sweep import CaptureReplaySweep, device_table
    result = fanout.run_sweep(CaptureReplaySweep("caps/model"), each_device=True)   # local cluster, or scheduler=…
    device_table(result.frame)     # a row per dispatch: exact and median µs per device

CLI: ``workbench capture sweep DIR [--scheduler tcp://…] [--each-device] [--here]``.

Each worker reads the capture folder itself (once per process), so the folder must be readable at the same path on
every host (a shared or copied folder). A row is `replay.replay_one`'s (exact, mismatch, reason, the time) for one
dispatch on the worker's device, with the device's metadata (`measure.environment`).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path

from .format import read_folder
from .replay import NotReplayable, launch_of, replay_one, running

__all__ = ["CaptureReplaySweep", "device_table"]


@functools.lru_cache(maxsize=2)
def _read(folder: str, stamp: float) -> dict:
    """The dispatches of `folder` by number, read once per process and folder version (`stamp`)."""
    return {d.dispatch: d for d in read_folder(folder)}


def _dispatches(folder: str) -> dict:
    calls = Path(folder) / "calls.jsonl"
    return _read(str(Path(folder).resolve()), os.path.getmtime(calls) if calls.is_file() else 0.0)


@dataclass(frozen=True)
class CaptureReplaySweep:
    """Every dispatch of the capture `folder` (or the `dispatches` numbers) replayed alone on each device from its
    captured inputs, compared byte for byte with its captured outputs and timed (`quick`: a few samples)."""

    folder: str
    dispatches: tuple = ()
    quick: bool = True
    name: str = field(default="capture-replay", init=False)
    key_columns = ("capture", "dispatch")
    correctness_columns = ("exact",)
    chart = dict(value="gpu_us_median", label="dispatch", facet="capture", higher_is_better=False)

    def __post_init__(self):
        object.__setattr__(self, "folder", str(self.folder))
        object.__setattr__(self, "dispatches", tuple(int(n) for n in self.dispatches))
        if self.dispatches:  # a wrong number is bad input here, not an error row per device
            from .microscope import select
            select(list(_dispatches(self.folder).values()), self.dispatches)

    @staticmethod
    def chart_rows(frame):
        return frame

    def items(self) -> list[tuple]:
        return [(("dispatch", n),) for n in (self.dispatches or sorted(_dispatches(self.folder)))]

    def describe(self, params: dict) -> dict:
        return {"capture": Path(self.folder).name, "dispatch": int(params["dispatch"])}

    def run(self, device, params: dict, warmup_s: float) -> list[dict]:
        from ..measure import environment
        d = _dispatches(self.folder)[int(params["dispatch"])]
        if warmup_s > 0:
            _warm(device, d, warmup_s)
        row = replay_one(device, d, time_it=True, quick=self.quick)
        return [{**self.describe(params), "pipeline": d.spirv_hash, "groups": str(tuple(d.groups)),
                 **{k: (str(v) if isinstance(v, tuple) else v) for k, v in row.items()}, **environment(device)}]


def _warm(device, d, seconds: float) -> None:
    """The dispatch resubmitted for `seconds` (`measure.keep_busy`), so its timing starts at a loaded GPU's clock;
    a dispatch that cannot run is left to `replay_one` to report."""
    from .. import vk
    from ..measure import keep_busy
    try:
        launch, _ = launch_of(device, d)
    except (NotReplayable, ValueError, vk.VulkanError):
        return
    with running(device, launch) as launches, device.record(label=f"warm dispatch {d.dispatch}") as rec:
        launches.record(rec)
        keep_busy(rec, device, seconds)


def device_table(frame):
    """A sweep's rows → a row per (capture, dispatch) with its pipeline and, per device key, `exact <device>` and
    `gpu_us_median <device>` (and `reason <device>` where a dispatch could not run on some device: its reason, or the
    item's error)."""
    import pandas as pd
    if not len(frame):
        return pd.DataFrame(columns=["capture", "dispatch", "pipeline"])
    frame = frame.copy()
    reason = frame["reason"].fillna("") if "reason" in frame else pd.Series("", index=frame.index)
    if "error" in frame:
        reason = reason.where(frame["error"].isna(), frame["error"].astype(str))
    frame["reason"] = reason
    values = [c for c in ("exact", "gpu_us_median", "reason") if c in frame]
    keys = ["capture", "dispatch"]
    table = frame.groupby(keys + ["device_key"], sort=False)[values].first().unstack("device_key")
    table.columns = [f"{value} {device}" for value, device in table.columns]
    empty = [c for c in table.columns if c.startswith("reason ") and not table[c].fillna("").astype(bool).any()]
    table = table.drop(columns=empty)
    pipeline = frame.get("pipeline", pd.Series("", index=frame.index)).fillna("")
    table.insert(0, "pipeline", frame.assign(pipeline=pipeline).groupby(keys, sort=False)["pipeline"].max())
    return table.reset_index()
