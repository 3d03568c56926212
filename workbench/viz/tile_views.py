"""Pictures of the pointwise int8 conv's accumulator tiles (matplotlib), and the live `TileExplorer` (ipywidgets).

Data in → Figure out (figures are made without pyplot, so nothing stays open; they show themselves in Jupyter):

* :func:`thread_tile_view`   which output widths × output channels each thread computes for a tile setting, over
  one output row (one (n, h) plane of the output), one thread's tile outlined, padding pale.
* :func:`time_vs_tile`       median GPU time (p10–p90 bars) per tile setting, one line per shape, from a sweep.
* :func:`registers_occupancy_vs_tile`  registers and theoretical occupancy per tile setting: the driver's numbers
  where the device reports them, and the rule-model bounds for sm_90 and Adreno 740 (always, labelled as such).
* :func:`gops_heatmap`       GOP/s over TILE_M × TILE_N4 (best TILE_K4, or one TILE_K4), for one shape.
* :class:`TileExplorer`      sliders for TILE_M, TILE_N4, TILE_K4 and the shape; each move recompiles (cached) and
  re-runs on the device, then redraws a chart of time, registers and occupancy and a one-line readout.
"""
from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
from matplotlib import colors as mcolors
from matplotlib.patches import Rectangle

from ..benchmarks import conv as conv_bench
from ..kernels import conv_pw as K
from .figure import Figure, figure_png

__all__ = ["thread_tile_view", "time_vs_tile", "registers_occupancy_vs_tile", "gops_heatmap", "TileExplorer",
           "tile_order", "EXPLORER_SHAPES"]

_HIGHLIGHT = "#d62728"
_PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#e15759", "#9c755f", "#ff9da7",
            "#8cd17d", "#499894", "#d37295", "#a0cbe8", "#ffbe7d", "#86bcb6", "#bab0ac"]


def tile_order(df: pd.DataFrame) -> list[str]:
    """Tile labels present in `df`, ordered by (TILE_M, TILE_N4, TILE_K4)."""
    tiles = df[["tile_m", "tile_n4", "tile_k4", "tile"]].dropna().drop_duplicates("tile")
    tiles = tiles.sort_values(["tile_m", "tile_n4", "tile_k4"])
    return list(tiles["tile"])


def _kernel_rows(df: pd.DataFrame) -> pd.DataFrame:
    if "method" in df:
        df = df[df["method"] == "vulkan q8ta_conv2d_pw"]
    return df.dropna(subset=["tile_m"])


# ----------------------------------------------------------------------------------------------------------------
# The thread tile
# ----------------------------------------------------------------------------------------------------------------

