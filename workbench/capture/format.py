"""GFXReconstruct's outputs, read: the converted calls (``gfxrecon-convert --format jsonl --include-binaries``) and
the resource dumps (``gfxrecon-replay --dump-resources``), joined into one :class:`CapturedDispatch` per dispatch.

The calls give each dispatch's state at record time: the bound pipeline (its shader module's SPIR-V file, entry
point, specialization map and bytes), the bound descriptor sets (what ``vkUpdateDescriptorSets`` wrote into them),
the push-constant bytes, the group counts, the command buffer and the queue submit that ran it. The dumps give
each binding's bytes before and after the dispatch, joined on the dispatch's block index and the binding's
(set, binding). Written against GFXReconstruct 1.0.5 (tag vulkan-sdk-1.4.357.0).
"""
from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

CALLS_NAME = "calls.jsonl"
BINARIES_DIR = "binaries"
DUMPS_DIR = "dumps"
MANIFEST_NAME = "capture.json"
DUMP_JSON_SUFFIXES = ("_dr.json", "_rd.json")  # 1.0.5 writes <capture>_dr.json; its docs say _rd.json

# The calls the reader follows; `needed_calls` keeps only these, with their block indices as converted (the dump
# JSON names dispatches by block index).
# Push descriptors (ncnn, IREE) and descriptor update templates: every name a driver or layer may record them under.
PUSH_CALLS = ("vkCmdPushDescriptorSetKHR", "vkCmdPushDescriptorSet", "vkCmdPushDescriptorSet2KHR",
              "vkCmdPushDescriptorSet2")
PUSH_TEMPLATE_CALLS = ("vkCmdPushDescriptorSetWithTemplateKHR", "vkCmdPushDescriptorSetWithTemplate",
                       "vkCmdPushDescriptorSetWithTemplate2KHR", "vkCmdPushDescriptorSetWithTemplate2")
TEMPLATE_CALLS = ("vkCreateDescriptorUpdateTemplate", "vkCreateDescriptorUpdateTemplateKHR")
UPDATE_TEMPLATE_CALLS = ("vkUpdateDescriptorSetWithTemplate", "vkUpdateDescriptorSetWithTemplateKHR")
BIND_SETS_CALLS = ("vkCmdBindDescriptorSets", "vkCmdBindDescriptorSets2KHR", "vkCmdBindDescriptorSets2")
# VK_EXT_descriptor_buffer: sets whose descriptors live in a buffer's bytes (listed, named, not decoded)
DESCRIPTOR_BUFFER_CALLS = ("vkCmdSetDescriptorBufferOffsetsEXT", "vkCmdSetDescriptorBufferOffsets2EXT")
# buffer device addresses: each call's buffer and the address it returned (`CapturedDispatch.addresses`)
ADDRESS_CALLS = ("vkGetBufferDeviceAddress", "vkGetBufferDeviceAddressKHR", "vkGetBufferDeviceAddressEXT")
# where each buffer and image lives: its allocation (size, memory type) and its offset there
# (`CapturedBinding.memory`; ET-VK binds tensors whose lifetimes do not overlap into the same memory)
BIND_MEMORY_CALLS = {"vkBindBufferMemory": "buffer", "vkBindImageMemory": "image"}
BIND_MEMORY2_CALLS = {"vkBindBufferMemory2": "buffer", "vkBindBufferMemory2KHR": "buffer",
                      "vkBindImageMemory2": "image", "vkBindImageMemory2KHR": "image"}
READ_CALLS = frozenset({
    "vkCreateShaderModule", "vkCreateComputePipelines", "vkCreateBuffer", "vkCreateImage", "vkCreateImageView",
    "vkUpdateDescriptorSets", "vkBeginCommandBuffer", "vkEndCommandBuffer", "vkCmdBindPipeline",
    "vkCmdPushConstants", "vkCmdDispatch", "vkCmdDispatchBase", "vkCmdDispatchIndirect", "vkQueueSubmit",
    "vkQueueSubmit2",
    "vkQueueSubmit2KHR", *PUSH_CALLS, *PUSH_TEMPLATE_CALLS, *TEMPLATE_CALLS, *UPDATE_TEMPLATE_CALLS,
    *BIND_SETS_CALLS, "vkCmdPipelineBarrier", "vkCreateSampler", *DESCRIPTOR_BUFFER_CALLS, *ADDRESS_CALLS,
    "vkAllocateMemory", *BIND_MEMORY_CALLS, *BIND_MEMORY2_CALLS,
})
# the VkSamplerCreateInfo fields a replay makes its sampler with (`CapturedBinding.sampler`)
SAMPLER_FIELDS = ("magFilter", "minFilter", "mipmapMode", "addressModeU", "addressModeV", "addressModeW",
                  "mipLodBias", "minLod", "maxLod", "borderColor", "unnormalizedCoordinates")
