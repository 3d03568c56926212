"""ET-VK's own per-dispatch events, read from an ETDump by ExecuTorch's devtools, as tidy rows.

With the event tracer compiled in, ET-VK's delegate (VulkanBackend.cpp) logs, per execution: the phases
``ETVK_COPY_INPUTS``, ``ETVK_COMPUTE_GRAPH_EXECUTE``, ``ETVK_COPY_OUTPUTS``, ``ETVK_EXECUTE`` (CPU wall times around
them), and one event per shader dispatch whose name is JSON built by ``DispatchNode::encode`` and
``make_operator_json``::

    {"operator": {"name": "et_vk.q8ta_conv2d_pw.default", "delegate_node_id": 3, "args": [...]},
     "kernel_name": "q8ta_conv2d_pw_float", "operator_id": 4, "dispatch_id": 4}

with the dispatch's GPU start / end from ET-VK's QueryPool (timestamps). A dispatch without ``operator`` is ET-VK's
own staging (input / output copies). ``executorch.devtools.Inspector`` reads the ETDump (no ETRecord needed); its
``raw`` column holds one time per execution, in ms.

:func:`dispatch_rows` gives one row per dispatch and execution; :func:`dispatch_table` the median over executions
after warm-up (the first execution also builds ET-VK's pipelines); :func:`phase_table` the phases;
:func:`kernel_table` dispatches and time per kernel.
"""
from __future__ import annotations

import json
import statistics
import warnings
from pathlib import Path

import pandas as pd

PHASES = ("ETVK_COPY_INPUTS", "ETVK_COMPUTE_GRAPH_EXECUTE", "ETVK_COPY_OUTPUTS", "ETVK_EXECUTE", "DELEGATE_CALL",
          "Method::execute")


class EtdumpError(ValueError):
    """The file is not an ETDump Inspector can read, or holds no ET-VK dispatch events."""


def inspector_frame(etdump) -> pd.DataFrame:
    """ExecuTorch's own reading of the ETDump (``Inspector.to_dataframe()``)."""
    from ...quiet import import_quietly
    path = Path(etdump)
    if not path.is_file():
        raise EtdumpError(f"no ETDump at {path}")
    devtools = import_quietly("executorch.devtools")
    with warnings.catch_warnings():
        # "Output Buffer not found" (no debug buffer was asked for) and importlib's deprecations: nothing to act on
        warnings.simplefilter("ignore")
        try:
            inspector = devtools.Inspector(etdump_path=str(path))
        except Exception as e:
            raise EtdumpError(f"{path} is not an ETDump executorch.devtools.Inspector can read: "
                              f"{type(e).__name__}: {e}") from e
        return inspector.to_dataframe()


def exact_durations_ns(etdump) -> dict[str, list[int]]:
    """{profile event name: [end - start in ns, one per execution]} from the ETDump's integers (ExecuTorch's own
    deserializer). ET-VK logs its dispatches at the GPU's absolute timestamps (about 1.8e18 ns on NVIDIA), which the
    Inspector turns into float milliseconds before subtracting: its durations come in steps of 2^-12 ms (244 ns), a
    ±5 % error on a 5 µs dispatch. {} where the deserializer cannot read the file (the Inspector's values stand)."""
    from ...quiet import import_quietly
    try:
        serialize = import_quietly("executorch.devtools.etdump.serialize")
        dump = serialize.deserialize_from_etdump_flatcc(Path(etdump).read_bytes())
    except Exception:  # an older or partial ETDump: the Inspector's reading is the one there is
        return {}
    out: dict[str, list[int]] = {}
    for run in dump.run_data or []:
        for event in run.events or []:
            p = event.profile_event
            if p is not None and p.delegate_debug_id_str:
                out.setdefault(p.delegate_debug_id_str, []).append(int(p.end_time) - int(p.start_time))
    return out


def parse_event_name(name: str) -> dict | None:
    """The fields of one ET-VK dispatch event's JSON name, or None for any other event."""
    if not isinstance(name, str) or not name.startswith("{"):
        return None
    try:
        event = json.loads(name)
    except json.JSONDecodeError:
        return None
    if "kernel_name" not in event:
        return None
    op = event.get("operator") or {}
    args = op.get("args") or []
    out = next((a for a in reversed(args) if a.get("type") == "TENSOR"), None)   # ET-VK's out arg is last
    first = next((a for a in args if a.get("type") == "TENSOR"), None)
    return {
        "dispatch_id": int(event.get("dispatch_id", -1)),
        "operator_id": int(event.get("operator_id", -1)),
        "delegate_node_id": op.get("delegate_node_id"),
        "operator": _short_op(op.get("name")) if op else "(staging)",
        "operator_full": op.get("name", ""),
        "kernel": event["kernel_name"],
        "input_sizes": "x".join(map(str, first["sizes"])) if first and "sizes" in first else "",
        "input_dtype": first.get("dtype", "") if first else "",
        "output_sizes": "x".join(map(str, out["sizes"])) if out and "sizes" in out else "",
        "output_dtype": out.get("dtype", "") if out else "",
        "output_storage": out.get("storage", "") if out else "",
        "output_packed_dim": out.get("packed_dim") if out else None,
        "args": json.dumps(args),
    }


