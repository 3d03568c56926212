"""The Khronos validation layer of a 2026 SDK tag, built once from its sources and cached: GPU-assisted validation
with shared-memory data-race detection, which Debian 12's layer (1.3.239) lacks.

    python -m workbench.toolchain.validation setup [--source DIR | --git PATTERN] [--quiet]   # ./setup.sh validation
    python -m workbench.toolchain.validation status                                           # JSON; 1 while not built

    from workbench.toolchain import validation
    validation.setup()                  # a second call returns at once
    validation.layer_dir()              # the folder of the manifest and library (one-line error while not built)
    validation.resolve_layer("built")   # what vk.Device(layer=...) takes: "built" / "system" / a folder -> folder|None

Why
    Since 2026 GPU-AV instruments compute shaders' shared-memory loads, stores, atomics and barriers and reports a
    data race as ``SharedMemoryDataRace-RaceOnStore`` / ``-RaceOnLoad`` / ``-RaceOnAtomic`` (Vulkan-ValidationLayers
    PRs #11717, #11780; the setting ``gpuav_shared_memory_data_race``, on by default with GPU-AV's shader
    instrumentation). :data:`TAG` has it (its ``layers/gpuav/instrumentation/shared_memory_data_race.cpp``).

Sources (the tag's ``scripts/known_good.json`` pins each dependency; :data:`REPOS`)
    ``source=`` / ``--source`` / ``$WORKBENCH_VVL_SOURCE``: a folder holding the five trees by name
    (``Vulkan-ValidationLayers``, ``Vulkan-Headers``, ``Vulkan-Utility-Libraries``, ``SPIRV-Headers``,
    ``SPIRV-Tools``). ``git=`` / ``--git`` / ``$WORKBENCH_VVL_GIT``: a pattern of git directories holding the pinned
    commits, ``{name}`` standing for a repository's name (e.g. ``/mirror/KhronosGroup+{name}/repo``); each is
    ``git archive``d into ``<cache>/src``. Else each is fetched from GitHub (``git fetch --depth 1``). A snapshot may
    lack a few large blobs (an archive leaves them out and says which): Vulkan-Headers' ``validusage.json`` and C++
    ``vulkan_structs.hpp`` are not read by this build; the layer's generated table of specification sentences per
    VUID (``vk_validation_error_messages.cpp``, made from ``validusage.json``) is then written as an empty table, so
    messages keep their VUID and text without the quoted specification sentence (the stamp says so).

Build (cmake + ninja, Release, no tests; about 35 min on 2 cores)
    Vulkan-Headers, SPIRV-Headers, Vulkan-Utility-Libraries installed into ``<cache>/deps``; SPIRV-Tools' two
    libraries the layer links (``SPIRV-Tools-static``, ``SPIRV-Tools-opt``: the shared library and the link / reduce
    / lint libraries are not built), found through a small CMake package file written here; the layer's target
    ``vvl`` with ``UPDATE_DEPS=OFF``, WSI off, at :data:`LAYER_OPT`.

Cache (``$WORKBENCH_VVL_DIR``, default ``~/.cache/workbench/validation/<tag>``)
    ``layer/`` the library and its manifest (``VK_LAYER_PATH`` points here); ``logs/``; ``setup.json`` the stamp.
    ``src/``, ``build/``, ``deps/`` are deleted after a successful build unless ``keep_build=True``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import build, debian_source

__all__ = ["TAG", "VERSION", "REPOS", "LAYER_NAME", "RACE_SETTING", "ValidationLayerError",
           "ValidationLayerNotSetUpError", "ValidationLayerSetupError", "cache_root", "is_set_up", "status",
           "layer_dir", "resolve_layer", "setup", "main"]

TAG = "vulkan-sdk-1.4.357.0"
VERSION = "1.4.357"
LAYER_NAME = "VK_LAYER_KHRONOS_validation"
RACE_SETTING = "gpuav_shared_memory_data_race"
# name -> (url, commit): the tag's commit and scripts/known_good.json's pins at it
REPOS = {
    "Vulkan-ValidationLayers": ("https://github.com/KhronosGroup/Vulkan-ValidationLayers.git",
                                "f4874eee15c78d7bdb2b7e60659d539f14741500"),
    "Vulkan-Headers": ("https://github.com/KhronosGroup/Vulkan-Headers.git",
                       "e3b1eec08173d6b825cd3ac88c885a63b621504a"),  # v1.4.357
    "Vulkan-Utility-Libraries": ("https://github.com/KhronosGroup/Vulkan-Utility-Libraries.git",
                                 "c279fa4350059faac3d2365df0538977e7e5b097"),  # v1.4.357
    "SPIRV-Headers": ("https://github.com/KhronosGroup/SPIRV-Headers.git",
                      "29981f65241605e08b0ede4cfeb999fe3b723c6a"),
    "SPIRV-Tools": ("https://github.com/KhronosGroup/SPIRV-Tools.git",
                    "b707790a898e44038547df54580022fc1cf89c3d"),
}
# the generated file a snapshot may lack, and the empty table written in its place
VUID_TABLE = "layers/vulkan/generated/vk_validation_error_messages.cpp"
SOURCE_MARKER = ".workbench-source.json"  # in each tree of <cache>/src: where it came from, its commit
_EMPTY_VUID_TABLE = """\
// Written by workbench.toolchain.validation: the source snapshot lacked this generated table of the specification's
// sentences per VUID (made from Vulkan-Headers' registry/validusage.json). An empty table: messages keep their VUID
// and text, without the quoted specification sentence.
#include "vk_validation_error_messages.h"

