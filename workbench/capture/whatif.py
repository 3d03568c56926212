"""The model-level what-if: every dispatch of a capture replayed in order, each reading what the dispatches before it
wrote, once with the captured shaders and once with an edited shader swapped in; which dispatches' outputs change.

    w = whatif.whatif("caps/model", 12, "my_conv.glsl")              # dispatch 12 runs my_conv.glsl
    w = whatif.whatif("caps/model", 12, "my_conv.glsl", pipeline=True)  # every dispatch of 12's pipeline does
    w.table        # a row per dispatch: edited, inputs_changed, changed (outputs vs the captured chain), ...
    w.outputs      # {dispatch: [(binding, captured-shader bytes, edited bytes)]} of what it wrote: the mismatch maps

    r = whatif.in_order("caps/model")           # the whole chain; the program's output (output-0.bin) byte for byte?
    r.outputs      # a row per output: its dispatch and binding, byte_exact, mismatches, max_abs, reason
    m = whatif.model_edit("caps/model", {pipeline_hash: spirv}, baseline=r)   # an edit through the whole model
    m.outputs, m.totals, m.table   # the output's difference; GPU µs both ways; the dispatches it reached

`capture.replay` runs each dispatch alone from its own captured inputs; here the inputs are the memory as the
replayed dispatches left it (a binding's bytes the chain has not written yet are the captured ones), so a change
travels as it would through the model. The chain with the captured shaders is checked against the capture itself
(`exact`: replaying the dispatches in order reproduces what the program computed), and by `in_order` against the
program's own output file. `model_edit` runs only what an edit reaches (a dispatch with its own shader and its
captured inputs computes its captured outputs), so one shader change through MobileNetV2's 598 dispatches runs 164.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .edit import load_shader
from .format import CapturedBinding, CapturedDispatch, CaptureError
from .microscope import select
from .replay import WRITABLE, NotReplayable, binding_mismatch, launch_of, resource_bytes, running

__all__ = ["WhatIf", "chain", "whatif", "InOrder", "in_order", "ModelEdit", "model_edit", "program_outputs",
           "output_binding", "output_difference"]


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


def _run(dev, d: CapturedDispatch, *, time_it: bool = False) -> tuple[list[tuple[CapturedBinding, bytes]],
                                                                      float | None]:
    """Run `d` once from the bytes its bindings hold: each written binding's bytes after it, and, with `time_it`,
    the dispatch's median GPU µs by the measuring method (`measure.sample_recording`, quick: a few samples after
    a warm-up; one run's time on a shared CPU device is mostly noise), else None."""
    from ..measure import sample_recording, sampling
    launch, outputs = launch_of(dev, d)
    with running(dev, launch) as launches, dev.record(label=f"what-if dispatch {d.dispatch}") as rec:
        launches.record(rec)
        rec.submit()
        written = [(c, resource_bytes(resource)[:len(c.after)]) for c, resource in outputs]
        gpu_us = None
        if time_it and rec.timestamps:
            gpu_us = float(np.median(sample_recording(rec, **sampling(True))[0])) / 1e3
        return written, gpu_us


def _swap_for(d: CapturedDispatch, swaps: dict) -> bytes | None:
    """The SPIR-V `swaps` gives dispatch `d` (keyed by its number, its pipeline hash or its captured SPIR-V), or
    None: none given, or the captured SPIR-V itself (no edit)."""
    for key in (d.dispatch, d.spirv_hash, d.spirv):
        if key in swaps:
            return swaps[key] if swaps[key] != d.spirv else None
    return None


def chain(dev, found: list[CapturedDispatch], swaps: dict | None = None, *, skip_unchanged: bool = False,
          time_it=False) -> list[dict]:
    """Replay `found` in order on `dev`, each dispatch reading the memory the ones before it wrote; a dispatch runs
    the SPIR-V `swaps` gives it (keyed by dispatch number, pipeline hash or captured SPIR-V bytes) where it gives one.
    Per dispatch {"dispatch", "inputs" ({label: bytes read}), "outputs" ([(binding, bytes)]), "gpu_us", "ran",
    "reason" (why it could not run; its outputs then stay as captured)}.

    `skip_unchanged`: a dispatch that keeps its captured shader and reads exactly its captured inputs is not run;
    its writable bindings take their captured bytes (what it computes, as the captured chain's exactness shows:
    `in_order`), so an edit costs only the dispatches it reaches. `time_it`: True times every dispatch run,
    "swapped" those running a swapped shader (`_run`), False none."""
    memory, rows = _Memory(), []
    for d in found:
        fed = [dataclasses.replace(b, before=memory.read(b)) for b in d.bindings]
        code = _swap_for(d, swaps or {})
        row = {"dispatch": d.dispatch, "inputs": {_label(b): b.before for b in fed}, "outputs": [], "gpu_us": None,
               "ran": True, "reason": ""}
        if skip_unchanged and code is None and all(f.before == (b.before if b.before is not None else b.after)
                                                   for f, b in zip(fed, d.bindings)):
            row.update(ran=False, outputs=[(b, b.after) for b in d.bindings if b.kind in WRITABLE
                                           and b.after is not None])
        else:
            run = dataclasses.replace(d, spirv=code if code is not None else d.spirv, bindings=fed)
            timed = time_it is True or (time_it == "swapped" and code is not None)
            try:
                row["outputs"], row["gpu_us"] = _run(dev, run, time_it=timed)
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


