"""ET-VK's int8 conv families (workbench.etvk.families.q8ta_conv2d, _dw, _transposed) against torch on the device,
from a checkout.

Needs an ExecuTorch checkout (WORKBENCH_EXECUTORCH); the host-side pieces (numpy packings, im2col, argument errors)
run without one. Shapes are small (lavapipe on 2 cores): C and OC not multiples of 4, H and W odd, strides,
padding, dilation, groups, both layouts ET-VK's C++ accepts (4W4C, 4C1W), bias / relu / fallback variants.
"""
import dataclasses
import os

import numpy as np
import pytest
import torch

from workbench import etvk
from workbench.etvk.families import KERNELS
from workbench.etvk.families import _conv as C
from workbench.etvk.families.q8ta_conv2d import im2col, uses_im2col
from workbench.vk.spirv import declared
from workbench.vk.spirv import reflect

CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set: ET-VK's conv templates "
                                    "come from an ExecuTorch checkout at run time (none here)")


CONV = [
    dict(shape=(1, 6, 7, 9), out_channels=5, kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
    dict(shape=(1, 6, 7, 9), out_channels=5, in_layout="4C1W", out_layout="4C1W", relu=True, bias=False),
    dict(shape=(1, 6, 7, 9), out_channels=5, in_layout="4C1W", fallback=True, stride=2, padding=2, dilation=2),
    dict(shape=(1, 16, 5, 7), out_channels=8, groups=2, out_layout="4C1W"),
    dict(shape=(1, 3, 7, 7), out_channels=7, kernel_size=5, padding=2, stride=3),
    dict(shape=(1, 8, 3, 3), out_channels=9, kernel_size=1, padding=0, fallback=True, relu=True),
]
IM2COL_CONV = [
    dict(shape=(1, 8, 7, 9), out_channels=5, kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
    dict(shape=(1, 16, 5, 7), out_channels=8, groups=2, relu=True, bias=False, out_layout="4C1W", in_layout="4C1W"),
    dict(shape=(1, 4, 6, 6), out_channels=3, fallback=True, stride=2),
    dict(shape=(1, 8, 7, 9), out_channels=5, kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), host_im2col=True),
    dict(shape=(1, 16, 5, 7), out_channels=8, groups=2, relu=True, out_layout="4C1W", host_im2col=True),
]
IM2COL = [
    dict(shape=(1, 8, 7, 9), kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), in_layout="4C1W"),
    dict(shape=(1, 16, 5, 7), out_channels=16, groups=4),
]
DW = [
    dict(shape=(1, 6, 7, 9), kernel_size=(3, 5), stride=(2, 1), padding=(1, 2), dilation=(2, 1)),
    dict(shape=(1, 13, 5, 5), in_layout="4C1W", out_layout="4C1W", relu=True, bias=False, kernel_size=7, padding=3),
    dict(shape=(1, 8, 9, 3), in_layout="4C1W", out_layout="4W4C", kernel_size=(1, 3), padding=(0, 1)),
]
TRANSPOSED = [
    dict(shape=(1, 6, 5, 7), out_channels=5, kernel_size=(3, 4), stride=(2, 3), padding=(1, 0), output_padding=(1, 2)),
    dict(shape=(1, 16, 3, 5), out_channels=8, groups=2, in_layout="4C1W", out_layout="4C1W", fallback=True,
         relu=True),
    dict(shape=(1, 5, 4, 3), out_channels=3, kernel_size=2, stride=1, padding=0, output_padding=0, bias=False),
]
PACK = [("pack_q8_conv2d_weights", dict(shape=(10, 6, 3, 3))),
        ("pack_q8_conv2d_weights", dict(shape=(7, 5, 3, 2), storage="buffer")),
        ("pack_q8_conv2d_dw_weights", dict(shape=(8, 1, 3, 5))),
        ("pack_q8_conv2d_dw_weights", dict(shape=(6, 1, 2, 7), storage="buffer"))]


def _ids(cases):
    return ["-".join(f"{k}={v}" for k, v in c.items()).replace(" ", "") for c in cases]


@needs_checkout
@pytest.mark.parametrize("options", CONV, ids=_ids(CONV))
def test_q8ta_conv2d_matches_torch(etvk_row, real, options):
    row = etvk_row(real, "q8ta_conv2d", options)
    assert row["variant"] == ("q8ta_conv2d_fallback_float" if options.get("fallback") else "q8ta_conv2d_float")


