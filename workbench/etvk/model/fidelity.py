"""Fidelity of the workbench's own dispatch: every dispatch of a model on ET-VK's runtime, timed through the
workbench's port of its family (same variant, shape, layouts and work-group sizes), timed beside the runtime's own
time for it.

    p = profile.profile("mobilenet_v2", executorch=...)
    rows = fidelity.time_items(drill.fidelity_items(p), executorch=...)   # the workbench's times, one row per way of timing
    table = fidelity.table(p, rows)          # per dispatch: runtime µs, workbench µs, ratio, correct
    fidelity.summary(table)                  # per family (and way of timing): median ratio, p10–p90, within 10 %

    workbench etvk fidelity mobilenet_v2 refinenet_like [--lowered ROOT] [--timestamps etvk workbench] --out DIR

How an item is timed, and why (each measured on the H200):
- compiled first, then a second of copies: between items the GPU idles down to 345 MHz, which made the workbench
  3–4× slow;
- 20 copies of the dispatch back to back per submit: a lone dispatch submitted again and again lets the clock sag to
  ~1,300 MHz, where a model keeps the GPU busy;
- timestamps where ET-VK writes them (``timestamps="etvk"``): the start before the dispatch's barrier, so the barrier
  counts in the dispatch's time (``DispatchNode::encode``); ``"workbench"`` keeps the barrier outside both intervals;
- ``barriers``: ``"full"`` (all commands, memory read / write: what ET-VK widens a write-after-read to, and in a
  model run again and again every output was last read) or ``"light"`` (compute / transfer shader access);
- ``between``: what runs, untimed, before each copy of the dispatch (:func:`workbench.measure.parse_between`): nothing, a
  buffer copy (``"copy:MIB"``) or another pipeline, the workbench's shader copy (``"shader:MIB"``), as a model runs
  other ops between two of its dispatches; a large one evicts the copy's inputs from the last-level cache;
- items with the same family and options are measured once; every dispatch that has them gets the rows
  (``measured_as`` names the dispatch that was measured).
"""
from __future__ import annotations

import json
import sys

import pandas as pd

from ...measure.ways import BARRIERS, TIMESTAMPS, WAY_COLUMNS
from . import drill

WITHIN = 0.10     # the goal: the workbench within 10 % of ET-VK's runtime


def _key(item) -> str:
    return json.dumps([item["family"], item["options"]], sort_keys=True, default=list)


def time_items(items, *, executorch=None, rev: str | None = None, timestamps=("etvk",), between=("none",),
           barriers=("light",),
           back_to_back: int = 20, warm_seconds: float = 1.0, statistics: bool = False, csv=None, device=None,
           quiet: bool = False) -> pd.DataFrame:
    """Each item ({model, dispatch_id, kernel, family, options}: :func:`.drill.fidelity_items`) through the
    workbench's dispatch, timed once per (timestamps, between) way; rows written to `csv` as each one finishes."""
    from ... import vk
    from ..codegen import Codegen, source
    from ...measure import parse_between
    echo = (lambda *_: None) if quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    bad = [t for t in timestamps if t not in TIMESTAMPS] + [b for b in barriers if b not in BARRIERS]
    if bad or not timestamps or not between or not barriers:
        raise ValueError(f"timestamps must be 'etvk' or 'workbench', barriers 'light' or 'full', between non-empty; "
                         f"got timestamps={list(timestamps)}, barriers={list(barriers)}, between={list(between)}")
    for b in between:
        parse_between(b)                  # a bad one fails before anything runs
    gen = Codegen(source(executorch, rev=rev))
    device = device or vk.get_device()
    modes = [(t, b, f) for t in dict.fromkeys(timestamps) for b in dict.fromkeys(between)
             for f in dict.fromkeys(barriers)]
    measured: dict[str, tuple[int, list[dict]]] = {}
    rows = []
    for n, item in enumerate(items, 1):
        head = {k: v for k, v in item.items() if k != "options"}
        key = _key(item)
        fresh = key not in measured
        if fresh:
            measured[key] = (item["dispatch_id"], _time_item(device, gen, item, modes, back_to_back, warm_seconds,
                                                             statistics))
        first, got_rows = measured[key]
        reused = "" if fresh else f" (as measured for dispatch {first})"
        for got in got_rows:
            rows.append({**head, "options": json.dumps(item["options"]), "measured_as": first, **got})
            # every item gets its line, a reused one too: the counter reaches len(items)
            mode = f" [{got['timestamps']} timestamps, {got['between']} between, {got['barriers']} barriers]"
            echo(f"{n}/{len(items)} {item['family']} {got.get('variant')}{mode if len(modes) > 1 else ''}: "
                 f"{got.get('median_us', float('nan')):.2f} µs, correct={got.get('correct')}"
                 f"{reused}{'  ' + got['error'] if 'error' in got else ''}")
        if csv is not None:
            pd.DataFrame(rows).to_csv(csv, index=False)      # every finished row, at once
    return pd.DataFrame(rows)


def _time_item(device, gen, item, modes, back_to_back, warm_seconds, statistics):
    try:
        d = drill.prepare(device, gen, item["family"], item["options"], warm_seconds=warm_seconds)
    except (ValueError, RuntimeError) as e:   # a refused case is a row per way that says why, not the end
        return [{"timestamps": t, "between": b, "barriers": f, "error": f"{type(e).__name__}: {e}"}
                for t, b, f in modes]
    out = []
    for t, b, f in modes:                 # each way of timing the same item, one after another: paired rows
        try:
            out.append(drill.timed(device, gen, d, timestamps=t, barriers=f, between=b, back_to_back=back_to_back,
                                   statistics=statistics))
        except (ValueError, RuntimeError) as e:
            out.append({"timestamps": t, "between": b, "barriers": f, "error": f"{type(e).__name__}: {e}"})
    return out


