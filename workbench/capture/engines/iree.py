"""IREE's Vulkan runtime as a program to capture: programs compiled for ``vulkan-spirv`` by IREE's own compiler, run on
IREE's ``vulkan`` driver, their outputs checked against numpy / torch (an independent reference).

    python -m workbench.capture.engines.iree [PROGRAM ...]      # matmul, elementwise, torch-mlp; default: all
    python -m workbench.capture.engines.iree field             # the field's ops (`capture compare`)
    workbench capture run --out cap -- python -m workbench.capture.engines.iree matmul

Needs ``pip install iree-base-compiler iree-base-runtime`` (3.13; ``./setup.sh peers``); ``torch-mlp`` also needs
``iree-turbine`` (torch → IREE), and is skipped with a line saying so where it is absent. Prints one line per
program; exits 0 when every output matches its reference, 1 when one differs, 2 when IREE is missing or a name is
unknown. Nothing of IREE is copied here: the wheels are loaded at run time.

On lavapipe ``DeviceArray.to_host()`` fails (IREE imports the numpy array's memory, and lavapipe wants host pointers
aligned to ``minImportedHostPointerAlignment`` = 4096): outputs are copied through a host-visible staging buffer
(`read_back`).
"""
from __future__ import annotations

import sys

import numpy as np

N = 256  # the matmul's M = N = K
ELEMENTS = 1 << 16  # the elementwise program's length

MATMUL_MLIR = f"""
func.func @mm_relu(%a: tensor<{N}x{N}xf32>, %b: tensor<{N}x{N}xf32>, %bias: tensor<{N}xf32>) -> tensor<{N}x{N}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{N}x{N}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{N}x{N}xf32>) -> tensor<{N}x{N}xf32>
  %m = linalg.matmul ins(%a, %b : tensor<{N}x{N}xf32>, tensor<{N}x{N}xf32>)
                     outs(%f : tensor<{N}x{N}xf32>) -> tensor<{N}x{N}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                          affine_map<(i, j) -> (i, j)>],
                        iterator_types = ["parallel", "parallel"]}}
       ins(%m, %bias : tensor<{N}x{N}xf32>, tensor<{N}xf32>) outs(%e : tensor<{N}x{N}xf32>) {{
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %q = arith.maximumf %s, %z : f32
    linalg.yield %q : f32
  }} -> tensor<{N}x{N}xf32>
  return %r : tensor<{N}x{N}xf32>
}}
"""

# y = max(a * b + c, 0) in fp32, then an int32 program: (i * 3) ^ (i >> 2)
ELEMENTWISE_MLIR = f"""
func.func @fma_relu(%a: tensor<{ELEMENTS}xf32>, %b: tensor<{ELEMENTS}xf32>, %c: tensor<{ELEMENTS}xf32>)
    -> tensor<{ELEMENTS}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{ELEMENTS}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>,
                                          affine_map<(i) -> (i)>], iterator_types = ["parallel"]}}
       ins(%a, %b, %c : tensor<{ELEMENTS}xf32>, tensor<{ELEMENTS}xf32>, tensor<{ELEMENTS}xf32>)
       outs(%e : tensor<{ELEMENTS}xf32>) {{
  ^bb0(%x: f32, %y: f32, %w: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %w : f32
    %q = arith.maximumf %s, %z : f32
    linalg.yield %q : f32
  }} -> tensor<{ELEMENTS}xf32>
  return %r : tensor<{ELEMENTS}xf32>
}}
func.func @xor_shift(%a: tensor<{ELEMENTS}xi32>) -> tensor<{ELEMENTS}xi32> {{
  %three = arith.constant 3 : i32
  %two = arith.constant 2 : i32
  %e = tensor.empty() : tensor<{ELEMENTS}xi32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                        iterator_types = ["parallel"]}}
       ins(%a : tensor<{ELEMENTS}xi32>) outs(%e : tensor<{ELEMENTS}xi32>) {{
  ^bb0(%x: i32, %o: i32):
    %m = arith.muli %x, %three : i32
    %s = arith.shrsi %x, %two : i32
    %q = arith.xori %m, %s : i32
    linalg.yield %q : i32
  }} -> tensor<{ELEMENTS}xi32>
  return %r : tensor<{ELEMENTS}xi32>
}}
"""


