"""Silence the messages a workbench user cannot act on, and only those (installed when `workbench` is imported).

- torch's deprecation of `torch.quantize_per_tensor` & co.: the workbench calls it on purpose, as the reference its
  int8 kernels are checked against;
- torchao's "Failed to load …/_C_mxfp8… / _C_cutlass…" at import: CUDA-only extensions on a CPU build of torch;
- torch's pytree notice that torchao registers its `KernelPreference` enum as a constant (torchao's business).
Every other warning and log record passes through unchanged.
"""
from __future__ import annotations

import logging
import re
import warnings

QUANTIZED_TENSOR_DEPRECATION = r"torch\.quantize_per_tensor, torch\.quantize_per_channel and other quantized tensor"
_TORCHAO_CUDA_EXTENSIONS = re.compile(r"Failed to load .*_C_(mxfp8|cutlass)")
_PYTREE_ENUM_NOTICE = re.compile(r"KernelPreference.*register_constant\(\) on Enum subclasses is deprecated")


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
