"""workbench.capture.pointers: buffer device addresses of a captured dispatch rebased onto the replay's buffers.

No device here has bufferDeviceAddressCaptureReplay (lavapipe has bufferDeviceAddress only), so GFXReconstruct's
dump step cannot run on a pointer-passing program (tests/test_capture.py: each dispatch named). These tests build
the dispatches by hand from tests/capture_program_bda.py's shaders: their 'captured' bytes computed in numpy, at
fake captured addresses or at the addresses the committed capture's calls hold, and replay them on the real device
through the one launch path; the replay must be exact, and what it cannot check named."""
from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench import capture
from workbench.capture import pointers
from workbench.capture.format import CapturedBinding, CapturedDispatch, _addresses_at
from workbench.capture.replay import launch_of, replay_one, running
from workbench.vk import spirv as sp

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import capture_program_bda as bda  # noqa: E402  (its shaders and its numpy reference)

N = bda.N
NBYTES = N * 4
# fake captured addresses of the program's buffers (ids as the capture numbers them)
X, Y, Z, W, TABLE = 7, 9, 11, 13, 15
FAKE = {X: (0x7F00_0000_0000, NBYTES), Y: (0x7F00_0000_2000, NBYTES), Z: (0x7F00_0000_4000, NBYTES),
        W: (0x7F00_0000_6000, NBYTES), TABLE: (0x7F00_0000_8000, 24)}
XS = (np.arange(N) * 5 - 100).astype(np.int32)


@pytest.fixture(scope="module")
def shaders():
    from workbench.toolchain.shaders import compile_glsl
    return {name: compile_glsl(text, name=f"bda_{name}").code for name, text in
            (("push", bda.PUSH_GLSL), ("table", bda.TABLE_GLSL))}


@pytest.fixture
def bda_device(device):
    if not device.info.features.get("buffer_device_address"):
        pytest.skip("this device lacks bufferDeviceAddress")
    return device


def binding(number, buffer, before, after=None, offset=0):
    before = np.asarray(before).tobytes()
    after = before if after is None else np.asarray(after).tobytes()
    return CapturedBinding(0, number, "storage_buffer", buffer, offset, len(before), before=before, after=after)


def dispatch(spirv, push=b"", bindings=(), addresses=FAKE, number=0) -> CapturedDispatch:
    return CapturedDispatch(dispatch=number, index=100 + number, command_buffer=1, begin_index=99, submit=200,
                            pipeline=5, spirv=spirv, entry_point="main", spec_data=b"", spec_entries={},
                            push_constants=push, groups=(1, 1, 1), bindings=list(bindings), addresses=dict(addresses))


def push_words(dst, src, n, add) -> bytes:
    return struct.pack("<QQIi", dst, src, n, add)


def test_pointers_in_push_constants_are_rebased(bda_device, shaders):
    """dst = y (bound at a binding the shader does not declare: from its dump, compared), src = x + 16 bytes (the
    buffer the shader also binds: one replay buffer for both, the same offset kept)."""
    y = np.zeros(N, np.int32)
    y[:N - 4] = XS[4:] * 2 + 11 + XS[0]
    push = push_words(FAKE[Y][0], FAKE[X][0] + 16, N - 4, 11)
    d = dispatch(shaders["push"], push, [binding(0, X, XS), binding(1, Y, np.zeros(N, np.int32), y)])
    row = replay_one(bda_device, d, time_it=False)
    assert row["reason"] == "" and row["exact"] and row["mismatch"] == "exact", row
    wrong = y.copy()
    wrong[3] += 1
    d.bindings[1].after = wrong.tobytes()  # the comparison is real: one int off is caught
    row = replay_one(bda_device, d, time_it=False)
    assert not row["exact"] and row["mismatch"].startswith("binding 0.1"), row


def test_pointers_held_in_a_bound_buffer_are_rebased(bda_device, shaders):
    """The table (binding 0) holds dst = z, src = y; its 'after' bytes (the captured pointers) are rebased the same
    way before they are compared."""
    table = struct.pack("<QQI4x", FAKE[Z][0], FAKE[Y][0], N)
    ys = XS * 3 + 1
    d = dispatch(shaders["table"], b"", [binding(0, TABLE, np.frombuffer(table, np.uint8)), binding(1, Y, ys),
                                         binding(2, Z, np.zeros(N, np.int32), ys[::-1] - 3)])
    assert sp.reflect(d.spirv).pointers == {(0, 0): [0, 8]}
    row = replay_one(bda_device, d, time_it=False)
    assert row["reason"] == "" and row["exact"] and row["mismatch"] == "exact", row


