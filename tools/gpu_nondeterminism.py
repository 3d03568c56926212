"""Non-determinism of ET-VK's int8 and 4-bit linears at ExecuTorch #22327's shape (an nn.Linear(384, 384) at
M = 1500, wrong on 23 of 100 runs on an Adreno), and a replay of the lint's shared-memory warnings in
``q8ta_linear_gemv`` (issue 34, item 5).

    python3 tools/gpu_nondeterminism.py OUT [--runs 100] [--no-stress] [--quick]

Each family is dispatched as ET-VK's C++ does (workbench.etvk.families) and replayed `--runs` times per local size
(``workbench.etvk.shake``: the output filled with 0xA5 before every run; each run compared bitwise with run 0 and
with the reference), with and without a 64 MiB copy in the same submission (``stress``). The linears sweep the
shake's local sizes (the tiled shaders share no memory, so any local size is a valid replay of their tiles);
``q8ta_linear_gemv`` runs at ET-VK's own (1, 1, 64) only: its shared array is sized by the compile-time WGS = 64
and indexed by gl_LocalInvocationID.z alone, so another local size would make a race of the workbench's own.

Columns: those of ``etvk shake`` (bad_runs: runs not bitwise equal to the reference; differs_from_run0: the runs
whose bytes differ from run 0's — the non-determinism) plus family, options, exact_reference (whether bad_runs
means wrong: the int8 outputs are compared with a bit-exact reference, the fp outputs with float64 rounded, so for
them only differs_from_run0 counts), device and driver. Writes OUT/llm_nondeterminism.csv.

On the NVIDIA host carry .carry_gemv/ (cg.tar.xz: the workbench's glslang build and the checkout's backends/vulkan;
the torchao wheel, which linear_dq8ca_q4gsw's reference needs), then:

    mkdir -p /tmp/cg && tar xJf .carry_gemv/cg.tar.xz -C /tmp/cg
    pip install --no-index --no-deps --target /tmp/site .carry_gemv/torchao-*.whl
    PYTHONPATH=/tmp/site:$PWD WORKBENCH_GLSLANG_DIR=/tmp/cg/glslang WORKBENCH_EXECUTORCH=/tmp/cg/etvk/executorch \\
        python3 tools/gpu_nondeterminism.py $OUT/nondeterminism --runs 100

Here (lavapipe): ``WORKBENCH_EXECUTORCH=/work/executorch python tools/gpu_nondeterminism.py data/llvmpipe
--no-stress``. On the host about 100 runs x 5 local sizes x 2 x 7 families; the device tool brings back OUT's one
CSV.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import pandas as pd

from workbench import etvk, vk
from workbench.etvk.shake import shake

M, K, N = 1500, 384, 384  # whisper-tiny's nn.Linear(384, 384) over 1500 frames (ExecuTorch #22327)
GEMV_LOCAL = [(1, 1, 64)]
CASES = [  # (family, options, local sizes: None = the shake's sweep, exact reference)
    ("linear_q8ta_q8csw_tiled", dict(shape=(M, K), out_features=N), None, True),
    ("q8ta_linear", dict(shape=(M, K), out_features=N), None, True),
    ("linear_q4gsw", dict(shape=(M, K), out_features=N, group_size=128), None, False),
    ("q4gsw_linear_gemm__tin__w_4x8", dict(shape=(M, K), out_features=N, group_size=128), None, False),
    ("linear_q4gsw_tiled", dict(shape=(M, K), out_features=N, group_size=128), None, False),
    ("linear_dq8ca_q4gsw", dict(shape=(M, K), out_features=N, group_size=128), None, False),
    ("q8ta_linear_gemv", dict(shape=(1, K), out_features=N), GEMV_LOCAL, True),
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="M = 64 and 3 runs: a check of the script")
    parser.add_argument("--no-stress", action="store_true",
                        help="the linears without the copy alongside (a CPU device: it changes nothing there); "
                             "q8ta_linear_gemv runs both ways still")
    args = parser.parse_args(argv)
    checkout = os.environ.get("WORKBENCH_EXECUTORCH")
    if not checkout:
        print("set WORKBENCH_EXECUTORCH to an ExecuTorch checkout (its backends/vulkan is enough)", file=sys.stderr)
        return 2
    gen = etvk.Codegen(etvk.source(checkout))
    device = vk.get_device()
    runs = 3 if args.quick else args.runs
    frames = []
    for family, options, local_sizes, exact in CASES:
        if args.quick and options["shape"][0] > 1:
            options = dict(options, shape=(64, K))
        for stress in (False,) if args.no_stress and family != "q8ta_linear_gemv" else (False, True):
            start = time.perf_counter()
            df = shake(device, gen, family, runs=runs, local_sizes=local_sizes, stress=stress, **options)
            df = df.drop(columns=["wrong"])
            df.insert(0, "family", family)
            df.insert(1, "options", json.dumps({k: list(v) if isinstance(v, tuple) else v
                                                for k, v in options.items()}))
            df["exact_reference"] = exact
            df["nondeterministic_runs"] = df["differs_from_run0"].map(len)
            df["device"], df["driver"] = device.info.name, f"{device.info.driver_name} {device.info.driver_info}"
            frames.append(df)
            print(f"{family} stress={stress}: {time.perf_counter() - start:.0f} s; "
                  + ", ".join(f"{r.local_size}: {r.nondeterministic_runs} differ from run 0, {r.bad_runs} bad"
                              for r in df.itertuples()), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    table = pd.concat(frames, ignore_index=True)
    for column in ("bad_run_ids", "differs_from_run0", "first_wrong"):
        table[column] = table[column].map(json.dumps)
    table.to_csv(args.out / "llm_nondeterminism.csv", index=False)
    print(f"wrote {args.out / 'llm_nondeterminism.csv'} ({len(table)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
