"""glslc, glslangValidator, spirv-val and spirv-dis for ET-VK's whole GLSL dialect, built once from Debian 13 source.

    python -m workbench.toolchain.glslang setup [--quiet]   # once: fetch, build, cache (./setup.sh main|test does it)
    python -m workbench.toolchain.glslang status            # JSON; exit status 1 while not set up

    from workbench.toolchain import glslang
    glslang.setup()                 # the same from Python; a second call returns at once
    glslang.tools()                 # {"glslc": Path, "glslangValidator": Path, "spirv-val": Path, "spirv-dis": Path}
    glslang.is_set_up()

Why
    ET-VK's int8 shaders ``#extension GL_EXT_integer_dot_product : require`` (also inside included ``.glslh``
    headers) and its cooperative-matrix shaders ``GL_KHR_cooperative_matrix``. Debian 12's glslc (shaderc 2023.2,
    glslang 12) knows neither, and its spirv-val (SPIRV-Tools 2023.1) does not know SPV_KHR_cooperative_matrix.
    Debian 13 (trixie) ships shaderc 2025.2, glslang 15.1.0+1.4.309.0 (its tarball is glslang 15.2.0, as
    ``glslangValidator --version`` says) and SPIRV-Tools 2025.1~rc1, which know both; their
    source packages build with Debian 12's cmake 3.25 and gcc 12. ``workbench.toolchain.shaders`` prefers these tools once
    they are set up (see its ``compiler_info()``).

How
    One CMake tree: shaderc's own top level with glslang, SPIRV-Tools and SPIRV-Headers as its third-party
    subprojects (shaderc's ``SHADERC_*_DIR`` options point at the four unpacked source packages), Release, static,
    no tests, no examples; ninja builds only the four executables (about 300 compile steps, not SPIRV-Tools'
    other tools). The executables are stripped and copied into ``bin/``; everything they need is linked in.

    Sources: ``apt-get update`` with a temporary apt configuration that lists only Debian 13's deb-src (the
    system's sources are not touched; apt checks the index against Debian's archive key), then every file
    ``apt-cache showsrc`` lists for the pinned upstream version is downloaded by apt's own ``apt-helper`` against
    the SHA-256 the signed index gives. The upstream tarball is unpacked and Debian's ``debian/patches/series`` is
    applied, except shaderc's two packaging patches that make it link Debian's *system* glslang and SPIRV-Tools
    libraries (:data:`SKIPPED_PATCHES`): here they are built in the same tree instead. ``.dsc`` files are not used
    (``dpkg-source -x`` would need them; some mirrors lack them), nor is spirv-headers' Debian tarball (only its
    upstream headers and CMake file are used).

Cache (``$WORKBENCH_GLSLANG_DIR``, default ``~/.cache/workbench/glslang/<versions>``)
    ``bin/`` the four tools; ``logs/`` one full log per set-up step; ``setup.json`` the stamp (versions, Debian
    revisions, checksums, tool ``--version`` lines, step times, sizes) -- a second :func:`setup` reads it and
    returns at once. While building also ``downloads/``, ``src/`` and ``build/``: deleted after a successful build
    unless ``keep_build=True``.
"""
from __future__ import annotations

import argparse
import email.utils
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import build, debian_source
from .debian_source import parse_showsrc

__all__ = [
    "PACKAGES", "TOOLS", "APT_PACKAGES", "CMAKE_OPTIONS", "BUILD_TARGETS", "SKIPPED_PATCHES",
    "GlslangError", "GlslangNotSetUpError", "GlslangSetupError",
    "cache_root", "tool_paths", "is_set_up", "status", "tools", "require", "setup", "main",
]

# Debian 13 (trixie) source packages, pinned by upstream version; the newest Debian revision of each is used.
PACKAGES = {
    "spirv-headers": "1.6.1+1.4.309.0",
    "spirv-tools": "2025.1~rc1",
    "glslang": "15.1.0+1.4.309.0",
    "shaderc": "2025.2",
}
VERSIONS_LABEL = "shaderc-2025.2_glslang-15.1.0_spirv-tools-2025.1"  # the default cache folder's name
APT_HELPER = debian_source.APT_HELPER

