"""Real JupyterLab in headless Chromium (playwright-python, Debian's /usr/bin/chromium).

Fixtures:
* ``lab``     (session) JupyterLab on a free 127.0.0.1 port, serving COPIES of notebooks/ from a temporary root
              (parameters cells untouched, so ``FULL = False``), with its own settings dir (kernels start with the
              notebook, no news / update checks, no autosave, every cell rendered), its own config / data / runtime /
              workspace dirs, and ``WORKBENCH_RESULTS_DIR`` in a temporary folder.  Stopped at the end by its PID;
              kernels it started that outlive it are killed by PID.
* ``browser`` (session) headless Chromium.   * ``page`` one fresh browser context per test.
* ``artifacts`` test-artifacts/browser/ (screenshots).

Helpers on ``lab`` (a :class:`Lab`) open a notebook, Run All Cells from the menu bar, wait for the kernel, and
fingerprint images by their pixels.  Every wait has a deadline; a test that runs past ``TEST_DEADLINE_S`` is
interrupted.  A missing Chromium fails (``apt-get install chromium``): it never skips.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from workbench import notebook as nb

CHROMIUM = os.environ.get("WORKBENCH_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
ARTIFACTS = nb.REPO / "test-artifacts" / "browser"
SERVER_START_S = 90
TEST_DEADLINE_S = 150
VALIDATION_LOG = ARTIFACTS / "validation.log"  # what the validation layer said in the lab's kernels

SETTINGS = {  # JUPYTERLAB_SETTINGS_DIR/<extension>/<plugin>.jupyterlab-settings
    "@jupyterlab/notebook-extension/tracker": {"autoStartDefaultKernel": True, "windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
}


# ---------------------------------------------------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children() -> dict[int, list[int]]:
    """ppid → child pids, from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def _start_time(pid: int):
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def _descendants(pid: int) -> dict[int, str]:
    """Every process below `pid`, with its start time (to recognise it later)."""
    tree, found, todo = _children(), {}, [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found[child] = _start_time(child)
            todo.append(child)
    return found


class Lab:
    """A running JupyterLab: URLs, its REST API, and the browser-side steps the tests share."""

    def __init__(self, root: Path, port: int, token: str, proc: subprocess.Popen, log: Path):
        self.root, self.port, self.token, self.proc, self.log = root, port, token, proc, log
        self.base = f"http://127.0.0.1:{port}"

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}?token={self.token}"

    def api(self, method: str, path: str, timeout: float = 5.0):
        request = urllib.request.Request(self.base + path, method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no server log)"

    # -- kernels -------------------------------------------------------------------------------------------------
    def session(self, name: str):
        return next((s for s in self.api("GET", "/api/sessions") if s.get("path") == name), None)

    def wait_kernel_idle(self, name: str, timeout: float = 60.0, settle: float = 0.3) -> dict:
        """Until the kernel of notebook `name` exists, has a browser connection and is idle twice, `settle` s
        apart.  HTTP errors count as "not ready yet" (jupyter_server answers 500 while a kernel starts)."""
        deadline = time.monotonic() + timeout
        last, idle_since = None, None
        while time.monotonic() < deadline:
            try:
                session = self.session(name)
                kernel = session and session.get("kernel") and \
                    self.api("GET", f"/api/kernels/{session['kernel']['id']}")
                last = kernel
                ready = bool(kernel) and kernel["execution_state"] == "idle" and kernel.get("connections", 0) > 0
            except (OSError, ValueError, KeyError) as exc:  # urllib's HTTPError / URLError are OSErrors
                last, ready = repr(exc), False
            if ready:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since >= settle:
                    return kernel
            else:
                idle_since = None
            time.sleep(0.1)
        raise TimeoutError(f"kernel of {name} not idle with a connection after {timeout:.0f} s (last: {last})\n"
                           f"server log:\n{self.log_tail()}")

    def shutdown_sessions(self):
        try:
            for session in self.api("GET", "/api/sessions"):
                self.api("DELETE", f"/api/sessions/{session['id']}", timeout=20)
        except OSError:
            pass

    # -- the page ------------------------------------------------------------------------------------------------
    def open(self, page, name: str):
        """Open notebook `name` and wait until its kernel is ready (runs clicked earlier are silently dropped)."""
        # a workspace of its own, reset: nothing an earlier test opened is restored beside it
        workspace = re.sub(r"\W", "-", Path(name).stem) + "-" + secrets.token_hex(4)
        page.goto(self.url(f"lab/workspaces/{workspace}/tree/{name}") + "&reset", wait_until="domcontentloaded")
        page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(state="visible")
        self.wait_kernel_idle(name, timeout=90)

    def run_all(self, page, name: str, timeout: float = 100.0):
        """Run › Run All Cells from the menu bar, then wait until every non-empty code cell has an execution
        count and the kernel is idle; a cell that raised fails with its error text."""
        page.locator(".lm-MenuBar-item", has=page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$"))
                     ).click()
        page.locator(".lm-Menu-item", has=page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$"))
                     ).click()
        deadline = time.monotonic() + timeout
        prompts = []
        while time.monotonic() < deadline:
            prompts = page.evaluate("""() => Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell'))
                .map(c => [c.querySelector('.jp-InputPrompt')?.textContent.trim() ?? '',
                           (c.querySelector('.cm-content')?.textContent ?? '').trim() === '',
                           Array.from(c.querySelectorAll('.jp-OutputArea-output'))
                                .filter(o => o.dataset.mimeType === 'application/vnd.jupyter.stderr')
                                .map(o => o.textContent).join('\\n')])""")
            errors = [(i, err) for i, (_, _, err) in enumerate(prompts) if "Traceback" in err]
            if errors:
                raise AssertionError(f"{name}: code cell {errors[0][0]} failed:\n{errors[0][1][-3000:]}")
            if prompts and all(re.fullmatch(r"\[\d+\]:", p) or empty for p, empty, _ in prompts):
                break
            time.sleep(0.25)
        else:
            raise TimeoutError(f"{name}: Run All did not finish in {timeout:.0f} s; "
                               f"prompts {[p for p, _, _ in prompts]}")
        self.wait_kernel_idle(name, timeout=max(5.0, deadline - time.monotonic()))

    @staticmethod
    def image_hash(img) -> str:
        """sha256 of an <img>'s pixels (drawn on a canvas: works for data: and blob: sources alike)."""
        url = img.evaluate("""async (img) => {
            if (!img.complete || !img.naturalWidth) { try { await img.decode(); } catch (e) { return ''; } }
            const c = document.createElement('canvas');
            c.width = img.naturalWidth; c.height = img.naturalHeight;
            c.getContext('2d').drawImage(img, 0, 0);
            return c.toDataURL('image/png');
        }""")
        assert url.startswith("data:image/png;base64,"), f"image not loaded (src {img.get_attribute('src')!r:.80})"
        return hashlib.sha256(base64.b64decode(url.split(",", 1)[1])).hexdigest()[:16]

    def wait_image_change(self, img, before: str, timeout: float = 30.0) -> str:
        """Until the <img> shows other pixels than `before`, and the same pixels twice 0.3 s apart."""
        deadline = time.monotonic() + timeout
        previous = None
        while time.monotonic() < deadline:
            current = self.image_hash(img)
            if current != before and current == previous:
                return current
            previous = current
            time.sleep(0.3)
        raise TimeoutError(f"the picture did not change within {timeout:.0f} s (still {previous})")

    @staticmethod
    def screenshot(page, target, path: Path):
        """Scroll `target` into view (JupyterLab scrolls inside its own panel), then shoot the page."""
        target.scroll_into_view_if_needed()
        page.wait_for_timeout(200)
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path))
        return path


