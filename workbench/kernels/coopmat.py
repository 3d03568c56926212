"""Tensor cores through Vulkan: an int8 cooperative-matrix probe (the tensor-core roof) and the pointwise conv as an
int8 GEMM on cooperative matrices, both checked exactly against the host (numpy / torch).

    sizes = int8_sizes(device)           # [(M, N, K), ...] the driver offers for int8 x int8 -> int32, or []
    reason = unsupported_reason(device)  # None, or why not ("no cooperative matrix on this device (...)")
    df = bench_suite(device)             # probe rows (kernel "coopmat peak") + GEMM rows ("coopmat gemm") + torch

Shaders use VK_NV_cooperative_matrix (GL_NV_integer_cooperative_matrix): Debian 12's glslang 11 has no
GL_KHR_cooperative_matrix and its spirv-tools (2022.4) cannot assemble or validate SPV_KHR_cooperative_matrix, while
the NV extension compiles and validates here. NVIDIA drivers expose both; where only the KHR one is there, the suite
skips with that reason. The property lists of both are read (by the runtime: Device.cooperative_matrix_properties)
and reported.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..toolchain.shaders import compile_shader

TARGET_ENV = "vulkan1.3"
SUBGROUP = 32
WARPS_PER_GROUP = 4
SCOPE_SUBGROUP = 3
SLOTS = 64  # output slots of the probe (every subgroup computes the same answer)
PROBE_CHAINS = (1, 2, 3, 4, 6, 8, 12, 16)


def properties(device) -> pd.DataFrame:
    """Every (M, N, K, A, B, C, D, scope) the driver lists, from the NV and the KHR extension where present."""
    return pd.DataFrame(device.cooperative_matrix_properties(),
                        columns=["extension", "M", "N", "K", "A", "B", "C", "D", "scope"])


def int8_sizes(props: pd.DataFrame, extension: str = "NV") -> list[tuple[int, int, int]]:
    """(M, N, K) of every int8 x int8 -> int32 subgroup-scope entry of `extension`."""
    if not len(props):
        return []
    sel = props[(props["extension"] == extension) & (props["A"] == "sint8") & (props["B"] == "sint8")
                & (props["C"] == "sint32") & (props["D"] == "sint32") & (props["scope"] == SCOPE_SUBGROUP)]
    return sorted({(int(r.M), int(r.N), int(r.K)) for r in sel.itertuples()})


def unsupported_reason(device, props: pd.DataFrame | None = None) -> str | None:
    """None where the probe can run; else the sentence the chart and the rows carry."""
    f = device.info.features
    if not (f.get("cooperative_matrix_nv") or f.get("cooperative_matrix_khr")):
        return f"no cooperative matrix on this device ({device.info.name})"
    if not f.get("cooperative_matrix_nv"):
        return ("only VK_KHR_cooperative_matrix here; the workbench's shaders need VK_NV_cooperative_matrix "
                "(Debian 12's glslang lacks GL_KHR_cooperative_matrix)")
    for feature in ("shader_int8", "storage_buffer_8bit", "vulkan_memory_model"):
        if not f.get(feature):
            return f"cooperative matrices need {feature}, which {device.info.name} lacks"
    props = properties(device) if props is None else props
    if not int8_sizes(props):
        return f"{device.info.name} offers no int8 x int8 -> int32 cooperative matrix"
    return None


def coopmat_pipeline(device, shader: str, defines: dict, size, local_size):
    """The cached pipeline; the matrix size goes in as spec constants 3..5, or as defines (TM, TN, TK) where the
    shader sizes arrays and its local size with it (the staged GEMM)."""
    cache = device.__dict__.setdefault("_coopmat_pipelines", {})
    key = (shader, tuple(sorted(defines.items())), tuple(size), tuple(local_size))
    if key not in cache or cache[key].handle is None:
        spirv = compile_shader(shader, defines=defines, target_env=TARGET_ENV)
        m, n, k = size
        spec = {} if "TM" in defines else {3: m, 4: n, 5: k}
        cache[key] = device.pipeline(spirv, spec_constants=spec, local_size=local_size, name=shader)
    return cache[key]


# ----------------------------------------------------------------------------------------------------------------
# The probe
# ----------------------------------------------------------------------------------------------------------------


def padded_gemm(shape, block) -> tuple[int, int, int]:
    """A pointwise conv (N, Cin, Cout, H, W) as a GEMM (M, N, K) = (pixels, Cout, Cin), each padded to whole
    blocks (BM, BN, BK)."""
    nb, cin, cout, h, w = shape
    bm, bn, bk = block
    return -(-nb * h * w // bm) * bm, -(-cout // bn) * bn, -(-cin // bk) * bk

@dataclass(frozen=True)
class CoopmatPeakSpec:
    size: tuple[int, int, int]  # (M, N, K) of one multiply-add
    subgroups: int
    iterations: int
    chains: int = 4  # independent accumulator chains per subgroup (the MMA issue-rate sweep)
    warps: int = WARPS_PER_GROUP  # subgroups per workgroup

    def __post_init__(self):
        if self.chains not in PROBE_CHAINS:
            raise ValueError(f"chains must be one of {PROBE_CHAINS}, got {self.chains}")
        if self.warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"warps (subgroups per workgroup) must be 1, 2, 4, 8 or 16, got {self.warps}")
        if self.subgroups < 1 or self.subgroups % self.warps:
            raise ValueError(f"subgroups must be a positive multiple of {self.warps} (warps per workgroup), got "
                             f"{self.subgroups}")

    def macs(self) -> int:
        m, n, k = self.size
        return self.subgroups * self.iterations * self.chains * m * n * k

    def operands(self, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """A (M x K) and the CHAINS B_j (K x N), small values so that iterations x A x sum B_j fits int32."""
        m, n, k = self.size
        rng = np.random.default_rng(seed)
        return (rng.integers(-1, 2, (m, k), dtype=np.int8), rng.integers(-1, 2, (self.chains, k, n), dtype=np.int8))

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """What every subgroup stores, (CHAINS, M, N): iterations x A x B_j, wrapped to int32 as accumulators wrap."""
        exact = self.iterations * np.einsum("mk,jkn->jmn", a.astype(np.int64), b.astype(np.int64))
        return ((exact + 2**31) % 2**32) - 2**31


def probe_operand_buffer(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The probe's operand bytes: A (M x K) row-major, then each B_j column-major ((N, K) row-major), padded to 16."""
    flat = np.concatenate([a.reshape(-1), np.ascontiguousarray(b.transpose(0, 2, 1)).reshape(-1)]).astype(np.int8)
    return np.concatenate([flat, np.zeros((-flat.size) % 16, np.int8)])


