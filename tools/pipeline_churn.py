"""RSS growth over pipeline create/destroy cycles of the copy shader: bare `vulkan` binding vs workbench.vk
(workbench/vk/churn.py).

    python tools/pipeline_churn.py --mode bare|workbench|module|distinct [--cycles 300] [--warmup 50]
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from workbench.toolchain.shaders import compile_shader
from workbench.vk.churn import measure  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="workbench", choices=["bare", "module", "workbench", "distinct"])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args(argv)
    print(json.dumps(measure(compile_shader("copy"), args.mode, args.cycles, args.warmup)))


if __name__ == "__main__":
    main()
