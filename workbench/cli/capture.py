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
    r.add_argument("--submits", default=None, metavar="A-B",
                   help="capture only queue submits A to B (0-based; GFXReconstruct's trimming), e.g. some decode "
                        "steps of a long LLM run")
    r.add_argument("--hide-extension", action="append", default=[], metavar="VK_…",
                   help="run the program on a device without this extension (a layer written here; repeatable), "
                        "e.g. VK_KHR_push_descriptor: ncnn then binds through descriptor sets, which the dumps follow")
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
    _register_model(verbs)
    _register_microscope(verbs)
    _register_fidelity(verbs)
    _register_coverage(verbs)
    _register_compare(verbs)


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
    summary = capture.run(args.cmd, args.out, timeout=args.timeout, allow_failure=args.allow_failure,
                          submits=args.submits, hide_extensions=args.hide_extension)
    if summary.get("program_failed"):
        print(f"warning: {summary['program_failed']}; its capture was processed (--allow-failure)")
    if summary.get("hidden_extensions"):
        print(f"the program ran without {', '.join(summary['hidden_extensions'])} (--hide-extension)")
    for line in summary.get("layer_messages", []):  # what the layer could not capture: never only in a log
        print(f"the capture layer said: {line}")
    for key in ("dump_failed", "dump_stopped"):  # what the dump step could not do, or was ended after
        if summary.get(key):
            print(f"warning: {summary[key]}")
    if (summary.get("waits_patched") or {}).get("blocks"):
        patched = summary["waits_patched"]
        print(f"host waits a one-thread replay never leaves (blocks {patched['blocks']}): "
              f"{patched['problem'] or 'made non-blocking in the capture file'}")
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
    found = capture.dispatches(args.dir)  # read once: the listing and the memory line below
    frame = capture.listing(found, names=_names(args))
    columns = LIST_COLUMNS + (["variant"] if args.executorch else [])
    etdump = Path(args.etdump) if args.etdump else Path(args.dir) / "run.etdp"
    if args.etdump or etdump.is_file():
        from ..etvk.model import capture_join
        frame = capture_join.join_events(frame, etdump)
        columns += ["operator", "etvk_gpu_us"]
    print(table(frame, columns))
    from ..capture.timeline import working_set
    size = working_set(found)
    if size["placed"]:
        print(f"memory: {size['placed']} of {size['keys']} buffers and images bound where the capture says; they take "
              f"{size['resources'] / 2**20:.2f} MiB an allocation each, {size['captured'] / 2**20:.2f} MiB where the "
              f"program put them (tensors it aliased share memory: capture fidelity --memory captured)")
    hidden = capture.manifest(args.dir).get("hidden_extensions")
    if hidden:
        print(f"captured with {', '.join(hidden)} hidden from the program (capture run --hide-extension)")
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
    _write_csv(frame, args.csv)  # first: every row, the unreplayable ones with their reason
    print(table(frame.reindex(columns=REPLAY_COLUMNS + ["reason"])))
    print(f"{int(frame['exact'].sum())} of {len(frame)} dispatches replayed exact")
    for reason, group in frame[frame["reason"].fillna("").astype(bool)].groupby("reason"):
        print(f"not replayed ({len(group)}): {reason}")
    return 0 if frame["exact"].all() else 1


# --- the whole model: the dispatches replayed in order, an edit's effect on the model's output -------------------

IN_ORDER_COLUMNS = ["model", "dispatches", "dispatches_exact", "output", "dispatch", "bytes", "byte_exact",
                    "mismatches", "max_abs", "gpu_us", "seconds", "reason"]
WHATIF_COLUMNS = ["dispatch", "variant", "edited", "inputs_changed", "bytes_changed", "gpu_us_captured",
                  "gpu_us_edited", "vs_captured", "mismatch", "reason"]


