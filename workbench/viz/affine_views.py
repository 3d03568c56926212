"""Pictures of block-wise affine quantization: the block map, the error study and the throughput chart."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Rectangle

from ..kernels import quantize_affine as K
from .titles import with_device

_MAX_PANELS = 12


def _palette(n: int) -> ListedColormap:
    base = plt.get_cmap("tab20").colors + plt.get_cmap("tab20b").colors
    return ListedColormap([base[i % len(base)] for i in range(max(n, 1))])


def block_map(shape, block_size, scale=None, zero_point=None, *, title: str | None = None, annotate: bool = True,
              cell: float = 0.42):
    """Which block every element belongs to: one panel per index of the leading dims (3-D: dim 0; 4-D: dims 0 × 1,
    at most 12 panels), each showing the last two dims (rows × columns; 1-D tensors are one row).  Every block has its
    own colour; its id (the index into the flattened scale tensor, W fastest) and its scale (when given) are written
    at its top-left element, and block borders are drawn in black."""
    shape = K.check_shape(shape)
    bs = K.check_block_size(shape, block_size)
    ids = K.block_ids(shape, bs)
    nblocks = K.block_count(shape, bs)
    scale = None if scale is None else np.asarray(scale, dtype=np.float64).reshape(-1)
    zero_point = None if zero_point is None else np.asarray(zero_point).reshape(-1)
    if len(shape) == 1:
        ids2 = ids.reshape(1, 1, 1, shape[0])
        bs2 = (1, 1, 1, bs[0])
    else:
        lead = shape[:-2]
        ids2 = ids.reshape((1,) * (2 - len(lead)) + shape)
        bs2 = (1,) * (2 - len(lead)) + bs
    n0, n1, rows, cols = ids2.shape
    panels = [(i, j) for i in range(n0) for j in range(n1)][:_MAX_PANELS]
    ncols = max(1, min(len(panels), n1 if n1 > 1 else 3, 6))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(3.0, cols * cell) * ncols + 0.4,
                                                    max(1.4, rows * cell) * nrows + 0.9), squeeze=False)
    cmap = _palette(nblocks)
    lead_names = [f"dim{d}" for d in range(len(shape) - 2)] if len(shape) > 2 else []
    for k, (i, j) in enumerate(panels):
        ax = axes[k // ncols][k % ncols]
        grid = ids2[i, j]
        ax.imshow(grid, cmap=cmap, vmin=-0.5, vmax=nblocks - 0.5, interpolation="nearest")
        br, bc = bs2[2], bs2[3]
        for r0 in range(0, rows, br):
            for c0 in range(0, cols, bc):
                ax.add_patch(Rectangle((c0 - 0.5, r0 - 0.5), bc, br, fill=False, lw=1.6, ec="black"))
                if annotate:
                    b = int(grid[r0, c0])
                    text = f"#{b}"
                    if scale is not None:
                        text += f"\ns={scale[b]:.3g}"
                    if zero_point is not None:
                        text += f"\nzp={int(zero_point[b])}"
                    ax.text(c0 - 0.4, r0 - 0.4, text, fontsize=6.5, va="top", ha="left",
                            bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.75))
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows))
        ax.tick_params(labelsize=6)
        if len(shape) == 1:
            ax.set_yticks([])
            ax.set_xlabel("dim 0")
        else:
            ax.set_xlabel(f"dim {len(shape) - 1}", fontsize=7)
            ax.set_ylabel(f"dim {len(shape) - 2}", fontsize=7)
        if lead_names:
            idx = [i, j][2 - len(lead_names):]
            ax.set_title(", ".join(f"{n}={v}" for n, v in zip(lead_names, idx)), fontsize=8)
    for k in range(len(panels), nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    shown = "" if len(panels) == n0 * n1 else f" (first {len(panels)} of {n0 * n1} panels)"
    fig.suptitle(title or f"shape {list(shape)}, block_size {list(bs)}: {nblocks} blocks{shown}", fontsize=10)
    fig.tight_layout()
    return fig


def plot_error_vs_params(df, *, x: str = "params", y: str = "sqnr_db", label: str = "granularity"):
    """Quantization quality against the number of parameters (scales + zero points), one point per block shape,
    log x.  ``df`` columns: ``x``, ``y``, ``label`` and optionally ``dtype`` (one line per dtype)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    groups = df.groupby("dtype") if "dtype" in df.columns else [("", df)]
    for name, g in groups:
        g = g.sort_values(x)
        ax.plot(g[x], g[y], marker="o", label=str(name) or None)
        for _, r in g.iterrows():
            ax.annotate(str(r[label]), (r[x], r[y]), textcoords="offset points", xytext=(4, 3), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("parameters (scales + zero points)")
    ax.set_ylabel({"sqnr_db": "SQNR (dB, higher is better)", "rmse": "RMSE"}.get(y, y))
    ax.grid(alpha=0.3)
    if "dtype" in df.columns:
        ax.legend(title="dtype")
    ax.set_title("Quantization error vs parameter count")
    fig.tight_layout()
    return fig


def plot_block_errors(block_rmse, *, title: str = "per-block RMSE"):
    """Per-block RMSE as a heat map over the last two block dims (leading dims flattened into rows)."""
    a = np.asarray(block_rmse, dtype=np.float64)
    a2 = a.reshape(1, -1) if a.ndim == 1 else a.reshape(-1, a.shape[-1])
    fig, ax = plt.subplots(figsize=(min(10, 1.5 + 0.25 * a2.shape[1]), min(6, 1.2 + 0.18 * a2.shape[0])))
    im = ax.imshow(a2, aspect="auto", cmap="magma", interpolation="nearest")
    fig.colorbar(im, ax=ax, label="RMSE")
    ax.set_xlabel("block index (last dim)")
    ax.set_ylabel("block index (leading dims)")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_throughput(bench_df):
    """GB/s per kernel (op × storage × layout), per block shape, with the copy of the same traffic as ticks
    (black: best Vulkan copy; grey: the uvec4 shader copy)."""
    k = bench_df[bench_df["op"].isin(["quantize", "dequantize"])].copy()
    k["config"] = k["op"].str[:5] + " " + k["storage"].str[:3] + " " + k["layout"].str.replace("_PACKED", "") \
        .str.replace("_TEXTURE", "").str[:1]
    grans = list(dict.fromkeys(k["granularity"]))
    configs = list(dict.fromkeys(k["config"]))
    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(configs) * len(grans) / 2), 4.2))
    width = 0.8 / max(len(grans), 1)
    for gi, gran in enumerate(grans):
        sub = k[k["granularity"] == gran].set_index("config")
        xs = np.arange(len(configs)) + gi * width
        vals = [sub["GB/s"].get(c, np.nan) for c in configs]
        ax.bar(xs, vals, width, label=gran)
        for xv, c in zip(xs, configs):
            if c in sub.index:
                ax.hlines(sub.loc[c, "copy_GBps"], xv - width / 2, xv + width / 2, color="black", lw=1.5)
                ax.hlines(sub.loc[c, "shader_copy_GBps"], xv - width / 2, xv + width / 2, color="grey", lw=1.5)
    ax.set_xticks(np.arange(len(configs)) + 0.4 - width / 2)
    ax.set_xticklabels(configs, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("GB/s (bytes read + written)")
    ax.set_title(with_device("quantize / dequantize throughput; ticks: copy of the same traffic (black best, grey "
                             "shader)", bench_df))
    ax.legend(fontsize=7, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig
