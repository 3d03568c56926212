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


class _ConvBNReLU6(nn.Sequential):
    def __init__(self, cin: int, cout: int, kernel: int = 3, stride: int = 1, groups: int = 1):
        super().__init__(nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6(inplace=False))


class _InvertedResidual(nn.Module):
    """MobileNetV2's block: 1×1 expand (ReLU6) → 3×3 depthwise (stride s, ReLU6) → 1×1 linear projection; the input
    is added back when the stride is 1 and the channels match."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers = [] if expand == 1 else [_ConvBNReLU6(cin, hidden, 1)]
        layers += [_ConvBNReLU6(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.conv(x) if self.residual else self.conv(x)


def _divisible(v: float, divisor: int = 8) -> int:
    out = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * v else out


class MobileNetV2(nn.Module):
    """MobileNetV2 (Sandler et al. 2018, table 2: the (t, c, n, s) bottleneck settings, width multiplier, channels
    rounded to multiples of 8, 1280-wide last conv, dropout-free linear classifier), random weights, eval mode
    (batch norms with random running statistics, folded into the convs by ExecuTorch's passes). Written here
    because torchvision's PyPI wheel is a CUDA build that does not load beside the CPU torch."""

    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))

    def __init__(self, width_mult: float = 1.0, num_classes: int = 1000, seed: int = 4):
        super().__init__()
        cin = _divisible(32 * width_mult)
        last = _divisible(1280 * max(1.0, width_mult))
        layers = [_ConvBNReLU6(3, cin, 3, 2)]
        for t, c, n, s in self.SETTINGS:
            cout = _divisible(c * width_mult)
            for i in range(n):
                layers.append(_InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers.append(_ConvBNReLU6(cin, last, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(last, num_classes)
        _seeded(self, seed)
        g = torch.Generator().manual_seed(seed + 1)
        for m in self.modules():       # plausible batch-norm statistics, so activations stay in range
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.data.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.75)
                m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)

    def forward(self, x):
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(x)


# name → (factory, default input shape): what `make`, the CLI (`etvk profile MODEL`) and the child lowering know
MODELS = {
    "refinenet_like": (RefineNetLike, REFINENET_INPUT),
    "residual_add": (ResidualAdd, (1, 3, 16, 16)),
    "float_between": (FloatBetween, (1, 3, 16, 8)),
    "mobilenet_v2": (MobileNetV2, (1, 3, 224, 224)),
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
