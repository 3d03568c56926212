"""ET-VK's own op harness (``backends/vulkan/test/custom_ops``): its ``test_q8ta_*`` / ``test_q8csw_*`` binaries,
built from the user's checkout against the runtime :mod:`workbench.etvk.model.build` made, run here, their printed
per-shader lines as tidy rows.

    from workbench.etvk import harness
    built = harness.build("/path/to/executorch")             # the binaries the revision has (cached)
    rows = harness.run(built, "test_q8ta_conv2d_pw")           # one row per shader line and per case line
    harness.parse(text)                                        # the same from captured output

The harness prints (utils.cpp, ``BenchmarkResult::print_summary``) one line per case: the shader (its name cut to
44 characters + ".." past 46; built with the event tracer, as here, ET-VK's event JSON, whose ``kernel_name`` is
read), its global and local work-group sizes, the case's kernel name, a size string, the
average µs over its iterations, GFLOP/s and PASSED / FAILED / SKIPPED; a case with several shaders prints one line
per shader (no GFLOP/s, no status) and then the operator's line. :func:`parse` reads both; a cut name is resolved
to the full variant name when the caller gives the variant list and one variant has that prefix.

Build: ``cmake --install`` of the runtime's build tree into ``<runtime>/install``, then the harness's own CMake
project (``find_package(executorch … vulkan_backend)``) with the same glslc, Release, only the binaries asked for.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

HARNESS_DIR = "backends/vulkan/test/custom_ops"
DEFAULT_TESTS = ("test_q8ta_conv2d_pw", "test_q8ta_conv2d", "test_q8ta_conv2d_dw", "test_q8ta_linear",
                 "test_q8ta_binary", "test_q8ta_unary", "test_q8ta_clone", "test_q8ta_qdq", "test_q8ta_pixel_shuffle",
                 "test_q8csw_linear", "test_q8csw_conv2d", "test_q8ta_conv2d_transposed")

_WG2 = re.compile(r"\((\d+),(\d+),(\d+)\)\s+\((\d+),(\d+),(\d+)\)")
_TAIL = re.compile(r"(?P<us>[0-9.]+) μs(?:\s+(?P<gflops>[0-9.]+) GFLOP/s)?\s*(?P<status>PASSED|FAILED|SKIPPED)?\s*$")
# with the event tracer on, the name is ET-VK's event JSON (cut like any name: then its kernel name ends in "..")
_EVENT_NAME = re.compile(r'"kernel_name": "([^"]*)(")?')
_SIZE = re.compile(r"(\[[^\]]*\])\s*$")


class HarnessError(RuntimeError):
    """The harness could not be built or run; the message names the step and its log."""


def parse(text: str, variants=None, test: str = "") -> pd.DataFrame:
    """The per-shader and per-case lines of one harness binary's output, in order."""
    rows, case = [], 0
    names = list(variants or [])
    for line in text.splitlines():
        tail = _TAIL.search(line)
        if not tail:
            continue
        head = line[:tail.start()].rstrip()
        wg = _WG2.search(head)
        if wg:
            name, rest = head[:wg.start()].strip(), head[wg.end():].strip()
        else:
            parts = head.split(None, 1)
            if not parts:
                continue
            name, rest = parts[0], parts[1] if len(parts) > 1 else ""
        event = _EVENT_NAME.search(name)
        if event:
            name = event.group(1) if event.group(2) else event.group(1).rstrip(".") + ".."
        if name.endswith("..") and names:
            full = [v for v in names if v.startswith(name[:-2])]
            name = full[0] if len(full) == 1 else name
        size = _SIZE.search(rest)
        row = {"test": test, "case": case, "line": "shader" if wg else "operator", "name": name,
               "global_wg": "x".join(wg.group(i) for i in (1, 2, 3)) if wg else "",
               "local_wg": "x".join(wg.group(i) for i in (4, 5, 6)) if wg else "",
               "case_name": " ".join((rest[:size.start()] if size else rest).split()),
               "size": size.group(1) if size else "",
               "avg_us": float(tail.group("us")),
               "gflops": float(tail.group("gflops")) if tail.group("gflops") else None,
               "status": tail.group("status") or ""}
        rows.append(row)
        if row["status"]:   # the case's closing line (one-shader cases close on their shader line)
            case += 1
    return pd.DataFrame(rows, columns=["test", "case", "line", "name", "global_wg", "local_wg", "case_name", "size",
                                       "avg_us", "gflops", "status"])


