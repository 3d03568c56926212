"""Fidelity from captures: each dispatch of one execution of a model on ET-VK's runtime, captured (its own SPIR-V,
constants, bindings and data: `workbench.capture`), replayed alone through the workbench's one launch path and timed
the ways :mod:`.fidelity` times the hand-ported families, beside ET-VK's own GPU time for it (its ETDump).

    timed = capture_fidelity.measure_models({"mobilenet_v2": folder}, runtime, "capfid/")   # here or on a GPU host
    rows, summary = capture_fidelity.fidelity(["capfid/"])      # needs ExecuTorch's Inspector (the ETDumps)
    capture_fidelity.pack("capfid/", "capture_fidelity.tar")     # what a host without ExecuTorch sends back

    workbench capture fidelity DIR… [--csv F] [--summary-csv F] [--ways warm,cold]

A DIR is a results folder (or its tar) that `measure_models` wrote (``timed.csv`` and one folder per model), or a
capture folder of ET-VK's runtime (`capture_join.capture_program`) whose execution dispatches are timed now.

The ways (:data:`WAYS`; :mod:`.fidelity`'s method, so the two tables compare): compiled, the GPU kept busy for
`warm_seconds`, then `back_to_back` copies of the dispatch per submit, ET-VK's timestamp placement (the barrier inside
the interval), light barriers; "warm": nothing between the copies (the dispatch's inputs stay in the last-level
cache); "cold": another pipeline streams `cold_between` (default 128 MiB) before each copy, as a model's other ops
evict its inputs. ET-VK's time: the median over the runner's executions after its warm-up (`program/run.json`, from
`profile.execute`), or the captured execution alone where the folder has no such run.

A model's folder: the capture (or, as sent back, only ``capture.json``, ``dispatches.csv`` — `capture.open`'s rows —
and ``run.etdp``), and ``program/`` with ``summary.json``, ``run.json`` and ``run.etdp`` of the timed executions.
Which dispatches an execution made is read on the host from the ETDump's own strings (:func:`etdump_kernels`: the
host has no ExecuTorch), joined here again by ExecuTorch's Inspector (`capture_join.join_events`).
"""
from __future__ import annotations

import json
import shutil
import struct
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from ...capture import timeline
from ...measure.ways import WAY_COLUMNS
from . import capture_join, drill, fidelity

IN_ORDER = timeline.WAY["way"]
# the whole execution replayed as the runtime submits it (`capture.timeline`): one command buffer, in order
WAYS = {"warm": fidelity.WARM, "cold": fidelity.COLD,
        IN_ORDER: {k: timeline.WAY[k] for k in ("timestamps", "barriers", "between")}}
COLD_BETWEEN = fidelity.COLD["between"]
TIMED_NAME = "timed.csv"              # the timing rows of a results folder
DISPATCHES_NAME = "dispatches.csv"    # capture.open's rows of a model's capture (what the join needs of it)
PROGRAM_DIR = "program"               # the lowered program, run by profile.execute: ET-VK's times
CAPTURED_ETDUMP = "run.etdp"          # the captured execution's ETDump (capture_program)
TABLE_COLUMNS = ["model", "order", "dispatch", "variant", "family", "operator", "kernel", "way", "etvk_us",
                 "etvk_runs", "replay_us", "ratio", "within_10pct", "exact", "replay_p10_us", "replay_p90_us",
                 "samples", "timestamps", "barriers", "memory", "between", "back_to_back", "chains", "burst",
                 "replay_sm_clock_mhz",
                 "etvk_sm_clock_mhz", "clocks_match", "etvk_from", "joined_by", "reason", "device", "driver", "commit"]
#: the replay's SM clock and ET-VK's agree within this fraction: a row outside it compares two clocks, not two
#: runs of the same work (flagged in `clocks_match`, its own share in the summary); None where a side has no clock
CLOCKS_MATCH = 0.05
PACKED = (TIMED_NAME, f"*/{DISPATCHES_NAME}", "*/capture.json", f"*/{CAPTURED_ETDUMP}",
          f"*/{PROGRAM_DIR}/summary.json", f"*/{PROGRAM_DIR}/run.json", f"*/{PROGRAM_DIR}/run.etdp")


