"""A Vulkan compute program written WITHOUT the workbench (the raw `vulkan` binding only), for capture tests.

    python tests/capture_program.py SCALE_BIAS.spv MIX.spv OUT.bin

Two pipelines, three dispatches in two queue submits: specialization constants (the local size through ids 0..2,
and a multiplier), push constants, a uniform buffer, a read-modify-write storage buffer. Writes the final int32
buffer to OUT.bin and prints one line. `workbench.capture` tests capture it under GFXReconstruct's layer and
replay its dispatches through the workbench's own runtime.

    scale_bias (set 0: x, y, uniform bias; push n, add; spec 0..2 local size, 3 MUL):  y[i] = x[i]*MUL + add + bias[i%4]
    mix        (set 0: a, c;               push n;      spec 0 SHIFT, local size 32): c[i] += a[n-1-i] >> SHIFT
"""
from __future__ import annotations

import struct
import sys

import numpy as np
import vulkan as vk

N = 128
LOCAL = 64
MUL = 3

SCALE_BIAS_GLSL = """#version 450
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const int MUL = 1;
layout(set = 0, binding = 0) readonly buffer X { int x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { int y[]; };
layout(set = 0, binding = 2) uniform Bias { ivec4 bias; };
layout(push_constant) uniform P { uint n; int add; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) y[i] = x[i] * MUL + add + bias[i % 4];
}
"""
MIX_GLSL = """#version 450
layout(local_size_x = 32) in;
layout(constant_id = 0) const uint SHIFT = 1;
layout(set = 0, binding = 0) readonly buffer A { int a[]; };
layout(set = 0, binding = 1) buffer C { int c[]; };
layout(push_constant) uniform P { uint n; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) c[i] += a[n - 1 - i] >> SHIFT;
}
"""


def expected() -> np.ndarray:
    """What the program computes, in numpy."""
    x = np.arange(N, dtype=np.int32) * 7 - 500
    bias = np.array([1, -2, 3, -4], dtype=np.int32)
    idx = np.arange(N)
    y = x * MUL + 5 + bias[idx % 4]
    c = (idx * 11 % 97).astype(np.int32)
    c = c + (y[::-1] >> 2)
    return (c * MUL - 9 + bias[idx % 4]).astype(np.int32)


class Program:
    SET_LAYOUT_FLAGS = 0  # a subclass binding with push descriptors sets VK_…_PUSH_DESCRIPTOR_BIT_KHR

    def __init__(self, name: str = "capture-program", extensions=()):
        app = vk.VkApplicationInfo(pApplicationName=name, apiVersion=vk.VK_MAKE_VERSION(1, 1, 0))
        self.instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
        self.physical = vk.vkEnumeratePhysicalDevices(self.instance)[0]
        have = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(self.physical, None)}
        if set(extensions) - have:
            raise SystemExit(f"this device lacks {sorted(set(extensions) - have)}")
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)
        self.family = next(i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT)
        queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=self.family, queueCount=1, pQueuePriorities=[1.0])
        create = vk.VkDeviceCreateInfo(queueCreateInfoCount=1, pQueueCreateInfos=[queue_info],
                                       enabledExtensionCount=len(extensions), ppEnabledExtensionNames=list(extensions))
        self.device = vk.vkCreateDevice(self.physical, create, None)
        self.queue = vk.vkGetDeviceQueue(self.device, self.family, 0)
        self.memory_props = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        self.pool = vk.vkCreateCommandPool(self.device, vk.VkCommandPoolCreateInfo(queueFamilyIndex=self.family),
                                           None)
        sizes = [vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=8),
                 vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, descriptorCount=4)]
        self.descriptor_pool = vk.vkCreateDescriptorPool(
            self.device, vk.VkDescriptorPoolCreateInfo(maxSets=4, poolSizeCount=len(sizes), pPoolSizes=sizes), None)

    def buffer(self, data: np.ndarray, usage: int):
        """A host-visible, coherent buffer holding `data`."""
        handle = vk.vkCreateBuffer(self.device, vk.VkBufferCreateInfo(size=data.nbytes, usage=usage,
                                                                      sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        req = vk.vkGetBufferMemoryRequirements(self.device, handle)
        wanted = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        index = next(i for i in range(self.memory_props.memoryTypeCount)
                     if req.memoryTypeBits & (1 << i)
                     and (self.memory_props.memoryTypes[i].propertyFlags & wanted) == wanted)
        memory = vk.vkAllocateMemory(self.device, vk.VkMemoryAllocateInfo(allocationSize=req.size,
                                                                          memoryTypeIndex=index), None)
        vk.vkBindBufferMemory(self.device, handle, memory, 0)
        mapped = vk.vkMapMemory(self.device, memory, 0, data.nbytes, 0)
        mapped[:] = data.tobytes()
        vk.vkUnmapMemory(self.device, memory)
        return handle, memory, data.nbytes

    def read(self, buf) -> np.ndarray:
        _, memory, nbytes = buf
        mapped = vk.vkMapMemory(self.device, memory, 0, nbytes, 0)
        data = np.frombuffer(bytes(mapped[:nbytes]), dtype=np.int32).copy()
        vk.vkUnmapMemory(self.device, memory)
        return data

    def pipeline(self, spirv: bytes, kinds, push_size: int, spec: dict[int, int]):
        bindings = [vk.VkDescriptorSetLayoutBinding(binding=i, descriptorType=k, descriptorCount=1,
                                                    stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                    for i, k in enumerate(kinds)]
        set_layout = vk.vkCreateDescriptorSetLayout(self.device, vk.VkDescriptorSetLayoutCreateInfo(
            flags=self.SET_LAYOUT_FLAGS, bindingCount=len(bindings), pBindings=bindings), None)
        push = vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=push_size)
        layout = vk.vkCreatePipelineLayout(self.device, vk.VkPipelineLayoutCreateInfo(
            setLayoutCount=1, pSetLayouts=[set_layout], pushConstantRangeCount=1, pPushConstantRanges=[push]), None)
        module = vk.vkCreateShaderModule(self.device, vk.VkShaderModuleCreateInfo(codeSize=len(spirv), pCode=spirv),
                                         None)
        entries = [vk.VkSpecializationMapEntry(constantID=k, offset=4 * i, size=4) for i, k in enumerate(spec)]
        data = vk.ffi.new("char[]", struct.pack(f"<{len(spec)}i", *spec.values()))
        spec_info = vk.VkSpecializationInfo(mapEntryCount=len(entries), pMapEntries=entries,
                                            dataSize=4 * len(spec), pData=data)
        stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module,
                                                   pName="main", pSpecializationInfo=spec_info)
        handle = vk.vkCreateComputePipelines(self.device, None, 1,
                                             [vk.VkComputePipelineCreateInfo(stage=stage, layout=layout)], None)[0]
        return handle, layout, set_layout

    def descriptor_set(self, set_layout, buffers, kinds):
        dset = vk.vkAllocateDescriptorSets(self.device, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=self.descriptor_pool, descriptorSetCount=1, pSetLayouts=[set_layout]))[0]
        writes = [vk.VkWriteDescriptorSet(dstSet=dset, dstBinding=i, descriptorCount=1, descriptorType=k,
                                          pBufferInfo=[vk.VkDescriptorBufferInfo(buffer=b[0], offset=0, range=b[2])])
                  for i, (b, k) in enumerate(zip(buffers, kinds))]
        vk.vkUpdateDescriptorSets(self.device, len(writes), writes, 0, None)
        return dset

    def submit(self, record) -> None:
        cmd = vk.vkAllocateCommandBuffers(self.device, vk.VkCommandBufferAllocateInfo(
            commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(
            flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
        record(cmd)
        vk.vkEndCommandBuffer(cmd)
        fence = vk.vkCreateFence(self.device, vk.VkFenceCreateInfo(), None)
        vk.vkQueueSubmit(self.queue, 1, [vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=[cmd])], fence)
        vk.vkWaitForFences(self.device, 1, [fence], vk.VK_TRUE, 10**10)
        vk.vkDestroyFence(self.device, fence, None)


def dispatch(cmd, pipeline, dset, push: bytes, groups: int) -> None:
    handle, layout, _ = pipeline
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, handle)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(push), vk.ffi.from_buffer(push))
    vk.vkCmdDispatch(cmd, groups, 1, 1)