# how GFXReconstruct's convert decodes a template's data: the infos of each kind, in the template's entry order
TEMPLATE_DATA_KEYS = {"buffer": "bufferInfos", "image": "imageInfos", "texel": "texelBufferViews"}
# vkCmdDispatchIndirect's group counts are in a buffer: read from the resource dump's "parameters", which
# GFXReconstruct fills from the indirect buffer at that dispatch
DISPATCH_CALLS = ("vkCmdDispatch", "vkCmdDispatchBase", "vkCmdDispatchIndirect")
# what GFXReconstruct 1.0.5's --dump-resources dumps: it replays vkCmdDispatchBase as a plain command, and a plan
# naming one dumps nothing of its command buffer
DUMPED_CALLS = ("vkCmdDispatch", "vkCmdDispatchIndirect")
NOT_DUMPED = ("vkCmdDispatchBase: GFXReconstruct 1.0.5's --dump-resources does not dump at a vkCmdDispatchBase (it "
              "replays it as a plain command, and a dump plan naming one dumps nothing of its command buffer): its "
              "bindings have no bytes; the runtime replays a base group where they are given")
BUFFER_KINDS = {"VK_DESCRIPTOR_TYPE_STORAGE_BUFFER": "storage_buffer", "VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER":
                "uniform_buffer", "VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC": "storage_buffer_dynamic",
                "VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER_DYNAMIC": "uniform_buffer_dynamic"}
IMAGE_KINDS = {"VK_DESCRIPTOR_TYPE_STORAGE_IMAGE": "storage_image", "VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE":
               "sampled_image", "VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER": "combined_image_sampler"}


# why a binding pushed through a descriptor update template has no dump (GFXReconstruct 1.0.5 and its main branch
# of August 2026 track sets and plain pushes only), and what to do
TEMPLATE_NOT_DUMPED = ("no dump: GFXReconstruct's --dump-resources does not follow a push through a descriptor update "
                       "template (vkCmdPushDescriptorSetWithTemplate*); capture again with --hide-extension "
                       "VK_KHR_push_descriptor (ncnn then binds descriptor sets)")


class CaptureError(ValueError):
    """A capture folder, a capture or a program that cannot be read: one line saying what was expected and found."""


@dataclass
class CapturedBinding:
    set: int
    binding: int
    kind: str  # storage_buffer, uniform_buffer, storage_image, ... (workbench.vk.spirv's names)
    resource: int | None  # the capture's buffer or image view id
    offset: int = 0
    size: int | None = None  # bytes the descriptor covers (its range, or the buffer's size after the offset)
    format: str | None = None  # images: VK_FORMAT_*
    extent: tuple[int, ...] | None = None  # images: (x, y) or (x, y, z), as created
    tiling: str | None = None  # images: VK_IMAGE_TILING_*, as created
    before: bytes | None = None  # the dump before the dispatch (None: not dumped)
    after: bytes | None = None  # the dump after it
    image: int | None = None  # images: the capture's image id (the view's image)
    source: str = "dump"  # where before/after come from: "dump", or "dispatch N" (see `_read_only_contents`)
    layout: str | None = None  # images: the VK_IMAGE_LAYOUT_* the descriptor names
    sampler: dict | None = None  # combined image samplers: the sampler's SAMPLER_FIELDS as created (None: unread)
    # where the buffer or image was bound: (capture memory id, allocation bytes, memory type index, the resource's
    # offset in it; a buffer's descriptor offset comes on top), None where the capture kept no vkBind*Memory
    memory: tuple | None = None


@dataclass
class CapturedDispatch:
    """One dispatch of a capture, with all it needs to run alone."""
    dispatch: int  # its place in the capture, 0, 1, ... in block order
    index: int  # the vkCmdDispatch block index
    command_buffer: int
    begin_index: int  # the vkBeginCommandBuffer that recorded it
    submit: int | None  # the first vkQueueSubmit block that ran it (None: never submitted)
    pipeline: int
    spirv: bytes
    entry_point: str
    spec_data: bytes  # the pSpecializationInfo bytes, as captured
    spec_entries: dict[int, tuple[int, int]]  # constant id -> (offset, size) in spec_data
    push_constants: bytes  # the push-constant block at dispatch time (zeros where nothing was pushed)
    groups: tuple[int, int, int]
    base_group: tuple[int, int, int] = (0, 0, 0)  # vkCmdDispatchBase
    command: str = "vkCmdDispatch"  # or vkCmdDispatchBase; another vkCmdDispatch* is listed, never replayed
    bindings: list[CapturedBinding] = field(default_factory=list)
    # the vkCmdPipelineBarriers recorded since the command buffer's previous dispatch (`_barrier`); None where the
    # capture's calls hold none at all (a folder converted before barriers were kept)
    barriers: tuple | None = None
    descriptor_buffer_sets: tuple = ()  # set numbers bound from a descriptor buffer (VK_EXT_descriptor_buffer)
    # buffer device addresses the program took before the dispatch's submit: {capture buffer id: (address, size)}
    # (vkGetBufferDeviceAddress* results; of ranges that overlap, the later-taken); `capture.pointers` rebases them
    addresses: dict = field(default_factory=dict)

    @property
    def spirv_hash(self) -> str:
        return hashlib.sha256(self.spirv).hexdigest()[:16]

    @property
    def spec_words(self) -> dict[int, bytes]:
        """Each specialization constant's bytes, by constant id."""
        return {k: self.spec_data[o:o + s] for k, (o, s) in sorted(self.spec_entries.items())}


