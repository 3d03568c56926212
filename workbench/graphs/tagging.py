"""ExecuTorch's real ``TagMemoryMetaPass`` on a workbench int8 graph (``workbench.int8_graph.Graph``).

:func:`to_fx` writes the graph as an edge-dialect fx graph with the ops and arguments ExecuTorch 1.5.1 defines
(``et_vk.q8ta_conv2d_pw``, ``et_vk.q8ta_pixel_shuffle``, ``et_vk.q8ta_add``, ``quantized_decomposed.*_per_tensor``,
``aten.pixel_shuffle`` / ``clone`` / ``view_copy`` / ``alias_copy``, ``dim_order_ops._clone_dim_order``), every
tensor with a FakeTensor value and a TensorSpec.  A conv's prepacked arguments (weights, weight sums, weight scales,
bias) are placeholders marked ``etvk_tensorref`` — the mark ``insert_prepack_nodes`` gives constant tensors in
``vulkan_preprocess``, which the tagging pass reads to leave them alone.

:func:`tag` runs the real pass under an identity-op setting (``workbench.lowering.identity_ops``: ``"before"`` /
``"after"`` PR #19395) and returns every node's representation and the transitions it inserted; :func:`tagged`
returns a copy of the graph carrying them (reprs in the workbench's layout names, one :data:`~workbench.int8_graph.
TRANSITION` node per inserted clone, where the pass put it), ready for ``workbench.graph_exec.execute``.
``remove_redundant_first=True`` runs ExecuTorch's ``RemoveRedundantOpsTransform`` before tagging, as
``vulkan_preprocess`` orders them (it drops same-shape clones / ``_clone_dim_order`` / ``alias_copy``, never
``view_copy``); by default the graph reaches the tagging pass as written.
"""
from __future__ import annotations

from .int8_graph import (TRANSITION, Graph, Node, Repr)
from ..quiet import import_quietly

TEXTURE_LIMITS = (16384, 16384, 2048)
SETTINGS = ("before", "after")
_STORAGE = {"BUFFER": "buffer", "TEXTURE_3D": "texture"}
_LAYOUT = {"TENSOR_WIDTH_PACKED": "WIDTH_PACKED", "TENSOR_HEIGHT_PACKED": "HEIGHT_PACKED",
           "TENSOR_CHANNELS_PACKED": "CHANNELS_PACKED", "PACKED_INT8_4W4C": "4W4C", "PACKED_INT8_4H4W": "4H4W",
           "PACKED_INT8_4W": "4W", "PACKED_INT8_4C": "4C", "PACKED_INT8_4C1W": "4C1W",
           "PACKED_INT8_CONV2D": "CONV2D"}
#: ET-VK resolves PACKED_INT8_CONV2D per device at load time (4C1W or 4C, reference §1.11); executed as 4C1W.
CONV2D_AS = "4C1W"


