"""The roofline: every kernel measurement placed under the device's roofs (copy bandwidth, int8 dot peak, fp32 FMA
peak). Kernels that do arithmetic go on the classic log-log chart (ops per byte → ops per second); pure data
movement kernels (no arithmetic: packing, pixel shuffle, copies) go on a bandwidth panel against the copy roof."""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure


def compute_points(frames) -> pd.DataFrame:
    """Rows with ops (2 per MAC) and bytes → intensity and achieved GOP/s."""
    df = pd.concat([f for f in frames if f is not None and len(f)], ignore_index=True)
    df = df[(df.get("macs", 0) > 0) & df["GOP/s"].notna()].copy()
    df["intensity"] = 2 * df["macs"] / df["bytes"]
    return df


def bandwidth_points(frames) -> pd.DataFrame:
    df = pd.concat([f for f in frames if f is not None and len(f)], ignore_index=True)
    return df[(df.get("macs", 0).fillna(0) == 0) & df["GB/s"].notna() & (df.get("kernel") != "copy")].copy()


def roofline_figure(roofs: dict, compute: pd.DataFrame, movement: pd.DataFrame, *, label_col: str = "label",
                    device: str = "", max_bars: int = 14) -> Figure:
    fig = Figure(figsize=(12, 4.8), layout="constrained")
    ax, bx = fig.subplots(1, 2, width_ratios=[1.25, 1])
    copy_gbps = roofs["copy_GBps"]
    x = np.logspace(-2, 3, 200)
    for name, peak, style in (("int8 dot peak", roofs.get("int8_GOPs"), "-"),
                              ("fp32 FMA peak", roofs.get("fp32_GFLOPs"), "--")):
        if peak and np.isfinite(peak):
            ax.plot(x, np.minimum(peak, x * copy_gbps), style, color="k", lw=1.2,
                    label=f"{name}: {peak:,.0f} GOP/s")
    ax.plot(x, x * copy_gbps, ":", color="grey", lw=1, label=f"copy bandwidth: {copy_gbps:,.0f} GB/s")
    if len(compute):
        for key, group in compute.groupby(label_col):
            ax.scatter(group["intensity"], group["GOP/s"], s=22, label=str(key), zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (ops per byte moved)")
    ax.set_ylabel("GOP/s")
    ax.set_title(f"roofline — {device}")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.2)
    if len(movement):
        best = movement.sort_values("GB/s", ascending=False).drop_duplicates(label_col).head(max_bars)
        y = np.arange(len(best))
        bx.barh(y, best["GB/s"], color="tab:blue")
        bx.set_yticks(y, [str(v) for v in best[label_col]], fontsize=7)
        bx.invert_yaxis()
        bx.axvline(copy_gbps, color="k", ls="--", lw=1, label=f"copy {copy_gbps:,.0f} GB/s")
        for yi, v in zip(y, best["GB/s"]):
            bx.text(v, yi, f" {100 * v / copy_gbps:.0f}%", va="center", fontsize=7)
        bx.legend(fontsize=7, loc="lower right")
    bx.set_xlabel("GB/s (bytes read + written)")
    bx.set_title("data movement kernels (best of each) vs copy")
    return fig
