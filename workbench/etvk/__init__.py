"""ET-VK's own kernels in the workbench: templates from an ExecuTorch checkout, expanded by ET-VK's codegen,
dispatched with ET-VK's conventions, checked against torch, with statistics and revision diffs."""
from .codegen import (CheckoutError, Codegen, ShaderSource, TemplateCompileError, UnknownKernelError,
                     checkout_path, dialect_source, source)

from .dispatch import Dispatch
from .families import KERNELS
from .run import diff, execute, kernel_names, make, run, stats_rows

__all__ = ["KERNELS", "Dispatch", "diff", "execute", "kernel_names", "make", "run", "stats_rows", "CheckoutError", "Codegen", "ShaderSource", "TemplateCompileError", "UnknownKernelError",
           "checkout_path", "dialect_source", "source"]
