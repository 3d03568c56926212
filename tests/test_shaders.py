"""Tests for workbench.toolchain.shaders: compiling, caching, error reports, YAML variants, the int8 dot include."""

import os
import shutil
import subprocess
import textwrap

import pytest

from workbench.toolchain import shaders
from workbench.toolchain.shaders import (ShaderCompileError, compile_glsl, compile_shader, compile_variant, variants)

pytestmark = pytest.mark.skipif(shutil.which("glslc") is None or shutil.which("spirv-val") is None,
                                reason="needs glslc and spirv-val")

SPIRV_MAGIC = 0x07230203

SHADER_HEAD = """\
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Out { int outv[]; };
"""

COPY_SHADER = SHADER_HEAD + """\
layout(set = 0, binding = 1) readonly buffer In { int inv[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  outv[i] = inv[i] + OFFSET;
}
"""

DOT_SHADER = SHADER_HEAD + """\
layout(set = 0, binding = 1) readonly buffer In { ivec4 inv[]; };
#include "int8_dot.glslh"
void main() {
  uint i = gl_GlobalInvocationID.x;
  ivec4 v = inv[i];
  outv[i] = dot4x8_acc_sat(v.x, v.y, v.z) + pack4x8(v) + sext8(v.w, 3);
}
"""


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    """Each test gets an empty cache and never touches the user's."""
    cache = tmp_path / "spirv-cache"
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(cache))
    shaders.clear_memory_cache()
    yield cache
    shaders.clear_memory_cache()


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def disassemble(spv):
    result = subprocess.run(["spirv-dis", "-"], input=spv.code, capture_output=True, check=True)
    return result.stdout.decode()


# ---------------------------------------------------------------------------------------------
# Compiling and caching


def test_compile_small_shader(fresh_cache):
    spv = compile_glsl(COPY_SHADER, defines={"OFFSET": 3}, name="copy")
    assert spv.words[0] == SPIRV_MAGIC
    text = disassemble(spv)
    assert 'OpName %Out "Out"' in text  # names stay (the runtime reports bindings by name) ...
    assert "OpSource" not in text and "OpLine" not in text and "shader.comp" not in text  # ... source does not
    assert len(spv.code) == 4 * len(spv.words) > 20
    assert spv.name == "copy" and spv.defines == {"OFFSET": 3} and not spv.cache_hit
    assert (fresh_cache / f"{spv.key}.spv").read_bytes() == spv.code
    assert not list(fresh_cache.glob("*.tmp")), "temp files must be renamed into place"


def test_second_compile_is_a_cache_hit():
    first = compile_glsl(COPY_SHADER, defines={"OFFSET": 3})
    calls = shaders.COMPILER_CALLS
    second = compile_glsl(COPY_SHADER, defines={"OFFSET": 3})
    assert second.cache_hit and second.code == first.code and second.key == first.key
    shaders.clear_memory_cache()  # now only the disk cache can answer
    third = compile_glsl(COPY_SHADER, defines={"OFFSET": 3})
    assert third.cache_hit and third.code == first.code
    assert shaders.COMPILER_CALLS == calls


def test_changed_define_is_a_miss():
    first = compile_glsl(COPY_SHADER, defines={"OFFSET": 3})
    calls = shaders.COMPILER_CALLS
    second = compile_glsl(COPY_SHADER, defines={"OFFSET": 4})
    assert not second.cache_hit and second.key != first.key and second.code != first.code
    assert shaders.COMPILER_CALLS == calls + 1
    # other inputs of the key: optimize flag and target env
    unoptimized = compile_glsl(COPY_SHADER, defines={"OFFSET": 3}, optimize=False)
    assert unoptimized.key != first.key
    # -O promotes the local `i` to a register; without it `i` stays a Function-storage variable
    assert "OpVariable %_ptr_Function_uint Function" in disassemble(unoptimized)
    assert "OpVariable %_ptr_Function_uint Function" not in disassemble(first)
    assert compile_glsl(COPY_SHADER, defines={"OFFSET": 3}, target_env="vulkan1.3").key != first.key


