"""Adreno shader statistics without a phone: Mesa's Turnip driver on the freedreno no-op DRM shim.

    from workbench import adreno
    adreno.setup()                                   # once: fetch, build and cache Mesa 25.0.7 (~5 min)
    adreno.stats(spirv)                              # every statistic Turnip reports, for an Adreno 740
    adreno.stats("q8ta_conv2d_pw", defines={...}, spec_constants={...}, local_size=(8, 8, 1), gpu=660)
    adreno.stats_rows({"a": spv_a, "b": spv_b}, gpu=(740, 660))   # DataFrame, one row per shader and GPU
    adreno.check_occupancy_model(range(4, 49, 4))                 # occupancy.adreno_occupancy vs Turnip

This module collects statistics and knows no kernel: per-kernel tables built on it live beside their kernels
(``benchmarks.conv.conv_pw_adreno_table``); ``tests/test_import_structure.py`` keeps it that way.

How it works
    Turnip (src/freedreno/vulkan) is Mesa's Vulkan driver for Adreno a6xx/a7xx; its compiler (ir3) reports
    "Registers used", "Max Waves Per Core" & co. through VK_KHR_pipeline_executable_properties. The no-op DRM
    shim (src/freedreno/drm-shim, LD_PRELOADed) fakes an msm render node for the chip named by FD_GPU_ID, so the
    driver loads on any Linux machine and compiles pipelines as Turnip would on the phone (nothing is ever
    executed). The compiler is Mesa's ir3, not Qualcomm's (the proprietary driver's, whose offline compiler gave
    PR #19396's "28 registers, 37 %"): the two allocate registers differently, so figures can differ.
    Debian 12's Mesa (22.3.6) has no a7xx and no shim, so :func:`setup` builds Mesa 25.0.7 from Debian 13's
    source package -- only the two libraries -- and caches it outside the repository.

    Every compile runs in a child process (``python -m workbench.adreno_worker``) whose environment points the
    Vulkan loader at the Turnip build only (:func:`shim_env`): the caller keeps its own Vulkan device, the shim
    never enters the caller's process, and no validation layer runs there. One child per call and GPU, however
    many shaders: SPIR-V goes over in temp files, statistics come back as JSON.

Cache (``$WORKBENCH_ADRENO_DIR``, default ``~/.cache/workbench/adreno/mesa-25.0.7``)
    ``lib/``  libvulkan_freedreno.so, libfreedreno_noop_drm_shim.so and the ICD manifest that points at them;
    ``logs/`` one full log per set-up step; ``setup.json`` the stamp (a second :func:`setup` returns at once).
    While building also ``venv/`` (meson, mako, pyyaml, packaging), ``src/`` (the unpacked source package) and
    ``build/``; they are deleted after a successful build unless ``keep_build=True`` (then about 450 MB).

Subgroup size
    ir3 chooses wave64 or wave128 itself (wave128 when the workgroup is larger than 64 invocations and twice the
    registers still fit; see ``occupancy.adreno_should_double_threadsize``); the statistic "Subgroup Size" says
    which. Forcing one needs VK_EXT_subgroup_size_control's required subgroup size, which ``workbench.vk`` does
    not offer yet: ``subgroup_size=`` raises NotImplementedError (see :data:`SUBGROUP_SIZE_NEEDS`) until
    ``vk.Device.pipeline`` accepts ``required_subgroup_size=``; then it is passed through unchanged.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .compilers import debian_source

__all__ = [
    "MESA_VERSION", "SUPPORTED_GPUS", "DEFAULT_GPU", "APT_PACKAGES", "PIP_PACKAGES", "MESON_OPTIONS",
    "AdrenoError", "AdrenoNotSetUpError", "AdrenoSetupError", "AdrenoCompileError",
    "cache_root", "is_set_up", "build_files", "shim_env", "check_gpu", "setup", "status",
    "stats", "stats_many", "stats_rows", "model_columns", "live_vec4_shader", "check_occupancy_model",
]

MESA_VERSION = "25.0.7"  # Debian 13's mesa 25.0.7-2+deb13u1 (debian_source.DEBIAN_SUITES)
DEFAULT_GPU = 740
# FD_GPU_ID values the shim knows (occupancy.md B10) that the workbench supports: a740 by default; a730 and a750
# (same register file as a740) and a660 (64 vec4 per fibre slot instead of 96) for comparison.
SUPPORTED_GPUS = (740, 730, 750, 660)
MAX_WAVES = 16  # wave slots per SP on a6xx/a7xx (ir3 max_waves); occupancy = waves / 16

# Debian packages the build needs: compilers; Mesa's dependencies for Turnip + the shim (meson.build requires
# flex, bison and glslangValidator whenever the freedreno Vulkan driver is built, libdrm >= 2.4.109, zlib; expat
# and zstd are optional but part of the tested build); dpkg-source (dpkg-dev) and xz to unpack the source package;
# python3-venv for the private build venv; libvulkan1, the loader that runs the result.
APT_PACKAGES = ("gcc", "g++", "pkg-config", "ninja-build", "flex", "bison", "libdrm-dev", "zlib1g-dev",
                "libexpat1-dev", "libzstd-dev", "glslang-tools", "python3-venv", "dpkg-dev", "xz-utils",
                "libvulkan1")
# meson >= 1.1 (Debian 12 has 1.0.1); mako, pyyaml, packaging for Mesa's code generators. The venv is first on
# PATH during meson and ninja: isaspec's decode.py runs through `#!/usr/bin/env python3`.
PIP_PACKAGES = ("meson==1.7.2", "mako", "pyyaml", "packaging")
MESON_OPTIONS = (
    "--wrap-mode=nodownload", "-Doptimization=2", "-Ddebug=false", "-Db_ndebug=true",
    "-Dvulkan-drivers=freedreno", "-Dfreedreno-kmds=msm", "-Dgallium-drivers=freedreno",
    "-Dtools=drm-shim", "-Dplatforms=", "-Dllvm=disabled", "-Dglx=disabled", "-Degl=disabled",
    "-Dgbm=disabled", "-Dgles1=disabled", "-Dgles2=disabled", "-Dvalgrind=disabled", "-Dlibunwind=disabled",
    "-Dxmlconfig=disabled", "-Dvideo-codecs=",
)
TURNIP_TARGET = "src/freedreno/vulkan/libvulkan_freedreno.so"
SHIM_TARGET = "src/freedreno/drm-shim/libfreedreno_noop_drm_shim.so"
DEVENV_ICD = "src/freedreno/vulkan/freedreno_devenv_icd.x86_64.json"
TURNIP_LIB, SHIM_LIB, ICD_NAME = "libvulkan_freedreno.so", "libfreedreno_noop_drm_shim.so", "freedreno_icd.json"
STAMP_NAME = debian_source.STAMP_NAME
_RECIPE = {"mesa": MESA_VERSION, "options": MESON_OPTIONS, "targets": (TURNIP_TARGET, SHIM_TARGET),
           "pip": PIP_PACKAGES, "layout": 1}
RECIPE_ID = debian_source.recipe_id(_RECIPE)

SUBGROUP_SIZE_NEEDS = (
    "workbench.vk cannot request a subgroup size yet. Needed there: at device creation, enable "
    "VkPhysicalDeviceSubgroupSizeControlFeatures.subgroupSizeControl (+ computeFullSubgroups; core in Vulkan 1.3, "
    "else VK_EXT_subgroup_size_control) when the device has it; in Pipeline.__init__, a keyword "
    "`required_subgroup_size` that chains VkPipelineShaderStageRequiredSubgroupSizeCreateInfo"
    "(requiredSubgroupSize=N) into VkPipelineShaderStageCreateInfo.pNext (check N against "
    "VkPhysicalDeviceSubgroupSizeControlProperties min/maxSubgroupSize: 64..128 on Turnip), exposed as "
    "Device.pipeline(..., required_subgroup_size=N). workbench.adreno passes it through as soon as it exists. "
    "Until then ir3 chooses: wave64 for workgroups of <= 64 invocations, else wave128 when 2x the registers fit.")

_SPIRV_MAGIC = b"\x03\x02\x23\x07"
_PACKAGE_PARENT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------------------------

class AdrenoError(RuntimeError):
    """Base class of this module's errors."""