# ----------------------------------------------------------------------------------------------------------------
# The converted calls
# ----------------------------------------------------------------------------------------------------------------

def read_calls(path: Path) -> list[dict]:
    """The JSON objects of a .jsonl file, one a line; CaptureError naming the line that is not JSON."""
    calls = []
    try:
        with open(path) as handle:
            for number, line in enumerate(handle, 1):
                line = line.strip().rstrip(",")
                if not line:
                    continue
                try:
                    calls.append(json.loads(line))
                except ValueError:
                    raise CaptureError(f"expected one JSON object a line in {path}, line {number} is not "
                                       f"({line[:60]!r}…): a truncated or corrupt conversion") from None
    except OSError as exc:
        raise CaptureError(f"expected the converted calls {path}, cannot read it ({exc.strerror})") from None
    return calls


def _function(call: dict) -> tuple[str | None, dict]:
    function = call.get("function") or {}
    return function.get("name"), function.get("args") or {}


def unknown_dispatch(name: str | None) -> bool:
    """A dispatching command the reader does not read (vkCmdDispatchIndirect, vkCmdDispatchGraphAMDX, …): its
    group counts are not in its arguments."""
    return bool(name) and name.startswith("vkCmdDispatch") and name not in DISPATCH_CALLS


def needed_calls(calls: list[dict]) -> list[dict]:
    """The calls the reader follows (see READ_CALLS) and the dispatching ones it does not know, as converted."""
    return [c for c in calls if _function(c)[0] in READ_CALLS or unknown_dispatch(_function(c)[0])]


def _submitted(name: str, args: dict) -> list[int]:
    """The command buffers a vkQueueSubmit / vkQueueSubmit2 runs, in order."""
    buffers = []
    for submit in args.get("pSubmits") or []:
        if name == "vkQueueSubmit":
            buffers += list(submit.get("pCommandBuffers") or [])
        else:
            buffers += [info.get("commandBuffer") for info in submit.get("pCommandBufferInfos") or []]
    return buffers


def dump_plan(calls: list[dict]) -> dict:
    """The ``--dump-resources`` input that dumps every dispatch of every submitted command buffer: bindings before
    and after, all descriptors. A command buffer recorded once and submitted several times is dumped at its first
    submit."""
    recordings = _recordings(calls)
    # every depth slice of a 3-D image (without DumpAllImageSubresources only slice 0 is written), texels as stored
    options = {"DumpBeforeCommand": True, "DumpAllDescriptors": True, "DumpRawImages": True,
               "DumpAllImageSubresources": True}
    plan = {"DumpResourcesOptions": options,
            "BeginCommandBuffer": [], "Dispatch": [], "QueueSubmit": []}
    for rec in recordings:
        known = [d["index"] for d in rec["dispatches"] if d["command"] in DUMPED_CALLS]
        if known and rec["submit"] is not None:
            plan["BeginCommandBuffer"].append(rec["begin"])
            plan["Dispatch"].append(known)
            plan["QueueSubmit"].append(rec["submit"])
    return plan


def _template_writes(entries: list, data: dict) -> dict:
    """{binding: (descriptor type, info)} of a descriptor update template's `entries` applied to its converted data
    (`TEMPLATE_DATA_KEYS`: each kind's infos in entry order)."""
    taken = {key: 0 for key in TEMPLATE_DATA_KEYS.values()}
    out = {}
    for entry in entries or []:
        kind = entry.get("descriptorType", "")
        key = TEMPLATE_DATA_KEYS["buffer" if "BUFFER" in kind and "TEXEL" not in kind else
                                  "texel" if "TEXEL" in kind else "image"]
        infos = (data or {}).get(key) or []
        for k in range(int(entry.get("descriptorCount", 1))):
            if taken[key] < len(infos):
                out[int(entry.get("dstBinding", 0)) + int(entry.get("dstArrayElement", 0)) + k] = \
                    (kind, infos[taken[key]])
            taken[key] += 1
    return out


