"""ET-VK's int8 cooperative-matrix linear beside the workbench's cooperative-matrix GEMM / conv and torch._int_mm,
at the same M, N, K, in one run (issue 25, item 2): `workbench bench coopmat-vs-etvk`.

One row per (GEMM shape, implementation), column `impl`:

- ``etvk`` — ET-VK's ``linear_dq8ca_q4gsw_coopmat_buffer_texture2d_half`` at its own tiling (the yaml's: WG tile
  128x64x32, 2x2 subgroups of 64 lanes, int8 MMA 16x16x16). Where the device cannot run it the row has status
  ``refused`` and the reason: what the device lacks (`linear_dq8ca_qw_coopmat.device_refusal`, from its
  properties), the cooperative-matrix shapes it lists, the C++ gate, and whether the checkout has ExecuTorch
  PR #22899 (ET-VK's own subgroup-32 work) — `pr_in_checkout`.
- ``etvk sg32`` / ``etvk sg32_aligned`` — the same template expanded at the workbench's 32-lane tilings (4x2
  subgroups, MMA 16x16x32; the second with a 16-byte-aligned B stride in shared memory).
- ``workbench gemm`` / ``workbench conv`` — the workbench's staged cooperative-matrix GEMM (int32 out) and the
  pointwise conv built on it (int8 out, fused requantize), each at a few of its best tiles (`GEMM_CANDIDATES`);
  `best` marks the fastest correct one per shape.
- ``torch._int_mm`` — on CUDA when the Vulkan device is NVIDIA's and torch has CUDA; else on the CPU, labelled so
  (`runs_on`).

What each computes: ET-VK's kernel is int8 activations x int4 group-symmetric weights, the weights unpacked to int8
in shared memory, int8 x int8 -> int32 cooperative matrices, dequantized per group to fp16. The suite gives it one
quant group (group_size = K: the closest it comes to a plain int8 GEMM, and its result is then exact against its
torch reference). ET-VK's kernel needs M % 128 == 0 (can_use_q4gsw_coopmat): at another M it runs on M padded to
128 with random rows, checked whole, and `gemm_run` says so; the workbench's kernels pad M to their block with zero
rows the same way. `ops` = 2·M·N·K of the GEMM asked for (not the padding) for every row, so TOP/s compare.

Every row: `correct` (against torch: the workbench's kernels and torch._int_mm against the exact product; ET-VK's
against its family's torch reference), `max_abs_diff`, `mismatch` (a `workbench.checks.mismatch` summary, "exact" when
right), the timing columns of `measure.measurement_row`, `ops`, `TOP/s`, `bytes` (each kernel's own traffic: ET-VK
reads 4-bit weights and writes fp16), device / driver / commit. `workbench bench coopmat-vs-etvk` writes
the chart (`viz.coopmat_vs_etvk_views.plot_coopmat_vs_etvk`) beside the table as ``coopmat_vs_etvk.png``.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..kernels.coopmat import (
    CoopmatGemmSpec,
    gemm_operands,
    gemm_reference,
    int8_sizes,
    properties,
    run_conv,
    run_gemm,
    unsupported_reason,
)
from ..measure import (
    Rows,
    environment,
    measurement_row,
    progress,
    sample_callable,
    sample_recording,
    sampling,
)
from ..vk.errors import driver_errors

PR = 22899
PR_NOTE = ("ExecuTorch PR #22899 ('[Vulkan] Enable coopmat for NVIDIA devices and do some tuning': drops the AMD "
           "check and handles 32-lane subgroups, with linear_dq8ca_q4gsw_coopmat_sg32_* variants, per its "
           "description)")
ETVK_TILE = (128, 64, 32)  # kDq8caQ4gswCoopmatDims: WG_TILE_M, WG_TILE_N, WG_TILE_K
ETVK_TILINGS = (("etvk", None), ("etvk sg32", "sg32"), ("etvk sg32_aligned", "sg32_aligned"))
ETVK_METHOD = ("ET-VK linear_dq8ca_q4gsw_coopmat (int8 act x int4 weight unpacked to int8; int8 x int8 -> int32 "
               "coopmat; fp16 out)")
CPP_GATE = ("ET-VK's C++ picks it only where can_use_q4gsw_coopmat holds: subgroup_size() == 64 and an AMD device "
            "(\"validated on AMD-RDNA only\"), M % 128, N % 64, K % 32 == 0")
IMPL_ORDER = ("etvk", "etvk sg32", "etvk sg32_aligned", "workbench gemm", "workbench conv", "torch._int_mm")

# The workbench's fastest staged tiles on the H200 (data/NVIDIA_H200/coopmat.csv): 2x2 subgroups of RM4·RN4 16x16
# tiles, one K step a stage, padded or not, two or three stages.
GEMM_CANDIDATES = ({"staged": True, "wm": 2, "wn": 2, "rm": 4, "rn": 4, "ksteps": 1},
                   {"staged": True, "wm": 2, "wn": 2, "rm": 4, "rn": 4, "ksteps": 1, "pad": False},
                   {"staged": True, "wm": 2, "wn": 2, "rm": 4, "rn": 4, "ksteps": 1, "pad": False, "stages": 3})
QUICK_CANDIDATES = ({"staged": True, "wm": 2, "wn": 2, "rm": 2, "rn": 2, "ksteps": 1},)


@dataclass(frozen=True)
class GemmShape:
    """An int8 GEMM C[M, N] = A[M, K] · B[K, N]; `origin` says where the shape comes from."""
    m: int
    n: int
    k: int
    origin: str = "square"

    def __post_init__(self):
        if min(self.m, self.n, self.k) < 1:
            raise ValueError(f"a GEMM shape needs M, N, K >= 1; given M={self.m}, N={self.n}, K={self.k}")

    @classmethod
    def from_conv(cls, shape) -> GemmShape:
        """A pointwise conv (N, Cin, Cout, H, W) as benchmarks.coopmat labels it ``NxCinxHxW→Cout``: M = N·H·W pixels,
        N = Cout, K = Cin."""
        if len(shape) != 5:
            raise ValueError(f"a conv shape is (N, Cin, Cout, H, W); given {tuple(shape)}")
        nb, cin, cout, h, w = (int(v) for v in shape)
        return cls(nb * h * w, cout, cin, f"conv {nb}x{cin}x{h}x{w}→{cout}")

    @property
    def label(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"

    @property
    def macs(self) -> int:
        return self.m * self.n * self.k

    def conv_shape(self) -> tuple:
        """The workbench kernels' conv shape for this GEMM: one image of M x 1 pixels, Cin = K, Cout = N."""
        return (1, self.k, self.n, self.m, 1)

    def etvk_padded_m(self) -> int:
        return -(-self.m // ETVK_TILE[0]) * ETVK_TILE[0]


# Multiples of ET-VK's tile: two squares and the H200's device-filling conv shapes (benchmarks.conv.filling_shapes
# there, as in coopmat.csv).
SHAPES = (GemmShape(1024, 1024, 1024), GemmShape(4096, 4096, 4096),
          GemmShape.from_conv((9, 256, 256, 128, 128)), GemmShape.from_conv((5, 512, 512, 128, 128)))
# Quick: a batch of 2 folded into an M that is not a multiple of any tile (200 = 2·10·10).
QUICK_SHAPES = (GemmShape.from_conv((2, 64, 64, 10, 10)),)


# ---------------------------------------------------------------------------------------------------------------
# Why ET-VK's own tiling cannot run: from the device's properties and the checkout's history (no GPU work)

def coopmat_shapes(device) -> str:
    """The cooperative-matrix entries the device lists, compactly: ``KHR 16x16x32 sint8·sint8→sint32; …``."""
    entries = device.cooperative_matrix_properties()
    if not entries:
        return "none (no VK_KHR_cooperative_matrix / VK_NV_cooperative_matrix entries)"
    seen = []
    for e in entries:
        text = f"{e['extension']} {e['M']}x{e['N']}x{e['K']} {e['A']}·{e['B']}→{e['D']}"
        if e.get("scope", 3) != 3:
            text += f" (scope {e['scope']})"
        if text not in seen:
            seen.append(text)
    return "; ".join(seen)


def pr_in_checkout(checkout, pr: int = PR) -> tuple[bool | None, str]:
    """Whether the ExecuTorch checkout at `checkout` holds PR `pr`: (True / False / None where it cannot tell, a
    sentence). Looks for ``(#pr)`` in the commit subjects (ExecuTorch's merge convention) and, for #22899, for an
    ``*_coopmat_sg32_*`` template variant in the tree."""
    if checkout is None:
        return None, f"no ExecuTorch checkout (WORKBENCH_EXECUTORCH unset): cannot tell whether PR #{pr} is in it"
    root = Path(checkout)
    head = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%h %cs"], capture_output=True, text=True, check=False)
    if head.returncode != 0:
        return None, f"{root} has no git history ({head.stderr.strip()[:80]}): cannot tell whether PR #{pr} is in it"
    found = subprocess.run(["git", "-C", str(root), "log", "--format=%h %s", "-E", "--grep", rf"\(#{pr}\)"],
                           capture_output=True, text=True, check=False).stdout.split("\n")
    commits = [line for line in found if re.search(rf"\(#{pr}\)", line)]
    glsl = root / "backends" / "vulkan" / "runtime" / "graph" / "ops" / "glsl"
    sg32 = sorted(p.name for p in glsl.glob("*dq8ca*coopmat*.yaml") if "sg32" in p.read_text()) if glsl.is_dir() \
        else []
    what = PR_NOTE if pr == PR else f"ExecuTorch PR #{pr}"
    if commits:
        return True, f"{what} is in the checkout ({commits[0][:80]})"
    return False, (f"{what} is not in the checkout (HEAD {head.stdout.strip()}; no commit subject names #{pr}"
                   + ("" if sg32 else ", and no dq8ca coopmat yaml has a sg32 variant") + ")")


def etvk_refusal(device, tiling=None, checkout=None) -> str | None:
    """The refused row's reason (None where `device` can run ET-VK's template at `tiling`): what the device lacks,
    what it lists, the C++ gate, and whether PR #22899 is in the checkout."""
    from ..etvk.families.linear_dq8ca_qw_coopmat import device_refusal
    missing = device_refusal(device, tiling)
    if missing is None:
        return None
    parts = [missing, f"device lists: {coopmat_shapes(device)}"]
    if tiling is None:
        parts += [CPP_GATE, pr_in_checkout(checkout)[1]]
    return " | ".join(parts)


# ---------------------------------------------------------------------------------------------------------------
# The suite

def bench_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, shapes=None,
                executorch=None, group_size: int | None = None) -> pd.DataFrame:
    """`workbench bench coopmat-vs-etvk`: at every shape (`SHAPES`, `QUICK_SHAPES` when quick) ET-VK's coopmat linear
    at its own tiling and the workbench's 32-lane tilings, the workbench's coopmat GEMM and conv at their best
    tiles, and torch._int_mm; see the module docstring. `executorch`: the checkout (default
    ``$WORKBENCH_EXECUTORCH``; without one ET-VK's rows are refused or skipped, saying why). `group_size`: ET-VK's
    quant group (default K: one group)."""
    shapes = tuple(shapes or (QUICK_SHAPES if quick else SHAPES))
    if not all(isinstance(s, GemmShape) for s in shapes):
        raise ValueError(f"shapes must be GemmShape values (GemmShape(M, N, K) or GemmShape.from_conv(...)); "
                         f"given {shapes!r}")
    env = environment(device)
    rows = Rows(writer)
    gen, checkout, no_checkout = _codegen(executorch)
    props = properties(device)
    workbench_reason = unsupported_reason(device, props)
    for shape in progress(shapes, "coopmat vs ET-VK", enabled=show_progress):
        common = {"shape": shape.label, "M": shape.m, "N": shape.n, "K": shape.k, "origin": shape.origin}
        etvk_tops, made = [], {}
        for impl, tiling in ETVK_TILINGS:
            row = _etvk_row(device, gen, checkout, no_checkout, shape, impl, tiling, group_size, env, quick, made)
            rows.append({**row, **common})
            if row.get("correct"):
                etvk_tops.append(row["TOP/s"])
        best_etvk = max(etvk_tops, default=np.nan)
        a, b, expected = _operands(shape)
        for impl in ("workbench gemm", "workbench conv"):
            for row in _workbench_rows(device, props, workbench_reason, shape, impl, a, b, expected, env, quick):
                row["speedup_vs_etvk"] = row["TOP/s"] / best_etvk if row.get("correct") else np.nan
                rows.append({**row, **common})
        rows.append({**_torch_row(device, shape, a, b, expected, env, quick), **common})
    df = pd.DataFrame(rows)
    _print_summary(df)
    return df


