"""Models on ET-VK, in the order a model travels:

    zoo          the models (RefineNet-like, residual, FloatBetween, torchvision's MobileNetV2 with random weights)
    lowering     torch.export → torchao pt2e int8 → ET-VK's VulkanPartitioner and passes (what they tagged)
    revision     ET-VK's Python at the user's revision (not the wheel's), in a child process: model → .pte
    build        ExecuTorch's runtime with the Vulkan backend, built from the user's checkout, cached
    runtime      that runtime runs the .pte (executor_runner + ETDump) on the current Vulkan device
    events       ET-VK's own per-dispatch events (ETDump, read by executorch.devtools) → tidy rows
    profile      model → rows at one revision, or two revisions side by side
    drill        one dispatch of those rows → the same shader at the same shape through the workbench's dispatch
    fidelity     every drillable dispatch timed that way, timed as ET-VK times it, beside the runtime's time
    explorer     per-node times as a Model Explorer node-data file
    llm          a small Llama lowered by ExecuTorch's LLM export (export_llama_lib), prefill + decode on the runtime

Small int8 graphs written here (not lowered from a model) take a shorter path that only the workbench shows:
``int8_graph`` (the graphs) → ``tagging`` (ExecuTorch's own TagMemoryMetaPass on them) → ``graph_exec`` (the
tagged graph on the device with the workbench's kernels). ``lowered_run`` runs a lowered model's int8
data-movement ops with the workbench's kernels, the hook where a workbench kernel substitutes for ET-VK's.
"""
