"""ncnn's rows of the peers' capture coverage table (data/<device>/capture_coverage_peers.csv), on the default device.

    python tools/capture_coverage_ncnn.py [OUT_CSV] [--captures DIR]

For fp32 and fp16 storage, small and wide shapes: the net of `workbench.capture.engines.ncnn` run 3 times without capture and 3 times under
it, interleaved (the fastest of each are `bare_s` and `capture_s`: the machine is shared), captured with
VK_KHR_push_descriptor hidden (`workbench capture run --hide-extension`), every dispatch
replayed alone and compared byte for byte (`capture.coverage.rows`); and once more in fp32 without hiding the
extension, as a new user would capture it (ncnn's templated pushes: the reasons named). Rows go through
`coverage.write_rows`, which replaces ncnn's rows and keeps IREE's. Needs ./setup.sh peers and ./setup.sh capture.
"""
import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench import capture, vk
from workbench.capture import coverage
from workbench.measure import results_folder_name

PUSH = "VK_KHR_push_descriptor"
PROGRAMS = [("net fp32", [], [PUSH]), ("net fp16", ["--fp16"], [PUSH]),
            ("wide net fp32", ["--shape", "wide"], [PUSH]), ("wide net fp16", ["--shape", "wide", "--fp16"], [PUSH]),
            ("net fp32, templated pushes (no --hide-extension)", [], [])]


def timed(flags: list, folder: Path, hidden: list, runs: int = 3) -> tuple[float, float]:
    """(fastest bare seconds, fastest seconds under capture) of `runs` interleaved pairs; `folder` keeps the last
    capture."""
    bare, captured = float("inf"), float("inf")
    command = [sys.executable, "-m", "workbench.capture.engines.ncnn", *flags]
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        bare = min(bare, time.perf_counter() - started)
        manifest = capture.run(command, folder, hide_extensions=hidden)
        captured = min(captured, manifest["seconds"]["program"])
    return bare, captured


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?", default=None)
    parser.add_argument("--captures", default=None, help="keep the capture folders here (default: a temporary one)")
    args = parser.parse_args()
    dev = vk.get_device()
    out = Path(args.out or f"data/{results_folder_name(dev.info.name)}/capture_coverage_peers.csv")
    with tempfile.TemporaryDirectory(prefix="ncnn-coverage-") as tmp:
        root = Path(args.captures or tmp)
        for program, flags, hidden in PROGRAMS:
            folder = root / program.split(",")[0].replace(" ", "_") / ("hidden" if hidden else "plain")
            bare, under = timed(flags, folder, hidden)
            rows = coverage.rows(folder, engine="ncnn", program=program, device=dev, bare_seconds=round(bare, 3),
                                 capture_seconds=round(under, 3))
            table = coverage.write_rows(rows, out)
            print(f"{program}: {int(rows['exact'].sum())} of {len(rows)} exact; bare {bare:.2f} s, under capture "
                  f"{rows['capture_s'].iloc[0]:.2f} s", flush=True)
    print(coverage.summary(table).to_string(index=False))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
