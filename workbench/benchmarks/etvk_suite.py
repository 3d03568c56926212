"""The ET-VK suite: ET-VK's real kernels (from a checkout) beside the workbench's own kernels and the copy at the
same traffic, on one device in one run — the rows behind docs/etvk-kernels.md's figures."""
from __future__ import annotations

import pandas as pd

from .. import measure
from .copy import CopyAtTraffic
from ..etvk.run import execute, make, with_local_size
from ..etvk.codegen import Codegen, source

PR_19396 = "1ee58ed3b7"  # "Halve accumulator to lift Adreno occupancy" (TILE_N4 2 → 1)
# ET-VK picks 64×1×1; a 2-D 8×8 group on this 1-D grid leaves 56 of every 64 threads idle
LOCAL_SIZE_STUDY = ((1, 1, 1), (4, 1, 1), (8, 1, 1), (16, 1, 1), (256, 1, 1), (1024, 1, 1), (8, 8, 1))


def cases(quick: bool, gpu: bool) -> list[tuple[str, dict]]:
    if quick:
        ps, conv = [(1, 16, 6, 10)], [(1, 32, 8, 8)]
    elif gpu:
        ps, conv = [(1, 64, 128, 128), (1, 256, 512, 512)], [(1, 128, 64, 64), (1, 512, 128, 128)]
    else:
        ps, conv = [(1, 64, 64, 64)], [(1, 64, 32, 32), (1, 128, 32, 32)]
    out = []
    for shape in ps:
        out += [("q8ta_pixel_shuffle", dict(shape=shape)), ("q8ta_pixel_shuffle", dict(shape=shape, requantize=True)),
                ("q8ta_pixel_shuffle", dict(shape=shape, in_layout="4C1W", out_layout="4C1W")),
                ("q8ta_pixel_shuffle", dict(shape=shape, in_layout="4W4C", out_layout="4C1W")),
                ("pixel_shuffle", dict(shape=shape, storage="buffer", layout="CHANNELS_PACKED")),
                ("pixel_shuffle", dict(shape=shape, storage="texture3d", layout="CHANNELS_PACKED"))]
    for shape in conv:
        out += [("q8ta_conv2d_pw", dict(shape=shape)), ("q8ta_conv2d_pw", dict(shape=shape, fallback=True))]
    small = ps[0]
    out += [("q8ta_quantize", dict(shape=small)), ("q8ta_dequantize", dict(shape=small)),
            ("q8ta_clone", dict(shape=small, in_layout="4W4C", out_layout="4C1W"))]
    return out


def _workbench_pixel_shuffle(device, shape, requantize: bool, in_layout: str, out_layout: str,
                             sample_kw) -> list[dict]:
    """The workbench's own fused kernels at the same shape and layouts: per-word, and the 16-byte block kernel
    where it applies (4W4C → 4W4C)."""
    from ..kernels import pixel_shuffle as ps
    from ..kernels import pixel_shuffle_block as psb
    rows = []
    qparams = dict(in_scale=0.05, in_zero_point=2, out_scale=0.07 if requantize else 0.05,
                   out_zero_point=-3 if requantize else 2)
    for block in (False, True) if psb.block_applies(in_layout, out_layout, 2) else (False,):
        spec = psb.fused_spec(tuple(shape), 2, in_layout, out_layout, block=block, **qparams)
        with ps.Q8taPixelShuffleRun(device, spec) as runner, device.record(spec.variant) as rec:
            runner.record(rec)
            gpu, host = measure.sample_recording(rec, **sample_kw)
        row = measure.measurement_row("q8ta_pixel_shuffle", measure.environment(device), gpu, host_ns=host,
                                    bytes_moved=spec.bytes_moved())
        row.update(impl="workbench", variant=spec.variant, shape="x".join(map(str, shape)),
                   path="requant" if requantize else "passthrough", in_layout=in_layout, out_layout=out_layout)
        rows.append(row)
    return rows


def bench_suite(device, writer=None, *, executorch=None, quick: bool = False, show_progress: bool = True,
                revisions=(f"{PR_19396}^", PR_19396)) -> pd.DataFrame:
    """ET-VK's kernels at its working tree, the conv at both sides of PR #19396, the workbench's pixel shuffle
    kernels at the same shapes, and the copy at each kernel's traffic (`copy_GBps`, `copy_fraction`)."""
    gpu = not device.info.is_cpu
    sample_kw = measure.sampling(quick)
    gen = Codegen(source(executorch))
    plan = [(gen, k, o) for k, o in cases(quick, gpu)]
    for rev in revisions:  # the seed PR's accumulator change, on the conv shapes
        rgen = Codegen(source(executorch, rev=rev))
        plan += [(rgen, k, o) for k, o in cases(quick, gpu) if k == "q8ta_conv2d_pw" and not o.get("fallback")]
    dispatches = [(g, make(g, k, **o)) for g, k, o in plan]
    # what ET-VK's fixed local size of 64 is worth for the pixel shuffle at the largest shape
    largest = max((d for _, d in dispatches if d.variant == "q8ta_pixel_shuffle"), key=lambda d: d.bytes_moved)
    limit = device.info.max_workgroup_count
    dispatches += [(gen, with_local_size(largest, local)) for local in LOCAL_SIZE_STUDY
                   if all(-(-g // l) <= m for g, l, m in zip(largest.global_size, local, limit))]
    copies = CopyAtTraffic(device, [d.bytes_moved for _, d in dispatches], quick=quick,
                           show_progress=show_progress)
    rows = measure.Rows(writer)
    for g, d in measure.progress(dispatches, "ET-VK kernels", enabled=show_progress):
        row = execute(device, g, d, measure=True, statistics=True,
                      min_time_s=sample_kw.get("min_time_s", 0.2), max_time_s=5.0)
        row["impl"] = "ET-VK"
        if not row["correct"]:
            raise AssertionError(f"ET-VK's {d.variant} ({g.source.label}) does not match torch: "
                                 f"max |diff| {row['max_abs_diff']}, mismatch {row['mismatch']:.3%}")
        copies.annotate(row, d.bytes_moved)
        rows.append(row)
        if d.kernel == "q8ta_pixel_shuffle" and g is gen and not d.params.get("local_size_override"):
            for wb in _workbench_pixel_shuffle(device, tuple(int(v) for v in row["shape"].split("x")),
                                               row["path"] == "requant", row["in_layout"], row["out_layout"],
                                               sample_kw):
                copies.annotate(wb, wb["bytes"])
                wb["etvk_over_this"] = row["median_us"] / wb["median_us"]
                rows.append(wb)
    rows.extend(copies.frame.assign(impl="copy").to_dict("records"))
    rows.extend(copies.finish().assign(impl="copy").to_dict("records"))  # the copies again: their drift
    return pd.DataFrame(rows)
