"""The fanned-out sweep on a local Dask cluster of 2 worker processes on lavapipe (everything on 127.0.0.1):
the split sweep gives the single-process rows, a worker killed mid-sweep loses and duplicates nothing, a missing
device is a row-level error, Ctrl-C keeps the finished rows."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from workbench import fanout
from workbench.measure import REPO, ResultsWriter
from workbench.fanout import cluster as fc
from workbench.benchmarks import conv as conv_bench
from workbench.kernels import conv_pw

SHAPES = ((1, 16, 12, 6, 10), (2, 20, 9, 5, 7))  # awkward channels and widths, batch 2
TILES = ((1, 1, 1), (1, 2, 1), (2, 1, 2), (4, 2, 4))
TIMING = (("min_time_s", 0.005), ("min_samples", 3), ("target_us", 100.0), ("max_time_s", 1.0))
SWEEP = fanout.ConvTileSweep(SHAPES, TILES, timing=TIMING)
# items of at least 0.3 s each: while one worker reports a result the other is mid-item, also on a loaded machine
# (with 5 ms items a loaded 2-core host could finish the sweep before any result found the other worker busy)
KILL_SWEEP = fanout.ConvTileSweep(SHAPES, TILES, timing=(("min_time_s", 0.3), *TIMING[1:]))


@pytest.fixture(scope="module")
def scheduler():
    """A local cluster of 2 worker processes, both on device 0 (lavapipe); tests join it by address."""
    cluster, _ = fanout.start_local_cluster(["0", "0"])
    from distributed import Client
    with Client(cluster) as client:
        client.wait_for_workers(2, timeout=60)
    yield cluster.scheduler_address
    cluster.close()


def _worker_validation_messages(address):
    from distributed import Client

    def messages():
        from workbench import vk
        return vk.validation_messages()
    with Client(address) as client:
        return {w: m for w, m in client.run(messages).items() if m}


def test_split_sweep_equals_the_single_process_sweep(scheduler, device):
    single = conv_bench.sweep(device, TILES, SHAPES, show_progress=False, adreno_gpu=None, **dict(TIMING))
    result = fanout.run_sweep(SWEEP, scheduler=scheduler, show_progress=False)
    split = result.frame
    assert "error" not in split, split.get("error")
    assert result.items == len(SHAPES) * len(TILES) and split["item"].is_unique
    assert split["worker"].nunique() == 2, "the items were not split across the 2 workers"
    assert set(result.devices["worker"]) == set(split["worker"])
    key = list(SWEEP.key_columns)
    assert sorted(map(tuple, split[key].values)) == sorted(map(tuple, single[key].values))
    assert set(single.columns) <= set(split.columns)
    merged = single.merge(split, on=key, suffixes=("_single", "_split"))
    assert len(merged) == len(single)
    for column in SWEEP.correctness_columns + ("variant", "global_size", "local_size", "bytes", "macs", "device",
                                               "driver", "use_dot_ext"):
        assert (merged[f"{column}_single"] == merged[f"{column}_split"]).all(), column
    assert (split["max_lsb_diff"] == 0).all()
    assert (split["median_us"] > 0).all()
    assert not _worker_validation_messages(scheduler)


def test_worker_killed_mid_sweep_loses_and_duplicates_nothing(scheduler, tmp_path):
    from distributed import Client
    killed = {}

    def kill_a_busy_worker(item, rows):
        if killed:
            return
        reporter = rows[0]["worker"]
        with Client(scheduler) as client:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # a worker while it runs an item, the other one first
                # (a clean-clone CI once had the other worker take no item for a whole sweep: the reporter, then)
                busy = sorted((w for w, keys in client.processing().items() if keys), key=lambda w: w == reporter)
                if busy:
                    break
                time.sleep(0.02)
            if not busy:  # both between items: try again at the next result (`killed` is asserted)
                return
            running = list(client.processing()[busy[0]])
            pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
        os.kill(pid, signal.SIGKILL)
        # task keys end in the item's index in the plan (one device key here: the sweep's item order)
        killed.update(worker=busy[0], pid=pid, items={int(k.rsplit("-", 1)[1]) for k in running})

    writer = ResultsWriter(tmp_path / "killed")
    result = fanout.run_sweep(KILL_SWEEP, scheduler=scheduler, writer=writer, on_result=kill_a_busy_worker,
                              show_progress=False)
    writer.close()
    frame = result.frame
    assert killed, "no worker was killed"
    assert "error" not in frame, frame.get("error")
    expected = {fanout.WorkItem(KILL_SWEEP.name, frame["device_key"].iloc[0], p).key for p in KILL_SWEEP.items()}
    assert set(frame["item"]) == expected and frame["item"].is_unique  # nothing lost, nothing duplicated
    assert (frame["max_lsb_diff"] == 0).all()
    on_disk = pd.read_csv(writer.csv_path)
    assert sorted(on_disk["item"]) == sorted(expected)
    # the items the killed worker was running ran again on another process
    lost = [fanout.WorkItem(KILL_SWEEP.name, frame["device_key"].iloc[0], KILL_SWEEP.items()[i]).key
            for i in killed["items"]]
    assert lost and (frame.set_index("item").loc[lost, "pid"] != killed["pid"]).all()


def test_missing_device_is_a_row_level_error(scheduler):
    one = fanout.ConvTileSweep(SHAPES[:1], TILES[:1], timing=TIMING)
    result = fanout.run_sweep(one, scheduler=scheduler, devices=["NoSuchGPU"], show_progress=False)
    frame = result.frame
    assert len(frame) == 1 and frame["error"].str.contains("no worker has a Vulkan device matching 'NoSuchGPU'").all()
    assert frame["error"].str.contains("llvmpipe").all()  # and says which devices the workers have
    assert frame["tile"].iloc[0] == "M1·N1·K1"


def test_worker_without_its_device_gives_error_rows_and_the_others_run():
    one = fanout.ConvTileSweep(SHAPES[:1], TILES[:2], timing=TIMING)
    result = fanout.run_sweep(one, workers=["0", "7"], show_progress=False)
    frame = result.frame
    bad = frame[frame["error"].notna()]
    good = frame[frame["error"].isna()]
    assert len(bad) == 2 and bad["error"].str.contains("no Vulkan device with index 7").all()
    assert bad["device"].str.contains("WORKBENCH_DEVICE=7").all()
    assert len(good) == 2 and (good["max_lsb_diff"] == 0).all()
    assert "(missing" in " ".join(result.devices["device"])


def test_interrupt_keeps_finished_rows(scheduler, tmp_path):
    writer = ResultsWriter(tmp_path / "interrupted")

    def interrupt(item, rows):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as interrupted:
        fanout.run_sweep(SWEEP, scheduler=scheduler, writer=writer, on_result=interrupt, show_progress=False)
    writer.close()
    partial = interrupted.value.partial  # the rows so far, for callers without a writer (notebooks)
    assert len(partial.frame) == 1 and partial.items == len(SWEEP.items())
    kept = pd.read_csv(writer.csv_path)
    assert len(kept) == 1 and kept["max_lsb_diff"].iloc[0] == 0
    assert (tmp_path / "interrupted.parquet").exists()
    again = fanout.run_sweep(fanout.ConvTileSweep(SHAPES[:1], TILES[:1], timing=TIMING), scheduler=scheduler,
                             show_progress=False)  # the cluster is still usable
    assert len(again.frame) == 1


def test_cli_ctrl_c_stops_the_sweep_and_keeps_rows(tmp_path):
    """Ctrl-C in a terminal reaches the whole process group: the CLI, the nannies and the workers."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "WORKBENCH_VALIDATION": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "sweep", "conv-pw", "--workers", "0,0",
                             "--out", str(tmp_path)], cwd=tmp_path, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    csv = tmp_path / "conv_pw_devices.csv"
    deadline = time.monotonic() + 240  # Ctrl-C only once two rows are written, never at a slow start-up's mercy
    while not (csv.exists() and csv.stat().st_size and len(pd.read_csv(csv)) >= 2):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"no 2 rows in {csv} within 240 s: {proc.communicate()}")
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    lines = [line for line in err.splitlines() if "interrupted:" in line]
    assert len(lines) == 1 and "finished rows kept" in lines[0], err
    assert "Traceback" not in err, err  # the workers leave Ctrl-C to the sweep's process (no dying worker's trace)
    kept = pd.read_csv(csv)
    assert len(kept) >= 2 and kept["item"].is_unique and (kept["max_lsb_diff"] == 0).all()
    assert len(kept) < len(fanout.ConvTileSweep.suite(cpu_device=True).items())


