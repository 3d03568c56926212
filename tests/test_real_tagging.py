"""ExecuTorch's real TagMemoryMetaPass on the workbench's int8 graphs (workbench.graphs.tagging): the edge ops written
with ExecuTorch 1.5.1's own schemas, and the pass's transitions on small graphs against answers derived by hand
from ET-VK's rules (reference etvk.md §7)."""
import random

import numpy as np
import pytest
import torch

pytest.importorskip("executorch")
from workbench.graphs import int8_graph as G
from workbench.graphs import tagging as RT

B, T = "buffer", "texture"


def _conv_kw(cin, cout, **kw):
    return dict(weight=np.ones((cout, cin), np.int8), weight_scales=np.full(cout, 0.01, np.float32), bias=None,
                input_scale=0.1, input_zero_point=0, output_scale=0.1, output_zero_point=0, **kw)


def test_q8ta_conv2d_pw_is_written_with_the_wheels_schema():
    """Every argument of et_vk.q8ta_conv2d_pw as the installed ExecuTorch defines it; the prepacked tensors are
    constant placeholders marked etvk_tensorref, which the pass leaves untagged (no transition, no repr)."""
    g = G.Graph("conv")
    x = g.input("x", (2, 6, 3, 5), "int8", (0.1, 0))
    g.output(g.call("q8ta_conv2d_pw", x, name="conv", **{**_conv_kw(6, 10), "bias": np.zeros(10, np.float32)},
                    relu=True))
    gm, env = RT.to_fx(g)
    conv = env["conv"]
    schema = conv.target._schema
    assert len(conv.args) == len(schema.arguments) == 15
    names = [a.name for a in schema.arguments]
    assert names[:9] == ["x", "input_scale", "input_zero_point", "weights", "weight_sums", "weight_scales",
                         "output_scale", "output_zero_point", "bias"]
    consts = conv.args[3:6] + (conv.args[8],)
    assert all(c.op == "placeholder" and c.meta["etvk_tensorref"] for c in consts)
    assert tuple(conv.args[3].meta["val"].shape) == (10, 8)           # IC padded to a multiple of 4
    assert tuple(conv.args[4].meta["val"].shape) == (12,)             # OC padded to a multiple of 4
    assert conv.args[-1] == "relu"
    reprs, transitions = RT.tag(g)
    assert transitions == [] and reprs == {"x": (B, "4W4C"), "conv": (B, "4C1W")}
    for c in consts:
        assert getattr(c.meta["spec"], "etvk_node_repr", None) is None


def test_etvk_74_worked_example_on_the_real_pass():
    """§7.4: conv_pw#1 → view_copy → conv_pw#2.  Before: conv#1's output BFS meets the float-only view (no
    overlap: skipped), so conv#1 picks the first of PACKED_INT8_CHANNELS_PACKED_BUFFER {4C1W, CONV2D, 4W4C} → 4C1W;
    the view falls back to ANY_STORAGE → texture W-packed: a clone into the texture, one back to conv#2's 4W4C.
    After: the BFS passes through the view to conv#2 (4W4C): no clone."""
    g = G.etvk_74_graph()
    reprs, before = RT.tag(g, "before")
    assert reprs["conv1"] == (B, "4C1W") and reprs["view"] == (T, "WIDTH_PACKED")
    assert before == [("conv1", T, "WIDTH_PACKED"), ("view", B, "4W4C")]
    reprs, after = RT.tag(g, "after")
    assert after == [] and reprs["conv1"] == reprs["view"] == (B, "4W4C")
    # view_copy survives RemoveRedundantOpsTransform: vulkan_preprocess's pass order gives the same
    assert RT.tag(g, "before", remove_redundant_first=True)[1] == before
    t = RT.tagged(g, "before")
    assert [n.op for n in t.nodes] == ["input", "q8ta_conv2d_pw", "transition", "view_copy", "transition",
                                       "q8ta_conv2d_pw"]
    assert t.nodes[3].args[0] is t.nodes[2] and t.nodes[5].args[0] is t.nodes[4]
    assert t.nodes[4].repr == G.Repr(B, "4W4C") and g.count("transition") == 0   # the input graph is untouched


