"""llama.cpp's Vulkan GEMV (ggml): the q4_0 decoder and tolerance against an encoder written here (CI), the labelling
of a capture's dispatches by shape (CI), one-line errors for a wrong checkout (CI); and, where a ggml checkout is
named ($WORKBENCH_GGML, built at run time) and GFXReconstruct is built, ggml's GEMV on lavapipe by both paths checked
against float64, captured, and replayed byte-exact."""
from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest

from workbench.benchmarks import field_ggml
from workbench.capture.engines import ggml as engine
from workbench.cli import main as cli_main
from workbench.toolchain import ggml, gfxreconstruct

CHECKOUT = os.environ.get("WORKBENCH_GGML", "")
needs_ggml = pytest.mark.skipif(not CHECKOUT, reason="no ggml or llama.cpp checkout named ($WORKBENCH_GGML)")


def encode_q4_0(w: np.ndarray) -> bytes:
    """q4_0 by its definition (an fp16 scale d = max-magnitude value / -8 per 32 weights, q = round(w / d) + 8
    clamped to 0..15, the block's first 16 weights in the low nibbles): the test's own encoder."""
    n, k = w.shape
    blocks = w.reshape(n, k // 32, 32).astype(np.float32)
    at = np.abs(blocks).argmax(axis=-1)
    peak = np.take_along_axis(blocks, at[..., None], axis=-1)[..., 0]
    d = (peak / -8).astype(np.float16)
    inv = np.where(d != 0, 1.0 / d.astype(np.float32), 0.0)
    q = np.clip(np.floor(blocks * inv[..., None] + 8.5), 0, 15).astype(np.uint8)
    packed = q[..., :16] | (q[..., 16:] << 4)
    out = np.concatenate([d[..., None].view(np.uint8).reshape(n, k // 32, 2), packed], axis=-1)
    return out.tobytes()


def test_q4_0_decodes_what_the_format_encodes():
    w, x = engine.problem(64, 5)
    data = encode_q4_0(w)
    assert len(data) == 5 * 2 * 18
    decoded = engine.decode_q4_0(data, 64, 5)
    d = np.abs(w).reshape(5, 2, 32).max(axis=-1) / 8
    assert np.all(np.abs(decoded - w).reshape(5, 2, 32) <= d[..., None] * 0.5 + 1e-3)  # within half a step


def test_the_tolerance_passes_a_right_product_and_fails_swapped_nibbles():
    w, x = engine.problem(256, 40)
    data = encode_q4_0(w)
    dq = engine.decode_q4_0(data, 256, 40)
    want = dq @ x.astype(np.float64)
    rounded = np.repeat(np.abs(x).reshape(-1, 32).max(axis=1) / 127, 32)  # the int8 path's rounding of x
    x8 = np.round(x / rounded) * rounded
    for path, got in (("mmv", (dq.astype(np.float32) @ x).astype(np.float64)), ("mmvq", dq @ x8)):
        assert np.all(np.abs(got - want) <= engine.tolerance(dq, x, path)), path
    blocks = np.frombuffer(data, np.uint8).reshape(40, 8, 18).copy()
    blocks[..., 2:] = (blocks[..., 2:] >> 4) | (blocks[..., 2:] << 4)   # nibbles swapped
    wrong = engine.decode_q4_0(blocks.tobytes(), 256, 40) @ x.astype(np.float64)
    assert np.any(np.abs(wrong - want) > engine.tolerance(dq, x, "mmvq"))


def test_shapes_parse_or_fail_in_one_line():
    assert engine.parse_shapes("4096x14336, 64x3") == [(4096, 14336), (64, 3)]
    for bad in ("4096", "100x3", "0x4", "ax4"):
        with pytest.raises(ValueError, match="expected shapes KxN with K a positive multiple of 32"):
            engine.parse_shapes(bad)


def _dispatch(n, sizes):
    return SimpleNamespace(dispatch=n, bindings=[SimpleNamespace(size=s) for s in sizes])


def test_dispatches_are_grouped_by_the_shape_whose_weights_they_bind():
    shapes = [(64, 8), (32, 3)]
    ds = [_dispatch(0, [256, 8 * 64 // 32 * 18, 32]),                                   # mmv 64x8
          _dispatch(1, [128, 36]), _dispatch(2, [3 * 32 // 32 * 18, 36, 12])]            # quantize, mmvq 32x3
    groups = field_ggml.gemv_groups(ds, shapes)
    assert [(shape, [d.dispatch for d in found]) for shape, found in groups] == [((64, 8), [0]), ((32, 3), [1, 2])]
    assert field_ggml.traffic(4096, 4096) == 4096 * 128 * 18 + 2 * 4096 * 4


def test_a_wrong_checkout_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("WORKBENCH_GGML", raising=False)
    with pytest.raises(ggml.GgmlError, match="expected a ggml or llama.cpp checkout"):
        ggml.checkout(None)
    with pytest.raises(ggml.GgmlError, match=f"got {tmp_path}"):
        ggml.checkout(tmp_path)
    assert cli_main(["bench", "q4-gemv", "--ggml", str(tmp_path), "--quick"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected a ggml checkout" in err[0]
    assert cli_main(["bench", "copy", "--ggml", str(tmp_path)]) != 0
    assert "--ggml applies to the q4-gemv suite" in capsys.readouterr().err


@needs_ggml
@pytest.mark.parametrize("path", ["mmv", "mmvq"])
def test_ggml_computes_the_product_on_the_device(path):
    lines = []
    assert engine.run([(96, 100), (256, 64)], path=path, ggml_dir=CHECKOUT, echo=lines.append), lines
    assert len(lines) == 2 and all("0 of" in line for line in lines)


@needs_ggml
@pytest.mark.skipif(not gfxreconstruct.is_set_up(), reason="GFXReconstruct is not built (./setup.sh capture)")
def test_ggml_captured_and_replayed_exact_with_both_paths(tmp_path):
    from workbench import capture, vk
    from workbench.capture.replay import replay_one
    shapes = [(96, 100), (256, 64)]
    dev = vk.get_device()
    accelerated = dev.info.driver_name != "llvmpipe"  # ggml's integer-dot path needs an accelerated 4x8 dot
    for path, per_shape in (("mmv", 1), ("mmvq", 2 if accelerated else 1)):
        folder = field_ggml.capture_for(CHECKOUT, path, shapes, field_ggml.device_key(dev))
        groups = field_ggml.gemv_groups(capture.dispatches(folder), shapes)
        assert [shape for shape, _ in groups] == shapes
        for _, ds in groups:
            assert len(ds) == per_shape, path
            for d in ds:
                row = replay_one(dev, d, time_it=False)
                assert row["exact"], (path, d.dispatch, row["reason"], row["mismatch"])


def test_compare_labels_ggml_dispatches_by_the_weights_they_bind():
    import pandas as pd
    from workbench.capture import compare
    frame = pd.DataFrame({"dispatch": [0, 1, 2, 3], "bindings": [
        "0.0 storage_buffer 4194304 B; 0.1 storage_buffer 4096 B", "0.0 storage_buffer 4096 B; 0.1 storage_buffer 1152 B",
        "0.0 storage_buffer 589824 B; 0.1 storage_buffer 1152 B", "0.0 storage_buffer 64 B"]})
    ops, kernels = compare._ggml_ops(frame)
    assert ops == ["linear", "q4gemv", "q4gemv", ""]
    assert kernels[:3] == ["mul_mat_vec_f32_f32", "q4gemv step 1 of 2", "mul_mat_vec_q4_0"]
    assert compare.guess_engine({"command": ["python", "-m", "workbench.capture.engines.ggml", "--net", "field"]}) == "ggml"


@needs_ggml
def test_ggml_runs_the_field_ops_against_torch():
    lines = []
    assert engine.run_jobs(engine.field_jobs(), ggml_dir=CHECKOUT, echo=lines.append), lines
    assert [line.split()[2] for line in lines] == ["linear", "q4gemv"]


def test_the_roof_check_knows_ggmls_paths_and_the_mma_build():
    from workbench.benchmarks import roof_check as rc
    assert rc.instruction_path({"kernel": "llama.cpp-vulkan-q4_0-mmv"}) == rc.FP32
    assert rc.instruction_path({"kernel": "llama.cpp-vulkan-q4_0-mmvq"}) == rc.WRAP
    assert rc.instruction_path({"kernel": "q4_gemv", "dequant": "mma"}) == rc.MMA


def test_ggml_rows_without_a_usable_checkout_are_skipped_rows_saying_why(tmp_path):
    from workbench import vk
    rows = field_ggml.ggml_rows(vk.get_device(), [(64, 8)], checkout=str(tmp_path), env={"device": "x"})
    assert [r["impl"] for r in rows] == ["llama.cpp-vulkan-q4_0-mmv", "llama.cpp-vulkan-q4_0-mmvq"]
    assert all(r["status"] == "skipped" and "expected a ggml checkout" in r["reason"] for r in rows)
