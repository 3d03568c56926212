"""Fidelity from captures (workbench.etvk.model.capture_fidelity, `workbench capture fidelity`): ET-VK's execution
dispatches of a committed capture replayed and timed warm and cold beside ET-VK's own times; a results tar sent back
by tools/gpu_capture_fidelity.py read here; bad input as one line."""
from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench import capture
from workbench.cli import main
from workbench.etvk.model import capture_fidelity as cf
from workbench.etvk.model.events import EtdumpError

HERE = Path(__file__).resolve().parent
# capture_join.capture_program on ET-VK's executor_runner (cff6f4dd32), residual model, lavapipe: 41 dispatches,
# the last 9 one execution (its run.etdp logs them)
ETVK_DATA = HERE / "capture_data" / "etvk_residual_add"
# tools/gpu_capture_fidelity.py residual_add on lavapipe (--quick --runs 2 --warmup 1 --back-to-back 4
# --cold-between shader:16): what a GPU host sends back, without the capture's dumps
RETURNED = HERE / "capture_data" / "etvk_residual_add_fidelity.tar.gz"
FAST = dict(quick=True, cold_between="shader:1", back_to_back=2, warm_seconds=0.0)


def inspector():
    pytest.importorskip("executorch.devtools", reason="ExecuTorch's devtools read the ETDump")


def check_table(rows: pd.DataFrame, summary: pd.DataFrame, executions: int, ways=("warm", "cold")):
    assert list(rows.columns) == cf.TABLE_COLUMNS
    assert sorted(rows["way"].unique()) == sorted(ways)
    for way in ways:
        one = rows[rows["way"] == way]
        assert sorted(one["order"]) == list(range(executions))      # a row per execution dispatch
        assert one["dispatch"].is_unique
    assert rows["ratio"].map(math.isfinite).all() and (rows["ratio"] > 0).all()
    assert (rows["within_10pct"] == ((rows["ratio"] - 1).abs() <= 0.10)).all()
    assert rows["exact"].all() and (rows["reason"] == "").all()
    assert summary["within_10pct"].between(0, 1).all()
    for way, group in summary.groupby("way"):
        every = group[group["family"] == "(all)"]
        assert len(every) == 1
        assert group.loc[group["family"] != "(all)", "dispatches"].sum() == every["dispatches"].iloc[0] == executions
        assert every["within_10pct"].iloc[0] == pytest.approx(rows.loc[rows["way"] == way, "within_10pct"].mean())


def test_the_etdump_names_the_execution_without_executorch():
    kernels = cf.etdump_kernels(ETVK_DATA / "run.etdp")
    assert len(kernels) == 9
    assert kernels[0].startswith("nchw_to_image") and kernels[-1].startswith("image_to_nchw")
    assert "q8ta_add_buffer" in kernels
    # no variant names (no checkout): the execution is the capture's last dispatches
    assert cf.execution_dispatches(capture.open(ETVK_DATA), kernels) == list(range(32, 41))


def test_the_etdump_reader_agrees_with_executorchs_inspector():
    inspector()
    from workbench.etvk.model import capture_join
    etdump = ETVK_DATA / "run.etdp"
    assert cf.etdump_kernels(etdump) == capture_join.event_table(etdump)["kernel"].tolist()


@pytest.fixture(scope="module")
def timed_now(device):
    inspector()
    return cf.fidelity_of([ETVK_DATA], device=device, **FAST)


def test_a_capture_folder_gives_a_row_per_execution_dispatch_and_way(timed_now):
    rows, summary = timed_now
    check_table(rows, summary, 9)
    assert (rows["etvk_from"] == "the captured execution").all() and (rows["etvk_runs"] == 1).all()
    assert set(rows["between"]) == {"none", "shader:1"} and (rows["back_to_back"] == 2).all()
    ported = rows.loc[rows["kernel"].str.startswith("q8ta_conv2d_pw"), "family"]
    assert len(ported) == 8 and set(ported) == {"q8ta_conv2d_pw"}     # the hand-ported family's name


def test_a_results_folder_and_its_tar_read_the_same(timed_now, device, tmp_path):
    inspector()
    root = tmp_path / "results"
    model = root / "residual_add"
    model.mkdir(parents=True)
    for name in ("run.etdp", "capture.json"):
        shutil.copy2(ETVK_DATA / name, model / name)
    frame = capture.open(ETVK_DATA)
    frame.to_csv(model / cf.DISPATCHES_NAME, index=False)
    chosen = cf.execution_dispatches(frame, cf.etdump_kernels(ETVK_DATA / "run.etdp"))
    timed = cf.time_capture(ETVK_DATA, chosen, ways=cf.ways_of(["warm"], back_to_back=2),
                            sampling=cf.sampling_options(quick=True), warm_seconds=0.0, device=device)
    timed.assign(model="residual_add").to_csv(root / cf.TIMED_NAME, index=False)
    tar = cf.pack(root, tmp_path / "back.tar.gz")
    from_folder, summary = cf.fidelity_of([root], ways=["warm"])
    from_tar, _ = cf.fidelity_of([tar], ways=["warm"])
    pd.testing.assert_frame_equal(from_folder, from_tar)
    check_table(from_folder, summary, 9, ways=("warm",))


