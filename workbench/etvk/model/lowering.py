"""ExecuTorch's real lowering: a torch model → torch.export → static int8 (pt2e) → ``VulkanPartitioner``.

The flow ET-VK's own tests use (reference ``executorch-pip.md``): ``torch.export`` → torchao's ``prepare_pt2e`` with
``XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))`` → calibrate →
``convert_pt2e`` → ``torch.export`` again → ``to_edge_transform_and_lower(ep, partitioner=[VulkanPartitioner()])``.

What the workbench reads back (:class:`Lowered`):

* the **final tagged graph** of every Vulkan delegate — the very ``ExportedProgram`` ``vulkan_preprocess`` hands to
  ``VkGraphBuilder`` after the fusion passes, ``RemoveRedundantOpsTransform`` and ``TagMemoryMetaPass`` (captured by
  wrapping ``VkGraphBuilder`` for the duration of the lowering; nothing in ExecuTorch is copied or forked);
* the storage type and memory layout ``TagMemoryMetaPass`` gave every tensor (``spec.vk_storage_type`` /
  ``spec.vk_memory_layout``) and every **transition** it inserted (recorded by wrapping its
  ``insert_transition_node``);
* the ops left on the CPU (not delegated): shown as CPU rows, never an error.

:func:`identity_ops` is the documented before/after switch for PR #19395: ``"before"`` re-registers ``clone``,
``_clone_dim_order``, ``view_copy`` and ``alias_copy`` with ``inputs_storage=ANY_STORAGE`` (float only, as before the
PR) for the duration of a ``with`` block, by swapping entries of ``op_registry.vulkan_supported_ops``.

A failure says which stage failed (:class:`LoweringError`: ``export``, ``quantize``, ``re-export``, ``lower``).
"""
from __future__ import annotations

import contextlib
import copy
import time
import warnings
from dataclasses import dataclass, field

from ...quiet import import_quietly

STAGES = ("export", "quantize", "re-export", "lower")
IDENTITY_OPS = ("clone", "_clone_dim_order", "view_copy", "alias_copy")
IDENTITY_SETTINGS = ("before", "after")


class LoweringError(RuntimeError):
    """A model failed at one stage of the lowering; ``.stage`` names it (one of :data:`STAGES`)."""

    def __init__(self, stage: str, model_name: str, cause: BaseException):
        self.stage, self.model_name, self.cause = stage, model_name, cause
        super().__init__(f"{model_name}: the '{stage}' stage failed ({type(cause).__name__}: {cause})")


def _et():
    """The ExecuTorch / torchao entry points, imported quietly once."""
    m = import_quietly
    try:
        m("executorch.exir")
        m("torchao.quantization.pt2e.quantize_pt2e")
    except ImportError as e:
        raise ImportError(f"workbench.lowering needs executorch==1.5.1 (installed --no-deps) and torchao==0.18.0, "
                          f"as setup.sh installs them: {e}") from e
    return {
        "partitioner": m("executorch.backends.vulkan.partitioner.vulkan_partitioner"),
        "registry": m("executorch.backends.vulkan.op_registry"),
        "utils": m("executorch.backends.vulkan.utils"),
        "preprocess": m("executorch.backends.vulkan.vulkan_preprocess"),
        "tag_pass": m("executorch.backends.vulkan._passes.tag_memory_meta_pass"),
        "xnnpack_quantizer": m("executorch.backends.xnnpack.quantizer.xnnpack_quantizer"),
        "pt2e": m("torchao.quantization.pt2e.quantize_pt2e"),
        "exir": m("executorch.exir"),
    }


# ---------------------------------------------------------------------------------------------------------------------
# The before/after switch (PR #19395)
# ---------------------------------------------------------------------------------------------------------------------

def _identity_targets(et):
    ops = import_quietly("executorch.exir.dialects._ops").ops
    return {"clone": ops.edge.aten.clone.default,
            "_clone_dim_order": ops.edge.dim_order_ops._clone_dim_order.default,
            "view_copy": ops.edge.aten.view_copy.default,
            "alias_copy": ops.edge.aten.alias_copy.default}


@contextlib.contextmanager
def identity_ops(setting: str = "after"):
    """Register the identity ops as before PR #19395 (``"before"``: ``ANY_STORAGE``, float only) or as ExecuTorch
    1.5.1 ships them (``"after"``: ``ANY_STORAGE_INCL_PACKED_INT8``; nothing is changed)."""
    if setting not in IDENTITY_SETTINGS:
        raise ValueError(f"identity-op setting must be one of {IDENTITY_SETTINGS}, got {setting!r}")
    et = _et()
    table = et["registry"].vulkan_supported_ops
    saved = {}
    if setting == "before":
        for name, target in _identity_targets(et).items():
            old = table[target]
            new = copy.copy(old)
            # the registered value is a TensorRepSetList: re-make it from ANY_STORAGE exactly as the constructor does
            fresh = et["registry"].OpFeatures(inputs_storage=et["utils"].ANY_STORAGE,
                                             inputs_dtypes=old.inputs_dtypes if hasattr(old, "inputs_dtypes") else None)
            new.inputs_storage = fresh.inputs_storage
            # before the PR the output repset was derived from that input repset too (OpFeatures' default): swap
            # both, else the op keeps an int8-capable output and stops syncing its input with its output
            new.outputs_storage = fresh.outputs_storage
            saved[target] = old
            table[target] = new
    try:
        yield
    finally:
        table.update(saved)


