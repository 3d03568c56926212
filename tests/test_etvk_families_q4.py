"""ET-VK's 4-bit group-symmetric weight-only linears (workbench.etvk.families.linear_q4gsw_4x8, linear_q4gsw_qw)
against torch / torchao on the device, from a checkout; their refusals and the host-side packing without one."""
import os

import numpy as np
import pytest
import torch

from workbench.checks.interfaces import check_dispatch
from workbench.etvk.families import KERNELS, takes
from workbench.etvk.families.linear_q4gsw_4x8 import (COOP_VARIANTS, coop_variant, pack_w_4x8,
                                                      q4gsw_linear_gemv_coop__w_4x8, with_coop_variant)
from workbench.etvk.families.linear_q4gsw_shared import quantize_weight

CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set: ET-VK's q4gsw templates "
                                    "come from an ExecuTorch checkout at run time (none here)")

# decode (M = 1) and prefill (M = 3, 37, with M % 4 != 0), each group size, N % 8 == 4, leading unit dims, half
GEMM = [dict(shape=(37, 256), out_features=64),
        dict(shape=(3, 128), out_features=12, group_size=64, prepack="shader"),
        dict(shape=(1, 4, 512), out_features=128, group_size=128),
        dict(shape=(1, 256), out_features=32),
        dict(shape=(13, 256), out_features=40, group_size=64, storage="texture3d"),
        dict(shape=(5, 256), out_features=32, dtype="half", bias=False)]
TIN = [dict(shape=(37, 256), out_features=64),
       dict(shape=(2, 64), out_features=16, dtype="float"),
       dict(shape=(9, 512), out_features=44, group_size=128, prepack="shader")]
GEMV = [dict(shape=(1, 256), out_features=64),
        dict(shape=(1, 1, 512), out_features=1032, group_size=128),  # g4w16
        dict(shape=(1, 64), out_features=4104, group_size=64),  # g8w8
        dict(shape=(1, 128), out_features=12, storage="texture3d", prepack="shader"),
        dict(shape=(1, 256), out_features=36, dtype="half", bias=False)]
TILED = [dict(shape=(37, 256), out_features=64),
         dict(shape=(3, 128), out_features=12, group_size=64, prepack="shader"),
         dict(shape=(5, 128), out_features=24, storage="buffer", weight_storage="buffer", dtype="half",
              prepack="shader"),
         dict(shape=(1, 6, 512), out_features=10, group_size=128)]
COOP = [dict(shape=(1, 256), out_features=64),
        dict(shape=(1, 1, 128), out_features=10, bias=False, group_size=128),
        dict(shape=(1, 128), out_features=12, storage="buffer", weight_storage="buffer", dtype="half",
             prepack="shader")]
# one shape at a real model's dimensions each way (Qwen3-0.6B's MLP: K = 1024, N = 3072; a prefill of 37 tokens)
LARGE = [("q4gsw_linear_gemv_coop__w_4x8", dict(shape=(1, 1, 1024), out_features=3072, group_size=128)),
         ("q4gsw_linear_gemm__w_4x8", dict(shape=(1, 37, 1024), out_features=512, group_size=128))]


def _ids(cases):
    return ["-".join(f"{k}={v}" for k, v in c.items()) for c in cases]


def _row(etvk_row, gen, kernel, options):
    row = etvk_row(gen, kernel, options, exact=False)
    assert row["max_abs_diff"] <= row["tolerance"], row
    return row


@needs_checkout
@pytest.mark.parametrize("options", GEMM, ids=_ids(GEMM))
def test_gemm_w_4x8_matches_torch(etvk_row, real, options):
    row = _row(etvk_row, real, "q4gsw_linear_gemm__w_4x8", options)
    m, n = options["shape"][-2], options["out_features"]
    assert row["global_size"] == f"{-(-n // 8)}x{-(-m // 4)}x1" and row["local_size"] == "8x8x1"
    assert row["etvk_gated"] == (m == 1)