def _conv_constants(fg, mode, node):
    """The prepacked arguments of ``q8ta_conv2d_pw`` as ExecuTorch's conv pattern makes them: int8 weights
    (OC × IC, IC padded to a multiple of 4), int32 weight sums, fp32 scales and bias (OC padded to 4)."""
    import torch
    TensorSpec = import_quietly("executorch.exir.tensor").TensorSpec
    p = node.params
    oc, ic = p["weight"].shape[0], int(node.args[0].sizes[1])
    oc4, ic4 = -(-oc // 4) * 4, -(-ic // 4) * 4
    shapes = {"weight": ((oc, ic4), torch.int8), "weight_sums": ((oc4,), torch.int32),
              "weight_scales": ((oc4,), torch.float32)}
    if p.get("bias") is not None:
        shapes["bias"] = ((oc4,), torch.float32)
    out = {}
    for key, (shape, dtype) in shapes.items():
        c = fg.placeholder(f"{node.name}_{key}")
        with mode:
            c.meta["val"] = torch.empty(shape, dtype=dtype)
        c.meta["spec"] = TensorSpec.from_tensor(c.meta["val"], const=True)
        c.meta["etvk_tensorref"] = True     # what insert_prepack_nodes marks; the tagging pass skips such nodes
        out[key] = c
    return out


def to_fx(graph: Graph):
    """(GraphModule, {graph node name: fx node}) for a workbench int8 graph."""
    import torch
    from torch import fx
    from torch._subclasses.fake_tensor import FakeTensorMode
    import_quietly("executorch.backends.vulkan.custom_ops_lib")     # defines the et_vk ops
    E = import_quietly("executorch.exir.dialects._ops").ops.edge
    TensorSpec = import_quietly("executorch.exir.tensor").TensorSpec
    mode = FakeTensorMode()
    fg, env = fx.Graph(), {}
    for n in graph.nodes:
        p = n.params
        a = [env[x.name] for x in n.args]
        if n.op == "input":
            v = fg.placeholder(n.name)
        elif n.op in ("quantize_per_tensor", "dequantize_per_tensor"):
            target = getattr(E.quantized_decomposed, n.op).default
            v = fg.call_function(target, (a[0], float(p["scale"]), int(p["zero_point"]), -128, 127, torch.int8))
        elif n.op == "q8ta_conv2d_pw":
            c = _conv_constants(fg, mode, n)
            v = fg.call_function(E.et_vk.q8ta_conv2d_pw.default,
                                 (a[0], float(p["input_scale"]), int(p["input_zero_point"]), c["weight"],
                                  c["weight_sums"], c["weight_scales"], float(p["output_scale"]),
                                  int(p["output_zero_point"]), c.get("bias"), [1, 1], [1, 1], [0, 0], [1, 1], 1,
                                  "relu" if p.get("relu") else "none"))
        elif n.op == "q8ta_pixel_shuffle":
            v = fg.call_function(E.et_vk.q8ta_pixel_shuffle.default,
                                 (a[0], float(p["input_scale"]), int(p["input_zero_point"]),
                                  1.0 / float(p["output_scale"]), int(p["output_zero_point"]),
                                  int(p["upscale_factor"])))
        elif n.op == "pixel_shuffle":
            v = fg.call_function(E.aten.pixel_shuffle.default, (a[0], int(p["upscale_factor"])))
        elif n.op == "q8ta_add":
            (sa, za), (sb, zb) = n.args[0].qparams, n.args[1].qparams
            v = fg.call_function(E.et_vk.q8ta_add.default, (a[0], a[1], sa, za, sb, zb, float(p["output_scale"]),
                                                            int(p["output_zero_point"]), 1.0))
        elif n.op == "clone":
            v = fg.call_function(E.aten.clone.default, (a[0],))
        elif n.op == "_clone_dim_order":
            v = fg.call_function(E.dim_order_ops._clone_dim_order.default, (a[0],))
        elif n.op == "alias_copy":
            v = fg.call_function(E.aten.alias_copy.default, (a[0],))
        elif n.op == "view_copy":
            v = fg.call_function(E.aten.view_copy.default, (a[0], list(n.sizes)))
        else:
            raise NotImplementedError(f"{n.name}: {n.op} is not written to the real pass's graph")
        with mode:
            v.meta["val"] = torch.empty(n.sizes, dtype=torch.int8 if n.dtype == "int8" else torch.float32)
        v.meta["spec"] = TensorSpec.from_tensor(v.meta["val"])
        env[n.name] = v
    fg.output(tuple(env[o.name] for o in graph.outputs))
    return fx.GraphModule(torch.nn.Module(), fg), env


def _etvk_repr(node):
    """(storage, layout) in ET-VK's terms shortened (``CONV2D`` kept), or None."""
    r = getattr(node.meta["spec"], "etvk_node_repr", None)
    return (_STORAGE[r.storage_type.name], _LAYOUT[r.memory_layout.name]) if r is not None else None


def _run(graph: Graph, setting: str, remove_redundant_first: bool):
    """The tagged GraphModule, the graph-name ↔ fx-node map and the transition nodes the pass inserted."""
    from ..etvk.model.lowering import identity_ops
    if setting not in SETTINGS:
        raise ValueError(f"identity-op setting must be one of {SETTINGS}, got {setting!r}")
    tagmod = import_quietly("executorch.backends.vulkan._passes.tag_memory_meta_pass")
    gm, env = to_fx(graph)
    if remove_redundant_first:
        rr = import_quietly("executorch.backends.vulkan._passes.remove_redundant_ops")
        rr.RemoveRedundantOpsTransform().call(gm)
    made = []
    real_insert = tagmod.insert_transition_node

    def insert(*args, **kwargs):
        node = real_insert(*args, **kwargs)
        made.append(node)
        return node

    tagmod.insert_transition_node = insert
    try:
        with identity_ops(setting):
            tagmod.TagMemoryMetaPass(TEXTURE_LIMITS).call(gm)
    finally:
        tagmod.insert_transition_node = real_insert
    return gm, env, made


def tag(graph: Graph, setting: str = "after", remove_redundant_first: bool = False):
    """Run ExecuTorch's TagMemoryMetaPass on ``graph``.  Returns (reprs {node name: (storage, layout)},
    transitions [(source node name, storage, layout)], sorted); layouts in ET-VK's names shortened (``4W4C``,
    ``CONV2D``, ``WIDTH_PACKED``...); nodes removed before tagging are absent."""
    gm, env, made = _run(graph, setting, remove_redundant_first)
    live = set(gm.graph.nodes)
    back = {v: k for k, v in env.items() if v in live}
    reprs = {back[n]: _etvk_repr(n) for n in gm.graph.nodes if n in back}
    transitions = sorted((back.get(t.args[0], t.args[0].name),) + _etvk_repr(t) for t in made)
    return reprs, transitions


def _workbench_repr(node):
    r = _etvk_repr(node)
    if r is None:
        return None
    return Repr(r[0], CONV2D_AS if r[1] == "CONV2D" else r[1])


def tagged(graph: Graph, setting: str = "after", remove_redundant_first: bool = False) -> Graph:
    """A copy of ``graph`` tagged by ExecuTorch's real pass: every node's :class:`~workbench.int8_graph.Repr`
    (``PACKED_INT8_CONV2D`` as :data:`CONV2D_AS`) and one ``TRANSITION`` node per clone the pass inserted, in the
    pass's graph order, its users re-wired to it."""
    from torch import fx
    gm, env, made = _run(graph, setting, remove_redundant_first)
    back = {v: k for k, v in env.items()}
    by_name = {n.name: n for n in graph.nodes}
    inserted = set(made)
    out = Graph(graph.name)
    out._names = set(graph._names)
    new = {}
    for f in gm.graph.nodes:
        if f.op == "output":
            outs = f.args[0] if isinstance(f.args[0], (tuple, list)) else (f.args[0],)
            out.outputs = [new[o] for o in outs]
            continue
        if f in back:
            h = by_name[back[f]]
            args = [new[a] for a in f.args if isinstance(a, fx.Node) and a in new]
            n = Node(h.name, h.op, args, dict(h.params), h.sizes, h.dtype, h.qparams, _workbench_repr(f))
        elif f in inserted:
            src = new[f.args[0]]
            n = Node(out._unique(f"clone_{src.name}"), TRANSITION, [src], {}, src.sizes, src.dtype, src.qparams,
                     _workbench_repr(f))
        else:
            continue   # a conv's constant arguments
        new[f] = n
        out.nodes.append(n)
    return out


def compare_settings(graph: Graph, remove_redundant_first: bool = False):
    """The real pass's counts under both identity-op settings → DataFrame, one row per setting: transitions, the
    identity ops left, and how many of those change representation (a copy at runtime)."""
    import pandas as pd
    from .int8_graph import IDENTITY_OPS
    rows = []
    for s in SETTINGS:
        g = tagged(graph, s, remove_redundant_first)
        ident = [n for n in g.nodes if n.op in IDENTITY_OPS]
        rows.append({"graph": graph.name, "setting": s, "transitions": len(g.transitions()),
                     "identity_ops": len(ident),
                     "identity_ops_changing_repr": sum(n.repr != n.args[0].repr for n in ident),
                     "ops": sum(n.op not in IDENTITY_OPS and n.op not in ("input", TRANSITION) for n in g.nodes),
                     "remove_redundant_first": remove_redundant_first})
    return pd.DataFrame(rows)


def random_graph(rng, max_ops: int = 7):
    """A random int8 graph of pixel shuffles, quantized adds, pointwise convs and identity ops (``rng``:
    random.Random)."""
    import numpy as np
    g = Graph("random")
    nodes = [g.input("x", (rng.choice([1, 2]), rng.choice([16, 32]), rng.choice([3, 4]), rng.choice([4, 5])),
                     "int8", (0.1, 0))]
    for _ in range(rng.randint(2, max_ops)):
        a = rng.choice(nodes)
        op = rng.choice(["q8ta_pixel_shuffle", "clone", "_clone_dim_order", "alias_copy", "view_copy", "q8ta_add",
                         "q8ta_conv2d_pw"])
        if op == "q8ta_pixel_shuffle":
            if a.sizes[1] % 4:
                continue
            n = g.call(op, a, upscale_factor=2, input_scale=a.qparams[0], input_zero_point=a.qparams[1],
                       output_scale=rng.choice([a.qparams[0], 0.05]), output_zero_point=rng.choice([0, 1]))
        elif op == "q8ta_add":
            n = g.call(op, a, rng.choice([b for b in nodes if b.sizes == a.sizes]), output_scale=0.2,
                       output_zero_point=0)
        elif op == "q8ta_conv2d_pw":
            cin, cout = a.sizes[1], rng.choice([8, 16])
            w = np.asarray([[rng.randint(-127, 127) for _ in range(cin)] for _ in range(cout)], np.int8)
            n = g.call(op, a, weight=w, weight_scales=np.full(cout, 0.002, np.float32),
                       bias=np.linspace(-0.1, 0.1, cout, dtype=np.float32), input_scale=a.qparams[0],
                       input_zero_point=a.qparams[1], output_scale=0.1, output_zero_point=rng.choice([0, -1]),
                       relu=rng.random() < 0.5)
        else:
            n = g.call(op, a)
        nodes.append(n)
    return g.output(nodes[-1])


#: ET-VK's named representation sets shown by :func:`repsets` (``executorch.backends.vulkan.utils``).
REPSET_NAMES = ("ANY_STORAGE", "ANY_STORAGE_INCL_PACKED_INT8", "PACKED_INT8_BUFFER",
                "PACKED_INT8_CHANNELS_PACKED_BUFFER", "PACKED_INT8_4W4C_BUFFER",
                "CHANNELS_PACKED_TEXTURE_OR_CONTIGUOUS_BUFFER", "NO_STORAGE")


def repsets():
    """ET-VK's own ``TensorRepSet`` objects (not a copy) → DataFrame: the buffer and texture layouts each allows,
    whether it is constrained, and the representation ``make_tensor_repr`` picks from it (texture first, then the
    first layout in the set's iteration order)."""
    import pandas as pd
    u = import_quietly("executorch.backends.vulkan.utils")
    rows = []
    for name in REPSET_NAMES:
        rs = getattr(u, name)
        r = rs.make_tensor_repr()
        rows.append({"repset": name, "buffer": ", ".join(_LAYOUT[x.name] for x in rs.valid_buffer_layouts),
                     "texture": ", ".join(_LAYOUT[x.name] for x in rs.valid_texture_layouts),
                     "constrained": rs.is_constrained(),
                     "picks": "-" if rs.is_empty() else
                     f"{_STORAGE[r.storage_type.name]} {_LAYOUT[r.memory_layout.name]}"})
    return pd.DataFrame(rows)


def op_repsets(setting: str = "after"):
    """The input / output repsets ExecuTorch's ``op_registry`` declares for the ops of an int8 graph (identity ops
    under ``setting``) → DataFrame; repsets named where they equal one of :data:`REPSET_NAMES`."""
    import pandas as pd
    from ..etvk.model.lowering import identity_ops
    u = import_quietly("executorch.backends.vulkan.utils")
    reg = import_quietly("executorch.backends.vulkan.op_registry")
    E = import_quietly("executorch.exir.dialects._ops").ops.edge
    targets = {"quantize_per_tensor": E.quantized_decomposed.quantize_per_tensor.default,
               "dequantize_per_tensor": E.quantized_decomposed.dequantize_per_tensor.default,
               "q8ta_conv2d_pw": E.et_vk.q8ta_conv2d_pw.default,
               "q8ta_pixel_shuffle": E.et_vk.q8ta_pixel_shuffle.default,
               "q8ta_add": E.et_vk.q8ta_add.default, "view_copy": E.aten.view_copy.default,
               "clone": E.aten.clone.default, "_clone_dim_order": E.dim_order_ops._clone_dim_order.default,
               "alias_copy": E.aten.alias_copy.default}

    def name(rs):
        for n in REPSET_NAMES:
            if rs == getattr(u, n):
                return n
        return str(rs)
    rows = []
    with identity_ops(setting):
        for op, target in targets.items():
            f = reg.get_op_features(target)
            rows.append({"op": op, "setting": setting, "input": name(f.inputs_storage[0]),
                         "inputs_synced": len(f.inputs_storage) == 1, "output": name(f.outputs_storage[0])})
    return pd.DataFrame(rows)
