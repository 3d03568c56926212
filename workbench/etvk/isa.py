"""The ISA of anything the workbench compiles, on every offline GPU: the inputs of `workbench isa` and the notebook
view, turned into SPIR-V by the ways that already exist, then `workbench.vendors.isa`.

    from workbench.etvk import isa as etvk_isa
    t = etvk_isa.target("q8ta_linear_gemv")                 # an ET-VK family (its default dispatch), or
    t = etvk_isa.target("linear_q4gsw_coop_buffer_buffer_float")   # a variant, "shaders/copy.glsl", "copy" (shaders/),
    t = etvk_isa.target("/tmp/etvk_caps/mobilenet_v2:3")    # a captured dispatch (DIR:N; DIR alone: every pipeline)
    etvk_isa.isa(t, "a740")                                 # vendors.isa.Isa of its first pipeline
    etvk_isa.counts_table([t], ["a740", "rdna3"])           # DataFrame: a row per pipeline × GPU, the class counts
    etvk_isa.target_diff(t, etvk_isa.target("q8ta_linear_gemv", rev="HEAD~5"), "a740")    # two revisions

Where each input becomes SPIR-V (no second path): a shader file or a shaders/ name through `vendors.mesa`'s own
resolution (the toolchain's cached glslc); an ET-VK family through `etvk.make` (its dispatch's variant, spec constants
and local size, as `workbench etvk stats` does), a variant through `Codegen.compile` (no spec constants, local size
64, as `etvk stats` does); a captured dispatch through `capture.stats.pipelines` (its SPIR-V, entry point, decoded spec
constants and local size, as `workbench capture stats` does).

#12444 (`u8vec4_weight_variant`): ET-VK's q4 GEMV loads its weight as ivec4; the before variant declares the same
buffer as u8vec4 and assembles each ivec4 from four u8vec4 loads, an edit of the generated GLSL made at run time
(`Codegen.derive` patches: nothing of ET-VK is written to the repository).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

__all__ = ["Target", "target", "pipelines", "isa", "isa_all", "counts_table", "target_diff", "u8vec4_weight_variant",
           "weight_load_patches", "WEIGHT_LOAD_PATCHES"]


@dataclasses.dataclass
class Target:
    """What `workbench isa` compiles: one or more pipelines (SPIR-V + spec constants + local size + entry point) and
    the GLSL they came from where known."""
    label: str
    kind: str                      # "file" | "shader" | "family" | "variant" | "capture"
    jobs: list                     # vendors.mesa job dicts: shader, name, spec_constants, local_size, entry_point
    glsl: str = ""                 # the source text ("" for SPIR-V files and captures)
    rev: str | None = None


def _capture_target(text: str) -> Target | None:
    folder, _, number = text.rpartition(":") if ":" in text and text.rsplit(":", 1)[1].isdigit() else (text, "", "")
    if not (Path(folder) / "manifest.json").is_file() and not any(Path(folder).glob("*.gfxr")) \
            and not Path(folder).is_dir():
        return None
    from ..capture.microscope import select
    from ..capture.stats import pipelines
    found = pipelines(select(folder, [int(number)] if number else None))
    jobs = []
    for p in found:
        if p["reason"]:
            raise ValueError(f"isa: dispatch {p['dispatches'][0]} of {folder}: {p['reason']}")
        jobs.append({"shader": p["spirv"], "name": f"dispatch {p['dispatches'][0]} ({p['pipeline']})",
                     "spec_constants": p["spec_constants"], "local_size": p["local_size"],
                     "entry_point": p["entry_point"]})
    if not jobs:
        raise ValueError(f"isa: {folder} holds no dispatch")
    return Target(text, "capture", jobs)


def target(text: str, *, executorch=None, rev: str | None = None, options: dict | None = None,
           defines: dict | None = None, spec_constants: dict | None = None, local_size=None) -> Target:
    """`text` as a Target: a capture folder (DIR or DIR:N), a shader file (.glsl / .comp / .spv), an ET-VK family
    (its dispatch made with `options`), an ET-VK variant, or a shader of shaders/. ValueError in one line naming what
    was expected and what was given."""
    from ..vendors import mesa
    text = str(text).strip()
    if not text:
        raise ValueError("isa: expected a target (a shader file, a shaders/ name, an ET-VK family or variant, or a "
                         "capture folder DIR[:N]), got nothing")
    if Path(text.rsplit(":", 1)[0]).is_dir():
        found = _capture_target(text)
        if found is not None:
            return found
    extra = {k: v for k, v in (("spec_constants", spec_constants), ("local_size", local_size)) if v}
    path = Path(text)
    if path.suffix in (".glsl", ".comp", ".spv") or path.is_file():
        if not path.is_file():
            raise ValueError(f"isa: no shader file {text} (expected an existing .glsl, .comp or .spv file)")
        code, name = mesa._resolve_code(str(path), defines)
        glsl = "" if path.suffix == ".spv" else path.read_text(errors="replace")
        return Target(text, "file", [{"shader": code, "name": name, **extra}], glsl)
    shader_dir = Path(__file__).resolve().parents[2] / "shaders"
    if (shader_dir / f"{text}.glsl").is_file():
        code, name = mesa._resolve_code(text, defines)
        return Target(text, "shader", [{"shader": code, "name": name, **extra}],
                      (shader_dir / f"{text}.glsl").read_text())
    from .codegen import Codegen, UnknownKernelError, source
    from .families import KERNELS
    try:
        gen = Codegen(source(executorch, rev=rev))
    except ValueError as exc:  # CheckoutError: no checkout
        raise ValueError(f"isa: {text!r} is no shader file, shaders/ name or capture folder, and ET-VK's names need "
                         f"a checkout: {str(exc).splitlines()[0]}") from None
    if text in KERNELS:
        from .run import make
        d = make(gen, text, **(options or {}))
        jobs = [{"shader": gen.compile(d.variant), "name": d.variant, "spec_constants": dict(d.spec_constants),
                 "local_size": tuple(d.local_size), **extra}]
        return Target(text, "family", jobs, gen.expand(d.variant).text, rev)
    if options:
        raise ValueError(f"isa: {', '.join(sorted(options))} set a family's dispatch; {text!r} is no family "
                         f"({', '.join(sorted(KERNELS))})")
    try:
        spirv = gen.compile(text)
    except UnknownKernelError as exc:
        raise ValueError(f"isa: expected a shader file, a shaders/ name, an ET-VK family or variant, or a capture "
                         f"folder; got {text!r} ({str(exc).strip(chr(34))})") from None
    return Target(text, "variant", [{"shader": spirv, "name": text, "local_size": (64, 1, 1), **extra}],
                  gen.expand(text).text, rev)


def pipelines(t: Target) -> list[dict]:
    return list(t.jobs)


def isa_all(t: Target, gpu, *, refresh=None) -> list:
    """The `vendors.isa.Isa` of every pipeline of `t` on one offline GPU."""
    from ..vendors.isa import compile_isa_many
    return compile_isa_many(t.jobs, gpu, refresh=refresh)


def isa(t: Target, gpu, *, pipeline: int = 0, refresh=None):
    """The `Isa` of one pipeline of `t` (the first by default) on one offline GPU."""
    if not 0 <= pipeline < len(t.jobs):
        raise ValueError(f"isa: {t.label} has {len(t.jobs)} pipeline(s); asked for number {pipeline}")
    from ..vendors.isa import compile_isa
    return compile_isa(t.jobs[pipeline], gpu, refresh=refresh)


def counts_table(targets, gpus, *, refresh=None):
    """A DataFrame, one row per target × pipeline × GPU: target, pipeline, gpu, error, then `vendors.isa.summary`."""
    import pandas as pd

    from ..vendors import mesa
    from ..vendors.isa import summary
    rows = []
    for g in [mesa.check_gpu(g) for g in gpus]:
        for t in targets:
            for job, got in zip(t.jobs, isa_all(t, g, refresh=refresh)):
                row = {"target": t.label, "pipeline": job.get("name"), "gpu": g.name, "error": got.error}
                if got.text:
                    row.update(summary(got.text, g))
                rows.append(row)
    frame = pd.DataFrame(rows)
    counted = [c for c in frame.columns if c not in ("target", "pipeline", "gpu", "error")]
    frame[counted] = frame[counted].fillna(0).astype(int)  # a class one ISA lacks (cat5 on Mali) counts 0
    return frame


def target_diff(a: Target, b: Target, gpu, *, pipeline: int = 0, refresh=None):
    """`vendors.isa.diff` of one pipeline of two targets on one GPU (labels: the targets, with their revisions)."""
    from ..vendors.isa import diff
    ia, ib = isa(a, gpu, pipeline=pipeline, refresh=refresh), isa(b, gpu, pipeline=pipeline, refresh=refresh)
    for t, got in ((a, ia), (b, ib)):
        if got.error:
            raise ValueError(f"isa: {t.label} on {gpu}: {got.error}")
    labels = tuple(t.label + (f"@{t.rev}" if t.rev else "") for t in (a, b))
    if labels[0] == labels[1]:
        labels = ("A: " + labels[0], "B: " + labels[1])
    return diff(ia.text, ib.text, gpu, labels=labels)


# ET-VK's buffer-weight q4 linears (linear_q4gsw_*_buffer_*) load a weight block as one ivec4. The u8vec4 form of
# before #12444 / #12610 reads each 32-bit word as a u8vec4: "block" keeps ET-VK's layout (the block's four words
# adjacent: four u8vec4 loads of one 16-byte block), "rows" the pre-#12610 layout (t_qmat2[(k + r) * stride + n]:
# the four words of a block in four rows, nblocks_x words apart). Each patch keeps the line count (Codegen.derive's
# template line mapping); the "rows" variant reads another layout, so it is for the ISA, not for running.
_U8_INDEX = {"block": "4 * (by * nblocks_x + bx) + {j}", "rows": "(4 * by + {j}) * nblocks_x + bx"}


def weight_load_patches(layout: str = "block") -> tuple:
    """The `Codegen.derive` patches of `u8vec4_weight_variant` for a weight `layout` ("block" or "rows")."""
    if layout not in _U8_INDEX:
        raise ValueError(f"isa: expected a weight layout of {', '.join(_U8_INDEX)}, got {layout!r}")
    words = ", ".join(f"int(pack32(t_packed_int4_weight_u8[{_U8_INDEX[layout].format(j=j)}]))" for j in range(4))
    return (
        ("#version 450 core\n\n\n", "#version 450 core\n#extension GL_EXT_shader_8bit_storage : require\n"
                                    "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n"),
        ("    ivec4 t_packed_int4_weight[];\n};\n\n\n",
         "    u8vec4 t_packed_int4_weight_u8[];\n};\n"
         f"ivec4 load_u8vec4_block(const int bx, const int by, const int nblocks_x) {{ return ivec4({words}); }}\n\n"),
        ('#include "linear_int4_weight_tile_load.glslh"', '#include "linear_int4_weight_tile.glslh"'),
        ('#include "linear_fp_bias_load.glslh"\n\n',
         '#include "linear_fp_bias_load.glslh"\n'
         "void load_int4_weight_tile(out Int4WeightTile weight_tile, const int block_x, const int block_y, "
         "const int nblocks_x) { [[unroll]] for (int y = 0; y < TILE_K4; ++y) { [[unroll]] for (int x = 0; "
         "x < TILE_N8; ++x) { weight_tile.data[y][x] = load_u8vec4_block(block_x + x, block_y + y, nblocks_x); } } }\n"),
    )


WEIGHT_LOAD_PATCHES = weight_load_patches("block")


def u8vec4_weight_variant(gen, variant: str, layout: str = "block") -> str:
    """A derived variant of ET-VK's buffer-weight q4 linear `variant` whose weight words are read as u8vec4 (as
    before ExecuTorch #12444 / #12610) instead of one ivec4 per block; `layout` "block" (ET-VK's, same result bytes)
    or "rows" (the pre-#12610 layout, for the ISA only). Returns its name (compile it with `gen.compile`)."""
    if "q4gsw" not in variant or "_buffer" not in variant:
        raise ValueError(f"isa: expected a q4 linear variant with a buffer weight (…q4gsw…_buffer…), got {variant}")
    return gen.derive(variant, f"{variant}__workbench_u8vec4_{layout}", patches=weight_load_patches(layout))
