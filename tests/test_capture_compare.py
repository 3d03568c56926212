"""`capture compare`: the field's ops in several engines' captures side by side. CI: the labelling of each engine's
dispatches, the summary, bad input, and the table on committed capture folders (the one timing method passed in);
live: ncnn's field net captured and compared where ncnn's wheel and GFXReconstruct are present."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench.capture import CaptureError, compare
from workbench.capture.engines import field
from workbench.cli import main as cli_main
from workbench.toolchain import gfxreconstruct

DATA = Path(__file__).parent / "capture_data"


def test_each_engine_names_its_ops():
    etvk = pd.DataFrame({"dispatch": range(5), "phase": ["prepack", "execute", "execute", "execute", "execute"],
                         "variant": ["conv2d_prepack_weights_float_float", "nchw_to_image_texture3d_float_float",
                                     "conv2d_pw_tiled_float", "conv2d_dw_output_tile_3x3_float", "a|b"],
                         "kernel": ["", "", "", "", "linear_vec_bias_tile_row_1_texture3d_texture2d_float"]})
    out = compare.label(etvk, "etvk")
    assert out["op"].tolist() == ["", "conv1x1", "dwconv3x3", "linear"]   # prepacking left out, staging no op
    ncnn = pd.DataFrame({"dispatch": range(6), "submit": [3, 3, 9, 12, 12, 20], "entry_point": ["main"] * 6})
    assert compare.label(ncnn, "ncnn")["op"].tolist() == ["conv3x3", "conv3x3", "conv1x1", "dwconv3x3",
                                                          "dwconv3x3", "linear"]
    iree = pd.DataFrame({"dispatch": [0, 1], "entry_point": ["conv1x1_dispatch_0_matmul_like_64x3136x64_f32",
                                                             "mm_relu_dispatch_0_matmul_256x256x256_f32"]})
    assert compare.label(iree, "iree")["op"].tolist() == ["conv1x1", ""]


def test_summary_sums_an_ops_dispatches_and_names_the_fastest():
    rows = pd.DataFrame({"engine": ["etvk", "ncnn", "ncnn", "iree", "etvk"], "op": ["linear"] * 4 + [""],
                         "way": ["warm"] * 5, "median_us": [30.0, 10.0, 5.0, 60.0, 99.0], "dispatch": range(5),
                         "exact": [True] * 5, "bytes": [1] * 5})
    s = compare.summary(rows).set_index("engine")
    assert s.loc["ncnn", "us"] == 15 and s.loc["ncnn", "dispatches"] == 2
    assert (s["fastest"] == "ncnn").all() and s.loc["etvk", "vs_fastest"] == 2 and s.loc["iree", "vs_fastest"] == 4
    assert "ncnn 15.0 µs (1.00x)" in compare.headline(compare.summary(rows))


def test_the_table_times_each_dispatch_through_the_timer_it_is_given():
    seen = []

    def timer(device, d):
        seen.append(d.dispatch)
        return [{"way": w, "exact": True, "reason": "", "median_us": 2.0, "p10_us": 1.0, "p90_us": 3.0,
                 "GB/s": 1.5} for w in ("warm", "cold")]

    class Copies:
        def annotate(self, row, bytes_moved, regime):
            assert regime in ("hot", "cold")
            return {**row, "copy_GBps": 3.0, "copy_fraction": row["GB/s"] / 3.0}

    rows = compare.table([(DATA / "program", "iree")], timer=timer, copies=Copies(), gpus=())
    assert len(rows) == 2 * len(seen) and set(rows["way"]) == {"warm", "cold"}
    assert np.allclose(rows["copy_fraction"], 0.5) and (rows["bytes"] > 0).all()
    assert list(rows.columns[:len(compare.COLUMNS)]) == compare.COLUMNS


def test_bad_input_is_one_line(tmp_path, capsys):
    with pytest.raises(CaptureError, match="expected a capture folder"):
        compare.parse_sources([str(tmp_path)])
    with pytest.raises(CaptureError, match="expected an engine among"):
        compare.parse_sources([f"{DATA / 'program'}=tflite"])
    with pytest.raises(CaptureError, match="expected an engine among"):
        compare.parse_sources([str(DATA / "program")])   # a program written here: name its engine
    assert cli_main(["capture", "compare", str(tmp_path), "--csv", str(tmp_path / "x.csv")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected a capture folder" in err[0] and "Traceback" not in err[0]
    assert cli_main(["capture", "compare", f"{DATA / 'program'}=iree", "--ways", "hot",
                     "--csv", str(tmp_path / "x.csv")]) != 0
    assert "expected --ways among warm, cold" in capsys.readouterr().err


def test_the_field_is_the_same_everywhere():
    w = field.weights()
    x, v = field.inputs()
    want = field.reference(w, x, v)
    assert want["conv"].shape == (1, field.C_OUT, field.H, field.W) and want["linear"].shape == (1, field.FEATURES)
    assert field.max_relative_error(want["linear"], want["linear"]) == 0
    assert set(field.shapes()) == set(field.OPS) | set(field.Q4_OPS)


@pytest.mark.skipif(importlib.util.find_spec("ncnn") is None or not gfxreconstruct.is_set_up(),
                    reason="ncnn's wheel (./setup.sh peers) or GFXReconstruct (./setup.sh capture) is absent")
def test_live_ncnn_field_net_captured_and_compared(tmp_path):
    folder = tmp_path / "ncnn"
    assert cli_main(["capture", "run", "--hide-extension", "VK_KHR_push_descriptor", "--out", str(folder), "--",
                     sys.executable, "-m", "workbench.capture.engines.ncnn", "--net", "field"]) == 0
    out = tmp_path / "compare.csv"
    assert cli_main(["capture", "compare", str(folder), "--csv", str(out), "--gpus", "none", "--no-copy",
                     "--ways", "warm", "--warm-seconds", "0", "--samples", "1", "--back-to-back", "1"]) == 0
    rows = pd.read_csv(out)
    assert set(rows["op"]) == set(field.OPS) and rows["exact"].all() and (rows["median_us"] > 0).all()
