"""`workbench etvk build | profile | lower | execute | run-items | fidelity | harness | explorer` — models on ET-VK's
own runtime, built from the user's checkout. `profile` = `lower` (here: the revision's Python) + `execute` (any machine
with the runtime and a Vulkan device; no ExecuTorch Python needed) + reading the ETDumps (`profile --from`);
`fidelity` times a profile's dispatches through the workbench's own dispatch beside the runtime's times; `llm` a small
Llama lowered by ExecuTorch's LLM export (prefill, decode, their capture)."""
from __future__ import annotations

import sys
from pathlib import Path

from .common import table


def cmd_build(args) -> int:
    from ..etvk.model import build
    runtime = build.build(args.executorch, rev=args.rev, jobs=args.jobs, force=args.force, quiet=args.quiet)
    info = runtime.info
    print(f"{runtime.runner}")
    print(f"ExecuTorch {runtime.label} ({runtime.short}); configure {info.get('configure_s', 0):.0f} s + build "
          f"{info.get('build_s', 0):.0f} s on {info.get('cores')} cores ({info.get('jobs')} jobs); executor_runner "
          f"{info.get('runner_bytes', 0) / 2**20:.1f} MiB, build tree {info.get('build_dir_bytes', 0) / 2**20:.0f} MiB")
    return 0


def cmd_edit_confirm(args) -> int:
    from ..etvk.model import edit_confirm
    if args.rev:
        raise edit_confirm.EditError(f"expected the checkout's working tree (the edit is copied onto it), got --rev "
                                     f"{args.rev}")
    if args.replace:
        edit = edit_confirm.TemplateEdit.replace(args.executorch, args.template, *args.replace)
    else:
        edit = edit_confirm.TemplateEdit.from_file(args.executorch, args.template)
    print(edit.diff())
    frame = edit_confirm.confirm(edit, args.capture, args.lowered, jobs=args.jobs, quiet=args.quiet)
    print(table(frame, ["model", "output", "edited", "run", "whatif_mismatches", "whatif_max_abs",
                        "rebuilt_vs_whatif_byte_exact", "rebuilt_vs_whatif_max_abs", "original_runtime_byte_exact",
                        "whatif_s", "build_s", "built"]))
    if args.csv:
        Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    return 0 if frame["rebuilt_vs_whatif_byte_exact"].all() else 1


