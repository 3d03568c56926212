"""Compute pipelines from SPIR-V: reflected layout, specialization constants, and driver statistics."""
from __future__ import annotations

import struct
from collections.abc import Mapping

import vulkan as vk

from . import spirv as sp
from .errors import BindingError, Closable, ClosedError, MissingFeatureError

DESCRIPTOR_TYPES = {
    sp.STORAGE_BUFFER: vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
    sp.UNIFORM_BUFFER: vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER,
    sp.STORAGE_IMAGE: vk.VK_DESCRIPTOR_TYPE_STORAGE_IMAGE,
    sp.SAMPLED_IMAGE: vk.VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE,
    sp.COMBINED_IMAGE_SAMPLER: vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER,
}
IMAGE_KINDS = (sp.STORAGE_IMAGE, sp.SAMPLED_IMAGE, sp.COMBINED_IMAGE_SAMPLER)
SPEC_FORMATS = {"int": "<i", "uint": "<I", "float": "<f", "bool": "<I"}
DEFAULT_LOCAL_SIZE = (64, 1, 1)
CAPTURE_STATISTICS = 0x00000040  # VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR
CAPTURE_INTERNAL = 0x00000080    # VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR
DISPATCH_BASE = 0x00000010       # VK_PIPELINE_CREATE_DISPATCH_BASE_BIT: vkCmdDispatchBase from a non-zero group


def _spec_bytes(kind: str, value, spec_id: int) -> bytes:
    if isinstance(value, (bytes, bytearray)):  # raw, as a captured VkSpecializationInfo holds it
        if len(value) != 4:
            raise ValueError(f"specialization constant {spec_id} ({kind}) takes 4 bytes, got {len(value)}")
        return bytes(value)
    if kind == "bool":
        if not isinstance(value, (bool, int)) or int(value) not in (0, 1):
            raise TypeError(f"specialization constant {spec_id} is a bool, got {value!r}")
        return struct.pack("<I", int(bool(value)))
    if kind in ("int", "uint"):
        if isinstance(value, float) and not float(value).is_integer():
            raise TypeError(f"specialization constant {spec_id} is an {kind}, got {value!r}")
        value = int(value)
        lo, hi = (-2**31, 2**31 - 1) if kind == "int" else (0, 2**32 - 1)
        if not lo <= value <= hi:
            raise ValueError(f"specialization constant {spec_id} ({kind}) out of range: {value}")
    return struct.pack(SPEC_FORMATS[kind], value)


def _distinct_bindings(name: str, bindings) -> list:
    """Each binding number once: a shader may declare one binding as several blocks (ggml's shaders alias a buffer
    as vec4s and as scalars), which the layout, the pool and the writes name once. Aliases of different descriptor
    kinds are a BindingError."""
    seen: dict = {}
    for b in bindings:
        first = seen.setdefault((b.set, b.binding), b)
        if first.kind != b.kind:
            raise BindingError(f"{name}: binding {b.binding} is declared as a {first.kind} ({first.name}) and as a "
                               f"{b.kind} ({b.name})")
    return list(seen.values())


