"""The ISA of every offline GPU (workbench.vendors.isa, workbench.etvk.isa, `workbench isa`): the parsers on lines
written here (CI), the real ISA of shaders written here behind the Mesa build, the planted changes counted and
diffed, bad input refused in one line; ET-VK's GEMV and cooperative-matrix linear behind the checkout."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.toolchain.shaders import compile_glsl
from workbench.vendors import isa, mesa

CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set: no ExecuTorch checkout")
OFFLINE = ("a740", "a660", "mali-g610", "mali-g52", "rdna2", "rdna3")

# ---- the parsers, on ISA lines written here --------------------------------------------------------------------

IR3 = """\
; num_ubos:           0
@in(r0.x)	in1 (wrmask=0x7)
shps #l5
getone #l5
resinfo.b.untyped.1d.u32.1.imm.base0 r63.x, 1
(sy)(ss)shpe
l5:
(jp)add.u r48.x, r48.x, c1.x
isam.v.base0 (u8)(x)hr3.x, r1.y, s#0, t#1
isam.v.base0 (u32)(xyzw)r4.x, r1.y, s#0, t#1
(sy)cov.u16f32 r2.y, hr4.x
(nop2) mad.f32 r2.y, r2.y, r2.w, r1.w
add.f hr1.x, hr1.x, hr2.x
stl.u32 l[r0.w], r2.y, 1
fence.r.w
(ss)nop
(sy)bar.g
(ss)ldl.u32 r3.y, l[r1.x+252], 4
exp2 r3.y, r3.y
stib.b.untyped.1d.u32.1.imm.base0 r3.y, r0.x, 0
end
nop
; CL prog 18/1: 55 instr, 24 nops
"""

VALHALL = """\
   IADD.s32 r1, ^r57, u0
   LD_BUFFER.i32.unsigned.slot0.wait0 @r2, r1, ^r2
   U8_TO_F32 r3, r2.b0
   FMA.f32 r3, ^r4, ^r5, ^r3
   IADD.u32 r3, workgroup_local_pointer.w0, ^r3
   MOV.i32 r4, ^r3
   STORE.i32.slot1.wait1 @r2, ^r4, offset:0
   BARRIER.slot7.wait
   LOAD.i128.unsigned.slot0 @r0:r1:r2:r3, ^r6, offset:0
   FEXP.f32 r0, ^r2, ^r0
"""

ACO = """\
BB0
/* logical preds: / linear preds: / kind: uniform, top-level, */
	 s4: %10:s[4-7] = s_load_dwordx4 %8:s[2-3], 16
	 v1: %13:v[2] = buffer_load_dword %10:s[4-7], %12:v[1], 0 offen storage:buffer
	 v4: %14:v[4-7] = global_load_dwordx4 %1:v[0-1], s[0:1]
	s_waitcnt vmcnt(0)
	 v1: %15:v[4] = v_cvt_f32_ubyte2 %47:v[2][16:24]
	 v8: %30:v[8-15] = v_wmma_i32_16x16x16_iu8 %1:v[0-3], %2:v[4-7], %3:v[8-15]
	 v1: %19:v[6] = v_fmac_f32 %16:v[5], %15:v[4], %18:v[6]
	ds_write_b32 %22:v[3], %21:v[6] storage:shared
	s_barrier
	 v1: %32:v[0] = v_exp_f32 %31:v[0]
	s_endpgm
