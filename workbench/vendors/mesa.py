"""Shader statistics of four vendors' compilers without their GPUs: Mesa's Turnip (Adreno), PanVK (Mali) and RADV
(AMD) built once from Debian 13's Mesa 25.0.7 and run on no-op kernel drivers.

    from workbench.vendors import mesa
    mesa.setup()                                         # once: fetch, build and cache (~10 min on 2 cores)
    mesa.stats(spirv, gpu="a740")                        # every statistic that driver reports, one shader
    mesa.stats_many([job, job], gpu="mali-g610")         # one child process, many shaders
    mesa.stats_rows({"a": spv_a}, gpu=["a740", "mali-g610", "rdna2"])   # DataFrame: raw + unified columns
    mesa.check_occupancy_model(range(4, 49, 4), gpu="rdna3")            # occupancy model vs the compiler
    mesa.GPUS, mesa.check_gpu("navi21")                  # the GPUs and their names

This module collects statistics and knows no kernel: per-kernel tables built on it live beside their kernels
(``benchmarks.conv.conv_pw_adreno_table``, ``benchmarks.conv_vendors``); ``tests/test_import_structure.py`` keeps
it that way.

The drivers (one meson build of all three, one cache folder)
    * **Turnip** (src/freedreno/vulkan): Adreno a6xx/a7xx, compiler ir3. The freedreno no-op DRM shim
      (libfreedreno_noop_drm_shim.so, LD_PRELOADed) fakes an msm render node for the chip in FD_GPU_ID. Statistics
      through VK_KHR_pipeline_executable_properties: "Registers used" (vec4), "Max Waves Per Core" (of 16), ...
      Mesa's ir3 is not Qualcomm's compiler (PR #19396's "28 registers, 37 %" came from Qualcomm's).
    * **PanVK** (src/panfrost/vulkan): Mali Bifrost v6/v7 and Valhall v10 (Mesa 25.0 has no v9, so no G57/G77/G78
      and no v12 either); compiler: Mesa's bifrost/valhall backend. The panfrost no-op shim
      (libpanfrost_noop_drm_shim.so) fakes a panfrost/panthor node for PAN_GPU_ID (hex product id); Bifrost needs
      PAN_I_WANT_A_BROKEN_VULKAN_DRIVER=1 (PanVK calls it "not well-tested"). PanVK 25.0.7 reports only "Code Size"
      through Vulkan, so the worker also reads the compiler's own shader-db line (BIFROST_MESA_DEBUG=shaderdb, on
      stderr): instructions, cycles, "threads" (2 when the shader fits 32 work registers, else 1: the occupancy
      trade-off), loops, spills:fills. The work-register allocation (32 or 64) follows from "threads"; the
      register count the hardware sees is only that allocation.
    * **RADV** (src/amd/vulkan): AMD GCN..RDNA3, compiler ACO (no LLVM). No shim: RADV_FORCE_FAMILY (a family
      name: navi21, navi31, ...) makes RADV create a device on its own null winsys. Statistics: "VGPRs", "SGPRs",
      "Spilled VGPRs", "Subgroups per SIMD" (radv_get_max_waves), "Instructions", ... Mesa 25.0 needs
      libdrm_amdgpu >= 2.4.121 (Debian 12 has 2.4.114): the set-up builds Debian 13's libdrm 2.4.124 statically
      first and links it into the driver, so the cache stays self-contained.

    Every compile runs in a child process (``python -m workbench.vendors.mesa_worker``) whose environment points the
    Vulkan loader at one driver of the build only (:func:`shim_env`): the caller keeps its own Vulkan device, the
    shim never enters the caller's process, and no validation layer runs there. One child per CPU core (at most 4,
    $WORKBENCH_MESA_WORKERS) per call and GPU, the shaders dealt out in turn; a driver crash ends only its child
    (the shader in flight gets an error, a new child takes the rest).

The newer build (``workbench.vendors.mesa_newer``; ``workbench compilers setup --mesa SOURCE``)
    Mesa 25.0.7 knows no Adreno 8xx and no 5th-gen Mali. A second build, Turnip + PanVK of a newer Mesa from a
    source the user names (tested: 26.2.0-rc1), compiles for a810 / a830 / a840 and Mali-G720 (v12), G725 /
    Immortalis-G925 (v13) and G1-Ultra (v14); each `Gpu` names its `build` and every function here picks that build's
    cache ($WORKBENCH_MESA_NEWER_DIR, else ~/.cache/workbench/mesa/mesa-newer). Mali-G57/G77/G78 (Valhall v9) stay
    out of reach: no PanVK builds a v9 backend (its note says so).

Statistics cache (``workbench.vendors.stats_cache``, :func:`statistics_cache`)
    Every compile's result is kept on disk by SPIR-V hash, specialization constants, local size, subgroup size, GPU
    and compiler build, failures included: a rejected shader, a driver crash, a compile past its time limit (kept
    with that limit; a longer limit compiles again). A second look costs nothing; ``refresh="failures"`` / ``"all"``
    or $WORKBENCH_MESA_REFRESH compiles again. Folder: ``stats/`` in the cache below ($WORKBENCH_MESA_STATS_DIR).

Cache (``$WORKBENCH_MESA_DIR``, else ``$WORKBENCH_ADRENO_DIR``, else ``~/.cache/workbench/mesa/mesa-25.0.7``)
    ``lib/``  the three drivers, the two shims and one ICD manifest per driver; ``logs/`` one full log per set-up
    step; ``setup.json`` the stamp (a second :func:`setup` returns at once; a stamp of another recipe, such as the
    Turnip-only build of before, means one rebuild). While building also ``venv/`` (meson, mako, pyyaml,
    packaging), ``src/`` (the unpacked source packages), ``deps/`` (the static libdrm) and ``build/``; deleted after
    a successful build unless ``keep_build=True``.

Subgroup size
    ir3 chooses wave64 or wave128 itself (see ``occupancy.adreno_should_double_threadsize``), RADV runs compute in
    wave32 on RDNA; the statistic "Subgroup Size" says which. Forcing one needs VK_EXT_subgroup_size_control's
    required subgroup size, which ``workbench.vk`` does not offer yet: ``subgroup_size=`` raises
    NotImplementedError (:data:`SUBGROUP_SIZE_NEEDS`) until ``vk.Device.pipeline`` accepts
    ``required_subgroup_size=``.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
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

from ..toolchain import debian_source
from . import mesa_newer_recipe, stats_cache

__all__ = [
    "MESA_VERSION", "LIBDRM_VERSION", "Gpu", "GPUS", "DEFAULT_GPU", "DEFAULT_GPUS", "DRIVERS", "APT_PACKAGES",
    "PIP_PACKAGES", "MESON_OPTIONS", "LIBDRM_MESON_OPTIONS",
    "MesaError", "MesaNotSetUpError", "MesaSetupError", "MesaCompileError",
    "cache_root", "is_set_up", "build_files", "shim_env", "check_gpu", "gpu_names", "setup", "status",
    "stats", "stats_many", "stats_rows", "summary", "live_vec4_shader", "check_occupancy_model",
    "parse_shaderdb", "statistics_cache", "SHADER_TIMEOUT_S",
]

MESA_VERSION = "25.0.7"     # Debian 13's mesa 25.0.7-2+deb13u1 (debian_source.DEBIAN_SUITES)
LIBDRM_VERSION = "2.4.124"  # Debian 13's libdrm 2.4.124-2: RADV in Mesa 25.0 needs libdrm_amdgpu >= 2.4.121


# ----------------------------------------------------------------------------------------------------------------
# The GPUs: which driver, which fake chip, which occupancy model
# ----------------------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Gpu:
    """One GPU the offline compilers can stand in for.

    name: the canonical name ("a740", "mali-g610", "rdna2"); aliases: other accepted spellings (lower case);
    vendor: "adreno" | "mali" | "amd"; driver: "turnip" | "panvk" | "radv"; env: the variables that make the driver
    see this chip; device_match: a substring of the device name the driver must report; arch: what it is;
    max_waves: the denominator of the compiler's occupancy figure (Turnip: wave slots per SP; RADV: waves per
    SIMD in wave32 units, so 32 for a wave64 shader; PanVK: thread slots, 2 = full); model: keyword arguments of its occupancy model."""
    name: str
    vendor: str
    driver: str
    env: tuple
    device_match: str
    arch: str
    max_waves: int
    aliases: tuple = ()
    model: tuple = ()
    note: str = ""  # what is known about this GPU's driver support, quoted in errors
    build: str = "stable"  # which Mesa build compiles for it: "stable" (25.0.7) or "newer" (mesa_newer)


def _adreno(gpu_id: int, arch: str, build: str = "stable", aliases=()) -> Gpu:
    # Turnip names it "Turnip Adreno (TM) 740"; a bare "740" would be taken for a device index
    return Gpu(f"a{gpu_id}", "adreno", "turnip", (("FD_GPU_ID", str(gpu_id)),), f"Adreno (TM) {gpu_id}", arch, 16,
               (str(gpu_id), f"adreno {gpu_id}", f"adreno{gpu_id}", f"adreno-{gpu_id}") + tuple(aliases),
               (("gpu", gpu_id),), build=build)


def _mali(name: str, prod_id: int, arch: str, warp: int, bifrost: bool, aliases=(), note: str = "",
          variant: int | None = None, build: str = "stable") -> Gpu:
    # PAN_GPU_ID: GPU_PROD_ID in hex, ":variant" where the model table needs one (Mesa 26's 5th-gen Malis: 4)
    env = (("PAN_GPU_ID", f"{prod_id:x}" + (f":{variant:x}" if variant is not None else "")),
           ("BIFROST_MESA_DEBUG", "shaderdb"))
    if bifrost:  # PanVK refuses v6/v7 (and Mesa 26.2: v14) without it ("not well-tested")
        env += (("PAN_I_WANT_A_BROKEN_VULKAN_DRIVER", "1"),)
    short = name.split("-", 1)[1]
    return Gpu(name, "mali", "panvk", env, short.upper(), arch, 2,
               (short, f"mali {short}", f"mali{short}", f"{prod_id:#x}") + tuple(aliases), (("warp_size", warp),),
               note, build)


def _amd(name: str, family: str, gfx: str, model_family: str, aliases=()) -> Gpu:
    return Gpu(name, "amd", "radv", (("RADV_FORCE_FAMILY", family),), family.upper(), f"{model_family} {gfx}", 16,
               (family, gfx) + tuple(aliases), (("family", model_family),))


# The defaults of `workbench etvk stats` / `compilers stats`: three Adreno, two Mali, RDNA2 and RDNA3.
GPUS: dict[str, Gpu] = {g.name: g for g in (
    # FD_GPU_ID values the freedreno shim knows: a740 (default), a730 and a750 (same register file), a660 (64 vec4
    # per fibre slot instead of 96).
    _adreno(740, "a7xx"), _adreno(750, "a7xx"), _adreno(730, "a7xx"), _adreno(660, "a6xx gen4"),
    # PAN_GPU_ID: the GPU_PROD_ID of src/panfrost/lib/pan_props.c. Valhall warps are 16 wide, Bifrost G52's 8.
    _mali("mali-g610", 0xA867, "valhall v10 (CSF)", 16, False, ("valhall",)),
    _mali("mali-g310", 0xAC74, "valhall v10 (CSF)", 16, False),
    _mali("mali-g52", 0x7212, "bifrost v7", 8, True, ("bifrost",)),
    # Valhall v9 (job manager): no PanVK of either build has a v9 backend; kept so that rows can say so.
    _mali("mali-g57", 0x9093, "valhall v9 (JM)", 16, False, note=(
        "Mali-G57/G77/G78 are Valhall v9 (job manager); PanVK builds no v9 backend, neither Mesa 25.0.7 (v6, v7, v10) "
        "nor Mesa 26.2.0-rc1 (v6, v7, v10, v12, v13, v14: the foreach in src/panfrost/vulkan/meson.build), and "
        "panvk_physical_device_init fails any other arch (\"%s not supported\"); Mesa's GL driver (panfrost) does "
        "compile v9, but takes no SPIR-V: no Mali-G57/G77/G78 here")),
    # The newer build (workbench.vendors.mesa_newer, Mesa 26.2): 5th-gen Mali (PanVK v12/v13/v14, CSF). The model
    # table (src/panfrost/model/pan_model.c) keys them by product id and variant 4; v14 needs the "broken" flag.
    _mali("mali-g720", 0xC800, "5th gen v12 (CSF)", 16, False, ("immortalis-g720",), variant=4, build="newer"),
    _mali("mali-g725", 0xD800, "5th gen v13 (CSF)", 16, False, ("immortalis-g925", "g925", "mali-g925"), variant=4,
          build="newer"),
    _mali("mali-g1-ultra", 0xE800, "5th gen v14 (CSF)", 16, True, ("mali-g1", "g1", "immortalis-g1-ultra"),
          variant=4, build="newer"),
    # Adreno 8xx (Snapdragon 8 Elite: a830; 8 Elite Gen 5: a840): Turnip of Mesa 26.2. Its shim lists 810 and 830;
    # mesa_newer adds 840 (chip id 0x44050a31, freedreno_devices.py's "Adreno (TM) 840") to the shim's table.
    _adreno(830, "a8xx gen1", "newer", ("8 elite", "snapdragon 8 elite")),
    _adreno(840, "a8xx gen2", "newer", ("8 elite gen 5", "snapdragon 8 elite gen 5")),
    _adreno(810, "a8xx gen1", "newer"),
    # RADV_FORCE_FAMILY takes the family name (strcasecmp against ac_get_family_name), not the gfx number.
    _amd("rdna2", "navi21", "gfx1030", "rdna2", ("rx6800", "rdna-2")),
    _amd("rdna3", "navi31", "gfx1100", "rdna3", ("rx7900", "rdna-3")),
    _amd("rdna3-navi33", "navi33", "gfx1102", "rdna3_navi33"),
)}
DEFAULT_GPU = "a740"
DEFAULT_GPUS = ("a740", "a750", "a730", "mali-g610", "mali-g52", "rdna2", "rdna3")


@dataclasses.dataclass(frozen=True)
class Driver:
    target: str          # ninja target of the Vulkan driver
    lib: str             # its name in lib/
    icd: str             # the ICD manifest written beside it
    devenv_icd: str      # Mesa's uninstalled ICD manifest (for its api_version)
    shim_target: str | None = None
    shim: str | None = None


DRIVERS: dict[str, Driver] = {
    "turnip": Driver("src/freedreno/vulkan/libvulkan_freedreno.so", "libvulkan_freedreno.so", "freedreno_icd.json",
                     "src/freedreno/vulkan/freedreno_devenv_icd.x86_64.json",
                     "src/freedreno/drm-shim/libfreedreno_noop_drm_shim.so", "libfreedreno_noop_drm_shim.so"),
    "panvk": Driver("src/panfrost/vulkan/libvulkan_panfrost.so", "libvulkan_panfrost.so", "panfrost_icd.json",
                    "src/panfrost/vulkan/panfrost_devenv_icd.x86_64.json",
                    "src/panfrost/drm-shim/libpanfrost_noop_drm_shim.so", "libpanfrost_noop_drm_shim.so"),
    "radv": Driver("src/amd/vulkan/libvulkan_radeon.so", "libvulkan_radeon.so", "radeon_icd.json",
                   "src/amd/vulkan/radeon_devenv_icd.x86_64.json"),
}
DRIVER_TITLES = {"turnip": "Turnip (ir3)", "panvk": "PanVK (bifrost/valhall)", "radv": "RADV (ACO)"}

# Debian packages the build needs: compilers; Mesa's dependencies (meson.build requires flex, bison and
# glslangValidator whenever the freedreno Vulkan driver is built, libdrm, zlib; expat and zstd are optional but part
# of the tested build); dpkg-source (dpkg-dev) and xz to unpack the source packages; python3-venv for the private
# build venv; libvulkan1, the loader that runs the result.
APT_PACKAGES = ("gcc", "g++", "pkg-config", "ninja-build", "flex", "bison", "libdrm-dev", "zlib1g-dev",
                "libexpat1-dev", "libzstd-dev", "glslang-tools", "python3-venv", "dpkg-dev", "xz-utils",
                "libvulkan1")
# meson >= 1.1 (Debian 12 has 1.0.1); mako, pyyaml, packaging for Mesa's code generators. The venv is first on
# PATH during meson and ninja: isaspec's decode.py runs through `#!/usr/bin/env python3`.
PIP_PACKAGES = ("meson==1.7.2", "mako", "pyyaml", "packaging")
MESON_OPTIONS = (
    "--wrap-mode=nodownload", "-Doptimization=2", "-Ddebug=false", "-Db_ndebug=true",
    "-Dvulkan-drivers=freedreno,panfrost,amd", "-Dfreedreno-kmds=msm", "-Dgallium-drivers=freedreno",
    "-Dtools=drm-shim", "-Dplatforms=", "-Dllvm=disabled", "-Damd-use-llvm=false", "-Dglx=disabled",
    "-Degl=disabled", "-Dgbm=disabled", "-Dgles1=disabled", "-Dgles2=disabled", "-Dvalgrind=disabled",
    "-Dlibunwind=disabled", "-Dxmlconfig=disabled", "-Dvideo-codecs=",
)
# libdrm + libdrm_amdgpu only, static and position-independent: linked into libvulkan_radeon.so (and the others),
# nothing to ship beside them. Its amdgpu.ids path is only read for real devices.
LIBDRM_MESON_OPTIONS = (
    "--wrap-mode=nodownload", "--libdir=lib", "-Ddefault_library=static", "-Db_staticpic=true", "-Doptimization=2",
    "-Damdgpu=enabled", "-Dintel=disabled", "-Dradeon=disabled", "-Dnouveau=disabled", "-Dvmwgfx=disabled",
    "-Dfreedreno=disabled", "-Dvc4=disabled", "-Detnaviv=disabled", "-Dexynos=disabled", "-Domap=disabled",
    "-Dtegra=disabled", "-Dcairo-tests=disabled", "-Dvalgrind=disabled", "-Dman-pages=disabled", "-Dtests=false",
    "-Dudev=false",
)
STAMP_NAME = debian_source.STAMP_NAME
_RECIPE = {"mesa": MESA_VERSION, "libdrm": LIBDRM_VERSION, "options": MESON_OPTIONS,
           "libdrm_options": LIBDRM_MESON_OPTIONS,
           "targets": sorted(t for d in DRIVERS.values() for t in (d.target, d.shim_target) if t),
           "pip": PIP_PACKAGES, "layout": 2}  # layout 2: three drivers (layout 1 was Turnip only)
RECIPE_ID = debian_source.recipe_id(_RECIPE)

SUBGROUP_SIZE_NEEDS = (
    "workbench.vk cannot request a subgroup size yet. Needed there: at device creation, enable "
    "VkPhysicalDeviceSubgroupSizeControlFeatures.subgroupSizeControl (+ computeFullSubgroups; core in Vulkan 1.3, "
    "else VK_EXT_subgroup_size_control) when the device has it; in Pipeline.__init__, a keyword "
    "`required_subgroup_size` that chains VkPipelineShaderStageRequiredSubgroupSizeCreateInfo"
    "(requiredSubgroupSize=N) into VkPipelineShaderStageCreateInfo.pNext (check N against "
    "VkPhysicalDeviceSubgroupSizeControlProperties min/maxSubgroupSize: 64..128 on Turnip, 32..64 on RADV), "
    "exposed as Device.pipeline(..., required_subgroup_size=N). workbench.vendors.mesa passes it through as soon "
    "as it exists. Until then the compiler chooses: ir3 wave64 for workgroups of <= 64 invocations, else wave128 "
    "when 2x the registers fit; RADV wave32 for compute on RDNA.")

_SPIRV_MAGIC = b"\x03\x02\x23\x07"
_PACKAGE_PARENT = Path(__file__).resolve().parent.parent.parent


# ----------------------------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------------------------

class MesaError(RuntimeError):
    """Base class of this module's errors."""


