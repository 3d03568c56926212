"""Replay one dispatch many times to shake out races and bad edge tiles.

``shake(device, gen, family, runs=N, local_sizes=[...], stress=False, **options)`` builds the family's Dispatch
(``etvk.run.make``), and for each local size runs it ``runs`` times, the output resource filled with a sentinel
pattern (0xA5 bytes) before every run, each run compared bitwise with the reference and with run 0. One row per local
size: ``bad_runs`` (runs whose output differs bitwise from the reference), ``bad_fraction``, ``bad_run_ids``,
``differs_from_run0`` (the runs whose bytes differ from run 0's), ``wrong_count`` and ``wrong`` (the union over
runs of the wrong elements: a boolean tensor shaped like the reference), ``first_wrong`` (up to 8 NCHW indices).
``stress=True`` records a large buffer copy (64 MiB, ``workbench.kernels``' copy in spirit: a transfer) in the
same submission before the dispatch, so the GPU has unrelated memory traffic in flight.

``shake_dispatch(device, spirv, d, ...)`` is the same for any ``etvk.dispatch.Dispatch`` and its compiled
``Spirv`` (the planted shaders of the tests use it: build a Dispatch by hand); a Dispatch without a reference
(``expected`` None, as ``bare_dispatch`` makes for a shader file) is compared with its first run at each local size. The workbench's own kernels shake
through ``workbench.checks.shake.shake_kernel``; both share its rows, sentinel and stress load.
"""
from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np

from ..checks.shake import (SIZES_3D, check_local_sizes, parse_local_sizes, repeated_runs, shake_row,
                             sweep_local_sizes)
from ..vk import Launches

__all__ = ["shake", "shake_dispatch", "bare_dispatch", "parse_local_sizes", "default_local_sizes"]


def default_local_sizes(device, d) -> list:
    """The kernel's own local size first, then the shapes of ``workbench.checks.shake.SIZES_3D`` that fit the device and
    the global size."""
    return sweep_local_sizes(device, d.local_size, d.global_size, SIZES_3D)


def shake(device, gen, family: str, *, runs: int = 10, local_sizes=None, stress: bool = False, **options):
    from .run import make
    return shake_dispatch(device, gen, make(gen, family, **options), runs=runs, local_sizes=local_sizes,
                          stress=stress)


def shake_dispatch(device, spirv, d, *, runs: int = 10, local_sizes=None, stress: bool = False,
                   compile_step=None):
    """Shake the Dispatch `d`. `spirv`: its compiled shader (``compile_step(variant)`` compiles the earlier
    dispatches of ``d.before``), or whatever compiles its variants (a Codegen, anything with
    ``compile(variant)``)."""
    import pandas as pd

    from .run import allocate, read_back, compiled, launches, with_local_size
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    spirv, earlier = compiled(device, _compiler(spirv, d, compile_step), d)
    sizes = default_local_sizes(device, d) if local_sizes is None else check_local_sizes(device, local_sizes)
    rows = []
    for local in sizes:
        dl = with_local_size(d, local)
        made = []
        start = time.perf_counter()
        try:
            made = allocate(device, dl)
            out = made[dl.output]
            with Launches(device, launches(dl, spirv, made, earlier)) as pipes:
                raw = repeated_runs(device, out, pipes.record, lambda: np.array(read_back(out), copy=True), runs=runs,
                                    stress=stress, label=dl.variant)
        finally:
            for r in made:
                r.close()
        outputs = [dl.decode(r) for r in raw]
        want = outputs[0] if d.expected is None else d.expected  # no reference (a bare shader): its first run
        rows.append(shake_row(d.kernel, d.variant, local, outputs, want, stress=stress,
                              seconds=time.perf_counter() - start, raw=raw))
    return pd.DataFrame(rows)


def _compiler(spirv, d, compile_step):
    """Whatever compiles `d`'s variants: `spirv` itself where it is a compiler, else its compiled shader for
    ``d.variant`` and `compile_step` for the earlier dispatches."""
    if hasattr(spirv, "compile"):
        return spirv

    def compile(variant: str):
        if variant == d.variant:
            return spirv
        if compile_step is None:
            raise ValueError(f"{d.variant}: its dispatch runs {variant} first; pass compile_step to compile it")
        return compile_step(variant)
    return SimpleNamespace(compile=compile)


def bare_dispatch(spirv, size: int = 64, *, output: int = 0, name: str = ""):
    """A Dispatch for a shader file alone, as ``workbench validate`` runs one: every binding a storage buffer of
    `size` uint32 holding 0..size-1, push constants `size` then zeros, `size` invocations in x, its own local size
    (64 where specialization sets it); `output` (a binding number) is the buffer compared. No reference
    (``expected`` None). `name` is its variant: what the compiler given to `shake_dispatch` knows it by."""
    import struct

    import torch

    from ..vk.spirv import STORAGE_BUFFER, reflect
    from .dispatch import Dispatch, Resource
    r = reflect(bytes(spirv.code))
    name = name or spirv.name
    other = [f"{b.kind} {b.name!r} (binding {b.binding})" for b in r.bindings if b.kind != STORAGE_BUFFER]
    if other:
        raise ValueError(f"{name}: a bare shader is shaken with storage buffers only; it binds {', '.join(other)} "
                         "(shake the family that dispatches it instead)")
    numbers = [b.binding for b in r.bindings]
    if output not in numbers:
        raise ValueError(f"{name}: --output names a binding of the shader: one of {numbers or 'none'}, got {output}")
    if size < 1:
        raise ValueError(f"{name}: --size must be >= 1, got {size}")
    resources = [Resource("buffer", np.arange(size, dtype=np.uint32), name=b.name) for b in r.bindings]
    push = struct.pack("<I", size).ljust(r.push_constant_size, b"\0")[:r.push_constant_size]
    decode = lambda raw: torch.from_numpy(np.asarray(raw).view(np.int32).copy())  # noqa: E731
    return Dispatch(name, name, resources, push, {}, (size, 1, 1), r.local_size or (64, 1, 1),
                    numbers.index(output), decode, None, params={"size": size, "output_binding": output})