# ---------------------------------------------------------------------------------------------------------------------
# Lowering
# ---------------------------------------------------------------------------------------------------------------------

@dataclass
class Lowered:
    """One lowered model: the edge program, each delegate's final tagged graph and the transitions the pass made."""

    name: str
    setting: str
    edge: object                          # EdgeProgramManager
    tagged: list                          # one torch.fx.GraphModule per Vulkan delegate (final tagged graph)
    transitions: list                     # names of the clone nodes TagMemoryMetaPass inserted, per delegate
    seconds: dict = field(default_factory=dict)
    node_ids: list = field(default_factory=list)   # per delegate: delegate_node_id → node name (ET-VK's events)
    programs: list = field(default_factory=list)   # per delegate: the ExportedProgram VkGraphBuilder serialized

    def cpu_ops(self) -> list[str]:
        """Ops of the top-level program left on the CPU (not delegated)."""
        out = []
        for n in self.edge.exported_program().graph_module.graph.nodes:
            if n.op == "call_function" and "call_delegate" not in str(n.target) and "getitem" not in str(n.target):
                out.append(_op_name(n.target))
        return out

    def table(self):
        """One row per tensor: delegate, node, op, dtype, shape, storage, layout, transition (bool). CPU ops too."""
        import pandas as pd
        rows = []
        for d, (gm, trans) in enumerate(zip(self.tagged, self.transitions)):
            for n in gm.graph.nodes:
                if n.op not in ("call_function", "placeholder") or "val" not in n.meta:
                    continue
                val = n.meta["val"]
                if not hasattr(val, "shape"):
                    continue
                spec = n.meta.get("spec")
                rep = getattr(spec, "etvk_node_repr", None)   # the TensorRepr TagMemoryMetaPass chose
                if isinstance(rep, (list, tuple)):
                    rep = rep[0] if rep else None
                storage = getattr(rep, "storage_type", None)
                layout = getattr(rep, "memory_layout", None)
                rows.append({"delegate": d, "node": n.name,
                             "op": "input" if n.op == "placeholder" else _op_name(n.target),
                             "dtype": str(val.dtype).replace("torch.", ""), "shape": tuple(val.shape),
                             "storage": getattr(storage, "name", None), "layout": getattr(layout, "name", None),
                             "transition": n.name in trans,
                             "args": ",".join(a.name for a in n.args if hasattr(a, "name"))})
        for n in self.edge.exported_program().graph_module.graph.nodes:
            if n.op == "call_function" and "call_delegate" not in str(n.target) and "getitem" not in str(n.target):
                val = n.meta.get("val")
                rows.append({"delegate": None, "node": n.name, "op": _op_name(n.target),
                             "dtype": str(getattr(val, "dtype", "")).replace("torch.", ""),
                             "shape": tuple(getattr(val, "shape", ())), "storage": "CPU", "layout": "CPU",
                             "transition": False, "args": ",".join(a.name for a in n.args if hasattr(a, "name"))})
        return pd.DataFrame(rows)

    def counts(self) -> dict:
        """The figures of the before/after story: ops of the delegates, clones, transitions, int8 clones."""
        df = self.table()
        vk = df[df["delegate"].notna()]
        clones = vk[vk["op"].isin(["clone", "_clone_dim_order"])]
        ops = vk[vk["op"] != "input"]
        return {"model": self.name, "setting": self.setting, "delegates": len(self.tagged),
                "vulkan_ops": int(len(ops)), "cpu_ops": int((df["storage"] == "CPU").sum()),
                "transitions": int(vk["transition"].sum()), "clones": int(len(clones)),
                # each clone of a packed int8 tensor is one q8ta_clone dispatch in ET-VK's runtime (Clone.cpp)
                "int8_clones": int((clones["dtype"] == "int8").sum()),
                "q8ta_pixel_shuffle": int((vk["op"] == "q8ta_pixel_shuffle").sum()),
                "pixel_shuffle": int((vk["op"] == "pixel_shuffle").sum()),
                "q8ta_add": int((vk["op"] == "q8ta_add").sum()),
                "lower_s": round(self.seconds.get("lower", float("nan")), 3)}


