"""Pictures of ExecuTorch's real tagged graphs (``workbench.etvk.model.lowering.Lowered``): one box per op, left → right by
topological depth, coloured by the storage / layout ``TagMemoryMetaPass`` chose; transitions it inserted are red,
ops left on the CPU grey.

    fig = draw_lowered(lowered)           # every delegate, then the CPU ops
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

TRANSITION_COLOR = "#d62728"
CPU_COLOR = "#bdbdbd"
_LAYOUT_COLORS = {"PACKED_INT8_4W4C": "#fdd0a2", "PACKED_INT8_4C1W": "#fdae6b", "PACKED_INT8_4H4W": "#c7e9c0",
                  "PACKED_INT8_4W": "#a1d99b", "PACKED_INT8_4C": "#fd8d3c", "PACKED_INT8_CONV2D": "#e6550d",
                  "TENSOR_CHANNELS_PACKED": "#c6dbef", "TENSOR_WIDTH_PACKED": "#9ecae1",
                  "TENSOR_HEIGHT_PACKED": "#6baed6"}


def _short_layout(layout) -> str:
    return str(layout).replace("PACKED_INT8_", "").replace("TENSOR_", "").replace("_PACKED", "")


def draw_lowered(lowered, title: str | None = None, max_cols: int = 14, ax=None):
    """Draw the activation ops of every delegate (weights and constants left out) and the CPU ops."""
    df = lowered.table()
    ops = df[(df["op"] != "input") | (df["node"] == "x") | (df["storage"] == "CPU")].reset_index(drop=True)
    depth, pos, per_col = {}, {}, {}
    for i, row in ops.iterrows():
        args = [a for a in str(row["args"]).split(",") if a in depth]
        d = 1 + max((depth[a] for a in args), default=-1)
        depth[row["node"]] = d
        k = per_col.get(d, 0)
        per_col[d] = k + 1
        r, c = divmod(d, max_cols)
        pos[row["node"]] = (c * 2.2, -r * 3.0 - k * 1.1)
    if ax is None:
        cols = min(max_cols, max(depth.values(), default=0) + 1)
        rows = max(depth.values(), default=0) // max_cols + 1
        fig, ax = plt.subplots(figsize=(max(6, cols * 1.5), max(2.5, rows * 2.4)))
    else:
        fig = ax.figure
    for _, row in ops.iterrows():
        x, y = pos[row["node"]]
        for a in str(row["args"]).split(","):
            if a in pos:
                ax.annotate("", (x - 0.8, y), (pos[a][0] + 0.8, pos[a][1]),
                            arrowprops=dict(arrowstyle="->", color="#555", lw=0.8))
        if row["storage"] == "CPU":
            color, label = CPU_COLOR, f"{row['op']}\nCPU"
        else:
            color = TRANSITION_COLOR if row["transition"] else _LAYOUT_COLORS.get(row["layout"], "#f0f0f0")
            store = "buf" if row["storage"] == "BUFFER" else "tex"
            label = f"{row['op'].replace('quantize_per_tensor', 'q').replace('de', 'd')[:16]}\n" \
                    f"{row['dtype']} {store} {_short_layout(row['layout'])}"
            if row["transition"]:
                label = "clone (transition)\n" + label.split("\n")[1]
        ax.add_patch(FancyBboxPatch((x - 0.8, y - 0.4), 1.6, 0.8, boxstyle="round,pad=0.05", fc=color, ec="#333",
                                    lw=1.5 if row["transition"] else 0.6))
        ax.text(x, y, label, ha="center", va="center", fontsize=6.5)
    xs = [p[0] for p in pos.values()] or [0]
    ys = [p[1] for p in pos.values()] or [0]
    ax.set_xlim(min(xs) - 1, max(xs) + 1)
    ax.set_ylim(min(ys) - 0.8, max(ys) + 0.8)
    ax.axis("off")
    c = lowered.counts()
    ax.set_title(title or f"{lowered.name} ({lowered.setting} #19395): {c['transitions']} transitions, "
                 f"{c['int8_clones']} int8 clones, {c['cpu_ops']} CPU ops", fontsize=9)
    return fig
