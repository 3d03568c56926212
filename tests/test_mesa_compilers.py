"""workbench.vendors.mesa: Mesa's Turnip (Adreno), PanVK (Mali) and RADV (AMD) on no-op kernel drivers as offline
compilers.

Two kinds of tests:
* no build needed: GPU names, the child's environment per driver, the missing-build error, the set-up's stamp and
  error reports, the shader-db parser, the subgroup-size limitation, the CLI arguments;
* build needed (the `mesa_build` fixture): real statistics of each driver. They run when `workbench compilers
  setup` has filled the cache; otherwise they skip with the reason -- or FAIL when WORKBENCH_REQUIRE_MESA=1 (or its
  older name WORKBENCH_REQUIRE_ADRENO; CI runs the set-up first and sets it, so a broken set-up cannot pass as
  skipped tests).
"""
import argparse
import json
import os
from pathlib import Path

import pytest

from workbench.benchmarks import conv as conv_bench
from workbench.vendors import mesa
from workbench.toolchain.shaders import compile_glsl, compile_shader

TEST_SHADERS = Path(__file__).parent / "shaders"
OLD_TURNIP_ONLY_RECIPE = "bd62896f06c41163"  # the stamp of the Turnip-only build this one replaces


def trivial_spirv():
    return compile_shader("mesa_trivial", shader_dir=TEST_SHADERS)


# ------------------------------------------------------------------------------------------------ no build needed

@pytest.mark.parametrize("given, expected", [
    (740, "a740"), ("740", "a740"), ("a740", "a740"), ("Adreno 740", "a740"), (730, "a730"), (750, "a750"),
    (660, "a660"), ("mali-g610", "mali-g610"), ("G610", "mali-g610"), ("Mali G52", "mali-g52"),
    ("bifrost", "mali-g52"), ("rdna2", "rdna2"), ("navi21", "rdna2"), ("gfx1030", "rdna2"), ("GFX1100", "rdna3"),
    ("navi31", "rdna3"), ("gfx1102", "rdna3-navi33")])
def test_check_gpu_accepts_names_and_aliases(given, expected):
    assert mesa.check_gpu(given).name == expected
    assert mesa.check_gpu(mesa.check_gpu(given)) is mesa.check_gpu(given)


@pytest.mark.parametrize("bad", [630, 999, "a6xx", "", None, True, 740.0, "7400", "rdna9", "mali-g78"])
def test_unknown_gpu_names_what_was_given_and_what_is_expected(bad):
    with pytest.raises(ValueError) as info:
        mesa.check_gpu(bad)
    message = str(info.value)
    assert repr(bad) in message
    for name in ("a740", "a750", "a730", "mali-g610", "mali-g52", "rdna2", "rdna3"):
        assert name in message


def test_every_gpu_has_a_driver_and_a_model():
    from workbench.vendors import occupancy as occ
    for g in mesa.GPUS.values():
        assert g.driver in mesa.DRIVERS and g.vendor in ("adreno", "mali", "amd")
        assert mesa.check_gpu(g.name) is g and all(mesa.check_gpu(a) is g for a in g.aliases)
    assert set(mesa.DEFAULT_GPUS) <= set(mesa.GPUS)
    assert occ.AMD_FAMILIES[dict(mesa.GPUS["rdna3"].model)["family"]].wave64_vgprs_per_simd == 768


def test_stats_validates_the_gpu_before_anything_else(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_MESA_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="unknown GPU 'rdna9'"):
        mesa.stats(b"not even spirv", gpu="rdna9")


def test_cache_root_default_and_overrides(tmp_path, monkeypatch):
    monkeypatch.delenv("WORKBENCH_MESA_DIR", raising=False)
    monkeypatch.delenv("WORKBENCH_ADRENO_DIR", raising=False)
    assert mesa.cache_root() == Path.home() / ".cache" / "workbench" / "mesa" / "mesa-25.0.7"
    monkeypatch.setenv("WORKBENCH_ADRENO_DIR", str(tmp_path / "old"))  # the older knob still works
    assert mesa.cache_root() == (tmp_path / "old").resolve()
    monkeypatch.setenv("WORKBENCH_MESA_DIR", str(tmp_path))              # and the new one wins
    assert mesa.cache_root() == tmp_path.resolve()
    assert mesa.cache_root(tmp_path / "x") == (tmp_path / "x").resolve()
    repo = Path(mesa.__file__).resolve().parent.parent.parent
    monkeypatch.delenv("WORKBENCH_MESA_DIR")
    monkeypatch.delenv("WORKBENCH_ADRENO_DIR")
    assert repo not in mesa.cache_root().parents  # the cache lives outside the repository


