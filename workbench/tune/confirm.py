"""The tuner's pick against the exhaustive best, head to head on one device.

An exhaustive table measures each config once; on a noisy device (lavapipe on shared CPU cores) one config's row
can read 2× slow or fast, and the table then misjudges the pick. `head_to_head` measures the pick and the table's
best alternately, `rounds` times each, in one process on one device, and compares the medians of their medians:

    row = head_to_head("pixel-shuffle", pick_config, best_config, device, rounds=5, shape=...)

→ pick_us, best_us (medians over rounds), their per-round spreads, pct_over_best = (pick / best − 1) · 100 and
`within_goal` (≤ compare.GOAL_PCT). `from_folder` reads the pick (`tuner.pick_of`: the lowest median over a
config's search and confirmation rows in tune_<kernel>.csv) and the best (tune_<kernel>_exhaustive.csv) of a
results folder.
"""
from __future__ import annotations

import statistics

import pandas as pd

from .candidates import CandidateSweep
from .compare import GOAL_PCT
from .space import config_label, tuning_space

__all__ = ["head_to_head", "from_folder"]


def _parse(space, label: str) -> dict:
    config = {}
    for part in label.split(","):
        name, _, text = part.partition("=")
        choices = {str(c): c for c in space.params.get(name, ())}
        if text not in choices:
            raise ValueError(f"{space.kernel}: {name}={text!r} is not one of {list(choices)} (config {label!r})")
        config[name] = choices[text]
    space.check(config)
    return config


def head_to_head(kernel: str, pick, best, device, *, rounds: int = 5, warmup_s: float = 0.5, **problem) -> dict:
    """`pick` and `best`: configs (dicts) or their labels. One row (module docstring)."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    space = tuning_space(kernel, **problem)
    pick = _parse(space, pick) if isinstance(pick, str) else pick
    best = _parse(space, best) if isinstance(best, str) else best
    sweep = CandidateSweep(kernel, tuple(space.problem.items()))
    times = {"pick": [], "best": []}
    for k in range(rounds):
        for which, config in (("pick", pick), ("best", best)) if k % 2 == 0 else (("best", best), ("pick", pick)):
            row = sweep.run(device, config, warmup_s if k == 0 else 0.0)[0]
            if "invalid" in row or not row.get("correct", True):
                raise ValueError(f"{which} config {config_label(config)} did not run correctly on "
                                 f"{device.info.name}: {row.get('invalid') or 'wrong output'}")
            times[which].append(float(row["median_us"]))
    pick_us, best_us = statistics.median(times["pick"]), statistics.median(times["best"])
    pct = (pick_us / best_us - 1) * 100
    return {"device_key": device.info.name, "kernel": kernel, "pick": config_label(pick), "best": config_label(best),
            "rounds": rounds, "pick_us": pick_us, "best_us": best_us,
            "pick_round_us": " ".join(f"{t:.2f}" for t in times["pick"]),
            "best_round_us": " ".join(f"{t:.2f}" for t in times["best"]),
            "pct_over_best": pct, "within_goal": bool(pct <= GOAL_PCT), "mode": "head to head"}


def from_folder(kernel: str, folder, device, *, rounds: int = 5, **problem) -> dict:
    """head_to_head for the pick and the exhaustive best recorded in `folder` for `device`."""
    from ..measure import ResultsReader
    name = f"tune_{kernel.replace('-', '_')}"
    results = ResultsReader(folder)
    trials, grid = results.load(name), results.load(f"{name}_exhaustive")
    if trials is None or grid is None:
        raise FileNotFoundError(f"{results.folder} needs {name}.csv and {name}_exhaustive.csv (run `workbench tune "
                                f"{kernel}` and `workbench tune {kernel} --exhaustive`); it holds {results.names()}")
    key = device.info.name
    from .tuner import pick_of
    trials = trials[trials["device_key"] == key]
    grid = grid[(grid["device_key"] == key) & (grid["state"] == "complete")]
    pick, _ = pick_of(trials)
    if pick is None or grid.empty:
        raise ValueError(f"no complete rows of device {key!r} in {results.folder}/{name}*.csv")
    best = grid.loc[pd.to_numeric(grid["objective_us"]).idxmin(), "config"]
    return head_to_head(kernel, pick, best, device, rounds=rounds, **problem)
