"""The phone profile (workbench.vendors.phone, `workbench phone`): a predicted time per captured dispatch on the offline
GPUs from their compilers' cost figures, its bound named; 4x the invocations is 4x the arithmetic time; bad input in
one line. The model on the machinery needs no compiler; the capture's rows need Mesa's build (skipped without it)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from workbench.cli import main
from workbench.vendors import mesa, phone

CAPTURE = Path(__file__).parent / "capture_data" / "etvk_residual_add"
GPUS = ["a740", "mali-g610", "rdna2"]


def _stats(gpu, compiler, **figures):
    return {"dispatches": "0", "gpu": gpu, "compiler": compiler, "reason": "", "subgroup_size": 64, **figures}


def test_the_model_on_hand_made_figures():
    """Each driver's figures through the formula: Turnip (instructions + stalls) per lane, PanVK's Cycles per core,
    RADV's inverse throughput per wave; the larger of arithmetic and memory, named."""
    stats = pd.DataFrame([
        _stats("a740", "Turnip (ir3)", **{"Instruction Count": 90, "Estimated cycles stalled on SS": 6,
                                          "Estimated cycles stalled on SY": 4}),
        _stats("mali-g610", "PanVK (bifrost/valhall)", Cycles=3.0, **{"Cycles fma": 1.0, "Cycles ls": 3.0}),
        _stats("mali-g52", "PanVK (bifrost/valhall)", Cycles=32.0, **{"Cycles arith": 1.0, "Cycles ldst": 32.0}),
        _stats("rdna2", "RADV (ACO)", **{"Inverse Throughput": 640})])
    one = {"dispatch": 0, "groups": (100, 1, 1), "local_size": (64, 1, 1), "bytes": 0}
    rows = phone.predict([one], stats, GPUS + ["mali-g52"]).set_index("gpu")
    a, m, r = phone.PHONES["a740"], phone.PHONES["mali-g610"], phone.PHONES["rdna2"]
    assert rows.loc["a740", "arithmetic_us"] == pytest.approx(6400 * 100 / (a.cores * a.lanes * a.clock_mhz))
    # Mesa's LS figure is a warp's message per cycle: 3 / 16 < 1 FMA cycle on Valhall; 32 / 8 > 1 on Bifrost
    assert rows.loc["mali-g610", "arithmetic_us"] == pytest.approx(6400 * 1.0 / (m.cores * m.clock_mhz))
    b = phone.PHONES["mali-g52"]
    assert rows.loc["mali-g52", "arithmetic_us"] == pytest.approx(6400 * 4.0 / (b.cores * b.clock_mhz))
    assert rows.loc["rdna2", "arithmetic_us"] == pytest.approx(6400 * 10 / (r.cores * r.lanes * r.clock_mhz))
    assert rows.loc["mali-g610", "bound"] == "arithmetic:fma" and rows.loc["a740", "bound"] == "arithmetic:issue"
    assert rows.loc["mali-g52", "bound"] == "load/store"
    heavy = phone.predict([{**one, "bytes": 1 << 30}], stats, GPUS).set_index("gpu")
    assert (heavy["bound"] == "memory").all()
    assert heavy.loc["a740", "time_us"] == pytest.approx((1 << 30) / (a.bandwidth_gbs * 1e3))
    # a work group smaller than a wave is padded to one: 8 invocations cost what 64 do
    small = phone.predict([{**one, "local_size": (8, 1, 1)}], stats, ["a740"])
    assert small["invocations"][0] == 6400


def test_every_phone_cites_its_figures():
    for name, p in phone.PHONES.items():
        assert mesa.check_gpu(name).name == name and p.source and p.cores > 0 and p.bandwidth_gbs > 0
    assert phone.binding_bytes(None, "VK_FORMAT_R32G32B32A32_SFLOAT", (4, 2, 1)) == 128
    assert phone.binding_bytes(None, "VK_FORMAT_R8G8B8A8_SINT", (4, 2)) == 32


