"""workbench.checks.shake.shake_kernel: the workbench's own kernels replayed across local sizes against an independent
reference (torch), on packed layouts, textures and awkward shapes; a wrong reference shows as bad runs everywhere."""
import numpy as np
import pytest
import torch

from workbench import kernels as K
from workbench.kernels import pixel_shuffle as PS
from workbench.checks.shake import parse_local_sizes, shake_kernel, with_local_size


def _q(shape, seed=0):
    return torch.randint(-128, 128, shape, generator=torch.Generator().manual_seed(seed), dtype=torch.int8)


def test_fused_pixel_shuffle_is_stable_across_local_sizes(device):
    q = _q((2, 12, 3, 5))  # batch 2, C not a multiple of 16, odd H and W
    spec = PS.Q8taPixelShuffleSpec(tuple(q.shape), 2, "4C1W", "4C", 0.05, 3, 0.05, 3)
    want = torch.nn.functional.pixel_shuffle(q, 2)
    df = shake_kernel(device, spec, lambda dev, s: PS.Q8taPixelShuffleRun(dev, s, q), want, runs=3, stress=True)
    assert set(df["local_size"]) == {"64x1x1", "32x1x1", "128x1x1"}  # no larger than the 180 threads
    assert (df["bad_runs"] == 0).all() and (df["wrong_count"] == 0).all(), df


def test_float_texture_pixel_shuffle_sweeps_3d_shapes(device):
    x = torch.randn(2, 8, 3, 5)
    spec = PS.PixelShuffleSpec(tuple(x.shape), 2, "texture", "channels")
    want = torch.nn.functional.pixel_shuffle(x, 2)
    df = shake_kernel(device, spec, lambda dev, s: PS.PixelShuffleRun(dev, s, x), want, runs=2,
                       local_sizes=[(8, 8, 1), (4, 4, 4), (1, 1, 1)])
    assert df["local_size"].tolist() == ["8x8x1", "4x4x4", "1x1x1"]
    assert (df["bad_runs"] == 0).all(), df


def test_wrong_reference_shows_in_every_run(device):
    q = _q((1, 8, 4, 4), seed=1)
    spec = PS.Q8taPixelShuffleSpec(tuple(q.shape), 2, "4W4C", "4W4C")
    want = torch.nn.functional.pixel_shuffle(q, 2).clone()
    want[0, 1, 2, 3] += 1
    df = shake_kernel(device, spec, lambda dev, s: PS.Q8taPixelShuffleRun(dev, s, q), want, runs=2,
                       local_sizes=[(64, 1, 1), (32, 1, 1)])
    assert df["bad_runs"].tolist() == [2, 2] and df["wrong_count"].tolist() == [1, 1]
    assert df["first_wrong"].tolist() == [[(0, 1, 2, 3)], [(0, 1, 2, 3)]]
    assert df["differs_from_run0"].tolist() == [[], []]


def test_with_local_size_keeps_the_spec_and_moves_the_global_size(device):
    spec = PS.Q8taPixelShuffleSpec((1, 8, 5, 5), 2)
    s = with_local_size(spec, (32, 1, 1))
    assert s.local_size == (32, 1, 1) and spec.local_size != s.local_size
    assert s.global_size(device)[0] % 32 == 0 and s.variant == spec.variant and isinstance(s, type(spec))


def test_bad_input_names_expected_and_given(device):
    spec = PS.Q8taPixelShuffleSpec((1, 8, 4, 4), 2)
    run = lambda dev, s: PS.Q8taPixelShuffleRun(dev, s, None)  # noqa: E731
    with pytest.raises(ValueError, match="runs must be >= 1, got 0"):
        shake_kernel(device, spec, run, torch.zeros(1), runs=0)
    with pytest.raises(ValueError, match="at most .* invocations .* got"):
        shake_kernel(device, spec, run, torch.zeros(1), local_sizes=[(4096, 4096, 1)])
    with pytest.raises(TypeError, match="make_run must be a callable"):
        shake_kernel(device, spec, "run", torch.zeros(1))
    with pytest.raises(ValueError, match="1 to 3 positive sizes"):
        parse_local_sizes(["0,1"])
