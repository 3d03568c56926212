"""Pictures of a :class:`workbench.checks.mismatch.MismatchReport`: wrong elements over the logical dims (batches down,
blocks of 4 channels across, an H×W heat map each) and, when the report has a layout, over its packed words /
texels in rows, so a wrong tile, lane or block shows as a shape."""
from __future__ import annotations

import numpy as np
from matplotlib import colors as mcolors

from ..checks.mismatch import MismatchReport
from .figure import Figure

__all__ = ["plot_mismatch"]

_CMAP = mcolors.ListedColormap(["#f4f4f4", "#fdd49e", "#fc8d59", "#d7301f", "#7f0000"])
_NORM = mcolors.BoundaryNorm([-0.5, 0.5, 1.5, 2.5, 3.5, 1e9], _CMAP.N)


def plot_mismatch(report: MismatchReport, title: str | None = None):
    """A matplotlib Figure (no pyplot): left the logical map, right the packed-unit map (when a layout is known)."""
    img = report.logical_image()
    grid = report.unit_grid()
    panels = 2 if grid is not None else 1
    fig = Figure(figsize=(5.0 * panels + 0.6, 4.4))
    ax = fig.add_subplot(1, panels, 1)
    ax.imshow(img, cmap=_CMAP, norm=_NORM, interpolation="nearest", aspect="auto")
    n, cb, h, w = report.logical_map().shape
    for k in range(1, cb):
        ax.axvline(k * w - 0.5, color="#555", lw=0.8)
    for b in range(1, n):
        ax.axhline(b * h - 0.5, color="#555", lw=0.8)
    ax.set_xticks([k * w + (w - 1) / 2 for k in range(cb)], [f"c{4 * k}" for k in range(cb)], fontsize=7)
    ax.set_yticks([b * h + (h - 1) / 2 for b in range(n)], [f"n{b}" for b in range(n)], fontsize=7)
    ax.set_title("wrong per (n, c-block of 4, h, w)", fontsize=9)
    if grid is not None:
        ax2 = fig.add_subplot(1, panels, 2)
        shown = np.ma.masked_less(grid, 0)
        ax2.imshow(shown, cmap=_CMAP, norm=_NORM, interpolation="nearest", aspect="auto")
        ax2.set_title(f"wrong per {report.layout} {report.unit_name} ({grid.shape[1]} a row)", fontsize=9)
        ax2.set_xlabel(f"{report.unit_name} % {grid.shape[1]}", fontsize=8)
        ax2.set_ylabel(f"{report.unit_name} // {grid.shape[1]}", fontsize=8)
    fig.suptitle(title or report.summary()[:110], fontsize=9)
    return fig