def _register_model(verbs) -> None:
    io = verbs.add_parser("in-order", help="replay every dispatch in order, each reading what the ones before it "
                                           "wrote; compare the program's output (output-<i>.bin) byte for byte "
                                           "(exit status 1 when one differs)")
    io.add_argument("dirs", nargs="+", metavar="DIR", help="capture folders with the program's output files")
    io.add_argument("--csv", default=None, help="also write the table (a row per folder and output) to this CSV")
    io.add_argument("--time", action="store_true", help="also time each dispatch in the chain (GPU µs; slower)")
    io.set_defaults(fn=_in_order)
    wi = verbs.add_parser("what-if", help="every dispatch of --dispatch N's pipeline with --shader, replayed in "
                                          "order through the whole capture: the output's difference, the "
                                          "dispatches it reaches, the edited ones' times both ways")
    wi.add_argument("dir", help="a capture folder with the program's output files")
    wi.add_argument("--dispatch", type=int, required=True, metavar="N", help="a dispatch of the pipeline to edit")
    wi.add_argument("--shader", required=True, metavar="FILE", help="the edited shader (.glsl/.comp compiled, or .spv)")
    wi.add_argument("--only", action="store_true", help="edit dispatch N only, not every dispatch of its pipeline")
    wi.add_argument("--csv", default=None, help="also write the run dispatches' rows to this CSV file")
    _etvk_options(wi)
    wi.set_defaults(fn=_what_if)


def _in_order(args) -> int:
    import pandas as pd
    from ..capture import whatif
    from ..measure import environment
    dev = device(args)
    frames = [whatif.in_order(folder, device=dev, time_it=args.time).summary()
              .assign(model=Path(folder).name, dir=str(folder)) for folder in args.dirs]
    frame = pd.concat(frames, ignore_index=True).assign(**environment(dev))
    frame = frame[["model"] + [c for c in frame.columns if c != "model"]]
    print(table(frame, IN_ORDER_COLUMNS))
    print(f"{int(frame['byte_exact'].sum())} of {len(frame)} outputs reproduced byte for byte")
    _write_csv(frame, args.csv)
    return 0 if frame["byte_exact"].all() else 1


def _what_if(args) -> int:
    from .. import capture
    from ..capture import whatif
    from ..capture.edit import load_shader
    found = capture.dispatches(args.dir)
    by_number = {d.dispatch: d for d in found}
    if args.dispatch not in by_number:
        raise capture.CaptureError(f"expected a dispatch number 0..{len(found) - 1}, got {args.dispatch}")
    target = by_number[args.dispatch]
    code = load_shader(args.shader, target)
    result = whatif.model_edit(found, {args.dispatch if args.only else target.spirv_hash: code},
                               outputs=whatif.program_outputs(args.dir), device=device(args), names=_names(args))
    edited = result.table[result.table["edited"]]
    print(table(edited.assign(mismatch=[result.mismatch(n) for n in edited["dispatch"]]), WHATIF_COLUMNS))
    t = result.totals
    print(f"{t['edited']} dispatches edited, {t['run']} run, {t['changed']} changed of {t['dispatches']}; GPU µs "
          f"({t['over']}) {t['gpu_us_captured']:,.0f} captured, {t['gpu_us_edited']:,.0f} edited; {t['seconds']:.2f} s")
    for _, out in result.outputs.iterrows():
        note = f" ({out['reason']})" if out["reason"] else ""
        print(f"output {out['output']}: {out['mismatches']} of {out['elements']} elements differ, max abs "
              f"{out['max_abs']:.6g}, mean abs {out['mean_abs']:.3g}{note}")
    _write_csv(result.table, args.csv)
    return 0


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
    rc = verbs.add_parser("races", help="replay each captured dispatch under GPU-assisted validation's shared-memory "
                                        "race detection (the layer ./setup.sh validation builds): a row per dispatch, "
                                        "each race the layer found in one line (exit status 1 on any)")
    _folder_options(rc)
    rc.add_argument("--layer", default="built", help="the validation layer: 'built' (default: ./setup.sh validation's) "
                                                     "or a folder holding a VkLayer_khronos_validation.json of 2026")
    rc.add_argument("--runs", type=int, default=1, help="runs per dispatch (default 1)")
    rc.add_argument("--csv", default=None, help="also write the table to this CSV file")
    rc.set_defaults(fn=_races)
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


RACES_COLUMNS = ["dispatch", "pipeline", "local_size", "groups", "shared_memory", "races", "clean", "exact", "found",
                 "other_messages", "reason"]


def _races(args) -> int:
    from ..capture import microscope
    from ..toolchain.validation import resolve_layer
    layer = resolve_layer(args.layer)
    if layer is None:
        raise ValueError("expected --layer 'built' or a folder of a 2026 validation layer, got 'system' (Debian 12's "
                         "layer 1.3.239 has no shared-memory race detection)")
    frame = microscope.races(args.dir, args.dispatch, layer=layer, device=_plain_device(args), runs=args.runs)
    print(table(frame.reindex(columns=RACES_COLUMNS)))
    raced = int((frame["races"] > 0).sum())
    shared = int(frame["shared_memory"].fillna(False).astype(bool).sum())
    print(f"{len(frame)} dispatches ({shared} with shared memory): {raced} with races, "
          f"{int(frame['clean'].sum())} clean")
    _write_csv(frame, args.csv)
    return 1 if raced else 0


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