def ways_of(names=("warm", "cold"), *, cold_between: str = COLD_BETWEEN, back_to_back: int = 20) -> dict:
    """{way name: `measure.Way`} for the names of :data:`WAYS`; "cold" streams `cold_between` between copies."""
    from ...measure import Way
    unknown = [n for n in names if n not in WAYS]
    if unknown or not names:
        raise ValueError(f"expected ways among {', '.join(WAYS)}, got {', '.join(map(str, names)) or 'none'}")
    out = {}
    for name in dict.fromkeys(names):
        if name == IN_ORDER:  # no `Way`: the execution's own order is the recording (`capture.timeline`)
            out[name] = None
            continue
        way = {**WAYS[name], **({"between": cold_between} if name == "cold" else {})}
        out[name] = Way.named(way["timestamps"], way["barriers"], way["between"], back_to_back)
    return out


# --- which dispatches an execution made: the ETDump's strings, for a host without ExecuTorch ------------------------

def etdump_kernels(etdump) -> list[str]:
    """ET-VK's kernel name of each dispatch of an execution (by dispatch_id), read from the flatbuffer strings of an
    ETDump (each a little-endian length, the bytes, a NUL) that are ET-VK's dispatch events (`events.parse_event_name`):
    what a host without ExecuTorch's Inspector can know of the ETDump."""
    from .events import EtdumpError, parse_event_name
    path = Path(etdump)
    if not path.is_file():
        raise EtdumpError(f"expected an ETDump at {path}, found none")
    data = path.read_bytes()
    kernels: dict[int, str] = {}
    start = data.find(b'{"', 4)
    while start != -1:
        (length,) = struct.unpack_from("<I", data, start - 4)
        end = start + length
        if end < len(data) and data[end] == 0:
            fields = parse_event_name(data[start:end].decode("utf-8", "replace"))
            if fields is not None:
                kernels[fields["dispatch_id"]] = fields["kernel"]
        start = data.find(b'{"', start + 2)
    if not kernels or sorted(kernels) != list(range(len(kernels))):
        raise EtdumpError(f"expected ET-VK's dispatch events 0..N in {path}, found "
                          f"{sorted(kernels)[:8] if kernels else 'none'}")
    return [kernels[i] for i in range(len(kernels))]


def execution_dispatches(frame: pd.DataFrame, kernels: list[str]) -> list[int]:
    """The capture's dispatch numbers of the execution whose kernels the ETDump names (`capture_join.align`)."""
    variants = frame["variant"].fillna("").astype(str).tolist() if "variant" in frame else [""] * len(frame)
    offset, _ = capture_join.align(variants, kernels)
    return frame["dispatch"].iloc[offset:offset + len(kernels)].astype(int).tolist()


# --- timing ------------------------------------------------------------------------------------------------------

def sampling_options(quick: bool = False, samples: int | None = None) -> dict:
    """`sample_recording`'s options: :mod:`.fidelity`'s (at least 0.2 s of samples), a few (`quick`), or exactly
    `samples` after one warm-up submit (a CPU device shared with other work, where a cold way's streaming between
    copies costs more than the time-based count can afford)."""
    from ...measure import sampling
    if samples is not None:
        if samples < 1:
            raise ValueError(f"samples must be >= 1, got {samples}")
        return {"min_samples": samples, "max_samples": samples, "min_time_s": 0.0, "warmup": 1}
    return sampling(True) if quick else {"min_time_s": 0.2, "max_time_s": 5.0}    # fidelity's (etvk.run.execute)


def time_dispatch(device, d, ways: dict, *, warm_seconds: float = 1.0, sampling: dict | None = None) -> list[dict]:
    ways = {name: way for name, way in ways.items() if way is not None}  # in-order: `time_capture`
    """One captured dispatch: replayed once against its captured outputs (`exact`), then, its pipeline made and the
    GPU kept busy for `warm_seconds`, timed each way (`ways_of`; `sampling`: :func:`sampling_options`): a row per
    way (median, p10, p90 µs per copy)."""
    from ... import vk
    from ...capture.replay import NotReplayable, launch_of, replay_one, running
    from ...measure import environment, measurement_row
    from ...kernels.copy import copy_recorder
    from .profile import warm_gpu
    head = {"dispatch": d.dispatch, "pipeline": d.spirv_hash}
    checked = replay_one(device, d, time_it=False)
    if checked["reason"]:
        return [{**head, "way": name, "exact": False, "reason": checked["reason"]} for name in ways]
    options = sampling or sampling_options()
    rows = []
    try:
        launch, _ = launch_of(device, d)
    except (NotReplayable, ValueError, vk.VulkanError) as exc:
        return [{**head, "way": name, "exact": False, "reason": str(exc)} for name in ways]
    with running(device, launch) as launches:
        warm_gpu(device, warm_seconds)          # the pipeline is made: nothing idles between warm-up and timing
        env = environment(device)
        for name, way in ways.items():
            gpu, host = way.sample(device, launches.record, label=launch.title,
                                   shader_copy=copy_recorder(device), **options)
            row = measurement_row(launch.title, env, gpu, host_ns=host,
                                  bytes_moved=sum(b.size or 0 for b in d.bindings))
            rows.append({**head, "way": name, "exact": checked["exact"], "reason": "",
                         "timestamps": "etvk" if way.barrier_timed else "workbench",
                         "barriers": "full" if way.full_barriers else "light", **way.columns(),
                         **{k: v for k, v in row.items() if k != "kernel"}})
    return rows


