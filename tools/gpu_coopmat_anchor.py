"""Issue 35 on the H200: NVIDIA's vk_cooperative_matrix_perf measured by the workbench beside its own int8 GEMM / conv
(`coopmat_anchor.csv`), and the operand-load steps beyond it with their diagnostic builds (`coopmat_beyond.csv`).

Here (the development machine), once:
    python3 tools/gpu_coopmat_anchor.py pack [--sample /work/coopmat_perf]
  writes .carry_anchor/anchor.tar.xz (git-ignored through .git/info/exclude): the sample's checkout (third-party:
  only its tracked shaders/, README.md, LICENSE, src/; never committed here) and the workbench's glslang build
  (glslc 2025.2 / glslang 15.1 / spirv-val 2025.1: the sample's GL_KHR_cooperative_matrix and GL_NV_cooperative_matrix2
  are beyond Debian 12's glslc of .gl/, so that one is not used).

On the GPU host (device tool: carry [".carry_anchor"], Python 3.12 with the `vulkan` wheel; one command, ~7 min):
    python3 tools/gpu_coopmat_anchor.py run "$OUT" [--budget-s 420]
  unpacks to /tmp/ca, points WORKBENCH_GLSLANG_DIR and WORKBENCH_COOPMAT_PERF at it, and writes under $OUT:
    coopmat_anchor.csv   every tiling the sample runs on this device (int8 at 4096^3, 8192^3, 5x512, 9x256; fp16 at
                         the two cubes) + the workbench's GEMM and conv at the same M, N, K: impl, M, N, K, TOP/s,
                         correct, tiling, clock_mhz, median / spread, device, driver, commit
    coopmat_beyond.csv   the workbench's kernel one operand-load step at a time (`step`), the VK_NV_cooperative_matrix2
                         workgroup-scope kernel, diagnostic builds (MMAs only, MMAs without the store)
    coopmat_anchor.log   the progress lines
  Every row is on disk as it is measured; past the budget the suites stop with a row saying so.
  Then locally: copy both CSVs into data/NVIDIA_H200/ and run `workbench roofline-check --out data/NVIDIA_H200`.
"""
import argparse
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CARRY = ROOT / ".carry_anchor"
UNPACK = Path("/tmp/ca")


def pack(sample: str) -> int:
    sys.path.insert(0, str(ROOT))
    from workbench.benchmarks.coopmat_anchor import SampleError, sample_dir
    from workbench.toolchain import glslang
    try:
        root = sample_dir(sample)
    except SampleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not glslang.is_set_up():
        print("error: no glslang build: run python -m workbench.toolchain.glslang setup", file=sys.stderr)
        return 2
    exclude = ROOT / ".git" / "info" / "exclude"
    if "/.carry_anchor/" not in exclude.read_text().split():
        with exclude.open("a") as f:
            f.write("/.carry_anchor/\n")
    CARRY.mkdir(exist_ok=True)
    tracked = subprocess.run(["git", "-C", str(root), "ls-files", "shaders", "src", "README.md", "LICENSE"],
                             capture_output=True, text=True, check=True).stdout.split()
    out = CARRY / "anchor.tar.xz"
    with tarfile.open(out, "w:xz") as tar:
        for name in tracked:
            if not name.endswith(".spv"):  # the workbench compiles the sources itself
                tar.add(root / name, f"coopmat_perf/{name}")
        tar.add(glslang.cache_root() / "bin", "glslang/bin")
        stamp = glslang.cache_root() / "setup.json"
        if stamp.exists():
            tar.add(stamp, "glslang/setup.json")
    print(f"packed {out} ({out.stat().st_size / 2**20:.1f} MiB): carry .carry_anchor")
    return 0


def run(out: Path, budget_s: float, suites=("anchor", "beyond"), steps=None, shapes=None) -> int:
    start = time.monotonic()
    with tarfile.open(CARRY / "anchor.tar.xz") as tar:
        tar.extractall(UNPACK, filter="data")
    os.environ["WORKBENCH_GLSLANG_DIR"] = str(UNPACK / "glslang")
    os.environ["WORKBENCH_COOPMAT_PERF"] = str(UNPACK / "coopmat_perf")
    sys.path.insert(0, str(ROOT))
    from workbench import vk
    from workbench.benchmarks import coopmat_anchor as A
    from workbench.measure import environment
    from workbench.measure.results import ResultsWriter
    from workbench.toolchain.shaders import compiler_info
    out.mkdir(parents=True, exist_ok=True)
    log = (out / "coopmat_anchor.log").open("w")
    sys.stdout = Tee(sys.stdout, log)
    print(compiler_info())
    device = vk.get_device()
    env = environment(device)
    print(device, {k: v for k, v in device.info.features.items() if "cooperative" in k})
    print("flexible:", device.cooperative_matrix_flexible_properties())
    # with both, the anchor gets ~62 % of the budget and the steps the rest
    if "anchor" in suites:
        share = 0.62 if "beyond" in suites else 1.0
        with ResultsWriter(out / "coopmat_anchor", env) as writer:
            A.anchor_suite(device, writer, deadline=start + share * budget_s,
                           shapes=shapes and {k: A.CONV_SHAPES[k] for k in shapes})
    if "beyond" in suites:
        with ResultsWriter(out / "coopmat_beyond", env) as writer:
            A.beyond_suite(device, writer, deadline=start + budget_s, steps=steps,
                           shapes=shapes and {k: A.CONV_SHAPES[k] for k in shapes})
    for stem in ("coopmat_anchor", "coopmat_beyond"):  # only the CSVs come back (8 files at most)
        for suffix in (".parquet", ".json"):
            (out / (stem + suffix)).unlink(missing_ok=True)
    print(f"done in {time.monotonic() - start:.0f} s")
    return 0


class Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for s in self.streams:
            s.write(text)
            s.flush()

    def flush(self):
        for s in self.streams:
            s.flush()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--sample", default=os.environ.get("WORKBENCH_COOPMAT_PERF", "/work/coopmat_perf"))
    p = sub.add_parser("run")
    p.add_argument("out", type=Path)
    p.add_argument("--budget-s", type=float, default=420.0)
    p.add_argument("--suite", choices=("anchor", "beyond", "both"), default="both")
    p.add_argument("--steps", help="comma list of step numbers for the beyond suite (default: all)")
    p.add_argument("--shapes", help="comma list of shape labels (4096^3, 8192^3, 5x512, 9x256; default: the suite's)")
    args = ap.parse_args()
    if args.cmd == "pack":
        return pack(args.sample)
    suites = ("anchor", "beyond") if args.suite == "both" else (args.suite,)
    steps = tuple(args.steps.split(",")) if args.steps else None
    shapes = tuple(args.shapes.split(",")) if args.shapes else None
    return run(args.out, args.budget_s, suites, steps, shapes)


if __name__ == "__main__":
    sys.exit(main())
