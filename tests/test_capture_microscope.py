"""The microscope on captured dispatches (workbench.capture.microscope, .stats, .sweep): each dispatch shaken N times
per local size against its captured outputs, under the validation modes; its pipelines' statistics and lint; its
replay on every device of a Dask cluster. On the committed capture folders (tests/capture_data/program and image,
made on lavapipe) and on dispatches built here with a known answer."""
from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from workbench import capture, fanout
from workbench.capture import CaptureError, microscope, stats
from workbench.capture.format import CapturedBinding, CapturedDispatch
from workbench.capture.sweep import CaptureReplaySweep, device_table
from workbench.cli import main as cli_main
from workbench.toolchain import shaders
from workbench.vendors import mesa

HERE = Path(__file__).parent
PROGRAM = HERE / "capture_data" / "program"
IMAGE = HERE / "capture_data" / "image"
N = 128

# dst[i] = src[i] * 3, plus the invocation's local x where DEPENDENT: no bounds check, so a grid larger than the
# captured one writes past dst
BARE = """#version 450
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const bool DEPENDENT = false;
layout(set = 0, binding = 0) writeonly buffer Dst { int dst[]; };
layout(set = 0, binding = 1) readonly buffer Src { int src[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  dst[i] = src[i] * 3 + (DEPENDENT ? int(gl_LocalInvocationID.x) : 0);
}
"""


def made_dispatch(dependent: bool) -> CapturedDispatch:
    """A captured dispatch of BARE at local size 64 × 2 groups, its 'after' bytes computed in numpy."""
    spirv = shaders.compile_glsl(BARE, name="bare").code
    src = (np.arange(N, dtype=np.int32) * 7 - 300)
    dst = src * 3 + ((np.arange(N) % 64) if dependent else 0)
    spec = struct.pack("<4I", 64, 1, 1, int(dependent))
    zeros = bytes(4 * N)
    return CapturedDispatch(
        dispatch=0, index=10, command_buffer=1, begin_index=5, submit=12, pipeline=2, spirv=spirv,
        entry_point="main", spec_data=spec, spec_entries={k: (4 * k, 4) for k in range(4)}, push_constants=b"",
        groups=(2, 1, 1), bindings=[
            CapturedBinding(0, 0, "storage_buffer", 1, size=4 * N, before=zeros, after=dst.astype(np.int32).tobytes()),
            CapturedBinding(0, 1, "storage_buffer", 2, size=4 * N, before=src.tobytes(), after=src.tobytes())])


@pytest.fixture(scope="module")
def edited(tmp_path_factory) -> Path:
    """A copy of the program capture whose dispatch 1 'after' dump of binding 0.1 has one byte flipped."""
    folder = tmp_path_factory.mktemp("edited") / "program"
    shutil.copytree(PROGRAM, folder)
    index = capture.dispatches(PROGRAM)[1].index
    plan = json.loads((folder / "dumps" / "capture_dr.json").read_text())
    entry = next(c for block in plan for c in block.get("dispatchCommands", []) if c["dispatchIndex"] == index)
    name = next(b["file"] for b in entry["descriptors"]["compute"] if (b["set"], b["binding"]) == (0, 1))
    assert (folder / "dumps" / "capture_dr.json").read_text().count(name) == 1  # no other dump shares the file
    path = folder / "dumps" / name
    data = bytearray(path.read_bytes())
    data[20] ^= 0x40
    path.write_bytes(bytes(data))
    return folder


def test_committed_captures_shake_clean_at_every_local_size(device):
    frame = microscope.shake(PROGRAM, runs=6, device=device)
    # the scale_bias pipeline (dispatches 0, 2) takes its local size from spec constants: swept over the 1-D sizes
    # that divide its 128-thread grid; mix (dispatch 1) fixes 32 in the SPIR-V: that one only, and says so
    assert [(r.dispatch, r.local_size) for r in frame.itertuples()] == [
        (0, "64x1x1"), (0, "32x1x1"), (0, "128x1x1"), (1, "32x1x1"), (2, "64x1x1"), (2, "32x1x1"), (2, "128x1x1")]
    assert list(frame["groups"]) == [(2, 1, 1), (4, 1, 1), (1, 1, 1), (4, 1, 1), (2, 1, 1), (4, 1, 1), (1, 1, 1)]
    assert frame["exact"].all() and (frame["bad_runs"] == 0).all() and (frame["runs"] == 6).all()
    assert "literal in the SPIR-V" in frame["reason"][3] and not frame["reason"].drop(3).str.len().any()
    # dispatch 1 reads what it writes (c[i] += ...): exact on every run only because each starts from the capture
    c = next(b for b in capture.dispatches(PROGRAM)[1].bindings if b.binding == 1)
    assert c.before != c.after
    images = microscope.shake(IMAGE, runs=3, device=device, local_sizes=[(2, 2, 1)])
    assert images["exact"].all() and len(images) == 3
    assert images["reason"].str.contains("literal in the SPIR-V").all()


