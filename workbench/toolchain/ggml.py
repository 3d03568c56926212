"""ggml's Vulkan backend (llama.cpp's GPU kernels: ggml-org/ggml or llama.cpp's ``ggml/`` folder) built at run time
from a checkout the user names, and programs written here linked against it. Nothing of ggml is copied into the
repository: the checkout is the user's, the build lives in a cache folder.

    lib = ggml.setup("/path/to/ggml")           # build once per checkout commit (or reuse); {"lib", "include", ...}
    exe = ggml.program(source_cpp, lib)          # a program of ours, compiled against that build

    python -m workbench.toolchain.ggml setup --checkout /path/to/ggml     ($WORKBENCH_GGML names it too)
    python -m workbench.toolchain.ggml status --checkout /path/to/ggml

What it needs: CMake, ninja and g++ (Debian's); the workbench's glslc (`toolchain.glslang`, which ggml's shader
generator runs for every shader variant); Vulkan headers newer than Debian 12's 1.3.239 (ggml uses
VK_KHR_cooperative_matrix, VK_NV_cooperative_matrix2 and vulkan.hpp of 1.4): Debian 13's ``libvulkan-dev`` and
``spirv-headers`` of VULKAN_HEADERS, downloaded once by apt from a temporary apt configuration (checked against the
signed index) and unpacked into ``<cache>/vulkan-headers`` — nothing is installed on the system. A host without
Debian's registry (the GPU host) reuses that folder when it is carried ($WORKBENCH_GGML_DIR).

The cache: ``$WORKBENCH_GGML_DIR`` or ``~/.cache/workbench/ggml``; one build folder per checkout commit (a
checkout that is not a git work tree: per the digest of its sources' paths, sizes and times), ``setup.json`` its
stamp. Built: ggml-base and ggml-vulkan (the CPU backend is not needed), Release, GGML_NATIVE off. The shader
generator compiles some 2,000 SPIR-V variants: about 15 minutes on 2 cores, 2 on 16.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import debian_source

ENV_CHECKOUT = "WORKBENCH_GGML"
ENV_DIR = "WORKBENCH_GGML_DIR"
DEFAULT_DIR = Path.home() / ".cache" / "workbench" / "ggml"
VULKAN_HEADERS = {"libvulkan-dev": "1.4.309.0", "spirv-headers": "1.6.1+1.4.309.0"}  # Debian 13's
TARGETS = ("ggml-base", "ggml-vulkan")
CMAKE_OPTIONS = ("-DCMAKE_BUILD_TYPE=Release", "-DGGML_VULKAN=ON", "-DGGML_NATIVE=OFF", "-DGGML_BUILD_TESTS=OFF",
                 "-DGGML_BUILD_EXAMPLES=OFF", "-DGGML_CCACHE=OFF", "-DBUILD_SHARED_LIBS=ON")
RECIPE_ID = debian_source.recipe_id({"targets": TARGETS, "cmake": CMAKE_OPTIONS, "headers": VULKAN_HEADERS,
                                     "layout": 1})


class GgmlError(ValueError):
    """A checkout that is not ggml's, or a build that could not be made: one line saying which."""


class GgmlSetupError(GgmlError, debian_source.SetupError):
    label = "ggml setup"


def cache_root(root=None) -> Path:
    return debian_source.cache_dir(root, ENV_DIR, DEFAULT_DIR)


def checkout(path=None) -> Path:
    """The ggml source folder: `path`, else $WORKBENCH_GGML; a llama.cpp checkout's ``ggml/`` folder is taken too.
    GgmlError (one line) where it names nothing or not ggml."""
    text = path or os.environ.get(ENV_CHECKOUT, "")
    if not text:
        raise GgmlError(f"expected a ggml or llama.cpp checkout (--ggml DIR or ${ENV_CHECKOUT}), got none")
    folder = Path(text).expanduser()
    if (folder / "ggml" / "src" / "ggml-vulkan").is_dir():
        folder = folder / "ggml"
    if not (folder / "src" / "ggml-vulkan" / "ggml-vulkan.cpp").is_file() or not (folder / "include").is_dir():
        raise GgmlError(f"expected a ggml checkout (src/ggml-vulkan/ggml-vulkan.cpp, include/) or a llama.cpp checkout "
                        f"(ggml/), got {text}")
    return folder


