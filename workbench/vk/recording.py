"""Recording: many dispatches in one command buffer, barriers between them, GPU timestamps around each.

A recording collects commands first (checking each one at once), then builds the Vulkan objects on the first
`submit()`: one descriptor pool sized for all dispatches, one query pool with two timestamps per command, one command
buffer. `submit()` can be called again to re-run the same commands, which is how benchmarks take many samples
without re-recording.
"""
from __future__ import annotations

import math
import os
import time
import weakref
from dataclasses import dataclass

import numpy as np
import vulkan as vk

from .errors import BindingError, ClosedError, FenceTimeoutError
from .interrupts import sigint_deferred
from .memory import Buffer, Image
from .pipeline import DESCRIPTOR_TYPES, Pipeline
from .spirv import COMBINED_IMAGE_SAMPLER

ALL_ACCESS = (vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT
              | vk.VK_ACCESS_TRANSFER_WRITE_BIT)
COMPUTE_AND_TRANSFER = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT


@dataclass(frozen=True)
class Barrier:
    """A pipeline barrier as a program recorded it (a captured vkCmdPipelineBarrier), for a dispatch's `barrier`:
    stage masks; `memory`: (src access, dst access) pairs; `buffers`: (Buffer, src access, dst access), each over
    the whole buffer; `images`: (Image, src access, dst access, old layout, new layout), layouts as
    VK_IMAGE_LAYOUT_* values. An image's old layout is taken as the one the recording left it in (GENERAL at the
    start of every submit) unless it is UNDEFINED (the program let its contents go); a descriptor binds an image in
    the layout it is in at that dispatch, and every image goes back to GENERAL after the last command."""
    src_stages: int
    dst_stages: int
    memory: tuple = ()
    buffers: tuple = ()
    images: tuple = ()


def enum(value) -> int:
    """A Vulkan enum or flag value from its VK_* name (as a capture's converted calls write it) or its number."""
    found = int(value) if isinstance(value, int) or str(value).isdigit() else getattr(vk, str(value), None)
    if not isinstance(found, int) or isinstance(found, bool):
        raise ValueError(f"expected a Vulkan VK_* enum name or number, got {value!r}")
    return found


def fence_timeout_s() -> float:
    return float(os.environ.get("WORKBENCH_FENCE_TIMEOUT_S", "120"))


@dataclass(frozen=True)
class DispatchTiming:
    label: str
    gpu_ns: float | None  # None where the queue has no timestamps
    start_ns: float | None  # begin and end, relative to the recording's first timestamp
    end_ns: float | None
    global_size: tuple
    local_size: tuple
    groups: tuple


@dataclass
class _Command:
    kind: str  # "dispatch" | "copy"
    label: str
    pipeline: Pipeline | None = None
    resources: tuple = ()
    global_size: tuple = ()
    groups: tuple = ()
    push_constants: bytes = b""
    src: Buffer | None = None
    dst: Buffer | None = None
    nbytes: int = 0
    base_group: tuple = (0, 0, 0)  # dispatches: vkCmdDispatchBase from this group where not (0, 0, 0)
    barrier: object = True  # True: the recording's barrier before this command (after the previous one); a Barrier


def _three(size) -> tuple:
    return tuple(int(v) for v in (tuple(np.atleast_1d(size)) + (1, 1))[:3])


def as_push_constants(pipeline: Pipeline, values) -> bytes:
    data = values if isinstance(values, (bytes, bytearray)) else np.ascontiguousarray(values).tobytes()
    if len(data) != pipeline.push_constant_size:
        raise ValueError(f"{pipeline.name}: push constants are {pipeline.push_constant_size} B, got {len(data)} B")
    return bytes(data)


