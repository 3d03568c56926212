"""A capture's dispatches timed the way the runtime submitted them: in their order, in one command buffer, before
each the barriers the program recorded there (`barriers="captured"`: its stage masks, its per-buffer and per-image
barriers and image layouts, images made with the captured tiling where the device can; "light": a compute-and-transfer
memory barrier before each; "full": all commands), the start timestamp before them (ET-VK's placement: `vk` records it
with ``barrier_timed``), every buffer and image the dispatches share made once and filled with what the first dispatch
to use it read, so each dispatch reads what the ones before it wrote (the same data as the captured run, and the
same cache state: a tensor written just before is read from the cache, as in the runtime). Each dispatch's own time
comes from its timestamps over repeated submits of the whole chain (`measure.sample_each`).

    rows = time_in_order(device, capture.dispatches("caps/mobilenet_v2"))   # a row per dispatch

A dispatch the runtime cannot replay (`replay.NotReplayable`) is left out of the chain with its reason; `exact`
says whether, after one submit, every resource the chain wrote holds the capture's last 'after' bytes for it.
"""
from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pandas as pd

from .. import vk
from ..measure import environment, sample_each, summarize_ns
from ..vk import spirv as sp
from .format import CapturedDispatch, _resource_key
from .replay import (IMAGE_KINDS, WRITABLE, NotReplayable, _check, _image, bound_launch, launch_parameters,
                     resource_bytes)

WAY = {"way": "in-order", "timestamps": "etvk", "barriers": "captured", "between": "in order", "back_to_back": 1}
BARRIERS = ("captured", "light", "full")
# the chain's resources bound into one arena (as VMA does ET-VK's), each its own, or each at its captured place
# (the program's allocations re-made, every buffer and image at its offset there: tensors it aliased share memory)
MEMORY = ("pooled", "own", "captured")
BUSY_CHAINS = 20  # a burst's warm-up: the timed chains this many times a submit (a 60 µs model's chain: ~1 ms)


def _initial_layouts(chain: list, made: dict) -> tuple:
    """A `vk.Barrier` moving each image of the chain from GENERAL to the layout the capture had it in when the chain
    began (what its first barrier moves it from, or else what its first descriptor names), or () if none moves."""
    first = {}
    for d, reflection, captured, _ in chain:
        for b in d.barriers or ():
            for image, _, _, old, _ in b["images"]:
                first.setdefault(("image", image), old)
        for b in reflection.bindings:
            c = captured[(b.set, b.binding)]
            if c.image is not None and c.layout:
                first.setdefault(("image", c.image), c.layout)
    keep = (vk.enum("VK_IMAGE_LAYOUT_GENERAL"), vk.enum("VK_IMAGE_LAYOUT_UNDEFINED"))
    moves = tuple((made[key], 0, ACCESS, keep[0], _layout(layout))
                  for key, layout in first.items() if key in made and _layout(layout) not in keep)
    return (vk.Barrier(STAGES, STAGES, images=moves),) if moves else ()


ACCESS = vk.enum("VK_ACCESS_SHADER_READ_BIT") | vk.enum("VK_ACCESS_SHADER_WRITE_BIT")
STAGES = vk.enum("VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT")


def _captured_barriers(d: CapturedDispatch, made: dict) -> tuple:
    """`d`'s captured barriers (`format._barrier`) as `vk.Barrier`s over the chain's resources (`made`); entries
    for resources no dispatch of the chain binds are left out (their stage masks stay)."""
    out = []
    for b in d.barriers or ():
        buffers = tuple((r, s, t) for buffer, s, t in b["buffers"]
                        for key, r in made.items() if key[0] == "buffer" and key[1] == buffer)
        images = tuple((made[("image", image)], s, t, _layout(old), _layout(new))
                       for image, s, t, old, new in b["images"] if ("image", image) in made)
        out.append(vk.Barrier(b["src_stages"], b["dst_stages"], tuple(b["memory"]), buffers, images))
    return tuple(out)


def _layout(name) -> int:
    """A converted layout (its name, or its number where convert wrote one) as a VK_IMAGE_LAYOUT_* value."""
    try:
        return vk.enum(name)
    except ValueError:
        raise NotReplayable(f"expected a VK_IMAGE_LAYOUT_* in a captured barrier, found {name!r}") from None


