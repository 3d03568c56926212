"""ET-VK memory layouts, each defined once as data; everything else is derived.

A :class:`Layout` holds exactly the fields of ET-VK's ``PackedDimInfo`` (reference ``etvk.md`` §1.2) plus its
storage, its element type and, for textures, the axis map.  Like a CuTe layout, it is one function from
coordinates to offsets: §1.4's general formula (``Layout._index``, public as :meth:`Layout.element_to_index`) for
buffers, and for textures §1.9's texel position built from the same block coordinates (``Layout._texel``); these
two, and their inverses, are the only places where coordinates become addresses.  Padded sizes, dim order, block-unit strides, word/lane maps and their inverses,
pack/unpack, the hashed layout (the specialization constant that shaders read), the ``BufferMetadata`` /
``TextureMetadata`` UBO bytes, texture extents and the pictures in :mod:`workbench.viz.layout_views` are all
computed from those fields.

Conventions (DEVELOPERS.md):

* Sizes and element coordinates given by users are **NCHW** (torch order).  Sizes with 1 to 3 dims are unsqueezed
  with leading 1s to 4-D (ET-VK's own rule, §1.3); more than 4 dims are not modelled.  Internally the layout fields
  use **WHCN** dims (0 = W, 1 = H, 2 = C, 3 = N), as ET-VK and the shaders do.
* int8 tensors live in int32 words of 4 little-endian lanes: lane k = bits 8k..8k+7 = byte 4*word + k.
* Every index map is vectorised: coordinates may be Python ints or numpy arrays (broadcast together).  With only
  scalars in, results are Python ints / bools.

Layouts (ET-VK enum value in brackets, §1.1): float buffers ``WIDTH_PACKED`` (0), ``HEIGHT_PACKED`` (1),
``CHANNELS_PACKED`` (2); float 3-D textures ``WIDTH_PACKED_TEXTURE``, ``HEIGHT_PACKED_TEXTURE``,
``CHANNELS_PACKED_TEXTURE`` (0, 1, 2 with storage "texture"); int8x4 buffers ``4W4C`` (3), ``4H4W`` (4), ``4W`` (5),
``4C`` (6), ``4C1W`` (8).  ``PACKED_INT8_CONV2D`` (9) is not a concrete layout: use
:func:`resolve_packed_int8_conv2d`.
"""
from __future__ import annotations

import functools
import operator
import struct
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Layout", "get_layout", "layout_names", "LAYOUTS", "INT8_LAYOUTS", "FLOAT_BUFFER_LAYOUTS", "TEXTURE_LAYOUTS",
    "resolve_packed_int8_conv2d", "describe_element", "normalize_sizes", "normalize_element",
    "PACKED_INT8_CONV2D", "DEFAULT_LAYOUT", "STORAGE_TYPES", "CONTIG_LAYOUT_INT",
    "W", "H", "C", "N", "BUFFER_METADATA_NBYTES", "TEXTURE_METADATA_NBYTES",
    "PACKED_DIMS", "PACKED_DIM_NAMES", "packed_dim_name",
]

# WHCN dim ids (shader order).  NCHW index of WHCN dim d (4-D) is 3 - d.
W, H, C, N = 0, 1, 2, 3
_DIM_LETTER = "WHCN"
#: Packed dims of float tensors by name → the base name of their float layouts (storage picks buffer or texture).
PACKED_DIMS = {"width": "WIDTH_PACKED", "height": "HEIGHT_PACKED", "channels": "CHANNELS_PACKED"}
#: WHCN packed dim → its name.
PACKED_DIM_NAMES = {W: "width", H: "height", C: "channels"}
_PACKED_ALIASES = {"width": "width", "w": "width", "widthpacked": "width",
                   "height": "height", "h": "height", "heightpacked": "height",
                   "channels": "channels", "channel": "channels", "c": "channels", "channelspacked": "channels"}

#: Serialized value of the dynamic conv2d int8 layout (export-time only, §1.1 / §1.11).
PACKED_INT8_CONV2D = 9
#: Serialized "let the runtime choose" value.
DEFAULT_LAYOUT = 255
#: ``utils::StorageType`` values.
STORAGE_TYPES = {"buffer": 0, "texture": 1, "texture3d": 1, "texture2d": 2}
#: ET-VK's default hashed layout (contiguous, width-packed buffer) (§1.7).
CONTIG_LAYOUT_INT = 0x11103210
#: Sizes of the UBO byte strings (std140 size rounded up to 16 bytes, zero-filled; §1.8).
BUFFER_METADATA_NBYTES = 112
TEXTURE_METADATA_NBYTES = 64

_DEFAULT_AXIS_MAP = (0, 1, 2, 2)


# ---------------------------------------------------------------------------------------------------------------------
# Argument normalisation
# ---------------------------------------------------------------------------------------------------------------------

def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def normalize_sizes(sizes) -> tuple[int, int, int, int]:
    """NCHW sizes as a 4-tuple of ints >= 1.

    Accepts a tuple / list / ``torch.Size`` / numpy array of 1 to 4 ints; fewer than 4 dims are unsqueezed with
    leading 1s (``(C, H, W)`` → ``(1, C, H, W)``, ``(W,)`` → ``(1, 1, 1, W)``), as ET-VK does.
    """
    try:
        dims = list(sizes)
    except TypeError:
        raise ValueError(f"sizes must be a sequence of 1 to 4 ints in NCHW order, got {sizes!r}") from None
    if not 1 <= len(dims) <= 4:
        raise ValueError(f"sizes must have 1 to 4 dims in NCHW order (fewer than 4 are unsqueezed with leading 1s; "
                         f"more than 4 are not supported), got {len(dims)} dims: {tuple(dims)!r}")
    try:
        if any(isinstance(d, (bool, np.bool_)) for d in dims):
            raise TypeError
        dims = [operator.index(d) for d in dims]
    except TypeError:
        raise ValueError(f"sizes must be ints in NCHW order, got {tuple(dims)!r}") from None
    if any(d < 1 for d in dims):
        raise ValueError(f"every size must be >= 1, got {tuple(dims)!r}")
    return tuple([1] * (4 - len(dims)) + dims)