def barrier(cmd) -> None:
    access = vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
    vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0,
                            1, [vk.VkMemoryBarrier(srcAccessMask=access, dstAccessMask=access)], 0, None, 0, None)


def buffers(p: Program):
    """(x, y, c, out, bias), (scale_bias's descriptor kinds, mix's): the program's buffers with their data."""
    storage, uniform = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER
    usage_s, usage_u = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, vk.VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT
    idx = np.arange(N)
    made = (p.buffer((idx * 7 - 500).astype(np.int32), usage_s), p.buffer(np.zeros(N, np.int32), usage_s),
            p.buffer((idx * 11 % 97).astype(np.int32), usage_s), p.buffer(np.zeros(N, np.int32), usage_s),
            p.buffer(np.array([1, -2, 3, -4], np.int32), usage_u))
    return made, ((storage, storage, uniform), (storage, storage))


def main(argv) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    scale_bias_spv, mix_spv = (open(path, "rb").read() for path in argv[:2])
    p = Program()
    (x, y, c, out, bias), (scale_kinds, mix_kinds) = buffers(p)
    scale_bias = p.pipeline(scale_bias_spv, scale_kinds, 8, {0: LOCAL, 1: 1, 2: 1, 3: MUL})
    mix = p.pipeline(mix_spv, mix_kinds, 4, {0: 2})
    set_xy = p.descriptor_set(scale_bias[2], [x, y, bias], scale_kinds)
    set_yc = p.descriptor_set(mix[2], [y, c], mix_kinds)
    set_co = p.descriptor_set(scale_bias[2], [c, out, bias], scale_kinds)
    groups = (N + LOCAL - 1) // LOCAL

    def first(cmd):
        dispatch(cmd, scale_bias, set_xy, struct.pack("<Ii", N, 5), groups)
        barrier(cmd)
        dispatch(cmd, mix, set_yc, struct.pack("<I", N), (N + 31) // 32)

    p.submit(first)
    p.submit(lambda cmd: dispatch(cmd, scale_bias, set_co, struct.pack("<Ii", N, -9), groups))
    return finish(p, p.read(out), argv[2], expected(), "capture_program")


def finish(p: Program, result: np.ndarray, path: str, want: np.ndarray, label: str) -> int:
    """Write `result` to `path`, say whether it is `want`, end the device: the exit status."""
    with open(path, "wb") as f:
        f.write(result.tobytes())
    ok = bool(np.array_equal(result, want))
    print(f"{label}: 3 dispatches, {result.size} {result.dtype} written to {path}, matches numpy: {ok}")
    vk.vkDeviceWaitIdle(p.device)
    vk.vkDestroyDevice(p.device, None)
    vk.vkDestroyInstance(p.instance, None)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
