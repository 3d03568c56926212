"""The whole model from a capture (`capture.whatif.in_order`, `model_edit`), the edit loop's suite
(`benchmarks.capture_edit`) and an ET-VK template edit (`etvk.model.edit_confirm`), on the committed capture of ET-VK's
runtime running the residual model (tests/capture_data/etvk_residual_add, with the runner's output-0.bin) and of the
program written without the workbench (tests/capture_data/program). The tests that compile ET-VK's templates need
the checkout WORKBENCH_EXECUTORCH names and skip without one."""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench import capture
from workbench.capture import CaptureError, whatif
from workbench.capture.edit import load_shader

HERE = Path(__file__).parent
ETVK_DATA = HERE / "capture_data" / "etvk_residual_add"
DATA = HERE / "capture_data" / "program"
sys.path.insert(0, str(HERE))
import capture_program  # noqa: E402  (the captured program's GLSL)

CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set: no ExecuTorch checkout")
# the edit of docs/capture.md: q8ta_conv2d_pw's requantize rounds down (the residual model runs it 4 times)
ROUND, FLOOR = "round(float_out_texel * output_inv_scale)", "floor(float_out_texel * output_inv_scale)"


def test_in_order_reproduces_the_runners_output_byte_for_byte(device):
    result = whatif.in_order(ETVK_DATA, device=device)
    assert len(result.table) == 41 and result.table["exact"].all()
    out = result.outputs.iloc[0]
    # the runner's output comes from the last dispatch (image_to_nchw into the staging buffer it reads back)
    assert (out["dispatch"], out["binding"], out["bytes"]) == (40, "0.0", 16384)
    assert out["byte_exact"] and out["mismatches"] == 0 and out["max_abs"] == 0.0 and out["reason"] == ""
    assert result.exact
    summary = result.summary()
    assert summary[["dispatches", "dispatches_exact"]].values.tolist() == [[41, 41]]


def test_in_order_names_the_first_dispatch_that_departs_from_the_capture(device):
    found = capture.dispatches(ETVK_DATA)
    runner_output = whatif.program_outputs(ETVK_DATA)
    # the model's input as the runner uploaded it (dispatch 32, nchw_to_image, reads it from binding 0.1), changed:
    # every dispatch downstream of it departs from the capture
    d = found[32]
    b = next(c for c in d.bindings if (c.set, c.binding) == (0, 1))
    changed = np.frombuffer(b.before, np.float32).copy()
    changed[:16] += 1.0
    tampered = [dataclasses.replace(x, bindings=[dataclasses.replace(c, before=changed.tobytes()) if c is b else c
                                                 for c in x.bindings]) if x is d else x for x in found]
    result = whatif.in_order(tampered, outputs=runner_output, device=device)
    out = result.outputs.iloc[0]
    assert not out["byte_exact"] and out["mismatches"] > 0
    assert out["reason"].startswith(f"dispatch {d.dispatch} is the first whose chained output differs")
    assert not result.table.set_index("dispatch").loc[d.dispatch, "exact"]


def test_in_order_bad_input_is_one_line(device, tmp_path):
    with pytest.raises(CaptureError, match="expected the program's output files"):
        whatif.in_order(DATA, device=device)
    with pytest.raises(CaptureError, match=r"expected a dispatch writing a buffer of at least 99999999 bytes"):
        whatif.in_order(ETVK_DATA, outputs=[b"\0" * 99999999], device=device)


def _edited_scale_bias(tmp_path) -> Path:
    path = tmp_path / "scale_bias_edited.glsl"
    path.write_text(capture_program.SCALE_BIAS_GLSL.replace("bias[i % 4]", "bias[i % 3]"))
    return path