# --- fidelity: ET-VK's execution dispatches replayed and timed beside ET-VK's own times ------------------------

FIDELITY_COLUMNS = ["way", "family", "dispatches", "ratio_median", "ratio_p10", "ratio_p90", "within_10pct",
                    "etvk_us", "replay_us", "all_exact"]


def _register_coverage(verbs) -> None:
    cv = verbs.add_parser("coverage", help="replay every dispatch of another engine's capture and write its rows "
                                           "(engine, program, dispatch, shader, local size, exact, reason, costs) "
                                           "into the peers' coverage table, replacing that engine and program's rows")
    cv.add_argument("dir", help="a folder `workbench capture run` wrote")
    cv.add_argument("--engine", required=True, help="the engine's name (ncnn, iree, …)")
    cv.add_argument("--program", required=True, help="the program's name (e.g. 'net fp16')")
    cv.add_argument("--csv", required=True, help="the table to update, e.g. data/llvmpipe/capture_coverage_peers.csv")
    cv.add_argument("--bare-seconds", type=float, default=None, metavar="S",
                    help="the program's own seconds without capture (the overhead column)")
    cv.set_defaults(fn=_coverage)


def _coverage(args) -> int:
    from ..capture import coverage
    new = coverage.rows(args.dir, engine=args.engine, program=args.program, device=device(args),
                        bare_seconds=args.bare_seconds)
    written = coverage.write_rows(new, args.csv)
    print(table(new.reindex(columns=["dispatch", "shader", "local_size", "groups", "exact", "reason"])))
    print(table(coverage.summary(written)))
    print(f"{int(new['exact'].sum())} of {len(new)} dispatches of {args.engine} {args.program} replayed exact; "
          f"wrote {args.csv}")
    return 0 if new["exact"].all() else 1


def _register_fidelity(verbs) -> None:
    fd = verbs.add_parser("fidelity", help="each dispatch of a captured ET-VK execution replayed and timed warm and "
                                           "cold beside ET-VK's own time: the share within 10 %%, per family")
    fd.add_argument("dirs", nargs="+", metavar="DIR",
                    help="a results folder (timed.csv; tools/gpu_capture_fidelity.py) or its tar, or a capture "
                         "folder of ET-VK's runtime with its ETDump (timed now)")
    fd.add_argument("--csv", default=None, help="write the rows (a dispatch per way) to this CSV file")
    fd.add_argument("--summary-csv", default=None, help="write the summary (per way and family) to this CSV file")
    fd.add_argument("--ways", default="warm,cold", help="ways of timing, comma-separated: warm, cold (each dispatch "
                    "alone, back to back) and in-order (the execution as the runtime submits it: one command "
                    "buffer, in order); default warm,cold")
    fd.add_argument("--cold-between", default=None, metavar="shader:MIB",
                    help="what the cold way streams through another pipeline before each copy (default: "
                         "`etvk fidelity`'s cold way, shader:128)")
    fd.add_argument("--back-to-back", type=int, default=20, help="copies per submit (default 20)")
    fd.add_argument("--chains", type=int, default=1, metavar="N",
                    help="in-order: the execution's whole chain N times a submit (keeps a sagging clock up)")
    fd.add_argument("--burst", type=int, default=0, metavar="N",
                    help="in-order: the submits timed N at a time, each burst right after a warm-up, as ET-VK's runner "
                         "times its executions after its own (default 0: one sample set after one warm-up)")
    fd.add_argument("--barriers", default="captured", metavar="KIND[,KIND]",
                    help="in-order: the barriers before each dispatch: captured (the program's own, its image "
                         "layouts and tiling; light where the capture kept none), light, full; several are each "
                         "timed (default captured)")
    fd.add_argument("--memory", default="pooled", metavar="KIND[,KIND]",
                    help="in-order: the chain's resources pooled (bound into large blocks, as ET-VK's VMA does), "
                         "own (an allocation each) or captured (the program's allocations re-made, each resource at "
                         "its captured offset: tensors it aliased share memory again); several are each timed "
                         "(default pooled)")
    fd.add_argument("--warm-seconds", type=float, default=1.0, help="GPU kept busy before each dispatch (default 1)")
    fd.add_argument("--quick", action="store_true", help="fewer timing samples")
    fd.add_argument("--samples", type=int, default=None, metavar="N",
                    help="exactly N samples per way (a CPU device shared with other work)")
    fd.add_argument("--handport", default=None, metavar="CSV",
                    help="a hand-port fidelity table (`workbench etvk fidelity`'s etvk_fidelity.csv): its rows "
                         "beside the same dispatches'")
    fd.add_argument("--handport-csv", default=None, help="with --handport: write the rows beside their hand-ported "
                                                         "twins to this CSV file")
    _etvk_options(fd)
    fd.set_defaults(fn=_fidelity)


