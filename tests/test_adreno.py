"""workbench.adreno: Turnip on the freedreno drm-shim as an offline Adreno compiler.

Two kinds of tests:
* no build needed: GPU validation, the child's environment, the missing-build error, the set-up's stamp and
  error reports, the subgroup-size limitation, the CLI arguments;
* build needed (the `adreno_build` fixture): real Turnip statistics. They run when `workbench adreno setup` has
  filled the cache; otherwise they skip with the reason -- or FAIL when WORKBENCH_REQUIRE_ADRENO=1 (CI runs the
  set-up first and sets it, so a broken set-up cannot pass as skipped tests).
"""
import argparse
import json
import os
from pathlib import Path

import pytest

from workbench import adreno
from workbench.benchmarks import conv as conv_bench
from workbench.kernels import conv_pw
from workbench.shaders import compile_glsl, compile_shader

TEST_SHADERS = Path(__file__).parent / "shaders"


def trivial_spirv():
    return compile_shader("adreno_trivial", shader_dir=TEST_SHADERS)


# ------------------------------------------------------------------------------------------------ no build needed

@pytest.mark.parametrize("given, expected", [(740, 740), ("740", 740), ("a740", 740), ("Adreno 740", 740),
                                             (730, 730), (750, 750), (660, 660)])
def test_check_gpu_accepts_the_supported_ids(given, expected):
    assert adreno.check_gpu(given) == expected


@pytest.mark.parametrize("bad", [630, 999, "a6xx", "", None, True, 740.0, "7400"])
def test_check_gpu_rejects_others_and_lists_the_supported(bad):
    with pytest.raises(ValueError) as info:
        adreno.check_gpu(bad)
    message = str(info.value)
    assert "740 (default)" in message and "730" in message and "750" in message and "660" in message


def test_stats_validates_the_gpu_before_anything_else(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_ADRENO_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="supported: 740"):
        adreno.stats(b"not even spirv", gpu=630)


def test_cache_root_default_and_override(tmp_path, monkeypatch):
    monkeypatch.delenv("WORKBENCH_ADRENO_DIR", raising=False)
    assert adreno.cache_root() == Path.home() / ".cache" / "workbench" / "adreno" / "mesa-25.0.7"
    monkeypatch.setenv("WORKBENCH_ADRENO_DIR", str(tmp_path))
    assert adreno.cache_root() == tmp_path.resolve()
    assert adreno.cache_root(tmp_path / "x") == (tmp_path / "x").resolve()
    # the cache lives outside the repository
    repo = Path(adreno.__file__).resolve().parent.parent
    monkeypatch.delenv("WORKBENCH_ADRENO_DIR")
    assert repo not in adreno.cache_root().parents


def test_shim_env_points_the_loader_at_turnip_only(tmp_path):
    base = {"PATH": "/usr/bin", "LD_PRELOAD": "/opt/libother.so", "VK_INSTANCE_LAYERS": "VK_LAYER_KHRONOS_validation",
            "VK_ADD_DRIVER_FILES": "/x.json", "WORKBENCH_DEVICE": "llvmpipe", "WORKBENCH_VALIDATION": "1",
            "PYTHONPATH": "/somewhere"}
    frozen = dict(base)
    env = adreno.shim_env("a660", root=tmp_path, base=base)
    lib = tmp_path.resolve() / "lib"
    assert base == frozen, "the base environment must not be modified"
    assert env["VK_ICD_FILENAMES"] == env["VK_DRIVER_FILES"] == str(lib / "freedreno_icd.json")
    assert env["LD_PRELOAD"].split() == [str(lib / "libfreedreno_noop_drm_shim.so"), "/opt/libother.so"]
    assert env["FD_GPU_ID"] == "660"
    assert env["WORKBENCH_VALIDATION"] == "0"
    assert env["VK_LOADER_LAYERS_DISABLE"] == "~all~" and env["NODEVICE_SELECT"] == "1"
    assert env["MESA_SHADER_CACHE_DISABLE"] == "true"
    for gone in ("VK_INSTANCE_LAYERS", "VK_ADD_DRIVER_FILES", "WORKBENCH_DEVICE"):
        assert gone not in env
    paths = env["PYTHONPATH"].split(os.pathsep)
    assert paths[0] == str(Path(adreno.__file__).resolve().parent.parent) and "/somewhere" in paths
    assert env["PATH"] == "/usr/bin"
    # the default GPU, the default base, no duplicate preload
    again = adreno.shim_env(root=tmp_path, base=env)
    assert again["FD_GPU_ID"] == "740" and again["LD_PRELOAD"] == env["LD_PRELOAD"]
    with pytest.raises(ValueError):
        adreno.shim_env(630, root=tmp_path)


