"""Kernel specs: one small module per kernel family, beside its shader in shaders/.

A spec says which shader variant to build (defines, specialization constants, local size), the dispatch size, the
bytes and MACs it moves, and its reference function. `pipeline_for` builds (and caches per device) the pipeline.
"""
from __future__ import annotations

import math

from ..shaders import compile_shader


def _freeze(mapping) -> tuple:
    return tuple(sorted((mapping or {}).items()))


def pipeline_for(device, shader: str, *, defines=None, spec_constants=None, local_size=None,
                 capture_statistics: bool = False):
    """The pipeline for one shader variant on `device`, compiled (disk-cached) and created once per device."""
    cache = device.__dict__.setdefault("_kernel_pipelines", {})
    key = (shader, _freeze(defines), _freeze(spec_constants), tuple(local_size or ()), capture_statistics)
    pipeline = cache.get(key)
    if pipeline is None or pipeline.handle is None:
        spirv = compile_shader(shader, defines=defines)
        pipeline = device.pipeline(spirv, spec_constants=spec_constants, local_size=local_size,
                                   capture_statistics=capture_statistics, name=shader)
        cache[key] = pipeline
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
