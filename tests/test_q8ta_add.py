"""q8ta_add on the device against torch's quantized add (dequantize, add, quantize_per_tensor): bit-exact, every
int8 layout, awkward shapes, batch > 1; bad input is refused with a clear message."""
import pytest
import torch

from workbench.kernels.q8ta_add import Q8taAddSpec, q8ta_add

LAYOUTS = ("4W4C", "4H4W", "4W", "4C", "4C1W")


def _torch_add(a, b, qa, qb, qo):
    da = (a.int() - qa[1]).float() * torch.tensor(qa[0], dtype=torch.float32)
    db = (b.int() - qb[1]).float() * torch.tensor(qb[0], dtype=torch.float32)
    return torch.quantize_per_tensor(da + db, qo[0], qo[1], torch.qint8).int_repr()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(1, 16, 8, 8), (3, 5, 7, 9), (2, 1, 1, 3)])
def test_matches_torch(device, layout, shape):
    g = torch.Generator().manual_seed(sum(shape))
    a = torch.randint(-128, 128, shape, generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, shape, generator=g, dtype=torch.int8)
    qa, qb, qo = (0.031, -3), (0.0173, 7), (0.045, 2)
    got = q8ta_add(a, b, qa, qb, qo, layout=layout, device=device)
    want = _torch_add(a, b, qa, qb, qo)
    assert torch.equal(got, want)
    assert (want == 127).any() or (want == -128).any() or shape == (2, 1, 1, 3)   # saturation is exercised


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="int8x4 layout"):
        Q8taAddSpec((1, 4, 4, 4), "WIDTH_PACKED")
    with pytest.raises(ValueError, match="scale > 0"):
        Q8taAddSpec((1, 4, 4, 4), "4W4C", a_qparams=(0.0, 0))
    with pytest.raises(ValueError, match="two int8 tensors of one shape"):
        q8ta_add(torch.zeros(1, 4, 2, 2, dtype=torch.int8), torch.zeros(1, 4, 2, 3, dtype=torch.int8),
                 (1.0, 0), (1.0, 0), (1.0, 0))
