"""Pack and unpack throughput per int8x4 layout (`workbench.kernels.pack`) against the copy roofline."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..kernels.copy import CopySpec, record_copy
from ..kernels.pack import PackSpec, nchw_words, record_pack
from ..layouts import normalize_sizes
from ..measure import environment, measurement_row, progress, sample_recording

INT8_LAYOUTS = ("4W4C", "4H4W", "4W", "4C", "4C1W")


def bench_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True,
                sizes=None) -> pd.DataFrame:
    """Pack and unpack throughput per int8x4 layout, next to the copy bandwidth of the same bytes on the same
    device (a roofline for a pure data movement kernel)."""
    sizes = normalize_sizes(sizes or ((1, 32, 24, 40) if quick else (1, 256, 128, 128)))  # 0.9 KiB / 4 MiB
    env = environment(device)
    min_time = 0.02 if quick else 0.2
    rows = []
    numel = int(np.prod(sizes))
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, sizes, dtype=np.int8)
    # the copy roofline for the same number of bytes (read + written)
    copy_bytes = max(16, -(-numel // 16) * 16)
    with device.buffer(nbytes=copy_bytes) as a, device.buffer(nbytes=copy_bytes) as b, device.record("copy") as rec:
        reps = 10
        for _ in range(reps):
            record_copy(rec, device, CopySpec(copy_bytes), b, a)
        gpu, host = sample_recording(rec, repeats=reps, min_time_s=min_time)
    copy_row = measurement_row("copy", env, gpu, host_ns=host, bytes_moved=2 * copy_bytes,
                               shape="x".join(map(str, sizes)), layout="-", direction="copy")
    rows.append(copy_row)
    if writer:
        writer.append(copy_row)
    jobs = [(layout, direction, False) for layout in INT8_LAYOUTS for direction in ("pack", "unpack")]
    jobs.insert(1, ("4W4C", "pack", True))  # the 16-byte block kernel next to the generic one
    for layout, direction, block in progress(jobs, "pack/unpack", enabled=show_progress):
        spec = PackSpec(layout, sizes, direction, block)
        definition = spec.definition
        nchw = nchw_words(x)
        packed = definition.pack(x)
        src_data, dst_bytes = (nchw, 4 * spec.num_words) if direction == "pack" else (packed, 4 * spec.nchw_words)
        with device.buffer(src_data) as src, device.buffer(nbytes=dst_bytes) as dst, \
                device.uniform(definition.buffer_metadata(sizes)) as meta, device.record(direction) as rec:
            reps = 10
            for _ in range(reps):
                record_pack(rec, device, spec, dst, src, meta)
            gpu, host = sample_recording(rec, repeats=reps, min_time_s=min_time)
            result = dst.download(np.int32)
        expected = packed if direction == "pack" else nchw
        ok = bool(np.array_equal(result[:expected.size], expected))
        row = measurement_row(f"{direction}", env, gpu, host_ns=host, bytes_moved=spec.bytes_moved(),
                              shape="x".join(map(str, sizes)), layout=layout, direction=direction,
                              kernel_variant=spec.shader, label=f"{layout} (block)" if block else layout,
                              correct=ok, padded_words=spec.num_words)
        row["copy_fraction"] = row["GB/s"] / copy_row["GB/s"]
        rows.append(row)
        if writer:
            writer.append(row)
        if not ok:
            raise AssertionError(f"GPU {direction} for {layout} {sizes} disagrees with the numpy packer")
    return pd.DataFrame(rows)
