"""Capture a program: run it under GFXReconstruct's layer, convert the capture, dump every dispatch's bindings.

What a capture folder holds (all that `open` and `replay` read; the reader never needs the tools):

    capture.gfxr        the layer's capture (kept: the tools can convert or dump it again)
    calls.jsonl         the calls the reader needs, one JSON object a line, as ``gfxrecon-convert --format jsonl``
                        writes them (shader modules, pipelines, buffers, descriptor writes, command buffers,
                        dispatches, submits); the rest of the conversion is dropped
    binaries/           the files those calls name (SPIR-V, push-constant bytes), from ``--include-binaries``
    dumps/              ``gfxrecon-replay --dump-resources``: ``capture_rd.json`` (per dispatch, each binding's
                        file before and after) and the buffer files it names
    capture.json        the manifest: command, tool version, times, sizes, dispatch count
    program.log         what the program printed under capture; tools.log what convert and replay printed

`process` makes the same folder from a capture file made elsewhere (another machine, a phone): the dumps then come
from replaying it on this machine's device.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ..toolchain import gfxreconstruct, hide_layer
from . import waits
from .format import (BINARIES_DIR, CALLS_NAME, DUMP_JSON_SUFFIXES, DUMPS_DIR, MANIFEST_NAME, CaptureError, dump_plan,
                     needed_calls, read_calls, unknown_dispatch)

CAPTURE_NAME = "capture.gfxr"
CAPTURE_MAGIC = b"GFXR"  # the file header's four-character code
LOG_NAME = "program.log"
TOOLS_LOG = "tools.log"
# Where the loader looks for explicit layers when VK_LAYER_PATH is unset: kept after the capture layer's folder, so a
# program that enables the validation layer itself still finds it.
SYSTEM_LAYER_DIRS = ("/usr/local/etc/vulkan/explicit_layer.d", "/usr/local/share/vulkan/explicit_layer.d",
                     "/etc/vulkan/explicit_layer.d", "/usr/share/vulkan/explicit_layer.d")


def tools() -> dict:
    """GFXReconstruct's tools, or CaptureError saying how to build them."""
    try:
        return gfxreconstruct.tools()
    except gfxreconstruct.GfxreconError as exc:
        raise CaptureError(str(exc)) from None


def capture_env(layer_dir: Path, capture_file: Path, base=None) -> dict:
    """The environment that puts `VK_LAYER_LUNARG_gfxreconstruct` (from `layer_dir`, not any system copy) first
    in every Vulkan instance the program makes, writing to `capture_file`."""
    env = dict(os.environ if base is None else base)
    search = [str(layer_dir)] + [p for p in env.get("VK_LAYER_PATH", "").split(os.pathsep) if p]
    search += [d for d in SYSTEM_LAYER_DIRS if d not in search]
    layers = [gfxreconstruct.LAYER_NAME] + [l for l in env.get("VK_INSTANCE_LAYERS", "").split(os.pathsep)
                                            if l and l != gfxreconstruct.LAYER_NAME]
    env.update({
        "VK_LAYER_PATH": os.pathsep.join(search),
        "VK_INSTANCE_LAYERS": os.pathsep.join(layers),
        "GFXRECON_CAPTURE_FILE": str(capture_file),
        "GFXRECON_CAPTURE_FILE_TIMESTAMP": "false",  # else the layer appends the time to the file name
        "GFXRECON_LOG_LEVEL": "warning",
        # uncompressed: `waits.patch` can then make a wait that a one-thread replay never leaves non-blocking
        "GFXRECON_CAPTURE_COMPRESSION_TYPE": "NONE",
    })
    return env


