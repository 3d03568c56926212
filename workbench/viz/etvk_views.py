"""ET-VK's own kernels beside the workbench's, for notebooks 02 and 03 (section "ET-VK's own kernel").

    path = checkout()                      # the ExecuTorch checkout, or None after printing how to configure one
    table = pixel_shuffle_side_by_side(device, path, bench)          # notebook 02: time, registers, a740 waves
    table = conv_side_by_side(device, path, sweep, shape)            # notebook 03: the same for q8ta_conv2d_pw
    diff = conv_pr_diff(device, path, shape)                         # notebook 03: across PR #19396
    fig = plot_side_by_side(table); fig = plot_diff(diff)

ET-VK's kernels come from the checkout through `workbench.etvk` (its templates, expanded by its own codegen, run
with its dispatch conventions and checked against torch); the workbench's come from the notebook's own benchmark
frames, so both sides are the notebook's figures of this run. Registers are the live driver's statistics where it
has VK_KHR_pipeline_executable_properties (NVIDIA: "Register Count"; lavapipe has none), and Turnip's for an
Adreno 740 (Mesa's ir3 compiler on the no-op DRM shim, `workbench compilers setup`) — Mesa's compiler, not Qualcomm's,
so its figures need not match the ones the ET-VK PRs quote from Qualcomm's offline compiler.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from .. import etvk
from ..vendors import mesa
from ..etvk.run import unified_statistics
from ..vk.spirv import declared
from ..etvk.codegen import ENV_VAR
from ..kernels import conv_pw as K
from ..kernels import pixel_shuffle as ps
from ..kernels import pixel_shuffle_block as psb
from ..toolchain.shaders import compile_shader
from .figure import Figure
from .titles import with_device

__all__ = ["HOW_TO_CONFIGURE", "PR_19396", "checkout", "statistics", "pixel_shuffle_side_by_side",
           "conv_side_by_side", "conv_pr_diff", "pr_summary", "plot_side_by_side", "plot_diff"]

PR_19396 = ("1ee58ed3b7^", "1ee58ed3b7")  # q8ta_conv2d_pw TILE_N4 2 → 1: its parent, and the PR's commit
NO_STATISTICS = "no driver statistics (device lacks VK_KHR_pipeline_executable_properties)"
HOW_TO_CONFIGURE = f"""ET-VK's own kernel: skipped, no ExecuTorch checkout is configured.
To run ET-VK's real shader here (from your checkout, at any git revision), beside the workbench's kernels:
    git clone https://github.com/pytorch/executorch       # only backends/vulkan is read; never modified
    export {ENV_VAR}=/path/to/executorch       # before starting Jupyter or `workbench main`
