"""Layout propagation (workbench.propagation): repsets, the tagging pass on hand-built graphs with hand-derived
answers (etvk.md §7.4 among them), fx tracing, and the tagged graphs executed on the device against torch."""
import numpy as np
import pytest
import torch

from workbench import propagation as P

T, B = "texture", "buffer"


def test_repset_basics_and_set_order():
    assert P.set_order({"4W4C", "4C1W", "4C"}) == ["4C1W", "4W4C", "4C"]   # CPython set order of {3, 8, 6}
    assert P.set_order(P.FLOAT_LAYOUTS) == ["WIDTH_PACKED", "HEIGHT_PACKED", "CHANNELS_PACKED"]
    assert P.ANY_STORAGE.make_tensor_repr() == P.TensorRepr(T, "WIDTH_PACKED")           # texture first
    assert P.PACKED_INT8_CHANNELS_PACKED_BUFFER.make_tensor_repr() == P.TensorRepr(B, "4C1W")
    assert P.CHANNELS_PACKED_TEXTURE_OR_CONTIGUOUS_BUFFER.make_tensor_repr() == P.TensorRepr(T, "CHANNELS_PACKED")
    assert not P.ANY_STORAGE.any_in_common(P.PACKED_INT8_BUFFER)
    assert P.ANY_STORAGE_INCL_PACKED_INT8 & P.PACKED_INT8_CHANNELS_PACKED_BUFFER == \
        P.PACKED_INT8_CHANNELS_PACKED_BUFFER
    assert (P.PACKED_INT8_4W4C_BUFFER | P.PACKED_INT8_4C1W_BUFFER).buffer == {"4W4C", "4C1W"}
    assert P.PACKED_INT8_4W4C_BUFFER.is_constrained() and P.NO_STORAGE.is_constrained()
    assert P.CHANNELS_PACKED_TEXTURE_OR_CONTIGUOUS_BUFFER.is_ambiguous()   # one layout on each side
    # synced = compatible PackedDimInfo: {4W4C} narrows the identity op's output to the channels-packed family
    narrowed = P.ANY_STORAGE_INCL_PACKED_INT8.constrain_to_compatible_packed_dim(P.PACKED_INT8_4W4C_BUFFER)
    assert narrowed == P.PACKED_INT8_CHANNELS_PACKED_BUFFER
    with pytest.raises(ValueError):
        P.TensorRepSet((), {"4W4C"})   # no quantized textures


def test_registry_sync_rules():
    conv = P.op_features("q8ta_conv2d_pw")
    assert not conv.sync_args and not conv.sync_primary_io
    ps = P.op_features("q8ta_pixel_shuffle")
    assert ps.sync_args and ps.sync_primary_io
    assert P.op_features("clone", "before").arg_repset(0) == P.ANY_STORAGE
    assert P.op_features("view_copy", "after").arg_repset(0) == P.ANY_STORAGE_INCL_PACKED_INT8
    with pytest.raises(KeyError):
        P.op_features("conv2d")


def _reprs(graph):
    return {n.name: (n.repr.storage, n.repr.layout) for n in graph.nodes}


def test_etvk_74_worked_example():
    """§7.4: conv_pw#1 → view_copy → conv_pw#2: 2 transitions before PR #19395, 0 after (view_copy is kept)."""
    g = P.etvk_74_graph()
    before = P.propagate(g, "before")
    assert before.transitions == 2 and before.removed == 0
    r = _reprs(before.graph)
    assert r["conv1"] == (B, "4C1W")                     # BFS skipped the float-only view: first by set order
    assert r["view"] == (T, "WIDTH_PACKED")              # texture preferred
    t1, t2 = before.graph.transitions()
    assert (t1.args[0].name, t1.repr) == ("conv1", P.TensorRepr(T, "WIDTH_PACKED"))
    assert (t2.args[0].name, t2.repr) == ("view", P.TensorRepr(B, "4W4C"))
    after = P.propagate(g, "after")
    assert after.transitions == 0 and after.graph.count("view_copy") == 1
    r = _reprs(after.graph)
    assert r["conv1"] == r["view"] == (B, "4W4C")
    assert g.count(P.TRANSITION) == 0   # propagate works on a copy


