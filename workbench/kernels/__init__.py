"""Kernel specs: one small module per kernel family, beside its shader in shaders/.

A spec says which shader variant to build (defines, specialization constants, local size), the dispatch size, the
bytes and MACs it moves, and its reference function. `pipeline_for` builds (and caches per device) the pipeline.
"""
from __future__ import annotations

import math

from ..toolchain.shaders import compile_shader
from ..vk.errors import Closable
from .workgroups import create_local_wg_size as texture_local_size  # ET-VK's picker for texture dispatches


def _freeze(mapping) -> tuple:
    return tuple(sorted((mapping or {}).items()))


def pipeline_for(device, shader: str, *, defines=None, spec_constants=None, local_size=None,
                 capture_statistics: bool = False):
    """The pipeline for one shader variant on `device`, compiled (disk-cached) and created once per device.
    Specialization constants the compiled variant does not declare are dropped by the runtime (`vk.Pipeline`)."""
    cache = device.__dict__.setdefault("_kernel_pipelines", {})
    key = (shader, _freeze(defines), _freeze(spec_constants), tuple(local_size or ()), capture_statistics)
    pipeline = cache.get(key)
    if pipeline is None or pipeline.handle is None:
        spirv = compile_shader(shader, defines=defines)
        pipeline = device.pipeline(spirv, spec_constants=spec_constants, local_size=local_size,
                                   capture_statistics=capture_statistics, name=shader)
        cache[key] = pipeline
    return pipeline


def record_spec(rec, device, spec, resources, label: str | None = None):
    """Add one dispatch of a kernel spec to the recording `rec`: its shader variant (`shader`, `defines`,
    `spec_constants()`, `local_size`) at its `global_size(device)` with its `push_constants()`. Returns the
    pipeline."""
    spec_constants = spec.spec_constants() if hasattr(spec, "spec_constants") else None
    pipeline = pipeline_for(device, spec.shader, defines=getattr(spec, "defines", None) or None,
                            spec_constants=spec_constants, local_size=spec.local_size)
    rec.dispatch(pipeline, resources, spec.global_size(device), spec.push_constants(), label=label)
    return pipeline


def linear_global_size(device, threads: int, local_x: int) -> tuple[int, int, int]:
    """A 1-D thread count laid out as (x, y, 1) so that the x workgroup count stays within the device limit.

    Shaders recover the linear index as gid.y * (num_groups.x * local_x) + gid.x and bound-check it."""
    max_groups_x = device.info.max_workgroup_count[0]
    groups = math.ceil(threads / local_x)
    if groups <= max_groups_x:
        return (groups * local_x, 1, 1)
    rows = math.ceil(groups / max_groups_x)
    return (max_groups_x * local_x, rows, 1)


def storage_global_size(device, layout, sizes, threads: int, local_x: int) -> tuple[int, int, int]:
    """Texture layouts: one thread per texel (the image extents). Buffers: `threads` laid out by
    linear_global_size (or rounded up to whole workgroups when no device is given, to describe a dispatch)."""
    if layout.is_texture:
        return tuple(int(v) for v in layout.extents(sizes))
    if device is None:
        return (math.ceil(threads / local_x) * local_x, 1, 1)
    return linear_global_size(device, threads, local_x)


class StorageDispatch:
    """A kernel over a tensor in a buffer or a 3-D texture (its `storage` and `layout`), sized by its
    `dispatch_sizes`: textures one thread per texel with ET-VK's texture picker, buffers `threads` in work groups of
    `buffer_local_size`, laid out by storage_global_size."""

    buffer_local_size = (64, 1, 1)  # ET-VK's {64, 1, 1}

    @property
    def local_size(self) -> tuple[int, int, int]:
        if self.storage == "texture":
            return texture_local_size(self.layout.extents(self.dispatch_sizes))
        return self.buffer_local_size

    def global_size(self, device=None) -> tuple[int, int, int]:
        return storage_global_size(device, self.layout, self.dispatch_sizes, self.threads, self.buffer_local_size[0])


class DeviceResources(Closable):
    """Owns the device objects made for a kernel's runs; close() (or `with`) releases them, newest first."""

    def __init__(self, device):
        self.device = device
        self._owned = []

    def _own(self, obj):
        self._owned.append(obj)
        return obj

    def close(self):
        for obj in reversed(self._owned):
            obj.close()
        self._owned.clear()


class KernelRun(DeviceResources):
    """A spec bound to its resources: subclasses allocate them and define record(rec); run() submits once."""

    def _dispatch(self, rec, spec, resources, label):
        record_spec(rec, self.device, spec, resources, label)

    def _own_metadata(self, spec, name: str) -> tuple:
        """The spec's (output, input) metadata UBOs (``spec.metadata()``) on the device, owned: `name`-out-meta,
        `name`-in-meta."""
        return tuple(self._own(self.device.uniform(meta, name=f"{name}-{side}-meta"))
                     for side, meta in zip(("out", "in"), spec.metadata()))

    def record(self, rec, label: str | None = None):
        raise NotImplementedError

    def run(self) -> float | None:
        """Record, submit once, wait; returns the GPU time in ns (None without timestamps)."""
        with self.device.record(type(self).__name__) as rec:
            self.record(rec)
            rec.submit()
        return rec.gpu_ns