or set EXECUTORCH = "/path/to/executorch" in this notebook's parameters cell.
The rest of the notebook does not need it."""


def checkout(executorch=None) -> Path | None:
    """The ExecuTorch checkout (`executorch`, else $WORKBENCH_EXECUTORCH), or None after printing how to configure
    one when neither is set. A path that is given but is not a checkout raises CheckoutError: asked-for and broken
    is an error, not a skip."""
    if executorch is None and not os.environ.get(ENV_VAR):
        print(HOW_TO_CONFIGURE)
        return None
    path = etvk.checkout_path(executorch)
    print(f"ExecuTorch checkout: {path}")
    return path


# --------------------------------------------------------------------------------------------------
# Statistics of one compiled kernel: the live driver (where it reports them) and Turnip's a740


def _unified(stats: dict, gpu=None, local_size=(64, 1, 1)) -> dict:
    """Registers, waves, instructions and spills under one name each (the same reading as `workbench etvk stats`)."""
    figures = unified_statistics(stats, gpu=gpu, local_size=local_size)
    return {k: figures[k] for k in ("registers", "waves", "instructions", "spills")}


def statistics(device, spirv, *, spec_constants=None, local_size=(64, 1, 1), name="shader", gpus=(740,)) -> dict:
    """Flat columns for one compiled kernel: `driver registers` (or `driver note` where there are none),
    `a<gpu> registers` / `waves` / `instructions` / `spills` from Turnip (or `a<gpu> note`)."""
    spec = declared(spirv, spec_constants or {})
    out = {}
    if device.info.features.get("pipeline_executable_properties"):
        with device.pipeline(spirv, spec_constants=spec, local_size=local_size, capture_statistics=True,
                             name=name) as pipe:
            driver = _unified(pipe.statistics())
        out["driver registers"] = driver["registers"]
        out["driver instructions"] = driver["instructions"]
    else:
        out["driver note"] = NO_STATISTICS
    for gpu in gpus:
        g = mesa.check_gpu(gpu)
        if not mesa.is_set_up():
            out[f"{g.name} note"] = "the offline compilers are not set up: run `workbench compilers setup`"
            continue
        result = mesa.stats_many([spirv], g, errors="keep", spec_constants=spec, local_size=local_size,
                                 name=name)[0]
        if "error" in result:
            out[f"{g.name} note"] = f"{mesa.DRIVER_TITLES[g.driver]} failed: {result['error'].splitlines()[0]}"
            continue
        for key, value in _unified(result, g, local_size).items():
            out[f"{g.name} {key}"] = value
    return out


def _etvk_row(device, gen, dispatch, *, gpus, quick: bool) -> dict:
    timing = dict(min_time_s=0.02, max_time_s=1.0) if quick else {}
    row = etvk.execute(device, gen, dispatch, measure=True, **timing)
    if not row["correct"]:
        raise AssertionError(f"ET-VK's {dispatch.variant} does not match torch: {row}")
    stats = statistics(device, gen.compile(dispatch.variant), spec_constants=dispatch.spec_constants,
                       local_size=dispatch.local_size, name=dispatch.variant, gpus=gpus)
    return {"implementation": f"ET-VK {dispatch.variant} ({gen.source.label})", "side": "ET-VK (checkout)",
            "device": device.info.name,
            "median_us": row["median_us"], "GB/s": row["GB/s"], "GOP/s": row.get("GOP/s"),
            "correct": row["correct"], "global_size": row["global_size"], "local_size": row["local_size"],
            "dot_product_shim": row["dot_product_shim"], "source": row["source"], **stats}


def _dims(text) -> str:
    """"(8, 4, 16)" → "8x4x16", as etvk's rows write sizes."""
    return "x".join(v.strip() for v in str(text).strip("()").split(",")) if isinstance(text, str) else text


def _number(y: float) -> str:
    return "" if not math.isfinite(y) else f"{y:,.0f}" if abs(y) >= 100 else f"{y:.3g}"


# --------------------------------------------------------------------------------------------------
# Notebook 02: q8ta_pixel_shuffle


def pixel_shuffle_side_by_side(device, executorch, bench: pd.DataFrame, *, gpus=(740,),
                               quick: bool = True) -> pd.DataFrame:
    """ET-VK's real `q8ta_pixel_shuffle` (passthrough, 4W4C → 4W4C, r = 2) at every r = 2 shape of the notebook's
    benchmark, beside the workbench's per-word kernel (its re-derivation of ET-VK's) and block kernel from `bench`.
    One row per (shape, implementation); `vs ET-VK` = ET-VK's time / this row's (> 1: faster than ET-VK's)."""
    gen = etvk.Codegen(etvk.source(executorch))
    ours = bench[(bench["impl"] == "fused") & (bench["qpath"] == "passthrough") & (bench["r"] == 2)
                 & (bench["in_layout"] == "4W4C") & (bench["out_layout"] == "4W4C")
                 & bench["variant"].isin([ps.FUSED_SHADER, psb.BLOCK_SHADER])]
    rows = []
    for shape in dict.fromkeys(ours["shape"]):
        sizes = tuple(int(v) for v in shape.split("x"))
        d = etvk.make(gen, "q8ta_pixel_shuffle", shape=sizes)
        etvk_row = {"shape": shape, **_etvk_row(device, gen, d, gpus=gpus, quick=quick)}
        rows.append(etvk_row)
        for _, r in ours[ours["shape"] == shape].iterrows():
            spec = psb.fused_spec(sizes, 2, "4W4C", "4W4C", *ps.SAME_QP, block=r["variant"] == psb.BLOCK_SHADER)
            spirv = compile_shader(spec.shader, spec.defines)
            label = "per-word, ET-VK's algorithm" if r["variant"] == ps.FUSED_SHADER else "block"
            rows.append({"shape": shape, "implementation": f"workbench {r['variant']} ({label})",
                         "side": "workbench", "device": device.info.name, "median_us": r["median_us"], "GB/s": r["GB/s"], "correct": True,
                         "global_size": _dims(r.get("global_size")), "local_size": _dims(r.get("local_size")),
                         **statistics(device, spirv, spec_constants=spec.spec_constants(), local_size=spec.local_size,
                                      name=spec.variant, gpus=gpus)})
    table = pd.DataFrame(rows)
    if len(table):
        etvk_us = table[table["side"] == "ET-VK (checkout)"].set_index("shape")["median_us"]
        table["vs ET-VK"] = table["shape"].map(etvk_us) / table["median_us"]
    return table


