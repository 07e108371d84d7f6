"""Make a reused environment hold what a fresh one would: nothing more than its requirements.

    python tools/env_sync.py requirements/docs.txt [more.txt ...]   # uninstall the extras
    python tools/env_sync.py --check requirements/docs.txt          # list them, exit 1

``pip install -r`` adds what a requirements file names but never removes what an earlier
run (an older requirements file, a manual ``pip install``) left behind, so a reused
virtualenv can build a page that a fresh one cannot.  The nox sessions run this after
installing: every distribution outside the dependency closure of the requirements files
(walked through the installed metadata, environment markers evaluated) and of the project
itself is uninstalled.  The test of the book's imports (tests/book/test_imports.py) uses
the same closure.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROJECT = "posenc"
# What venv and pip put in every environment.
SEED = {"pip", "setuptools", "wheel"}


def requirement_names(path: Path) -> set[str]:
    """The distributions a pip requirements file names, following ``-r`` includes.

    ``-c`` constraint files only pin versions of what something else asks for, so they
    add no names.
    """
    names: set[str] = set()
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ")):
            names |= requirement_names(path.parent / line.split(None, 1)[1].strip())
        elif not line.startswith("-"):
            names.add(canonicalize_name(Requirement(line).name))
    return names


def _requires(dist: str, extras: frozenset[str]) -> list[Requirement]:
    try:
        texts = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        raise LookupError(f"{dist} is required but not installed; install the requirements "
                          "first") from None
    out = []
    for text in texts:
        req = Requirement(text)
        if req.marker is not None:
            envs = [{**default_environment(), "extra": e} for e in (extras or {""})]
            if not any(req.marker.evaluate(env) for env in envs):
                continue
        out.append(req)
    return out


def closure(names: set[str]) -> set[str]:
    """Every distribution that installing ``names`` installs, as canonical names."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(n, frozenset[str]()) for n in names]
    while todo:
        name, extras = todo.pop()
        key = (canonicalize_name(name), extras)
        if key in seen:
            continue
        seen.add(key)
        for req in _requires(key[0], extras):
            todo.append((req.name, frozenset(req.extras)))
    return {name for name, _ in seen}


def extras_installed(requirement_files: list[Path]) -> list[str]:
    """Installed distributions that neither the files nor the project pull in."""
    wanted = set().union(*(requirement_names(p) for p in requirement_files))
    try:
        metadata.distribution(PROJECT)
        wanted.add(PROJECT)
    except metadata.PackageNotFoundError:
        pass
    keep = closure(wanted) | SEED
    installed = {canonicalize_name(d.metadata["Name"]) for d in metadata.distributions()}
    return sorted(installed - keep)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("requirements", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true", help="only list the extras")
    args = parser.parse_args(argv)
    extra = extras_installed(args.requirements)
    if not extra:
        return 0
    if args.check:
        print("not required by " + ", ".join(map(str, args.requirements)) + ": "
              + " ".join(extra))
        return 1
    print("env_sync: uninstalling what the requirements no longer ask for: " + " ".join(extra))
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", *extra], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
