"""The newer Mesa: Turnip and PanVK of a Mesa newer than Debian 13's 25.0.7, built once from a source the user
names, for the GPUs 25.0.7 does not know: Adreno 8xx (a810, a830 = Snapdragon 8 Elite, a840 = 8 Elite Gen 5) and
the 5th-gen Mali (v12 G720, v13 G725 / Immortalis-G925, v14 G1).

    from workbench.vendors import mesa, mesa_newer
    mesa_newer.setup("/path/to/mesa")            # a checkout, a release tarball or a git directory[@commit]
    mesa.stats(spirv, gpu="a830")                # the GPU's `build` ("newer") picks this build's driver
    mesa.is_set_up(build="newer"), mesa.status(build="newer")

Everything else (the GPU table, the worker, the statistics cache, `summary`, the occupancy check) is
``workbench.vendors.mesa``'s; this module holds only the recipe, which differs from the stable one in four ways:

* **The source** is the user's (`workbench compilers setup --mesa SOURCE`, or $WORKBENCH_MESA_SOURCE): Debian's
  newer Mesa source packages (sid 26.1.6, experimental 26.2.6) are listed in its index but their files are not
  served where this was written, and a Mesa checkout is too large for the tools at hand; the recipe was tested on
  Mesa 26.2.0-rc1 (:data:`TESTED`). The tree is copied (or unpacked) into the cache: the checkout is never touched.
* **One edit of the source** (:data:`SOURCE_EDITS`): the freedreno no-op shim's chip table gets Adreno 840
  (chip id 0x44050a31, which freedreno_devices.py names "Adreno (TM) 840"); the shim of 26.2 lists 810 and 830
  only, so FD_GPU_ID=840 would abort. The edit is checked (exactly one anchor) and logged.
* **PanVK needs Mesa's OpenCL C compiler** (mesa_clc) since 25.x: its precompiled kernels (src/panfrost/libpan) are
  built at build time, so the build needs LLVM/Clang >= 15, libclc and LLVMSPIRVLib (Debian 12: the *-15-dev
  packages of :data:`APT_PACKAGES`) and SPIRV-Tools >= 2024.1 (Debian 12 has 2023.1): Debian 13's spirv-tools and
  spirv-headers are fetched and built static into deps/ first, as the stable recipe does libdrm. LLVM is used only
  to build mesa_clc; the drivers themselves compile shaders with ir3 and the valhall backend as before.
* **glslang >= 12.2** (meson.build requires it for Turnip's internal shaders; Debian 12 has 11): the workbench's
  own glslang build (``workbench.toolchain.glslang``) is put first on PATH.

RADV is not part of it (the stable build has RDNA2/3; Mesa 26's RADV needs libdrm_amdgpu >= 2.4.133).
``drivers="turnip"`` (``--mesa-drivers turnip``) builds Turnip alone: no LLVM, no SPIRV-Tools, about 700 ninja steps
against about 1,230 + SPIRV-Tools; the stamp's recipe says which drivers a cache holds (`mesa.built_drivers`).

Cache: $WORKBENCH_MESA_NEWER_DIR, else ~/.cache/workbench/mesa/mesa-newer: lib/ (two drivers, two shims, two ICD
manifests), logs/, setup.json (the Mesa version, where the source came from, what it knows, the step times);
while building also venv/, src/, deps/, downloads/, build/, build-spirv-tools/ (deleted after unless keep_build).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from ..toolchain import debian_source
from . import mesa
from . import mesa_newer_recipe as _recipe
from .mesa_newer_recipe import (DRIVER_SETS, DRIVERS_BUILT, LLVM, MESON_OPTIONS, RECIPE_ID, SOURCE_EDITS,
                                SOURCE_ENV, SPIRV_CMAKE_OPTIONS, SPIRV_PACKAGES, SPIRV_TARGETS, TARGETS, TESTED,
                                meson_options, needs_clc, recipe_id, targets)

__all__ = ["TESTED", "SOURCE_ENV", "APT_PACKAGES", "MESON_OPTIONS", "SOURCE_EDITS", "SPIRV_PACKAGES", "RECIPE_ID",
           "BUILD", "GPUS", "SMOKE_GPUS", "resolve_source", "knows", "check_drivers", "setup"]

APT_PACKAGES = mesa.APT_PACKAGES + _recipe.APT_EXTRA
BUILD = mesa.build_spec("newer")
GPUS = tuple(mesa.gpu_names(build="newer"))
SMOKE_GPUS = ("a830", "mali-g720")  # one per driver: each must report its occupancy figure


class MesaNewerSetupError(mesa.MesaSetupError):
    label = "compilers setup --mesa"


# ----------------------------------------------------------------------------------------------------------------
# The source
# ----------------------------------------------------------------------------------------------------------------

_TARBALL = re.compile(r"\.(tar\.(xz|gz|bz2|zst)|tgz)$")


def _expected(source) -> ValueError:
    return ValueError(f"expected a Mesa source: a checkout folder (with meson.build and VERSION), a release tarball "
                      f"(.tar.xz / .tar.gz) or a git directory[@commit]; got {str(source)!r}")


def resolve_source(source) -> dict:
    """What `source` is: {"kind": "tree" | "tarball" | "git", "path", "commit"}; ValueError (one line, naming what
    was expected and what was given) when it is none of them."""
    if source is None or not str(source).strip():
        raise _expected(source)
    text = str(source).strip()
    path, commit = Path(text).expanduser(), None
    if not path.exists() and "@" in text:
        base, commit = text.rsplit("@", 1)
        path = Path(base).expanduser()
    if path.is_dir() and (path / "meson.build").is_file() and (path / "VERSION").is_file() and commit is None:
        return {"kind": "tree", "path": str(path.resolve()), "commit": None}
    if path.is_file() and _TARBALL.search(path.name) and commit is None:
        return {"kind": "tarball", "path": str(path.resolve()), "commit": None}
    git_dir = path / ".git" if (path / ".git").is_dir() else path
    if (git_dir / "objects").is_dir() and (git_dir / "HEAD").is_file():
        rev = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "--verify", "-q",
                              f"{commit or 'HEAD'}^{{commit}}"], capture_output=True, text=True)
        if rev.returncode != 0:
            raise ValueError(f"expected a commit of the git directory {git_dir}; got {commit or 'HEAD'!r}")
        return {"kind": "git", "path": str(git_dir.resolve()), "commit": rev.stdout.strip()}
    raise _expected(source)


def _extract_git(git_dir: str, commit: str, tree: Path) -> list[str]:
    """The files of `commit` into `tree`; returns the paths whose blobs the directory lacks (a partial mirror)."""
    listing = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "-z", commit], capture_output=True,
                             check=True).stdout
    entries = []
    for line in listing.split(b"\0"):
        if line:
            meta, name = line.split(b"\t", 1)
            mode, kind, sha = meta.split()
            if kind == b"blob":
                entries.append((mode, sha, name.decode()))
    missing = []
    with subprocess.Popen(["git", "--git-dir", git_dir, "cat-file", "--batch"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE) as cat:
        for mode, sha, name in entries:
            cat.stdin.write(sha + b"\n")
            cat.stdin.flush()
            header = cat.stdout.readline().split()
            if header[-1] == b"missing":
                missing.append(name)
                continue
            data = cat.stdout.read(int(header[2]))
            cat.stdout.read(1)
            dest = tree / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            if mode == b"120000":
                os.symlink(data.decode(), dest)
            else:
                dest.write_bytes(data)
                if mode == b"100755":
                    dest.chmod(0o755)
        cat.stdin.close()
    return missing


def _bring_source(found: dict, src: Path, log_path: Path, echo) -> tuple[Path, dict]:
    """The source into src/mesa (replacing what was there), edited; (tree, what the stamp says about it)."""
    tree = src / "mesa"
    marker = tree / ".workbench-source.json"
    wanted = dict(found, edits=debian_source.recipe_id({"edits": SOURCE_EDITS}))
    if marker.is_file():
        known = json.loads(marker.read_text())
        if {k: known.get(k) for k in wanted} == wanted:
            echo(f"    reusing {tree}")
            return tree, known
    if tree.is_symlink():
        tree.unlink()
    shutil.rmtree(tree, ignore_errors=True)
    src.mkdir(parents=True, exist_ok=True)
    missing: list[str] = []
    if found["kind"] == "tree":
        echo(f"    copying {found['path']}")
        shutil.copytree(found["path"], tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    elif found["kind"] == "tarball":
        echo(f"    unpacking {found['path']}")
        debian_source.unpack_upstream(Path(found["path"]), tree, log_path, error=MesaNewerSetupError, step="source")
    else:
        echo(f"    extracting {found['commit'][:12]} of {found['path']}")
        tree.mkdir(parents=True)
        missing = _extract_git(found["path"], found["commit"], tree)
    if not (tree / "meson.build").is_file() or not (tree / "VERSION").is_file():
        raise MesaNewerSetupError("source", f"{found['path']} holds no Mesa tree (meson.build and VERSION)", log_path)
    with open(log_path, "a") as log:
        if missing:
            log.write(f"blobs the git directory lacks (left out): {missing}\n")
        for relative, anchor, replacement in SOURCE_EDITS:
            path = tree / relative
            text = path.read_text() if path.is_file() else ""
            if replacement in text:
                continue
            if text.count(anchor) != 1:
                raise MesaNewerSetupError("source", f"{path}: expected one {anchor.splitlines()[0].strip()!r} to "
                                                    f"edit, found {text.count(anchor)}", log_path)
            path.write_text(text.replace(anchor, replacement))
            log.write(f"workbench edit of {path}: added {replacement[len(anchor):]!r}\n")
    info = dict(wanted, version=(tree / "VERSION").read_text().strip(), missing_files=missing, knows=knows(tree))
    marker.write_text(json.dumps(info))
    return tree, info


def knows(tree) -> dict:
    """Which of the newer build's GPUs a Mesa tree knows: {gpu: True | "why not"}. Adreno: a "Adreno (TM) NNN"
    entry in src/freedreno/common/freedreno_devices.py and (after SOURCE_EDITS) in the shim's table; Mali: the
    arch among PanVK's per-arch builds (the foreach of src/panfrost/vulkan/meson.build)."""
    tree = Path(tree)
    out = {}
    devices = (tree / "src/freedreno/common/freedreno_devices.py")
    devices = devices.read_text() if devices.is_file() else ""
    shim = tree / "src/freedreno/drm-shim/freedreno_noop.c"
    shim = shim.read_text() if shim.is_file() else ""
    panvk = tree / "src/panfrost/vulkan/meson.build"
    m = re.search(r"foreach arch : \[([\d,\s]+)\]", panvk.read_text() if panvk.is_file() else "")
    archs = {int(a) for a in m.group(1).split(",") if a.strip()} if m else set()
    for name in GPUS:
        g = mesa.GPUS[name]
        if g.vendor == "adreno":
            number = name[1:]
            if f'"Adreno (TM) {number}"' not in devices:
                out[name] = f"freedreno_devices.py has no Adreno {number}"
            elif not re.search(rf"\.gpu_id = {number},", shim):
                out[name] = f"the freedreno no-op shim has no gpu_id {number}"
            else:
                out[name] = True
        else:
            arch = int(re.search(r"v(\d+)", g.arch).group(1))
            out[name] = True if arch in archs else f"PanVK builds archs {sorted(archs)}, not v{arch}"
    return out


