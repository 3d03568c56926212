"""What every tool the workbench builds once and caches shares: where its cache is, what a complete build holds,
its status, the "already built" short cut, the strip-and-copy install step and the ``setup | status`` command line.

    TOOLS = build.ToolCache(label="glslang setup", env_var="WORKBENCH_GLSLANG_DIR", default=Path(...),
                            recipe=RECIPE_ID, products=lambda root: {"glslc": root / "bin" / "glslc", ...})
    TOOLS.root(None); TOOLS.missing(); TOOLS.is_set_up(); TOOLS.status()
    if TOOLS.already_built(root, force, echo): return TOOLS.status(root)

The builders (``toolchain.glslang``, ``toolchain.gfxreconstruct``) keep their own recipes and steps; the steps'
frame (lock, logs, stamp) is ``toolchain.debian_source``'s.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import debian_source


@dataclass(frozen=True)
class ToolCache:
    """A cached build. `products(root)`: {name: path} of every file a complete build holds (what `status` lists
    as its tools is `tools(root)`, default the same); `recipe`: the recipe id its stamp must carry."""

    label: str
    env_var: str
    default: Path
    recipe: str
    products: Callable[[Path], dict]
    tools: Callable[[Path], dict] | None = None
    stamp_name: str = debian_source.STAMP_NAME

    def root(self, root=None) -> Path:
        """The cache: `root`, else $`env_var`, else `default`."""
        return debian_source.cache_dir(root, self.env_var, self.default)

    def tool_paths(self, root=None) -> dict[str, Path]:
        base = self.root(root)
        return (self.tools or self.products)(base)

    def stamp(self, root=None) -> dict | None:
        return debian_source.read_stamp(self.root(root) / self.stamp_name)

    def missing(self, root=None) -> list[str]:
        """What a complete build of this recipe would hold and the cache lacks ([] when it is set up)."""
        base = self.root(root)
        missing = [str(p) for p in self.products(base).values() if not _usable(p)]
        return missing + debian_source.stamp_missing(base / self.stamp_name, self.recipe)

    def is_set_up(self, root=None) -> bool:
        return not self.missing(root)

    def status(self, root=None) -> dict:
        """{"set_up", "root", "missing", "tools", "stamp"}: what the cache holds."""
        missing = self.missing(root)
        return {"set_up": not missing, "root": str(self.root(root)), "missing": missing,
                "tools": {k: str(v) for k, v in self.tool_paths(root).items()}, "stamp": self.stamp(root)}

    def functions(self) -> tuple:
        """(root, tool_paths, missing, is_set_up, status): a builder module's functions of the same names."""
        return self.root, self.tool_paths, self.missing, self.is_set_up, self.status

    def require(self, root=None, *, error: type, explain: Callable[[Path, list], str]) -> dict[str, Path]:
        """The tools' paths; `error(explain(cache folder, missing))` while the cache lacks something."""
        missing = self.missing(root)
        if missing:
            raise error(explain(self.root(root), missing))
        return self.tool_paths(root)

    def already_built(self, root: Path, force: bool, echo) -> bool:
        """True (and says so) where `root` holds a complete build and `force` does not ask for another."""
        if force or not self.is_set_up(root):
            return False
        built = (self.stamp(root) or {}).get("built_at", "?")
        echo(f"{self.label}: already built in {root} ({built}); force=True rebuilds")
        return True


def _usable(path: Path) -> bool:
    """A product is there: a file (an executable one where it has no suffix, as the tools in bin/ have)."""
    return path.is_file() and (path.suffix or os.access(path, os.X_OK))


def echo_for(progress: bool):
    return (lambda text: print(text, flush=True)) if progress else (lambda text: None)


def install_products(build: Path, root: Path, products, log_path: Path, *, error) -> list[Path]:
    """Copy each (path in `build`, "folder/name" under `root`) into fresh folders of `root`
    (`debian_source.copy_products`) and strip the binaries (not the .json manifests)."""
    by_folder: dict[str, list] = {}
    for built, dest in products:
        folder, name = str(dest).split("/", 1)
        by_folder.setdefault(folder, []).append((built, name))
    copied = []
    for folder, items in by_folder.items():
        copied += debian_source.copy_products(build, root / folder, items, log_path, error=error)
    for path in copied:
        if shutil.which("strip") and path.suffix != ".json":
            debian_source.run_logged("install", ["strip", "--strip-unneeded", path], log_path, error=error,
                                     what="strip")
    return copied


def setup_parser(prog: str, description: str, *, setup_help: str, dir_help: str, keep_help: str,
                 status_help: str = "is it built, where (JSON; exit status 1 when not built)") -> tuple:
    """``setup [--dir] [--force] [--jobs] [--keep-build] [--no-install] [--quiet]`` and ``status [--dir]``:
    (parser, the setup subparser, for a builder's own options)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("setup", help=setup_help)
    s.add_argument("--dir", default=None, help=dir_help)
    s.add_argument("--force", action="store_true", help="rebuild even when the cache is complete")
    s.add_argument("--jobs", "-j", type=int, default=None, help="ninja jobs (default: CPU count)")
    s.add_argument("--keep-build", action="store_true", help=keep_help)
    s.add_argument("--no-install", action="store_true",
                   help="do not apt-get install missing prerequisites (fail and name them)")
    s.add_argument("--quiet", action="store_true", help="no progress output")
    st = sub.add_parser("status", help=status_help)
    st.add_argument("--dir", default=None)
    return parser, s


def setup_options(args) -> dict:
    """The keyword arguments of a builder's setup() from `setup_parser`'s common options."""
    return {"force": args.force, "jobs": args.jobs, "keep_build": args.keep_build,
            "install_prerequisites": not args.no_install, "progress": not args.quiet}


def run_main(args, *, setup: Callable, cache: ToolCache, error: type, prog: str) -> int:
    """Run `setup_parser`'s command: `setup(args)`, or the status as JSON (exit status 1 while not built); a
    builder's `error` is one message and exit status 1."""
    try:
        if args.command == "setup":
            setup(args)
        else:
            print(json.dumps(cache.status(args.dir), indent=2))
            return 0 if cache.is_set_up(args.dir) else 1
    except error as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    return 0
