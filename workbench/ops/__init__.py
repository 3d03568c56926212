"""torch-facing entry points: they run on the workbench's current device (`workbench.vk.get_device()`) and
return CPU torch tensors in NCHW.

Ops live in modules named after their family (never after an op, which the submodule would shadow); names are
resolved on first use so that importing `workbench.ops` stays cheap.
"""
import functools
import importlib

_OPS = {
    "pixel_shuffle": "shuffle_ops",
    "q8ta_pixel_shuffle": "shuffle_ops",
    "q8ta_conv2d_pw": "conv_pw",
    "reference_q8ta_conv2d_pw": "conv_pw",
    "q8ta_conv2d_pw_accumulators": "conv_pw",
    "quantize_affine": "affine_ops",
    "dequantize_affine": "affine_ops",
    "pack": "layout_ops",
    "unpack": "layout_ops",
}


def __getattr__(name):
    module = _OPS.get(name)
    if module is None:
        raise AttributeError(f"workbench.ops has no op {name!r}; ops: {sorted(_OPS)}")
    fn = _cpu_tensors_only(getattr(importlib.import_module(f"{__name__}.{module}"), name))
    globals()[name] = fn  # later lookups skip __getattr__
    return fn


def _cpu_tensors_only(fn):
    """Ops take CPU tensors: a `meta` or CUDA tensor gets a TypeError naming the argument, before any work."""
    import inspect
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def op(*args, **kwargs):
        import torch
        bound = signature.bind_partial(*args, **kwargs)
        for arg, value in bound.arguments.items():
            if isinstance(value, torch.Tensor) and value.device.type != "cpu":
                raise TypeError(f"{fn.__name__}: {arg} must be a CPU tensor (the op uploads it to the Vulkan "
                                f"device itself), got a tensor on {value.device}")
        return fn(*args, **kwargs)
    return op


def __dir__():
    return sorted(_OPS)
