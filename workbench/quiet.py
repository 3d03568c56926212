"""Silence the messages a workbench user cannot act on, and only those: process-wide filters (`install`, run when
`workbench` is imported) and quiet imports of torchao / ExecuTorch (`quiet_imports`, `import_quietly`), which also
drop the same lines where those packages print them.

- torch's deprecation of `torch.quantize_per_tensor` & co.: the workbench calls it on purpose, as the reference its
  int8 kernels are checked against;
- torchao's "Failed to load …/_C_mxfp8… / _C_cutlass…" at import: CUDA-only extensions on a CPU build of torch;
- torch's pytree notice that torchao registers its `KernelPreference` enum as a constant (torchao's business).
Every other warning and log record passes through unchanged.
"""
from __future__ import annotations

import contextlib
import io
import logging
import re
import sys
import warnings

QUANTIZED_TENSOR_DEPRECATION = r"torch\.quantize_per_tensor, torch\.quantize_per_channel and other quantized tensor"
_TORCHAO_CUDA_EXTENSIONS = re.compile(r"Failed to load .*_C_(mxfp8|cutlass)")
_PYTREE_ENUM_NOTICE = re.compile(r"KernelPreference.*register_constant\(\) on Enum subclasses is deprecated")
# torch's pytree, raised inside ExecuTorch's lowering when it copies programs (not actionable here)
_PYTREE_LEAFSPEC = re.compile(r"isinstance\(treespec, LeafSpec\)` is deprecated")
# ExecuTorch's lowering reads its own package data through importlib.resources' legacy API and scripts a module
# with torch.jit: deprecations inside executorch, raised while `quiet_imports` is active (never for user code)
_EXECUTORCH_INTERNALS = re.compile(r"(read_text|open_text|read_binary) is deprecated\. Use files\(\) instead|"
                                   r"`torch\.jit\.script_method` is deprecated")
_NOISE = (_TORCHAO_CUDA_EXTENSIONS, _PYTREE_ENUM_NOTICE, _PYTREE_LEAFSPEC, _EXECUTORCH_INTERNALS)


class _DropMatching(logging.Filter):
    def __init__(self, pattern: re.Pattern):
        super().__init__()
        self.pattern = pattern

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.search(record.getMessage())


_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    warnings.filterwarnings("ignore", message=QUANTIZED_TENSOR_DEPRECATION, category=UserWarning)
    logging.getLogger("torchao").addFilter(_DropMatching(_TORCHAO_CUDA_EXTENSIONS))
    logging.getLogger("torch.utils._pytree").addFilter(_DropMatching(_PYTREE_ENUM_NOTICE))


def is_noise(message: str) -> bool:
    return any(p.search(message) for p in _NOISE)


@contextlib.contextmanager
def quiet_imports():
    """Drop the known import-time noise of torchao / ExecuTorch (log records, warnings, printed lines)."""
    flt = _DropMatching(re.compile("|".join(p.pattern for p in _NOISE)))
    loggers = [logging.getLogger(), logging.getLogger("torchao"), logging.getLogger("torch.utils._pytree")]
    for lg in loggers:
        lg.addFilter(flt)
    handlers = list(logging.getLogger().handlers) + list(logging.lastResort and [logging.lastResort] or [])
    for h in handlers:
        h.addFilter(flt)
    out, err = io.StringIO(), io.StringIO()
    try:
        with warnings.catch_warnings(record=True) as caught, \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.simplefilter("default")
            yield
    finally:
        for lg in loggers:
            lg.removeFilter(flt)
        for h in handlers:
            h.removeFilter(flt)
        for stream, text in ((sys.stdout, out.getvalue()), (sys.stderr, err.getvalue())):
            kept = [ln for ln in text.splitlines(keepends=True) if not is_noise(ln)]
            if kept:
                stream.write("".join(kept))
        for w in caught:
            if not is_noise(str(w.message)):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


_modules: dict = {}


def import_quietly(name: str):
    """``importlib.import_module(name)`` inside :func:`quiet_imports` (cached)."""
    if name not in _modules:
        import importlib
        with quiet_imports():
            _modules[name] = importlib.import_module(name)
    return _modules[name]


def torchao_quant_primitives():
    """``torchao.quantization.quant_primitives``, imported quietly."""
    return import_quietly("torchao.quantization.quant_primitives")
