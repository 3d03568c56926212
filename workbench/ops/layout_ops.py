"""Layout transfers on the current device (see workbench.kernels.pack)."""
from .. import vk
from ..kernels import pack as _pack


def pack(x, layout: str = "4W4C", device=None):
    """NCHW int8 tensor → int32 words of `layout`, packed on the GPU."""
    return _pack.pack(device or vk.get_device(), x, layout)


def unpack(words, sizes, layout: str = "4W4C", device=None):
    """int32 words of `layout` → NCHW int8, unpacked on the GPU."""
    return _pack.unpack(device or vk.get_device(), words, sizes, layout)
