"""workbench.tune: the spaces (from the kernels' specs), the optimiser loop, live trials on the device, the
comparison with the exhaustive grid, the vendor table's C++ conditions, the CLI."""
import math

import numpy as np
import pandas as pd
import pytest

from workbench import tune
from workbench.kernels import conv_pw
from workbench.kernels import pixel_shuffle_block as B
from workbench.tune.compare import compare, simulate, table_objective
from workbench.tune.search import Outcome, Search, minimize
from workbench.tune.space import config_label, tuning_space
from workbench.tune.tuner import default_budget, outcome_of
from workbench.tune.vendor_table import cpp_condition, cpp_selector, rank_by_model


# --- spaces -------------------------------------------------------------------------------------------------------

def test_conv_space_comes_from_the_kernel_and_prunes_tiles_larger_than_the_problem():
    space = tuning_space("conv-pw")
    assert space.params == {"tile_m": conv_pw.TILE_VALUES, "tile_n4": conv_pw.TILE_VALUES,
                            "tile_k4": conv_pw.TILE_VALUES}
    assert len(space.valid()) == 27
    small = tuning_space("conv-pw", shape=(2, 8, 8, 3, 5))   # IC4 = OC4 = 2, W4 = 2: no tile of 4 is useful
    valid = small.valid()
    assert all(c["tile_m"] < 4 and c["tile_n4"] < 4 and c["tile_k4"] < 4 for c in valid) and len(valid) == 8
    with pytest.raises(ValueError, match="tile_n4=4 exceeds the problem"):
        small.check({"tile_m": 1, "tile_n4": 4, "tile_k4": 1})


def test_pixel_shuffle_space_excludes_what_the_spec_refuses():
    space = tuning_space("pixel-shuffle")
    assert space.params["tile_co"] == B.TILE_CO_CHOICES and space.params["local_x"] == B.LOCAL_X_CHOICES
    valid = space.valid()
    assert 0 < len(valid) < len(space.grid())
    for config in valid:   # every valid config builds; the kernel's own rules hold
        spec = space.check(config)
        assert not (spec.convert and spec.lut) and not spec.pixel_tile   # 4C1W output: no pixel tile
        assert not spec.pair_store or 0 < spec.tile_co < 32
    with pytest.raises(ValueError, match="convert picks the arithmetic"):
        space.check({**valid[0], "lut": 1, "convert": True})
    with pytest.raises(ValueError, match="not one of"):
        space.check({**valid[0], "local_x": 48})
    with pytest.raises(ValueError, match="unknown \\['tile'\\]"):
        space.check({**valid[0], "tile": 1})


def test_bad_kernel_and_budget_are_refused_clearly():
    with pytest.raises(ValueError, match="unknown kernel 'conv'.*conv-pw"):
        tuning_space("conv")
    space = tuning_space("conv-pw")
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="budget must be a positive int"):
            Search(space, bad)
    with pytest.raises(ValueError, match="budget must be a positive int"):
        tune.tune("conv-pw", budget=0, here=True, write=False)
    assert default_budget(space) == 6   # a quarter of 27, rounded down


# --- the optimiser -------------------------------------------------------------------------------------------------

def _bowl(config):
    """A smooth synthetic objective on the block pixel shuffle's space with one best config."""
    return (1.0 + 0.02 * abs(math.log2(config["local_x"]) - 7) + 0.05 * config["lut"] + 0.01 * config["swizzle"]
            + 0.03 * config["convert"] + 0.004 * abs(config["tile_co"] - 4) - 0.02 * config["pair_store"])


def test_tpe_finds_the_synthetic_optimum_within_a_quarter_of_the_grid():
    space = tuning_space("pixel-shuffle")
    valid = space.valid()
    best = min(_bowl(c) for c in valid)
    budget = default_budget(space)
    for seed in (0, 1):
        search = minimize(space, _bowl, budget=budget, seed=seed, batch=2)
        assert search.evaluations <= budget
        assert search.best.value == pytest.approx(best)
        states = {t.state for t in search.trials}
        assert "invalid" in states   # TPE proposed refused configs: recorded, not measured
        measured = [config_label(t.config) for t in search.trials if t.state == "complete"]
        assert len(measured) == len(set(measured)) == search.evaluations   # nothing measured twice
    again = minimize(space, _bowl, budget=budget, seed=0, batch=2)
    assert [t.config for t in again.trials] == [t.config for t in minimize(space, _bowl, budget=budget, seed=0,
                                                                            batch=2).trials]   # seeded