class Pipeline(Closable):
    """One compute pipeline. `bindings` and `push_constant_size` come from the SPIR-V itself.

    `spec_constants`: id → value (int, float, bool, or the 4 raw bytes a capture holds). Ids the module does not
    declare are dropped, as Vulkan ignores them (ET-VK passes its whole list; glslc -O removes unused ones);
    `dropped_spec_constants` names them. `entry_point`: the compute entry point's name. `capture_internal`: keep
    the driver's internal representations (NIR, its ISA) for `internal_representations`."""

    def __init__(self, device, code: bytes, *, spec_constants=None, local_size=None,
                 capture_statistics: bool = False, name: str = "kernel", entry_point: str = "main",
                 capture_internal: bool = False, dispatch_base: bool = False):
        self.device = device
        self.name = name
        if hasattr(code, "code"):  # a workbench.toolchain.shaders.Spirv
            name = name if name != "kernel" else code.name
            self.name = name
            code = code.code
        code = bytes(code)
        # kept only under the validation layer: naming the binding of a message's instruction (sp.binding_at)
        self.code = code if device.instance.validation else None
        self.reflection = sp.reflect(code)
        self.bindings = _distinct_bindings(name, self.reflection.bindings)
        self.push_constant_size = self.reflection.push_constant_size
        if any(b.set != 0 for b in self.bindings):
            raise BindingError(f"{name}: only descriptor set 0 is supported, shader uses sets "
                               f"{sorted({b.set for b in self.bindings})}")
        for b in self.bindings:
            if b.kind not in DESCRIPTOR_TYPES:
                raise BindingError(f"{name}: binding {b.binding} ({b.name}) is a {b.kind}; the runtime binds "
                                   f"{', '.join(DESCRIPTOR_TYPES)}")
            if b.kind in IMAGE_KINDS and b.dims not in (2, 3):
                raise BindingError(f"{name}: binding {b.binding} ({b.name}) is a {b.kind} of an unsupported "
                                   "dimensionality; the runtime binds 2-D and 3-D images")
        wants_executable_info = capture_statistics or capture_internal
        if wants_executable_info and not device.info.features.get("pipeline_executable_properties"):
            raise MissingFeatureError(
                f"pipeline statistics and internal representations need VK_KHR_pipeline_executable_properties, "
                f"which {device.info.name} "
                f"({device.info.driver_name}) does not expose")
        if self.reflection.local_size_id and not device.info.features.get("maintenance4"):
            raise MissingFeatureError(f"{name}: the shader sets its local size with LocalSizeId (glslang does for "
                                      f"Vulkan 1.3 targets), which needs maintenance4; {device.info.name} lacks it")
        self.capture_statistics = capture_statistics
        self.capture_internal = bool(capture_internal)
        self.dispatch_base = bool(dispatch_base)  # dispatched from a base group (a captured vkCmdDispatchBase)
        self.entry_point = str(entry_point)
        if self.entry_point not in self.reflection.entry_points:
            raise BindingError(f"{name}: no compute entry point {self.entry_point!r} in the module (it has "
                               f"{self.reflection.entry_points or 'none'})")
        self.local_size = self._resolve_local_size(local_size)
        self.spec_constants = sp.declared(self.reflection, spec_constants)
        self.dropped_spec_constants = sorted({int(k) for k in dict(spec_constants or {})} - set(self.spec_constants))
        limit = device.info.max_push_constants_bytes
        if self.push_constant_size > limit:
            raise BindingError(f"{name}: push constants of {self.push_constant_size} B exceed the device's {limit} B")

        # Specialization: the local size on the ids the shader takes it from (0..2 in ET-VK's and the workbench's
        # shaders, any in others'), then the kernel's own constants. Checked and encoded before any Vulkan object
        # exists, so a refused constant leaves nothing behind.
        values = dict(self.spec_constants)
        if self.reflection.local_size_from_spec:
            values.update({sid: v for sid, v in zip(self.reflection.local_size_spec_ids, self.local_size)
                           if sid is not None})
        data = b""
        placed = []
        for spec_id, value in sorted(values.items()):
            chunk = _spec_bytes(self.reflection.spec_constants[spec_id], value, spec_id)
            placed.append((spec_id, len(data), len(chunk)))
            data += chunk

        handle = device.handle
        # lavapipe never frees a compiled pipeline's JIT code (~100 KiB each, tools/pipeline_churn.py): re-use a
        # closed pipeline with the same code and constants instead of compiling it again.
        self._reuse_key = (bytes(code), tuple(sorted(self.spec_constants.items())), self.local_size,
                           capture_statistics, self.entry_point, self.capture_internal, self.dispatch_base)
        parked = device._unpark_pipeline(self._reuse_key)
        if parked is not None:
            self.set_layout, self.layout, self.module, self.handle = parked
            device._track(self)
            device.name_object(vk.VK_OBJECT_TYPE_PIPELINE, self.handle, self.name)
            return
        self.set_layout = self.layout = self.module = self.handle = None
        try:
            self._create(handle, code, data, placed, capture_statistics)
        except BaseException:  # a driver that refuses the pipeline: destroy what was made before it
            if self.handle is not None:
                vk.vkDestroyPipeline(handle, self.handle, None)
            if self.module is not None:
                vk.vkDestroyShaderModule(handle, self.module, None)
            if self.layout is not None:
                vk.vkDestroyPipelineLayout(handle, self.layout, None)
            if self.set_layout is not None:
                vk.vkDestroyDescriptorSetLayout(handle, self.set_layout, None)
            raise
        device._track(self)

    def _create(self, handle, code: bytes, data: bytes, placed, capture_statistics: bool) -> None:
        layout_bindings = [vk.VkDescriptorSetLayoutBinding(binding=b.binding, descriptorType=DESCRIPTOR_TYPES[b.kind],
                                                           descriptorCount=1,
                                                           stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                           for b in self.bindings]
        set_layout_info = vk.VkDescriptorSetLayoutCreateInfo(bindingCount=len(layout_bindings),
                                                             pBindings=layout_bindings or None)
        self.set_layout = vk.vkCreateDescriptorSetLayout(handle, set_layout_info, None)
        ranges = []
        if self.push_constant_size:
            ranges.append(vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0,
                                                 size=self.push_constant_size))
        layout_info = vk.VkPipelineLayoutCreateInfo(setLayoutCount=1, pSetLayouts=[self.set_layout],
                                                    pushConstantRangeCount=len(ranges),
                                                    pPushConstantRanges=ranges or None)
        self.layout = vk.vkCreatePipelineLayout(handle, layout_info, None)
        module_info = vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code)
        self.module = vk.vkCreateShaderModule(handle, module_info, None)
        entries = [vk.VkSpecializationMapEntry(constantID=spec_id, offset=offset, size=size)
                   for spec_id, offset, size in placed]
        self._spec_data = vk.ffi.new("char[]", data or b"\0")
        spec_info = vk.VkSpecializationInfo(mapEntryCount=len(entries), pMapEntries=entries or None,
                                            dataSize=len(data), pData=self._spec_data)
        stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=self.module,
                                                   pName=self.entry_point, pSpecializationInfo=spec_info)
        pipeline_info = vk.VkComputePipelineCreateInfo(stage=stage, layout=self.layout,
                                                       flags=(CAPTURE_STATISTICS if capture_statistics else 0)
                                                       | (CAPTURE_INTERNAL if self.capture_internal else 0)
                                                       | (DISPATCH_BASE if self.dispatch_base else 0))
        self.handle = vk.vkCreateComputePipelines(handle, None, 1, [pipeline_info], None)[0]
        self.device.name_object(vk.VK_OBJECT_TYPE_PIPELINE, self.handle, self.name)  # layer messages name it

    def _resolve_local_size(self, local_size):
        literal = self.reflection.local_size
        if local_size is None:
            return literal or DEFAULT_LOCAL_SIZE
        local_size = tuple(int(v) for v in (tuple(local_size) + (1, 1))[:3])
        if literal and not self.reflection.local_size_from_spec and local_size != literal:
            raise BindingError(f"{self.name}: the shader fixes local size {literal}; asked for {local_size} "
                               "(use local_size_x_id = 0 … to make it a specialization constant)")
        if self.reflection.local_size_from_spec:
            fixed = [(axis, d) for axis, (sid, d, v) in enumerate(zip(self.reflection.local_size_spec_ids,
                                                                       self.reflection.local_size_default, local_size))
                     if sid is None and d != v]
            if fixed:
                raise BindingError(f"{self.name}: the shader fixes local size axis {'xyz'[fixed[0][0]]} at "
                                   f"{fixed[0][1]}; asked for {local_size}")
        info = self.device.info
        if any(v < 1 for v in local_size) or any(v > m for v, m in zip(local_size, info.max_workgroup_size)) \
                or local_size[0] * local_size[1] * local_size[2] > info.max_workgroup_invocations:
            raise ValueError(f"{self.name}: local size {local_size} exceeds the device's limits "
                             f"(max size {info.max_workgroup_size}, max invocations {info.max_workgroup_invocations})")
        return local_size

    def __repr__(self):
        return f"Pipeline({self.name}, local_size={self.local_size}, bindings={len(self.bindings)})"

    def statistics(self) -> dict:
        """Every statistic the driver reports for this pipeline's executables, name → value.

        With several executables (rare for compute) names get the executable's name as a prefix."""
        if self.handle is None:
            raise ClosedError(f"{self.name}: cannot read statistics of a closed pipeline")
        if not self.capture_statistics:
            raise RuntimeError(f"{self.name}: create the pipeline with capture_statistics=True to read statistics")
        executables = _enumerate(self.device, "vkGetPipelineExecutablePropertiesKHR",
                                 "VkPipelineExecutablePropertiesKHR",
                                 vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR,
                                 vk.VkPipelineInfoKHR(pipeline=self.handle))
        result = {}
        for index in range(len(executables)):
            executable = executables[index]
            info = vk.VkPipelineExecutableInfoKHR(pipeline=self.handle, executableIndex=index)
            prefix = "" if len(executables) == 1 else f"{vk.ffi.string(executable.name).decode()}: "
            stats = _enumerate(self.device, "vkGetPipelineExecutableStatisticsKHR",
                               "VkPipelineExecutableStatisticKHR",
                               vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR, info)
            for i in range(len(stats)):
                result[prefix + vk.ffi.string(stats[i].name).decode()] = _statistic_value(stats[i])
            result[prefix + "Subgroup Size"] = int(executable.subgroupSize)
        return result

    def internal_representations(self) -> list[dict]:
        """The driver's internal representations of this pipeline (VK_KHR_pipeline_executable_properties):
        [{"executable", "name", "description", "text"}] in the driver's order (Mesa: NIR stages, then the final ISA:
        Turnip "IR3 Assembly", PanVK "Assembly", RADV "Assembly"); binary ones as hex. Needs capture_internal=True.
        A driver that answers from its in-memory pipeline cache may return fewer (the ISA of a cached binary)."""
        if self.handle is None:
            raise ClosedError(f"{self.name}: cannot read internal representations of a closed pipeline")
        if not self.capture_internal:
            raise RuntimeError(f"{self.name}: create the pipeline with capture_internal=True to read its internal "
                               "representations")
        executables = _enumerate(self.device, "vkGetPipelineExecutablePropertiesKHR",
                                 "VkPipelineExecutablePropertiesKHR",
                                 vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR,
                                 vk.VkPipelineInfoKHR(pipeline=self.handle))
        out = []
        function = "vkGetPipelineExecutableInternalRepresentationsKHR"
        address = vk.lib.vkGetDeviceProcAddr(self.device.handle, function.encode())
        if address == vk.ffi.NULL:
            raise MissingFeatureError(f"{self.device.info.name} has no {function}")
        fn = vk.ffi.cast(f"PFN_{function}", address)
        for index in range(len(executables)):
            executable = vk.ffi.string(executables[index].name).decode()
            info = vk.VkPipelineExecutableInfoKHR(pipeline=self.handle, executableIndex=index)
            info_ptr = vk.ffi.addressof(info)
            count = vk.ffi.new("uint32_t*")
            if fn(self.device.handle, info_ptr, count, vk.ffi.NULL) != vk.VK_SUCCESS:
                raise RuntimeError(f"{function} failed")
            items = vk.ffi.new("VkPipelineExecutableInternalRepresentationKHR[]", count[0])
            for i in range(count[0]):  # first the sizes, then the data (two calls, as the spec has it)
                items[i].sType = vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR
            if fn(self.device.handle, info_ptr, count, items) != vk.VK_SUCCESS:
                raise RuntimeError(f"{function} failed")
            buffers = [vk.ffi.new("char[]", max(1, int(items[i].dataSize))) for i in range(count[0])]
            for i in range(count[0]):
                items[i].pData = buffers[i]
            if fn(self.device.handle, info_ptr, count, items) not in (vk.VK_SUCCESS, vk.VK_INCOMPLETE):
                raise RuntimeError(f"{function} failed")
            for i in range(count[0]):
                size = int(items[i].dataSize)
                data = bytes(vk.ffi.buffer(buffers[i], size))
                text = data.split(b"\0", 1)[0].decode(errors="replace") if items[i].isText else data.hex()
                out.append({"executable": executable, "name": vk.ffi.string(items[i].name).decode(),
                            "description": vk.ffi.string(items[i].description).decode(), "text": text})
        return out

    def order_resources(self, resources) -> list:
        """`resources` as a list in binding order: a sequence is taken as it is; a mapping binding number →
        resource gives each of the shader's bindings its own (ones the shader does not use are left out)."""
        if not isinstance(resources, Mapping):
            return list(resources)
        missing = [f"{b.binding}:{b.name} ({b.kind})" for b in self.bindings if b.binding not in resources]
        if missing:
            raise BindingError(f"{self.name}: no resource for binding{'s' if len(missing) > 1 else ''} "
                               f"{', '.join(missing)}; given bindings {sorted(resources)}")
        return [resources[b.binding] for b in self.bindings]

    def check_resources(self, resources) -> None:
        from .memory import Buffer, Image
        if self.handle is None:
            raise ClosedError(f"{self.name}: the pipeline is closed; create it again to dispatch it")
        if len(resources) != len(self.bindings):
            expected = ", ".join(f"{b.binding}:{b.name} ({b.kind})" for b in self.bindings)
            raise BindingError(f"{self.name}: expected {len(self.bindings)} resources [{expected}], "
                               f"got {len(resources)}: {list(resources)}")
        for b, r in zip(self.bindings, resources):
            ok = ((b.kind == sp.STORAGE_BUFFER and isinstance(r, Buffer) and not r.uniform)
                  or (b.kind == sp.UNIFORM_BUFFER and isinstance(r, Buffer) and r.uniform)
                  or (b.kind in IMAGE_KINDS and isinstance(r, Image)))
            if not ok:
                what = f"{b.dims}-D {b.kind}" if b.kind in IMAGE_KINDS else b.kind
                raise BindingError(f"{self.name}: binding {b.binding} ({b.name}) needs a {what}, got {r!r}")
            if b.kind in IMAGE_KINDS:
                if r.dims != b.dims:
                    raise BindingError(f"{self.name}: binding {b.binding} ({b.name}) needs a {b.dims}-D image, got "
                                       f"the {r.dims}-D {r!r}")
                usable = r.storage if b.kind == sp.STORAGE_IMAGE else r.sampled
                if not usable:
                    raise BindingError(f"{self.name}: binding {b.binding} ({b.name}) needs a {b.kind}, but "
                                       f"{self.device.info.name} does not support {r.format} images as one")
            if r.handle is None:
                raise BindingError(f"{self.name}: binding {b.binding} ({b.name}) was given a closed resource {r!r}")
            if r.device is not self.device:
                raise BindingError(f"{self.name}: binding {b.binding} ({b.name}) belongs to another device")

    def close(self):
        if self.handle is None:
            return
        objects = (self.set_layout, self.layout, self.module, self.handle)
        self.handle = None
        self.device._untrack(self)
        self.device._park_pipeline(self._reuse_key, objects)


