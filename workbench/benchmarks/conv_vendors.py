"""The pointwise int8 conv's accumulator tiles across vendors' compilers, without their GPUs.

    df = conv_pw_vendor_tiles(tiles=None, gpus=("a740", "mali-g610", "rdna2"))   # one row per tile and GPU
    vendor_tile_winners(df)                                                      # which tile wins where

Every tile (TILE_M, TILE_N4, TILE_K4) of the workbench's q8ta_conv2d_pw, compiled by the offline compilers of
`workbench.vendors.mesa` (Turnip's ir3 for Adreno, PanVK's bifrost/valhall backend for Mali, RADV's ACO for AMD):
registers, spills, instructions and each compiler's own occupancy figure. This module knows the kernel; the
compilers module does not (tests/test_import_structure.py).
"""
from __future__ import annotations

import pandas as pd

from ..vendors import mesa
from ..kernels.conv_pw import ALL_TILES, tile_label
from .conv import ADRENO_DEFAULT_SHAPE, adreno_job

__all__ = ["conv_pw_vendor_tiles", "vendor_tile_winners", "tile_compiler_columns", "VENDOR_TILE_GPUS",
           "COMPILER_GPUS", "NOT_BUILT"]

VENDOR_TILE_GPUS = ("a740", "a750", "a730", "mali-g610", "mali-g52", "rdna2", "rdna3")
#: Every GPU a driver of the build compiles for (those with a note, such as Mali-G57, it refuses).
COMPILER_GPUS = tuple(g.name for g in mesa.GPUS.values() if not g.note)
NOT_BUILT = "vendor compilers not built: run ./setup.sh compilers"

# PanVK's spilling register allocator (Mesa 25.0.7) runs for minutes on the largest tiles, where the others take
# seconds: those tiles get a shorter time limit on PanVK. A tile past it is kept in the statistics cache as a
# timeout (with that limit) and not compiled again; a longer `timeout=` tries again.
LARGE_TILE_ACCUMULATORS = 256
LARGE_TILE_TIMEOUT_S = {"panvk": 30.0}


def tile_timeout(tile, gpu, timeout: float | None = None) -> float | None:
    """Seconds `tile` may take to compile on `gpu`: `timeout` when given, else LARGE_TILE_TIMEOUT_S for a tile of
    LARGE_TILE_ACCUMULATORS or more on its driver, else None (mesa.SHADER_TIMEOUT_S)."""
    if timeout is not None:
        return timeout
    if 16 * tile[0] * tile[1] >= LARGE_TILE_ACCUMULATORS:
        return LARGE_TILE_TIMEOUT_S.get(mesa.check_gpu(gpu).driver)
    return None


def conv_pw_vendor_tiles(tiles=None, gpus=VENDOR_TILE_GPUS, *, shape=ADRENO_DEFAULT_SHAPE, local_size=None,
                         root=None, timeout: float | None = None) -> pd.DataFrame:
    """q8ta_conv2d_pw compiled for every tile and GPU: one row each.

    Each tile is compiled with the packed dot product (`use_dot_ext=True`, the path ET-VK takes where the device
    has it); where a compiler crashes on that path (Mesa 25.0.7's ir3 segfaults on the a750 for OpSDotAccSat), the
    row is the fallback path's and `path` says so and why. `timeout`: seconds one tile may take to compile
    (default `tile_timeout`: `mesa.SHADER_TIMEOUT_S`, shorter for PanVK's largest tiles); a tile that exceeds it
    gets an error row instead (failure "timeout"). Every result comes from, or goes into, the statistics cache.
    Columns: gpu, vendor, compiler, tile, TILE_M, TILE_N4, TILE_K4, accumulators (int32 per thread), path, then
    `mesa.summary`'s (registers, register_unit, spills, instructions, waves, max_waves, occupancy, subgroup_size,
    model_waves, model_occupancy), error (a tile no path compiled) and failure ("crash", "timeout", "error").
    Local size: ET-VK's rule for `shape` ((8, 8, 1) by default) unless `local_size` is given."""
    tiles = [tuple(t) for t in (ALL_TILES if tiles is None else tiles)]
    gpus = [mesa.check_gpu(g) for g in gpus]
    paths = {True: "dot product", False: "fallback"}

    made = {}  # (path, tile index) → its job: the SPIR-V once for every GPU

    def jobs(use_dot_ext: bool, which, g):
        for i in which:
            if (use_dot_ext, i) not in made:
                made[use_dot_ext, i] = adreno_job(tiles[i], use_dot_ext=use_dot_ext, shape=shape,
                                                  local_size=local_size)
        return [dict(made[use_dot_ext, i], timeout=tile_timeout(tiles[i], g, timeout)) for i in which]

    rows = []
    for g in gpus:
        main = mesa.stats_rows(jobs(True, range(len(tiles)), g), g, root=root, errors="keep")
        # only a crash is worth the other path: a slow compile would be as slow there, a refused GPU refuses both
        failed = [i for i, f in enumerate(main.get("failure", pd.Series([None] * len(main)))) if f == "crash"]
        fallback = mesa.stats_rows(jobs(False, failed, g), g, root=root, errors="keep") if failed else None
        for i, tile in enumerate(tiles):
            row = main.iloc[i].to_dict()
            row["path"] = paths[True]
            if fallback is not None and i in failed:
                first_error = str(row.get("error")).splitlines()[0][:160]
                row = fallback.iloc[failed.index(i)].to_dict()
                row["path"] = f"fallback (the dot-product path failed: {first_error})"
            row.update({"tile": tile_label(*tile), "TILE_M": tile[0], "TILE_N4": tile[1], "TILE_K4": tile[2],
                        "accumulators": 16 * tile[0] * tile[1]})
            rows.append(row)
    df = pd.DataFrame(rows)
    first = ["gpu", "vendor", "compiler", "tile", "TILE_M", "TILE_N4", "TILE_K4", "accumulators", "path",
             "registers", "register_unit", "spills", "instructions", "waves", "max_waves", "occupancy",
             "subgroup_size", "model_waves", "model_occupancy"]
    if "error" not in df:
        df["error"] = None
    return df[[c for c in first if c in df] + ["error"] + [c for c in df if c not in first and c != "error"]]