# --------------------------------------------------------------------------------------------------
# Notebook 03: q8ta_conv2d_pw


def _conv_options(shape) -> dict:
    n, cin, cout, h, w = (int(v) for v in shape)
    if n != 1:
        raise ValueError(f"ET-VK's q8ta_conv2d_pw computes one image (batch 1); got the shape {tuple(shape)}")
    return {"shape": (1, cin, h, w), "out_channels": cout}


def conv_side_by_side(device, executorch, sweep: pd.DataFrame, shape, *, tiles=((1, 1, 1), (1, 2, 1)),
                      gpus=(740,), quick: bool = True) -> pd.DataFrame:
    """ET-VK's real `q8ta_conv2d_pw` from the checkout's working tree at `shape` (N, Cin, Cout, H, W; N = 1),
    beside the workbench's kernel at `tiles` from the notebook's `sweep` (its time, driver registers and Turnip
    a740 columns). `vs ET-VK` = ET-VK's time / this row's."""
    gen = etvk.Codegen(etvk.source(executorch))
    d = etvk.make(gen, "q8ta_conv2d_pw", **_conv_options(shape))
    label = K.ConvPwShape.coerce(shape).label
    rows = [{"shape": label, "tile": f"M{d.params['tile_m4']}·N{d.params['tile_n4']}",
             **_etvk_row(device, gen, d, gpus=gpus, quick=quick)}]
    ours = sweep[sweep["shape"] == label]
    for tile in tiles:
        hit = ours[ours["tile"] == K.tile_label(*tile)]
        if not len(hit):
            continue
        r = hit.iloc[0]
        row = {"shape": label, "tile": r["tile"], "implementation": f"workbench q8ta_conv2d_pw {r['tile']}",
               "side": "workbench", "device": device.info.name, "median_us": r["median_us"], "GB/s": r["GB/s"],
               "GOP/s": r["GOP/s"],
               "correct": bool(r["max_lsb_diff"] <= 1), "global_size": _dims(r["global_size"]),
               "local_size": _dims(r["local_size"])}
        if pd.notna(r.get("registers")):
            row["driver registers"] = r["registers"]
        else:
            row["driver note"] = NO_STATISTICS
        for gpu in gpus:
            for key in ("registers", "waves", "spills"):
                if f"a{gpu}_{key}" in r and pd.notna(r[f"a{gpu}_{key}"]):
                    row[f"a{gpu} {key}"] = r[f"a{gpu}_{key}"]
        rows.append(row)
    table = pd.DataFrame(rows)
    table["vs ET-VK"] = table["median_us"].iloc[0] / table["median_us"]
    return table


def conv_pr_diff(device, executorch, shape, *, revisions=PR_19396, gpus=(740,)) -> pd.DataFrame:
    """`etvk.diff` of ET-VK's `q8ta_conv2d_pw` across PR #19396 (TILE_N4 2 → 1) at `shape` (N, Cin, Cout, H, W):
    registers, waves, instruction count (Turnip a740; the live driver where it reports them) and GPU time here,
    at the parent commit (A), at the PR (B), and B / A."""
    return etvk.diff(device, executorch, revisions[0], revisions[1], [("q8ta_conv2d_pw", _conv_options(shape))],
                     gpus=gpus)