def test_changed_nested_include_is_a_miss_even_with_the_same_mtime(tmp_path):
    include_dir = tmp_path / "inc"
    write(include_dir / "outer.glslh", '#include "inner.glslh"\n')
    inner = write(include_dir / "inner.glslh", "#define OFFSET 1\n")
    source = COPY_SHADER.replace("layout(local", '#include "outer.glslh"\nlayout(local', 1)
    first = compile_glsl(source, include_dirs=[include_dir])
    assert compile_glsl(source, include_dirs=[include_dir]).cache_hit

    stat = inner.stat()
    inner.write_text("#define OFFSET 2\n")
    os.utime(inner, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the cache must look at content
    calls = shaders.COMPILER_CALLS
    second = compile_glsl(source, include_dirs=[include_dir])
    assert not second.cache_hit and second.code != first.code
    assert shaders.COMPILER_CALLS == calls + 1


def test_damaged_cache_entry_is_recompiled(fresh_cache):
    first = compile_glsl(COPY_SHADER, defines={"OFFSET": 3})
    (fresh_cache / f"{first.key}.spv").write_bytes(b"garbage")
    shaders.clear_memory_cache()
    again = compile_glsl(COPY_SHADER, defines={"OFFSET": 3})
    assert not again.cache_hit and again.code == first.code


def test_bool_defines_render_as_1_and_0():
    source = "#version 450\n#if FLAG != 1\n#error FLAG is not 1\n#endif\nlayout(local_size_x = 1) in;\nvoid main() {}\n"
    compile_glsl(source, defines={"FLAG": True})
    with pytest.raises(ShaderCompileError, match="FLAG is not 1"):
        compile_glsl(source, defines={"FLAG": False})
    with pytest.raises(ValueError, match="not a C identifier"):
        compile_glsl(source, defines={"BAD-NAME": 1})


def test_compile_shader_reads_the_shader_dir_and_its_includes(tmp_path):
    write(tmp_path / "include" / "offset.glslh", "#define OFFSET 7\n")
    write(tmp_path / "plus7.glsl", COPY_SHADER.replace("layout(local", '#include "offset.glslh"\nlayout(local', 1))
    spv = compile_shader("plus7", shader_dir=tmp_path)
    assert spv.name == "plus7" and spv.source_path == (tmp_path / "plus7.glsl").resolve()
    assert "OpIAdd" in disassemble(spv) and "%int_7" in disassemble(spv)


# ---------------------------------------------------------------------------------------------
# Errors


def test_syntax_error_names_file_line_and_source(tmp_path):
    path = write(tmp_path / "broken.glsl", """\
        #version 450
        layout(local_size_x = 1) in;
        void main() {
          int x = ;
        }
        """)
    with pytest.raises(ShaderCompileError) as caught:
        compile_shader("broken", shader_dir=tmp_path)
    error = caught.value
    assert error.line == 4 and error.path == str(path.resolve())
    text = str(error)
    assert f"{path.resolve()}:4" in text
    assert "syntax error" in error.compiler_message
    assert "> 4 |   int x = ;" in text  # the offending line, marked
    assert "void main() {" in text and "    5 | }" not in text and "  5 | }" in text  # one line of context


def test_error_inside_an_include_names_the_include(tmp_path):
    include_dir = tmp_path / "inc"
    write(include_dir / "helpers.glslh", "int helper() {\n  return undeclared_thing;\n}\n")
    source = "#version 450\n#include \"helpers.glslh\"\nlayout(local_size_x = 1) in;\nvoid main() {}\n"
    with pytest.raises(ShaderCompileError) as caught:
        compile_glsl(source, include_dirs=[include_dir], name="uses_helpers")
    error = caught.value
    assert error.path.endswith("helpers.glslh") and error.line == 2
    assert "helpers.glslh:2" in str(error)
    assert "> 2 |   return undeclared_thing;" in str(error)


def test_inline_source_error_is_named_after_the_shader():
    with pytest.raises(ShaderCompileError, match=r"<probe>:3") as caught:
        compile_glsl("#version 450\nlayout(local_size_x = 1) in;\nvoid main() { nope(); }\n", name="probe")
    assert "> 3 | void main() { nope(); }" in str(caught.value)


def test_validation_failure_is_a_compile_error():
    # OpSDotAccSat declared without its capability: glslc accepts it, spirv-val does not
    source = textwrap.dedent("""\
        #version 450
        #extension GL_EXT_spirv_intrinsics : require
        spirv_instruction(id = 4453) int bad_dot(int a, int b, int acc, spirv_literal int fmt);
        layout(local_size_x = 1) in;
        layout(set = 0, binding = 0) buffer B { int d[]; };
        void main() { d[0] = bad_dot(d[1], d[2], d[3], 0); }
        """)
    with pytest.raises(ShaderCompileError, match="spirv-val") as caught:
        compile_glsl(source, optimize=False)
    assert "DotProduct" in caught.value.compiler_message


def test_unknown_target_env():
    with pytest.raises(ValueError, match="vulkan1.1, vulkan1.2, vulkan1.3"):
        compile_glsl(COPY_SHADER, defines={"OFFSET": 1}, target_env="vulkan1.0")


def test_missing_shader_lists_the_available_ones(tmp_path):
    write(tmp_path / "alpha.glsl", COPY_SHADER)
    write(tmp_path / "beta.glsl", COPY_SHADER)
    with pytest.raises(FileNotFoundError, match="available: alpha, beta"):
        compile_shader("gamma", shader_dir=tmp_path)


def test_missing_include_dir_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        compile_glsl(COPY_SHADER, include_dirs=[tmp_path / "nowhere"])


# ---------------------------------------------------------------------------------------------
# Compiler choice


FAKE_GLSLANG = """\
#!/bin/sh
# a stand-in for glslangValidator: records its arguments, then fails or copies a ready module
if [ "$1" = "--version" ]; then echo "fake glslangValidator 0.0"; exit 0; fi
printf '%s\\n' "$@" > "$FAKE_LOG/argv"
for last; do :; done
cp "$last" "$FAKE_LOG/source.comp"
if [ -n "$FAKE_ERROR_LINE" ]; then
  echo "$last"
  echo "ERROR: $last:$FAKE_ERROR_LINE: 'oops' : undeclared identifier"
  echo "ERROR: 1 compilation errors.  No code generated."
  exit 2
fi
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then cp "$FAKE_SPV" "$2"; fi
  shift
done
"""


@pytest.fixture
def fake_glslang(tmp_path, monkeypatch):
    """Only a (fake) glslangValidator is available; returns the folder where it logs."""
    bin_dir, log_dir = tmp_path / "bin", tmp_path / "log"
    log_dir.mkdir()
    script = write(bin_dir / "glslangValidator", FAKE_GLSLANG)
    script.chmod(0o755)
    ready = compile_glsl(COPY_SHADER, defines={"OFFSET": 1})
    (tmp_path / "ready.spv").write_bytes(ready.code)
    monkeypatch.setattr(shaders, "COMPILERS", ("no-such-glslc-here", "glslangValidator"))
    monkeypatch.setenv("WORKBENCH_GLSLC", "system")  # PATH only, not workbench.toolchain.glslang's build
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(log_dir))
    monkeypatch.setenv("FAKE_SPV", str(tmp_path / "ready.spv"))
    return log_dir


