"""The pointwise conv's tiles across vendors' compilers (`benchmarks.conv_vendors.conv_pw_vendor_tiles`): one panel
per GPU, registers as bars (in that vendor's unit) and the compiler's occupancy as a line, the winner starred.

    fig = vendor_tiles_figure(df)          # a Figure (no pyplot), shows itself in Jupyter
"""
from __future__ import annotations

import math

import pandas as pd

from .figure import Figure

__all__ = ["vendor_tiles_figure"]

_BAR = {"adreno": "#4e79a7", "mali": "#59a14f", "amd": "#e15759"}
_UNITS = {"vec4": "vec4 registers", "vgpr": "VGPRs", "work registers": "work registers (allocation)"}


def vendor_tiles_figure(df: pd.DataFrame, winners: pd.DataFrame | None = None, *, columns: int = 4):
    """Registers (bars) and occupancy (line, right axis, 0..1) per tile, one panel per GPU; tiles in the order of
    (TILE_M, TILE_N4, TILE_K4); a tile that failed is marked ×; the `vendor_tile_winners` tile is starred; a tile
    compiled on the fallback path (no dot product) has a hatched bar."""
    from ..benchmarks.conv_vendors import vendor_tile_winners
    winners = vendor_tile_winners(df) if winners is None else winners
    gpus = list(dict.fromkeys(df["gpu"]))
    order = (df[["tile", "TILE_M", "TILE_N4", "TILE_K4"]].drop_duplicates("tile")
             .sort_values(["TILE_M", "TILE_N4", "TILE_K4"])["tile"].tolist())
    rows = math.ceil(len(gpus) / columns)
    fig = Figure(figsize=(4.2 * min(columns, len(gpus)), 3.3 * rows), layout="constrained")
    axes = fig.subplots(rows, min(columns, len(gpus)), squeeze=False)
    x = {t: i for i, t in enumerate(order)}
    for ax, gpu in zip(axes.flat, gpus):
        g = df[df["gpu"] == gpu].set_index("tile").reindex(order)
        vendor = g["vendor"].dropna().iloc[0] if g["vendor"].notna().any() else "adreno"
        regs = pd.to_numeric(g["registers"], errors="coerce")
        fallback = g["path"].astype(str).str.startswith("fallback")
        bars = ax.bar(range(len(order)), regs.fillna(0), color=_BAR.get(vendor, "#888"), alpha=0.75)
        for bar, fb in zip(bars, fallback):
            if fb:
                bar.set_hatch("//")
        unit = g["register_unit"].dropna().iloc[0] if g["register_unit"].notna().any() else "registers"
        ax.set_ylabel(_UNITS.get(unit, unit), fontsize=8)
        failed = [x[t] for t in order if isinstance(g.loc[t, "error"], str)]
        if failed:
            ax.plot(failed, [0] * len(failed), "x", color="black", markersize=6, label="failed")
        twin = ax.twinx()
        twin.plot(range(len(order)), pd.to_numeric(g["occupancy"], errors="coerce"), "o-", color="black",
                  markersize=3, linewidth=1)
        twin.set_ylim(0, 1.05)
        twin.set_ylabel("occupancy (compiler)", fontsize=8)
        win = winners[winners["gpu"] == gpu]
        if len(win) and isinstance(win["winner"].iloc[0], str):
            t = win["winner"].iloc[0]
            twin.plot([x[t]], [g.loc[t, "occupancy"]], "*", color="#d62728", markersize=14)
            title = f"{gpu}: {t} wins"
        else:
            title = f"{gpu}: no tile compiled"
        ax.set_title(f"{title}\n{g['compiler'].dropna().iloc[0] if g['compiler'].notna().any() else ''}",
                     fontsize=9)
        ax.set_xticks(range(len(order)))
        ax.set_xticklabels(order, rotation=90, fontsize=6)
    for ax in list(axes.flat)[len(gpus):]:
        ax.set_visible(False)
    fig.suptitle("q8ta_conv2d_pw tiles per vendor compiler (Mesa 25.0.7 on no-op kernel drivers): registers (bars), "
                 "occupancy (line), ★ most accumulators × occupancy without spills", fontsize=10)
    return fig
