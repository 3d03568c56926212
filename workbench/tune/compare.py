"""The tuner against the exhaustive grid: how far its pick is from the best config, and how many measurements it
spent.

    compare(trials, grid)            # a live tune run against an exhaustive run of the same space and device
    simulate("conv-pw", grid, seeds=range(10))   # the optimiser alone: TPE searching the measured table itself

`compare` looks the tuner's pick up **in the exhaustive table** (not its own measurement of it): both sides then
come from one measurement per config, so run-to-run noise (large on lavapipe's 2 shared cores) cannot make the pick
look better or worse than the grid says. `simulate` runs the same Search with the exhaustive table as its objective
(Kernel Tuner's "simulation mode" over a cache file): it separates the optimiser's efficiency from measurement
noise and costs no device time, so many seeds are cheap.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .search import Outcome, minimize
from .space import config_label, tuning_space

__all__ = ["compare", "simulate", "table_objective", "GOAL_PCT", "GOAL_FRACTION"]

GOAL_PCT = 3.0          # within 3 % of the exhaustive best ...
GOAL_FRACTION = 0.25    # ... in at most a quarter of the grid's measurements


def _grid_times(grid: pd.DataFrame) -> pd.Series:
    if "config" not in grid or "objective_us" not in grid:
        raise ValueError(f"an exhaustive table needs columns config and objective_us (tune.exhaustive's rows); "
                         f"got {list(grid.columns)[:12]}…")
    return grid.set_index("config")["objective_us"]


def compare(trials: pd.DataFrame, grid: pd.DataFrame) -> pd.DataFrame:
    """Per device key (and seed): the tuner's pick, its time in the exhaustive table, the exhaustive best,
    pct_over_best = (pick / best − 1) · 100, its rank in the grid (1 = the best), the measurements spent and
    their fraction of the grid, and whether both goals hold (`within_goal`)."""
    from .tuner import pick_of
    for name, frame in (("trials", trials), ("grid", grid)):
        if "device_key" not in frame:
            raise ValueError(f"{name}: expected a device_key column (rows of tune.tune / tune.exhaustive)")
    out = []
    group_cols = ["device_key"] + (["seed"] if "seed" in trials else [])
    for keys, runs in trials.groupby(group_cols, sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        device_key = keys[0]
        table = grid[grid["device_key"] == device_key]
        if table.empty:
            raise ValueError(f"the exhaustive table has no rows of device {device_key!r}; it has "
                             f"{sorted(grid['device_key'].unique())}")
        times = _grid_times(table).dropna()
        picked, picked_us = pick_of(runs)   # the lowest median: confirmation rows measure a config again
        row = dict(zip(group_cols, keys))
        evaluations = int(runs["evaluations"].max()) if len(runs) else 0
        grid_size = len(table)
        row.update(evaluations=evaluations, grid_size=grid_size, fraction=evaluations / grid_size if grid_size else
                   np.nan, best_config=times.idxmin(), best_us=float(times.min()))
        if picked is None:
            row.update(pick=None, pick_us=np.nan, pick_measured_us=np.nan, pct_over_best=np.nan, rank=np.nan,
                       within_goal=False)
        else:
            pick_us = float(times.get(picked, np.nan))
            row.update(pick=picked, pick_us=pick_us, pick_measured_us=picked_us,
                       pct_over_best=(pick_us / row["best_us"] - 1) * 100,
                       rank=int((times < pick_us).sum()) + 1 if np.isfinite(pick_us) else np.nan)
            row["within_goal"] = bool(row["pct_over_best"] <= GOAL_PCT and row["fraction"] <= GOAL_FRACTION)
        out.append(row)
    return pd.DataFrame(out)


def table_objective(grid: pd.DataFrame, device_key: str | None = None):
    """A Search objective that answers from an exhaustive table: the measured objective_us; configs the table
    marks invalid on the device, wrong or failed answer so (they cost a measurement there, except invalid)."""
    table = grid if device_key is None else grid[grid["device_key"] == device_key]
    by_config = {row["config"]: row for row in table.to_dict("records")}

    def objective(config: dict) -> Outcome:
        row = by_config.get(config_label(config))
        if row is None:
            raise ValueError(f"config {config_label(config)} is not in the exhaustive table")
        state = row.get("state", "complete")
        if state == "complete" and np.isfinite(row.get("objective_us", np.nan)):
            return Outcome(value=float(row["objective_us"]))
        return Outcome(state=state if state != "complete" else "failed", note=row.get("note"))
    return objective


def simulate(kernel: str, grid: pd.DataFrame, *, seeds=range(10), budget: int | None = None, batch: int = 1,
           **problem) -> pd.DataFrame:
    """The optimiser on the measured table, once per device key of `grid` and seed → one row per run with
    compare's columns (`budget`: default a quarter of the grid; `batch`: candidates per round, as with that many
    workers)."""
    from .tuner import SAMPLER, default_budget
    space = tuning_space(kernel, **problem)
    valid = {config_label(c) for c in space.valid()}
    unknown = sorted(set(grid["config"]) - valid)
    if unknown:
        raise ValueError(f"the table holds configs outside {kernel}'s space for problem {space.describe()}: "
                         f"{unknown[:3]}… (pass the problem the table was measured at)")
    budget = default_budget(space) if budget is None else budget
    runs = []
    for device_key in sorted(grid["device_key"].unique()):
        objective = table_objective(grid, device_key)
        for seed in seeds:
            search = minimize(space, objective, budget=budget, seed=seed, batch=batch)
            runs.extend({"device_key": device_key, "seed": seed, "config": config_label(t.config),
                         "objective_us": t.value if t.state == "complete" else np.nan,
                         "evaluations": t.evaluations, "state": t.state} for t in search.trials)
    trials = pd.DataFrame(runs)
    out = compare(trials, grid)
    out.insert(2, "budget", budget)
    out["sampler"] = SAMPLER
    out["mode"] = "simulated on the exhaustive table"
    return out