def _resources(dev, chain: list, captured_tiling: bool = False, arena=None, placed: bool = False) -> dict:
    """{resource key: the runtime's buffer or image}: one per captured resource, sized for its largest binding,
    filled with the bytes the first dispatch to bind it read; images with the captured tiling where
    `captured_tiling` and the device can make it; all bound into `arena` where one is given, with `placed` each at
    its captured place (`vk.Arena.at`), made last-used first so that where two share memory the bytes of the one
    used first are there when the chain starts."""
    first, largest, samplers = {}, {}, {}
    for d, reflection, captured, _ in chain:
        for b in reflection.bindings:
            c = captured[(b.set, b.binding)]
            key = _resource_key(c)
            data = c.before if c.before is not None else c.after
            first.setdefault(key, (c, data))
            largest[key] = max(largest.get(key, 0), len(data))
            if c.sampler:
                samplers.setdefault(key, c.sampler)
    made = {}
    try:
        for key, (c, data) in (reversed(first.items()) if placed else first.items()):
            name = f"capture {key[0]} {key[1]}"
            where = arena
            if placed and c.memory is not None:
                memory_id, size, type_index, _ = c.memory
                where = arena.at(memory_id, size, type_index, _place(c)[1])
            elif placed:
                arena.unplaced += 1
            if c.kind in IMAGE_KINDS:
                made[key] = _image(dev, c, name, captured_tiling, where)
                made[key].sampler_fields = samplers.get(key)  # sampled through the program's own sampler
            else:
                raw = np.zeros(largest[key], np.uint8)
                raw[:len(data)] = np.frombuffer(data, np.uint8)
                made[key] = dev.uniform(raw, name=name, arena=where) if c.kind == sp.UNIFORM_BUFFER \
                    else dev.buffer(raw, name=name, arena=where)
    except BaseException:
        for r in made.values():
            r.close()
        raise
    return made


def _place(c) -> tuple | None:
    """(captured memory id, start) of a binding's bytes where the program bound them (a buffer's descriptor offset
    on top of the buffer's place), None where the capture kept no place."""
    if c.memory is None:
        return None
    return c.memory[0], c.memory[3] + (0 if c.kind in IMAGE_KINDS else c.offset)


def _overwritten(chain: list, made: dict) -> set:
    """Keys of resources placed in memory that another resource, written later in the chain, shares: their final
    bytes are the other's, not theirs (ET-VK's aliased tensors), so the exactness check passes over them."""
    span, written = {}, {}
    for k, (d, reflection, captured, _) in enumerate(chain):
        for b in reflection.bindings:
            c = captured[(b.set, b.binding)]
            key = _resource_key(c)
            if c.memory is not None:
                memory_id, start = _place(c)
                span[key] = (memory_id, start, start + getattr(made[key], "nbytes", 0))
            if c.kind in WRITABLE:
                written[key] = k
    return {key for key, k in written.items() if key in span and any(
        other != key and written.get(other, -1) > k and span[other][0] == span[key][0]
        and span[other][1] < span[key][2] and span[key][1] < span[other][2] for other in span)}


def working_set(found: list[CapturedDispatch]) -> dict:
    """The bytes the dispatches' buffers and images take: `resources` with an allocation each (what the replay's
    pooled and own ways make: every resource key once, at its largest binding), `captured` the union of their ranges
    at the places the program bound them (what memory planning that aliases tensors leaves: ET-VK's), and how many
    resources had a place (`placed`) of `keys`."""
    largest, place = {}, {}
    for d in found:
        for b in d.bindings:
            data = b.before if b.before is not None else b.after
            size = len(data) if data is not None else (b.size or 0)
            key = _resource_key(b)
            largest[key] = max(largest.get(key, 0), size)
            if b.memory is not None:
                place[key] = _place(b)
    spans: dict = {}
    for key, (memory, start) in place.items():
        spans.setdefault(memory, []).append((start, start + largest[key]))
    captured = 0
    for ranges in spans.values():
        end = -1
        for start, stop in sorted(ranges):
            captured += max(0, stop - max(start, end))
            end = max(end, stop)
    return {"keys": len(largest), "placed": len(place), "resources": sum(largest.values()),
            "captured": captured + sum(v for k, v in largest.items() if k not in place)}


