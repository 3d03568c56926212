"""What the command families share: tables on the terminal, the device a command runs on, the results folders a
command writes (reported on Ctrl-C)."""
from __future__ import annotations

import sys
from pathlib import Path

RESULTS_DIRS: list[Path] = []  # where this command writes (reported on Ctrl-C)


def table(df, columns=None) -> str:
    import pandas as pd
    with pd.option_context("display.max_columns", None, "display.width", 200, "display.max_colwidth", 60):
        return (df[columns] if columns else df).to_string(index=False, float_format=lambda v: f"{v:,.2f}")


def device(args):
    """The device `--device` names (else the current one)."""
    from .. import vk
    return vk.get_device() if args.device is None else vk.set_device(args.device)


def results_dir(out, device) -> Path:
    """`out`, or data/<device>/; remembered for the Ctrl-C report."""
    from ..measure import default_results_dir
    folder = Path(out) if out else default_results_dir(device)
    RESULTS_DIRS.append(folder)
    return folder


def interrupted(since: float) -> int:
    """One line on Ctrl-C: how many finished rows the CSVs written by this command hold, and where."""
    import pandas as pd
    rows, files = 0, []
    for folder in dict.fromkeys(RESULTS_DIRS):
        for csv in sorted(folder.glob("*.csv")) if folder.is_dir() else ():
            if csv.stat().st_mtime >= since:
                try:
                    rows += len(pd.read_csv(csv))
                except (pd.errors.EmptyDataError, OSError):
                    continue
                files.append(csv.name)
    where = ", ".join(str(f) for f in dict.fromkeys(RESULTS_DIRS)) or "no results folder"
    print(f"interrupted: {rows} rows kept in {where}" + (f" ({', '.join(files)})" if files else ""),
          file=sys.stderr)
    return 130
