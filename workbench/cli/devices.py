"""`workbench devices`: the Vulkan devices, their properties and features."""
from __future__ import annotations

import sys

from .common import table


def register(sub) -> None:
    sub.add_parser("devices", help="list Vulkan devices, their properties and features").set_defaults(
        fn=lambda args: show_devices(args.device))


def show_devices(selector=None) -> int:
    """Print the device table (the default device marked) and their features; 1 where there is no device."""
    import pandas as pd

    from .. import vk
    devices = vk.list_devices()
    if not devices:
        print("no Vulkan device found", file=sys.stderr)
        return 1
    chosen = vk.select_device(selector, devices)
    rows = []
    for d in devices:
        row = d.summary()
        row["default"] = "*" if d.index == chosen.index else ""
        rows.append(row)
    df = pd.DataFrame(rows)
    columns = ["default", "index", "name", "device_type", "driver_name", "driver_info", "api_version",
               "subgroup_size", "timestamp_period_ns", "max_workgroup_invocations", "shared_memory_bytes"]
    print(table(df, columns))
    print()
    features = df[["index"] + [c for c in df.columns if c.startswith("feature.")]]
    features.columns = [c.replace("feature.", "") for c in features.columns]
    print(table(features))
    return 0
