"""From one dispatch of a model on ET-VK's runtime to the same shader at the same shape through the workbench's own
dispatch: times side by side, the output checked against torch, the statistics of every compiler the workbench has.

    p = profile.profile("residual_add", executorch=...)
    drill.options(p, dispatch_id=2)          # ("q8ta_conv2d_pw", {"shape": (1, 16, 16, 16), "out_channels": 16, …})
    drill.drill(p, dispatch_id=2)            # one row: runtime µs, workbench µs, ratio, correct, …
    drill.fidelity_items(p)                    # every drillable dispatch as {family, options}: see :mod:`.fidelity`

What the event gives (its JSON: sizes, dtype, storage, packed dim of every tensor argument, the scalars) is
completed by the lowering's record of the node (:mod:`.revision`: the int8 layouts TagMemoryMetaPass chose, the
op's scalar arguments), joined through ``delegate_node_id``. :data:`FAMILY_OPTIONS` says, per kernel family the
workbench dispatches, how a dispatch becomes that family's ``make`` options; a kernel without one is listed as
not drillable, with the reason.
"""
from __future__ import annotations

import json

import pandas as pd

from ...measure.ways import BARRIERS, TIMESTAMPS  # the ways of timing live with the method

# ET-VK's int8 layout names (TagMemoryMetaPass) → the workbench's; PACKED_INT8_CONV2D is resolved per device at
# load time (4C1W, or 4C where ET-VK prefers it) — the workbench runs it as 4C1W
INT8_LAYOUTS = {"PACKED_INT8_4W4C": "4W4C", "PACKED_INT8_4H4W": "4H4W", "PACKED_INT8_4W": "4W", "PACKED_INT8_4C": "4C",
                "PACKED_INT8_4C1W": "4C1W", "PACKED_INT8_CONV2D": "4C1W"}
FLOAT_LAYOUTS = {0: "WIDTH_PACKED", 1: "HEIGHT_PACKED", 2: "CHANNELS_PACKED"}


class NotDrillable(ValueError):
    """The dispatch's kernel has no family in the workbench, or the event lacks what the family needs."""


def _tensors(args) -> list[dict]:
    return [a for a in args if a.get("type") == "TENSOR"]


def _sizes(a) -> tuple:
    return tuple(int(s) for s in a["sizes"])


def _storage(a) -> str:
    return "texture3d" if a.get("storage", "").startswith("TEXTURE") else "buffer"


def _int8(name) -> str:
    if name not in INT8_LAYOUTS:
        raise NotDrillable(f"no int8 layout recorded for this node (got {name!r}; expected one of "
                           f"{sorted(INT8_LAYOUTS)})")
    return INT8_LAYOUTS[name]


def _conv_pw(row, node, args):
    ins, out = _tensors(args)[0], _tensors(args)[-1]
    refs = [a for a in args if a.get("type") == "TENSORREF"]
    activation = next((s for s in node.get("scalars", []) if s in ("relu", "none")), "none")
    return {"shape": _sizes(ins), "out_channels": _sizes(out)[1], "out_layout": _int8(node.get("layout")),
            "bias": len(refs) >= 4, "relu": activation == "relu", "fallback": "fallback" in row["kernel"]}


def _quantize(row, node, args):
    ins = _tensors(args)[0]
    return {"shape": _sizes(ins), "storage": _storage(ins), "in_layout": FLOAT_LAYOUTS[int(ins["packed_dim"])],
            "out_layout": _int8(node.get("layout"))}


def _dequantize(row, node, args):
    ins, out = _tensors(args)[0], _tensors(args)[-1]
    layouts = node.get("input_layouts") or [None]
    return {"shape": _sizes(ins), "storage": _storage(out), "in_layout": _int8(layouts[0]),
            "out_layout": FLOAT_LAYOUTS[int(out["packed_dim"])]}


