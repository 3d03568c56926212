"""The field's GEMVs through torch, beside the GEMV suite's rows (`workbench bench q4-gemv --field`,
``bench_suite(field=True)``; issue 43, item 1): on a host whose torch sees CUDA,

* ``torch-int4-tinygemm`` — torch's own ``aten._weight_int4pack_mm``, the op torchao's int4 weight-only layout
  (``Int4WeightOnlyConfig``, tinygemm) calls on CUDA: bf16 activations, the weight packed by
  ``_convert_weight_to_int4pack`` (innerKTiles 8), bf16 scale and zero per group (32 / 64 / 128) and output row;
* ``cublas-fp16`` — ``F.linear`` in fp16 (cuBLAS's GEMV), the GEMV whose arithmetic is trivial;

at M = 1 and the suite's shapes. Without CUDA torch one row per impl says why (``status`` "skipped", ``reason``).

Timing: a second API's clock — no Vulkan path can time a CUDA kernel. The calls of one sample are captured in a
CUDA graph (as many calls as the Vulkan suite puts in one recording, its ``repeats_for``, or the rotation's copies) and
CUDA events are recorded around its replay; a sample is the time per call (``measure.sample_callable`` with
``repeats``), after ``measure.GPU_WARMUP_S`` of replays (the clock's ramp; ``SHORT_WARMUP_S`` while the GPU is kept
busy), median / p10 / p90 of the samples. Where a graph cannot be captured, the calls run eagerly between the
events (``timer`` says which). Regimes as ``measure.cache``'s: hot = one set of operands called again and again
(every decode matrix fits an H200's L2); cold = one copy of the operands per call, as many copies as span
max(ROTATE_FACTOR x the L2 (``torch.cuda.get_device_properties().L2_cache_size``), ``MIN_ROTATED_BYTES``) — the
field's own method (../shared/reference/field-2026-11.md).

Traffic (``bytes``), what each op reads and writes once: int4 — the weight N·K/2, scales and zeros N·K/group · 4
(two bf16), activations M·K · 2 and output M·N · 2 (bf16); fp16 — N·K · 2 + M·K · 2 + M·N · 2. Beside the row:
``copy_GBps`` / ``copy_fraction`` (the suite's Vulkan copy at the same traffic in the same regime,
``CopyAtTraffic.annotate``, where the suite passes it) and ``cuda_copy_median_us`` / ``cuda_copy_GBps`` /
``cuda_copy_fraction`` (torch's ``copy_`` of a buffer of half the bytes on CUDA, rotated the same way and timed the
same way: the field's own "% of copy").

Correctness: every timed output (the first and last call's) against a float64 reference on the host — the
dequantized weight ((q − 8) · scale + zero, from the bf16 values stored) or the fp16 weight, times the activations
as stored — within ``tolerance`` per output: a · sqrt(Σ(w·x)²) + b · |y|, the first term about 8 standard
deviations of independent roundings of each product's weight, the second the output's (and partial sums') rounding:
int4 a = 2^-5, b = 2^-7 (tinygemm dequantizes each weight to bf16, unit roundoff 2^-8, and writes bf16), fp16
a = 2^-8, b = 2^-8 (exact products, fp32 sums, fp16 partial sums where cuBLAS reduces split K in fp16, fp16
output). A weight packed wrongly (nibbles swapped, groups misplaced) errs by about sqrt(Σ(w·x)²) itself: it fails.
On the CPU (tests) the same rows come from torch's CPU int4 op (``_weight_int4pack_mm_for_cpu``), wall-clock timed.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ..measure import measurement_row
from ..measure.cache import ROTATE_FACTOR, MAX_COPIES, Rotation
from ..measure.method import sample_callable, sampling
from ..measure.warmup import GPU_WARMUP_S, IDLE_S, SHORT_WARMUP_S

INT4 = "torch-int4-tinygemm"
FP16 = "cublas-fp16"
IMPLS = (INT4, FP16)
INNER_K_TILES = 8                # tinygemm's packing (the field's measurement used 8)
MIN_ROTATED_BYTES = 512 * 2**20  # a cold rotation spans at least this much (the field's measurement: 512 MiB)
GROUP_SIZES = (32, 64, 128)
INT4_TOL = (2.0**-5, 2.0**-7)    # (× sqrt(Σ(w·x)²), × |y|): module docstring
FP16_TOL = (2.0**-8, 2.0**-8)


def available() -> tuple[bool, str]:
    """(True, "") where torch sees a CUDA GPU, else (False, why not)."""
    try:
        import torch
    except ImportError as error:
        return False, f"the field's GEMVs need torch with CUDA; torch is not installed ({error})"
    if not torch.cuda.is_available():
        return False, f"the field's GEMVs need a CUDA GPU; torch {torch.__version__} sees none " \
                      f"(torch.cuda.is_available() is False)"
    return True, ""


@dataclass(frozen=True)
class FieldCase:
    """One field GEMV: `impl` (IMPLS), the suite's shape (model, layer, k, n), `group_size` (int4; None for fp16),
    `m` rows of activations."""

    impl: str
    model: str
    layer: str
    k: int
    n: int
    group_size: int | None = None
    m: int = 1

    def __post_init__(self):
        if self.impl not in IMPLS:
            raise ValueError(f"a field GEMV is one of {', '.join(IMPLS)}, got {self.impl!r}")
        if self.impl == INT4 and (self.group_size not in GROUP_SIZES or self.k % self.group_size
                                  or self.k % (INNER_K_TILES * 16) or self.n % 8):
            raise ValueError(f"torch's int4 GEMV needs group 32/64/128 dividing K, K a multiple of "
                             f"{INNER_K_TILES * 16} and N of 8; got K={self.k} N={self.n} group={self.group_size}")

    @property
    def bytes_moved(self) -> int:
        n, k, m = self.n, self.k, self.m
        if self.impl == INT4:
            return n * k // 2 + n * (k // self.group_size) * 4 + m * k * 2 + m * n * 2
        return n * k * 2 + m * k * 2 + m * n * 2

    @property
    def macs(self) -> int:
        return self.m * self.n * self.k

    @property
    def variant(self) -> str:
        return f"tinygemm_g{self.group_size}_ikt{INNER_K_TILES}_bf16" if self.impl == INT4 else "F.linear_fp16"

    def labels(self) -> dict:
        return {"impl": self.impl, "model": self.model, "layer": self.layer, "m": self.m, "k": self.k, "n": self.n,
                "group_size": self.group_size if self.impl == INT4 else np.nan,
                "shape": f"{self.m}x{self.k}->{self.n}", "variant": self.variant}


def cases(shapes, group_sizes=GROUP_SIZES, ms=(1,)) -> list[FieldCase]:
    """The field's GEMVs at the suite's `shapes` (objects with model, layer, k, n): int4 at each of `group_sizes`
    and fp16 once, at each of `ms`; shapes int4 cannot take (K not a multiple of 128) get fp16 alone."""
    out = []
    for shape in shapes:
        for m in ms:
            for group in group_sizes:
                try:
                    out.append(FieldCase(INT4, shape.model, shape.layer, shape.k, shape.n, group, m))
                except ValueError:
                    pass
            out.append(FieldCase(FP16, shape.model, shape.layer, shape.k, shape.n, None, m))
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Operands and the float64 reference
# ---------------------------------------------------------------------------------------------------------------------

def quantize(w, group: int):
    """torch's tinygemm quantization of an [N, K] float weight (torch's own test helper's numerics): q [N, K] int32
    in 0..15 and scales_and_zeros [K/group, N, 2] bf16, the weight being (q − 8) · scale + zero."""
    import torch
    n, k = w.shape
    g = w.reshape(n, k // group, group).float()
    lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    scales = (hi - lo).clamp(min=1e-6) / 15
    zeros = lo + scales * 8
    q = ((g - lo) / scales).round().clamp(0, 15).to(torch.int32).reshape(n, k)
    sz = torch.stack([scales.squeeze(-1), zeros.squeeze(-1)], -1).transpose(0, 1).contiguous().to(torch.bfloat16)
    return q, sz


def dequantize(q, scales_and_zeros, group: int) -> np.ndarray:
    """The float64 weight [N, K] the int4 op computes with: (q − 8) · scale + zero from the stored bf16 values."""
    qd = q.double().numpy()
    sz = scales_and_zeros.float().double().numpy()  # [K/g, N, 2]
    scale = np.repeat(sz[:, :, 0].T, group, axis=1)
    zero = np.repeat(sz[:, :, 1].T, group, axis=1)
    return (qd - 8.0) * scale + zero


def pack(q, where: str):
    """The int4 weight in the layout torch's op for `where` ("cuda" / "cpu") takes."""
    import torch
    if where == "cpu":
        return torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.contiguous(), INNER_K_TILES)
    packed = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
    return torch.ops.aten._convert_weight_to_int4pack(packed.to(where), INNER_K_TILES)


