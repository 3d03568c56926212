"""ncnn's Vulkan backend as a program to capture: a small net written here (conv 3x3 + ReLU, conv 1x1, depthwise conv
3x3, max pooling, inner product, softmax) with random weights, run by ncnn on its Vulkan device, checked against torch
on the CPU (an independent reference).

    python -m workbench.capture.engines.ncnn [--fp16] [--shape wide]   # exit 0: the GPU output matches torch
    python -m workbench.capture.engines.ncnn --net field               # the field's ops (`capture compare`)
    workbench capture run --hide-extension VK_KHR_push_descriptor --out cap -- python -m workbench.capture.engines.ncnn

Needs ``pip install ncnn`` (``./setup.sh peers``); nothing of ncnn is copied here, the wheel (which loads
``libvulkan.so`` itself) is imported at run time. ``--fp16``: fp16 storage and packing between layers (fp32
arithmetic), checked with a looser tolerance. ``--shape wide``: 32 → 64 channels at 32×32 (ncnn picks other
kernels there: Winograd, GEMM-style convolutions, packs of 4 and 8). Prints one line per output; exits 0 when every output matches torch, 1
when one differs, 2 when ncnn (or torch) is missing or ncnn finds no Vulkan device.

Why ``--hide-extension VK_KHR_push_descriptor`` under capture: on a device with that extension ncnn binds every
dispatch with ``vkCmdPushDescriptorSetWithTemplateKHR``, which GFXReconstruct's resource dumps do not follow (see
`workbench.toolchain.hide_layer`); without it ncnn writes descriptor sets through update templates and binds them.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Shape:
    """The net's sizes: the input blob (ncnn's c, h, w = torch's C, H, W), conv 3x3's and conv 1x1's (and the
    depthwise conv's) outputs, the inner product's outputs."""
    c: int
    h: int
    w: int
    conv3: int
    conv1: int
    out: int

    @property
    def fc_in(self) -> int:
        return self.conv1 * (self.h // 2) * (self.w // 2)

    def param(self) -> str:
        """ncnn's .param text: layer type, name, bottoms, tops, then id=value (Convolution: 0 outputs, 1 kernel,
        4 pad, 5 bias, 6 weight count, 9 activation (1 = ReLU); ConvolutionDepthWise: 7 groups; Pooling: 0 kind
        (0 = max), 1 kernel, 2 stride; InnerProduct: 0 outputs, 1 bias, 2 weight count)."""
        return f"""7767517
7 7
Input            data  0 1 data 0={self.w} 1={self.h} 2={self.c}
Convolution      conv3 1 1 data c3 0={self.conv3} 1=3 4=1 5=1 6={self.conv3 * self.c * 9} 9=1
Convolution      conv1 1 1 c3 c1 0={self.conv1} 1=1 5=1 6={self.conv1 * self.conv3}
ConvolutionDepthWise dw 1 1 c1 dw 0={self.conv1} 1=3 4=1 5=1 6={self.conv1 * 9} 7={self.conv1}
Pooling          pool  1 1 dw pool 0=0 1=2 2=2
InnerProduct     fc    1 1 pool fc 0={self.out} 1=1 2={self.out * self.fc_in}
Softmax          prob  1 1 fc out
"""


SHAPES = {"small": Shape(8, 16, 16, 16, 16, 10), "wide": Shape(32, 32, 32, 64, 64, 64)}
# fp32 relative tolerance (sums of <= 1024 products in another order) and with fp16 storage between layers
TOLERANCE = {False: 1e-4, True: 1e-2}


class Missing(Exception):
    """A wheel or device this program needs is absent (the message says which and how to get it)."""


def weights(shape: Shape, seed: int = 0) -> dict[str, np.ndarray]:
    """The net's random weights in torch's shapes (ncnn's weight order is the same: out, in, kh, kw), scaled by
    1/sqrt(fan-in) so that every layer's values stay near 1."""
    rng = np.random.default_rng(seed)

    def tensor(*shape):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)

    s = shape
    return {"conv3.w": tensor(s.conv3, s.c, 3, 3), "conv3.b": tensor(s.conv3),
            "conv1.w": tensor(s.conv1, s.conv3, 1, 1), "conv1.b": tensor(s.conv1),
            "dw.w": tensor(s.conv1, 1, 3, 3), "dw.b": tensor(s.conv1), "fc.w": tensor(s.out, s.fc_in),
            "fc.b": tensor(s.out)}


