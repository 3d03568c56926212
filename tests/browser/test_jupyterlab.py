"""The explorers work in a real JupyterLab: open the notebook, Run All Cells, move a widget with the keyboard (or
pick from a dropdown), and check that the readout and the picture follow.  Screenshots before / after go to
test-artifacts/browser/.  The server serves copies of notebooks/ (``FULL = False`` as committed); see conftest.py.
"""
from __future__ import annotations

import os
import re

import pytest
from playwright.sync_api import expect

from workbench import layouts
from workbench.kernels.conv_pw import conv_pw_tile_figures

from .conftest import CHROMIUM

pytestmark = pytest.mark.browser

NB01 = "01_int8x4_packing.ipynb"
NB03 = "03_accumulator_tiles.ipynb"


def test_chromium_installed():
    assert os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK), (
        f"Chromium not found at {CHROMIUM}: install it with `apt-get install -y chromium` "
        f"(./setup.sh test does); never `playwright install`")


def _require(lab, name):
    assert (lab.root / name).exists(), f"notebooks/{name} does not exist: the browser test needs it"


def _slider(page, scope, label: str):
    """The ipywidgets slider (IntSlider or SelectionSlider) in `scope` whose description is exactly `label`."""
    return scope.locator(".widget-slider").filter(
        has=page.locator(".widget-label", has_text=re.compile(rf"^\s*{re.escape(label)}\s*$")))


def _step(page, slider) -> tuple[str, str]:
    """Move a slider one step with the keyboard, as a keyboard user does: focus its noUiSlider handle, press
    ArrowRight (ArrowLeft when it sits at its maximum).  Returns its readout before and after."""
    handle = slider.locator(".noUi-handle").first
    readout = slider.locator(".widget-readout")
    before = readout.inner_text().strip()
    at_max = float(handle.get_attribute("aria-valuenow")) >= float(handle.get_attribute("aria-valuemax"))
    handle.focus()
    page.keyboard.press("ArrowLeft" if at_max else "ArrowRight")
    expect(readout).not_to_have_text(before, timeout=10_000)
    return before, readout.inner_text().strip()


# ---------------------------------------------------------------------------------------------------------------------
# 03 · accumulator tiles
# ---------------------------------------------------------------------------------------------------------------------

TILE_READOUT = re.compile(r"TILE_M=(\d+) TILE_N4=(\d+) TILE_K4=(\d+) → (\d+) accumulators, (registers .*?), "
                          r"(occupancy .*?), median")


def test_tile_explorer_in_jupyterlab(lab, page, artifacts):
    _require(lab, NB03)
    lab.open(page, NB03)
    lab.run_all(page, NB03)

    slider = _slider(page, page, "TILE_N4")
    slider.wait_for(state="visible")
    explorer = page.locator(".widget-vbox").filter(has=slider).last     # the explorer's own box
    readout = explorer.locator(".widget-label", has_text="accumulators")
    readout.wait_for(state="visible")
    chart = explorer.locator("img").first
    chart.wait_for(state="visible")

    before_text = readout.inner_text()
    m = TILE_READOUT.search(before_text)
    assert m, f"readout not 'TILE_M=.. TILE_N4=.. TILE_K4=.. → N accumulators, registers .., occupancy ..': " \
              f"{before_text!r}"
    tile_m, tile_n4, tile_k4 = (int(v) for v in m.groups()[:3])
    assert int(m.group(4)) == conv_pw_tile_figures(tile_m, tile_n4, tile_k4).accumulators, before_text
    assert slider.locator(".widget-readout").inner_text().strip() == str(tile_n4)
    before_image = lab.image_hash(chart)
    lab.screenshot(page, explorer, artifacts / "03_tile_explorer_before.png")

    old_n4, new_n4 = (int(v) for v in _step(page, slider))
    assert old_n4 == tile_n4 != new_n4
    expected = f"TILE_M={tile_m} TILE_N4={new_n4} TILE_K4={tile_k4} → " \
               f"{conv_pw_tile_figures(tile_m, new_n4, tile_k4).accumulators} accumulators"
    readout_now = explorer.locator(".widget-label", has_text=expected)
    readout_now.wait_for(state="visible", timeout=60_000)
    lab.wait_kernel_idle(NB03, timeout=60)
    after_image = lab.wait_image_change(chart, before_image)

    after_text = readout.inner_text()
    after = TILE_READOUT.search(after_text)
    assert after, after_text
    assert after.group(4) != m.group(4), "the accumulator count did not change"
    assert (after.group(5), after.group(6)) != (m.group(5), m.group(6)), \
        f"registers / occupancy readout unchanged: {after_text!r}"
    assert after_image != before_image
    lab.screenshot(page, explorer, artifacts / "03_tile_explorer_after.png")


