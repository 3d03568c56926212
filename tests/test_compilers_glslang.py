"""workbench.toolchain.glslang: glslc / glslangValidator / spirv-val built from Debian 13 source for ET-VK's dialect.

Two kinds of tests:
* no build needed: the cache folder, the missing-build error, the stamp (a second set-up is a no-op), the source
  index parsing, the CLI, how workbench.toolchain.shaders picks its compiler and keys its cache, and that Debian 12's glslc
  rejects the extension in a header (why the build exists);
* build needed (the `glslang_build` fixture): GL_EXT_integer_dot_product from an included header reaching OpSDot /
  OpSDotAccSat (run on the device against numpy), GL_KHR_cooperative_matrix int8 x int8 -> int32, spirv-val and
  spirv-dis of the build, ET-VK's dialect compiled without the shim. They run when the build is set up; otherwise
  they skip with the reason -- or FAIL when WORKBENCH_REQUIRE_GLSLANG=1 (./setup.sh test builds it and sets that,
  so a broken build cannot pass as skipped tests).
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from workbench import etvk
from workbench.toolchain import shaders
from workbench.toolchain import glslang
from workbench.etvk import codegen
from workbench.toolchain.shaders import ShaderCompileError, compile_glsl, compile_shader

TEST_SHADERS = Path(__file__).parent / "shaders"
DIALECT = Path(__file__).parent / "etvk_dialect"
REPO = Path(__file__).resolve().parent.parent
OP_SDOT, OP_SDOT_ACC_SAT = 4450, 4453  # SPV_KHR_integer_dot_product
OP_COOPMAT_LOAD, OP_COOPMAT_STORE, OP_COOPMAT_MULADD = 4457, 4458, 4459  # SPV_KHR_cooperative_matrix
PLAIN = "#version 450\nlayout(local_size_x = 1) in;\nlayout(set = 0, binding = 0) buffer B { int v[]; };\n" \
        "void main() { v[0] = v[1] + 1; }\n"


def _fake_build(root: Path, recipe=glslang.RECIPE_ID) -> Path:
    """A cache that looks complete: the four tools (scripts) and a stamp."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    for name in glslang.TOOLS:
        path = bin_dir / name
        path.write_text("#!/bin/sh\necho fake\n")
        path.chmod(0o755)
    (root / "setup.json").write_text(json.dumps({"recipe": recipe, "built_at": "then"}))
    return root


# ------------------------------------------------------------------------------------------------ no build needed

def test_cache_root_default_and_override(tmp_path, monkeypatch):
    monkeypatch.delenv("WORKBENCH_GLSLANG_DIR", raising=False)
    default = glslang.cache_root()
    assert default.parent == Path.home() / ".cache" / "workbench" / "glslang"
    assert "shaderc-2025.2" in default.name and "glslang-15.1.0" in default.name
    assert REPO not in default.parents  # the cache lives outside the repository
    monkeypatch.setenv("WORKBENCH_GLSLANG_DIR", str(tmp_path))
    assert glslang.cache_root() == tmp_path.resolve()
    assert glslang.tool_paths()["glslc"] == tmp_path.resolve() / "bin" / "glslc"


def test_missing_build_names_what_is_missing_and_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_GLSLANG_DIR", str(tmp_path))
    assert not glslang.is_set_up()
    with pytest.raises(glslang.GlslangNotSetUpError) as info:
        glslang.tools()
    message = str(info.value)
    root = tmp_path.resolve()
    for missing in (root / "bin" / "glslc", root / "bin" / "spirv-val", root / "setup.json"):
        assert str(missing) in message
    assert "python -m workbench.toolchain.glslang setup" in message and "WORKBENCH_GLSLANG_DIR" in message
    # asking workbench.toolchain.shaders for the built compiler gives the same error
    monkeypatch.setenv("WORKBENCH_GLSLC", "built")
    with pytest.raises(glslang.GlslangNotSetUpError, match="toolchain.glslang setup"):
        compile_glsl(PLAIN, name="wants_the_build")