def model_bytes(w: dict[str, np.ndarray]) -> bytes:
    """ncnn's .bin: each layer's weights after a 4-byte tag (0: fp32 as is), then its bias (no tag)."""
    tag = np.zeros(1, np.uint32).tobytes()
    parts = []
    for layer in ("conv3", "conv1", "dw", "fc"):
        parts += [tag, w[f"{layer}.w"].tobytes(), w[f"{layer}.b"].tobytes()]
    return b"".join(parts)


def reference(w: dict[str, np.ndarray], x: np.ndarray) -> dict[str, np.ndarray]:
    """torch on the CPU, in float64: the inner product's output (`fc`) and the softmax (`out`)."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        raise Missing("expected torch for the reference (the workbench's environment has it)") from None
    t = {k: torch.from_numpy(v).double() for k, v in w.items()}
    y = F.relu(F.conv2d(torch.from_numpy(x).double()[None], t["conv3.w"], t["conv3.b"], padding=1))
    y = F.conv2d(y, t["conv1.w"], t["conv1.b"])
    y = F.conv2d(y, t["dw.w"], t["dw.b"], padding=1, groups=t["dw.w"].shape[0])
    y = F.max_pool2d(y, 2, 2)
    fc = F.linear(y.flatten(), t["fc.w"], t["fc.b"])
    return {"fc": fc.numpy(), "out": torch.softmax(fc, 0).numpy()}


def run_ncnn(shape: Shape, w: dict[str, np.ndarray], x: np.ndarray, fp16: bool) -> dict[str, np.ndarray]:
    """The net on ncnn's Vulkan device: {"fc", "out"} as float32 arrays."""
    return run_net(shape.param(), model_bytes(w), {"data": x}, ("fc", "out"), fp16)


def run_net(param: str, model: bytes, feeds: dict[str, np.ndarray], outputs, fp16: bool,
            keep_instance: bool = False) -> dict[str, np.ndarray]:
    """Any net written here (.param text, .bin bytes) on ncnn's Vulkan device: its `feeds` (blob name → array)
    in, each of `outputs` extracted in order as a flat float32 array (ncnn's GPU instance destroyed after, unless
    `keep_instance`)."""
    try:
        import ncnn
    except ImportError:
        raise Missing("expected ncnn's wheel (pip install ncnn, or ./setup.sh peers), found none") from None
    if ncnn.get_gpu_count() < 1:
        raise Missing("expected a Vulkan device for ncnn, it found none (ncnn.get_gpu_count() == 0)")
    net = ncnn.Net()
    try:
        net.opt.use_vulkan_compute = True
        net.opt.use_fp16_storage = fp16
        net.opt.use_fp16_packed = fp16
        net.opt.use_fp16_arithmetic = False
        if net.load_param_mem(param) != 0:
            raise Missing("expected ncnn to load the net written here, it refused its .param (another ncnn version?)")
        net.load_model_mem(model)  # the binding returns nothing; a short .bin shows as wrong outputs
        found = {}
        extractor = net.create_extractor()
        for blob, array in feeds.items():
            extractor.input(blob, ncnn.Mat(np.ascontiguousarray(array)))
        for name in outputs:
            status, mat = extractor.extract(name)
            if status != 0:
                raise Missing(f"expected ncnn to compute blob {name!r}, it returned {status}")
            found[name] = np.array(mat, dtype=np.float32).ravel().copy()
        del extractor
    finally:
        del net
        if not keep_instance:
            ncnn.destroy_gpu_instance()
    return found


# --- the field's ops (`workbench.capture.engines.field`): the net `capture compare` puts beside ET-VK and IREE --------

FIELD_LAYERS = {  # op → (its input's shape (c, h, w) as ncnn's Input takes it, the layer's line)
    "conv3x3": "Convolution      conv3x3 1 1 in out 0={C_OUT} 1=3 4=1 5=1 6={w3}",
    "conv1x1": "Convolution      conv1x1 1 1 in out 0={C_OUT} 1=1 5=1 6={w1}",
    "dwconv3x3": "ConvolutionDepthWise dwconv3x3 1 1 in out 0={C_OUT} 1=3 4=1 5=1 6={wd} 7={C_OUT}",
    "linear": "InnerProduct     linear 1 1 in out 0={F} 1=1 2={wl}",
}


