"""`workbench …` — the command line: one module per command family, each with `register(subparsers)` adding its
parsers (their handlers parse arguments and call plain functions); `main` runs one command, turning expected
failures into one line and exit status 2, and Ctrl-C into a report of the rows kept."""
from __future__ import annotations

import argparse
import sys

from . import adreno, bench, compilers, devices, etvk, fanout, layout, main_job, tune, validate
from .common import RESULTS_DIRS, close_opened, interrupted

# In the order `workbench --help` lists them.
FAMILIES = (devices, bench, fanout, layout, main_job, compilers, adreno, etvk, validate, tune)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description="`workbench …` — the command line.")
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
        return args.fn(args)
    except KeyboardInterrupt:
        return interrupted(since)
    except Exception as exc:  # a clear one-line error, not a traceback, for expected failures
        from ..etvk import UnknownKernelError
        from ..toolchain.shaders import ShaderCompileError
        from ..vk import VulkanError
        if isinstance(exc, (VulkanError, ShaderCompileError, ValueError, UnknownKernelError)):
            print(f"workbench: error: {exc}", file=sys.stderr)
            return 2
        raise
    finally:
        close_opened()
