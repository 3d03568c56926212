"""The notebooks' explorers react to their widgets: no browser, the kernel moves them.

Each notebook runs once headless (nbclient through `workbench.notebook.execute`, `FULL = False`, results in a
temporary folder).  Extra cells appended to it find the explorer object, move its sliders and dropdowns exactly as
the browser front end would (setting `.value` fires the same observers), and print one JSON line per state: the
readout text, the widget values, and fingerprints of the chart (sha256 of the PNG the explorer shows in its Image
widget, and of the data its matplotlib figure's artists hold).  The tests below check those states against the
workbench's own definitions (`workbench.layouts`, `workbench.vendors.occupancy`).

The kernels run with the inherited environment (MPLBACKEND=Agg from conftest.py: both explorers render their figure
to PNG themselves) but without the validation layer, which test_notebooks.py already runs every notebook under.

A notebook that does not exist yet is a failure, never a skip.
"""
from __future__ import annotations

import json
import re

import pytest

from workbench import layouts
from workbench import notebook as nb

NB01 = nb.NOTEBOOK_DIR / "01_int8x4_packing.ipynb"
NB03 = nb.NOTEBOOK_DIR / "03_accumulator_tiles.ipynb"
MARKER = "@@WIDGET-STATE "
CELL_TIMEOUT = 300  # seconds per cell; a stuck cell fails the test instead of hanging it

# Kernel side: helpers appended as the first extra cell.  Names start with "_probe" to stay out of the way.
PROBE = r'''
import hashlib as _probe_hashlib
import io as _probe_io
import json as _probe_json
import re as _probe_re


def _probe_find(class_name, preferred="explorer"):
    """The notebook's explorer: the global `preferred` if it is a `class_name`, else the only such global."""
    g = globals()
    if type(g.get(preferred)).__name__ == class_name:
        return g[preferred]
    names = [k for k, v in g.items() if not k.startswith("_") and type(v).__name__ == class_name]
    if len(names) != 1:
        raise AssertionError(f"expected one {class_name} among the notebook's globals (named {preferred!r}), "
                             f"found {names or 'none'}")
    return g[names[0]]


def _probe_text(widget):
    """A Label / HTML / Text widget's value (or a plain string) without markup."""
    value = getattr(widget, "value", widget)
    value = _probe_re.sub(r"<br\s*/?>", "\n", str(value))
    return _probe_re.sub(r"<[^>]+>", "", value).replace("&nbsp;", " ").replace("&gt;", ">").replace("&lt;", "<")


def _probe_png(obj):
    """sha256 of a chart's PNG: an Image widget's bytes (what the explorer shows), or a Figure rendered."""
    from matplotlib.figure import Figure
    if isinstance(obj, Figure):
        buf = _probe_io.BytesIO()
        obj.savefig(buf, format="png", dpi=40)
        data = buf.getvalue()
    elif isinstance(getattr(obj, "value", None), (bytes, bytearray, memoryview)):
        data = bytes(obj.value)
    else:
        raise AssertionError(f"cannot fingerprint a chart of type {type(obj).__name__}")
    return _probe_hashlib.sha256(data).hexdigest()[:16]


def _probe_data(fig):
    """sha256 of the data a Figure's artists hold (lines, collections, patches, images, texts)."""
    import numpy as _np
    from matplotlib.collections import Collection
    from matplotlib.image import AxesImage
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.text import Text
    h = _probe_hashlib.sha256()
    for artist in fig.findobj():
        if not artist.get_visible():
            continue
        if isinstance(artist, Line2D):
            parts = [_np.asarray(artist.get_xydata(), float)]
        elif isinstance(artist, Collection):
            parts = [_np.asarray(artist.get_offsets(), float), _np.asarray(artist.get_facecolors(), float)]
            parts += [_np.asarray(p.vertices, float) for p in artist.get_paths()]
        elif isinstance(artist, Patch):
            parts = [_np.asarray(artist.get_verts(), float)]
        elif isinstance(artist, AxesImage):
            parts = [_np.asarray(artist.get_array(), float)]
        elif isinstance(artist, Text):
            parts = [artist.get_text().encode()]
        else:
            continue
        h.update(type(artist).__name__.encode())
        for p in parts:
            h.update(p if isinstance(p, bytes) else _np.round(p, 6).tobytes())
    return h.hexdigest()[:16]


def _probe_other(slider):
    """A value of `slider` different from its current one (the next one up, else the one below)."""
    if hasattr(slider, "options"):
        values = [o[1] if isinstance(o, tuple) else o for o in slider.options]
    else:
        step = slider.step or 1
        values = list(range(slider.min, slider.max + 1, step))
    i = values.index(slider.value)
    if len(values) < 2:
        raise AssertionError(f"slider {slider.description!r} has a single value {slider.value}: cannot move it")
    return values[i + 1] if i + 1 < len(values) else values[i - 1]


def _probe_shown(explorer):
    """Fingerprint of the picture an explorer shows: its Image widget if it has one, else its figure."""
    image = getattr(explorer, "image", None)
    return _probe_png(image if image is not None else explorer.figure)


def _probe_emit(tag, **state):
    print("@@WIDGET-STATE " + _probe_json.dumps({"tag": tag, **state}, default=str), flush=True)
'''