class AdrenoNotSetUpError(AdrenoError):
    """The Turnip + drm-shim build is not in the cache: run `workbench adreno setup`."""


class AdrenoSetupError(AdrenoError, debian_source.SetupError):
    """A set-up step failed; the message names the step, its full log and the log's last lines."""

    label = "adreno setup"


class AdrenoCompileError(AdrenoError):
    """Turnip (or the worker process) failed on a shader."""


# ----------------------------------------------------------------------------------------------------------------
# Where things are
# ----------------------------------------------------------------------------------------------------------------

def cache_root(root=None) -> Path:
    """The build cache: `root`, else $WORKBENCH_ADRENO_DIR, else ~/.cache/workbench/adreno/mesa-25.0.7."""
    return debian_source.cache_dir(root, "WORKBENCH_ADRENO_DIR",
                                   Path.home() / ".cache" / "workbench" / "adreno" / f"mesa-{MESA_VERSION}")


def build_files(root=None) -> dict[str, Path]:
    """Paths of the set-up's products (present or not): turnip, shim, icd, stamp, logs."""
    r = cache_root(root)
    return {"turnip": r / "lib" / TURNIP_LIB, "shim": r / "lib" / SHIM_LIB, "icd": r / "lib" / ICD_NAME,
            "stamp": r / STAMP_NAME, "logs": r / "logs"}


def _read_stamp(root=None) -> dict | None:
    return debian_source.read_stamp(build_files(root)["stamp"])


def _missing_products(root=None) -> list[str]:
    files = build_files(root)
    missing = [str(files[k]) for k in ("turnip", "shim", "icd") if not files[k].is_file()]
    return missing + debian_source.stamp_missing(files["stamp"], RECIPE_ID)


