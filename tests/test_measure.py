"""workbench.measure: statistics, stability, rows, ResultsWriter / ResultsReader; the copy benchmark and the runtime's costs."""
import json

import numpy as np
import pandas as pd
import pytest
import torch

from workbench import cli, measure
from workbench.measure import method
from workbench.benchmarks import copy as copy_bench
from workbench.kernels.copy import CopySpec, record_copy


def test_copy_kernel_copies_exactly(device):
    data = np.random.default_rng(0).integers(0, 2**32, 4096 * 4 + 4, dtype=np.uint64).astype(np.uint32)
    spec = CopySpec(data.nbytes)
    with device.buffer(data) as src, device.buffer(nbytes=data.nbytes) as dst, device.record() as rec:
        record_copy(rec, device, spec, dst, src)
        rec.submit()
        np.testing.assert_array_equal(dst.download(np.uint32), CopySpec.reference(data))
    with pytest.raises(ValueError, match="multiple of 16 B, got 20"):
        CopySpec(20)


def test_summary_statistics():
    s = measure.summarize_ns([1000, 2000, 3000, 4000, 100000])
    assert s["samples"] == 5 and s["median_us"] == 3.0 and s["min_us"] == 1.0
    assert s["p10_us"] < s["median_us"] < s["p90_us"]
    with pytest.raises(ValueError):
        measure.summarize_ns([])


def test_measurement_row_throughput(device):
    row = measure.measurement_row("k", measure.environment(device), [1e6, 1e6], bytes_moved=2_000_000, macs=500_000,
                                shape="1x2x3x4")
    assert row["GB/s"] == pytest.approx(2.0) and row["GOP/s"] == pytest.approx(1.0)
    assert row["device"] == device.info.name and row["driver"] == device.info.driver_name
    assert row["shape"] == "1x2x3x4" and row["commit"]


def test_writer_keeps_rows_as_they_come(tmp_path):
    writer = measure.ResultsWriter(tmp_path / "suite", {"device": "x"})
    writer.append({"a": 1})
    assert pd.read_csv(tmp_path / "suite.csv")["a"].tolist() == [1]  # on disk before close
    writer.append({"a": 2, "b": 3.5})
    df = writer.close()
    assert len(df) == 2
    assert pd.read_parquet(tmp_path / "suite.parquet")["b"].isna().tolist() == [True, False]
    meta = json.loads((tmp_path / "suite.json").read_text())
    assert meta["device"] == "x" and meta["rows"] == 2


def test_bench_copy_rows(device, tmp_path):
    with measure.ResultsWriter(tmp_path / "copy", measure.environment(device)) as writer:
        df = copy_bench.bench_copy(device, [0.25, 1], writer=writer, show_progress=False, min_time_s=0.01)
    where = "cuda" if device.info.vendor == "NVIDIA" and torch.cuda.is_available() else "cpu"
    assert set(df["method"]) == {"shader uvec4", "vkCmdCopyBuffer", f"torch copy_ ({where})"}
    assert len(df) == 6 and (df["GB/s"] > 0).all() and (df["samples"] >= 10).all()
    assert (df["bytes"] == (df["size_mib"] * 2**21).astype(int)).all()
    largest = df[(df.timer == "vulkan timestamps") & (df.size_mib == 1)]
    assert copy_bench.peak_copy_gbps(df) == largest["GB/s"].max()
    assert len(pd.read_parquet(tmp_path / "copy.parquet")) == 6


def test_dispatch_overhead(device):
    df = copy_bench.bench_dispatch_overhead(device, dispatches=20)
    assert (df["host_median_us"] > 0).all() and len(df) == 6
    churn = df.set_index("what")["rss_kib_per_100_pipelines"].dropna()
    assert len(churn) == 2 and (churn >= -1024).all()  # workbench.vk vs the bare binding, per 100 pipelines


def test_cli_devices_and_errors(capsys):
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "driver_name" in out and "integer_dot_product" in out
    assert cli.main(["--device", "no-such-gpu", "devices"]) == 2
    assert "no Vulkan device matches 'no-such-gpu'" in capsys.readouterr().err


