"""Sweeps beyond one process: the same kernel sweep on every Vulkan device of a Dask cluster.

    from workbench import fanout
    sweep = fanout.make_sweep("conv-pw", quick=True)         # or "pixel-shuffle"
    result = fanout.run_sweep(sweep)                          # local cluster: one worker per Vulkan device
    result = fanout.run_sweep(sweep, scheduler="tcp://10.0.0.5:8786")   # an existing cluster
    result.frame      # one tidy DataFrame, device columns; result.devices: who took part
    fanout.export(result, "data/fanout", "conv_pw")           # CSV + Parquet + JSON per device, and the chart

items.py holds the work items and sweeps (no Dask); cluster.py the cluster, routing, retries and gathering;
exports.py the per-device exports. Dask is imported only when a cluster is used.
"""
import os

from .items import ConvTileSweep, PixelShuffleSweep, WorkItem, execute_item, make_sweep, probe_device

__all__ = ["ConvTileSweep", "PixelShuffleSweep", "WorkItem", "execute_item", "make_sweep", "probe_device",
           "run_sweep", "start_local_cluster", "run_here", "export"]


def run_sweep(*args, **kwargs):
    from .cluster import run_sweep as run
    return run(*args, **kwargs)


def start_local_cluster(*args, **kwargs):
    from .cluster import start_local_cluster as start
    return start(*args, **kwargs)


def run_here(sweep, writer=None, show_progress: bool = False):
    """Every item of `sweep` in this process, on the current device, one after the other: the single-process
    baseline (same items, same rows as on a cluster). Returns a cluster.SweepResult (scheduler "in-process")."""
    import socket
    import time

    import pandas as pd

    from .. import vk
    from ..measure import progress
    from .cluster import SweepResult
    from .items import device_keys
    start = time.perf_counter()
    info = vk.get_device().info
    key = device_keys(info)["key"]
    rows = []
    for params in progress(sweep.items(), sweep.name, enabled=show_progress):
        for row in execute_item(sweep, WorkItem(sweep.name, key, params)):
            rows.append(row)
            if writer is not None:
                writer.append(row)
    frame = pd.DataFrame(rows)
    errors = int(frame["error"].notna().sum()) if "error" in frame else 0
    devices = pd.DataFrame([{"worker": "local", "host": socket.gethostname(), "pid": os.getpid(),
                             "selector": os.environ.get("WORKBENCH_DEVICE"), "device": info.name, "index": info.index,
                             "driver": info.driver_name, "items": len(sweep.items()), "rows": len(frame),
                             "errors": errors}])
    return SweepResult(frame, devices, len(sweep.items()), time.perf_counter() - start, 0.0, "in-process")


def export(result, folder, name: str) -> dict:
    from .exports import export_result
    return export_result(result, folder, name)
