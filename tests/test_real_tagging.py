"""Differential check of the hand model (workbench.propagation) against ExecuTorch's real TagMemoryMetaPass
(workbench.real_tagging) on random int8 graphs of pixel shuffles, quantized adds and identity ops."""
import random

import pytest

pytest.importorskip("executorch")
from workbench import propagation as P  # noqa: E402
from workbench import real_tagging as RT  # noqa: E402


def test_after_19395_hand_model_matches_the_real_pass_on_random_graphs():
    """Same transitions (source, storage, layout) on every graph, with the identity ops as ExecuTorch 1.5.1 has them."""
    rng = random.Random(14)
    for i in range(40):
        g = RT.random_graph(rng)
        r = RT.compare(g, "after")
        assert r["same"], (i, g.summary(), r)


def test_real_pass_before_19395_inserts_transitions_around_a_float_only_identity_op():
    g = P.Graph("ps-clone-ps")
    x = g.input("x", (1, 16, 4, 4), "int8", (0.1, 0))
    y = g.call("q8ta_pixel_shuffle", x, upscale_factor=2, input_scale=0.1, input_zero_point=0, output_scale=0.1,
               output_zero_point=0)
    z = g.call("view_copy", y)
    g.output(g.call("q8ta_add", z, y, output_scale=0.1, output_zero_point=0))
    reprs, before = RT.tag(g, "before")
    assert before and all(t[1] == "texture" for t in before)      # int8 forced into a float texture layout
    reprs, after = RT.tag(g, "after")
    assert after == [] and reprs["view_copy"][1] in ("4C1W", "4W4C", "4C")
    with pytest.raises(NotImplementedError, match="q8ta_conv2d_pw"):
        RT.to_fx(P.etvk_74_graph())
