"""Layout transfers on the GPU: NCHW int8 ↔ int8x4 layouts, float NCHW ↔ 3-D texture layouts.

The shaders read the layout from its hashed-layout specialization constant and its sizes from the metadata UBO,
both produced by `workbench.layouts` — so the GPU and the numpy packers share one definition.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import layouts
from ..layouts import normalize_sizes
from . import linear_global_size, pipeline_for

LOCAL_LINEAR = (64, 1, 1)
LOCAL_TEXELS = (4, 4, 4)
IMAGE_FORMATS = {"float32": "rgba32f", "float16": "rgba16f"}


class _InLayout:
    """A transfer between NCHW and one layout, named by the spec's `layout`."""

    @property
    def definition(self):
        return layouts.get_layout(self.layout)


@dataclass(frozen=True)
class PackSpec(_InLayout):
    """NCHW int8 → `layout` (pack) or back (unpack)."""
    layout: str
    sizes: tuple
    direction: str = "pack"  # or "unpack"
    block: bool = False      # 4W4C pack only: one 16-byte block per thread (nchw_to_4w4c_block.glsl)

    def __post_init__(self):
        if not layouts.get_layout(self.layout).is_int8:
            raise ValueError(f"pack/unpack take an int8x4 layout (4W4C, 4H4W, 4W, 4C, 4C1W), got {self.layout!r}")
        if self.direction not in ("pack", "unpack"):
            raise ValueError(f"direction is 'pack' or 'unpack', got {self.direction!r}")
        if self.block and (self.direction != "pack" or layouts.get_layout(self.layout).name != "4W4C"):
            raise ValueError(f"the block kernel packs NCHW into 4W4C only, got {self.direction} {self.layout}")
        object.__setattr__(self, "sizes", normalize_sizes(self.sizes))

    @property
    def shader(self) -> str:
        if self.block:
            return "nchw_to_4w4c_block"
        return "nchw_to_int8x4" if self.direction == "pack" else "int8x4_to_nchw"

    @property
    def numel(self) -> int:
        return int(np.prod(self.sizes))

    @property
    def num_words(self) -> int:
        return self.definition.num_words(self.sizes)

    @property
    def nchw_words(self) -> int:
        return -(-self.numel // 4)

    def threads(self) -> int:
        if self.block:
            return self.num_words // 4
        return self.num_words if self.direction == "pack" else self.nchw_words

    def bytes_moved(self) -> int:
        """int8 bytes read + written (NCHW bytes once, packed words once)."""
        return self.numel + 4 * self.num_words

    def spec_constants(self) -> dict:
        return {} if self.block else {3: self.definition.spec_constant()}

    def reference(self, x):
        return self.definition.pack(x) if self.direction == "pack" else self.definition.unpack(x, self.sizes)


@dataclass(frozen=True)
class TextureSpec(_InLayout):
    """Float NCHW → texture `layout` (to_texture) or back (from_texture)."""
    layout: str
    sizes: tuple
    dtype: str = "float32"
    direction: str = "to_texture"

    def __post_init__(self):
        if not layouts.get_layout(self.layout).is_texture:
            raise ValueError(f"texture transfers take a texture layout, got {self.layout!r}")
        if self.dtype not in IMAGE_FORMATS:
            raise ValueError(f"texture dtype must be one of {sorted(IMAGE_FORMATS)}, got {self.dtype!r}")
        if self.direction not in ("to_texture", "from_texture"):
            raise ValueError(f"direction is 'to_texture' or 'from_texture', got {self.direction!r}")
        object.__setattr__(self, "sizes", normalize_sizes(self.sizes))

    @property
    def shader(self) -> str:
        return "nchw_to_texture" if self.direction == "to_texture" else "texture_to_nchw"

    @property
    def extents(self):
        return self.definition.extents(self.sizes)

    def defines(self) -> dict:
        return {"IMAGE_FORMAT": IMAGE_FORMATS[self.dtype]}

    def bytes_moved(self) -> int:
        numel = int(np.prod(self.sizes))
        texel_bytes = 16 if self.dtype == "float32" else 8
        return numel * 4 + int(np.prod(self.extents)) * texel_bytes


def record_pack(rec, device, spec: PackSpec, dst, src, meta, label=None):
    pipeline = pipeline_for(device, spec.shader, spec_constants=spec.spec_constants(), local_size=LOCAL_LINEAR)
    rec.dispatch(pipeline, [dst, src, meta], linear_global_size(device, spec.threads(), LOCAL_LINEAR[0]),
                 label=label or f"{spec.direction} {spec.layout}")


def record_texture(rec, device, spec: TextureSpec, image, buffer, meta, label=None):
    pipeline = pipeline_for(device, spec.shader, defines=spec.defines(),
                            spec_constants={3: spec.definition.spec_constant()},
                            local_size=LOCAL_TEXELS if spec.direction == "to_texture" else LOCAL_LINEAR)
    if spec.direction == "to_texture":
        rec.dispatch(pipeline, [image, buffer, meta], spec.extents, label=label or f"to {spec.layout}")
    else:
        n = int(np.prod(spec.sizes))
        rec.dispatch(pipeline, [buffer, image, meta], linear_global_size(device, n, LOCAL_LINEAR[0]),
                     label=label or f"from {spec.layout}")


def nchw_words(x_int8: np.ndarray) -> np.ndarray:
    """int8 bytes padded to whole int32 words, as the shaders read them."""
    raw = np.zeros(-(-x_int8.size // 4) * 4, dtype=np.int8)
    raw[:x_int8.size] = x_int8.reshape(-1)
    return raw.view(np.int32)


def _as_int8(x) -> tuple[np.ndarray, bool]:
    import torch
    is_torch = isinstance(x, torch.Tensor)
    a = x.detach().cpu().numpy() if is_torch else np.asarray(x)
    if a.dtype != np.int8:
        raise TypeError(f"expected an int8 tensor, got dtype {a.dtype}")
    return np.ascontiguousarray(a), is_torch


def pack(device, x, layout: str):
    """Pack an NCHW int8 tensor into `layout` on the GPU; returns the int32 words (numpy or torch, as given)."""
    a, is_torch = _as_int8(x)
    spec = PackSpec(layout, a.shape, block=layouts.get_layout(layout).name == "4W4C")
    with device.buffer(nchw_words(a)) as src, device.buffer(nbytes=4 * spec.num_words) as dst, \
            device.uniform(spec.definition.buffer_metadata(spec.sizes)) as meta, device.record("pack") as rec:
        record_pack(rec, device, spec, dst, src, meta)
        rec.submit()
        words = dst.download(np.int32)
    if is_torch:
        import torch
        return torch.from_numpy(words)
    return words


def unpack(device, words, sizes, layout: str):
    """Unpack int8x4 words of `layout` back to NCHW int8 on the GPU (numpy or torch, as given)."""
    import torch
    is_torch = isinstance(words, torch.Tensor)
    w = np.ascontiguousarray(words.cpu().numpy() if is_torch else np.asarray(words))
    spec = PackSpec(layout, sizes, "unpack")
    if w.dtype != np.int32 or w.size != spec.num_words:
        raise ValueError(f"{layout} words for sizes {spec.sizes}: expected {spec.num_words} int32 words, got "
                         f"{w.size} of dtype {w.dtype}")
    with device.buffer(w) as src, device.buffer(nbytes=4 * spec.nchw_words) as dst, \
            device.uniform(spec.definition.buffer_metadata(spec.sizes)) as meta, device.record("unpack") as rec:
        record_pack(rec, device, spec, dst, src, meta)
        rec.submit()
        out = dst.download(np.int8)[:spec.numel].reshape(spec.sizes)
    return torch.from_numpy(out.copy()) if is_torch else out


def to_texture(device, x, layout: str, dtype: str = "float32") -> np.ndarray:
    """Move a float NCHW tensor into a texture layout on the GPU; returns the texels as (z, y, x, 4)."""
    a = np.ascontiguousarray(np.asarray(x.cpu() if hasattr(x, "cpu") else x, dtype=np.float32))
    spec = TextureSpec(layout, a.shape, dtype)
    with device.buffer(a) as src, device.image(spec.extents, IMAGE_FORMATS[dtype]) as img, \
            device.uniform(spec.definition.texture_metadata(spec.sizes)) as meta, device.record("to_texture") as rec:
        record_texture(rec, device, spec, img, src, meta)
        rec.submit()
        return img.download()


def from_texture(device, texels: np.ndarray, sizes, layout: str, dtype: str = "float32") -> np.ndarray:
    """Move texels of a texture layout back to a float32 NCHW array on the GPU."""
    spec = TextureSpec(layout, sizes, dtype, "from_texture")
    x, y, z = spec.extents
    texels = np.ascontiguousarray(texels, dtype=np.float32 if dtype == "float32" else np.float16)
    if texels.shape != (z, y, x, 4):
        raise ValueError(f"{layout} texels for sizes {spec.sizes}: expected shape {(z, y, x, 4)}, got {texels.shape}")
    n = int(np.prod(spec.sizes))
    with device.image(spec.extents, IMAGE_FORMATS[dtype]) as img, device.buffer(nbytes=4 * n) as dst, \
            device.uniform(spec.definition.texture_metadata(spec.sizes)) as meta, \
            device.record("from_texture") as rec:
        img.upload(texels)
        record_texture(rec, device, spec, img, dst, meta)
        rec.submit()
        return dst.download(np.float32, spec.sizes)
