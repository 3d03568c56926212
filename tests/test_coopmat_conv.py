"""The second-generation cooperative-matrix conv (kernels.coopmat_conv, shaders/coopmat_conv.glsl), its split-K
reduce (run on this device against torch), the probe's sweep parameters, the clock sampler and the coopmat-steps
suite. lavapipe (Mesa 22.3) has no cooperative matrix: the GEMM shader is compiled and validated here and its
schedule and addressing replayed on the host; the H200 suite checks every variant's output exactly."""
import os
import stat
import sys

import numpy as np
import pandas as pd
import pytest

from workbench.benchmarks import coopmat_steps as S
from workbench.kernels import coopmat as CM
from workbench.kernels import coopmat_conv as CC
from workbench.kernels import conv_pw
from workbench.toolchain.shaders import compile_shader
from workbench.measure.clocks import CLOCK_COLUMNS, ClockSampler, parse_smi_line


@pytest.mark.parametrize("defines", [{"STAGES": s, "EPILOGUE": e} for s in (2, 3, 4) for e in (0, 2, 3)]
                         + [{"DIAG": d} for d in (1, 2, 3)] + [{"DIAG": 2, "EPILOGUE": 0}]
                         + [{"TN": 8, "EPILOGUE": 2, "RM": 2, "RN": 4, "STAGES": 4},
                            {"RM": 2, "RN": 2, "EPILOGUE": 3, "PAD": 1},
                            {"WM": 4, "WN": 2, "KSTEPS": 2, "EPILOGUE": 3}])
def test_new_variants_compile_and_validate(defines):
    spv = compile_shader("coopmat_conv", defines=defines, target_env=CM.TARGET_ENV)  # spirv-val on every result
    assert spv.code[:4] == b"\x03\x02\x23\x07"


def test_spec_geometry_on_awkward_shapes():
    spec = CC.CoopmatConvSpec((2, 40, 24, 5, 7), (16, 16, 32), rm=2, rn=1, stages=4, epilogue="reduce", splits=2,
                              wm=1, wn=1)
    assert spec.block == (32, 16, 32) and spec.gemm == (96, 32, 64) and spec.k_stages() == 2
    assert spec.workgroups() == 3 * 2 and spec.threads_per_group() == 32
    m, n, k = spec.gemm
    assert spec.bytes_moved() == m * k + k * n + 8 * 2 * m * n + m * n + 12 * n
    assert spec.macs() == 2 * 5 * 7 * 40 * 24
    assert spec.push_constants() == np.array([96, 32, 64, 2], np.uint32).tobytes()
    sectors = CC.CoopmatConvSpec((1, 64, 64, 32, 32), (16, 16, 32))
    assert len(sectors.push_constants(conv_pw.DEFAULT_QPARAMS)) == 40
    assert sectors.shared_bytes() == max(2 * 256 * 32, 128 * 128) + 4 * 256


@pytest.mark.parametrize("kwargs,match", [
    ({"stages": 5}, "stages must be 2, 3 or 4"),
    ({"epilogue": "fused"}, "epilogue must be one of"),
    ({"splits": 0, "epilogue": "reduce"}, "positive integer"),
    ({"splits": 2, "epilogue": "sectors"}, "needs epilogue 'reduce'"),
    ({"splits": 3, "epilogue": "reduce"}, "more than the 2 K stages"),
    ({"diagnostic": 1, "epilogue": "reduce"}, "not for the 'reduce'"),
    ({"diagnostic": 4}, "diagnostic must be"),
    ({"rm": 3}, "RM, RN in"),
    ({"size": (16, 8, 32), "epilogue": "sectors", "rn": 4}, "TN must be 16"),
    ({"wm": 4, "wn": 4, "rm": 1, "rn": 1}, "must divide"),
])
def test_spec_refuses_invalid_parameters(kwargs, match):
    base = {"shape": (1, 64, 64, 8, 8), "size": (16, 16, 32)}
    with pytest.raises(ValueError, match=match):
        CC.CoopmatConvSpec(**{**base, **kwargs})


