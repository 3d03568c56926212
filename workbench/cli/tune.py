"""`workbench tune KERNEL` (workbench.tune): a TPE search over a kernel's tile / option space, candidates measured
on every device of a Dask cluster; `--exhaustive` measures the whole grid instead; `workbench tune-vendors`: the
best variant per device or compiler, as ET-VK's C++ would select it."""
from __future__ import annotations

from .common import table


def _shape(text):
    return tuple(int(v) for v in text.replace("x", ",").split(",")) if text else None


def _problem(args) -> dict:
    """The problem the flags give: --shape for every space; --pair / --passthrough / --fixed only for the spaces
    whose builder (the catalogue's, through tune.space.SPACES) takes those options."""
    import inspect

    from ..tune.space import SPACES
    flags = {}
    if args.pair:
        pair = args.pair.split(",")
        if len(pair) != 2:
            raise ValueError(f"--pair takes IN,OUT layouts (e.g. 4C1W,4C), got {args.pair!r}")
        flags["--pair"] = {"in_layout": pair[0], "out_layout": pair[1]}
    if args.passthrough:
        flags["--passthrough"] = {"requant": False}
    if args.fixed:
        flags["--fixed"] = {"fixed": True}
    takes = inspect.signature(SPACES[args.kernel]).parameters
    refused = [flag for flag, options in flags.items() if not set(options) <= set(takes)]
    if refused:
        raise ValueError(f"{' / '.join(refused)}: not an option of {args.kernel}'s space (it takes "
                         f"{', '.join(takes)})")
    return {"shape": _shape(args.shape), **{k: v for options in flags.values() for k, v in options.items()}}


def register(sub) -> None:
    from .. import catalogue
    p = sub.add_parser("tune", help="search a kernel's tile / option space with optuna's TPE (Dask: one worker per "
                                    "device); every trial a tidy row in data/<device>/tune_<kernel>.csv")
    p.add_argument("kernel", choices=sorted(catalogue.spaces()))
    p.add_argument("--budget", type=int, help="measurements per device (default: a quarter of the valid grid)")
    p.add_argument("--seed", type=int, default=0, help="the sampler's seed (default 0)")
    p.add_argument("--shape", help="the problem's shape: conv-pw N,Cin,Cout,H,W; pixel-shuffle N,C,H,W")
    p.add_argument("--pair", help="pixel-shuffle: input and output layouts IN,OUT (default 4W4C,4C1W)")
    p.add_argument("--passthrough", action="store_true", help="pixel-shuffle: equal qparams (no requantize)")
    p.add_argument("--fixed", action="store_true", help="pixel-shuffle: the integer requantize (requant_fixed)")
    p.add_argument("--devices", help="only devices whose name contains one of these (comma-separated)")
    p.add_argument("--workers", help="local cluster: one worker per entry, each on the device this index or name "
                                     "picks (e.g. 0,1); default: one per local GPU, else per CPU device")
    p.add_argument("--scheduler", help="an existing Dask cluster (tcp://host:port)")
    p.add_argument("--here", action="store_true", help="measure in this process on the current device, no cluster")
    p.add_argument("--exhaustive", action="store_true",
                   help="measure every valid config instead (tune_<kernel>_exhaustive.csv: the tuner's reference)")
    p.add_argument("--simulate-seeds", type=int, default=0,
                   help="after the run, compare with the exhaustive table of the results folder and simulate the "
                        "optimiser on it with this many seeds (tune_<kernel>_vs_exhaustive.csv)")
    p.add_argument("--head-to-head", type=int, metavar="ROUNDS",
                   help="instead of tuning: measure the folder's recorded pick and exhaustive best alternately "
                        "ROUNDS times each on this device (tune_<kernel>_head_to_head.csv)")
    p.add_argument("--quick", action="store_true", help="a few short samples per candidate (smoke test)")
    p.add_argument("--out", help="results folder (default data/<device>/)")
    p.set_defaults(fn=tune_command)
    p = sub.add_parser("tune-vendors", help="the best tile / variant per device or compiler (measured where a "
                                            "device ran it, else Mesa's compilers ranked by occupancy and "
                                            "instructions: a model), written as ET-VK's C++ conditions")
    p.add_argument("family", choices=["conv-pw", "sdpa-gqa-coop"],
                   help="conv-pw: the workbench's q8ta_conv2d_pw tiles; sdpa-gqa-coop: ET-VK's "
                        "sdpa_compute_out_gqa_coop vs _tile2 (needs WORKBENCH_EXECUTORCH)")
    p.add_argument("--gpu", help="compilers (names of `workbench compilers gpus`, comma-separated)")
    p.add_argument("--measured", help="results folders of tune runs (comma-separated; default every data/* "
                                      "folder holding tune_conv_pw.csv)")
    p.add_argument("--executorch", help="an ExecuTorch checkout (default WORKBENCH_EXECUTORCH)")
    p.add_argument("--out", help="results folder for vendor_table_<family>.csv (default data/llvmpipe/)")
    p.set_defaults(fn=vendors_command)


