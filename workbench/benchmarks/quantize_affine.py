"""Quantize / dequantize affine throughput (`workbench.kernels.quantize_affine`) per block shape, storage and op,
beside the copy of the same traffic."""
from __future__ import annotations

import pandas as pd

from ..kernels.quantize_affine import OPS, AffineRun, AffineSpec
from ..measure import Rows, environment, measurement_row, progress, sample_recording, sampling
from .copy import CopyAtTraffic


#: Full-size benchmark tensor: a 1×64×128×128 fp32 activation (4 MiB).  quick: 1×8×16×16.
BENCH_SHAPE = (1, 64, 128, 128)
QUICK_SHAPE = (1, 8, 16, 16)


def bench_block_shapes(shape) -> list[tuple[str, tuple]]:
    """(granularity, block_size) pairs benchmarked for an NCHW ``shape``."""
    n, c, h, w = shape
    return [("per_tensor", (n, c, h, w)), ("per_channel", (1, 1, h, w)), ("per_token", (1, 1, 1, w)),
            ("group32", (1, 1, 1, min(32, w))), ("block8x8", (1, 1, min(8, h), min(8, w))),
            ("block4c4x4", (1, min(4, c), min(4, h), min(4, w)))]


def _bench_specs(quick: bool) -> list[AffineSpec]:
    shape = QUICK_SHAPE if quick else BENCH_SHAPE
    blocks = bench_block_shapes(shape)
    if quick:
        blocks = [blocks[0], blocks[2], blocks[4]]
    storages = [("buffer", "width"), ("buffer", "channels"), ("texture", "width"), ("texture", "channels")]
    if quick:
        storages = [("buffer", "width"), ("texture", "channels")]
    specs = []
    for gran, bs in blocks:
        for storage, packed in storages:
            for op in OPS:
                specs.append((gran, AffineSpec(op, shape, bs, storage, packed, "float32", "int8")))
    return specs


def bench_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True):
    """Quantize / dequantize benchmarks → a tidy DataFrame (rows also go to ``writer``).

    Per block shape (per-tensor, per-channel, per-token, groups of 32 along W, 8×8 HW blocks, 4C×4H×4W blocks) ×
    storage (buffer W- and C-packed with int8x4 words; texture W- and C-packed, rgba32i) × op (quantize fp32 → int8,
    dequantize int8 → fp32).  Columns beyond :func:`workbench.measure.measurement_row`'s: ``op``, ``variant``,
    ``storage``, ``layout``, ``granularity``, ``block_size``, ``num_blocks``, ``shape``, ``float_dtype``,
    ``quant_dtype``, ``threads``, ``repeats``, ``bytes_read``, ``bytes_written``, ``copy_GBps`` (best Vulkan copy of
    the same traffic: a copy of half the bytes), ``copy_fraction``, ``shader_copy_GBps``, ``shader_copy_fraction``.
    Copy rows (``op == "copy"``) come first.
    """
    env = environment(device)
    specs = _bench_specs(quick)
    sample_kw = sampling(quick)
    copies = CopyAtTraffic(device, [s.bytes_moved() for _, s in specs], quick=quick,
                           show_progress=show_progress)
    copy_df = copies.frame
    copy_df["op"] = "copy"
    rows = Rows(writer)
    rows.extend(copy_df.to_dict("records"))
    for gran, spec in progress(specs, "quantize affine", enabled=show_progress):
        moved = spec.bytes_moved()
        reps = 2 if quick else max(1, min(20, int(64 * 2**20 // max(moved, 1))))
        with AffineRun(device, spec) as run:
            with device.record(f"{spec.op} affine") as rec:
                for _ in range(reps):
                    run.record(rec)
                gpu, host = sample_recording(rec, repeats=reps, **sample_kw)
        row = measurement_row(
            f"{spec.op}_affine", env, gpu, host_ns=host, bytes_moved=moved, op=spec.op, variant=spec.variant,
            storage=spec.storage, layout=spec.layout.name, granularity=gran,
            block_size="x".join(map(str, spec.block_size)), num_blocks=spec.blocks,
            shape="x".join(map(str, spec.shape)), float_dtype=spec.float_dtype, quant_dtype=spec.quant_dtype,
            threads=spec.threads, repeats=reps, bytes_read=spec.bytes_read(), bytes_written=spec.bytes_written(),
            global_size=str(spec.global_size(device)), local_size=str(spec.local_size), timer="vulkan timestamps")
        copies.annotate(row, moved)
        rows.append(row)
    rows.extend(copies.finish().assign(op="copy").to_dict("records"))  # the copies again: their drift
    return pd.DataFrame(rows)


