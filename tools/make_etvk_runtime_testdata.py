"""Regenerates tests/etvk_runtime/: real runs of ExecuTorch's runtime (executor_runner with ET-VK, from
`workbench etvk build`) on this machine's Vulkan device, kept small for CI (which has neither a checkout nor the
runtime).

    python tools/make_etvk_runtime_testdata.py --executorch CHECKOUT --runtime PATH/TO/executor_runner
"""
import argparse
import shutil
import tempfile
from pathlib import Path

from workbench.etvk.model import profile

OUT = Path(__file__).resolve().parents[1] / "tests" / "etvk_runtime"
KEEP = ("run.etdp", "summary.json", "run.json", "model.pte", "reference.pt", "output-0.bin")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--executorch", required=True)
    ap.add_argument("--runtime", required=True)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = [("residual_add", None, [None], (1, 3, 16, 16), 2, 1),
                 ("refinenet_like", ["before", "after"], [None], (1, 3, 64, 32), 1, 1)]
        for model, settings, revs, shape, runs, warmup in cases:
            sides = profile.lower(model, executorch=args.executorch, revs=revs, settings=settings,
                                  input_shape=shape, out_dir=Path(tmp) / model)
            for side in sides:
                profile.execute(side["folder"], args.runtime, runs=runs, warmup=warmup)
                name = model if settings is None else f"{model}/{side['setting']}"
                target = OUT / name
                shutil.rmtree(target, ignore_errors=True)
                target.mkdir(parents=True)
                for f in KEEP if settings is None else ("run.etdp", "run.json"):
                    shutil.copy2(side["folder"] / f, target / f)
                print("wrote", target, sum(p.stat().st_size for p in target.iterdir()), "bytes")


if __name__ == "__main__":
    main()
