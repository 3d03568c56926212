"""ExecuTorch's real lowering (workbench.etvk.model.lowering): export → pt2e int8 (XNNPACKQuantizer) → VulkanPartitioner, the
final tagged graphs read back, the before/after #19395 switch, CPU fallbacks and stage-named failures.
Lowered programs are cached per session (each lowering takes seconds)."""
import warnings

import pytest
import torch

pytest.importorskip("executorch")
from workbench.etvk.model import lowering as LW  # noqa: E402
from workbench.etvk.model import zoo as M  # noqa: E402


@pytest.fixture(scope="session")
def refinenet():
    torch.manual_seed(14)       # calibration data → quantization parameters: the same every run
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return LW.compare_settings(M.RefineNetLike(), (torch.randn(1, 3, 64, 32),), name="refinenet")


@pytest.fixture(scope="session")
def residual():
    torch.manual_seed(15)
    return LW.lower(M.ResidualAdd(), (torch.randn(2, 3, 6, 10),))


@pytest.fixture(scope="session")
def transitions_model():
    torch.manual_seed(16)
    return LW.lower(M.FloatBetween(), (torch.randn(1, 3, 8, 8),))


def _vk(df):
    return df[df["delegate"].notna()]


def test_refinenet_fuses_quantized_pixel_shuffles_and_tags_every_tensor(refinenet):
    for setting, low in refinenet.items():
        c = low.counts()
        assert c["delegates"] == 1 and c["cpu_ops"] == 0, c
        assert c["q8ta_pixel_shuffle"] == 4 and c["pixel_shuffle"] == 0, c     # 1.5.1 fuses dq → ps → q here
        assert c["q8ta_add"] >= 3, c
        vk = _vk(low.table())
        acts = vk[(vk["op"] != "input") | (vk["node"] == "x")]
        assert acts["storage"].notna().all() and acts["layout"].notna().all()
        int8 = acts[acts["dtype"] == "int8"]
        assert (int8["storage"] == "BUFFER").all() and int8["layout"].str.startswith("PACKED_INT8").all()


def test_before_switch_changes_the_registry_only_inside_the_block():
    et = LW._et()
    table = et["registry"].vulkan_supported_ops
    targets = LW._identity_targets(et)
    after = {k: table[t] for k, t in targets.items()}
    packed = et["utils"].PACKED_INT8_4W4C_BUFFER
    with LW.identity_ops("before"):
        for k, t in targets.items():
            assert not table[t].inputs_storage[0].any_in_common(packed), k
    for k, t in targets.items():
        assert table[t] is after[k] and table[t].inputs_storage[0].any_in_common(packed)
    with pytest.raises(ValueError, match="before"):
        with LW.identity_ops("sideways"):
            pass


def test_residual_add_is_a_quantized_add(residual):
    c = residual.counts()
    assert c["q8ta_add"] == 1 and c["delegates"] == 1, c


def test_float_op_between_quantized_ops_gets_transitions(transitions_model):
    c = transitions_model.counts()
    df = _vk(transitions_model.table())
    t = df[df["transition"]]
    assert c["transitions"] == len(t) > 0, c
    assert (t["op"] == "clone").all()
    for _, row in t.iterrows():           # a transition changes the representation of its argument
        src = df[df["node"] == row["args"]].iloc[0]
        assert (src["storage"], src["layout"]) != (row["storage"], row["layout"])


def test_unsupported_op_stays_on_the_cpu():
    low = LW.lower(M.WithUnsupported(), (torch.randn(1, 3, 4, 4),))
    df = low.table()
    cpu = df[df["storage"] == "CPU"]
    assert "cumsum" in set(cpu["op"]), df[["node", "op", "storage"]]
    assert low.counts()["delegates"] == 2


def test_failures_name_their_stage():
    with pytest.raises(LW.LoweringError, match="'export' stage") as e:
        LW.quantize(M.NotExportable(), (torch.randn(2, 2),))
    assert e.value.stage == "export"
    with pytest.raises(LW.LoweringError, match="'quantize' stage") as e:
        LW.quantize(M.ResidualAdd(), (torch.randn(1, 3, 4, 4),), calibration=[(torch.randn(1, 5, 4, 4),)])
    assert e.value.stage == "quantize"


def test_real_graph_int8_ops_run_on_the_device(device, refinenet, transitions_model):
    """The real graphs' q8ta_pixel_shuffle / q8ta_add / int8 transitions, each at the shape, layouts and qparams the
    real passes gave it, run with the workbench's kernels in one recording; outputs checked inside (AssertionError)."""
    from workbench.graphs.lowered_run import run_int8_ops
    df = run_int8_ops(transitions_model, device, repeats=1)
    ran = df[df["kernel"].notna()]
    assert set(ran["op"]) == {"clone", "q8ta_add"} and (ran["gpu_us_median"] > 0).all()
    assert ran[ran["op"] == "clone"]["kernel"].iloc[0].startswith("q8ta_clone 4H4W->4W4C")
    df = run_int8_ops(refinenet["after"], device, repeats=1)
    assert (df["op"] == "q8ta_pixel_shuffle").sum() == 4 and df[df["op"] == "q8ta_pixel_shuffle"]["kernel"].notna().all()
    assert df[df["op"] == "q8ta_conv2d"]["kernel"].isna().all()      # no workbench kernel: listed, not run