class Recording:
    def __init__(self, device, label: str = "", timestamps: bool = True, barrier_timed: bool = False,
                 full_barriers: bool = False):
        """`barrier_timed`: each command's start timestamp goes before the barrier that precedes it, so the
        barrier's cost counts in that command's time. ET-VK's runtime times its dispatches this way
        (DispatchNode::encode writes the start timestamp, binds the pipeline and descriptor set, then inserts the
        dispatch's barrier, pushes its constants and dispatches: the order recorded here too); by default the
        barrier sits between two commands' intervals and counts in neither. `full_barriers`: all commands → all
        commands, memory read / write, the barrier ET-VK widens a write-after-read hazard to
        (vTensorStorage::transition), instead of compute / transfer shader and transfer access."""
        self.device = device
        self.label = label
        self.timestamps = timestamps and device.info.timestamp_valid_bits > 0
        self.barrier_timed = barrier_timed
        self.full_barriers = full_barriers
        self.commands: list[_Command] = []
        self.timings: list[DispatchTiming] = []
        self.host_ns: float | None = None
        self._built = False
        self._pool = self._query_pool = self._cmd = self._fence = None
        self._stuck = False
        self._closed = False
        self._recording_at: int | None = None  # the command being recorded (attributes record-time messages)
        self.printf: list = []  # debugPrintfEXT output of the last submit (the device's "printf" mode)

    def _check_usable(self, what: str) -> None:
        if self._closed:
            raise ClosedError(f"recording {self.label!r} is closed (its with-block ended): cannot {what}; "
                              "keep the submits inside the with-block, or record again")
        self.device.check_open(what)

    # --- collecting commands -------------------------------------------------------------------------------
    def dispatch(self, pipeline: Pipeline, resources, global_size=None, push_constants=b"",
                 label: str | None = None, barrier: bool = True, *, groups=None, base_group=(0, 0, 0)):
        """Add one dispatch. `resources`: in the order of the pipeline's bindings, or a mapping binding number →
        resource (bindings the shader does not use are left out). The size is `global_size` (threads, rounded up
        to whole work groups) or `groups` (work-group counts, as vkCmdDispatch takes them). `barrier=False` leaves
        out the barrier the recording puts between this dispatch and the previous command (for planting races
        that synchronization validation must catch); a `Barrier` (or a sequence of them) is recorded instead of
        it, before the first dispatch too."""
        self._check_usable("dispatch")
        if self._built:
            raise RuntimeError("this recording was already submitted; make a new one to add commands")
        resources = pipeline.order_resources(resources)
        pipeline.check_resources(resources)
        if (global_size is None) == (groups is None):
            raise ValueError(f"{pipeline.name}: give the dispatch's size as global_size or as groups, not "
                             f"{'both' if groups is not None else 'neither'}")
        if groups is not None:
            groups = _three(groups)
            if min(groups) < 1:
                raise ValueError(f"{pipeline.name}: work-group counts must be positive in every axis, got {groups}")
            global_size = tuple(g * l for g, l in zip(groups, pipeline.local_size))
        else:
            global_size = _three(global_size)
            if min(global_size) < 1:
                raise ValueError(f"{pipeline.name}: global size must be positive in every axis, got {global_size}")
            groups = tuple(math.ceil(g / l) for g, l in zip(global_size, pipeline.local_size))
        limit = self.device.info.max_workgroup_count
        if any(g > m for g, m in zip(groups, limit)):
            raise ValueError(f"{pipeline.name}: {groups} workgroups for global size {global_size} exceed the "
                             f"device's maxComputeWorkGroupCount {limit}")
        base_group = _three(base_group) if any(base_group) else (0, 0, 0)
        if any(base_group) and not getattr(pipeline, "dispatch_base", False):
            raise ValueError(f"{pipeline.name}: a dispatch from base group {base_group} needs a pipeline made with "
                             "dispatch_base=True")
        self.commands.append(_Command("dispatch", label or pipeline.name, pipeline, tuple(resources), global_size,
                                      groups, as_push_constants(pipeline, push_constants), barrier=barrier,
                                      base_group=base_group))
        return self

    def copy(self, src: Buffer, dst: Buffer, nbytes: int | None = None, label: str = "copy"):
        self._check_usable("copy")
        if self._built:
            raise RuntimeError("this recording was already submitted; make a new one to add commands")
        for b in (src, dst):
            if not isinstance(b, Buffer) or b.handle is None:
                raise BindingError(f"copy needs two open buffers, got {b!r}"
                                   + (" (closed)" if isinstance(b, Buffer) else ""))
        nbytes = min(src.nbytes, dst.nbytes) if nbytes is None else int(nbytes)
        if nbytes > src.nbytes or nbytes > dst.nbytes:
            raise ValueError(f"copy of {nbytes} B between buffers of {src.nbytes} B and {dst.nbytes} B")
        self.commands.append(_Command("copy", label, src=src, dst=dst, nbytes=nbytes))
        return self

    # --- building and submitting ---------------------------------------------------------------------------
    def _build(self):
        dev = self.device
        handle = dev.handle
        dispatches = [c for c in self.commands if c.kind == "dispatch"]
        counts: dict[int, int] = {}
        for c in dispatches:
            for b in c.pipeline.bindings:
                t = DESCRIPTOR_TYPES[b.kind]
                counts[t] = counts.get(t, 0) + 1
        sets = []
        if dispatches:
            sizes = [vk.VkDescriptorPoolSize(type=t, descriptorCount=n) for t, n in counts.items()]
            pool_info = vk.VkDescriptorPoolCreateInfo(maxSets=len(dispatches), poolSizeCount=len(sizes),
                                                      pPoolSizes=sizes or None)
            self._pool = vk.vkCreateDescriptorPool(handle, pool_info, None)
            layouts = [c.pipeline.set_layout for c in dispatches]
            alloc_info = vk.VkDescriptorSetAllocateInfo(descriptorPool=self._pool, descriptorSetCount=len(layouts),
                                                        pSetLayouts=layouts)
            sets = list(vk.vkAllocateDescriptorSets(handle, alloc_info))
            layouts_at = _image_layouts(self.commands)
            for c, descriptor_set in zip(dispatches, sets):
                _write_descriptors(handle, descriptor_set, c, layouts_at[id(c)])
        if self.timestamps:
            query_info = vk.VkQueryPoolCreateInfo(queryType=vk.VK_QUERY_TYPE_TIMESTAMP,
                                                  queryCount=2 * len(self.commands))
            self._query_pool = vk.vkCreateQueryPool(handle, query_info, None)
        alloc = vk.VkCommandBufferAllocateInfo(commandPool=dev.command_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                               commandBufferCount=1)
        self._cmd = vk.vkAllocateCommandBuffers(handle, alloc)[0]
        cmd = self._cmd
        if dev.instance.validation:  # layer messages about this command buffer come back to this recording
            dev.name_object(vk.VK_OBJECT_TYPE_COMMAND_BUFFER, cmd, self.label or "recording")
            dev.instance.command_buffers[int(vk.ffi.cast("uint64_t", cmd))] = weakref.ref(self)
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo())
        if self.timestamps:
            vk.vkCmdResetQueryPool(cmd, self._query_pool, 0, 2 * len(self.commands))
        access, stages = ((vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT,
                           vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT) if self.full_barriers
                          else (ALL_ACCESS, COMPUTE_AND_TRANSFER))
        barrier = vk.VkMemoryBarrier(srcAccessMask=access, dstAccessMask=access)
        set_iter = iter(sets)
        layouts: dict = {}  # image -> its layout where a Barrier moved it from GENERAL
        for i, c in enumerate(self.commands):
            self._recording_at = i
            if self.timestamps and self.barrier_timed:
                vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self._query_pool, 2 * i)
            if c.kind == "dispatch" and self.barrier_timed:  # ET-VK's order: the binds, then the barrier
                _bind(cmd, c.pipeline, next(set_iter))
            if _barriers_of(c):  # as the program recorded them
                for b in _barriers_of(c):
                    _record_barrier(cmd, b, layouts)
            elif i and c.barrier:  # each command sees everything the previous ones wrote
                vk.vkCmdPipelineBarrier(cmd, stages, stages, 0, 1, [barrier], 0, None, 0, None)
            if self.timestamps and not self.barrier_timed:
                vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self._query_pool, 2 * i)
            if c.kind == "dispatch":
                p = c.pipeline
                if not self.barrier_timed:
                    _bind(cmd, p, next(set_iter))
                if p.push_constant_size:
                    data = vk.ffi.new("char[]", c.push_constants)
                    vk.vkCmdPushConstants(cmd, p.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(c.push_constants),
                                          data)
                if any(c.base_group):
                    vk.vkCmdDispatchBase(cmd, *c.base_group, *c.groups)
                else:
                    vk.vkCmdDispatch(cmd, *c.groups)
            else:
                region = vk.VkBufferCopy(srcOffset=0, dstOffset=0, size=c.nbytes)
                vk.vkCmdCopyBuffer(cmd, c.src.handle, c.dst.handle, 1, [region])
            if self.timestamps:
                vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self._query_pool, 2 * i + 1)
        self._recording_at = None
        for image, layout in layouts.items():  # every submit starts, and every download finds, images in GENERAL
            if layout != vk.VK_IMAGE_LAYOUT_GENERAL:
                dev._image_barrier(cmd, image, layout, vk.VK_IMAGE_LAYOUT_GENERAL)
        vk.vkEndCommandBuffer(cmd)
        self._fence = vk.vkCreateFence(handle, vk.VkFenceCreateInfo(), None)
        self._built = True

    def submit(self, timeout_s: float | None = None) -> list[DispatchTiming]:
        """Run the recorded commands once and wait; returns (and keeps in .timings) one timing per command."""
        self._check_usable("submit")
        if self._stuck:
            raise FenceTimeoutError("this recording timed out earlier; its command buffer may still be running")
        self._check_resources_open()
        if not self._built:
            self._build()
        dev = self.device
        timeout_s = fence_timeout_s() if timeout_s is None else timeout_s
        submit_info = vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=[self._cmd])
        printed = len(dev.instance.printf)
        with sigint_deferred():  # a Ctrl-C after the submit must not close what the queue still runs (a crash)
            vk.vkResetFences(dev.handle, 1, [self._fence])
            start = time.perf_counter_ns()
            vk.vkQueueSubmit(dev.queue, 1, [submit_info], self._fence)
            dev.wait_fence(self._fence, timeout_s, on_timeout=self._mark_stuck, what=self.label or "recording")
            self.host_ns = time.perf_counter_ns() - start
        self.printf = dev.instance.printf[printed:]  # one queue, waited for: all of it is this submit's
        self.timings = self._read_timings()
        return self.timings

    def pipeline_of(self, command_index: int | None):
        if command_index is None or not 0 <= command_index < len(self.commands):
            return None
        return self.commands[command_index].pipeline

    def attribute(self, dispatch_index: int | None, kernel: str | None = None):
        """(label, command index, kernel name) of the dispatch a layer message is about. Record-time messages
        (sync validation): the command being recorded. Submit-time ones (GPU-AV, printf): the layer's dispatch
        index where it can be trusted, else the one dispatch of that kernel; where several dispatches of the
        recording run that kernel and the index cannot be trusted, their labels joined by "|" and index None.
        Layer 1.3.239 (Debian 12) says "Compute Dispatch Index 0" for every dispatch of a command buffer (measured),
        so its index is trusted only from newer layers."""
        if self._recording_at is not None and self._recording_at < len(self.commands):
            c = self.commands[self._recording_at]
            return c.label, self._recording_at, c.pipeline.name if c.pipeline else None
        dispatches = [(i, c) for i, c in enumerate(self.commands) if c.kind == "dispatch"]
        if dispatch_index is not None and self.device.instance.dispatch_index_reliable \
                and 0 <= dispatch_index < len(dispatches):
            i, c = dispatches[dispatch_index]
            if kernel is None or c.pipeline.name == kernel:
                return c.label, i, c.pipeline.name
        candidates = [(i, c) for i, c in dispatches if kernel is None or c.pipeline.name == kernel]
        if len(candidates) == 1:
            i, c = candidates[0]
            return c.label, i, c.pipeline.name
        if candidates:
            return "|".join(c.label for _, c in candidates), None, kernel
        return None, None, kernel

    def printf_messages(self, *, invocation=None, dispatch: str | None = None, kernel: str | None = None) -> list:
        """The last submit's debugPrintfEXT output, filtered by global invocation id, dispatch label, kernel."""
        from .discovery import filter_printf
        return filter_printf(self.printf, invocation=invocation, dispatch=dispatch, kernel=kernel)

    def _check_resources_open(self) -> None:
        for c in self.commands:
            used = ((c.pipeline,) if c.pipeline else ()) + tuple(c.resources) + tuple(r for r in (c.src, c.dst) if r)
            closed = [r for r in used if r.handle is None]
            if closed:
                raise ClosedError(f"recording {self.label!r}: {c.label} uses {closed[0]!r}, closed since it was "
                                  "recorded")

    def _mark_stuck(self):
        self._stuck = True

    def _read_timings(self) -> list[DispatchTiming]:
        n = len(self.commands)
        ticks = [None] * (2 * n)
        if self.timestamps and n:
            data = vk.ffi.new("uint64_t[]", 2 * n)
            vk.vkGetQueryPoolResults(self.device.handle, self._query_pool, 0, 2 * n, 16 * n, data, 8,
                                     vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT)
            mask = (1 << self.device.info.timestamp_valid_bits) - 1 if self.device.info.timestamp_valid_bits < 64 \
                else (1 << 64) - 1
            ticks = [int(data[i]) & mask for i in range(2 * n)]
        period = self.device.info.timestamp_period_ns
        out = []
        for i, c in enumerate(self.commands):
            gpu_ns = start_ns = end_ns = None
            if ticks[2 * i] is not None:
                start_ns = ((ticks[2 * i] - ticks[0]) & mask) * period
                end_ns = ((ticks[2 * i + 1] - ticks[0]) & mask) * period
                gpu_ns = end_ns - start_ns
            local = c.pipeline.local_size if c.pipeline else ()
            out.append(DispatchTiming(c.label, gpu_ns, start_ns, end_ns, c.global_size, local, c.groups))
        return out

    @property
    def gpu_ns(self) -> float | None:
        """Sum of the GPU time of every command of the last submit."""
        if not self.timings or any(t.gpu_ns is None for t in self.timings):
            return None
        return float(sum(t.gpu_ns for t in self.timings))

    def close(self):
        if self._closed or self.device.handle is None:
            self._closed = True
            return
        if self._stuck:
            try:
                vk.vkGetFenceStatus(self.device.handle, self._fence)  # raises VkNotReady while still running
            except vk.VkNotReady:
                return  # the GPU may still use these objects: leaking them beats a crash
            self._stuck = False
        handle = self.device.handle
        if self._fence is not None:
            vk.vkDestroyFence(handle, self._fence, None)
        if self._cmd is not None:
            self.device.instance.command_buffers.pop(int(vk.ffi.cast("uint64_t", self._cmd)), None)
            vk.vkFreeCommandBuffers(handle, self.device.command_pool, 1, [self._cmd])
        if self._query_pool is not None:
            vk.vkDestroyQueryPool(handle, self._query_pool, None)
        if self._pool is not None:
            vk.vkDestroyDescriptorPool(handle, self._pool, None)
        self._fence = self._cmd = self._query_pool = self._pool = None
        self._closed = True
        self.device._untrack(self)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        try:
            if exc_type is None and not self._built and self.commands:
                self.submit()
        finally:
            self.close()