def _short_op(name) -> str:
    if not name:
        return ""
    parts = str(name).split(".")
    if len(parts) > 1 and parts[-1] in ("default", "Tensor", "out", "int", "self"):
        parts = parts[:-1]
    return parts[-1]


def dispatch_rows(etdump, frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per dispatch and execution: execution, dispatch_id, operator_id, delegate_node_id, operator,
    kernel, sizes / dtypes / storage of its first input and its output, gpu_us."""
    df = inspector_frame(etdump) if frame is None else frame
    exact = exact_durations_ns(etdump) if frame is None else {}
    rows = []
    for _, event in df.iterrows():
        fields = parse_event_name(event["event_name"])
        if fields is None:
            continue
        whole = exact.get(event["event_name"], [])
        for execution, ms in enumerate(event["raw"]):
            us = whole[execution] / 1e3 if len(whole) == len(event["raw"]) else float(ms) * 1e3
            rows.append(dict(fields, execution=execution, gpu_us=us))
    if not rows:
        raise EtdumpError(f"{etdump}: no ET-VK dispatch events (was the runtime built with the event tracer, and did "
                          "the model delegate anything to Vulkan?)")
    return pd.DataFrame(rows)


def phase_rows(etdump, frame: pd.DataFrame | None = None) -> pd.DataFrame:
    df = inspector_frame(etdump) if frame is None else frame
    rows = []
    for _, event in df.iterrows():
        if event["event_name"] in PHASES:
            for execution, ms in enumerate(event["raw"]):
                rows.append({"phase": event["event_name"], "execution": execution, "us": float(ms) * 1e3})
    return pd.DataFrame(rows, columns=["phase", "execution", "us"])


def _warm(rows: pd.DataFrame, warmup: int) -> pd.DataFrame:
    executions = rows["execution"].max() + 1
    if executions <= warmup:
        raise ValueError(f"{executions} execution(s) recorded, all of them warm-up ({warmup}); "
                         f"expected more than {warmup}")
    return rows[rows["execution"] >= warmup]


def dispatch_table(rows: pd.DataFrame, warmup: int = 1) -> pd.DataFrame:
    """The median GPU µs of each dispatch over the executions after `warmup`, with min / max / runs."""
    warm = _warm(rows, warmup)
    keys = ["dispatch_id", "operator_id", "delegate_node_id", "operator", "kernel", "input_sizes", "input_dtype",
            "output_sizes", "output_dtype", "output_storage", "output_packed_dim", "args"]
    grouped = warm.groupby("dispatch_id", sort=True)
    out = grouped[keys].first().reset_index(drop=True)
    times = grouped["gpu_us"]
    out["gpu_us"] = times.median().values
    out["gpu_us_min"] = times.min().values
    out["gpu_us_max"] = times.max().values
    out["runs"] = times.count().values
    return out


def phase_table(phases: pd.DataFrame, warmup: int = 1) -> pd.DataFrame:
    if phases.empty:
        return pd.DataFrame(columns=["phase", "us", "us_min", "us_max", "runs"])
    warm = _warm(phases, warmup)
    g = warm.groupby("phase", sort=False)["us"]
    return pd.DataFrame({"phase": list(g.groups), "us": g.median().values, "us_min": g.min().values,
                         "us_max": g.max().values, "runs": g.count().values})


def kernel_table(dispatches: pd.DataFrame) -> pd.DataFrame:
    """Per kernel (shader variant): dispatches, total and median GPU µs, the operators it served."""
    g = dispatches.groupby("kernel", sort=False)
    out = pd.DataFrame({"dispatches": g.size(), "gpu_us": g["gpu_us"].sum(),
                        "gpu_us_median": g["gpu_us"].agg(statistics.median),
                        "operators": g["operator"].agg(lambda s: ",".join(sorted(set(s))))}).reset_index()
    return out.sort_values("gpu_us", ascending=False, ignore_index=True)
