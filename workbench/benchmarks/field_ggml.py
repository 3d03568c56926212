"""llama.cpp's Vulkan GEMV beside the GEMV suite's rows (`workbench bench q4-gemv --ggml CHECKOUT`; issue 43 item 1):
ggml's own q4_0 ``mul_mat_vec`` dispatches, captured from ggml's Vulkan backend running on this device (a program
written here, `capture.engines.ggml`, on a checkout the user names, built at run time: `toolchain.ggml`) and replayed
through the workbench's one timing method — Vulkan timestamps, the suite's regimes (cold = the captured buffers
rotated through ≥ 4× the last-level cache, `measure.cache`), the suite's copy at the same traffic.

Rows (``impl``): ``llama.cpp-vulkan-q4_0-mmv`` (ggml's float path: ``mul_mat_vec_q4_0_f32_f32``) and
``llama.cpp-vulkan-q4_0-mmvq`` (its integer-dot path: ``quantize_q8_1`` then ``mul_mat_vec_q4_0_q8_1_f32``, timed as
one chain, a barrier between, as ggml records them), per shape and regime. ggml picks its path per device and shape
(``mmvq_mode``; at ggml d99724f2 on NVIDIA the integer-dot path only where K > 4096): both are measured. Each
captured dispatch is first replayed once against its captured outputs (``exact``); ggml's outputs were checked
against a float64 product when it was captured.

Traffic (``bytes``): what ggml's GEMV reads and writes once — the q4_0 blocks N·K/32 · 18 (4.5 bits a weight, the
suite's group-32 fp16-scale figure), the float32 vector K · 4 and output N · 4; the integer-dot path's int8 copy of
the vector is not counted (it is ggml's choice). The shader's SPIR-V, local size, groups and push constants are
ggml's own (the capture's), so the figure is ggml's code on this device, timed the workbench's way.

Captures are cached beside ggml's build (``<ggml cache>/<commit>/captures/<device>-<path>-<shapes digest>``): ggml's
run is deterministic for a device, path and shape list.
"""
from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

GGML_PATHS = ("mmv", "mmvq")
IMPL = "llama.cpp-vulkan-q4_0-{path}"
FELL_BACK = ("ggml keeps its float path here although asked for the integer-dot one: it uses integer dot products "
             "only where the device reports integerDotProduct4x8BitPackedSignedAccelerated (lavapipe does not)")


def traffic(k: int, n: int) -> int:
    return n * k // 32 * 18 + k * 4 + n * 4


def device_key(device) -> str:
    """The device's name as a folder name."""
    return re.sub(r"[^A-Za-z0-9]+", "-", str(device.info.name)).strip("-")[:40]


def capture_for(checkout, path: str, shapes, device_name: str, *, echo=lambda text: None) -> Path:
    """The capture folder of ggml's run of `shapes` by `path` ("mmv", "mmvq" or "default") on this machine's device,
    made once (`capture.record.run`)."""
    from ..capture import record
    from ..capture.format import MANIFEST_NAME
    from ..toolchain import ggml
    source = ggml.checkout(checkout)
    text = ",".join(f"{k}x{n}" for k, n in shapes)
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    folder = ggml.build_dir(source) / "captures" / f"{device_name}-{path}-{digest}"
    if (folder / MANIFEST_NAME).is_file():
        return folder
    ggml.setup(source, progress=True)  # the build only a new capture needs
    echo(f"ggml: capturing its {path} GEMV at {len(shapes)} shapes on {device_name} -> {folder}")
    record.run([sys.executable, "-m", "workbench.capture.engines.ggml", "--ggml", str(source), "--shapes", text,
                "--path", path], folder, timeout=1800)
    return folder


def gemv_groups(dispatches, shapes) -> list[tuple[tuple[int, int], list]]:
    """[(shape, [its dispatches])] in order: each GEMV (the dispatch binding the shape's q4_0 bytes) with the
    dispatches since the previous GEMV (the integer-dot path's quantization of the vector)."""
    out, pending, todo = [], [], list(shapes)
    for d in dispatches:
        pending.append(d)
        if todo:
            k, n = todo[0]
            if any((b.size or 0) == n * k // 32 * 18 for b in d.bindings):
                out.append((todo.pop(0), pending))
                pending = []
    return out


def ggml_rows(device, shapes, *, checkout=None, caches=("cold",), quick: bool = False, env: dict | None = None,
              copies=None, captured=None, echo=lambda text: None) -> list[dict]:
    """The suite's rows for ggml's two GEMV paths at `shapes` [(K, N)] in each regime (module docstring), from
    captures of ggml's run at `captured` (default `shapes`: a run that measures one shape at a time captures all
    once); where ggml cannot be built or captured here, one "skipped" row per path saying why."""
    from .. import capture
    from ..capture.format import CaptureError
    from ..capture.replay import NotReplayable, launch_of, replay_one, time_chain
    from ..measure import measurement_row
    from ..toolchain import ggml
    from .. import vk
    env = dict(env or {})
    name = device_key(device)
    rows = []
    captured = list(captured or shapes)
    try:
        folders = {p: capture_for(checkout, p, captured, name, echo=echo) for p in GGML_PATHS}
    except (ggml.GgmlError, CaptureError, RuntimeError, OSError) as error:
        why = str(error).strip().splitlines()[0]
        return [{"kernel": IMPL.format(path=p), "impl": IMPL.format(path=p), "status": "skipped", "reason": why,
                 **env} for p in GGML_PATHS]
    for path in GGML_PATHS:
        impl = IMPL.format(path=path)
        groups = [(shape, ds) for shape, ds in gemv_groups(capture.dispatches(folders[path]), captured)
                  if shape in shapes]
        for (k, n), ds in groups:
            labels = {"impl": impl, "k": k, "n": n, "m": 1, "group_size": 32, "variant": "ggml q4_0 " + path,
                      "dispatches": len(ds), "ggml_capture": str(folders[path])}
            if path == "mmvq" and len(ds) < 2:
                rows.append({"kernel": impl, **labels, "status": "skipped", "reason": FELL_BACK, **env})
                continue
            checked = [replay_one(device, d, time_it=False) for d in ds]
            reason = "; ".join(c["reason"] for c in checked if c["reason"])
            exact = all(c["exact"] for c in checked)
            if reason or not exact:
                rows.append({"kernel": impl, **labels, "status": "failed", "exact": exact,
                             "reason": reason or "; ".join(c["mismatch"] for c in checked), **env})
                continue
            made, timed = [], []
            try:  # one set of launches and pipelines serves every regime (the rotation makes its own copies)
                made = [launch_of(device, d)[0] for d in ds]
                with vk.Launches(device, made) as launches:
                    for regime in caches:
                        gpu, host, columns = time_chain(device, ds, launches, cache=regime, quick=quick,
                                                        label=f"{impl} {k}x{n}")
                        row = measurement_row(impl, env, gpu, host_ns=host, bytes_moved=traffic(k, n),
                                              macs=k * n, **labels, status="ok", reason="", exact=True,
                                              correct=True, timer="vulkan timestamps (captured dispatches replayed)",
                                              **columns)
                        rows.append(copies.annotate(row, traffic(k, n)) if copies is not None else row)
                        timed.append(regime)
                        echo(f"{impl} {k}x{n} {regime}: {row['median_us']:.2f} µs")
            except (NotReplayable, ValueError, vk.VulkanError) as error:
                rows.extend({"kernel": impl, **labels, "status": "failed", "cache": regime, "reason": str(error),
                             **env} for regime in caches if regime not in timed)
            finally:
                for launch in made:
                    for resource in launch.resources.values():
                        resource.close()
    return rows
