"""The public API is typed, and the pinned type checker is clean on ``posenc/``.

* Every public function, constructor and ``forward``/``__call__`` (``posenc.__all__`` and
  ``posenc.torch.__all__``) annotates every parameter and its return.
* ``mypy`` at the version that ``nox -s lint`` and ``requirements/test.txt`` pin reports no
  issue on ``posenc/`` (configuration: ``[tool.mypy]`` in pyproject.toml).  It runs here
  so that CI (``nox -s tests``) runs it; ``nox -s lint`` runs it too.
* ``posenc`` imports nothing from ``posenc.figures`` outside ``posenc/figures`` and the
  command line ``posenc/__main__.py`` (the one
  upward import, ``posenc.analysis.requirements`` -> ``posenc.figures.get_language``, is
  gone: the language lives in ``posenc._language``).

On commit 8049155 all three fail (no annotations, no mypy pin, the upward import).
"""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import posenc
import posenc.torch as pt

ROOT = Path(__file__).resolve().parents[2]


def _public_callables():
    for mod in (posenc, pt):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.isclass(obj):
                for member in ("__init__", "forward", "__call__"):
                    fn = obj.__dict__.get(member)
                    if fn is not None and hasattr(fn, "__code__"):
                        yield f"{mod.__name__}.{name}.{member}", fn
            elif inspect.isfunction(obj):
                yield f"{mod.__name__}.{name}", obj


def test_public_api_is_annotated():
    missing = []
    count = 0
    for qual, fn in _public_callables():
        count += 1
        sig = inspect.signature(fn)
        for p in sig.parameters.values():
            if p.name != "self" and p.annotation is inspect.Parameter.empty:
                missing.append(f"{qual}({p.name})")
        if sig.return_annotation is inspect.Signature.empty:
            missing.append(f"{qual} -> ?")
    assert count >= 50
    assert not missing, f"unannotated: {missing}"


def test_py_typed_marker_ships():
    assert (ROOT / "posenc" / "py.typed").is_file()


def _pins(text):
    return re.findall(r"mypy==([0-9][0-9.]*)", text)


@pytest.mark.package
def test_mypy_is_pinned_once_and_clean_on_posenc():
    import mypy.version

    nox_pins = _pins((ROOT / "noxfile.py").read_text())
    req_pins = _pins((ROOT / "requirements" / "test.txt").read_text())
    assert nox_pins and set(nox_pins) == set(req_pins) == {mypy.version.__version__}, (
        nox_pins, req_pins, mypy.version.__version__)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--config-file",
         str(ROOT / "pyproject.toml")],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    # notes (e.g. annotation-unchecked) may precede the verdict; errors may not
    assert proc.stdout.strip().splitlines()[-1].startswith("Success: no issues found"), (
        proc.stdout)
    assert ": error:" not in proc.stdout, proc.stdout


def test_no_module_outside_figures_imports_figures():
    offenders = []
    for path in sorted((ROOT / "posenc").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("posenc/figures/") or rel == "posenc/__main__.py":
            # the figures themselves, and the command line (``python -m posenc``), which
            # sits above every module: its --plot option draws a figure
            continue
        tree = ast.parse(path.read_text(), rel)
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                names = [f"{target}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(n == "posenc.figures" or n.startswith("posenc.figures.") for n in names):
                offenders.append(f"{rel}:{node.lineno}")
    assert not offenders, f"upward imports of posenc.figures: {offenders}"


def test_requirements_table_follows_the_language_without_figures():
    """The language a page sets reaches the analysis table through posenc._language, and
    the table module works without importing posenc.figures (run in a fresh process)."""
    code = (
        "import sys\n"
        "from posenc import _language\n"
        "from posenc.analysis import requirements as R\n"
        "scores = R.score_requirements({'index': R.standard_encodings(4)['index']})\n"
        "_language.set_language('zh')\n"
        "assert R.requirements_table(scores) == R.requirements_table(scores, 'zh')\n"
        "assert 'posenc.figures' not in sys.modules and 'matplotlib' not in sys.modules\n"
        "print('OK')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr
