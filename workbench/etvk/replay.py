"""Replay one dispatch many times to shake out races and bad edge tiles.

``replay(device, gen, family, runs=N, local_sizes=[...], stress=False, **options)`` builds the family's Dispatch
(``etvk.run.make``), and for each local size runs it ``runs`` times, the output resource filled with a sentinel
pattern (0xA5 bytes) before every run, each run compared bitwise with the reference and with run 0. One row per local
size: ``bad_runs`` (runs whose output differs bitwise from the reference), ``bad_fraction``, ``bad_run_ids``,
``differs_from_run0`` (the runs whose bytes differ from run 0's), ``wrong_count`` and ``wrong`` (the union over
runs of the wrong elements: a boolean tensor shaped like the reference), ``first_wrong`` (up to 8 NCHW indices).
``stress=True`` records a large buffer copy (64 MiB, ``workbench.kernels``' copy in spirit: a transfer) in the
same submission before the dispatch, so the GPU has unrelated memory traffic in flight.

``replay_dispatch(device, spirv, d, ...)`` is the same for any ``etvk.dispatch.Dispatch`` and its compiled
``Spirv`` (the workbench's own kernels and the planted shaders of the tests use it: build a Dispatch by hand).
"""
from __future__ import annotations

import time

import numpy as np
import torch

SENTINEL = 0xA5
STRESS_BYTES = 64 << 20
DEFAULT_LOCAL_SIZES = ((64, 1, 1), (32, 1, 1), (128, 1, 1), (256, 1, 1), (8, 8, 1), (16, 16, 1), (4, 4, 4),
                       (1, 1, 1))


def parse_local_sizes(texts) -> list | None:
    if not texts:
        return None
    out = []
    for text in texts:
        try:
            values = tuple(int(v) for v in text.split(","))
        except ValueError:
            raise ValueError(f"--local-size takes X,Y,Z integers (e.g. 64,1,1), got {text!r}") from None
        if not 1 <= len(values) <= 3 or min(values) < 1:
            raise ValueError(f"--local-size takes 1 to 3 positive sizes X,Y,Z, got {text!r}")
        out.append((values + (1, 1))[:3])
    return out


def default_local_sizes(device, d) -> list:
    """The kernel's own local size first, then the default set, each within the device's invocation limit and
    not larger than the global size in any axis."""
    limit = device.info.max_workgroup_invocations
    g = tuple((tuple(d.global_size) + (1, 1))[:3])
    sizes = [tuple((tuple(d.local_size) + (1, 1))[:3])]
    for s in DEFAULT_LOCAL_SIZES:
        if s not in sizes and int(np.prod(s)) <= limit and all(a <= max(b, 1) for a, b in zip(s, g)):
            sizes.append(s)
    return sizes


def replay(device, gen, family: str, *, runs: int = 10, local_sizes=None, stress: bool = False, **options):
    from .run import make
    d = make(gen, family, **options)
    return replay_dispatch(device, gen.compile(d.variant), d, runs=runs, local_sizes=local_sizes, stress=stress,
                           compile_step=gen.compile)


def replay_dispatch(device, spirv, d, *, runs: int = 10, local_sizes=None, stress: bool = False,
                    compile_step=None):
    import pandas as pd

    from .run import _allocate, _read, _require_features, declared, with_local_size
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    if d.requires is not None:
        d.requires(device)
    _require_features(device, spirv)
    sizes = default_local_sizes(device, d) if local_sizes is None else [tuple((tuple(s) + (1, 1))[:3])
                                                                         for s in local_sizes]
    limit = device.info.max_workgroup_invocations
    bad = [s for s in sizes if int(np.prod(s)) > limit]
    if bad:
        raise ValueError(f"local sizes must have at most {limit} invocations (the device's maximum), got {bad}")
    earlier = [(step, compile_step(step.variant)) for step in d.before] if d.before else []
    want = d.expected
    rows = []
    for local in sizes:
        dl = with_local_size(d, local)
        made, pipes, extra = [], [], []
        start = time.perf_counter()
        try:
            made = _allocate(device, dl)
            if stress:
                extra = [device.buffer(nbytes=STRESS_BYTES, name="stress_src"),
                         device.buffer(nbytes=STRESS_BYTES, name="stress_dst")]
            for step, step_spirv in earlier:
                pipes.append(device.pipeline(step_spirv, spec_constants=declared(step_spirv, step.spec_constants),
                                             local_size=step.local_size, name=step.variant))
            out = made[dl.output]
            is_buffer = not hasattr(out, "extent")
            with device.pipeline(spirv, spec_constants=declared(spirv, dl.spec_constants), local_size=local,
                                 name=dl.variant) as pipe:
                outputs = []
                for _ in range(runs):
                    if is_buffer:
                        out.upload(np.full(out.nbytes, SENTINEL, np.uint8))
                    else:
                        host = np.zeros(out.shape, out.dtype)
                        host.view(np.uint8)[...] = SENTINEL
                        out.upload(host)
                    with device.record(label=dl.variant) as rec:
                        if stress:
                            rec.copy(extra[0], extra[1], label="stress_copy")
                        for (step, _), step_pipe in zip(earlier, pipes):
                            rec.dispatch(step_pipe, [made[i] for i in step.bindings], step.global_size,
                                         step.push_constants, label=step.variant)
                        bound = made if dl.bindings is None else [made[i] for i in dl.bindings]
                        rec.dispatch(pipe, bound, dl.global_size, dl.push_constants, label=dl.variant)
                        rec.submit()
                    outputs.append(np.array(_read(out), copy=True))
        finally:
            for r in pipes + made + extra:
                r.close()
        wrong = torch.zeros(tuple(want.shape), dtype=torch.bool)
        bad_ids, differs = [], []
        for k, raw in enumerate(outputs):
            got = dl.decode(raw)
            if tuple(got.shape) != tuple(want.shape):
                bad_ids.append(k)
                wrong[...] = True
            else:
                w = _bitwise_differ(got, want)
                if w.any():
                    bad_ids.append(k)
                    wrong |= w
            if k and not np.array_equal(raw, outputs[0]):
                differs.append(k)
        first = [tuple(int(v) for v in i) for i in torch.nonzero(wrong)[:8].tolist()]
        rows.append({"kernel": d.kernel, "variant": d.variant, "local_size": "x".join(map(str, local)),
                     "runs": runs, "stress": stress, "bad_runs": len(bad_ids), "bad_fraction": len(bad_ids) / runs,
                     "bad_run_ids": bad_ids, "differs_from_run0": differs, "wrong_count": int(wrong.sum()),
                     "first_wrong": first, "wrong": wrong, "seconds": time.perf_counter() - start})
    return pd.DataFrame(rows)


def _bitwise_differ(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Element-wise: the bits differ (floats compared as their bit patterns, so -0.0 vs 0.0 and NaNs count)."""
    got, want = got.contiguous(), want.contiguous().to(got.dtype)
    if got.is_floating_point():
        ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[got.element_size()]
        return got.view(ints) != want.view(ints)
    return got != want