BASE_ENV = {"PATH": "/usr/bin", "LD_PRELOAD": "/opt/libother.so", "VK_INSTANCE_LAYERS": "VK_LAYER_KHRONOS_validation",
            "VK_ADD_DRIVER_FILES": "/x.json", "WORKBENCH_DEVICE": "llvmpipe", "WORKBENCH_VALIDATION": "1",
            "PYTHONPATH": "/somewhere", "RADV_FORCE_FAMILY": "navi10", "FD_GPU_ID": "630"}


def _common_env_checks(env, lib):
    assert env["WORKBENCH_VALIDATION"] == "0"
    assert env["VK_LOADER_LAYERS_DISABLE"] == "~all~" and env["NODEVICE_SELECT"] == "1"
    assert env["MESA_SHADER_CACHE_DISABLE"] == "true"
    for gone in ("VK_INSTANCE_LAYERS", "VK_ADD_DRIVER_FILES", "WORKBENCH_DEVICE"):
        assert gone not in env
    paths = env["PYTHONPATH"].split(os.pathsep)
    assert paths[0] == str(Path(mesa.__file__).resolve().parent.parent.parent) and "/somewhere" in paths
    assert env["PATH"] == "/usr/bin"


def test_shim_env_turnip(tmp_path):
    frozen = dict(BASE_ENV)
    env = mesa.shim_env("a660", root=tmp_path, base=BASE_ENV)
    lib = tmp_path.resolve() / "lib"
    assert BASE_ENV == frozen, "the base environment must not be modified"
    assert env["VK_ICD_FILENAMES"] == env["VK_DRIVER_FILES"] == str(lib / "freedreno_icd.json")
    assert env["LD_PRELOAD"].split() == [str(lib / "libfreedreno_noop_drm_shim.so"), "/opt/libother.so"]
    assert env["FD_GPU_ID"] == "660" and "RADV_FORCE_FAMILY" not in env
    _common_env_checks(env, lib)
    again = mesa.shim_env(root=tmp_path, base=env)  # the default GPU, no duplicate preload
    assert again["FD_GPU_ID"] == "740" and again["LD_PRELOAD"] == env["LD_PRELOAD"]


def test_shim_env_panvk_and_radv(tmp_path):
    lib = tmp_path.resolve() / "lib"
    env = mesa.shim_env("mali-g52", root=tmp_path, base=BASE_ENV)
    assert env["VK_ICD_FILENAMES"] == str(lib / "panfrost_icd.json")
    assert env["LD_PRELOAD"].split() == [str(lib / "libpanfrost_noop_drm_shim.so"), "/opt/libother.so"]
    assert env["PAN_GPU_ID"] == "7212" and env["PAN_I_WANT_A_BROKEN_VULKAN_DRIVER"] == "1"
    assert env["BIFROST_MESA_DEBUG"] == "shaderdb"
    assert "FD_GPU_ID" not in env and "RADV_FORCE_FAMILY" not in env
    _common_env_checks(env, lib)
    valhall = mesa.shim_env("mali-g610", root=tmp_path, base=BASE_ENV)
    assert valhall["PAN_GPU_ID"] == "a867" and "PAN_I_WANT_A_BROKEN_VULKAN_DRIVER" not in valhall
    radv = mesa.shim_env("gfx1100", root=tmp_path, base=env)  # from a PanVK environment: its shim goes
    assert radv["VK_ICD_FILENAMES"] == str(lib / "radeon_icd.json")
    assert radv["RADV_FORCE_FAMILY"] == "navi31" and radv["LD_PRELOAD"] == "/opt/libother.so"
    assert "PAN_GPU_ID" not in radv and "BIFROST_MESA_DEBUG" not in radv
    alone = mesa.shim_env("rdna2", root=tmp_path, base={"PATH": "/usr/bin"})
    assert "LD_PRELOAD" not in alone and alone["RADV_FORCE_FAMILY"] == "navi21"


def test_missing_build_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_MESA_DIR", str(tmp_path))
    assert not mesa.is_set_up()
    state = mesa.status()
    assert state["set_up"] is False and state["root"] == str(tmp_path.resolve()) and state["missing"]
    for gpu in ("a740", "mali-g610", "rdna3"):
        with pytest.raises(mesa.MesaNotSetUpError) as info:
            mesa.stats(trivial_spirv(), gpu=gpu)
        message = str(info.value)
        assert "workbench compilers setup" in message and str(tmp_path.resolve()) in message
        for lib in ("libvulkan_freedreno.so", "libvulkan_panfrost.so", "libvulkan_radeon.so",
                    "libpanfrost_noop_drm_shim.so"):
            assert lib in message
    with pytest.raises(mesa.MesaNotSetUpError):
        mesa.check_occupancy_model([4], gpu="rdna2")


