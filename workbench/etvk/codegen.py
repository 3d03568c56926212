"""ET-VK's shader templates, expanded by ET-VK's own codegen and compiled here.

    src = source("/path/to/executorch", rev="1ee58ed3b7")   # or rev=None: the working tree as it is
    gen = Codegen(src)
    gen.variants()                      # {variant name: template path}, from the templates' YAML files
    gen.expand("q8ta_conv2d_pw_float")  # the generated GLSL, as gen_vulkan_spv.py writes it, and a line map
    gen.compile("q8ta_conv2d_pw_float") # validated SPIR-V (workbench.toolchain.shaders: glslc, spirv-val, cache)

Where the templates come from
    An ExecuTorch checkout named by the caller (or ``WORKBENCH_EXECUTORCH``): its
    ``backends/vulkan/runtime/graph/ops/glsl``. ``rev=None`` reads the working tree; a revision is read with
    ``git archive`` into ``~/.cache/workbench/etvk/<commit>`` (once), so the user's working tree, index and HEAD
    are never touched. The templates are third-party (BSD) code and are never copied into this repository.

Who expands them
    ET-VK's ``gen_vulkan_spv.py``: its ``SPVGenerator`` (YAML ``shader_variants`` / ``generate_variant_forall``)
    and its ``preprocess`` (``$if``, ``${layout_declare_tensor(...)}`` …) with its ``DEFAULT_ENV``,
    ``TYPE_MAPPINGS`` and ``UTILITY_FNS``. The generator is the checkout's own at the same revision when it has
    one (templates and generator change together), else the one in the ``executorch`` wheel. It is loaded from its
    file, not imported through the ``executorch`` package (that would import torch). ``.glslh`` / ``.h`` headers
    are expanded with the default environment into the same output folder, as the generator does.

Who compiles them
    ``workbench.toolchain.shaders.compile_glsl`` (glslc ``-O``, spirv-val, the content-keyed cache), target environment
    ``vulkan<VK_VERSION>`` (1.1 by default) as ET-VK does. The compiler is the one ``shaders.compiler_info()``
    names: normally the workbench's own build of Debian 13's shaderc 2025.2 / glslang 15.1
    (``workbench.toolchain.glslang``, set up by ./setup.sh), which compiles ET-VK's whole dialect as it is --
    ``GL_EXT_integer_dot_product`` in top-level shaders and in included headers alike, ``GL_KHR_cooperative_matrix``.

The integer dot product shim (a fallback for Debian 12's glslc only)
    ET-VK's int8 shaders ``require GL_EXT_integer_dot_product`` for ``dotPacked4x8AccSatEXT``; Debian 12's glslc
    (shaderc 2023.2) does not know that extension. The shim exists for a machine where the compiler above is not
    built (``WORKBENCH_GLSLC=system``, or before ``python -m workbench.toolchain.glslang setup``); it rewrites only
    the top-level shader, so a header that requires the extension still fails there -- the error then comes from
    that compiler. :func:`compiler_has_integer_dot_product` asks the compiler in use (once per compiler and
    version); with a compiler that has the extension the shim is never applied. When the compiler lacks it, the
    ``#extension`` line is replaced
    by declarations of the same SPIR-V instructions through ``GL_EXT_spirv_intrinsics``: ``dotPacked4x8EXT`` →
    ``OpSDot`` and ``dotPacked4x8AccSatEXT`` → ``OpSDotAccSat``, both with ``PackedVectorFormat4x8Bit``, which is
    what a compiler with the extension emits. A ``#line`` after the block keeps every line number of the
    generated file. Shaders using other functions of that extension are refused with a message naming them.
    ``SHIM_APPLIED`` in a compile's result says whether the shim was used; a compiler that has the extension is
    used as it is.

Compile errors
    :class:`TemplateCompileError` names the template file and line (found by expanding the template a second time
    with a marker before every template line) as well as the generated file and line.
"""
from __future__ import annotations

