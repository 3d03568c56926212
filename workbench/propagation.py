"""Layout propagation: representation sets, the transitions a partitioner inserts, and what they cost on the GPU.

A small model of ET-VK's partitioner-side layout machinery (reference ``etvk.md`` §7), on the workbench's operators,
plus an executor that runs the tagged graph on the device with the workbench's real kernels:

* :class:`TensorRepr` — (storage, layout) of one tensor; :class:`TensorRepSet` — the allowed buffer layouts and the
  allowed texture layouts (intersect ``&``, union ``|``, :meth:`~TensorRepSet.any_in_common`, constrained vs
  ambiguous, :meth:`~TensorRepSet.make_tensor_repr`: texture first, "first" in CPython set order of the layout enum
  values, as ET-VK's Python does: ``{4W4C(3), 4C1W(8), 4C(6)}`` → 4C1W).
* :data:`REGISTRY` of :class:`OpFeatures` (§1.13): quantize / dequantize per tensor, ``q8ta_conv2d_pw``,
  ``q8ta_pixel_shuffle``, ``q8ta_add``, float ``pixel_shuffle`` and the identity ops ``view_copy`` / ``clone`` /
  ``_clone_dim_order`` / ``alias_copy`` under either setting (:data:`IDENTITY_SETTINGS`): ``"before"`` = float-only
  ``ANY_STORAGE`` (before PR #19395), ``"after"`` = ``ANY_STORAGE_INCL_PACKED_INT8``.  :class:`OpRepSets` applies
  the sync rules (all args synced for a single ``inputs_storage``; primary arg ↔ output when declared equal;
  "synced" = compatible PackedDimInfo).
* :func:`tag_memory_meta` — the tagging pass: nodes in graph order; each ambiguous arg repset is narrowed by a
  downstream BFS (budget 64 nodes, intersect only where they overlap, follow users whose repset propagates), then by
  the source repset; same for the output; pick; then a transition (a ``clone`` node with the requested repr) where
  the producer's repr differs, deduplicated per (source, storage, layout).  :func:`remove_redundant_ops` drops
  ``clone`` / ``_clone_dim_order`` / ``alias_copy`` (never ``view_copy``) whose input and output agree.
  :func:`propagate` = copy → tag → remove.
* Graphs: :class:`Graph` built by hand (:meth:`Graph.input`, :meth:`Graph.call`) or traced from a torch module
  with torch.fx (:func:`from_fx`; the quantized ops are the leaf modules :class:`Quantize`, :class:`Dequantize`,
  :class:`QConvPw`, :class:`QPixelShuffle`, :class:`QAdd`; ``torch.clone`` / ``.clone()`` / ``.contiguous()`` /
  ``.view()`` / :func:`alias` / ``F.pixel_shuffle`` / ``nn.PixelShuffle`` map to the registry ops).
  :class:`RefineNetHead` — a RefineNet-like segmentation head: four conv_pw → ``_clone_dim_order`` →
  q8ta_pixel_shuffle stages.  :func:`etvk_74_graph` — §7.4's conv_pw → view_copy → conv_pw.
* :func:`execute` — one recording with per-dispatch GPU timestamps: the kernels of ``workbench.kernels`` for the
  ops, ``shaders/q8ta_clone.glsl`` for int8 transitions (int8x4 buffer ↔ int8x4 buffer / rgba32i texture, one
  dispatch), ``nchw_to_texture`` / ``texture_to_nchw`` for float buffer ↔ texture; identity ops are aliases (no
  dispatch) when their reprs agree.  :func:`timing_rows` → tidy DataFrame.

Modelling choices (stated, not hidden): ET-VK's ``PACKED_INT8_CONV2D`` is resolved per device at load time to 4C1W
or 4C; the workbench's channels-packed family is {4W4C, 4C1W, 4C}, so 4C stands in for CONV2D (enum 6 instead of
9: set order still puts 4C1W first).  RemoveRedundantOps runs after tagging here (in ``vulkan_preprocess`` it runs
before; the RefineNet ``_clone_dim_order`` nodes reached the tagging pass anyway).  Single-output ops only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import layouts as L

# ---------------------------------------------------------------------------------------------------------------------
# Representations
# ---------------------------------------------------------------------------------------------------------------------

FLOAT_LAYOUTS = ("WIDTH_PACKED", "HEIGHT_PACKED", "CHANNELS_PACKED")
INT8_LAYOUTS = ("4W4C", "4H4W", "4W", "4C", "4C1W")
STORAGES = ("buffer", "texture")
_SHORT = {"WIDTH_PACKED": "W", "HEIGHT_PACKED": "H", "CHANNELS_PACKED": "C"}


def _layout(storage: str, name: str) -> L.Layout:
    return L.get_layout(name + "_TEXTURE" if storage == "texture" else name)


def packed_dim_info(storage: str, name: str) -> tuple[int, int]:
    """ET-VK's PackedDimInfo: (packed dim WHCN, packed-dim block size).  4W4C, 4C1W and 4C share (2, 4)."""
    lay = _layout(storage, name)
    return (lay.packed_dim, lay.packed_dim_block_size)


@dataclass(frozen=True)
class TensorRepr:
    """(storage, memory layout) of one tensor."""

    storage: str
    layout: str

    def __post_init__(self):
        if self.storage not in STORAGES:
            raise ValueError(f"storage is 'buffer' or 'texture', got {self.storage!r}")
        allowed = FLOAT_LAYOUTS + (INT8_LAYOUTS if self.storage == "buffer" else ())
        if self.layout not in allowed:
            raise ValueError(f"{self.layout!r} is not a {self.storage} layout; allowed: {', '.join(allowed)}")

    @property
    def workbench_layout(self) -> L.Layout:
        return _layout(self.storage, self.layout)

    @property
    def packed_dim_info(self) -> tuple[int, int]:
        return packed_dim_info(self.storage, self.layout)

    @property
    def is_int8(self) -> bool:
        return self.layout in INT8_LAYOUTS

    @property
    def short(self) -> str:
        return f"{'buf' if self.storage == 'buffer' else 'tex'} {_SHORT.get(self.layout, self.layout)}"

    def __str__(self):
        return f"{self.storage}:{self.layout}"


def set_order(names) -> list[str]:
    """The layouts in the iteration order of a CPython set of their ET-VK enum values (built in enum order), which
    is what "first" means in ET-VK's ``make_tensor_repr``: ``{0,1,2}`` → W, H, C; ``{3,8,6}`` → 4C1W, 4W4C, 4C."""
    by_value = {}
    for n in names:
        by_value[L.get_layout(n).enum_value] = n
    values = set()
    for v in sorted(by_value):
        values.add(v)
    return [by_value[v] for v in values]


