"""ET-VK's q8ta_binary (op add) and q8ta_unary (op relu) families against torch on the test device (lavapipe).

Needs an ExecuTorch checkout (WORKBENCH_EXECUTORCH): the families dispatch the checkout's own templates, and even their
error paths ask the checkout which variants its YAMLs generate. Lavapipe rounds half to even and does not contract
the dequantize into an FMA, so every case here must match the fp32 reference exactly (the Dispatch itself allows
1 LSB on 1% of elements, for drivers that round ties otherwise).
"""
import os

import pytest

from workbench import etvk
from workbench.vk.spirv import declared
from workbench.vk.spirv import reflect

CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
pytestmark = pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set: q8ta_binary / q8ta_unary "
                                "dispatch an ExecuTorch checkout's templates (CI has none)")

# Layout groups the C++ allows together: every tensor shares the output's packed dim and its block size.
PACKED_C = ("4W4C", "4C1W", "4C")
PACKED_W = ("4W", "4H4W")
TIES = dict(a_qparams=(0.25, 0), b_qparams=(0.25, 0), out_qparams=(1.0, 0))  # a quarter of the sums end in .5

BINARY = [
    dict(shape=(2, 13, 5, 7)),                                                   # C % 4 != 0, odd W, batch 2
    dict(shape=(3, 6, 9, 5), in_layout="4W", other_layout="4W", out_layout="4H4W"),
    dict(shape=(2, 13, 5, 7), in_layout="4C1W", other_layout="4C", out_layout="4W4C"),
    dict(shape=(2, 5, 3, 11), in_layout="4H4W"),
    dict(shape=(3, 7, 6, 9), in_layout="4C", out_layout="4C1W", **TIES),
    dict(shape=(1, 90)),                                                          # ET-VK's 2-D case (ndim < 4)
    dict(shape=(2, 3, 1, 1), in_layout="4W"),                                     # one partial block
]
UNARY = [
    dict(shape=(2, 13, 5, 7)),
    dict(shape=(3, 7, 6, 9), in_layout="4W", out_layout="4H4W"),
    dict(shape=(2, 10, 3, 5), in_layout="4C1W", out_layout="4C"),
    dict(shape=(3, 5, 7, 3), in_layout="4C", in_qparams=(0.05, 2), out_qparams=(0.05, 2)),  # requantize = identity
    dict(shape=(2, 6, 5, 5), in_layout="4H4W", in_qparams=(0.5, -7), out_qparams=(1.0, 4)),  # ties
]


def _ids(cases):
    return ["-".join(f"{k}={v}" for k, v in c.items()) for c in cases]


@pytest.fixture(scope="module")
def real():
    return etvk.Codegen(etvk.source(CHECKOUT))


@pytest.mark.parametrize("options", BINARY, ids=_ids(BINARY))
def test_add_matches_torch(device, real, options):
    row = etvk.run(device, real, "q8ta_binary", op="add", measure=False, **options)
    assert row["variant"] == "q8ta_add_buffer"
    assert row["correct"] and row["max_abs_diff"] == 0 and row["mismatch"] == 0, row


@pytest.mark.parametrize("options", UNARY, ids=_ids(UNARY))
def test_relu_matches_torch(device, real, options):
    row = etvk.run(device, real, "q8ta_unary", op="relu", measure=False, **options)
    assert row["variant"] == "q8ta_relu_buffer"
    assert row["correct"] and row["max_abs_diff"] == 0 and row["mismatch"] == 0, row


@pytest.mark.parametrize("layout", PACKED_C + PACKED_W)
def test_every_int8_layout(device, real, layout):
    for kernel in ("q8ta_binary", "q8ta_unary"):
        row = etvk.run(device, real, kernel, shape=(2, 9, 5, 6), in_layout=layout, measure=False)
        assert row["correct"] and row["max_abs_diff"] == 0, row


