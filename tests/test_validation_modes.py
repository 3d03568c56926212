"""The validation modes: synchronization validation, GPU-assisted validation, debug printf, each catching its planted
bug (tests/shaders/validation/), the clean shader silent, messages naming kernel / dispatch / binding, printf lines
filtered by invocation, the CLI's --validate."""
import numpy as np
import pytest

from workbench.toolchain import shaders
from workbench import vk

SHADERS = "tests/shaders/validation"
N = 64


def _copy(dev, offset=0, name="copy"):
    spv = shaders.compile_shader("oob_write", {"OFFSET": offset}, shader_dir=SHADERS)
    return dev.pipeline(spv, local_size=(16, 1, 1), name=name)


def _n():
    return np.array([N], np.uint32)


@pytest.fixture(scope="module")
def sync_dev():
    dev = vk.Device(sync_validation=True)
    yield dev
    dev.close()


@pytest.fixture(scope="module")
def gpu_dev():
    dev = vk.Device(gpu_assisted=True)
    yield dev
    dev.close()


@pytest.fixture(scope="module")
def printf_dev():
    dev = vk.Device(debug_printf=True)
    yield dev
    dev.close()


def test_modes_parse():
    assert vk.validation_modes("sync,gpu") == {"sync", "gpu"}
    assert vk.validation_modes(None, sync_validation=True, debug_printf=True) == {"sync", "printf"}
    with pytest.raises(ValueError, match="cannot run together"):
        vk.validation_modes("gpu,printf")
    with pytest.raises(ValueError, match="unknown validation mode"):
        vk.validation_modes("sinc")


def test_env_names_modes(monkeypatch):
    from workbench.vk import discovery
    monkeypatch.setenv("WORKBENCH_VALIDATION", "sync")
    assert discovery.env_validation() == (True, frozenset({"sync"}))
    monkeypatch.setenv("WORKBENCH_VALIDATION", "1")
    assert discovery.env_validation() == (True, frozenset())
    monkeypatch.setenv("WORKBENCH_VALIDATION", "0")
    assert discovery.env_validation() == (False, frozenset())


def test_mode_devices_share_instances(sync_dev):
    assert sync_dev.instance.validation and sync_dev.modes == {"sync"}
    assert vk.instance(modes="sync") is sync_dev.instance


def test_sync_catches_missing_barrier(sync_dev):
    dev = sync_dev
    p = _copy(dev)
    src = dev.buffer(np.arange(N, dtype=np.uint32), name="src")
    mid, dst = dev.buffer(nbytes=4 * N, name="mid"), dev.buffer(nbytes=4 * N, name="dst")
    with dev.record("race") as rec:
        rec.dispatch(p, [mid, src], (N,), _n(), label="write-mid")
        rec.dispatch(p, [dst, mid], (N,), _n(), label="read-mid", barrier=False)
    found = dev.take_validation_messages()
    assert [m.message_id for m in found] == ["SYNC-HAZARD-READ-AFTER-WRITE"], found
    m = found[0]
    assert (m.kernel, m.dispatch, m.dispatch_index, m.binding, m.recording) == ("copy", "read-mid", 1, 1, "race")
    assert "[mid]" in m.text and "[kernel copy, dispatch read-mid, binding 1]" in str(m)


def test_sync_clean_with_barrier(sync_dev):
    dev = sync_dev
    p = _copy(dev)
    src = dev.buffer(np.arange(N, dtype=np.uint32))
    mid, dst = dev.buffer(nbytes=4 * N), dev.buffer(nbytes=4 * N)
    with dev.record("ordered") as rec:
        rec.dispatch(p, [mid, src], (N,), _n(), label="write-mid")
        rec.dispatch(p, [dst, mid], (N,), _n(), label="read-mid")
    assert dev.take_validation_messages() == []
    np.testing.assert_array_equal(dst.download(np.uint32), np.arange(N))


def test_gpu_assisted_catches_out_of_bounds_write(gpu_dev):
    dev = gpu_dev
    p = _copy(dev, offset=1, name="oob_write")
    src, dst = dev.buffer(np.arange(N, dtype=np.uint32)), dev.buffer(nbytes=4 * N + 0)
    dev.run(p, [dst, src], (N,), _n(), label="planted-oob")
    found = dev.take_validation_messages()
    assert [m.message_id for m in found] == ["VUID-vkCmdDispatch-None-02706"], found
    m = found[0]
    assert (m.kernel, m.dispatch, m.dispatch_index, m.invocation) == ("oob_write", "planted-oob", 0, (N - 1, 0, 0))
    assert f"Descriptor size is {4 * N} and highest byte accessed was {4 * N + 3}" in m.text