def test_a_captured_model_gives_a_row_per_dispatch(mesa_build, tmp_path):
    from workbench.cli.phone import profile
    rows, fam, check = profile(CAPTURE, GPUS)
    assert check is None
    n = len(rows["dispatch"].unique())
    assert n > 1 and len(rows) == n * len(GPUS)
    ok = rows[rows["reason"] == ""]
    assert len(ok) >= 0.9 * len(rows), rows[rows["reason"] != ""][["dispatch", "gpu", "reason"]]
    assert (ok["time_us"] > 0).sum() >= 0.8 * len(ok)
    assert ok["bound"].str.match(r"^(memory|load/store|arithmetic:\w+|empty)$").all()
    assert (ok["time_us"] == ok[["arithmetic_us", "memory_us"]].max(axis=1)).all()
    assert set(fam["gpu"]) == set(GPUS)
    assert fam.groupby("gpu")["share"].sum().round(6).eq(1).all()
    # beside a measured table: each row's measured µs and share error, each family's shares
    n0 = sorted(rows["dispatch"].unique())
    pd.DataFrame({"model": "m", "dispatch": n0, "family": "f", "etvk_us": 1.0, "device": "D"}).to_csv(
        tmp_path / "m.csv", index=False)
    measured, fam2, check = profile(CAPTURE, ["a740"], measured=tmp_path / "m.csv", model="m")
    assert check is not None and fam2["measured_share"].tolist() == [1.0]
    assert fam2["share"].round(6).tolist() == [1.0]
    assert (measured["measured_device"] == "D").all() and (measured["measured_us"] == 1.0).all()
    assert measured["share_error_points"].sum() == pytest.approx(0.0, abs=1e-6)
    assert main(["phone", str(CAPTURE), "--gpu", "a740", "--csv", str(tmp_path / "p.csv")]) == 0
    assert len(pd.read_csv(tmp_path / "p.csv")) == n and (tmp_path / "p_families.csv").is_file()


def test_a_planted_dispatch_with_4x_the_invocations(mesa_build):
    """The same pipeline with 4x the work groups: ~4x the arithmetic time (the figures are per invocation)."""
    from workbench.capture import dispatches, stats
    from workbench.capture.replay import launch_parameters
    found = dispatches(CAPTURE)
    d = max(found, key=lambda x: len(x.spirv))
    frame = stats.stats([d], gpus=GPUS, driver=False, lint=False)
    local = tuple(launch_parameters(d)[1])
    base = {"dispatch": d.dispatch, "groups": tuple(d.groups), "local_size": local, "bytes": 0}
    planted = {**base, "groups": (d.groups[0] * 4, d.groups[1], d.groups[2])}
    one, four = (phone.predict([x], frame, GPUS).set_index("gpu") for x in (base, planted))
    ratio = four["arithmetic_us"] / one["arithmetic_us"]
    assert ratio.between(3.96, 4.04).all(), ratio


def test_bad_input_is_refused_in_one_line(capsys, tmp_path):
    with pytest.raises(ValueError, match="unknown GPU 'a999'"):
        phone.check_phone("a999")
    with pytest.raises(ValueError, match="expected a GPU with a phone's figures"):
        phone.check_phone("mali-g310")
    bad = tmp_path / "m.csv"
    bad.write_text("a,b\n1,2\n")
    for argv, expected in ((["phone", str(tmp_path / "none")], "expected a capture folder"),
                           (["phone", str(CAPTURE), "--gpu", "a999"], "unknown GPU 'a999'"),
                           (["phone", str(CAPTURE), "--gpu", ","], "expected --gpu with at least one GPU"),
                           (["phone", str(CAPTURE), "--measured", str(bad)], "expected --measured with columns")):
        if not mesa.is_set_up() and "measured" in argv:
            continue
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0], err


def test_the_floor_that_fits_reported_shares():
    """`fit_floor` finds the fixed cost per dispatch that brings the shares closest: two groups of 1 dispatch of
    8 µs and 4 dispatches of 0.5 µs reach 50 / 50 at a floor of 2 µs (8 + 2 = 4 × (0.5 + 2))."""
    rows = pd.DataFrame({"time_us": [8.0, 0.5, 0.5, 0.5, 0.5], "floor_us": 0.0})
    floor, rms = phone.fit_floor(rows, ["big", "small", "small", "small", "small"], {"big": 0.5, "small": 0.5})
    assert floor == pytest.approx(2.0) and rms == pytest.approx(0.0, abs=1e-9)  # 10 = 4 × 2.5
    floor, _ = phone.fit_floor(rows, ["big"] + ["small"] * 4, {"big": 0.8, "small": 0.2})
    assert floor == 0.0  # 8 / 10 already: no floor


def test_exclude_and_the_issue_groups(mesa_build):
    from workbench.cli.phone import ISSUE_22968, _group, issue_check, profile
    assert _group("q4gsw_linear_gemv_coop__w_4x8_nc_buffer_g1w64_texture3d_float", "linear_q4gsw") == "4-bit GEMV"
    assert _group("embedding_q4gsw_float_scales", "embedding_q4gsw") == "other"
    assert _group("sdpa_compute_out_gqa_coop_texture3d", "sdpa_with_kv_cache") == "SDPA"
    assert _group("view_texture_float", "view_copy") == "view copies"
    rows, _, _ = profile(CAPTURE, ["a740"])
    first = rows["family"].iloc[0]
    kept, _, _ = profile(CAPTURE, ["a740"], exclude=f"^{first}$|{first}")
    assert first not in set(kept["family"]) and len(kept) < len(rows)
    t = issue_check(rows)
    assert set(t["group"]) == {*ISSUE_22968, "other"} and t.groupby("model")["share"].sum().round(6).eq(1).all()
