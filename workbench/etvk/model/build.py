"""ExecuTorch's runtime with ET-VK in it, built from the user's checkout at a revision, cached.

    from workbench.etvk.model import build
    runtime = build.build("/path/to/executorch")              # the working tree as it is
    runtime = build.build("/path/to/executorch", rev="cff6f4dd32")
    runtime.runner                                             # …/bin/executor_runner

    workbench etvk build [--rev R] [--jobs N]                  # the same from the command line

What is built, and why ``executor_runner`` + ETDump rather than the pybindings
    ``executor_runner`` (examples/portable/executor_runner) with ``EXECUTORCH_BUILD_VULKAN``,
    ``EXECUTORCH_BUILD_DEVTOOLS`` and ``EXECUTORCH_ENABLE_EVENT_TRACER``: one static executable that loads a
    ``.pte``, runs it ``--num_executions`` times, writes every event to an ETDump (``--etdump_path``) and the
    outputs to raw files (``--output_file``). With the event tracer compiled in, ET-VK's delegate turns its
    QueryPool on (VulkanBackend.cpp) and logs one event per dispatch. The pybindings would tie the build to one
    torch ABI and one Python (CPU torch 2.13 here, CUDA torch 2.11 on the GPU host) and take several times as long;
    the executable links against nothing but libc / libstdc++ and the Vulkan loader (loaded by volk at run time), so
    the one built here runs on the GPU host too (its glibc is as new).

How
    CMake + Ninja on the revision's own CMakeLists (``-DEXECUTORCH_BUILD_VULKAN=ON`` …, XNNPACK, pthreadpool and
    cpuinfo off). ET-VK's shaders are compiled at build time by its ``gen_vulkan_spv.py`` with the glslc of
    ``workbench.toolchain.glslang`` (it speaks ET-VK's whole dialect; ``GLSLC_PATH`` is passed explicitly because
    ShaderLibrary.cmake's ``find_program`` hint ``$ENV{VULKAN_SDK}/bin`` becomes ``/bin`` when the variable is
    unset, which finds Debian 12's glslc before ``PATH``). Nothing is downloaded: the sources are the checkout's
    and its submodules' (:data:`SUBMODULES`). The working tree builds in place (``rev=None``; the key includes a
    hash of uncommitted changes); another revision is first exported with ``git archive`` (blobs the clone lacks
    are left out and listed) and its submodules from their own clones in the checkout.

Cache (``$WORKBENCH_ETVK_RUNTIME_DIR``, default ``~/.cache/workbench/etvk-runtime/<key>``), key = commit (+ dirty
hash) and options: ``bin/executor_runner``, ``build.json`` (commit, options, compiler, seconds, sizes), ``logs/``
(configure, build), ``build/`` (CMake's tree, kept so a rebuild is incremental; started afresh where it was
configured from another folder — the checkout moved — and with ``force``), ``named/…/executorch`` (a symlink where
the checkout's folder has another name: ExecuTorch's includes need it to be called ``executorch``)."""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..codegen import CheckoutError, cached_folder, run_git, checkout_path, resolve_revision

# the submodules the Vulkan runtime build reads (the rest of .gitmodules is for other backends)
SUBMODULES = (
    "backends/vulkan/third-party/Vulkan-Headers",
    "backends/vulkan/third-party/VulkanMemoryAllocator",
    "backends/vulkan/third-party/volk",
    "backends/xnnpack/third-party/FXdiv",   # the top-level CMakeLists adds it unconditionally
    "third-party/flatbuffers",
    "third-party/flatcc",
    "third-party/gflags",
    "third-party/json",
)
TOOLS = ("cmake", "ninja", "c++", "git")
TARGET = "executor_runner"
CMAKE_OPTIONS = {
    "CMAKE_BUILD_TYPE": "Release",
    "EXECUTORCH_BUILD_VULKAN": "ON",
    "EXECUTORCH_BUILD_DEVTOOLS": "ON",
    "EXECUTORCH_ENABLE_EVENT_TRACER": "ON",
    "EXECUTORCH_BUILD_EXECUTOR_RUNNER": "ON",
    "EXECUTORCH_BUILD_EXTENSION_DATA_LOADER": "ON",
    "EXECUTORCH_BUILD_EXTENSION_FLAT_TENSOR": "ON",
    "EXECUTORCH_BUILD_EXTENSION_EVALUE_UTIL": "ON",
    "EXECUTORCH_BUILD_EXTENSION_RUNNER_UTIL": "ON",
    "EXECUTORCH_BUILD_XNNPACK": "OFF",
    "EXECUTORCH_BUILD_PTHREADPOOL": "OFF",
    "EXECUTORCH_BUILD_CPUINFO": "OFF",
}
ENV_VAR = "WORKBENCH_ETVK_RUNTIME_DIR"


