"""`workbench ab`: interleaved A/B timing on lavapipe (workbench.measure.ab, workbench.etvk.ab, the CLI, the chart).

The statistical tests are made robust by the work, not by a timing threshold: B runs 4x A's loop (each dispatch
milliseconds on lavapipe), so its interval lies far above 1; A against A must give an interval holding 1."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench.cli import main as cli_main
from workbench.etvk import ab
from workbench.measure import ab as mab

HERE = Path(__file__).parent
LOOP, LOOP4 = HERE / "shaders" / "ab_loop.glsl", HERE / "shaders" / "ab_loop_4x.glsl"
CAPTURE = HERE / "capture_data" / "program"
COUNT = 2048
FILES = dict(groups=(COUNT // 64, 1, 1), push=[1500, COUNT], nbytes=4 * COUNT)


def test_ratio_interval_and_verdict_on_known_samples():
    rng = np.random.default_rng(1)
    a = rng.normal(100, 3, 60)
    ratio, lo, hi = mab.ratio_ci(a, 1.2 * a + rng.normal(0, 3, 60))
    assert 1.1 < lo < ratio < hi < 1.3
    assert mab.verdict(ratio, lo, hi).startswith("B slower by 19.6 % [")
    assert mab.verdict(0.8, 0.75, 0.85) == "B faster by 20.0 % [15.0, 25.0]"
    assert mab.verdict(1.01, 0.97, 1.04).startswith("no difference within noise")
    with pytest.raises(ValueError, match="at least 2 samples"):
        mab.ratio_ci([1.0], [1.0, 2.0])


def test_a_sample_holds_enough_gpu_time_on_a_gpu():
    """On a GPU a sample records a side's dispatch back to back until it holds SAMPLE_US (a lone 50 µs dispatch per
    submit left an H200 at its idle clock); one on CPU devices or where the time is unknown."""
    from types import SimpleNamespace
    gpu = SimpleNamespace(info=SimpleNamespace(is_cpu=False))
    cpu = SimpleNamespace(info=SimpleNamespace(is_cpu=True))
    assert mab.repeats_for(gpu, 50e3) == 40 and mab.repeats_for(gpu, 1e3) == mab.MAX_REPEATS
    assert mab.repeats_for(gpu, 5e6) == 1 and mab.repeats_for(gpu, 0.0) == 1 and mab.repeats_for(cpu, 50e3) == 1


def test_four_times_the_loop_is_slower_in_both_interleavings(device):
    got = ab.compare(device, str(LOOP), str(LOOP4), regimes="hot", modes=("submits", "command"), **FILES)
    assert got.same_output == "" and got.checks == {"A": "", "B": ""}
    s = got.summary
    assert list(s["interleave"]) == ["submits", "command"]
    assert (s["ci_lo"] > 1).all(), s[["ratio", "ci_lo", "ci_hi"]]
    assert all(v.startswith("B slower by") for v in s["verdict"])
    samples = got.frame[got.frame["row"] == "sample"]
    for _, d in samples.groupby("interleave"):  # A B A B …
        assert list(d["side"][:4]) == ["A", "B", "A", "B"] and list(d["order"]) == list(range(len(d)))
    assert samples["clock_mhz"].isna().all()  # lavapipe has no clock source: NaN, and the summary says so
    assert "no clock source" in s["clock_note"].iloc[0]


def test_a_against_itself_is_no_difference(device):
    got = ab.compare(device, str(LOOP), str(LOOP), regimes="hot", min_pairs=40, **FILES)
    row = got.summary.iloc[0]
    assert row["ci_lo"] <= 1 <= row["ci_hi"], row[["ratio", "ci_lo", "ci_hi"]]
    assert row["verdict"].startswith("no difference within noise")


def test_cold_rotates_a_set_per_dispatch(device, monkeypatch):
    monkeypatch.setenv("WORKBENCH_LLC_BYTES", str(16 * COUNT))  # a test's small rotation: 8 sets of 16 KiB
    got = ab.compare(device, str(LOOP), str(LOOP4), regimes="cold", min_pairs=6, min_time_s=0.05,
                     **{**FILES, "push": [100, COUNT]})
    s = got.summary.iloc[0]
    assert s["cache"] == "cold" and s["cache_copies"] >= 2 and s["dispatches_per_sample"] == s["cache_copies"]
    assert s["ci_lo"] > 1


def test_a_captured_dispatch_against_its_edit(device, tmp_path):
    import sys
    sys.path.insert(0, str(HERE))
    import capture_program
    edited = tmp_path / "mix_edit.glsl"
    edited.write_text(capture_program.MIX_GLSL.replace(">> SHIFT", ">> (SHIFT + 1u)"))
    same = tmp_path / "mix.glsl"
    same.write_text(capture_program.MIX_GLSL)
    got = ab.compare(device, f"{CAPTURE}:1", shader=str(same), regimes="hot", min_pairs=4, min_time_s=0.01)
    assert got.same_output == "" and got.checks == {"A": "", "B": ""}
    got = ab.compare(device, f"{CAPTURE}:1", str(edited), regimes="hot", min_pairs=4, min_time_s=0.01)
    assert got.same_output.startswith("A and B differ at binding") and got.checks["A"] == ""
    assert got.checks["B"].startswith("differs from the captured output")


def test_two_revisions_of_a_file(device):
    got = ab.compare(device, "shaders/copy.glsl@HEAD", "shaders/copy.glsl", regimes="hot", min_pairs=4,
                     min_time_s=0.01, groups=(4, 1, 1), push=[256], nbytes=4096)
    assert got.frame["A"].iloc[0] == "shaders/copy.glsl@HEAD" and got.same_output == ""


def test_cli_prints_the_verdict_and_writes_csv(tmp_path, capsys):
    out = tmp_path / "ab.csv"
    code = cli_main(["ab", str(LOOP), str(LOOP4), "--groups", str(COUNT // 64), "--push", f"1500,{COUNT}",
                     "--bytes", str(4 * COUNT), "--cache", "hot", "--gpu", "none", "--csv", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "verdict: hot, submits: B slower by" in text and "no clock source" in text
    import pandas as pd
    frame = pd.read_csv(out)
    assert set(frame["row"]) == {"sample", "summary"}
    assert {"order", "side", "us", "clock_mhz", "t_s"} <= set(frame.columns)
    samples = frame[frame["row"] == "sample"]
    assert (samples["t_s"].diff().dropna() >= 0).all()  # the seconds each sample ended at, in the order run
    from workbench.viz.ab_views import ab_chart
    fig = ab_chart(frame)
    assert len(fig.axes) == 2  # no clock (lavapipe): no clock axis, the panel says why
    assert any("no SM clock" in t.get_text() for t in fig.axes[0].texts)
    clocked = frame.assign(clock_mhz=frame["clock_mhz"].fillna(1980.0))
    assert len(ab_chart(clocked).axes) == 3  # the SM clock on a second axis of the samples' panel


@pytest.mark.parametrize("argv, expected", [
    (["ab", "no_such.glsl", str(LOOP), "--groups", "1"], "found no file no_such.glsl"),
    (["ab", str(LOOP), str(HERE / "shaders" / "spin.glsl"), "--groups", "1", "--gpu", "none"],
     "expected B to bind A's interface"),
    (["ab", str(LOOP), str(LOOP4), "--groups", "1", "--gpu", "mali-g9999"], "unknown GPU 'mali-g9999'"),
    (["ab", str(LOOP), str(LOOP4), "--gpu", "none"], "expected --groups"),
    (["ab", str(LOOP), str(LOOP4), "--groups", "1", "--interleave", "sideways"], "expected interleavings"),
    (["ab", str(LOOP), "--shader", str(LOOP4), "--groups", "1"], "expected A as DIR:N"),
    (["ab", str(LOOP) + "@no-such-rev", str(LOOP), "--groups", "1"], "at git revision 'no-such-rev'"),
    (["ab", "q4-gemv:n=64", "q4-gemv:n=64,k=64", "--gpu", "none"], "expected q4-gemv:n=N,k=K"),
    (["ab", "q4-gemv:n=64,k=64,tile=3", "q4-gemv:n=64,k=64", "--gpu", "none"], "got unknown tile"),
    (["ab", "q4-gemv:n=64,k=64,vec=3", "q4-gemv:n=64,k=64", "--gpu", "none"], "vec"),
])
def test_bad_input_is_one_line(argv, expected, capsys):
    assert cli_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and len(err.splitlines()) == 1, err


def test_the_isas_beside(device):
    from workbench.vendors import mesa
    if not mesa.is_set_up():
        pytest.skip("the offline compilers are not built (workbench compilers setup)")
    got = ab.compare(device, str(LOOP), str(LOOP4), regimes="hot", gpus=("a740",), min_pairs=4, min_time_s=0.01,
                     **{**FILES, "push": [10, COUNT]})
    isa = got.isa.set_index("side")
    assert list(isa.index) == ["A", "B"] and (isa["gpu"] == "a740").all() and isa["error"].isna().all()
    assert (isa["instructions"] > 0).all() and isa.loc["A", "loads"] == isa.loc["B", "loads"] == 1
    assert (isa["registers"] > 0).all() and (isa["occupancy"] > 0).all()


def test_two_builds_of_the_workbench_gemv(device):
    """q4-gemv sides: the workbench's own GEMV at two points of its tuning space, on one seeded problem, each
    checked against the float64 reference; their outputs differ only by summation order."""
    got = ab.compare(device, "q4-gemv:n=128,k=256,vec=1", "q4-gemv:n=128,k=256,vec=4", regimes="hot", min_pairs=4,
                     min_time_s=0.01)
    assert got.checks == {"A": "", "B": ""}, got.checks
    assert got.same_output == "" or "max |diff|" in got.same_output
    assert got.summary["pairs"].iloc[0] >= 4


def test_phone_predictions_beside_the_isas(device):
    from workbench.vendors import mesa
    if not mesa.is_set_up():
        pytest.skip("the offline compilers are not built (workbench compilers setup)")
    got = ab.compare(device, "q4-gemv:n=128,k=256,vec=1", "q4-gemv:n=128,k=256,vec=4", regimes="hot",
                     gpus=("a740", "mali-g610"), min_pairs=4, min_time_s=0.01)
    isa = got.isa
    assert {"phone_us", "phone_bound"} <= set(isa.columns) and (isa["phone_us"] > 0).all()
    assert set(isa["gpu"]) == {"a740", "mali-g610"} and isa["phone_bound"].str.len().gt(0).all()
    from workbench.viz.ab_views import ab_chart
    assert len(ab_chart(got.frame, isa).axes) == 3  # samples, ratio, the phones' predictions
    # a captured dispatch's pipeline job has its spec constants decoded (raw words once broke the statistics cache)
    got = ab.compare(device, f"{CAPTURE}:1", f"{CAPTURE}:1", regimes="hot", gpus=("a740",), min_pairs=4,
                     min_time_s=0.01)
    assert got.isa["error"].isna().all() and (got.isa["phone_us"] > 0).all()


def test_two_settings_of_an_etvk_family(device):
    import os
    if not os.environ.get("WORKBENCH_EXECUTORCH"):
        pytest.skip("needs an ExecuTorch checkout ($WORKBENCH_EXECUTORCH)")
    got = ab.compare(device, "linear_q4gsw_coop:weight_storage=buffer", "linear_q4gsw_coop:weight_storage=texture2d",
                     regimes="hot", min_pairs=4, min_time_s=0.01)
    assert got.checks == {"A": "", "B": ""}, got.checks  # each against torch
    assert got.same_output == ""  # the same NCHW output from the two weight storages
    with pytest.raises(ValueError, match="unexpected keyword argument"):
        ab.compare(device, "linear_q4gsw_coop:no_such=1", "linear_q4gsw_coop")
    # #12444: the weight words read as u8vec4 (ET-VK's block layout) give the same bytes as ET-VK's ivec4 load
    base = "linear_q4gsw_coop:shape=1x256,out_features=64,weight_storage=buffer"
    got = ab.compare(device, base, base + ",weight_load=u8vec4", regimes="hot", min_pairs=4, min_time_s=0.01)
    assert got.checks == {"A": "", "B": ""} and got.same_output == "", (got.checks, got.same_output)
    assert got.frame["B"].iloc[0].endswith("weight_load=u8vec4")
    with pytest.raises(ValueError, match="expected weight_load among ivec4, u8vec4"):
        ab.compare(device, base, base + ",weight_load=u8")