def test_falls_back_to_glslangvalidator(fake_glslang, tmp_path):
    include_dir = write(tmp_path / "inc" / "x.glslh", "#define OFFSET 1\n").parent
    source = "#version 450\n#include \"x.glslh\"\n" + COPY_SHADER.split("\n", 1)[1]
    spv = compile_glsl(source, defines={"N": 3, "USE": True}, include_dirs=[include_dir])
    assert spv.words[0] == SPIRV_MAGIC and not spv.cache_hit
    argv = (fake_glslang / "argv").read_text().splitlines()
    assert argv[:6] == ["-V", "--target-env", "vulkan1.1", "-S", "comp", "-DN=3"]
    assert "-DUSE=1" in argv and f"-I{include_dir.resolve()}" in argv
    assert argv[argv.index("-o") + 1].endswith(".spv")
    # glslangValidator only takes #include once the extension is on
    sent = (fake_glslang / "source.comp").read_text().splitlines()
    assert sent[:3] == ["#version 450", "#extension GL_GOOGLE_include_directive : require", '#include "x.glslh"']


def test_glslangvalidator_errors_point_at_the_original_line(fake_glslang, monkeypatch):
    source = "#version 450\n#include \"int8x4.glslh\"\nlayout(local_size_x = 1) in;\nvoid main() { oops(); }\n"
    monkeypatch.setenv("FAKE_ERROR_LINE", "5")  # line 5 of the sent text = line 4 of ours
    with pytest.raises(ShaderCompileError) as caught:
        compile_glsl(source, name="gv")
    error = caught.value
    assert (error.path, error.line) == ("<gv>", 4)
    assert "> 4 | void main() { oops(); }" in str(error) and "undeclared identifier" in str(error)
    assert "compilation errors" not in str(error)