def tune_command(args) -> int:
    from pathlib import Path

    import pandas as pd

    from .. import tune
    from ..measure import ResultsReader, ResultsWriter
    problem = _problem(args)
    devices = args.devices.split(",") if args.devices else None
    workers = args.workers.split(",") if args.workers else None
    common = dict(devices=devices, workers=workers, scheduler=args.scheduler, here=args.here,
                  device=args.device if args.here else None, quick=args.quick, out=args.out, **problem)
    if args.head_to_head:
        return _head_to_head(args, problem)
    if args.exhaustive:
        result = tune.exhaustive(args.kernel, **common)
        print(f"== exhaustive {args.kernel}: {len(result.frame)} rows on {result.where} in {result.wall_s:.1f} s")
        print(table(result.best))
    else:
        result = tune.tune(args.kernel, budget=args.budget, seed=args.seed, **common)
        frame = result.frame
        shown = [c for c in ("device_key", "trial", "config", "state", "median_us", "spread_pct", "best_so_far_us",
                             "evaluations", "proposed_by") if c in frame]
        print(f"== tune {args.kernel}: {len(frame)} trials on {result.where} in {result.wall_s:.1f} s")
        print(table(frame[frame["state"] != "invalid"], shown))
        print("\n== picks")
        print(table(result.best))
    for key, path in result.paths.items():
        print(f"wrote {path} (+ .parquet, .json)")
    if args.simulate_seeds and not args.exhaustive:
        name = f"tune_{args.kernel.replace('-', '_')}"
        for key, path in result.paths.items():
            folder = Path(path).parent
            grid = ResultsReader(folder).load(f"{name}_exhaustive")
            if grid is None:
                print(f"no {name}_exhaustive in {folder}: run `workbench tune {args.kernel} --exhaustive` first")
                continue
            live = tune.compare(result.frame[result.frame["device_key"] == key], grid).assign(mode="live tune run")
            simulated = tune.simulate(args.kernel, grid, seeds=range(args.simulate_seeds), budget=args.budget, **problem)
            both = pd.concat([live, simulated], ignore_index=True)
            writer = ResultsWriter(folder / f"{name}_vs_exhaustive", {"kernel": args.kernel})
            for row in both.to_dict("records"):
                writer.append(row)
            writer.close()
            print(f"\n== {key}: the pick against the exhaustive best ({folder / name}_vs_exhaustive.csv)")
            print(table(both, ["mode", "seed", "evaluations", "grid_size", "pick", "pct_over_best", "rank",
                               "within_goal"]))
    return 0


def _head_to_head(args, problem) -> int:
    from pathlib import Path

    import pandas as pd

    from .. import vk
    from ..measure import ResultsWriter, default_results_dir
    from ..tune.confirm import from_folder
    device = vk.get_device() if args.device is None else vk.set_device(args.device)
    folder = Path(args.out) if args.out else default_results_dir(device)
    row = from_folder(args.kernel, folder, device, rounds=args.head_to_head,
                      **{k: v for k, v in problem.items() if v is not None})
    name = f"tune_{args.kernel.replace('-', '_')}_head_to_head"
    with ResultsWriter(folder / name, {"kernel": args.kernel}) as writer:
        writer.append(row)
    print(table(pd.DataFrame([row]), ["device_key", "pick", "best", "rounds", "pick_us", "best_us", "pct_over_best",
                                      "within_goal"]))
    print(f"wrote {folder / name}.csv")
    return 0


def vendors_command(args) -> int:
    from ..tune import vendor_table as vt
    gpus = args.gpu.split(",") if args.gpu else None
    measured = args.measured.split(",") if args.measured else None
    result = vt.vendor_table(args.family, gpus=gpus, measured=measured, executorch=args.executorch, out=args.out)
    print(table(result.table))
    print("\n" + result.cpp)
    print(f"\nwrote {result.path} (+ .parquet, .json)")
    return 0