def _bind(cmd, pipeline: Pipeline, descriptor_set) -> None:
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout, 0, 1, [descriptor_set], 0,
                               None)


def _barriers_of(c: _Command) -> tuple:
    return (c.barrier,) if isinstance(c.barrier, Barrier) else \
        tuple(c.barrier) if isinstance(c.barrier, (tuple, list)) else ()


def _image_layouts(commands) -> dict:
    """{id(command): {image: layout}} — where the commands' Barriers have moved images out of GENERAL, at each."""
    layouts, at = {}, {}
    for c in commands:
        for b in _barriers_of(c):
            for image, _, _, _, new in b.images:
                layouts[image] = new
        at[id(c)] = dict(layouts)
    return at


def _record_barrier(cmd, b: Barrier, layouts: dict) -> None:
    """`b` recorded into `cmd`; `layouts` (image -> layout) follows its transitions."""
    ignored = vk.VK_QUEUE_FAMILY_IGNORED
    memory = [vk.VkMemoryBarrier(srcAccessMask=s, dstAccessMask=d) for s, d in b.memory]
    buffers = [vk.VkBufferMemoryBarrier(srcAccessMask=s, dstAccessMask=d, srcQueueFamilyIndex=ignored,
                                        dstQueueFamilyIndex=ignored, buffer=r.handle, offset=0, size=0xFFFFFFFFFFFFFFFF)
               for r, s, d in b.buffers]
    images = []
    whole = vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0, levelCount=1,
                                       baseArrayLayer=0, layerCount=1)
    for r, s, d, old, new in b.images:
        old = old if old == vk.VK_IMAGE_LAYOUT_UNDEFINED else layouts.get(r, vk.VK_IMAGE_LAYOUT_GENERAL)
        images.append(vk.VkImageMemoryBarrier(srcAccessMask=s, dstAccessMask=d, oldLayout=old, newLayout=new,
                                              srcQueueFamilyIndex=ignored, dstQueueFamilyIndex=ignored,
                                              image=r.handle, subresourceRange=whole))
        layouts[r] = new
    vk.vkCmdPipelineBarrier(cmd, b.src_stages, b.dst_stages, 0, len(memory), memory or None, len(buffers),
                            buffers or None, len(images), images or None)


