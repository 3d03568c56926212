"""Replay a captured dispatch alone through the workbench's own runtime (`workbench.vk`): its SPIR-V and
specialization, its bindings filled with their captured 'before' bytes, its push constants and group counts; then
its outputs compared byte for byte with the captured 'after' bytes, and the dispatch timed with
`workbench.measure.sample_recording`."""
from __future__ import annotations

import dataclasses
import struct
from contextlib import contextmanager

import numpy as np

from .. import vk
from ..checks.mismatch import mismatch_report
from ..measure import sampling, summarize_ns
from ..vk import spirv as sp
from . import pointers
from .format import DISPATCH_CALLS, DUMPED_CALLS, NOT_DUMPED, CapturedDispatch, spec_values

# SPIR-V capabilities a compute shader declares → (the runtime's feature name, Vulkan's): replaying it needs them.
# None: a feature the runtime does not enable.
IMAGE_KINDS = (sp.STORAGE_IMAGE, sp.SAMPLED_IMAGE, sp.COMBINED_IMAGE_SAMPLER)
WRITABLE = (sp.STORAGE_BUFFER, sp.STORAGE_IMAGE)  # the kinds a dispatch may write: compared after it
# VK_FORMAT_* of a capture -> the runtime's image format names
VK_IMAGE_FORMATS = {f"VK_FORMAT_{name}": key for key, name in (
    ("rgba32f", "R32G32B32A32_SFLOAT"), ("rgba32i", "R32G32B32A32_SINT"), ("rgba16f", "R16G16B16A16_SFLOAT"),
    ("rgba8i", "R8G8B8A8_SINT"))}


class NotReplayable(Exception):
    """This dispatch uses something the runtime cannot run alone (the reason is the message)."""


def missing_features(dev, code: bytes) -> list[str]:
    """Vulkan's names of the features `code` declares (through its capabilities) that `dev` does not enable."""
    features = dev.info.features
    return [f.vulkan for f in sp.needed_features(code) if not (f.key and features.get(f.key))]


def launch_parameters(d: CapturedDispatch) -> tuple[sp.Reflection, tuple[int, int, int]]:
    """(reflection, local size) of a captured dispatch: the literal local size, or where the shader takes it from
    specialization constants (`Reflection.local_size_spec_ids`: 0..2 in ET-VK, 233..235 in ncnn, any ids), their
    captured values (their defaults in the SPIR-V where not captured; a literal axis as it is)."""
    reflection = sp.reflect(d.spirv)
    if not reflection.local_size_from_spec:
        return reflection, tuple(reflection.local_size or (1, 1, 1))
    ids = [sid for sid in reflection.local_size_spec_ids if sid is not None]
    words = {k: struct.pack("<I", v) for k, v in reflection.spec_defaults.items()}
    words.update(d.spec_words)
    values = spec_values(reflection.spec_constants, {k: words[k] for k in ids})
    return reflection, tuple(int(values[sid]) if sid is not None else default
                             for sid, default in zip(reflection.local_size_spec_ids, reflection.local_size_default))


def local_size_ids(reflection: sp.Reflection) -> set[int]:
    """The specialization constant ids that carry the local size (passed as the launch's local size, not as
    constants)."""
    return {sid for sid in (reflection.local_size_spec_ids or ()) if sid is not None}


