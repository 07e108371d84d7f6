"""Where the committed results files are: ``benchmarks/results.json``, ``experiments/results.json``.

A page executes in its source folder (``docs/<lang>/``), so the file is found by walking up
from the current directory; a library user in a source checkout finds the one next to the
``posenc`` package; an environment variable names any other file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[2]


def _walk_up(start: Path, relpath: Path) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / relpath
        if candidate.is_file():
            return candidate
    return None


def read_results(path, *, relpath: Path, env_var: str, session: str) -> dict:
    """Read a results JSON file: ``path`` if given, else ``$env_var``, else the first
    ``relpath`` above the current directory, else the one in this source checkout.

    Raises FileNotFoundError (naming ``nox -s <session>``) when there is none.
    """
    if path is None and os.environ.get(env_var):
        path = os.environ[env_var]
    if path is None:
        path = _walk_up(Path.cwd(), relpath) or _walk_up(_CHECKOUT, relpath)
        if path is None:
            raise FileNotFoundError(
                f"no {relpath.as_posix()} found above {Path.cwd()} or next to the posenc "
                f"package; run `nox -s {session}` in a source checkout, or pass path=")
    return json.loads(Path(path).read_text(encoding="utf-8"))
