"""Mismatch maps (issue 24): where an output differs from its reference, counted, measured and drawn.

``mismatch_report(got, want, layout=None, dtype_kind="int8" | "float")`` → :class:`MismatchReport`:

- how many elements are wrong (count, fraction), the error of the wrong ones: int8 in LSB (``|got - want|`` in
  integer steps), float in ULP (distance in the ordered fp32 bit patterns) and relative (``|got - want| / |want|``);
- the first wrong elements, as logical NCHW indices (C order);
- a map over the logical dims: wrong elements per (n, channel block of 4, h, w), drawn with batches down and channel
  blocks across (``logical_map``);
- with a layout (``workbench.layouts``), a map over the storage: wrong elements per packed unit (int32 word of an
  int8x4 layout, RGBA texel of a texture, element of a float buffer), through ``Layout.element_to_unit``, so a
  wrong tile, lane or block shows as a shape (``unit_counts``; ``unit_grid`` lays it out in rows).

Pure numpy / torch and layouts: no Vulkan. ``workbench.viz.mismatch_views.plot_mismatch`` draws a report.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import layouts as L

__all__ = ["MismatchReport", "mismatch_report", "ordered_fp32", "count_char"]


def _numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _to4d(a: np.ndarray) -> np.ndarray:
    if a.ndim > 4:
        raise ValueError(f"expected a tensor of 1 to 4 dims (NCHW), got {a.ndim} dims, shape {a.shape}")
    return a.reshape((1,) * (4 - a.ndim) + a.shape)


def ordered_fp32(a) -> np.ndarray:
    """fp32 values → int64 whose differences count ULPs (+0 and -0 map to the same integer)."""
    bits = np.ascontiguousarray(np.asarray(a, dtype=np.float32)).view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


def count_char(k: int) -> str:
    """One character for a count: '.' none, '1'…'9', '#' ten or more."""
    return "." if k <= 0 else (str(k) if k < 10 else "#")


@dataclass
class MismatchReport:
    shape: tuple  # logical NCHW (4-D)
    dtype_kind: str  # "int8" | "float"
    count: int
    total: int
    max_error: float  # LSB (int8) or ULP (float), over the wrong elements
    mean_error: float  # mean over the wrong elements (0 when none)
    first: list  # first wrong elements, (n, c, h, w), C order
    wrong: np.ndarray = field(repr=False)  # bool, shape
    error: np.ndarray = field(repr=False)  # LSB / ULP per element (float64), shape
    max_rel: float = 0.0  # float: largest relative error among the wrong elements
    layout: str | None = None
    unit_name: str = "word"
    unit_counts: np.ndarray | None = field(default=None, repr=False)  # wrong elements per storage unit (1-D)
    unit_row: int = 0  # units per row when drawn (texture: extents X; buffer: one block row)
    note: str = ""  # e.g. "shape differs"

    @property
    def exact(self) -> bool:
        return self.count == 0 and not self.note

    @property
    def fraction(self) -> float:
        return self.count / self.total if self.total else 0.0

    @property
    def unit(self) -> str:
        return "LSB" if self.dtype_kind == "int8" else "ULP"

    @property
    def wrong_units(self) -> np.ndarray:
        """Indices of the storage units (words / texels) holding at least one wrong element."""
        return np.zeros(0, np.int64) if self.unit_counts is None else np.flatnonzero(self.unit_counts)

    def logical_map(self) -> np.ndarray:
        """Wrong elements per (n, channel block of 4, h, w): shape (N, ceil(C/4), H, W)."""
        n, c, h, w = self.shape
        cb = -(-c // 4)
        padded = np.zeros((n, cb * 4, h, w), np.int64)
        padded[:, :c] = self.wrong
        return padded.reshape(n, cb, 4, h, w).sum(axis=2)

    def logical_image(self) -> np.ndarray:
        """``logical_map`` tiled as one 2-D picture: batches down, channel blocks across, (H, W) each."""
        m = self.logical_map()
        n, cb, h, w = m.shape
        return m.transpose(0, 2, 1, 3).reshape(n * h, cb * w)

    def unit_grid(self) -> np.ndarray | None:
        """``unit_counts`` in rows of ``unit_row`` units (the last row padded with -1)."""
        if self.unit_counts is None:
            return None
        row = max(1, self.unit_row)
        rows = -(-len(self.unit_counts) // row)
        out = np.full(rows * row, -1, np.int64)
        out[:len(self.unit_counts)] = self.unit_counts
        return out.reshape(rows, row)

    def summary(self) -> str:
        if self.note:
            return self.note
        if self.count == 0:
            return "exact"
        s = (f"{self.count}/{self.total} wrong ({100 * self.fraction:.3g}%), max {self.max_error:g} {self.unit}, "
             f"mean {self.mean_error:.3g} {self.unit}")
        if self.dtype_kind == "float":
            s += f", max rel {self.max_rel:.3g}"
        s += ", first " + " ".join("(" + ",".join(map(str, e)) + ")" for e in self.first[:3])
        if self.unit_counts is not None:
            s += f"; {len(self.wrong_units)} {self.layout} {self.unit_name}s of {len(self.unit_counts)}"
        return s

    def text_grid(self, max_width: int = 64, max_blocks: int = 8) -> str:
        """A compact text picture: per (n, channel block) an H×W grid of wrong counts in cells ('.' none, '1'–'9',
        '#' ten or more); cells grow (2×2, 4×4, … 16×16) until W fits in ``max_width``. Clean blocks are only
        counted. Then the storage units in rows, when a layout was given."""
        lines = [self.summary()]
        if self.note or self.count == 0:
            return "\n".join(lines)
        m = self.logical_map()
        n, cb, h, w = m.shape
        cell = 1
        while -(-w // cell) > max_width:
            cell *= 2
        if cell > 1:
            lines.append(f"logical map: {cell}x{cell} cells of H×W, counts over 4 channels")
        else:
            lines.append("logical map: H×W, counts over each block of 4 channels")
        shown = clean = 0
        for b in range(n):
            for k in range(cb):
                blk = m[b, k]
                if not blk.any():
                    clean += 1
                    continue
                if shown >= max_blocks:
                    continue
                shown += 1
                hp, wp = -(-h // cell) * cell, -(-w // cell) * cell
                pad = np.zeros((hp, wp), np.int64)
                pad[:h, :w] = blk
                cells = pad.reshape(hp // cell, cell, wp // cell, cell).sum(axis=(1, 3))
                lines.append(f"n={b} c={4 * k}..{min(4 * k + 3, self.shape[1] - 1)}:")
                lines.extend("  " + "".join(count_char(int(v)) for v in row) for row in cells)
        wrong_blocks = n * cb - clean
        if wrong_blocks > shown:
            lines.append(f"({wrong_blocks - shown} more blocks with errors not shown)")
        if clean:
            lines.append(f"({clean} blocks of 4 channels clean)")
        grid = self.unit_grid()
        if grid is not None:
            row = grid.shape[1]
            group = 1
            while -(-row // group) > max_width:
                group *= 2
            lines.append(f"{self.layout} {self.unit_name}s, {row} a row"
                         + (f", {group} a character" if group > 1 else "") + ":")
            rp = -(-row // group) * group
            g = np.zeros((grid.shape[0], rp), np.int64)
            g[:, :row] = np.maximum(grid, 0)
            g = g.reshape(grid.shape[0], rp // group, group).sum(axis=2)
            nz = np.flatnonzero(g.any(axis=1))
            last = -2
            for r in nz[:max(4 * max_blocks, 16)]:
                if r != last + 1 and last >= 0:
                    lines.append("  ...")
                lines.append(f"  {r * row:>6} " + "".join(count_char(int(v)) for v in g[r]))
                last = r
        return "\n".join(lines)


def mismatch_report(got, want, layout=None, dtype_kind: str = "int8", *, tolerance: float = 0,
                    storage: str | None = None, first: int = 8) -> MismatchReport:
    """Compare ``got`` with ``want`` (NCHW, 1–4 dims, numpy or torch). An element is wrong when its error (LSB for
    int8, ULP for float) exceeds ``tolerance``. ``layout``: a :class:`workbench.layouts.Layout` or a name (with
    ``storage``, for the float layouts) to map the wrong elements onto its words / texels."""
    if dtype_kind not in ("int8", "float"):
        raise ValueError(f"dtype_kind must be 'int8' or 'float', got {dtype_kind!r}")
    g, w = _numpy(got), _numpy(want)
    if isinstance(layout, str):
        layout = L.get_layout(layout, storage) if storage else L.get_layout(layout)
    if g.shape != w.shape:
        shape = tuple(_to4d(w).shape)
        n = int(np.prod(shape))
        return MismatchReport(shape, dtype_kind, n, n, float("inf"), float("inf"), [], np.ones(shape, bool),
                              np.full(shape, np.inf), layout=layout.name if layout else None,
                              note=f"shape differs: got {tuple(g.shape)}, want {tuple(w.shape)}")
    g, w = _to4d(g), _to4d(w)
    shape = tuple(int(s) for s in w.shape)
    rel = np.zeros(shape)
    if dtype_kind == "int8":
        err = np.abs(g.astype(np.int64) - w.astype(np.int64)).astype(np.float64)
    else:
        gf, wf = g.astype(np.float32), w.astype(np.float32)
        err = np.abs(ordered_fp32(gf) - ordered_fp32(wf)).astype(np.float64)
        gn, wn = np.isnan(gf), np.isnan(wf)
        err[gn & wn] = 0.0
        err[gn ^ wn] = np.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.abs(gf.astype(np.float64) - wf) / np.abs(wf.astype(np.float64))
        rel = np.where(err == 0, 0.0, np.nan_to_num(rel, nan=np.inf))
    wrong = err > tolerance
    count = int(wrong.sum())
    idx = np.argwhere(wrong)[:first]
    report = MismatchReport(
        shape=shape, dtype_kind=dtype_kind, count=count, total=int(wrong.size),
        max_error=float(err[wrong].max()) if count else 0.0,
        mean_error=float(err[wrong].mean()) if count else 0.0,
        first=[tuple(int(v) for v in e) for e in idx], wrong=wrong, error=err,
        max_rel=float(rel[wrong].max()) if count and dtype_kind == "float" else 0.0)
    if layout is not None:
        report.layout = layout.name
        report.unit_name = layout.unit_name
        counts = np.zeros(layout.num_units(shape), np.int64)
        if count:
            unit, _ = layout.element_to_unit(shape, *np.nonzero(wrong))
            np.add.at(counts, np.asarray(unit, np.int64), 1)
        report.unit_counts = counts
        report.unit_row = _unit_row(layout, shape)
    return report


def _unit_row(layout: L.Layout, shape) -> int:
    """Units in one drawn row: a texture's X extent; a buffer's fastest block dim (in units), e.g. 4W4C's W/4 blocks
    of 4 words — so a wrong H×W tile or channel block shows as a rectangle."""
    if layout.is_texture:
        return int(layout.extents(shape)[0])
    blocked = layout.blocked_sizes(shape)[::-1]  # WHCN
    fastest = layout.dim_order_whcn[0]
    return max(1, int(blocked[fastest]) * max(1, layout.units_per_block))