const vvl::unordered_map<std::string_view, vuid_info>& GetVuidMap() {
    static const vvl::unordered_map<std::string_view, vuid_info> vuid_map;
    return vuid_map;
}
"""
APT_PACKAGES = ("g++", "cmake", "ninja-build", "python3", "git", "binutils")
RELEASE = ("-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release")
# The layer's 350,000 lines at -O0 instead of Release's -O3: about half the compile time on 2 shared cores; the layer's
# own CPU work is a small part of a validated dispatch on lavapipe.
LAYER_OPT = "-O0"
SPIRV_TOOLS_TARGETS = ("SPIRV-Tools-static", "SPIRV-Tools-opt")
LAYER_PRODUCTS = {"library": ("VVL/layers/libVkLayer_khronos_validation.so", "layer/libVkLayer_khronos_validation.so"),
                  "manifest": ("VVL/layers/VkLayer_khronos_validation.json", "layer/VkLayer_khronos_validation.json")}
STAMP_NAME = debian_source.STAMP_NAME
_RECIPE = {"repos": REPOS, "targets": SPIRV_TOOLS_TARGETS, "products": LAYER_PRODUCTS, "opt": LAYER_OPT, "layout": 1}
RECIPE_ID = debian_source.recipe_id(_RECIPE)
SETUP_COMMAND = "./setup.sh validation"
SETUP_MINUTES = 35


class ValidationLayerError(RuntimeError):
    """Base class of this module's errors."""


class ValidationLayerNotSetUpError(ValidationLayerError):
    """The layer is not in the cache."""


class ValidationLayerSetupError(ValidationLayerError, debian_source.SetupError):
    """A set-up step failed; the message names the step, its full log and the log's last lines."""

    label = "validation setup"


CACHE = build.ToolCache(label="validation setup", env_var="WORKBENCH_VVL_DIR",
                        default=Path.home() / ".cache" / "workbench" / "validation" / TAG, recipe=RECIPE_ID,
                        products=lambda base: {k: base / dest for k, (_, dest) in LAYER_PRODUCTS.items()},
                        tools=lambda base: {"layer_dir": base / "layer"})
cache_root, tool_paths, _missing, is_set_up, status = CACHE.functions()