def table(profile, timed: pd.DataFrame, revision: str | None = None) -> pd.DataFrame:
    """ET-VK's runtime µs beside the workbench's (rows :func:`time_items` wrote), per dispatch and way of timing."""
    revision = revision or profile.revisions[0]
    runtime = profile.dispatches[profile.dispatches["revision"] == revision][
        ["model", "dispatch_id", "operator", "kernel", "gpu_us", "device"]].rename(columns={"gpu_us": "runtime_us"})
    wb = timed.rename(columns={"median_us": "workbench_us", "variant": "workbench_variant"})
    for column in ("workbench_variant", "workbench_us", "correct", "global_size", "local_size", "error"):
        if column not in wb:
            wb[column] = None
    modes = [c for c in ("timestamps", "between", "barriers") if c in wb]
    wb = wb[["model", "dispatch_id", "family", "workbench_variant", "workbench_us", "correct", "global_size",
             "local_size", "options", "error", *modes]]
    out = runtime.merge(wb, on=["model", "dispatch_id"], how="inner")
    out["same_variant"] = out["workbench_variant"] == out["kernel"]
    out["ratio"] = pd.to_numeric(out["workbench_us"], errors="coerce") / out["runtime_us"]
    return out


def summary(fidelity_table: pd.DataFrame) -> pd.DataFrame:
    """Per family (and way of timing): dispatches, median ratio with p10–p90, the share within 10 %, all correct."""
    t = fidelity_table.dropna(subset=["ratio"])
    modes = [c for c in WAY_COLUMNS if c in t]

    def rows(group):
        r = group["ratio"]
        out = {"dispatches": len(r), "ratio_median": r.median(), "ratio_p10": r.quantile(0.1),
               "ratio_p90": r.quantile(0.9), "within_10pct": ((r - 1).abs() <= WITHIN).mean(),
               "runtime_us": group["runtime_us"].sum(), "workbench_us": group["workbench_us"].sum(),
               "all_correct": bool(group["correct"].astype(bool).all())}
        if "clocks_match" in group:  # both sides' clocks known and within a few % (capture_fidelity.CLOCKS_MATCH)
            same = r[group["clocks_match"].astype(object).eq(True)]
            out.update(clocks_matched=len(same), within_10pct_clocks_matched=((same - 1).abs() <= WITHIN).mean()
                       if len(same) else float("nan"))
        return pd.Series(out)
    per = t.groupby([*modes, "family"]).apply(rows, include_groups=False).reset_index()
    every = t.groupby(modes).apply(rows, include_groups=False).reset_index().assign(family="(all)") if modes else \
        rows(t).to_frame().T.assign(family="(all)")
    return pd.concat([per, every], ignore_index=True)


def timed_as(table: pd.DataFrame, **way) -> pd.DataFrame:
    """The rows of `table` timed that way: column=value or column=[values]; a column the table lacks (a table of
    before that way of timing) selects nothing away."""
    keep = pd.Series(True, index=table.index)
    for column, value in way.items():
        if column in table:
            keep &= table[column].isin(value if isinstance(value, list | tuple) else [value])
    return table[keep]


WARM = {"timestamps": "etvk", "barriers": "light", "between": "none"}
COLD = {"timestamps": "etvk", "barriers": "light", "between": "shader:128"}


def bracket(fidelity_table: pd.DataFrame, warm: dict | None = None, cold: dict | None = None) -> pd.DataFrame:
    """Per dispatch: the runtime's µs beside the workbench's warm time (nothing between copies: inputs in L2) and
    cold time (128 MiB through another pipeline between copies: inputs evicted). A dispatch inside a model runs
    somewhere between the two, so `inside` says whether the runtime lies in [min − 10 %, max + 10 %]."""
    warm, cold = warm or WARM, cold or COLD
    t = fidelity_table.dropna(subset=["ratio"])

    def pick(way, name):
        missing = [c for c in way if c not in t]
        if missing:
            raise ValueError(f"the fidelity table has no column {missing}: it needs rows timed as {way}")
        sel = timed_as(t, **way)
        if sel.empty:
            ways = t[list(way)].drop_duplicates().to_dict("records")
            raise ValueError(f"no rows timed as {way}; the table has {ways}")
        return sel.set_index(["model", "dispatch_id"])["workbench_us"].astype(float).rename(name)

    both = pd.concat([pick(warm, "warm_us"), pick(cold, "cold_us")], axis=1, join="inner")
    base = t.drop_duplicates(["model", "dispatch_id"]).set_index(["model", "dispatch_id"])[
        ["family", "kernel", "runtime_us"]]
    out = base.join(both, how="inner").reset_index()
    low = out[["warm_us", "cold_us"]].min(axis=1) * (1 - WITHIN)
    high = out[["warm_us", "cold_us"]].max(axis=1) * (1 + WITHIN)
    out["inside"] = (out["runtime_us"] >= low) & (out["runtime_us"] <= high)
    return out


def bracket_summary(bracket_rows: pd.DataFrame) -> pd.DataFrame:
    """Per family and for "(all)": dispatches, how many lie inside the warm…cold bracket, and their share."""
    def rows(inside):
        return {"dispatches": len(inside), "inside": int(inside.sum()), "share": inside.mean()}
    per = [{"family": f, **rows(g["inside"])} for f, g in bracket_rows.groupby("family")]
    return pd.DataFrame([*per, {"family": "(all)", **rows(bracket_rows["inside"])}]).set_index("family")