def test_a_compiler_that_is_not_built_is_a_row_level_error_in_etvk_stats(tmp_path, monkeypatch):
    from workbench.etvk.run import _offline
    monkeypatch.setenv("WORKBENCH_MESA_DIR", str(tmp_path))
    rows = _offline(mesa, trivial_spirv(), "trivial", {}, (64, 1, 1), [mesa.check_gpu("mali-g610")])
    assert "not set up" in rows[0]["error"] and "workbench compilers setup" in rows[0]["error"]


def _fake_complete_cache(root: Path, recipe=mesa.RECIPE_ID):
    files = mesa.build_files(root)
    (root / "lib").mkdir(parents=True)
    for key, path in files.items():
        if key not in ("stamp", "logs"):
            path.write_text("x")
    files["stamp"].write_text(json.dumps({"recipe": recipe, "debian_version": "25.0.7-2+deb13u1",
                                          "built_at": "then"}))


def test_second_setup_is_instant(tmp_path, monkeypatch, capsys):
    _fake_complete_cache(tmp_path)

    def no_commands(*args, **kwargs):
        raise AssertionError(f"set-up ran a command although the cache is complete: {args}")

    monkeypatch.setattr(mesa.subprocess, "Popen", no_commands)
    monkeypatch.setattr(mesa.subprocess, "run", no_commands)
    state = mesa.setup(tmp_path)
    assert state["set_up"] and state["stamp"]["debian_version"] == "25.0.7-2+deb13u1"
    assert "already set up" in capsys.readouterr().out


def test_the_turnip_only_cache_of_before_is_rebuilt_once(tmp_path):
    _fake_complete_cache(tmp_path / "a", recipe=OLD_TURNIP_ONLY_RECIPE)
    assert not mesa.is_set_up(tmp_path / "a")
    assert "another build recipe" in " ".join(mesa.status(tmp_path / "a")["missing"])
    _fake_complete_cache(tmp_path / "b")
    assert mesa.is_set_up(tmp_path / "b")
    (tmp_path / "b" / "lib" / "libvulkan_radeon.so").unlink()
    assert not mesa.is_set_up(tmp_path / "b")


def test_a_failing_step_reports_its_log_and_tail(tmp_path):
    log = tmp_path / "logs" / "step.log"
    with pytest.raises(mesa.MesaSetupError) as info:
        mesa._run_logged("configure", ["sh", "-c", "echo first line; echo Dependency foo not found; exit 3"],
                         log, what="meson setup")
    message = str(info.value)
    assert "configure" in message and "meson setup failed with exit status 3" in message
    assert str(log) in message and "Dependency foo not found" in message
    assert "first line" in log.read_text()  # the full log stays in the cache dir
    with pytest.raises(mesa.MesaSetupError, match="cannot run"):
        mesa._run_logged("build", ["/nonexistent/ninja"], log)


def test_missing_prerequisites_without_install_name_the_packages(tmp_path, monkeypatch):
    monkeypatch.setattr(mesa, "_missing_apt_packages", lambda packages=None: ["flex", "bison"])
    with pytest.raises(mesa.MesaSetupError) as info:
        mesa._install_prerequisites(tmp_path / "p.log", install=False, echo=lambda text: None)
    assert "flex bison" in str(info.value) and "apt-get install" in str(info.value)


def test_setup_failure_names_the_step(tmp_path, monkeypatch):
    def broken(log_path, install, echo):
        raise mesa.MesaSetupError("prerequisites", "missing Debian packages: flex")

    monkeypatch.setattr(mesa, "_install_prerequisites", broken)
    with pytest.raises(mesa.MesaSetupError, match="prerequisites: missing Debian packages"):
        mesa.setup(tmp_path, progress=False)
    assert not mesa.is_set_up(tmp_path)


def test_pick_version_takes_the_newest_of_the_pinned_upstream():
    listing = "Package: mesa\nVersion: 25.0.7-2\n\nPackage: mesa\nVersion: 25.0.7-2+deb13u1\n\n" \
              "Package: mesa\nVersion: 25.2.1-1\n"
    assert mesa._pick_version(listing) == "25.0.7-2+deb13u1"
    assert mesa._pick_version("Version: 24.2.8-1\n") is None
    assert mesa._pick_version("Version: 2.4.124-2\nVersion: 2.4.123-1\n", mesa.LIBDRM_VERSION) == "2.4.124-2"


