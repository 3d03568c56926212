"""ET-VK's int8 cooperative-matrix linear (workbench.etvk.families.linear_dq8ca_qw_coopmat) and the 4-bit weight
prepack it reads.

The dispatch needs VK_KHR_cooperative_matrix with int8 A/B and int32 C (lavapipe has none: those tests skip, saying
so, and one checks that the family says what is missing). What runs everywhere: the shader compiles with the
workbench's glslc, ET-VK's own packing shader matches the numpy packing the coopmat dispatch uploads (on lavapipe),
the host reference agrees with float64, and the bindings / spec constants match the compiled module.

On a device with int8 cooperative matrices (NVIDIA: 32-lane subgroups, int8 at 16x16x32):
``WORKBENCH_EXECUTORCH=… python -m pytest tests/test_etvk_families_coopmat.py -v -rs`` runs ET-VK's variant where
the device has what it needs (64-lane subgroups, 16x16x16 int8) and the workbench-made ``tiling="sg32"`` variant
where it has 32-lane subgroups and 16x16x32 int8, with ET-VK's skewed shared-memory stride for B (sg32) and with a
16-byte-aligned one (sg32_aligned).
"""
import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from workbench import etvk, vk
from workbench.etvk.families import KERNELS
from workbench.etvk.families.linear_dq8ca_qw_coopmat import (int4_source_bytes, pack_q4_weight, reference,
                                                             reference_fp64)
from workbench.vk.spirv import declared
from workbench.vk.spirv import reflect

CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set: ET-VK's coopmat "
                                    "template comes from an ExecuTorch checkout at run time (none here)")
VARIANTS = ["linear_dq8ca_q4gsw_coopmat_buffer_texture2d_half", "linear_dq8ca_q4gsw_coopmat_buffer_buffer_half"]


def _missing(device, gen, options) -> str | None:
    """Why this device cannot run the dispatch (the family's own check), or None."""
    d = etvk.make(gen, "linear_dq8ca_qw_coopmat", **options)
    try:
        d.requires(device)
    except vk.MissingFeatureError as error:
        return str(error)
    return None


# --- on a device with int8 cooperative matrices -----------------------------------------------------------------
RUNS = [
    dict(),                                                              # 128x64 -> 64, two groups of 32
    dict(shape=(128, 32), out_features=64),                              # one group: exact
    dict(shape=(256, 128), out_features=192, group_size=64, weight_storage="buffer"),
    dict(shape=(128, 96), out_features=128, group_size=96),
]


@needs_checkout
@pytest.mark.parametrize("tiling", [None, "sg32", "sg32_aligned"], ids=["etvk", "sg32", "sg32_aligned"])
@pytest.mark.parametrize("options", RUNS, ids=["-".join(f"{k}={v}" for k, v in c.items()) or "default" for c in RUNS])
def test_coopmat_linear_matches_torch(device, real, options, tiling):
    options = {**options, "tiling": tiling}
    reason = _missing(device, real, options)
    if reason:
        pytest.skip(reason)
    row = etvk.run(device, real, "linear_dq8ca_qw_coopmat", measure=False, **options)
    assert row["correct"], row
    groups = (options.get("shape", (128, 64))[1]) // options.get("group_size", 32)
    if groups == 1:
        assert row["max_abs_diff"] == 0, row  # one product per output: no fusing, no double rounding
    assert row["ref64_max_abs_diff"] < 0.05


@needs_checkout
def test_a_device_without_int8_coopmat_is_told_what_is_missing(device, real):
    reason = _missing(device, real, {})
    if reason is None:
        pytest.skip(f"{device.info.name} has what ET-VK's variant needs")
    assert "linear_dq8ca_qw_coopmat" in reason
    assert ("VK_KHR_cooperative_matrix with int8 A/B and int32 C" in reason or "lanes" in reason
            or "accumulators" in reason), reason
    with pytest.raises(vk.MissingFeatureError, match=r"linear_dq8ca_qw_coopmat needs|subgroups"):
        etvk.run(device, real, "linear_dq8ca_qw_coopmat", measure=False)
    if not device.info.features.get("cooperative_matrix_khr"):
        assert reason.endswith(": no VK_KHR_cooperative_matrix")