def test_dispatch_is_the_cpps(real):
    """Bindings, push constants and spec constants line up with the compiled shader; sizes are ET-VK's picks."""
    for kernel, n_bindings, push_bytes, spec_ids in (("q8ta_binary", 6, 24, {3, 4, 5, 6}),
                                                     ("q8ta_unary", 4, 16, {3, 4, 5})):
        d = etvk.make(real, kernel, shape=(2, 13, 5, 7), in_layout="4W4C")
        info = reflect(bytes(real.compile(d.variant).code))
        assert len(d.resources) == n_bindings == len(info.bindings)
        by_slot = sorted(info.bindings, key=lambda b: b.binding)  # the template's names, in binding order
        assert [b.name.removesuffix("Buffer").removesuffix("_UBO") for b in by_slot] == [r.name for r in d.resources]
        assert [b.kind for b in by_slot] == [{"buffer": "storage_buffer", "ubo": "uniform_buffer"}[r.kind]
                                             for r in d.resources]
        assert len(d.push_constants) == push_bytes == info.push_constant_size
        assert set(d.spec_constants) == spec_ids
        assert declared(real.compile(d.variant), d.spec_constants) == d.spec_constants  # all read by the shader
        # packed C, block 4×4 on (C, W): ceil(13/4) * ceil(7/4) * H 5 * N 2 blocks, one thread each
        assert d.global_size == (4 * 2 * 5 * 2, 1, 1) and d.local_size == (64, 1, 1)
    d = etvk.make(real, "q8ta_binary", shape=(2, 13, 5, 7), in_layout="4W")  # packed W: block on (W, H)
    assert d.global_size == (2 * 2 * 13 * 2, 1, 1)


def test_bad_inputs_say_expected_and_given(real):
    with pytest.raises(ValueError, match=r"op 'sub' is not one ET-VK's C\+\+ dispatches; expected one of \['add'\]"
                                         r".*q8ta_add_buffer"):
        etvk.make(real, "q8ta_binary", op="sub")
    with pytest.raises(ValueError, match=r"op 'gelu'.*expected one of \['relu'\].*q8ta_relu_buffer"):
        etvk.make(real, "q8ta_unary", op="gelu")
    with pytest.raises(ValueError, match=r"different shapes, \(2, 13, 5, 7\) and \(1, 13, 1, 1\).*no broadcasting"
                                         r".*expected equal shapes"):
        etvk.make(real, "q8ta_binary", other_shape=(1, 13, 1, 1))
    with pytest.raises(ValueError, match=r"output 4W4C .*input 4W .*"):
        etvk.make(real, "q8ta_binary", in_layout="4W", out_layout="4W4C")
    with pytest.raises(ValueError, match=r"output 4H4W .*input 4C1W"):
        etvk.make(real, "q8ta_unary", in_layout="4C1W", out_layout="4H4W")
    with pytest.raises(ValueError, match=r"buffer variants only.*expected storage 'buffer', got 'texture3d'"):
        etvk.make(real, "q8ta_unary", storage="texture3d")
    with pytest.raises(ValueError, match=r"alpha 2.0.*neither declares nor uses it.*expected alpha 1.0"):
        etvk.make(real, "q8ta_binary", alpha=2.0)
    with pytest.raises(ValueError, match=r"expected an int8x4 layout.*got 'WIDTH_PACKED'"):
        etvk.make(real, "q8ta_binary", in_layout="WIDTH_PACKED")


def test_cli_lists_and_runs_them(capsys):
    from workbench.cli import main
    assert main(["etvk", "list", "q8ta_add", "q8ta_relu", "--executorch", CHECKOUT]) == 0
    out = capsys.readouterr().out
    assert "q8ta_add_buffer" in out and "q8ta_binary" in out and "q8ta_relu_buffer" in out and "q8ta_unary" in out
    assert main(["etvk", "run", "q8ta_binary", "--op", "add", "--executorch", CHECKOUT, "--shape", "2,5,3,7",
                 "--in-layout", "4C1W"]) == 0
    assert "q8ta_add_buffer" in capsys.readouterr().out