import copy
import difflib
import functools
import hashlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from ..toolchain import shaders
from ..toolchain.shaders import ShaderCompileError

GLSL_DIR = "backends/vulkan/runtime/graph/ops/glsl"
GENERATOR = "backends/vulkan/runtime/gen_vulkan_spv.py"
ENV_VAR = "WORKBENCH_EXECUTORCH"


class CheckoutError(ValueError):
    """The ExecuTorch checkout is missing, is not ExecuTorch, or lacks the revision asked for."""


class UnknownKernelError(KeyError):
    """No template variant of that name in the source."""

    def __str__(self):
        return str(self.args[0])


class TemplateCompileError(ShaderCompileError):
    """A generated shader failed to compile; names the template's file and line, then the generated one's."""

    def __init__(self, error: ShaderCompileError, template: Path | None, template_line: int | None,
                 template_excerpt: str):
        self.template = template
        self.template_line = template_line
        self.generated_path, self.generated_line = error.path, error.line
        self.template_excerpt = template_excerpt
        super().__init__(error.path, error.line, error.compiler_message, error.source_excerpt,
                         error.compiler_output)

    def _describe(self) -> str:
        head = ""
        if self.template is not None:
            where = f"{self.template}:{self.template_line}" if self.template_line else str(self.template)
            head = f"{where}: {self.compiler_message}\n"
            if self.template_excerpt:
                head += self.template_excerpt + "\n"
            head += "generated as "
        return head + super()._describe()


# --------------------------------------------------------------------------------------------------
# Where the templates come from


@dataclass(frozen=True)
class ShaderSource:
    """One tree of ET-VK templates: the folder of .glsl/.glslh/.yaml files and the generator that expands them."""

    glsl_dir: Path
    generator: Path
    label: str  # "working tree", the revision as given, or a folder name: what rows say the kernel came from
    commit: str | None = None
    checkout: Path | None = None
    generator_origin: str = "wheel"  # "checkout": the revision's own gen_vulkan_spv.py; "wheel": the installed one


def checkout_path(executorch=None) -> Path:
    """The ExecuTorch checkout: the argument, else ``$WORKBENCH_EXECUTORCH``; checked to be one."""
    given = executorch if executorch is not None else os.environ.get(ENV_VAR)
    if not given:
        raise CheckoutError(f"no ExecuTorch checkout configured: pass --executorch PATH or set {ENV_VAR} to a "
                            "clone of https://github.com/pytorch/executorch (backends/vulkan is all that is read)")
    path = Path(given).expanduser().resolve()
    if not path.exists():
        raise CheckoutError(f"ExecuTorch checkout {path} does not exist")
    if not (path / GLSL_DIR).is_dir():
        raise CheckoutError(f"{path} is not an ExecuTorch checkout: it has no {GLSL_DIR}/ "
                            "(expected the root of a clone of pytorch/executorch)")
    return path


def wheel_generator() -> Path:
    """gen_vulkan_spv.py of the installed ``executorch`` wheel (or the file ``$WORKBENCH_ETVK_GENERATOR`` names, for
    a machine that has the generator but not the wheel)."""
    override = os.environ.get("WORKBENCH_ETVK_GENERATOR")
    if override:
        if not Path(override).is_file():
            raise CheckoutError(f"WORKBENCH_ETVK_GENERATOR names {override}, which does not exist")
        return Path(override)
    spec = importlib.util.find_spec("executorch")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / GENERATOR
        if path.is_file():
            return path
    raise CheckoutError("ET-VK's codegen (executorch/backends/vulkan/runtime/gen_vulkan_spv.py) is not installed: "
                        "run ./setup.sh, or `pip install --no-deps executorch==1.5.1`")