def test_without_the_build_shaders_use_the_system_glslc(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_GLSLANG_DIR", str(tmp_path))
    monkeypatch.delenv("WORKBENCH_GLSLC", raising=False)
    info = shaders.compiler_info()
    assert (info.origin, info.kind) == ("system", "glslc")
    assert info.path == Path(shutil.which("glslc")) and info.validator == Path(shutil.which("spirv-val"))
    assert "shaderc" in info.version and "glslc" in str(info)


def test_a_complete_cache_is_preferred_unless_the_environment_says_otherwise(tmp_path, monkeypatch):
    root = _fake_build(tmp_path)
    monkeypatch.setenv("WORKBENCH_GLSLANG_DIR", str(root))
    monkeypatch.delenv("WORKBENCH_GLSLC", raising=False)
    info = shaders.compiler_info()
    assert (info.origin, info.path, info.validator) == ("built", root.resolve() / "bin" / "glslc",
                                                        root.resolve() / "bin" / "spirv-val")
    monkeypatch.setenv("WORKBENCH_GLSLC", "system")
    assert shaders.compiler_info().origin == "system"
    monkeypatch.setenv("WORKBENCH_GLSLC", shutil.which("glslc"))
    info = shaders.compiler_info()
    assert (info.origin, info.kind) == ("env", "glslc")
    assert info.validator == root.resolve() / "bin" / "spirv-val"  # the newest validator whenever it is built


def test_an_unknown_override_is_named(monkeypatch):
    monkeypatch.setenv("WORKBENCH_GLSLC", "/no/such/glslc")
    with pytest.raises(shaders.ToolNotFoundError, match="WORKBENCH_GLSLC='/no/such/glslc'"):
        compile_glsl(PLAIN)


@pytest.mark.skipif(shutil.which("glslangValidator") is None, reason="needs the system glslangValidator")
def test_the_compiler_is_part_of_the_cache_key(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "spirv"))
    monkeypatch.setenv("WORKBENCH_GLSLC", "system")
    first = compile_glsl(PLAIN, name="keyed")
    again = compile_glsl(PLAIN, name="keyed")
    assert again.cache_hit and again.key == first.key
    monkeypatch.setenv("WORKBENCH_GLSLC", "glslangValidator")
    assert shaders.compiler_info().kind == "glslangValidator"
    other = compile_glsl(PLAIN, name="keyed")
    assert not other.cache_hit and other.key != first.key


def test_debian_12_glslc_rejects_the_extension_in_a_header(monkeypatch):
    """Why the build exists: the codegen shim rewrites top-level shaders only, a header's #extension still fails."""
    monkeypatch.setenv("WORKBENCH_GLSLC", "system")
    if codegen.compiler_has_integer_dot_product():
        pytest.skip("the system glslc knows GL_EXT_integer_dot_product")
    with pytest.raises(ShaderCompileError) as info:
        compile_shader("int8_dot_ext", shader_dir=TEST_SHADERS)
    error = info.value
    assert Path(error.path).name == "int8_dot_ext.glslh" and error.line == 6
    assert "GL_EXT_integer_dot_product" in error.compiler_message


def test_second_setup_is_a_quick_no_op(tmp_path, monkeypatch):
    root = _fake_build(tmp_path)
    monkeypatch.setattr(glslang, "_install_prerequisites", lambda *a: pytest.fail("set-up ran a step"))
    start = time.monotonic()
    result = glslang.setup(root, progress=False)
    assert result["set_up"] and result["missing"] == [] and time.monotonic() - start < 1


def test_stamp_of_another_recipe_or_a_missing_tool_is_not_set_up(tmp_path):
    root = _fake_build(tmp_path / "a", recipe="something-else")
    assert not glslang.is_set_up(root)
    assert any("another build recipe" in m for m in glslang.status(root)["missing"])
    root = _fake_build(tmp_path / "b")
    (root / "bin" / "spirv-dis").unlink()
    assert glslang.status(root)["missing"] == [str((root / "bin" / "spirv-dis").resolve())]


def test_a_failing_step_names_its_log_and_tail(tmp_path):
    log = tmp_path / "logs" / "5-build.log"
    with pytest.raises(glslang.GlslangSetupError) as info:
        glslang._run_logged("build", ["sh", "-c", "echo compiling; echo 'error: boom' >&2; exit 3"], log, what="ninja")
    message = str(info.value)
    assert message.startswith("glslang setup: build: ninja failed with exit status 3")
    assert f"full log: {log}" in message and "error: boom" in message
    assert "compiling" in log.read_text()


def test_missing_prerequisites_without_install_name_the_packages(tmp_path, monkeypatch):
    monkeypatch.setattr(glslang, "_missing_apt_packages", lambda packages=None: ["cmake", "ninja-build"])
    with pytest.raises(glslang.GlslangSetupError, match=r"missing Debian packages: cmake ninja-build .*apt-get install"):
        glslang._install_prerequisites(tmp_path / "log", False, lambda text: None)


