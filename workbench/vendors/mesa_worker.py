"""Child process of `workbench.vendors.mesa`: compile SPIR-V with one Mesa driver on its no-op kernel driver and
read the statistics.

    python -m workbench.vendors.mesa_worker REQUEST.json RESULT.json

Run only with the environment `mesa.shim_env(gpu)` builds (VK_ICD_FILENAMES → one driver of the build, LD_PRELOAD →
its shim, FD_GPU_ID / PAN_GPU_ID / RADV_FORCE_FAMILY → the chip): then the only Vulkan device this process sees is
a fake GPU, and the caller's own Vulkan device is untouched. The request is JSON:

    {"gpu": "a740", "device_selector": "740", "capture_output": false,
     "jobs": [{"name": ..., "spirv": "<path of a .spv>", "spec_constants": {"3": 1},
               "local_size": [64, 1, 1] | null, "required_subgroup_size": null, "internal": false}]}

A job with "internal" also returns the driver's internal representations (NIR, the final ISA) in its
"representations" ([{executable, name, description, text}], `vk.Pipeline.internal_representations`).

With "capture_output", what the driver prints on stdout / stderr while it compiles a job (PanVK's compiler prints
its shader-db statistics there) is returned in that job's "output".

The result goes to RESULT.json (not stdout: Mesa and the shims print there) as JSON lines, each flushed as soon as
it is known:

    {"device": {name, driver_name, driver_info, api_version, subgroup_size, ...}}  |  {"device_error": "..."}
    {"index": 0, "name": ..., "statistics": {...}, "local_size": [...], "output": "...", "seconds": 0.4}
    |  {"index": 0, "error": ..., "seconds": ...}
    ...
    {"done": true}

One job's exception is reported in its line and the others go on. A crash of the driver (ir3 has segfaults) ends the
process: the lines already written say which jobs finished, so the parent knows which shader crashed it, records
that, and starts a new worker for the rest.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
import traceback

OUTPUT_LIMIT = 200_000  # characters of a job's captured output kept (the shader-db line is one of them)


def _device_summary(dev) -> dict:
    info = dev.info
    return {"name": info.name, "driver_name": info.driver_name, "driver_info": info.driver_info,
            "api_version": info.api_version, "subgroup_size": info.subgroup_size,
            "pipeline_executable_properties": bool(info.features.get("pipeline_executable_properties"))}


@contextlib.contextmanager
def _captured(enabled: bool):
    """Send file descriptors 1 and 2 (what C code in the driver prints) to a temp file; yields a list that holds
    the text afterwards."""
    text: list[str] = []
    if not enabled:
        yield text
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield text
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            text.append(sink.read().decode(errors="replace")[-OUTPUT_LIMIT:])


def missing_features(features: dict, code: bytes) -> list[str]:
    """What of `code`'s capabilities (`vk.spirv.needed_features`) a device with `features` (``DeviceInfo.features``)
    lacks, in words: a shader that declares one the fake GPU lacks is named, not read as statistics."""
    from ..vk.spirv import needed_features
    return [f.words for f in needed_features(code) if f.key in features and not features[f.key]]


def _driver_lines(text: str, n: int = 6) -> str:
    """The driver's own error lines of what it printed while compiling (its reason for a bare VkResult)."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    errors = [l for l in lines if any(w in l.lower() for w in ("error", "fail", "unsupported", "assert", "abort"))]
    return " | ".join((errors or lines)[-n:])


class DriverRefused(Exception):
    """The driver failed to compile a shader; the message is its VkResult and the lines it printed."""


def _run_job(dev, job: dict, capture: bool) -> dict:
    with open(job["spirv"], "rb") as f:
        code = f.read()
    name = job.get("name") or "shader"
    lacking = missing_features(dev.info.features, code)
    # Without cooperative matrices a driver crashes or folds the shader to nothing; the other features' opcodes
    # compile on drivers that do not expose them (PanVK's int8 dot product), so those are compiled and named.
    if any(what.startswith("cooperative matrices") for what in lacking):
        return {"name": name, "failure": "unsupported",
                "error": f"unsupported: {dev.info.name} ({dev.info.driver_name}) lacks {'; '.join(lacking)} — "
                         f"the shader's SPIR-V declares it; not compiled"}
    spec = {int(k): v for k, v in (job.get("spec_constants") or {}).items()}
    kwargs = {"spec_constants": spec, "local_size": job.get("local_size"), "capture_statistics": True,
              "name": name, "entry_point": job.get("entry_point") or "main",
              "capture_internal": bool(job.get("internal"))}
    if job.get("required_subgroup_size"):
        # Only reached when the runtime grew the option (the parent checks before it starts this process).
        kwargs["required_subgroup_size"] = int(job["required_subgroup_size"])
    failed = None
    with _captured(capture) as output:  # a bare VkResult's reason is what the driver printed
        try:
            pipeline = dev.pipeline(code, **kwargs)
        except Exception as exc:
            failed = exc
    if failed is not None:
        printed = _driver_lines(output[0] if output else "")
        raise DriverRefused(f"{type(failed).__name__}: {str(failed).strip() or 'no message'} — "
                            + (f"the device does not expose {'; '.join(lacking)}, which the shader declares; "
                               if lacking else "")
                            + (f"the driver printed: {printed}" if printed
                               else "the driver printed nothing while compiling" if capture
                               else "the driver's output was not captured")) from failed
    try:
        statistics = pipeline.statistics()
        local_size = list(pipeline.local_size)
        representations = pipeline.internal_representations() if job.get("internal") else None
    finally:
        pipeline.close()
    record = {"name": kwargs["name"], "statistics": statistics, "local_size": local_size}
    if representations is not None:
        record["representations"] = representations
    if lacking:  # compiled, but the device would not run it: ET-VK picks another shader there
        record["statistics"]["Not exposed by the device"] = "; ".join(lacking)
    if capture:
        record["output"] = output[0] if output else ""
    return record


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m workbench.vendors.mesa_worker REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    request_path, result_path = argv
    with open(request_path) as f:
        request = json.load(f)
    os.environ["WORKBENCH_VALIDATION"] = "0"  # never the validation layer here (the parent's env says so too)
    from workbench import vk

    selector = request.get("device_selector") or None
    capture = bool(request.get("capture_output"))
    with open(result_path, "w") as out:
        def emit(record: dict) -> None:
            out.write(json.dumps(record) + "\n")
            out.flush()  # in the OS's hands now: the next job may kill this process

        try:
            dev = vk.Device(selector, validation=False)
        except Exception as exc:  # the driver refused the fake chip: say so, not a traceback
            emit({"device_error": f"{type(exc).__name__}: {exc}".rstrip(": ")})
            return 3
        try:
            emit({"device": _device_summary(dev)})
            for index, job in enumerate(request["jobs"]):
                start = time.perf_counter()
                try:
                    record = _run_job(dev, job, capture)
                except Exception as exc:  # one bad shader must not lose the others' results
                    record = {"name": job.get("name"), "error": str(exc) if isinstance(exc, DriverRefused)
                              else f"{type(exc).__name__}: {exc}",
                              "traceback": traceback.format_exc(limit=4)}
                emit({"index": index, **record, "seconds": round(time.perf_counter() - start, 3)})
        finally:
            dev.close()
        emit({"done": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