class MesaNotSetUpError(MesaError):
    """The Mesa build (Turnip, PanVK, RADV + shims) is not in the cache: run `workbench compilers setup`."""


class MesaSetupError(MesaError, debian_source.SetupError):
    """A set-up step failed; the message names the step, its full log and the log's last lines."""

    label = "compilers setup"


class MesaCompileError(MesaError):
    """A driver (or its worker process) failed on a shader, or refused the GPU."""


# ----------------------------------------------------------------------------------------------------------------
# Where things are
# ----------------------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Build:
    """One Mesa build: "stable" (this module's recipe, Debian 13's 25.0.7) or "newer" (`mesa_newer`'s: a newer
    Mesa from a source the user names, for the GPUs 25.0.7 lacks). Each GPU says which one compiles for it."""
    name: str
    title: str
    env_var: str        # the variable that moves its cache folder
    folder: str         # its default folder under ~/.cache/workbench/mesa
    drivers: tuple      # the DRIVERS it builds
    recipe_id: str
    how: str            # how to set it up, quoted when it is missing
    variants: tuple = ()  # (recipe id, drivers) of the smaller builds it may also be (the newer one: Turnip alone)


BUILD_NAMES = ("stable", "newer")


def build_spec(build: str = "stable") -> Build:
    """The `Build` named `build` ("stable" or "newer"); ValueError otherwise."""
    if build == "stable":
        return Build("stable", f"Mesa {MESA_VERSION} (Debian 13)", "WORKBENCH_MESA_DIR", f"mesa-{MESA_VERSION}",
                     tuple(DRIVERS), RECIPE_ID,
                     "Run `workbench compilers setup` (or `./setup.sh compilers`): it fetches Debian 13's Mesa and "
                     "libdrm sources and builds the drivers once, about 10 minutes on 2 cores")
    if build == "newer":
        return Build("newer", mesa_newer_recipe.TITLE, mesa_newer_recipe.ENV_VAR, mesa_newer_recipe.FOLDER,
                     mesa_newer_recipe.DRIVERS_BUILT, mesa_newer_recipe.RECIPE_ID, mesa_newer_recipe.HOW,
                     tuple(mesa_newer_recipe.VARIANTS.items()))
    raise ValueError(f"unknown Mesa build {build!r}; expected one of {', '.join(BUILD_NAMES)}")


