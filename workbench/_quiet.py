"""Import torchao / ExecuTorch without the noise they print on a CPU-only machine.

On a machine without CUDA, importing torchao prints ``Failed to load …/_C_mxfp8…`` and ``…/_C_cutlass_90a…`` (its
CUDA-only extensions; nothing here uses them) and torch's pytree warns that registering the ``KernelPreference`` enum
as a constant is deprecated (torchao's code, not ours); lowering, torch's pytree warns about ``LeafSpec`` inside
ExecuTorch's program copies.  Only those exact messages are dropped; anything else the
imports print or warn still reaches the user.
"""
from __future__ import annotations

import contextlib
import io
import logging
import re
import sys
import warnings

# The messages that mean nothing here, and only those.
_NOISE = (
    re.compile(r"Failed to load .*torchao/_C_(mxfp8|cutlass_90a)\S*\.so"),
    re.compile(r"KernelPreference'> is an Enum subclass .* register_constant\(\) on Enum subclasses is deprecated"),
    # torch's pytree, raised inside ExecuTorch's lowering when it copies programs (not actionable here)
    re.compile(r"isinstance\(treespec, LeafSpec\)` is deprecated"),
)


def is_noise(message: str) -> bool:
    return any(p.search(message) for p in _NOISE)


class _DropNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not is_noise(record.getMessage())


@contextlib.contextmanager
def quiet_imports():
    """Drop the known import-time noise of torchao / ExecuTorch (log records, warnings, printed lines)."""
    flt = _DropNoise()
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
