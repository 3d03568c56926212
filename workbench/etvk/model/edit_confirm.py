"""One change to an ET-VK shader template, seen two ways: replayed through a model's captured dispatches (seconds),
and confirmed on ET-VK's runtime rebuilt with the change (minutes).

    edit = edit_confirm.TemplateEdit.from_file("/path/to/executorch", "my/q8ta_conv2d_pw.glsl")    # an edited copy
    edit = edit_confirm.TemplateEdit.replace("/path/to/executorch", "q8ta_conv2d_pw",
                                             "round(float_out_texel", "floor(float_out_texel")     # or a text change
    edit.compile()                             # {variant: SPIR-V} as ET-VK's build compiles it
    swaps = edit.swaps(capture_join.variant_names(checkout))   # {captured pipeline hash: edited SPIR-V}
    capture.whatif.model_edit("caps/mobilenet_v2", swaps)      # the model's output difference, in seconds
    frame = edit_confirm.confirm(edit, "caps/mobilenet_v2", "/tmp/etvk_lowered/mobilenet_v2/working-tree")

    workbench etvk edit-confirm --template q8ta_conv2d_pw --replace OLD NEW --capture caps/mobilenet_v2 \
        --lowered /tmp/etvk_lowered/mobilenet_v2/working-tree [--csv F]

The copies
    The user's checkout is never written. To compile, the edited template, its YAML and ET-VK's headers go to a small
    folder (`templates`: a variant's expansion needs nothing else, and codegen reads one YAML file instead of 165).
    To rebuild, the checkout's working tree (uncommitted changes, submodules' files and its ``.git``, whose objects
    stay shared) is copied to ``~/.cache/workbench/etvk-edit/<digest>/executorch`` (``executorch``: ExecuTorch's
    includes need the folder to have that name) with the template replaced (`tree`). The digest covers the commit,
    the template's path and the edited text, so the same edit reuses its copies, and `build.build` keys the runtime
    by the copy's uncommitted changes: the same edit reuses its build too.

What is compared
    The edited what-if (`capture.whatif.model_edit`: the captured chain with every dispatch of the template's variants'
    pipelines running the edited SPIR-V, compiled as ET-VK's build compiles it) against the rebuilt runtime's own
    output for the same input. Both start from the same bytes, so a faithful replay gives the same output byte for
    byte; the captured shaders' chain against the unedited runtime's output is the control.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..codegen import GLSL_DIR, Codegen, ShaderSource, cached_folder, checkout_path, run_git, source

ENV_VAR = "WORKBENCH_ETVK_EDIT_DIR"


class EditError(ValueError):
    """An edit that cannot be applied: no such template, a text that does not occur, or an edit that changes nothing."""


def cache_root() -> Path:
    import os
    base = os.environ.get(ENV_VAR)
    return Path(base) if base else Path.home() / ".cache" / "workbench" / "etvk-edit"


@dataclass(frozen=True)
class TemplateEdit:
    """ET-VK's template `template` (a path relative to the checkout) of checkout `executorch` with text `edited`."""

    executorch: Path
    template: str
    edited: str
    #: other files of the checkout changed with the template: ((path relative to the checkout, edited text), …),
    #: e.g. the C++ that picks the template's variant (`etvk.dropin.edit(decomposition=…)`)
    others: tuple = ()

    @classmethod
    def from_file(cls, executorch, edited_file, template: str | None = None) -> "TemplateEdit":
        """An edited copy of a template: `template` names the one it replaces (a file name under ET-VK's glsl folder,
        or a path relative to the checkout); by default the template with the edited file's name."""
        root = checkout_path(executorch)
        path = Path(edited_file)
        if not path.is_file():
            raise EditError(f"expected an edited template file, found no file {path}")
        return cls(root, _template_path(root, template or path.name), path.read_text(encoding="utf-8"))

    @classmethod
    def replace(cls, executorch, template: str, old: str, new: str, count: int = 1) -> "TemplateEdit":
        """The template with the first `count` occurrences of `old` replaced by `new`."""
        root = checkout_path(executorch)
        rel = _template_path(root, template)
        text = (root / rel).read_text(encoding="utf-8")
        if old not in text:
            raise EditError(f"expected {old!r} in {rel}, it does not occur")
        return cls(root, rel, text.replace(old, new, count))

    @property
    def original(self) -> str:
        return (self.executorch / self.template).read_text(encoding="utf-8")

    @property
    def name(self) -> str:
        return Path(self.template).stem

    def files(self) -> list[tuple[str, str]]:
        """(path relative to the checkout, edited text) of every file the edit changes, the template first."""
        return [(self.template, self.edited), *self.others]

    def diff(self) -> str:
        import difflib
        return "".join("".join(difflib.unified_diff((self.executorch / rel).read_text(encoding="utf-8")
                                                    .splitlines(True), text.splitlines(True), f"a/{rel}", f"b/{rel}"))
                       for rel, text in self.files())

    def digest(self) -> str:
        head = run_git(self.executorch, "rev-parse", "HEAD").stdout.strip()
        others = "".join(f"\0{rel}\0{text}" for rel, text in self.others)
        return hashlib.sha256(f"{head}\0{self.executorch}\0{self.template}\0{self.edited}{others}".encode()
                              ).hexdigest()[:12]

    def _home(self) -> Path:
        if self.edited == self.original and all((self.executorch / rel).read_text(encoding="utf-8") == text
                                                for rel, text in self.others):
            raise EditError(f"expected a change to {self.template}, the edited text is the checkout's own")
        return cache_root() / self.digest()

    def tree(self) -> Path:
        """The checkout's working tree copied with the change (made once per edit; the checkout is not touched)."""
        def fill(folder: Path) -> None:
            # symlinks stay links, times kept (CMake / ninja compare them); .git is copied: its objects are the
            # checkout's alternates, so `git diff` in the copy sees exactly the edit on top of the checkout's state
            shutil.copytree(self.executorch, folder, symlinks=True, dirs_exist_ok=True)
            for rel, text in self.files():
                (folder / rel).write_text(text, encoding="utf-8")
        return cached_folder(self._home() / "executorch", fill)

    def templates(self) -> ShaderSource:
        """The edited template to compile from: a folder holding it, its YAML and ET-VK's headers (the generator reads
        a whole folder's YAML files: with one, codegen takes a fraction of the time; a variant's expansion depends on
        nothing else), expanded by the checkout's own generator; made once per edit."""
        def fill(folder: Path) -> None:
            glsl = self.executorch / Path(self.template).parent
            own = [p for p in glsl.glob("*.yaml") if re.search(rf"^{re.escape(self.name)}:", p.read_text(), re.M)]
            for path in [*glsl.glob("*.glslh"), *glsl.glob("*.h"), *own]:
                shutil.copy2(path, folder / path.name)
            (folder / Path(self.template).name).write_text(self.edited, encoding="utf-8")
        folder = cached_folder(self._home() / "glsl", fill)
        return dataclasses.replace(source(self.executorch), glsl_dir=folder, label=f"{self.template} edited")

    def compile(self, variants=None) -> dict[str, bytes]:
        """{variant of the template (all, or those of `variants` that are its): its SPIR-V from the edited tree},
        compiled as ET-VK's build compiles it (`capture_join.etvk_spirv`: the bytes the rebuilt runtime will hold);
        variants that do not compile are left out (EditError where none compiles)."""
        from ...toolchain import glslang
        from .capture_join import etvk_spirv
        glslc = glslang.tools()["glslc"]
        gen = Codegen(self.templates())
        variants = [v for v in gen.variants_of(self.name) if variants is None or v in variants]
        with tempfile.TemporaryDirectory(prefix="workbench-etvk-edit-") as tmp:
            out = {v: etvk_spirv(gen, v, glslc, Path(tmp)) for v in variants}
        compiled = {v: code for v, code in out.items() if code is not None}
        if not compiled:
            raise EditError(f"expected the edited {self.template} to compile, none of its variants "
                            f"({', '.join(variants) or 'none'}) does")
        return compiled

    def swaps(self, names: dict[str, str], compiled: dict[str, bytes] | None = None) -> dict[str, bytes]:
        """{captured pipeline hash: edited SPIR-V} for `capture.whatif.model_edit`: the pipelines `names` ({SPIR-V
        hash: variant}, `capture_join.variant_names` of the unedited checkout) gives a variant of the template."""
        if compiled is None:
            compiled = self.compile({v for joined in names.values() for v in joined.split("|")})
        return {h: compiled[v] for h, joined in names.items() for v in joined.split("|") if v in compiled}