class RuntimeBuildError(RuntimeError):
    """The runtime could not be built: a missing tool or submodule, or a failed step (its log is named)."""


@dataclass
class Runtime:
    """A built runtime: the executable and what it was built from."""

    root: Path
    runner: Path
    commit: str
    label: str                      # the revision as given, or "working tree"
    info: dict = field(default_factory=dict)

    @property
    def short(self) -> str:
        return self.commit[:10]


def cache_root() -> Path:
    base = os.environ.get(ENV_VAR)
    return Path(base) if base else Path.home() / ".cache" / "workbench" / "etvk-runtime"


def glslc() -> Path:
    """The glslc that speaks ET-VK's dialect (``workbench.toolchain.glslang``), or a clear error."""
    from ...toolchain import glslang
    try:
        return glslang.require()["glslc"]
    except Exception as e:  # not set up: say what to run
        raise RuntimeBuildError(f"building ET-VK's runtime compiles all its shaders with a glslc that knows "
                                f"GL_EXT_integer_dot_product and GL_KHR_cooperative_matrix; none is set up ({e}). "
                                "Run `python -m workbench.toolchain.glslang setup` (./setup.sh does it)") from e


def missing_tools(tools=TOOLS) -> list[str]:
    return [t for t in tools if shutil.which(t) is None]


def missing_submodules(tree: Path, commit: str | None = None, checkout: Path | None = None) -> list[str]:
    """Submodules the build needs that `tree` does not hold, each with why: an absent or empty folder is one never
    initialised; a folder holding only its ``.git`` is one initialised but not checked out."""
    out = []
    for sub in SUBMODULES:
        path = tree / sub
        entries = {p.name for p in path.iterdir()} if path.is_dir() else set()
        if not entries:
            out.append(f"{sub} (not initialised)")
        elif entries <= {".git"}:
            out.append(f"{sub} (initialised, not checked out)")
    return out


def named_executorch(source: Path) -> Path:
    """`source` under a folder named ``executorch``: ExecuTorch's CMake puts the folder above the tree on the include
    path and its sources include ``<executorch/runtime/…>``, so a checkout under any other name fails to compile
    (the reason only in the log). Another name gets a symlink ``executorch`` in the cache (one per source path)."""
    source = Path(source)
    if source.name == "executorch":
        return source
    link = cache_root() / "named" / hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:10] / "executorch"
    if not (link.is_symlink() and link.resolve() == source.resolve()):
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(source.resolve(), target_is_directory=True)
    return link


def stale_build(build_dir: Path, source: Path) -> str | None:
    """Why CMake's tree in `build_dir` cannot be reused for `source` (it was configured from another folder: the
    checkout moved, or another copy has the same commit), or None where it can (or there is none)."""
    cache = Path(build_dir) / "CMakeCache.txt"
    if not cache.is_file():
        return None
    for line in cache.read_text(errors="replace").splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:"):
            configured = line.split("=", 1)[1].strip()
            if Path(configured).resolve() != Path(source).resolve():
                return f"configured from {configured}, now built from {source}"
            return None
    return "its CMakeCache.txt names no source folder"


