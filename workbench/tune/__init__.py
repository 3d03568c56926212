"""A tuner for the workbench's kernels: optuna's TPE over a kernel's own tile / option space, candidates measured on
every device of a Dask cluster (one worker per device), every trial a tidy row.

    from workbench import tune
    result = tune.tune("conv-pw", budget=6, seed=0)          # data/<device>/tune_conv_pw.csv
    grid = tune.exhaustive("conv-pw")                         # every valid config, the same measurement
    tune.compare(result.frame, grid.frame)                    # the pick against the exhaustive best
    tune.simulate("conv-pw", grid.frame, seeds=range(10))       # the optimiser alone, on the measured table

space.py (the spaces, from the kernels' specs; registered in `workbench.catalogue`, whose names `workbench tune`
takes), search.py (the optimiser loop), candidates.py (one candidate on one
device), evaluate.py (in this process or on Dask), tuner.py (tune, exhaustive), compare.py (against the exhaustive
grid), vendor_table.py (the best variant per device or compiler, as ET-VK's C++ selects).
"""
from .space import SPACES, TuningSpace, tuning_space

__all__ = ["SPACES", "TuningSpace", "tuning_space", "tune", "exhaustive", "compare", "simulate"]


def tune(*args, **kwargs):
    from .tuner import tune as run
    return run(*args, **kwargs)


def exhaustive(*args, **kwargs):
    from .tuner import exhaustive as run
    return run(*args, **kwargs)


def compare(*args, **kwargs):
    from .compare import compare as run
    return run(*args, **kwargs)


def simulate(*args, **kwargs):
    from .compare import simulate as run
    return run(*args, **kwargs)