@dataclass
class Problem:
    """One case's operands on the host and its float64 reference: `operands` (tensors the op takes, on the host),
    `want` [M, N] float64, `tol` [M, N] the bound per output."""

    case: FieldCase
    operands: dict
    want: np.ndarray
    tol: np.ndarray


def problem(case: FieldCase, seed: int = 0) -> Problem:
    """Random weights and activations of `case` (torch.randn, `seed`), quantized as the op takes them, and the
    float64 reference of the module docstring."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(case.n, case.k, generator=gen) * 0.05
    if case.impl == INT4:
        x = torch.randn(case.m, case.k, generator=gen).to(torch.bfloat16)
        q, sz = quantize(w, case.group_size)
        weight = dequantize(q, sz, case.group_size)
        operands, (a, b) = {"x": x, "q": q, "scales_and_zeros": sz}, INT4_TOL
    else:
        x = torch.randn(case.m, case.k, generator=gen).to(torch.float16)
        w16 = w.to(torch.float16)
        weight = w16.double().numpy()
        operands, (a, b) = {"x": x, "w": w16}, FP16_TOL
    xd = x.double().numpy()
    want = xd @ weight.T
    tol = a * np.sqrt((xd**2) @ (weight**2).T) + b * np.abs(want)
    return Problem(case, operands, want, tol)


def compare(got, prob: Problem) -> dict:
    """correct / max_abs_diff / tolerance (the largest bound) of one output against the reference."""
    g = got.detach().double().cpu().numpy()
    if g.shape != prob.want.shape or not np.all(np.isfinite(g)):
        return {"correct": False, "max_abs_diff": float("inf"), "tolerance": float(prob.tol.max())}
    diff = np.abs(g - prob.want)
    return {"correct": bool(np.all(diff <= prob.tol)), "max_abs_diff": float(diff.max()),
            "tolerance": float(prob.tol.max())}


def on_device(prob: Problem, where: str) -> dict:
    """The operands of `prob` placed on `where` in the form the op takes (the int4 weight packed there)."""
    ops = prob.operands
    if prob.case.impl == INT4:
        return {"x": ops["x"].to(where), "w": pack(ops["q"], where),
                "scales_and_zeros": ops["scales_and_zeros"].to(where)}
    return {"x": ops["x"].to(where), "w": ops["w"].to(where)}


def call(case: FieldCase, t: dict, where: str):
    """One call of the field's op on the operands `t` (from `on_device`)."""
    import torch
    if case.impl == INT4:
        op = (torch.ops.aten._weight_int4pack_mm_for_cpu if where == "cpu" else torch.ops.aten._weight_int4pack_mm)
        return op(t["x"], t["w"], case.group_size, t["scales_and_zeros"])
    return torch.nn.functional.linear(t["x"], t["w"])


