"""ET-VK's own runtime in the loop (workbench.etvk.model: build, revision, runtime, events, profile, drill).

Without a checkout (CI): the ETDump reading, the per-dispatch join, the A/B frame and the drill-down's option
mapping run on files a real run here produced (tests/etvk_runtime/: ExecuTorch cff6f4dd32's executor_runner on
lavapipe, the residual model, 3 executions; the RefineNet-like model at 1×3×64×32 with the identity ops registered
as before and after PR #19395); the build's error paths run on a synthetic git tree.
With a checkout (WORKBENCH_EXECUTORCH): the build (cached), a profile on lavapipe against torch, the #19395 A/B.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from workbench.etvk.model import build as B
from workbench.etvk.model import drill as D
from workbench.etvk.model import events as E
from workbench.etvk.model import fidelity as F
from workbench.etvk.model import profile as P
from workbench.etvk.model import revision as R

DATA = Path(__file__).parent / "etvk_runtime"
CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set: building ET-VK's "
                                    "runtime and lowering with a revision's Python need an ExecuTorch checkout")


# ---------------------------------------------------------------------------------------------------------------------
# ETDump → rows (a real ETDump)

@pytest.fixture(scope="module")
def residual():
    frame = E.inspector_frame(DATA / "residual_add" / "run.etdp")
    return frame, E.dispatch_rows(None, frame)


def test_every_dispatch_of_every_execution_is_a_row(residual):
    _, rows = residual
    assert rows["execution"].nunique() == 3
    per = rows.groupby("execution").size()
    assert (per == per.iloc[0]).all() and per.iloc[0] == 9
    # ET-VK's own names: 4 pointwise convs, one quantized add, quantize / dequantize, two staging copies
    kernels = rows[rows["execution"] == 0]["kernel"].tolist()
    assert kernels.count("q8ta_conv2d_pw_float") == 4
    assert "q8ta_add_buffer" in kernels and "q8ta_quantize_texture3d_float" in kernels
    staging = rows[rows["operator"] == "(staging)"]
    assert set(staging["kernel"]) == {"nchw_to_image_texture3d_float_float"}
    assert staging["delegate_node_id"].isna().all()
    convs = rows[rows["kernel"] == "q8ta_conv2d_pw_float"]
    assert set(convs["operator"]) == {"q8ta_conv2d_pw"} and convs["delegate_node_id"].notna().all()
    assert (rows["gpu_us"] > 0).all()
    first = convs[convs["execution"] == 0].iloc[0]
    assert first["input_sizes"] == "1x3x16x16" and first["output_sizes"] == "1x16x16x16"
    assert first["output_dtype"] == "Int8x4" and first["output_storage"] == "BUFFER"


def test_medians_drop_the_warm_up(residual):
    _, rows = residual
    table = E.dispatch_table(rows, warmup=1)
    assert len(table) == 9 and (table["runs"] == 2).all()
    one = rows[(rows["dispatch_id"] == 2) & (rows["execution"] >= 1)]["gpu_us"]
    assert table.set_index("dispatch_id").loc[2, "gpu_us"] == pytest.approx(one.median())
    with pytest.raises(ValueError, match="expected more than 3"):
        E.dispatch_table(rows, warmup=3)


def test_phases_and_kernels(residual):
    frame, rows = residual
    phases = E.phase_table(E.phase_rows(None, frame), warmup=1)
    assert {"ETVK_COPY_INPUTS", "ETVK_COMPUTE_GRAPH_EXECUTE", "ETVK_COPY_OUTPUTS"} <= set(phases["phase"])
    table = E.dispatch_table(rows, warmup=1)
    kernels = E.kernel_table(table)
    assert kernels["dispatches"].sum() == len(table)
    assert kernels["gpu_us"].sum() == pytest.approx(table["gpu_us"].sum())
    conv = kernels.set_index("kernel").loc["q8ta_conv2d_pw_float"]
    assert conv["dispatches"] == 4 and conv["operators"] == "q8ta_conv2d_pw"


def test_event_names_that_are_not_dispatches():
    assert E.parse_event_name("ETVK_COPY_INPUTS") is None
    assert E.parse_event_name("{not json") is None
    assert E.parse_event_name('{"dispatch_id": 3}') is None       # no kernel_name
    staged = E.parse_event_name('{"kernel_name": "nchw_to_image_texture3d_float_float", "operator_id": 0, '
                                '"dispatch_id": 0}')
    assert staged["operator"] == "(staging)" and staged["dispatch_id"] == 0


def test_a_file_that_is_not_an_etdump(tmp_path):
    with pytest.raises(E.EtdumpError, match="no ETDump at"):
        E.inspector_frame(tmp_path / "missing.etdp")
    bad = tmp_path / "bad.etdp"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(E.EtdumpError, match="not an ETDump"):
        E.inspector_frame(bad)


# ---------------------------------------------------------------------------------------------------------------------
# The A/B frame (two real ETDumps)

def _kernels(side: str) -> pd.DataFrame:
    rows = E.dispatch_rows(DATA / "refinenet_like" / side / "run.etdp")
    return E.kernel_table(E.dispatch_table(rows, warmup=1)).assign(revision=side)


def test_the_ab_frame_counts_each_kernel_at_both_sides():
    kernels = pd.concat([_kernels("before"), _kernels("after")], ignore_index=True)
    ab = P.compare(kernels, "before", "after")
    total = ab.set_index("kernel").loc["(all)"]
    per = ab[ab["kernel"] != "(all)"]
    assert total["dispatches_a"] == per["dispatches_a"].sum() and total["dispatches_b"] == per["dispatches_b"].sum()
    assert total["saved_us"] == pytest.approx(total["gpu_us_a"] - total["gpu_us_b"])
    # measured: this export path (XNNPACKQuantizer fences the ops it does not quantize; RemoveRedundantOpsTransform
    # drops clones before TagMemoryMetaPass) leaves no identity op between packed int8 tensors, so the identity-op
    # registration of #19395 changes nothing on the runtime: 47 dispatches, no q8ta_clone, either way
    assert not any(k.startswith("q8ta_clone") for k in per["kernel"])
    assert (per["dispatches_a"] == per["dispatches_b"]).all() and total["dispatches_a"] == 47
    assert per.set_index("kernel").loc["q8ta_pixel_shuffle", "dispatches_b"] == 4
    with pytest.raises(ValueError, match="two revisions"):
        P.Profile("m", kernels.assign(revision="x"), kernels, kernels, kernels).compare


def test_sides_are_one_or_two():
    assert [c[2] for c in P.cases(["a", "b"])] == ["a", "b"]
    assert [c[2] for c in P.cases([None], ["before", "after"])] == \
        ["working tree (identity ops as before #19395)", "working tree"]
    with pytest.raises(ValueError, match="one or two sides"):
        P.cases(["a", "b", "c"])
    with pytest.raises(ValueError, match="one or two sides"):
        P.cases(["a", "b"], ["before", "after"])


# ---------------------------------------------------------------------------------------------------------------------
# From a dispatch to the workbench's family

@pytest.fixture(scope="module")
def residual_profile(residual):
    frame, rows = residual
    summary = json.loads((DATA / "residual_add" / "summary.json").read_text())
    table = E.dispatch_table(rows, warmup=1).assign(revision="working tree", model="residual_add",
                                                     etvk_commit=summary["commit"])
    program = R.Program(DATA / "residual_add" / "model.pte", [], DATA / "residual_add" / "reference.pt", summary)
    return P.Profile("residual_add", table, pd.DataFrame(), E.kernel_table(table), pd.DataFrame(),
                     {"working tree": program})


def test_a_conv_dispatch_becomes_the_family_options(residual_profile):
    family, opts = D.options(residual_profile, 2)
    assert family == "q8ta_conv2d_pw"
    assert opts["shape"] == (1, 3, 16, 16) and opts["out_channels"] == 16
    assert opts["out_layout"] in ("4W4C", "4C1W") and opts["bias"] is True and opts["fallback"] is False
    family, opts = D.options(residual_profile, 5)
    assert family == "q8ta_binary" and opts["shape"] == opts["other_shape"] == (1, 16, 16, 16)
    family, opts = D.options(residual_profile, 1)
    assert family == "q8ta_quantize" and opts["storage"] == "texture3d" and opts["in_layout"] == "CHANNELS_PACKED"


def test_what_cannot_be_drilled_says_why(residual_profile):
    with pytest.raises(D.NotDrillable, match="staging"):
        D.options(residual_profile, 0)
    with pytest.raises(ValueError, match="no dispatch 99"):
        D.options(residual_profile, 99)


# ---------------------------------------------------------------------------------------------------------------------
# The build's error paths (a synthetic tree)

def run_git(tree, *args):
    subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                            GIT_COMMITTER_EMAIL="t@t"))


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "executorch"
    glsl = root / "backends/vulkan/runtime/graph/ops/glsl"
    glsl.mkdir(parents=True)
    (glsl / "x.yaml").write_text("x: {}\n")
    (root / "backends/vulkan/__init__.py").write_text("")
    (root / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.24)\n")
    run_git(root, "init", "-q")
    run_git(root, "add", "-A")
    run_git(root, "commit", "-qm", "synthetic")
    return root


def test_a_missing_tool_is_named(tree, monkeypatch):
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda t: None if t == "ninja" else real(t))
    with pytest.raises(B.RuntimeBuildError, match="not found on PATH: ninja"):
        B.build(tree)


def test_missing_submodules_are_named(tree, monkeypatch):
    monkeypatch.setattr(B, "glslc", lambda: Path("/usr/bin/true"))
    monkeypatch.setattr(B, "missing_tools", lambda tools=B.TOOLS: [])
    with pytest.raises(B.RuntimeBuildError, match="third-party/flatcc") as e:
        B.build(tree)
    assert "git -C" in str(e.value) and "submodule update --init" in str(e.value)


def test_a_revision_without_the_desktop_build_is_refused(tree, tmp_path, monkeypatch):
    monkeypatch.setattr(B, "glslc", lambda: Path("/usr/bin/true"))
    monkeypatch.setattr(B, "missing_tools", lambda tools=B.TOOLS: [])
    monkeypatch.setenv(B.ENV_VAR, str(tmp_path / "cache"))
    with pytest.raises(B.RuntimeBuildError, match="is not a submodule at"):
        B.build(tree, rev="HEAD")


def test_an_unknown_revision_is_named(tree, monkeypatch):
    monkeypatch.setattr(B, "glslc", lambda: Path("/usr/bin/true"))
    monkeypatch.setattr(B, "missing_tools", lambda tools=B.TOOLS: [])
    with pytest.raises(Exception, match="revision 'nosuchrev' not found"):
        B.build(tree, rev="nosuchrev")


def test_no_glslc_for_the_dialect_says_what_to_run(monkeypatch):
    from workbench.toolchain import glslang

    def refuse(*a, **k):
        raise glslang.GlslangNotSetUpError("not set up")
    monkeypatch.setattr(glslang, "require", refuse)
    with pytest.raises(B.RuntimeBuildError, match="workbench.toolchain.glslang setup"):
        B.glslc()


def test_the_revision_python_is_exported_once(tree, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_ETVK_CACHE", str(tmp_path / "etvk"))
    folder, commit, label = R.python_tree(tree, "HEAD")
    assert (folder / "backends/vulkan/__init__.py").is_file() and label == "HEAD" and len(commit) == 40
    again, _, _ = R.python_tree(tree, "HEAD")
    assert again == folder
    overlay, _, label = R.python_tree(tree, None)
    assert label == "working tree" and (overlay / "backends/vulkan").resolve() == (tree / "backends/vulkan").resolve()


def test_an_unknown_model_is_named(tree):
    with pytest.raises(ValueError, match="unknown model 'resnet'; expected one of"):
        R.lower("resnet", executorch=tree, out_dir="/tmp/never")


def _lowered(tmp_path, model="residual_add", side="working-tree"):
    """A folder as `etvk lower` writes it, from the committed run's program."""
    import shutil
    folder = tmp_path / "lowered" / side
    folder.mkdir(parents=True)
    for name in ("summary.json", "model.pte", "reference.pt"):
        shutil.copy2(DATA / "residual_add" / name, folder / name)
    (folder / "input-0.bin").write_bytes(b"\0" * 16)
    (folder / "run.etdp").write_bytes(b"stale")       # a run's output: not copied
    return folder.parent