def time_capture(folder, dispatches, *, ways: dict, warm_seconds: float = 1.0, sampling: dict | None = None,
                 device=None, echo=None, in_order: dict | None = None) -> pd.DataFrame:
    """The `dispatches` (numbers) of a capture folder timed each way (:func:`time_dispatch`), a row per
    dispatch and way; `replay_us` is the median µs per copy."""
    from ... import capture, vk
    device = device or vk.get_device()
    wanted = set(int(n) for n in dispatches)
    found = [d for d in capture.dispatches(folder) if d.dispatch in wanted]
    rows = []
    if IN_ORDER in ways:
        options = dict(in_order or {})
        listed = {k: [options.pop(k)] if isinstance(options.get(k), str) else list(options.pop(k, [default]))
                  for k, default in (("barriers", "captured"), ("memory", "pooled"))}
        for barriers in listed["barriers"]:
            for memory in listed["memory"]:
                timed = timeline.time_in_order(device, found, sampling=sampling, barriers=barriers, memory=memory,
                                               **options)
                if echo:
                    echo(f"{Path(folder).name}: {len(found)} dispatches in order ({timed['barriers'].iloc[0]} "
                         f"barriers, {memory} memory), {timed['median_us'].sum():.1f} µs, "
                         f"exact {bool(timed['exact'].all())}")
                rows.extend(timed.to_dict("records"))
        if all(way is None for way in ways.values()):
            found = []
    for n, d in enumerate(found, 1):
        got = time_dispatch(device, d, ways, warm_seconds=warm_seconds, sampling=sampling)
        rows.extend(got)
        if echo:
            times = ", ".join(f"{r['way']} {r['median_us']:.1f}" for r in got if "median_us" in r)
            echo(f"{Path(folder).name}: {n}/{len(found)} dispatch {d.dispatch}: {times or got[0]['reason']} µs")
    return pd.DataFrame(rows).rename(columns={"median_us": "replay_us", "p10_us": "replay_p10_us",
                                              "p90_us": "replay_p90_us", "min_us": "replay_min_us"})


# --- measuring models: capture, ET-VK's own times, the replays -----------------------------------------------------

def measure_model(folder, model: str, program, runtime, *, names: dict | None = None, ways: dict,
                  runs: int = 20, warmup: int = 3, warm_seconds: float = 1.0, sampling: dict | None = None,
                  device=None, echo=None, in_order: dict | None = None) -> pd.DataFrame:
    """One model into `folder`: captured on `runtime` (`capture_join.capture_program`), its lowered program run
    ``warmup + runs`` times for ET-VK's own times (`profile.execute`, into ``folder/program``), the capture's
    rows written (``dispatches.csv``), then the dispatches of the captured execution timed (:func:`time_capture`)."""
    from ... import capture
    from .profile import execute
    folder = Path(folder)
    capture_join.capture_program(runtime, program, folder)
    copy = folder / PROGRAM_DIR
    shutil.rmtree(copy, ignore_errors=True)
    copy.mkdir()
    for path in [program.pte, *program.inputs, program.reference, Path(program.pte).parent / "summary.json"]:
        if Path(path).is_file():
            shutil.copy2(path, copy / Path(path).name)
    execute(copy, runtime, runs=runs, warmup=warmup, device=device, warm_seconds=warm_seconds, quiet=echo is None)
    frame = capture.open(folder, names=names)
    frame.to_csv(folder / DISPATCHES_NAME, index=False)
    chosen = execution_dispatches(frame, etdump_kernels(folder / CAPTURED_ETDUMP))
    timed = time_capture(folder, chosen, ways=ways, warm_seconds=warm_seconds, sampling=sampling, device=device,
                         echo=echo, in_order=in_order)
    return timed.assign(model=model)


