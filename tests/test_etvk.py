"""workbench.etvk: ET-VK's templates expanded by ET-VK's codegen, dispatched with ET-VK's conventions, vs torch.

Always (CI has no ExecuTorch checkout): shaders written here in ET-VK's dialect (tests/etvk_dialect: a conv reading
a sampled 2-D weight texture, a pixel shuffle reading BufferMetadata), expanded by the executorch wheel's
gen_vulkan_spv.py; revisions through a small git repository made here; every error path.
With WORKBENCH_EXECUTORCH set: ET-VK's real kernels, and the diff across PR #19396.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from workbench import etvk, vk
from workbench.etvk import codegen as src_mod
from workbench.toolchain.shaders import ShaderCompileError

DIALECT = Path(__file__).parent / "etvk_dialect"
CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set: no ExecuTorch checkout "
                                    "(CI has none; the dialect tests cover the machinery)")
PR_19396 = "1ee58ed3b7"


@pytest.fixture(scope="module")
def dialect():
    return etvk.Codegen(etvk.dialect_source(DIALECT))


@pytest.fixture(scope="module")
def real():
    if not CHECKOUT:
        pytest.skip("WORKBENCH_EXECUTORCH is not set")
    return etvk.Codegen(etvk.source(CHECKOUT))


CASES = [
    ("q8ta_conv2d_pw", {}),
    ("q8ta_conv2d_pw", dict(shape=(1, 13, 5, 7), out_channels=10, out_layout="4C1W", relu=True)),
    ("q8ta_conv2d_pw", dict(shape=(1, 21, 3, 9), out_channels=6, bias=False)),
    ("q8ta_conv2d_pw", dict(shape=(1, 20, 9, 6), out_channels=12, fallback=True)),
    ("q8ta_pixel_shuffle", {}),
    ("q8ta_pixel_shuffle", dict(shape=(2, 12, 5, 3), in_layout="4C1W", out_layout="4W4C", requantize=True)),
    ("q8ta_pixel_shuffle", dict(shape=(3, 8, 7, 1), in_layout="4C", out_layout="4C1W")),
]
REAL_ONLY = [
    ("pixel_shuffle", {}),
    ("pixel_shuffle", dict(shape=(2, 18, 3, 5), r=3, layout="WIDTH_PACKED")),
    ("pixel_shuffle", dict(storage="texture3d")),
    ("pixel_shuffle", dict(storage="texture3d", layout="WIDTH_PACKED", shape=(2, 9, 3, 5), r=3)),
    ("pixel_shuffle", dict(dtype="half", shape=(1, 8, 3, 3))),
    ("q8ta_quantize", {}),
    ("q8ta_quantize", dict(storage="texture3d", in_layout="CHANNELS_PACKED", out_layout="4C1W")),
    ("q8ta_dequantize", {}),
    ("q8ta_dequantize", dict(storage="texture3d", out_layout="CHANNELS_PACKED", in_layout="4C1W")),
    ("q8ta_clone", {}),
    ("q8ta_clone", dict(in_layout="4C", out_layout="4W4C", shape=(3, 5, 6, 11))),
]


def _ids(cases):
    return [f"{k}-{'-'.join(f'{a}={b}' for a, b in o.items()) or 'default'}" for k, o in cases]


# --- the dialect shaders, the wheel's generator, lavapipe ---------------------------------------------------------
@pytest.mark.parametrize("kernel,options", CASES, ids=_ids(CASES))
def test_dialect_kernels_match_torch(device, dialect, kernel, options):
    row = etvk.run(device, dialect, kernel, measure=False, **options)
    assert row["correct"], row
    assert row["generator"] == "wheel"


def test_dialect_expansion_is_the_generators(dialect):
    assert set(dialect.variants()) == {"q8ta_conv2d_pw_float", "q8ta_conv2d_pw_fallback_float", "q8ta_pixel_shuffle"}
    text = dialect.expand("q8ta_conv2d_pw_float").text
    # ET-VK's helpers wrote these lines: the weight is a combined image sampler, bindings count up from 0,
    # spec constants from 3
    assert "layout(set = 0, binding = 2) uniform PRECISION isampler2D t_weight;" in text
    assert "layout(constant_id = 3) const int apply_bias = 1;" in text
    assert "#extension GL_EXT_integer_dot_product : require" in text
    assert "GL_EXT_integer_dot_product" not in dialect.expand("q8ta_conv2d_pw_fallback_float").text


def test_dot_product_reaches_opsdotaccsat(dialect):
    spirv = dialect.compile("q8ta_conv2d_pw_float")  # spirv-val ran inside compile
    words = spirv.words
    opcodes = {int(w) & 0xFFFF for w in words[5:]}  # coarse: any word whose low half is the opcode
    assert 4453 in opcodes  # OpSDotAccSat
    if not src_mod.compiler_has_integer_dot_product():
        assert spirv.defines["SHIM_APPLIED"] is True
    fallback = dialect.compile("q8ta_conv2d_pw_fallback_float")
    assert fallback.defines["SHIM_APPLIED"] is False


def test_template_lines_map_back(dialect):
    expanded = dialect.expand("q8ta_conv2d_pw_float")
    template = expanded.template.read_text().splitlines()
    generated = expanded.text.splitlines()
    assert len(expanded.template_lines) == len(generated)
    for gen_line, tpl_line in zip(generated, expanded.template_lines):
        if tpl_line is not None and "${" not in template[tpl_line - 1] and gen_line.strip():
            assert gen_line.strip() == template[tpl_line - 1].strip()


def _broken_copy(tmp_path, find, replace):
    folder = tmp_path / "broken"
    shutil.copytree(DIALECT, folder)
    path = folder / "q8ta_conv2d_pw.glsl"
    text = path.read_text()
    assert find in text
    path.write_text(text.replace(find, replace, 1))
    line = next(i for i, l in enumerate(path.read_text().splitlines(), 1) if replace.strip() in l)
    return etvk.Codegen(etvk.dialect_source(folder)), path, line


def test_compile_error_names_the_template_line(tmp_path):
    gen, path, line = _broken_copy(tmp_path, "return acc + x.x * y.x", "return acc + x.x * undefined_thing")
    with pytest.raises(etvk.TemplateCompileError) as info:
        gen.compile("q8ta_conv2d_pw_fallback_float")
    error = info.value
    assert error.template == path and error.template_line == line
    assert str(error).startswith(f"{path}:{line}: ")
    assert "undefined_thing" in str(error) and "generated as" in str(error)


def test_template_python_error_names_the_template(tmp_path):
    gen, path, _ = _broken_copy(tmp_path, '${layout_declare_ubo(B, "BufferMetadata", "inp")}',
                                '${layout_declare_nothing(B, "inp")}')
    with pytest.raises(etvk.TemplateCompileError, match=r"template error: NameError.*layout_declare_nothing") as info:
        gen.expand("q8ta_conv2d_pw_float")
    assert info.value.template == path


def test_shim_refuses_functions_it_does_not_cover(monkeypatch):
    text = "#version 450\n#extension GL_EXT_integer_dot_product : require\nvoid main() { int x = dotEXT(a, b); }\n"
    monkeypatch.setenv("WORKBENCH_GLSLC", "system")  # the shim is the fallback for Debian 12's glslc, not the build's
    if src_mod.compiler_has_integer_dot_product():
        pytest.skip("this compiler has GL_EXT_integer_dot_product: no shim")
    with pytest.raises(ShaderCompileError, match="uses dotEXT"):
        src_mod.apply_dot_product_shim(text, "probe")
    shimmed, applied = src_mod.apply_dot_product_shim(text.replace("dotEXT(a, b)", "dotPacked4x8EXT(a, b)"))
    assert applied and "#line 3" in shimmed  # line numbers after the block stay those of the generated file


def test_local_size_picker_is_etvks():
    from workbench.etvk.dispatch import create_local_wg_size
    assert create_local_wg_size((18, 32, 6)) == (4, 8, 2)  # the worked example in ET-VK's notes
    assert create_local_wg_size((18, 6, 32)) == (2, 8, 4)  # a 3-cycle sort: local[order[i]], as the C++ indexes
    assert create_local_wg_size((1000, 1, 1)) == (64, 1, 1)
    assert create_local_wg_size((12, 8, 1)) == (16, 4, 1)
    assert create_local_wg_size((7, 12, 1)) == (2, 32, 1)  # swapped, as the C++ does
    assert create_local_wg_size((7, 5, 1)) == (32, 2, 1)


# --- revisions, through a git repository made here ----------------------------------------------------------------
@pytest.fixture(scope="module")
def fake_checkout(tmp_path_factory):
    """A git repository shaped like ExecuTorch: the dialect templates at two revisions (TILE_N4 2, then 1)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path_factory.mktemp("executorch")
    glsl = root / src_mod.GLSL_DIR
    shutil.copytree(DIALECT, glsl)
    git = lambda *a: subprocess.run(["git", "-C", str(root), *a], check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    conv = glsl / "q8ta_conv2d_pw.glsl"
    conv.write_text(conv.read_text().replace("#define TILE_N4 1", "#define TILE_N4 2"))
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "parent")
    conv.write_text(conv.read_text().replace("#define TILE_N4 2", "#define TILE_N4 1"))
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "halve")
    conv.write_text(conv.read_text() + "\n// an uncommitted edit\n")
    return root


