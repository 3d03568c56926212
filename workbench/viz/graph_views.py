"""Pictures of int8 graphs tagged by ExecuTorch's real pass (``workbench.graphs.tagging.tagged``): nodes left → right
in topological order, each tensor edge labelled with the storage / layout its producer was given, the transitions the
tagging pass inserted in red.

    fig = draw_graph(real_tagging.tagged(graph, "before"), title="before #19395")
    fig = compare(graph)            # one row per identity-op setting, counts in each title
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

from ..graphs import int8_graph as G

TRANSITION_COLOR = "#d62728"
COLORS = {"input": "#e0e0e0", "quantize_per_tensor": "#c6dbef", "dequantize_per_tensor": "#c6dbef",
          "q8ta_conv2d_pw": "#fdd0a2", "q8ta_pixel_shuffle": "#c7e9c0", "pixel_shuffle": "#c7e9c0",
          "q8ta_add": "#dadaeb", G.TRANSITION: "#fcbba1"}
IDENTITY_COLOR = "#f7f7f7"
_SHORT_OPS = {"quantize_per_tensor": "quantize", "dequantize_per_tensor": "dequantize", "q8ta_conv2d_pw": "conv_pw",
              "q8ta_pixel_shuffle": "q8ta_ps", "pixel_shuffle": "pixel_shuffle", G.TRANSITION: "clone\n(transition)",
              "_clone_dim_order": "_clone_dim_order", "view_copy": "view_copy", "alias_copy": "alias_copy"}


def _positions(graph, max_cols: int):
    """Node → (x, y): column = topological depth (wrapped into rows of ``max_cols``), stacked within a column."""
    levels = graph.levels()
    seen = {}
    pos = {}
    for n in graph.nodes:
        lv = levels[n]
        k = seen.get(lv, 0)
        seen[lv] = k + 1
        row, col = divmod(lv, max_cols)
        pos[n] = (col * 2.0, -row * 1.9 - k * 1.0)
    return pos


def draw_graph(graph, title: str | None = None, ax=None, max_cols: int = 12, show_sizes: bool = False):
    """Draw one tagged graph.  Returns the figure."""
    pos = _positions(graph, max_cols)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    if ax is None:
        width = max(7.5, 1.25 * (max(xs) / 2.0 + 1))
        height = max(2.2, 1.0 * (max(ys) - min(ys)) + 2.2)
        fig, ax = plt.subplots(figsize=(width, height))
    else:
        fig = ax.figure
    ax.set_xlim(min(xs) - 1.0, max(xs) + 1.0)
    ax.set_ylim(min(ys) - 0.8, max(ys) + 0.9)
    ax.axis("off")
    bw, bh = 1.5, 0.62
    for n in graph.nodes:  # edges first, under the boxes
        for a in n.args:
            (x0, y0), (x1, y1) = pos[a], pos[n]
            color = TRANSITION_COLOR if (a.is_transition or n.is_transition) else "#555555"
            if x1 > x0:  # same row (or a stacked neighbour): straight arrow, label above its middle
                ax.annotate("", xy=(x1 - bw / 2, y1), xytext=(x0 + bw / 2, y0),
                            arrowprops=dict(arrowstyle="->", color=color, lw=1.3))
                lx, ly = (x0 + x1) / 2, max(y0, y1) + 0.36
            else:  # wrapped onto the next row: down, back left, down
                ymid = (y0 + y1) / 2
                ax.plot([x0, x0, x1], [y0 - bh / 2, ymid, ymid], color=color, lw=1.3)
                ax.annotate("", xy=(x1, y1 + bh / 2), xytext=(x1, ymid),
                            arrowprops=dict(arrowstyle="->", color=color, lw=1.3))
                lx, ly = x0 - 0.8, ymid + 0.05
            if a.repr is not None:
                ax.text(lx, ly, a.repr.short, ha="center", va="bottom", fontsize=7,
                        color=TRANSITION_COLOR if a.is_transition else "#1f3b73",
                        bbox=dict(boxstyle="round,pad=0.12", fc="white", ec="none", alpha=0.85))
    for n in graph.nodes:
        x, y = pos[n]
        face = COLORS.get(n.op, IDENTITY_COLOR if n.op in G.IDENTITY_OPS else "#ffffff")
        edge = TRANSITION_COLOR if n.is_transition else "#333333"
        ax.add_patch(FancyBboxPatch((x - bw / 2, y - bh / 2), bw, bh, boxstyle="round,pad=0.02,rounding_size=0.12",
                                    fc=face, ec=edge, lw=2.2 if n.is_transition else 1.0))
        label = _SHORT_OPS.get(n.op, n.op) if n.op != "input" else f"input {n.name}"
        if show_sizes:
            label += "\n" + "×".join(str(s) for s in n.sizes)
        ax.text(x, y, label, ha="center", va="center", fontsize=7.5,
                color=TRANSITION_COLOR if n.is_transition else "black", weight="bold" if n.is_transition else None)
    for o in graph.outputs:
        x, y = pos[o]
        ax.annotate("", xy=(x + bw / 2 + 0.45, y), xytext=(x + bw / 2, y),
                    arrowprops=dict(arrowstyle="->", color="#555555", lw=1.3))
        if o.repr is not None:
            ax.text(x + bw / 2 + 0.25, y + 0.38, o.repr.short, ha="center", fontsize=7, color="#1f3b73")
    if title is None:
        title = graph.name
    n_ops = len([n for n in graph.op_nodes() if not n.is_transition])
    ax.set_title(f"{title} — {len(graph.transitions())} transitions, {n_ops} ops", fontsize=10, loc="left",
                 color=TRANSITION_COLOR if graph.transitions() else "black")
    return fig


def compare(graph, tagged: dict | None = None, max_cols: int = 12, executions: dict | None = None):
    """One panel per identity-op setting, each tagged by ExecuTorch's real ``TagMemoryMetaPass``
    (``tagged``: {setting: tagged Graph}, default ``real_tagging.tagged`` under both settings); with
    ``executions`` ({setting: Execution}) the measured GPU total and dispatch count join each title."""
    from ..graphs import tagging as RT
    if tagged is None:
        tagged = {s: RT.tagged(graph, s) for s in RT.SETTINGS}
    dims = []
    for g in tagged.values():
        pos = _positions(g, max_cols)
        xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
        dims.append((max(xs), max(ys) - min(ys)))
    width = max(7.5, 1.25 * (max(d[0] for d in dims) / 2.0 + 1))
    heights = [max(2.4, d[1] + 2.4) for d in dims]
    fig, axes = plt.subplots(len(tagged), 1, figsize=(width, sum(heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (s, g) in zip(axes[:, 0], tagged.items()):
        name = "ANY_STORAGE" if s == "before" else "ANY_STORAGE_INCL_PACKED_INT8"
        title = f"{graph.name} · {s} PR #19395 (ExecuTorch's TagMemoryMetaPass)\nidentity ops {name}"
        if executions and s in executions:
            e = executions[s]
            title += f" · {len(e.dispatches)} dispatches, {e.total_us:.0f} µs GPU"
        draw_graph(g, title=title, ax=ax, max_cols=max_cols)
    fig.tight_layout()
    return fig


KIND_COLORS = {"op": "#4c72b0", "transition": TRANSITION_COLOR, "staging": "#999999", "identity copy": "#ff7f0e"}


def time_bars(timings, xlabel: str = "GPU µs per dispatch, stacked"):
    """Per-dispatch GPU time stacked per setting, one panel per graph (each on its own scale), coloured by kind
    (transitions red), from ``workbench.graphs.graph_exec.timing_rows`` frames."""
    graphs = list(dict.fromkeys(timings["graph"]))
    fig, axes = plt.subplots(len(graphs), 1, figsize=(8, 1.3 * len(graphs) + 1.2), squeeze=False)
    for ax, graph in zip(axes[:, 0], graphs):
        rows = list(timings[timings["graph"] == graph].groupby("setting", sort=False))
        right = 0.0
        for i, (setting, df) in enumerate(rows):
            left = 0.0
            for _, row in df.iterrows():
                ax.barh(i, row.gpu_us, left=left, color=KIND_COLORS.get(row.kind, "#cccccc"), edgecolor="white",
                        linewidth=0.5)
                left += row.gpu_us
            ax.text(left, i, f"  {left:,.0f} µs, {len(df)} dispatches", va="center", fontsize=8)
            right = max(right, left)
        ax.set_yticks(range(len(rows)), [f"{s} #19395" for s, _ in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, right * 1.45 if right > 0 else 1)
        ax.set_title(graph, fontsize=9, loc="left")
    axes[-1, 0].set_xlabel(xlabel)
    axes[-1, 0].legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in KIND_COLORS.values()],
                       labels=list(KIND_COLORS), fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.45), ncol=4)
    fig.tight_layout()
    return fig
