"""`workbench sweep` and `workbench join`: sweeps on every Vulkan device of a Dask cluster (workbench.fanout)."""
from __future__ import annotations

import sys
from pathlib import Path

from .common import table


def register(sub) -> None:
    from .. import catalogue
    p = sub.add_parser("sweep", help="a sweep on every Vulkan device of a Dask cluster (local by default)")
    p.add_argument("sweep", choices=sorted(catalogue.sweeps()))
    p.add_argument("--quick", action="store_true", help="small sizes (seconds, for a smoke test)")
    p.add_argument("--scheduler", help="join an existing Dask cluster at this address (tcp://host:port); default: "
                                       "start a local one on 127.0.0.1")
    p.add_argument("--workers", help="local cluster: one worker per entry, each on the device this index or name "
                                     "picks (e.g. 0,1 or 0,0); default: one per local GPU, else per CPU device")
    p.add_argument("--each-device", action="store_true",
                   help="identical devices each run every item (compare them) instead of sharing the items")
    p.add_argument("--devices", help="only devices whose name contains one of these (comma-separated)")
    p.add_argument("--here", action="store_true",
                   help="run the items in this process on the current device, no cluster (the baseline)")
    p.add_argument("--large", action="store_true",
                   help="the whole grid even when every local device is a CPU (default there: a smaller grid)")
    p.add_argument("--out", help="results folder (default data/fanout/)")
    p.set_defaults(fn=sweep)
    p = sub.add_parser("join", help="serve this machine's Vulkan devices to an existing Dask cluster")
    p.add_argument("scheduler", help="the scheduler's address, tcp://host:port (e.g. from `dask scheduler`)")
    p.add_argument("--workers", help="one worker per entry, each on the device this index or name picks "
                                     "(default: one per local GPU, else per CPU device)")
    p.add_argument("--host", help="interface the workers listen on (default: Dask's choice)")
    p.set_defaults(fn=join)


def sweep(args) -> int:
    """A sweep on every Vulkan device of a Dask cluster (workbench.fanout): local by default, or --scheduler."""
    from .. import fanout, measure, vk
    from ..fanout.cluster import local_workers
    from ..fanout.exports import cost, export_result
    cpu_only = args.scheduler is None and all(d.is_cpu for d in vk.list_devices())  # lavapipe: smaller grids
    sweep = fanout.make_sweep(args.sweep, quick=args.quick, cpu_device=cpu_only and not args.large)
    out = Path(args.out) if args.out else measure.REPO / "data" / "fanout"
    name = args.sweep.replace("-", "_")
    workers = args.workers.split(",") if args.workers else None
    devices = args.devices.split(",") if args.devices else None
    where = "this process (no cluster)" if args.here else (
        args.scheduler or f"a local cluster ({len(local_workers(workers))} workers)")
    print(f"== {args.sweep}: {len(sweep.items())} items per device on {where}")
    writer = measure.ResultsWriter(out / f"{name}_devices", {"sweep": args.sweep, "scheduler": args.scheduler})
    try:
        if args.here:
            if args.device is not None:
                vk.set_device(args.device)
            result = fanout.run_here(sweep, writer, show_progress=True)
        else:
            result = fanout.run_sweep(sweep, scheduler=args.scheduler, workers=workers,
                                      each_device=args.each_device, devices=devices, writer=writer)
    except KeyboardInterrupt:
        writer.close()
        print(f"\ninterrupted: {len(writer.rows)} finished rows kept in {writer.csv_path} (+ .parquet, .json)",
              file=sys.stderr)
        return 130
    writer.close()
    paths = export_result(result, out, name)
    print("\n== devices that took part")
    print(table(result.devices))
    frame = result.frame
    shown = [c for c in ["device_key", "shape", "tile", "path", "in_layout", "out_layout", "median_us", "GB/s",
                         "GOP/s", "max_lsb_diff", "error"] if c in frame.columns]
    print(f"\n== {len(frame)} rows")
    print(table(frame, shown))
    spent = cost(result)
    print(f"\nstart-up {result.startup_s:.1f} s, sweep {result.wall_s:.1f} s for {result.items} items on "
          f"{spent['workers']} workers ({spent['busy_s']:.1f} s inside items, efficiency {spent['efficiency']:.0%}, "
          f"overhead {spent['overhead_per_item_ms']:.1f} ms per item between items; "
          f"{result.duplicates_dropped} duplicate results dropped)")
    print(f"wrote {paths['all']} (+ .parquet, .json), one folder per device under {out}"
          + (f", chart {paths['chart']}" if "chart" in paths else ""))
    errors = int(frame["error"].notna().sum()) if "error" in frame else 0
    return 1 if errors else 0


def join(args) -> int:
    """Serve this machine's Vulkan devices to an existing Dask cluster until Ctrl-C."""
    from ..fanout.cluster import join_cluster, local_workers
    selectors = local_workers(args.workers.split(",") if args.workers else None)
    print(f"joining {args.scheduler} with {len(selectors)} workers (devices {', '.join(selectors)}); Ctrl-C leaves")
    try:
        join_cluster(args.scheduler, selectors, host=args.host,
                     on_started=lambda addresses: print("workers:", " ".join(map(str, addresses)), flush=True))
    except KeyboardInterrupt:
        print("left the cluster", file=sys.stderr)
        return 130
    return 0
