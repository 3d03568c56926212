"""What the command families share: tables on the terminal, the device a command runs on, the results folders a
command writes (reported on Ctrl-C)."""
from __future__ import annotations

import sys
from pathlib import Path

RESULTS_DIRS: list[Path] = []  # where this command writes (reported on Ctrl-C)
OPENED: list = []  # devices a command made for itself (--validate), closed when it ends


class quick_writer:
    """A results writer whose every row says it came from a quick run (`quick` = True), so no reader takes a
    quick run's figure for a headline one."""

    def __init__(self, writer):
        self.writer = writer

    def append(self, row: dict) -> None:
        self.writer.append({**row, "quick": True})


def table(df, columns=None) -> str:
    import pandas as pd
    with pd.option_context("display.max_columns", None, "display.width", 200, "display.max_colwidth", 60):
        return (df[columns] if columns else df).to_string(index=False, float_format=lambda v: f"{v:,.2f}")


def add_validation_flags(parser) -> None:
    """The validation-mode flags every command family that runs kernels can take (`device(args)` reads them,
    `report_validation` prints what the layer said)."""
    g = parser.add_argument_group("validation (VK_LAYER_KHRONOS_validation)")
    g.add_argument("--validate", metavar="MODES", default=None,
                   help="run with the validation layer; MODES: 'on' (core checks) or a comma list of sync "
                        "(synchronization hazards), gpu (GPU-assisted: out-of-bounds descriptor accesses), printf "
                        "(debugPrintfEXT output); gpu and printf exclude each other")
    g.add_argument("--printf-invocation", metavar="X[,Y,Z]", default=None,
                   help="with --validate printf: show only this global invocation id's lines")
    g.add_argument("--printf-limit", type=int, default=50, help="printf lines shown at most (default 50)")


def validation_request(args) -> tuple[bool | None, frozenset | None]:
    """(validation, modes) from --validate; (None, None) where it is absent (WORKBENCH_VALIDATION decides)."""
    from .. import vk
    text = getattr(args, "validate", None)
    if text is None:
        return None, None
    if text.strip().lower() in ("on", "1", "core", "true"):
        return True, frozenset()
    return True, vk.validation_modes(text)


def device(args):
    """The device `--device` names (else the current one), with the validation modes `--validate` asks for."""
    from .. import vk
    validation, modes = validation_request(args)
    if validation is None:
        return vk.get_device() if args.device is None else vk.set_device(args.device)
    # a device of the command's own: the process's current one (other callers' in a notebook or tests) stays
    dev = vk.Device(args.device, validation, modes=modes)
    OPENED.append(dev)
    return dev


def close_opened() -> None:
    while OPENED:
        OPENED.pop().close()


def parse_invocation(text):
    if text is None:
        return None
    parts = [int(v) for v in str(text).split(",")]
    if not 1 <= len(parts) <= 3:
        raise ValueError(f"--printf-invocation takes X, X,Y or X,Y,Z; got {text!r}")
    return tuple(parts + [0] * (3 - len(parts)))


def report_validation(dev, args, out=None) -> int:
    """Print what the layer said on `dev` (the attributed messages, then the printf lines, filtered by
    --printf-invocation); the number of validation messages (not printf lines)."""
    out = out or sys.stdout
    if not dev.instance.validation:
        return 0
    messages = dev.take_validation_messages()
    for m in messages:
        print(f"validation: {m}", file=out)
    if "printf" in dev.modes:
        lines = dev.printf_messages(invocation=parse_invocation(getattr(args, "printf_invocation", None)),
                                    clear=True)
        limit = getattr(args, "printf_limit", 50)
        for m in lines[:limit]:
            print(f"printf [{m.kernel} / {m.dispatch} / invocation {m.invocation}] {m.text}", file=out)
        if len(lines) > limit:
            print(f"printf: {len(lines) - limit} more lines (--printf-limit)", file=out)
    modes = ",".join(sorted(dev.modes)) or "core"
    print(f"validation ({modes}): {len(messages)} message(s)", file=out)
    return len(messages)


SHADER_SUFFIXES = (".glsl", ".comp", ".spv")