# ---------------------------------------------------------------------------------------------------------------------
# 01 · int8x4 packing
# ---------------------------------------------------------------------------------------------------------------------

LOCATION = re.compile(r"(\S+): element \((\d+),(\d+),(\d+),(\d+)\) → word (\d+) lane (\d+), byte address (\d+)")


def _locations(text: str) -> list[tuple]:
    return [(name, tuple(int(v) for v in e), int(word), int(lane), int(addr))
            for name, *e, word, lane, addr in (m.groups() for m in LOCATION.finditer(text))]


def _expected(name, sizes, element):
    word, lane = layouts.get_layout(name).element_to_word_lane(sizes, *element)
    return (name, tuple(element), word, lane, 4 * word + lane)


def test_layout_explorer_in_jupyterlab(lab, page, artifacts):
    _require(lab, NB01)
    lab.open(page, NB01)
    lab.run_all(page, NB01)

    picker_row = page.locator(".widget-hbox").filter(has=page.get_by_text("element", exact=True))
    w_slider = _slider(page, picker_row, "w")
    w_slider.wait_for(state="visible")
    explorer = page.locator(".widget-vbox").filter(has=w_slider).last
    text = explorer.locator(".widget-html", has_text="byte address")
    text.wait_for(state="visible")
    chart = explorer.locator("img").first
    chart.wait_for(state="visible")
    sizes = tuple(int(_slider(page, explorer, k).locator(".widget-readout").inner_text()) for k in "NCHW")

    before = _locations(text.inner_text())
    assert len(before) == 2, f"expected one location line per layout: {text.inner_text()!r}"
    element = before[0][1]
    assert before == [_expected(name, sizes, element) for name, *_ in before]
    image0 = lab.image_hash(chart)
    lab.screenshot(page, explorer, artifacts / "01_layout_explorer_before.png")

    # the element picker: w one step, with the keyboard
    old_w, new_w = (int(v) for v in _step(page, w_slider))
    assert old_w == element[3] != new_w
    moved = element[:3] + (new_w,)
    explorer.locator(".widget-html", has_text=f"element ({','.join(map(str, moved))})").first.wait_for(
        state="visible", timeout=60_000)
    lab.wait_kernel_idle(NB01, timeout=60)
    image1 = lab.wait_image_change(chart, image0)
    after = _locations(text.inner_text())
    assert after == [_expected(name, sizes, moved) for name, *_ in before], text.inner_text()
    assert after != before
    lab.screenshot(page, explorer, artifacts / "01_layout_explorer_element.png")

    # the left dropdown: another layout
    left = explorer.locator(".widget-dropdown").filter(has=page.get_by_text("left", exact=True)).locator("select")
    new_layout = "4W" if before[0][0] != "4W" else "4C"  # small pictures: a quick redraw
    left.select_option(new_layout)
    explorer.locator(".widget-html", has_text=f"{new_layout}: element").first.wait_for(state="visible",
                                                                                      timeout=60_000)
    lab.wait_kernel_idle(NB01, timeout=60)
    image2 = lab.wait_image_change(chart, image1)
    final = _locations(text.inner_text())
    assert final == [_expected(new_layout, sizes, moved), _expected(before[1][0], sizes, moved)], text.inner_text()
    assert len({image0, image1, image2}) == 3
    lab.screenshot(page, explorer, artifacts / "01_layout_explorer_layout.png")
