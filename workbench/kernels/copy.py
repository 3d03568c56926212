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


FLUSH_SHADER = "read_flush"
FLUSH_LABEL = "flush"  # the label of the untimed sweep (`measure.cache`)


class Flush:
    """A read-only sweep of `nbytes` (a multiple of 16), recorded before each dispatch of a cold measurement whose
    rotation cannot span the last-level cache (`measure.cache.Rotation.flush_bytes`); untimed (its label is
    FLUSH_LABEL). A context manager that owns its buffers."""

    label = FLUSH_LABEL

    def __init__(self, device, nbytes: int):
        self.device, self.spec = device, CopySpec(nbytes)
        self.src = device.buffer(nbytes=nbytes, name="flush-src")
        self.sink = device.buffer(nbytes=16, name="flush-sink")

    def record(self, rec) -> None:
        pipeline = pipeline_for(self.device, FLUSH_SHADER, local_size=LOCAL_SIZE)
        rec.dispatch(pipeline, [self.sink, self.src], linear_global_size(self.device, self.spec.num_vec4,
                                                                         LOCAL_SIZE[0]),
                     self.spec.push_constants(), label=FLUSH_LABEL)

    def close(self) -> None:
        self.src.close()
        self.sink.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False



def flush_for(device, rot):
    """The `Flush` a rotation (`measure.cache.Rotation`) needs before each dispatch, as a context manager; a context
    of None where it needs none."""
    from contextlib import nullcontext
    return Flush(device, rot.flush_bytes) if rot.flush_bytes else nullcontext(None)
