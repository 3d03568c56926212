"""Build tools from Debian 13's source packages into a cache folder: the machinery the workbench's builders share.

    from workbench.toolchain import debian_source as ds

    class MySetupError(ds.SetupError):
        label = "my setup"                                   # messages: "my setup: <step>: ..."

    with ds.setup_session(root, steps=3, error=MySetupError, what="my setup", echo=echo) as steps:
        with steps.step("prerequisites", "Debian build prerequisites") as log:     # logs/1-prerequisites.log
            ds.install_prerequisites(("g++", "cmake"), log, True, echo, error=MySetupError)
        with steps.step("sources", "source packages from Debian 13") as log, \
                ds.AptSources("mine", ds.DEBIAN_MIRROR, log, step="fetch sources", error=MySetupError) as apt:
            entry = apt.newest("shaderc", "2025.2")           # {"version", "directory", "files": [(sha, size, name)]}
            orig = apt.download(entry, entry["files"][0], root / "downloads")   # the signed index's SHA-256, checked
        with steps.step("build", "unpack, patch, build") as log:
            tree = ds.unpack_upstream(orig, root / "src" / "shaderc", log, error=MySetupError)
            ds.run_logged("build", ["cmake", "-S", tree, "-B", root / "build"], log, error=MySetupError)
        ds.write_stamp(root / ds.STAMP_NAME, {"recipe": ds.recipe_id(RECIPE), ...})

Two builders use it, each keeping its own recipe (packages, build options, what it keeps) in its own module:
``workbench.vendors.mesa`` (Mesa's Turnip, PanVK and RADV + the no-op drm-shims, through ``apt-get source``) and
``workbench.toolchain.glslang`` (glslc / glslang / SPIRV-Tools, through ``apt-helper`` downloads and Debian's
patches applied here).

What it provides
    * set-up errors that name the step, the full log and its last lines (:class:`SetupError`; each builder
      subclasses it with its own label, e.g. ``"compilers setup"``);
    * the cache folder (:func:`cache_dir`), the stamp (``setup.json``: :func:`recipe_id`, :func:`read_stamp`,
      :func:`stamp_missing`, :func:`write_stamp`) and the lock (:func:`lock`), with
      :func:`setup_session` putting the lock, a fresh ``logs/`` and the numbered :class:`Steps` together;
    * commands run with everything they print in a log file (:func:`run_logged`) and ninja's progress
      (:func:`ninja_progress`); a build folder configured once (:func:`configure_once`), its products copied out
      (:func:`copy_products`), the build's environment (:func:`clean_env`), sizes (:func:`dir_bytes`) and the
      closing stamp and message (:func:`finish_stamp`, :func:`done_message`);
    * Debian prerequisites installed where missing (:func:`install_prerequisites`);
    * Debian 13's deb-src in a temporary apt configuration, the system's sources untouched (:class:`AptSources`,
      :func:`sources_text`, :func:`apt_options`): ``apt-get update`` checks the index against Debian's archive key,
      ``apt-cache showsrc`` finds the newest revision of a pinned upstream version (:func:`parse_showsrc`), and
      ``apt-helper`` downloads a file against the index's SHA-256 (:func:`verify_sha256` checks it again);
    * a source package unpacked: the upstream tarball's one top folder, Debian's tarball over it, Debian's patch
      series applied bar the ones a builder skips (:func:`unpack_upstream`, :func:`apply_debian_patches`).

It imports nothing of the workbench.
"""
from __future__ import annotations

import collections
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

__all__ = [
    "DEBIAN_SUITES", "DEBIAN_MIRROR", "DEBIAN_KEYRING", "APT_HELPER", "STAMP_NAME",
    "SetupError", "Steps", "cache_dir", "recipe_id", "read_stamp", "stamp_missing", "write_stamp", "finish_stamp",
    "done_message", "lock", "setup_session", "configure_once", "copy_products", "clean_env", "dir_bytes", "run_logged",
    "ninja_progress", "missing_apt_packages", "as_root", "install_prerequisites", "sources_text", "apt_options",
    "AptSources", "upstream", "newer", "newest", "parse_showsrc", "sha256_file", "verify_sha256",
    "unpack_upstream", "apply_debian_patches",
]

