"""Pictures of pixel shuffle's index map (matplotlib; data in, Figure out; no device).

* :func:`index_map` — input and output side by side.  Output element ``(c, oh, ow)`` reads input element
  ``(c·r² + (oh % r)·r + (ow % r), oh // r, ow // r)``: every input channel has its own colour, and each output cell
  takes the colour of the channel it reads, so the r×r mosaic of every output channel shows which r² input
  channels it interleaves.  A highlighted output element is outlined in both panels and joined by an arrow.
* :func:`fused_word_sources` — one output word of the fused int8x4 kernel: its 4 lanes (4 output channels at one
  (n, oh, ow)), the input words they read and through which lanes, with the word / lane maps of
  :mod:`workbench.layouts`.  :func:`word_sources` returns the same as data.
* :func:`plot_fused_vs_chain`, :func:`plot_bandwidth` — charts of a
  :func:`workbench.benchmarks.pixel_shuffle.bench_suite` DataFrame: GPU time of the fused kernel against the chain,
  and every kernel's GB/s against the copy roofline at the same traffic.
* :func:`pixel_shuffle_explorer` — an ipywidgets explorer: pick sizes, r and an output element; shows the input
  element it reads, the index map with the highlight, and the fused kernel's word for a chosen layout pair.

Text artists carry a ``gid``: ``"in-cell"``, ``"out-cell"`` (index map labels), ``"lane-label"``,
``"word-label"`` (word pictures).
"""
from __future__ import annotations


import numpy as np
from matplotlib import colormaps
from .figure import Figure, figure_png
from matplotlib.patches import ConnectionPatch, Rectangle

from workbench import layouts as L
from workbench.kernels.pixel_shuffle import FUSED_LAYOUTS, fused_layout, output_sizes, source_element

from .explorer import SliderExplorer
from .titles import device_names

__all__ = ["index_map", "fused_word_sources", "word_sources", "channel_color", "pixel_shuffle_explorer",
           "PixelShuffleExplorer", "save_pictures", "plot_fused_vs_chain", "plot_bandwidth"]

_HIGHLIGHT = "#d62728"
_PAD_FACE = "#e6e6e6"
_MAX_OUT_CELLS = 2304


class _Figure(Figure):
    """Layout pictures are dense: shown inline at a higher resolution."""

    png_dpi = 110


def channel_color(c_in: int, c_in_total: int):
    """RGB of input channel ``c_in``: tab20 for up to 20 channels, else evenly spaced hues (turbo)."""
    if c_in_total <= 10:
        return colormaps["tab10"](c_in % 10)[:3]
    if c_in_total <= 20:
        # tab20 pairs dark/light shades; reorder so neighbours differ in hue first
        order = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19]
        return colormaps["tab20"](order[c_in % 20])[:3]
    return colormaps["turbo"](0.05 + 0.9 * c_in / max(c_in_total - 1, 1))[:3]


def _text_color(rgb):
    r, g, b = rgb
    return "black" if (0.299 * r + 0.587 * g + 0.114 * b) > 0.55 else "white"