"""


def test_ir3_lines_are_classed():
    found = isa.instructions(IR3, "a740")
    assert found[-1].opcode == "end"                                  # the padding after `end` is left out
    by = {i.text: i for i in found}
    assert by["shps #l5"].preamble and not by["(jp)add.u r48.x, r48.x, c1.x"].preamble
    u8 = by["isam.v.base0 (u8)(x)hr3.x, r1.y, s#0, t#1"]
    assert (u8.cls, u8.space, u8.bits, u8.group) == ("load", "global", 8, "cat5")
    assert by["isam.v.base0 (u32)(xyzw)r4.x, r1.y, s#0, t#1"].bits == 128
    assert by["(ss)ldl.u32 r3.y, l[r1.x+252], 4"].space == "shared" and by["(ss)ldl.u32 r3.y, l[r1.x+252], 4"].bits == 128
    assert (by["(sy)cov.u16f32 r2.y, hr4.x"].kind, by["(sy)cov.u16f32 r2.y, hr4.x"].group) == ("conversion", "cat1")
    assert by["add.f hr1.x, hr1.x, hr2.x"].kind == "fp16" and by["(nop2) mad.f32 r2.y, r2.y, r2.w, r1.w"].kind == "fp32"
    assert by["exp2 r3.y, r3.y"].kind == "transcendental"
    assert by["(sy)bar.g"].cls == "barrier" and by["fence.r.w"].cls == "sync"
    s = isa.summary(IR3, "a740")
    assert (s["(ss)"], s["(sy)"], s["barriers"], s["shared stores"], s["global stores"]) == (3, 3, 1, 1, 1)


def test_valhall_shared_memory_is_found_through_the_workgroup_pointer():
    found = isa.instructions(VALHALL, "mali-g610")
    spaces = [(i.opcode.split(".")[0], i.space, i.bits) for i in found if i.cls in ("load", "store")]
    assert spaces == [("LD_BUFFER", "global", 32), ("STORE", "shared", 32), ("LOAD", "global", 128)]
    units = {i.opcode.split(".")[0]: i.group for i in found}
    assert (units["FMA"], units["U8_TO_F32"], units["FEXP"], units["BARRIER"]) == ("fma", "cvt", "sfu", "ls")


def test_aco_lines_are_classed():
    s = isa.summary(ACO, "rdna3")
    assert (s["matrix"], s["constant loads"], s["global loads"], s["shared stores"], s["barriers"]) == (1, 1, 2, 1, 1)
    assert (s["alu conversion"], s["alu fp32"], s["alu transcendental"], s["syncs"], s["control"]) == (1, 1, 1, 1, 1)
    assert s["load bits"] == 128 + 32 + 128


def test_diff_of_texts_counts_and_aligns():
    more = IR3.replace("exp2 r3.y, r3.y\n", "exp2 r3.y, r3.y\nisam.v.base0 (u8)(x)hr5.x, r1.y, s#0, t#1\n")
    d = isa.diff(IR3, more, "a740", labels=("before", "after"))
    row = d.table.set_index("count").loc["global loads"]
    assert (row["before"], row["after"], row["delta"]) == (2, 3, 1)
    assert [h[0] for h in d.hunks] == ["insert"]
    assert "+ isam.v.base0 (u8)(x)hr5.x" in d.text


def test_bad_input_is_refused_in_one_line(capsys):
    with pytest.raises(ValueError, match="unknown GPU 'a999'"):
        isa.instructions(IR3, "a999")
    with pytest.raises(TypeError, match="expected the ISA as text"):
        isa.instructions(b"\x00", "a740")
    for argv, expected in ((["isa", "shaders/copy.glsl", "--gpu", "a999"], "unknown GPU 'a999'"),
                           (["isa", "no/such/file.glsl"], "no shader file no/such/file.glsl"),
                           (["isa", ""], "expected a target")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0], err


# ---- the offline compilers (the Mesa build) ----------------------------------------------------------------------

HEAD = """#version 450
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
layout(local_size_x_id = 0) in;
layout(std430, set = 0, binding = 0) writeonly buffer Out { uint t_out[]; };
layout(std430, set = 0, binding = 1) readonly buffer In8 { uint8_t t_bytes[]; };
layout(std430, set = 0, binding = 2) readonly buffer In32 { uint t_words[]; };
layout(push_constant) uniform P { int stride; } pc;
"""
# 4 scalar 8-bit loads a stride apart (no vectorizer can merge them) vs 1 load of a 32-bit word (4 bytes); and
# the same word read as a u8vec4, which ir3 loads byte by byte (the mechanism behind #12444)
SCALAR_LOADS = HEAD + """void main() {
  const uint i = gl_GlobalInvocationID.x;
  const int s = pc.stride;
  t_out[i] = uint(t_bytes[i]) + uint(t_bytes[i + s]) * 3u + uint(t_bytes[i + 2 * s]) * 5u + uint(t_bytes[i + 3 * s]) * 7u;
}
"""
VECTOR_LOAD = HEAD + """void main() {
  const uint i = gl_GlobalInvocationID.x;
  const uvec4 v = (uvec4(t_words[i]) >> uvec4(0, 8, 16, 24)) & 255u;
  t_out[i] = v.x + v.y * 3u + v.z * 5u + v.w * 7u;
}
"""
U8VEC4_LOAD = VECTOR_LOAD.replace("uint t_words[]", "u8vec4 t_words[]").replace(
    "(uvec4(t_words[i]) >> uvec4(0, 8, 16, 24)) & 255u", "uvec4(t_words[i])")
BARRIER = HEAD.replace("layout(local_size_x_id = 0) in;", "layout(local_size_x = 128) in;") + """
shared uint s_tile[128];
void main() {
  const uint l = gl_LocalInvocationID.x;
  s_tile[l] = t_words[gl_GlobalInvocationID.x];
  barrier();
  t_out[gl_GlobalInvocationID.x] = s_tile[127u - l];
}
"""


def _isa(text: str, name: str, gpu: str, local=(64, 1, 1)):
    got = isa.compile_isa({"shader": compile_glsl(text, name=name), "name": name,
                           "local_size": None if "local_size_x =" in text else local}, gpu)
    assert got.error is None, got.error
    return got


@pytest.mark.parametrize("gpu", OFFLINE)
def test_every_offline_gpu_gives_its_isa(mesa_build, gpu):
    got = _isa(VECTOR_LOAD, "vector_load", gpu)
    names = [r["name"] for r in got.representations]
    assert got.text and any(n in names for n in isa.ISA_NAMES[mesa.check_gpu(gpu).driver]), names
    s = isa.summary(got.text, gpu)
    assert s["instructions"] > 3 and s["stores"] >= 1 and s["loads"] >= 1


def test_a_second_look_compiles_nothing(mesa_build):
    from workbench.vendors import stats_cache
    _isa(VECTOR_LOAD, "vector_load", "a740")
    before = stats_cache.counts()["compiled"]
    again = _isa(VECTOR_LOAD, "vector_load", "a740")
    assert stats_cache.counts()["compiled"] == before and again.text


def test_ir3_counts_agree_with_ir3s_own_footer(mesa_build):
    text = _isa(BARRIER, "barrier", "a740").text
    footer = isa.ir3_footer(text)
    main_part = [i for i in isa.instructions(text, "a740") if not i.preamble]
    for cat in ("cat1", "cat2", "cat3", "cat4", "cat5", "cat6", "cat7"):
        assert sum(i.group == cat for i in main_part) == footer.get(cat, 0), (cat, footer)
    assert sum(i.flags.count("(ss)") for i in main_part) == footer["(ss)"]
    assert sum(i.flags.count("(sy)") for i in main_part) == footer["(sy)"]


@pytest.mark.parametrize("gpu", ("a740", "mali-g610", "rdna3"))
def test_planted_loads_and_barrier_are_counted_and_diffed(mesa_build, gpu):
    scalar = isa.summary(_isa(SCALAR_LOADS, "scalar_loads", gpu).text, gpu)
    vector = isa.summary(_isa(VECTOR_LOAD, "vector_load", gpu).text, gpu)
    assert vector["global loads"] == 1, vector
    assert scalar["global loads"] == 4, scalar
    u8 = isa.summary(_isa(U8VEC4_LOAD, "u8vec4_load", gpu).text, gpu)
    assert u8["global loads"] == (4 if gpu == "a740" else 1), u8  # ir3: one isam (u8) per byte
    barrier = isa.summary(_isa(BARRIER, "barrier", gpu).text, gpu)
    assert barrier["barriers"] == 1 and barrier["shared stores"] == 1 and barrier["shared loads"] == 1, barrier
    d = isa.diff(_isa(SCALAR_LOADS, "scalar_loads", gpu).text, _isa(VECTOR_LOAD, "vector_load", gpu).text, gpu)
    row = d.table.set_index("count").loc["global loads"]
    assert (row["A"], row["B"], row["delta"]) == (4, 1, -3)
    assert d.hunks


def test_cli_isa_counts_and_diff(mesa_build, tmp_path, capsys):
    a, b = tmp_path / "a.glsl", tmp_path / "b.glsl"
    a.write_text(SCALAR_LOADS)
    b.write_text(VECTOR_LOAD)
    assert main(["isa", str(a), "--gpu", "a740,mali-g610", "--counts"]) == 0
    out = capsys.readouterr().out
    assert "global loads" in out and "mali-g610" in out
    assert main(["isa", str(a), "--gpu", "a740", "--diff", str(b)]) == 0
    out = capsys.readouterr().out
    assert "aligned by opcode sequence" in out and "global loads" in out and "@@" in out
    assert main(["isa", str(b), "--gpu", "rdna3"]) == 0
    assert "buffer_load_dword" in capsys.readouterr().out


def test_captured_dispatch_isa(mesa_build):
    from workbench.etvk.isa import counts_table, target
    folder = Path(__file__).parent / "capture_data" / "program"
    t = target(f"{folder}:0")
    assert t.kind == "capture" and len(t.jobs) == 1
    frame = counts_table([t], ["a740", "mali-g610"])
    assert frame["error"].isna().all() and (frame["stores"] >= 1).all()


# ---- ET-VK (the checkout) ----------------------------------------------------------------------------------------

@needs_checkout
def test_12444_u8vec4_weight_loads_on_a7xx(mesa_build):
    """#12444 / #12610: ET-VK's q4 GEMV loads a weight block (4 words) with one 128-bit load on a7xx; read as
    u8vec4 words four rows apart (the pre-#12610 layout) it takes 16 byte loads; as four adjacent u8vec4 Mesa's
    vectorizer merges them back into one."""
    from workbench.etvk import Codegen, make, source
    from workbench.etvk.isa import u8vec4_weight_variant
    gen = Codegen(source(CHECKOUT))
    d = make(gen, "linear_q4gsw_coop", shape=(1, 256), out_features=64, weight_storage="buffer", storage="buffer")
    variants = {"ivec4": d.variant, "block": u8vec4_weight_variant(gen, d.variant),
                "rows": u8vec4_weight_variant(gen, d.variant, "rows")}
    got = isa.compile_isa_many([{"shader": gen.compile(v), "name": k, "spec_constants": d.spec_constants,
                                 "local_size": d.local_size} for k, v in variants.items()], "a740")
    loads = {g.name: isa.summary(g.text, "a740")["global loads"] for g in got}
    assert loads["block"] == loads["ivec4"]
    assert loads["rows"] - loads["ivec4"] == 15  # 16 byte loads where one 128-bit load was


@needs_checkout
def test_22665_coopmat_linear_compiles_to_wmma_on_rdna3(mesa_build):
    from workbench.etvk.isa import isa as isa_of, target
    got = isa_of(target("linear_dq8ca_qw_coopmat", executorch=CHECKOUT), "rdna3")
    found = [i.opcode for i in isa.instructions(got.text, "rdna3") if i.cls == "matrix"]
    assert found and set(found) == {"v_wmma_i32_16x16x16_iu8"}