VALHALL_LINE = ("SHADER-DB: MESA_SHADER_COMPUTE shader: 39 inst, 0.093750 cycles, 0.093750 fma, 0.031250 cvt, 0.000000 sfu, "
                "0.000000 v, 0.000000 t, 3.000000 ls, 44 quadwords, 2 threads, 1 loops, 0:0 spills:fills")
BIFROST_LINE = ("SHADER-DB: compute shader: 120 inst, 80 tuples, 30 clauses, 4.000000 cycles, 3.333333 arith, "
                "0.000000 texture, 0.000000 vary, 4.000000 ldst, 90 quadwords, 1 threads, 0 preloads, 2 loops, "
                "3:5 spills:fills")


def test_parse_shaderdb_valhall_and_bifrost():
    vertex = VALHALL_LINE.replace("COMPUTE", "VERTEX").replace("39 inst", "7 inst")
    v = mesa.parse_shaderdb("noise\n" + vertex + "\n" + VALHALL_LINE + "\n", "mali-g610")  # the compute one
    assert v["Instructions"] == 39 and v["Threads"] == 2 and v["Work register allocation"] == 32
    assert v["Spills"] == 0 and v["Fills"] == 0 and v["Loops"] == 1 and v["Quadwords"] == 44
    assert v["Cycles ls"] == 3.0
    b = mesa.parse_shaderdb(BIFROST_LINE, "mali-g52")
    assert b["Instructions"] == 120 and b["Tuples"] == 80 and b["Clauses"] == 30 and b["Preloads"] == 0
    assert b["Threads"] == 1 and b["Work register allocation"] == 64 and (b["Spills"], b["Fills"]) == (3, 5)
    assert mesa.parse_shaderdb("no statistics here") == {}
    s = mesa.summary(b, "mali-g52")
    assert (s["registers"], s["waves"], s["occupancy"], s["spills"]) == (64, 1, 0.5, 8)
    assert s["model_waves"] == 1 and s["register_unit"] == "work registers"


def test_summary_of_an_error_says_why():
    s = mesa.summary({"error": "the driver process killed by signal 11 (SIGSEGV)"}, "a750")
    assert s["error"].startswith("the driver process") and s["registers"] is None and s["waves"] is None
    radv = mesa.summary({"VGPRs": 24, "SGPRs": 16, "Spilled VGPRs": 0, "Spilled SGPRs": 0, "Instructions": 50,
                         "Subgroups per SIMD": 16, "Subgroup Size": 32, "LDS size": 0}, "rdna2")
    assert (radv["registers"], radv["waves"], radv["occupancy"], radv["register_unit"]) == (24, 16, 1.0, "vgpr")


def test_subgroup_size_is_refused_clearly():
    spirv = trivial_spirv()
    if mesa._runtime_has_subgroup_size():
        pytest.skip("workbench.vk now supports a required subgroup size")
    with pytest.raises(NotImplementedError, match="required_subgroup_size"):
        mesa.stats(spirv, subgroup_size=128)
    with pytest.raises(ValueError, match="64 or 128"):
        mesa.stats(spirv, subgroup_size=16)


def test_inputs_are_checked_before_any_process_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_MESA_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="not a SPIR-V module"):
        mesa.stats(b"\0" * 64)
    with pytest.raises(TypeError):
        mesa.stats(3.5)
    with pytest.raises(TypeError, match="unexpected keyword"):
        mesa.stats_many([trivial_spirv()], bogus=1)


def test_worker_result_lines_survive_a_torn_last_line(tmp_path):
    path = tmp_path / "result.jsonl"
    path.write_text('{"device": {"name": "Turnip Adreno (TM) 740"}}\n{"index": 0, "name": "a", "statistics": {}}\n'
                    '{"index": 1, "na')
    device, results, done = mesa._read_records(path)
    assert device["name"].endswith("740") and list(results) == [0] and not done
    assert mesa._read_records(tmp_path / "absent.jsonl") == (None, {}, False)


class FakeWorker:
    """Stands in for `mesa._watch_worker` (no build needed): answers a request as a worker would, each job by its
    name: "slow…" hangs (no line: the watchdog kills it), "crash…" ends the process with SIGSEGV, others compile.
    `calls` lists the job names of each process started."""

    def __init__(self):
        self.calls, self.limits = [], []

    def __call__(self, command, env, cwd, result_path, limits):
        request = json.loads(Path(command[-2]).read_text())
        self.calls.append([job["name"] for job in request["jobs"]])
        self.limits.append(limits)
        with open(result_path, "w") as out:
            device = {"name": f"Turnip {request['device_selector']}", "driver_info": "fake"}
            out.write(json.dumps({"device": device}) + "\n")
            for index, job in enumerate(request["jobs"]):
                if job["name"].startswith("slow"):
                    return None, ""
                if job["name"].startswith("crash"):
                    return -11, "Segmentation fault"
                statistics = {"Registers used": 3 + int(job["spec_constants"].get("3", 0)), "Max Waves Per Core": 16}
                out.write(json.dumps({"index": index, "name": job["name"], "statistics": statistics,
                                      "local_size": [64, 1, 1], "seconds": 0.1}) + "\n")
            out.write(json.dumps({"done": True}) + "\n")
        return 0, ""


