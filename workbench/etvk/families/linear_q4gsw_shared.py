"""What ET-VK's 4-bit group-symmetric weight-only linears share (``linear_q4gsw_4x8``: Q4gswLinear.cpp's GEMM, fp16
GEMM and cooperative GEMV; ``linear_q4gsw_qw``: QuantizedLinear.cpp's ``linear_q4gsw_tiled`` / ``_coop``;
``linear_q4gsw_dq8ca``): the input and group-size checks, the weight quantized as ET-VK's export quantizes it, the
torch reference and its tolerance, and the activation / output resources.

Quantization: ET-VK's LLM path (examples/models/llama/source_transformation/quantize.py, ``qmode == "4w"``) uses
torchao's ``IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(group_size))``, whose mapping is
symmetric; ET-VK's pattern (patterns/quantized_linear.py ``make_linear_q4gsw_op``) keeps the int4 values and the
scales only (zero points 0, as custom_ops_lib.py's ``linear_q4gsw`` dequantizes them), packs two values per byte as
``value + 8`` (``pack_4bit_weight_tensor``) and transposes the scales to ``[groups, N]``. The workbench makes a
random float weight and quantizes it with torchao's ``choose_qparams_affine`` / ``quantize_affine`` (symmetric,
block ``(1, group_size)``, int4 range -8..7).

Reference: float64 ``x @ dequantize_affine(w4, scales).T + bias`` with the scales (and, for ``dtype="half"``, the
input and bias) as the shader reads them — rounded to the IO dtype, as ET-VK's prepack stores them. The shaders
accumulate in fp32 (fp16 where the IO dtype is half and the template's vec4 type is f16vec4) in their own order;
the tolerance is the worst-case bound of any summation order, ``(K + 2) · u · max(|x| @ |w|.T + |bias|)`` with u the
accumulator's unit roundoff, plus half an output ulp for half outputs (``Dispatch.atol``).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..dispatch import Resource
from ...kernels.q4_gemv import dequantize_int4, quantize_int4

DTYPES = {"float": (torch.float32, np.float32, "rgba32f"), "half": (torch.float16, np.float16, "rgba16f")}
STORAGES = ("buffer", "texture3d")


def parse_input(op: str, shape) -> tuple:
    """(sizes, M, K, leading dims, batch) of a linear's input ``[..., M, K]`` (1 to 4 dims; a single size is
    ``[1, K]``)."""
    sizes = tuple(int(s) for s in (shape if hasattr(shape, "__len__") else (shape,)))
    if not 1 <= len(sizes) <= 4 or min(sizes) < 1:
        raise ValueError(f"{op}: the input is [..., M, K] with every size >= 1 (at most 4 dims), given {sizes}")
    if len(sizes) == 1:
        sizes = (1,) + sizes
    return sizes, sizes[-2], sizes[-1], sizes[:-2], math.prod(sizes[:-2])


def check_group(op: str, k: int, group_size: int, n: int) -> None:
    """ET-VK's preconditions on K and the group size every q4gsw path shares, each refused in one line naming the
    check it comes from."""
    if n < 1:
        raise ValueError(f"{op}: out_features must be >= 1, given {n}")
    if group_size < 1 or group_size % 4:
        raise ValueError(f"{op}: group_size must be a positive multiple of 4 (the shaders walk K in blocks of 4 and "
                         f"take K4_per_group = group_size / 4: add_linear_qw_node in QuantizedLinear.cpp, "
                         f"'blocks_per_group = group_size / 4' in q4gsw_linear_gemv_coop__w_4x8.glsl); given "
                         f"{group_size}")
    if k % group_size:
        raise ValueError(f"{op}: K={k} is not a multiple of group_size={group_size} (ET-VK's export takes group_size "
                         f"= in_channels // num_groups in make_linear_q4gsw_op, patterns/quantized_linear.py; the "
                         f"shaders loop num_groups = K4 / K4_per_group whole groups)")
    if k % 8:
        raise ValueError(f"{op}: K={k} is not a multiple of 8 (VK_CHECK_COND(K % 8 == 0) for 4-bit weights in "
                         f"prepack_quantized_linear_weight, QuantizedLinear.cpp; the export pads the packed rows to "
                         f"8 values, pack_4bit_weight_tensor)")


def check_choice(op: str, what: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{op}: {what} is one of {', '.join(map(repr, allowed))} (the template's variants), "
                         f"given {value!r}")


def quantize_weight(n: int, k: int, group_size: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(int4 values [N, K] as int8 in -8..7, fp32 scales [N, K / group_size]): a random float weight quantized as
    torchao's IntxWeightOnlyConfig(int4, PerGroup) does (`kernels.q4_gemv.quantize_int4`)."""
    return quantize_int4(torch.randn((n, k), generator=g) * 0.05, group_size)