def is_set_up(root=None) -> bool:
    """True when the cache holds a complete build of this recipe (stamp + both libraries + ICD manifest)."""
    return not _missing_products(root)


def _require_set_up(root=None) -> dict[str, Path]:
    missing = _missing_products(root)
    if missing:
        raise AdrenoNotSetUpError(
            f"the Adreno compiler (Mesa {MESA_VERSION} Turnip + freedreno drm-shim) is not set up in "
            f"{cache_root(root)} (missing: {', '.join(missing)}).\nRun `workbench adreno setup` (or "
            "`python -c 'import workbench.adreno as a; a.setup()'`): it fetches Debian 13's Mesa source and builds "
            "the two libraries once, about 5 minutes on 2 cores. $WORKBENCH_ADRENO_DIR chooses the cache folder.")
    return build_files(root)


def status(root=None) -> dict:
    """What the cache holds: set_up, root, missing, and the stamp (versions, build time, sizes)."""
    missing = _missing_products(root)
    return {"set_up": not missing, "root": str(cache_root(root)), "missing": missing,
            "stamp": _read_stamp(root)}


def check_gpu(gpu) -> int:
    """The GPU id as an int (740, "740", "a740", "Adreno 740"); ValueError listing the supported ones."""
    match = re.fullmatch(r"\s*(?:adreno\s*)?a?(\d{3})\s*", str(gpu), flags=re.IGNORECASE) \
        if isinstance(gpu, (int, str)) and not isinstance(gpu, bool) else None
    gpu_id = int(match.group(1)) if match else None
    if gpu_id not in SUPPORTED_GPUS:
        raise ValueError(f"unsupported Adreno GPU {gpu!r}; supported: "
                         + ", ".join(f"{g}{' (default)' if g == DEFAULT_GPU else ''}" for g in SUPPORTED_GPUS))
    return gpu_id


def shim_env(gpu=DEFAULT_GPU, root=None, base: dict | None = None) -> dict:
    """The environment of a child process that compiles for Adreno `gpu` with the cached Turnip build.

    A copy of `base` (default os.environ) where the Vulkan loader sees only Turnip (VK_ICD_FILENAMES and its
    newer name VK_DRIVER_FILES; added drivers and requested layers dropped, every layer disabled, Mesa's
    device-select layer off), the shim is preloaded (LD_PRELOAD, before anything already there), FD_GPU_ID names
    the chip, the workbench's validation layer is off, and Mesa's on-disk shader cache is off (statistics always
    come from a real compile). Does not check that the files exist (see `is_set_up`).
    """
    gpu_id = check_gpu(gpu)
    files = build_files(root)
    env = dict(os.environ if base is None else base)
    for name in ("VK_ADD_DRIVER_FILES", "VK_INSTANCE_LAYERS", "VK_LOADER_LAYERS_ENABLE", "WORKBENCH_DEVICE",
                 "MESA_VK_DEVICE_SELECT"):
        env.pop(name, None)
    env["VK_ICD_FILENAMES"] = str(files["icd"])
    env["VK_DRIVER_FILES"] = str(files["icd"])
    env["VK_LOADER_LAYERS_DISABLE"] = "~all~"
    env["NODEVICE_SELECT"] = "1"
    preload = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split() if p and p != str(files["shim"])]
    env["LD_PRELOAD"] = " ".join([str(files["shim"])] + preload)
    env["FD_GPU_ID"] = str(gpu_id)
    env["WORKBENCH_VALIDATION"] = "0"
    env["MESA_SHADER_CACHE_DISABLE"] = "true"
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(_PACKAGE_PARENT) not in paths:  # the child imports this very workbench, installed or not
        env["PYTHONPATH"] = os.pathsep.join([str(_PACKAGE_PARENT)] + paths)
    return env


# ----------------------------------------------------------------------------------------------------------------
# Set-up: fetch Debian 13's Mesa source, build Turnip + the no-op shim, cache them
# ----------------------------------------------------------------------------------------------------------------

def _tail(lines, n: int = 40) -> str:
    return "\n".join(list(lines)[-n:])


def _run_logged(step: str, command: list[str], log_path: Path, **kwargs) -> None:
    """Run `command`, writing everything it prints to `log_path`; AdrenoSetupError with the tail on failure."""
    debian_source.run_logged(step, command, log_path, error=AdrenoSetupError, **kwargs)


def _missing_apt_packages(packages=APT_PACKAGES) -> list[str]:
    return debian_source.missing_apt_packages(packages)


def _install_prerequisites(log_path: Path, install: bool, echo) -> None:
    if shutil.which("apt-get") is None or shutil.which("dpkg-query") is None:
        raise AdrenoSetupError("prerequisites", "needs a Debian or Ubuntu system (apt-get source, dpkg); "
                               "apt-get or dpkg-query not found")
    debian_source.install_prerequisites(APT_PACKAGES, log_path, install, echo, error=AdrenoSetupError,
                                        missing=_missing_apt_packages)