def test_model_edit_runs_only_what_the_edit_reaches_and_equals_the_full_chain(device, tmp_path):
    found = capture.dispatches(DATA)
    last = found[-1]
    output = [next(b.after for b in last.bindings if b.kind == "storage_buffer" and b.after != b.before)]
    code = load_shader(_edited_scale_bias(tmp_path), found[2])
    # dispatch 2 alone: 0 and 1 read their captured inputs with their own shaders, so they are not run
    only_last = whatif.model_edit(found, {2: code}, outputs=output, dtype=np.uint8, device=device)
    assert only_last.table["dispatch"].tolist() == [2] and only_last.totals["run"] == 1
    assert only_last.totals["over"] == "edited dispatches" and only_last.table["gpu_us_captured"].iat[0] > 0
    # the pipeline everywhere (0 and 2): 1 reads what 0 wrote, so it runs; the output equals the full chain's
    both = whatif.model_edit(found, {found[0].spirv_hash: code}, outputs=output, dtype=np.uint8, device=device)
    assert both.table["dispatch"].tolist() == [0, 1, 2] and both.table["edited"].tolist() == [True, False, True]
    assert both.table["changed"].all() and (both.table["bytes_changed"] > 0).all()
    full = whatif.chain(device, found, {0: code, 2: code})
    assert both.edited_outputs[0] == dict((f"{c.set}.{c.binding}", g) for c, g in full[2]["outputs"])["0.1"][
        :len(output[0])]
    out = both.outputs.iloc[0]
    assert not out["byte_exact"] and 0 < out["mismatches"] <= out["elements"] and out["max_abs"] > 0
    assert "binding 0.1" in both.mismatch(0) and "wrong" in both.mismatch(0)
    with pytest.raises(CaptureError, match="expected a dispatch the edited chain ran"):
        only_last.mismatch(0)


def test_model_edit_of_the_captured_shader_is_refused(device):
    found = capture.dispatches(DATA)
    with pytest.raises(CaptureError, match=r"expected swaps that change dispatches or pipelines .* none of its 3 "):
        whatif.model_edit(found, {found[0].spirv_hash: found[0].spirv}, outputs=[b"\0" * 4], device=device)


def test_output_difference_counts_elements_as_the_outputs_type():
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    b = a.copy()
    b[1] += 0.5
    d = whatif.output_difference(a.tobytes(), b.tobytes())
    assert (d["byte_exact"], d["elements"], d["mismatches"], d["max_abs"], d["argmax_same"]) == (False, 4, 1, 0.5, True)
    assert whatif.output_difference(a.tobytes(), a.tobytes())["byte_exact"]
    with pytest.raises(CaptureError, match="expected outputs of the same size, got 16 and 8 bytes"):
        whatif.output_difference(a.tobytes(), a[:2].tobytes())


def test_capture_edit_suite_without_a_capture_says_so(device, monkeypatch):
    from workbench.benchmarks import capture_edit
    monkeypatch.delenv(capture_edit.ENV_VAR, raising=False)
    frame = capture_edit.edit_suite(device, quick=True)
    assert frame["status"].tolist() == ["skipped"] and capture_edit.ENV_VAR in frame["reason"].iat[0]


def test_cli_in_order_and_what_if(device, tmp_path, capsys, monkeypatch):
    import pandas as pd
    from workbench.cli import main as cli_main
    monkeypatch.setattr("workbench.cli.capture.device", lambda args: device)
    out = tmp_path / "in_order.csv"
    assert cli_main(["capture", "in-order", str(ETVK_DATA), "--csv", str(out)]) == 0
    assert "1 of 1 outputs reproduced byte for byte" in capsys.readouterr().out
    row = pd.read_csv(out).iloc[0]
    assert row["byte_exact"] and row["dispatches"] == 41 and isinstance(row["device"], str)
    assert cli_main(["capture", "what-if", str(DATA), "--dispatch", "0", "--shader",
                     str(_edited_scale_bias(tmp_path))]) == 0
    printed = capsys.readouterr().out
    assert "2 dispatches edited, 3 run, 3 changed of 3" in printed and "binding 0.1" in printed
    assert cli_main(["capture", "what-if", str(DATA), "--dispatch", "9", "--shader",
                     str(_edited_scale_bias(tmp_path))]) == 2
    assert "expected a dispatch number 0..2, got 9" in capsys.readouterr().err


# --- an ET-VK template edited (needs the checkout and the workbench's glslc) -------------------------------------

@pytest.fixture
def edit_cache(tmp_path, monkeypatch):
    from workbench.etvk.model import edit_confirm
    monkeypatch.setenv(edit_confirm.ENV_VAR, str(tmp_path / "edits"))
    return tmp_path / "edits"


