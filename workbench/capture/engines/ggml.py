"""llama.cpp's Vulkan GEMV as a program to capture: ggml's ``mul_mat`` of a q4_0 matrix (4.5 bits a weight: a
float16 scale per block of 32 int4) by one float32 vector, at the shapes asked for, run by ggml's Vulkan backend
(a ggml or llama.cpp checkout the user names, built at run time: `workbench.toolchain.ggml`) through a program
written here (``ggml_gemv.cpp``), each output checked against a float64 product on the host (an independent
reference: the q4_0 blocks ggml wrote are decoded here, by the format's definition).

    python -m workbench.capture.engines.ggml --ggml CHECKOUT --shapes 4096x4096,4096x14336 [--path mmvq]
    workbench capture run --out cap -- python -m workbench.capture.engines.ggml --ggml CHECKOUT --path mmv

``--path``: ggml's two GEMV paths for q4_0 (its ``mmvq_mode``): ``mmv`` (``GGML_VK_DISABLE_MMVQ``: the
``mul_mat_vec_q4_0_f32_f32`` shader dequantizes each weight to float and multiplies in float), ``mmvq``
(``GGML_VK_FORCE_MMVQ``: ``quantize_q8_1`` makes the vector int8 blocks, then ``mul_mat_vec_q4_0_q8_1_f32`` multiplies
with integer dot products), ``default`` (ggml's own choice per device and shape: on NVIDIA mmvq only where K > 4096).
ggml runs on Vulkan device 0 (``GGML_VK_VISIBLE_DEVICES``, set to 0 unless given: ggml skips a CPU device such as
lavapipe unless it is listed).

Tolerance per output: 2^-16 · Σ|w·x| (float32 sums in another order) and, on the mmvq path, 6 · sqrt(Σ w² δ²/12)
where δ is each vector block's int8 step (max|x| / 127): about 6 standard deviations of the vector's rounding. A
weight packed or decoded wrongly errs by about sqrt(Σ(w·x)²): it fails. Exit 0 when every shape matches, 1 when one
differs, 2 when ggml or its Vulkan device is missing (one line says which).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PATHS = {"mmv": {"GGML_VK_DISABLE_MMVQ": "1"}, "mmvq": {"GGML_VK_FORCE_MMVQ": "1"}, "default": {}}
KERNELS = {"mmv": ("mul_mat_vec_q4_0_f32_f32",), "mmvq": ("quantize_q8_1", "mul_mat_vec_q4_0_q8_1_f32")}
BLOCK = 32                 # q4_0: weights per block
BLOCK_BYTES = 18           # a float16 scale and 16 bytes of nibbles
SOURCE = Path(__file__).with_name("ggml_gemv.cpp")


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """``"KxN,KxN"`` → [(K, N)]; K a multiple of 32. ValueError (one line) otherwise."""
    shapes = []
    for part in str(text).split(","):
        k, sep, n = part.strip().lower().partition("x")
        if not sep or not k.isdigit() or not n.isdigit() or int(k) % BLOCK or int(k) <= 0 or int(n) <= 0:
            raise ValueError(f"expected shapes KxN with K a positive multiple of {BLOCK} (q4_0 blocks), got {part!r}")
        shapes.append((int(k), int(n)))
    return shapes


def problem(k: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(w: n × k, x: k) float32, w scaled by 1/sqrt(k) so every output stays near 1."""
    rng = np.random.default_rng([seed, k, n])
    return ((rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32),
            rng.standard_normal(k).astype(np.float32))


def decode_q4_0(data: bytes, k: int, n: int) -> np.ndarray:
    """ggml's q4_0 blocks (row-major, k/32 blocks a row) → n × k float64: (nibble − 8) · d, low nibbles the block's
    first 16 weights, high nibbles the last 16."""
    blocks = np.frombuffer(data, np.uint8).reshape(n, k // BLOCK, BLOCK_BYTES)
    scale = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float64)
    nibbles = blocks[..., 2:]
    q = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1).astype(np.float64) - 8.0
    return (q * scale[..., None]).reshape(n, k)


def tolerance(w: np.ndarray, x: np.ndarray, path: str) -> np.ndarray:
    """Per output (module docstring)."""
    w = np.asarray(w, np.float64)
    x = np.asarray(x, np.float64)
    tol = 2.0**-16 * (np.abs(w) @ np.abs(x))
    if path != "mmv":
        step = np.repeat(np.abs(x).reshape(-1, BLOCK).max(axis=1) / 127.0, BLOCK)
        tol = tol + 6.0 * np.sqrt((w**2) @ (step**2) / 12.0)
    return tol


def run(shapes, *, path: str = "mmv", ggml_dir=None, seed: int = 0, echo=print) -> bool:
    """Build (or reuse) ggml and the program, run it for `shapes` [(K, N)] (q4_0 weights) on ggml's Vulkan device 0
    by `path`, check each output; True when every one matches. Raises toolchain.ggml.GgmlError / RuntimeError (one
    line) otherwise."""
    jobs = []
    for k, n in shapes:
        w, x = problem(k, n, seed)
        jobs.append(Job(f"{k}x{n}", "q4_0", w, x))
    return run_jobs(jobs, path=path, ggml_dir=ggml_dir, echo=echo)