def _fake_device(subgroup: int, sizes):
    """A device as the requires check sees it: features, subgroup size, the KHR property list."""
    rows = [{"extension": "KHR", "M": m, "N": n, "K": k, "A": a, "B": a, "C": c, "D": c, "scope": 3}
            for m, n, k, a, c in sizes]
    return SimpleNamespace(info=SimpleNamespace(name="Fake GPU", driver_name="fake", subgroup_size=subgroup,
                                                features={"cooperative_matrix_khr": True}),
                           cooperative_matrix_properties=lambda: rows)


def test_requires_on_an_h200_like_and_an_rdna_like_device():
    """NVIDIA Hopper lists int8 16x16x32 / 16x8x32 (and fp16 16x16x16 with fp16 / fp32 C) at 32 lanes: ET-VK's tiling
    is refused naming both gaps and the workbench-made sg32 tilings fit; an RDNA-like device (64 lanes, 16x16x16
    int8) runs ET-VK's own."""
    import importlib
    cm = importlib.import_module("workbench.etvk.families.linear_dq8ca_qw_coopmat")  # the module, not the function
    hopper = _fake_device(32, [(16, 16, 32, "sint8", "sint32"), (16, 8, 32, "sint8", "sint32"),
                               (16, 16, 16, "float16", "float32"), (16, 16, 16, "float16", "float16")])
    etvk_tiling = cm._requires(dict(cm.ETVK_TILING))
    with pytest.raises(vk.MissingFeatureError, match=r"int8 x int8 -> int32 sizes are \['16x16x32', '16x8x32'\], "
                                                     r"not 16x16x16; its subgroups have 32 lanes.*expects 64.*"
                                                     r"tiling 'sg32' or 'sg32_aligned' fits it"):
        etvk_tiling(hopper)
    for preset in cm.TILINGS.values():
        cm._requires({**cm.ETVK_TILING, **preset})(hopper)  # no error
    rdna = _fake_device(64, [(16, 16, 16, "sint8", "sint32"), (16, 16, 16, "float16", "float32"),
                             (16, 16, 16, "float16", "float16")])
    etvk_tiling(rdna)
    with pytest.raises(vk.MissingFeatureError, match=r"its subgroups have 64 lanes, the tiling expects 32"):
        cm._requires({**cm.ETVK_TILING, **cm.TILINGS["sg32"]})(rdna)
    no_f16 = _fake_device(64, [(16, 16, 16, "sint8", "sint32")])
    with pytest.raises(vk.MissingFeatureError, match=r"no float32 accumulator of 16x16; no float16 accumulator"):
        etvk_tiling(no_f16)


# --- everywhere ---------------------------------------------------------------------------------------------------
@needs_checkout
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_template_compiles_with_the_workbench_glslc(real, variant):
    from workbench.vk.spirv import capabilities

    def _capabilities(code):
        return set(capabilities(code.words))
    spirv = real.compile(variant)
    assert {6022, 39, 9} <= _capabilities(spirv)  # CooperativeMatrixKHR, Int8, Float16
    d = etvk.make(real, "linear_dq8ca_qw_coopmat", weight_storage=variant.split("_")[-2], tiling="sg32")
    assert d.variant.startswith(variant + "__workbench_") and 6022 in _capabilities(real.compile(d.variant))
    a = etvk.make(real, "linear_dq8ca_qw_coopmat", weight_storage=variant.split("_")[-2], tiling="sg32_aligned")
    text = real.expand(a.variant).text
    assert "B_STRIDE_U32    = B_USEFUL_U32 + 4u" in text and "MMA_K = 32" in text
    assert 6022 in _capabilities(real.compile(a.variant))
    assert "B_STRIDE_U32    = B_USEFUL_U32 + 1u" in real.expand(variant).text  # ET-VK's own variant untouched