def _op_name(target) -> str:
    s = getattr(target, "__name__", None) or str(target)
    # "aten.clone.default" → "clone"; "et_vk.q8ta_conv2d_pw.default" → "q8ta_conv2d_pw"
    parts = s.replace("::", ".").split(".")
    if parts[-1] in ("default", "Tensor", "self", "int", "out", "dims") and len(parts) > 1:
        parts = parts[:-1]
    return parts[-1]


def quantize(model, example, calibration=None, name: str | None = None):
    """Export → prepare_pt2e (XNNPACKQuantizer, symmetric per-channel) → calibrate → convert_pt2e → export."""
    import torch
    et = _et()
    name = name or type(model).__name__
    model = model.eval()
    try:
        captured = torch.export.export(model, example).module()
    except Exception as e:
        raise LoweringError("export", name, e) from e
    try:
        xq = et["xnnpack_quantizer"]
        quantizer = xq.XNNPACKQuantizer().set_global(xq.get_symmetric_quantization_config(is_per_channel=True))
        prepared = et["pt2e"].prepare_pt2e(captured, quantizer)
        with torch.no_grad():
            for batch in (calibration or [example]):
                prepared(*batch)
        converted = et["pt2e"].convert_pt2e(prepared)
    except Exception as e:
        raise LoweringError("quantize", name, e) from e
    try:
        return torch.export.export(converted, example)
    except Exception as e:
        raise LoweringError("re-export", name, e) from e


@contextlib.contextmanager
def _capture(et):
    """Record each delegate's final tagged graph, the transitions TagMemoryMetaPass inserts and the delegate debug
    identifiers ET-VK's graph builder gives its nodes (``DelegateMappingBuilder``: the ``delegate_node_id`` of the
    runtime's events), for one lowering."""
    pre, tag = et["preprocess"], et["tag_pass"]
    mapping = import_quietly("executorch.exir.backend.utils").DelegateMappingBuilder
    graphs, transitions, node_ids, programs = [], [], [], []
    real_builder, real_insert, real_entry = pre.VkGraphBuilder, tag.insert_transition_node, \
        mapping.insert_delegate_mapping_entry

    def builder(program, *args, **kwargs):
        graphs.append(program.graph_module)
        programs.append(program)
        node_ids.append({})
        return real_builder(program, *args, **kwargs)

    def insert(*args, **kwargs):
        node = real_insert(*args, **kwargs)
        while len(transitions) <= len(graphs):     # the delegate being preprocessed is number len(graphs)
            transitions.append(set())
        transitions[len(graphs)].add(node.name)
        return node

    def entry(self, nodes=None, *args, **kwargs):
        identifier = real_entry(self, nodes, *args, **kwargs)
        if node_ids and nodes is not None:
            first = nodes[0] if isinstance(nodes, (list, tuple)) else nodes
            node_ids[-1][int(identifier)] = getattr(first, "name", str(first))
        return identifier

    pre.VkGraphBuilder, tag.insert_transition_node, mapping.insert_delegate_mapping_entry = builder, insert, entry
    try:
        yield graphs, transitions, node_ids, programs
    finally:
        pre.VkGraphBuilder, tag.insert_transition_node = real_builder, real_insert
        mapping.insert_delegate_mapping_entry = real_entry
        while len(transitions) < len(graphs):
            transitions.append(set())


def lower(model, example, setting: str = "after", name: str | None = None, exported=None) -> Lowered:
    """Quantize (unless ``exported`` is given) and lower ``model`` with ``VulkanPartitioner`` under ``setting``."""
    et = _et()
    name = name or type(model).__name__
    seconds = {}
    if exported is None:
        t = time.perf_counter()
        exported = quantize(model, example, name=name)
        seconds["quantize"] = time.perf_counter() - t
    t = time.perf_counter()
    try:
        with identity_ops(setting), _capture(et) as (graphs, transitions, node_ids, programs), \
                import_quietly_ctx():
            edge = et["exir"].to_edge_transform_and_lower(
                exported, partitioner=[et["partitioner"].VulkanPartitioner()])
    except Exception as e:
        raise LoweringError("lower", name, e) from e
    seconds["lower"] = time.perf_counter() - t
    return Lowered(name, setting, edge, graphs, transitions[:len(graphs)], seconds, node_ids, programs)


def import_quietly_ctx():
    from ...quiet import quiet_imports
    return quiet_imports()


def compare_settings(model, example, name: str | None = None):
    """Lower one quantized model under both identity-op settings; returns ``{setting: Lowered}``."""
    name = name or type(model).__name__
    exported = quantize(model, example, name=name)
    out = {}
    for s in IDENTITY_SETTINGS:
        with warnings.catch_warnings():     # torch's own LeafSpec deprecation, raised by deep-copying a program
            warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
            ep = copy.deepcopy(exported)
        out[s] = lower(model, example, s, name=name, exported=ep)
    return out
