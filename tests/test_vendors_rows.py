"""Vendor statistics rows are real statistics or a named reason (issue 34, item 8): a compile of 0 instructions is
not presented as statistics, a feature the fake GPU lacks is named before compiling, a bare VkResult carries what
the driver printed."""
import os
import struct

import pytest

from workbench.vk import spirv

from workbench.vendors import mesa, mesa_worker


def _module(*capabilities) -> bytes:
    """A SPIR-V header with the given OpCapability lines and an OpMemoryModel after them."""
    words = [0x07230203, 0x00010300, 0, 8, 0]
    for cap in capabilities:
        words += [(2 << 16) | 17, cap]
    words += [(3 << 16) | 14, 0, 1]
    return struct.pack(f"<{len(words)}I", *words)


def test_zero_instructions_is_not_statistics():
    radv = {"VGPRs": 8, "SGPRs": 16, "Instructions": 0, "Subgroups per SIMD": 32}
    why = mesa.empty_program(radv, {"spec_constants": {}})
    assert why and why.startswith("empty program") and "defaults" in why
    row = mesa.summary(radv, "rdna2")
    assert row["instructions"] is None and row["registers"] is None and row["error"] == mesa.empty_program(radv)
    assert mesa.empty_program({"VGPRs": 40, "Instructions": 309}) is None
    assert mesa.empty_program({"Registers used": 3}) is None  # no instruction count: not judged
    assert mesa.summary({"Instruction Count": 0, "Registers used": 2}, "a740")["error"].startswith("empty program")


def test_live_rows_use_the_same_rule():
    from workbench.etvk.run import unified_statistics
    assert unified_statistics({"Instructions": 0, "VGPRs": 8})["error"].startswith("empty program")


def test_missing_features_are_named():
    code = _module(1, 6022, 6019)
    assert set(spirv.capabilities(code)) == {1, 6022, 6019}
    lacking = mesa_worker.missing_features({"cooperative_matrix_khr": False, "integer_dot_product": True}, code)
    assert lacking == ["cooperative matrices (VK_KHR_cooperative_matrix)"]
    assert mesa_worker.missing_features({"cooperative_matrix_khr": True, "integer_dot_product": True}, code) == []


def test_stats_cache_format_moved_past_the_bad_rows():
    from workbench.vendors import stats_cache
    assert stats_cache.FORMAT >= 2  # format-1 records held 0-instruction rows and bare "VkErrorUnknown:" errors


ISSUE_34 = ["linear_dq8ca_q4gsw_coopmat_buffer_buffer_half", "linear_dq8ca_q4gsw", "linear_q4gsw_coop",
            "q4gsw_linear_gemv_coop__w_4x8"]


@pytest.mark.skipif(not (os.environ.get("WORKBENCH_EXECUTORCH") and mesa.is_set_up()),
                    reason="needs an ExecuTorch checkout (WORKBENCH_EXECUTORCH) and the Mesa build (mesa.setup())")
@pytest.mark.parametrize("name", ISSUE_34)
def test_issue_34_rows_are_statistics_or_reasons(name):
    from workbench import etvk
    from workbench.etvk.families import KERNELS
    from workbench.etvk.run import make, stats_rows
    gen = etvk.Codegen(etvk.source(os.environ["WORKBENCH_EXECUTORCH"]))
    dispatches = {}
    if name in KERNELS:
        d = make(gen, name)
        name, dispatches = d.variant, {d.variant: d}
    rows = stats_rows(None, gen, [name], gpus=("a740", "mali-g610", "rdna2", "rdna3"), dispatches=dispatches)
    for row in rows.to_dict("records"):
        error = row.get("error")
        if isinstance(error, str) and error:
            assert len(error.split(":", 1)[-1].strip()) > 10, row  # a reason, not a bare "VkErrorUnknown:"
            assert row["instructions"] is None or row["instructions"] != row["instructions"], row
        else:
            assert row["instructions"] > 0 and row["registers"] > 0, row
