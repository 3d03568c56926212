"""Captures of ET-VK's runtime, labelled with what ET-VK knows: each pipeline's shader variant name (its SPIR-V
matched against the checkout's variants compiled by `workbench.etvk.codegen`) and, from the run's ETDump, each
dispatch's operator and ET-VK's own GPU time. `workbench.capture` knows nothing of ET-VK (it sits below etvk), so the
joins are made here.

    names = capture_join.variant_names("/path/to/executorch")         # {SPIR-V hash: variant name}
    frame = capture.open(folder, names=names)                          # `variant` column filled
    joined = capture_join.join_events(frame, folder / "run.etdp")     # + operator, kernel, etvk_gpu_us

    folder = capture_join.capture_program(runtime, program, out)       # executor_runner under the capture layer

How the join is made
    ET-VK logs one event per dispatch of an execution (``dispatch_id`` 0, 1, … in its command buffer's order); the
    capture holds those dispatches too, after the prepacking ones of the model's load (which the ETDump does not
    log). The events are matched to the capture's dispatches in order, starting at the offset where the kernel
    names of the events equal the capture's variant names (the latest such offset; the last events' worth of
    dispatches where no name is known): `joined_by` says which.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd

from ..codegen import Codegen, cache_root, source

EVENT_COLUMNS = ["dispatch_id", "operator", "kernel", "etvk_gpu_us"]


def _spirv_hash(code: bytes) -> str:
    """The capture's pipeline key (`CapturedDispatch.spirv_hash`): sha256 of the SPIR-V, first 16 hex digits."""
    return hashlib.sha256(code).hexdigest()[:16]


def etvk_spirv(gen: Codegen, name: str, glslc, folder: Path) -> bytes | None:
    """The SPIR-V ET-VK's build makes of variant `name` (gen_vulkan_spv.py's glslc command: -O, -Werror, no -g,
    the generated headers on the include path; without -O where the optimizer fails), or None where it does not
    compile. Not `Codegen.compile`: the workbench keeps debug names (-g), which changes the module's bytes."""
    import subprocess
    expanded = gen.expand(name)
    src, out = folder / f"{name}.glsl", folder / f"{name}.spv"
    src.write_text(expanded.text)
    command = [str(glslc), "-fshader-stage=compute", str(src), "-o", str(out),
               f"--target-env=vulkan{expanded.params.get('VK_VERSION', '1.1')}", "-Werror", "-I", str(gen.header_dir())]
    for flags in (["-O"], []):
        if subprocess.run(command + flags, capture_output=True).returncode == 0:
            return out.read_bytes()
    return None


def variant_names(executorch=None, rev: str | None = None, *, jobs: int | None = None) -> dict[str, str]:
    """{SPIR-V hash: ET-VK variant name} of every variant of the checkout that compiles, compiled as ET-VK's build
    compiles it (`etvk_spirv`). Variants with identical SPIR-V share a hash: the name is theirs joined by '|'.
    Cached per commit, compiler and templates (an edited working tree is compiled again)."""
    import os
    import tempfile
    from concurrent.futures import ThreadPoolExecutor
    from ...toolchain import glslang
    src = source(executorch, rev)
    gen = Codegen(src)
    glslc = glslang.tools()["glslc"]
    digest = hashlib.sha256()
    for name, path in sorted(gen.variants().items()):
        digest.update(f"{name}\0{path.stat().st_mtime_ns}\0".encode())
    key = hashlib.sha256(f"{src.commit}|{glslang.RECIPE_ID}|{digest.hexdigest()}".encode()).hexdigest()[:20]
    cached = cache_root() / "variant_hashes" / f"{key}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    names: dict[str, list[str]] = {}
    variants = sorted(gen.variants())
    gen.header_dir()
    for name in variants:  # the expansions share the generator's state: made one at a time
        gen.expand(name)
    with tempfile.TemporaryDirectory(prefix="workbench-etvk-spirv-") as tmp, \
            ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
        for name, code in zip(variants, pool.map(lambda n: etvk_spirv(gen, n, glslc, Path(tmp)), variants)):
            if code is not None:
                names.setdefault(_spirv_hash(code), []).append(name)
    mapping = {h: "|".join(sorted(v)) for h, v in names.items()}
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(mapping, indent=0, sort_keys=True) + "\n")
    return mapping