def _check_out(C_out, H_out, W_out, r):
    for name, v in (("C_out", C_out), ("H_out", H_out), ("W_out", W_out), ("r", r)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if H_out % r or W_out % r:
        raise ValueError(f"output sizes H_out={H_out}, W_out={W_out} must be multiples of r={r} "
                         f"(H_out = H_in·r, W_out = W_in·r)")
    if C_out * H_out * W_out > _MAX_OUT_CELLS:
        raise ValueError(f"index_map: {C_out * H_out * W_out} output elements is too many to draw "
                         f"(limit {_MAX_OUT_CELLS}); use smaller sizes")


# ---------------------------------------------------------------------------------------------------------------------
# the index map
# ---------------------------------------------------------------------------------------------------------------------

def index_map(C_out: int, H_out: int, W_out: int, r: int, highlight=None, labels: bool | None = None):
    """Input (left) and output (right) of a pixel shuffle with factor ``r`` (N = 1).

    Left: the ``C_out·r²`` input channels, each an ``H_out/r × W_out/r`` grid, arranged with one row per output
    channel c and one column per offset ``k = (oh % r)·r + (ow % r)`` (input channel ``c·r² + k``).  Right: the
    ``C_out`` output channels, each ``H_out × W_out``; every cell has the colour of the input channel it reads and
    (when ``labels``) the label ``c_in / ih,iw``.  ``highlight=(c, oh, ow)`` outlines that output element, the input
    element it reads, and joins them with an arrow.  Returns the Figure.
    """
    _check_out(C_out, H_out, W_out, r)
    H_in, W_in = H_out // r, W_out // r
    C_in = C_out * r * r
    if labels is None:
        labels = C_out * H_out * W_out <= 600
    gap = 0.6
    # input panel geometry: channel (c, k) at column k, row c
    in_x0 = lambda k: k * (W_in + gap)  # noqa: E731
    in_y0 = lambda c: c * (H_in + gap)  # noqa: E731
    out_y0 = lambda c: c * (H_out + gap)  # noqa: E731
    in_w = r * r * (W_in + gap) - gap
    in_h = C_out * (H_in + gap) - gap
    out_w = W_out
    out_h = C_out * (H_out + gap) - gap
    total_w = in_w + out_w + 3.0
    unit = float(np.clip(15.0 / total_w, 0.2, 0.45))          # inches per cell
    top_in = 0.75 if highlight is not None else 0.35          # inches above the panels (suptitle)
    fig_w = total_w * unit + 0.6
    fig_h = (max(in_h + 2.2, out_h + 0.8)) * unit * 1.15 + top_in + 0.3
    fig = _Figure(figsize=(fig_w, fig_h))
    gs = fig.add_gridspec(1, 2, width_ratios=[in_w + 0.6, out_w + 1.2], wspace=0.08, left=0.02, right=0.98,
                          bottom=0.02, top=1 - (top_in + 0.3) / fig_h)
    ax_in, ax_out = fig.add_subplot(gs[0]), fig.add_subplot(gs[1])
    for ax in (ax_in, ax_out):
        ax.set_anchor("N")  # panels top-aligned under the titles; spare height goes below (cropped when saved)
    fs = float(np.clip(unit * 72 * 0.24, 4.2, 7.5))           # two-line labels inside a cell
    for c in range(C_out):
        for k in range(r * r):
            c_in = c * r * r + k
            rgb = channel_color(c_in, C_in)
            for ih in range(H_in):
                for iw in range(W_in):
                    x0, y0 = in_x0(k) + iw, in_y0(c) + ih
                    ax_in.add_patch(Rectangle((x0, y0), 1, 1, facecolor=rgb, edgecolor="white", linewidth=0.6))
                    if labels:
                        ax_in.text(x0 + 0.5, y0 + 0.5, f"{ih},{iw}", ha="center", va="center", fontsize=fs,
                                   color=_text_color(rgb), gid="in-cell")
            ax_in.text(in_x0(k) + W_in / 2, in_y0(c) - 0.08, f"c_in {c_in}", ha="center", va="bottom",
                       fontsize=6.5, color="#333333")
        ax_in.text(-0.25, in_y0(c) + H_in / 2, f"c {c}", ha="right", va="center", fontsize=7, rotation=90)
    for k in range(r * r):
        ax_in.text(in_x0(k) + W_in / 2, -0.75, f"k={k}\n(dy,dx)=({k // r},{k % r})", ha="center", va="bottom",
                   fontsize=6.5, color="#555555")

    for c in range(C_out):
        for oh in range(H_out):
            for ow in range(W_out):
                _, c_in, ih, iw = source_element(0, c, oh, ow, r)
                rgb = channel_color(int(c_in), C_in)
                x0, y0 = ow, out_y0(c) + oh
                ax_out.add_patch(Rectangle((x0, y0), 1, 1, facecolor=rgb, edgecolor="white", linewidth=0.6))
                if labels:
                    ax_out.text(x0 + 0.5, y0 + 0.5, f"{int(c_in)}\n{int(ih)},{int(iw)}", ha="center",
                                va="center", fontsize=fs * 0.9, color=_text_color(rgb), gid="out-cell",
                                linespacing=0.9)
        # r×r tiles: thin dark grid
        for t in range(0, H_out + 1, r):
            ax_out.plot([0, W_out], [out_y0(c) + t] * 2, color="#333333", linewidth=0.5)
        for t in range(0, W_out + 1, r):
            ax_out.plot([t, t], [out_y0(c), out_y0(c) + H_out], color="#333333", linewidth=0.5)
        ax_out.text(-0.25, out_y0(c) + H_out / 2, f"c {c}", ha="right", va="center", fontsize=7, rotation=90)

    title_in = f"input (N, {C_in}, {H_in}, {W_in}): rows c, columns k — channel c·r²+k"
    title_out = f"output (N, {C_out}, {H_out}, {W_out}), r = {r}: colour = input channel read"
    if highlight is not None:
        c, oh, ow = (int(v) for v in highlight)
        if not (0 <= c < C_out and 0 <= oh < H_out and 0 <= ow < W_out):
            raise ValueError(f"highlight {(c, oh, ow)} outside the output (C, H, W) = {(C_out, H_out, W_out)}")
        _, c_in, ih, iw = (int(v) for v in source_element(0, c, oh, ow, r))
        k = c_in - c * r * r
        src = (in_x0(k) + iw, in_y0(c) + ih)
        dst = (ow, out_y0(c) + oh)
        ax_in.add_patch(Rectangle(src, 1, 1, fill=False, edgecolor=_HIGHLIGHT, linewidth=2.6, zorder=5))
        ax_out.add_patch(Rectangle(dst, 1, 1, fill=False, edgecolor=_HIGHLIGHT, linewidth=2.6, zorder=5))
        tile = (ow - ow % r, out_y0(c) + oh - oh % r)
        ax_out.add_patch(Rectangle(tile, r, r, fill=False, edgecolor=_HIGHLIGHT, linewidth=1.0, linestyle="--",
                                   zorder=4))
        arrow = ConnectionPatch(xyA=(src[0] + 0.5, src[1] + 0.5), coordsA=ax_in.transData,
                                xyB=(dst[0] + 0.5, dst[1] + 0.5), coordsB=ax_out.transData, arrowstyle="-|>",
                                color=_HIGHLIGHT, linewidth=1.6, mutation_scale=14, zorder=6)
        fig.add_artist(arrow)
        fig.suptitle(f"output (c={c}, oh={oh}, ow={ow}) ← input (c_in = {c}·{r * r} + ({oh}%{r})·{r} + {ow}%{r} "
                     f"= {c_in}, ih = {oh}//{r} = {ih}, iw = {ow}//{r} = {iw})", fontsize=9.5, color=_HIGHLIGHT,
                     y=1 - 0.12 / fig_h, va="top")
    for ax, w_, h_, title in ((ax_in, in_w, in_h, title_in), (ax_out, out_w, out_h, title_out)):
        ax.set_xlim(-0.9, w_ + 0.3)
        ax.set_ylim(h_ + 0.3, -2.2 if ax is ax_in else -0.3)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(title, fontsize=8.5)
    return fig


# ---------------------------------------------------------------------------------------------------------------------
# one word of the fused kernel
# ---------------------------------------------------------------------------------------------------------------------

def word_sources(in_layout, out_layout, sizes_in, r: int, out_word: int) -> list[dict]:
    """For output word ``out_word`` of the fused kernel: one dict per lane with ``out_lane``, ``out_element``
    (n, c, h, w), ``valid`` (False: a padding lane, written 0), and for valid lanes ``in_element``, ``in_word``,
    ``in_lane`` (through :mod:`workbench.layouts`' word / lane maps)."""
    lin, lout = fused_layout(in_layout, "input"), fused_layout(out_layout, "output")
    sin = L.normalize_sizes(sizes_in)
    sout = output_sizes(sin, r)
    n_words = lout.num_words(sout)
    if not 0 <= int(out_word) < n_words:
        raise ValueError(f"out_word={out_word} out of range [0, {n_words}) for {lout.name} sizes {sout}")
    rows = []
    for lane in range(4):
        n, c, h, w, valid = lout.word_lane_to_element(sout, int(out_word), lane)
        row = {"out_lane": lane, "out_element": (n, c, h, w), "valid": bool(valid)}
        if valid:
            e = tuple(int(v) for v in source_element(n, c, h, w, r))
            word, in_lane = lin.element_to_word_lane(sin, *e)
            row.update(in_element=e, in_word=int(word), in_lane=int(in_lane))
        rows.append(row)
    return rows


def _lane_color(lane: int):
    return colormaps["tab10"]([0, 1, 2, 4][lane])[:3]


def fused_word_sources(in_layout, out_layout, sizes_in, r: int, out_word: int):
    """Which input words feed output word ``out_word`` of the fused int8x4 kernel, and through which lanes.

    Top: the distinct input words read (address order; "…" marks skipped words), each as 4 lane boxes labelled
    with the (n, c, h, w) they hold; the lanes that are read are coloured by the output lane they feed.  Bottom: the
    output word, its lanes labelled with their element and source ("← w12.L3"); padding lanes hatched ("pad → 0").
    Arrows join source and destination lanes.  Returns the Figure.
    """
    lin, lout = fused_layout(in_layout, "input"), fused_layout(out_layout, "output")
    sin = L.normalize_sizes(sizes_in)
    sout = output_sizes(sin, r)
    src = word_sources(lin, lout, sin, r, out_word)
    words = sorted({s["in_word"] for s in src if s["valid"]})
    show_n = sin[0] > 1
    # layout of the top row: words in address order, a gap where words are skipped
    xs, x, prev = {}, 0.0, None
    gaps = []
    for wd in words:
        if prev is not None:
            if wd == prev + 1:
                x += 0.25
            else:
                gaps.append(x + 0.6)
                x += 1.2
        xs[wd] = x
        x += 4
        prev = wd
    top_w = max(x, 4)
    out_x = (top_w - 4) / 2
    fig = _Figure(figsize=(max(5.0, top_w * 0.95 + 1.0), 3.9))
    ax = fig.add_subplot(1, 1, 1)
    y_top, y_bot = 0.0, 2.6
    feeds = {(s["in_word"], s["in_lane"]): s["out_lane"] for s in src if s["valid"]}
    for wd in words:
        for lane in range(4):
            n, c, h, w, valid = lin.word_lane_to_element(sin, wd, lane)
            x0 = xs[wd] + lane
            if (wd, lane) in feeds:
                face = _lane_color(feeds[(wd, lane)])
            elif valid:
                face = "#f4f4f4"
            else:
                face = _PAD_FACE
            ax.add_patch(Rectangle((x0, y_top), 1, 1, facecolor=face, edgecolor="white", linewidth=0.8,
                                   hatch=None if valid else "///"))
            label = (f"n{n}c{c}\nh{h}w{w}" if show_n else f"c{c}\nh{h}w{w}") if valid else "pad"
            ax.text(x0 + 0.5, y_top + 0.5, label, ha="center", va="center", fontsize=6.3, gid="lane-label",
                    color=_text_color(face) if isinstance(face, tuple) else "#333333", linespacing=0.95)
            ax.text(x0 + 0.5, y_top - 0.08, f"L{lane}", ha="center", va="bottom", fontsize=6, color="#777777")
        ax.add_patch(Rectangle((xs[wd], y_top), 4, 1, fill=False, edgecolor="black", linewidth=1.1))
        ax.text(xs[wd] + 2, y_top - 0.35, f"in word {wd} (byte {4 * wd})", ha="center", va="bottom", fontsize=7,
                gid="word-label")
    for gx in gaps:
        ax.text(gx, y_top + 0.5, "…", ha="center", va="center", fontsize=11, color="#555555")
    for s in src:
        lane = s["out_lane"]
        x0 = out_x + lane
        n, c, h, w = s["out_element"]
        if s["valid"]:
            face = _lane_color(lane)
            label = (f"c{c} h{h} w{w}\n← w{s['in_word']}.L{s['in_lane']}")
            ax.add_patch(Rectangle((x0, y_bot), 1, 1, facecolor=face, edgecolor="white", linewidth=0.8))
            ax.text(x0 + 0.5, y_bot + 0.5, label, ha="center", va="center", fontsize=5.8, gid="lane-label",
                    color=_text_color(face), linespacing=1.0)
            sx = xs[s["in_word"]] + s["in_lane"] + 0.5
            ax.annotate("", xy=(x0 + 0.5, y_bot), xytext=(sx, y_top + 1),
                        arrowprops=dict(arrowstyle="-|>", color=face, linewidth=1.4, shrinkA=1, shrinkB=1))
        else:
            ax.add_patch(Rectangle((x0, y_bot), 1, 1, facecolor=_PAD_FACE, edgecolor="#9a9a9a", linewidth=0.8,
                                   hatch="///"))
            ax.text(x0 + 0.5, y_bot + 0.5, f"c{c}\npad → 0", ha="center", va="center", fontsize=6,
                    color="#555555", style="italic", gid="lane-label")
        ax.text(x0 + 0.5, y_bot + 1.08, f"L{lane}", ha="center", va="top", fontsize=6, color="#777777")
    ax.add_patch(Rectangle((out_x, y_bot), 4, 1, fill=False, edgecolor="black", linewidth=1.1))
    n0, c0, oh, ow = src[0]["out_element"]
    ax.text(out_x + 2, y_bot + 1.45, f"out word {out_word} (byte {4 * out_word}) = channels {c0}–{c0 + 3} at "
            f"(n={n0}, oh={oh}, ow={ow})", ha="center", va="top", fontsize=7.5, gid="word-label")
    offset = (oh % r) * r + ow % r
    lanes_in = sorted({s["in_lane"] for s in src if s["valid"]})
    note = (f"every lane reads input lane {lanes_in[0]}" if len(lanes_in) == 1
            else f"lanes read input lanes {lanes_in}")
    ax.set_title(f"fused q8ta_pixel_shuffle {lin.name} → {lout.name}, r = {r}, input {tuple(sin)} → output "
                 f"{tuple(sout)}\n(ih, iw) = ({oh}//{r}, {ow}//{r}) = ({oh // r}, {ow // r}); offset k = "
                 f"({oh}%{r})·{r} + {ow}%{r} = {offset}; c_in = c·{r * r} + {offset}; {len(words)} input word"
                 f"{'s' if len(words) != 1 else ''}, {note}", fontsize=8.5)
    ax.set_xlim(-0.4, top_w + 0.4)
    ax.set_ylim(y_bot + 1.6, y_top - 0.9)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig


def save_pictures(folder, *, r_values=(2, 3)) -> list:
    """Write a set of PNGs (index maps and fused words) to ``folder``; returns the paths."""
    from pathlib import Path
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in r_values:
        fig = index_map(2, 2 * r, 2 * r, r, highlight=(1, r + 1, r))
        paths.append(folder / f"index_map_r{r}.png")
        fig.savefig(paths[-1], dpi=110, bbox_inches="tight")
        # r = 2: C_out = 4, a full word; r = 3: C_out = 5, output word 14 = channels 4-7 (3 padding lanes)
        sizes, word = ((1, 16, 2, 3), 5) if r == 2 else ((1, 5 * r * r, 2, 3), 14 if r == 3 else 0)
        fig = fused_word_sources("4W4C", "4C1W", sizes, r, out_word=word)
        paths.append(folder / f"fused_word_r{r}.png")
        fig.savefig(paths[-1], dpi=110, bbox_inches="tight")
    return paths


# ---------------------------------------------------------------------------------------------------------------------
# benchmark charts
# ---------------------------------------------------------------------------------------------------------------------

def _shape_numel(shape: str) -> int:
    return int(np.prod([int(v) for v in str(shape).split("x")]))


def plot_fused_vs_chain(df, in_layout: str = "4W4C", out_layout: str = "4W4C",
                        variants=("q8ta_pixel_shuffle", "q8ta_pixel_shuffle_block")):
    """GPU time (median, log scale) of the decomposed chain (3 dispatches) and of each fused shader variant in
    ``variants`` (1 dispatch; ET-VK's per-word kernel and the 16-byte block transpose by default) per input shape,
    one panel per quantization path (passthrough, requant), each fused bar annotated with its speed-up over the
    chain.  ``df``: a ``bench_suite`` DataFrame.  Returns the Figure."""
    if isinstance(variants, str):
        variants = (variants,)
    d = df[((df["impl"] == "chain") | ((df["impl"] == "fused") & (df["variant"].isin(variants))))
           & (df["in_layout"] == in_layout) & (df["out_layout"] == out_layout)]
    if d.empty:
        raise ValueError(f"no fused / chain rows with layouts {in_layout} → {out_layout} in the frame")
    variants = [v for v in variants if (d["variant"] == v).any()]
    shapes = sorted(d["shape"].unique(), key=_shape_numel)
    qpaths = [q for q in ("passthrough", "requant") if q in set(d["qpath"])]
    fig = _Figure(figsize=(max(9.0, 1.6 * len(shapes) * len(qpaths) + 2), 4.2))
    axes = fig.subplots(1, len(qpaths), squeeze=False)[0]
    x = np.arange(len(shapes))
    times = d["median_us"].to_numpy(dtype=float)
    lo, hi = np.nanmin(times), np.nanmax(times)
    series = [("chain", None, "#e15759", "chain: 3 dispatches")]
    colors = ("#4e79a7", "#59a14f", "#f28e2b")
    series += [("fused", v, colors[i % 3], f"fused: 1 dispatch ({v})") for i, v in enumerate(variants)]
    width = 0.8 / len(series)
    for ax, qpath in zip(axes, qpaths):
        sub = d[d["qpath"] == qpath]
        chain = sub[sub["impl"] == "chain"].set_index("shape").reindex(shapes)["median_us"].to_numpy()
        for k, (impl, variant, color, what) in enumerate(series):
            rows = sub[sub["impl"] == impl] if variant is None else sub[sub["variant"] == variant]
            t = rows.drop_duplicates("shape").set_index("shape").reindex(shapes)["median_us"].to_numpy()
            offset = (k - (len(series) - 1) / 2) * width
            ax.bar(x + offset, t, width=width, color=color, label=what)
            if variant is not None:
                for xi, (tf, tc) in enumerate(zip(t, chain)):
                    if np.isfinite(tf) and np.isfinite(tc):
                        ax.text(xi + offset, tf * 1.12, f"×{tc / tf:.1f}", ha="center", va="bottom", fontsize=7.5,
                                fontweight="bold")
        ax.set_yscale("log")
        ax.set_ylim(lo / 3, hi * 2.5)
        ax.set_xticks(x, [s.replace("x", "×") for s in shapes], rotation=20, fontsize=8)
        ax.set_title(f"{qpath} ({in_layout} → {out_layout})", fontsize=10)
        ax.grid(axis="y", which="both", alpha=0.25)
    axes[0].set_ylabel("GPU time per run (µs, median)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(series), fontsize=8.5, frameon=False)
    device = device_names(df)
    fig.suptitle(f"q8ta pixel shuffle: fused kernels vs the dequantize → pixel shuffle → quantize chain\n{device}",
                 fontsize=10)
    fig.subplots_adjust(top=0.84, bottom=0.27, wspace=0.18)
    return fig


def _row_label(r) -> str:
    if r["impl"] == "fused":
        suffix = str(r.get("variant", "")).replace("q8ta_pixel_shuffle", "").replace("_", " ").strip()
        return f"fused {r['in_layout']}→{r['out_layout']} {r['qpath']}" + (f" ({suffix})" if suffix else "")
    if r["impl"] == "chain":
        return f"chain {r['in_layout']}→{r['out_layout']} {r['qpath']}"
    if r["impl"] == "float":
        return f"float {r['storage']} {r['packed_dim']} {r['dtype']}"
    return f"torch {r['dtype']} ({r['kernel'].split('(')[-1].rstrip(')')})"


def plot_bandwidth(df, shape: str | None = None):
    """GB/s (bytes read + written, log scale) of every kernel and torch op at one input shape (default: the
    largest), with the copy roofline at the same traffic: a black tick for the best Vulkan copy, a grey tick for the
    uvec4 shader copy.  Returns the Figure."""
    d = df[df["impl"].isin(["fused", "chain", "float", "torch"])]
    if d.empty:
        raise ValueError("no kernel rows in the frame")
    if shape is None:
        shape = max(d["shape"].unique(), key=_shape_numel)
    d = d[d["shape"] == shape]
    order = {"fused": 0, "chain": 1, "float": 2, "torch": 3}
    d = d.assign(_o=d["impl"].map(order)).sort_values(["_o", "GB/s"], ascending=[True, False])
    colors = {"fused": "#4e79a7", "chain": "#e15759", "float": "#59a14f", "torch": "#bab0ac"}
    fig = _Figure(figsize=(8.5, 0.3 * len(d) + 1.6))
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(len(d))
    ax.barh(y, d["GB/s"].to_numpy(), color=[colors[i] for i in d["impl"]], height=0.7)
    for yi, (_, r) in zip(y, d.iterrows()):
        for col, color, label in (("copy_GBps", "black", "best Vulkan copy, same bytes"),
                                  ("shader_copy_GBps", "#888888", "uvec4 shader copy, same bytes")):
            v = r.get(col, np.nan)
            if v is not None and np.isfinite(v):
                ax.plot([v, v], [yi - 0.4, yi + 0.4], color=color, linewidth=2, label=label)
        frac = r.get("copy_fraction", np.nan)
        text = f"{r['GB/s']:.2f} GB/s" + (f" ({100 * frac:.1f}% of copy)" if frac is not None and np.isfinite(frac)
                                          else "")
        ax.text(r["GB/s"] * 1.05, yi, text, va="center", fontsize=7)
    ax.set_yticks(y, [_row_label(r) for _, r in d.iterrows()], fontsize=7.5)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("GB/s (bytes read + written, median)")
    handles, labels = ax.get_legend_handles_labels()
    seen = {}
    for h, lab in zip(handles, labels):
        seen.setdefault(lab, h)
    ax.legend(seen.values(), seen.keys(), fontsize=7.5, loc="lower right")
    device = device_names(df)
    ax.set_title(f"pixel shuffle, input {shape.replace('x', '×')}: bandwidth against the copy roofline\n{device}",
                 fontsize=10)
    ax.grid(axis="x", which="both", alpha=0.25)
    return fig


# ---------------------------------------------------------------------------------------------------------------------
# ipywidgets explorer
# ---------------------------------------------------------------------------------------------------------------------

class PixelShuffleExplorer(SliderExplorer):
    """Pick output sizes, r and an output element; see the input element it reads (built by
    :func:`pixel_shuffle_explorer`).

    Attributes for notebooks and tests: ``sliders`` (dict C_out / H_in / W_in / r → IntSlider: the output is
    ``(C_out, H_in·r, W_in·r)``), ``element_sliders`` (c / oh / ow), ``in_layout`` / ``out_layout`` (Dropdowns of
    the fused kernel's layouts), ``label`` = ``readout`` (the Label widget), ``text`` (its current text:
    "output (c, oh, ow) ← input (c_in, ih, iw); fused 4W4C→4W4C: output word W lane L ← input word W' lane L'"),
    ``figure`` (the index map), ``word_figure`` (the fused word), ``image`` / ``word_image`` (PNG widgets),
    ``widget`` (the VBox).
    """

    def __init__(self, C_out: int = 2, H_in: int = 2, W_in: int = 2, r: int = 2, element=(1, 3, 2),
                 in_layout: str = "4W4C", out_layout: str = "4W4C"):
        import ipywidgets as widgets
        self.sliders = {
            "C_out": widgets.IntSlider(value=C_out, min=1, max=8, description="C_out", continuous_update=False),
            "H_in": widgets.IntSlider(value=H_in, min=1, max=4, description="H_in", continuous_update=False),
            "W_in": widgets.IntSlider(value=W_in, min=1, max=4, description="W_in", continuous_update=False),
            "r": widgets.IntSlider(value=r, min=1, max=4, description="r", continuous_update=False),
        }
        self.element_sliders = {k: widgets.IntSlider(value=v, min=0, max=max(v, 1), description=k,
                                                     continuous_update=False)
                                for k, v in zip(("c", "oh", "ow"), element)}
        self.in_layout = widgets.Dropdown(options=list(FUSED_LAYOUTS), value=L.get_layout(in_layout).name,
                                          description="in")
        self.out_layout = widgets.Dropdown(options=list(FUSED_LAYOUTS), value=L.get_layout(out_layout).name,
                                           description="out")
        self.label = widgets.Label()
        self.readout = self.label  # the name DEVELOPERS.md's widget convention uses
        self.image = widgets.Image(format="png")
        self.word_image = widgets.Image(format="png")
        self.figure = self.word_figure = None
        for wdg in [*self.sliders.values(), *self.element_sliders.values(), self.in_layout, self.out_layout]:
            wdg.observe(self._on_change, names="value")
        self.widget = widgets.VBox([
            widgets.HBox(list(self.sliders.values())),
            widgets.HBox([widgets.Label("output element"), *self.element_sliders.values()]),
            widgets.HBox([self.in_layout, self.out_layout]),
            self.label, self.image, self.word_image,
        ])
        self.update()

    @property
    def r(self) -> int:
        return self.sliders["r"].value

    @property
    def out_sizes(self) -> tuple[int, int, int]:
        r = self.r
        return (self.sliders["C_out"].value, self.sliders["H_in"].value * r, self.sliders["W_in"].value * r)

    @property
    def in_sizes(self) -> tuple[int, int, int, int]:
        return (1, self.sliders["C_out"].value * self.r ** 2, self.sliders["H_in"].value, self.sliders["W_in"].value)

    @property
    def element(self) -> tuple[int, int, int]:
        return tuple(self.element_sliders[k].value for k in ("c", "oh", "ow"))

    @property
    def source(self) -> tuple[int, int, int]:
        """The input (c_in, ih, iw) that the selected output element reads."""
        c, oh, ow = self.element
        _, c_in, ih, iw = source_element(0, c, oh, ow, self.r)
        return int(c_in), int(ih), int(iw)

    def update(self):
        self._clamp_elements(self.out_sizes)
        c, oh, ow = self.element
        c_in, ih, iw = self.source
        r = self.r
        lin, lout = L.get_layout(self.in_layout.value), L.get_layout(self.out_layout.value)
        sin = self.in_sizes
        sout = output_sizes(sin, r)
        ow_word, ow_lane = lout.element_to_word_lane(sout, 0, c, oh, ow)
        iw_word, iw_lane = lin.element_to_word_lane(sin, 0, c_in, ih, iw)
        self.text = (f"output (c={c}, oh={oh}, ow={ow}) ← input (c_in={c_in}, ih={ih}, iw={iw});  "
                     f"fused {lin.name}→{lout.name}: output word {ow_word} lane {ow_lane} ← input word {iw_word} "
                     f"lane {iw_lane}")
        self.label.value = self.text
        C_out, H_out, W_out = self.out_sizes
        self.figure = index_map(C_out, H_out, W_out, r, highlight=(c, oh, ow))
        self.word_figure = fused_word_sources(lin, lout, sin, r, int(ow_word))
        for fig, img in ((self.figure, self.image), (self.word_figure, self.word_image)):
            img.value = figure_png(fig, dpi=80)

    def _ipython_display_(self):
        from IPython.display import display
        display(self.widget)


def pixel_shuffle_explorer(C_out: int = 2, H_in: int = 2, W_in: int = 2, r: int = 2, element=(1, 3, 2),
                           in_layout: str = "4W4C", out_layout: str = "4W4C") -> PixelShuffleExplorer:
    """The ipywidgets explorer (see :class:`PixelShuffleExplorer`)."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError as exc:  # pragma: no cover - ipywidgets is a dependency of the notebooks
        raise ImportError("pixel_shuffle_explorer needs ipywidgets (pip install ipywidgets)") from exc
    return PixelShuffleExplorer(C_out, H_in, W_in, r, element, in_layout, out_layout)
