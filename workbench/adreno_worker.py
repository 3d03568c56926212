"""Child process of `workbench.adreno`: compile SPIR-V with Turnip on the freedreno no-op DRM shim, read statistics.

    python -m workbench.adreno_worker REQUEST.json RESULT.json

Run only with the environment `workbench.adreno.shim_env()` builds (VK_ICD_FILENAMES → the Turnip build,
LD_PRELOAD → the shim, FD_GPU_ID → the chip): then the only Vulkan device this process sees is a fake Adreno, and
the caller's own Vulkan device is untouched. The request is JSON:

    {"gpu": 740, "jobs": [{"name": ..., "spirv": "<path of a .spv>", "spec_constants": {"3": 1},
                           "local_size": [64, 1, 1] | null, "required_subgroup_size": null}]}

The result goes to RESULT.json (not stdout: Mesa and the shim print there) as JSON lines, each flushed as soon as
it is known:

    {"device": {name, driver_name, driver_info, api_version, subgroup_size, ...}}
    {"index": 0, "name": ..., "statistics": {...}, "local_size": [...]}  |  {"index": 0, "name": ..., "error": "..."}
    ...
    {"done": true}

One job's exception is reported in its line and the others go on. A crash of the driver (ir3 has segfaults) ends the
process: the lines already written say which jobs finished, so the parent knows which shader crashed it, records
that, and starts a new worker for the rest.
"""
from __future__ import annotations

import json
import os
import sys
import traceback


def _device_summary(dev) -> dict:
    info = dev.info
    return {"name": info.name, "driver_name": info.driver_name, "driver_info": info.driver_info,
            "api_version": info.api_version, "subgroup_size": info.subgroup_size,
            "pipeline_executable_properties": bool(info.features.get("pipeline_executable_properties"))}


def _run_job(dev, job: dict) -> dict:
    with open(job["spirv"], "rb") as f:
        code = f.read()
    spec = {int(k): v for k, v in (job.get("spec_constants") or {}).items()}
    kwargs = {"spec_constants": spec, "local_size": job.get("local_size"), "capture_statistics": True,
              "name": job.get("name") or "shader"}
    if job.get("required_subgroup_size"):
        # Only reached when the runtime grew the option (the parent checks before it starts this process).
        kwargs["required_subgroup_size"] = int(job["required_subgroup_size"])
    pipeline = dev.pipeline(code, **kwargs)
    try:
        statistics = pipeline.statistics()
        local_size = list(pipeline.local_size)
    finally:
        pipeline.close()
    return {"name": kwargs["name"], "statistics": statistics, "local_size": local_size}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m workbench.adreno_worker REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    request_path, result_path = argv
    with open(request_path) as f:
        request = json.load(f)
    os.environ["WORKBENCH_VALIDATION"] = "0"  # never the validation layer here (the parent's env says so too)
    from workbench import vk

    selector = request.get("device_selector", "Adreno")
    with open(result_path, "w") as out:
        def emit(record: dict) -> None:
            out.write(json.dumps(record) + "\n")
            out.flush()  # in the OS's hands now: the next job may kill this process

        dev = vk.Device(selector, validation=False)
        try:
            emit({"device": _device_summary(dev)})
            for index, job in enumerate(request["jobs"]):
                try:
                    record = _run_job(dev, job)
                except Exception as exc:  # one bad shader must not lose the others' results
                    record = {"name": job.get("name"), "error": f"{type(exc).__name__}: {exc}",
                              "traceback": traceback.format_exc(limit=4)}
                emit({"index": index, **record})
        finally:
            dev.close()
        emit({"done": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
