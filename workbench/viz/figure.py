"""The Figure every picture of `workbench.viz` returns: matplotlib's, made without pyplot (nothing stays open
between cells or commands), shown as PNG by Jupyter; and `figure_png`, its PNG bytes."""
from __future__ import annotations

import io

from matplotlib.figure import Figure as _MplFigure

__all__ = ["Figure", "figure_png"]


class Figure(_MplFigure):
    """A Figure that renders itself as PNG in Jupyter without pyplot (at `png_dpi`)."""

    png_dpi = 90

    def _repr_png_(self):
        return figure_png(self, dpi=self.png_dpi)


def figure_png(fig, dpi: int = 90, tight: bool = True) -> bytes:
    """The PNG of `fig` (`tight`: cropped to what is drawn)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight" if tight else None)
    return buf.getvalue()