@dataclass(frozen=True)
class TensorRepSet:
    """Allowed layouts per storage side.  Constrained: empty, or exactly one layout on exactly one side."""

    buffer: frozenset = frozenset()
    texture: frozenset = frozenset()

    def __post_init__(self):
        object.__setattr__(self, "buffer", frozenset(self.buffer))
        object.__setattr__(self, "texture", frozenset(self.texture))
        bad = [n for n in self.buffer if n not in FLOAT_LAYOUTS + INT8_LAYOUTS]
        bad += [n for n in self.texture if n not in FLOAT_LAYOUTS]
        if bad:
            raise ValueError(f"unknown layouts in a repset: {bad} (textures hold float layouts only)")

    @classmethod
    def of(cls, r: TensorRepr) -> "TensorRepSet":
        return cls({r.layout}, ()) if r.storage == "buffer" else cls((), {r.layout})

    def __and__(self, other: "TensorRepSet") -> "TensorRepSet":
        return TensorRepSet(self.buffer & other.buffer, self.texture & other.texture)

    def __or__(self, other: "TensorRepSet") -> "TensorRepSet":
        return TensorRepSet(self.buffer | other.buffer, self.texture | other.texture)

    intersect = __and__
    union = __or__

    def any_in_common(self, other: "TensorRepSet") -> bool:
        return bool(self.buffer & other.buffer) or bool(self.texture & other.texture)

    def is_empty(self) -> bool:
        return not self.buffer and not self.texture

    def is_constrained(self) -> bool:
        return self.is_empty() or (len(self.buffer) + len(self.texture) == 1)

    def is_ambiguous(self) -> bool:
        return not self.is_constrained()

    def reprs(self) -> list[TensorRepr]:
        """Every repr, in preference order (textures first, each side in set order)."""
        return ([TensorRepr("texture", n) for n in set_order(self.texture)]
                + [TensorRepr("buffer", n) for n in set_order(self.buffer)])

    def make_tensor_repr(self) -> TensorRepr:
        """ET-VK's pick: the first texture layout if any, else the first buffer layout; empty → the default
        (texture, channels-packed)."""
        r = self.reprs()
        return r[0] if r else TensorRepr("texture", "CHANNELS_PACKED")

    def packed_dim_infos(self) -> tuple[set, set]:
        return ({packed_dim_info("buffer", n) for n in self.buffer},
                {packed_dim_info("texture", n) for n in self.texture})

    def compatible_with(self, other: "TensorRepSet") -> bool:
        """Any PackedDimInfo in common (per storage side)."""
        a, b = self.packed_dim_infos(), other.packed_dim_infos()
        return bool(a[0] & b[0]) or bool(a[1] & b[1])

    def constrain_to_compatible_packed_dim(self, ref: "TensorRepSet") -> "TensorRepSet":
        """Keep the layouts whose PackedDimInfo occurs on the same side of ``ref``."""
        pb, pt = ref.packed_dim_infos()
        return TensorRepSet({n for n in self.buffer if packed_dim_info("buffer", n) in pb},
                            {n for n in self.texture if packed_dim_info("texture", n) in pt})

    def __str__(self):
        parts = []
        if self.buffer:
            parts.append("buf{" + ",".join(_SHORT.get(n, n) for n in set_order(self.buffer)) + "}")
        if self.texture:
            parts.append("tex{" + ",".join(_SHORT.get(n, n) for n in set_order(self.texture)) + "}")
        return " ".join(parts) or "∅"


# Named repsets (§7.1).  PACKED_INT8_CHANNELS_PACKED_BUFFER's CONV2D is the workbench's 4C (see the module doc).
ANY_STORAGE = TensorRepSet(FLOAT_LAYOUTS, FLOAT_LAYOUTS)
ANY_BUFFER = TensorRepSet(FLOAT_LAYOUTS, ())
ANY_TEXTURE = TensorRepSet((), FLOAT_LAYOUTS)
CONTIGUOUS_BUFFER = TensorRepSet({"WIDTH_PACKED"}, ())
CHANNELS_PACKED_TEXTURE_OR_CONTIGUOUS_BUFFER = TensorRepSet({"WIDTH_PACKED"}, {"CHANNELS_PACKED"})
PACKED_INT8_BUFFER = TensorRepSet(INT8_LAYOUTS, ())
PACKED_INT8_4W4C_BUFFER = TensorRepSet({"4W4C"}, ())
PACKED_INT8_4H4W_BUFFER = TensorRepSet({"4H4W"}, ())
PACKED_INT8_4W_BUFFER = TensorRepSet({"4W"}, ())
PACKED_INT8_4C1W_BUFFER = TensorRepSet({"4C1W"}, ())
PACKED_INT8_CHANNELS_PACKED_BUFFER = TensorRepSet({"4W4C", "4C1W", "4C"}, ())
ANY_STORAGE_INCL_PACKED_INT8 = TensorRepSet(FLOAT_LAYOUTS + INT8_LAYOUTS, FLOAT_LAYOUTS)
NO_STORAGE = TensorRepSet()

# ---------------------------------------------------------------------------------------------------------------------
# Operators
# ---------------------------------------------------------------------------------------------------------------------

#: Identity-op settings: "before" PR #19395 (float-only ANY_STORAGE) and "after" (ANY_STORAGE_INCL_PACKED_INT8).
IDENTITY_SETTINGS = {"before": ANY_STORAGE, "after": ANY_STORAGE_INCL_PACKED_INT8}
IDENTITY_OPS = ("view_copy", "clone", "_clone_dim_order", "alias_copy")
#: What RemoveRedundantOps removes (view_copy is not among them).
REDUNDANT_OPS = ("clone", "_clone_dim_order", "alias_copy")
TRANSITION = "transition"  # op name of the clone nodes the tagging pass inserts


@dataclass(frozen=True)
class OpFeatures:
    """``inputs_storage``: one repset (every tensor arg, synced) or a tuple (one per arg, not synced);
    ``outputs_storage``: None → the first arg's."""

    inputs_storage: object
    outputs_storage: TensorRepSet | None = None
    doc: str = ""

    @property
    def sync_args(self) -> bool:
        return isinstance(self.inputs_storage, TensorRepSet)

    def arg_repset(self, i: int) -> TensorRepSet:
        if self.sync_args:
            return self.inputs_storage
        return self.inputs_storage[min(i, len(self.inputs_storage) - 1)]

    @property
    def out_repset(self) -> TensorRepSet:
        return self.outputs_storage if self.outputs_storage is not None else self.arg_repset(0)

    @property
    def sync_primary_io(self) -> bool:
        return self.arg_repset(0) == self.out_repset


REGISTRY: dict[str, OpFeatures] = {
    "quantize_per_tensor": OpFeatures(CHANNELS_PACKED_TEXTURE_OR_CONTIGUOUS_BUFFER, PACKED_INT8_BUFFER,
                                      "float → int8x4 (q8ta_quantize)"),
    "dequantize_per_tensor": OpFeatures(PACKED_INT8_BUFFER, CHANNELS_PACKED_TEXTURE_OR_CONTIGUOUS_BUFFER,
                                        "int8x4 → float (q8ta_dequantize)"),
    "q8ta_conv2d_pw": OpFeatures((PACKED_INT8_4W4C_BUFFER,), PACKED_INT8_CHANNELS_PACKED_BUFFER,
                                 "pointwise int8 conv: input 4W4C, output channels-packed"),
    "q8ta_pixel_shuffle": OpFeatures(PACKED_INT8_CHANNELS_PACKED_BUFFER, None, "fused int8 pixel shuffle"),
    "q8ta_add": OpFeatures(PACKED_INT8_BUFFER, None, "int8 add (all args synced)"),
    "pixel_shuffle": OpFeatures(ANY_STORAGE, None, "float pixel shuffle"),
}


def op_features(op: str, identity: str = "after") -> OpFeatures:
    """The features of ``op``; identity ops under ``identity`` ("before" / "after" PR #19395)."""
    if op in IDENTITY_OPS:
        if identity not in IDENTITY_SETTINGS:
            raise ValueError(f"identity setting is one of {list(IDENTITY_SETTINGS)}, got {identity!r}")
        return OpFeatures(IDENTITY_SETTINGS[identity], None, "identity")
    if op not in REGISTRY:
        raise KeyError(f"no op {op!r} in the registry; ops: {sorted(REGISTRY) + list(IDENTITY_OPS)}")
    return REGISTRY[op]


