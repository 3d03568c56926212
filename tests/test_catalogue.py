"""The one catalogue of kernel families (workbench.catalogue): every string resolves, the registries that read it
(benchmarks.SUITES, fanout.make_sweep, tune.SPACES, the tuner's candidate runner, the CLI's choices, the suites'
charts) agree with it, and ET-VK's op families are listed beside the workbench's own."""
import argparse
import inspect
from types import ModuleType

import pytest

from workbench import catalogue
from workbench.catalogue import Family, Space, Suite


@pytest.mark.parametrize("where, ref", sorted(catalogue.references(None).items()), ids=lambda v: str(v))
def test_every_string_of_every_entry_resolves(where, ref):
    obj = catalogue.resolve(ref)
    if where[1] == "spec":
        assert isinstance(obj, ModuleType) or callable(obj), f"{where}: {ref} is neither a module nor callable"
    elif where == ("etvk", "families"):
        assert obj and all(callable(make) for make in obj.values())
    else:
        assert callable(obj), f"{where}: {ref} resolves to {obj!r}, not a function or class"


def test_a_typo_fails_with_the_string_named():
    with pytest.raises(ValueError, match="'workbench.benchmarks.convv:bench_suite': no module "
                                         "'workbench.benchmarks.convv'"):
        catalogue.resolve("workbench.benchmarks.convv:bench_suite")
    with pytest.raises(ValueError, match="workbench.benchmarks.conv has no attribute 'bench_suit'"):
        catalogue.resolve("workbench.benchmarks.conv:bench_suit")
    with pytest.raises(ValueError, match="expected a 'module' or 'module:attribute' string, got 'a:b:c'"):
        catalogue.resolve("a:b:c")
    assert catalogue.resolve("workbench.tune.space:TuningSpace.check").__name__ == "check"


def test_names_are_unique_and_every_family_can_be_run():
    names = [f.name for f in catalogue.families()]
    assert len(names) == len(set(names))
    suites = [s.name for f in catalogue.FAMILIES for s in f.suites]
    spaces = [s.name for f in catalogue.FAMILIES for s in f.spaces]
    assert len(suites) == len(set(suites)) and len(spaces) == len(set(spaces))
    for f in catalogue.FAMILIES:
        assert f.kind == "workbench" and f.doc and f.commands(), f.name
        assert all(isinstance(s, Suite) for s in f.suites) and all(isinstance(s, Space) for s in f.spaces)


def test_the_suites_are_the_catalogues_in_its_order():
    from workbench import benchmarks
    assert list(benchmarks.SUITES) == list(catalogue.suites())
    for name, entry in catalogue.suites().items():
        assert benchmarks.SUITES[name] is benchmarks.suite(name) is catalogue.resolve(entry.run)
        assert list(inspect.signature(benchmarks.SUITES[name]).parameters)[:2] == ["device", "writer"], name
    # `workbench main --benchmarks` runs them in this order: the copy roofline first
    assert list(benchmarks.SUITES)[0] == "copy"


def test_sweeps_are_the_catalogues():
    from workbench import fanout
    assert set(catalogue.sweeps()) == {"conv-pw", "pixel-shuffle"}
    for name, family in catalogue.sweeps().items():
        sweep = fanout.make_sweep(name, quick=True)
        assert type(sweep) is catalogue.resolve(family.sweep) and sweep.name == name and sweep.items()
    with pytest.raises(ValueError, match=r"unknown sweep 'conv'; sweeps: \['conv-pw', 'pixel-shuffle'\]"):
        fanout.make_sweep("conv")


def test_spaces_and_candidates_are_the_catalogues():
    from workbench import tune
    from workbench.tune import candidates
    assert list(tune.SPACES) == list(catalogue.spaces())
    for name, (family, entry) in catalogue.spaces().items():
        assert tune.SPACES[name] is catalogue.resolve(entry.build)
        assert tune.tuning_space(name).kernel == name   # the builder names its space as the catalogue does
        assert catalogue.resolve(family.candidate) in (candidates.run_conv, candidates.run_pixel_shuffle)
    assert catalogue.space("conv-pw-wg")[0] is catalogue.family("conv-pw")


def test_the_command_lines_choices_come_from_the_catalogue():
    from workbench.cli import bench, fanout, tune
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    for family in (bench, fanout, tune):
        family.register(sub)

    def choices(command, dest):
        return next(a.choices for a in sub.choices[command]._actions if a.dest == dest)

    assert choices("bench", "suite") == sorted(catalogue.suites()) + ["overhead"]
    assert choices("sweep", "sweep") == sorted(catalogue.sweeps())
    assert choices("tune", "kernel") == sorted(catalogue.spaces())


class _Figure:
    saved = []   # where write_chart saved the charts _chart drew

    def savefig(self, path, **options):
        self.saved.append(path)


def _chart(df):
    return _Figure()


def test_write_chart_draws_the_chart_the_catalogue_names(monkeypatch, tmp_path):
    from workbench.cli.bench import write_chart
    charted = Family("demo", "a demo", "workbench.kernels.copy",
                     suites=(Suite("demo", "workbench.benchmarks.copy:copy_suite", chart=f"{__name__}:_chart"),
                             Suite("plain", "workbench.benchmarks.copy:copy_suite")))
    monkeypatch.setattr(catalogue, "FAMILIES", (charted,))
    monkeypatch.setattr(_Figure, "saved", [])
    write_chart("plain", [1], tmp_path / "plain")
    write_chart("demo", [], tmp_path / "demo")        # no rows, no chart
    assert _Figure.saved == []
    write_chart("demo", [1], tmp_path / "demo")
    assert _Figure.saved == [tmp_path / "demo.png"]
    with pytest.raises(ValueError, match="unknown benchmark suite 'conv-pw'; suites: \\['demo', 'plain'\\]"):
        write_chart("conv-pw", [1], tmp_path / "x")


def test_etvk_families_are_listed_beside_the_workbenchs():
    from workbench.etvk.families import KERNELS
    etvk = catalogue.families("etvk")
    assert [f.name for f in etvk] == list(KERNELS) and all(f.kind == "etvk" and f.doc for f in etvk)
    assert catalogue.families() == catalogue.FAMILIES + etvk
    entry = catalogue.family("q8ta_conv2d_pw")
    assert catalogue.resolve(entry.spec) is KERNELS["q8ta_conv2d_pw"]
    assert entry.commands() == ["workbench etvk run q8ta_conv2d_pw"]
    assert catalogue.family("conv-pw").commands()[-2:] == ["workbench tune conv-pw", "workbench tune conv-pw-wg"]
    with pytest.raises(ValueError, match="unknown family 'nope'; families: "):
        catalogue.family("nope")
    with pytest.raises(ValueError, match="expected a family kind of \\['workbench', 'etvk'\\] .* got 'et-vk'"):
        catalogue.families("et-vk")
    with pytest.raises(ValueError, match="demo: expected a family kind of .* got 'etvk-op'"):
        Family("demo", "a demo", "workbench.kernels.copy", kind="etvk-op")
    with pytest.raises(ValueError, match="demo: a tuning space needs a candidate runner"):
        Family("demo", "a demo", "workbench.kernels.copy", spaces=(Space("demo", "workbench.tune.space:conv_space"),))


def test_importing_the_catalogue_and_its_readers_imports_no_suite():
    import subprocess
    import sys
    from pathlib import Path
    code = ("import sys, workbench.catalogue, workbench.benchmarks, workbench.tune; "
            "print(sorted(m for m in sys.modules if m.startswith(('workbench.benchmarks.', 'workbench.etvk', "
            "'workbench.kernels'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]", out.stdout