def test_gpu_assisted_clean(gpu_dev):
    dev = gpu_dev
    p = _copy(dev, offset=0)
    src, dst = dev.buffer(np.arange(N, dtype=np.uint32)), dev.buffer(nbytes=4 * N)
    dev.run(p, [dst, src], (N,), _n(), label="clean")
    assert dev.take_validation_messages() == []
    np.testing.assert_array_equal(dst.download(np.uint32), np.arange(N))


def test_printf_collected_and_filtered(printf_dev):
    dev = printf_dev
    spv = shaders.compile_shader("printf_each", shader_dir=SHADERS)
    p = dev.pipeline(spv, local_size=(16, 1, 1), name="printf_each")
    q = dev.pipeline(spv, local_size=(32, 1, 1), name="printf_wide")
    src, dst = dev.buffer(np.arange(N, dtype=np.uint32)), dev.buffer(nbytes=4 * N)
    with dev.record("printing") as rec:
        rec.dispatch(p, [dst, src], (N,), _n(), label="first")
        rec.dispatch(q, [dst, src], (N,), _n(), label="second")
    assert len(rec.printf) == 2 * N
    assert sorted(m.text for m in rec.printf_messages(dispatch="first")) == sorted(
        f"i={i} src={i} dst={2 * i}" for i in range(N))
    five = rec.printf_messages(invocation=5)
    assert [(m.text, m.dispatch, m.kernel) for m in five] == [("i=5 src=5 dst=10", "first", "printf_each"),
                                                             ("i=5 src=5 dst=10", "second", "printf_wide")]
    assert [m.text for m in dev.printf_messages(invocation=(7, 0, 0), dispatch="second", clear=True)] == [
        "i=7 src=7 dst=14"]
    assert dev.printf_messages() == []
    assert dev.take_validation_messages() == []  # printf output is no validation message
    np.testing.assert_array_equal(dst.download(np.uint32), 2 * np.arange(N))


def test_printf_same_kernel_twice(printf_dev):
    """Two dispatches of one pipeline: told apart where the layer's dispatch index can be trusted; layer 1.3.239
    says index 0 for both, so there the lines name both dispatches."""
    dev = printf_dev
    p = dev.pipeline(shaders.compile_shader("printf_each", shader_dir=SHADERS), local_size=(16, 1, 1),
                     name="printf_each")
    src, dst = dev.buffer(np.arange(N, dtype=np.uint32)), dev.buffer(nbytes=4 * N)
    with dev.record("twice") as rec:
        rec.dispatch(p, [dst, src], (N,), _n(), label="a")
        rec.dispatch(p, [dst, src], (N,), _n(), label="b")
    dev.printf_messages(clear=True)
    three = rec.printf_messages(invocation=3)
    assert [m.text for m in three] == ["i=3 src=3 dst=6"] * 2
    if dev.instance.dispatch_index_reliable:
        assert [m.dispatch for m in three] == ["a", "b"]
    else:
        assert [m.dispatch for m in three] == ["a|b"] * 2 and all(m.dispatch_index is None for m in three)


def test_printf_clean_shader_prints_nothing(printf_dev):
    dev = printf_dev
    p = _copy(dev)
    src, dst = dev.buffer(np.arange(N, dtype=np.uint32)), dev.buffer(nbytes=4 * N)
    with dev.record("quiet") as rec:
        rec.dispatch(p, [dst, src], (N,), _n())
    assert rec.printf == [] and dev.take_validation_messages() == []


@pytest.mark.parametrize("argv, expect, status", [
    (["--validate", "gpu", "-D", "OFFSET=1"], "VUID-vkCmdDispatch-None-02706", 1),
    (["--validate", "sync", "-D", "OFFSET=0", "--dispatches", "2", "--no-barrier"], "SYNC-HAZARD", 1),
    (["--validate", "sync", "-D", "OFFSET=0", "--dispatches", "2"], "validation (sync): 0 message(s)", 0),
])
def test_cli_validate(capsys, argv, expect, status):
    from workbench.cli import main
    assert main(["validate", f"{SHADERS}/oob_write.glsl"] + argv) == status
    out = capsys.readouterr().out
    assert expect in out and "kernel oob_write, dispatch oob_write#" in out if status else expect in out


def test_cli_printf_filter(capsys):
    from workbench.cli import main
    assert main(["validate", f"{SHADERS}/printf_each.glsl", "--validate", "printf", "--printf-invocation", "9"]) == 0
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("printf [")]
    assert lines == ["printf [printf_each / printf_each#0 / invocation (9, 0, 0)] i=9 src=9 dst=18"]


def test_cli_gpu_and_printf_refused(capsys):
    from workbench.cli import main
    assert main(["validate", f"{SHADERS}/printf_each.glsl", "--validate", "gpu,printf"]) == 2
    assert "cannot run together" in capsys.readouterr().err
