"""The picture of an interleaved A/B (`workbench ab`, `etvk.ab.compare(...).frame`): each regime's samples in the
order they ran, coloured by side, and the ratio B/A with its confidence interval beside."""
from __future__ import annotations

import pandas as pd

from .figure import Figure

COLOURS = {"A": "tab:blue", "B": "tab:orange"}


def ab_chart(frame: pd.DataFrame) -> Figure:
    """One panel per (cache, interleave) set: the samples (µs) in order, A and B coloured, each side's median as a
    line; and a last panel: the ratio B/A per set with its interval, against 1 (no difference)."""
    if frame is None or not {"row", "cache", "side", "us"} <= set(frame.columns):
        raise ValueError("ab_chart: expected `workbench ab`'s frame (columns row, cache, side, us, …), got "
                         f"{None if frame is None else sorted(frame.columns)[:8]}")
    samples = frame[frame["row"] == "sample"]
    summary = frame[frame["row"] == "summary"].reset_index(drop=True)
    keys = list(dict.fromkeys(zip(samples["cache"], samples.get("interleave", samples["cache"]))))
    fig = Figure(figsize=(3.6 * len(keys) + 3.0, 3.2))
    axes = fig.subplots(1, len(keys) + 1, squeeze=False)[0]
    for ax, (cache, mode) in zip(axes, keys):
        d = samples[(samples["cache"] == cache) & (samples.get("interleave", samples["cache"]) == mode)]
        for side, colour in COLOURS.items():
            s = d[d["side"] == side]
            ax.scatter(s["order"], s["us"], s=10, color=colour, label=side)
            ax.axhline(s["us"].median(), color=colour, lw=1, ls="--")
        ax.set_title(f"{cache}, {mode}", fontsize=9)
        ax.set_xlabel("sample (in the order run)")
        ax.set_ylabel("µs per dispatch")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    ax = axes[-1]
    labels = [f"{r['cache']}\n{r.get('interleave', '')}" for _, r in summary.iterrows()]
    y = range(len(summary))
    err = [summary["ratio"] - summary["ci_lo"], summary["ci_hi"] - summary["ratio"]]
    ax.errorbar(summary["ratio"], list(y), xerr=err, fmt="o", color="black", capsize=3)
    ax.axvline(1.0, color="grey", lw=1, ls=":")
    ax.set_yticks(list(y), labels, fontsize=8)
    ax.set_xlabel("B / A (median), 95 % interval")
    ax.set_title("ratio", fontsize=9)
    fig.tight_layout()
    return fig