# ---------------------------------------------------------------------------------------------------------------------
# Regimes and timing
# ---------------------------------------------------------------------------------------------------------------------

def l2_bytes(where: str) -> tuple[int, str]:
    """(bytes, source) of the last-level cache in front of `where`'s memory."""
    if where != "cpu":
        import torch
        return int(torch.cuda.get_device_properties(torch.device(where)).L2_cache_size), \
            "torch.cuda L2_cache_size"
    from ..measure.cache import _cpu_llc_bytes
    return (_cpu_llc_bytes() or 32 * 2**20), "the host CPU's last-level cache (sysfs)"


def rotation_for(working_set: int, regime: str, where: str, *, quick: bool = False) -> Rotation:
    """The copies of a working set a CUDA measurement rotates (module docstring), as `measure.cache.Rotation`."""
    llc, source = l2_bytes(where)
    if regime == "hot":
        return Rotation("hot", 1, int(working_set), llc, source)
    span = max(ROTATE_FACTOR * llc, MIN_ROTATED_BYTES)
    needed = math.ceil(span / working_set)
    if quick:
        return Rotation("cold", max(2, min(4, needed)), int(working_set), llc, source, quick=True)
    return Rotation("cold", max(2, min(MAX_COPIES, needed)), int(working_set), llc, source)