def test_missing_build_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_ADRENO_DIR", str(tmp_path))
    assert not adreno.is_set_up()
    state = adreno.status()
    assert state["set_up"] is False and state["root"] == str(tmp_path.resolve()) and state["missing"]
    with pytest.raises(adreno.AdrenoNotSetUpError) as info:
        adreno.stats(trivial_spirv())
    message = str(info.value)
    assert "workbench adreno setup" in message and str(tmp_path.resolve()) in message
    assert "libvulkan_freedreno.so" in message
    with pytest.raises(adreno.AdrenoNotSetUpError):
        adreno.check_occupancy_model([4])


def _fake_complete_cache(root: Path, recipe=adreno.RECIPE_ID):
    lib = root / "lib"
    lib.mkdir(parents=True)
    for name in (adreno.TURNIP_LIB, adreno.SHIM_LIB, adreno.ICD_NAME):
        (lib / name).write_text("x")
    (root / adreno.STAMP_NAME).write_text(json.dumps({"recipe": recipe, "debian_version": "25.0.7-2+deb13u1",
                                                      "built_at": "then"}))


def test_second_setup_is_instant(tmp_path, monkeypatch, capsys):
    _fake_complete_cache(tmp_path)

    def no_commands(*args, **kwargs):
        raise AssertionError(f"set-up ran a command although the cache is complete: {args}")

    monkeypatch.setattr(adreno.subprocess, "Popen", no_commands)
    monkeypatch.setattr(adreno.subprocess, "run", no_commands)
    state = adreno.setup(tmp_path)
    assert state["set_up"] and state["stamp"]["debian_version"] == "25.0.7-2+deb13u1"
    assert "already set up" in capsys.readouterr().out


def test_stamp_of_another_recipe_or_missing_library_is_not_set_up(tmp_path):
    _fake_complete_cache(tmp_path / "a", recipe="something-else")
    assert not adreno.is_set_up(tmp_path / "a")
    assert "another build recipe" in " ".join(adreno.status(tmp_path / "a")["missing"])
    _fake_complete_cache(tmp_path / "b")
    assert adreno.is_set_up(tmp_path / "b")
    (tmp_path / "b" / "lib" / adreno.SHIM_LIB).unlink()
    assert not adreno.is_set_up(tmp_path / "b")


def test_a_failing_step_reports_its_log_and_tail(tmp_path):
    log = tmp_path / "logs" / "step.log"
    with pytest.raises(adreno.AdrenoSetupError) as info:
        adreno._run_logged("configure", ["sh", "-c", "echo first line; echo Dependency foo not found; exit 3"],
                           log, what="meson setup")
    message = str(info.value)
    assert "configure" in message and "meson setup failed with exit status 3" in message
    assert str(log) in message and "Dependency foo not found" in message
    assert "first line" in log.read_text()  # the full log stays in the cache dir
    with pytest.raises(adreno.AdrenoSetupError, match="cannot run"):
        adreno._run_logged("build", ["/nonexistent/ninja"], log)


def test_missing_prerequisites_without_install_name_the_packages(tmp_path, monkeypatch):
    monkeypatch.setattr(adreno, "_missing_apt_packages", lambda packages=None: ["flex", "bison"])
    with pytest.raises(adreno.AdrenoSetupError) as info:
        adreno._install_prerequisites(tmp_path / "p.log", install=False, echo=lambda text: None)
    assert "flex bison" in str(info.value) and "apt-get install" in str(info.value)


