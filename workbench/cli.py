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


def _results_dir(args, device) -> Path:
    from .bench import default_results_dir
    return Path(args.out) if args.out else default_results_dir(device)


def cmd_bench(args) -> int:
    from . import bench, vk
    device = vk.Device(args.device)
    out = _results_dir(args, device)
    try:
        if args.suite == "copy":
            sizes = [float(s) for s in args.sizes.split(",")] if args.sizes else bench.COPY_SIZES_MIB
            with bench.ResultsWriter(out / "copy", bench.environment(device)) as writer:
                df = bench.bench_copy(device, sizes, writer=writer)
            print(_table(df, ["method", "size_mib", "samples", "median_us", "p10_us", "p90_us", "GB/s", "timer"]))
            print(f"\ncopy roofline on {device.info.name}: {bench.peak_copy_gbps(df):,.1f} GB/s "
                  f"(bytes read + written); rows in {writer.csv_path}")
        elif args.suite == "overhead":
            df = bench.bench_dispatch_overhead(device)
            print(_table(df, ["what", "dispatches", "host_median_us", "gpu_median_us"]))
        else:  # pragma: no cover - argparse restricts choices
            raise ValueError(args.suite)
    finally:
        device.close()
    return 0


def cmd_main(args) -> int:
    """The main job: the device table, then every benchmark suite on the default device."""
    print("== devices")
    cmd_devices(args)
    for suite in ("copy", "overhead"):
        print(f"\n== bench {suite}")
        cmd_bench(argparse.Namespace(device=args.device, out=args.out, suite=suite, sizes=None))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description=__doc__)
    parser.add_argument("--device", default=None,
                        help="device index or name substring (default: WORKBENCH_DEVICE, else the first GPU, "
                             "else the CPU device)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("devices", help="list Vulkan devices, their properties and features").set_defaults(fn=cmd_devices)
    p = sub.add_parser("bench", help="run a benchmark suite and write its DataFrame")
    p.add_argument("suite", choices=["copy", "overhead"])
    p.add_argument("--sizes", help="copy sizes in MiB, comma-separated (default 1,4,16,64,256)")
    p.add_argument("--out", help="results folder (default data/<device>/)")
    p.set_defaults(fn=cmd_bench)
    p = sub.add_parser("main", help="the main job on the chosen device")
    p.add_argument("--out", help="results folder (default data/<device>/)")
    p.set_defaults(fn=cmd_main)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except Exception as exc:  # a clear one-line error, not a traceback, for expected failures
        from .shaders import ShaderCompileError
        from .vk import VulkanError
        if isinstance(exc, (VulkanError, ShaderCompileError, ValueError)):
            print(f"workbench: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
