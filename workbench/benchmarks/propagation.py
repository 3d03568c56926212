"""Layout propagation measured: `propagation_suite` lowers real models with ExecuTorch's passes before and after
#19395 and counts (and times, with the workbench's kernels) what the passes leave; `graphs_suite` runs small graphs
tagged by ExecuTorch's real pass on the device, one row per dispatch. The heavy imports (torch.export, ExecuTorch)
happen inside the suites."""
from __future__ import annotations

import pandas as pd
import torch

from ..graphs import graph_exec
from ..etvk.model import zoo as M
from ..graphs.int8_graph import ConvViewConv, RefineNetHead, refinenet_input_shape
from ..graphs.lowered_run import run_int8_ops
from ..etvk.model.lowering import compare_settings
from ..measure import environment, progress


def propagation_suite(device=None, writer=None, *, quick: bool = False, show_progress: bool = True):
    """``workbench bench propagation``: the before/after #19395 counts from the real passes, one row per model ×
    setting (RefineNet-like at 1×3×256×144, or 1×3×64×32 when ``quick``; the residual-add and the transition model).
    Lowering runs on the CPU; ``device`` only names where the rows belong."""
    env = environment(device) if device is not None else {}
    cases = [("refinenet_like", M.RefineNetLike(), M.REFINENET_INPUT if not quick else (1, 3, 64, 32)),
             ("residual_add", M.ResidualAdd(), (1, 3, 16, 16)),
             ("float_between", M.FloatBetween(), (1, 3, 16, 8))]
    rows = []
    for name, model, shape in progress(cases, "propagation", enabled=show_progress):
        for setting, low in compare_settings(model, (torch.randn(shape),), name=name).items():
            row = {**env, **low.counts(), "input": "x".join(map(str, shape))}
            if device is not None:   # the int8 data-movement ops of this graph, timed with the workbench's kernels
                ran = run_int8_ops(low, device, repeats=3 if quick else 20)
                ran = ran[ran["kernel"].notna()]
                row["int8_ops_run"] = len(ran)
                row["int8_ops_gpu_us"] = float(ran["gpu_us_median"].sum())
                row["transitions_gpu_us"] = float(ran[ran["transition"]]["gpu_us_median"].sum())
            rows.append(row)
            if writer is not None:
                writer.append(row)
    return pd.DataFrame(rows)


def graphs_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True):
    """``workbench bench propagation-graphs``: the RefineNet-like head (decoder sizes: 1×24×16×9 in, 1×8×256×144
    out; tiny when ``quick``) and §7.4's conv_pw → view_copy → conv_pw, tagged by ExecuTorch's real pass under both
    identity-op settings and executed: one row per dispatch (median GPU µs over the repeats) with its run's totals
    and the output's largest difference from torch (a difference above 1 LSB of the output fails the suite)."""
    env = environment(device)
    repeats = 3 if quick else 20
    cases = [("RefineNet-like head", RefineNetHead(), refinenet_input_shape(full=not quick)),
             ("conv_pw → view_copy → conv_pw", ConvViewConv(), (1, 16, 3, 5) if quick else (1, 16, 64, 128))]
    frames = []
    for name, module, shape in progress(cases, "propagation-graphs", enabled=show_progress):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
        _, execs, df, ref = graph_exec.run_settings(module, x, device=device, repeats=repeats, name=name)
        lsb = module.dequant.scale
        for s, e in execs.items():
            diff = float((e.outputs[0] - ref).abs().max())
            if diff > lsb * 1.001:
                raise AssertionError(f"{name} ({s}): the device's output differs from torch by {diff} "
                                     f"(> 1 LSB = {lsb})")
            df.loc[df["setting"] == s, "max_abs_diff"] = diff
        df["output_lsb"] = lsb
        df["input"] = "x".join(map(str, shape))
        for row in df.to_dict("records"):
            row = {**env, **row}
            if writer is not None:
                writer.append(row)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)