def thread_tile_view(tile_m: int, tile_n4: int, tile_k4: int = 1, width: int = 16, out_channels: int = 16,
                     thread=(0, 0), ax=None, compact: bool = False):
    """Which thread computes each output (width, channel) of one output row, for a tile setting.

    Thread (x, y) of the dispatch (global size (ceil(OC4/TILE_N4), ceil(W4/TILE_M), N·H)) holds
    4·TILE_M widths × 4·TILE_N4 channels of accumulators. Cells are coloured by thread; `thread` = (x, y) is
    outlined in red; cells a thread computes past the tensor's end (padding it never stores) are pale.
    `compact`: short title and labels (for small panels).
    """
    tile_m, tile_n4, tile_k4 = K.check_tile(tile_m, tile_n4, tile_k4)
    tw, tc = 4 * tile_m, 4 * tile_n4
    threads_x = -(-(-(-out_channels // 4)) // tile_n4)
    threads_y = -(-(-(-width // 4)) // tile_m)
    cols, rows = threads_y * tw, threads_x * tc  # the plane the threads cover, padding included
    if ax is None:
        fig = Figure(figsize=(min(12, 1.2 + 0.32 * cols), min(9, 1.4 + 0.32 * rows)))
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    # one RGB cell per (channel, width), coloured by thread; padding (computed, never stored) paler and hatched
    rgb = np.zeros((rows, cols, 3))
    for ty in range(threads_y):
        for tx in range(threads_x):
            rgb[tx * tc:(tx + 1) * tc, ty * tw:(ty + 1) * tw] = mcolors.to_rgb(
                _PALETTE[(tx * threads_y + ty) % len(_PALETTE)])
    pad = np.zeros((rows, cols), dtype=bool)
    pad[:, width:] = True
    pad[out_channels:, :] = True
    rgb[pad] = 0.55 + 0.45 * rgb[pad]
    ax.imshow(rgb, extent=(0, cols, rows, 0), interpolation="nearest", aspect="equal")
    for x0, y0, x1, y1 in ((width, 0, cols, rows), (0, out_channels, width, rows)):
        if x1 > x0 and y1 > y0:  # padding: outlined with a dashed line (hatching is slow to draw)
            ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor="#444444", ls="--",
                                   lw=1.2, gid="padding"))
    for w in range(0, cols + 1, 4):
        ax.axvline(w, color="black", lw=0.8 if w % tw else 1.6)
    for c in range(0, rows + 1, 4):
        ax.axhline(c, color="black", lw=0.8 if c % tc else 1.6)
    x, y = thread
    if 0 <= x < threads_x and 0 <= y < threads_y:
        ax.add_patch(Rectangle((y * tw, x * tc), tw, tc, fill=False, edgecolor=_HIGHLIGHT, lw=3.5, zorder=5,
                               gid="thread-tile"))
        ax.text(y * tw + tw / 2, x * tc + tc / 2, f"thread\n({x}, {y})", ha="center", va="center",
                fontsize=8 if compact else 9, color="white", fontweight="bold", zorder=6, gid="thread-label")
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    f = K.conv_pw_tile_figures(tile_m, tile_n4, tile_k4)
    if compact:
        ax.set_xlabel("output width w", fontsize=8)
        ax.set_ylabel("output channel c", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_title(f"thread tile {tw} w × {tc} ch = {f.accumulators} acc.\n"
                     f"W={width}, Cout={out_channels}: {threads_x}×{threads_y} threads", fontsize=8)
    else:
        ax.set_xlabel(f"output width w (a thread spans {tw})")
        ax.set_ylabel(f"output channel c (a thread spans {tc})")
        ax.set_title(f"TILE_M={tile_m}, TILE_N4={tile_n4}, TILE_K4={tile_k4}: a thread holds {tw}×{tc} = "
                     f"{f.accumulators} int32 accumulators,\n{f.macs_per_byte:.2f} MAC/B per K step; one output row "
                     f"(W={width}, Cout={out_channels}): {threads_x}×{threads_y} threads; pale = padding",
                     fontsize=9)
    ax.set_aspect("equal")
    return fig


# ----------------------------------------------------------------------------------------------------------------
# Sweep charts
# ----------------------------------------------------------------------------------------------------------------

def time_vs_tile(df: pd.DataFrame, ax=None, highlight: str | None = None, log: bool = True):
    """Median GPU time per tile setting (p10–p90 as error bars), one line per shape; the best tile per shape
    is marked with a star; `highlight` (a tile label) gets a vertical band; `log`: a log time axis."""
    rows = _kernel_rows(df)
    order = tile_order(rows)
    if ax is None:
        fig = Figure(figsize=(max(6, 0.42 * len(order) + 2), 4))
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    x_of = {t: i for i, t in enumerate(order)}
    for i, (shape, group) in enumerate(rows.groupby("shape", sort=False)):
        group = group.set_index("tile").reindex([t for t in order if t in set(group["tile"])])
        xs = [x_of[t] for t in group.index]
        err = np.vstack([group["median_us"] - group["p10_us"], group["p90_us"] - group["median_us"]])
        color = _PALETTE[i % len(_PALETTE)]
        ax.errorbar(xs, group["median_us"], yerr=np.clip(err, 0, None), marker="o", ms=4, capsize=2, lw=1,
                    color=color, label=shape)
        best = group["median_us"].idxmin()
        ax.plot([x_of[best]], [group.loc[best, "median_us"]], marker="*", ms=14, color=color, mec="black")
    if highlight in x_of:
        ax.axvspan(x_of[highlight] - 0.4, x_of[highlight] + 0.4, color=_HIGHLIGHT, alpha=0.15, lw=0)
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels(order, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("median GPU time (µs)")
    if log:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    device = rows["device"].iloc[0] if len(rows) and "device" in rows else ""
    ax.set_title(f"time per tile (★ best per shape), {device}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return fig


def registers_occupancy_vs_tile(df: pd.DataFrame, axes=None, highlight: str | None = None):
    """Registers and occupancy per tile setting. Solid: the driver's register count and the occupancy it gives
    on this device (absent on CPU devices and drivers without statistics). Dashed: rule-model bounds from the
    tile alone — registers ≥ accumulators + one step's operands; occupancy ≤ what sm_90 / Adreno 740 allow."""
    rows = _kernel_rows(df).drop_duplicates("tile")
    order = tile_order(rows)
    rows = rows.set_index("tile").reindex(order)
    if axes is None:
        fig = Figure(figsize=(max(7, 0.42 * len(order) + 2), 6.2))
        axes = (fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2))
    fig = axes[0].figure
    xs = np.arange(len(order))
    ax_r, ax_o = axes
    ax_r.bar(xs - 0.2, rows["accumulators"], width=0.4, color="#a0cbe8", label="int32 accumulators")
    ax_r.plot(xs, rows["model_registers_lower_bound"], "k--", marker=".", lw=1,
              label="model: registers ≥ accumulators + operands")
    measured = pd.to_numeric(rows.get("registers"), errors="coerce") if "registers" in rows else None
    vendor = _vendor_series(rows)
    if measured is not None and measured.notna().any():
        unit = rows["register_unit"].dropna().iloc[0]
        ax_r.bar(xs + 0.2, measured, width=0.4, color="#4e79a7", label=f"driver 'Register Count' ({unit})")
    elif vendor is not None:
        ax_r.bar(xs + 0.2, vendor["registers_32"], width=0.4, color="#4e79a7", label=vendor["registers_label"],
                 gid="vendor-registers")
        failed = [x for x, e in zip(xs, vendor["errors"]) if isinstance(e, str)]
        if failed:
            ax_r.plot(failed, [0] * len(failed), "x", color="black", ms=7, label=f"{vendor['gpu']}: no figures")
    else:
        why = rows["register_unit"].dropna().iloc[0] if "register_unit" in rows and \
            rows["register_unit"].notna().any() else "n/a"
        ax_r.text(0.99, 0.95, f"driver registers: {why}", transform=ax_r.transAxes, ha="right", va="top",
                  fontsize=8, color="#555555", gid="registers-na",
                  bbox=dict(facecolor="white", edgecolor="none", alpha=0.85))
    ax_r.set_ylabel("32-bit registers / thread")
    ax_r.legend(fontsize=7, loc="upper left")
    ax_r.grid(True, alpha=0.3)
    ax_o.plot(xs, 100 * rows["model_sm90_occupancy_upper_bound"], "--", marker="s", ms=4, color="#59a14f",
              label="model sm_90 (CUDA rules) ≤")
    ax_o.plot(xs, 100 * rows["model_a740_occupancy_upper_bound"], "--", marker="^", ms=4, color="#f28e2b",
              label="model Adreno 740 (ir3 rules) ≤")
    occ_measured = pd.to_numeric(rows.get("occupancy"), errors="coerce") if "occupancy" in rows else None
    if occ_measured is not None and occ_measured.notna().any():
        model = rows["occupancy_model"].dropna().iloc[0]
        limiters = rows["occupancy_limiter"].where(occ_measured.notna())
        usual = limiters.mode().iloc[0] if limiters.notna().any() else "n/a"
        ax_o.plot(xs, 100 * occ_measured, "-", marker="o", color="#4e79a7", lw=2,
                  label=f"this device, from driver registers ({model}; limiter: {usual})")
        for x, (o, lim) in enumerate(zip(occ_measured, limiters)):
            if pd.notna(o) and lim != usual:  # only the exceptions, to keep the chart readable
                ax_o.annotate(str(lim), (x, 100 * o), textcoords="offset points", xytext=(0, 5), fontsize=6,
                              ha="center", rotation=60, gid="limiter-label")
    elif vendor is not None:
        ax_o.plot(xs, 100 * vendor["occupancy"], "-", marker="o", color="#4e79a7", lw=2, gid="vendor-occupancy",
                  label=vendor["occupancy_label"])
    else:
        why = rows["occupancy_limiter"].dropna().iloc[0] if "occupancy_limiter" in rows and \
            rows["occupancy_limiter"].notna().any() else "n/a"
        ax_o.text(0.99, 0.05, f"this device: {why}", transform=ax_o.transAxes, ha="right", va="bottom",
                  fontsize=9, color="#555555", gid="occupancy-na")
    ax_o.set_ylim(0, 108)
    ax_o.set_ylabel("theoretical occupancy (%)")
    ax_o.legend(fontsize=7, loc="lower left")
    ax_o.grid(True, alpha=0.3)
    for ax in axes:
        ax.set_xticks(xs)
        ax.set_xticklabels(order if ax is ax_o else [], rotation=60, ha="right", fontsize=8)
        if highlight in order:
            i = order.index(highlight)
            ax.axvspan(i - 0.45, i + 0.45, color=_HIGHLIGHT, alpha=0.12, lw=0)
    ax_r.set_title("registers and occupancy per tile", fontsize=9)
    return fig


# A vendor's register unit in 32-bit registers per thread (the chart's axis): an Adreno vec4 register holds four.
_UNIT_WIDTH = {"vec4": 4, "vgpr": 1, "work registers": 1}


def _vendor_series(rows: pd.DataFrame) -> dict | None:
    """The `vendor_*` columns of rows (one vendor compiler's figures, see `conv_vendors.tile_compiler_columns`)
    ready to draw, or None when no row has them."""
    if "vendor_registers" not in rows or not pd.to_numeric(rows["vendor_registers"], errors="coerce").notna().any():
        return None
    first = rows[rows["vendor_registers"].notna()].iloc[0]
    unit, gpu = first["vendor_register_unit"], first["vendor_gpu"]
    width = _UNIT_WIDTH.get(unit, 1)
    where = f"{gpu} ({first['vendor_compiler']})"
    return {"gpu": gpu, "registers_32": width * pd.to_numeric(rows["vendor_registers"], errors="coerce"),
            "registers_label": f"{where}: {unit}" + (f" × {width} (32-bit)" if width != 1 else ""),
            "occupancy": pd.to_numeric(rows["vendor_occupancy"], errors="coerce"),
            "occupancy_label": f"{where}: the compiler's own occupancy (waves / {first['vendor_max_waves']})",
            "errors": rows["vendor_error"] if "vendor_error" in rows else [None] * len(rows)}


def gops_heatmap(df: pd.DataFrame, shape: str | None = None, tile_k4: int | None = None, value: str = "GOP/s",
                 ax=None):
    """`value` over TILE_M (rows) × TILE_N4 (columns) for one shape (default: the first); each cell the best over
    TILE_K4 (labelled with it) unless `tile_k4` picks one."""
    rows = _kernel_rows(df)
    if shape is None:
        shape = rows["shape"].iloc[0]
    rows = rows[rows["shape"] == shape]
    if tile_k4 is not None:
        rows = rows[rows["tile_k4"] == tile_k4]
    if rows.empty:
        raise ValueError(f"no sweep rows for shape {shape!r}" + (f" and TILE_K4={tile_k4}" if tile_k4 else ""))
    best = rows.loc[rows.groupby(["tile_m", "tile_n4"])[value].idxmax()]
    ms = sorted(K.TILE_VALUES)
    ns = sorted(K.TILE_VALUES)
    grid = np.full((len(ms), len(ns)), np.nan)
    k_of = {}
    for _, r in best.iterrows():
        i, j = ms.index(int(r["tile_m"])), ns.index(int(r["tile_n4"]))
        grid[i, j] = r[value]
        k_of[(i, j)] = int(r["tile_k4"])
    if ax is None:
        fig = Figure(figsize=(5.2, 4.2))
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    image = ax.imshow(grid, cmap="viridis", origin="upper")
    fig.colorbar(image, ax=ax, label=value)
    top = np.nanmax(grid)
    for (i, j), k in k_of.items():
        v = grid[i, j]
        text = f"{v:.3g}" + ("" if tile_k4 is not None else f"\nK4={k}")
        ax.text(j, i, text, ha="center", va="center", fontsize=9, gid="heat-label",
                color="black" if v > 0.6 * top else "white", fontweight="bold" if v == top else None)
    ax.set_xticks(range(len(ns)))
    ax.set_xticklabels([f"N4={n}\n({4 * n} ch)" for n in ns])
    ax.set_yticks(range(len(ms)))
    ax.set_yticklabels([f"M={m}\n({4 * m} w)" for m in ms])
    ax.set_xlabel("TILE_N4 (output-channel blocks per thread)")
    ax.set_ylabel("TILE_M (width blocks per thread)")
    which = f"TILE_K4={tile_k4}" if tile_k4 is not None else "best TILE_K4"
    ax.set_title(f"{value}, {shape} ({which})", fontsize=10)
    return fig


# ----------------------------------------------------------------------------------------------------------------
# The live explorer
# ----------------------------------------------------------------------------------------------------------------

EXPLORER_SHAPES = ((1, 32, 32, 16, 16), (1, 64, 64, 16, 16), (1, 96, 96, 32, 32), (1, 128, 128, 64, 64))


def _fmt_pct(v) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f} %"


_FAILURES = {"timeout": "its compile ran past the time limit", "crash": "the compiler crashed",
             "error": "the compiler rejected it"}


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _vendor_readout(row) -> tuple[str, str]:
    """(registers part, occupancy part) of the readout from a row's `vendor_*` figures."""
    gpu = row["vendor_gpu"]
    spills = f", {int(row['vendor_spills'])} spills" if _present(row.get("vendor_spills")) else ""
    regs = (f"registers {int(row['vendor_registers'])} {row['vendor_register_unit']} on {gpu} "
            f"({row.get('vendor_compiler')}; this device: {row['register_unit']}){spills}")
    waves = f"{int(row['vendor_waves'])}/{int(row['vendor_max_waves'])} waves" \
        if _present(row.get("vendor_waves")) and _present(row.get("vendor_max_waves")) else "waves n/a"
    return regs, f"occupancy {_fmt_pct(row.get('vendor_occupancy'))} ({waves} on {gpu})"


def _vendor_failure(row) -> str:
    """Why a row has no vendor figures, in a few words."""
    why = _FAILURES.get(row.get("vendor_failure")) or str(row.get("vendor_error"))[:100]
    return f"{row.get('vendor_gpu')}: {why}"


class TileExplorer:
    """Sliders for TILE_M, TILE_N4, TILE_K4 and the shape; every move recompiles (SPIR-V and pipelines are
    cached) and re-runs the kernel on the device, then updates `figure` (time, registers, occupancy of every
    tile measured so far at this shape) and `readout` (one line of text).

    Attributes for notebooks and tests: `sliders` (dict: "tile_m", "tile_n4", "tile_k4", "shape"), `readout`
    (ipywidgets.Label), `figure` (matplotlib Figure), `image` (the PNG of it shown in the widget), `history`
    (DataFrame, one row per (shape, tile) measured, the latest kept), `last_update_s` (seconds the last move
    took: compile + run + redraw), `widget` (the VBox to display)."""

    def __init__(self, device=None, shapes=EXPLORER_SHAPES, *, tile=(1, 1, 1), shape=None, out_layout="4W4C",
                 min_time_s: float = 0.02, min_samples: int = 5, target_us: float = 500.0, check: bool = True,
                 run: bool = True, vendor_gpu: str | None = "a740"):
        import ipywidgets as widgets
        from .. import vk
        from ..measure import environment
        from ..vendors import mesa
        self.device = device or vk.get_device()
        self.shapes = [K.ConvPwShape.coerce(s) for s in shapes]
        self.out_layout = out_layout
        self.timing = dict(min_time_s=min_time_s, min_samples=min_samples, target_us=target_us,
                           max_time_s=2.0, max_repeats=50)
        self.check = check
        self.env = environment(self.device)
        self.use_dot_ext = bool(self.device.info.features.get("integer_dot_product"))
        self._buffers: dict = {}  # shape -> (ConvPwBuffers, expected output)
        self.history = pd.DataFrame()
        self.last_row: dict | None = None
        self.last_update_s = float("nan")
        tile = K.check_tile(*tile)
        labels = [s.label for s in self.shapes]
        start_shape = K.ConvPwShape.coerce(shape).label if shape is not None else labels[0]
        if start_shape not in labels:
            raise ValueError(f"shape {start_shape} is not one of the explorer's shapes {labels}")
        self.sliders = {
            "tile_m": widgets.SelectionSlider(options=list(K.TILE_VALUES), value=tile[0], description="TILE_M"),
            "tile_n4": widgets.SelectionSlider(options=list(K.TILE_VALUES), value=tile[1], description="TILE_N4"),
            "tile_k4": widgets.SelectionSlider(options=list(K.TILE_VALUES), value=tile[2], description="TILE_K4"),
            "shape": widgets.SelectionSlider(options=labels, value=start_shape, description="shape",
                                             layout=widgets.Layout(width="420px")),
        }
        for slider in self.sliders.values():
            slider.continuous_update = False
        self.readout = widgets.Label(value="")
        self.image = widgets.Image(format="png")
        self.figure = Figure(figsize=(11, 7))
        # Where the device reports no registers (a CPU, a driver without VK_KHR_pipeline_executable_properties),
        # a vendor's compiler gives them: Mesa's Turnip / PanVK / RADV (workbench.vendors.mesa), one compile per
        # setting, cached on disk.
        info = self.device.info
        no_statistics = info.is_cpu or not info.features.get("pipeline_executable_properties")
        self.vendor_gpu = mesa.check_gpu(vendor_gpu).name if vendor_gpu and no_statistics else None
        rows = [widgets.HBox([self.sliders["tile_m"], self.sliders["tile_n4"], self.sliders["tile_k4"]]),
                self.sliders["shape"]]
        self.vendor_picker = None
        if self.vendor_gpu:
            from ..benchmarks.conv_vendors import COMPILER_GPUS
            self.vendor_picker = widgets.Dropdown(
                options=[(f"{name} ({mesa.DRIVER_TITLES[mesa.GPUS[name].driver]})", name) for name in COMPILER_GPUS],
                value=self.vendor_gpu, description="registers of", layout=widgets.Layout(width="420px"))
            self.vendor_picker.observe(self._on_vendor, names="value")
            rows.append(self.vendor_picker)
        self.widget = widgets.VBox(rows + [self.readout, self.image])
        for slider in self.sliders.values():
            slider.observe(self._on_change, names="value")
        if run:
            self.update()

    # -- state --------------------------------------------------------------------------------------------------------
    @property
    def tile(self) -> tuple[int, int, int]:
        return (self.sliders["tile_m"].value, self.sliders["tile_n4"].value, self.sliders["tile_k4"].value)

    @property
    def shape(self) -> K.ConvPwShape:
        return next(s for s in self.shapes if s.label == self.sliders["shape"].value)

    def set(self, tile_m=None, tile_n4=None, tile_k4=None, shape=None):
        """Move several sliders with one re-run."""
        self._hold = True
        try:
            for name, value in (("tile_m", tile_m), ("tile_n4", tile_n4), ("tile_k4", tile_k4)):
                if value is not None:
                    self.sliders[name].value = value
            if shape is not None:
                self.sliders["shape"].value = K.ConvPwShape.coerce(shape).label \
                    if not isinstance(shape, str) else shape
        finally:
            self._hold = False
        return self.update()

    def _on_change(self, change):
        if not getattr(self, "_hold", False):
            self.update()

    def _on_vendor(self, change):
        self.vendor_gpu = change["new"]
        self._sync_vendor()
        current = self.history[(self.history["shape"] == self.shape.label)
                               & (self.history["tile"] == K.tile_label(*self.tile))]
        self._draw()
        if len(current):
            self.last_row = current.iloc[-1].to_dict()
            self.readout.value = self._readout_text(self.last_row)

    def _sync_vendor(self):
        """Give every tile measured at the current shape the figures of the picked vendor GPU (from the
        statistics cache; a tile not compiled for it yet is compiled once)."""
        if not self.vendor_gpu or not len(self.history):
            return
        from ..benchmarks.conv_vendors import tile_compiler_columns
        records = self.history.to_dict("records")
        stale = [r for r in records if r["shape"] == self.shape.label and r.get("vendor_gpu") != self.vendor_gpu]
        if not stale:
            return
        tiles = [(int(r["tile_m"]), int(r["tile_n4"]), int(r["tile_k4"])) for r in stale]
        found = tile_compiler_columns(tiles, self.vendor_gpu, shape=self.shape)
        for r in stale:
            r.update(found[r["tile"]])
        self.history = pd.DataFrame(records)

    def _buffers_for(self, shape):
        if shape not in self._buffers:
            q_input, weight, scales, bias = K.random_problem(shape, seed=0)
            packed = K.prepack_weights(weight, scales, bias)
            spec = K.ConvPwSpec(shape, out_layout=self.out_layout, use_dot_ext=self.use_dot_ext)
            expected = K.reference(q_input, weight, scales, bias, K.DEFAULT_QPARAMS).numpy() if self.check else None
            self._buffers[shape] = (K.ConvPwBuffers(self.device, spec, q_input, packed), expected)
        return self._buffers[shape]

    # -- one move -----------------------------------------------------------------------------------------------------
    def update(self) -> dict:
        """Compile (cached), run and measure the current setting; redraw; returns its row."""
        start = time.perf_counter()
        shape = self.shape
        bufs, expected = self._buffers_for(shape)
        spec = K.ConvPwSpec(shape, *self.tile, out_layout=self.out_layout, use_dot_ext=self.use_dot_ext)
        row = conv_bench.measure(self.device, bufs, spec, env=self.env, expected=expected, **self.timing)
        history = self.history
        if len(history):
            history = history[~((history["shape"] == row["shape"]) & (history["tile"] == row["tile"]))]
        self.history = pd.concat([history, pd.DataFrame([row])], ignore_index=True)
        self._sync_vendor()
        row = self.history.iloc[-1].to_dict()
        self.last_row = row
        self._draw()
        self.last_update_s = time.perf_counter() - start
        self.readout.value = self._readout_text(row)
        return row

    def _readout_text(self, row) -> str:
        regs = row["registers"]
        if not _present(regs) and self.vendor_gpu and _present(row.get("vendor_registers")):
            regs_text, occ_text = _vendor_readout(row)
        elif not _present(regs):
            why = f"; {_vendor_failure(row)}" if self.vendor_gpu and _present(row.get("vendor_error")) else ""
            regs_text = f"registers {row['register_unit']} (model ≥ {row['model_registers_lower_bound']}{why})"
            occ_text = (f"occupancy {row['occupancy_limiter']} (model ≤ sm_90 "
                        f"{_fmt_pct(row['model_sm90_occupancy_upper_bound'])}, a740 "
                        f"{_fmt_pct(row['model_a740_occupancy_upper_bound'])})")
        else:
            regs_text = f"registers {int(regs)} ({row['register_unit']})"
            occ_text = f"occupancy {_fmt_pct(row['occupancy'])} (limiter: {row['occupancy_limiter']})"
        check = f", max |Δ| {row['max_lsb_diff']} LSB" if "max_lsb_diff" in row else ""
        return (f"TILE_M={row['tile_m']} TILE_N4={row['tile_n4']} TILE_K4={row['tile_k4']} → "
                f"{row['accumulators']} accumulators, {regs_text}, {occ_text}, median {row['median_us']:.1f} µs, "
                f"{row['GOP/s']:.3g} GOP/s, {row['shape']}{check}, re-run {self.last_update_s:.2f} s")

    def _draw(self):
        fig = self.figure
        fig.clear()
        rows = self.history[self.history["shape"] == self.shape.label]
        current = K.tile_label(*self.tile)
        gs = fig.add_gridspec(3, 2, width_ratios=(3, 1.1), hspace=0.55, wspace=0.22, left=0.08, right=0.98,
                              top=0.95, bottom=0.13)
        # linear axis: log-axis tick labels go through mathtext, the slowest part of a redraw
        time_vs_tile(rows, ax=fig.add_subplot(gs[0, 0]), highlight=current, log=False)
        registers_occupancy_vs_tile(rows, axes=(fig.add_subplot(gs[1, 0]), fig.add_subplot(gs[2, 0])),
                                    highlight=current)
        s = self.shape
        thread_tile_view(*self.tile, width=min(s.width, 16), out_channels=min(s.out_channels, 16),
                         ax=fig.add_subplot(gs[:, 1]), compact=True)
        self.image.value = figure_png(fig, dpi=72, tight=False)  # one draw, no tight-bbox pass

    def heatmap(self, **kw):
        """GOP/s over TILE_M × TILE_N4 from what has been measured at the current shape."""
        return gops_heatmap(self.history, shape=self.shape.label, **kw)

    def close(self):
        for bufs, _ in self._buffers.values():
            bufs.close()
        self._buffers = {}

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
