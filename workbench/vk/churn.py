"""Pipeline churn: RSS growth over create/destroy cycles of one compute pipeline (repro for DEVELOPERS.md).

    python tools/pipeline_churn.py --mode bare|workbench|module [--cycles 300] [--warmup 50]

`bare` goes through the PyPI `vulkan` binding only (shader module, set layout, pipeline layout, pipeline, then
destroy all four), `workbench` through `Device.pipeline(...).close()`, `module` only creates/destroys the shader
module, `distinct` compiles a new pipeline each cycle through workbench.vk (a new spec constant value, so
nothing is re-used). Prints one JSON line: cycles, RSS growth in KiB, KiB per cycle.
"""
from __future__ import annotations

import gc
import os


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def bare_cycle(vk, handle, code: bytes, what: str):
    module = vk.vkCreateShaderModule(handle, vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code), None)
    if what == "module":
        vk.vkDestroyShaderModule(handle, module, None)
        return
    b0 = vk.VkDescriptorSetLayoutBinding(binding=0, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                         descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
    b1 = vk.VkDescriptorSetLayoutBinding(binding=1, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                         descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
    set_info = vk.VkDescriptorSetLayoutCreateInfo(bindingCount=2, pBindings=[b0, b1])
    set_layout = vk.vkCreateDescriptorSetLayout(handle, set_info, None)
    pc = vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=4)
    layout_info = vk.VkPipelineLayoutCreateInfo(setLayoutCount=1, pSetLayouts=[set_layout],
                                                pushConstantRangeCount=1, pPushConstantRanges=[pc])
    layout = vk.vkCreatePipelineLayout(handle, layout_info, None)
    stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module, pName="main")
    info = vk.VkComputePipelineCreateInfo(stage=stage, layout=layout)
    pipeline = vk.vkCreateComputePipelines(handle, None, 1, [info], None)[0]
    vk.vkDestroyPipeline(handle, pipeline, None)
    vk.vkDestroyShaderModule(handle, module, None)
    vk.vkDestroyPipelineLayout(handle, layout, None)
    vk.vkDestroyDescriptorSetLayout(handle, set_layout, None)


def measure(spv, mode: str = "workbench", cycles: int = 300, warmup: int = 50, device=None) -> dict:
    """RSS growth (KiB) over `cycles` create/destroy cycles of the pipeline of `spv` (compiled SPIR-V with one
    storage buffer or more, e.g. the copy shader) after `warmup` cycles."""
    import vulkan as vk

    from workbench import vk as wvk
    dev = device or wvk.get_device()
    if mode == "workbench":
        def cycle():
            dev.pipeline(spv, local_size=(64, 1, 1)).close()
    elif mode == "distinct":
        sizes = iter(range(1, 1 << 30))

        def cycle():
            dev.pipeline(spv, local_size=(next(sizes) % 1024 + 1, 1, 1)).close()
    elif mode in ("bare", "module"):
        def cycle():
            bare_cycle(vk, dev.handle, spv.code, mode)
    else:
        raise ValueError(f"mode is bare, module, workbench or distinct, got {mode!r}")
    for _ in range(warmup):
        cycle()
    gc.collect()
    before = rss_kib()
    for _ in range(cycles):
        cycle()
    gc.collect()
    grown = rss_kib() - before
    return {"mode": mode, "device": dev.info.name, "cycles": cycles, "rss_growth_kib": grown,
            "kib_per_cycle": round(grown / cycles, 2)}
