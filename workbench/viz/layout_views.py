"""Pictures of ET-VK layouts (matplotlib): where each element of an (N, C, H, W) tensor lives.

Everything drawn comes from :mod:`workbench.layouts` (the maps and their inverses); these functions take data only
(a layout and sizes), never a device.

* :func:`tensor_view`   the logical grid (one panel per n, rows = (c, h), columns = w), each cell coloured by the
  word (texel / element) that holds it and labelled with that word and the lane inside it.  Words of one 4x4 block
  share a hue (4 shades); the padding the layout adds is drawn hatched.
* :func:`memory_view`   words in address order, rows of ``words_per_row`` words, each word drawn as 4 lane boxes
  labelled with the (n, c, h, w) the lane holds; padding lanes hatched grey; byte addresses on the y axis.
  Texture layouts get :func:`texel_view` (one panel per z slice, texels as 4 component boxes).
* :func:`compare_layouts`, :func:`save_layout_pictures`, and :func:`layout_explorer` (ipywidgets).

Functions return a :class:`matplotlib.figure.Figure` (created without pyplot, so nothing is left open; it shows
itself in Jupyter through ``_repr_png_``).  Text artists carry a ``gid``: ``"cell-label"`` (tensor cells),
``"pad-label"`` (padding cells), ``"lane-label"`` (memory boxes), ``"word-label"``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib import colors as mcolors
from .figure import Figure, figure_png
from matplotlib.collections import PatchCollection
from matplotlib.patches import Rectangle

from workbench import layouts as L

from .explorer import SliderExplorer

__all__ = ["tensor_view", "memory_view", "texel_view", "compare_layouts", "save_layout_pictures",
           "layout_explorer", "LayoutExplorer", "unit_color"]

_MAX_CELLS = 4096
_HIGHLIGHT = "#d62728"
_PAD_FACE = "#e6e6e6"
_BASE = [mcolors.to_rgb(c) for c in (
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#e15759", "#9c755f", "#ff9da7", "#8cd17d",
    "#499894", "#d37295", "#a0cbe8", "#ffbe7d", "#86bcb6", "#bab0ac")]


class _Figure(Figure):
    """Layout pictures are dense: shown inline at a higher resolution."""

    png_dpi = 110


class _Boxes:
    """Rectangles of one style, drawn as one PatchCollection (far faster than one patch per box)."""

    def __init__(self, **style):
        self.rects, self.faces, self.style = [], [], style

    def add(self, x, y, w=1.0, h=1.0, face=None):
        self.rects.append(Rectangle((x, y), w, h))
        self.faces.append(face)

    def draw(self, ax):
        if not self.rects:
            return
        kw = dict(self.style)
        if self.faces[0] is not None:
            kw["facecolors"] = self.faces
        else:
            kw["facecolors"] = "none"
        ax.add_collection(PatchCollection(self.rects, **kw), autolim=False)


def _new_axes(figsize, ax=None):
    if ax is not None:
        return ax.figure, ax
    fig = _Figure(figsize=figsize)
    return fig, fig.add_subplot(1, 1, 1)


def unit_color(layout, unit: int):
    """RGB colour of a word / texel / element: one hue per block (cycling), one shade per word inside the block."""
    lay = L.get_layout(layout)
    per = lay.units_per_block
    block, k = divmod(int(unit), per)
    base = np.array(_BASE[block % len(_BASE)])
    if per > 1:
        mix = 0.62 * k / (per - 1)          # word 0 of a block darkest, word 3 lightest
        base = base + (1.0 - base) * mix
    return tuple(base)


def _text_color(rgb):
    r, g, b = rgb
    return "black" if (0.299 * r + 0.587 * g + 0.114 * b) > 0.55 else "white"


def _unit_label(lay, unit, slot):
    if lay.is_int8:
        return f"w{unit}\nL{slot}"
    if lay.is_texture:
        return f"t{unit}\nc{slot}"
    return f"{unit}"


def _fontsize(n_cells_wide):
    return float(np.clip(100.0 / max(n_cells_wide, 1), 5.0, 8.5))


def _check_cells(sz, what):
    if int(np.prod(sz)) > _MAX_CELLS:
        raise ValueError(f"{what}: {int(np.prod(sz))} elements is too many to draw (limit {_MAX_CELLS}); "
                         f"use smaller sizes")


# ---------------------------------------------------------------------------------------------------------------------
# tensor view
# ---------------------------------------------------------------------------------------------------------------------

def tensor_view(layout, sizes, highlight=None, ax=None, show_padding: bool = True):
    """The (N, C, H, W) grid: one panel per n (side by side), rows = (c, h) with c major, columns = w.

    Each cell is coloured by the word (texel / element) that stores it and labelled ``w<word> L<lane>``
    (``t<texel> c<component>`` for textures, the offset for float buffers).  With ``show_padding``, the cells the
    layout pads in (e.g. C up to a multiple of 4 for 4W4C) are drawn hatched with their word/lane in grey.
    ``highlight``: an (n, c, h, w) element to outline in red.  Returns the Figure.
    """
    lay = L.get_layout(layout)
    sz = L.normalize_sizes(sizes)
    _check_cells(sz, "tensor_view")
    n_, c_, h_, w_ = sz
    geo = _tensor_geometry(lay, sz, show_padding)
    grid, rows, panel_w = geo["grid"], geo["rows"], geo["panel_w"]
    gn, gc, gh, gw = grid
    fig, ax = _new_axes(geo["figsize"], ax)
    fs = _fontsize(panel_w * gn * 1.6)

    ns, cs, hs, ws = (a.reshape(-1) for a in np.indices(grid))
    logical = (ns < n_) & (cs < c_) & (hs < h_) & (ws < w_)
    units = np.zeros(ns.shape, np.int64)
    slots = np.zeros(ns.shape, np.int64)
    if logical.any():
        u, s = lay.element_to_unit(sz, ns[logical], cs[logical], hs[logical], ws[logical])
        units[logical], slots[logical] = u, s
    pad_idx = np.nonzero(~logical)[0]
    if pad_idx.size:
        units[pad_idx], slots[pad_idx] = _padding_units(lay, sz, ns[pad_idx], cs[pad_idx], hs[pad_idx],
                                                        ws[pad_idx])

    cells = _Boxes(edgecolors="white", linewidths=0.8)
    pads = _Boxes(edgecolors="#9a9a9a", linewidths=0.6, hatch="///", alpha=0.9)
    for i in range(ns.size):
        x = ns[i] * panel_w + ws[i]
        y = cs[i] * gh + hs[i]
        rgb = unit_color(lay, units[i]) if units[i] >= 0 else (0.9, 0.9, 0.9)
        if logical[i]:
            cells.add(x, y, face=rgb)
            ax.text(x + 0.5, y + 0.5, _unit_label(lay, units[i], slots[i]), ha="center", va="center",
                    fontsize=fs, color=_text_color(rgb), gid="cell-label", linespacing=0.95)
        else:
            face = tuple(0.55 * np.array(rgb) + 0.45) if units[i] >= 0 else (0.9, 0.9, 0.9)
            pads.add(x, y, face=face)
            label = _unit_label(lay, units[i], slots[i]) if units[i] >= 0 else "pad"
            ax.text(x + 0.5, y + 0.5, label, ha="center", va="center", fontsize=fs * 0.9, color="#555555",
                    style="italic", gid="pad-label", linespacing=0.95)

    cells.draw(ax)
    pads.draw(ax)
    # channel separators, panel titles, axes
    for n in range(gn):
        x0 = n * panel_w
        for c in range(1, gc):
            ax.plot([x0, x0 + gw], [c * gh, c * gh], color="black", linewidth=1.4)
        ax.add_patch(Rectangle((x0, 0), gw, rows, fill=False, edgecolor="black", linewidth=1.4))
        label = f"n={n}" if n < n_ else f"n={n} (padding)"
        ax.text(x0 + gw / 2, -0.35, label, ha="center", va="bottom", fontsize=9, fontweight="bold")
    if highlight is not None:
        e = L.normalize_element(highlight)
        lay.element_to_unit(sz, *e)                         # range check
        ax.add_patch(Rectangle((e[0] * panel_w + e[3], e[1] * gh + e[2]), 1, 1, fill=False,
                               edgecolor=_HIGHLIGHT, linewidth=3.0, zorder=5))
    ax.set_xlim(-0.2, panel_w * gn - 0.8)
    ax.set_ylim(rows + 0.2, -1.1)
    ax.set_aspect("equal")
    ax.set_xticks([n * panel_w + w + 0.5 for n in range(gn) for w in range(gw)])
    ax.set_xticklabels([f"w{w}" for n in range(gn) for w in range(gw)], fontsize=7)
    ax.set_yticks([r + 0.5 for r in range(rows)])
    ax.set_yticklabels([f"c{r // gh} h{r % gh}" for r in range(rows)], fontsize=7)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    what = {"word": "word w, lane L", "texel": "texel t, component c", "element": "buffer offset"}[lay.unit_name]
    ax.set_title(f"{lay.name}: tensor (N,C,H,W)={sz}, cell = {what}", fontsize=10)
    return fig


def _padding_units(lay, sz, n, c, h, w):
    """(unit, slot) of padded positions (storage the layout reserves there); -1 outside the padded sizes."""
    psz = lay.padded_sizes(sz)
    unit = np.full(n.shape, -1, np.int64)
    slot = np.zeros(n.shape, np.int64)
    inside = (n < psz[0]) & (c < psz[1]) & (h < psz[2]) & (w < psz[3])
    if inside.any():
        unit[inside], slot[inside] = lay.padded_position_to_unit(sz, n[inside], c[inside], h[inside], w[inside])
    return unit, slot


# ---------------------------------------------------------------------------------------------------------------------
# memory view
# ---------------------------------------------------------------------------------------------------------------------

def _elem_label(n, c, h, w, show_n):
    return (f"n{n}c{c}\nh{h}w{w}") if show_n else (f"c{c}\nh{h}w{w}")


def memory_view(layout, sizes, highlight=None, max_words: int = 64, words_per_row: int | None = None, ax=None):
    """Storage in address order: rows of ``words_per_row`` words (default 8 = 32 bytes), each word 4 lane boxes
    labelled with the (n, c, h, w) it holds (``n`` shown only when N > 1); padding lanes hatched grey.  The y axis
    gives the byte address of each row.  Only the first ``max_words`` words are drawn.  Texture layouts are drawn
    by :func:`texel_view`; float buffers one element per box (16 per row).  Returns the Figure.
    """
    lay = L.get_layout(layout)
    if lay.is_texture:
        return texel_view(lay, sizes, highlight=highlight, ax=ax)
    sz = L.normalize_sizes(sizes)
    slots = lay.slots_per_unit
    geo = _memory_geometry(lay, sz, max_words, words_per_row)
    total, shown, rows, per_row, xs, row_w = (geo[k] for k in ("total", "shown", "rows", "per_row", "xs", "row_w"))
    fig, ax = _new_axes(geo["figsize"], ax)
    row_h = geo["row_h"]
    fs = 6.0 if slots == 4 else 6.5
    show_n = sz[0] > 1

    unit_ids = np.arange(shown)
    uu = np.repeat(unit_ids, slots)
    ss = np.tile(np.arange(slots), shown)
    n, c, h, w, valid = lay.unit_to_element(sz, uu, ss)
    hl = None
    if highlight is not None:
        e = L.normalize_element(highlight)
        hl = tuple(int(v) for v in lay.element_to_unit(sz, *e))

    boxes = _Boxes(edgecolors="white", linewidths=0.6)
    pads = _Boxes(edgecolors="#9a9a9a", linewidths=0.6, hatch="///")
    outlines = _Boxes(edgecolors="black", linewidths=1.1, zorder=3)
    for i in range(uu.size):
        u, s = int(uu[i]), int(ss[i])
        r, k = divmod(u, per_row)
        x0 = xs[k] + s
        y0 = r * row_h
        if valid[i]:
            rgb = unit_color(lay, u)
            boxes.add(x0, y0, face=rgb)
            label = _elem_label(n[i], c[i], h[i], w[i], show_n) if slots == 4 else \
                f"{n[i]},{c[i]}\n{h[i]},{w[i]}"
            ax.text(x0 + 0.5, y0 + 0.5, label, ha="center", va="center", fontsize=fs, color=_text_color(rgb),
                    gid="lane-label", linespacing=0.95)
        else:
            pads.add(x0, y0, face=_PAD_FACE)
            ax.text(x0 + 0.5, y0 + 0.5, "pad", ha="center", va="center", fontsize=fs, color="#666666",
                    style="italic", gid="lane-label")
        if s == 0 and slots == 4:
            outlines.add(x0, y0, slots, 1)
            ax.text(x0 + slots / 2, y0 + 1.04, f"word {u}", ha="center", va="top", fontsize=6.5,
                    color="#333333", gid="word-label")
        if hl is not None and (u, s) == hl:
            ax.add_patch(Rectangle((x0, y0), 1, 1, fill=False, edgecolor=_HIGHLIGHT, linewidth=3.0, zorder=5))
    for group in (boxes, pads, outlines):
        group.draw(ax)
    if slots == 4:
        lane_ticks = [xs[k] + s + 0.5 for k in range(per_row) for s in range(4)]
        ax.set_xticks(lane_ticks)
        ax.set_xticklabels([f"L{s}" for k in range(per_row) for s in range(4)], fontsize=6)
    else:
        ax.set_xticks([k + 0.5 for k in range(per_row)])
        ax.set_xticklabels([f"+{k}" for k in range(per_row)], fontsize=7)
    ax.xaxis.tick_top()
    ax.set_yticks([r * row_h + 0.5 for r in range(rows)])
    ax.set_yticklabels([f"{r * per_row * lay.unit_nbytes}" for r in range(rows)], fontsize=7)
    ax.set_ylabel("byte address", fontsize=8)
    ax.set_xlim(-0.2, row_w + 0.2)
    ax.set_ylim(rows * row_h + 0.1, -0.3)
    ax.set_aspect("equal")
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    more = f" (first {shown} of {total} {lay.unit_name}s)" if shown < total else f" ({total} {lay.unit_name}s)"
    ax.set_title(f"{lay.name}: memory, address order{more}", fontsize=10, pad=18)
    return fig


def texel_view(layout, sizes, highlight=None, ax=None):
    """Texture layouts: the image as z slices stacked top to bottom, each Y rows × X texels, every texel drawn as
    4 component boxes labelled with the (n, c, h, w) they hold; padding components hatched.  Returns the Figure."""
    lay = L.get_layout(layout)
    if not lay.is_texture:
        raise ValueError(f"texel_view needs a texture layout, {lay.name} is a {lay.storage} layout")
    sz = L.normalize_sizes(sizes)
    _check_cells(sz, "texel_view")
    X, Y, Z = lay.extents(sz)
    slice_h = Y + 0.6
    fig, ax = _new_axes(_texel_figsize(X, Y, Z), ax)
    show_n = sz[0] > 1
    hl = None
    if highlight is not None:
        e = L.normalize_element(highlight)
        hl = tuple(int(v) for v in lay.element_to_texel(sz, *e))
    x, y, z, comp = (a.reshape(-1) for a in np.indices((X, Y, Z, 4)))
    n, c, h, w, valid = lay.texel_to_element(sz, x, y, z, comp)
    boxes = _Boxes(edgecolors="white", linewidths=0.6)
    pads = _Boxes(edgecolors="#9a9a9a", linewidths=0.6, hatch="///")
    outlines = _Boxes(edgecolors="black", linewidths=1.1, zorder=3)
    for i in range(x.size):
        x0 = x[i] * 4.25 + comp[i]
        y0 = z[i] * slice_h + y[i]
        unit = (z[i] * Y + y[i]) * X + x[i]
        if valid[i]:
            rgb = unit_color(lay, unit)
            boxes.add(x0, y0, face=rgb)
            ax.text(x0 + 0.5, y0 + 0.5, _elem_label(n[i], c[i], h[i], w[i], show_n), ha="center", va="center",
                    fontsize=6.5, color=_text_color(rgb), gid="lane-label", linespacing=0.95)
        else:
            pads.add(x0, y0, face=_PAD_FACE)
            ax.text(x0 + 0.5, y0 + 0.5, "pad", ha="center", va="center", fontsize=6.5, color="#666666",
                    style="italic", gid="lane-label")
        if comp[i] == 0:
            outlines.add(x0, y0, 4, 1)
        if hl is not None and (x[i], y[i], z[i], comp[i]) == hl:
            ax.add_patch(Rectangle((x0, y0), 1, 1, fill=False, edgecolor=_HIGHLIGHT, linewidth=3.0, zorder=5))
    for group in (boxes, pads, outlines):
        group.draw(ax)
    ax.set_xticks([xx * 4.25 + cc + 0.5 for xx in range(X) for cc in range(4)])
    ax.set_xticklabels([f"x{xx}.{'rgba'[cc]}" if cc == 0 else "rgba"[cc] for xx in range(X) for cc in range(4)],
                       fontsize=6.5)
    ax.xaxis.tick_top()
    ax.set_yticks([zz * slice_h + yy + 0.5 for zz in range(Z) for yy in range(Y)])
    ax.set_yticklabels([f"z{zz} y{yy}" for zz in range(Z) for yy in range(Y)], fontsize=7)
    ax.set_xlim(-0.2, X * 4.25)
    ax.set_ylim(Z * slice_h - 0.4, -0.2)
    ax.set_aspect("equal")
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(f"{lay.name}: image texels, extents (x,y,z)=({X},{Y},{Z}), components r g b a", fontsize=10,
                 pad=16)
    return fig


def _texel_figsize(X, Y, Z):
    return (max(4.5, 0.55 * X * 4.25 + 1.6), max(1.8, 0.55 * Z * (Y + 0.6) + 1.2))


# ---------------------------------------------------------------------------------------------------------------------
# combinations
# ---------------------------------------------------------------------------------------------------------------------

def _tensor_geometry(lay, sz, show_padding=True):
    grid = lay.padded_sizes(sz) if show_padding else sz
    rows = grid[1] * grid[2]
    panel_w = grid[3] + 1
    return {"grid": grid, "rows": rows, "panel_w": panel_w,
            "figsize": (max(4.0, 0.62 * panel_w * grid[0] + 1.5), max(2.2, 0.42 * rows + 1.2))}


def _memory_geometry(lay, sz, max_words, words_per_row=None):
    """Row layout of memory_view: words per row, words shown, x position of each word in a row, figure size."""
    slots = lay.slots_per_unit
    total = lay.num_units(sz)
    per_row = int(words_per_row or (8 if slots == 4 else 16))
    if per_row < 1:
        raise ValueError(f"words_per_row must be >= 1, got {words_per_row}")
    shown = min(total, max_words if slots == 4 else max_words * 4)
    rows = -(-shown // per_row)
    gap_word = 0.18 if slots == 4 else 0.0
    gap_block = 0.45 if lay.units_per_block > 1 else gap_word
    xs, x = [], 0.0
    for k in range(per_row):
        if k:
            x += gap_block if k % lay.units_per_block == 0 else gap_word
        xs.append(x)
        x += slots
    row_h = 1.5 if slots == 4 else 1.0
    box_w_in = 0.5 if slots == 4 else 0.62
    figsize = (max(4.5, box_w_in * x + 1.6), max(1.6, 0.5 * rows * row_h + 1.1))
    return {"total": total, "shown": shown, "rows": rows, "per_row": per_row, "xs": xs, "row_w": x,
            "row_h": row_h, "figsize": figsize}


def _view_sizes(lay, sz, max_words, words_per_row):
    """Figure sizes (inches) that tensor_view and memory_view pick, for composing them."""
    t = _tensor_geometry(lay, sz)["figsize"]
    if lay.is_texture:
        X, Y, Z = lay.extents(sz)
        m = _texel_figsize(X, Y, Z)
    else:
        m = _memory_geometry(lay, sz, max_words, words_per_row)["figsize"]
    return t, m


def compare_layouts(layouts: Sequence, sizes, element=None, max_words: int = 64, words_per_row: int = 4):
    """Side by side, one column per layout: tensor view on top, memory view below (``words_per_row`` words per
    row), ``element`` highlighted in both and located in the figure title.  Returns the Figure."""
    lays = [L.get_layout(x) for x in layouts]
    if not lays:
        raise ValueError("compare_layouts needs at least one layout")
    sz = L.normalize_sizes(sizes)
    shapes = [_view_sizes(lay, sz, max_words, words_per_row) for lay in lays]
    widths = [max(t[0], m[0]) for t, m in shapes]
    top = max(t[1] for t, _ in shapes)
    bottom = max(m[1] for _, m in shapes)
    fig = _Figure(figsize=(sum(widths), top + bottom + (0.5 if element is not None else 0.0)),
                  layout="constrained")
    gs = fig.add_gridspec(2, len(lays), height_ratios=[top, bottom], width_ratios=widths)
    for j, lay in enumerate(lays):
        tensor_view(lay, sz, highlight=element, ax=fig.add_subplot(gs[0, j]))
        memory_view(lay, sz, highlight=element, max_words=max_words, words_per_row=words_per_row,
                    ax=fig.add_subplot(gs[1, j]))
    if element is not None:
        fig.suptitle("\n".join(_short_location(lay, sz, element) for lay in lays), fontsize=10)
    return fig


def save_layout_pictures(layout, sizes, path_png, element=None, max_words: int = 64, words_per_row: int = 8):
    """Tensor view above memory view of one layout (``element`` highlighted and located), saved as a PNG;
    returns the path."""
    lay = L.get_layout(layout)
    sz = L.normalize_sizes(sizes)
    (tw, th), (mw, mh) = _view_sizes(lay, sz, max_words, words_per_row)
    fig = _Figure(figsize=(max(tw, mw), th + mh + 0.4), layout="constrained")
    gs = fig.add_gridspec(2, 1, height_ratios=[th, mh])
    tensor_view(lay, sz, highlight=element, ax=fig.add_subplot(gs[0, 0]))
    memory_view(lay, sz, highlight=element, max_words=max_words, words_per_row=words_per_row,
                ax=fig.add_subplot(gs[1, 0]))
    if element is not None:
        fig.suptitle(lay.describe_element(sz, element), fontsize=9)
    fig.savefig(path_png, dpi=110, bbox_inches="tight")
    return path_png


# ---------------------------------------------------------------------------------------------------------------------
# ipywidgets explorer
# ---------------------------------------------------------------------------------------------------------------------

def _short_location(lay, sz, element) -> str:
    loc = lay.locate(sz, element)
    e = ",".join(str(v) for v in loc["element"])
    if lay.is_int8:
        where = f"word {loc['word']} lane {loc['lane']}"
    elif lay.is_texture:
        where = "texel ({},{},{}) component {}".format(*loc["texel"], loc["component"])
    else:
        where = f"offset {loc['offset']}"
    return f"{lay.name}: element ({e}) → {where}, byte address {loc['byte_address']}"


class LayoutExplorer(SliderExplorer):
    """Two layouts side by side with size and element sliders (built by :func:`layout_explorer`).

    Attributes for notebooks and tests: ``layout_a``, ``layout_b`` (Dropdowns); ``size_sliders`` and
    ``element_sliders`` (dicts n/c/h/w → IntSlider); ``sliders`` (all of them: layout_a, layout_b, N, C, H, W,
    n, c, h, w); ``text`` = ``readout`` (HTML widget, one line per layout:
    "element (n,c,h,w) → word W lane L, byte address B"); ``image`` (PNG of the current figure); ``figure``
    (the current matplotlib Figure); ``widget`` (the VBox to display).  Moving a widget re-renders.
    """

    def __init__(self, layout_a="4W4C", layout_b="4C1W", sizes=(1, 8, 2, 8), element=(0, 0, 0, 0),
                 max_size: int = 12, max_words: int = 48):
        import ipywidgets as widgets

        self.max_words = max_words
        names = L.layout_names()
        self.layout_a = widgets.Dropdown(options=names, value=L.get_layout(layout_a).name, description="left")
        self.layout_b = widgets.Dropdown(options=names, value=L.get_layout(layout_b).name, description="right")
        sz = L.normalize_sizes(sizes)
        el = L.normalize_element(element)
        self.size_sliders = {k: widgets.IntSlider(value=v, min=1, max=max(max_size, v), description=k.upper(),
                                                  continuous_update=False)
                             for k, v in zip("nchw", sz)}
        self.element_sliders = {k: widgets.IntSlider(value=min(v, s - 1), min=0, max=s - 1, description=k,
                                                     continuous_update=False)
                                for k, v, s in zip("nchw", el, sz)}
        self.text = widgets.HTML()
        self.readout = self.text  # the name every workbench explorer uses for its text
        self.sliders = {"layout_a": self.layout_a, "layout_b": self.layout_b,
                        **{k.upper(): v for k, v in self.size_sliders.items()}, **self.element_sliders}
        self.image = widgets.Image(format="png")
        self.figure = None
        for wdg in [self.layout_a, self.layout_b, *self.size_sliders.values(), *self.element_sliders.values()]:
            wdg.observe(self._on_change, names="value")
        self.widget = widgets.VBox([
            widgets.HBox([self.layout_a, self.layout_b]),
            widgets.HBox([widgets.Label("sizes", layout=widgets.Layout(width="64px")), *self.size_sliders.values()]),
            widgets.HBox([widgets.Label("element", layout=widgets.Layout(width="64px")),
                          *self.element_sliders.values()]),
            self.text,
            self.image,
        ])
        self.update()

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        return tuple(self.size_sliders[k].value for k in "nchw")

    @property
    def element(self) -> tuple[int, int, int, int]:
        return tuple(self.element_sliders[k].value for k in "nchw")

    def update(self):
        """Clamp the element sliders to the sizes, then redraw the text and the figure."""
        self._clamp_elements(self.sizes)
        lays = [L.get_layout(self.layout_a.value), L.get_layout(self.layout_b.value)]
        lines = [_short_location(lay, self.sizes, self.element) for lay in lays]
        self.text.value = "<br>".join(f"<code>{line}</code>" for line in lines)
        self.figure = compare_layouts(lays, self.sizes, self.element, max_words=self.max_words)
        self.image.value = figure_png(self.figure, dpi=72, tight=False)

    @property
    def text_lines(self) -> list[str]:
        """The text widget's lines without markup."""
        return [part.replace("<code>", "").replace("</code>", "") for part in self.text.value.split("<br>")]

    def _ipython_display_(self):
        from IPython.display import display
        display(self.widget)


def layout_explorer(layout_a="4W4C", layout_b="4C1W", sizes=(1, 8, 2, 8), element=(0, 0, 0, 0),
                    max_words: int = 48) -> LayoutExplorer:
    """An ipywidgets explorer: two layout dropdowns, N/C/H/W sliders, an element picker; the element is outlined
    in both layouts' tensor and memory views and located in a text line per layout."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError as exc:                                      # pragma: no cover
        raise ImportError("layout_explorer needs ipywidgets (pip install ipywidgets==8.1.9)") from exc
    return LayoutExplorer(layout_a, layout_b, sizes, element, max_words=max_words)