def require(path):
    if not path.exists():
        pytest.fail(f"{path.relative_to(nb.REPO)} does not exist: the widget tests need it (see DEVELOPERS.md, "
                    f"Notebooks)", pytrace=False)


def run_with_probe(path, results, cell) -> dict[str, dict]:
    """Execute `path` with FULL = False, then the probe helpers and `cell`; returns the emitted states by tag."""
    require(path)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WORKBENCH_VALIDATION", "1")  # widget moves run kernels too: the layer must stay silent
        executed = nb.execute(path, parameters={"FULL": False, "RESULTS_DIR": str(results)},
                              extra_cells=[PROBE, cell, nb.VALIDATION_CHECK_CELL], timeout=CELL_TIMEOUT)
    assert any("validation: silent" in o.get("text", "") for o in executed.cells[-1].outputs)
    states = {}
    for output in executed.cells[-2].outputs:
        if output.get("output_type") == "stream":
            for line in output.get("text", "").splitlines():
                if line.startswith(MARKER):
                    state = json.loads(line[len(MARKER):])
                    states[state["tag"]] = state
    assert states, f"the probe cell printed no state; its outputs: {executed.cells[-2].outputs}"
    return states


# ---------------------------------------------------------------------------------------------------------------------
# 03 · accumulator tiles: TileExplorer (sliders tile_m / tile_n4 / tile_k4, readout, figure)
# ---------------------------------------------------------------------------------------------------------------------

TILES_CELL = r'''
_ex = _probe_find("TileExplorer")


def _state(tag, **extra):
    _probe_emit(tag, readout=_probe_text(_ex.readout), values={k: s.value for k, s in _ex.sliders.items()},
                png=_probe_shown(_ex), data=_probe_data(_ex.figure), **extra)


_state("initial")
for _name in ("tile_n4", "tile_m"):
    _slider = _ex.sliders[_name]
    _target = _probe_other(_slider)
    _slider.value = _target
    _state(_name, target=_target)
'''


@pytest.fixture(scope="module")
def tiles(tmp_path_factory):
    return run_with_probe(NB03, tmp_path_factory.mktemp("nb03"), TILES_CELL)


def _accumulators(values) -> int:
    """int32 accumulators of one thread's tile: ivec4 out_accum[TILE_M][TILE_N4] (etvk.md §3.5)."""
    from workbench.kernels.conv_pw import conv_pw_tile_figures
    return conv_pw_tile_figures(values["tile_m"], values["tile_n4"], values.get("tile_k4", 1)).accumulators


def _says(readout: str, name: str, value) -> bool:
    return re.search(rf"\b{name}\s*[=:]\s*{re.escape(str(value))}(?![\d.])", readout, re.IGNORECASE) is not None


def _registers_occupancy(readout: str) -> str:
    """The readout's registers-and-occupancy part (from "register" up to the timing, if any)."""
    m = re.search(r"register.*?(?=, median|$)", readout, re.IGNORECASE)
    assert m and re.search("occupancy", m.group(0), re.IGNORECASE), \
        f"readout lacks registers / occupancy: {readout!r}"
    return m.group(0)


