"""The benchmark suites, one module each; a suite measures kernels (``workbench.kernels``) with the method of
``workbench.measure`` and writes tidy rows as it goes.

Every suite has the signature
    suite(device, writer: ResultsWriter | None, *, quick: bool = False, show_progress: bool = True) -> DataFrame
and is registered in SUITES under the name ``workbench bench NAME`` takes. The heavy imports (ExecuTorch, CUDA
torch) happen inside the suites that need them, so importing this package stays cheap.
"""
from __future__ import annotations

from . import (conv, conv_loads, coopmat, coopmat_steps, coopmat_vs_etvk, copy, pack, peak, pixel_shuffle, pixel_shuffle_gaps,
               propagation, quantize_affine)

SUITES = {
    "copy": copy.copy_suite,
    "pack": pack.bench_suite,
    "pixel-shuffle": pixel_shuffle.bench_suite,
    "pixel-shuffle-limit": pixel_shuffle.limit_suite,
    "pixel-shuffle-gaps": pixel_shuffle_gaps.gaps_suite,
    "conv-pw": conv.bench_suite,
    "conv-gap": conv.gap_suite,
    "conv-loads": conv_loads.loads_suite,
    "peak": peak.bench_suite,
    "quantize-affine": quantize_affine.bench_suite,
    "coopmat": coopmat.bench_suite,
    "coopmat-vs-etvk": coopmat_vs_etvk.bench_suite,
    "coopmat-steps": coopmat_steps.steps_suite,
    "propagation": propagation.propagation_suite,
    "propagation-graphs": propagation.graphs_suite,
}


def suite(name: str):
    """The suite registered as `name`, or a clear error listing the names."""
    if name not in SUITES:
        raise ValueError(f"unknown benchmark suite {name!r}; suites: {sorted(SUITES)}")
    return SUITES[name]
