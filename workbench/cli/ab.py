"""`workbench ab A [B] [--shader FILE]`: two shaders, two revisions of a file (FILE@REV), two settings of an ET-VK
family (NAME:key=value,...) or a captured dispatch (DIR:N) and its edit, run on the same inputs, checked to give the
same output, timed interleaved (A B A B …) warm and cold, with the ratio B/A, its bootstrap 95 % interval and a
verdict; the ISAs' counts and registers / occupancy on the offline GPUs beside (`workbench.etvk.ab`,
`workbench.measure.ab`)."""
from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser("ab", help="A/B: two shaders, revisions, ET-VK settings or a captured dispatch and its "
                                         "edit, timed interleaved, with a confidence interval and a verdict",
                              epilog="A, B: a .glsl / .comp / .spv file, FILE@REV (git), an ET-VK family "
                                     "NAME[:key=value,...] (needs --executorch or $WORKBENCH_EXECUTORCH; "
                                     "weight_load=u8vec4: a q4 linear's weight read as u8vec4, as before #12444), "
                                     "the workbench's q4-gemv:n=N,k=K[,vec=…,layout=…], or a captured dispatch DIR:N "
                                     "(B: a shader file, its edit; or --shader FILE).")
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B", nargs="?")
    p.add_argument("--shader", help="A is a captured dispatch DIR:N; B is it with this shader (FILE or FILE@REV)")
    p.add_argument("--groups", help="shader files: work groups X[,Y,Z]")
    p.add_argument("--push", help="shader files: push-constant words, comma-separated (integers as uint32, "
                                  "numbers with a point as float32)")
    p.add_argument("--bytes", type=int, default=1 << 20, help="shader files: bytes of each storage buffer (1 MiB)")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="a define for GLSL files (repeatable)")
    p.add_argument("--cache", default="hot,cold", help="cache regimes: hot, cold or both (default hot,cold)")
    p.add_argument("--interleave", default="submits",
                   help="submits (A and B in recordings of their own, submitted alternately), command (A B A B … in "
                        "one command buffer), or both: submits,command")
    p.add_argument("--gpu", default="a740", help="offline GPUs for the ISA counts, comma-separated, or none")
    p.add_argument("--pairs", type=int, default=20, help="at least this many A B pairs (default 20)")
    p.add_argument("--time", type=float, default=0.4, help="at least this many seconds of GPU time (default 0.4)")
    p.add_argument("--samples", action="store_true", help="print every sample, not only the summary")
    p.add_argument("--quick", action="store_true", help="a small cold rotation (a test run: say so in the rows)")
    p.add_argument("--executorch", help="ExecuTorch checkout (default: $WORKBENCH_EXECUTORCH)")
    p.add_argument("--csv", help="write the rows (samples and summaries) here")
    p.set_defaults(fn=cmd_ab)


def _numbers(text, what: str):
    if not text:
        return None
    try:
        return [float(v) if "." in v else int(v, 0) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"ab: expected {what} as comma-separated numbers, got {text!r}") from None


def cmd_ab(args) -> int:
    import pandas as pd

    from .. import vk
    from ..etvk.ab import compare
    from .common import parse_defines
    groups = _numbers(args.groups, "--groups")
    if groups is not None:
        if len(groups) > 3 or any(not isinstance(g, int) or g < 1 for g in groups):
            raise ValueError(f"ab: expected --groups as 1 to 3 positive integers, got {args.groups!r}")
        groups = tuple(groups) + (1,) * (3 - len(groups))
    if args.pairs < 2 or args.time <= 0 or args.bytes < 4:
        raise ValueError(f"ab: expected --pairs >= 2, --time > 0 and --bytes >= 4, got {args.pairs}, {args.time}, "
                         f"{args.bytes}")
    gpus = [] if args.gpu.strip().lower() in ("", "none") else [g for g in args.gpu.split(",") if g.strip()]
    modes = tuple(m.strip() for m in args.interleave.split(",") if m.strip())
    dev = vk.get_device() if getattr(args, "device", None) is None else vk.set_device(args.device)
    got = compare(dev, args.a, args.b, shader=args.shader, regimes=args.cache, modes=modes, gpus=gpus, groups=groups,
                  push=_numbers(args.push, "--push"), nbytes=args.bytes, defines=parse_defines(args.defines) or None,
                  executorch=args.executorch, min_pairs=args.pairs, min_time_s=args.time, quick=args.quick)
    frame = got.frame
    print(f"A: {frame['A'].iloc[0]}\nB: {frame['B'].iloc[0]}\ndevice: {dev.info.name}")
    print("output: " + (got.same_output or "A and B gave the same bytes"))
    for name, why in got.checks.items():
        if why:
            print(f"check {name}: {why}")
    s = got.summary
    clock = s["clock_note"].dropna().iloc[0] if "clock_note" in s and s["clock_note"].notna().any() else ""
    print("clock: " + (f"SM clock per sample ({s['clock_source'].iloc[0]})" if not clock else clock))
    cols = [c for c in ("cache", "interleave", "pairs", "median_us_A", "median_us_B", "ratio", "ci_lo", "ci_hi",
                        "sm_clock_mhz_median") if c in s]
    with pd.option_context("display.max_columns", None, "display.width", 200, "display.float_format", "{:.4g}".format):
        print(s[cols].to_string(index=False))
        if args.samples:
            print(frame[frame["row"] == "sample"][["cache", "interleave", "order", "side", "us", "clock_mhz"]]
                  .to_string(index=False))
        for v in got.verdicts:
            print("verdict: " + v)
        if got.isa is not None:
            print(got.isa.dropna(axis=1, how="all").to_string(index=False))
    if args.csv:
        frame.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    return 0 if not any(got.checks.values()) else 1
