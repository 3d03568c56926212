"""A GEMV written here that drops into ET-VK's runtime in place of ``q4gsw_linear_gemv_coop__w_4x8`` (issue 43,
item 3): ``shaders/etvk_dropin/q4gsw_linear_gemv_coop__w_4x8.glsl``, an ET-VK template that the checkout's own
generator expands with the checkout's own YAML (the variant names ET-VK's C++ picks by), reading ET-VK's packed
weights (the nc buffer layout of ``pack_q4_linear_weight__w_4x8``) through the same bindings, spec constants and
dispatch geometry. What it does differently is in the shader's header and docs/llm-decode.md ("Drop-in GEMV").

    from workbench.etvk import dropin
    edit = dropin.edit("/path/to/executorch")                 # edit_confirm.TemplateEdit: the template replaced
    frame = dropin.compare(device, "/path/to/executorch")     # ET-VK's variant and the drop-in, same dispatch
    text = dropin.patch("/path/to/executorch")                # a unified diff against the checkout's files
    stats = dropin.statistics("/path/to/executorch", gpus=("a740", "mali-g610"))
    rates = dropin.decode_rates("/path/to/executorch", lowered)   # the small Llama before / after, tokens/s

    workbench etvk patch --template q4gsw_linear_gemv_coop --with shaders/etvk_dropin/… [-o out.patch]
    workbench etvk edit-confirm --template shaders/etvk_dropin/q4gsw_linear_gemv_coop__w_4x8.glsl \\
        --capture ~/.cache/workbench/etvk-llm/llama3_2_mini/capture --lowered …/llama3_2_mini/decode-32

Same dispatch, two shaders: `compare` makes the family's dispatch once (``etvk.families.linear_q4gsw_4x8``: the
weights packed as ET-VK's prepack writes them, the scales, bias and UBOs as its C++ binds them) and executes it with
the checkout's templates and with the drop-in's (`edit_confirm.TemplateEdit.templates`: the drop-in beside the
checkout's headers and YAML), each checked against torch (float64 ``x @ dequantized(w)ᵀ``, the fp32 summation bound).

The patch is made at run time from the user's files (`git diff --no-index` of their template's text and the
replacement, labelled with the template's path in the checkout, so ``git apply`` takes it in the checkout's root);
nothing of ET-VK is written to the repository.
"""
from __future__ import annotations

import dataclasses
import re
import subprocess
import tempfile
from pathlib import Path

import pandas as pd

from ..toolchain.shaders import SHADER_DIR
from .codegen import GLSL_DIR, Codegen, checkout_path, source
from .model.edit_confirm import EditError, TemplateEdit

TEMPLATE = "q4gsw_linear_gemv_coop__w_4x8"
DROPIN_DIR = Path(SHADER_DIR) / "etvk_dropin"

#: (K, N, group) of the drop-in's checks: the small Llama's GEMVs (dim 512, KV 128, MLP 1536, vocab 8192: every
#: (NUM_GROUPS, WORKERS) variant), awkward ones (N % 8 == 4, N not a multiple of a work group's 64 / 32 rows,
#: K not a multiple of 128, K / 4 < 4 · workers) and Llama-3.2-1B's three.
CASES = ((512, 512, 32), (512, 128, 32), (512, 1536, 32), (1536, 512, 32), (512, 8192, 32),
         (96, 20, 32), (64, 4104, 64), (384, 1032, 128), (1152, 4100, 64), (2048, 36, 128), (128, 12, 32),
         (2048, 2048, 32), (2048, 8192, 32), (8192, 2048, 32))
QUICK_CASES = ((512, 512, 32), (96, 20, 32), (64, 4104, 64), (384, 1032, 128))


def dropin_file(template: str = TEMPLATE) -> Path:
    """The drop-in for `template` in ``shaders/etvk_dropin``."""
    path = DROPIN_DIR / f"{template}.glsl"
    if not path.is_file():
        have = ", ".join(sorted(p.stem for p in DROPIN_DIR.glob("*.glsl"))) or "none"
        raise EditError(f"expected a drop-in for {template} in {DROPIN_DIR} (have: {have})")
    return path


def template_path(executorch, name: str) -> str:
    """`name` as the path of one template of the checkout: a path, a file name, a stem, or a prefix of exactly one
    template's stem under ET-VK's glsl folder (``q4gsw_linear_gemv_coop`` → ``…__w_4x8.glsl``)."""
    root = checkout_path(executorch)
    given = str(name).strip()
    glsl = root / GLSL_DIR
    stem = Path(given).name.removesuffix(".glsl")
    for candidate in (Path(given), Path(GLSL_DIR) / Path(given).name, Path(GLSL_DIR) / f"{stem}.glsl"):
        if not candidate.is_absolute() and candidate.suffix == ".glsl" and (root / candidate).is_file():
            return str(candidate)
    found = sorted(p.name for p in glsl.glob(f"{stem}*.glsl")) if stem else []
    if len(found) == 1:
        return str(Path(GLSL_DIR) / found[0])
    if found:
        raise EditError(f"expected one template of {glsl} named by {given!r}, it names {len(found)}: "
                        f"{', '.join(found)}")
    raise EditError(f"expected a template of {glsl} (e.g. {TEMPLATE}), got {given!r}")