def test_cli_bench_copy(tmp_path, capsys):
    assert cli.main(["bench", "copy", "--sizes", "0.5", "--out", str(tmp_path)]) == 0
    assert "copy roofline" in capsys.readouterr().out
    assert (tmp_path / "copy.csv").exists() and (tmp_path / "copy.json").exists()


def test_cli_layout(tmp_path, capsys):
    assert cli.main(["layout", "4W4C", "--sizes", "1,8,2,8", "--element", "0,5,1,2",
                     "--png", str(tmp_path / "l.png")]) == 0
    out = capsys.readouterr().out
    assert "word 22 lane 1, byte address 89" in out and (tmp_path / "l.png").stat().st_size > 1000
    assert cli.main(["layout", "5X5Y", "--sizes", "1,8,2,8", "--element", "0,0,0,0"]) == 2
    assert "unknown layout" in capsys.readouterr().err.lower()


def test_stability_verdicts():
    """A clock ramp (slow first quarter), drift and wide spread are unstable; a flat set is stable."""
    flat = np.full(40, 100.0) + np.random.default_rng(0).normal(0, 0.5, 40)
    assert measure.stability(flat)["stable"]
    ramp = np.concatenate([np.full(10, 400.0), np.full(30, 100.0)])  # the first samples at an idle clock
    verdict = measure.stability(ramp)
    assert not verdict["stable"] and verdict["drift_pct"] < -50
    spread = np.tile([50.0, 100.0, 150.0, 200.0], 10)
    assert not measure.stability(spread)["stable"] and measure.stability(spread)["spread_pct"] > 10


def test_unstable_sets_are_measured_again(device):
    """sample_recording throws an unstable set away and samples again (up to `attempts`); the row says so."""
    from workbench.kernels.copy import CopySpec, record_copy
    spec = CopySpec(4096)
    with device.buffer(nbytes=spec.nbytes) as src, device.buffer(nbytes=spec.nbytes) as dst, \
            device.record("stability") as rec:
        record_copy(rec, device, spec, dst, src)
        calls = {"n": 0}
        real = method.stability

        def fake(samples):  # the first two sets "drift", the third is fine
            calls["n"] += 1
            return {**real(samples), "stable": calls["n"] >= 3}
        method.stability = fake
        try:
            gpu, host = measure.sample_recording(rec, min_samples=3, min_time_s=0.0, attempts=5)
        finally:
            method.stability = real
    assert gpu.attempts == 3 and calls["n"] == 3
    row = measure.measurement_row("copy", measure.environment(device), gpu, host_ns=host)
    assert row["attempts"] == 3 and "drift_pct" in row and "spread_pct" in row and "stable" in row


def test_keep_busy_only_on_gpus():
    """keep_busy resubmits for the given time on GPUs (their clocks ramp up under load) and not at all on CPU
    devices."""
    from types import SimpleNamespace

    calls = []
    rec = SimpleNamespace(submit=lambda: calls.append(1))
    measure.keep_busy(rec, SimpleNamespace(info=SimpleNamespace(is_cpu=True)), seconds=0.05)
    assert calls == []
    measure.keep_busy(rec, SimpleNamespace(info=SimpleNamespace(is_cpu=False)), seconds=0.05)
    assert len(calls) > 1
    calls.clear()
    measure.keep_busy(rec, SimpleNamespace(info=SimpleNamespace(is_cpu=True)), seconds=0.05, cpu_too=True)
    assert len(calls) > 1


