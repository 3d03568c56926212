"""Cooperative matrices: shaders compile and validate, host-side logic (sizes, padding, references) and a clean skip
where the device has none (lavapipe). The GPU path itself runs in `workbench bench coopmat` on NVIDIA."""
import numpy as np
import pandas as pd
import pytest

from workbench.benchmarks import coopmat as CB
from workbench.kernels import coopmat
from workbench.toolchain.shaders import compile_shader


@pytest.mark.parametrize("shader,defines", [("coopmat_peak", {"CHAINS": c}) for c in (1, 2, 4, 8)]
                         + [("coopmat_gemm", {"RM": rm, "RN": rn, "SHMEM": sh}) for rm, rn in ((1, 1), (2, 2), (4, 2),
                                                                                             (4, 4)) for sh in (0, 1)]
                         + [("coopmat_gemm", {"RM": 2, "RN": 2, "B_COL": 1})]
                         + [("coopmat_gemm_staged", {"WM": t["wm"], "WN": t["wn"], "RM": t["rm"], "RN": t["rn"],
                                                     "KSTEPS": t["ksteps"]})
                            for t in CB.GEMM_TILES if t.get("staged")]
                         + [("coopmat_gemm_staged", {"DIAG": d}) for d in (1, 2, 3)]
                         + [("coopmat_gemm_staged", {"STAGES": 3, "KSTEPS": k, "EPILOGUE": e}) for k in (1, 2)
                            for e in (0, 1)]
                         + [("coopmat_gemm_staged", {"EPILOGUE": 1, "RM": rm, "RN": rn, "KSTEPS": 1})
                            for rm, rn in ((2, 2), (4, 2), (4, 4))])
def test_shaders_compile_and_validate(shader, defines):
    spv = compile_shader(shader, defines=defines, target_env=coopmat.TARGET_ENV)  # spirv-val runs on every result
    assert spv.code[:4] == b"\x03\x02\x23\x07"


def test_int8_sizes_filter():
    props = pd.DataFrame([
        {"extension": "NV", "M": 16, "N": 8, "K": 32, "A": "sint8", "B": "sint8", "C": "sint32", "D": "sint32",
         "scope": 3},
        {"extension": "NV", "M": 16, "N": 16, "K": 32, "A": "sint8", "B": "sint8", "C": "sint32", "D": "sint32",
         "scope": 3},
        {"extension": "NV", "M": 16, "N": 16, "K": 16, "A": "float16", "B": "float16", "C": "float32",
         "D": "float32", "scope": 3},
        {"extension": "KHR", "M": 16, "N": 16, "K": 32, "A": "sint8", "B": "sint8", "C": "sint32", "D": "sint32",
         "scope": 3}])
    assert coopmat.int8_sizes(props) == [(16, 8, 32), (16, 16, 32)]
    assert coopmat.int8_sizes(props, "KHR") == [(16, 16, 32)]
    assert coopmat.int8_sizes(props.iloc[0:0]) == []


def test_probe_reference_and_counts():
    spec = coopmat.CoopmatPeakSpec((16, 16, 32), subgroups=8, iterations=3, chains=2)
    assert spec.macs() == 8 * 3 * 2 * 16 * 16 * 32
    a, b = spec.operands()
    ref = spec.reference(a, b)
    assert ref.shape == (2, 16, 16)
    np.testing.assert_array_equal(ref[1], 3 * (a.astype(np.int64) @ b[1].astype(np.int64)))
    with pytest.raises(ValueError, match="multiple of 4"):
        coopmat.CoopmatPeakSpec((16, 16, 32), subgroups=6, iterations=1)