# ----------------------------------------------------------------------------------------------------------------
# Set-up
# ----------------------------------------------------------------------------------------------------------------

def _spirv_tools(root: Path, deps: Path, env: dict, ninja: str, jobs: int, log_path: Path, echo) -> None:
    """Debian 13's spirv-headers + spirv-tools sources, SPIRV-Tools built static into deps/ (with its .pc files)."""
    if all((deps / "lib" / name).is_file() for name in ("pkgconfig/SPIRV-Tools.pc", "libSPIRV-Tools.a",
                                                         "libSPIRV-Tools-opt.a", "libSPIRV-Tools-link.a")):
        echo(f"    reusing {deps}")
        return
    trees = {}
    with debian_source.AptSources("mesa-newer", debian_source.DEBIAN_MIRROR, log_path, step="spirv-tools",
                                  error=MesaNewerSetupError, echo=echo) as apt:
        for package, upstream in SPIRV_PACKAGES.items():
            entry = apt.newest(package, upstream)
            orig = [f for f in entry["files"] if ".orig.tar." in f[2]]
            if len(orig) != 1:
                raise MesaNewerSetupError("spirv-tools", f"{package}: expected one .orig.tar file, the index lists "
                                                         f"{[f[2] for f in entry['files']]}", log_path)
            archive = apt.download(entry, orig[0], root / "downloads")
            trees[package] = debian_source.unpack_upstream(archive, root / "src" / package, log_path,
                                                           error=MesaNewerSetupError, step="spirv-tools")
    build = root / "build-spirv-tools"
    shutil.rmtree(build, ignore_errors=True)
    mesa._run_logged("spirv-tools", ["cmake", "-G", "Ninja", "-S", trees["spirv-tools"], "-B", build,
                                     f"-DCMAKE_INSTALL_PREFIX={deps}",
                                     f"-DSPIRV-Headers_SOURCE_DIR={trees['spirv-headers']}", *SPIRV_CMAKE_OPTIONS],
                     log_path, env=env, what="cmake SPIRV-Tools")
    mesa._run_logged("spirv-tools", [ninja, "-C", build, "-j", str(jobs), *SPIRV_TARGETS], log_path, env=env,
                     what="ninja SPIRV-Tools")
    # installed by hand: `install` would also build the shared library, reduce, lint and diff (twice the time)
    (deps / "lib" / "pkgconfig").mkdir(parents=True, exist_ok=True)
    shutil.copytree(trees["spirv-tools"] / "include" / "spirv-tools", deps / "include" / "spirv-tools",
                    dirs_exist_ok=True)
    for library in ("source/libSPIRV-Tools.a", "source/opt/libSPIRV-Tools-opt.a", "source/link/libSPIRV-Tools-link.a"):
        shutil.copy2(build / library, deps / "lib" / Path(library).name)
    shutil.copy2(build / "SPIRV-Tools.pc", deps / "lib" / "pkgconfig" / "SPIRV-Tools.pc")