class OpRepSets:
    """The (mutable) repsets of one node's tensor args and its output, with ET-VK's sync rules."""

    def __init__(self, features: OpFeatures, n_args: int):
        self.features = features
        self.args = [features.arg_repset(i) for i in range(n_args)]
        self.out = features.out_repset
        self.sync_args = features.sync_args
        self.sync_primary_io = features.sync_primary_io

    def arg_propagates(self, i: int) -> bool:
        """Whether a constraint on arg ``i`` reaches the output."""
        return self.sync_primary_io and (self.sync_args or i == 0)

    def any_is_empty(self) -> bool:
        return self.out.is_empty() or any(a.is_empty() for a in self.args)

    def try_constrain_with_arg_repset(self, i: int, rs: TensorRepSet) -> bool:
        new = self.args[i] & rs
        if new.is_empty():
            return False
        if self.arg_propagates(i) and not new.compatible_with(self.out):
            return False
        others = []
        if self.sync_args:
            for j in range(len(self.args)):
                if j != i:
                    c = self.args[j].constrain_to_compatible_packed_dim(new)
                    if c.is_empty():
                        return False
                    others.append((j, c))
        self.args[i] = new
        for j, c in others:
            self.args[j] = c
        if self.arg_propagates(i):
            self.out = self.out.constrain_to_compatible_packed_dim(new)
        return True

    def try_constrain_with_out_repset(self, rs: TensorRepSet) -> bool:
        new = self.out & rs
        if new.is_empty():
            return False
        self.out = new
        if self.sync_primary_io and self.args:
            for j in range(len(self.args)):
                if j == 0 or self.sync_args:
                    c = self.args[j].constrain_to_compatible_packed_dim(new)
                    if not c.is_empty():
                        self.args[j] = c
        return True


# ---------------------------------------------------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------------------------------------------------

@dataclass(eq=False)
class Node:
    """One tensor-producing node.  ``op``: a registry op, ``"input"`` or ``"transition"``; ``args``: tensor-producing
    nodes; ``params``: everything else (qparams, weights, r...); ``repr`` set by the tagging pass."""

    name: str
    op: str
    args: list = field(default_factory=list)
    params: dict = field(default_factory=dict)
    sizes: tuple = ()
    dtype: str = "float"             # "float" | "int8"
    qparams: tuple | None = None     # (scale, zero_point) of an int8 tensor
    repr: TensorRepr | None = None

    @property
    def is_transition(self) -> bool:
        return self.op == TRANSITION

    def __repr__(self):
        r = f" [{self.repr}]" if self.repr else ""
        return f"Node({self.name}: {self.op}({', '.join(a.name for a in self.args)}){r})"


