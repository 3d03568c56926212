"""ET-VK's op harness output (backends/vulkan/test/custom_ops, utils.cpp's print_summary) as rows."""
import pytest

from workbench.etvk import harness

# the layout print_summary writes (setw widths of utils.cpp): a one-shader case, then a two-shader case
ONE = ("q8ta_conv2d_pw_float                           (4,4,16)        (4,16,1)    "
       "PERF_1x64x16x16                                                                 "
       "      1x64x16x16->64          12.345 μs          5.432 GFLOP/s   PASSED")
TWO = [("q8ta_im2col_4w4c_with_a_very_long_name_that_g..  (32,1,1)        (64,1,1)    " + " " * 80 + " " + " " * 20 +
        "           3.250 μs " + " " * 14 + "          " + " " * 8),
       ("q8ta_conv2d_float                              (8,2,4)         (8,8,1)     " + " " * 80 + " " + " " * 20 +
        "           9.500 μs " + " " * 14 + "          " + " " * 8),
       ("q8ta_conv2d                                                                 "
        "ACCU_2x3x9x9                                                                    "
        "         2x3x9x9->8          12.750 μs          0.812 GFLOP/s   FAILED")]


def test_lines_become_rows():
    rows = harness.parse("\n".join(["=== q8ta_conv2d_pw ===", ONE, *TWO, "Total cases: 2"]),
                         variants=["q8ta_im2col_4w4c_with_a_very_long_name_that_goes_on", "q8ta_conv2d_float"],
                         test="test_q8ta_conv2d")
    assert list(rows["line"]) == ["shader", "shader", "shader", "operator"]
    assert list(rows["case"]) == [0, 1, 1, 1]
    first = rows.iloc[0]
    assert first["name"] == "q8ta_conv2d_pw_float" and first["global_wg"] == "4x4x16" and first["local_wg"] == "4x16x1"
    assert first["avg_us"] == pytest.approx(12.345) and first["gflops"] == pytest.approx(5.432)
    assert first["status"] == "PASSED" and first["case_name"] == "PERF_1x64x16x16"
    # a name cut to 44 characters + ".." is resolved when exactly one variant has that prefix
    assert rows.iloc[1]["name"] == "q8ta_im2col_4w4c_with_a_very_long_name_that_goes_on"
    last = rows.iloc[3]
    assert last["status"] == "FAILED" and last["avg_us"] == pytest.approx(12.75) and last["global_wg"] == ""


def test_other_lines_are_ignored():
    assert harness.parse("Correctness validation PASSED\nOverall GFLOP/s: 3.0\n").empty
