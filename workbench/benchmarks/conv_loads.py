"""`workbench bench conv-loads`: the OpSDot + add pointwise conv's operand-load options (issue 25) side by side with
the kernel as landed, with and without operand loads, each row against the int8-dot roof measured in the same run.

    df = loads_suite(device, writer)            # rows: shape × tile × option × operands × dot form

Options (`ConvPwSpec.weight_order` × `ConvPwSpec.addressing`, see workbench.kernels.conv_pw): "k4_oc4 indexed" is the
kernel as landed; "k4_oc4 hoisted" hoists the base indices out of the K loop (constant steps, peeled tail);
"oc4_k4 indexed" reads weights prepacked so a thread's step is one contiguous run; "oc4_k4 hoisted" both. Every
option runs as built (`operands="memory"`, checked against the reference on image 0) and as the load-free
diagnostic (`operands="registers"`, wrong by design), with `saturate=False` (OpSDot + add); the memory build again
with OpSDotAccSat for comparison. Columns beside `sweep`'s: `option`, `operands`, `roof_GOPs` and `roof_fraction`
(this run's probe of the row's dot form, kernel "int8 dot peak sweep" rows, the best of a few configurations),
`load_cost` on diagnostic rows (1 − memory / registers rate of the same option), `vs_landed` (rate / the landed
option's of the same tile, operands and dot form), `status` ("ok", "diagnostic: ...", "failed: ..." — a failing
configuration writes its error row and the run goes on).
"""
from __future__ import annotations

import dataclasses
import math

import pandas as pd

from ..kernels import peak as P
from ..kernels.conv_pw import (ADDRESSINGS, DEFAULT_QPARAMS, WEIGHT_ORDERS, ConvPwBuffers, ConvPwShape, ConvPwSpec,
                               prepack_weights, random_problem, reference, tile_label)
from ..kernels.device_limits import device_limits
from ..measure import environment, measurement_row, sample_recording
from .conv import QUICK_SHAPES, SUITE_SHAPES, filling_shapes, measure

LANDED = ("k4_oc4", "indexed")
OPTIONS = tuple((order, addressing) for order in WEIGHT_ORDERS for addressing in ADDRESSINGS)
LOADS_TILES = ((2, 2, 4), (1, 2, 4), (4, 1, 4))  # the landed best (M2·N2·K4) first, then the next two of conv_gap
QUICK_TILES = ((2, 2, 4), (1, 1, 2))
PROBE_KERNEL = "int8 dot peak sweep"  # roof_check.PROBE_SWEEPS: a re-measurement of the folder's int8-dot roofs
# (saturate, chains, local size): the best configurations of the H200's full probe sweep (peak.csv) and neighbours
PROBE_CONFIGS = ((False, 16, 1024), (False, 16, 512), (False, 32, 256), (True, 4, 256), (True, 4, 128))


def probe_rows(device, env, *, quick: bool = False, say=print) -> tuple[list[dict], dict]:
    """The int8-dot probes (workbench.kernels.peak) at a few configurations: rows, and {saturate: best GOP/s}."""
    threads = 4096 if quick else P.default_threads(device, device_limits(device))
    target_ms = 1.0 if quick else 10.0
    configs = PROBE_CONFIGS[::2] if quick or device.info.is_cpu else PROBE_CONFIGS
    rows, best = [], {}
    with device.buffer(nbytes=4 * threads, name="conv-loads probe out") as out:
        for saturate, chains, local in configs:
            local = min(local, device.info.max_workgroup_invocations)
            probe = P.PeakSpec("int8_dot", threads, 2, chains=chains, local_size=local, saturate=saturate)
            try:
                P.run_once(device, probe, out)  # the first run may include the driver's compilation
                probe_ns = max(P.run_once(device, probe, out), 1.0)
                iterations = int(min(1 << 16, max(2, 2 * target_ms * 1e6 / probe_ns)))
                spec = dataclasses.replace(probe, iterations=iterations)
                with device.record(spec.label) as rec:
                    P.record(rec, device, spec, out)
                    gpu, host = sample_recording(rec, min_time_s=0.02 if quick else 0.2, min_samples=5, warmup=1)
                row = measurement_row(PROBE_KERNEL, env, gpu, host_ns=host, macs=spec.macs(), method=spec.label,
                                      kind="int8_dot", threads=threads, iterations=iterations, chains=chains,
                                      local_size=str(local), saturate=saturate, status="ok")  # str as conv rows
            except Exception as exc:  # noqa: BLE001 - a failing probe configuration must not end the run
                row = {"kernel": PROBE_KERNEL, "method": probe.label, "chains": chains, "local_size": str(local),
                       "saturate": saturate, "status": f"failed: {type(exc).__name__}: {exc}", **env}
            rows.append(row)
            if row["status"] == "ok":
                best[saturate] = max(best.get(saturate, 0.0), row["GOP/s"])
            say(f"probe {row['method']} chains {chains} local {local}: "
                + (f"{row['GOP/s']:,.0f} GOP/s" if row["status"] == "ok" else row["status"]))
    return rows, best


