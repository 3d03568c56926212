"""The field's ops: the same operations at the same shapes for every engine the workbench compares (`capture
compare`): a 3×3 convolution 32 → 64 channels at 56×56 (padding 1), a 1×1 convolution 64 → 64, a depthwise 3×3
convolution of 64 channels (padding 1), chained in that order, and a linear layer 1×1024 → 1024 on an input of its
own; float32, random weights and inputs from one seed, so every engine computes the same numbers, and a float64
torch reference on the CPU (an independent check of each engine's output).

ET-VK lowers `torch_module` (`workbench.etvk.model.field`), ncnn runs the same layers as a named net
(`workbench.capture.engines.ncnn`, ``--net field``), IREE the same ops written in MLIR
(`workbench.capture.engines.iree`, program ``field``), llama.cpp's ggml the linear layer and, in 4 bits, a GEMV of
its shape (`workbench.capture.engines.ggml`, ``--net field``).
"""
from __future__ import annotations

import numpy as np

OPS = ("conv3x3", "conv1x1", "dwconv3x3", "linear")   # in the order every engine runs them
Q4_OPS = ("q4gemv",)    # where an engine has a 4-bit weight GEMV: 1×1024 → 1024, q4_0 / group 32 (ggml)
C_IN, C_OUT, H, W = 32, 64, 56, 56
FEATURES = 1024                                        # the linear layer's inputs and outputs


def shapes() -> dict[str, str]:
    """Each op's shape as the compare table shows it."""
    return {"conv3x3": f"1x{C_IN}x{H}x{W} -> {C_OUT}, k3 p1", "conv1x1": f"1x{C_OUT}x{H}x{W} -> {C_OUT}, k1",
            "dwconv3x3": f"1x{C_OUT}x{H}x{W}, groups {C_OUT}, k3 p1", "linear": f"1x{FEATURES} -> {FEATURES}",
            "q4gemv": f"1x{FEATURES} -> {FEATURES}, 4-bit weights, group 32"}


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    """The ops' weights in torch's shapes (out, in, kh, kw; linear: out, in), scaled by 1/sqrt(fan-in)."""
    rng = np.random.default_rng(seed)

    def tensor(*shape):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)

    return {"conv3x3.w": tensor(C_OUT, C_IN, 3, 3), "conv3x3.b": tensor(C_OUT),
            "conv1x1.w": tensor(C_OUT, C_OUT, 1, 1), "conv1x1.b": tensor(C_OUT),
            "dwconv3x3.w": tensor(C_OUT, 1, 3, 3), "dwconv3x3.b": tensor(C_OUT),
            "linear.w": tensor(FEATURES, FEATURES), "linear.b": tensor(FEATURES)}


def inputs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(x: 1×32×56×56, v: 1×1024) float32."""
    rng = np.random.default_rng(seed + 1)
    return (rng.standard_normal((1, C_IN, H, W)).astype(np.float32),
            rng.standard_normal((1, FEATURES)).astype(np.float32))


def reference(w: dict[str, np.ndarray], x: np.ndarray, v: np.ndarray) -> dict[str, np.ndarray]:
    """torch on the CPU in float64: {"conv": the depthwise conv's output (1×64×56×56), "linear": 1×1024}."""
    import torch
    import torch.nn.functional as F
    t = {k: torch.from_numpy(a).double() for k, a in w.items()}
    y = F.conv2d(torch.from_numpy(x).double(), t["conv3x3.w"], t["conv3x3.b"], padding=1)
    y = F.conv2d(y, t["conv1x1.w"], t["conv1x1.b"])
    y = F.conv2d(y, t["dwconv3x3.w"], t["dwconv3x3.b"], padding=1, groups=C_OUT)
    return {"conv": y.numpy(), "linear": F.linear(torch.from_numpy(v).double(), t["linear.w"], t["linear.b"]).numpy()}


def max_relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / (1 + |want|); inf where the shapes differ."""
    got = np.asarray(got, np.float64).reshape(-1)
    want = np.asarray(want, np.float64).reshape(-1)
    if got.shape != want.shape:
        return float("inf")
    return float(np.max(np.abs(got - want) / (1 + np.abs(want))))