def test_ways_of_timing_are_checked_and_named():
    assert measure.parse_between("none") == ("none", 0)
    assert measure.parse_between("copy:1") == ("copy", 1 << 20)
    assert measure.parse_between("shader:0.00001") == ("shader", 16)  # rounded up to 16 B
    for bad in ("copy", "copy:0", "none:1", "dma:4", "copy:x"):
        with pytest.raises(ValueError, match=f"between must be 'none', 'copy:MIB' or 'shader:MIB' with MIB > 0, "
                                             f"got '{bad}'"):
            measure.parse_between(bad)
    with pytest.raises(ValueError, match="back_to_back must be >= 1, got 0"):
        measure.Way(0)
    with pytest.raises(ValueError, match="between='copy:1' needs back_to_back >= 2, got back_to_back=1"):
        measure.Way(1, "copy:1")
    with pytest.raises(ValueError, match="timestamps must be one of \\('etvk', 'workbench'\\)"):
        measure.Way.named("gpu")
    way = measure.Way.named("etvk", "full", "copy:1", back_to_back=3)
    assert way == measure.Way(3, "copy:1", barrier_timed=True, full_barriers=True)
    assert way.columns() == {"back_to_back": 3, "between": "copy:1", "barrier_timed": True, "full_barriers": True}
    assert way.recording_options() == {"barrier_timed": True, "full_barriers": True}


def test_a_way_times_the_copies_and_not_what_runs_between(device):
    """Way.sample: `back_to_back` copies of what is recorded, the between work before each, the time per copy
    counting the dispatches only; "shader:MIB" records the caller's shader copy."""
    spec = CopySpec(4096)
    sampling = dict(min_samples=3, max_samples=3, min_time_s=0.0, warmup=0)
    with device.buffer(nbytes=spec.nbytes) as src, device.buffer(nbytes=spec.nbytes) as dst:
        recorded = []

        def record(rec):
            record_copy(rec, device, spec, dst, src, label="timed")
            recorded.append([c.label for c in rec.commands])
        gpu, host = measure.Way(2, "copy:0.01").sample(device, record, label="way", **sampling)
        assert recorded[-1] == ["between", "timed", "between", "timed"] and len(gpu) == 3 and (gpu > 0).all()
        copies = []
        shader_copy = lambda rec, d, s, nbytes, label: (copies.append(nbytes),  # noqa: E731
                                                        record_copy(rec, device, CopySpec(nbytes), d, s, label=label))
        gpu, _ = measure.Way(2, "shader:0.01", barrier_timed=True).sample(device, record, shader_copy=shader_copy,
                                                                          **sampling)
        assert copies == [10496, 10496] and len(gpu) == 3
        with pytest.raises(ValueError, match="needs a shader_copy"):
            measure.Way(2, "shader:1").sample(device, record)


def test_results_reader_reads_what_the_writer_wrote(tmp_path):
    with measure.ResultsWriter(tmp_path / "suite", {"device": "x"}) as writer:
        rows = measure.Rows(writer)
        rows.append({"kernel": "a", "GB/s": 1.0})
        rows.extend([{"kernel": "b", "GB/s": 2.0}])
    assert [r["kernel"] for r in rows] == ["a", "b"] and len(writer.rows) == 2   # each row written through at once
    results = measure.ResultsReader(tmp_path)
    assert results.names() == ["suite"] and results.has("suite") and not results.has("other")
    assert list(results["suite"]["kernel"]) == ["a", "b"]
    assert results.metadata("suite")["device"] == "x" and results.metadata("other") == {}
    assert results.load("missing") is None
    assert list(results.load("missing", "suite")["GB/s"]) == [1.0, 2.0]   # the first name the folder holds


def test_results_reader_falls_back_to_parquet_and_reads_an_empty_csv(tmp_path):
    pd.DataFrame({"x": [1, 2]}).to_parquet(tmp_path / "only_parquet.parquet")
    (tmp_path / "started.csv").write_text("")   # a run stopped before its first row
    results = measure.ResultsReader(tmp_path)
    assert list(results["only_parquet"]["x"]) == [1, 2]
    assert results["started"].empty
    with pytest.raises(FileNotFoundError, match=r"no peak\.csv or peak\.parquet in .* \(it holds: only_parquet, "
                                                r"started\)"):
        results["peak"]
    assert measure.ResultsReader(tmp_path / "nowhere").names() == []


# --- numbers that hold up: the cache regime, warm clocks, the floors, the copy check ------------------------------

