"""A phone profile without a phone: each dispatch's time on an offline GPU from its compiler's own cost figures.

    phone.predict(dispatches, stats_frame, ["a740", "mali-g610"])   # a row per dispatch × GPU: bound, time
    phone.by_family(rows)                                           # summed per kernel family, with shares

`dispatches`: dicts {dispatch, pipeline, groups, local_size, bytes[, family]}; `stats_frame`: the rows of
`workbench.capture.stats.stats` (a row per pipeline × GPU, its `dispatches` listed). The model, per dispatch:
  arithmetic = invocations (groups × local size, each work group padded to whole waves) × the compiler's cycles per
               invocation / (cores × lanes × clock);
  memory     = the dispatch's bytes (its bindings' sizes) / the phone's memory bandwidth;
  time = the larger, with its bound named ("arithmetic:<pipe>", "load/store" or "memory").
Cycles per invocation: Turnip (ir3) — (instructions + its estimated (ss) + (sy) stall cycles) per lane;
PanVK — Mesa's pipe cycles, the slowest pipe named (already per core: its divisors are G78's per-core rates per
thread, 64 FMA … 4 texture, but its "1 load/store operation per cycle" is a warp's message, so ls / ldst are
divided by the warp width), lanes 1; RADV — ACO's
`Inverse Throughput` (cycles of one wave on a SIMD) / the wave size, lanes = SIMDs per CU. Static counts: a loop's body
counts once (no trip counts), so a loop-heavy kernel's arithmetic time is a floor. docs/phone.md shows the GPU table.
"""
from __future__ import annotations

import dataclasses
import math
import re

__all__ = ["Phone", "PHONES", "check_phone", "cycles_per_invocation", "predict", "by_family", "binding_bytes",
           "fit_floor", "COLUMNS"]


@dataclasses.dataclass(frozen=True)
class Phone:
    gpu: str            # the offline GPU (workbench.vendors.mesa.GPUS)
    soc: str            # a phone chip that ships it
    cores: int          # Adreno SPs / Mali cores / AMD CUs
    lanes: int          # per core, in the unit the compiler's cycles count (see the module docstring)
    clock_mhz: float
    bandwidth_gbs: float
    source: str         # where the figures come from; "estimate:" marks the ones no vendor publishes


PHONES = {p.gpu: p for p in (
    Phone("a740", "Snapdragon 8 Gen 2", 6, 256, 680, 67.2, "Qualcomm SM8550 brief: GPU 680 MHz, LPDDR5X 4200 MHz "
          "x 64 bit; estimate: 1536 FP32 lanes (2.09 TFLOPS reported / 2 / 680 MHz), 6 x 256 split"),
    Phone("a750", "Snapdragon 8 Gen 3", 6, 256, 903, 76.8, "Qualcomm SM8650 brief: GPU 903 MHz, LPDDR5X 4800 MHz "
          "x 64 bit; estimate: 1536 lanes as a740"),
    Phone("a730", "Snapdragon 8 Gen 1", 4, 256, 818, 51.2, "Qualcomm SM8450 brief: GPU 818 MHz, LPDDR5 3200 MHz "
          "x 64 bit; estimate: 1024 lanes"),
    Phone("mali-g610", "Dimensity 8100 (G610 MC6)", 6, 1, 860, 51.2, "MediaTek Dimensity 8100 spec: Mali-G610 MC6, "
          "LPDDR5 6400 Mbps x 64 bit; estimate: 860 MHz"),
    Phone("mali-g52", "Helio G85 (G52 MC2)", 2, 1, 1000, 14.4, "MediaTek Helio G85 spec: Mali-G52 MC2 1 GHz, "
          "LPDDR4X 1800 MHz x 32 bit"),
    Phone("rdna2", "Exynos 2200 (Xclipse 920)", 6, 2, 1306, 51.2, "Samsung Exynos 2200: LPDDR5 x 64 bit; "
          "estimate: 6 CUs (3 WGPs), 1306 MHz (reported, not published)"),
    Phone("rdna3", "Exynos 2400 (Xclipse 940)", 12, 2, 1095, 68.3, "Samsung Exynos 2400: LPDDR5X 8533 Mbps x 64 "
          "bit; estimate: 12 CUs, 1095 MHz (reported, not published)"),
)}
COLUMNS = ("dispatch", "family", "gpu", "soc", "invocations", "cycles_per_invocation", "pipe", "bytes",
           "arithmetic_us", "memory_us", "bound", "floor_us", "time_us", "reason")


def check_phone(gpu) -> Phone:
    from . import mesa
    name = mesa.check_gpu(gpu).name  # an unknown name: one line listing the names
    if name not in PHONES:
        raise ValueError(f"expected a GPU with a phone's figures ({', '.join(PHONES)}), got {gpu!r}")
    return PHONES[name]


def _num(row: dict, key: str) -> float:
    value = row.get(key)
    return float(value) if isinstance(value, (int, float)) and value == value else 0.0