def _writes(writes: list) -> dict:
    """{binding: (descriptor type, info)} of VkWriteDescriptorSet structs as converted."""
    out = {}
    for write in writes or []:
        kind = write.get("descriptorType")
        infos = write.get("pBufferInfo") or write.get("pImageInfo") or write.get("pTexelBufferView") or []
        for k, info in enumerate(infos):
            out[int(write.get("dstBinding", 0)) + int(write.get("dstArrayElement", 0)) + k] = (kind, info)
    return out


def _recordings(calls: list[dict], templates: dict | None = None, sets: dict | None = None) -> list[dict]:
    """Each vkBeginCommandBuffer's recording: {"begin", "command_buffer", "submit", "dispatches": [state at each
    dispatch]}, in block order; the state is what the dispatch needs (pipeline, sets, push constants, groups).
    Push descriptors become sets of their own, named ("push", block index), written into `sets` (with
    `templates`: the descriptor update templates by id, for the pushes that use one)."""
    templates = templates or {}
    sets = {} if sets is None else sets
    recordings, open_by_cb, last_by_cb = [], {}, {}
    for call in sorted(calls, key=lambda c: c.get("index", 0)):
        name, args = _function(call)
        if name is None:
            continue
        index = call.get("index")
        cb = args.get("commandBuffer")
        if name == "vkBeginCommandBuffer":
            rec = {"begin": index, "command_buffer": cb, "submit": None, "dispatches": [], "pipeline": None,
                   "sets": {}, "push": {}, "barriers": []}
            recordings.append(rec)
            open_by_cb[cb] = last_by_cb[cb] = rec
        elif name == "vkEndCommandBuffer":
            open_by_cb.pop(cb, None)
        elif name in ("vkQueueSubmit", "vkQueueSubmit2", "vkQueueSubmit2KHR"):
            for submitted in _submitted(name, args):
                rec = last_by_cb.get(submitted)
                if rec is not None and rec["submit"] is None:
                    rec["submit"] = index
        elif cb in open_by_cb:
            rec = open_by_cb[cb]
            if name == "vkCmdBindPipeline":
                if "COMPUTE" in str(args.get("pipelineBindPoint", "")):
                    rec["pipeline"] = args.get("pipeline")
            elif name in BIND_SETS_CALLS:
                info = args.get("pBindDescriptorSetsInfo") or args  # the …2 forms carry a struct
                if "COMPUTE" in str(info.get("pipelineBindPoint", "")) or "COMPUTE" in str(info.get("stageFlags", "")) \
                        or (name != "vkCmdBindDescriptorSets" and not info.get("pipelineBindPoint")):
                    first = int(info.get("firstSet", 0))
                    offsets = list(info.get("pDynamicOffsets") or [])
                    for k, dset in enumerate(info.get("pDescriptorSets") or []):
                        rec["sets"][first + k] = (dset, offsets)
            elif name in PUSH_CALLS or name in PUSH_TEMPLATE_CALLS:
                info = args.get("pPushDescriptorSetInfo") or args.get("pPushDescriptorSetWithTemplateInfo") or args
                if name in PUSH_CALLS and info.get("pipelineBindPoint") and \
                        "COMPUTE" not in str(info.get("pipelineBindPoint")):
                    continue
                pushed = ("push template" if name in PUSH_TEMPLATE_CALLS else "push", index)
                sets[pushed] = (_writes(info.get("pDescriptorWrites")) if name in PUSH_CALLS else
                                _template_writes((templates.get(info.get("descriptorUpdateTemplate")) or {})
                                                 .get("pDescriptorUpdateEntries"), info.get("pData")))
                rec["sets"][int(info.get("set", 0))] = (pushed, [])
            elif name == "vkCmdPushConstants":
                rec["push"][int(args.get("offset", 0))] = (int(args.get("size", 0)), args.get("pValues"))
            elif name == "vkCmdPipelineBarrier":
                rec["barriers"].append(_barrier(args))
            elif name in DESCRIPTOR_BUFFER_CALLS:
                info = args.get("pSetDescriptorBufferOffsetsInfo") or args
                first = int(info.get("firstSet", 0))
                for k in range(int(info.get("setCount", 0))):
                    rec["sets"][first + k] = (("descriptor buffer", index), [])
            elif name in DISPATCH_CALLS or unknown_dispatch(name):
                base = tuple(int(args.get(k, 0)) for k in ("baseGroupX", "baseGroupY", "baseGroupZ"))
                rec["dispatches"].append({
                    "index": index, "pipeline": rec["pipeline"], "sets": dict(rec["sets"]),
                    "push": dict(rec["push"]), "base": base, "command": name, "barriers": tuple(rec["barriers"]),
                    "groups": tuple(int(args.get(k, 1)) for k in ("groupCountX", "groupCountY", "groupCountZ"))
                    if name in DISPATCH_CALLS and "groupCountX" in args else (0, 0, 0)})
                rec["barriers"] = []
    return recordings


