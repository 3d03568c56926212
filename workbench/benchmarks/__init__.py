"""The benchmark suites, one module each; a suite measures kernels (``workbench.kernels``) with the method of
``workbench.measure`` and writes tidy rows as it goes.

Every suite has the signature
    suite(device, writer: ResultsWriter | None, *, quick: bool = False, show_progress: bool = True) -> DataFrame
and is registered in ``workbench.catalogue`` (its family's ``suites``) under the name ``workbench bench NAME`` takes;
SUITES is the catalogue's view name -> function. A suite's module is imported when the suite is first looked up, and
the heavy imports (ExecuTorch, CUDA torch) happen inside the suites that need them, so importing this package stays
cheap.
"""
from __future__ import annotations

from .. import catalogue

SUITES = catalogue.Resolved({name: entry.run for name, entry in catalogue.suites().items()})


def suite(name: str):
    """The suite registered as `name`, or a clear error listing the names."""
    return catalogue.resolve(catalogue.suite(name).run)
