"""The figures a results folder holds against the goals set for them: each probe against the device's theoretical
rate, the best conv tile of each dot form against its roof, the cooperative-matrix probe and GEMM, and the pixel
shuffle kernels against the copy at the same traffic. `workbench roofline-check` prints it.

    goals(folder) -> DataFrame: what, measured, unit, target (NaN: no target), met (None: no target)
"""
from __future__ import annotations

import math

import pandas as pd

from .measure import ResultsReader

GOALS = {"conv_of_roof": 0.80, "mma_probe_GOPs": 1000e3, "mma_gemm_of_probe": 0.50,
         "shuffle_passthrough_of_copy": 0.85, "shuffle_requant_of_copy": 0.80}


def goals(folder, roofs: dict | None = None) -> pd.DataFrame:
    from .benchmarks.roof_check import folder_roofs
    results = ResultsReader(folder)
    folder = results.folder
    if roofs is None:  # the folder's one set of roofs (an error where it holds two)
        roofs = folder_roofs(folder).values
    rows = []

    def add(what, measured, unit, target=math.nan):
        met = None if not math.isfinite(target) else bool(measured >= target)
        rows.append({"what": what, "measured": measured, "unit": unit, "target": target, "met": met})

    peak = results.load("peak")
    probes = peak[(peak["kernel"] == "peak") & peak["GOP/s"].notna()] if peak is not None and "GOP/s" in peak \
        else None
    if probes is not None and len(probes):  # the best of each probe (the file's rows were written one by one)
        for r in probes.loc[probes.groupby("method")["GOP/s"].idxmax()].to_dict("records"):
            add(f"probe {r['method']} (local {r['local_size']}, {r['chains']} chains)", r["GOP/s"], "GOP/s")
            if math.isfinite(r.get("probe_fraction", math.nan)):
                add(f"probe {r['method']} / theoretical {r['theoretical_GOPs']:,.0f} GOP/s", r["probe_fraction"],
                    "fraction")
    conv = results.load("conv_pw")
    if conv is not None and "GOP/s" in conv:
        vk_rows = conv[conv["method"].astype(str).str.startswith("vulkan") & conv["GOP/s"].notna()]
        if "shape_kind" in vk_rows:
            filling = vk_rows[vk_rows["shape_kind"] == "fills the device"]
        else:  # files written before rows carried shape_kind: every shape besides the ET-VK-like suite's
            from .benchmarks.conv import SUITE_SHAPES
            from .kernels.conv_pw import ConvPwShape
            suite = {ConvPwShape.coerce(s).label for s in SUITE_SHAPES}
            filling = vk_rows[~vk_rows["shape"].isin(suite)]
        for saturate, roof_key, form in ((True, "int8_sat_GOPs", "OpSDotAccSat"),
                                         (False, "int8_wrap_GOPs", "OpSDot + add")):
            sel = filling[filling["saturate"].astype(str) == str(saturate)]
            if len(sel) and math.isfinite(roofs.get(roof_key, math.nan)):
                best = sel.loc[sel["GOP/s"].idxmax()]
                add(f"conv best tile {best['tile']} {best['shape']} ({form}) / its roof", best["GOP/s"] /
                    roofs[roof_key], "fraction", GOALS["conv_of_roof"])
        torch_rows = conv[conv["method"].astype(str).str.startswith("torch._int_mm") & conv["GOP/s"].notna()]
        for r in torch_rows.to_dict("records"):
            add(f"torch._int_mm {r['shape']}", r["GOP/s"], "GOP/s")
    gap = results.load("conv_gap")
    if gap is not None and "load_cost" in gap and math.isfinite(roofs.get("int8_wrap_GOPs", math.nan)):
        for r in gap[gap["operands"] == "registers"].to_dict("records"):
            mem = gap[(gap["operands"] == "memory") & (gap["tile"] == r["tile"]) & (gap["shape"] == r["shape"])]
            if len(mem):
                add(f"conv {r['tile']} {r['shape']} (OpSDot + add) / roof: with operand loads", mem["GOP/s"].iloc[0]
                    / roofs["int8_wrap_GOPs"], "fraction")
            add(f"conv {r['tile']} {r['shape']} (OpSDot + add) / roof: without them (diagnostic)", r["GOP/s"] /
                roofs["int8_wrap_GOPs"], "fraction")
    coop = results.load("coopmat")
    if coop is not None:
        if (coop["status"] == "skipped").any():
            add(f"cooperative matrix: {coop['reason'].iloc[0]}", math.nan, "")
        elif "GOP/s" in coop:
            # only results that matched the host count: a wrong result measured nothing
            probes = coop[(coop["kernel"] == "coopmat peak") & coop["GOP/s"].notna() & (coop["status"] == "ok")]
            gemm = coop[(coop["kernel"] == "coopmat gemm") & coop["method"].astype(str).str.startswith("vulkan")
                        & coop["GOP/s"].notna() & (coop["status"] == "ok")]
            if not len(probes) and (coop["status"] == "WRONG").any():
                add("int8 cooperative-matrix probe: every result wrong, no roof", math.nan, "GOP/s",
                    GOALS["mma_probe_GOPs"])
            if len(probes):
                probe = probes["GOP/s"].max()
                add("int8 cooperative-matrix probe", probe, "GOP/s", GOALS["mma_probe_GOPs"])
                for shape, group in gemm.groupby("shape"):
                    best = group.loc[group["GOP/s"].idxmax()]
                    add(f"coopmat GEMM (int32 out) {shape} best {best['tile']} / probe", best["GOP/s"] / probe,
                        "fraction", GOALS["mma_gemm_of_probe"])
                conv = coop[(coop["kernel"] == "coopmat conv") & coop["GOP/s"].notna() & (coop["status"] == "ok")]
                for shape, group in conv.groupby("shape"):  # the pointwise conv itself: int8 out, fused requant
                    best = group.loc[group["GOP/s"].idxmax()]
                    add(f"coopmat conv (int8 out) {shape} best {best['tile']} / probe", best["GOP/s"] / probe,
                        "fraction", GOALS["mma_gemm_of_probe"])
                diagnostic = coop[(coop["kernel"] == "coopmat gemm")
                                  & coop["status"].astype(str).str.startswith("diagnostic")]
                for r in diagnostic.to_dict("records"):  # where the best tile's time goes
                    add(f"coopmat GEMM {r['shape']} {r['tile']} (diagnostic) / probe", r["GOP/s"] / probe,
                        "fraction")
            checked = coop[~coop["status"].astype(str).str.startswith("diagnostic")]  # wrong by design
            add("cooperative-matrix results exact", float((checked["status"] == "ok").mean()), "fraction", 1.0)
    frames = [df for df in (results.load("pixel_shuffle"), results.load("pixel_shuffle_limit")) if df is not None]
    shuffle = pd.concat(frames, ignore_index=True) if frames else None  # the suite's and the block suite's rows
    if shuffle is not None and "copy_fraction" in shuffle:
        if "exact" in shuffle:
            checked = shuffle[shuffle["impl"] == "block"]["exact"].astype(bool)
            add("pixel shuffle block kernels exact on this device", float(checked.mean()), "fraction", 1.0)
        fused = shuffle[shuffle["impl"].isin(["fused", "block"]) & shuffle["copy_fraction"].notna()]
        if len(fused):
            sizes = fused["shape"].map(lambda s: math.prod(int(v) for v in str(s).split("x")))
            big = fused[sizes == sizes.max()]
            for (in_l, out_l, qpath), group in big.groupby(["in_layout", "out_layout", "qpath"]):
                best = group.loc[group["copy_fraction"].idxmax()]
                target = GOALS["shuffle_passthrough_of_copy" if qpath == "passthrough" else "shuffle_requant_of_copy"]
                add(f"pixel shuffle {best['shape']} {in_l}→{out_l} {qpath}, best {best['variant']} / copy",
                    best["copy_fraction"], "fraction", target)
        copies = shuffle[(shuffle["impl"] == "requant-copy") & shuffle["copy_fraction"].notna()]
        for _, row in copies.iterrows():  # why requant misses (or not): its math where every access is a 16-byte run
            add(f"requant math on a plain 16-byte copy, {row['shape']} {row['qpath']} {row['variant']} / copy",
                row["copy_fraction"], "fraction")
    return pd.DataFrame(rows, columns=["what", "measured", "unit", "target", "met"])
