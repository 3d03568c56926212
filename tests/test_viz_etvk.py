"""workbench.viz.etvk_views: the notebooks' "ET-VK's own kernel" section. Without a checkout (CI) it must say how
to configure one; with one (WORKBENCH_EXECUTORCH set) ET-VK's real conv runs across PR #19396."""
import os

import pytest

from workbench import etvk
from workbench.vendors import mesa
from workbench.toolchain.shaders import compile_glsl
from workbench.viz import etvk_views

TRIVIAL = """#version 450
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, set = 0, binding = 0) buffer Out { uint v[]; };
void main() { v[gl_GlobalInvocationID.x] += 1u; }
"""


def test_no_checkout_prints_how_to_configure_one(monkeypatch, capsys):
    monkeypatch.delenv(etvk_views.ENV_VAR, raising=False)
    assert etvk_views.checkout() is None
    said = capsys.readouterr().out
    assert "git clone https://github.com/pytorch/executorch" in said and "WORKBENCH_EXECUTORCH=" in said
    assert "EXECUTORCH = " in said  # the notebook's parameter


def test_a_checkout_asked_for_but_broken_is_an_error(tmp_path, monkeypatch):
    monkeypatch.delenv(etvk_views.ENV_VAR, raising=False)
    with pytest.raises(etvk.CheckoutError, match="not an ExecuTorch checkout"):
        etvk_views.checkout(tmp_path)
    monkeypatch.setenv(etvk_views.ENV_VAR, str(tmp_path / "absent"))
    with pytest.raises(etvk.CheckoutError, match="does not exist"):
        etvk_views.checkout()


def test_statistics_say_where_the_driver_has_none(device):
    spirv = compile_glsl(TRIVIAL, name="etvk_views_trivial")
    stats = etvk_views.statistics(device, spirv, gpus=(740,) if mesa.is_set_up() else ())
    if device.info.features.get("pipeline_executable_properties"):
        assert stats["driver registers"] > 0
    else:
        assert stats["driver note"] == etvk_views.NO_STATISTICS
    if mesa.is_set_up():
        assert stats["a740 registers"] >= 1 and stats["a740 waves"] == 16 and stats["a740 spills"] == 0


@pytest.mark.skipif(not os.environ.get("WORKBENCH_EXECUTORCH"), reason="needs an ExecuTorch checkout "
                    "(WORKBENCH_EXECUTORCH); CI has none")
def test_pr_19396_diff_of_etvks_real_conv(device):
    diff = etvk_views.conv_pr_diff(device, None, (1, 8, 12, 4, 6))
    timed = diff[diff["compiler"] == "live device (timed)"].iloc[0]
    assert (timed["tile_n4 A"], timed["tile_n4 B"]) == (2, 1)  # the PR's change, read from each revision
    assert timed["median_us A"] > 0 and timed["median_us B"] > 0
    summary = etvk_views.pr_summary(diff)
    assert summary.startswith("PR #19396 (1ee58ed3b7^ → 1ee58ed3b7)")
    if mesa.is_set_up():
        turnip = diff[diff["compiler"] == "Turnip (ir3) a740"].iloc[0]
        assert turnip["registers B"] < turnip["registers A"] and turnip["waves B"] > turnip["waves A"], summary
    fig = etvk_views.plot_diff(diff)
    assert len(fig.axes) >= 1 and fig.axes[-1].get_title() == "GPU time (µs)"
