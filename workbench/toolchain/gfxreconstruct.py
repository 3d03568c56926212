"""GFXReconstruct's capture layer, gfxrecon-convert, -replay and -extract, built once from LunarG's sources and cached.

    python -m workbench.toolchain.gfxreconstruct setup [--source DIR] [--quiet]   # once (./setup.sh capture does it)
    python -m workbench.toolchain.gfxreconstruct status                           # JSON; exit status 1 while not built

    from workbench.toolchain import gfxreconstruct
    gfxreconstruct.setup(source=None)   # a second call returns at once
    gfxreconstruct.tools()              # {"gfxrecon-convert": Path, "gfxrecon-replay": Path, "gfxrecon-extract": Path,
                                        #  "layer_dir": Path}   (one-line GfxreconNotSetUpError while not built)

Why
    ``workbench.capture`` records every Vulkan call of any program through the layer ``VK_LAYER_LUNARG_gfxreconstruct``,
    reads the dispatches with ``gfxrecon-convert --include-binaries`` (SPIR-V, specialization and push-constant bytes)
    and gets every binding before and after each dispatch from ``gfxrecon-replay --dump-resources``. Debian 12's
    package (0.9.18) prints those bytes as pointers and has no resource dumps; LunarG's tag ``vulkan-sdk-1.4.357.0``
    (GFXReconstruct 1.0.5) has both. It is in no package registry, so it is built here from its sources.

Sources
    A checkout the user names (``source=``, ``--source`` or ``$WORKBENCH_GFXRECON_SOURCE``): GFXReconstruct at
    :data:`COMMIT` with the submodules of :data:`SUBMODULES` in place (``git clone --recurse-submodules`` gives that).
    Without one, each repository is fetched at its pinned commit from GitHub (``git fetch --depth 1``) into
    ``<cache>/src``. The workbench copies none of it into its own repository.

Cache (``$WORKBENCH_GFXRECON_DIR``, default ``~/.cache/workbench/gfxreconstruct/<tag>``)
    ``bin/`` the three tools; ``layer/`` the layer and its manifest (``VK_LAYER_PATH`` points here); ``logs/`` one log
    per step; ``setup.json`` the stamp (commits, options, tool versions, step times, sizes). ``build/`` (and a fetched
    ``src/``) are deleted after a successful build unless ``keep_build=True``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import build, debian_source

__all__ = [
    "TAG", "COMMIT", "VERSION", "SUBMODULES", "APT_PACKAGES", "CMAKE_OPTIONS", "BUILD_TARGETS", "TOOLS", "LAYER_NAME",
    "GfxreconError", "GfxreconNotSetUpError", "GfxreconSetupError",
    "cache_root", "tool_paths", "is_set_up", "status", "tools", "setup", "main",
]

REPOSITORY = "https://github.com/LunarG/gfxreconstruct.git"
TAG = "vulkan-sdk-1.4.357.0"
COMMIT = "b23931dc7b4ee326a570712f0412d07f6ff01391"
VERSION = "1.0.5"  # what the tag's tools report
# The submodules the build reads (OpenXR's are switched off), at the commits the tag pins.
SUBMODULES = {
    "external/Vulkan-Headers": ("https://github.com/KhronosGroup/Vulkan-Headers.git",
                                "e3b1eec08173d6b825cd3ac88c885a63b621504a"),
    "external/SPIRV-Headers": ("https://github.com/KhronosGroup/SPIRV-Headers.git",
                               "02c0394e57af6dfdda7f68973df6aa20fc3f5def"),
    "external/SPIRV-Reflect": ("https://github.com/KhronosGroup/SPIRV-Reflect.git",
                               "0dc7802f288b66e92b5ee62a4247eda17459e9a6"),
}
APT_PACKAGES = ("g++", "cmake", "ninja-build", "pkg-config", "git", "binutils", "liblz4-dev", "libzstd-dev",
                "zlib1g-dev", "libx11-xcb-dev", "libxcb-keysyms1-dev", "libwayland-dev", "libxrandr-dev",
                "libx11-dev", "libxcb1-dev")
CMAKE_OPTIONS = ("-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DGFXRECON_ENABLE_OPENXR=OFF",
                 "-DGFXRECON_TOCPP_SUPPORT=OFF", "-DBUILD_WERROR=OFF")
LAYER_NAME = "VK_LAYER_LUNARG_gfxreconstruct"
# ninja target -> (path in the build tree, where it goes in the cache)
BUILD_TARGETS = {
    "gfxrecon-replay": ("tools/replay/gfxrecon-replay", "bin/gfxrecon-replay"),
    "gfxrecon-convert": ("tools/convert/gfxrecon-convert", "bin/gfxrecon-convert"),
    "gfxrecon-extract": ("tools/extract/gfxrecon-extract", "bin/gfxrecon-extract"),
    "VkLayer_gfxreconstruct": ("layer/libVkLayer_gfxreconstruct.so", "layer/libVkLayer_gfxreconstruct.so"),
    "VkLayer_gfxreconstruct_json": ("layer/VkLayer_gfxreconstruct.json", "layer/VkLayer_gfxreconstruct.json"),
}
TOOLS = ("gfxrecon-convert", "gfxrecon-replay", "gfxrecon-extract")
STAMP_NAME = debian_source.STAMP_NAME
_RECIPE = {"commit": COMMIT, "submodules": SUBMODULES, "cmake": CMAKE_OPTIONS, "targets": BUILD_TARGETS, "layout": 1}
RECIPE_ID = debian_source.recipe_id(_RECIPE)
SETUP_COMMAND = "./setup.sh capture"


class GfxreconError(RuntimeError):
    """Base class of this module's errors."""


