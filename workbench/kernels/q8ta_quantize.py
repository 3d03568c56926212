"""ET-VK's q8ta quantize and dequantize kernels (fp32 buffer ↔ int8x4, any layout of each), and the chain the fused
pixel shuffle replaces: dequantize → float pixel shuffle → quantize, three dispatches with fp32 buffers between."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import layouts as L
from ..quant import inverse_scale
from . import KernelRun, linear_global_size
from .pixel_shuffle import (LOCAL_SIZE, PixelShuffleSpec, Q8taPixelShuffleSpec, check_qparams, packed_input,
                            pixel_shuffle_reference, to_torch, touched_words)

QUANTIZE_SHADER = "q8ta_quantize"
DEQUANTIZE_SHADER = "q8ta_dequantize"


@dataclass(frozen=True)
class _Q8taConvertSpec:
    """What the quantize and dequantize specs share: their fields (each sets its layouts' defaults), the checks of
    the int8x4 side (`reads_int8`: the input) and the float buffer side, one dispatch of ET-VK's {64, 1, 1} work
    groups, no defines, the (output, input) BufferMetadata of the same sizes, traffic read + written."""

    sizes: tuple
    in_layout: str
    out_layout: str
    scale: float = 1.0
    zero_point: int = 0

    dispatches = 1
    local_size = LOCAL_SIZE
    shader = ""
    reads_int8 = True

    def __post_init__(self):
        object.__setattr__(self, "sizes", L.normalize_sizes(self.sizes))
        for verb, name in (("reads", self.in_layout), ("writes", self.out_layout)):
            lay = L.get_layout(name)
            if (verb == "reads") == self.reads_int8:
                if not lay.is_int8:
                    raise ValueError(f"{self.shader} {verb} an int8x4 layout, got {name}")
            elif lay.is_int8 or lay.is_texture:
                raise ValueError(f"{self.shader} {verb} a float buffer layout, got {lay.name}")
        check_qparams(self.scale, self.zero_point, self.shader.removeprefix("q8ta_"))

    @property
    def defines(self) -> dict:
        return {}

    def metadata(self) -> tuple[bytes, bytes]:
        return (L.get_layout(self.out_layout).buffer_metadata(self.sizes),
                L.get_layout(self.in_layout).buffer_metadata(self.sizes))

    def global_size(self, device=None):
        if device is None:
            return (math.ceil(self.threads / LOCAL_SIZE[0]) * LOCAL_SIZE[0], 1, 1)
        return linear_global_size(device, self.threads, LOCAL_SIZE[0])

    def bytes_written(self) -> int:
        return 4 * self.threads

    def bytes_moved(self) -> int:
        return self.bytes_read() + self.bytes_written()


@dataclass(frozen=True)
class Q8taDequantizeSpec(_Q8taConvertSpec):
    """int8x4 (any int8 layout) → fp32 buffer (any float buffer layout); one thread per output element."""

    in_layout: str = "4W4C"
    out_layout: str = "WIDTH_PACKED"

    shader = DEQUANTIZE_SHADER
    reads_int8 = True

    def spec_constants(self) -> dict:
        return {3: L.get_layout(self.in_layout).spec_constant(), 4: L.get_layout(self.out_layout).spec_constant()}

    def push_constants(self) -> bytes:
        return np.array([self.scale], np.float32).tobytes() + np.array([self.zero_point], np.int32).tobytes()

    @property
    def threads(self) -> int:
        return int(np.prod(self.sizes))

    def bytes_read(self) -> int:
        return 4 * touched_words(L.get_layout(self.in_layout), self.sizes)

    def reference(self, q) -> np.ndarray:
        a = np.asarray(q)
        return ((a.astype(np.int32) - np.int32(self.zero_point)).astype(np.float32)
                * np.float32(self.scale)).astype(np.float32)


@dataclass(frozen=True)
class Q8taQuantizeSpec(_Q8taConvertSpec):
    """fp32 buffer (any float buffer layout) → int8x4 (any int8 layout); one thread per output word (all words,
    padding included: padding lanes get the zero point)."""

    in_layout: str = "WIDTH_PACKED"
    out_layout: str = "4W4C"

    shader = QUANTIZE_SHADER
    reads_int8 = False

    def spec_constants(self) -> dict:
        """3 input layout, 4 output layout; the float input is addressed through its metadata strides alone, so
        the compiler drops constant 3 and it is not passed."""
        return {4: L.get_layout(self.out_layout).spec_constant()}

    def push_constants(self) -> bytes:
        return inverse_scale(self.scale).tobytes() + np.array([self.zero_point], np.int32).tobytes()

    @property
    def threads(self) -> int:
        return L.get_layout(self.out_layout).num_words(self.sizes)

    def bytes_read(self) -> int:
        return 4 * int(np.prod(self.sizes))

    def reference(self, x) -> np.ndarray:
        """ET-VK's order: clamp(roundEven(x * inv_scale) + zp)."""
        s = (np.asarray(x, dtype=np.float32) * inverse_scale(self.scale)).astype(np.float32)
        return np.clip(np.rint(s).astype(np.int64) + int(self.zero_point), -128, 127).astype(np.int8)


@dataclass(frozen=True)
class Q8taPixelShuffleChainSpec:
    """The decomposed chain the fused kernel replaces: dequantize → float pixel shuffle → quantize, 3 dispatches,
    each with its own output buffer (fp32 intermediates in ``float_layout``, a contiguous buffer by default, as
    ET-VK's dequantize emits for buffers)."""

    fused: Q8taPixelShuffleSpec
    float_layout: str = "WIDTH_PACKED"

    def __post_init__(self):
        lay = L.get_layout(self.float_layout)
        if lay.is_int8 or lay.is_texture:
            raise ValueError(f"the chain's intermediates are float buffers, got {lay.name}")
        object.__setattr__(self, "float_layout", lay.name)

    @property
    def stages(self):
        f = self.fused
        packed = L.PACKED_DIM_NAMES[L.get_layout(self.float_layout).packed_dim]
        return (Q8taDequantizeSpec(f.in_sizes, f.in_layout, self.float_layout, f.in_scale, f.in_zero_point),
                PixelShuffleSpec(f.in_sizes, f.r, "buffer", packed, "float32"),
                Q8taQuantizeSpec(f.out_sizes, self.float_layout, f.out_layout, f.out_scale, f.out_zero_point))

    @property
    def dispatches(self) -> int:
        return 3

    @property
    def threads(self) -> int:
        return sum(s.threads for s in self.stages)

    def bytes_read(self) -> int:
        return sum(s.bytes_read() for s in self.stages)

    def bytes_written(self) -> int:
        return sum(s.bytes_written() for s in self.stages)

    def bytes_moved(self) -> int:
        return sum(s.bytes_moved() for s in self.stages)

    def macs(self) -> int:
        return 0

    def reference(self, q) -> np.ndarray:
        """Stage by stage; equal to the fused kernel's result (the same fp32 operations in the same order)."""
        deq, _, quant = self.stages
        a = np.asarray(q.detach().cpu().numpy() if hasattr(q, "detach") else q).reshape(self.fused.in_sizes)
        return quant.reference(pixel_shuffle_reference(deq.reference(a), self.fused.r))


class Q8taChainRun(KernelRun):
    """The decomposed chain on a device: 3 dispatches, buffers q_in → f_in → f_out → q_out."""

    LABELS = (DEQUANTIZE_SHADER, "pixel_shuffle_buffer_float", QUANTIZE_SHADER)

    def __init__(self, device, spec: Q8taPixelShuffleChainSpec, q=None, seed: int = 0):
        super().__init__(device)
        self.spec = spec
        f = spec.fused
        deq, ps, quant = spec.stages
        self.stage_specs = (deq, ps, quant)
        try:
            self.inp = self._own(device.buffer(packed_input(f.in_layout, f.in_sizes, q, seed), name="chain-q-in"))
            self.f_in = self._own(device.buffer(nbytes=4 * int(np.prod(f.in_sizes)), name="chain-f-in"))
            self.f_out = self._own(device.buffer(nbytes=4 * int(np.prod(f.out_sizes)), name="chain-f-out"))
            self.out = self._own(device.buffer(nbytes=4 * quant.threads, name="chain-q-out"))
            self.metas = [self._own_metadata(s, f"chain-{label}") for s, label in zip(self.stage_specs, self.LABELS)]
        except Exception:
            self.close()
            raise

    def record(self, rec, label: str | None = None):
        ios = ((self.f_in, self.inp), (self.f_out, self.f_in), (self.out, self.f_out))
        for s, (o, i), (mo, mi), lab in zip(self.stage_specs, ios, self.metas, self.LABELS):
            self._dispatch(rec, s, [o, i, mo, mi], lab if label is None else f"{label}:{lab}")

    def output_words(self) -> np.ndarray:
        return self.out.download(np.int32)

    def intermediate(self, which: str = "in"):
        """The fp32 intermediate ("in": after dequantize, "out": after the float pixel shuffle) as NCHW torch."""
        f = self.spec.fused
        sizes = f.in_sizes if which == "in" else f.out_sizes
        buf = self.f_in if which == "in" else self.f_out
        lay = L.get_layout(self.spec.float_layout)
        return to_torch(lay.from_buffer(buf.download(np.float32, (int(np.prod(sizes)),)), sizes))

    def output(self):
        f = self.spec.fused
        return to_torch(L.get_layout(f.out_layout).unpack(self.output_words(), f.out_sizes))
