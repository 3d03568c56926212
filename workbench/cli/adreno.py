"""`workbench adreno …`: Adreno statistics without a phone -- `workbench compilers …` (cli/compilers.py) with the
Adreno a740 as the default GPU; `--gpu` takes any of `workbench.vendors.mesa.GPUS` here too."""
from __future__ import annotations

from ..vendors.mesa import DEFAULT_GPU
from .compilers import add_commands, check, conv, setup, stats, status  # noqa: F401  (the handlers, for tests)


def register(subparsers) -> None:
    p = subparsers.add_parser("adreno", help="Adreno statistics without a phone (Turnip on the freedreno drm-shim; "
                                             "`workbench compilers` for Mali and AMD too)")
    add_commands(p, "adreno", default_gpu=DEFAULT_GPU)