def load_tile(buffer: np.ndarray, offset: int, stride: int, rows: int, cols: int, col_major: bool) -> np.ndarray:
    """coopMatLoadNV's addressing on the host (element units): (i, j) at offset + i·stride + j, or + j·stride + i
    column-major. The tests check the shaders' offsets and strides with it."""
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return buffer[offset + (j * stride + i if col_major else i * stride + j)]


def run_peak(device, spec: CoopmatPeakSpec, *, sample=None, seed: int = 0):
    """One probe dispatch; returns (gpu_ns, max |result - reference|). `sample(recording, repeats)`: a timer that
    submits the recording as often as it likes and returns its timing instead (the benchmarks' sampler)."""
    m, n, k = spec.size
    a, b = spec.operands(seed)
    operands = probe_operand_buffer(a, b)
    pipeline = coopmat_pipeline(device, "coopmat_peak", {"CHAINS": spec.chains}, spec.size, (SUBGROUP * spec.warps, 1, 1))
    slots = min(spec.subgroups, SLOTS)
    push = np.array([spec.iterations, slots], np.int32).tobytes()
    with device.buffer(nbytes=4 * slots * spec.chains * m * n, name="coopmat out") as out, \
            device.buffer(operands, name="coopmat operands") as ops, device.record("coopmat peak") as rec:
        rec.dispatch(pipeline, [out, ops], (spec.subgroups * SUBGROUP, 1, 1), push)
        if sample is not None:
            timing = sample(rec, 1)
        else:
            rec.submit()
            timing = rec.gpu_ns
        got = out.download(np.int32).reshape(slots, spec.chains, m, n)
    err = int(np.abs(got.astype(np.int64) - spec.reference(a, b)[None]).max())
    return timing, err


