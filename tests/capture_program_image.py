"""A Vulkan compute program with images, written WITHOUT the workbench (the raw `vulkan` binding only), for capture
tests: the way ET-VK holds tensors as 3-D textures (storage images written with imageStore, read by the next kernel
through a combined image sampler with texelFetch, or with imageLoad).

    python tests/capture_program_image.py FILL.spv SCALE.spv READ.spv OUT.bin

Three dispatches in one submit, 3-D images of extent (W, H, D) in the GENERAL layout, optimal tiling:
    fill  (x: storage buffer int;  a: storage image rgba32f)          a[p] = vec4(x[i..i+3])
    scale (a: sampler3D;  b: storage image rgba16f; push add, spec MUL) b[p] = texelFetch(a, p) * MUL + add
    read  (b: storage image rgba16f (imageLoad); y: storage buffer)    y[i..i+3] = b[p]
Writes y (float32) to OUT.bin and prints one line. `workbench.capture` tests capture it under GFXReconstruct's layer
and replay each dispatch through the workbench's own runtime, images re-created from the capture.
"""
from __future__ import annotations

import struct
import sys

import numpy as np
import vulkan as vk

from capture_program import Program, barrier, finish

W, H, D = 4, 3, 2
MUL = 3.0
ADD = 0.5
TEXELS = W * H * D

FILL_GLSL = """#version 450
layout(local_size_x = 4, local_size_y = 3, local_size_z = 1) in;
layout(set = 0, binding = 0) readonly buffer X { int x[]; };
layout(set = 0, binding = 1, rgba32f) uniform writeonly image3D a;
void main() {
  ivec3 p = ivec3(gl_GlobalInvocationID);
  int i = 4 * (p.x + %(W)d * (p.y + %(H)d * p.z));
  imageStore(a, p, vec4(x[i], x[i + 1], x[i + 2], x[i + 3]));
}
""" % {"W": W, "H": H}
SCALE_GLSL = """#version 450
layout(local_size_x = 4, local_size_y = 3, local_size_z = 1) in;
layout(constant_id = 0) const float MUL = 1.0;
layout(set = 0, binding = 0) uniform sampler3D a;
layout(set = 0, binding = 1, rgba16f) uniform writeonly image3D b;
layout(push_constant) uniform P { float add; };
void main() {
  ivec3 p = ivec3(gl_GlobalInvocationID);
  imageStore(b, p, texelFetch(a, p, 0) * MUL + add);
}
"""
READ_GLSL = """#version 450
layout(local_size_x = 4, local_size_y = 3, local_size_z = 1) in;
layout(set = 0, binding = 0, rgba16f) uniform readonly image3D b;
layout(set = 0, binding = 1) writeonly buffer Y { vec4 y[]; };
void main() {
  ivec3 p = ivec3(gl_GlobalInvocationID);
  y[p.x + %(W)d * (p.y + %(H)d * p.z)] = imageLoad(b, p);
}
""" % {"W": W, "H": H}


def source() -> np.ndarray:
    return (np.arange(4 * TEXELS, dtype=np.int32) * 5 - 100) // 3


def expected() -> np.ndarray:
    """What the program computes, in numpy (through float16, as the rgba16f image holds it)."""
    return (source().astype(np.float32) * np.float32(MUL) + np.float32(ADD)).astype(np.float16).astype(np.float32)