def _check(d: CapturedDispatch, reflection: sp.Reflection, rebase: bool = False) -> dict:
    """{(set, binding): captured binding} for the shader's bindings; NotReplayable naming what is missing. A
    shader that reads pointers replays only where its caller rebases them (`rebase`: `launch_of` does)."""
    if d.command not in DISPATCH_CALLS:
        raise NotReplayable(f"{d.command}: expected vkCmdDispatch, vkCmdDispatchBase or vkCmdDispatchIndirect, "
                            "whose group counts the capture holds; this one is listed, not replayed")
    if min(d.groups) < 1:
        raise NotReplayable(f"{d.command} of {tuple(d.groups)} groups: "
                            + ("no group counts in the resource dump (GFXReconstruct reads them from the indirect "
                               "buffer when it dumps the dispatch)" if d.command == "vkCmdDispatchIndirect" else
                               "no work to replay"))
    if d.submit is None:
        raise NotReplayable("recorded but never submitted in this capture (a command buffer recorded before a "
                            "trimmed range, or never run): no dump of its bindings")
    captured = {(b.set, b.binding): b for b in d.bindings}
    if reflection.pointers and not any(b.after is not None for b in d.bindings):
        where = "; ".join(f"{'push constants' if k == 'push' else f'binding {k[0]}.{k[1]}'} at bytes "
                          f"{', '.join(map(str, v))}" for k, v in reflection.pointers.items())
        raise NotReplayable(f"buffer device addresses ({where}): no dump of its bindings — GFXReconstruct 1.0.5 "
                            "replays a capture's pointers as captured unless the capture device has "
                            "bufferDeviceAddressCaptureReplay (lavapipe has not), and its replay crashed")
    if reflection.pointers and not rebase:
        raise NotReplayable("buffer device addresses: rebased onto the runtime's buffers where a dispatch replays "
                            "alone (`capture replay`), not on this path")
    if not reflection.pointers and any(f.key == "buffer_device_address" for f in sp.needed_features(d.spirv)):
        raise NotReplayable("buffer device addresses: the shader declares PhysicalStorageBufferAddresses but holds "
                            "no pointer where the reflection looks (push constants, members of bound blocks): its "
                            "addresses come from integers or runtime arrays, which the replay cannot rebase (run as "
                            "captured, they would be dereferenced on this device)")
    if d.command not in DUMPED_CALLS and not any(b.after is not None for b in d.bindings):
        raise NotReplayable(NOT_DUMPED)
    for b in reflection.bindings:
        c = captured.get((b.set, b.binding))
        if c is None and b.set in d.descriptor_buffer_sets:
            raise NotReplayable(f"binding {b.set}.{b.binding} ({b.name}) comes from a descriptor buffer "
                                "(VK_EXT_descriptor_buffer): its descriptors are bytes of a buffer, which neither "
                                "GFXReconstruct's dump nor the reader decodes")
        if c is None:
            raise NotReplayable(f"binding {b.set}.{b.binding} ({b.name}) was not bound at the dispatch")
        if c.kind not in (sp.STORAGE_BUFFER, sp.UNIFORM_BUFFER, *IMAGE_KINDS):
            raise NotReplayable(f"binding {b.set}.{b.binding} is a {c.kind}: the runtime binds storage and uniform "
                                "buffers, storage, sampled and combined-sampler images")
        if c.kind in IMAGE_KINDS:
            image_format(c)
        if c.source.startswith(("stale dump", "no dump")):
            raise NotReplayable(c.source)
        if c.after is None or (c.kind in WRITABLE and c.before is None):
            raise NotReplayable(f"binding {b.set}.{b.binding} ({b.name}) has no dump "
                                f"{'after' if c.after is None else 'before'} the dispatch")
    return captured


def image_format(c) -> str:
    """The runtime's name of a captured image binding's format; NotReplayable for one it does not make."""
    if c.format not in VK_IMAGE_FORMATS or c.extent is None:
        raise NotReplayable(f"binding {c.set}.{c.binding} is a {c.format or 'format-less'} image: the runtime makes "
                            f"{', '.join(VK_IMAGE_FORMATS)} images of a known extent")
    return VK_IMAGE_FORMATS[c.format]


def _image(dev, c, name: str, captured_tiling: bool = False, arena=None):
    """The captured image re-made on `dev` (format and extent as captured; the runtime's optimal tiling, which a
    linear one reads the same through the shader, or with `captured_tiling` the captured one where the device can
    make it) and filled with its 'before' texels."""
    image = None
    if captured_tiling and c.tiling == "VK_IMAGE_TILING_LINEAR":
        try:
            image = dev.image(c.extent, image_format(c), name=name, tiling="linear", arena=arena)
        except ValueError:  # optional for 3-D images: a capture from another device
            image = None
    image = image or dev.image(c.extent, image_format(c), name=name, arena=arena)
    image.sampler_fields = c.sampler  # sampled through the program's own sampler
    data = c.before if c.before is not None else c.after
    if len(data) != image.nbytes:
        image.close()
        raise NotReplayable(f"binding {c.set}.{c.binding}: the dump holds {len(data)} bytes, a {c.format} image of "
                            f"extent {c.extent} {image.nbytes}")
    return image.upload(np.frombuffer(data, image.dtype).reshape(image.shape))