def _codegen(executorch):
    """(Codegen or None, checkout path or None, the reason there is none)."""
    from .. import etvk
    try:
        src = etvk.source(executorch)
    except etvk.CheckoutError as error:
        return None, None, str(error)
    return etvk.Codegen(src), src.checkout, None


def _operands(shape: GemmShape):
    """One random int8 problem per shape, shared by the workbench's kernels and torch, and its exact product."""
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (shape.m, shape.k), dtype=np.int8)
    b = rng.integers(-128, 128, (shape.k, shape.n), dtype=np.int8)
    return a, b, gemm_reference(a, b)


def _etvk_dispatch(gen, m_run: int, shape: GemmShape, tiling, group_size: int, made: dict):
    """ET-VK's Dispatch at `tiling`. The tilings of one shape share its data and torch reference (seconds of host
    work at the large shapes): the first is made in full and kept in `made`; the others take its resources and
    change only what the tiling changes (variant, requires, the tiling's columns), taken from a one-tile make."""
    from ..etvk import make
    full = lambda t, m: make(gen, "linear_dq8ca_qw_coopmat", shape=(m, shape.k), out_features=shape.n,
                             group_size=group_size, tiling=t)
    first = made.get("dispatch")
    if first is None:
        made["dispatch"] = first = full(tiling, m_run)
        return first
    one_tile = full(tiling, ETVK_TILE[0])
    if [r.name for r in one_tile.resources] != [r.name for r in first.resources] \
            or one_tile.spec_constants != first.spec_constants:  # the tilings bind differently: make it in full
        return full(tiling, m_run)
    return replace(first, variant=one_tile.variant, requires=one_tile.requires,
                   params={**first.params, **{k: one_tile.params[k] for k in ("tiling", "mma", "subgroup_size")}})


