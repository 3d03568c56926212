"""Pixel shuffle on the real device: float kernels (buffer / texture × W / H / C-packed, fp32 / fp16), the fused
int8x4 kernel (every in/out pair of 4W4C / 4C1W / 4C, passthrough and requantize, r = 1, 2, 3, 4), the decomposed
chain, errors, spec sizes, the pictures and the benchmark suite (quick)."""
import itertools
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from workbench import layouts as L
from workbench import ops
from workbench.kernels import pixel_shuffle as K
from workbench.kernels import texture_local_size
from workbench.kernels import pixel_shuffle_block as B
from workbench.kernels import q8ta_quantize as Q
from workbench.vk import MissingFeatureError

# (input NCHW, r): C_out not a multiple of 4, H / W not multiples of 4, batch > 1, r = 1, 2, 3, 4
SHAPES = [((2, 18, 3, 5), 3),    # C_out 2, N 2
          ((1, 20, 3, 5), 2),    # C_out 5
          ((1, 5, 3, 2), 1),     # identity
          ((2, 8, 2, 3), 2)]     # C_out 2, N 2
INT8_SHAPES = SHAPES + [((1, 32, 2, 3), 4),   # C_out 2, r = 4
                        ((1, 96, 3, 5), 2)]   # C_out 24 (RefineNet channel count)
QPARAMS = {"same": K.SAME_QP, "diff": K.DIFF_QP, "zp": (0.05, -3, 0.021, 7)}