class GfxreconNotSetUpError(GfxreconError):
    """The tools are not in the cache."""


class GfxreconSetupError(GfxreconError, debian_source.SetupError):
    """A set-up step failed; the message names the step, its full log and the log's last lines."""

    label = "gfxreconstruct setup"


# ----------------------------------------------------------------------------------------------------------------
# Where things are
# ----------------------------------------------------------------------------------------------------------------

def _products(base: Path) -> dict[str, Path]:
    return {name: base / dest for name, (_, dest) in BUILD_TARGETS.items()}


CACHE = build.ToolCache(label="gfxreconstruct setup", env_var="WORKBENCH_GFXRECON_DIR",
                        default=Path.home() / ".cache" / "workbench" / "gfxreconstruct" / TAG, recipe=RECIPE_ID,
                        products=_products,
                        tools=lambda base: {**{name: base / "bin" / name for name in TOOLS},
                                            "layer_dir": base / "layer"})


# the cache (`root`, else $WORKBENCH_GFXRECON_DIR, else the default), its tools' paths, what it lacks, its status
cache_root, tool_paths, _missing, is_set_up, status = CACHE.functions()


def tools(root=None) -> dict[str, Path]:
    """The tools' paths and the layer folder; GfxreconNotSetUpError (one line: what is missing, how to build it)."""
    return CACHE.require(root, error=GfxreconNotSetUpError, explain=lambda folder, missing: (
        f"GFXReconstruct {VERSION} ({TAG}) is not built in {folder} (missing {missing[0]}"
        f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''}); build it once with `{SETUP_COMMAND}` "
        "(fetches it from GitHub, or takes a checkout named by $WORKBENCH_GFXRECON_SOURCE; about 8 min on 2 cores)"))


# ----------------------------------------------------------------------------------------------------------------
# Sources
# ----------------------------------------------------------------------------------------------------------------

def _git_head(tree: Path) -> str | None:
    result = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 and (tree / ".git").exists() else None