def time_in_order(dev, found: list[CapturedDispatch], *, barriers: str = "captured", memory: str = "pooled",
                  sampling: dict | None = None, chains: int = 1, burst: int = 0) -> pd.DataFrame:
    """The dispatches of `found` (one execution, in order) timed in order (module docstring): a row per dispatch
    with its median / p10 / p90 / min µs, samples, `exact` (the chain's), `reason` (why it was left out), the way's
    columns (WAY; `barriers` says which were recorded: "captured" falls back to "light" for a capture whose calls
    kept none; `memory`: MEMORY), the clock columns and the environment. `sampling`: `measure.sample_each`'s
    options. `chains`:
    the whole chain that many times in one command buffer (each dispatch's samples pooled over them), which keeps
    a GPU whose clock sags under a short chain busy (`chains` is a column). `burst` > 0: the submits timed that
    many at a time, each burst after a warm-up on the chain repeated BUSY_CHAINS times a submit (untimed), as ET-VK's
    runner times its executions right after its warm-up (`measure.sample_each`; `burst` is a column, 0: one
    sample set)."""
    if isinstance(chains, bool) or not isinstance(chains, int) or chains < 1:
        raise ValueError(f"chains must be a whole number >= 1, got {chains!r}")
    if isinstance(burst, bool) or not isinstance(burst, int) or burst < 0:
        raise ValueError(f"burst must be a whole number >= 0 (0: one sample set), got {burst!r}")
    if barriers not in BARRIERS:
        raise ValueError(f"barriers is one of {', '.join(BARRIERS)}, got {barriers!r}")
    if memory not in MEMORY:
        raise ValueError(f"memory is one of {', '.join(MEMORY)}, got {memory!r}")
    if barriers == "captured" and any(d.barriers is None for d in found):
        barriers = "light"
    way = {**WAY, "barriers": barriers, "memory": memory}
    chain, rows = [], []
    for d in found:
        try:
            reflection, local = launch_parameters(d)
            captured = _check(d, reflection)
        except (NotReplayable, ValueError) as exc:
            rows.append({"dispatch": d.dispatch, "pipeline": d.spirv_hash, "reason": str(exc)})
            continue
        chain.append((d, reflection, captured, local))
    arena = dev.arena() if memory in ("pooled", "captured") and chain else None
    try:
        made = _resources(dev, chain, barriers == "captured", arena, memory == "captured") if chain else {}
    except BaseException:
        if arena is not None:
            arena.close()
        raise
    launches = []
    try:
        for d, reflection, captured, local in chain:
            resources = {b.binding: made[_resource_key(captured[(b.set, b.binding)])] for b in reflection.bindings}
            launch = bound_launch(d, reflection, local, resources)
            if barriers == "captured":
                before = _initial_layouts(chain, made) if not launches else ()
                launch = dataclasses.replace(launch, barrier=before + _captured_barriers(d, made))
            launches.append(launch)
        launches = [dataclasses.replace(launch, label=f"{launch.name}#{k}") for k in range(chains)
                    for launch in launches]
        if not launches:
            return pd.DataFrame(rows).assign(**way)
        env = environment(dev)
        with vk.Launches(dev, launches) as pipes, \
                dev.record(label="in order", barrier_timed=True, full_barriers=barriers == "full") as rec, \
                _busy(dev, pipes, burst, full_barriers=barriers == "full") as busy:
            pipes.record(rec)
            rec.submit()
            exact, wrong = _chain_exact(chain, made, _overwritten(chain, made) if memory == "captured" else set())
            per, clock = sample_each(rec, **(sampling or {}), burst=burst, busy=busy)
        for d, *_ in chain:
            stats = summarize_ns(np.concatenate([per[f"dispatch{d.dispatch}#{k}"] for k in range(chains)]))
            rows.append({"dispatch": d.dispatch, "pipeline": d.spirv_hash, "exact": exact, "reason": "",
                         "mismatch": wrong, **stats, "chains": chains, "burst": burst,
                         "unplaced": arena.unplaced if memory == "captured" else None,
                         "bytes": sum(b.size or 0 for b in d.bindings), **clock, **env})
    finally:
        for r in made.values():
            r.close()
        if arena is not None:
            arena.close()
    return pd.DataFrame(rows).assign(**way).sort_values("dispatch", ignore_index=True)


@contextlib.contextmanager
def _busy(dev, pipes, burst: int, *, full_barriers: bool):
    """The warm-up of a burst (`time_in_order`): the timed recording's launches (`pipes`, their pipelines too)
    BUSY_CHAINS times in one untimed recording; None without bursts."""
    if not burst:
        yield None
        return
    with dev.record(label="in order (busy)", timestamps=False, full_barriers=full_barriers) as rec:
        for _ in range(BUSY_CHAINS):
            pipes.record(rec)
        yield rec


def _chain_exact(chain, made, overwritten: set = frozenset()) -> tuple[bool, str]:
    """Whether every resource the chain writes (but those `overwritten`) holds the capture's last 'after' bytes
    for it; the first that does not, named."""
    last = {}
    for d, reflection, captured, _ in chain:
        for b in reflection.bindings:
            c = captured[(b.set, b.binding)]
            if c.kind in WRITABLE:
                last[_resource_key(c)] = (d.dispatch, c)
    for key, (number, c) in last.items():
        if key in overwritten:
            continue
        got = resource_bytes(made[key])[:len(c.after)]
        if got != c.after:
            return False, f"dispatch {number} binding {c.set}.{c.binding}: the chain's bytes differ from the capture"
    return True, ""

