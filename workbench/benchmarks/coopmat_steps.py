"""`workbench bench coopmat-steps`: issue 25's steps for the cooperative-matrix conv, side by side in one run
(`coopmat_steps.csv`), each row with the SM clock held while it ran (`measure.clocks.ClockSampler`):

- the probe's limits: the MMA chain-length sweep (independent accumulator chains per subgroup), subgroups per
  workgroup, and subgroups per SM (rows "coopmat peak sweep"); the best of them is the run's roof;
- at 5x512x128x128->512, 9x256x128x128->256 and 4096^3 (`STEP_SHAPES`): the old best staged kernel (int8 out and
  int32 out), then `kernels.coopmat_conv` step by step: the K pipeline depth S (int32 and int8 out), the epilogue
  (direct / sectors / a separate reduce dispatch), split-K factors, larger blocks, and the diagnostic builds of the
  new kernel (where its time goes); torch fp16 conv (cuDNN) and torch._int_mm beside them on CUDA hosts.

One failing config writes a row with status "failed: ..." and the run goes on; every row is on disk as soon as it
is measured. A progress line per config goes to stdout.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pandas as pd

from ..kernels import coopmat as CM
from ..kernels import coopmat_conv as CC
from ..kernels.device_limits import device_limits, theoretical_gops
from ..measure import Rows, environment, keep_busy, measurement_row, sample_callable, sample_recording
from ..measure.clocks import ClockSampler

STEP_SHAPES = ((5, 512, 512, 128, 128), (9, 256, 256, 128, 128), (1, 4096, 4096, 64, 64))
COOP_SIZE = (16, 16, 32)
# The old best tile (coopmat.csv on the H200: 242 / 173 / 367 TOP/s int8 out at the three shapes)
OLD_BEST = {"staged": True, "wm": 2, "wn": 2, "rm": 4, "rn": 4, "ksteps": 1, "pad": False, "stages": 3}
NEW_TILE = {"wm": 2, "wn": 2, "rm": 4, "rn": 4, "ksteps": 1}


def step_configs(shape) -> list[tuple[str, object]]:
    """(step, spec) in the order they run: each step changes one thing against the one before."""
    size = COOP_SIZE
    old = CM.CoopmatGemmSpec(tuple(shape), size, requant=True, **OLD_BEST)
    out = [("0 old best", old), ("0 old best", replace(old, requant=False))]
    new = lambda **kw: CC.CoopmatConvSpec(tuple(shape), size, **{**NEW_TILE, **kw})  # noqa: E731
    out += [("1 pipeline", new(stages=s, epilogue="int32")) for s in (2, 3, 4)]
    out += [("1 pipeline", new(stages=s, epilogue="sectors")) for s in (2, 3, 4)]
    out += [("2 epilogue", new(stages=3, epilogue=e)) for e in ("direct", "reduce")]
    k_stages = new(stages=3, epilogue="reduce").k_stages()
    out += [("3 split-K", new(stages=3, epilogue="reduce", splits=p)) for p in (2, 4) if p <= k_stages]
    out += [("4 tile", new(stages=3, epilogue="sectors", wm=4, wn=2)),
            ("4 tile", new(stages=3, epilogue="sectors", ksteps=2)),
            ("4 tile", new(stages=4, epilogue="sectors", wm=4, wn=2))]
    out += [("5 diagnostic", new(stages=3, epilogue="sectors", diagnostic=d)) for d in (1, 2, 3)]
    return out


def probe_configs(resident_warps: int, sm_count: int) -> list[tuple[str, CM.CoopmatPeakSpec]]:
    """The probe's sweep at 16x16x32: chains per subgroup (issue rate), subgroups per workgroup, subgroups per SM."""
    whole = lambda count, warps: -(-count // warps) * warps  # noqa: E731 - whole workgroups
    full = whole(4 * resident_warps, 16)
    out = [("chains", CM.CoopmatPeakSpec(COOP_SIZE, full, 4, c)) for c in CM.PROBE_CHAINS]
    out += [("warps per workgroup", CM.CoopmatPeakSpec(COOP_SIZE, full, 4, 8, warps=w)) for w in (1, 2, 8, 16)]
    out += [("subgroups per SM", CM.CoopmatPeakSpec(COOP_SIZE, whole(per_sm * sm_count, 4), 4, 8))
            for per_sm in (4, 8, 16, 32)]
    return out


def _clock_normalised(row: dict, theory: float):
    """TOP/s at the clock held: rate x max clock / median clock, and the fraction of the theoretical rate at the
    clock held (NaN without clocks)."""
    held, top = row.get("sm_clock_mhz_median", math.nan), row.get("max_sm_clock_mhz_limit", math.nan)
    rate = row.get("GOP/s", math.nan)
    ok = held == held and top == top and held > 0
    row["GOP/s_at_max_clock"] = rate * top / held if ok else math.nan
    row["theory_fraction_at_held_clock"] = rate / (theory * held / top) if ok and theory == theory else math.nan


def steps_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, shapes=None,
                target_ms: float = 10.0) -> pd.DataFrame:
    """Issue 25's steps (module docstring). `quick`: one small shape, the probe at 4 chains, for a smoke test."""
    props = CM.properties(device)
    reason = CM.unsupported_reason(device, props)
    rows = Rows(writer)
    if reason:
        rows.append({"kernel": "coopmat steps", "status": "skipped", "reason": reason, **environment(device)})
        return pd.DataFrame(rows)
    env = environment(device)
    limits = device_limits(device)
    theory = theoretical_gops(limits, "int8_mma")
    min_time_s = 0.02 if quick else 0.2
    sm_count = limits.sm_count or 132
    resident_warps = sm_count * (limits.warps_per_sm or 64)
    t0 = time.perf_counter()

    def say(text):
        if show_progress:
            print(f"[coopmat-steps {time.perf_counter() - t0:6.1f} s] {text}", flush=True)

    def sampler(**kw):
        return lambda rec, repeats: sample_recording(rec, repeats=repeats, min_time_s=min_time_s, **kw)

    def failed(kernel, exc, **cols):
        row = {"kernel": kernel, "status": f"failed: {type(exc).__name__}: {exc}", **cols, **env}
        rows.append(row)
        say(f"{cols.get('config', kernel)}: FAILED ({type(exc).__name__}: {exc})")

    # the probe sweep
    probes = probe_configs(resident_warps, sm_count)
    if quick:
        probes = [("chains", CM.CoopmatPeakSpec(COOP_SIZE, 64, 4, 4))]
    roof = math.nan
    for sweep, spec in probes:
        config = f"{spec.chains} chains, {spec.warps} warps/group, {spec.subgroups} subgroups"
        try:
            probe_ns, _ = CM.run_peak(device, spec)
            iterations = int(min(1 << 20, max(4, 4 * target_ms * 1e6 / max(probe_ns or 1.0, 1.0))))
            timed = replace(spec, iterations=iterations)
            with ClockSampler(device) as clocks:
                (gpu, host), err = CM.run_peak(device, timed, sample=sampler(min_samples=5, warmup=1))
            row = measurement_row("coopmat peak sweep", env, gpu, host_ns=host, macs=timed.macs(),
                                  method="int8 cooperative matrix (NV)", sweep=sweep, config=config,
                                  coop_size="x".join(map(str, spec.size)), chains=spec.chains, warps=spec.warps,
                                  subgroups=spec.subgroups, subgroups_per_sm=spec.subgroups / sm_count,
                                  iterations=iterations, max_abs_diff=err, status="ok" if err == 0 else "WRONG")
        except Exception as exc:  # noqa: BLE001 - one failing config must not end the run
            failed("coopmat peak sweep", exc, sweep=sweep, config=config)
            continue
        row.update(clocks.columns())
        row["theoretical_GOPs"] = theory
        row["probe_fraction"] = row["GOP/s"] / theory if theory == theory else math.nan
        _clock_normalised(row, theory)
        rows.append(row)
        if row["status"] == "ok":
            roof = row["GOP/s"] if roof != roof else max(roof, row["GOP/s"])
        say(f"probe {sweep}: {config}: {row['GOP/s'] / 1e3:,.0f} TOP/s, SM clock {row['sm_clock_mhz_median']} MHz")

    # the conv steps
    shapes = shapes or (((1, 64, 64, 32, 32),) if quick else STEP_SHAPES)
    smem_limit = device.info.shared_memory_bytes
    for shape in shapes:
        nb, cin, cout, h, w = shape
        label = f"{nb}x{cin}x{h}x{w}→{cout}"
        rng = np.random.default_rng(0)
        base = (rng.integers(-128, 128, (nb * h * w, cin), dtype=np.int8),
                rng.integers(-128, 128, (cin, cout), dtype=np.int8))
        expected = CM.gemm_reference(*base)
        int8_ref = CC.int8_reference(expected, np.ascontiguousarray(base[1].T))
        try:
            configs = step_configs(shape)
        except ValueError as exc:
            failed("coopmat conv", exc, shape=label)
            continue
        if quick:
            configs = configs[:1] + [c for c in configs if c[0] == "1 pipeline"][:1]
        warmed = False
        for step, spec in configs:
            config = spec.label
            new = isinstance(spec, CC.CoopmatConvSpec)
            int8 = spec.requant
            kernel = "coopmat conv" if int8 else "coopmat gemm"
            if smem_limit and spec.shared_bytes() > smem_limit:
                failed(kernel, ValueError(f"needs {spec.shared_bytes()} bytes of shared memory, the device has "
                                          f"{smem_limit}"), shape=label, step=step, config=config)
                continue
            try:
                a, b = CM.gemm_operands(spec, base=base)
                if not warmed:  # an idle GPU's clock ramps up under load: one untimed second first
                    _warm(device, spec, a, b, expected, new)
                    warmed = True
                with ClockSampler(device) as clocks:
                    if new:
                        (gpu, host), err, repeats = CC.run(device, spec, a, b, expected=expected, sample=sampler(),
                                                           reference=int8_ref)
                    elif int8:
                        (gpu, host), err, repeats = CM.run_conv(device, spec, a, b, expected=expected,
                                                                sample=sampler())
                    else:
                        (gpu, host), err, repeats = CM.run_gemm(device, spec, a, b, expected=expected,
                                                                sample=sampler())
                del a, b
            except Exception as exc:  # noqa: BLE001 - one failing config must not end the run
                failed(kernel, exc, shape=label, step=step, config=config)
                continue
            status = "diagnostic: results wrong by design" if spec.diagnostic else "ok" if err == 0 else "WRONG"
            row = measurement_row(
                kernel, env, gpu, host_ns=host, bytes_moved=spec.bytes_moved(), macs=spec.macs(),
                method="vulkan coopmat " + ("conv (int8 4C in and out)" if int8 else "gemm (int32 out)"),
                shape=label, step=step, config=config, coop_size="x".join(map(str, spec.size)),
                gemm="x".join(map(str, spec.gemm)), out="int8" if int8 else "int32",
                stages=spec.stages, epilogue=(spec.epilogue if new else "staged (old)" if int8 else "int32"),
                splits=getattr(spec, "splits", 1), diagnostic=spec.diagnostic, shared_bytes=spec.shared_bytes(),
                repeats=repeats, status=status, **{"max_lsb_diff" if int8 else "max_abs_diff": err})
            row.update(clocks.columns())
            row["probe_GOPs"] = roof
            row["probe_fraction"] = row["GOP/s"] / roof if roof == roof else math.nan
            _clock_normalised(row, theory)
            rows.append(row)
            say(f"{label} {step}: {config}: {row['GOP/s'] / 1e3:,.0f} TOP/s = {row['probe_fraction']:.0%} of the "
                f"probe, {status}, SM clock {row['sm_clock_mhz_median']} MHz")
        for torch_row in _torch_rows(device, shape, env, label):
            rows.append(torch_row)
            say(f"{label} {torch_row['method']}: {torch_row.get('GOP/s', math.nan) / 1e3:,.0f} TOP/s")
    return pd.DataFrame(rows)


