"""`tune(kernel)`: one TPE search per device over the kernel's space, candidates measured on the devices of a Dask
cluster (one worker per device; a round sends each device as many candidates as it has workers) or in this process;
every trial a tidy row, written as it is recorded to data/<device>/tune_<kernel>.csv.

    result = tune("conv-pw", budget=6, seed=0)                 # local cluster: one worker per local GPU / lavapipe
    result = tune("pixel-shuffle", here=True, shape=(1, 96, 64, 36))
    result.frame      # every trial of every device; result.best: the pick per device
    grid = exhaustive("conv-pw", here=True)                    # every valid config, measured the same way

Trial columns (beside the measurement's own: median_us, spread_pct, p10_us, …, device, driver, commit, date):
tuned, trial, config, the parameters, state (complete | wrong | failed | invalid | invalid on device | repeat),
objective_us (the value the study was told: median_us of a correct measurement, NaN otherwise), best_so_far_us,
evaluations (measurements spent so far), budget, grid_size (valid configs), seed, sampler, proposed_by, note,
device_key.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .candidates import QUICK_TIMING, CandidateSweep
from .search import Outcome, Search, TrialRecord
from .space import config_label, tuning_space

__all__ = ["tune", "exhaustive", "TuneResult", "default_budget", "outcome_of", "SAMPLER", "BUDGET_FRACTION"]

SAMPLER = "optuna TPE (multivariate, constant liar, constraints)"
BUDGET_FRACTION = 0.25   # the goal: within 3 % of the exhaustive best in at most a quarter of the grid


CONFIRM_FRACTION = 0.1   # of the budget: the best candidates measured again before the pick


def default_budget(space) -> int:
    """A quarter of the valid grid (rounded down, at least 1)."""
    return max(1, int(BUDGET_FRACTION * len(space.valid())))


@dataclass
class TuneResult:
    frame: pd.DataFrame                  # one row per trial (or per measured config, for `exhaustive`)
    best: pd.DataFrame                   # per device key: the pick
    kernel: str
    space: object
    where: str
    wall_s: float
    paths: dict = field(default_factory=dict)   # device key -> CSV path written


def outcome_of(rows: list[dict]) -> Outcome:
    """A candidate's rows (one, from CandidateSweep) -> what the study is told."""
    row = rows[0] if rows else {}
    if isinstance(row.get("invalid"), str):
        return Outcome(state="invalid on device", note=row["invalid"], rows=rows)
    if isinstance(row.get("error"), str):
        return Outcome(state="failed", note=row["error"], rows=rows)
    median = row.get("median_us", np.nan)
    if not row.get("correct", False):
        return Outcome(state="wrong", note="output differs from the reference on this device", rows=rows)
    if not (isinstance(median, (int, float)) and math.isfinite(median) and median > 0):
        return Outcome(state="failed", note=f"no usable time (median_us={median!r})", rows=rows)
    return Outcome(value=float(median), rows=rows)


def _evaluator(here: bool, device, scheduler, workers, devices):
    from .evaluate import DaskDevices, InProcess
    if here:
        from .. import vk
        if device is not None and not isinstance(device, str | int):
            vk_device = device
        else:
            vk_device = vk.get_device() if device is None else vk.set_device(device)
        return InProcess(vk_device)
    return DaskDevices(scheduler=scheduler, workers=workers, devices=devices)


def _writers(kernel: str, stem_suffix: str, keys, out, metadata: dict) -> dict:
    from ..measure import REPO, ResultsWriter, results_folder_name
    writers = {}
    for key in keys:
        folder = Path(out) if out is not None and len(keys) == 1 else \
            (Path(out) if out is not None else REPO / "data") / results_folder_name(key)
        writers[key] = ResultsWriter(folder / f"tune_{kernel.replace('-', '_')}{stem_suffix}",
                                     {**metadata, "device_key": key})
    return writers


def _trial_row(record, key: str, search: Search, extra: dict, env: dict) -> dict:
    measured = dict(record.rows[0]) if record.rows else {}
    objective = record.value if record.state in ("complete", "confirm") and math.isfinite(record.value) else np.nan
    row = {**measured}
    row.update({"tuned": search.space.kernel, "trial": record.trial, "config": config_label(record.config),
                **record.config, **search.space.describe(), "state": record.state, "objective_us": objective,
                "best_so_far_us": record.best_so_far if math.isfinite(record.best_so_far) else np.nan,
                "evaluations": record.evaluations, "proposed_by": record.proposed_by, "note": record.note,
                "device_key": key, **extra})
    if record.state in ("repeat", "invalid") or "device" not in measured:  # nothing measured in this trial
        for name in ("median_us", "p10_us", "p90_us", "spread_pct"):
            row.setdefault(name, np.nan)
        row.update({k: v for k, v in env.items() if k not in measured})
    return row