def cache_root(root=None, build: str = "stable") -> Path:
    """The build cache: `root`, else $WORKBENCH_MESA_DIR, else $WORKBENCH_ADRENO_DIR (its older name), else
    ~/.cache/workbench/mesa/mesa-25.0.7; for build="newer" `root`, else $WORKBENCH_MESA_NEWER_DIR, else
    ~/.cache/workbench/mesa/mesa-newer."""
    spec = build_spec(build)
    if build == "stable" and root is None and not os.environ.get("WORKBENCH_MESA_DIR") \
            and os.environ.get("WORKBENCH_ADRENO_DIR"):
        return debian_source.cache_dir(None, "WORKBENCH_ADRENO_DIR", Path())
    return debian_source.cache_dir(root, spec.env_var, Path.home() / ".cache" / "workbench" / "mesa" / spec.folder)


def built_drivers(root=None, build: str = "stable") -> tuple:
    """The drivers the cache's build holds: the build's own list, or a smaller variant's its stamp names."""
    spec = build_spec(build)
    stamp = debian_source.read_stamp(cache_root(root, build) / STAMP_NAME) or {}
    return dict(spec.variants).get(stamp.get("recipe"), spec.drivers)


def build_files(root=None, build: str = "stable") -> dict[str, Path]:
    """Paths of the set-up's products (present or not): "<driver>" and "<driver> shim" and "<driver> icd" for
    turnip / panvk / radv (the newer build: turnip / panvk, or what its stamp says it holds), "stamp", "logs"."""
    r = cache_root(root, build)
    files = {"stamp": r / STAMP_NAME, "logs": r / "logs"}
    for name in built_drivers(root, build):
        d = DRIVERS[name]
        files[name] = r / "lib" / d.lib
        files[f"{name} icd"] = r / "lib" / d.icd
        if d.shim:
            files[f"{name} shim"] = r / "lib" / d.shim
    return files


def _read_stamp(root=None, build: str = "stable") -> dict | None:
    return debian_source.read_stamp(build_files(root, build)["stamp"])


def _missing_products(root=None, build: str = "stable", driver: str | None = None) -> list[str]:
    files = build_files(root, build)
    missing = [str(p) for k, p in files.items() if k not in ("stamp", "logs") and not p.is_file()]
    spec = build_spec(build)
    stamp = debian_source.read_stamp(files["stamp"]) or {}
    if stamp.get("recipe") not in dict(spec.variants):
        missing += debian_source.stamp_missing(files["stamp"], spec.recipe_id)
    drivers = built_drivers(root, build)
    if driver is not None and driver not in drivers:
        missing.append(f"{DRIVER_TITLES[driver]} (this build holds {', '.join(drivers)} only)")
    return missing


def is_set_up(root=None, build: str = "stable") -> bool:
    """True when the cache holds a complete build of this recipe (stamp + every driver, shim and ICD manifest);
    build="newer" asks about the newer Mesa (`mesa_newer`)."""
    return not _missing_products(root, build)


def _require_set_up(root=None, build: str = "stable", driver: str | None = None) -> dict[str, Path]:
    missing = _missing_products(root, build, driver)
    if missing:
        spec = build_spec(build)
        raise MesaNotSetUpError(
            f"the offline vendor compilers of {spec.title} ({', '.join(DRIVER_TITLES[d] for d in spec.drivers)} + "
            f"the no-op DRM shims) are not set up in {cache_root(root, build)} (missing: {', '.join(missing)}).\n"
            f"{spec.how}. ${spec.env_var} chooses the cache folder.")
    return build_files(root, build)


def status(root=None, build: str = "stable") -> dict:
    """What the cache holds: set_up, root, missing, and the stamp (versions, build time, sizes)."""
    missing = _missing_products(root, build)
    return {"set_up": not missing, "build": build, "root": str(cache_root(root, build)), "missing": missing,
            "stamp": _read_stamp(root, build)}


