"""`workbench …` — the command line."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _table(df, columns=None) -> str:
    import pandas as pd
    with pd.option_context("display.max_columns", None, "display.width", 200, "display.max_colwidth", 60):
        return (df[columns] if columns else df).to_string(index=False, float_format=lambda v: f"{v:,.2f}")


def cmd_devices(args) -> int:
    import pandas as pd

    from . import vk
    devices = vk.list_devices()
    if not devices:
        print("no Vulkan device found", file=sys.stderr)
        return 1
    chosen = vk.select_device(args.device, devices)
    rows = []
    for d in devices:
        row = d.summary()
        row["default"] = "*" if d.index == chosen.index else ""
        rows.append(row)
    df = pd.DataFrame(rows)
    columns = ["default", "index", "name", "device_type", "driver_name", "driver_info", "api_version",
               "subgroup_size", "timestamp_period_ns", "max_workgroup_invocations", "shared_memory_bytes"]
    print(_table(df, columns))
    print()
    features = df[["index"] + [c for c in df.columns if c.startswith("feature.")]]
    features.columns = [c.replace("feature.", "") for c in features.columns]
    print(_table(features))
    return 0


_RESULTS_DIRS: list[Path] = []  # where this command writes (reported on Ctrl-C)


def _results_dir(args, device) -> Path:
    from .measure import default_results_dir
    out = Path(args.out) if args.out else default_results_dir(device)
    _RESULTS_DIRS.append(out)
    return out


def _interrupted(since: float) -> int:
    """One line on Ctrl-C: how many finished rows the CSVs written by this command hold, and where."""
    import pandas as pd
    rows, files = 0, []
    for folder in dict.fromkeys(_RESULTS_DIRS):
        for csv in sorted(folder.glob("*.csv")) if folder.is_dir() else ():
            if csv.stat().st_mtime >= since:
                try:
                    rows += len(pd.read_csv(csv))
                except (pd.errors.EmptyDataError, OSError):
                    continue
                files.append(csv.name)
    where = ", ".join(str(f) for f in dict.fromkeys(_RESULTS_DIRS)) or "no results folder"
    print(f"interrupted: {rows} rows kept in {where}" + (f" ({', '.join(files)})" if files else ""),
          file=sys.stderr)
    return 130


def cmd_bench(args) -> int:
    from . import benchmarks, measure, vk
    from .benchmarks.copy import bench_copy, bench_dispatch_overhead, peak_copy_gbps
    device = vk.get_device() if args.device is None else vk.set_device(args.device)
    out = _results_dir(args, device)
    if args.suite == "overhead":
        df = bench_dispatch_overhead(device)
        print(_table(df, ["what", "dispatches", "host_median_us", "gpu_median_us", "rss_kib_per_100_pipelines"]))
        with measure.ResultsWriter(out / "overhead", measure.environment(device)) as writer:
            for row in df.to_dict("records"):
                writer.append(row)
        print(f"{len(df)} rows in {writer.csv_path} (+ .parquet, .json)")
        return 0
    if args.suite == "copy" and args.sizes:
        sizes = [float(s) for s in args.sizes.split(",")]
        run = lambda dev, writer, **kw: bench_copy(dev, sizes, writer=writer)  # noqa: E731
    else:
        run = benchmarks.suite(args.suite)
    stem = out / args.suite.replace("-", "_")
    with measure.ResultsWriter(stem, measure.environment(device)) as writer:
        df = run(device, writer, quick=args.quick)
    shown = [c for c in ["graph", "setting", "label", "kind", "gpu_us",
                         "kernel", "method", "variant", "path", "shape", "size_mib", "tile", "coop_size", "chains",
                         "local_size", "samples", "median_us", "p10_us", "p90_us", "GB/s", "GOP/s", "copy_fraction",
                         "probe_fraction", "max_abs_diff", "max_lsb_diff", "status", "exact", "stable", "timer"]
             if c in df.columns]
    print(_table(df, shown))
    if args.suite == "copy":
        print(f"\ncopy roofline on {device.info.name}: {peak_copy_gbps(df):,.1f} GB/s (bytes read + written)")
    print(f"{len(df)} rows in {writer.csv_path} (+ .parquet, .json)")
    return 0


def cmd_roofline_check(args) -> int:
    """No kernel row above its roof: every compute row of a results folder against the measured probes; then the
    folder's figures against the goals (`workbench.report`)."""
    import pandas as pd

    from .benchmarks.peak import check_results_dir
    roofs, checked = check_results_dir(args.out)
    print("\n== roofline check (" + ", ".join(f"{k} {v:,.0f}" for k, v in roofs.items()) + ")")
    if not len(checked):
        print("no compute rows to check")
        checked = checked.assign(above=pd.Series(dtype=bool))
    worst = checked.sort_values("roof_fraction", ascending=False).head(5)
    if len(worst):
        print(_table(worst, [c for c in ["kernel", "method", "shape", "tile", "saturate", "GOP/s", "roof", "roof_GOPs",
                                     "roof_fraction"] if c in worst.columns]))
    from .report import goals
    table = goals(args.out, roofs)
    if len(table):
        print("\n== goals")
        print(_table(table))
    if args.png:
        from .viz.roofline import folder_figure
        folder_figure(args.out, roofs, device=args.device_name or "").savefig(args.png, dpi=110)
        print(f"wrote {args.png}")
    above = checked[checked["above"]]
    if len(above):
        print(f"ROOFLINE CHECK FAILED: {len(above)} of {len(checked)} rows above their roof")
        return 1
    print(f"roofline check passed: all {len(checked)} compute rows under their roofs")
    return 0