def test_programs_lowered_elsewhere_are_checked_and_copied(tmp_path):
    lowered = _lowered(tmp_path)
    sides = P.lowered_sides(lowered, "residual_add", out_dir=tmp_path / "run")
    assert [s["label"] for s in sides] == ["working tree"]
    target = sides[0]["folder"]
    assert target == tmp_path / "run" / "working-tree" and (target / "model.pte").is_file()
    assert not (target / "run.etdp").exists() and (lowered / "working-tree" / "run.etdp").exists()
    with pytest.raises(FileNotFoundError, match=r"no lowered program for 24da2f65cd .*expected the subfolder "
                                                r"'24da2f65cd'.*found \['working-tree'\]"):
        P.lowered_sides(lowered, "residual_add", revs=["24da2f65cd"], out_dir=tmp_path / "run")
    with pytest.raises(ValueError, match="holds 'residual_add', not the model asked for \\('mobilenet_v2'\\)"):
        P.lowered_sides(lowered, "mobilenet_v2", out_dir=tmp_path / "run")
    with pytest.raises(ValueError, match=r"was lowered for input \[1, 3, 16, 16\], not \[1, 3, 224, 224\]"):
        P.lowered_sides(lowered, "residual_add", input_shape=(1, 3, 224, 224), out_dir=tmp_path / "run")
    (lowered / "working-tree" / "input-0.bin").unlink()
    with pytest.raises(FileNotFoundError, match=r"not a whole lowered program: \['input-0.bin'\] missing"):
        P.lowered_sides(lowered, "residual_add", out_dir=tmp_path / "run")


