"""The roofline: every kernel measurement placed under the device's roofs (copy bandwidth, int8 dot peak, fp32 FMA
peak). Kernels that do arithmetic go on the classic log-log chart (ops per byte → ops per second); pure data
movement kernels (no arithmetic: packing, pixel shuffle) go on a panel of their `copy_fraction`: GB/s over the copy
of the same bytes measured in the same run (`benchmarks.copy.CopyAtTraffic`), the one "% of copy" of every table.
The bandwidth roof of the left panel (the largest copy, `peak.csv`) is another figure: a kernel at 92 % of its own
run's copy reads 83 % of that roof, so the panel never divides by it."""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .titles import device_names, with_device


def compute_points(frames) -> pd.DataFrame:
    """Rows with ops (2 per MAC) and bytes → intensity and achieved GOP/s."""
    df = pd.concat([f for f in frames if f is not None and len(f)], ignore_index=True)
    df = df[(df.get("macs", 0) > 0) & df["GOP/s"].notna()].copy()
    df["intensity"] = 2 * df["macs"] / df["bytes"]
    return df


def bandwidth_points(frames) -> pd.DataFrame:
    """Rows without MACs that carry a rate, the copies themselves left out (they are the baseline)."""
    df = pd.concat([f for f in frames if f is not None and len(f)], ignore_index=True)
    return df[(df.get("macs", 0).fillna(0) == 0) & df["GB/s"].notna() & (df.get("kernel") != "copy")].copy()


def roofline_figure(roofs: dict, compute: pd.DataFrame, movement: pd.DataFrame, *, label_col: str = "label",
                    device: str = "", max_bars: int = 14, note: str | None = None) -> Figure:
    """`roofs` from `workbench.benchmarks.peak.roofs`: one line per int8 dot form (OpSDotAccSat, OpSDot + add), fp32
    FMA, and the int8 cooperative-matrix (tensor-core) roof where one was measured; `note` (e.g. "no cooperative
    matrix on this device") is written on the chart where that roof is missing. `movement`'s bars are each label's
    best `copy_fraction` at its largest bytes (rows without one are left out, and counted on the panel); `device`
    names the device in the title, else the rows' `device` column does."""
    fig = Figure(figsize=(14, 4.8), layout="constrained")
    ax, bx = fig.subplots(1, 2, width_ratios=[1.25, 1])
    copy_gbps = roofs["copy_GBps"]
    x = np.logspace(-2, 4, 200)
    lines = [("int8 cooperative matrix", roofs.get("int8_mma_GOPs"), "-", "tab:red"),
             ("int8 dot OpSDot + add", roofs.get("int8_wrap_GOPs"), "-", "k"),
             ("int8 dot OpSDotAccSat", roofs.get("int8_sat_GOPs"), "-.", "k"),
             ("fp32 FMA", roofs.get("fp32_GFLOPs"), "--", "grey")]
    if not any(v and np.isfinite(v) for _, v, _, _ in lines[1:3]):  # roofs without the per-form split
        lines[1] = ("int8 dot peak", roofs.get("int8_GOPs"), "-", "k")
    for name, peak, style, color in lines:
        if peak and np.isfinite(peak):
            ax.plot(x, np.minimum(peak, x * copy_gbps), style, color=color, lw=1.2,
                    label=f"{name}: {peak:,.0f} GOP/s")
    if note or not (roofs.get("int8_mma_GOPs") and np.isfinite(roofs.get("int8_mma_GOPs"))):
        ax.text(0.02, 0.97, note or "no cooperative matrix roof measured", transform=ax.transAxes, fontsize=8,
                va="top", color="tab:red")
    ax.plot(x, x * copy_gbps, ":", color="grey", lw=1, label=f"copy bandwidth: {copy_gbps:,.0f} GB/s")
    if len(compute):
        for key, group in compute.groupby(label_col):
            ax.scatter(group["intensity"], group["GOP/s"], s=22, label=str(key), zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (ops per byte moved)")
    ax.set_ylabel("GOP/s")
    ax.set_title(with_device("roofline", compute, movement, device=device))
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.2)
    fractions = pd.to_numeric(movement["copy_fraction"], errors="coerce") if "copy_fraction" in movement else None
    rated = movement[fractions.notna()].assign(copy_fraction=fractions) if fractions is not None else movement[:0]
    if len(rated):
        # each label at its largest traffic: small shapes run from the cache, where a copy_fraction says little
        largest = rated.groupby(label_col)["bytes"].transform("max") if "bytes" in rated else None
        top = rated[rated["bytes"] == largest] if largest is not None else rated
        best = top.sort_values("copy_fraction", ascending=False).drop_duplicates(label_col).head(max_bars)
        y = np.arange(len(best))
        bx.barh(y, 100 * best["copy_fraction"], color="tab:blue")
        bx.set_yticks(y, [str(v) for v in best[label_col]], fontsize=7)
        bx.invert_yaxis()
        bx.axvline(100, color="k", ls="--", lw=1, zorder=1)
        for yi, r in zip(y, best.to_dict("records")):
            source = f", {r['table']}" if isinstance(r.get("table"), str) else ""
            source += f", {r['cache']}" if isinstance(r.get("cache"), str) else ", regime not recorded"
            rate = f"{r['GB/s']:,.0f}" if r["GB/s"] >= 100 else f"{r['GB/s']:.3g}"
            bx.text(100 * r["copy_fraction"], yi, f" {100 * r['copy_fraction']:.1f} % ({rate} GB/s{source})",
                    va="center", fontsize=7, zorder=3, bbox=dict(facecolor="white", edgecolor="none", pad=0.3))
        bx.set_xlim(0, 100 * max(1.0, best["copy_fraction"].max()) * 1.5)
    if len(movement) > len(rated):
        bx.text(0.02, 0.01, f"{len(movement) - len(rated)} rows without a copy of the same bytes left out",
                transform=bx.transAxes, fontsize=7, color="grey")
    bx.set_xlabel("% of copy: GB/s ÷ copy of the same bytes, same run, same cache regime (hot / cold)")
    bx.set_title("data movement: % of copy (largest traffic)")
    return fig


