"""Run the int8 data-movement ops of a real tagged graph (``workbench.etvk.model.lowering.Lowered``) on the device
with the workbench's kernels: each ``q8ta_pixel_shuffle``, ``q8ta_add`` and int8 transition (``clone``) at the shape, layouts
and quantization parameters the real passes gave it, all in ONE recording with per-dispatch GPU timestamps, each
output checked against its reference (torch's quantized add via ``workbench.quant``, the shuffle's reference, the identity for a clone).

Inputs are random int8 (the ops between them — convolutions, pooling, float ops — have no workbench kernel here and
are listed with ``kernel = None``).  :data:`KERNELS` maps an op name to the function that records it: that is the
hook where ET-VK's real kernels (``workbench.etvk``) can substitute for the workbench's own.

``PACKED_INT8_CONV2D`` is resolved per device at load time by ET-VK (4C1W or 4C, reference §1.11); it runs as 4C1W.
"""
from __future__ import annotations

import numpy as np

from .. import layouts as L
from ..quant import quantize_per_tensor

_LAYOUTS = {"PACKED_INT8_4W4C": "4W4C", "PACKED_INT8_4H4W": "4H4W", "PACKED_INT8_4W": "4W", "PACKED_INT8_4C": "4C",
            "PACKED_INT8_4C1W": "4C1W", "PACKED_INT8_CONV2D": "4C1W"}


def workbench_layout(etvk_layout: str) -> str:
    if etvk_layout not in _LAYOUTS:
        raise ValueError(f"no workbench int8x4 layout for ET-VK's {etvk_layout}; expected one of {sorted(_LAYOUTS)}")
    return _LAYOUTS[etvk_layout]


class _Run:
    def __init__(self, device, seed: int = 0):
        self.device, self.rng = device, np.random.default_rng(seed)
        self.owned, self.steps, self.checks = [], [], []

    def own(self, obj):
        self.owned.append(obj)
        return obj

    def int8_input(self, shape, layout):
        import torch
        x = torch.from_numpy(self.rng.integers(-128, 128, size=shape, dtype=np.int8))
        return x, self.own(self.device.buffer(L.get_layout(layout).pack(x)))

    def output(self, shape, layout):
        return self.own(self.device.buffer(nbytes=4 * L.get_layout(layout).num_words(shape)))

    def ubo(self, data: bytes):
        return self.own(self.device.uniform(data))

    def close(self):
        for o in reversed(self.owned):
            o.close()


def _record_add(run, row, node, args):
    from ..kernels import record_spec
    from ..kernels.q8ta_add import Q8taAddSpec
    import torch
    lay = workbench_layout(row["layout"])
    shape = row["shape"]
    qa, qb, qo = (args[2], args[3]), (args[4], args[5]), (args[6], args[7])
    spec = Q8taAddSpec(shape, lay, qa, qb, qo)
    a, ba = run.int8_input(shape, lay)
    b, bb = run.int8_input(shape, lay)
    out = run.output(shape, lay)
    run.steps.append(lambda rec: record_spec(rec, run.device, spec, [out, ba, bb], row["node"]))

    def check():
        da = (a.int() - qa[1]).float() * torch.tensor(qa[0], dtype=torch.float32)
        db = (b.int() - qb[1]).float() * torch.tensor(qb[0], dtype=torch.float32)
        want = quantize_per_tensor(da + db, qo[0], qo[1])    # bit-exact with torch.quantize_per_tensor
        got = L.get_layout(lay).unpack(torch.from_numpy(out.download(np.int32)), shape)
        diff = (got.int() - want.int()).abs()
        if diff.any():
            # the calibrated scales of real graphs occasionally put a sum on a rounding tie (the kernel multiplies
            # by 1 / scale as ET-VK's does, torch divides): 1 LSB (ET-VK's own tolerance for requantizing ops) on a
            # handful of elements — at most 2, or 0.1 % of a large tensor — is reported, anything more fails
            i = tuple(diff.nonzero()[0].tolist())
            print(f"q8ta_add {row['node']} {lay} {shape} qparams {qa} {qb} {qo}: {int((diff > 0).sum())} of "
                  f"{diff.numel()} differ, first at {i}: a={int(a[i])} b={int(b[i])} got {int(got[i])} "
                  f"want {int(want[i])}")
        return int(diff.max()) <= 1 and int((diff > 0).sum()) <= max(2, int(0.001 * diff.numel()))
    run.checks.append(check)
    return "q8ta_add", spec.bytes_moved()