def resource_bytes(resource) -> bytes:
    if isinstance(resource, vk.Image):
        return resource.download().tobytes()
    return resource.download(np.uint8).tobytes()


def binding_mismatch(binding, got: bytes, want: bytes) -> str:
    report = mismatch_report(np.frombuffer(got, np.uint8), np.frombuffer(want, np.uint8), dtype_kind="int8")
    return f"binding {binding.set}.{binding.binding}: {report.summary().replace('LSB', 'per byte')} (bytes)"


def launch_of(dev, d: CapturedDispatch) -> tuple[vk.Launch, list]:
    """The runtime's `vk.Launch` of a captured dispatch, its resources made on `dev` from the captured 'before'
    bytes: (launch, [(captured binding, its resource)] of the storage buffers and images to compare). The caller
    closes the resources (`launch.resources.values()`). NotReplayable where the runtime cannot run it alone."""
    reflection, local = launch_parameters(d)
    captured = _check(d, reflection, rebase=True)
    declared = {(b.set, b.binding): captured[(b.set, b.binding)] for b in reflection.bindings}
    try:
        pointing = pointers.plan(d, reflection, declared) if reflection.pointers else None
    except pointers.PointerError as exc:
        raise NotReplayable(str(exc)) from None
    addressed = pointing is not None  # every buffer made with an address, the pointers rebased onto them
    if addressed:
        dev.require("buffer_device_address")
    resources, outputs, made = {}, [], {}
    try:
        for b in reflection.bindings:
            c = captured[(b.set, b.binding)]
            data = np.frombuffer(c.before if c.before is not None else c.after, np.uint8)
            name = f"{b.set}.{b.binding}:{b.name}"
            if c.kind == sp.UNIFORM_BUFFER:
                resources[b.binding] = vk.Buffer(dev, max(len(data), 1), uniform=True, name=name,
                                                 device_address=True).upload(data) if addressed \
                    else dev.uniform(data, name=name)
            elif c.kind in IMAGE_KINDS:
                resources[b.binding] = _image(dev, c, name)
                if c.kind == sp.STORAGE_IMAGE:
                    outputs.append((c, resources[b.binding]))
            elif _shared_range(c, made) is not None:  # one range bound at two bindings (ncnn): one buffer for both
                resources[b.binding] = _shared_range(c, made)
            else:
                resources[b.binding] = made[(c.resource, c.offset, c.size)] = dev.buffer(data, name=name,
                                                                                         device_address=addressed)
                outputs.append((c, resources[b.binding]))
        if addressed:
            d = _rebased(dev, d, reflection, declared, pointing, resources, outputs, made)
    except BaseException:
        for r in resources.values():
            r.close()
        raise
    return bound_launch(d, reflection, local, resources), outputs


