"""Buffers and 2-D / 3-D images (storage and sampled), with upload/download from numpy arrays and torch CPU tensors.

Memory is device-local. Where that memory is also host-visible (CPU devices, integrated GPUs) it is mapped and
written directly; otherwise uploads and downloads go through a temporary host-visible staging buffer.
"""
from __future__ import annotations

import numpy as np
import vulkan as vk

from .errors import Closable, ClosedError

HOST_VISIBLE = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
DEVICE_LOCAL = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
# the binding (1.3.275.1) leaves these two None: Vulkan's values
SHADER_DEVICE_ADDRESS = 0x00020000  # VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT
ALLOCATE_DEVICE_ADDRESS = 0x00000002  # VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT


def as_numpy(data) -> np.ndarray:
    """A C-contiguous numpy view of a numpy array or a torch CPU tensor (bfloat16 travels as its 16 bits)."""
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        torch = None
    if torch is not None and isinstance(data, torch.Tensor):
        if data.device.type != "cpu":
            raise TypeError(f"expected a CPU tensor, got a tensor on {data.device}")
        t = data.detach().contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        return t.numpy()
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(data), dtype=np.uint8)
    raise TypeError(f"expected a numpy array, a torch CPU tensor or bytes, got {type(data).__name__}")


def check_open(obj, what: str) -> None:
    """A clear error for a closed buffer or image (or one whose device was closed)."""
    if obj.handle is None:
        raise ClosedError(f"cannot {what} {obj!r}: it is closed")
    obj.device.check_open(f"{what} {obj!r}")


TILINGS = {"optimal": vk.VK_IMAGE_TILING_OPTIMAL, "linear": vk.VK_IMAGE_TILING_LINEAR}


def _memory_type(device, requirements, wanted: int, fallback: int) -> tuple[int, int]:
    props = device.memory_properties
    for flags in (wanted, fallback):
        for i in range(props.memoryTypeCount):
            type_flags = props.memoryTypes[i].propertyFlags
            if requirements.memoryTypeBits & (1 << i) and (type_flags & flags) == flags:
                return i, type_flags
    raise MemoryError(f"no memory type with flags {wanted:#x} or {fallback:#x} for bits "
                      f"{requirements.memoryTypeBits:#x} on {device.info.name}")


