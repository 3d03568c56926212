"""`workbench isa TARGET --gpu a740 [--diff OTHER] [--counts]`: the ISA of a shader file, a shaders/ name, an ET-VK
family or variant, or a captured dispatch (DIR:N) on the offline GPUs (Mesa's Turnip, PanVK, RADV:
`workbench.vendors.isa`), its instructions counted by class, or the diff of two (OTHER: another target, or @REV for
the same ET-VK target at another revision of the checkout)."""
from __future__ import annotations

import sys


def register(subparsers) -> None:
    from ..vendors.mesa import gpu_names
    p = subparsers.add_parser("isa", help="the ISA of a shader, ET-VK family / variant or captured dispatch on the "
                                          "offline GPUs; instruction counts; the diff of two",
                              epilog="TARGET: a .glsl / .comp / .spv file, a shaders/ name, an ET-VK family or variant "
                                     "(needs --executorch or $WORKBENCH_EXECUTORCH), or a capture folder DIR[:N]. "
                                     "--diff @REV compares TARGET with itself at another revision.")
    p.add_argument("target")
    p.add_argument("--gpu", default="a740", help="offline GPUs, comma-separated: " + ", ".join(gpu_names()))
    p.add_argument("--diff", metavar="OTHER", help="a second target (or @REV: TARGET at revision REV)")
    p.add_argument("--counts", action="store_true", help="the instruction classes counted, not the ISA text")
    p.add_argument("--executorch", help="ExecuTorch checkout (default: $WORKBENCH_EXECUTORCH)")
    p.add_argument("--rev", help="a git revision of the checkout for TARGET (default: its working tree)")
    p.add_argument("--shape", help="an ET-VK family's input (as `etvk run --shape`)")
    p.add_argument("--out-features", type=int, help="the linears: N")
    p.add_argument("--weight-storage", choices=["buffer", "texture2d"], help="the q4 linears' weight storage")
    p.add_argument("--storage", choices=["buffer", "texture3d"], help="float tensors' storage")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="a define for .glsl files (repeatable)")
    p.add_argument("--representation", default=None,
                   help="print this internal representation instead of the ISA (e.g. 'Final NIR'); 'list' names them")
    p.add_argument("--csv", help="--counts: also write the table here")
    p.set_defaults(fn=cmd_isa)


def _options(args) -> dict:
    out = {}
    if args.shape:
        out["shape"] = tuple(int(v) for v in args.shape.split(","))
    for key in ("out_features", "weight_storage", "storage"):
        if getattr(args, key) is not None:
            out[key] = getattr(args, key)
    return out


def _target(text: str, args, rev):
    from ..etvk.isa import target
    from .common import parse_defines
    return target(text, executorch=args.executorch, rev=rev, options=_options(args) or None,
                  defines=parse_defines(args.defines) or None)


def cmd_isa(args) -> int:
    import pandas as pd

    from ..etvk import isa as etvk_isa
    from ..vendors import isa, mesa
    gpus = [mesa.check_gpu(g) for g in args.gpu.split(",") if g.strip()]
    if not gpus:
        raise ValueError("isa: expected --gpu with at least one GPU name, got none")
    if not mesa.is_set_up():
        raise mesa.MesaNotSetUpError(f"isa: the offline compilers are not built in {mesa.cache_root()}; run "
                                     "`workbench compilers setup`")
    first = _target(args.target, args, args.rev)
    if args.diff:
        other = _target(args.target, args, args.diff[1:]) if args.diff.startswith("@") else \
            _target(args.diff, args, None)
        status = 0
        for g in gpus:
            d = etvk_isa.target_diff(first, other, g)
            print(f"== {g.name} ({mesa.DRIVER_TITLES[g.driver]}): {first.jobs[0]['name']} vs {other.jobs[0]['name']} "
                  f"(aligned by {d.aligned_by})")
            print(str(d) if not args.counts else d.table.to_string(index=False))
        return status
    if args.counts:
        frame = etvk_isa.counts_table([first], gpus)
        with pd.option_context("display.max_columns", None, "display.width", 220):
            shown = frame.loc[:, (frame != 0).any(axis=0)]
            print(shown.T.to_string(header=False) if len(frame) <= 3 else shown.to_string(index=False))
        if args.csv:
            frame.to_csv(args.csv, index=False)
            print(f"wrote {args.csv}")
        return 0 if frame["error"].isna().all() else 1
    status = 0
    for g in gpus:
        for got in etvk_isa.isa_all(first, g):
            print(f"== {got.name} on {g.name} ({mesa.DRIVER_TITLES[g.driver]})")
            if got.error:
                print(f"   error: {got.error}")
                status = 1
            elif args.representation == "list":
                print("\n".join(f"   {r['name']}: {r['description']}" for r in got.representations))
            elif args.representation:
                print(got.representation(args.representation))
            else:
                print(got.text.rstrip())
                s = isa.summary(got.text, g)
                print(f"-- {s['instructions']} instructions: {s['alu']} ALU, {s['loads']} loads, {s['stores']} stores,"
                      f" {s['barriers']} barriers, {s['syncs']} syncs")
    sys.stdout.flush()
    return status
