"""How the workbench measures, and nothing else (no kernel, no suite), one module per idea:

- method.py: sampling a recording (each command on its own: `sample_each`) or a Python callable, and the statistics
  of the samples (`sample_recording`, `sample_callable`, `sampling`, `summarize_ns`, `stability`); warm clocks;
- warmup.py: the one warm-up (`keep_busy`), which every other warm-up calls;
- ways.py: the ways of timing a dispatch back to back (timestamp placement, light / full barriers, what runs
  between copies: `Way`, `parse_between`);
- rows.py: one tidy row per measurement with its metadata (`environment`, `measurement_row`, `Rows`, `git_commit`);
- results.py: results folders (`ResultsWriter`, `ResultsReader`, `atomic_write`, `results_folder_name`);
- clocks.py: the clocks of an NVIDIA GPU at one moment (`nvml_clocks`) and sampled while work runs (`ClockSampler`);
- cache.py: the cache regime of a row (hot, or cold: inputs rotated through 4x the last-level cache);
- ab.py: two dispatches timed interleaved (A B A B …), the ratio B/A with a bootstrap interval and a verdict
  (`sample_interleaved`, `ratio_ci`, `verdict`, `ab_frame`).

It knows only the runtime (`workbench.vk`). The public names are re-exported here: ``from workbench.measure
import X``.
"""
from .clocks import CLOCK_COLUMNS, ClockSampler, nvml_clocks
from .cache import REGIMES, Rotation, default_regime, last_level_cache, parse_regimes, rotation, sample_rotated
from .method import (QUICK_NOTE, STABILITY_ATTEMPTS, STABILITY_DRIFT, STABILITY_SPREAD, Samples, sample_callable,
                     sample_each, sample_recording, sampling, stability, summarize_ns)
from .results import (OPEN_WRITERS, ResultsReader, ResultsWriter, atomic_write, default_results_dir,
                      results_folder_name)
from .rows import COMMIT_STAMP, REPO, Rows, environment, git_commit, measurement_row, progress
from .warmup import GPU_WARMUP_S, keep_busy
from .ways import BARRIERS, BETWEEN_KINDS, TIMESTAMPS, Way, parse_between

__all__ = ["REGIMES", "Rotation", "default_regime", "last_level_cache", "parse_regimes", "rotation",
           "sample_rotated", "CLOCK_COLUMNS", "ClockSampler", "nvml_clocks", "QUICK_NOTE", "STABILITY_ATTEMPTS", "STABILITY_DRIFT",
           "STABILITY_SPREAD", "Samples", "sample_callable", "sample_each", "sample_recording", "sampling", "stability",
           "summarize_ns", "OPEN_WRITERS", "ResultsReader", "ResultsWriter", "atomic_write", "default_results_dir",
           "results_folder_name", "COMMIT_STAMP", "REPO", "Rows", "environment", "git_commit", "measurement_row",
           "progress", "GPU_WARMUP_S", "keep_busy", "BARRIERS", "BETWEEN_KINDS", "TIMESTAMPS", "Way",
           "parse_between"]
