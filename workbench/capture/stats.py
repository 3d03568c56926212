"""Statistics and lint of a capture's pipelines: each pipeline's SPIR-V (with its captured specialization and local
size) through the vendors' compilers (`workbench.vendors.mesa`: Turnip for Adreno, PanVK for Mali, RADV for AMD),
through the device's own driver where it reports pipeline statistics (VK_KHR_pipeline_executable_properties), and
through `workbench.checks.lint`.

    from workbench.capture import stats
    stats.stats("caps/model")                                   # a row per pipeline × GPU
    stats.stats("caps/model", gpus=["a740", "rdna3"], device=None)   # vendors only
    stats.coverage(frame)                                       # how many rows have statistics

A pipeline is what a dispatch binds: its SPIR-V, entry point and specialization bytes (dispatches that share them
share the row; `dispatches` lists them). Columns: pipeline, dispatches, entry_point, spec_constants, local_size, gpu,
vendor, compiler, the common statistics of `mesa.summary` (registers, register_unit, spills, instructions, waves,
max_waves, occupancy, subgroup_size, model_waves, model_occupancy), lint_errors, lint_warnings, lint (its findings,
check@instruction), reason (why a row has no statistics: Mesa not built, a compiler that rejected the shader, a
driver without pipeline statistics), then every raw statistic the compiler reported. The vendors' figures come from
Mesa's statistics cache where it has them (a second look compiles nothing).
"""
from __future__ import annotations

from ..checks.lint import lint_spirv
from .format import CapturedDispatch, spec_values
from .microscope import select
from .replay import launch_parameters, local_size_ids

__all__ = ["STATS_GPUS", "pipelines", "stats", "coverage"]

STATS_GPUS = ("a740", "mali-g610", "rdna2")  # one GPU per vendor compiler: Adreno, Mali, AMD
LEADING = ("pipeline", "dispatches", "entry_point", "spec_constants", "local_size", "gpu", "vendor", "compiler",
           "registers", "register_unit", "spills", "instructions", "waves", "max_waves", "occupancy", "subgroup_size",
           "model_waves", "model_occupancy", "lint_errors", "lint_warnings", "lint", "reason")


def pipelines(found: list[CapturedDispatch]) -> list[dict]:
    """The distinct pipelines of `found`, in order of first use: {"pipeline", "dispatches", "entry_point",
    "spec_constants" (decoded, the ids that carry the local size left out), "spec_text", "local_size",
    "spirv", "first" (its first dispatch), "index" (its place)}; "reason" where the SPIR-V cannot be read."""
    out: dict = {}
    for d in found:
        key = (d.spirv, d.entry_point, tuple(sorted(d.spec_words.items())))
        if key in out:
            out[key]["dispatches"].append(d.dispatch)
            continue
        entry = {"index": len(out), "pipeline": d.spirv_hash, "dispatches": [d.dispatch],
                 "entry_point": d.entry_point, "spirv": d.spirv, "first": d, "spec_constants": {}, "spec_text": "",
                 "local_size": None, "reason": ""}
        try:
            reflection, local = launch_parameters(d)
            values = spec_values(reflection.spec_constants, d.spec_words)
            entry["spec_text"] = ", ".join(f"{k}={v}" for k, v in values.items())
            entry["spec_constants"] = {k: v for k, v in values.items() if k not in local_size_ids(reflection)}
            entry["local_size"] = tuple(local)
        except ValueError as exc:  # CaptureError is one
            entry["reason"] = f"unreadable: {exc}"
        out[key] = entry
    return list(out.values())


def _lint_columns(p: dict) -> dict:
    try:
        found = lint_spirv(p["spirv"], p["pipeline"])
    except ValueError as exc:
        return {"lint_errors": None, "lint_warnings": None, "lint": f"not linted: {exc}"}
    return {"lint_errors": sum(f["severity"] == "error" for f in found),
            "lint_warnings": sum(f["severity"] == "warning" for f in found),
            "lint": "; ".join(f"{f['check']}@{f['instruction']}" for f in found)}


def _head(p: dict) -> dict:
    return {"pipeline": p["pipeline"], "dispatches": " ".join(map(str, p["dispatches"])),
            "entry_point": p["entry_point"], "spec_constants": p["spec_text"],
            "local_size": "x".join(map(str, p["local_size"])) if p["local_size"] else ""}