def _check_readout(state):
    """The readout names the tile (TILE_M, TILE_N4, TILE_K4) and its accumulator count, registers, occupancy."""
    readout, values = state["readout"], state["values"]
    assert {"tile_m", "tile_n4", "tile_k4"} <= set(values), values
    for name in ("tile_m", "tile_n4", "tile_k4"):
        assert _says(readout, name, values[name]), f"readout does not say {name.upper()}={values[name]}: {readout!r}"
    count = _accumulators(values)
    assert re.search(rf"\b{count} accumulators", readout), \
        f"readout does not say '{count} accumulators' for {values}: {readout!r}"
    _registers_occupancy(readout)


def test_tile_explorer_initial_readout(tiles):
    _check_readout(tiles["initial"])


@pytest.mark.parametrize("moved", ["tile_n4", "tile_m"])
def test_tile_explorer_follows_its_sliders(tiles, moved):
    before = tiles["initial"] if moved == "tile_n4" else tiles["tile_n4"]
    after = tiles[moved]
    assert after["values"][moved] == after["target"] != before["values"][moved], \
        f"slider {moved} did not move from {before['values'][moved]} to {after['target']}"
    _check_readout(after)
    assert _registers_occupancy(after["readout"]) != _registers_occupancy(before["readout"]), \
        f"registers / occupancy readout unchanged after moving {moved}: {after['readout']!r}"
    # the chart was redrawn with other data
    assert after["png"] != before["png"], f"chart image unchanged after moving {moved}"
    assert after["data"] != before["data"], f"chart data unchanged after moving {moved}"


# ---------------------------------------------------------------------------------------------------------------------
# 01 · int8x4 packing: LayoutExplorer (layout_a / layout_b dropdowns, size and element sliders, text, image, figure)
# ---------------------------------------------------------------------------------------------------------------------

LAYOUT_CELL = r'''
_ex = _probe_find("LayoutExplorer")


def _state(tag, **extra):
    _probe_emit(tag, text=_probe_text(_ex.text), layouts=[_ex.layout_a.value, _ex.layout_b.value],
                sizes=[_ex.size_sliders[k].value for k in "nchw"],
                element=[_ex.element_sliders[k].value for k in "nchw"],
                png=_probe_shown(_ex), data=_probe_data(_ex.figure), **extra)


_state("initial")
# the element picker: move c (one redraw), keeping the element inside the sizes
_target = [_ex.element_sliders[k].value for k in "nchw"]
_target[1] = (_target[1] + 3) % _ex.size_sliders["c"].value
_ex.element_sliders["c"].value = _target[1]
_state("element", target=_target)
# the left dropdown: another int8 layout
_new = "4H4W" if _ex.layout_a.value != "4H4W" else "4W"
_ex.layout_a.value = _new
_state("layout", target=_new)
'''


@pytest.fixture(scope="module")
def packing(tmp_path_factory):
    return run_with_probe(NB01, tmp_path_factory.mktemp("nb01"), LAYOUT_CELL)


LOCATION = re.compile(r"element \((?P<e>[\d, ]+)\) → word (?P<word>\d+) lane (?P<lane>\d+), "
                      r"byte address (?P<addr>\d+)")


def _check_text(state):
    """Each layout's line locates the current element where the layout definition says."""
    lines = [line for line in state["text"].splitlines() if line.strip()]
    assert len(lines) == len(state["layouts"]), f"one line per layout expected: {state['text']!r}"
    for name, line in zip(state["layouts"], lines):
        assert name in line, f"line does not name layout {name}: {line!r}"
        m = LOCATION.search(line)
        assert m, f"line is not 'element (n,c,h,w) → word W lane L, byte address B': {line!r}"
        assert [int(v) for v in m["e"].split(",")] == state["element"], (line, state["element"])
        word, lane = layouts.get_layout(name).element_to_word_lane(state["sizes"], *state["element"])
        assert (int(m["word"]), int(m["lane"])) == (word, lane), \
            f"{name} {state['sizes']} element {state['element']}: expected word {word} lane {lane}, got {line!r}"
        assert int(m["addr"]) == 4 * word + lane, line


def test_layout_explorer_initial_text(packing):
    _check_text(packing["initial"])


def test_layout_explorer_follows_element_picker(packing):
    before, after = packing["initial"], packing["element"]
    assert after["element"] == after["target"] != before["element"], (before["element"], after)
    _check_text(after)
    assert after["text"] != before["text"]
    assert after["png"] != before["png"], "the explorer still shows the old picture after the element moved"
    assert after["data"] != before["data"], "figure data unchanged after the element moved"