def field_param(op: str) -> str:
    """The field's op `op` as a one-layer ncnn net (Input `in` → the layer → `out`)."""
    from . import field as f
    inputs = {"conv3x3": f"0={f.W} 1={f.H} 2={f.C_IN}", "linear": f"0={f.FEATURES}"}
    layer = FIELD_LAYERS[op].format(C_OUT=f.C_OUT, F=f.FEATURES, w3=f.C_OUT * f.C_IN * 9, w1=f.C_OUT * f.C_OUT,
                                    wd=f.C_OUT * 9, wl=f.FEATURES * f.FEATURES)
    return f"7767517\n2 2\nInput            in 0 1 in {inputs.get(op, f'0={f.W} 1={f.H} 2={f.C_OUT}')}\n{layer}\n"


def field_model_bytes(w: dict[str, np.ndarray], op: str) -> bytes:
    """ncnn's .bin of op `op`'s net: its weights after a 4-byte fp32 tag, then its bias."""
    return np.zeros(1, np.uint32).tobytes() + w[f"{op}.w"].tobytes() + w[f"{op}.b"].tobytes()


def run_field(fp16: bool, seed: int = 0) -> list[tuple[bool, str]]:
    """The field's ops on ncnn, one single-layer net each, in `field.OPS` order (each net's run is one queue submit
    of its own: `capture compare` names ncnn's dispatches by it), the conv chain fed each net's output; against
    torch: (ok, one line) per output (the conv chain's, the linear's)."""
    from . import field as f
    w = f.weights(seed)
    x, v = f.inputs(seed)
    want = f.reference(w, x, v)
    try:
        blob, got = x[0], {}
        for op in f.OPS:
            feed = v[0] if op == "linear" else blob
            out = run_net(field_param(op), field_model_bytes(w, op), {"in": feed}, ("out",), fp16,
                          keep_instance=True)["out"]
            if op == "linear":
                got["linear"] = out
            else:
                blob = out.reshape(f.C_OUT, f.H, f.W)
        got["conv"] = blob
    finally:
        import ncnn
        ncnn.destroy_gpu_instance()
    return compare({k: got[k] for k in ("conv", "linear")}, want, TOLERANCE[fp16])


def compare(got: dict[str, np.ndarray], want: dict[str, np.ndarray], tolerance: float) -> list[tuple[bool, str]]:
    """(ok, one line) per output of `want`: its max relative error (`field.max_relative_error`) against
    `tolerance`."""
    from . import field as f
    lines = []
    for name in want:
        error = f.max_relative_error(got[name], want[name])
        lines.append((error <= tolerance, f"{name}: max relative error {error:.2e} (tolerance {tolerance:.0e})"))
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.capture.engines.ncnn", description=__doc__.split("\n")[0])
    parser.add_argument("--fp16", action="store_true", help="fp16 storage and packing between layers")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="small",
                        help="small: 8 → 16 channels at 16×16 (default); wide: 32 → 64 channels at 32×32")
    parser.add_argument("--seed", type=int, default=0, help="weights' and input's seed (default 0)")
    parser.add_argument("--net", choices=("ops", "field"), default="ops",
                        help="ops: the net of --shape (default); field: the field's ops (conv 3x3, conv 1x1, "
                             "depthwise 3x3, linear) at the shapes `capture compare` puts beside ET-VK and IREE")
    args = parser.parse_args(argv)
    if args.net == "field":
        storage = "fp16" if args.fp16 else "fp32"
        try:
            results = run_field(args.fp16, args.seed)
        except (Missing, ImportError) as exc:
            print(f"ncnn field {storage}: {exc}", file=sys.stderr)
            return 2
        for ok, line in results:
            print(f"ncnn field {storage} (conv3x3, conv1x1, dwconv3x3, linear): {line}: "
                  f"{'matches' if ok else 'DIFFERS from'} torch")
        return 0 if all(ok for ok, _ in results) else 1
    shape = SHAPES[args.shape]
    w = weights(shape, args.seed)
    x = np.random.default_rng(args.seed + 1).standard_normal((shape.c, shape.h, shape.w)).astype(np.float32)
    storage = f"fp16 {args.shape}" if args.fp16 else f"fp32 {args.shape}"
    try:
        want = reference(w, x)
        got = run_ncnn(shape, w, x, args.fp16)
    except Missing as exc:
        print(f"ncnn {storage}: {exc}", file=sys.stderr)
        return 2
    failed = False
    for ok, line in compare(got, want, TOLERANCE[args.fp16]):
        print(f"ncnn {storage} net (conv3x3+relu, conv1x1, dwconv3x3, maxpool, innerproduct, softmax): {line}: "
              f"{'matches' if ok else 'DIFFERS from'} torch")
        failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