def source(executorch=None, rev: str | None = None) -> ShaderSource:
    """ET-VK's templates in a checkout: its working tree (rev None) or any revision git knows."""
    root = checkout_path(executorch)
    if rev is None:
        return _with_generator(root / GLSL_DIR, root / GENERATOR, "working tree", _head(root), root)
    commit = resolve_revision(root, rev)
    target = cached_folder(cache_root() / commit, lambda folder: _archive(root, commit, folder))
    return _with_generator(target / GLSL_DIR, target / GENERATOR, rev, commit, root)


def _with_generator(glsl_dir: Path, own: Path, label: str, commit, root) -> ShaderSource:
    if own.is_file():
        return ShaderSource(glsl_dir, own, label, commit, root, "checkout")
    return ShaderSource(glsl_dir, wheel_generator(), label, commit, root, "wheel")


def dialect_source(glsl_dir) -> ShaderSource:
    """A folder of shaders written in ET-VK's dialect (templates + YAML), expanded by the wheel's generator."""
    path = Path(glsl_dir).resolve()
    if not path.is_dir():
        raise CheckoutError(f"shader folder {path} does not exist")
    return ShaderSource(path, wheel_generator(), path.name)


def cache_root() -> Path:
    base = os.environ.get("WORKBENCH_ETVK_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "workbench" / "etvk"


def run_git(root: Path, *args, binary: bool = False):
    if shutil.which("git") is None:
        raise CheckoutError("reading a revision needs git, which is not installed")
    result = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=not binary)
    return result


def _head(root: Path) -> str | None:
    result = run_git(root, "rev-parse", "HEAD")
    return result.stdout.strip() if result.returncode == 0 else None


def resolve_revision(root: Path, rev: str) -> str:
    """The full commit id of `rev` (a hash, branch, tag, `main~3`…) in the checkout."""
    if not (root / ".git").exists():
        probe = run_git(root, "rev-parse", "--git-dir")
        if probe.returncode != 0:
            raise CheckoutError(f"{root} is not a git repository, so revision {rev!r} cannot be read "
                                "(use the working tree: no --rev)")
    result = run_git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if result.returncode != 0 or not result.stdout.strip():
        raise CheckoutError(f"revision {rev!r} not found in {root} (fetch it first, e.g. `git fetch origin {rev}`)")
    return result.stdout.strip()


