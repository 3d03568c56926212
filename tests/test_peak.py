"""Roofs: the peak kernels compute what they claim, the suite's rows, the instrument check, the roofline chart."""
import numpy as np
import pandas as pd
import pytest

from workbench.benchmarks import peak as PK
from workbench.kernels import peak
from workbench.viz.roofline import bandwidth_points, compute_points, roofline_figure


@pytest.mark.parametrize("kind,ext,saturate", [("int8_dot", True, True), ("int8_dot", True, False),
                                                ("int8_dot", False, True), ("fp32_fma", True, True),
                                                ("fp16x2_fma", True, True)])
def test_probe_does_exactly_the_counted_work(device, kind, ext, saturate):
    """The stored result equals the host's replay of exactly iterations x UNROLL x CHAINS instructions per chain:
    a probe that did fewer (folded, hoisted, dead) or more would store something else. fp32 with mul = add = 1:
    every chain ends at its start + its fma count, a hand count."""
    if kind == "int8_dot" and ext:
        device.require("integer_dot_product")
    if kind == "fp16x2_fma":
        device.require("shader_float16")
    spec = peak.PeakSpec(kind, 512, 3, chains=4, unroll=2, local_size=64, use_dot_ext=ext, saturate=saturate)
    floats = kind != "int8_dot"
    kw = {"mul": 1.0, "add": 1.0} if floats else {}
    with device.buffer(nbytes=4 * spec.threads) as out:
        peak.run_once(device, spec, out, push=spec.push_constants(**kw))
        got = out.download(np.float32 if floats else np.int32)
    np.testing.assert_array_equal(got, peak.reference(spec, **kw))
    if floats:  # hand count: thread t, chain c (lane h) starts at (t & 255) + c (+ h) and gains 1 per fma
        t, n = np.arange(spec.threads), spec.iterations * spec.unroll
        lanes = (0, 1) if kind == "fp16x2_fma" else (0,)
        hand = sum((t & 255) + c + h + n for c in range(spec.chains) for h in lanes)
        np.testing.assert_array_equal(got, hand.astype(np.float32))
    else:
        assert np.unique(got).size > 100  # threads really differ: nothing folded to a constant


def test_peak_spec_counts_and_errors():
    spec = peak.PeakSpec("int8_dot", 512, 10, chains=8, unroll=4)
    assert spec.instructions_per_thread() == 10 * 4 * 8
    assert spec.macs() == 512 * 10 * 4 * 8 * 4  # 4 MACs per packed dot
    assert peak.PeakSpec("fp32_fma", 512, 10, chains=16, unroll=8).macs() == 512 * 10 * 8 * 16
    with pytest.raises(ValueError, match="peak kind must be one of"):
        peak.PeakSpec("tensor_core", 512, 1)
    with pytest.raises(ValueError, match="multiple of the local size 256"):
        peak.PeakSpec("fp32_fma", 100, 1)
    with pytest.raises(ValueError, match="local_size must be"):
        peak.PeakSpec("fp32_fma", 96, 1, local_size=96)


def test_shader_counts_the_instructions_it_claims():
    """The compiled probe holds CHAINS x UNROLL dot / fma instructions in its loop (glslc unrolls them)."""
    from workbench.toolchain.shaders import compile_shader
    import subprocess, shutil
    dis = shutil.which("spirv-dis")
    if not dis:
        pytest.skip("spirv-dis not installed")
    for kind, opcode in (("int8_dot", "OpSDot"), ("fp32_fma", "Fma")):
        spec = peak.PeakSpec(kind, 256, 1, chains=16, unroll=4, saturate=False)
        spv = compile_shader(spec.shader, defines=spec.defines())
        text = subprocess.run([dis, "-"], input=spv.code, capture_output=True).stdout.decode()
        assert text.count(opcode) == 16 * 4, (kind, text.count(opcode))


