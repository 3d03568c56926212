"""`workbench capture run | list | replay`: every dispatch of any Vulkan compute program, captured with GFXReconstruct,
listed, and replayed alone through the workbench's own runtime against its captured outputs."""
from __future__ import annotations

from pathlib import Path

from .common import device, table

LIST_COLUMNS = ["dispatch", "submit", "command_buffer", "pipeline", "entry_point", "spec_constants",
                "push_constants", "bindings", "groups", "local_size"]
REPLAY_COLUMNS = ["dispatch", "pipeline", "groups", "local_size", "exact", "mismatch", "gpu_us_median", "samples"]


def register(sub) -> None:
    p = sub.add_parser("capture", help="capture a Vulkan program's dispatches (GFXReconstruct), list and replay them")
    verbs = p.add_subparsers(dest="verb", required=True)
    r = verbs.add_parser("run", help="run COMMAND under GFXReconstruct's capture layer; convert and dump every "
                                     "dispatch's bindings before and after into --out")
    r.add_argument("--out", required=True, help="the capture folder to write")
    r.add_argument("--timeout", type=float, default=None, help="seconds the program may run (default: no limit)")
    r.add_argument("cmd", nargs="+", metavar="COMMAND", help="the program and its arguments (after --)")
    r.set_defaults(fn=_run)
    ls = verbs.add_parser("list", help="one row per dispatch of a capture folder")
    ls.add_argument("dir", help="a folder `workbench capture run` wrote")
    ls.add_argument("--csv", default=None, help="also write the table to this CSV file")
    ls.set_defaults(fn=_list)
    rp = verbs.add_parser("replay", help="replay each dispatch alone from its captured inputs; compare byte-exact "
                                         "with its captured outputs and time it (exit status 1 when one differs)")
    rp.add_argument("dir", help="a folder `workbench capture run` wrote")
    rp.add_argument("--dispatch", type=int, nargs="+", default=None, metavar="N",
                    help="only these dispatches (their `dispatch` numbers in `capture list`)")
    rp.add_argument("--csv", default=None, help="also write the table to this CSV file")
    rp.add_argument("--quick", action="store_true", help="fewer timing samples")
    rp.set_defaults(fn=_replay)


def _write_csv(frame, path) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False)
        print(f"wrote {path}")


def _run(args) -> int:
    from .. import capture
    summary = capture.run(args.cmd, args.out, timeout=args.timeout)
    print(f"captured {summary['dispatches']} dispatches of `{' '.join(args.cmd)}` into {args.out} "
          f"(capture {summary['capture_bytes'] / 1024:,.0f} KiB; program {summary['seconds']['program']:.1f} s, "
          f"convert {summary['seconds']['convert']:.1f} s, dump {summary['seconds']['dump']:.1f} s)")
    return 0


def _list(args) -> int:
    from .. import capture
    frame = capture.open(args.dir)
    print(table(frame, LIST_COLUMNS))
    _write_csv(frame, args.csv)
    return 0


def _replay(args) -> int:
    from .. import capture
    frame = capture.replay(args.dir, args.dispatch, device=device(args), quick=args.quick)
    print(table(frame, REPLAY_COLUMNS))
    print(f"{int(frame['exact'].sum())} of {len(frame)} dispatches replayed exact")
    _write_csv(frame, args.csv)
    return 0 if frame["exact"].all() else 1
