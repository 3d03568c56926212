"""Roofs: the peak kernels compute what they claim, the suite's rows, the instrument check, the roofline chart."""
import numpy as np
import pandas as pd
import pytest

from workbench.kernels import peak
from workbench.viz.roofline import bandwidth_points, compute_points, roofline_figure


def test_dot_ext_and_fallback_compute_the_same(device):
    """The peak loop's result is stored: the OpSDotAccSat path and the portable fallback must agree exactly."""
    device.require("integer_dot_product")
    results = []
    for ext in (True, False):
        spec = peak.PeakSpec("int8_dot", 1024, 37, use_dot_ext=ext)
        with device.buffer(nbytes=4 * spec.threads) as out:
            peak._run(device, spec, out)
            results.append(out.download(np.int32))
    for ext in (True, False):  # OpSDot + add and its fallback: no saturation here, so both must agree too
        spec = peak.PeakSpec("int8_dot", 1024, 37, use_dot_ext=ext, saturate=False)
        with device.buffer(nbytes=4 * spec.threads) as out:
            peak._run(device, spec, out)
            results.append(out.download(np.int32))
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[2], results[3])
    assert np.unique(results[0]).size > 100  # threads really differ: nothing folded to a constant


def test_peak_spec_counts_and_errors():
    spec = peak.PeakSpec("int8_dot", 512, 10, chains=8)
    assert spec.macs() == 512 * 10 * 8 * 4
    assert peak.PeakSpec("fp32_fma", 512, 10).macs() == 512 * 10 * 8
    with pytest.raises(ValueError, match="peak kind must be one of"):
        peak.PeakSpec("tensor_core", 512, 1)
    with pytest.raises(ValueError, match="multiple of 256"):
        peak.PeakSpec("fp32_fma", 100, 1)


def test_peak_suite_quick(device):
    df = peak.bench_suite(device, quick=True, show_progress=False)
    peaks = df[df["suite"] == "peak"]
    assert set(peaks["kind"]) == {"int8_dot", "fp32_fma"} and (peaks["GOP/s"] > 0).all()
    checks = df[df["suite"] == "instrument check"]
    assert len(checks) >= 1 and checks["a_us"].gt(0).all() and checks["b_us"].gt(0).all()
    roofs = peak.roofs(df[df["suite"] == "copy"], peaks)
    assert roofs["copy_GBps"] > 0 and roofs["int8_GOPs"] > 0 and roofs["fp32_GFLOPs"] > 0


def test_roofline_figure():
    roofs = {"copy_GBps": 100.0, "int8_GOPs": 1000.0, "fp32_GFLOPs": 500.0}
    conv = pd.DataFrame({"macs": [1000, 2000], "bytes": [100, 100], "GOP/s": [10.0, 20.0], "GB/s": [1.0, 1.0],
                         "label": ["a", "b"], "kernel": ["conv", "conv"]})
    moves = pd.DataFrame({"macs": [0], "bytes": [100], "GOP/s": [np.nan], "GB/s": [50.0], "label": ["pack"],
                          "kernel": ["pack"]})
    compute, movement = compute_points([conv, moves]), bandwidth_points([conv, moves])
    assert compute["intensity"].tolist() == [20.0, 40.0] and movement["label"].tolist() == ["pack"]
    fig = roofline_figure(roofs, compute, movement, device="test")
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert " 50%" in texts  # the movement kernel's share of the copy roof
