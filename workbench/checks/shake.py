"""Replay one dispatch many times per local work-group size, to shake out races and bad edge tiles (issue 24).

What every shake shares (``workbench.etvk.shake`` uses it for ET-VK's families) and the shake of the workbench's
own kernels:

``shake_kernel(device, spec, make_run, reference, runs=N, local_sizes=None, stress=False)`` takes a kernel spec
(``workbench.kernels.*``), a ``make_run(device, spec) → KernelRun`` (the run owns an ``out`` resource and an
``output()`` that decodes it to a torch tensor) and the reference output. For each local size it makes the spec
with that local size, fills the output with a sentinel pattern (0xA5 bytes) before every run, runs, and compares
each run bitwise with the reference and with run 0. One row per local size (``shake_row``): ``bad_runs`` (runs
whose output differs bitwise from the reference), ``bad_fraction``, ``bad_run_ids``, ``differs_from_run0``,
``wrong_count`` and ``wrong`` (the union over runs of the wrong elements, a boolean tensor shaped like the
reference), ``first_wrong``. ``stress=True`` records a 64 MiB buffer copy in the same submission before the
dispatch, so the device has unrelated memory traffic in flight.

Which local sizes are valid is the kernel's business: 1-D kernels (a local size of (x, 1, 1), threads indexed
linearly) sweep x; 3-D ones (textures) sweep shapes. Every size stays within the device's invocation limit.
"""
from __future__ import annotations

import copy
import time

import numpy as np
import torch

SENTINEL = 0xA5
STRESS_BYTES = 64 << 20
SIZES_1D = ((64, 1, 1), (32, 1, 1), (128, 1, 1), (256, 1, 1), (512, 1, 1), (1024, 1, 1))
SIZES_3D = ((64, 1, 1), (32, 1, 1), (128, 1, 1), (256, 1, 1), (8, 8, 1), (16, 16, 1), (16, 4, 1), (4, 4, 4),
            (8, 4, 2), (1, 1, 1))

__all__ = ["shake_kernel", "shake_row", "parse_local_sizes", "sweep_local_sizes", "bitwise_differ",
           "fill_sentinel", "with_local_size", "SENTINEL", "STRESS_BYTES"]


def as3(size) -> tuple:
    return tuple((tuple(int(v) for v in size) + (1, 1))[:3])


def parse_local_sizes(texts) -> list | None:
    """`--local-size X,Y,Z` values (repeatable) → [(x, y, z), …]; None where none was given."""
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
        out.append(as3(values))
    return out


def sweep_local_sizes(device, own, global_size, candidates) -> list:
    """The kernel's own local size first, then each candidate within the device's invocation limit and not larger
    than the global size in any axis."""
    limit = device.info.max_workgroup_invocations
    g = as3(global_size)
    sizes = [as3(own)]
    for s in candidates:
        if s not in sizes and int(np.prod(s)) <= limit and all(a <= max(b, 1) for a, b in zip(s, g)):
            sizes.append(s)
    return sizes


def check_local_sizes(device, sizes) -> list:
    sizes = [as3(s) for s in sizes]
    limit = device.info.max_workgroup_invocations
    bad = [s for s in sizes if int(np.prod(s)) > limit]
    if bad:
        raise ValueError(f"local sizes must have at most {limit} invocations (the device's maximum), got {bad}")
    return sizes


def fill_sentinel(resource) -> None:
    """Overwrite a buffer or image with 0xA5 bytes, so an element a run never writes cannot pass as correct."""
    if hasattr(resource, "extent"):
        host = np.zeros(resource.shape, resource.dtype)
        host.view(np.uint8)[...] = SENTINEL
        resource.upload(host)
    else:
        resource.upload(np.full(resource.nbytes, SENTINEL, np.uint8))


def stress_buffers(device) -> list:
    return [device.buffer(nbytes=STRESS_BYTES, name="stress_src"),
            device.buffer(nbytes=STRESS_BYTES, name="stress_dst")]


def repeated_runs(device, out, record, read, *, runs: int, stress: bool, label: str, fill=None) -> list:
    """`runs` submissions of what `record(rec)` records, the output resource `out` filled with the sentinel before
    each (`fill(out)` instead where given: a captured dispatch's outputs go back to their captured bytes) and, with
    `stress`, a 64 MiB buffer copy first in the same submission; each run's output as `read()` returns it."""
    extra = stress_buffers(device) if stress else []
    fill = fill or fill_sentinel
    try:
        outputs = []
        for _ in range(runs):
            fill(out)
            with device.record(label=label) as rec:
                if stress:
                    rec.copy(extra[0], extra[1], label="stress_copy")
                record(rec)
                rec.submit()
            outputs.append(read())
        return outputs
    finally:
        for r in extra:
            r.close()


