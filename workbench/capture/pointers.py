"""Buffer device addresses of a captured dispatch, rebased onto the replay's buffers.

A shader that takes pointers (``PhysicalStorageBuffer``, GL_EXT_buffer_reference) reads 64-bit addresses from its
push constants or from members of the buffers it binds (`workbench.vk.spirv.reflect`'s ``pointers``: where they
sit). The capture holds the addresses the program took (each vkGetBufferDeviceAddress* call's buffer and result,
`CapturedDispatch.addresses`) and each buffer's size. A pointer word whose captured value falls inside a captured
buffer's ``[address, address + size)`` is rewritten to the replay buffer's address plus the same offset; any other
value (null, a pointer into memory the capture does not know) is left as captured and named.

Where the replay takes a pointer's target from (`plan`):
- the range a binding the shader declares covers (one replay buffer for both: the descriptor and the pointer alias);
- else a range bound at a binding the shader does not declare (GFXReconstruct dumps every bound descriptor): made
  from its dump and compared like an output;
- else (a buffer no descriptor binds): a buffer of the captured size, zeros, its output not compared (named).
The after bytes of a binding that holds pointers are rebased the same way before they are compared.
No device here: `workbench.capture.replay.launch_of` makes the buffers and calls `Rebase` with their addresses.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .format import CapturedBinding, CapturedDispatch

WORD = 8  # a PhysicalStorageBuffer pointer: 64 bits, little-endian


class PointerError(Exception):
    """A pointer the runtime cannot rebase (the message says which and why); the replay names the dispatch."""


def words(data: bytes, offsets) -> list[tuple[int, int]]:
    """[(byte offset, 64-bit value)] of the pointer words at `offsets` that `data` holds whole."""
    return [(o, struct.unpack_from("<Q", data, o)[0]) for o in offsets if o + WORD <= len(data)]


@dataclass
class Plan:
    """Where a dispatch's pointers lead: made by `plan` from the capture alone."""
    words: dict = field(default_factory=dict)  # "push" or (set, binding) -> [(offset, captured value)]
    extra: list = field(default_factory=list)  # CapturedBindings the shader does not declare, made from their dumps
    unbound: dict = field(default_factory=dict)  # capture buffer id -> size: reached by pointer only, no dump
    loose: list = field(default_factory=list)  # (where, offset, value): left as captured (outside every buffer)

    def notes(self) -> list[str]:
        """What the replay could not check, one phrase each (for the row's `mismatch`)."""
        said = [f"buffer {b} ({size} bytes) reached by pointer only: no dump, replayed from zeros, not compared"
                for b, size in sorted(self.unbound.items())]
        said += [f"pointer {_where(where)} byte {offset} = {value:#x} is in no captured buffer: left as captured"
                 for where, offset, value in self.loose if value]
        return said


def _where(key) -> str:
    return "in push constants at" if key == "push" else f"in binding {key[0]}.{key[1]} at"


class Rebase:
    """Captured addresses -> the replay's: `place` each replay buffer made for a captured range, then `value` /
    `bytes` translate (values outside every placed range are left alone)."""

    def __init__(self, addresses: dict):
        # (address, end, capture buffer id), sorted; a later-taken overlapping range was already kept by the reader
        self.spans = sorted((int(a), int(a) + int(s), b) for b, (a, s) in addresses.items() if int(s) > 0)
        self.placed: dict = {}  # capture buffer id -> [(offset, size, replay address)]

    def locate(self, value: int):
        """(capture buffer id, offset) of a captured address, or None where no captured buffer holds it."""
        for start, end, buffer in self.spans:
            if start <= value < end:
                return buffer, value - start
        return None

    def place(self, buffer, offset: int, size: int, address: int) -> None:
        self.placed.setdefault(buffer, []).append((int(offset), int(size), int(address)))

    def value(self, value: int) -> int | None:
        """The replay's address for captured `value`, or None (left as captured)."""
        found = self.locate(value)
        if found is None:
            return None
        buffer, offset = found
        for start, size, address in self.placed.get(buffer, ()):
            if start <= offset < start + size:
                return address + offset - start
        return None

    def bytes(self, data: bytes | None, offsets) -> bytes | None:
        """`data` with the pointer words at `offsets` rebased (the others left as they are)."""
        if data is None or not offsets:
            return data
        out = bytearray(data)
        for offset, value in words(data, offsets):
            new = self.value(value)
            if new is not None:
                struct.pack_into("<Q", out, offset, new)
        return bytes(out)


def _covering(bindings, buffer, offset: int) -> CapturedBinding | None:
    """The first of `bindings` whose range of capture buffer `buffer` holds byte `offset`."""
    for c in bindings:
        size = size_of(c)
        if c.resource == buffer and size is not None and c.offset <= offset < c.offset + size:
            return c
    return None


def size_of(c: CapturedBinding) -> int | None:
    """The bytes a captured binding covers: its range, else its dump's length (None: neither known)."""
    if c.size is not None:
        return int(c.size)
    data = c.before if c.before is not None else c.after
    return None if data is None else len(data)


def plan(d: CapturedDispatch, reflection, captured: dict) -> Plan:
    """Where each pointer word of `d` (its push constants, and the 'before' bytes of the declared bindings that hold
    pointers, per `reflection.pointers`) leads; `captured`: {(set, binding): CapturedBinding} of the bindings the
    shader declares. PointerError where the capture holds no addresses, or a pointer reaches a part of a bound
    buffer outside the range bound (the runtime binds each range as a buffer of its own)."""
    if not d.addresses:
        raise PointerError("buffer device addresses: the capture's calls hold no vkGetBufferDeviceAddress result "
                           "(a folder converted before the reader kept them): capture it again")
    found = Plan()
    for key, offsets in sorted(reflection.pointers.items(), key=lambda kv: str(kv[0])):
        if key == "push":
            data = d.push_constants
        else:
            c = captured.get(key)
            data = None if c is None else (c.before if c.before is not None else c.after)
        found.words[key] = words(data or b"", offsets)
    declared = [c for c in captured.values() if c.kind not in ("storage_image", "sampled_image",
                                                                "combined_image_sampler")]
    ids = {id(c) for c in declared}
    undeclared = [c for c in d.bindings if id(c) not in ids and c.resource is not None
                  and (c.before is not None or c.after is not None) and c.kind in ("storage_buffer", "uniform_buffer")]
    rebase = Rebase(d.addresses)
    for key, pairs in found.words.items():
        for offset, value in pairs:
            where = rebase.locate(value)
            if where is None:
                found.loose.append((key, offset, value))
                continue
            buffer, into = where
            if _covering(declared, buffer, into) or _covering(found.extra, buffer, into) \
                    or buffer in found.unbound:
                continue
            bound_elsewhere = [c for c in declared + found.extra if c.resource == buffer]
            other = _covering(undeclared, buffer, into)
            if bound_elsewhere and other is None:
                c = bound_elsewhere[0]
                raise PointerError(f"pointer {_where(key)} byte {offset} reaches byte {into} of buffer {buffer}, "
                                   f"outside the range {c.offset}..{c.offset + (size_of(c) or 0)} bound at binding "
                                   f"{c.set}.{c.binding}: the runtime binds each range as a buffer of its own")
            if other is not None:
                found.extra.append(other)
            else:
                found.unbound[buffer] = int(d.addresses[buffer][1])
    return found
