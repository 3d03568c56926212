"""Every test's Vulkan instance runs with VK_LAYER_KHRONOS_validation; any message it prints fails the test."""
import os

import pytest

os.environ.setdefault("WORKBENCH_VALIDATION", "1")  # before any instance exists
os.environ.setdefault("MPLBACKEND", "Agg")


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