def _infer(op: str, args: list, params: dict):
    """(sizes, dtype, qparams) of an op's output."""
    a0 = args[0]
    if op == "quantize_per_tensor":
        return a0.sizes, "int8", (float(params["scale"]), int(params["zero_point"]))
    if op == "dequantize_per_tensor":
        return a0.sizes, "float", None
    if op == "q8ta_conv2d_pw":
        n, _, h, w = a0.sizes
        return (n, int(np.asarray(params["weight"]).shape[0]), h, w), "int8", \
            (float(params["output_scale"]), int(params["output_zero_point"]))
    if op in ("q8ta_pixel_shuffle", "pixel_shuffle"):
        r = int(params["upscale_factor"])
        n, c, h, w = a0.sizes
        if c % (r * r):
            raise ValueError(f"{op}: C = {c} is not divisible by r² = {r * r}")
        out = (n, c // (r * r), h * r, w * r)
        if op == "pixel_shuffle":
            return out, a0.dtype, a0.qparams
        return out, "int8", (float(params["output_scale"]), int(params["output_zero_point"]))
    if op == "q8ta_add":
        return a0.sizes, "int8", (float(params["output_scale"]), int(params["output_zero_point"]))
    if op == "view_copy":
        sizes = tuple(int(s) for s in params.get("sizes", a0.sizes))
        if math.prod(sizes) != math.prod(a0.sizes):
            raise ValueError(f"view_copy to {sizes} from {a0.sizes}: different numel")
        return sizes, a0.dtype, a0.qparams
    if op in IDENTITY_OPS or op == TRANSITION:
        return a0.sizes, a0.dtype, a0.qparams
    raise KeyError(f"unknown op {op!r}")


class Graph:
    """Nodes in topological (graph) order; ``outputs`` are the graph's results."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self.nodes: list[Node] = []
        self.outputs: list[Node] = []
        self._names: set = set()

    def _unique(self, base: str) -> str:
        name, k = base, 1
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._names.add(name)
        return name

    def input(self, name: str, sizes, dtype: str = "float", qparams=None) -> Node:
        node = Node(self._unique(name), "input", [], {}, L.normalize_sizes(sizes), dtype, qparams)
        self.nodes.append(node)
        return node

    def call(self, op: str, *args: Node, name: str | None = None, **params) -> Node:
        if op != TRANSITION:
            op_features(op)  # unknown ops fail here
        sizes, dtype, qp = _infer(op, list(args), params)
        node = Node(self._unique(name or op), op, list(args), params, tuple(sizes), dtype, qp)
        self.nodes.append(node)
        return node

    def output(self, *nodes: Node) -> "Graph":
        self.outputs.extend(nodes)
        return self

    def users(self, node: Node) -> list[Node]:
        return [u for u in self.nodes if any(a is node for a in u.args)]

    def op_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.op != "input"]

    def transitions(self) -> list[Node]:
        return [n for n in self.nodes if n.is_transition]

    def count(self, op: str) -> int:
        return sum(n.op == op for n in self.nodes)

    def copy(self) -> "Graph":
        g = Graph(self.name)
        g._names = set(self._names)
        m = {}
        for n in self.nodes:
            c = Node(n.name, n.op, [m[a] for a in n.args], dict(n.params), n.sizes, n.dtype, n.qparams, n.repr)
            m[n] = c
            g.nodes.append(c)
        g.outputs = [m[o] for o in self.outputs]
        return g

    def levels(self) -> dict:
        """Node → longest-path depth from the inputs (for left → right pictures)."""
        depth = {}
        for n in self.nodes:
            depth[n] = 1 + max((depth[a] for a in n.args), default=-1)
        return depth

    def summary(self) -> str:
        lines = [f"{self.name}: {len(self.op_nodes())} ops, {len(self.transitions())} transitions"]
        for n in self.nodes:
            args = ", ".join(a.name for a in n.args)
            lines.append(f"  {n.name:<22} {n.op:<22} ({args}) -> {n.repr or '-'} {list(n.sizes)}")
        return "\n".join(lines)

    def __repr__(self):
        return f"Graph({self.name}: {len(self.nodes)} nodes, {len(self.transitions())} transitions)"


# ---------------------------------------------------------------------------------------------------------------------
# The tagging pass
# ---------------------------------------------------------------------------------------------------------------------

MAX_TRACE_SEARCH_DEPTH = 64


def _source_repset(node: Node, identity: str) -> TensorRepSet:
    """What a producer offers: its assigned repr, else its output repset (inputs: any float / any int8 layout)."""
    if node.repr is not None:
        return TensorRepSet.of(node.repr)
    if node.op == "input":
        return PACKED_INT8_BUFFER if node.dtype == "int8" else ANY_STORAGE
    if node.is_transition:
        return ANY_STORAGE_INCL_PACKED_INT8
    return op_features(node.op, identity).out_repset


class TagMemoryMeta:
    """The tagging pass over one graph (in place).  ``identity``: "before" / "after" PR #19395."""

    def __init__(self, graph: Graph, identity: str = "after", max_search_depth: int = MAX_TRACE_SEARCH_DEPTH):
        self.graph = graph
        self.identity = identity
        self.max_search_depth = max_search_depth
        self.inserted: list[Node] = []
        self._dedup: dict = {}
        self.log: list[str] = []

    def features(self, node: Node) -> OpFeatures:
        return op_features(node.op, self.identity)

    def trace_users(self, start: Node, repset: TensorRepSet) -> TensorRepSet:
        """BFS downstream from ``start``: intersect with each user's required arg repset where they overlap; follow
        users whose repset propagates to their output; stop when constrained or after the budget (shared)."""
        queue, budget = [start], self.max_search_depth
        while queue and budget > 0 and not repset.is_constrained():
            node = queue.pop(0)
            budget -= 1
            for user in self.graph.users(node):
                if user.is_transition:
                    continue
                feats = self.features(user)
                for pos, a in enumerate(user.args):
                    if a is not node:
                        continue
                    req = feats.arg_repset(pos)
                    if not repset.any_in_common(req):
                        continue  # no overlap: that user is skipped
                    repset = repset & req
                    if repset.is_constrained():
                        return repset
                    if feats.sync_primary_io and (feats.sync_args or pos == 0) and user not in queue:
                        queue.append(user)
        return repset

    def constrain(self, node: Node, reps: OpRepSets):
        for i, arg in enumerate(node.args):
            if reps.args[i].is_ambiguous():
                reps.try_constrain_with_arg_repset(i, self.trace_users(arg, reps.args[i]))
            if reps.args[i].is_ambiguous():
                reps.try_constrain_with_arg_repset(i, _source_repset(arg, self.identity))
        if reps.out.is_ambiguous():
            reps.try_constrain_with_out_repset(self.trace_users(node, reps.out))

    def transition(self, src: Node, want: TensorRepr, user: Node) -> Node:
        key = (id(src), want.storage, want.layout)
        t = self._dedup.get(key)
        if t is None:
            g = self.graph
            t = Node(g._unique(f"clone_{src.name}"), TRANSITION, [src], {}, src.sizes, src.dtype, src.qparams, want)
            g.nodes.insert(g.nodes.index(user), t)
            self._dedup[key] = t
            self.inserted.append(t)
            self.log.append(f"transition {t.name}: {src.name} {src.repr} → {want} (for {user.name})")
        return t

    def run(self) -> Graph:
        for node in list(self.graph.nodes):
            if node.op == "input" or node.is_transition:
                continue
            reps = OpRepSets(self.features(node), len(node.args))
            if reps.any_is_empty():
                raise ValueError(f"{node.name}: an empty repset (op {node.op})")
            self.constrain(node, reps)
            node.repr = reps.out.make_tensor_repr()
            for i, arg in enumerate(node.args):
                want = reps.args[i].make_tensor_repr()
                if arg.repr is None:
                    arg.repr = want
                elif arg.repr != want:
                    node.args[i] = self.transition(arg, want, node)
        return self.graph


def tag_memory_meta(graph: Graph, identity: str = "after", max_search_depth: int = MAX_TRACE_SEARCH_DEPTH) -> Graph:
    """Tag ``graph`` in place (reprs on every node, transitions inserted); returns it."""
    return TagMemoryMeta(graph, identity, max_search_depth).run()


def remove_redundant_ops(graph: Graph) -> int:
    """Remove clone / _clone_dim_order / alias_copy nodes that change neither shape, dtype nor repr (their users
    read the input instead); view_copy stays.  Returns how many were removed."""
    removed = 0
    for node in list(graph.nodes):
        if node.op not in REDUNDANT_OPS:
            continue
        src = node.args[0]
        if node.sizes != src.sizes or node.dtype != src.dtype or (node.repr is not None and node.repr != src.repr):
            continue
        for u in graph.nodes:
            u.args = [src if a is node else a for a in u.args]
        graph.outputs = [src if o is node else o for o in graph.outputs]
        graph.nodes.remove(node)
        removed += 1
    return removed


@dataclass
class Propagation:
    """The result of :func:`propagate`: the tagged graph and its counts."""

    setting: str
    graph: Graph
    transitions: int
    removed: int
    log: list

    @property
    def identity_ops(self) -> int:
        return sum(n.op in IDENTITY_OPS for n in self.graph.nodes)

    def as_row(self) -> dict:
        return {"graph": self.graph.name, "setting": self.setting, "transitions": self.transitions,
                "identity_ops_removed": self.removed, "identity_ops_left": self.identity_ops,
                "ops": len([n for n in self.graph.op_nodes() if n.op not in IDENTITY_OPS and not n.is_transition])}


def propagate(graph: Graph, setting: str = "after", remove_redundant: bool = True) -> Propagation:
    """Copy ``graph``, tag it under the identity-op ``setting``, then (by default) RemoveRedundantOps."""
    g = graph.copy()
    g.name = graph.name
    tagger = TagMemoryMeta(g, setting)
    tagger.run()
    removed = remove_redundant_ops(g) if remove_redundant else 0
    return Propagation(setting, g, len(g.transitions()), removed, tagger.log)


def compare_settings(graph: Graph):
    """Transition counts under both identity-op settings → DataFrame (one row per setting)."""
    import pandas as pd
    return pd.DataFrame([propagate(graph, s).as_row() for s in IDENTITY_SETTINGS])


# ---------------------------------------------------------------------------------------------------------------------
# torch side: the quantized ops as leaf modules, in the kernels' fp32 operation order
# ---------------------------------------------------------------------------------------------------------------------

def _torch():
    import torch
    return torch


def _inv(scale) -> float:
    return float(np.float32(1.0) / np.float32(scale))


def _module_base():
    import torch.nn as nn
    return nn.Module


class Quantize(_module_base()):
    """float → int8: ``clamp(roundEven(x · (1/scale)) + zp)`` (q8ta_quantize's order)."""

    op = "quantize_per_tensor"

    def __init__(self, scale: float, zero_point: int):
        super().__init__()
        self.scale, self.zero_point = float(scale), int(zero_point)

    def params(self):
        return {"scale": self.scale, "zero_point": self.zero_point}

    def forward(self, x):
        torch = _torch()
        s = x.float() * torch.tensor(_inv(self.scale), dtype=torch.float32)
        return torch.clamp(torch.round(s) + self.zero_point, -128, 127).to(torch.int8)


class Dequantize(_module_base()):
    """int8 → float: ``float(q − zp) · scale``."""

    op = "dequantize_per_tensor"

    def __init__(self, scale: float, zero_point: int):
        super().__init__()
        self.scale, self.zero_point = float(scale), int(zero_point)

    def params(self):
        return {"scale": self.scale, "zero_point": self.zero_point}

    def forward(self, q):
        torch = _torch()
        return (q.to(torch.int32) - self.zero_point).float() * torch.tensor(self.scale, dtype=torch.float32)


class QConvPw(_module_base()):
    """Pointwise int8 conv: exact int32 accumulators, then the kernel's fp32 epilogue
    (``(acc − zp_in·Σw) · (w_scale · s_in) + bias``, relu, ``· (1/s_out)``, roundEven, ``+ zp_out``, clamp)."""

    op = "q8ta_conv2d_pw"

    def __init__(self, weight, weight_scales, bias, input_scale, input_zero_point, output_scale, output_zero_point,
                 relu: bool = False):
        super().__init__()
        torch = _torch()
        self.weight = torch.as_tensor(np.asarray(weight), dtype=torch.int8).reshape(len(weight), -1)
        self.weight_scales = torch.as_tensor(np.asarray(weight_scales, np.float32))
        self.bias = None if bias is None else torch.as_tensor(np.asarray(bias, np.float32))
        self.input_scale, self.input_zero_point = float(input_scale), int(input_zero_point)
        self.output_scale, self.output_zero_point = float(output_scale), int(output_zero_point)
        self.relu = bool(relu)

    def params(self):
        return {"weight": self.weight.numpy(), "weight_scales": self.weight_scales.numpy(),
                "bias": None if self.bias is None else self.bias.numpy(), "input_scale": self.input_scale,
                "input_zero_point": self.input_zero_point, "output_scale": self.output_scale,
                "output_zero_point": self.output_zero_point, "relu": self.relu}

    def forward(self, q):
        torch = _torch()
        w = self.weight.to(torch.int64)
        acc = torch.einsum("nchw,oc->nohw", q.to(torch.int64), w)
        adj = (acc - self.input_zero_point * w.sum(1).view(1, -1, 1, 1)).to(torch.int32).float()
        scale = (self.weight_scales * torch.tensor(self.input_scale, dtype=torch.float32)).view(1, -1, 1, 1)
        f = adj * scale
        if self.bias is not None:
            f = f + self.bias.view(1, -1, 1, 1)
        if self.relu:
            f = torch.clamp_min(f, 0.0)
        g = f * torch.tensor(_inv(self.output_scale), dtype=torch.float32)
        return torch.clamp(torch.round(g) + self.output_zero_point, -128, 127).to(torch.int8)


class QPixelShuffle(_module_base()):
    """Fused int8 pixel shuffle: a byte shuffle when the qparams agree (ET-VK's tolerance), else requantize
    ``clamp(roundEven(float(q − zp_in) · s_in · (1/s_out)) + zp_out)``."""

    op = "q8ta_pixel_shuffle"

    def __init__(self, upscale_factor, input_scale, input_zero_point, output_scale, output_zero_point):
        super().__init__()
        self.upscale_factor = int(upscale_factor)
        self.input_scale, self.input_zero_point = float(input_scale), int(input_zero_point)
        self.output_scale, self.output_zero_point = float(output_scale), int(output_zero_point)

    def params(self):
        return {"upscale_factor": self.upscale_factor, "input_scale": self.input_scale,
                "input_zero_point": self.input_zero_point, "output_scale": self.output_scale,
                "output_zero_point": self.output_zero_point}

    def forward(self, q):
        torch = _torch()
        from .kernels.pixel_shuffle import is_passthrough
        y = torch.nn.functional.pixel_shuffle(q, self.upscale_factor)
        if is_passthrough(self.input_scale, self.input_zero_point, self.output_scale, self.output_zero_point):
            return y
        dq = (y.to(torch.int32) - self.input_zero_point).float() * torch.tensor(self.input_scale, dtype=torch.float32)
        s = dq * torch.tensor(_inv(self.output_scale), dtype=torch.float32)
        return torch.clamp(torch.round(s) + self.output_zero_point, -128, 127).to(torch.int8)


class QAdd(_module_base()):
    """int8 add (pass-level op: the workbench has no q8ta_add kernel, so graphs with it are not executable)."""

    op = "q8ta_add"

    def __init__(self, a_scale, a_zp, b_scale, b_zp, output_scale, output_zero_point):
        super().__init__()
        self.qp = (float(a_scale), int(a_zp), float(b_scale), int(b_zp))
        self.output_scale, self.output_zero_point = float(output_scale), int(output_zero_point)

    def params(self):
        return {"a_scale": self.qp[0], "a_zero_point": self.qp[1], "b_scale": self.qp[2],
                "b_zero_point": self.qp[3], "output_scale": self.output_scale,
                "output_zero_point": self.output_zero_point}

    def forward(self, a, b):
        torch = _torch()
        fa = (a.to(torch.int32) - self.qp[1]).float() * self.qp[0]
        fb = (b.to(torch.int32) - self.qp[3]).float() * self.qp[2]
        s = (fa + fb) * torch.tensor(_inv(self.output_scale), dtype=torch.float32)
        return torch.clamp(torch.round(s) + self.output_zero_point, -128, 127).to(torch.int8)


class Alias(_module_base()):
    """``alias_copy``: returns its input."""

    op = "alias_copy"

    def params(self):
        return {}

    def forward(self, x):
        return x


def alias(x):
    """An alias (identity) call for modules; traced as ``alias_copy`` when called through an :class:`Alias`."""
    return x


_LEAVES = (Quantize, Dequantize, QConvPw, QPixelShuffle, QAdd, Alias)


def from_fx(module, example_input, name: str | None = None) -> Graph:
    """Trace ``module`` with torch.fx (the quantized modules above are leaves), propagate shapes with the example
    input, and map the fx nodes to registry ops: leaf modules → their op; ``nn.PixelShuffle`` /
    ``F.pixel_shuffle`` → ``pixel_shuffle``; ``torch.clone(x, memory_format=...)`` / ``x.contiguous()`` →
    ``_clone_dim_order``; ``torch.clone(x)`` / ``x.clone()`` → ``clone``; ``x.view(...)`` / ``x.reshape(...)``
    → ``view_copy``."""
    import torch
    import torch.fx as fx
    import torch.nn.functional as F
    from torch.fx.passes.shape_prop import ShapeProp

    class _Tracer(fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, _LEAVES) or super().is_leaf_module(m, qualname)

    tracer = _Tracer()
    fx_graph = tracer.trace(module)
    gm = fx.GraphModule(module, fx_graph)
    ShapeProp(gm).propagate(example_input)
    g = Graph(name or type(module).__name__)
    env = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            meta = n.meta["tensor_meta"]
            dtype = "int8" if meta.dtype == torch.int8 else "float"
            env[n] = g.input(n.name, tuple(meta.shape), dtype)
            continue
        if n.op == "output":
            outs = n.args[0] if isinstance(n.args[0], (tuple, list)) else (n.args[0],)
            g.output(*[env[o] for o in outs])
            continue
        tensor_args = [env[a] for a in n.args if isinstance(a, fx.Node) and isinstance(env.get(a), Node)]
        if n.op == "call_function" and n.target is getattr:  # e.g. x.shape: not a tensor
            env[n] = None
            continue
        if n.op == "call_module":
            m = gm.get_submodule(n.target)
            if isinstance(m, _LEAVES):
                env[n] = g.call(m.op, *tensor_args, name=n.name, **m.params())
            elif isinstance(m, torch.nn.PixelShuffle):
                env[n] = g.call("pixel_shuffle", *tensor_args, name=n.name, upscale_factor=m.upscale_factor)
            elif isinstance(m, torch.nn.Identity):
                env[n] = tensor_args[0]
            else:
                raise NotImplementedError(f"fx node {n.name}: module {type(m).__name__} has no registry op")
        elif n.op == "call_function":
            if n.target in (F.pixel_shuffle, torch.pixel_shuffle):
                env[n] = g.call("pixel_shuffle", tensor_args[0], name=n.name, upscale_factor=int(n.args[1]))
            elif n.target is torch.clone:
                op = "_clone_dim_order" if "memory_format" in n.kwargs else "clone"
                env[n] = g.call(op, tensor_args[0], name=n.name)
            elif n.target is alias:
                env[n] = g.call("alias_copy", tensor_args[0], name=n.name)
            else:
                raise NotImplementedError(f"fx node {n.name}: function {n.target} has no registry op")
        elif n.op == "call_method":
            if n.target == "clone":
                op = "_clone_dim_order" if "memory_format" in n.kwargs else "clone"
                env[n] = g.call(op, tensor_args[0], name=n.name)
            elif n.target == "contiguous":
                env[n] = g.call("_clone_dim_order", tensor_args[0], name=n.name)
            elif n.target in ("view", "reshape"):
                sizes = tuple(n.meta["tensor_meta"].shape)
                env[n] = g.call("view_copy", tensor_args[0], name=n.name, sizes=sizes)
            else:
                raise NotImplementedError(f"fx node {n.name}: method {n.target} has no registry op")
        else:
            raise NotImplementedError(f"fx node {n.name}: {n.op} is not supported")
    return g


# ---------------------------------------------------------------------------------------------------------------------
# Model graphs
# ---------------------------------------------------------------------------------------------------------------------

def _conv_params(rng, cin, cout):
    w = rng.integers(-127, 128, (cout, cin)).astype(np.int8)
    w_scales = (rng.uniform(0.8, 1.2, cout) / (73.0 * math.sqrt(cin))).astype(np.float32)
    bias = rng.uniform(-0.2, 0.2, cout).astype(np.float32)
    return w, w_scales, bias


class RefineNetHead(_module_base()):
    """A RefineNet-like quantized segmentation head: quantize → ``stages`` × (conv_pw C → 4·feat,
    ``_clone_dim_order``, q8ta_pixel_shuffle r = 2 → feat) → conv_pw feat → classes → dequantize.

    ``clone``: where the identity ops sit: "before" each fused pixel shuffle (one per stage, RefineNet's 8
    transitions for 4 stages), "around" it (before and after), or "none".  Stage ``requant_stage`` gets different
    output qparams (the requantize path); the other shuffles are passthrough (RefineNet's same_qp)."""

    def __init__(self, in_channels: int = 24, feat: int = 24, classes: int = 8, stages: int = 4,
                 clone: str = "before", seed: int = 0, requant_stage: int = 1):
        super().__init__()
        import torch.nn as nn
        if clone not in ("before", "around", "none"):
            raise ValueError(f"clone is 'before', 'around' or 'none', got {clone!r}")
        rng = np.random.default_rng(seed)
        self.clone_mode = clone
        s, zp = 0.05, 0
        self.quant = Quantize(s, zp)
        convs, shuffles = [], []
        cin = in_channels
        for i in range(stages):
            w, ws, b = _conv_params(rng, cin, 4 * feat)
            conv_zp = (i % 3) - 1
            convs.append(QConvPw(w, ws, b, s, zp, 0.05, conv_zp, relu=True))
            out_s, out_zp = (0.07, conv_zp + 3) if i == requant_stage else (0.05, conv_zp)
            shuffles.append(QPixelShuffle(2, 0.05, conv_zp, out_s, out_zp))
            s, zp, cin = out_s, out_zp, feat
        self.convs = nn.ModuleList(convs)
        self.shuffles = nn.ModuleList(shuffles)
        w, ws, b = _conv_params(rng, cin, classes)
        self.classifier = QConvPw(w, ws, b, s, zp, 0.1, 3)
        self.dequant = Dequantize(0.1, 3)

    def forward(self, x):
        torch = _torch()
        q = self.quant(x)
        for conv, shuffle in zip(self.convs, self.shuffles):
            q = conv(q)
            if self.clone_mode != "none":
                q = torch.clone(q, memory_format=torch.contiguous_format)
            q = shuffle(q)
            if self.clone_mode == "around":
                q = torch.clone(q, memory_format=torch.contiguous_format)
        return self.dequant(self.classifier(q))


def refinenet_input_shape(full: bool = False, in_channels: int = 24) -> tuple:
    """FULL: RefineNet's decoder (1×96×16×9 into the first shuffle → 1×24×256×144 out); else a tiny one."""
    return (1, in_channels, 16, 9) if full else (1, in_channels, 2, 3)


class ConvViewConv(_module_base()):
    """§7.4's example as a module: conv_pw → view (same shape) → conv_pw, between quantize and dequantize."""

    def __init__(self, channels: int = 16, seed: int = 1):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.quant = Quantize(0.05, 1)
        self.conv1 = QConvPw(*_conv_params(rng, channels, channels), 0.05, 1, 0.05, -2)
        self.conv2 = QConvPw(*_conv_params(rng, channels, channels), 0.05, -2, 0.06, 0)
        self.dequant = Dequantize(0.06, 0)

    def forward(self, x):
        q = self.conv1(self.quant(x))
        q = q.view(q.shape)
        return self.dequant(self.conv2(q))


def etvk_74_graph(sizes=(1, 16, 4, 8), seed: int = 1) -> Graph:
    """§7.4 by hand: int8 input → q8ta_conv2d_pw#1 → view_copy (same shape) → q8ta_conv2d_pw#2."""
    rng = np.random.default_rng(seed)
    c = sizes[1]
    g = Graph("conv_pw → view_copy → conv_pw")
    x = g.input("x", sizes, "int8", (0.05, 1))
    w1, s1, b1 = _conv_params(rng, c, c)
    w2, s2, b2 = _conv_params(rng, c, c)
    c1 = g.call("q8ta_conv2d_pw", x, name="conv1", weight=w1, weight_scales=s1, bias=b1, input_scale=0.05,
                input_zero_point=1, output_scale=0.05, output_zero_point=-2)
    v = g.call("view_copy", c1, name="view")
    c2 = g.call("q8ta_conv2d_pw", v, name="conv2", weight=w2, weight_scales=s2, bias=b2, input_scale=0.05,
                input_zero_point=-2, output_scale=0.06, output_zero_point=0)
    return g.output(c2)


# ---------------------------------------------------------------------------------------------------------------------
# Execution on the device
# ---------------------------------------------------------------------------------------------------------------------

CLONE_SHADER = "q8ta_clone"
LOCAL_LINEAR = (64, 1, 1)
LOCAL_TEXELS = (4, 4, 4)


@dataclass
class Execution:
    """What :func:`execute` returns: outputs (NCHW torch, one per graph output), the dispatches with their kinds,
    and the per-dispatch GPU times (µs, median over ``repeats``)."""

    graph: Graph
    outputs: list
    dispatches: list          # [(label, node name, kind)]
    gpu_us: list              # per dispatch, median over repeats
    repeats: int

    @property
    def total_us(self) -> float:
        return float(np.sum(self.gpu_us))

    def kind_us(self, kind: str) -> float:
        return float(sum(t for (_, _, k), t in zip(self.dispatches, self.gpu_us) if k == kind))


class _Executor:
    def __init__(self, device, graph: Graph):
        self.device = device
        self.graph = graph
        self.owned = []
        self.res = {}       # node → (resource, metadata ubo)
        self.calls = []     # [(closure(rec), label, node name, kind)]

    def own(self, obj):
        self.owned.append(obj)
        return obj

    def close(self):
        for obj in reversed(self.owned):
            obj.close()
        self.owned.clear()

    # -- resources --------------------------------------------------------------------------------------------------
    def alloc(self, node: Node, r: TensorRepr, name: str):
        lay = r.workbench_layout
        if r.storage == "texture":
            fmt = "rgba32i" if node.dtype == "int8" else "rgba32f"
            res = self.own(self.device.image(lay.extents(node.sizes), fmt, name=name))
            meta = self.own(self.device.uniform(lay.texture_metadata(node.sizes), name=name + "-meta"))
        else:
            if node.dtype == "int8" and not lay.is_int8:
                raise NotImplementedError(f"{node.name}: an int8 tensor in a float buffer layout ({r})")
            nbytes = 4 * (lay.num_words(node.sizes) if lay.is_int8 else lay.padded_numel(node.sizes))
            res = self.own(self.device.buffer(nbytes=nbytes, name=name))
            meta = self.own(self.device.uniform(lay.buffer_metadata(node.sizes), name=name + "-meta"))
        return res, meta

    def upload(self, node: Node, x):
        r = node.repr
        lay = r.workbench_layout
        a = np.ascontiguousarray(x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x))
        a = a.reshape(node.sizes)
        res, meta = self.alloc(node, r, node.name)
        if r.storage == "texture":
            res.upload(lay.to_texels(a.astype(np.int32 if node.dtype == "int8" else np.float32)))
        elif node.dtype == "int8":
            res.upload(lay.pack(a.astype(np.int8)))
        else:
            res.upload(lay.to_buffer(a.astype(np.float32)))
        self.res[node] = (res, meta)

    def download(self, node: Node):
        import torch
        r = node.repr
        lay = r.workbench_layout
        res, _ = self.res[node]
        if r.storage == "texture":
            out = lay.from_texels(res.download(), node.sizes)
            out = out.astype(np.int8) if node.dtype == "int8" else out
        elif node.dtype == "int8":
            out = lay.unpack(res.download(np.int32), node.sizes)
        else:
            out = lay.from_buffer(res.download(np.float32, (lay.padded_numel(node.sizes),)), node.sizes)
        return torch.from_numpy(np.ascontiguousarray(out))

    # -- dispatches -------------------------------------------------------------------------------------------------
    def add(self, fn, label, node, kind):
        self.calls.append((fn, label, node.name, kind))

    def convert(self, src: Node, src_res, dst: Node, dst_res, kind: str, label: str):
        """A layout conversion ``src.repr`` → ``dst.repr`` (same tensor): one q8ta_clone dispatch for int8, or
        float buffer(W) ↔ texture through the pack shaders."""
        from .kernels import linear_global_size, pipeline_for
        from .kernels import pack as P
        a, b = src.repr, dst.repr
        (si, sm), (do, dm) = src_res, dst_res
        if src.dtype == "int8":
            pipe = pipeline_for(self.device, CLONE_SHADER,
                                defines={"SRC_TEXTURE": int(a.storage == "texture"),
                                         "DST_TEXTURE": int(b.storage == "texture")},
                                spec_constants={3: b.workbench_layout.spec_constant(),
                                                4: a.workbench_layout.spec_constant()},
                                local_size=LOCAL_TEXELS if b.storage == "texture" else LOCAL_LINEAR)
            if b.storage == "texture":
                gs = b.workbench_layout.extents(dst.sizes)
            else:
                gs = linear_global_size(self.device, b.workbench_layout.num_words(dst.sizes), LOCAL_LINEAR[0])
            self.add(lambda rec: rec.dispatch(pipe, [do, si, dm, sm], gs, label=label), label, dst, kind)
            return
        if a.storage == "buffer" and a.layout == "WIDTH_PACKED" and b.storage == "texture":
            spec = P.TextureSpec(b.workbench_layout.name, dst.sizes)
            self.add(lambda rec: P.record_texture(rec, self.device, spec, do, si, dm, label=label), label, dst, kind)
            return
        if a.storage == "texture" and b.storage == "buffer" and b.layout == "WIDTH_PACKED":
            spec = P.TextureSpec(a.workbench_layout.name, src.sizes, direction="from_texture")
            self.add(lambda rec: P.record_texture(rec, self.device, spec, si, do, sm, label=label), label, dst, kind)
            return
        if a.storage == "texture" and b.storage == "texture":
            mid = Node(dst.name + "_nchw", "input", [], {}, dst.sizes, "float", None,
                       TensorRepr("buffer", "WIDTH_PACKED"))
            mid_res = self.alloc(mid, mid.repr, mid.name)
            self.convert(src, src_res, mid, mid_res, kind, label + ":to_nchw")
            self.convert(mid, mid_res, dst, dst_res, kind, label + ":to_texture")
            return
        raise NotImplementedError(f"float conversion {a} → {b} (the workbench converts float buffers only "
                                  "through WIDTH_PACKED)")

    def node(self, node: Node):
        from .kernels import conv_pw as CK
        from .kernels import pixel_shuffle as PK
        r = node.repr
        if node.is_transition or (node.op in IDENTITY_OPS and r != node.args[0].repr):
            src = node.args[0]
            if node.op == "view_copy" and node.sizes != src.sizes:
                raise NotImplementedError(f"{node.name}: shape-changing view between different reprs")
            self.res[node] = self.alloc(node, r, node.name)
            kind = "transition" if node.is_transition else "identity copy"
            self.convert(src, self.res[src], node, self.res[node], kind,
                         f"{CLONE_SHADER if node.dtype == 'int8' else 'float convert'} {src.repr.short}→{r.short}")
            return
        if node.op in IDENTITY_OPS:  # same repr: an alias of the input's resource, no dispatch
            if node.op == "view_copy" and node.sizes != node.args[0].sizes:
                raise NotImplementedError(f"{node.name}: shape-changing view_copy is not executed (the pass "
                                          "models it; View.cpp has no int8x4 path either)")
            self.res[node] = self.res[node.args[0]]
            return
        src = node.args[0]
        si, sm = self.res[src]
        p = node.params
        if node.op == "quantize_per_tensor":
            if src.repr.storage == "texture":  # the workbench's q8ta_quantize reads float buffers: stage first
                mid = Node(node.name + "_in", "input", [], {}, src.sizes, "float", None,
                           TensorRepr("buffer", "WIDTH_PACKED"))
                mid_res = self.alloc(mid, mid.repr, mid.name)
                self.convert(src, (si, sm), mid, mid_res, "staging", "texture_to_nchw (quantize input)")
                src, (si, sm) = mid, mid_res
            self.res[node] = do, dm = self.alloc(node, r, node.name)
            spec = PK.Q8taQuantizeSpec(node.sizes, src.repr.workbench_layout.name, r.layout, p["scale"],
                                       p["zero_point"])
            self._spec_dispatch(spec, [do, si, dm, sm], node, "q8ta_quantize")
            return
        if node.op == "dequantize_per_tensor":
            target = r if r.storage == "buffer" else TensorRepr("buffer", "WIDTH_PACKED")
            out_node = node if r.storage == "buffer" else Node(node.name + "_nchw", "input", [], {}, node.sizes,
                                                               "float", None, target)
            do, dm = self.alloc(out_node, target, out_node.name)
            spec = PK.Q8taDequantizeSpec(node.sizes, src.repr.layout, target.layout, p["scale"], p["zero_point"])
            self._spec_dispatch(spec, [do, si, dm, sm], node, "q8ta_dequantize")
            if r.storage == "texture":  # the workbench's q8ta_dequantize writes float buffers
                self.res[node] = self.alloc(node, r, node.name)
                self.convert(out_node, (do, dm), node, self.res[node], "staging", "nchw_to_texture (dequantize out)")
            else:
                self.res[node] = (do, dm)
            return
        if node.op == "q8ta_pixel_shuffle":
            self.res[node] = do, dm = self.alloc(node, r, node.name)
            spec = PK.Q8taPixelShuffleSpec(src.sizes, p["upscale_factor"], src.repr.layout, r.layout,
                                           p["input_scale"], p["input_zero_point"], p["output_scale"],
                                           p["output_zero_point"])
            self._spec_dispatch(spec, [do, si, dm, sm], node, spec.variant)
            return
        if node.op == "pixel_shuffle":
            if src.repr != r:
                raise NotImplementedError(f"{node.name}: float pixel shuffle with different in/out reprs")
            self.res[node] = do, dm = self.alloc(node, r, node.name)
            packed = {"WIDTH_PACKED": "width", "HEIGHT_PACKED": "height", "CHANNELS_PACKED": "channels"}[r.layout]
            spec = PK.PixelShuffleSpec(src.sizes, p["upscale_factor"], r.storage, packed, "float32")
            self._spec_dispatch(spec, [do, si, dm, sm], node, spec.variant)
            return
        if node.op == "q8ta_conv2d_pw":
            self.res[node] = do, dm = self.alloc(node, r, node.name)
            n, cin, h, w = src.sizes
            weight = np.asarray(p["weight"])
            shape = CK.ConvPwShape(n, cin, weight.shape[0], h, w)
            spec = CK.ConvPwSpec(shape, out_layout=r.layout, in_layout=src.repr.layout,
                                 use_dot_ext=bool(self.device.info.features.get("integer_dot_product")),
                                 relu=bool(p.get("relu", False)), apply_bias=p.get("bias") is not None)
            packed = CK.prepack_weights(weight, p["weight_scales"], p.get("bias"))
            bufs = {"out": do, "inp": si, "out_meta": dm, "in_meta": sm,
                    "weight": self.own(self.device.buffer(packed.weight, name=node.name + "-w")),
                    "weight_sums": self.own(self.device.buffer(packed.weight_sums, name=node.name + "-ws")),
                    "weight_scales": self.own(self.device.buffer(packed.scales, name=node.name + "-wsc")),
                    "bias": self.own(self.device.buffer(packed.bias, name=node.name + "-b"))}
            qp = CK.QParams(p["input_scale"], p["input_zero_point"], p["output_scale"], p["output_zero_point"])
            pipe = spec.pipeline(self.device)
            resources = [bufs[CK.BINDINGS[b.binding]] for b in pipe.bindings]
            push = qp.push_constants()[:pipe.push_constant_size]
            gs = spec.global_size()
            self.add(lambda rec: rec.dispatch(pipe, resources, gs, push, label=spec.variant), spec.variant, node, "op")
            return
        raise NotImplementedError(f"{node.name}: no workbench kernel for {node.op}")

    def _spec_dispatch(self, spec, resources, node, label):
        from .kernels import pipeline_for
        pipe = pipeline_for(self.device, spec.shader, defines=spec.defines or None,
                            spec_constants=spec.spec_constants(), local_size=spec.local_size)
        gs = spec.global_size(self.device)
        push = spec.push_constants()
        self.add(lambda rec: rec.dispatch(pipe, resources, gs, push, label=label), label, node, "op")