def test_revisions_read_without_touching_the_working_tree(fake_checkout, monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_ETVK_CACHE", str(tmp_path / "cache"))
    before = subprocess.run(["git", "-C", str(fake_checkout), "status", "--porcelain"], capture_output=True,
                            text=True).stdout
    old = etvk.Codegen(etvk.source(fake_checkout, rev="HEAD~1"))
    new = etvk.Codegen(etvk.source(fake_checkout, rev="HEAD"))
    tree = etvk.Codegen(etvk.source(fake_checkout))
    assert old.expand("q8ta_conv2d_pw_float").define("TILE_N4") == "2"
    assert new.expand("q8ta_conv2d_pw_float").define("TILE_N4") == "1"
    assert "an uncommitted edit" in tree.expand("q8ta_conv2d_pw_float").text
    assert "an uncommitted edit" not in new.expand("q8ta_conv2d_pw_float").text
    assert old.source.label == "HEAD~1" and len(old.source.commit) == 40
    after = subprocess.run(["git", "-C", str(fake_checkout), "status", "--porcelain"], capture_output=True,
                           text=True).stdout
    assert before == after


def test_dispatch_follows_the_revisions_tile(device, fake_checkout, monkeypatch, tmp_path):
    """ET-VK's C++ picks the global size from TILE_N4, so the dispatch reads it from the revision's shader."""
    monkeypatch.setenv("WORKBENCH_ETVK_CACHE", str(tmp_path / "cache"))
    old = etvk.make(etvk.Codegen(etvk.source(fake_checkout, rev="HEAD~1")), "q8ta_conv2d_pw", shape=(1, 32, 4, 8))
    new = etvk.make(etvk.Codegen(etvk.source(fake_checkout, rev="HEAD")), "q8ta_conv2d_pw", shape=(1, 32, 4, 8))
    assert old.global_size == (4, 2, 4) and new.global_size == (8, 2, 4)
    assert old.params["tile_n4"] == 2 and new.params["tile_n4"] == 1


# --- clear errors ---------------------------------------------------------------------------------------------------
def test_checkout_errors(tmp_path, monkeypatch, fake_checkout):
    monkeypatch.delenv("WORKBENCH_EXECUTORCH", raising=False)
    with pytest.raises(etvk.CheckoutError, match="no ExecuTorch checkout configured.*WORKBENCH_EXECUTORCH"):
        etvk.source()
    with pytest.raises(etvk.CheckoutError, match="does not exist"):
        etvk.source(tmp_path / "nowhere")
    with pytest.raises(etvk.CheckoutError, match="is not an ExecuTorch checkout.*graph/ops/glsl"):
        etvk.source(tmp_path)
    with pytest.raises(etvk.CheckoutError, match="revision 'no-such-rev' not found"):
        etvk.source(fake_checkout, rev="no-such-rev")
    plain = tmp_path / "plain"
    shutil.copytree(fake_checkout / "backends", plain / "backends")
    with pytest.raises(etvk.CheckoutError, match="not a git repository"):
        etvk.source(plain, rev="HEAD")


def test_kernel_errors(device, dialect):
    with pytest.raises(etvk.UnknownKernelError, match="no shader variant 'q8ta_conv2d_pw_floaty'.*similar: "
                                                      "q8ta_conv2d_pw_float"):
        dialect.expand("q8ta_conv2d_pw_floaty")
    with pytest.raises(etvk.UnknownKernelError, match="no ET-VK kernel 'conv3d'"):
        etvk.make(dialect, "conv3d")
    with pytest.raises(ValueError, match="upscale factor 2 only, got 3"):
        etvk.make(dialect, "q8ta_pixel_shuffle", r=3)
    with pytest.raises(ValueError, match="batch term.*got batch 2"):
        etvk.make(dialect, "q8ta_conv2d_pw", shape=(2, 8, 4, 4))
    with pytest.raises(ValueError, match="channels-packed int8 layouts.*4H4W"):
        etvk.make(dialect, "q8ta_pixel_shuffle", in_layout="4H4W")
    with pytest.raises(ValueError, match=r"every size must be >= 1, got \(1, 0, 4, 4\)"):
        etvk.make(dialect, "q8ta_pixel_shuffle", shape=(1, 0, 4, 4))


def test_missing_device_feature_is_named(device, dialect, monkeypatch):
    monkeypatch.setitem(device.info.features, "integer_dot_product", False)
    with pytest.raises(vk.MissingFeatureError, match="integer_dot_product"):
        etvk.run(device, dialect, "q8ta_conv2d_pw", measure=False)
    row = etvk.run(device, dialect, "q8ta_conv2d_pw", measure=False, fallback=True)  # ET-VK's choice then
    assert row["correct"]


def test_cli(capsys, tmp_path):
    from workbench.cli import main
    assert main(["etvk", "run", "q8ta_clone", "--executorch", str(tmp_path / "none")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["etvk", "run", "q8ta_pixel_shuffle", "--executorch", str(tmp_path), "--shape", "1,2,3,4"]) == 2
    assert "is not an ExecuTorch checkout" in capsys.readouterr().err


# --- ET-VK's real kernels (a checkout) --------------------------------------------------------------------------------
@needs_checkout
@pytest.mark.parametrize("kernel,options", CASES + REAL_ONLY, ids=_ids(CASES + REAL_ONLY))
def test_real_kernels_match_torch(device, real, kernel, options):
    if options.get("dtype") == "half" and not device.info.features.get("storage_buffer_16bit"):
        pytest.skip("no 16-bit storage")
    row = etvk.run(device, real, kernel, measure=False, **options)
    assert row["correct"], row


@needs_checkout
def test_real_cli_run_and_list(capsys):
    from workbench.cli import main
    assert main(["etvk", "list", "q8ta_pixel_shuffle", "--executorch", CHECKOUT]) == 0
    assert "q8ta_pixel_shuffle" in capsys.readouterr().out
    assert main(["etvk", "run", "q8ta_pixel_shuffle", "q8ta_clone", "--executorch", CHECKOUT,
                 "--shape", "1,8,4,6"]) == 0
    out = capsys.readouterr().out
    assert "q8ta_clone" in out and "True" in out


@needs_checkout
def test_diff_across_pr_19396(device):
    from workbench.vendors import mesa
    if not mesa.is_set_up():
        if os.environ.get("WORKBENCH_REQUIRE_ADRENO") or os.environ.get("WORKBENCH_REQUIRE_MESA"):
            pytest.fail("the offline compilers are not set up (workbench compilers setup)")
        pytest.skip("the offline compilers are not set up (workbench compilers setup)")
    df = etvk.diff(device, CHECKOUT, f"{PR_19396}^", PR_19396, [("q8ta_conv2d_pw", {"shape": (1, 32, 8, 8)})],
                   gpus=(740,), measure=True)
    a740 = df[df["compiler"] == "Turnip (ir3) a740"].iloc[0]
    assert pd.isna(a740.get("error A")) and pd.isna(a740.get("error B")), a740
    assert a740["tile_n4 A"] == 2 and a740["tile_n4 B"] == 1
    assert a740["registers B"] < a740["registers A"] and a740["waves B"] > a740["waves A"]
    timed = df[df["compiler"] == "live device (timed)"].iloc[0]
    assert timed["median_us A"] > 0 and timed["median_us B"] > 0