def test_a_returned_tar_from_a_real_run_reads_here():
    inspector()
    rows, summary = cf.fidelity_of([RETURNED])
    check_table(rows, summary, 9)
    assert rows["etvk_from"].str.startswith("median of 2 executions after 1").all()
    assert (rows["joined_by"] == "kernel names").all()       # the host named the pipelines (names.json)


def test_rows_at_unequal_clocks_are_flagged_and_counted_apart():
    """clocks_match: both SM clocks known and within CLOCKS_MATCH; the summary's share among those (a run whose
    replay sagged to a low clock is not silently kept as a like-for-like row)."""
    import pandas as pd
    rows = pd.DataFrame({"way": "in-order", "timestamps": "etvk", "between": "in order", "barriers": "captured",
                         "memory": "captured", "chains": 1, "family": ["a", "a", "b", "b"], "exact": True,
                         "etvk_us": [10.0, 10.0, 4.0, 4.0], "replay_us": [10.2, 10.1, 6.0, 5.8],
                         "replay_sm_clock_mhz": [1980, 1980, 1222, float("nan")],
                         "etvk_sm_clock_mhz": [1980, 1980, 1702, 1702], "clocks_match": [True, True, False, None]})
    rows["ratio"] = rows["replay_us"] / rows["etvk_us"]
    every = cf.summary(rows).set_index("family").loc["(all)"]
    assert every["within_10pct"] == 0.5 and every["clocks_matched"] == 2
    assert every["within_10pct_clocks_matched"] == 1.0


def test_hand_ported_twins_sit_beside_the_captured_rows(timed_now):
    rows, _ = timed_now
    warm = rows[rows["way"] == "warm"]
    hand = warm.assign(dispatch_id=warm["order"], workbench_us=2 * warm["replay_us"], ratio=1.5,
                       timestamps="etvk", barriers="light")[
        ["model", "dispatch_id", "family", "workbench_us", "ratio", "device", "timestamps", "between", "barriers"]]
    both = cf.compare_handport(rows, hand.iloc[2:5])
    assert both["order"].tolist() == [2, 3, 4] and (both["way"] == "warm").all()
    assert both["replay_vs_handport"].tolist() == pytest.approx([0.5] * 3)
    other = cf.compare_handport(rows, hand.assign(device="another GPU"))
    assert other["replay_vs_handport"].isna().all() and len(other) == 9


def test_cli_prints_the_shares_and_writes_the_tables(tmp_path, capsys):
    inspector()
    assert main(["capture", "fidelity", str(RETURNED), "--csv", str(tmp_path / "rows.csv"),
                 "--summary-csv", str(tmp_path / "summary.csv"), "--ways", "cold"]) == 0
    out = capsys.readouterr().out
    assert "cold: " in out and "of 9 dispatches within 10 %" in out and "warm: " not in out
    assert len(pd.read_csv(tmp_path / "rows.csv")) == 9
    assert set(pd.read_csv(tmp_path / "summary.csv")["way"]) == {"cold"}
    rows = pd.read_csv(tmp_path / "rows.csv")
    hand = rows.assign(dispatch_id=rows["order"], workbench_us=rows["replay_us"], ratio=1.0)
    hand.loc[hand["family"] == "(staging)", "dispatch_id"] = -1           # no hand-ported twin
    hand.to_csv(tmp_path / "hand.csv", index=False)
    assert main(["capture", "fidelity", str(RETURNED), "--ways", "cold", "--handport", str(tmp_path / "hand.csv"),
                 "--handport-csv", str(tmp_path / "both.csv")]) == 0
    assert "7 rows have a hand-ported twin" in capsys.readouterr().out
    both = pd.read_csv(tmp_path / "both.csv")
    assert len(both) == 7 and both["replay_vs_handport"].tolist() == pytest.approx([1.0] * 7)


