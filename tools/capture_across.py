"""Captures across devices: capture the raw-`vulkan` test programs (tests/capture_program*.py) on this machine's
device, list and replay them here, and replay capture folders made on other devices here.

    python tools/capture_across.py OUT [--replay FOLDER …]

Writes into OUT: `captures_<device>.tar.gz` (this device's capture folders, to replay elsewhere), one
`capture_<program>_<device>.csv` listing and one `replay_<program>_<device>.csv` per program captured here, and
`replay_<folder>_on_<device>.csv` per folder given to --replay. GFXReconstruct's tools come from
$WORKBENCH_GFXRECON_DIR (`./setup.sh capture`, or a built copy carried to a GPU host). Prints one line per step.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

import capture_program  # noqa: E402
import capture_program_image  # noqa: E402

from workbench import capture, vk  # noqa: E402
from workbench.measure import results_folder_name  # noqa: E402
from workbench.toolchain.shaders import compile_glsl  # noqa: E402

PROGRAMS = {
    "program": (capture_program, (("scale_bias", "SCALE_BIAS_GLSL"), ("mix", "MIX_GLSL"))),
    "image": (capture_program_image, (("fill", "FILL_GLSL"), ("scale", "SCALE_GLSL"), ("read", "READ_GLSL"))),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--replay", type=Path, nargs="*", default=[], help="capture folders made elsewhere")
    args = parser.parse_args(argv)
    device = vk.get_device()
    name = results_folder_name(device.info.name)
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / f"captures_{name}"
    print(f"device: {device.info.name} ({device.info.driver_name})", flush=True)
    for program, (module, shaders) in PROGRAMS.items():
        folder = work / program
        spv = []
        for stem, attribute in shaders:
            path = args.out / f"{stem}.spv"
            path.write_bytes(compile_glsl(getattr(module, attribute), name=stem).code)
            spv.append(path)
        start = time.perf_counter()
        summary = capture.run([sys.executable, module.__file__, *map(str, spv), str(args.out / f"{program}.bin")],
                              folder)
        print(f"{program}: captured {summary['dispatches']} dispatches in {time.perf_counter() - start:.1f} s "
              f"({summary['capture_bytes']:,} bytes)", flush=True)
        capture.open(folder).to_csv(args.out / f"capture_{program}_{name}.csv", index=False)
        frame = capture.replay(folder, device=device)
        frame.to_csv(args.out / f"replay_{program}_{name}.csv", index=False)
        print(f"{program}: {int(frame['exact'].sum())} of {len(frame)} exact on {device.info.name}", flush=True)
        for spv_path in spv:
            spv_path.unlink()
    with tarfile.open(args.out / f"captures_{name}.tar.gz", "w:gz") as tar:
        tar.add(work, arcname=f"captures_{name}", filter=lambda info: None if info.name.endswith(".gfxr") else info)
    for folder in args.replay:
        frame = capture.replay(folder, device=device)
        tag = "_".join(folder.resolve().parts[-2:])
        frame.to_csv(args.out / f"replay_{tag}_on_{name}.csv", index=False)
        print(f"{folder}: {int(frame['exact'].sum())} of {len(frame)} exact on {device.info.name}", flush=True)
    subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
