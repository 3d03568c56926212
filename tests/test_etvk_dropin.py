"""The drop-in GEMV (workbench.etvk.dropin, shaders/etvk_dropin/): against torch beside ET-VK's own variant on the
same dispatch (a checkout), the patch command on a checkout written here (git only), bad input in one line."""
import os
import shutil
import subprocess

import pytest

from workbench.etvk import dropin
from workbench.etvk.codegen import GLSL_DIR

CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set: ET-VK's generator, YAML "
                                    "and headers come from an ExecuTorch checkout at run time (none here)")
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

# besides every case of dropin.CASES: the IO dtypes and storages ET-VK's YAML generates, bias off, ET-VK's own
# prepack shader writing the weights
OPTIONS = [dict(dtype="half", bias=False), dict(storage="texture3d"), dict(storage="texture3d", dtype="half"),
           dict(prepack="shader"), dict(bias=False)]


def _check(frame):
    assert set(frame["impl"]) == {"etvk", "dropin"}
    bad = frame[~frame["correct"].astype(bool)]
    assert bad.empty, bad[["impl", "k", "n", "group_size", "variant", "max_abs_diff", "tolerance"]].to_string()


@needs_checkout
@pytest.mark.parametrize("case", dropin.CASES, ids=[f"{k}to{n}_g{g}" for k, n, g in dropin.CASES])
def test_dropin_matches_torch(device, case):
    _check(dropin.compare(device, CHECKOUT, [case]))


@needs_checkout
@pytest.mark.parametrize("options", OPTIONS, ids=["-".join(f"{k}={v}" for k, v in o.items()) for o in OPTIONS])
def test_dropin_variants(device, options):
    if options.get("dtype") == "half" and not device.info.features.get("storage_buffer_16bit"):
        pytest.skip("no 16-bit storage")
    _check(dropin.compare(device, CHECKOUT, [(512, 1032, 64), (96, 20, 32)], options=options))


@needs_checkout
def test_dropin_keeps_etvk_interface():
    """Same variants, same bindings (set, binding, kind) and spec constant ids as ET-VK's template."""
    from workbench.vk import spirv as sp
    theirs, ours = dropin.generators(CHECKOUT)
    variants = theirs.variants_of(dropin.TEMPLATE)
    assert variants and variants == ours.variants_of(dropin.TEMPLATE)
    for variant in [v for v in variants if v.endswith("_buffer_float")]:
        a, b = sp.reflect(theirs.compile(variant).code), sp.reflect(ours.compile(variant).code)
        used = {(x.set, x.binding): x.kind for x in b.bindings}
        assert used and all({(x.set, x.binding): x.kind for x in a.bindings}.get(key) == kind
                            for key, kind in used.items()), variant
        assert set(b.spec_defaults) <= set(a.spec_defaults) | {0, 1, 2}, variant


