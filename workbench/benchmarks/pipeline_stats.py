"""A pipeline's driver statistics as row columns: registers, spills, the occupancy they allow on the device that
compiled it, the binary's size — for every suite that times the workbench's own kernels (conv, q4_gemv)."""
from __future__ import annotations

import numpy as np

from ..vendors import occupancy as occ


def statistics_columns(device, pipeline, local_size) -> dict:
    """Driver statistics → registers, theoretical occupancy on `device` itself and the binary's size (NVIDIA reports
    its SASS bytes, 16 per instruction).

    NaN / "n/a (...)" where there is nothing to read: CPU devices (lavapipe: registers do not limit anything)
    and drivers without VK_KHR_pipeline_executable_properties."""
    info = device.info
    cols = {"registers": np.nan, "register_unit": None, "spills": np.nan, "scratch_bytes": np.nan,
            "occupancy": np.nan, "occupancy_limiter": None, "occupancy_model": None, "waves_or_warps": np.nan,
            "binary_bytes": np.nan}
    if info.is_cpu:
        why = "n/a (CPU device)"
    elif not info.features.get("pipeline_executable_properties") or not pipeline.capture_statistics:
        why = "n/a (no VK_KHR_pipeline_executable_properties)"
    else:
        why = None
    if why:
        cols.update(register_unit=why, occupancy_limiter=why, occupancy_model=why)
        return cols
    raw = pipeline.statistics()
    cols["binary_bytes"] = next((v for k, v in raw.items() if k.endswith("Binary Size")), np.nan)  # NVIDIA: SASS
    stats = occ.registers_from_statistics(raw)
    cols.update(registers=stats["registers"] if stats["registers"] is not None else np.nan,
                register_unit=stats["register_unit"] or "n/a (driver reports none)",
                spills=stats["spills"] if stats["spills"] is not None else np.nan,
                scratch_bytes=stats["scratch_bytes"] if stats["scratch_bytes"] is not None else np.nan)
    if stats["registers"] is None:
        cols.update(occupancy_limiter="n/a (no register count)", occupancy_model="n/a")
        return cols
    try:
        o = occ.occupancy_for_device(info, stats, local_size, subgroup_size=None)
    except ValueError as error:
        cols.update(occupancy_limiter=f"n/a ({error})", occupancy_model="n/a")
        return cols
    cols.update(occupancy=o.occupancy, occupancy_limiter=o.limiter, occupancy_model=o.model,
                waves_or_warps=o.waves_or_warps_active)
    return cols