def tune(kernel: str, *, budget: int | None = None, seed: int = 0, devices=None, workers=None,
         scheduler: str | None = None, here: bool = False, device=None, quick: bool = False, out=None,
         write: bool = True, show_progress: bool = True, evaluator=None, **problem) -> TuneResult:
    """Tune `kernel` (a name of tune.space.SPACES) on every device of the cluster (or this process's, `here`).

    budget: measurements per device (default a quarter of the valid grid); seed: the sampler's; devices: keep
    device keys containing one of these; workers / scheduler: as `workbench sweep` (local cluster selectors, or
    an existing cluster's address); quick: a few short samples per candidate (tests); out: results folder
    (default data/<device>/); write=False writes nothing; evaluator: an open InProcess / DaskDevices to reuse;
    problem: the space's problem (shape=..., the kernel's options)."""
    from ..measure import git_commit, progress
    space = tuning_space(kernel, **problem)
    budget = default_budget(space) if budget is None else budget
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive int (measurements per device), got {budget!r}")
    confirm = confirm_share(budget)
    sweep = CandidateSweep(kernel, tuple(space.problem.items()), QUICK_TIMING if quick else ())
    start = time.perf_counter()
    own = evaluator is None
    ev = _evaluator(here, device, scheduler, workers, devices) if own else evaluator
    try:
        searches = {key: Search(space, budget - confirm, seed) for key in sorted(ev.devices)}
        extra = {"budget": budget, "grid_size": len(searches[next(iter(searches))].valid), "seed": seed,
                 "sampler": SAMPLER}
        commit = git_commit()
        envs = {key: {**ev.env.get(key, {"device": key}), "commit": commit} for key in searches}
        writers = _writers(kernel, "", list(searches), out, {"tuned": kernel, "problem": space.describe(),
                                                             "budget": budget, "seed": seed,
                                                             "sampler": SAMPLER}) if write else {}
        rows: list[dict] = []
        written = {key: 0 for key in searches}
        bar = progress(range(budget * len(searches)), f"tune {kernel} ({ev.description})",
                       total=budget * len(searches), enabled=show_progress)

        def flush():
            for key, search in searches.items():
                for record in search.trials[written[key]:]:
                    row = _trial_row(record, key, search, extra, envs[key])
                    rows.append(row)
                    if key in writers:
                        writers[key].append(row)
                    if hasattr(bar, "update") and record.state in ("complete", "wrong", "failed"):
                        bar.update(1)
                written[key] = len(search.trials)

        try:
            while True:
                requests, owners = [], []
                for key, search in searches.items():
                    if not search.done:
                        for number, config in search.propose(ev.devices[key]):
                            requests.append((key, config))
                            owners.append((key, number))
                flush()
                if not requests:
                    break
                for (key, number), got in zip(owners, ev.evaluate(sweep, requests)):
                    searches[key].report([(number, outcome_of(got))])
                flush()
            if confirm:
                _confirm(searches, ev, sweep, confirm, extra, envs, rows, writers, bar)
        finally:
            _close(bar, writers)
        frame = pd.DataFrame(rows)
        best = pd.DataFrame([_best_row(key, s, frame) for key, s in searches.items()]).assign(budget=budget)
        return TuneResult(frame, best, kernel, space, ev.description, time.perf_counter() - start,
                          {k: w.csv_path for k, w in writers.items()})
    finally:
        if own:
            ev.close()


def _close(bar, writers) -> None:
    if hasattr(bar, "close"):
        bar.close()
    for w in writers.values():
        w.close()


def confirm_share(budget: int) -> int:
    """Measurements kept back from the search to measure its best candidates again (CONFIRM_FRACTION of the
    budget, none below 10): on a noisy device one lucky sample must not decide the pick."""
    return int(CONFIRM_FRACTION * budget) if budget >= 10 else 0


def pick_of(trials: pd.DataFrame) -> tuple[str | None, float]:
    """The pick of a device's trial rows: the config with the lowest median over its measurements (search and
    confirmation rows), and that median."""
    measured = trials["state"].isin(["complete", "confirm"]) if "state" in trials else True
    ok = trials[measured & trials["objective_us"].notna()]
    if ok.empty:
        return None, np.nan
    medians = ok.groupby("config")["objective_us"].median()
    return medians.idxmin(), float(medians.min())


