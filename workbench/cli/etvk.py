"""`workbench etvk list | stats | run | diff | compile-all | check | bench | lint | shake` — ET-VK's own kernels from a checkout;
`build | profile | explorer` (models on ET-VK's own runtime) are in ``cli.etvk_model``."""
from __future__ import annotations

import sys
from pathlib import Path

from .common import add_validation_flags, parse_defines, quick_writer, report_validation
from .common import device as chosen_device

EPILOG = ("The checkout: --executorch PATH or $WORKBENCH_EXECUTORCH (a clone of pytorch/executorch; only "
          "backends/vulkan is read, and --rev reads a revision with git archive, leaving the working tree alone).")


def _sizes(text: str) -> tuple:
    try:
        values = tuple(int(v) for v in text.replace("x", ",").split(","))
    except ValueError:
        raise ValueError(f"--shape takes integers separated by commas (e.g. 1,64,32,32 or 12,64), got {text!r}") \
            from None
    if min(values) < 1:
        raise ValueError(f"--shape takes sizes >= 1, got {text!r}")
    return values


def _shape(kernel: str, values: tuple) -> tuple:
    """`values` checked against the form `kernel` takes (N,C,H,W, or a linear's [..., M, K])."""
    from ..etvk.families import shape_form
    fewest, form = shape_form(kernel)
    if len(values) < fewest or (fewest == 4 and len(values) != 4):
        raise ValueError(f"{kernel} takes --shape {form}, got {len(values)} sizes: {','.join(map(str, values))}")
    return values


def for_family(kernel: str, options: dict) -> dict:
    """The command line's options for `kernel`: refused in one line, naming the options it takes, where it does not
    take one of them (a family declares its options by its make function's signature)."""
    from ..etvk import UnknownKernelError, kernel_names
    from ..etvk.families import KERNELS, takes
    if kernel not in KERNELS:
        raise UnknownKernelError(f"no ET-VK kernel {kernel!r} in the workbench; known: {', '.join(kernel_names())}")
    flag = lambda name: "--" + name.replace("_", "-")  # noqa: E731
    accepted = takes(kernel)
    refused = [flag(k) for k in options if k not in accepted]
    if refused:
        offered = [flag(k) for k in accepted if k in FAMILY_OPTIONS]
        raise ValueError(f"{kernel} does not take {', '.join(refused)}; it takes {', '.join(offered) or 'none'}")
    return {**options, "shape": _shape(kernel, options["shape"])} if "shape" in options else dict(options)


def _print(df, csv: str | None) -> None:
    import pandas as pd
    with pd.option_context("display.max_columns", None, "display.width", 220, "display.max_colwidth", 40):
        print(df.to_string(index=False))
    if csv:
        Path(csv).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(csv, index=False)
        print(f"wrote {csv}")


def cmd_list(args) -> int:
    import pandas as pd

    from ..etvk import Codegen, source
    from ..etvk.families import KERNELS
    gen = Codegen(source(args.executorch, rev=args.rev))
    rows = [{"variant": name, "template": path.name,
             # the template's own family, else the longest family name the variant starts with
             # (q8ta_conv2d_dw_float is q8ta_conv2d_dw's, not q8ta_conv2d's)
             "runs_here_as": max((k for k in KERNELS if name.startswith(k) or path.stem == k),
                                 key=lambda k: (path.stem == k, len(k)), default="")}
            for name, path in gen.variants().items()
            if not args.match or any(m in name for m in args.match)]
    print(f"{len(rows)} shader variants in {gen.source.glsl_dir} ({gen.source.label}; generator: "
          f"{gen.source.generator_origin}'s gen_vulkan_spv.py)")
    _print(pd.DataFrame(rows), args.csv)
    return 0


# the options `kernel_options` adds, each named as its family's make function names it (--out-features: out_features)
FAMILY_OPTIONS = ("shape", "out_channels", "out_features", "group_size", "in_layout", "out_layout", "layout",
                  "storage", "r", "op", "fallback", "requantize", "relu", "kernel_size", "stride", "padding",
                  "dilation", "output_padding", "groups")


