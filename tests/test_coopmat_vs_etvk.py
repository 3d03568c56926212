"""The coopmat-vs-etvk suite (workbench.benchmarks.coopmat_vs_etvk): ET-VK's coopmat linear beside the workbench's
coopmat GEMM / conv and torch._int_mm at one GEMM shape.

Everywhere (CI): the refusal reason built from device properties (Hopper-like, RDNA-like and coopmat-less fakes),
PR #22899's presence read from a git history (small repositories made here), the conv → GEMM mapping, the chart.
On the device (lavapipe here: Mesa 22.3.6 lists no cooperative matrix at all, so ET-VK's rows are refused and the
workbench's skipped, each saying why; torch._int_mm runs on the CPU): the suite at M = 200 (a batch of 2 folded in,
no tile's multiple) writes every implementation's row, every row that ran is correct against torch, every row that
did not carries its reason. On a device with int8 cooperative matrices (the H200) the same test checks the
cooperative-matrix rows themselves at that awkward M:
``WORKBENCH_EXECUTORCH=… python -m pytest tests/test_coopmat_vs_etvk.py -v -rs``.
"""
import os
import subprocess
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from workbench.benchmarks import SUITES
from workbench.benchmarks import coopmat_vs_etvk as cve
from workbench.cli.bench import write_chart
from workbench.measure import ResultsReader, ResultsWriter
from workbench.viz.coopmat_vs_etvk_views import chart_rows, plot_coopmat_vs_etvk

CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
IMPLS = {"etvk", "etvk sg32", "etvk sg32_aligned", "workbench gemm", "workbench conv", "torch._int_mm"}


def _fake_device(subgroup: int, entries, name="Fake GPU"):
    rows = [{"extension": ext, "M": m, "N": n, "K": k, "A": a, "B": a, "C": c, "D": c, "scope": 3}
            for ext, m, n, k, a, c in entries]
    return SimpleNamespace(info=SimpleNamespace(name=name, driver_name="fake", subgroup_size=subgroup,
                                                features={"cooperative_matrix_khr": bool(rows)}),
                           cooperative_matrix_properties=lambda: rows)


HOPPER = [("KHR", 16, 16, 32, "sint8", "sint32"), ("KHR", 16, 8, 32, "sint8", "sint32"),
          ("KHR", 16, 16, 16, "float16", "float32"), ("KHR", 16, 16, 16, "float16", "float16"),
          ("NV", 16, 16, 32, "sint8", "sint32")]
RDNA = [("KHR", 16, 16, 16, "sint8", "sint32"), ("KHR", 16, 16, 16, "float16", "float32"),
        ("KHR", 16, 16, 16, "float16", "float16")]


def _git_repo(path, subjects):
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for i, subject in enumerate(subjects):
        (path / "f").write_text(str(i))
        subprocess.run(["git", "-C", str(path), "add", "f"], check=True)
        subprocess.run(["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m",
                        subject], check=True)
    return path


# --- machinery without a checkout or a cooperative-matrix device (CI) ---------------------------------------------
def test_refusal_on_an_h200_like_device_names_lanes_shapes_gate_and_pr(tmp_path):
    repo = _git_repo(tmp_path / "et", ["Add cooperative matrix dispatch for quantized linear (#19892)"])
    reason = cve.etvk_refusal(_fake_device(32, HOPPER, "NVIDIA H200"), None, repo)
    assert "its subgroups have 32 lanes, the tiling expects 64" in reason
    assert "int8 x int8 -> int32 sizes are ['16x16x32', '16x8x32'], not 16x16x16" in reason
    assert "device lists: KHR 16x16x32 sint8·sint8→sint32; KHR 16x8x32 sint8·sint8→sint32;" in reason
    assert "NV 16x16x32 sint8·sint8→sint32" in reason
    assert "subgroup_size() == 64 and an AMD device" in reason
    assert "PR #22899" in reason and "is not in the checkout" in reason
    # the workbench's 32-lane tilings fit it: no refusal
    assert cve.etvk_refusal(_fake_device(32, HOPPER), "sg32") is None
    assert cve.etvk_refusal(_fake_device(32, HOPPER), "sg32_aligned") is None


def test_refusal_elsewhere():
    assert cve.etvk_refusal(_fake_device(64, RDNA)) is None  # RDNA: ET-VK's own tiling runs
    sg32 = cve.etvk_refusal(_fake_device(64, RDNA), "sg32")
    assert "its subgroups have 64 lanes, the tiling expects 32" in sg32 and "PR #22899" not in sg32
    none = cve.etvk_refusal(_fake_device(8, [], "llvmpipe"))
    assert "no VK_KHR_cooperative_matrix" in none and "device lists: none" in none
    assert "no ExecuTorch checkout" in none  # checkout None: cannot tell about the PR