def _confirm(searches, ev, sweep, confirm: int, extra, envs, rows, writers, bar) -> None:
    """Measure the best `confirm // 2` candidates of each search twice more (rows with state "confirm")."""
    plans = {}
    for key, search in searches.items():
        done = sorted((t for t in search.trials if t.state == "complete" and math.isfinite(t.value)),
                      key=lambda t: t.value)
        top, seen = [], set()
        for t in done:
            label = config_label(t.config)
            if label not in seen:
                seen.add(label)
                top.append(t.config)
        top = top[:max(1, confirm // 2)]
        plans[key] = [c for c in top for _ in range(2)][:confirm]
    requests = [(key, config) for key, configs in plans.items() for config in configs]
    numbers = {key: len(search.trials) for key, search in searches.items()}   # after the search's own trials
    for (key, config), got in zip(requests, ev.evaluate(sweep, requests)):
        search = searches[key]
        outcome = outcome_of(got)
        search.evaluations += 1
        record = TrialRecord(numbers[key], dict(config), "confirm" if outcome.state == "complete" else outcome.state,
                             outcome.value if outcome.value is not None else math.inf, search.evaluations, math.nan,
                             "confirm", outcome.note, list(outcome.rows))
        numbers[key] += 1
        row = _trial_row(record, key, search, extra, envs[key])
        rows.append(row)
        if key in writers:
            writers[key].append(row)
        if hasattr(bar, "update"):
            bar.update(1)


def _best_row(key: str, search: Search, frame: pd.DataFrame | None = None) -> dict:
    row = {"device_key": key, "evaluations": search.evaluations, "budget": search.budget,
           "grid_size": len(search.valid)}
    trials = frame[frame["device_key"] == key] if frame is not None and len(frame) else None
    label, value = pick_of(trials) if trials is not None else (None, np.nan)
    best = next((t for t in search.trials if config_label(t.config) == label), None) if label else search.best
    if best is None:
        return {**row, "config": None, "median_us": np.nan}
    value = value if label else best.value
    return {**row, "config": config_label(best.config), **best.config, "median_us": value,
            "found_at": next(t.evaluations for t in search.trials if config_label(t.config) ==
                             config_label(best.config))}


def precompile(space, grid, *, jobs: int | None = None, show_progress: bool = False) -> int:
    """Compile every config's shader variant into the disk cache with `jobs` compilers at once (default: the CPU
    count), so an exhaustive run measures instead of waiting on glslc one variant at a time. Returns the number of
    distinct variants."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    from ..measure import progress
    from ..toolchain.shaders import compile_shader
    variants = {}
    for config in grid:
        spec = space.check(config)
        defines = spec.defines() if callable(getattr(spec, "defines", None)) else getattr(spec, "defines", None)
        shader = getattr(spec, "shader", space.shader)
        variants[(shader, tuple(sorted((defines or {}).items())))] = (shader, dict(defines or {}))
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
        done = pool.map(lambda item: compile_shader(item[0], defines=item[1] or None), variants.values())
        for _ in progress(done, f"compiling {space.kernel}", total=len(variants), enabled=show_progress):
            pass
    return len(variants)


def exhaustive(kernel: str, *, devices=None, workers=None, scheduler: str | None = None, here: bool = False,
               device=None, quick: bool = False, out=None, write: bool = True, show_progress: bool = True,
               evaluator=None, **problem) -> TuneResult:
    """Every valid config of the space measured once per device, the same way `tune` measures a candidate (the
    reference the tuner is judged against) → rows written to data/<device>/tune_<kernel>_exhaustive.csv."""
    from ..measure import progress
    space = tuning_space(kernel, **problem)
    grid = space.valid()
    sweep = CandidateSweep(kernel, tuple(space.problem.items()), QUICK_TIMING if quick else ())
    start = time.perf_counter()
    if scheduler is None:  # this host's workers share the disk cache: compile the whole grid at once, in parallel
        precompile(space, grid, show_progress=show_progress)
    own = evaluator is None
    ev = _evaluator(here, device, scheduler, workers, devices) if own else evaluator
    try:
        keys = sorted(ev.devices)
        writers = _writers(kernel, "_exhaustive", keys, out, {"tuned": kernel, "problem": space.describe(),
                                                              "grid_size": len(grid)}) if write else {}
        # one round = one config per worker of every device
        queue = {key: list(grid) for key in keys}
        rows = []
        bar = progress(range(len(grid) * len(keys)), f"exhaustive {kernel}", total=len(grid) * len(keys),
                       enabled=show_progress)
        try:
            while any(queue.values()):
                requests = [(key, queue[key].pop(0)) for key in keys for _ in range(ev.devices[key]) if queue[key]]
                for (key, config), got in zip(requests, ev.evaluate(sweep, requests)):
                    outcome = outcome_of(got)
                    row = {**(got[0] if got else {}), "tuned": kernel, "config": config_label(config), **config,
                           "state": outcome.state, "objective_us": outcome.value if outcome.value else np.nan,
                           "grid_size": len(grid), "device_key": key, "note": outcome.note}
                    rows.append(row)
                    if key in writers:
                        writers[key].append(row)
                    if hasattr(bar, "update"):
                        bar.update(1)
        finally:
            _close(bar, writers)
        frame = pd.DataFrame(rows)
        best = []
        for key, group in frame.groupby("device_key"):
            ok = group[group["objective_us"].notna()]
            pick = ok.loc[ok["objective_us"].idxmin()] if len(ok) else None
            best.append({"device_key": key, "evaluations": len(group), "grid_size": len(grid),
                         "config": None if pick is None else pick["config"],
                         "median_us": np.nan if pick is None else pick["objective_us"]})
        return TuneResult(frame, pd.DataFrame(best), kernel, space, ev.description, time.perf_counter() - start,
                          {k: w.csv_path for k, w in writers.items()})
    finally:
        if own:
            ev.close()
