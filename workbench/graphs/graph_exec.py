"""Run an int8 graph tagged by ExecuTorch's real ``TagMemoryMetaPass`` on the device, with per-dispatch timestamps.

    g = tagging.tagged(int8_graph.etvk_74_graph(), "before")          # reprs + transitions from the real pass
    e = execute(g, x, device)                                          # one recording, GPU time per dispatch
    tagged, execs, df, ref = run_settings(module, x, device)           # trace → tag (both settings) → run → rows

:func:`execute` records the graph ONCE: the kernels of ``workbench.kernels`` for the ops (``q8ta_conv2d_pw``, the
fused pixel shuffle, ``q8ta_add``, ``q8ta_quantize`` / ``q8ta_dequantize``, the float pixel shuffle), one
``shaders/q8ta_clone.glsl`` dispatch per int8 transition (int8x4 buffer ↔ int8x4 buffer / rgba32i texture),
``nchw_to_texture`` / ``texture_to_nchw`` for float buffer ↔ texture.  Identity ops are aliases (no dispatch) when
the pass gave input and output the same representation, else one copy of kind ``"identity copy"``.  The workbench's
quantize kernels read and write float buffers: a texture input / output gets one ``"staging"`` dispatch; its
``q8ta_add`` is word-wise, so an input the pass left in another layout of the same packed dim (ET-VK's kernel indexes
each tensor by its own layout) is staged through one ``q8ta_clone``.
:func:`timing_rows` → tidy DataFrame.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels import DeviceResources
from .int8_graph import (IDENTITY_OPS, Graph, Node, Repr)

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


class _Executor(DeviceResources):
    def __init__(self, device, graph: Graph):
        super().__init__(device)
        self.graph = graph
        self.res = {}       # node → (resource, metadata ubo)
        self.calls = []     # [(closure(rec), label, node name, kind)]

    # -- resources --------------------------------------------------------------------------------------------------
    def alloc(self, node: Node, r: Repr, name: str):
        lay = r.workbench_layout
        if r.storage == "texture":
            fmt = "rgba32i" if node.dtype == "int8" else "rgba32f"
            res = self._own(self.device.image(lay.extents(node.sizes), fmt, name=name))
            meta = self._own(self.device.uniform(lay.texture_metadata(node.sizes), name=name + "-meta"))
        else:
            if node.dtype == "int8" and not lay.is_int8:
                raise NotImplementedError(f"{node.name}: an int8 tensor in a float buffer layout ({r})")
            nbytes = 4 * (lay.num_words(node.sizes) if lay.is_int8 else lay.padded_numel(node.sizes))
            res = self._own(self.device.buffer(nbytes=nbytes, name=name))
            meta = self._own(self.device.uniform(lay.buffer_metadata(node.sizes), name=name + "-meta"))
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
        from ..kernels import linear_global_size, pipeline_for
        from ..kernels import pack as P
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
                       Repr("buffer", "WIDTH_PACKED"))
            mid_res = self.alloc(mid, mid.repr, mid.name)
            self.convert(src, src_res, mid, mid_res, kind, label + ":to_nchw")
            self.convert(mid, mid_res, dst, dst_res, kind, label + ":to_texture")
            return
        raise NotImplementedError(f"float conversion {a} → {b} (the workbench converts float buffers only "
                                  "through WIDTH_PACKED)")

    def node(self, node: Node):
        from ..kernels import conv_pw as CK
        from ..kernels import pixel_shuffle as PK
        from ..kernels import q8ta_quantize as QK
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
                           Repr("buffer", "WIDTH_PACKED"))
                mid_res = self.alloc(mid, mid.repr, mid.name)
                self.convert(src, (si, sm), mid, mid_res, "staging", "texture_to_nchw (quantize input)")
                src, (si, sm) = mid, mid_res
            self.res[node] = do, dm = self.alloc(node, r, node.name)
            spec = QK.Q8taQuantizeSpec(node.sizes, src.repr.workbench_layout.name, r.layout, p["scale"],
                                       p["zero_point"])
            self._spec_dispatch(spec, [do, si, dm, sm], node, "q8ta_quantize")
            return
        if node.op == "dequantize_per_tensor":
            target = r if r.storage == "buffer" else Repr("buffer", "WIDTH_PACKED")
            out_node = node if r.storage == "buffer" else Node(node.name + "_nchw", "input", [], {}, node.sizes,
                                                               "float", None, target)
            do, dm = self.alloc(out_node, target, out_node.name)
            spec = QK.Q8taDequantizeSpec(node.sizes, src.repr.layout, target.layout, p["scale"], p["zero_point"])
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
        if node.op == "q8ta_add":
            from ..kernels.q8ta_add import Q8taAddSpec
            if not (r.storage == "buffer" and r.is_int8):
                raise NotImplementedError(f"{node.name}: q8ta_add writes an int8x4 buffer, the pass gave {r}")
            # the workbench's q8ta_add is word-wise (one layout for all three tensors); where the pass gives an
            # input another layout of the same packed dim (ET-VK's kernel indexes each), a q8ta_clone stages it
            ins = []
            for k, a in enumerate(node.args):
                res = self.res[a]
                if a.repr != r:
                    staged = Node(f"{node.name}_in{k}", "input", [], {}, a.sizes, "int8", a.qparams, r)
                    res = self.alloc(staged, r, staged.name)
                    self.convert(a, self.res[a], staged, res, "staging",
                                 f"{CLONE_SHADER} {a.repr.short}→{r.short} (q8ta_add input)")
                ins.append(res[0])
            self.res[node] = do, dm = self.alloc(node, r, node.name)
            a, b = node.args
            spec = Q8taAddSpec(node.sizes, r.layout, a.qparams, b.qparams, node.qparams)
            self._spec_dispatch(spec, [do, *ins], node, "q8ta_add")
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
                    "weight": self._own(self.device.buffer(packed.weight, name=node.name + "-w")),
                    "weight_sums": self._own(self.device.buffer(packed.weight_sums, name=node.name + "-ws")),
                    "weight_scales": self._own(self.device.buffer(packed.scales, name=node.name + "-wsc")),
                    "bias": self._own(self.device.buffer(packed.bias, name=node.name + "-b"))}
            qp = CK.QParams(p["input_scale"], p["input_zero_point"], p["output_scale"], p["output_zero_point"])
            pipe = spec.pipeline(self.device)
            resources = [bufs[CK.BINDINGS[b.binding]] for b in pipe.bindings]
            push = qp.push_constants()[:pipe.push_constant_size]
            gs = spec.global_size()
            self.add(lambda rec: rec.dispatch(pipe, resources, gs, push, label=spec.variant), spec.variant, node, "op")
            return
        raise NotImplementedError(f"{node.name}: no workbench kernel for {node.op}")

    def _spec_dispatch(self, spec, resources, node, label):
        from ..kernels import record_spec
        self.add(lambda rec: record_spec(rec, self.device, spec, resources, label), label, node, "op")


def execute(graph: Graph, inputs, device=None, repeats: int = 1) -> Execution:
    """Run a tagged graph on ``device`` (default: the workbench's current device) in ONE recording: every dispatch
    of the graph, ``repeats`` times over, each bracketed by GPU timestamps.  ``inputs``: a tensor (single-input
    graph) or a list / dict by input name, NCHW.  Returns an :class:`Execution`."""
    from .. import vk
    from ..measure import keep_busy
    if any(n.repr is None for n in graph.nodes):
        raise ValueError(f"{graph.name}: untagged nodes {[n.name for n in graph.nodes if n.repr is None]}; tag the "
                         "graph first (workbench.graphs.tagging.tagged)")
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
        k = len(ex.calls)
        per = np.zeros(0)
        if k:   # a graph of aliases only has nothing to record
            with device.record(f"graph {graph.name}") as rec:
                for _ in range(repeats):
                    for fn, *_ in ex.calls:
                        fn(rec)
                keep_busy(rec, device)  # at a loaded GPU's clock; the last submit is the timed one
                rec.submit()
            ns = np.array([t.gpu_ns if t.gpu_ns is not None else np.nan for t in rec.timings], dtype=float)
            per = np.median(ns.reshape(repeats, k), axis=0) / 1e3
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


def run_settings(module, x, device=None, repeats: int = 3, name: str | None = None,
                 remove_redundant_first: bool = False):
    """Trace ``module`` (``workbench.graphs.int8_graph.from_fx``), tag it with ExecuTorch's real pass under both
    identity-op settings (``workbench.graphs.tagging.tagged``), execute each on the device, and compute the torch
    reference ``module(x)``.  Returns (tagged {setting: Graph}, executions {setting: Execution}, tidy DataFrame,
    torch reference output)."""
    import pandas as pd
    import torch
    from . import tagging as RT
    from .int8_graph import from_fx
    graph = from_fx(module, x, name=name)
    with torch.no_grad():
        ref = module(x)
    tagged, execs, frames = {}, {}, []
    for s in RT.SETTINGS:
        tagged[s] = RT.tagged(graph, s, remove_redundant_first)
        execs[s] = execute(tagged[s], x, device=device, repeats=repeats)
        frames.append(timing_rows(execs[s], s))
    return tagged, execs, pd.concat(frames, ignore_index=True), ref