def revision(source: Path) -> str:
    """The checkout's commit (12 hex digits), or, outside git, a digest of its sources' paths, sizes and times."""
    head = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0 and head.stdout.strip():
        dirty = subprocess.run(["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no", "."],
                               capture_output=True, text=True).stdout.strip()
        return head.stdout.strip()[:12] + ("-dirty" if dirty else "")
    digest = hashlib.sha256()
    for path in sorted((source / "src").rglob("*")) + sorted((source / "include").rglob("*")):
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path.relative_to(source)}:{stat.st_size}:{int(stat.st_mtime)}\n".encode())
    return "tree-" + digest.hexdigest()[:12]


def build_dir(source: Path, root=None) -> Path:
    return cache_root(root) / revision(source)


def products(folder: Path) -> dict[str, Path]:
    """{library name: path} of the build's shared libraries (ggml puts them in build/bin inside llama.cpp, in
    build/src and build/src/ggml-vulkan standalone)."""
    found = {}
    for name in ("libggml-base", "libggml-vulkan"):
        hits = sorted((folder / "build").rglob(f"{name}.so")) if (folder / "build").is_dir() else []
        found[name] = hits[0] if hits else folder / "build" / "bin" / f"{name}.so"
    return found


def status(path=None, root=None) -> dict:
    source = checkout(path)
    folder = build_dir(source, root)
    stamp = debian_source.read_stamp(folder / debian_source.STAMP_NAME)
    missing = [str(p) for p in products(folder).values() if not p.exists()]
    missing += debian_source.stamp_missing(folder / debian_source.STAMP_NAME, RECIPE_ID)
    return {"set_up": not missing, "root": str(folder), "checkout": str(source), "missing": missing, "stamp": stamp}


def vulkan_headers(root=None, *, echo=lambda text: None) -> Path:
    """``<cache>/vulkan-headers/usr`` holding Debian 13's Vulkan and SPIR-V headers (module docstring)."""
    base = cache_root(root) / "vulkan-headers"
    usr = base / "usr"
    if (usr / "include" / "vulkan" / "vulkan.hpp").is_file() and (usr / "share" / "cmake" / "SPIRV-Headers").is_dir():
        return usr
    log = base / "logs" / "headers.log"
    downloads = base / "downloads"
    debs = {p: sorted(downloads.glob(f"{p}_*.deb")) for p in VULKAN_HEADERS}
    if not all(debs.values()):
        with debian_source.AptSources("ggml", debian_source.DEBIAN_MIRROR, log, step="vulkan headers",
                                      error=GgmlSetupError, echo=echo, suites=("trixie",), types="deb") as apt:
            debs = {p: [apt.download_binary(p, v, downloads)] for p, v in VULKAN_HEADERS.items()}
    for found in debs.values():
        debian_source.run_logged("vulkan headers", ["dpkg-deb", "-x", found[-1], base], log, error=GgmlSetupError)
    return usr