def _make_venv(venv: Path, log_path: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.is_file():
        base = "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else sys.executable
        _run_logged("python venv", [base, "-m", "venv", str(venv)], log_path,
                    what="python3 -m venv (Debian: apt-get install python3-venv)")
    wanted = "\n".join(PIP_PACKAGES)
    marker = venv / ".workbench-pip"
    if not marker.is_file() or marker.read_text() != wanted:
        _run_logged("python venv", [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                    *PIP_PACKAGES], log_path, what="pip install " + " ".join(PIP_PACKAGES))
        marker.write_text(wanted)
    return venv / "bin"


def _pick_version(showsrc: str) -> str | None:
    """The newest Debian version of upstream MESA_VERSION listed by apt-cache showsrc."""
    return debian_source.newest(v for v in re.findall(r"^Version:\s*(\S+)", showsrc, flags=re.MULTILINE)
                                if v.split(":")[-1].startswith(MESA_VERSION + "-"))


def _fetch_source(src_dir: Path, log_path: Path, echo) -> tuple[Path, str]:
    """apt-get source mesa=25.0.7-* from Debian 13, with deb-src enabled only in a temporary apt configuration."""
    tree = src_dir / f"mesa-{MESA_VERSION}"
    version_file = src_dir / "debian-version"
    if (tree / "meson.build").is_file() and version_file.is_file():
        echo(f"    reusing {tree}")
        return tree, version_file.read_text().strip()
    if src_dir.exists():
        shutil.rmtree(src_dir)
    src_dir.mkdir(parents=True)
    mirror = os.environ.get("WORKBENCH_ADRENO_MIRROR", debian_source.DEBIAN_MIRROR)
    with debian_source.AptSources("mesa", mirror, log_path, step="fetch source", error=AdrenoSetupError,
                                  echo=echo) as apt:
        showsrc = apt.showsrc("mesa")
        version = _pick_version(showsrc.stdout)
        if version is None:
            raise apt.no_source("mesa", MESA_VERSION, showsrc)
        echo(f"    apt-get source mesa={version} (about 47 MB)")
        apt.run(["apt-get", *apt.options, "source", "-q", f"mesa={version}"], cwd=src_dir, what="apt-get source")
    if not (tree / "meson.build").is_file():
        raise AdrenoSetupError("fetch source", f"apt-get source left no {tree}/meson.build", log_path)
    for archive in src_dir.glob("mesa_*.tar.*"):  # unpacked: the tarballs are 47 MB of nothing
        archive.unlink()
    version_file.write_text(version + "\n")
    return tree, version


def _build_env(venv_bin: Path) -> dict:
    return debian_source.clean_env(PATH=os.pathsep.join([str(venv_bin), os.environ.get("PATH", "")]),
                                   VIRTUAL_ENV=str(venv_bin.parent))


def _write_icd(lib: Path, devenv_icd: Path) -> Path:
    api_version = "1.4.305"
    try:
        api_version = json.loads(devenv_icd.read_text())["ICD"]["api_version"]
    except (OSError, ValueError, KeyError):
        pass
    icd = lib / ICD_NAME
    icd.write_text(json.dumps({"file_format_version": "1.0.1",
                               "ICD": {"library_path": str(lib / TURNIP_LIB), "api_version": api_version}},
                              indent=2) + "\n")
    return icd


def setup(root=None, *, force: bool = False, jobs: int | None = None, keep_build: bool = False,
          install_prerequisites: bool = True, progress: bool = True, smoke_test: bool = True) -> dict:
    """Fetch Mesa 25.0.7 (Debian 13's source package), build Turnip + the freedreno no-op DRM shim, cache them.

    Steps (each logged in full to <root>/logs/): 1 Debian build prerequisites (apt-get install where missing),
    2 a private venv with meson, mako, pyyaml, packaging, 3 `apt-get source mesa=25.0.7-*` with deb-src for
    Debian 13 enabled only in a temporary apt configuration (the system's sources are not touched), 4 meson
    configure (Turnip + drm-shim only, no downloads), 5 ninja the two libraries, 6 install them into <root>/lib
    with an ICD manifest, compile a test shader on the fake a740, write the stamp, delete venv/, src/, build/ (unless
    `keep_build`). A second call finds the stamp and returns at once (`force=True` rebuilds).

    Returns status(): {"set_up": True, "root", "missing": [], "stamp": {...}}. Raises AdrenoSetupError naming
    the failed step, with the path of its full log and its last lines.
    """
    root = cache_root(root)
    echo = (lambda text: print(text, flush=True)) if progress else (lambda text: None)
    if not force and is_set_up(root):
        stamp = _read_stamp(root)
        echo(f"adreno setup: already set up in {root} (Mesa {stamp.get('debian_version', MESA_VERSION)}, "
             f"built {stamp.get('built_at', '?')}); force=True rebuilds")
        return status(root)
    started = time.monotonic()
    stamp_path = build_files(root)["stamp"]
    with debian_source.setup_session(root, steps=6, error=AdrenoSetupError, what="`workbench adreno setup`",
                                     echo=echo) as steps:
        echo(f"adreno setup: Mesa {MESA_VERSION} Turnip + freedreno drm-shim into {root}")

        with steps.step("prerequisites", "Debian build prerequisites") as log:
            _install_prerequisites(log, install_prerequisites, echo)
        with steps.step("venv", "private Python venv: " + " ".join(PIP_PACKAGES)) as log:
            venv_bin = _make_venv(root / "venv", log)
        with steps.step("source", f"Mesa {MESA_VERSION} source from Debian 13 (apt-get source)") as log:
            tree, debian_version = _fetch_source(root / "src", log, echo)
        env = _build_env(venv_bin)
        build = root / "build"
        with steps.step("configure", "meson configure (Turnip + drm-shim only)") as log:
            debian_source.configure_once(
                build, "workbench-meson-options.json", [str(tree), *MESON_OPTIONS],
                lambda: _run_logged("configure", [str(venv_bin / "meson"), "setup", str(build), str(tree),
                                                  *MESON_OPTIONS], log, env=env, what="meson setup"),
                force=force, echo=echo)
        with steps.step("build", f"ninja {TURNIP_TARGET} {SHIM_TARGET}") as log:
            ninja = shutil.which("ninja", path=env["PATH"]) or "ninja"
            handler = debian_source.ninja_progress(echo, every=5, detail=True, bar=progress)
            try:
                _run_logged("build", [ninja, "-C", str(build), "-j", str(jobs or os.cpu_count() or 2),
                                      TURNIP_TARGET, SHIM_TARGET], log, env=env, on_line=handler, what="ninja")
            finally:
                handler.close()
        with steps.step("install", "install into lib/, test compile on the fake a740, stamp") as log:
            lib = root / "lib"
            debian_source.copy_products(build, lib, ((TURNIP_TARGET, TURNIP_LIB), (SHIM_TARGET, SHIM_LIB)), log,
                                        error=AdrenoSetupError)
            _write_icd(lib, build / DEVENV_ICD)
            build_bytes = debian_source.dir_bytes(build)
            source_bytes = debian_source.dir_bytes(root / "src")
            stamp = {
                "recipe": RECIPE_ID, "mesa": MESA_VERSION, "debian_version": debian_version,
                "built_at": time.strftime("%Y-%m-%d %H:%M:%S"), "meson_options": list(MESON_OPTIONS),
                "step_seconds": dict(steps.times), "build_dir_bytes": build_bytes, "source_bytes": source_bytes,
                "files": {name: {"path": str(lib / name), "bytes": (lib / name).stat().st_size}
                          for name in (TURNIP_LIB, SHIM_LIB)},
            }
            debian_source.write_stamp(stamp_path, stamp)  # is_set_up() from here on
            if smoke_test:
                try:
                    found = stats(_smoke_spirv(), gpu=DEFAULT_GPU, root=root, name="setup_smoke_test")
                except AdrenoError as exc:
                    stamp_path.unlink()
                    raise AdrenoSetupError("install", f"the test compile on the fake a740 failed: {exc}", log) \
                        from None
                if "Max Waves Per Core" not in found:
                    stamp_path.unlink()
                    raise AdrenoSetupError("install", f"Turnip reported no 'Max Waves Per Core': {found}", log)
                echo(f"    test compile: Registers used {found.get('Registers used')}, "
                     f"Max Waves Per Core {found.get('Max Waves Per Core')}")
            if not keep_build:  # the libraries need none of these; a rebuild makes them again
                for folder in (build, root / "src", root / "venv"):
                    shutil.rmtree(folder, ignore_errors=True)
            debian_source.finish_stamp(
                stamp, stamp_path, root, started=started, keep_build=keep_build,
                step_seconds=dict(steps.times, install=round(time.monotonic() - started
                                                             - sum(steps.times.values()), 1)))
        echo(debian_source.done_message("adreno setup", stamp, root))
    return status(root)


def _smoke_spirv():
    from .shaders import compile_glsl
    return compile_glsl(live_vec4_shader(4), name="adreno_smoke")


# ----------------------------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------------------------

def _runtime_has_subgroup_size() -> bool:
    from .vk import Device
    return "required_subgroup_size" in inspect.signature(Device.pipeline).parameters


def _resolve_code(shader, defines=None):
    """(SPIR-V bytes, default name) from a Spirv, bytes, a .spv/.glsl path, GLSL text or a shaders/ name."""
    if hasattr(shader, "code") and isinstance(getattr(shader, "code"), (bytes, bytearray)):
        if defines:
            raise ValueError("defines= applies to GLSL, not to an already compiled Spirv")
        return bytes(shader.code), getattr(shader, "name", "spirv")
    if isinstance(shader, (bytes, bytearray, memoryview)):
        if defines:
            raise ValueError("defines= applies to GLSL, not to SPIR-V bytes")
        return bytes(shader), "spirv"
    if isinstance(shader, (str, os.PathLike)):
        text = os.fspath(shader)
        from .shaders import compile_glsl, compile_shader
        if "\n" in text or "void main" in text:
            return compile_glsl(text, defines=defines, name="inline").code, "inline"
        path = Path(text)
        if path.suffix == ".spv":
            return path.read_bytes(), path.stem
        if path.suffix in (".glsl", ".comp") and path.is_file():
            return compile_glsl(path.read_text(), defines=defines, name=path.stem, source_path=path).code, path.stem
        spirv = compile_shader(text, defines)
        return spirv.code, spirv.name
    raise TypeError(f"expected SPIR-V bytes, a workbench.shaders.Spirv, a .spv/.glsl path, GLSL text or a shader "
                    f"name; got {type(shader).__name__}")


def _job(item, index: int, common: dict) -> dict:
    """One compile request: the item may be a shader or a dict with shader + per-shader options."""
    options = dict(common)
    if isinstance(item, dict):
        unknown = set(item) - {"shader", "name", "defines", "spec_constants", "local_size", "subgroup_size"}
        if unknown or "shader" not in item:
            raise ValueError(f"a job dict needs 'shader' and may have name, defines, spec_constants, local_size, "
                             f"subgroup_size; got keys {sorted(item)}")
        options.update({k: v for k, v in item.items() if k != "shader"})
        item = item["shader"]
    code, default_name = _resolve_code(item, options.get("defines"))
    if len(code) < 20 or len(code) % 4 or not code.startswith(_SPIRV_MAGIC):
        raise ValueError(f"job {index}: not a SPIR-V module ({len(code)} bytes)")
    subgroup = options.get("subgroup_size")
    if subgroup is not None:
        if subgroup not in (64, 128):
            raise ValueError(f"subgroup_size must be 64 or 128 on Adreno (wave64 / wave128), got {subgroup!r}")
        if not _runtime_has_subgroup_size():
            raise NotImplementedError(SUBGROUP_SIZE_NEEDS)
    local = options.get("local_size")
    if local is not None:
        local = [int(v) for v in (tuple(local) if not isinstance(local, int) else (local,)) + (1, 1)][:3]
    spec = {str(int(k)): (v.item() if hasattr(v, "item") else v)
            for k, v in (options.get("spec_constants") or {}).items()}
    return {"name": options.get("name") or default_name, "code": code, "spec_constants": spec,
            "local_size": local, "required_subgroup_size": subgroup}


def _normalise_items(shaders) -> list:
    if isinstance(shaders, dict) and "shader" not in shaders:  # {name: shader or job dict}
        items = []
        for name, item in shaders.items():
            item = dict(item) if isinstance(item, dict) else {"shader": item}
            item.setdefault("name", name)
            items.append(item)
        return items
    if isinstance(shaders, (list, tuple)):
        return list(shaders)
    return [shaders]


def _read_records(path: Path) -> tuple[dict | None, dict[int, dict], bool]:
    """(device, index → result, done) from a worker's JSON-lines result file (a torn last line is ignored)."""
    device, results, done = None, {}, False
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return device, results, done
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if "device" in record:
            device = record["device"]
        elif "index" in record:
            results[int(record["index"])] = record
        elif record.get("done"):
            done = True
    return device, results, done


def _run_worker(jobs: list[dict], gpu: int, root, timeout: float | None) -> tuple[dict, list[dict]]:
    """Compile `jobs` in a child process with the shim's environment; one result per job, in order.

    Normally one process does them all. If the driver crashes on a shader, that shader's result says so and a new
    process continues with the rest (the result lines the crashed one already wrote are kept)."""
    _require_set_up(root)
    env = shim_env(gpu, root)
    results: list[dict | None] = [None] * len(jobs)
    device = None
    with tempfile.TemporaryDirectory(prefix="workbench-adreno-") as tmp:
        paths = []
        for i, job in enumerate(jobs):
            path = Path(tmp) / f"job{i}.spv"
            path.write_bytes(job["code"])
            paths.append(str(path))
        pending = list(range(len(jobs)))
        attempt = 0
        while pending:
            attempt += 1
            request = {"gpu": gpu, "jobs": [{k: v for k, v in jobs[i].items() if k != "code"}
                                            | {"spirv": paths[i]} for i in pending]}
            request_path = Path(tmp) / f"request{attempt}.json"
            result_path = Path(tmp) / f"result{attempt}.jsonl"
            request_path.write_text(json.dumps(request))
            command = [sys.executable, "-m", "workbench.adreno_worker", str(request_path), str(result_path)]
            limit = timeout if timeout is not None else 120 + 30 * len(pending)
            try:
                proc = subprocess.run(command, env=env, capture_output=True, text=True, errors="replace",
                                      timeout=limit, cwd=tmp)
                rc, output = proc.returncode, (proc.stdout + proc.stderr)
            except subprocess.TimeoutExpired as exc:
                rc = None
                output = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                                 for x in (exc.stdout, exc.stderr))
            found_device, found, done = _read_records(result_path)
            device = found_device or device
            for position, record in found.items():
                results[pending[position]] = record
            if len(found) == len(pending):  # all there (a crash while closing the device loses nothing)
                break
            lines = [l for l in output.strip().splitlines() if not l.startswith("Unknown DRM_IOCTL_MSM_GET_PARAM")]
            if rc is None:
                how = f"did not finish within {limit:g} s"
            else:
                how = f"exit status {rc}" if rc >= 0 else f"killed by signal {-rc}"
                if rc < 0:
                    with contextlib.suppress(ValueError):
                        import signal
                        how += f" ({signal.Signals(-rc).name})"
            if found_device is None:  # died before any shader: nothing to blame on one of them
                raise AdrenoCompileError(f"the Turnip worker (FD_GPU_ID={gpu}) failed ({how}) before compiling "
                                         "anything; its last output:\n" + _tail(lines, 30))
            culprit = pending[len(found)]
            results[culprit] = {"name": jobs[culprit]["name"],
                                "error": f"the driver process {how} while compiling this shader (a Mesa/ir3 "
                                         f"crash or hang on a{gpu})" + (f"; last output: {_tail(lines, 8)}"
                                                                        if lines else "")}
            pending = pending[len(found) + 1:]
    if device is None:
        raise AdrenoCompileError(f"the Turnip worker (FD_GPU_ID={gpu}) reported no device")
    if str(gpu) not in device["name"] or "turnip" not in device["name"].lower():
        raise AdrenoCompileError(f"expected Turnip for Adreno {gpu}, the worker got {device['name']!r} "
                                 f"({device['driver_info']})")
    return device, results