def _tool(command: list, what: str, log: Path, timeout: float | None = None) -> tuple[float, list[str]]:
    """Run a GFXReconstruct tool, its output appended to `log`: (seconds, its WARNING / ERROR lines); CaptureError
    with its last line when it fails."""
    started = time.perf_counter()
    try:
        result = subprocess.run([str(c) for c in command], capture_output=True, text=True, errors="replace",
                                stdin=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CaptureError(f"{what} did not finish in {timeout:.0f} s") from None
    output = result.stdout + result.stderr
    with open(log, "a") as handle:
        handle.write("$ " + " ".join(str(c) for c in command) + "\n" + output)
    lines = [l.strip() for l in output.splitlines() if l.strip()]
    if result.returncode != 0:
        raise CaptureError(f"{what} failed with exit status {result.returncode}: "
                           f"{lines[-1] if lines else 'no output'} (full log {log})")
    return time.perf_counter() - started, [l for l in lines if "WARNING" in l or "ERROR" in l]


def _program_failed(command, returncode: int, log: Path) -> CaptureError:
    if returncode < 0:
        import signal
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        found = f"it was killed by {name}"
    else:
        found = f"it exited with status {returncode}"
    lines = [l for l in log.read_text(errors="replace").splitlines() if l.strip()]
    last = f"; its last line: {lines[-1][:200]}" if lines else ""
    return CaptureError(f"expected `{' '.join(map(str, command))}` to exit 0 under the capture layer, {found}"
                        f"{last} (output in {log})")


def _clear(out: Path, keep=()) -> None:
    for stale in (CAPTURE_NAME, CALLS_NAME, MANIFEST_NAME, LOG_NAME, TOOLS_LOG):
        if stale not in keep:
            (out / stale).unlink(missing_ok=True)
    for stale in (BINARIES_DIR, DUMPS_DIR):
        shutil.rmtree(out / stale, ignore_errors=True)


LAYER_SAID = ("[gfxrecon] ERROR", "[gfxrecon] WARNING", "[gfxrecon] FATAL")


def layer_messages(log: Path, most: int = 20) -> list[str]:
    """The capture layer's ERROR / WARNING lines in a program's log (distinct, in order, at most `most`): what it
    could not capture (IREE's buffer device addresses without the capture-replay feature, …)."""
    if not Path(log).is_file():
        return []
    seen = dict.fromkeys(line.strip() for line in Path(log).read_text(errors="replace").splitlines()
                         if line.lstrip().startswith(LAYER_SAID))
    return list(seen)[:most]


def parse_submits(text) -> str:
    """A range of queue submits to capture (GFXReconstruct's trimming, `GFXRECON_CAPTURE_QUEUE_SUBMITS`): "A-B" or
    "A" (0-based, inclusive) → the setting's value; a one-line error otherwise."""
    first, _, last = str(text).partition("-")
    try:
        a, b = int(first), int(last) if last else int(first)
    except ValueError:
        a, b = -1, -1
    if a < 0 or b < a:
        raise CaptureError(f"expected queue submits as A-B or A (0-based, A <= B), got {text!r}")
    return f"{a}-{b}"


def run(command, out_dir, *, timeout: float | None = None, allow_failure: bool = False,
        submits: str | None = None, hide_extensions=()) -> dict:
    """Run `command` (a list, or a string split on spaces) under the capture layer, then `process` its capture into
    `out_dir` (see the module's doc). Returns the manifest. CaptureError (one line) when the tools are not built,
    the program fails or makes no dispatch, or a tool cannot read the capture. `allow_failure`: a program that
    fails (exit status, signal) after it made its capture file is processed all the same, the failure kept in the
    manifest's ``program_failed`` (ET-VK's executor_runner on lavapipe crashes in its teardown under the layer,
    after every dispatch was submitted). `submits` ("A-B"): only those queue submits are captured (GFXReconstruct's
    trimming: a 100-token run's steps A to B). The layer's ERROR / WARNING lines go into the manifest
    (``layer_messages``), for the caller to show. `hide_extensions` (names): the program runs on a device without
    them (`workbench.toolchain.hide_layer`, below the capture layer), e.g. VK_KHR_push_descriptor, so that ncnn binds
    through descriptor sets, which GFXReconstruct's dumps follow; the manifest's ``hidden_extensions`` says so."""
    command = command.split() if isinstance(command, str) else [str(c) for c in command]
    if not command:
        raise CaptureError("expected a command to capture, got none")
    try:  # bad input is named before anything is looked for or built
        hidden = hide_layer.check_names(hide_extensions)
    except hide_layer.HideLayerError as exc:
        raise CaptureError(str(exc)) from None
    queue_submits = parse_submits(submits) if submits is not None else None
    found = tools()
    try:
        base = {**os.environ, **hide_layer.environment(hidden)} if hidden else None
    except hide_layer.HideLayerError as exc:
        raise CaptureError(str(exc)) from None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _clear(out)
    capture, log = out / CAPTURE_NAME, out / LOG_NAME
    started = time.perf_counter()
    with open(log, "w") as handle:
        env = capture_env(found["layer_dir"], capture, base)
        if queue_submits is not None:
            env["GFXRECON_CAPTURE_QUEUE_SUBMITS"] = queue_submits
        try:
            result = subprocess.run(command, env=env, stdout=handle,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout)
        except FileNotFoundError:
            raise CaptureError(f"expected a program to run, found no {command[0]!r}") from None
        except subprocess.TimeoutExpired:
            raise CaptureError(f"expected `{' '.join(command)}` to finish in {timeout:.0f} s under capture; it did "
                               f"not (output in {log})") from None
    program_s = time.perf_counter() - started
    trimmed = sorted(out.glob(f"{capture.stem}_*{capture.suffix}"))  # trimming names its file capture_queue_submit_A…
    if not capture.is_file() and len(trimmed) == 1:
        trimmed[0].rename(capture)
    failed = _program_failed(command, result.returncode, log) if result.returncode != 0 else None
    if failed is not None and not (allow_failure and capture.is_file()):
        raise failed
    if not capture.is_file():
        raise CaptureError(f"expected a capture file {capture} from `{' '.join(command)}`, found none: the program "
                           f"made no Vulkan instance (or the layer did not load; see {log})")
    manifest = process(capture, out, command=command, program_s=program_s)
    said = layer_messages(log)
    if failed is not None or said or submits is not None or hidden:
        if failed is not None:  # what it submitted before it failed is in the capture: kept, and the failure said
            manifest["program_failed"] = str(failed)
        manifest["layer_messages"] = said
        if submits is not None:
            manifest["submits"] = parse_submits(submits)
        if hidden:
            manifest["hidden_extensions"] = hidden
        (out / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def process(capture_file, out_dir, *, command=None, program_s: float | None = None) -> dict:
    """Convert a capture file (made here by `run`, or anywhere by GFXReconstruct's layer) into the capture folder
    `out_dir`: the calls the reader needs, their binaries, every dispatch's bindings dumped before and after by
    replaying the capture on this machine's device. Returns the manifest written as capture.json."""
    found = tools()
    capture_file, out = Path(capture_file), Path(out_dir)
    if not capture_file.is_file():
        raise CaptureError(f"expected a GFXReconstruct capture file, found no file {capture_file}")
    with open(capture_file, "rb") as handle:
        magic = handle.read(4)
    if magic != CAPTURE_MAGIC:
        raise CaptureError(f"expected a GFXReconstruct capture file (starting {CAPTURE_MAGIC!r}), found {magic!r} at "
                           f"the start of {capture_file}")
    out.mkdir(parents=True, exist_ok=True)
    if capture_file.resolve() != (out / CAPTURE_NAME).resolve():
        _clear(out, keep=(LOG_NAME,))
        shutil.copy2(capture_file, out / CAPTURE_NAME)
    else:
        _clear(out, keep=(CAPTURE_NAME, LOG_NAME))
    capture = out / CAPTURE_NAME
    seconds = {} if program_s is None else {"program": program_s}
    dump_failed = ""
    tool_log = out / TOOLS_LOG
    with tempfile.TemporaryDirectory(prefix="workbench-capture-") as tmp:
        converted = Path(tmp) / "calls.jsonl"
        seconds["convert"], said = _tool([found["gfxrecon-convert"], "--include-binaries", "--format", "jsonl",
                                          "--output", converted, capture], "gfxrecon-convert", tool_log)
        problems = f"; gfxrecon-convert said: {said[-1]}" if said else ""
        if not converted.is_file():
            raise CaptureError(f"expected gfxrecon-convert to read {capture}, it wrote nothing{problems}")
        calls = read_calls(converted)
        plan = dump_plan(calls)
        if not plan["Dispatch"]:
            others = sorted({n for n in (c.get("function", {}).get("name") for c in calls) if unknown_dispatch(n)})
            also = f"; only {', '.join(others)}, which the reader does not replay" if others else ""
            raise CaptureError(f"expected at least one submitted vkCmdDispatch in {capture}, found none "
                               f"({len(calls)} calls{also}{problems})")
        stuck = waits.stuck_waits(calls)
        unpatched = waits.patch(capture, stuck)
        kept = needed_calls(calls)
        (out / BINARIES_DIR).mkdir()
        with open(out / CALLS_NAME, "w") as handle:
            for call in kept:
                handle.write(json.dumps(call, separators=(",", ":")) + "\n")
        for name in _binary_files(kept):
            source = Path(tmp) / name
            if source.is_file():  # convert names them relative to its output, e.g. calls/6_shader_module_….bin
                (out / BINARIES_DIR / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, out / BINARIES_DIR / name)
        plan_file = Path(tmp) / "dump_plan.json"
        plan_file.write_text(json.dumps(plan))
        (out / DUMPS_DIR).mkdir()
        addresses = sorted({str((c.get("function") or {}).get("name")) for c in calls
                            if str((c.get("function") or {}).get("name")).startswith("vkGetBufferDeviceAddress")})
        try:
            seconds["dump"], stopped = _dump([found["gfxrecon-replay"], "--dump-resources", plan_file,
                                              "--dump-resources-dir", out / DUMPS_DIR, capture], plan,
                                             out / DUMPS_DIR, tool_log)
        except CaptureError as exc:
            if not addresses:
                raise
            # GFXReconstruct 1.0.5 replays a capture that took buffer device addresses on a device without
            # bufferDeviceAddressCaptureReplay (lavapipe) with the captured pointers, and crashes: the folder is
            # kept with an empty dump index, each dispatch listed and named (`replay.NO_DUMP_POINTERS`)
            seconds["dump"], stopped = 0.0, ""
            dump_failed = (f"{exc} — the program took buffer device addresses ({', '.join(addresses)}) and "
                           "GFXReconstruct replays them as captured")
            for stale in (out / DUMPS_DIR).iterdir():
                stale.unlink()
            (out / DUMPS_DIR / f"{capture.stem}{DUMP_JSON_SUFFIXES[0]}").write_text(
                json.dumps([{"dumpFailed": dump_failed}, {"dispatchCommands": []}]) + "\n")
    _relative_dumps(out / DUMPS_DIR)
    manifest = {
        "command": command, "gfxreconstruct": gfxreconstruct.VERSION, "tag": gfxreconstruct.TAG,
        "dispatches": sum(len(d) for d in plan["Dispatch"]), "calls": len(kept),
        "capture_bytes": capture.stat().st_size, "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "folder_bytes": sum(p.stat().st_size for p in out.rglob("*") if p.is_file()),
        "made_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    if stopped:
        manifest["dump_stopped"] = stopped
    if dump_failed:
        manifest["dump_failed"] = dump_failed
    if stuck:  # host waits on a later call's signal (IREE's threads): made non-blocking, or why not
        manifest["waits_patched"] = {"blocks": stuck, "problem": unpatched}
    (out / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


DUMP_TIMEOUT_S = 900.0  # the whole dump step; WORKBENCH_CAPTURE_DUMP_TIMEOUT_S overrides
DUMP_IDLE_S = 10.0  # once every planned dispatch is in the dump index, this long without a new file ends the tool


def _dumped_all(dumps: Path, plan: dict) -> bool:
    """Whether the dump index in `dumps` lists every dispatch of `plan` (it is rewritten after each dumped submit)."""
    wanted = {int(i) for indices in plan["Dispatch"] for i in indices}
    for path in (p for s in DUMP_JSON_SUFFIXES for p in dumps.glob(f"*{s}")):
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError):  # being written
            return False
        parts = document if isinstance(document, list) else [document]
        found = {int(e.get("dispatchIndex", -1)) for part in parts if isinstance(part, dict)
                 for e in part.get("dispatchCommands") or []}
        return wanted <= found
    return False


def _dump(command: list, plan: dict, dumps: Path, log: Path) -> tuple[float, str]:
    """Run ``gfxrecon-replay --dump-resources``: (seconds, "" or why it was stopped). GFXReconstruct 1.0.5 can hang
    after its last dump: on IREE's captures it waits forever in a vkWaitSemaphores on a timeline semaphore that the
    submit it replaced by its own copy was to signal. Once the dump index lists every planned dispatch and no file
    was written for DUMP_IDLE_S, the tool is ended and the capture kept (the manifest's ``dump_stopped`` says so);
    a tool still short of that after the timeout is a CaptureError, never a hang."""
    limit = float(os.environ.get("WORKBENCH_CAPTURE_DUMP_TIMEOUT_S", DUMP_TIMEOUT_S))
    started = time.perf_counter()
    with open(log, "a") as handle:
        handle.write("$ " + " ".join(str(c) for c in command) + "\n")
        handle.flush()
        proc = subprocess.Popen([str(c) for c in command], stdout=handle, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        stopped, last_change, newest = "", time.perf_counter(), 0.0
        try:
            while proc.poll() is None:
                time.sleep(0.2)
                now = time.perf_counter()
                mtime = max((p.stat().st_mtime for p in dumps.iterdir()), default=0.0) if dumps.is_dir() else 0.0
                if mtime != newest:
                    newest, last_change = mtime, now
                if now - last_change >= DUMP_IDLE_S and _dumped_all(dumps, plan):
                    stopped = (f"gfxrecon-replay --dump-resources was ended {DUMP_IDLE_S:.0f} s after its last dump "
                               "(every planned dispatch dumped; it did not exit: GFXReconstruct 1.0.5 waits forever "
                               "on a timeline semaphore after some programs' last dumped submit, IREE's among them)")
                    break
                if now - started > limit:
                    raise CaptureError(f"gfxrecon-replay --dump-resources did not finish in {limit:.0f} s and had not "
                                       f"dumped every planned dispatch (log {log})")
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    if not stopped and proc.returncode != 0:
        lines = [l.strip() for l in log.read_text(errors="replace").splitlines() if l.strip()]
        raise CaptureError(f"gfxrecon-replay --dump-resources failed with exit status {proc.returncode}: "
                           f"{lines[-1] if lines else 'no output'} (full log {log})")
    if stopped:
        with open(log, "a") as handle:
            handle.write(f"[workbench] {stopped}\n")
    return time.perf_counter() - started, stopped


def _relative_dumps(dumps: Path) -> None:
    """The dump JSON names its files by absolute path: keep their names only (the folder can move) and delete the
    files it does not name."""
    named = set()

    def walk(value):
        if isinstance(value, dict):
            for key, v in value.items():
                if key in ("file", "beforeFile") and isinstance(v, str):
                    value[key] = Path(v).name
                    named.add(value[key])
                else:
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for path in sorted(p for s in DUMP_JSON_SUFFIXES for p in dumps.glob(f"*{s}")):
        document = json.loads(path.read_text())
        walk(document)
        path.write_text(json.dumps(document, indent=1) + "\n")
        named.add(path.name)
    for path in dumps.iterdir():
        if path.is_file() and path.name not in named:
            path.unlink()


def _binary_files(calls) -> list[str]:
    """Every file name a converted call refers to (the values of string fields ending in .bin)."""
    names = []

    def walk(value):
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str) and value.endswith(".bin"):
            names.append(value)

    walk(calls)
    return sorted(set(names))