def test_search_stops_when_the_space_is_exhausted_and_skips_device_invalid_configs():
    space = tuning_space("conv-pw", shape=(1, 8, 8, 3, 5))
    bad = {"tile_m": 1, "tile_n4": 1, "tile_k4": 1}

    def objective(config):
        if config == bad:
            return Outcome(state="invalid on device", note="not here")
        return sum(config.values())
    search = minimize(space, objective, budget=100, seed=3)
    assert search.done and search.evaluations == 7   # 8 valid, one refused by the "device" without a measurement
    assert search.best.config == {"tile_m": 1, "tile_n4": 1, "tile_k4": 2}


def test_outcome_of_rows():
    assert outcome_of([{"median_us": 5.0, "correct": True}]).value == 5.0
    assert outcome_of([{"median_us": 5.0, "correct": False}]).state == "wrong"
    assert outcome_of([{"error": "ValueError: x"}]).state == "failed"
    assert outcome_of([{"invalid": "pair store"}]).state == "invalid on device"


# --- live trials ---------------------------------------------------------------------------------------------------

TRIAL_COLUMNS = ("tuned", "trial", "config", "state", "median_us", "spread_pct", "p10_us", "p90_us",
                 "objective_us", "best_so_far_us", "evaluations", "budget", "grid_size", "seed", "sampler",
                 "proposed_by", "device", "driver", "commit", "device_key")


@pytest.mark.parametrize("kernel, shape, budget", [("conv-pw", (2, 12, 20, 5, 9), 3),
                                                   ("pixel-shuffle", (2, 32, 3, 8), 3)])
def test_live_tune_writes_tidy_rows(device, tmp_path, kernel, shape, budget):
    from workbench.measure import ResultsReader
    result = tune.tune(kernel, budget=budget, seed=0, here=True, device=device, quick=True, out=tmp_path,
                       shape=shape, show_progress=False)
    frame = result.frame
    for column in TRIAL_COLUMNS:
        assert column in frame, column
    measured = frame[frame["state"].isin(["complete", "wrong"])]
    assert len(measured) == budget == frame["evaluations"].max()
    assert (measured["state"] == "complete").all()    # every candidate correct on the device
    assert measured["median_us"].gt(0).all() and measured["device"].eq(device.info.name).all()
    assert frame["commit"].notna().all() and frame["device"].notna().all()
    best = frame["objective_us"].min()
    assert frame["best_so_far_us"].iloc[-1] == best
    assert result.best["median_us"].iloc[0] == best
    on_disk = ResultsReader(tmp_path).load(f"tune_{kernel.replace('-', '_')}")
    assert len(on_disk) == len(frame)


# --- against the exhaustive grid ------------------------------------------------------------------------------------

def _grid(times: dict, key="dev") -> pd.DataFrame:
    return pd.DataFrame([{"device_key": key, "config": c, "objective_us": t, "state": "complete"}
                         for c, t in times.items()])