def cmd_layout(args) -> int:
    from . import layouts
    sizes = [int(v) for v in args.sizes.split(",")]
    if args.element:
        element = [int(v) for v in args.element.split(",")]
        print(layouts.describe_element(args.layout, sizes, element))
    if args.png:
        from .viz.layout_views import save_layout_pictures
        element = [int(v) for v in args.element.split(",")] if args.element else None
        paths = save_layout_pictures(layouts.get_layout(args.layout), sizes, args.png, element=element)
        print("wrote", paths)
    if not args.element and not args.png:
        layout = layouts.get_layout(args.layout)
        print(layout)
        print("padded sizes (NCHW):", layout.padded_sizes(sizes))
    return 0


def cmd_main(args) -> int:
    """The main job: the device table, the copy roofline, then every notebook with its full parameters."""
    from . import notebook, vk
    device = vk.get_device() if args.device is None else vk.set_device(args.device)
    out = _results_dir(args, device)
    out.mkdir(parents=True, exist_ok=True)
    print(f"== devices (results go to {out})")
    cmd_devices(args)
    print("\n== copy roofline")
    cmd_bench(argparse.Namespace(device=args.device, out=str(out), suite="copy", sizes=None, quick=args.quick))
    if args.benchmarks:  # where Jupyter is not installed: the suites the notebooks run, through the CLI
        from .benchmarks import SUITES
        for suite in [name for name in SUITES if name != "copy"]:
            print(f"\n== bench {suite}")
            cmd_bench(argparse.Namespace(device=args.device, out=str(out), suite=suite, sizes=None,
                                         quick=args.quick))
        return cmd_roofline_check(argparse.Namespace(out=str(out)))
    device.close()  # notebooks open their own device in their kernels
    print("\n== notebooks")
    summary = notebook.run_all(out, full=not args.quick, selection=args.notebooks)
    print("\n== summary")
    for row in summary:
        print(f"{row['notebook']:<32} {row['status']:<10} {row['seconds']:>7.1f} s  wrote {len(row['files'])} files")
        for name in row["files"]:
            print(f"    {name}")
    print(f"executed notebooks in {out / 'notebooks'}")
    failed = [r for r in summary if r["status"] != "ok"]
    return 1 if failed else 0


def cmd_sweep(args) -> int:
    """A sweep on every Vulkan device of a Dask cluster (workbench.fanout): local by default, or --scheduler."""
    from . import fanout, measure
    from .fanout.cluster import local_workers
    from .fanout.exports import cost, export_result
    from . import vk
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
    print(_table(result.devices))
    frame = result.frame
    shown = [c for c in ["device_key", "shape", "tile", "path", "in_layout", "out_layout", "median_us", "GB/s",
                         "GOP/s", "max_lsb_diff", "error"] if c in frame.columns]
    print(f"\n== {len(frame)} rows")
    print(_table(frame, shown))
    spent = cost(result)
    print(f"\nstart-up {result.startup_s:.1f} s, sweep {result.wall_s:.1f} s for {result.items} items on "
          f"{spent['workers']} workers ({spent['busy_s']:.1f} s inside items, efficiency {spent['efficiency']:.0%}, "
          f"overhead {spent['overhead_per_item_ms']:.1f} ms per item between items; "
          f"{result.duplicates_dropped} duplicate results dropped)")
    print(f"wrote {paths['all']} (+ .parquet, .json), one folder per device under {out}"
          + (f", chart {paths['chart']}" if "chart" in paths else ""))
    errors = int(frame["error"].notna().sum()) if "error" in frame else 0
    return 1 if errors else 0