def event_table(etdump, execution: int = 0) -> pd.DataFrame:
    """ET-VK's dispatches of one execution from an ETDump, in order: dispatch_id, operator, kernel, etvk_gpu_us."""
    from .events import dispatch_rows
    rows = dispatch_rows(etdump)
    rows = rows[rows["execution"] == execution].sort_values("dispatch_id")
    if rows.empty:
        raise ValueError(f"{etdump}: no ET-VK dispatch of execution {execution}")
    return rows.rename(columns={"gpu_us": "etvk_gpu_us"})[EVENT_COLUMNS].reset_index(drop=True)


def _names_match(variant: str, kernel: str) -> bool:
    return bool(variant) and kernel in variant.split("|")


def align(variants: list[str], kernels: list[str]) -> tuple[int, str]:
    """(offset, how): where the events' kernel names start in the capture's variant names."""
    n, m = len(variants), len(kernels)
    if m > n:
        raise ValueError(f"the ETDump logs {m} dispatches, the capture holds {n}: not the same run")
    for offset in range(n - m, -1, -1):
        if all(_names_match(variants[offset + i], k) for i, k in enumerate(kernels)):
            return offset, "kernel names"
    return n - m, "order (the last dispatches; names did not line up)"


def join_events(frame: pd.DataFrame, events) -> pd.DataFrame:
    """`capture.open`'s frame with ET-VK's operator, kernel and GPU time per dispatch (`events`: an ETDump path or
    `event_table`'s frame); dispatches the ETDump does not log (prepacking) get empty ones."""
    table = event_table(events) if not isinstance(events, pd.DataFrame) else events
    variants = frame["variant"].fillna("").tolist() if "variant" in frame else [""] * len(frame)
    offset, how = align(variants, table["kernel"].tolist())
    out = frame.copy()
    for column in EVENT_COLUMNS:
        out[column] = pd.Series([None] * len(out), dtype=object)
    for i, event in table.iterrows():
        for column in EVENT_COLUMNS:
            out.at[offset + i, column] = event[column]
    out["phase"] = ["prepack" if i < offset else "execute" for i in range(len(out))]
    out["joined_by"] = how
    return out


