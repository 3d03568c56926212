"""Notebooks: the helpers they call, and the runner that executes them headless.

Contract for every notebook in notebooks/:
- its first code cell is tagged `parameters` and assigns `FULL = False` (small sizes) and `RESULTS_DIR = None`;
  the runner injects a cell right after it (tagged `injected-parameters`) with the values of the run;
- it calls `nb.results_dir(RESULTS_DIR)` once, then `nb.export(df, name)` for each DataFrame and
  `nb.save_figure(fig, name)` for each chart people should see, so the main job collects them per device;
- it checks results with plain `assert` (or `nb.check`), so a wrong answer fails the run;
- it is committed without outputs or execution counts.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO / "notebooks"
_results_dir: Path | None = None


# --- inside a notebook ---------------------------------------------------------------------------------------
def results_dir(path=None) -> Path:
    """Set (when given) and return the folder where this notebook's exports go.

    Default: $WORKBENCH_RESULTS_DIR, else data/<device>/ for the current device."""
    global _results_dir
    if path is not None:
        _results_dir = Path(path)
    elif _results_dir is None:
        env = os.environ.get("WORKBENCH_RESULTS_DIR")
        if env:
            _results_dir = Path(env)
        else:
            from . import vk
            from .measure import default_results_dir
            _results_dir = default_results_dir(vk.get_device())
    _results_dir.mkdir(parents=True, exist_ok=True)
    return _results_dir


def metadata() -> dict:
    from . import vk
    from .measure import environment
    dev = vk.get_device()
    return {**environment(dev), "driver_version": dev.info.driver_version, "vendor": dev.info.vendor}


def export(df, name: str, **extra) -> dict:
    """Write a DataFrame as CSV and Parquet with a JSON of metadata beside it; returns the paths."""
    from .measure import atomic_write  # each file whole or not at all (a Ctrl-C or a kill mid-export)
    folder = results_dir()
    stem = folder / name
    meta = {**metadata(), **extra, "rows": len(df), "columns": [str(c) for c in df.columns]}
    atomic_write(stem.with_suffix(".csv"), lambda p: df.to_csv(p, index=False))
    atomic_write(stem.with_suffix(".parquet"), lambda p: df.to_parquet(p, index=False))
    atomic_write(stem.with_suffix(".json"), lambda p: p.write_text(json.dumps(meta, indent=2, default=str) + "\n"))
    return {"csv": stem.with_suffix(".csv"), "parquet": stem.with_suffix(".parquet"),
            "json": stem.with_suffix(".json")}


def save_figure(fig, name: str, dpi: int = 110) -> Path:
    path = results_dir() / f"{name}.png"
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


def check(condition, message: str) -> None:
    """An assertion that survives `python -O` and says what was expected."""
    if not condition:
        raise AssertionError(message)


# --- running notebooks -----------------------------------------------------------------------------------------
def notebooks() -> list[Path]:
    return sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))


#: A cell tests append to a notebook: fails when the validation layer said anything in this kernel.
VALIDATION_CHECK_CELL = (
    "from workbench.vk import validation_messages as _validation_messages\n"
    "_messages = _validation_messages()\n"
    "assert not _messages, 'validation layer reported:\\n' + '\\n'.join(_messages)\n"
    "print('validation: silent')")


def declared_parameters(path) -> list[str]:
    """The names the notebook's `parameters` cell assigns."""
    import ast

    import nbformat
    notebook = nbformat.read(Path(path), as_version=4)
    cell = next((c for c in notebook.cells
                 if c.cell_type == "code" and "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        return []
    return [t.id for node in ast.parse(cell.source).body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)]


def inject_parameters(notebook, parameters: dict):
    """Insert a cell with `parameters` after the cell tagged `parameters` (which must exist)."""
    import nbformat
    index = next((i for i, c in enumerate(notebook.cells)
                  if c.cell_type == "code" and "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if index is None:
        raise ValueError("notebook has no code cell tagged 'parameters'")
    source = "\n".join(f"{k} = {v!r}" for k, v in parameters.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    notebook.cells.insert(index + 1, cell)
    return notebook


def execute(path, *, parameters: dict | None = None, extra_cells=(), timeout: int = 1800,
            kernel_name: str = "python3"):
    """Execute a notebook top to bottom in a fresh kernel (cwd = notebooks/); returns the executed notebook.

    `extra_cells` are appended (code strings), e.g. by tests that move widgets and read back state."""
    import nbformat
    from nbclient import NotebookClient
    path = Path(path)
    notebook = nbformat.read(path, as_version=4)
    inject_parameters(notebook, parameters or {})
    for source in extra_cells:
        notebook.cells.append(nbformat.v4.new_code_cell(source))
    import tempfile

    from jupyter_client.manager import KernelManager
    with tempfile.TemporaryDirectory(prefix="workbench-kernel-") as sockets:
        # IPC sockets (local files) instead of TCP: nothing leaves the machine, and ipykernel has no reason to
        # warn "Kernel is running over TCP without encryption" on every run
        km = KernelManager(kernel_name=kernel_name, transport="ipc", ip=str(Path(sockets) / "kernel"))
        client = NotebookClient(notebook, timeout=timeout, kernel_name=kernel_name, km=km,
                                resources={"metadata": {"path": str(path.parent)}})
        # nbclient runs its own asyncio loop, which turns a Ctrl-C into a cancelled cell and carries on; run it in a
        # thread so the Ctrl-C reaches us: then end the kernel and stop
        failure = []

        def work():
            try:
                client.execute()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                failure.append(exc)
        worker = threading.Thread(target=work, name=f"notebook {path.name}", daemon=True)
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.2)
        except KeyboardInterrupt as interrupt:
            _quiet_kernel_poll()
            _kill_kernel(km)
            worker.join(30)
            interrupt.notebook = notebook
            raise
        finally:
            if km.has_kernel:  # nbclient leaves a kernel it did not start running: end it before its sockets go
                km.shutdown_kernel(now=not worker.is_alive() and bool(failure))
        if failure:  # keep what ran (outputs up to the failing cell) for the caller to save
            failure[0].notebook = notebook
            raise failure[0]
    return notebook


def _quiet_kernel_poll() -> None:
    """nbclient polls the kernel from a task that fails once the killed kernel's client is gone; asyncio reports it as
    "Task exception was never retrieved" (a traceback on stderr) whenever the task is collected. After a Ctrl-C that
    is expected: drop that one record, nothing else asyncio logs."""
    log = logging.getLogger("asyncio")
    if not any(f is _drop_kernel_poll for f in log.filters):
        log.addFilter(_drop_kernel_poll)


def _drop_kernel_poll(record: logging.LogRecord) -> bool:
    return not ("never retrieved" in str(record.msg) and "_async_poll_kernel_alive" in record.getMessage())


def _kill_kernel(km) -> None:
    process = getattr(getattr(km, "provisioner", None), "process", None)
    if process is not None and process.poll() is None:
        process.kill()


def check_parameters(selection, parameters) -> list[Path]:
    """The notebooks `selection` chooses (names containing one of its strings; all when empty), each checked to
    declare every name of `parameters`."""
    chosen = [p for p in notebooks() if not selection or any(s in p.name for s in selection)]
    if not chosen:
        raise ValueError(f"no notebook name contains any of {list(selection)}: the notebooks are "
                         f"{[p.name for p in notebooks()]}")
    for path in chosen:
        unknown = sorted(set(parameters or {}) - set(declared_parameters(path)))
        if unknown:
            raise ValueError(f"{path.name} has no parameter {', '.join(unknown)}: it declares "
                             f"{', '.join(declared_parameters(path))} (choose the notebooks that take it)")
    return chosen


def run_all(results: Path, *, full: bool = True, selection=None, show_progress: bool = True,
            parameters: dict | None = None) -> list[dict]:
    """The main job's notebook part: execute every notebook with its full parameters (and `parameters`, which
    every chosen notebook must declare), save the executed notebooks (with outputs) under results/notebooks/, and
    return one summary row per notebook. Ctrl-C saves what ran of the current notebook and raises
    KeyboardInterrupt."""
    results = Path(results)
    chosen = check_parameters(selection, parameters)
    (results / "notebooks").mkdir(parents=True, exist_ok=True)
    summary = []
    iterator = chosen
    if show_progress:
        from tqdm.auto import tqdm
        iterator = tqdm(chosen, desc="notebooks", unit="nb")
    for path in iterator:
        _run_one(path, results, full, summary, iterator if show_progress else None, parameters)
    return summary


def _run_one(path, results, full, summary, bar, parameters=None):
    """Execute one notebook, save it executed (whatever ran) and add its summary row."""
    import nbformat
    if bar is not None:
        bar.set_postfix_str(path.name)
    before = {p: p.stat().st_mtime for p in results.glob("*") if p.is_file()}
    start = time.perf_counter()
    status = "ok"
    try:
        executed = execute(path, parameters={"FULL": full, "RESULTS_DIR": str(results.resolve()),
                                             **(parameters or {})})
    except Exception as exc:  # keep going: one broken notebook must not hide the others' results
        status = f"failed: {type(exc).__name__}: {str(exc).splitlines()[-1] if str(exc) else ''}"
        executed = getattr(exc, "notebook", None)
    except KeyboardInterrupt as exc:  # save what ran, then stop
        if getattr(exc, "notebook", None) is not None:
            nbformat.write(exc.notebook, results / "notebooks" / path.name)
        raise
    if executed is not None:
        nbformat.write(executed, results / "notebooks" / path.name)
    written = sorted(p.name for p in results.glob("*") if p.is_file() and before.get(p) != p.stat().st_mtime)
    summary.append({"notebook": path.name, "status": status, "seconds": round(time.perf_counter() - start, 1),
                    "files": written})