def _check_source(source: Path, log_path: Path) -> dict:
    """{"path", "commit", "submodules": {path: commit}} of a checkout; GfxreconSetupError saying what is wrong."""
    cmake = source / "CMakeLists.txt"
    if not (cmake.is_file() and "project(GFXReconstruct" in cmake.read_text(errors="replace")):
        raise GfxreconSetupError("sources", f"expected a GFXReconstruct checkout ({TAG}) in {source}, found no "
                                            "CMakeLists.txt with project(GFXReconstruct)", log_path)
    found = {"path": str(source), "commit": _git_head(source), "submodules": {}}
    if found["commit"] not in (None, COMMIT):
        raise GfxreconSetupError("sources", f"expected {source} at {TAG} ({COMMIT[:10]}), found commit "
                                            f"{found['commit'][:10]}: the capture reader is written against that "
                                            "version's convert and dump formats", log_path)
    for path, (_, commit) in SUBMODULES.items():
        sub = source / path
        if not (sub / "CMakeLists.txt").is_file():
            raise GfxreconSetupError("sources", f"expected the submodule {path} (commit {commit[:10]}) in {source}, "
                                                "found it empty: `git submodule update --init` it", log_path)
        head = _git_head(sub)
        if head not in (None, commit):
            raise GfxreconSetupError("sources", f"expected {path} at {commit[:10]}, found {head[:10]}", log_path)
        found["submodules"][path] = head or "not a git checkout"
    return found


def _fetch_at(url: str, commit: str, tree: Path, log_path: Path) -> None:
    """`tree` checked out at `commit` of `url`, fetched shallow (GitHub serves a commit by its hash)."""
    if _git_head(tree) == commit:
        return
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    for command in (["git", "init", "-q"], ["git", "fetch", "-q", "--depth", "1", url, commit],
                    ["git", "-c", "advice.detachedHead=false", "checkout", "-q", "FETCH_HEAD"]):
        debian_source.run_logged("sources", command, log_path, error=GfxreconSetupError, cwd=tree,
                                 what=f"{' '.join(command[:2])} of {url}")


def _fetch_source(src: Path, log_path: Path, echo) -> Path:
    tree = src / "gfxreconstruct"
    echo(f"    git fetch {REPOSITORY} {COMMIT[:10]} and {len(SUBMODULES)} submodules into {tree}")
    _fetch_at(REPOSITORY, COMMIT, tree, log_path)
    for path, (url, commit) in SUBMODULES.items():
        _fetch_at(url, commit, tree / path, log_path)
    return tree


# ----------------------------------------------------------------------------------------------------------------
# Set-up
# ----------------------------------------------------------------------------------------------------------------

def _version_line(tool: Path) -> str:
    result = subprocess.run([str(tool), "--version"], capture_output=True, text=True, timeout=30)
    lines = [l.strip() for l in (result.stdout + result.stderr).splitlines() if "GFXReconstruct Version" in l]
    return lines[0] if lines else f"exit status {result.returncode}"