def _options_key(options: dict, compiler: Path) -> str:
    text = json.dumps({"options": options, "glslc": str(compiler), "version": 1}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _dirty_hash(root: Path) -> str | None:
    """A hash of the checkout's uncommitted changes under the paths the build reads, or None when clean."""
    diff = run_git(root, "diff", "--ignore-submodules=dirty", "HEAD", "--", "backends/vulkan", "runtime", "kernels", "extension", "devtools",
                "CMakeLists.txt", "tools/cmake", binary=True)
    if diff.returncode != 0 or not diff.stdout:
        return None
    return hashlib.sha256(diff.stdout).hexdigest()[:8]


def _missing_blobs(root: Path, commit: str) -> list[str]:
    listing = run_git(root, "ls-tree", "-r", commit)
    blobs: dict[str, list[str]] = {}   # one blob may sit at several paths (identical files)
    for line in listing.stdout.splitlines():
        meta, path = line.split("\t", 1)
        _, kind, sha = meta.split()
        if kind == "blob":
            blobs.setdefault(sha, []).append(path)
    check = subprocess.run(["git", "-C", str(root), "cat-file", "--batch-check"], input="\n".join(blobs) + "\n",
                           capture_output=True, text=True)
    return sorted(p for line in check.stdout.splitlines() if line.endswith(" missing") for p in blobs[line.split()[0]])


def _extract(root: Path, commit: str, folder: Path, excluded=()) -> None:
    spec = ["."] + [f":(exclude,literal){p}" for p in excluded]
    result = run_git(root, "archive", "--format=tar", commit, "--", *spec, binary=True)
    if result.returncode != 0:
        raise RuntimeBuildError(f"git archive of {root} at {commit[:10]} failed: "
                                f"{result.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(result.stdout)) as tar:
        tar.extractall(folder, filter="data")


def export_tree(root: Path, commit: str, folder: Path) -> dict:
    """The checkout at `commit` and the submodules the build needs, into `folder`, offline."""
    missing = _missing_blobs(root, commit)
    _extract(root, commit, folder, missing)
    subs = {}
    for sub in SUBMODULES:
        entry = run_git(root, "ls-tree", commit, sub).stdout.split()
        if len(entry) < 3 or entry[1] != "commit":
            raise RuntimeBuildError(f"{sub} is not a submodule at {commit[:10]}: this revision's build is not one "
                                    "this workbench knows (expected ET-VK's desktop build, ExecuTorch #20138 or later)")
        sub_commit, clone = entry[2], root / sub
        if not (clone / ".git").exists():
            raise RuntimeBuildError(f"submodule {sub} is not initialised in {root}: run "
                                    f"`git -C {root} submodule update --init {sub}`")
        head = run_git(clone, "rev-parse", "HEAD").stdout.strip()
        target = folder / sub
        if target.exists():
            target.rmdir() if target.is_dir() and not any(target.iterdir()) else shutil.rmtree(target)
        if head == sub_commit:   # checked out at the commit the revision wants: link, nothing to copy
            target.symlink_to(clone, target_is_directory=True)
        else:
            if run_git(clone, "cat-file", "-e", f"{sub_commit}^{{commit}}").returncode != 0:
                raise RuntimeBuildError(f"submodule {sub} at {commit[:10]} needs commit {sub_commit[:10]}, which "
                                        f"its clone in {root} lacks: `git -C {clone} fetch origin {sub_commit}`")
            target.mkdir(parents=True)
            _extract(clone, sub_commit, target, _missing_blobs(clone, sub_commit))
        subs[sub] = sub_commit
    (folder / "workbench-export.json").write_text(json.dumps({"commit": commit, "missing_blobs": missing,
                                                                "submodules": subs}, indent=1))
    return subs


def _progress(line: str, state: dict, echo) -> None:
    """One line per 10 % of ninja's steps (and the step that generates the shader library, the long one)."""
    m = re.match(r"\[(\d+)/(\d+)\]", line)
    if not m:
        return
    done, total = int(m.group(1)), int(m.group(2))
    tenth = done * 10 // max(total, 1)
    if tenth > state.get("tenth", -1) or "spv.cpp" in line:
        state["tenth"] = tenth
        echo(f"  build {done}/{total} ({time.perf_counter() - state['t0']:.0f} s) {line[m.end():].strip()[:90]}")


def _run(step: str, command: list, log: Path, echo, cwd=None, env=None) -> None:
    state = {"t0": time.perf_counter()}
    with open(log, "w") as f:
        f.write("$ " + " ".join(map(str, command)) + "\n")
        f.flush()
        proc = subprocess.Popen([str(c) for c in command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, cwd=cwd, env=env)
        tail = []
        for line in proc.stdout:
            f.write(line)
            tail = (tail + [line.rstrip()])[-30:]
            if step == "build":
                _progress(line, state, echo)
        rc = proc.wait()
    if rc:
        failed = [t for t in tail if "FAILED" in t or "rror" in t][-8:] or tail[-12:]
        first = next((t.strip() for t in failed if t.strip()), "no output")
        raise RuntimeBuildError(f"the runtime's {step} step failed (exit {rc}): {first[:200]} — full log {log}\n"
                                + "\n".join(failed))


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def build(executorch=None, rev: str | None = None, *, jobs: int | None = None, force: bool = False,
          quiet: bool = False, options: dict | None = None) -> Runtime:
    """Build (or find cached) ExecuTorch's ``executor_runner`` with ET-VK from `executorch` at `rev`."""
    echo = (lambda *_: None) if quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    root = checkout_path(executorch)
    missing = missing_tools()
    if missing:
        raise RuntimeBuildError(f"building ET-VK's runtime needs {', '.join(TOOLS)}; not found on PATH: "
                                f"{', '.join(missing)} (Debian: apt-get install cmake ninja-build g++ git)")
    compiler = glslc()
    opts = dict(CMAKE_OPTIONS, **(options or {}))
    if rev is None:
        head = run_git(root, "rev-parse", "HEAD")
        commit = head.stdout.strip() if head.returncode == 0 else "unversioned"
        dirty = _dirty_hash(root) if head.returncode == 0 else None
        label, source = "working tree", root
        gone = missing_submodules(root)
        if gone:
            names = " ".join(g.split(" (")[0] for g in gone)
            raise RuntimeBuildError(f"the checkout {root} lacks submodules the runtime build needs: {', '.join(gone)}; "
                                    f"run `git -C {root} submodule update --init {names}`")
        key = f"{commit[:10]}{'-dirty-' + dirty if dirty else ''}-{_options_key(opts, compiler)}"
    else:
        commit = resolve_revision(root, rev)
        label, dirty = rev, None
        key = f"{commit[:10]}-{_options_key(opts, compiler)}"
        source = None
    home = cache_root() / key
    stamp = home / "build.json"
    runner = home / "bin" / TARGET
    if stamp.is_file() and runner.is_file() and not force:
        return Runtime(home, runner, commit, label, json.loads(stamp.read_text()))
    if source is None:
        echo(f"exporting ExecuTorch {commit[:10]} and its submodules (offline, from {root}) …")
        source = cached_folder(cache_root() / "src" / commit[:10], lambda folder: export_tree(root, commit, folder))
    (home / "logs").mkdir(parents=True, exist_ok=True)
    (home / "bin").mkdir(exist_ok=True)
    build_dir = home / "build"
    source = named_executorch(source)
    stale = "--force" if force else stale_build(build_dir, source)
    if stale and build_dir.exists():  # CMake refuses a tree configured from another source folder
        echo(f"starting CMake's tree afresh ({stale})")
        shutil.rmtree(build_dir)
    python = sys.executable
    cmake = ["cmake", "-S", source, "-B", build_dir, "-G", "Ninja", f"-DPYTHON_EXECUTABLE={python}",
             f"-DGLSLC_PATH={compiler}"] + [f"-D{k}={v}" for k, v in opts.items()]
    env = dict(os.environ)
    env.pop("VULKAN_SDK", None)
    t0 = time.perf_counter()
    echo(f"configuring ExecuTorch {label} ({commit[:10]}) with ET-VK → {home}")
    _run("configure", cmake, home / "logs" / "configure.log", echo, env=env)
    t1 = time.perf_counter()
    jobs = jobs or os.cpu_count() or 2
    echo(f"building {TARGET} with {jobs} jobs (ET-VK's shaders are compiled as part of it) …")
    _run("build", ["ninja", "-C", build_dir, f"-j{jobs}", TARGET], home / "logs" / "build.log", echo, env=env)
    t2 = time.perf_counter()
    built = build_dir / TARGET
    if not built.is_file():
        raise RuntimeBuildError(f"ninja finished but {built} does not exist; see {home / 'logs' / 'build.log'}")
    shutil.copy2(built, runner)
    info = {"commit": commit, "label": label, "dirty": dirty, "key": key, "options": opts, "glslc": str(compiler),
            "source": str(source), "jobs": jobs, "cores": os.cpu_count(), "configure_s": round(t1 - t0, 1),
            "build_s": round(t2 - t1, 1), "runner_bytes": runner.stat().st_size,
            "build_dir_bytes": _dir_bytes(build_dir), "built": time.strftime("%Y-%m-%dT%H:%M:%S")}
    stamp.write_text(json.dumps(info, indent=1))
    echo(f"built in {info['configure_s'] + info['build_s']:.0f} s: {runner} ({info['runner_bytes'] / 2**20:.1f} MiB)")
    return Runtime(home, runner, commit, label, info)


def find(executorch=None, rev: str | None = None) -> Runtime | None:
    """The cached runtime for the checkout at `rev`, or None (nothing is built)."""
    try:
        root = checkout_path(executorch)
    except CheckoutError:
        return None
    for stamp in sorted(cache_root().glob("*/build.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        info = json.loads(stamp.read_text())
        runner = stamp.parent / "bin" / TARGET
        if not runner.is_file():
            continue
        if rev is None and info.get("label") == "working tree" and info.get("dirty") == _dirty_hash(root) \
                and info.get("commit") == run_git(root, "rev-parse", "HEAD").stdout.strip():
            return Runtime(stamp.parent, runner, info["commit"], info["label"], info)
        if rev is not None and info.get("commit") == resolve_revision(root, rev):
            return Runtime(stamp.parent, runner, info["commit"], info["label"], info)
    return None


def from_path(runner) -> Runtime:
    """A runtime built elsewhere (e.g. carried to the GPU host): its executable and the build.json beside bin/."""
    runner = Path(runner).resolve()
    if not runner.is_file():
        raise RuntimeBuildError(f"no executor_runner at {runner}")
    stamp = runner.parent.parent / "build.json"
    info = json.loads(stamp.read_text()) if stamp.is_file() else {}
    return Runtime(runner.parent.parent, runner, info.get("commit", "unknown"), info.get("label", "given"), info)
