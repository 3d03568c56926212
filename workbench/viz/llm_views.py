"""Pictures of LLM decode on ET-VK (issue 34), for notebook 12: where decode time goes, the 4-bit GEMV against the
copy at the same traffic, the vendors' compiler statistics of the GEMV variants, and the what-if of fewer bits.

    shares = decode_shares([families_a, families_b])      # + the shares reported on an Adreno 840 (#22968)
    fig = plot_family_shares(shares, rates)                # stacked bars per device, decode and prefill
    best = best_copy_fraction(q4_gemv_rows)                # best row per shape, group size and implementation
    fig = plot_copy_fraction(best)
    fig = plot_vendor_stats(vendor_rows)                   # instructions / weight byte, registers, occupancy
    what_if(roofline, bits=3, non_gemv_scale=0.5)          # tokens/s per device
    BitsExplorer(roofline)                                 # sliders over bits and the non-GEMV time kept

Everything here takes DataFrames (``etvk_profile_*_llm_*.csv``, ``llm_decode_roofline.csv``, ``q4_gemv*.csv``,
``q4_gemv_vendors.csv``), never a device.
"""
from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd

from ..etvk.model.llm import FAMILIES
from .explorer import SliderExplorer
from .figure import Figure, figure_png
from .titles import device_names

#: ExecuTorch #22968 (Qwen3 on an Adreno 840, decode): the shares of GPU time its profile reports. "rest" is what
#: the report does not name; it goes under the workbench's "other".
REPORTED_DEVICE = "Adreno 840 (reported, #22968)"
REPORTED_DECODE_SHARES = {"GEMV": 0.74, "SDPA": 0.12, "RMSNorm": 0.05, "copies/views": 0.05, "other": 0.04}

#: ET-VK's shaders in red everywhere, the workbench's in the other colours
ETVK_COLOR = "#d62728"
WORKBENCH_COLORS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f", "#bcbd22")


def _family_colors() -> dict:
    cmap = matplotlib.colormaps["tab10"]
    return {f: cmap(i) for i, f in enumerate(FAMILIES)}


def _need(frame: pd.DataFrame, columns, what: str) -> None:
    missing = [c for c in columns if c not in frame]
    if missing:
        raise ValueError(f"{what}: expected columns {list(columns)}, missing {missing} "
                         f"(got {list(frame.columns)})")


# ---------------------------------------------------------------------------------------------------------------------
# Where decode time goes

def decode_shares(families, *, reported: bool = True) -> pd.DataFrame:
    """One tidy frame of the per-family shares of GPU time (``etvk_profile_families_llm_*.csv`` frames, one per
    device) with, when `reported`, the decode shares #22968 gives for an Adreno 840 as a third device (source
    "reported"; no µs). Columns: device, step, family, share, gpu_us_per_step, dispatches, source."""
    parts = []
    for frame in families:
        _need(frame, ("step", "family", "share", "gpu_us_per_step", "dispatches", "device"), "a families frame")
        parts.append(frame[["device", "step", "family", "share", "gpu_us_per_step", "dispatches"]]
                     .assign(source="measured"))
    if reported:
        parts.append(pd.DataFrame({"device": REPORTED_DEVICE, "step": "decode",
                                   "family": list(REPORTED_DECODE_SHARES), "share": list(REPORTED_DECODE_SHARES.values()),
                                   "gpu_us_per_step": np.nan, "dispatches": np.nan, "source": "reported"}))
    if not parts:
        raise ValueError("decode_shares: expected at least one families frame or reported=True, got neither")
    out = pd.concat(parts, ignore_index=True)
    unknown = sorted(set(out["family"]) - set(FAMILIES))
    if unknown:
        raise ValueError(f"decode_shares: expected families among {FAMILIES}, got {unknown}")
    return out