def _binary(row, node, args):
    a, b = _tensors(args)[0], _tensors(args)[1]
    layouts = node.get("input_layouts") or [None, None]
    return {"shape": _sizes(a), "other_shape": _sizes(b), "op": "add", "in_layout": _int8(layouts[0]),
            "other_layout": _int8(layouts[1] if len(layouts) > 1 else layouts[0]),
            "out_layout": _int8(node.get("layout"))}


def _clone(row, node, args):
    ins = _tensors(args)[0]
    layouts = node.get("input_layouts") or [None]
    return {"shape": _sizes(ins), "in_layout": _int8(layouts[0]), "out_layout": _int8(node.get("layout"))}


def _pixel_shuffle(row, node, args):
    ins, out = _tensors(args)[0], _tensors(args)[-1]
    layouts = node.get("input_layouts") or [None]
    r = _sizes(out)[-1] // _sizes(ins)[-1]
    return {"shape": _sizes(ins), "r": r, "in_layout": _int8(layouts[0]), "out_layout": _int8(node.get("layout"))}


def _conv_args(row, node, args):
    """The options every q8ta conv family shares, from the event: input sizes, output channels, the INTLIST
    arguments in schema order (kernel_size, stride, padding, dilation), groups (the INT after them), activation,
    the int8 layouts the lowering recorded."""
    ins, out = _tensors(args)[0], _tensors(args)[-1]
    lists = [a["values"] for a in args if a.get("type") == "INTLIST"]
    if len(lists) < 4:
        raise NotDrillable(f"{row['kernel']}: the event lists {len(lists)} int lists, expected kernel_size, stride, "
                           "padding, dilation")
    after = args[[i for i, a in enumerate(args) if a.get("type") == "INTLIST"][3] + 1:]
    groups = next((int(a["value"]) for a in after if a.get("type") == "INT"), 1)
    refs = [a for a in args if a.get("type") == "TENSORREF"]
    activation = next((s for s in node.get("scalars", []) if s in ("relu", "none")), "none")
    layouts = node.get("input_layouts") or [None]
    return {"shape": _sizes(ins), "out_channels": _sizes(out)[1], "kernel_size": tuple(lists[0]),
            "stride": tuple(lists[1]), "padding": tuple(lists[2]), "dilation": tuple(lists[3]), "groups": groups,
            "in_layout": _int8(layouts[0]), "out_layout": _int8(node.get("layout")), "bias": len(refs) >= 4,
            "relu": activation == "relu", "fallback": "fallback" in row["kernel"]}


def _conv(row, node, args):
    return _conv_args(row, node, args)


def _conv_dw(row, node, args):
    opts = _conv_args(row, node, args)
    opts.pop("groups")
    return opts


def _im2col(row, node, args):
    opts = _conv_args(row, node, args)
    for k in ("bias", "relu", "out_layout", "fallback"):   # the im2col step writes windows; the GEMM does the rest
        opts.pop(k)
    return opts


def _im2col_gemm(row, node, args):
    return {**_conv_args(row, node, args), "host_im2col": True}   # the GEMM alone, on the host's im2col


def _linear(row, node, args):
    ins, out = _tensors(args)[0], _tensors(args)[-1]
    refs = [a for a in args if a.get("type") == "TENSORREF"]
    activation = next((s for s in node.get("scalars", []) if s in ("relu", "none")), "none")
    sizes = _sizes(ins)
    opts = {"shape": sizes, "out_features": _sizes(out)[-1], "bias": len(refs) >= 4,
            "relu": activation == "relu", "fallback": "fallback" in row["kernel"]}
    if len(sizes) > 2 and any(s > 1 for s in sizes[:-2]):
        opts["etvk_batch"] = True   # dispatch it as ET-VK does: its shader covers the last two dims only
    return opts


