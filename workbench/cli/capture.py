"""`workbench capture run | list | replay`: every dispatch of any Vulkan compute program, captured with GFXReconstruct,
listed, and replayed alone through the workbench's own runtime against its captured outputs."""
from __future__ import annotations

from pathlib import Path

from .common import device, table

LIST_COLUMNS = ["dispatch", "submit", "command_buffer", "pipeline", "entry_point", "spec_constants",
                "push_constants", "bindings", "groups", "local_size"]
EDIT_COLUMNS = ["dispatch", "shader", "pipeline", "exact", "mismatch", "reason", "gpu_us_median", "vs_captured",
                "seconds"]
REPLAY_COLUMNS = ["dispatch", "pipeline", "groups", "local_size", "exact", "mismatch", "gpu_us_median", "samples"]


def register(sub) -> None:
    p = sub.add_parser("capture", help="capture a Vulkan program's dispatches (GFXReconstruct), list and replay them")
    verbs = p.add_subparsers(dest="verb", required=True)
    r = verbs.add_parser("run", help="run COMMAND under GFXReconstruct's capture layer; convert and dump every "
                                     "dispatch's bindings before and after into --out")
    r.add_argument("--out", required=True, help="the capture folder to write")
    r.add_argument("--timeout", type=float, default=None, help="seconds the program may run (default: no limit)")
    r.add_argument("--allow-failure", action="store_true",
                   help="process the capture of a program that fails after it made one (the failure is reported)")
    r.add_argument("cmd", nargs="+", metavar="COMMAND", help="the program and its arguments (after --)")
    r.set_defaults(fn=_run)
    ls = verbs.add_parser("list", help="one row per dispatch of a capture folder")
    ls.add_argument("dir", help="a folder `workbench capture run` wrote")
    ls.add_argument("--csv", default=None, help="also write the table to this CSV file")
    _etvk_options(ls)
    ls.add_argument("--etdump", default=None, help="ET-VK's ETDump of the captured run (default: DIR/run.etdp where "
                                                   "it exists): each dispatch's operator and ET-VK's GPU time")
    ls.set_defaults(fn=_list)
    rp = verbs.add_parser("replay", help="replay each dispatch alone from its captured inputs; compare byte-exact "
                                         "with its captured outputs and time it (exit status 1 when one differs)")
    rp.add_argument("dir", help="a folder `workbench capture run` wrote")
    rp.add_argument("--dispatch", type=int, nargs="+", default=None, metavar="N",
                    help="only these dispatches (their `dispatch` numbers in `capture list`)")
    rp.add_argument("--csv", default=None, help="also write the table to this CSV file")
    rp.add_argument("--quick", action="store_true", help="fewer timing samples")
    rp.add_argument("--shader", default=None, metavar="FILE",
                    help="replay the --dispatch ones with this shader too (.glsl/.comp compiled, or .spv; the same "
                         "bindings) and compare both with the captured outputs and times")
    _etvk_options(rp)
    rp.set_defaults(fn=_replay)
    _register_microscope(verbs)


def _etvk_options(p) -> None:
    p.add_argument("--executorch", default=None, metavar="CHECKOUT",
                   help="name pipelines by the ET-VK shader variant of this checkout whose SPIR-V they are "
                        "(every variant compiled once and cached)")


def _write_csv(frame, path) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False)
        print(f"wrote {path}")


def _run(args) -> int:
    from .. import capture
    summary = capture.run(args.cmd, args.out, timeout=args.timeout, allow_failure=args.allow_failure)
    if summary.get("program_failed"):
        print(f"warning: {summary['program_failed']}; its capture was processed (--allow-failure)")
    print(f"captured {summary['dispatches']} dispatches of `{' '.join(args.cmd)}` into {args.out} "
          f"(capture {summary['capture_bytes'] / 1024:,.0f} KiB; program {summary['seconds']['program']:.1f} s, "
          f"convert {summary['seconds']['convert']:.1f} s, dump {summary['seconds']['dump']:.1f} s)")
    return 0


