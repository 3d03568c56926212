"""workbench.capture: GFXReconstruct captures read into dispatch descriptions, listed, replayed alone, compared.

The committed folder tests/capture_data/program is `workbench capture run` on tests/capture_program.py (a program
written with the raw `vulkan` binding, no workbench) on lavapipe, without its capture.gfxr: CI reads and replays it
without GFXReconstruct's tools. The live tests capture the program again and skip where the tools are not built
(`./setup.sh capture`)."""
from __future__ import annotations

import json
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
def test_live_capture_of_a_program_written_without_the_workbench(device, tmp_path, capsys):
    spv = _shaders(tmp_path)
    result = tmp_path / "out.bin"
    summary = capture.run([sys.executable, PROGRAM, *spv, result], tmp_path / "cap")
    assert summary["dispatches"] == 3 and summary["capture_bytes"] > 0
    found = capture.dispatches(tmp_path / "cap")
    assert [d.spirv for d in found] == [spv[0].read_bytes(), spv[1].read_bytes(), spv[0].read_bytes()]
    assert found[2].bindings[1].after == result.read_bytes()
    frame = capture.replay(tmp_path / "cap", device=device, quick=True)
    assert frame["exact"].all(), frame[["dispatch", "mismatch", "reason"]]
    # where each buffer lives: the program gives every buffer an allocation of its own, bound at offset 0
    places = {b.resource: b.memory for d in found for b in d.bindings}
    assert all(m is not None and m[3] == 0 and m[1] >= 16 for m in places.values()), places
    assert len({m[0] for m in places.values()}) == len(places)
    from workbench.capture.timeline import time_in_order
    rows = time_in_order(device, found, memory="captured", sampling=dict(min_samples=2, max_samples=3,
                                                                            min_time_s=0.0))
    assert rows["exact"].all() and (rows["unplaced"] == 0).all()
    assert cli_main(["capture", "list", str(tmp_path / "cap")]) == 0
    assert f"memory: {len(places)} of {len(places)} buffers and images bound where the capture says" \
        in capsys.readouterr().out


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


# ----------------------------------------------------------------------------------------------------------------
# Images: tests/capture_data/image is `workbench capture run` on tests/capture_program_image.py (3-D rgba32f and
# rgba16f images written with imageStore, read with texelFetch through a sampler and with imageLoad)
# ----------------------------------------------------------------------------------------------------------------

IMAGE_DATA = HERE / "capture_data" / "image"
IMAGE_PROGRAM = HERE / "capture_program_image.py"
import capture_program_image as image_program  # noqa: E402


def test_committed_image_capture_lists_formats_and_extents():
    frame = capture.open(IMAGE_DATA)
    extent = "x".join(map(str, (image_program.W, image_program.H, image_program.D)))
    texels = image_program.TEXELS
    assert frame["bindings"].tolist() == [
        f"0.0 storage_buffer {16 * texels} B; 0.1 storage_image {16 * texels} B VK_FORMAT_R32G32B32A32_SFLOAT {extent}",
        f"0.0 combined_image_sampler {16 * texels} B VK_FORMAT_R32G32B32A32_SFLOAT {extent}; "
        f"0.1 storage_image {8 * texels} B VK_FORMAT_R16G16B16A16_SFLOAT {extent}",
        f"0.0 storage_image {8 * texels} B VK_FORMAT_R16G16B16A16_SFLOAT {extent}; 0.1 storage_buffer {16 * texels} B",
    ]
    assert frame["spec_constants"][1] == f"0={image_program.MUL}"


def test_committed_image_capture_holds_every_depth_slice():
    found = capture.dispatches(IMAGE_DATA)
    a = np.frombuffer(found[0].bindings[1].after, np.float32)  # (z, y, x, 4): every slice, in order
    assert np.array_equal(a, image_program.source().astype(np.float32))
    assert found[1].bindings[0].after == found[0].bindings[1].after  # the sampler reads what fill wrote
    assert np.array_equal(np.frombuffer(found[2].bindings[1].after, np.float32), image_program.expected())
    assert {b.tiling for d in found for b in d.bindings if b.extent} == {"VK_IMAGE_TILING_OPTIMAL"}


def test_committed_image_capture_replays_exact(device):
    frame = capture.replay(IMAGE_DATA, device=device, quick=True)
    assert frame["exact"].tolist() == [True, True, True], frame[["dispatch", "mismatch", "reason"]]


def test_image_replay_reports_a_wrong_texel(device, tmp_path):
    folder = tmp_path / "img"
    shutil.copytree(IMAGE_DATA, folder)
    block = capture.dispatches(folder)[1].index
    document = json.loads((folder / "dumps" / "capture_dr.json").read_text())
    entry = next(e for part in document if "dispatchCommands" in part for e in part["dispatchCommands"]
                 if e["dispatchIndex"] == block)
    # the rgba16f storage image scale writes: its last depth slice's dump
    written = next(d for d in entry["descriptors"]["compute"] if d["binding"] == 1)
    dump = folder / "dumps" / written["subresources"][-1]["file"]
    data = bytearray(dump.read_bytes())
    data[3] ^= 0x01
    dump.write_bytes(bytes(data))
    frame = capture.replay(folder, [1], device=device, time_it=False)
    assert not frame["exact"][0] and frame["mismatch"][0].startswith("binding 0.1: 1/"), frame["mismatch"][0]


