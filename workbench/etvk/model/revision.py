"""ET-VK's Python at the user's revision — its partitioner, passes and serializer — lowering a model to a ``.pte``.

    from workbench.etvk.model import revision
    program = revision.lower("refinenet_like", executorch="/path/to/executorch", rev="24da2f65cd", out_dir=...)
    program.pte, program.inputs, program.reference, program.summary

Why a child process
    ``executorch.backends.vulkan`` of the revision must replace the installed wheel's, and ET-VK registers its
    custom ops (``et_vk::…``) with torch when imported: two revisions (or a revision and the wheel) cannot be
    imported into one process. So each lowering runs in ``python -m workbench.etvk.model.revision``, where, before
    anything imports ET-VK, the revision's ``backends/`` folder (only ``backends/vulkan`` in it) is put first on
    ``executorch.backends.__path__``. The rest of ExecuTorch (exir, devtools, the XNNPACK quantizer) is the
    installed wheel's; a revision whose ET-VK Python needs a newer exir than the wheel fails with the import error,
    named. The summary records the ``__file__`` ET-VK was imported from, so a row can prove which code lowered it.

What the child writes (``out_dir``)
    ``model.pte``; ``input-<i>.bin`` (the raw bytes ``executor_runner --inputs`` reads) and ``inputs.pt``;
    ``reference.pt`` (the quantized model's output in torch, the reference for the runtime's output);
    ``summary.json`` (revision, ET-VK's file, counts from :class:`~workbench.etvk.model.lowering.Lowered`, the
    per-delegate table as records, seconds).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..codegen import CheckoutError, cached_folder, run_git, checkout_path, resolve_revision


class RevisionLoweringError(RuntimeError):
    """Lowering with a revision's ET-VK Python failed; the child's last lines say where."""


@dataclass
class Program:
    pte: Path
    inputs: list            # raw input files, in order
    reference: Path         # torch's output of the quantized model (torch.save'd list of tensors)
    summary: dict

    @property
    def folder(self) -> Path:
        return self.pte.parent


def python_tree(executorch=None, rev: str | None = None) -> tuple[Path, str, str]:
    """(a folder whose ``backends/vulkan`` is ET-VK's Python at `rev`, its commit, its label). The working tree is
    linked (edits count); a revision is exported once with ``git archive`` into the cache."""
    root = checkout_path(executorch)
    base = Path(os.environ.get("WORKBENCH_ETVK_CACHE") or Path.home() / ".cache" / "workbench" / "etvk")
    if rev is None:
        head = run_git(root, "rev-parse", "HEAD")
        overlay = base / "python" / "working-tree" / hashlib_path(root)
        link = overlay / "backends" / "vulkan"
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(root / "backends" / "vulkan", target_is_directory=True)
        return overlay, head.stdout.strip() if head.returncode == 0 else "unversioned", "working tree"
    commit = resolve_revision(root, rev)

    def fill(folder: Path) -> None:
        import io
        import tarfile
        result = run_git(root, "archive", "--format=tar", commit, "backends/vulkan", binary=True)
        if result.returncode != 0:
            raise CheckoutError(f"git archive of backends/vulkan at {commit[:10]} failed: "
                                f"{result.stderr.decode(errors='replace').strip()}")
        with tarfile.open(fileobj=io.BytesIO(result.stdout)) as tar:
            tar.extractall(folder, filter="data",
                           members=[m for m in tar.getmembers() if "/third-party/" not in m.name])

    return cached_folder(base / "python" / commit, fill), commit, rev


def hashlib_path(path: Path) -> str:
    import hashlib
    return hashlib.sha256(str(path).encode()).hexdigest()[:12]



def run_child(module: str, args: list, marker: Path, timeout: float, error, what: str, tail_lines: int = 12) -> None:
    """`python -m module args…` with this workbench on its path (a lowering in its own process: module docstring);
    `error` (an exception class) names `what` when it runs over `timeout`, fails, or leaves no `marker` file."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).parents[3]),
                                                                    os.environ.get("PYTHONPATH")])))
    try:
        proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        raise error(f"{what} took over {timeout:.0f} s") from e
    if proc.returncode != 0 or not marker.is_file():
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-tail_lines:])
        raise error(f"{what} failed (exit {proc.returncode}):\n{tail}")

def lower(model: str, *, executorch=None, rev: str | None = None, out_dir, model_kwargs: dict | None = None,
          setting: str = "after", seed: int = 0, timeout: float = 1800) -> Program:
    """Lower zoo model `model` (a name in :data:`workbench.etvk.model.zoo.MODELS`) with ET-VK's Python at `rev`
    in a child process; returns the :class:`Program` it wrote into `out_dir`."""
    from . import zoo
    if model not in zoo.MODELS:
        raise ValueError(f"unknown model {model!r}; expected one of {sorted(zoo.MODELS)}")
    tree, commit, label = python_tree(executorch, rev)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in list(out.glob("input-*.bin")) + [out / "model.pte", out / "summary.json"]:
        stale.unlink(missing_ok=True)
    run_child("workbench.etvk.model.revision",
              ["--tree", str(tree), "--commit", commit, "--label", label, "--model", model, "--kwargs",
               json.dumps(model_kwargs or {}), "--setting", setting, "--seed", str(seed), "--out", str(out)],
              out / "summary.json", timeout, RevisionLoweringError,
              f"lowering {model} with ET-VK's Python at {label} ({commit[:10]})")
    summary = json.loads((out / "summary.json").read_text())
    inputs = [out / name for name in summary["input_files"]]
    return Program(out / "model.pte", inputs, out / "reference.pt", summary)