def cached_folder(target: Path, fill) -> Path:
    """`target`, filled once by `fill(folder)`: built in a private folder and renamed into place, so a reader never
    sees half a folder and two processes building it at once both succeed."""
    if not (target / ".complete").is_file():
        partial = target.with_name(target.name + f".partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        fill(partial)
        (partial / ".complete").write_text("")
        try:
            partial.rename(target)
        except OSError:  # another process got there first
            shutil.rmtree(partial, ignore_errors=True)
    return target


def _archive(root: Path, commit: str, folder: Path) -> None:
    """Extract backends/vulkan/runtime (templates + generator) at `commit` without touching the working tree."""
    paths = [GLSL_DIR, GENERATOR]
    listed = run_git(root, "ls-tree", "--name-only", commit, GENERATOR)
    if not listed.stdout.strip():
        paths = [GLSL_DIR]
    result = run_git(root, "archive", "--format=tar", commit, *paths, binary=True)
    if result.returncode != 0:
        message = result.stderr.decode(errors="replace").strip()
        raise CheckoutError(f"git archive of {GLSL_DIR} at {commit[:10]} failed: {message}")
    with tarfile.open(fileobj=io.BytesIO(result.stdout)) as tar:
        tar.extractall(folder, filter="data")


# --------------------------------------------------------------------------------------------------
# ET-VK's generator


@functools.lru_cache(maxsize=None)
def load_generator(path: Path):
    """gen_vulkan_spv.py as a module of its own (its package's __init__ would import torch)."""
    spec = importlib.util.spec_from_file_location(f"etvk_gen_vulkan_spv_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}",
                                                  path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _environment(module) -> dict:
    env = copy.deepcopy(module.DEFAULT_ENV)
    env.update(module.TYPE_MAPPINGS)
    env.update(module.UTILITY_FNS)
    return env


MARKER = "@@WORKBENCH_TEMPLATE_LINE "


@dataclass
class Expanded:
    """One variant as ET-VK's generator writes it, and where each of its lines came from in the template."""

    name: str
    template: Path
    params: dict = field(repr=False)
    text: str = field(repr=False)
    template_lines: list = field(repr=False)  # 1-based template line for each generated line (None: unknown)

    def define(self, macro: str) -> str | None:
        """The value of `#define MACRO value` in the generated text (tile sizes and the like), else None."""
        match = re.search(rf"^\s*#define\s+{re.escape(macro)}\s+(.+?)\s*$", self.text, flags=re.MULTILINE)
        return match.group(1) if match else None


class Codegen:
    """ET-VK's codegen over one source; expansions and generated headers are made once per process."""

    def __init__(self, src: ShaderSource):
        self.source = src
        self.module = load_generator(src.generator)
        self._generator = self.module.SPVGenerator(str(src.glsl_dir), _environment(self.module), None)
        self._outputs = self._generator.output_file_map  # name → (template path, params)
        self._expanded: dict[str, Expanded] = {}
        self._patches: dict[str, tuple] = {}  # derived variant → ((old, new), ...) applied to its expansion
        self._header_dir: Path | None = None

    def variants(self) -> dict[str, Path]:
        """Every compute shader variant the templates generate, name → template."""
        return {name: Path(path) for name, (path, _) in sorted(self._outputs.items())
                if path.endswith(".glsl")}

    def derive(self, base: str, name: str, *, patches=(), **params) -> str:
        """Register `name`: the template of variant `base` expanded with some of its yaml parameters changed
        (a workbench-made variant, e.g. another subgroup tiling; ET-VK's own variants are left as they are), and
        `patches`, ``(old, new)`` text replacements of the expansion (each old must occur; same line count).
        Returns `name`; asking again with the same parameters is a no-op, with others a ValueError."""
        patches = tuple((str(a), str(b)) for a, b in patches)
        if any(a.count("\n") != b.count("\n") for a, b in patches):
            raise ValueError("a patch must keep the line count (template line mapping)")
        if name in self._patches and self._patches[name] != patches:
            raise ValueError(f"variant {name!r} already exists with other patches")
        path, base_params = self._lookup(base)
        unknown = sorted(set(params) - set(base_params))
        if unknown:
            raise ValueError(f"{base}'s template has no parameters {unknown}; its yaml parameters: "
                             f"{sorted(k for k, v in base_params.items() if k.isupper() and not callable(v))}")
        # the binding / constant_id counters start afresh (the generator's DEFAULT_ENV; the base's lists have
        # been advanced by its own expansions)
        counters = {key: list(value) for key, value in getattr(self.module, "DEFAULT_ENV", {}).items()
                    if isinstance(value, list)} or {"B": [0], "C": [3]}
        derived = {**base_params, **counters, **params, "NAME": name}
        if name in self._outputs:
            same = {k: v for k, v in self._outputs[name][1].items() if k not in counters}
            if self._outputs[name][0] != path or same != {k: v for k, v in derived.items() if k not in counters}:
                raise ValueError(f"variant {name!r} already exists with other parameters")
            return name
        self._outputs[name] = (path, derived)
        if patches:
            self._patches[name] = patches
        return name

    def variants_of(self, template: str) -> list[str]:
        return [name for name, path in self.variants().items() if path.stem == template]

    def _lookup(self, name: str):
        if name not in self._outputs or not self._outputs[name][0].endswith(".glsl"):
            close = difflib.get_close_matches(name, list(self.variants()), n=6, cutoff=0.5)
            hint = f"; similar: {', '.join(close)}" if close else ""
            raise UnknownKernelError(f"no shader variant {name!r} in {self.source.glsl_dir} "
                                     f"({self.source.label}){hint}")
        return self._outputs[name]

    def expand(self, name: str) -> Expanded:
        if name not in self._expanded:
            path, params = self._lookup(name)
            text = self._preprocess(Path(path), params)
            for before, after in self._patches.get(name, ()):
                if before not in text:
                    raise ValueError(f"{name}: the expanded template has no {before!r} to replace (the template "
                                     f"changed; the workbench-made variant needs updating)")
                text = text.replace(before, after)
            lines = _template_lines(self.module, Path(path), params, text)
            self._expanded[name] = Expanded(name, Path(path), params, text, lines)
        return self._expanded[name]

    def _preprocess(self, path: Path, params: dict) -> str:
        text = path.read_text(encoding="utf-8")
        text = self._generator.maybe_replace_u16vecn(text)
        try:
            out = self.module.preprocess(text, params, input_path=str(path))
        except Exception as error:  # the template's Python raised: say which template and where
            raise TemplateCompileError(ShaderCompileError(str(path), _python_line(error), f"template error: "
                                                          f"{type(error).__name__}: {error}"),
                                       path, None, "") from error
        subgroup = params.get("SUBGROUP_SIZE")
        if subgroup is not None and int(subgroup) > 0:
            out = f"// REQUIRED_SUBGROUP_SIZE = {int(subgroup)}\n" + out
        return out

    def header_dir(self) -> Path:
        """The generated headers (.glslh, .h) of this source, in a folder keyed by their content."""
        if self._header_dir is None:
            headers = {n: Path(p) for n, (p, _) in self._outputs.items() if not p.endswith(".glsl")}
            digest = hashlib.sha256()
            for name in sorted(headers):
                digest.update(name.encode() + b"\0" + headers[name].read_bytes())
            def write(folder: Path):
                for name, path in headers.items():
                    (folder / path.name).write_text(self._preprocess(path, self._outputs[name][1]), encoding="utf-8")

            self._header_dir = cached_folder(cache_root() / "headers" / digest.hexdigest()[:20], write)
        return self._header_dir

    def compile(self, name: str, *, optimize: bool = True) -> "shaders.Spirv":
        """Validated SPIR-V of one variant (the dot-product shim applied where the compiler needs it)."""
        expanded = self.expand(name)
        text, shimmed = apply_dot_product_shim(expanded.text, name)
        target_env = f"vulkan{expanded.params.get('VK_VERSION', '1.1')}"
        headers = self.header_dir()
        shown = headers / f"{name}.glsl"  # where the generated file would sit; its folder holds the headers
        try:
            spirv = shaders.compile_glsl(text, name=name, source_path=shown, include_dirs=[headers],
                                         target_env=target_env, optimize=optimize)
        except ShaderCompileError as error:
            raise self._locate(error, expanded, shown, shimmed) from None
        spirv.defines["SHIM_APPLIED"] = shimmed
        return spirv

    def _locate(self, error: ShaderCompileError, expanded: Expanded, shown: Path, shimmed: bool):
        if error.line is None:
            return TemplateCompileError(error, expanded.template, None, "")
        if Path(error.path) == shown:
            template, lines = expanded.template, expanded.template_lines
        else:  # in a generated header: its template is the header of the same name
            header = Path(error.path).name
            matches = [Path(p) for n, (p, _) in self._outputs.items() if Path(p).name == header]
            if not matches:
                return TemplateCompileError(error, None, None, "")
            template = matches[0]
            params = self._outputs[template.stem][1] if template.stem in self._outputs else {}
            lines = _template_lines(self.module, template, params, Path(error.path).read_text())
        line = lines[error.line - 1] if 0 < error.line <= len(lines) else None
        excerpt = shaders._excerpt(template.read_text().splitlines(), line) if line else ""
        return TemplateCompileError(error, template, line, excerpt)


def _python_line(error: Exception) -> int | None:
    tb = error.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith((".glsl", ".glslh", ".h")):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _template_lines(module, path: Path, params: dict, generated: str) -> list:
    """For each generated line, the template line it came from: expand once more with a marker before every
    template line that prints (same indentation, so it lands in the same $if / $for block)."""
    out, previous = [], ""
    for number, line in enumerate(path.read_text(encoding="utf-8").replace("\r\n", "\n").split("\n"), 1):
        stripped = line.strip()
        printable = stripped and "LINT" not in line and not (stripped.startswith("$") and not stripped.startswith("${"))
        if printable and not previous.rstrip().endswith("\\"):
            indent = line[:len(line) - len(line.lstrip())]
            out.append(f"{indent}{MARKER}{number}")
        out.append(line)
        if stripped:
            previous = line
    try:
        annotated = module.preprocess("\n".join(out), params)
    except Exception:
        return [None] * len(generated.splitlines())
    lines, current = [], None
    for text in annotated.splitlines():
        if text.strip().startswith(MARKER):
            current = int(text.strip()[len(MARKER):])
            continue
        lines.append(current)
    if len(lines) != len(generated.splitlines()):
        return [None] * len(generated.splitlines())
    return lines


# --------------------------------------------------------------------------------------------------
# The integer dot product shim

DOT_EXTENSION = re.compile(r"^[ \t]*#extension\s+GL_EXT_integer_dot_product\s*:\s*(require|enable)[ \t]*$",
                           re.MULTILINE)
SHIMMED_FUNCTIONS = ("dotPacked4x8EXT", "dotPacked4x8AccSatEXT")
OTHER_FUNCTIONS = re.compile(r"\b(dotEXT|dotAccSatEXT|dotPacked4x8AccSatEXT|dotPacked4x8EXT)\b")
SHIM = """#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450) int workbench_sdot(int a, int b, spirv_literal int fmt);
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4453) int workbench_sdot_acc_sat(int a, int b, int acc, spirv_literal int fmt);
#define dotPacked4x8EXT(a, b) workbench_sdot(a, b, 0)
#define dotPacked4x8AccSatEXT(a, b, acc) workbench_sdot_acc_sat(a, b, acc, 0)"""


def compiler_has_integer_dot_product() -> bool:
    """Whether the GLSL compiler in use (``shaders.compiler_info()``) knows GL_EXT_integer_dot_product: the
    workbench's build of glslang 15 does, Debian 12's glslc does not. Asked once per compiler and version."""
    tools = shaders.compiler_info()
    return _has_integer_dot_product(str(tools.path), tools.version)


@functools.lru_cache(maxsize=None)
def _has_integer_dot_product(compiler: str, version: str) -> bool:
    probe = ("#version 450\n#extension GL_EXT_integer_dot_product : require\nlayout(local_size_x = 1) in;\n"
             "layout(set = 0, binding = 0) buffer B { int v[]; };\n"
             "void main() { v[0] = dotPacked4x8AccSatEXT(v[1], v[2], v[3]); }\n")
    try:
        shaders.compile_glsl(probe, name="integer_dot_product_probe")
        return True
    except ShaderCompileError:
        return False


def apply_dot_product_shim(text: str, name: str = "shader") -> tuple[str, bool]:
    """(text, applied): the extension line replaced by spirv_intrinsics declarations where the compiler needs it."""
    match = DOT_EXTENSION.search(text)
    if match is None or compiler_has_integer_dot_product():
        return text, False
    used = set(OTHER_FUNCTIONS.findall(text)) - set(SHIMMED_FUNCTIONS)
    if used:
        raise ShaderCompileError(f"<{name}>", None, f"uses {', '.join(sorted(used))} of GL_EXT_integer_dot_product; "
                                 f"this compiler lacks the extension and the shim covers only "
                                 f"{', '.join(SHIMMED_FUNCTIONS)}")
    next_line = text[:match.end()].count("\n") + 2  # the line after the #extension line
    return text[:match.start()] + SHIM + f"\n#line {next_line}" + text[match.end():], True
