"""workbench.toolchain.debian_source: what workbench.vendors.mesa and workbench.toolchain.glslang share to build from Debian
13's source packages. No network, no build: the sources list, apt's options, the checksum check, the lock, the
stamp, the step logs, the prerequisites, the source index, unpacking and patching (real tar and patch on tiny
files). The builders' own tests (test_mesa_compilers.py, test_compilers_glslang.py) cover their recipes and messages."""
import hashlib
import io
import json
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from workbench.toolchain import debian_source as ds


class DemoSetupError(ds.SetupError):
    label = "demo setup"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------------------------------ errors and logs

def test_setup_error_names_step_log_and_tail(tmp_path):
    error = DemoSetupError("build", "ninja failed with exit status 1", tmp_path / "5-build.log", "a\nb")
    assert str(error) == (f"demo setup: build: ninja failed with exit status 1\nfull log: {tmp_path / '5-build.log'}"
                          "\n--- last lines of the log ---\na\nb")
    assert (error.step, error.log_path, error.tail) == ("build", tmp_path / "5-build.log", "a\nb")
    assert str(DemoSetupError("lock", "busy")) == "demo setup: lock: busy"


def test_run_logged_writes_the_whole_log_and_quotes_its_tail(tmp_path):
    log = tmp_path / "logs" / "3-build.log"
    seen = []
    ds.run_logged("build", ["sh", "-c", "echo hello"], log, error=DemoSetupError, on_line=seen.append)
    assert seen == ["hello\n"]
    assert log.read_text() == "$ sh -c echo hello\nhello\n[exit status 0]\n"
    script = "for i in $(seq 1 100); do echo line $i; done; exit 7"
    with pytest.raises(DemoSetupError) as info:
        ds.run_logged("build", ["sh", "-c", script], log, error=DemoSetupError, what="the loop")
    message = str(info.value)
    assert message.startswith("demo setup: build: the loop failed with exit status 7\nfull log: ")
    tail = info.value.tail.splitlines()
    assert len(tail) == ds.TAIL_LINES and tail[0] == "line 61" and tail[-1] == "line 100"
    text = log.read_text()
    assert "line 1\n" in text and text.endswith("[exit status 7]\n")  # appended: the first command's lines stay
    assert text.startswith("$ sh -c echo hello\n")
    with pytest.raises(DemoSetupError, match="cannot run '/nonexistent/tool'"):
        ds.run_logged("build", [Path("/nonexistent/tool")], log, error=DemoSetupError)


def test_steps_number_their_logs_and_time_them(tmp_path):
    said = []
    steps = ds.Steps(2, tmp_path, said.append, "demo setup")
    with steps.step("fetch", "fetch the sources") as log:
        assert log == tmp_path / "1-fetch.log"
    with steps.step("build", "build") as log:
        assert log == tmp_path / "2-build.log"
    assert said[0] == "[demo setup 1/2] fetch the sources" and said[2] == "[demo setup 2/2] build"
    assert said[1].startswith("    done in ") and set(steps.times) == {"fetch", "build"}


def test_ninja_progress_says_every_tenth_once(tmp_path):
    said = []
    on_line = ds.ninja_progress(said.append)
    for i in range(1, 21):
        on_line(f"[{i}/20] Building CXX object x{i}.o\n")
    on_line("not a ninja line\n")
    on_line.close()
    assert said == [f"    ninja [{i}/20] {5 * i}%" for i in (1, *range(2, 21, 2))]  # the first line, then 10 %
    said.clear()
    detailed = ds.ninja_progress(said.append, every=50, detail=True)
    for i in range(1, 5):
        detailed(f"[{i}/4] Linking libx.so\n")
    assert said == [f"    ninja [{i}/4] {25 * i}%  Linking libx.so" for i in (1, 2, 4)]


# ------------------------------------------------------------------------------------------------ cache, stamp, lock

def test_cache_dir_prefers_the_argument_then_the_variable(tmp_path, monkeypatch):
    default = tmp_path / "default"
    monkeypatch.delenv("WORKBENCH_DEMO_DIR", raising=False)
    assert ds.cache_dir(None, "WORKBENCH_DEMO_DIR", default) == default
    monkeypatch.setenv("WORKBENCH_DEMO_DIR", str(tmp_path / "env"))
    assert ds.cache_dir(None, "WORKBENCH_DEMO_DIR", default) == (tmp_path / "env").resolve()
    assert ds.cache_dir(tmp_path / "arg", "WORKBENCH_DEMO_DIR", default) == (tmp_path / "arg").resolve()