def _write(frames: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for stem, df in frames.items():
        df.to_csv(out / f"{stem}.csv", index=False)
    print(f"wrote {', '.join(f'{s}.csv' for s in frames)} in {out}")


def _report(p, args) -> int:
    for rev in p.revisions:
        k = p.kernels[p.kernels["revision"] == rev]
        print(f"== {p.model} @ {rev}: {int(k['dispatches'].sum())} dispatches, "
              f"{k['gpu_us'].sum():,.1f} µs of GPU time ({p.dispatches['device'].iat[0]})")
        print(table(k, ["kernel", "dispatches", "gpu_us", "gpu_us_median", "operators"]))
    print("== phases (µs, median)")
    print(table(p.phases, ["revision", "phase", "us", "us_min", "us_max", "runs"]))
    print("== outputs against the quantized model in torch")
    print(table(p.outputs, ["revision", "output", "shape", "max_abs_diff", "mean_abs_diff", "reference_abs_max"]))
    if len(p.revisions) == 2:
        print(f"== {p.revisions[0]} → {p.revisions[1]}")
        print(table(p.compare))
    if args.out:
        _write({f"{stem}_{args.name or p.model}": df for stem, df in _frames(p).items()}, Path(args.out))
    return 0


def _frames(p) -> dict:
    frames = {"etvk_profile_dispatches": p.dispatches.drop(columns=["args"]), "etvk_profile_kernels": p.kernels,
              "etvk_profile_phases": p.phases, "etvk_profile_outputs": p.outputs}
    if len(p.revisions) == 2:
        frames["etvk_profile_compare"] = p.compare.assign(model=p.model, a=p.revisions[0], b=p.revisions[1])
    return frames


def cmd_profile(args) -> int:
    from ..etvk.model import profile
    if args.from_:
        return _report(profile.read(args.from_), args)
    if not args.model:
        print("profile: name a model, or read executed programs with --from FOLDER …", file=sys.stderr)
        return 2
    revs = args.rev or [None]
    try:
        profile.cases(revs, args.identity_ops or None)
    except ValueError as e:
        print(f"profile: {e}", file=sys.stderr)
        return 2
    shape = tuple(int(s) for s in args.shape.split(",")) if args.shape else None
    p = profile.profile(args.model, executorch=args.executorch, revs=revs, settings=args.identity_ops or None,
                        runs=args.runs, warmup=args.warmup, input_shape=shape, runtime=args.runtime, quiet=args.quiet,
                        lowered=args.lowered)
    return _report(p, args)


def cmd_lower(args) -> int:
    from ..etvk.model import profile
    shape = tuple(int(s) for s in args.shape.split(",")) if args.shape else None
    sides = profile.lower(args.model, executorch=args.executorch, revs=args.rev or [None],
                          settings=args.identity_ops or None, input_shape=shape, out_dir=args.out, quiet=args.quiet)
    for side in sides:
        print(f"{side['label']}: {side['folder']}")
    return 0


def cmd_execute(args) -> int:
    from ..etvk.model import profile
    for folder in args.folders:
        profile.execute(folder, args.runtime, runs=args.runs, warmup=args.warmup, quiet=args.quiet)
        print(f"executed {folder}")
    return 0


def cmd_run_items(args) -> int:
    """Each (family, options) row of a JSON file (``drill.fidelity_items`` writes one) through the workbench's dispatch."""
    import json

    from ..etvk.model import fidelity
    fidelity.time_items(json.loads(Path(args.file).read_text()), executorch=args.executorch, rev=args.rev,
                    timestamps=args.timestamps, between=args.between, barriers=args.barriers,
                    back_to_back=args.back_to_back,
                    warm_seconds=args.warm_seconds, statistics=args.statistics, csv=args.csv)
    print(f"wrote {args.csv}")
    return 0


def cmd_fidelity(args) -> int:
    """Models on ET-VK's runtime, then each drillable dispatch through the workbench's dispatch: the fidelity table."""
    from ..etvk.model import drill, fidelity, profile
    if bool(args.models) == bool(args.from_):
        print("fidelity: name models to profile, or executed programs with --from FOLDER … (not both)",
              file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.from_:
        profiles = [profile.read([folder]) for folder in args.from_]
    else:
        profiles = []
        for model in args.models:
            lowered = Path(args.lowered) / model if args.lowered else None
            p = profile.profile(model, executorch=args.executorch, runs=args.runs, warmup=args.warmup,
                                runtime=args.runtime, lowered=lowered, quiet=args.quiet)
            _write({f"{stem}_{model}": df for stem, df in _frames(p).items()}, out)
            profiles.append(p)
    items = [item for p in profiles for item in drill.fidelity_items(p)]
    print(f"{len(items)} drillable dispatches of {len(profiles)} models; timing each through the workbench …",
          flush=True)
    timed = fidelity.time_items(items, executorch=args.executorch, timestamps=args.timestamps,
                               between=args.between, barriers=args.barriers, back_to_back=args.back_to_back,
                               warm_seconds=args.warm_seconds, quiet=args.quiet,
                               csv=out / "etvk_fidelity_timed.csv")
    import pandas as pd
    per_dispatch = pd.concat([fidelity.table(p, timed[timed["model"] == p.model]) for p in profiles],
                             ignore_index=True)
    per = fidelity.summary(per_dispatch)
    frames = {"etvk_fidelity": per_dispatch, "etvk_fidelity_summary": per}
    try:       # with both a warm and a cold way timed: is the runtime's time between the two?
        frames["etvk_fidelity_bracket"] = bracket = fidelity.bracket(per_dispatch)
    except ValueError:
        bracket = None
    _write(frames, out)
    if bracket is not None:
        print(f"runtime within the workbench's warm / cold bracket (±10 %): {int(bracket['inside'].sum())} of "
              f"{len(bracket)} dispatches")
    print(table(per, [c for c in ("timestamps", "between", "barriers", "family", "dispatches", "ratio_median",
                                       "ratio_p10", "ratio_p90", "within_10pct", "all_correct") if c in per]))
    return 0


def cmd_harness(args) -> int:
    """ET-VK's op harness: build the binaries this revision has, run them here, their lines as one CSV."""
    import pandas as pd

    from ..etvk import Codegen, harness, source
    built = harness.build(args.executorch, rev=args.rev, tests=args.tests or harness.DEFAULT_TESTS,
                          jobs=args.jobs, quiet=args.quiet)
    print(f"{len(built['tests'])} harness binaries in {built['bin']} ({built['seconds']:.0f} s)")
    if args.build_only:
        return 0
    variants = list(Codegen(source(args.executorch, rev=args.rev)).variants())
    frames = []
    for name in built["tests"]:
        rows = harness.run(built["bin"] / name, variants=variants)
        frames.append(rows)
        ok = (rows["status"] == "PASSED").sum()
        bad = (rows["status"] == "FAILED").sum()
        print(f"{name}: {rows['case'].nunique()} cases, {ok} PASSED, {bad} FAILED", flush=True)
        if args.csv:
            pd.concat(frames, ignore_index=True).to_csv(args.csv, index=False)   # every finished binary
    if args.csv:
        print(f"wrote {args.csv}")
    return 0


def cmd_explorer(args) -> int:
    from ..etvk.model import explorer, profile
    p = profile.profile(args.model, executorch=args.executorch, revs=[args.rev], runs=args.runs,
                        warmup=args.warmup, runtime=args.runtime, quiet=args.quiet)
    paths = explorer.write_node_data(p, args.out)
    print("wrote " + ", ".join(str(x) for x in paths))
    graph, data = paths[0], paths[1]
    print(f"open with: model-explorer {graph} --node_data_paths={data}")
    return 0


def cmd_llm(args) -> int:
    """A small Llama through ExecuTorch's LLM export, on ET-VK's runtime: lower, run, read, capture."""
    from ..etvk.model import build, llm
    try:
        cfg = llm.Decoder(name=args.name, n_layers=args.layers, dim=args.dim, n_heads=args.heads,
                          n_kv_heads=args.kv_heads, hidden_dim=args.hidden, vocab_size=args.vocab,
                          max_seq_len=args.max_seq_len, group_size=args.group_size, prefill=args.prefill,
                          repeat_rows=args.repeat_rows)
    except ValueError as e:
        print(f"llm: {e}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else None
    if args.returned:
        if not args.lowered:
            print("llm: --returned needs --lowered (the programs the host ran)", file=sys.stderr)
            return 2
        profile, coverage = llm.read_returned(args.returned, args.lowered, Path(args.work or args.returned + ".d"))
        return _llm_report(profile, coverage, out)
    if args.lowered:
        programs = llm.programs_in(args.lowered)
    else:
        work = Path(args.work) if args.work else Path.home() / ".cache" / "workbench" / "etvk-llm" / cfg.name
        positions = [0, *range(cfg.prefill, cfg.prefill + args.decode)]
        print(f"{cfg.name}: lowering prefill ({cfg.prefill} tokens) and decode with export_llama_lib …",
              file=sys.stderr)
        programs = llm.lower(cfg, executorch=args.executorch, out_dir=work, decode_positions=positions)
        print(f"lowered into {programs.folder}", file=sys.stderr)
    if args.lower_only:
        return 0
    runtime = args.runtime or build.build(args.executorch, quiet=args.quiet)
    llm.execute(programs, runtime, runs=args.runs, warmup=args.warmup, quiet=args.quiet)
    coverage = None
    if args.capture:
        from ..etvk.model import capture_join
        runtime = runtime if not isinstance(runtime, str) else build.from_path(runtime)
        coverage = llm.capture(programs, runtime, programs.folder / "capture",
                               names=capture_join.variant_names(args.executorch))
    return _llm_report(llm.read(programs), coverage, out)


def _llm_report(profile, coverage, out) -> int:
    print(f"== {profile.name}: per step ({profile.rates['device'].iat[0]})")
    print(table(profile.rates, ["step", "tokens", "steps", "dispatches", "gpu_us", "etvk_execute_us",
                                "tokens_per_s_gpu", "tokens_per_s_execute"]))
    print("== share of GPU time per kernel family")
    print(table(profile.families, ["step", "family", "dispatches", "gpu_us_per_step", "share"]))
    print("== decode's roofline (3 / 2 bits projected at the GEMVs' measured bandwidth)")
    print(table(profile.roofline, ["bits", "source", "weight_bytes_per_token", "gemv_us_per_token",
                                   "non_gemv_us_per_token", "tokens_per_s", "gemv_gb_s"]))
    print("== logits against the quantized model in torch")
    print(table(profile.outputs, ["step", "position", "compared", "max_abs_diff", "reference_abs_max", "tolerance",
                                  "within"]))
    if coverage is not None:
        print(f"== capture of decode: {int(coverage['exact'].sum())} of {len(coverage)} dispatches replay exact")
    if out:
        written = profile.write(out)
        if coverage is not None:  # the model's rows of the device's coverage table, the other models' kept
            path = out / "capture_coverage.csv"
            if path.is_file():
                import pandas as pd
                kept = pd.read_csv(path)
                coverage = pd.concat([kept[~kept["model"].isin(coverage["model"].unique())], coverage],
                                     ignore_index=True)
            coverage.to_csv(path, index=False)
            written.append(path)
        print(f"wrote {', '.join(p.name for p in written)} in {out}")
    return 0 if profile.outputs["within"].all() else 1


def register(verbs) -> None:
    """Adds the model verbs to `workbench etvk`."""
    def checkout(p, many=False):
        p.add_argument("--executorch", help="ExecuTorch checkout (default: $WORKBENCH_EXECUTORCH)")
        if many:
            p.add_argument("--rev", action="append", default=[],
                           help="a revision (give it twice for an A/B; default: the working tree)")
        else:
            p.add_argument("--rev", help="a git revision of the checkout (default: its working tree)")

    def running(p, optional=False):
        p.add_argument("model", nargs="?" if optional else None,
                       help="a model: refinenet_like, residual_add, float_between, mobilenet_v2")
        p.add_argument("--runs", type=int, default=20, help="timed executions after warm-up (default 20)")
        p.add_argument("--warmup", type=int, default=3, help="executions not counted (default 3)")
        p.add_argument("--runtime", default="own",
                       help="own (each revision's own runtime), newest (the working tree's), or a path to an "
                            "executor_runner built elsewhere")
        p.add_argument("--quiet", action="store_true", help="no progress lines")

    p = verbs.add_parser("build", help="build ExecuTorch's runtime with ET-VK (executor_runner + ETDump), cached")
    checkout(p)
    p.add_argument("--jobs", "-j", type=int, help="parallel compile jobs (default: CPU count)")
    p.add_argument("--force", action="store_true", help="build again from scratch even when cached (CMake's tree "
                                                        "cleared)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(fn=cmd_build)

    p = verbs.add_parser("profile", help="a model on ET-VK's own runtime: per-dispatch GPU times from its ETDump")
    checkout(p, many=True)
    running(p, optional=True)
    p.add_argument("--from", dest="from_", nargs="+", metavar="FOLDER",
                   help="read programs executed elsewhere (`etvk execute`) instead of lowering and running")
    p.add_argument("--shape", help="input N,C,H,W (default: the model's)")
    p.add_argument("--identity-ops", action="append", choices=["before", "after"], default=[],
                   help="register clone / view_copy / alias_copy as before PR #19395 or as the revision does "
                        "(give both, with one --rev, for an A/B of the switch)")
    p.add_argument("--lowered", metavar="FOLDER",
                   help="run the programs `etvk lower MODEL --out FOLDER` wrote (e.g. on another machine) instead of "
                        "lowering here: for a GPU host without ExecuTorch's Python")
    p.add_argument("--out", help="also write the tables as CSV into this folder")
    p.add_argument("--name", help="the files' suffix (default: the model's name)")
    p.set_defaults(fn=cmd_profile)

    p = verbs.add_parser("lower", help="lower a model with each revision's ET-VK Python into folders to execute")
    checkout(p, many=True)
    p.add_argument("model", help="a model: refinenet_like, residual_add, float_between, mobilenet_v2")
    p.add_argument("--shape", help="input N,C,H,W (default: the model's)")
    p.add_argument("--identity-ops", action="append", choices=["before", "after"], default=[])
    p.add_argument("--out", required=True, help="folder to write one subfolder per side into")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_lower)

    p = verbs.add_parser("execute", help="run lowered programs on ET-VK's runtime here (ETDump + outputs beside them)")
    p.add_argument("folders", nargs="+", help="folders `etvk lower` wrote")
    p.add_argument("--runtime", required=True, help="the executor_runner to use (e.g. from `etvk build`)")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_execute)

    def timing(p):
        p.add_argument("--back-to-back", type=int, default=20,
                       help="copies of each dispatch per timed submit (default 20: the GPU stays busy, as in a model)")
        p.add_argument("--timestamps", choices=["etvk", "workbench"], nargs="+", default=["etvk"],
                       help="etvk (default): each dispatch's time includes the barrier before it, as ET-VK's "
                            "QueryPool times it; workbench: the barrier counts in neither interval; both: each item "
                            "timed both ways, one after the other")
        p.add_argument("--barriers", choices=["light", "full"], nargs="+", default=["light"],
                       help="light (default): compute / transfer barriers between copies; full: all-commands memory "
                            "barriers, as ET-VK widens a write-after-read; both: each item timed both ways")
        p.add_argument("--between", nargs="+", default=["none"], metavar="WHAT",
                       help="what runs, untimed, before each copy of the dispatch: none (default), copy:MIB (a buffer "
                            "copy; 128 evicts the inputs from the H200's L2) or shader:MIB (another pipeline, the "
                            "workbench's shader copy); several: each item timed once per value")
        p.add_argument("--warm-seconds", type=float, default=1.0,
                       help="GPU warm-up (copies) before each timed item (default 1 s; CPU devices skip it)")

    p = verbs.add_parser("run-items", help="dispatches of a model (a JSON list of family + options) through the "
                                        "workbench's own dispatch, timed")
    checkout(p)
    p.add_argument("file", help="JSON: [{\"family\": …, \"options\": {…}, …}] (drill.fidelity_items makes one)")
    p.add_argument("--csv", required=True, help="the rows, written after each one")
    p.add_argument("--statistics", action="store_true", help="driver statistics too")
    timing(p)
    p.set_defaults(fn=cmd_run_items)

    p = verbs.add_parser("fidelity", help="models on ET-VK's runtime, every drillable dispatch timed through the "
                                       "workbench's dispatch: runtime µs beside workbench µs, per family")
    p.add_argument("--executorch", help="ExecuTorch checkout (default: $WORKBENCH_EXECUTORCH)")
    p.add_argument("models", nargs="*", help="models to profile on the runtime first (see `etvk profile`)")
    p.add_argument("--from", dest="from_", nargs="+", metavar="FOLDER",
                   help="programs already executed on this device (`etvk execute`), instead of models")
    p.add_argument("--lowered", metavar="ROOT",
                   help="ROOT/<model>/ holds what `etvk lower MODEL --out ROOT/<model>` wrote: nothing is lowered here")
    p.add_argument("--runs", type=int, default=20, help="timed executions on the runtime (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="executions not counted (default 3)")
    p.add_argument("--runtime", default="own", help="own, newest, or a path to an executor_runner built elsewhere")
    p.add_argument("--out", required=True, help="folder for etvk_fidelity*.csv and the profiles' CSVs")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    timing(p)
    p.set_defaults(fn=cmd_fidelity)

    p = verbs.add_parser("harness", help="ET-VK's own op harness (custom_ops test_q8ta_* / test_q8csw_*): build, "
                                         "run, per-shader rows")
    checkout(p)
    p.add_argument("tests", nargs="*", help="harness binaries (default: the int8 ones this revision has)")
    p.add_argument("--jobs", "-j", type=int)
    p.add_argument("--build-only", action="store_true", help="build, do not run")
    p.add_argument("--csv", help="the rows, written after each binary")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_harness)

    p = verbs.add_parser("edit-confirm", help="an edited ET-VK template replayed through a model's capture, then "
                                              "ET-VK's runtime rebuilt with it (a copy of the checkout) runs the "
                                              "model: its output against the replay's")
    checkout(p)
    p.add_argument("--template", required=True, metavar="FILE|NAME",
                   help="an edited copy of a template (its name names the one it replaces), or with --replace the "
                        "template's name (e.g. q8ta_conv2d_pw)")
    p.add_argument("--replace", nargs=2, metavar=("OLD", "NEW"), help="the edit: OLD replaced by NEW (first one)")
    p.add_argument("--capture", required=True, metavar="DIR", help="the model's capture (capture_program's folder)")
    p.add_argument("--lowered", required=True, metavar="DIR", help="the lowered program the capture ran "
                                                                   "(`etvk lower`'s folder)")
    p.add_argument("--jobs", "-j", type=int, help="parallel compile jobs of the rebuild (default: CPU count)")
    p.add_argument("--csv", default=None, help="also write the rows (one per output) to this CSV file")
    p.add_argument("--quiet", action="store_true", help="no build progress lines")
    p.set_defaults(fn=cmd_edit_confirm)

    p = verbs.add_parser("llm", help="a small Llama lowered by ExecuTorch's LLM export (4-bit, KV cache) on ET-VK's "
                                     "runtime: prefill + decode per dispatch, kernel shares, tokens/s, roofline")
    p.add_argument("--executorch", help="ExecuTorch checkout (default: $WORKBENCH_EXECUTORCH)")
    p.add_argument("--name", default="llama3_2_mini", help="the model's name in the files")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--hidden", type=int, default=1536)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--max-seq-len", type=int, default=128)
    p.add_argument("--group-size", type=int, default=32)
    p.add_argument("--prefill", type=int, default=32, help="prompt tokens of the prefill program (default 32)")
    p.add_argument("--repeat-rows", type=int, default=0, metavar="R",
                   help="every weight matrix's rows repeat every R (random values, full traffic; the programs "
                        "compress R-fold to travel to a GPU host); default 0: all random")
    p.add_argument("--decode", type=int, default=4, help="timed decode steps: positions prefill … prefill+N-1 (default 4); "
                                                            "position 0 is run too, to check the output")
    p.add_argument("--runs", type=int, default=10, help="timed executions per program (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="executions not counted (default 2)")
    p.add_argument("--runtime", help="an executor_runner built elsewhere (default: `etvk build`'s)")
    p.add_argument("--work", help="folder for the lowered programs (default ~/.cache/workbench/etvk-llm/NAME)")
    p.add_argument("--lowered", help="programs lowered before (the --work folder of an earlier run)")
    p.add_argument("--lower-only", action="store_true", help="lower, do not run (to carry to another machine)")
    p.add_argument("--capture", action="store_true", help="also capture the decode program and replay every dispatch")
    p.add_argument("--returned", metavar="TAR", help="read what tools/gpu_llm.py sent back from a GPU host "
                                                     "(with --lowered: the programs it ran)")
    p.add_argument("--out", help="write the CSVs into this folder")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_llm)

    p = verbs.add_parser("explorer", help="per-node Vulkan times as a Model Explorer node-data JSON file")
    checkout(p)
    running(p)
    p.add_argument("--out", required=True, help="folder for the graph and node-data JSON files")
    p.set_defaults(fn=cmd_explorer)