# Debian packages the build needs (all in Debian 12): the C++ toolchain, cmake >= 3.22.1 (SPIRV-Tools' and shaderc's
# minimum; bookworm has 3.25), ninja, python3 (the three projects generate sources with Python scripts), patch, xz
# (the Debian tarballs), binutils (strip).
APT_PACKAGES = ("g++", "cmake", "ninja-build", "python3", "patch", "xz-utils", "binutils")

# Debian packaging patches that do not apply to this build, with the reason.
SKIPPED_PATCHES = {
    "shaderc": {
        "use-system-thirdparties.patch": "links Debian's installed glslang/SPIRV-Tools libraries; here they are "
                                         "built in the same CMake tree",
        "rename-libshaderc.patch": "renames libshaderc_shared.so for Debian's library package; only glslc is built",
    },
}
# Debian tarballs used for their patches; spirv-headers' adds nothing the build reads.
PATCHED = ("spirv-tools", "glslang", "shaderc")
# The one edit of the workbench's own, as Debian's rules do it (their use-system-thirdparties.patch drops the same
# dependency): glslc's --version text (build-version.inc) is written from the Debian versions, instead of by shaderc's
# update_build_version.py, which without a git checkout reads the first *dated* entry of shaderc's CHANGES and would
# call shaderc 2025.2 "v2023.8".
SOURCE_EDITS = {"shaderc": (("glslc/CMakeLists.txt", "add_dependencies(glslc_exe build-version)",
                             "# add_dependencies(glslc_exe build-version)  # workbench: build-version.inc is written"),)}

CMAKE_OPTIONS = (
    "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF",
    "-DSHADERC_SKIP_TESTS=ON", "-DSHADERC_SKIP_EXAMPLES=ON", "-DSHADERC_SKIP_COPYRIGHT_CHECK=ON",
    "-DSHADERC_ENABLE_WERROR_COMPILE=OFF", "-DSPIRV_SKIP_TESTS=ON", "-DSPIRV_WERROR=OFF", "-DGLSLANG_TESTS=OFF",
    "-DENABLE_OPT=ON",
)
# ninja target -> (path in the build tree, name in bin/)
BUILD_TARGETS = {
    "glslc_exe": ("glslc/glslc", "glslc"),
    "glslang-standalone": ("third_party/glslang/StandAlone/glslang", "glslangValidator"),
    "spirv-val": ("third_party/spirv-tools/tools/spirv-val", "spirv-val"),
    "spirv-dis": ("third_party/spirv-tools/tools/spirv-dis", "spirv-dis"),
}
TOOLS = tuple(name for _, name in BUILD_TARGETS.values())
STAMP_NAME = debian_source.STAMP_NAME
_RECIPE = {"packages": PACKAGES, "cmake": CMAKE_OPTIONS, "targets": BUILD_TARGETS,
           "skipped": {k: sorted(v) for k, v in SKIPPED_PATCHES.items()}, "edits": SOURCE_EDITS, "layout": 1}
RECIPE_ID = debian_source.recipe_id(_RECIPE)

SETUP_COMMAND = "python -m workbench.toolchain.glslang setup"
_SPIRV_MAGIC = b"\x03\x02\x23\x07"


# ----------------------------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------------------------

class GlslangError(RuntimeError):
    """Base class of this module's errors."""


class GlslangNotSetUpError(GlslangError):
    """The tools are not in the cache: run `python -m workbench.toolchain.glslang setup`."""


class GlslangSetupError(GlslangError, debian_source.SetupError):
    """A set-up step failed; the message names the step, its full log and the log's last lines."""

    label = "glslang setup"


# ----------------------------------------------------------------------------------------------------------------
# Where things are
# ----------------------------------------------------------------------------------------------------------------

CACHE = build.ToolCache(label="glslang setup", env_var="WORKBENCH_GLSLANG_DIR",
                        default=Path.home() / ".cache" / "workbench" / "glslang" / VERSIONS_LABEL, recipe=RECIPE_ID,
                        products=lambda base: {name: base / "bin" / name for name in TOOLS})