def stats_many(shaders, gpu=DEFAULT_GPU, *, root=None, timeout: float | None = None, errors: str = "raise",
               **common) -> list[dict]:
    """Statistics of several shaders, compiled by one child process for one GPU.

    `shaders`: a list of shaders (anything `stats` takes) or job dicts ({"shader", "name", "defines",
    "spec_constants", "local_size", "subgroup_size"}), or a dict name → shader / job dict. `common` gives the
    defaults of those options. Returns one statistics dict per shader, in order; a shader Turnip rejected raises
    AdrenoCompileError (errors="raise") or gives {"error": message} (errors="keep").
    """
    gpu_id = check_gpu(gpu)
    if errors not in ("raise", "keep"):
        raise ValueError(f"errors must be 'raise' or 'keep', got {errors!r}")
    unknown = set(common) - {"defines", "spec_constants", "local_size", "subgroup_size", "name"}
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    jobs = [_job(item, i, common) for i, item in enumerate(_normalise_items(shaders))]
    if not jobs:
        return []
    _, results = _run_worker(jobs, gpu_id, root, timeout)
    out = []
    for job, result in zip(jobs, results):
        if "error" in result:
            if errors == "raise":
                raise AdrenoCompileError(f"Turnip (a{gpu_id}) rejected {job['name']!r}: {result['error']}")
            out.append({"error": result["error"]})
        else:
            out.append(result["statistics"])
    return out