def fixed_repeats(bytes_moved: int, quick: bool) -> int:
    """Calls per sample where no suite says (`field_rows` standalone): 2 quick, else 20 (the GEMV suite's most)."""
    return 2 if quick else 20


class _Clock:
    """The warm-up a sample set needs: GPU_WARMUP_S on an idle GPU, SHORT_WARMUP_S while kept busy (measure's)."""

    def __init__(self):
        self.last = None

    def warmup_s(self, where: str) -> float:
        if where == "cpu":
            return 0.0
        idle = self.last is None or time.perf_counter() - self.last >= IDLE_S
        return GPU_WARMUP_S if idle else SHORT_WARMUP_S

    def busy(self):
        self.last = time.perf_counter()


def timed(calls, where: str, *, quick: bool, clock: _Clock):
    """Sample `calls` (zero-argument callables, one operation each, run in order as one sample): a CUDA graph of
    them replayed between CUDA events on CUDA, wall clock on the CPU. Returns (samples ns per call, timer, outputs
    of the last sample)."""
    kw = dict(sampling(quick), warmup_s=clock.warmup_s(where), repeats=len(calls))
    kw.pop("warmup", None)
    outs = [None] * len(calls)
    if where == "cpu":
        def run():
            for i, c in enumerate(calls):
                outs[i] = c()
        samples = sample_callable(run, **kw)
        clock.busy()
        return samples, "wall clock", outs
    import torch
    sync = torch.cuda.synchronize
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for c in calls:  # warm the op's own state (workspaces) before capture
            c()
    torch.cuda.current_stream().wait_stream(stream)
    sync()
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i, c in enumerate(calls):
                outs[i] = c()
        run, timer = graph.replay, f"cuda events (a CUDA graph of {len(calls)} calls)"
    except RuntimeError:
        def run():
            for i, c in enumerate(calls):
                outs[i] = c()
        timer = f"cuda events ({len(calls)} eager calls)"
    samples = sample_callable(run, sync=sync, cuda_events=True, **kw)
    sync()
    clock.busy()
    return samples, timer, outs


def _copy_bytes(bytes_moved: int) -> int:
    from .copy import copy_bytes_for
    return copy_bytes_for(bytes_moved)