def test_compare_computes_the_percentage_against_the_grid_not_the_tuners_own_time():
    grid = _grid({"a": 100.0, "b": 102.0, "c": 110.0, "d": 150.0, "e": 90.0, "f": 200.0, "g": 95.0,
                  "h": 300.0})
    trials = pd.DataFrame([{"device_key": "dev", "config": "d", "objective_us": 140.0, "evaluations": 1},
                           {"device_key": "dev", "config": "b", "objective_us": 80.0, "evaluations": 2}])
    row = compare(trials, grid).iloc[0]
    assert row["pick"] == "b" and row["pick_us"] == 102.0 and row["pick_measured_us"] == 80.0
    assert row["best_config"] == "e" and row["best_us"] == 90.0
    assert row["pct_over_best"] == pytest.approx((102.0 / 90.0 - 1) * 100)
    assert row["rank"] == 4 and row["fraction"] == pytest.approx(2 / 8)
    assert not row["within_goal"]   # 13 % over the best
    near = compare(trials.assign(config=["d", "g"]), grid).iloc[0]
    assert near["pct_over_best"] == pytest.approx(100 * 5 / 90) and not near["within_goal"]
    exact = compare(trials.assign(config=["d", "e"]), grid).iloc[0]
    assert exact["pct_over_best"] == 0 and exact["within_goal"]
    with pytest.raises(ValueError, match="no rows of device 'other'"):
        compare(trials.assign(device_key="other"), grid)


def test_replay_searches_the_measured_table():
    space = tuning_space("conv-pw")
    rng = np.random.default_rng(0)
    times = {config_label(c): float(t) for c, t in zip(space.valid(), rng.uniform(50, 150, 27))}
    grid = _grid(times)
    out = simulate("conv-pw", grid, seeds=range(3), budget=27)
    assert (out["pct_over_best"] == 0).all() and (out["evaluations"] == 27).all()   # the whole grid: exact
    small = simulate("conv-pw", grid, seeds=range(3))
    assert (small["evaluations"] <= 6).all() and (small["pct_over_best"] >= 0).all()
    objective = table_objective(grid)
    assert objective(space.valid()[0]).value == times[config_label(space.valid()[0])]
    with pytest.raises(ValueError, match="outside pixel-shuffle's space"):
        simulate("pixel-shuffle", grid, seeds=[0])


# --- the vendor table ------------------------------------------------------------------------------------------------

def test_model_rank_and_cpp_conditions():
    stats = pd.DataFrame([
        {"gpu": "a740", "variant": "base", "occupancy": 0.5, "instructions": 100, "spills": 0, "outputs": 1},
        {"gpu": "a740", "variant": "_tile2", "occupancy": 0.5, "instructions": 150, "spills": 0, "outputs": 2},
        {"gpu": "mali-g610", "variant": "base", "occupancy": 1.0, "instructions": 100, "spills": 0, "outputs": 1},
        {"gpu": "mali-g610", "variant": "_tile2", "occupancy": 0.5, "instructions": 150, "spills": 0, "outputs": 2},
        {"gpu": "mali-g610", "variant": "huge", "occupancy": 1.0, "instructions": 10, "spills": 4, "outputs": 1}])
    ranked = rank_by_model(stats).set_index(["gpu", "variant"])
    assert ranked.loc[("a740", "_tile2"), "model_rank"] == 1     # same occupancy, fewer instructions per output
    assert ranked.loc[("mali-g610", "base"), "model_rank"] == 1  # 1.0/100 beats 0.5/75
    assert ranked.loc[("mali-g610", "huge"), "model_rank"] == 3   # best score, but it spills: last
    assert cpp_condition("adreno", "Adreno (TM) 740") == "graph.device_is_adreno()"
    assert cpp_condition("adreno", "Adreno (TM) 740", chip_only=True) == \
        'graph.device_is_adreno() && graph.device_name_contains("Adreno (TM) 740")'
    assert cpp_condition(None, "llvmpipe") == 'graph.device_name_contains("llvmpipe")'
    table = pd.DataFrame([{"gpu": "a740", "evidence": "model", "pick": "_tile2",
                           "cpp_condition": "graph.device_is_adreno()"},
                          {"gpu": "mali-g610", "evidence": "model", "pick": "base",
                           "cpp_condition": "graph.device_is_mali()"},
                          {"gpu": "rdna3", "evidence": "model", "pick": "base",
                           "cpp_condition": "graph.device_is_amd()"}])
    cpp = cpp_selector("sdpa", table)
    assert 'if (graph.device_is_adreno()) {  // a740 (model)\n    return "_tile2";' in cpp
    assert cpp.rstrip().endswith('return "base";  // the most common pick\n}')


