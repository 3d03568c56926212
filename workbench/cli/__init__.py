"""`workbench …` — the command line: one module per command family, each with `register(subparsers)` adding its
parsers (their handlers parse arguments and call plain functions); `main` runs one command, turning expected
failures (`common.expected_errors`) into one line and exit status 2 (WORKBENCH_TRACEBACK=1: the traceback instead),
and Ctrl-C into a report of the rows kept."""
from __future__ import annotations

import argparse
import os
import sys

from . import (ab, adreno, bench, capture, compilers, devices, etvk, fanout, isa, layout, main_job, phone, tune,
               validate)
from .common import RESULTS_DIRS, TRACEBACK_VAR, close_opened, error_line, expected_errors, interrupted

# In the order `workbench --help` lists them.
FAMILIES = (devices, bench, fanout, layout, main_job, compilers, adreno, isa, ab, etvk, capture, phone, validate, tune)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description="`workbench …` — the command line.",
                                     epilog="An expected failure prints one line and exits 2; "
                                            f"{TRACEBACK_VAR}=1 shows its whole message and traceback.")
    parser.add_argument("--device", default=None,
                        help="device index or name substring (default: WORKBENCH_DEVICE, else the first GPU, "
                             "else the CPU device)")
    sub = parser.add_subparsers(dest="command", required=True)
    for family in FAMILIES:
        family.register(sub)
    return parser


def main(argv=None) -> int:
    import time
    args = build_parser().parse_args(argv)
    since = time.time() - 1  # file mtimes have coarse resolution on some filesystems
    RESULTS_DIRS.clear()
    try:
        if os.environ.get("WORKBENCH_VALIDATION_LAYER", "").strip() == "built":  # the folder vk.Device takes
            from ..toolchain.validation import resolve_layer
            os.environ["WORKBENCH_VALIDATION_LAYER"] = resolve_layer("built")
        return args.fn(args)
    except KeyboardInterrupt:
        return interrupted(since)
    except Exception as exc:  # a clear one-line error, not a traceback, for expected failures
        if isinstance(exc, expected_errors()) and os.environ.get(TRACEBACK_VAR) != "1":
            print(error_line(exc), file=sys.stderr)
            return 2
        raise
    finally:
        close_opened()
