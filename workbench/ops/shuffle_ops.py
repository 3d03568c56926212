"""torch-facing pixel shuffle ops on the workbench's Vulkan device.

    from workbench import ops
    y = ops.pixel_shuffle(x, 2)                                   # float32 / float16, buffer, channels-packed
    y = ops.pixel_shuffle(x, 3, storage="texture", layout="width")
    q_out = ops.q8ta_pixel_shuffle(q, 2, 0.007, 0, 0.013, 5)       # int8 NCHW in → int8 NCHW out (fused kernel)
    q_out = ops.q8ta_pixel_shuffle(q, 2, 0.007, 0, 0.013, 5, fused=False)   # the dequantize → ps → quantize chain

Inputs are CPU torch tensors, 3-D (C, H, W) or 4-D (N, C, H, W); outputs are CPU torch tensors of the same rank,
NCHW.  The kernels are in :mod:`workbench.kernels.pixel_shuffle`.
"""
from __future__ import annotations

import torch

from ..kernels import pixel_shuffle as K
from ..kernels import pixel_shuffle_block as B
from ..kernels import q8ta_quantize as Q

__all__ = ["pixel_shuffle", "q8ta_pixel_shuffle"]

_FLOAT_DTYPES = {torch.float32: "float32", torch.float16: "float16"}


def _check_tensor(x, op: str):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{op} expects a torch tensor, got {type(x).__name__}")
    if x.dim() not in (3, 4):
        raise ValueError(f"{op} expects a 3-D (C, H, W) or 4-D (N, C, H, W) tensor, got {x.dim()}-D shape "
                         f"{tuple(x.shape)}")
    if x.numel() == 0:
        raise ValueError(f"{op} got an empty tensor of shape {tuple(x.shape)}")


def _restore_rank(y: torch.Tensor, ndim: int) -> torch.Tensor:
    return y[0] if ndim == 3 else y


def pixel_shuffle(x: torch.Tensor, upscale_factor: int, storage: str = "buffer", layout: str = "channels",
                  device=None) -> torch.Tensor:
    """``torch.nn.functional.pixel_shuffle`` on the Vulkan device: ``(N, C·r², H, W) → (N, C, H·r, W·r)``.

    ``storage``: "buffer" (one thread per output element) or "texture" (3-D image, one thread per output texel);
    ``layout``: the packed dim, "channels", "width" or "height".  float32 or float16 (fp16 buffers need the device's
    ``storage_buffer_16bit`` feature: MissingFeatureError otherwise; fp16 textures are rgba16f images).
    Exact: the result equals torch's bit for bit.
    """
    _check_tensor(x, "pixel_shuffle")
    if x.dtype not in _FLOAT_DTYPES:
        hint = " (use q8ta_pixel_shuffle for int8)" if x.dtype == torch.int8 else ""
        raise TypeError(f"pixel_shuffle expects a float32 or float16 tensor, got {x.dtype}{hint}")
    if storage not in K.STORAGES:
        raise ValueError(f"unknown storage {storage!r}; expected 'buffer' or 'texture'")
    spec = K.PixelShuffleSpec(tuple(x.shape), upscale_factor, storage, layout, _FLOAT_DTYPES[x.dtype])
    if device is None:
        from .. import vk
        device = vk.get_device()
    with K.PixelShuffleRun(device, spec, x) as run:
        run.run()
        y = run.output()
    return _restore_rank(y, x.dim())


def q8ta_pixel_shuffle(q: torch.Tensor, upscale_factor: int, in_scale: float, in_zero_point: int,
                       out_scale: float, out_zero_point: int, in_layout: str = "4W4C", out_layout: str = "4W4C",
                       fused: bool = True, device=None, specialize_r: bool = False,
                       output_order: bool = False, block: bool | None = None) -> torch.Tensor:
    """Quantized pixel shuffle of an int8 NCHW tensor, like ``quantize(pixel_shuffle(dequantize(q)))``.

    ``fused=True``: ET-VK's fused int8x4 kernel (one dispatch; a pure byte shuffle when the qparams agree within
    ET-VK's tolerance, else requantize in fp32).  ``fused=False``: the decomposed chain q8ta_dequantize → float
    pixel shuffle → q8ta_quantize (three dispatches, fp32 intermediates).  Both compute the same fp32 operations, so
    they agree exactly; against torch's ``quantize_per_tensor`` they agree within 1 LSB (torch rounds
    ``x·inv_scale + zp`` in one fma).  ``in_layout`` / ``out_layout``: channels-packed int8 layouts (4W4C, 4C1W,
    4C), chosen independently.  Fused-kernel variants: ``specialize_r`` (r a specialization constant; ET-VK passes
    a push constant), ``output_order`` (thread t writes output word t; ET-VK orders threads W_out fastest),
    ``block`` (the 16-byte block transpose, ``kernels.pixel_shuffle_block``: any channels-packed pair, r = 2 only; None
    picks it where it applies, no other variant was asked for and it has at least ``BLOCK_MIN_THREADS`` threads: on an
    H200 it was slower below that). Returns an int8 tensor of the input's rank.
    """
    _check_tensor(q, "q8ta_pixel_shuffle")
    if q.dtype != torch.int8:
        raise TypeError(f"q8ta_pixel_shuffle expects an int8 tensor (torch.int8), got {q.dtype}")
    if block is None:  # the block kernel runs 4× fewer, 4× fatter threads: it wins once they fill a GPU
        block = (not specialize_r and not output_order and isinstance(upscale_factor, int)
                 and B.block_applies(in_layout, out_layout, upscale_factor)
                 and B.Q8taPixelShuffleBlockSpec(tuple(q.shape), 2).threads >= B.BLOCK_MIN_THREADS)
    variant = {} if block else dict(specialize_r=specialize_r, output_order=output_order)
    if block and (specialize_r or output_order):
        raise ValueError("the block kernel has no _rspec / _outorder variants")
    spec = B.fused_spec(tuple(q.shape), upscale_factor, in_layout, out_layout, in_scale, in_zero_point,
                        out_scale, out_zero_point, block=block, **variant)
    if device is None:
        from .. import vk
        device = vk.get_device()
    if fused:
        run = K.Q8taPixelShuffleRun(device, spec, q)
    else:
        run = Q.Q8taChainRun(device, Q.Q8taPixelShuffleChainSpec(spec), q)
    with run:
        run.run()
        y = run.output()
    return _restore_rank(y, q.dim())