def test_setup_failure_names_the_step(tmp_path, monkeypatch):
    def broken(log_path, install, echo):
        raise adreno.AdrenoSetupError("prerequisites", "missing Debian packages: flex")

    monkeypatch.setattr(adreno, "_install_prerequisites", broken)
    with pytest.raises(adreno.AdrenoSetupError, match="prerequisites: missing Debian packages"):
        adreno.setup(tmp_path, progress=False)
    assert not adreno.is_set_up(tmp_path)


def test_pick_version_takes_the_newest_25_0_7():
    listing = "Package: mesa\nVersion: 25.0.7-2\n\nPackage: mesa\nVersion: 25.0.7-2+deb13u1\n\n" \
              "Package: mesa\nVersion: 25.2.1-1\n"
    assert adreno._pick_version(listing) == "25.0.7-2+deb13u1"
    assert adreno._pick_version("Version: 24.2.8-1\n") is None


def test_subgroup_size_is_refused_clearly():
    spirv = trivial_spirv()
    if adreno._runtime_has_subgroup_size():
        pytest.skip("workbench.vk now supports a required subgroup size")
    with pytest.raises(NotImplementedError, match="required_subgroup_size"):
        adreno.stats(spirv, subgroup_size=128)
    with pytest.raises(ValueError, match="64 or 128"):
        adreno.stats(spirv, subgroup_size=32)


def test_inputs_are_checked_before_any_process_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_ADRENO_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="not a SPIR-V module"):
        adreno.stats(b"\0" * 64)
    with pytest.raises(TypeError):
        adreno.stats(3.5)
    with pytest.raises(TypeError, match="unexpected keyword"):
        adreno.stats_many([trivial_spirv()], bogus=1)


def test_worker_result_lines_survive_a_torn_last_line(tmp_path):
    path = tmp_path / "result.jsonl"
    path.write_text('{"device": {"name": "Turnip Adreno (TM) 740"}}\n{"index": 0, "name": "a", "statistics": {}}\n'
                    '{"index": 1, "na')
    device, results, done = adreno._read_records(path)
    assert device["name"].endswith("740") and list(results) == [0] and not done
    assert adreno._read_records(tmp_path / "absent.jsonl") == (None, {}, False)


def test_live_vec4_shader_compiles_with_n_accumulators():
    text = adreno.live_vec4_shader(7)
    assert text.count("vec4 acc") == 7 and "acc6 = acc6 * x + 7.0" in text
    assert compile_glsl(text, name="live7").code[:4] == b"\x03\x02\x23\x07"
    with pytest.raises(ValueError):
        adreno.live_vec4_shader(0)


def test_cli_arguments():
    from workbench.cli import adreno as adreno_cli
    parser = argparse.ArgumentParser(prog="workbench")
    adreno_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["adreno", "setup", "--force", "-j", "2", "--keep-build"])
    assert (args.adreno_command, args.force, args.jobs, args.keep_build, args.fn) == \
        ("setup", True, 2, True, adreno_cli.setup)
    args = parser.parse_args(["adreno", "stats", "copy", "--gpu", "740,660", "-D", "DTYPE=uint", "--spec", "3=2"])
    assert args.shaders == ["copy"] and args.gpu == "740,660" and args.define == ["DTYPE=uint"]
    args = parser.parse_args(["adreno", "status", "--dir", "/tmp/nowhere-adreno"])
    assert args.fn(args) == 1  # not set up there


def test_kernel_commands_join_the_adreno_cli():
    from workbench.cli import adreno as adreno_cli
    parser = argparse.ArgumentParser(prog="workbench")
    adreno_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["adreno", "conv", "--tiles", "1,1,1;1,2,1", "--dir", "/tmp/nowhere-adreno"])
    assert (args.adreno_command, args.tiles, args.fn) == ("conv", "1,1,1;1,2,1", adreno_cli.conv)
    assert args.fn(args) == 1  # not set up there: a one-line error, not a traceback
    args = parser.parse_args(["adreno", "status", "--dir", "/tmp/nowhere-adreno"])
    assert args.fn is adreno_cli.status


# ------------------------------------------------------------------------------------------------ build needed

