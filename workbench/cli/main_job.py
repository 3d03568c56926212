"""`workbench main`: the main job — the device table, the copy roofline, then every notebook with its full
parameters (or every suite through the CLI, where there is no Jupyter); results per device."""
from __future__ import annotations

import sys

from .bench import roofline_check, run_suite
from .common import device, results_dir
from .devices import show_devices


def register(sub) -> None:
    p = sub.add_parser("main", help="the main job: devices, copy roofline, every notebook; results per device")
    p.add_argument("--out", help="results folder (default data/<device>/)")
    p.add_argument("--quick", action="store_true", help="notebooks with small sizes")
    p.add_argument("--notebooks", nargs="*", help="only notebooks whose name contains one of these")
    p.add_argument("--benchmarks", action="store_true",
                   help="run the benchmark suites through the CLI instead of the notebooks (no Jupyter needed)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", type=_param,
                   help="a notebook parameter (a Python literal, else a string), e.g. MODEL=refinenet_like; the "
                        "notebooks that do not declare NAME refuse it")
    p.set_defaults(fn=lambda args: main_job(device(args), args.out, quick=args.quick, notebooks=args.notebooks,
                                            benchmarks=args.benchmarks, selector=args.device,
                                            parameters=dict(args.param)))


def _param(text: str) -> tuple:
    import argparse
    import ast
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE with NAME a Python name, got {text!r}")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def main_job(dev, out=None, *, quick: bool = False, notebooks=None, benchmarks: bool = False, selector=None,
             parameters: dict | None = None) -> int:
    from .. import notebook
    from ..benchmarks import SUITES
    if not benchmarks:
        try:
            notebook.check_parameters(notebooks, parameters)
        except ValueError as e:
            print(f"main: {e}", file=sys.stderr)
            return 2
    out = results_dir(out, dev)
    out.mkdir(parents=True, exist_ok=True)
    print(f"== devices (results go to {out})")
    show_devices(selector)
    print("\n== copy roofline")
    run_suite(dev, "copy", out, quick=quick)
    if benchmarks:  # where Jupyter is not installed: the suites the notebooks run, through the CLI
        for suite in [name for name in SUITES if name != "copy"]:
            print(f"\n== bench {suite}")
            run_suite(dev, suite, out, quick=quick)
        return roofline_check(out)
    dev.close()  # notebooks open their own device in their kernels
    print("\n== notebooks")
    summary = notebook.run_all(out, full=not quick, selection=notebooks, parameters=parameters)
    print("\n== summary")
    for row in summary:
        print(f"{row['notebook']:<32} {row['status']:<10} {row['seconds']:>7.1f} s  wrote {len(row['files'])} files")
        for name in row["files"]:
            print(f"    {name}")
    print(f"executed notebooks in {out / 'notebooks'}")
    failed = [r for r in summary if r["status"] != "ok"]
    return 1 if failed else 0