class Missing(Exception):
    """A wheel this program needs is not installed (the message says which and how to install it)."""


VMFB_DIR = "WORKBENCH_IREE_VMFB_DIR"   # compiled modules by the MLIR's hash: filled here, carried to a GPU host


def _iree():
    """(iree.compiler or None where only the runtime is installed and $WORKBENCH_IREE_VMFB_DIR holds the modules,
    iree.runtime)."""
    import os
    try:
        import iree.runtime as runtime
    except ImportError:
        raise Missing("expected IREE's wheels (pip install iree-base-compiler iree-base-runtime, or ./setup.sh "
                      "peers), found none") from None
    try:
        import iree.compiler as compiler
    except ImportError:
        if not os.environ.get(VMFB_DIR):
            raise Missing("expected IREE's compiler (pip install iree-base-compiler), or modules compiled elsewhere "
                          f"in ${VMFB_DIR}; found neither") from None
        compiler = None
    return compiler, runtime


class Session:
    """IREE's Vulkan device; each program's module loaded into a context of its own (`load`), its functions
    called on numpy arrays (`call`)."""

    def __init__(self):
        self.compiler, self.rt = _iree()
        self.config = self.rt.Config("vulkan")
        self.context = None

    def load(self, vmfb: bytes):
        self.context = self.rt.SystemContext(config=self.config)
        self.context.add_vm_module(self.rt.VmModule.copy_buffer(self.context.instance, vmfb))

    def compile(self, mlir: str):
        self.load(compiled(mlir, self.compiler))

    def call(self, module: str, function: str, *args) -> list[np.ndarray]:
        out = self.context.modules[module][function](*args)
        return [self.read_back(o) for o in (out if isinstance(out, (list, tuple)) else [out])]

    def read_back(self, array) -> np.ndarray:
        """A DeviceArray's contents through a host-visible staging buffer and a queue copy (to_host() imports the
        numpy memory, which lavapipe refuses below 4096-byte alignment)."""
        rt, device = self.rt, self.config.device
        source = array._buffer_view.get_buffer()
        size = source.byte_length()
        staging = device.allocator.allocate_buffer(
            memory_type=rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE,
            allowed_usage=rt.BufferUsage.TRANSFER | rt.BufferUsage.MAPPING, allocation_size=size)
        done = device.create_semaphore(0)
        device.queue_copy(source, staging, [], [(done, 1)])
        done.wait(1)
        return np.array(staging.map().asarray(list(array.shape), np.dtype(array.dtype)), copy=True)


def compiled(mlir: str, compiler=None) -> bytes:
    """`mlir` compiled for ``vulkan-spirv``; with $WORKBENCH_IREE_VMFB_DIR, read from / written to
    <dir>/<sha256 of the MLIR, 16 digits>.vmfb (a GPU host without IREE's compiler reads what was compiled here)."""
    import hashlib
    import os
    from pathlib import Path
    folder = os.environ.get(VMFB_DIR)
    path = Path(folder) / f"{hashlib.sha256(mlir.encode()).hexdigest()[:16]}.vmfb" if folder else None
    if path is not None and path.is_file():
        return path.read_bytes()
    if compiler is None:
        raise Missing(f"expected a module compiled elsewhere at {path} (${VMFB_DIR}) or IREE's compiler, found neither")
    code = bytes(compiler.compile_str(mlir, target_backends=["vulkan-spirv"]))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(code)
    return code


def _inputs(seed: int, *shapes) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s, dtype=np.float32) for s in shapes]


def _close(name: str, got: np.ndarray, want: np.ndarray, tol: float) -> tuple[bool, str]:
    """(ok, one line) of an fp32 output against a float64 reference."""
    if got.shape != want.shape:
        return False, f"{name}: expected shape {want.shape}, got {got.shape}"
    error = float(np.max(np.abs(got.astype(np.float64) - want) / (1 + np.abs(want))))
    return error <= tol, f"{name}: max relative error {error:.2e} (tolerance {tol:.0e})"