def test_theoretical_rates():
    from workbench.kernels.device_limits import DeviceLimits, theoretical_gops
    h200 = DeviceLimits(arch="sm_90", sm_count=132, warps_per_sm=64, clock_mhz=1980.0)
    assert h200.resident_threads == 132 * 2048
    assert theoretical_gops(h200, "fp32_fma") == pytest.approx(132 * 128 * 2 * 1.98)  # 66.9 TFLOP/s
    assert theoretical_gops(h200, "int8_dot") == pytest.approx(132 * 64 * 8 * 1.98)   # 133.8 TOP/s
    assert np.isnan(theoretical_gops(DeviceLimits(), "int8_dot"))  # unknown device: no guess


def test_peak_suite_quick(device):
    df = PK.bench_suite(device, quick=True, show_progress=False)
    peaks = df[df["suite"] == "peak"]
    fp16 = {"fp16x2_fma"} if device.info.features.get("shader_float16") else set()
    assert set(peaks["kind"]) == {"int8_dot", "fp32_fma"} | fp16 and (peaks["GOP/s"] > 0).all()
    checks = df[df["suite"] == "instrument check"]
    assert len(checks) >= 1 and checks["a_us"].gt(0).all() and checks["b_us"].gt(0).all()
    assert peaks.groupby("method")["best"].sum().eq(1).all()  # one roof per probe
    assert {"theoretical_GOPs", "probe_fraction", "limits_sm_count", "local_size", "chains"} <= set(peaks.columns)
    roofs = PK.roofs(df[df["suite"] == "copy"], peaks)
    assert roofs["copy_GBps"] > 0 and roofs["int8_GOPs"] > 0 and roofs["fp32_GFLOPs"] > 0
    assert roofs["int8_GOPs"] == max(roofs["int8_sat_GOPs"], roofs["int8_wrap_GOPs"], peaks[peaks["kind"] == "int8_dot"]["GOP/s"].max())


def test_roofline_figure():
    roofs = {"copy_GBps": 100.0, "int8_GOPs": 1000.0, "fp32_GFLOPs": 500.0}
    conv = pd.DataFrame({"macs": [1000, 2000], "bytes": [100, 100], "GOP/s": [10.0, 20.0], "GB/s": [1.0, 1.0],
                         "label": ["a", "b"], "kernel": ["conv", "conv"]})
    # 50 GB/s against a copy of the same bytes at 62.5 GB/s in its own run: 80 % of copy, not 50 % of the roof
    moves = pd.DataFrame({"macs": [0], "bytes": [100], "GOP/s": [np.nan], "GB/s": [50.0], "label": ["pack"],
                          "kernel": ["pack"], "copy_GBps": [62.5], "copy_fraction": [0.8]})
    compute, movement = compute_points([conv, moves]), bandwidth_points([conv, moves])
    assert compute["intensity"].tolist() == [20.0, 40.0] and movement["label"].tolist() == ["pack"]
    fig = roofline_figure(roofs, compute, movement, device="test")
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert " 80.0 % (50 GB/s, regime not recorded)" in texts
    assert fig.axes[0].get_title() == "roofline · test"


def _roof_folder(tmp_path, *, sat_median=100.0, sat_min=98.0):
    """A results folder with probes (OpSDotAccSat at 25 GOP/s with median / min = sat_median / sat_min, OpSDot + add
    at 60, fp32 at 50) and a cooperative-matrix probe at 500 GOP/s."""
    probe = {"kernel": "peak", "kind": "int8_dot", "macs": 10, "median_us": 100.0, "min_us": 100.0, "local_size": 64,
             "chains": 8}
    pd.DataFrame([
        {"kernel": "copy", "method": "shader uvec4", "timer": "vulkan timestamps", "size_mib": 256, "GB/s": 100.0},
        {**probe, "method": "int8 dot (OpSDotAccSat)", "GOP/s": 25.0, "median_us": sat_median, "min_us": sat_min},
        {**probe, "method": "int8 dot (OpSDotAccSat)", "GOP/s": 20.0},  # not the best: not the roof
        {**probe, "method": "int8 dot (OpSDot + add)", "GOP/s": 60.0, "min_us": 99.0},
        {**probe, "method": "fp32 fma", "kind": "fp32_fma", "GOP/s": 50.0},
    ]).to_csv(tmp_path / "peak.csv", index=False)
    pd.DataFrame([{"kernel": "coopmat peak", "method": "int8 cooperative matrix (NV)", "GOP/s": 500.0, "macs": 10,
                   "status": "ok", "median_us": 10.0, "min_us": 9.9, "shape": "-"}]).to_csv(tmp_path / "coopmat.csv", index=False)
    return tmp_path