@needs_checkout
@pytest.mark.parametrize("options", [dict(), dict(shape=(13, 40), storage="buffer"), dict(shape=(3, 8))],
                         ids=["default", "n13-buffer", "n3"])
def test_etvks_q4_packing_shader_matches_the_numpy_packing(device, real, options):
    """The layout the coopmat dispatch uploads is the one ET-VK's own prepack shader writes (N not a multiple of 8:
    the padding rows hold 0x8, i.e. zero)."""
    row = etvk.run(device, real, "pack_q4_linear_weight", measure=False, **options)
    assert row["correct"] and row["max_abs_diff"] == 0, row


@needs_checkout
@pytest.mark.parametrize("tiling", [None, "sg32", "sg32_aligned"])
def test_dispatch_is_the_cpps(real, tiling):
    d = etvk.make(real, "linear_dq8ca_qw_coopmat", shape=(256, 128), out_features=192, group_size=64, tiling=tiling)
    spirv = real.compile(d.variant)
    info = reflect(bytes(spirv.code))
    by_slot = sorted(info.bindings, key=lambda b: b.binding)
    assert [b.binding for b in by_slot] == [0, 2, 4, 5, 6, 7, 8, 10, 11]  # fp input, input sums, bias: unused
    assert [b.name.removesuffix("Buffer").removesuffix("_UBO") for b in by_slot] == [r.name for r in d.resources]
    assert d.push_constants == b"" and info.push_constant_size == 0
    # apply_bias, K4_per_group, num_groups (K / group_size), N — apply_bias is gone with HAS_BIAS false
    assert d.spec_constants == {3: 0, 4: 16, 5: 2, 6: 192}
    assert declared(spirv, d.spec_constants) == {4: 16, 5: 2, 6: 192}
    assert d.global_size == (3 * 256, 2, 1) and d.local_size == (256, 1, 1)  # one 256-thread group per 128x64
    assert d.resources[4].extent == (32, 24)  # the q4 weight texture: K4 x N8