def matmul(session: Session) -> list[tuple[bool, str]]:
    """256x256x256 fp32 matmul + bias + ReLU against numpy in float64."""
    session.compile(MATMUL_MLIR)
    a, b, bias = _inputs(0, (N, N), (N, N), (N,))
    got, = session.call("module", "mm_relu", a, b, bias)
    want = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    return [_close("matmul+bias+relu 256^3", got, want, 1e-4)]  # fp32 sums of 256 terms, in another order


def elementwise(session: Session) -> list[tuple[bool, str]]:
    """An fp32 fused multiply-add + ReLU and an int32 multiply / shift / xor, against numpy (the int32 exactly)."""
    session.compile(ELEMENTWISE_MLIR)
    a, b, c = _inputs(1, (ELEMENTS,), (ELEMENTS,), (ELEMENTS,))
    got, = session.call("module", "fma_relu", a, b, c)
    found = [_close(f"fma+relu {ELEMENTS}", got, np.maximum(a.astype(np.float64) * b + c, 0), 1e-6)]
    x = (np.arange(ELEMENTS, dtype=np.int64) * 2654435761 % (1 << 31) - (1 << 30)).astype(np.int32)
    got, = session.call("module", "xor_shift", x)
    want = (x * np.int32(3)) ^ (x >> 2)
    found.append((bool(np.array_equal(got, want)), f"xor_shift {ELEMENTS} int32: "
                  f"{'equal' if np.array_equal(got, want) else 'differs'} to numpy"))
    return found


def torch_mlp(session: Session) -> list[tuple[bool, str]]:
    """A small torch model (Linear 64→128, ReLU, Linear 128→32, softmax) lowered by iree-turbine, against torch."""
    try:
        import torch
        import iree.turbine.aot as aot
    except ImportError:
        raise Missing("torch-mlp: expected iree-turbine (pip install iree-turbine) and torch, found them missing") \
            from None

    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = torch.nn.Linear(64, 128), torch.nn.Linear(128, 32)

        def forward(self, x):
            return torch.softmax(self.l2(torch.relu(self.l1(x))), dim=-1)

    torch.manual_seed(0)
    model, x = Mlp().eval(), torch.randn(8, 64)
    exported = aot.export(model, args=(x,))
    session.load(bytes(exported.compile(save_to=None, target_backends=["vulkan-spirv"]).map_memory().raw))
    got, = session.call("module", "main", x.numpy())
    with torch.no_grad():
        want = model.double()(x.double()).numpy()
    return [_close("torch mlp 64-128-32 + softmax", got, want, 1e-5)]