def _kinds(text: str, option: str) -> tuple:
    from ..capture.timeline import BARRIERS, MEMORY
    known = {"barriers": BARRIERS, "memory": MEMORY}[option]
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    if not kinds or any(k not in known for k in kinds):
        raise ValueError(f"--{option} takes {', '.join(known)} (comma-separated), got {text!r}")
    return kinds


def _fidelity(args) -> int:
    import sys

    import pandas as pd
    from ..etvk.model import capture_fidelity as cf
    from ..measure.ways import WAY_COLUMNS
    rows, summary = cf.fidelity_of(args.dirs, ways=[w.strip() for w in args.ways.split(",") if w.strip()],
                                   cold_between=args.cold_between or cf.COLD_BETWEEN, back_to_back=args.back_to_back,
                                   warm_seconds=args.warm_seconds, quick=args.quick, samples=args.samples,
                                   names=_names(args), device=None if args.device is None else _plain_device(args),
                                   echo=lambda m: print(m, file=sys.stderr, flush=True),
                                   in_order={"chains": args.chains, "burst": args.burst,
                                             "barriers": _kinds(args.barriers, "barriers"),
                                             "memory": _kinds(args.memory, "memory")})
    # the in-order way's variants (barriers, memory, chains, burst) are rows of their own: shown where several were
    variants = [c for c in WAY_COLUMNS[2:] if c in summary and summary[c].nunique(dropna=True) > 1]
    columns = FIDELITY_COLUMNS[:1] + variants + FIDELITY_COLUMNS[1:]
    print(table(summary.reindex(columns=columns)))
    for _, every in summary[summary["family"] == "(all)"].iterrows():
        how = "".join(f" ({c} {every[c]})" for c in variants if c in every and not pd.isna(every[c]))
        matched = every.get("clocks_matched")
        clocks = (f"; {every['within_10pct_clocks_matched']:.0%} of the {int(matched)} whose clocks agree"
                  if matched == matched and matched is not None and 0 < matched < every["dispatches"] else "")
        print(f"{every['way']}{how}: {every['within_10pct']:.0%} of {int(every['dispatches'])} dispatches within "
              f"10 % of ET-VK's time (median ratio {every['ratio_median']:.2f}){clocks}")
    _write_csv(rows, args.csv)
    _write_csv(summary, args.summary_csv)
    if args.handport:
        both = cf.compare_handport(rows, pd.read_csv(args.handport))
        print(f"{len(both)} rows have a hand-ported twin (same model, dispatch and way of timing)")
        if not both.empty:
            within = (both[["ratio", "handport_ratio"]] - 1).abs() <= 0.10
            shares = within.groupby(both["way"]).mean().add_suffix(" within 10 %")
            print(table(both.groupby("way")[["ratio", "handport_ratio", "replay_vs_handport"]].median()
                        .join(shares).reset_index()))
        _write_csv(both, args.handport_csv)
    return 0



# --- compare: the field's kernels beside ET-VK's -------------------------------------------------------------------

COMPARE_COLUMNS = ["engine", "op", "kernel", "dispatch", "groups", "local_size", "bytes", "exact", "way", "median_us",
                   "GB/s", "copy_fraction", "reason"]


