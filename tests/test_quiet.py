"""workbench.quiet drops exactly the known import noise of torchao / ExecuTorch, and nothing else."""
import logging
import sys
import warnings

from workbench.quiet import is_noise, quiet_imports

MXFP8 = "Failed to load /x/site-packages/torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so: Could not load this library"
PYTREE = ("<enum 'KernelPreference'> is an Enum subclass and is now natively supported by torch.compile as an opaque "
          "value type. Calling register_constant() on Enum subclasses is deprecated and will be an error")


def test_only_the_known_messages_are_noise():
    assert is_noise(MXFP8) and is_noise(MXFP8.replace("_C_mxfp8.cpython-310-x86_64-linux-gnu", "_C_cutlass_90a.abi3"))
    assert is_noise(PYTREE)
    assert not is_noise("Failed to load /x/site-packages/torchao/_C_other.so")
    assert not is_noise("RuntimeError: something real")
    # ExecuTorch's own deprecations while lowering, not the same words about something else
    assert is_noise("read_text is deprecated. Use files() instead. Refer to https://importlib-resources…")
    assert is_noise("`torch.jit.script_method` is deprecated. Please switch to `torch.compile` or `torch.export`.")
    assert not is_noise("read_csv is deprecated")


def test_quiet_imports_keeps_everything_else(capsys, caplog):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_imports():
            print(MXFP8)
            print("a real line")
            sys.stderr.write(PYTREE + "\n")
            warnings.warn(PYTREE, UserWarning)
            warnings.warn("a real warning", UserWarning)
            logging.getLogger("torchao").warning(MXFP8)
    out = capsys.readouterr()
    assert out.out == "a real line\n" and out.err == ""
    assert [str(w.message) for w in seen] == ["a real warning"]
    assert MXFP8 not in caplog.text