def test_recipe_id_and_stamp(tmp_path):
    recipe = ds.recipe_id({"b": [1, 2], "a": "x"})
    assert recipe == ds.recipe_id({"a": "x", "b": (1, 2)}) and len(recipe) == 16
    assert recipe != ds.recipe_id({"a": "y", "b": [1, 2]})
    stamp = tmp_path / "setup.json"
    assert ds.read_stamp(stamp) is None and ds.stamp_missing(stamp, recipe) == [str(stamp)]
    stamp.write_text("{not json")
    assert ds.read_stamp(stamp) is None
    ds.write_stamp(stamp, {"recipe": "old"})
    assert ds.stamp_missing(stamp, recipe) == [f"{stamp} (from another build recipe: old != {recipe})"]
    ds.write_stamp(stamp, {"recipe": recipe, "built_at": "then"})
    assert ds.stamp_missing(stamp, recipe) == [] and stamp.read_text().endswith("}\n")


def test_finish_stamp_adds_totals_and_sizes(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tool").write_bytes(b"x" * 1000)
    (tmp_path / "bin" / "link").symlink_to(tmp_path / "bin" / "tool")
    stamp = {"recipe": "r", "step_seconds": {}}
    ds.finish_stamp(stamp, tmp_path / "setup.json", tmp_path, started=time.monotonic() - 90, keep_build=False,
                    step_seconds={"build": 80.0})
    written = json.loads((tmp_path / "setup.json").read_text())
    assert list(written) == ["recipe", "step_seconds", "total_seconds", "kept_build", "cache_bytes"]
    assert written["step_seconds"] == {"build": 80.0} and written["total_seconds"] >= 90
    assert written["cache_bytes"] == 1000 and written["kept_build"] is False  # the link is not counted twice
    assert ds.done_message("demo setup", written, tmp_path).startswith("demo setup: done in 1.5 min; cache 0 MiB in ")


def test_a_second_setup_on_the_same_folder_is_refused_while_the_first_holds_the_lock(tmp_path):
    root = tmp_path / "cache"
    with ds.lock(root, error=DemoSetupError, what="demo setup"):
        with pytest.raises(DemoSetupError) as info:
            with ds.lock(root, error=DemoSetupError, what="demo setup"):
                pass
        assert str(info.value) == f"demo setup: lock: another demo setup is running on {root}"
        # another process is refused too
        probe = subprocess.run(["flock", "-n", str(root / ".setup.lock"), "true"], capture_output=True)
        assert probe.returncode != 0
    with ds.lock(root, error=DemoSetupError):  # released
        pass


def test_setup_session_starts_fresh_logs_and_drops_the_stamp(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "1-old.log").write_text("old")
    (tmp_path / "setup.json").write_text("{}")
    (tmp_path / "bin").mkdir()
    said = []
    with ds.setup_session(tmp_path, steps=3, error=DemoSetupError, what="demo setup", echo=said.append) as steps:
        assert list((tmp_path / "logs").iterdir()) == [] and not (tmp_path / "setup.json").exists()
        assert (tmp_path / "bin").is_dir()  # products stay until the builder replaces them
        with pytest.raises(DemoSetupError, match="another demo setup"):
            with ds.lock(tmp_path, error=DemoSetupError, what="demo setup"):
                pass
        with steps.step("one", "step one"):
            pass
    assert said[0] == "[demo setup 1/3] step one"


def test_configure_once_reuses_a_build_folder_configured_alike(tmp_path):
    build, runs, said = tmp_path / "build", [], []

    def configure():
        runs.append(1)
        build.mkdir()
        (build / "build.ninja").write_text("")

    for wanted, force in ((["src", "-Da=1"], False), (["src", "-Da=1"], False), (["src", "-Da=2"], False),
                          (["src", "-Da=2"], True)):
        ds.configure_once(build, "options.json", wanted, configure, force=force, echo=said.append)
    assert len(runs) == 3 and said == ["    reusing the configured build directory"]
    assert json.loads((build / "options.json").read_text()) == ["src", "-Da=2"]


def test_copy_products_names_what_ninja_left_out(tmp_path):
    build = tmp_path / "build"
    (build / "tools").mkdir(parents=True)
    (build / "tools" / "a").write_text("a")
    assert ds.copy_products(build, tmp_path / "bin", [("tools/a", "tool-a")], tmp_path / "log") == \
        [tmp_path / "bin" / "tool-a"]
    with pytest.raises(DemoSetupError, match=r"install: ninja finished but .*tools/b is missing"):
        ds.copy_products(build, tmp_path / "bin", [("tools/a", "a"), ("tools/b", "b")], tmp_path / "log",
                         error=DemoSetupError)


def test_clean_env_hides_the_callers_python(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.setenv("PYTHONHOME", "/else")
    env = ds.clean_env(GIT_DIR="/nonexistent")
    assert "PYTHONPATH" not in env and "PYTHONHOME" not in env and env["GIT_DIR"] == "/nonexistent"
    assert env["PATH"]


# ------------------------------------------------------------------------------------------------ prerequisites

def test_missing_prerequisites_are_named_with_the_command(tmp_path):
    with pytest.raises(DemoSetupError) as info:
        ds.install_prerequisites(("cmake", "g++", "ninja-build"), tmp_path / "log", False, lambda text: None,
                                 error=DemoSetupError, missing=lambda packages: ["cmake", "ninja-build"])
    assert str(info.value) == ("demo setup: prerequisites: missing Debian packages: cmake ninja-build (installing "
                               "them was switched off). Install them: sudo apt-get install -y "
                               "--no-install-recommends cmake ninja-build")
    said = []
    ds.install_prerequisites(("cmake",), tmp_path / "log", False, said.append, missing=lambda packages: [])
    assert said == ["    all present: cmake"]


def test_missing_apt_packages_asks_dpkg():
    assert ds.missing_apt_packages(["dpkg", "no-such-package-workbench"]) == ["no-such-package-workbench"]


# ------------------------------------------------------------------------------------------------ the source index

def test_sources_text_lists_only_debian_13_deb_src(tmp_path):
    keyring = tmp_path / "keyring.gpg"
    assert ds.sources_text("http://mirror/debian", keyring=str(keyring)) == (
        "Types: deb-src\nURIs: http://mirror/debian\nSuites: trixie trixie-updates\nComponents: main\n")
    keyring.write_bytes(b"")
    assert ds.sources_text("http://mirror/debian", keyring=str(keyring)) == (
        "Types: deb-src\nURIs: http://mirror/debian\nSuites: trixie trixie-updates\nComponents: main\n"
        f"Signed-By: {keyring}\n")
    assert ds.DEBIAN_SUITES == ("trixie", "trixie-updates")


def test_apt_options_keep_everything_in_the_temporary_folder(tmp_path, monkeypatch):
    for uid, extra in ((0, "APT::Sandbox::User=root"), (1000, "Debug::NoLocking=true")):
        monkeypatch.setattr(ds.os, "geteuid", lambda uid=uid: uid)
        options = ds.apt_options(tmp_path)
        pairs = dict(o.split("=", 1) for o in options[1::2])
        assert set(options[0::2]) == {"-o"}
        assert pairs["Dir::Etc::SourceList"] == "/dev/null"  # the system's sources are not read
        assert pairs["Dir::Etc::SourceParts"] == str(tmp_path / "sources")
        assert all(pairs[k].startswith(str(tmp_path)) for k in ("Dir::State::Lists", "Dir::Cache",
                                                                "Dir::Cache::archives"))
        assert extra in options


def test_apt_sources_builds_a_temporary_configuration(tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(ds, "run_logged", lambda step, command, log, **kw: commands.append((step, command)))
    log = tmp_path / "2-sources.log"
    with ds.AptSources("demo", "http://mirror/debian", log, step="fetch sources", error=DemoSetupError) as apt:
        parts = next(o for o in apt.options if o.startswith("Dir::Etc::SourceParts="))
        folder = Path(parts.split("=", 1)[1]).parent
        sources = folder / "sources" / "workbench-demo-src.sources"
        assert sources.read_text().startswith("Types: deb-src\nURIs: http://mirror/debian\nSuites: trixie ")
        assert commands == [("fetch sources", ["apt-get", *apt.options, "update", "-q"])]
        showsrc = subprocess.CompletedProcess([], 0, "Package: x\nVersion: 1.0-1\n\nPackage: x\nVersion: 2.0-1\n",
                                              "W: something\n")
        with pytest.raises(DemoSetupError) as info:
            raise apt.no_source("x", "3.0", showsrc)
        assert str(info.value).startswith("demo setup: fetch sources: no x 3.0-* source package in "
                                          "http://mirror/debian trixie trixie-updates (listed: 1.0-1, 2.0-1; "
                                          "W: something)")
    assert not folder.exists()


def test_download_checks_the_sha256_and_names_both_hashes(tmp_path, monkeypatch):
    good, bad = b"the real tarball\n", b"something else\n"
    entry = {"version": "1.0-1", "directory": "pool/main/x/x", "files": [(_sha(good), len(good), "x_1.0.orig.tar.xz")]}
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    fetched = []

    def fake_apt_helper(step, command, log, **kw):
        fetched.append(command)
        if command[0] == ds.APT_HELPER:
            Path(command[-2]).write_bytes(payload)

    monkeypatch.setattr(ds, "run_logged", fake_apt_helper)
    with ds.AptSources("demo", "http://mirror/debian", tmp_path / "log", step="fetch sources",
                       error=DemoSetupError) as apt:
        payload = good
        path = apt.download(entry, entry["files"][0], downloads)
        assert path.read_bytes() == good
        assert fetched[-1][fetched[-1].index("download-file") + 1:] == [
            "http://mirror/debian/pool/main/x/x/x_1.0.orig.tar.xz", path, f"SHA256:{_sha(good)}"]
        count = len(fetched)
        apt.download(entry, entry["files"][0], downloads)  # already there and right: not fetched again
        assert len(fetched) == count
        path.write_bytes(bad)
        payload = bad
        with pytest.raises(DemoSetupError) as info:
            apt.download(entry, entry["files"][0], downloads)
    message = str(info.value)
    assert message.startswith("demo setup: fetch sources: x_1.0.orig.tar.xz: SHA-256 mismatch after download")
    assert f"expected {_sha(good)}" in message and f"got {_sha(bad)}" in message and str(path) in message


def test_verify_sha256(tmp_path):
    path = tmp_path / "f.tar.gz"
    path.write_bytes(b"abc")
    ds.verify_sha256(path, _sha(b"abc").upper())
    with pytest.raises(ds.SetupError, match=rf"setup: unpack: f.tar.gz: SHA-256 mismatch .*expected {'0' * 64}, "
                                            rf"got {_sha(b'abc')}"):
        ds.verify_sha256(path, "0" * 64, step="unpack")
    with pytest.raises(ds.SetupError, match="got no file"):
        ds.verify_sha256(tmp_path / "absent", "0" * 64)


SHOWSRC = """Package: demo
Version: 1:2.0-1
Directory: pool/main/d/demo
Checksums-Sha256:
 AA 10 demo_2.0-1.dsc
 bb 20 demo_2.0.orig.tar.gz

Package: demo
Version: 1:2.0-1+deb13u1
Directory: pool/main/d/demo
Checksums-Sha256:
 cc 30 demo_2.0.orig.tar.gz
 dd 40 demo_2.0-1+deb13u1.debian.tar.xz

Package: demo
Version: 1:2.1-1
Directory: pool/main/d/demo
"""


def test_the_source_index_gives_the_newest_revision_of_the_pinned_version():
    assert ds.upstream("1:2025.1~rc1-1") == "2025.1~rc1" and ds.upstream("3.0") == "3.0"
    entry = ds.parse_showsrc(SHOWSRC, "demo", "2.0")
    assert entry == {"version": "1:2.0-1+deb13u1", "directory": "pool/main/d/demo",
                     "files": [("cc", 30, "demo_2.0.orig.tar.gz"), ("dd", 40, "demo_2.0-1+deb13u1.debian.tar.xz")]}
    assert ds.parse_showsrc(SHOWSRC, "demo", "1.9") is None and ds.parse_showsrc(SHOWSRC, "other", "2.0") is None
    assert ds.newest(["25.0.7-2", "25.0.7-2+deb13u1", "25.0.7-10"]) == "25.0.7-10"  # dpkg's order, not the text's
    assert ds.newest([]) is None


# ------------------------------------------------------------------------------------------------ unpack and patch

def _tarball(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_unpack_and_apply_debian_patches(tmp_path):
    orig = _tarball(tmp_path / "demo_2.0.orig.tar.gz", {"demo-2.0/hello.txt": "hello\n", "demo-2.0/keep.txt": "k\n"})
    patch = ("--- a/hello.txt\n+++ b/hello.txt\n@@ -1 +1 @@\n-hello\n+hello, Debian\n")
    debian = _tarball(tmp_path / "demo_2.0-1.debian.tar.gz", {
        "debian/patches/series": "# comment\nfix-hello.patch\n\nsystem-libs.patch -p1\n",
        "debian/patches/fix-hello.patch": patch,
        "debian/patches/system-libs.patch": "not even a patch\n"})
    tree = tmp_path / "src" / "demo"
    tree.mkdir(parents=True)
    (tree / "stale.txt").write_text("from an earlier unpack")
    log = tmp_path / "3-unpack.log"
    assert ds.unpack_upstream(orig, tree, log, error=DemoSetupError) == tree
    assert sorted(p.name for p in tree.iterdir()) == ["hello.txt", "keep.txt"]
    assert [p.name for p in (tmp_path / "src").iterdir()] == ["demo"]  # no staging folder left
    applied, skipped = ds.apply_debian_patches(tree, debian, log, package="demo", skip={"system-libs.patch": "why"},
                                               error=DemoSetupError)
    assert (applied, skipped) == (["fix-hello.patch"], ["system-libs.patch"])
    assert (tree / "hello.txt").read_text() == "hello, Debian\n"
    assert "$ patch -p1 --batch --forward -i" in log.read_text()
    two_tops = _tarball(tmp_path / "bad.tar.gz", {"a/x": "", "b/y": ""})
    with pytest.raises(DemoSetupError, match=r"unpack: bad.tar.gz does not hold one top folder \(\['[ab]', '[ab]'\]\)"):
        ds.unpack_upstream(two_tops, tmp_path / "src" / "bad", log, error=DemoSetupError)