def _write_descriptors(device_handle, descriptor_set, command: _Command, layouts: dict):
    writes = []
    keep = []  # the info structs must outlive vkUpdateDescriptorSets
    for b, r in zip(command.pipeline.bindings, command.resources):
        if isinstance(r, Image):
            sampler = r.device.sampler(r.dims, r.sampler_fields) if b.kind == COMBINED_IMAGE_SAMPLER else None
            info = vk.VkDescriptorImageInfo(sampler=sampler, imageView=r.view,
                                            imageLayout=layouts.get(r, vk.VK_IMAGE_LAYOUT_GENERAL))
            keep.append(info)
            writes.append(vk.VkWriteDescriptorSet(dstSet=descriptor_set, dstBinding=b.binding, descriptorCount=1,
                                                  descriptorType=DESCRIPTOR_TYPES[b.kind], pImageInfo=[info]))
        else:
            info = vk.VkDescriptorBufferInfo(buffer=r.handle, offset=0, range=0xFFFFFFFFFFFFFFFF)
            keep.append(info)
            writes.append(vk.VkWriteDescriptorSet(dstSet=descriptor_set, dstBinding=b.binding, descriptorCount=1,
                                                  descriptorType=DESCRIPTOR_TYPES[b.kind], pBufferInfo=[info]))
    if writes:
        vk.vkUpdateDescriptorSets(device_handle, len(writes), writes, 0, None)
