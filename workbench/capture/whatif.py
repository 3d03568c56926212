"""The model-level what-if: every dispatch of a capture replayed in order, each reading what the dispatches before it
wrote, once with the captured shaders and once with an edited shader swapped in; which dispatches' outputs change.

    w = whatif.whatif("caps/model", 12, "my_conv.glsl")              # dispatch 12 runs my_conv.glsl
    w = whatif.whatif("caps/model", 12, "my_conv.glsl", pipeline=True)  # every dispatch of 12's pipeline does
    w.table        # a row per dispatch: edited, inputs_changed, changed (outputs vs the captured chain), ...
    w.outputs      # {dispatch: [(binding, captured-shader bytes, edited bytes)]} of what it wrote: the mismatch maps

`capture.replay` runs each dispatch alone from its own captured inputs; here the inputs are the memory as the
replayed dispatches left it (a binding's bytes the chain has not written yet are the captured ones), so a change
travels as it would through the model. The chain with the captured shaders is checked against the capture itself
(`exact`: replaying the dispatches in order reproduces what the program computed).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .edit import load_shader
from .format import CapturedBinding, CapturedDispatch, CaptureError
from .microscope import select
from .replay import NotReplayable, resource_bytes, binding_mismatch, launch_of

__all__ = ["WhatIf", "chain", "whatif"]


@dataclass
class WhatIf:
    table: pd.DataFrame
    outputs: dict = field(default_factory=dict)  # {dispatch: [(label, captured-shader bytes, edited bytes)]} of
    # the bindings it wrote
    seconds: float = 0.0  # compile + both chains: the what-if loop's cost


class _Memory:
    """The bytes of each captured buffer / image as the chain left them, and which of them it has written."""

    def __init__(self):
        self.data: dict = {}
        self.known: dict = {}

    @staticmethod
    def key(b: CapturedBinding):
        return ("image" if b.extent else "buffer", b.resource)

    def read(self, b: CapturedBinding) -> bytes | None:
        captured = b.before if b.before is not None else b.after
        data = self.data.get(self.key(b))
        if captured is None or data is None:
            return captured
        out = np.frombuffer(captured, np.uint8).copy()
        end = min(b.offset + len(out), len(data))
        if end > b.offset:
            span = slice(b.offset, end)
            mask = self.known[self.key(b)][span]
            out[:end - b.offset][mask] = data[span][mask]
        return out.tobytes()

    def write(self, b: CapturedBinding, got: bytes) -> None:
        key, end = self.key(b), b.offset + len(got)
        if key not in self.data or len(self.data[key]) < end:
            grown, known = np.zeros(end, np.uint8), np.zeros(end, bool)
            if key in self.data:
                grown[:len(self.data[key])], known[:len(self.known[key])] = self.data[key], self.known[key]
            self.data[key], self.known[key] = grown, known
        self.data[key][b.offset:end] = np.frombuffer(got, np.uint8)
        self.known[key][b.offset:end] = True


def _label(b: CapturedBinding) -> str:
    return f"{b.set}.{b.binding}"


def _run(dev, d: CapturedDispatch) -> list[tuple[CapturedBinding, bytes]]:
    """Run `d` once from the bytes its bindings hold; each written binding's bytes after it."""
    from .. import vk
    launch, outputs = launch_of(dev, d)
    try:
        with vk.Launches(dev, [launch]) as launches, dev.record(label=f"what-if dispatch {d.dispatch}") as rec:
            launches.record(rec)
            rec.submit()
            return [(c, resource_bytes(resource)[:len(c.after)]) for c, resource in outputs]
    finally:
        for resource in launch.resources.values():
            resource.close()


def chain(dev, found: list[CapturedDispatch], swaps: dict[int, bytes] | None = None) -> list[dict]:
    """Replay `found` in order on `dev`, each dispatch reading the memory the ones before it wrote, dispatch n with
    SPIR-V `swaps[n]` where given: per dispatch {"dispatch", "inputs" ({label: bytes read}), "outputs" ([(binding,
    bytes)]), "reason" (why it could not run; its outputs then stay as captured)}."""
    memory, rows = _Memory(), []
    for d in found:
        fed = [dataclasses.replace(b, before=memory.read(b)) for b in d.bindings]
        run = dataclasses.replace(d, spirv=(swaps or {}).get(d.dispatch, d.spirv), bindings=fed)
        row = {"dispatch": d.dispatch, "inputs": {_label(b): b.before for b in fed}, "outputs": [], "reason": ""}
        try:
            row["outputs"] = _run(dev, run)
        except (NotReplayable, ValueError) as exc:
            row["reason"] = str(exc)
        except Exception as exc:  # noqa: BLE001 - a runtime failure of one dispatch is that row's reason
            row["reason"] = f"runtime: {exc}"
        for b, got in row["outputs"]:
            memory.write(b, got)
        rows.append(row)
    return rows


def whatif(source, dispatch: int, shader, *, pipeline: bool = False, device=None,
           names: dict | None = None) -> WhatIf:
    """Dispatch `dispatch` of `source` (a capture folder or a list of CapturedDispatch) with `shader` (a .glsl /
    .comp / .spv file, as `capture.edit` takes it) swapped in, or with `pipeline` every dispatch of its pipeline;
    every dispatch replayed in order with the captured shaders and with the swap (module docstring). Table columns:
    dispatch, pipeline, variant (`names` of the pipeline), edited, exact (the captured chain's outputs are the
    captured ones), inputs_changed (a binding's bytes differ from the captured chain's before it runs), changed (a
    binding it writes differs after), mismatch (per changed binding), reason."""
    from .. import vk
    started = time.perf_counter()
    found = select(source)
    by_number = {d.dispatch: d for d in found}
    if dispatch not in by_number:
        raise CaptureError(f"expected a dispatch number 0..{len(found) - 1}, got {dispatch}")
    target = by_number[dispatch]
    code = load_shader(shader, target)
    edited = [d.dispatch for d in found
              if d.dispatch == dispatch or (pipeline and d.spirv_hash == target.spirv_hash)]
    dev = device or vk.get_device()
    before = chain(dev, found)
    after = chain(dev, found, {n: code for n in edited})
    rows, outputs = [], {}
    for d, a, b in zip(found, before, after):
        want = {_label(c): c.after for c in d.bindings}
        exact = not a["reason"] and all(got == want[_label(c)] for c, got in a["outputs"])
        edited_out = {_label(c): got for c, got in b["outputs"]}
        # the bindings the dispatch wrote in either chain (a read-only storage buffer comes back as it went in)
        written = [(c, got, edited_out.get(_label(c))) for c, got in a["outputs"]
                   if got != a["inputs"][_label(c)] or edited_out.get(_label(c)) != b["inputs"][_label(c)]]
        outputs[d.dispatch] = [(_label(c), old, new) for c, old, new in written]
        wrong = [binding_mismatch(c, new, old) for c, old, new in written if new is not None and new != old]
        rows.append({"dispatch": d.dispatch, "pipeline": d.spirv_hash, "variant": (names or {}).get(d.spirv_hash, ""),
                     "edited": d.dispatch in edited, "exact": exact,
                     "inputs_changed": a["inputs"] != b["inputs"], "changed": bool(wrong),
                     "mismatch": "; ".join(wrong), "reason": a["reason"] or b["reason"]})
    return WhatIf(pd.DataFrame(rows), outputs, round(time.perf_counter() - started, 3))