@pytest.fixture
def fake_build(tmp_path, monkeypatch):
    """A complete-looking build in tmp_path, its statistics cache beside it, and a FakeWorker instead of the
    driver processes."""
    _fake_complete_cache(tmp_path / "mesa")
    monkeypatch.setenv("WORKBENCH_MESA_DIR", str(tmp_path / "mesa"))
    monkeypatch.setenv("WORKBENCH_MESA_STATS_DIR", str(tmp_path / "stats"))
    monkeypatch.setenv("WORKBENCH_MESA_WORKERS", "1")
    monkeypatch.delenv("WORKBENCH_MESA_REFRESH", raising=False)
    worker = FakeWorker()
    monkeypatch.setattr(mesa, "_watch_worker", worker)
    return worker


def _jobs(*names):
    spirv = trivial_spirv()
    return [{"shader": spirv, "name": name, "spec_constants": {3: i}} for i, name in enumerate(names)]


def test_statistics_are_cached_failures_included(fake_build):
    from workbench.vendors import stats_cache
    jobs = _jobs("a", "slow", "crash", "b")
    before = stats_cache.counts()
    first = mesa.stats_many(jobs, errors="keep", timeout=5)
    assert [r.get("failure") for r in first] == [None, "timeout", "crash", None]
    assert "more than 5 s" in first[1]["error"] and "SIGSEGV" in first[2]["error"]
    assert first[0]["Registers used"] == 3 and first[3]["Registers used"] == 6
    assert fake_build.calls == [["a", "slow", "crash", "b"], ["crash", "b"], ["b"]]  # a new process after each
    assert stats_cache.counts()["compiled"] - before["compiled"] == 4

    # a second look: nothing compiled, the timeout and the crash come back as recorded
    again = mesa.stats_many(jobs, errors="keep", timeout=5)
    assert len(fake_build.calls) == 3
    assert stats_cache.counts()["cached"] - before["cached"] == 4
    assert [r.get("failure") for r in again] == [None, "timeout", "crash", None]
    assert "more than 5 s" in again[1]["error"] and "cached" in again[1]["error"]
    assert again[0] == first[0] and again[3] == first[3]
    assert mesa.stats_many(jobs[1:2], errors="keep", timeout=2)[0]["failure"] == "timeout"  # less time: no retry
    assert len(fake_build.calls) == 3

    # asked to: more time, or a refresh, compiles again
    mesa.stats_many(jobs, errors="keep", timeout=10)
    assert fake_build.calls[3:] == [["slow"]]
    mesa.stats_many(jobs, errors="keep", timeout=10, refresh="failures")
    assert fake_build.calls[4:] == [["slow", "crash"], ["crash"]]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WORKBENCH_MESA_REFRESH", "all")
        mesa.stats_many(jobs[:1], errors="keep", timeout=10)
    assert fake_build.calls[6:] == [["a"]]
    with pytest.raises(ValueError, match="refresh must be one of none, failures, all.*'sometimes'"):
        mesa.stats_many(jobs, refresh="sometimes")


def test_a_job_may_have_its_own_time_limit(fake_build):
    jobs = _jobs("a", "slow")
    jobs[1]["timeout"] = 2
    results = mesa.stats_many(jobs, errors="keep", timeout=50)
    assert fake_build.limits[0] == [50, 2] and "more than 2 s" in results[1]["error"]
    assert mesa.stats_many(jobs, errors="keep", timeout=50)[1]["failure"] == "timeout"  # its 2 s: cached
    assert len(fake_build.calls) == 1
    with pytest.raises(ValueError, match="a timeout must be a number of seconds > 0, got -1"):
        mesa.stats_many(jobs, timeout=-1)


