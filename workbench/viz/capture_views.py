"""Pictures and a dispatch picker for GFXReconstruct captures (`workbench.capture`), for notebook 07. Data in (the
DataFrames of `capture.open` / `replay` / `edit` and `capture.whatif`, bytes of outputs), Figure out.

    fig = plot_timeline(frame)               # one bar per dispatch in order, coloured by pipeline, its replay µs
    fig = plot_edit(edit_rows, outputs)      # captured vs edited shader: time side by side, the mismatch map
    fig = plot_whatif(table)                 # every dispatch in order: edited, changed downstream, unchanged
    explorer = DispatchExplorer(frame, texts)   # a Dropdown; its readout: bindings, groups, local size, constants
    fig = plot_compare(summary)              # engines side by side per op (`capture.compare.summary`), warm and cold

A frame's `label` column names its pipeline (a shader name, ET-VK's variant); without one the `variant` column where
filled, else the SPIR-V hash. Titles name the device of the `device` column, or the `device` argument.
"""
from __future__ import annotations

import html
import io

import matplotlib
import numpy as np
from matplotlib import colors as mcolors
from matplotlib.patches import Patch

from .explorer import SliderExplorer
from .figure import Figure
from .titles import with_device

__all__ = ["pipeline_labels", "pipeline_colors", "plot_timeline", "word_map", "plot_edit", "plot_whatif",
           "plot_compare", "DispatchExplorer", "dispatch_readout"]

TIME_COLUMN = "gpu_us_median"
WORDS_PER_ROW = 32
# word maps: padding, same, differs
_MAP_CMAP = mcolors.ListedColormap(["#ffffff", "#e8eef4", "#d7301f"])
_MAP_NORM = mcolors.BoundaryNorm([-1.5, -0.5, 0.5, 1.5], _MAP_CMAP.N)
WHATIF_STATES = {"edited": "#6a3d9a", "output changed": "#d7301f", "inputs changed, output not": "#fdae61",
                 "unchanged": "#bfd3e6", "not replayed": "#636363"}


def pipeline_labels(frame) -> list[str]:
    """Each row's pipeline name: `label`, else `variant` where filled, else the SPIR-V hash (`pipeline`)."""
    if "label" in frame:
        return [str(v) for v in frame["label"]]
    variants = frame["variant"] if "variant" in frame else [""] * len(frame)
    return [str(v) if isinstance(v, str) and v else str(p) for v, p in zip(variants, frame["pipeline"])]