def execute(graph: Graph, inputs, device=None, repeats: int = 1) -> Execution:
    """Run a tagged graph on ``device`` (default: the workbench's current device) in ONE recording: every dispatch
    of the graph, ``repeats`` times over, each bracketed by GPU timestamps.  ``inputs``: a tensor (single-input
    graph) or a list / dict by input name, NCHW.  Returns an :class:`Execution`."""
    from . import vk
    if any(n.repr is None for n in graph.nodes):
        raise ValueError("tag the graph first (propagate / tag_memory_meta)")
    device = device or vk.get_device()
    in_nodes = [n for n in graph.nodes if n.op == "input"]
    if isinstance(inputs, dict):
        values = [inputs[n.name] for n in in_nodes]
    elif isinstance(inputs, (list, tuple)):
        values = list(inputs)
    else:
        values = [inputs]
    if len(values) != len(in_nodes):
        raise ValueError(f"the graph has {len(in_nodes)} inputs, got {len(values)} values")
    ex = _Executor(device, graph)
    try:
        for n, v in zip(in_nodes, values):
            ex.upload(n, v)
        for n in graph.nodes:
            if n.op != "input":
                ex.node(n)
        with device.record(f"graph {graph.name}") as rec:
            for _ in range(repeats):
                for fn, *_ in ex.calls:
                    fn(rec)
            rec.submit()
        k = len(ex.calls)
        ns = np.array([t.gpu_ns if t.gpu_ns is not None else np.nan for t in rec.timings], dtype=float)
        per = np.median(ns.reshape(repeats, k), axis=0) / 1e3 if k else np.zeros(0)
        outputs = [ex.download(o) for o in graph.outputs]
        return Execution(graph, outputs, [(lab, name, kind) for _, lab, name, kind in ex.calls], list(per), repeats)
    finally:
        ex.close()