#: the C++ that picks the GEMV's (NUM_GROUPS, WORKERS) variant by N, and the function in it
PICKER = "backends/vulkan/runtime/graph/ops/impl/Q4gswLinear.cpp"
PICKER_FUNCTION = re.compile(r"CoopVariant pick_coop_variant_for_N\(uint32_t N\) \{\n.*?\n\}\n", re.S)


def picker_text(text: str, decomposition: str) -> str:
    """ET-VK's ``Q4gswLinear.cpp`` (`text`) with ``pick_coop_variant_for_N`` returning `decomposition` (a variant of
    the GEMV's YAML: g1w64, g4w16, g8w8) at every N: on the H200 the picker's g4w16 / g8w8 give 128–448 work groups
    of 64 threads at Llama's shapes, too few loads in flight (data/NVIDIA_H200/q4_gemv_dropin.csv)."""
    suffix, groups, workers = decomposition_named(decomposition)
    if len(PICKER_FUNCTION.findall(text)) != 1:
        raise EditError(f"expected one `CoopVariant pick_coop_variant_for_N(uint32_t N) {{ … }}` in {PICKER}, "
                        f"found {len(PICKER_FUNCTION.findall(text))}")
    body = (f"CoopVariant pick_coop_variant_for_N(uint32_t N) {{\n  (void)N; // workbench etvk patch --decomposition "
            f"{decomposition}: one decomposition at every N\n  return {{\"{suffix}\", {groups}u, {workers}u}};\n}}\n")
    return PICKER_FUNCTION.sub(lambda _: body, text)


def decomposition_named(name: str) -> tuple[str, int, int]:
    """The GEMV's decomposition `name` ("g1w64": `linear_q4gsw_4x8.coop_variant_named`); EditError naming them."""
    from .families.linear_q4gsw_4x8 import coop_variant_named
    try:
        return coop_variant_named(name)
    except ValueError as exc:
        raise EditError(str(exc)) from None


def edit(executorch=None, with_file=None, template: str | None = None,
         decomposition: str | None = None, picker_only: bool = False) -> TemplateEdit:
    """The checkout's `template` (default: the one `with_file` is named after, else ``TEMPLATE``) replaced by
    `with_file` (default: the workbench's drop-in for it); with `decomposition`, ET-VK's picker (`PICKER`) made
    to give the GEMV that variant at every N (`picker_text`); `picker_only`: that picker with ET-VK's own shader
    (what the picker alone is worth)."""
    if picker_only and decomposition is None:
        raise EditError("expected a decomposition with picker_only (the picker is the edit), got none")
    if decomposition is not None:
        decomposition_named(decomposition)  # a name the YAML lacks is refused before the checkout is read
    root = checkout_path(executorch)
    if picker_only:
        rel = template_path(root, template or TEMPLATE)
        return _with_picker(TemplateEdit(root, rel, (root / rel).read_text(encoding="utf-8")), decomposition)
    if with_file is None:
        with_file = dropin_file(Path(template_path(root, template or TEMPLATE)).stem)
    path = Path(with_file)
    if not path.is_file():
        raise EditError(f"expected a replacement template file, found no file {path}")
    rel = template_path(root, template or path.name)
    e = TemplateEdit.from_file(root, path, rel)
    return e if decomposition is None else _with_picker(e, decomposition)


def _with_picker(e: TemplateEdit, decomposition: str) -> TemplateEdit:
    """`e` with the checkout's picker (`PICKER`) rewritten to give `decomposition` at every N."""
    picker = e.executorch / PICKER
    if not picker.is_file():
        raise EditError(f"expected ET-VK's GEMV picker at {picker}, found no file")
    return dataclasses.replace(e, others=((PICKER, picker_text(picker.read_text(encoding="utf-8"), decomposition)),))