# --- the whole model: its output from the chain, and an edit's effect on it ---------------------------------------

def program_outputs(folder) -> list[bytes]:
    """The program's own outputs kept in a capture folder: ``output-0.bin``, ``output-1.bin``, … (ET-VK's
    executor_runner writes them; `etvk.model.capture_join.capture_program` keeps them beside the capture)."""
    found, i = [], 0
    while (Path(folder) / f"output-{i}.bin").is_file():
        found.append((Path(folder) / f"output-{i}.bin").read_bytes())
        i += 1
    return found


def output_binding(found: list[CapturedDispatch], expected: bytes) -> tuple[int, CapturedBinding, str]:
    """Where the program's output `expected` comes from: (dispatch number, binding, note). The host reads a model's
    output from a buffer the last dispatches write (ET-VK: its staging buffer, written by image_to_nchw), so it is
    the last storage buffer written whose captured bytes begin with `expected`; where none does, the last one at
    least as large, with a note that the capture's own bytes differ. CaptureError where no dispatch writes one."""
    buffers = [(d.dispatch, b) for d in found for b in d.bindings
               if b.kind == "storage_buffer" and b.after is not None and len(b.after) >= len(expected)]
    for number, b in reversed(buffers):
        if b.after[:len(expected)] == expected:
            return number, b, ""
    if not buffers:
        raise CaptureError(f"expected a dispatch writing a buffer of at least {len(expected)} bytes (the program's "
                           f"output), found none in {len(found)} dispatches")
    number, b = buffers[-1]
    return number, b, (f"no dispatch's captured bytes equal the program's output; dispatch {number} binding "
                       f"{_label(b)} (the last buffer written that is large enough) taken")


def output_difference(got: bytes, want: bytes, dtype=np.float32) -> dict:
    """Two outputs' bytes as `dtype` (the model's output type: float for a dequantized output): byte_exact, elements,
    mismatches (elements that differ), max_abs, mean_abs, max_ulp (float) / max_lsb (int), argmax_same."""
    from ..checks.mismatch import mismatch_report
    a, b = np.frombuffer(got, dtype), np.frombuffer(want, dtype)
    if a.shape != b.shape:
        raise CaptureError(f"expected outputs of the same size, got {len(got)} and {len(want)} bytes")
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    kind = "float" if np.issubdtype(a.dtype, np.floating) else "int8"
    report = mismatch_report(a, b, dtype_kind=kind)
    return {"byte_exact": got == want, "elements": int(a.size), "mismatches": int(report.count),
            "max_abs": float(diff.max()) if diff.size else 0.0, "mean_abs": float(diff.mean()) if diff.size else 0.0,
            f"max_{report.unit.lower()}": float(report.max_error) if report.count else 0.0,
            "argmax_same": bool(a.size == 0 or np.argmax(a) == np.argmax(b))}


@dataclass
class InOrder:
    """The captured dispatches replayed in order, each reading what the chain wrote: `table` (a row per dispatch:
    exact against the capture, mismatch, gpu_us of its one run), `outputs` (a row per program output: its dispatch
    and binding, byte_exact against the program's own output file, the difference, reason), `rows` (`chain`'s)."""

    table: pd.DataFrame
    outputs: pd.DataFrame
    rows: list = field(default_factory=list, repr=False)
    seconds: float = 0.0

    @property
    def exact(self) -> bool:
        return bool(len(self.outputs)) and bool(self.outputs["byte_exact"].all())

    def summary(self) -> pd.DataFrame:
        """A row per program output: `outputs` with the chain's dispatch count, how many reproduced the capture,
        its GPU µs (where timed) and seconds."""
        timed = [r["gpu_us"] for r in self.rows if r["gpu_us"] is not None]
        return self.outputs.assign(dispatches=len(self.table), dispatches_exact=int(self.table["exact"].sum()),
                                   gpu_us=round(sum(timed), 1) if timed else None, seconds=self.seconds)