def test_pr_in_checkout_reads_the_history(tmp_path):
    absent = _git_repo(tmp_path / "a", ["one (#22054)", "two (#2289)", "three mentions job 22899003145"])
    present = _git_repo(tmp_path / "b", ["one (#22054)", "[Vulkan] Enable coopmat for NVIDIA devices (#22899)"])
    found, text = cve.pr_in_checkout(absent)
    assert found is False and "is not in the checkout" in text and "no commit subject names #22899" in text
    found, text = cve.pr_in_checkout(present)
    assert found is True and "is in the checkout" in text and "Enable coopmat for NVIDIA" in text
    (tmp_path / "plain").mkdir()
    found, text = cve.pr_in_checkout(tmp_path / "plain")
    assert found is None and "no git history" in text
    assert cve.pr_in_checkout(None)[0] is None


def test_gemm_shapes():
    conv = cve.GemmShape.from_conv((5, 512, 512, 128, 128))  # coopmat.csv's 5x512x128x128→512
    assert (conv.m, conv.n, conv.k) == (81920, 512, 512) and conv.origin == "conv 5x512x128x128→512"
    assert conv.label == "81920x512x512" and conv.macs == 81920 * 512 * 512
    assert cve.GemmShape(200, 64, 64).etvk_padded_m() == 256 and cve.GemmShape(1024, 64, 32).etvk_padded_m() == 1024
    assert all(s.m % 128 == 0 and s.n % 64 == 0 and s.k % 32 == 0 for s in cve.SHAPES)  # ET-VK's tile
    assert all(s.m % 128 for s in cve.QUICK_SHAPES)  # awkward on purpose
    from workbench.kernels.coopmat import CoopmatGemmSpec
    spec = CoopmatGemmSpec(cve.GemmShape(200, 64, 96).conv_shape(), (16, 16, 32), **cve.QUICK_CANDIDATES[0])
    assert spec.macs() == 200 * 64 * 96 and spec.gemm == (256, 64, 96)  # M padded to the 64-row block
    with pytest.raises(ValueError, match=r"M, N, K >= 1; given M=0"):
        cve.GemmShape(0, 64, 64)
    with pytest.raises(ValueError, match=r"\(N, Cin, Cout, H, W\); given \(1, 2, 3\)"):
        cve.GemmShape.from_conv((1, 2, 3))
    assert SUITES["coopmat-vs-etvk"] is cve.bench_suite


def _synthetic():
    rows = [dict(shape="1024x1024x1024", origin="square", impl="etvk", status="refused", reason="needs 64 lanes",
                 **{"TOP/s": np.nan}),
            dict(shape="1024x1024x1024", origin="square", impl="etvk sg32", status="ok", reason="", **{"TOP/s": 19.4}),
            dict(shape="1024x1024x1024", origin="square", impl="workbench gemm", status="ok", **{"TOP/s": 100.0}),
            dict(shape="1024x1024x1024", origin="square", impl="workbench gemm", status="ok", **{"TOP/s": 150.0}),
            dict(shape="1024x1024x1024", origin="square", impl="torch._int_mm", status="WRONG", **{"TOP/s": 90.0})]
    return pd.DataFrame(rows).assign(device="Fake GPU")


def test_chart_keeps_refused_rows_and_their_reasons():
    df = _synthetic()
    picked = chart_rows(df)
    assert len(picked) == 4
    assert picked.loc[picked["impl"] == "workbench gemm", "TOP/s"].item() == 150.0  # the best tile
    fig = plot_coopmat_vs_etvk(df)
    texts = [t.get_text() for t in fig.texts] + [t.get_text() for t in fig.axes[0].texts]
    assert any("[1] needs 64 lanes" in t for t in texts), texts
    assert any(t.startswith("refused [1]") for t in texts) and "WRONG" in texts
    with pytest.raises(ValueError, match=r"'impl' is missing"):
        plot_coopmat_vs_etvk(df.drop(columns="impl"))


# --- the suite on the device ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def quick_run(device, tmp_path_factory):
    folder = tmp_path_factory.mktemp("coopvs")
    with ResultsWriter(folder / "coopmat_vs_etvk") as writer:
        df = cve.bench_suite(device, writer, quick=True, show_progress=False, executorch=CHECKOUT)
    write_chart("coopmat-vs-etvk", df, folder / "coopmat_vs_etvk")
    return df, folder


