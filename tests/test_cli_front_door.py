"""The command line as a new user meets it: family options from their signatures, shader files without a checkout
(lint, stats, shake), every expected error as one line with exit 2, and the runtime build's checkout handling."""
import subprocess
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.cli.etvk import for_family
from workbench.etvk.families import KERNELS, shape_form, takes
from workbench.etvk.model import build as B
from workbench.toolchain.shaders import compile_glsl

PLANTED = Path(__file__).parent / "shaders" / "planted"


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("workbench: error:") and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def no_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv("WORKBENCH_EXECUTORCH", raising=False)
    return str(tmp_path / "no-checkout")


# --- family options ---------------------------------------------------------------------------------------------

def test_a_linear_takes_out_features_not_out_channels(capsys, no_checkout):
    argv = ["etvk", "run", "q8ta_linear", "--shape", "1,1,3,64", "--executorch", no_checkout]
    assert main(argv + ["--out-channels", "40"]) == 2
    line = one_line(capsys)
    assert "q8ta_linear does not take --out-channels" in line and "--out-features" in line and "--shape" in line
    assert main(argv + ["--group-size", "32"]) == 2
    assert "does not take --group-size" in one_line(capsys)
    # accepted: the refusal is past, the missing checkout is what stops it
    assert main(argv + ["--out-features", "40"]) == 2
    assert "does not exist" in one_line(capsys)


def test_options_follow_the_signatures():
    assert for_family("q8ta_linear", {"shape": (1, 1, 3, 64), "out_features": 40}) == \
        {"shape": (1, 1, 3, 64), "out_features": 40}
    assert for_family("linear_dq8ca_qw_coopmat", {"group_size": 64, "out_features": 8})["group_size"] == 64
    for name in KERNELS:
        assert "shape" in takes(name), name
        assert "gen" not in takes(name)
    assert shape_form("q8ta_conv2d")[0] == 4 and shape_form("q8ta_linear")[0] == 2


@pytest.mark.parametrize("kernel, shape, words", [
    ("q8ta_linear", (64,), "q8ta_linear takes --shape [..., M, K] (2 or more sizes), got 1 sizes: 64"),
    ("q8ta_conv2d_pw", (1, 64, 4), "q8ta_conv2d_pw takes --shape N,C,H,W, got 3 sizes"),
    ("q8ta_conv2d", (1, 2, 3, 4, 5), "q8ta_conv2d takes --shape N,C,H,W, got 5 sizes"),
])
def test_a_shape_of_the_wrong_form_is_refused(kernel, shape, words):
    with pytest.raises(ValueError) as caught:
        for_family(kernel, {"shape": shape})
    assert words in str(caught.value)


def test_unknown_family_and_bad_sizes_are_one_line(capsys, no_checkout):
    assert main(["etvk", "run", "q8ta_linear", "--shape", "3,x", "--executorch", no_checkout]) == 2
    assert "--shape takes integers" in one_line(capsys)
    assert main(["etvk", "shake", "no_such_family", "--executorch", no_checkout]) == 2
    assert "no ET-VK kernel 'no_such_family'" in one_line(capsys)


# --- shader files without a checkout ----------------------------------------------------------------------------

def test_lint_takes_glsl_and_spirv_files(tmp_path, capsys, no_checkout):
    glsl = PLANTED / "early_return_barrier.glsl"
    assert main(["etvk", "lint", str(glsl)]) == 1  # an error found, no checkout asked for
    out = capsys.readouterr().out
    assert "barrier_divergence" in out and "1 variants linted" in out
    spv = tmp_path / "clean.spv"
    spv.write_bytes(compile_glsl((PLANTED / "reverse_tile.glsl").read_text(), name="reverse_tile").code)
    assert main(["etvk", "lint", str(spv)]) == 0
    assert "findings: {}" in capsys.readouterr().out