def capture_program(runtime, program, out, *, timeout: float | None = 900) -> dict:
    """Capture one execution of `program` (a lowered ``.pte``, `revision.Program`) on `runtime`'s executor_runner
    into the capture folder `out`, with the run's ETDump (``run.etdp``) and outputs kept in it; the capture's
    manifest, plus ``uncaptured_s`` (the same run without the layer) for the overhead."""
    import time
    import subprocess
    from ... import capture
    out = Path(out)
    scratch = out.parent / f".{out.name}-run"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    command = [str(runtime.runner), f"--model_path={program.pte}",
               f"--inputs={','.join(str(Path(p).resolve()) for p in program.inputs)}", "--num_executions=1",
               f"--etdump_path={scratch / 'run.etdp'}", f"--output_file={scratch / 'output'}", "--print_output=none"]
    started = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True, timeout=timeout)
    uncaptured = time.perf_counter() - started
    manifest = capture.run(command, out, timeout=timeout, allow_failure=True)
    for path in scratch.iterdir():
        shutil.move(str(path), out / path.name)
    scratch.rmdir()
    manifest["uncaptured_s"] = round(uncaptured, 3)
    (out / "capture.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def lowered_program(folder):
    """The `revision.Program` that `etvk lower` wrote into `folder`."""
    from .revision import Program
    folder = Path(folder)
    summary = json.loads((folder / "summary.json").read_text())
    return Program(folder / "model.pte", [folder / n for n in summary["input_files"]], folder / "reference.pt",
                   summary)


COVERAGE_COLUMNS = ["model", "dispatch", "phase", "pipeline", "variant", "variant_from", "operator", "exact", "reason",
                    "gpu_us_median", "etvk_gpu_us"]


def coverage(folder, model: str, names: dict | None = None, *, device=None, quick: bool = True) -> pd.DataFrame:
    """Every dispatch of a capture of ET-VK's runtime replayed alone: one row per dispatch (COVERAGE_COLUMNS):
    its phase (prepack / execute, from the ETDump join), pipeline hash, ET-VK variant (`variant_from`: 'spirv' where
    its SPIR-V matched a compiled variant of the checkout, 'etdump' where only the ETDump's kernel name gives it),
    operator, `exact`, `reason` (why not: the replay's reason or the mismatch), replayed and ET-VK's GPU µs."""
    from ... import capture
    folder = Path(folder)
    listed = capture.open(folder, names=names)
    etdump = folder / "run.etdp"
    if etdump.is_file():
        listed = join_events(listed, etdump)
    else:
        listed = listed.assign(phase="", operator="", kernel="", etvk_gpu_us=None)
    replayed = capture.replay(folder, device=device, quick=quick, names=names)
    out = listed.merge(replayed[["dispatch", "exact", "mismatch", "reason", "gpu_us_median"]], on="dispatch",
                       how="left")
    from_spirv = out["variant"].fillna("") != ""
    kernels = out["kernel"].fillna("")
    out["variant_from"] = ["spirv" if s else ("etdump" if k else "") for s, k in zip(from_spirv, kernels)]
    out["variant"] = [v if s else k for v, s, k in zip(out["variant"], from_spirv, kernels)]
    out["reason"] = [("" if e else (r or m)) for e, r, m in zip(out["exact"], out["reason"].fillna(""),
                                                                   out["mismatch"].fillna(""))]
    out["model"] = model
    return out[COVERAGE_COLUMNS]


def coverage_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per model (and all together): dispatches, exact, share exact, those of an execution (the ETDump's), the
    distinct variants, the exceptions' reasons."""
    rows = []
    for model, group in [*table.groupby("model", sort=False), ("all", table)]:
        execute = group[group["phase"] == "execute"]
        rows.append({"model": model, "dispatches": len(group), "exact": int(group["exact"].sum()),
                     "exact_pct": round(100 * group["exact"].mean(), 1), "execute_dispatches": len(execute),
                     "execute_exact": int(execute["exact"].sum()), "variants": group["variant"].nunique(),
                     "exceptions": "; ".join(f"{d}: {r}" for d, r in zip(group.loc[~group["exact"], "dispatch"],
                                                                         group.loc[~group["exact"], "reason"]))})
    return pd.DataFrame(rows)


def capture_models(lowered: dict, runtime, out_root, names: dict | None = None, *, device=None,
                   echo=print) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`lowered`: {model: folder `etvk lower` wrote}. Each program captured on `runtime` into out_root/<model>
    (`capture_program`), then every dispatch replayed (`coverage`): (the coverage table, per model: its summary
    with the capture's cost — run time with and without the layer, capture and folder size, seconds to list and
    to replay)."""
    import time
    from ... import capture
    tables, costs = [], []
    for model, folder in lowered.items():
        out = Path(out_root) / model
        manifest = capture_program(runtime, lowered_program(folder), out)
        started = time.perf_counter()
        capture.open(out, names=names)
        listed_s = time.perf_counter() - started
        started = time.perf_counter()
        table = coverage(out, model, names, device=device)
        replay_s = time.perf_counter() - started
        tables.append(table)
        costs.append({"model": model, "run_s": manifest["uncaptured_s"],
                      "captured_run_s": manifest["seconds"]["program"],
                      "convert_s": manifest["seconds"]["convert"], "dump_s": manifest["seconds"]["dump"],
                      "capture_bytes": manifest["capture_bytes"], "folder_bytes": manifest["folder_bytes"],
                      "list_s": round(listed_s, 2), "replay_ms_per_dispatch": round(1e3 * replay_s / len(table), 1)})
        echo(f"{model}: {int(table['exact'].sum())} of {len(table)} dispatches exact")
    table = pd.concat(tables, ignore_index=True)
    summary = coverage_summary(table).merge(pd.DataFrame(costs), on="model", how="left")
    return table, summary