# ---------------------------------------------------------------------------------------------------------------------
# With a checkout: the real build, a profile on lavapipe, the #19395 A/B

@needs_checkout
def test_profile_on_etvk_runtime_matches_torch(tmp_path):
    p = P.profile("residual_add", executorch=CHECKOUT, runs=3, warmup=1, out_dir=tmp_path, quiet=True)
    assert (p.outputs["max_abs_diff"] <= p.outputs["reference_abs_max"] * 0.02).all()
    assert (p.outputs["validation_messages"] == 0).all()
    kernels = set(p.dispatches["kernel"])
    assert "q8ta_conv2d_pw_float" in kernels and "q8ta_add_buffer" in kernels
    assert (p.dispatches["runtime_commit"] == p.dispatches["etvk_commit"]).all()
    assert p.dispatches["etvk_python"].iat[0].startswith(str(Path(CHECKOUT).resolve()))
    row = D.drill(p, 2, executorch=CHECKOUT, statistics=False)
    assert row["correct"] and row["same_variant"] and row["workbench_us"] > 0
    assert (row["timestamps"], row["barriers"], row["back_to_back"]) == ("etvk", "light", 20)   # timed as fidelity


@needs_checkout
def test_identity_ops_before_and_after_19395_on_the_runtime(tmp_path):
    p = P.profile("refinenet_like", executorch=CHECKOUT, settings=["before", "after"], runs=2, warmup=1,
                  input_shape=(1, 3, 64, 32), out_dir=tmp_path, quiet=True)
    ab = p.compare
    per = ab[ab["kernel"] != "(all)"]
    assert not any(k.startswith("q8ta_clone") for k in per["kernel"])      # see the committed-run test above
    assert (per["dispatches_a"] == per["dispatches_b"]).all()
    assert (p.outputs["validation_messages"] == 0).all()


