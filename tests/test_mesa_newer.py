"""The newer Mesa build (workbench.vendors.mesa_newer): Adreno 8xx and 5th-gen Mali, each checked like the GPUs of the
stable build (a known shader's registers and occupancy against the compiler's own report). The machinery is tested
without the build; the compiles skip with a reason where `workbench compilers setup --mesa SOURCE` has not run."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from workbench.toolchain.shaders import compile_glsl, compile_shader
from workbench.vendors import mesa, mesa_newer

TEST_SHADERS = Path(__file__).parent / "shaders"


def trivial_spirv():
    return compile_shader("mesa_trivial", shader_dir=TEST_SHADERS)


# ------------------------------------------------------------------------------------------------ no build needed

def test_the_newer_gpus_belong_to_the_newer_build():
    assert set(mesa_newer.GPUS) == {"a810", "a830", "a840", "mali-g720", "mali-g725", "mali-g1-ultra"}
    for name in mesa_newer.GPUS:
        g = mesa.GPUS[name]
        assert g.build == "newer" and g.driver in mesa_newer.DRIVERS_BUILT and not g.note
    assert mesa.check_gpu("Adreno 840").name == "a840" and mesa.check_gpu(830).name == "a830"
    assert mesa.check_gpu("immortalis-g925").name == "mali-g725" and mesa.check_gpu("g1").name == "mali-g1-ultra"
    assert dict(mesa.GPUS["mali-g720"].env)["PAN_GPU_ID"] == "c800:4"
    assert "PAN_I_WANT_A_BROKEN_VULKAN_DRIVER" in dict(mesa.GPUS["mali-g1-ultra"].env)
    assert not set(mesa.DEFAULT_GPUS) & set(mesa_newer.GPUS)  # the default commands need only the stable build
    assert "26.2.0-rc1" in mesa.GPUS["mali-g57"].note and "v9" in mesa.GPUS["mali-g57"].note


def test_the_newer_build_has_its_own_folder_and_recipe(tmp_path, monkeypatch):
    monkeypatch.delenv("WORKBENCH_MESA_NEWER_DIR", raising=False)
    assert mesa.cache_root(build="newer") == Path.home() / ".cache" / "workbench" / "mesa" / "mesa-newer"
    assert mesa.cache_root(build="newer") != mesa.cache_root()
    monkeypatch.setenv("WORKBENCH_MESA_NEWER_DIR", str(tmp_path / "n"))
    assert mesa.cache_root(build="newer") == tmp_path / "n"
    files = mesa.build_files(build="newer")
    assert "turnip shim" in files and "panvk icd" in files and "radv" not in files
    assert mesa.build_spec("newer").recipe_id == mesa_newer.RECIPE_ID != mesa.RECIPE_ID
    assert set(mesa_newer.TARGETS) == {t for name in mesa_newer.DRIVERS_BUILT
                                       for t in (mesa.DRIVERS[name].target, mesa.DRIVERS[name].shim_target)}
    with pytest.raises(ValueError, match="unknown Mesa build 'nightly'"):
        mesa.build_spec("nightly")


def test_a_missing_newer_build_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_MESA_NEWER_DIR", str(tmp_path / "none"))
    with pytest.raises(mesa.MesaNotSetUpError) as info:
        mesa.stats(trivial_spirv(), gpu="a830")
    message = str(info.value)
    assert "not set up in" in message and "--mesa SOURCE" in message and "WORKBENCH_MESA_NEWER_DIR" in message
    assert mesa.status(build="newer")["set_up"] is False


def test_shim_env_of_a_newer_gpu_uses_the_newer_build(tmp_path):
    env = mesa.shim_env("a840", root=tmp_path, base={"PATH": "/usr/bin", "PAN_GPU_ID": "a867"})
    assert env["VK_ICD_FILENAMES"] == str(tmp_path / "lib" / "freedreno_icd.json")
    assert env["LD_PRELOAD"] == str(tmp_path / "lib" / "libfreedreno_noop_drm_shim.so")
    assert env["FD_GPU_ID"] == "840" and "PAN_GPU_ID" not in env


@pytest.mark.parametrize("bad", [None, "", "/nonexistent/mesa", "README.md", "/tmp"])
def test_resolve_source_names_what_it_expects(bad):
    with pytest.raises(ValueError) as info:
        mesa_newer.resolve_source(bad)
    message = str(info.value)
    assert "expected a Mesa source" in message and repr(str(bad)) in message and "\n" not in message


def _fake_mesa(tree: Path, *, a840_in_table=True, archs="6, 7, 10, 12, 13, 14") -> Path:
    (tree / "src/freedreno/common").mkdir(parents=True)
    (tree / "src/freedreno/drm-shim").mkdir(parents=True)
    (tree / "src/panfrost/vulkan").mkdir(parents=True)
    (tree / "meson.build").write_text("project('mesa')\n")
    (tree / "VERSION").write_text("26.2.0-rc1\n")
    names = ["810", "830"] + (["840"] if a840_in_table else [])
    (tree / "src/freedreno/common/freedreno_devices.py").write_text(
        "".join(f'GPUId(chip_id=0x0, name="Adreno (TM) {n}"),\n' for n in names))
    (tree / "src/freedreno/drm-shim/freedreno_noop.c").write_text(
        "   {\n      .gpu_id = 810,\n      .chip_id = 0x44010000,\n      .gmem_size = 576 * 1024,\n   },\n   {\n"
        + mesa_newer.SOURCE_EDITS[0][1] + "};\n")
    (tree / "src/panfrost/vulkan/meson.build").write_text(f"foreach arch : [{archs}]\nendforeach\n")
    return tree


def test_knows_reads_the_tables_and_the_edit_adds_the_a840(tmp_path):
    tree = _fake_mesa(tmp_path / "tree")
    before = mesa_newer.knows(tree)
    assert before["a830"] is True and before["mali-g720"] is True and before["mali-g1-ultra"] is True
    assert "no gpu_id 840" in before["a840"]
    found = mesa_newer.resolve_source(tree)
    assert found == {"kind": "tree", "path": str(tree.resolve()), "commit": None}
    copied, info = mesa_newer._bring_source(found, tmp_path / "cache" / "src", tmp_path / "log.txt", lambda t: None)
    assert info["version"] == "26.2.0-rc1" and all(v is True for v in info["knows"].values())
    assert ".gpu_id = 840" in (copied / "src/freedreno/drm-shim/freedreno_noop.c").read_text()
    assert ".gpu_id = 840" not in (tree / "src/freedreno/drm-shim/freedreno_noop.c").read_text()  # user's untouched
    old = mesa_newer.knows(_fake_mesa(tmp_path / "old", a840_in_table=False, archs="6, 7, 10"))
    assert "v12" in old["mali-g720"] and "no Adreno 840" in old["a840"]


def test_a_git_directory_at_a_commit_is_a_source(tmp_path):
    tree = _fake_mesa(tmp_path / "repo")
    run = lambda *a: subprocess.run(["git", "-C", str(tree), *a], check=True, capture_output=True, text=True)  # noqa
    run("init", "-q")
    run("-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "mesa")
    commit = run("rev-parse", "HEAD").stdout.strip()
    found = mesa_newer.resolve_source(f"{tree}@{commit[:10]}")
    assert found["kind"] == "git" and found["commit"] == commit
    copied, info = mesa_newer._bring_source(found, tmp_path / "src", tmp_path / "log.txt", lambda t: None)
    assert (copied / "VERSION").read_text().strip() == "26.2.0-rc1" and info["missing_files"] == []
    with pytest.raises(ValueError, match="expected a commit"):
        mesa_newer.resolve_source(f"{tree}@0000000bad")


def test_drivers_are_turnip_or_turnip_and_panvk():
    assert mesa_newer.check_drivers("turnip") == ("turnip",)
    assert mesa_newer.check_drivers("panvk,turnip") == ("turnip", "panvk")
    for bad in ("radv", "", "turnip,turnip", None):
        with pytest.raises(ValueError, match="expected the drivers turnip or turnip,panvk"):
            mesa_newer.check_drivers(bad)
    assert "-Dllvm=disabled" in mesa_newer.meson_options(("turnip",))
    assert {"-Dvulkan-drivers=freedreno,panfrost", "-Dllvm=enabled"} <= set(mesa_newer.MESON_OPTIONS)
    assert mesa_newer.recipe_id(("turnip",)) != mesa_newer.RECIPE_ID


def test_a_turnip_only_newer_build_serves_adreno_and_names_what_mali_lacks(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_MESA_NEWER_DIR", str(tmp_path))
    (tmp_path / "lib").mkdir()
    for name in ("libvulkan_freedreno.so", "libfreedreno_noop_drm_shim.so", "freedreno_icd.json"):
        (tmp_path / "lib" / name).write_text("x")
    (tmp_path / "setup.json").write_text(json.dumps({"recipe": mesa_newer.recipe_id(("turnip",))}))
    assert mesa.is_set_up(build="newer") and mesa.built_drivers(build="newer") == ("turnip",)
    assert mesa._missing_products(build="newer", driver="turnip") == []
    with pytest.raises(mesa.MesaNotSetUpError, match=r"PanVK \(bifrost/valhall\) \(this build holds turnip only\)"):
        mesa.stats(trivial_spirv(), gpu="mali-g720")


def test_cli_setup_with_a_bad_source_is_one_line(capsys):
    from workbench.cli import main
    assert main(["compilers", "setup", "--mesa", "/nonexistent/mesa", "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "expected a Mesa source" in err


# ------------------------------------------------------------------------------------------------ build needed

@pytest.fixture(scope="module")
def newer_build():
    if not mesa.is_set_up(build="newer"):
        pytest.skip(f"the newer Mesa build is not set up in {mesa.cache_root(build='newer')} (missing "
                    f"{mesa.status(build='newer')['missing'][0]}); run `workbench compilers setup --mesa SOURCE`")
    return mesa.cache_root(build="newer")


@pytest.fixture(scope="module")
def newer_panvk(newer_build):
    if "panvk" not in mesa.built_drivers(build="newer"):
        pytest.skip(f"the newer Mesa build in {newer_build} holds Turnip only (`--mesa-drivers turnip`); PanVK needs "
                    "`workbench compilers setup --mesa SOURCE --mesa-drivers turnip,panvk`")
    return newer_build


@pytest.mark.parametrize("gpu", ["a830", "a840", "a810"])
def test_turnip_a8xx_statistics(newer_build, gpu):
    stats = mesa.stats(trivial_spirv(), gpu=gpu, local_size=(64, 1, 1), spec_constants={3: 5})
    assert stats["Registers used"] >= 1 and stats["Max Waves Per Core"] == 16 and stats["Subgroup Size"] == 64
    df = mesa.stats_rows([trivial_spirv()], gpu=gpu)
    assert gpu[1:] in df["device"].iloc[0] and df["occupancy"].iloc[0] == 1.0


@pytest.mark.parametrize("gpu", ["a830", "a840"])
def test_occupancy_model_matches_turnip_a8xx(newer_build, gpu):
    df = mesa.check_occupancy_model([4, 8, 12, 16, 20, 24, 28, 32, 40], gpu=gpu)
    assert df["agree"].all(), "\n" + df.to_string()
    assert df["compiler waves"].is_monotonic_decreasing and df["compiler waves"].iloc[-1] < 16


def test_the_a840s_larger_register_file_shows(newer_build):
    # a8xx gen2 (a840) has 128 vec4 per fibre slot, gen1 (a830) 96: the same registers leave more waves on the a840
    df = mesa.stats_rows({"n28": compile_glsl(mesa.live_vec4_shader(28), name="n28")}, gpu=["a830", "a840"],
                         local_size=64)
    assert (df["waves"] == df["model_waves"]).all()
    assert df["waves"].iloc[1] > df["waves"].iloc[0]


@pytest.mark.parametrize("gpu, arch_word", [("mali-g720", "G720"), ("mali-g725", "G725"), ("mali-g1-ultra", "G1")])
def test_panvk_fifth_gen_statistics(newer_panvk, gpu, arch_word):
    small = mesa.stats(trivial_spirv(), gpu=gpu, local_size=(64, 1, 1))
    assert small["Instructions"] > 0 and small["Threads"] == 2 and small["Work register allocation"] == 32
    big = mesa.stats(mesa.live_vec4_shader(16), gpu=gpu, local_size=(64, 1, 1))
    assert big["Threads"] == 1 and big["Work register allocation"] == 64
    df = mesa.stats_rows([trivial_spirv()], gpu=gpu)
    assert arch_word in df["device"].iloc[0] and df["occupancy"].iloc[0] == 1.0


@pytest.mark.parametrize("gpu", ["mali-g720", "mali-g725"])
def test_occupancy_model_matches_panvk_fifth_gen(newer_panvk, gpu):
    df = mesa.check_occupancy_model([4, 8, 12, 16, 20, 24, 28, 32, 40, 48], gpu=gpu)
    assert df["agree"].all(), "\n" + df.to_string()
    assert df["occupancy"].iloc[0] == 1.0 and df["occupancy"].iloc[-1] < 1.0


def test_mali_g57_is_still_refused_with_the_reason():
    with pytest.raises((mesa.MesaCompileError, mesa.MesaNotSetUpError)) as info:
        mesa.stats(trivial_spirv(), gpu="mali-g57")
    if isinstance(info.value, mesa.MesaCompileError):
        assert "refuses mali-g57" in str(info.value) and "26.2.0-rc1" in str(info.value)


def test_stats_of_newer_and_stable_gpus_in_one_table(newer_build):
    if not mesa.is_set_up():
        pytest.skip(f"the stable build is not set up in {mesa.cache_root()}")
    df = mesa.stats_rows([trivial_spirv()], gpu=["a740", "a830", "mali-g610"])
    assert list(df["gpu"]) == ["a740", "a830", "mali-g610"] and df["registers"].notna().all()
    assert os.environ.get("LD_PRELOAD", "").find("drm_shim") < 0