def _record_pixel_shuffle(run, row, node, args, in_layout):
    from ..kernels import record_spec
    from ..kernels.pixel_shuffle import Q8taPixelShuffleSpec
    import torch
    out_lay = workbench_layout(row["layout"])
    in_lay = workbench_layout(in_layout)
    in_shape = tuple(args[0].meta["val"].shape)
    spec = Q8taPixelShuffleSpec(in_shape, int(args[5]), in_lay, out_lay, float(args[1]), int(args[2]),
                                1.0 / float(args[3]), int(args[4]))
    x, bx = run.int8_input(in_shape, in_lay)
    out = run.output(spec.out_sizes, out_lay)
    om, im = (run.ubo(m) for m in spec.metadata())
    run.steps.append(lambda rec: record_spec(rec, run.device, spec, [out, bx, om, im], row["node"]))

    def check():
        got = L.get_layout(out_lay).unpack(torch.from_numpy(out.download(np.int32)), spec.out_sizes)
        return np.array_equal(got.numpy(), np.asarray(spec.reference(x)))
    run.checks.append(check)
    return spec.variant, spec.bytes_moved()


def _record_clone(run, row, node, args, in_layout):
    from ..kernels import linear_global_size, pipeline_for
    import torch
    if row["storage"] != "BUFFER":
        raise NotImplementedError(f"{row['node']}: int8 transition to {row['storage']} (int8 lives in buffers)")
    out_lay, in_lay = workbench_layout(row["layout"]), workbench_layout(in_layout)
    shape = row["shape"]
    x, bx = run.int8_input(shape, in_lay)
    out = run.output(shape, out_lay)
    om = run.ubo(L.get_layout(out_lay).buffer_metadata(shape))
    im = run.ubo(L.get_layout(in_lay).buffer_metadata(shape))
    pipe = pipeline_for(run.device, "q8ta_clone", defines={"SRC_TEXTURE": 0, "DST_TEXTURE": 0},
                        spec_constants={3: L.get_layout(out_lay).spec_constant(),
                                        4: L.get_layout(in_lay).spec_constant()}, local_size=(64, 1, 1))
    gs = linear_global_size(run.device, L.get_layout(out_lay).num_words(shape), 64)
    run.steps.append(lambda rec: rec.dispatch(pipe, [out, bx, om, im], gs, label=row["node"]))

    def check():
        got = L.get_layout(out_lay).unpack(torch.from_numpy(out.download(np.int32)), shape)
        return torch.equal(got, x)
    run.checks.append(check)
    nb = 4 * (L.get_layout(out_lay).num_words(shape) + L.get_layout(in_lay).num_words(shape))
    return f"q8ta_clone {in_lay}->{out_lay}", nb


#: op name → recorder; the hook where a real ET-VK kernel can take the workbench kernel's place.
KERNELS = {"q8ta_add": _record_add, "q8ta_pixel_shuffle": _record_pixel_shuffle, "clone": _record_clone}


def run_int8_ops(lowered, device=None, repeats: int = 5, seed: int = 0):
    """Per-dispatch GPU times of the real graph's int8 data-movement ops → tidy DataFrame (one row per node;
    ``kernel`` None where the workbench has no kernel).  Raises AssertionError if any output is wrong."""
    import pandas as pd

    from .. import vk
    from ..measure import keep_busy
    device = device or vk.get_device()
    df = lowered.table()
    rows, run = [], _Run(device, seed)
    try:
        for d, gm in enumerate(lowered.tagged):
            by_name = {n.name: n for n in gm.graph.nodes}
            tab = df[df["delegate"] == d].set_index("node")
            for name, row in tab.iterrows():
                if row["op"] == "input":
                    continue
                node = by_name[name]
                r = {"model": lowered.name, "setting": lowered.setting, "node": name, "op": row["op"],
                     "shape": "x".join(map(str, row["shape"])), "layout": row["layout"],
                     "transition": bool(row["transition"]), "kernel": None, "bytes": 0}
                rec_fn = KERNELS.get(row["op"])
                if rec_fn is not None and row["dtype"] == "int8":
                    args = list(node.args)
                    if rec_fn is _record_add:
                        r["kernel"], r["bytes"] = rec_fn(run, {**row, "node": name}, node, args)
                    else:
                        in_layout = tab.loc[args[0].name, "layout"]
                        r["kernel"], r["bytes"] = rec_fn(run, {**row, "node": name}, node, args, in_layout)
                rows.append(r)
        samples = {}
        with device.record(label=f"{lowered.name} int8 ops") as rec:
            for step in run.steps:
                step(rec)
            keep_busy(rec, device)  # time at a loaded GPU's clock
            for _ in range(repeats):
                for t in rec.submit():
                    samples.setdefault(t.label, []).append(t.gpu_ns)
        bad = [r["node"] for r, ok in zip([r for r in rows if r["kernel"]], [c() for c in run.checks]) if not ok]
        assert not bad, f"wrong outputs from the workbench kernels for {bad}"
    finally:
        run.close()
    out = pd.DataFrame(rows)
    out["gpu_us_median"] = [np.median(samples[n]) / 1e3 if n in samples else np.nan for n in out["node"]]
    return out
