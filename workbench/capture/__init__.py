"""Every dispatch of any Vulkan compute program: captured with GFXReconstruct, listed, replayed alone.

    from workbench import capture
    capture.run(["python", "prog.py"], "caps/prog")     # under the capture layer; convert; dump bindings
    capture.process("phone.gfxr", "caps/phone")         # the same from a capture file made elsewhere
    capture.open("caps/prog")                           # DataFrame, one row per dispatch
    capture.dispatches("caps/prog")                     # [CapturedDispatch]: SPIR-V, constants, bindings' bytes
    capture.replay("caps/prog", [0, 2])                 # each alone through workbench.vk: exact?, mismatch, time
    capture.edit("caps/prog", 1, "mine.glsl")           # dispatch 1 with another shader: exact?, time vs captured

CLI: ``workbench capture run --out DIR -- COMMAND…``, ``workbench capture list DIR``,
``workbench capture replay DIR [--dispatch N --shader FILE]``.

record.py runs the program and GFXReconstruct's tools (built by ``workbench.toolchain.gfxreconstruct``,
``./setup.sh capture``); format.py reads what they wrote into :class:`CapturedDispatch` (no tool needed: a
capture folder moves to another machine and is read there); replay.py runs one dispatch through the runtime.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .edit import edit
from .format import CapturedBinding, CapturedDispatch, CaptureError, read_folder, spec_values
from .record import process, run, tools
from .replay import launch_parameters, missing_features, replay_one

__all__ = ["CaptureError", "CapturedBinding", "CapturedDispatch", "run", "process", "tools", "open", "listing",
           "dispatches", "replay", "edit", "manifest"]


def dispatches(folder) -> list[CapturedDispatch]:
    """Every dispatch of a capture folder, in block order (see `workbench.capture.format`)."""
    return read_folder(folder)


def manifest(folder) -> dict:
    """The capture folder's capture.json ({} where it has none, as in a folder assembled by hand)."""
    path = Path(folder) / "capture.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _binding_text(b: CapturedBinding) -> str:
    size = f" {b.size} B" if b.size is not None else ""
    fmt = f" {b.format}" if b.format else ""
    extent = f" {'x'.join(map(str, b.extent))}" if b.extent else ""
    return f"{b.set}.{b.binding} {b.kind}{size}{fmt}{extent}"


def _row(d: CapturedDispatch, names: dict | None) -> dict:
    try:
        reflection, local = launch_parameters(d)
        spec = ", ".join(f"{k}={v}" for k, v in spec_values(reflection.spec_constants, d.spec_words).items())
    except ValueError as exc:  # CaptureError is one
        local, spec = None, f"unreadable: {exc}"
    return {
        "dispatch": d.dispatch, "block": d.index, "command": d.command, "submit": d.submit,
        "command_buffer": d.command_buffer,
        "pipeline": d.spirv_hash, "variant": (names or {}).get(d.spirv_hash, ""), "pipeline_id": d.pipeline,
        "entry_point": d.entry_point, "spec_constants": spec,
        "spec_bytes": " ".join(f"{k}:{v.hex()}" for k, v in d.spec_words.items()),
        "push_constants": d.push_constants.hex(), "push_bytes": len(d.push_constants),
        "bindings": "; ".join(_binding_text(b) for b in d.bindings), "n_bindings": len(d.bindings),
        "binding_bytes": sum(b.size or 0 for b in d.bindings),
        "groups": tuple(d.groups), "local_size": local, "spirv_bytes": len(d.spirv),
    }


def open(folder, names: dict | None = None) -> pd.DataFrame:  # noqa: A001 (capture.open reads a capture)
    """One row per dispatch: order, block, queue submit, command buffer, pipeline (its SPIR-V's sha256, first 16
    hex digits; `names` maps such a hash to a label, e.g. ET-VK's shader variant, in column `variant`), entry
    point, specialization constants as captured (decoded by the SPIR-V's types; the ids that carry the local size
    where the shader takes it from them: 0..2 in ET-VK, 233..235 in ncnn) and their bytes, push constants (hex), each
    binding (set.binding kind size [format]), group counts, local size."""
    return listing(read_folder(folder), names)


def listing(found: list[CapturedDispatch], names: dict | None = None) -> pd.DataFrame:
    """`open`'s rows of dispatches already read (`dispatches`)."""
    return pd.DataFrame([_row(d, names) for d in found])


def replay(folder, dispatches=None, *, device=None, quick: bool = False, time_it: bool = True,
           names: dict | None = None, show_progress: bool = False) -> pd.DataFrame:
    """Run each dispatch (all, or the `dispatches` numbers) alone through the runtime from its captured inputs and
    compare byte for byte with its captured outputs: one row per dispatch with `exact` (bool), `mismatch` (per
    wrong binding, the mismatch summary over its bytes), `reason` (why it could not run, where it could not) and
    the time (`replay.replay_one`: cold where the dispatch's bytes fit the last-level cache, the `cache` columns;
    `quick`: a few samples), and the device, driver and commit
    columns every measurement row carries (`workbench.measure.environment`)."""
    from .. import vk
    from ..measure import environment, progress
    found = read_folder(folder)
    if dispatches is not None:
        wanted = [int(n) for n in dispatches]
        unknown = sorted(set(wanted) - {d.dispatch for d in found})
        if unknown:
            raise CaptureError(f"expected dispatch numbers 0..{len(found) - 1} of {folder}, got {unknown}")
        found = [d for d in found if d.dispatch in wanted]
    dev = device or vk.get_device()
    lacking = {}
    for d in found:
        for feature in missing_features(dev, d.spirv):
            lacking.setdefault(feature, []).append(d.dispatch)
    if lacking:
        needs = "; ".join(f"{f} (dispatch{'es' if len(n) > 1 else ''} {', '.join(map(str, n[:6]))}"
                          f"{', …' if len(n) > 6 else ''})" for f, n in lacking.items())
        raise CaptureError(f"expected a device with the features the captured shaders declare: {needs}; found "
                           f"{dev.info.name} without them: replay the other dispatches (--dispatch) or on a device "
                           "that has them")
    rows, env = [], environment(dev)
    for d in progress(found, "replay", enabled=show_progress):
        rows.append({"dispatch": d.dispatch, "pipeline": d.spirv_hash, "variant": (names or {}).get(d.spirv_hash, ""),
                     "groups": tuple(d.groups), **replay_one(dev, d, time_it=time_it, quick=quick), **env})
    frame = pd.DataFrame(rows)
    for column in REPLAY_TIMING_COLUMNS:  # every row has them, NaN where nothing was timed (no replayable dispatch)
        if column not in frame:
            frame[column] = float("nan")
    frame["exact"] = frame["exact"].astype(bool) if len(frame) else frame.get("exact", pd.Series(dtype=bool))
    return frame


#: The timing columns of every `replay` row (NaN where the dispatch could not run or was not timed).
REPLAY_TIMING_COLUMNS = ("gpu_us_median", "gpu_us_p10", "gpu_us_p90", "samples", "host_us_median", "cache")
