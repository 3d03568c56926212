"""The import structure, the house's plan: the runtime (vk) at the bottom; kernels on it, knowing only layouts, quant
and the shader toolchain; measurement (workbench.measure) knowing only the runtime; benchmarks above both; no
import cycle anywhere; statistics collection (workbench.vendors.mesa) knows no kernel. Imports inside functions count: a
function-level import is still a dependency."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(name: str, path: Path, known) -> set[str]:
    """Every workbench module `path` imports, at module level or inside functions."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import sub` imports the submodule pkg.sub where one exists, else names from pkg
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import workbench.vk.spirv as s` → workbench.vk.spirv
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def reachable(g, start) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in g.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_graph_sees_function_level_imports():
    g = graph()
    # benchmarks.conv imports compilers.mesa at module level; etvk.run imports it inside a function
    assert "workbench.vendors.mesa" in g["workbench.benchmarks.conv"]
    assert "workbench.vendors.mesa" in g["workbench.etvk.run"]
    assert "workbench.kernels.conv_pw" in g["workbench.graphs.graph_exec"]


def strongly_connected(g) -> list[list[str]]:
    """The import cycles: every strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_anywhere():
    assert strongly_connected(graph()) == []


# The packages in order, top to bottom: an import may only point down this list (or stay inside its own package).
# The DEVELOPERS.md architecture section and the README's picture follow it.
ORDER = ("cli", "notebook", "report", "tune", "fanout", "viz", "benchmarks", "graphs", "etvk", "capture", "catalogue",
         "checks", "ops", "kernels", "measure", "vendors", "toolchain", "layouts", "quant", "quiet", "vk")


def room(module: str) -> str | None:
    """The top-level package (or module) of workbench that `module` lives in; None for workbench itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def arrows_back_up(g) -> list[str]:
    rank = {name: i for i, name in enumerate(ORDER)}
    found = []
    for module, targets in sorted(g.items()):
        for target in sorted(targets):
            a, b = room(module), room(target)
            if a is None or b is None or a == b:
                continue
            if rank[b] <= rank[a]:
                found.append(f"{module} -> {target} ({a} is above {b} in ORDER)")
    return found


def test_every_package_has_its_place_in_the_order():
    rooms = {room(m) for m in graph()} - {None, "__main__"}
    assert not rooms - set(ORDER), f"place these in ORDER: {sorted(rooms - set(ORDER))}"


def test_no_import_runs_back_up_between_packages():
    g = graph()
    assert arrows_back_up(g) == []
    # the check sees real arrows: one down (etvk → measure) and one that would run back up if added
    assert "workbench.measure" in g["workbench.etvk.run"]
    assert arrows_back_up({"workbench.vk.device": {"workbench.kernels.copy"}}) != []


# What a kernel module may import: the layouts, the quantization references, the shader toolchain, the runtime,
# other kernel modules, the import-noise filter (torchao's references are imported through it), and the GPU's clocks
# (device state, not a way of measuring: the device limits fall back to NVML's clock).
KERNEL_MAY_IMPORT = ("workbench.layouts", "workbench.quant", "workbench.toolchain.shaders", "workbench.vk", "workbench.kernels",
                     "workbench.quiet", "workbench.measure.clocks")


def _within(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_kernels_know_nothing_of_measurement():
    g = graph()
    wrong = {m: sorted(t for t in targets if not _within(t, KERNEL_MAY_IMPORT))
             for m, targets in g.items() if _within(m, ("workbench.kernels",))}
    assert not {m: t for m, t in wrong.items() if t}, wrong


def test_measurement_knows_only_the_runtime():
    g = graph()
    measure = [m for m in g if _within(m, ("workbench.measure",))]
    assert len(measure) > 1 and all(_within(t, ("workbench.vk", "workbench.measure")) or t == "workbench"
                                    for m in measure for t in g[m]), {m: g[m] for m in measure}
    # and nothing below the benchmarks reaches up to them
    below = [m for m in g if _within(m, ("workbench.kernels", "workbench.measure", "workbench.vk", "workbench.toolchain.shaders",
                                         "workbench.layouts", "workbench.quant"))]
    up = {m: sorted(t for t in g[m] if _within(t, ("workbench.benchmarks", "workbench.cli"))) for m in below}
    assert not {m: t for m, t in up.items() if t}, up


def test_nothing_imports_the_command_line():
    """The command line is the top layer: no library module imports workbench.cli (workbench.etvk once did, through
    etvk/cli.py, in a cycle with it)."""
    g = graph()
    users = {m: sorted(t for t in targets if _within(t, ("workbench.cli",)))
             for m, targets in g.items() if not _within(m, ("workbench.cli",))}
    assert not {m: t for m, t in users.items() if t}, users
    assert "workbench.etvk" in g["workbench.cli.etvk"]  # the graph sees the command line's own imports


def test_suites_are_function_references():
    from workbench.benchmarks import SUITES, suite
    assert SUITES and all(callable(fn) for fn in SUITES.values())
    assert all(fn.__module__.startswith("workbench.benchmarks.") for fn in SUITES.values())
    with pytest.raises(ValueError, match="unknown benchmark suite 'nope'; suites: "):
        suite("nope")


@pytest.mark.parametrize("stats_module", ["workbench.vendors.mesa", "workbench.vendors.mesa_worker"])
def test_statistics_collection_knows_no_kernel(stats_module):
    needs = reachable(graph(), stats_module)
    kernel_side = sorted(m for m in needs if m.startswith(("workbench.kernels", "workbench.etvk", "workbench.viz",
                                                            "workbench.ops")))
    assert not kernel_side, f"{stats_module} imports (directly or not) {kernel_side}"


def test_no_import_cycle_through_the_compilers_or_conv_pw():
    g = graph()
    for name in ("workbench.vendors.mesa", "workbench.kernels.conv_pw", "workbench.benchmarks.conv_vendors"):
        cycle = [m for m in g[name] if name in reachable(g, m) or m == name]
        assert not cycle, f"{name} is in an import cycle through {cycle}"


def test_importing_the_compilers_loads_no_kernel_module():
    code = ("import sys, workbench.vendors.mesa as a; "
            "print(sorted(m for m in sys.modules if m.startswith(('workbench.kernels', 'workbench.etvk'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent)
    assert out.stdout.strip() == "[]", out.stdout


def vulkan_importers() -> dict[str, list[int]]:
    """Modules that import the `vulkan` binding (at module level or inside functions, `importlib` included), with
    the lines that do."""
    found = {}
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = [node.module or ""] if not node.level else []
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__"):
                targets = [str(node.args[0].value)]
            else:
                continue
            if any(t.split(".")[0] == "vulkan" for t in targets):
                found.setdefault(name, []).append(node.lineno)
    return found


def test_the_runtime_is_the_only_door_to_vulkan():
    importers = vulkan_importers()
    assert {"workbench.vk.device", "workbench.vk.churn"} <= set(importers)  # module level, inside a function
    outside = {m: lines for m, lines in importers.items() if not (m == "workbench.vk" or m.startswith("workbench.vk."))}
    assert not outside, f"only workbench.vk may import the vulkan binding; these do (module: lines): {outside}"


def test_every_command_family_registers_the_same_way():
    import argparse

    from workbench import cli
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    for family in cli.FAMILIES:
        assert callable(family.register), family.__name__
        family.register(sub)
    assert {"devices", "bench", "roofline-check", "sweep", "join", "layout", "main", "compilers", "adreno", "etvk"} <= \
        set(sub.choices)