def test_cold_rotation_spans_four_caches_and_tiny_sets_add_a_sweep(device, monkeypatch):
    from workbench.measure import cache
    monkeypatch.setenv("WORKBENCH_LLC_BYTES", str(2**20))
    assert cache.last_level_cache(device) == (2**20, "WORKBENCH_LLC_BYTES")
    hot = cache.rotation(device, 4096, "hot")
    assert hot.copies == 1 and hot.flush_bytes == 0 and hot.columns()["cache"] == "hot"
    cold = cache.rotation(device, 2**18, "cold")
    assert cold.copies == 16 and cold.rotated_bytes == 4 * 2**20 and cold.flush_bytes == 0
    tiny = cache.rotation(device, 64, "cold")      # 512 sets of 64 B would span 32 KiB: a sweep of 2 caches instead
    assert tiny.copies == cache.SWEPT_COPIES and tiny.flush_bytes == 2 * 2**20
    assert "sweep" in tiny.columns()["cache_method"]
    quick = cache.rotation(device, 64, "cold", quick=True)
    assert quick.copies == 4 and quick.flush_bytes == 0 and "not cold" in quick.columns()["cache_method"]
    class Gpu:  # the default regime: cold where a GPU's cache holds the working set; hot on a CPU device
        class info:
            is_cpu, name, vendor = False, "a GPU", "some vendor"
    assert cache.default_regime(Gpu, 2**19) == "cold" and cache.default_regime(Gpu, 2**21) == "hot"
    assert cache.default_regime(device, 2**19) == ("hot" if device.info.is_cpu else "cold")
    with pytest.raises(ValueError, match="cache regime must be one of hot, cold, got 'warm'"):
        cache.rotation(device, 64, "warm")
    with pytest.raises(ValueError, match="expected cache regimes among hot, cold"):
        cache.parse_regimes("cold,lukewarm")
    monkeypatch.setenv("WORKBENCH_LLC_BYTES", "lots")
    with pytest.raises(ValueError, match="WORKBENCH_LLC_BYTES must be a positive byte count, got 'lots'"):
        cache.last_level_cache(device)


def test_a_swept_rotation_times_the_kernel_not_the_sweep(device, monkeypatch):
    """A cold copy of 1 KiB against a 256 KiB 'cache', at most 8 sets: 2 sets rotated, a 512 KiB read-only sweep
    before each copy, recorded but not timed; every set is copied (each destination holds its source)."""
    from workbench.kernels.copy import CopySpec, flush_for, record_copy
    from workbench.measure import cache
    monkeypatch.setenv("WORKBENCH_LLC_BYTES", str(2**18))
    spec = CopySpec(1024)
    rot = cache.rotation(device, spec.bytes_moved(), "cold", max_copies=8)
    assert rot.copies == 2 and rot.flush_bytes == 2**19
    pairs = [(device.buffer(np.full(256, i, np.uint32)), device.buffer(nbytes=1024)) for i in range(rot.copies)]
    try:
        with pytest.raises(ValueError, match="needs a sweep of 524288 B before each dispatch"):
            cache.sample_rotated(device, rot, lambda rec, i: None, repeats=2)
        with flush_for(device, rot) as flush:
            gpu, host, per = cache.sample_rotated(
                device, rot, lambda rec, i: record_copy(rec, device, spec, pairs[i][1], pairs[i][0]), repeats=2,
                flush=flush, min_samples=2, max_samples=3, min_time_s=0.0)
        assert per == 2 and len(gpu) >= 2 and (gpu > 0).all()
        for i, (src, dst) in enumerate(pairs):
            assert (dst.download(np.uint32) == i).all()
    finally:
        for src, dst in pairs:
            src.close()
            dst.close()