def _timed(row: dict, shape: GemmShape) -> dict:
    """`ops` and `TOP/s` of the GEMM asked for (padding excluded), whatever the kernel ran."""
    row["macs"] = shape.macs
    row["ops"] = 2 * shape.macs
    row["GOP/s"] = row["ops"] / row["median_us"] / 1e3
    row["TOP/s"] = row["GOP/s"] / 1e3
    return row


def _not_run(impl, method, status, reason, env) -> dict:
    return {"impl": impl, "kernel": impl, "method": method, "status": status, "reason": reason, "correct": None,
            "TOP/s": np.nan, **env}


def _mismatch(got, want) -> str:
    from ..checks.mismatch import mismatch_report
    return mismatch_report(np.asarray(got).astype(np.int64), np.asarray(want).astype(np.int64),
                           dtype_kind="int8").summary()


def _etvk_row(device, gen, checkout, no_checkout, shape, impl, tiling, group_size, env, quick, made) -> dict:
    from ..etvk import execute
    from ..vk import MissingFeatureError
    method = ETVK_METHOD + ("" if tiling is None else f", workbench-made tiling {tiling!r}")
    reason = etvk_refusal(device, tiling, checkout)
    if reason is not None:
        if tiling is None and no_checkout:
            reason += f" | {no_checkout}"
        return {**_not_run(impl, method, "refused", reason, env), "tiling": tiling or "etvk"}
    if gen is None:
        return _not_run(impl, method, "skipped", no_checkout, env)
    m_run = shape.etvk_padded_m()
    try:
        d = _etvk_dispatch(gen, m_run, shape, tiling, group_size or shape.k, made)
        repeats = int(min(32, max(1, 2e9 // (m_run * shape.n * shape.k))))  # keep the GPU busy for ~1 ms a sample
        row = execute(device, gen, d, measure=True, min_time_s=0.02 if quick else 0.2, back_to_back=repeats)
    except (ValueError, MissingFeatureError) as error:  # the shader's preconditions (N % 64, K % 32) or the device
        return _not_run(impl, method, "refused", str(error), env)
    except driver_errors() as error:
        return _not_run(impl, method, f"failed: {error}", str(error), env)
    row["etvk_shape"] = row.pop("shape")
    row["mismatch_fraction"] = row.pop("mismatch")
    row["mismatch"] = row.pop("mismatch_map") or "exact"
    row.update(impl=impl, kernel=impl, method=method, status="ok" if row["correct"] else "WRONG", reason="",
               gemm_run=f"{m_run}x{shape.n}x{shape.k}" + (f" (M padded to {ETVK_TILE[0]})" if m_run != shape.m
                                                           else ""))
    return _timed(row, shape)


def _workbench_rows(device, props, reason, shape, impl, a, b, expected, env, quick) -> list[dict]:
    conv = impl == "workbench conv"
    method = ("vulkan coopmat conv (int8 4C in and out, fused requantize)" if conv
              else "vulkan coopmat gemm (int32 out)")
    if reason:
        return [_not_run(impl, method, "skipped", reason, env)]
    sizes = [s for s in int8_sizes(props) if s[1] % 16 == 0]  # B tiles start on 16-byte columns
    smem = device.info.shared_memory_bytes
    timer = sampling(quick)
    sample = lambda rec, repeats: sample_recording(rec, repeats=repeats, **timer)
    rows = []
    for size in sizes:
        for tile in (QUICK_CANDIDATES if quick else GEMM_CANDIDATES):
            try:
                spec = CoopmatGemmSpec(shape.conv_shape(), size, requant=conv, **tile)
            except ValueError:
                continue  # the conv's epilogue does not tile this block
            if smem and spec.shared_bytes() > smem:
                continue
            ops_a, ops_b = gemm_operands(spec, base=(a, b))
            runner = run_conv if conv else run_gemm
            try:
                (gpu, host), err, repeats = runner(device, spec, ops_a, ops_b, sample=sample, expected=expected)
            except driver_errors() as error:
                rows.append({**_not_run(impl, method, f"failed: {error}", str(error), env), "tile": spec.label})
                continue
            row = measurement_row(impl, env, gpu, host_ns=host, bytes_moved=spec.bytes_moved(), macs=spec.macs(),
                                  impl=impl, method=method, tile=spec.label, coop_size="x".join(map(str, size)),
                                  gemm_run="x".join(map(str, spec.gemm)), repeats=repeats)
            # the kernels' runners report the largest difference only (they keep no copy of the output)
            row.update(status="ok" if err == 0 else "WRONG", reason="", correct=err == 0, max_abs_diff=err,
                       mismatch="exact" if err == 0 else f"max |got - torch| = {err}{' LSB' if conv else ''}")
            rows.append(_timed(row, shape))
    ok = [r for r in rows if r.get("correct")]
    best = max(ok, key=lambda r: r["TOP/s"]) if ok else None
    for r in rows:
        r["best"] = r is best
    return rows or [_not_run(impl, method, "skipped", f"no tile fits {device.info.name}", env)]


def _torch_row(device, shape, a, b, expected, env, quick) -> dict:
    """torch._int_mm on the same operands: CUDA where the Vulkan device is NVIDIA's and torch has CUDA, else the CPU
    (labelled: `runs_on`)."""
    import torch
    cuda = device.info.vendor == "NVIDIA" and torch.cuda.is_available()
    where = f"cuda ({torch.cuda.get_device_name(0)})" if cuda else f"cpu ({torch.get_num_threads()} threads)"
    method = f"torch._int_mm ({'cuda' if cuda else 'cpu'})"
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    if cuda:
        ta, tb = ta.cuda(), tb.cuda()
    try:
        got = torch._int_mm(ta, tb)
    except RuntimeError as error:  # e.g. CUDA's M > 16, K % 8, N % 8 conditions
        return {**_not_run("torch._int_mm", method, "skipped", str(error).splitlines()[0], env), "runs_on": where}
    got_np = got.cpu().numpy()
    err = int(np.abs(got_np.astype(np.int64) - expected).max())
    samples = sample_callable(lambda: torch._int_mm(ta, tb), sync=torch.cuda.synchronize if cuda else None,
                              cuda_events=cuda, **sampling(quick))
    row = measurement_row("torch._int_mm", env, samples, bytes_moved=shape.m * shape.k + shape.k * shape.n
                          + 4 * shape.m * shape.n, macs=shape.macs, impl="torch._int_mm", method=method,
                          runs_on=where, timer="cuda events" if cuda else "wall clock", gemm_run=shape.label)
    row.update(status="ok" if err == 0 else "WRONG", reason="", correct=err == 0, max_abs_diff=err,
               mismatch="exact" if err == 0 else _mismatch(got_np, expected))
    return _timed(row, shape)


def _print_summary(df: pd.DataFrame) -> None:
    for shape, group in df.groupby("shape", sort=False):
        parts = []
        for impl in IMPL_ORDER:
            sel = group[group["impl"] == impl]
            if not len(sel):
                continue
            ok = sel[sel["correct"] == True]
            parts.append(f"{impl} {ok['TOP/s'].max():.2f}" if len(ok) else f"{impl} {sel['status'].iloc[0]}")
        print(f"{shape} ({group['origin'].iloc[0]}): TOP/s " + ", ".join(parts))