# --- the patch, on a checkout written here ----------------------------------------------------------------------------
@pytest.fixture
def small_checkout(tmp_path):
    """A git repository with ExecuTorch's glsl folder holding stand-ins for the GEMV template and two GEMMs."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "executorch"
    glsl = root / GLSL_DIR
    glsl.mkdir(parents=True)
    for name in (dropin.TEMPLATE, "q4gsw_linear_gemm__w_4x8", "q4gsw_linear_gemm__tin__w_4x8"):
        (glsl / f"{name}.glsl").write_text(f"// stand-in for {name}\n#version 450\nvoid main() {{}}\n")
    git = lambda *a: subprocess.run(["git", "-C", str(root), *a], check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "stand-ins")
    (glsl / f"{dropin.TEMPLATE}.glsl").write_text("// stand-in, edited in the working tree\n")
    return root


def test_patch_applies_to_the_working_tree(small_checkout, tmp_path, capsys):
    from workbench.cli import main
    out = tmp_path / "out" / "dropin.patch"
    assert main(["etvk", "patch", "--executorch", str(small_checkout), "--template", "q4gsw_linear_gemv_coop",
                 "-o", str(out)]) == 0
    assert "git apply" in capsys.readouterr().out
    text = out.read_text()
    rel = f"{GLSL_DIR}/{dropin.TEMPLATE}.glsl"
    assert f"diff --git a/{rel} b/{rel}" in text and "-// stand-in, edited in the working tree" in text
    subprocess.run(["git", "-C", str(small_checkout), "apply", "--check", str(out)], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(small_checkout), "apply", str(out)], check=True, capture_output=True)
    assert (small_checkout / rel).read_text() == dropin.dropin_file().read_text()
    # the same file again: nothing to change, said in one line
    assert main(["etvk", "patch", "--executorch", str(small_checkout)]) == 2
    assert "differ" in capsys.readouterr().err


def test_patch_to_stdout_with_a_file(small_checkout, tmp_path, capsys):
    from workbench.cli import main
    mine = tmp_path / "mine.glsl"
    mine.write_text("// mine\n")
    assert main(["etvk", "patch", "--executorch", str(small_checkout), "--template", "q4gsw_linear_gemm__w_4x8",
                 "--with", str(mine)]) == 0
    out = capsys.readouterr().out
    assert "+// mine" in out and "q4gsw_linear_gemm__w_4x8.glsl" in out


@pytest.mark.parametrize("args,message", [
    (["--template", "nonesuch"], "expected a template of"),
    (["--template", "q4gsw_linear_gemm"], "names 2"),
    (["--with", "/nonexistent/x.glsl"], "found no file"),
])
def test_patch_bad_input(small_checkout, capsys, args, message):
    from workbench.cli import main
    assert main(["etvk", "patch", "--executorch", str(small_checkout), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_patch_wrong_checkout(tmp_path, capsys):
    from workbench.cli import main
    assert main(["etvk", "patch", "--executorch", str(tmp_path)]) == 2
    assert "is not an ExecuTorch checkout" in capsys.readouterr().err
    assert main(["etvk", "patch", "--executorch", str(tmp_path / "none")]) == 2
    assert "does not exist" in capsys.readouterr().err
    # a decomposition the GEMV's YAML lacks is named before any checkout is read
    assert main(["etvk", "patch", "--executorch", str(tmp_path / "none"), "--decomposition", "g2w32"]) == 2
    err = capsys.readouterr().err
    assert "expected a decomposition of ['g1w64', 'g4w16', 'g8w8'], got 'g2w32'" in err
    assert len(err.splitlines()) == 1
    with pytest.raises(dropin.EditError, match="expected a decomposition with picker_only"):
        dropin.edit(tmp_path / "none", picker_only=True)


def test_no_dropin_for_another_template(small_checkout):
    with pytest.raises(dropin.EditError, match="expected a drop-in for q4gsw_linear_gemm__w_4x8"):
        dropin.edit(small_checkout, template="q4gsw_linear_gemm__w_4x8")


# a stand-in for the picker's file, written here: the function the patch rewrites, and its neighbours
PICKER_STAND_IN = """struct CoopVariant { const char* suffix; uint32_t num_groups; uint32_t workers_per_group; };

CoopVariant pick_coop_variant_for_N(uint32_t N) {
  if (N <= 1024u) {
    return {"_g1w64", 1u, 64u};
  }
  return {"_g8w8", 8u, 8u};
}

int untouched() { return 1; }
"""


def test_patch_with_a_decomposition_rewrites_the_picker(small_checkout, tmp_path, capsys):
    from workbench.cli import main
    picker = small_checkout / dropin.PICKER
    picker.parent.mkdir(parents=True, exist_ok=True)
    picker.write_text(PICKER_STAND_IN)
    out = tmp_path / "dropin.patch"
    assert main(["etvk", "patch", "--executorch", str(small_checkout), "--decomposition", "g1w64", "-o",
                 str(out)]) == 0
    text = out.read_text()
    assert f"diff --git a/{dropin.PICKER} b/{dropin.PICKER}" in text and "picks g1w64 at every N" in text
    subprocess.run(["git", "-C", str(small_checkout), "apply", str(out)], check=True, capture_output=True)
    edited = picker.read_text()
    assert 'return {"_g1w64", 1u, 64u};' in edited and "_g8w8" not in edited and "int untouched()" in edited
    assert edited.count("CoopVariant pick_coop_variant_for_N") == 1
    capsys.readouterr()
    # a checkout whose picker has no such function: one line naming what was expected
    picker.write_text("int other() { return 0; }\n")
    assert main(["etvk", "patch", "--executorch", str(small_checkout), "--decomposition", "g4w16"]) == 2
    err = capsys.readouterr().err
    assert "expected one `CoopVariant pick_coop_variant_for_N(uint32_t N)" in err and "found 0" in err
    assert len(err.strip().splitlines()) == 1


def test_picker_text_refuses_a_decomposition_the_yaml_lacks():
    with pytest.raises(dropin.EditError, match=r"expected a decomposition of \['g1w64', 'g4w16', 'g8w8'\], got 'g2w32'"):
        dropin.picker_text(PICKER_STAND_IN, "g2w32")
    assert dropin.picker_text(PICKER_STAND_IN, "g8w8").count('return {"_g8w8", 8u, 8u};') == 1
