"""workbench.viz.llm_views: the shares, the best GEMV per shape, the bits what-if (against the LLM module's own
roofline and its byte count) and the pictures and explorer built on them."""
import numpy as np
import pandas as pd
import pytest

from workbench.etvk.model import llm
from workbench.viz import llm_views as views


def families(device="gpu A", step="decode"):
    us = {"GEMV": 60.0, "SDPA": 20.0, "copies/views": 15.0, "other": 5.0}
    total = sum(us.values())
    return pd.DataFrame({"step": step, "family": list(us), "dispatches": [15, 10, 22, 10],
                         "gpu_us_per_step": list(us.values()), "share": [v / total for v in us.values()],
                         "steps": 4, "device": device, "driver": "d", "commit": "c"})


def test_decode_shares_adds_the_reported_adreno_bar():
    shares = views.decode_shares([families("gpu A"), families("gpu B", "prefill")])
    reported = shares[shares["source"] == "reported"]
    assert set(reported["device"]) == {views.REPORTED_DEVICE} and set(reported["step"]) == {"decode"}
    assert reported.set_index("family")["share"].to_dict() == views.REPORTED_DECODE_SHARES
    assert reported["share"].sum() == pytest.approx(1.0)
    for (_, _), g in shares[shares["source"] == "measured"].groupby(["device", "step"]):
        assert g["share"].sum() == pytest.approx(1.0)
    assert len(views.decode_shares([families()], reported=False)) == 4


def test_decode_shares_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match="missing \\['share'\\]"):
        views.decode_shares([families().drop(columns="share")])
    with pytest.raises(ValueError, match="expected families among"):
        views.decode_shares([families().replace({"family": {"SDPA": "attention"}})])


def gemv_rows():
    base = {"model": "M", "layer": "L", "k": 2048, "n": 2048, "group_size": 32, "m": 1, "status": "ok",
            "correct": True, "device": "GPU X", "median_us": 5.0, "GB/s": 1.0, "copy_GBps": 2.0}
    rows = [{**base, "impl": "etvk", "variant": "e", "copy_fraction": 0.25},
            {**base, "impl": "workbench", "variant": "slow", "copy_fraction": 0.40},
            {**base, "impl": "workbench", "variant": "fast", "copy_fraction": 0.70},
            {**base, "impl": "workbench", "variant": "wrong", "copy_fraction": 0.95, "correct": False},
            {**base, "impl": "workbench", "variant": "m2", "copy_fraction": 0.90, "m": 2},
            {**base, "impl": "workbench", "variant": "baseline off", "copy_fraction": 1.84},
            {**base, "impl": "copy", "variant": None, "copy_fraction": np.nan, "status": None}]
    return pd.DataFrame(rows)


def test_best_copy_fraction_keeps_correct_rows_the_copy_check_passes_at_m():
    best = views.best_copy_fraction(gemv_rows()).set_index("impl")
    assert best.loc["workbench", "variant"] == "fast" and best.loc["workbench", "copy_fraction"] == 0.70
    assert best.loc["workbench", "above_copy"] == 1 and best.loc["etvk", "above_copy"] == 0      # the copy check
    assert best.loc["etvk", "label"] == "M\nL\n2048→2048"
    assert views.best_copy_fraction(gemv_rows(), m=2).set_index("impl").loc["workbench", "variant"] == "m2"
    regimes = pd.concat([gemv_rows().assign(cache="cold"), gemv_rows().assign(cache="hot", copy_fraction=0.1)])
    cold = views.best_copy_fraction(regimes).set_index("impl")
    assert cold.loc["workbench", "copy_fraction"] == 0.70 and set(cold["cache"]) == {"cold"}
    assert views.best_copy_fraction(regimes, cache="hot").set_index("impl").loc["workbench", "copy_fraction"] == 0.1


def decode_dispatches(device, gemv_us, other_us):
    rows = []
    for position in (32, 33):
        rows += [{"step": "decode", "position": position, "family": "GEMV", "gpu_us": gemv_us / 3}] * 3
        rows += [{"step": "decode", "position": position, "family": "SDPA", "gpu_us": other_us}]
    return pd.DataFrame(rows).assign(device=device, driver="d", commit="c", date="2026-01-01")


@pytest.fixture
def roofline():
    cfg = llm.Decoder()
    frames = [llm.roofline(cfg, decode_dispatches(dev, g, o), pd.DataFrame())
              for dev, g, o in (("GPU X", 90.0, 210.0), ("CPU Y", 60000.0, 20000.0))]
    return pd.concat(frames, ignore_index=True)


def test_what_if_reproduces_the_roofline_and_the_byte_count(roofline):
    for device, d in roofline.groupby("device"):
        w = views.what_if(d, [4, 3, 2]).set_index("bits")
        assert np.allclose(w["tokens_per_s"], d.set_index("bits").loc[[4, 3, 2], "tokens_per_s"], rtol=1e-12)
    # 8 bits: the GEMVs' time scales with the linear weights' bytes as the Decoder counts them
    cfg = llm.Decoder()
    x = views.what_if(roofline[roofline["device"] == "GPU X"], 8, 0.5).iloc[0]
    ratio = cfg.weight_bytes(8)["linear"] / cfg.weight_bytes(4)["linear"]
    assert x["linear_weight_bytes"] == pytest.approx(cfg.weight_bytes(8)["linear"])
    assert x["us_per_token"] == pytest.approx(90.0 * ratio + 0.5 * 210.0)
    assert x["speedup"] == pytest.approx(300.0 / (90.0 * ratio + 105.0))
    assert views.what_if(roofline, 4, 0.0)["gemv_share"].tolist() == [1.0, 1.0]