def is_shader_file(name) -> bool:
    """A command line name is a shader file where it ends in .glsl / .comp / .spv or names an existing file."""
    return Path(str(name)).suffix in SHADER_SUFFIXES or Path(str(name)).is_file()


def shader_file(path, defines: dict | None = None):
    """A shader file as a `toolchain.shaders.Spirv`: SPIR-V read (its magic number checked), GLSL compiled with
    the file's folder (and its include/) searched for includes."""
    from ..toolchain import shaders
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no shader file {path} (expected a .glsl or .spv file)")
    if path.suffix == ".spv":
        code = path.read_bytes()
        if len(code) < 20 or len(code) % 4 or code[:4] != b"\x03\x02\x23\x07":
            raise ValueError(f"{path} is not SPIR-V (expected a whole number of words starting 0x07230203, got "
                             f"{len(code)} bytes starting {code[:4].hex() or 'nothing'})")
        if defines:
            raise ValueError(f"-D applies to GLSL, not to the compiled {path}")
        return shaders.Spirv(code=code, name=path.stem, defines={}, cache_hit=False, source_path=path.resolve())
    includes = [path.parent / "include"] if (path.parent / "include").is_dir() else []
    return shaders.compile_glsl(path.read_text(), name=path.stem, defines=defines, include_dirs=includes,
                                source_path=path)


def parse_defines(texts) -> dict:
    """-D NAME=VALUE (or NAME, meaning 1) values → {NAME: VALUE}."""
    return dict(d.split("=", 1) if "=" in d else (d, "1") for d in texts or ())


def results_dir(out, device) -> Path:
    """`out`, or data/<device>/; remembered for the Ctrl-C report."""
    from ..measure import default_results_dir
    folder = Path(out) if out else default_results_dir(device)
    RESULTS_DIRS.append(folder)
    return folder


def expected_errors() -> tuple:
    """The error classes a command reports as one line (exit 2): bad input, a missing tool, checkout, device or
    build, a failed compile, build or run. Anything else is a bug and keeps its traceback."""
    from ..etvk.codegen import UnknownKernelError
    from ..etvk.harness import HarnessError
    from ..etvk.model.build import RuntimeBuildError
    from ..etvk.model.lowering import LoweringError
    from ..etvk.model.revision import RevisionLoweringError
    from ..etvk.model.runtime import RuntimeRunError
    from ..toolchain.debian_source import SetupError
    from ..toolchain.glslang import GlslangError
    from ..toolchain.shaders import ShaderCompileError, ToolNotFoundError
    from ..toolchain.validation import ValidationLayerError
    from ..vendors.mesa import MesaError
    from ..vk import VulkanError
    return (ValueError, UnknownKernelError, OSError, NotImplementedError, ModuleNotFoundError,
            VulkanError, ShaderCompileError, ToolNotFoundError, GlslangError, MesaError, SetupError,
            RuntimeBuildError, RuntimeRunError, LoweringError, RevisionLoweringError, HarnessError,
            ValidationLayerError)


TRACEBACK_VAR = "WORKBENCH_TRACEBACK"  # set to 1: an expected error raises with its traceback, every line of it


def error_line(exc: BaseException) -> str:
    """`exc` as the one line a command prints: its message's first line, and how many lines it left out."""
    lines = [line for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
    more = f" (+{len(lines) - 1} more lines: {TRACEBACK_VAR}=1 shows them)" if len(lines) > 1 else ""
    return f"workbench: error: {lines[0].strip()}{more}"


def interrupted(since: float) -> int:
    """One line on Ctrl-C: how many finished rows the CSVs written by this command hold, and where."""
    import pandas as pd
    rows, files = 0, []
    for folder in dict.fromkeys(RESULTS_DIRS):
        for csv in sorted(folder.glob("*.csv")) if folder.is_dir() else ():
            if csv.stat().st_mtime >= since:
                try:
                    rows += len(pd.read_csv(csv))
                except (pd.errors.EmptyDataError, OSError):
                    continue
                files.append(csv.name)
    where = ", ".join(str(f) for f in dict.fromkeys(RESULTS_DIRS)) or "no results folder"
    print(f"interrupted: {rows} rows kept in {where}" + (f" ({', '.join(files)})" if files else ""),
          file=sys.stderr)
    return 130
