"""ncnn under capture: the extension-hiding layer (built with cc, CI), one captured range bound at two bindings (a
program written here, CI), the peers' coverage table's one writer (CI), and ncnn's own net captured and replayed
byte-exact in fp32 and fp16 storage (where ncnn's wheel and GFXReconstruct's tools are present: `./setup.sh peers`,
`./setup.sh capture`)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from workbench import capture
from workbench.capture import CaptureError, coverage
from workbench.capture.format import CapturedBinding, CapturedDispatch
from workbench.capture.replay import replay_one
from workbench.cli import main as cli_main
from workbench.toolchain import gfxreconstruct, hide_layer

PUSH = "VK_KHR_push_descriptor"
LIST_EXTENSIONS = """
import vulkan as vk
inst = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=vk.VkApplicationInfo(
    apiVersion=vk.VK_MAKE_VERSION(1, 2, 0))), None)
names = set()
for gpu in vk.vkEnumeratePhysicalDevices(inst):
    names |= {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(gpu, None)}
vk.vkDestroyInstance(inst, None)
print(" ".join(sorted(names)))
"""
needs_cc = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="no C compiler (cc) here")
needs_ncnn = pytest.mark.skipif(importlib.util.find_spec("ncnn") is None or not gfxreconstruct.is_set_up(),
                                reason="ncnn's wheel (./setup.sh peers) or GFXReconstruct (./setup.sh capture) is "
                                       "absent")


def _extensions(extra_env: dict) -> set[str]:
    env = {k: v for k, v in os.environ.items() if k != "VK_INSTANCE_LAYERS"}
    out = subprocess.run([sys.executable, "-c", LIST_EXTENSIONS], env={**env, **extra_env}, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return set(out.stdout.split())


@needs_cc
def test_the_layer_hides_the_extensions_it_is_given():
    plain = _extensions({})
    hidden = _extensions(hide_layer.environment([PUSH, "VK_KHR_8bit_storage"]))
    assert PUSH not in hidden and "VK_KHR_8bit_storage" not in hidden
    assert plain - hidden <= {PUSH, "VK_KHR_8bit_storage"} and hidden <= plain and len(hidden) > 10
    assert _extensions(hide_layer.environment([])) == plain  # an empty list hides nothing


def test_bad_extension_names_are_one_line_errors(tmp_path, capsys):
    with pytest.raises(hide_layer.HideLayerError, match="expected a Vulkan extension name"):
        hide_layer.check_names(["push_descriptor"])
    assert hide_layer.check_names(["VK_A_b,VK_C_d", "VK_A_b"]) == ["VK_A_b", "VK_C_d"]
    assert cli_main(["capture", "run", "--hide-extension", "nope", "--out", str(tmp_path / "c"), "--", "true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected" in err[0], err


ALIASED_GLSL = """#version 450
layout(local_size_x = 16) in;
layout(set = 0, binding = 0) readonly buffer In { float x[]; } src;
layout(set = 0, binding = 1) buffer Out32 { float y[]; } out32;   // ncnn: the same blob as fp32 ...
layout(set = 0, binding = 2) buffer Out16 { uint h[]; } out16;     // ... and as packed halves; one is written
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (src.x[i] < -1e30) out16.h[i] = 0u;  // never at run time: keeps binding 2 in the module, as ncnn's shaders do
  else out32.y[i] = 2.0 * src.x[i] + 1.0;
}
"""


def test_one_range_bound_at_two_bindings_is_one_buffer(device):
    """ncnn binds one blob at two bindings (its fp32 and fp16 views) and its shader writes one: the replay binds one
    buffer for both, so both bindings' captured 'after' bytes come out; a partial overlap is a named reason."""
    from workbench.toolchain.shaders import compile_glsl
    n = 64
    x = np.arange(n, dtype=np.float32)
    before, after = np.zeros(n, np.float32).tobytes(), (2 * x + 1).astype(np.float32).tobytes()

    def dispatch(second_offset):
        return CapturedDispatch(
            dispatch=0, index=10, command_buffer=1, begin_index=5, submit=20, pipeline=3,
            spirv=compile_glsl(ALIASED_GLSL, name="aliased").code, entry_point="main", spec_data=b"",
            spec_entries={}, push_constants=b"", groups=(n // 16, 1, 1),
            bindings=[CapturedBinding(0, 0, "storage_buffer", 7, 0, 4 * n, before=x.tobytes(), after=x.tobytes()),
                      CapturedBinding(0, 1, "storage_buffer", 9, 0, 4 * n, before=before, after=after),
                      CapturedBinding(0, 2, "storage_buffer", 9, second_offset, 4 * n, before=before, after=after)])

    row = replay_one(device, dispatch(0), time_it=False)
    assert row["exact"] and not row["reason"], row
    row = replay_one(device, dispatch(16), time_it=False)
    assert not row["exact"] and "overlap another binding's 0..256" in row["reason"], row


def test_the_coverage_table_keeps_other_engines_rows(tmp_path):
    path = tmp_path / "peers.csv"
    iree = pd.DataFrame({"engine": "iree", "program": "matmul", "dispatch": [0], "exact": [True], "reason": [""]})
    ncnn = pd.DataFrame({"engine": "ncnn", "program": "net fp32", "dispatch": [0, 1], "exact": [True, False],
                         "reason": ["", "stale dump"]})
    coverage.write_rows(iree, path)
    coverage.write_rows(ncnn, path)
    again = ncnn.assign(exact=True, reason="")
    table = coverage.write_rows(again, path)  # replaces ncnn's rows, keeps IREE's
    assert list(zip(table["engine"], table["dispatch"], table["exact"])) == \
        [("iree", 0, True), ("ncnn", 0, True), ("ncnn", 1, True)]
    assert pd.read_csv(path).shape[0] == 3
    summary = coverage.summary(table)
    assert summary.set_index("engine").loc["ncnn", "exact_pct"] == 100.0
    with pytest.raises(CaptureError, match="lack exact"):
        coverage.write_rows(pd.DataFrame({"engine": ["x"], "program": ["y"], "dispatch": [0], "reason": [""]}), path)
    (tmp_path / "bad.csv").write_text('a,b\n"x\n1,2,3\n')
    with pytest.raises(CaptureError, match="expected .*bad.csv to be a coverage table"):
        coverage.write_rows(ncnn, tmp_path / "bad.csv")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(CaptureError, match="with columns engine and program, found a, b"):
        coverage.write_rows(ncnn, tmp_path / "other.csv")


@needs_ncnn
@pytest.mark.parametrize("storage", ["fp32", "fp16"])
def test_ncnn_captured_and_replayed_exact(device, tmp_path, storage, capsys):
    """ncnn's net (conv 3x3, conv 1x1, depthwise, pooling, inner product), checked against torch by the program
    itself, captured without VK_KHR_push_descriptor: every dispatch listed with its local size from specialization
    constants 233-235 and replayed byte-exact from the CLI; the list says what was hidden."""
    folder = tmp_path / storage
    command = [sys.executable, "-m", "workbench.capture.engines.ncnn"] + (["--fp16"] if storage == "fp16" else [])
    assert cli_main(["capture", "run", "--hide-extension", PUSH, "--out", str(folder), "--", *command]) == 0
    said = capsys.readouterr().out
    assert f"the program ran without {PUSH}" in said
    assert capture.manifest(folder)["hidden_extensions"] == [PUSH]
    assert "matches torch" in (folder / "program.log").read_text()
    listed = capture.open(folder)
    assert len(listed) >= 12
    assert {(16, 1, 1), (4, 4, 4), (64, 1, 1)} & set(listed["local_size"])  # ncnn's own sizes, not 1x1x1
    assert cli_main(["capture", "list", str(folder)]) == 0
    assert f"{PUSH} hidden from the program" in capsys.readouterr().out
    csv = tmp_path / "replay.csv"
    assert cli_main(["capture", "replay", str(folder), "--quick", "--csv", str(csv)]) == 0
    replayed = pd.read_csv(csv)
    assert replayed["exact"].all() and len(replayed) == len(listed)
