"""The one catalogue of kernel families: everything a user can run, sweep and tune, one entry per family.

    from workbench import catalogue
    catalogue.families()                      # every family: the workbench's own, then ET-VK's (kind "etvk")
    catalogue.family("conv-pw").commands()    # ['workbench bench conv-pw', ..., 'workbench tune conv-pw-wg']
    catalogue.suite("conv-pw")                # the Suite behind `workbench bench conv-pw`
    catalogue.resolve(catalogue.suite("conv-pw").run)   # the suite function itself

A workbench family names its spec (the `workbench.kernels` module it measures), its benchmark suites (`workbench
bench NAME`, each with its chart if it has one), its fan-out sweep (`workbench sweep NAME`, NAME = the family's
name), its tuning spaces (`workbench tune NAME`) and how one tuning candidate is measured. `benchmarks.SUITES`,
`fanout.make_sweep`, `tune.SPACES` / `tune.tuning_space`, the candidate runner of `tune.candidates` and the
command line's choices all read this list; there is no second one.

The catalogue sits below the packages that implement families (benchmarks, fanout, tune, etvk import it), so it names
their code as "module:attribute" strings (like setuptools entry points), imported only when used by `resolve`:
importing the catalogue, and the packages that read it, stays cheap, and tests/test_catalogue.py resolves every
string so a typo fails there, not in a user's run.

ET-VK's op families (`workbench etvk run NAME`) are listed from `workbench.etvk.families.KERNELS` (ETVK_FAMILIES),
their own registry beside ET-VK's C++: they are written from a checkout's op implementations and run only with one,
so the catalogue lists them (kind "etvk") without owning their names.

How to add a family (one place to register: FAMILIES below):
1. Write the spec: `workbench/kernels/<family>.py` (+ `shaders/<shader>.glsl`), a frozen dataclass whose
   `__post_init__` raises ValueError for configs the kernel refuses.
2. Write its suite: `workbench/benchmarks/<family>.py`, a function
   `suite(device, writer, *, quick=False, show_progress=True) -> DataFrame` writing tidy rows as it goes.
   Optional: a chart, a function DataFrame -> matplotlib Figure in `workbench/viz/`, drawn beside the table.
3. Optional, fan-out (`workbench sweep`): a sweep class in `workbench/fanout/items.py` with `name` (the family's
   name), `suite(quick, cpu_device)`, `items()`, `describe(params)`, `run(device, params, warmup_s)`.
4. Optional, tuning (`workbench tune`): a space builder `(shape=None, **options) -> TuningSpace` in
   `workbench/tune/space.py`, and a candidate runner `(candidate, device, spec, warmup_s) -> row` in
   `workbench/tune/candidates.py` (a row with `correct`).
5. Add one `Family(...)` to FAMILIES naming those as "module:attribute" strings. The CLI's choices, SUITES, the
   sweeps and the spaces pick it up; `pytest tests/test_catalogue.py` checks every string resolves.
An ET-VK op family instead goes into `workbench/etvk/families/` (a module with `make(gen, **options) -> Dispatch`)
and its KERNELS; it then appears here as kind "etvk".
"""
from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Family", "Suite", "Space", "FAMILIES", "ETVK_FAMILIES", "families", "family", "suites", "suite", "sweeps",
           "sweep", "spaces", "space", "resolve", "references", "Resolved", "KINDS"]

KINDS = ("workbench", "etvk")


@dataclass(frozen=True)
class Suite:
    name: str                   # `workbench bench NAME`; the results table is NAME with "-" -> "_"
    run: str                    # "module:function": (device, writer, *, quick, show_progress) -> DataFrame
    chart: str | None = None    # "module:function": DataFrame -> matplotlib Figure, saved beside the table


@dataclass(frozen=True)
class Space:
    name: str                   # `workbench tune NAME`
    build: str                  # "module:function": (shape=None, **options) -> tune.space.TuningSpace


