"""GLSL compute shaders → validated SPIR-V, with includes, defines, YAML variants and a cache.

    from workbench.toolchain.shaders import compile_shader, compile_glsl, compile_variant, variants
    spv = compile_shader("copy", defines={"DTYPE": "uint"})   # shaders/copy.glsl
    spv = compile_glsl(text, defines={"USE_INT_DOT_EXT": True}, name="probe")
    spv.code, spv.words, spv.cache_hit

Compiling
    Every shader is a compute shader. Every result is checked with ``spirv-val`` for the same target
    environment. :func:`compiler_info` says which compiler and validator are used, chosen in this order:

    1. ``$WORKBENCH_GLSLC``: a path or command name of a glslc or glslangValidator; ``built`` means the
       cached build below and fails (naming what is missing and how to build it) when it is not there;
       ``system`` skips the cached build.
    2. The build of ``workbench.toolchain.glslang`` (glslc of shaderc 2025.2 / glslang 15.1 and
       spirv-val of SPIRV-Tools 2025.1, from Debian 13 source; ``python -m workbench.toolchain.glslang
       setup``, which ./setup.sh runs) when it is set up: it knows ET-VK's whole dialect
       (GL_EXT_integer_dot_product, GL_KHR_cooperative_matrix). Its spirv-val then validates every
       result, whichever compiler made it.
    3. ``glslc`` on PATH (Debian 12's: shaderc 2023.2, glslang 12), else ``glslangValidator``, with the
       ``spirv-val`` on PATH. Include search
    order: the directory of ``source_path`` (when given), ``shaders/include``, then ``include_dirs``.
    Define values are rendered ``True``/``False`` → ``1``/``0``, anything else → ``str(value)``.
    glslc runs with ``-g`` so that OpName survives ``-O`` (the runtime names bindings in its errors);
    the source text, file names and line markers that ``-g`` also embeds are stripped again, so the
    output is deterministic.
    Errors from the compiler or the validator raise :class:`ShaderCompileError`, which points at the
    offending line (in the include file when the error is there).

    glslangValidator differences: it has no optimizer flag (``optimize`` is then only part of the cache
    key), and it needs ``GL_GOOGLE_include_directive`` enabled before ``#include``; glslc enables it by
    itself, so for glslangValidator the line is inserted after ``#version`` and error lines are shifted back.

Cache
    SPIR-V is cached in ``$WORKBENCH_CACHE_DIR`` (default ``~/.cache/workbench/spirv``) as ``<key>.spv``,
    and in a per-process dict. The key is a sha256 over the source, the content of every file it includes
    (found by scanning ``#include`` lines recursively, not by mtimes), the sorted rendered defines, the
    target environment, the optimize flag, and the compiler's and the validator's paths and ``--version``
    output (looked up once per process and path), so SPIR-V of one compiler is never reused for another.
    A cache hit runs no compiler; ``COMPILER_CALLS`` counts the compilations actually run.

YAML variants (``shaders/<name>.yaml`` beside ``shaders/<name>.glsl``)
    ::

        pixel_shuffle:                  # must equal the file stem; every variant compiles <stem>.glsl
          parameters:                   # required: every parameter with its default value
            DTYPE: float
            STORAGE: buffer
          forall:                       # optional: the grid for variants that have no forall of their own
            DTYPE: [float, half]
          variants:                     # required, non-empty list
            - name: pixel_shuffle_buffer        # required: base name
            - name: pixel_shuffle_texture3d
              parameters: {STORAGE: texture3d}  # optional: overrides of the defaults
              forall:                           # optional: replaces the file-level forall
                DTYPE: [float, {value: half, suffix: fp16}]

    A variant expands into one entry per combination of its ``forall`` lists (the cartesian product, in
    YAML order). Its name is the base name plus ``_<suffix>`` for each iterated parameter, in YAML order;
    the suffix is the value itself (``true``/``false`` for booleans) unless given as
    ``{value: v, suffix: s}``; an empty suffix adds nothing. Without ``forall`` the variant keeps its bare
    name. The example yields ``pixel_shuffle_buffer_float``, ``pixel_shuffle_buffer_half``,
    ``pixel_shuffle_texture3d_float`` and ``pixel_shuffle_texture3d_fp16``, each mapped to the full define
    dict (defaults, then the variant's overrides, then its grid values).

    Rules (a broken file raises ValueError naming it): no unknown keys at any level; parameter names are
    C identifiers with scalar values; ``forall`` and override keys must be declared in ``parameters``;
    ``forall`` lists are non-empty; generated names are C identifiers and unique within the file.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import yaml

SHADER_DIR = Path(__file__).resolve().parents[2] / "shaders"
INCLUDE_DIR = SHADER_DIR / "include"

TARGET_ENVS = ("vulkan1.1", "vulkan1.2", "vulkan1.3")
COMPILERS = ("glslc", "glslangValidator")  # on PATH, in order of preference
COMPILER_ENV = "WORKBENCH_GLSLC"  # a compiler path or name, or "built" / "system"
COMPILER_CALLS = 0  # compilations actually run in this process (cache hits do not count)

_CACHE_FORMAT = "workbench-spirv-4"  # bump to invalidate every cached entry
_SPIRV_MAGIC = b"\x03\x02\x23\x07"  # 0x07230203, little endian
# OpSourceContinued, OpSource, OpSourceExtension, OpString, OpLine, OpNoLine, OpModuleProcessed
_SOURCE_DEBUG_OPCODES = frozenset({2, 3, 4, 7, 8, 317, 330})
_MEMORY_CACHE: dict[str, bytes] = {}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INCLUDE_LINE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:"([^"]+)"|<([^>]+)>)', re.MULTILINE)
_GLSLC_ERROR = re.compile(r"^(?P<file>.+?):(?:(?P<line>\d+):)? error: (?P<message>.*)$")
_GLSLANG_ERROR = re.compile(r"^ERROR: (?:(?P<file>.+?):(?P<line>\d+): )?(?P<message>.*)$")
_ERROR_SUMMARY = re.compile(r"^ERROR: \d+ compilation errors")  # glslangValidator's closing line


# --------------------------------------------------------------------------------------------------
# Results and errors


@dataclass(frozen=True)
class Spirv:
    """A validated SPIR-V module and how it was made."""

    code: bytes = field(repr=False)
    name: str
    defines: dict
    cache_hit: bool
    source_path: Path | None = None
    key: str = field(default="", repr=False)

    @property
    def words(self):
        """The module as a numpy uint32 array (SPIR-V is a stream of little-endian words)."""
        import numpy as np

        return np.frombuffer(self.code, dtype="<u4")


class ShaderCompileError(Exception):
    """The compiler or spirv-val rejected a shader.

    ``path`` is the file the error is in (an include file when the error is there; ``<name>`` for
    inline source), ``line`` its 1-based line number or None, ``compiler_message`` the first error's
    text, ``source_excerpt`` the offending line (marked ``>``) with one line of context either side,
    and ``compiler_output`` everything the tool printed.
    """

    def __init__(self, path, line, compiler_message, source_excerpt="", compiler_output=""):
        self.path = str(path)
        self.line = line
        self.compiler_message = compiler_message
        self.source_excerpt = source_excerpt
        self.compiler_output = compiler_output
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        text = f"{where}: {self.compiler_message}"
        if self.source_excerpt:
            text += "\n" + self.source_excerpt
        others = [l for l in _error_lines(self.compiler_output) if self.compiler_message not in l]
        if others:  # a few more errors help; a wall of them does not
            text += "\nother errors:\n  " + "\n  ".join(others[:5])
            if len(others) > 5:
                text += f"\n  ... {len(others) - 5} more in .compiler_output"
        return text


class ToolNotFoundError(RuntimeError):
    """A required command-line tool (GLSL compiler, spirv-val) is not installed."""


@dataclass(frozen=True)
class CompilerInfo:
    """The GLSL compiler and the SPIR-V validator :func:`compile_glsl` uses, and where they come from.

    ``kind`` is ``"glslc"`` or ``"glslangValidator"`` (how the command line is formed); ``origin`` is
    ``"env"`` ($WORKBENCH_GLSLC), ``"built"`` (workbench.toolchain.glslang's cache) or ``"system"`` (PATH);
    ``version`` / ``validator_version`` are the tools' ``--version`` output.
    """

    path: Path
    kind: str
    origin: str
    version: str
    validator: Path
    validator_version: str

    def __str__(self) -> str:
        first = lambda text: text.splitlines()[0] if text else "?"  # noqa: E731
        return (f"{self.kind} {self.path} ({self.origin}; {first(self.version)}), "
                f"spirv-val {self.validator} ({first(self.validator_version)})")


# --------------------------------------------------------------------------------------------------
# Public entry points


def compile_glsl(
    source: str,
    *,
    name: str = "inline",
    defines: dict | None = None,
    include_dirs=(),
    target_env: str = "vulkan1.1",
    optimize: bool = True,
    source_path=None,
) -> Spirv:
    """Compile compute-shader GLSL text to validated SPIR-V (cached)."""
    _check_target_env(target_env)
    defines = dict(defines or {})
    rendered = _render_defines(defines)
    source_path = Path(source_path).resolve() if source_path is not None else None
    search_dirs = _search_dirs(source_path, include_dirs)
    tools = compiler_info()
    key = _cache_key(source, search_dirs, rendered, target_env, optimize, tools)

    code = _load_cached(key)
    cache_hit = code is not None
    if not cache_hit:
        shown_as = str(source_path) if source_path else f"<{name}>"
        code = _compile(tools, source, shown_as, search_dirs, rendered, target_env, optimize)
        _store_cached(key, code)
    return Spirv(code=code, name=name, defines=defines, cache_hit=cache_hit,
                 source_path=source_path, key=key)


def compile_shader(name: str, /, defines: dict | None = None, *, shader_dir=None, **kw) -> Spirv:
    """Compile ``<shader_dir>/<name>.glsl`` (default ``shaders/``); ``kw`` goes to :func:`compile_glsl`
    (``name=`` there renames the result; ``name`` here is positional-only so that both can be given)."""
    directory = _shader_dir(shader_dir)
    name = name.removesuffix(".glsl")
    path = directory / f"{name}.glsl"
    if not path.is_file():
        available = ", ".join(available_shaders(directory)) or "(none)"
        raise FileNotFoundError(f"no shader {name!r} in {directory}; available: {available}")
    include_dirs = list(kw.pop("include_dirs", ()))
    if shader_dir is not None and (directory / "include").is_dir():
        include_dirs.insert(0, directory / "include")  # an overridden shader dir brings its own includes
    kw.setdefault("name", name)
    return compile_glsl(path.read_text(), defines=defines, include_dirs=include_dirs,
                        source_path=path, **kw)


def variants(name: str, *, shader_dir=None) -> dict[str, dict]:
    """Variant name → full define dict, from ``<shader_dir>/<name>.yaml``."""
    directory = _shader_dir(shader_dir)
    path = directory / f"{name}.yaml"
    if not path.is_file():
        available = ", ".join(sorted(p.stem for p in directory.glob("*.yaml"))) or "(none)"
        raise FileNotFoundError(f"no variant file {name}.yaml in {directory}; available: {available}")
    return _expand_variants(path)


def compile_variant(variant_name: str, defines: dict | None = None, *, shader_dir=None, **kw) -> Spirv:
    """Compile the variant that some ``*.yaml`` in the shader dir declares; ``defines`` add to its own."""
    directory = _shader_dir(shader_dir)
    declared_in = []  # (yaml path, the variant's defines)
    for path in sorted(directory.glob("*.yaml")):
        table = _expand_variants(path)
        if variant_name in table:
            declared_in.append((path, table[variant_name]))
    if not declared_in:
        raise LookupError(f"no YAML in {directory} declares a variant named {variant_name!r}")
    if len(declared_in) > 1:
        files = ", ".join(path.name for path, _ in declared_in)
        raise ValueError(f"variant {variant_name!r} is declared by several files: {files}")
    path, variant_defines = declared_in[0]
    kw.setdefault("name", variant_name)
    return compile_shader(path.stem, {**variant_defines, **(defines or {})}, shader_dir=shader_dir, **kw)


def available_shaders(shader_dir=None) -> list[str]:
    """Names of the ``*.glsl`` shaders in the shader dir."""
    return sorted(p.stem for p in _shader_dir(shader_dir).glob("*.glsl"))


def compiler_info() -> CompilerInfo:
    """Which GLSL compiler and spirv-val :func:`compile_glsl` uses now (see "Compiling" in the module doc)."""
    from . import glslang as built

    choice = os.environ.get(COMPILER_ENV, "").strip()
    built_tools = None
    if choice == "built":
        built_tools = built.require()  # GlslangNotSetUpError: what is missing and how to build it
    elif choice != "system" and built.is_set_up():
        built_tools = built.tool_paths()
    if choice and choice not in ("built", "system"):
        found = shutil.which(choice)
        if found is None:
            raise ToolNotFoundError(f"${COMPILER_ENV}={choice!r} names no executable compiler "
                                    "(a path or command name of glslc or glslangValidator; or built / system)")
        path, origin = Path(found), "env"
    elif built_tools is not None:
        path, origin = built_tools["glslc"], "built"
    else:
        path, origin = _system_compiler(), "system"
    validator = built_tools["spirv-val"] if built_tools is not None else _system_validator()
    return CompilerInfo(path=path, kind="glslangValidator" if _is_glslang(path) else "glslc", origin=origin,
                        version=_compiler_version(str(path)), validator=validator,
                        validator_version=_compiler_version(str(validator)))


def _system_compiler() -> Path:
    for candidate in COMPILERS:
        found = shutil.which(candidate)
        if found:
            return Path(found)
    raise ToolNotFoundError(
        f"no GLSL compiler found (looked for {', '.join(COMPILERS)} on PATH). "
        "Install glslc: `apt-get install glslc` (Debian package `glslc`), or build the workbench's own: "
        "`python -m workbench.toolchain.glslang setup`.")


def _system_validator() -> Path:
    found = shutil.which("spirv-val")
    if found is None:
        raise ToolNotFoundError("spirv-val not found on PATH. Install it: `apt-get install spirv-tools`.")
    return Path(found)


def cache_dir() -> Path:
    """Where compiled SPIR-V is kept: $WORKBENCH_CACHE_DIR or ~/.cache/workbench/spirv."""
    configured = os.environ.get("WORKBENCH_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "workbench" / "spirv"


def clear_memory_cache() -> None:
    """Forget the per-process cache (the on-disk cache stays)."""
    _MEMORY_CACHE.clear()


# --------------------------------------------------------------------------------------------------
# Arguments


def _shader_dir(shader_dir) -> Path:
    # read the module global at call time so tests and notebooks can repoint it
    return Path(shader_dir) if shader_dir is not None else Path(SHADER_DIR)


def _check_target_env(target_env: str) -> None:
    if target_env not in TARGET_ENVS:
        raise ValueError(f"unknown target_env {target_env!r}; allowed: {', '.join(TARGET_ENVS)}")


def _render_defines(defines: dict) -> dict[str, str]:
    rendered = {}
    for define_name, value in defines.items():
        if not isinstance(define_name, str) or not _IDENTIFIER.fullmatch(define_name):
            raise ValueError(f"define name {define_name!r} is not a C identifier")
        text = ("1" if value else "0") if isinstance(value, bool) else str(value)
        if "\n" in text:
            raise ValueError(f"define {define_name} has a multi-line value")
        rendered[define_name] = text
    return rendered


def _search_dirs(source_path: Path | None, include_dirs) -> list[Path]:
    """The include search path, absolute and without repeats."""
    extra = [Path(d).resolve() for d in include_dirs]
    for directory in extra:
        if not directory.is_dir():
            raise FileNotFoundError(f"include dir {directory} does not exist")
    candidates = [source_path.parent] if source_path else []
    candidates.append(Path(INCLUDE_DIR).resolve())
    ordered = []
    for directory in candidates + extra:
        if directory.is_dir() and directory not in ordered:
            ordered.append(directory)
    return ordered


# --------------------------------------------------------------------------------------------------
# Cache


def _cache_key(source, search_dirs, rendered_defines, target_env, optimize, tools: CompilerInfo) -> str:
    digest = hashlib.sha256()

    def feed(label: str, data) -> None:
        data = data.encode() if isinstance(data, str) else data
        for part in (label.encode(), data):  # length-prefixed, so fields cannot run into each other
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)

    feed("format", _CACHE_FORMAT)
    feed("source", source)
    for include_name, content in _included_files(source, search_dirs):
        feed("include:" + include_name, content)
    feed("defines", json.dumps(sorted(rendered_defines.items())))
    feed("target_env", target_env)
    feed("optimize", str(bool(optimize)))
    feed("compiler", str(tools.path))
    feed("compiler_version", tools.version)
    feed("validator", str(tools.validator))
    feed("validator_version", tools.validator_version)
    return digest.hexdigest()


def _included_files(source: str, search_dirs: list[Path]) -> list[tuple[str, bytes]]:
    """Every file the source includes, recursively: (name as written, content).

    A textual scan: includes inside ``#if`` blocks or comments count too, which can only cause an
    unneeded recompile, never a stale hit. An include that is not found is recorded as missing.
    """
    found: list[tuple[str, bytes]] = []
    visited: set[Path] = set()

    def visit(text: str, own_dir: Path | None) -> None:
        for quoted, angled in _INCLUDE_LINE.findall(text):
            include_name = quoted or angled
            # like glslc: "x" looks beside the including file first, <x> only on the search path
            dirs = ([own_dir] if quoted and own_dir else []) + search_dirs
            path = _find_include(include_name, dirs)
            if path is None:
                found.append((include_name, b"<missing>"))
            elif path not in visited:
                visited.add(path)
                content = path.read_bytes()
                found.append((include_name, content))
                visit(content.decode("utf-8", errors="replace"), path.parent)

    visit(source, None)  # the main source is compiled from a temp dir, so only the search path applies
    return found


def _find_include(include_name: str, dirs: list[Path]) -> Path | None:
    for directory in dirs:
        candidate = directory / include_name
        if candidate.is_file():
            return candidate.resolve()
    return None


def _load_cached(key: str) -> bytes | None:
    if key in _MEMORY_CACHE:
        return _MEMORY_CACHE[key]
    try:
        code = (cache_dir() / f"{key}.spv").read_bytes()
    except OSError:
        return None
    if not code.startswith(_SPIRV_MAGIC) or len(code) % 4:
        return None  # a damaged entry is a miss; the recompile overwrites it
    _MEMORY_CACHE[key] = code
    return code


def _store_cached(key: str, code: bytes) -> None:
    _MEMORY_CACHE[key] = code
    directory = cache_dir()
    temp_name = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # write then rename, so a reader never sees half a file (os.replace is atomic)
        handle, temp_name = tempfile.mkstemp(dir=directory, prefix=f".{key}.", suffix=".tmp")
        with os.fdopen(handle, "wb") as out:
            out.write(code)
        os.replace(temp_name, directory / f"{key}.spv")
    except OSError as error:
        warnings.warn(f"SPIR-V not cached on disk ({directory}): {error}", stacklevel=3)
        if temp_name and os.path.exists(temp_name):
            os.unlink(temp_name)


# --------------------------------------------------------------------------------------------------
# Running the tools


@functools.lru_cache(maxsize=None)
def _compiler_version(compiler: str) -> str:
    result = subprocess.run([compiler, "--version"], capture_output=True, text=True)
    return (result.stdout + result.stderr).strip()


def _is_glslang(compiler: Path) -> bool:
    name = Path(compiler).name.lower()
    return name.startswith("glslangvalidator") or name == "glslang"  # glslang 14+ names its standalone glslang


def _compile(tools: CompilerInfo, source, shown_as, search_dirs, rendered_defines, target_env,
             optimize) -> bytes:
    global COMPILER_CALLS
    compiler = tools.path
    sent, version_line = source, None
    if _is_glslang(compiler):
        sent, version_line = _enable_include_directive(source)
    with tempfile.TemporaryDirectory(prefix="workbench-glsl-") as work:
        source_file = Path(work) / "shader.comp"
        output_file = Path(work) / "shader.spv"
        source_file.write_text(sent)
        build = _glslang_command if _is_glslang(compiler) else _glslc_command
        command = build(compiler, source_file, output_file, search_dirs, rendered_defines,
                        target_env, optimize)
        COMPILER_CALLS += 1
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0 or not output_file.is_file():
            # glslc reports on stderr (stdout may hold a dump of built-ins); glslangValidator on stdout
            output = result.stdout if _is_glslang(compiler) else result.stderr
            raise _compile_error(output or result.stdout + result.stderr, source_file, shown_as,
                                 source, version_line)
        output_file.write_bytes(_strip_source_debug(output_file.read_bytes()))
        _validate(tools.validator, output_file, target_env, shown_as)
        return output_file.read_bytes()


def _glslc_command(compiler, source_file, output_file, search_dirs, defines, target_env, optimize):
    command = [str(compiler), "-fshader-stage=compute", f"--target-env={target_env}"]
    if optimize:
        command.append("-O")
    command.append("-g")  # keep OpName: the runtime names bindings in its errors (drivers ignore debug info)
    for directory in search_dirs:
        command += ["-I", str(directory)]
    command += [f"-D{name}={value}" for name, value in defines.items()]
    return command + [str(source_file), "-o", str(output_file)]


def _glslang_command(compiler, source_file, output_file, search_dirs, defines, target_env, optimize):
    # glslangValidator has no general optimizer switch; `optimize` only reaches the cache key
    command = [str(compiler), "-V", "--target-env", target_env, "-S", "comp"]
    command += [f"-D{name}={value}" for name, value in defines.items()]
    command += [f"-I{directory}" for directory in search_dirs]
    return command + ["-o", str(output_file), str(source_file)]


def _strip_source_debug(code: bytes) -> bytes:
    """Drop the source text, file names and line markers that -g embeds; OpName stays.

    They hold the temp file's path (every compile would differ) and the whole source with its
    comments; the runtime only wants the names.
    """
    import numpy as np

    words = np.frombuffer(code, dtype="<u4")
    # debugPrintfEXT's format strings are OpStrings (opcode 7) its NonSemantic.DebugPrintf calls refer to: keep them
    drop = _SOURCE_DEBUG_OPCODES - {7} if b"NonSemantic.DebugPrintf" in code else _SOURCE_DEBUG_OPCODES
    kept, index = [words[:5]], 5  # 5 header words, then instructions
    while index < len(words):
        word_count, opcode = int(words[index]) >> 16, int(words[index]) & 0xFFFF
        if word_count == 0:
            return code  # not well formed: leave it to spirv-val to say so
        if opcode not in drop:
            kept.append(words[index:index + word_count])
        index += word_count
    return np.concatenate(kept).astype("<u4").tobytes()


def _enable_include_directive(source: str) -> tuple[str, int | None]:
    """For glslangValidator: enable #include right after #version. Returns the text and the
    1-based line of #version (None when nothing was inserted), to shift error lines back."""
    if not _INCLUDE_LINE.search(source) or "GL_GOOGLE_include_directive" in source:
        return source, None
    lines = source.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if line.lstrip().startswith("#version"):
            lines.insert(index + 1, "#extension GL_GOOGLE_include_directive : require\n")
            return "".join(lines), index + 1
    return source, None


def _validate(validator: Path, spirv_file: Path, target_env: str, shown_as: str) -> None:
    result = subprocess.run([validator, "--target-env", target_env, str(spirv_file)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        output = (result.stderr + result.stdout).strip()
        first = output.splitlines()[0] if output else f"exit status {result.returncode}"
        raise ShaderCompileError(shown_as, None, f"spirv-val ({target_env}): {first}",
                                 compiler_output=output)


# --------------------------------------------------------------------------------------------------
# Error reports


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines()
            if (_GLSLC_ERROR.match(line) or line.startswith("ERROR: "))
            and not _ERROR_SUMMARY.match(line)]


def _parse_first_error(output: str) -> tuple[str | None, int | None, str]:
    """(file, line, message) of the first error in glslc or glslangValidator output."""
    for text in output.splitlines():
        match = _GLSLANG_ERROR.match(text) or _GLSLC_ERROR.match(text)
        if match:
            line = match.group("line")
            return match.group("file"), int(line) if line else None, match.group("message").strip()
    return None, None, output.strip() or "compiler failed without a message"


def _compile_error(output, source_file, shown_as, source, version_line) -> ShaderCompileError:
    file, line, message = _parse_first_error(output)
    if file is None or Path(file) == source_file:  # the error is in the main source
        if line is not None and version_line is not None and line > version_line:
            line -= 1  # undo the line _enable_include_directive inserted
        path, lines = shown_as, source.splitlines()
    else:  # the error is in an include file (or names a file of its own, e.g. the tool itself)
        path = file
        try:
            lines = Path(file).read_text(errors="replace").splitlines()
        except OSError:
            lines = []
    excerpt = _excerpt(lines, line) if line is not None else ""
    return ShaderCompileError(path, line, message, excerpt, output)


def _excerpt(lines: list[str], line: int, context: int = 1) -> str:
    """The 1-based `line` marked with '>', with `context` lines either side."""
    first, last = max(1, line - context), min(len(lines), line + context)
    width = len(str(last))
    return "\n".join(f"{'>' if number == line else ' '} {number:>{width}} | {lines[number - 1]}"
                     for number in range(first, last + 1))


# --------------------------------------------------------------------------------------------------
# YAML variants


_FILE_KEYS = {"parameters", "forall", "variants"}
_VARIANT_KEYS = {"name", "parameters", "forall"}
_VALUE_KEYS = {"value", "suffix"}
_SCALARS = (str, int, float, bool)


def _expand_variants(path: Path) -> dict[str, dict]:
    spec = _load_variant_file(path)
    defaults = spec.get("parameters") or {}
    expanded: dict[str, dict] = {}
    for index, entry in enumerate(spec["variants"]):
        where = f"variants[{index}]"
        base = {**defaults, **(entry.get("parameters") or {})}
        grid = entry["forall"] if "forall" in entry else (spec.get("forall") or {})
        axes = [[(parameter, value, suffix)
                 for value, suffix in _grid_values(path, where, parameter, values)]
                for parameter, values in grid.items()]
        for combination in itertools.product(*axes):
            defines = dict(base)
            suffixes = [entry["name"]]
            for parameter, value, suffix in combination:
                defines[parameter] = value
                if suffix:
                    suffixes.append(suffix)
            variant_name = "_".join(suffixes)
            if not _IDENTIFIER.fullmatch(variant_name):
                _bad(path, where, f"generated name {variant_name!r} is not a C identifier; "
                                  "give the value a suffix: {value: ..., suffix: ...}")
            if variant_name in expanded:
                _bad(path, where, f"variant name {variant_name!r} is generated twice")
            expanded[variant_name] = defines
    return expanded


def _load_variant_file(path: Path) -> dict:
    """Parse and check a variant YAML; returns the body under the top-level key."""
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(document, dict) or len(document) != 1:
        _bad(path, "top level", f"needs exactly one key, the file stem {path.stem!r}")
    (top_key, body), = document.items()
    if top_key != path.stem:
        _bad(path, "top level", f"key {top_key!r} does not match the file stem {path.stem!r}")
    _check_mapping(path, top_key, body, _FILE_KEYS)
    parameters = body.get("parameters") or {}
    _check_parameters(path, "parameters", parameters, declared=None)
    if "forall" in body:
        _check_forall(path, "forall", body["forall"], parameters)
    entries = body.get("variants")
    if not isinstance(entries, list) or not entries:
        _bad(path, "variants", "must be a non-empty list")
    for index, entry in enumerate(entries):
        where = f"variants[{index}]"
        _check_mapping(path, where, entry, _VARIANT_KEYS)
        if not isinstance(entry.get("name"), str) or not _IDENTIFIER.fullmatch(entry["name"]):
            _bad(path, where, "needs a `name` that is a C identifier")
        if "parameters" in entry:
            _check_parameters(path, f"{where}.parameters", entry["parameters"], declared=parameters)
        if "forall" in entry:
            _check_forall(path, f"{where}.forall", entry["forall"], parameters)
    return body


def _check_mapping(path, where, value, allowed: set) -> None:
    if not isinstance(value, dict):
        _bad(path, where, f"must be a mapping, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        _bad(path, where, f"unknown key(s) {', '.join(map(str, unknown))}; allowed: {', '.join(sorted(allowed))}")


def _check_parameters(path, where, parameters, declared) -> None:
    if not isinstance(parameters, dict):
        _bad(path, where, "must be a mapping of NAME: value")
    for name, value in parameters.items():
        if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
            _bad(path, where, f"parameter name {name!r} is not a C identifier")
        if declared is not None and name not in declared:
            _bad(path, where, f"parameter {name!r} is not declared in `parameters`")
        if not isinstance(value, _SCALARS):
            _bad(path, f"{where}.{name}", f"value must be a scalar, got {type(value).__name__}")


def _check_forall(path, where, grid, declared) -> None:
    if not isinstance(grid, dict):
        _bad(path, where, "must be a mapping of NAME: [values]")
    for parameter, values in grid.items():
        if parameter not in declared:
            _bad(path, where, f"parameter {parameter!r} is not declared in `parameters`")
        if not isinstance(values, list) or not values:
            _bad(path, f"{where}.{parameter}", "must be a non-empty list")
        list(_grid_values(path, where, parameter, values))  # checks each item


def _grid_values(path, where, parameter, values):
    """Yield (value, name suffix) for each item of a forall list: scalars or {value, suffix}."""
    for item in values:
        if isinstance(item, dict):
            _check_mapping(path, f"{where}.{parameter}", item, _VALUE_KEYS)
            if not isinstance(item.get("value"), _SCALARS):
                _bad(path, f"{where}.{parameter}", "each {value, suffix} item needs a scalar `value`")
            value = item["value"]
            suffix = str(item["suffix"]) if item.get("suffix") is not None else _suffix_text(value)
        elif isinstance(item, _SCALARS):
            value, suffix = item, _suffix_text(item)
        else:
            _bad(path, f"{where}.{parameter}", f"item {item!r} must be a scalar or {{value, suffix}}")
        yield value, suffix


def _suffix_text(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _bad(path, where, problem):
    raise ValueError(f"{path}: {where}: {problem}")