def _template_path(root: Path, template: str) -> str:
    """`template` as a path relative to the checkout: a file name (or stem) under ET-VK's glsl folder, or a path."""
    given = Path(template)
    for candidate in (given, Path(GLSL_DIR) / given.name, Path(GLSL_DIR) / f"{given.stem}.glsl"):
        if (root / candidate).is_file() and not candidate.is_absolute():
            return str(candidate)
    raise EditError(f"expected a template of {root / GLSL_DIR} (e.g. q8ta_conv2d_pw.glsl), got {template}")


CONFIRM_COLUMNS = ["model", "template", "edit", "variants", "output", "dispatches", "edited", "run", "whatif_max_abs",
                   "whatif_mismatches", "elements", "rebuilt_vs_whatif_byte_exact", "rebuilt_vs_whatif_max_abs",
                   "rebuilt_vs_whatif_mismatches", "rebuilt_vs_original_max_abs", "original_runtime_byte_exact",
                   "argmax_same", "whatif_s", "build_s", "built", "runtime", "run_s"]


def edit_line(edit: TemplateEdit) -> str:
    """The edit in one line: the changed lines of its diff, '-old' / '+new'."""
    return " ".join(line[0] + " ".join(line[1:].split()) for line in edit.diff().splitlines()
                    if line[:1] in "+-" and not line.startswith(("+++", "---")))