def dequantized(w4: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
    """torchao's dequantize_affine of the int4 weight in fp32 — the shaders' ``w · scale`` in fp32 too — as float64
    (`kernels.q4_gemv.dequantize_int4`)."""
    return dequantize_int4(w4, scales, group_size)


class Operands:
    """A q4gsw linear's data: input ``x`` [..., M, K] and bias in the IO dtype, the int4 weight, scales
    ``[groups, N]`` in the IO dtype (as ET-VK prepacks them), the float64 reference and its tolerance."""

    def __init__(self, op: str, sizes, n: int, group_size: int, dtype: str, bias: bool, seed: int,
                 half_accumulate: bool):
        torch_dtype = DTYPES[dtype][0]
        g = torch.Generator().manual_seed(seed)
        k = sizes[-1]
        self.n, self.k, self.group_size, self.groups = n, k, group_size, k // group_size
        self.w4, scales = quantize_weight(n, k, group_size, g)
        self.scales = scales.T.contiguous().to(torch_dtype)  # [groups, N], ET-VK's layout and dtype
        self.x = torch.randn(sizes, generator=g).to(torch_dtype)
        self.bias = (torch.randn(n, generator=g) * 0.5).to(torch_dtype) if bias else None
        w = dequantized(self.w4, self.scales.T.contiguous(), group_size)
        x64 = self.x.double()
        ref = x64 @ w.T
        magnitude = x64.abs() @ w.abs().T
        if self.bias is not None:
            ref, magnitude = ref + self.bias.double(), magnitude + self.bias.double().abs()
        self.expected = ref.to(torch.float32 if dtype == "float" else torch.float16)
        self.reference = ref
        unit = 2.0 ** -11 if half_accumulate else 2.0 ** -24
        bound = (k + 2) * unit * float(magnitude.max()) if magnitude.numel() else 0.0
        if dtype == "half":
            peak = float(ref.abs().max()) if ref.numel() else 0.0
            bound += float(np.spacing(np.float16(peak)))  # the final rounding to half
        self.atol = bound


def padded_rows(x: torch.Tensor, rows: int, np_dtype) -> np.ndarray:
    """`x` [M, K] (the last two dims) flattened, with zero rows to `rows`: the shaders read whole 4-row tiles of a
    buffer input without a bound check (``load_input_tile_no_checks``), past M when M % 4 != 0 — undefined without
    robust buffer access, so the workbench gives them room."""
    m, k = x.shape[-2:]
    out = np.zeros((rows, k), dtype=np_dtype)
    out[:m] = x.reshape(-1, k)[:m].numpy().astype(np_dtype)
    return out.reshape(-1)


def io_input(name: str, x: torch.Tensor, storage: str, dtype: str, rows: int | None = None) -> Resource:
    """The fp input as ET-VK holds it: a contiguous buffer (zero rows to `rows`), or a width-packed texture3d of
    ``K4 × M × batch`` texels."""
    np_dtype, fmt = DTYPES[dtype][1], DTYPES[dtype][2]
    *lead, m, k = x.shape
    batch = math.prod(lead)
    if storage == "buffer":
        flat = x.reshape(batch * m, k)
        return Resource("buffer", padded_rows(flat, max(rows or 0, batch * m), np_dtype), name=name)
    return Resource("image", x.reshape(batch, m, k // 4, 4).numpy().astype(np_dtype), extent=(k // 4, m, batch),
                    fmt=fmt, name=name)


def io_output(name: str, out_sizes, storage: str, dtype: str, slack: int = 0):
    """(the output resource, its decoder): a contiguous buffer of ``batch · M · N`` elements (`slack` bytes of room
    past it), or a width-packed texture3d of ``N4 × M × batch`` texels."""
    np_dtype, fmt = DTYPES[dtype][1], DTYPES[dtype][2]
    *lead, m, n = out_sizes
    batch, n4 = math.prod(lead), math.ceil(n / 4)
    count = batch * m * n
    if storage == "buffer":
        return (Resource("buffer", nbytes=count * np.dtype(np_dtype).itemsize + slack, name=name),
                lambda raw: torch.from_numpy(raw.view(np_dtype)[:count].copy()).reshape(out_sizes))
    return (Resource("image", extent=(n4, m, batch), fmt=fmt, name=name),
            lambda tex: torch.from_numpy(np.asarray(tex).astype(np_dtype).reshape(batch, m, 4 * n4)[..., :n]
                                         .copy()).reshape(out_sizes))


def vector_buffer(name: str, values, np_dtype, length: int) -> Resource:
    """A per-channel buffer (bias, scales) of `values` flattened, zeros to `length` entries: the shaders read whole
    vec4 / vec2 blocks past the last channel (the OOB reads each family's docstring names)."""
    out = np.zeros(max(length, 4), dtype=np_dtype)
    if values is not None:
        v = np.asarray(values.numpy() if isinstance(values, torch.Tensor) else values).astype(np_dtype).reshape(-1)
        out[:v.size] = v
    return Resource("buffer", out, name=name)


def declared_slots(gen, variant: str, count: int) -> tuple:
    """The indices among the first `count` resources (ET-VK's binding order) that the compiled module declares:
    glslc -O drops the bindings a shader never reads (the shared 6-binding layout's unused slots)."""
    if gen is None:
        return tuple(range(count))
    from ...vk.spirv import reflect
    slots = {b.binding for b in reflect(bytes(gen.compile(variant).code)).bindings}
    return tuple(i for i in range(count) if i in slots)


def row_params(sizes, n: int, ops: Operands, dtype: str, storage: str, **more) -> dict:
    return {"shape": "x".join(map(str, sizes)) + f"->{n}", "group_size": ops.group_size, "dtype": dtype,
            "storage": storage, "bias": ops.bias is not None, "tolerance": ops.atol, **more}