def stats(shader_or_spirv, gpu=DEFAULT_GPU, subgroup_size=None, local_size=None, spec_constants=None, *,
          defines=None, name=None, root=None, timeout: float | None = None) -> dict:
    """Every statistic Turnip reports for one compute shader on Adreno `gpu` (740 default; 730, 750, 660).

    `shader_or_spirv`: SPIR-V bytes, a `workbench.shaders.Spirv`, a .spv or .glsl path, GLSL text, or the name of
    a shader in shaders/ (compiled with `defines`). `local_size` and `spec_constants` as for `vk.Device.pipeline`
    (the local size decides wave64 vs wave128). Returns {"Max Waves Per Core": 16, "Registers used": 3, ...,
    "Subgroup Size": 64} (names: occupancy.md B9). Needs `setup()` (AdrenoNotSetUpError otherwise).
    `subgroup_size` (64 / 128) needs a runtime option workbench.vk lacks: NotImplementedError, see the module doc.
    """
    common = {"subgroup_size": subgroup_size, "local_size": local_size, "spec_constants": spec_constants,
              "defines": defines, "name": name}
    return stats_many([shader_or_spirv], gpu, root=root, timeout=timeout, **common)[0]


def model_columns(statistics: dict, local_size, gpu: int) -> dict:
    """What `occupancy.adreno_occupancy` predicts from Turnip's reported registers: "model waves", "model subgroup
    size" (empty where Turnip reported no registers)."""
    from . import occupancy as occ
    regs, half = statistics.get("Registers used"), statistics.get("Half-registers used") or 0
    if regs is None:
        return {}
    model = occ.adreno_occupancy(int(regs), int(half), local_size or (64, 1, 1), gpu=gpu)
    return {"model waves": model.waves_or_warps_active,
            "model subgroup size": model.details["threadsize"]}