def test_no_compiler_at_all_says_what_to_install(monkeypatch):
    monkeypatch.setattr(shaders, "COMPILERS", ("no-such-glslc-here", "no-such-glslang-here"))
    monkeypatch.setenv("WORKBENCH_GLSLC", "system")
    with pytest.raises(shaders.ToolNotFoundError, match="Debian package `glslc`.*toolchain.glslang setup"):
        compile_glsl(COPY_SHADER)


# ---------------------------------------------------------------------------------------------
# YAML variants


VARIANT_SHADER = """\
#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Out { int outv[]; };
#ifndef DTYPE
#error DTYPE must be defined
#endif
void main() { outv[0] = WIDTH; }
"""


def test_variants_expand_the_grid_in_yaml_order(tmp_path):
    write(tmp_path / "pixel_shuffle.yaml", """\
        pixel_shuffle:
          parameters: {DTYPE: float, STORAGE: buffer, WIDTH: 4, FAST: false}
          forall:
            DTYPE: [float, half]
          variants:
            - name: pixel_shuffle_buffer
            - name: pixel_shuffle_texture3d
              parameters: {STORAGE: texture3d}
              forall:
                WIDTH: [1, 2]
                DTYPE: [float, {value: half, suffix: fp16}]
            - name: pixel_shuffle_plain
              forall: {}
            - name: pixel_shuffle_flags
              forall:
                FAST: [true, {value: false, suffix: ""}]
        """)
    table = variants("pixel_shuffle", shader_dir=tmp_path)
    base = {"DTYPE": "float", "STORAGE": "buffer", "WIDTH": 4, "FAST": False}
    texture = {**base, "STORAGE": "texture3d"}
    assert list(table) == [
        "pixel_shuffle_buffer_float", "pixel_shuffle_buffer_half",
        "pixel_shuffle_texture3d_1_float", "pixel_shuffle_texture3d_1_fp16",
        "pixel_shuffle_texture3d_2_float", "pixel_shuffle_texture3d_2_fp16",
        "pixel_shuffle_plain", "pixel_shuffle_flags_true", "pixel_shuffle_flags",
    ]
    assert table["pixel_shuffle_buffer_half"] == {**base, "DTYPE": "half"}
    assert table["pixel_shuffle_texture3d_2_fp16"] == {**texture, "WIDTH": 2, "DTYPE": "half"}
    assert table["pixel_shuffle_plain"] == base
    assert table["pixel_shuffle_flags_true"]["FAST"] is True and table["pixel_shuffle_flags"]["FAST"] is False


