"""The charts say what their data says: legend colours are the bars' colours, the roofline's data-movement panel is
each kernel's copy_fraction (the copy of the same bytes in the same run), every chart of measurements names its
device; and progress counters reach N of N."""
import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from workbench.etvk.model.profile import Profile
from workbench.measure import REPO
from workbench.viz import affine_views, coopmat_vs_etvk_views, device_views, etvk_views, pixel_shuffle_views
from workbench.viz import roofline, runtime_views, tune_views
from workbench.viz.titles import device_names, with_device

DEVICE = "Test GPU 9000"
H200 = REPO / "data" / "NVIDIA_H200"


def _profile(revisions=("working tree",)) -> Profile:
    ops = ["quantize_per_tensor", "q8ta_conv2d_pw", "q8ta_conv2d_pw", "q8ta_add", "dequantize_per_tensor"]
    rows = [{"revision": rev, "dispatch_id": i, "operator": op, "kernel": f"{op}_texture3d",
             "gpu_us": 1.0 + i + 2 * j, "device": DEVICE}
            for j, rev in enumerate(revisions) for i, op in enumerate(ops)]
    dispatches = pd.DataFrame(rows)
    kernels = (dispatches.groupby(["revision", "kernel"], sort=False)
               .agg(dispatches=("gpu_us", "size"), gpu_us=("gpu_us", "sum")).reset_index())
    return Profile("toy", dispatches, pd.DataFrame(), kernels, pd.DataFrame())


