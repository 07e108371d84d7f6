"""The book's environment is complete: every module a page imports is installed by
``requirements/docs.txt``.

``nox -s docs`` (the README's command, the Pages workflow, Binder) installs
``requirements/docs.txt`` with the pins of ``requirements/constraints.txt`` and posenc
itself, nothing else.  The test environment installs more (pytest, playwright, ...), so a
page importing a test-only package would still build there.  This test reads every code
cell and ``{doctest}`` block of both trees, collects the modules they import, and checks
that each one comes from the standard library, from posenc, or from a distribution in the
dependency closure of ``docs.txt`` (walked through the installed distributions' metadata,
with environment markers evaluated, by ``tools/env_sync.py``, which also prunes a reused
nox environment to that closure).
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from env_sync import closure, requirement_names  # noqa: E402  (tools/env_sync.py)

DOCS_REQUIREMENTS = ROOT / "requirements" / "docs.txt"
FENCE = re.compile(r"^(`{3,}|~{3,})\{(code-cell|doctest)\}")
PROJECT = "posenc"


def page_code(path: Path) -> list[tuple[int, str]]:
    """(line, source) of every code cell and {doctest} block of a MyST page."""
    blocks: list[tuple[int, str]] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group(1), i + 1
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].rstrip() != fence:
            body.append(lines[i])
            i += 1
        i += 1
        if body and body[0].strip() == "---":  # a YAML block of cell options
            end = next(k for k in range(1, len(body)) if body[k].strip() == "---")
            body = body[end + 1:]
        if m.group(2) == "doctest":  # the source of the >>> and ... lines
            body = [ln.strip()[4:] for ln in body if ln.strip()[:4] in (">>> ", "... ")]
        body = [ln for ln in body if not re.match(r"^:[\w-]+:", ln)]  # cell options
        # IPython magics and shell escapes are not Python; they import nothing.
        body = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in body]
        blocks.append((start, "\n".join(body)))
    return blocks


def imported_modules(source: str) -> set[str]:
    """Top-level names of the absolute imports anywhere in ``source``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def book_imports() -> dict[str, list[str]]:
    """module -> the places (page:line) that import it, over both language trees."""
    where: dict[str, list[str]] = {}
    for lang in ("en", "zh"):
        for page in sorted((ROOT / "docs" / lang).glob("*.md")):
            for line, source in page_code(page):
                for mod in imported_modules(source):
                    where.setdefault(mod, []).append(f"docs/{lang}/{page.name}:{line}")
    return where


def missing_imports(requirements: Path) -> dict[str, list[str]]:
    """The modules the pages import that ``requirements`` does not install, with where."""
    installed = closure(requirement_names(requirements))
    providers = metadata.packages_distributions()
    stdlib = set(sys.stdlib_module_names)
    missing: dict[str, list[str]] = {}
    for mod, places in sorted(book_imports().items()):
        if mod in stdlib or mod == PROJECT:
            continue
        dists = {canonicalize_name(d) for d in providers.get(mod, [])}
        if not dists & installed:
            missing[mod] = places
    return missing


def test_the_pages_import_something():
    """The scan sees the pages' imports (a broken scan would find nothing to check)."""
    imports = book_imports()
    for mod in ("posenc", "numpy", "torch", "myst_nb", "transformers"):
        assert mod in imports, mod
    assert all(p.startswith(("docs/en/", "docs/zh/")) for ps in imports.values() for p in ps)


def test_docs_requirements_install_every_import():
    missing = missing_imports(DOCS_REQUIREMENTS)
    assert not missing, (
        "pages import modules that requirements/docs.txt does not install (nox -s docs "
        "would fail on a fresh machine): "
        + "; ".join(f"{m} at {', '.join(p[:3])}" for m, p in missing.items())
    )


@pytest.mark.parametrize("dropped", ["transformers", "torch"])
def test_a_missing_requirement_is_caught(tmp_path, dropped):
    """The check can fail: docs.txt without one line leaves that import uncovered."""
    text = DOCS_REQUIREMENTS.read_text(encoding="utf-8")
    kept = [ln for ln in text.splitlines() if not ln.startswith(f"{dropped}==")]
    assert len(kept) == len(text.splitlines()) - 1, f"{dropped} is pinned in docs.txt"
    trimmed = tmp_path / "docs.txt"
    trimmed.write_text("\n".join(kept) + "\n", encoding="utf-8")
    assert dropped in missing_imports(trimmed)


def test_imports_parse_magics_and_doctests(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "```{code-cell} ipython3\n---\ntags: [x]\n---\nimport y\n```\n"
        "```{code-cell} ipython3\n:tags: [remove-cell]\n%matplotlib inline\nimport a.b\n"
        "def f():\n    from c import d\n```\n\n```{doctest}\n>>> import e\n>>> 1\n1\n```\n",
        encoding="utf-8",
    )
    mods = set().union(*(imported_modules(src) for _, src in page_code(page)))
    assert mods == {"a", "c", "e", "y"}


# -- The notebooks' slim requirements ----------------------------------------------------

NOTEBOOK_REQUIREMENTS = ROOT / "requirements" / "notebooks.txt"
#: Imported by the pages but not by their downloaded notebooks: myst_nb's glue is taken
#: out of the code (docs/_ext/posenc_notebook.py); IPython is the kernel itself.
NOT_IN_NOTEBOOKS = {"myst_nb", "IPython"}


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line!r} is not pinned with =="
            pins[canonicalize_name(name)] = version
    return pins


def test_notebook_requirements_install_what_the_notebooks_import():
    missing = {m: p for m, p in missing_imports(NOTEBOOK_REQUIREMENTS).items()
               if m not in NOT_IN_NOTEBOOKS}
    assert not missing, (
        "downloaded notebooks import modules that requirements/notebooks.txt does not "
        "install: " + "; ".join(f"{m} at {', '.join(p[:3])}" for m, p in missing.items()))


def test_notebook_requirements_are_slim_and_pinned_as_the_book():
    """Pinned to the versions of constraints.txt, and without the site's build stack."""
    pins = _pins(NOTEBOOK_REQUIREMENTS)
    constraints = _pins(ROOT / "requirements" / "constraints.txt")
    for name, version in pins.items():
        assert constraints.get(name) == version, (name, version, constraints.get(name))
    installed = closure(requirement_names(NOTEBOOK_REQUIREMENTS))
    for heavy in ("sphinx", "myst-nb", "sphinx-book-theme", "jupytext", "jieba",
                  "latex2mathml", "ipykernel"):
        assert heavy not in installed, heavy
    assert {"numpy", "matplotlib", "torch"} <= set(pins)