def test_hand_built_graphs():
    g = P.Graph("ps chain")
    x = g.input("x", (1, 16, 2, 2))
    q = g.call("quantize_per_tensor", x, scale=0.1, zero_point=0)
    c = g.call("clone", q)
    p1 = g.call("q8ta_pixel_shuffle", c, upscale_factor=2, input_scale=0.1, input_zero_point=0, output_scale=0.1,
                output_zero_point=0)
    d = g.call("dequantize_per_tensor", p1, scale=0.1, zero_point=0)
    g.output(d)
    # after: quantize's output follows the BFS through the clone into the shuffle: channels-packed, 4C1W first
    after = P.propagate(g, "after")
    assert after.transitions == 0 and after.removed == 1
    r = _reprs(after.graph)
    assert r["quantize_per_tensor"] == r["q8ta_pixel_shuffle"] == (B, "4C1W")
    assert r["x"] == (T, "CHANNELS_PACKED") and r["dequantize_per_tensor"] == (T, "CHANNELS_PACKED")
    # before: quantize (any int8) → clone (float texture W) → shuffle (4C1W): two transitions, the clone is still
    # removed (its input and output are both the texture), leaving the two transitions back to back
    before = P.propagate(g, "before")
    assert before.transitions == 2 and before.removed == 1
    assert [t.repr for t in before.graph.transitions()] == [P.TensorRepr(T, "WIDTH_PACKED"),
                                                           P.TensorRepr(B, "4C1W")]

    # an op whose producer is constrained elsewhere: two conv consumers want 4W4C; dedup per (source, repr)
    g = P.Graph("fan-out")
    x = g.input("x", (1, 8, 2, 4), "int8", (0.1, 0))
    w = np.ones((8, 8), np.int8)
    kw = dict(weight=w, weight_scales=np.full(8, 0.01, np.float32), bias=None, input_scale=0.1,
              input_zero_point=0, output_scale=0.1, output_zero_point=0)
    p1 = g.call("q8ta_pixel_shuffle", x, upscale_factor=1, input_scale=0.1, input_zero_point=0, output_scale=0.1,
                output_zero_point=0)
    v = g.call("view_copy", p1)
    a = g.call("q8ta_conv2d_pw", v, name="a", **kw)
    b = g.call("q8ta_conv2d_pw", v, name="b", **kw)
    g.output(a, b)
    before = P.propagate(g, "before")
    # p1 → 4C1W (view skipped); view → texture W; a and b both want 4W4C from the view: ONE deduplicated clone
    assert before.transitions == 2
    assert sum(n.args[0].is_transition for n in before.graph.nodes if n.op == "q8ta_conv2d_pw") == 2
    assert P.propagate(g, "after").transitions == 0

    # float pixel shuffle between dequantize and quantize: no int8 anywhere in it, both settings agree
    g = P.Graph("float ps")
    x = g.input("x", (1, 8, 2, 2), "int8", (0.1, 0))
    d = g.call("dequantize_per_tensor", x, scale=0.1, zero_point=0)
    f = g.call("pixel_shuffle", d, upscale_factor=2)
    q = g.call("quantize_per_tensor", f, scale=0.1, zero_point=0)
    g.output(q)
    for s in ("before", "after"):
        pr = P.propagate(g, s)
        assert pr.transitions == 0
        assert _reprs(pr.graph)["pixel_shuffle"] == (T, "CHANNELS_PACKED")

    # q8ta_add syncs its args by packed dim: conv (channels-packed) + 4H4W-only input → transition on one side
    g = P.Graph("add")
    x = g.input("x", (1, 8, 2, 4), "int8", (0.1, 0))
    c = g.call("q8ta_conv2d_pw", x, **kw)
    add = g.call("q8ta_add", c, c, output_scale=0.1, output_zero_point=0)
    g.output(add)
    pr = P.propagate(g, "after")
    assert pr.transitions == 0 and _reprs(pr.graph)["q8ta_add"][0] == B


def test_bfs_budget_limits_the_search():
    """A long chain of identity views between two convs: with a budget smaller than the chain, the first conv's
    output cannot see the consumer's 4W4C and picks 4C1W; the first views follow their source (4C1W); the first
    view whose output BFS reaches conv#2 gets output 4W4C with input 4C1W -- allowed, since "synced" only means
    the same PackedDimInfo (2, 4) -- so no transition, but that one view changes layout (a copy at runtime)."""
    def chain(n):
        g = P.Graph(f"{n} views")
        x = g.input("x", (1, 8, 2, 4), "int8", (0.1, 0))
        kw = dict(weight=np.ones((8, 8), np.int8), weight_scales=np.full(8, 0.01, np.float32), bias=None,
                  input_scale=0.1, input_zero_point=0, output_scale=0.1, output_zero_point=0)
        v = g.call("q8ta_conv2d_pw", x, name="c1", **kw)
        for _ in range(n):
            v = g.call("view_copy", v)
        return g.output(g.call("q8ta_conv2d_pw", v, name="c2", **kw))
    assert P.propagate(chain(10), "after").transitions == 0
    g = chain(70)
    tagged = g.copy()
    P.tag_memory_meta(tagged, "after")
    assert _reprs(tagged)["c1"] == (B, "4C1W")
    assert not tagged.transitions()
    changing = [n for n in tagged.nodes if n.op == "view_copy" and n.repr != n.args[0].repr]
    assert len(changing) == 1 and (changing[0].args[0].repr.layout, changing[0].repr.layout) == ("4C1W", "4W4C")
    # the budget is what decides: with an unlimited search the first conv already sees 4W4C
    unlimited = g.copy()
    P.tag_memory_meta(unlimited, "after", max_search_depth=1000)
    assert _reprs(unlimited)["c1"] == (B, "4W4C")