def test_layout_explorer_follows_layout_dropdown(packing):
    before, after = packing["element"], packing["layout"]
    assert after["layouts"][0] == after["target"] != before["layouts"][0], (before["layouts"], after["layouts"])
    assert after["element"] == before["element"]
    _check_text(after)
    assert after["text"].splitlines()[0] != before["text"].splitlines()[0]
    assert after["png"] != before["png"], "the explorer still shows the old picture after the layout changed"
    assert after["data"] != before["data"], "figure data unchanged after the layout changed"


# ---------------------------------------------------------------------------------------------------------------------
# 03 · the TileExplorer on a device that reports no registers: the vendors' compilers' figures instead
# ---------------------------------------------------------------------------------------------------------------------

SMALL_SHAPE = (1, 16, 12, 6, 10)
QUICK = dict(min_time_s=0.001, min_samples=2, target_us=50.0)


@pytest.fixture
def cpu_device(device):
    if not device.info.is_cpu:
        pytest.skip(f"needs a device without register statistics (a CPU device such as lavapipe), this is "
                    f"{device.info.name}")
    return device


def _vendor_bars(explorer):
    return [p.get_height() for ax in explorer.figure.axes for p in ax.patches if p.get_gid() == "vendor-registers"]


def test_tile_explorer_shows_a_vendor_compilers_registers_on_a_cpu_device(cpu_device, tmp_path, monkeypatch):
    from workbench.vendors import mesa, stats_cache
    from workbench.viz.tile_views import TileExplorer
    if not mesa.is_set_up():
        pytest.skip("the vendor compilers are not built here (./setup.sh compilers)")
    monkeypatch.setenv("WORKBENCH_MESA_STATS_DIR", str(tmp_path / "stats"))  # empty: the first look compiles
    start = stats_cache.counts()["compiled"]
    explorer = TileExplorer(cpu_device, shapes=[SMALL_SHAPE], **QUICK)
    try:
        m = re.search(r"registers (\d+) vec4 on a740 \(Turnip.*?, (\d+) spills, occupancy [\d.]+ % \((\d+)/16 waves",
                      explorer.readout.value)
        assert m, explorer.readout.value
        assert stats_cache.counts()["compiled"] == start + 1
        first = int(m.group(1))
        assert _vendor_bars(explorer) == [4 * first]  # vec4 → 32-bit registers on the chart's axis

        explorer.sliders["tile_n4"].value = 2  # a new setting: one compile
        assert stats_cache.counts()["compiled"] == start + 2
        bigger = int(re.search(r"registers (\d+) vec4 on a740", explorer.readout.value).group(1))
        assert bigger > first, explorer.readout.value  # 32 accumulators take more registers than 16
        explorer.sliders["tile_n4"].value = 1  # a setting seen before: from the cache, no compile
        assert stats_cache.counts()["compiled"] == start + 2
        assert f"registers {first} vec4 on a740" in explorer.readout.value

        explorer.vendor_picker.value = "mali-g610"  # the two tiles of this shape, once each
        assert stats_cache.counts()["compiled"] == start + 4
        assert re.search(r"registers (32|64) work registers on mali-g610 \(PanVK", explorer.readout.value), \
            explorer.readout.value
        assert len(_vendor_bars(explorer)) == 2
    finally:
        explorer.close()
    again = TileExplorer(cpu_device, shapes=[SMALL_SHAPE], **QUICK)  # a new explorer: still no compile
    again.close()
    assert stats_cache.counts()["compiled"] == start + 4


def test_tile_explorer_says_how_to_build_the_vendor_compilers(cpu_device, tmp_path, monkeypatch):
    from workbench.viz.tile_views import TileExplorer
    monkeypatch.setenv("WORKBENCH_MESA_DIR", str(tmp_path / "no-mesa"))
    explorer = TileExplorer(cpu_device, shapes=[SMALL_SHAPE], **QUICK)
    explorer.close()
    readout = explorer.readout.value
    assert "a740: vendor compilers not built: run ./setup.sh compilers" in readout and "\n" not in readout
    assert "registers n/a (CPU device)" in readout and "occupancy" in readout
