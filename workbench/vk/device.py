"""The logical `Device`: a queue, a command pool, and factories for everything that runs on it."""
from __future__ import annotations

import threading
from collections import OrderedDict

import vulkan as vk

from . import discovery
from .errors import Closable, ClosedError, FenceTimeoutError, MissingFeatureError
from .interrupts import sigint_deferred
from .memory import Arena, Buffer, Image
from .pipeline import Pipeline, destroy_pipeline_objects
from .recording import Recording, enum, fence_timeout_s


PARKED_PIPELINES = 64  # closed pipelines a device keeps for re-use (lavapipe leaks ~100 KiB per compile)


class Device(Closable):
    """One Vulkan device, ready for compute. Close it (or use `with`) to release every object it made."""

    def __init__(self, selector=None, validation: bool | None = None, *, sync_validation: bool = False,
                 gpu_assisted: bool = False, debug_printf: bool = False, modes=None, layer=None):
        """`validation`: the validation layer (default: WORKBENCH_VALIDATION). The modes, each of which turns the
        layer on: `sync_validation` (synchronization hazards between commands), `gpu_assisted` (GPU-assisted
        validation: out-of-bounds descriptor accesses, checked in instrumented shaders), `debug_printf`
        (debugPrintfEXT output, collected per dispatch: `printf_messages()`); `modes` also takes them as text
        ("sync,gpu") or an iterable. Without any, WORKBENCH_VALIDATION may name modes (e.g. "sync,printf").
        `layer`: the folder of another validation layer's manifest (a newer one: `toolchain.validation`), default
        WORKBENCH_VALIDATION_LAYER, else the system's."""
        chosen = discovery.validation_modes(modes, sync_validation=sync_validation, gpu_assisted=gpu_assisted,
                                            debug_printf=debug_printf)
        self.instance = discovery.instance(validation, chosen if chosen else None, layer)
        self.modes = self.instance.modes
        devices = [discovery._describe(i, pd) for i, pd in enumerate(self.instance.physical_devices)]
        self.info = discovery.select_device(selector, devices)
        self.physical_device = self.instance.physical_devices[self.info.index]
        self._live: dict[int, object] = {}
        self._samplers: dict[int, object] = {}
        self._lock = threading.Lock()
        # Closed pipelines kept for re-use, newest last (see Pipeline.__init__): key -> Vulkan objects.
        self._parked: OrderedDict[tuple, list] = OrderedDict()

        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical_device)
        # Prefer a compute queue with timestamps: the measurements depend on them.
        candidates = [i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT]
        candidates.sort(key=lambda i: families[i].timestampValidBits == 0)
        self.queue_family = candidates[0]

        features = self.info.features
        # Features held back on this device, with why: a validation layer that predates an extension reports every
        # device that enables it (an unknown pNext struct, "not supported by this layer"), drowning real messages.
        self.withheld: dict[str, str] = {}
        layer = self.instance.layer_version if self.instance.validation else None
        if layer and tuple(int(v) for v in layer.split(".")[:3]) < (1, 3, 255) \
                and features.get("cooperative_matrix_khr"):
            features["cooperative_matrix_khr"] = False
            self.withheld["cooperative_matrix_khr"] = (
                f"held back: the validation layer {layer} predates VK_KHR_cooperative_matrix (layers from 1.3.255 "
                f"know it); run without validation, or with a newer layer")
        extensions = [e for e in (discovery.EXT_EXECUTABLE_PROPERTIES,)
                      if features.get("pipeline_executable_properties")]
        if "printf" in self.modes and self.info.api_version < "1.3":  # core in 1.3
            if discovery.EXT_NON_SEMANTIC_INFO not in self.info.extensions:
                raise MissingFeatureError(f"debug printf needs {discovery.EXT_NON_SEMANTIC_INFO}, which "
                                          f"{self.info.name} ({self.info.driver_name}) lacks")
            extensions.append(discovery.EXT_NON_SEMANTIC_INFO)
        if features.get("integer_dot_product") and discovery.EXT_INTEGER_DOT_PRODUCT in self.info.extensions \
                and self.info.api_version < "1.3":
            extensions.append(discovery.EXT_INTEGER_DOT_PRODUCT)
        # Enable only what the kernels use (robustBufferAccess & co. stay off: they cost speed).
        dot = vk.VkPhysicalDeviceShaderIntegerDotProductFeatures(
            shaderIntegerDotProduct=features.get("integer_dot_product", False))
        f16i8 = vk.VkPhysicalDeviceShaderFloat16Int8Features(
            pNext=dot, shaderFloat16=features.get("shader_float16", False),
            shaderInt8=features.get("shader_int8", False))
        s16 = vk.VkPhysicalDevice16BitStorageFeatures(
            pNext=f16i8, storageBuffer16BitAccess=features.get("storage_buffer_16bit", False))
        s8 = vk.VkPhysicalDevice8BitStorageFeatures(
            pNext=s16, storageBuffer8BitAccess=features.get("storage_buffer_8bit", False),
            uniformAndStorageBuffer8BitAccess=features.get("uniform_and_storage_buffer_8bit", False))
        head = s8
        if features.get("pipeline_executable_properties"):
            head = vk.VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR(pNext=s8, pipelineExecutableInfo=True)
        # The roofline probes' optional extensions (shader clocks, SM builtins, NV cooperative matrices).
        chained = []  # every struct of the pNext chain stays referenced until vkCreateDevice
        for ext, feature, struct, fields in (
                (discovery.EXT_SHADER_CLOCK, "shader_subgroup_clock", "VkPhysicalDeviceShaderClockFeaturesKHR",
                 {"shaderSubgroupClock": "shader_subgroup_clock", "shaderDeviceClock": "shader_device_clock"}),
                (discovery.EXT_SM_BUILTINS, "sm_builtins", "VkPhysicalDeviceShaderSMBuiltinsFeaturesNV",
                 {"shaderSMBuiltins": "sm_builtins"}),
                (discovery.EXT_COOPERATIVE_MATRIX_NV, "cooperative_matrix_nv",
                 "VkPhysicalDeviceCooperativeMatrixFeaturesNV", {"cooperativeMatrix": "cooperative_matrix_nv"}),
                (discovery.EXT_COOPERATIVE_MATRIX_KHR, "cooperative_matrix_khr",  # ET-VK's coopmat shaders
                 "VkPhysicalDeviceCooperativeMatrixFeaturesKHR", {"cooperativeMatrix": "cooperative_matrix_khr"})):
            if features.get(feature) and ext in self.info.extensions:
                extensions.append(ext)
                head = getattr(vk, struct)(pNext=head, **{f: features[name] for f, name in fields.items()})
                chained.append(head)
        if features.get("cooperative_matrix2_nv") and features.get("cooperative_matrix_khr") \
                and discovery.EXT_COOPERATIVE_MATRIX2_NV in self.info.extensions:  # workgroup-scope matrices
            extensions.append(discovery.EXT_COOPERATIVE_MATRIX2_NV)
            chained.append(discovery.cooperative_matrix2_struct(head, enable=True))
            head = vk.ffi.cast("void*", chained[-1])
        if features.get("vulkan_memory_model"):  # cooperative-matrix shaders use the Vulkan memory model
            # with it on, a shader's Device-scope barrier (glslang's memoryBarrierShared()) needs DeviceScope too
            head = vk.VkPhysicalDeviceVulkanMemoryModelFeatures(
                pNext=head, vulkanMemoryModel=True,
                vulkanMemoryModelDeviceScope=features.get("vulkan_memory_model_device_scope", False))
            chained.append(head)
        if features.get("maintenance4"):  # shaders built for Vulkan 1.3 take their local size through LocalSizeId
            if self.info.api_version < "1.3":
                extensions.append(discovery.EXT_MAINTENANCE4)
            head = vk.VkPhysicalDeviceMaintenance4Features(pNext=head, maintenance4=True)
            chained.append(head)
        if features.get("buffer_device_address"):  # pointers (PhysicalStorageBuffer): buffers made with addresses
            if self.info.api_version < "1.2":
                extensions.append("VK_KHR_buffer_device_address")
            head = vk.VkPhysicalDeviceBufferDeviceAddressFeatures(pNext=head, bufferDeviceAddress=True)
            chained.append(head)
        core = vk.VkPhysicalDeviceFeatures(shaderInt16=features.get("shader_int16", False),
                                           shaderInt64=features.get("shader_int64", False))
        features2 = vk.VkPhysicalDeviceFeatures2(pNext=head, features=core)
        priorities = [1.0]
        queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=self.queue_family, queueCount=1,
                                                pQueuePriorities=priorities)
        create_info = vk.VkDeviceCreateInfo(pNext=features2, queueCreateInfoCount=1, pQueueCreateInfos=[queue_info],
                                            enabledExtensionCount=len(extensions),
                                            ppEnabledExtensionNames=extensions or None)
        self.handle = vk.vkCreateDevice(self.physical_device, create_info, None)
        self.queue = vk.vkGetDeviceQueue(self.handle, self.queue_family, 0)
        pool_info = vk.VkCommandPoolCreateInfo(queueFamilyIndex=self.queue_family,
                                               flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT)
        self.command_pool = vk.vkCreateCommandPool(self.handle, pool_info, None)
        self.memory_properties = vk.vkGetPhysicalDeviceMemoryProperties(self.physical_device)

    def __repr__(self):
        return f"Device({self.info.name!r}, driver={self.info.driver_name!r})"

    # --- validation: object names, printf ----------------------------------------------------------------------
    def name_object(self, object_type: int, handle, name: str) -> None:
        """Give a Vulkan object a debug name (shown in the validation layer's messages); nothing without the
        layer."""
        if not self.instance.validation or handle is None or not name:
            return
        fn = getattr(self, "_set_name", None)
        if fn is None:
            fn = self._set_name = vk.vkGetInstanceProcAddr(self.instance.handle, "vkSetDebugUtilsObjectNameEXT")
        raw = int(vk.ffi.cast("uint64_t", handle))
        fn(self.handle, vk.VkDebugUtilsObjectNameInfoEXT(objectType=object_type, objectHandle=raw,
                                                          pObjectName=name))

    def printf_messages(self, *, invocation=None, dispatch: str | None = None, kernel: str | None = None,
                        clear: bool = False) -> list:
        """debugPrintfEXT output of this device's instance (the "printf" mode), as `vk.LayerMessage`s (text,
        kernel, dispatch, dispatch_index, invocation), oldest first; filtered by global invocation id (an int: x;
        or a tuple (x, y, z)), dispatch label and kernel name; `clear`: forget them afterwards."""
        out = discovery.filter_printf(self.instance.printf, invocation=invocation, dispatch=dispatch, kernel=kernel)
        if clear:
            self.instance.printf.clear()
        return out

    def take_validation_messages(self) -> list:
        """The attributed validation messages (`vk.LayerMessage`) this device's instance collected so far, which
        are then forgotten (from `vk.validation_messages()` too): for code that expects the layer to speak."""
        inst = self.instance
        out = list(inst.details)
        inst.details.clear()
        inst.messages.clear()
        return out

    # --- bookkeeping -----------------------------------------------------------------------------------------
    def _track(self, obj):
        with self._lock:
            self._live[id(obj)] = obj

    def _untrack(self, obj):
        with self._lock:
            self._live.pop(id(obj), None)

    def _park_pipeline(self, key, objects) -> None:
        with self._lock:
            self._parked.setdefault(key, []).append(objects)
            self._parked.move_to_end(key)
            evicted = []
            while sum(len(v) for v in self._parked.values()) > PARKED_PIPELINES:
                _, stack = next(iter(self._parked.items()))
                evicted.append(stack.pop(0))
                if not stack:
                    self._parked.popitem(last=False)
        for objects in evicted:
            destroy_pipeline_objects(self.handle, objects)

    def _unpark_pipeline(self, key):
        with self._lock:
            stack = self._parked.get(key)
            if not stack:
                return None
            objects = stack.pop()
            if not stack:
                del self._parked[key]
            return objects

    def live_objects(self) -> int:
        """Objects made by this device and not yet closed (buffers, images, pipelines, recordings)."""
        return len(self._live)

    def check_open(self, what: str = "use") -> None:
        if self.handle is None:
            raise ClosedError(f"cannot {what}: device {self.info.name!r} is closed (make a new one, or "
                              "vk.get_device() for the current one)")

    @property
    def validation_messages(self) -> list[str]:
        return self.instance.messages

    def require(self, feature: str) -> None:
        if feature not in self.info.features:
            raise ValueError(f"unknown feature {feature!r}; known: {sorted(self.info.features)}")
        if not self.info.features[feature]:
            why = self.withheld.get(feature)
            raise MissingFeatureError(f"{self.info.name} ({self.info.driver_name}) lacks {feature}"
                                      + (f" ({why})" if why else ""))

    def cooperative_matrix_properties(self) -> list[dict]:
        """Every cooperative-matrix size and type the driver lists (VK_NV_ / VK_KHR_cooperative_matrix), one dict
        per entry: extension ("NV" / "KHR"), M, N, K, A, B, C, D ("sint8", "sint32", ...), scope; [] without."""
        extensions = [e for e in self.info.extensions
                      if not (e == discovery.EXT_COOPERATIVE_MATRIX_KHR and "cooperative_matrix_khr" in self.withheld)]
        return discovery.cooperative_matrix_properties(self.instance, self.physical_device, extensions)

    def cooperative_matrix_flexible_properties(self) -> list[dict]:
        """VK_NV_cooperative_matrix2's workgroup-scope entries (`discovery.cooperative_matrix_flexible_properties`)
        where this device enabled it; [] otherwise."""
        if not (self.info.features.get("cooperative_matrix2_nv") and self.info.features.get("cooperative_matrix_khr")):
            return []
        return discovery.cooperative_matrix_flexible_properties(self.instance, self.physical_device)

    # --- factories -------------------------------------------------------------------------------------------
    def buffer(self, data=None, *, nbytes: int | None = None, name: str = "", device_address: bool = False,
               arena=None) -> Buffer:
        """A storage buffer holding `data` (numpy / torch CPU / bytes), or a zero-filled one of `nbytes`;
        `device_address`: one a shader can reach by pointer (`Buffer.device_address`; the device's
        bufferDeviceAddress feature, else MissingFeatureError); `arena`: bound into it (`vk.Arena`)."""
        self.check_open("create a buffer")
        if (data is None) == (nbytes is None):
            raise ValueError("give either data or nbytes")
        if device_address:
            self.require("buffer_device_address")
        if data is None:
            return Buffer(self, nbytes, name=name, device_address=device_address, arena=arena)
        from .memory import as_numpy
        array = as_numpy(data)
        return Buffer(self, max(array.nbytes, 1), name=name, device_address=device_address,
                      arena=arena).upload(array)

    def uniform(self, data, name: str = "", arena=None) -> Buffer:
        self.check_open("create a uniform buffer")
        from .memory import as_numpy
        array = as_numpy(data)
        return Buffer(self, array.nbytes, uniform=True, name=name, arena=arena).upload(array)

    def image(self, extent, fmt: str = "rgba32f", name: str = "", tiling: str = "optimal", arena=None) -> Image:
        """A 2-D ((x, y)) or 3-D ((x, y, z)) image, bindable as a storage image and as a sampled image; `tiling`
        "optimal" or "linear" (as ET-VK makes its images where the device allows); `arena`: bound into it."""
        self.check_open("create an image")
        return Image(self, extent, fmt, name=name, tiling=tiling, arena=arena)

    def arena(self, block_bytes: int = 64 << 20) -> Arena:
        """Memory that buffers and images are bound into one after another (`vk.Arena`); close it after them."""
        self.check_open("create an arena")
        return Arena(self, block_bytes)

    def sampler(self, dims: int, fields: dict | None = None):
        """The device's nearest-filter, clamp-to-edge sampler for `dims`-D images (made once), or one made with
        `fields` (VkSamplerCreateInfo fields by name, values or their VK_* names: a captured program's sampler).

        2-D images get unnormalised coordinates; Vulkan allows those only for 1-D and 2-D views, so 3-D images get
        normalised ones. texelFetch ignores the sampler's coordinates either way (the hardware may not: a replay
        uses the program's own sampler)."""
        key = (dims, tuple(sorted((fields or {}).items())))
        if key not in self._samplers:
            clamp = vk.VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE
            info = dict(magFilter=vk.VK_FILTER_NEAREST, minFilter=vk.VK_FILTER_NEAREST,
                        mipmapMode=vk.VK_SAMPLER_MIPMAP_MODE_NEAREST, addressModeU=clamp, addressModeV=clamp,
                        addressModeW=clamp, maxLod=0.0, borderColor=vk.VK_BORDER_COLOR_INT_TRANSPARENT_BLACK,
                        unnormalizedCoordinates=vk.VK_TRUE if dims == 2 else vk.VK_FALSE)
            for name, value in (fields or {}).items():
                if isinstance(value, str):  # a VK_* name (recording.enum: the one lookup); unknown: None, refused below
                    try:
                        value = enum(value)
                    except ValueError:
                        value = None
                if name not in info and name not in ("mipLodBias", "minLod") or value is None:
                    raise ValueError(f"expected VkSamplerCreateInfo fields with Vulkan values, got {name}={value!r}")
                info[name] = int(value) if isinstance(value, bool) else value
            self._samplers[key] = vk.vkCreateSampler(self.handle, vk.VkSamplerCreateInfo(**info), None)
        return self._samplers[key]

    def pipeline(self, spirv, *, spec_constants=None, local_size=None, capture_statistics=False,
                 name: str = "kernel", entry_point: str = "main", capture_internal: bool = False,
                 dispatch_base: bool = False) -> Pipeline:
        self.check_open("create a pipeline")
        return Pipeline(self, spirv, spec_constants=spec_constants, local_size=local_size,
                        capture_statistics=capture_statistics, name=name, entry_point=entry_point,
                        capture_internal=capture_internal, dispatch_base=dispatch_base)

    def record(self, label: str = "", timestamps: bool = True, barrier_timed: bool = False,
               full_barriers: bool = False) -> Recording:
        self.check_open("record")
        rec = Recording(self, label, timestamps, barrier_timed, full_barriers)
        self._track(rec)
        return rec

    def run(self, pipeline: Pipeline, resources, global_size, push_constants=b"", label: str | None = None):
        """One dispatch, submitted and waited for; returns its DispatchTiming."""
        with self.record(label or pipeline.name) as rec:
            rec.dispatch(pipeline, resources, global_size, push_constants, label)
            rec.submit()
        return rec.timings[0]

    # --- helpers for memory transfers ---------------------------------------------------------------------------
    def wait_fence(self, fence, timeout_s: float, on_timeout=None, what: str = "work"):
        try:
            vk.vkWaitForFences(self.handle, 1, [fence], vk.VK_TRUE, int(timeout_s * 1e9))
        except vk.VkTimeout:
            if on_timeout:
                on_timeout()
            raise FenceTimeoutError(f"{what} on {self.info.name} did not finish within {timeout_s:g} s "
                                    "(WORKBENCH_FENCE_TIMEOUT_S sets the limit)") from None

    def _one_shot(self, record_fn, what: str):
        alloc = vk.VkCommandBufferAllocateInfo(commandPool=self.command_pool,
                                               level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1)
        cmd = vk.vkAllocateCommandBuffers(self.handle, alloc)[0]
        begin = vk.VkCommandBufferBeginInfo(flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
        vk.vkBeginCommandBuffer(cmd, begin)
        record_fn(cmd)
        vk.vkEndCommandBuffer(cmd)
        fence = vk.vkCreateFence(self.handle, vk.VkFenceCreateInfo(), None)
        submit_info = vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=[cmd])
        try:
            with sigint_deferred():  # a Ctrl-C after the submit must not free what the queue still runs (a crash)
                vk.vkQueueSubmit(self.queue, 1, [submit_info], fence)
                self.wait_fence(fence, fence_timeout_s(), what=what)
        finally:
            vk.vkDestroyFence(self.handle, fence, None)
            vk.vkFreeCommandBuffers(self.handle, self.command_pool, 1, [cmd])

    def copy_buffer(self, src: Buffer, dst: Buffer, nbytes: int, src_offset: int = 0, dst_offset: int = 0):
        def record(cmd):
            region = vk.VkBufferCopy(srcOffset=src_offset, dstOffset=dst_offset, size=nbytes)
            vk.vkCmdCopyBuffer(cmd, src.handle, dst.handle, 1, [region])
        self._one_shot(record, "buffer copy")

    def fill_zero(self, buf: Buffer):
        self._one_shot(lambda cmd: vk.vkCmdFillBuffer(cmd, buf.handle, 0, buf.alloc_size, 0), "buffer fill")

    def _image_barrier(self, cmd, image: Image, old_layout, new_layout):
        subresource = vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0,
                                                 levelCount=1, baseArrayLayer=0, layerCount=1)
        barrier = vk.VkImageMemoryBarrier(srcAccessMask=0 if old_layout == vk.VK_IMAGE_LAYOUT_UNDEFINED else
                                          vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                                          dstAccessMask=vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
                                          | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                                          oldLayout=old_layout, newLayout=new_layout,
                                          srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
                                          dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
                                          image=image.handle, subresourceRange=subresource)
        stages = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        src_stage = vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT if old_layout == vk.VK_IMAGE_LAYOUT_UNDEFINED else stages
        vk.vkCmdPipelineBarrier(cmd, src_stage, stages, 0, 0, None, 0, None, 1, [barrier])

    def init_image(self, image: Image):
        """Move a new image to the GENERAL layout (where it stays) and clear it to zero."""
        def record(cmd):
            self._image_barrier(cmd, image, vk.VK_IMAGE_LAYOUT_UNDEFINED, vk.VK_IMAGE_LAYOUT_GENERAL)
            subresource = vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0,
                                                     levelCount=1, baseArrayLayer=0, layerCount=1)
            if image.dtype.kind == "i":
                color = vk.VkClearColorValue(int32=[0, 0, 0, 0])
            else:
                color = vk.VkClearColorValue(float32=[0.0, 0.0, 0.0, 0.0])
            vk.vkCmdClearColorImage(cmd, image.handle, vk.VK_IMAGE_LAYOUT_GENERAL, color, 1, [subresource])
            self._image_barrier(cmd, image, vk.VK_IMAGE_LAYOUT_GENERAL, vk.VK_IMAGE_LAYOUT_GENERAL)
        self._one_shot(record, "image initialisation")

    def copy_image(self, staging: Buffer, image: Image, to_image: bool):
        def record(cmd):
            layers = vk.VkImageSubresourceLayers(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, mipLevel=0,
                                                 baseArrayLayer=0, layerCount=1)
            x, y, z = image.extent + (1,) * (3 - len(image.extent))
            region = vk.VkBufferImageCopy(bufferOffset=0, bufferRowLength=0, bufferImageHeight=0,
                                          imageSubresource=layers, imageOffset=vk.VkOffset3D(x=0, y=0, z=0),
                                          imageExtent=vk.VkExtent3D(width=x, height=y, depth=z))
            transfer_layout = (vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL if to_image
                               else vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL)
            self._image_barrier(cmd, image, vk.VK_IMAGE_LAYOUT_GENERAL, transfer_layout)
            if to_image:
                vk.vkCmdCopyBufferToImage(cmd, staging.handle, image.handle, transfer_layout, 1, [region])
            else:
                vk.vkCmdCopyImageToBuffer(cmd, image.handle, transfer_layout, staging.handle, 1, [region])
            self._image_barrier(cmd, image, transfer_layout, vk.VK_IMAGE_LAYOUT_GENERAL)
        self._one_shot(record, "image transfer")

    # --- teardown --------------------------------------------------------------------------------------------
    def close(self):
        if self.handle is None:
            return
        vk.vkDeviceWaitIdle(self.handle)
        for obj in list(self._live.values()):
            obj.close()
        for sampler in self._samplers.values():
            vk.vkDestroySampler(self.handle, sampler, None)
        self._samplers.clear()
        for stack in self._parked.values():
            for objects in stack:
                destroy_pipeline_objects(self.handle, objects)
        self._parked.clear()
        vk.vkDestroyCommandPool(self.handle, self.command_pool, None)
        vk.vkDestroyDevice(self.handle, None)
        self.handle = None


_current: Device | None = None
_current_lock = threading.Lock()


def get_device() -> Device:
    """The workbench's current device (created on first use from WORKBENCH_DEVICE or the default rule)."""
    global _current
    with _current_lock:
        if _current is None or _current.handle is None:
            _current = Device()
        return _current


def set_device(selector=None, validation: bool | None = None, **modes) -> Device:
    """Make another device current (closing the previous one); `modes`: Device's sync_validation, gpu_assisted,
    debug_printf, modes."""
    global _current
    with _current_lock:
        if _current is not None:
            _current.close()
        _current = Device(selector, validation, **modes)
        return _current