@dataclass(frozen=True)
class Family:
    name: str                   # the family's name (and its fan-out sweep's)
    doc: str                    # one line: what it is
    spec: str                   # where it is defined: a module, or "module:attribute"
    kind: str = "workbench"     # "workbench": the workbench's own kernels; "etvk": an ET-VK op family
    suites: tuple = ()          # Suite, ...
    sweep: str | None = None    # "module:class" of its fan-out sweep (fanout.items' sweep protocol)
    spaces: tuple = ()          # Space, ...
    candidate: str | None = None  # "module:function": (CandidateSweep, device, spec, warmup_s) -> row

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: expected a family kind of {list(KINDS)}, got {self.kind!r}")
        if bool(self.spaces) != bool(self.candidate):
            raise ValueError(f"{self.name}: a tuning space needs a candidate runner and a runner a space; got "
                             f"spaces {[s.name for s in self.spaces]}, candidate {self.candidate!r}")

    def references(self) -> dict:
        """Every "module:attribute" string of the entry, by where it appears (spec, suite NAME, chart NAME, ...)."""
        refs = {"spec": self.spec, "sweep": self.sweep, "candidate": self.candidate}
        for s in self.suites:
            refs[f"suite {s.name}"] = s.run
            refs[f"chart {s.name}"] = s.chart
        for s in self.spaces:
            refs[f"space {s.name}"] = s.build
        return {where: ref for where, ref in refs.items() if ref is not None}

    def commands(self) -> list[str]:
        """The commands that run this family."""
        if self.kind == "etvk":
            return [f"workbench etvk run {self.name}"]
        return ([f"workbench bench {s.name}" for s in self.suites]
                + ([f"workbench sweep {self.name}"] if self.sweep else [])
                + [f"workbench tune {s.name}" for s in self.spaces])


_B, _T = "workbench.benchmarks", "workbench.tune"

FAMILIES = (
    Family("copy", "the copy roofline: the shader copy, vkCmdCopyBuffer and torch's copy", "workbench.kernels.copy",
           suites=(Suite("copy", f"{_B}.copy:copy_suite"),)),
    Family("pack", "pack and unpack per int8x4 layout against the copy", "workbench.kernels.pack",
           suites=(Suite("pack", f"{_B}.pack:bench_suite"),)),
    Family("pixel-shuffle", "ET-VK's int8 pixel shuffle: the fused kernel, its block variants, the chain",
           "workbench.kernels.pixel_shuffle",
           suites=(Suite("pixel-shuffle", f"{_B}.pixel_shuffle:bench_suite"),
                   Suite("pixel-shuffle-limit", f"{_B}.pixel_shuffle:limit_suite"),
                   Suite("pixel-shuffle-gaps", f"{_B}.pixel_shuffle_gaps:gaps_suite"),
                   Suite("pixel-shuffle-pairs", f"{_B}.pixel_shuffle_gaps:pairs_suite")),
           sweep="workbench.fanout.items:PixelShuffleSweep",
           spaces=(Space("pixel-shuffle", f"{_T}.space:pixel_shuffle_space"),),
           candidate=f"{_T}.candidates:run_pixel_shuffle"),
    Family("conv-pw", "ET-VK's int8 pointwise conv (q8ta_conv2d_pw): tiles, work groups, operand loads",
           "workbench.kernels.conv_pw",
           suites=(Suite("conv-pw", f"{_B}.conv:bench_suite"), Suite("conv-gap", f"{_B}.conv:gap_suite"),
                   Suite("conv-loads", f"{_B}.conv_loads:loads_suite")),
           sweep="workbench.fanout.items:ConvTileSweep",
           spaces=(Space("conv-pw", f"{_T}.space:conv_space"), Space("conv-pw-wg", f"{_T}.space:conv_wg_space")),
           candidate=f"{_T}.candidates:run_conv"),
    Family("peak", "the device's roofs: packed-int8 dot and fp32 FMA probes", "workbench.kernels.peak",
           suites=(Suite("peak", f"{_B}.peak:bench_suite"),)),
    Family("quantize-affine", "quantize / dequantize affine per block shape, storage and op",
           "workbench.kernels.quantize_affine",
           suites=(Suite("quantize-affine", f"{_B}.quantize_affine:bench_suite"),)),
    Family("coopmat", "cooperative-matrix int8 GEMM / conv, its probe, and ET-VK's coopmat linear beside it",
           "workbench.kernels.coopmat",
           suites=(Suite("coopmat", f"{_B}.coopmat:bench_suite"),
                   Suite("coopmat-vs-etvk", f"{_B}.coopmat_vs_etvk:bench_suite",
                         chart="workbench.viz.coopmat_vs_etvk_views:plot_coopmat_vs_etvk"),
                   Suite("coopmat-steps", f"{_B}.coopmat_steps:steps_suite"),
                   Suite("coopmat-anchor", f"{_B}.coopmat_anchor:anchor_suite"),
                   Suite("coopmat-beyond", f"{_B}.coopmat_anchor:beyond_suite"))),
    Family("propagation", "layout propagation: ExecuTorch's passes on real models, tagged int8 graphs run",
           "workbench.graphs.int8_graph",
           suites=(Suite("propagation", f"{_B}.propagation:propagation_suite"),
                   Suite("propagation-graphs", f"{_B}.propagation:graphs_suite"))),
    Family("q4-gemv", "4-bit group-wise GEMV of LLM decode at the bandwidth limit, beside ET-VK's cooperative GEMV",
           "workbench.kernels.q4_gemv",
           suites=(Suite("q4-gemv", f"{_B}.q4_gemv:bench_suite"),)),
    Family("capture-edit", "one ET-VK template change replayed through a model's captured dispatches: compile, "
           "replay, compare", "workbench.capture.whatif",
           suites=(Suite("capture-edit", f"{_B}.capture_edit:edit_suite"),)),
)

