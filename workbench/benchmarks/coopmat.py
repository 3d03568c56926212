"""Benchmarks of the cooperative-matrix kernels (`workbench.kernels.coopmat`): the probe (the int8 tensor-core
roof), the pointwise conv as a GEMM over tiles and shapes, the conv with its int8 epilogue, the diagnostic builds of
the best staged tile, and torch._int_mm on the same GEMM."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from ..kernels.coopmat import (WARPS_PER_GROUP, CoopmatGemmSpec, CoopmatPeakSpec, gemm_operands, gemm_reference,
                               int8_sizes, properties, run_conv, run_gemm, run_peak, unsupported_reason)
from ..kernels.device_limits import device_limits, theoretical_gops
from ..measure import Rows, environment, measurement_row, sample_callable, sample_recording
from ..vk.errors import driver_errors
from .conv import filling_shapes

# The GEMM variants the suite measures: the direct and 2 x 2 shared-memory kernels (B row-major), the direct kernel
# with B transposed (isolates the B layout), and the staged double-buffered kernel at several block shapes.
GEMM_TILES = ([{"rm": rm, "rn": rn} for rm, rn in ((1, 1), (2, 2), (4, 4))]
              + [{"rm": rm, "rn": rn, "shmem": True} for rm, rn in ((2, 2), (4, 2), (4, 4))]
              + [{"rm": rm, "rn": rn, "b_col": True} for rm, rn in ((1, 1), (2, 2), (4, 4))]
              + [{"staged": True, "wm": wm, "wn": wn, "rm": rm, "rn": rn, "ksteps": ks}
                 for wm, wn, rm, rn, ks in ((2, 2, 4, 4, 1), (2, 2, 4, 4, 2), (4, 2, 2, 4, 2), (2, 2, 2, 2, 2),
                                            (4, 4, 2, 2, 2))]
              + [{"staged": True, "wm": 2, "wn": 2, "rm": 4, "rn": 4, "ksteps": 1, "pad": False},
                 {"staged": True, "wm": 2, "wn": 2, "rm": 4, "rn": 4, "ksteps": 1, "pad": False, "stages": 3},
                 {"staged": True, "wm": 2, "wn": 2, "rm": 4, "rn": 4, "ksteps": 1, "stages": 3}])
GEMM_METHOD = "vulkan coopmat gemm (pointwise conv, int32 out)"
STAGED_QUICK = {"staged": True, "wm": 2, "wn": 2, "rm": 2, "rn": 2, "ksteps": 1}
# A square GEMM beside the conv shapes: whether the conv's short K (Cin) is what holds the tensor cores back.
SQUARE_GEMM = (1, 4096, 4096, 64, 64)


def skip_row(device, reason: str) -> dict:
    return {"kernel": "coopmat peak", "method": "cooperative matrix", "status": "skipped", "reason": reason,
            **environment(device)}


def bench_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, shapes=None,
                target_ms: float = 10.0) -> pd.DataFrame:
    """`workbench bench coopmat`: the property lists, the probe for every int8 size x chains (the roof), the GEMM
    variant of the pointwise conv on device-filling shapes x tiles, torch._int_mm on the same GEMM (CUDA). Every
    row carries `max_abs_diff` against the exact host result; where the device has no usable cooperative matrix,
    one row says why (status "skipped")."""
    props = properties(device)
    reason = unsupported_reason(device, props)
    rows = Rows(writer)
    if reason:
        rows.append(skip_row(device, reason))
        return pd.DataFrame(rows)
    env = environment(device)
    limits = device_limits(device)
    min_time_s = 0.02 if quick else 0.2

    def sampler(**kw):  # the kernels' runners time a recording through this
        return lambda rec, repeats: sample_recording(rec, repeats=repeats, min_time_s=min_time_s, **kw)

    theory = theoretical_gops(limits, "int8_mma")
    resident_warps = (limits.sm_count or 132) * (limits.warps_per_sm or 64)
    subgroups = 4 * resident_warps if not quick else 64
    subgroups = -(-subgroups // WARPS_PER_GROUP) * WARPS_PER_GROUP
    refused = (*driver_errors(), ValueError)  # driver errors, and local sizes past its limits

    def failed(kernel, error, **cols):  # a driver that refuses one variant: say so, carry on with the others
        rows.append({"kernel": kernel, "method": "int8 cooperative matrix (NV)", "status": f"failed: {error}", **cols,
              **env})

    for size in int8_sizes(props):
        for chains in ((4,) if quick else (2, 4, 8)):
            probe = CoopmatPeakSpec(size, subgroups, 4, chains)
            try:
                run_peak(device, probe)
            except refused as exc:
                failed("coopmat peak", exc, coop_size="x".join(map(str, size)), chains=chains)
                continue
            probe_ns, _ = run_peak(device, probe)
            iterations = int(min(1 << 20, max(4, 4 * target_ms * 1e6 / max(probe_ns or 1.0, 1.0))))
            spec = CoopmatPeakSpec(size, subgroups, iterations, chains)
            (gpu, host), err = run_peak(device, spec, sample=sampler(min_samples=5, warmup=1))
            row = measurement_row("coopmat peak", env, gpu, host_ns=host, macs=spec.macs(),
                                  method="int8 cooperative matrix (NV)", coop_size="x".join(map(str, size)),
                                  chains=chains, subgroups=subgroups, iterations=iterations,
                                  max_abs_diff=err, status="ok" if err == 0 else "WRONG")
            row["theoretical_GOPs"] = theory
            row["probe_fraction"] = row["GOP/s"] / theory if np.isfinite(theory) else math.nan
            row.update(limits.columns())
            rows.append(row)
    shapes = shapes or (((1, 64, 64, 32, 32),) if quick else tuple(filling_shapes(device)) + (SQUARE_GEMM,))
    tiles = [{"rm": 1, "rn": 1}] if quick else GEMM_TILES
    smem_limit = device.info.shared_memory_bytes
    gemm_sizes = [s for s in int8_sizes(props) if s[1] % 16 == 0]  # B tiles start on 16-byte columns
    for shape in shapes:
        nb, cin, cout, h, w = shape
        rng = np.random.default_rng(0)
        base = (rng.integers(-128, 128, (nb * h * w, cin), dtype=np.int8),
                rng.integers(-128, 128, (cin, cout), dtype=np.int8))
        expected = gemm_reference(*base)  # once per shape, exact (int64)
        label = f"{nb}x{cin}x{h}x{w}→{cout}"
        staged_gemms = []  # (GOP/s, spec) of the exact two-stage staged GEMMs: the diagnostics are two-stage builds

        def measure(kind, spec, run, method, error_column):
            if smem_limit and spec.shared_bytes() > smem_limit:
                return  # more shared memory than the device has
            a, b = gemm_operands(spec, base=base)
            try:
                (gpu, host), err, repeats = run(device, spec, a, b, sample=sampler(), expected=expected)
            except refused as exc:
                failed(kind, exc, coop_size="x".join(map(str, spec.size)), tile=spec.label)
                return
            status = "diagnostic: results wrong by design" if spec.diagnostic else "ok" if err == 0 else "WRONG"
            row = measurement_row(
                kind, env, gpu, host_ns=host, bytes_moved=spec.bytes_moved(), macs=spec.macs(), method=method,
                shape=label, coop_size="x".join(map(str, spec.size)), tile=spec.label,
                gemm="x".join(map(str, spec.gemm)), repeats=repeats, status=status, **{error_column: err})
            rows.append(row)
            if kind == "coopmat gemm" and spec.staged and spec.stages == 2 and status == "ok":
                staged_gemms.append((row["GOP/s"], spec))

        for size in gemm_sizes:
            for tile in tiles:
                measure("coopmat gemm", CoopmatGemmSpec(tuple(shape), size, **tile), run_gemm, GEMM_METHOD,
                        "max_abs_diff")
        for size in gemm_sizes:  # the conv itself: the staged tiles with the int8 epilogue
            for tile in [t for t in tiles if t.get("staged")] or [STAGED_QUICK]:
                try:
                    spec = CoopmatGemmSpec(tuple(shape), size, requant=True, **tile)
                except ValueError:
                    continue  # the epilogue needs lanes x channel words to tile a row
                measure("coopmat conv", spec, run_conv, "vulkan coopmat conv (int8 4C in and out, fused requantize)",
                        "max_lsb_diff")
        if staged_gemms:  # where the best staged tile's time goes: its diagnostic builds (DIAGNOSTICS)
            best = max(staged_gemms, key=lambda pair: pair[0])[1]
            for diagnostic in (1, 2, 3):
                measure("coopmat gemm", replace(best, diagnostic=diagnostic), run_gemm, GEMM_METHOD, "max_abs_diff")
        emit_torch = _torch_int_mm_row(device, shape, env)
        if emit_torch:
            rows.append(emit_torch)
    df = pd.DataFrame(rows)
    checked = df[~df["status"].astype(str).str.startswith("diagnostic")]  # diagnostic builds: wrong by design
    wrong = checked[checked["status"] != "ok"]  # WRONG results and variants the driver refused
    print(f"cooperative matrix correctness: {len(checked) - len(wrong)} of {len(checked)} results exact against the "
          f"host (exact float64 product)"
          + ("" if not len(wrong) else " — WRONG: " + ", ".join(wrong["method"].astype(str))))
    probes = df[(df["kernel"] == "coopmat peak") & df["GOP/s"].notna()] if "GOP/s" in df else df.iloc[0:0]
    if len(probes):
        best = probes.loc[probes["GOP/s"].idxmax()]
        what = "probe (quick: 64 subgroups, one small shape; not the roof)" if quick else "roof"
        print(f"int8 cooperative-matrix {what}: {best['GOP/s']:,.0f} GOP/s ({best['coop_size']}, {best['chains']} "
              f"chains; theoretical {best['theoretical_GOPs']:,.0f})")
        gemm = df[df["kernel"].isin(["coopmat gemm", "coopmat conv"]) & df["method"].str.startswith("vulkan")
                  & df["GOP/s"].notna()]
        for (kernel, shape), group in gemm.groupby(["kernel", "shape"]):
            ok = group[group["status"] == "ok"]
            if not len(ok):
                continue
            top = ok.loc[ok["GOP/s"].idxmax()]
            print(f"{kernel} {shape}: best {top['GOP/s']:,.0f} GOP/s ({top['coop_size']}, {top['tile']}) = "
                  f"{top['GOP/s'] / best['GOP/s']:.0%} of the probe")
            for diag in group[group["status"] != "ok"].to_dict("records"):
                print(f"    {diag['tile']}: {diag['GOP/s']:,.0f} GOP/s = {diag['GOP/s'] / best['GOP/s']:.0%} "
                      "of the probe")
    if quick:
        from ..measure import QUICK_NOTE
        print(QUICK_NOTE)
    return df


def _torch_int_mm_row(device, shape, env) -> dict | None:
    """torch._int_mm on the same GEMM on CUDA (None without CUDA), checked on a sample of rows."""
    import torch
    if not (device.info.vendor == "NVIDIA" and torch.cuda.is_available()):
        return None
    nb, cin, cout, h, w = shape
    m, k, n = nb * h * w, cin, cout
    gen = torch.Generator().manual_seed(1)
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=gen).cuda()
    b = torch.randint(-128, 128, (k, n), dtype=torch.int8, generator=gen).cuda()
    got = torch._int_mm(a, b)
    rows = slice(0, min(m, 256))
    err = int((got[rows].cpu().to(torch.int64) - a[rows].cpu().to(torch.int64) @ b.cpu().to(torch.int64))
              .abs().max())
    samples = sample_callable(lambda: torch._int_mm(a, b), sync=torch.cuda.synchronize, cuda_events=True)
    return measurement_row("coopmat gemm", env, samples, bytes_moved=m * k + k * n + 4 * m * n, macs=m * n * k,
                           method="torch._int_mm (cuda)", shape=f"{nb}x{cin}x{h}x{w}→{cout}", tile="torch",
                           max_abs_diff=err, status="ok" if err == 0 else "WRONG", timer="cuda events")