@needs_checkout
@pytest.mark.parametrize("options", TIN, ids=_ids(TIN))
def test_tin_gemm_matches_torch(etvk_row, real, options):
    row = _row(etvk_row, real, "q4gsw_linear_gemm__tin__w_4x8", options)
    assert row["before"].endswith(f"transpose_cast_contig_to_vectorized_{options.get('dtype', 'half')}_buffer_"
                                  f"{options.get('dtype', 'half')}_buffer")
    assert row["local_size"] == "1x128x1"


@needs_checkout
@pytest.mark.parametrize("options", GEMV, ids=_ids(GEMV))
def test_gemv_coop_matches_torch(etvk_row, real, options):
    row = _row(etvk_row, real, "q4gsw_linear_gemv_coop__w_4x8", options)
    suffix, groups, workers = coop_variant(options["out_features"])
    assert suffix in row["variant"] and row["local_size"] == f"1x{groups}x{workers}"


@needs_checkout
@pytest.mark.parametrize("suffix", [v[0] for v in COOP_VARIANTS])
def test_gemv_at_every_decomposition_matches_torch(device, real, suffix):
    """Each of the GEMV's three (NUM_GROUPS, WORKERS) decompositions at a shape the picker gives another
    (N = 1,156: 145 tiles, a partial work group in every decomposition, N % 8 == 4)."""
    from workbench.etvk.run import execute
    d = with_coop_variant(q4gsw_linear_gemv_coop__w_4x8(real, shape=(1, 384), out_features=1156), 1156, suffix)
    groups, workers = next((g, w) for s, g, w in COOP_VARIANTS if s == suffix)
    assert suffix in d.variant and d.local_size == (1, groups, workers)
    assert d.global_size == (-(-145 // groups), groups, workers)
    row = execute(device, real, d)
    assert row["correct"] and row["max_abs_diff"] <= row["tolerance"], row


def test_a_decomposition_not_in_the_yaml_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^expected a decomposition of \['_g1w64', '_g4w16', '_g8w8'\], "
                                         r"got '_g2w32'$"):
        with_coop_variant(None, 64, "_g2w32")


@needs_checkout
@pytest.mark.parametrize("options", TILED, ids=_ids(TILED))
def test_linear_q4gsw_tiled_matches_torch(etvk_row, real, options):
    _row(etvk_row, real, "linear_q4gsw_tiled", options)


@needs_checkout
@pytest.mark.parametrize("options", COOP, ids=_ids(COOP))
def test_linear_q4gsw_coop_matches_torch(etvk_row, real, options):
    row = _row(etvk_row, real, "linear_q4gsw_coop", options)
    assert row["local_size"] == "1x1x64"


@needs_checkout
@pytest.mark.parametrize("kernel,options", LARGE, ids=[k for k, _ in LARGE])
def test_real_model_dimensions(etvk_row, real, kernel, options):
    _row(etvk_row, real, kernel, options)


@needs_checkout
@pytest.mark.parametrize("shape,variant", [((1, 256), "q4gsw_linear_gemv_coop__w_4x8_nc_buffer_g1w64_buffer_float"),
                                           ((4, 256), "q4gsw_linear_gemm__w_4x8_nc_buffer_float")])
def test_linear_q4gsw_picks_as_the_cpp(real, shape, variant):
    assert KERNELS["linear_q4gsw"](real, shape=shape).variant == variant
    assert KERNELS["linear_q4gsw"](real, shape=(4, 256), dtype="half").variant == \
        "q4gsw_linear_gemm__tin__w_4x8_nc_buffer_half"


@needs_checkout
@pytest.mark.parametrize("shape", [(24, 64), (12, 32), (1028, 64)])
def test_pack_w_4x8_shader_matches_host(etvk_row, real, shape):
    etvk_row(real, "pack_q4_linear_weight__w_4x8", {"shape": shape}, exact=True)


@needs_checkout
@pytest.mark.parametrize("kernel,options", [("q4gsw_linear_gemm__tin__w_4x8", dict(prepack="shader")),
                                            ("linear_q4gsw_tiled", dict(prepack="shader", weight_storage="buffer")),
                                            ("q4gsw_linear_gemv_coop__w_4x8", dict(prepack="shader"))])
def test_interfaces_of_every_step(real, kernel, options):
    """The push-constant / UBO ranges of the last dispatch and of each one recorded before it."""
    from workbench.etvk.checks import _StepView
    d = KERNELS[kernel](real, **options)
    rows = check_dispatch(real.compile(d.variant).code, d)
    for step in d.before:
        rows += check_dispatch(real.compile(step.variant).code, _StepView(step, d.resources), step.variant)
    assert rows == []


REFUSED = [
    ("q4gsw_linear_gemm__w_4x8", dict(shape=(4, 96), group_size=64), "K=96 is not a multiple of group_size=64"),
    ("linear_q4gsw_tiled", dict(shape=(4, 96), group_size=6), "positive multiple of 4"),
    ("linear_q4gsw_coop", dict(shape=(1, 12), group_size=4), "VK_CHECK_COND(K % 8 == 0)"),
    ("q4gsw_linear_gemv_coop__w_4x8", dict(out_features=10), "VK_CHECK_COND(N % 4 == 0)"),
    ("pack_q4_linear_weight__w_4x8", dict(shape=(10, 64)), "VK_CHECK_COND(N % 4 == 0)"),
    ("q4gsw_linear_gemv_coop__w_4x8", dict(shape=(2, 256)), "returns {0, 0, 0} when M != 1"),
    ("linear_q4gsw_tiled", dict(shape=(1, 256)), "is_gemv"),
    ("linear_q4gsw_coop", dict(shape=(3, 256)), "is_gemv"),
    ("linear_q4gsw_tiled", dict(storage="buffer", out_features=10), "rows shift"),
    ("q4gsw_linear_gemm__w_4x8", dict(shape=(2, 5, 256)), "leading dims"),
    ("q4gsw_linear_gemm__tin__w_4x8", dict(storage="texture3d"), "storage is one of 'buffer'"),
    ("linear_q4gsw_coop", dict(dtype="int8"), "dtype is one of"),
]


@pytest.mark.parametrize("kernel,options,says", REFUSED, ids=[f"{k}-{s[:20]}" for k, _, s in REFUSED])
def test_refusals_are_one_line_citing_etvk(kernel, options, says):
    with pytest.raises(ValueError) as error:
        KERNELS[kernel](None, **options)
    message = str(error.value)
    assert says in message and "\n" not in message and message.startswith(kernel)


def test_cli_options_come_from_the_signatures():
    for kernel in ("linear_q4gsw", "q4gsw_linear_gemm__w_4x8", "q4gsw_linear_gemm__tin__w_4x8",
                   "q4gsw_linear_gemv_coop__w_4x8", "linear_q4gsw_tiled", "linear_q4gsw_coop"):
        assert takes(kernel)[:3] == ("shape", "out_features", "group_size")


def test_pack_w_4x8_layout_by_hand():
    """Block (k4, n8) int j byte b holds rows 8·n8 + 2j (low nibble) and + 1 (high) at column 4·k4 + b, as
    value + 8; rows past N are 8 (zero)."""
    n, k = 12, 16
    w4 = (np.arange(n * k).reshape(n, k) % 16 - 8).astype(np.int8)
    packed = pack_w_4x8(w4).view(np.uint32)
    assert packed.shape == (k // 4, 2, 4)
    for k4, n8, j, b in [(0, 0, 0, 0), (3, 1, 1, 2), (2, 0, 3, 3), (1, 1, 0, 1)]:
        word = int(packed[k4, n8, j])
        lo, hi = (word >> (8 * b)) & 0xF, (word >> (8 * b + 4)) & 0xF
        row = 8 * n8 + 2 * j
        assert lo == int(w4[row, 4 * k4 + b]) + 8
        assert hi == int(w4[row + 1, 4 * k4 + b]) + 8
    assert (packed[:, 1, 2:] == 0x88888888).all()  # rows 12..15 lie past N = 12


def test_quantization_is_torchao_symmetric_int4():
    w4, scales = quantize_weight(16, 64, 32, torch.Generator().manual_seed(1))
    assert w4.dtype == torch.int8 and int(w4.min()) >= -8 and int(w4.max()) <= 7 and scales.shape == (16, 2)
    # symmetric: the largest |value| of each group maps to -8 or 7 (torchao: scale = max|w| / ((7 - -8) / 2))
    assert (w4.reshape(16, 2, 32).abs().amax(-1) >= 7).all()