def test_bad_shader_files_are_one_line(tmp_path, capsys, no_checkout):
    bad = tmp_path / "bad.spv"
    bad.write_bytes(b"\0" * 24)
    assert main(["etvk", "lint", str(bad)]) == 2
    assert "is not SPIR-V (expected" in one_line(capsys)
    assert main(["etvk", "lint", str(tmp_path / "none.glsl")]) == 2
    assert "no shader file" in one_line(capsys)
    broken = tmp_path / "broken.glsl"
    broken.write_text("#version 450\nlayout(local_size_x = 1) in;\nvoid main() { nope; }\n")
    assert main(["etvk", "lint", str(broken)]) == 2
    assert "broken.glsl:3" in one_line(capsys)


def test_stats_of_a_file(tmp_path, capsys, no_checkout):
    assert main(["etvk", "stats", str(PLANTED / "reverse_tile.glsl"), "--gpu", ""]) == 0
    out = capsys.readouterr().out
    assert "reverse_tile.glsl" in out and "live" in out
    assert main(["etvk", "stats", str(PLANTED / "reverse_tile.glsl"), "--gpu", "", "--shape", "1,2,3,4"]) == 2
    assert "none of" in one_line(capsys)


def test_shake_of_a_file(capsys, no_checkout):
    shader = str(PLANTED / "shared_exchange.glsl")
    assert main(["etvk", "shake", shader, "-D", "BARRIER", "--runs", "3", "--size", "256", "--local-size", "64",
                 "--local-size", "128"]) == 0
    out = capsys.readouterr().out
    assert "64x1x1" in out and "128x1x1" in out
    assert main(["etvk", "shake", str(PLANTED / "sizes_ubo.glsl")]) == 2
    assert "storage buffers only" in one_line(capsys)
    assert main(["etvk", "shake", shader, "--shape", "1,2,3,4"]) == 2
    assert "takes --size N" in one_line(capsys)
    assert main(["etvk", "shake", shader, "--output", "7"]) == 2
    assert "one of [0, 1], got 7" in one_line(capsys)


# --- every expected error is one line -----------------------------------------------------------------------------

def _errors():
    from workbench.etvk.codegen import CheckoutError
    from workbench.etvk.harness import HarnessError
    from workbench.etvk.model.runtime import RuntimeRunError
    from workbench.toolchain.glslang import GlslangError
    from workbench.vendors.mesa import MesaError
    return [B.RuntimeBuildError, CheckoutError, HarnessError, RuntimeRunError, GlslangError, MesaError,
            FileNotFoundError]


@pytest.mark.parametrize("error", _errors(), ids=lambda e: e.__name__)
def test_known_errors_are_one_line(error, monkeypatch, capsys):
    def fail(*args, **kwargs):
        raise error("the runtime's build step failed: the reason\nline two\nline three")
    monkeypatch.setattr(B, "build", fail)
    assert main(["etvk", "build"]) == 2
    assert one_line(capsys) == ("workbench: error: the runtime's build step failed: the reason "
                                "(+2 more lines: WORKBENCH_TRACEBACK=1 shows them)")
    monkeypatch.setenv("WORKBENCH_TRACEBACK", "1")
    with pytest.raises(error):
        main(["etvk", "build"])


def test_a_bug_keeps_its_traceback(monkeypatch):
    def fail(*args, **kwargs):
        raise TypeError("a bug")
    monkeypatch.setattr(B, "build", fail)
    with pytest.raises(TypeError):
        main(["etvk", "build"])


def test_a_failed_build_step_names_its_reason_first(tmp_path):
    with pytest.raises(B.RuntimeBuildError) as caught:
        B._run("configure", ["sh", "-c", "echo making; echo 'CMake Error at x.cmake:3: the reason'; exit 3"],
               tmp_path / "configure.log", lambda *_: None)
    first = str(caught.value).splitlines()[0]
    assert "configure step failed (exit 3): CMake Error at x.cmake:3: the reason" in first
    assert str(tmp_path / "configure.log") in first


# --- the runtime build's checkout ----------------------------------------------------------------------------------

def test_empty_and_unchecked_out_submodules_are_named(tmp_path):
    for sub in B.SUBMODULES:
        (tmp_path / sub).mkdir(parents=True)
        (tmp_path / sub / "CMakeLists.txt").write_text("")
    first, second = B.SUBMODULES[0], B.SUBMODULES[1]
    (tmp_path / first / "CMakeLists.txt").unlink()                   # never initialised: an empty folder
    (tmp_path / second / "CMakeLists.txt").unlink()
    (tmp_path / second / ".git").write_text("gitdir: ../../.git/modules/x\n")  # initialised, not checked out
    assert B.missing_submodules(tmp_path) == [f"{first} (not initialised)", f"{second} (initialised, not checked out)"]