def test_panvk_skips_the_largest_conv_tiles_unless_asked(fake_build):
    from workbench.benchmarks import conv_vendors
    tiles = [(1, 1, 1), (4, 4, 1)]
    df = conv_vendors.conv_pw_vendor_tiles(tiles, ["mali-g610", "a740"])
    assert fake_build.calls == [["q8ta_conv2d_pw_m1_n1_k1_dot"], ["q8ta_conv2d_pw_m1_n1_k1_dot",
                                                                   "q8ta_conv2d_pw_m4_n4_k1_dot"]]
    skipped = df[(df["gpu"] == "mali-g610") & (df["tile"] == "M4·N4·K1")].iloc[0]
    assert skipped["failure"] == "skipped" and "pass timeout=" in skipped["error"] and pd_isna(skipped["registers"])
    conv_vendors.conv_pw_vendor_tiles(tiles, ["mali-g610"], timeout=500)  # asked: compiled, with that limit
    assert fake_build.calls[2:] == [["q8ta_conv2d_pw_m4_n4_k1_dot"]] and fake_build.limits[2] == [500]


def test_the_cache_key_is_the_shader_its_constants_local_size_gpu_and_compiler(fake_build, tmp_path):
    spirv = trivial_spirv()
    mesa.stats(spirv, spec_constants={3: 1}, local_size=64)
    for variant in (dict(spec_constants={3: 2}, local_size=64), dict(spec_constants={3: 1}, local_size=128),
                    dict(spec_constants={3: 1}, local_size=64, gpu="a730")):
        calls = len(fake_build.calls)
        mesa.stats(spirv, **variant)
        assert len(fake_build.calls) == calls + 1, variant
    calls = len(fake_build.calls)
    mesa.stats(spirv, spec_constants={3: 1}, local_size=(64, 1, 1), name="another label")
    assert len(fake_build.calls) == calls  # the name is a label, not part of the key
    stamp = mesa.build_files()["stamp"]
    stamp.write_text(json.dumps({**json.loads(stamp.read_text()), "built_at": "later"}))  # a rebuild
    mesa.stats(spirv, spec_constants={3: 1}, local_size=64)
    assert len(fake_build.calls) == calls + 1


def test_parallel_workers_keep_the_order(fake_build, monkeypatch):
    monkeypatch.setenv("WORKBENCH_MESA_WORKERS", "2")
    results = mesa.stats_many(_jobs("a", "b", "c", "d", "e"))
    assert [r["Registers used"] for r in results] == [3, 4, 5, 6, 7]
    assert sorted(map(tuple, fake_build.calls)) == [("a", "c", "e"), ("b", "d")]
    monkeypatch.setenv("WORKBENCH_MESA_WORKERS", "none")
    with pytest.raises(ValueError, match="WORKBENCH_MESA_WORKERS must be a whole number"):
        mesa.stats_many(_jobs("a", "b", "c", "d", "e", "f")[5:])


def test_live_vec4_shader_compiles_with_n_accumulators():
    text = mesa.live_vec4_shader(7)
    assert text.count("vec4 acc") == 7 and "acc6 = acc6 * x + 7.0" in text
    assert compile_glsl(text, name="live7").code[:4] == b"\x03\x02\x23\x07"
    with pytest.raises(ValueError):
        mesa.live_vec4_shader(0)


def _parser(family):
    from workbench.cli import adreno as adreno_cli
    from workbench.cli import compilers as compilers_cli
    parser = argparse.ArgumentParser(prog="workbench")
    {"adreno": adreno_cli, "compilers": compilers_cli}[family].register(
        parser.add_subparsers(dest="command", required=True))
    return parser


def test_cli_arguments():
    from workbench.cli import compilers as compilers_cli
    parser = _parser("adreno")
    args = parser.parse_args(["adreno", "setup", "--force", "-j", "2", "--keep-build"])
    assert (args.adreno_command, args.force, args.jobs, args.keep_build, args.fn) == \
        ("setup", True, 2, True, compilers_cli.setup)
    args = parser.parse_args(["adreno", "stats", "copy", "--gpu", "740,660", "-D", "DTYPE=uint", "--spec", "3=2"])
    assert args.shaders == ["copy"] and args.gpu == "740,660" and args.define == ["DTYPE=uint"]
    args = parser.parse_args(["adreno", "status", "--dir", "/tmp/nowhere-mesa"])
    assert args.fn(args) == 1  # not set up there
    parser = _parser("compilers")
    args = parser.parse_args(["compilers", "stats", "copy", "--dir", "/tmp/nowhere-mesa"])
    assert args.gpu == ",".join(mesa.DEFAULT_GPUS) and args.fn(args) == 1  # not set up: one line, exit 1
    args = parser.parse_args(["compilers", "tiles", "--gpu", "a740,rdna3", "--png", "x.png"])
    assert (args.gpu, args.png, args.fn) == ("a740,rdna3", "x.png", compilers_cli.tiles)
    args = parser.parse_args(["compilers", "gpus"])
    assert args.fn(args) == 0