def test_the_warm_up_load_runs_and_leaves_nothing_behind():
    from workbench import vk
    device = vk.get_device()
    P.warm_gpu(device, 0.05, cpu_too=True)      # the copy pipeline stays cached on the device, as pipeline_for keeps it
    before = device.live_objects()
    P.warm_gpu(device, 0.05, cpu_too=True)
    assert device.live_objects() == before


@needs_checkout
def test_back_to_back_copies_time_the_same_dispatch(tmp_path):
    from workbench import etvk, vk
    gen = etvk.Codegen(etvk.source(CHECKOUT))
    d = etvk.make(gen, "q8ta_clone", shape=(1, 8, 6, 10))
    row = etvk.execute(vk.get_device(), gen, d, back_to_back=4, min_time_s=0.01, max_time_s=0.5)
    assert row["correct"] and row["back_to_back"] == 4 and row["median_us"] > 0
    with pytest.raises(ValueError, match="back_to_back must be >= 1, got 0"):
        etvk.execute(vk.get_device(), gen, d, back_to_back=0)
    # a copy before each copy of the dispatch evicts its inputs; only the dispatch is timed
    for between in ("copy:1", "shader:0.01"):      # a buffer copy, or another pipeline, untimed before each copy
        cold = etvk.execute(vk.get_device(), gen, d, back_to_back=4, between=between, min_time_s=0.01,
                            max_time_s=0.5)
        assert cold["correct"] and cold["between"] == between and 0 < cold["median_us"]
    with pytest.raises(ValueError, match="between='copy:1' needs back_to_back >= 2"):
        etvk.execute(vk.get_device(), gen, d, back_to_back=1, between="copy:1")
    # ET-VK's own placement: each copy's time includes the barrier before it
    timed = etvk.execute(vk.get_device(), gen, d, back_to_back=4, barrier_timed=True, min_time_s=0.01,
                         max_time_s=0.5)
    assert timed["correct"] and timed["barrier_timed"] and timed["median_us"] > 0


