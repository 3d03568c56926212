"""Edit and compare: one captured dispatch replayed with another shader (same bindings), against its captured
outputs and against the captured shader's own replay.

    capture.edit("caps/model", 12, "my_conv.glsl")     # two rows: captured, edited (exact, mismatch, time)

The edited shader is a GLSL file (compiled by `workbench.toolchain.shaders` for the Vulkan version of the captured
module, its folder on the include path, as ET-VK's generated shaders with their headers beside them) or a SPIR-V
file. Its bindings, push constants and specialization constants are fed exactly as the captured dispatch's.
"""
from __future__ import annotations

import dataclasses
import struct
import time
from pathlib import Path

import pandas as pd

from .format import CapturedDispatch, CaptureError, read_folder
from .replay import replay_one

SPIRV_MAGIC = 0x07230203
# SPIR-V version word → the Vulkan target that produces it (glslc's default for each); older versions: vulkan1.1,
# the lowest target the workbench compiles for
TARGET_ENVS = {0x10500: "vulkan1.2", 0x10600: "vulkan1.3"}


def target_env(spirv: bytes) -> str:
    """The Vulkan target of a captured module, from its SPIR-V version (vulkan1.1 where unknown)."""
    version = struct.unpack_from("<I", spirv, 4)[0] if len(spirv) >= 8 else 0
    return TARGET_ENVS.get(version, "vulkan1.1")


def load_shader(path, like: CapturedDispatch) -> bytes:
    """SPIR-V bytes of `path`: a .spv file as it is, else GLSL compiled for `like`'s Vulkan target. CaptureError
    (one line) for a file that is neither, or GLSL that does not compile (the compiler's first message)."""
    from ..toolchain import shaders
    path = Path(path)
    if not path.is_file():
        raise CaptureError(f"expected a shader file (.glsl, .comp or .spv), found no file {path}")
    data = path.read_bytes()
    if len(data) >= 4 and struct.unpack_from("<I", data)[0] == SPIRV_MAGIC:
        return data
    if path.suffix == ".spv":
        raise CaptureError(f"expected SPIR-V in {path} (magic 0x07230203), found {data[:4].hex() or 'an empty file'}")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise CaptureError(f"expected GLSL text or SPIR-V in {path}, found neither") from None
    try:
        return shaders.compile_glsl(text, name=path.stem, source_path=path, include_dirs=[path.parent],
                                    target_env=target_env(like.spirv)).code
    except shaders.ShaderCompileError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CaptureError(f"expected {path} to compile, it does not: {first}") from None


def edit(folder, dispatches, shader, *, device=None, quick: bool = True) -> pd.DataFrame:
    """Replay each of `dispatches` (a number or several: e.g. every dispatch of one pipeline) of the capture with
    its captured shader and with `shader` (compiled once): two rows per dispatch (`shader`: 'captured' or the
    file; `pipeline`, `exact` against the captured outputs, `mismatch`, `reason`, `gpu_us_median`, `vs_captured`
    (the edited time over the captured one), `seconds` (the edited rows: replay, plus the compile on the first:
    the edit loop's cost))."""
    from .. import vk
    found = {d.dispatch: d for d in read_folder(folder)}
    wanted = [int(dispatches)] if isinstance(dispatches, (int, str)) else [int(n) for n in dispatches]
    unknown = [n for n in wanted if n not in found]
    if unknown or not wanted:
        raise CaptureError(f"expected dispatch numbers 0..{len(found) - 1} of {folder}, got {unknown or 'none'}")
    dev = device or vk.get_device()
    started = time.perf_counter()
    edited = load_shader(shader, found[wanted[0]])
    compile_s = time.perf_counter() - started
    rows = []
    for n in wanted:
        original = found[n]
        for label, code in (("captured", original.spirv), (str(shader), edited)):
            started = time.perf_counter()
            d = dataclasses.replace(original, spirv=code)
            row = {"dispatch": n, "shader": label, "pipeline": d.spirv_hash, **replay_one(dev, d, quick=quick)}
            row["seconds"] = time.perf_counter() - started + (compile_s if label != "captured" and n == wanted[0]
                                                              else 0.0)
            rows.append(row)
    frame = pd.DataFrame(rows)
    if "gpu_us_median" not in frame:  # nothing could run: the rows say why (`reason`), the times are NaN
        frame["gpu_us_median"] = float("nan")
    captured = frame[frame["shader"] == "captured"].set_index("dispatch")["gpu_us_median"]
    frame["vs_captured"] = frame["gpu_us_median"] / frame["dispatch"].map(captured)
    return frame
