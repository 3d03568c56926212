"""Charts of the tuner (workbench.tune): best-so-far against measurements spent, beside the exhaustive best."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from .titles import with_device


def convergence_figure(trials: pd.DataFrame, grid: pd.DataFrame | None = None, *, title: str | None = None):
    """One line per device key (and seed): the best time so far after each measurement; a dashed line at the
    exhaustive best and a dotted one 3 % above it where `grid` (tune.exhaustive's rows) is given."""
    fig, ax = plt.subplots(figsize=(7, 4))
    measured = trials[trials["state"].isin(["complete", "wrong", "failed"])]
    groups = ["device_key"] + (["seed"] if "seed" in measured and measured["seed"].nunique() > 1 else [])
    for keys, run in measured.groupby(groups):
        label = " / ".join(str(k) for k in (keys if isinstance(keys, tuple) else (keys,)))
        ax.step(run["evaluations"], run["best_so_far_us"], where="post", label=label.split(" (")[0])
    if grid is not None:
        best = grid["objective_us"].min()
        ax.axhline(best, ls="--", c="k", lw=1, label=f"exhaustive best ({len(grid)} configs)")
        ax.axhline(best * 1.03, ls=":", c="k", lw=1, label="+3 %")
    ax.set_xlabel("measurements spent")
    ax.set_ylabel("best median so far (µs)")
    ax.set_title(with_device(title or "tuner: best so far", trials))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
