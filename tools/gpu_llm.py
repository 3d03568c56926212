"""The small Llama of issue 34 on ET-VK's runtime on a GPU host without ExecuTorch's Python: prefill and decode
programs run with one ETDump row per dispatch, the decode program captured and every dispatch replayed alone.

What to carry (made on the development machine, one tar):
    WORKBENCH_EXECUTORCH=… python3 tools/gpu_llm.py --pack llm_carry.tar [--lowered DIR]
        bin/executor_runner, build.json   the runtime `workbench etvk build` made (build.find())
        llm/                              the programs `workbench etvk llm --lower-only --work DIR` lowered
                                          (prefill/, decode-<p>/ with model.pte, input-*.bin, reference.pt,
                                          summary.json; llm.json); default DIR ~/.cache/workbench/etvk-llm/llama3_2_mini
        names.json                        capture_join.variant_names() as {SPIR-V hash: ET-VK variant}
    --dropin: also bin/executor_runner_dropin, the runtime rebuilt with the drop-in GEMV (`workbench.etvk.dropin`:
        `edit().tree()`, built by `build.build`); --decomposition g1w64 (repeatable): also
        bin/executor_runner_dropin_g1w64, the drop-in with ET-VK's picker giving that variant at every N
The command there (the repository's root; GFXReconstruct's tools in $WORKBENCH_GFXRECON_DIR):
    mkdir -p /tmp/llm && tar xf llm_carry.tar -C /tmp/llm
    python3 tools/gpu_llm.py /tmp/llm $OUT [--runs 20] [--warmup 3] [--rates-only]
    --rates-only: no capture; with the drop-in runner carried, the programs run on both runtimes, each's run files
    packed as $OUT/llm_original.tar and $OUT/llm_dropin.tar
What it writes under $OUT: llm_gpu.tar (each program folder's run.etdp, run.json, output-*.bin; capture/
coverage_host.csv: every dispatch of the decode program replayed alone, exact or why not; capture/events.etdp:
the captured run's ETDump; capture/capture.json), and llm_gpu.log.
Back here (Inspector reads the ETDumps):
    workbench etvk llm --returned llm_gpu.tar --lowered DIR --out data/<device>/
    python3 tools/gpu_llm.py --rates FOLDER --lowered DIR --csv data/<device>/etvk_dropin_decode.csv
        (FOLDER holds llm_original.tar and each drop-in's llm_<label>.tar: `dropin.returned_rates`, tokens/s before
        and after)
"""
import argparse
import json
import shutil
import sys
import tarfile
import time
from pathlib import Path


def pack(tar_path: Path, lowered: Path, with_dropin: bool = False, decompositions=(), pickers=()) -> None:
    from workbench.etvk import dropin
    from workbench.etvk.model import build, capture_join, llm
    runtime = build.find()
    if runtime is None:
        sys.exit("no runtime built for $WORKBENCH_EXECUTORCH: run `workbench etvk build` first")
    programs = llm.programs_in(lowered)
    names = capture_join.variant_names()
    with tarfile.open(tar_path, "w") as tar:
        tar.add(runtime.runner, arcname="bin/executor_runner")
        if with_dropin:
            tar.add(build.build(dropin.edit().tree(), quiet=False).runner, arcname="bin/executor_runner_dropin")
            for d in decompositions:
                tar.add(build.build(dropin.edit(decomposition=d).tree(), quiet=False).runner,
                        arcname=f"bin/executor_runner_dropin_{d}")
        for d in pickers:
            tar.add(build.build(dropin.edit(decomposition=d, picker_only=True).tree(), quiet=False).runner,
                    arcname=f"bin/executor_runner_etvk_{d}")
        if (runtime.root / "build.json").is_file():
            tar.add(runtime.root / "build.json", arcname="build.json")
        for f in sorted(programs.folder.rglob("*")):
            if f.is_file() and not (f.name in llm.RUN_FILES or f.name.startswith("output-")
                                    or "capture" in f.relative_to(programs.folder).parts):
                tar.add(f, arcname=f"llm/{f.relative_to(programs.folder)}")
        info = tarfile.TarInfo("names.json")
        data = json.dumps(names).encode()
        info.size = len(data)
        import io
        tar.addfile(info, io.BytesIO(data))
    print(f"{tar_path}: {tar_path.stat().st_size / 2**20:.1f} MiB")


def runners(root: Path) -> list[tuple[str, str]]:
    """(label, runner file) of the runtimes carried: executor_runner ("original") first, then each
    executor_runner_<label> (the drop-in's, "dropin"; with a decomposition, "dropin_g1w64")."""
    found = sorted(p.name for p in (root / "bin").glob("executor_runner_*"))
    return [("original", "executor_runner"), *((name.removeprefix("executor_runner_"), name) for name in found)]