def test_an_edited_after_buffer_shows_as_bad_runs(device, edited):
    frame = microscope.shake(edited, [1], runs=5, device=device)
    row = frame.iloc[0]
    assert not row["exact"] and row["bad_runs"] == 5 and row["bad_fraction"] == 1.0
    assert row["differs_from_run0"] == []  # the runs agree with each other: the capture is what differs
    assert row["wrong_count"] == 1 and row["wrong_bindings"] == "0.1: 1 B"
    assert row["first_wrong"] == [(512 + 20,)]  # binding 0.0 (512 B) first, then byte 20 of 0.1
    assert microscope.shake(edited, [0, 2], runs=2, device=device, local_sizes="captured")["exact"].all()


def test_a_local_size_dependent_dispatch_is_bad_at_the_other_sizes(device):
    frame = microscope.shake([made_dispatch(dependent=True)], runs=4, device=device)
    by_size = frame.set_index("local_size")
    assert by_size.loc["64x1x1", "exact"] and by_size.loc["64x1x1", "bad_runs"] == 0
    for size in ("32x1x1", "128x1x1"):
        assert by_size.loc[size, "bad_runs"] == 4 and by_size.loc[size, "differs_from_run0"] == []
        assert by_size.loc[size, "wrong_bindings"].startswith("0.0: ")
    same = microscope.shake([made_dispatch(dependent=False)], runs=4, device=device)
    assert same["exact"].all() and len(same) == 3


def test_validation_modes_report_messages_per_row(device):
    # local size 48 over the captured 128-thread grid: 3 groups, 144 threads, 16 writes past dst
    frame = microscope.shake([made_dispatch(dependent=False)], runs=2, device=device,
                             local_sizes=[(64, 1, 1), (48, 1, 1)], validate="gpu")
    assert list(frame["validation"]) == ["gpu", "gpu"] and list(frame["groups"]) == [(2, 1, 1), (3, 1, 1)]
    assert frame["messages"][0] == 0 and frame["first_message"][0] == ""
    assert frame["messages"][1] > 0 and "VUID-vkCmdDispatch-None-02706" in frame["first_message"][1]
    clean = microscope.shake(PROGRAM, [1], runs=2, device=device, validate="sync")
    assert list(clean["messages"]) == [0] and clean["exact"].all()
    printf = microscope.shake(PROGRAM, [0], runs=1, device=device, validate=["printf"], local_sizes="captured")
    assert list(printf["printf_lines"]) == [0] and list(printf["validation"]) == ["printf"]


def test_bad_input_is_one_line(device):
    with pytest.raises(CaptureError, match=r"expected dispatch numbers of .* \(0, 1, 2\), got \[9\]"):
        microscope.shake(PROGRAM, [9], device=device)
    with pytest.raises(ValueError, match="runs must be a whole number >= 1, got 0"):
        microscope.shake(PROGRAM, runs=0, device=device)
    with pytest.raises(ValueError, match="at most .* invocations"):
        microscope.shake(PROGRAM, local_sizes=[(4096, 1, 1)], device=device)
    with pytest.raises(ValueError, match="unknown validation mode"):
        microscope.shake(PROGRAM, validate="loud", device=device)
    with pytest.raises(ValueError, match="unknown GPU 'a999'"):
        stats.stats(PROGRAM, gpus=["a999"], device=device)
    with pytest.raises(CaptureError, match=r"got \[5\]"):
        CaptureReplaySweep(str(PROGRAM), (5,))


