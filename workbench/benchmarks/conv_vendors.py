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
           "COMPILER_GPUS", "NOT_BUILT", "SKIP_ACCUMULATORS", "skip_reason"]

VENDOR_TILE_GPUS = ("a740", "a750", "a730", "mali-g610", "mali-g52", "rdna2", "rdna3")
#: Every GPU a driver of the stable build compiles for (those with a note, such as Mali-G57, it refuses; those of the
#: newer build, Adreno 8xx and 5th-gen Mali, need `workbench compilers setup --mesa SOURCE` and are asked for by name).
COMPILER_GPUS = tuple(g.name for g in mesa.GPUS.values() if not g.note and g.build == "stable")
NOT_BUILT = "vendor compilers not built: run ./setup.sh compilers"

# PanVK (Mesa 25.0.7) spills on every tile of 32 accumulators or more (Threads 1), and its spilling register
# allocator slows down with the spills: on Mali-G610 and G52 (2 busy cores) 0.1-1 s up to 32 accumulators, 3-53 s
# at 64, 23-102 s at 128 and past 180 s for M2·N4·K4, past 30 s for every tile of 256. Those tiles are not
# compiled unless asked (`timeout=`): their row says why ("failure": "skipped"); the winner on Mali, a tile without
# spills, is among the small ones anyway.
SKIP_ACCUMULATORS = {"panvk": 128}


def skip_reason(tile, gpu, timeout: float | None = None) -> str | None:
    """Why `tile` is not compiled for `gpu` by default (None: it is); a `timeout` compiles it."""
    g = mesa.check_gpu(gpu)
    limit = SKIP_ACCUMULATORS.get(g.driver)
    accumulators = 16 * tile[0] * tile[1]
    if timeout is not None or limit is None or accumulators < limit:
        return None
    return (f"not compiled: {mesa.DRIVER_TITLES[g.driver]} takes minutes on {limit}+ accumulators ({accumulators} "
            f"here; it spills from 32 on); pass timeout= (seconds) to compile it")


def conv_pw_vendor_tiles(tiles=None, gpus=VENDOR_TILE_GPUS, *, shape=ADRENO_DEFAULT_SHAPE, local_size=None,
                         root=None, timeout: float | None = None) -> pd.DataFrame:
    """q8ta_conv2d_pw compiled for every tile and GPU: one row each.

    Each tile is compiled with the packed dot product (`use_dot_ext=True`, the path ET-VK takes where the device
    has it); where a compiler crashes on that path (Mesa 25.0.7's ir3 segfaults on the a750 for OpSDotAccSat), the
    row is the fallback path's and `path` says so and why. `timeout`: seconds one tile may take to compile
    (default `mesa.SHADER_TIMEOUT_S`); a tile that exceeds it gets an error row instead (failure "timeout"). Without
    a `timeout`, PanVK's tiles of 128 accumulators or more are not compiled (`skip_reason`; failure "skipped").
    Every result comes from, or goes into, the statistics cache.
    Columns: gpu, vendor, compiler, tile, TILE_M, TILE_N4, TILE_K4, accumulators (int32 per thread), path, then
    `mesa.summary`'s (registers, register_unit, spills, instructions, waves, max_waves, occupancy, subgroup_size,
    model_waves, model_occupancy), error (a tile no path compiled) and failure ("crash", "timeout", "error").
    Local size: ET-VK's rule for `shape` ((8, 8, 1) by default) unless `local_size` is given."""
    tiles = [tuple(t) for t in (ALL_TILES if tiles is None else tiles)]
    gpus = [mesa.check_gpu(g) for g in gpus]
    paths = {True: "dot product", False: "fallback"}

    made = {}  # (path, tile index) → its job: the SPIR-V once for every GPU

    def jobs(use_dot_ext: bool, which):
        for i in which:
            if (use_dot_ext, i) not in made:
                made[use_dot_ext, i] = adreno_job(tiles[i], use_dot_ext=use_dot_ext, shape=shape,
                                                  local_size=local_size)
        return [made[use_dot_ext, i] for i in which]

    rows = []
    for g in gpus:
        skipped = {i: why for i, t in enumerate(tiles) if (why := skip_reason(t, g, timeout))}
        wanted = [i for i in range(len(tiles)) if i not in skipped]
        compiled = mesa.stats_rows(jobs(True, wanted), g, root=root, errors="keep", timeout=timeout) \
            if wanted else pd.DataFrame()
        main = dict(zip(wanted, compiled.to_dict("records")))
        # only a crash is worth the other path: a slow compile would be as slow there, a refused GPU refuses both
        failed = [i for i in wanted if main[i].get("failure") == "crash"]
        fallback = mesa.stats_rows(jobs(False, failed), g, root=root, errors="keep", timeout=timeout) \
            if failed else None
        for i, tile in enumerate(tiles):
            if i in skipped:
                row = {"gpu": g.name, "vendor": g.vendor, "compiler": mesa.DRIVER_TITLES[g.driver],
                       **mesa.summary({"error": skipped[i]}, g), "failure": "skipped"}
            else:
                row = main[i]
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