def test_an_image_format_the_runtime_does_not_make_is_a_reason(device, tmp_path):
    folder = tmp_path / "img"
    shutil.copytree(IMAGE_DATA, folder)
    calls = folder / "calls.jsonl"
    calls.write_text(calls.read_text().replace("VK_FORMAT_R16G16B16A16_SFLOAT", "VK_FORMAT_R16G16B16A16_UNORM"))
    frame = capture.replay(folder, device=device, time_it=False)
    assert frame["exact"].tolist() == [True, False, False]
    assert "VK_FORMAT_R16G16B16A16_UNORM image" in frame["reason"][1]


@needs_tools
def test_live_capture_of_an_image_program(device, tmp_path):
    from workbench.toolchain.shaders import compile_glsl
    spv = []
    for name, text in (("fill", image_program.FILL_GLSL), ("scale", image_program.SCALE_GLSL),
                       ("read", image_program.READ_GLSL)):
        spv.append(tmp_path / f"{name}.spv")
        spv[-1].write_bytes(compile_glsl(text, name=name).code)
    result = tmp_path / "out.bin"
    summary = capture.run([sys.executable, IMAGE_PROGRAM, *spv, result], tmp_path / "cap")
    assert summary["dispatches"] == 3
    found = capture.dispatches(tmp_path / "cap")
    assert found[2].bindings[1].after == result.read_bytes()
    frame = capture.replay(tmp_path / "cap", device=device, quick=True)
    assert frame["exact"].all(), frame[["dispatch", "mismatch", "reason"]]


# ----------------------------------------------------------------------------------------------------------------
# Bad input: a command the reader does not know, a device without the features the capture's shaders declare
# ----------------------------------------------------------------------------------------------------------------

def test_a_dispatch_command_the_reader_does_not_know_is_listed_not_replayed(device, tmp_path):
    folder = _copy(tmp_path)
    calls = (folder / "calls.jsonl").read_text().splitlines()
    second = [i for i, line in enumerate(calls) if '"vkCmdDispatch"' in line][1]
    calls[second] = calls[second].replace('"vkCmdDispatch"', '"vkCmdDispatchGraphAMDX"')
    (folder / "calls.jsonl").write_text("\n".join(calls) + "\n")
    frame = capture.open(folder)
    assert frame["command"].tolist() == ["vkCmdDispatch", "vkCmdDispatchGraphAMDX", "vkCmdDispatch"]
    assert frame["groups"][1] == (0, 0, 0)
    replayed = capture.replay(folder, device=device, time_it=False)
    assert replayed["exact"].tolist() == [True, False, True]
    assert replayed["reason"][1].startswith("vkCmdDispatchGraphAMDX: expected vkCmdDispatch, vkCmdDispatchBase or "
                                            "vkCmdDispatchIndirect")
    assert capture.format.dump_plan(capture.format.read_calls(folder / "calls.jsonl"))["Dispatch"] == [
        [capture.dispatches(folder)[0].index], [capture.dispatches(folder)[2].index]]


def test_shader_capabilities_name_the_features_a_replay_needs(device, monkeypatch):
    from workbench.capture.replay import missing_features
    from workbench.toolchain.shaders import compile_glsl
    from workbench.vk.spirv import capabilities
    code = compile_glsl("""#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_8bit_storage : require
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer B { int8_t v[]; };
void main() { v[0] = v[1] + int8_t(1); }
""", name="int8").code
    assert {39, 4448} <= set(capabilities(code))  # Int8, StorageBuffer8BitAccess
    monkeypatch.setitem(device.info.features, "shader_int8", False)
    assert "shaderInt8" in missing_features(device, code)


def test_a_capture_needing_features_this_device_lacks_is_a_one_line_error(device, monkeypatch, capsys):
    from workbench.vk.spirv import CAPABILITY_FEATURES, CapabilityFeature
    # every shader declares capability Shader (1): pretend it needs shaderInt8, and that this device lacks it
    monkeypatch.setitem(CAPABILITY_FEATURES, 1, CapabilityFeature("shader_int8", "shaderInt8", "int8 arithmetic"))
    monkeypatch.setitem(device.info.features, "shader_int8", False)
    with pytest.raises(CaptureError, match=r"expected a device with the features the captured shaders declare: "
                                           r"shaderInt8 \(dispatches 0, 1, 2\); found .* without them"):
        capture.replay(DATA, device=device)
    monkeypatch.setattr("workbench.cli.capture.device", lambda args: device)
    code, err = _cli(["capture", "replay", str(DATA)], capsys)
    assert code == 2 and "shaderInt8" in err and "\n" not in err


