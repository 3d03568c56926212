"""Block-wise affine quantize / dequantize (torchao's ``quantize_affine`` / ``dequantize_affine``, reference §4).

Definition (zero-point domain INT, the only one implemented).  A tensor of up to 4 dims is cut into blocks of
``block_size`` (one entry per dim; every dim must be a multiple of its block); block ``b`` has a scale ``s[b]`` and
a zero point ``zp[b]``:

* quantize:   ``q = clamp(round(x · inv[b]) + zp[b], quant_min, quant_max)`` with ``inv[b] = 1 / max(s[b], 1e-7)``;
* dequantize: ``x = float(q − zp[b]) · s[b]`` (no scale clamp: torchao clamps only when quantizing).

Exact fp32 operation order (GPU and torchao's ``quantize_affine`` alike):

1. ``inv = 1.0f / max(scale_f32, 1e-7f)`` — computed **on the host** in fp32 (:func:`inverse_scales`) and uploaded, so
   the GPU's division precision (Vulkan allows 2.5 ULP) never enters;
2. ``v = x_f32 · inv`` — one correctly rounded fp32 multiply (fp16 inputs are widened to fp32 first, exactly);
3. ``r = roundEven(v)`` — round half to **even**, like ``torch.round`` (GLSL ``round()`` is implementation-defined at
   .5, so the shaders use ``roundEven``); ties therefore agree and the GPU result is **bit-exact** with the reference;
4. ``r = r + float(zp)`` in fp32 (torch adds an int32 zero-point tensor to a float tensor in fp32), then
   ``clamp(r, float(quant_min), float(quant_max))`` in fp32, then the cast to the output dtype.

Dequantize: ``float(q − zp)`` (exact int32 difference, one conversion), one fp32 multiply by ``scale_f32``; fp16
outputs round that fp32 value once to fp16 (lavapipe converts round-to-nearest-even, checked by the tests).

Block ids (ET-VK's order, §4.2): ``bcoord = tidx / block_size`` and ``b = dot(bcoord, (1, nbW, nbW·nbH, nbW·nbH·nbC))``
in WHCN, i.e. W fastest: ``scale`` is a tensor of shape ``num_blocks(shape, block_size)`` (torchao's scale shape,
e.g. ``[nbH, nbW]``) stored contiguous; any tensor with that many elements is accepted and flattened.

Device representations:

* float input / output: a buffer in a float layout of any dim order (``WIDTH_PACKED`` contiguous, ``HEIGHT_PACKED``,
  ``CHANNELS_PACKED`` channels-last), fp32 or fp16 (fp16 buffers need ``storage_buffer_16bit``), or a 3-D image
  (rgba32f / rgba16f) of a width-, height- or channels-packed texture layout;
* quantized, buffers: **int8 / uint8 are packed 4 per int32 word** (the workbench's int8x4 convention: lane k =
  bits 8k..8k+7) over the *linear element order of the float layout* (the quantized tensor has the same dim order as
  the float one; the last word's unused lanes are 0); int32 is one word per element;
* quantized, textures: an rgba32i image of the same layout and extents, one int per component (any output dtype).

Kernels: :class:`AffineSpec` describes one dispatch (shader variant, defines, spec constant 3 = the hashed layout,
push constants ``ivec4 block_size, num_blocks, block_stride; int quant_min, quant_max`` in WHCN); :class:`AffineRun`
binds it to device resources.  Buffers: one thread per element (int32 / dequantize) or per output word (quantize to
int8x4); textures: one thread per texel.  :func:`bench_suite` measures them against the copy roofline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import layouts as L
from . import KernelRun, StorageDispatch

QUANTIZE_SHADER = "quantize_affine"
DEQUANTIZE_SHADER = "dequantize_affine"
STORAGES = ("buffer", "texture")
OPS = ("quantize", "dequantize")
SCALE_MIN = 1e-7  # the kernels clamp the scale (ET-VK's shaders did) before the reciprocal; torchao 0.18 does not

#: Quantized dtypes: name → (torch dtype, numpy dtype, dtype min, dtype max).
QUANT_DTYPES = {
    "int8": (torch.int8, np.int8, -128, 127),
    "uint8": (torch.uint8, np.uint8, 0, 255),
    "int32": (torch.int32, np.int32, -2**31, 2**31 - 1),
}
#: Float dtypes: name → (torch dtype, numpy dtype, bytes).
FLOAT_DTYPES = {"float32": (torch.float32, np.float32, 4), "float16": (torch.float16, np.float16, 2)}
ZERO_POINT_DOMAINS = ("INT",)
_UNSUPPORTED_DOMAINS = ("FLOAT", "NONE")


# ---------------------------------------------------------------------------------------------------------------------
# Argument checks (clear errors: expected vs given)
# ---------------------------------------------------------------------------------------------------------------------

def dtype_name(dtype, kind: str) -> str:
    """'int8' / 'float32'... from a torch dtype or a name; ``kind`` "quant" or "float"."""
    table = QUANT_DTYPES if kind == "quant" else FLOAT_DTYPES
    if isinstance(dtype, str) and dtype in table:
        return dtype
    for name, entry in table.items():
        if dtype == entry[0] or dtype == entry[1] or (isinstance(dtype, str) and dtype == f"torch.{name}"):
            return name
    allowed = ", ".join(f"torch.{n}" for n in table)
    what = "quantized output" if kind == "quant" else "float"
    raise TypeError(f"unsupported {what} dtype {dtype}; expected one of {allowed}")


def check_zero_point_domain(domain) -> str:
    name = getattr(domain, "name", domain)
    name = "INT" if name is None else str(name).upper()
    if name in ZERO_POINT_DOMAINS:
        return name
    if name in _UNSUPPORTED_DOMAINS:
        raise NotImplementedError(f"zero_point_domain {name} is not supported: the workbench kernels implement only "
                                  f"ZeroPointDomain.INT (q = round(x / scale) + zero_point)")
    raise ValueError(f"unknown zero_point_domain {domain!r}; expected 'INT' (FLOAT and NONE are not supported)")


def check_shape(shape) -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if not 1 <= len(shape) <= 4:
        raise ValueError(f"quantize_affine supports tensors of 1 to 4 dims, got {len(shape)}-D shape {shape}")
    if any(s <= 0 for s in shape):
        raise ValueError(f"quantize_affine needs a non-empty tensor, got shape {shape}")
    return shape


def check_block_size(shape, block_size) -> tuple[int, ...]:
    """``block_size`` as a tuple, one entry per dim of ``shape``; every dim a multiple of its block."""
    shape = check_shape(shape)
    try:
        bs = tuple(int(b) for b in block_size)
    except TypeError:
        raise TypeError(f"block_size must be a list of ints (one per dim), got {block_size!r}") from None
    if len(bs) != len(shape):
        raise ValueError(f"block_size needs one entry per input dim: expected {len(shape)} entries for shape "
                         f"{shape}, got {len(bs)} ({list(bs)})")
    for d, (s, b) in enumerate(zip(shape, bs)):
        if b < 1 or b > s:
            raise ValueError(f"block_size[{d}] must be in [1, {s}] (size of dim {d} of shape {shape}), got {b}")
        if s % b:
            raise ValueError(f"block_size {list(bs)} does not divide shape {list(shape)}: dim {d} has size {s}, "
                             f"not a multiple of its block {b} (remainder {s % b})")
    return bs


def num_blocks(shape, block_size) -> tuple[int, ...]:
    """Blocks per dim: torchao's scale / zero-point shape."""
    bs = check_block_size(shape, block_size)
    return tuple(int(s) // b for s, b in zip(shape, bs))


def block_count(shape, block_size) -> int:
    return int(np.prod(num_blocks(shape, block_size)))


def check_quant_range(output_dtype, quant_min, quant_max) -> tuple[str, int, int]:
    """(dtype name, quant_min, quant_max); None → the dtype's bounds; outside the dtype → ValueError."""
    name = dtype_name(output_dtype, "quant")
    lo, hi = QUANT_DTYPES[name][2:]
    qmin = lo if quant_min is None else quant_min
    qmax = hi if quant_max is None else quant_max
    for what, v in (("quant_min", qmin), ("quant_max", qmax)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{what} must be an int, got {v!r}")
        if not lo <= int(v) <= hi:
            raise ValueError(f"{what} = {int(v)} is outside the range of {name} [{lo}, {hi}]")
    if int(qmin) > int(qmax):
        raise ValueError(f"quant_min must be <= quant_max, got quant_min = {int(qmin)} > quant_max = {int(qmax)}")
    return name, int(qmin), int(qmax)


def check_qparams(shape, block_size, scale, zero_point):
    """(scale fp32 flat tensor, zero point int32 flat tensor), lengths = number of blocks.  ``zero_point=None``
    means all zeros.  Zero points must be integer-valued (domain INT)."""
    nb = num_blocks(shape, block_size)
    count = int(np.prod(nb))
    scale = torch.as_tensor(scale)
    if scale.numel() != count:
        raise ValueError(f"scale must have one entry per block: expected {count} (num_blocks {list(nb)} for shape "
                         f"{list(shape)} and block_size {list(block_size)}), got {scale.numel()} "
                         f"(shape {list(scale.shape)})")
    if not scale.is_floating_point():
        raise TypeError(f"scale must be a float tensor, got dtype {scale.dtype}")
    scale = scale.detach().cpu().to(torch.float32).reshape(-1).contiguous()
    if not bool(torch.isfinite(scale).all()):
        raise ValueError("scale must be finite")
    if zero_point is None:
        zp = torch.zeros(count, dtype=torch.int32)
    else:
        zp = torch.as_tensor(zero_point)
        if zp.numel() != count:
            raise ValueError(f"zero_point must have one entry per block: expected {count} (num_blocks {list(nb)}), "
                             f"got {zp.numel()} (shape {list(zp.shape)})")
        zp = zp.detach().cpu().reshape(-1)
        if zp.is_floating_point():
            if not bool((zp == zp.round()).all()):
                raise ValueError("zero_point must hold integer values in the INT zero-point domain, got fractional "
                                 "values (the FLOAT domain is not supported)")
        zp64 = zp.to(torch.int64)
        if bool((zp64 < -2**31).any() or (zp64 >= 2**31).any()):
            raise ValueError("zero_point values must fit in int32")
        zp = zp64.to(torch.int32).contiguous()
    return scale, zp


def inverse_scales(scale) -> torch.Tensor:
    """``1.0f / max(scale, 1e-7f)`` in fp32: what the quantize shader multiplies by (uploaded by the host)."""
    s = torch.as_tensor(scale).to(torch.float32).clamp_min(SCALE_MIN)
    return 1.0 / s


def _pairs(shape, bs):
    pairs, reduced = [], []
    for s, b in zip(shape, bs):
        pairs += [s // b, b]
        reduced += [s // b, 1]
    return pairs, reduced


def block_ids(shape, block_size) -> np.ndarray:
    """The block id of every element (an int64 array of ``shape``): the index into the flattened scale tensor."""
    shape = check_shape(shape)
    bs = check_block_size(shape, block_size)
    nb = [s // b for s, b in zip(shape, bs)]
    grids = np.meshgrid(*[np.arange(s) // b for s, b in zip(shape, bs)], indexing="ij")
    return np.ravel_multi_index(tuple(grids), nb).astype(np.int64)


def block_size_for(granularity: str, shape, *, axis: int = 0, group_size: int | None = None) -> tuple[int, ...]:
    """block_size of the usual granularities: "per_tensor" (one block), "per_channel" (one block per index of
    ``axis``), "per_token" (one block per row of the last dim: all dims 1 but the last), "per_group" (``group_size``
    consecutive elements of the last dim)."""
    shape = check_shape(shape)
    g = granularity.lower().replace("-", "_")
    if g == "per_tensor":
        return shape
    if g == "per_channel":
        ax = axis % len(shape)
        return tuple(1 if d == ax else s for d, s in enumerate(shape))
    if g == "per_token":
        return tuple([1] * (len(shape) - 1) + [shape[-1]])
    if g in ("per_group", "group"):
        if group_size is None:
            raise ValueError("per_group needs group_size")
        return tuple([1] * (len(shape) - 1) + [int(group_size)])
    raise ValueError(f"unknown granularity {granularity!r}; expected per_tensor, per_channel, per_token or per_group")

# ---------------------------------------------------------------------------------------------------------------------
# The reference: torchao itself (``torchao.quantization.quant_primitives``), after the workbench's argument checks
# ---------------------------------------------------------------------------------------------------------------------

def _torchao():
    from ..quiet import torchao_quant_primitives
    return torchao_quant_primitives()


def torchao_quantize_affine(x, block_size, scale, zero_point, quant_min=None, quant_max=None,
                            output_dtype=torch.int8) -> torch.Tensor:
    """torchao's ``quantize_affine`` on the CPU, with the workbench's checks (clear errors) and defaults
    (``zero_point=None`` → 0; scale / zero point given per block in any shape with ``num_blocks`` elements)."""
    x = torch.as_tensor(x)
    shape = check_shape(x.shape)
    bs = check_block_size(shape, block_size)
    name, qmin, qmax = check_quant_range(output_dtype, quant_min, quant_max)
    scale, zp = check_qparams(shape, bs, scale, zero_point)
    nb = num_blocks(shape, bs)
    return _torchao().quantize_affine(x.detach().cpu(), list(bs), scale.reshape(nb), zp.reshape(nb),
                                      QUANT_DTYPES[name][0], qmin, qmax)


def torchao_dequantize_affine(q, block_size, scale, zero_point, quant_min=None, quant_max=None,
                              output_dtype=torch.float32) -> torch.Tensor:
    """torchao's ``dequantize_affine`` on the CPU, with the workbench's checks and defaults."""
    q = torch.as_tensor(q)
    shape = check_shape(q.shape)
    bs = check_block_size(shape, block_size)
    dtype_name(q.dtype, "quant")
    _, qmin, qmax = check_quant_range(q.dtype, quant_min, quant_max)
    out_name = dtype_name(output_dtype, "float")
    scale, zp = check_qparams(shape, bs, scale, zero_point)
    nb = num_blocks(shape, bs)
    return _torchao().dequantize_affine(q.detach().cpu(), list(bs), scale.reshape(nb), zp.reshape(nb), q.dtype,
                                        qmin, qmax, output_dtype=FLOAT_DTYPES[out_name][0])


# ---------------------------------------------------------------------------------------------------------------------
# Spec
# ---------------------------------------------------------------------------------------------------------------------

def _whcn(v4):
    return tuple(int(v) for v in reversed(v4))


@dataclass(frozen=True)
class AffineSpec(StorageDispatch):
    """One quantize or dequantize dispatch.  ``shape`` and ``block_size`` as torch gives them (1-4 dims)."""

    op: str                          # "quantize" | "dequantize"
    shape: tuple
    block_size: tuple
    storage: str = "buffer"          # "buffer" | "texture"
    packed_dim: str = "width"        # "width" | "height" | "channels"
    float_dtype: str = "float32"     # input of quantize / output of dequantize
    quant_dtype: str = "int8"        # output of quantize / input of dequantize
    quant_min: int | None = None
    quant_max: int | None = None
    sizes: tuple = field(init=False)  # NCHW, unsqueezed to 4-D

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"unknown op {self.op!r}; expected 'quantize' or 'dequantize'")
        if self.storage not in STORAGES:
            raise ValueError(f"unknown storage {self.storage!r}; expected 'buffer' or 'texture'")
        object.__setattr__(self, "shape", check_shape(self.shape))
        object.__setattr__(self, "block_size", check_block_size(self.shape, self.block_size))
        object.__setattr__(self, "packed_dim", L.packed_dim_name(self.packed_dim))
        object.__setattr__(self, "float_dtype", dtype_name(self.float_dtype, "float"))
        name, qmin, qmax = check_quant_range(self.quant_dtype, self.quant_min, self.quant_max)
        object.__setattr__(self, "quant_dtype", name)
        object.__setattr__(self, "quant_min", qmin)
        object.__setattr__(self, "quant_max", qmax)
        object.__setattr__(self, "sizes", L.normalize_sizes(self.shape))

    # -- geometry ---------------------------------------------------------------------------------------------------
    @property
    def block_size4(self) -> tuple[int, int, int, int]:
        return (1,) * (4 - len(self.shape)) + tuple(self.block_size)

    @property
    def num_blocks(self) -> tuple[int, ...]:
        return num_blocks(self.shape, self.block_size)

    @property
    def blocks(self) -> int:
        return int(np.prod(self.num_blocks))

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape))

    @property
    def layout(self) -> L.Layout:
        return L.get_layout(L.PACKED_DIMS[self.packed_dim], storage=self.storage)

    @property
    def half(self) -> bool:
        return self.float_dtype == "float16"

    @property
    def pack8(self) -> bool:
        """Buffers with an int8 / uint8 quantized tensor: packed 4 per int32 word."""
        return self.storage == "buffer" and self.quant_dtype in ("int8", "uint8")

    # -- what to build ----------------------------------------------------------------------------------------------
    @property
    def shader(self) -> str:
        return QUANTIZE_SHADER if self.op == "quantize" else DEQUANTIZE_SHADER

    @property
    def defines(self) -> dict:
        d = {"TEXTURE": self.storage == "texture", "HALF": self.half}
        if self.op == "quantize":
            d["PACK8"] = self.pack8
        else:
            d["IN_KIND"] = 0 if not self.pack8 else (2 if self.quant_dtype == "uint8" else 1)
        return d

    @property
    def variant(self) -> str:
        fl = "half" if self.half else "float"
        if self.storage == "texture":
            return f"{self.shader}_texture3d_{fl}"
        if self.op == "quantize":
            return f"{self.shader}_buffer_{fl}_{'int8x4' if self.pack8 else 'int32'}"
        kind = "int32" if not self.pack8 else ("uint8x4" if self.quant_dtype == "uint8" else "int8x4")
        return f"{self.shader}_buffer_{fl}_{kind}"

    def spec_constants(self) -> dict:
        return {3: self.layout.spec_constant()}

    def push_constants(self) -> bytes:
        bs = _whcn(self.block_size4)
        sz = _whcn(self.sizes)
        nb = tuple(s // b for s, b in zip(sz, bs))
        stride = (1, nb[0], nb[0] * nb[1], nb[0] * nb[1] * nb[2])
        return np.array([*bs, *nb, *stride, self.quant_min, self.quant_max], dtype=np.int32).tobytes()

    def metadata(self) -> bytes:
        return self.layout.metadata(self.sizes)

    @property
    def float_image_format(self) -> str:
        return "rgba16f" if self.half else "rgba32f"

    # -- dispatch ---------------------------------------------------------------------------------------------------
    @property
    def threads(self) -> int:
        if self.storage == "texture":
            return self.layout.num_texels(self.sizes)
        if self.op == "quantize" and self.pack8:
            return math.ceil(self.numel / 4)
        return self.numel

    @property
    def dispatch_sizes(self) -> tuple:
        return self.sizes

    # -- cost: bytes read + written once each ---------------------------------------------------------------------
    def float_nbytes(self) -> int:
        if self.storage == "texture":
            return self.layout.num_texels(self.sizes) * 4 * FLOAT_DTYPES[self.float_dtype][2]
        return self.numel * FLOAT_DTYPES[self.float_dtype][2]

    def quant_nbytes(self) -> int:
        if self.storage == "texture":
            return self.layout.num_texels(self.sizes) * 16
        return 4 * math.ceil(self.numel / 4) if self.pack8 else 4 * self.numel

    def param_nbytes(self) -> int:
        return 8 * self.blocks  # one fp32 scale (or inverse) + one int32 zero point per block

    def bytes_read(self) -> int:
        main = self.float_nbytes() if self.op == "quantize" else self.quant_nbytes()
        return main + self.param_nbytes()

    def bytes_written(self) -> int:
        return self.quant_nbytes() if self.op == "quantize" else self.float_nbytes()

    def bytes_moved(self) -> int:
        return self.bytes_read() + self.bytes_written()

    def describe(self) -> str:
        return (f"{self.variant} {self.layout.name}: shape {list(self.shape)} block {list(self.block_size)} "
                f"({self.blocks} blocks), [{self.quant_min}, {self.quant_max}], {self.threads} threads")


# ---------------------------------------------------------------------------------------------------------------------
# Runner
# ---------------------------------------------------------------------------------------------------------------------

def _pad_to(a: np.ndarray, multiple_bytes: int = 16) -> np.ndarray:
    n = a.nbytes
    target = max(multiple_bytes, -(-n // multiple_bytes) * multiple_bytes)
    if target == n:
        return np.ascontiguousarray(a)
    out = np.zeros(target // a.itemsize, dtype=a.dtype)
    out[: a.size] = a.reshape(-1)
    return out


class AffineRun(KernelRun):
    """A spec bound to device resources.  ``data``: the input (float tensor for quantize, quantized tensor of
    ``spec.quant_dtype`` for dequantize, of ``spec.shape``) or None for random content (benchmarks);
    ``scale`` / ``zero_point``: one per block (None: random / zeros).  ``record(rec)`` adds the dispatch,
    ``run()`` submits it once, ``output()`` downloads the result as a torch tensor of ``spec.shape``."""

    def __init__(self, device, spec: AffineSpec, data=None, scale=None, zero_point=None, seed: int = 0):
        super().__init__(device)
        self.spec = spec
        if spec.half and spec.storage == "buffer":
            device.require("storage_buffer_16bit")  # MissingFeatureError naming the feature and the device
        rng = np.random.default_rng(seed)
        if scale is None:
            scale = torch.from_numpy(rng.uniform(0.01, 0.1, spec.blocks).astype(np.float32))
        if data is None:
            if spec.op == "quantize":
                data = torch.from_numpy(rng.standard_normal(spec.shape, dtype=np.float32)).to(
                    FLOAT_DTYPES[spec.float_dtype][0])
            else:
                data = torch.from_numpy(rng.integers(spec.quant_min, spec.quant_max, spec.shape, endpoint=True)
                                        .astype(QUANT_DTYPES[spec.quant_dtype][1]))
        scale, zp = check_qparams(spec.shape, spec.block_size, scale, zero_point)
        params = inverse_scales(scale) if spec.op == "quantize" else scale
        try:
            self.params = self._own(device.buffer(_pad_to(params.numpy()), name="affine-scale"))
            self.zero_points = self._own(device.buffer(_pad_to(zp.numpy()), name="affine-zp"))
            self.meta = self._own(device.uniform(np.frombuffer(spec.metadata(), np.uint8), name="affine-meta"))
            self._make_io(data)
        except Exception:
            self.close()
            raise

    def _make_io(self, data):
        spec, dev, lay = self.spec, self.device, self.spec.layout
        a = data.detach().cpu().contiguous().numpy() if hasattr(data, "detach") else np.asarray(data)
        a = a.reshape(spec.sizes)
        if spec.storage == "texture":
            ext = lay.extents(spec.sizes)
            if spec.op == "quantize":
                self.inp = self._own(dev.image(ext, spec.float_image_format, name="affine-in"))
                self.inp.upload(lay.to_texels(a.astype(FLOAT_DTYPES[spec.float_dtype][1], copy=False)))
                self.out = self._own(dev.image(ext, "rgba32i", name="affine-out"))
            else:
                self.inp = self._own(dev.image(ext, "rgba32i", name="affine-in"))
                self.inp.upload(lay.to_texels(a.astype(np.int32)))
                self.out = self._own(dev.image(ext, spec.float_image_format, name="affine-out"))
            return
        if spec.op == "quantize":
            flat = lay.to_buffer(a.astype(FLOAT_DTYPES[spec.float_dtype][1], copy=False))
            self.inp = self._own(dev.buffer(_pad_to(flat), name="affine-in"))
            self.out = self._own(dev.buffer(nbytes=max(16, -(-spec.quant_nbytes() // 16) * 16), name="affine-out"))
        else:
            qnp = QUANT_DTYPES[spec.quant_dtype][1]
            flat = lay.to_buffer(a.astype(qnp, copy=False))
            if spec.pack8:
                flat = _pad_to(flat.view(np.uint8), 16).view(np.int32)  # 4 lanes per little-endian int32 word
            else:
                flat = _pad_to(flat.astype(np.int32))
            self.inp = self._own(dev.buffer(flat, name="affine-in"))
            nbytes = spec.numel * FLOAT_DTYPES[spec.float_dtype][2]
            self.out = self._own(dev.buffer(nbytes=max(16, -(-nbytes // 16) * 16), name="affine-out"))

    def record(self, rec, label: str | None = None):
        self._dispatch(rec, self.spec, [self.out, self.inp, self.params, self.zero_points, self.meta],
                       label or self.spec.variant)

    def output(self) -> torch.Tensor:
        spec, lay = self.spec, self.spec.layout
        if spec.storage == "texture":
            out = lay.from_texels(self.out.download(), spec.sizes)
            if spec.op == "quantize":
                out = out.astype(QUANT_DTYPES[spec.quant_dtype][1])
            else:
                out = out.astype(FLOAT_DTYPES[spec.float_dtype][1])
            return torch.from_numpy(np.ascontiguousarray(out)).reshape(spec.shape)
        if spec.op == "quantize":
            qnp = QUANT_DTYPES[spec.quant_dtype][1]
            if spec.pack8:
                flat = self.out.download(np.uint8)[: spec.numel].view(qnp)
            else:
                flat = self.out.download(np.int32)[: spec.numel].astype(qnp)
        else:
            flat = self.out.download(FLOAT_DTYPES[spec.float_dtype][1])[: spec.numel]
        out = lay.from_buffer(np.ascontiguousarray(flat), spec.sizes)
        return torch.from_numpy(np.ascontiguousarray(out)).reshape(spec.shape)

# ---------------------------------------------------------------------------------------------------------------------
# The reference's test cases (§4.3)
# ---------------------------------------------------------------------------------------------------------------------

def reference_cases() -> list[dict]:
    """ET-VK's four ``quantize_affine_test.cpp`` cases: shape, block_size, scales, zero points (qmin −128, qmax 127).

    1-D and 2-D scales / zps are the listed ones.  The 3-D scales are given in §4.3 only as "{0.1, …, 0.28}" (12
    values): the workbench uses the 2-D list extended by 0.12, 0.18, 0.22, 0.28 (ends on 0.28 as listed); its zps
    are the listed ones.  The 4-D case's 48 scales / zps are "listed inline" but not reproduced in §4.3, so they
    are generated deterministically: ``scale[i] = 0.05 + 0.01·((7·i) % 31)``, ``zp[i] = ((13·i) % 41) − 20``.
    """
    i48 = np.arange(48)
    return [
        dict(name="1D", shape=(12,), block_size=(3,), scale=[0.1, 0.2, 0.15, 0.25], zero_point=[10, -20, 5, 30]),
        dict(name="2D", shape=(8, 6), block_size=(2, 3),
             scale=[0.1, 0.2, 0.15, 0.25, 0.3, 0.05, 0.4, 0.35], zero_point=[-10, 15, 0, 25, -5, 20, 10, -15]),
        dict(name="3D", shape=(6, 4, 6), block_size=(3, 2, 2),
             scale=[0.1, 0.2, 0.15, 0.25, 0.3, 0.05, 0.4, 0.35, 0.12, 0.18, 0.22, 0.28],
             zero_point=[-15, 10, 5, -25, 20, -10, 15, -5, 8, -12, 18, -8]),
        dict(name="4D", shape=(8, 6, 6, 6), block_size=(2, 3, 2, 3),
             scale=list(np.round(0.05 + 0.01 * ((7 * i48) % 31), 6)), zero_point=list(((13 * i48) % 41) - 20)),
    ]


# ---------------------------------------------------------------------------------------------------------------------
# Choosing parameters and measuring the error (the notebook's study)
# ---------------------------------------------------------------------------------------------------------------------

def choose_qparams(x, block_size, quant_min=-128, quant_max=127, symmetric: bool = False,
                   output_dtype=torch.int8):
    """torchao's ``choose_qparams_affine`` (min/max per block; ``MappingType.SYMMETRIC`` or ``ASYMMETRIC``).
    Returns (scale, zero_point) shaped ``num_blocks``."""
    qp = _torchao()
    x = torch.as_tensor(x).to(torch.float32)
    shape = check_shape(x.shape)
    bs = check_block_size(shape, block_size)
    mapping = qp.MappingType.SYMMETRIC if symmetric else qp.MappingType.ASYMMETRIC
    scale, zp = qp.choose_qparams_affine(x, mapping, list(bs), output_dtype, quant_min, quant_max,
                                         eps=SCALE_MIN, zero_point_dtype=torch.int32)
    nb = num_blocks(shape, bs)
    return scale.reshape(nb), zp.reshape(nb)


def quantization_error(x, block_size, quant_min=-128, quant_max=127, output_dtype=torch.int8,
                       symmetric: bool = False) -> dict:
    """Quantize → dequantize ``x`` with per-block min/max parameters (torchao, parameters from ``choose_qparams_affine``): overall and per-block error.

    Returns a dict: ``blocks``, ``params`` (scale + zero point per block), ``rmse``, ``max_abs``, ``sqnr_db``
    (10·log10(Σx² / Σerr²)), ``block_rmse`` (array shaped ``num_blocks``), ``scale``, ``zero_point``."""
    x = torch.as_tensor(x).to(torch.float32)
    bs = check_block_size(x.shape, block_size)
    scale, zp = choose_qparams(x, bs, quant_min, quant_max, symmetric, output_dtype)
    q = torchao_quantize_affine(x, bs, scale, zp, quant_min, quant_max, output_dtype)
    err = torchao_dequantize_affine(q, bs, scale, zp) - x
    pairs, _ = _pairs(x.shape, bs)
    red = tuple(range(1, 2 * x.dim(), 2))
    block_rmse = err.reshape(pairs).pow(2).mean(dim=red).sqrt()
    signal, noise = float(x.pow(2).sum()), float(err.pow(2).sum())
    return {"blocks": int(scale.numel()), "params": 2 * int(scale.numel()),
            "rmse": float(err.pow(2).mean().sqrt()), "max_abs": float(err.abs().max()),
            "sqnr_db": 10 * np.log10(signal / noise) if noise > 0 else np.inf,
            "block_rmse": block_rmse.numpy(), "scale": scale, "zero_point": zp}
