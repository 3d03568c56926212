"""The edit loop of a captured model, end to end: `workbench bench capture-edit`.

One change to an ET-VK shader template (default: `q8ta_conv2d_pw`'s requantize rounding, ``round`` → ``floor``), and
per repeat: the template expanded by ET-VK's codegen and compiled as ET-VK's build compiles it
(`etvk.model.edit_confirm.TemplateEdit.compile`), swapped into every captured pipeline of its variants, the capture's
dispatches replayed in order from the first one the edit reaches (`capture.whatif.model_edit`), and compared with the
capture: the model output's difference, each run dispatch's bytes, the edited dispatches' times both ways. The goal
(issue 33): one shader change through MobileNetV2's captured dispatches in at most 10 s on lavapipe, compile included.

Rows (`kernel`):
- ``capture edit loop``: wall time of compile + replay + compare over the repeats (median_us, p10_us, p90_us; the
  first repeat, which also copies the template folder, is the warm-up, `first_s`), the phases' medians (`compile_s`,
  `chain_s`, `compare_s`), what the edit did (`edited`, `run`, `changed` dispatches; the output's `max_abs`,
  `mismatches` of `elements`, `argmax_same`; the model's GPU µs both ways), `goal_s`, `within_goal`, and the load
  average of the machine's cores at the start and end (`load_1min`: a shared CPU device's times depend on it).
- ``capture in-order baseline``: the captured chain once, timed per dispatch (`capture.whatif.in_order`): done once
  per capture, outside the loop (the captured outputs are the baseline; its times give the model's total).
- ``capture read``: reading the capture folder, once.

The capture comes from `capture=` or ``$WORKBENCH_EDIT_CAPTURE`` (a folder `etvk.model.capture_join.capture_program`
wrote: the runner's output-0.bin beside it), the checkout from `executorch=` or ``$WORKBENCH_EXECUTORCH``; without
either the suite writes one row saying so (status "skipped").
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..measure import Rows, environment, measurement_row, sample_callable

ENV_VAR = "WORKBENCH_EDIT_CAPTURE"
GOAL_S = 10.0
# the edit of docs/capture.md: q8ta_conv2d_pw's requantize (the biased path) rounds down instead of to nearest
TEMPLATE = "q8ta_conv2d_pw"
OLD = "round(float_out_texel * output_inv_scale)"
NEW = "floor(float_out_texel * output_inv_scale)"


def _skipped(env: dict, reason: str) -> dict:
    return {"kernel": "capture edit loop", "status": "skipped", "reason": reason, **env}


def edit_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, capture=None,
               executorch=None, template: str = TEMPLATE, old: str = OLD, new: str = NEW,
               repeats: int | None = None) -> pd.DataFrame:
    """`workbench bench capture-edit`: the edit loop on a capture of ET-VK's runtime (module docstring); `repeats`
    timed loops after one warm-up (default 5, 2 when quick)."""
    from .. import capture as cap
    from ..capture import whatif
    from ..etvk.codegen import CheckoutError
    from ..etvk.model import capture_join, edit_confirm
    env = environment(device)
    rows = Rows(writer)
    folder = capture or os.environ.get(ENV_VAR)
    if not folder or not Path(folder).is_dir():
        rows.append(_skipped(env, f"no capture of ET-VK's runtime: pass capture= or set {ENV_VAR} to a folder "
                                  f"capture_join.capture_program wrote (given {folder or 'none'})"))
        return pd.DataFrame(rows)
    try:
        edit = edit_confirm.TemplateEdit.replace(executorch, template, old, new)
        names = capture_join.variant_names(edit.executorch)
    except (CheckoutError, edit_confirm.EditError) as exc:
        rows.append(_skipped(env, str(exc)))
        return pd.DataFrame(rows)
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    found = cap.dispatches(folder)
    read_s = time.perf_counter() - started
    outputs = whatif.program_outputs(folder)
    used = {v for d in found for v in names.get(d.spirv_hash, "").split("|") if v}
    wanted = {h: v for h, v in names.items() if set(v.split("|")) & used}
    common = {"model": Path(folder).name, "capture": str(folder), "template": edit.template,
              "edit": edit_confirm.edit_line(edit), "dispatches": len(found), "quick": quick}
    rows.append(measurement_row("capture read", env, [read_s * 1e9], **common, status="ok"))
    started = time.perf_counter()
    baseline = whatif.in_order(found, outputs=outputs, device=device, time_it=True)
    rows.append(measurement_row("capture in-order baseline", env, [(time.perf_counter() - started) * 1e9], **common,
                                status="ok", output_byte_exact=baseline.exact,
                                gpu_us_model=sum(r["gpu_us"] or 0.0 for r in baseline.rows)))
    phases, results = [], []

    def loop():
        t0 = time.perf_counter()
        swaps = edit.swaps(wanted)
        t1 = time.perf_counter()
        result = whatif.model_edit(found, swaps, outputs=outputs, baseline=baseline, device=device, names=names)
        t2 = time.perf_counter()
        chain_s = result.totals["chain_s"]
        phases.append((t1 - t0, chain_s, t2 - t1 - chain_s))
        results.append(result)

    t0 = time.perf_counter()
    loop()
    first_s = time.perf_counter() - t0
    n = repeats or (2 if quick else 5)
    wall = sample_callable(loop, warmup=0, min_samples=n, max_samples=n, min_time_s=0.0, max_time_s=3600.0)
    timed = np.array(phases[1:])
    result = results[-1]
    out = result.outputs.iloc[0] if len(result.outputs) else {}
    median_s = float(np.median(wall)) / 1e9
    rows.append(measurement_row(
        "capture edit loop", env, wall, **common, status="ok",
        variants="|".join(sorted(set(result.table.loc[result.table["edited"], "variant"]))),
        first_s=round(first_s, 3), compile_s=round(float(np.median(timed[:, 0])), 3),
        chain_s=round(float(np.median(timed[:, 1])), 3), compare_s=round(float(np.median(timed[:, 2])), 3),
        edited=result.totals["edited"], run=result.totals["run"], changed=result.totals["changed"],
        max_abs=out.get("max_abs"), mismatches=out.get("mismatches"), elements=out.get("elements"),
        argmax_same=out.get("argmax_same"), gpu_us_captured=result.totals["gpu_us_captured"],
        gpu_us_edited=result.totals["gpu_us_edited"], gpu_us_over=result.totals["over"], goal_s=GOAL_S,
        within_goal=median_s <= GOAL_S, load_1min=round(load_start, 2), load_1min_end=round(os.getloadavg()[0], 2),
        cores=os.cpu_count()))
    return pd.DataFrame(rows)