def cycles_per_invocation(row: dict) -> tuple[float, str]:
    """(cycles, pipe) from one stats row (see the module docstring); (nan, reason) where the row has none."""
    compiler = str(row.get("compiler", ""))
    if "Turnip" in compiler:
        stalls = _num(row, "Estimated cycles stalled on SS") + _num(row, "Estimated cycles stalled on SY")
        return _num(row, "Instruction Count") + stalls, "issue"
    if "PanVK" in compiler:
        from . import mesa
        warp = dict(mesa.check_gpu(row["gpu"]).model).get("warp_size", 1)  # Mesa's LS rate is a warp's message
        pipes = {p: _num(row, f"Cycles {p}") / (warp if p in ("ls", "ldst") else 1)
                 for p in ("fma", "cvt", "sfu", "v", "t", "ls", "arith", "texture", "ldst") if f"Cycles {p}" in row}
        pipe = max(pipes, key=pipes.get) if pipes else "all"
        return (pipes[pipe], pipe) if pipes else (_num(row, "Cycles"), pipe)
    if "RADV" in compiler:
        return _num(row, "Inverse Throughput") / max(_num(row, "subgroup_size"), 1.0), "issue"
    return math.nan, f"no cost figures from {compiler or 'this row'}"


def predict(dispatches: list[dict], stats, gpus, floor_us: float = 0.0) -> "pd.DataFrame":
    """A row per dispatch × GPU (COLUMNS): the two bounds, the larger named, the time in µs (plus `floor_us`, a
    fixed cost per dispatch: 0 unless calibrated, `fit_floor`)."""
    import pandas as pd
    phones = [check_phone(g) for g in gpus]
    by_key = {(int(n), r["gpu"]): r for r in stats.to_dict("records") for n in str(r["dispatches"]).split()}
    rows = []
    for d in dispatches:
        for p in phones:
            r = by_key.get((int(d["dispatch"]), p.gpu), {})
            wave = max(int(_num(r, "subgroup_size")), 1)
            local = math.prod(d["local_size"])
            inv = math.prod(d["groups"]) * math.ceil(local / wave) * wave
            empty = str(r.get("reason", "")).startswith("compiler: empty program")  # folded away: no work
            cycles, pipe = (0.0, "empty") if empty else cycles_per_invocation(r) if r and not r.get("reason") \
                else (math.nan, r.get("reason") or f"no statistics for {p.gpu}")
            arith = inv * cycles / (p.cores * p.lanes * p.clock_mhz)  # cycles / MHz = µs
            memory = 0.0 if empty else d["bytes"] / (p.bandwidth_gbs * 1e3)  # B / (GB/s) = ns; / 1e3 = µs
            ok = cycles == cycles
            bound = ("empty" if empty else "memory" if memory >= arith else "load/store" if pipe in ("ls", "ldst")
                     else f"arithmetic:{pipe}") if ok else ""
            rows.append({"dispatch": d["dispatch"], "family": d.get("family", ""), "gpu": p.gpu, "soc": p.soc,
                         "invocations": inv, "cycles_per_invocation": cycles, "pipe": pipe if ok else "",
                         "bytes": d["bytes"], "arithmetic_us": arith, "memory_us": memory, "bound": bound,
                         "floor_us": floor_us,
                         "time_us": max(arith, memory) + floor_us if ok else math.nan, "reason": "" if ok else pipe})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def by_family(rows) -> "pd.DataFrame":
    """Per GPU and family: dispatches, those without a prediction (a compiler's failure: left out of the sum),
    predicted µs, its share of the GPU's total, the bounds met."""
    g = rows.groupby(["gpu", "family"], sort=False)
    out = g.agg(dispatches=("dispatch", "size"), unpredicted=("time_us", lambda t: int(t.isna().sum())),
                time_us=("time_us", "sum"),
                bounds=("bound", lambda b: ", ".join(f"{k} {v}" for k, v in b.value_counts().items()))).reset_index()
    out["share"] = out["time_us"] / out.groupby("gpu")["time_us"].transform("sum")
    return out


def fit_floor(rows, groups, reported: dict, top_us: float = 50.0) -> tuple[float, float]:
    """(floor µs, RMS share error in points): the fixed cost per dispatch (0 … `top_us`, 0.1 µs steps) that brings
    the predicted shares of `groups` (a label per row) closest to `reported` ({label: share})."""
    import numpy as np
    base = rows["time_us"].to_numpy(float) - rows["floor_us"].to_numpy(float)
    labels = np.asarray(groups)
    best = (0.0, math.inf)
    for floor in np.arange(0.0, top_us + 1e-9, 0.1):
        t = base + floor
        total = np.nansum(t)
        err = [100 * (np.nansum(t[labels == g]) / total - share) for g, share in reported.items()]
        rms = float(np.sqrt(np.mean(np.square(err))))
        if rms < best[1] - 1e-12:
            best = (round(float(floor), 1), rms)
    return best


def binding_bytes(size, fmt, extent) -> int:
    """A binding's bytes: its size, else an image's extent × texel bytes (the format's bit widths summed)."""
    if size is not None:
        return int(size)
    if not extent:
        return 0
    bits = sum(int(b) for b in re.findall(r"[RGBA](\d+)", str(fmt or "")))
    return math.prod(extent) * max(bits // 8, 1)