def layer_dir(root=None) -> Path:
    """The folder of the built layer's manifest; ValidationLayerNotSetUpError (one line) while not built."""
    return CACHE.require(root, error=ValidationLayerNotSetUpError, explain=lambda folder, missing: (
        f"the validation layer {VERSION} ({TAG}, with GPU-AV's shared-memory race detection) is not built in "
        f"{folder} (missing {Path(missing[0]).name}); build it once with `{SETUP_COMMAND}` "
        f"(about {SETUP_MINUTES} min on 2 cores)"))["layer_dir"]


def resolve_layer(layer=None) -> str | None:
    """`layer` ("system", "built", a folder; None: $WORKBENCH_VALIDATION_LAYER) as `vk.Device(layer=)` takes it:
    None for the system's layer, else a folder holding a VkLayer_khronos_validation.json."""
    text = str(layer if layer is not None else os.environ.get("WORKBENCH_VALIDATION_LAYER", "")).strip()
    if text in ("", "system"):
        return None
    if text == "built":
        return str(layer_dir())
    folder = Path(text).expanduser()
    if not (folder / "VkLayer_khronos_validation.json").is_file():
        raise ValidationLayerError(f"expected the validation layer as 'system', 'built' or a folder holding "
                                   f"VkLayer_khronos_validation.json, got {text!r}")
    return str(folder)


# ----------------------------------------------------------------------------------------------------------------
# Sources
# ----------------------------------------------------------------------------------------------------------------

def _run(step, command, log, **kw):
    debian_source.run_logged(step, command, log, error=ValidationLayerSetupError, env=debian_source.clean_env(), **kw)


def _absent_blobs(git_dir: str, commit: str) -> list[str]:
    """Paths of `commit`'s tree whose blobs the git directory lacks (a partial snapshot)."""
    listing = subprocess.run(["git", "-C", git_dir, "ls-tree", "-r", commit], capture_output=True, text=True)
    entries = [line.split("\t", 1) for line in listing.stdout.splitlines() if "\t" in line]
    blobs = [(meta.split()[2], path) for meta, path in entries if meta.split()[1] == "blob"]
    check = subprocess.run(["git", "-C", git_dir, "cat-file", "--batch-check"], capture_output=True, text=True,
                           input="".join(f"{sha}\n" for sha, _ in blobs))
    return [path for (sha, path), line in zip(blobs, check.stdout.splitlines()) if line.endswith("missing")]


def _archive(git_dir: str, commit: str, tree: Path, log: Path) -> list[str]:
    """`commit` of a git directory unpacked into `tree` (fresh), less the blobs it lacks (returned)."""
    if subprocess.run(["git", "-C", git_dir, "cat-file", "-e", f"{commit}^{{commit}}"],
                      capture_output=True).returncode != 0:
        raise ValidationLayerSetupError("sources", f"expected commit {commit[:10]} in the git directory {git_dir}, "
                                                   "found none", log)
    absent = _absent_blobs(git_dir, commit)
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    excludes = [f":(exclude){p}" for p in absent]
    archive = tree.parent / f"{tree.name}.tar"
    _run("sources", ["git", "-C", git_dir, "archive", "-o", archive, commit, "--", ".", *excludes], log,
         what=f"git archive of {git_dir}")
    _run("sources", ["tar", "-xf", archive, "-C", tree], log, what="tar")
    archive.unlink()
    return absent


def _fetch(url: str, commit: str, tree: Path, log: Path) -> None:
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    for command in (["git", "init", "-q"], ["git", "fetch", "-q", "--depth", "1", url, commit],
                    ["git", "-c", "advice.detachedHead=false", "checkout", "-q", "FETCH_HEAD"]):
        _run("sources", command, log, cwd=tree, what=f"{' '.join(command[:2])} of {url}")


