"""Replays the planted shared-memory race (tests/shaders/planted/shared_exchange.glsl, no barrier) on the current
Vulkan device: for each local size × number of work groups × stress, N runs, each compared bitwise with the reference
and with run 0 (``workbench.etvk.shake.shake_dispatch``). Writes ``data/<device>/shake_planted_race.csv`` (one row
per configuration: the fraction of bad runs, the runs that differ from run 0, the fraction of wrong elements in
their union), and the same with the barrier as the control.

    python tools/shake_planted_race.py [--runs 100] [--out data/<device>]
"""
import argparse
import struct
import sys
from pathlib import Path

import numpy as np
import torch

from workbench import vk
from workbench.etvk.dispatch import Dispatch, Resource
from workbench.etvk.shake import shake_dispatch
from workbench.measure import ResultsWriter, default_results_dir, environment
from workbench.toolchain.shaders import compile_glsl

SHADER = Path(__file__).resolve().parents[1] / "tests" / "shaders" / "planted" / "shared_exchange.glsl"
LOCAL_X = (64, 128, 256, 512, 1024)
GROUPS = (1, 132, 2048)


def exchange_dispatch(groups: int, local_x: int) -> Dispatch:
    """out[i] = in[i ^ 32] over ``groups`` work groups of ``local_x`` (the reference does not depend on the local
    size, so one Dispatch shakes at every local size with the same thread count)."""
    n = groups * local_x
    x = torch.arange(n, dtype=torch.float32) + 0.25
    res = [Resource("buffer", nbytes=n * 4, name="out"), Resource("buffer", data=x.numpy(), name="in")]
    return Dispatch(kernel="shared_exchange", variant="shared_exchange", resources=res, push_constants=b"",
                    spec_constants={}, global_size=(n, 1, 1), local_size=(local_x, 1, 1), output=0,
                    decode=lambda raw: torch.from_numpy(raw.view(np.float32)[:n].copy()),
                    expected=x[torch.arange(n) ^ 32])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--out", help="results folder (default data/<device>/)")
    args = ap.parse_args()
    dev = vk.get_device()
    env = environment(dev)
    out = Path(args.out) if args.out else default_results_dir(dev)
    code = {barrier: compile_glsl(SHADER.read_text(), defines={"BARRIER": 1} if barrier else {},
                                  name="shared_exchange", source_path=SHADER) for barrier in (False, True)}
    limit = dev.info.max_workgroup_invocations
    with ResultsWriter(out / "shake_planted_race", {"shader": str(SHADER.name), "runs": args.runs}) as writer:
        for barrier in (False, True):
            for groups in GROUPS:
                for stress in (False, True):
                    for local_x in [x for x in LOCAL_X if x <= limit]:
                        d = exchange_dispatch(groups, local_x)
                        row = shake_dispatch(dev, code[barrier], d, runs=args.runs, local_sizes=[(local_x, 1, 1)],
                                              stress=stress).iloc[0].to_dict()
                        row.pop("wrong")
                        row.update(barrier=barrier, workgroups=groups, elements=groups * local_x,
                                   bad_run_ids=" ".join(map(str, row["bad_run_ids"][:50])),
                                   differs_from_run0=len(row["differs_from_run0"]),
                                   first_wrong=" ".join(str(i[0]) for i in row["first_wrong"]), **env)
                        writer.append(row)
                        print(f"barrier={barrier!s:5} groups={groups:5} local={local_x:5} stress={stress!s:5}: "
                              f"{row['bad_runs']}/{args.runs} bad runs, {row['differs_from_run0']} differ from run "
                              f"0, {row['wrong_fraction']:.2%} of elements wrong in the union", flush=True)
    print(f"wrote {writer.csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
