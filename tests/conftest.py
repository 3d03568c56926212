"""Every test's Vulkan instance runs with VK_LAYER_KHRONOS_validation; any message it prints fails the test."""
import hashlib
import os
import signal
import subprocess
from pathlib import Path

import pytest

# A shell's background job starts with SIGINT ignored, and an ignored signal stays ignored in every child: the Ctrl-C
# tests (tests/test_reliability.py, test_fanout.py) would see no interrupt at all. Python's own handler back, so
# children start with the default disposition as they do from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

os.environ.setdefault("WORKBENCH_VALIDATION", "1")  # before any instance exists
os.environ.setdefault("MPLBACKEND", "Agg")

REPO = Path(__file__).resolve().parents[1]
COMMITTED = ("data", "notebooks")  # results and notebooks as committed: a test writes into tmp, never here


def committed_state() -> str | None:
    """The state of the committed data/ and notebooks/ (changes against HEAD, byte for byte, and files git does not
    know there), or None without git."""
    if not (REPO / ".git").exists():
        return None
    git = lambda *a: subprocess.run(["git", "-C", str(REPO), *a], capture_output=True)  # noqa: E731
    diff = git("diff", "--binary", "HEAD", "--", *COMMITTED)
    others = git("ls-files", "--others", "--exclude-standard", "--", *COMMITTED)
    if diff.returncode or others.returncode:
        return None
    return hashlib.sha256(diff.stdout + b"\0" + others.stdout).hexdigest() + "\n" + \
        git("status", "--short", "--", *COMMITTED).stdout.decode()


def pytest_sessionstart(session):
    session.config.committed_before = committed_state()


def pytest_sessionfinish(session, exitstatus):
    """The run leaves data/ and notebooks/ as they were (`git diff --quiet -- data notebooks` on a clean tree)."""
    before = getattr(session.config, "committed_before", None)
    after = committed_state()
    if before is not None and after is not None and before != after:
        changed = sorted(set(after.splitlines()[1:]) ^ set(before.splitlines()[1:]))
        session.config.get_terminal_writer().line(
            "tests changed the committed data/ or notebooks/ (a test must write into tmp_path): "
            + (", ".join(changed) or "files already changed before the run changed again"), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def device():
    from workbench import vk
    dev = vk.get_device()  # the same device the ops use
    assert dev.instance.validation or os.environ["WORKBENCH_VALIDATION"] == "0", \
        "tests run with the validation layer (WORKBENCH_VALIDATION=0 turns it off explicitly)"
    yield dev
    dev.close()


@pytest.fixture(autouse=True)
def validation_layer_silent():
    """Every instance of the process, not only the default one: a test that sets WORKBENCH_VALIDATION=0 for its own
    devices still has its messages on the validating instance checked."""
    from workbench import vk
    before = {id(inst): len(inst.messages) for inst in vk.instances()}
    yield
    new = []
    for inst in vk.instances():
        start = before.get(id(inst), 0)
        new += inst.messages[start:]
        del inst.messages[start:]
    if new:
        pytest.fail("validation layer reported:\n" + "\n".join(new), pytrace=False)


@pytest.fixture(scope="session")
def real():
    """ET-VK's templates and codegen from the checkout WORKBENCH_EXECUTORCH names (the families' tests); skips
    without one."""
    checkout = os.environ.get("WORKBENCH_EXECUTORCH")
    if not checkout:
        pytest.skip("WORKBENCH_EXECUTORCH is not set: no ExecuTorch checkout")
    from workbench import etvk
    return etvk.Codegen(etvk.source(checkout))


@pytest.fixture
def dot_device(device):
    """The test device; the test is skipped where it has no int8 dot product (shaderIntegerDotProduct)."""
    if not device.info.features.get("integer_dot_product"):
        pytest.skip(f"{device.info.name} has no shaderIntegerDotProduct")
    return device


@pytest.fixture
def etvk_row(device):
    """``etvk_row(gen, kernel, options, exact=None)``: one ET-VK family dispatched on the test device (not timed),
    its row checked — correct, bit-exact where `exact` (None: on a CPU device, whose driver splits the shaders'
    multiply-adds as the references do; elsewhere a family may allow a fused one), and within rare 1-LSB rounding
    differences of ET-VK's float64 reference where the row has one. Returns the row."""
    from workbench import etvk

    def run(gen, kernel: str, options: dict, exact: bool | None = None) -> dict:
        row = etvk.run(device, gen, kernel, measure=False, **options)
        assert row["correct"], row
        if device.info.is_cpu if exact is None else exact:
            assert row["max_abs_diff"] == 0, row
        if "ref64_mismatch" in row:
            assert row["ref64_mismatch"] < 0.05, row
        return row
    return run


@pytest.fixture(scope="module")
def mesa_build():
    """The offline vendor compilers' cache (Mesa's Turnip / PanVK / RADV): skip with the reason where
    `workbench compilers setup` has not filled it, or fail where WORKBENCH_REQUIRE_MESA=1 asks for it."""
    from workbench.vendors import mesa
    if not mesa.is_set_up():
        reason = (f"the offline vendor compilers are not set up in {mesa.cache_root()} (missing "
                  f"{mesa.status()['missing'][0]}); run `workbench compilers setup`")
        if any(os.environ.get(v, "").strip() in ("1", "true", "yes")
               for v in ("WORKBENCH_REQUIRE_MESA", "WORKBENCH_REQUIRE_ADRENO")):
            pytest.fail(f"WORKBENCH_REQUIRE_MESA=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return mesa.cache_root()