def _names(args) -> dict | None:
    if not args.executorch:
        return None
    from ..etvk.model import capture_join
    return capture_join.variant_names(args.executorch)


def _list(args) -> int:
    from .. import capture
    frame = capture.open(args.dir, names=_names(args))
    columns = LIST_COLUMNS + (["variant"] if args.executorch else [])
    etdump = Path(args.etdump) if args.etdump else Path(args.dir) / "run.etdp"
    if args.etdump or etdump.is_file():
        from ..etvk.model import capture_join
        frame = capture_join.join_events(frame, etdump)
        columns += ["operator", "etvk_gpu_us"]
    print(table(frame, columns))
    _write_csv(frame, args.csv)
    return 0


def _replay(args) -> int:
    from .. import capture
    if args.shader:
        if not args.dispatch:
            raise capture.CaptureError("expected --dispatch N… with --shader (the dispatches to replay with it), "
                                       "got none")
        frame = capture.edit(args.dir, args.dispatch, args.shader, device=device(args), quick=args.quick)
        print(table(frame.reindex(columns=EDIT_COLUMNS)))
        edited = frame[frame["shader"] != "captured"]
        print(f"edited shader: {int(edited['exact'].sum())} of {len(edited)} dispatches exact; compile and replay "
              f"{edited['seconds'].sum():.2f} s")
        _write_csv(frame, args.csv)
        return 0 if edited["exact"].all() else 1
    frame = capture.replay(args.dir, args.dispatch, device=device(args), quick=args.quick, names=_names(args),
                           show_progress=True)
    print(table(frame, REPLAY_COLUMNS))
    print(f"{int(frame['exact'].sum())} of {len(frame)} dispatches replayed exact")
    _write_csv(frame, args.csv)
    return 0 if frame["exact"].all() else 1


# --- the microscope: shake, statistics, every device of a cluster ------------------------------------------------

SHAKE_COLUMNS = ["dispatch", "pipeline", "local_size", "groups", "runs", "bad_runs", "bad_fraction",
                 "differs_from_run0", "wrong_count", "wrong_bindings", "seconds", "reason"]
STATS_COLUMNS = ["pipeline", "dispatches", "local_size", "gpu", "registers", "register_unit", "spills", "instructions",
                 "occupancy", "lint_errors", "lint_warnings", "reason"]


def _register_microscope(verbs) -> None:
    from .common import add_validation_flags
    sh = verbs.add_parser("shake", help="run each captured dispatch N times per local size; bad runs against the "
                                        "captured outputs and run 0 (exit status 1 on a bad run or a layer message)")
    _folder_options(sh)
    sh.add_argument("--runs", type=int, default=20, help="runs per local size (default 20)")
    sh.add_argument("--local-size", "--local-sizes", dest="local_size", action="append", metavar="X,Y,Z",
                    help="a local size (repeatable; default: the captured one, then the shapes that divide the "
                         "captured grid; 'captured': that one only). Only for SPIR-V whose local size comes from "
                         "specialization constants 0..2")
    sh.add_argument("--stress", action="store_true", help="a 64 MiB buffer copy before the dispatch in each run")
    sh.add_argument("--csv", default=None, help="also write the table to this CSV file")
    add_validation_flags(sh)
    sh.set_defaults(fn=_shake)
    st = verbs.add_parser("stats", help="each captured pipeline through the vendors' compilers (Mesa: Adreno, Mali, "
                                        "AMD), the device's driver and the lint: a row per pipeline × GPU")
    _folder_options(st, dispatch_help="only these dispatches' pipelines")
    st.add_argument("--gpu", default=None, help="vendor GPUs, comma-separated (default a740,mali-g610,rdna2; 'none': "
                                                "no vendor compiler)")
    st.add_argument("--no-driver", action="store_true", help="leave out the device's own pipeline statistics")
    st.add_argument("--csv", default=None, help="also write the table (every raw statistic too) to this CSV file")
    st.set_defaults(fn=_stats)
    sw = verbs.add_parser("sweep", help="replay each captured dispatch on every Vulkan device of a Dask cluster: a row "
                                        "per dispatch, exact and median µs per device")
    _folder_options(sw, folder_help="a capture folder, readable at the same path on every worker's host")
    sw.add_argument("--scheduler", help="an existing Dask cluster (tcp://host:port); default: a local one")
    sw.add_argument("--workers", help="local cluster: one worker per device index or name, e.g. 0,1 (default: one "
                                      "per local GPU, else per CPU device)")
    sw.add_argument("--each-device", action="store_true", help="identical devices each replay every dispatch")
    sw.add_argument("--here", action="store_true", help="in this process on the current device, no cluster")
    sw.add_argument("--full", action="store_true", help="the full timing method (default: a few samples)")
    sw.add_argument("--csv", default=None, help="also write every row (not the device table) to this CSV file")
    sw.set_defaults(fn=_sweep)