class Arena(Closable):
    """Device memory that many buffers and images are bound into, one after another, as VMA suballocates ET-VK's
    tensors from large blocks (the GPU then walks a few large pages, not one allocation a resource): blocks of
    `block_bytes` (or larger for one big resource) per memory type, made as resources ask; a resource made in an
    arena frees nothing on close, the arena frees its blocks on close (after its resources)."""

    def __init__(self, device, block_bytes: int = 64 << 20):
        self.device, self.block_bytes = device, int(block_bytes)
        self._blocks: dict[tuple, list] = {}  # (memory type, optimal image) -> [[memory, size, used, mapping], …]
        self._captured: dict = {}  # captured memory id -> [memory, size, type flags, mapping] (`at`)
        self.unplaced = 0  # resources `at` could not put at their captured place
        self.handle = True

    def take(self, requirements, wanted: int, fallback: int, optimal_image: bool = False) -> tuple:
        """(memory, offset, type flags, mapping of the range or None) for `requirements`; optimal-tiled images in
        blocks of their own (no bufferImageGranularity to keep from linear neighbours)."""
        index, flags = _memory_type(self.device, requirements, wanted, fallback)
        granule = max(int(requirements.alignment), 256)
        size = int(requirements.size)
        blocks = self._blocks.setdefault((index, optimal_image), [])
        block = blocks[-1] if blocks else None
        offset = 0 if block is None else -(-block[2] // granule) * granule
        if block is None or offset + size > block[1]:
            total = max(self.block_bytes, size)
            memory = vk.vkAllocateMemory(self.device.handle, vk.VkMemoryAllocateInfo(allocationSize=total,
                                                                                     memoryTypeIndex=index), None)
            mapping = vk.vkMapMemory(self.device.handle, memory, 0, total, 0) \
                if (flags & HOST_VISIBLE) == HOST_VISIBLE else None
            block, offset = [memory, total, 0, mapping], 0
            blocks.append(block)
        block[2] = offset + size
        view = None if block[3] is None else memoryview(block[3])[offset:offset + size]
        return block[0], offset, flags, view

    def at(self, memory_id, size: int, type_index: int, offset: int) -> "Placed":
        """A resource's place in one of a captured program's allocations (id, bytes, memory type, offset): `take`
        there binds the resource at that offset of that allocation, made once at its captured size and type, so
        resources the program aliased share memory again; a resource that does not fit its place (its alignment,
        size or memory types) goes where `take` would put it, counted in `unplaced`."""
        return Placed(self, memory_id, int(size), int(type_index), int(offset))

    def close(self):
        for blocks in [*self._blocks.values(), self._captured.values()]:
            for memory, _, _, mapping in blocks:
                if mapping is not None:
                    vk.vkUnmapMemory(self.device.handle, memory)
                vk.vkFreeMemory(self.device.handle, memory, None)
        self._blocks.clear()
        self._captured.clear()
        self.handle = None


class Placed:
    """`Arena.at`'s answer: `take` as the arena's, at a captured place."""

    def __init__(self, arena: Arena, memory_id, size: int, type_index: int, offset: int):
        self.arena, self.memory_id, self.size, self.type_index, self.offset = arena, memory_id, size, type_index, offset

    def take(self, requirements, wanted: int, fallback: int, optimal_image: bool = False) -> tuple:
        arena, props = self.arena, self.arena.device.memory_properties
        if self.offset % max(int(requirements.alignment), 1) or self.offset + int(requirements.size) > self.size \
                or self.type_index >= props.memoryTypeCount or not requirements.memoryTypeBits & (1 << self.type_index):
            arena.unplaced += 1
            return arena.take(requirements, wanted, fallback, optimal_image)
        block = arena._captured.get(self.memory_id)
        if block is None:
            flags = props.memoryTypes[self.type_index].propertyFlags
            memory = vk.vkAllocateMemory(arena.device.handle, vk.VkMemoryAllocateInfo(
                allocationSize=self.size, memoryTypeIndex=self.type_index), None)
            mapping = vk.vkMapMemory(arena.device.handle, memory, 0, self.size, 0) \
                if (flags & HOST_VISIBLE) == HOST_VISIBLE else None
            block = arena._captured[self.memory_id] = [memory, self.size, flags, mapping]
        memory, _, flags, mapping = block
        view = None if mapping is None else memoryview(mapping)[self.offset:self.offset + int(requirements.size)]
        return memory, self.offset, flags, view


class _DeviceMemory(Closable):
    """What buffers and images share: one handle bound to its own device memory, tracked by the device until
    close()."""

    def _destroy(self, handle) -> None:
        """Destroy the object's own handles (its memory is freed after)."""
        raise NotImplementedError

    def close(self):
        if self.handle is None:
            return
        handle = self.device.handle
        self._destroy(handle)
        if not getattr(self, "in_arena", False):  # an arena's blocks are freed by the arena
            vk.vkFreeMemory(handle, self.memory, None)
        self.handle = None
        self.device._untrack(self)


class Buffer(_DeviceMemory):
    """A storage (or uniform) buffer of `nbytes` bytes."""

    def __init__(self, device, nbytes: int, *, uniform: bool = False, host_visible: bool = False, name: str = "",
                 device_address: bool = False, arena: Arena | None = None):
        if int(nbytes) <= 0:
            raise ValueError(f"a buffer needs at least 1 byte, got {nbytes}")
        self.device = device
        self.nbytes = int(nbytes)
        self.uniform = uniform
        self.name = name
        self.alloc_size = (self.nbytes + 15) // 16 * 16  # vec4 over-reads stay inside the buffer
        usage = (vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
                 | (vk.VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT if uniform else vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT)
                 | (SHADER_DEVICE_ADDRESS if device_address else 0))
        create_info = vk.VkBufferCreateInfo(size=self.alloc_size, usage=usage,
                                            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        handle = device.handle
        self.handle = vk.vkCreateBuffer(handle, create_info, None)
        device.name_object(vk.VK_OBJECT_TYPE_BUFFER, self.handle, name)  # sync validation names the buffer
        requirements = vk.vkGetBufferMemoryRequirements(handle, self.handle)
        wanted = HOST_VISIBLE if host_visible else DEVICE_LOCAL
        self.in_arena = arena is not None and not device_address
        if self.in_arena:
            self.memory, offset, flags, self._mapped = arena.take(requirements, wanted, HOST_VISIBLE)
            vk.vkBindBufferMemory(handle, self.handle, self.memory, offset)
        else:
            index, flags = _memory_type(device, requirements, wanted, HOST_VISIBLE)
            flags_info = vk.VkMemoryAllocateFlagsInfo(flags=ALLOCATE_DEVICE_ADDRESS) \
                if device_address else None
            alloc_info = vk.VkMemoryAllocateInfo(pNext=flags_info, allocationSize=requirements.size,
                                                 memoryTypeIndex=index)
            self.memory = vk.vkAllocateMemory(handle, alloc_info, None)
            vk.vkBindBufferMemory(handle, self.handle, self.memory, 0)
        self.device_address = None  # where a shader's pointers reach it (the binding's wrapper returns its input)
        if device_address:
            info = vk.VkBufferDeviceAddressInfo(buffer=self.handle)
            self.device_address = int(vk.lib.vkGetBufferDeviceAddress(handle, vk.ffi.addressof(info)))
        self.mappable = (flags & HOST_VISIBLE) == HOST_VISIBLE
        if not self.in_arena:
            self._mapped = vk.vkMapMemory(handle, self.memory, 0, self.alloc_size, 0) if self.mappable else None
        if self._mapped is not None:
            np.frombuffer(self._mapped, dtype=np.uint8)[:] = 0
        else:
            device.fill_zero(self)
        device._track(self)

    def __repr__(self):
        return f"Buffer({self.name or 'unnamed'}, {self.nbytes} B{', uniform' if self.uniform else ''})"

    def upload(self, data, offset: int = 0) -> "Buffer":
        check_open(self, "upload to")
        raw = as_numpy(data).reshape(-1).view(np.uint8)
        if offset < 0 or offset + raw.nbytes > self.nbytes:
            raise ValueError(f"upload of {raw.nbytes} B at offset {offset} does not fit buffer "
                             f"{self.name or ''} of {self.nbytes} B")
        if self._mapped is not None:
            np.frombuffer(self._mapped, dtype=np.uint8)[offset:offset + raw.nbytes] = raw
        else:
            with Buffer(self.device, raw.nbytes, host_visible=True, name="staging") as staging:
                staging.upload(raw)
                self.device.copy_buffer(staging, self, raw.nbytes, dst_offset=offset)
        return self

    def download(self, dtype=np.uint8, shape=None) -> np.ndarray:
        """The buffer's content as a new numpy array of `dtype` (and `shape`, whose size must fit exactly)."""
        check_open(self, "download from")
        dtype = np.dtype(dtype)
        if shape is None:
            if self.nbytes % dtype.itemsize:
                raise ValueError(f"buffer of {self.nbytes} B is not a whole number of {dtype} elements")
            shape = (self.nbytes // dtype.itemsize,)
        shape = tuple(int(s) for s in np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
        wanted = int(np.prod(shape)) * dtype.itemsize
        if wanted > self.nbytes:
            raise ValueError(f"asked for {shape} of {dtype} = {wanted} B from a buffer of {self.nbytes} B")
        if self._mapped is not None:
            raw = np.frombuffer(self._mapped, dtype=np.uint8, count=wanted).copy()
        else:
            with Buffer(self.device, wanted, host_visible=True, name="staging") as staging:
                self.device.copy_buffer(self, staging, wanted)
                raw = staging.download(np.uint8)
        return raw.view(dtype).reshape(shape)

    def to_torch(self, dtype, shape=None):
        import torch
        np_dtype = torch.empty((), dtype=dtype).numpy().dtype if dtype != torch.bfloat16 else np.int16
        tensor = torch.from_numpy(self.download(np_dtype, shape))
        return tensor.view(torch.bfloat16) if dtype == torch.bfloat16 else tensor

    def _destroy(self, handle) -> None:
        if self._mapped is not None and not self.in_arena:
            vk.vkUnmapMemory(handle, self.memory)
        self._mapped = None
        vk.vkDestroyBuffer(handle, self.handle, None)


IMAGE_FORMATS = {  # name → (VkFormat, numpy dtype of one component); the formats ET-VK's shaders declare
    "rgba32f": (vk.VK_FORMAT_R32G32B32A32_SFLOAT, np.float32),
    "rgba32i": (vk.VK_FORMAT_R32G32B32A32_SINT, np.int32),
    "rgba16f": (vk.VK_FORMAT_R16G16B16A16_SFLOAT, np.float16),
    "rgba8i": (vk.VK_FORMAT_R8G8B8A8_SINT, np.int8),
}
FORMAT_STORAGE = vk.VK_FORMAT_FEATURE_STORAGE_IMAGE_BIT
FORMAT_SAMPLED = vk.VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT


class Image(_DeviceMemory):
    """A 2-D or 3-D image of RGBA texels, in the GENERAL layout for its whole life.

    The extent is (x, y) for a 2-D image or (x, y, z) for a 3-D one; numpy data is shaped (y, x, 4) or (z, y, x, 4),
    texel order. One image can be bound as a storage image (imageLoad/imageStore) and as a sampled image
    (texelFetch through a combined image sampler): the pipeline's reflected binding decides, as in ET-VK, where a
    tensor written as an image by one kernel is read through a sampler by the next.
    """

    def __init__(self, device, extent, fmt: str = "rgba32f", name: str = "", tiling: str = "optimal",
                 arena: Arena | None = None):
        extent = tuple(int(e) for e in extent)
        if len(extent) not in (2, 3) or min(extent) < 1:
            raise ValueError(f"an image extent is 2 or 3 positive ints ((x, y) or (x, y, z)), got {extent}")
        self.dims = len(extent)
        limit = device.info.max_image_dimension_3d if self.dims == 3 else device.info.max_image_dimension_2d
        if max(extent) > limit:
            raise ValueError(f"image extent {extent} exceeds the device's maxImageDimension{self.dims}D {limit}")
        if fmt not in IMAGE_FORMATS:
            raise ValueError(f"unknown image format {fmt!r}; expected one of {sorted(IMAGE_FORMATS)}")
        self.device, self.extent, self.format, self.name = device, extent, fmt, name
        self.sampler_fields = None  # how a combined image sampler binds it: `Device.sampler`'s fields, or its own
        vk_format, self.dtype = IMAGE_FORMATS[fmt]
        self.dtype = np.dtype(self.dtype)
        self.shape = tuple(reversed(extent)) + (4,)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
        if tiling not in TILINGS:
            raise ValueError(f"image tiling is one of {sorted(TILINGS)}, got {tiling!r}")
        self.tiling = tiling
        properties = vk.vkGetPhysicalDeviceFormatProperties(device.physical_device, vk_format)
        support = properties.linearTilingFeatures if tiling == "linear" else properties.optimalTilingFeatures
        self.storage = bool(support & FORMAT_STORAGE)
        self.sampled = bool(support & FORMAT_SAMPLED)
        if not (self.storage or self.sampled):
            raise ValueError(f"{device.info.name} supports {fmt} images with {tiling} tiling neither as storage "
                             "nor as sampled images")
        handle = device.handle
        extent3 = extent + (1,) * (3 - self.dims)
        image_type = vk.VK_IMAGE_TYPE_3D if self.dims == 3 else vk.VK_IMAGE_TYPE_2D
        usage = ((vk.VK_IMAGE_USAGE_STORAGE_BIT if self.storage else 0)
                 | (vk.VK_IMAGE_USAGE_SAMPLED_BIT if self.sampled else 0)
                 | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT)
        try:  # a linear 3-D image, say, is optional (ET-VK asks the same before it makes one)
            limits = vk.vkGetPhysicalDeviceImageFormatProperties(device.physical_device, vk_format, image_type,
                                                                 TILINGS[tiling], usage, 0)
        except vk.VkErrorFormatNotSupported:
            limits = None
        if limits is None or any(e > m for e, m in zip(extent3, (limits.maxExtent.width, limits.maxExtent.height,
                                                                 limits.maxExtent.depth))):
            raise ValueError(f"{device.info.name} cannot make a {self.dims}-D {fmt} image of extent {extent} with "
                             f"{tiling} tiling")
        create_info = vk.VkImageCreateInfo(
            imageType=image_type, format=vk_format,
            extent=vk.VkExtent3D(width=extent3[0], height=extent3[1], depth=extent3[2]),
            mipLevels=1, arrayLayers=1, samples=vk.VK_SAMPLE_COUNT_1_BIT, tiling=TILINGS[tiling], usage=usage,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE, initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED)
        self.handle = vk.vkCreateImage(handle, create_info, None)
        requirements = vk.vkGetImageMemoryRequirements(handle, self.handle)
        self.in_arena = arena is not None
        if self.in_arena:
            self.memory, offset, _, _ = arena.take(requirements, DEVICE_LOCAL, 0, optimal_image=tiling == "optimal")
        else:
            index, _ = _memory_type(device, requirements, DEVICE_LOCAL, 0)
            alloc_info = vk.VkMemoryAllocateInfo(allocationSize=requirements.size, memoryTypeIndex=index)
            self.memory, offset = vk.vkAllocateMemory(handle, alloc_info, None), 0
        vk.vkBindImageMemory(handle, self.handle, self.memory, offset)
        subresource = vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0,
                                                 levelCount=1, baseArrayLayer=0, layerCount=1)
        view_info = vk.VkImageViewCreateInfo(image=self.handle, format=vk_format, subresourceRange=subresource,
                                             viewType=vk.VK_IMAGE_VIEW_TYPE_3D if self.dims == 3
                                             else vk.VK_IMAGE_VIEW_TYPE_2D)
        self.view = vk.vkCreateImageView(handle, view_info, None)
        device.init_image(self)  # to GENERAL layout, zero-filled
        device._track(self)

    def __repr__(self):
        return f"Image({self.name or 'unnamed'}, {self.extent}, {self.format})"

    def upload(self, data) -> "Image":
        check_open(self, "upload to")
        array = as_numpy(data)
        if array.shape != self.shape or array.dtype != self.dtype:
            raise ValueError(f"image {self.name or ''} expects an array of shape {self.shape} "
                             f"({'z, ' if self.dims == 3 else ''}y, x, 4) and dtype "
                             f"{self.dtype}, got shape {array.shape} and dtype {array.dtype}")
        with Buffer(self.device, self.nbytes, host_visible=True, name="staging") as staging:
            staging.upload(array)
            self.device.copy_image(staging, self, to_image=True)
        return self

    def download(self) -> np.ndarray:
        check_open(self, "download from")
        with Buffer(self.device, self.nbytes, host_visible=True, name="staging") as staging:
            self.device.copy_image(staging, self, to_image=False)
            return staging.download(self.dtype, self.shape)

    def _destroy(self, handle) -> None:
        vk.vkDestroyImageView(handle, self.view, None)
        vk.vkDestroyImage(handle, self.handle, None)
