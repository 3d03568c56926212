"""The vendor-adaptive table: the best tile / variant per device or compiler, and the C++ that would select it in
ET-VK's terms (`graph.device_is_adreno()`, `device_is_mali()`, `device_is_amd()`, `device_name_contains(...)`;
e.g. ExecuTorch 266e0dc455 appends `_tile2` to sdpa_compute_out_gqa_coop on Adreno only).

    vt = vendor_table("conv-pw")          # measured picks from data/*/tune_conv_pw.csv + Mesa's compilers (model)
    vt.table, vt.cpp

Two kinds of evidence, labelled in the `evidence` column:
- **measured**: a live device's tuner pick (`tune_<kernel>.csv`: the fastest correct trial);
- **model**: no such device here. Mesa's compilers (Turnip for Adreno, PanVK for Mali, RADV for AMD;
  `workbench.vendors.mesa`) compile every variant; those without spills rank first (then fewer spills), then by
  `model_score` = occupancy / instructions per output (the compiler's resident-wave fraction, which hides
  latency, over its static instruction count divided by the outputs one invocation writes; a loop body counts
  once). A model, not a measurement: it ignores memory traffic and the vendor's own compiler (Qualcomm's, Arm's,
  AMD's PAL) can differ.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["vendor_table", "VendorTable", "rank_by_model", "cpp_condition", "cpp_selector", "FAMILIES"]

FAMILIES = ("conv-pw", "sdpa-gqa-coop")
#: ET-VK's AV coop-GEMV, base and head_dim-tiled (266e0dc455), buffer storage, fp16: variant -> TILE_N4 (outputs)
SDPA_VARIANTS = {"sdpa_compute_out_gqa_coop_buffer_buffer_half": 1,
                 "sdpa_compute_out_gqa_coop_tile2_buffer_buffer_half": 2}
MODEL_GPUS = ("a740", "a750", "a730", "mali-g610", "mali-g52", "rdna2", "rdna3")
VENDOR_CONDITIONS = {"adreno": "graph.device_is_adreno()", "mali": "graph.device_is_mali()",
                     "amd": "graph.device_is_amd()"}


@dataclass
class VendorTable:
    table: pd.DataFrame      # one row per device / compiler: its pick, evidence, the C++ condition
    model: pd.DataFrame      # every variant on every compiler, with model_score and rank
    cpp: str                 # the selection as C++ (a comment block + a function)
    path: Path | None = None


def rank_by_model(stats: pd.DataFrame, outputs_col: str = "outputs") -> pd.DataFrame:
    """Per `gpu`: variants ranked best first (`model_rank` 1): those without spills before those with, then by
    fewer spills, then by model_score = occupancy / (instructions / outputs), higher first. Rows with an error or
    no occupancy get no rank."""
    df = stats.copy()
    instructions = pd.to_numeric(df["instructions"], errors="coerce")
    df["instructions_per_output"] = instructions / df[outputs_col]
    df["model_score"] = pd.to_numeric(df["occupancy"], errors="coerce") / df["instructions_per_output"]
    spills = pd.to_numeric(df["spills"], errors="coerce").fillna(0)
    usable = df["model_score"].notna()
    if "error" in df:
        usable &= df["error"].isna()
    df["model_rank"] = np.nan
    order = df[usable].assign(_spills=spills[usable]).sort_values(["gpu", "_spills", "model_score"],
                                                                  ascending=[True, True, False])
    df.loc[order.index, "model_rank"] = order.groupby("gpu").cumcount() + 1
    return df


def cpp_condition(vendor: str | None, device_match: str | None = None, *, chip_only: bool = False) -> str:
    """ET-VK's condition for a device: the vendor's `device_is_*()`, narrowed to a chip with
    `device_name_contains` (as QuantizedLinearQCSNW.cpp does for the Adreno 702) when `chip_only`."""
    base = VENDOR_CONDITIONS.get(vendor or "")
    chip = f'graph.device_name_contains("{device_match}")' if device_match else None
    if base and chip_only and chip:
        return f"{base} && {chip}"
    return base or chip or "true"


def _measured_picks(kernel: str, folders) -> list[dict]:
    from ..measure import REPO, ResultsReader
    stem = f"tune_{kernel.replace('-', '_')}"
    if folders is None:
        folders = sorted(p.parent for p in (REPO / "data").glob(f"*/{stem}.csv"))
    from .tuner import pick_of
    rows = []
    for folder in folders:
        results = ResultsReader(folder)
        trials = results.load(stem)
        if trials is None:
            raise ValueError(f"{folder} holds no {stem} table (run `workbench tune {kernel}` there first)")
        grid = results.load(f"{stem}_exhaustive")
        for key, group in trials.groupby("device_key"):
            table = grid[(grid["device_key"] == key) & (grid["state"] == "complete")] if grid is not None else None
            if table is not None and len(table):  # every config measured: the best of them, not the tuner's pick
                best = table.loc[table["objective_us"].idxmin()]
                pick, value = best["config"], float(best["objective_us"])
                how = f"exhaustive best of {len(table)} configs ({folder.name}/{stem}_exhaustive.csv)"
            else:
                pick, value = pick_of(group)
                if pick is None:
                    continue
                best = group[group["config"] == pick].iloc[0]
                how = (f"tuner pick, {int(group['evaluations'].max())} of {int(best['grid_size'])} configs measured "
                       f"({folder.name}/{stem}.csv)")
            device = str(best.get("device", key))
            rows.append({"gpu": device, "vendor": _vendor_of(device), "evidence": "measured", "pick": pick,
                         "median_us": value, "how": how, "device_match": device.split(" (")[0]})
    return rows


def _vendor_of(device_name: str) -> str | None:
    lowered = device_name.lower()
    for vendor, words in (("adreno", ("adreno",)), ("mali", ("mali",)), ("amd", ("radeon", "xclipse")),
                          ("nvidia", ("nvidia",))):
        if any(w in lowered for w in words):
            return vendor
    return None


def _conv_stats(gpus) -> pd.DataFrame:
    """The conv tiles on Mesa's compilers: data/llvmpipe/mesa_compilers_conv_pw_tiles.csv where it covers `gpus`
    (`workbench compilers tiles` wrote it), else compiled now (needs `workbench compilers setup`)."""
    from ..benchmarks.conv_vendors import conv_pw_vendor_tiles
    from ..measure import REPO
    cached = REPO / "data" / "llvmpipe" / "mesa_compilers_conv_pw_tiles.csv"
    df = pd.read_csv(cached) if cached.is_file() else None
    if df is None or not set(gpus) <= set(df["gpu"]):
        df = conv_pw_vendor_tiles(gpus=gpus)
        df["statistics_from"] = "compiled now"
    else:
        df = df[df["gpu"].isin(gpus)].copy()
        df["statistics_from"] = str(cached.relative_to(REPO))
    df["outputs"] = 16 * df["TILE_M"] * df["TILE_N4"]
    df["variant"] = [f"tile_m={m},tile_n4={n},tile_k4={k}" for m, n, k in zip(df["TILE_M"], df["TILE_N4"],
                                                                               df["TILE_K4"])]
    return df


def _sdpa_stats(gpus, executorch) -> pd.DataFrame:
    from .. import etvk
    gen = etvk.Codegen(etvk.source(executorch))
    df = etvk.stats_rows(None, gen, list(SDPA_VARIANTS), gpus=gpus)   # local size (64, 1, 1): no dispatch here
    df["outputs"] = df["variant"].map(SDPA_VARIANTS)     # head_dim texels per workgroup slot (TILE_N4)
    df["statistics_from"] = f"compiled now from {gen.source.label}"
    return df


def vendor_table(family: str, *, gpus=None, measured=None, executorch=None, out=None,
                 write: bool = True) -> VendorTable:
    """The table for `family` ("conv-pw": the workbench's tiles, measured picks from `measured` results folders
    (default every data/* folder with tune_conv_pw.csv) + the model on `gpus`; "sdpa-gqa-coop": ET-VK's base vs
    _tile2 AV coop-GEMV on the compilers, model only: the workbench has no SDPA dispatch). Written to
    `out`/vendor_table_<family>.csv (default data/llvmpipe/)."""
    from ..vendors import mesa
    from ..measure import REPO, ResultsWriter
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; families: {list(FAMILIES)}")
    gpus = [mesa.check_gpu(g).name for g in (gpus or MODEL_GPUS)]
    stats = _conv_stats(gpus) if family == "conv-pw" else _sdpa_stats(gpus, executorch)
    model = rank_by_model(stats)
    rows = _measured_picks("conv-pw", measured) if family == "conv-pw" else []
    for gpu in gpus:
        g = mesa.check_gpu(gpu)
        ranked = model[(model["gpu"] == gpu) & model["model_rank"].notna()].sort_values("model_rank")
        if ranked.empty:
            rows.append({"gpu": gpu, "vendor": g.vendor, "evidence": "model", "pick": None,
                         "how": "no variant compiled", "device_match": g.device_match})
            continue
        top = ranked.iloc[0]
        second = ranked.iloc[1] if len(ranked) > 1 else None
        rows.append({"gpu": gpu, "vendor": g.vendor, "evidence": "model", "pick": top["variant"],
                     "occupancy": top["occupancy"], "instructions_per_output": top["instructions_per_output"],
                     "model_score": top["model_score"], "spills": top["spills"],
                     "margin_pct": (top["model_score"] / second["model_score"] - 1) * 100 if second is not None
                     else np.nan,
                     "how": f"Mesa {mesa.DRIVER_TITLES[g.driver]} statistics ({top['statistics_from']}): "
                            "fewest spills, then occupancy / instructions per output",
                     "device_match": g.device_match})
    table = pd.DataFrame(rows)
    table["cpp_condition"] = _conditions(table)
    cpp = cpp_selector(family, table)
    path = None
    if write:
        folder = Path(out) if out else REPO / "data" / "llvmpipe"
        writer = ResultsWriter(folder / f"vendor_table_{family.replace('-', '_')}", {"family": family,
                                                                                    "gpus": gpus})
        for row in table.to_dict("records"):
            writer.append(row)
        writer.close()
        path = writer.csv_path
    return VendorTable(table, model, cpp, path)


def _conditions(table: pd.DataFrame) -> list[str]:
    """A vendor's condition where all its rows agree on the pick, else the chip's narrowed one."""
    out = []
    for _, row in table.iterrows():
        same_vendor = table[table["vendor"] == row["vendor"]] if row["vendor"] else table.iloc[0:0]
        agree = row["vendor"] in VENDOR_CONDITIONS and same_vendor["pick"].nunique(dropna=False) == 1
        out.append(cpp_condition(row["vendor"], row["device_match"], chip_only=not agree))
    return out


def cpp_selector(family: str, table: pd.DataFrame) -> str:
    """The table as the branch ET-VK's C++ would take: one `if` per distinct condition (chips before vendors),
    the measured or most common pick as the default."""
    picks = table.dropna(subset=["pick"])
    lines = [f"// {family}: best variant per device, generated by `workbench tune-vendors {family}`",
             "// evidence: measured = the tuner on a live device; model = Mesa's compilers (occupancy / instructions",
             "// per output; spilling variants last), not a measurement"]
    seen = {}
    for _, row in picks.sort_values("cpp_condition", key=lambda s: -s.str.count("&&")).iterrows():
        seen.setdefault(row["cpp_condition"], []).append(row)
    default = picks["pick"].mode().iloc[0] if len(picks) else None
    lines.append(f"std::string pick_{family.replace('-', '_')}_variant(ComputeGraph& graph) {{")
    for condition, rows in seen.items():
        if condition == "true":
            continue
        pick = rows[0]["pick"]
        who = ", ".join(f"{r['gpu']} ({r['evidence']})" for r in rows)
        lines.append(f"  if ({condition}) {{  // {who}")
        lines.append(f'    return "{pick}";')
        lines.append("  }")
    lines.append(f'  return "{default}";  // the most common pick')
    lines.append("}")
    return "\n".join(lines)
