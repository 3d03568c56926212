"""A Vulkan compute program written WITHOUT the workbench (the raw `vulkan` binding only) that passes buffer device
addresses, for capture tests:

    python tests/capture_program_bda.py PUSH.spv TABLE.spv OUT.bin

Three dispatches in one submit, every buffer made with SHADER_DEVICE_ADDRESS and its address taken with
vkGetBufferDeviceAddress:
  0. `push`: two pointers in push constants (dst, src) into buffers the set also binds (x, y);
  1. `table`: the pointers in a storage buffer the shader binds (binding 0), into buffers the set binds (y, z);
  2. `push` again, its dst pointer into a buffer no descriptor binds (w): the capture has none of w's bytes.
Writes y, z and w to OUT.bin, checks them against numpy.

    push  (push: dst, src, n, add; binding 0 x read):  dst[i] = src[i] * 2 + add + x[0]
    table (binding 0: {dst, src, n}):                  dst[i] = src[n - 1 - i] - 3
"""
from __future__ import annotations

import struct
import sys

import numpy as np
import vulkan as vk

import capture_program as base

N = 64
PUSH_GLSL = """#version 450
#extension GL_EXT_buffer_reference : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };
layout(set = 0, binding = 0) readonly buffer X { int x[]; };
layout(push_constant) uniform P { Ints dst; Ints src; uint n; int add; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) dst.v[i] = src.v[i] * 2 + add + x[0];
}
"""
TABLE_GLSL = """#version 450
#extension GL_EXT_buffer_reference : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };
layout(set = 0, binding = 0) readonly buffer Table { Ints dst; Ints src; uint n; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) dst.v[i] = src.v[n - 1 - i] - 3;
}
"""
SHADER_DEVICE_ADDRESS = 0x00020000  # VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT (None in the binding)
ALLOCATE_DEVICE_ADDRESS = 0x00000002  # VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT


def expected() -> np.ndarray:
    """y, z, w as the program leaves them, in numpy."""
    x = (np.arange(N) * 5 - 100).astype(np.int32)
    y = x * 2 + 11 + x[0]
    z = y[::-1] - 3
    w = z * 2 - 4 + x[0]
    return np.concatenate([y, z, w]).astype(np.int32)


class AddressProgram(base.Program):
    """base.Program's device again, with bufferDeviceAddress enabled."""

    def __init__(self):
        app = vk.VkApplicationInfo(pApplicationName="capture-program-bda", apiVersion=vk.VK_MAKE_VERSION(1, 2, 0))
        self.instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
        self.physical = vk.vkEnumeratePhysicalDevices(self.instance)[0]
        have = vk.VkPhysicalDeviceBufferDeviceAddressFeatures()
        vk.vkGetPhysicalDeviceFeatures2(self.physical, vk.VkPhysicalDeviceFeatures2(pNext=have))
        if not have.bufferDeviceAddress:
            raise SystemExit("this device lacks bufferDeviceAddress")
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)
        self.family = next(i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT)
        queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=self.family, queueCount=1, pQueuePriorities=[1.0])
        enable = vk.VkPhysicalDeviceBufferDeviceAddressFeatures(bufferDeviceAddress=True)
        create = vk.VkDeviceCreateInfo(pNext=enable, queueCreateInfoCount=1, pQueueCreateInfos=[queue_info])
        self.device = vk.vkCreateDevice(self.physical, create, None)
        self.queue = vk.vkGetDeviceQueue(self.device, self.family, 0)
        self.memory_props = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        self.pool = vk.vkCreateCommandPool(self.device, vk.VkCommandPoolCreateInfo(queueFamilyIndex=self.family),
                                           None)
        sizes = [vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=12)]
        self.descriptor_pool = vk.vkCreateDescriptorPool(
            self.device, vk.VkDescriptorPoolCreateInfo(maxSets=4, poolSizeCount=1, pPoolSizes=sizes), None)

    def buffer(self, data: np.ndarray, usage: int = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT):
        """(handle, memory, bytes, device address) of a host-visible buffer holding `data`."""
        handle = vk.vkCreateBuffer(self.device, vk.VkBufferCreateInfo(
            size=data.nbytes, usage=usage | SHADER_DEVICE_ADDRESS, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        req = vk.vkGetBufferMemoryRequirements(self.device, handle)
        wanted = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        index = next(i for i in range(self.memory_props.memoryTypeCount) if req.memoryTypeBits & (1 << i)
                     and (self.memory_props.memoryTypes[i].propertyFlags & wanted) == wanted)
        flags = vk.VkMemoryAllocateFlagsInfo(flags=ALLOCATE_DEVICE_ADDRESS)
        memory = vk.vkAllocateMemory(self.device, vk.VkMemoryAllocateInfo(
            pNext=flags, allocationSize=req.size, memoryTypeIndex=index), None)
        vk.vkBindBufferMemory(self.device, handle, memory, 0)
        mapped = vk.vkMapMemory(self.device, memory, 0, data.nbytes, 0)
        mapped[:] = data.tobytes()
        vk.vkUnmapMemory(self.device, memory)
        info = vk.VkBufferDeviceAddressInfo(buffer=handle)
        address = int(vk.lib.vkGetBufferDeviceAddress(self.device, vk.ffi.addressof(info)))  # the wrapper is wrong
        return handle, memory, data.nbytes, address


def main(argv) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    push_spv, table_spv = (open(path, "rb").read() for path in argv[:2])
    p = AddressProgram()
    storage = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
    x = p.buffer((np.arange(N) * 5 - 100).astype(np.int32))
    y, z, w = (p.buffer(np.zeros(N, np.int32)) for _ in range(3))
    table = p.buffer(np.frombuffer(struct.pack("<QQI4x", z[3], y[3], N), np.uint8).copy())
    push = p.pipeline(push_spv, [storage, storage], 24, {})  # binding 1: y, reached by pointer only
    gather = p.pipeline(table_spv, [storage, storage, storage], 4, {})  # no push constants: a range all the same
    set_push = p.descriptor_set(push[2], [x, y], [storage, storage])
    set_push_w = p.descriptor_set(push[2], [x, z], [storage, storage])  # w itself is bound nowhere
    set_table = p.descriptor_set(gather[2], [table, y, z], [storage] * 3)

    def record(cmd):
        base.dispatch(cmd, push, set_push, struct.pack("<QQIi", y[3], x[3], N, 11), 1)
        base.barrier(cmd)
        handle, layout, _ = gather
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, handle)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [set_table], 0, None)
        vk.vkCmdDispatch(cmd, 1, 1, 1)
        base.barrier(cmd)
        base.dispatch(cmd, push, set_push_w, struct.pack("<QQIi", w[3], z[3], N, -4), 1)

    p.submit(record)
    got = np.concatenate([p.read(b[:3]) for b in (y, z, w)])
    return base.finish(p, got, argv[2], expected(), "capture_program_bda")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