def field_mlir() -> str:
    """The field's ops (`workbench.capture.engines.field`) as four MLIR functions named as `field.OPS`: IREE's
    entry points begin with the function's name (``conv3x3_dispatch_0_…``), which `capture compare` reads as the
    op. NCHW tensors, weights and biases as arguments (computed on the device each call)."""
    from . import field as f
    c, o, h, w, n = f.C_IN, f.C_OUT, f.H, f.W, f.FEATURES

    def conv(name, cin, kernel, op, weight, pad):
        padded = f"1x{cin}x{h + 2 * pad}x{w + 2 * pad}xf32"
        pad_text = (f"""  %p = tensor.pad %x low[0, 0, {pad}, {pad}] high[0, 0, {pad}, {pad}] {{
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %z : f32
  }} : tensor<1x{cin}x{h}x{w}xf32> to tensor<{padded}>
""" if pad else "")
        source = "%p" if pad else "%x"
        return f"""
func.func @{name}(%x: tensor<1x{cin}x{h}x{w}xf32>, %k: tensor<{weight}xf32>, %b: tensor<{o}xf32>)
    -> tensor<1x{o}x{h}x{w}xf32> {{
  %z = arith.constant 0.0 : f32
{pad_text}  %e = tensor.empty() : tensor<1x{o}x{h}x{w}xf32>
  %bb = linalg.generic {{indexing_maps = [affine_map<(n, c, y, x) -> (c)>, affine_map<(n, c, y, x) -> (n, c, y, x)>],
                         iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
        ins(%b : tensor<{o}xf32>) outs(%e : tensor<1x{o}x{h}x{w}xf32>) {{
  ^bb0(%v: f32, %q: f32):
    linalg.yield %v : f32
  }} -> tensor<1x{o}x{h}x{w}xf32>
  %r = linalg.{op} {{dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}}
       ins({source}, %k : tensor<{padded if pad else f"1x{cin}x{h}x{w}xf32"}>, tensor<{weight}xf32>)
       outs(%bb : tensor<1x{o}x{h}x{w}xf32>) -> tensor<1x{o}x{h}x{w}xf32>
  return %r : tensor<1x{o}x{h}x{w}xf32>
}}
"""
    linear = f"""
func.func @linear(%v: tensor<1x{n}xf32>, %wt: tensor<{n}x{n}xf32>, %b: tensor<{n}xf32>) -> tensor<1x{n}xf32> {{
  %e = tensor.empty() : tensor<1x{n}xf32>
  %bb = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                         iterator_types = ["parallel", "parallel"]}}
        ins(%b : tensor<{n}xf32>) outs(%e : tensor<1x{n}xf32>) {{
  ^bb0(%x: f32, %q: f32):
    linalg.yield %x : f32
  }} -> tensor<1x{n}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (j, k)>,
                                         affine_map<(i, j, k) -> (i, j)>],
                        iterator_types = ["parallel", "parallel", "reduction"]}}
       ins(%v, %wt : tensor<1x{n}xf32>, tensor<{n}x{n}xf32>) outs(%bb : tensor<1x{n}xf32>) {{
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %m = arith.mulf %a, %c : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }} -> tensor<1x{n}xf32>
  return %r : tensor<1x{n}xf32>
}}
"""
    return (conv("conv3x3", c, 3, "conv_2d_nchw_fchw", f"{o}x{c}x3x3", 1)
            + conv("conv1x1", o, 1, "conv_2d_nchw_fchw", f"{o}x{o}x1x1", 0)
            + conv("dwconv3x3", o, 3, "depthwise_conv_2d_nchw_chw", f"{o}x3x3", 1) + linear)


def field(session: Session) -> list[tuple[bool, str]]:
    """The field's ops, each its own function called in `field.OPS` order (the conv chain fed each one's output),
    against torch in float64."""
    from . import field as f
    session.compile(field_mlir())
    w = f.weights(0)
    x, v = f.inputs(0)
    want = f.reference(w, x, v)
    y = x
    for op in f.OPS[:3]:
        weight = w[f"{op}.w"].reshape(f.C_OUT, 3, 3) if op == "dwconv3x3" else w[f"{op}.w"]
        y, = session.call("module", op, y, weight, w[f"{op}.b"])
    got, = session.call("module", "linear", v, w["linear.w"], w["linear.b"])
    return [_close("field conv3x3 > conv1x1 > dwconv3x3", y, want["conv"], 1e-4),
            _close("field linear 1024", got, want["linear"], 1e-4)]



PROGRAMS = {"matmul": matmul, "elementwise": elementwise, "torch-mlp": torch_mlp, "field": field}


def main(argv=None) -> int:
    names = list(sys.argv[1:] if argv is None else argv) or [p for p in PROGRAMS if p != "field"]
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        print(f"expected programs among {', '.join(PROGRAMS)}, got {', '.join(unknown)}", file=sys.stderr)
        return 2
    try:
        session = Session()
    except Missing as exc:
        print(exc, file=sys.stderr)
        return 2
    failed = False
    for name in names:
        try:
            results = PROGRAMS[name](session)
        except Missing as exc:
            print(f"iree {name}: skipped, {exc}")
            continue
        for ok, line in results:
            print(f"iree {name}: {line}: {'matches' if ok else 'DIFFERS from'} the reference")
            failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
