"""A model on ET-VK's own runtime, every dispatch timed by ET-VK itself; one revision, or two side by side.

    from workbench.etvk.model import profile
    p = profile.profile("mobilenet_v2", executorch="/path/to/executorch")            # the working tree
    p.dispatches        # one row per dispatch: revision, operator, kernel, dispatch_id, gpu_us (median), device …
    p.kernels           # per revision and kernel: dispatches, GPU µs
    p.phases            # ETVK_COPY_INPUTS, ETVK_COMPUTE_GRAPH_EXECUTE, …
    ab = profile.profile("refinenet_like", executorch=..., revs=["0cafcb20e3", "24da2f65cd"])
    ab.compare          # per kernel: dispatches and µs at A and at B, and B / A

    workbench etvk profile MODEL [--rev A [--rev B]] [--runs N]      # the same rows from the command line

Per revision: the model is lowered by that revision's ET-VK Python (:mod:`.revision`, a child process) and run on
the runtime built from that revision (:mod:`.build`). Where that revision's runtime does not build here — ET-VK
builds on Linux desktops since ExecuTorch #20138 (June 2026) — pass ``runtime="newest"`` (or the CLI's
``--runtime newest``): the revision's program then runs on the working tree's runtime, and every row says so in
``runtime_commit`` / ``runtime_note``. The times are ET-VK's QueryPool timestamps from the ETDump
(:mod:`.events`), medians over `runs` executions after `warmup`; on a GPU the workbench first keeps the device busy
for a second so that the runner starts at a loaded clock.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import build as B
from . import events as E
from . import revision as R
from . import runtime as RT


@dataclass
class Profile:
    model: str
    dispatches: pd.DataFrame
    phases: pd.DataFrame
    kernels: pd.DataFrame
    outputs: pd.DataFrame
    programs: dict = field(default_factory=dict)     # revision label → revision.Program
    runs: dict = field(default_factory=dict)         # revision label → runtime.RunResult

    @property
    def revisions(self) -> list[str]:
        return list(dict.fromkeys(self.dispatches["revision"]))

    @property
    def compare(self) -> pd.DataFrame:
        """Per kernel, dispatches and total GPU µs at each of two revisions, and their ratio (B / A)."""
        revs = self.revisions
        if len(revs) != 2:
            raise ValueError(f"a comparison needs two revisions, this profile has {len(revs)}: {revs}")
        return compare(self.kernels, revs[0], revs[1])


def compare(kernels: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """The A/B frame from per-revision kernel tables (`kernels` has a `revision` column)."""
    ka = kernels[kernels["revision"] == a].set_index("kernel")
    kb = kernels[kernels["revision"] == b].set_index("kernel")
    names = list(dict.fromkeys(list(ka.index) + list(kb.index)))
    rows = []
    for k in names:
        da = int(ka["dispatches"].get(k, 0))
        db = int(kb["dispatches"].get(k, 0))
        ua = float(ka["gpu_us"].get(k, 0.0))
        ub = float(kb["gpu_us"].get(k, 0.0))
        rows.append({"kernel": k, "dispatches_a": da, "dispatches_b": db, "gpu_us_a": ua, "gpu_us_b": ub,
                     "ratio": ub / ua if ua else math.nan, "saved_us": ua - ub})
    out = pd.DataFrame(rows)
    total = {"kernel": "(all)", "dispatches_a": int(out["dispatches_a"].sum()),
             "dispatches_b": int(out["dispatches_b"].sum()), "gpu_us_a": float(out["gpu_us_a"].sum()),
             "gpu_us_b": float(out["gpu_us_b"].sum())}
    total["ratio"] = total["gpu_us_b"] / total["gpu_us_a"] if total["gpu_us_a"] else math.nan
    total["saved_us"] = total["gpu_us_a"] - total["gpu_us_b"]
    out = pd.concat([out, pd.DataFrame([total])], ignore_index=True)
    out.attrs.update(a=a, b=b)
    return out


def warm_gpu(device, seconds: float, *, cpu_too: bool = False) -> None:
    """Copies on the workbench's device for `seconds` (GPUs only unless `cpu_too`), so the runner starts at a
    loaded clock."""
    if (device.info.is_cpu and not cpu_too) or seconds <= 0:
        return
    from ...kernels.copy import CopySpec, record_copy
    from ...measure import keep_busy
    spec = CopySpec(64 << 20)
    src, dst = device.buffer(nbytes=spec.nbytes), device.buffer(nbytes=spec.nbytes)
    try:
        with device.record(label="warm-up", timestamps=False) as rec:
            record_copy(rec, device, spec, dst, src)
            keep_busy(rec, device, seconds, cpu_too=cpu_too)
    finally:
        src.close()
        dst.close()


def _runtime_for(executorch, rev, runtime, echo):
    """(Runtime, note) for `rev`: its own build, or the newest (working tree's) where asked or where its own fails."""
    if runtime not in (None, "own", "newest"):
        built = runtime if isinstance(runtime, B.Runtime) else B.from_path(runtime)
        return built, f"given runtime {built.runner}"
    if runtime == "newest" or rev is None:
        return B.build(executorch, None, quiet=False), "" if rev is None else "the working tree's runtime (asked)"
    try:
        return B.build(executorch, rev), ""
    except B.RuntimeBuildError as e:
        echo(f"{rev}: its own runtime does not build here ({str(e).splitlines()[0]}); running its program on the "
             "working tree's runtime")
        return B.build(executorch, None), f"own runtime failed to build: {str(e).splitlines()[0]}"


def cases(revs=(None,), settings=None) -> list[tuple]:
    """(revision, identity-op setting, label) for each side: one or two revisions, or one revision under the two
    settings of :func:`~.lowering.identity_ops` (``"before"`` re-registers the identity ops as before PR #19395)."""
    revs = list(revs) or [None]
    settings = list(settings or ["after"])
    if len(revs) > 2 or len(settings) > 2 or (len(revs) == 2 and len(settings) == 2):
        raise ValueError(f"one or two sides: two revisions, or one revision under two identity-op settings; "
                         f"got revisions {revs} and settings {settings}")
    out = []
    for rev in revs:
        for setting in settings:
            label = rev or "working tree"
            if setting == "before":
                label += " (identity ops as before #19395)"
            out.append((rev, setting, label))
    return out


def profile(model: str, *, executorch=None, revs=(None,), settings=None, runs: int = 20, warmup: int = 3,
            model_kwargs=None, input_shape=None, out_dir=None, runtime=None, device=None,
            warm_seconds: float = 1.5, quiet: bool = False, lowered=None) -> Profile:
    """Lower `model` with each revision's ET-VK Python and run it on ET-VK's runtime; per-dispatch rows.
    The three stages (:func:`lower`, :func:`execute`, :func:`read`) also run apart: lowered here, executed on
    another machine (``workbench etvk execute``), read back here. `lowered`: the folder ``workbench etvk lower
    MODEL --out FOLDER`` wrote on another machine; its programs run here as they are, nothing is lowered (a GPU
    host without ExecuTorch's Python)."""
    echo = _echo(quiet)
    if runs < 1 or warmup < 0:
        raise ValueError(f"runs must be >= 1 and warmup >= 0, got runs={runs}, warmup={warmup}")
    base = Path(out_dir) if out_dir else Path.home() / ".cache" / "workbench" / "etvk-profile" / model
    if lowered is not None:
        sides = lowered_sides(lowered, model, revs=revs, settings=settings, input_shape=input_shape, out_dir=base)
        echo(f"{model}: programs lowered elsewhere, from {lowered}")
    else:
        sides = lower(model, executorch=executorch, revs=revs, settings=settings, model_kwargs=model_kwargs,
                      input_shape=input_shape, out_dir=base, quiet=quiet)
    for side in sides:
        built, note = _runtime_for(executorch, side["rev"], runtime, echo)
        execute(side["folder"], built, runs=runs, warmup=warmup, device=device, warm_seconds=warm_seconds,
                note=note, quiet=quiet)
    return read([side["folder"] for side in sides])


def _echo(quiet):
    import sys
    return (lambda *_: None) if quiet else (lambda m: print(m, file=sys.stderr, flush=True))


def lower(model: str, *, executorch=None, revs=(None,), settings=None, model_kwargs=None, input_shape=None,
          out_dir, quiet: bool = False) -> list[dict]:
    """Stage 1: the model lowered by each side's ET-VK Python into `out_dir`/<side>/ (a .pte, inputs, the torch
    reference, summary.json with the side's label). Returns [{"rev", "setting", "label", "folder"}]."""
    echo = _echo(quiet)
    kwargs = dict(model_kwargs or {})
    if input_shape is not None:
        kwargs["input_shape"] = list(input_shape)
    out = []
    for rev, setting, label in cases(revs, settings):
        folder = Path(out_dir) / _side_folder(rev, setting)
        echo(f"{model} @ {label}: lowering with that revision's ET-VK Python …")
        program = R.lower(model, executorch=executorch, rev=rev, out_dir=folder, model_kwargs=kwargs,
                          setting=setting)
        program.summary["side_label"] = label
        (folder / "summary.json").write_text(json.dumps(program.summary, indent=1, default=str))
        out.append({"rev": rev, "setting": setting, "label": label, "folder": folder})
    return out


def _side_folder(rev, setting) -> str:
    return (rev or "working-tree") + ("-before" if setting == "before" else "")


LOWERED_FILES = ("summary.json", "model.pte", "reference.pt")   # and the summary's input files


def lowered_sides(lowered, model: str, *, revs=(None,), settings=None, input_shape=None, out_dir) -> list[dict]:
    """The sides :func:`lower` wrote into `lowered` (one subfolder per side), checked against what is asked and
    copied into `out_dir` (the run's outputs go beside them there, not into the given folder)."""
    import shutil
    lowered = Path(lowered)
    out = []
    for rev, setting, label in cases(revs, settings):
        name = _side_folder(rev, setting)
        folder = lowered / name
        if not (folder / "summary.json").is_file():
            found = sorted(p.parent.name for p in lowered.glob("*/summary.json"))
            raise FileNotFoundError(f"no lowered program for {label} in {lowered}: expected the subfolder {name!r} "
                                    f"(`workbench etvk lower {model} --out {lowered}` writes it), found "
                                    f"{found or 'none'}")
        summary = json.loads((folder / "summary.json").read_text())
        if summary["model"] != model:
            raise ValueError(f"{folder} holds {summary['model']!r}, not the model asked for ({model!r})")
        if input_shape is not None and list(summary["input_shapes"][0]) != list(input_shape):
            raise ValueError(f"{folder} was lowered for input {summary['input_shapes'][0]}, not {list(input_shape)}")
        missing = [f for f in LOWERED_FILES + tuple(summary["input_files"]) if not (folder / f).is_file()]
        if missing:
            raise FileNotFoundError(f"{folder} is not a whole lowered program: {missing} missing")
        target = Path(out_dir) / name
        if target.resolve() != folder.resolve():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            for f in folder.iterdir():
                if f.is_file() and not f.name.startswith(("run.", "output-")):
                    shutil.copy2(f, target / f.name)
        out.append({"rev": rev, "setting": setting, "label": label, "folder": target})
    return out


def execute(folder, runtime, *, runs: int = 20, warmup: int = 3, device=None, warm_seconds: float = 1.5,
            note: str = "", quiet: bool = False) -> RT.RunResult:
    """Stage 2: the lowered program in `folder` run ``warmup + runs`` times on `runtime` (a Runtime, or the path
    of an executor_runner) on this machine's Vulkan device; writes run.etdp, the outputs and run.json (the device,
    driver, clocks, commit, the runtime's commit and the counts) beside the program. Needs no ExecuTorch Python."""
    from ... import vk
    from ...measure import environment
    folder = Path(folder)
    summary = json.loads((folder / "summary.json").read_text())
    program = R.Program(folder / "model.pte", [folder / n for n in summary["input_files"]],
                        folder / "reference.pt", summary)
    built = runtime if isinstance(runtime, B.Runtime) else B.from_path(runtime)
    device = device or vk.get_device()
    env = environment(device)
    _echo(quiet)(f"{summary['model']} @ {summary.get('side_label', summary['revision'])}: {warmup + runs} "
                 f"executions on ET-VK's runtime {built.short} ({env['device']}) …")
    warm_gpu(device, warm_seconds)
    from ...measure import ClockSampler
    with ClockSampler(device, interval_ms=20) as clocks:     # the SM clock the runtime's executions ran at
        result = RT.run(built, program, executions=warmup + runs, out_dir=folder)
    env.update({f"etvk_{k}": v for k, v in clocks.columns().items()})
    (folder / "run.json").write_text(json.dumps({**env, "runs": runs, "warmup": warmup, "runtime_commit": built.commit,
                                                 "runtime_note": note, "seconds": round(result.seconds, 2),
                                                 "validation_messages": result.validation}, indent=1))
    return result


def read(folders) -> Profile:
    """Stage 3: the rows of executed programs (each folder holds summary.json, run.json, run.etdp, outputs)."""
    import torch
    dispatches, phases, kernels, outputs, programs, results = [], [], [], [], {}, {}
    model = None
    for folder in map(Path, folders):
        summary = json.loads((folder / "summary.json").read_text())
        if not (folder / "run.json").is_file():
            raise FileNotFoundError(f"{folder} has not been executed (no run.json): run profile.execute on it")
        run = json.loads((folder / "run.json").read_text())
        program = R.Program(folder / "model.pte", [folder / n for n in summary["input_files"]],
                            folder / "reference.pt", summary)
        label = summary.get("side_label", summary["revision"])
        model = summary["model"]
        etdump = folder / "run.etdp"
        frame = E.inspector_frame(etdump)
        table = E.dispatch_table(E.dispatch_rows(etdump, frame), warmup=run["warmup"])
        columns = {"model": model, "revision": label, "identity_ops": summary["setting"],
                   "etvk_commit": summary["commit"], "etvk_python": summary["etvk_python"],
                   "runtime_commit": run["runtime_commit"],
                   "runtime_note": run.get("runtime_note") or (
                       "" if run["runtime_commit"] == summary["commit"] else
                       f"lowered by {summary['commit'][:10]}'s ET-VK Python, run on the runtime built at "
                       f"{str(run['runtime_commit'])[:10]}"),
                   "input_shape": "x".join(map(str, summary["input_shapes"][0])), "device": run["device"],
                   "driver": run["driver"], "driver_info": run["driver_info"], "commit": run["commit"],
                   "date": run["date"], **({"sm_clock_mhz_at_start": run["sm_clock_mhz_at_start"]}
                                           if "sm_clock_mhz_at_start" in run else {})}
        dispatches.append(table.assign(**columns))
        phases.append(E.phase_table(E.phase_rows(etdump, frame), warmup=run["warmup"]).assign(**columns))
        kernels.append(E.kernel_table(table).assign(**columns))
        reference = torch.load(program.reference)
        got = RT.read_outputs(folder, summary)
        for i, (g, want) in enumerate(zip(got, reference)):
            diff = (g.double() - want.double()).abs()
            outputs.append({**columns, "output": i, "shape": "x".join(map(str, want.shape)),
                            "max_abs_diff": float(diff.max()), "mean_abs_diff": float(diff.mean()),
                            "reference_abs_max": float(want.abs().max()),
                            "validation_messages": len(run.get("validation_messages", []))})
        programs[label] = program
    if not programs:
        raise ValueError("no executed programs given")
    return Profile(model, pd.concat(dispatches, ignore_index=True), pd.concat(phases, ignore_index=True),
                   pd.concat(kernels, ignore_index=True), pd.DataFrame(outputs), programs, results)