def pr_summary(diff: pd.DataFrame, gpu: int = 740) -> str:
    """One sentence of what `conv_pr_diff` measured: Turnip's registers and waves, and the time here, A → B."""
    parts = []
    turnip = diff[diff["compiler"] == f"{mesa.DRIVER_TITLES['turnip']} {mesa.check_gpu(gpu).name}"]
    if len(turnip) and {"registers A", "waves A"} <= set(diff) and turnip[["registers A", "waves A"]].notna().all(
            axis=None):
        r = turnip.iloc[0]
        parts.append(f"Turnip a{gpu} (Mesa's ir3): {r['registers A']:.0f} → {r['registers B']:.0f} vec4 registers, "
                     f"{r['waves A']:.0f} → {r['waves B']:.0f} waves of 16 (the PR quotes Qualcomm's offline "
                     "compiler instead: 28 registers, 37 % occupancy before the change)")
    else:
        parts.append(f"no Turnip a{gpu} figures (run `workbench compilers setup`)")
    timed = diff[diff["compiler"] == "live device (timed)"]
    if len(timed) and "median_us A" in diff:
        r = timed.iloc[0]
        parts.append(f"GPU time here {r['median_us A']:.1f} → {r['median_us B']:.1f} µs "
                     f"(B / A = {r['median_us B/A']:.2f})")
    return f"PR #19396 ({diff['rev A'].iloc[0]} → {diff['rev B'].iloc[0]}): " + "; ".join(parts) + "."


# --------------------------------------------------------------------------------------------------
# Charts


def plot_side_by_side(table: pd.DataFrame, *, title: str = "ET-VK's own kernel beside the workbench's"):
    """Median GPU time per implementation, one group per shape (log scale when the times span > 20×)."""
    fig = Figure(figsize=(max(6.0, 1.6 * table["shape"].nunique() + 4), 3.6))
    ax = fig.add_subplot()
    shapes = list(dict.fromkeys(table["shape"]))
    impls = list(dict.fromkeys(table["implementation"]))
    width = 0.8 / max(len(impls), 1)
    for i, impl in enumerate(impls):
        sub = table[table["implementation"] == impl].set_index("shape")
        xs = np.arange(len(shapes)) + (i - (len(impls) - 1) / 2) * width
        ys = [sub["median_us"].get(s, np.nan) for s in shapes]
        bars = ax.bar(xs, ys, width, label=impl, color="#d62728" if impl.startswith("ET-VK") else None)
        ax.bar_label(bars, labels=[_number(y) for y in ys], fontsize=7)
    ax.set_xticks(np.arange(len(shapes)), shapes, fontsize=8)
    ax.set_ylabel("median GPU time (µs)")
    times = table["median_us"].dropna()
    if len(times) and times.max() / max(times.min(), 1e-9) > 20:
        ax.set_yscale("log")
    ax.set_title(with_device(title, table), fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1, frameon=False)
    return fig


TITLES = {"median_us": "GPU time (µs)", "registers": "registers\n(NVIDIA: 32-bit, Adreno: vec4)",
          "waves": "waves (of 16 per SP)", "instructions": "instructions"}


def plot_diff(diff: pd.DataFrame, *, metrics=("registers", "waves", "instructions", "median_us")):
    """One panel per metric of an `etvk.diff` table: revision A and B side by side for each compiler / device."""
    metrics = [m for m in metrics if f"{m} A" in diff and diff[[f"{m} A", f"{m} B"]].notna().any().any()]
    fig = Figure(figsize=(3.2 * max(len(metrics), 1), 3.4))
    rev_a, rev_b = (diff["rev A"].iloc[0], diff["rev B"].iloc[0]) if len(diff) else ("A", "B")
    for i, metric in enumerate(metrics):
        ax = fig.add_subplot(1, len(metrics), i + 1)
        sub = diff[diff[[f"{metric} A", f"{metric} B"]].notna().any(axis=1)]
        names = [f"{k}\n{c}" if diff["kernel"].nunique() > 1 else c for k, c in zip(sub["kernel"], sub["compiler"])]
        xs = np.arange(len(sub))
        for j, (rev, color) in enumerate(((rev_a, "#bab0ac"), (rev_b, "#4e79a7"))):
            ys = pd.to_numeric(sub[f"{metric} {'AB'[j]}"], errors="coerce").to_numpy(float)
            bars = ax.bar(xs + (j - 0.5) * 0.38, ys, 0.38, label=rev, color=color)
            ax.bar_label(bars, labels=[_number(y) for y in ys], fontsize=7)
        ax.set_xticks(xs, [n.replace(" (", "\n(") for n in names], fontsize=7)
        ax.set_title(TITLES.get(metric, metric), fontsize=9)
        if i == 0:
            ax.legend(fontsize=7, title="revision", title_fontsize=7)
    fig.suptitle(with_device(f"ET-VK {', '.join(dict.fromkeys(diff['kernel']))}: {rev_a} → {rev_b}", diff),
                 fontsize=10)
    fig.tight_layout()
    return fig
