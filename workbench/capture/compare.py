"""The field's kernels beside ET-VK's: captures of several engines running the same ops at the same shapes
(`workbench.capture.engines.field`), one table with a row per dispatch and way of timing, and a summary per op and
engine (who is fastest, by how much).

    rows = compare.table([("caps/etvk", "etvk"), ("caps/ncnn", "ncnn")], timer=..., copies=..., gpus=["a740"])
    compare.summary(rows)

CLI: ``workbench capture compare DIR[=ENGINE] … --csv OUT [--ways warm,cold] [--gpus a740,g610,rdna3]``.

Which op a dispatch computes (`label`): ET-VK by its shader variant (`names`, else the ETDump's kernel) and only the
execution's dispatches (the ETDump's `phase`; prepacking at load is left out); ncnn by order: the field's program runs
each op as a one-layer net, one queue submit each, so the k-th submit is the k-th op of `field.OPS`; IREE by entry
point (``<function>_dispatch_<n>_…``, the function named as the op). Dispatches that are none of the ops (ET-VK's
staging copies) stay in the table with an empty op and are left out of the summary.

`capture` sits below `etvk` and `benchmarks`: the one timing method (`timer(device, dispatch)` → a row per way, e.g.
`etvk.model.capture_fidelity.time_dispatch`) and the one "% of copy" (`copies.annotate(row, bytes, regime)`, a
`benchmarks.copy.CopyAtTraffic`) are passed in by the caller (the CLI).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from .engines.field import OPS, Q4_OPS, shapes
from .format import CaptureError

ENGINES = ("etvk", "ncnn", "iree", "ggml")
REGIME_OF_WAY = {"warm": "hot", "cold": "cold"}     # a way of timing → the copy's cache regime
COLUMNS = ["engine", "op", "kernel", "dispatch", "pipeline", "entry_point", "groups", "local_size", "shape", "bytes",
           "exact", "way", "cache", "median_us", "p10_us", "p90_us", "GB/s", "copy_GBps", "copy_fraction",
           "copy_p90_us", "dispatch_floor_us", "traffic_upper_bound", "reason"]
STAT_COLUMNS = ("registers", "instructions", "spills", "occupancy")
ETVK_OPS = (("conv2d_pw", "conv1x1"), ("conv2d_dw", "dwconv3x3"), ("conv2d", "conv3x3"), ("linear", "linear"),
            ("addmm", "linear"), ("matmul", "linear"))


def parse_sources(texts) -> list[tuple[Path, str]]:
    """``DIR[=ENGINE]`` arguments → [(folder, engine)]; the engine, where not given, from the captured command
    (executor_runner: etvk, ``engines.ncnn``: ncnn, ``engines.iree``: iree). A one-line error otherwise."""
    from . import manifest
    found = []
    for text in texts:
        folder, _, engine = str(text).partition("=")
        path = Path(folder)
        if not (path / "capture.json").is_file():
            raise CaptureError(f"expected a capture folder (`workbench capture run` wrote capture.json), got {folder}")
        engine = engine.strip().lower() or guess_engine(manifest(path))
        if engine not in ENGINES:
            raise CaptureError(f"expected an engine among {', '.join(ENGINES)} for {folder}, got {engine!r}")
        found.append((path, engine))
    if not found:
        raise CaptureError("expected at least one capture folder DIR[=ENGINE], got none")
    return found


def guess_engine(info: dict) -> str:
    command = " ".join(map(str, info.get("command") or info.get("cmd") or []))
    for key, engine in (("executor_runner", "etvk"), ("engines.ncnn", "ncnn"), ("engines.iree", "iree"),
                        ("engines.ggml", "ggml")):
        if key in command:
            return engine
    return f"unknown (name it: DIR=ENGINE; the captured command was {command[:80]!r})"


def etvk_op(variant: str) -> str:
    for key, op in ETVK_OPS:
        if str(variant).startswith(key):
            return op
    return ""


def label(frame: pd.DataFrame, engine: str) -> pd.DataFrame:
    """`frame` (`capture.open`'s rows, for ET-VK joined with its ETDump) with `op` and `kernel`; ET-VK's prepacking
    dispatches left out."""
    out = frame.copy()
    if engine == "etvk":
        if "phase" in out:
            out = out[out["phase"] == "execute"]
        variant = out.get("variant", pd.Series([""] * len(out), index=out.index)).fillna("").astype(str)
        kernel = out.get("kernel", pd.Series([""] * len(out), index=out.index)).fillna("").astype(str)
        out["kernel"] = [v if v and "|" not in v else (k or v) for v, k in zip(variant, kernel)]
        out["op"] = [etvk_op(k) for k in out["kernel"]]
    elif engine == "ncnn":
        submits = list(dict.fromkeys(out["submit"]))
        by_submit = {s: (OPS[i] if len(submits) == len(OPS) else f"submit {i}") for i, s in enumerate(submits)}
        out["op"] = [by_submit[s] if len(submits) == len(OPS) else "" for s in out["submit"]]
        order = out.groupby("submit").cumcount()
        out["kernel"] = [f"{by_submit[s]} layer, dispatch {i}" for s, i in zip(out["submit"], order)]
    elif engine == "ggml":
        out["op"], out["kernel"] = _ggml_ops(out)
    else:
        out["kernel"] = out["entry_point"].astype(str)
        out["op"] = [e.split("_dispatch_")[0] if e.split("_dispatch_")[0] in OPS else "" for e in out["kernel"]]
    return out.reset_index(drop=True)


def _ggml_ops(out: pd.DataFrame) -> tuple[list, list]:
    """ggml's field program (`engines.ggml --net field`): the linear layer then the q4_0 GEMV, each found by the
    weights it binds (1024 × 1024 float32; q4_0 blocks of 18 B per 32), with the dispatches before it (a bias add
    ggml does not fuse, the integer-dot path's quantization of the vector) as that op's."""
    from .engines.field import FEATURES
    weights = {FEATURES * FEATURES * 4: ("linear", "mul_mat_vec_f32_f32"),
               FEATURES * FEATURES // 32 * 18: ("q4gemv", "mul_mat_vec_q4_0")}
    ops, kernels, pending = [""] * len(out), [""] * len(out), []
    for i, text in enumerate(out["bindings"].astype(str)):
        pending.append(i)
        sizes = {int(m) for m in re.findall(r"(\d+) B", text)}
        hit = next((weights[s] for s in sizes if s in weights), None)
        if hit:
            for j, row in enumerate(pending):
                ops[row] = hit[0]
                kernels[row] = hit[1] if row == i else f"{hit[0]} step {j + 1} of {len(pending)}"
            pending = []
    return ops, kernels


def _gpu_stats(folder, numbers, gpus) -> pd.DataFrame:
    """Per dispatch × GPU: registers, instructions, spills, occupancy (`capture.stats`), wide: `registers_<gpu>` …"""
    from .stats import stats
    if not gpus:
        return pd.DataFrame({"dispatch": []})
    frame = stats(folder, list(numbers), gpus=gpus, driver=False, lint=False)
    rows = {}
    for record in frame.to_dict("records"):
        for number in str(record["dispatches"]).split():
            row = rows.setdefault(int(number), {"dispatch": int(number)})
            for column in STAT_COLUMNS:
                row[f"{column}_{record['gpu']}"] = record.get(column)
            if record.get("reason"):
                row[f"stats_reason_{record['gpu']}"] = record["reason"]
    return pd.DataFrame(list(rows.values()) or {"dispatch": []})


def table(sources, *, timer, ways=("warm", "cold"), copies=None, gpus=(), names=None, join=None, device=None,
          echo=None) -> pd.DataFrame:
    """A row per dispatch × way of every (folder, engine) in `sources` (COLUMNS, then the per-GPU statistics):
    `timer(device, dispatch)` → rows per way with median_us, p10_us, p90_us, GB/s, bytes, exact, reason;
    `copies.annotate` adds the copy at the same traffic in the way's regime; `join(frame, folder)` adds ET-VK's
    phase / kernel (its ETDump); `names` names ET-VK's pipelines."""
    from .. import vk
    from . import dispatches, open as open_capture
    device = device or vk.get_device()
    frames = []
    for folder, engine in sources:
        listed = open_capture(folder, names=names if engine == "etvk" else None)
        if engine == "etvk" and join is not None:
            listed = join(listed, folder)
        listed = label(listed, engine)
        by_number = {d.dispatch: d for d in dispatches(folder)}
        stats = _gpu_stats(folder, listed["dispatch"], list(gpus))
        rows = []
        for _, item in listed.iterrows():
            d = by_number[int(item["dispatch"])]
            if echo:
                echo(f"{engine} dispatch {d.dispatch} ({item['op'] or 'not an op'}: {item['kernel'][:60]})")
            head = {"engine": engine, "op": item["op"], "kernel": item["kernel"], "dispatch": int(item["dispatch"]),
                    "pipeline": item["pipeline"], "entry_point": item["entry_point"], "groups": item["groups"],
                    "local_size": item["local_size"], "shape": shapes().get(item["op"], ""),
                    "bytes": int(sum(b.size or 0 for b in d.bindings)), "traffic_upper_bound": True}  # bound ranges
            for timed in timer(device, d):
                way = timed.get("way")
                row = {**head, "way": way, "exact": bool(timed.get("exact")), "reason": timed.get("reason") or "",
                       "cache": REGIME_OF_WAY.get(way, "unknown"), "median_us": timed.get("median_us", np.nan),
                       "p10_us": timed.get("p10_us", np.nan), "p90_us": timed.get("p90_us", np.nan),
                       "GB/s": timed.get("GB/s", np.nan),
                       **{k: timed[k] for k in ("device", "driver", "commit") if k in timed}}
                if copies is not None and not row["reason"] and way in REGIME_OF_WAY:
                    annotated = copies.annotate({"GB/s": row["GB/s"], "median_us": row["median_us"]}, head["bytes"],
                                                REGIME_OF_WAY[way])
                    row.update({k: annotated.get(k, np.nan) for k in ("copy_GBps", "copy_fraction", "copy_p90_us",
                                                                      "dispatch_floor_us")})
                rows.append(row)
        frame = pd.DataFrame(rows)
        if len(stats.columns) > 1 and len(frame):
            frame = frame.merge(stats, on="dispatch", how="left")
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    leading = [c for c in COLUMNS if c in out.columns]
    return out[leading + [c for c in out.columns if c not in leading]]


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per op × way × engine: the µs of the op's dispatches summed, dispatches, all exact, and against the fastest
    engine of that op and way: `vs_fastest` (µs ÷ the fastest's) and `fastest`."""
    found = rows[rows["op"].fillna("") != ""]
    if not len(found):
        return pd.DataFrame(columns=["op", "way", "engine", "us", "dispatches", "exact", "fastest", "vs_fastest"])
    grouped = found.groupby(["op", "way", "engine"], sort=False)
    out = grouped.agg(us=("median_us", "sum"), dispatches=("dispatch", "size"), exact=("exact", "all"),
                      bytes=("bytes", "sum")).reset_index()
    out.loc[~grouped["median_us"].apply(lambda s: s.notna().all()).values, "us"] = np.nan
    best = out.groupby(["op", "way"])["us"].transform("min")
    out["vs_fastest"] = out["us"] / best
    fastest = out.loc[out.groupby(["op", "way"])["us"].idxmin().dropna()].set_index(["op", "way"])["engine"]
    out["fastest"] = [fastest.get((o, w), "") for o, w in zip(out["op"], out["way"])]
    order = {op: i for i, op in enumerate(OPS + Q4_OPS)}
    return out.sort_values(["op", "way", "engine"], key=lambda s: s.map(order) if s.name == "op" else s,
                           kind="stable").reset_index(drop=True)


def headline(summary_frame: pd.DataFrame, way: str = "warm") -> str:
    """One line per op: each engine's µs and its ratio to the fastest, in `way`."""
    lines = []
    for op, group in summary_frame[summary_frame["way"] == way].groupby("op", sort=False):
        parts = ", ".join(f"{r.engine} {r.us:,.1f} µs ({r.vs_fastest:.2f}x)" for r in group.itertuples())
        lines.append(f"{op} ({way}): {parts}")
    return "\n".join(lines)