def run_both(root: Path, out: Path, runs: int, warmup: int) -> None:
    """The programs on the original runtime and on each drop-in's (`runners`), each in a copy of the lowered
    folder, interleaved twice (original, drop-in(s), original, drop-in(s): the later round is kept, a clock that
    rises as the GPU warms favours none); each's run files packed for `dropin.returned_rates`."""
    from workbench import vk
    from workbench.etvk.model import build, llm
    out.mkdir(parents=True, exist_ok=True)
    device = vk.get_device()
    started = time.time()
    for label, runner in runners(root) * 2:
        folder = Path("/tmp/llm_rates") / label
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(root / "llm", folder)
        programs = llm.programs_in(folder)
        llm.execute(programs, build.from_path(root / "bin" / runner), runs=runs, warmup=warmup, device=device,
                    quiet=False)
        llm.pack_returned(programs, None, out / f"llm_{label}.tar")
        print(f"{label}: {len(programs.folders)} programs ({time.time() - started:.0f} s)", flush=True)


def run(root: Path, out: Path, runs: int, warmup: int) -> None:
    from workbench import vk
    from workbench.etvk.model import build, llm
    out.mkdir(parents=True, exist_ok=True)
    runtime = build.from_path(root / "bin" / "executor_runner")
    programs = llm.programs_in(root / "llm")
    names = json.loads((root / "names.json").read_text())
    device = vk.get_device()
    started = time.time()
    llm.execute(programs, runtime, runs=runs, warmup=warmup, device=device, quiet=False)
    executed = time.time()
    capture_dir = Path("/tmp/llm_capture")
    shutil.rmtree(capture_dir, ignore_errors=True)
    coverage = llm.capture(programs, runtime, capture_dir, names=names, device=device, events=False)
    coverage.to_csv(capture_dir / "coverage_host.csv", index=False)
    llm.pack_returned(programs, capture_dir, out / "llm_gpu.tar")
    line = (f"{device.info.name}: executed {len(programs.folders)} programs in {executed - started:.0f} s; decode "
            f"capture {int(coverage['exact'].sum())} of {len(coverage)} dispatches exact "
            f"({time.time() - executed:.0f} s)")
    (out / "llm_gpu.log").write_text(line + "\n")
    print(line)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("root", nargs="?", help="the unpacked carry (bin/, llm/, names.json)")
    p.add_argument("out", nargs="?", help="where llm_gpu.tar goes ($OUT)")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--pack", metavar="TAR", help="on the development machine: pack the carry into TAR")
    p.add_argument("--dropin", action="store_true", help="with --pack: carry the drop-in's runtime too")
    p.add_argument("--decomposition", action="append", default=[], metavar="NAME",
                   help="with --pack --dropin: also the drop-in with ET-VK's picker giving this variant at every N")
    p.add_argument("--picker-only", action="append", default=[], metavar="NAME",
                   help="with --pack: also ET-VK's own shader with its picker giving this variant at every N "
                        "(bin/executor_runner_etvk_<variant>)")
    p.add_argument("--rates-only", action="store_true", help="on the GPU host: both runtimes' runs, no capture")
    p.add_argument("--rates", metavar="FOLDER", help="here: read FOLDER/llm_{original,dropin}.tar")
    p.add_argument("--csv", help="with --rates: write the rows here")
    p.add_argument("--lowered", default=str(Path.home() / ".cache" / "workbench" / "etvk-llm" / "llama3_2_mini"))
    args = p.parse_args()
    if args.decomposition or args.picker_only:
        from workbench.etvk.dropin import EditError, decomposition_named
        try:
            for name in args.decomposition + args.picker_only:
                decomposition_named(name)
        except EditError as exc:
            p.error(str(exc))
    if args.pack:
        pack(Path(args.pack), Path(args.lowered), args.dropin, args.decomposition, args.picker_only)
    elif args.rates:
        import tempfile
        from workbench.etvk import dropin
        tars = sorted(Path(args.rates).glob("llm_*.tar"), key=lambda t: (t.stem != "llm_original", t.stem))
        if not tars or tars[0].stem != "llm_original":
            sys.exit(f"expected llm_original.tar and the drop-ins' llm_<label>.tar in {args.rates}, found "
                     f"{[t.name for t in tars] or 'none'}")
        with tempfile.TemporaryDirectory() as work:
            rows = dropin.returned_rates({t.stem.removeprefix("llm_"): t for t in tars}, Path(args.lowered), work)
        print(rows.to_string())
        if args.csv:
            rows.to_csv(args.csv, index=False)
    elif args.root and args.out and args.rates_only:
        run_both(Path(args.root), Path(args.out), args.runs, args.warmup)
    elif args.root and args.out:
        run(Path(args.root), Path(args.out), args.runs, args.warmup)
    else:
        p.error("give ROOT OUT (on the GPU host) or --pack TAR (here)")


if __name__ == "__main__":
    main()