def _torch_q8_reference(q, r, s_in, zp_in, s_out, zp_out):
    """torch.quantize_per_tensor(F.pixel_shuffle(dequantized)) as int8."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's quantized tensors print a deprecation warning
        x = torch._make_per_tensor_quantized_tensor(q, s_in, zp_in).dequantize()
        return torch.quantize_per_tensor(F.pixel_shuffle(x, r), s_out, zp_out, torch.qint8).int_repr()


# ---------------------------------------------------------------------------------------------------------------------
# float kernels
# ---------------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("storage,layout,dtype", list(itertools.product(
    ["buffer", "texture"], ["width", "height", "channels"], [torch.float32, torch.float16])))
def test_float_matches_torch_exactly(device, storage, layout, dtype):
    g = torch.Generator().manual_seed(1)
    for shape, r in SHAPES:
        x = torch.randn(shape, generator=g).to(dtype)
        y = ops.pixel_shuffle(x, r, storage=storage, layout=layout, device=device)
        assert y.dtype == dtype and y.shape == F.pixel_shuffle(x, r).shape
        assert torch.equal(y, F.pixel_shuffle(x, r)), (shape, r)


def test_float_3d_input_and_default_device():
    x = torch.randn(8, 3, 2)
    y = ops.pixel_shuffle(x, 2)  # the current device
    assert y.shape == (2, 6, 4) and torch.equal(y, F.pixel_shuffle(x, 2))


def test_fp16_buffers_need_16bit_storage(device, monkeypatch):
    monkeypatch.setitem(device.info.features, "storage_buffer_16bit", False)
    x = torch.randn(1, 8, 2, 2).half()
    with pytest.raises(MissingFeatureError, match="storage_buffer_16bit"):
        ops.pixel_shuffle(x, 2, device=device)
    # fp16 textures are rgba16f images: no 16-bit storage buffers involved
    y = ops.pixel_shuffle(x, 2, storage="texture", device=device)
    assert torch.equal(y, F.pixel_shuffle(x, 2))


# ---------------------------------------------------------------------------------------------------------------------
# the fused int8x4 kernel and the chain
# ---------------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("in_layout,out_layout", list(itertools.product(K.FUSED_LAYOUTS, repeat=2)))
def test_fused_every_layout_pair(device, in_layout, out_layout):
    g = torch.Generator().manual_seed(2)
    for shape, r in INT8_SHAPES:
        q = torch.randint(-128, 128, shape, generator=g, dtype=torch.int8)
        for name, qp in QPARAMS.items():
            y = ops.q8ta_pixel_shuffle(q, r, *qp, in_layout=in_layout, out_layout=out_layout, device=device)
            assert y.dtype == torch.int8 and y.shape == F.pixel_shuffle(q, r).shape
            if name == "same":  # passthrough: a pure byte shuffle
                assert torch.equal(y, F.pixel_shuffle(q, r)), (shape, r)
            spec = K.Q8taPixelShuffleSpec(shape, r, in_layout, out_layout, *qp)
            assert np.array_equal(y.numpy(), spec.reference(q)), (shape, r, name)
            diff = (y.int() - _torch_q8_reference(q, r, *qp).int()).abs().max().item()
            assert diff <= 1, (shape, r, name, diff)


@pytest.mark.parametrize("in_layout,out_layout", [("4W4C", "4W4C"), ("4C1W", "4C"), ("4C", "4W4C")])
def test_chain_agrees_with_fused(device, in_layout, out_layout):
    g = torch.Generator().manual_seed(3)
    for shape, r in INT8_SHAPES[:3] + INT8_SHAPES[4:5]:
        q = torch.randint(-128, 128, shape, generator=g, dtype=torch.int8)
        for qp in QPARAMS.values():
            fused = ops.q8ta_pixel_shuffle(q, r, *qp, in_layout=in_layout, out_layout=out_layout, device=device)
            chain = ops.q8ta_pixel_shuffle(q, r, *qp, in_layout=in_layout, out_layout=out_layout, fused=False,
                                           device=device)
            assert torch.equal(fused, chain), (shape, r, qp)
            rspec = ops.q8ta_pixel_shuffle(q, r, *qp, in_layout=in_layout, out_layout=out_layout, device=device,
                                           specialize_r=True)  # r as a specialization constant
            assert torch.equal(fused, rspec), (shape, r, qp)
            outorder = ops.q8ta_pixel_shuffle(q, r, *qp, in_layout=in_layout, out_layout=out_layout, device=device,
                                              specialize_r=True, output_order=True)  # thread t → output word t
            assert torch.equal(fused, outorder), (shape, r, qp)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 2), c_out=st.integers(1, 9), h=st.integers(1, 5), w=st.integers(1, 9),
       same=st.booleans(), seed=st.integers(0, 2**16))
def test_block_kernel_matches_etvk_kernel_and_torch(device, n, c_out, h, w, same, seed):
    """The 16-byte block transpose (4W4C → 4W4C, r = 2) against ET-VK's per-word kernel, on awkward shapes."""
    shape = (n, 4 * c_out, h, w)
    qp = K.SAME_QP if same else K.DIFF_QP
    q = torch.randint(-128, 128, shape, generator=torch.Generator().manual_seed(seed), dtype=torch.int8)
    block = ops.q8ta_pixel_shuffle(q, 2, *qp, device=device, block=True)
    per_word = ops.q8ta_pixel_shuffle(q, 2, *qp, device=device, block=False)
    assert torch.equal(block, per_word), shape
    if same:
        assert torch.equal(block, F.pixel_shuffle(q, 2))
    assert (block.int() - _torch_q8_reference(q, 2, *qp).int()).abs().max() <= 1