def _options(args) -> dict:
    """The family options given on the command line (absent ones left out: each family keeps its defaults)."""
    opts = {}
    if getattr(args, "shape", None):
        opts["shape"] = _sizes(args.shape)
    for key in ("out_channels", "out_features", "group_size", "in_layout", "out_layout", "storage", "layout", "r",
                "op", "groups"):
        value = getattr(args, key, None)
        if value is not None:
            opts[key] = value
    for key in ("kernel_size", "stride", "padding", "dilation", "output_padding"):
        value = getattr(args, key, None)
        if value is not None:
            try:
                pair = tuple(int(v) for v in value.split(","))
            except ValueError:
                raise ValueError(f"--{key.replace('_', '-')} takes N or H,W integers, got {value!r}") from None
            opts[key] = pair[0] if len(pair) == 1 else pair
    for flag in ("fallback", "requantize", "relu"):
        if getattr(args, flag, False):
            opts[flag] = True
    return opts


def cmd_run(args) -> int:
    import pandas as pd

    from ..etvk import Codegen, run, source
    options = {name: for_family(name, _options(args)) for name in args.kernels}  # every refusal before any run
    device = chosen_device(args)
    gen = Codegen(source(args.executorch, rev=args.rev))
    reports: list = []
    rows = [run(device, gen, name, statistics=True, reports=reports, **options[name]) for name in args.kernels]
    df = pd.DataFrame(rows)
    columns = [c for c in ("kernel", "variant", "shape", "correct", "max_abs_diff", "median_us", "p10_us", "p90_us",
                           "GB/s", "GOP/s", "registers", "global_size", "local_size", "device") if c in df]
    _print(df[columns], None)
    _mismatch_outputs(rows, reports, getattr(args, "map", False), getattr(args, "png", None))
    if args.csv:
        df.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    status = 0 if df["correct"].all() else 1
    return _with_validation(device, args, status)


def _with_validation(device, args, status: int) -> int:
    """With --validate: print what the layer said (and the printf lines); a message makes the command fail."""
    if getattr(args, "validate", None) is None:
        return status
    return 1 if report_validation(device, args) and status == 0 else status


