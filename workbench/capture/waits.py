"""Host waits that a single-threaded replay cannot satisfy, found in the converted calls and made non-blocking in the
capture file.

A program that signals a timeline semaphore from one thread (``vkSignalSemaphore``) while another thread waits on it
(``vkWaitSemaphores``) can leave the wait *before* the signal in the capture: the layer writes a call's block when
the call returns, and the waiter may write its block first. GFXReconstruct 1.0.5's replay runs the calls in block
order on one thread and waits with an infinite timeout for every wait that returned ``VK_SUCCESS``: it never
returns (IREE's runtime does this on every submit: its completion thread signals the host semaphore the caller waits
on). A wait whose values no earlier call signals (a host signal, a queue submit's signal, the semaphore's initial
value) is rewritten as one that returned ``VK_TIMEOUT``, which the replay waits on with a timeout of 0; the signal
follows a few blocks later, as in the program. Only uncompressed captures are patched (`record` captures with
``GFXRECON_CAPTURE_COMPRESSION_TYPE=NONE``); another is left as it is and `patch` says why.
"""
from __future__ import annotations

import struct
from pathlib import Path

VK_SUCCESS, VK_TIMEOUT = 0, 2
FUNCTION_CALL_BLOCK = 4
COMPRESSED = 0x80000000  # format::MakeCompressedBlockType
WAIT_CALLS = {0x11184: "vkWaitSemaphores", 0x11172: "vkWaitSemaphoresKHR"}  # format::ApiCall_* ids
WAIT_ANY = 0x1  # VK_SEMAPHORE_WAIT_ANY_BIT
HEADER = struct.Struct("<4sIII")  # fourcc, major, minor, number of options
BLOCK = struct.Struct("<QI")  # size (after this header), type
OPTION = struct.Struct("<II")


def _flags(value) -> int:
    try:
        return int(str(value), 0)
    except ValueError:
        return WAIT_ANY if "ANY" in str(value) else 0


def stuck_waits(calls: list[dict]) -> list[int]:
    """The block indices of the host waits that returned VK_SUCCESS although no earlier call (in block order) signals
    the values they wait for: the waits a single-threaded replay would never return from."""
    values: dict = {}
    stuck = []
    for call in sorted(calls, key=lambda c: c.get("index", 0)):
        function = call.get("function") or {}
        name, args = function.get("name"), function.get("args") or {}
        if name in ("vkCreateSemaphore",):
            info = (args.get("pCreateInfo") or {}).get("pNext") or {}
            values[args.get("pSemaphore")] = int(info.get("initialValue", 0) or 0)
        elif name in ("vkSignalSemaphore", "vkSignalSemaphoreKHR"):
            info = args.get("pSignalInfo") or {}
            values[info.get("semaphore")] = max(values.get(info.get("semaphore"), 0), int(info.get("value", 0)))
        elif name in ("vkQueueSubmit2", "vkQueueSubmit2KHR"):
            for submit in args.get("pSubmits") or []:
                for info in submit.get("pSignalSemaphoreInfos") or []:
                    values[info.get("semaphore")] = max(values.get(info.get("semaphore"), 0), int(info.get("value", 0)))
        elif name == "vkQueueSubmit":
            for submit in args.get("pSubmits") or []:
                timeline = (submit.get("pNext") or {}).get("pSignalSemaphoreValues") or []
                for k, semaphore in enumerate(submit.get("pSignalSemaphores") or []):
                    value = int(timeline[k]) if k < len(timeline) else 1
                    values[semaphore] = max(values.get(semaphore, 0), value)
        elif name in WAIT_CALLS.values() and function.get("return") == "VK_SUCCESS":
            info = args.get("pWaitInfo") or {}
            reached = [values.get(s, 0) >= int(v) for s, v in zip(info.get("pSemaphores") or [],
                                                                   info.get("pValues") or [])]
            if reached and not (any(reached) if _flags(info.get("flags")) & WAIT_ANY else all(reached)):
                stuck.append(int(call["index"]))
    return stuck


def patch(capture: Path, indices: list[int]) -> str:
    """Rewrite the return value of the wait blocks `indices` (convert's block indices) of the capture file to
    VK_TIMEOUT, in place: "" when done (or nothing to do), else why not."""
    if not indices:
        return ""
    data = bytearray(Path(capture).read_bytes())
    fourcc, _major, _minor, options = HEADER.unpack_from(data, 0)
    offset = HEADER.size + options * OPTION.size
    wanted, index, patched = set(indices), -1, set()
    while offset + BLOCK.size <= len(data) and len(patched) < len(wanted):
        size, kind = BLOCK.unpack_from(data, offset)
        index += 1  # convert numbers the blocks from 0, in file order
        if index in wanted:
            if kind & COMPRESSED:
                return (f"not patched: block {index} is compressed (a capture made with GFXReconstruct's compression; "
                        "capture with GFXRECON_CAPTURE_COMPRESSION_TYPE=NONE)")
            api = struct.unpack_from("<I", data, offset + BLOCK.size)[0]
            end = offset + BLOCK.size + size
            if kind != FUNCTION_CALL_BLOCK or api not in WAIT_CALLS or \
                    struct.unpack_from("<i", data, end - 4)[0] != VK_SUCCESS:
                return f"not patched: block {index} is not a vkWaitSemaphores call that returned VK_SUCCESS"
            struct.pack_into("<i", data, end - 4, VK_TIMEOUT)
            patched.add(index)
        offset += BLOCK.size + size
    if patched != wanted:
        return f"not patched: blocks {sorted(wanted - patched)} not found in {capture}"
    Path(capture).write_bytes(bytes(data))
    return ""