def test_gemm_padding_and_reference():
    spec = coopmat.CoopmatGemmSpec((2, 40, 24, 5, 7), (16, 16, 32), rm=2, rn=1)
    m, n, k = spec.gemm
    assert (m, n, k) == (96, 32, 64)  # 70 pixels -> 2 x 16-row tiles; Cout 24 -> 16; Cin 40 -> 32
    assert spec.subgroups() == (96 // 32) * (32 // 16)
    assert spec.macs() == 2 * 5 * 7 * 40 * 24
    a, b = coopmat.gemm_operands(spec)
    assert not a[70:].any() and not a[:, 40:].any() and not b[40:].any() and not b[:, 24:].any()
    ref = coopmat.gemm_reference(a, b)
    np.testing.assert_array_equal(ref[:70, :24], a[:70, :40].astype(np.int64) @ b[:40, :24].astype(np.int64))
    assert not ref[70:].any() and not ref[:, 24:].any()


def test_clean_skip_without_cooperative_matrix(device):
    if device.info.features.get("cooperative_matrix_nv"):
        pytest.skip("this device has cooperative matrices")
    reason = coopmat.unsupported_reason(device)
    assert reason and "cooperative matrix" in reason
    df = CB.bench_suite(device, quick=True, show_progress=False)
    assert df["status"].tolist() == ["skipped"] and df["reason"].iloc[0] == reason


def test_shader_addressing_on_the_host():
    """The offsets and strides the shaders pass to coopMatLoadNV, replayed on the host: the probe's buffer holds A
    and every B_j where the shader loads them, and the GEMM's tile walk (RM x RN tiles per subgroup, K steps of TK,
    16-byte units) covers C exactly once and equals the reference."""
    tm, tn, tk = 16, 8, 32
    spec = coopmat.CoopmatPeakSpec((tm, tn, tk), subgroups=4, iterations=2, chains=4)
    a, b = spec.operands(seed=3)
    buf = coopmat.probe_operand_buffer(a, b)
    np.testing.assert_array_equal(coopmat.load_tile(buf, 0, tk, tm, tk, False), a)
    for j in range(4):  # as the shader: offset TM·TK + j·TK·TN, stride TK, column-major
        np.testing.assert_array_equal(coopmat.load_tile(buf, tm * tk + j * tk * tn, tk, tk, tn, True), b[j])

    g = coopmat.CoopmatGemmSpec((2, 40, 24, 5, 7), (16, 16, 32), rm=2, rn=1)
    A, B = coopmat.gemm_operands(g, seed=4)
    m, n, k = g.gemm
    tm, tn, tk = g.size
    a_flat, b_flat = A.reshape(-1), B.reshape(-1)
    c = np.full((m, n), -1, np.int64)
    tiles_n = n // (tn * g.rn)
    for sg in range(g.subgroups()):
        row0, col0 = (sg // tiles_n) * tm * g.rm, (sg % tiles_n) * tn * g.rn
        acc = np.zeros((g.rm, g.rn, tm, tn), np.int64)
        for kk in range(0, k, tk):
            for i in range(g.rm):
                off_a = ((row0 + i * tm) * k + kk) // 16 * 16  # the shader's uvec4 offset, in bytes
                ta = coopmat.load_tile(a_flat, off_a, k // 16 * 16, tm, tk, False).astype(np.int64)
                for jj in range(g.rn):
                    off_b = (kk * n + col0 + jj * tn) // 16 * 16
                    tb = coopmat.load_tile(b_flat, off_b, n // 16 * 16, tk, tn, False).astype(np.int64)
                    acc[i, jj] += ta @ tb
        for i in range(g.rm):
            for jj in range(g.rn):
                c[row0 + i * tm:row0 + (i + 1) * tm, col0 + jj * tn:col0 + (jj + 1) * tn] = acc[i, jj]
    np.testing.assert_array_equal(c, coopmat.gemm_reference(A, B))


def test_raw_enumerator(device):
    """The raw two-call enumerator the property queries use (count, then the array), on one lavapipe has:
    VK_EXT_calibrated_timestamps' time domains (0 = the device's own clock)."""
    from workbench.vk.discovery import raw_enumerate
    if "VK_EXT_calibrated_timestamps" not in device.info.extensions:
        pytest.skip("no VK_EXT_calibrated_timestamps")
    domains = raw_enumerate(device.instance, device.physical_device, "vkGetPhysicalDeviceCalibrateableTimeDomainsEXT",
                            "VkTimeDomainEXT", None)
    assert 0 in [int(d) for d in domains]
    assert coopmat.properties(device).columns.tolist()[:4] == ["extension", "M", "N", "K"]


def test_shared_memory_gemm_walk_on_the_host():
    """SHMEM = 1: workgroup w owns the (2·RM·TM) x (2·RN·TN) block (w / blocks_n, w % blocks_n), its subgroup s the
    RM x RN tiles at (s / 2, s % 2) inside; the staged blocks are read back as the shader's coopMatLoadNV reads
    them. Every C element is written once and equals the reference."""
    g = coopmat.CoopmatGemmSpec((1, 40, 40, 3, 11), (16, 16, 32), rm=1, rn=2, shmem=True)
    A, B = coopmat.gemm_operands(g, seed=5)
    m, n, k = g.gemm
    tm, tn, tk = g.size
    bm, bn = 2 * g.rm * tm, 2 * g.rn * tn
    assert m % bm == 0 and n % bn == 0 and g.subgroups() == 4 * (m // bm) * (n // bn)
    c = np.zeros((m, n), np.int64)
    written = np.zeros((m, n), np.int64)
    for wg in range(g.subgroups() // 4):
        r0, c0 = (wg // (n // bn)) * bm, (wg % (n // bn)) * bn
        for sg in range(4):
            row0, col0 = r0 + (sg // 2) * g.rm * tm, c0 + (sg % 2) * g.rn * tn
            acc = np.zeros((g.rm, g.rn, tm, tn), np.int64)
            for kk in range(0, k, tk):
                sa = A[r0:r0 + bm, kk:kk + tk].reshape(-1)   # staged as the shader stages them
                sb = B[kk:kk + tk, c0:c0 + bn].reshape(-1)
                for i in range(g.rm):
                    ta = coopmat.load_tile(sa, (row0 - r0 + i * tm) * tk, tk, tm, tk, False).astype(np.int64)
                    for j in range(g.rn):
                        tb = coopmat.load_tile(sb, col0 - c0 + j * tn, bn, tk, tn, False).astype(np.int64)
                        acc[i, j] += ta @ tb
            for i in range(g.rm):
                for j in range(g.rn):
                    c[row0 + i * tm:row0 + (i + 1) * tm, col0 + j * tn:col0 + (j + 1) * tn] = acc[i, j]
                    written[row0 + i * tm:row0 + (i + 1) * tm, col0 + j * tn:col0 + (j + 1) * tn] += 1
    assert (written == 1).all()
    np.testing.assert_array_equal(c, coopmat.gemm_reference(A, B))


def test_staged_gemm_walk_on_the_host():
    """coopmat_gemm_staged.glsl replayed on the host: workgroup w owns block (w / blocks_n, w % blocks_n); per stage
    thread t moves 16-byte chunks q = t + i·THREADS of A and Bt (row q / CHUNKS) into padded shared rows (ROW =
    CHUNKS + 1 chunks); subgroup s multiplies its RM x RN tiles at (s / WN, s % WN), A row-major and B column-major
    out of those rows. Every C element is written once and equals the reference; the padding is never read."""
    g = coopmat.CoopmatGemmSpec((2, 70, 40, 3, 11), (16, 16, 32), rm=2, rn=1, staged=True, wm=2, wn=2, ksteps=2)
    A, Bt = coopmat.gemm_operands(g, seed=6)
    m, n, k = g.gemm
    tm, tn, tk = g.size
    bm, bn, bk = g.block
    assert (bm, bn, bk) == (64, 32, 64) and (m, n, k) == (128, 64, 128) and Bt.shape == (n, k)
    assert g.shared_bytes() == 2 * (bm + bn) * (bk + 16) and g.workgroups() == (m // bm) * (n // bn)
    chunks, row, threads = bk // 16, bk // 16 + 1, 32 * g.wm * g.wn
    a16, b16 = A.reshape(-1, 16), Bt.reshape(-1, 16)  # uvec4 views, as the shader indexes them
    c = np.zeros((m, n), np.int64)
    written = np.zeros((m, n), np.int64)
    for wg in range(g.workgroups()):
        brow, bcol = (wg // (n // bn)) * bm, (wg % (n // bn)) * bn
        acc = {}
        for s in range(k // bk):
            sa = np.full((bm * row, 16), 99, np.int8)  # 99: padding the shader must never read
            sb = np.full((bn * row, 16), 99, np.int8)
            for t in range(threads):
                for i in range(bm * chunks // threads):
                    q = t + i * threads
                    sa[(q // chunks) * row + q % chunks] = a16[(brow + q // chunks) * (k // 16) + s * chunks
                                                               + q % chunks]
                for i in range(bn * chunks // threads):
                    q = t + i * threads
                    sb[(q // chunks) * row + q % chunks] = b16[(bcol + q // chunks) * (k // 16) + s * chunks
                                                               + q % chunks]
            fa, fb = sa.reshape(-1), sb.reshape(-1)
            for sg in range(g.wm * g.wn):
                srow, scol = (sg // g.wn) * g.rm * tm, (sg % g.wn) * g.rn * tn
                for ks in range(g.ksteps):
                    for i in range(g.rm):
                        ta = coopmat.load_tile(fa, 16 * ((srow + i * tm) * row + ks * tk // 16), 16 * row, tm, tk,
                                               False).astype(np.int64)
                        for j in range(g.rn):
                            tb = coopmat.load_tile(fb, 16 * ((scol + j * tn) * row + ks * tk // 16), 16 * row, tk,
                                                   tn, True).astype(np.int64)
                            key = (brow + srow + i * tm, bcol + scol + j * tn)
                            acc[key] = acc.get(key, 0) + ta @ tb
        for (r0, c0), v in acc.items():
            c[r0:r0 + tm, c0:c0 + tn] = v
            written[r0:r0 + tm, c0:c0 + tn] += 1
    assert (written == 1).all()
    np.testing.assert_array_equal(c, coopmat.gemm_reference(A, Bt.T))
    with pytest.raises(ValueError, match="must divide"):
        coopmat.CoopmatGemmSpec((1, 32, 32, 4, 8), (16, 16, 32), rm=1, rn=1, staged=True, wm=4, wn=4, ksteps=1)


def test_conv_epilogue_reference_matches_the_conv_reference():
    """The cooperative-matrix conv's reference (exact accumulators pixels x Cout → conv_pw.reference_requantize) is
    the pointwise conv's own reference (conv_pw.reference from the NCHW input and the (Cout, Cin) weight), with the
    operands laid out as the kernel reads them (A = NHWC pixels x Cin, Bt = the weight) and batch > 1."""
    from workbench.kernels import conv_pw
    spec = coopmat.CoopmatGemmSpec((2, 40, 24, 5, 7), (16, 16, 32), rm=2, rn=2, staged=True, requant=True,
                                   ksteps=1)
    rng = np.random.default_rng(9)
    x = rng.integers(-128, 128, (2, 40, 5, 7), dtype=np.int8)  # NCHW
    w = rng.integers(-128, 128, (24, 40), dtype=np.int8)
    base = (np.ascontiguousarray(x.transpose(0, 2, 3, 1).reshape(-1, 40)), np.ascontiguousarray(w.T))
    a, bt = coopmat.gemm_operands(spec, base=base)
    m, n, k = spec.gemm
    assert bt.shape == (n, k) and spec.bytes_moved() == m * k + k * n + m * n + 12 * n
    scales, bias = coopmat.conv_parameters(24, n)
    sums = bt.astype(np.int32).sum(axis=1)
    exact = coopmat.gemm_reference(*base)
    got = coopmat.conv_reference(exact, sums, scales, bias, conv_pw.DEFAULT_QPARAMS)
    want = conv_pw.reference(x, w, scales[:24], bias[:24], conv_pw.DEFAULT_QPARAMS).numpy()
    np.testing.assert_array_equal(got, want.transpose(0, 2, 3, 1).reshape(-1, 24))
    with pytest.raises(ValueError, match="requant"):
        coopmat.CoopmatGemmSpec((1, 32, 32, 4, 8), (16, 16, 32), requant=True)


def test_suite_control_flow_with_host_stand_ins(device, monkeypatch, capsys):
    """The supported path of bench_suite (probe sizes x chains, GEMM tiles x shapes, refused variants, summary)
    with the device calls replaced by stand-ins: no cooperative matrix here to run them on."""
    import vulkan as vk
    props = pd.DataFrame([{"extension": "NV", "M": 16, "N": n, "K": 32, "A": "sint8", "B": "sint8", "C": "sint32",
                           "D": "sint32", "scope": 3} for n in (8, 16)])
    monkeypatch.setattr(CB, "properties", lambda dev: props)
    monkeypatch.setattr(CB, "unsupported_reason", lambda dev, p=None: None)
    timing = lambda: (np.full(6, 1e5), np.full(6, 1.1e5))  # noqa: E731

    def fake_peak(dev, spec, sample=None, **kw):
        if spec.chains == 8:
            raise vk.VkErrorUnknown("refused")
        return (timing() if sample is not None else 1e4), 0

    monkeypatch.setattr(CB, "run_peak", fake_peak)
    def fake_gemm(dev, spec, a, b, sample=None, **kw):  # the three-stage tiles fastest: the diagnostics
        t = timing()                                          # (two-stage builds) must still find their tile
        return ((t[0] / 2, t[1]) if spec.stages == 3 else t), 0, 3

    monkeypatch.setattr(CB, "run_gemm", fake_gemm)
    monkeypatch.setattr(CB, "run_conv", lambda dev, spec, a, bt, sample=None, **kw: (timing(), 0, 3))
    df = CB.bench_suite(device, show_progress=False, shapes=[(1, 32, 32, 4, 8)])
    probes = df[df["kernel"] == "coopmat peak"]
    assert len(probes) == 2 * 3 and (probes["status"].str.startswith("failed")).sum() == 2
    conv = df[df["kernel"] == "coopmat conv"]  # the staged tiles that fit, with the int8 epilogue
    assert len(conv) and conv["tile"].str.endswith("int8 out").all() and (conv["max_lsb_diff"] == 0).all()
    gemm = df[(df["kernel"] == "coopmat gemm") & ~df["method"].str.startswith("torch")]  # torch rows on CUDA hosts
    fits = [t for t in CB.GEMM_TILES  # variants needing more shared memory than the device has are left out
            if coopmat.CoopmatGemmSpec((1, 32, 32, 4, 8), (16, 16, 32), **t).shared_bytes()
            <= device.info.shared_memory_bytes]
    checked = gemm[~gemm["status"].str.startswith("diagnostic")]
    assert len(checked) == len(fits) and set(gemm["coop_size"]) == {"16x16x32"}  # N = 8 tiles: not 16-byte aligned
    diagnostic = gemm[gemm["status"].str.startswith("diagnostic")]  # the best staged tile's two diagnostic builds
    assert diagnostic["tile"].str.endswith(("[no global traffic]", "[MMAs only]", "[MMAs, no C store]")).sum() == 3
    out = capsys.readouterr().out
    assert f"{4 + len(fits) + len(conv)} of {6 + len(fits) + len(conv)} results exact" in out and "of the probe" in out


def test_reflection_skips_cooperative_matrix_locals():
    """Function-local cooperative-matrix variables are no part of the interface; reflection must not trip on their
    type (it did on the H200, the first device to build these pipelines)."""
    from workbench.toolchain.shaders import compile_shader
    from workbench.vk.spirv import reflect
    peak = reflect(compile_shader("coopmat_peak", defines={"CHAINS": 2}, target_env=coopmat.TARGET_ENV).code)
    assert [b.kind for b in peak.bindings] == ["storage_buffer", "storage_buffer"]
    gemm = reflect(compile_shader("coopmat_gemm", target_env=coopmat.TARGET_ENV).code)
    assert [b.kind for b in gemm.bindings] == ["storage_buffer"] * 3