def in_order(source, *, outputs: list[bytes] | None = None, dtype=np.float32, device=None,
             time_it: bool = False) -> InOrder:
    """Every dispatch of `source` (a capture folder, or a list of CapturedDispatch with `outputs` given) replayed in
    order with its captured shader from the capture's first inputs on, each reading the memory the chain left; the
    bytes of each program output (default: the folder's ``output-<i>.bin``, `program_outputs`) as the chain computed
    them, compared byte for byte with what the program wrote. Where they differ, `reason` names the first dispatch
    whose chain output differs from the capture (or that could not run), or says the capture itself differs.
    `time_it`: each dispatch's GPU µs in the chain (`_run`): the baseline `model_edit` compares an edit with."""
    from .. import vk
    started = time.perf_counter()
    found = select(source)
    expected = program_outputs(source) if outputs is None else list(outputs)
    if not expected:
        raise CaptureError(f"expected the program's output files (output-0.bin …) in {source}, found none")
    rows = chain(device or vk.get_device(), found, time_it=time_it)
    table = []
    for d, row in zip(found, rows):
        wrong = [binding_mismatch(c, got, c.after) for c, got in row["outputs"] if got != c.after]
        table.append({"dispatch": d.dispatch, "pipeline": d.spirv_hash, "exact": not row["reason"] and not wrong,
                      "mismatch": "; ".join(wrong), "gpu_us": row["gpu_us"], "reason": row["reason"]})
    table = pd.DataFrame(table)
    first_bad = table[~table["exact"]]
    by_number = {r["dispatch"]: r for r in rows}
    out_rows = []
    for i, want in enumerate(expected):
        number, binding, note = output_binding(found, want)
        got = dict((_label(c), g) for c, g in by_number[number]["outputs"]).get(_label(binding))
        reason = note
        if got is None:
            reason = f"dispatch {number} did not run: {by_number[number]['reason']}"
            got = binding.after
        got = got[:len(want)]
        if got != want and not reason and len(first_bad):
            bad = first_bad.iloc[0]
            reason = (f"dispatch {bad['dispatch']} is the first whose chained output differs from the capture: "
                      f"{bad['reason'] or bad['mismatch']}")
        out_rows.append({"output": i, "dispatch": number, "binding": _label(binding), "bytes": len(want),
                         **output_difference(got, want, dtype), "reason": reason})
    return InOrder(table, pd.DataFrame(out_rows), rows, round(time.perf_counter() - started, 3))


@dataclass
class ModelEdit:
    """An edit replayed through a whole capture (`model_edit`): `table` (a row per dispatch the edited chain ran:
    edited, inputs_changed, changed, bytes_changed; for the edited ones gpu_us_captured / gpu_us_edited and their
    ratio),
    `outputs` (a row per program output: the edited chain's output against the captured one: max_abs, mismatches,
    …), `totals` (dispatches edited / run / changed, the model's GPU µs both ways, seconds), `edited_outputs` (the
    output bytes of the edited chain); `mismatch(n)`: dispatch n's mismatch maps (made on demand: a map of a large
    binding takes tens of ms)."""

    table: pd.DataFrame
    outputs: pd.DataFrame
    totals: dict
    edited_outputs: list = field(default_factory=list, repr=False)
    written: dict = field(default_factory=dict, repr=False)  # {dispatch: [(binding, edited bytes)]} of those run

    def mismatch(self, dispatch: int) -> str:
        """The mismatch maps of a run dispatch's written bindings, edited against captured (`binding_mismatch`)."""
        if dispatch not in self.written:
            raise CaptureError(f"expected a dispatch the edited chain ran ({len(self.written)} of them), "
                               f"got {dispatch}")
        return "; ".join(binding_mismatch(c, got, c.after) for c, got in self.written[dispatch] if got != c.after)


def _written(row: dict, d: CapturedDispatch) -> list[tuple[CapturedBinding, bytes]]:
    """The bindings a chained dispatch wrote: their bytes change across it in the capture or in the chain (a
    read-only storage buffer comes back as it went in)."""
    captured_in = {_label(b): (b.before if b.before is not None else b.after) for b in d.bindings}
    return [(c, got) for c, got in row["outputs"]
            if got != row["inputs"][_label(c)] or c.after != captured_in[_label(c)]]


