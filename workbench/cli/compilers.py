"""`workbench compilers …`: four vendors' shader compilers without their GPUs (Mesa's Turnip, PanVK and RADV on
no-op kernel drivers, `workbench.vendors.mesa`), and the pointwise conv's tiles across them
(`workbench.benchmarks.conv_vendors`). `workbench adreno …` (cli/adreno.py) is the same set with Adreno defaults."""
from __future__ import annotations

import json
import sys

from ..vendors import mesa
from ..vendors.mesa import DEFAULT_GPU, DEFAULT_GPUS, MESA_VERSION


def register(subparsers) -> None:
    p = subparsers.add_parser("compilers", help="Adreno, Mali and AMD shader statistics without the GPUs "
                                                "(Mesa's Turnip, PanVK, RADV on no-op kernel drivers)")
    add_commands(p, "compilers", default_gpu=",".join(DEFAULT_GPUS))
    sub = p._subparsers._group_actions[0]
    s = sub.add_parser("gpus", help="the GPU names --gpu takes, with their driver and the chip variables")
    s.set_defaults(fn=gpus)
    s = sub.add_parser("tiles", help="q8ta_conv2d_pw tiles on every vendor: registers, occupancy, the winner")
    s.add_argument("--tiles", default=None, help="M,N4,K4 triples separated by ';' (default: all 27)")
    s.add_argument("--gpu", default=",".join(DEFAULT_GPUS))
    s.add_argument("--dir", default=None)
    s.add_argument("--png", default=None, help="draw the chart into this PNG")
    s.add_argument("--timeout", type=float, default=None, help="seconds one tile may take to compile (default "
                                                               f"{mesa.SHADER_TIMEOUT_S:g})")
    s.add_argument("--csv", default=None, help="also write the table to this CSV file")
    s.set_defaults(fn=tiles)


def add_commands(p, family: str, *, default_gpu: str) -> None:
    """setup, status, stats, check, conv under the parser `p` (`workbench compilers` or `workbench adreno`)."""
    sub = p.add_subparsers(dest=f"{family}_command", required=True)
    s = sub.add_parser("setup", help=f"fetch and build Mesa {MESA_VERSION} Turnip + PanVK + RADV + drm-shims once "
                                     "(~10 min on 2 cores), cached")
    s.add_argument("--dir", default=None, help="cache folder (default $WORKBENCH_MESA_DIR or "
                                               f"~/.cache/workbench/mesa/mesa-{MESA_VERSION})")
    s.add_argument("--force", action="store_true", help="rebuild even when the cache is complete")
    s.add_argument("--jobs", "-j", type=int, default=None, help="ninja jobs (default: CPU count)")
    s.add_argument("--keep-build", action="store_true",
                   help="keep venv/, src/, deps/ and build/ (about 1 GB) for rebuilds and debugging")
    s.add_argument("--no-install", action="store_true",
                   help="do not apt-get install missing prerequisites (fail and name them)")
    s.add_argument("--quiet", action="store_true", help="no progress output")
    s.add_argument("--mesa", default=None, metavar="SOURCE",
                   help="build the newer Mesa instead (Turnip + PanVK for Adreno 8xx and 5th-gen Mali: "
                        "workbench.vendors.mesa_newer) from SOURCE: a Mesa checkout, a release tarball or a git "
                        "directory[@commit] (tested: 26.2.0-rc1); cache $WORKBENCH_MESA_NEWER_DIR or "
                        "~/.cache/workbench/mesa/mesa-newer")
    s.add_argument("--mesa-drivers", default="turnip,panvk",
                   help="with --mesa: turnip,panvk (default; PanVK needs LLVM 15 and SPIRV-Tools, built first) or "
                        "turnip (Adreno 8xx only, no LLVM, about half the build)")
    s.set_defaults(fn=setup, family=family)
    s = sub.add_parser("status", help="is the Mesa build set up, where, built when")
    s.add_argument("--dir", default=None)
    s.add_argument("--newer", action="store_true", help="the newer Mesa's build (setup --mesa) instead")
    s.set_defaults(fn=status, family=family)
    s = sub.add_parser("stats", help="every statistic of shaders (names in shaders/, .glsl or .spv files) per GPU")
    s.add_argument("shaders", nargs="+")
    s.add_argument("--gpu", default=default_gpu,
                   help="GPU names, comma-separated: " + ", ".join(mesa.GPUS) + " (aliases: 740, g610, navi21, "
                        "gfx1030, gfx1100, ...)")
    s.add_argument("--define", "-D", action="append", default=[], help="NAME=VALUE (repeatable)")
    s.add_argument("--spec", action="append", default=[], help="ID=VALUE specialization constant (repeatable)")
    s.add_argument("--local-size", default=None, help="X[,Y,Z]")
    s.add_argument("--dir", default=None)
    s.set_defaults(fn=stats, family=family)
    s = sub.add_parser("check", help="the occupancy model (adreno / amd / mali) vs the compiler, synthetic shaders")
    s.add_argument("--registers", default="4,8,12,16,20,24,28,32,40,48", help="live vec4 counts, comma-separated")
    s.add_argument("--gpu", default=DEFAULT_GPU if family == "adreno" else "a740,mali-g610,mali-g52,rdna2,rdna3")
    s.add_argument("--local-size", default="64")
    s.add_argument("--dir", default=None)
    s.set_defaults(fn=check, family=family)
    s = sub.add_parser("conv", help="q8ta_conv2d_pw tiles compiled by Turnip (Mesa's ir3) for one Adreno: "
                                    "registers, waves, spills")
    s.add_argument("--tiles", default=None, help="M,N4,K4 triples separated by ';' (default: all 27)")
    s.add_argument("--gpu", default=DEFAULT_GPU)
    s.add_argument("--dir", default=None)
    s.set_defaults(fn=conv, family=family)