def test_edit_replays_a_dispatch_with_another_shader(device, tmp_path, capsys, monkeypatch):
    same, edited = tmp_path / "mix.glsl", tmp_path / "mix_edit.glsl"
    same.write_text(capture_program.MIX_GLSL)
    edited.write_text(capture_program.MIX_GLSL.replace(">> SHIFT", ">> (SHIFT + 1u)"))
    frame = capture.edit(DATA, 1, same, device=device)
    assert frame["shader"].tolist() == ["captured", str(same)] and frame["exact"].all()
    assert (frame["seconds"] > 0).all()
    scale = tmp_path / "scale.glsl"  # both dispatches of one pipeline, the shader compiled once
    scale.write_text(capture_program.SCALE_BIAS_GLSL)
    both = capture.edit(DATA, [0, 2], scale, device=device)
    assert both["dispatch"].tolist() == [0, 0, 2, 2] and both["exact"].all()
    assert (frame["gpu_us_median"] > 0).all() and frame["vs_captured"].iloc[0] == 1.0
    frame = capture.edit(DATA, 1, edited, device=device)
    assert frame["exact"].tolist() == [True, False]
    assert frame["mismatch"].iloc[1].startswith("binding 0.1: "), frame["mismatch"].iloc[1]
    spv = tmp_path / "mix.spv"
    from workbench.toolchain.shaders import compile_glsl
    spv.write_bytes(compile_glsl(capture_program.MIX_GLSL, name="mix").code)
    assert capture.edit(DATA, 1, spv, device=device)["exact"].all()
    monkeypatch.setattr("workbench.cli.capture.device", lambda args: device)
    assert cli_main(["capture", "replay", str(DATA), "--dispatch", "1", "--shader", str(edited), "--quick"]) == 1
    assert "vs_captured" in capsys.readouterr().out
    bad = tmp_path / "bad.glsl"
    bad.write_text(capture_program.MIX_GLSL.replace("c[i] +=", "c[i] +=="))
    code, err = _cli(["capture", "replay", str(DATA), "--dispatch", "1", "--shader", str(bad)], capsys)
    assert code == 2 and f"expected {bad} to compile" in err and "\n" not in err
    code, err = _cli(["capture", "replay", str(DATA), "--shader", str(bad)], capsys)
    assert code == 2 and "expected --dispatch N… with --shader" in err
    not_spirv = tmp_path / "x.spv"
    not_spirv.write_bytes(b"\x00" * 16)
    code, err = _cli(["capture", "replay", str(DATA), "--dispatch", "1", "--shader", str(not_spirv)], capsys)
    assert code == 2 and "expected SPIR-V" in err


# ----------------------------------------------------------------------------------------------------------------
# ET-VK captures: the ETDump join (workbench.etvk.model.capture_join; the capture itself needs the runtime built)
# ----------------------------------------------------------------------------------------------------------------

def test_etdump_events_join_the_dispatches_of_an_execution_by_kernel_names():
    import pandas as pd
    from workbench.etvk.model import capture_join
    # 3 prepacking dispatches (not in the ETDump), then one execution's 4
    frame = pd.DataFrame({"dispatch": range(7), "variant": ["pack_w", "pack_w", "nchw_to_image", "nchw_to_image",
                                                            "conv|conv_alias", "add", "image_to_nchw"]})
    events = pd.DataFrame({"dispatch_id": range(4), "operator": ["(staging)", "conv2d", "add", "(staging)"],
                           "kernel": ["nchw_to_image", "conv", "add", "image_to_nchw"],
                           "etvk_gpu_us": [1.0, 20.0, 3.0, 1.5]})
    joined = capture_join.join_events(frame, events)
    assert joined["phase"].tolist() == ["prepack"] * 3 + ["execute"] * 4
    assert joined["operator"].tolist()[3:] == ["(staging)", "conv2d", "add", "(staging)"]
    assert joined["etvk_gpu_us"].tolist()[:3] == [None] * 3 and joined["joined_by"][0] == "kernel names"
    # names that do not line up: the last dispatches, said so
    unnamed = capture_join.join_events(frame.assign(variant=""), events)
    assert unnamed["dispatch_id"].tolist()[3:] == [0, 1, 2, 3] and unnamed["joined_by"][0].startswith("order")
    with pytest.raises(ValueError, match="the ETDump logs 4 dispatches, the capture holds 2"):
        capture_join.join_events(frame.head(2), events)


def test_coverage_rows_of_a_capture_without_an_etdump(device):
    from workbench.etvk.model import capture_join
    table = capture_join.coverage(DATA, "program", names={capture.dispatches(DATA)[1].spirv_hash: "mix"},
                                  device=device)
    assert list(table.columns) == capture_join.COVERAGE_COLUMNS
    assert table["exact"].all() and table["variant"].tolist() == ["", "mix", ""]
    assert table["variant_from"].tolist() == ["", "spirv", ""]
    summary = capture_join.coverage_summary(table)
    assert summary[["model", "dispatches", "exact", "exact_pct"]].values.tolist() == [["program", 3, 3, 100.0],
                                                                                     ["all", 3, 3, 100.0]]


