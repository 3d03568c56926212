"""``q8ta_add``: quantized add of two int8x4 tensors in one layout (ET-VK's ``et_vk.q8ta_add``, which the real
partitioner produces for a residual add; see ``workbench.etvk.model.lowering``).

    spec = Q8taAddSpec(sizes, "4W4C", a_qparams=(sa, za), b_qparams=(sb, zb), out_qparams=(so, zo))
    out = q8ta_add(a_int8, b_int8, ...)           # NCHW torch int8 in / out, on the current device

Word-wise (all three tensors share the layout), bit-exact with torch:
``torch.quantize_per_tensor(a.dequantize() + b.dequantize(), so, zo, torch.qint8)`` — the shader keeps torch's fp32
order (``precise``; see ``workbench.quant`` for why the fused multiply-add matters).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import layouts as L
from ..quant import inverse_scale
from . import linear_global_size, pipeline_for

SHADER = "q8ta_add"
LOCAL_SIZE = (64, 1, 1)


@dataclass(frozen=True)
class Q8taAddSpec:
    sizes: tuple
    layout: str = "4W4C"
    a_qparams: tuple = (1.0, 0)
    b_qparams: tuple = (1.0, 0)
    out_qparams: tuple = (1.0, 0)

    shader = SHADER
    local_size = LOCAL_SIZE

    def __post_init__(self):
        object.__setattr__(self, "sizes", L.normalize_sizes(self.sizes))
        if not L.get_layout(self.layout).is_int8:
            raise ValueError(f"q8ta_add works on an int8x4 layout (4W4C, 4H4W, 4W, 4C, 4C1W), got {self.layout}")
        for name, (s, z) in (("a", self.a_qparams), ("b", self.b_qparams), ("out", self.out_qparams)):
            if not (s > 0 and math.isfinite(s)) or not -128 <= int(z) <= 127:
                raise ValueError(f"q8ta_add: {name} needs scale > 0 and zero point in [-128, 127], got {(s, z)}")

    @property
    def threads(self) -> int:
        return L.get_layout(self.layout).num_words(self.sizes)

    def push_constants(self) -> bytes:
        (sa, za), (sb, zb), (so, zo) = self.a_qparams, self.b_qparams, self.out_qparams
        return b"".join([np.float32(sa).tobytes(), np.int32(za).tobytes(), np.float32(sb).tobytes(),
                         np.int32(zb).tobytes(), inverse_scale(so).tobytes(), np.int32(zo).tobytes(),
                         np.int32(self.threads).tobytes()])

    def global_size(self, device):
        return linear_global_size(device, self.threads, LOCAL_SIZE[0])

    def bytes_moved(self) -> int:
        return 3 * 4 * self.threads


def q8ta_add(a, b, a_qparams, b_qparams, out_qparams, layout: str = "4W4C", device=None):
    """NCHW int8 ``a`` + ``b`` (torch) → NCHW int8, on the device (``layout`` is how they live there)."""
    import torch

    from .. import vk
    if tuple(a.shape) != tuple(b.shape) or a.dtype != torch.int8 or b.dtype != torch.int8:
        raise ValueError(f"q8ta_add needs two int8 tensors of one shape, got {a.dtype}{tuple(a.shape)} and "
                         f"{b.dtype}{tuple(b.shape)}")
    device = device or vk.get_device()
    spec = Q8taAddSpec(tuple(a.shape), layout, a_qparams, b_qparams, out_qparams)
    lay = L.get_layout(layout)
    pipe = pipeline_for(device, SHADER, local_size=LOCAL_SIZE)
    with device.buffer(lay.pack(a.contiguous())) as ba, device.buffer(lay.pack(b.contiguous())) as bb, \
            device.buffer(nbytes=4 * spec.threads) as out:
        device.run(pipe, [out, ba, bb], spec.global_size(device), push_constants=spec.push_constants())
        words = out.download(np.int32)
    return lay.unpack(torch.from_numpy(words), a.shape)