def test_block_kernel_only_where_it_applies():
    with pytest.raises(ValueError, match="needs r = 2, got r = 3"):
        B.Q8taPixelShuffleBlockSpec((1, 18, 2, 2), 3, "4W4C", "4W4C")
    with pytest.raises(TypeError, match="unexpected keyword"):  # options of the block kernel\'s own spec
        K.Q8taPixelShuffleSpec((1, 8, 2, 2), 2, lut=True)
    with pytest.raises(TypeError, match="unexpected keyword"):  # options of the block kernel\'s own spec
        K.Q8taPixelShuffleSpec((1, 8, 2, 2), 2, swizzle=True)
    spec = B.Q8taPixelShuffleBlockSpec((2, 20, 3, 5), 2)
    assert spec.threads == 2 * 3 * 2 * 2 and spec.variant == "q8ta_pixel_shuffle_block"
    # 16-byte accesses exactly where a block is contiguous and aligned
    assert B.Q8taPixelShuffleBlockSpec((1, 48, 2, 8), 2, "4C1W", "4C").vector_access == (True, False)
    assert B.Q8taPixelShuffleBlockSpec((1, 64, 2, 7), 2, "4C1W", "4C1W").vector_access == (False, False)
    assert B.Q8taPixelShuffleBlockSpec((1, 64, 2, 6), 2, "4C", "4C1W").vector_access == (True, True)
    assert B.Q8taPixelShuffleBlockSpec((1, 40, 2, 6), 2, "4C", "4W4C").vector_access == (False, True)
    pixel = B.Q8taPixelShuffleBlockSpec((2, 64, 3, 5), 2, "4W4C", "4C")  # C_out = 16: 4C in 16-byte blocks
    assert pixel.pixel_tile and pixel.vector_access == (True, True) and pixel.threads == 2 * 3 * 5 * 1
    assert not B.Q8taPixelShuffleBlockSpec((1, 64, 2, 8), 2, "4C1W", "4C", pixel_tile=False).pixel_tile
    with pytest.raises(ValueError, match="pixel_tile needs"):
        B.Q8taPixelShuffleBlockSpec((1, 40, 2, 6), 2, "4C", "4C", pixel_tile=True)  # C4_out = 3


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 2), c_out=st.sampled_from([1, 3, 4, 5, 8]), h=st.integers(1, 3),
       w=st.sampled_from([1, 2, 3, 4, 5, 8]), seed=st.integers(0, 2**16))
@example(n=2, c_out=4, h=2, w=4, seed=1)   # every 16-byte access path (C4 and W multiples of 4)
@example(n=2, c_out=5, h=3, w=5, seed=2)   # every word path (odd width, C_out not a multiple of 4)
@example(n=2, c_out=13, h=2, w=3, seed=3)  # 4C output in 16-byte pixel tiles, lanes past C_out = 13 zero
@example(n=1, c_out=16, h=1, w=4, seed=4)  # pixel tiles with 16-byte 4C loads
def test_block_kernel_every_layout_pair(device, n, c_out, h, w, seed):
    """The block kernel for every channels-packed pair (vector and word accesses, awkward widths and channel
    counts, batch > 1), passthrough, requantize and the requantize table, against torch and ET-VK's kernel."""
    shape = (n, 4 * c_out, h, w)
    q = torch.randint(-128, 128, shape, generator=torch.Generator().manual_seed(seed), dtype=torch.int8)
    expected_same = F.pixel_shuffle(q, 2)
    for in_layout in K.FUSED_LAYOUTS:
        for out_layout in K.FUSED_LAYOUTS:
            kw = dict(in_layout=in_layout, out_layout=out_layout, device=device)
            got = ops.q8ta_pixel_shuffle(q, 2, *K.SAME_QP, block=True, **kw)
            assert torch.equal(got, expected_same), (shape, in_layout, out_layout)
            if B.Q8taPixelShuffleBlockSpec(shape, 2, in_layout, out_layout).pixel_tile:  # and the other tile
                spec = B.Q8taPixelShuffleBlockSpec(shape, 2, in_layout, out_layout, pixel_tile=False)
                with K.Q8taPixelShuffleRun(device, spec, q) as run:
                    run.run()
                    assert torch.equal(run.output(), expected_same), (shape, in_layout, out_layout, "4-width")
            spec = B.Q8taPixelShuffleBlockSpec(shape, 2, in_layout, out_layout, *K.SAME_QP, swizzle=True)
            with K.Q8taPixelShuffleRun(device, spec, q) as run:
                run.run()
                assert torch.equal(run.output(), expected_same), (shape, in_layout, out_layout, "swizzle")
            per_word = ops.q8ta_pixel_shuffle(q, 2, *K.DIFF_QP, block=False, **kw)
            for kw in ({"lut": 0}, {"lut": 1}, {"lut": 2}, {"lut": 2, "swizzle": True, "local_x": 256}):
                spec = B.Q8taPixelShuffleBlockSpec(shape, 2, in_layout, out_layout, *K.DIFF_QP, **kw)
                with K.Q8taPixelShuffleRun(device, spec, q) as run:
                    run.run()
                    requant = run.output()
                assert torch.equal(requant, per_word), (shape, in_layout, out_layout, kw)
            assert (requant.int() - _torch_q8_reference(q, 2, *K.DIFF_QP).int()).abs().max() <= 1