@needs_checkout
def test_run_items_times_each_item_every_way_asked(tmp_path):
    import json

    import pandas as pd

    from workbench.cli import main
    items = [{"model": "m", "dispatch_id": 1, "kernel": "q8ta_clone_buffer", "family": "q8ta_clone",
              "options": {"shape": [1, 8, 6, 10]}},
             {"model": "m", "dispatch_id": 2, "kernel": "q8ta_clone_buffer", "family": "q8ta_clone",
              "options": {"shape": [0, 8, 6, 10]}}]                               # refused: an empty size
    (tmp_path / "items.json").write_text(json.dumps(items))
    assert main(["etvk", "run-items", str(tmp_path / "items.json"), "--csv", str(tmp_path / "rows.csv"),
                 "--executorch", CHECKOUT, "--back-to-back", "2", "--timestamps", "etvk", "workbench",
                 "--barriers", "light", "full", "--warm-seconds", "0"]) == 0
    rows = pd.read_csv(tmp_path / "rows.csv")
    assert list(rows["dispatch_id"]) == [1] * 4 + [2] * 4
    assert list(rows["timestamps"]) == ["etvk", "etvk", "workbench", "workbench"] * 2
    assert list(rows["barriers"]) == ["light", "full"] * 4
    good = rows[rows["dispatch_id"] == 1]
    assert good["correct"].all() and (good["median_us"] > 0).all()
    assert list(good["barrier_timed"]) == [True, True, False, False]
    assert list(good["full_barriers"]) == [False, True, False, True]
    assert rows[rows["dispatch_id"] == 2]["error"].str.contains("every size must be >= 1").all()


@needs_checkout
def test_a_program_lowered_elsewhere_runs_on_the_runtime(tmp_path):
    lowered = tmp_path / "lowered"
    P.lower("residual_add", executorch=CHECKOUT, out_dir=lowered, quiet=True)
    p = P.profile("residual_add", executorch=CHECKOUT, runs=2, warmup=1, out_dir=tmp_path / "run", quiet=True,
                  lowered=lowered)
    assert (p.outputs["max_abs_diff"] <= p.outputs["reference_abs_max"] * 0.02).all()
    assert not (lowered / "working-tree" / "run.etdp").exists() and (tmp_path / "run/working-tree/run.etdp").exists()


def test_model_explorer_node_data_sums_each_nodes_dispatches(residual_profile):
    from workbench.etvk.model import explorer as X
    values = X.node_values(residual_profile)
    assert len(values) == 1
    ops = residual_profile.dispatches[residual_profile.dispatches["delegate_node_id"].notna()]
    assert sum(values[0].values()) == pytest.approx(ops["gpu_us"].sum())
    nodes = residual_profile.programs["working tree"].summary["nodes"]
    assert set(values[0]) <= set(nodes)            # every timed node is a node of the delegate's graph
    data = X.node_data(values[0], "ET-VK GPU µs")
    assert set(data) == {X.GRAPH_ID} and data[X.GRAPH_ID]["results"] and data[X.GRAPH_ID]["gradient"]


def test_fidelity_table_pairs_every_way_of_timing_with_the_runtime(residual_profile):
    import dataclasses

    import pandas as pd
    profile = dataclasses.replace(residual_profile, dispatches=residual_profile.dispatches.assign(device="llvmpipe"))
    runtime = profile.dispatches.set_index("dispatch_id")["gpu_us"]
    replayed = pd.DataFrame([{"model": "residual_add", "dispatch_id": 2, "family": "q8ta_conv2d_pw",
                              "variant": "q8ta_conv2d_pw_float", "median_us": runtime[2] * k, "correct": True,
                              "global_size": "1x1x1", "local_size": "1x1x1", "options": "{}", "timestamps": t,
                              "between": "none"} for t, k in (("etvk", 1.0), ("workbench", 0.5))])
    table = F.table(profile, replayed)
    assert list(table["timestamps"]) == ["etvk", "workbench"]
    assert list(table["ratio"].round(6)) == [1.0, 0.5] and table["same_variant"].all()
    s = F.summary(table).set_index(["timestamps", "family"])
    assert s.loc[("etvk", "q8ta_conv2d_pw"), "within_10pct"] == 1.0
    assert s.loc[("workbench", "(all)"), "within_10pct"] == 0.0 and s.loc[("workbench", "(all)"), "dispatches"] == 1