_CONV_CASE = re.compile(r"\[(\d+),(\d+),(\d+),(\d+)\]x\[(\d+),(\d+),(\d+),(\d+)\]\s+s(\d+)\s+p(\d+)\s+d(\d+)\s+g(\d+)"
                        r"\s+Buf\((\w+)\)")
CONV_FAMILIES = {"q8ta_conv2d_pw_float": "q8ta_conv2d_pw", "q8ta_conv2d_float": "q8ta_conv2d",
                 "q8ta_conv2d_dw_float": "q8ta_conv2d_dw"}


def conv_case_options(row) -> tuple[str, dict] | None:
    """(workbench family, make options) of a harness conv case line whose shader the workbench dispatches, from its
    case name ``[N,C,H,W]x[OC,ICg,Kh,Kw] sS pP dD gG Buf(LAYOUT)``; None for any other line."""
    family = CONV_FAMILIES.get(row["name"])
    m = _CONV_CASE.search(row["case_name"] or "")
    if family is None or m is None:
        return None
    n, c, h, w, oc, _, kh, kw, s, p, d, g = (int(v) for v in m.groups()[:12])
    layout = m.group(13)
    opts = {"shape": (n, c, h, w), "out_channels": oc, "out_layout": layout}
    if family != "q8ta_conv2d_pw":
        opts.update(kernel_size=(kh, kw), stride=s, padding=p, dilation=d, in_layout=layout)
        if family == "q8ta_conv2d":
            opts["groups"] = g
    return family, opts


def geometry_check(rows: pd.DataFrame, gen) -> pd.DataFrame:
    """ET-VK's own harness's work-group sizes beside the workbench's port of the same dispatch (no device needed:
    the family's ``make`` gives the global and local sizes ET-VK's pickers would)."""
    from .run import make
    out = []
    for _, r in rows[rows["line"] == "shader"].iterrows():
        picked = conv_case_options(r)
        if picked is None:
            continue
        family, opts = picked
        try:
            d = make(gen, family, **opts)
            wb_global, wb_local = "x".join(map(str, d.global_size)), "x".join(map(str, d.local_size))
            error = ""
        except ValueError as e:
            wb_global = wb_local = ""
            error = str(e).splitlines()[0]
        out.append({"test": r["test"], "case_name": r["case_name"], "shader": r["name"], "family": family,
                    "harness_global": r["global_wg"], "harness_local": r["local_wg"], "workbench_global": wb_global,
                    "workbench_local": wb_local, "same": (wb_global, wb_local) == (r["global_wg"], r["local_wg"]),
                    "harness_us": r["avg_us"], "error": error})
    return pd.DataFrame(out)


def _run(step: str, command, log: Path, cwd=None) -> None:
    with open(log, "w") as f:
        proc = subprocess.run([str(c) for c in command], stdout=f, stderr=subprocess.STDOUT, cwd=cwd)
    if proc.returncode:
        tail = log.read_text(errors="replace").strip().splitlines()[-12:]
        raise HarnessError(f"the harness's {step} step failed (exit {proc.returncode}); log {log}:\n" + "\n".join(tail))


