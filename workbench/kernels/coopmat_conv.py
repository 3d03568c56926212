"""The cooperative-matrix pointwise conv, second generation (`shaders/coopmat_conv.glsl`): a K pipeline of S stages
(S - 1 register sets of loads in flight), an int8 epilogue requantized in registers ("direct": int8 tiles stored
straight out; "sectors": through the subgroup's own region, 16-byte stores of whole sectors), and split-K (P slices
of int32 partial sums, added and requantized by `shaders/coopmat_splitk_reduce.glsl`).

    spec = CoopmatConvSpec((5, 512, 512, 128, 128), (16, 16, 32), stages=3, epilogue="sectors")
    timing, lsb, repeats = run(device, spec, a, bt, expected=exact_accumulators, sample=sampler)
    q = run_reduce(device, partials, weight_sums, scales, bias, qparams)   # the second dispatch alone, any device

Operands and references are those of `kernels.coopmat` (`gemm_operands`, `gemm_reference`, `conv_parameters`,
`conv_reference`): the same random problem checks the old and the new kernel.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from . import linear_global_size
from .coopmat import DIAGNOSTICS, SUBGROUP, CoopmatGemmSpec, coopmat_pipeline, conv_parameters, conv_reference, padded_gemm

EPILOGUES = ("int32", "direct", "sectors", "reduce")
# int32: the GEMM (C as torch._int_mm returns it); direct / sectors: the conv, requantized in the GEMM's registers;
# reduce: the conv as int32 partial sums (P = `splits` slices of K) + a second dispatch that adds and requantizes.
EPILOGUE_DEFINE = {"int32": 0, "reduce": 0, "direct": 2, "sectors": 3}
REDUCE_LOCAL_X = 64
REDUCE_SHADER = "coopmat_splitk_reduce"


@dataclass(frozen=True)
class CoopmatConvSpec:
    shader = "coopmat_conv"
    shape: tuple  # conv shape (N, Cin, Cout, H, W)
    size: tuple[int, int, int]  # cooperative matrix (TM, TN, TK)
    wm: int = 2
    wn: int = 2
    rm: int = 4
    rn: int = 4
    ksteps: int = 1
    stages: int = 3  # K tiles in flight + 1: global loads are issued stages - 1 stages ahead
    pad: int = 0  # uvec4 (16 bytes) of padding per staged row, 0..3 (False / True: 0 / 1)
    epilogue: str = "sectors"
    splits: int = 1  # split-K factor P (epilogue "reduce" only)
    diagnostic: int = 0  # 1 / 2 / 3 as in kernels.coopmat.DIAGNOSTICS (wrong results by design)
    vec: int = 1  # 16-byte chunks a thread loads contiguously from one row (1, 2, 4)
    frags: int = 1  # fragment sets: 2 = the next K step's fragments loaded while the current one multiplies

    def __post_init__(self):
        tm, tn, tk = self.size
        if int(self.pad) not in (0, 1, 2, 3):
            raise ValueError(f"pad (uvec4 of padding per staged row) must be 0..3, got {self.pad!r}")
        if self.vec not in (1, 2, 4) or self.frags not in (1, 2):
            raise ValueError(f"vec must be 1, 2 or 4 and frags 1 or 2; got vec={self.vec}, frags={self.frags}")
        if self.epilogue not in EPILOGUES:
            raise ValueError(f"epilogue must be one of {EPILOGUES}, got {self.epilogue!r}")
        if self.stages not in (2, 3, 4):
            raise ValueError(f"stages must be 2, 3 or 4 (K tiles in flight + 1), got {self.stages}")
        if not isinstance(self.splits, int) or self.splits < 1:
            raise ValueError(f"splits (the split-K factor) must be a positive integer, got {self.splits!r}")
        if self.splits > 1 and self.epilogue != "reduce":
            raise ValueError(f"split-K (splits={self.splits}) needs epilogue 'reduce' (partial sums added by a "
                             f"second dispatch), got epilogue {self.epilogue!r}")
        if self.diagnostic not in DIAGNOSTICS or (self.diagnostic and self.epilogue == "reduce"):
            raise ValueError(f"diagnostic must be one of {sorted(DIAGNOSTICS)} and is not for the 'reduce' "
                             f"epilogue; got {self.diagnostic} with {self.epilogue!r}")
        if min(self.wm, self.wn, self.ksteps) < 1 or self.wm * self.wn > 32:
            raise ValueError(f"wm, wn, ksteps must be >= 1 and wm·wn <= 32 subgroups; got wm={self.wm}, "
                             f"wn={self.wn}, ksteps={self.ksteps}")
        if self.epilogue in ("direct", "sectors") and (self.rm not in (1, 2, 4) or self.rn not in (1, 2, 4)
                                                      or tm * tn // SUBGROUP not in (4, 8)):
            raise ValueError(f"the register epilogue unrolls RM, RN in (1, 2, 4) and 4 or 8 elements a lane; got "
                             f"rm={self.rm}, rn={self.rn}, size={self.size}")
        if self.epilogue == "sectors" and tn != 16:
            raise ValueError(f"the 'sectors' epilogue stores 16-byte tile rows: TN must be 16, got {tn}")
        if (tk * self.ksteps) % 16 or tn % 4:
            raise ValueError(f"BK = ksteps·TK must be a multiple of 16 bytes and TN of 4; got size {self.size}, "
                             f"ksteps {self.ksteps}")
        bm, bn, bk = self.block
        threads = self.threads_per_group()
        if (bm * bk // 16) % threads or (bn * bk // 16) % threads:
            raise ValueError(f"{threads} threads must divide the A block's {bm * bk // 16} and the B block's "
                             f"{bn * bk // 16} 16-byte chunks (block {bm}x{bn}x{bk})")
        if (bm * bk // 16 // threads) % self.vec or (bn * bk // 16 // threads) % self.vec or (bk // 16) % self.vec:
            raise ValueError(f"vec={self.vec}: a thread's chunks per block ({bm * bk // 16 // threads} of A, "
                             f"{bn * bk // 16 // threads} of B) and a row's {bk // 16} chunks must be multiples of it")
        if self.splits > self.k_stages():
            raise ValueError(f"splits={self.splits} is more than the {self.k_stages()} K stages of BK={bk} "
                             f"(K = {self.gemm[2]})")

    @property
    def block(self) -> tuple[int, int, int]:
        tm, tn, tk = self.size
        return self.wm * self.rm * tm, self.wn * self.rn * tn, self.ksteps * tk

    @property
    def gemm(self) -> tuple[int, int, int]:
        """(M, N, K), padded to whole blocks: pixels, Cout, Cin."""
        return padded_gemm(self.shape, self.block)

    # what kernels.coopmat's helpers read from a spec (gemm_operands)
    transposed_b = True
    requant = property(lambda self: self.epilogue != "int32")

    def k_stages(self) -> int:
        return self.gemm[2] // self.block[2]

    @property
    def label(self) -> str:
        bk = self.block[2]
        out = {"int32": "int32 out", "direct": "int8 out, direct", "sectors": "int8 out, sectors",
               "reduce": f"int8 out, split-K {self.splits} + reduce"}[self.epilogue]
        return (f"conv2 {self.wm}x{self.wn}·RM{self.rm}·RN{self.rn}·BK{bk} S{self.stages}"
                + ("" if not self.pad else " padded" if int(self.pad) == 1 else f" pad{int(self.pad)}")
                + (f" vec{self.vec}" if self.vec > 1 else "") + (" frag-prefetch" if self.frags == 2 else "")
                + f" {out}" + DIAGNOSTICS[self.diagnostic])

    def defines(self) -> dict:
        tm, tn, tk = self.size
        return {"WM": self.wm, "WN": self.wn, "RM": self.rm, "RN": self.rn, "KSTEPS": self.ksteps, "TM": tm,
                "TN": tn, "TK": tk, "STAGES": self.stages, "PAD": int(self.pad), "VEC": self.vec, "FRAGS": self.frags,
                "EPILOGUE": EPILOGUE_DEFINE[self.epilogue], "DIAG": self.diagnostic}

    def threads_per_group(self) -> int:
        return SUBGROUP * self.wm * self.wn

    def workgroups(self) -> int:
        m, n, _ = self.gemm
        bm, bn, _ = self.block
        return (m // bm) * (n // bn)

    def shared_bytes(self) -> int:
        """The staging buffers (or the sectors epilogue's regions, if larger) + the coordinate table."""
        bm, bn, bk = self.block
        tm, tn, _ = self.size
        staging = 2 * (bm + bn) * (bk + 16 * self.pad)
        if self.epilogue == "sectors":
            staging = max(staging, bm * bn)
        return staging + (4 * tm * tn if self.epilogue in ("direct", "sectors") else 0)

    def macs(self) -> int:
        nb, cin, cout, h, w = self.shape
        return nb * h * w * cin * cout

    def bytes_moved(self) -> int:
        m, n, k = self.gemm
        operands = m * k + k * n
        if self.epilogue == "int32":
            return operands + 4 * m * n
        if self.epilogue == "reduce":  # partials written, read back; int8 out; parameters
            return operands + 8 * self.splits * m * n + m * n + 12 * n
        return operands + m * n + 12 * n

    def push_constants(self, qparams=None) -> bytes:
        m, n, k = self.gemm
        head = struct.pack("<IIII", m, n, k, self.splits)
        if self.epilogue in ("int32", "reduce"):
            return head
        return head + _qparam_bytes(qparams)


def load_chunks(spec: CoopmatConvSpec, tid: int, operand: str = "A") -> list[tuple[int, int]]:
    """(row, 16-byte chunk of the row) of every global load thread `tid` issues for one stage of `operand` ("A" or
    "B"): the shader's CHUNK_OF mapping, VEC contiguous chunks per thread. Over all threads it is a permutation of
    the block's chunks (the tests check it)."""
    bm, bn, bk = spec.block
    chunks, threads = bk // 16, spec.threads_per_group()
    per = (bm if operand == "A" else bn) * chunks // threads
    out = []
    for i in range(per):
        q = (tid + (i // spec.vec) * threads) * spec.vec + i % spec.vec
        out.append((q // chunks, q % chunks))
    return out


def bank_ways(addresses_bytes, phase: int = 8) -> int:
    """The worst n-way shared-memory bank conflict of 16-byte accesses at `addresses_bytes`, served `phase` lanes
    at a time (NVIDIA: 32 banks of 4 bytes, a 16-byte access per lane in phases of 8 lanes, as an ldmatrix row
    read or a uvec4 store is): per phase, the most distinct 16-byte lines that map to one bank. A model, not a
    measurement: it ranks the PAD options."""
    worst = 1
    addresses = list(addresses_bytes)
    for start in range(0, len(addresses), phase):
        banks: dict[int, set] = {}
        for a in addresses[start:start + phase]:
            for word in range(a // 4, a // 4 + 4):
                banks.setdefault(word % 32, set()).add(a // 16)
        worst = max(worst, max(len(v) for v in banks.values()))
    return worst


def fragment_bank_ways(spec: CoopmatConvSpec) -> int:
    """`bank_ways` of one fragment load from the staging buffer: 8 consecutive staged rows, 16 bytes each, at the
    row stride (CHUNKS + PAD) x 16 bytes."""
    stride = (spec.block[2] // 16 + int(spec.pad)) * 16
    return bank_ways([r * stride for r in range(8)])


def _qparam_bytes(qparams) -> bytes:
    from ..quant import inverse_scale
    return struct.pack("<fifiii", np.float32(qparams.input_scale), int(qparams.input_zero_point),
                       inverse_scale(qparams.output_scale), int(qparams.output_zero_point), 1, 0)


def _gemm_pipeline(device, spec):
    """Cached per device with kernels.coopmat's pipelines (sizes go in as defines: no spec constants)."""
    return coopmat_pipeline(device, spec.shader, spec.defines(), spec.size, (spec.threads_per_group(), 1, 1))


WG_SHADER = "coopmat_gemm_wg"
WG_SCOPE = 2  # VK_SCOPE_WORKGROUP_KHR


@dataclass(frozen=True)
class WorkgroupGemmSpec:
    """The GEMM / conv of `shaders/coopmat_gemm_wg.glsl` on workgroup-scope matrices (VK_NV_cooperative_matrix2):
    one BM x BN accumulator per workgroup of `threads` invocations, BK bytes of K a step; epilogue "int32" (C) or
    "int8" (the conv's requantized 4C output). Runs through `run` like CoopmatConvSpec."""
    shape: tuple  # conv shape (N, Cin, Cout, H, W)
    block: tuple = (256, 128, 64)
    threads: int = 256
    epilogue: str = "int32"
    diagnostic: int = 0  # 2 = MMAs only, 3 = MMAs without the store (wrong results by design)
    shader = WG_SHADER
    splits = 1
    stages = 1
    transposed_b = True
    requant = property(lambda self: self.epilogue != "int32")

    def __post_init__(self):
        if self.epilogue not in ("int32", "int8"):
            raise ValueError(f"the workgroup-scope GEMM's epilogue is 'int32' or 'int8', got {self.epilogue!r}")
        if self.diagnostic not in (0, 2, 3):
            raise ValueError(f"the workgroup-scope GEMM's diagnostic is 0, 2 or 3, got {self.diagnostic}")
        bm, bn, bk = self.block
        if min(bm, bn) < 16 or bk % 16 or self.threads % SUBGROUP:
            raise ValueError(f"block {self.block} / {self.threads} threads: BM, BN >= 16, BK a multiple of 16 and "
                             f"threads a multiple of {SUBGROUP}")

    @property
    def size(self) -> tuple:
        return self.block

    @property
    def gemm(self) -> tuple[int, int, int]:
        return padded_gemm(self.shape, self.block)

    @property
    def label(self) -> str:
        bm, bn, bk = self.block
        return (f"workgroup {bm}x{bn}x{bk} {self.threads} threads {self.epilogue} out (NV coopmat2)"
                + DIAGNOSTICS[self.diagnostic])

    def defines(self) -> dict:
        bm, bn, bk = self.block
        m, n, k = self.gemm  # compile-time sizes: the driver's tensor loads need them to be fast (the shader's note)
        return {"BM": bm, "BN": bn, "BK": bk, "THREADS": self.threads, "EPILOGUE": int(self.requant),
                "DIAG": self.diagnostic, "GM": m, "GN": n, "GK": k}

    def threads_per_group(self) -> int:
        return self.threads

    def workgroups(self) -> int:
        m, n, _ = self.gemm
        return (m // self.block[0]) * (n // self.block[1])

    def shared_bytes(self) -> int:
        return 0  # the driver's own staging (cooperativeMatrixWorkgroupScopeReservedSharedMemory)

    macs = CoopmatGemmSpec.macs
    bytes_moved = CoopmatGemmSpec.bytes_moved  # A, Bt, and C (int32) or the int8 output and its parameters
    push_constants = CoopmatConvSpec.push_constants


def workgroup_reason(device, spec: WorkgroupGemmSpec | None = None) -> str | None:
    """None where the device runs `spec` (or any int8 workgroup-scope GEMM); else why not, in one line."""
    f = device.info.features
    if not f.get("cooperative_matrix2_nv"):
        return f"{device.info.name} lacks VK_NV_cooperative_matrix2 (workgroup scope, flexible dimensions, tensor " \
               f"addressing): the portable subgroup-scope kernel stands"
    if not f.get("cooperative_matrix_khr"):
        return "VK_NV_cooperative_matrix2 needs VK_KHR_cooperative_matrix, which this device has not enabled"
    entries = [e for e in device.cooperative_matrix_flexible_properties()
               if (e["A"], e["B"], e["C"], e["D"]) == ("sint8", "sint8", "sint32", "sint32") and e["scope"] == WG_SCOPE]
    if spec is not None:
        bm, bn, bk = spec.block
        entries = [e for e in entries if e["invocations"] == spec.threads and not bm % e["M"] and not bn % e["N"]
                   and not bk % e["K"]]
    if not entries:
        return (f"{device.info.name} lists no int8 workgroup-scope entry"
                + ("" if spec is None else f" for {spec.threads} invocations that divides {spec.block}"))
    return None


def _reduce_pipeline(device):
    cache = device.__dict__.setdefault("_coopmat_pipelines", {})
    key = (REDUCE_SHADER,)
    if key not in cache or cache[key].handle is None:
        from ..toolchain.shaders import compile_shader
        cache[key] = device.pipeline(compile_shader(REDUCE_SHADER), local_size=(REDUCE_LOCAL_X, 1, 1),
                                     name=REDUCE_SHADER)
    return cache[key]


def reduce_push_constants(m: int, n: int, splits: int, qparams) -> bytes:
    return struct.pack("<IIII", m, n, splits, 0) + _qparam_bytes(qparams)


def _check_reduce_sizes(m: int, n: int, splits: int):
    if n % 16 or m < 1 or splits < 1:
        raise ValueError(f"the split-K reduce takes M >= 1 pixels, N a multiple of 16 channels and P >= 1 slices; "
                         f"got M={m}, N={n}, P={splits}")


def run_reduce(device, partials: np.ndarray, weight_sums, scales, bias, qparams) -> np.ndarray:
    """The split-K reduce + requantize dispatch alone: `partials` (P, M, N) int32 → int8 (M, N). N must be a
    multiple of 16; the per-channel arrays have N entries."""
    partials = np.ascontiguousarray(partials, dtype=np.int32)
    if partials.ndim != 3:
        raise ValueError(f"partials must be (P, M, N) int32, got shape {partials.shape}")
    splits, m, n = partials.shape
    _check_reduce_sizes(m, n, splits)
    for name, arr in (("weight_sums", weight_sums), ("scales", scales), ("bias", bias)):
        if np.asarray(arr).shape != (n,):
            raise ValueError(f"{name} must have N={n} entries, got shape {np.asarray(arr).shape}")
    pipeline = _reduce_pipeline(device)
    with device.buffer(nbytes=m * n, name="reduce out") as out, device.buffer(partials, name="partials") as pbuf, \
            device.buffer(np.asarray(weight_sums, np.int32), name="weight sums") as sbuf, \
            device.buffer(np.asarray(scales, np.float32), name="weight scales") as scbuf, \
            device.buffer(np.asarray(bias, np.float32), name="bias") as bibuf, device.record("split-K reduce") as rec:
        rec.dispatch(pipeline, [out, pbuf, sbuf, scbuf, bibuf], linear_global_size(device, m * n // 16,
                                                                                   REDUCE_LOCAL_X),
                     reduce_push_constants(m, n, splits, qparams))
        rec.submit()
        return out.download(np.int8).reshape(m, n)


def int8_reference(expected: np.ndarray, bt: np.ndarray, qparams=None, seed: int = 2) -> np.ndarray:
    """The int8 conv output (pixels x Cout) that every int8 epilogue must write for this problem (the weight sums,
    scales and bias `run` uses); the same for every tile of a shape, so a suite computes it once."""
    from .conv_pw import DEFAULT_QPARAMS
    pixels, cout = expected.shape
    scales, bias = conv_parameters(cout, cout, seed)
    sums = bt[:cout].astype(np.int32).sum(axis=1)
    return conv_reference(expected, sums, scales, bias, qparams or DEFAULT_QPARAMS)


def run(device, spec: CoopmatConvSpec, a: np.ndarray, bt: np.ndarray, *, expected: np.ndarray, qparams=None,
        sample=None, target_us: float = 2000.0, seed: int = 2, reference: np.ndarray | None = None):
    """The kernel on the device; returns (timing, max error, repeats). `a` (M x K) and `bt` (N x K) as
    `coopmat.gemm_operands(spec)` makes them; `expected`: the exact unpadded accumulators (pixels x Cout). Error:
    |C - expected| for "int32" (and 0 in the padding), LSB against `coopmat.conv_reference` for the int8 epilogues,
    None for diagnostic builds (`reference`: `int8_reference(...)`, when already computed). `sample(recording, repeats)` times the recording (one repeat = the GEMM, and the
    reduce for "reduce"); without it the recording runs once."""
    from .conv_pw import DEFAULT_QPARAMS
    qparams = qparams or DEFAULT_QPARAMS
    m, n, k = spec.gemm
    if a.shape != (m, k) or bt.shape != (n, k):
        raise ValueError(f"operands must be A {m}x{k} and Bt {n}x{k} for {spec.label}; got {a.shape} and {bt.shape}")
    pixels, cout = expected.shape
    gemm = _gemm_pipeline(device, spec)
    groups = (spec.workgroups() * spec.threads_per_group(), spec.splits, 1)
    scales, bias = conv_parameters(cout, n, seed)
    sums = np.zeros(n, np.int32)
    sums[:cout] = bt[:cout].astype(np.int32).sum(axis=1)
    owned = []
    try:
        def buf(data=None, nbytes=None, name=""):
            owned.append(device.buffer(data, name=name) if data is not None else device.buffer(nbytes=nbytes,
                                                                                              name=name))
            return owned[-1]
        abuf, bbuf = buf(a, name="conv A"), buf(bt, name="conv Bt")
        steps = []
        if spec.epilogue == "int32":
            out = buf(nbytes=4 * m * n, name="gemm C")
            steps.append((gemm, [out, abuf, bbuf], groups, spec.push_constants()))
        else:
            out = buf(nbytes=m * n, name="conv out")
            params = [buf(sums, name="weight sums"), buf(scales, name="weight scales"), buf(bias, name="bias")]
            if spec.epilogue == "reduce":
                partial = buf(nbytes=4 * spec.splits * m * n, name="split-K partials")
                steps.append((gemm, [partial, abuf, bbuf], groups, spec.push_constants()))
                steps.append((_reduce_pipeline(device), [out] + [partial] + params,
                              linear_global_size(device, m * n // 16, REDUCE_LOCAL_X),
                              reduce_push_constants(m, n, spec.splits, qparams)))
            else:
                steps.append((gemm, [out, abuf, bbuf] + params, groups, spec.push_constants(qparams)))
        timing, repeats = _time(device, steps, spec.label, sample=sample, target_us=target_us)
        if spec.epilogue == "int32":
            got = out.download(np.int32).reshape(m, n)
        else:
            got = out.download(np.int8).reshape(m, n)
    finally:
        for obj in reversed(owned):
            obj.close()
    if spec.diagnostic:
        return timing, None, repeats
    if spec.epilogue == "int32":
        err = int(np.abs(got[:pixels, :cout].astype(np.int64) - expected).max())
        padding = max(int(np.abs(got[pixels:]).max(initial=0)), int(np.abs(got[:, cout:]).max(initial=0)))
        return timing, max(err, padding), repeats
    ref = conv_reference(expected, sums, scales, bias, qparams) if reference is None else reference
    return timing, int(np.abs(got[:pixels, :cout].astype(np.int64) - ref.astype(np.int64)).max()), repeats


def _time(device, steps, label: str, *, sample, target_us: float):
    """One repeat = every step (barriers between); probe it once, then chain enough repeats for ~`target_us`."""
    with device.record(f"{label} probe") as probe:
        for pipeline, bindings, size, push in steps:
            probe.dispatch(pipeline, bindings, size, push)
        probe.submit()
        probe_ns = sum(t.gpu_ns or 0.0 for t in probe.submit()) or 1.0
    repeats = int(min(200, max(1, target_us * 1e3 // probe_ns))) if sample is not None else 1
    with device.record(label) as rec:
        for _ in range(repeats):
            for pipeline, bindings, size, push in steps:
                rec.dispatch(pipeline, bindings, size, push)
        if sample is not None:
            return sample(rec, repeats), repeats
        rec.submit()
        return rec.gpu_ns, repeats