def gpu_names(vendor: str | None = None, build: str | None = None) -> list[str]:
    """The canonical GPU names, optionally of one vendor ("adreno", "mali", "amd") and one build ("stable",
    "newer")."""
    return [g.name for g in GPUS.values() if vendor in (None, g.vendor) and build in (None, g.build)]


def check_gpu(gpu) -> Gpu:
    """The `Gpu` named by `gpu`: a canonical name ("a740", "mali-g610", "rdna2"), an alias ("740", 740,
    "Adreno 740", "g610", "navi21", "gfx1030", "gfx1100"), or a Gpu. ValueError naming what was given and every
    name expected otherwise."""
    if isinstance(gpu, Gpu):
        return gpu
    if isinstance(gpu, int) and not isinstance(gpu, bool):
        gpu = str(gpu)
    if isinstance(gpu, str):
        key = re.sub(r"\s+", " ", gpu.strip().lower())
        for g in GPUS.values():
            if key == g.name or key in g.aliases:
                return g
    expected = "; ".join(f"{v}: " + ", ".join(gpu_names(v)) for v in ("adreno", "mali", "amd"))
    raise ValueError(f"unknown GPU {gpu!r}; expected one of {expected} (or an alias such as 740, g610, navi21, "
                     f"gfx1030, gfx1100)")


def _check_gpus(gpu) -> list[Gpu]:
    items = gpu if isinstance(gpu, (list, tuple, set, range)) else \
        ([g for g in gpu.split(",") if g.strip()] if isinstance(gpu, str) and "," in gpu else [gpu])
    return [check_gpu(g) for g in items]


def shim_env(gpu=DEFAULT_GPU, root=None, base: dict | None = None) -> dict:
    """The environment of a child process that compiles for `gpu` with the cached build.

    A copy of `base` (default os.environ) where the Vulkan loader sees only that GPU's driver (VK_ICD_FILENAMES
    and its newer name VK_DRIVER_FILES; added drivers and requested layers dropped, every layer disabled, Mesa's
    device-select layer off), the driver's no-op shim is preloaded (LD_PRELOAD, before anything already there;
    RADV needs none), the chip's variables are set (FD_GPU_ID, PAN_GPU_ID, RADV_FORCE_FAMILY, ...) and every other
    GPU's are dropped, the workbench's validation layer is off, and Mesa's on-disk shader cache is off (statistics
    always come from a real compile). Does not check that the files exist (see `is_set_up`).
    """
    g = check_gpu(gpu)
    driver = DRIVERS[g.driver]
    files = build_files(root, g.build)
    env = dict(os.environ if base is None else base)
    chip_vars = {k for other in GPUS.values() for k, _ in other.env}
    for name in ("VK_ADD_DRIVER_FILES", "VK_INSTANCE_LAYERS", "VK_LOADER_LAYERS_ENABLE", "WORKBENCH_DEVICE",
                 "MESA_VK_DEVICE_SELECT", *chip_vars):
        env.pop(name, None)
    env["VK_ICD_FILENAMES"] = str(files[f"{g.driver} icd"])
    env["VK_DRIVER_FILES"] = str(files[f"{g.driver} icd"])
    env["VK_LOADER_LAYERS_DISABLE"] = "~all~"
    env["NODEVICE_SELECT"] = "1"
    shims = {str(cache_root(root, b) / "lib" / DRIVERS[d].shim) for b in BUILD_NAMES for d in build_spec(b).drivers
             if DRIVERS[d].shim}
    preload = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split() if p and p not in shims]
    if driver.shim:
        preload.insert(0, str(files[f"{g.driver} shim"]))
    if preload:
        env["LD_PRELOAD"] = " ".join(preload)
    else:
        env.pop("LD_PRELOAD", None)
    env.update(dict(g.env))
    env["WORKBENCH_VALIDATION"] = "0"
    env["MESA_SHADER_CACHE_DISABLE"] = "true"
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(_PACKAGE_PARENT) not in paths:  # the child imports this very workbench, installed or not
        env["PYTHONPATH"] = os.pathsep.join([str(_PACKAGE_PARENT)] + paths)
    return env


# ----------------------------------------------------------------------------------------------------------------
# Set-up: fetch Debian 13's Mesa and libdrm sources, build libdrm (static), then Turnip + PanVK + RADV + the shims
# ----------------------------------------------------------------------------------------------------------------

def _tail(lines, n: int = 40) -> str:
    return "\n".join(list(lines)[-n:])


def _run_logged(step: str, command: list[str], log_path: Path, **kwargs) -> None:
    """Run `command`, writing everything it prints to `log_path`; MesaSetupError with the tail on failure."""
    debian_source.run_logged(step, command, log_path, error=MesaSetupError, **kwargs)


def _missing_apt_packages(packages=APT_PACKAGES) -> list[str]:
    return debian_source.missing_apt_packages(packages)