def _flags(value) -> int:
    """A converted flags field ("0x00000800", or a number) as an int."""
    return int(value, 16) if isinstance(value, str) else int(value or 0)


def _barrier(args: dict) -> dict:
    """A vkCmdPipelineBarrier as converted: stage masks, (src, dst) accesses of its memory barriers, (buffer id,
    src, dst) of its buffer barriers, (image id, src, dst, old layout, new layout) of its image barriers (layouts
    by name, VK_IMAGE_LAYOUT_*)."""
    return {"src_stages": _flags(args.get("srcStageMask")), "dst_stages": _flags(args.get("dstStageMask")),
            "memory": [(_flags(b.get("srcAccessMask")), _flags(b.get("dstAccessMask")))
                       for b in args.get("pMemoryBarriers") or []],
            "buffers": [(b.get("buffer"), _flags(b.get("srcAccessMask")), _flags(b.get("dstAccessMask")))
                        for b in args.get("pBufferMemoryBarriers") or []],
            "images": [(b.get("image"), _flags(b.get("srcAccessMask")), _flags(b.get("dstAccessMask")),
                        b.get("oldLayout"), b.get("newLayout")) for b in args.get("pImageMemoryBarriers") or []]}


def _bytes_of(value, binaries: Path, what: str) -> bytes:
    """A converted binary field: a file name in `binaries` (with --include-binaries) or an inline byte list."""
    if value is None:
        return b""
    if isinstance(value, list):
        return bytes(int(v) & 0xFF for v in value)
    if isinstance(value, str):
        path = binaries / value
        if not path.is_file():
            raise CaptureError(f"expected {what} in {path}, found no such file")
        return path.read_bytes()
    raise CaptureError(f"expected {what} as a file name or a byte list, found {str(value)[:60]!r}")


# ----------------------------------------------------------------------------------------------------------------
# Reading a capture folder
# ----------------------------------------------------------------------------------------------------------------

def _dump_json(folder: Path) -> Path:
    dumps = folder / DUMPS_DIR
    found = sorted(p for s in DUMP_JSON_SUFFIXES for p in dumps.glob(f"*{s}")) if dumps.is_dir() else []
    if len(found) != 1:
        raise CaptureError(f"expected one *{DUMP_JSON_SUFFIXES[0]} resource dump in {dumps}, found "
                           f"{len(found) or 'none'}: the dump step of `workbench capture run` did not finish")
    return found[0]


def _dispatch_dumps(folder: Path) -> dict[int, dict]:
    """{dispatch block index: {(set, binding): {"after": file, "before": file | None, ...}}} from the dump JSON."""
    path = _dump_json(folder)
    try:
        document = json.loads(path.read_text())
    except ValueError:
        raise CaptureError(f"expected the resource dump {path} to be JSON; it is not (truncated?)") from None
    entries = []
    for part in document if isinstance(document, list) else [document]:
        if isinstance(part, dict) and "dispatchCommands" in part:
            entries += part["dispatchCommands"]
    found = {}
    for entry in entries:
        per_binding = {}
        for group in ("descriptors", "outputs"):
            items = entry.get(group) or []
            if isinstance(items, dict):  # outputs: {"buffers": [...], "images": [...]}
                items = [item for values in items.values() for item in values]
            for item in items:
                descriptor = item.get("descriptor", item)
                if isinstance(descriptor, list):
                    descriptor = descriptor[0] if descriptor else {}
                key = (int(item.get("set", 0)), int(item.get("binding", 0)))
                slot = per_binding.setdefault(key, {"type": item.get("type")})
                if descriptor.get("subresources"):
                    slot.update(_image_files(descriptor["subresources"]))
                for k, v in descriptor.items():
                    slot.setdefault(k, v)
                for k, v in item.items():
                    if k not in ("descriptor", "set", "binding"):
                        slot.setdefault(k, v)
        per_binding["parameters"] = entry.get("parameters") or {}  # the group counts it ran (indirect ones read)
        found[int(entry["dispatchIndex"])] = per_binding
    return found


def _image_files(subresources: list) -> dict:
    """{"file": [...], "beforeFile": [...]} of an image's dump: level 0, layer 0, its depth slices in order (a
    2-D image has one), which concatenated are its texels in (z, y, x) order."""
    level0 = sorted((s for s in subresources if int(s.get("mipLevel", 0)) == 0 and int(s.get("arrayLayer", 0)) == 0
                     and str(s.get("aspect", "COLOR")) == "COLOR"), key=lambda s: int(s.get("depth", 0)))
    found = {}
    for key in ("file", "beforeFile"):
        names = [s.get(key) for s in level0]
        if names and all(names):
            found[key] = names
    return found