def _build_env(venv_bin: Path, deps: Path, glslang_bin: Path) -> dict:
    # pyenv's shims (python3.13, ...) answer meson's probe for newer Pythons and then fail: left off PATH
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and ".pyenv/shims" not in p]
    return debian_source.clean_env(PATH=os.pathsep.join([str(venv_bin), str(glslang_bin), *path]),
                                   VIRTUAL_ENV=str(venv_bin.parent), PKG_CONFIG_PATH=str(deps / "lib" / "pkgconfig"))


def check_drivers(drivers) -> tuple:
    """("turnip",) or ("turnip", "panvk") from a tuple or "turnip,panvk"; ValueError naming both otherwise."""
    items = tuple(d.strip() for d in drivers.split(",") if d.strip()) if isinstance(drivers, str) else \
        tuple(drivers or ())
    for known in DRIVER_SETS:
        if set(items) == set(known) and len(items) == len(known):
            return known
    raise ValueError(f"expected the drivers turnip or turnip,panvk; got {drivers!r}")


def setup(source=None, root=None, *, drivers=DRIVERS_BUILT, force: bool = False, jobs: int | None = None,
          keep_build: bool = False, install_prerequisites: bool = True, progress: bool = True,
          smoke_test: bool = True) -> dict:
    """Build Turnip + PanVK (or, drivers="turnip", Turnip alone: no LLVM, about half the steps) + their no-op
    shims of the Mesa in `source` (default $WORKBENCH_MESA_SOURCE; see `resolve_source`) into the newer build's
    cache, once.

    Steps (each logged to <root>/logs/): 1 Debian prerequisites (LLVM 15, Clang, libclc, LLVMSPIRVLib, cmake, ...),
    2 the private venv (meson, mako, pyyaml, packaging), 3 the source copied / unpacked / extracted into src/mesa
    and edited (SOURCE_EDITS), 4 SPIRV-Tools (Debian 13's) static into deps/, 5 meson configure, 6 ninja, 7 install
    into lib/, a test compile on a fake a830 and Mali-G720, the stamp. A second call with a complete cache returns
    at once (force=True rebuilds). Returns `mesa.status(build="newer")`; MesaNewerSetupError names the failed step.
    """
    source = source if source is not None else os.environ.get(SOURCE_ENV)
    found = resolve_source(source)
    drivers = check_drivers(drivers)
    recipe, options, build_targets = recipe_id(drivers), list(meson_options(drivers)), targets(drivers)
    root = mesa.cache_root(root, "newer")
    echo = (lambda text: print(text, flush=True)) if progress else (lambda text: None)
    stamp = mesa._read_stamp(root, "newer") or {}
    if not force and mesa.is_set_up(root, "newer") and stamp.get("recipe") == recipe:
        stamp = mesa._read_stamp(root, "newer")
        echo(f"compilers setup --mesa: already set up in {root} (Mesa {stamp.get('mesa')}, built "
             f"{stamp.get('built_at')}); force=True rebuilds")
        return mesa.status(root, "newer")
    from ..toolchain import glslang
    started = time.monotonic()
    jobs = jobs or os.cpu_count() or 2
    stamp_path = mesa.build_files(root, "newer")["stamp"]
    with debian_source.setup_session(root, steps=7, error=MesaNewerSetupError, what="`workbench compilers setup "
                                     "--mesa`", echo=echo) as steps:
        titles = " + ".join(mesa.DRIVER_TITLES[d] for d in drivers)
        echo(f"compilers setup --mesa: {titles} + no-op DRM shims of {found['path']} into {root}")
        with steps.step("prerequisites", "Debian build prerequisites" + (" (LLVM 15, Clang, libclc, LLVMSPIRVLib)"
                                                                         if needs_clc(drivers) else "")) as log:
            debian_source.install_prerequisites(APT_PACKAGES if needs_clc(drivers) else mesa.APT_PACKAGES, log,
                                                install_prerequisites, echo, error=MesaNewerSetupError)
        with steps.step("venv", "private Python venv: " + " ".join(mesa.PIP_PACKAGES)) as log:
            venv_bin = mesa._make_venv(root / "venv", log)
        with steps.step("source", f"the Mesa source ({found['kind']}) into src/mesa, edited") as log:
            tree, info = _bring_source(found, root / "src", log, echo)
            echo(f"    Mesa {info['version']}; knows: " + ", ".join(
                f"{g} {'yes' if ok is True else 'no (' + ok + ')'}" for g, ok in info["knows"].items()))
        deps = root / "deps"
        glslang_bin = Path(glslang.require()["glslangValidator"]).parent
        env = _build_env(venv_bin, deps, glslang_bin)
        ninja = shutil.which("ninja", path=env["PATH"]) or "ninja"
        with steps.step("spirv-tools", f"SPIRV-Tools {SPIRV_PACKAGES['spirv-tools']} (Debian 13), static, into "
                                       "deps/" if needs_clc(drivers) else "SPIRV-Tools: not needed") as log:
            if needs_clc(drivers):
                _spirv_tools(root, deps, env, ninja, jobs, log, echo)
        build = root / "build"
        if needs_clc(drivers):
            native = root / "llvm-native.ini"
            native.write_text(f"[binaries]\nllvm-config = '/usr/bin/llvm-config-{LLVM}'\n")
            options.append(f"--native-file={native}")
        with steps.step("configure", f"meson configure ({titles} + drm-shim"
                                     + ("; LLVM for mesa_clc only)" if needs_clc(drivers) else ")")) as log:
            debian_source.configure_once(
                build, "workbench-meson-options.json", [str(tree), str(deps), *options],
                lambda: mesa._run_logged("configure", [str(venv_bin / "meson"), "setup", str(build), str(tree),
                                                       *options], log, env=env, what="meson setup"),
                force=force, echo=echo)
        with steps.step("build", "ninja " + " ".join(Path(t).name for t in build_targets)) as log:
            handler = debian_source.ninja_progress(echo, every=5, detail=True, bar=progress)
            try:
                mesa._run_logged("build", [ninja, "-C", str(build), "-j", str(jobs), *build_targets], log, env=env,
                                 on_line=handler, what="ninja")
            finally:
                handler.close()
        smoke = [g for g in SMOKE_GPUS if mesa.GPUS[g].driver in drivers]
        with steps.step("install", f"install into lib/, test compiles ({', '.join(smoke)}), stamp") as log:
            lib = root / "lib"
            products = [(t, Path(t).name) for t in build_targets]
            debian_source.copy_products(build, lib, products, log, error=MesaNewerSetupError)
            for name in drivers:
                mesa._write_icd(lib, mesa.DRIVERS[name], build / mesa.DRIVERS[name].devenv_icd)
            stamp = {
                "recipe": recipe, "mesa": info["version"], "debian_version": f"{info['version']} (newer build)",
                "source": {k: info[k] for k in ("kind", "path", "commit")}, "missing_files": info["missing_files"],
                "knows": info["knows"], "drivers": list(drivers), "llvm": LLVM if needs_clc(drivers) else None,
                "built_at": time.strftime("%Y-%m-%d %H:%M:%S"), "meson_options": list(options),
                "build_dir_bytes": debian_source.dir_bytes(build),
                "files": {name: {"path": str(lib / name), "bytes": (lib / name).stat().st_size}
                          for _, name in products},
            }
            debian_source.write_stamp(stamp_path, stamp)
            if smoke_test:
                mesa.smoke_compiles(smoke, root, stamp_path, log, echo, error=MesaNewerSetupError)
            if not keep_build:
                for folder in (build, root / "build-spirv-tools", deps, root / "src", root / "venv",
                               root / "downloads"):
                    shutil.rmtree(folder, ignore_errors=True)
            mesa.finish_stamp(stamp, stamp_path, root, started, keep_build, steps)
        echo(debian_source.done_message("compilers setup --mesa", stamp, root))
    return mesa.status(root, "newer")