# tests/capture_data/etvk_residual_add: `capture_join.capture_program` on ET-VK's executor_runner (cff6f4dd32, built
# by `workbench etvk build`) running the residual model on lavapipe, with the run's ETDump and output; without its
# capture.gfxr (made again 2026-11-28 on a fresh machine: its calls keep every vkAllocateMemory / vkBind*Memory)
ETVK_DATA = HERE / "capture_data" / "etvk_residual_add"
COVERAGE = HERE.parent / "data" / "llvmpipe" / "capture_coverage.csv"


def test_committed_etvk_capture_replays_exact_and_ends_in_the_models_output(device):
    found = capture.dispatches(ETVK_DATA)
    # sampled images dumped at the end of their command buffer, taken instead from the dispatch that wrote them
    assert any(b.source.startswith("dispatch ") for d in found for b in d.bindings if b.kind.endswith("sampler"))
    frame = capture.replay(ETVK_DATA, device=device, quick=True)
    assert len(frame) == 41 and frame["exact"].all(), frame.loc[~frame["exact"], ["dispatch", "mismatch", "reason"]]
    # the last dispatch (ET-VK's image_to_nchw staging) writes what executor_runner wrote as the model's output
    assert found[-1].bindings[0].after == (ETVK_DATA / "output-0.bin").read_bytes()


def test_committed_etvk_capture_joins_its_etdump():
    pytest.importorskip("executorch.devtools", reason="ExecuTorch's devtools read the ETDump")
    from workbench.etvk.model import capture_join
    joined = capture_join.join_events(capture.open(ETVK_DATA), ETVK_DATA / "run.etdp")
    execute = joined[joined["phase"] == "execute"]
    assert len(execute) == 9 and execute["dispatch_id"].tolist() == list(range(9))
    assert set(execute["operator"]) >= {"(staging)", "q8ta_add"}, execute["operator"].tolist()
    assert (execute["etvk_gpu_us"] > 0).all()


def test_committed_coverage_of_etvk_runs_on_lavapipe():
    import pandas as pd
    from workbench.etvk.model import capture_join
    table = pd.read_csv(COVERAGE)
    assert list(table.columns) == capture_join.COVERAGE_COLUMNS
    models = {"residual_add", "float_between", "refinenet_like", "mobilenet_v2"}
    assert set(table["model"]) == models | {"llm_llama3_2_mini_decode"}  # + the small Llama's decode step
    assert table["exact"].mean() >= 0.98
    four = table[table["model"].isin(models)]
    assert (four["phase"] == "execute").sum() == 244  # the dispatches ET-VK's ETDump logs for the four models
    llm = table[~table["model"].isin(models)]
    assert (llm["phase"] == "execute").sum() == 67 and llm["variant"].str.startswith("sdpa_").any()
    assert table.loc[~table["exact"], "reason"].notna().all()  # every exception says why


