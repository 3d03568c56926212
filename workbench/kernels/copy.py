"""Copy: the memory roofline. One uvec4 per thread, device-local to device-local."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import linear_global_size, pipeline_for

SHADER = "copy"
LOCAL_SIZE = (256, 1, 1)


@dataclass(frozen=True)
class CopySpec:
    nbytes: int  # a multiple of 16

    def __post_init__(self):
        if self.nbytes <= 0 or self.nbytes % 16:
            raise ValueError(f"copy size must be a positive multiple of 16 B, got {self.nbytes}")

    @property
    def num_vec4(self) -> int:
        return self.nbytes // 16

    def bytes_moved(self) -> int:
        return 2 * self.nbytes  # read once, written once

    def macs(self) -> int:
        return 0

    def push_constants(self) -> bytes:
        return np.array([self.num_vec4], dtype=np.uint32).tobytes()

    @staticmethod
    def reference(x: np.ndarray) -> np.ndarray:
        return x.copy()


def record_copy(rec, device, spec: CopySpec, dst, src, label: str = "copy"):
    """Add one shader copy of `spec.nbytes` from src to dst to a recording."""
    pipeline = pipeline_for(device, SHADER, local_size=LOCAL_SIZE)
    rec.dispatch(pipeline, [dst, src], linear_global_size(device, spec.num_vec4, LOCAL_SIZE[0]),
                 spec.push_constants(), label=label)


def copy_recorder(device):
    """`record_copy` as a ``(rec, dst, src, nbytes, label)`` callable: what a ``"shader:MIB"`` way of timing
    (`measure.Way`) runs between copies of a dispatch (measure sits below the kernels, so it is handed in)."""
    return lambda rec, dst, src, nbytes, label: record_copy(rec, device, CopySpec(nbytes), dst, src, label=label)