DEBIAN_SUITES = ("trixie", "trixie-updates")   # Debian 13 (mesa 25.0.7-2+deb13u1, shaderc 2025.2-1, ...)
DEBIAN_MIRROR = "http://deb.debian.org/debian"  # each builder has its own $WORKBENCH_*_MIRROR override
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
APT_HELPER = "/usr/lib/apt/apt-helper"
STAMP_NAME = "setup.json"
TAIL_LINES = 40  # lines of a failed command's log quoted in the error


# ----------------------------------------------------------------------------------------------------------------
# Errors and steps
# ----------------------------------------------------------------------------------------------------------------

class SetupError(RuntimeError):
    """A set-up step failed; the message names the step, its full log and the log's last lines.

    Builders subclass it with their own `label` (the message's first words) and their own error base class:
    ``class MesaSetupError(MesaError, SetupError): label = "compilers setup"``."""

    label = "setup"

    def __init__(self, step: str, message: str, log_path: Path | None = None, tail: str = ""):
        self.step, self.log_path, self.tail = step, log_path, tail
        text = f"{self.label}: {step}: {message}"
        if log_path is not None:
            text += f"\nfull log: {log_path}"
        if tail:
            text += "\n--- last lines of the log ---\n" + tail
        super().__init__(text)


class Steps:
    """Numbered step headers ("[compilers setup 2/7] title"), elapsed times, one log file per step."""

    def __init__(self, total: int, logs: Path, echo, label: str = SetupError.label):
        self.total, self.logs, self.echo, self.label, self.index = total, logs, echo, label, 0
        self.times: dict[str, float] = {}

    @contextlib.contextmanager
    def step(self, key: str, title: str):
        """Announce step `key`; yields its log file (logs/<n>-<key>.log); records its time in `times[key]`."""
        self.index += 1
        self.echo(f"[{self.label} {self.index}/{self.total}] {title}")
        start = time.monotonic()
        yield self.logs / f"{self.index}-{key}.log"
        self.times[key] = round(time.monotonic() - start, 1)
        self.echo(f"    done in {self.times[key]:.0f} s")


def run_logged(step: str, command: list, log_path: Path, *, error: type[SetupError] = SetupError, cwd=None,
               env=None, on_line=None, what: str | None = None) -> None:
    """Run `command`, everything it prints going to `log_path` (appended, after a "$ command" line, ending with
    "[exit status N]"); `on_line` sees every line. Raises `error` (step, message, log, last lines) when the command
    cannot start or fails; `what` names it in the message (default: the program)."""
    command = [str(c) for c in command]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    last = collections.deque(maxlen=TAIL_LINES)
    with open(log_path, "a") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        try:
            proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, text=True, errors="replace", bufsize=1)
        except FileNotFoundError as exc:
            raise error(step, f"cannot run {command[0]!r}: {exc}", log_path) from None
        for line in proc.stdout:
            log.write(line)
            last.append(line.rstrip("\n"))
            if on_line is not None:
                on_line(line)
        rc = proc.wait()
        log.write(f"[exit status {rc}]\n")
    if rc != 0:
        raise error(step, f"{what or command[0]} failed with exit status {rc}", log_path, "\n".join(last))


def ninja_progress(echo, *, every: int = 10, detail: bool = False, bar: bool = False):
    """A `run_logged` line handler for ninja's "[i/n]" lines: a line through `echo` every `every` % (with the
    step's text when `detail`), or with `bar` in a terminal or notebook a tqdm bar. Call its `close()` after."""
    pattern = re.compile(r"^\[(\d+)/(\d+)\]")
    state = {"bar": None, "shown": -1}
    interactive = bar and (sys.stderr.isatty() or "ipykernel" in sys.modules)

    def on_line(line: str):
        m = pattern.match(line)
        if not m:
            return
        done, total = int(m.group(1)), int(m.group(2))
        if interactive:
            if state["bar"] is None:
                from tqdm.auto import tqdm
                state["bar"] = tqdm(total=total, desc="ninja", unit="step")
            progress = state["bar"]
            progress.total = total
            progress.update(done - progress.n)
            return
        percent = 100 * done // max(total, 1)
        if percent // every > state["shown"] // every or done == total:
            state["shown"] = percent
            echo(f"    ninja [{done}/{total}] {percent}%" + (f"  {line[m.end():].strip()[:90]}" if detail else ""))

    def close():
        if state["bar"] is not None:
            state["bar"].close()

    on_line.close = close
    return on_line


# ----------------------------------------------------------------------------------------------------------------
# The cache folder: where, the stamp, the lock
# ----------------------------------------------------------------------------------------------------------------