def _conv_row(gops, saturate=True, **extra):
    return {"kernel": "q8ta_conv2d_pw", "method": "vulkan q8ta_conv2d_pw", "macs": 10, "GOP/s": gops,
            "saturate": saturate, "use_dot_ext": True, "shape": "1x8x8x8→8", "tile": "M1·N1·K1", **extra}


def test_roofline_check_uses_each_instruction_path_roof(tmp_path):
    from workbench.benchmarks import roof_check as RC
    roofs = RC.folder_roofs(_roof_folder(tmp_path))
    assert roofs.values["int8_sat_GOPs"] == 25.0 and roofs.values["int8_mma_GOPs"] == 500.0
    assert roofs.slack[RC.SAT] == pytest.approx(100 / 98) and roofs.slack[RC.WRAP] == pytest.approx(100 / 99)
    rows = pd.DataFrame([
        _conv_row(28.0),          # above the saturating roof by 12 %: the landed H200 case
        _conv_row(50.0, saturate=False),
        _conv_row(5.0, use_dot_ext=False),  # the portable fallback: int32 arithmetic
        {"kernel": "coopmat gemm", "method": "vulkan coopmat gemm", "macs": 10, "GOP/s": 300.0},
        {"kernel": "coopmat conv", "method": "vulkan coopmat conv (int8 4C in and out, fused requantize)", "macs": 10,
         "GOP/s": 300.0, "status": "ok"},  # the int8-out conv rows are checked too
        {"kernel": "coopmat gemm", "method": "torch._int_mm (cuda)", "macs": 10, "GOP/s": 900.0},  # not bounded
        {"kernel": "peak", "method": "int8 dot (OpSDot + add)", "macs": 10, "GOP/s": 60.0}])  # a probe: the roof
    checked = RC.check_rows([rows], roofs)
    assert checked["path"].tolist()[:5] == [RC.SAT, RC.WRAP, RC.INT32, RC.MMA, RC.MMA]
    assert checked["above"].tolist() == [True, False, False, False, False, False]
    assert checked["excluded"].notna().tolist() == [False] * 5 + [True]


def test_roofline_check_paths_of_the_gemv():
    """The 4-bit GEMV's rows: fp32 (and packed fp16) arithmetic, or OpSDot + add in its int8-activation build."""
    from workbench.benchmarks import roof_check as RC
    assert RC.instruction_path({"kernel": "q4_gemv", "dequant": "half2", "macs": 1}) == RC.FP32
    assert RC.instruction_path({"kernel": "q4_gemv", "dequant": "dq8", "macs": 1}) == RC.WRAP


def test_roofline_check_slack_is_the_probe_spread(tmp_path):
    """A row within the probe's measured spread (max / median = 100 / 98) passes, one just above it fails."""
    from workbench.benchmarks import roof_check as RC
    roofs = RC.folder_roofs(_roof_folder(tmp_path))
    spread = 100 / 98
    checked = RC.check_rows([pd.DataFrame([_conv_row(25.0 * spread * 0.9999), _conv_row(25.0 * spread * 1.0001),
                                           _conv_row(25.0 * 1.06)])], roofs)
    assert checked["above"].tolist() == [False, True, True]  # 1.06: the old 5 % slack let it pass
    (tmp_path / "tight").mkdir()
    tight = RC.folder_roofs(_roof_folder(tmp_path / "tight", sat_min=100.0))  # no spread measured: no slack
    assert tight.slack[RC.SAT] == 1.0
    assert RC.check_rows([pd.DataFrame([_conv_row(25.01)])], tight)["above"].tolist() == [True]