# the cache (`root`, else $WORKBENCH_GLSLANG_DIR, else the default), its tools' paths, what it lacks, its status
cache_root, tool_paths, _missing, is_set_up, status = CACHE.functions()


def require(root=None) -> dict[str, Path]:
    """The tools' paths; GlslangNotSetUpError naming what is missing and how to build it when they are not there."""
    return CACHE.require(root, error=GlslangNotSetUpError, explain=lambda folder, missing: (
        f"the ET-VK shader compiler (glslc from shaderc {PACKAGES['shaderc']}, glslang "
        f"{PACKAGES['glslang'].split('+')[0]}, spirv-val/spirv-dis from SPIRV-Tools {PACKAGES['spirv-tools']}) is "
        f"not built in {folder} (missing: {', '.join(missing)}).\nBuild it once with `{SETUP_COMMAND}` "
        "(./setup.sh main|test does it): it fetches Debian 13's source packages and builds the four tools, "
        "about 6 minutes on 2 cores. $WORKBENCH_GLSLANG_DIR chooses the folder."))


tools = require  # the name callers read best: glslang.tools()["glslc"]


# ----------------------------------------------------------------------------------------------------------------
# Set-up helpers
# ----------------------------------------------------------------------------------------------------------------

def _run_logged(step: str, command: list, log_path: Path, **kwargs) -> None:
    """Run `command`, everything it prints going to `log_path`; GlslangSetupError with the log's tail on failure."""
    debian_source.run_logged(step, command, log_path, error=GlslangSetupError, **kwargs)


def _missing_apt_packages(packages=APT_PACKAGES) -> list[str]:
    return debian_source.missing_apt_packages(packages)


def _install_prerequisites(log_path: Path, install: bool, echo) -> None:
    for needed in ("apt-get", "apt-cache", "dpkg-query", "dpkg"):
        if shutil.which(needed) is None:
            raise GlslangSetupError("prerequisites", f"needs a Debian or Ubuntu system: {needed} not found")
    if not Path(APT_HELPER).is_file():
        raise GlslangSetupError("prerequisites", f"{APT_HELPER} not found (Debian package `apt`)")
    debian_source.install_prerequisites(APT_PACKAGES, log_path, install, echo, error=GlslangSetupError,
                                        missing=_missing_apt_packages)


def _fetch_sources(downloads: Path, log_path: Path, echo) -> dict:
    """Download the upstream (and, where patched, Debian) tarball of every package; returns
    {package: {"debian_version", "files": {kind: {"name", "sha256", "path"}}}}."""
    downloads.mkdir(parents=True, exist_ok=True)
    mirror = os.environ.get("WORKBENCH_GLSLANG_MIRROR", debian_source.DEBIAN_MIRROR).rstrip("/")
    found = {}
    with debian_source.AptSources("glslang", mirror, log_path, step="fetch sources", error=GlslangSetupError,
                                  echo=echo) as apt:
        for package, upstream in PACKAGES.items():
            entry = apt.newest(package, upstream)
            wanted = {"orig": ".orig.tar."}
            if package in PATCHED:
                wanted["debian"] = ".debian.tar."
            files = {}
            for kind, marker in wanted.items():
                match = [f for f in entry["files"] if marker in f[2]]
                if len(match) != 1:
                    raise GlslangSetupError("fetch sources", f"{package} {entry['version']}: expected one *{marker}* "
                                            f"file, the index lists {[f[2] for f in entry['files']]}", log_path)
                sha, _, name = match[0]
                target = apt.download(entry, match[0], downloads)
                files[kind] = {"name": name, "sha256": sha, "path": str(target)}
            found[package] = {"upstream": upstream, "debian_version": entry["version"], "files": files}
    return found


