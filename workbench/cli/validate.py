"""`workbench validate SHADER.glsl`: one dispatch of a GLSL compute shader under the validation modes (sync,
GPU-assisted, debug printf), the layer's messages attributed to kernel / dispatch / binding, printf lines filtered by
invocation. The shader's storage buffers get N uint32 each (the inputs 0..N-1), its push constants N."""
from __future__ import annotations

from pathlib import Path

from .common import add_validation_flags, device, parse_defines, report_validation


def register(sub) -> None:
    p = sub.add_parser("validate", help="run one GLSL compute shader under the validation modes (--validate)")
    p.add_argument("shader", help="a .glsl compute shader (storage buffers, uint push constant n)")
    p.add_argument("-n", "--size", type=int, default=64, help="elements per buffer and invocations (default 64)")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE", help="a define")
    p.add_argument("--local-size", type=int, default=16)
    p.add_argument("--dispatches", type=int, default=1,
                   help="dispatches in a row, each reading what the previous one wrote (buffers swapped)")
    p.add_argument("--no-barrier", action="store_true",
                   help="leave out the barrier between the dispatches (a race sync validation reports)")
    add_validation_flags(p)
    p.set_defaults(fn=_validate)


def _validate(args) -> int:
    import numpy as np

    from ..toolchain import shaders
    path = Path(args.shader)
    if not path.is_file():
        raise ValueError(f"no shader file {path}")
    defines = parse_defines(args.defines)
    dev = device(args)
    spv = shaders.compile_shader(path.stem, defines, shader_dir=path.parent)
    prog = dev.pipeline(spv, local_size=(args.local_size, 1, 1), name=path.stem)
    n = args.size
    buffers = [dev.buffer(np.arange(n, dtype=np.uint32), name=b.name) for b in prog.bindings]
    push = np.array([n], np.uint32).tobytes()[:prog.push_constant_size]
    with dev.record(label=f"validate {path.stem}") as rec:
        for i in range(args.dispatches):
            resources = buffers if i % 2 == 0 else buffers[::-1]
            rec.dispatch(prog, resources, (n,), push, label=f"{path.stem}#{i}",
                         barrier=not args.no_barrier)
    for t in rec.timings:
        print(f"{t.label}: {t.gpu_ns / 1e3 if t.gpu_ns is not None else float('nan'):,.1f} µs GPU")
    found = report_validation(dev, args)
    for b in buffers:
        b.close()
    prog.close()
    return 1 if found else 0