def test_cli_unknown_gpu_is_one_line(capsys):
    from workbench.cli import main
    assert main(["compilers", "stats", "copy", "--gpu", "a740,rdna9", "--dir", "/tmp/nowhere-mesa"]) == 2
    err = capsys.readouterr().err
    assert "unknown GPU 'rdna9'" in err and "mali-g610" in err


def test_kernel_commands_join_the_adreno_cli():
    from workbench.cli import compilers as compilers_cli
    parser = _parser("adreno")
    args = parser.parse_args(["adreno", "conv", "--tiles", "1,1,1;1,2,1", "--dir", "/tmp/nowhere-mesa"])
    assert (args.adreno_command, args.tiles, args.fn) == ("conv", "1,1,1;1,2,1", compilers_cli.conv)
    assert args.fn(args) == 1  # not set up there: a one-line error, not a traceback


# ------------------------------------------------------------------------------------------------ build needed

def test_trivial_shader_statistics_turnip(mesa_build):
    stats = mesa.stats(trivial_spirv(), local_size=(64, 1, 1), spec_constants={3: 5})
    assert stats["Registers used"] >= 1
    assert stats["Max Waves Per Core"] == 16  # a few registers: every wave slot
    assert stats["Subgroup Size"] == 64       # 64 invocations: ir3 keeps wave64
    for name in ("Instruction Count", "Half-registers used", "STP Count", "LDP Count", "Code size"):
        assert name in stats
    assert "LD_PRELOAD" not in os.environ or "drm_shim" not in os.environ["LD_PRELOAD"]


def test_one_process_per_call_with_per_shader_errors(mesa_build):
    spirv = trivial_spirv()
    jobs = [spirv, {"shader": spirv, "local_size": (128, 1, 1), "name": "wide"},
            {"shader": spirv, "local_size": (4096, 1, 1), "name": "bad"}]
    results = mesa.stats_many(jobs, errors="keep")
    assert results[0]["Subgroup Size"] == 64 and results[1]["Subgroup Size"] == 128
    assert results[2]["failure"] == "error" and "4096" in results[2]["error"]
    with pytest.raises(mesa.MesaCompileError, match="bad"):
        mesa.stats_many(jobs)


def test_stats_rows_over_adreno_gpus(mesa_build):
    df = mesa.stats_rows({"n28": compile_glsl(mesa.live_vec4_shader(28), name="n28")}, gpu=[740, "a660"],
                         local_size=64)
    assert list(df["gpu"]) == ["a740", "a660"]
    assert df["device"].str.contains("740").iloc[0] and df["device"].str.contains("660").iloc[1]
    assert (df["Max Waves Per Core"] == df["model_waves"]).all() and (df["waves"] == df["model_waves"]).all()
    # a660 has 64 vec4 per fibre slot, a740 96: the same registers leave fewer waves on the a660
    assert df["Max Waves Per Core"].iloc[1] < df["Max Waves Per Core"].iloc[0]


@pytest.mark.parametrize("gpu, arch_word", [("mali-g610", "G610"), ("mali-g310", "G310"), ("mali-g52", "G52")])
def test_panvk_statistics(mesa_build, gpu, arch_word):
    small = mesa.stats(trivial_spirv(), gpu=gpu, local_size=(64, 1, 1))
    assert small["Code Size"] > 0 and small["Instructions"] > 0   # Vulkan's statistic, and the shader-db line's
    assert small["Threads"] == 2 and small["Work register allocation"] == 32 and small["Spills"] == 0
    big = mesa.stats(mesa.live_vec4_shader(16), gpu=gpu, local_size=(64, 1, 1))
    assert big["Threads"] == 1 and big["Work register allocation"] == 64  # 64 live values: half the threads
    assert big["Spills"] > 0 and big["Instructions"] > small["Instructions"]
    df = mesa.stats_rows([trivial_spirv()], gpu=gpu)
    assert arch_word in df["device"].iloc[0] and df["occupancy"].iloc[0] == 1.0


@pytest.mark.parametrize("gpu, family", [("rdna2", "NAVI21"), ("rdna3", "NAVI31")])
def test_radv_statistics(mesa_build, gpu, family):
    stats = mesa.stats(trivial_spirv(), gpu=gpu, local_size=(64, 1, 1))
    assert 1 <= stats["VGPRs"] <= 24 and stats["SGPRs"] > 0 and stats["Spilled VGPRs"] == 0
    assert stats["Subgroup Size"] == 64            # RADV compiles compute as wave64 unless RADV_PERFTEST=cswave32
    assert stats["Subgroups per SIMD"] == 32       # ... and counts a wave64 as two: 16 slots x 2
    df = mesa.stats_rows([trivial_spirv()], gpu=gpu)
    row = df.iloc[0]
    assert family in row["device"] and row["occupancy"] == 1.0 and row["max_waves"] == 32
    assert row["waves"] == row["model_waves"] == 32