def test_refinenet_head_transition_counts():
    x = torch.randn(P.refinenet_input_shape())
    g = P.from_fx(P.RefineNetHead(), x)
    assert g.count("q8ta_pixel_shuffle") == 4 and g.count("_clone_dim_order") == 4
    counts = P.compare_settings(g).set_index("setting")
    assert counts.loc["before", "transitions"] == 8 and counts.loc["after", "transitions"] == 0   # PR #19395
    assert (counts["identity_ops_left"] == 0).all()
    around = P.from_fx(P.RefineNetHead(clone="around"), x)
    assert P.propagate(around, "before").transitions == 16 and P.propagate(around, "after").transitions == 0


def test_fx_mapping():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = P.Quantize(0.1, 0)
            self.a = P.Alias()
            self.dq = P.Dequantize(0.1, 0)
            self.ps = torch.nn.PixelShuffle(2)

        def forward(self, x):
            y = self.dq(self.a(self.q(x).clone()))
            return self.ps(y.contiguous().view(1, 8, 2, 2))
    g = P.from_fx(M(), torch.randn(1, 8, 2, 2))
    assert [n.op for n in g.op_nodes()] == ["quantize_per_tensor", "clone", "alias_copy", "dequantize_per_tensor",
                                          "_clone_dim_order", "view_copy", "pixel_shuffle"]
    assert g.outputs[0].sizes == (1, 2, 4, 4)


@pytest.mark.parametrize("module, shape", [(lambda: P.RefineNetHead(), P.refinenet_input_shape()),
                                           (lambda: P.ConvViewConv(), (1, 16, 3, 5))],
                         ids=["refinenet_head", "etvk_74"])
def test_executed_graph_matches_torch(device, module, shape):
    m = module()
    x = torch.randn(shape, generator=torch.Generator().manual_seed(3))
    props, execs, df, ref = P.run_settings(m, x, device=device, repeats=1)
    out_scale = m.dequant.scale
    for s, e in execs.items():
        diff = (e.outputs[0] - ref).abs().max().item()
        assert diff <= out_scale * 1.001, (s, diff)    # within 1 LSB of the output quantization
        kinds = [k for _, _, k in e.dispatches]
        assert kinds.count("transition") == props[s].transitions
        assert all(np.isfinite(e.gpu_us)) and e.total_us > 0
    summary = P.summarize(df).set_index("setting")
    assert summary.loc["before", "dispatches"] - summary.loc["after", "dispatches"] == \
        summary.loc["before", "transitions"]
    assert summary.loc["after", "transitions"] == 0


def test_q8ta_clone_all_directions(device):
    """The transition kernel: int8x4 buffer ↔ buffer (every layout pair) and buffer ↔ rgba32i texture."""
    sizes = (2, 7, 3, 5)
    q = torch.randint(-128, 128, sizes, dtype=torch.int8, generator=torch.Generator().manual_seed(1))
    reprs = [P.TensorRepr(B, n) for n in P.INT8_LAYOUTS] + [P.TensorRepr(T, n) for n in P.FLOAT_LAYOUTS]
    for src in reprs:
        for dst in reprs:
            if src == dst or (src.storage == T and dst.storage == T):
                continue
            g = P.Graph("clone")
            x = g.input("x", sizes, "int8", (0.1, 0))
            x.repr = src
            t = P.Node("t", P.TRANSITION, [x], {}, x.sizes, "int8", x.qparams, dst)
            g.nodes.append(t)
            g.output(t)
            e = P.execute(g, q, device=device)
            assert torch.equal(e.outputs[0], q), (src, dst)
            assert len(e.dispatches) == 1
