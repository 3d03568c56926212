"""A Vulkan compute program written WITHOUT the workbench (the raw `vulkan` binding only) that binds as ncnn and IREE
do, for capture tests:

    python tests/capture_program_push.py SCALE_BIAS.spv MIX.spv OUT.bin [--sets]

The same three dispatches as tests/capture_program.py (`expected()` is its), but no descriptor set is allocated:
the first dispatch binds with `vkCmdPushDescriptorSetKHR`, the second with `vkCmdPushDescriptorSetWithTemplateKHR`
(a descriptor update template of type PUSH_DESCRIPTORS), the third with a push again; the scale_bias shader takes its
local size from specialization constants 233, 234, 235, as ncnn's shaders do (`SCALE_BIAS_GLSL` here). `--sets`:
what ncnn does on a device without push descriptors instead — descriptor sets written by
`vkUpdateDescriptorSetWithTemplate` (templates of type DESCRIPTOR_SET), bound as usual.
"""
from __future__ import annotations

import struct
import sys

import vulkan as vk

import capture_program as base

SCALE_BIAS_GLSL = base.SCALE_BIAS_GLSL.replace("local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2",
                                               "local_size_x_id = 233, local_size_y_id = 234, local_size_z_id = 235")
MIX_GLSL = base.MIX_GLSL
PUSH_EXTENSION = "VK_KHR_push_descriptor"


class PushProgram(base.Program):
    SET_LAYOUT_FLAGS = vk.VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR

    def __init__(self):
        super().__init__("capture-program-push", extensions=(PUSH_EXTENSION,))
        self.push = vk.vkGetDeviceProcAddr(self.device, "vkCmdPushDescriptorSetKHR")
        self.push_template = vk.vkGetDeviceProcAddr(self.device, "vkCmdPushDescriptorSetWithTemplateKHR")

    def template(self, pipeline, kinds, kind=vk.VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_PUSH_DESCRIPTORS_KHR):
        """A descriptor update template of type `kind` (PUSH_DESCRIPTORS, or DESCRIPTOR_SET) for `pipeline`'s set:
        one buffer info per binding, packed one after another."""
        _, layout, set_layout = pipeline
        size = vk.ffi.sizeof("VkDescriptorBufferInfo")
        entries = [vk.VkDescriptorUpdateTemplateEntry(dstBinding=i, dstArrayElement=0, descriptorCount=1,
                                                      descriptorType=k, offset=i * size, stride=size)
                   for i, k in enumerate(kinds)]
        return vk.vkCreateDescriptorUpdateTemplate(self.device, vk.VkDescriptorUpdateTemplateCreateInfo(
            descriptorUpdateEntryCount=len(entries), pDescriptorUpdateEntries=entries,
            templateType=kind, descriptorSetLayout=set_layout,
            pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipelineLayout=layout, set=0), None)


class TemplateSetProgram(base.Program):
    """The fallback: descriptor sets written through update templates of type DESCRIPTOR_SET."""

    template = PushProgram.template

    def descriptor_set(self, set_layout, buffers, kinds, pipeline=None):
        dset = vk.vkAllocateDescriptorSets(self.device, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=self.descriptor_pool, descriptorSetCount=1, pSetLayouts=[set_layout]))[0]
        vk.vkUpdateDescriptorSetWithTemplate(self.device, dset, self.template(
            pipeline, kinds, vk.VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_DESCRIPTOR_SET), buffer_infos(buffers))
        return dset


def buffer_infos(buffers):
    data = vk.ffi.new("VkDescriptorBufferInfo[]", len(buffers))
    for i, b in enumerate(buffers):
        data[i].buffer, data[i].offset, data[i].range = b[0], 0, b[2]
    return data


def pushed(p: PushProgram, cmd, pipeline, buffers, kinds, push: bytes, groups: int, template=None) -> None:
    handle, layout, _ = pipeline
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, handle)
    if template is None:
        infos = [vk.VkDescriptorBufferInfo(buffer=b[0], offset=0, range=b[2]) for b in buffers]
        writes = [vk.VkWriteDescriptorSet(dstSet=None, dstBinding=i, descriptorCount=1, descriptorType=k,
                                          pBufferInfo=[info]) for i, (info, k) in enumerate(zip(infos, kinds))]
        p.push(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, len(writes), writes)
    else:
        p.push_template(cmd, template, layout, 0, buffer_infos(buffers))
    vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(push), vk.ffi.from_buffer(push))
    vk.vkCmdDispatch(cmd, groups, 1, 1)


def main(argv) -> int:
    sets = "--sets" in argv
    argv = [a for a in argv if a != "--sets"]
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    scale_bias_spv, mix_spv = (open(path, "rb").read() for path in argv[:2])
    if sets:
        return template_sets(scale_bias_spv, mix_spv, argv[2])
    p = PushProgram()
    n, local = base.N, base.LOCAL
    (x, y, c, out, bias), (scale_kinds, mix_kinds) = base.buffers(p)
    scale_bias = p.pipeline(scale_bias_spv, scale_kinds, 8, {233: local, 234: 1, 235: 1, 3: base.MUL})
    mix = p.pipeline(mix_spv, mix_kinds, 4, {0: 2})
    mix_template = p.template(mix, mix_kinds)
    groups = (n + local - 1) // local

    def first(cmd):
        pushed(p, cmd, scale_bias, [x, y, bias], scale_kinds, struct.pack("<Ii", n, 5), groups)
        base.barrier(cmd)
        pushed(p, cmd, mix, [y, c], mix_kinds, struct.pack("<I", n), (n + 31) // 32, template=mix_template)

    p.submit(first)
    p.submit(lambda cmd: pushed(p, cmd, scale_bias, [c, out, bias], scale_kinds, struct.pack("<Ii", n, -9), groups))
    return base.finish(p, p.read(out), argv[2], base.expected(), "capture_program_push")


def template_sets(scale_bias_spv: bytes, mix_spv: bytes, out_path: str) -> int:
    p = TemplateSetProgram("capture-program-template-sets")
    n, local = base.N, base.LOCAL
    (x, y, c, out, bias), (scale_kinds, mix_kinds) = base.buffers(p)
    scale_bias = p.pipeline(scale_bias_spv, scale_kinds, 8, {233: local, 234: 1, 235: 1, 3: base.MUL})
    mix = p.pipeline(mix_spv, mix_kinds, 4, {0: 2})
    set_xy = p.descriptor_set(scale_bias[2], [x, y, bias], scale_kinds, scale_bias)
    set_yc = p.descriptor_set(mix[2], [y, c], mix_kinds, mix)
    set_co = p.descriptor_set(scale_bias[2], [c, out, bias], scale_kinds, scale_bias)
    groups = (n + local - 1) // local

    def first(cmd):
        base.dispatch(cmd, scale_bias, set_xy, struct.pack("<Ii", n, 5), groups)
        base.barrier(cmd)
        base.dispatch(cmd, mix, set_yc, struct.pack("<I", n), (n + 31) // 32)

    p.submit(first)
    p.submit(lambda cmd: base.dispatch(cmd, scale_bias, set_co, struct.pack("<Ii", n, -9), groups))
    return base.finish(p, p.read(out), out_path, base.expected(), "capture_program_push --sets")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
