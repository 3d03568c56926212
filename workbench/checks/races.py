"""Shared-memory data races as GPU-assisted validation reports them (the Khronos layer from 2026: Vulkan-
ValidationLayers PRs #11717, #11780; `toolchain.validation` builds one): which of the layer's messages are races, one
line each, and the device that runs dispatches under the check.

    from workbench.checks import races
    dev = races.race_device(base_device, layer_folder)    # GPU-AV on, the newer layer; the caller closes it
    ... run dispatches on dev ...
    found = races.take(dev)                              # {"races": [one line each], "other": [one line each]}

The layer instruments every load, store, atomic and barrier on a Workgroup (``shared``) variable and, after the
dispatch, reports a race as ``SharedMemoryDataRace-RaceOnStore`` / ``-RaceOnLoad`` / ``-RaceOnLoadStoreVsAtomic`` /
``-RaceOnAtomic``: "A data race was detected on the shared memory variable "s" in local invocation index 5 while
performing a load operation. (Likely against local invocation index 6)", then the source line where the SPIR-V has
one. What it assumes (its setting's own words): ``barrier()`` is the only shared-memory synchronisation; atomics and
plain accesses to the same location without a barrier between may be reported falsely. It checks the invocations
that ran, in the order the device ran them: a clean run is evidence for those launch parameters, not a proof.
"""
from __future__ import annotations

import re

from .. import vk

__all__ = ["RACE_ID", "is_race", "race_line", "race_device", "take", "uses_shared_memory"]

RACE_ID = "SharedMemoryDataRace"
LINE_CHARS = 300


def is_race(message) -> bool:
    """A `vk.LayerMessage` (or its text) that reports a shared-memory data race."""
    text = f"{getattr(message, 'message_id', '')} {getattr(message, 'text', message)}"
    return RACE_ID in text or "data race was detected on the shared memory" in text


def race_line(message) -> str:
    """One line of a layer message: its id, the race's sentence(s) and the source line where the layer gives one."""
    text = str(getattr(message, "text", message))
    mid = getattr(message, "message_id", "")
    m = re.search(r"A data race was detected.*?\)", text, re.S)
    body = m.group(0) if m else text
    src = re.search(r"(?:Shader validation error occurred at |at )?([\w./-]+\.(?:glsl|comp|glslh|hlsl):\d+)", text)
    line = " ".join(f"{mid + ': ' if mid else ''}{body}".split())
    if src and src.group(1) not in line:
        line += f" [{src.group(1)}]"
    return line[:LINE_CHARS]


def uses_shared_memory(code: bytes) -> bool:
    """Does the SPIR-V module declare a Workgroup (``shared``) variable?"""
    from .lint import OP_VARIABLE, SC_WORKGROUP, parse
    return any(i.opcode == OP_VARIABLE and i.operands[2] == SC_WORKGROUP for i in parse(code))


def race_device(base, layer: str) -> "vk.Device":
    """A new device on `base`'s physical device with GPU-assisted validation through the validation layer in the
    folder `layer` (the race check is on by default there). The caller closes it."""
    if layer is None:
        raise ValueError("the race check needs a validation layer from 2026 (Debian 12's 1.3.239 has no race "
                         "detection): pass its folder, e.g. workbench.toolchain.validation.layer_dir()")
    dev = vk.Device(base.info.index, True, modes={"gpu"}, layer=str(layer))
    version = dev.instance.layer_version or "?"
    if tuple(int(v) for v in version.split(".")[:2]) < (1, 4):
        dev.close()
        raise vk.ValidationError(f"expected a validation layer from 1.4.3xx (GPU-AV race detection) in {layer}, "
                                 f"found {version}")
    dev.take_validation_messages()  # what the layer says while it sets GPU-AV up is no dispatch's
    return dev


def take(dev) -> dict:
    """The layer's messages on `dev` since the last call, taken: {"races": [...], "other": [...]}, one line each."""
    messages = dev.take_validation_messages()
    return {"races": [race_line(m) for m in messages if is_race(m)],
            "other": [race_line(m) for m in messages if not is_race(m)]}
