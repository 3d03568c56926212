"""The `coopmat-vs-etvk` suite as one chart: TOP/s per GEMM shape, one bar per implementation (ET-VK's coopmat linear
at its own tiling and at the workbench's 32-lane tilings, the workbench's coopmat GEMM and conv at their best tile,
torch._int_mm). A row that did not run (refused, skipped, failed) is a hatched stub marked with its status and a
footnote number; the footnotes under the chart give each reason. A wrong result is drawn in outline, marked WRONG."""
from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .titles import with_device

__all__ = ["chart_rows", "plot_coopmat_vs_etvk"]

ORDER = ("etvk", "etvk sg32", "etvk sg32_aligned", "workbench gemm", "workbench conv", "torch._int_mm")
COLORS = {"etvk": "#7f7f7f", "etvk sg32": "#d62728", "etvk sg32_aligned": "#ff9896", "workbench gemm": "#1f77b4",
          "workbench conv": "#aec7e8", "torch._int_mm": "#2ca02c"}
LABELS = {"etvk": "ET-VK, its own tiling (64 lanes)", "etvk sg32": "ET-VK template, sg32 (workbench-made)",
          "etvk sg32_aligned": "ET-VK template, sg32 aligned B", "workbench gemm": "workbench coopmat GEMM (best)",
          "workbench conv": "workbench coopmat conv, int8 out (best)", "torch._int_mm": "torch._int_mm"}


def chart_rows(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (shape, impl): the best correct row where any ran correctly (`best` for the workbench's tiles),
    else the first row (refused / skipped / failed / WRONG) so that its status shows."""
    for column in ("impl", "shape", "status"):
        if column not in df.columns:
            raise ValueError(f"expected a coopmat-vs-etvk DataFrame with columns impl, shape, status, TOP/s; "
                             f"{column!r} is missing (columns: {list(df.columns)})")
    picked = []
    for (_, _), group in df.groupby(["shape", "impl"], sort=False):
        ok = group[(group["status"] == "ok") & group["TOP/s"].notna()]
        picked.append(ok.loc[ok["TOP/s"].idxmax()] if len(ok) else group.iloc[0])
    return pd.DataFrame(picked).reset_index(drop=True)


def plot_coopmat_vs_etvk(df: pd.DataFrame, title: str | None = None) -> Figure:
    """A matplotlib Figure (no pyplot) of `df`, the suite's DataFrame (`benchmarks.coopmat_vs_etvk.bench_suite`)."""
    rows = chart_rows(df)
    shapes = list(dict.fromkeys(rows["shape"]))
    impls = [i for i in ORDER if i in set(rows["impl"])] + sorted(set(rows["impl"]) - set(ORDER))
    origins = {s: rows.loc[rows["shape"] == s, "origin"].iloc[0] if "origin" in rows else "" for s in shapes}
    top = float(np.nanmax(rows["TOP/s"].to_numpy(dtype=float))) if rows["TOP/s"].notna().any() else 1.0
    stub = 0.04 * top
    reasons: list[str] = []
    fig = Figure(figsize=(max(7.0, 2.4 * len(shapes) + 2.5), 5.2))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / max(1, len(impls))
    for j, impl in enumerate(impls):
        for i, shape in enumerate(shapes):
            sel = rows[(rows["shape"] == shape) & (rows["impl"] == impl)]
            if not len(sel):
                continue
            r = sel.iloc[0]
            x = i - 0.4 + width * (j + 0.5)
            color = COLORS.get(impl, "#9467bd")
            status = str(r["status"])
            if status == "ok":
                ax.bar(x, r["TOP/s"], width, color=color)
                ax.text(x, r["TOP/s"], f"{r['TOP/s']:.3g}", ha="center", va="bottom", fontsize=7, rotation=90)
            elif status == "WRONG":
                ax.bar(x, r["TOP/s"], width, facecolor="none", edgecolor="#d62728", lw=1.5)
                ax.text(x, r["TOP/s"], "WRONG", ha="center", va="bottom", fontsize=7, rotation=90, color="#d62728")
            else:
                reason = str(r.get("reason") or status)
                if reason not in reasons:
                    reasons.append(reason)
                note = reasons.index(reason) + 1
                ax.bar(x, stub, width, facecolor="white", edgecolor=color, hatch="///", lw=1.0)
                ax.text(x, stub, f"{status.split(':')[0]} [{note}]", ha="center", va="bottom", fontsize=7,
                        rotation=90)
    for impl in impls:
        label = LABELS.get(impl, impl)
        if impl == "torch._int_mm" and "method" in rows:  # says where it ran: cuda or cpu
            label = str(rows.loc[rows["impl"] == impl, "method"].iloc[0])
        ax.bar(np.nan, 0, color=COLORS.get(impl, "#9467bd"), label=label)
    ax.set_xticks(range(len(shapes)), [f"{s}\n{origins[s]}" for s in shapes], fontsize=8)
    ax.set_xlabel("GEMM M x N x K (int8)")
    ax.set_ylabel("TOP/s (2·M·N·K / median time)")
    ax.set_ylim(0, top * 1.35)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    ax.set_title(with_device(title or "ET-VK's coopmat linear beside the workbench's coopmat GEMM and torch._int_mm",
                             df), fontsize=10)
    if reasons:
        notes = "\n".join(textwrap.fill(f"[{k}] {text}", 170, subsequent_indent="     ")
                          for k, text in enumerate(reasons, 1))
        fig.text(0.01, -0.02, notes, fontsize=6.5, va="top", ha="left", family="monospace")
    return fig
