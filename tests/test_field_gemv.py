"""The field's GEMVs through torch (workbench.benchmarks.field_gemv): traffic, cases, the float64 check (a wrong
packing fails it), rows built from torch's CPU int4 op, the skip without CUDA, the suite's and the CLI's --field.
No timing is asserted."""
import numpy as np
import pytest
import torch

from workbench.benchmarks import field_gemv as F
from workbench.benchmarks import q4_gemv as B

HAS_CPU_INT4 = hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu")


def test_traffic_and_cases():
    c = F.FieldCase(F.INT4, "m", "l", 4096, 14336, 32)
    assert c.bytes_moved == 14336 * 4096 // 2 + 14336 * 128 * 4 + 4096 * 2 + 14336 * 2
    assert F.FieldCase(F.FP16, "m", "l", 4096, 14336).bytes_moved == 14336 * 4096 * 2 + 4096 * 2 + 14336 * 2
    assert c.macs == 4096 * 14336
    todo = F.cases(B.SHAPES, (32, 128))
    assert len(todo) == 3 * len(B.SHAPES)  # every suite shape takes int4 (K a multiple of 128) and fp16
    assert {c.impl for c in todo} == set(F.IMPLS)
    assert [c.impl for c in F.cases(B.QUICK_SHAPES, (32,))] == [F.INT4, F.FP16, F.FP16]  # K = 96: fp16 alone


def test_refusals_are_one_line():
    with pytest.raises(ValueError, match="group 32/64/128 dividing K.*got K=96 N=100 group=32"):
        F.FieldCase(F.INT4, "m", "l", 96, 100, 32)
    with pytest.raises(ValueError, match="one of torch-int4-tinygemm, cublas-fp16, got 'xnnpack'"):
        F.FieldCase("xnnpack", "m", "l", 256, 64)


@pytest.mark.skipif(not HAS_CPU_INT4, reason="this torch has no _weight_int4pack_mm_for_cpu")
def test_int4_reference_passes_and_a_wrong_packing_fails():
    case = F.FieldCase(F.INT4, "m", "l", 1024, 128, 32)
    prob = F.problem(case, seed=3)
    t = F.on_device(prob, "cpu")
    assert F.compare(F.call(case, t, "cpu"), prob)["correct"]
    q = prob.operands["q"]
    swapped = q.clone()
    swapped[:, ::2], swapped[:, 1::2] = q[:, 1::2], q[:, ::2]
    wrong = F.compare(F.call(case, dict(t, w=F.pack(swapped, "cpu")), "cpu"), prob)
    assert not wrong["correct"] and wrong["max_abs_diff"] > 10 * wrong["tolerance"]
    # the numerics the CUDA op has (each dequantized weight rounded to bf16, bf16 output) pass
    w = torch.tensor(F.dequantize(q, prob.operands["scales_and_zeros"], 32)).to(torch.bfloat16).float()
    assert F.compare((prob.operands["x"].float() @ w.T).to(torch.bfloat16), prob)["correct"]


def test_fp16_reference():
    prob = F.problem(F.FieldCase(F.FP16, "m", "l", 4096, 64), seed=1)
    x, w = prob.operands["x"], prob.operands["w"]
    assert F.compare((x.float() @ w.float().T).half(), prob)["correct"]
    assert not F.compare((x.float() @ w.float().T).half() * 1.01, prob)["correct"]


def test_rotation():
    assert F.rotation_for(10 * 2**20, "hot", "cpu").copies == 1
    cold = F.rotation_for(10 * 2**20, "cold", "cpu")
    assert cold.rotated_bytes >= max(F.MIN_ROTATED_BYTES, 4 * cold.llc_bytes) and cold.columns()["cache"] == "cold"
    assert F.rotation_for(10 * 2**20, "cold", "cpu", quick=True).copies <= 4


def test_rows_from_the_cpu_ops():
    todo = [c for c in F.cases([B.Shape("t", "small", 256, 64)], (32, 128)) if HAS_CPU_INT4 or c.impl == F.FP16]
    rows = F.field_rows(todo, caches=("cold", "hot"), quick=True, where="cpu", env={"device": "cpu test"})
    assert len(rows) == 2 * len(todo)
    for row, (case, cache) in zip(rows, [(c, r) for c in todo for r in ("cold", "hot")]):
        assert row["status"] == "ok" and row["impl"] == case.impl and row["cache"] == cache, row
        assert row["correct"] and row["exact"] and row["max_abs_diff"] <= row["tolerance"]
        assert row["bytes"] == case.bytes_moved and row["GB/s"] > 0 and row["median_us"] > 0
        assert row["timer"] == "wall clock" and row["device"] == "cpu test" and np.isnan(row["cuda_copy_fraction"])
        assert (row["cache_copies"] == 1) if cache == "hot" else (2 <= row["cache_copies"] <= 4)  # quick: capped
        assert row["p10_us"] <= row["p90_us"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has CUDA: the field rows run")
def test_skipped_without_cuda():
    ok, why = F.available()
    assert not ok and "CUDA" in why and "torch.cuda.is_available()" in why
    rows = F.field_rows(F.cases([B.Shape("t", "small", 256, 64)], (32, 64)), env={"device": "d"})
    assert [r["impl"] for r in rows] == [F.INT4, F.FP16]
    assert all(r["status"] == "skipped" and r["reason"] == why and r["device"] == "d" for r in rows)


def test_suite_with_field(device):
    df = B.bench_suite(device, quick=True, show_progress=False, field=True, shapes=(B.QUICK_SHAPES[0],),
                       variants=(B.QUICK_VARIANTS[0],), ms=(1,))
    field = df[df.impl.isin(F.IMPLS)]
    assert set(field.impl) == set(F.IMPLS)
    if torch.cuda.is_available():  # both regimes' rows, checked, against both copies
        assert (field.status == "ok").all() and field.correct.all() and field.copy_fraction.notna().all()
        assert field.cuda_copy_fraction.notna().all()
    else:
        assert (field.status == "skipped").all() and field.reason.str.contains("CUDA").all()


def test_cli_field_flag(monkeypatch, tmp_path, capsys):
    import pandas as pd

    from workbench import benchmarks
    from workbench.cli import main
    assert main(["bench", "copy", "--field", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "workbench: error: --field applies to the q4-gemv suite, got suite 'copy'", err
    seen = {}

    def fake(device, writer, **kw):  # the suite itself is test_suite_with_field's
        seen.update(kw)
        return pd.DataFrame([{"impl": "cublas-fp16", "status": "skipped"}])
    monkeypatch.setattr(benchmarks, "suite", lambda name: fake)
    assert main(["bench", "q4-gemv", "--quick", "--field", "--out", str(tmp_path)]) == 0
    assert seen == {"quick": True, "field": True}
