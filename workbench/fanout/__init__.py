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
from .items import ConvTileSweep, PixelShuffleSweep, WorkItem, execute_item, make_sweep, probe_device

__all__ = ["ConvTileSweep", "PixelShuffleSweep", "WorkItem", "execute_item", "make_sweep", "probe_device",
           "run_sweep", "start_local_cluster", "run_here", "export"]


def run_sweep(*args, **kwargs):
    from .cluster import run_sweep as run
    return run(*args, **kwargs)


def start_local_cluster(*args, **kwargs):
    from .cluster import start_local_cluster as start
    return start(*args, **kwargs)


def run_here(sweep) -> "pd.DataFrame":  # noqa: F821
    """Every item of `sweep` in this process, on the current device: the single-process sweep, same rows."""
    import pandas as pd

    from .. import vk
    from .items import device_keys
    key = device_keys(vk.get_device().info)["key"]
    rows = []
    for params in sweep.items():
        rows.extend(execute_item(sweep, WorkItem(sweep.name, key, params)))
    return pd.DataFrame(rows)


def export(result, folder, name: str) -> dict:
    from .exports import export_result
    return export_result(result, folder, name)
