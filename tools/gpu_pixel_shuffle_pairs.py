"""Issue 35, item 3 on the GPU host: the pixel-shuffle pairs still short of their goals, every variant in one run.

    WORKBENCH_COMMIT=<HEAD here> python3 tools/gpu_pixel_shuffle_pairs.py "$OUT"

Carry: nothing beyond the working tree (numpy, pandas and the `vulkan` wheel as for `workbench bench`; glslc on the
host or the carried glslang through `source tools/gpu_host_setup.sh`). About 1.5-3 minutes on the H200: ~30 kernels
at 1×256×512×512 int8 (64 MiB in, 64 MiB out), each measured twice in turn (`round` 1, 2) after 0.2 s of its own load
(`measure.keep_busy`) and sampling's own warm-up, and checked exact on the device at awkward shapes.

Writes ``$OUT/pixel_shuffle_pairs.csv``: the columns of ``data/NVIDIA_H200/pixel_shuffle_limit.csv`` in that order,
then the suite's others (``role`` copy / old-best / new / ceiling, ``pair``, ``pixel_widths``, ``swizzle``,
``pair_store``, ``stage``, ``qparams``, ``round``, ``pct_of_copy``, ``error``); ``variant`` names each kernel.
``copy_fraction`` is the one definition: GB/s ÷ the copy at the same traffic measured in this run
(``benchmarks.copy.CopyAtTraffic``). Prints the best of each pair and path, old against new.

``--diag``: instead, 4C1W → 4C passthrough's best (the 4-width tile, word stores) beside its loads-only and
stores-only builds (``Q8taPixelShuffleBlockSpec(diagnostic=1|2)``, wrong by design) and the 4C → 4C1W best, into
``$OUT/pixel_shuffle_pairs_diag.csv``: where the pair's time goes. ``--sweep``: 4C1W → 4C, both paths, every thread
order × work-group size 64 / 128 / 256 of the 4-width tile and the pixel tile (``pixel_shuffle_pairs_sweep.csv``).

Here (lavapipe, a small dry run): ``python tools/gpu_pixel_shuffle_pairs.py /tmp/out --quick``
(``--shape N,C,H,W`` picks another input shape).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench import vk  # noqa: E402
from workbench.benchmarks import pixel_shuffle_gaps as G  # noqa: E402

LIMIT_CSV = ROOT / "data" / "NVIDIA_H200" / "pixel_shuffle_limit.csv"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder for pixel_shuffle_pairs.csv ($OUT)")
    ap.add_argument("--quick", action="store_true", help="a small shape and few samples (a dry run)")
    ap.add_argument("--shape", help="input N,C,H,W (default 1,256,512,512; --quick 1,64,64,64)")
    ap.add_argument("--diag", action="store_true", help="4C1W -> 4C passthrough's loads-only / stores-only builds")
    ap.add_argument("--sweep", action="store_true", help="4C1W -> 4C: thread order x work-group size x tile, both "
                    "paths (pixel_shuffle_pairs_sweep.csv)")
    args = ap.parse_args(argv)
    shape = tuple(int(x) for x in args.shape.split(",")) if args.shape else None
    if shape is not None and len(shape) != 4:
        print(f"--shape: expected N,C,H,W (4 integers), got {args.shape!r}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    device = vk.get_device()
    if args.diag:
        from workbench.kernels.pixel_shuffle_block import Q8taPixelShuffleBlockSpec
        at = tuple(shape or (G.QUICK_SHAPE if args.quick else G.SHAPE))
        best, _ = G.PAIRS_VARIANTS[("4C1W", "4C", "same")]
        items = [(role, Q8taPixelShuffleBlockSpec(at, 2, "4C1W", "4C", *G.SAME_QP, **best, diagnostic=d))
                 for role, d in (("old-best", 0), ("diagnostic", 1), ("diagnostic", 2))]
        items.append(("old-best", Q8taPixelShuffleBlockSpec(at, 2, "4C", "4C1W", *G.SAME_QP,
                                                            **G.PAIRS_VARIANTS[("4C", "4C1W", "same")][0])))
        df = G.gaps_suite(device, quick=args.quick, shape=at, items=items, rounds=1 if args.quick else 2,
                          warm_s=0.0 if args.quick else 0.2)
        df["diagnostic"] = df["variant"].fillna("").str.extract(r"_diag_(\w+)$")[0]
    elif args.sweep:
        from workbench.kernels.pixel_shuffle_block import Q8taPixelShuffleBlockSpec
        at = tuple(shape or (G.QUICK_SHAPE if args.quick else G.SHAPE))
        items = []
        for qp, extra in ((G.SAME_QP, {}), (G.DIFF_QP, {"fixed": True})):
            for pixel, tiles in ((False, (0, 1, 2, 4, 8, 16)), (True, (0, 1, 2, 4, 8))):
                for t in tiles:
                    for lx in (64, 128, 256):
                        G.add_item(items, "new", lambda t=t, lx=lx, pixel=pixel, qp=qp, extra=extra:
                                    Q8taPixelShuffleBlockSpec(at, 2, "4C1W", "4C", *qp, pixel_tile=pixel,
                                                              tile_co=t, local_x=lx, **extra))
        df = G.gaps_suite(device, quick=args.quick, shape=at, items=items, rounds=1, warm_s=0.0 if args.quick else 0.2)
    else:
        df = G.pairs_suite(device, quick=args.quick, shape=shape)
    first = list(pd.read_csv(LIMIT_CSV, nrows=0).columns) if LIMIT_CSV.exists() else []
    columns = first + [c for c in df if c not in first]  # the limit table's, empty where this run has none
    path = args.out / ("pixel_shuffle_pairs_diag.csv" if args.diag else
                       "pixel_shuffle_pairs_sweep.csv" if args.sweep else "pixel_shuffle_pairs.csv")
    df.reindex(columns=columns).to_csv(path, index=False)
    kernels = df[df["role"] != "copy"]
    refused = kernels[kernels["error"].fillna("") != ""]  # e.g. pair_store wider than lavapipe's 8-lane subgroups
    wrong = kernels[(kernels["error"].fillna("") == "") & ~kernels["exact"].fillna(False).astype(bool)
                    & (kernels["role"] != "diagnostic")]  # diagnostic builds are wrong by design
    print(f"{path}: {len(df)} rows ({len(kernels)} kernel rows: {len(wrong)} not exact, {len(refused)} refused or "
          f"failed) on {device.info.name} in {time.perf_counter() - started:.0f} s")
    for what, rows in (("NOT EXACT", wrong), ("refused", refused)):
        for _, row in rows.iterrows():
            print(f"  {what}: {row.get('variant')} {row.get('error')}")
    return 1 if len(wrong) else 0


if __name__ == "__main__":
    sys.exit(main())
