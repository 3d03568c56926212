"""`workbench bench SUITE` and `workbench roofline-check`: the benchmark suites and the roofline check of a results
folder."""
from __future__ import annotations

from .common import add_validation_flags, device, report_validation, results_dir, table

SHOWN = ["graph", "setting", "label", "kind", "gpu_us", "kernel", "method", "variant", "path", "shape", "size_mib",
         "tile", "coop_size", "chains", "local_size", "samples", "median_us", "p10_us", "p90_us", "GB/s", "GOP/s",
         "copy_fraction", "probe_fraction", "max_abs_diff", "max_lsb_diff", "status", "exact", "stable", "timer"]


def register(sub) -> None:
    from ..benchmarks import SUITES
    p = sub.add_parser("bench", help="run a benchmark suite and write its DataFrame")
    p.add_argument("suite", choices=sorted(SUITES) + ["overhead"])
    p.add_argument("--sizes", help="copy only: sizes in MiB, comma-separated (default 1,4,16,64,256)")
    p.add_argument("--quick", action="store_true", help="small sizes (seconds, for a smoke test)")
    p.add_argument("--out", help="results folder (default data/<device>/)")
    add_validation_flags(p)
    p.set_defaults(fn=_bench)
    p = sub.add_parser("roofline-check", help="check that no kernel row of a results folder beats its roof")
    p.add_argument("--out", required=True, help="results folder (peak.csv, conv_pw.csv, coopmat.csv)")
    p.add_argument("--png", help="also draw the folder's roofline chart into this PNG file")
    p.add_argument("--device-name", help="the device's name for the chart's title")
    p.set_defaults(fn=lambda args: roofline_check(args.out, png=args.png, device_name=args.device_name))


def _bench(args) -> int:
    dev = device(args)
    status = run_suite(dev, args.suite, results_dir(args.out, dev), quick=args.quick, sizes=args.sizes)
    if getattr(args, "validate", None) is not None:
        return 1 if report_validation(dev, args) and status == 0 else status
    return status


def run_suite(device, suite: str, out, *, quick: bool = False, sizes: str | None = None) -> int:
    """Run one suite (or `overhead`) on `device`, writing its rows into `out` as they come; print the table."""
    from .. import benchmarks, measure
    from ..benchmarks.copy import bench_copy, bench_dispatch_overhead, peak_copy_gbps
    if suite == "overhead":
        df = bench_dispatch_overhead(device)
        print(table(df, ["what", "dispatches", "host_median_us", "gpu_median_us", "rss_kib_per_100_pipelines"]))
        with measure.ResultsWriter(out / "overhead", measure.environment(device)) as writer:
            for row in df.to_dict("records"):
                writer.append(row)
        print(f"{len(df)} rows in {writer.csv_path} (+ .parquet, .json)")
        return 0
    if suite == "copy" and sizes:
        sizes_mib = [float(s) for s in sizes.split(",")]
        run = lambda dev, writer, **kw: bench_copy(dev, sizes_mib, writer=writer)  # noqa: E731
    else:
        run = benchmarks.suite(suite)
    stem = out / suite.replace("-", "_")
    with measure.ResultsWriter(stem, measure.environment(device)) as writer:
        df = run(device, writer, quick=quick)
    print(table(df, [c for c in SHOWN if c in df.columns]))
    if suite == "copy":
        print(f"\ncopy roofline on {device.info.name}: {peak_copy_gbps(df):,.1f} GB/s (bytes read + written)")
    print(f"{len(df)} rows in {writer.csv_path} (+ .parquet, .json)")
    return 0


def roofline_check(out, *, png: str | None = None, device_name: str | None = None) -> int:
    """No kernel row above its roof: every compute row of a results folder against the measured probes; then the
    folder's figures against the goals (`workbench.report`)."""
    import pandas as pd

    from ..benchmarks.peak import check_results_dir
    from ..report import goals
    roofs, checked = check_results_dir(out)
    print("\n== roofline check (" + ", ".join(f"{k} {v:,.0f}" for k, v in roofs.items()) + ")")
    if not len(checked):
        print("no compute rows to check")
        checked = checked.assign(above=pd.Series(dtype=bool))
    worst = checked.sort_values("roof_fraction", ascending=False).head(5)
    if len(worst):
        print(table(worst, [c for c in ["kernel", "method", "shape", "tile", "saturate", "GOP/s", "roof", "roof_GOPs",
                                    "roof_fraction"] if c in worst.columns]))
    goals_table = goals(out, roofs)
    if len(goals_table):
        print("\n== goals")
        print(table(goals_table))
    if png:
        from ..viz.roofline import folder_figure
        folder_figure(out, roofs, device=device_name or "").savefig(png, dpi=110)
        print(f"wrote {png}")
    above = checked[checked["above"]]
    if len(above):
        print(f"ROOFLINE CHECK FAILED: {len(above)} of {len(checked)} rows above their roof")
        return 1
    print(f"roofline check passed: all {len(checked)} compute rows under their roofs")
    return 0