def test_chain_intermediates_and_requant_vs_torch(device):
    shape, r = (1, 12, 3, 5), 2
    s_in, zp_in, s_out, zp_out = K.DIFF_QP
    q = torch.randint(-128, 128, shape, generator=torch.Generator().manual_seed(4), dtype=torch.int8)
    spec = Q.Q8taPixelShuffleChainSpec(K.Q8taPixelShuffleSpec(shape, r, "4C1W", "4W4C", *K.DIFF_QP))
    with Q.Q8taChainRun(device, spec, q) as run:
        run.run()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dq = torch._make_per_tensor_quantized_tensor(q, s_in, zp_in).dequantize()
        assert torch.equal(run.intermediate("in"), dq)                      # dequantize: bit-exact with torch
        assert torch.equal(run.intermediate("out"), F.pixel_shuffle(dq, r))
        out = run.output()
    diff = (out.int() - _torch_q8_reference(q, r, *K.DIFF_QP).int()).abs()
    assert diff.max() <= 1


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 2), c_out=st.integers(1, 6), h=st.integers(1, 4), w=st.integers(1, 5),
       r=st.integers(1, 3), in_layout=st.sampled_from(K.FUSED_LAYOUTS), out_layout=st.sampled_from(K.FUSED_LAYOUTS),
       s_in=st.floats(1e-3, 0.1), zp_in=st.integers(-20, 20), s_out=st.floats(1e-3, 0.1),
       zp_out=st.integers(-20, 20), seed=st.integers(0, 2**16))
def test_fused_random_shapes(device, n, c_out, h, w, r, in_layout, out_layout, s_in, zp_in, s_out, zp_out, seed):
    shape = (n, c_out * r * r, h, w)
    q = torch.randint(-128, 128, shape, generator=torch.Generator().manual_seed(seed), dtype=torch.int8)
    y = ops.q8ta_pixel_shuffle(q, r, s_in, zp_in, s_out, zp_out, in_layout, out_layout, device=device)
    spec = K.Q8taPixelShuffleSpec(shape, r, in_layout, out_layout, s_in, zp_in, s_out, zp_out)
    assert np.array_equal(y.numpy(), spec.reference(q))
    assert (y.int() - _torch_q8_reference(q, r, s_in, zp_in, s_out, zp_out).int()).abs().max() <= 1


def test_passthrough_rule():
    s = 0.007112
    assert K.is_passthrough(s, 3, s, 3)
    assert K.is_passthrough(s, 0, s * (1 + 5e-8), 0)          # within ET-VK's 1e-7 relative tolerance
    assert not K.is_passthrough(s, 0, s * (1 + 3e-7), 0)
    assert not K.is_passthrough(s, 0, s, 1)                    # zero points differ
    assert K.Q8taPixelShuffleSpec((1, 4, 1, 1), 2, "4C", "4C", *K.SAME_QP).path == "passthrough"
    assert K.Q8taPixelShuffleSpec((1, 4, 1, 1), 2, "4C", "4C", *K.DIFF_QP).path == "requant"
    pc = np.frombuffer(K.Q8taPixelShuffleSpec((1, 4, 1, 1), 2, "4C", "4C", *K.DIFF_QP).push_constants(), np.int32)
    assert len(pc) == 6 and pc[4] == 2 and pc[5] == 0           # 24 bytes: ..., r, passthrough


def test_word_sources_match_the_kernel(device):
    """The picture's data (word_sources) says where each output lane comes from; the kernel agrees."""
    from workbench.viz.pixel_shuffle_views import word_sources
    for (in_l, out_l), (shape, r) in zip(itertools.product(K.FUSED_LAYOUTS, repeat=2),
                                         itertools.cycle(INT8_SHAPES[:4])):
        lin, lout = L.get_layout(in_l), L.get_layout(out_l)
        words = np.arange(lin.num_words(shape) * 4, dtype=np.uint8).view(np.int32)  # byte b holds b % 256
        spec = K.Q8taPixelShuffleSpec(shape, r, in_l, out_l, *K.SAME_QP)
        with K.Q8taPixelShuffleRun(device, spec) as run:
            run.inp.upload(words)
            run.run()
            out = run.output_words().view(np.uint8)
        for out_word in range(0, lout.num_words(spec.out_sizes), 3):
            _, _, _, w, _ = lout.word_lane_to_element(spec.out_sizes, out_word, 0)
            if w >= spec.out_sizes[3]:
                continue  # words of the width padding (4W4C) are never written
            for s in word_sources(in_l, out_l, shape, r, out_word):
                got = out[4 * out_word + s["out_lane"]]
                expected = (4 * s["in_word"] + s["in_lane"]) % 256 if s["valid"] else 0
                assert got == expected, (in_l, out_l, shape, r, out_word, s)


