"""`workbench bench SUITE` and `workbench roofline-check`: the benchmark suites and the roofline check of a results
folder."""
from __future__ import annotations

from pathlib import Path

from .common import add_validation_flags, device, quick_writer, report_validation, results_dir, table

SHOWN = ["graph", "setting", "label", "kind", "gpu_us", "kernel", "method", "variant", "path", "shape", "size_mib",
         "tile", "option", "operands", "coop_size", "chains", "local_size", "samples", "median_us", "p10_us",
         "p90_us", "GB/s", "GOP/s", "roof_fraction",
         "copy_fraction", "probe_fraction", "max_abs_diff", "max_lsb_diff", "status", "exact", "stable", "timer"]


def register(sub) -> None:
    from .. import catalogue
    p = sub.add_parser("bench", help="run a benchmark suite and write its DataFrame")
    p.add_argument("suite", choices=sorted(catalogue.suites()) + ["overhead"])
    p.add_argument("--sizes", help="copy only: sizes in MiB, comma-separated (default 1,4,16,64,256)")
    p.add_argument("--quick", action="store_true",
                   help="small sizes (seconds, for a smoke test); checks no headline figure, its rows say so")
    p.add_argument("--out", help="results folder (default data/<device>/)")
    p.add_argument("--field", action="store_true",
                   help="q4-gemv only: the field's GEMVs through torch too (torchao's int4 tinygemm op, cuBLAS fp16; "
                        "CUDA events; skipped rows without CUDA torch)")
    p.add_argument("--ggml", metavar="CHECKOUT", default=None,
                   help="q4-gemv only: llama.cpp's Vulkan GEMV (q4_0, both paths) from this ggml or llama.cpp "
                        "checkout, built at run time, captured and replayed the workbench's way")
    add_validation_flags(p)
    p.set_defaults(fn=_bench)
    p = sub.add_parser("roofline-check", help="check that no compute row of a results folder beats the roof of its instruction path")
    p.add_argument("--out", required=True, help="results folder (peak.csv, conv_pw.csv, coopmat.csv)")
    p.add_argument("--png", help="also draw the folder's roofline chart into this PNG file")
    p.add_argument("--device-name", help="the device's name for the chart's title")
    p.set_defaults(fn=lambda args: roofline_check(args.out, png=args.png, device_name=args.device_name))


def _bench(args) -> int:
    for flag in ("field", "ggml"):
        if getattr(args, flag, None) and args.suite != "q4-gemv":
            raise ValueError(f"--{flag} applies to the q4-gemv suite, got suite {args.suite!r}")
    if getattr(args, "ggml", None):
        from ..toolchain.ggml import checkout
        checkout(args.ggml)  # a one-line error before any measurement
    dev = device(args)
    status = run_suite(dev, args.suite, results_dir(args.out, dev), quick=args.quick, sizes=args.sizes,
                       field=getattr(args, "field", False), ggml=getattr(args, "ggml", None))
    if getattr(args, "validate", None) is not None:
        return 1 if report_validation(dev, args) and status == 0 else status
    return status


def write_chart(suite: str, df, stem) -> None:
    """The suite's chart beside its table (stem.png), for the suites whose catalogue entry names one."""
    from .. import catalogue
    chart = catalogue.suite(suite).chart
    if chart is not None and len(df):
        png = Path(stem).with_suffix(".png")
        catalogue.resolve(chart)(df).savefig(png, dpi=110, bbox_inches="tight")
        print(f"wrote {png}")


def run_suite(device, suite: str, out, *, quick: bool = False, sizes: str | None = None, field: bool = False,
              ggml: str | None = None) -> int:
    """Run one suite (or `overhead`) on `device`, writing its rows into `out` as they come; print the table.
    `field`: the q4-gemv suite's field rows too (`benchmarks.field_gemv`); `ggml`: llama.cpp's (`field_ggml`)."""
    from .. import benchmarks, measure
    from ..measure import QUICK_NOTE
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
    if quick:
        print(QUICK_NOTE)
    metadata = {**measure.environment(device), **({"quick": True, "note": QUICK_NOTE} if quick else {})}
    with measure.ResultsWriter(stem, metadata) as writer:
        df = run(device, quick_writer(writer) if quick else writer, quick=quick,
                 **({"field": True} if field else {}), **({"ggml": ggml} if ggml else {}))
    print(table(df, [c for c in SHOWN if c in df.columns]))
    write_chart(suite, df, stem)
    if quick:
        print(QUICK_NOTE)
    if suite == "copy":
        print(f"\ncopy roofline on {device.info.name}: {peak_copy_gbps(df):,.1f} GB/s (bytes read + written)")
    print(f"{len(df)} rows in {writer.csv_path} (+ .parquet, .json)")
    return 0