def test_bracket_says_whether_the_runtime_lies_between_warm_and_cold(residual_profile):
    import dataclasses

    import pandas as pd
    profile = dataclasses.replace(residual_profile, dispatches=residual_profile.dispatches.assign(device="llvmpipe"))
    runtime = profile.dispatches.set_index("dispatch_id")["gpu_us"]
    rows = [{"model": "residual_add", "dispatch_id": i, "family": "f", "variant": "v", "median_us": runtime[i] * k,
             "correct": True, "options": "{}", "timestamps": "etvk", "barriers": "light", "between": b}
            for i, (warm, cold) in ((2, (0.8, 1.3)), (3, (0.5, 0.7)), (4, (1.05, 1.2))) for b, k in
            (("none", warm), ("shader:128", cold))]
    table = F.table(profile, pd.DataFrame(rows))
    assert len(F.timed_as(table, between="none")) == 3 and len(F.timed_as(table, between=["none", "shader:128"])) == 6
    assert len(F.timed_as(table, between="none", mode="absent")) == 3     # a column the table lacks selects nothing away
    rows_in = F.bracket(table)
    got = rows_in.set_index("dispatch_id")
    assert list(got["inside"]) == [True, False, True]       # 0.8–1.3; 0.5–0.7 (+10 % < 1); 1.05 (−10 % < 1)
    assert F.bracket_summary(rows_in).loc["(all)"].to_dict() == {"dispatches": 3, "inside": 2, "share": 2 / 3}
    assert got.loc[3, "warm_us"] == pytest.approx(runtime[3] * 0.5)
    with pytest.raises(ValueError, match="no rows timed as .*shader:64.*the table has"):
        F.bracket(F.table(profile, pd.DataFrame(rows)), cold={"between": "shader:64"})


@pytest.mark.parametrize("text, expected", [("none", ("none", 0)), ("copy:128", ("copy", 128 << 20)),
                                            ("shader:0.001", ("shader", 1056))])
def test_between_names_what_runs_before_each_copy(text, expected):
    from workbench.measure import parse_between
    assert parse_between(text) == expected


@pytest.mark.parametrize("text", ["copy", "shader:0", "copy:x", "none:3", "flush:1"])
def test_a_bad_between_is_refused_by_name(text):
    from workbench.measure import parse_between
    with pytest.raises(ValueError, match=f"between must be 'none', 'copy:MIB' or 'shader:MIB' with MIB > 0, got '{text}'"):
        parse_between(text)


def test_fidelity_wants_models_or_executed_programs(tmp_path, capsys):
    from workbench.cli import main
    assert main(["etvk", "fidelity", "--out", str(tmp_path)]) == 2
    assert main(["etvk", "fidelity", "residual_add", "--from", str(DATA / "residual_add"), "--out", str(tmp_path)]) == 2
    assert "name models to profile, or executed programs with --from" in capsys.readouterr().err


@needs_checkout
def test_fidelity_of_a_committed_run_every_way(tmp_path):
    import pandas as pd

    from workbench.cli import main
    assert main(["etvk", "fidelity", "--from", str(DATA / "residual_add"), "--out", str(tmp_path), "--executorch",
                 CHECKOUT, "--back-to-back", "2", "--warm-seconds", "0", "--timestamps", "etvk", "workbench",
                 "--between", "none", "shader:1", "--quiet"]) == 0
    table = pd.read_csv(tmp_path / "etvk_fidelity.csv")
    assert set(table["timestamps"]) == {"etvk", "workbench"} and table["correct"].all()
    assert set(table["between"]) == {"none", "shader:1"}
    assert table["same_variant"].all() and (table["ratio"] > 0).all()
    replayed = pd.read_csv(tmp_path / "etvk_fidelity_timed.csv")
    assert len(replayed) == len(table)
    summary = pd.read_csv(tmp_path / "etvk_fidelity_summary.csv")
    assert set(summary["family"]) >= {"q8ta_conv2d_pw", "(all)"}