def loads_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, shapes=None,
                tiles=None, options=OPTIONS) -> pd.DataFrame:
    """Every option × tile × shape (device-filling shapes on GPUs; a small shape with `quick` or on CPU devices), as
    built and as the load-free diagnostic, OpSDot + add, plus the built one with OpSDotAccSat; rows go to `writer` as
    they finish (see the module docstring for the columns)."""
    say = print if show_progress else (lambda *a, **k: None)
    if shapes is None:
        shapes = QUICK_SHAPES if quick else (filling_shapes(device) or SUITE_SHAPES[:1])
    tiles = tiles or (QUICK_TILES if quick else LOADS_TILES)
    use_dot_ext = bool(device.info.features.get("integer_dot_product"))
    timing = dict(min_time_s=0.01 if quick else 0.2, min_samples=3 if quick else 10,
                  target_us=200.0 if quick else 2000.0)
    env = environment(device)
    rows: list[dict] = []

    def emit(row):
        rows.append(row)
        if writer is not None:
            writer.append(row)

    probes, roof = probe_rows(device, env, quick=quick, say=say)
    for row in probes:
        emit(row)
    kind = "quick" if quick else ("fills the device" if not device.info.is_cpu else "small (CPU device)")
    for shape in (ConvPwShape.coerce(s) for s in shapes):
        q_input, weight, scales, bias = random_problem(shape)
        expected = reference(q_input[:1], weight, scales, bias, DEFAULT_QPARAMS, False).numpy()
        warmup_s = 0.0 if device.info.is_cpu else 1.0  # the host's reference left the device idle
        landed: dict = {}
        for order in dict.fromkeys(o for o, _ in options):
            packed = prepack_weights(weight, scales, bias, order=order)
            base = ConvPwSpec(shape, use_dot_ext=use_dot_ext, saturate=False, weight_order=order)
            with ConvPwBuffers(device, base, q_input, packed) as bufs:
                for tile in tiles:
                    for addressing in (a for o, a in options if o == order):
                        rates = {}
                        for saturate, operands in ((False, "memory"), (False, "registers"), (True, "memory")):
                            spec = dataclasses.replace(base.with_tile(*tile), addressing=addressing,
                                                       operands=operands, saturate=saturate)
                            cols = dict(option=spec.option, weight_order=order, addressing=addressing,
                                        operands=operands, shape_kind=kind)
                            try:
                                row = measure(device, bufs, spec, env=env, warmup_s=warmup_s,
                                              expected=expected if operands == "memory" else None, **timing)
                                warmup_s = 0.0
                                row.update(cols, status="ok" if operands == "memory" else
                                           "diagnostic: results wrong by design")
                                if operands == "memory" and row.get("max_lsb_diff", 0) != 0:
                                    row["status"] = f"WRONG: {row['max_lsb_diff']} LSB off the reference"
                            except Exception as exc:  # noqa: BLE001 - one failing config must not end the run
                                row = {"kernel": "q8ta_conv2d_pw", "method": "vulkan q8ta_conv2d_pw",
                                       "shape": shape.label, **shape.as_dict(), "tile": tile_label(*tile),
                                       "variant": spec.variant, "saturate": saturate, "use_dot_ext": use_dot_ext,
                                       **cols, "status": f"failed: {type(exc).__name__}: {exc}", **env}
                            rate = row.get("GOP/s", math.nan)
                            row["roof_GOPs"] = roof.get(saturate, math.nan)
                            row["roof_fraction"] = rate / row["roof_GOPs"] if row["roof_GOPs"] else math.nan
                            key = (tile, saturate, operands)
                            if (order, addressing) == LANDED:
                                landed[key] = rate
                            row["vs_landed"] = rate / landed[key] if landed.get(key) else math.nan
                            rates[(saturate, operands)] = rate
                            if operands == "registers":
                                mem = rates.get((False, "memory"), math.nan)
                                row["load_cost"] = 1.0 - mem / rate if rate and rate == rate else math.nan
                            emit(row)
                            if row["status"].startswith("failed"):
                                say(f"conv loads {shape.label} {tile_label(*tile)} {spec.option} {operands} "
                                    f"{'sat' if saturate else 'wrap'}: {row['status']}")
                        say(f"conv loads {shape.label} {tile_label(*tile)} {order} {addressing}: "
                            + ", ".join(f"{'OpSDotAccSat' if s else 'OpSDot+add'} {o} "
                                        f"{r / roof.get(s, math.nan):.1%}" for (s, o), r in rates.items())
                            + " of the roof")
    return pd.DataFrame(rows)