def _rebased(dev, d: CapturedDispatch, reflection, captured, pointing, resources, outputs, made) -> CapturedDispatch:
    """The buffers a pointer of `d` reaches that no declared binding made (`pointers.plan`: a range bound at a
    binding the shader does not declare, from its dump, compared; a buffer no descriptor binds, zeros, not compared)
    added to `resources` (keys that are no binding number: the recording leaves them out, the launch owns them);
    every pointer word rebased onto the replay's buffers: in the bytes uploaded, in the 'after' bytes `outputs`
    compare, and in the push constants of the dispatch returned."""
    rebase = pointers.Rebase(d.addresses)
    by_binding = {(b.set, b.binding): resources[b.binding] for b in reflection.bindings}
    for key, c in captured.items():
        if isinstance(by_binding.get(key), vk.Buffer):
            rebase.place(c.resource, c.offset, pointers.size_of(c), by_binding[key].device_address)
    for c in pointing.extra:
        buffer = _shared_range(c, made)
        if buffer is None:
            data = np.frombuffer(c.before if c.before is not None else c.after, np.uint8)
            buffer = made[(c.resource, c.offset, c.size)] = dev.buffer(
                data, name=f"{c.set}.{c.binding} (by pointer)", device_address=True)
            resources[f"binding {c.set}.{c.binding}, reached by pointer"] = buffer
            if c.kind == sp.STORAGE_BUFFER and c.before is not None:
                outputs.append((c, buffer))
        rebase.place(c.resource, c.offset, pointers.size_of(c), buffer.device_address)
    for buffer_id, size in pointing.unbound.items():
        buffer = dev.buffer(nbytes=max(size, 1), name=f"buffer {buffer_id} (by pointer only)", device_address=True)
        resources[f"buffer {buffer_id}, reached by pointer only"] = buffer
        rebase.place(buffer_id, 0, size, buffer.device_address)
    for key, offsets in reflection.pointers.items():
        if key == "push":
            continue
        c, buffer = captured[key], by_binding[key]
        buffer.upload(np.frombuffer(rebase.bytes(c.before if c.before is not None else c.after, offsets), np.uint8))
        outputs[:] = [(dataclasses.replace(o, after=rebase.bytes(o.after, offsets)) if o is c else o, r)
                      for o, r in outputs]
    return dataclasses.replace(d, push_constants=rebase.bytes(d.push_constants, reflection.pointers.get("push")))


def pointer_notes(d: CapturedDispatch, reflection: sp.Reflection) -> list[str]:
    """What a replay of `d` that rebased its pointers could not check (`pointers.Plan.notes`); [] for a dispatch
    without pointers, or one that did not replay."""
    if not reflection.pointers:
        return []
    bound = {(b.set, b.binding): b for b in d.bindings}
    try:
        return pointers.plan(d, reflection, {(b.set, b.binding): bound[(b.set, b.binding)]
                                             for b in reflection.bindings if (b.set, b.binding) in bound}).notes()
    except pointers.PointerError:
        return []


def _shared_range(c, made: dict):
    """The buffer already made for captured storage binding `c`'s range (the same capture buffer, offset and size:
    ncnn binds one blob at two bindings, its fp32 and fp16 views), or None; NotReplayable where `c` overlaps a range
    made before without being it (the runtime binds whole buffers)."""
    if c.resource is None or c.size is None:
        return None
    for (resource, offset, size), buffer in made.items():
        if resource != c.resource or size is None:
            continue
        if (offset, size) == (c.offset, c.size):
            return buffer
        if offset < c.offset + c.size and c.offset < offset + size:
            raise NotReplayable(f"binding {c.set}.{c.binding} covers bytes {c.offset}..{c.offset + c.size} of buffer "
                                f"{c.resource}, which overlap another binding's {offset}..{offset + size}: the runtime "
                                "binds each range as a buffer of its own")
    return None


def bound_launch(d: CapturedDispatch, reflection: sp.Reflection, local, resources: dict, label=None) -> vk.Launch:
    """The `vk.Launch` of captured dispatch `d` on `resources` (binding → resource): its SPIR-V, entry point, group
    counts, push constants padded to the shader's block, its specialization bytes as captured but the ids that
    carry the local size (passed as `local`)."""
    spec = {k: v for k, v in d.spec_words.items() if k not in local_size_ids(reflection)}
    push = d.push_constants[:reflection.push_constant_size]
    push += b"\0" * (reflection.push_constant_size - len(push))
    return vk.Launch(d.spirv, resources, groups=tuple(d.groups), push_constants=push, spec_constants=spec,
                     local_size=local, entry_point=d.entry_point, name=f"dispatch{d.dispatch}", label=label,
                     base_group=tuple(d.base_group))


@contextmanager
def running(dev, launch: vk.Launch):
    """A captured dispatch's `launch` (from `launch_of`, which made its resources) as a pipeline: yields the
    `vk.Launches`; the launch's resources are closed after, whatever happens."""
    try:
        with vk.Launches(dev, [launch]) as launches:
            yield launches
    finally:
        for resource in launch.resources.values():
            resource.close()