def normalize_element(element) -> tuple[int, int, int, int]:
    """An (n, c, h, w) element as a 4-tuple of ints; fewer coordinates get leading zeros (like sizes get 1s)."""
    try:
        coords = [operator.index(v) for v in element]
    except TypeError:
        raise ValueError(f"element must be a sequence of 1 to 4 NCHW coordinates, got {element!r}") from None
    if not 1 <= len(coords) <= 4:
        raise ValueError(f"element must have 1 to 4 NCHW coordinates, got {element!r}")
    return tuple([0] * (4 - len(coords)) + coords)


def _as_index_arrays(*vals):
    """Broadcast the coordinates to int64 arrays; also say whether every input was a scalar."""
    scalar = all(np.ndim(v) == 0 for v in vals)
    arrs = []
    for v in vals:
        a = np.asarray(v)
        if a.dtype.kind not in "iu":
            raise ValueError(f"coordinates and indices must be integers, got {v!r} (dtype {a.dtype})")
        arrs.append(a.astype(np.int64, copy=False))
    return list(np.broadcast_arrays(*arrs)), scalar


def _out(scalar: bool, *arrays):
    """Return Python scalars when every input was a scalar, else arrays."""
    if scalar:
        res = tuple(a.item() for a in arrays)
    else:
        res = tuple(arrays)
    return res if len(res) > 1 else res[0]


def _check_range(what: str, values, limit: int, context: str):
    bad = (values < 0) | (values >= limit)
    if np.any(bad):
        first = int(np.asarray(values)[bad].ravel()[0])
        raise ValueError(f"{what}={first} out of range [0, {limit}) for {context}")


def _to_numpy(x):
    """(numpy array, 'torch' | 'numpy')."""
    mod = type(x).__module__
    if mod.startswith("torch"):
        return x.detach().cpu().numpy(), "torch"
    return np.asarray(x), "numpy"


def _from_numpy(a: np.ndarray, kind: str):
    if kind == "torch":
        import torch
        return torch.from_numpy(np.ascontiguousarray(a))
    return a


def _sizes_str(sizes) -> str:
    return "(N,C,H,W)=(" + ",".join(str(s) for s in sizes) + ")"