def _sources(root: Path, source, git, log: Path, echo) -> tuple[Path, dict]:
    """The folder of the five trees and what was found: {name: {"from", "commit", "absent"}}."""
    found = {}
    if source is not None:
        base = Path(source).expanduser().resolve()
        for name in REPOS:
            if not (base / name / "CMakeLists.txt").is_file():
                raise ValidationLayerSetupError("sources", f"expected the tree {name} (commit {REPOS[name][1][:10]}) "
                                                           f"in {base}, found no {name}/CMakeLists.txt", log)
            found[name] = {"from": str(base / name), "commit": "as given", "absent": []}
        echo(f"    using the trees in {base}")
    else:
        base = root / "src"
        for name, (url, commit) in REPOS.items():
            marker = base / name / SOURCE_MARKER
            kept = json.loads(marker.read_text()) if marker.is_file() else {}
            if kept.get("commit") == commit:  # a tree of an earlier (interrupted) set-up: its build resumes
                echo(f"    {name} {commit[:10]}: the tree of an earlier set-up, kept")
                found[name] = kept
                continue
            if git:
                git_dir = git.replace("{name}", name)
                echo(f"    git archive {name} {commit[:10]} from {git_dir}")
                found[name] = {"from": git_dir, "commit": commit, "absent": _archive(git_dir, commit, base / name, log)}
            else:
                echo(f"    git fetch {url} {commit[:10]}")
                _fetch(url, commit, base / name, log)
                found[name] = {"from": url, "commit": commit, "absent": []}
            marker.write_text(json.dumps(found[name]))
    table = base / "Vulkan-ValidationLayers" / VUID_TABLE
    if not table.is_file():
        table.parent.mkdir(parents=True, exist_ok=True)
        table.write_text(_EMPTY_VUID_TABLE)
        echo(f"    {VUID_TABLE} absent from the snapshot: written as an empty table (no specification sentences)")
    found["Vulkan-ValidationLayers"]["empty_vuid_table"] = table.read_text().startswith(_EMPTY_VUID_TABLE[:40])
    return base, found


# ----------------------------------------------------------------------------------------------------------------
# Build
# ----------------------------------------------------------------------------------------------------------------

def _spirv_tools_package(deps: Path, src: Path, build_dir: Path) -> Path:
    """A CMake package `SPIRV-Tools-opt` of the two libraries built in `build_dir` (what the layer's
    find_package(SPIRV-Tools-opt CONFIG) needs), without SPIRV-Tools' install step (which wants every library)."""
    folder = deps / "SPIRV-Tools" / "lib" / "cmake" / "SPIRV-Tools-opt"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SPIRV-Tools-optConfig.cmake").write_text(f"""\
# written by workbench.toolchain.validation
if(NOT TARGET SPIRV-Tools-static)
  add_library(SPIRV-Tools-static STATIC IMPORTED)
  set_target_properties(SPIRV-Tools-static PROPERTIES IMPORTED_LOCATION "{build_dir}/source/libSPIRV-Tools.a"
                        INTERFACE_INCLUDE_DIRECTORIES "{src}/include" INTERFACE_LINK_LIBRARIES "rt")
endif()
if(NOT TARGET SPIRV-Tools-opt)
  add_library(SPIRV-Tools-opt STATIC IMPORTED)
  set_target_properties(SPIRV-Tools-opt PROPERTIES IMPORTED_LOCATION "{build_dir}/source/opt/libSPIRV-Tools-opt.a"
                        INTERFACE_INCLUDE_DIRECTORIES "{src}/include" INTERFACE_LINK_LIBRARIES "SPIRV-Tools-static")