def _unpack(package: str, info: dict, src: Path, log_path: Path, echo) -> Path:
    """Upstream tarball into src/<package>, Debian's tarball over it, Debian's patches applied (bar the skipped)."""
    tree = src / package
    marker = tree / ".workbench-unpacked"
    wanted = json.dumps({"recipe": RECIPE_ID, "debian_version": info["debian_version"],
                         "sha256": sorted(f["sha256"] for f in info["files"].values())})
    if marker.is_file() and marker.read_text() == wanted:
        echo(f"    reusing {tree}")
        return tree
    debian_source.unpack_upstream(info["files"]["orig"]["path"], tree, log_path, error=GlslangSetupError)
    applied, skipped = [], []
    if "debian" in info["files"]:
        applied, skipped = debian_source.apply_debian_patches(
            tree, info["files"]["debian"]["path"], log_path, package=package,
            skip=SKIPPED_PATCHES.get(package, {}), error=GlslangSetupError)
    for relative, find, replace in SOURCE_EDITS.get(package, ()):
        path = tree / relative
        text = path.read_text()
        if text.count(find) != 1:
            raise GlslangSetupError("unpack", f"{path}: expected one line {find!r} to edit", log_path)
        path.write_text(text.replace(find, replace))
        with open(log_path, "a") as log:
            log.write(f"workbench edit of {path}: {find!r} -> {replace!r}\n")
    echo(f"    {package} {info['debian_version']}: {len(applied)} Debian patch(es) applied"
         + (f", skipped {', '.join(skipped)}" if skipped else ""))
    info["patches_applied"], info["patches_skipped"] = applied, skipped
    marker.write_text(wanted)
    return tree


def _source_date_epoch(shaderc_tree: Path) -> str | None:
    """The date of shaderc's Debian changelog entry: the version strings of the tools then do not carry the build
    day (their sources are no git checkouts, so their build scripts fall back to a date)."""
    try:
        for line in (shaderc_tree / "debian" / "changelog").read_text().splitlines():
            if line.startswith(" -- ") and "  " in line[4:]:
                return str(int(email.utils.parsedate_to_datetime(line[4:].split("  ", 1)[1]).timestamp()))
    except (OSError, ValueError, TypeError):
        pass
    return None


def _build_env(trees: dict) -> dict:
    # the version scripts run `git describe` in the sources: never another repo's
    env = debian_source.clean_env(GIT_DIR="/nonexistent", GIT_CEILING_DIRECTORIES=str(Path(trees["shaderc"]).parent))
    epoch = _source_date_epoch(trees["shaderc"])
    if epoch:
        env["SOURCE_DATE_EPOCH"] = epoch
    return env


def _version_line(path: Path) -> str:
    result = subprocess.run([str(path), "--version"], capture_output=True, text=True)
    return " | ".join(l.strip() for l in (result.stdout + result.stderr).splitlines()[:3] if l.strip())


# The probes the set-up compiles with the new glslc: the dot product from an included header, and a KHR cooperative
# matrix multiply-add (int8 A/B, int32 accumulator).
_PROBE_HEADER = """#extension GL_EXT_integer_dot_product : require
int probe_dot(int a, int b, int acc) { return dotPacked4x8AccSatEXT(a, b, acc); }
"""
_PROBE_DOT = """#version 450
#include "probe_dot.glslh"
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer B { int v[]; };
void main() { v[0] = probe_dot(v[1], v[2], v[3]); }
"""
_PROBE_COOPMAT = """#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer A { int8_t a[]; };
layout(set = 0, binding = 1) buffer C { int32_t c[]; };
void main() {
  coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA> ma;
  coopmat<int8_t, gl_ScopeSubgroup, 32, 16, gl_MatrixUseB> mb;
  coopmat<int32_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> mc = coopmat<int32_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0);
  coopMatLoad(ma, a, 0, 32, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(mb, a, 512, 16, gl_CooperativeMatrixLayoutRowMajor);
  mc = coopMatMulAdd(ma, mb, mc);
  coopMatStore(mc, c, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
"""
OP_SDOT_ACC_SAT = 4453
OP_COOPMAT_MULADD_KHR = 4459


