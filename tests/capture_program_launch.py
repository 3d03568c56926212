"""A Vulkan compute program written WITHOUT the workbench (the raw `vulkan` binding only) that launches the two ways
tests/capture_program.py does not, for capture tests:

    python tests/capture_program_launch.py STAMP.spv COUNT.spv OUT.bin

Three dispatches in one submit: `stamp` with vkCmdDispatchBase (groups 2..4 of a pipeline made with DISPATCH_BASE);
`count` writing the group counts (2, 1, 1) at byte 12 of an indirect buffer the host filled with 9s; `stamp` again
with vkCmdDispatchIndirect at that offset, after a barrier that makes the write visible to the indirect read (the
groups are what the GPU wrote, not what the host wrote). Writes both outputs to OUT.bin, checks them against numpy.

    stamp (set 0: o; push tag; local size 32): o[gid] = group.x * 1000 + local.x + tag
    count (set 0: args):                       args[3..5] = (n / 32, 1, 1)   (n = 64, a push constant)
"""
from __future__ import annotations

import struct
import sys

import numpy as np
import vulkan as vk

import capture_program as base

LOCAL, BASE, GROUPS, N_INDIRECT = 32, 2, 3, 64
OUT_WORDS = (BASE + GROUPS) * LOCAL
STAMP_GLSL = """#version 450
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer O { uint o[]; };
layout(push_constant) uniform P { uint tag; };
void main() {
  o[gl_GlobalInvocationID.x] = gl_WorkGroupID.x * 1000u + gl_LocalInvocationID.x + tag;
}
"""
COUNT_GLSL = """#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer A { uint args[]; };
layout(push_constant) uniform P { uint n; };
void main() { args[3] = n / 32u; args[4] = 1u; args[5] = 1u; }
"""
DISPATCH_BASE_BIT = 0x10  # VK_PIPELINE_CREATE_DISPATCH_BASE_BIT (the binding names only its KHR alias)


def expected() -> tuple[np.ndarray, np.ndarray]:
    """(the base dispatch's output, the indirect one's), in numpy."""
    gid = np.arange(OUT_WORDS)
    based = np.where(gid >= BASE * LOCAL, (gid // LOCAL) * 1000 + gid % LOCAL + 7, 0).astype(np.uint32)
    gid = np.arange(N_INDIRECT)
    return based, ((gid // LOCAL) * 1000 + gid % LOCAL + 500).astype(np.uint32)


class LaunchProgram(base.Program):
    def pipeline(self, spirv: bytes, kinds, push_size: int, spec: dict[int, int], flags: int = 0):
        handle, layout, set_layout = super().pipeline(spirv, kinds, push_size, spec)
        if not flags:
            return handle, layout, set_layout
        vk.vkDestroyPipeline(self.device, handle, None)  # again, with the flags
        module = vk.vkCreateShaderModule(self.device, vk.VkShaderModuleCreateInfo(codeSize=len(spirv), pCode=spirv),
                                         None)
        stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module, pName="main")
        handle = vk.vkCreateComputePipelines(self.device, None, 1, [vk.VkComputePipelineCreateInfo(
            stage=stage, layout=layout, flags=flags)], None)[0]
        return handle, layout, set_layout


def bind(cmd, pipeline, dset, push: bytes) -> None:
    handle, layout, _ = pipeline
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, handle)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(push), vk.ffi.from_buffer(push))


def main(argv) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    stamp_spv, count_spv = (open(path, "rb").read() for path in argv[:2])
    p = LaunchProgram("capture-program-launch")
    storage = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
    usage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
    out_base = p.buffer(np.zeros(OUT_WORDS, np.uint32), usage)
    out_indirect = p.buffer(np.zeros(N_INDIRECT, np.uint32), usage)
    args = p.buffer(np.full(8, 9, np.uint32), usage | vk.VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT)
    stamp = p.pipeline(stamp_spv, [storage], 4, {}, flags=DISPATCH_BASE_BIT)
    count = p.pipeline(count_spv, [storage], 4, {})
    set_base = p.descriptor_set(stamp[2], [out_base], [storage])
    set_indirect = p.descriptor_set(stamp[2], [out_indirect], [storage])
    set_args = p.descriptor_set(count[2], [args], [storage])

    def record(cmd):
        bind(cmd, stamp, set_base, struct.pack("<I", 7))
        vk.vkCmdDispatchBase(cmd, BASE, 0, 0, GROUPS, 1, 1)
        bind(cmd, count, set_args, struct.pack("<I", N_INDIRECT))
        vk.vkCmdDispatch(cmd, 1, 1, 1)
        barrier = vk.VkMemoryBarrier(srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT,
                                     dstAccessMask=vk.VK_ACCESS_INDIRECT_COMMAND_READ_BIT)
        vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT,
                                0, 1, [barrier], 0, None, 0, None)
        bind(cmd, stamp, set_indirect, struct.pack("<I", 500))
        vk.vkCmdDispatchIndirect(cmd, args[0], 12)

    p.submit(record)
    got = np.concatenate([p.read(out_base), p.read(out_indirect)]).view(np.uint32)
    return base.finish(p, got, argv[2], np.concatenate(expected()), "capture_program_launch")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