def _warm(device, spec, a, b, expected, new: bool, seconds: float = 1.0):
    """The shape's first config resubmitted for `seconds`, untimed (GPUs only; `measure.keep_busy`)."""
    if device.info.is_cpu:
        return

    def busy(rec, repeats):
        keep_busy(rec, device, seconds)
        return np.ones(1), np.ones(1)
    if new:
        CC.run(device, spec, a, b, expected=expected, sample=busy, reference=np.zeros((1, 1), np.int8))
    elif spec.requant:
        CM.run_conv(device, spec, a, b, expected=expected, sample=busy)
    else:
        CM.run_gemm(device, spec, a, b, expected=expected, sample=busy)


def _torch_rows(device, shape, env, label) -> list[dict]:
    """torch on the same problem on CUDA hosts (none elsewhere): the fp16 conv2d (cuDNN), channels-last and not,
    and torch._int_mm int8 → int32. Timing errors become rows, never exceptions."""
    try:
        import torch
    except ImportError:
        return []
    if not (device.info.vendor == "NVIDIA" and torch.cuda.is_available()):
        return []
    nb, cin, cout, h, w = shape
    m = nb * h * w
    out = []
    gen = torch.Generator().manual_seed(1)
    cases = []
    try:
        x = torch.randn((nb, cin, h, w), generator=gen).half().cuda()
        wt = torch.randn((cout, cin, 1, 1), generator=gen).half().cuda()
        xl, wl = x.to(memory_format=torch.channels_last), wt.to(memory_format=torch.channels_last)
        a = torch.randint(-128, 128, (m, cin), dtype=torch.int8, generator=gen).cuda()
        b = torch.randint(-128, 128, (cin, cout), dtype=torch.int8, generator=gen).cuda()
        fp16_bytes = 2 * (x.numel() + wt.numel() + m * cout)
        cases = [("torch conv2d fp16 (cuDNN)", lambda: torch.nn.functional.conv2d(x, wt), fp16_bytes),
                 ("torch conv2d fp16 channels-last (cuDNN)", lambda: torch.nn.functional.conv2d(xl, wl), fp16_bytes),
                 ("torch._int_mm int8→int32 (cuda)", lambda: torch._int_mm(a, b), m * cin + cin * cout + 4 * m * cout)]
    except Exception as exc:  # noqa: BLE001
        return [{"kernel": "torch", "shape": label, "status": f"failed: {exc}", **env}]
    for method, fn, nbytes in cases:
        try:
            torch.backends.cudnn.benchmark = True
            with ClockSampler(device) as clocks:
                samples = sample_callable(fn, sync=torch.cuda.synchronize, cuda_events=True, warmup=5)
            row = measurement_row("coopmat conv" if "conv" in method else "coopmat gemm", env, samples,
                                  bytes_moved=nbytes, macs=m * cin * cout, method=method, shape=label,
                                  step="torch", config=method, timer="cuda events", status="ok")
            row.update(clocks.columns())
        except Exception as exc:  # noqa: BLE001
            row = {"kernel": "torch", "shape": label, "step": "torch", "config": method,
                   "status": f"failed: {type(exc).__name__}: {exc}", **env}
        out.append(row)
    return out