def test_a_sample_set_below_the_settled_clock_is_retaken(device):
    from workbench.measure import method

    class Fake:
        pass
    fake = Fake()
    method._settled_mhz.pop(id(fake), None)
    assert method.clock_ok(fake, {"sm_clock_mhz_median": float("nan")}) is None      # no clock source
    assert method.clock_ok(fake, {"sm_clock_mhz_median": 1980.0, "max_sm_clock_mhz_limit": 1980.0}) is True
    assert method.clock_ok(fake, {"sm_clock_mhz_median": 1900.0, "max_sm_clock_mhz_limit": 1980.0}) is True
    assert method.clock_ok(fake, {"sm_clock_mhz_median": 345.0, "max_sm_clock_mhz_limit": 1980.0}) is False
    other = Fake()   # the first set of a run has no history: 60 % of the maximum is the floor
    assert method.clock_ok(other, {"sm_clock_mhz_median": 345.0, "max_sm_clock_mhz_limit": 1980.0}) is False


def test_samples_in_bursts_each_after_its_warm_up(device):
    """`sample_each(burst=N)`: the submits timed N at a time, each burst after its own warm-up (the busy recording
    kept running on GPUs, then `warmup` submits of the timed one), as a runtime times its executions after its
    warm-up; the clock columns are the readings at the timed submits."""
    spec = CopySpec(1 << 16)
    src, dst = device.buffer(nbytes=spec.nbytes), device.buffer(nbytes=spec.nbytes)

    class Counted:  # the recording, its submits counted
        def __init__(self, rec):
            self.rec, self.device, self.submits = rec, rec.device, 0

        def submit(self):
            self.submits += 1
            return self.rec.submit()
    try:
        with device.record(label="copy") as rec:
            record_copy(rec, device, spec, dst, src)
            counted = Counted(rec)
            per, clock = method.sample_each(counted, warmup=1, min_samples=4, max_samples=4, min_time_s=0.0,
                                            burst=2, busy=counted)
            assert [len(v) for v in per.values()] == [4] and (np.concatenate(list(per.values())) > 0).all()
            if device.info.is_cpu:  # no warm-up time on a CPU device: two bursts of 1 warm-up + 2 timed submits
                assert counted.submits == 6
            assert counted.submits >= 6 and "sm_clock_mhz_median" in clock and "clock_ok" in clock
            for bad in (-1, True, 1.5):
                with pytest.raises(ValueError, match="burst must be a whole number >= 0"):
                    method.sample_each(rec, burst=bad)
    finally:
        src.close()
        dst.close()
    sampler = measure.ClockSampler(device)  # the columns of the readings at the timed submits, not of every one
    sampler.samples, sampler.source = [(1980.0, 1980.0, 500.0), (1200.0, 1980.0, 300.0)], "NVML"
    assert sampler.columns()["sm_clock_mhz_median"] == 1590.0
    at = sampler.columns(at=[1980.0, float("nan"), 1900.0])
    assert at["sm_clock_mhz_median"] == 1940.0 and at["clock_samples"] == 2 and at["max_sm_clock_mhz_limit"] == 1980.0
    assert sampler.columns(at=[float("nan")])["clock_samples"] == 0


def test_a_set_is_taken_again_where_it_was_not_good(monkeypatch):
    """`method.retaken`, the one retake rule of sample_recording and the interleaved A/B: a set below the settled
    clock is taken again after a full warm-up on the recordings, an unstable one again at once; the last set is
    returned with its `clock_ok` and the attempts taken."""
    class Info:
        is_cpu = False

    class Gpu:
        info = Info()

    class Rec:
        submits = 0

        def submit(self):
            Rec.submits += 1
    monkeypatch.setattr(method, "GPU_WARMUP_S", 0.01)

    def taking(sets):
        sets = iter(sets)

        def take():
            mhz, stable = next(sets)
            return mhz, {"sm_clock_mhz_median": mhz, "max_sm_clock_mhz_limit": 1980.0}, stable
        return take
    got, columns, taken = method.retaken(taking([(900.0, True), (1950.0, True)]), Gpu(), [Rec()], 3)
    assert (got, taken, columns["clock_ok"]) == (1950.0, 2, True) and Rec.submits > 0   # warmed before the retake
    Rec.submits = 0
    got, columns, taken = method.retaken(taking([(1960.0, False), (1970.0, True)]), Gpu(), [Rec()], 3)
    assert (got, taken, columns["clock_ok"]) == (1970.0, 2, True) and Rec.submits == 0  # unstable: again at once
    got, columns, taken = method.retaken(taking([(800.0, True)] * 3), Gpu(), [Rec()], 3)
    assert (got, taken, columns["clock_ok"]) == (800.0, 3, False)                       # the last, flagged