def stats_rows(shaders, gpu=DEFAULT_GPU, *, root=None, timeout: float | None = None, errors: str = "raise",
               model: bool = True, **common):
    """A DataFrame, one row per shader and GPU: name, gpu, local_size, every statistic, occupancy (= Max Waves
    Per Core / 16) and, with `model`, what `occupancy.adreno_occupancy` predicts from the reported registers
    ("model waves", "model subgroup size"). `gpu` may be a list: one child process per GPU."""
    import pandas as pd
    gpus = [check_gpu(g) for g in (gpu if isinstance(gpu, (list, tuple, set, range)) else [gpu])]
    items = _normalise_items(shaders)
    jobs = [_job(item, i, {k: v for k, v in common.items() if k != "name"}) for i, item in enumerate(items)]
    rows = []
    for gpu_id in gpus:
        device, results = _run_worker(jobs, gpu_id, root, timeout)
        for job, result in zip(jobs, results):
            row = {"name": job["name"], "gpu": gpu_id, "device": device["name"],
                   "local_size": tuple(result.get("local_size") or job["local_size"] or ())}
            if "error" in result:
                if errors == "raise":
                    raise AdrenoCompileError(f"Turnip (a{gpu_id}) rejected {job['name']!r}: {result['error']}")
                row["error"] = result["error"]
            else:
                statistics = result["statistics"]
                row.update(statistics)
                if "Max Waves Per Core" in statistics:
                    row["occupancy"] = statistics["Max Waves Per Core"] / MAX_WAVES
                if model:
                    row.update(model_columns(statistics, row["local_size"], gpu_id))
            rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------------------