# (operator, kernel-name prefix) → (workbench family, options from (row, node, event args)); the operator "*"
# matches any; the longest prefix wins among the rows that match
FAMILY_OPTIONS = {
    ("q8ta_conv2d", "q8ta_im2col"): ("q8ta_im2col", _im2col),
    ("q8ta_conv2d", "q8ta_conv2d_pw"): ("q8ta_conv2d_im2col", _im2col_gemm),
    ("*", "q8ta_conv2d_dw"): ("q8ta_conv2d_dw", _conv_dw),
    ("q8ta_conv2d", "q8ta_conv2d"): ("q8ta_conv2d", _conv),
    ("*", "q8ta_linear_gemv"): ("q8ta_linear_gemv", _linear),
    ("q8ta_linear", "q8ta_linear"): ("q8ta_linear", _linear),
    ("q8ta_conv2d_pw", "q8ta_conv2d_pw"): ("q8ta_conv2d_pw", _conv_pw),
    ("*", "q8ta_quantize"): ("q8ta_quantize", _quantize),
    ("*", "q8ta_dequantize"): ("q8ta_dequantize", _dequantize),
    ("*", "q8ta_add"): ("q8ta_binary", _binary),
    ("*", "q8ta_binary"): ("q8ta_binary", _binary),
    ("*", "q8ta_clone"): ("q8ta_clone", _clone),
    ("*", "q8ta_pixel_shuffle"): ("q8ta_pixel_shuffle", _pixel_shuffle),
}


def _node_for(profile, row) -> dict:
    program = profile.programs[row["revision"]]
    ids = program.summary.get("delegate_node_ids") or [{}]
    node_id = row.get("delegate_node_id")
    if node_id is None or pd.isna(node_id):
        raise NotDrillable(f"dispatch {row['dispatch_id']} ({row['kernel']}) is ET-VK's own staging, not an op")
    name = next((d[str(int(node_id))] for d in ids if str(int(node_id)) in d), None)
    if name is None:
        raise NotDrillable(f"delegate_node_id {int(node_id)} is not among the lowering's recorded nodes")
    node = dict(program.summary.get("nodes", {}).get(name, {}))
    node["name"] = name
    return node


def family_key(operator: str, kernel: str) -> tuple | None:
    """The FAMILY_OPTIONS key of an ET-VK dispatch (its operator and kernel name), or None where no family ports it."""
    matches = [(op, k) for op, k in FAMILY_OPTIONS if kernel.startswith(k) and op in ("*", operator)]
    return max(matches, key=lambda m: (len(m[1]), m[0] != "*")) if matches else None


def options(profile, dispatch_id: int, revision: str | None = None) -> tuple[str, dict]:
    """(workbench family, its make options) for one dispatch of a :class:`~.profile.Profile`."""
    rows = profile.dispatches
    revision = revision or profile.revisions[0]
    match = rows[(rows["revision"] == revision) & (rows["dispatch_id"] == int(dispatch_id))]
    if match.empty:
        raise ValueError(f"no dispatch {dispatch_id} at {revision!r}; expected one of "
                         f"{sorted(rows[rows['revision'] == revision]['dispatch_id'])}")
    row = match.iloc[0]
    if pd.isna(row.get("delegate_node_id")):
        raise NotDrillable(f"dispatch {dispatch_id} ({row['kernel']}) is ET-VK's own staging copy, not an op")
    key = family_key(row["operator"], row["kernel"])
    if key is None:
        raise NotDrillable(f"{row['kernel']} ({row['operator']}): the workbench has no dispatch for this kernel "
                           f"family (it has {', '.join(sorted({f for f, _ in FAMILY_OPTIONS.values()}))})")
    family, make_options = FAMILY_OPTIONS[key]
    args = json.loads(profile.dispatches.loc[match.index[0], "args"])
    return family, make_options(row, _node_for(profile, row), args)


def prepare(device, gen, family: str, options: dict, *, warm_seconds: float = 1.0):
    """The family's Dispatch for `options`, compiled (with its earlier steps), the GPU then kept busy for
    `warm_seconds`: between items a GPU idles down (the H200 to 345 MHz, which made the workbench 3–4× slow)."""
    from ..run import make
    from .profile import warm_gpu
    d = make(gen, family, **options)
    for variant in [step.variant for step in d.before] + [d.variant]:
        gen.compile(variant)              # compile first: the GPU must not idle between warm-up and timing
    warm_gpu(device, warm_seconds)
    return d