#: ET-VK's op families: op name -> make(gen, **options) -> Dispatch (`workbench etvk run NAME`).
ETVK_FAMILIES = "workbench.etvk.families:KERNELS"


def resolve(ref: str):
    """The object a "module" or "module:attribute" string names, imported now; ValueError when the string names
    nothing (an import error of a dependency the module needs is raised as it is)."""
    if not isinstance(ref, str) or not ref or ref.count(":") > 1:
        raise ValueError(f"expected a 'module' or 'module:attribute' string, got {ref!r}")
    module_name, _, attribute = ref.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and (module_name == error.name or module_name.startswith(error.name + ".")):
            raise ValueError(f"{ref!r}: no module {error.name!r}") from None
        raise
    for part in attribute.split(".") if attribute else ():
        if not hasattr(obj, part):
            raise ValueError(f"{ref!r}: {obj.__name__} has no attribute {part!r}")
        obj = getattr(obj, part)
    return obj


def _etvk_families() -> tuple:
    entries = []
    for name, make in resolve(ETVK_FAMILIES).items():
        doc = inspect.getdoc(make) or inspect.getdoc(inspect.getmodule(make)) or ""
        summary = " ".join(doc.split("\n\n")[0].split())   # the docstring's first paragraph, on one line
        entries.append(Family(name, summary, f"{make.__module__}:{make.__qualname__}", kind="etvk"))
    return tuple(entries)


def families(kind: str | None = None) -> tuple:
    """Every family a user can run: the workbench's own (kind "workbench"), then ET-VK's op families (kind "etvk";
    listing them imports workbench.etvk)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"expected a family kind of {list(KINDS)} (or None for all), got {kind!r}")
    return (FAMILIES if kind in (None, "workbench") else ()) + (_etvk_families() if kind in (None, "etvk") else ())


def _lookup(table: dict, name: str, noun: str, plural: str, purpose: str = ""):
    if name not in table:
        raise ValueError(f"unknown {noun} {name!r}{purpose}; {plural}: {sorted(table)}")
    return table[name]


def family(name: str) -> Family:
    """The family called `name`: a workbench family, else an ET-VK op family (then workbench.etvk is imported)."""
    found = {f.name: f for f in FAMILIES}
    if name not in found:
        found.update((f.name, f) for f in _etvk_families())
    return _lookup(found, name, "family", "families")


def suites() -> dict:
    """suite name -> Suite, in the catalogue's order (the order `workbench main --benchmarks` runs them)."""
    return {s.name: s for f in FAMILIES for s in f.suites}


def sweeps() -> dict:
    """sweep name -> the family that has that fan-out sweep."""
    return {f.name: f for f in FAMILIES if f.sweep}


def spaces() -> dict:
    """tuning space name -> (family, Space)."""
    return {s.name: (f, s) for f in FAMILIES for s in f.spaces}


def suite(name: str) -> Suite:
    """The suite `workbench bench NAME` runs; ValueError listing the names."""
    return _lookup(suites(), name, "benchmark suite", "suites")


def sweep(name: str) -> Family:
    """The family whose fan-out sweep `workbench sweep NAME` runs; ValueError listing the names."""
    return _lookup(sweeps(), name, "sweep", "sweeps")


def space(name: str) -> tuple:
    """(family, Space) of the space `workbench tune NAME` searches; ValueError listing the names."""
    return _lookup(spaces(), name, "kernel", "kernels", " to tune")


def references(kind: str | None = "workbench") -> dict:
    """Every "module:attribute" string of the catalogue: {(family, where): ref}."""
    refs = {(f.name, where): ref for f in families(kind) for where, ref in f.references().items()}
    if kind in (None, "etvk"):
        refs[("etvk", "families")] = ETVK_FAMILIES
    return refs


class Resolved(Mapping):
    """A read-only view name -> object over {name: "module:attribute"}: a value is imported when first read, so a
    registry built on the catalogue costs no import until a name is used."""

    def __init__(self, refs: dict):
        self._refs = dict(refs)

    def __getitem__(self, name):
        return resolve(self._refs[name])

    def __iter__(self):
        return iter(self._refs)

    def __len__(self) -> int:
        return len(self._refs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._refs!r})"