def patch(executorch=None, template: str | None = None, with_file=None, decomposition: str | None = None) -> str:
    """A unified diff (git's format) taking the checkout's `template` to `with_file` (and, with `decomposition`, its
    picker: `edit`), made by `git diff --no-index` from the checkout's files as they are now; ``git apply`` in the
    checkout's root applies it."""
    e = edit(executorch, with_file, template, decomposition)
    if e.edited == e.original:
        raise EditError(f"expected {with_file or 'the drop-in'} to differ from {e.template}; they are the same")
    diffs = []
    with tempfile.TemporaryDirectory(prefix="workbench-etvk-patch-") as tmp:
        for rel, text in e.files():
            for side, body in (("a", (e.executorch / rel).read_text(encoding="utf-8")), ("b", text)):
                target = Path(tmp) / side / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(body, encoding="utf-8")
            proc = subprocess.run(["git", "diff", "--no-index", "--no-color", "--src-prefix=", "--dst-prefix=",
                                   f"a/{rel}", f"b/{rel}"], cwd=tmp, capture_output=True, text=True)
            if proc.returncode not in (0, 1) or not proc.stdout.startswith("diff --git"):
                raise EditError(f"expected git diff to write a patch, it exited {proc.returncode}: "
                                f"{(proc.stderr or proc.stdout).strip()[:200]}")
            diffs.append(proc.stdout)
    from .codegen import run_git
    head = run_git(e.executorch, "rev-parse", "--short=10", "HEAD").stdout.strip() or "unversioned"
    also = f"; {PICKER} picks {decomposition} at every N" if decomposition else ""
    return (f"workbench etvk patch: {e.template} replaced{also} (ExecuTorch {head}, made from {e.executorch}).\n"
            f"Apply in the checkout's root: git apply FILE\n\n" + "".join(diffs))


class Swapped:
    """The checkout's templates with one replaced: the replacement's Codegen for its variants, the checkout's for
    every other (an op's earlier dispatches, e.g. ET-VK's weight prepack); otherwise the replacement's Codegen."""

    def __init__(self, theirs: Codegen, ours: Codegen, template: str):
        self.theirs, self.ours = theirs, ours
        self.replaced = set(ours.variants_of(template))

    def compile(self, variant: str, *args, **kwargs):
        return (self.ours if variant in self.replaced else self.theirs).compile(variant, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.ours, name)


def generators(executorch=None, with_file=None):
    """(the checkout's Codegen, the same with the template replaced: `Swapped`): the same generator, YAML and
    headers."""
    e = edit(executorch, with_file)
    theirs = Codegen(source(e.executorch))
    return theirs, Swapped(theirs, Codegen(e.templates()), e.name)


def _dispatch(gen: Codegen, k: int, n: int, group: int, **options):
    from .families.linear_q4gsw_4x8 import q4gsw_linear_gemv_coop__w_4x8
    return q4gsw_linear_gemv_coop__w_4x8(gen, shape=(1, k), out_features=n, group_size=group, **options)


def compare(device, executorch=None, cases=CASES, *, with_file=None, measure: bool = False, cache: str | None = None,
            min_time_s: float = 0.2, options: dict | None = None) -> pd.DataFrame:
    """ET-VK's GEMV and the drop-in on the same dispatch at each (K, N, group) of `cases`: one row per case and
    `impl` ("etvk", "dropin") with `etvk.run.execute`'s columns (correct, max_abs_diff, tolerance; timing when
    `measure`, in the `cache` regime if given); `options`: the family's (dtype, storage, bias, prepack)."""
    from .run import execute
    theirs, ours = generators(executorch, with_file)
    rows = []
    for k, n, group in cases:
        d = _dispatch(theirs, k, n, group, **(options or {}))
        for impl, gen in (("etvk", theirs), ("dropin", ours)):
            row = execute(device, gen, d, measure=measure, cache=cache, min_time_s=min_time_s)
            rows.append({"impl": impl, "k": k, "n": n, "group_size": group, **row})
    return pd.DataFrame(rows)


def statistics(executorch=None, cases=((2048, 2048, 32), (2048, 8192, 32), (512, 512, 32)), *,
               gpus=("a740", "a750", "mali-g610"), with_file=None, storages=("buffer",)) -> pd.DataFrame:
    """Registers, instructions, spills, waves and occupancy of ET-VK's variant and the drop-in on the offline
    compilers (`etvk.run.stats_rows`, no live device), at each case's dispatch (its variant, spec constants, local
    size) for each IO storage of `storages` (the small Llama's runtime picks texture3d); `impl`, the shape and
    `storage` as columns."""
    from .run import stats_rows
    theirs, ours = generators(executorch, with_file)
    frames = []
    for storage in storages:
        for k, n, group in cases:
            d = _dispatch(theirs, k, n, group, bias=False, storage=storage)
            for impl, gen in (("etvk", theirs), ("dropin", ours)):
                frame = stats_rows(None, gen, [d.variant], gpus=gpus, dispatches={d.variant: d})
                frames.append(frame.assign(impl=impl, k=k, n=n, group_size=group, storage=storage))
    return pd.concat(frames, ignore_index=True)


RATE_COLUMNS = ["runtime", "step", "tokens", "gpu_us", "tokens_per_s_gpu", "etvk_execute_us", "tokens_per_s_execute",
                "gemv_us", "gemv_share", "outputs_within", "max_abs_vs_reference", "max_abs_vs_original"]


