"""What a captured pipeline's shader says: its SPIR-V disassembled, and its GLSL where one of the sources the caller
knows is that shader.

    from workbench.capture import sources
    sources.disassemble(d.spirv)                             # spirv-dis's text
    sources.match(found, {"scale_bias": GLSL, "mix": GLSL2})  # {SPIR-V hash: Source(name, glsl, how)}

A capture holds SPIR-V only. A source is the captured shader when it compiles to the same bytes (`how` = "same
SPIR-V"); the program that was captured may have used another compiler or target, so a source whose interface is
the captured module's (each binding's set, number, kind and block name, the push-constant size, the specialization
ids and types, the local size or its spec ids, the entry points) is taken where it is the only one that matches
(`how` = "same interface": the GLSL of that shader, perhaps not its exact revision).
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
from dataclasses import dataclass

from ..vk import spirv as sp
from .format import CapturedDispatch, CaptureError

__all__ = ["Source", "disassemble", "match", "interface"]

TARGET_ENVS = ("vulkan1.1", "vulkan1.2", "vulkan1.3")


@dataclass(frozen=True)
class Source:
    name: str
    glsl: str
    how: str  # "same SPIR-V" or "same interface"


def _spirv_dis() -> str:
    """spirv-dis from the built glslang tools (the SPIR-V Tools the workbench compiles with), else one on PATH."""
    from ..toolchain import glslang
    if glslang.is_set_up():
        return str(glslang.tool_paths()["spirv-dis"])
    found = shutil.which("spirv-dis")
    if found is None:
        raise CaptureError("expected spirv-dis (`python -m workbench.toolchain.glslang setup`, or SPIRV-Tools on "
                           "PATH), found neither")
    return found


def disassemble(code: bytes) -> str:
    """The SPIR-V assembly of `code` (spirv-dis, ids by their names); CaptureError (one line) for bytes it rejects."""
    done = subprocess.run([_spirv_dis(), "--no-color", "-"], input=code, capture_output=True, timeout=60)
    if done.returncode != 0:
        first = (done.stderr.decode(errors="replace").strip().splitlines() or [f"exit status {done.returncode}"])[0]
        raise CaptureError(f"expected SPIR-V that spirv-dis reads, it does not: {first}")
    return done.stdout.decode()


def interface(code: bytes) -> tuple:
    """What the program around a shader sees of it (module docstring); equal for two compilations of one GLSL."""
    r = sp.reflect(code)
    return (tuple((b.set, b.binding, b.kind, b.name) for b in sorted(r.bindings, key=lambda b: (b.set, b.binding))),
            r.push_constant_size, tuple(sorted(r.spec_constants.items())), r.local_size, r.local_size_from_spec,
            tuple(r.entry_points))


def _compiled(name: str, glsl: str) -> tuple[set[str], tuple | None]:
    """({SPIR-V hash for each target}, interface) of one source; (set(), None) where it does not compile."""
    from ..toolchain import shaders
    hashes, shape = set(), None
    for env in TARGET_ENVS:
        try:
            code = shaders.compile_glsl(glsl, name=name, target_env=env).code
        except shaders.ShaderCompileError:
            continue
        hashes.add(hashlib.sha256(code).hexdigest()[:16])
        shape = interface(code)
    return hashes, shape


def match(found: list[CapturedDispatch], candidates: dict[str, str]) -> dict[str, Source]:
    """{SPIR-V hash: Source} for each pipeline of `found` that one of `candidates` ({name: GLSL text}) is (module
    docstring); pipelines none of them is are left out."""
    compiled = {name: _compiled(name, text) for name, text in candidates.items()}
    out = {}
    for d in {d.spirv_hash: d for d in found}.values():
        same = [n for n, (hashes, _) in compiled.items() if d.spirv_hash in hashes]
        if same:
            out[d.spirv_hash] = Source(same[0], candidates[same[0]], "same SPIR-V")
            continue
        try:
            shape = interface(d.spirv)
        except ValueError:
            continue
        alike = [n for n, (_, s) in compiled.items() if s == shape]
        if len(alike) == 1:
            out[d.spirv_hash] = Source(alike[0], candidates[alike[0]], "same interface")
    return out