def opcodes(code: bytes) -> list[int]:
    """The opcode of every instruction of a SPIR-V module, in order (walks the instruction stream)."""
    import array
    words = array.array("I")
    words.frombytes(code)
    if sys.byteorder != "little":
        words.byteswap()
    out, index = [], 5
    while index < len(words):
        count, op = words[index] >> 16, words[index] & 0xFFFF
        if count == 0:
            raise ValueError(f"malformed SPIR-V: instruction of word count 0 at word {index}")
        out.append(op)
        index += count
    return out


def _smoke_test(bin_dir: Path, log_path: Path) -> dict:
    """Compile both probes with the new glslc, validate them with the new spirv-val, check the key opcodes."""
    found = {}
    with tempfile.TemporaryDirectory(prefix="workbench-glslang-probe-") as tmp:
        work = Path(tmp)
        (work / "probe_dot.glslh").write_text(_PROBE_HEADER)
        for name, text, env, opcode in (("dot", _PROBE_DOT, "vulkan1.1", OP_SDOT_ACC_SAT),
                                        ("coopmat", _PROBE_COOPMAT, "vulkan1.3", OP_COOPMAT_MULADD_KHR)):
            source, output = work / f"{name}.comp", work / f"{name}.spv"
            source.write_text(text)
            _run_logged("install", [bin_dir / "glslc", "-fshader-stage=compute", f"--target-env={env}", "-O",
                                    "-I", work, source, "-o", output], log_path, what=f"glslc on the {name} probe")
            _run_logged("install", [bin_dir / "spirv-val", "--target-env", env, output], log_path,
                        what=f"spirv-val on the {name} probe")
            if opcode not in opcodes(output.read_bytes()):
                raise GlslangSetupError("install", f"the {name} probe's SPIR-V lacks opcode {opcode}", log_path)
            found[name] = f"opcode {opcode} present, spirv-val ({env}) passed"
    return found


# ----------------------------------------------------------------------------------------------------------------
# Set-up
# ----------------------------------------------------------------------------------------------------------------

