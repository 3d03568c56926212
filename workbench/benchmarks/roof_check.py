"""The strict roofline check of a results folder: every compute row (a row with a GOP/s rate) of every table in
the folder is matched to the roof of its own instruction path, and may stand above that roof by no more than the
probe's own measured spread. A row whose path is unknown is an error, never skipped; a folder that holds two
different values of one roof is an error too.

    roofs = folder_roofs(folder)          # FolderRoofs: one value and one slack per instruction path
    checked = check_rows(frames, roofs)   # every compute row with its path, roof, roof_fraction, above
    roofs, checked = check_results_dir(folder)

The slack of a path is the probe's max / median rate over its own samples (`median_us / min_us` of the probe row
that sets the roof): a kernel's median can beat the probe's median by that much through sampling alone, no more.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from ..measure import ResultsReader
from .copy import copy_bytes_for, peak_copy_gbps
from .peak import roofs as measured_roofs

SAT, WRAP, MMA, FP32, INT32 = ("int8 dot (OpSDotAccSat)", "int8 dot (OpSDot + add)", "int8 cooperative matrix",
                               "fp32 fma", "int32 arithmetic (no dot instruction)")
# instruction path -> the key of its roof in `peak.roofs` and the probe rows that measure it
ROOF_KEYS = {SAT: "int8_sat_GOPs", WRAP: "int8_wrap_GOPs", MMA: "int8_mma_GOPs", FP32: "fp32_GFLOPs",
             # one int32 multiply-add per MAC against 4 MACs per packed dot at the same issue rate: the best packed
             # dot probe bounds it (the portable-fallback probe sweeps one chain count only: it is no roof)
             INT32: "int8_GOPs"}
PROBE_KERNELS = ("peak", "coopmat peak")
# re-measurements of a probe in other suites (coopmat-steps' chain / warp sweep, clocks read): the same roof measured
# again, so the folder's roof of that path is the best of all its measurements (one set of roofs, never a second)
PROBE_SWEEPS = {"coopmat peak sweep": "int8_mma_GOPs",
                "int8 dot peak sweep": {SAT: "int8_sat_GOPs", WRAP: "int8_wrap_GOPs"}}  # conv-loads: by method
# ET-VK's shaders at cff6f4dd32 (backends/vulkan/runtime/graph/ops/glsl): every int8 MAC through
# dotPacked4x8AccSat (common.glslh: dotPacked4x8AccSatEXT), except the depthwise conv (ivec4 multiply-adds) and the
# cooperative-matrix linear (coopMatMulAdd on int8 x int8 -> int32); a "fallback" variant replaces the dot by
# dotPacked4x8Acc_fallback, a vec4 float dot: fp32 FMAs.
ETVK_PATHS = {"q8ta_conv2d_pw": SAT, "q8ta_conv2d": SAT, "q8ta_conv2d_im2col": SAT, "q8ta_conv2d_transposed": SAT,
              "q8ta_linear": SAT, "q8ta_linear_gemv": SAT, "linear_q8ta_q8csw_tiled": SAT,
              "conv2d_q8ta_q8csw_q8to": SAT, "conv2d_q8ta_q8csw_q8to_linear_tiled": SAT, "q8ta_conv2d_dw": INT32,
              "linear_dq8ca_qw_coopmat": MMA,
              # the 4-bit linears dequantize to float and multiply-add in fp32 (fp16 in their half variants);
              # linear_dq8ca_q4gsw's int8 x int4 products go through dotPacked4x8AccSat
              "q4gsw_linear_gemv_coop__w_4x8": FP32, "q4gsw_linear_gemm__w_4x8": FP32,
              "q4gsw_linear_gemm__tin__w_4x8": FP32, "linear_q4gsw": FP32, "linear_q4gsw_tiled": FP32,
              "linear_q4gsw_coop": FP32, "linear_dq8ca_q4gsw": SAT, "linear_dq8ca_q4gsw_tiled": SAT}
# the workbench's kernels with float arithmetic and no `method` column: the 4-bit GEMV (fp32 FMAs, or packed fp16
# in its half2 / tiled builds: bounded by the fp32 roof, which the packed-fp16 probe matches on the H200)
FP32_KERNELS = ("q4_gemv",)
# tables that copy rows checked in their own files (the chart's points, an earlier check's output)
DERIVED_TABLES = ("roofline_points", "roofline_check")
NOT_BOUNDED = "torch: other instructions (cuBLAS / cuDNN tensor-core kernels, or the CPU), no probe of its path"


class RoofCheckError(ValueError):
    """A compute row no roof can be matched to, or a folder with two different values of one roof."""


@dataclass
class FolderRoofs:
    """One value per roof (`values`, the keys of `peak.roofs`), the slack of each instruction path (probe max /
    median rate), the table each roof came from, and whether any of those tables came from a quick run."""
    values: dict
    slack: dict
    sources: dict = field(default_factory=dict)
    quick: bool = False
    run_to_run: dict = field(default_factory=dict)  # roof key -> best / worst of its separate measurements

    def describe(self) -> str:
        lines = []
        for path, key in ROOF_KEYS.items():
            value = self.values.get(key, math.nan)
            if math.isfinite(value):
                lines.append(f"{path}: {value:,.0f} GOP/s (slack {self.slack[path]:.5f} = probe max / median, "
                             f"{self.sources.get(key, '?')})"
                             + (f"; measured in several runs, best / worst {self.run_to_run[key]:.4f}"
                                if key in self.run_to_run else ""))
        lines.append(f"copy: {self.values.get('copy_GBps', math.nan):,.0f} GB/s ({self.sources.get('copy_GBps', '?')})")
        return "\n".join(lines)


def other_api(row: dict) -> bool:
    """A row timed through another API than Vulkan (the field's GEMVs through torch: `timer` "cuda events …"): the
    probes' roofs and the Vulkan copy are not its own."""
    return str(row.get("timer", "")).startswith("cuda")


def is_etvk(row: dict) -> bool:
    """A row of ET-VK's own shaders: `workbench etvk run-items` (a family) or `etvk bench` (impl ET-VK)."""
    return isinstance(row.get("family"), str) or row.get("impl") in ("ET-VK", "etvk")


def instruction_path(row: dict) -> str | None:
    """The instruction path that does a compute row's MACs (a key of ROOF_KEYS); None for torch rows (not bounded
    by these probes); a RoofCheckError naming the row when there is no rule for it."""
    kernel, method, variant = (str(row.get(c, "") if isinstance(row.get(c), str) else "") for c in
                               ("kernel", "method", "variant"))
    if method.startswith("torch") or kernel.startswith("torch") or other_api(row):
        return None
    if is_etvk(row):
        family = row.get("family") if isinstance(row.get("family"), str) else kernel
        if "fallback" in variant:
            return FP32
        if family in ETVK_PATHS:
            return ETVK_PATHS[family]
        raise RoofCheckError(f"ET-VK row {describe_row(row)}: no instruction path known for family {family!r} "
                             f"(known: {sorted(ETVK_PATHS)}); add it to roof_check.ETVK_PATHS")
    if kernel in FP32_KERNELS:  # the GEMV's int8-activation build multiplies by OpSDot + add, its mma build by MMAs
        return {"dq8": WRAP, "mma": MMA}.get(row.get("dequant"), FP32)
    if kernel.startswith("llama.cpp-vulkan"):  # ggml's GEMV: its float path, or its integer-dot path (OpSDot + add)
        return WRAP if kernel.endswith("mmvq") else FP32
    if kernel.startswith("coopmat") or "coopmat" in method:
        return MMA
    if row.get("use_dot_ext") in (False, 0, "False"):
        return INT32
    if "fp32" in method or "float" in method:
        return FP32
    saturate = row.get("saturate")
    if saturate in (True, 1, "True"):
        return SAT
    if saturate in (False, 0, "False"):
        return WRAP
    if variant.startswith("q8ta_conv2d_pw"):  # rows older than the saturate column: the variant names its form
        return INT32 if variant.endswith("_fallback") else WRAP if "_wrap" in variant else SAT  # conv_pw.variant_name
    raise RoofCheckError(f"compute row {describe_row(row)}: no instruction path (expected a coopmat kernel, "
                         f"use_dot_ext, saturate True/False, an fp32 method or a known ET-VK family)")


def describe_row(row: dict) -> str:
    parts = [f"{c}={row[c]}" for c in ("table", "kernel", "method", "family", "variant", "shape", "tile")
             if isinstance(row.get(c), str) and row.get(c)]
    return "[" + ", ".join(parts) + f", GOP/s={row.get('GOP/s')}]"


def compute_rows(df: pd.DataFrame | None) -> pd.DataFrame:
    """The rows of a table that carry a compute rate: a finite GOP/s (with macs > 0 where the table counts MACs),
    the probes themselves left out (they are the roofs)."""
    if df is None or not len(df) or "GOP/s" not in df:
        return pd.DataFrame()
    rows = df[pd.to_numeric(df["GOP/s"], errors="coerce").notna()]
    if "macs" in rows:
        rows = rows[rows["macs"].fillna(0) > 0]
    if "kernel" in rows:
        rows = rows[~rows["kernel"].isin(PROBE_KERNELS + tuple(PROBE_SWEEPS))]
    return rows


def probe_slack(probe: pd.Series | dict) -> float:
    """max / median rate over a probe's samples: median_us / min_us of its row (≥ 1); NaN where the row does not
    record them (then a row of its path cannot be checked: `check_rows` says so)."""
    median, fastest = (float(probe.get(c, math.nan)) for c in ("median_us", "min_us"))
    if not (math.isfinite(median) and math.isfinite(fastest) and fastest > 0):
        return math.nan
    return max(median / fastest, 1.0)


def _probe_values(peak_df: pd.DataFrame, mma_df: pd.DataFrame | None) -> tuple[dict, dict]:
    """(roof key -> value, roof key -> the probe row that sets it) from one table's probe rows."""
    values, rows = {}, {}
    probes = peak_df[peak_df["kernel"] == "peak"] if peak_df is not None and len(peak_df) else pd.DataFrame()
    if len(probes):
        ext = probes[~probes["method"].astype(str).str.contains("fallback")]
        for path, method in ((SAT, SAT), (WRAP, WRAP), (FP32, "fp32 fma")):
            sel = ext[ext["method"] == method]
            if len(sel):
                rows[ROOF_KEYS[path]] = sel.loc[sel["GOP/s"].idxmax()]
        dots = ext[ext["method"].astype(str).str.startswith("int8 dot")]
        if len(dots):
            rows["int8_GOPs"] = dots.loc[dots["GOP/s"].idxmax()]
    if mma_df is not None and len(mma_df) and "GOP/s" in mma_df:
        ok = mma_df[(mma_df["kernel"] == "coopmat peak") & mma_df["GOP/s"].notna()]
        if "status" in ok:  # a probe whose results were wrong measured nothing: it is no roof
            ok = ok[ok["status"] == "ok"]
        if len(ok):
            rows["int8_mma_GOPs"] = ok.loc[ok["GOP/s"].idxmax()]
    values = {key: float(row["GOP/s"]) for key, row in rows.items()}
    return values, rows


def folder_roofs(folder) -> FolderRoofs:
    """The folder's one set of roofs: the probes of peak.csv (`workbench bench peak`: int8 dot forms, fp32, the copy
    rows) and the cooperative-matrix probe of coopmat.csv. Any other table holding probe rows (an old roofs.csv) must
    give the same values, else RoofCheckError names both tables and both values."""
    results = ResultsReader(folder)
    peak_all = results.load("peak")
    if peak_all is None:
        raise FileNotFoundError(f"no peak.csv in {results.folder}: run `workbench bench peak` first (the folder's "
                                f"roofs; it holds {results.names()})")
    coop = results.load("coopmat")
    copy_df = peak_all[peak_all["kernel"] == "copy"]
    copy_source = "peak.csv"
    if not len(copy_df) and results.has("copy"):
        copy_df, copy_source = results["copy"], "copy.csv"
    values, rows = _probe_values(peak_all, coop)
    sources = {key: "coopmat.csv" if key == "int8_mma_GOPs" else "peak.csv" for key in rows}
    sources["copy_GBps"] = copy_source
    seen = {key: (sources[key], value) for key, value in values.items()}
    for name in results.names():  # a second set of probes anywhere in the folder: same values, or an error
        if name in ("peak", "coopmat"):
            continue
        df = results.load(name)
        if df is None or "kernel" not in df or not df["kernel"].isin(PROBE_KERNELS).any():
            continue
        other, _ = _probe_values(df, df)
        for key, value in other.items():
            if key in seen and not math.isclose(value, seen[key][1], rel_tol=1e-9):
                raise RoofCheckError(f"{results.folder} holds two {key} roofs: {seen[key][1]:,.1f} in "
                                     f"{seen[key][0]} and {value:,.1f} in {name}.csv; keep one set (peak.csv, "
                                     f"coopmat.csv) and remove or regenerate {name}")
    runs = {}  # roof key -> the best of each table's measurements of it (the probe's run-to-run spread)
    for key, row in rows.items():
        runs.setdefault(key, {})[sources[key]] = float(row["GOP/s"])
    for name in results.names():
        df = results.load(name)
        if df is None or "kernel" not in df or "GOP/s" not in df:
            continue
        for kernel, keys in PROBE_SWEEPS.items():
            sweep = df[(df["kernel"] == kernel) & pd.to_numeric(df["GOP/s"], errors="coerce").notna()]
            if "status" in sweep:
                sweep = sweep[sweep["status"] == "ok"]
            # one roof per kernel, or one per method (a sweep of both int8-dot forms)
            for method, key in (keys.items() if isinstance(keys, dict) else ((None, keys),)):
                if method is not None and "method" not in sweep:
                    continue
                part = sweep if method is None else sweep[sweep["method"] == method]
                if not len(part):
                    continue
                best = part.loc[part["GOP/s"].idxmax()]
                runs.setdefault(key, {})[f"{name}.csv"] = float(best["GOP/s"])
                if key not in rows or float(best["GOP/s"]) > values[key]:
                    rows[key], values[key], sources[key] = best, float(best["GOP/s"]), f"{name}.csv"
    full = measured_roofs(copy_df, peak_all[peak_all["kernel"] == "peak"], coop)
    full.update(values)
    full["copy_GBps"] = peak_copy_gbps(copy_df) if len(copy_df) else math.nan
    slack = {path: probe_slack(rows[key]) if key in rows else math.nan for path, key in ROOF_KEYS.items()}
    quick = any(bool(df["quick"].fillna(False).astype(bool).any()) for df in (peak_all, coop)
                if df is not None and "quick" in df)
    spread = {key: max(v.values()) / min(v.values()) for key, v in runs.items() if len(v) > 1}
    return FolderRoofs(full, slack, sources, quick, spread)


def check_rows(frames, roofs: FolderRoofs) -> pd.DataFrame:
    """Every compute row of `frames` with its `path`, `roof_GOPs`, `slack`, `roof_fraction` and `above`
    (roof_fraction > slack). torch rows are kept with path NaN and `above` False: `excluded` says why. A row of a
    path whose roof the folder lacks is a RoofCheckError naming the row."""
    parts = [compute_rows(f) for f in frames if f is not None]
    parts = [p for p in parts if len(p)]
    columns = ["kernel", "method", "GOP/s", "path", "roof", "roof_GOPs", "slack", "roof_fraction", "above", "excluded"]
    if not parts:
        return pd.DataFrame(columns=columns)
    df = pd.concat(parts, ignore_index=True)
    paths, values, slacks, excluded = [], [], [], []
    for row in df.to_dict("records"):
        path = instruction_path(row)
        if path is None:
            paths.append(math.nan), values.append(math.nan), slacks.append(math.nan), excluded.append(NOT_BOUNDED)
            continue
        value = roofs.values.get(ROOF_KEYS[path], math.nan)
        if not math.isfinite(value):
            raise RoofCheckError(f"compute row {describe_row(row)} runs on {path}, but the folder has no {path} "
                                 f"roof ({ROOF_KEYS[path]}): run its probe")
        if not math.isfinite(roofs.slack.get(path, math.nan)):
            raise RoofCheckError(f"compute row {describe_row(row)} runs on {path}, but its probe row records no "
                                 f"sample spread (median_us, min_us): re-run `workbench bench peak`")
        paths.append(path), values.append(value), slacks.append(roofs.slack[path]), excluded.append(None)
    roof_fraction = df["GOP/s"].astype(float) / pd.Series(values, index=df.index)
    df = df.drop(columns=[c for c in columns[3:] if c in df])  # a frame checked before: its verdict is redone
    df = pd.concat([df, pd.DataFrame({"path": paths, "roof": paths,  # `roof`: the older name of the column
                                      "roof_GOPs": values, "slack": slacks, "excluded": excluded,
                                      "roof_fraction": roof_fraction}, index=df.index)], axis=1).copy()
    df["above"] = (df["roof_fraction"] > df["slack"]).fillna(False).astype(bool)
    return df


def check_results_dir(folder) -> tuple[FolderRoofs, pd.DataFrame]:
    """The check over every table of a results folder (each row tagged with its `table`), the derived tables
    (DERIVED_TABLES) left out: (the folder's roofs, every compute row against its roof)."""
    roofs = folder_roofs(folder)
    return roofs, check_rows(tables_of(folder, compute_rows), roofs)


def tables_of(folder, select) -> list[pd.DataFrame]:
    """`select(table)`'s rows of every table of a results folder but the derived ones (DERIVED_TABLES), each row
    tagged with its `table`; tables where it selects nothing left out."""
    results = ResultsReader(folder)
    frames = []
    for name in results.names():
        if name in DERIVED_TABLES:
            continue
        rows = select(results.load(name))
        if len(rows):
            frames.append(rows.assign(table=name))
    return frames


# --- the copy check: no bandwidth row faster than the copy at its own traffic, in its own regime -------------------

#: A kernel that moves B bytes is not faster than a copy that moves B bytes (B/2 read, B/2 written) in the same cache
#: regime, dispatched the same way, beyond the noise of the two measurements. A read-only kernel is allowed no more:
#: on the H200 the GEMV's weights-only streams (read-only, `diagnostic=2`) ran at 90-98 % of the copy of their bytes
#: (data/NVIDIA_H200/NOTES.md, third session), so the allowance is 1.0, stated here rather than guessed per row.
READ_ONLY_ALLOWANCE = 1.0
OTHER_API = ("timed through CUDA: its copy_fraction is against the Vulkan copy, another API's dispatch floor "
             "(cuda_copy_fraction is against its own)")
#: The noise of a copy whose spread a row does not record (rows older than copy_p90_us): the method's own bound on
#: a kept sample set's p10..p90 spread (measure.method.STABILITY_SPREAD).
UNRECORDED_COPY_NOISE = 0.10
COPY_NOT_CHECKED = {"diagnostic": "a diagnostic build (wrong by design: it moves fewer bytes than its row counts)",
                    "traffic_upper_bound": "a captured dispatch: its bytes are the ranges bound to it, an upper bound "
                                           "on what it moves (its % of copy is one too)"}


def copy_slack(row: dict) -> float:
    """How far a row's copy_fraction may exceed 1 through noise alone: the row's median / p10 (its own fast
    samples) × the copy's p90 / median (its slow ones; 1 + UNRECORDED_COPY_NOISE where the row does not record it),
    × READ_ONLY_ALLOWANCE."""
    median, p10 = (float(row.get(c, math.nan)) for c in ("median_us", "p10_us"))
    own = median / p10 if math.isfinite(median) and math.isfinite(p10) and p10 > 0 else 1.0
    copy_p90, copy_gbps, moved = (float(row.get(c, math.nan)) for c in ("copy_p90_us", "copy_GBps", "bytes"))
    copy_median = 2 * copy_bytes_for(int(moved)) / copy_gbps / 1e3 if copy_gbps > 0 and math.isfinite(moved) else math.nan
    theirs = (copy_p90 / copy_median if math.isfinite(copy_p90) and math.isfinite(copy_median) and copy_median > 0
              else 1.0 + UNRECORDED_COPY_NOISE)
    return max(own, 1.0) * max(theirs, 1.0) * READ_ONLY_ALLOWANCE


def copy_rows(df: pd.DataFrame | None) -> pd.DataFrame:
    """The rows of a table that carry a finite copy_fraction (kernels against the copy at their traffic), the
    copies themselves left out."""
    if df is None or not len(df) or "copy_fraction" not in df:
        return pd.DataFrame()
    rows = df[pd.to_numeric(df["copy_fraction"], errors="coerce").notna()]
    if "kernel" in rows:
        rows = rows[~rows["kernel"].isin(("copy", "dispatch floor"))]
    return rows


def check_copy_rows(frames) -> pd.DataFrame:
    """Every row of `frames` with a copy_fraction: its `cache` regime ("unknown" on rows that predate the column),
    `copy_slack` (`copy_slack`) and `above_copy` (copy_fraction > copy_slack); rows of COPY_NOT_CHECKED are kept
    with `copy_excluded` saying why and never above."""
    parts = [copy_rows(f) for f in frames if f is not None]
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=["copy_fraction", "cache", "copy_slack", "above_copy", "copy_excluded"])
    df = pd.concat(parts, ignore_index=True)
    records = df.to_dict("records")
    excluded = []
    for row in records:
        why = None
        for column, reason in COPY_NOT_CHECKED.items():
            value = row.get(column)
            if value not in (None, 0, False, "0", "False", "") and value == value:
                why = reason
        if why is None and other_api(row):
            why = OTHER_API
        excluded.append(why)
    df = df.drop(columns=[c for c in ("copy_slack", "above_copy", "copy_excluded") if c in df])
    df["cache"] = df["cache"].fillna("unknown") if "cache" in df else "unknown"
    df["copy_slack"] = [copy_slack(r) for r in records]
    df["copy_excluded"] = excluded
    df["above_copy"] = ((pd.to_numeric(df["copy_fraction"], errors="coerce") > df["copy_slack"])
                        & df["copy_excluded"].isna()).astype(bool)
    return df


def check_copy_results_dir(folder) -> pd.DataFrame:
    """`check_copy_rows` over every table of a results folder (each row tagged with its `table`)."""
    return check_copy_rows(tables_of(folder, copy_rows))
