"""Per-node Vulkan times for Google's Model Explorer (``ai-edge-model-explorer``): ET-VK's delegate graph as a
Model Explorer graph file, and the runtime's GPU µs per node as a node-data file over it.

    paths = explorer.write_node_data(profile, "out/")   # delegate-0.graph.json + delegate-0.node_data.json
    # then: model-explorer out/delegate-0.graph.json --node_data_paths=out/delegate-0.node_data.json

ExecuTorch's ETDump overlay shows no per-node time inside a Vulkan delegate: the delegate is one node of the
program. Here the graph is the delegate's own — the ExportedProgram ET-VK's ``VkGraphBuilder`` serialized (after
its fusions and TagMemoryMetaPass), converted by Model Explorer's own PyTorch adapter in the lowering's process
(:mod:`.revision`), so node ids are its fx node names — and each node's value is the sum of the GPU µs of the
dispatches whose ``delegate_node_id`` names it (ET-VK's ``DelegateMappingBuilder``, recorded by the lowering).
"""
from __future__ import annotations

import json
from pathlib import Path

GRAPH_ID = "graph"   # the id Model Explorer's PyTorch adapter gives the one graph of an ExportedProgram
GRADIENT = [{"stop": 0.0, "bgColor": "#e8f5e9"}, {"stop": 0.5, "bgColor": "#ffd54f"}, {"stop": 1.0, "bgColor": "#e53935"}]


def write_graphs(programs, out) -> list[str]:
    """Each delegate's ExportedProgram as a Model Explorer graph file (its own adapter); [] when Model Explorer is
    not installed (``pip install ai-edge-model-explorer``)."""
    try:
        from model_explorer.pytorch_exported_program_adapter_impl import PytorchExportedProgramAdapterImpl
        from model_explorer.utils import convert_adapter_response
    except ImportError:
        return []
    names = []
    for i, program in enumerate(programs):
        graphs = convert_adapter_response(PytorchExportedProgramAdapterImpl(program, {}).convert())
        name = f"delegate-{i}.graph.json"
        # Model Explorer's JSON adapter loads a list of graphs (the adapter's {"graphs": [...]} shows "Error")
        (Path(out) / name).write_text(json.dumps(graphs["graphs"]))
        names.append(name)
    return names


def node_values(profile, revision: str | None = None) -> list[dict]:
    """Per delegate: node name → GPU µs (the sum of its dispatches' medians)."""
    revision = revision or profile.revisions[0]
    program = profile.programs[revision]
    ids = program.summary.get("delegate_node_ids") or []
    rows = profile.dispatches[(profile.dispatches["revision"] == revision) &
                              profile.dispatches["delegate_node_id"].notna()]
    out = [{} for _ in ids]
    for _, r in rows.iterrows():
        key = str(int(r["delegate_node_id"]))
        for d, mapping in enumerate(ids):
            if key in mapping:
                out[d][mapping[key]] = out[d].get(mapping[key], 0.0) + float(r["gpu_us"])
                break
    return out


def node_data(values: dict, name: str) -> dict:
    """Model Explorer's node-data JSON (``model_explorer.node_data_builder``'s ModelNodeData layout)."""
    return {GRAPH_ID: {"name": name, "results": {k: {"value": round(v, 3)} for k, v in values.items()},
                       "gradient": GRADIENT}}


def write_node_data(profile, out, revision: str | None = None) -> list[Path]:
    """Writes, per delegate, the graph file (from the lowering) and its node-data file into `out`."""
    revision = revision or profile.revisions[0]
    program = profile.programs[revision]
    graphs = program.summary.get("explorer_graphs") or []
    if not graphs:
        raise RuntimeError("the lowering wrote no Model Explorer graph: install ai-edge-model-explorer "
                           "(pip install ai-edge-model-explorer) and profile again")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    device = profile.dispatches["device"].iat[0] if "device" in profile.dispatches else ""
    written = []
    for d, values in enumerate(node_values(profile, revision)):
        graph = program.folder / graphs[d]
        (out / graph.name).write_bytes(graph.read_bytes())
        path = out / f"delegate-{d}.node_data.json"
        path.write_text(json.dumps(node_data(values, f"ET-VK GPU µs ({device}, {revision})"), indent=1))
        written += [out / graph.name, path]
    return written
