"""IREE's Vulkan runtime as a program to capture: programs compiled for ``vulkan-spirv`` by IREE's own compiler, run on
IREE's ``vulkan`` driver, their outputs checked against numpy / torch (an independent reference).

    python -m workbench.capture.engines.iree [PROGRAM ...]      # matmul, elementwise, torch-mlp; default: all
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


def _iree():
    try:
        import iree.compiler as compiler
        import iree.runtime as runtime
    except ImportError:
        raise Missing("expected IREE's wheels (pip install iree-base-compiler iree-base-runtime, or ./setup.sh "
                      "peers), found none") from None
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
        self.load(self.compiler.compile_str(mlir, target_backends=["vulkan-spirv"]))

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


PROGRAMS = {"matmul": matmul, "elementwise": elementwise, "torch-mlp": torch_mlp}


def main(argv=None) -> int:
    names = list(sys.argv[1:] if argv is None else argv) or list(PROGRAMS)
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