class ImageProgram(Program):
    def __init__(self):
        super().__init__()
        sizes = [vk.VkDescriptorPoolSize(type=t, descriptorCount=4) for t in (
            vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, vk.VK_DESCRIPTOR_TYPE_STORAGE_IMAGE,
            vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER)]
        self.descriptor_pool = vk.vkCreateDescriptorPool(
            self.device, vk.VkDescriptorPoolCreateInfo(maxSets=4, poolSizeCount=len(sizes), pPoolSizes=sizes), None)
        self.sampler = vk.vkCreateSampler(self.device, vk.VkSamplerCreateInfo(
            magFilter=vk.VK_FILTER_NEAREST, minFilter=vk.VK_FILTER_NEAREST,
            mipmapMode=vk.VK_SAMPLER_MIPMAP_MODE_NEAREST, addressModeU=vk.VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE,
            addressModeV=vk.VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE,
            addressModeW=vk.VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE, maxLod=0.0,
            borderColor=vk.VK_BORDER_COLOR_FLOAT_TRANSPARENT_BLACK), None)

    def image(self, fmt: int):
        """A device-local 3-D image (W, H, D) of `fmt`, optimal tiling, and its view."""
        handle = vk.vkCreateImage(self.device, vk.VkImageCreateInfo(
            imageType=vk.VK_IMAGE_TYPE_3D, format=fmt, extent=vk.VkExtent3D(width=W, height=H, depth=D),
            mipLevels=1, arrayLayers=1, samples=vk.VK_SAMPLE_COUNT_1_BIT, tiling=vk.VK_IMAGE_TILING_OPTIMAL,
            usage=vk.VK_IMAGE_USAGE_STORAGE_BIT | vk.VK_IMAGE_USAGE_SAMPLED_BIT,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE, initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED), None)
        req = vk.vkGetImageMemoryRequirements(self.device, handle)
        index = next(i for i in range(self.memory_props.memoryTypeCount) if req.memoryTypeBits & (1 << i))
        memory = vk.vkAllocateMemory(self.device, vk.VkMemoryAllocateInfo(allocationSize=req.size,
                                                                          memoryTypeIndex=index), None)
        vk.vkBindImageMemory(self.device, handle, memory, 0)
        view = vk.vkCreateImageView(self.device, vk.VkImageViewCreateInfo(
            image=handle, viewType=vk.VK_IMAGE_VIEW_TYPE_3D, format=fmt,
            subresourceRange=vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0,
                                                        levelCount=1, baseArrayLayer=0, layerCount=1)), None)
        return handle, view

    def image_set(self, set_layout, entries):
        """A descriptor set of `entries`: (kind, buffer tuple or image view), binding i for entry i."""
        dset = vk.vkAllocateDescriptorSets(self.device, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=self.descriptor_pool, descriptorSetCount=1, pSetLayouts=[set_layout]))[0]
        writes = []
        for i, (kind, what) in enumerate(entries):
            if kind == vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER:
                info = {"pBufferInfo": [vk.VkDescriptorBufferInfo(buffer=what[0], offset=0, range=what[2])]}
            else:
                sampler = self.sampler if kind == vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER else None
                info = {"pImageInfo": [vk.VkDescriptorImageInfo(sampler=sampler, imageView=what,
                                                                imageLayout=vk.VK_IMAGE_LAYOUT_GENERAL)]}
            writes.append(vk.VkWriteDescriptorSet(dstSet=dset, dstBinding=i, descriptorCount=1, descriptorType=kind,
                                                  **info))
        vk.vkUpdateDescriptorSets(self.device, len(writes), writes, 0, None)
        return dset


def to_general(cmd, images) -> None:
    """UNDEFINED → GENERAL, once, before the first dispatch."""
    rng = vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0, levelCount=1,
                                     baseArrayLayer=0, layerCount=1)
    barriers = [vk.VkImageMemoryBarrier(srcAccessMask=0, dstAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT,
                                        oldLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED, newLayout=vk.VK_IMAGE_LAYOUT_GENERAL,
                                        srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
                                        dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, image=img,
                                        subresourceRange=rng) for img in images]
    vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0,
                            0, None, 0, None, len(barriers), barriers)


def main(argv) -> int:
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[4].strip(), file=sys.stderr)
        return 2
    fill_spv, scale_spv, read_spv = (open(path, "rb").read() for path in argv[:3])
    p = ImageProgram()
    sb, si, cis = (vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, vk.VK_DESCRIPTOR_TYPE_STORAGE_IMAGE,
                   vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER)
    usage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
    x = p.buffer(source(), usage)
    y = p.buffer(np.zeros(4 * TEXELS, np.float32), usage)
    a_image, a_view = p.image(vk.VK_FORMAT_R32G32B32A32_SFLOAT)
    b_image, b_view = p.image(vk.VK_FORMAT_R16G16B16A16_SFLOAT)
    fill = p.pipeline(fill_spv, (sb, si), 4, {})
    # MUL is a float constant: its bytes, passed as the int of the same bits
    scale = p.pipeline(scale_spv, (cis, si), 4, {0: struct.unpack("<i", struct.pack("<f", MUL))[0]})
    read = p.pipeline(read_spv, (si, sb), 4, {})
    set_fill = p.image_set(fill[2], [(sb, x), (si, a_view)])
    set_scale = p.image_set(scale[2], [(cis, a_view), (si, b_view)])
    set_read = p.image_set(read[2], [(si, b_view), (sb, y)])

    def record(cmd):
        to_general(cmd, [a_image, b_image])
        for pipeline, dset, push in ((fill, set_fill, b"\0" * 4), (scale, set_scale, struct.pack("<f", ADD)),
                                     (read, set_read, b"\0" * 4)):
            handle, layout, _ = pipeline
            vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, handle)
            vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
            vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, vk.ffi.from_buffer(push))
            vk.vkCmdDispatch(cmd, 1, 1, D)
            barrier(cmd)

    p.submit(record)
    return finish(p, p.read(y).view(np.float32), argv[3], expected(), "capture_program_image")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