# ---------------------------------------------------------------------------------------------------------------------
# The definition
# ---------------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class Layout:
    """One ET-VK memory layout: the ``PackedDimInfo`` fields (§1.2), storage, element type and axis map.

    Dims are WHCN (0 = W, 1 = H, 2 = C, 3 = N).  This is the single source of truth; every method derives from it.
    """

    name: str                       # canonical workbench name, e.g. "4W4C", "CHANNELS_PACKED_TEXTURE"
    enum_value: int                 # utils::GPUMemoryLayout / VkMemoryLayout value
    etvk_name: str                  # C++ constant, e.g. "kPackedInt8_4W4C"
    storage: str                    # "buffer" | "texture" (3-D image)
    dtype: str                      # "int8x4" (int32 words of 4 int8) | "float"
    packed_dim: int
    packed_dim_block_size: int
    packed_dim_align: int
    outer_packed_dim: int
    outer_packed_dim_block_size: int
    outer_packed_dim_align: int
    block_transposed: bool = False
    axis_map: tuple[int, int, int, int] | None = None   # textures only: WHCN dim → image axis; [3] = batch-concat dim
    aliases: tuple[str, ...] = ()

    def __post_init__(self):
        if self.storage not in ("buffer", "texture"):
            raise ValueError(f"storage must be 'buffer' or 'texture', got {self.storage!r}")
        if self.dtype not in ("int8x4", "float"):
            raise ValueError(f"dtype must be 'int8x4' or 'float', got {self.dtype!r}")
        if self.packed_dim == self.outer_packed_dim or not {self.packed_dim, self.outer_packed_dim} <= {0, 1, 2}:
            raise ValueError("packed_dim and outer_packed_dim must be two different dims among W, H, C")
        if (self.storage == "texture") != (self.axis_map is not None):
            raise ValueError("textures need an axis_map; buffers have none")

    def __repr__(self):
        inner = f"{_DIM_LETTER[self.packed_dim]}x{self.packed_dim_block_size}"
        outer = f"{_DIM_LETTER[self.outer_packed_dim]}x{self.outer_packed_dim_block_size}"
        t = ", transposed" if self.block_transposed else ""
        return (f"Layout({self.name!r}, enum={self.enum_value}, {self.storage}, {self.dtype}, "
                f"packed={inner}, outer={outer}{t})")

    # -- size-independent facts -------------------------------------------------------------------------------------
    @property
    def block_numel(self) -> int:
        return self.packed_dim_block_size * self.outer_packed_dim_block_size

    @property
    def is_int8(self) -> bool:
        return self.dtype == "int8x4"

    @property
    def is_texture(self) -> bool:
        return self.storage == "texture"

    @property
    def storage_type(self) -> int:
        """``utils::StorageType`` value (BUFFER = 0, TEXTURE_3D = 1)."""
        return STORAGE_TYPES[self.storage]

    @property
    def dim_order(self) -> tuple[int, int, int, int]:
        """NCHW dim indices, slowest first (§1.3): the other dims ascending, then outer, then packed
        (the last two swapped when ``block_transposed``)."""
        packed = 3 - self.packed_dim
        outer = 3 - self.outer_packed_dim
        rest = [d for d in range(4) if d not in (packed, outer)]
        tail = [packed, outer] if self.block_transposed else [outer, packed]
        return tuple(rest + tail)

    @property
    def dim_order_whcn(self) -> tuple[int, int, int, int]:
        """WHCN dim ids, fastest first (the order in the hashed layout and ``BufferMetadata.dim_order``)."""
        return tuple(3 - d for d in reversed(self.dim_order))

    @property
    def hashed_layout(self) -> int:
        """§1.7: nibbles 0–3 = WHCN dim order fastest first (buffers) or the axis map (textures); then packed dim,
        outer packed dim, packed block size, outer block size."""
        low = self.axis_map if self.is_texture else self.dim_order_whcn
        value = 0
        for i, nib in enumerate(low):
            value |= (nib & 0xF) << (4 * i)
        value |= (self.packed_dim & 0xF) << 16
        value |= (self.outer_packed_dim & 0xF) << 20
        value |= (self.packed_dim_block_size & 0xF) << 24
        value |= (self.outer_packed_dim_block_size & 0xF) << 28
        return value

    def spec_constant(self) -> int:
        """The hashed layout as the signed 32-bit int a ``layout(constant_id = K) const int`` expects."""
        v = self.hashed_layout
        return v - (1 << 32) if v >= (1 << 31) else v

    @property
    def unit_name(self) -> str:
        """What one address step holds: "word" (int8x4), "texel" (texture) or "element" (float buffer)."""
        return "word" if self.is_int8 else ("texel" if self.is_texture else "element")

    @property
    def slot_name(self) -> str:
        """Position inside a unit: "lane" (byte of a word), "component" (of a texel), "" for float buffers."""
        return "lane" if self.is_int8 else ("component" if self.is_texture else "")

    @property
    def slots_per_unit(self) -> int:
        return 1 if (self.storage == "buffer" and not self.is_int8) else 4

    @property
    def units_per_block(self) -> int:
        """Words per packing block (4 for 4W4C / 4H4W, 1 for 4W / 4C / 4C1W); 1 for float layouts."""
        return self.block_numel // 4 if self.is_int8 else 1

    @property
    def unit_nbytes(self) -> int:
        """Bytes per unit: int32 word 4, RGBA32F texel 16, fp32 element 4."""
        return 16 if self.is_texture else 4

    @property
    def slot_nbytes(self) -> int:
        return 1 if self.is_int8 else 4

    # -- sizes -----------------------------------------------------------------------------------------------------
    def _along(self, whcn_dim: int, packed: int, outer: int) -> int:
        """`packed` for the packed dim, `outer` for the outer packed dim, 1 for the others."""
        if whcn_dim == self.packed_dim:
            return packed
        if whcn_dim == self.outer_packed_dim:
            return outer
        return 1

    def _block_of(self, whcn_dim: int) -> int:
        return self._along(whcn_dim, self.packed_dim_block_size, self.outer_packed_dim_block_size)

    def _align_of(self, whcn_dim: int) -> int:
        return self._along(whcn_dim, self.packed_dim_align, self.outer_packed_dim_align)

    def padded_sizes(self, sizes) -> tuple[int, int, int, int]:
        """NCHW sizes with the packed dim and the outer packed dim rounded up to their alignment (§1.3)."""
        sz = normalize_sizes(sizes)
        out = []
        for nchw, s in enumerate(sz):
            a = self._align_of(3 - nchw)
            out.append(-(-s // a) * a)
        return tuple(out)

    def blocked_sizes(self, sizes) -> tuple[int, int, int, int]:
        """NCHW padded sizes in block units (packed dim / block size, outer dim / outer block size)."""
        return tuple(p // self._block_of(3 - nchw) for nchw, p in enumerate(self.padded_sizes(sizes)))

    def strides(self, sizes) -> tuple[int, int, int, int]:
        """NCHW strides in block units, accumulated along :attr:`dim_order` (§1.3)."""
        bs = self.blocked_sizes(sizes)
        st = [0, 0, 0, 0]
        acc = 1
        for d in reversed(self.dim_order):
            st[d] = acc
            acc *= bs[d]
        return tuple(st)

    def strides_whcn(self, sizes) -> tuple[int, int, int, int]:
        return tuple(reversed(self.strides(sizes)))

    def padded_numel(self, sizes) -> int:
        return int(np.prod(self.padded_sizes(sizes)))

    def num_words(self, sizes) -> int:
        """int32 words of an int8x4 tensor = padded numel / 4."""
        self._require_int8("num_words")
        return self.padded_numel(sizes) // 4

    def extents(self, sizes) -> tuple[int, int, int]:
        """Image extents (x, y, z) of a texture layout (§1.9): ``extent[axis_map[d]]`` = padded size of WHCN dim d in
        block units; the batch-concat axis is multiplied by N."""
        self._require_texture("extents")
        bs = self.blocked_sizes(sizes)
        ext = [1, 1, 1]
        for d in range(3):
            ext[self.axis_map[d]] = bs[3 - d]
        ext[self.axis_map[self.axis_map[3]]] *= bs[0]
        return tuple(ext)

    def logical_limits(self, sizes) -> tuple[int, int, int]:
        """Image extents permuted by the axis map (the default global work size of texture ops)."""
        ext = self.extents(sizes)
        return tuple(ext[self.axis_map[d]] for d in range(3))

    def num_texels(self, sizes) -> int:
        return int(np.prod(self.extents(sizes)))

    def num_units(self, sizes) -> int:
        """Words (int8x4), texels (texture) or elements (float buffer) of the physical storage."""
        if self.is_int8:
            return self.num_words(sizes)
        if self.is_texture:
            return self.num_texels(sizes)
        return self.padded_numel(sizes)

    def nbytes(self, sizes) -> int:
        """Bytes of the physical storage (int32 words; RGBA32F texels; fp32 elements)."""
        return self.num_units(sizes) * self.unit_nbytes

    # -- the one coordinate → offset function ------------------------------------------------------------------------
    def _check_element(self, sz, coords):
        for name, v, s in zip("nchw", coords, sz):
            _check_range(name, v, s, f"{self.name} sizes {_sizes_str(sz)}")

    def element_to_index(self, sizes, n, c, h, w):
        """§1.4's general formula (``tensor4d_idx_to_buf_idx``): the byte index (int8x4; word = index // 4, lane =
        index % 4) or the element offset (float buffer) of element (n, c, h, w).  Vectorised.

        ``block_idx = Σ_d strides[d] * t'[d]`` (t' = t with the packed / outer coords divided by their block sizes),
        ``intra = (t[outer] % bo) * bi + t[inner] % bi``, ``index = block_idx * bi * bo + intra``.
        """
        if self.is_texture:
            raise ValueError(f"{self.name} is a texture layout: it has no linear index; use element_to_texel")
        sz = normalize_sizes(sizes)
        (n, c, h, w), scalar = _as_index_arrays(n, c, h, w)
        self._check_element(sz, (n, c, h, w))
        return _out(scalar, self._index(sz, (w, h, c, n)))

    def _index(self, sz, t):
        """t: WHCN coordinate arrays (already checked)."""
        st = self.strides_whcn(sz)
        bi, bo = self.packed_dim_block_size, self.outer_packed_dim_block_size
        block = 0
        for d in range(4):
            block = block + st[d] * (t[d] // self._block_of(d))
        intra = (t[self.outer_packed_dim] % bo) * bi + t[self.packed_dim] % bi
        return block * (bi * bo) + intra

    def index_to_element(self, sizes, index):
        """Inverse of :meth:`element_to_index`: ``(n, c, h, w, valid)``; ``valid`` is False for padding."""
        if self.is_texture:
            raise ValueError(f"{self.name} is a texture layout: it has no linear index; use texel_to_element")
        sz = normalize_sizes(sizes)
        (index,), scalar = _as_index_arrays(index)
        limit = self.padded_numel(sz)
        _check_range("index" if not self.is_int8 else "byte index", index, limit,
                     f"{self.name} sizes {_sizes_str(sz)} ({limit} {'bytes' if self.is_int8 else 'elements'})")
        return _out(scalar, *self._element(sz, index))

    def _element(self, sz, index):
        st = self.strides_whcn(sz)
        bi, bo = self.packed_dim_block_size, self.outer_packed_dim_block_size
        block, intra = np.divmod(index, bi * bo)
        outer_off, inner_off = np.divmod(intra, bi)
        t = [None] * 4
        rem = block
        for d in reversed(self.dim_order_whcn):          # slowest first
            t[d], rem = np.divmod(rem, st[d])
        t = [t[d] * self._block_of(d) for d in range(4)]
        return self._in_block(sz, t, inner_off, outer_off, np.shape(index))

    def _in_block(self, sz, t, inner_off, outer_off, shape):
        """``(n, c, h, w, valid)`` of the element `inner_off` along the packed dim and `outer_off` along the outer
        packed dim from a block's first element `t` (WHCN); valid where it lies inside sizes `sz` (of `shape`)."""
        t[self.packed_dim] = t[self.packed_dim] + inner_off
        t[self.outer_packed_dim] = t[self.outer_packed_dim] + outer_off
        whcn_sizes = sz[::-1]
        valid = np.ones(shape, dtype=bool)
        for d in range(4):
            valid &= t[d] < whcn_sizes[d]
        return t[3], t[2], t[1], t[0], valid

    # int8x4 views of the index
    def element_to_word_lane(self, sizes, n, c, h, w):
        """(word, lane) of element (n, c, h, w) in an int8x4 layout."""
        self._require_int8("element_to_word_lane")
        sz = normalize_sizes(sizes)
        (n, c, h, w), scalar = _as_index_arrays(n, c, h, w)
        self._check_element(sz, (n, c, h, w))
        word, lane = np.divmod(self._index(sz, (w, h, c, n)), 4)
        return _out(scalar, word, lane)

    def word_lane_to_element(self, sizes, word, lane=0):
        """Inverse: ``(n, c, h, w, valid)`` of (word, lane); valid is False for padding lanes.  With lane 0 this is
        the first element of the word, as a per-word dispatch computes it."""
        self._require_int8("word_lane_to_element")
        sz = normalize_sizes(sizes)
        (word, lane), scalar = _as_index_arrays(word, lane)
        _check_range("word", word, self.num_words(sz), f"{self.name} sizes {_sizes_str(sz)}")
        _check_range("lane", lane, 4, "an int32 word")
        return _out(scalar, *self._element(sz, word * 4 + lane))

    # float buffer views of the index
    def element_to_offset(self, sizes, n, c, h, w):
        """Element offset in a float buffer layout."""
        self._require_float_buffer("element_to_offset")
        return self.element_to_index(sizes, n, c, h, w)

    def offset_to_element(self, sizes, offset):
        """Inverse of :meth:`element_to_offset`: ``(n, c, h, w, valid)``."""
        self._require_float_buffer("offset_to_element")
        return self.index_to_element(sizes, offset)

    # texture views (§1.9)
    def element_to_texel(self, sizes, n, c, h, w):
        """``(x, y, z, comp)`` of element (n, c, h, w) in a texture layout."""
        self._require_texture("element_to_texel")
        sz = normalize_sizes(sizes)
        (n, c, h, w), scalar = _as_index_arrays(n, c, h, w)
        self._check_element(sz, (n, c, h, w))
        return _out(scalar, *self._texel(sz, (w, h, c, n)))

    def _texel(self, sz, t):
        bs_whcn = self.blocked_sizes(sz)[::-1]
        bi, bo = self.packed_dim_block_size, self.outer_packed_dim_block_size
        pos = [0, 0, 0]
        for d in range(3):
            pos[self.axis_map[d]] = pos[self.axis_map[d]] + t[d] // self._block_of(d)
        concat = self.axis_map[3]
        pos[self.axis_map[concat]] = pos[self.axis_map[concat]] + t[3] * bs_whcn[concat]
        comp = (t[self.outer_packed_dim] % bo) * bi + t[self.packed_dim] % bi
        return pos[0], pos[1], pos[2], comp

    def texel_to_element(self, sizes, x, y, z, comp=0):
        """Inverse of :meth:`element_to_texel`: ``(n, c, h, w, valid)``; valid is False for padding components."""
        self._require_texture("texel_to_element")
        sz = normalize_sizes(sizes)
        (x, y, z, comp), scalar = _as_index_arrays(x, y, z, comp)
        ext = self.extents(sz)
        ctx = f"{self.name} sizes {_sizes_str(sz)} (extents {ext})"
        for name, v, e in zip("xyz", (x, y, z), ext):
            _check_range(name, v, e, ctx)
        _check_range("comp", comp, 4, "an RGBA texel")
        return _out(scalar, *self._texel_element(sz, (x, y, z), comp))

    def _texel_element(self, sz, pos, comp):
        bs_whcn = self.blocked_sizes(sz)[::-1]
        bi = self.packed_dim_block_size
        concat = self.axis_map[3]
        t = [None] * 4
        for d in range(3):
            t[d] = pos[self.axis_map[d]]
        t[3], t[concat] = np.divmod(t[concat], bs_whcn[concat])
        t = [t[d] * self._block_of(d) for d in range(3)] + [t[3]]
        outer_off, inner_off = np.divmod(comp, bi)
        return self._in_block(sz, t, inner_off, outer_off, np.shape(comp))

    # generic "unit" view used by the pictures: (word, lane) | (linear texel, component) | (offset, 0)
    def element_to_unit(self, sizes, n, c, h, w):
        """``(unit, slot)``: (word, lane), (linear texel index ``(z*Y + y)*X + x``, component) or (offset, 0)."""
        sz = normalize_sizes(sizes)
        (n, c, h, w), scalar = _as_index_arrays(n, c, h, w)
        self._check_element(sz, (n, c, h, w))
        return _out(scalar, *self._unit(sz, (w, h, c, n)))

    def padded_position_to_unit(self, sizes, n, c, h, w):
        """Like :meth:`element_to_unit`, but for any position inside :meth:`padded_sizes`, padding included: the
        storage slot the layout reserves there (what the pictures draw for padding)."""
        sz = normalize_sizes(sizes)
        psz = self.padded_sizes(sz)
        (n, c, h, w), scalar = _as_index_arrays(n, c, h, w)
        for name, v, s in zip("nchw", (n, c, h, w), psz):
            _check_range(name, v, s, f"{self.name} padded sizes {_sizes_str(psz)}")
        return _out(scalar, *self._unit(sz, (w, h, c, n)))

    def _unit(self, sz, t):
        if self.is_texture:
            x, y, z, comp = self._texel(sz, t)
            ext = self.extents(sz)
            return (z * ext[1] + y) * ext[0] + x, comp
        idx = self._index(sz, t)
        return np.divmod(idx, 4) if self.is_int8 else (idx, idx * 0)

    def unit_to_element(self, sizes, unit, slot=0):
        """Inverse of :meth:`element_to_unit`: ``(n, c, h, w, valid)``."""
        if self.is_int8:
            return self.word_lane_to_element(sizes, unit, slot)
        if not self.is_texture:
            return self.offset_to_element(sizes, unit)
        sz = normalize_sizes(sizes)
        (unit, slot), scalar = _as_index_arrays(unit, slot)
        _check_range("texel", unit, self.num_texels(sz), f"{self.name} sizes {_sizes_str(sz)}")
        _check_range("comp", slot, 4, "an RGBA texel")
        ext = self.extents(sz)
        zy, x = np.divmod(unit, ext[0])
        z, y = np.divmod(zy, ext[1])
        return _out(scalar, *self._texel_element(sz, (x, y, z), slot))

    def byte_address(self, sizes, n, c, h, w):
        """Byte address of the element: ``4*word + lane`` (int8x4), ``4*offset`` (fp32 buffer), or the byte offset
        in a tightly packed RGBA32F staging copy of the image, ``16*texel + 4*comp`` (textures)."""
        unit, slot = self.element_to_unit(sizes, n, c, h, w)
        return unit * self.unit_nbytes + slot * self.slot_nbytes

    # -- whole-tensor conversions -----------------------------------------------------------------------------------
    def _element_units(self, sizes):
        """(unit, slot) of every element in NCHW C order (cached, read-only)."""
        return _all_units(self, normalize_sizes(sizes))

    def pack(self, x):
        """NCHW int8 tensor (numpy or torch) → int32 words (1-D, padding lanes 0), same library as given."""
        self._require_int8("pack")
        a, kind = _to_numpy(x)
        if a.dtype != np.int8:
            raise TypeError(f"pack expects an int8 tensor (numpy int8 / torch.int8), got dtype {a.dtype}; "
                            f"quantize first (workbench.quant.quantize_per_tensor)")
        sz = normalize_sizes(a.shape)
        word, lane = self._element_units(sz)
        buf = np.zeros(self.num_words(sz) * 4, dtype=np.uint8)
        buf[word * 4 + lane] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        words = buf.view("<i4").astype(np.int32)
        return _from_numpy(words, kind)

    def unpack(self, words, sizes):
        """int32 words (numpy or torch, any shape with the right count) → NCHW int8 tensor of shape ``sizes``."""
        self._require_int8("unpack")
        a, kind = _to_numpy(words)
        sz = normalize_sizes(sizes)
        if a.dtype not in (np.int32, np.uint32):
            raise TypeError(f"unpack expects int32 (or uint32) words, got dtype {a.dtype}")
        expected = self.num_words(sz)
        if a.size != expected:
            raise ValueError(f"{self.name} sizes {_sizes_str(sz)} needs {expected} int32 words, "
                             f"got {a.size} (array shape {a.shape})")
        raw = np.ascontiguousarray(a.reshape(-1), dtype=a.dtype.newbyteorder("<")).view(np.uint8)
        word, lane = self._element_units(sz)
        out = raw[word * 4 + lane].view(np.int8).reshape(tuple(int(s) for s in sizes))
        return _from_numpy(out, kind)

    def to_texels(self, x):
        """NCHW tensor → texel array shaped (Z, Y, X, 4) (the layout of ``img.upload``), padding 0, same dtype."""
        self._require_texture("to_texels")
        a, kind = _to_numpy(x)
        sz = normalize_sizes(a.shape)
        ext = self.extents(sz)
        unit, comp = self._element_units(sz)
        flat = np.zeros(self.num_texels(sz) * 4, dtype=a.dtype)
        flat[unit * 4 + comp] = np.ascontiguousarray(a).reshape(-1)
        return _from_numpy(flat.reshape(ext[2], ext[1], ext[0], 4), kind)

    def from_texels(self, texels, sizes):
        """Texel array (Z, Y, X, 4) → NCHW tensor of shape ``sizes``."""
        self._require_texture("from_texels")
        a, kind = _to_numpy(texels)
        sz = normalize_sizes(sizes)
        ext = self.extents(sz)
        expected = (ext[2], ext[1], ext[0], 4)
        if a.size != int(np.prod(expected)):
            raise ValueError(f"{self.name} sizes {_sizes_str(sz)} needs a texel array shaped (Z,Y,X,4)={expected}, "
                             f"got shape {a.shape}")
        unit, comp = self._element_units(sz)
        out = np.ascontiguousarray(a).reshape(-1)[unit * 4 + comp].reshape(tuple(int(s) for s in sizes))
        return _from_numpy(out, kind)

    def to_buffer(self, x):
        """NCHW tensor → 1-D buffer in this float layout's dim order (a permutation; no padding), same dtype."""
        self._require_float_buffer("to_buffer")
        a, kind = _to_numpy(x)
        sz = normalize_sizes(a.shape)
        off, _ = self._element_units(sz)
        flat = np.zeros(self.padded_numel(sz), dtype=a.dtype)
        flat[off] = np.ascontiguousarray(a).reshape(-1)
        return _from_numpy(flat, kind)

    def from_buffer(self, buf, sizes):
        """1-D buffer in this float layout → NCHW tensor of shape ``sizes``."""
        self._require_float_buffer("from_buffer")
        a, kind = _to_numpy(buf)
        sz = normalize_sizes(sizes)
        expected = self.padded_numel(sz)
        if a.size != expected:
            raise ValueError(f"{self.name} sizes {_sizes_str(sz)} needs {expected} elements, got {a.size} "
                             f"(array shape {a.shape})")
        off, _ = self._element_units(sz)
        out = np.ascontiguousarray(a).reshape(-1)[off].reshape(tuple(int(s) for s in sizes))
        return _from_numpy(out, kind)

    def encode(self, x):
        """The device-side array for this layout: :meth:`pack` (int8x4), :meth:`to_texels` or :meth:`to_buffer`."""
        if self.is_int8:
            return self.pack(x)
        return self.to_texels(x) if self.is_texture else self.to_buffer(x)

    def decode(self, data, sizes):
        """Inverse of :meth:`encode`."""
        if self.is_int8:
            return self.unpack(data, sizes)
        return self.from_texels(data, sizes) if self.is_texture else self.from_buffer(data, sizes)

    # -- UBOs ----------------------------------------------------------------------------------------------------------
    def buffer_metadata(self, sizes) -> bytes:
        """``BufferMetadata`` UBO bytes (§1.8), std140, 112 bytes zero-filled::

            struct BufferMetadata { uvec4 sizes[2]; uvec4 dim_order[2]; uvec4 strides[2]; uvec2 ndim_numel; };
            // offsets: sizes 0, dim_order 32, strides 64, ndim 96, numel 100

        All WHCN-flipped and unsqueezed to 8 dims: sizes with 1, dim_order (fastest first) with the position's own
        index, strides (block units) with numel.  ndim = 4 (tensors are modelled as 4-D), numel = padded numel.
        """
        self._require_buffer("buffer_metadata")
        sz = normalize_sizes(sizes)
        numel = self.padded_numel(sz)
        sizes8 = list(sz[::-1]) + [1] * 4
        order8 = list(self.dim_order_whcn) + [4, 5, 6, 7]
        strides8 = list(self.strides_whcn(sz)) + [numel] * 4
        body = struct.pack("<8I8I8I2I", *sizes8, *order8, *strides8, 4, numel)
        return body + bytes(BUFFER_METADATA_NBYTES - len(body))

    def texture_metadata(self, sizes) -> bytes:
        """``TextureMetadata`` UBO bytes (§1.8), std140, 64 bytes zero-filled::

            struct TextureMetadata { ivec4 sizes; ivec3 limits; ivec4 axis_map; int packed_dim; };
            // offsets: sizes 0, limits 16 (4th int = 1, as C++ writes it), axis_map 32, packed_dim 48

        sizes are the logical WHCN sizes; limits are the logical limits (extents permuted by the axis map).
        """
        self._require_texture("texture_metadata")
        sz = normalize_sizes(sizes)
        body = struct.pack("<4i4i4ii", *sz[::-1], *self.logical_limits(sz), 1, *self.axis_map, self.packed_dim)
        return body + bytes(TEXTURE_METADATA_NBYTES - len(body))

    def metadata(self, sizes) -> bytes:
        """:meth:`buffer_metadata` or :meth:`texture_metadata`, whichever this storage uses."""
        return self.texture_metadata(sizes) if self.is_texture else self.buffer_metadata(sizes)

    # -- text ----------------------------------------------------------------------------------------------------------
    def locate(self, sizes, element) -> dict:
        """Where one element lives, as a dict (unit kind, unit, slot, byte address, texel position...)."""
        sz = normalize_sizes(sizes)
        e = normalize_element(element)
        unit, slot = self.element_to_unit(sz, *e)
        info = {"layout": self.name, "sizes": sz, "element": e, "unit_name": self.unit_name, "unit": unit,
                "slot_name": self.slot_name, "slot": slot, "byte_address": self.byte_address(sz, *e)}
        if self.is_int8:
            info.update(word=unit, lane=slot, block=unit // self.units_per_block)
        elif self.is_texture:
            x, y, z, comp = self.element_to_texel(sz, *e)
            info.update(texel=(x, y, z), component=comp)
        else:
            info.update(offset=unit)
        return info

    def describe_element(self, sizes, element) -> str:
        """One line: where element (n, c, h, w) lives (word and lane, or texel and component) and its byte address."""
        loc = self.locate(sizes, element)
        sz, e = loc["sizes"], loc["element"]
        head = f"{self.name}, sizes {_sizes_str(sz)}: element (n,c,h,w)=({','.join(map(str, e))}) → "
        if self.is_int8:
            b0 = loc["block"] * self.units_per_block
            blk = (f" (block {loc['block']} = words {b0}–{b0 + self.units_per_block - 1})"
                   if self.units_per_block > 1 else "")
            return (head + f"word {loc['word']} lane {loc['lane']}, byte address {loc['byte_address']}{blk}; "
                    f"{self.num_words(sz)} words = {self.nbytes(sz)} bytes")
        if self.is_texture:
            x, y, z = loc["texel"]
            ext = self.extents(sz)
            return (head + f"texel (x,y,z)=({x},{y},{z}) component {loc['component']}, byte address "
                    f"{loc['byte_address']} in the (Z,Y,X,4) fp32 staging array; extents {ext[0]}×{ext[1]}×{ext[2]}")
        return (head + f"offset {loc['offset']}, byte address {loc['byte_address']} (fp32); "
                f"{self.padded_numel(sz)} elements")

    def summary(self) -> str:
        """Multi-line description of the definition and its derived constants."""
        order = "".join("NCHW"[d] for d in self.dim_order)
        lines = [
            repr(self),
            f"  ET-VK: {self.etvk_name} = {self.enum_value}, storage {self.storage} ({self.storage_type})",
            f"  packed dim {_DIM_LETTER[self.packed_dim]} block {self.packed_dim_block_size} align "
            f"{self.packed_dim_align}; outer dim {_DIM_LETTER[self.outer_packed_dim]} block "
            f"{self.outer_packed_dim_block_size} align {self.outer_packed_dim_align}; block_numel {self.block_numel}",
            f"  dim order (slowest→fastest) {order}; hashed layout 0x{self.hashed_layout:08X}",
        ]
        if self.is_texture:
            lines.append(f"  axis map {self.axis_map}")
        return "\n".join(lines)

    # -- guards --------------------------------------------------------------------------------------------------------
    def _require_int8(self, what):
        if not self.is_int8:
            hint = "to_texels/from_texels" if self.is_texture else "to_buffer/from_buffer / element_to_offset"
            raise ValueError(f"{what} needs an int8x4 layout; {self.name} is a float {self.storage} layout "
                             f"(use {hint})")

    def _require_texture(self, what):
        if not self.is_texture:
            raise ValueError(f"{what} needs a texture layout; {self.name} is a {self.storage} layout"
                             + (" (ET-VK int8 layouts are buffer-only)" if self.is_int8 else ""))

    def _require_buffer(self, what):
        if self.is_texture:
            raise ValueError(f"{what} needs a buffer layout; {self.name} is a texture layout")

    def _require_float_buffer(self, what):
        if self.is_texture or self.is_int8:
            hint = "element_to_word_lane / pack" if self.is_int8 else "element_to_texel / to_texels"
            raise ValueError(f"{what} needs a float buffer layout; {self.name} is a {self.dtype} {self.storage} "
                             f"layout (use {hint})")


@functools.lru_cache(maxsize=64)
def _all_units(layout: Layout, sz: tuple[int, int, int, int]):
    n, c, h, w = (a.reshape(-1) for a in np.indices(sz, dtype=np.int64))
    unit, slot = layout.element_to_unit(sz, n, c, h, w)
    unit, slot = np.asarray(unit, dtype=np.int64), np.asarray(slot, dtype=np.int64)
    unit.setflags(write=False)
    slot.setflags(write=False)
    return unit, slot


# ---------------------------------------------------------------------------------------------------------------------
# The layouts (§1.1, §1.2)
# ---------------------------------------------------------------------------------------------------------------------

def _float(name, value, etvk, packed, outer, storage, aliases):
    block = 4 if storage == "texture" else 1
    return Layout(name=name, enum_value=value, etvk_name=etvk, storage=storage, dtype="float",
                  packed_dim=packed, packed_dim_block_size=block, packed_dim_align=block,
                  outer_packed_dim=outer, outer_packed_dim_block_size=1, outer_packed_dim_align=1,
                  axis_map=_DEFAULT_AXIS_MAP if storage == "texture" else None, aliases=aliases)


def _int8(name, value, packed, outer, outer_block, transposed=False):
    etvk = f"kPackedInt8_{name}"
    return Layout(name=name, enum_value=value, etvk_name=etvk, storage="buffer", dtype="int8x4",
                  packed_dim=packed, packed_dim_block_size=4, packed_dim_align=4,
                  outer_packed_dim=outer, outer_packed_dim_block_size=outer_block, outer_packed_dim_align=outer_block,
                  block_transposed=transposed,
                  aliases=(f"PACKED_INT8_{name}", f"TENSOR_PACKED_INT8_{name}", etvk, f"PACKED_INT8_{name}_BUFFER"))


_DEFS = [
    _float("WIDTH_PACKED", 0, "kWidthPacked", W, H, "buffer",
           ("TENSOR_WIDTH_PACKED", "kWidthPacked", "WIDTH_PACKED_BUFFER", "CONTIGUOUS_BUFFER")),
    _float("HEIGHT_PACKED", 1, "kHeightPacked", H, W, "buffer",
           ("TENSOR_HEIGHT_PACKED", "kHeightPacked", "HEIGHT_PACKED_BUFFER")),
    _float("CHANNELS_PACKED", 2, "kChannelsPacked", C, W, "buffer",
           ("TENSOR_CHANNELS_PACKED", "kChannelsPacked", "CHANNELS_PACKED_BUFFER", "CHANNELS_LAST_BUFFER")),
    _float("WIDTH_PACKED_TEXTURE", 0, "kWidthPacked", W, H, "texture",
           ("WIDTH_PACKED_TEXTURE3D", "kWidthPacked_texture")),
    _float("HEIGHT_PACKED_TEXTURE", 1, "kHeightPacked", H, W, "texture",
           ("HEIGHT_PACKED_TEXTURE3D", "kHeightPacked_texture")),
    _float("CHANNELS_PACKED_TEXTURE", 2, "kChannelsPacked", C, W, "texture",
           ("CHANNELS_PACKED_TEXTURE3D", "kChannelsPacked_texture")),
    _int8("4W4C", 3, C, W, 4),
    _int8("4H4W", 4, W, H, 4),
    _int8("4W", 5, W, H, 1),
    _int8("4C", 6, C, W, 1),
    _int8("4C1W", 8, C, W, 1, transposed=True),
]

#: Canonical name → Layout.
LAYOUTS: dict[str, Layout] = {lay.name: lay for lay in _DEFS}
INT8_LAYOUTS = tuple(lay for lay in _DEFS if lay.is_int8)
FLOAT_BUFFER_LAYOUTS = tuple(lay for lay in _DEFS if not lay.is_int8 and not lay.is_texture)
TEXTURE_LAYOUTS = tuple(lay for lay in _DEFS if lay.is_texture)


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


_BY_KEY: dict[str, Layout] = {}
for _lay in _DEFS:
    for _alias in (_lay.name,) + _lay.aliases:
        _BY_KEY.setdefault(_key(_alias), _lay)

_CONV2D_KEYS = {_key(s) for s in ("PACKED_INT8_CONV2D", "kPackedInt8_Conv2d", "CONV2D", "PACKED_INT8_CONV2D_BUFFER")}


def layout_names() -> list[str]:
    """Canonical layout names."""
    return list(LAYOUTS)


def get_layout(name, storage: str = "buffer") -> Layout:
    """The layout called ``name`` (case-insensitive; ``_`` / ``-`` / spaces ignored).

    Accepts the canonical names (``4W4C``, ``WIDTH_PACKED``, ``CHANNELS_PACKED_TEXTURE``...), ET-VK spellings
    (``PACKED_INT8_4W4C``, ``TENSOR_PACKED_INT8_4W4C``, ``kPackedInt8_4W4C``, ``kChannelsPacked``), a
    :class:`Layout` (returned as is) or an ET-VK enum value (0–2 pick the float layout of ``storage``).
    """
    if isinstance(name, Layout):
        return name
    if _is_int(name):
        matches = [lay for lay in _DEFS if lay.enum_value == int(name) and (lay.is_int8 or lay.storage == storage)]
        if int(name) == PACKED_INT8_CONV2D:
            name = "PACKED_INT8_CONV2D"
        elif matches:
            return matches[0]
        else:
            raise ValueError(f"unknown ET-VK layout value {name}; known: "
                             + ", ".join(f"{lay.name}={lay.enum_value}" for lay in _DEFS if lay.storage == "buffer"))
    if not isinstance(name, str):
        raise ValueError(f"layout must be a name, a Layout or an enum value, got {name!r}")
    key = _key(name)
    if storage.startswith("texture") and key in ("widthpacked", "heightpacked", "channelspacked"):
        key += "texture"
    if key in _BY_KEY:
        return _BY_KEY[key]
    if key in _CONV2D_KEYS:
        raise ValueError("PACKED_INT8_CONV2D (9) is a dynamic layout resolved at model load; call "
                         "resolve_packed_int8_conv2d(...) to get the concrete layout (4C or 4C1W)")
    raise ValueError(f"unknown layout {name!r}; known layouts (case-insensitive): {', '.join(LAYOUTS)}; "
                     f"aliases such as PACKED_INT8_4W4C, kPackedInt8_4W4C, kChannelsPacked, *_BUFFER are accepted")


def resolve_packed_int8_conv2d(in_channels_per_group: int, groups: int = 1, out_height: int = 1,
                               out_width: int = 1, *, is_mali: bool = False, op: str = "q8ta_conv2d") -> Layout:
    """The concrete layout ET-VK picks at load time for a ``PACKED_INT8_CONV2D`` conv input (§1.11, pass 1).

    * ``op="q8ta_conv2d_dw"``: always ``4C1W``.
    * ``op="q8ta_conv2d"``: im2col → ``4C`` when ``in_channels_per_group % 4 == 0`` and (the device is Mali, or
      ``groups == 1`` and (``in_channels_per_group >= 32`` or ``out_height * out_width <= 4096``)); otherwise
      direct convolution → ``4C1W``.
    """
    op = op.split(".")[-1]
    if op == "q8ta_conv2d_dw":
        return LAYOUTS["4C1W"]
    if op != "q8ta_conv2d":
        raise ValueError(f"resolve_packed_int8_conv2d models q8ta_conv2d and q8ta_conv2d_dw, got op {op!r}; "
                         f"other ops take the first concrete packed-int8 layout among their args (pass 2)")
    for nm, v in (("in_channels_per_group", in_channels_per_group), ("groups", groups),
                  ("out_height", out_height), ("out_width", out_width)):
        if not _is_int(v) or v < 1:
            raise ValueError(f"{nm} must be an int >= 1, got {v!r}")
    im2col = in_channels_per_group % 4 == 0 and (
        is_mali or (groups == 1 and (in_channels_per_group >= 32 or out_height * out_width <= 4096)))
    return LAYOUTS["4C" if im2col else "4C1W"]


def describe_element(layout_name, sizes, element) -> str:
    """CLI helper: one line with the element's word and lane (or texel and component) and its byte address."""
    return get_layout(layout_name).describe_element(sizes, element)


# ---------------------------------------------------------------------------------------------------------------------
# Module-level conveniences: f(layout, ...) == get_layout(layout).f(...)
# ---------------------------------------------------------------------------------------------------------------------


def packed_dim_name(layout) -> str:
    """A packed dim given as "width" / "W" / "WIDTH_PACKED" / "width_packed_texture" … → "width", "height" or
    "channels"; a clear error for anything else."""
    key = "".join(ch for ch in str(layout).lower() if ch.isalnum())
    if key.endswith("texture"):
        key = key[: -len("texture")]
    if key not in _PACKED_ALIASES:
        raise ValueError(f"unknown layout (packed dim) {layout!r}; expected 'channels', 'width' or 'height'")
    return _PACKED_ALIASES[key]
