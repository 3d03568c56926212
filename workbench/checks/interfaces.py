"""The shader's declared push-constant and uniform-buffer ranges against the bytes the C++ side supplies (issue 24).

A shader that reads a push-constant member the C++ side never pushed, or a UBO field past the buffer ET-VK binds,
reads undefined bytes: no validation message, a wrong answer on some drivers only. The workbench knows the C++ side
wherever it dispatches an op as ET-VK's C++ does (an ``etvk.dispatch.Dispatch``: its ``push_constants`` bytes and
its resources, bound in the order of the module's sorted bindings), so the check compares the two.

The shader's side comes from ``workbench.vk.spirv.reflect`` (what pipelines are built from): the push-constant
block's size and each uniform buffer's ``block_size`` (the end of its last member, by ``Offset``, ``ArrayStride`` and
``MatrixStride``).

``check_dispatch(code, d, variant)`` → lint rows (``lint.COLUMNS``): ``push_constant_range`` / ``ubo_range``, an
``error`` where the C++ side supplies fewer bytes than the shader declares or binds something else than a UBO
there, a ``warning`` where it pushes more (harmless for Vulkan, but a sign that the two sides disagree on a layout).
"""
from __future__ import annotations

from ..vk.spirv import UNIFORM_BUFFER, reflect

__all__ = ["check_dispatch"]


def _row(variant, check, severity, message) -> dict:
    return {"variant": variant, "check": check, "severity": severity, "instruction": -1, "line": "",
            "message": message}


def _nbytes(resource) -> int:
    data = resource.data
    if data is None:
        return resource.nbytes
    return data.nbytes if hasattr(data, "nbytes") else len(data)


def check_dispatch(code: bytes, d, variant: str = "") -> list[dict]:
    """Rows for each range where the shader and the dispatch (the C++ side's bytes) disagree (module docstring)."""
    variant = variant or d.variant
    refl = reflect(bytes(code))
    rows = []
    pushed, wanted = len(d.push_constants or b""), refl.push_constant_size
    if pushed != wanted:
        severity = "error" if pushed < wanted else "warning"
        rows.append(_row(variant, "push_constant_range", severity,
                         f"the shader's push-constant block ends at byte {wanted}; the C++ side pushes {pushed} "
                         f"bytes" + (" (the rest is undefined when read)" if pushed < wanted else "")))
    bound = d.resources if d.bindings is None else [d.resources[i] for i in d.bindings]
    for position, b in enumerate(refl.bindings):
        if b.kind != UNIFORM_BUFFER:
            continue
        where = f"binding {b.binding} ({b.name})"
        if position >= len(bound):
            rows.append(_row(variant, "ubo_range", "error", f"{where}: the shader declares a UBO; the C++ side binds "
                                                            f"only {len(bound)} resources"))
            continue
        r = bound[position]
        if r.kind != "ubo":
            rows.append(_row(variant, "ubo_range", "error", f"{where}: the shader declares a UBO; the C++ side "
                                                            f"binds a {r.kind} ({r.name or 'unnamed'}) there"))
        elif _nbytes(r) < b.block_size:
            rows.append(_row(variant, "ubo_range", "error",
                             f"{where}: the shader's block ends at byte {b.block_size}; the C++ side's buffer "
                             f"{r.name or ''} holds {_nbytes(r)} bytes (the rest is undefined when read)"))
    return rows