def vendor_tile_winners(df: pd.DataFrame) -> pd.DataFrame:
    """Per GPU, the tile that keeps the most accumulators in flight without spilling: the largest accumulators ×
    occupancy (int32 accumulators per thread × the compiler's fraction of resident waves), ties broken by fewer
    instructions per accumulator. A static proxy for throughput -- what a tile costs in registers against what
    it gives in reuse -- not a measurement. Columns: gpu, winner, accumulators, registers, register_unit,
    occupancy, in_flight (accumulators × occupancy), runner_up, tiles (with figures), tiles_failed."""
    rows = []
    for gpu, group in df.groupby("gpu", sort=False):
        ok = group[group["error"].isna() & group["occupancy"].notna()].copy()
        ok = ok[ok["spills"].fillna(0) == 0]
        if ok.empty:
            rows.append({"gpu": gpu, "winner": None, "tiles": 0, "tiles_failed": int(group["error"].notna().sum()),
                         "note": "; ".join(sorted(set(str(e)[:120] for e in group["error"].dropna())))})
            continue
        ok["in_flight"] = ok["accumulators"] * ok["occupancy"]
        ok["per_acc"] = pd.to_numeric(ok["instructions"], errors="coerce") / ok["accumulators"]
        ok = ok.sort_values(["in_flight", "per_acc"], ascending=[False, True])
        best = ok.iloc[0]
        rows.append({"gpu": gpu, "winner": best["tile"], "accumulators": best["accumulators"],
                     "registers": best["registers"], "register_unit": best["register_unit"],
                     "occupancy": best["occupancy"], "in_flight": best["in_flight"],
                     "runner_up": ok.iloc[1]["tile"] if len(ok) > 1 else None, "tiles": len(ok),
                     "tiles_failed": int(group["error"].notna().sum())})
    return pd.DataFrame(rows)


def tile_compiler_columns(tiles, gpu=mesa.DEFAULT_GPU, *, shape=ADRENO_DEFAULT_SHAPE, prefix: str = "vendor_",
                          timeout: float | None = None) -> dict[str, dict]:
    """tile label → one vendor compiler's figures for that tile at `shape` (its local size), for a table or a
    widget on a device that reports no registers itself: {prefix}gpu, compiler, registers, register_unit, spills,
    waves, max_waves, occupancy, path, error, failure ("timeout", "crash", "error" or None). From the statistics
    cache, so a tile costs one compile once; where the compilers are not built, every tile gets only {prefix}gpu
    and {prefix}error = NOT_BUILT."""
    g = mesa.check_gpu(gpu)
    tiles = [tuple(t) for t in tiles]
    if not mesa.is_set_up():
        return {tile_label(*t): {f"{prefix}gpu": g.name, f"{prefix}error": NOT_BUILT} for t in tiles}
    df = conv_pw_vendor_tiles(tiles, [g.name], shape=shape, timeout=timeout)
    keep = ("gpu", "compiler", "registers", "register_unit", "spills", "waves", "max_waves", "occupancy", "path",
            "error", "failure")
    return {r["tile"]: {f"{prefix}{k}": None if pd.isna(r.get(k)) else r.get(k) for k in keep}
            for r in df.to_dict("records")}