@needs_checkout
@pytest.mark.parametrize("options", IM2COL_CONV, ids=_ids(IM2COL_CONV))
def test_q8ta_conv2d_im2col_gemm_matches_torch(etvk_row, real, options):
    row = etvk_row(real, "q8ta_conv2d_im2col", options)
    assert row["variant"] == ("q8ta_conv2d_pw_fallback_float" if options.get("fallback") else "q8ta_conv2d_pw_float")
    assert row.get("before") == (None if options.get("host_im2col") else "q8ta_im2col")


@needs_checkout
@pytest.mark.parametrize("options", IM2COL, ids=_ids(IM2COL))
def test_q8ta_im2col_writes_the_numpy_im2col(etvk_row, real, options):
    etvk_row(real, "q8ta_im2col", options)


@needs_checkout
@pytest.mark.parametrize("options", DW, ids=_ids(DW))
def test_q8ta_conv2d_dw_matches_torch(etvk_row, real, options):
    etvk_row(real, "q8ta_conv2d_dw", options)


@needs_checkout
@pytest.mark.parametrize("options", TRANSPOSED, ids=_ids(TRANSPOSED))
def test_q8ta_conv2d_transposed_matches_torch(etvk_row, real, options):
    etvk_row(real, "q8ta_conv2d_transposed", options)


@needs_checkout
@pytest.mark.parametrize("kernel,options", PACK, ids=[f"{k}-{_ids([o])[0]}" for k, o in PACK])
def test_etvks_conv_packing_shaders_match_numpy(etvk_row, real, kernel, options):
    etvk_row(real, kernel, options)


@needs_checkout
def test_an_unmarked_multiply_add_is_checked_both_ways(device, etvk_row, real):
    """The GEMM's ``fma`` (no ``precise``): lavapipe splits it. Element (3, 3, 0) here is -55.500004 fused and
    -55.499996 split: the reference is the split form, and 1 LSB is allowed on that fraction of elements only."""
    options = dict(shape=(1, 8, 6, 8), out_channels=5, kernel_size=(1, 4), stride=2, padding=(2, 0),
                   dilation=(2, 1), seed=328)
    d = etvk.make(real, "q8ta_conv2d_im2col", **options)
    assert d.atol == 1 and d.max_mismatch == d.params["fused_mismatch"] == 1 / (5 * 5 * 3)
    row = etvk_row(real, "q8ta_conv2d_im2col", options)
    if device.info.is_cpu:
        assert row["mismatch"] == 0
    plain = etvk.make(real, "q8ta_conv2d")  # most inputs: both forms quantize alike, and the check is exact
    assert plain.atol == 0 and plain.params["fused_mismatch"] == 0


@needs_checkout
@pytest.mark.parametrize("kernel", ["q8ta_conv2d", "q8ta_conv2d_dw", "q8ta_conv2d_transposed"])
def test_batch_is_what_etvk_computes(device, real, kernel):
    """The shaders index batch 0 only: batch 2 is refused, and etvk_batch=True shows ET-VK writing image 0 alone."""
    with pytest.raises(ValueError, match=r"expected batch 1, given batch 2 — pass etvk_batch=True"):
        etvk.make(real, kernel, shape=(2, 8, 5, 7))
    d = etvk.make(real, kernel, shape=(2, 8, 5, 7), etvk_batch=True)
    assert not etvk.execute(device, real, d, measure=False)["correct"]
    only_first = d.expected.clone()
    only_first[1:] = 0  # the output buffer starts zeroed and the shader never writes image 1
    row = etvk.execute(device, real, dataclasses.replace(d, expected=only_first), measure=False)
    assert row["correct"] and row["max_abs_diff"] == 0, row


