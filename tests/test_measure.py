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
