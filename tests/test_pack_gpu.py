"""GPU round trips of every layout against the numpy packers (one definition, two implementations)."""
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import layouts, ops
from workbench.kernels import pack as gpu

INT8 = ["4W4C", "4H4W", "4W", "4C", "4C1W"]
TEXTURES = [lay.name for lay in layouts.TEXTURE_LAYOUTS]
shapes = st.tuples(st.integers(1, 3), st.integers(1, 11), st.integers(1, 9), st.integers(1, 13))


def random_int8(sizes, seed=0):
    return np.random.default_rng(seed).integers(-128, 128, sizes, dtype=np.int8)


@pytest.mark.parametrize("layout", INT8)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=shapes)
def test_pack_unpack_matches_numpy(device, layout, sizes):
    x = random_int8(sizes, sum(sizes))
    words = gpu.pack(device, x, layout)
    np.testing.assert_array_equal(words, layouts.get_layout(layout).pack(x))
    np.testing.assert_array_equal(gpu.unpack(device, words, sizes, layout), x)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=shapes)
def test_block_pack_4w4c_matches_numpy(device, sizes):
    """The 16-byte-block 4W4C packer (unaligned rows, partial width and channel blocks) against the definition."""
    x = random_int8(sizes, 7 * sum(sizes))
    spec = gpu.PackSpec("4W4C", sizes, block=True)
    with device.buffer(gpu.nchw_words(x)) as src, device.buffer(nbytes=4 * spec.num_words) as dst, \
            device.uniform(spec.definition.buffer_metadata(spec.sizes)) as meta, device.record() as rec:
        gpu.record_pack(rec, device, spec, dst, src, meta)
        rec.submit()
        np.testing.assert_array_equal(dst.download(np.int32), layouts.get_layout("4W4C").pack(x))


def test_block_pack_only_for_4w4c():
    with pytest.raises(ValueError, match="packs NCHW into 4W4C only, got pack 4C1W"):
        gpu.PackSpec("4C1W", (1, 4, 4, 4), block=True)
    with pytest.raises(ValueError, match="got unpack 4W4C"):
        gpu.PackSpec("4W4C", (1, 4, 4, 4), "unpack", block=True)


def test_worked_example_on_the_gpu(device):
    """etvk.md §1.12: N=1, C=8, H=2, W=8; mark single elements and find them in the GPU-packed words."""
    table = {  # element (n,c,h,w) → word per layout
        (0, 1, 0, 0): {"4W4C": (0, 1), "4H4W": (8, 0), "4C1W": (0, 1), "4C": (0, 1), "4W": (4, 0)},
        (0, 4, 0, 0): {"4W4C": (4, 0), "4H4W": (32, 0), "4C1W": (8, 0), "4C": (1, 0), "4W": (16, 0)},
        (0, 0, 0, 1): {"4W4C": (1, 0), "4H4W": (0, 1), "4C1W": (1, 0), "4C": (2, 0), "4W": (0, 1)},
        (0, 0, 1, 0): {"4W4C": (16, 0), "4H4W": (1, 0), "4C1W": (16, 0), "4C": (16, 0), "4W": (2, 0)},
    }
    for element, expected in table.items():
        x = np.zeros((1, 8, 2, 8), np.int8)
        x[element] = 77
        for layout, (word, lane) in expected.items():
            words = gpu.pack(device, x, layout)
            assert words.size == {"4H4W": 64}.get(layout, 32)
            (nonzero,) = np.nonzero(words)
            assert nonzero.tolist() == [word], (layout, element)
            assert (int(words[word]) >> (8 * lane)) & 0xFF == 77, (layout, element)


def test_padding_lanes_are_zero(device):
    x = np.full((2, 5, 3, 6), -1, np.int8)  # all bits set: any garbage in padding would show
    for layout in INT8:
        definition = layouts.get_layout(layout)
        words = gpu.pack(device, x, layout)
        lanes = words.view(np.uint8).reshape(-1)
        word_idx = np.arange(lanes.size) // 4
        _, _, _, _, valid = definition.word_lane_to_element(x.shape, word_idx, np.arange(lanes.size) % 4)
        assert (lanes[~valid] == 0).all() and (lanes[valid] == 0xFF).all(), layout


def test_torch_ops_round_trip(device):
    x = torch.randint(-128, 128, (2, 7, 5, 3), dtype=torch.int8)
    words = ops.pack(x, "4C1W")
    assert isinstance(words, torch.Tensor) and words.dtype == torch.int32
    assert torch.equal(ops.unpack(words, x.shape, "4C1W"), x)


@pytest.mark.parametrize("layout", TEXTURES)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=shapes)
def test_texture_round_trip_matches_numpy(device, layout, dtype, sizes):
    x = np.random.default_rng(sum(sizes)).standard_normal(sizes).astype(np.float32)
    if dtype == "float16":
        x = x.astype(np.float16).astype(np.float32)  # exactly representable
    texels = gpu.to_texture(device, x, layout, dtype)
    np.testing.assert_array_equal(texels.astype(np.float32), layouts.get_layout(layout).to_texels(x))
    np.testing.assert_array_equal(gpu.from_texture(device, texels, sizes, layout, dtype), x)


def test_texture_layouts_exist():
    assert len(TEXTURES) == 3


def test_bad_input(device):
    with pytest.raises(ValueError, match="int8x4 layout"):
        gpu.PackSpec("CHANNELS_PACKED", (1, 4, 4, 4))
    with pytest.raises(ValueError, match="expected 16 int32 words, got 3"):
        gpu.unpack(device, np.zeros(3, np.int32), (1, 8, 2, 2), "4W4C")
    with pytest.raises(TypeError, match="expected an int8 tensor, got dtype float32"):
        gpu.pack(device, np.zeros((1, 4, 4, 4), np.float32), "4W4C")
    with pytest.raises(ValueError):
        layouts.get_layout("5X5Y")
    with pytest.raises(ValueError, match="direction is 'to_texture' or 'from_texture', got 'sideways'"):
        gpu.TextureSpec("CHANNELS_PACKED_TEXTURE", (1, 4, 4, 4), direction="sideways")


def test_pack_bench_quick(device):
    from workbench.benchmarks import pack as pack_bench
    df = pack_bench.bench_suite(device, quick=True, show_progress=False)
    assert set(df["layout"]) == {"-", *INT8} and df["correct"].iloc[1:].all()
    assert (df["GB/s"] > 0).all() and df["copy_fraction"].iloc[1:].notna().all()