def measure_models(lowered: dict, runtime, out_root, *, names: dict | None = None, ways=("warm", "cold"),
                   cold_between: str = COLD_BETWEEN, back_to_back: int = 20, runs: int = 20, warmup: int = 3,
                   warm_seconds: float = 1.0, quick: bool = False, samples: int | None = None, device=None,
                   tar=None, echo=None, in_order: dict | None = None) -> pd.DataFrame:
    """`lowered`: {model: `revision.Program` or a folder `etvk lower` wrote}. Each model measured into
    out_root/<model> (:func:`measure_model`; `quick`, `samples`: :func:`sampling_options`). As each model ends, the
    rows so far (with those of other models already in out_root/timed.csv) are written there and, given `tar`,
    packed (:func:`pack`): a run cut short keeps the models it finished. Returns this call's rows."""
    from ... import vk
    device = device or vk.get_device()
    chosen = ways_of(tuple(ways), cold_between=cold_between, back_to_back=back_to_back)
    options = sampling_options(quick, samples)
    out_root = Path(out_root)
    out_root.mkdir(parents=True, exist_ok=True)
    earlier = pd.read_csv(out_root / TIMED_NAME) if (out_root / TIMED_NAME).is_file() else pd.DataFrame()
    if not earlier.empty:
        earlier = earlier[~earlier["model"].isin(list(lowered))]
    tables = []
    for model, program in lowered.items():
        if not hasattr(program, "pte"):
            program = capture_join.lowered_program(program)
        tables.append(measure_model(out_root / model, model, program, runtime, names=names, ways=chosen, runs=runs,
                                    warmup=warmup, warm_seconds=warm_seconds, sampling=options, device=device,
                                    echo=echo, in_order=in_order))
        pd.concat([earlier, *tables], ignore_index=True).to_csv(out_root / TIMED_NAME, index=False)
        if tar is not None:
            pack(out_root, tar)
    return pd.concat(tables, ignore_index=True)


def pack(out_root, tar_path) -> Path:
    """The small files of a results folder (:data:`PACKED`: the timing rows, each model's capture rows, manifest and
    ETDumps) into one gzipped tar: what `fidelity_of` needs, without the captures' dumps."""
    out_root, tar_path = Path(out_root), Path(tar_path)
    with tarfile.open(tar_path, "w:gz") as tar:
        for pattern in PACKED:
            for path in sorted(out_root.glob(pattern)):
                tar.add(path, arcname=str(path.relative_to(out_root)))
    return tar_path


# --- the table ---------------------------------------------------------------------------------------------------

def etvk_times(model_dir) -> tuple[pd.DataFrame, str]:
    """(ET-VK's dispatches of one execution — `capture_join.EVENT_COLUMNS` with the median GPU µs — and where the
    times come from): the timed executions of ``program/`` after their warm-up, else the captured execution. The
    table's ``attrs["sm_clock_mhz"]``: the SM clock those executions ran at, where run.json recorded it."""
    from . import events as E
    model_dir = Path(model_dir)
    run = model_dir / PROGRAM_DIR / "run.json"
    clock = np.nan
    if run.is_file():
        meta = json.loads(run.read_text())
        table = E.dispatch_table(E.dispatch_rows(model_dir / PROGRAM_DIR / "run.etdp"), warmup=meta["warmup"])
        how = f"median of {meta['runs']} executions after {meta['warmup']}"
        clock = meta.get("etvk_sm_clock_mhz_median", np.nan)
    elif (model_dir / CAPTURED_ETDUMP).is_file():
        table = E.dispatch_table(E.dispatch_rows(model_dir / CAPTURED_ETDUMP), warmup=0)
        how = "the captured execution"
    else:
        raise ValueError(f"expected ET-VK's ETDump in {model_dir} ({PROGRAM_DIR}/run.etdp with run.json, or "
                         f"{CAPTURED_ETDUMP}), found neither")
    out = table.rename(columns={"gpu_us": "etvk_gpu_us"})[[*capture_join.EVENT_COLUMNS, "runs"]]
    out.attrs["sm_clock_mhz"] = clock
    return out, how


STAGING_KERNELS = ("nchw_to_", "image_to_nchw", "buffer_to_nchw")   # ET-VK's copies between host layout and tensors