def _register_compare(verbs) -> None:
    cp = verbs.add_parser("compare", help="several engines' captures of the same ops (the field's: conv 3x3, conv "
                                          "1x1, depthwise 3x3, linear, a 4-bit GEMV) in one table: a row per "
                                          "dispatch and way, µs, GB/s, %% of copy, vendor statistics; a summary per "
                                          "op and engine")
    cp.add_argument("sources", nargs="+", metavar="DIR[=ENGINE]",
                    help="capture folders, each with its engine (etvk, ncnn, iree, ggml; default: from the captured "
                         "command)")
    cp.add_argument("--csv", required=True, help="the table (a row per dispatch and way) to write")
    cp.add_argument("--summary-csv", default=None, help="also write the summary (op x way x engine) to this CSV")
    cp.add_argument("--ways", default="warm,cold", help="warm, cold (comma-separated; default warm,cold)")
    cp.add_argument("--gpus", default="a740,g610,rdna3",
                    help="offline GPUs for registers / instructions / spills (Mesa; 'none': no statistics)")
    cp.add_argument("--cold-between", default=None, metavar="shader:MIB",
                    help="what the cold way streams before each copy (default: fidelity's, shader:128)")
    cp.add_argument("--back-to-back", type=int, default=20, help="copies per submit (default 20)")
    cp.add_argument("--warm-seconds", type=float, default=1.0, help="GPU kept busy before each dispatch (default 1)")
    cp.add_argument("--samples", type=int, default=None, metavar="N", help="exactly N samples per way")
    cp.add_argument("--quick", action="store_true", help="fewer timing samples and quick copies")
    cp.add_argument("--no-copy", action="store_true", help="leave out the copy at the same traffic (%% of copy)")
    cp.add_argument("--names", default=None, metavar="JSON",
                    help="ET-VK's {SPIR-V hash: variant} (capture_join.variant_names() saved), instead of --executorch")
    _etvk_options(cp)
    cp.set_defaults(fn=_compare)


def _compare(args) -> int:
    import sys
    from ..capture import compare
    from ..capture.format import CaptureError
    from ..etvk.model import capture_fidelity as cf
    sources = compare.parse_sources(args.sources)
    ways = [w.strip() for w in args.ways.split(",") if w.strip()]
    if not ways or any(w not in compare.REGIME_OF_WAY for w in ways):
        raise CaptureError(f"expected --ways among {', '.join(compare.REGIME_OF_WAY)} (comma-separated), "
                           f"got {args.ways!r}")
    text = args.gpus.strip()
    gpus = [] if text.lower() == "none" else [g.strip() for g in text.split(",") if g.strip()]
    if gpus:
        from ..vendors import mesa
        gpus = [mesa.check_gpu(g).name for g in gpus]
    dev = _plain_device(args)
    timing = cf.ways_of(ways, cold_between=args.cold_between or cf.COLD_BETWEEN, back_to_back=args.back_to_back)
    options = cf.sampling_options(args.quick, args.samples)

    def timer(device, d):
        return cf.time_dispatch(device, d, timing, warm_seconds=args.warm_seconds, sampling=options)

    def join(frame, folder):
        from ..etvk.model import capture_join
        etdump = Path(folder) / "run.etdp"
        if not etdump.is_file():
            return frame
        try:
            return capture_join.join_events(frame, etdump)
        except ImportError:  # no ExecuTorch (a GPU host): the execution's dispatches from the ETDump's strings
            kernels = cf.etdump_kernels(etdump)
            execute = cf.execution_dispatches(frame, kernels)
            kernel_of = dict(zip(execute, kernels))
            return frame.assign(phase=["execute" if n in kernel_of else "prepack" for n in frame["dispatch"]],
                                kernel=[kernel_of.get(n, "") for n in frame["dispatch"]])

    copies = None
    if not args.no_copy:
        from .. import capture
        from ..benchmarks.copy import CopyAtTraffic
        traffic = {sum(b.size or 0 for b in d.bindings) for folder, _ in sources for d in capture.dispatches(folder)}
        copies = CopyAtTraffic(dev, sorted(t for t in traffic if t), quick=args.quick, show_progress=False,
                               regimes=tuple(compare.REGIME_OF_WAY[w] for w in ways))
    names = _names(args)
    if args.names:
        import json
        names = json.loads(Path(args.names).read_text())
    rows = compare.table(sources, timer=timer, ways=ways, copies=copies, gpus=gpus, names=names, join=join,
                         device=dev, echo=lambda m: print(m, file=sys.stderr, flush=True))
    _write_csv(rows, args.csv)
    print(table(rows.reindex(columns=COMPARE_COLUMNS)))
    summary = compare.summary(rows)
    print(table(summary))
    for way in ways:
        print(compare.headline(summary, way))
    _write_csv(summary, args.summary_csv)
    return 0