def model_edit(source, swaps: dict, *, outputs: list[bytes] | None = None, dtype=np.float32,
               baseline: InOrder | None = None, device=None, names: dict | None = None) -> ModelEdit:
    """The capture's dispatches replayed in order with `swaps` (SPIR-V keyed by dispatch number, pipeline hash or
    the captured SPIR-V bytes) from the first dispatch the edit reaches on; a dispatch that keeps its shader and
    reads its captured inputs is not run (`chain(skip_unchanged=True)`): its outputs are the captured ones, as the
    captured chain reproduces them (`in_order`). Compared with the capture: each run dispatch's written bindings
    (mismatch maps) and each program output (default `program_outputs`), as `dtype`.

    Times (GPU µs, `_run`'s method): each edited dispatch with the edit, on the inputs the edited chain gave it, and
    with its captured shader on its captured inputs — from `baseline` (an `in_order(time_it=True)` result of the
    same capture on the same device) where given, else run once more alone. The model's totals both ways: the
    baseline's sum with the edited dispatches' times swapped (`totals['over']` 'whole model'; the other dispatches
    run the same shader both ways), else the edited dispatches' sums ('edited dispatches')."""
    from .. import vk
    started = time.perf_counter()
    found = select(source)
    dev = device or vk.get_device()
    edited = [d.dispatch for d in found if _swap_for(d, swaps) is not None]
    if not edited:
        raise CaptureError(f"expected swaps that change dispatches or pipelines of the capture, none of its "
                           f"{len(found)} dispatches ({len({d.spirv_hash for d in found})} pipelines) is changed")
    expected = program_outputs(source) if outputs is None else list(outputs)
    rows = chain(dev, found, swaps, skip_unchanged=True, time_it="swapped")
    chain_s = time.perf_counter() - started
    base = {r["dispatch"]: r["gpu_us"] for r in baseline.rows} if baseline is not None else {}
    table = []
    written = {}
    for d, row in zip(found, rows):
        if not row["ran"]:
            continue
        written[d.dispatch] = _written(row, d)
        changed_bytes = sum(int(np.count_nonzero(np.frombuffer(got, np.uint8) != np.frombuffer(c.after, np.uint8)))
                            for c, got in written[d.dispatch])
        captured_us = None
        if d.dispatch in edited:
            captured_us = base.get(d.dispatch)
            if captured_us is None:
                try:
                    captured_us = _run(dev, d, time_it=True)[1]
                except Exception as exc:  # noqa: BLE001 - the row says why there is no captured time
                    row["reason"] = row["reason"] or f"captured shader: {exc}"
        captured_in = {_label(b): (b.before if b.before is not None else b.after) for b in d.bindings}
        table.append({"dispatch": d.dispatch, "pipeline": d.spirv_hash,
                      "variant": (names or {}).get(d.spirv_hash, ""), "edited": d.dispatch in edited,
                      "inputs_changed": row["inputs"] != captured_in, "changed": changed_bytes > 0,
                      "bytes_changed": changed_bytes, "gpu_us_captured": captured_us, "gpu_us_edited": row["gpu_us"],
                      "reason": row["reason"]})
    table = pd.DataFrame(table)
    result = ModelEdit(table, pd.DataFrame(), {}, [], written)
    table["vs_captured"] = pd.to_numeric(table["gpu_us_edited"]) / pd.to_numeric(table["gpu_us_captured"])
    by_number = {r["dispatch"]: r for r in rows}
    out_rows, edited_outputs = [], []
    for i, want in enumerate(expected):
        number, binding, note = output_binding(found, want)
        got = dict((_label(c), g) for c, g in by_number[number]["outputs"]).get(_label(binding), binding.after)
        got = got[:len(want)]
        edited_outputs.append(got)
        out_rows.append({"output": i, "dispatch": number, "binding": _label(binding), "bytes": len(want),
                         **output_difference(got, binding.after[:len(want)], dtype), "reason": note})
    timed = table[table["edited"]]
    captured_sum = float(pd.to_numeric(timed["gpu_us_captured"]).sum())
    edited_sum = float(pd.to_numeric(timed["gpu_us_edited"]).sum())
    whole = baseline is not None and all(v is not None for v in base.values())
    if whole:
        model_us = float(sum(base.values()))
        captured_total, edited_total = model_us, model_us - captured_sum + edited_sum
    else:
        captured_total, edited_total = captured_sum, edited_sum
    totals = {"dispatches": len(found), "edited": len(edited), "run": len(table),
              "changed": int(table["changed"].sum()), "over": "whole model" if whole else "edited dispatches",
              "gpu_us_captured": round(captured_total, 1), "gpu_us_edited": round(edited_total, 1),
              "chain_s": round(chain_s, 3), "seconds": round(time.perf_counter() - started, 3)}
    result.outputs, result.totals, result.edited_outputs = pd.DataFrame(out_rows), totals, edited_outputs
    return result