def test_statistics_and_lint_a_row_per_pipeline_and_gpu(device):
    frame = stats.stats(PROGRAM, device=device)
    found = stats.pipelines(capture.dispatches(PROGRAM))
    assert [p["dispatches"] for p in found] == [[0, 2], [1]]
    gpus = list(stats.STATS_GPUS) + [device.info.name]
    assert len(frame) == 2 * len(gpus) and list(frame["gpu"]) == gpus * 2
    assert list(frame["dispatches"]) == ["0 2"] * len(gpus) + ["1"] * len(gpus)
    assert list(frame["local_size"]) == ["64x1x1"] * len(gpus) + ["32x1x1"] * len(gpus)
    assert (frame["lint_errors"] == 0).all() and (frame["lint_warnings"] == 0).all()
    here = frame[frame["gpu"] == device.info.name]
    if device.info.features.get("pipeline_executable_properties"):
        assert (here["reason"] == "").all()
    else:
        assert here["reason"].str.contains("reports no pipeline statistics").all()
    vendors = frame[frame["gpu"].isin(stats.STATS_GPUS)]
    if mesa.is_set_up():
        assert (vendors["reason"] == "").all(), vendors["reason"]
        assert vendors["registers"].notna().all() and vendors["instructions"].notna().all()
        assert (vendors["spills"] == 0).all() and vendors["occupancy"].between(0, 1).all()
        assert stats.coverage(frame)["with_statistics"] >= 6
    else:
        assert vendors["reason"].str.contains("not built").all() and vendors["registers"].isna().all()
    images = stats.stats(IMAGE, gpus=[], device=device)
    assert len(images) == 3 and list(images["spec_constants"]) == ["", "0=3.0", ""]


def test_lint_finds_a_barrier_behind_a_return(device):
    code = shaders.compile_glsl("""#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer B { int b[]; };
shared int s[64];
void main() {
  uint i = gl_LocalInvocationID.x;
  if (b[i] < 0) return;
  s[i] = b[i];
  barrier();
  b[i] = s[63 - i];
}
""", name="early_return").code
    d = made_dispatch(dependent=False)
    d.spirv, d.spec_data, d.spec_entries = code, b"", {}
    d.bindings = d.bindings[:1]
    frame = stats.stats([d], gpus=[], device=device)
    assert frame["lint_errors"][0] == 1 and frame["lint"][0].startswith("barrier_divergence@")


def test_capture_replays_on_every_device_of_a_cluster(device, edited):
    sweep = CaptureReplaySweep(str(PROGRAM))
    assert sweep.items() == [(("dispatch", 0),), (("dispatch", 1),), (("dispatch", 2),)]
    result = fanout.run_sweep(sweep, workers=["0"], show_progress=False)
    frame = result.frame
    assert "error" not in frame, frame.get("error")
    assert list(frame["dispatch"]) == [0, 1, 2] and frame["exact"].all() and frame["worker"].nunique() == 1
    table = device_table(frame)
    key = device.info.name
    assert list(table.columns) == ["capture", "dispatch", "pipeline", f"exact {key}", f"gpu_us_median {key}"]
    assert table[f"exact {key}"].all() and (table[f"gpu_us_median {key}"] > 0).all()
    here = fanout.run_here(CaptureReplaySweep(str(edited), (1, 2)))
    shown = device_table(here.frame)
    assert list(shown["dispatch"]) == [1, 2] and list(shown[f"exact {key}"]) == [False, True]


def test_cli_shake_stats_and_sweep(edited, capsys):
    assert cli_main(["capture", "shake", str(PROGRAM), "--dispatch", "1", "--runs", "3", "--validate", "sync"]) == 0
    out = capsys.readouterr().out
    assert "1 dispatch × local size rows: 0 with bad runs; the layer (sync) reported 0 message(s)" in out
    assert cli_main(["capture", "shake", str(edited), "--dispatch", "1", "--runs", "3"]) == 1
    assert "0.1: 1 B" in capsys.readouterr().out
    assert cli_main(["capture", "shake", str(PROGRAM), "--local-size", "64,x"]) == 2
    assert "--local-size takes X,Y,Z integers" in capsys.readouterr().err
    assert cli_main(["capture", "stats", str(IMAGE), "--gpu", "none"]) == 0
    assert "statistics for " in capsys.readouterr().out
    assert cli_main(["capture", "sweep", str(IMAGE), "--here"]) == 0
    assert "exact " in capsys.readouterr().out