@needs_checkout
@pytest.mark.parametrize("kernel,options", [
    ("q8ta_conv2d", dict(shape=(1, 8, 5, 7), out_channels=2, groups=2)),
    ("q8ta_conv2d", dict(shape=(1, 16, 3, 3), out_channels=4, groups=4, kernel_size=1, padding=0)),
    ("q8ta_conv2d_im2col", dict(shape=(1, 8, 5, 7), out_channels=2, groups=2)),
    ("q8ta_conv2d_transposed", dict(shape=(1, 8, 3, 5), out_channels=2, groups=2)),
])
def test_finding_groups_equal_to_out_channels_use_one_group_per_block(device, real, kernel, options):
    """FINDING (ET-VK at cff6f4dd32): with groups == out_channels and 4+ input channels per group (the export lets
    it through: its pattern checks channels per group only for 1 < groups < OC, and it is not depthwise), the
    shaders take one group per block of 4 output channels (``group_idx = oc4·4 / OC_per_group``, or
    ``oc_block / OC4_per_group`` in the GEMM): every channel of a block reads the inputs of the block's first
    channel's group. Smallest: Conv2d(8, 2, 3, groups=2) — channel 1 is computed from input channels 0..3."""
    d = etvk.make(real, kernel, **options)
    seen = []  # what the device wrote, caught on its way to the check
    row = etvk.execute(device, real, dataclasses.replace(d, decode=lambda raw: seen.append(d.decode(raw)) or seen[-1]),
                       measure=False)
    assert not row["correct"]
    got = seen[0]
    oc = d.expected.shape[1]
    first = list(range(0, oc, 4))  # the first channel of each block is right, the others are not
    assert torch.equal(got[:, first], d.expected[:, first])
    assert not torch.equal(got, d.expected)


@needs_checkout
def test_dispatch_is_the_cpps(real):
    """Bindings, push constants and spec constants line up with the compiled shader; sizes are ET-VK's picks."""
    conv_names = ["t_packed_int8_output", "t_packed_int8_input", "t_packed_int8_weight", "t_weight_sums",
                  "t_weight_scales", "t_bias", "outp", "inp", "conv2d_params"]
    for kernel, options, names, push_bytes, spec_ids in (
            ("q8ta_conv2d", {}, conv_names, 16, {3, 4, 5, 6}),
            ("q8ta_conv2d_dw", {}, conv_names, 16, {3, 4, 5, 6}),
            ("q8ta_conv2d_transposed", {}, conv_names, 16, {3, 4, 5, 6}),
            ("q8ta_conv2d_im2col", {}, conv_names[:-1], 24, {3, 4, 5}),  # the input layout (6) is unread
            ("q8ta_im2col", {}, ["t_packed_int8_output", "t_packed_int8_input", "im2col_outp", "inp",
                                 "conv2d_params"], 4, {5}),  # its output layout (4) is unread too
            ("pack_q8_conv2d_weights", {"storage": "buffer"}, ["t_packed_int8_weight", "t_int8_weight"], 32, set()),
            ("pack_q8_conv2d_dw_weights", {"storage": "buffer"}, ["t_packed_int8_weight", "t_int8_weight"], 28,
             set())):
        d = etvk.make(real, kernel, **options)
        spirv = real.compile(d.variant)
        info = reflect(bytes(spirv.code))
        by_slot = sorted(info.bindings, key=lambda b: b.binding)
        bound = [d.resources[i] for i in (d.bindings or range(len(d.resources)))]
        assert [b.name.removesuffix("Buffer").removesuffix("_UBO") for b in by_slot] == names == \
            [r.name for r in bound], kernel
        kinds = {"buffer": "storage_buffer", "ubo": "uniform_buffer"}
        assert all(b.kind == kinds[r.kind] for b, r in zip(by_slot, bound) if r.kind != "image"), kernel
        assert len(d.push_constants) == push_bytes == info.push_constant_size, kernel
        assert set(declared(spirv, d.spec_constants)) == spec_ids, kernel  # what the compiled shader reads
    # passed as the C++ passes them, optimized away: q8ta_im2col's apply_bias (3) and output layout (4; the store
    # hard-codes 4W4C strides), the GEMM's input layout (6)
    assert set(etvk.make(real, "q8ta_im2col").spec_constants) == {3, 4, 5}
    assert set(etvk.make(real, "q8ta_conv2d_im2col").spec_constants) == {3, 4, 5, 6}
    # ET-VK's pickers: general {W4, H, C4}; 1x8x9x11 → 12 out channels: W4 3, H 9, C4 3
    d = etvk.make(real, "q8ta_conv2d")
    assert d.global_size == (3, 9, 3) and d.local_size == (16, 1, 4)
    d = etvk.make(real, "q8ta_conv2d", shape=(1, 8, 9, 40), out_channels=40)  # x 10 >= 4, y 9 >= 2, z 10 >= 8
    assert d.global_size == (10, 9, 10) and d.local_size == (4, 2, 8)
    d = etvk.make(real, "q8ta_conv2d", shape=(1, 8, 3, 3), out_channels=40)  # x 1 < 2
    assert d.local_size == (1, 1, 64)
    d = etvk.make(real, "q8ta_conv2d_transposed", shape=(1, 8, 3, 12), out_channels=40)
    assert d.global_size[1] > 1 and d.local_size == (8, 1, 8)  # local y always 1
    d = etvk.make(real, "q8ta_conv2d_im2col")  # pw: {C4, W4, H} with pick_hw_square_wg_size
    assert d.global_size == (3, 3, 9) and d.local_size == (4, 16, 1)
    (step,) = d.before  # q8ta_im2col first, writing the GEMM's input; the same constants as the q8ta_im2col family
    alone = etvk.make(real, "q8ta_im2col")
    assert step.variant == "q8ta_im2col" and step.bindings[0] == 1 and d.resources[1].data is None
    assert [d.resources[i].data if d.resources[i].kind == "ubo" else d.resources[i].name for i in step.bindings[2:]] \
        == [r.data for r in alone.resources[2:]]
    assert (step.push_constants, step.spec_constants, step.global_size, step.local_size) == \
        (alone.push_constants, alone.spec_constants, alone.global_size, alone.local_size)
    d = etvk.make(real, "q8ta_im2col")  # K = 3·3·8 = 72 → K4 18, W4 3, H 9
    assert d.global_size == (18 * 3 * 9, 1, 1) and d.local_size == (64, 1, 1)
    d = etvk.make(real, "pack_q8_conv2d_weights", shape=(10, 6, 3, 3))  # {Kw·OC4, IC4·Kh}
    assert d.global_size == (9, 6, 1) and d.resources[0].extent == (9, 6)