# ---------------------------------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------------------------------

def test_clear_errors(device):
    x = torch.randn(1, 10, 2, 2)
    q = torch.zeros(1, 10, 2, 2, dtype=torch.int8)
    with pytest.raises(ValueError, match=r"r² = 4.*got C = 10"):
        ops.pixel_shuffle(x, 2, device=device)
    with pytest.raises(ValueError, match=r"r² = 9.*got C = 10"):
        ops.q8ta_pixel_shuffle(q, 3, 0.1, 0, 0.1, 0, device=device)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="upscale_factor must be an int >= 1"):
            ops.pixel_shuffle(torch.randn(1, 4, 2, 2), bad, device=device)
    q4 = torch.zeros(1, 4, 2, 2, dtype=torch.int8)
    for bad_layout in ("4H4W", "4W", "CHANNELS_PACKED"):
        with pytest.raises(ValueError, match="4W4C, 4C1W, 4C"):
            ops.q8ta_pixel_shuffle(q4, 2, 0.1, 0, 0.1, 0, in_layout=bad_layout, device=device)
        with pytest.raises(ValueError, match="output layout"):
            ops.q8ta_pixel_shuffle(q4, 2, 0.1, 0, 0.1, 0, out_layout=bad_layout, device=device)
    with pytest.raises(ValueError, match="unknown layout 'nope'.*allowed: 4W4C"):
        ops.q8ta_pixel_shuffle(q4, 2, 0.1, 0, 0.1, 0, in_layout="nope", device=device)
    with pytest.raises(TypeError, match=r"int8 tensor \(torch.int8\), got torch.float32"):
        ops.q8ta_pixel_shuffle(torch.randn(1, 4, 2, 2), 2, 0.1, 0, 0.1, 0, device=device)
    with pytest.raises(TypeError, match="float32 or float16.*use q8ta_pixel_shuffle"):
        ops.pixel_shuffle(q4, 2, device=device)
    with pytest.raises(TypeError, match="float32 or float16"):
        ops.pixel_shuffle(torch.randn(1, 4, 2, 2, dtype=torch.float64), 2, device=device)
    for shape in ((4, 2), (1, 1, 4, 2, 2)):
        with pytest.raises(ValueError, match=r"3-D \(C, H, W\) or 4-D .*got %d-D" % len(shape)):
            ops.pixel_shuffle(torch.randn(shape), 2, device=device)
        with pytest.raises(ValueError, match="3-D"):
            ops.q8ta_pixel_shuffle(torch.zeros(shape, dtype=torch.int8), 2, 0.1, 0, 0.1, 0, device=device)
    with pytest.raises(ValueError, match="unknown storage 'image'"):
        ops.pixel_shuffle(torch.randn(1, 4, 2, 2), 2, storage="image", device=device)
    with pytest.raises(ValueError, match="unknown layout .*'depth'.*'channels', 'width' or 'height'"):
        ops.pixel_shuffle(torch.randn(1, 4, 2, 2), 2, layout="depth", device=device)
    with pytest.raises(ValueError, match="output scale must be a finite positive"):
        ops.q8ta_pixel_shuffle(q4, 2, 0.1, 0, 0.0, 0, device=device)
    with pytest.raises(ValueError, match=r"zero point must be an int in \[-128, 127\]"):
        ops.q8ta_pixel_shuffle(q4, 2, 0.1, 300, 0.1, 0, device=device)


# ---------------------------------------------------------------------------------------------------------------------
# spec sizes
# ---------------------------------------------------------------------------------------------------------------------