def bitwise_differ(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Element-wise: the bits differ (floats compared as their bit patterns, so -0.0 vs 0.0 and NaNs count)."""
    got, want = got.contiguous(), want.contiguous().to(got.dtype)
    if got.is_floating_point():
        ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[got.element_size()]
        return got.view(ints) != want.view(ints)
    return got != want


def shake_row(kernel: str, variant: str, local, outputs, want: torch.Tensor, *, stress: bool, seconds: float,
               raw=None) -> dict:
    """One local size's runs (decoded outputs) against the reference and against run 0 (``raw``: the runs' raw
    bytes, compared instead of the decoded outputs where given: padding lanes count too)."""
    wrong = torch.zeros(tuple(want.shape), dtype=torch.bool)
    bad_ids, differs = [], []
    for k, got in enumerate(outputs):
        if tuple(got.shape) != tuple(want.shape):
            bad_ids.append(k)
            wrong[...] = True
        else:
            w = bitwise_differ(got, want)
            if w.any():
                bad_ids.append(k)
                wrong |= w
        if k:
            same = (np.array_equal(raw[k], raw[0]) if raw is not None
                    else tuple(got.shape) == tuple(outputs[0].shape) and not bitwise_differ(got, outputs[0]).any())
            if not same:
                differs.append(k)
    runs = len(outputs)
    first = [tuple(int(v) for v in i) for i in torch.nonzero(wrong)[:8].tolist()]
    return {"kernel": kernel, "variant": variant, "local_size": "x".join(map(str, as3(local))), "runs": runs,
            "stress": stress, "bad_runs": len(bad_ids), "bad_fraction": len(bad_ids) / runs, "bad_run_ids": bad_ids,
            "differs_from_run0": differs, "wrong_count": int(wrong.sum()),
            "wrong_fraction": float(wrong.float().mean()) if wrong.numel() else 0.0, "first_wrong": first,
            "wrong": wrong, "seconds": seconds}


def with_local_size(spec, local):
    """A copy of a kernel spec whose ``local_size`` is ``local`` (its global size follows where it derives from the
    local size, e.g. buffer kernels rounding threads up to whole work groups)."""
    local = as3(local)
    cls = type(spec)
    sub = type(cls.__name__, (cls,), {"local_size": property(lambda self: local), "__module__": cls.__module__,
                                      "__doc__": cls.__doc__})
    new = copy.copy(spec)
    object.__setattr__(new, "__class__", sub)
    return new


def kernel_local_sizes(device, spec) -> list:
    """The sweep for a workbench kernel: 1-D kernels (own local size (x, 1, 1) and not a texture) vary x only."""
    own = as3(spec.local_size)
    one_d = own[1:] == (1, 1) and getattr(spec, "storage", "buffer") != "texture"
    return sweep_local_sizes(device, own, spec.global_size(device), SIZES_1D if one_d else SIZES_3D)


def shake_kernel(device, spec, make_run, reference, *, runs: int = 10, local_sizes=None, stress: bool = False):
    """Replay a workbench kernel (module docstring). ``reference``: the expected output (torch tensor, the shape
    ``run.output()`` returns)."""
    import pandas as pd
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    if not callable(make_run):
        raise TypeError(f"make_run must be a callable (device, spec) -> KernelRun, got {type(make_run).__name__}")
    want = torch.as_tensor(reference)
    sizes = kernel_local_sizes(device, spec) if local_sizes is None else check_local_sizes(device, local_sizes)
    variant = getattr(spec, "variant", type(spec).__name__)
    kernel = getattr(spec, "shader", type(spec).__name__)
    rows = []
    for local in sizes:
        start = time.perf_counter()
        with make_run(device, with_local_size(spec, local)) as run:
            outputs = repeated_runs(device, run.out, run.record, lambda: torch.as_tensor(run.output()).clone(),
                                    runs=runs, stress=stress, label=variant)
        rows.append(shake_row(kernel, variant, local, outputs, want, stress=stress,
                               seconds=time.perf_counter() - start))
    return pd.DataFrame(rows)
