"""Tests for workbench.layouts, shaders/include/indexing.glslh and workbench.viz.layout_views.

The fixed expectations come from the reference (shared/reference/etvk.md): §1.12's worked example, §1.4's closed
forms, §1.3's dim orders, §1.7's hashed-layout table, §1.8's UBO offsets, §1.11's conv2d rule.
"""
from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench import layouts as L

ROOT = Path(__file__).resolve().parents[1]
SZ = (1, 8, 2, 8)
INT8 = ["4W4C", "4H4W", "4C1W", "4C", "4W"]
ALL_NAMES = list(L.LAYOUTS)

sizes_st = st.tuples(st.integers(1, 3), st.integers(1, 11), st.integers(1, 7), st.integers(1, 11))
FAST = settings(max_examples=40, deadline=None)


def div_up(a, b):
    return -(-a // b)


# ---------------------------------------------------------------------------------------------------------------------
# §1.12 worked example: N=1, C=8, H=2, W=8
# ---------------------------------------------------------------------------------------------------------------------

TABLE_ELEMENTS = [(0, 0, 0, 0), (0, 1, 0, 0), (0, 4, 0, 0), (0, 0, 0, 1), (0, 0, 1, 0)]
TABLE = {   # layout: word/lane for each element of TABLE_ELEMENTS (§1.12)
    "4W4C": [(0, 0), (0, 1), (4, 0), (1, 0), (16, 0)],
    "4H4W": [(0, 0), (8, 0), (32, 0), (0, 1), (1, 0)],
    "4C1W": [(0, 0), (0, 1), (8, 0), (1, 0), (16, 0)],
    "4C": [(0, 0), (0, 1), (1, 0), (2, 0), (16, 0)],
    "4W": [(0, 0), (4, 0), (16, 0), (0, 1), (2, 0)],
}


@pytest.mark.parametrize("name", INT8)
@pytest.mark.parametrize("k", range(len(TABLE_ELEMENTS)))
def test_worked_example_table_cell(name, k):
    lay = L.get_layout(name)
    assert lay.element_to_word_lane(SZ, *TABLE_ELEMENTS[k]) == TABLE[name][k]
    word, lane = TABLE[name][k]
    assert lay.word_lane_to_element(SZ, word, lane) == (*TABLE_ELEMENTS[k], True)


def test_worked_example_sizes_and_strides():
    padded = {"4W4C": (1, 8, 2, 8), "4H4W": (1, 8, 4, 8), "4C1W": (1, 8, 2, 8), "4C": (1, 8, 2, 8), "4W": (1, 8, 2, 8)}
    words = {"4W4C": 32, "4H4W": 64, "4C1W": 32, "4C": 32, "4W": 32}
    strides = {"4W4C": (8, 1, 4, 2), "4H4W": (16, 2, 2, 1), "4C1W": (32, 8, 16, 1), "4C": (32, 1, 16, 2),
               "4W": (32, 4, 2, 1)}
    for name in INT8:
        lay = L.get_layout(name)
        assert lay.padded_sizes(SZ) == padded[name]
        assert lay.num_words(SZ) == words[name]
        assert lay.strides(SZ) == strides[name]
        assert L.get_layout(name).strides(SZ) == strides[name]


def test_worked_example_4w4c_reading():
    lay = L.get_layout("4W4C")
    # words 0-3 = block (h=0, w 0-3, c 0-3): word k = width k, lanes = channels 0-3
    for word in range(4):
        for lane in range(4):
            assert lay.word_lane_to_element(SZ, word, lane) == (0, lane, 0, word, True)
    assert lay.word_lane_to_element(SZ, 4, 0)[:4] == (0, 4, 0, 0)        # next channel group
    assert lay.word_lane_to_element(SZ, 16, 0)[:4] == (0, 0, 1, 0)       # next height: 2 C-blocks x 2 W-blocks x 4


def test_worked_example_float_references():
    wp, cl = L.get_layout("WIDTH_PACKED"), L.get_layout("CHANNELS_PACKED")
    elems = TABLE_ELEMENTS[1:]
    assert [wp.element_to_offset(SZ, *e) for e in elems] == [16, 64, 1, 8]
    assert [cl.element_to_offset(SZ, *e) for e in elems] == [1, 4, 8, 64]
    ct, wt = L.get_layout("CHANNELS_PACKED_TEXTURE"), L.get_layout("WIDTH_PACKED_TEXTURE")
    assert ct.extents(SZ) == (8, 2, 2)
    assert [ct.element_to_texel(SZ, *e) for e in elems] == [(0, 0, 0, 1), (0, 0, 1, 0), (1, 0, 0, 0), (0, 1, 0, 0)]
    assert wt.extents(SZ) == (2, 2, 8)
    assert [wt.element_to_texel(SZ, *e) for e in elems] == [(0, 0, 1, 0), (0, 0, 4, 0), (0, 0, 0, 1), (0, 1, 0, 0)]


# ---------------------------------------------------------------------------------------------------------------------
# §1.2 / §1.3 / §1.7 definitions
# ---------------------------------------------------------------------------------------------------------------------

def test_enum_values_and_packed_dim_info():
    expect = {  # name: (enum, storage, packed, block, outer, outer block, transposed, block_numel)
        "WIDTH_PACKED": (0, "buffer", 0, 1, 1, 1, False, 1),
        "HEIGHT_PACKED": (1, "buffer", 1, 1, 0, 1, False, 1),
        "CHANNELS_PACKED": (2, "buffer", 2, 1, 0, 1, False, 1),
        "WIDTH_PACKED_TEXTURE": (0, "texture", 0, 4, 1, 1, False, 4),
        "HEIGHT_PACKED_TEXTURE": (1, "texture", 1, 4, 0, 1, False, 4),
        "CHANNELS_PACKED_TEXTURE": (2, "texture", 2, 4, 0, 1, False, 4),
        "4W4C": (3, "buffer", 2, 4, 0, 4, False, 16),
        "4H4W": (4, "buffer", 0, 4, 1, 4, False, 16),
        "4W": (5, "buffer", 0, 4, 1, 1, False, 4),
        "4C": (6, "buffer", 2, 4, 0, 1, False, 4),
        "4C1W": (8, "buffer", 2, 4, 0, 1, True, 4),
    }
    assert set(expect) == set(L.LAYOUTS)
    for name, (enum, storage, pd, bi, od, bo, tr, bn) in expect.items():
        lay = L.LAYOUTS[name]
        got = (lay.enum_value, lay.storage, lay.packed_dim, lay.packed_dim_block_size, lay.outer_packed_dim,
               lay.outer_packed_dim_block_size, lay.block_transposed, lay.block_numel)
        assert got == (enum, storage, pd, bi, od, bo, tr, bn), name
        assert lay.packed_dim_align == bi and lay.outer_packed_dim_align == bo
        if lay.is_texture:
            assert lay.axis_map == (0, 1, 2, 2)


def test_dim_orders():
    letters = {name: "".join("NCHW"[d] for d in L.get_layout(name).dim_order) for name in ALL_NAMES}
    assert letters["4W4C"] == "NHWC"
    assert letters["4H4W"] == "NCHW"
    assert letters["4W"] == "NCHW"
    assert letters["4C"] == "NHWC"
    assert letters["4C1W"] == "NHCW"
    assert letters["WIDTH_PACKED"] == "NCHW"
    assert letters["CHANNELS_PACKED"] == "NHWC"
    assert letters["HEIGHT_PACKED"] == "NCWH"
    assert L.get_layout("4C1W").dim_order == (0, 2, 1, 3)


def test_padding_rules():
    sz = (2, 5, 6, 7)
    assert L.get_layout("4W4C").padded_sizes(sz) == (2, 8, 6, 8)
    assert L.get_layout("4H4W").padded_sizes(sz) == (2, 5, 8, 8)
    assert L.get_layout("4C").padded_sizes(sz) == (2, 8, 6, 7)
    assert L.get_layout("4C1W").padded_sizes(sz) == (2, 8, 6, 7)      # W not padded in 4C1W (§9)
    assert L.get_layout("4W").padded_sizes(sz) == (2, 5, 6, 8)
    for name in ("WIDTH_PACKED", "HEIGHT_PACKED", "CHANNELS_PACKED"):
        assert L.get_layout(name).padded_sizes(sz) == sz
    assert L.get_layout("CHANNELS_PACKED_TEXTURE").padded_sizes(sz) == (2, 8, 6, 7)
    assert L.get_layout("WIDTH_PACKED_TEXTURE").padded_sizes(sz) == (2, 5, 6, 8)
    assert L.get_layout("HEIGHT_PACKED_TEXTURE").padded_sizes(sz) == (2, 5, 8, 7)


HASHED = {  # §1.7
    "WIDTH_PACKED": 0x11103210,
    "CHANNELS_PACKED": 0x11023102,
    "HEIGHT_PACKED": 0x11013201,
    "4W4C": 0x44023102,
    "4H4W": 0x44103210,
    "4W": 0x14103210,
    "4C": 0x14023102,
    "4C1W": 0x14023120,
    "CHANNELS_PACKED_TEXTURE": 0x14022210,
    "WIDTH_PACKED_TEXTURE": 0x14102210,
}


@pytest.mark.parametrize("name", list(HASHED))
def test_hashed_layout_table(name):
    lay = L.get_layout(name)
    assert lay.hashed_layout == HASHED[name]
    assert L.get_layout(name).hashed_layout == HASHED[name]
    assert lay.spec_constant() == HASHED[name]            # all < 2**31
    assert L.get_layout(name).spec_constant() == HASHED[name]


def test_hashed_layout_fields_roundtrip():
    assert L.get_layout("WIDTH_PACKED").hashed_layout == L.CONTIG_LAYOUT_INT
    assert L.get_layout("HEIGHT_PACKED_TEXTURE").hashed_layout == 0x14012210      # derived the same way
    for lay in L.LAYOUTS.values():
        v = lay.hashed_layout
        assert (v >> 16) & 0xF == lay.packed_dim
        assert (v >> 20) & 0xF == lay.outer_packed_dim
        assert (v >> 24) & 0xF == lay.packed_dim_block_size
        assert (v >> 28) & 0xF == lay.outer_packed_dim_block_size
        low = [(v >> (4 * i)) & 0xF for i in range(4)]
        assert tuple(low) == (lay.axis_map if lay.is_texture else lay.dim_order_whcn)


# ---------------------------------------------------------------------------------------------------------------------
# §1.4 closed forms vs the general formula
# ---------------------------------------------------------------------------------------------------------------------

def closed_form(name, sizes, n, c, h, w):
    N, C, H, W = sizes
    C4, W4, H4 = div_up(C, 4), div_up(W, 4), div_up(H, 4)
    if name == "4W4C":
        return 4 * (((n * H + h) * W4 + w // 4) * C4 + c // 4) + w % 4, c % 4
    if name == "4H4W":
        return 4 * (((n * C + c) * H4 + h // 4) * W4 + w // 4) + h % 4, w % 4
    if name == "4C1W":
        return ((n * H + h) * C4 + c // 4) * W + w, c % 4
    if name == "4C":
        return ((n * H + h) * W + w) * C4 + c // 4, c % 4
    if name == "4W":
        return ((n * C + c) * H + h) * W4 + w // 4, w % 4
    raise KeyError(name)


def closed_form_words(name, sizes):
    N, C, H, W = sizes
    C4, W4, H4 = div_up(C, 4), div_up(W, 4), div_up(H, 4)
    return {"4W4C": N * H * 4 * W4 * C4, "4H4W": N * C * 4 * H4 * W4, "4C1W": N * H * C4 * W, "4C": N * H * W * C4,
            "4W": N * C * H * W4}[name]


@FAST
@given(sizes=sizes_st)
def test_closed_forms_match_general_formula(sizes):
    n, c, h, w = (a.reshape(-1) for a in np.indices(sizes))
    for name in INT8:
        lay = L.get_layout(name)
        word, lane = lay.element_to_word_lane(sizes, n, c, h, w)
        cw, cl = closed_form(name, sizes, n, c, h, w)
        np.testing.assert_array_equal(word, cw)
        np.testing.assert_array_equal(lane, cl)
        assert lay.num_words(sizes) == closed_form_words(name, sizes)
        # byte index = 4*word + lane (the general formula itself)
        np.testing.assert_array_equal(lay.element_to_index(sizes, n, c, h, w), 4 * cw + cl)


@FAST
@given(sizes=sizes_st)
def test_inverse_maps_are_a_bijection_onto_elements(sizes):
    numel = int(np.prod(sizes))
    for name in INT8:
        lay = L.get_layout(name)
        nw = lay.num_words(sizes)
        word = np.repeat(np.arange(nw), 4)
        lane = np.tile(np.arange(4), nw)
        n, c, h, w, valid = lay.word_lane_to_element(sizes, word, lane)
        assert valid.sum() == numel                                           # every element exactly once
        flat = ((n[valid] * sizes[1] + c[valid]) * sizes[2] + h[valid]) * sizes[3] + w[valid]
        assert np.array_equal(np.sort(flat), np.arange(numel))
        w2, l2 = lay.element_to_word_lane(sizes, n[valid], c[valid], h[valid], w[valid])
        np.testing.assert_array_equal(w2, word[valid])
        np.testing.assert_array_equal(l2, lane[valid])
        # padding lanes lie outside the logical sizes (but inside the padded sizes)
        p = lay.padded_sizes(sizes)
        pad = ~valid
        assert np.all((n[pad] >= sizes[0]) | (c[pad] >= sizes[1]) | (h[pad] >= sizes[2]) | (w[pad] >= sizes[3]))
        assert np.all((n < p[0]) & (c < p[1]) & (h < p[2]) & (w < p[3]))


@FAST
@given(sizes=sizes_st)
def test_float_and_texture_inverses(sizes):
    n, c, h, w = (a.reshape(-1) for a in np.indices(sizes))
    for name in ("WIDTH_PACKED", "HEIGHT_PACKED", "CHANNELS_PACKED"):
        lay = L.get_layout(name)
        off = lay.element_to_offset(sizes, n, c, h, w)
        assert np.array_equal(np.sort(off), np.arange(n.size))
        assert np.array_equal(np.stack(lay.offset_to_element(sizes, off)[:4]), np.stack([n, c, h, w]))
    for name in ("WIDTH_PACKED_TEXTURE", "HEIGHT_PACKED_TEXTURE", "CHANNELS_PACKED_TEXTURE"):
        lay = L.get_layout(name)
        x, y, z, comp = lay.element_to_texel(sizes, n, c, h, w)
        ext = lay.extents(sizes)
        assert np.all((x < ext[0]) & (y < ext[1]) & (z < ext[2]))
        back = lay.texel_to_element(sizes, x, y, z, comp)
        assert np.all(back[4]) and np.array_equal(np.stack(back[:4]), np.stack([n, c, h, w]))
        # total components = texels * 4; valid ones = numel
        X, Y, Z = ext
        xx, yy, zz, cc = (a.reshape(-1) for a in np.indices((X, Y, Z, 4)))
        assert lay.texel_to_element(sizes, xx, yy, zz, cc)[4].sum() == n.size
        assert lay.num_texels(sizes) == X * Y * Z


def test_texture_formulas_of_reference():
    sizes = (3, 6, 5, 7)
    N, C, H, W = sizes
    n, c, h, w = (a.reshape(-1) for a in np.indices(sizes))
    ct = L.get_layout("CHANNELS_PACKED_TEXTURE").element_to_texel(sizes, n, c, h, w)
    np.testing.assert_array_equal(np.stack(ct), np.stack([w, h, c // 4 + n * div_up(C, 4), c % 4]))
    wt = L.get_layout("WIDTH_PACKED_TEXTURE").element_to_texel(sizes, n, c, h, w)
    np.testing.assert_array_equal(np.stack(wt), np.stack([w // 4, h, c + n * C, w % 4]))
    ht = L.get_layout("HEIGHT_PACKED_TEXTURE").element_to_texel(sizes, n, c, h, w)
    np.testing.assert_array_equal(np.stack(ht), np.stack([w, h // 4, c + n * C, h % 4]))
    assert L.get_layout("CHANNELS_PACKED_TEXTURE").extents(sizes) == (W, H, div_up(C, 4) * N)
    assert L.get_layout("WIDTH_PACKED_TEXTURE").extents(sizes) == (div_up(W, 4), H, C * N)
    assert L.get_layout("HEIGHT_PACKED_TEXTURE").extents(sizes) == (W, div_up(H, 4), C * N)


# ---------------------------------------------------------------------------------------------------------------------
# pack / unpack and friends
# ---------------------------------------------------------------------------------------------------------------------

def reference_pack(name, x):
    """Independent packer: the closed forms + explicit little-endian byte assembly."""
    sizes = x.shape
    words = np.zeros(closed_form_words(name, sizes), dtype=np.int64)
    for (n, c, h, w), v in np.ndenumerate(x):
        word, lane = closed_form(name, sizes, n, c, h, w)
        words[word] |= (int(v) & 0xFF) << (8 * lane)
    return words.astype(np.uint32).view(np.int32)


@FAST
@given(sizes=sizes_st, seed=st.integers(0, 2**31 - 1))
def test_pack_unpack_roundtrip(sizes, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, size=sizes, dtype=np.int8)
    for name in INT8:
        lay = L.get_layout(name)
        words = lay.pack(x)
        assert words.dtype == np.int32 and words.shape == (lay.num_words(sizes),)
        np.testing.assert_array_equal(lay.unpack(words, sizes), x)
        # padding lanes are zero
        raw = words.view(np.uint8).reshape(-1, 4)
        _, _, _, _, valid = lay.word_lane_to_element(sizes, np.repeat(np.arange(len(words)), 4),
                                                    np.tile(np.arange(4), len(words)))
        assert np.all(raw.reshape(-1)[~valid] == 0)


@pytest.mark.parametrize("name", INT8)
@pytest.mark.parametrize("sizes", [(1, 8, 2, 8), (2, 5, 3, 6), (1, 1, 1, 1), (3, 7, 5, 9)])
def test_pack_matches_independent_reference(name, sizes):
    x = np.random.default_rng(1).integers(-128, 128, size=sizes, dtype=np.int8)
    np.testing.assert_array_equal(L.get_layout(name).pack(x), reference_pack(name, x))


def test_pack_torch_in_torch_out_and_lane_order():
    x = torch.arange(-8, 8, dtype=torch.int8).reshape(1, 16, 1, 1)       # C=16, one width: 4C1W
    words = L.get_layout("4C1W").pack(x)
    assert isinstance(words, torch.Tensor) and words.dtype == torch.int32
    # word 0 holds channels 0..3 = -8, -7, -6, -5 in lanes 0..3 (lane k = bits 8k..8k+7)
    w0 = int(words[0]) & 0xFFFFFFFF
    assert [((w0 >> (8 * k)) & 0xFF) for k in range(4)] == [248, 249, 250, 251]
    back = L.get_layout("4C1W").unpack(words, (1, 16, 1, 1))
    assert isinstance(back, torch.Tensor) and back.dtype == torch.int8 and torch.equal(back, x)
    # uint32 words are accepted too
    np.testing.assert_array_equal(L.get_layout("4C1W").unpack(words.numpy().view(np.uint32), (1, 16, 1, 1)), x.numpy())


def test_pack_accepts_fewer_dims():
    x = np.arange(24, dtype=np.int8).reshape(6, 1, 4)                   # (C, H, W) -> (1, 6, 1, 4)
    words = L.get_layout("4W4C").pack(x)
    assert len(words) == L.get_layout("4W4C").num_words((1, 6, 1, 4)) == 8
    back = L.get_layout("4W4C").unpack(words, (6, 1, 4))
    assert back.shape == (6, 1, 4) and np.array_equal(back, x)


@FAST
@given(sizes=sizes_st, seed=st.integers(0, 2**31 - 1))
def test_float_buffer_and_texel_roundtrip(sizes, seed):
    x = np.random.default_rng(seed).standard_normal(sizes).astype(np.float32)
    for name in ("WIDTH_PACKED", "HEIGHT_PACKED", "CHANNELS_PACKED"):
        lay = L.get_layout(name)
        buf = lay.to_buffer(x)
        np.testing.assert_array_equal(buf, x.transpose(lay.dim_order).reshape(-1))     # a permutation
        np.testing.assert_array_equal(lay.from_buffer(buf, sizes), x)
    for name in ("WIDTH_PACKED_TEXTURE", "HEIGHT_PACKED_TEXTURE", "CHANNELS_PACKED_TEXTURE"):
        lay = L.get_layout(name)
        tex = lay.to_texels(x)
        X, Y, Z = lay.extents(sizes)
        assert tex.shape == (Z, Y, X, 4)
        assert np.count_nonzero(tex) == np.count_nonzero(x)                                # padding is 0
        np.testing.assert_array_equal(lay.from_texels(tex, sizes), x)


def test_to_texels_torch_and_encode_decode():
    x = torch.randn(2, 5, 3, 3)
    lay = L.get_layout("CHANNELS_PACKED_TEXTURE")
    tex = lay.encode(x)
    assert isinstance(tex, torch.Tensor) and tuple(tex.shape) == (4, 3, 3, 4)
    assert tex[0, 1, 2, 3].item() == x[0, 3, 1, 2].item()                # (n,c,h,w)=(0,3,1,2) -> z0 y1 x2 comp 3
    assert torch.equal(lay.decode(tex, (2, 5, 3, 3)), x)
    q = torch.randint(-128, 128, (1, 3, 2, 2), dtype=torch.int8)
    assert torch.equal(L.get_layout("4C").decode(L.get_layout("4C").encode(q), (1, 3, 2, 2)), q)


# ---------------------------------------------------------------------------------------------------------------------
# UBO bytes (§1.8)
# ---------------------------------------------------------------------------------------------------------------------

def test_buffer_metadata_bytes():
    lay = L.get_layout("4W4C")
    b = lay.buffer_metadata(SZ)
    assert isinstance(b, bytes) and len(b) == L.BUFFER_METADATA_NBYTES == 112
    sizes = struct.unpack_from("<8I", b, 0)
    order = struct.unpack_from("<8I", b, 32)
    strides = struct.unpack_from("<8I", b, 64)
    ndim, numel = struct.unpack_from("<2I", b, 96)
    assert sizes == (8, 2, 8, 1, 1, 1, 1, 1)                  # WHCN, unsqueezed with 1
    assert order == (2, 0, 1, 3, 4, 5, 6, 7)                  # fastest first; unused = own index
    assert strides[:4] == (2, 4, 1, 8)                        # WHCN flip of NCHW [8,1,4,2] (block units)
    assert strides[4:] == (numel,) * 4
    assert (ndim, numel) == (4, 128)
    assert b[104:] == bytes(8)
    # numel = padded numel: 4H4W pads H 2 -> 4, so 256 bytes = 64 words
    b2 = L.get_layout("4H4W").buffer_metadata(SZ)
    assert struct.unpack_from("<I", b2, 100)[0] == 256
    assert struct.unpack_from("<8I", b2, 0)[:4] == (8, 2, 8, 1)               # logical sizes, not padded
    # float buffer: element strides
    b3 = L.get_layout("CHANNELS_PACKED").buffer_metadata((2, 3, 4, 5))
    assert struct.unpack_from("<4I", b3, 64) == (3, 15, 1, 60)
    assert struct.unpack_from("<4I", b3, 32) == (2, 0, 1, 3)


def test_texture_metadata_bytes():
    lay = L.get_layout("CHANNELS_PACKED_TEXTURE")
    b = lay.texture_metadata((2, 6, 3, 5))
    assert len(b) == L.TEXTURE_METADATA_NBYTES == 64
    assert struct.unpack_from("<4i", b, 0) == (5, 3, 6, 2)
    assert struct.unpack_from("<4i", b, 16) == (5, 3, 4, 1)     # limits = extents (default axis map), 4th = 1
    assert struct.unpack_from("<4i", b, 32) == (0, 1, 2, 2)
    assert struct.unpack_from("<i", b, 48) == (2,)
    assert b[52:] == bytes(12)
    assert lay.metadata((2, 6, 3, 5)) == b
    with pytest.raises(ValueError, match="texture"):
        L.get_layout("4W4C").texture_metadata(SZ)
    with pytest.raises(ValueError, match="buffer"):
        L.get_layout("CHANNELS_PACKED_TEXTURE").buffer_metadata(SZ)


# ---------------------------------------------------------------------------------------------------------------------
# §1.11 conv2d rule, names, errors, text
# ---------------------------------------------------------------------------------------------------------------------

def test_resolve_packed_int8_conv2d():
    r = L.resolve_packed_int8_conv2d
    assert r(32).name == "4C"                                         # IC >= 32, groups 1
    assert r(8, out_height=64, out_width=64).name == "4C"             # 4096 outputs: small enough
    assert r(8, out_height=65, out_width=64).name == "4C1W"           # > 4096 and IC < 32 -> direct
    assert r(8, out_height=65, out_width=64, is_mali=True).name == "4C"
    assert r(6, out_height=8, out_width=8).name == "4C1W"             # IC % 4 != 0
    assert r(6, is_mali=True).name == "4C1W"
    assert r(32, groups=2, out_height=8, out_width=8).name == "4C1W"  # grouped, not Mali
    assert r(32, groups=2, is_mali=True).name == "4C"
    assert r(32, op="q8ta_conv2d_dw").name == "4C1W"
    assert r(32, op="et_vk.q8ta_conv2d").name == "4C"
    with pytest.raises(ValueError, match="q8ta_conv2d"):
        r(32, op="q8ta_linear")
    with pytest.raises(ValueError, match="PACKED_INT8_CONV2D"):
        L.get_layout("PACKED_INT8_CONV2D")
    with pytest.raises(ValueError, match="resolve_packed_int8_conv2d"):
        L.get_layout(9)


@pytest.mark.parametrize("alias", ["4w4c", "4W4C", "PACKED_INT8_4W4C", "packed_int8_4w4c", "kPackedInt8_4W4C",
                                   "TENSOR_PACKED_INT8_4W4C", 3])
def test_get_layout_aliases(alias):
    assert L.get_layout(alias).name == "4W4C"


def test_get_layout_other_names():
    assert L.get_layout("kChannelsPacked").name == "CHANNELS_PACKED"
    assert L.get_layout("channels_packed", storage="texture").name == "CHANNELS_PACKED_TEXTURE"
    assert L.get_layout(2, storage="texture").name == "CHANNELS_PACKED_TEXTURE"
    assert L.get_layout(0).name == "WIDTH_PACKED"
    assert L.get_layout("4c1w").block_transposed
    lay = L.get_layout("4C")
    assert L.get_layout(lay) is lay


def test_unknown_layout_lists_names():
    with pytest.raises(ValueError) as exc:
        L.get_layout("5W5C")
    msg = str(exc.value)
    assert "5W5C" in msg
    for name in ALL_NAMES:
        assert name in msg
    with pytest.raises(ValueError, match="unknown ET-VK layout value"):
        L.get_layout(7)


@pytest.mark.parametrize("bad", [(1, 0, 2, 2), (1, 2, 3, 4, 5), (), (1.0, 2, 3, 4), (-1, 2), "1234", (True, 2)])
def test_bad_sizes(bad):
    with pytest.raises(ValueError, match="sizes|size"):
        L.get_layout("4W4C").padded_sizes(bad)


def test_sizes_unsqueeze():
    assert L.normalize_sizes((5,)) == (1, 1, 1, 5)
    assert L.normalize_sizes(torch.Size([3, 4, 5])) == (1, 3, 4, 5)
    assert L.normalize_sizes(np.array([2, 3])) == (1, 1, 2, 3)
    assert L.get_layout("4W4C").num_words((6, 1, 4)) == L.get_layout("4W4C").num_words((1, 6, 1, 4))


def test_wrong_word_count_and_dtype():
    with pytest.raises(ValueError) as exc:
        L.get_layout("4W4C").unpack(np.zeros(31, np.int32), SZ)
    assert "32" in str(exc.value) and "31" in str(exc.value)
    with pytest.raises(TypeError, match="int32"):
        L.get_layout("4W4C").unpack(np.zeros(32, np.int64), SZ)
    with pytest.raises(TypeError, match="int8"):
        L.get_layout("4W4C").pack(np.zeros(SZ, np.float32))
    with pytest.raises(TypeError, match="int8"):
        L.get_layout("4W4C").pack(torch.zeros(SZ, dtype=torch.uint8))
    with pytest.raises(ValueError, match="float"):
        L.get_layout("WIDTH_PACKED").pack(np.zeros(SZ, np.int8))
    with pytest.raises(ValueError, match=r"\(Z,Y,X,4\)"):
        L.get_layout("CHANNELS_PACKED_TEXTURE").from_texels(np.zeros((2, 2, 8, 3), np.float32), SZ)
    with pytest.raises(ValueError, match="128"):
        L.get_layout("WIDTH_PACKED").from_buffer(np.zeros(127, np.float32), SZ)


def test_out_of_range_elements():
    lay = L.get_layout("4W4C")
    with pytest.raises(ValueError, match="c=8"):
        lay.element_to_word_lane(SZ, 0, 8, 0, 0)
    with pytest.raises(ValueError, match="w=-1"):
        lay.element_to_word_lane(SZ, 0, 0, 0, -1)
    with pytest.raises(ValueError, match="h=5"):
        lay.element_to_word_lane(SZ, np.zeros(3, int), np.zeros(3, int), np.array([0, 5, 1]), np.zeros(3, int))
    with pytest.raises(ValueError, match="word=32"):
        lay.word_lane_to_element(SZ, 32, 0)
    with pytest.raises(ValueError, match="lane=4"):
        lay.word_lane_to_element(SZ, 0, 4)
    with pytest.raises(ValueError, match="x=8"):
        L.get_layout("CHANNELS_PACKED_TEXTURE").texel_to_element(SZ, 8, 0, 0)
    with pytest.raises(ValueError, match="integers"):
        lay.element_to_word_lane(SZ, 0, 0.5, 0, 0)
    with pytest.raises(ValueError, match="int8x4"):
        L.get_layout("WIDTH_PACKED").element_to_word_lane(SZ, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="texture"):
        L.get_layout("4W4C").element_to_texel(SZ, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="texture"):
        L.get_layout("CHANNELS_PACKED_TEXTURE").element_to_index(SZ, 0, 0, 0, 0)


def test_describe_element():
    s = L.describe_element("4W4C", SZ, (0, 1, 0, 0))
    assert "word 0 lane 1" in s and "byte address 1" in s
    s = L.describe_element("kPackedInt8_4H4W", SZ, (0, 4, 0, 0))
    assert "word 32 lane 0" in s and "byte address 128" in s
    s = L.describe_element("4c1w", (1, 6, 3, 5), (0, 5, 2, 4))
    w, l = closed_form("4C1W", (1, 6, 3, 5), 0, 5, 2, 4)
    assert f"word {w} lane {l}" in s and f"byte address {4 * w + l}" in s
    s = L.describe_element("CHANNELS_PACKED_TEXTURE", SZ, (0, 1, 0, 0))
    assert "texel (x,y,z)=(0,0,0) component 1" in s and "byte address 4" in s
    s = L.describe_element("WIDTH_PACKED", SZ, (0, 1, 0, 0))
    assert "offset 16" in s and "byte address 64" in s
    with pytest.raises(ValueError, match="c=9"):
        L.describe_element("4W4C", SZ, (0, 9, 0, 0))


def test_scalar_vs_array_results():
    lay = L.get_layout("4W4C")
    r = lay.element_to_word_lane(SZ, 0, 1, 0, 0)
    assert all(type(v) is int for v in r)
    r = lay.word_lane_to_element(SZ, 0, 1)
    assert type(r[4]) is bool
    r = lay.element_to_word_lane(SZ, 0, [1, 2], 0, 0)
    assert isinstance(r[0], np.ndarray) and r[0].shape == (2,)


# ---------------------------------------------------------------------------------------------------------------------
# GLSL include
# ---------------------------------------------------------------------------------------------------------------------

GLSLC = shutil.which("glslc")
CHECK_SHADER = ROOT / "tests" / "shaders" / "indexing_check.comp"


def _compile_check_shader() -> bytes:
    res = subprocess.run([GLSLC, "-fshader-stage=compute", "--target-env=vulkan1.1", "-I",
                          str(ROOT / "shaders" / "include"), str(CHECK_SHADER), "-o", "-"],
                         capture_output=True)
    assert res.returncode == 0, res.stderr.decode()
    return res.stdout


@pytest.mark.skipif(GLSLC is None, reason="glslc not installed")
def test_indexing_glslh_compiles():
    spv = _compile_check_shader()
    assert spv[:4] == struct.pack("<I", 0x07230203)


def test_glsl_struct_matches_python_offsets():
    """The struct in indexing.glslh declares the fields buffer_metadata() writes, in the same order."""
    src = (ROOT / "shaders" / "include" / "indexing.glslh").read_text()
    body = src[src.index("struct BufferMetadata {"):]
    body = body[:body.index("};")]
    assert [ln.strip() for ln in body.splitlines()[1:] if ln.strip()] == [
        "uvec4 sizes[2];", "uvec4 dim_order[2];", "uvec4 strides[2];", "uvec2 ndim_numel;"]
    body = src[src.index("struct TextureMetadata {"):]
    body = body[:body.index("};")]
    assert [ln.strip() for ln in body.splitlines()[1:] if ln.strip()] == [
        "ivec4 sizes;", "ivec3 limits;", "ivec4 axis_map;", "int packed_dim;"]


def _device_or_skip():
    if GLSLC is None:
        pytest.skip("glslc not installed")
    try:
        from workbench import vk
        return vk.get_device()
    except Exception as exc:                                        # no runtime yet, or no Vulkan device
        pytest.skip(f"no Vulkan device through workbench.vk: {exc}")


GPU_CASES = [  # (buffer layout, texture layout, sizes)
    ("4W4C", "CHANNELS_PACKED_TEXTURE", (2, 6, 3, 5)),
    ("4H4W", "WIDTH_PACKED_TEXTURE", (2, 6, 3, 5)),
    ("4W", "HEIGHT_PACKED_TEXTURE", (1, 3, 6, 9)),
    ("4C", "CHANNELS_PACKED_TEXTURE", (3, 9, 2, 3)),
    ("4C1W", "WIDTH_PACKED_TEXTURE", (2, 5, 2, 7)),
    ("WIDTH_PACKED", "HEIGHT_PACKED_TEXTURE", (2, 3, 5, 6)),
    ("HEIGHT_PACKED", "CHANNELS_PACKED_TEXTURE", (1, 5, 7, 3)),
    ("CHANNELS_PACKED", "WIDTH_PACKED_TEXTURE", (2, 7, 3, 5)),
]


def test_indexing_glslh_on_device_matches_python():
    """Run tests/shaders/indexing_check.comp (every helper of indexing.glslh) and compare with layouts.py."""
    dev = _device_or_skip()
    spv = _compile_check_shader()
    for buf_name, tex_name, sizes in GPU_CASES:
        lay, tex = L.get_layout(buf_name), L.get_layout(tex_name)
        numel = int(np.prod(sizes))
        prog = dev.pipeline(spv, spec_constants={3: lay.spec_constant(), 4: tex.spec_constant()},
                            local_size=(64, 1, 1), name="indexing_check")
        out = dev.buffer(nbytes=numel * 16 * 4)
        ubo_b = dev.uniform(lay.buffer_metadata(sizes))
        ubo_t = dev.uniform(tex.texture_metadata(sizes))
        dev.run(prog, [out, ubo_b, ubo_t], global_size=(numel, 1, 1))
        r = out.download(np.int32).reshape(numel, 16)
        n, c, h, w = (a.reshape(-1) for a in np.indices(sizes))
        ctx = f"{buf_name}/{tex_name} {sizes}"
        np.testing.assert_array_equal(r[:, 0], lay.element_to_index(sizes, n, c, h, w), err_msg=ctx)
        assert np.all(r[:, 5] == 1), ctx                                   # byte_idx_to_tidx inverts it
        np.testing.assert_array_equal(r[:, 14], lay.padded_numel(sizes))
        if lay.is_int8:
            word, _ = lay.element_to_word_lane(sizes, n, c, h, w)
            fn, fc, fh, fw, _ = lay.word_lane_to_element(sizes, word, 0)
            np.testing.assert_array_equal(r[:, 1:5], np.stack([fw, fh, fc, fn], 1), err_msg=ctx)
            np.testing.assert_array_equal(r[:, 13], lay.num_words(sizes))
        else:
            np.testing.assert_array_equal(r[:, 6], lay.element_to_offset(sizes, n, c, h, w), err_msg=ctx)
            assert np.all(r[:, 7] == 1), ctx                               # linear_idx_to_tidx (both overloads)
        np.testing.assert_array_equal(r[:, 8:12], np.stack(tex.element_to_texel(sizes, n, c, h, w), 1), err_msg=ctx)
        assert np.all(r[:, 12] == 1), ctx                                  # texel_pos_to_tidx inverts it
        np.testing.assert_array_equal(r[:, 15], tex.logical_limits(sizes)[0] * 10000 + tex.packed_dim)


# ---------------------------------------------------------------------------------------------------------------------
# pictures
# ---------------------------------------------------------------------------------------------------------------------

def _texts(fig, gid):
    return [t for ax in fig.axes for t in ax.texts if t.get_gid() == gid]


@pytest.mark.parametrize("name,sizes", [("4W4C", (1, 8, 2, 8)), ("4H4W", (1, 6, 3, 5)), ("4C1W", (2, 6, 3, 5)),
                                        ("CHANNELS_PACKED_TEXTURE", (1, 6, 2, 3)), ("WIDTH_PACKED", (1, 3, 2, 5))])
def test_tensor_view_labels(name, sizes):
    from matplotlib.figure import Figure

    from workbench.viz import layout_views as V
    lay = L.get_layout(name)
    fig = V.tensor_view(name, sizes, highlight=(0, 1, 0, 0))
    assert isinstance(fig, Figure)
    cells = _texts(fig, "cell-label")
    assert len(cells) == int(np.prod(sizes))
    assert len(_texts(fig, "pad-label")) == lay.padded_numel(sizes) - int(np.prod(sizes))
    if lay.is_int8:   # the label of cell (0,1,0,0) names its word and lane
        word, lane = lay.element_to_word_lane(sizes, 0, 1, 0, 0)
        assert f"w{word}\nL{lane}" in [t.get_text() for t in cells]


def test_tensor_view_4w4c_first_block():
    from workbench.viz import layout_views as V
    fig = V.tensor_view("4W4C", SZ)
    labels = [t.get_text() for t in _texts(fig, "cell-label")]
    # cells in NCHW order: (c, h, w) -> label; words 0-3 are h=0, w 0-3, lanes = c 0-3
    grid = np.array(labels).reshape(8, 2, 8)
    for c in range(4):
        for w in range(4):
            assert grid[c, 0, w] == f"w{w}\nL{c}"
    assert grid[4, 0, 0] == "w4\nL0" and grid[0, 1, 0] == "w16\nL0"


@pytest.mark.parametrize("name,sizes,max_words", [("4W4C", (1, 8, 2, 8), 64), ("4H4W", (1, 6, 3, 5), 20),
                                                  ("4C1W", (1, 6, 3, 5), 64), ("HEIGHT_PACKED", (1, 3, 2, 5), 64)])
def test_memory_view_labels(name, sizes, max_words):
    from workbench.viz import layout_views as V
    lay = L.get_layout(name)
    fig = V.memory_view(name, sizes, highlight=(0, 1, 0, 0), max_words=max_words)
    boxes = _texts(fig, "lane-label")
    slots = lay.slots_per_unit
    shown = min(lay.num_units(sizes), max_words if slots == 4 else 4 * max_words)
    assert len(boxes) == shown * slots
    pads = sum(t.get_text() == "pad" for t in boxes)
    if lay.is_int8:
        words = np.repeat(np.arange(shown), 4)
        valid = lay.word_lane_to_element(sizes, words, np.tile(np.arange(4), shown))[4]
        assert pads == int((~valid).sum())
        assert len(_texts(fig, "word-label")) == shown
    if name == "4W4C":   # word 0 lane 1 holds (n,c,h,w) = (0,1,0,0)
        assert boxes[1].get_text() == "c1\nh0w0"


def test_texel_view_and_compare_and_save(tmp_path):
    from matplotlib.figure import Figure

    from workbench.viz import layout_views as V
    fig = V.memory_view("CHANNELS_PACKED_TEXTURE", (2, 6, 2, 3), highlight=(1, 5, 1, 2))
    X, Y, Z = L.get_layout("CHANNELS_PACKED_TEXTURE").extents((2, 6, 2, 3))
    assert len(_texts(fig, "lane-label")) == X * Y * Z * 4
    assert fig._repr_png_()[:4] == b"\x89PNG"                       # shows itself in Jupyter without pyplot
    fig = V.compare_layouts(["4W4C", "4C1W", "CHANNELS_PACKED_TEXTURE"], (1, 6, 2, 5), (0, 5, 1, 4))
    assert isinstance(fig, Figure) and len(fig.axes) == 6
    w, lane = closed_form("4W4C", (1, 6, 2, 5), 0, 5, 1, 4)
    assert f"4W4C: element (0,5,1,4) → word {w} lane {lane}" in fig._suptitle.get_text()
    assert len(_texts(fig, "cell-label")) == 3 * 60
    path = V.save_layout_pictures("4C1W", (1, 5, 1, 3), tmp_path / "x.png", element=(0, 4, 0, 2))
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="too many"):
        V.tensor_view("4W4C", (4, 64, 16, 16))


def test_layout_explorer_reacts_to_sliders():
    pytest.importorskip("ipywidgets")
    from workbench.viz import layout_views as V
    ex = V.layout_explorer("4W4C", "4C1W", sizes=(1, 8, 2, 4), element=(0, 0, 0, 0), max_words=16)
    assert ex.text_lines[0] == "4W4C: element (0,0,0,0) → word 0 lane 0, byte address 0"
    first_png = ex.image.value
    assert first_png[:4] == b"\x89PNG"
    ex.element_sliders["c"].value = 1
    assert ex.text_lines == ["4W4C: element (0,1,0,0) → word 0 lane 1, byte address 1",
                             "4C1W: element (0,1,0,0) → word 0 lane 1, byte address 1"]
    ex.element_sliders["h"].value = 1
    # 4W4C (1,8,2,4): next height starts at 2 C-blocks x 1 W-block x 4 words = word 8
    assert ex.text_lines[0] == "4W4C: element (0,1,1,0) → word 8 lane 1, byte address 33"
    assert ex.image.value != first_png
    ex.layout_b.value = "4H4W"                                  # H padded to 4: word = 4*(c*1*1) + h
    assert ex.text_lines[1] == "4H4W: element (0,1,1,0) → word 5 lane 0, byte address 20"
    # shrinking a size clamps the element slider
    ex.size_sliders["c"].value = 1
    assert ex.element_sliders["c"].value == 0 and ex.element_sliders["c"].max == 0
    assert ex.text_lines[0].startswith("4W4C: element (0,0,1,0)")
    labels = [t for ax in ex.figure.axes for t in ax.texts if t.get_gid() == "cell-label"]
    assert len(labels) == 2 * 1 * 1 * 2 * 4
    assert ex.sizes == (1, 1, 2, 4) and ex.element == (0, 0, 1, 0)