def read_folder(folder) -> list[CapturedDispatch]:
    """Every dispatch of a capture folder (see `workbench.capture.record`), in block order, with its bindings'
    dumped bytes. CaptureError (one line) for a folder that is not a complete capture."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CaptureError(f"expected a capture folder (written by `workbench capture run`), found no folder {folder}")
    calls_path = folder / CALLS_NAME
    if not calls_path.is_file():
        raise CaptureError(f"expected {CALLS_NAME} in the capture folder {folder}, found "
                           f"{sorted(p.name for p in folder.iterdir())[:8] or 'an empty folder'}")
    calls = read_calls(calls_path)
    binaries = folder / BINARIES_DIR
    modules, pipelines, buffers, views, images, sets, templates, samplers = {}, {}, {}, {}, {}, {}, {}, {}
    history: dict = {}  # set -> [(call index, its contents from then on)]: a set written again after a dispatch
    taken = []  # (call index, buffer id, address) of each vkGetBufferDeviceAddress*
    memories, bound = {}, {}  # memory id -> (bytes, type index); ("buffer" | "image", id) -> (memory id, offset)
    for call in sorted(calls, key=lambda c: c.get("index", 0)):
        name, args = _function(call)
        if name == "vkCreateShaderModule":
            modules[args.get("pShaderModule")] = (args.get("pCreateInfo") or {}).get("pCode")
        elif name == "vkCreateComputePipelines":
            for info, handle in zip(args.get("pCreateInfos") or [], args.get("pPipelines") or []):
                pipelines[handle] = info
        elif name == "vkCreateBuffer":
            buffers[args.get("pBuffer")] = int((args.get("pCreateInfo") or {}).get("size", 0))
        elif name in ADDRESS_CALLS:
            address = _address((call.get("function") or {}).get("return"))
            if address:
                taken.append((call.get("index", 0), (args.get("pInfo") or {}).get("buffer"), address))
        elif name == "vkCreateImage":
            images[args.get("pImage")] = args.get("pCreateInfo") or {}
        elif name == "vkAllocateMemory":
            info = args.get("pAllocateInfo") or {}
            memories[args.get("pMemory")] = (int(info.get("allocationSize", 0)), int(info.get("memoryTypeIndex", 0)))
        elif name in BIND_MEMORY_CALLS or name in BIND_MEMORY2_CALLS:
            kind = BIND_MEMORY_CALLS.get(name) or BIND_MEMORY2_CALLS[name]
            for info in [args] if name in BIND_MEMORY_CALLS else args.get("pBindInfos") or []:
                bound[(kind, info.get(kind))] = (info.get("memory"), int(info.get("memoryOffset", 0)))
        elif name == "vkCreateImageView":
            views[args.get("pView")] = args.get("pCreateInfo") or {}
        elif name == "vkCreateSampler":
            info = args.get("pCreateInfo") or {}
            samplers[args.get("pSampler")] = {k: info[k] for k in SAMPLER_FIELDS if k in info}
        elif name == "vkUpdateDescriptorSets":
            for write in args.get("pDescriptorWrites") or []:
                _update_set(sets, history, write.get("dstSet"), _writes([write]), call.get("index", 0))
        elif name in TEMPLATE_CALLS:
            templates[args.get("pDescriptorUpdateTemplate")] = args.get("pCreateInfo") or {}
        elif name in UPDATE_TEMPLATE_CALLS:
            entries = (templates.get(args.get("descriptorUpdateTemplate")) or {}).get("pDescriptorUpdateEntries")
            _update_set(sets, history, args.get("descriptorSet"), _template_writes(entries, args.get("pData")),
                        call.get("index", 0))
    dumps = _dispatch_dumps(folder)
    found = []
    kept_barriers = any(_function(c)[0] == "vkCmdPipelineBarrier" for c in calls)
    for rec in _recordings(calls, templates, sets):
        for state in rec["dispatches"]:
            found.append(_dispatch(len(found), rec, state, modules, pipelines, buffers, views, images,
                                   _sets_at(sets, history, state), dumps.get(state["index"]), binaries, folder))
            found[-1].barriers = state["barriers"] if kept_barriers else None
            found[-1].descriptor_buffer_sets = tuple(n for n, (dset, _) in sorted(state["sets"].items())
                                                     if isinstance(dset, tuple) and dset[0] == "descriptor buffer")
            for b in found[-1].bindings:
                b.sampler = samplers.get(b.sampler)
                place = bound.get(("image", b.image) if b.image is not None else ("buffer", b.resource))
                if place is not None and place[0] in memories:
                    b.memory = (place[0], *memories[place[0]], place[1])
            found[-1].addresses = _addresses_at(taken, buffers, rec["submit"] if rec["submit"] is not None
                                                else state["index"])
    if not found:
        raise CaptureError(f"expected at least one vkCmdDispatch in {calls_path}, found none ({len(calls)} calls)")
    _read_only_contents(found)
    return found


def _update_set(sets: dict, history: dict, dset, writes: dict, index: int) -> None:
    """Descriptor set `dset` written by call `index`: its contents from then on are a new dict (the old one stays
    what earlier dispatches saw: ggml writes the same sets again for every graph it records)."""
    sets[dset] = {**sets.get(dset, {}), **writes}
    history.setdefault(dset, []).append((index, sets[dset]))


def _sets_at(sets: dict, history: dict, state: dict) -> dict:
    """The contents of the sets `state` (a dispatch) binds as they were when it was recorded: each set's last write
    before the dispatch's call index (a set written again later, once its command buffer ran, is another state)."""
    seen = {}
    for dset, _ in state["sets"].values():
        versions = history.get(dset) if not isinstance(dset, tuple) else None
        if versions:
            before = [contents for index, contents in versions if index < state["index"]]
            seen[dset] = before[-1] if before else versions[0][1]
        elif dset in sets:
            seen[dset] = sets[dset]
    return seen


