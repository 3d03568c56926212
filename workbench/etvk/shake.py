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
``Spirv`` (the planted shaders of the tests use it: build a Dispatch by hand). The workbench's own kernels shake
through ``workbench.checks.shake.shake_kernel``; both share its rows, sentinel and stress load.
"""
from __future__ import annotations

import time

import numpy as np

from ..checks.shake import (SIZES_3D, check_local_sizes, fill_sentinel, parse_local_sizes, shake_row, stress_buffers, sweep_local_sizes)

__all__ = ["shake", "shake_dispatch", "parse_local_sizes", "default_local_sizes"]


def default_local_sizes(device, d) -> list:
    """The kernel's own local size first, then the shapes of ``workbench.checks.shake.SIZES_3D`` that fit the device and
    the global size."""
    return sweep_local_sizes(device, d.local_size, d.global_size, SIZES_3D)


def shake(device, gen, family: str, *, runs: int = 10, local_sizes=None, stress: bool = False, **options):
    from .run import make
    d = make(gen, family, **options)
    return shake_dispatch(device, gen.compile(d.variant), d, runs=runs, local_sizes=local_sizes, stress=stress,
                           compile_step=gen.compile)


def shake_dispatch(device, spirv, d, *, runs: int = 10, local_sizes=None, stress: bool = False,
                    compile_step=None):
    import pandas as pd

    from .run import (_allocate, _read, _require_features, declared, with_local_size)
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    if d.requires is not None:
        d.requires(device)
    _require_features(device, spirv)
    sizes = default_local_sizes(device, d) if local_sizes is None else check_local_sizes(device, local_sizes)
    earlier = [(step, compile_step(step.variant)) for step in d.before] if d.before else []
    rows = []
    for local in sizes:
        dl = with_local_size(d, local)
        made, pipes, extra = [], [], []
        start = time.perf_counter()
        try:
            made = _allocate(device, dl)
            extra = stress_buffers(device) if stress else []
            for step, step_spirv in earlier:
                pipes.append(device.pipeline(step_spirv, spec_constants=declared(step_spirv, step.spec_constants),
                                             local_size=step.local_size, name=step.variant))
            out = made[dl.output]
            with device.pipeline(spirv, spec_constants=declared(spirv, dl.spec_constants), local_size=local,
                                 name=dl.variant) as pipe:
                raw = []
                for _ in range(runs):
                    fill_sentinel(out)
                    with device.record(label=dl.variant) as rec:
                        if stress:
                            rec.copy(extra[0], extra[1], label="stress_copy")
                        for (step, _), step_pipe in zip(earlier, pipes):
                            rec.dispatch(step_pipe, [made[i] for i in step.bindings], step.global_size,
                                         step.push_constants, label=step.variant)
                        bound = made if dl.bindings is None else [made[i] for i in dl.bindings]
                        rec.dispatch(pipe, bound, dl.global_size, dl.push_constants, label=dl.variant)
                        rec.submit()
                    raw.append(np.array(_read(out), copy=True))
        finally:
            for r in pipes + made + extra:
                r.close()
        rows.append(shake_row(d.kernel, d.variant, local, [dl.decode(r) for r in raw], d.expected, stress=stress,
                               seconds=time.perf_counter() - start, raw=raw))
    return pd.DataFrame(rows)
