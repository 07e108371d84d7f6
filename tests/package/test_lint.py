"""ruff, pinned, is clean on what ``nox -s lint`` checks, so that CI (``nox -s tests``)
fails on a lint error as the lint session does."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _noxfile_constant(name: str):
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError(name)


def test_ruff_is_pinned_once():
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    test_txt = (ROOT / "requirements" / "test.txt").read_text(encoding="utf-8")
    pins = [ln for ln in test_txt.splitlines() if ln.startswith("ruff==")]
    assert len(pins) == 1 and f'session.install("{pins[0]}")' in noxfile


def test_ruff_is_clean():
    paths = _noxfile_constant("LINT_PATHS")
    assert all((ROOT / p).exists() for p in paths), paths
    result = subprocess.run([sys.executable, "-m", "ruff", "check", *paths], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