def family_of(operator: str, kernel: str) -> str:
    """The hand-ported family of an ET-VK dispatch (`drill.FAMILY_OPTIONS`); "(staging)" for ET-VK's input / output
    copies (the output's is logged under the operator that made the tensor); else its operator."""
    if str(operator) == "(staging)" or str(kernel).startswith(STAGING_KERNELS):
        return "(staging)"
    key = drill.family_key(str(operator), str(kernel))
    return drill.FAMILY_OPTIONS[key][0] if key else str(operator)


def table(model: str, frame: pd.DataFrame, events: pd.DataFrame, timed: pd.DataFrame,
          etvk_from: str = "", etvk_clock: float = np.nan) -> pd.DataFrame:
    """A row per execution dispatch and way (:data:`TABLE_COLUMNS`): ET-VK's µs, the replay's, ratio = replay / ET-VK
    and whether it is within 10 % (:data:`fidelity.WITHIN`)."""
    joined = capture_join.join_events(frame.reset_index(drop=True), events[capture_join.EVENT_COLUMNS])
    joined["etvk_runs"] = joined["dispatch_id"].map(events.set_index("dispatch_id")["runs"])
    execute = joined[joined["phase"] == "execute"]
    timed = timed.drop(columns=[c for c in ("model", "pipeline") if c in timed])
    out = execute.drop(columns=["local_size"], errors="ignore").merge(timed, on="dispatch", how="left")
    out["model"] = model
    out["order"] = out["dispatch_id"].astype(int)
    out["variant"] = [v if isinstance(v, str) and v else k for v, k in zip(out["variant"], out["kernel"])]
    out["family"] = [family_of(o, k) for o, k in zip(out["operator"], out["kernel"])]
    out["etvk_us"] = pd.to_numeric(out["etvk_gpu_us"], errors="coerce")
    out["replay_us"] = pd.to_numeric(out.get("replay_us"), errors="coerce")
    out["ratio"] = out["replay_us"] / out["etvk_us"]
    out["within_10pct"] = (out["ratio"] - 1).abs() <= fidelity.WITHIN
    out["etvk_from"] = etvk_from
    out["replay_sm_clock_mhz"] = pd.to_numeric(out["sm_clock_mhz_median"], errors="coerce") \
        if "sm_clock_mhz_median" in out else np.nan
    out["etvk_sm_clock_mhz"] = etvk_clock
    both = out["replay_sm_clock_mhz"] / out["etvk_sm_clock_mhz"]
    out["clocks_match"] = [None if r != r else bool(abs(r - 1) <= CLOCKS_MATCH) for r in both]
    reasons = out["reason"] if "reason" in out else pd.Series([None] * len(out), index=out.index)
    out["reason"] = ["not timed (not among the timed dispatches)" if pd.isna(way) else ("" if pd.isna(r) else r)
                     for way, r in zip(out["way"] if "way" in out else [None] * len(out), reasons)]
    return out.reindex(columns=TABLE_COLUMNS)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per way, per family and "(all)": dispatches, median ratio with p10–p90, the share within 10 %, ET-VK's and
    the replays' µs summed, all exact (:func:`fidelity.summary` on these rows)."""
    # alone: an allocation each, one dispatch a chain
    whole = {"chains": 1, "burst": 0}  # one chain a submit, one sample set: what rows from before these columns had
    rows = rows.assign(memory=rows["memory"].astype(object).fillna("own") if "memory" in rows else "own",
                       **{c: pd.to_numeric(rows[c], errors="coerce").fillna(v).astype(int) if c in rows else v
                          for c, v in whole.items()})
    as_fidelity = rows.rename(columns={"etvk_us": "runtime_us", "replay_us": "workbench_us", "exact": "correct"})
    modes = list(WAY_COLUMNS)
    out = fidelity.summary(as_fidelity.dropna(subset=["ratio", *modes]))
    ways = rows.dropna(subset=modes).drop_duplicates(modes)[["way", *modes]]
    out = ways.merge(out, on=modes).rename(columns={"runtime_us": "etvk_us", "workbench_us": "replay_us",
                                                    "all_correct": "all_exact"})
    return out.sort_values(["way", "family"], key=lambda s: s.map(lambda v: (v == "(all)", v)), ignore_index=True)