def test_an_idle_gpu_gets_the_full_warm_up(device):
    from workbench.measure import warmup

    class Info:
        is_cpu = False

    class Gpu:
        info = Info()
    gpu = Gpu()
    assert warmup.warmup_seconds(gpu) == warmup.GPU_WARMUP_S            # never used: idle
    warmup.mark_busy(gpu)
    assert warmup.warmup_seconds(gpu) == warmup.SHORT_WARMUP_S
    warmup._last_busy[id(gpu)] -= warmup.IDLE_S + 0.1
    assert warmup.warmup_seconds(gpu) == warmup.GPU_WARMUP_S
    assert warmup.warmup_seconds(device) == (0.0 if device.info.is_cpu else warmup.warmup_seconds(device))


def test_copy_at_traffic_gives_the_floors_and_the_drift(device):
    copies = copy_bench.CopyAtTraffic(device, [4096, 65536], quick=True, show_progress=False, regimes=("cold", "hot"))
    frame = copies.frame
    assert set(frame["when"].dropna()) >= {"start", "dram floor"} and "dispatch floor" in set(frame["kernel"])
    row = copies.annotate({"GB/s": 1.0, "median_us": 10.0, "cache": "cold"}, 4096)
    assert row["cache"] == "cold" and row["copy_GBps"] > 0 and row["copy_p90_us"] >= row["copy_p10_us"]
    assert row["dram_floor_us"] == pytest.approx(4096 / copies.dram_GBps / 1e3)
    assert row["dram_fraction"] == pytest.approx(row["dram_floor_us"] / 10.0) and row["dispatch_floor_us"] > 0
    with pytest.raises(ValueError, match="measured its copies cold, hot, not 'warm'"):
        copies.annotate({"GB/s": 1.0, "median_us": 1.0}, 4096, "warm")
    end = copies.finish()
    assert set(end["when"]) == {"end"} and end["copy_drift_pct"].notna().all()
    assert set(copies.drift()["cache"]) == {"cold", "hot"}


def test_the_copy_check_flags_a_row_faster_than_its_copy():
    from workbench.benchmarks import roof_check as RC
    base = {"kernel": "q4_gemv", "bytes": 2 * 2**20, "median_us": 10.0, "p10_us": 9.8, "copy_p90_us": 5.1,
            "copy_GBps": 2 * 2**20 / 5.0 / 1e3, "cache": "cold"}
    ok = dict(base, **{"GB/s": 2 * 2**20 / 10.0 / 1e3}, copy_fraction=0.5)
    noise = dict(base, copy_fraction=1.03)              # within 10.0/9.8 x 5.1/5.0 = 1.0408
    above = dict(base, copy_fraction=1.06)
    old = {k: v for k, v in above.items() if k not in ("copy_p90_us", "cache")}    # a row before the columns
    diag = dict(above, diagnostic=2)
    captured = dict(above, traffic_upper_bound=True)   # bytes = the ranges bound to a captured dispatch
    cuda = dict(above, timer="cuda events (a CUDA graph of 6 calls)")  # the field's GEMVs through torch
    checked = RC.check_copy_rows([pd.DataFrame([ok, noise, above, old, diag, captured, cuda])])
    assert checked["above_copy"].tolist() == [False, False, True, False, False, False, False]
    assert checked["copy_excluded"].iloc[6] == RC.OTHER_API and RC.instruction_path(cuda) is None
    assert "upper bound" in checked["copy_excluded"].iloc[5]
    assert checked["copy_slack"].iloc[0] == pytest.approx(10.0 / 9.8 * 5.1 / 5.0)
    assert checked["copy_slack"].iloc[3] == pytest.approx(10.0 / 9.8 * 1.10)           # the method's bound
    assert checked["cache"].tolist()[3] == "unknown" and checked["copy_excluded"].notna().tolist()[4]