def test_a_gpu_the_driver_refuses_is_named_with_the_reason(mesa_build):
    with pytest.raises(mesa.MesaCompileError) as info:
        mesa.stats(trivial_spirv(), gpu="mali-g57")
    assert "PanVK" in str(info.value) and "refuses mali-g57" in str(info.value) and "v9" in str(info.value)
    df = mesa.stats_rows([trivial_spirv()], gpu=["mali-g57", "a740"], errors="keep")
    assert "refuses mali-g57" in df["error"].iloc[0] and pd_isna(df["registers"].iloc[0])
    assert pd_isna(df["error"].iloc[1]) and df["registers"].iloc[1] >= 1


def pd_isna(value):
    import pandas as pd
    return bool(pd.isna(value))


@pytest.mark.parametrize("local_size", [64, 128])
def test_occupancy_model_matches_turnip(mesa_build, local_size):
    df = mesa.check_occupancy_model([4, 8, 12, 16, 20, 24, 28, 32, 40], local_size=local_size)
    assert df["agree"].all(), "\n" + df.to_string()
    assert df["compiler waves"].is_monotonic_decreasing


@pytest.mark.parametrize("gpu", ["rdna2", "rdna3", "rdna3-navi33", "mali-g610", "mali-g52"])
def test_occupancy_models_match_radv_and_panvk(mesa_build, gpu):
    df = mesa.check_occupancy_model([4, 8, 12, 16, 20, 24, 28, 32, 40, 48], gpu=gpu)
    assert df["agree"].all(), "\n" + df.to_string()
    assert df["compiler waves"].is_monotonic_decreasing
    assert df["occupancy"].iloc[0] == 1.0 and df["occupancy"].iloc[-1] < 1.0


def test_conv_tile_n4_two_costs_registers_and_waves(mesa_build):
    df = conv_bench.conv_pw_tile_n4_check()
    one, two = df.iloc[0], df.iloc[1]
    assert two["Registers used"] > one["Registers used"], df.attrs["summary"]
    assert two["Max Waves Per Core"] <= one["Max Waves Per Core"], df.attrs["summary"]
    assert (df["Max Waves Per Core"] == df["model waves"]).all(), df.to_string()


def test_a_driver_crash_is_blamed_on_its_shader_and_the_rest_go_on(mesa_build):
    # Mesa 25.0.7's ir3 segfaults on the a750 for the conv's OpSDotAccSat path (ir3_get_src_shared <- read_phi_src)
    conv_dot = conv_bench.adreno_job((1, 1, 1), use_dot_ext=True)
    spirv = trivial_spirv()
    results = mesa.stats_many([spirv, conv_dot, {"shader": spirv, "name": "after"}], gpu=750, errors="keep")
    assert "Max Waves Per Core" in results[0] and "Max Waves Per Core" in results[2]
    assert "SIGSEGV" in results[1]["error"]
    table = conv_bench.conv_pw_adreno_table([(1, 1, 1)], gpu=750)
    assert "SIGSEGV" in table["error"].iloc[0]
    fallback = conv_bench.conv_pw_adreno_table([(1, 1, 1)], gpu=750, use_dot_ext=False)
    assert "error" not in fallback.columns and fallback["Registers used"].iloc[0] > 0


def test_conv_tiles_across_vendors(mesa_build):
    from workbench.benchmarks.conv_vendors import conv_pw_vendor_tiles, vendor_tile_winners
    from workbench.viz.vendor_tiles import vendor_tiles_figure
    tiles = [(1, 1, 1), (1, 2, 1), (2, 2, 1)]
    df = conv_pw_vendor_tiles(tiles, ["a750", "mali-g610", "rdna3"])
    assert len(df) == 9 and df["error"].isna().all(), df[["gpu", "tile", "error"]]
    a750 = df[df["gpu"] == "a750"]
    assert a750["path"].str.startswith("fallback").all() and a750["path"].str.contains("SIGSEGV").all()
    assert (df[df["gpu"] != "a750"]["path"] == "dot product").all()
    for _, group in df.groupby("gpu"):  # more accumulators never take fewer registers
        assert group.sort_values("accumulators")["registers"].is_monotonic_increasing
    winners = vendor_tile_winners(df)
    assert list(winners["gpu"]) == ["a750", "mali-g610", "rdna3"] and winners["winner"].notna().all()
    fig = vendor_tiles_figure(df, winners)
    assert sum(ax.get_visible() for ax in fig.axes) >= 3
