"""torch-facing pointwise int8 convolution: `q8ta_conv2d_pw` on the workbench device, its accumulators, and the
torch reference.

    out = q8ta_conv2d_pw(q_input, 0.008, 2, weight_int8, weight_scales, bias, 0.05, -1, relu=True, tile_n4=2)
    acc = q8ta_conv2d_pw_accumulators(q_input, weight_int8, tile_m=2)          # exact int32, from the GPU
    ref = reference_q8ta_conv2d_pw(q_input, 0.008, 2, weight_int8, weight_scales, bias, 0.05, -1, relu=True)

Inputs are CPU tensors (torch or numpy): `q_input` int8 NCHW (already quantized: see workbench.quant),
`weight_int8` int8 (Cout, Cin) or (Cout, Cin, 1, 1), symmetric per output channel with `weight_scales` (Cout),
`bias` fp32 (Cout) or None. Outputs are CPU torch tensors in NCHW. The kernel, the weight prepack and the exact
fp32 order of the requantization are described in workbench/kernels/conv_pw.py.
"""
from __future__ import annotations

import numpy as np

from ..kernels import conv_pw as K

__all__ = ["q8ta_conv2d_pw", "q8ta_conv2d_pw_accumulators", "reference_q8ta_conv2d_pw",
           "reference_q8ta_conv2d_pw_accumulators"]


def _device(device):
    if device is None:
        from .. import vk
        return vk.get_device()
    return device


def _input(q_input) -> np.ndarray:
    x = K._as_numpy(q_input)
    if x.dtype != np.int8:
        raise TypeError(f"q_input must be int8 (quantize first: workbench.quant.quantize_per_tensor), "
                        f"got dtype {x.dtype}")
    if x.ndim != 4:
        raise ValueError(f"q_input must be 4-D NCHW, got shape {tuple(x.shape)}")
    return np.ascontiguousarray(x)


def _use_dot_ext(device, use_dot_ext):
    if use_dot_ext is None:
        return bool(device.info.features.get("integer_dot_product"))
    return bool(use_dot_ext)


def _run(device, spec, x, packed, qparams):
    with K.ConvPwBuffers(device, spec, x, packed) as bufs:
        return bufs.run(spec, qparams)


def q8ta_conv2d_pw(q_input, input_scale, input_zero_point, weight_int8, weight_scales, bias, output_scale,
                   output_zero_point, relu=False, tile_m=1, tile_n4=1, tile_k4=1, out_layout="4W4C",
                   use_dot_ext=None, device=None, *, in_layout="4W4C", saturate=True):
    """Pointwise int8 conv on the device → int8 NCHW CPU torch tensor (N, Cout, H, W).

    `tile_*` ∈ {1, 2, 4} pick the compiled variant; `out_layout` ∈ {4W4C, 4C1W, 4C} the output's device layout
    (the result is unpacked back to NCHW); `use_dot_ext=None` uses the packed dot product when the device has
    shaderIntegerDotProduct. The input is packed to 4W4C (the only input layout the kernel reads; any other
    `in_layout` is an error). `saturate=False` accumulates with OpSDot + add instead of ET-VK's OpSDotAccSat
    (the same result for Cin <= 131072; faster where the saturating form is emulated, as on NVIDIA)."""
    import torch
    K.check_tile(tile_m, tile_n4, tile_k4)
    x = _input(q_input)
    w = K.check_weight(weight_int8, x.shape[1])
    qparams = K.QParams(input_scale, input_zero_point, output_scale, output_zero_point)
    dev = _device(device)
    shape = K.ConvPwShape(x.shape[0], x.shape[1], w.shape[0], x.shape[2], x.shape[3])
    spec = K.ConvPwSpec(shape, tile_m, tile_n4, tile_k4, out_layout=out_layout, in_layout=in_layout, saturate=saturate,
                        use_dot_ext=_use_dot_ext(dev, use_dot_ext), relu=bool(relu), apply_bias=bias is not None)
    packed = K.prepack_weights(w, weight_scales, bias)
    return torch.from_numpy(_run(dev, spec, x, packed, qparams))


def q8ta_conv2d_pw_accumulators(q_input, weight_int8, tile_m=1, tile_n4=1, tile_k4=1, use_dot_ext=None,
                                device=None, saturate=True):
    """The raw int32 accumulators Σ_ic q_in·w of the same kernel (its WRITE_ACCUMULATORS debug build) → int32
    NCHW CPU torch tensor; must equal `reference_q8ta_conv2d_pw_accumulators` exactly."""
    import torch
    K.check_tile(tile_m, tile_n4, tile_k4)
    x = _input(q_input)
    w = K.check_weight(weight_int8, x.shape[1])
    dev = _device(device)
    shape = K.ConvPwShape(x.shape[0], x.shape[1], w.shape[0], x.shape[2], x.shape[3])
    spec = K.ConvPwSpec(shape, tile_m, tile_n4, tile_k4, use_dot_ext=_use_dot_ext(dev, use_dot_ext),
                        accumulators=True, saturate=saturate)
    packed = K.prepack_weights(w)
    qparams = K.QParams(1.0, 0, 1.0, 0)  # unused by the accumulator build
    return torch.from_numpy(_run(dev, spec, x, packed, qparams))


def reference_q8ta_conv2d_pw(q_input, input_scale, input_zero_point, weight_int8, weight_scales, bias,
                             output_scale, output_zero_point, relu=False, return_accumulators=False):
    """torch reference: exact int32 accumulators, then the kernel's fp32 requantization, same order and
    roundings. Returns int8 NCHW (and the int32 accumulators when asked)."""
    x = _input(q_input)
    w = K.check_weight(weight_int8, x.shape[1])
    qparams = K.QParams(input_scale, input_zero_point, output_scale, output_zero_point)
    return K.reference(x, w, weight_scales, bias, qparams, bool(relu), return_accumulators)


def reference_q8ta_conv2d_pw_accumulators(q_input, weight_int8):
    """Exact int32 accumulators in torch (int64 einsum, checked to fit int32)."""
    x = _input(q_input)
    return K.reference_accumulators(x, K.check_weight(weight_int8, x.shape[1]))
