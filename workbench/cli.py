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
    from .bench import default_results_dir
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
    from . import bench, vk
    device = vk.get_device() if args.device is None else vk.set_device(args.device)
    out = _results_dir(args, device)
    if args.suite == "overhead":
        df = bench.bench_dispatch_overhead(device)
        print(_table(df, ["what", "dispatches", "host_median_us", "gpu_median_us", "rss_kib_per_100_pipelines"]))
        with bench.ResultsWriter(out / "overhead", bench.environment(device)) as writer:
            for row in df.to_dict("records"):
                writer.append(row)
        print(f"{len(df)} rows in {writer.csv_path} (+ .parquet, .json)")
        return 0
    if args.suite == "copy" and args.sizes:
        sizes = [float(s) for s in args.sizes.split(",")]
        run = lambda dev, writer, **kw: bench.bench_copy(dev, sizes, writer=writer)  # noqa: E731
    else:
        run = bench.suite(args.suite)
    stem = out / args.suite.replace("-", "_")
    with bench.ResultsWriter(stem, bench.environment(device)) as writer:
        df = run(device, writer, quick=args.quick)
    shown = [c for c in ["kernel", "method", "variant", "path", "shape", "size_mib", "samples", "median_us",
                         "p10_us", "p90_us", "GB/s", "GOP/s", "copy_fraction", "timer"] if c in df.columns]
    print(_table(df, shown))
    if args.suite == "copy":
        print(f"\ncopy roofline on {device.info.name}: {bench.peak_copy_gbps(df):,.1f} GB/s (bytes read + written)")
    print(f"{len(df)} rows in {writer.csv_path} (+ .parquet, .json)")
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
        from .bench import SUITES
        for suite in [name for name in SUITES if name != "copy"]:
            print(f"\n== bench {suite}")
            cmd_bench(argparse.Namespace(device=args.device, out=str(out), suite=suite, sizes=None,
                                         quick=args.quick))
        return 0
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description=__doc__)
    parser.add_argument("--device", default=None,
                        help="device index or name substring (default: WORKBENCH_DEVICE, else the first GPU, "
                             "else the CPU device)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("devices", help="list Vulkan devices, their properties and features").set_defaults(fn=cmd_devices)
    p = sub.add_parser("bench", help="run a benchmark suite and write its DataFrame")
    from .bench import SUITES
    p.add_argument("suite", choices=sorted(SUITES) + ["overhead"])
    p.add_argument("--sizes", help="copy only: sizes in MiB, comma-separated (default 1,4,16,64,256)")
    p.add_argument("--quick", action="store_true", help="small sizes (seconds, for a smoke test)")
    p.add_argument("--out", help="results folder (default data/<device>/)")
    p.set_defaults(fn=cmd_bench)
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
    adreno.add_cli_parser(sub)
    return parser


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
        from .shaders import ShaderCompileError
        from .vk import VulkanError
        if isinstance(exc, (VulkanError, ShaderCompileError, ValueError)):
            print(f"workbench: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
