"""The correctness checks of ``workbench.checks`` applied to ET-VK's checkout: lint every variant compiled
(``lint``), the push-constant / UBO ranges of every family's dispatches (``check_families``), and the kernel names
ET-VK's C++ asks for against the checkout's variants (``check_names``), and each family's dispatch run under GPU-AV's
shared-memory race detection (``check_races``, the layer `toolchain.validation` builds)."""
from __future__ import annotations

import time
from pathlib import Path

from ..checks.interfaces import check_dispatch
from ..checks.lint import COLUMNS, lint_spirv
from ..checks.names import IMPL_DIR, UTILS_DIR, Report, check_tree

__all__ = ["lint", "check_families", "check_races", "check_names", "cpp_tree"]


def lint(gen, names=None, *, jobs: int | None = None, show_progress: bool = False):
    """Lint `names` (default: every variant of `gen`) compiled through compile-all's cache: a DataFrame of findings
    (COLUMNS) plus one `compile_failed` row per variant that does not compile; `.attrs['variants']` and
    `.attrs['seconds']` say how many were linted and how long it took."""
    import pandas as pd

    from .codegen import UnknownKernelError
    from .compile_all import compile_all
    start = time.perf_counter()
    known = gen.variants()
    names = sorted(known) if names is None else list(names)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UnknownKernelError(f"expected ET-VK variant names of {gen.source.label}, got {unknown[:5]}")
    compiled = compile_all(gen, names, jobs=jobs, show_progress=show_progress)
    rows = []
    for row in compiled.itertuples():
        if not row.ok:
            rows.append({"variant": row.variant, "check": "compile_failed", "severity": "info", "instruction": -1,
                         "line": row.error_at, "message": row.error.splitlines()[0] if row.error else ""})
            continue
        rows += lint_spirv(gen.compile(row.variant).code, row.variant)  # a cache hit
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    df.attrs.update(variants=len(names), seconds=time.perf_counter() - start)
    return df


def check_families(gen, names=None) -> list[dict]:
    """``check_dispatch`` on each family's default Dispatch (``etvk.run.make``) and on the dispatches it records
    before its last one (im2col before the GEMM, …): every place the workbench knows the C++ side's bytes."""
    from .families import KERNELS
    from .run import make
    names = list(KERNELS) if names is None else list(names)
    unknown = [n for n in names if n not in KERNELS]
    if unknown:
        raise ValueError(f"expected family names ({', '.join(KERNELS)}), got {unknown}")
    rows = []
    for name in names:
        d = make(gen, name)
        rows += check_dispatch(gen.compile(d.variant).code, d)
        for step in d.before or ():
            step_dispatch = _StepView(step, d.resources)
            rows += check_dispatch(gen.compile(step.variant).code, step_dispatch, step.variant)
    return rows


class _StepView:
    """A `Step` seen as a Dispatch for the check: its push constants, the family's resources it binds."""

    def __init__(self, step, resources):
        self.variant, self.push_constants = step.variant, step.push_constants
        self.resources, self.bindings = resources, tuple(step.bindings)


def check_races(device, gen, kernels, *, layer, options=None) -> list[dict]:
    """Each ET-VK family of `kernels` made with `options[kernel]` (default: the family's own shapes) and run once on
    a device with GPU-assisted validation's shared-memory race detection (`checks.races.race_device(device, layer)`):
    one row per family — variant, shared_memory, races (reports), found (each in one line), other_messages, correct
    (against torch), clean."""
    from ..checks import races
    from .run import execute, make
    options = options or {}
    dev = races.race_device(device, layer)
    rows = []
    try:
        races.take(dev)
        for kernel in kernels:
            head = {"kernel": kernel, **{k: str(v) for k, v in options.get(kernel, {}).items()}}
            try:
                d = make(gen, kernel, **options.get(kernel, {}))
                head.update(variant=d.variant, local_size="x".join(map(str, d.local_size)),
                            shared_memory=races.uses_shared_memory(gen.compile(d.variant).code))
                row = execute(dev, gen, d, measure=False)
                reason = ""
            except (ValueError, RuntimeError) as exc:  # a family that cannot run here is a row, not the end
                row, reason = {}, str(exc).splitlines()[0][:200]
            said = races.take(dev)
            rows.append({**head, "races": len(said["races"]), "found": " | ".join(dict.fromkeys(said["races"])),
                         "other_messages": " | ".join(dict.fromkeys(said["other"])),
                         "correct": bool(row.get("correct", False)), "reason": reason,
                         "clean": not said["races"] and not said["other"] and not reason})
    finally:
        dev.close()
    return rows


def cpp_tree(src) -> Path:
    """Where the C++ of a ShaderSource lies: the checkout's working tree, or (a revision) the C++ folders of that
    commit extracted once with git archive into the workbench's cache, beside its templates."""
    if src.commit is None or src.label == "working tree" or src.checkout is None:
        return Path(src.glsl_dir).parents[5]  # …/backends/vulkan/runtime/graph/ops/glsl → the tree's root
    import io
    import tarfile

    from .codegen import CheckoutError, cached_folder, run_git, cache_root

    def extract(folder: Path) -> None:
        result = run_git(src.checkout, "archive", "--format=tar", src.commit, IMPL_DIR, UTILS_DIR, binary=True)
        if result.returncode != 0:
            raise CheckoutError(f"git archive of {IMPL_DIR} at {src.commit[:10]} failed: "
                                f"{result.stderr.decode(errors='replace').strip()}")
        with tarfile.open(fileobj=io.BytesIO(result.stdout)) as tar:
            tar.extractall(folder, filter="data")

    return cached_folder(cache_root() / f"{src.commit}-cpp", extract)


def check_names(executorch=None, rev: str | None = None, *, gen=None) -> Report:
    """The name check over a checkout (or `gen`, a Codegen whose source is the checkout's glsl folder)."""
    from .codegen import Codegen, source
    gen = gen or Codegen(source(executorch, rev=rev))
    return check_tree(gen.variants(), cpp_tree(gen.source))