def _reported(command: str, run) -> int:
    """Run `run()` with wide tables; a MesaError becomes one line naming the command, exit status 1."""
    import pandas as pd
    try:
        with pd.option_context("display.max_columns", None, "display.width", 220):
            return run()
    except mesa.MesaError as exc:
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


def _gpus(text: str) -> list:
    return [mesa.check_gpu(g) for g in text.split(",") if g.strip()]


def setup(args) -> int:
    def run():
        if getattr(args, "mesa", None) is not None:
            from ..vendors import mesa_newer
            try:
                mesa_newer.setup(args.mesa, args.dir, drivers=args.mesa_drivers, force=args.force, jobs=args.jobs,
                                 keep_build=args.keep_build, install_prerequisites=not args.no_install,
                                 progress=not args.quiet)
            except ValueError as exc:  # not a Mesa source: one line
                raise mesa.MesaSetupError("source", str(exc)) from None
            return 0
        mesa.setup(args.dir, force=args.force, jobs=args.jobs, keep_build=args.keep_build,
                   install_prerequisites=not args.no_install, progress=not args.quiet)
        return 0
    return _reported(args.family, run)


def status(args) -> int:
    def run():
        build = "newer" if getattr(args, "newer", False) else "stable"
        print(json.dumps(mesa.status(args.dir, build), indent=2))
        return 0 if mesa.is_set_up(args.dir, build) else 1
    return _reported(args.family, run)


def gpus(args) -> int:
    for g in mesa.GPUS.values():
        where = "unreachable" if g.note else g.build + ("" if mesa.is_set_up(build=g.build) else " (not built)")
        print(f"{g.name:<14} {g.vendor:<7} {mesa.DRIVER_TITLES[g.driver]:<24} {g.arch:<20} {where:<18} "
              f"{' '.join(f'{k}={v}' for k, v in g.env)}   aliases: {', '.join(g.aliases)}")
    return 0


def stats(args) -> int:
    def run():
        gpus = _gpus(args.gpu)
        defines = dict(d.split("=", 1) if "=" in d else (d, "1") for d in args.define)
        spec = {int(k): _number(v) for k, v in (s.split("=", 1) for s in args.spec)}
        local = [int(v) for v in args.local_size.split(",")] if args.local_size else None
        df = mesa.stats_rows(args.shaders, gpus, root=args.dir, defines=defines or None, spec_constants=spec,
                             local_size=local, errors="keep")
        for _, row in df.iterrows():
            print(f"== {row['name']} on {row['gpu']}: {row['device']} (local size {row['local_size']})")
            for key, value in row.items():
                if key not in ("name", "device", "local_size", "gpu") and not (isinstance(value, float)
                                                                            and value != value) and value is not None:
                    print(f"  {key:<36} {value}")
        return 0 if "error" not in df or df["error"].isna().all() else 1
    return _reported(args.family, run)


def check(args) -> int:
    def run():
        counts = [int(v) for v in args.registers.split(",")]
        local = tuple(int(v) for v in args.local_size.split(","))
        ok = True
        for g in _gpus(args.gpu):
            df = mesa.check_occupancy_model(counts, g, local, root=args.dir)
            print(f"== {g.name} ({mesa.DRIVER_TITLES[g.driver]})")
            print(df.drop(columns=["gpu", "vendor", "local_size"]).to_string(index=False))
            ok = ok and bool(df["agree"].all())
        return 0 if ok else 1
    return _reported(f"{args.family} check", run)


def conv(args) -> int:
    def run():
        from ..benchmarks.conv import conv_pw_adreno_table
        tiles = None if not args.tiles else [tuple(int(v) for v in t.split(",")) for t in args.tiles.split(";")]
        print(conv_pw_adreno_table(tiles, args.gpu, root=args.dir).to_string(index=False))
        return 0
    return _reported(f"{args.family} conv", run)


def tiles(args) -> int:
    def run():
        from ..benchmarks.conv_vendors import conv_pw_vendor_tiles, vendor_tile_winners
        tiles = None if not args.tiles else [tuple(int(v) for v in t.split(",")) for t in args.tiles.split(";")]
        df = conv_pw_vendor_tiles(tiles, [g.name for g in _gpus(args.gpu)], root=args.dir, timeout=args.timeout)
        if args.csv:
            df.to_csv(args.csv, index=False)
        cols = [c for c in ("gpu", "tile", "registers", "register_unit", "waves", "max_waves", "occupancy",
                            "spills", "instructions", "error") if c in df]
        print(df[cols].to_string(index=False))
        print()
        print(vendor_tile_winners(df).to_string(index=False))
        if args.png:
            from ..viz.vendor_tiles import vendor_tiles_figure
            vendor_tiles_figure(df).savefig(args.png, dpi=110, bbox_inches="tight")
            print(f"wrote {args.png}")
        return 0
    return _reported("compilers tiles", run)