def confirm(edit: TemplateEdit, capture_folder, lowered, *, model: str | None = None, device=None,
            jobs: int | None = None, quiet: bool = False) -> pd.DataFrame:
    """`edit` replayed through the capture (`capture.whatif.model_edit`, the pipelines of the template's variants
    swapped), then ET-VK's runtime rebuilt from the edited copy of the checkout (`build.build`, cached per edit) runs
    the lowered program `lowered` (the folder `etvk lower` wrote, the same program and input the capture ran): a row
    per output (CONFIRM_COLUMNS) with the rebuilt runtime's output against the what-if's (byte for byte where the
    replay is faithful) and against the capture's own output file; `original_runtime_byte_exact`: the unedited
    runtime (`build.find`), run again, writes that file's bytes (None where it is not built); the costs (`build_s`:
    the rebuild's configure + build seconds, `built`: 'now' or 'cached' by an earlier call)."""
    import time
    from ... import capture
    from ...capture import whatif
    from . import build as build_module
    from .capture_join import lowered_program, variant_names
    from .runtime import DTYPES, run
    folder = Path(capture_folder)
    program = lowered_program(lowered)
    names = variant_names(edit.executorch)
    started = time.perf_counter()
    found = capture.dispatches(folder)
    used = {v for d in found for v in names.get(d.spirv_hash, "").split("|") if v}
    swaps = edit.swaps({h: v for h, v in names.items() if set(v.split("|")) & used})
    if not swaps:
        raise EditError(f"expected the capture in {folder} to run a variant of {edit.template} "
                        f"({', '.join(edit.variants()) or 'none'}); it runs none")
    dtypes = [np.dtype(DTYPES.get(t, np.float32)) for t in program.summary["output_dtypes"]]
    original = whatif.program_outputs(folder)
    edited = whatif.model_edit(found, swaps, outputs=original, dtype=dtypes[0], device=device, names=names)
    whatif_s = time.perf_counter() - started
    cached = build_module.find(edit.tree()) is not None
    runtime = build_module.build(edit.tree(), jobs=jobs, quiet=quiet)
    build_s = runtime.info.get("configure_s", 0) + runtime.info.get("build_s", 0)  # when it was built
    unedited = build_module.find(edit.executorch)
    with tempfile.TemporaryDirectory(prefix="workbench-edit-confirm-") as tmp:
        result = run(runtime, program, executions=1, out_dir=Path(tmp) / "rebuilt")
        rebuilt = whatif.program_outputs(Path(tmp) / "rebuilt")
        # the control: the unedited runtime on the same program gives the capture's output file
        again = (whatif.program_outputs(run(unedited, program, executions=1, out_dir=Path(tmp) / "unedited")
                                        .etdump.parent) if unedited is not None else [])
    rows = []
    for i, (ours, theirs, before) in enumerate(zip(edited.edited_outputs, rebuilt, original)):
        dtype = dtypes[i] if i < len(dtypes) else dtypes[0]
        vs_whatif = whatif.output_difference(theirs, ours, dtype)
        vs_original = whatif.output_difference(theirs, before, dtype)
        out = edited.outputs.iloc[i]
        rows.append({"model": model or program.summary.get("model", folder.name), "template": edit.template,
                     "edit": edit_line(edit), "variants": "|".join(sorted({names[h] for h in swaps})), "output": i,
                     "dispatches": edited.totals["dispatches"], "edited": edited.totals["edited"],
                     "run": edited.totals["run"], "whatif_max_abs": out["max_abs"],
                     "whatif_mismatches": out["mismatches"], "elements": out["elements"],
                     "rebuilt_vs_whatif_byte_exact": vs_whatif["byte_exact"],
                     "rebuilt_vs_whatif_max_abs": vs_whatif["max_abs"],
                     "rebuilt_vs_whatif_mismatches": vs_whatif["mismatches"],
                     "rebuilt_vs_original_max_abs": vs_original["max_abs"],
                     "original_runtime_byte_exact": again[i] == before if i < len(again) else None,
                     "argmax_same": vs_original["argmax_same"], "whatif_s": round(whatif_s, 2),
                     "build_s": round(build_s, 1), "built": "cached" if cached else "now",
                     "runtime": runtime.info.get("key", ""), "run_s": round(result.seconds, 2)})
    return pd.DataFrame(rows, columns=CONFIRM_COLUMNS)