def test_compile_variant_finds_its_yaml(tmp_path):
    write(tmp_path / "fill.glsl", VARIANT_SHADER)
    write(tmp_path / "fill.yaml", """\
        fill:
          parameters: {DTYPE: int, WIDTH: 1}
          variants:
            - name: fill
              forall: {WIDTH: [5, 9]}
        """)
    write(tmp_path / "other.yaml", "other:\n  parameters: {A: 1}\n  variants: [{name: other_thing}]\n")
    spv = compile_variant("fill_9", shader_dir=tmp_path)
    assert spv.name == "fill_9" and spv.defines == {"DTYPE": "int", "WIDTH": 9}
    assert "%int_9" in disassemble(spv)
    with pytest.raises(LookupError, match="no_such_variant"):
        compile_variant("no_such_variant", shader_dir=tmp_path)


def test_missing_yaml_lists_the_available_ones(tmp_path):
    write(tmp_path / "alpha.yaml", "alpha:\n  variants: [{name: alpha}]\n")
    with pytest.raises(FileNotFoundError, match="available: alpha"):
        variants("beta", shader_dir=tmp_path)


@pytest.mark.parametrize("body, problem", [
    ("wrong_name:\n  variants: [{name: a}]\n", "does not match the file stem"),
    ("bad:\n  variants: [{name: a}]\n  extra: 1\n", "unknown key"),
    ("bad:\n  variants: [{name: a, colour: red}]\n", "unknown key"),
    ("bad:\n  parameters: {D: 1}\n  variants: [{name: a, forall: {D: []}}]\n", "non-empty list"),
    ("bad:\n  parameters: {D: 1}\n  variants: []\n", "non-empty list"),
    ("bad:\n  parameters: {D: 1}\n", "non-empty list"),
    ("bad:\n  parameters: {D: 1}\n  variants: [{name: a, forall: {E: [1]}}]\n", "not declared"),
    ("bad:\n  parameters: {D: 1}\n  variants: [{name: a, parameters: {E: 2}}]\n", "not declared"),
    ("bad:\n  parameters: {D: 1}\n  variants: [{name: a, forall: {D: [1.5]}}]\n", "not a C identifier"),
    ("bad:\n  parameters: {D: 1}\n  variants: [{name: a}, {name: a}]\n", "generated twice"),
    ("bad:\n  parameters: {D: [1, 2]}\n  variants: [{name: a}]\n", "scalar"),
    ("bad:\n  variants: [{forall: {}}]\n", "needs a `name`"),
    ("bad: [1, 2\n", "not valid YAML"),
    ("- just a list\n", "exactly one key"),
])
def test_malformed_yaml_is_a_clear_error(tmp_path, body, problem):
    (tmp_path / "bad.yaml").write_text(body)
    with pytest.raises(ValueError, match=problem) as caught:
        variants("bad", shader_dir=tmp_path)
    assert "bad.yaml" in str(caught.value)


# ---------------------------------------------------------------------------------------------
# The int8 dot-product include


def test_int8_dot_extension_path_emits_sdot_acc_sat():
    spv = compile_glsl(DOT_SHADER, defines={"USE_INT_DOT_EXT": True}, name="dot_ext")
    text = disassemble(spv)
    assert "OpSDotAccSat" in text and "PackedVectorFormat4x8Bit" in text
    assert 'OpExtension "SPV_KHR_integer_dot_product"' in text
    assert "OpCapability DotProductInput4x8BitPacked" in text