def _enumerate(device, function: str, struct_name: str, s_type: int, info) -> list:
    """Call a count-then-fill enumeration through the raw function pointer: the binding's own wrapper leaves the
    output structs' sType unset, which the validation layer (rightly) reports."""
    address = vk.lib.vkGetDeviceProcAddr(device.handle, function.encode())
    if address == vk.ffi.NULL:
        raise MissingFeatureError(f"{device.info.name} has no {function}")
    fn = vk.ffi.cast(f"PFN_{function}", address)
    info_ptr = vk.ffi.addressof(info)
    count = vk.ffi.new("uint32_t*")
    if fn(device.handle, info_ptr, count, vk.ffi.NULL) != vk.VK_SUCCESS:
        raise RuntimeError(f"{function} failed")
    items = vk.ffi.new(f"{struct_name}[]", count[0])
    for i in range(count[0]):
        items[i].sType = s_type
    if fn(device.handle, info_ptr, count, items) != vk.VK_SUCCESS:
        raise RuntimeError(f"{function} failed")
    return items  # the owning array: elements taken from it stay valid only while it lives


def _statistic_value(stat):
    fmt = stat.format
    if fmt == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        return bool(stat.value.b32)
    if fmt == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        return int(stat.value.i64)
    if fmt == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        return int(stat.value.u64)
    return float(stat.value.f64)


def destroy_pipeline_objects(device_handle, objects) -> None:
    set_layout, layout, module, pipeline = objects
    vk.vkDestroyPipeline(device_handle, pipeline, None)
    vk.vkDestroyShaderModule(device_handle, module, None)
    vk.vkDestroyPipelineLayout(device_handle, layout, None)
    vk.vkDestroyDescriptorSetLayout(device_handle, set_layout, None)