SHOWSRC = """Package: shaderc
Version: 2025.2-1
Directory: pool/main/s/shaderc
Checksums-Sha256:
 72b3bab1bc63730a428765dc026105f822b8d6962c96eb2fd4d505929900f2bd 2101 shaderc_2025.2-1.dsc
 3fddc13bbb87411c6f7b8f447e87c1637933450087e70fc21da650041f4e0132 228308 shaderc_2025.2.orig.tar.gz

Package: shaderc
Version: 2025.2-3
Directory: pool/main/s/shaderc
Checksums-Sha256:
 aa 10 shaderc_2025.2-3.dsc
 bb 20 shaderc_2025.2.orig.tar.gz
 cc 30 shaderc_2025.2-3.debian.tar.xz

Package: shaderc
Version: 2025.3-1
Directory: pool/main/s/shaderc
Checksums-Sha256:
 dd 40 shaderc_2025.3.orig.tar.gz
"""


def test_the_source_index_gives_the_newest_revision_of_the_pinned_version():
    entry = glslang.parse_showsrc(SHOWSRC, "shaderc", "2025.2")
    assert entry["version"] == "2025.2-3" and entry["directory"] == "pool/main/s/shaderc"
    assert entry["files"] == [("aa", 10, "shaderc_2025.2-3.dsc"), ("bb", 20, "shaderc_2025.2.orig.tar.gz"),
                              ("cc", 30, "shaderc_2025.2-3.debian.tar.xz")]
    assert glslang.parse_showsrc(SHOWSRC, "shaderc", "2024.1") is None
    assert glslang.parse_showsrc(SHOWSRC, "glslang", "2025.2") is None


def test_only_packaging_patches_are_skipped():
    assert set(glslang.SKIPPED_PATCHES) == {"shaderc"}
    assert set(glslang.SKIPPED_PATCHES["shaderc"]) == {"use-system-thirdparties.patch", "rename-libshaderc.patch"}


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "workbench.toolchain.glslang", *args], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, **(env or {})}, timeout=60)


def test_cli_status_and_a_second_setup(tmp_path):
    result = _cli("status", "--dir", str(tmp_path / "empty"))
    assert result.returncode == 1 and json.loads(result.stdout)["set_up"] is False
    root = _fake_build(tmp_path / "built")
    start = time.monotonic()
    result = _cli("setup", "--quiet", env={"WORKBENCH_GLSLANG_DIR": str(root)})
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert time.monotonic() - start < 10  # the interpreter's start-up, nothing else
    assert json.loads(_cli("status", "--dir", str(root)).stdout)["set_up"] is True


def test_setup_sh_builds_it_in_main_and_test_mode():
    text = (REPO / "setup.sh").read_text()
    assert '"$venv/bin/python" -m workbench.toolchain.glslang setup --quiet' in text
    assert "WORKBENCH_SKIP_GLSLANG" in text and "WORKBENCH_REQUIRE_GLSLANG=1" in text


def test_opcodes_walk_the_instruction_stream(monkeypatch):
    monkeypatch.setenv("WORKBENCH_GLSLC", "system")
    ops = glslang.opcodes(compile_glsl(PLAIN, name="walk").code)
    assert ops[0] == 17 and 54 in ops and 253 in ops  # OpCapability first, OpFunction, OpReturn
    with pytest.raises(ValueError, match="word count 0"):
        glslang.opcodes(b"\x03\x02\x23\x07" + bytes(16) + bytes(4))


# ------------------------------------------------------------------------------------------------ build needed

@pytest.fixture(scope="module")
def glslang_build():
    if not glslang.is_set_up():
        reason = (f"the glslang build is not set up in {glslang.cache_root()} (missing "
                  f"{glslang.status()['missing'][0]}); run `python -m workbench.toolchain.glslang setup`")
        if os.environ.get("WORKBENCH_REQUIRE_GLSLANG", "").strip() in ("1", "true", "yes"):
            pytest.fail(f"WORKBENCH_REQUIRE_GLSLANG=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return glslang.tools()


@pytest.fixture
def built(glslang_build, monkeypatch):
    """The build's tools, with workbench.toolchain.shaders using them (whatever the caller's WORKBENCH_GLSLC)."""
    monkeypatch.setenv("WORKBENCH_GLSLC", "built")
    return glslang_build


def _spirv_tool(tool: Path, code: bytes, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(tool), *args, "-"], input=code, capture_output=True)


def test_the_build_is_the_compiler_in_use(glslang_build, monkeypatch):
    monkeypatch.delenv("WORKBENCH_GLSLC", raising=False)
    info = shaders.compiler_info()
    assert (info.origin, info.kind, info.path, info.validator) == (
        "built", "glslc", glslang_build["glslc"], glslang_build["spirv-val"])
    assert "2025.2" in info.version and "15.1.0" in info.version
    assert "v2025.1" in info.validator_version
    stamp = glslang.status()["stamp"]
    assert stamp["packages"]["glslang"]["debian_version"].startswith("15.1.0+1.4.309.0-")
    assert set(stamp["probes"]) == {"dot", "coopmat"} and all("passed" in v for v in stamp["probes"].values())


