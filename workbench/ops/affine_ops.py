"""torch-facing block-wise affine quantize / dequantize (torchao's ``quantize_affine`` / ``dequantize_affine``).

    from workbench import ops
    q = ops.quantize_affine(x, [1, 32], scale, zp, -128, 127, torch.int8)                 # buffer, contiguous
    q = ops.quantize_affine(x, [1, 1, 4, 4], scale, zp, 0, 255, torch.uint8, storage="texture", layout="channels")
    x2 = ops.dequantize_affine(q, [1, 32], scale, zp, -128, 127)                            # fp32 out

CPU torch tensors of 1 to 4 dims in and out.  ``scale`` / ``zero_point`` hold one value per block (torchao's shape
``[size/block per dim]`` or flat; W fastest); ``zero_point=None`` means zeros.  ``quant_min`` / ``quant_max`` None
→ the output dtype's range.  Only ``zero_point_domain="INT"`` is implemented.  Results equal
:func:`workbench.kernels.quantize_affine.torchao_quantize_affine` bit for bit (see that module for the fp32
operation order, rounding and the device representations).
"""
from __future__ import annotations

import torch

from ..kernels import quantize_affine as K

__all__ = ["quantize_affine", "dequantize_affine"]


def _check_tensor(x, op: str):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{op} expects a torch tensor, got {type(x).__name__}")
    K.check_shape(x.shape)


def _device(device):
    if device is None:
        from .. import vk
        device = vk.get_device()
    return device


def quantize_affine(x: torch.Tensor, block_size, scale, zero_point, quant_min=None, quant_max=None,
                    output_dtype=torch.int8, storage: str = "buffer", layout: str = "width", device=None,
                    zero_point_domain: str = "INT") -> torch.Tensor:
    """``clamp(round(x / max(scale, 1e-7)) + zero_point, quant_min, quant_max)`` per block, on the Vulkan device.

    ``x``: float32 or float16 (fp16 buffers need ``storage_buffer_16bit``: MissingFeatureError otherwise).
    ``output_dtype``: torch.int8, torch.uint8 or torch.int32.  ``storage``: "buffer" (int8 / uint8 packed 4 per
    int32 word on the device, int32 one per word) or "texture" (3-D images; the result is an rgba32i image).
    ``layout``: the packed dim of the float tensor, "width" (contiguous buffer), "height" or "channels"
    (channels-last buffer).  Returns a CPU tensor of ``output_dtype`` and ``x``'s shape.
    """
    K.check_zero_point_domain(zero_point_domain)
    _check_tensor(x, "quantize_affine")
    if x.dtype not in (torch.float32, torch.float16):
        raise TypeError(f"quantize_affine expects a float32 or float16 input, got {x.dtype}")
    spec = K.AffineSpec("quantize", tuple(x.shape), block_size, storage, layout, K.dtype_name(x.dtype, "float"),
                        output_dtype, quant_min, quant_max)
    with K.AffineRun(_device(device), spec, x, scale, zero_point) as run:
        run.run()
        return run.output()


def dequantize_affine(q: torch.Tensor, block_size, scale, zero_point, quant_min=None, quant_max=None,
                      output_dtype=torch.float32, storage: str = "buffer", layout: str = "width", device=None,
                      zero_point_domain: str = "INT") -> torch.Tensor:
    """``float(q − zero_point) · scale`` per block, on the Vulkan device.

    ``q``: int8, uint8 or int32 (its dtype is the quantized dtype; ``quant_min`` / ``quant_max`` are checked against
    it, as torchao does, but the input is not clamped).  ``output_dtype``: torch.float32 or torch.float16 (computed
    in fp32, rounded once to nearest-even fp16).  ``storage`` / ``layout`` as :func:`quantize_affine`.
    """
    K.check_zero_point_domain(zero_point_domain)
    _check_tensor(q, "dequantize_affine")
    qname = K.dtype_name(q.dtype, "quant")
    spec = K.AffineSpec("dequantize", tuple(q.shape), block_size, storage, layout,
                        K.dtype_name(output_dtype, "float"), qname, quant_min, quant_max)
    with K.AffineRun(_device(device), spec, q, scale, zero_point) as run:
        run.run()
        return run.output()