def cmd_join(args) -> int:
    """Serve this machine's Vulkan devices to an existing Dask cluster until Ctrl-C."""
    from .fanout.cluster import join_cluster, local_workers
    selectors = local_workers(args.workers.split(",") if args.workers else None)
    print(f"joining {args.scheduler} with {len(selectors)} workers (devices {', '.join(selectors)}); Ctrl-C leaves")
    try:
        join_cluster(args.scheduler, selectors, host=args.host,
                     on_started=lambda addresses: print("workers:", " ".join(map(str, addresses)), flush=True))
    except KeyboardInterrupt:
        print("left the cluster", file=sys.stderr)
        return 130
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description=__doc__)
    parser.add_argument("--device", default=None,
                        help="device index or name substring (default: WORKBENCH_DEVICE, else the first GPU, "
                             "else the CPU device)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("devices", help="list Vulkan devices, their properties and features").set_defaults(fn=cmd_devices)
    p = sub.add_parser("bench", help="run a benchmark suite and write its DataFrame")
    from .benchmarks import SUITES
    p.add_argument("suite", choices=sorted(SUITES) + ["overhead"])
    p.add_argument("--sizes", help="copy only: sizes in MiB, comma-separated (default 1,4,16,64,256)")
    p.add_argument("--quick", action="store_true", help="small sizes (seconds, for a smoke test)")
    p.add_argument("--out", help="results folder (default data/<device>/)")
    p.set_defaults(fn=cmd_bench)
    p = sub.add_parser("roofline-check", help="check that no kernel row of a results folder beats its roof")
    p.add_argument("--out", required=True, help="results folder (peak.csv, conv_pw.csv, coopmat.csv)")
    p.add_argument("--png", help="also draw the folder's roofline chart into this PNG file")
    p.add_argument("--device-name", help="the device's name for the chart's title")
    p.set_defaults(fn=cmd_roofline_check)
    p = sub.add_parser("sweep", help="a sweep on every Vulkan device of a Dask cluster (local by default)")
    p.add_argument("sweep", choices=["conv-pw", "pixel-shuffle"])
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
    p.set_defaults(fn=cmd_sweep)
    p = sub.add_parser("join", help="serve this machine's Vulkan devices to an existing Dask cluster")
    p.add_argument("scheduler", help="the scheduler's address, tcp://host:port (e.g. from `dask scheduler`)")
    p.add_argument("--workers", help="one worker per entry, each on the device this index or name picks "
                                     "(default: one per local GPU, else per CPU device)")
    p.add_argument("--host", help="interface the workers listen on (default: Dask's choice)")
    p.set_defaults(fn=cmd_join)
    p = sub.add_parser("layout", help="where an element lives in a layout; pictures of the layout")
    p.add_argument("layout", help="4W4C, 4H4W, 4W, 4C, 4C1W, or a float buffer/texture layout")
    p.add_argument("--sizes", required=True, help="N,C,H,W")
    p.add_argument("--element", help="n,c,h,w")
    p.add_argument("--png", help="write the tensor and memory views to this PNG file")
    p.set_defaults(fn=cmd_layout)
    p = sub.add_parser("main", help="the main job: devices, copy roofline, every notebook; results per device")
    p.add_argument("--out", help="results folder (default data/<device>/)")
    p.add_argument("--quick", action="store_true", help="notebooks with small sizes")
    p.add_argument("--notebooks", nargs="*", help="only notebooks whose name contains one of these")
    p.add_argument("--benchmarks", action="store_true",
                   help="run the benchmark suites through the CLI instead of the notebooks (no Jupyter needed)")
    p.set_defaults(fn=cmd_main)
    from . import adreno
    _add_adreno_conv_cli(adreno.add_cli_parser(sub))
    from .etvk import cli as etvk_cli
    etvk_cli.add_cli_parser(sub)
    return parser


def _add_adreno_conv_cli(adreno_subparsers) -> None:
    """`workbench adreno conv`: the conv tiles compiled by Turnip."""
    from . import adreno
    s = adreno_subparsers.add_parser("conv", help="q8ta_conv2d_pw tiles compiled by Turnip (Mesa's ir3): "
                                                  "registers, waves, spills")
    s.add_argument("--tiles", default=None, help="M,N4,K4 triples separated by ';' (default: all 27)")
    s.add_argument("--gpu", default=str(adreno.DEFAULT_GPU))
    s.add_argument("--dir", default=None)
    s.set_defaults(fn=_adreno_conv_main)


def _adreno_conv_main(args) -> int:
    import pandas as pd

    from . import adreno
    from .benchmarks.conv import conv_pw_adreno_table
    tiles = None if not args.tiles else [tuple(int(v) for v in t.split(",")) for t in args.tiles.split(";")]
    try:
        table = conv_pw_adreno_table(tiles, args.gpu, root=args.dir)
    except adreno.AdrenoError as exc:
        print(f"workbench adreno conv: error: {exc}", file=sys.stderr)
        return 1
    with pd.option_context("display.max_columns", None, "display.width", 220):
        print(table.to_string(index=False))
    return 0


def main(argv=None) -> int:
    import time
    args = build_parser().parse_args(argv)
    since = time.time() - 1  # file mtimes have coarse resolution on some filesystems
    _RESULTS_DIRS.clear()
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        return _interrupted(since)
    except Exception as exc:  # a clear one-line error, not a traceback, for expected failures
        from .etvk import UnknownKernelError
        from .shaders import ShaderCompileError
        from .vk import VulkanError
        if isinstance(exc, (VulkanError, ShaderCompileError, ValueError, UnknownKernelError)):
            print(f"workbench: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
