"""workbench.capture: GFXReconstruct captures read into dispatch descriptions, listed, replayed alone, compared.

The committed folder tests/capture_data/program is `workbench capture run` on tests/capture_program.py (a program
written with the raw `vulkan` binding, no workbench) on lavapipe, without its capture.gfxr: CI reads and replays it
without GFXReconstruct's tools. The live tests capture the program again and skip where the tools are not built
(`./setup.sh capture`)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench import capture
from workbench.capture import CaptureError
from workbench.cli import main as cli_main
from workbench.toolchain import gfxreconstruct

HERE = Path(__file__).parent
DATA = HERE / "capture_data" / "program"
PROGRAM = HERE / "capture_program.py"
sys.path.insert(0, str(HERE))
import capture_program  # noqa: E402  (its shaders and its numpy reference)

# what the program does: (pipeline, group counts, local size, spec constants, push constants)
SCALE, MIX = "scale_bias", "mix"
N, LOCAL = capture_program.N, capture_program.LOCAL
SCALE_SPEC = f"0={LOCAL}, 1=1, 2=1, 3={capture_program.MUL}"
EXPECTED = [
    (SCALE, (N // LOCAL, 1, 1), (LOCAL, 1, 1), SCALE_SPEC, (N, 5)),
    (MIX, (N // 32, 1, 1), (32, 1, 1), "0=2", (N,)),
    (SCALE, (N // LOCAL, 1, 1), (LOCAL, 1, 1), SCALE_SPEC, (N, -9)),
]


def built() -> bool:
    return gfxreconstruct.is_set_up()


needs_tools = pytest.mark.skipif(not built(), reason="GFXReconstruct is not built (./setup.sh capture)")


def _push(values) -> str:
    return np.array(values, np.int32).tobytes().hex()


def test_committed_capture_lists_every_dispatch():
    frame = capture.open(DATA)
    assert list(frame["dispatch"]) == [0, 1, 2]
    assert frame["pipeline"][0] == frame["pipeline"][2] != frame["pipeline"][1]
    for (_, groups, local, spec, push), (_, row) in zip(EXPECTED, frame.iterrows()):
        assert row["groups"] == groups and row["local_size"] == local
        assert row["spec_constants"] == spec and row["push_constants"] == _push(push)
        assert row["entry_point"] == "main"
    size = 4 * N
    assert frame["bindings"][0] == (f"0.0 storage_buffer {size} B; 0.1 storage_buffer {size} B; "
                                    "0.2 uniform_buffer 16 B")
    assert frame["bindings"][1] == f"0.0 storage_buffer {size} B; 0.1 storage_buffer {size} B"
    # one command buffer for the first two dispatches, another one (and a later submit) for the third
    assert frame["command_buffer"][0] == frame["command_buffer"][1]
    assert frame["submit"][0] == frame["submit"][1] < frame["submit"][2]


def test_committed_capture_holds_the_programs_data():
    found = capture.dispatches(DATA)
    x = np.frombuffer(found[0].bindings[0].before, np.int32)
    assert np.array_equal(x, np.arange(N) * 7 - 500)
    # the last dispatch's output is what the program computed; each dispatch's output feeds the next one's input
    assert np.array_equal(np.frombuffer(found[2].bindings[1].after, np.int32), capture_program.expected())
    assert found[0].bindings[1].after == found[1].bindings[0].before
    assert found[1].bindings[1].after == found[2].bindings[0].before


def test_committed_capture_replays_exact(device):
    frame = capture.replay(DATA, device=device, quick=True)
    assert frame["exact"].tolist() == [True, True, True], frame[["dispatch", "mismatch", "reason"]]
    assert (frame["gpu_us_median"] > 0).all() and (frame["samples"] >= 3).all()
    assert list(frame["local_size"]) == [e[2] for e in EXPECTED]


def _copy(tmp_path) -> Path:
    folder = tmp_path / "cap"
    shutil.copytree(DATA, folder)
    return folder


def test_replay_reports_where_an_output_differs(device, tmp_path):
    folder = _copy(tmp_path)
    out = capture.dispatches(folder)[1].bindings[1]
    dump = next(p for p in (folder / "dumps").iterdir() if p.is_file() and p.read_bytes() == out.after)
    data = bytearray(dump.read_bytes())
    data[40] ^= 0x10
    dump.write_bytes(bytes(data))
    frame = capture.replay(folder, [1], device=device, time_it=False)
    assert not frame["exact"][0]
    assert frame["mismatch"][0].startswith(f"binding 0.1: 1/{4 * N} wrong"), frame["mismatch"][0]


def _cli(args, capsys) -> tuple[int, str]:
    code = cli_main(args)
    err = capsys.readouterr().err.strip()
    return code, err


def test_bad_capture_folders_are_one_line_errors(tmp_path, capsys):
    code, err = _cli(["capture", "list", str(tmp_path / "absent")], capsys)
    assert code == 2 and "found no folder" in err and "\n" not in err
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CaptureError, match="expected calls.jsonl"):
        capture.open(empty)
    truncated = _copy(tmp_path)
    text = (truncated / "calls.jsonl").read_text()
    (truncated / "calls.jsonl").write_text(text[:len(text) // 2])
    code, err = _cli(["capture", "list", str(truncated)], capsys)
    assert code == 2 and "truncated or corrupt" in err
    no_dispatch = tmp_path / "none"
    shutil.copytree(DATA, no_dispatch)
    lines = (no_dispatch / "calls.jsonl").read_text().splitlines()
    (no_dispatch / "calls.jsonl").write_text("\n".join(l for l in lines if '"vkCmdDispatch"' not in l) + "\n")
    with pytest.raises(CaptureError, match="at least one vkCmdDispatch"):
        capture.open(no_dispatch)
    with pytest.raises(CaptureError, match=r"dispatch numbers 0\.\.2"):
        capture.replay(DATA, [7])
    no_dumps = _copy(tmp_path / "b")
    shutil.rmtree(no_dumps / "dumps")
    with pytest.raises(CaptureError, match="resource dump"):
        capture.open(no_dumps)


def test_capture_without_the_tools_says_how_to_build_them(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORKBENCH_GFXRECON_DIR", str(tmp_path / "nothing"))
    with pytest.raises(CaptureError, match=r"\./setup\.sh capture"):
        capture.tools()
    code, err = _cli(["capture", "run", "--out", str(tmp_path / "o"), "--", sys.executable, "-c", "pass"], capsys)
    assert code == 2 and "not built" in err and "\n" not in err


def test_cli_lists_and_replays(tmp_path, capsys):
    csv = tmp_path / "list.csv"
    assert cli_main(["capture", "list", str(DATA), "--csv", str(csv)]) == 0
    assert len(csv.read_text().splitlines()) == 4
    assert cli_main(["capture", "replay", str(DATA), "--dispatch", "0", "2", "--quick"]) == 0
    assert "2 of 2 dispatches replayed exact" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------------------------
# Live: capture the program again (needs the tools)
# ----------------------------------------------------------------------------------------------------------------

def _shaders(folder: Path) -> list[Path]:
    from workbench.toolchain.shaders import compile_glsl
    paths = []
    for name, text in ((SCALE, capture_program.SCALE_BIAS_GLSL), (MIX, capture_program.MIX_GLSL)):
        path = folder / f"{name}.spv"
        path.write_bytes(compile_glsl(text, name=name).code)
        paths.append(path)
    return paths


@needs_tools
def test_live_capture_of_a_program_written_without_the_workbench(device, tmp_path):
    spv = _shaders(tmp_path)
    result = tmp_path / "out.bin"
    summary = capture.run([sys.executable, PROGRAM, *spv, result], tmp_path / "cap")
    assert summary["dispatches"] == 3 and summary["capture_bytes"] > 0
    found = capture.dispatches(tmp_path / "cap")
    assert [d.spirv for d in found] == [spv[0].read_bytes(), spv[1].read_bytes(), spv[0].read_bytes()]
    assert found[2].bindings[1].after == result.read_bytes()
    frame = capture.replay(tmp_path / "cap", device=device, quick=True)
    assert frame["exact"].all(), frame[["dispatch", "mismatch", "reason"]]


@needs_tools
def test_a_program_that_fails_under_capture_is_a_one_line_error(tmp_path):
    with pytest.raises(CaptureError, match="exit 0 under the capture layer, it exited with status 3"):
        capture.run([sys.executable, "-c", "import sys; print('bye'); sys.exit(3)"], tmp_path / "a")
    with pytest.raises(CaptureError, match="killed by SIGSEGV"):
        capture.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], tmp_path / "b")
    with pytest.raises(CaptureError, match="made no Vulkan instance"):
        capture.run([sys.executable, "-c", "pass"], tmp_path / "c")


@needs_tools
def test_truncated_or_corrupt_capture_files_are_one_line_errors(tmp_path):
    spv = _shaders(tmp_path)
    capture.run([sys.executable, PROGRAM, *spv, tmp_path / "out.bin"], tmp_path / "cap")
    whole = (tmp_path / "cap" / "capture.gfxr").read_bytes()
    (tmp_path / "truncated.gfxr").write_bytes(whole[:len(whole) // 3])
    with pytest.raises(CaptureError, match="expected at least one submitted vkCmdDispatch") as info:
        capture.process(tmp_path / "truncated.gfxr", tmp_path / "t")
    assert "\n" not in str(info.value)
    (tmp_path / "corrupt.gfxr").write_bytes(b"\x00" * 64 + whole[64:])
    with pytest.raises(CaptureError, match="expected a GFXReconstruct capture file"):
        capture.process(tmp_path / "corrupt.gfxr", tmp_path / "c")
    # the capture file itself, processed again (as one made on another machine would be), gives the same folder
    manifest = capture.process(tmp_path / "cap" / "capture.gfxr", tmp_path / "again")
    assert manifest["dispatches"] == 3
    assert capture.open(tmp_path / "again").equals(capture.open(tmp_path / "cap"))


def test_gfxreconstruct_setup_checks_the_source_it_is_given(tmp_path):
    log = tmp_path / "log"
    with pytest.raises(gfxreconstruct.GfxreconSetupError, match="expected a GFXReconstruct checkout"):
        gfxreconstruct._check_source(tmp_path, log)
    (tmp_path / "CMakeLists.txt").write_text("project(GFXReconstruct LANGUAGES CXX)\n")
    with pytest.raises(gfxreconstruct.GfxreconSetupError, match="submodule external/Vulkan-Headers"):
        gfxreconstruct._check_source(tmp_path, log)
