"""Small float models for the real lowering (random weights, deterministic): the stories of notebook 05.

* :class:`RefineNetLike` — a Light-Weight RefineNet-like segmentation net: a stride-2 conv encoder (24-channel
  features at 1/2 … 1/16), then a 4-stage head; each stage = conv 1×1 + ReLU → chained residual pooling (max-pool 5×5
  → conv 1×1, added back) → conv 1×1 (24 → 96) → ``pixel_shuffle(2)`` (the quantized pixel shuffles) → add the
  encoder feature of that resolution; a final conv 1×1 to the classes.  Input 1×3×256×144 (:data:`REFINENET_INPUT`).
* :class:`ResidualAdd` — conv → ReLU → conv, added to the block input (a quantized add), → conv.
* :class:`FloatBetween` — a float-only ``sigmoid`` between quantized ops, whose two users want different int8
  layouts: the real pass inserts a transition.
* :class:`WithUnsupported` — conv → ``cumsum`` → conv: ``cumsum`` is not an ET-VK op, so it stays on the CPU.
"""
from __future__ import annotations

import torch
from torch import nn

REFINENET_INPUT = (1, 3, 256, 144)


def _seeded(module: nn.Module, seed: int) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (1.0 / max(1, p[0].numel()) ** 0.5))
    return module.eval()


class _CRP(nn.Module):
    """Chained residual pooling (one link): x + conv1x1(maxpool5x5(x))."""

    def __init__(self, ch):
        super().__init__()
        self.pool = nn.MaxPool2d(5, stride=1, padding=2)
        self.conv = nn.Conv2d(ch, ch, 1, bias=False)

    def forward(self, x):
        return x + self.conv(self.pool(x))


class RefineNetLike(nn.Module):
    def __init__(self, feat: int = 24, classes: int = 8, stages: int = 4, seed: int = 0):
        super().__init__()
        self.encoder = nn.ModuleList(
            [nn.Sequential(nn.Conv2d(3 if i == 0 else feat, feat, 3, stride=2, padding=1), nn.ReLU())
             for i in range(stages)])
        self.pre = nn.ModuleList([nn.Sequential(nn.Conv2d(feat, feat, 1), nn.ReLU()) for _ in range(stages)])
        self.crp = nn.ModuleList([_CRP(feat) for _ in range(stages)])
        self.up = nn.ModuleList([nn.Conv2d(feat, feat * 4, 1) for _ in range(stages)])
        self.shuffle = nn.PixelShuffle(2)
        self.classifier = nn.Conv2d(feat, classes, 1)
        _seeded(self, seed)

    def forward(self, x):
        skips = []
        for enc in self.encoder:
            x = enc(x)
            skips.append(x)
        skips = skips[::-1][1:]           # the features at 1/8, 1/4, 1/2 meet the head after stages 1, 2, 3
        for i, (pre, crp, up) in enumerate(zip(self.pre, self.crp, self.up)):
            x = self.shuffle(up(crp(pre(x))))
            if i < len(skips):
                x = x + skips[i]
        return self.classifier(x)


class ResidualAdd(nn.Module):
    def __init__(self, ch: int = 16, seed: int = 1):
        super().__init__()
        self.stem = nn.Conv2d(3, ch, 1)
        self.a = nn.Conv2d(ch, ch, 1)
        self.b = nn.Conv2d(ch, ch, 1)
        self.head = nn.Conv2d(ch, ch, 1)
        _seeded(self, seed)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        return self.head(torch.relu(x + self.b(torch.relu(self.a(x)))))


class FloatBetween(nn.Module):
    """conv → sigmoid (float) → {linear over W, max-pool 3×3} → add → conv.  The real pass gives ``q8ta_linear`` a
    4H4W output and ``q8ta_add`` wants 4W4C: one int8 transition (a ``clone``) is inserted between them."""

    def __init__(self, ch: int = 16, width: int = 8, seed: int = 2):
        super().__init__()
        self.a = nn.Conv2d(3, ch, 1)
        self.b = nn.Conv2d(ch, ch, 1)
        self.linear = nn.Linear(width, width)
        _seeded(self, seed)

    def forward(self, x):
        y = torch.sigmoid(self.a(x))
        return self.b(self.linear(y) + nn.functional.max_pool2d(y, 3, 1, 1))


class WithUnsupported(nn.Module):
    def __init__(self, ch: int = 8, seed: int = 3):
        super().__init__()
        self.a = nn.Conv2d(3, ch, 1)
        self.b = nn.Conv2d(ch, ch, 1)
        _seeded(self, seed)

    def forward(self, x):
        return self.b(torch.cumsum(self.a(x), dim=1))


class NotExportable(nn.Module):
    """Data-dependent control flow: ``torch.export`` refuses it (the ``export`` stage fails)."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


def mobilenet_v2(width_mult: float = 1.0, num_classes: int = 1000, seed: int = 4) -> nn.Module:
    """torchvision's MobileNetV2 built from its code with random weights (nothing is downloaded): a real CNN with
    depthwise, pointwise and strided convolutions, inverted residual adds, ReLU6 and a linear classifier."""
    try:
        from torchvision.models import mobilenet_v2 as tv_mobilenet_v2
    except ImportError as e:
        raise ImportError("MobileNetV2 comes from torchvision's code: pip install --no-deps torchvision==0.28.0 "
                          "(./setup.sh installs it)") from e
    torch.manual_seed(seed)
    return _seeded(tv_mobilenet_v2(weights=None, width_mult=width_mult, num_classes=num_classes), seed)


# name → (factory, default input shape): what `make`, the CLI (`etvk profile MODEL`) and the child lowering know
MODELS = {
    "refinenet_like": (RefineNetLike, REFINENET_INPUT),
    "residual_add": (ResidualAdd, (1, 3, 16, 16)),
    "float_between": (FloatBetween, (1, 3, 16, 8)),
    "mobilenet_v2": (mobilenet_v2, (1, 3, 224, 224)),
}


def make(name: str, input_shape=None, seed: int = 0, **kwargs):
    """(model, example inputs) for a model of :data:`MODELS`; `input_shape` overrides the default, the input is
    seeded uniform noise in [-1, 1) (a fixed, reproducible input for the runtime and the reference alike)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(MODELS)}")
    factory, default = MODELS[name]
    shape = tuple(int(s) for s in (input_shape or default))
    if len(shape) != 4 or min(shape) < 1:
        raise ValueError(f"{name}: the input is N×C×H×W with every size >= 1, got {shape}")
    g = torch.Generator().manual_seed(seed)
    return factory(**kwargs), (torch.rand(shape, generator=g) * 2 - 1,)