@needs_checkout
def test_a_comment_only_edit_compiles_to_the_runtimes_own_spirv(edit_cache):
    from workbench.etvk.model import capture_join, edit_confirm
    names = capture_join.variant_names(CHECKOUT)
    edit = edit_confirm.TemplateEdit.replace(CHECKOUT, "q8ta_conv2d_pw", "// Requantize to int8",
                                             "// Requantize to int8 (same code)")
    captured = {d.spirv_hash: d.spirv for d in capture.dispatches(ETVK_DATA)}
    pw = next(h for h, v in names.items() if v == "q8ta_conv2d_pw_float")
    # the folder with only the template, its YAML and the headers expands and compiles as ET-VK's build does
    assert edit.compile({"q8ta_conv2d_pw_float"}) == {"q8ta_conv2d_pw_float": captured[pw]}
    with pytest.raises(CaptureError, match="expected swaps that change"):
        whatif.model_edit(capture.dispatches(ETVK_DATA), edit.swaps(names))
    assert not (Path(CHECKOUT) / edit.template).read_text() == edit.edited  # the checkout is not touched


@needs_checkout
def test_template_edit_through_the_residual_models_capture(device, edit_cache):
    from workbench.etvk.model import capture_join, edit_confirm
    names = capture_join.variant_names(CHECKOUT)
    edit = edit_confirm.TemplateEdit.replace(CHECKOUT, "q8ta_conv2d_pw", ROUND, FLOOR)
    assert edit_confirm.edit_line(edit) == f"-{ROUND} + output_zp; +{FLOOR} + output_zp;"
    found = capture.dispatches(ETVK_DATA)
    baseline = whatif.in_order(found, outputs=whatif.program_outputs(ETVK_DATA), device=device, time_it=True)
    result = whatif.model_edit(found, edit.swaps(names), outputs=whatif.program_outputs(ETVK_DATA),
                               baseline=baseline, device=device, names=names)
    t = result.totals
    assert t["edited"] == 4 and t["over"] == "whole model" and t["gpu_us_captured"] > 0 and t["gpu_us_edited"] > 0
    # no prepacking dispatch runs again; the first edited one reads its captured inputs
    first = result.table.iloc[0]
    assert first["edited"] and not first["inputs_changed"] and first["variant"] == "q8ta_conv2d_pw_float"
    out = result.outputs.iloc[0]
    assert not out["byte_exact"] and out["mismatches"] > 0 and out["max_abs"] > 0
    # the same as replaying every dispatch with the swap (nothing skipped)
    swaps = edit.swaps(names)
    full = whatif.chain(device, found, swaps)
    assert result.edited_outputs[0] == full[-1]["outputs"][0][1][:len(result.edited_outputs[0])]


@needs_checkout
def test_template_edit_bad_input_is_one_line(edit_cache, tmp_path):
    from workbench.etvk.model import edit_confirm
    with pytest.raises(edit_confirm.EditError, match=r"expected 'no such text' in backends/vulkan/.*q8ta_conv2d_pw"):
        edit_confirm.TemplateEdit.replace(CHECKOUT, "q8ta_conv2d_pw", "no such text", "x")
    with pytest.raises(edit_confirm.EditError, match="expected a template of .* got not_a_template"):
        edit_confirm.TemplateEdit.replace(CHECKOUT, "not_a_template", "a", "b")
    with pytest.raises(edit_confirm.EditError, match="expected an edited template file, found no file"):
        edit_confirm.TemplateEdit.from_file(CHECKOUT, tmp_path / "q8ta_conv2d_pw.glsl")
    broken = edit_confirm.TemplateEdit.replace(CHECKOUT, "q8ta_conv2d_pw", ROUND, "round(undeclared_name)")
    with pytest.raises(edit_confirm.EditError, match="expected the edited .* to compile, none of its variants"):
        broken.compile()
    same = edit_confirm.TemplateEdit.replace(CHECKOUT, "q8ta_conv2d_pw", ROUND, ROUND)
    with pytest.raises(edit_confirm.EditError, match="expected a change to"):
        same.templates()


@needs_checkout
def test_capture_edit_suite_on_the_residual_capture(device, edit_cache):
    from workbench.benchmarks import capture_edit
    frame = capture_edit.edit_suite(device, quick=True, capture=ETVK_DATA, executorch=CHECKOUT, repeats=1)
    assert frame["kernel"].tolist() == ["capture read", "capture in-order baseline", "capture edit loop"]
    loop = frame.iloc[-1]
    assert loop["status"] == "ok" and loop["edited"] == 4 and loop["mismatches"] > 0 and loop["median_us"] > 0
    assert loop["compile_s"] > 0 and loop["chain_s"] > 0 and loop["variants"] == "q8ta_conv2d_pw_float"
    assert frame.iloc[1]["output_byte_exact"]
    assert {"device", "driver", "commit", "p10_us", "p90_us"} <= set(frame.columns)