# ----------------------------------------------------------------------------------------------------------------
# The pointwise conv as a GEMM
# ----------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CoopmatGemmSpec:
    """One GEMM variant of the pointwise conv. `shmem`: the 2 x 2-subgroup shared-memory kernel of coopmat_gemm.glsl;
    `b_col`: B given transposed (N x K) and loaded column-major (direct kernel); `staged`: coopmat_gemm_staged.glsl
    (WM x WN subgroups, double-buffered shared memory, BK = KSTEPS·TK bytes of K a stage, B always transposed)."""
    shape: tuple  # conv shape (N, Cin, Cout, H, W)
    size: tuple[int, int, int]  # cooperative matrix (M, N, K)
    rm: int = 2
    rn: int = 2
    shmem: bool = False  # stage the workgroup's A and B blocks in shared memory (4 subgroups as 2 x 2)
    b_col: bool = False
    staged: bool = False
    wm: int = 2
    wn: int = 2
    ksteps: int = 2
    stages: int = 2  # staged only: shared buffers in the ring (3: global loads issued two stages ahead)
    pad: bool = True  # staged only: 16 bytes of padding per staged row (bank spread) or none (less shared memory)
    requant: bool = False  # staged only: the conv's own epilogue, int8 NHWC (4C) output instead of int32 C
    diagnostic: int = 0  # staged only: 1 = no global traffic in the loop, 2 = MMAs alone, 3 = MMAs, no C store
    #                      (wrong results by design)

    def __post_init__(self):
        if sum((self.shmem, self.b_col, self.staged)) > 1:
            raise ValueError(f"choose one of shmem, b_col, staged; got shmem={self.shmem}, b_col={self.b_col}, "
                             f"staged={self.staged}")
        if self.requant and (not self.staged or self.diagnostic or self.wm * self.wn % 2):
            raise ValueError("requant (the int8 conv epilogue) is for the staged kernel with an even number of "
                             "subgroups, without diagnostics")
        if self.requant and self.wm * self.wn // 2 * self.size[0] * (self.rn * self.size[1] // 4 + 1) > \
                self.stages * min(self.block[0], self.block[1]) * (self.block[2] // 16 + self.pad):
            raise ValueError(f"requant: half the subgroups' epilogue regions must fit one staging buffer "
                             f"({self.label})")
        if self.requant and 32 % (self.rn * self.size[1] // 4):
            raise ValueError(f"requant: a subgroup's 32 lanes must cover whole rows of RN·TN/4 = "
                             f"{self.rn * self.size[1] // 4} channel words")
        if self.stages not in (2, 3) or (self.stages == 3 and (self.diagnostic or not self.staged)):
            raise ValueError(f"stages must be 2 or 3 (3: staged, no diagnostics); got {self.stages}")
        if self.diagnostic not in (0, 1, 2, 3) or (self.diagnostic and not self.staged):
            raise ValueError(f"diagnostic must be 0, 1, 2 or 3 and is for the staged kernel; got {self.diagnostic} "
                             f"(staged={self.staged})")
        if self.staged:
            bm, bn, bk = self.block
            threads = 32 * self.wm * self.wn
            if (bm * bk // 16) % threads or (bn * bk // 16) % threads:
                raise ValueError(f"staged GEMM: {threads} threads must divide the A block's {bm * bk // 16} and the "
                                 f"B block's {bn * bk // 16} 16-byte chunks (block {bm}x{bn}x{bk})")

    @property
    def transposed_b(self) -> bool:
        """B travels as its transpose (N x K row-major)."""
        return self.b_col or self.staged

    @property
    def block(self) -> tuple[int, int, int]:
        """(BM, BN, BK) a workgroup owns per stage."""
        tm, tn, tk = self.size
        if self.staged:
            return self.wm * self.rm * tm, self.wn * self.rn * tn, self.ksteps * tk
        f = 2 if self.shmem else 1
        return f * tm * self.rm, max(f * tn * self.rn, 16), max(tk, 16)

    @property
    def gemm(self) -> tuple[int, int, int]:
        """(M, N, K) of the GEMM, padded to whole blocks: pixels, Cout, Cin."""
        return padded_gemm(self.shape, self.block)

    @property
    def label(self) -> str:
        if self.staged:
            bm, bn, bk = self.block
            return (f"staged {self.wm}x{self.wn}·RM{self.rm}·RN{self.rn}·BK{bk}" + ("" if self.pad else " unpadded")
                    + ("" if self.stages == 2 else f" {self.stages} stages")
                    + DIAGNOSTICS[self.diagnostic]
                    + (" int8 out" if self.requant else ""))
        return f"RM{self.rm}·RN{self.rn}" + (" shared" if self.shmem else "") + (" Bt" if self.b_col else "")

    def shader(self) -> tuple[str, dict]:
        if self.staged:
            tm, tn, tk = self.size
            return "coopmat_gemm_staged", {"WM": self.wm, "WN": self.wn, "RM": self.rm, "RN": self.rn,
                                           "KSTEPS": self.ksteps, "TM": tm, "TN": tn, "TK": tk,
                                           "DIAG": self.diagnostic, "EPILOGUE": int(self.requant),
                                           "PAD": int(self.pad), "STAGES": self.stages}
        return "coopmat_gemm", {"RM": self.rm, "RN": self.rn, "SHMEM": int(self.shmem), "B_COL": int(self.b_col)}

    def threads_per_group(self) -> int:
        return 32 * (self.wm * self.wn if self.staged else WARPS_PER_GROUP)

    def shared_bytes(self) -> int:
        bm, bn, bk = self.block
        if self.staged:  # two stages of padded A and Bt rows (the int8 epilogue reuses them)
            return self.stages * (bm + bn) * (bk + 16 * self.pad)
        return (bm * bk + bk * bn) if self.shmem else 0

    def macs(self) -> int:
        nb, cin, cout, h, w = self.shape
        return nb * h * w * cin * cout

    def bytes_moved(self) -> int:
        m, n, k = self.gemm
        return m * k + k * n + (m * n + 12 * n if self.requant else 4 * m * n)

    def subgroups(self) -> int:
        m, n, _ = self.gemm
        tm, tn, _ = self.size
        return (m // (tm * self.rm)) * (n // (tn * self.rn))

    def workgroups(self) -> int:
        return -(-self.subgroups() // (self.threads_per_group() // SUBGROUP))


def gemm_operands(spec: CoopmatGemmSpec, seed: int = 0, base=None):
    """Random int8 activation (pixels x Cin, NHWC order) and weight (Cin x Cout), zero-padded to the GEMM; `base`:
    the unpadded pair to pad instead (one random problem for every tile of a shape). B comes back as the kernel
    reads it: K x N, or its transpose N x K where `spec.transposed_b` (then `gemm_reference(a, b.T)`)."""
    nb, cin, cout, h, w = spec.shape
    m, n, k = spec.gemm
    if base is None:
        rng = np.random.default_rng(seed)
        base = (rng.integers(-128, 128, (nb * h * w, cin), dtype=np.int8),
                rng.integers(-128, 128, (cin, cout), dtype=np.int8))
    a = np.zeros((m, k), np.int8)
    a[:nb * h * w, :cin] = base[0]
    b = np.zeros((k, n), np.int8)
    b[:cin, :cout] = base[1]
    return a, (np.ascontiguousarray(b.T) if spec.transposed_b else b)


def gemm_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch._int_mm's answer, exact: a float64 BLAS product is exact here (every partial sum is an integer below
    K·2^14 < 2^53), and far faster on the host than an int64 matmul."""
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.int64)


def _time_dispatches(device, spec: CoopmatGemmSpec, bindings, push: bytes, label: str, *, sample, target_us: float):
    """Probe one dispatch of `spec`'s pipeline, then chain enough per submit to reach ~`target_us` and time the
    recording with `sample(recording, repeats)`, or run it once (`sample` None); returns (timing, repeats). The
    outputs hold the last run's results."""
    shader, defines = spec.shader()
    pipeline = coopmat_pipeline(device, shader, defines, spec.size, (spec.threads_per_group(), 1, 1))
    global_size = (spec.workgroups() * spec.threads_per_group(), 1, 1)
    with device.record(f"{label} probe") as probe:
        probe.dispatch(pipeline, bindings, global_size, push)
        probe.submit()
        probe_ns = probe.submit()[0].gpu_ns or 1.0
    repeats = int(min(200, max(1, target_us * 1e3 // probe_ns))) if sample is not None else 1
    with device.record(label) as rec:
        for _ in range(repeats):
            rec.dispatch(pipeline, bindings, global_size, push)
        if sample is not None:
            return sample(rec, repeats), repeats
        rec.submit()
        return rec.gpu_ns, repeats


def run_gemm(device, spec: CoopmatGemmSpec, a, b, *, sample=None, target_us: float = 2000.0,
             expected: np.ndarray | None = None):
    """The GEMM on the device; returns (timing, max |C - reference|, repeats). `expected`: the unpadded product
    (pixels x Cout), computed once per shape; the padding of C must hold 0."""
    m, n, k = spec.gemm
    push = np.array([m, n, k], np.uint32).tobytes()
    with device.buffer(nbytes=4 * m * n, name="gemm C") as c, device.buffer(a, name="gemm A") as abuf, \
            device.buffer(b, name="gemm B") as bbuf:
        timing, repeats = _time_dispatches(device, spec, [c, abuf, bbuf], push, "coopmat gemm", sample=sample,
                                           target_us=target_us)
        got = c.download(np.int32).reshape(m, n)
    if spec.diagnostic:  # wrong by design: nothing to check
        return timing, None, repeats
    if expected is None:
        full = gemm_reference(a, b.T if spec.transposed_b else b)
        return timing, int(np.abs(got.astype(np.int64) - full).max()), repeats
    rows, cols = expected.shape
    err = int(np.abs(got[:rows, :cols].astype(np.int64) - expected).max())
    padding = max(int(np.abs(got[rows:]).max(initial=0)), int(np.abs(got[:, cols:]).max(initial=0)))
    return timing, max(err, padding), repeats


def conv_parameters(cout: int, n: int, seed: int = 2):
    """Per-output-channel weight scales U[0.005, 0.015] and bias U[-1, 1] as the conv suite draws them, zero-padded
    to the GEMM's N."""
    rng = np.random.default_rng(seed)
    scales = np.zeros(n, np.float32)
    bias = np.zeros(n, np.float32)
    scales[:cout] = rng.uniform(0.005, 0.015, cout)
    bias[:cout] = rng.uniform(-1.0, 1.0, cout)
    return scales, bias


def conv_reference(exact: np.ndarray, weight_sums, scales, bias, qparams) -> np.ndarray:
    """The int8 conv output (pixels x Cout) from the exact accumulators (pixels x Cout), through the conv's own
    reference epilogue (`conv_pw.reference_requantize`, the shader's fp32 operations in order)."""
    from .conv_pw import reference_requantize
    pixels, cout = exact.shape
    acc = exact.T.reshape(1, cout, pixels, 1)  # (N, C, H, W) with every pixel on one axis
    q = reference_requantize(acc, weight_sums[:cout], scales[:cout], bias[:cout], qparams)
    return q.reshape(cout, pixels).T


def run_conv(device, spec: CoopmatGemmSpec, a, bt, *, expected: np.ndarray, qparams=None, sample=None,
             target_us: float = 2000.0, seed: int = 2):
    """The pointwise conv on cooperative matrices with its int8 epilogue (EPILOGUE = 1): activation `a` (pixels x
    Cin, NHWC = 4C), weight `bt` (Cout x Cin), per-channel scales and bias from `conv_parameters`; returns (timing,
    max |out - reference| in LSB, repeats) against `conv_reference` of the exact accumulators `expected`."""
    import struct

    from .conv_pw import DEFAULT_QPARAMS
    from ..quant import inverse_scale
    if not spec.requant:
        raise ValueError("run_conv needs a spec with requant=True")
    qparams = qparams or DEFAULT_QPARAMS
    m, n, k = spec.gemm
    pixels, cout = expected.shape
    scales, bias = conv_parameters(cout, n, seed)
    sums = np.zeros(n, np.int32)
    sums[:cout] = bt[:cout].astype(np.int32).sum(axis=1)  # Σ_ic w[oc, ic] (the padding of K is zero)
    push = struct.pack("<IIIfifiii", m, n, k, np.float32(qparams.input_scale), int(qparams.input_zero_point),
                       inverse_scale(qparams.output_scale), int(qparams.output_zero_point), 1, 0)
    with device.buffer(nbytes=m * n, name="conv out") as out, device.buffer(a, name="conv A") as abuf, \
            device.buffer(bt, name="conv Bt") as bbuf, device.buffer(sums, name="weight sums") as sbuf, \
            device.buffer(scales, name="weight scales") as scbuf, device.buffer(bias, name="bias") as bibuf:
        timing, repeats = _time_dispatches(device, spec, [out, abuf, bbuf, sbuf, scbuf, bibuf], push,
                                           "coopmat conv", sample=sample, target_us=target_us)
        got = out.download(np.int8).reshape(m, n)[:pixels, :cout]
    ref = conv_reference(expected, sums, scales, bias, qparams)
    return timing, int(np.abs(got.astype(np.int64) - ref.astype(np.int64)).max()), repeats


# What each diagnostic build of the staged GEMM leaves in (label suffixes)
DIAGNOSTICS = {0: "", 1: " [no global traffic]", 2: " [MMAs only]", 3: " [MMAs, no C store]"}