def setup(source=None, root=None, *, force: bool = False, jobs: int | None = None, keep_build: bool = False,
          install_prerequisites: bool = True, progress: bool = True) -> dict:
    """Build the capture layer, gfxrecon-convert, -replay and -extract of :data:`TAG` into the cache.

    `source`: a checkout (else $WORKBENCH_GFXRECON_SOURCE, else fetched from GitHub into <cache>/src). Steps, each
    logged in <cache>/logs/: 1 Debian build prerequisites, 2 sources (checked against the pinned commits),
    3 cmake configure, 4 ninja (under `nice`), 5 strip and copy into bin/ and layer/, stamp. A second call finds
    the stamp and returns at once (`force=True` rebuilds). Returns status(); GfxreconSetupError names a failed step.
    """
    root = cache_root(root)
    echo = build.echo_for(progress)
    if CACHE.already_built(root, force, echo):
        return status(root)
    source = source or os.environ.get("WORKBENCH_GFXRECON_SOURCE") or None
    started = time.monotonic()
    jobs = int(jobs or os.cpu_count() or 2)
    stamp_path = root / STAMP_NAME
    with debian_source.setup_session(root, steps=5, error=GfxreconSetupError, what="gfxreconstruct setup",
                                     echo=echo) as steps:
        echo(f"gfxreconstruct setup: GFXReconstruct {VERSION} ({TAG}) into {root}")
        with steps.step("prerequisites", "Debian build prerequisites") as log:
            debian_source.install_prerequisites(APT_PACKAGES, log, install_prerequisites, echo,
                                                error=GfxreconSetupError)
        with steps.step("sources", "sources at the pinned commits") as log:
            if source is None:
                tree = _fetch_source(root / "src", log, echo)
            else:
                tree = Path(source).expanduser().resolve()
                echo(f"    using the checkout {tree}")
            found = _check_source(tree, log)
        build_dir = root / "build"
        with steps.step("configure", "cmake configure") as log:
            debian_source.configure_once(
                build_dir, "workbench-cmake-options.json", [str(tree), *CMAKE_OPTIONS],
                lambda: debian_source.run_logged("configure", ["cmake", "-S", tree, "-B", build_dir, *CMAKE_OPTIONS],
                                                 log, error=GfxreconSetupError, env=debian_source.clean_env(),
                                                 what="cmake"),
                force=force, echo=echo)
        with steps.step("build", f"nice ninja -j{jobs} {' '.join(BUILD_TARGETS)}") as log:
            progress_lines = debian_source.ninja_progress(echo)
            debian_source.run_logged("build", ["nice", "ninja", "-C", build_dir, "-j", str(jobs), *BUILD_TARGETS],
                                     log, error=GfxreconSetupError, env=debian_source.clean_env(),
                                     on_line=progress_lines, what="ninja")
        with steps.step("install", "strip and copy into bin/ and layer/, stamp") as log:
            build.install_products(build_dir, root, BUILD_TARGETS.values(), log, error=GfxreconSetupError)
            manifest = json.loads((root / "layer" / "VkLayer_gfxreconstruct.json").read_text())
            if manifest.get("layer", {}).get("name") != LAYER_NAME:
                raise GfxreconSetupError("install", f"the layer manifest names {manifest.get('layer')}, expected "
                                                    f"{LAYER_NAME}", log)
            stamp = {
                "recipe": RECIPE_ID, "built_at": time.strftime("%Y-%m-%d %H:%M:%S"), "tag": TAG, "source": found,
                "tools": {name: {"bytes": (root / "bin" / name).stat().st_size,
                                 "version": _version_line(root / "bin" / name)} for name in TOOLS},
                "layer": manifest["layer"].get("description"), "cmake_options": list(CMAKE_OPTIONS), "jobs": jobs,
                "build_dir_bytes": debian_source.dir_bytes(build_dir),
            }
            debian_source.write_stamp(stamp_path, stamp)
            if not keep_build:
                shutil.rmtree(build_dir, ignore_errors=True)
                shutil.rmtree(root / "src", ignore_errors=True)
        debian_source.finish_stamp(stamp, stamp_path, root, started=started, keep_build=keep_build,
                                   step_seconds=steps.times)
        echo(debian_source.done_message("gfxreconstruct setup", stamp, root))
    return status(root)


def _parser() -> argparse.ArgumentParser:
    parser, s = build.setup_parser(
        "python -m workbench.toolchain.gfxreconstruct",
        f"GFXReconstruct {VERSION} ({TAG}): capture layer, convert, replay, extract, built once and cached",
        setup_help="build once (about 8 min on 2 cores); a no-op when already built",
        dir_help=f"cache folder (default $WORKBENCH_GFXRECON_DIR or ~/.cache/workbench/gfxreconstruct/{TAG})",
        keep_help="keep build/ (and a fetched src/)")
    s.add_argument("--source", default=None, help="a GFXReconstruct checkout at the tag, submodules included "
                                                  "(default $WORKBENCH_GFXRECON_SOURCE, else fetched from GitHub)")
    return parser


def main(argv=None) -> int:
    return build.run_main(_parser().parse_args(argv), cache=CACHE, error=GfxreconError,
                          prog="workbench.toolchain.gfxreconstruct",
                          setup=lambda args: setup(args.source, args.dir, **build.setup_options(args)))


if __name__ == "__main__":
    sys.exit(main())