def _replay(spec: CC.CoopmatConvSpec, a: np.ndarray, bt: np.ndarray) -> np.ndarray:
    """coopmat_conv.glsl's K pipeline replayed on the host for every workgroup and split-K slice, with the shader's
    index math: the slice's stage range, the prologue (stage 0 into buffer 0, stages 1..S-2 into register sets), the
    STEP loop (loads S-1 stages ahead into set s % (S-1), compute from buffer s % 2, store set (s+1) % (S-1) into the
    other buffer), fragments read as coopMatLoadNV reads them. Returns the P partial slices (P, M, N); asserts that
    every compute reads the stage it should."""
    m, n, k = spec.gemm
    tm, tn, tk = spec.size
    bm, bn, bk = spec.block
    chunks, row, threads, sets = bk // 16, bk // 16 + spec.pad, spec.threads_per_group(), spec.stages - 1
    a16, b16 = a.reshape(-1, 16), bt.reshape(-1, 16)
    total = k // bk
    per = -(-total // spec.splits)
    out = np.zeros((spec.splits, m, n), np.int64)
    for z in range(spec.splits):
        first = min(z * per, total)
        stages = min(first + per, total) - first
        for wg in range(spec.workgroups()):
            brow, bcol = (wg // (n // bn)) * bm, (wg % (n // bn)) * bn
            regs = [None] * sets
            buf = [np.full((bm * row, 16), 99, np.int8), np.full((bm * row, 16), 99, np.int8)]
            bufb = [np.full((bn * row, 16), 99, np.int8), np.full((bn * row, 16), 99, np.int8)]
            held = [None, None]  # which stage each buffer holds

            def load(st):
                qa = [(brow + q // chunks) * (k // 16) + (first + st) * chunks + q % chunks for q in range(bm * chunks)]
                qb = [(bcol + q // chunks) * (k // 16) + (first + st) * chunks + q % chunks for q in range(bn * chunks)]
                return st, a16[qa], b16[qb]

            def store(reg, b):
                st, ra, rb = reg
                for q in range(bm * chunks):
                    buf[b][(q // chunks) * row + q % chunks] = ra[q]
                for q in range(bn * chunks):
                    bufb[b][(q // chunks) * row + q % chunks] = rb[q]
                held[b] = st

            if stages > 0:
                regs[0] = load(0)
                store(regs[0], 0)
            for s in range(1, sets):
                if s < stages:
                    regs[s] = load(s)
            acc = np.zeros((bm, bn), np.int64)
            for s0 in range(0, stages, sets):
                for ph in range(sets):
                    s = s0 + ph
                    if s >= stages:
                        continue
                    assert regs[ph][0] == s  # the invariant the shader's comment states
                    if s + sets < stages:
                        regs[ph] = load(s + sets)
                    assert held[s & 1] == s
                    fa, fb = buf[s & 1].reshape(-1), bufb[s & 1].reshape(-1)
                    for ks in range(spec.ksteps):
                        ta = CM.load_tile(fa, 16 * ks * tk // 16, 16 * row, bm, tk, False).astype(np.int64)
                        tb = CM.load_tile(fb, 16 * ks * tk // 16, 16 * row, tk, bn, True).astype(np.int64)
                        acc += ta @ tb
                    if s + 1 < stages:
                        assert regs[(ph + 1) % sets][0] == s + 1
                        store(regs[(ph + 1) % sets], (s + 1) & 1)
            out[z, brow:brow + bm, bcol:bcol + bn] = acc
    return out


@pytest.mark.parametrize("stages,splits,ksteps", [(2, 1, 1), (3, 1, 1), (4, 1, 2), (3, 2, 1), (4, 3, 1), (2, 4, 1)])
def test_pipeline_and_split_k_replay_on_the_host(stages, splits, ksteps):
    """Awkward sizes (70 pixels over 2 images, Cin 200 → 7 K stages of 32, Cout 24) and each S and P: the slices
    add up to the exact GEMM; with P > 1 no slice alone does."""
    spec = CC.CoopmatConvSpec((2, 200, 24, 5, 7), (16, 16, 32), wm=1, wn=1, rm=2, rn=1, ksteps=ksteps,
                              stages=stages, epilogue="reduce", splits=splits)
    a, bt = CM.gemm_operands(spec, seed=7)
    partials = _replay(spec, a, bt)
    np.testing.assert_array_equal(partials.sum(axis=0), CM.gemm_reference(a, bt.T))


def test_sectors_epilogue_addressing_on_the_host():
    """EPILOGUE = 3: int8 tile (i, j) goes to region + i·TM·RN + j with a row stride of RN uvec4; lane t's 16 bytes
    (t < RM·TM·RN) go to out_vec[(row · N + ch0) / 16 + t % RN], row = brow + srow + t / RN: every output byte of
    the subgroup's RM·TM x RN·TN block lands once, in place."""
    tm, tn, rm, rn, n = 16, 16, 4, 2, 96
    brow, srow, ch0 = 64, 16, 32
    tiles = np.arange(rm * rn * tm * tn, dtype=np.int64).reshape(rm, rn, tm, tn)  # a distinct value per byte
    region = np.full((rm * tm * rn, 16), -1, np.int64)  # uvec4 slots as 16 "bytes"
    for i in range(rm):
        for j in range(rn):
            for r in range(tm):  # coopMatStoreNV row-major: row r at offset + r·stride
                region[i * tm * rn + j + r * rn] = tiles[i, j, r]
    out = np.full(((brow + srow + rm * tm + 1) * n // 16, 16), -1, np.int64)
    for t in range(rm * tm * rn):
        row = brow + srow + t // rn
        out[(row * n + ch0) // 16 + t % rn] = region[t]
    full = out.reshape(-1, n)
    want = tiles.transpose(0, 2, 1, 3).reshape(rm * tm, rn * tn)
    np.testing.assert_array_equal(full[brow + srow:brow + srow + rm * tm, ch0:ch0 + rn * tn], want)
    assert (full >= 0).sum() == want.size


def _conv_problem(shape, seed):
    nb, cin, cout, h, w = shape
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (nb, cin, h, w), dtype=np.int8)
    wt = rng.integers(-128, 128, (cout, cin), dtype=np.int8)
    return x, wt


@pytest.mark.parametrize("shape,splits", [((2, 40, 24, 5, 7), 1), ((2, 40, 24, 5, 7), 2), ((3, 100, 40, 3, 9), 3),
                                          ((1, 64, 16, 1, 1), 4)])
def test_split_k_reduce_on_the_device_against_torch(device, shape, splits):
    """The reduce dispatch (coopmat_splitk_reduce.glsl) on this device: P partial sums over slices of K (as the
    GEMM's slices split it) → int8 NHWC, exactly torch's conv (conv_pw.reference) for batch > 1, M not a multiple of
    the workgroup, Cout padded to 16."""
    nb, cin, cout, h, w = shape
    x, wt = _conv_problem(shape, seed=splits)
    pixels, n = nb * h * w, -(-cout // 16) * 16
    a = np.ascontiguousarray(x.transpose(0, 2, 3, 1).reshape(pixels, cin)).astype(np.int64)
    b = wt.T.astype(np.int64)
    bounds = np.linspace(0, cin, splits + 1).astype(int)
    partials = np.zeros((splits, pixels, n), np.int32)
    for z in range(splits):
        partials[z, :, :cout] = a[:, bounds[z]:bounds[z + 1]] @ b[bounds[z]:bounds[z + 1]]
    scales, bias = CM.conv_parameters(cout, n)
    sums = np.zeros(n, np.int32)
    sums[:cout] = wt.astype(np.int32).sum(axis=1)
    got = CC.run_reduce(device, partials, sums, scales, bias, conv_pw.DEFAULT_QPARAMS)
    want = conv_pw.reference(x, wt, scales[:cout], bias[:cout], conv_pw.DEFAULT_QPARAMS).numpy()
    np.testing.assert_array_equal(got[:, :cout], want.transpose(0, 2, 3, 1).reshape(pixels, cout))


def test_split_k_reduce_refuses_bad_input(device):
    with pytest.raises(ValueError, match="multiple of 16"):
        CC.run_reduce(device, np.zeros((1, 4, 24), np.int32), np.zeros(24), np.zeros(24), np.zeros(24),
                      conv_pw.DEFAULT_QPARAMS)
    with pytest.raises(ValueError, match="scales must have N=16"):
        CC.run_reduce(device, np.zeros((2, 4, 16), np.int32), np.zeros(16), np.zeros(8), np.zeros(16),
                      conv_pw.DEFAULT_QPARAMS)
    with pytest.raises(ValueError, match=r"\(P, M, N\)"):
        CC.run_reduce(device, np.zeros((4, 16), np.int32), np.zeros(16), np.zeros(16), np.zeros(16),
                      conv_pw.DEFAULT_QPARAMS)


def test_probe_sweep_parameters():
    spec = CM.CoopmatPeakSpec((16, 16, 32), subgroups=16, iterations=3, chains=16, warps=8)
    assert spec.macs() == 16 * 3 * 16 * 16 * 16 * 32
    a, b = spec.operands()
    assert spec.reference(a, b).shape == (16, 16, 16)
    with pytest.raises(ValueError, match="chains must be one of"):
        CM.CoopmatPeakSpec((16, 16, 32), subgroups=8, iterations=1, chains=5)
    with pytest.raises(ValueError, match="multiple of 8"):
        CM.CoopmatPeakSpec((16, 16, 32), subgroups=12, iterations=1, warps=8)
    with pytest.raises(ValueError, match="warps"):
        CM.CoopmatPeakSpec((16, 16, 32), subgroups=12, iterations=1, warps=3)
    for chains in (3, 12, 16):
        compile_shader("coopmat_peak", defines={"CHAINS": chains}, target_env=CM.TARGET_ENV)
    configs = S.probe_configs(132 * 64, 132)
    assert {c for _, c in [(t, s.chains) for t, s in configs if t == "chains"]} == set(CM.PROBE_CHAINS)


def test_clock_sampler_degrades_cleanly_without_a_source(device):
    if device.info.vendor == "NVIDIA":
        pytest.skip("an NVIDIA device has a clock source")
    with ClockSampler(device, interval_ms=10) as clocks:
        pass
    cols = clocks.columns()
    assert set(cols) == set(CLOCK_COLUMNS)
    assert np.isnan(cols["sm_clock_mhz_median"]) and cols["clock_samples"] == 0
    assert "not an NVIDIA GPU" in cols["clock_note"] and cols["clock_source"] == "none"


class _FakeInfo:
    vendor, name = "NVIDIA", "NVIDIA H200"


class _FakeDevice:
    info = _FakeInfo()


def test_clock_sampler_reads_nvidia_smi(tmp_path, monkeypatch):
    """The nvidia-smi path with a stand-in nvidia-smi on PATH (and no NVML): samples while the block runs, the
    median and the max clock in the columns; "[N/A]" power reads as NaN."""
    import time
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\ncase \"$*\" in *-lms*) while true; do echo '1755, 1980, 612.5'; sleep 0.02; "
                      "done;; *) echo '1980, 1980, [N/A]';; esac\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML: the command line
    with ClockSampler(_FakeDevice(), interval_ms=20) as clocks:
        time.sleep(0.3)
    cols = clocks.columns()
    assert cols["clock_source"] == "nvidia-smi" and cols["clock_samples"] >= 4
    assert cols["sm_clock_mhz_median"] == 1755 and cols["sm_clock_mhz_max"] == 1980
    assert cols["max_sm_clock_mhz_limit"] == 1980 and cols["power_w_median"] == 612.5
    assert parse_smi_line("1980, 1980, [N/A]")[:2] == (1980.0, 1980.0) and parse_smi_line("garbage") is None


def test_steps_suite_skips_cleanly(device):
    if device.info.features.get("cooperative_matrix_nv"):
        pytest.skip("this device has cooperative matrices")
    df = S.steps_suite(device, quick=True, show_progress=False)
    assert df["status"].tolist() == ["skipped"] and "cooperative matrix" in df["reason"].iloc[0]


def test_steps_suite_control_flow_with_host_stand_ins(device, monkeypatch, tmp_path, capsys):
    """Every step config of a shape runs once, a failing config leaves its error row and the run goes on, rows reach
    the results file as they come, the probe's best row is the roof of probe_fraction."""
    from workbench.measure import ResultsReader, ResultsWriter
    props = pd.DataFrame([{"extension": "NV", "M": 16, "N": 16, "K": 32, "A": "sint8", "B": "sint8", "C": "sint32",
                           "D": "sint32", "scope": 3}])
    monkeypatch.setattr(CM, "properties", lambda dev: props)
    monkeypatch.setattr(CM, "unsupported_reason", lambda dev, p=None: None)
    timing = lambda: (np.full(6, 1e5), np.full(6, 1.1e5))  # noqa: E731
    monkeypatch.setattr(CM, "run_peak", lambda dev, spec, sample=None, **kw: (timing() if sample else 1e4, 0))
    monkeypatch.setattr(CM, "run_conv", lambda dev, spec, a, b, sample=None, **kw: (timing(), 0, 3))
    monkeypatch.setattr(CM, "run_gemm", lambda dev, spec, a, b, sample=None, **kw: (timing(), 0, 3))

    def fake_run(dev, spec, a, b, sample=None, **kw):
        if spec.epilogue == "direct":
            raise RuntimeError("planted failure")
        return timing(), (None if spec.diagnostic else 0), 3
    monkeypatch.setattr(CC, "run", fake_run)
    shape = (1, 64, 64, 16, 16)
    with ResultsWriter(tmp_path / "coopmat_steps", {}) as writer:
        df = S.steps_suite(device, writer, shapes=[shape], show_progress=True)
    conv = df[df["shape"] == "1x64x16x16→64"]
    assert len(conv) == len(S.step_configs(shape))
    failed = conv[conv["status"].astype(str).str.startswith("failed")]
    planted = failed[failed["config"].str.contains("direct")]
    assert len(planted) == 1 and "planted failure" in planted["status"].iloc[0]
    too_big = [spec.label for _, spec in S.step_configs(shape) if spec.shared_bytes() > device.info.shared_memory_bytes]
    assert sorted(failed["config"]) == sorted(too_big + planted["config"].tolist())  # refused with the reason
    assert failed.drop(planted.index)["status"].str.contains("shared memory").all()
    assert (conv["step"] == "5 diagnostic").sum() == 3
    probes = df[df["kernel"] == "coopmat peak sweep"]
    assert len(probes) == len(S.probe_configs(1, 1))
    if "NVIDIA" not in device.info.name:  # no clock source: NaN clocks (an NVIDIA device has NVML / nvidia-smi)
        assert probes["sm_clock_mhz_median"].isna().all()
    ok = conv[conv["status"] == "ok"]
    np.testing.assert_allclose(ok["probe_fraction"], ok["GOP/s"] / probes["GOP/s"].max())
    assert len(ResultsReader(tmp_path).load("coopmat_steps")) == len(df)
    assert "FAILED" in capsys.readouterr().out