def test_dispatch_legend_colours_are_the_bar_colours():
    p = _profile()
    ax = runtime_views.plot_dispatches(p).axes[0]
    legend = {t.get_text(): to_rgba(h.get_facecolor())
              for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    assert sorted(legend) == sorted(p.dispatches["operator"].unique())
    bars = [to_rgba(b.get_facecolor()) for b in ax.patches]
    assert len(bars) == len(p.dispatches)
    for colour, op in zip(bars, p.dispatches.sort_values("dispatch_id")["operator"]):
        assert colour == legend[op], op
    assert len(set(legend.values())) == len(legend)  # one colour per operator, not one blue for all


def _movement():
    # one label measured at two traffics: the small one runs from the cache (a copy_fraction above 1 says nothing);
    # the panel shows each label at its largest bytes, never GB/s over the peak copy (copy_GBps of `roofs`)
    return pd.DataFrame({
        "label": ["block a", "block a", "fused b", "torch c"], "kernel": ["k", "k", "k", "torch"],
        "macs": 0, "bytes": [1 << 10, 1 << 27, 1 << 27, 1 << 27], "GB/s": [80.0, 900.0, 700.0, 400.0],
        "copy_fraction": [1.2, 0.95, 0.75, np.nan], "table": ["t1", "t1", "t2", "t2"], "device": DEVICE,
        "cache": ["hot", "cold", None, None]})


def test_roofline_panel_is_copy_fraction_at_the_largest_traffic():
    roofs = {"copy_GBps": 2000.0, "int8_GOPs": 1e4, "fp32_GFLOPs": 5e3}
    fig = roofline.roofline_figure(roofs, pd.DataFrame(), roofline.bandwidth_points([_movement()]))
    ax, bx = fig.axes
    widths = [b.get_width() for b in bx.patches]
    assert widths == pytest.approx([95.0, 75.0])  # not 900 / 2000 = 45 %, not the cached 120 %
    assert [t.get_text() for t in bx.get_yticklabels()] == ["block a", "fused b"]
    texts = [t.get_text() for t in bx.texts]
    assert " 95.0 % (900 GB/s, t1, cold)" in texts and any("1 rows without a copy" in t for t in texts)
    assert " 75.0 % (700 GB/s, t2, regime not recorded)" in texts      # each bar says its cache regime
    assert "copy_fraction" not in bx.get_xlabel() and "% of copy" in bx.get_xlabel()
    assert ax.get_title() == f"roofline · {DEVICE}"  # from the rows' device column: no dangling dash


def test_committed_roofline_panel_shows_the_best_pixel_shuffle_against_its_copy():
    if not (H200 / "pixel_shuffle_gaps.csv").is_file():
        pytest.skip("the committed H200 folder is not here")
    from workbench.benchmarks.roof_check import folder_roofs
    fig = roofline.folder_figure(H200, folder_roofs(H200).values)
    ax, bx = fig.axes
    gaps = pd.read_csv(H200 / "pixel_shuffle_gaps.csv")
    best = gaps[gaps["impl"] == "block"]["copy_fraction"].max()
    assert bx.patches[0].get_width() == pytest.approx(100 * best)  # the README's 98.7 %, not 83 % of peak copy
    assert ax.get_title() == "roofline · NVIDIA H200"


def test_titles_name_the_device():
    p = _profile(("A", "B"))
    one = Profile("toy", p.dispatches[p.dispatches["revision"] == "A"], pd.DataFrame(), p.kernels, pd.DataFrame())
    fidelity = pd.DataFrame({"family": ["q8ta_add", "q8ta_add"], "ratio": [1.0, 1.05], "timestamps": ["etvk"] * 2,
                             "device": DEVICE})
    side = pd.DataFrame({"shape": ["1x8x8x8"] * 2, "implementation": ["ET-VK x", "workbench y"],
                         "median_us": [2.0, 1.0], "device": DEVICE})
    diff = pd.DataFrame({"kernel": ["q8ta_conv2d_pw"], "compiler": ["live device (timed)"], "rev A": ["a"],
                         "rev B": ["b"], "median_us A": [2.0], "median_us B": [1.0], "device": [DEVICE]})
    trials = pd.DataFrame({"device_key": ["gpu"] * 3, "state": ["complete"] * 3, "evaluations": [1, 2, 3],
                           "best_so_far_us": [3.0, 2.0, 2.0], "device": DEVICE})
    throughput = pd.DataFrame({"op": ["quantize"], "storage": ["buffer"], "layout": ["WIDTH_PACKED"],
                               "granularity": ["per_tensor"], "GB/s": [10.0], "copy_GBps": [12.0],
                               "shader_copy_GBps": [11.0], "device": [DEVICE]})
    titles = {
        "operators": runtime_views.plot_operator_kernels(one).axes[0].get_title(),
        "dispatches": runtime_views.plot_dispatches(one).axes[0].get_title(),
        "a/b": runtime_views.plot_ab(p).axes[0].get_title(),
        "fidelity": runtime_views.plot_fidelity(fidelity).axes[0].get_title(),
        "side by side": etvk_views.plot_side_by_side(side).axes[0].get_title(),
        "diff": etvk_views.plot_diff(diff)._suptitle.get_text(),
        "tuner": tune_views.convergence_figure(trials).axes[0].get_title(),
        "throughput": affine_views.plot_throughput(throughput).axes[0].get_title(),
        "devices": device_views.compare_devices(trials.assign(device_key=DEVICE), "best_so_far_us",
                                                "evaluations")._suptitle.get_text(),
    }
    for name, title in titles.items():
        assert DEVICE in title, (name, title)
        assert not re.search(r"[—·]\s*$", title), (name, title)


def test_committed_suite_charts_name_their_device():
    coop, shuffle = H200 / "coopmat_vs_etvk.csv", H200 / "pixel_shuffle.csv"
    if not (coop.is_file() and shuffle.is_file()):
        pytest.skip("the committed H200 folder is not here")
    title = coopmat_vs_etvk_views.plot_coopmat_vs_etvk(pd.read_csv(coop)).axes[0].get_title()
    assert title.endswith("· NVIDIA H200")
    assert pixel_shuffle_views.plot_bandwidth(pd.read_csv(shuffle)).axes[0].get_title().endswith("\nNVIDIA H200")


def test_with_device():
    a, b = pd.DataFrame({"device": ["X", None, "X"]}), pd.DataFrame({"device": ["Y"]})
    assert device_names(a, None, b, pd.DataFrame({"other": [1]})) == "X, Y"
    assert with_device("chart", a) == "chart · X"
    assert with_device("chart on X", a) == "chart on X"          # named already
    assert with_device("chart", pd.DataFrame()) == "chart"        # nothing known: no dangling separator
    assert with_device("chart", a, device="Z") == "chart · Z"


def test_fidelity_progress_counts_every_item(monkeypatch, capsys):
    """Items with the same family and options are measured once, but the counter still names each of them."""
    from workbench.etvk import codegen
    from workbench.etvk.model import fidelity
    monkeypatch.setattr(codegen, "source", lambda *a, **k: None)
    monkeypatch.setattr(codegen, "Codegen", lambda src: None)
    measured = []

    def fake_time_item(device, gen, item, modes, *args):
        measured.append(item["dispatch_id"])
        return [{"timestamps": t, "between": b, "barriers": f, "variant": item["family"], "median_us": 1.0,
                 "correct": True} for t, b, f in modes]

    monkeypatch.setattr(fidelity, "_time_item", fake_time_item)
    same = {"shape": [1, 8, 4, 4]}
    items = [{"model": "m", "dispatch_id": i, "kernel": "k", "family": fam, "options": opts}
             for i, (fam, opts) in enumerate([("q8ta_add", same), ("q8ta_add", same), ("q8ta_conv2d_pw", same),
                                              ("q8ta_add", same), ("q8ta_add", {"shape": [1, 4, 4, 4]})])]
    rows = fidelity.time_items(items, device=object(), warm_seconds=0.0)
    assert measured == [0, 2, 4]
    assert rows["measured_as"].tolist() == [0, 0, 2, 0, 4]
    lines = capsys.readouterr().err.splitlines()
    assert [line.split()[0] for line in lines] == [f"{n}/5" for n in range(1, 6)]
    assert "as measured for dispatch 0" in lines[3] and "as measured" not in lines[0]
