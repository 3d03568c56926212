"""The microscope on captured dispatches: each one replayed N times per local work-group size, optionally under the
validation layer's modes, every run compared bitwise with the captured output and with run 0.

    from workbench.capture import microscope
    microscope.shake("caps/prog", [1], runs=20)                  # one row per dispatch × local size
    microscope.shake("caps/prog", local_sizes=[(32, 1, 1)])      # these local sizes only
    microscope.shake("caps/prog", validate="sync,gpu")           # + the layer's messages, per row

CLI: ``workbench capture shake DIR [--dispatch N…] [--runs N] [--local-size X,Y,Z…] [--stress] [--validate MODES]``;
``workbench capture races DIR [--dispatch N…] [--layer built|FOLDER]``: `races` replays each dispatch once at its
captured local size under GPU-AV's shared-memory race detection (a layer from 2026, `toolchain.validation`; the
messages read by `checks.races`): one row per dispatch with `shared_memory`, `races` (how many reports), `found` (each
report in one line), `other_messages`, `clean` and the replay's `exact`.

What a run is: the dispatch alone through the one launch path (`replay.launch_of`), every binding it may write
(storage buffers and images) set back to its captured 'before' bytes first, then its outputs read. The families'
shake fills the output with a sentinel instead; a captured dispatch may read what it writes (``c[i] += …``) and may
leave part of an output alone, where the capture says the old bytes stay, so here the captured bytes are the
starting state. The rows are `workbench.checks.shake.shake_row`'s, over the bytes of the dispatch's outputs laid end
to end (binding order): bad_runs (runs that differ from the captured 'after' bytes), bad_fraction, bad_run_ids,
differs_from_run0, wrong_count (bytes wrong in some run), first_wrong; plus dispatch, pipeline, groups, exact (no bad
run), wrong_bindings (wrong bytes per binding) and reason.

Local sizes: only where the SPIR-V takes its local size from specialization constants (ET-VK's shaders do, on ids 0..2; ncnn's on 233..235);
a literal local size runs at that one only, and the row's `reason` says so. The groups follow so that the same
threads run: groups × local size of the capture, divided by the new local size (rounded up). The default sweep is
the captured size, then the shapes of `checks.shake` (1-D ones for a 1-D dispatch without images) that divide the
captured grid exactly (no thread runs that did not run in the capture) and fit the device; sizes given by hand are
taken as they are (a grid they do not divide gets more threads than the capture: GPU-assisted validation, ``gpu``,
then reports any access out of bounds).

Validation (`validate`: "on" for core checks, or modes "sync", "gpu", "printf" as `vk.validation_modes` takes them):
the runs go to a device of those modes on the same physical device, and each row gets `validation` (the modes),
`messages` (what the layer reported during that row's runs), `first_message` and, with printf, `printf_lines`.
"""
from __future__ import annotations

import dataclasses
import struct
import time

import numpy as np

from .. import vk
from ..checks.shake import (SIZES_1D, SIZES_3D, as3, check_local_sizes, repeated_runs, shake_row,
                            sweep_local_sizes)
from .format import CapturedDispatch, CaptureError, read_folder
from .replay import IMAGE_KINDS, NotReplayable, launch_of, launch_parameters, resource_bytes, running

__all__ = ["shake", "races", "select", "at_local_size", "default_local_sizes", "validating_device"]

MESSAGE_CHARS = 240  # first_message is cut here: the whole text stays in the device's validation_details()


def select(source, dispatches=None) -> list[CapturedDispatch]:
    """The dispatches of `source` (a capture folder, or a list of CapturedDispatch), all or those numbered in
    `dispatches`; CaptureError naming the numbers that are not there."""
    listed = isinstance(source, (list, tuple))
    found = list(source) if listed else read_folder(source)
    if dispatches is None:
        return found
    wanted = [int(n) for n in ([dispatches] if isinstance(dispatches, int) else dispatches)]
    have = {d.dispatch for d in found}
    unknown = sorted(set(wanted) - have)
    if unknown:
        raise CaptureError(f"expected dispatch numbers of {'the list' if listed else source} "
                           f"({', '.join(map(str, sorted(have))) or 'none'}), got {unknown}")
    return [d for d in found if d.dispatch in wanted]


def _grid(d: CapturedDispatch) -> tuple[int, int, int]:
    """The threads the captured dispatch ran in each axis: groups × local size."""
    return tuple(g * n for g, n in zip(d.groups, launch_parameters(d)[1]))


