"""The anchor (NVIDIA's vk_cooperative_matrix_perf through the workbench) and the operand-load variants beyond it.

lavapipe (Mesa 22.3) has no cooperative matrix of any kind, so nothing here multiplies on a device: the tests check
what can be checked without one — the sample's discovery from its own build script, the rewrite of its buffer
references into descriptors (compiled and validated by the workbench's glslang, reflected by the runtime), the tilings
the sample's host program would run for a given property list, its specialization constants, the correctness check,
the variants' layout math, that every variant compiles, and the suites' one-line refusals. Tests that read the sample
need a checkout ($WORKBENCH_COOPMAT_PERF) and skip without one; none is in the repository.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from workbench.benchmarks import coopmat_anchor as A
from workbench.kernels import coopmat_conv as CC
from workbench.toolchain.shaders import compile_shader
from workbench.vk import spirv as sp

SAMPLE = os.environ.get(A.ENV)
needs_sample = pytest.mark.skipif(not (SAMPLE and Path(SAMPLE, "shaders", "shmem.comp").is_file()),
                                  reason=f"no vk_cooperative_matrix_perf checkout (set {A.ENV})")

# an H200-like property list: the KHR subgroup entries and the NV2 flexible entries the sample reads
KHR = [{"extension": "KHR", "M": m, "N": n, "K": k, "A": a, "B": a, "C": c, "D": c, "scope": 3}
       for m, n, k, a, c in ((16, 16, 32, "sint8", "sint32"), (16, 8, 32, "sint8", "sint32"),
                             (16, 16, 16, "float16", "float16"), (16, 8, 16, "float16", "float32"),
                             (16, 8, 8, "float16", "float32"))]
NV = [{**e, "extension": "NV"} for e in KHR]
FLEX = [{"extension": "NV2", "M": 32, "N": 32, "K": 32, "A": "sint8", "B": "sint8", "C": "sint32", "D": "sint32",
         "saturating": False, "scope": 2, "invocations": i} for i in (256, 128, 512)]
FLEX += [{**FLEX[0], "A": "float16", "B": "float16", "C": "float16", "D": "float16", "K": 16}]


def fake_shaders():
    return [A.SampleShader(kind, types, Path(f"{kind}.comp"), ()) for kind in ("shmem", "workgroup")
            for types in A.TYPES]


def test_missing_folder_is_one_line(tmp_path):
    with pytest.raises(A.SampleError, match="is not a folder") as info:
        A.sample_dir(tmp_path / "absent")
    assert "\n" not in str(info.value)
    with pytest.raises(A.SampleError, match="expected shaders/shmem.comp"):
        A.sample_dir(tmp_path)
    assert A.main(["--sample", str(tmp_path / "absent")]) == 2


def test_no_checkout_named_is_a_skipped_row(device, monkeypatch):
    monkeypatch.delenv(A.ENV, raising=False)
    df = A.anchor_suite(device, show_progress=False)
    assert list(df["status"]) == ["skipped"] and A.ENV in df["reason"][0]


def test_variants_follow_the_host_program():
    found = A.variants(fake_shaders(), KHR + NV, FLEX)
    shmem_s8 = [v for v in found if v.shader.name == "shmems8_s32"]
    # three tiles (no 256x256 for 32-bit results) x B row / column major for 16x16x32, TILE_K 64; 16x8x32 only with B
    # column-major (a row-major B fragment row of 8 int8 is not 16-byte aligned: the host program skips it)
    assert len(shmem_s8) == 3 * 2 + 3 and {v.tile[2] for v in shmem_s8} == {64}
    assert {v.b_col_major for v in shmem_s8 if v.fragment == (16, 8, 32)} == {True}
    assert {v.invocations for v in shmem_s8} == {256} and (256, 256, 64) not in {v.tile for v in shmem_s8}
    wg = [v for v in found if v.shader.name == "workgroups8_s32"]
    assert {v.invocations for v in wg} == {256, 128} and len(wg) == 2 * 3 * 2  # 512 invocations: not tested
    fp16 = {v.shader.name: v for v in found if v.shader.types == "fp16_fp16"}
    assert fp16["shmemfp16_fp16"].tile[2] == 32 and fp16["workgroupfp16_fp16"].tile[2] == 32
    assert any(v.tile == (256, 256, 32) for v in found if v.shader.name == "shmemfp16_fp16")
    # 16x8x8 fp16->fp32: an 8-element B row is 16 bytes, K = 8 fp16 = 16 bytes: aligned, so it stays
    assert any(v.fragment == (16, 8, 8) for v in found if v.shader.name == "shmemfp16_fp32")
    assert not A.variants(fake_shaders(), NV, [])  # the sample reads the KHR list only
    assert not any(v.shader.kind == "workgroup" for v in A.variants(fake_shaders(), KHR, []))


def test_spec_constants_are_the_host_programs():
    v = A.Variant(fake_shaders()[0], (16, 16, 32), (256, 128, 64), True, 256)
    assert v.gemm(5 * 128 * 128, 512, 512) == (81920, 512, 512) and v.gemm(100, 100, 100) == (256, 128, 128)
    s = v.spec_constants(4096, 2048, 1024)
    assert [s[i] for i in range(11)] == [16, 16, 32, 256, 128, 64, 1024, 1024, 1024, 2048, 2048]
    assert (s[11], s[12], s[13], s[14], s[15], s[16], s[17]) == (2.0, 3.0, True, 64, 256, 64, 128)
    assert (s[18], s[19], s[20], s[21]) == (256, 4096, 2048, 32)
    row = A.Variant(fake_shaders()[0], (16, 16, 32), (128, 256, 64), False, 256).spec_constants(512, 512, 512)
    assert (row[8], row[16], row[17]) == (512, 256, 64)


def test_check_catches_one_wrong_element():
    for types in ("s8_s32", "fp16_fp16"):
        for bc in (False, True):
            a, b, c = A.operands(types, 256, 128, 64, bc)
            bm = b.T if bc else b
            d = (A.ALPHA * (a.astype(np.float64) @ bm.astype(np.float64)) + A.BETA * c).astype(c.dtype)
            rows = A.check_rows(256, 128, 64)
            assert A.check(types, a, b, c, d, rows, bc)[0]
            d[rows[3], 7] += 1 if types == "s8_s32" else 4
            ok, err = A.check(types, a, b, c, d, rows, bc)
            assert not ok and err >= 1


def test_check_rows_cover_every_row_position_of_a_tile():
    for m, tile in ((81920, 256), (147456, 128), (256, 128), (4096, 256)):
        rows = A.check_rows(m, tile)
        assert set(rows % tile) == set(range(tile)) and rows.min() == 0 and rows.max() == m - 1
        assert len(set(rows // tile)) >= min(m // tile, A.CHECK_ROWS)  # tile rows spread over M


@needs_sample
def test_discovery_reads_the_sample_build_script():
    shaders = A.discover(A.sample_dir(SAMPLE))
    names = {s.name for s in shaders}
    assert {"shmems8_s32", "workgroups8_s32", "shmemfp16_fp16", "shmemfp16_fp32"} <= names
    s8 = next(s for s in shaders if s.name == "shmems8_s32")
    assert dict(s8.defines) == {"A_BITS": "8", "A_TYPE": "int8_t", "C_TYPE": "int32_t"}


@needs_sample
@pytest.mark.parametrize("name", ["shmems8_s32", "workgroups8_s32", "shmemfp16_fp16", "workgroupfp16_fp32"])
def test_sample_shaders_compile_with_descriptors(name):
    shader = next(s for s in A.discover(A.sample_dir(SAMPLE)) if s.name == name)
    refl = sp.reflect(A.compile_sample(shader).code)
    assert sorted((b.binding, b.kind) for b in refl.bindings) == [(i, sp.STORAGE_BUFFER) for i in range(4)]
    assert {0, 3, 6, 13, 18, 21 if shader.kind == "shmem" else 20} <= set(refl.spec_constants)
    assert refl.spec_constants[13] == "bool" and refl.spec_constants[11] == "float"


def test_descriptor_source_refuses_an_unknown_shape():
    with pytest.raises(A.SampleError, match="InputAV4"):
        A.descriptor_source("#version 450\nvoid main() {}\n")


# ----- the variants beyond the anchor --------------------------------------------------------------------------

SHAPE = (5, 512, 512, 128, 128)


@pytest.mark.parametrize("vec,ksteps", [(1, 1), (2, 1), (2, 2), (4, 2), (4, 4)])
def test_load_chunks_are_a_permutation(vec, ksteps):
    spec = CC.CoopmatConvSpec(SHAPE, A.COOP, vec=vec, ksteps=ksteps, pad=1)
    bm, bn, bk = spec.block
    for operand, rows in (("A", bm), ("B", bn)):
        got = [c for t in range(spec.threads_per_group()) for c in CC.load_chunks(spec, t, operand)]
        assert sorted(got) == [(r, c) for r in range(rows) for c in range(bk // 16)]
        if vec > 1:  # each thread's chunks of one load group are contiguous in one row
            first = CC.load_chunks(spec, 5, operand)[:vec]
            assert len({r for r, _ in first}) == 1 and [c for _, c in first] == list(range(first[0][1],
                                                                                      first[0][1] + vec))


def test_bank_model():
    # 8 rows of 16 bytes at stride 32 B: rows r and r + 4 share banks (2-way); 48 B: none; 64 B: 4-way
    assert [CC.bank_ways([r * s for r in range(8)]) for s in (32, 48, 64, 80, 128)] == [2, 1, 4, 1, 8]
    assert [CC.fragment_bank_ways(CC.CoopmatConvSpec(SHAPE, A.COOP, pad=p)) for p in range(4)] == [2, 1, 4, 1]
    assert CC.fragment_bank_ways(CC.CoopmatConvSpec(SHAPE, A.COOP, ksteps=2, pad=0)) == 4
    assert CC.fragment_bank_ways(CC.CoopmatConvSpec(SHAPE, A.COOP, ksteps=2, pad=1)) == 1


def test_options_are_refused_in_one_line():
    for kw, match in (({"pad": 4}, "pad"), ({"vec": 3}, "vec"), ({"frags": 3}, "frags"),
                      ({"vec": 4, "ksteps": 1}, "vec=4")):
        with pytest.raises(ValueError, match=match):
            CC.CoopmatConvSpec(SHAPE, A.COOP, **kw)
    for kw, match in (({"epilogue": "sectors"}, "epilogue"), ({"diagnostic": 1}, "diagnostic"),
                      ({"block": (256, 128, 40)}, "BK")):
        with pytest.raises(ValueError, match=match):
            CC.WorkgroupGemmSpec(SHAPE, **kw)


def test_every_beyond_variant_compiles_and_validates():
    for shape in A.CONV_SHAPES.values():
        configs = A.beyond_configs(shape)
        assert {s for s, _ in configs} >= {"0 landed", "1 pad", "2 vec", "3 k tile", "4 frag prefetch",
                                          "5 register pipeline", "6 workgroup scope", "7 diagnostic"}
    seen = set()
    for _, spec in A.beyond_configs(SHAPE):
        key = (spec.shader, tuple(sorted(spec.defines().items())))
        if key in seen:
            continue
        seen.add(key)
        refl = sp.reflect(compile_shader(spec.shader, defines=spec.defines(), target_env="vulkan1.3").code)
        assert refl.local_size == (spec.threads_per_group(), 1, 1)
        assert len(refl.bindings) == (3 if not spec.requant else 6)


def test_workgroup_gemm_geometry():
    spec = CC.WorkgroupGemmSpec(SHAPE, (256, 128, 64), 256, "int8")
    assert spec.gemm == (81920, 512, 512) and spec.workgroups() == 320 * 4
    assert spec.bytes_moved() == 81920 * 512 * 2 + 512 * 512 + 12 * 512
    from workbench.kernels.conv_pw import DEFAULT_QPARAMS
    assert len(spec.push_constants(DEFAULT_QPARAMS)) == 40 and len(CC.WorkgroupGemmSpec(SHAPE).push_constants()) == 16


def test_lavapipe_says_why_not(device):
    if device.info.features.get("cooperative_matrix2_nv"):
        pytest.skip(f"{device.info.name} has VK_NV_cooperative_matrix2")
    assert "VK_NV_cooperative_matrix2" in CC.workgroup_reason(device)
    assert device.cooperative_matrix_flexible_properties() == []
    if not device.info.features.get("cooperative_matrix_khr"):
        assert "VK_KHR_cooperative_matrix" in A.unsupported_reason(device)
        df = A.beyond_suite(device, show_progress=False, quick=True)
        assert list(df["status"]) == ["skipped"]


@needs_sample
def test_anchor_on_this_device(device):
    """A real small run where the device has VK_KHR_cooperative_matrix; else the row that says why not."""
    df = A.anchor_suite(device, sample=SAMPLE, quick=True, show_progress=False)
    if A.unsupported_reason(device):
        assert list(df["status"]) == ["skipped"] and "cooperative_matrix" in df["reason"][0]
        pytest.skip(df["reason"][0])
    assert (df["status"] == "ok").all(), df[["impl", "tiling", "status"]]


def test_the_workgroup_scope_kernel_joins_the_anchor_only_where_the_device_runs_it(device):
    """On a device without VK_NV_cooperative_matrix2 (lavapipe) the anchor's workbench rows are the staged kernel's;
    the workgroup-scope pair is added only where `workgroup_reason` finds nothing missing."""
    from workbench.benchmarks import coopmat_anchor as A
    from workbench.kernels import coopmat_conv as CC
    shape = A.CONV_SHAPES["9x256"]
    assert [impl for impl, _ in A._workbench_specs(shape)] == ["workbench gemm", "workbench conv"]
    with_device = A._workbench_specs(shape, device)
    wg = [s for _, s in with_device if isinstance(s, CC.WorkgroupGemmSpec)]
    assert bool(wg) == (CC.workgroup_reason(device, CC.WorkgroupGemmSpec(shape, **A.WG_BEST)) is None)