def test_a_buffer_no_descriptor_binds_is_made_and_named(bda_device, shaders):
    """dst = w, which no descriptor binds: a buffer of w's captured size is made (zeros), the shader writes it through
    the rebased pointer, and the row names it as not compared."""
    z = XS[::-1] - 3
    push = push_words(FAKE[W][0], FAKE[Z][0], N, -4)
    d = dispatch(shaders["push"], push, [binding(0, X, XS), binding(1, Z, z)])
    row = replay_one(bda_device, d, time_it=False)
    assert row["reason"] == "" and row["exact"], row
    assert f"buffer {W} ({NBYTES} bytes) reached by pointer only" in row["mismatch"]
    assert "not compared" in row["mismatch"]
    launch, outputs = launch_of(bda_device, d)
    with running(bda_device, launch) as launches:
        launches.run()
        w = launch.resources[f"buffer {W}, reached by pointer only"].download(np.int32)
    assert np.array_equal(w, z * 2 - 4 + XS[0])
    assert [(c.set, c.binding) for c, _ in outputs] == [(0, 0), (0, 1)]


def test_values_outside_every_captured_buffer_are_left_alone(bda_device, shaders):
    """A pointer word that no captured buffer holds (null, or an address the capture never took) is passed as
    captured and named; n = 0, so the shader dereferences neither."""
    push = push_words(0, 0xDEAD_0000, 0, 0)
    d = dispatch(shaders["push"], push, [binding(0, X, XS)])
    launch, _ = launch_of(bda_device, d)
    with running(bda_device, launch):
        assert launch.push_constants == push
    row = replay_one(bda_device, d, time_it=False)
    assert row["exact"] and "pointer in push constants at byte 8 = 0xdead0000 is in no captured buffer" \
        in row["mismatch"] and "byte 0 " not in row["mismatch"], row


def test_the_rebase_itself():
    """Inside [address, address + size): rebased to the replay buffer's address + the same offset; the end, before
    the start, or a buffer with no replay buffer placed: left alone."""
    rebase = pointers.Rebase({X: (0x1000, 256), Y: (0x2000, 64)})
    rebase.place(X, 0, 256, 0x9_0000)
    assert rebase.value(0x1000) == 0x9_0000 and rebase.value(0x10FF) == 0x9_00FF
    assert rebase.value(0x1100) is None and rebase.value(0xFFF) is None and rebase.value(0x2000) is None
    data = struct.pack("<QQQ", 0x1010, 0x1100, 0x2000)
    assert struct.unpack("<QQQ", rebase.bytes(data, [0, 8, 16])) == (0x9_0010, 0x1100, 0x2000)
    assert rebase.bytes(data, [0, 20]) == struct.pack("<QQQ", 0x9_0010, 0x1100, 0x2000)  # a word cut short: kept
    rebase.place(Y, 16, 32, 0x5_0000)  # a binding of bytes 16..48 of y
    assert rebase.value(0x2018) == 0x5_0008 and rebase.value(0x2008) is None
    # the reader keeps the later-taken of two ranges that overlap (a buffer destroyed, its address reused)
    taken = [(10, X, 0x1000), (20, Y, 0x2000), (30, Z, 0x1080)]
    sizes = {X: 256, Y: 64, Z: 64}
    assert _addresses_at(taken, sizes, 25) == {X: (0x1000, 256), Y: (0x2000, 64)}
    assert _addresses_at(taken, sizes, 99) == {Y: (0x2000, 64), Z: (0x1080, 64)}


def test_pointers_that_cannot_be_rebased_are_named(bda_device, shaders):
    push = push_words(FAKE[Y][0], FAKE[X][0] + 200, 4, 0)
    part = binding(0, X, XS[:32])  # bytes 0..128 of x bound: the pointer reaches byte 200
    row = replay_one(bda_device, dispatch(shaders["push"], push, [part]), time_it=False)
    assert "reaches byte 200 of buffer 7, outside the range 0..128 bound at binding 0.0" in row["reason"], row
    row = replay_one(bda_device, dispatch(shaders["push"], push, [binding(0, X, XS)], addresses={}), time_it=False)
    assert row["reason"].startswith("buffer device addresses: the capture's calls hold no vkGetBufferDeviceAddress")


