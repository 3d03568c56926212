"""Captures across devices: the test programs (tests/capture_program.py, tests/capture_program_image.py) captured on
an NVIDIA H200 (driver 580.159.04, GFXReconstruct's layer carried there; `tools/capture_across.py`, record in
data/NVIDIA_H200/NOTES.md) replay exact here, as a capture taken on a phone would: the same dispatches, the same
outputs, byte for byte, on another vendor's driver. The reverse direction (lavapipe's committed captures replayed on
the H200) is in data/NVIDIA_H200/capture/."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from workbench import capture

HERE = Path(__file__).parent
NVIDIA = HERE / "capture_data" / "nvidia_h200"
sys.path.insert(0, str(HERE))
import capture_program  # noqa: E402
import capture_program_image  # noqa: E402


@pytest.mark.parametrize("program", ["program", "image"])
def test_a_capture_made_on_nvidia_lists_its_device_and_replays_exact_here(device, program):
    folder = NVIDIA / program
    listed = capture.open(folder)
    assert len(listed) == 3
    frame = capture.replay(folder, device=device, quick=True)
    assert frame["exact"].all(), frame[["dispatch", "mismatch", "reason"]]


def test_the_nvidia_capture_holds_what_the_program_computed():
    found = capture.dispatches(NVIDIA / "program")
    assert np.array_equal(np.frombuffer(found[2].bindings[1].after, np.int32), capture_program.expected())
    image = capture.dispatches(NVIDIA / "image")
    assert image[2].bindings[1].after == capture_program_image.expected().tobytes()