def _install_prerequisites(log_path: Path, install: bool, echo) -> None:
    if shutil.which("apt-get") is None or shutil.which("dpkg-query") is None:
        raise MesaSetupError("prerequisites", "needs a Debian or Ubuntu system (apt-get source, dpkg); "
                             "apt-get or dpkg-query not found")
    debian_source.install_prerequisites(APT_PACKAGES, log_path, install, echo, error=MesaSetupError,
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


def _pick_version(showsrc: str, upstream: str = MESA_VERSION) -> str | None:
    """The newest Debian version of `upstream` listed by apt-cache showsrc."""
    return debian_source.newest(v for v in re.findall(r"^Version:\s*(\S+)", showsrc, flags=re.MULTILINE)
                                if v.split(":")[-1].startswith(upstream + "-"))


def _fetch_sources(src_dir: Path, log_path: Path, echo) -> dict[str, tuple[Path, str]]:
    """apt-get source mesa=25.0.7-* and libdrm=2.4.124-* from Debian 13, with deb-src enabled only in a temporary
    apt configuration. Returns {package: (unpacked tree, Debian version)}."""
    wanted = {"mesa": MESA_VERSION, "libdrm": LIBDRM_VERSION}
    versions_file = src_dir / "debian-versions.json"
    trees = {p: src_dir / f"{p}-{v}" for p, v in wanted.items()}
    if versions_file.is_file() and all((t / "meson.build").is_file() for t in trees.values()):
        known = json.loads(versions_file.read_text())
        echo(f"    reusing {', '.join(map(str, trees.values()))}")
        return {p: (trees[p], known[p]) for p in wanted}
    if src_dir.exists():
        shutil.rmtree(src_dir)
    src_dir.mkdir(parents=True)
    mirror = os.environ.get("WORKBENCH_MESA_MIRROR") or os.environ.get("WORKBENCH_ADRENO_MIRROR") \
        or debian_source.DEBIAN_MIRROR
    found = {}
    with debian_source.AptSources("mesa", mirror, log_path, step="fetch source", error=MesaSetupError,
                                  echo=echo) as apt:
        for package, upstream in wanted.items():
            showsrc = apt.showsrc(package)
            version = _pick_version(showsrc.stdout, upstream)
            if version is None:
                raise apt.no_source(package, upstream, showsrc)
            echo(f"    apt-get source {package}={version}")
            apt.run(["apt-get", *apt.options, "source", "-q", f"{package}={version}"], cwd=src_dir,
                    what=f"apt-get source {package}")
            found[package] = version
    for package, tree in trees.items():
        if not (tree / "meson.build").is_file():
            raise MesaSetupError("fetch source", f"apt-get source left no {tree}/meson.build", log_path)
    for archive in src_dir.glob("*.tar.*"):  # unpacked: the tarballs are 50 MB of nothing
        archive.unlink()
    versions_file.write_text(json.dumps(found))
    return {p: (trees[p], found[p]) for p in wanted}


def _build_env(venv_bin: Path, deps: Path) -> dict:
    # pkg-config finds the static libdrm first (Mesa 25.0's RADV needs libdrm_amdgpu >= 2.4.121).
    return debian_source.clean_env(PATH=os.pathsep.join([str(venv_bin), os.environ.get("PATH", "")]),
                                   VIRTUAL_ENV=str(venv_bin.parent),
                                   PKG_CONFIG_PATH=str(deps / "lib" / "pkgconfig"))


def _write_icd(lib: Path, driver: Driver, devenv_icd: Path) -> Path:
    api_version = "1.4.305"
    try:
        api_version = json.loads(devenv_icd.read_text())["ICD"]["api_version"]
    except (OSError, ValueError, KeyError):
        pass
    icd = lib / driver.icd
    icd.write_text(json.dumps({"file_format_version": "1.0.1",
                               "ICD": {"library_path": str(lib / driver.lib), "api_version": api_version}},
                              indent=2) + "\n")
    return icd


SMOKE_GPUS = ("a740", "mali-g610", "rdna2")  # one per driver: each must report its occupancy figure


def setup(root=None, *, force: bool = False, jobs: int | None = None, keep_build: bool = False,
          install_prerequisites: bool = True, progress: bool = True, smoke_test: bool = True) -> dict:
    """Fetch Mesa 25.0.7 and libdrm 2.4.124 (Debian 13's source packages), build Turnip, PanVK, RADV and the two
    no-op DRM shims, cache them.

    Steps (each logged in full to <root>/logs/): 1 Debian build prerequisites (apt-get install where missing),
    2 a private venv with meson, mako, pyyaml, packaging, 3 `apt-get source` of both with deb-src for Debian 13
    enabled only in a temporary apt configuration (the system's sources are not touched), 4 libdrm + libdrm_amdgpu
    built static into <root>/deps, 5 meson configure (three Vulkan drivers + drm-shim, no LLVM, no downloads),
    6 ninja the five libraries, 7 install them into <root>/lib with one ICD manifest per driver, compile a test
    shader on a fake a740, Mali-G610 and RDNA2, write the stamp, delete venv/, src/, deps/, build/ (unless
    `keep_build`). A second call finds the stamp and returns at once (`force=True` rebuilds).

    Returns status(): {"set_up": True, "root", "missing": [], "stamp": {...}}. Raises MesaSetupError naming the
    failed step, with the path of its full log and its last lines.
    """
    root = cache_root(root)
    echo = (lambda text: print(text, flush=True)) if progress else (lambda text: None)
    if not force and is_set_up(root):
        stamp = _read_stamp(root)
        echo(f"compilers setup: already set up in {root} (Mesa {stamp.get('debian_version', MESA_VERSION)}, "
             f"built {stamp.get('built_at', '?')}); force=True rebuilds")
        return status(root)
    started = time.monotonic()
    stamp_path = build_files(root)["stamp"]
    targets = [t for d in DRIVERS.values() for t in (d.target, d.shim_target) if t]
    with debian_source.setup_session(root, steps=7, error=MesaSetupError, what="`workbench compilers setup`",
                                     echo=echo) as steps:
        echo(f"compilers setup: Mesa {MESA_VERSION} Turnip + PanVK + RADV + no-op DRM shims into {root}")
        with steps.step("prerequisites", "Debian build prerequisites") as log:
            _install_prerequisites(log, install_prerequisites, echo)
        with steps.step("venv", "private Python venv: " + " ".join(PIP_PACKAGES)) as log:
            venv_bin = _make_venv(root / "venv", log)
        with steps.step("source", f"Mesa {MESA_VERSION} and libdrm {LIBDRM_VERSION} sources from Debian 13 "
                                  "(apt-get source)") as log:
            sources = _fetch_sources(root / "src", log, echo)
        deps = root / "deps"
        env = _build_env(venv_bin, deps)
        ninja = shutil.which("ninja", path=env["PATH"]) or "ninja"
        with steps.step("libdrm", f"libdrm {LIBDRM_VERSION} + libdrm_amdgpu, static, into deps/") as log:
            drm_build = root / "build-libdrm"
            shutil.rmtree(drm_build, ignore_errors=True)
            shutil.rmtree(deps, ignore_errors=True)
            _run_logged("libdrm", [str(venv_bin / "meson"), "setup", str(drm_build), str(sources["libdrm"][0]),
                                   f"--prefix={deps}", *LIBDRM_MESON_OPTIONS], log, env=env, what="meson setup libdrm")
            _run_logged("libdrm", [ninja, "-C", str(drm_build), "install"], log, env=env, what="ninja install libdrm")
        build = root / "build"
        with steps.step("configure", "meson configure (Turnip, PanVK, RADV + drm-shim; no LLVM)") as log:
            debian_source.configure_once(
                build, "workbench-meson-options.json", [str(sources["mesa"][0]), str(deps), *MESON_OPTIONS],
                lambda: _run_logged("configure", [str(venv_bin / "meson"), "setup", str(build),
                                                  str(sources["mesa"][0]), *MESON_OPTIONS], log, env=env,
                                    what="meson setup"),
                force=force, echo=echo)
        with steps.step("build", "ninja " + " ".join(Path(t).name for t in targets)) as log:
            handler = debian_source.ninja_progress(echo, every=5, detail=True, bar=progress)
            try:
                _run_logged("build", [ninja, "-C", str(build), "-j", str(jobs or os.cpu_count() or 2), *targets],
                            log, env=env, on_line=handler, what="ninja")
            finally:
                handler.close()
        with steps.step("install", "install into lib/, test compiles (a740, Mali-G610, RDNA2), stamp") as log:
            lib = root / "lib"
            products = [(t, Path(t).name) for t in targets]
            debian_source.copy_products(build, lib, products, log, error=MesaSetupError)
            for driver in DRIVERS.values():
                _write_icd(lib, driver, build / driver.devenv_icd)
            stamp = {
                "recipe": RECIPE_ID, "mesa": MESA_VERSION, "debian_version": sources["mesa"][1],
                "libdrm": sources["libdrm"][1], "drivers": sorted(DRIVERS),
                "built_at": time.strftime("%Y-%m-%d %H:%M:%S"), "meson_options": list(MESON_OPTIONS),
                "step_seconds": dict(steps.times), "build_dir_bytes": debian_source.dir_bytes(build),
                "source_bytes": debian_source.dir_bytes(root / "src"),
                "files": {name: {"path": str(lib / name), "bytes": (lib / name).stat().st_size}
                          for _, name in products},
            }
            debian_source.write_stamp(stamp_path, stamp)  # is_set_up() from here on
            if smoke_test:
                smoke_compiles(SMOKE_GPUS, root, stamp_path, log, echo, error=MesaSetupError)
            if not keep_build:  # the libraries need none of these; a rebuild makes them again
                for folder in (build, root / "build-libdrm", deps, root / "src", root / "venv"):
                    shutil.rmtree(folder, ignore_errors=True)
            finish_stamp(stamp, stamp_path, root, started, keep_build, steps)
        echo(debian_source.done_message("compilers setup", stamp, root))
    return status(root)


def _smoke_spirv():
    from ..toolchain.shaders import compile_glsl
    return compile_glsl(live_vec4_shader(4), name="mesa_smoke")


def smoke_compiles(gpus, root, stamp_path, log, echo, *, error) -> None:
    """A build's last set-up check (this one's and `mesa_newer`'s): a test compile on each of `gpus` with the
    build in `root` (its stamp written: `stats` needs it) gives an occupancy figure; else the stamp is removed and
    `error("install", why, log)` raised."""
    for gpu in gpus:
        g = check_gpu(gpu)
        try:
            found = stats(_smoke_spirv(), gpu=g, root=root, name="setup_smoke_test")
        except MesaError as exc:
            stamp_path.unlink()
            raise error("install", f"the test compile on the fake {g.name} failed: {exc}", log) from None
        figures = summary(found, g)
        if figures.get("waves") is None:
            stamp_path.unlink()
            raise error("install", f"{DRIVER_TITLES[g.driver]} reported no occupancy figure for {g.name}: {found}",
                        log)
        echo(f"    test compile on {g.name}: registers {figures.get('registers')}, waves "
             f"{figures.get('waves')}/{figures.get('max_waves')}")


def finish_stamp(stamp: dict, stamp_path, root, started: float, keep_build: bool, steps) -> None:
    """`debian_source.finish_stamp` with the install step's seconds: what the set-up took beyond its other steps."""
    debian_source.finish_stamp(
        stamp, stamp_path, root, started=started, keep_build=keep_build,
        step_seconds=dict(steps.times, install=round(time.monotonic() - started - sum(steps.times.values()), 1)))


# ----------------------------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------------------------

def _runtime_has_subgroup_size() -> bool:
    from ..vk import Device
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
        from ..toolchain.shaders import compile_glsl, compile_shader
        if "\n" in text or "void main" in text:
            return compile_glsl(text, defines=defines, name="inline").code, "inline"
        path = Path(text)
        if path.suffix == ".spv":
            return path.read_bytes(), path.stem
        if path.suffix in (".glsl", ".comp") and path.is_file():
            return compile_glsl(path.read_text(), defines=defines, name=path.stem, source_path=path).code, path.stem
        spirv = compile_shader(text, defines)
        return spirv.code, spirv.name
    raise TypeError(f"expected SPIR-V bytes, a workbench.toolchain.shaders.Spirv, a .spv/.glsl path, GLSL text or a shader "
                    f"name; got {type(shader).__name__}")


def _job(item, index: int, common: dict) -> dict:
    """One compile request: the item may be a shader or a dict with shader + per-shader options."""
    options = dict(common)
    if isinstance(item, dict):
        unknown = set(item) - {"shader", "name", "defines", "spec_constants", "local_size", "subgroup_size",
                               "timeout", "entry_point", "internal"}
        if unknown or "shader" not in item:
            raise ValueError(f"a job dict needs 'shader' and may have name, defines, spec_constants, local_size, "
                             f"subgroup_size, timeout, entry_point; got keys {sorted(item)}")
        options.update({k: v for k, v in item.items() if k != "shader"})
        item = item["shader"]
    code, default_name = _resolve_code(item, options.get("defines"))
    if len(code) < 20 or len(code) % 4 or not code.startswith(_SPIRV_MAGIC):
        raise ValueError(f"job {index}: not a SPIR-V module ({len(code)} bytes)")
    subgroup = options.get("subgroup_size")
    if subgroup is not None:
        if subgroup not in (32, 64, 128):
            raise ValueError(f"subgroup_size must be 64 or 128 on Adreno (wave64 / wave128), 32 or 64 on AMD; "
                             f"got {subgroup!r}")
        if not _runtime_has_subgroup_size():
            raise NotImplementedError(SUBGROUP_SIZE_NEEDS)
    local = options.get("local_size")
    if local is not None:
        local = [int(v) for v in (tuple(local) if not isinstance(local, int) else (local,)) + (1, 1)][:3]
    spec = {str(int(k)): (v.item() if hasattr(v, "item") else v)
            for k, v in (options.get("spec_constants") or {}).items()}
    entry = options.get("entry_point") or "main"
    if not isinstance(entry, str):
        raise ValueError(f"job {index}: entry_point must be the name of a GLCompute entry point, got {entry!r}")
    return {"name": options.get("name") or default_name, "code": code, "spec_constants": spec,
            "local_size": local, "required_subgroup_size": subgroup, "entry_point": entry,
            "timeout": None if options.get("timeout") is None else _check_timeout(options["timeout"]),
            **({"internal": True} if options.get("internal") else {})}


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
    """(device, index → result, done) from a worker's JSON-lines result file (a torn last line is ignored); a
    driver that refused the chip gives device {"error": ...}."""
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
        elif "device_error" in record:
            device = {"error": record["device_error"]}
        elif "index" in record:
            results[int(record["index"])] = record
        elif record.get("done"):
            done = True
    return device, results, done


# Lines the shims print on every ioctl they do not emulate: noise in an error's quoted output.
_NOISE = re.compile(r"^(Unknown DRM_IOCTL_|MESA: info:)")


SHADER_TIMEOUT_S = 180.0  # one shader's compile (PanVK's spilling register allocator can take many minutes)


def _watch_worker(command, env, cwd, result_path: Path, limits: list[float]) -> tuple[int | None, str]:
    """Run the worker; kill it when no new result line came within the limit of the job in flight (`limits`:
    seconds per job of the request; device creation counts in the first job's). Returns (exit status or None when
    killed, what it printed)."""
    with tempfile.TemporaryFile(mode="w+b") as sink:
        proc = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT, cwd=cwd)
        seen, since = 0, time.monotonic()
        rc = None
        while True:
            try:
                rc = proc.wait(timeout=0.25)
                break
            except subprocess.TimeoutExpired:
                pass
            _, found, _ = _read_records(result_path)
            if len(found) != seen:
                seen, since = len(found), time.monotonic()
            elif time.monotonic() - since > limits[min(seen, len(limits) - 1)]:
                proc.kill()
                proc.wait()
                rc = None
                break
        sink.seek(0)
        return rc, sink.read().decode(errors="replace")