def plot_family_shares(shares: pd.DataFrame, rates: pd.DataFrame | None = None, *, model: str = "the small Llama"):
    """Stacked bars of the share of GPU time per kernel family, one bar per device, decode and prefill side by side;
    above each bar tokens/s from `rates` (``etvk_profile_rates_llm_*.csv`` rows: by GPU time and by ET-VK's
    ETVK_EXECUTE wall time) and the GPU ms per step."""
    _need(shares, ("device", "step", "family", "share"), "shares")
    steps = [s for s in ("decode", "prefill") if (shares["step"] == s).any()]
    colors = _family_colors()
    devices = list(dict.fromkeys(shares["device"]))
    fig = Figure(figsize=(5.2 * len(steps) + 1.5, 5.2))
    axes = fig.subplots(1, len(steps), squeeze=False)[0]
    for ax, step in zip(axes, steps):
        d = shares[shares["step"] == step]
        here = [dev for dev in devices if (d["device"] == dev).any()]
        pivot = d.pivot_table(index="device", columns="family", values="share", aggfunc="sum").reindex(here)
        bottom = np.zeros(len(here))
        x = np.arange(len(here))
        for family in FAMILIES:
            if family not in pivot:
                continue
            values = pivot[family].fillna(0).to_numpy()
            ax.bar(x, values * 100, bottom=bottom * 100, color=colors[family], label=family, width=0.6,
                   edgecolor="white", linewidth=0.5)
            for xi, v, b in zip(x, values, bottom):
                if v >= 0.04:
                    ax.text(xi, (b + v / 2) * 100, f"{v:.0%}", ha="center", va="center", fontsize=8, color="white")
            bottom += values
        for xi, dev in zip(x, here):
            ax.text(xi, 101.5, _rate_label(rates, dev, step), ha="center", va="bottom", fontsize=7.5)
        ax.set_xticks(x, [_wrap(dev) for dev in here], fontsize=8)
        ax.set_ylim(0, 125)
        ax.set_yticks(range(0, 101, 20))
        ax.set_ylabel("% of the step's GPU time (sum of dispatch medians)")
        ax.set_title(f"{step}", fontsize=10)
    drawn = {}
    for ax in axes:  # every family drawn in any panel (GEMM only appears in prefill)
        drawn.update(zip(*reversed(ax.get_legend_handles_labels())))
    fig.legend([drawn[f] for f in FAMILIES if f in drawn], [f for f in FAMILIES if f in drawn],
               title="kernel family", loc="center right", fontsize=8, title_fontsize=8)
    fig.suptitle(f"GPU time per kernel family on ET-VK's runtime, {model} · {', '.join(devices)}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.86, 1))
    return fig


def _wrap(name: str, width: int = 18) -> str:
    words, lines, line = str(name).split(), [], ""
    for w in words:
        if line and len(line) + len(w) + 1 > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    return "\n".join([*lines, line])


def _rate_label(rates, device, step) -> str:
    if rates is None or not len(rates):
        return ""
    r = rates[(rates["device"] == device) & (rates["step"] == step)]
    if not len(r):
        return "shares as\nreported" if device == REPORTED_DEVICE else ""
    r = r.iloc[0]
    return (f"{r['tokens_per_s_gpu']:,.0f} tok/s GPU\n{r['tokens_per_s_execute']:,.0f} tok/s wall\n"
            f"{r['gpu_us'] / 1000:,.2f} ms GPU")


# ---------------------------------------------------------------------------------------------------------------------
# The GEMV against copy

def shape_label(row) -> str:
    return f"{row['model']}\n{row['layer']}\n{int(row['k'])}→{int(row['n'])}"


def best_copy_fraction(rows: pd.DataFrame, *, m: int = 1, cache: str | None = "cold") -> pd.DataFrame:
    """Per (shape, group size, impl) at `m` rows in the cache regime `cache` (rows older than the ``cache`` column
    are kept whatever it is; None: every regime): the row with the highest ``copy_fraction`` among the correct ones
    (status ok) that the copy check passes (`benchmarks.roof_check.check_copy_rows`: none faster than the copy of
    its traffic beyond both measurements' noise). Columns: the keys, cache, variant, median_us, GB/s, copy_GBps,
    copy_fraction, dram_fraction where recorded, device, label, and ``above_copy`` (how many of the shape's rows the
    copy check set aside)."""
    from ..benchmarks.roof_check import check_copy_rows
    _need(rows, ("impl", "model", "layer", "k", "n", "group_size", "m", "copy_fraction", "status"), "q4_gemv rows")
    r = rows[rows["impl"].isin(["workbench", "etvk"]) & (rows["m"] == m) & (rows["status"] == "ok")]
    if cache is not None and "cache" in r:
        r = r[r["cache"].isna() | (r["cache"] == cache)]
    if "correct" in r:
        r = r[r["correct"].astype(str).isin(["True", "true", "1"])]
    r = r.dropna(subset=["copy_fraction"])
    checked = check_copy_rows([r]) if len(r) else r.assign(above_copy=False)
    keys = ["model", "layer", "k", "n", "group_size", "impl"]
    above = checked[checked["above_copy"]].groupby(keys).size().rename("above_copy")
    ok = checked[~checked["above_copy"]]
    best = ok.loc[ok.groupby(keys)["copy_fraction"].idxmax()]
    columns = [*keys, "cache", "variant", "median_us", "GB/s", "copy_GBps", "copy_fraction", "dram_fraction",
               "device"]
    best = best[[c for c in columns if c in best]].merge(above, on=keys, how="left")
    best["above_copy"] = best["above_copy"].fillna(0).astype(int)
    best["label"] = [shape_label(x) for x in best.to_dict("records")]
    best["weights"] = best["k"] * best["n"]
    return (best.sort_values(["weights", "model", "k", "group_size", "impl"]).drop(columns="weights")
            .reset_index(drop=True))


def plot_copy_fraction(best: pd.DataFrame, *, goal: float = 0.9, title: str = "4-bit GEMV at decode (M = 1)"):
    """Grouped bars: % of the copy at the same traffic per decode shape, ET-VK's GEMV beside the workbench's best
    variant; one panel per group size; the goal as a line."""
    _need(best, ("impl", "label", "group_size", "copy_fraction"), "best rows")
    groups = sorted(best["group_size"].dropna().unique())
    labels = list(dict.fromkeys(best["label"]))
    impls = [i for i in ("etvk", "workbench") if (best["impl"] == i).any()]
    colors = {"etvk": ETVK_COLOR, "workbench": WORKBENCH_COLORS[0]}
    names = {"etvk": "ET-VK q4gsw_linear_gemv_coop", "workbench": "workbench q4_gemv (best variant)"}
    regimes = sorted(best["cache"].dropna().unique()) if "cache" in best else []
    if regimes:
        title = f"{title}, {' / '.join(regimes)} (cache)"
    fig = Figure(figsize=(max(7.0, 1.1 * len(labels) + 2), 3.3 * len(groups) + 0.8))
    axes = fig.subplots(len(groups), 1, squeeze=False)[:, 0]
    width = 0.8 / max(len(impls), 1)
    for ax, group in zip(axes, groups):
        d = best[best["group_size"] == group]
        x = np.arange(len(labels))
        for j, impl in enumerate(impls):
            v = d[d["impl"] == impl].set_index("label")["copy_fraction"].reindex(labels)
            pos = x + (j - (len(impls) - 1) / 2) * width
            ax.bar(pos, v * 100, width=width, color=colors[impl], label=names[impl])
            for p, val in zip(pos, v):
                if np.isfinite(val):
                    ax.text(p, val * 100 + 1, f"{val:.0%}", ha="center", va="bottom", fontsize=7)
        ax.axhline(goal * 100, color="k", ls="--", lw=0.8, label=f"goal: {goal:.0%} of copy")
        ax.set_xticks(x, labels, fontsize=7.5)
        ax.set_ylim(0, 125)
        ax.set_yticks(range(0, 101, 20))
        ax.set_ylabel("% of copy GB/s at the\nsame traffic and regime")
        ax.set_title(f"group size {int(group)}", fontsize=9)
    axes[0].legend(fontsize=8, loc="upper left", ncol=3)
    fig.suptitle(f"{title} · {device_names(best) or 'device unknown'}", fontsize=10)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------------------------------
# The field's GEMVs in the same run

#: the field run's implementations as the table and chart name them (``impl`` prefixes of `q4_gemv_field.csv`)
FIELD_IMPLS = {"workbench": "workbench (best build)", "etvk": "ET-VK q4gsw_linear_gemv_coop",
               "llama.cpp-vulkan-q4_0-mmv": "llama.cpp Vulkan q4_0 (float path)",
               "llama.cpp-vulkan-q4_0-mmvq": "llama.cpp Vulkan q4_0 (integer-dot path)",
               "torch-int4-tinygemm": "torchao int4 (tinygemm, CUDA)", "cublas-fp16": "cuBLAS fp16 (CUDA)"}
PEERS = ("llama.cpp-vulkan-q4_0-mmv", "llama.cpp-vulkan-q4_0-mmvq", "torch-int4-tinygemm")  # 4-bit peers


def field_table(rows: pd.DataFrame, *, group_size: int = 32) -> pd.DataFrame:
    """Per shape and regime: the fastest correct row of each implementation (the workbench's diagnostic builds left
    out), its µs, % of the Vulkan copy at its traffic and regime (`copy_fraction`) and, for CUDA-timed rows, of the
    CUDA copy (`cuda_copy_fraction`); ``vs_best_peer``: µs ÷ the fastest 4-bit peer's (llama.cpp's two paths,
    torchao's tinygemm) of the same shape and regime (< 1: faster than every peer)."""
    _need(rows, ("impl", "k", "n", "median_us", "status"), "q4_gemv_field rows")
    r = rows[rows["impl"].isin(list(FIELD_IMPLS)) & (rows["status"] == "ok")].copy()
    if "group_size" in r:
        r = r[r["group_size"].isna() | (r["group_size"] == group_size)]
    if "diagnostic" in r:
        r = r[r["diagnostic"].fillna(0).astype(float) == 0]
    if "correct" in r:
        r = r[r["correct"].astype(str).isin(["True", "true", "1", "1.0"])]
    r["cache"] = r["cache"].fillna("") if "cache" in r else ""
    keys = ["k", "n", "cache", "impl"]
    best = r.loc[r.groupby(keys)["median_us"].idxmin()]
    columns = [*keys, "model", "layer", "variant", "median_us", "p10_us", "p90_us", "copy_fraction",
               "cuda_copy_fraction", "sm_clock_mhz_median", "device"]
    best = best[[c for c in columns if c in best]].reset_index(drop=True)
    peer = best[best["impl"].isin(PEERS)].groupby(["k", "n", "cache"])["median_us"].min().rename("best_peer_us")
    best = best.merge(peer, on=["k", "n", "cache"], how="left")
    best["vs_best_peer"] = best["median_us"] / best["best_peer_us"]
    order = {impl: i for i, impl in enumerate(FIELD_IMPLS)}
    best["_o"] = best["impl"].map(order)
    best["_w"] = best["k"] * best["n"]
    return best.sort_values(["_w", "k", "cache", "_o"]).drop(columns=["_o", "_w"]).reset_index(drop=True)


def plot_field(table: pd.DataFrame, *, cache: str = "cold", title: str = "4-bit GEMV at decode beside the field"):
    """Grouped bars of µs per shape (M = 1, group 32 / q4_0) in regime `cache`, one bar per implementation of
    `field_table`, the ratio to the best 4-bit peer written over the workbench's bar."""
    _need(table, ("impl", "k", "n", "cache", "median_us"), "field_table rows")
    d = table[table["cache"] == cache]
    shapes = list(dict.fromkeys(zip(d["k"], d["n"])))
    impls = [i for i in FIELD_IMPLS if (d["impl"] == i).any()]
    palette = matplotlib.colormaps["tab10"]
    fig = Figure(figsize=(max(7.0, 1.3 * len(shapes) + 2), 4.8))
    ax = fig.subplots()
    width = 0.84 / max(len(impls), 1)
    x = np.arange(len(shapes))
    for j, impl in enumerate(impls):
        v = d[d["impl"] == impl].set_index(["k", "n"])["median_us"].reindex(shapes)
        pos = x + (j - (len(impls) - 1) / 2) * width
        ax.bar(pos, v, width=width, color=palette(j), label=FIELD_IMPLS[impl])
        if impl == "workbench" and "vs_best_peer" in d:
            ratio = d[d["impl"] == impl].set_index(["k", "n"])["vs_best_peer"].reindex(shapes)
            for p, val, rt in zip(pos, v, ratio):
                if np.isfinite(val) and np.isfinite(rt):
                    ax.text(p, val * 1.02, f"{1 / rt:.2f}×", ha="center", va="bottom", fontsize=7)
    labels = []
    for k, n in shapes:
        row = d[(d["k"] == k) & (d["n"] == n)].iloc[0]
        labels.append(f"{row.get('model', '')}\n{int(k)}→{int(n)}")
    ax.set_xticks(x, labels, fontsize=7.5)
    ax.set_yscale("log")  # ET-VK's GEMV is 3-9x the others: a linear axis flattens the field
    ax.set_ylabel(f"µs per GEMV ({cache} cache, log)")
    ax.legend(fontsize=7.5, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    fig.suptitle(f"{title} ({cache}) · {device_names(d) or 'device unknown'}\nover the workbench's bar: its "
                 "speed-up on the fastest 4-bit peer", fontsize=9)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------------------------------
# The vendors' compilers

VENDOR_METRICS = (("instructions_per_weight_byte", "static instructions per\nweight byte loaded per step"),
                  ("registers", "registers per thread\n(unit under each GPU)"),
                  ("occupancy", "occupancy (of the GPU's\nmaximum waves)"))


def plot_vendor_stats(rows: pd.DataFrame, *, title: str = "The 4-bit GEMV variants on the vendors' compilers"):
    """One panel per metric (:data:`VENDOR_METRICS`), GPUs along x, one bar per shader (ET-VK's first, hatched); rows
    with an ``error`` are left out (the caller prints them)."""
    _need(rows, ("impl", "variant", "gpu", "register_unit", *(m for m, _ in VENDOR_METRICS)), "vendor rows")
    r = rows[rows["error"].isna() | (rows["error"].astype(str) == "")] if "error" in rows else rows
    r = r.dropna(subset=["instructions_per_weight_byte"])
    if not len(r):
        raise ValueError("plot_vendor_stats: no row without an error to draw")
    gpus = list(dict.fromkeys(r["gpu"]))
    shaders = list(dict.fromkeys(r.sort_values("impl", key=lambda s: s != "etvk")["variant"]))
    impl_of = dict(zip(r["variant"], r["impl"]))
    units = r.groupby("gpu")["register_unit"].first()
    palette = iter(WORKBENCH_COLORS * (len(shaders) // len(WORKBENCH_COLORS) + 1))
    colors = {s: ETVK_COLOR if impl_of[s] == "etvk" else next(palette) for s in shaders}
    fig = Figure(figsize=(max(8.0, 1.8 * len(gpus) + 2), 8.6))
    axes = fig.subplots(len(VENDOR_METRICS), 1, sharex=True)
    width = 0.85 / len(shaders)
    x = np.arange(len(gpus))
    for ax, (metric, label) in zip(axes, VENDOR_METRICS):
        for j, shader in enumerate(shaders):
            v = r[r["variant"] == shader].set_index("gpu")[metric].reindex(gpus)
            etvk = impl_of[shader] == "etvk"
            ax.bar(x + (j - (len(shaders) - 1) / 2) * width, v, width=width, color=colors[shader],
                   hatch="//" if etvk else None, edgecolor="white", label=f"{impl_of[shader]}: {shader}")
        ax.set_ylabel(label, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    axes[-1].set_xticks(x, [f"{g}\n({units.get(g, '?')})" for g in gpus], fontsize=8)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=2, title="shader (impl: variant)",
               title_fontsize=7.5)
    shape = ", ".join(dict.fromkeys(r["shape"].astype(str))) if "shape" in r else ""
    group = ", ".join(str(int(g)) for g in dict.fromkeys(r["group_size"].dropna())) if "group_size" in r else ""
    compilers = ", ".join(dict.fromkeys(r["compiler"].dropna().astype(str))) if "compiler" in r else ""
    fig.suptitle(f"{title} · {compilers} · {shape}, group {group}", fontsize=9.5)
    fig.tight_layout(rect=(0, 0.04 + 0.022 * ((len(shaders) + 1) // 2), 1, 1))
    return fig


# ---------------------------------------------------------------------------------------------------------------------
# The what-if of fewer bits

ROOFLINE_COLUMNS = ("bits", "device", "linear_weight_bytes", "gemv_us_per_token", "non_gemv_us_per_token")


def _measured(roofline: pd.DataFrame) -> pd.DataFrame:
    """Per device: the 4-bit (measured) row and the linear weights' bytes per bit (affine in bits: packed weights
    grow with them, the group scales do not), from two of its rows."""
    _need(roofline, ROOFLINE_COLUMNS, "llm_decode_roofline rows")
    out = []
    for device, d in roofline.groupby("device", sort=False):
        d = d.set_index("bits")
        if 4 not in d.index or len(d) < 2:
            raise ValueError(f"{device}: expected the measured 4-bit row and one other bit width, got bits "
                             f"{sorted(d.index)}")
        other = next(b for b in d.index if b != 4)
        per_bit = (d.at[4, "linear_weight_bytes"] - d.at[other, "linear_weight_bytes"]) / (4 - other)
        out.append({"device": device, "gemv_us": d.at[4, "gemv_us_per_token"],
                    "non_gemv_us": d.at[4, "non_gemv_us_per_token"], "linear_bytes_4": d.at[4, "linear_weight_bytes"],
                    "bytes_per_bit": per_bit, "scale_bytes": d.at[4, "linear_weight_bytes"] - 4 * per_bit})
    return pd.DataFrame(out)


def what_if(roofline: pd.DataFrame, bits=4, non_gemv_scale: float = 1.0) -> pd.DataFrame:
    """Decode tokens/s per device with `bits`-bit linear weights (the GEMVs' time scaled by their bytes at the
    bandwidth they reach at 4 bits, as :func:`workbench.etvk.model.llm.roofline` projects) and the rest of the step
    (SDPA, RMSNorm, rotary, copies) at `non_gemv_scale` × its measured time. One row per device and bit width."""
    if not 0 <= non_gemv_scale <= 1:
        raise ValueError(f"expected non_gemv_scale in 0..1 (the share of the measured non-GEMV time kept), "
                         f"got {non_gemv_scale}")
    widths = [int(b) for b in np.atleast_1d(bits)]
    if any(b < 1 or b > 8 for b in widths):
        raise ValueError(f"expected bit widths in 1..8, got {widths}")
    rows = []
    for m in _measured(roofline).to_dict("records"):
        base = m["gemv_us"] + m["non_gemv_us"]
        for b in widths:
            linear = m["scale_bytes"] + b * m["bytes_per_bit"]
            gemv = m["gemv_us"] * linear / m["linear_bytes_4"]
            non = m["non_gemv_us"] * non_gemv_scale
            rows.append({"device": m["device"], "bits": b, "non_gemv_scale": non_gemv_scale,
                         "linear_weight_bytes": linear, "gemv_us_per_token": gemv, "non_gemv_us_per_token": non,
                         "us_per_token": gemv + non, "tokens_per_s": 1e6 / (gemv + non),
                         "speedup": base / (gemv + non), "gemv_share": gemv / (gemv + non)})
    return pd.DataFrame(rows)


def plot_what_if(roofline: pd.DataFrame, *, bits=range(2, 9), scales=(1.0, 0.5, 0.25),
                 selected: tuple[int, float] | None = None):
    """Tokens/s against bits per weight, one panel per device, a line per share of the non-GEMV time kept; the
    committed rows (measured at 4 bits, projected at 3 and 2) as markers; `selected` = (bits, scale) circled."""
    devices = list(dict.fromkeys(roofline["device"]))
    fig = Figure(figsize=(5.0 * len(devices), 4.0))
    axes = fig.subplots(1, len(devices), squeeze=False)[0]
    cmap = matplotlib.colormaps["viridis"]
    for ax, device in zip(axes, devices):
        mine = roofline[roofline["device"] == device]
        for i, s in enumerate(scales):
            w = what_if(mine, bits, s)
            ax.plot(w["bits"], w["tokens_per_s"], "-", color=cmap(i / max(len(scales), 1)),
                    label=f"non-GEMV time × {s:g}")
        for source, marker in (("measured", "o"), ("projected", "s")):
            p = mine[mine["source"] == source] if "source" in mine else mine.iloc[0:0]
            if len(p):
                ax.plot(p["bits"], p["tokens_per_s"], marker, color="k", mfc="none", ms=7,
                        label=f"{source} ({', '.join(str(int(b)) for b in p['bits'])} bits)")
        if selected is not None:
            w = what_if(mine, selected[0], selected[1]).iloc[0]
            ax.plot([w["bits"]], [w["tokens_per_s"]], "*", color="#d62728", ms=14,
                    label=f"{int(w['bits'])} bits, × {selected[1]:g}: {w['tokens_per_s']:,.0f} tok/s")
        m = _measured(mine).iloc[0]
        ax.set_title(f"{device}\nGEMV {m['gemv_us'] / (m['gemv_us'] + m['non_gemv_us']):.0%} of decode at 4 bits",
                     fontsize=9)
        ax.set_xlabel("bits per linear weight (group scales unchanged)")
        ax.set_ylabel("decode tokens/s (GPU time)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    model = ", ".join(dict.fromkeys(roofline["model"])) if "model" in roofline else "the model"
    fig.suptitle(f"What fewer bits buy {model}'s decode, and what the rest of the step does · "
                 f"{', '.join(devices)}", fontsize=10)
    fig.tight_layout()
    return fig


class BitsExplorer(SliderExplorer):
    """Sliders over the bits per weight and the share of the non-GEMV time kept; ``readout`` (a Label) says each
    device's decode tokens/s, ``text`` its value, ``table`` the :func:`what_if` rows, ``figure`` / ``image`` the
    chart with the choice marked, ``widget`` the box to display."""

    def __init__(self, roofline: pd.DataFrame, bits: int = 4, non_gemv_scale: float = 1.0):
        import ipywidgets as widgets
        self.roofline = roofline
        _measured(roofline)  # refuses a frame it cannot read before any widget exists
        self.sliders = {
            "bits": widgets.IntSlider(value=bits, min=1, max=8, description="bits", continuous_update=False),
            "non_gemv": widgets.FloatSlider(value=non_gemv_scale, min=0.0, max=1.0, step=0.05,
                                            description="non-GEMV ×", continuous_update=False),
        }
        self.readout = widgets.Label()
        self.image = widgets.Image(format="png")
        self.figure = None
        for slider in self.sliders.values():
            slider.observe(self._on_change, names="value")
        self.widget = widgets.VBox([widgets.HBox(list(self.sliders.values())), self.readout, self.image])
        self.update()

    def update(self):
        bits, scale = self.sliders["bits"].value, self.sliders["non_gemv"].value
        self.table = what_if(self.roofline, bits, scale)
        self.text = f"{bits} bits, non-GEMV time × {scale:g}: " + "; ".join(
            f"{r.device} {r.tokens_per_s:,.0f} tok/s (× {r.speedup:.2f}, GEMV {r.gemv_share:.0%})"
            for r in self.table.itertuples())
        self.readout.value = self.text
        self.figure = plot_what_if(self.roofline, bits=range(1, 9), selected=(bits, scale))
        self.image.value = figure_png(self.figure, dpi=72)

    def _ipython_display_(self):
        from IPython.display import display
        display(self.widget)