def test_spec_sizes_perf_shape(device):
    # ET-VK's largest PERF case: [1,96,128,72] → [1,24,256,144]; 221,184 threads = 3,456 workgroups of 64 (§2.5)
    spec = K.Q8taPixelShuffleSpec((1, 96, 128, 72), 2)
    assert spec.out_sizes == (1, 24, 256, 144) and spec.threads == 221_184
    assert spec.global_size(device) == (221_184, 1, 1) and spec.local_size == (64, 1, 1)
    assert spec.bytes_written() == 884_736 and spec.bytes_read() == 884_736    # int8 bytes, once each
    chain = Q.Q8taPixelShuffleChainSpec(spec)
    assert chain.dispatches == 3 and [s.threads for s in chain.stages] == [884_736, 884_736, 221_184]
    # dequantize 1 + 4, float pixel shuffle 4 + 4, quantize 4 + 1 bytes per element: 18 vs 2 for the fused kernel
    assert chain.bytes_moved() == 18 * 884_736 == 9 * spec.bytes_moved()
    fb = K.PixelShuffleSpec((1, 96, 128, 72), 2, "buffer", "height", "float16")
    assert fb.threads == 884_736 and fb.bytes_moved() == 2 * 2 * 884_736 and fb.variant == "pixel_shuffle_buffer_half"
    ft = K.PixelShuffleSpec((1, 96, 128, 72), 2, "texture", "channels")
    assert ft.global_size() == (144, 256, 6) and ft.threads == 144 * 256 * 6
    assert ft.bytes_read() == 72 * 128 * 24 * 16 and ft.bytes_written() == 144 * 256 * 6 * 16


def test_spec_sizes_padding_and_odd_shapes(device):
    # 4W4C pads W to 4 and C to 4: only words holding logical elements count as read
    spec = K.Q8taPixelShuffleSpec((1, 20, 3, 5), 2, "4W4C", "4C1W")
    assert spec.bytes_read() == 4 * (3 * 5 * 5) and L.get_layout("4W4C").num_words((1, 20, 3, 5)) == 3 * 8 * 5
    assert spec.threads == 2 * 6 * 10 and spec.bytes_written() == 4 * spec.threads
    quant = Q.Q8taPixelShuffleChainSpec(spec).stages[2]
    assert quant.threads == L.get_layout("4C1W").num_words((1, 5, 6, 10))   # every word, padding included
    ft = K.PixelShuffleSpec((2, 18, 3, 5), 3, "texture", "width")
    assert ft.out_sizes == (2, 2, 9, 15) and ft.global_size() == (4, 9, 4)   # W/4, H, C·N
    assert texture_local_size((18, 32, 6)) == (4, 8, 2)                   # ET-VK's worked example
    assert texture_local_size((100, 1, 1)) == (64, 1, 1) and texture_local_size((8, 32, 1)) == (4, 16, 1)
    # large dispatches fold into 2-D so the x workgroup count stays within the device limit
    big = K.Q8taPixelShuffleSpec((1, 4, 4096, 8192), 2)
    gx, gy, _ = big.global_size(device)
    assert gx * gy >= big.threads and gx // 64 <= device.info.max_workgroup_count[0]


# ---------------------------------------------------------------------------------------------------------------------
# pictures and explorer
# ---------------------------------------------------------------------------------------------------------------------

def test_pictures(tmp_path):
    from workbench.viz import pixel_shuffle_views as V
    fig = V.index_map(2, 4, 6, 2, highlight=(1, 3, 2))
    labels = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == "out-cell"]
    assert len(labels) == 2 * 4 * 6 and labels[0] == "0\n0,0"
    assert "c_in = 1·4 + (3%2)·2 + 2%2 = 6" in fig._suptitle.get_text()
    fig = V.fused_word_sources("4W4C", "4W4C", (1, 16, 4, 4), 2, 9)     # ET-VK's worked example: thread 9
    src = V.word_sources("4W4C", "4W4C", (1, 16, 4, 4), 2, 9)
    assert [s["in_element"][1] for s in src] == [3, 7, 11, 15] and {s["in_lane"] for s in src} == {3}
    assert len({s["in_word"] for s in src}) == 4
    pad = V.word_sources("4C", "4C", (1, 18, 2, 2), 3, 1)                # C_out = 2: lanes 2, 3 are padding
    assert [s["valid"] for s in pad] == [True, True, False, False]
    with pytest.raises(ValueError, match="multiples of r=2"):
        V.index_map(1, 3, 4, 2)
    paths = V.save_pictures(tmp_path)
    assert all(p.stat().st_size > 10_000 for p in paths)


