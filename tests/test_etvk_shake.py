"""workbench.etvk.shake: a wrong index in the last partial tile shows as wrong elements only there; the correct
shader and a correct ET-VK family shake with 0 bad runs; a bare shader file shakes against its own first run."""
import os
import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from workbench import etvk
from workbench.cli import main
from workbench.etvk.dispatch import Dispatch
from workbench.etvk.shake import parse_local_sizes, shake, shake_dispatch
from workbench.toolchain.shaders import compile_glsl

PLANTED = Path(__file__).parent / "shaders" / "planted"
CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
N, TILE = 1002, 4  # 250 full tiles of 4, then a partial tile of 2


def compiler(spirv):
    """What shake_dispatch compiles a hand-built Dispatch's variant with: the one shader, already compiled."""
    return SimpleNamespace(compile=lambda variant: spirv)


def scale_dispatch(**defines):
    path = PLANTED / "scale_tiles.glsl"
    spirv = compile_glsl(path.read_text(), defines=defines, name="scale_tiles", source_path=path)
    x = torch.arange(N, dtype=torch.float32) * 0.5 + 1.0
    from workbench.etvk.dispatch import Resource
    res = [Resource("buffer", nbytes=N * 4, name="out"), Resource("buffer", data=x.numpy(), name="in")]
    d = Dispatch(kernel="scale_tiles", variant="scale_tiles", resources=res, push_constants=struct.pack("<I", N),
                 spec_constants={}, global_size=(-(-N // TILE), 1, 1), local_size=(64, 1, 1), output=0,
                 decode=lambda raw: torch.from_numpy(raw.view(np.float32)[:N].copy()), expected=2 * x)
    return spirv, d


def test_correct_shader_has_no_bad_runs(device):
    spirv, d = scale_dispatch()
    df = shake_dispatch(device, compiler(spirv), d, runs=3, local_sizes=[(64, 1, 1), (32, 1, 1)], stress=True)
    assert list(df["bad_runs"]) == [0, 0] and list(df["wrong_count"]) == [0, 0]


def test_bad_last_tile_is_caught_only_in_the_last_tile(device):
    spirv, d = scale_dispatch(BAD_LAST_TILE=1)
    df = shake_dispatch(device, compiler(spirv), d, runs=3, local_sizes=[(64, 1, 1)])
    row = df.iloc[0]
    assert row["bad_runs"] == 3 and row["bad_fraction"] == 1.0 and row["differs_from_run0"] == []
    wrong = torch.nonzero(row["wrong"]).flatten().tolist()
    assert wrong == [N - 2, N - 1]  # the partial last tile, nothing else


def test_local_size_errors_name_expected_and_given(device):
    spirv, d = scale_dispatch()
    with pytest.raises(ValueError, match="at most .* got"):
        shake_dispatch(device, compiler(spirv), d, runs=1, local_sizes=[(4096, 4096, 1)])
    with pytest.raises(ValueError, match="X,Y,Z integers .* got"):
        parse_local_sizes(["a,b"])
    with pytest.raises(ValueError, match="runs must be >= 1, got 0"):
        shake_dispatch(device, compiler(spirv), d, runs=0)


def test_cli_shake_bad_input(tmp_path):
    assert main(["etvk", "shake", "q8ta_clone", "--executorch", str(tmp_path / "none")]) == 2


@pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set")
def test_shake_correct_etvk_family(device):
    gen = etvk.Codegen(etvk.source(CHECKOUT))
    df = shake(device, gen, "q8ta_clone", runs=3, local_sizes=[(64, 1, 1), (8, 8, 1)], stress=True)
    assert (df["bad_runs"] == 0).all() and (df["wrong_count"] == 0).all()
    assert main(["etvk", "shake", "q8ta_clone", "--executorch", CHECKOUT, "--runs", "2",
                 "--local-size", "0,1"]) == 2
    assert main(["etvk", "shake", "no_such_family", "--executorch", CHECKOUT, "--runs", "1"]) == 2


def reverse_dispatch(name):
    path = PLANTED / f"{name}.glsl"
    spirv = compile_glsl(path.read_text(), name=name, source_path=path)
    n = 1024
    x = torch.arange(n, dtype=torch.float32)
    from workbench.etvk.dispatch import Resource
    res = [Resource("buffer", nbytes=n * 4, name="out"), Resource("buffer", data=x.numpy(), name="in")]
    d = Dispatch(kernel=name, variant=name, resources=res,
                 push_constants=struct.pack("<I", n) if name == "reverse_tile" else b"", spec_constants={},
                 global_size=(n, 1, 1), local_size=(64, 1, 1), output=0,
                 decode=lambda raw: torch.from_numpy(raw.view(np.float32)[:n].copy()),
                 expected=x.view(-1, 64).flip(1).reshape(-1))
    return spirv, d


def test_shared_race_shows_in_shake_and_the_barrier_version_is_clean(device):
    spirv, d = reverse_dispatch("reverse_tile")
    assert shake_dispatch(device, compiler(spirv), d, runs=4, local_sizes=[(64, 1, 1)])["bad_runs"].tolist() == [0]
    spirv, d = reverse_dispatch("shared_no_barrier")
    row = shake_dispatch(device, compiler(spirv), d, runs=4, local_sizes=[(64, 1, 1)], stress=True).iloc[0]
    if row["bad_runs"] == 0:  # a race need not show: a device may happen to order the invocations benignly
        pytest.skip("the race did not show on this device in 4 runs")
    assert row["wrong_count"] > 0


def test_a_bare_shader_shakes_against_its_first_run(device):
    from workbench.etvk.shake import bare_dispatch
    path = PLANTED / "shared_exchange.glsl"
    racy = compile_glsl(path.read_text(), name="shared_exchange", source_path=path)
    d = bare_dispatch(racy, 256, output=0)
    assert d.expected is None and d.global_size == (256, 1, 1) and d.push_constants == b""
    assert [r.data.tolist()[:3] for r in d.resources] == [[0, 1, 2], [0, 1, 2]]
    safe = compile_glsl(path.read_text(), defines={"BARRIER": 1}, name="shared_exchange", source_path=path)
    df = shake_dispatch(device, compiler(safe), bare_dispatch(safe, 256), runs=3, local_sizes=[(64, 1, 1)])
    assert df["bad_runs"].tolist() == [0] and df["differs_from_run0"].tolist() == [[]]
    with pytest.raises(ValueError, match=r"--output names a binding of the shader: one of \[0, 1\], got 5"):
        bare_dispatch(racy, 256, output=5)