def _folder_options(p, folder_help="a folder `workbench capture run` wrote",
                    dispatch_help="only these dispatches") -> None:
    p.add_argument("dir", help=folder_help)
    p.add_argument("--dispatch", type=int, nargs="+", default=None, metavar="N", help=dispatch_help)


def _plain_device(args):
    from .. import vk
    return vk.get_device() if args.device is None else vk.set_device(args.device)


def _shake(args) -> int:
    from ..capture import microscope
    from ..checks.shake import parse_local_sizes
    from .common import validation_request
    texts = args.local_size or []
    local_sizes = "captured" if texts == ["captured"] else parse_local_sizes(texts)
    validation, modes = validation_request(args)
    validate = None if validation is None else (sorted(modes) or "on")
    frame = microscope.shake(args.dir, args.dispatch, device=_plain_device(args), runs=args.runs,
                             local_sizes=local_sizes, stress=args.stress, validate=validate)
    columns = SHAKE_COLUMNS + [c for c in ("validation", "messages", "first_message", "printf_lines") if c in frame]
    print(table(frame.reindex(columns=columns)))
    bad = int((frame["bad_runs"].fillna(0) > 0).sum())
    messages = int(frame["messages"].sum()) if "messages" in frame else 0
    print(f"{len(frame)} dispatch × local size rows: {bad} with bad runs"
          + (f"; the layer ({frame['validation'].iloc[0]}) reported {messages} message(s)" if validate else ""))
    _write_csv(frame.drop(columns=["wrong"], errors="ignore"), args.csv)
    return 1 if bad or messages or not frame["exact"].all() else 0


def _stats(args) -> int:
    from ..capture import stats
    text = (args.gpu or ",".join(stats.STATS_GPUS)).strip()
    gpus = [] if text.lower() == "none" else [g.strip() for g in text.split(",") if g.strip()]
    frame = stats.stats(args.dir, args.dispatch, gpus=gpus, device=_plain_device(args), driver=not args.no_driver)
    print(table(frame.reindex(columns=STATS_COLUMNS)))
    found = stats.coverage(frame)
    print(f"statistics for {found['with_statistics']} of {found['rows']} pipeline × GPU rows ("
          + ", ".join(f"{g} {n}" for g, n in found["per_gpu"].items()) + ")")
    _write_csv(frame, args.csv)
    return 0


def _sweep(args) -> int:
    from .. import fanout
    from ..capture.sweep import CaptureReplaySweep, device_table
    sweep = CaptureReplaySweep(args.dir, tuple(args.dispatch or ()), quick=not args.full)
    if args.here:
        _plain_device(args)
        result = fanout.run_here(sweep)
    else:
        result = fanout.run_sweep(sweep, scheduler=args.scheduler, each_device=args.each_device,
                                  workers=args.workers.split(",") if args.workers else None, show_progress=False)
    print(table(result.devices))
    shown = device_table(result.frame)
    print(table(shown))
    _write_csv(result.frame, args.csv)
    exact = [c for c in shown.columns if c.startswith("exact ")]
    return 0 if exact and shown[exact].fillna(False).astype(bool).all().all() else 1