def test_dot_product_from_an_included_header_reaches_opsdot(built):
    spv = compile_shader("int8_dot_ext", shader_dir=TEST_SHADERS)  # spirv-val ran inside
    ops = glslang.opcodes(spv.code)
    assert OP_SDOT_ACC_SAT in ops and OP_SDOT in ops
    assert _spirv_tool(built["spirv-val"], spv.code, "--target-env", "vulkan1.1").returncode == 0
    text = _spirv_tool(built["spirv-dis"], spv.code).stdout.decode()
    assert "OpCapability DotProduct" in text and 'OpExtension "SPV_KHR_integer_dot_product"' in text
    assert "OpSDotAccSat %int" in text and "OpSDot %int" in text and "PackedVectorFormat4x8Bit" in text


def test_dot_product_runs_on_the_device_like_numpy(device, built):
    if not device.info.features.get("integer_dot_product"):
        pytest.skip(f"{device.info.name} has no shaderIntegerDotProduct")
    spv = compile_shader("int8_dot_ext", shader_dir=TEST_SHADERS)
    rng = np.random.default_rng(22)
    n = 1000
    a = rng.integers(-128, 128, (n, 4), dtype=np.int8)
    b = rng.integers(-128, 128, (n, 4), dtype=np.int8)
    acc = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    a[:8], b[:8] = -128, -128  # the largest products ...
    acc[:4] = 2**31 - 1 - np.arange(4) * 30000  # ... where acc + dot saturates at INT32_MAX
    a[8:12], b[8:12] = -128, 127  # the most negative ones ...
    acc[8:12] = -2**31 + np.arange(4) * 30000  # ... saturating at INT32_MIN
    dot = (a.astype(np.int64) * b.astype(np.int64)).sum(axis=1)
    want = np.stack([np.clip(acc.astype(np.int64) + dot, -2**31, 2**31 - 1), dot], axis=1).astype(np.int32)
    assert (want[:12, 0] == 2**31 - 1).sum() >= 3 and (want[8:12, 0] == -2**31).sum() >= 1  # saturation is tested
    packed = lambda x: x.view(np.int32).reshape(n)  # noqa: E731  lane k = bits 8k..8k+7 (little endian)
    with device.pipeline(spv, local_size=(64, 1, 1)) as p, device.buffer(nbytes=n * 8) as out, \
            device.buffer(packed(a)) as buf_a, device.buffer(packed(b)) as buf_b, device.buffer(acc) as buf_acc:
        device.run(p, [out, buf_a, buf_b, buf_acc], (n, 1, 1), struct.pack("<i", n))
        got = out.download(np.int32).reshape(n, 2)
    np.testing.assert_array_equal(got, want)


def test_khr_cooperative_matrix_int8_compiles_and_validates(built):
    spv = compile_shader("coopmat_khr_int8", shader_dir=TEST_SHADERS, target_env="vulkan1.3")
    ops = glslang.opcodes(spv.code)
    assert {OP_COOPMAT_LOAD, OP_COOPMAT_STORE, OP_COOPMAT_MULADD} <= set(ops)
    text = _spirv_tool(built["spirv-dis"], spv.code).stdout.decode()
    assert "OpCapability CooperativeMatrixKHR" in text and 'OpExtension "SPV_KHR_cooperative_matrix"' in text
    assert "OpTypeCooperativeMatrixKHR %char" in text and "OpTypeCooperativeMatrixKHR %int" in text
    assert "OpCooperativeMatrixMulAddKHR" in text and "MatrixASignedComponentsKHR" in text
    assert _spirv_tool(built["spirv-val"], spv.code, "--target-env", "vulkan1.3").returncode == 0


def test_etvk_dialect_compiles_without_the_shim(built, monkeypatch):
    assert codegen.compiler_has_integer_dot_product()
    gen = etvk.Codegen(etvk.dialect_source(DIALECT))
    spv = gen.compile("q8ta_conv2d_pw_float")
    assert spv.defines["SHIM_APPLIED"] is False and OP_SDOT_ACC_SAT in glslang.opcodes(spv.code)
    # Debian 12's glslc still gets the shim, and its SPIR-V is cached apart
    monkeypatch.setenv("WORKBENCH_GLSLC", "system")
    if codegen.compiler_has_integer_dot_product():
        pytest.skip("the system glslc knows GL_EXT_integer_dot_product")
    old = gen.compile("q8ta_conv2d_pw_float")
    assert old.defines["SHIM_APPLIED"] is True and old.key != spv.key
    assert OP_SDOT_ACC_SAT in glslang.opcodes(old.code)