# ---------------------------------------------------------------------------------------------------------------------
# The child

def _child(args) -> int:
    tree = Path(args.tree)
    import executorch.backends as backends  # the wheel's namespace; the revision's vulkan goes first on its path
    backends.__path__.insert(0, str(tree / "backends"))
    import torch
    from ...quiet import import_quietly
    vulkan = import_quietly("executorch.backends.vulkan")
    imported = Path(os.path.abspath(vulkan.__file__)).parent
    origin = str(imported.resolve())  # the working tree's overlay is a link to the checkout: name the checkout
    if imported != Path(os.path.abspath(tree / "backends" / "vulkan")):
        raise SystemExit(f"ET-VK was imported from {imported}, not from the revision's tree {tree}")
    from . import lowering, zoo
    torch.manual_seed(args.seed)
    model, example = zoo.make(args.model, **json.loads(args.kwargs))
    t = time.perf_counter()
    exported = lowering.quantize(model, example, name=args.model)
    quantize_s = time.perf_counter() - t
    lowered = lowering.lower(model, example, args.setting, name=args.model, exported=exported)
    t = time.perf_counter()
    program = lowered.edge.to_executorch()
    out = Path(args.out)
    (out / "model.pte").write_bytes(program.buffer)
    to_executorch_s = time.perf_counter() - t
    with torch.no_grad():
        reference = exported.module()(*example)
    reference = list(reference) if isinstance(reference, (tuple, list)) else [reference]
    torch.save([r.detach().contiguous() for r in reference], out / "reference.pt")
    torch.save([x.contiguous() for x in example], out / "inputs.pt")
    names = []
    for i, x in enumerate(example):
        name = f"input-{i}.bin"
        (out / name).write_bytes(x.contiguous().numpy().tobytes())
        names.append(name)
    table = lowered.table()
    nodes = _node_info(lowered)
    from .explorer import write_graphs
    graph_files = write_graphs(lowered.programs, out)
    summary = {"model": args.model, "kwargs": json.loads(args.kwargs), "setting": args.setting,
               "revision": args.label, "commit": args.commit, "etvk_python": origin,
               "input_shapes": [list(x.shape) for x in example], "input_dtypes": [str(x.dtype) for x in example],
               "input_files": names, "output_shapes": [list(r.shape) for r in reference],
               "output_dtypes": [str(r.dtype) for r in reference],
               "counts": lowered.counts(), "cpu_ops": lowered.cpu_ops(),
               "delegate_node_ids": [{str(k): v for k, v in ids.items()} for ids in lowered.node_ids],
               "nodes": nodes, "explorer_graphs": graph_files,
               "table": json.loads(table.astype({"shape": str}).to_json(orient="records")),
               "seconds": {"quantize": round(quantize_s, 2), "lower": round(lowered.seconds.get("lower", 0), 2),
                           "to_executorch": round(to_executorch_s, 2)},
               "pte_bytes": len(program.buffer)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return 0


def _layout(node) -> str | None:
    spec = node.meta.get("spec") if hasattr(node, "meta") else None
    rep = getattr(spec, "etvk_node_repr", None)
    if isinstance(rep, (list, tuple)):
        rep = rep[0] if rep else None
    layout = getattr(rep, "memory_layout", None)
    return getattr(layout, "name", None)


def _node_info(lowered) -> dict:
    """Per delegate node name: op, its output's and tensor inputs' layouts (TagMemoryMetaPass's tags) and its
    scalar arguments — what the drill-down needs beyond the runtime event's sizes."""
    out = {}
    for gm in lowered.tagged:
        for n in gm.graph.nodes:
            if n.op != "call_function":
                continue
            scalars = [a if isinstance(a, (int, float, str, bool)) or a is None else
                       (list(a) if isinstance(a, (list, tuple)) and all(isinstance(v, (int, float)) for v in a)
                        else "<node>") for a in n.args]
            out[n.name] = {"op": getattr(n.target, "__name__", str(n.target)), "layout": _layout(n),
                           "input_layouts": [_layout(a) for a in n.args if hasattr(a, "meta")],
                           "scalars": scalars}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m workbench.etvk.model.revision",
                                description="lower one zoo model with ET-VK's Python from a revision's tree")
    p.add_argument("--tree", required=True)
    p.add_argument("--commit", required=True)
    p.add_argument("--label", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--kwargs", default="{}")
    p.add_argument("--setting", default="after")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    return _child(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