def one_line_error(capsys, argv, *expected):
    assert main(["capture", "fidelity", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for text in expected:
        assert text in err, err


def test_bad_input_is_one_line(tmp_path, capsys):
    inspector()
    one_line_error(capsys, [str(tmp_path)], "expected a capture folder", str(tmp_path))
    one_line_error(capsys, [str(tmp_path / "nothing")], "nothing there")
    no_etdump = tmp_path / "capture"
    shutil.copytree(ETVK_DATA, no_etdump, ignore=shutil.ignore_patterns("run.etdp"))
    one_line_error(capsys, [str(no_etdump)], "expected ET-VK's ETDump", "found neither")
    one_line_error(capsys, [str(RETURNED), "--ways", "hot"], "expected ways among warm, cold", "hot")
    not_etdump = tmp_path / "bad.etdp"
    not_etdump.write_bytes(b"\0" * 64)
    with pytest.raises(EtdumpError, match="expected ET-VK's dispatch events"):
        cf.etdump_kernels(not_etdump)


def test_in_order_replays_the_execution_as_the_runtime_submits_it(device):
    """The in-order way: the execution's dispatches in one command buffer, in order, each reading what the ones
    before it wrote (the chain's outputs equal the capture's), a time per dispatch beside ET-VK's."""
    inspector()
    rows, summary = cf.fidelity_of([ETVK_DATA], device=device, ways=["in-order", "warm"], **FAST)
    check_table(rows, summary, 9, ways=("in-order", "warm"))
    ordered = rows[rows["way"] == "in-order"]
    assert (ordered["between"] == "in order").all() and (ordered["timestamps"] == "etvk").all()
    assert set(summary["way"]) == {"in-order", "warm"}


def test_in_order_timing_of_a_capture_without_executorch(device):
    """`capture.timeline.time_in_order` on the committed ET-VK capture: every dispatch timed in one recording,
    shared resources made once (the chain reproduces every write), a dispatch it cannot run left out with its
    reason while the rest still time."""
    from workbench.capture.timeline import time_in_order
    found = capture.dispatches(ETVK_DATA)
    quick = dict(min_samples=2, max_samples=3, min_time_s=0.0)
    rows = time_in_order(device, found, sampling=quick)
    assert rows["dispatch"].tolist() == [d.dispatch for d in found]
    assert rows["exact"].all() and (rows["median_us"] > 0).all() and (rows["way"] == "in-order").all()
    assert (rows["barriers"] == "captured").all()  # the capture kept ET-VK's barriers, and its sampler
    sampled = [b for d in found for b in d.bindings if b.kind == "combined_image_sampler"]
    assert sampled and all(b.sampler["addressModeU"] == "VK_SAMPLER_ADDRESS_MODE_REPEAT"
                           and b.sampler["unnormalizedCoordinates"] is False for b in sampled)
    assert all(d.barriers is not None for d in found) and any(d.barriers for d in found)
    assert (rows["memory"] == "pooled").all()  # bound into one arena, as VMA does ET-VK's tensors
    light = time_in_order(device, found, sampling=quick, barriers="light", memory="own")
    assert light["exact"].all() and (light["barriers"] == "light").all() and (light["memory"] == "own").all()
    with pytest.raises(ValueError, match="memory is one of pooled, own, captured, got 'vma'"):
        time_in_order(device, found, memory="vma")
    unkept = [dataclasses.replace(d, barriers=None) for d in found]  # a folder converted before barriers were kept
    assert (time_in_order(device, unkept, sampling=quick)["barriers"] == "light").all()
    with pytest.raises(ValueError, match="barriers is one of captured, light, full, got 'some'"):
        time_in_order(device, found, barriers="some")
    broken = [dataclasses.replace(found[0], command="vkCmdDispatchGraphAMDX")] + found[1:]
    rows = time_in_order(device, broken, sampling=quick)
    assert "vkCmdDispatchGraphAMDX" in rows.loc[rows["dispatch"] == found[0].dispatch, "reason"].item()
    assert rows["median_us"].notna().sum() == len(found) - 1


def test_in_order_at_the_captured_memory_places(device):
    """`memory="captured"`: ET-VK's allocations re-made and every buffer and image bound at its captured offset (the
    reader keeps each vkBind*Memory), so the tensors its memory planning aliased share memory again; the chain still
    reproduces every write (a tensor whose memory a later one took is passed over by the check), and aliasing
    that breaks a lifetime shows in the bytes: the places are real, not a label."""
    from workbench.capture.timeline import time_in_order, working_set
    quick = dict(min_samples=2, max_samples=3, min_time_s=0.0)
    found = capture.dispatches(ETVK_DATA)
    bound = [b for d in found for b in d.bindings if b.resource is not None]
    assert all(b.memory is not None for b in bound)
    size = working_set(found)  # ET-VK aliases: fewer bytes where it put them than an allocation each
    assert size["placed"] == size["keys"] and 0 < size["captured"] < size["resources"]
    rows = time_in_order(device, found, sampling=quick, memory="captured")
    assert rows["exact"].all() and (rows["memory"] == "captured").all(), rows["mismatch"].tolist()
    assert (rows["unplaced"] == 0).all()  # captured on this device: every place fits
    # what one dispatch reads and what it writes put at one place: the chain's bytes change
    d = next(d for d in found if len({b.resource for b in d.bindings if b.kind == "storage_buffer"}) >= 2)
    pair = sorted({b.resource for b in d.bindings if b.kind == "storage_buffer"})[:2]
    local = next(i for i in range(device.memory_properties.memoryTypeCount)
                 if device.memory_properties.memoryTypes[i].propertyFlags & 1)  # DEVICE_LOCAL
    clash = [dataclasses.replace(e, bindings=[dataclasses.replace(b, memory=("clash", 1 << 24, local, 0))
                                              if b.resource in pair else b for b in e.bindings]) for e in found]
    assert not time_in_order(device, clash, sampling=quick, memory="captured")["exact"].all()


def test_in_order_in_bursts(device):
    """`time_in_order(burst=N)`: the execution timed N submits at a time, each burst after the chain run untimed
    BUSY_CHAINS times a submit; the chain stays exact and the rows say `burst`."""
    from workbench.capture.timeline import time_in_order
    found = capture.dispatches(ETVK_DATA)
    rows = time_in_order(device, found, memory="captured", burst=2,
                         sampling=dict(min_samples=4, max_samples=4, min_time_s=0.0))
    assert rows["exact"].all() and (rows["burst"] == 2).all() and (rows["samples"] == 4).all()
    assert (time_in_order(device, found[:2], sampling=dict(min_samples=2, max_samples=2, min_time_s=0.0))["burst"]
            == 0).all()
    with pytest.raises(ValueError, match="burst must be a whole number >= 0"):
        time_in_order(device, found, burst=-2)


def test_cli_in_order_with_chains(tmp_path, capsys):
    """`capture fidelity DIR --ways in-order --chains 2`: the chain twice a submit, its rows say so."""
    inspector()
    out = tmp_path / "rows.csv"
    assert main(["capture", "fidelity", str(ETVK_DATA), "--ways", "in-order", "--chains", "2", "--quick",
                 "--barriers", "captured,light", "--memory", "pooled,own", "--warm-seconds", "0",
                 "--csv", str(out)]) == 0
    rows = pd.read_csv(out)
    assert (rows["chains"] == 2).all() and (rows["way"] == "in-order").all() and rows["exact"].all()
    assert rows.groupby(["barriers", "memory"]).size().to_dict() == {
        ("captured", "own"): 9, ("captured", "pooled"): 9, ("light", "own"): 9, ("light", "pooled"): 9}
    assert "in-order (barriers captured) (memory pooled): " in capsys.readouterr().out


def test_etvk_times_are_read_from_the_etdumps_integers():
    """ET-VK logs its dispatches at the GPU's absolute timestamps (about 1.8e18 ns on the H200); ExecuTorch's
    Inspector makes float milliseconds of them before subtracting, so its durations come in 2^-12 ms (244 ns) steps.
    The workbench's reading (`events.dispatch_rows`) takes end - start from the ETDump's integers instead: within
    two steps of the Inspector's, and exact (an H200 run's ETDump, committed)."""
    inspector()
    from workbench.etvk.model import events as E
    etdump = HERE / "capture_data" / "nvidia_h200" / "residual_add_run.etdp"
    exact = E.exact_durations_ns(etdump)
    frame = E.inspector_frame(etdump)
    dispatches = frame[frame["event_name"].astype(str).str.startswith("{")]
    assert len(dispatches) >= 9
    step_ns = 1e6 / 4096
    off = []
    for name, raw in zip(dispatches["event_name"], dispatches["raw"]):
        whole = np.array(exact[name], dtype=np.int64)
        inspected = np.array(raw) * 1e6
        assert len(whole) == len(inspected) and (whole > 0).all()
        assert np.all(np.abs(inspected - whole) <= 2 * step_ns)  # both ends rounded to the step
        off.append(np.abs(inspected - whole).max())
    assert max(off) > 32  # the Inspector's steps, not the GPU's 32 ns ticks
    rows = E.dispatch_rows(etdump)
    first = dispatches["event_name"].iloc[0]
    got = rows[rows["dispatch_id"] == E.parse_event_name(first)["dispatch_id"]]["gpu_us"].to_numpy()
    np.testing.assert_array_equal(got * 1e3, np.array(exact[first], dtype=float))
    assert E.exact_durations_ns(HERE / "capture_data" / "push" / "calls.jsonl") == {}  # not an ETDump: the Inspector's