def timed(device, gen, d, *, timestamps: str = "etvk", barriers: str = "light", between: str = "none",
          back_to_back: int = 20, statistics: bool = False) -> dict:
    """The dispatch checked against torch and timed the way a model's dispatch is timed on ET-VK's runtime:
    `back_to_back` copies per submit (a lone dispatch resubmitted lets the clock sag, ~1,300 MHz on the H200),
    the start timestamp before each copy's barrier (``timestamps="etvk"``, as ``DispatchNode::encode``; or
    ``"workbench"``), ``barriers`` light or full (all commands), ``between`` what runs untimed before each copy
    (:func:`workbench.measure.parse_between`)."""
    from ..run import execute
    if timestamps not in TIMESTAMPS or barriers not in BARRIERS:
        raise ValueError(f"timestamps must be 'etvk' or 'workbench' and barriers 'light' or 'full'; got "
                         f"timestamps={timestamps!r}, barriers={barriers!r}")
    got = execute(device, gen, d, measure=True, statistics=statistics, back_to_back=back_to_back, between=between,
                  barrier_timed=timestamps == "etvk", full_barriers=barriers == "full")
    return {**got, "timestamps": timestamps, "barriers": barriers, "between": between}


def drill(profile, dispatch_id: int, revision: str | None = None, *, device=None, gen=None, executorch=None,
          statistics: bool = True, warm_seconds: float = 1.0) -> dict:
    """The dispatch through the workbench's own dispatch, timed as :func:`timed` does: one row beside ET-VK's
    runtime time."""
    from ... import vk
    from ..codegen import Codegen, source
    revision = revision or profile.revisions[0]
    family, opts = options(profile, dispatch_id, revision)
    rows = profile.dispatches
    row = rows[(rows["revision"] == revision) & (rows["dispatch_id"] == int(dispatch_id))].iloc[0]
    device = device or vk.get_device()
    if gen is None:
        commit = row["etvk_commit"]
        gen = Codegen(source(executorch) if revision.startswith("working tree") else
                      source(executorch, rev=commit))
    got = timed(device, gen, prepare(device, gen, family, opts, warm_seconds=warm_seconds), statistics=statistics)
    out = {"model": row["model"], "revision": revision, "dispatch_id": int(dispatch_id), "operator": row["operator"],
           "kernel": row["kernel"], "family": family, "options": json.dumps(opts, default=list),
           "runtime_us": float(row["gpu_us"]), "workbench_variant": got.get("variant"),
           "workbench_us": got.get("median_us"), "correct": got.get("correct"),
           "same_variant": got.get("variant") == row["kernel"], "global_size": got.get("global_size"),
           "local_size": got.get("local_size")}
    if out["workbench_us"]:
        out["ratio"] = out["workbench_us"] / out["runtime_us"]
    out.update({k: v for k, v in got.items() if k in ("registers", "spills", "timestamps", "barriers", "back_to_back",
                                                      "device", "driver", "commit")})
    return out


def fidelity_items(profile, revision: str | None = None) -> list[dict]:
    """Every drillable dispatch as {model, revision, dispatch_id, kernel, family, options}: the input of
    ``workbench etvk run-items`` (the workbench's dispatch of the same cases, on another machine)."""
    revision = revision or profile.revisions[0]
    items = []
    for _, r in profile.dispatches[profile.dispatches["revision"] == revision].iterrows():
        try:
            family, opts = options(profile, int(r["dispatch_id"]), revision)
        except NotDrillable:
            continue
        items.append({"model": r["model"], "revision": revision, "dispatch_id": int(r["dispatch_id"]),
                      "kernel": r["kernel"], "family": family,
                      "options": {k: list(v) if isinstance(v, tuple) else v for k, v in opts.items()}})
    return items
