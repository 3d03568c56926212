"""ET-VK's op harness output (backends/vulkan/test/custom_ops, utils.cpp's print_summary) as rows.

tests/etvk_runtime/harness_test_q8ta_clone.txt is the head of a real run here (test_q8ta_clone built from
ExecuTorch cff6f4dd32 against its runtime, on lavapipe)."""
from pathlib import Path

import pytest

from workbench.etvk import harness

REAL = (Path(__file__).parent / "etvk_runtime" / "harness_test_q8ta_clone.txt").read_text()


def test_a_real_run_becomes_rows():
    rows = harness.parse(REAL, test="test_q8ta_clone")
    assert len(rows) == REAL.count(" μs ") and len(rows) >= 5
    first = rows.iloc[0]
    assert first["name"] == "q8ta_clone" and first["line"] == "shader"
    assert first["global_wg"] == "48x1x1" and first["local_wg"] == "64x1x1"
    assert first["case_name"].startswith("ACCU i8 [1,3,16,16]") and first["size"] == "[1x3x16x16]"
    assert first["avg_us"] > 0 and first["gflops"] > 0 and first["status"] == "PASSED"
    assert list(rows["case"]) == list(range(len(rows)))         # one line per case: each closes its case


# the layout print_summary writes for a case with two shaders (no status on the shader lines), then its operator line
TWO = [("q8ta_im2col_4w4c_with_a_very_long_name_that_g..  (32,1,1)        (64,1,1)    " + " " * 101 +
        "           3.250 μs " + " " * 32),
       ("q8ta_conv2d_float                              (8,2,4)         (8,8,1)     " + " " * 101 +
        "           9.500 μs " + " " * 32),
       ("q8ta_conv2d                                                                 ACCU_2x3x9x9" + " " * 60 +
        "         [2x3x9x9]          12.750 μs          0.812 GFLOP/s   FAILED")]


def test_multi_shader_cases_and_cut_names():
    rows = harness.parse("\n".join(TWO), variants=["q8ta_im2col_4w4c_with_a_very_long_name_that_goes_on",
                                                   "q8ta_conv2d_float"])
    assert list(rows["line"]) == ["shader", "shader", "operator"] and list(rows["case"]) == [0, 0, 0]
    # a name cut to 44 characters + ".." is resolved when exactly one variant has that prefix
    assert rows.iloc[0]["name"] == "q8ta_im2col_4w4c_with_a_very_long_name_that_goes_on"
    last = rows.iloc[2]
    assert last["status"] == "FAILED" and last["avg_us"] == pytest.approx(12.75) and last["global_wg"] == ""
    assert last["case_name"] == "ACCU_2x3x9x9" and last["size"] == "[2x3x9x9]"


def test_other_lines_are_ignored():
    assert harness.parse("Correctness validation PASSED\nOverall GFLOP/s: 3.0\n").empty


CHECKOUT = __import__("os").environ.get("WORKBENCH_EXECUTORCH")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set: the families' dispatch "
                                    "geometry comes from ET-VK's templates in a checkout")


@needs_checkout
def test_the_workbench_port_picks_the_harness_geometry():
    """Every conv case ET-VK's own harness ran on the H200 (data/NVIDIA_H200/etvk_harness.csv): the workbench's port
    of the same dispatch has the same global and local work-group sizes (the check that found 4C refused)."""
    import pandas as pd

    from workbench import etvk
    rows = pd.read_csv(Path(__file__).parents[1] / "data" / "NVIDIA_H200" / "etvk_harness.csv").fillna({"case_name": ""})
    g = harness.geometry_check(rows, etvk.Codegen(etvk.source(CHECKOUT)))
    assert len(g) >= 150 and set(g["family"]) == {"q8ta_conv2d", "q8ta_conv2d_dw", "q8ta_conv2d_pw"}
    assert g["same"].all(), g[~g["same"]].head()


@needs_checkout
@pytest.mark.parametrize("family,options", [
    ("q8ta_conv2d", dict(shape=(1, 8, 9, 11), out_channels=12, in_layout="4C", out_layout="4C")),
    ("q8ta_conv2d", dict(shape=(1, 5, 7, 6), out_channels=6, in_layout="4C", out_layout="4W4C", stride=2)),
    ("q8ta_conv2d_dw", dict(shape=(1, 8, 9, 11), in_layout="4C", out_layout="4C")),
    ("q8ta_conv2d_pw", dict(shape=(1, 16, 8, 8), out_channels=3, out_layout="4C"))])
def test_convs_on_4c_buffers_match_torch(family, options):
    """ET-VK's check reads packed dim, block sizes and the outer dim only: 4C passes it as 4C1W does."""
    from workbench import etvk, vk
    row = etvk.run(vk.get_device(), etvk.Codegen(etvk.source(CHECKOUT)), family, measure=False, **options)
    assert row["correct"] and row["max_abs_diff"] == 0