@pytest.mark.parametrize("defines", [{}, {"USE_INT_DOT_EXT": 0}])
def test_int8_dot_fallback_path_needs_no_extension(defines):
    spv = compile_glsl(DOT_SHADER, defines=defines, name="dot_fallback")
    text = disassemble(spv)
    assert "OpSDotAccSat" not in text and "OpExtension" not in text
    assert "OpBitFieldSExtract" in text  # the lanes are sign-extended one by one


DOT_RUN_SHADER = """\
#version 450
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) writeonly buffer Out { ivec2 outv[]; };
layout(set = 0, binding = 1) readonly buffer In { ivec4 inv[]; };
#include "int8_dot.glslh"
void main() {
  uint i = gl_GlobalInvocationID.x;
  ivec4 v = inv[i];  // (a, b, acc, unused)
  // y: unpack a, push every lane out of int8 range by 256, repack: must give back a (truncation)
  ivec4 lanes = ivec4(sext8(v.x, 0), sext8(v.x, 1), sext8(v.x, 2), sext8(v.x, 3)) + ivec4(256);
  outv[i] = ivec2(dot4x8_acc_sat(v.x, v.y, v.z), pack4x8(lanes));
}
"""


def dot4x8_acc_sat_reference(a, b, acc):
    import numpy as np

    def lanes(words):
        return (words.astype(np.int32)[:, None] >> np.array([0, 8, 16, 24])).astype(np.int8).astype(np.int64)

    exact = acc.astype(np.int64) + (lanes(a) * lanes(b)).sum(axis=1)
    return np.clip(exact, -2**31, 2**31 - 1).astype(np.int32)


@pytest.mark.parametrize("use_ext", [False, True], ids=["fallback", "OpSDotAccSat"])
def test_int8_dot_matches_numpy_on_the_device(device, use_ext):
    import numpy as np

    if use_ext and not device.info.features.get("integer_dot_product"):
        pytest.skip(f"{device.info.name} has no shaderIntegerDotProduct")
    rng = np.random.default_rng(7)
    n = 4096
    words = rng.integers(-2**31, 2**31, size=(n, 4), dtype=np.int64).astype(np.int32)
    # accumulators within 30000 of the int32 limits, so that many sums saturate
    near = rng.integers(0, 30000, size=n // 2)
    words[: n // 2, 2] = np.where(near % 2 == 0, 2**31 - 1 - near, -2**31 + near)
    # edges: 4 * (-128 * -128) = 65536 and 4 * (-128 * 127) = -65024, one short of the limit and one past it
    edges = [(0x80808080, 0x80808080, 2**31 - 65538), (0x80808080, 0x80808080, 2**31 - 65535),
             (0x80808080, 0x7F7F7F7F, -2**31 + 65025), (0x80808080, 0x7F7F7F7F, -2**31 + 65023),
             (0x04030201, 0x08070605, 0)]
    words[: len(edges), :3] = np.array(edges, dtype=np.int64).astype(np.uint32).view(np.int32)

    spv = compile_glsl(DOT_RUN_SHADER, defines={"USE_INT_DOT_EXT": use_ext}, name="dot_run")
    with device.pipeline(spv, local_size=(64, 1, 1)) as pipeline, device.buffer(words) as inp, \
            device.buffer(nbytes=n * 8) as out:
        device.run(pipeline, [out, inp], (n, 1, 1))
        result = out.download(np.int32).reshape(n, 2)

    expected = dot4x8_acc_sat_reference(words[:, 0], words[:, 1], words[:, 2])
    assert result[4, 0] == 1 * 5 + 2 * 6 + 3 * 7 + 4 * 8
    assert list(result[:4, 0]) == [2**31 - 2, 2**31 - 1, -2**31 + 1, -2**31]
    assert (expected == 2**31 - 1).sum() > 100 and (expected == -2**31).sum() > 100  # saturation is exercised
    np.testing.assert_array_equal(result[:, 0], expected)
    np.testing.assert_array_equal(result[:, 1], words[:, 0])