def test_device_chart_compares_devices():
    from workbench.viz.device_views import compare_devices, device_table
    rows = [{"device_key": d, "shape": s, "tile": t, "GOP/s": v}
            for d, scale in (("A", 1.0), ("B", 2.0)) for s in ("s1", "s2") for t, v in (("M1", 1.0), ("M2", 3.0))
            for v in [v * scale]]
    df = pd.DataFrame(rows + [{"device_key": "B", "shape": "s1", "tile": "M9", "GOP/s": np.nan,
                               "error": "DeviceNotFoundError: gone"}])
    table = device_table(df, "GOP/s", "tile", "shape")
    assert list(table.columns) == ["A", "B"] and (table["B"] / table["A"] == 2.0).all()
    fig = compare_devices(df, "GOP/s", "tile", facet="shape")
    assert len(fig.axes) == 4  # two shapes × (values, ratio to the first device)
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_plan_routes_items_by_device_key():
    probes = {"tcp://127.0.0.1:1": {"error": None, "key": "GPU X", "physical_key": "GPU X @ h#0", "host": "h",
                                    "selector": "0"},
              "tcp://127.0.0.1:2": {"error": None, "key": "GPU X", "physical_key": "GPU X @ h#1", "host": "h",
                                    "selector": "1"}}
    shared, _ = fc._plan(SWEEP, probes, each_device=False, wanted=None)
    each, _ = fc._plan(SWEEP, probes, each_device=True, wanted=None)
    assert len(shared) == len(SWEEP.items()) and {i.device for i in shared} == {"GPU X"}
    assert len(each) == 2 * len(SWEEP.items()) and {i.device for i in each} == {"GPU X @ h#0", "GPU X @ h#1"}
    assert len({i.key for i in each}) == len(each)


