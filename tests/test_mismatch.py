"""workbench.checks.mismatch: counts, errors, first indices and the maps over logical dims and packed words / texels."""
import io

import numpy as np
import pytest
import torch

from workbench import layouts as L
from workbench.checks.mismatch import MismatchReport, mismatch_report, ordered_fp32


def _int8(shape, seed=0):
    return np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)


def test_exact_is_empty():
    w = _int8((2, 5, 3, 7))
    r = mismatch_report(w, w.copy(), layout="4W4C")
    assert r.exact and r.count == 0 and r.first == [] and r.max_error == 0
    assert r.summary() == "exact" and r.text_grid() == "exact"
    assert not r.unit_counts.any() and len(r.unit_counts) == L.get_layout("4W4C").num_words((2, 5, 3, 7))
    assert not r.logical_map().any()


@pytest.mark.parametrize("name,storage", [("4W4C", "buffer"), ("4C1W", "buffer"), ("4H4W", "buffer"),
                                          ("4C", "buffer"), ("CHANNELS_PACKED", "texture"),
                                          ("WIDTH_PACKED", "texture"), ("CHANNELS_PACKED", "buffer")])
@pytest.mark.parametrize("shape", [(2, 6, 5, 7), (3, 3, 9, 5), (1, 13, 1, 11)])
def test_planted_errors(name, storage, shape):
    lay = L.get_layout(name, storage)
    want = _int8(shape, 1)
    got = want.copy()
    n, c, h, w = shape
    planted = [(n - 1, c - 1, h - 1, w - 1), (0, 0, 0, 0), (n - 1, c // 2, h // 2, 1)]
    planted = sorted(set(planted))
    for k, e in enumerate(planted):
        got[e] = np.int8((int(want[e]) + 3 + k + 128) % 256 - 128)  # off by 3+k (mod 256)
    kind = "int8"
    if not lay.is_int8:  # float layouts: the same planting on float values
        want, got = want.astype(np.float32), got.astype(np.float32)
        kind = "float"
    r = mismatch_report(torch.from_numpy(got), torch.from_numpy(want), layout=lay, dtype_kind=kind)
    assert r.count == len(planted) and r.total == int(np.prod(shape))
    assert r.first == planted
    if kind == "int8":
        lsb = [abs(int(got[e]) - int(want[e])) for e in planted]
        assert r.max_error == max(lsb) and r.mean_error == pytest.approx(np.mean(lsb))
    units = {int(lay.element_to_unit(shape, *e)[0]) for e in planted}
    assert set(r.wrong_units.tolist()) == units
    assert r.unit_counts.sum() == len(planted)
    assert r.logical_map().sum() == len(planted)
    assert r.fraction == pytest.approx(len(planted) / np.prod(shape))


def test_tile_shows_as_words_4w4c():
    shape = (1, 8, 8, 8)
    want = _int8(shape, 2)
    got = want.copy()
    got[0, 4:8, 4:8, 0:4] = 0  # one 4x4 tile of one channel block, as a wrong tile index would
    wrongs = np.argwhere(got != want)
    lay = L.get_layout("4W4C")
    r = mismatch_report(got, want, layout=lay)
    assert r.count == len(wrongs)
    words = {int(lay.element_to_word_lane(shape, *e)[0]) for e in wrongs}
    assert set(r.wrong_units.tolist()) == words
    m = r.logical_map()[0, 1]
    assert (m[4:8, 0:4] > 0).sum() == len({(int(e[2]), int(e[3])) for e in wrongs}) and not m[:4].any()
    grid = r.text_grid()
    assert "n=0 c=4..7:" in grid and "(1 blocks of 4 channels clean)" in grid


def test_float_ulp_relative():
    want = np.float32([1.0, 2.0, -3.0, 0.0, np.nan])
    got = want.copy()
    got[1] = np.nextafter(np.nextafter(np.float32(2.0), np.float32(3)), np.float32(3))  # +2 ULP
    got[2] = np.float32(-3.0) * np.float32(1.5)
    r = mismatch_report(got, want, dtype_kind="float")
    assert r.count == 2 and r.first == [(0, 0, 0, 1), (0, 0, 0, 2)]
    assert r.error[0, 0, 0, 1] == 2
    assert r.max_rel == pytest.approx(0.5)
    assert ordered_fp32(np.float32(-0.0)) == ordered_fp32(np.float32(0.0))
    assert mismatch_report(np.float32([-0.0]), np.float32([0.0]), dtype_kind="float").exact
    assert mismatch_report(np.float32([np.nan]), np.float32([1.0]), dtype_kind="float").max_error == np.inf
    assert mismatch_report(got, want, dtype_kind="float", tolerance=2).count == 1


def test_shape_differs_and_bad_kind():
    r = mismatch_report(np.zeros((1, 2, 3, 4), np.int8), np.zeros((1, 2, 3, 5), np.int8))
    assert not r.exact and "shape differs" in r.summary()
    with pytest.raises(ValueError, match="dtype_kind"):
        mismatch_report(np.zeros(3), np.zeros(3), dtype_kind="fp16")


def test_text_grid_cells_and_counts():
    shape = (1, 4, 3, 200)
    want = np.zeros(shape, np.int8)
    got = want.copy()
    got[0, :, 0, 0] = 1  # 4 wrong in one pixel: '4'
    got[0, 0, 2, 199] = 5
    r = mismatch_report(got, want, layout="4C1W")
    text = r.text_grid(max_width=64)
    lines = text.splitlines()
    assert lines[0] == r.summary() and "5 LSB" in lines[0]
    assert "4x4 cells" in text  # 200 wide does not fit 64 characters: cells of 4x4
    row = lines[lines.index("n=0 c=0..3:") + 1].strip()
    assert row[0] == "4" and row[-1] == "1" and set(row[1:-1]) == {"."}  # 4 in the first cell, 1 in the last
    small = mismatch_report(got[..., :8], want[..., :8]).text_grid()
    assert "  4......." in small.splitlines()


def test_hash_for_ten_or_more():
    want = np.zeros((1, 4, 4, 4), np.int8)
    got = want.copy()
    got[0, :, :4, :4] = 1
    text = mismatch_report(got, want).text_grid(max_width=2)  # 4 wide in 2 characters: 2x2 cells of 16
    assert "##" in text


def test_figure_renders():
    from workbench.viz.mismatch_views import plot_mismatch
    want = _int8((2, 6, 5, 7))
    got = want.copy()
    got[1, 4, 1:3, 2:6] += 1
    for layout in ("4W4C", None):
        fig = plot_mismatch(mismatch_report(got, want, layout=layout))
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        assert buf.getvalue()[:4] == b"\x89PNG"
        assert len(fig.axes) == (2 if layout else 1)
    assert isinstance(mismatch_report(want, want), MismatchReport)


def test_etvk_check_gains_mismatch_map():
    from workbench.etvk.dispatch import Dispatch
    from workbench.etvk.run import check
    want = torch.from_numpy(_int8((1, 6, 5, 7)))
    d = Dispatch(kernel="k", variant="v", resources=[], push_constants=b"", spec_constants={}, global_size=(1, 1, 1),
                 local_size=(1, 1, 1), output=0, decode=None, expected=want, params={"out_layout": "4C1W"})
    row = check(d, want.clone())
    assert row["correct"] and row["mismatch"] == 0.0 and row["mismatch_map"] == ""
    got = want.clone()
    got[0, 5, 4, 6] = got[0, 5, 4, 6] ^ 1
    reports = []
    row = check(d, got, reports)
    assert not row["correct"] and row["mismatch"] == pytest.approx(1 / want.numel())
    assert "1/210 wrong" in row["mismatch_map"] and "(0,5,4,6)" in row["mismatch_map"] and "4C1W words" in row["mismatch_map"]
    assert reports[0].wrong_units.tolist() == [int(L.get_layout("4C1W").element_to_word_lane((1, 6, 5, 7), 0, 5, 4, 6)[0])]
    assert "shape differs" in check(d, got[:, :3])["mismatch_map"]


def test_cli_map_and_png(tmp_path, capsys):
    from workbench.cli.etvk import _mismatch_outputs
    want = _int8((1, 4, 4, 4))
    got = want.copy()
    got[0, 1, 2, 3] ^= 1
    reports = [mismatch_report(want, want), mismatch_report(got, want, layout="4W4C")]
    rows = [{"variant": "ok"}, {"variant": "bad"}]
    _mismatch_outputs(rows, reports, True, str(tmp_path / "m.png"))
    out = capsys.readouterr().out
    assert "bad: 1/64 wrong" in out and "ok:" not in out and "n=0 c=0..3:" in out
    assert (tmp_path / "m.png").read_bytes()[:4] == b"\x89PNG"
