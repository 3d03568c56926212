"""workbench.checks.lint: the planted bugs of tests/shaders/planted are caught, clean shaders are not flagged."""
import os
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.checks.lint import COLUMNS, lint_spirv, parse
from workbench.toolchain.shaders import compile_glsl

PLANTED = Path(__file__).parent / "shaders" / "planted"
CHECKOUT = os.environ.get("WORKBENCH_EXECUTORCH")


def spirv(name, **defines):
    path = PLANTED / f"{name}.glsl"
    return compile_glsl(path.read_text(), defines=defines, name=name, source_path=path).code


def checks(name, **defines):
    return [r["check"] for r in lint_spirv(spirv(name, **defines), name)]


def test_return_before_barrier_is_caught():
    rows = lint_spirv(spirv("early_return_barrier"), "early_return_barrier")
    assert [r["check"] for r in rows] == ["barrier_divergence"]
    assert rows[0]["severity"] == "error" and "OpReturn at instruction" in rows[0]["message"]
    assert set(rows[0]) == set(COLUMNS)


def test_shared_write_read_without_barrier_is_caught():
    rows = lint_spirv(spirv("shared_no_barrier"), "shared_no_barrier")
    assert [r["check"] for r in rows] == ["shared_race"]
    assert "shared tile" in rows[0]["message"]


@pytest.mark.parametrize("name,defines", [("reverse_tile", {}), ("scale_tiles", {}),
                                          ("scale_tiles", {"BAD_LAST_TILE": 1})])
def test_clean_shaders_are_not_flagged(name, defines):
    assert checks(name, **defines) == []  # the bad last tile is replay's to catch, not lint's


def test_parse_errors_name_expected_and_given():
    with pytest.raises(ValueError, match="expected magic .* got"):
        parse(b"\0" * 20)
    with pytest.raises(ValueError, match="multiple of 4"):
        parse(b"\0" * 21)


def test_cli_lint_needs_names_or_all(tmp_path):
    assert main(["etvk", "lint", "--executorch", str(tmp_path / "none"), "x"]) == 2


@pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set")
def test_cli_lint_checkout(capsys):
    assert main(["etvk", "lint", "--executorch", CHECKOUT]) == 2
    assert "expected shader files (.glsl, .spv), VARIANT names, --all or --interfaces" in capsys.readouterr().err
    assert main(["etvk", "lint", "--executorch", CHECKOUT, "no_such_variant"]) == 2
    assert main(["etvk", "lint", "--executorch", CHECKOUT, "--quiet", "q8ta_linear_gemv_float"]) == 1  # errors found


@pytest.mark.skipif(not CHECKOUT, reason="WORKBENCH_EXECUTORCH is not set")
def test_interfaces_of_every_family_agree_with_the_checkout(capsys):
    from workbench import etvk
    from workbench.etvk.checks import check_families
    gen = etvk.Codegen(etvk.source(CHECKOUT))
    assert check_families(gen) == []  # every family's push constants and UBOs cover what its shader declares
    with pytest.raises(ValueError, match="expected family names .* got \\['nope'\\]"):
        check_families(gen, ["nope"])
    assert main(["etvk", "lint", "--interfaces", "--executorch", CHECKOUT]) == 0
    assert "interfaces: 0 push-constant / UBO range finding(s)" in capsys.readouterr().out


def test_binding_at_names_the_accessed_binding():
    from workbench.vk.spirv import binding_at, reflect
    from workbench.checks.lint import OP_LOAD, OP_STORE
    code = spirv("scale_tiles")
    ins = parse(code)
    stores = [i.index for i in ins if i.opcode == OP_STORE]
    loads = [i.index for i in ins if i.opcode == OP_LOAD]
    assert {binding_at(code, k) for k in stores} == {0}  # out_data
    assert 1 in {binding_at(code, k) for k in loads}  # in_data
    assert binding_at(code, 0) is None and binding_at(code, 10**6) is None
    assert [b.block_size for b in reflect(code).bindings] == [None, None]
