"""Pictures of a model on ET-VK's own runtime (``workbench.etvk.model.profile``), for notebook 06.

    fig = plot_operator_kernels(profile)      # GPU µs per operator, stacked by the shader variants that served it
    fig = plot_dispatches(profile)            # every dispatch in order, coloured by operator
    fig = plot_ab(profile)                    # per kernel: dispatches and µs at two revisions
    fig = plot_fidelity(table)                # workbench / runtime per dispatch and family (fidelity.table)
"""
from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.patches import Patch

from ..measure.ways import WAY_COLUMNS
from .figure import Figure
from .titles import with_device


def _colors(names):
    cmap = matplotlib.colormaps["tab20"]
    return {n: cmap(i % 20) for i, n in enumerate(names)}


def plot_operator_kernels(profile, revision: str | None = None):
    """One bar per operator (total GPU µs over its dispatches), stacked by shader variant."""
    revision = revision or profile.revisions[0]
    d = profile.dispatches[profile.dispatches["revision"] == revision]
    pivot = d.pivot_table(index="operator", columns="kernel", values="gpu_us", aggfunc="sum", fill_value=0.0)
    pivot = pivot.loc[pivot.sum(axis=1).sort_values().index]
    colors = _colors(pivot.columns)
    fig = Figure(figsize=(10, 0.45 * len(pivot) + 1.8))
    ax = fig.add_subplot()
    left = np.zeros(len(pivot))
    for kernel in pivot.columns:
        ax.barh(pivot.index, pivot[kernel], left=left, color=colors[kernel], label=kernel)
        left += pivot[kernel].values
    counts = d.groupby("operator").size()
    for y, (op, total) in enumerate(pivot.sum(axis=1).items()):
        ax.text(total, y, f"  {total:,.1f} µs · {counts[op]} dispatches", va="center", fontsize=8)
    ax.set_xlabel("GPU µs per inference (ET-VK's QueryPool, median over runs)")
    ax.set_title(f"{profile.model} on ET-VK's runtime · {revision} · {d['device'].iat[0]}")
    ax.set_xlim(0, left.max() * 1.35 if len(left) else 1)
    ax.legend(fontsize=7, loc="lower right", title="shader variant", title_fontsize=8)
    fig.tight_layout()
    return fig


def plot_dispatches(profile, revision: str | None = None):
    """Every dispatch of one inference in ET-VK's order, its bar coloured by operator."""
    revision = revision or profile.revisions[0]
    d = profile.dispatches[profile.dispatches["revision"] == revision].sort_values("dispatch_id")
    colors = _colors(sorted(d["operator"].unique()))
    fig = Figure(figsize=(12, 3.2))
    ax = fig.add_subplot()
    ax.bar(d["dispatch_id"], d["gpu_us"], color=[colors[o] for o in d["operator"]], width=0.85)
    # one patch per operator in its bars' colour (an empty bar() call draws its legend swatch in the default colour)
    ax.legend(handles=[Patch(color=c, label=op) for op, c in colors.items()], fontsize=7, ncol=4,
              title="operator", title_fontsize=8)
    ax.set_xlabel("dispatch id")
    ax.set_ylabel("GPU µs (median over runs)")
    ax.set_title(f"{profile.model} on ET-VK's runtime · {revision} · {d['device'].iat[0]}: {len(d)} dispatches, "
                 f"{d['gpu_us'].sum():,.1f} µs")
    fig.tight_layout()
    return fig


def plot_ab(profile):
    """Per kernel, GPU µs at both sides of a profile with two revisions (or identity-op settings)."""
    ab = profile.compare
    ab = ab[ab["kernel"] != "(all)"].sort_values("gpu_us_a")
    a, b = ab.attrs.get("a", "A"), ab.attrs.get("b", "B")
    y = np.arange(len(ab))
    fig = Figure(figsize=(10, 0.4 * len(ab) + 1.8))
    ax = fig.add_subplot()
    ax.barh(y - 0.2, ab["gpu_us_a"], height=0.4, label=f"{a}")
    ax.barh(y + 0.2, ab["gpu_us_b"], height=0.4, label=f"{b}")
    for i, r in enumerate(ab.itertuples()):
        if r.dispatches_a != r.dispatches_b:
            ax.text(max(r.gpu_us_a, r.gpu_us_b), i, f"  {r.dispatches_a} → {r.dispatches_b} dispatches",
                    va="center", fontsize=8)
    ax.set_yticks(y, ab["kernel"], fontsize=8)
    ax.set_xlabel("GPU µs per inference")
    ax.set_title(with_device(f"{profile.model}: {a} → {b}", profile.dispatches))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_fidelity(table):
    """Workbench / runtime µs per dispatch, one row per family, one marker per way of timing; the ±10 % band."""
    t = table.dropna(subset=["ratio"])
    modes = [c for c in WAY_COLUMNS if c in t and t[c].notna().any()]
    ways = list(t[modes].drop_duplicates().sort_values(modes).itertuples(index=False, name=None)) if modes else [()]
    families = sorted(t["family"].unique(), key=lambda f: -(t["family"] == f).sum())
    plot_h = 0.5 * len(families) + 1.8  # inches: the rows and the axes' margins; the legend below them adds its own
    fig = Figure(figsize=(10, plot_h + 0.12 * ((len(ways) + 2) // 2)))
    ax = fig.add_subplot()
    ax.axvspan(0.9, 1.1, color="0.9", zorder=0, label="within 10 %")
    ax.axvline(1.0, color="0.5", lw=0.8)
    palette = matplotlib.colormaps["tab10"]
    varying = [c for c in modes if t[c].nunique() > 1] or modes  # a legend names what tells the ways apart
    for i, way in enumerate(ways):
        sel = t if not modes else t[np.logical_and.reduce([t[c] == v for c, v in zip(modes, way)])]
        name = ", ".join(f"{c} {v}" for c, v in zip(modes, way) if c in varying) or "workbench"
        jitter = (i - (len(ways) - 1) / 2) * 0.8 / max(len(ways), 1)
        y = sel["family"].map({f: n for n, f in enumerate(families)}) + jitter
        ax.scatter(sel["ratio"], y, s=12, alpha=0.7, color=palette(i % 10), label=name)
    ax.set_yticks(range(len(families)), [f"{f} ({(t['family'] == f).sum() // max(len(ways), 1)})" for f in families])
    ax.invert_yaxis()
    ax.set_xlabel("workbench µs / ET-VK runtime µs (same variant, same shape)")
    ax.set_title(with_device("Fidelity of the workbench's dispatch", t))
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.5 / plot_h),
              ncol=2, frameon=False)  # below the axes: no dispatch hidden behind it
    fig.tight_layout()
    return fig