def setup(path=None, root=None, *, jobs: int | None = None, force: bool = False, progress: bool = True) -> dict:
    """Build ggml's Vulkan backend from the checkout (module docstring) unless this commit's build is there."""
    from . import glslang
    echo = (lambda text: print(text, flush=True)) if progress else (lambda text: None)
    source = checkout(path)
    folder = build_dir(source, root)
    if not force and status(source, root)["set_up"]:
        echo(f"ggml setup: already built in {folder}")
        return status(source, root)
    started = time.time()
    usr = vulkan_headers(root, echo=echo)
    glslc = glslang.require()["glslc"]
    for tool in ("cmake", "ninja", "g++"):
        if shutil.which(tool) is None:
            raise GgmlSetupError("prerequisites", f"expected {tool} on PATH (Debian's package), got none")
    log = folder / "logs" / "build.log"
    build = folder / "build"
    loader = next((p for p in ("/usr/lib/x86_64-linux-gnu/libvulkan.so.1", "/usr/lib/aarch64-linux-gnu/libvulkan.so.1",
                               "/usr/lib/libvulkan.so.1") if Path(p).is_file()), None)
    if loader is None:
        raise GgmlSetupError("prerequisites", "expected the Vulkan loader libvulkan.so.1 (Debian's libvulkan1), "
                                              "got none")
    echo(f"ggml setup: {source} ({revision(source)}) -> {folder}")
    debian_source.run_logged("configure", ["cmake", "-S", source, "-B", build, "-G", "Ninja", *CMAKE_OPTIONS,
                                           f"-DVulkan_INCLUDE_DIR={usr / 'include'}", f"-DVulkan_LIBRARY={loader}",
                                           f"-DVulkan_GLSLC_EXECUTABLE={glslc}", f"-DCMAKE_PREFIX_PATH={usr}"],
                             log, error=GgmlSetupError)
    debian_source.run_logged("build", ["ninja", "-C", build, *(["-j", str(jobs)] if jobs else []), *TARGETS], log,
                             error=GgmlSetupError, on_line=debian_source.ninja_progress(echo))
    debian_source.write_stamp(folder / debian_source.STAMP_NAME, {
        "recipe": RECIPE_ID, "checkout": str(source), "revision": revision(source), "glslc": str(glslc),
        "headers": VULKAN_HEADERS, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "build_s": round(time.time() - started, 1)})
    echo(f"ggml setup: built in {time.time() - started:.0f} s")
    return status(source, root)


def program(source_cpp: Path, path=None, root=None) -> Path:
    """`source_cpp` (a program written here) compiled against the checkout's build (`setup` first), cached by the
    source's digest beside the build: the executable's path."""
    source = checkout(path)
    folder = build_dir(source, root)
    if not status(source, root)["set_up"]:
        raise GgmlError(f"expected ggml built for {source} in {folder}; run `python -m workbench.toolchain.ggml setup "
                        f"--checkout {source}` first")
    text = Path(source_cpp).read_bytes()
    exe = folder / "programs" / f"{Path(source_cpp).stem}-{hashlib.sha256(text).hexdigest()[:10]}"
    if exe.is_file():
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    libs = sorted({str(p.parent) for p in products(folder).values()})
    debian_source.run_logged("program", ["g++", "-O2", "-std=c++17", source_cpp, "-o", exe, f"-I{source / 'include'}",
                                         *(f"-L{d}" for d in libs), "-lggml-vulkan", "-lggml-base",
                                         *(f"-Wl,-rpath,{d}" for d in libs)],
                             folder / "logs" / "programs.log", error=GgmlSetupError)
    return exe


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.toolchain.ggml", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("setup", "status"):
        p = sub.add_parser(name)
        p.add_argument("--checkout", default=None, help=f"ggml or llama.cpp checkout (default ${ENV_CHECKOUT})")
        p.add_argument("--dir", default=None, help=f"cache folder (default ${ENV_DIR} or {DEFAULT_DIR})")
        if name == "setup":
            p.add_argument("--jobs", "-j", type=int, default=None)
            p.add_argument("--force", action="store_true")
            p.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    try:
        if args.command == "setup":
            setup(args.checkout, args.dir, jobs=args.jobs, force=args.force, progress=not args.quiet)
            return 0
        found = status(args.checkout, args.dir)
        print(json.dumps(found, indent=1))
        return 0 if found["set_up"] else 1
    except GgmlError as error:
        print(f"ggml: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