def cache_dir(root, env_var: str, default: Path) -> Path:
    """`root`, else $`env_var`, else `default` (`root` and the variable are expanded and resolved)."""
    if root is not None:
        return Path(root).expanduser().resolve()
    configured = os.environ.get(env_var)
    if configured:
        return Path(configured).expanduser().resolve()
    return default


def recipe_id(recipe: dict) -> str:
    """16 hex digits naming a build recipe: a stamp of another recipe is not a complete build of this one."""
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def read_stamp(path: Path) -> dict | None:
    """The stamp's JSON; None when it is absent or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def stamp_missing(path: Path, recipe: str) -> list[str]:
    """[] when the stamp at `path` is of `recipe`; else what is wrong, as the entry of a `missing` list."""
    stamp = read_stamp(path)
    if stamp is None:
        return [str(path)]
    if stamp.get("recipe") != recipe:
        return [f"{path} (from another build recipe: {stamp.get('recipe')} != {recipe})"]
    return []


def write_stamp(path: Path, stamp: dict) -> None:
    Path(path).write_text(json.dumps(stamp, indent=2) + "\n")


def finish_stamp(stamp: dict, path: Path, root: Path, *, started: float, keep_build: bool,
                 step_seconds: dict) -> dict:
    """Complete the stamp once the build folders are gone (step_seconds, total_seconds, kept_build, cache_bytes)
    and write it."""
    stamp["step_seconds"] = dict(step_seconds)
    stamp["total_seconds"] = round(time.monotonic() - started, 1)
    stamp["kept_build"] = keep_build
    stamp["cache_bytes"] = dir_bytes(root)
    write_stamp(path, stamp)
    return stamp


def done_message(label: str, stamp: dict, root: Path) -> str:
    """"<label>: done in 5.2 min; cache 11 MiB in <root>", from a finished stamp."""
    return (f"{label}: done in {stamp['total_seconds'] / 60:.1f} min; cache {stamp['cache_bytes'] / 2**20:.0f} "
            f"MiB in {root}")


@contextlib.contextmanager
def lock(root: Path, *, error: type[SetupError] = SetupError, what: str = "setup"):
    """Hold <root>/.setup.lock; `error` ("lock", "another <what> is running on <root>") when another process does."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".setup.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise error("lock", f"another {what} is running on {root}") from None
        yield


@contextlib.contextmanager
def setup_session(root: Path, *, steps: int, error: type[SetupError], what: str, echo, stamp_name=STAMP_NAME):
    """A set-up's frame: the lock, a fresh <root>/logs/, no stamp (a failed set-up is never taken for a complete
    one); yields the `Steps` (labelled with `error.label`)."""
    with lock(root, error=error, what=what):
        logs = root / "logs"
        shutil.rmtree(logs, ignore_errors=True)
        logs.mkdir(parents=True)
        (root / stamp_name).unlink(missing_ok=True)
        yield Steps(steps, logs, echo, error.label)


def configure_once(build: Path, marker: str, wanted: list, configure, *, force: bool, echo) -> None:
    """Run `configure()` into a fresh `build` folder unless it was configured with `wanted` (kept in build/`marker`)
    already; a different `wanted`, or `force`, starts over."""
    marker_path, text = build / marker, json.dumps(wanted)
    if build.exists() and (force or not marker_path.is_file() or marker_path.read_text() != text):
        shutil.rmtree(build)
    if not build.exists():
        configure()
        marker_path.write_text(text)
    else:
        echo("    reusing the configured build directory")