def test_roofline_check_errors_on_a_row_without_roof(tmp_path):
    from workbench.benchmarks import roof_check as RC
    roofs = RC.folder_roofs(_roof_folder(tmp_path))
    unknown = pd.DataFrame([{"kernel": "mystery", "method": "vulkan mystery", "shape": "2x2", "macs": 10,
                             "GOP/s": 1.0}])
    with pytest.raises(RC.RoofCheckError, match=r"kernel=mystery.*shape=2x2.*no instruction path"):
        RC.check_rows([unknown], roofs)
    family = pd.DataFrame([{"kernel": "new_op", "family": "new_op", "variant": "new_op_float", "macs": 10,
                            "GOP/s": 1.0}])
    with pytest.raises(RC.RoofCheckError, match="no instruction path known for family 'new_op'"):
        RC.check_rows([family], roofs)
    (tmp_path / "coopmat.csv").unlink()  # a coopmat row, and no coopmat probe in the folder
    with pytest.raises(RC.RoofCheckError, match="no int8 cooperative matrix roof"):
        RC.check_rows([pd.DataFrame([{"kernel": "coopmat conv", "method": "vulkan coopmat conv", "macs": 10,
                                      "GOP/s": 1.0}])], RC.folder_roofs(tmp_path))


def test_roofline_check_of_a_folder_reads_every_table(tmp_path):
    """Every table with compute rows is checked (ET-VK's rows by family; the chart's points are not), and a second
    set of probes with other values (a stale roofs.csv) is an error naming both files."""
    from workbench.benchmarks import roof_check as RC
    from workbench.cli.bench import roofline_check
    folder = _roof_folder(tmp_path)
    pd.DataFrame([_conv_row(20.0)]).to_csv(folder / "conv_pw.csv", index=False)
    pd.DataFrame([{"kernel": "q8ta_linear", "family": "q8ta_linear", "variant": "q8ta_linear_float", "macs": 10,
                   "GOP/s": 24.0},
                  {"kernel": "q8ta_conv2d_pw", "impl": "ET-VK", "variant": "q8ta_conv2d_pw_fallback_float",
                   "macs": 10, "GOP/s": 40.0}]).to_csv(folder / "etvk_families.csv", index=False)
    pd.DataFrame([_conv_row(999.0)]).to_csv(folder / "roofline_points.csv", index=False)  # derived: not checked
    roofs, checked = RC.check_results_dir(folder)
    assert sorted(checked["table"]) == ["conv_pw", "etvk_families", "etvk_families"]
    assert checked.set_index("variant")["path"].get("q8ta_conv2d_pw_fallback_float") == RC.FP32
    assert not checked["above"].any() and roofline_check(folder) == 0
    pd.DataFrame([_conv_row(26.0)]).to_csv(folder / "conv_gap.csv", index=False)  # 4 % above: fails now
    assert roofline_check(folder) == 1
    (folder / "conv_gap.csv").unlink()
    pd.DataFrame([{"kernel": "peak", "method": "int8 dot (OpSDotAccSat)", "GOP/s": 24.3, "macs": 10,
                   "median_us": 1.0, "min_us": 1.0}]).to_csv(folder / "roofs.csv", index=False)
    with pytest.raises(RC.RoofCheckError, match=r"two int8_sat_GOPs roofs: 25.0 in peak.csv and 24.3 in roofs.csv"):
        RC.folder_roofs(folder)
    assert roofline_check(folder) == 2


