"""Reliability: pipeline churn memory, closed objects, interrupts, concurrent use, quiet runs."""
import gc

import numpy as np
import pytest

from workbench import vk
from workbench.churn import measure, rss_kib
from workbench.shaders import compile_shader


# --- pipeline churn ----------------------------------------------------------------------------------------------
def test_pipeline_churn_stays_flat(device):
    """300 create/close cycles of one pipeline after warm-up grow RSS by < 4 MiB (lavapipe alone: ~30 MiB)."""
    result = measure("workbench", cycles=300, warmup=30, device=device)
    assert result["rss_growth_kib"] < 4096, result


def test_reused_pipeline_still_computes(device):
    spv = compile_shader("copy")
    src = device.buffer(np.arange(256, dtype=np.uint32))
    for _ in range(3):
        with device.pipeline(spv, local_size=(64, 1, 1)) as p, device.buffer(nbytes=1024) as dst:
            device.run(p, [dst, src], (64, 1, 1), np.uint32([64]))
            np.testing.assert_array_equal(dst.download(np.uint32), np.arange(256, dtype=np.uint32))
    src.close()


def test_parked_pipelines_are_bounded_and_released():
    from workbench.vk.context import PARKED_PIPELINES
    spv = compile_shader("copy")
    with vk.Device() as dev:
        for size in range(1, PARKED_PIPELINES + 10):
            dev.pipeline(spv, local_size=(size, 1, 1)).close()
        assert sum(len(v) for v in dev._parked.values()) == PARKED_PIPELINES
        assert dev.live_objects() == 0
    # closing the device destroyed the parked ones (the validation layer reports leaked objects otherwise)
    assert not dev._parked
    gc.collect()
    assert rss_kib() > 0