def timing_rows(execution: Execution, setting: str, **extra):
    """Tidy DataFrame: one row per dispatch (setting, graph, index, label, node, kind, gpu_us) with the totals of
    its run (dispatches, transitions, transition_us, total_us) repeated on every row."""
    import pandas as pd
    g = execution.graph
    rows = []
    for i, ((label, node, kind), us) in enumerate(zip(execution.dispatches, execution.gpu_us)):
        rows.append({"graph": g.name, "setting": setting, "dispatch": i, "label": label, "node": node, "kind": kind,
                     "gpu_us": us, **extra})
    df = pd.DataFrame(rows)
    df["dispatches"] = len(execution.dispatches)
    df["transitions"] = len(g.transitions())
    df["transition_dispatches"] = sum(k == "transition" for _, _, k in execution.dispatches)
    df["transition_us"] = execution.kind_us("transition")
    df["total_us"] = execution.total_us
    df["repeats"] = execution.repeats
    return df


def summarize(df):
    """One row per (graph, setting) from :func:`timing_rows` frames."""
    cols = ["graph", "setting", "dispatches", "transitions", "transition_dispatches", "transition_us", "total_us"]
    return df.groupby(["graph", "setting"], sort=False)[cols[2:]].first().reset_index()


def run_settings(module, x, device=None, repeats: int = 3, name: str | None = None):
    """Trace ``module``, propagate under both settings, execute each on the device, and check against torch
    (``module(x)``).  Returns (propagations {setting: Propagation}, executions {setting: Execution}, tidy
    DataFrame, torch reference output)."""
    import pandas as pd
    import torch
    graph = from_fx(module, x, name=name)
    with torch.no_grad():
        ref = module(x)
    props, execs, frames = {}, {}, []
    for s in IDENTITY_SETTINGS:
        props[s] = propagate(graph, s)
        execs[s] = execute(props[s].graph, x, device=device, repeats=repeats)
        frames.append(timing_rows(execs[s], s))
    return props, execs, pd.concat(frames, ignore_index=True), ref
