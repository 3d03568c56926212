"""Notebook 07's pieces: the capture views (timeline, edit, what-if, the dispatch picker), the shader texts of a
captured pipeline (`capture.sources`) and the in-order what-if (`capture.whatif`) on the committed capture of
tests/capture_program.py."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from workbench import capture
from workbench.capture import CaptureError, sources, whatif
from workbench.viz import capture_views as views

HERE = Path(__file__).parent
DATA = HERE / "capture_data" / "program"
sys.path.insert(0, str(HERE))
import capture_program  # noqa: E402  (the captured program's GLSL)

DEVICE = "Test GPU 9000"


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"dispatch": [0, 1, 2, 3], "pipeline": ["aa", "bb", "aa", "cc"],
                         "label": ["scale_bias", "mix", "scale_bias", "pack"],
                         "gpu_us_median": [5.0, 2.0, 4.0, 1.0], "device": DEVICE,
                         "groups": [(2, 1, 1), (4, 1, 1), (2, 1, 1), (1, 1, 1)],
                         "local_size": [(64, 1, 1), (32, 1, 1), (64, 1, 1), (8, 8, 1)],
                         "spec_constants": ["0=64, 1=1, 2=1, 3=3", "0=2", "0=64, 1=1, 2=1, 3=3", ""],
                         "push_constants": ["8000000005000000", "80000000", "80000000f7ffffff", ""],
                         "push_bytes": [8, 4, 8, 0], "entry_point": "main",
                         "bindings": ["0.0 storage_buffer 512 B; 0.1 storage_buffer 512 B; 0.2 uniform_buffer 16 B",
                                      "0.0 storage_buffer 512 B; 0.1 storage_buffer 512 B",
                                      "0.0 storage_buffer 512 B; 0.1 storage_buffer 512 B; 0.2 uniform_buffer 16 B",
                                      "0.0 storage_image r32f 8x8"]})


def _legend_colors(ax) -> dict:
    legend = ax.get_legend()
    return {text.get_text(): to_rgba(handle.get_facecolor())
            for text, handle in zip(legend.get_texts(), legend.legend_handles)}


def test_timeline_bars_take_their_pipelines_legend_colour_and_the_title_names_the_device():
    frame = _frame()
    fig = views.plot_timeline(frame)
    ax = fig.axes[0]
    legend = _legend_colors(ax)
    assert list(legend) == ["scale_bias", "mix", "pack"]
    bars = ax.patches
    assert len(bars) == 4
    for bar, label in zip(bars, frame["label"]):
        assert to_rgba(bar.get_facecolor()) == legend[label]
    assert [b.get_height() for b in bars] == [5.0, 2.0, 4.0, 1.0]
    assert DEVICE in ax.get_title() and "4 dispatches, 3 pipelines, 12.0 µs" in ax.get_title()
    assert "µs" in ax.get_ylabel()
    # without a device column the argument names it; the selected bar is outlined
    fig = views.plot_timeline(frame.drop(columns="device"), device="Other GPU", selected=2)
    assert "Other GPU" in fig.axes[0].get_title()
    widths = [b.get_linewidth() for b in fig.axes[0].patches]
    assert widths[2] > max(widths[:2] + widths[3:])


def test_pipelines_without_a_label_are_named_by_variant_else_hash():
    frame = _frame().drop(columns="label").assign(variant=["conv_pw", "", "conv_pw", ""])
    assert views.pipeline_labels(frame) == ["conv_pw", "bb", "conv_pw", "cc"]


def test_word_map_marks_the_words_that_differ_and_pads_the_last_row():
    old = np.arange(40, dtype=np.int32).tobytes()
    new = np.arange(40, dtype=np.int32)
    new[[3, 33]] += 1
    grid = views.word_map(old, new.tobytes(), per_row=32)
    assert grid.shape == (2, 32)
    assert grid[0, 3] == 1 and grid[1, 1] == 1 and (grid == 1).sum() == 2
    assert (grid[1, 8:] == -1).all()


def test_whatif_view_colours_each_state_as_its_legend_says():
    table = pd.DataFrame({"dispatch": [0, 1, 2, 3], "edited": [True, False, False, False],
                          "changed": [True, True, False, False], "inputs_changed": [False, True, True, False],
                          "reason": ["", "", "", ""], "device": DEVICE})
    fig = views.plot_whatif(table)
    ax = fig.axes[0]
    legend = _legend_colors(ax)
    states = ["edited", "output changed", "inputs changed, output not", "unchanged"]
    assert list(legend) == states
    assert [to_rgba(b.get_facecolor()) for b in ax.patches] == [legend[s] for s in states]
    assert DEVICE in ax.get_title() and "1 later dispatch compute otherwise" in ax.get_title()


def test_dispatch_explorer_readout_follows_the_selection():
    pytest.importorskip("ipywidgets")
    texts = {"aa": ("void main() {}", "; SPIR-V\nOpEntryPoint GLCompute %main \"main\""), "bb": (None, "; SPIR-V")}
    explorer = views.DispatchExplorer(_frame(), texts, device=DEVICE)
    first = explorer.readout.value
    assert "dispatch 0 " in first and "groups (2, 1, 1) × local size (64, 1, 1)" in first
    assert "0.2 uniform_buffer 16 B" in first and "3=3" in first
    assert "void main()" in explorer.source.value and "OpEntryPoint" in explorer.source.value
    explorer.sliders["dispatch"].value = 1
    second = explorer.readout.value
    assert second != first and "dispatch 1 " in second and "local size (32, 1, 1)" in second
    assert "0=2" in second and "not known" in explorer.source.value
    assert explorer.image.value  # the timeline, redrawn with dispatch 1 outlined
    widths = [b.get_linewidth() for b in explorer.figure.axes[0].patches]
    assert widths.index(max(widths)) == 1


def test_sources_name_the_committed_pipelines_and_disassemble_them():
    found = capture.dispatches(DATA)
    known = sources.match(found, {"scale_bias": capture_program.SCALE_BIAS_GLSL, "mix": capture_program.MIX_GLSL})
    assert {found[0].spirv_hash: "scale_bias", found[1].spirv_hash: "mix"} == {h: s.name for h, s in known.items()}
    assert known[found[1].spirv_hash].glsl == capture_program.MIX_GLSL
    # only the interface tells mix from a shader that binds the same way but names its blocks otherwise
    other = capture_program.MIX_GLSL.replace("buffer C {", "buffer D {")
    assert sources.match(found, {"other": other}) == {}
    text = sources.disassemble(found[1].spirv)
    assert "OpEntryPoint GLCompute" in text and "LocalSize 32 1 1" in text
    with pytest.raises(CaptureError, match="expected SPIR-V that spirv-dis reads") as info:
        sources.disassemble(b"\x03\x02\x23\x07")
    assert "\n" not in str(info.value)


def _edited(tmp_path) -> Path:
    path = tmp_path / "scale_bias_edited.glsl"
    path.write_text(capture_program.SCALE_BIAS_GLSL.replace("bias[i % 4]", "bias[i % 3]"))
    return path


def test_whatif_shows_which_later_dispatches_an_edit_reaches(device, tmp_path):
    shader = _edited(tmp_path)
    first = whatif.whatif(DATA, 0, shader, device=device)
    t = first.table
    assert t["exact"].all()  # the chain with the captured shaders is the capture
    assert list(t["edited"]) == [True, False, False]
    assert list(t["inputs_changed"]) == [False, True, True] and list(t["changed"]) == [True, True, True]
    label, old, new = first.outputs[0][0]
    assert label == "0.1" and old == capture.dispatches(DATA)[0].bindings[1].after and new != old
    # the last dispatch edited: nothing before it changes
    last = whatif.whatif(DATA, 2, shader, device=device).table
    assert list(last["changed"]) == [False, False, True] and not last["inputs_changed"].any()
    # the pipeline everywhere: dispatches 0 and 2 run the edit
    both = whatif.whatif(DATA, 0, shader, pipeline=True, device=device).table
    assert list(both["edited"]) == [True, False, True]
    # the same shader swapped in changes nothing
    same = tmp_path / "same.glsl"
    same.write_text(capture_program.SCALE_BIAS_GLSL)
    assert not whatif.whatif(DATA, 0, same, device=device).table["changed"].any()


def test_whatif_bad_input_is_one_line(device, tmp_path):
    with pytest.raises(CaptureError, match=r"expected a dispatch number 0..2, got 7"):
        whatif.whatif(DATA, 7, _edited(tmp_path), device=device)
    with pytest.raises(CaptureError, match="expected a shader file"):
        whatif.whatif(DATA, 0, tmp_path / "missing.glsl", device=device)


def test_engines_side_by_side_chart():
    """`plot_compare`: a panel per way, a bar per engine and op, each bar's ratio to the fastest written on it (the
    committed H200 summary of `capture compare`)."""
    summary = pd.read_csv(Path(__file__).parents[1] / "data" / "NVIDIA_H200" / "capture_compare_summary.csv")
    fig = views.plot_compare(summary, device="NVIDIA H200")
    axes = fig.axes
    assert len(axes) == 2 and [a.get_title().split(",")[1].split("·")[0].strip() for a in axes] == ["warm", "cold"]
    labels = {t.get_text() for t in axes[0].texts}
    assert "1x" in labels and len(axes[0].patches) == len(set(summary["op"])) * len(set(summary["engine"]))