def test_a_checkout_under_another_name_builds_through_a_link(tmp_path, monkeypatch):
    monkeypatch.setenv(B.ENV_VAR, str(tmp_path / "cache"))
    named = tmp_path / "executorch"
    named.mkdir()
    assert B.named_executorch(named) == named
    other = tmp_path / "et-main"
    other.mkdir()
    link = B.named_executorch(other)
    assert link.name == "executorch" and link.resolve() == other.resolve()
    assert B.named_executorch(other) == link   # the same link again
    other.rename(tmp_path / "et-moved")          # a moved checkout gets a link of its own
    moved = B.named_executorch(tmp_path / "et-moved")
    assert moved != link and moved.resolve() == (tmp_path / "et-moved").resolve()


def _cmake_cache(build_dir: Path, source) -> None:
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / "CMakeCache.txt").write_text(f"# comment\nCMAKE_HOME_DIRECTORY:INTERNAL={source}\nX:BOOL=ON\n")


def test_a_moved_checkout_is_told_from_the_cache(tmp_path):
    src = tmp_path / "executorch"
    src.mkdir()
    assert B.stale_build(tmp_path / "nothing", src) is None
    _cmake_cache(tmp_path / "b", src)
    assert B.stale_build(tmp_path / "b", src) is None
    _cmake_cache(tmp_path / "b", tmp_path / "old" / "executorch")
    assert "configured from" in B.stale_build(tmp_path / "b", src)


@pytest.fixture
def fake_build(tmp_path, monkeypatch):
    """A checkout under another name, with the build's steps replaced by ones that write what CMake and Ninja would:
    the calls to build() run in a second and leave the tree for the test to look at."""
    root = tmp_path / "et-checkout"
    (root / "backends/vulkan/runtime/graph/ops/glsl").mkdir(parents=True)
    (root / "CMakeLists.txt").write_text("")
    git = lambda *a: subprocess.run(["git", "-C", str(root), *a], check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    monkeypatch.setenv(B.ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.setattr(B, "glslc", lambda: Path("/usr/bin/true"))
    monkeypatch.setattr(B, "missing_tools", lambda tools=B.TOOLS: [])
    monkeypatch.setattr(B, "missing_submodules", lambda tree: [])
    sources = []

    def run(step, command, log, echo, cwd=None, env=None):
        if step == "configure":
            source, build_dir = Path(command[2]), Path(command[4])
            sources.append(source)
            if B.stale_build(build_dir, source):
                raise B.RuntimeBuildError("CMake Error: The source does not match the source used to generate cache")
            _cmake_cache(build_dir, source)
        else:
            (Path(command[2]) / B.TARGET).write_text("runner")
    monkeypatch.setattr(B, "_run", run)
    return root, sources


def test_the_build_goes_through_a_folder_named_executorch(fake_build):
    root, sources = fake_build
    runtime = B.build(root, quiet=True)
    assert sources[-1].name == "executorch" and sources[-1].resolve() == root.resolve()
    assert runtime.runner.is_file()


def test_a_moved_checkout_rebuilds_and_force_clears_the_tree(fake_build):
    root, sources = fake_build
    runtime = B.build(root, quiet=True)
    build_dir = runtime.root / "build"
    (runtime.root / "build.json").unlink()          # not cached: configure again, in the same tree
    (build_dir / "kept").write_text("")
    B.build(root, quiet=True)
    assert (build_dir / "kept").exists()              # an incremental rebuild keeps CMake's tree
    moved = root.rename(root.parent / "et-moved")
    (runtime.root / "build.json").unlink()
    B.build(moved, quiet=True)                        # the cache names the old folder: started afresh, no CMake error
    assert not (build_dir / "kept").exists() and sources[-1].resolve() == moved.resolve()
    (build_dir / "kept").write_text("")
    B.build(moved, quiet=True, force=True)            # cached, but --force builds again from scratch
    assert not (build_dir / "kept").exists()