def test_numpy_q4_packing_indexing():
    w = torch.randint(-8, 8, (11, 16), dtype=torch.int8, generator=torch.Generator().manual_seed(3)).numpy()
    p = pack_q4_weight(w).view(np.uint32)
    assert p.shape == (2, 4, 4)  # [N8, K4, 4]
    for n in range(16):
        for k in range(16):
            n8, r, half = n // 8, n % 4, (n % 8) // 4
            c = 2 * (k % 4) + half
            nibble = (int(p[n8, k // 4, r]) >> (4 * c)) & 0xF
            assert nibble - 8 == (w[n, k] if n < 11 else 0)
    src = int4_source_bytes(w)
    assert src.shape == (11, 8)  # [N, K / 2]: even columns in the low nibble
    assert ((src[:, 0] & 0xF).astype(int) == w[:, 0] + 8).all() and ((src[:, 0] >> 4).astype(int) == w[:, 1] + 8).all()


def test_host_reference_against_float64():
    g = torch.Generator().manual_seed(4)
    m, k, n, gs = 8, 64, 16, 32
    q = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=g)
    zps = torch.randint(-10, 11, (m,), dtype=torch.int8, generator=g)
    s_in = (torch.rand(m, generator=g) * 0.02 + 0.01).half()
    w4 = torch.randint(-8, 8, (n, k), dtype=torch.int8, generator=g)
    s_w = (torch.rand((k // gs, n), generator=g) * 0.02 + 0.005).half()
    y = reference(q, zps, s_in, w4, s_w, gs)
    y64 = reference_fp64(q, zps, s_in, w4, s_w, gs)
    assert y.dtype == torch.float16
    assert float((y.double() - y64).abs().max()) <= float(np.spacing(np.float16(y64.abs().max())))
    fused = reference(q, zps, s_in, w4, s_w, gs, fused=True)
    assert float((fused.double() - y.double()).abs().max()) <= float(np.spacing(np.float16(y.abs().max())))
    one = reference(q[:, :gs], zps, s_in, w4[:, :gs], s_w[:1], gs)  # one group: fused or not, the same
    assert torch.equal(one, reference(q[:, :gs], zps, s_in, w4[:, :gs], s_w[:1], gs, fused=True))


def test_bad_inputs_say_expected_and_given():
    make = KERNELS["linear_dq8ca_qw_coopmat"]
    with pytest.raises(ValueError, match=r"M 100 is not a multiple of 128; N 40 is not a multiple of 64"):
        make(None, shape=(100, 64), out_features=40)
    with pytest.raises(ValueError, match=r"K 96 is not a multiple of group_size 64"):
        make(None, shape=(128, 96), out_features=64, group_size=64)
    with pytest.raises(ValueError, match=r"HAS_BIAS false.*expected bias=False, given True"):
        make(None, bias=True)
    with pytest.raises(ValueError, match=r"rank > 2.*given \(2, 128, 64\)"):
        make(None, shape=(2, 128, 64))
    with pytest.raises(ValueError, match=r"'texture2d' or 'buffer'.*got 'texture3d'"):
        make(None, weight_storage="texture3d")
    with pytest.raises(ValueError, match=r"tiling is None.*got 'sg16'"):
        make(None, tiling="sg16")
    with pytest.raises(ValueError, match=r"keep 256 threads"):
        make(None, tiling={"SUBGROUP_SIZE": 32})
    with pytest.raises(ValueError, match=r"K must be a multiple of 8.*got K=12"):
        KERNELS["pack_q4_linear_weight"](None, shape=(4, 12))


def test_a_checkout_before_the_template_is_named():
    gen = SimpleNamespace(variants=lambda: {}, source=SimpleNamespace(label="executorch@4a95dff0af^"))
    with pytest.raises(ValueError, match=r"linear_dq8ca_qw_coopmat: the checkout \(executorch@4a95dff0af\^\) has "
                                         r"no shader variant 'linear_dq8ca_q4gsw_coopmat_buffer_texture2d_half' "
                                         r"\(added in 4a95dff0af\)"):
        KERNELS["linear_dq8ca_qw_coopmat"](gen)


@needs_checkout
def test_the_revision_before_the_template_is_refused_by_name():
    """A real checkout at 4a95dff0af^ (git archive): the family says which commit added the template."""
    try:
        old = etvk.Codegen(etvk.source(CHECKOUT, rev="4a95dff0af^"))
    except etvk.CheckoutError as error:  # a trimmed checkout (e.g. the GPU machine's) may lack that revision
        pytest.skip(str(error))
    with pytest.raises(ValueError, match=r"no shader variant 'linear_dq8ca_q4gsw_coopmat_buffer_texture2d_half' "
                                         r"\(added in 4a95dff0af\); its variants of linear_dq8ca_qw_coopmat: none "
                                         r"— use a revision at or after 4a95dff0af"):
        etvk.make(old, "linear_dq8ca_qw_coopmat")


@needs_checkout
def test_cli_lists_it(capsys):
    from workbench.cli import main
    assert main(["etvk", "list", "dq8ca_q4gsw_coopmat", "pack_q4_linear", "--executorch", CHECKOUT]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line.split()[-1] for line in out.splitlines()[2:] if line.strip()}
    assert lines["linear_dq8ca_q4gsw_coopmat_buffer_texture2d_half"] == "linear_dq8ca_qw_coopmat"
    assert lines["pack_q4_linear_weight_texture2d"] == "pack_q4_linear_weight"