def copy_products(build: Path, dest: Path, products, log_path: Path, *, error: type[SetupError] = SetupError,
                  step: str = "install") -> list[Path]:
    """Copy each (path in `build`, name) of `products` into a fresh `dest`; `error` when ninja left one out."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir()
    copied = []
    for built_path, name in products:
        built = build / built_path
        if not built.is_file():
            raise error(step, f"ninja finished but {built} is missing", log_path)
        shutil.copy2(built, dest / name)
        copied.append(dest / name)
    return copied


def clean_env(**settings) -> dict:
    """os.environ for a build command: no PYTHONPATH / PYTHONHOME (the build's Python scripts must not see the
    caller's), plus `settings`."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME"):
        env.pop(name, None)
    env.update(settings)
    return env


def dir_bytes(path: Path) -> int:
    """Bytes of the files below `path` (links not followed nor counted); 0 when it is absent."""
    total = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            p = Path(dirpath) / name
            if not p.is_symlink():
                total += p.stat().st_size
    return total


# ----------------------------------------------------------------------------------------------------------------
# Debian build prerequisites
# ----------------------------------------------------------------------------------------------------------------

def missing_apt_packages(packages) -> list[str]:
    """The `packages` dpkg does not report installed (all of them without dpkg-query)."""
    if shutil.which("dpkg-query") is None:
        return list(packages)
    missing = []
    for package in packages:
        result = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
        if "install ok installed" not in result.stdout:
            missing.append(package)
    return missing


def as_root() -> list[str] | None:
    """The prefix that runs a command as root: [] when root already, ["sudo", "-n"] when that works, else None."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    return None


def install_prerequisites(packages, log_path: Path, install: bool, echo, *, error: type[SetupError] = SetupError,
                          missing=missing_apt_packages, step: str = "prerequisites") -> None:
    """apt-get install those of `packages` that `missing(packages)` lists, when `install` and root (or sudo -n)
    allow it; otherwise `error` naming them and the command that installs them."""
    absent = missing(packages)
    if not absent:
        echo("    all present: " + " ".join(packages))
        return
    command = ["apt-get", "install", "-y", "--no-install-recommends", *absent]
    root = as_root()
    if not install or root is None:
        why = "installing them was switched off" if not install else "installing needs root (or sudo -n)"
        raise error(step, f"missing Debian packages: {' '.join(absent)} ({why}). "
                          f"Install them: sudo {' '.join(command)}")
    echo(f"    installing {' '.join(absent)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run_logged(step, root + ["apt-get", "update", "-q"], log_path, error=error, env=env, what="apt-get update")
    run_logged(step, root + command, log_path, error=error, env=env, what="apt-get install")
    still = missing(packages)
    if still:
        raise error(step, f"still missing after apt-get install: {' '.join(still)}", log_path)


# ----------------------------------------------------------------------------------------------------------------
# Debian 13's source index, in a temporary apt configuration
# ----------------------------------------------------------------------------------------------------------------

def sources_text(mirror: str = DEBIAN_MIRROR, suites=DEBIAN_SUITES, keyring: str | None = DEBIAN_KEYRING,
                 types: str = "deb-src") -> str:
    """A deb822 .sources stanza for the `types` ("deb-src", or "deb" for binary packages) of `suites` (main) on
    `mirror`, Signed-By `keyring` when that file exists (else apt checks against its trusted keys)."""
    signed = f"Signed-By: {keyring}\n" if keyring and Path(keyring).is_file() else ""
    return f"Types: {types}\nURIs: {mirror}\nSuites: {' '.join(suites)}\nComponents: main\n{signed}"


def apt_options(apt_dir: Path) -> list[str]:
    """apt options that read only our deb-src list and keep every list and cache inside `apt_dir`."""
    options = {
        "Dir::Etc::SourceList": "/dev/null",
        "Dir::Etc::SourceParts": str(apt_dir / "sources"),
        "Dir::State::Lists": str(apt_dir / "lists"),
        "Dir::Cache": str(apt_dir / "cache"),
        "Dir::Cache::archives": str(apt_dir / "cache" / "archives"),
        "Acquire::Languages": "none",
        "APT::Get::Only-Source": "true",
    }
    if os.geteuid() == 0:
        options["APT::Sandbox::User"] = "root"  # _apt cannot enter a private temp dir
    else:
        options["Debug::NoLocking"] = "true"
    return [arg for key, value in options.items() for arg in ("-o", f"{key}={value}")]


class AptSources:
    """``with AptSources(name, mirror, log, ...) as apt:`` a temporary apt configuration listing only the deb-src of
    Debian 13 on `mirror` (the system's sources are not touched), its index fetched by ``apt-get update`` (checked
    against Debian's archive key). `apt.options` are the apt options that use it; `apt.showsrc`, `apt.newest`
    query it; `apt.download` fetches a file it lists. Errors are `error` for step `step`, logged in `log_path`."""

    def __init__(self, name: str, mirror: str, log_path: Path, *, step: str, error: type[SetupError] = SetupError,
                 echo=lambda text: None, suites=DEBIAN_SUITES, keyring: str | None = DEBIAN_KEYRING,
                 types: str = "deb-src"):
        self.types = types
        self.name, self.mirror, self.log_path, self.step, self.error, self.echo = name, mirror, log_path, step, \
            error, echo
        self.suites, self.keyring = tuple(suites), keyring
        self.options: list[str] = []
        self._tmp: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> AptSources:
        self._tmp = tempfile.TemporaryDirectory(prefix=f"workbench-{self.name}-apt-")
        try:
            apt_dir = Path(self._tmp.name)
            for sub in ("sources", "lists/partial", "cache/archives/partial"):
                (apt_dir / sub).mkdir(parents=True, exist_ok=True)
            (apt_dir / "sources" / f"workbench-{self.name}-src.sources").write_text(
                sources_text(self.mirror, self.suites, self.keyring, self.types))
            self.options = apt_options(apt_dir)
            self.echo(f"    apt-get update ({self.types} {self.mirror} {' '.join(self.suites)}, temporary apt "
                      "configuration)")
            self.run(["apt-get", *self.options, "update", "-q"], what="apt-get update")
        except BaseException:
            self._tmp.cleanup()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self._tmp.cleanup()

    def run(self, command: list, **kwargs) -> None:
        """`run_logged` in this step's log, with this step's error."""
        run_logged(self.step, command, self.log_path, error=self.error, **kwargs)

    def showsrc(self, package: str) -> subprocess.CompletedProcess:
        """``apt-cache showsrc package`` on the temporary index; its Version lines go into the log."""
        result = subprocess.run(["apt-cache", *self.options, "showsrc", package], capture_output=True, text=True)
        with open(self.log_path, "a") as log:
            log.write(f"$ apt-cache showsrc {package} (Version lines)\n" + "\n".join(
                l for l in result.stdout.splitlines() if l.startswith("Version:")) + "\n")
        return result

    def no_source(self, package: str, version: str, showsrc: subprocess.CompletedProcess) -> SetupError:
        """The error for "no `package` `version`-* in the index", with the versions it does list."""
        listed = re.findall(r"^Version:\s*(\S+)", showsrc.stdout, flags=re.MULTILINE)
        return self.error(self.step, f"no {package} {version}-* source package in {self.mirror} "
                                     f"{' '.join(self.suites)} (listed: {', '.join(listed) or 'none'}; "
                                     f"{showsrc.stderr.strip()})", self.log_path)

    def newest(self, package: str, version: str) -> dict:
        """The index's newest Debian revision of upstream `version` of `package` (see `parse_showsrc`)."""
        showsrc = self.showsrc(package)
        entry = parse_showsrc(showsrc.stdout, package, version)
        if entry is None:
            raise self.no_source(package, version, showsrc)
        return entry

    def download(self, entry: dict, file: tuple, downloads: Path) -> Path:
        """One (sha256, size, name) of `entry["files"]` into `downloads`, by apt's own ``apt-helper`` (apt's
        configuration, proxies included) against the SHA-256 of the index that ``apt-get update`` verified; a file
        already there with that SHA-256 is kept. Checked again after (`verify_sha256`)."""
        sha, size, name = file
        downloads.mkdir(parents=True, exist_ok=True)
        target = downloads / name
        if not (target.is_file() and sha256_file(target) == sha):
            url = f"{self.mirror}/{entry['directory']}/{urllib.parse.quote(name, safe='~')}"
            self.echo(f"    {name} ({size / 2**20:.1f} MiB)")
            self.run([APT_HELPER, *self.options, "download-file", url, target, f"SHA256:{sha}"],
                     what=f"download of {name}")
        verify_sha256(target, sha, step=self.step, error=self.error, log_path=self.log_path)
        return target


    def download_binary(self, package: str, version: str, downloads: Path) -> Path:
        """The binary package `package` of upstream `version` (any Debian revision; with ``types="deb"``) into
        `downloads` by ``apt-get download`` (apt checks it against the signed index); the .deb's path."""
        downloads.mkdir(parents=True, exist_ok=True)
        listed = subprocess.run(["apt-cache", *self.options, "madison", package], capture_output=True, text=True)
        versions = [v.strip() for _, v, *_ in (line.split("|") for line in listed.stdout.splitlines() if "|" in line)]
        wanted = [v for v in versions if upstream(v) == version]
        if not wanted:
            raise self.error(self.step, f"no {package} {version}-* binary package in {self.mirror} "
                                        f"{' '.join(self.suites)} (listed: {', '.join(versions) or 'none'})",
                             self.log_path)
        found = sorted(downloads.glob(f"{package}_*.deb"))
        if not found:
            self.echo(f"    {package} {wanted[0]}")
            self.run(["apt-get", *self.options, "download", f"{package}={wanted[0]}"], cwd=downloads,
                     what=f"download of {package}")
            found = sorted(downloads.glob(f"{package}_*.deb"))
        if not found:
            raise self.error(self.step, f"apt-get download {package}={wanted[0]} left no .deb in {downloads}",
                             self.log_path)
        return found[-1]


def upstream(version: str) -> str:
    """'1:2025.1~rc1-1' -> '2025.1~rc1' (no epoch, no Debian revision)."""
    version = version.split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


def newer(a: str, b: str) -> bool:
    """Is Debian version `a` newer than `b` (dpkg --compare-versions)?"""
    return subprocess.run(["dpkg", "--compare-versions", a, "gt", b]).returncode == 0


def newest(versions) -> str | None:
    """The newest of the Debian `versions`; None when there are none."""
    best = None
    for version in sorted(set(versions)):
        if best is None or newer(version, best):
            best = version
    return best


def parse_showsrc(showsrc: str, package: str, upstream_version: str) -> dict | None:
    """The newest stanza of `apt-cache showsrc` output for `package` at `upstream_version`:
    {"version", "directory", "files": [(sha256, size, name), ...]}; None when none matches."""
    best = None
    for block in re.split(r"\n\s*\n", showsrc):
        fields, key = {}, None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if fields.get("Package") != package or "Version" not in fields:
            continue
        if upstream(fields["Version"]) != upstream_version:
            continue
        files = []
        for line in fields.get("Checksums-Sha256", "").splitlines():
            parts = line.split()
            if len(parts) == 3:
                files.append((parts[0].lower(), int(parts[1]), parts[2]))
        entry = {"version": fields["Version"], "directory": fields.get("Directory", ""), "files": files}
        if best is None or newer(entry["version"], best["version"]):
            best = entry
    return best


# ----------------------------------------------------------------------------------------------------------------
# Source files: checked, unpacked, patched
# ----------------------------------------------------------------------------------------------------------------

def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(path: Path, expected: str, *, step: str = "fetch sources", error: type[SetupError] = SetupError,
                  log_path: Path | None = None) -> None:
    """`error` naming the file and both hashes unless `path`'s SHA-256 is `expected`."""
    got = sha256_file(path) if Path(path).is_file() else "no file"
    if got != expected.lower():
        raise error(step, f"{Path(path).name}: SHA-256 mismatch after download (expected {expected.lower()}, got "
                          f"{got}; file {path})", log_path)


def unpack_upstream(archive: Path, tree: Path, log_path: Path, *, error: type[SetupError] = SetupError,
                    step: str = "unpack") -> Path:
    """Unpack the tarball `archive`, whose one top folder becomes `tree` (replacing what was there)."""
    archive = Path(archive)
    shutil.rmtree(tree, ignore_errors=True)
    staging = tree.parent / f".{tree.name}.unpack"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    run_logged(step, ["tar", "-xf", archive, "-C", staging], log_path, error=error, what=f"tar of {archive.name}")
    entries = list(staging.iterdir())
    if len(entries) != 1 or not entries[0].is_dir():
        raise error(step, f"{archive.name} does not hold one top folder ({[e.name for e in entries]})", log_path)
    entries[0].rename(tree)
    staging.rmdir()
    return tree


def apply_debian_patches(tree: Path, debian_archive: Path, log_path: Path, *, package: str, skip=(),
                         error: type[SetupError] = SetupError, step: str = "unpack") -> tuple[list[str], list[str]]:
    """Unpack Debian's tarball (debian/) into `tree` and apply debian/patches/series in order, except the patches
    named in `skip`; returns (applied, skipped)."""
    debian_archive = Path(debian_archive)
    run_logged(step, ["tar", "-xf", debian_archive, "-C", tree], log_path, error=error,
               what=f"tar of {debian_archive.name}")
    series = tree / "debian" / "patches" / "series"
    names = [l.split()[0] for l in series.read_text().splitlines()
             if l.strip() and not l.lstrip().startswith("#")] if series.is_file() else []
    applied, skipped = [], []
    for name in names:
        if name in skip:
            skipped.append(name)
            continue
        run_logged(step, ["patch", "-p1", "--batch", "--forward", "-i", tree / "debian" / "patches" / name],
                   log_path, error=error, cwd=tree, what=f"Debian patch {package}/{name}")
        applied.append(name)
    return applied, skipped
