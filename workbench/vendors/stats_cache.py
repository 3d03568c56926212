"""The vendors' compilers' statistics on disk, so that a second look at a shader costs nothing.

One JSON file per compile, keyed by everything that decides its result: the SPIR-V (sha256), the specialization
constants, the local size, the required subgroup size, the GPU (its name and the variables that make the driver see
that chip) and the compiler (Mesa's build stamp: recipe, Debian version, build time; a rebuild starts afresh).

Failures are kept as well, since they cost the most to find again:
    * "error"   the driver rejected the shader (its exception in the worker);
    * "crash"   the driver process died on it (ir3 segfaults on some shaders);
    * "unsupported" the shader declares a feature (cooperative matrices, int8 dot product, ...) the GPU lacks: not
      compiled;
    * "empty"   the compiler reported 0 instructions: no statistics of the shader's work;
    * "timeout" the compile ran past its time limit (PanVK's spilling register allocator on large tiles). The record
      keeps that limit: a later call allowing the same or less time gets the recorded timeout at once, one allowing
      more compiles again.

Asked for, cached results are compiled again: ``refresh="failures"`` (errors, crashes and timeouts) or
``refresh="all"``, or the same in $WORKBENCH_MESA_REFRESH for every call of the process and its children.

Folder: $WORKBENCH_MESA_STATS_DIR, else ``stats/`` in the Mesa cache folder; one sub-folder per compiler build.
"""
from __future__ import annotations

import collections
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

__all__ = ["REFRESH_ENV", "DIR_ENV", "REFRESH_VALUES", "StatsCache", "check_refresh", "counts", "folder"]

DIR_ENV = "WORKBENCH_MESA_STATS_DIR"
REFRESH_ENV = "WORKBENCH_MESA_REFRESH"
REFRESH_VALUES = ("none", "failures", "all")
# of a record; another value is not read (compiled again). 3 (2 was never committed): the failures "unsupported"
# (cooperative matrices the fake GPU lacks, found before compiling) and "empty" (0 instructions), and a bare VkResult
# with what the driver printed; records of format 1 held such rows as statistics or as a bare "VkErrorUnknown:".
FORMAT = 3

#: Shaders compiled by a driver ("compiled") and answered from the cache ("cached") in this process: tests count
#: them to show that a second look compiles nothing.
COUNTS: collections.Counter = collections.Counter()


def counts() -> dict:
    """{"compiled": n, "cached": n} so far in this process."""
    return {"compiled": COUNTS["compiled"], "cached": COUNTS["cached"]}


def folder(build_root: Path) -> Path:
    """$WORKBENCH_MESA_STATS_DIR, else `build_root`/stats."""
    env = os.environ.get(DIR_ENV)
    return Path(env).expanduser() if env else Path(build_root) / "stats"


def check_refresh(value=None) -> str:
    """"none", "failures" or "all" from an argument (None: $WORKBENCH_MESA_REFRESH, else "none"; True means
    "all", False "none"); ValueError naming what was given otherwise."""
    source = "refresh"
    if value is None:
        value, source = os.environ.get(REFRESH_ENV, "").strip() or "none", f"${REFRESH_ENV}"
    if value is True:
        return "all"
    if value is False:
        return "none"
    text = str(value).strip().lower()
    aliases = {"0": "none", "": "none", "no": "none", "false": "none", "1": "all", "yes": "all", "true": "all",
               "timeouts": "failures", "failed": "failures"}
    text = aliases.get(text, text)
    if text not in REFRESH_VALUES:
        raise ValueError(f"{source} must be one of {', '.join(REFRESH_VALUES)} (or true / false), got {value!r}")
    return text


def _atomic_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)  # a reader sees the whole file or none: parallel workers and notebooks share it
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class StatsCache:
    """The records of one compiler build (`compiler`: the build stamp's identity) under `root` (see `folder`)."""

    def __init__(self, root: Path, compiler: str):
        self.compiler = compiler
        self.root = Path(root) / hashlib.sha256(compiler.encode()).hexdigest()[:16]

    def key(self, job: dict, gpu_name: str, gpu_env) -> str:
        """The key of a `mesa` job dict (code, spec_constants, local_size, required_subgroup_size) on a GPU."""
        h = hashlib.sha256(job["code"])
        fields = {"spec_constants": job.get("spec_constants") or {}, "local_size": job.get("local_size"),
                  "subgroup_size": job.get("required_subgroup_size"), "gpu": gpu_name,
                  "gpu_env": sorted(map(list, gpu_env)), "compiler": self.compiler}
        if (job.get("entry_point") or "main") != "main":  # keys of "main" jobs stay as they were
            fields["entry_point"] = job["entry_point"]
        if job.get("internal"):  # a compile that keeps the ISA (workbench.vendors.isa): its own record
            fields["internal"] = True
        h.update(json.dumps(fields, sort_keys=True).encode())
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str, limit: float, refresh: str = "none") -> dict | None:
        """The cached result of `key`, or None when it must be compiled: absent, refresh says so, or a timeout
        recorded under a shorter limit than `limit`."""
        if refresh == "all":
            return None
        entry = _read_json(self._path(key))
        if not isinstance(entry, dict) or entry.get("format") != FORMAT:
            return None
        result = entry["result"]
        failure = result.get("failure")
        if failure and refresh == "failures":
            return None
        if failure == "timeout" and limit > float(result.get("timeout_s") or 0):
            return None
        out = dict(result)
        if failure:
            out["error"] = (f"{out['error']} [cached {entry.get('at', '')}: {REFRESH_ENV}=failures or "
                            f"refresh='failures' compiles it again]")
        return out

    def put(self, key: str, result: dict, name: str | None = None, gpu: str | None = None) -> None:
        """Record one compile's result: {"statistics", "local_size", "seconds"} or {"error", "failure",
        "timeout_s"?}; `name` and `gpu` only label the file for people reading the folder."""
        kept = {k: v for k, v in result.items() if k not in ("output", "traceback", "index")}
        _atomic_json(self._path(key), {"format": FORMAT, "name": name, "gpu": gpu, "compiler": self.compiler,
                                       "at": time.strftime("%Y-%m-%d %H:%M:%S"), "result": kept})

    def device(self, gpu_name: str) -> dict | None:
        """The device summary the driver gave for `gpu_name` (None before the first compile)."""
        entry = _read_json(self.root / f"device-{gpu_name}.json")
        return entry.get("device") if isinstance(entry, dict) else None

    def put_device(self, gpu_name: str, device: dict) -> None:
        _atomic_json(self.root / f"device-{gpu_name}.json", {"device": device, "compiler": self.compiler})
