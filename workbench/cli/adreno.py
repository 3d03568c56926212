"""`workbench adreno …`: Adreno statistics without a phone (Turnip on the freedreno drm-shim, `workbench.adreno`),
and `adreno conv`, the pointwise conv's tiles compiled by Turnip (`workbench.benchmarks.conv`)."""
from __future__ import annotations

import json
import sys

from .. import adreno
from ..adreno import DEFAULT_GPU, MESA_VERSION, SUPPORTED_GPUS


def register(subparsers) -> None:
    p = subparsers.add_parser("adreno", help="Adreno statistics without a phone (Turnip on the freedreno drm-shim)")
    sub = p.add_subparsers(dest="adreno_command", required=True)
    s = sub.add_parser("setup", help=f"fetch and build Mesa {MESA_VERSION} Turnip + drm-shim once (~5 min), cached")
    s.add_argument("--dir", default=None, help="cache folder (default $WORKBENCH_ADRENO_DIR or "
                                               f"~/.cache/workbench/adreno/mesa-{MESA_VERSION})")
    s.add_argument("--force", action="store_true", help="rebuild even when the cache is complete")
    s.add_argument("--jobs", "-j", type=int, default=None, help="ninja jobs (default: CPU count)")
    s.add_argument("--keep-build", action="store_true",
                   help="keep venv/, src/ and build/ (about 450 MB) for rebuilds and debugging")
    s.add_argument("--no-install", action="store_true",
                   help="do not apt-get install missing prerequisites (fail and name them)")
    s.add_argument("--quiet", action="store_true", help="no progress output")
    s.set_defaults(fn=setup)
    s = sub.add_parser("status", help="is the Adreno build set up, where, built when")
    s.add_argument("--dir", default=None)
    s.set_defaults(fn=status)
    s = sub.add_parser("stats", help="every Turnip statistic of shaders (names in shaders/, .glsl or .spv files)")
    s.add_argument("shaders", nargs="+")
    s.add_argument("--gpu", default=str(DEFAULT_GPU), help=f"one of {', '.join(map(str, SUPPORTED_GPUS))}, or "
                                                           "several comma-separated")
    s.add_argument("--define", "-D", action="append", default=[], help="NAME=VALUE (repeatable)")
    s.add_argument("--spec", action="append", default=[], help="ID=VALUE specialization constant (repeatable)")
    s.add_argument("--local-size", default=None, help="X[,Y,Z]")
    s.add_argument("--dir", default=None)
    s.set_defaults(fn=stats)
    s = sub.add_parser("check", help="occupancy.adreno_occupancy vs Turnip on synthetic shaders")
    s.add_argument("--registers", default="4,8,12,16,20,24,28,32,40,48", help="live vec4 counts, comma-separated")
    s.add_argument("--gpu", default=str(DEFAULT_GPU))
    s.add_argument("--local-size", default="64")
    s.add_argument("--dir", default=None)
    s.set_defaults(fn=check)
    s = sub.add_parser("conv", help="q8ta_conv2d_pw tiles compiled by Turnip (Mesa's ir3): "
                                    "registers, waves, spills")
    s.add_argument("--tiles", default=None, help="M,N4,K4 triples separated by ';' (default: all 27)")
    s.add_argument("--gpu", default=str(DEFAULT_GPU))
    s.add_argument("--dir", default=None)
    s.set_defaults(fn=conv)


def _reported(command: str, run) -> int:
    """Run `run()` with wide tables; an AdrenoError becomes one line naming the command, exit status 1."""
    import pandas as pd
    try:
        with pd.option_context("display.max_columns", None, "display.width", 220):
            return run()
    except adreno.AdrenoError as exc:
        print(f"workbench {command}: error: {exc}", file=sys.stderr)
        return 1


def _number(text: str):
    text = text.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text, 0) if kind is int else kind(text)
        except ValueError:
            pass
    return text


def setup(args) -> int:
    def run():
        adreno.setup(args.dir, force=args.force, jobs=args.jobs, keep_build=args.keep_build,
                     install_prerequisites=not args.no_install, progress=not args.quiet)
        return 0
    return _reported("adreno", run)


def status(args) -> int:
    def run():
        print(json.dumps(adreno.status(args.dir), indent=2))
        return 0 if adreno.is_set_up(args.dir) else 1
    return _reported("adreno", run)


def stats(args) -> int:
    def run():
        gpus = [adreno.check_gpu(g) for g in args.gpu.split(",")]
        defines = dict(d.split("=", 1) if "=" in d else (d, "1") for d in args.define)
        spec = {int(k): _number(v) for k, v in (s.split("=", 1) for s in args.spec)}
        local = [int(v) for v in args.local_size.split(",")] if args.local_size else None
        df = adreno.stats_rows(args.shaders, gpus, root=args.dir, defines=defines or None, spec_constants=spec,
                               local_size=local)
        for _, row in df.iterrows():
            print(f"== {row['name']} on {row['device']} (local size {row['local_size']})")
            for key, value in row.items():
                if key not in ("name", "device", "local_size") and not (isinstance(value, float)
                                                                     and value != value):
                    print(f"  {key:<36} {value}")
        return 0
    return _reported("adreno", run)


def check(args) -> int:
    def run():
        counts = [int(v) for v in args.registers.split(",")]
        local = tuple(int(v) for v in args.local_size.split(","))
        df = adreno.check_occupancy_model(counts, args.gpu, local, root=args.dir)
        print(df.to_string(index=False))
        return 0 if df["agree"].all() else 1
    return _reported("adreno", run)


def conv(args) -> int:
    def run():
        from ..benchmarks.conv import conv_pw_adreno_table
        tiles = None if not args.tiles else [tuple(int(v) for v in t.split(",")) for t in args.tiles.split(";")]
        print(conv_pw_adreno_table(tiles, args.gpu, root=args.dir).to_string(index=False))
        return 0
    return _reported("adreno conv", run)