def cuda_copy(bytes_moved: int, regime: str, where: str, *, quick: bool, clock: _Clock,
              repeats_for=fixed_repeats) -> dict:
    """torch's copy_ of a buffer of half `bytes_moved` (read once, written once), rotated and timed as the kernels
    are: {cuda_copy_median_us, cuda_copy_p10_us, cuda_copy_p90_us, cuda_copy_GBps, cuda_copy_timer}."""
    import torch
    nbytes = _copy_bytes(bytes_moved)
    rot = rotation_for(2 * nbytes, regime, where, quick=quick)
    pairs = [(torch.empty(nbytes // 4, dtype=torch.int32, device=where).random_(-1000, 1000),
              torch.empty(nbytes // 4, dtype=torch.int32, device=where)) for _ in range(rot.copies)]
    n = max(repeats_for(2 * nbytes, quick), rot.copies)
    calls = [lambda s=s, d=d: d.copy_(s) for s, d in (pairs[i % len(pairs)] for i in range(n))]
    samples, timer, _ = timed(calls, where, quick=quick, clock=clock)
    a = np.asarray(samples) / 1e3
    median = float(np.median(a))
    del pairs, calls
    return {"cuda_copy_median_us": median, "cuda_copy_p10_us": float(np.percentile(a, 10)),
            "cuda_copy_p90_us": float(np.percentile(a, 90)),
            "cuda_copy_GBps": 2 * nbytes / median / 1e3 if median > 0 else np.nan, "cuda_copy_timer": timer}


def measure_case(case: FieldCase, prob: Problem, regime: str, where: str, env: dict, *, quick: bool,
                 clock: _Clock, copy_cache: dict | None = None, repeats_for=fixed_repeats) -> dict:
    """One row: `case` timed in `regime` on `where`, checked against `prob`'s reference, the CUDA copy beside it."""
    import torch
    rot = rotation_for(case.bytes_moved, regime, where, quick=quick)
    sets = [on_device(prob, where)]
    for _ in range(rot.copies - 1):  # one copy of the operands per call (the same data: every output is checked)
        sets.append({name: t.clone() for name, t in sets[0].items()})
    n = max(repeats_for(case.bytes_moved, quick), rot.copies)
    calls = [lambda t=sets[i % len(sets)]: call(case, t, where) for i in range(n)]
    samples, timer, outs = timed(calls, where, quick=quick, clock=clock)
    checked = compare(outs[-1], prob)
    if checked["correct"] and len(outs) > 1:
        checked = compare(outs[0], prob)
    del sets, calls, outs
    row = measurement_row(call_name(case), env, samples, bytes_moved=case.bytes_moved, macs=case.macs,
                          **case.labels(), repeats=n, timer=timer, status="ok", reason="", **checked,
                          exact=checked["correct"], torch_device=torch_device_name(where),
                          torch_version=torch.__version__, **rot.columns())
    if where != "cpu":
        copy_cache = {} if copy_cache is None else copy_cache
        key = (_copy_bytes(case.bytes_moved), regime)
        if key not in copy_cache:
            copy_cache[key] = cuda_copy(case.bytes_moved, regime, where, quick=quick, clock=clock,
                                        repeats_for=repeats_for)
        figures = copy_cache[key]
        row.update(figures, cuda_copy_fraction=figures["cuda_copy_median_us"] / row["median_us"])
    else:
        row.update(cuda_copy_median_us=np.nan, cuda_copy_GBps=np.nan, cuda_copy_fraction=np.nan)
    return row


def call_name(case: FieldCase) -> str:
    return "aten._weight_int4pack_mm" if case.impl == INT4 else "F.linear (cuBLAS)"


def torch_device_name(where: str) -> str:
    if where == "cpu":
        return "cpu"
    import torch
    return torch.cuda.get_device_name(torch.device(where))


def skipped_rows(todo, reason: str, env: dict) -> list[dict]:
    """One row per impl of `todo` saying why none was measured."""
    seen, rows = set(), []
    for case in todo:
        if case.impl not in seen:
            seen.add(case.impl)
            rows.append({"kernel": call_name(case), **case.labels(), "status": "skipped", "reason": reason, **env})
    return rows


def field_rows(todo, *, caches=("cold",), quick: bool = False, env: dict | None = None, copies=None,
               where: str | None = None, seed: int = 0, repeats_for=fixed_repeats) -> list[dict]:
    """Rows of the field's GEMVs `todo` (FieldCase list, `cases`) in each regime of `caches`: on CUDA (`where`
    default "cuda" where available; "cpu" runs torch's CPU ops, wall-clock, for tests), each annotated with the
    suite's Vulkan copy at its traffic where `copies` (a `CopyAtTraffic` of this run) is given; without CUDA (and
    `where` not "cpu") one skipped row per impl. `repeats_for(bytes, quick)`: the calls per sample (the suite's
    dispatches per recording)."""
    env = dict(env or {})
    if where is None:
        ok, why = available()
        if not ok:
            return skipped_rows(todo, why, env)
        where = "cuda"
    rows, copy_cache, clock = [], {}, _Clock()
    prob = None
    for case in todo:
        if prob is None or prob.case != case:
            prob = problem(case, seed)
        for regime in caches:
            try:
                row = measure_case(case, prob, regime, where, env, quick=quick, clock=clock, copy_cache=copy_cache,
                                   repeats_for=repeats_for)
            except (RuntimeError, NotImplementedError) as error:  # an op this torch build lacks
                first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                rows.append({"kernel": call_name(case), **case.labels(), "status": "failed", "cache": regime,
                             "reason": f"{call_name(case)} on {where}: {first}", **env})
                continue
            if copies is not None:
                row = copies.annotate(row, case.bytes_moved)
            rows.append(row)
    return rows