def _mismatch_outputs(rows, reports, show_map: bool, png: str | None) -> None:
    """`etvk run --map`: the text grid of each row whose output differs; `--png PATH`: their figures (one PNG;
    with several wrong rows, PATH's stem gets the row's number)."""
    wrong = [(i, row, rep) for i, (row, rep) in enumerate(zip(rows, reports)) if not rep.exact]
    for i, row, rep in wrong:
        if show_map:
            print(f"\n{row.get('variant', row.get('kernel'))}: {rep.text_grid()}")
    if png:
        from ..viz.mismatch_views import plot_mismatch
        from ..viz.tile_views import figure_png
        targets = wrong or [(i, row, rep) for i, (row, rep) in enumerate(zip(rows, reports))][:1]
        for i, row, rep in targets:
            path = Path(png) if len(targets) == 1 else Path(png).with_name(f"{Path(png).stem}_{i}{Path(png).suffix}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(figure_png(plot_mismatch(rep, title=f"{row.get('variant')}: {rep.summary()[:90]}")))
            print(f"wrote {path}")


def _split(names) -> tuple[list, list]:
    """(shader files, checkout names) among the command line's names: a name ending in .spv / .glsl / .comp, or an
    existing file, is a file."""
    from .common import is_shader_file
    files = [n for n in names if is_shader_file(n)]
    return files, [n for n in names if n not in files]


class ShaderFiles:
    """Shader files where a checkout's Codegen would be (what `etvk.stats_rows` asks of one: `compile(name)` and
    `source.label`), each with the dispatch facts a bare file has: no specialization constants, its own local size
    (64 where the shader leaves it to specialization constants)."""

    def __init__(self, paths, defines: dict):
        from types import SimpleNamespace

        from .common import shader_file
        from ..vk.spirv import reflect
        self.spirv = {str(p): shader_file(p, defines) for p in paths}
        self.source = SimpleNamespace(label="file")
        self.dispatches = {name: SimpleNamespace(spec_constants={}, local_size=reflect(s.code).local_size or (64, 1, 1))
                           for name, s in self.spirv.items()}

    def compile(self, name: str):
        return self.spirv[name]


def cmd_stats(args) -> int:
    import pandas as pd

    from ..etvk import Codegen, make, source, stats_rows
    from ..etvk.families import KERNELS
    files, names = _split(args.names)
    options = _options(args)
    families = [n for n in names if n in KERNELS]
    if options and not families:
        raise ValueError(f"etvk stats: {', '.join(sorted(options))} set a family's dispatch; none of "
                         f"{', '.join(args.names)} is a family ({', '.join(sorted(KERNELS))})")
    per_family = {name: for_family(name, options) for name in families}
    shown = ShaderFiles(files, parse_defines(args.defines)) if files else None
    device = chosen_device(args)
    gpus = tuple(g for g in (args.gpu or "").split(",") if g.strip())
    frames = []
    if shown is not None:
        frames.append(stats_rows(device, shown, list(shown.spirv), gpus=gpus, dispatches=shown.dispatches))
    if names:
        gen = Codegen(source(args.executorch, rev=args.rev))
        variants, dispatches = [], {}
        for name in names:  # an op name (its default variant and dispatch) or a variant name
            if name in KERNELS:
                d = make(gen, name, **per_family[name])
                variants.append(d.variant)
                dispatches[d.variant] = d
            else:
                gen.expand(name)  # an unknown name fails here, naming the close ones
                variants.append(name)
        frames.append(stats_rows(device, gen, variants, gpus=gpus, dispatches=dispatches))
    df = pd.concat(frames, ignore_index=True)
    if args.all:
        _print(df, args.csv)
    else:  # the common columns: every driver's own statistics make hundreds (--all, or --csv keeps them)
        shown_columns = [c for c in STATS_COLUMNS if c in df]
        _print(df[shown_columns], None)
        if args.csv:
            _print_csv(df, args.csv)
    return 0


# `etvk stats`'s table: one row per variant and compiler; `error` says why a row has no figures.
STATS_COLUMNS = ("variant", "gpu", "compiler", "registers", "register_unit", "spills", "instructions", "waves",
                 "max_waves", "occupancy", "model_waves", "error")


def _print_csv(df, csv: str) -> None:
    Path(csv).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(csv, index=False)
    print(f"wrote {csv} (every statistic of every compiler)")


def cmd_diff(args) -> int:
    from ..etvk import diff
    if len(args.rev) != 2:
        raise ValueError(f"diff takes exactly two --rev (A and B), got {len(args.rev)}")
    device = chosen_device(args)
    gpus = tuple(g for g in (args.gpu or "").split(",") if g.strip())
    kernels = [(name, for_family(name, _options(args))) for name in args.kernels]
    df = diff(device, args.executorch, args.rev[0], args.rev[1], kernels, gpus=gpus, measure=not args.no_time)
    _print(df, args.csv)
    return 0


def cmd_bench(args) -> int:
    from .. import measure
    from ..measure import QUICK_NOTE
    from ..benchmarks.etvk_suite import bench_suite
    device = chosen_device(args)
    out = Path(args.out) if args.out else measure.default_results_dir(device)
    if args.quick:
        print(QUICK_NOTE)
    metadata = {**measure.environment(device), **({"quick": True, "note": QUICK_NOTE} if args.quick else {})}
    with measure.ResultsWriter(out / "etvk", metadata) as writer:
        df = bench_suite(device, quick_writer(writer) if args.quick else writer, executorch=args.executorch,
                         quick=args.quick)
    columns = [c for c in ("impl", "kernel", "variant", "source", "shape", "in_layout", "out_layout", "path",
                           "local_size", "median_us", "GB/s", "GOP/s", "copy_fraction", "registers", "etvk_over_this")
               if c in df]
    _print(df[columns], None)
    print(f"wrote {out / 'etvk'}.csv/.parquet/.json")
    if args.quick:
        print(QUICK_NOTE)
    return 0


def cmd_compile_all(args) -> int:
    import time

    from ..etvk import Codegen, source
    from ..etvk.compile_all import compile_all, summary
    gen = Codegen(source(args.executorch, rev=args.rev))
    names = [n for n in gen.variants() if not args.match or any(m in n for m in args.match)]
    start = time.perf_counter()
    df = compile_all(gen, names, jobs=args.jobs, show_progress=not args.quiet)
    failed = df[~df["ok"]]
    if len(failed):
        _print(failed[["variant", "error_at", "error"]], None)
    if args.csv:
        df.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    print(summary(df) + f"; {time.perf_counter() - start:.0f} s wall")
    return 0 if df["ok"].all() else 1


def cmd_check(args) -> int:
    from ..etvk.checks import check_names as check
    report = check(args.executorch, rev=args.rev)
    for title, frame in (("missing: no variant has these names", report.missing),
                         ("unresolved: names built from run-time values (what is known of them)", report.unresolved),
                         ("templates no name of the C++ reaches", report.unrequested)):
        if len(frame):
            print(f"== {title}")
            _print(frame, None)
    if args.csv:
        report.names.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    print(report.summary())
    return 1 if len(report.missing) else 0


def cmd_lint(args) -> int:
    import pandas as pd

    from ..checks.lint import COLUMNS, lint_spirv
    files, names = _split(args.variant)
    if not args.variant and not args.all and not args.interfaces:
        raise ValueError("etvk lint: expected shader files (.glsl, .spv), VARIANT names, --all or --interfaces, "
                         "got none of them")
    frames, attrs = [], {"variants": 0, "seconds": 0.0}
    if files:  # no checkout needed: each file compiled (GLSL) or read (SPIR-V), then linted
        import time
        start = time.perf_counter()
        shown = ShaderFiles(files, parse_defines(args.defines))
        rows = [row for name, spirv in shown.spirv.items() for row in lint_spirv(spirv.code, name)]
        frames.append(pd.DataFrame(rows, columns=list(COLUMNS)))
        attrs = {"variants": len(files), "seconds": time.perf_counter() - start}
    if names or args.all or args.interfaces:
        from ..etvk import Codegen, source
        from ..etvk.checks import lint
        gen = Codegen(source(args.executorch, rev=args.rev))
        if names or args.all:
            linted = lint(gen, None if args.all else names, jobs=args.jobs, show_progress=not args.quiet)
            frames.append(linted)
            attrs = {k: attrs[k] + linted.attrs[k] for k in attrs}
        if args.interfaces:  # push-constant / UBO ranges against the bytes the workbench's ET-VK dispatches supply
            from ..etvk.checks import check_families
            found = check_families(gen)
            frames.append(pd.DataFrame(found, columns=list(COLUMNS)))
            print(f"interfaces: {len(found)} push-constant / UBO range finding(s) over the families' dispatches")
    df = pd.concat([f for f in frames if len(f)] or [pd.DataFrame(columns=list(COLUMNS))], ignore_index=True)
    _print(df, args.csv)
    counts = df.groupby("check").size().to_dict() if len(df) else {}
    print(f"{attrs['variants']} variants linted in {attrs['seconds']:.1f} s; findings: {counts}")
    return 1 if (df["severity"] == "error").any() else 0


def cmd_shake(args) -> int:
    from ..etvk.shake import bare_dispatch, parse_local_sizes, shake, shake_dispatch
    from .common import is_shader_file
    local_sizes = parse_local_sizes(args.local_size)
    if is_shader_file(args.kernel):
        if args.shape:
            raise ValueError(f"etvk shake {args.kernel}: a bare shader takes --size N (elements per buffer), "
                             "not --shape (a family's)")
        shown = ShaderFiles([args.kernel], parse_defines(args.defines))
        spirv = shown.spirv[str(args.kernel)]
        d = bare_dispatch(spirv, 64 if args.size is None else args.size,
                          output=0 if args.output is None else args.output, name=str(args.kernel))
        device = chosen_device(args)
        df = shake_dispatch(device, shown, d, runs=args.runs, local_sizes=local_sizes or _own_local_size(spirv),
                            stress=args.stress)
    else:
        from ..etvk import Codegen, source
        for name, flag in (("size", "--size"), ("output", "--output")):
            if getattr(args, name) is not None:
                raise ValueError(f"etvk shake {args.kernel}: {flag} is for a bare shader file; a family takes --shape")
        options = for_family(args.kernel, {"shape": _sizes(args.shape)} if args.shape else {})
        gen = Codegen(source(args.executorch, rev=args.rev))
        device = chosen_device(args)
        df = shake(device, gen, args.kernel, runs=args.runs, local_sizes=local_sizes, stress=args.stress, **options)
    _print(df.drop(columns=["wrong"]), args.csv)
    _shake_union_maps(df)
    return _with_validation(device, args, 1 if (df["bad_runs"] > 0).any() else 0)


def _own_local_size(spirv) -> list | None:
    """A shader that fixes its local size runs at that one only (None: the sweep, through specialization)."""
    from ..vk.spirv import reflect
    r = reflect(spirv.code)
    return [r.local_size] if r.local_size and not r.local_size_from_spec else None


def _shake_union_maps(df) -> None:
    """The union of wrong elements over a local size's runs, as a mismatch map's text grid."""
    from ..checks.mismatch import mismatch_report
    for _, row in df[df["wrong_count"] > 0].iterrows():
        wrong = row["wrong"].numpy().astype("int8")
        report = mismatch_report(wrong, wrong * 0)
        print(f"\nlocal size {row['local_size']}: union of wrong elements over {row['runs']} runs "
              f"(runs {row['bad_run_ids']} bad):\n{report.text_grid()}")


def register(sub) -> None:
    from ..vendors.mesa import gpu_names as mesa_gpu_names
    from ..etvk.run import VENDOR_GPUS, kernel_names
    etvk = sub.add_parser("etvk", help="ET-VK's own kernels from an ExecuTorch checkout", epilog=EPILOG)
    verbs = etvk.add_subparsers(dest="verb", required=True)

    def common(p, rev=True):
        p.add_argument("--executorch", help="ExecuTorch checkout (default: $WORKBENCH_EXECUTORCH)")
        if rev:
            p.add_argument("--rev", help="a git revision of the checkout (default: its working tree)")
        p.add_argument("--csv", help="also write the table to this CSV file")

    def defines(p):
        p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                       help="a define for .glsl files (repeatable)")

    def kernel_options(p):
        p.add_argument("--shape", help="the input: N,C,H,W for the convolutions and element-wise ops; M,K (or any "
                                        "[..., M, K]) for the linears")
        p.add_argument("--out-channels", type=int, help="the convolutions: output channels")
        p.add_argument("--out-features", type=int, help="the linears: N, the output features")
        p.add_argument("--group-size", type=int, help="the 4-bit linears: input channels per weight scale")
        p.add_argument("--in-layout", help="int8 / float input layout (4W4C, 4C1W, 4C, WIDTH_PACKED, …)")
        p.add_argument("--out-layout", help="output layout")
        p.add_argument("--layout", help="pixel_shuffle: the float layout (CHANNELS_PACKED, WIDTH_PACKED, …)")
        p.add_argument("--storage", choices=["buffer", "texture3d"], help="float tensors' storage")
        p.add_argument("--r", type=int, help="pixel_shuffle: upscale factor")
        p.add_argument("--op", help="q8ta_binary / q8ta_unary: the op (add; relu)")
        p.add_argument("--fallback", action="store_true", help="q8ta_conv2d_pw: the variant without dot products")
        p.add_argument("--requantize", action="store_true", help="q8ta_pixel_shuffle: different output qparams")
        p.add_argument("--relu", action="store_true", help="q8ta_conv2d_pw: fused ReLU")
        for name in ("kernel-size", "stride", "padding", "dilation", "output-padding"):
            p.add_argument(f"--{name}", help=f"q8ta_conv2d, _dw, _transposed, _im2col: the {name.replace('-', ' ')} "
                                             f"(N or H,W)")
        p.add_argument("--groups", type=int, help="q8ta_conv2d, _transposed, _im2col: groups")

    p = verbs.add_parser("list", help="the shader variants of a checkout")
    common(p)
    p.add_argument("match", nargs="*", help="only variants containing one of these")
    p.set_defaults(fn=cmd_list)
    p = verbs.add_parser("stats", help="driver statistics (live device) and the offline compilers' (Adreno, Mali, "
                                       "AMD) of families, variants or shader files",
                         epilog="A .glsl / .spv file needs no checkout; it is compiled with its own local size (64 "
                                "where specialization sets it) and no specialization constants. " + EPILOG)
    common(p)
    kernel_options(p)
    defines(p)
    p.add_argument("names", nargs="+", help=f"families ({', '.join(kernel_names())}), shader variant names, or "
                                            ".glsl / .spv files")
    p.add_argument("--gpu", "--adreno", dest="gpu", default=",".join(VENDOR_GPUS),
                   help="offline compilers' GPUs, comma-separated ('' for none): "
                        f"{', '.join(mesa_gpu_names())} (`workbench compilers gpus`)")
    p.add_argument("--all", action="store_true", help="print every statistic of every compiler, not only the "
                                                      "common columns")
    p.set_defaults(fn=cmd_stats)
    p = verbs.add_parser("run", help="run on the current device against torch, timed, as tidy rows")
    common(p)
    kernel_options(p)
    p.add_argument("kernels", nargs="+", choices=kernel_names(), metavar="KERNEL",
                   help=f"one or more of {', '.join(kernel_names())}")
    p.add_argument("--map", action="store_true", help="print a mismatch map (text grid) for each wrong output")
    p.add_argument("--png", metavar="PATH", help="write the mismatch figure (logical and packed maps) to PATH")
    add_validation_flags(p)
    p.set_defaults(fn=cmd_run)
    p = verbs.add_parser("diff", help="registers, waves, spills, instructions and GPU time at two revisions")
    common(p, rev=False)
    kernel_options(p)
    p.add_argument("--rev", action="append", default=[], help="revision A, then revision B (give it twice)")
    p.add_argument("kernels", nargs="+", choices=kernel_names(), metavar="KERNEL")
    p.add_argument("--gpu", "--adreno", dest="gpu", default=",".join(VENDOR_GPUS),
                   help="offline compilers' GPUs, comma-separated ('' for none)")
    p.add_argument("--no-time", action="store_true", help="statistics only, no timed runs")
    p.set_defaults(fn=cmd_diff)
    p = verbs.add_parser("compile-all", help="every shader variant of the checkout compiled (parallel, cached): "
                                             "a row per variant, failures with their template file:line")
    common(p)
    p.add_argument("match", nargs="*", help="only variants containing one of these")
    p.add_argument("--jobs", "-j", type=int, default=None, help="compilers at once (default: CPU count)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(fn=cmd_compile_all)
    p = verbs.add_parser("check", help="every kernel name the checkout's C++ can request exists among its variants")
    common(p)
    p.set_defaults(fn=cmd_check)
    p = verbs.add_parser("bench", help="ET-VK's kernels beside the workbench's and the copy roofline")
    p.add_argument("--executorch", help="ExecuTorch checkout (default: $WORKBENCH_EXECUTORCH)")
    p.add_argument("--out", help="results folder (default data/<device>/)")
    p.add_argument("--quick", action="store_true", help="tiny shapes, few samples; checks no headline figure")
    p.set_defaults(fn=cmd_bench)
    p = verbs.add_parser("lint", help="static checks on the compiled SPIR-V: barriers after a non-uniform early "
                                      "return, shared memory stored then loaded without a barrier",
                         epilog="Shader files (.glsl compiled, .spv read) need no checkout. " + EPILOG)
    common(p)
    defines(p)
    p.add_argument("variant", nargs="*", help="variant names of the checkout, or .glsl / .spv files")
    p.add_argument("--interfaces", action="store_true",
                   help="also check push-constant / UBO ranges against the C++ side's bytes (the families' dispatches)")
    p.add_argument("--all", action="store_true", help="every variant of the checkout")
    p.add_argument("--jobs", "-j", type=int, default=None, help="compilers at once (default: CPU count)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(fn=cmd_lint)
    p = verbs.add_parser("shake", help="run a dispatch N times per local size; bad runs vs the reference and run 0, "
                                       "the union of wrong elements",
                         epilog="A family (with --shape) is dispatched as ET-VK does and checked against torch. A bare "
                                ".glsl / .spv file (no checkout needed) is dispatched as `workbench validate` does: "
                                "storage buffers only (one binding an image or UBO: refused), each --size uint32 "
                                "holding 0..N-1, push constants N then zeros, N invocations in x; --output names the "
                                "binding filled with a sentinel before each run and compared (default 0). Its "
                                "reference is its own first run at each local size: a run that differs is a race or "
                                "reads memory no one wrote. A shader that "
                                "fixes its local size runs at that one only. " + EPILOG)
    common(p)
    defines(p)
    p.add_argument("kernel", metavar="KERNEL_OR_FILE", help="a family name, or a .glsl / .spv file")
    p.add_argument("--runs", type=int, default=10, help="runs per local size (default 10)")
    p.add_argument("--local-size", action="append", help="X,Y,Z (repeatable; default: a sweep of valid shapes)")
    p.add_argument("--shape", help="a family's input (N,C,H,W; the linears [..., M, K])")
    p.add_argument("--size", type=int, default=None, help="a bare file: elements per buffer and invocations "
                                                          "(default 64)")
    p.add_argument("--output", type=int, default=None, help="a bare file: the binding compared (default 0)")
    p.add_argument("--stress", action="store_true", help="a big copy submitted alongside each run")
    p.add_argument("--device", help="device index or name substring (default: the current one)")
    add_validation_flags(p)
    p.set_defaults(fn=cmd_shake)
    p = verbs.add_parser("patch", help="a unified diff replacing one of ET-VK's templates (default: the workbench's "
                                       "drop-in GEMV), made from the checkout's files now; git apply takes it",
                         epilog="Nothing of ET-VK is written to the repository: the diff is made at run time "
                                "(git diff --no-index of the checkout's template and the replacement). " + EPILOG)
    p.add_argument("--executorch", help="ExecuTorch checkout (default: $WORKBENCH_EXECUTORCH)")
    p.add_argument("--template", default="q4gsw_linear_gemv_coop__w_4x8", metavar="NAME",
                   help="the template replaced: a name, file name, path or a prefix naming one "
                        "(default q4gsw_linear_gemv_coop__w_4x8)")
    p.add_argument("--with", dest="with_file", metavar="FILE",
                   help="the replacement template (default: shaders/etvk_dropin/<template>.glsl)")
    p.add_argument("--decomposition", metavar="NAME",
                   help="also make ET-VK's picker (Q4gswLinear.cpp) give the GEMV this (NUM_GROUPS, WORKERS) "
                        "variant of its YAML at every N: g1w64 on a desktop GPU (data/NVIDIA_H200/q4_gemv_dropin.csv)")
    p.add_argument("-o", "--out", help="write the patch here (default: stdout)")
    p.set_defaults(fn=cmd_patch)
    from . import etvk_model
    etvk_model.register(verbs)


def cmd_patch(args) -> int:
    from ..etvk import dropin
    text = dropin.patch(args.executorch, args.template, args.with_file, args.decomposition)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out} ({text.count(chr(10))} lines); apply in the checkout's root: git apply {args.out}")
    else:
        sys.stdout.write(text)
    return 0
