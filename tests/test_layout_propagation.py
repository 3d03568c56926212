"""Layout propagation on the device: int8 graphs (workbench.graphs.int8_graph) tagged by ExecuTorch's real TagMemoryMetaPass
(workbench.graphs.tagging) and executed with the workbench's kernels (workbench.graphs.graph_exec), against torch — awkward
shapes, batch > 1, both identity-op settings — plus the q8ta_clone transition kernel in every direction."""
import random

import numpy as np
import pytest
import torch

from workbench.graphs import graph_exec as X
from workbench.graphs import int8_graph as G

T, B = "texture", "buffer"


def test_graph_builder_and_fx_mapping():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = G.Quantize(0.1, 0)
            self.a = G.Alias()
            self.dq = G.Dequantize(0.1, 0)
            self.ps = torch.nn.PixelShuffle(2)

        def forward(self, x):
            y = self.dq(self.a(self.q(x).clone()))
            return self.ps(y.contiguous().view(1, 8, 2, 2))
    g = G.from_fx(M(), torch.randn(1, 8, 2, 2))
    assert [n.op for n in g.op_nodes()] == ["quantize_per_tensor", "clone", "alias_copy", "dequantize_per_tensor",
                                          "_clone_dim_order", "view_copy", "pixel_shuffle"]
    assert g.outputs[0].sizes == (1, 2, 4, 4)
    with pytest.raises(KeyError, match="unknown op 'conv2d'"):
        g.call("conv2d", g.nodes[0])
    with pytest.raises(ValueError, match="not divisible"):
        g.call("q8ta_pixel_shuffle", g.nodes[1], upscale_factor=3, input_scale=0.1, input_zero_point=0,
               output_scale=0.1, output_zero_point=0)
    with pytest.raises(ValueError, match="not a texture layout"):
        G.Repr(T, "4W4C")    # no quantized textures in ET-VK
    with pytest.raises(ValueError, match="tag the graph first"):
        X.execute(g, torch.randn(1, 8, 2, 2))


def test_reference_follows_the_modules():
    m = G.RefineNetHead()
    x = torch.randn(2, 24, 2, 3, generator=torch.Generator().manual_seed(5))
    assert torch.equal(G.reference(G.from_fx(m, x), x)[0], m(x))


@pytest.mark.parametrize("module, shape", [(lambda: G.RefineNetHead(), (2, 24, 3, 5)),
                                           (lambda: G.ConvViewConv(), (2, 16, 3, 5))],
                         ids=["refinenet_head", "etvk_74"])
def test_executed_graph_matches_torch(device, module, shape):
    pytest.importorskip("executorch")
    m = module()
    x = torch.randn(shape, generator=torch.Generator().manual_seed(3))
    tagged, execs, df, ref = X.run_settings(m, x, device=device, repeats=1)
    for s, e in execs.items():
        diff = (e.outputs[0] - ref).abs().max().item()
        assert diff <= m.dequant.scale * 1.001, (s, diff)    # within 1 LSB of the output quantization
        kinds = [k for _, _, k in e.dispatches]
        assert kinds.count("transition") == len(tagged[s].transitions())
        assert all(np.isfinite(e.gpu_us)) and e.total_us > 0
    summary = X.summarize(df).set_index("setting")
    assert summary.loc["before", "transitions"] > 0 and summary.loc["after", "transitions"] == 0
    assert summary.loc["before", "dispatches"] - summary.loc["after", "dispatches"] == \
        summary.loc["before", "transitions"]


def test_random_graphs_on_the_device_match_torch(device):
    """Random graphs of convs, fused pixel shuffles, quantized adds and identity ops (batch 1-2, C 16/32, H 3/4,
    W 4/5), tagged by the real pass under both settings and executed: every int8 output equals torch's."""
    pytest.importorskip("executorch")
    from workbench.graphs import tagging as RT
    rng = random.Random(7)
    gen = torch.Generator().manual_seed(7)
    kinds, labels = set(), set()
    for i in range(10):
        g = RT.random_graph(rng, max_ops=7)
        x = torch.randint(-128, 128, g.nodes[0].sizes, dtype=torch.int8, generator=gen)
        want = G.reference(g, x)[0]
        for s in RT.SETTINGS:
            e = X.execute(RT.tagged(g, s), x, device=device)
            assert torch.equal(e.outputs[0], want), (i, s, g.summary())
            kinds |= {k for _, _, k in e.dispatches}
            labels |= {lab.split("_m")[0] for lab, _, _ in e.dispatches}
    assert {"op", "transition", "identity copy"} <= kinds
    assert {"q8ta_conv2d_pw", "q8ta_pixel_shuffle", "q8ta_add"} <= labels


def test_q8ta_clone_all_directions(device):
    """The transition kernel: int8x4 buffer ↔ buffer (every layout pair) and buffer ↔ rgba32i texture."""
    sizes = (2, 7, 3, 5)
    q = torch.randint(-128, 128, sizes, dtype=torch.int8, generator=torch.Generator().manual_seed(1))
    reprs = [G.Repr(B, n) for n in G.INT8_LAYOUTS] + [G.Repr(T, n) for n in G.FLOAT_LAYOUTS]
    for src in reprs:
        for dst in reprs:
            if src == dst or (src.storage == T and dst.storage == T):
                continue
            g = G.Graph("clone")
            x = g.input("x", sizes, "int8", (0.1, 0))
            x.repr = src
            t = G.Node("t", G.TRANSITION, [x], {}, x.sizes, "int8", x.qparams, dst)
            g.nodes.append(t)
            g.output(t)
            e = X.execute(g, q, device=device)
            assert torch.equal(e.outputs[0], q), (src, dst)
            assert len(e.dispatches) == 1


def test_bench_suite_rows(device):
    """``workbench bench propagation-graphs --quick``: one row per dispatch, both graphs, both settings, checked."""
    pytest.importorskip("executorch")
    from workbench.benchmarks.propagation import graphs_suite
    df = graphs_suite(device, None, quick=True, show_progress=False)
    summary = X.summarize(df).set_index(["graph", "setting"])
    assert summary["transitions"].to_dict() == {("RefineNet-like head", "before"): 8,
                                                ("RefineNet-like head", "after"): 0,
                                                ("conv_pw → view_copy → conv_pw", "before"): 2,
                                                ("conv_pw → view_copy → conv_pw", "after"): 0}
    assert (df["max_abs_diff"] <= df["output_lsb"]).all() and (df["gpu_us"] > 0).all()
