"""The picture of an interleaved A/B (`workbench ab`, `etvk.ab.compare(...).frame`): each regime's samples over the
time they ran, coloured by side, with the SM clock each sample saw; the ratio B/A with its confidence interval; and,
given the ISA table (`AbResult.isa`), the phone model's predicted time per side and GPU."""
from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from .figure import Figure

COLOURS = {"A": "tab:blue", "B": "tab:orange"}
CLOCK = "tab:green"


def ab_chart(frame: pd.DataFrame, isa: pd.DataFrame | None = None) -> Figure:
    """One panel per (cache, interleave) set: the samples (µs) over the set's seconds (`t_s`; the order run where a
    frame has no times), A and B coloured, each side's median as a line, the SM clock per sample on the right axis
    (or, where the device has none, the frame's `clock_note` in the panel); a panel of the ratio B/A per set with its
    interval against 1 (no difference); and with `isa` carrying `phone_us`, the phone model's µs per side and GPU."""
    if frame is None or not {"row", "cache", "side", "us"} <= set(frame.columns):
        raise ValueError("ab_chart: expected `workbench ab`'s frame (columns row, cache, side, us, …), got "
                         f"{None if frame is None else sorted(frame.columns)[:8]}")
    samples = frame[frame["row"] == "sample"]
    summary = frame[frame["row"] == "summary"].reset_index(drop=True)
    mode_of = samples["interleave"] if "interleave" in samples else samples["cache"]
    keys = list(dict.fromkeys(zip(samples["cache"], mode_of)))
    phone = isa is not None and "phone_us" in isa and isa["phone_us"].notna().any()
    panels = len(keys) + 1 + int(phone)
    clocks = [samples["clock_mhz"].max() if "clock_mhz" in samples else np.nan,
              summary["max_sm_clock_mhz_limit"].max() if "max_sm_clock_mhz_limit" in summary else np.nan]
    clock_top = float(np.nanmax(clocks)) * 1.1 if np.isfinite(clocks).any() else 1.0  # one scale: sets compare
    fig = Figure(figsize=(4.2 * len(keys) + 3.2 * (1 + int(phone)), 3.4))
    axes = fig.subplots(1, panels, squeeze=False)[0]
    for ax, (cache, mode) in zip(axes, keys):
        d = samples[(samples["cache"] == cache) & (mode_of == mode)]
        timed = "t_s" in d and d["t_s"].notna().all()
        x = "t_s" if timed else "order"
        for side, colour in COLOURS.items():
            s = d[d["side"] == side]
            ax.plot(s[x], s["us"], "o", ms=3, color=colour, label=side)
            ax.axhline(s["us"].median(), color=colour, lw=1, ls="--")
        ax.set_title(f"{cache}, {mode}", fontsize=9)
        ax.set_xlabel("seconds into the set" if timed else "sample (in the order run)")
        ax.set_ylabel("µs per dispatch")
        ax.set_ylim(0, float(d["us"].max()) * 1.3 if len(d) else 1.0)  # room for the legend above the samples
        clock = d["clock_mhz"] if "clock_mhz" in d else pd.Series(dtype=float)
        if clock.notna().any():
            twin = ax.twinx()
            twin.plot(d[x], clock, "-", lw=1, color=CLOCK, label="SM clock")
            twin.set_ylabel("SM clock (MHz)", color=CLOCK)
            twin.set_ylim(0, clock_top)
        else:
            note = summary["clock_note"].dropna() if "clock_note" in summary else pd.Series(dtype=object)
            text = textwrap.fill("no SM clock: " + (note.iloc[0] if len(note) else "no clock source"), 48)
            ax.text(0.03, 0.03, text, transform=ax.transAxes, fontsize=6, color=CLOCK)
        ax.legend(fontsize=8, loc="lower right" if clock.notna().any() else "upper right", ncol=2)
    ax = axes[len(keys)]
    labels = [f"{r['cache']}\n{r.get('interleave', '')}" for _, r in summary.iterrows()]
    y = range(len(summary))
    err = [summary["ratio"] - summary["ci_lo"], summary["ci_hi"] - summary["ratio"]]
    ax.errorbar(summary["ratio"], list(y), xerr=err, fmt="o", color="black", capsize=3)
    ax.axvline(1.0, color="grey", lw=1, ls=":")
    ax.set_yticks(list(y), labels, fontsize=8)
    ax.set_ylim(-0.5, len(summary) - 0.5)
    ax.set_xlabel("B / A (median), 95 % interval")
    ax.set_title("ratio", fontsize=9)
    if phone:
        ax = axes[-1]
        p = isa.pivot_table(index="gpu", columns="side", values="phone_us", sort=False)
        pos = np.arange(len(p))
        for k, side in enumerate(c for c in COLOURS if c in p):
            ax.barh(pos + (k - 0.5) * 0.4, p[side], height=0.4, color=COLOURS[side], label=side)
        ax.set_yticks(pos, list(p.index), fontsize=8)
        ax.set_xlabel("predicted µs (phone model)")
        ax.set_title("phones, predicted", fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