def available(source: Path, tests=DEFAULT_TESTS) -> list[str]:
    """The harness binaries of `tests` this revision builds: its CMakeLists registers them with
    ``add_operator_prototype(NAME)`` (a ``.cpp`` alone, e.g. test_q8ta_linear.cpp at cff6f4dd32, is not built)."""
    cmake = Path(source) / HARNESS_DIR / "CMakeLists.txt"
    registered = set(re.findall(r"add_operator_prototype\((\w+)\)", cmake.read_text())) if cmake.is_file() else set()
    return [t for t in tests if t in registered]


def build(executorch=None, rev: str | None = None, tests=DEFAULT_TESTS, *, jobs: int | None = None,
          quiet: bool = False) -> dict:
    """The harness binaries, built against the cached runtime of the checkout at `rev`. Returns
    {"bin": folder, "tests": [names], "seconds": …}."""
    from .model import build as runtime_build
    echo = (lambda *_: None) if quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    runtime = runtime_build.build(executorch, rev, jobs=jobs, quiet=quiet)
    source = Path(runtime.info["source"])
    names = available(source, tests)
    if not names:
        raise HarnessError(f"{source / HARNESS_DIR} has none of {', '.join(tests)}")
    home = runtime.root
    bin_dir = home / "harness" / "bin"
    missing = [n for n in names if not (bin_dir / n).is_file()]
    t0 = time.perf_counter()
    if missing:
        logs = home / "logs"
        install = home / "install"
        if not (install / ".complete").is_file():
            # find_package(executorch) needs every exported library: build the tree's default targets, then install
            echo(f"building the rest of the runtime's libraries and installing them into {install} …")
            _run("build-all", ["ninja", "-C", home / "build", f"-j{jobs or os.cpu_count() or 2}"],
                 logs / "build-all.log")
            _run("install", ["cmake", "--install", home / "build", "--prefix", install], logs / "install.log")
            (install / ".complete").write_text("")
        tree = home / "harness" / "build"
        echo(f"configuring ET-VK's op harness ({len(missing)} binaries) …")
        _run("configure", ["cmake", "-S", source / HARNESS_DIR, "-B", tree, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                           f"-DCMAKE_PREFIX_PATH={install}", f"-DEXECUTORCH_ROOT={source}",
                           f"-DGLSLC_PATH={runtime_build.glslc()}", f"-DPYTHON_EXECUTABLE={sys.executable}"],
             logs / "harness-configure.log")
        echo(f"building {', '.join(missing)} …")
        _run("build", ["ninja", "-C", tree, f"-j{jobs or os.cpu_count() or 2}", *missing], logs / "harness-build.log")
        bin_dir.mkdir(parents=True, exist_ok=True)
        for n in missing:
            built = next((p for p in tree.rglob(n) if p.is_file() and os.access(p, os.X_OK)), None)
            if built is None:
                raise HarnessError(f"ninja built {n} but it is not under {tree}")
            (bin_dir / n).write_bytes(built.read_bytes())
            (bin_dir / n).chmod(0o755)
    return {"bin": bin_dir, "tests": names, "seconds": round(time.perf_counter() - t0, 1),
            "commit": runtime.commit}


def run(binary, *, variants=None, timeout: float = 900) -> pd.DataFrame:
    """One harness binary, run here; its lines as rows (``test`` = the binary's name). A binary still running at
    `timeout` is stopped and the cases it finished are kept (``complete`` False): ET-VK's harness runs hundreds of
    cases, which a CPU device takes many minutes over."""
    binary = Path(binary)
    if not binary.is_file():
        raise HarnessError(f"no harness binary at {binary}")
    complete = True
    try:
        proc = subprocess.run([str(binary)], capture_output=True, text=True, timeout=timeout)
        out, code = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        code, complete = None, False
    rows = parse(out, variants, binary.name)
    if code and rows.empty:
        tail = "\n".join(out.strip().splitlines()[-10:])
        raise HarnessError(f"{binary.name} failed (exit {code}):\n{tail}")
    return rows.assign(exit_code=code, complete=complete)
