"""Every notebook runs top to bottom on the default device with small sizes, validation layer on."""
import json

import nbformat
import pytest

from workbench import notebook as nb

NOTEBOOKS = nb.notebooks()
VALIDATION_CHECK = nb.VALIDATION_CHECK_CELL


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no NN_name.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    for i, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert not cell.get("outputs"), f"{path.name} cell {i} has outputs: clear them before committing"
            assert cell.get("execution_count") is None, f"{path.name} cell {i} has an execution count"
    tagged = [c for c in notebook.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: exactly one cell must be tagged 'parameters'"
    assert "FULL" in tagged[0].source and "RESULTS_DIR" in tagged[0].source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_headless(path, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_VALIDATION", "1")
    executed = nb.execute(path, parameters={"FULL": False, "RESULTS_DIR": str(tmp_path)},
                          extra_cells=[VALIDATION_CHECK], timeout=600)
    last = executed.cells[-1].outputs
    assert any("validation: silent" in o.get("text", "") for o in last)
    # each notebook exports at least one DataFrame with its metadata, and one chart
    assert list(tmp_path.glob("*.csv")) and list(tmp_path.glob("*.png")), sorted(p.name for p in tmp_path.iterdir())
    for meta in tmp_path.glob("*.json"):
        data = json.loads(meta.read_text())
        assert {"device", "driver", "api_version", "workbench_version", "commit", "date"} <= set(data)