def roofline_check(out, *, png: str | None = None, device_name: str | None = None) -> int:
    """No compute row above its roof: every compute row of every table of a results folder against the probe of its
    own instruction path, with the probe's own measured spread as the only slack (`benchmarks.roof_check`); then the
    folder's figures against the goals (`workbench.report`). A row with no roof, or two roofs for one path in the
    folder, is an error (exit 2)."""
    from ..measure import QUICK_NOTE
    from ..benchmarks.roof_check import RoofCheckError, check_copy_results_dir, check_results_dir
    from ..report import goals
    try:
        roofs, checked = check_results_dir(out)
        copy_checked = check_copy_results_dir(out)
    except RoofCheckError as exc:
        print(f"ROOFLINE CHECK ERROR: {exc}")
        return 2
    print("\n== roofline check: the folder's roofs (one set), each path's slack = its probe's max / median rate")
    print(roofs.describe())
    if roofs.quick:
        print(QUICK_NOTE + " (these roofs come from a quick run)")
    bounded = checked[checked["excluded"].isna()] if len(checked) else checked
    excluded = checked[checked["excluded"].notna()] if len(checked) else checked
    if len(bounded):
        per_table = bounded.groupby(["table", "path"]).agg(rows=("GOP/s", "size"), highest=("roof_fraction", "max"),
                                                           slack=("slack", "first"), above=("above", "sum"))
        per_table["slack"] = per_table["slack"].map(lambda v: f"{v:.5f}")  # 1.0003 is not 1.00
        per_table["highest"] = per_table["highest"].map(lambda v: f"{v:.4f}")
        print(table(per_table.reset_index()))
        worst = bounded.sort_values("roof_fraction", ascending=False).head(5)
        print(table(worst, [c for c in ["table", "kernel", "method", "variant", "shape", "tile", "GOP/s", "path",
                                        "roof_GOPs", "roof_fraction", "slack"] if c in worst.columns]))
    for reason, group in excluded.groupby("excluded"):
        print(f"not bounded: {len(group)} rows ({', '.join(sorted(group['table'].astype(str).unique()))}): {reason}")
    goals_table = goals(out, roofs.values)
    if len(goals_table):
        print("\n== goals")
        print(table(goals_table))
    if png:
        from ..viz.roofline import folder_figure
        folder_figure(out, roofs.values, device=device_name or "").savefig(png, dpi=110)
        print(f"wrote {png}")
    failed = _copy_check_report(copy_checked)
    above = bounded[bounded["above"]] if len(bounded) else bounded
    if len(above):
        print(table(above, [c for c in ["table", "kernel", "variant", "shape", "tile", "GOP/s", "path", "roof_GOPs",
                                        "roof_fraction", "slack"] if c in above.columns]))
        print(f"ROOFLINE CHECK FAILED: {len(above)} of {len(bounded)} rows above their roof by more than its "
              f"probe's spread")
        return 1
    if failed:
        return 1
    print(f"roofline check passed: all {len(bounded)} bounded compute rows under their roofs within the probes' "
          f"spread ({len(excluded)} torch rows not bounded); no row faster than its copy")
    return 0


def _copy_check_report(checked) -> bool:
    """Print the copy check (`roof_check.check_copy_rows`): per table and regime, the highest copy_fraction and the
    rows above their copy; True when any row is above."""
    if not len(checked):
        return False
    print("\n== copy check: no row faster than the copy at its traffic in its cache regime, beyond both "
          "measurements' noise")
    kept = checked[checked["copy_excluded"].isna()]
    if len(kept):
        per = kept.groupby(["table", "cache"]).agg(rows=("copy_fraction", "size"),
                                                    highest=("copy_fraction", "max"), above=("above_copy", "sum"))
        per["highest"] = per["highest"].map(lambda v: f"{v:.3f}")
        print(table(per.reset_index()))
    for reason, group in checked[checked["copy_excluded"].notna()].groupby("copy_excluded"):
        print(f"not checked: {len(group)} rows ({', '.join(sorted(group['table'].astype(str).unique()))}): {reason}")
    above = kept[kept["above_copy"]]
    if not len(above):
        return False
    print(table(above.head(20), [c for c in ["table", "kernel", "impl", "variant", "shape", "group_size", "cache",
                                             "median_us", "copy_fraction", "copy_slack"] if c in above.columns]))
    print(f"COPY CHECK FAILED: {len(above)} of {len(kept)} rows faster than the copy at their traffic by more than "
          f"the two measurements' noise (re-measure them: `cache` cold where the working set fits the last-level "
          f"cache)")
    return True