def _compiler_id(root=None, build: str = "stable") -> str:
    """The compiler build's identity for the statistics cache: the stamp's recipe, Debian version and build time."""
    stamp = _read_stamp(root, build) or {}
    return f"mesa {stamp.get('debian_version', MESA_VERSION)} recipe {stamp.get('recipe')} built " \
           f"{stamp.get('built_at')}"


def statistics_cache(root=None, build: str = "stable") -> stats_cache.StatsCache:
    """The statistics cache of the build in `root` (see `workbench.vendors.stats_cache`)."""
    return stats_cache.StatsCache(stats_cache.folder(cache_root(root, build)), _compiler_id(root, build))


def _worker_count(jobs: int) -> int:
    """Worker processes for `jobs` shaders of one GPU: $WORKBENCH_MESA_WORKERS, else one per CPU core (at most 4);
    never more than the shaders."""
    text = os.environ.get("WORKBENCH_MESA_WORKERS", "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"$WORKBENCH_MESA_WORKERS must be a whole number >= 1, got {text!r}")
        wanted = int(text)
    else:
        wanted = min(os.cpu_count() or 1, 4)
    return max(1, min(wanted, jobs))


def _compile_in_one_worker(jobs: list[dict], g: Gpu, env: dict, limits: list[float], tmp: Path,
                           tag: str) -> tuple[dict | None, list[dict]]:
    """Compile `jobs` in a child process with the GPU's environment; (device, one result per job, in order).

    A shader that crashes the driver, or takes more than its limit (seconds), gets an error result ("failure": "crash"
    or "timeout") and a new process continues with the rest (the result lines the old one wrote are kept). With no
    jobs, the process only reports its device."""
    title = DRIVER_TITLES[g.driver]
    results: list[dict | None] = [None] * len(jobs)
    device = None
    paths = []
    for i, job in enumerate(jobs):
        path = tmp / f"{tag}-job{i}.spv"
        path.write_bytes(job["code"])
        paths.append(str(path))
    pending = list(range(len(jobs)))
    attempt = 0
    while pending or attempt == 0:
        attempt += 1
        # PanVK's figures come from the compiler's shader-db line on stderr: the worker keeps each job's output.
        request = {"gpu": g.name, "device_selector": g.device_match, "capture_output": g.driver == "panvk",
                   "jobs": [{k: v for k, v in jobs[i].items() if k not in ("code", "timeout")}
                            | {"spirv": paths[i]} for i in pending]}
        request_path = tmp / f"{tag}-request{attempt}.json"
        result_path = tmp / f"{tag}-result{attempt}.jsonl"
        request_path.write_text(json.dumps(request))
        command = [sys.executable, "-m", "workbench.vendors.mesa_worker", str(request_path), str(result_path)]
        rc, output = _watch_worker(command, env, tmp, result_path,
                                   [limits[i] for i in pending] or [SHADER_TIMEOUT_S])
        found_device, found, done = _read_records(result_path)
        if found_device is not None and "error" in found_device:
            raise MesaCompileError(f"{title} refuses {g.name} ({', '.join(f'{k}={v}' for k, v in g.env)}): "
                                   f"{found_device['error']}" + (f"; {g.note}" if g.note else ""))
        device = found_device or device
        for position, record in found.items():
            results[pending[position]] = record
        if len(found) == len(pending):  # all there (a crash while closing the device loses nothing)
            break
        lines = [l for l in output.strip().splitlines() if not _NOISE.match(l)]
        culprit = pending[len(found)]
        if rc is None:
            how = f"took more than {limits[culprit]:g} s on one shader (killed)"
        else:
            how = f"exit status {rc}" if rc >= 0 else f"killed by signal {-rc}"
            if rc < 0:
                with contextlib.suppress(ValueError):
                    import signal
                    how += f" ({signal.Signals(-rc).name})"
        if found_device is None:  # died before any shader: nothing to blame on one of them
            raise MesaCompileError(f"the {title} worker for {g.name} ({', '.join(f'{k}={v}' for k, v in g.env)}) "
                                   f"failed ({how}) before compiling anything; its last output:\n" + _tail(lines, 30))
        kind = "crash" if rc is not None else "timeout"
        results[culprit] = {"name": jobs[culprit]["name"], "failure": kind,
                            "error": f"the driver process {how} while compiling this shader (a {title} "
                                     f"{'crash' if rc is not None else 'hang or a slow compile'} on {g.name})"
                                     + (f"; last output: {_tail(lines, 8)}" if lines else "")}
        if kind == "timeout":
            results[culprit]["timeout_s"] = limits[culprit]
        pending = pending[len(found) + 1:]
    return device, results


INSTRUCTION_STATISTICS = ("Instructions", "Instruction Count")  # RADV and PanVK's shader-db; Turnip


def empty_program(statistics: dict, job: dict | None = None) -> str | None:
    """Why `statistics` are not statistics of the shader's work, or None: a compile that reports 0 instructions
    (RADV's null-winsys compile of a shader whose loops and stores were folded away, e.g. at specialization constants
    left at their defaults) has registers and occupancy figures that describe an empty program."""
    counts = [statistics[k] for k in INSTRUCTION_STATISTICS if statistics.get(k) is not None]
    if not counts or any(int(c) > 0 for c in counts):
        return None
    spec = (job or {}).get("spec_constants") or {}
    return ("empty program: the compiler reports 0 instructions, so its registers and occupancy describe no work "
            "(the shader's work was folded away" + (f" at specialization constants {spec})" if spec else
                                                    ": no specialization constants were given, so they are the "
                                                    "shader's defaults)"))


def _check_timeout(timeout) -> float:
    """Seconds one shader may take: `timeout`, else SHADER_TIMEOUT_S; ValueError unless a number > 0."""
    if timeout is None:
        return SHADER_TIMEOUT_S
    try:
        seconds = float(timeout)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not seconds > 0:
        raise ValueError(f"a timeout must be a number of seconds > 0, got {timeout!r}")
    return seconds


def _run_worker(jobs: list[dict], g: Gpu, root, timeout: float | None,
                refresh=None) -> tuple[dict, list[dict]]:
    """The statistics of `jobs` on `g`; one result per job, in order. `timeout`: seconds one shader may take
    (default SHADER_TIMEOUT_S); a shader that takes longer gets an error.

    Results come from the statistics cache where it has them (`statistics_cache`; `refresh` or $WORKBENCH_MESA_REFRESH
    = "failures" / "all" compiles them again); the rest are compiled by `_worker_count` child processes at once,
    the shaders dealt out in turn, and recorded, failures included."""
    _require_set_up(root, g.build, g.driver)
    refresh = stats_cache.check_refresh(refresh)
    limits = [_check_timeout(job.get("timeout") if job.get("timeout") is not None else timeout) for job in jobs]
    cache = statistics_cache(root, g.build)
    keys = [cache.key(job, g.name, g.env) for job in jobs]
    results: list[dict | None] = [cache.get(key, limit, refresh) for key, limit in zip(keys, limits)]
    pending = [i for i, r in enumerate(results) if r is None]
    device = cache.device(g.name)
    stats_cache.COUNTS["cached"] += len(jobs) - len(pending)
    title = DRIVER_TITLES[g.driver]
    if pending or device is None:
        stats_cache.COUNTS["compiled"] += len(pending)
        env = shim_env(g, root)
        n = _worker_count(len(pending))
        shards = [pending[k::n] for k in range(n)]
        with tempfile.TemporaryDirectory(prefix="workbench-mesa-") as tmp, \
                concurrent.futures.ThreadPoolExecutor(n) as pool:
            futures = [pool.submit(_compile_in_one_worker, [jobs[i] for i in shard], g, env,
                                   [limits[i] for i in shard], Path(tmp), f"w{k}") for k, shard in enumerate(shards)]
            for shard, future in zip(shards, futures):
                found_device, found = future.result()
                device = found_device or device
                for i, record in zip(shard, found):
                    if g.driver == "panvk" and "statistics" in record:
                        record["statistics"].update(parse_shaderdb(record.get("output", ""), g))
                        work_registers(record["statistics"], g)  # 26.x reports "Threads" as a statistic
                    if "statistics" in record and (why := empty_program(record["statistics"], jobs[i])):
                        record = {"name": record.get("name"), "failure": "empty", "error": why}
                    if "error" in record:
                        record.setdefault("failure", "error")
                    cache.put(keys[i], record, jobs[i]["name"], g.name)
                    results[i] = record
        if device is None:
            raise MesaCompileError(f"the {title} worker for {g.name} reported no device")
        cache.put_device(g.name, device)
    if g.device_match.lower() not in device["name"].lower():
        raise MesaCompileError(f"expected {title} for {g.name} (a device named like {g.device_match!r}), the worker "
                               f"got {device['name']!r} ({device['driver_info']})")
    for job, record in zip(jobs, results):
        record["name"] = job["name"]  # the cache keeps the name of the first compile; the caller's label wins
    return device, results


# PanVK's shader-db line (src/panfrost/compiler/bifrost_compile.c bi_print_stats / va_print_stats), e.g.
# "SHADER-DB: MESA_SHADER_COMPUTE shader: 70 inst, 13.000000 cycles, ..., 40 quadwords, 2 threads, 1 loops, 0:0
# spills:fills"
_SHADERDB = re.compile(r"SHADER-DB: (\w+) shader: (.*)")


def parse_shaderdb(output: str, gpu=None) -> dict:
    """The figures of the bifrost/valhall compiler's shader-db line(s) in `output` (the last compute shader's):
    "Instructions", "Cycles", the per-unit cycle estimates, "Quadwords", "Threads" (2 = full occupancy, 1 = half),
    "Loops", "Spills", "Fills", and "Work register allocation" (32 when "Threads" is 2, else 64: bi_ra tries 32
    registers first on v7+ and falls back to 64). {} when there is no such line."""
    found = None
    for line in output.splitlines():
        m = _SHADERDB.search(line)
        if m and ("COMPUTE" in m.group(1).upper() or m.group(1).upper() in ("CS", "KERNEL")):
            found = m.group(2)
        elif m and found is None:
            found = m.group(2)
    if found is None:
        return {}
    out = {}
    names = {"inst": "Instructions", "cycles": "Cycles", "quadwords": "Quadwords", "threads": "Threads",
             "loops": "Loops", "tuples": "Tuples", "clauses": "Clauses", "preloads": "Preloads"}
    for part in found.split(","):
        words = part.split()
        if len(words) != 2:
            continue
        value, key = words
        if key == "spills:fills":
            spills, fills = value.split(":")
            out["Spills"], out["Fills"] = int(spills), int(fills)
            continue
        number = float(value) if "." in value else int(value)
        out[names.get(key, f"Cycles {key}")] = number
    return work_registers(out, check_gpu(gpu) if gpu is not None else None)


def work_registers(statistics: dict, g=None) -> dict:
    """`statistics` with "Work register allocation" (32 when "Threads" is 2, else 64: bi_ra tries 32 registers first
    on v7+ and falls back to 64) where it has "Threads" and not that figure; v6 has no trade-off (always 1 thread).
    From the shader-db line (Mesa 25) or the executable's own "Threads" statistic (Mesa 26.2)."""
    if "Threads" in statistics and "Work register allocation" not in statistics and (g is None or "v6" not in g.arch):
        statistics["Work register allocation"] = 32 if statistics["Threads"] == 2 else 64
    return statistics


def stats_many(shaders, gpu=DEFAULT_GPU, *, root=None, timeout: float | None = None, errors: str = "raise",
               refresh=None, **common) -> list[dict]:
    """Statistics of several shaders for one GPU: from the statistics cache where it has them, the rest compiled
    by child processes (one per CPU core, at most 4) and cached.

    `shaders`: a list of shaders (anything `stats` takes) or job dicts ({"shader", "name", "defines",
    "spec_constants", "local_size", "subgroup_size", "timeout": its own time limit, "entry_point": default
    "main"}), or a dict name → shader / job
    dict. `common` gives the defaults of those options. Returns one statistics dict per shader, in order; a shader
    the driver rejected, crashed on or took more than `timeout` seconds over raises MesaCompileError
    (errors="raise") or gives {"error": message, "failure": "error" | "crash" | "timeout" | "unsupported" | "empty"}
    (errors="keep": "unsupported" names the feature the GPU lacks, "empty" a compile of 0 instructions).
    Failures are cached too; `refresh` ("failures", "all"; default $WORKBENCH_MESA_REFRESH) compiles cached results
    again.
    """
    g = check_gpu(gpu)
    if errors not in ("raise", "keep"):
        raise ValueError(f"errors must be 'raise' or 'keep', got {errors!r}")
    unknown = set(common) - {"defines", "spec_constants", "local_size", "subgroup_size", "name", "internal"}
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    jobs = [_job(item, i, common) for i, item in enumerate(_normalise_items(shaders))]
    if not jobs:
        return []
    _, results = _run_worker(jobs, g, root, timeout, refresh)
    if common.get("internal"):  # workbench.vendors.isa: the whole record (statistics + representations)
        return [result if "error" not in result or errors == "keep" else _raise_compile(g, job, result)
                for job, result in zip(jobs, results)]
    out = []
    for job, result in zip(jobs, results):
        if "error" in result:
            if errors == "raise":
                raise MesaCompileError(f"{DRIVER_TITLES[g.driver]} ({g.name}) rejected {job['name']!r}: "
                                       f"{result['error']}")
            out.append({"error": result["error"], "failure": result.get("failure", "error")})
        else:
            out.append(result["statistics"])
    return out


def _raise_compile(g: Gpu, job: dict, result: dict):
    raise MesaCompileError(f"{DRIVER_TITLES[g.driver]} ({g.name}) rejected {job['name']!r}: {result['error']}")


def stats(shader_or_spirv, gpu=DEFAULT_GPU, subgroup_size=None, local_size=None, spec_constants=None, *,
          defines=None, name=None, root=None, timeout: float | None = None, refresh=None) -> dict:
    """Every statistic the driver reports for one compute shader on `gpu` (see `GPUS`; "a740" by default).

    `shader_or_spirv`: SPIR-V bytes, a `workbench.toolchain.shaders.Spirv`, a .spv or .glsl path, GLSL text or the name of a
    shader in shaders/ (compiled with `defines`). `local_size` and `spec_constants` as for `vk.Device.pipeline`.
    Returns the driver's own names ({"Registers used": 3, "Max Waves Per Core": 16, ...} on Turnip, {"VGPRs": 8,
    "Subgroups per SIMD": 16, ...} on RADV, {"Code Size", "Instructions", "Threads", ...} on PanVK) plus
    "Subgroup Size"; `summary` turns them into common columns. Needs `setup()` (MesaNotSetUpError otherwise).
    Cached on disk (see `stats_many`).
    """
    common = {"subgroup_size": subgroup_size, "local_size": local_size, "spec_constants": spec_constants,
              "defines": defines, "name": name}
    return stats_many([shader_or_spirv], gpu, root=root, timeout=timeout, refresh=refresh, **common)[0]


def _int(value):
    return None if value is None else int(value)


def summary(statistics: dict, gpu, local_size=(64, 1, 1)) -> dict:
    """One driver's statistics in the columns every vendor has, with what the workbench's occupancy model predicts
    from the same registers:

    registers (the compiler's count), register_unit ("vec4" Adreno, "vgpr" AMD, "work registers" Mali: PanVK
    exposes only the allocation, 32 or 64), spills, instructions, waves (the compiler's occupancy figure: Turnip's
    "Max Waves Per Core" of 16, RADV's "Subgroups per SIMD" of 16, PanVK's "Threads" of 2), max_waves, occupancy
    (waves / max_waves), subgroup_size, model_waves, model_occupancy (`occupancy.adreno_occupancy`,
    `amd_occupancy`, `mali_occupancy`), and error where the statistics are an error."""
    from . import occupancy as occ
    g = check_gpu(gpu)
    out = {"registers": None, "register_unit": None, "spills": None, "instructions": None, "waves": None,
           "max_waves": g.max_waves, "occupancy": None, "subgroup_size": statistics.get("Subgroup Size"),
           "model_waves": None, "model_occupancy": None}
    why = statistics.get("error") or empty_program(statistics)
    if why:
        out["error"] = why
        return out
    local = local_size or (64, 1, 1)
    model = None
    if g.vendor == "adreno":
        regs, half = _int(statistics.get("Registers used")), _int(statistics.get("Half-registers used")) or 0
        spills = int(statistics.get("STP Count") or 0) + int(statistics.get("LDP Count") or 0)
        out.update(registers=regs, register_unit="vec4", spills=spills,
                   instructions=statistics.get("Instruction Count"), waves=_int(statistics.get("Max Waves Per Core")))
        if regs is not None:
            model = occ.adreno_occupancy(regs, half, local, **dict(g.model))
    elif g.vendor == "amd":
        vgprs = _int(statistics.get("VGPRs"))
        spills = sum(int(statistics.get(k) or 0) for k in ("Spilled VGPRs", "Spilled SGPRs"))
        out.update(registers=vgprs, register_unit="vgpr", spills=spills, instructions=statistics.get("Instructions"),
                   waves=_int(statistics.get("Subgroups per SIMD")))
        wave = int(statistics.get("Subgroup Size") or 32)
        if vgprs is not None:
            model = occ.amd_occupancy(vgprs, wave, sgprs=int(statistics.get("SGPRs") or 0),
                                      lds_bytes_per_workgroup=int(statistics.get("LDS size") or 0),
                                      local_size=local, **dict(g.model))
    elif g.vendor == "mali":
        alloc = _int(statistics.get("Work register allocation"))
        spills = None if "Spills" not in statistics else int(statistics["Spills"]) + int(statistics.get("Fills", 0))
        out.update(registers=alloc, register_unit="work registers", spills=spills,
                   instructions=statistics.get("Instructions"), waves=_int(statistics.get("Threads")))
        if alloc is not None:
            model = occ.mali_occupancy(alloc, **dict(g.model))
    if g.vendor == "amd" and out["subgroup_size"]:  # RADV counts a wave64 as two (see occupancy.amd_occupancy)
        out["max_waves"] = g.max_waves * max(1, int(out["subgroup_size"]) // 32)
    if out["waves"] is not None:
        out["occupancy"] = out["waves"] / out["max_waves"]
    if model is not None:
        if g.vendor == "mali":  # the model counts warps; the compiler's figure is thread slots (2 = all warps)
            out["model_waves"] = round(model.occupancy * g.max_waves)
        else:
            out["model_waves"] = model.waves_or_warps_active
        out["model_occupancy"] = model.occupancy
    return out


def stats_rows(shaders, gpu=DEFAULT_GPU, *, root=None, timeout: float | None = None, errors: str = "raise",
               model: bool = True, refresh=None, **common):
    """A DataFrame, one row per shader and GPU: name, gpu, vendor, compiler, device, local_size, the `summary`
    columns (registers, spills, instructions, waves, occupancy, model_waves, ...), then every raw statistic.
    `gpu` may be a list (or "a740,rdna2"): one child process per GPU. With errors="keep" a shader the driver
    rejected, or a GPU the driver refuses, gets a row whose `error` says why; "raise" raises MesaCompileError.
    Cached on disk, failures included (see `stats_many`; `refresh` compiles again)."""
    import pandas as pd
    gpus = _check_gpus(gpu)
    items = _normalise_items(shaders)
    jobs = [_job(item, i, {k: v for k, v in common.items() if k != "name"}) for i, item in enumerate(items)]
    rows = []
    for g in gpus:
        try:
            device, results = _run_worker(jobs, g, root, timeout, refresh)
        except MesaNotSetUpError:
            raise
        except MesaCompileError as exc:
            if errors == "raise":
                raise
            device, results = {"name": None}, [{"error": str(exc).splitlines()[0] + " " + _tail(
                [l for l in str(exc).splitlines()[1:] if l.strip()], 2)}] * len(jobs)
        for job, result in zip(jobs, results):
            local = tuple(result.get("local_size") or job["local_size"] or (64, 1, 1))
            row = {"name": job["name"], "gpu": g.name, "vendor": g.vendor, "compiler": DRIVER_TITLES[g.driver],
                   "device": device["name"], "local_size": local}
            if "error" in result and errors == "raise":
                raise MesaCompileError(f"{DRIVER_TITLES[g.driver]} ({g.name}) rejected {job['name']!r}: "
                                       f"{result['error']}")
            statistics = result.get("statistics") or {"error": result.get("error")}
            if "error" in statistics:
                row["failure"] = result.get("failure", "error")
            figures = summary(statistics, g, local)
            if not model:
                figures.pop("model_waves"), figures.pop("model_occupancy")
            row.update(figures)
            row.update({k: v for k, v in statistics.items() if k != "error"})
            rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------------------
# The occupancy models checked against the compilers
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
    """Does the workbench's occupancy model predict the compiler's own occupancy figure?

    One synthetic shader per count n (`live_vec4_shader(n)`: n live vec4 accumulators = 4n live 32-bit values),
    all compiled in one child process for `gpu`; the model (`occupancy.adreno_occupancy`, `amd_occupancy` or
    `mali_occupancy`) gets the compiler's own register count (and, on Adreno, its half registers and the local size;
    on AMD its wave size, SGPRs and LDS). Returns a DataFrame: live vec4, registers, register_unit, compiler waves,
    model waves, max_waves, compiler subgroup size, model subgroup size (Adreno), spills, agree (waves, and on
    Adreno the subgroup size, match), occupancy (compiler waves / max_waves), gpu, vendor, local_size.
    """
    import pandas as pd
    from . import occupancy as occ
    from ..toolchain.shaders import compile_glsl
    g = check_gpu(gpu)
    counts = [int(n) for n in register_counts]
    local = (local_size, 1, 1) if isinstance(local_size, int) else tuple(local_size)
    jobs = [{"shader": compile_glsl(live_vec4_shader(n), name=f"live_vec4_{n}"), "name": f"live_vec4_{n}"}
            for n in counts]
    results = stats_many(jobs, g, root=root, local_size=local)
    rows = []
    for n, s in zip(counts, results):
        f = summary(s, g, local)
        row = {"live vec4": n, "registers": f["registers"], "register_unit": f["register_unit"],
               "compiler waves": f["waves"], "model waves": f["model_waves"], "max_waves": f["max_waves"],
               "compiler subgroup size": f["subgroup_size"], "spills": f["spills"]}
        agree = f["waves"] == f["model_waves"]
        if g.vendor == "adreno":
            row["half regs"] = int(s.get("Half-registers used") or 0)
            m = occ.adreno_occupancy(f["registers"], row["half regs"], local, **dict(g.model))
            row["model subgroup size"] = m.details["threadsize"]
            agree = agree and f["subgroup_size"] == m.details["threadsize"]
        if g.vendor == "amd":
            row["SGPRs"] = s.get("SGPRs")
        if g.vendor == "mali":
            row["instructions"] = s.get("Instructions")
        row.update({"agree": bool(agree), "occupancy": f["occupancy"], "gpu": g.name, "vendor": g.vendor,
                    "local_size": local})
        rows.append(row)
    return pd.DataFrame(rows)
