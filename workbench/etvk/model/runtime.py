"""Run a ``.pte`` on ExecuTorch's runtime with ET-VK (``executor_runner``, from :mod:`.build`) on the current
Vulkan device: its outputs as raw files, its events as an ETDump.

    result = runtime.run(runtime_build, program, executions=23, out_dir=...)
    result.etdump, result.outputs (torch tensors), result.seconds

The runner's Vulkan device is the loader's first (ET-VK's own pick); :func:`run` passes the environment through, so
``VK_ICD_FILENAMES`` / ``VK_LOADER_DRIVERS_SELECT`` choose it as they choose the workbench's. The validation layer,
when the environment enables it, runs inside the runner too, and any message it prints on stderr fails the run.
"""
from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DTYPES = {"torch.float32": np.float32, "torch.int8": np.int8, "torch.int32": np.int32, "torch.int64": np.int64,
          "torch.float16": np.float16, "torch.uint8": np.uint8, "torch.bool": np.bool_}


class RuntimeRunError(RuntimeError):
    """executor_runner failed, timed out, or wrote no ETDump / outputs."""


@dataclass
class RunResult:
    etdump: Path
    outputs: list
    seconds: float
    executions: int
    stderr: str = ""
    validation: list = field(default_factory=list)


def _validation_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "Validation Error" in line or "VUID-" in line]


def run(runtime, program, *, executions: int = 10, out_dir=None, timeout: float = 600) -> RunResult:
    """`executions` executions of `program` (a :class:`~.revision.Program`) on `runtime` (a :class:`~.build.Runtime`)."""
    if executions < 1:
        raise ValueError(f"executions must be >= 1, got {executions}")
    out = Path(out_dir or program.folder)
    out.mkdir(parents=True, exist_ok=True)
    etdump = out / "run.etdp"
    for stale in [etdump, *out.glob("output-*.bin")]:
        stale.unlink(missing_ok=True)
    command = [str(runtime.runner), f"--model_path={program.pte}", f"--inputs={','.join(map(str, program.inputs))}",
               f"--num_executions={executions}", f"--etdump_path={etdump}", f"--output_file={out / 'output'}",
               "--print_output=none"]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
    except subprocess.TimeoutExpired as e:
        raise RuntimeRunError(f"executor_runner ran over {timeout:.0f} s on {program.pte}") from e
    seconds = time.perf_counter() - t0
    text = (proc.stderr or "") + (proc.stdout or "")
    validation = _validation_lines(text)
    if proc.returncode != 0:
        tail = "\n".join(text.strip().splitlines()[-15:])
        raise RuntimeRunError(f"executor_runner failed (exit {proc.returncode}) on {program.pte}:\n{tail}")
    if not etdump.is_file():
        raise RuntimeRunError(f"executor_runner wrote no ETDump ({etdump}); was it built with the event tracer?")
    return RunResult(etdump, read_outputs(out, program.summary), seconds, executions, text, validation)


def read_outputs(folder, summary: dict) -> list:
    """The raw output files the runner wrote (``output-<i>.bin``) as torch tensors of the lowered shapes."""
    import torch
    outputs = []
    for i, (shape, dtype) in enumerate(zip(summary["output_shapes"], summary["output_dtypes"])):
        path = Path(folder) / f"output-{i}.bin"
        if not path.is_file():
            raise RuntimeRunError(f"executor_runner wrote no output {i} ({path})")
        array = np.fromfile(path, dtype=DTYPES.get(dtype, np.float32))
        if array.size != int(np.prod(shape)):
            raise RuntimeRunError(f"output {i}: expected {shape} ({int(np.prod(shape))} elements of {dtype}), "
                                  f"the runner wrote {array.size}")
        outputs.append(torch.from_numpy(array.reshape(shape)))
    return outputs