def test_quick_runs_say_they_check_no_headline(tmp_path, capsys):
    """`--quick` prints that it checks no headline figure, and every row it writes carries quick=True."""
    from workbench.measure import QUICK_NOTE
    from workbench.cli.common import quick_writer
    from workbench.measure import ResultsReader, ResultsWriter
    with ResultsWriter(tmp_path / "x") as writer:
        quick_writer(writer).append({"kernel": "k", "GOP/s": 1.0})
    assert ResultsReader(tmp_path)["x"]["quick"].tolist() == [True]
    assert "checks no headline figure" in QUICK_NOTE


def test_quick_suite_output_carries_the_label(device, tmp_path, capsys):
    from workbench.cli.bench import run_suite
    from workbench.measure import ResultsReader
    assert run_suite(device, "copy", tmp_path, quick=True) == 0
    assert "checks no headline figure" in capsys.readouterr().out
    rows = ResultsReader(tmp_path)["copy"]
    assert rows["quick"].all() and ResultsReader(tmp_path).metadata("copy")["quick"] is True


def test_filling_shapes_from_resident_threads(device):
    from workbench.benchmarks import conv as conv_bench
    from workbench.kernels.device_limits import DeviceLimits
    if device.info.is_cpu:
        assert conv_bench.filling_shapes(device) == ()
    # the rule itself, on an H200's limits: the M1·N1 tile launches >= 8 waves of 132 x 2048 threads
    device.__dict__.setdefault("_device_limits", {})
    saved = dict(device._device_limits)
    try:
        device._device_limits[True] = DeviceLimits(arch="sm_90", sm_count=132, warps_per_sm=64)
        info = device.info
        import dataclasses
        device.info = dataclasses.replace(info, device_type="discrete GPU")
        shapes = conv_bench.filling_shapes(device)
    finally:
        device.info = info
        device._device_limits.clear()
        device._device_limits.update(saved)
    assert [s[1] for s in shapes] == [256, 512]
    for n, cin, cout, h, w in shapes:
        threads = (cout // 4) * (w // 4) * n * h
        assert threads >= 8 * 132 * 2048 and (n - 1) * (cout // 4) * (w // 4) * h < 8 * 132 * 2048


def test_device_limits_shader_and_clock(device):
    """The limits shader compiles with every option (SM builtins are NVIDIA-only: compiled and validated here, run
    there); where the device has a subgroup clock the measured clock is a positive number."""
    from workbench.kernels import device_limits as dl
    from workbench.toolchain.shaders import compile_shader
    for sm in (0, 1):
        for clock in (0, 1):
            compile_shader(dl.SHADER, defines={"SM_BUILTINS": sm, "CLOCK": clock})
    found = dl.probe_shader_limits(device, groups=2, iterations=1000)
    if device.info.features.get("shader_subgroup_clock"):
        assert found["measured_clock_mhz"] > 0
    limits = dl.device_limits(device)
    assert limits.columns()["limits_resident_threads"] == limits.resident_threads


def test_goals_report(tmp_path):
    """workbench.report.goals on a hand-made results folder: conv best tile per form against its own roof, the
    cooperative-matrix probe and GEMM, pixel shuffle at the largest shape against the copy."""
    from workbench import report
    pd.DataFrame([
        {"kernel": "copy", "method": "shader uvec4", "timer": "vulkan timestamps", "size_mib": 256, "GB/s": 4000.0},
        {"kernel": "peak", "method": "int8 dot (OpSDotAccSat)", "kind": "int8_dot", "GOP/s": 40e3, "best": True,
         "local_size": 256, "chains": 16, "probe_fraction": 0.3, "theoretical_GOPs": 133e3},
        {"kernel": "peak", "method": "int8 dot (OpSDot + add)", "kind": "int8_dot", "GOP/s": 120e3, "best": True,
         "local_size": 256, "chains": 16, "probe_fraction": 0.9, "theoretical_GOPs": 133e3},
        {"kernel": "peak", "method": "fp32 fma", "kind": "fp32_fma", "GOP/s": 60e3, "best": True, "local_size": 256,
         "chains": 8, "probe_fraction": 0.9, "theoretical_GOPs": 67e3}]).to_csv(tmp_path / "peak.csv", index=False)
    pd.DataFrame([
        {"kernel": "q8ta_conv2d_pw", "method": "vulkan q8ta_conv2d_pw", "macs": 1, "GOP/s": 36e3, "saturate": True,
         "use_dot_ext": True, "tile": "M1·N2·K4", "shape": "9x256x128x128→256", "shape_kind": "fills the device"},
        {"kernel": "q8ta_conv2d_pw", "method": "vulkan q8ta_conv2d_pw", "macs": 1, "GOP/s": 84e3, "saturate": False,
         "use_dot_ext": True, "tile": "M1·N2·K4", "shape": "9x256x128x128→256", "shape_kind": "fills the device"},
    ]).to_csv(tmp_path / "conv_pw.csv", index=False)
    pd.DataFrame([
        {"kernel": "coopmat peak", "method": "int8 cooperative matrix (NV)", "GOP/s": 900e3, "status": "ok",
         "macs": 1},
        {"kernel": "coopmat gemm", "method": "vulkan coopmat gemm", "GOP/s": 500e3, "status": "ok", "macs": 1,
         "shape": "s", "tile": "RM4·RN4 shared"},
        {"kernel": "coopmat gemm", "method": "vulkan coopmat gemm", "GOP/s": 800e3, "macs": 1, "shape": "s",
         "tile": "staged [MMAs only]", "status": "diagnostic: results wrong by design"},
        {"kernel": "coopmat conv", "method": "vulkan coopmat conv", "GOP/s": 300e3, "status": "ok", "macs": 1,
         "shape": "s", "tile": "staged int8 out"}]).to_csv(tmp_path / "coopmat.csv", index=False)
    pd.DataFrame([
        {"impl": "fused", "shape": "1x256x512x512", "in_layout": "4C", "out_layout": "4C", "qpath": "passthrough",
         "variant": "v", "copy_fraction": 0.9},
        {"impl": "fused", "shape": "1x16x4x4", "in_layout": "4C", "out_layout": "4C", "qpath": "passthrough",
         "variant": "v", "copy_fraction": 0.1}]).to_csv(tmp_path / "pixel_shuffle.csv", index=False)
    table = report.goals(tmp_path).set_index("what")
    conv = table[table.index.str.startswith("conv best")]
    assert conv["measured"].round(2).tolist() == [0.9, 0.7] and conv["met"].tolist() == [True, False]
    assert not table.loc["int8 cooperative-matrix probe", "met"]  # 900 < 1,000 TOP/s
    gemm = table[table.index.str.startswith("coopmat GEMM (int32 out)")]  # the diagnostic row is no candidate
    assert gemm["measured"].round(3).tolist() == [round(500 / 900, 3)] and bool(gemm["met"].iloc[0])
    conv = table[table.index.str.startswith("coopmat conv (int8 out)")]
    assert conv["measured"].round(3).tolist() == [round(300 / 900, 3)] and not bool(conv["met"].iloc[0])
    diagnostic = table[table.index.str.contains("(diagnostic)", regex=False)]
    assert diagnostic["measured"].round(3).tolist() == [round(800 / 900, 3)] and diagnostic["met"].isna().all()
    shuffle = table[table.index.str.startswith("pixel shuffle")]
    assert len(shuffle) == 1 and shuffle["met"].tolist() == [True]  # the largest shape only


def test_goals_from_files_written_row_by_row(tmp_path):
    """Results files are written a row at a time, so columns a suite adds afterwards (peak's `best`, an older
    conv file's `shape_kind`) are not in them: the goals pick the best probe per method themselves, and take every
    conv shape besides the ET-VK-like suite's as device-filling where `shape_kind` is missing."""
    from workbench import report
    from workbench.benchmarks.conv import SUITE_SHAPES
    from workbench.kernels.conv_pw import ConvPwShape
    pd.DataFrame([
        {"kernel": "copy", "method": "copy", "GB/s": 4000.0, "macs": 0},
        {"kernel": "peak", "method": "int8 dot (OpSDot + add)", "GOP/s": 90e3, "macs": 1, "local_size": 64,
         "chains": 4},
        {"kernel": "peak", "method": "int8 dot (OpSDot + add)", "GOP/s": 100e3, "macs": 1, "local_size": 256,
         "chains": 8},
    ]).to_csv(tmp_path / "peak.csv", index=False)
    suite = ConvPwShape.coerce(SUITE_SHAPES[0]).label
    pd.DataFrame([
        {"kernel": "q8ta_conv2d_pw", "method": "vulkan q8ta_conv2d_pw", "macs": 1, "GOP/s": 95e3, "saturate": False,
         "tile": "M1·N1·K1", "shape": suite},
        {"kernel": "q8ta_conv2d_pw", "method": "vulkan q8ta_conv2d_pw", "macs": 1, "GOP/s": 70e3, "saturate": False,
         "tile": "M2·N2·K4", "shape": "5x512x128x128→512"},
    ]).to_csv(tmp_path / "conv_pw.csv", index=False)
    table = report.goals(tmp_path, roofs={"int8_wrap_GOPs": 100e3}).set_index("what")
    probe = table[table.index.str.startswith("probe int8 dot (OpSDot + add) (local")]
    assert probe["measured"].tolist() == [100e3] and "256" in probe.index[0]
    conv = table[table.index.str.startswith("conv best")]
    assert conv["measured"].round(2).tolist() == [0.7] and "5x512x128x128" in conv.index[0]


def test_conv_sweep_rows_carry_shape_kind(device):
    """The shape kind is in every row as the writer gets it, not added to the DataFrame afterwards."""
    from workbench.benchmarks import conv as conv_bench
    written = []
    writer = type("W", (), {"append": lambda self, row: written.append(dict(row))})()
    conv_bench.sweep(device, [(1, 1, 1)], [(1, 8, 8, 4, 4)], writer, show_progress=False, min_time_s=0.001,
                  min_samples=2, target_us=50.0, adreno_gpu=None, shape_kind="fills the device")
    assert written and all(r["shape_kind"] == "fills the device" for r in written)


def test_roofline_check_fails_a_row_faster_than_its_copy(tmp_path, capsys):
    """The copy check in `workbench roofline-check`: a GEMV row at 1.3x its copy (a copy timed at a cold clock)
    fails the folder; within the two measurements' noise, or a diagnostic build, it passes."""
    from workbench.cli.bench import roofline_check
    folder = _roof_folder(tmp_path)
    row = {"kernel": "q4_gemv", "impl": "workbench", "bytes": 2**21, "median_us": 10.0, "p10_us": 9.9,
           "copy_p90_us": 10.2, "copy_GBps": 2**21 / 10.0 / 1e3, "cache": "cold", "variant": "v", "shape": "1x4->4"}
    pd.DataFrame([dict(row, copy_fraction=1.02)]).to_csv(folder / "q4_gemv.csv", index=False)
    assert roofline_check(folder) == 0
    assert "no row faster than its copy" in capsys.readouterr().out
    pd.DataFrame([dict(row, copy_fraction=1.02), dict(row, copy_fraction=1.3),
                  dict(row, copy_fraction=2.1, diagnostic=2)]).to_csv(folder / "q4_gemv.csv", index=False)
    assert roofline_check(folder) == 1
    out = capsys.readouterr().out
    assert "COPY CHECK FAILED: 1 of 2 rows faster than the copy" in out and "not checked: 1 rows" in out