def test_what_if_refuses_bad_input(roofline):
    with pytest.raises(ValueError, match="non_gemv_scale in 0..1"):
        views.what_if(roofline, 4, 1.5)
    with pytest.raises(ValueError, match="bit widths in 1..8"):
        views.what_if(roofline, [4, 16])
    with pytest.raises(ValueError, match="measured 4-bit row"):
        views.what_if(roofline[roofline["bits"] != 4], 3)
    with pytest.raises(ValueError, match="missing \\['gemv_us_per_token'\\]"):
        views.what_if(roofline.drop(columns="gemv_us_per_token"), 3)


def test_pictures_name_their_devices(roofline):
    rates = pd.DataFrame([{"device": "gpu A", "step": "decode", "tokens_per_s_gpu": 3000.0,
                           "tokens_per_s_execute": 2000.0, "gpu_us": 330.0}])
    fig = views.plot_family_shares(views.decode_shares([families("gpu A")]), rates)
    assert "gpu A" in fig._suptitle.get_text() and views.REPORTED_DEVICE in fig._suptitle.get_text()
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any("3,000 tok/s GPU" in t for t in texts) and any("reported" in t for t in texts)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["GEMV", "SDPA", "RMSNorm", "copies/views",
                                                                      "other"]  # RMSNorm: the reported bar

    fig = views.plot_copy_fraction(views.best_copy_fraction(gemv_rows()))
    assert "GPU X" in fig._suptitle.get_text()
    heights = sorted(round(p.get_height()) for p in fig.axes[0].patches)
    assert heights == [25, 70]

    fig = views.plot_what_if(roofline, selected=(3, 0.5))
    assert len(fig.axes) == 2 and "GPU X" in fig.axes[0].get_title()


def test_vendor_picture_leaves_out_errors():
    rows = pd.DataFrame([
        {"impl": "etvk", "variant": "e", "gpu": "a740", "register_unit": "vec4", "instructions_per_weight_byte": 38.0,
         "registers": 12, "occupancy": 1.0, "error": None, "shape": "1x2048->2048", "group_size": 32,
         "compiler": "Turnip (ir3)"},
        {"impl": "workbench", "variant": "w", "gpu": "a740", "register_unit": "vec4",
         "instructions_per_weight_byte": 13.0, "registers": 24, "occupancy": 0.25, "error": "", "shape": "1x2048->2048",
         "group_size": 32, "compiler": "Turnip (ir3)"},
        {"impl": "etvk", "variant": "e", "gpu": "rdna3", "register_unit": None, "instructions_per_weight_byte": np.nan,
         "registers": np.nan, "occupancy": np.nan, "error": "no ExecuTorch checkout", "shape": None,
         "group_size": np.nan, "compiler": None}])
    fig = views.plot_vendor_stats(rows)
    assert [t.get_text() for t in fig.axes[-1].get_xticklabels()] == ["a740\n(vec4)"]
    assert sorted(p.get_height() for p in fig.axes[0].patches) == [13.0, 38.0]
    with pytest.raises(ValueError, match="no row without an error"):
        views.plot_vendor_stats(rows.iloc[2:])


def test_bits_explorer_follows_its_sliders(roofline):
    explorer = views.BitsExplorer(roofline)
    assert explorer.text.startswith("4 bits, non-GEMV time × 1")
    explorer.sliders["bits"].value = 2
    explorer.sliders["non_gemv"].value = 0.5
    expected = views.what_if(roofline, 2, 0.5)
    assert np.allclose(explorer.table["tokens_per_s"], expected["tokens_per_s"])
    assert explorer.readout.value == explorer.text and explorer.text.startswith("2 bits, non-GEMV time × 0.5")
    assert f"{expected['tokens_per_s'].iloc[0]:,.0f} tok/s" in explorer.text
    assert explorer.image.value[:4] == b"\x89PNG"


def test_field_table_keeps_each_impls_fastest_correct_row_and_its_ratio_to_the_best_peer():
    base = {"k": 4096, "n": 4096, "model": "Llama-3.1-8B", "layer": "attn q/o", "group_size": 32, "status": "ok",
            "correct": True, "cache": "cold", "device": "NVIDIA H200"}
    rows = pd.DataFrame([
        {**base, "impl": "workbench", "median_us": 7.0, "diagnostic": 0},
        {**base, "impl": "workbench", "median_us": 3.0, "diagnostic": 2},          # a diagnostic build: left out
        {**base, "impl": "workbench", "median_us": 6.5, "correct": False},         # wrong: left out
        {**base, "impl": "llama.cpp-vulkan-q4_0-mmv", "median_us": 8.0},
        {**base, "impl": "llama.cpp-vulkan-q4_0-mmvq", "median_us": 7.5},
        {**base, "impl": "torch-int4-tinygemm", "median_us": 9.0},
        {**base, "impl": "cublas-fp16", "median_us": 14.0},
        {**base, "impl": "llama.cpp-vulkan-q4_0-mmvq", "median_us": 1.0, "status": "skipped"},
        {**base, "impl": "copy", "median_us": 4.0}])
    t = views.field_table(rows).set_index("impl")
    assert list(t.index) == ["workbench", "llama.cpp-vulkan-q4_0-mmv", "llama.cpp-vulkan-q4_0-mmvq",
                             "torch-int4-tinygemm", "cublas-fp16"]
    assert t.loc["workbench", "median_us"] == 7.0 and t.loc["workbench", "vs_best_peer"] == pytest.approx(7 / 7.5)
    assert t.loc["cublas-fp16", "vs_best_peer"] == pytest.approx(14 / 7.5)
    fig = views.plot_field(t.reset_index())
    assert "NVIDIA H200" in fig._suptitle.get_text()