def test_small_graphs_on_the_real_pass():
    # quantize → clone → q8ta_pixel_shuffle → dequantize.  After: the quantize's output BFS reaches the shuffle
    # through the clone: 4C1W everywhere.  Before: the clone is float-only, so quantize picks the first of
    # PACKED_INT8_BUFFER (4W4C), the clone a W-packed texture, the shuffle 4C1W: two transitions.
    g = G.Graph("ps chain")
    x = g.input("x", (1, 16, 2, 2))
    q = g.call("quantize_per_tensor", x, scale=0.1, zero_point=0)
    c = g.call("clone", q)
    p = g.call("q8ta_pixel_shuffle", c, upscale_factor=2, input_scale=0.1, input_zero_point=0, output_scale=0.1,
               output_zero_point=0)
    g.output(g.call("dequantize_per_tensor", p, scale=0.1, zero_point=0))
    reprs, after = RT.tag(g, "after")
    assert after == [] and reprs["quantize_per_tensor"] == reprs["clone"] == reprs["q8ta_pixel_shuffle"] == \
        (B, "4C1W")
    assert reprs["x"] == reprs["dequantize_per_tensor"] == (T, "CHANNELS_PACKED")
    reprs, before = RT.tag(g, "before")
    assert before == [("clone", B, "4C1W"), ("quantize_per_tensor", T, "WIDTH_PACKED")]
    assert reprs["quantize_per_tensor"] == (B, "4W4C")
    # RemoveRedundantOpsTransform first (vulkan_preprocess's order) drops the clone: no identity op, no transition
    assert RT.tag(g, "before", remove_redundant_first=True)[1] == []

    # fan-out: one view feeds two convs; the transition to 4W4C is made once and shared (deduplicated)
    g = G.Graph("fan-out")
    x = g.input("x", (1, 8, 2, 4), "int8", (0.1, 0))
    p = g.call("q8ta_pixel_shuffle", x, upscale_factor=1, input_scale=0.1, input_zero_point=0, output_scale=0.1,
               output_zero_point=0)
    v = g.call("view_copy", p)
    g.output(g.call("q8ta_conv2d_pw", v, name="a", **_conv_kw(8, 8)),
             g.call("q8ta_conv2d_pw", v, name="b", **_conv_kw(8, 8)))
    assert RT.tag(g, "before")[1] == [("q8ta_pixel_shuffle", T, "WIDTH_PACKED"), ("view_copy", B, "4W4C")]
    t = RT.tagged(g, "before")
    assert t.nodes[-1].args[0] is t.nodes[-2].args[0] and t.nodes[-1].args[0].is_transition
    assert RT.tag(g, "after")[1] == []

    # float pixel shuffle between dequantize and quantize: nothing int8 meets an identity op, both settings agree
    g = G.Graph("float ps")
    x = g.input("x", (1, 8, 2, 2), "int8", (0.1, 0))
    f = g.call("pixel_shuffle", g.call("dequantize_per_tensor", x, scale=0.1, zero_point=0), upscale_factor=2)
    g.output(g.call("quantize_per_tensor", f, scale=0.1, zero_point=0))
    for s in RT.SETTINGS:
        reprs, tr = RT.tag(g, s)
        assert tr == [] and reprs["pixel_shuffle"] == (T, "CHANNELS_PACKED")


def test_bfs_budget_limits_the_search():
    """A chain of views between two convs: within the 64-node budget conv#1 sees conv#2's 4W4C; beyond it conv#1
    picks 4C1W, the views follow it, and the first view whose BFS reaches conv#2 changes layout 4C1W → 4W4C
    (allowed: "synced" means the same packed dim) — no transition, but a copy at runtime."""
    def chain(n):
        g = G.Graph(f"{n} views")
        v = g.call("q8ta_conv2d_pw", g.input("x", (1, 8, 2, 4), "int8", (0.1, 0)), name="c1", **_conv_kw(8, 8))
        for _ in range(n):
            v = g.call("view_copy", v)
        return g.output(g.call("q8ta_conv2d_pw", v, name="c2", **_conv_kw(8, 8)))
    reprs, tr = RT.tag(chain(10), "after")
    assert tr == [] and reprs["c1"] == (B, "4W4C")
    t = RT.tagged(chain(70), "after")
    assert not t.transitions() and t.nodes[1].repr == G.Repr(B, "4C1W")
    changing = [n for n in t.nodes if n.op == "view_copy" and n.repr != n.args[0].repr]
    assert [(n.args[0].repr.layout, n.repr.layout) for n in changing] == [("4C1W", "4W4C")]


def test_refinenet_head_counts_on_the_real_pass():
    x = torch.randn(G.refinenet_input_shape())
    g = G.from_fx(G.RefineNetHead(), x)
    assert g.count("q8ta_pixel_shuffle") == 4 and g.count("_clone_dim_order") == 4 and g.count("q8ta_conv2d_pw") == 5
    counts = RT.compare_settings(g).set_index("setting")
    assert counts["transitions"].to_dict() == {"before": 8, "after": 0}
    assert (counts["identity_ops_changing_repr"] == 0).all()
    around = RT.compare_settings(G.from_fx(G.RefineNetHead(clone="around"), x)).set_index("setting")
    assert around["transitions"].to_dict() == {"before": 16, "after": 0}
    first = RT.compare_settings(g, remove_redundant_first=True).set_index("setting")
    assert first["transitions"].to_dict() == {"before": 0, "after": 0} and (first["identity_ops"] == 0).all()


def test_tagged_agrees_with_tag_on_random_graphs():
    """tagged() rebuilds the pass's graph: the same transitions (source, storage, layout) as tag(), every node
    tagged, users re-wired to their transition."""
    rng = random.Random(14)
    for i in range(12):
        g = RT.random_graph(rng)
        for s in RT.SETTINGS:
            _, tr = RT.tag(g, s)
            t = RT.tagged(g, s)
            got = sorted((n.args[0].name, n.repr.storage, n.repr.layout) for n in t.transitions())
            want = sorted((a, st, RT.CONV2D_AS if lay == "CONV2D" else lay) for a, st, lay in tr)
            assert got == want, (i, s, g.summary(), tr)
            assert all(n.repr is not None for n in t.nodes)


def test_repsets_are_etvks_own():
    rs = RT.repsets().set_index("repset")
    assert rs.loc["PACKED_INT8_CHANNELS_PACKED_BUFFER", "picks"] == "buffer 4C1W"
    assert rs.loc["ANY_STORAGE", "picks"] == "texture WIDTH_PACKED"
    assert "4W4C" in rs.loc["ANY_STORAGE_INCL_PACKED_INT8", "buffer"] and "4W4C" not in rs.loc["ANY_STORAGE", "buffer"]
    before, after = (RT.op_repsets(s).set_index("op") for s in RT.SETTINGS)
    for op in G.IDENTITY_OPS:
        assert (before.loc[op, "input"], before.loc[op, "output"]) == ("ANY_STORAGE", "ANY_STORAGE")
        assert after.loc[op, "output"] == "ANY_STORAGE_INCL_PACKED_INT8"
    assert after.loc["q8ta_conv2d_pw", "input"] == "PACKED_INT8_4W4C_BUFFER"
    with pytest.raises(ValueError, match="identity-op setting"):
        RT.tag(G.etvk_74_graph(), "sometime")