# --- the CLI -------------------------------------------------------------------------------------------------------

def test_cli_tune(tmp_path, capsys):
    from workbench.cli import main
    code = main(["tune", "conv-pw", "--here", "--quick", "--budget", "2", "--shape", "1,8,8,3,5",
                 "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "== picks" in out and (tmp_path / "tune_conv_pw.csv").is_file()
    assert main(["tune", "conv-pw", "--here", "--budget", "0", "--out", str(tmp_path)]) == 2
    assert "budget must be a positive int" in capsys.readouterr().err
    # an option of another kernel's space is refused by what the space's builder takes, before any measurement
    assert main(["tune", "conv-pw", "--here", "--fixed", "--pair", "4C1W,4C", "--out", str(tmp_path)]) == 2
    assert "--pair / --fixed: not an option of conv-pw's space (it takes shape, saturate)" in capsys.readouterr().err


def test_tune_on_a_dask_worker(device, tmp_path, monkeypatch):
    """The Dask path: a local cluster with one worker serving this machine's device; the trial rows name the
    worker that measured them."""
    import os
    from pathlib import Path
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                      os.environ.get("PYTHONPATH", "")]))
    result = tune.tune("conv-pw", budget=2, seed=1, workers=[str(device.info.index)], quick=True, out=tmp_path,
                       shape=(1, 8, 12, 3, 6), show_progress=False)
    measured = result.frame[result.frame["state"] == "complete"]
    assert len(measured) == 2 and measured["worker"].str.startswith("tcp://127.0.0.1").all()
    assert (measured["max_lsb_diff"] == 0).all() and result.where.startswith("Dask at tcp://127.0.0.1")


def test_the_pick_is_the_lowest_median_over_search_and_confirmation_rows():
    from workbench.tune.tuner import confirm_share, pick_of
    trials = pd.DataFrame({"config": ["a", "b", "b", "b", "c"], "state": ["complete", "complete", "confirm", "confirm",
                                                                          "wrong"],
                           "objective_us": [10.0, 8.0, 12.0, 12.5, 1.0]})
    assert pick_of(trials) == ("a", 10.0)   # b's one lucky sample (8) loses to its confirmations; c was wrong
    assert confirm_share(120) == 12 and confirm_share(9) == 0


def test_live_tune_keeps_back_a_tenth_of_the_budget_to_confirm(device, tmp_path):
    result = tune.tune("conv-pw", budget=10, seed=0, here=True, device=device, quick=True, out=tmp_path,
                       shape=(2, 12, 20, 5, 9), show_progress=False)
    frame = result.frame
    confirm = frame[frame["state"] == "confirm"]
    assert len(confirm) == 1 and confirm["proposed_by"].tolist() == ["confirm"]
    assert frame["evaluations"].max() == 10 and result.best["budget"].tolist() == [10]
    measured = frame[frame["state"].isin(["complete", "confirm"])]
    assert result.best["config"].iloc[0] == measured.groupby("config")["objective_us"].median().idxmin()


def test_head_to_head_measures_pick_and_best_alternately(device, tmp_path):
    from workbench.tune.confirm import from_folder, head_to_head
    row = head_to_head("conv-pw", "tile_m=1,tile_n4=1,tile_k4=1", {"tile_m": 2, "tile_n4": 1, "tile_k4": 1},
                       device, rounds=2, shape=(1, 8, 8, 3, 5))
    assert row["rounds"] == 2 and len(row["pick_round_us"].split()) == 2 and row["pick_us"] > 0
    assert row["pct_over_best"] == pytest.approx((row["pick_us"] / row["best_us"] - 1) * 100)
    with pytest.raises(ValueError, match="tile_m='3' is not one of"):
        head_to_head("conv-pw", "tile_m=3,tile_n4=1,tile_k4=1", "tile_m=1,tile_n4=1,tile_k4=1", device)
    with pytest.raises(FileNotFoundError, match="needs tune_conv_pw.csv"):
        from_folder("conv-pw", tmp_path, device)