endif()
set(SPIRV-Tools-opt_FOUND TRUE)
""")
    return deps / "SPIRV-Tools"


def _options(name: str, src: Path, deps: Path) -> list[str]:
    """cmake options of each tree (beyond :data:`RELEASE`)."""
    prefix = lambda *names: "-DCMAKE_PREFIX_PATH=" + ";".join(str(deps / n) for n in names)
    return {
        "Vulkan-Headers": [f"-DCMAKE_INSTALL_PREFIX={deps / name}", "-DVULKAN_HEADERS_ENABLE_MODULE=OFF",
                           "-DVULKAN_HEADERS_ENABLE_TESTS=OFF"],
        "SPIRV-Headers": [f"-DCMAKE_INSTALL_PREFIX={deps / name}", "-DSPIRV_HEADERS_ENABLE_TESTS=OFF"],
        "Vulkan-Utility-Libraries": [f"-DCMAKE_INSTALL_PREFIX={deps / name}", prefix("Vulkan-Headers"),
                                     "-DBUILD_TESTS=OFF", "-DUPDATE_DEPS=OFF"],
        "SPIRV-Tools": [f"-DSPIRV-Headers_SOURCE_DIR={src / 'SPIRV-Headers'}", "-DSPIRV_WERROR=OFF",
                        "-DSPIRV_SKIP_TESTS=ON", "-DSPIRV_SKIP_EXECUTABLES=ON", "-DSPIRV_TOOLS_BUILD_STATIC=ON"],
        "Vulkan-ValidationLayers": [prefix("Vulkan-Headers", "Vulkan-Utility-Libraries", "SPIRV-Headers",
                                           "SPIRV-Tools"),
                                    "-DUPDATE_DEPS=OFF", "-DBUILD_TESTS=OFF", "-DBUILD_WERROR=OFF",
                                    f"-DCMAKE_CXX_FLAGS_RELEASE={LAYER_OPT} -DNDEBUG",
                                    "-DBUILD_WSI_XCB_SUPPORT=OFF", "-DBUILD_WSI_XLIB_SUPPORT=OFF",
                                    "-DBUILD_WSI_WAYLAND_SUPPORT=OFF"],
    }[name]


def _cmake(name: str, src: Path, build_root: Path, deps: Path, log: Path, *, jobs: int, force: bool, echo,
           targets=(), install: bool = False) -> None:
    tree, out = src / name, build_root / ("VVL" if name == "Vulkan-ValidationLayers" else name)
    options = [*RELEASE, *_options(name, src, deps)]
    debian_source.configure_once(out, "workbench-cmake-options.json", [str(tree), *options],
                                 lambda: _run("build", ["cmake", "-S", tree, "-B", out, *options], log,
                                              what=f"cmake of {name}"), force=force, echo=echo)
    progress = debian_source.ninja_progress(echo)
    _run("build", ["nice", "ninja", "-C", out, "-j", str(jobs), *targets], log, on_line=progress,
         what=f"ninja of {name}")
    if install:
        _run("build", ["cmake", "--install", out], log, what=f"install of {name}")


def setup(source=None, root=None, *, git=None, force: bool = False, jobs: int | None = None, keep_build: bool = False,
          install_prerequisites: bool = True, progress: bool = True) -> dict:
    """Build the layer of :data:`TAG` into the cache. Steps, each logged in <cache>/logs/: 1 Debian build
    prerequisites, 2 sources, 3 headers and utility libraries, 4 SPIRV-Tools' libraries, 5 the layer, 6 strip and
    copy into layer/, stamp. A second call finds the stamp and returns at once (`force=True` rebuilds). Returns
    status(); ValidationLayerSetupError names a failed step."""
    root = cache_root(root)
    echo = build.echo_for(progress)
    if CACHE.already_built(root, force, echo):
        return status(root)
    source = source or os.environ.get("WORKBENCH_VVL_SOURCE") or None
    git = git or os.environ.get("WORKBENCH_VVL_GIT") or None
    started = time.monotonic()
    jobs = int(jobs or os.cpu_count() or 2)
    stamp_path = root / STAMP_NAME
    build_root, deps = root / "build", root / "deps"
    with debian_source.setup_session(root, steps=6, error=ValidationLayerSetupError, what="validation setup",
                                     echo=echo) as steps:
        echo(f"validation setup: the Khronos validation layer {VERSION} ({TAG}) into {root}")
        with steps.step("prerequisites", "Debian build prerequisites") as log:
            debian_source.install_prerequisites(APT_PACKAGES, log, install_prerequisites, echo,
                                                error=ValidationLayerSetupError)
        with steps.step("sources", "sources at the pinned commits") as log:
            src, found = _sources(root, source, git, log, echo)
        kw = dict(jobs=jobs, force=force, echo=echo)
        with steps.step("headers", "Vulkan-Headers, SPIRV-Headers, Vulkan-Utility-Libraries") as log:
            for name in ("Vulkan-Headers", "SPIRV-Headers", "Vulkan-Utility-Libraries"):
                _cmake(name, src, build_root, deps, log, install=True, **kw)
        with steps.step("spirv-tools", f"SPIRV-Tools: {' '.join(SPIRV_TOOLS_TARGETS)}") as log:
            _cmake("SPIRV-Tools", src, build_root, deps, log, targets=SPIRV_TOOLS_TARGETS, **kw)
            _spirv_tools_package(deps, src / "SPIRV-Tools", build_root / "SPIRV-Tools")
        with steps.step("layer", "the layer (target vvl)") as log:
            _cmake("Vulkan-ValidationLayers", src, build_root, deps, log, targets=("vvl",), **kw)
        with steps.step("install", "strip and copy into layer/, stamp") as log:
            build.install_products(build_root, root, LAYER_PRODUCTS.values(), log, error=ValidationLayerSetupError)
            manifest = json.loads((root / "layer" / "VkLayer_khronos_validation.json").read_text())
            layer = manifest.get("layer", {})
            if layer.get("name") != LAYER_NAME or not str(layer.get("api_version", "")).endswith(VERSION):
                raise ValidationLayerSetupError("install", f"expected the manifest of {LAYER_NAME} {VERSION}, found "
                                                           f"{layer.get('name')} {layer.get('api_version')}", log)
            settings = json.dumps(manifest)
            if RACE_SETTING not in settings:
                raise ValidationLayerSetupError("install", f"the built layer's manifest has no setting {RACE_SETTING}",
                                                log)
            stamp = {"recipe": RECIPE_ID, "built_at": time.strftime("%Y-%m-%d %H:%M:%S"), "tag": TAG,
                     "sources": found, "layer": {"name": layer.get("name"), "api_version": layer.get("api_version"),
                                                 "implementation_version": layer.get("implementation_version"),
                                                 "bytes": (root / "layer" / "libVkLayer_khronos_validation.so")
                                                 .stat().st_size},
                     "race_setting": RACE_SETTING, "jobs": jobs, "build_dir_bytes": debian_source.dir_bytes(build_root)}
            debian_source.write_stamp(stamp_path, stamp)
            if not keep_build:
                for folder in (build_root, deps, root / "src"):
                    shutil.rmtree(folder, ignore_errors=True)
        debian_source.finish_stamp(stamp, stamp_path, root, started=started, keep_build=keep_build,
                                   step_seconds=steps.times)
        echo(debian_source.done_message("validation setup", stamp, root))
    return status(root)


def _parser():
    parser, s = build.setup_parser(
        "python -m workbench.toolchain.validation",
        f"the Khronos validation layer {VERSION} ({TAG}; GPU-AV shared-memory race detection), built once and cached",
        setup_help=f"build once (about {SETUP_MINUTES} min on 2 cores); a no-op when already built",
        dir_help=f"cache folder (default $WORKBENCH_VVL_DIR or ~/.cache/workbench/validation/{TAG})",
        keep_help="keep src/, build/ and deps/")
    s.add_argument("--source", default=None, help="a folder holding the five trees by name "
                                                  "(default $WORKBENCH_VVL_SOURCE)")
    s.add_argument("--git", default=None, help="a pattern of git directories, {name} for the repository's name "
                                               "(default $WORKBENCH_VVL_GIT; else fetched from GitHub)")
    return parser


def main(argv=None) -> int:
    return build.run_main(_parser().parse_args(argv), cache=CACHE, error=ValidationLayerError,
                          prog="workbench.toolchain.validation",
                          setup=lambda args: setup(args.source, args.dir, git=args.git, **build.setup_options(args)))


if __name__ == "__main__":
    sys.exit(main())
