"""Shared-memory races under GPU-assisted validation (workbench.checks.races, microscope.races, `workbench capture
races`, toolchain.validation): a planted race — each invocation stores its word to a shared array and reads its
neighbour's without a barrier — is caught by the layer of 2026; the same shader with the barrier is clean and exact.
The layer runs where `./setup.sh validation` built it (skipped otherwise); the message parsing, the layer's
resolution and the CLI's errors are tested everywhere."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from workbench import vk
from workbench.capture import microscope
from workbench.capture.format import CapturedBinding, CapturedDispatch
from workbench.checks import races
from workbench.cli import main as cli_main
from workbench.toolchain import shaders, validation

N, LOCAL = 128, 64

# y[i] = x[the next invocation of the work group]: through a shared array, a barrier between the store and the load
# only WITH_BARRIER
PLANTED = """#version 450
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) writeonly buffer Y { uint y[]; };
layout(set = 0, binding = 1) readonly buffer X { uint x[]; };
shared uint neighbours[64];
void main() {
  uint i = gl_LocalInvocationID.x;
  neighbours[i] = x[gl_GlobalInvocationID.x];
#if WITH_BARRIER
  barrier();
#endif
  y[gl_GlobalInvocationID.x] = neighbours[(i + 1u) % 64u];
}
"""

RACE_MESSAGE = ('Validation Error: [ SharedMemoryDataRace-RaceOnLoad ] | MessageID = 0x1 | vkQueueSubmit(): '
                'A data race was detected on the shared memory variable "neighbours" in local invocation index 5 '
                'while performing a load operation. (Likely against local invocation index 6)\n'
                'Shader validation error occurred at planted.comp:13')


def planted(barrier: bool) -> CapturedDispatch:
    """A captured dispatch of PLANTED at local size 64 × 2 groups, its 'after' bytes computed in numpy."""
    spirv = shaders.compile_glsl(PLANTED, name="planted", defines={"WITH_BARRIER": int(barrier)}).code
    x = (np.arange(N, dtype=np.uint32) * 2654435761) & 0xFFFFFFFF
    lane = np.arange(N) % LOCAL
    y = x[(np.arange(N) - lane) + (lane + 1) % LOCAL].astype(np.uint32)
    return CapturedDispatch(
        dispatch=int(barrier), index=10, command_buffer=1, begin_index=5, submit=12, pipeline=2, spirv=spirv,
        entry_point="main", spec_data=struct.pack("<3I", LOCAL, 1, 1), spec_entries={k: (4 * k, 4) for k in range(3)},
        push_constants=b"", groups=(N // LOCAL, 1, 1), bindings=[
            CapturedBinding(0, 0, "storage_buffer", 1, size=4 * N, before=bytes(4 * N), after=y.tobytes()),
            CapturedBinding(0, 1, "storage_buffer", 2, size=4 * N, before=x.tobytes(), after=x.tobytes())])


@pytest.fixture(scope="module")
def built_layer():
    if not validation.is_set_up():
        pytest.skip(f"the validation layer {validation.TAG} is not built ({validation.SETUP_COMMAND})")
    return str(validation.layer_dir())


def test_the_planted_race_is_caught_and_the_barrier_version_is_clean(device, built_layer):
    frame = microscope.races([planted(False), planted(True)], layer=built_layer, device=device)
    racy, fenced = frame.iloc[0], frame.iloc[1]
    assert racy["shared_memory"] and fenced["shared_memory"]
    assert racy["races"] >= 1 and not racy["clean"], racy.to_dict()
    assert "SharedMemoryDataRace" in racy["found"] and '"neighbours"' in racy["found"], racy["found"]
    assert fenced["races"] == 0 and fenced["clean"] and fenced["exact"], fenced.to_dict()
    assert fenced["other_messages"] == ""


def test_a_launch_on_the_race_device_reports_through_checks_races(device, built_layer):
    code = shaders.compile_glsl(PLANTED, name="planted", defines={"WITH_BARRIER": 0}).code
    dev = races.race_device(device, built_layer)
    try:
        assert dev.instance.layer_version.startswith("1.4.")
        x = dev.buffer(np.arange(N, dtype=np.uint32))
        y = dev.buffer(nbytes=4 * N)
        launch = vk.Launch(code, [y, x], groups=(N // LOCAL, 1, 1), local_size=(LOCAL, 1, 1))
        with vk.Launches(dev, [launch]) as launches, dev.record("planted") as rec:
            launches.record(rec)
            rec.submit()
        found = races.take(dev)
        assert found["races"] and all("shared memory variable" in line for line in found["races"]), found
        x.close(), y.close()
    finally:
        dev.close()


def test_race_messages_are_told_apart_and_put_in_one_line():
    message = vk.LayerMessage(text=RACE_MESSAGE, severity="error", message_id="SharedMemoryDataRace-RaceOnLoad")
    assert races.is_race(message) and not races.is_race("Validation Error: [ VUID-vkCmdDispatch-None-08114 ] x")
    line = races.race_line(message)
    assert "\n" not in line and line.startswith("SharedMemoryDataRace-RaceOnLoad: A data race")
    assert line.endswith("(Likely against local invocation index 6) [planted.comp:13]")


def test_shared_memory_is_seen_in_the_spirv():
    assert races.uses_shared_memory(planted(True).spirv)
    assert not races.uses_shared_memory(shaders.compile_glsl(
        "#version 450\nlayout(local_size_x = 1) in;\nlayout(binding = 0) buffer B { uint b[]; };\n"
        "void main() { b[0] = 1u; }\n", name="plain").code)


def test_the_layer_is_named_or_refused_in_one_line(tmp_path, monkeypatch):
    assert validation.resolve_layer("system") is None
    monkeypatch.delenv("WORKBENCH_VALIDATION_LAYER", raising=False)
    assert validation.resolve_layer() is None
    with pytest.raises(validation.ValidationLayerError, match="expected the validation layer as 'system', 'built' or "
                                                                "a folder holding VkLayer_khronos_validation.json"):
        validation.resolve_layer(str(tmp_path))
    monkeypatch.setenv("WORKBENCH_VVL_DIR", str(tmp_path / "empty"))
    with pytest.raises(validation.ValidationLayerNotSetUpError, match=r"not built in .*\./setup\.sh validation"):
        validation.layer_dir()
    with pytest.raises(ValueError, match="the race check needs a validation layer from 2026"):
        races.race_device(None, None)


def test_cli_races_without_the_layer_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORKBENCH_VVL_DIR", str(tmp_path / "empty"))
    assert cli_main(["capture", "races", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "./setup.sh validation" in err, err
    assert cli_main(["capture", "races", str(tmp_path), "--layer", "system"]) == 2
    assert "has no shared-memory race detection" in capsys.readouterr().err


def test_recipe_pins_the_tag_and_its_known_good_dependencies():
    assert validation.TAG == "vulkan-sdk-1.4.357.0" and validation.RACE_SETTING == "gpuav_shared_memory_data_race"
    assert set(validation.REPOS) == {"Vulkan-ValidationLayers", "Vulkan-Headers", "Vulkan-Utility-Libraries",
                                     "SPIRV-Headers", "SPIRV-Tools"}
    assert all(len(commit) == 40 for _, commit in validation.REPOS.values())
    status = validation.status(str(validation.cache_root()))
    assert set(status) >= {"set_up", "root", "missing", "tools"}


def test_etvk_shared_memory_families_run_under_race_detection(device, built_layer, real):
    from workbench.etvk.checks import check_races
    rows = check_races(device, real, ["q8ta_linear_gemv", "q8ta_clone"], layer=built_layer)
    gemv, clone = rows
    assert gemv["shared_memory"] and not clone["shared_memory"]
    assert gemv["correct"] and clone["correct"], rows
    assert clone["races"] == 0 and clone["clean"], clone


def test_sources_from_a_git_directory_leave_absent_blobs_out_and_resume(tmp_path, monkeypatch):
    """The recipe's source step on a git directory made here whose generated VUID table's blob is gone (as in a
    partial snapshot): the tree comes without it, the empty table is written, and a second set-up keeps the tree."""
    import subprocess
    repo = tmp_path / "git" / "Vulkan-ValidationLayers"
    table = repo / validation.VUID_TABLE
    table.parent.mkdir(parents=True)
    table.write_text("// the real table\n")
    (repo / "CMakeLists.txt").write_text("project(VVL)\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "x"], check=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    blob = subprocess.run(git + ["rev-parse", f"HEAD:{validation.VUID_TABLE}"], capture_output=True,
                          text=True).stdout.strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    monkeypatch.setattr(validation, "REPOS", {"Vulkan-ValidationLayers": ("unused", commit)})
    root, log = tmp_path / "cache", tmp_path / "log"
    base, found = validation._sources(root, None, str(tmp_path / "git" / "{name}") + "/.git", log, lambda t: None)
    tree = base / "Vulkan-ValidationLayers"
    assert found["Vulkan-ValidationLayers"]["absent"] == [validation.VUID_TABLE]
    assert found["Vulkan-ValidationLayers"]["empty_vuid_table"] is True
    assert (tree / "CMakeLists.txt").is_file() and "GetVuidMap" in (tree / validation.VUID_TABLE).read_text()
    said = []
    validation._sources(root, None, "/nowhere/{name}", log, said.append)  # kept: the git directory is not read
    assert any("kept" in line for line in said), said
    monkeypatch.setattr(validation, "REPOS", {"Vulkan-ValidationLayers": ("unused", "0" * 40)})
    with pytest.raises(validation.ValidationLayerSetupError, match="expected commit 0000000000"):
        validation._sources(root, None, str(tmp_path / "git" / "{name}") + "/.git", log, lambda t: None)
