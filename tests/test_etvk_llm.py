"""A small Llama through ExecuTorch's LLM export on ET-VK's runtime (workbench.etvk.model.llm).

The configuration's checks and the kernel families run everywhere; lowering needs an ExecuTorch checkout
(WORKBENCH_EXECUTORCH) and running needs ET-VK's runtime built from it (`workbench etvk build`)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from workbench.etvk.model import llm

CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")


def _runtime():
    from workbench.etvk.model import build
    return build.find(CHECKOUT) if CHECKOUT else None


needs_runtime = pytest.mark.skipif(not CHECKOUT or _runtime() is None,
                                   reason="WORKBENCH_EXECUTORCH is not set or ET-VK's runtime is not built "
                                          "(`workbench etvk build`): lowering with export_llama_lib needs the "
                                          "checkout, running needs its executor_runner")


@pytest.mark.parametrize("kwargs, expected", [
    ({"dim": 500, "n_heads": 8}, "expected n_heads to divide dim, got dim=500, n_heads=8"),
    ({"n_heads": 8, "n_kv_heads": 3}, "expected n_kv_heads to divide n_heads"),
    ({"group_size": 48}, "expected group_size to divide every linear's K"),
    ({"group_size": 30}, "expected group_size a multiple of 4"),
    ({"prefill": 128}, "expected prefill < max_seq_len=128"),
    ({"n_layers": 0}, "expected n_layers a positive integer"),
    ({"repeat_rows": -64}, "expected repeat_rows 0 (all random) or a positive row period, got -64"),
])
def test_bad_config_is_refused_in_one_line(kwargs, expected):
    with pytest.raises(ValueError) as e:
        llm.Decoder(**kwargs)
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_repeated_rows_keep_the_seed_values_and_the_shape():
    import torch
    w = torch.randn(300, 7, generator=torch.Generator().manual_seed(0))
    r = llm.repeated_rows(w, 128)
    assert r.shape == w.shape and torch.equal(r[:128], w[:128])
    assert torch.equal(r[128:256], w[:128]) and torch.equal(r[256:], w[:44])
    assert not torch.equal(r, w) and r.data_ptr() != w.data_ptr()
    v = torch.randn(300)
    assert torch.equal(llm.repeated_rows(v, 128), v) and torch.equal(llm.repeated_rows(w, 0), w)


def test_cli_refuses_a_bad_config_without_a_traceback():
    proc = subprocess.run([sys.executable, "-m", "workbench.cli", "etvk", "llm", "--dim", "500", "--lower-only"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["llm: llama3_2_mini: expected n_heads to divide dim, got dim=500, "
                                                "n_heads=8"]


def test_weight_bytes_follow_the_shapes():
    cfg = llm.Decoder(n_layers=1, dim=128, n_heads=2, n_kv_heads=1, hidden_dim=256, vocab_size=512, group_size=32)
    linears = cfg.linears()
    assert [n for n, _, _ in linears] == [f"layers.0.{w}" for w in ("wq", "wk", "wv", "wo", "w1", "w3", "w2")] + \
        ["output"]
    weights = sum(k * n for _, k, n in linears)
    groups = sum(k // 32 * n for _, k, n in linears)
    assert cfg.weight_bytes(4)["linear"] == weights // 2 + 4 * groups
    assert cfg.weight_bytes(2)["linear"] == weights // 4 + 4 * groups
    assert cfg.kv_bytes(0) == 2 * 1 * 1 * 64 * 4


@pytest.mark.parametrize("kernel, fam", [
    ("q4gsw_linear_gemv_coop__w_4x8_nc_buffer_g1w64_texture3d_float", "GEMV"),
    ("q4gsw_linear_gemm__w_4x8_nc_buffer_texture3d_float", "GEMM"),
    ("embedding_q4gsw_float_scales_linear_weight_texture3d", "embedding"),
    ("rotary_embedding_texture3d_float", "rotary"),
    ("sdpa_compute_out_gqa_coop_texture3d_texture3d_float", "SDPA"),
    ("sdpa_kv_cache_update_texture3d_texture3d_float", "SDPA"),
    ("rms_norm_texture3d_float", "RMSNorm"),
    ("view_texture_float", "copies/views"),
    ("image_to_nchw_coalesced_texture3d_float_float", "copies/views"),
    ("binary_add_texture3d_float", "other"),
])
def test_kernel_families(kernel, fam):
    assert llm.family(kernel) == fam


@needs_runtime
def test_tiny_llama_lowers_runs_and_matches_the_eager_model(tmp_path):
    cfg = llm.Decoder(name="tiny", n_layers=1, dim=128, n_heads=2, n_kv_heads=1, hidden_dim=256, vocab_size=256,
                      max_seq_len=16, prefill=4)
    programs = llm.lower(cfg, executorch=CHECKOUT, out_dir=tmp_path / "llm", decode_positions=[0], prefill=False)
    lowered_by = programs.summary["lowered_by"]
    assert lowered_by["executorch.examples.models.llama.export_llama_lib"].startswith(
        os.path.realpath(CHECKOUT))
    assert lowered_by["executorch.backends.vulkan"].startswith(os.path.realpath(CHECKOUT))
    llm.execute(programs, _runtime(), runs=2, warmup=1)
    result = llm.read(programs)
    out = result.outputs.iloc[0]
    assert out["validation_messages"] == 0
    assert out["compared"] and out["reference_abs_max"] > 0 and out["within"], (out["max_abs_diff"],
                                                                                 out["tolerance"])
    families = set(result.dispatches["family"])
    assert {"GEMV", "SDPA", "RMSNorm", "rotary", "embedding"} <= families
    assert result.rates.iloc[0]["tokens"] == 1 and result.rates.iloc[0]["gpu_us"] > 0
    assert list(result.roofline["bits"]) == [4, 3, 2]
