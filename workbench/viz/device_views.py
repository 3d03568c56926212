"""Device against device: the same items measured on several devices, side by side."""
from __future__ import annotations

import numpy as np
import pandas as pd


def device_table(df: pd.DataFrame, value: str, label, facet: str | None = None,
                 device: str = "device_key") -> pd.DataFrame:
    """value per (facet, label) × device: the table the comparison chart draws. `label`: a column or a list of
    columns joined with spaces. Rows with an `error` are left out."""
    d = df.copy()
    if "error" in d:
        d = d[d["error"].isna()]
    labels = [label] if isinstance(label, str) else list(label)
    d["_label"] = d[labels].astype(str).agg(" ".join, axis=1)
    d["_facet"] = d[facet].astype(str) if facet else ""
    table = d.pivot_table(index=["_facet", "_label"], columns=device, values=value, aggfunc="median", sort=False)
    table.index.names = [facet or "", "item"]
    return table


def compare_devices(df: pd.DataFrame, value: str, label, *, facet: str | None = None, device: str = "device_key",
                    title: str | None = None, higher_is_better: bool = True):
    """Grouped bars: `value` per item (label) for every device, one panel per `facet`; with two or more devices a
    second row gives each device's value relative to the first (> 1: that device does better)."""
    import matplotlib.pyplot as plt
    table = device_table(df, value, label, facet, device)
    if table.empty:
        raise ValueError(f"nothing to compare: no rows without an error carry {value!r}")
    facets = list(dict.fromkeys(table.index.get_level_values(0)))
    devices = list(table.columns)
    rows = 2 if len(devices) > 1 else 1
    width = max(4.0, min(18.0, 0.45 * len(table) / max(1, len(facets)) * len(devices) + 2))
    fig, axes = plt.subplots(rows, len(facets), figsize=(width * len(facets) ** 0.5, 3.2 * rows + 0.6),
                             squeeze=False, sharey="row")
    bar = 0.8 / len(devices)
    for j, f in enumerate(facets):
        part = table.xs(f, level=0)
        x = np.arange(len(part))
        ax = axes[0][j]
        for k, dev in enumerate(devices):
            ax.bar(x + (k - (len(devices) - 1) / 2) * bar, part[dev].to_numpy(dtype=float), bar, label=str(dev))
        ax.set_title(str(f) if f else value, fontsize=9)
        ax.set_xticks(x, part.index, rotation=70, fontsize=7)
        if j == 0:
            ax.set_ylabel(value)
        if rows == 2:
            rel = axes[1][j]
            base = part[devices[0]].to_numpy(dtype=float)
            for k, dev in enumerate(devices[1:], start=1):
                ratio = part[dev].to_numpy(dtype=float) / base
                if not higher_is_better:
                    ratio = 1 / ratio
                rel.bar(x + (k - (len(devices) - 1) / 2) * bar, ratio, bar, color=f"C{k}")
            rel.axhline(1.0, color="k", lw=0.8)
            rel.set_xticks(x, part.index, rotation=70, fontsize=7)
            if j == 0:
                rel.set_ylabel(f"vs {devices[0]}"[:40])
    axes[0][0].legend(fontsize=7, loc="best")
    fig.suptitle(f"{title or value} · {' vs '.join(map(str, devices))}", fontsize=10)
    fig.tight_layout()
    return fig