@dataclass
class Job:
    """One matrix-vector product for ggml: weights `w` (N × K float32, quantized by ggml where `type` is q4_0),
    vector `x` (K), optional `bias` (N); `want`: the float64 reference where not the q4_0 decode's."""
    name: str
    type: str
    w: np.ndarray
    x: np.ndarray
    bias: np.ndarray | None = None
    want: np.ndarray | None = None


def field_jobs(seed: int = 0) -> list[Job]:
    """The field's ops ggml runs (`engines.field`): the linear layer (float32 weights and bias) and a 4-bit GEMV at
    the same shape (q4_0 weights)."""
    from .field import FEATURES, inputs, reference, weights
    w = weights(seed)
    _, v = inputs(seed)
    want = reference(w, *inputs(seed))["linear"].reshape(-1)
    q4w, q4x = problem(FEATURES, FEATURES, seed)
    return [Job("linear", "f32", w["linear.w"], v.reshape(-1), w["linear.b"], want),
            Job("q4gemv", "q4_0", q4w, q4x)]


def run_jobs(jobs, *, path: str = "mmv", ggml_dir=None, echo=print) -> bool:
    """`jobs` through ggml's program (see `run`); True when every output is within its tolerance."""
    from ...toolchain import ggml
    if path not in PATHS:
        raise ValueError(f"expected --path among {', '.join(PATHS)}, got {path!r}")
    ggml.setup(ggml_dir, progress=False)
    exe = ggml.program(SOURCE, ggml_dir)
    ok = True
    with tempfile.TemporaryDirectory(prefix="workbench-ggml-") as tmp:
        folder = Path(tmp)
        lines = []
        for i, job in enumerate(jobs):
            n, k = job.w.shape
            lines.append(f"{k} {n} {job.type} {int(job.bias is not None)}\n")
            np.ascontiguousarray(job.w, np.float32).tofile(folder / f"w{i}.f32")
            np.ascontiguousarray(job.x, np.float32).tofile(folder / f"x{i}.f32")
            if job.bias is not None:
                np.ascontiguousarray(job.bias, np.float32).tofile(folder / f"b{i}.f32")
        (folder / "shapes.txt").write_text("".join(lines))
        env = {**{k: v for k, v in os.environ.items() if k not in ("GGML_VK_DISABLE_MMVQ", "GGML_VK_FORCE_MMVQ")},
               **PATHS[path]}
        env.setdefault("GGML_VK_VISIBLE_DEVICES", "0")  # ggml skips CPU devices (lavapipe) unless listed
        done = subprocess.run([str(exe), str(folder)], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"ggml's program ended with status {done.returncode}: "
                               f"{(done.stderr or done.stdout).strip().splitlines()[-1:] or ['no output']}")
        for i, job in enumerate(jobs):
            n, k = job.w.shape
            got = np.fromfile(folder / f"y{i}.f32", np.float32).astype(np.float64)
            held = (folder / f"q{i}.bin").read_bytes()
            weights = decode_q4_0(held, k, n) if job.type == "q4_0" else \
                np.frombuffer(held, np.float32).reshape(n, k).astype(np.float64)
            want = job.want if job.want is not None else weights @ job.x.astype(np.float64) + \
                (0 if job.bias is None else job.bias.astype(np.float64))
            err = np.abs(got - want)
            bad = int((err > tolerance(weights, job.x, path if job.type == "q4_0" else "mmv")
                       + 1e-5 * (1 + np.abs(want)) * (job.want is not None)).sum())
            ok &= bad == 0
            echo(f"ggml {path} {job.name} ({job.type}, {k}x{n}): max |error| {err.max():.2e}, {bad} of {n} outputs "
                 "beyond tolerance")
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.capture.engines.ggml", description=__doc__.split("\n")[0])
    parser.add_argument("--ggml", default=None, help="ggml or llama.cpp checkout (default $WORKBENCH_GGML)")
    parser.add_argument("--shapes", default="4096x4096", help="KxN,... (K: inputs, N: outputs; default 4096x4096)")
    parser.add_argument("--path", default="mmv", choices=tuple(PATHS), help="ggml's GEMV path (module docstring)")
    parser.add_argument("--net", choices=("field",), default=None,
                        help="field: the field's linear layer (float32 + bias) and a q4_0 GEMV of its shape "
                             "(`capture compare`), instead of --shapes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from ...toolchain import ggml
    try:
        if args.net == "field":
            return 0 if run_jobs(field_jobs(args.seed), path=args.path, ggml_dir=args.ggml) else 1
        return 0 if run(parse_shapes(args.shapes), path=args.path, ggml_dir=args.ggml, seed=args.seed) else 1
    except (ggml.GgmlError, RuntimeError, ValueError) as error:
        print(f"ggml: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