# ---------------------------------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def chromium() -> str:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(f"Chromium not found at {CHROMIUM}: the browser tests need Debian's chromium. Install it with "
                    f"`apt-get install -y chromium` (./setup.sh test does), or point WORKBENCH_CHROMIUM at one. "
                    f"Never `playwright install`.", pytrace=False)
    return CHROMIUM


@pytest.fixture(scope="session")
def lab(tmp_path_factory, chromium):  # no server when there is no browser to drive it
    base = tmp_path_factory.mktemp("lab")
    VALIDATION_LOG.parent.mkdir(parents=True, exist_ok=True)
    VALIDATION_LOG.unlink(missing_ok=True)
    root = base / "root"
    shutil.copytree(nb.NOTEBOOK_DIR, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    settings = base / "settings"
    for plugin, values in SETTINGS.items():
        path = settings / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # the test suite's Agg would hide figures: kernels get the inline backend
    env.update(JUPYTERLAB_SETTINGS_DIR=str(settings), JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
               JUPYTER_CONFIG_DIR=str(base / "config"), JUPYTER_DATA_DIR=str(base / "data"),
               JUPYTER_RUNTIME_DIR=str(base / "runtime"), WORKBENCH_RESULTS_DIR=str(base / "results"),
               PYTHONUNBUFFERED="1", WORKBENCH_VALIDATION="1",  # kernels run with the layer on, as the suite does
               WORKBENCH_VALIDATION_LOG=str(VALIDATION_LOG))    # …and write what it says where tests read it
    port, token = _free_port(), secrets.token_hex(16)
    log = base / "server.log"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root}", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    server = Lab(root, port, token, proc, log)
    known: dict[int, str] = {}
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with {proc.returncode}:\n{server.log_tail()}", pytrace=False)
            try:
                server.api("GET", "/api/status", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab not answering on port {port} after {SERVER_START_S} s:\n"
                                f"{server.log_tail()}", pytrace=False)
                time.sleep(0.2)
        yield server
    finally:
        if proc.poll() is None:
            server.shutdown_sessions()
            known = _descendants(proc.pid)
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for pid, started in known.items():  # kernels live in their own sessions: end any that outlived the server
            if _start_time(pid) == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture(scope="session")
def browser(chromium):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture
def page(browser, lab):
    context = browser.new_context(viewport={"width": 1400, "height": 1500})
    context.set_default_timeout(60_000)
    page = context.new_page()
    seen = VALIDATION_LOG.stat().st_size if VALIDATION_LOG.exists() else 0
    try:
        yield page
    finally:
        context.close()
        lab.shutdown_sessions()  # free this test's kernel
    said = VALIDATION_LOG.read_text(errors="replace")[seen:] if VALIDATION_LOG.exists() else ""
    if said:
        pytest.fail("validation layer reported in the lab's kernel:\n" + said[-4000:], pytrace=False)


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(autouse=True)
def deadline():
    """Interrupt a browser test that runs past TEST_DEADLINE_S (every wait has its own, shorter timeout)."""
    def expired(signum, frame):
        raise TimeoutError(f"browser test still running after {TEST_DEADLINE_S} s")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(TEST_DEADLINE_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