def test_join_serves_local_devices_to_an_existing_cluster_and_a_host_that_leaves_gives_error_rows(tmp_path):
    """`workbench join ADDRESS` adds this machine's devices to a cluster that has none; a sweep then runs there.
    When that host leaves for good mid-sweep (nanny and worker killed), its unfinished items become error rows."""
    from distributed import Client, Scheduler, SpecCluster
    bare = SpecCluster(workers={}, scheduler={"cls": Scheduler, "options": {
        "host": "127.0.0.1", "port": 0, "dashboard": False, "dashboard_address": "127.0.0.1:0"}})
    env = {**os.environ, "PYTHONPATH": str(REPO), "WORKBENCH_VALIDATION": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "join", bare.scheduler_address, "--workers", "0",
                             "--host", "127.0.0.1"], cwd=tmp_path, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        with Client(bare.scheduler_address) as client:
            client.wait_for_workers(1, timeout=60)
        one = fanout.ConvTileSweep(SHAPES[:1], TILES[:1], timing=TIMING)
        result = fanout.run_sweep(one, scheduler=bare.scheduler_address, show_progress=False)
        assert len(result.frame) == 1 and result.frame["max_lsb_diff"].iloc[0] == 0
        assert result.devices["selector"].tolist() == ["0"]

        def host_leaves(item, rows):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        left = fanout.run_sweep(SWEEP, scheduler=bare.scheduler_address, on_result=host_leaves,
                                orphan_timeout_s=2.0, show_progress=False).frame
        assert len(left) == len(SWEEP.items()) and left["item"].is_unique
        lost = left[left["error"].notna()]
        assert len(lost) >= 1 and lost["error"].str.contains("DeviceLostError: no worker has served device").all()
        assert (left[left["error"].isna()]["max_lsb_diff"] == 0).all()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        bare.close()


def test_rows_that_left_with_their_worker_are_watched_again_not_waited_for(monkeypatch):
    """A finished item whose worker left before its rows were fetched: the fetch gives up after FETCH_S and the item
    is watched again (recomputed elsewhere, or an orphan), where waiting hung a clean-clone CI run; an item whose own
    error is a TimeoutError is an error row."""
    monkeypatch.setattr(fc._Gatherer, "FETCH_S", 0.01)
    item = fanout.WorkItem(SWEEP.name, "dev", tuple(SWEEP.items()[0]))

    class Fut:
        def __init__(self, status, outcomes):
            self.status, self.outcomes, self.timeouts = status, list(outcomes), []

        def result(self, timeout=None):
            self.timeouts.append(timeout)
            got = self.outcomes.pop(0)
            if isinstance(got, BaseException):
                raise got
            return got

    class Watched(list):
        add = list.append
    gather = fc._Gatherer(None, SWEEP, [item], [], None, None, 60.0)
    gather.pending = Watched()
    left = Fut("lost", [TimeoutError(), [{"item": item.key, "error": None}]])
    gather.futures = {left: item}
    assert gather._collect(left) is False and gather.pending == [left] and item.key not in gather.rows
    assert gather._collect(left) is True and gather.rows[item.key] == [{"item": item.key, "error": None}]
    assert left.timeouts == [0.01, 0.01]
    own = Fut("error", [TimeoutError("the item's own")])
    gather.futures, gather.rows, gather.pending = {own: item}, {}, Watched()
    assert gather._collect(own) is True and gather.pending == []
    assert gather.rows[item.key][0]["error"] == "TimeoutError: the item's own"


def test_an_exception_inside_an_item_is_an_error_row_and_the_sweep_goes_on(device):
    bad = fanout.ConvTileSweep(SHAPES[:1], ((1, 1, 1), (3, 1, 1)), timing=TIMING)
    frame = fanout.run_here(bad).frame
    assert len(frame) == 2 and frame["item"].is_unique
    ok, failed = frame[frame["error"].isna()], frame[frame["error"].notna()]
    assert len(ok) == 1 and ok["max_lsb_diff"].iloc[0] == 0
    assert failed["error"].iloc[0].startswith("ValueError: tile_m=3 is out of range")
    assert failed["tile"].iloc[0] == "M3·N1·K1" and failed["device"].iloc[0] == device.info.name