def compare_handport(rows: pd.DataFrame, handport: pd.DataFrame) -> pd.DataFrame:
    """The capture rows beside the hand-ported family's where the same dispatch (model, ET-VK's dispatch_id) was
    timed the same way (`fidelity.table`'s rows): its family, µs and ratio to its own runtime time;
    `replay_vs_handport` where both were timed on the same device."""
    out = []
    for way, group in rows.groupby("way", sort=False):
        spec = {**WAYS[way], "between": group["between"].iloc[0]}
        hand = fidelity.timed_as(handport, **spec)[["model", "dispatch_id", "family", "workbench_us", "ratio",
                                                   "device"]]
        hand = hand.rename(columns={"dispatch_id": "order", "family": "handport_family",
                                    "workbench_us": "handport_us", "ratio": "handport_ratio",
                                    "device": "handport_device"}).drop_duplicates(["model", "order"])
        out.append(group.merge(hand, on=["model", "order"], how="inner"))
    both = pd.concat(out, ignore_index=True) if out else pd.DataFrame()
    if not both.empty:
        same = both["device"] == both["handport_device"]
        both["replay_vs_handport"] = np.where(same, both["replay_us"] / both["handport_us"], np.nan)
    return both


# --- reading results folders, tars and capture folders -------------------------------------------------------------

def _model_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob(f"*/{DISPATCHES_NAME}"))


def _results(root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    timed_all = pd.read_csv(root / TIMED_NAME)
    tables = []
    for model_dir in _model_dirs(root):
        model = model_dir.name
        frame = pd.read_csv(model_dir / DISPATCHES_NAME, dtype={"variant": str}, keep_default_na=False)
        events, how = etvk_times(model_dir)
        tables.append(table(model, frame, events, timed_all[timed_all["model"] == model], how,
                            events.attrs.get("sm_clock_mhz", np.nan)))
    if not tables:
        raise ValueError(f"expected a folder per model with {DISPATCHES_NAME} in {root} (measure_models writes "
                         "them), found none")
    return pd.concat(tables, ignore_index=True), timed_all


def _capture_folder(folder: Path, ways: dict, *, names, warm_seconds, sampling, device, echo,
                    in_order: dict | None = None) -> pd.DataFrame:
    from ... import capture
    if not (folder / "calls.jsonl").is_file():
        raise ValueError(f"expected a capture folder (calls.jsonl) or a results folder ({TIMED_NAME}) or its tar, "
                         f"got {folder}")
    events, how = etvk_times(folder)
    frame = capture.open(folder, names=names)
    chosen = execution_dispatches(frame, events["kernel"].tolist())
    timed = time_capture(folder, chosen, ways=ways, warm_seconds=warm_seconds, sampling=sampling, device=device,
                         echo=echo, in_order=in_order)
    model = json.loads((folder / PROGRAM_DIR / "summary.json").read_text())["model"] \
        if (folder / PROGRAM_DIR / "summary.json").is_file() else folder.name
    return table(model, frame, events, timed, how, events.attrs.get("sm_clock_mhz", np.nan))


def fidelity_of(paths, *, ways=("warm", "cold"), cold_between: str = COLD_BETWEEN, back_to_back: int = 20,
                warm_seconds: float = 1.0, quick: bool = False, samples: int | None = None, names: dict | None = None,
                device=None, echo=None, in_order: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows, summary) of results folders, their tars, or capture folders (timed now with `ways`, `cold_between`,
    `back_to_back`, `quick` / `samples`; a results folder keeps the ways it was timed with, of those asked)."""
    chosen = ways_of(tuple(ways), cold_between=cold_between, back_to_back=back_to_back)
    options = sampling_options(quick, samples)
    tables = []
    for path in map(Path, paths):
        if path.is_file() and tarfile.is_tarfile(path):
            with tempfile.TemporaryDirectory(prefix="workbench-capfid-") as tmp:
                with tarfile.open(path) as tar:
                    tar.extractall(tmp, filter="data")
                tables.append(_results(Path(tmp))[0])
        elif (path / TIMED_NAME).is_file():
            tables.append(_results(path)[0])
        elif path.is_dir():
            tables.append(_capture_folder(path, chosen, names=names, warm_seconds=warm_seconds, sampling=options,
                                          device=device, echo=echo, in_order=in_order))
        else:
            raise ValueError(f"expected a results folder ({TIMED_NAME}), its tar, or a capture folder, got {path} "
                             f"({'a file' if path.exists() else 'nothing there'})")
    rows = pd.concat(tables, ignore_index=True)
    rows = rows[rows["way"].isin(list(chosen)) | rows["way"].isna()].reset_index(drop=True)
    return rows, summary(rows)
