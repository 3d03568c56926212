"""Every shader variant of a checkout compiled, in parallel and cached: one tidy row per variant.

    gen = Codegen(source("/path/to/executorch", rev="cff6f4dd32"))
    df = compile_all(gen)            # variant, template, ok, spirv_bytes, spirv_val, error, error_at, seconds
    summary(df)                      # "1153 variants from 165 templates: 1153 compile (…)"

The compiler is `workbench.toolchain.shaders`' (``compiler_info()``): the workbench's build of Debian 13's shaderc /
glslang when it is set up, which speaks ET-VK's whole dialect. Every result passes spirv-val (compile_glsl runs it);
results are cached by content, so a second run costs the expansions only. A variant that fails gets its error and
the template file:line it comes from (`TemplateCompileError`).
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

import pandas as pd

from ..toolchain import shaders
from ..toolchain.shaders import ShaderCompileError
from .codegen import Codegen, TemplateCompileError

COLUMNS = ("variant", "template", "ok", "spirv_bytes", "spirv_val", "shim", "error", "error_at", "seconds")


def _compile_one(gen: Codegen, name: str) -> dict:
    template = gen.variants()[name]
    row = {"variant": name, "template": template.name, "ok": False, "spirv_bytes": 0, "spirv_val": "not run",
           "shim": False, "error": "", "error_at": "", "seconds": 0.0}
    start = time.perf_counter()
    try:
        spirv = gen.compile(name)
    except TemplateCompileError as error:
        where = (f"{error.template.name}:{error.template_line}" if error.template is not None and error.template_line
                 else error.template.name if error.template is not None else f"{error.path}:{error.line}")
        row.update(error=error.compiler_message.strip(), error_at=where,
                   spirv_val="failed" if "spirv-val" in str(error.compiler_output) else "not run")
    except ShaderCompileError as error:
        row.update(error=error.compiler_message.strip(), error_at=f"{error.path}:{error.line}")
    else:
        row.update(ok=True, spirv_bytes=len(spirv.code), spirv_val="passed",
                   shim=bool(spirv.defines.get("SHIM_APPLIED")))
    row["seconds"] = time.perf_counter() - start
    return row


def compile_all(gen: Codegen, names=None, *, jobs: int | None = None, show_progress: bool = True) -> pd.DataFrame:
    """Compile `names` (default: every variant of the checkout) with `jobs` compilers at once (default: the CPU
    count); one row per variant, in name order, with `compiler` and `source` columns naming what compiled what."""
    names = sorted(gen.variants()) if names is None else list(names)
    gen.header_dir()  # once, before the threads
    rows = []
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
        futures = [pool.submit(_compile_one, gen, name) for name in names]
        done = as_completed(futures)
        if show_progress:
            from tqdm.auto import tqdm
            done = tqdm(done, total=len(futures), desc=f"compile {gen.source.label}")
        for future in done:
            rows.append(future.result())
    info = shaders.compiler_info()
    df = pd.DataFrame(rows, columns=list(COLUMNS)).sort_values("variant", ignore_index=True)
    df["compiler"] = f"{info.kind} ({info.origin}) {str(info.version).splitlines()[0] if info.version else ''}".strip()
    df["source"] = gen.source.label
    return df


def summary(df: pd.DataFrame) -> str:
    """One line: variants, templates, how many compile, the failures by template."""
    failed = df[~df["ok"]]
    line = (f"{len(df)} variants from {df['template'].nunique()} templates ({df['source'].iloc[0] if len(df) else ''}"
            f", {df['compiler'].iloc[0] if len(df) else ''}): {int(df['ok'].sum())} compile and pass spirv-val")
    if len(failed):
        by_template = failed.groupby("template").size().sort_values(ascending=False)
        line += (f", {len(failed)} fail in {len(by_template)} templates ("
                 + ", ".join(f"{t}: {n}" for t, n in by_template.head(8).items())
                 + (", …" if len(by_template) > 8 else "") + ")")
    return line