@pytest.fixture(scope="module")
def adreno_build():
    if not adreno.is_set_up():
        reason = (f"the Adreno build is not set up in {adreno.cache_root()} (missing "
                  f"{adreno.status()['missing'][0]}); run `workbench adreno setup`")
        if os.environ.get("WORKBENCH_REQUIRE_ADRENO", "").strip() in ("1", "true", "yes"):
            pytest.fail(f"WORKBENCH_REQUIRE_ADRENO=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return adreno.cache_root()


def test_trivial_shader_statistics(adreno_build):
    stats = adreno.stats(trivial_spirv(), local_size=(64, 1, 1), spec_constants={3: 5})
    assert stats["Registers used"] >= 1
    assert stats["Max Waves Per Core"] == 16  # a few registers: every wave slot
    assert stats["Subgroup Size"] == 64       # 64 invocations: ir3 keeps wave64
    for name in ("Instruction Count", "Half-registers used", "STP Count", "LDP Count", "Code size"):
        assert name in stats
    assert "LD_PRELOAD" not in os.environ or "drm_shim" not in os.environ["LD_PRELOAD"]


def test_one_process_per_call_with_per_shader_errors(adreno_build):
    spirv = trivial_spirv()
    jobs = [spirv, {"shader": spirv, "local_size": (128, 1, 1), "name": "wide"},
            {"shader": spirv, "spec_constants": {9: 1}, "name": "bad"}]
    results = adreno.stats_many(jobs, errors="keep")
    assert results[0]["Subgroup Size"] == 64 and results[1]["Subgroup Size"] == 128
    assert "error" in results[2] and "9" in results[2]["error"]
    with pytest.raises(adreno.AdrenoCompileError, match="bad"):
        adreno.stats_many(jobs)


def test_stats_rows_over_gpus(adreno_build):
    df = adreno.stats_rows({"n28": compile_glsl(adreno.live_vec4_shader(28), name="n28")}, gpu=[740, 660],
                           local_size=64)
    assert list(df["gpu"]) == [740, 660]
    assert df["device"].str.contains("740").iloc[0] and df["device"].str.contains("660").iloc[1]
    assert (df["Max Waves Per Core"] == df["model waves"]).all()
    # a660 has 64 vec4 per fibre slot, a740 96: the same registers leave fewer waves on the a660
    assert df["Max Waves Per Core"].iloc[1] < df["Max Waves Per Core"].iloc[0]


@pytest.mark.parametrize("local_size", [64, 128])
def test_occupancy_model_matches_turnip(adreno_build, local_size):
    df = adreno.check_occupancy_model([4, 8, 12, 16, 20, 24, 28, 32, 40], local_size=local_size)
    assert df["agree"].all(), "\n" + df.to_string()
    assert df["turnip waves"].is_monotonic_decreasing


def test_conv_tile_n4_two_costs_registers_and_waves(adreno_build):
    df = conv_bench.conv_pw_tile_n4_check()
    one, two = df.iloc[0], df.iloc[1]
    assert two["Registers used"] > one["Registers used"], df.attrs["summary"]
    assert two["Max Waves Per Core"] <= one["Max Waves Per Core"], df.attrs["summary"]
    assert (df["Max Waves Per Core"] == df["model waves"]).all(), df.to_string()


def test_a_driver_crash_is_blamed_on_its_shader_and_the_rest_go_on(adreno_build):
    # Mesa 25.0.7's ir3 segfaults on the a750 for the conv's OpSDotAccSat path (ir3_get_src_shared <- read_phi_src)
    conv_dot = conv_bench.adreno_job((1, 1, 1), use_dot_ext=True)
    spirv = trivial_spirv()
    results = adreno.stats_many([spirv, conv_dot, {"shader": spirv, "name": "after"}], gpu=750, errors="keep")
    assert "Max Waves Per Core" in results[0] and "Max Waves Per Core" in results[2]
    assert "SIGSEGV" in results[1]["error"]
    table = conv_bench.conv_pw_adreno_table([(1, 1, 1)], gpu=750)
    assert "SIGSEGV" in table["error"].iloc[0]
    fallback = conv_bench.conv_pw_adreno_table([(1, 1, 1)], gpu=750, use_dot_ext=False)
    assert "error" not in fallback.columns and fallback["Registers used"].iloc[0] > 0
