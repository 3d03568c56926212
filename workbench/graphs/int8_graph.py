"""int8 graphs the workbench builds by hand or traces from torch, for ExecuTorch's real tagging pass and the device.

* :class:`Graph` of :class:`Node` s (one tensor each): built by hand (:meth:`Graph.input`, :meth:`Graph.call`) or
  traced from a torch module with torch.fx (:func:`from_fx`; the quantized ops are the leaf modules
  :class:`Quantize`, :class:`Dequantize`, :class:`QConvPw`, :class:`QPixelShuffle`, :class:`QAdd`, :class:`Alias`;
  ``torch.clone`` / ``.clone()`` / ``.contiguous()`` / ``.view()`` / :func:`alias` / ``F.pixel_shuffle`` /
  ``nn.PixelShuffle`` map to the edge ops of the same names).  The leaf modules compute in the kernels' fp32
  operation order: they are the torch references of the executed graphs.
* :class:`RefineNetHead` — a RefineNet-like segmentation head: four conv_pw → ``_clone_dim_order`` →
  q8ta_pixel_shuffle stages.  :func:`etvk_74_graph` / :class:`ConvViewConv` — §7.4's conv_pw → view_copy → conv_pw.
* :class:`Repr` — a tensor's (storage, layout) in the workbench's layout names.  The graphs carry no tagging logic:
  ``workbench.graphs.tagging.tagged`` runs ExecuTorch's own ``TagMemoryMetaPass`` on them and returns a copy with
  every node's repr and the transitions (:data:`TRANSITION` nodes) the real pass inserted;
  ``workbench.graphs.graph_exec`` runs that on the device.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import layouts as L

FLOAT_LAYOUTS = ("WIDTH_PACKED", "HEIGHT_PACKED", "CHANNELS_PACKED")
INT8_LAYOUTS = ("4W4C", "4H4W", "4W", "4C", "4C1W")
STORAGES = ("buffer", "texture")
_SHORT = {"WIDTH_PACKED": "W", "HEIGHT_PACKED": "H", "CHANNELS_PACKED": "C"}

#: The identity ops whose registration PR #19395 changed.
IDENTITY_OPS = ("view_copy", "clone", "_clone_dim_order", "alias_copy")
#: The ops a graph may hold (every one has an edge op in ``workbench.graphs.tagging.to_fx``).
OPS = ("quantize_per_tensor", "dequantize_per_tensor", "q8ta_conv2d_pw", "q8ta_pixel_shuffle", "q8ta_add",
       "pixel_shuffle") + IDENTITY_OPS
TRANSITION = "transition"  # op name of the clones the tagging pass inserts


@dataclass(frozen=True)
class Repr:
    """(storage, memory layout) of one tensor, in the workbench's layout names (ET-VK's ``TensorRepr`` read back:
    ``workbench.graphs.tagging`` translates)."""

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
        return L.get_layout(self.layout + "_TEXTURE" if self.storage == "texture" else self.layout)

    @property
    def is_int8(self) -> bool:
        return self.layout in INT8_LAYOUTS

    @property
    def short(self) -> str:
        return f"{'buf' if self.storage == 'buffer' else 'tex'} {_SHORT.get(self.layout, self.layout)}"

    def __str__(self):
        return f"{self.storage}:{self.layout}"


# ---------------------------------------------------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------------------------------------------------

@dataclass(eq=False)
class Node:
    """One tensor-producing node.  ``op``: one of :data:`OPS`, ``"input"`` or ``"transition"``; ``args``:
    tensor-producing nodes; ``params``: everything else (qparams, weights, r...); ``repr``: set by
    ``workbench.graphs.tagging.tagged``."""

    name: str
    op: str
    args: list = field(default_factory=list)
    params: dict = field(default_factory=dict)
    sizes: tuple = ()
    dtype: str = "float"             # "float" | "int8"
    qparams: tuple | None = None     # (scale, zero_point) of an int8 tensor
    repr: Repr | None = None

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
        if op not in OPS and op != TRANSITION:
            raise KeyError(f"unknown op {op!r}; ops: {', '.join(OPS)}")
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


class _PerTensor(_module_base()):
    """A conversion between float and int8 with one (scale, zero point) for the whole tensor."""

    def __init__(self, scale: float, zero_point: int):
        super().__init__()
        self.scale, self.zero_point = float(scale), int(zero_point)

    def params(self):
        return {"scale": self.scale, "zero_point": self.zero_point}


class Quantize(_PerTensor):
    """float → int8: ``clamp(roundEven(x · (1/scale)) + zp)`` (q8ta_quantize's order)."""

    op = "quantize_per_tensor"

    def forward(self, x):
        torch = _torch()
        s = x.float() * torch.tensor(_inv(self.scale), dtype=torch.float32)
        return torch.clamp(torch.round(s) + self.zero_point, -128, 127).to(torch.int8)


class Dequantize(_PerTensor):
    """int8 → float: ``float(q − zp) · scale``."""

    op = "dequantize_per_tensor"

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
        from ..kernels.pixel_shuffle import is_passthrough
        y = torch.nn.functional.pixel_shuffle(q, self.upscale_factor)
        if is_passthrough(self.input_scale, self.input_zero_point, self.output_scale, self.output_zero_point):
            return y
        dq = (y.to(torch.int32) - self.input_zero_point).float() * torch.tensor(self.input_scale, dtype=torch.float32)
        s = dq * torch.tensor(_inv(self.output_scale), dtype=torch.float32)
        return torch.clamp(torch.round(s) + self.output_zero_point, -128, 127).to(torch.int8)


class QAdd(_module_base()):
    """int8 add: ``clamp(roundEven((float(a − zp_a) · s_a + float(b − zp_b) · s_b) · (1/s_out)) + zp_out)``."""

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
    input, and map the fx nodes to the graph's ops: leaf modules → their op; ``nn.PixelShuffle`` /
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
                raise NotImplementedError(f"fx node {n.name}: module {type(m).__name__} has no graph op")
        elif n.op == "call_function":
            if n.target in (F.pixel_shuffle, torch.pixel_shuffle):
                env[n] = g.call("pixel_shuffle", tensor_args[0], name=n.name, upscale_factor=int(n.args[1]))
            elif n.target is torch.clone:
                op = "_clone_dim_order" if "memory_format" in n.kwargs else "clone"
                env[n] = g.call(op, tensor_args[0], name=n.name)
            elif n.target is alias:
                env[n] = g.call("alias_copy", tensor_args[0], name=n.name)
            else:
                raise NotImplementedError(f"fx node {n.name}: function {n.target} has no graph op")
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
                raise NotImplementedError(f"fx node {n.name}: method {n.target} has no graph op")
        else:
            raise NotImplementedError(f"fx node {n.name}: {n.op} is not supported")
    return g


def reference(graph: Graph, inputs):
    """The torch reference of ``graph`` (tagged or not: transitions and identity ops pass values through), computed
    with the leaf modules above.  ``inputs``: a tensor (one input) or a list / dict by input name.  Returns the
    outputs, NCHW torch tensors."""
    import torch.nn.functional as F
    in_nodes = [n for n in graph.nodes if n.op == "input"]
    if isinstance(inputs, dict):
        values = [inputs[n.name] for n in in_nodes]
    else:
        values = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    vals = dict(zip(in_nodes, values))
    for n in graph.nodes:
        if n.op == "input":
            continue
        a = [vals[x] for x in n.args]
        p = n.params
        if n.op in IDENTITY_OPS or n.is_transition:
            v = a[0].reshape(n.sizes)
        elif n.op == "quantize_per_tensor":
            v = Quantize(p["scale"], p["zero_point"])(a[0])
        elif n.op == "dequantize_per_tensor":
            v = Dequantize(p["scale"], p["zero_point"])(a[0])
        elif n.op == "q8ta_conv2d_pw":
            v = QConvPw(p["weight"], p["weight_scales"], p.get("bias"), p["input_scale"], p["input_zero_point"],
                        p["output_scale"], p["output_zero_point"], relu=p.get("relu", False))(a[0])
        elif n.op == "q8ta_pixel_shuffle":
            v = QPixelShuffle(p["upscale_factor"], p["input_scale"], p["input_zero_point"], p["output_scale"],
                              p["output_zero_point"])(a[0])
        elif n.op == "pixel_shuffle":
            v = F.pixel_shuffle(a[0], int(p["upscale_factor"]))
        elif n.op == "q8ta_add":
            (sa, za), (sb, zb) = n.args[0].qparams, n.args[1].qparams
            v = QAdd(sa, za, sb, zb, p["output_scale"], p["output_zero_point"])(a[0], a[1])
        else:
            raise NotImplementedError(f"{n.name}: no reference for {n.op}")
        vals[n] = v
    return [vals[o] for o in graph.outputs]


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


