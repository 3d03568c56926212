"""ExecuTorch's real ``TagMemoryMetaPass`` on a hand-built graph (``workbench.propagation.Graph``).

:func:`to_fx` writes the graph as an edge-dialect fx graph (``et_vk.q8ta_pixel_shuffle``, ``et_vk.q8ta_add``,
``quantized_decomposed.*_per_tensor``, ``aten.clone`` / ``view_copy`` / ``alias_copy``,
``dim_order_ops._clone_dim_order``; FakeTensor values and TensorSpecs), :func:`tag` runs the real pass on it under an
identity-op setting (``workbench.lowering.identity_ops``) and returns the representation of every node and the
transitions the pass inserted, named after the hand graph's nodes.  :func:`compare` is the differential check of the
hand model (``workbench.propagation.tag_memory_meta``) against it.

``q8ta_conv2d_pw`` is not written out (its prepacked-weight arguments have no hand-graph counterpart).
"""
from __future__ import annotations

from .quiet import import_quietly

TEXTURE_LIMITS = (16384, 16384, 2048)
_STORAGE = {"BUFFER": "buffer", "TEXTURE_3D": "texture"}
_LAYOUT = {"TENSOR_WIDTH_PACKED": "WIDTH_PACKED", "TENSOR_HEIGHT_PACKED": "HEIGHT_PACKED",
           "TENSOR_CHANNELS_PACKED": "CHANNELS_PACKED", "PACKED_INT8_4W4C": "4W4C", "PACKED_INT8_4H4W": "4H4W",
           "PACKED_INT8_4W": "4W", "PACKED_INT8_4C": "4C", "PACKED_INT8_4C1W": "4C1W",
           "PACKED_INT8_CONV2D": "CONV2D"}


def to_fx(graph):
    """(GraphModule, {hand node name: fx node}) for a hand-built graph."""
    import torch
    from torch import fx
    from torch._subclasses.fake_tensor import FakeTensorMode
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


def tag(graph, setting: str = "after"):
    """Run ExecuTorch's TagMemoryMetaPass on ``graph``.  Returns (reprs {hand name: (storage, layout)},
    transitions [(source hand name, storage, layout)], sorted)."""
    from .lowering import identity_ops
    tagmod = import_quietly("executorch.backends.vulkan._passes.tag_memory_meta_pass")
    gm, env = to_fx(graph)
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
    back = {v: k for k, v in env.items()}

    def rep(node):
        r = getattr(node.meta["spec"], "etvk_node_repr", None)
        return (_STORAGE[r.storage_type.name], _LAYOUT[r.memory_layout.name]) if r is not None else None
    reprs = {back[n]: rep(n) for n in gm.graph.nodes if n in back}
    transitions = sorted((back.get(t.args[0], t.args[0].name),) + rep(t) for t in made)
    return reprs, transitions


def compare(graph, setting: str = "after") -> dict:
    """The hand model's transitions next to the real pass's: ``{"hand": [...], "real": [...], "same": bool}``."""
    from . import propagation as P
    tagged = P.tag_memory_meta(graph.copy(), setting)
    hand = sorted((t.args[0].name, t.repr.storage, t.repr.layout) for t in tagged.transitions())
    _, real = tag(graph, setting)
    return {"setting": setting, "hand": hand, "real": real, "same": hand == real}


def random_graph(rng, max_ops: int = 7):
    """A random int8 graph of pixel shuffles, quantized adds and identity ops (``rng``: random.Random)."""
    from . import propagation as P
    g = P.Graph("random")
    nodes = [g.input("x", (1, rng.choice([16, 32]), 4, 4), "int8", (0.1, 0))]
    for _ in range(rng.randint(2, max_ops)):
        a = rng.choice(nodes)
        op = rng.choice(["q8ta_pixel_shuffle", "clone", "_clone_dim_order", "alias_copy", "view_copy", "q8ta_add"])
        if op == "q8ta_pixel_shuffle":
            if a.sizes[1] % 4:
                continue
            n = g.call(op, a, upscale_factor=2, input_scale=0.1, input_zero_point=0, output_scale=0.05,
                       output_zero_point=1)
        elif op == "q8ta_add":
            n = g.call(op, a, rng.choice([b for b in nodes if b.sizes == a.sizes]), output_scale=0.2,
                       output_zero_point=0)
        else:
            n = g.call(op, a)
        nodes.append(n)
    return g.output(nodes[-1])