def folder_figure(folder, roofs: dict, device: str = "") -> Figure:
    """The roofline of a results folder written by the CLI suites (`workbench bench conv-pw | coopmat |
    pixel-shuffle`, `workbench etvk bench`): the conv tiles per dot form, the cooperative-matrix GEMM where its
    results were right, torch's GEMMs, and the data-movement kernels against the copy roof."""
    from ..measure import ResultsReader
    results = ResultsReader(folder)
    load = results.load
    compute, movement = [], []
    conv = load("conv_pw", "conv_pw_sweep")  # the CLI suite's rows, else notebook 04's sweep
    if conv is not None:
        conv = conv.copy()
        vulkan = conv["method"].astype(str).str.startswith("vulkan")
        from ..benchmarks.roof_check import SAT, instruction_path  # rows older than `saturate`: the variant says
        form = np.where([instruction_path(r) == SAT for r in conv.to_dict("records")], "OpSDotAccSat", "OpSDot + add")
        conv["label"] = np.where(vulkan, "conv pw (" + pd.Series(form, index=conv.index) + ")", conv["method"])
        compute.append(conv)
    coop = load("coopmat")
    if coop is not None and "GOP/s" in coop:
        ok = coop[coop["kernel"].isin(["coopmat gemm", "coopmat conv"]) & (coop["status"] == "ok")
                  & coop["method"].astype(str).str.startswith("vulkan")].copy()
        ok["label"] = np.where(ok["kernel"] == "coopmat conv", "conv pw int8 out (cooperative matrix)",
                               "conv pw as int32 GEMM (cooperative matrix)")
        compute.append(ok)
    for names in (("pixel_shuffle", "pixel_shuffle_bench"), ("pixel_shuffle_block",), ("pixel_shuffle_limit",),
                  ("pixel_shuffle_gaps",), ("etvk",)):
        df = load(*names)  # the CLI suite's rows, else the notebook's export
        if df is not None and "impl" in df:
            df = df[df["impl"].isin(["fused", "block", "float", "chain", "ET-VK", "workbench"])].copy()
            df["label"] = df["impl"].astype(str) + " " + df.get("variant", df["kernel"]).astype(str)
            df["table"] = next(n for n in names if results.has(n))
            movement.append(df)
    points = compute_points(compute) if compute else pd.DataFrame()
    bars = bandwidth_points(movement) if movement else pd.DataFrame()
    coop_note = None
    if coop is not None and not (roofs.get("int8_mma_GOPs") and np.isfinite(roofs.get("int8_mma_GOPs"))):
        coop_note = ("cooperative matrix: results wrong on this device, no roof" if (coop["status"] == "WRONG").any()
                     else str(coop["reason"].iloc[0]) if "reason" in coop else None)
    return roofline_figure(roofs, points, bars, device=device or device_names(load("peak")), note=coop_note)