def _vendor_rows(found: list[dict], gpus, refresh) -> list[dict]:
    """A row per pipeline × vendor GPU (Mesa's compilers; a reason instead where they are not built)."""
    from ..vendors import mesa
    names = [mesa.check_gpu(g) for g in gpus]  # an unknown name is bad input: ValueError listing the names
    readable = [p for p in found if not p["reason"]]
    unread = [{"gpu": g.name, "vendor": g.vendor, "compiler": mesa.DRIVER_TITLES[g.driver], "_p": p["index"],
               "reason": p["reason"]} for g in names for p in found if p["reason"]]
    if not readable:
        return unread
    if not mesa.is_set_up():
        why = (f"Mesa's vendor compilers are not built in {mesa.cache_root()} (`workbench compilers setup` or "
               "./setup.sh compilers)")
        return unread + [{"gpu": g.name, "vendor": g.vendor, "compiler": mesa.DRIVER_TITLES[g.driver],
                          "_p": p["index"], "reason": why} for g in names for p in readable]
    jobs = [{"shader": p["spirv"], "name": str(i), "spec_constants": p["spec_constants"],
             "local_size": p["local_size"], "entry_point": p["entry_point"]} for i, p in enumerate(readable)]
    frame = mesa.stats_rows(jobs, gpu=names, errors="keep", refresh=refresh)
    rows = []
    for record in frame.to_dict("records"):
        p = readable[int(record.pop("name"))]
        error = record.pop("error", None)
        record.pop("failure", None), record.pop("local_size", None), record.pop("device", None)
        rows.append({**{k: v for k, v in record.items() if not _missing(v)}, "_p": p["index"],
                     "reason": f"compiler: {error}" if isinstance(error, str) and error else ""})
    return unread + rows


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _device_rows(found: list[dict], device) -> list[dict]:
    """A row per pipeline on the device itself: the driver's pipeline statistics, or why there are none."""
    from .. import vk
    info = device.info
    head = {"gpu": info.name, "vendor": info.vendor, "compiler": f"{info.driver_name} (this device's driver)"}
    if not info.features.get("pipeline_executable_properties"):
        why = (f"{info.name} ({info.driver_name}) reports no pipeline statistics "
               "(no VK_KHR_pipeline_executable_properties)")
        return [{**head, "_p": p["index"], "reason": p["reason"] or why} for p in found]
    rows = []
    for p in found:
        row = {**head, "_p": p["index"], "reason": p["reason"]}
        if not p["reason"]:
            launch = vk.Launch(p["spirv"], groups=(1, 1, 1), spec_constants=p["spec_constants"],
                               local_size=p["local_size"], entry_point=p["entry_point"], name=p["pipeline"])
            try:
                with launch.pipeline(device, capture_statistics=True) as pipeline:
                    statistics = pipeline.statistics()
                row["subgroup_size"] = statistics.get("Subgroup Size")
                row.update({k: v for k, v in statistics.items() if k != "Subgroup Size"})
            except (vk.VulkanError, ValueError) as exc:
                row["reason"] = f"driver: {exc}"
        rows.append(row)
    return rows


def stats(source, dispatches=None, *, gpus=STATS_GPUS, device=None, driver: bool = True, lint: bool = True,
          refresh=None):
    """A row per pipeline × GPU (module docstring) of `source` (a capture folder or a list of CapturedDispatch; all
    dispatches, or the `dispatches` numbers): `gpus` through Mesa's compilers (empty: none), and with `driver` the
    device (`device`, else the current one). `refresh` as `mesa.stats_many` takes it."""
    import pandas as pd

    from .. import vk
    found = pipelines(select(source, dispatches))
    rows = _vendor_rows(found, list(gpus), refresh) if gpus else []
    if driver:
        rows += _device_rows(found, device or vk.get_device())
    extra = [_lint_columns(p) if lint else {} for p in found]
    frame = pd.DataFrame([{**_head(found[r["_p"]]), **r, **extra[r["_p"]]} for r in rows])
    if not len(frame):
        return pd.DataFrame(columns=list(LEADING))
    frame = frame.sort_values("_p", kind="stable").drop(columns="_p").reset_index(drop=True)
    leading = [c for c in LEADING if c in frame]
    return frame[leading + [c for c in frame.columns if c not in leading]]


def coverage(frame) -> dict:
    """How much of a `stats` table has statistics: rows, with_statistics (no reason), share, and per GPU."""
    has = frame["reason"].fillna("") == "" if len(frame) else frame.get("reason", [])
    per_gpu = {g: f"{int(has[frame['gpu'] == g].sum())}/{int((frame['gpu'] == g).sum())}"
               for g in dict.fromkeys(frame["gpu"])} if len(frame) else {}
    rows = len(frame)
    return {"rows": rows, "with_statistics": int(has.sum()) if rows else 0,
            "share": float(has.mean()) if rows else 0.0, "per_gpu": per_gpu}