def test_the_committed_capture_replays_exact_with_its_dumps_computed(bda_device):
    """The committed capture (lavapipe: nothing dumped) with the bytes a capture-replay device would dump filled in
    from numpy: its real push constants, its real captured addresses (the reader keeps vkGetBufferDeviceAddress's
    results), the table holding them. All three dispatches replay exact; w (bound nowhere) is named."""
    found = capture.dispatches(HERE / "capture_data" / "bda")
    assert [len(d.addresses) for d in found] == [5, 5, 5]
    address = {b: a for b, (a, _) in found[0].addresses.items()}
    sizes = {b: s for b, (_, s) in found[0].addresses.items()}
    buffer_at = {a: b for b, a in address.items()}
    x, y, z = XS, XS * 2 + 11 + XS[0], (XS * 2 + 11 + XS[0])[::-1] - 3
    zero = np.zeros(N, np.int32)
    # the program's buffers by what its push constants and bindings name them
    dst0, src0 = struct.unpack_from("<QQ", found[0].push_constants)
    dst2, src2 = struct.unpack_from("<QQ", found[2].push_constants)
    ids = {"x": buffer_at[src0], "y": buffer_at[dst0], "z": buffer_at[src2], "w": buffer_at[dst2]}
    table = found[1].bindings[0].resource
    assert sizes[table] == 24 and ids["w"] not in {b.resource for d in found for b in d.bindings}
    contents = {  # (before, after) per dispatch and buffer
        0: {ids["x"]: (x, x), ids["y"]: (zero, y)},
        1: {table: (np.frombuffer(struct.pack("<QQI4x", address[ids["z"]], address[ids["y"]], N), np.int32),) * 2,
            ids["y"]: (y, y), ids["z"]: (zero, z)},
        2: {ids["x"]: (x, x), ids["z"]: (z, z)},
    }
    for d in found:
        for b in d.bindings:
            before, after = contents[d.dispatch][b.resource]
            b.before, b.after = np.asarray(before).tobytes(), np.asarray(after).tobytes()
    rows = [replay_one(bda_device, d, time_it=False) for d in found]
    assert [r["reason"] for r in rows] == ["", "", ""] and all(r["exact"] for r in rows), rows
    assert rows[0]["mismatch"] == rows[1]["mismatch"] == "exact"
    assert f"buffer {ids['w']} ({NBYTES} bytes) reached by pointer only" in rows[2]["mismatch"]


def test_the_h200_capture_replays_exact_here(bda_device):
    """tests/capture_data/nvidia_h200/bda: `tools/gpu_bda.sh` on the H200 (bufferDeviceAddressCaptureReplay: the
    layer kept opaque addresses, GFXReconstruct's replay made the buffers at them and dumped every binding, the
    table's pointers as captured). Replayed here, every pointer rebased onto this device's buffers: 3 of 3 exact,
    w (bound nowhere, so in no dump) named."""
    folder = HERE / "capture_data" / "nvidia_h200" / "bda"
    assert "layer_messages" not in capture.manifest(folder) and "dump_failed" not in capture.manifest(folder)
    frame = capture.replay(folder, device=bda_device, quick=True)
    assert list(frame["reason"].fillna("")) == ["", "", ""] and frame["exact"].all(), frame.to_dict("records")
    assert list(frame["mismatch"][:2]) == ["exact", "exact"]
    assert frame["mismatch"][2].startswith("exact; buffer 13 (256 bytes) reached by pointer only")


def test_a_shader_whose_pointers_the_reflection_cannot_place_is_named(bda_device):
    """An address taken from an integer (uint64_t cast to a pointer): no pointer member where the reflection looks,
    so nothing to rebase; the dispatch is named, never run with the captured address."""
    from workbench.toolchain.shaders import compile_glsl
    code = compile_glsl("""#version 450
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };
layout(set = 0, binding = 0) buffer X { int x[]; };
layout(push_constant) uniform P { uint64_t dst; };
void main() { Ints(dst).v[gl_GlobalInvocationID.x] = x[gl_GlobalInvocationID.x]; }
""", name="bda_cast").code
    assert sp.reflect(code).pointers == {}
    d = dispatch(code, struct.pack("<Q", FAKE[Y][0]), [binding(0, X, XS)])
    row = replay_one(bda_device, d, time_it=False)
    assert row["reason"].startswith("buffer device addresses: the shader declares PhysicalStorageBufferAddresses"), row