def pipeline_colors(labels) -> dict:
    """One colour per pipeline name, in order of first appearance: tab10 up to ten, else tab20, tab20b and tab20c
    (60 colours; a model's pipelines beyond that share them)."""
    names = list(dict.fromkeys(labels))
    maps = ["tab10"] if len(names) <= 10 else ["tab20", "tab20b", "tab20c"]
    palette = [matplotlib.colormaps[m](k) for m in maps for k in range(matplotlib.colormaps[m].N)]
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def plot_timeline(frame, *, device: str | None = None, selected: int | None = None, title: str = "Dispatch timeline"):
    """One bar per dispatch in capture order, coloured by pipeline, its height the replay's median GPU µs (each
    dispatch alone from its captured inputs); a legend swatch per pipeline in its bars' colour; `selected`: that
    dispatch's bar outlined."""
    d = frame.sort_values("dispatch")
    labels = pipeline_labels(d)
    colors = pipeline_colors(labels)
    times = d[TIME_COLUMN].astype(float).fillna(0.0) if TIME_COLUMN in d else np.zeros(len(d))
    fig = Figure(figsize=(max(6.0, min(16.0, 0.35 * len(d) + 4)), 3.4))
    ax = fig.add_subplot()
    bars = ax.bar(d["dispatch"], times, color=[colors[n] for n in labels], width=0.8)
    if selected is not None and selected in set(d["dispatch"]):
        bar = bars[list(d["dispatch"]).index(selected)]
        bar.set_edgecolor("black")
        bar.set_linewidth(2.0)
    ax.legend(handles=[Patch(color=c, label=n) for n, c in colors.items()], fontsize=7, title="pipeline",
              title_fontsize=8, ncol=max(1, min(4, len(colors) // 8 + 1)), loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_xlabel("dispatch (capture order)")
    ax.set_ylabel("GPU µs (median, replayed alone)")
    if len(d) <= 40:
        ax.set_xticks(list(d["dispatch"]))
    ax.set_title(with_device(f"{title}: {len(d)} dispatches, {len(colors)} pipelines, {float(np.sum(times)):,.1f} µs",
                             frame, device=device), fontsize=10)
    fig.tight_layout()
    return fig


def word_map(old: bytes, new: bytes, *, word: int = 4, per_row: int = WORDS_PER_ROW) -> np.ndarray:
    """The mismatch map of a binding: its `word`-byte words in rows of `per_row`, 1 where `new` differs from `old`,
    0 where equal, -1 past the end."""
    size = max(len(old), len(new))
    a = np.zeros(size, np.uint8)
    b = np.zeros(size, np.uint8)
    a[:len(old)] = np.frombuffer(old, np.uint8)
    b[:len(new)] = np.frombuffer(new, np.uint8)
    words = -(-size // word)
    differs = np.zeros(words * word, bool)
    differs[:size] = a != b
    flags = differs.reshape(words, word).any(axis=1).astype(np.int8)
    if len(old) != len(new):
        flags[min(len(old), len(new)) // word:] = 1
    rows = -(-words // per_row)
    grid = np.full(rows * per_row, -1, np.int8)
    grid[:words] = flags
    return grid.reshape(rows, per_row)


def _map_panel(ax, label: str, old: bytes, new: bytes | None, word: int) -> None:
    if new is None:
        ax.text(0.5, 0.5, f"binding {label}: no output\n(the edited shader did not run)", ha="center", va="center",
                fontsize=8, transform=ax.transAxes)
        ax.set_axis_off()
        return
    grid = word_map(old, new, word=word)
    wrong = int((grid == 1).sum())
    ax.imshow(grid, cmap=_MAP_CMAP, norm=_MAP_NORM, interpolation="nearest", aspect="auto")
    ax.set_title(f"binding {label}: {wrong} of {int((grid >= 0).sum())} {word}-byte words differ", fontsize=9)
    ax.set_xlabel(f"word % {grid.shape[1]}", fontsize=8)
    ax.set_ylabel(f"word // {grid.shape[1]}", fontsize=8)


def plot_edit(rows, outputs, *, device: str | None = None, word: int = 4):
    """Edit and compare one dispatch: left, the median GPU µs of the captured and the edited shader (p10–p90 bars);
    right, per binding it writes, the mismatch map of the edited output against the captured shader's
    (`outputs`: [(binding label, captured-shader bytes, edited bytes)])."""
    panels = max(1, len(outputs))
    fig = Figure(figsize=(3.4 + 4.2 * panels, 3.4))
    grid = fig.add_gridspec(1, panels + 1, width_ratios=[0.8] + [1.0] * panels)
    ax = fig.add_subplot(grid[0, 0])
    names = ["captured" if s == "captured" else "edited" for s in rows["shader"]]
    median = rows[TIME_COLUMN].astype(float).to_numpy() if TIME_COLUMN in rows else np.zeros(len(rows))
    spread = None
    if {"gpu_us_p10", "gpu_us_p90"} <= set(rows.columns):
        spread = np.vstack([median - rows["gpu_us_p10"].to_numpy(float), rows["gpu_us_p90"].to_numpy(float) - median])
    verdicts = ["" if e is None else (" · exact" if bool(e) else " · differs")
                for e in (rows["exact"] if "exact" in rows else [None] * len(rows))]
    ticks = [f"{n}\n{m:,.1f} µs{v}" for n, m, v in zip(names, median, verdicts)]
    ax.bar(range(len(names)), median, yerr=spread, color=["#9ecae1", "#6a3d9a"][:len(names)], capsize=4)
    ax.set_xticks(range(len(names)), ticks, fontsize=8)
    ax.set_ylabel("GPU µs (median; p10–p90)")
    top = np.nanmax(median + spread[1]) if spread is not None else np.nanmax(median) if len(median) else 0
    ax.set_ylim(0, float(top) * 1.1 if top > 0 else 1)
    ax.set_title("time", fontsize=9)
    for k, (label, old, new) in enumerate(outputs):
        _map_panel(fig.add_subplot(grid[0, k + 1]), label, old, new, word)
    if not outputs:
        _map_panel(fig.add_subplot(grid[0, 1]), "-", b"", None, word)
    dispatch = rows["dispatch"].iat[0] if "dispatch" in rows and len(rows) else "?"
    fig.suptitle(with_device(f"Dispatch {dispatch}: the edited shader against the captured one", rows, device=device),
                 fontsize=10)
    fig.tight_layout()
    return fig


def whatif_states(table) -> list[str]:
    """Each dispatch's state in a what-if table (the keys of WHATIF_STATES)."""
    states = []
    for r in table.itertuples():
        if getattr(r, "reason", ""):
            states.append("not replayed")
        elif r.edited:
            states.append("edited")
        elif r.changed:
            states.append("output changed")
        elif r.inputs_changed:
            states.append("inputs changed, output not")
        else:
            states.append("unchanged")
    return states


def plot_whatif(table, *, device: str | None = None, title: str = "What-if"):
    """Every dispatch in order, one cell each, coloured by what the swapped-in shader did to it: edited, its output
    changed (downstream of the edit), its inputs changed but not its output, unchanged, not replayed."""
    d = table.sort_values("dispatch")
    states = whatif_states(d)
    used = [s for s in WHATIF_STATES if s in states]
    fig = Figure(figsize=(max(7.0, min(17.0, 0.3 * len(d) + 4.5)), 2.0))
    ax = fig.add_subplot()
    ax.bar(d["dispatch"], np.ones(len(d)), width=0.9, color=[WHATIF_STATES[s] for s in states])
    ax.legend(handles=[Patch(color=WHATIF_STATES[s], label=s) for s in used], fontsize=7, loc="upper left",
              bbox_to_anchor=(1.0, 1.0))
    ax.set_yticks([])
    ax.set_xlabel("dispatch (capture order)")
    if len(d) <= 40:
        ax.set_xticks(list(d["dispatch"]))
    changed = int(sum(s == "output changed" for s in states))
    edited = list(d.loc[d["edited"], "dispatch"])
    ax.set_title(with_device(f"{title}: dispatch{'es' if len(edited) > 1 else ''} {', '.join(map(str, edited))} "
                             f"edited; {changed} later dispatch{'es' if changed != 1 else ''} compute otherwise",
                             table, device=device), fontsize=10)
    fig.tight_layout()
    return fig


ENGINE_COLORS = {"etvk": "#1f78b4", "ncnn": "#33a02c", "iree": "#ff7f00", "ggml": "#e31a1c"}


def plot_compare(summary, *, device: str | None = None, title: str = "Engines side by side"):
    """One panel per way of timing (warm, cold): per op, a bar per engine (µs of the op's dispatches summed), its
    ratio to the fastest written above it; `summary` is `capture.compare.summary`'s frame."""
    ways = [w for w in ("warm", "cold") if w in set(summary["way"])] or sorted(set(summary["way"]))
    ops = list(dict.fromkeys(summary["op"]))
    engines = list(dict.fromkeys(summary["engine"]))
    fig = Figure(figsize=(5.2 * len(ways), 3.4))
    width = 0.8 / max(len(engines), 1)
    for k, way in enumerate(ways):
        ax = fig.add_subplot(1, len(ways), k + 1)
        part = summary[summary["way"] == way].set_index(["op", "engine"])
        for e, engine in enumerate(engines):
            xs = [i + (e - (len(engines) - 1) / 2) * width for i in range(len(ops))]
            us = [part["us"].get((op, engine), np.nan) for op in ops]
            ax.bar(xs, us, width=width * 0.95, color=ENGINE_COLORS.get(engine, "#999999"), label=engine)
            for x, op, u in zip(xs, ops, us):
                ratio = part["vs_fastest"].get((op, engine), np.nan)
                if np.isfinite(u):
                    ax.text(x, u, f"{ratio:.2g}x", ha="center", va="bottom", fontsize=6)
        ax.set_xticks(range(len(ops)))
        ax.set_xticklabels(ops, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("µs (the op's dispatches)")
        ax.set_title(with_device(f"{title}, {way}", summary, device=device), fontsize=9)
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------------------------------------
# The dispatch picker
# ------------------------------------------------------------------------------------------------------------------

def dispatch_readout(row) -> list[str]:
    """The lines that describe one dispatch of `capture.open`'s frame (a row as a dict or Series)."""
    local = row.get("local_size")
    lines = [
        f"dispatch {row['dispatch']} · pipeline {row.get('label') or row.get('variant') or row['pipeline']} "
        f"({row['pipeline']}), entry point {row.get('entry_point', 'main')}",
        f"groups {tuple(row['groups'])} × local size {tuple(local) if local is not None else '?'}",
        f"specialization constants: {row.get('spec_constants') or 'none'}",
        f"push constants: {row.get('push_constants') or 'none'} ({row.get('push_bytes', 0)} B)",
        "bindings:",
    ]
    bindings = str(row.get("bindings") or "")
    lines += [f"  {b.strip()}" for b in bindings.split(";") if b.strip()] or ["  none"]
    return lines


class DispatchExplorer(SliderExplorer):
    """Pick a dispatch of a capture: a Dropdown (``sliders["dispatch"]``), its ``readout`` (HTML: bindings, groups,
    local size, specialization and push constants), its ``source`` (HTML: the GLSL where known and the SPIR-V
    assembly, from ``texts`` = {pipeline hash: (glsl or None, disassembly)}), and the timeline with its bar outlined
    (``image``; ``figure`` the current Figure). ``widget`` is the box to display; moving the Dropdown redraws."""

    def __init__(self, frame, texts: dict | None = None, *, device: str | None = None, max_lines: int = 60):
        import ipywidgets as widgets

        self.frame = frame.sort_values("dispatch").reset_index(drop=True)
        self.texts = texts or {}
        self.device = device
        self.max_lines = max_lines
        labels = pipeline_labels(self.frame)
        options = [(f"{n}: {label}", int(n)) for n, label in zip(self.frame["dispatch"], labels)]
        self.picker = widgets.Dropdown(options=options, value=options[0][1], description="dispatch")
        self.sliders = {"dispatch": self.picker}
        self.readout = widgets.HTML()
        self.source = widgets.HTML()
        self.image = widgets.Image(format="png")
        self.figure = None
        self.picker.observe(self._on_change, names="value")
        self.widget = widgets.VBox([self.picker, self.readout, self.image, self.source])
        self.update()

    @property
    def row(self) -> dict:
        return self.frame[self.frame["dispatch"] == self.picker.value].iloc[0].to_dict()

    def update(self):
        row = self.row
        self.readout.value = "<pre>" + html.escape("\n".join(dispatch_readout(row))) + "</pre>"
        glsl, assembly = self.texts.get(row["pipeline"], (None, None))
        parts = [("GLSL", glsl or "not known: no source given for this pipeline")]
        if assembly:
            shown = assembly.splitlines()
            more = f"\n… {len(shown) - self.max_lines} more lines" if len(shown) > self.max_lines else ""
            parts.append((f"SPIR-V ({len(shown)} lines)", "\n".join(shown[:self.max_lines]) + more))
        self.source.value = "".join(f"<b>{html.escape(t)}</b><pre>{html.escape(x)}</pre>" for t, x in parts)
        self.figure = plot_timeline(self.frame, device=self.device, selected=row["dispatch"])
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=72)
        self.image.value = buf.getvalue()

    def _ipython_display_(self):
        from IPython.display import display
        display(self.widget)