def _address(value) -> int | None:
    """A converted VkDeviceAddress ("0x5575879ec000", or a number) as an int; None where it is neither."""
    try:
        return int(value, 16) if isinstance(value, str) else None if value is None else int(value)
    except ValueError:
        return None


def _addresses_at(taken: list, buffers: dict, before: int) -> dict:
    """{buffer id: (address, size)} of the addresses taken before call `before`; of two ranges that overlap (a
    buffer destroyed and its address given to another), the later-taken."""
    kept: dict = {}
    for _, buffer, address in sorted(t for t in taken if t[0] < before):
        size = int(buffers.get(buffer) or 0)
        for other, (start, length) in list(kept.items()):
            if other != buffer and start < address + size and address < start + length:
                del kept[other]
        kept[buffer] = (address, size)
    return kept


READ_ONLY_KINDS = ("sampled_image", "combined_image_sampler")
WRITABLE_KINDS = ("storage_buffer", "storage_image", "storage_buffer_dynamic")


def _resource_key(b: CapturedBinding):
    return ("image", b.image) if b.image is not None else ("buffer", b.resource, b.offset)


def _read_only_contents(found: list[CapturedDispatch]) -> None:
    """GFXReconstruct 1.0.5 dumps a dispatch's storage bindings when the dispatch runs, but its sampled images only
    once the whole command buffer has run: where a later dispatch of that command buffer writes the image (ET-VK
    lets tensors whose lifetimes do not overlap share memory), the dump holds the later contents. A sampled image
    that an earlier dispatch of the capture wrote as a storage image is given that dispatch's 'after' bytes
    instead (`source` says so); one no dispatch wrote keeps its dump."""
    latest: dict = {}
    for d in found:
        for b in d.bindings:
            key = _resource_key(b)
            if b.kind in READ_ONLY_KINDS and key in latest:
                number, data = latest[key]
                if b.after is None or len(data) == len(b.after):
                    b.after, b.source = data, f"dispatch {number}"
        for b in d.bindings:
            if b.kind in WRITABLE_KINDS and b.after is not None:
                latest[_resource_key(b)] = (d.dispatch, b.after)


def _dispatch(number, rec, state, modules, pipelines, buffers, views, images, sets, dumped, binaries,
              folder) -> CapturedDispatch:
    where = f"dispatch {number} (block {state['index']})"
    info = pipelines.get(state["pipeline"])
    if info is None:
        raise CaptureError(f"expected {where} to have a compute pipeline bound, found pipeline id "
                           f"{state['pipeline']} that no vkCreateComputePipelines made")
    stage = info.get("stage") or {}
    spirv = _bytes_of(modules.get(stage.get("module")), binaries, f"the SPIR-V of shader module {stage.get('module')}")
    if not spirv:
        raise CaptureError(f"expected the SPIR-V of {where}'s shader module {stage.get('module')}, found none")
    spec = stage.get("pSpecializationInfo") or {}
    spec_data = _bytes_of(spec.get("pData"), binaries, "specialization data")
    entries = {int(e["constantID"]): (int(e["offset"]), int(e["size"])) for e in spec.get("pMapEntries") or []}
    push = bytearray()
    for offset, (size, values) in sorted(state["push"].items()):
        data = _bytes_of(values, binaries, "push constants")[:size]
        if len(push) < offset + len(data):
            push.extend(b"\0" * (offset + len(data) - len(push)))
        push[offset:offset + len(data)] = data
    bindings = []
    for set_number, (dset, _dynamic_offsets) in sorted(state["sets"].items()):
        for binding, (kind, desc) in sorted(sets.get(dset, {}).items()):
            bindings.append(_binding(set_number, binding, kind, desc, buffers, views, images,
                                     (dumped or {}).get((set_number, binding)), folder, where))
            if isinstance(dset, tuple) and dset[0] == "push template" and bindings[-1].after is None \
                    and bindings[-1].source == "dump":
                bindings[-1].source = TEMPLATE_NOT_DUMPED
    groups, dumped_groups = state["groups"], (dumped or {}).get("parameters") or {}
    if state["command"] == "vkCmdDispatchIndirect" and "groupCountX" in dumped_groups:
        groups = tuple(int(dumped_groups.get(k, 1)) for k in ("groupCountX", "groupCountY", "groupCountZ"))
    return CapturedDispatch(
        dispatch=number, index=state["index"], command_buffer=rec["command_buffer"], begin_index=rec["begin"],
        submit=rec["submit"], pipeline=state["pipeline"], spirv=spirv, entry_point=stage.get("pName") or "main",
        spec_data=spec_data, spec_entries=entries, push_constants=bytes(push), groups=groups,
        base_group=state["base"], command=state["command"], bindings=bindings)