# The occupancy model checked against Turnip's ir3 (Mesa's Adreno compiler, not Qualcomm's)
# ----------------------------------------------------------------------------------------------------------------

def live_vec4_shader(n: int) -> str:
    """GLSL of a compute shader that keeps `n` vec4 accumulators live across a loop of unknown trip count.

    Written out variable by variable (no arrays, no loops over the accumulators), so no unrolling limit or
    private-memory array can change what the register allocator sees: all `n` are loaded before the loop,
    updated in every iteration (acc_i = acc_i * x + (i + 1)) and stored after it.
    """
    n = int(n)
    if not 1 <= n <= 256:
        raise ValueError(f"n must be in 1..256, got {n}")
    lines = [
        "#version 450",
        "layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;",
        "layout(std430, set = 0, binding = 0) writeonly buffer Out { vec4 t_out[]; };",
        "layout(std430, set = 0, binding = 1) readonly buffer In { vec4 t_in[]; };",
        "layout(push_constant) uniform Params { int steps; } pc;",
        "void main() {",
        f"  const int base = int(gl_GlobalInvocationID.x) * {n};",
    ]
    lines += [f"  vec4 acc{i} = t_in[base + {i}];" for i in range(n)]
    lines += ["  for (int s = 0; s < pc.steps; ++s) {", "    const vec4 x = t_in[s];"]
    lines += [f"    acc{i} = acc{i} * x + {float(i + 1)!r};" for i in range(n)]
    lines += ["  }"]
    lines += [f"  t_out[base + {i}] = acc{i};" for i in range(n)]
    lines += ["}", ""]
    return "\n".join(lines)


def check_occupancy_model(register_counts=range(4, 49, 4), gpu=DEFAULT_GPU, local_size=64, *, root=None):
    """Does `occupancy.adreno_occupancy` predict Turnip's "Max Waves Per Core"?

    One synthetic shader per count n (`live_vec4_shader(n)`: n live vec4 accumulators), all compiled by Turnip in
    one child process; the model gets Turnip's own "Registers used" and "Half-registers used" and the local size
    and decides wave64 / wave128 itself. Returns a DataFrame: live vec4, registers used, half regs, turnip waves,
    model waves, turnip subgroup size, model subgroup size, spills (STP + LDP Count), agree (waves and subgroup
    size both match), occupancy (turnip waves / 16).
    """
    import pandas as pd
    from . import occupancy as occ
    from .shaders import compile_glsl
    gpu_id = check_gpu(gpu)
    counts = [int(n) for n in register_counts]
    local = (local_size, 1, 1) if isinstance(local_size, int) else tuple(local_size)
    jobs = [{"shader": compile_glsl(live_vec4_shader(n), name=f"live_vec4_{n}"), "name": f"live_vec4_{n}"}
            for n in counts]
    results = stats_many(jobs, gpu_id, root=root, local_size=local)
    rows = []
    for n, s in zip(counts, results):
        regs, half = int(s["Registers used"]), int(s.get("Half-registers used") or 0)
        model = occ.adreno_occupancy(regs, half, local, gpu=gpu_id)
        turnip_waves = int(s["Max Waves Per Core"])
        turnip_sg = int(s.get("Subgroup Size") or 0)
        rows.append({
            "live vec4": n, "registers used": regs, "half regs": half, "turnip waves": turnip_waves,
            "model waves": model.waves_or_warps_active, "turnip subgroup size": turnip_sg,
            "model subgroup size": model.details["threadsize"],
            "spills": int(s.get("STP Count") or 0) + int(s.get("LDP Count") or 0),
            "agree": turnip_waves == model.waves_or_warps_active and turnip_sg == model.details["threadsize"],
            "occupancy": turnip_waves / MAX_WAVES, "gpu": gpu_id, "local_size": local,
        })
    return pd.DataFrame(rows)