def test_a_capture_with_nothing_replayable_still_writes_every_row(tmp_path, capsys, device):
    """Every dispatch of a capture the runtime cannot replay (here: indirect dispatches, whose group counts the
    calls do not hold) is still listed and written, each with its reason; the CLI prints them, no traceback."""
    folder = tmp_path / "indirect"
    shutil.copytree(DATA, folder)
    calls = folder / "calls.jsonl"
    calls.write_text(calls.read_text().replace('"name":"vkCmdDispatch"', '"name":"vkCmdDispatchGraphAMDX"'))
    frame = capture.replay(folder, device=device, quick=True)
    assert len(frame) == 3 and not frame["exact"].any() and frame["gpu_us_median"].isna().all()
    assert frame["reason"].str.startswith("vkCmdDispatchGraphAMDX: expected vkCmdDispatch").all()
    out = tmp_path / "replay.csv"
    assert cli_main(["capture", "replay", str(folder), "--quick", "--csv", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "0 of 3 dispatches replayed exact" in printed and "not replayed (3): vkCmdDispatchGraphAMDX" in printed
    import pandas as pd
    written = pd.read_csv(out)
    assert len(written) == 3 and written["reason"].notna().all()


def test_notebook_07_on_a_capture_with_nothing_replayable(tmp_path, monkeypatch):
    """Notebook 07 on a capture none of whose dispatches replays: it says why per dispatch and runs to its end."""
    from workbench import notebook as nb
    folder = tmp_path / "indirect"
    shutil.copytree(DATA, folder)
    calls = folder / "calls.jsonl"
    calls.write_text(calls.read_text().replace('"name":"vkCmdDispatch"', '"name":"vkCmdDispatchGraphAMDX"'))
    monkeypatch.setenv("WORKBENCH_VALIDATION", "1")
    executed = nb.execute(nb.REPO / "notebooks" / "07_capture.ipynb",
                          parameters={"FULL": False, "RESULTS_DIR": str(tmp_path / "out"), "CAPTURE": str(folder)},
                          extra_cells=[nb.VALIDATION_CHECK_CELL], timeout=600)
    text = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code" for o in c.outputs)
    assert "not replayed (3 dispatches): vkCmdDispatchGraphAMDX" in text and "validation: silent" in text


def renamed_entry_point(tmp_path, name: str = "mm_r"):
    """The committed capture with its modules' entry point renamed from "main" (as IREE names its dispatches): the
    SPIR-V's OpEntryPoint / OpName strings (same length) and the pipelines' pName."""
    folder = tmp_path / "entry"
    shutil.copytree(DATA, folder)
    renamed = 0
    for path in (folder / "binaries").rglob("*"):
        data = path.read_bytes() if path.is_file() else b""
        if data[:4] == bytes.fromhex("03022307") and b"main\0\0\0\0" in data:
            path.write_bytes(data.replace(b"main\0\0\0\0", name.encode() + b"\0\0\0\0"))
            renamed += 1
    calls = folder / "calls.jsonl"
    calls.write_text(calls.read_text().replace('"pName":"main"', f'"pName":"{name}"'))
    assert renamed == 2
    return folder


def test_any_entry_point_name_replays_and_compiles_for_the_vendors(tmp_path, device):
    """A module whose entry point is not "main" replays exact, and its statistics come from every compiler."""
    from workbench.capture import stats
    from workbench.vendors import mesa
    folder = renamed_entry_point(tmp_path)
    found = capture.dispatches(folder)
    assert {d.entry_point for d in found} == {"mm_r"}
    assert capture.replay(folder, device=device, quick=True)["exact"].all()
    if not mesa.is_set_up():
        pytest.skip(f"the offline vendor compilers are not set up in {mesa.cache_root()}")
    table = stats.stats(found, gpus=["a740", "mali-g610"], device=device, driver=False)
    assert len(table) == 4 and (table["reason"] == "").all() and (table["instructions"] > 0).all()


# tests/capture_data/push: `workbench capture run` on tests/capture_program_push.py (lavapipe, GFXReconstruct 1.0.5):
# the same three dispatches bound as ncnn and IREE bind, with vkCmdPushDescriptorSetKHR (dispatches 0 and 2) and
# vkCmdPushDescriptorSetWithTemplateKHR (dispatch 1), scale_bias's local size on specialization constants 233..235
PUSH_DATA = HERE / "capture_data" / "push"
PUSH_PROGRAM = HERE / "capture_program_push.py"
STALE = "stale dump: GFXReconstruct dumped buffer"


def check_push_capture(folder, device):
    frame = capture.open(folder)
    size = 4 * N
    assert list(frame["local_size"]) == [(LOCAL, 1, 1), (32, 1, 1), (LOCAL, 1, 1)]        # from ids 233..235
    assert frame["spec_constants"][0] == f"3={capture_program.MUL}, 233={LOCAL}, 234=1, 235=1"
    assert frame["bindings"][0] == (f"0.0 storage_buffer {size} B; 0.1 storage_buffer {size} B; "
                                    "0.2 uniform_buffer 16 B")
    assert frame["bindings"][1] == f"0.0 storage_buffer {size} B; 0.1 storage_buffer {size} B"  # the template's
    found = capture.dispatches(folder)
    pushed, templated = found[0], found[1]
    assert [b.resource for b in templated.bindings] == [pushed.bindings[1].resource, found[2].bindings[0].resource]
    replayed = capture.replay(folder, device=device, quick=True)
    assert replayed["exact"].tolist() == [True, False, True]
    assert replayed["reason"][1].startswith(STALE) and "descriptor update template" in replayed["reason"][1]


def test_push_descriptors_and_templates_are_read(device):
    """Bindings pushed with vkCmdPushDescriptorSetKHR or through a descriptor update template are the dispatch's
    bindings (the right buffers, the template's entries in order); the pushed dispatches replay exact; the templated
    one is named, not replayed: GFXReconstruct 1.0.5's resource dump keeps the previous push's buffers there."""
    check_push_capture(PUSH_DATA, device)


def push_shaders(tmp_path) -> list:
    """The push-descriptor program's two shaders compiled into `tmp_path`."""
    from workbench.toolchain.shaders import compile_glsl
    sys.path.insert(0, str(HERE))
    import capture_program_push as push
    spv = []
    for name, text in (("scale_bias_push", push.SCALE_BIAS_GLSL), ("mix_push", push.MIX_GLSL)):
        spv.append(tmp_path / f"{name}.spv")
        spv[-1].write_bytes(compile_glsl(text, name=name).code)
    return spv


@needs_tools
def test_live_capture_of_push_descriptors(device, tmp_path):
    summary = capture.run([sys.executable, PUSH_PROGRAM, *push_shaders(tmp_path), tmp_path / "out.bin"],
                          tmp_path / "cap")
    assert summary["dispatches"] == 3
    check_push_capture(tmp_path / "cap", device)


def test_the_layer_s_complaints_reach_the_manifest(tmp_path):
    """What GFXReconstruct's layer logs as an ERROR or WARNING (IREE's buffer device addresses) is collected for
    `capture run` to print; a bad range of submits is a one-line error."""
    from workbench.capture import record
    log = tmp_path / "program.log"
    log.write_text("[gfxrecon] INFO - loaded\nhello\n[gfxrecon] ERROR - The application is using "
                   "vkGetBufferDeviceAddress, which requires the bufferDeviceAddressCaptureReplay feature\n"
                   "[gfxrecon] WARNING - something\n[gfxrecon] WARNING - something\n")
    assert record.layer_messages(log) == [
        "[gfxrecon] ERROR - The application is using vkGetBufferDeviceAddress, which requires the "
        "bufferDeviceAddressCaptureReplay feature", "[gfxrecon] WARNING - something"]
    assert record.parse_submits("3-7") == "3-7" and record.parse_submits("4") == "4-4"
    for bad in ("7-3", "x", "-1"):
        with pytest.raises(CaptureError, match="expected queue submits as A-B or A"):
            record.parse_submits(bad)


@needs_tools
def test_a_trimmed_capture_holds_the_submits_asked_for(device, tmp_path):
    """`--submits 1-1` (GFXReconstruct's trimming): the program's second submit alone is captured and replays exact;
    the command buffer recorded before the range is listed, named, not replayed."""
    spv = _shaders(tmp_path)
    summary = capture.run([sys.executable, PROGRAM, *spv, tmp_path / "out.bin"], tmp_path / "cap", submits="1-1")
    assert summary["dispatches"] == 1 and summary["submits"] == "1-1"
    frame = capture.replay(tmp_path / "cap", device=device, quick=True)
    submitted = frame[frame["reason"] == ""]
    assert len(submitted) == 1 and submitted["exact"].all()
    assert frame.loc[frame["reason"] != "", "reason"].str.startswith("recorded but never submitted").all()


# tests/capture_data/template_sets: the same program with `--sets` (descriptor sets written by
# vkUpdateDescriptorSetWithTemplate: what ncnn does on a device without push descriptors)
TEMPLATE_SETS_DATA = HERE / "capture_data" / "template_sets"


def check_template_sets(folder, device):
    frame = capture.open(folder)
    assert list(frame["local_size"]) == [(LOCAL, 1, 1), (32, 1, 1), (LOCAL, 1, 1)]
    assert frame["bindings"][1] == f"0.0 storage_buffer {4 * N} B; 0.1 storage_buffer {4 * N} B"
    replayed = capture.replay(folder, device=device, quick=True)
    assert replayed["exact"].all(), replayed[["dispatch", "mismatch", "reason"]]


def test_descriptor_sets_written_through_templates_replay_exact(device):
    check_template_sets(TEMPLATE_SETS_DATA, device)


@needs_tools
def test_live_capture_of_template_written_sets(device, tmp_path):
    capture.run([sys.executable, PUSH_PROGRAM, *push_shaders(tmp_path), tmp_path / "out.bin", "--sets"],
                tmp_path / "cap")
    check_template_sets(tmp_path / "cap", device)


# tests/capture_data/launch: `workbench capture run` on tests/capture_program_launch.py (lavapipe, GFXReconstruct
# 1.0.5): vkCmdDispatchBase, a dispatch writing group counts into a buffer, vkCmdDispatchIndirect reading them
LAUNCH_DATA = HERE / "capture_data" / "launch"
LAUNCH_PROGRAM = HERE / "capture_program_launch.py"


def check_launch_capture(folder, device):
    """The indirect dispatch's groups are what the GPU wrote into the indirect buffer at that dispatch (2, 1, 1; the
    host wrote 9s) and it replays exact; the base dispatch is listed with its base and named (no dump of it)."""
    import capture_program_launch as launch
    found = capture.dispatches(folder)
    assert [d.command for d in found] == ["vkCmdDispatchBase", "vkCmdDispatch", "vkCmdDispatchIndirect"]
    assert found[0].base_group == (launch.BASE, 0, 0) and found[0].groups == (launch.GROUPS, 1, 1)
    assert found[2].groups == (launch.N_INDIRECT // launch.LOCAL, 1, 1)
    assert found[2].bindings[0].after == launch.expected()[1].tobytes()
    replayed = capture.replay(folder, device=device, quick=True)
    assert replayed["exact"].tolist() == [False, True, True], replayed[["dispatch", "mismatch", "reason"]]
    assert replayed["reason"][0].startswith("vkCmdDispatchBase: GFXReconstruct 1.0.5's --dump-resources does not")
    return found


def test_indirect_dispatches_replay_with_the_groups_read_at_that_dispatch(device):
    check_launch_capture(LAUNCH_DATA, device)


def test_a_base_group_replays_through_the_runtime(device):
    """vkCmdDispatchBase's launch: the captured stamp shader from group (2, 0, 0), its bytes given (the capture has
    none for it), equal to the program's numpy reference."""
    import dataclasses

    import capture_program_launch as launch
    from workbench.capture.replay import replay_one
    indirect = capture.dispatches(LAUNCH_DATA)[2]
    based, _ = launch.expected()
    out = dataclasses.replace(indirect.bindings[0], before=bytes(based.nbytes), after=based.tobytes(),
                              size=based.nbytes)
    tagged = indirect.push_constants[:0] + (7).to_bytes(4, "little")
    d = dataclasses.replace(indirect, command="vkCmdDispatch", groups=(launch.GROUPS, 1, 1),
                            base_group=(launch.BASE, 0, 0), push_constants=tagged, bindings=[out])
    row = replay_one(device, d, time_it=False)
    assert row["exact"], row


@needs_tools
def test_live_capture_of_base_and_indirect_dispatches(device, tmp_path):
    from workbench.toolchain.shaders import compile_glsl
    import capture_program_launch as launch
    spv = []
    for name, text in (("stamp", launch.STAMP_GLSL), ("count", launch.COUNT_GLSL)):
        spv.append(tmp_path / f"{name}.spv")
        spv[-1].write_bytes(compile_glsl(text, name=name).code)
    capture.run([sys.executable, LAUNCH_PROGRAM, *spv, tmp_path / "out.bin"], tmp_path / "cap")
    check_launch_capture(tmp_path / "cap", device)


# tests/capture_data/bda: `workbench capture run` on tests/capture_program_bda.py (lavapipe, GFXReconstruct 1.0.5):
# pointers in push constants and in a bound buffer. lavapipe has bufferDeviceAddress but not
# bufferDeviceAddressCaptureReplay: GFXReconstruct replays the captured pointers and crashes, so nothing is dumped
BDA_DATA = HERE / "capture_data" / "bda"
BDA_PROGRAM = HERE / "capture_program_bda.py"


def check_bda_capture(folder, device):
    """Every dispatch listed with where its shader reads pointers; each named, not replayed; `capture run` said why
    (its manifest's dump_failed) and what the layer said."""
    found = capture.dispatches(folder)
    assert len(found) == 3
    from workbench.vk import spirv as sp
    assert [sp.reflect(d.spirv).pointers for d in found] == [{"push": [0, 8]}, {(0, 0): [0, 8]}, {"push": [0, 8]}]
    # the reader keeps each vkGetBufferDeviceAddress's buffer and result (five buffers: x, y, z, w, the table)
    assert [sorted(s for _, s in d.addresses.values()) for d in found] == [[24, 256, 256, 256, 256]] * 3
    info = capture.manifest(folder)
    assert "bufferDeviceAddressCaptureReplay" in " ".join(info["layer_messages"])
    assert "buffer device addresses" in info["dump_failed"]
    replayed = capture.replay(folder, device=device, quick=True)
    assert not replayed["exact"].any()
    assert replayed["reason"].str.startswith("buffer device addresses (").all()
    assert "push constants at bytes 0, 8" in replayed["reason"][0] and "binding 0.0" in replayed["reason"][1]


def test_buffer_device_addresses_are_named_per_dispatch(device):
    check_bda_capture(BDA_DATA, device)


def test_the_runtime_enables_buffer_device_addresses(device):
    """What a pointer-passing shader declares (PhysicalStorageBufferAddresses) is a feature the runtime enables
    where the device has it: a buffer made with an address is reached through a pointer in push constants."""
    import capture_program_bda as bda
    from workbench import vk
    from workbench.capture.replay import missing_features
    from workbench.toolchain.shaders import compile_glsl
    code = compile_glsl(bda.PUSH_GLSL, name="bda_push").code
    if not device.info.features.get("buffer_device_address"):
        pytest.skip("this device lacks bufferDeviceAddress")
    assert missing_features(device, code) == []
    x = (np.arange(bda.N) * 5 - 100).astype(np.int32)
    with device.buffer(x, device_address=True) as src, device.buffer(nbytes=x.nbytes, device_address=True) as dst:
        push = np.array([dst.device_address, src.device_address], np.uint64).tobytes() + \
            np.array([bda.N, 11], np.int32).tobytes()
        with vk.Launches(device, [vk.Launch(code, {0: src}, groups=(1, 1, 1), push_constants=push)]) as launches:
            launches.run()
        assert np.array_equal(dst.download(np.int32), x * 2 + 11 + x[0])


@needs_tools
def test_live_capture_of_buffer_device_addresses(device, tmp_path):
    from workbench.toolchain.shaders import compile_glsl
    import capture_program_bda as bda
    spv = []
    for name, text in (("bda_push", bda.PUSH_GLSL), ("bda_table", bda.TABLE_GLSL)):
        spv.append(tmp_path / f"{name}.spv")
        spv[-1].write_bytes(compile_glsl(text, name=name).code)
    capture.run([sys.executable, BDA_PROGRAM, *spv, tmp_path / "out.bin"], tmp_path / "cap")
    check_bda_capture(tmp_path / "cap", device)


def test_host_waits_a_one_thread_replay_never_leaves_are_patched(tmp_path):
    """A vkWaitSemaphores that returned before the vkSignalSemaphore it waited for (two threads; IREE's) is found in
    the calls and its block's result rewritten to VK_TIMEOUT; a compressed block is left alone, with why."""
    import struct as st
    from workbench.capture import waits

    def call(index, name, ret=None, **args):
        return {"index": index, "function": {"name": name, "return": ret, "args": args}}

    calls = [call(1, "vkCreateSemaphore", pSemaphore=7, pCreateInfo={"pNext": {"initialValue": 0}}),
             call(2, "vkWaitSemaphores", "VK_SUCCESS", pWaitInfo={"flags": "0x00000000", "pSemaphores": [7],
                                                                  "pValues": [1]}),
             call(3, "vkSignalSemaphore", pSignalInfo={"semaphore": 7, "value": 1}),
             call(4, "vkWaitSemaphores", "VK_SUCCESS", pWaitInfo={"flags": "0x00000000", "pSemaphores": [7],
                                                                  "pValues": [1]})]
    assert waits.stuck_waits(calls) == [2]

    def block(kind, api, payload=b""):
        body = st.pack("<IQ", api, 1) + payload
        return st.pack("<QI", len(body), kind) + body

    wait = 0x11184
    blocks = [block(4, 0x11000), block(4, 0x11001), block(4, wait, st.pack("<Qi", 0, 0)), block(4, 0x11002)]
    path = tmp_path / "capture.gfxr"
    path.write_bytes(st.pack("<4sIII", b"GFXR", 0, 1, 0) + b"".join(blocks))
    assert waits.patch(path, [2]) == ""
    assert st.unpack_from("<i", path.read_bytes(), len(path.read_bytes()) - len(blocks[3]) - 4)[0] == 2
    blocks[2] = block(0x80000004, wait, st.pack("<Qi", 0, 0))
    path.write_bytes(st.pack("<4sIII", b"GFXR", 0, 1, 0) + b"".join(blocks))
    assert waits.patch(path, [2]).startswith("not patched: block 2 is compressed")


def test_iree_programs_check_their_outputs():
    """IREE's programs written here run on its Vulkan driver and match numpy (exit 0), or say in one line that IREE is
    missing (exit 2)."""
    import subprocess
    out = subprocess.run([sys.executable, "-m", "workbench.capture.engines.iree", "elementwise"],
                         capture_output=True, text=True, timeout=300)
    try:
        import iree.runtime  # noqa: F401
    except ImportError:
        assert out.returncode == 2 and "expected IREE's wheels" in out.stderr
        return
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("matches the reference") == 2
    bad = subprocess.run([sys.executable, "-m", "workbench.capture.engines.iree", "nope"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip().startswith("expected programs among matmul")


def test_a_set_from_a_descriptor_buffer_is_named(device, tmp_path):
    """VK_EXT_descriptor_buffer: a set bound from a descriptor buffer (vkCmdSetDescriptorBufferOffsetsEXT) is read
    and named — its dispatches are listed, and replay says why it cannot run them, in one line."""
    import json
    import shutil
    folder = tmp_path / "descriptor_buffer"
    shutil.copytree(DATA, folder)
    lines = (folder / "calls.jsonl").read_text().splitlines()
    calls = [json.loads(line) for line in lines]
    first = next(c for c in calls if c["function"]["name"] == "vkCmdDispatch")
    call = {"index": first["index"] - 0.5, "function": {
        "name": "vkCmdSetDescriptorBufferOffsetsEXT", "thread": 1, "return": None,
        "args": {"commandBuffer": first["function"]["args"]["commandBuffer"], "pipelineBindPoint":
                 "VK_PIPELINE_BIND_POINT_COMPUTE", "layout": 1, "firstSet": 0, "setCount": 1,
                 "pBufferIndices": [0], "pOffsets": [0]}}}
    (folder / "calls.jsonl").write_text("\n".join(lines + [json.dumps(call)]) + "\n")
    found = capture.dispatches(folder)
    assert found[0].descriptor_buffer_sets == (0,) and not found[0].bindings
    rows = capture.replay(folder, [found[0].dispatch], device=device, quick=True)
    reason = rows["reason"].iloc[0]
    assert "descriptor buffer (VK_EXT_descriptor_buffer)" in reason and "\n" not in reason


def test_a_dispatch_sees_a_set_as_it_was_when_it_was_recorded():
    """ggml writes the same descriptor set again for every graph: each dispatch takes the set's last write before
    it, not the capture's final one (its first GEMV had read as a stale dump)."""
    from workbench.capture.format import _sets_at, _update_set
    sets, history = {}, {}
    _update_set(sets, history, 7, {0: ("storage_buffer", {"buffer": 12})}, index=5)
    _update_set(sets, history, 7, {1: ("storage_buffer", {"buffer": 13})}, index=6)
    _update_set(sets, history, 7, {0: ("storage_buffer", {"buffer": 25})}, index=20)
    first = _sets_at(sets, history, {"index": 10, "sets": {0: (7, [])}})
    second = _sets_at(sets, history, {"index": 30, "sets": {0: (7, [])}})
    assert first[7][0][1]["buffer"] == 12 and first[7][1][1]["buffer"] == 13
    assert second[7][0][1]["buffer"] == 25 and second[7][1][1]["buffer"] == 13
    pushed = ("push", 3)                                   # a push descriptor's set: as _recordings wrote it
    sets[pushed] = {0: ("storage_buffer", {"buffer": 4})}
    assert _sets_at(sets, history, {"index": 3, "sets": {0: (pushed, [])}})[pushed] == sets[pushed]