def test_suite_rows_are_correct_or_say_why(device, quick_run):
    df, folder = quick_run
    assert set(df["impl"]) == IMPLS
    assert (df["shape"] == "200x64x64").all() and (df["M"] == 200).all()
    for row in df.to_dict("records"):
        for column in ("device", "driver", "commit", "status"):
            assert row[column], (column, row)
        if row["status"] == "ok":
            assert row["correct"] is True or row["correct"] == True, row
            assert row["mismatch"] == "exact" and row["max_abs_diff"] == 0, row
            assert np.isfinite(row["median_us"]) and row["p90_us"] >= row["p10_us"]
            assert row["ops"] == 2 * 200 * 64 * 64 and row["TOP/s"] == pytest.approx(
                row["ops"] / row["median_us"] / 1e6) and row["bytes"] > 0
        else:
            assert row["status"] in ("refused", "skipped") or row["status"].startswith("failed"), row
            assert isinstance(row["reason"], str) and len(row["reason"]) > 20, row
    torch_row = df[df["impl"] == "torch._int_mm"].iloc[0]
    assert torch_row["status"] == "ok"  # on the CPU where there is no CUDA: labelled so
    assert torch_row["method"] in ("torch._int_mm (cpu)", "torch._int_mm (cuda)")
    back = ResultsReader(folder)["coopmat_vs_etvk"]
    assert len(back) == len(df) and (folder / "coopmat_vs_etvk.png").stat().st_size > 10_000


def test_refused_row_carries_its_reason(device, quick_run):
    df, _ = quick_run
    etvk = df[df["impl"] == "etvk"].iloc[0]
    if etvk["status"] != "refused":
        pytest.skip(f"{device.info.name} runs ET-VK's own tiling ({etvk['status']})")
    reason = etvk["reason"]
    assert reason.startswith("linear_dq8ca_qw_coopmat needs VK_KHR_cooperative_matrix") and "device lists:" in reason
    assert "can_use_q4gsw_coopmat" in reason
    if CHECKOUT:
        assert "PR #22899" in reason and ("is not in the checkout" in reason or "is in the checkout" in reason)
    else:
        assert "no ExecuTorch checkout" in reason
    if device.info.subgroup_size != 64 and device.info.features.get("cooperative_matrix_khr"):
        assert f"its subgroups have {device.info.subgroup_size} lanes, the tiling expects 64" in reason


def test_cooperative_matrix_rows_at_an_awkward_m(device, quick_run):
    """Where the device has int8 cooperative matrices: ET-VK's template (at a tiling the device fits, M padded to
    128) and the workbench's GEMM and conv all ran and are exact at M = 200."""
    df, _ = quick_run
    if not device.info.features.get("cooperative_matrix_khr") and not device.info.features.get("cooperative_matrix_nv"):
        pytest.skip(f"{device.info.name} ({device.info.driver_info}) lists no cooperative matrix; run this on a "
                    "device that does (the H200)")
    wb = df[df["impl"].isin(["workbench gemm", "workbench conv"])]
    assert (wb["status"] == "ok").all() and wb["best"].sum() == 2, wb[["impl", "status", "reason"]]
    if not CHECKOUT:
        pytest.skip("WORKBENCH_EXECUTORCH is not set: ET-VK's rows need the checkout")
    ran = df[df["impl"].str.startswith("etvk") & (df["status"] != "refused")]
    assert len(ran) >= 1 and (ran["status"] == "ok").all(), ran[["impl", "status", "reason"]]
    assert ran["gemm_run"].str.startswith("256x64x64 (M padded to 128)").all()
    assert (ran["max_abs_diff"] == 0).all()  # one quant group: exact


def test_tilings_of_a_shape_share_data_and_reference(real):
    """The second tiling's Dispatch (built from the first's data) is what making it in full gives."""
    from workbench import etvk
    shape = cve.GemmShape(200, 64, 96)
    made = {}
    first = cve._etvk_dispatch(real, 256, shape, "sg32", 32, made)
    second = cve._etvk_dispatch(real, 256, shape, "sg32_aligned", 32, made)
    full = etvk.make(real, "linear_dq8ca_qw_coopmat", shape=(256, 96), out_features=64, group_size=32,
                     tiling="sg32_aligned")
    assert made["dispatch"] is first and second.variant == full.variant != first.variant
    assert second.params == full.params and second.spec_constants == full.spec_constants
    assert (second.global_size, second.local_size) == (full.global_size, full.local_size)
    assert torch_equal(second.expected, full.expected) and second.atol == full.atol
    for a, b in zip(second.resources, full.resources, strict=True):
        assert a.name == b.name and (a.data is None) == (b.data is None)
        assert a.data is None or np.array_equal(np.asarray(a.data), np.asarray(b.data)), a.name
    hopper = _fake_device(32, HOPPER)
    second.requires(hopper)  # the 32-lane tiling's check: fits a Hopper-like device, refuses an RDNA-like one
    with pytest.raises(Exception, match=r"its subgroups have 64 lanes, the tiling expects 32"):
        second.requires(_fake_device(64, RDNA))


def torch_equal(a, b) -> bool:
    import torch
    return bool(torch.equal(a, b))