def test_explorer():
    from workbench.viz.pixel_shuffle_views import pixel_shuffle_explorer
    ex = pixel_shuffle_explorer(C_out=2, H_in=2, W_in=2, r=2, element=(1, 3, 2))
    assert ex.source == (6, 1, 1) and ex.text.startswith("output (c=1, oh=3, ow=2) ← input (c_in=6, ih=1, iw=1)")
    assert "fused 4W4C→4W4C: output word" in ex.label.value and ex.figure is not None and ex.image.value
    ex.sliders["r"].value = 3            # output becomes (2, 6, 6); the element stays in range
    assert ex.out_sizes == (2, 6, 6) and ex.source == (1 * 9 + 0 * 3 + 2, 1, 0)
    ex.out_layout.value = "4C1W"
    assert "4W4C→4C1W" in ex.text


# ---------------------------------------------------------------------------------------------------------------------
# benchmark suite (quick: shapes and columns, no timing asserts)
# ---------------------------------------------------------------------------------------------------------------------

def test_bench_suite_quick(device, tmp_path):
    from workbench import measure
    from workbench.benchmarks import pixel_shuffle as PB
    with measure.ResultsWriter(tmp_path / "ps", measure.environment(device)) as writer:
        df = PB.bench_suite(device, writer, quick=True, show_progress=False)
    assert set(df["impl"]) == {"fused", "chain", "float", "torch", "copy"}
    kernels = df[df["impl"].isin(["fused", "chain", "float"])]
    for col in ("shape", "out_shape", "r", "path", "qpath", "in_layout", "out_layout", "dispatches", "bytes",
                "GB/s", "copy_GBps", "copy_fraction", "torch_us", "vs_torch", "median_us", "device"):
        assert col in df.columns, col
        assert kernels[col].notna().all(), col
    assert set(kernels["r"]) == {2, 3}
    assert (df[df.impl == "chain"]["dispatches"] == 3).all() and (df[df.impl == "fused"]["dispatches"] == 1).all()
    assert set(df[df.impl == "fused"]["path"]) == {"fused-passthrough", "fused-requant"}
    assert set(df[df.impl == "chain"]["path"]) == {"chain-passthrough", "chain-requant"}
    for row in kernels.itertuples():
        assert row.bytes == row.bytes_read + row.bytes_written and row.copy_fraction > 0 and row.vs_torch > 0
    fused_pt = df[(df.path == "fused-passthrough") & (df.in_layout == "4W4C") & (df.out_layout == "4W4C")
                  & (df.variant == "q8ta_pixel_shuffle")]
    chain_pt = df[df.path == "chain-passthrough"]
    assert fused_pt["speedup_vs_chain"].notna().all() and len(fused_pt) == len(chain_pt) == 2
    assert (chain_pt["bytes"].to_numpy() > 5 * fused_pt["bytes"].to_numpy()).all()
    assert (df[df.impl == "copy"]["copy_bytes"] > 0).all()
    rspec = df[df["variant"] == "q8ta_pixel_shuffle_rspec"]
    assert len(rspec) == 4 and rspec["r_specialized"].all() and rspec["speedup_vs_chain"].notna().all()
    outorder = df[df["variant"] == "q8ta_pixel_shuffle_outorder"]
    assert len(outorder) == 2 and outorder["output_order"].all()
    assert (outorder["bytes"].to_numpy() == fused_pt["bytes"].to_numpy()).all()      # same traffic, more threads
    assert (outorder["threads"].to_numpy() >= fused_pt["threads"].to_numpy()).all()
    assert (kernels["shader_copy_fraction"] > 0).all()
    import pandas as pd
    assert len(pd.read_parquet(tmp_path / "ps.parquet")) == len(df)