def _binding(set_number, binding, kind, desc, buffers, views, images, dumped, folder, where) -> CapturedBinding:
    dumps = folder / DUMPS_DIR

    def contents(name):
        """The dump file's bytes; an image's: its slices' files, concatenated."""
        if not name:
            return None
        if isinstance(name, list):
            return b"".join(contents(n) for n in name)
        path = dumps / Path(name).name  # the replay writes absolute paths; the folder may have moved since
        if not path.is_file():
            raise CaptureError(f"expected the dump {path} of {where}, binding {set_number}.{binding}; no such file")
        return path.read_bytes()

    if kind in BUFFER_KINDS:
        buffer = desc.get("buffer")
        offset = int(desc.get("offset", 0))
        size = desc.get("range")
        whole = buffers.get(buffer)
        if size is None or str(size) in ("VK_WHOLE_SIZE", str(2**64 - 1)) or int(size) >= 2**63:
            size = None if whole is None else whole - offset
        found = CapturedBinding(set_number, binding, BUFFER_KINDS[kind], buffer, offset,
                                None if size is None else int(size))
    elif kind in IMAGE_KINDS:
        view = views.get(desc.get("imageView"), {})
        image = images.get(view.get("image"), {})
        size = image.get("extent") or {}
        extent = tuple(int(size.get(k, 1)) for k in ("width", "height", "depth"))
        if "3D" not in str(image.get("imageType", "")):
            extent = extent[:2]
        found = CapturedBinding(set_number, binding, IMAGE_KINDS[kind], desc.get("imageView"),
                                format=view.get("format") or image.get("format"),
                                extent=extent if size else None, tiling=image.get("tiling"), image=view.get("image"),
                                layout=desc.get("imageLayout"),
                                sampler=desc.get("sampler") if kind == "VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER"
                                else None)  # its id here; its create info once read_folder has them all
    else:
        found = CapturedBinding(set_number, binding, str(kind), None)
    dumped_buffer = (dumped or {}).get("bufferId")
    if dumped and kind in BUFFER_KINDS and dumped_buffer is not None and found.resource is not None \
            and int(dumped_buffer) != int(found.resource):
        # GFXReconstruct 1.0.5's --dump-resources keeps the previous push's descriptors for a push through a
        # template (vkCmdPushDescriptorSetWithTemplate*): its dump is another buffer's bytes, never to be used
        found.source = (f"stale dump: GFXReconstruct dumped buffer {dumped_buffer} for binding {set_number}.{binding}, "
                        f"which the calls bind to buffer {found.resource} (its resource dump does not follow a push "
                        f"through a descriptor update template)")
    elif dumped:
        found.after = contents(dumped.get("file"))
        found.before = contents(dumped.get("beforeFile"))
        if found.size is None and found.after is not None:
            found.size = len(found.after)
    return found


def spec_values(kinds: dict[int, str], words: dict[int, bytes]) -> dict[int, int | float | bool]:
    """Specialization bytes → values of the types the SPIR-V declares (`workbench.vk.spirv.reflect`'s
    ``spec_constants``); constants the shader does not declare are left out (they cannot change it)."""
    formats = {"int": "<i", "uint": "<I", "float": "<f", "bool": "<I"}
    values = {}
    for spec_id, raw in words.items():
        kind = kinds.get(spec_id)
        if kind is None:
            continue
        if len(raw) != 4:
            raise CaptureError(f"expected 4 bytes for specialization constant {spec_id} ({kind}), found {len(raw)}")
        value = struct.unpack(formats[kind], raw)[0]
        values[spec_id] = bool(value) if kind == "bool" else value
    return values