def replay_one(dev, d: CapturedDispatch, *, time_it: bool = True, quick: bool = False,
               cache: str | None = None) -> dict:
    """Run `d` alone on `dev` through the one launch path (`vk.Launch`) from its captured inputs:
    {"local_size", "exact", "mismatch", "reason", timing columns}. Timed in the cache regime `cache` (default: cold
    where the bytes it binds fit a GPU's last-level cache, `measure.cache.default_regime`): cold makes as many copies
    of its resources as the rotation needs, one per dispatch (`measure.sample_rotated`); the row says `cache`."""
    row = {"local_size": None, "exact": False, "mismatch": "", "reason": ""}
    try:
        reflection, row["local_size"] = launch_parameters(d)
        launch, outputs = launch_of(dev, d)
    except (NotReplayable, ValueError) as exc:  # CaptureError is a ValueError
        return {**row, "reason": str(exc)}
    except vk.VulkanError as exc:
        return {**row, "reason": f"runtime: {exc}"}
    try:
        with running(dev, launch) as launches, dev.record(label=f"capture dispatch {d.dispatch}") as rec:
            launches.record(rec)
            rec.submit()
            wrong = []
            for c, buf in outputs:
                got = resource_bytes(buf)[:len(c.after)]
                if got != c.after:
                    wrong.append(binding_mismatch(c, got, c.after))
            row.update(exact=not wrong, mismatch="; ".join((wrong or ["exact"]) + pointer_notes(d, reflection)))
            if time_it:
                gpu, host, regime = _timed(dev, d, launches, cache, quick)
                row.update(regime)
                stats = summarize_ns(gpu)
                row.update(gpu_us_median=stats["median_us"], gpu_us_p10=stats["p10_us"],
                           gpu_us_p90=stats["p90_us"], samples=stats["samples"],
                           host_us_median=float(np.median(host)) / 1e3 if len(host) else np.nan)
    except (vk.VulkanError, ValueError, TypeError) as exc:
        row["reason"] = f"runtime: {exc}"
    return row


def _timed(dev, d: CapturedDispatch, launches, cache, quick):
    """(gpu_ns, host_ns, the regime's columns) of a captured dispatch whose pipeline `launches` holds."""
    return time_chain(dev, [d], launches, cache=cache, quick=quick)


def time_chain(dev, ds, launches, *, cache=None, quick: bool = False, label: str | None = None):
    """(gpu_ns, host_ns, the regime's columns) of captured dispatches `ds` run one after another (a barrier before
    each, as `vk.Launches` records them), timed as one: each sample the time of the whole chain. `launches` (a
    `vk.Launches` of their `launch_of` launches) is the first set of resources, the others made from the captured
    bytes again, as many sets as the regime `cache` needs (default: cold where their bytes fit a GPU's last-level
    cache, `measure.cache.default_regime`); each set is dispatched in turn (`measure.sample_rotated`)."""
    from ..kernels.copy import flush_for
    from ..measure.cache import default_regime, rotation, sample_rotated
    working_set = max(16, sum(len(b.after or b"") for d in ds for b in d.bindings))
    rot = rotation(dev, working_set, cache or default_regime(dev, working_set), quick=quick)
    extra = []

    def record(rec, i):
        for j, launch in enumerate(sets[i]):
            launch.record(rec, launches.pipeline_of(j))
    try:
        for _ in range(rot.copies - 1):
            extra.append([])
            for d in ds:
                extra[-1].append(launch_of(dev, d)[0])
        sets = [launches.launches] + extra
        with flush_for(dev, rot) as flush:
            gpu, host, _ = sample_rotated(dev, rot, record, flush=flush, **sampling(quick),
                                          label=label or "capture dispatch " + "+".join(str(d.dispatch) for d in ds))
    finally:
        for launch in (launch for chain in extra for launch in chain):
            for resource in launch.resources.values():
                resource.close()
    return gpu, host, rot.columns()