def test_numpy_packings_index_as_the_shaders_read():
    w = torch.randint(-127, 128, (6, 5, 2, 3), dtype=torch.int8, generator=torch.Generator().manual_seed(1))
    mat = C.weight_matrix(w)
    assert mat.shape == (6, 32)  # 2·3·5 = 30 → 32
    t = C.pack_conv2d_weight(mat, (2, 3), 5)
    assert t.shape == (2 * 2, 2 * 3, 4)  # [Kh·IC4, OC4·Kw, 4]
    for oc4 in range(2):
        for kx in range(3):
            for ky in range(2):
                for ic4 in range(2):
                    for j in range(4):
                        oc = 4 * oc4 + j
                        want = np.zeros(4, np.int8)
                        for col in range(4):
                            if oc < 6 and 4 * ic4 + col < 5:
                                want[col] = w[oc, 4 * ic4 + col, ky, kx]
                        assert t[ky * 2 + ic4, oc4 * 3 + kx, j] == want.view(np.int32)[0]
    dw = torch.randint(-127, 128, (6, 1, 2, 5), dtype=torch.int8, generator=torch.Generator().manual_seed(2))
    hwc = C.dw_weight_hwc(dw)
    assert hwc.shape == (2, 5, 8)
    t = C.pack_dw_weight(hwc)
    assert t.shape == (2 * 2, 2, 4)  # [Kh·KW4, C4, 4]
    for ky in range(2):
        for kx in range(5):
            for c4 in range(2):
                want = np.zeros(4, np.int8)
                for i in range(4):
                    if 4 * c4 + i < 6:
                        want[i] = dw[4 * c4 + i, 0, ky, kx]
                assert t[ky * 2 + kx // 4, c4, kx % 4] == want.view(np.int32)[0]


def test_im2col_is_the_conv_as_a_matrix_product():
    """The numpy im2col times the export's weight matrix is torch's conv, groups included."""
    g = torch.Generator().manual_seed(3)
    cases = (((1, 8, 7, 9), 5, (3, 2), (2, 1), (1, 0), (1, 2), 1), ((1, 8, 5, 6), 4, (3, 3), (1, 1), (1, 1), (1, 1), 2))
    for shape, oc, kernel, stride, padding, dilation, groups in cases:
        x = torch.randint(-128, 128, shape, dtype=torch.int8, generator=g)
        w = torch.randint(-127, 128, (oc, shape[1] // groups, *kernel), dtype=torch.int8, generator=g)
        ho, wo = C.out_hw("t", shape[2], shape[3], kernel, stride, padding, dilation)
        col = im2col(x, kernel, stride, padding, dilation, groups, ho, wo, 0).to(torch.int64)[0]  # [K, H, W4]
        mat = torch.from_numpy(C.weight_matrix(w)).to(torch.int64)  # [OC, K_per_group]
        kpg, ocg = mat.shape[1], oc // groups
        y = torch.cat([torch.einsum("ok,khw->ohw", mat[gi * ocg:(gi + 1) * ocg], col[gi * kpg:(gi + 1) * kpg])
                       for gi in range(groups)])[:, :, :wo]
        assert torch.equal(y[None], C.int_conv2d(x, w, 0, stride, padding, dilation, groups))


def test_which_path_q8ta_conv2d_takes():
    assert uses_im2col(32, 1, 64, 64)  # channels per group >= 32
    assert uses_im2col(8, 1, 64, 64)  # 4096 outputs
    assert not uses_im2col(8, 1, 65, 64)
    assert not uses_im2col(6, 1, 8, 8)  # channels per group not a multiple of 4
    assert not uses_im2col(16, 2, 8, 8) and uses_im2col(16, 2, 8, 8, mali=True)  # grouped: general, but on Mali


@pytest.mark.parametrize("kernel", ["q8ta_conv2d", "q8ta_conv2d_im2col", "q8ta_im2col", "q8ta_conv2d_transposed"])
def test_bad_conv_inputs_are_named(kernel):
    make = KERNELS[kernel]  # the arguments are checked before any template is read
    with pytest.raises(ValueError, match=r"groups must divide the input and output channels: given 8 in, 6 out, "
                                         r"groups 4"):
        make(None, shape=(1, 8, 5, 5), out_channels=6, groups=4)
    with pytest.raises(ValueError, match=r"channels per group a multiple of 4.*given 12 channels / 2 groups = 6|"
                                         r"given 12 / 2 = 6"):
        make(None, shape=(1, 12, 5, 5), out_channels=8, groups=2)
    with pytest.raises(ValueError, match=r"output channels per group a multiple of 4.*given 12 / 2 = 6"):
        make(None, shape=(1, 16, 5, 5), out_channels=12, groups=2)
    with pytest.raises(ValueError, match=r"expected batch 1, given batch 3"):
        make(None, shape=(3, 8, 5, 5))
    with pytest.raises(ValueError, match=r"stride is an int or an \(H, W\) pair of ints >= 1, given 0"):
        make(None, shape=(1, 8, 5, 5), stride=0)
    if kernel != "q8ta_im2col":
        with pytest.raises(ValueError, match=r"expected one of \['4W4C', '4C1W', '4C'\], given '4W'"):
            make(None, shape=(1, 8, 5, 5), out_layout="4W")


def test_bad_shapes_and_options_are_named():
    with pytest.raises(ValueError, match=r"output would be empty: input H×W 2×2, kernel \(5, 5\)"):
        KERNELS["q8ta_conv2d"](None, shape=(1, 4, 2, 2), kernel_size=5, padding=0)
    with pytest.raises(ValueError, match=r"channels per group a multiple of 4 \(VK_CHECK_COND.*Im2Col.*given 6"):
        KERNELS["q8ta_conv2d_im2col"](None, shape=(1, 6, 5, 5))
    with pytest.raises(ValueError, match=r"one output channel per input channel: expected out_channels 8, given 16"):
        KERNELS["q8ta_conv2d_dw"](None, shape=(1, 8, 5, 5), out_channels=16)
    with pytest.raises(ValueError, match=r"groups == in_channels.*expected groups 8, given 2"):
        KERNELS["q8ta_conv2d_dw"](None, shape=(1, 8, 5, 5), groups=2)
    with pytest.raises(ValueError, match=r"one variant, q8ta_conv2d_dw_float.*expected fallback=False"):
        KERNELS["q8ta_conv2d_dw"](None, fallback=True)
    with pytest.raises(ValueError, match=r"im2col step takes no relu.*given \{'relu': True\}"):
        KERNELS["q8ta_im2col"](None, relu=True)
    with pytest.raises(ValueError, match=r"dilation 1 only.*given \(2, 2\)"):
        KERNELS["q8ta_conv2d_transposed"](None, dilation=2)
    with pytest.raises(ValueError, match=r"output_padding must be smaller than stride.*\(2, 2\), stride \(2, 2\)"):
        KERNELS["q8ta_conv2d_transposed"](None, output_padding=2)
    with pytest.raises(ValueError, match=r"an int8 \[OC, IC_per_group, Kh, Kw\] weight, given torch.float32"):
        KERNELS["pack_q8_conv2d_weights"](None, weight=torch.zeros(4, 4, 3, 3))
    with pytest.raises(ValueError, match=r"\[C, 1, Kh, Kw\] with sizes >= 1, given \(8, 2, 3, 3\)"):
        KERNELS["pack_q8_conv2d_dw_weights"](None, shape=(8, 2, 3, 3))
    with pytest.raises(ValueError, match=r"storage must be 'texture2d' or 'buffer', got 'texture3d'"):
        KERNELS["pack_q8_conv2d_weights"](None, storage="texture3d")


def test_a_revision_without_the_template_is_named(tmp_path):
    """A checkout revision that lacks a family's template: the error names the template and the revision."""
    from workbench.etvk.codegen import UnknownKernelError

    class Source:
        label, commit, glsl_dir = "v0.6.0", "0123456789abcdef", tmp_path

    class Gen:
        source = Source()

        def expand(self, name):
            raise UnknownKernelError(f"no shader variant {name!r}")

    with pytest.raises(UnknownKernelError, match=r"q8ta_conv2d_dw: ET-VK's template q8ta_conv2d_dw.glsl "
                                                 r"\(variant 'q8ta_conv2d_dw_float'\) is not in .* at v0.6.0 "
                                                 r"\(commit 0123456789\)"):
        KERNELS["q8ta_conv2d_dw"](Gen())


@needs_checkout
def test_cli_lists_and_runs_them(capsys):
    from workbench.cli import main
    assert main(["etvk", "list", "q8ta_conv2d", "q8ta_im2col", "pack_q8_conv2d", "--executorch", CHECKOUT]) == 0
    out = capsys.readouterr().out
    families = {line.split()[0]: line.split()[-1] for line in out.splitlines()[2:] if len(line.split()) == 3}
    assert families["q8ta_conv2d_dw_float"] == "q8ta_conv2d_dw"  # the longest family name, not q8ta_conv2d
    assert families["q8ta_conv2d_transposed_fallback_float"] == "q8ta_conv2d_transposed"
    assert families["q8ta_conv2d_float"] == "q8ta_conv2d" and families["q8ta_im2col"] == "q8ta_im2col"
    assert families["pack_q8_conv2d_dw_weights_buffer"] == "pack_q8_conv2d_dw_weights"
    assert families["pack_q8_conv2d_weights_texture2d"] == "pack_q8_conv2d_weights"
    assert main(["etvk", "run", "q8ta_conv2d", "q8ta_conv2d_transposed", "--executorch", CHECKOUT,
                 "--shape", "1,8,5,7", "--out-channels", "6", "--kernel-size", "3,2", "--stride", "2",
                 "--padding", "1,0"]) == 0
    out = capsys.readouterr().out
    assert "q8ta_conv2d_float" in out and "k3x2 s2x2 p1x0" in out


@needs_checkout
def test_a_real_revision_before_the_templates_is_named():
    """5bf5931e99 added q8ta_conv2d_dw.glsl (and, with 67ff1b836a, the general conv); its parent has neither."""
    from workbench.etvk.codegen import CheckoutError, UnknownKernelError
    try:
        gen = etvk.Codegen(etvk.source(CHECKOUT, rev="5bf5931e99^"))
    except CheckoutError as error:
        pytest.skip(f"the checkout cannot read revision 5bf5931e99^: {error}")
    for kernel in ("q8ta_conv2d_dw", "q8ta_conv2d", "q8ta_conv2d_transposed"):
        with pytest.raises(UnknownKernelError, match=rf"template {kernel}.glsl .* at 5bf5931e99\^ \(commit "
                                                     rf"[0-9a-f]{{10}}\)"):
            etvk.make(gen, kernel)