def at_local_size(d: CapturedDispatch, local) -> CapturedDispatch:
    """`d` with local size `local` (the specialization constants that carry it rewritten) and the groups that cover the captured
    grid; NotReplayable where the SPIR-V's local size is literal."""
    reflection, own = launch_parameters(d)
    local = as3(local)
    if local == tuple(own):
        return d
    if not reflection.local_size_from_spec:
        raise NotReplayable(f"the local size {'x'.join(map(str, own))} is literal in the SPIR-V (not taken from "
                            "specialization constants): it runs at that one only")
    data, entries = bytearray(d.spec_data), dict(d.spec_entries)
    for spec_id, value in zip(reflection.local_size_spec_ids, local):
        if spec_id is not None:
            entries[spec_id] = (len(data), 4)
            data += struct.pack("<I", value)
    groups = tuple(-(-n // size) for n, size in zip(_grid(d), local))
    return dataclasses.replace(d, spec_data=bytes(data), spec_entries=entries, groups=groups)


def default_local_sizes(device, d: CapturedDispatch) -> list[tuple]:
    """The captured local size, then `checks.shake`'s shapes that divide the captured grid in every axis and fit the
    device (the captured size alone where the SPIR-V fixes it)."""
    reflection, own = launch_parameters(d)
    if not reflection.local_size_from_spec:
        return [as3(own)]
    grid = _grid(d)
    one_d = tuple(own)[1:] == (1, 1) and not any(b.kind in IMAGE_KINDS for b in d.bindings)
    sizes = sweep_local_sizes(device, own, grid, SIZES_1D if one_d else SIZES_3D)
    return [s for s in sizes if all(n % size == 0 for n, size in zip(grid, s))]


def validating_device(device, validate):
    """A new device on `device`'s physical device with the validation layer and the modes `validate` names ("on" /
    "core" / True: core checks only; else what `vk.validation_modes` takes). The caller closes it."""
    core = validate is True or (isinstance(validate, str) and validate.strip().lower() in ("on", "core", "1", "true"))
    modes = frozenset() if core else vk.validation_modes(validate)
    return vk.Device(device.info.index, True, modes=modes)


def _restore(outputs) -> None:
    """Every compared binding back to its captured 'before' bytes."""
    for c, resource in outputs:
        data = c.before if c.before is not None else c.after
        if isinstance(resource, vk.Image):
            resource.upload(np.frombuffer(data, resource.dtype).reshape(resource.shape))
        else:
            resource.upload(np.frombuffer(data, np.uint8))


def _read(outputs) -> np.ndarray:
    return np.frombuffer(b"".join(resource_bytes(r)[:len(c.after)] for c, r in outputs), np.uint8).copy()


def _wrong_bindings(outputs, wrong) -> str:
    """'set.binding: N B' for each output with wrong bytes (wrong: the union over runs, over the outputs' bytes)."""
    parts, start = [], 0
    for c, _ in outputs:
        count = int(wrong[start:start + len(c.after)].sum())
        start += len(c.after)
        if count:
            parts.append(f"{c.set}.{c.binding}: {count} B")
    return "; ".join(parts)


def _runs(dev, d: CapturedDispatch, local, *, runs: int, stress: bool) -> dict:
    """One local size of `d`: its runs and their row (shake_row's columns, `wrong` over the outputs' bytes)."""
    import torch
    dl = at_local_size(d, local)
    launch, outputs = launch_of(dev, dl)
    start = time.perf_counter()
    with running(dev, launch) as launches:
        raw = repeated_runs(dev, outputs, launches.record, lambda: _read(outputs), runs=runs, stress=stress,
                            label=f"capture dispatch {d.dispatch}", fill=_restore)
    want = torch.from_numpy(np.frombuffer(b"".join(c.after for c, _ in outputs), np.uint8).copy())
    row = shake_row("capture", d.spirv_hash, local, [torch.from_numpy(r) for r in raw], want, stress=stress,
                    seconds=time.perf_counter() - start, raw=raw)
    row.update(groups=tuple(dl.groups), exact=row["bad_runs"] == 0,
               wrong_bindings=_wrong_bindings(outputs, row["wrong"]),
               reason="" if outputs else "the dispatch writes no storage buffer or image: nothing to compare")
    return row


def _layer_columns(dev) -> dict:
    """What the layer said on `dev` since the last call (taken: the messages are then forgotten)."""
    messages = dev.take_validation_messages()
    out = {"validation": ",".join(sorted(dev.modes)) or "core", "messages": len(messages),
           "first_message": str(messages[0])[:MESSAGE_CHARS] if messages else ""}
    if "printf" in dev.modes:
        out["printf_lines"] = len(dev.printf_messages(clear=True))
    return out


def shake(source, dispatches=None, *, device=None, runs: int = 20, local_sizes=None, stress: bool = False,
          validate=None):
    """Replay each dispatch of `source` (a capture folder or a list of CapturedDispatch; all, or the `dispatches`
    numbers) `runs` times per local size (module docstring): one row per dispatch × local size. `local_sizes`: None
    for each dispatch's default sweep, "captured" for its captured size only, else [(x, y, z), …] for each dispatch
    whose SPIR-V takes its local size from specialization constants. `stress`: a 64 MiB copy in each submission
    before the dispatch. `validate`: the layer's modes (module docstring); the rows then count its messages."""
    import pandas as pd
    if not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be a whole number >= 1, got {runs!r}")
    found = select(source, dispatches)
    base = device or vk.get_device()
    given = None
    if local_sizes is not None and local_sizes != "captured":
        given = check_local_sizes(base, local_sizes)
    dev = validating_device(base, validate) if validate is not None else base
    rows = []
    try:
        if validate is not None:
            _layer_columns(dev)  # what came before the shake is not this shake's
        for d in found:
            rows += _shake_dispatch(dev, d, given, local_sizes == "captured", runs=runs, stress=stress,
                                    layer=validate is not None)
    finally:
        if dev is not base:
            dev.close()
    frame = pd.DataFrame(rows)
    frame["exact"] = frame["exact"].fillna(False).astype(bool)
    return frame


def _shake_dispatch(dev, d: CapturedDispatch, given, captured_only: bool, *, runs: int, stress: bool,
                    layer: bool) -> list[dict]:
    head = {"dispatch": d.dispatch, "pipeline": d.spirv_hash}
    try:
        reflection, own = launch_parameters(d)
    except ValueError as exc:  # CaptureError is one
        return [{**head, "exact": False, "reason": str(exc)}]
    note = ""
    if captured_only or not reflection.local_size_from_spec:
        if not captured_only:
            note = (f"the local size {'x'.join(map(str, own))} is literal in the SPIR-V (not from specialization "
                    "constants): not varied")
        sizes = [as3(own)]
    else:
        sizes = given or default_local_sizes(dev, d)
    rows = []
    for local in sizes:
        row = {**head, "local_size": "x".join(map(str, local)), "runs": runs}
        try:
            row.update(_runs(dev, d, local, runs=runs, stress=stress))
            row["reason"] = "; ".join(r for r in (row.get("reason"), note) if r)
        except (NotReplayable, ValueError) as exc:
            row.update(exact=False, reason=str(exc))
        except vk.VulkanError as exc:
            row.update(exact=False, reason=f"runtime: {exc}")
        row.update(dispatch=d.dispatch, pipeline=d.spirv_hash)  # shake_row's kernel / variant columns go below
        row.pop("kernel", None), row.pop("variant", None)
        if layer:
            row.update(_layer_columns(dev))
        rows.append(row)
    return rows


def races(source, dispatches=None, *, layer, device=None, runs: int = 1):
    """Each dispatch of `source` replayed `runs` times at its captured local size under GPU-AV with shared-memory
    race detection, through the validation layer in the folder `layer` (`toolchain.validation.layer_dir()`): one
    row per dispatch (module docstring). A dispatch whose SPIR-V declares no shared variable runs too (the layer's
    other GPU-AV checks still speak) and says so in `shared_memory`."""
    import pandas as pd
    from ..checks import races as race_check
    found = select(source, dispatches)
    base = device or vk.get_device()
    dev = race_check.race_device(base, layer)
    rows = []
    try:
        race_check.take(dev)
        for d in found:
            shared = race_check.uses_shared_memory(d.spirv) if d.spirv else None
            row = _shake_dispatch(dev, d, None, True, runs=runs, stress=False, layer=False)[0]
            said = race_check.take(dev)
            rows.append({"dispatch": d.dispatch, "pipeline": d.spirv_hash, "local_size": row.get("local_size"),
                         "groups": row.get("groups"), "shared_memory": shared, "races": len(said["races"]),
                         "found": " | ".join(dict.fromkeys(said["races"])),
                         "other_messages": " | ".join(dict.fromkeys(said["other"])),
                         "clean": not said["races"] and not said["other"] and not row.get("reason"),
                         "exact": bool(row.get("exact")), "reason": row.get("reason", "")})
    finally:
        dev.close()
    return pd.DataFrame(rows)