def decode_rates(executorch=None, lowered=None, *, with_file=None, runs: int = 5, warmup: int = 2, jobs=None,
                 device=None, quiet: bool = True) -> pd.DataFrame:
    """The lowered LLM (`llm.lower`'s folder) on ET-VK's runtime built from the checkout and from the copy with the
    drop-in (`build.build`, cached; the copy is `TemplateEdit.tree`): per runtime and step, tokens/s by the GPU
    time and by ET-VK's execute span (`llm.read`'s rates), the GEMVs' µs and share, whether every compared output
    is within `llm.RTOL` of the torch reference, and the largest difference from the original runtime's outputs.
    The programs are run in copies of `lowered` (its own run files are left as they are)."""
    import shutil
    from .model import build, llm
    e = edit(executorch, with_file)
    if lowered is None:
        raise EditError("expected the lowered LLM's folder (`workbench etvk llm --out`'s), got none")
    source_programs = llm.programs_in(lowered)
    runtimes = (("original", build.build(e.executorch, jobs=jobs, quiet=quiet)),
                ("dropin", build.build(e.tree(), jobs=jobs, quiet=quiet)))
    with tempfile.TemporaryDirectory(prefix="workbench-dropin-llm-") as tmp:
        runs_of = {}
        for label, runtime in runtimes:
            folder = Path(tmp) / label
            shutil.copytree(source_programs.folder, folder, ignore=shutil.ignore_patterns("capture", "run.etdp",
                                                                                          "output-*.bin", "run.json"))
            programs = llm.programs_in(folder)
            llm.execute(programs, runtime, runs=runs, warmup=warmup, device=device, quiet=quiet)
            runs_of[label] = (programs, llm.read(programs))
        return rate_rows(runs_of)


def rate_rows(runs_of: dict) -> pd.DataFrame:
    """RATE_COLUMNS rows from {runtime label: (`llm.Programs` its runtime ran, their `llm.read` profile)}, the first
    label the original: per runtime and step, tokens/s (the profile's rates), the GEMVs' µs and share, whether every
    compared output is within `llm.RTOL` of the torch reference, and the largest difference from the original
    runtime's outputs."""
    import numpy as np
    rows, outputs = [], {}
    for label, (programs, profile) in runs_of.items():
        outputs[label] = {f.name: np.fromfile(f / "output-0.bin", dtype=np.float32) for f in programs.folders}
        shares = profile.families[profile.families["family"] == "GEMV"].set_index("step")
        for _, rate in profile.rates.iterrows():
            step = rate["step"]
            out = profile.outputs[profile.outputs["step"] == step]
            compared = out[out["compared"]]
            rows.append({"runtime": label, "step": step, "tokens": rate["tokens"], "gpu_us": rate["gpu_us"],
                         "tokens_per_s_gpu": rate["tokens_per_s_gpu"], "etvk_execute_us": rate["etvk_execute_us"],
                         "tokens_per_s_execute": rate["tokens_per_s_execute"],
                         "gemv_us": _share(shares, step, "gpu_us_per_step"), "gemv_share": _share(shares, step, "share"),
                         "outputs_within": bool(out["within"].all()),
                         "max_abs_vs_reference": float(compared["max_abs_diff"].max()) if len(compared) else None,
                         "step_folders": ",".join(sorted(f.name for f in programs.folders if _step_of(f) == step))})
    original = outputs[next(iter(runs_of))]
    for row in rows:  # each step's outputs against the original runtime's, same program and inputs
        names = row.pop("step_folders").split(",")
        finite = [np.nanmax(np.abs(outputs[row["runtime"]][f] - original[f])) for f in names
                  if np.isfinite(original[f]).all()]
        row["max_abs_vs_original"] = float(max(finite)) if finite else None
    return pd.DataFrame(rows, columns=RATE_COLUMNS)


def returned_rates(tars: dict, lowered, work) -> pd.DataFrame:
    """`rate_rows` of runs made on a GPU host (`tools/gpu_llm.py --dropin`): {runtime label: the tar
    `llm.pack_returned` wrote for it}, read against the programs `lowered` (each into `work/<label>`)."""
    from .model import llm
    runs_of = {}
    for label, tar in tars.items():
        profile, _ = llm.read_returned(tar, lowered, Path(work) / label)  # its ETDumps read once, here
        runs_of[label] = (llm.programs_in(Path(work) / label / "llm"), profile)
    return rate_rows(runs_of)


def _step_of(folder: Path) -> str:
    return "prefill" if folder.name.startswith("prefill") else "decode"


def _share(frame: pd.DataFrame, step: str, column: str):
    if step not in frame.index or column not in frame.columns:
        return None
    value = frame.loc[step, column]
    return float(value.iloc[0] if isinstance(value, pd.Series) else value)