def setup(root=None, *, force: bool = False, jobs: int | None = None, keep_build: bool = False,
          install_prerequisites: bool = True, progress: bool = True) -> dict:
    """Fetch Debian 13's spirv-headers, spirv-tools, glslang and shaderc sources; build glslc, glslangValidator,
    spirv-val and spirv-dis; cache them in <root>/bin.

    Steps (each logged in full to <root>/logs/): 1 Debian build prerequisites (apt-get install where missing),
    2 the source packages (temporary apt configuration, checksums from the signed index), 3 unpack + Debian
    patches, 4 cmake configure (one tree, shaderc on top), 5 ninja the four executables, 6 strip + copy into bin/,
    compile two probes (dot product from an included header, KHR cooperative matrix) and validate them, write the
    stamp, delete downloads/, src/, build/ (unless `keep_build`). A second call finds the stamp and returns at once
    (`force=True` rebuilds).

    Returns status(). Raises GlslangSetupError naming the failed step, its full log and its last lines.
    """
    root = cache_root(root)
    echo = build.echo_for(progress)
    if CACHE.already_built(root, force, echo):
        return status(root)
    started = time.monotonic()
    jobs = int(jobs or os.cpu_count() or 2)
    stamp_path = root / STAMP_NAME
    with debian_source.setup_session(root, steps=6, error=GlslangSetupError, what="glslang setup",
                                     echo=echo) as steps:
        echo(f"glslang setup: shaderc {PACKAGES['shaderc']} + glslang {PACKAGES['glslang']} + SPIRV-Tools "
             f"{PACKAGES['spirv-tools']} from Debian 13 source into {root}")

        with steps.step("prerequisites", "Debian build prerequisites") as log:
            _install_prerequisites(log, install_prerequisites, echo)
        with steps.step("sources", "source packages from Debian 13") as log:
            sources = _fetch_sources(root / "downloads", log, echo)
        with steps.step("unpack", "unpack, apply Debian's patches") as log:
            trees = {package: _unpack(package, info, root / "src", log, echo) for package, info in sources.items()}
        build_dir = root / "build"
        env = _build_env(trees)
        with steps.step("configure", "cmake configure (shaderc with glslang, SPIRV-Tools, SPIRV-Headers in-tree)") \
                as log:
            options = [*CMAKE_OPTIONS,
                       f"-DSHADERC_SPIRV_HEADERS_DIR={trees['spirv-headers']}",
                       f"-DSHADERC_SPIRV_TOOLS_DIR={trees['spirv-tools']}",
                       f"-DSHADERC_GLSLANG_DIR={trees['glslang']}"]
            debian_source.configure_once(
                build_dir, "workbench-cmake-options.json", [str(trees["shaderc"]), *options],
                lambda: _run_logged("configure", ["cmake", "-S", trees["shaderc"], "-B", build_dir, *options], log,
                                    env=env, what="cmake"),
                force=force, echo=echo)
            # glslc --version, in the form of Debian's glslc (see SOURCE_EDITS)
            (build_dir / "build-version.inc").write_text("".join(
                f'"{package} {sources[package]["debian_version"]}\\n"\n'
                for package in ("shaderc", "spirv-tools", "glslang")))
        with steps.step("build", f"ninja -j{jobs} {' '.join(BUILD_TARGETS)}") as log:
            _run_logged("build", ["ninja", "-C", build_dir, "-j", str(jobs), *BUILD_TARGETS], log, env=env,
                        on_line=debian_source.ninja_progress(echo), what="ninja")
        with steps.step("install", "strip into bin/, compile and validate two probes, stamp") as log:
            bin_dir = root / "bin"
            build.install_products(build_dir, root, [(built, f"bin/{name}") for built, name in BUILD_TARGETS.values()],
                                   log, error=GlslangSetupError)
            probes = _smoke_test(bin_dir, log)
            echo("    probes: " + "; ".join(f"{k}: {v}" for k, v in probes.items()))
            stamp = {
                "recipe": RECIPE_ID, "built_at": time.strftime("%Y-%m-%d %H:%M:%S"),
                "packages": {p: {k: v for k, v in info.items() if k != "files"} |
                             {"files": {kind: {"name": f["name"], "sha256": f["sha256"]}
                                        for kind, f in info["files"].items()}}
                             for p, info in sources.items()},
                "tools": {name: {"path": str(bin_dir / name), "bytes": (bin_dir / name).stat().st_size,
                                 "version": _version_line(bin_dir / name)} for name in TOOLS},
                "cmake_options": list(CMAKE_OPTIONS), "jobs": jobs, "probes": probes,
                "build_dir_bytes": debian_source.dir_bytes(build_dir),
                "source_bytes": debian_source.dir_bytes(root / "src"),
                "step_seconds": dict(steps.times),
            }
            debian_source.write_stamp(stamp_path, stamp)  # is_set_up() from here on
            if not keep_build:  # the static executables need none of these; a rebuild makes them again
                for folder in (build_dir, root / "src", root / "downloads"):
                    shutil.rmtree(folder, ignore_errors=True)
        debian_source.finish_stamp(stamp, stamp_path, root, started=started, keep_build=keep_build,
                                   step_seconds=steps.times)
        echo(debian_source.done_message("glslang setup", stamp, root))
    return status(root)


# ----------------------------------------------------------------------------------------------------------------
# Command line: python -m workbench.toolchain.glslang {setup,status}
# ----------------------------------------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    return build.setup_parser(
        "python -m workbench.toolchain.glslang",
        "glslc/glslangValidator/spirv-val for ET-VK's GLSL dialect, built once from Debian 13 source and cached",
        setup_help="fetch and build once (about 6 min on 2 cores); a no-op when already built",
        dir_help=f"cache folder (default $WORKBENCH_GLSLANG_DIR or ~/.cache/workbench/glslang/{VERSIONS_LABEL})",
        keep_help="keep downloads/, src/ and build/",
        status_help="is it built, where, which versions (JSON; exit status 1 when not built)")[0]


def main(argv=None) -> int:
    return build.run_main(_parser().parse_args(argv), cache=CACHE, error=GlslangError,
                          prog="workbench.toolchain.glslang",
                          setup=lambda args: setup(args.dir, **build.setup_options(args)))


if __name__ == "__main__":
    sys.exit(main())
