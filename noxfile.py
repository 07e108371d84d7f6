"""Sessions for the book and the library.

    nox -s docs     build both languages into _build/html (execution cache on)
    nox -s tests    pytest + a fresh docs build + doctests + browser tests
    nox -s doctest  the {doctest} blocks of both languages and posenc's docstrings
    nox -s bench    library and build benchmarks -> benchmarks/results.json and results.md
    nox -s serve    live preview of one language (nox -s serve -- zh)
    nox -s lint     ruff
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
BUILD = ROOT / "_build"
HTML = BUILD / "html"
LANGS = ("en", "zh")
CONSTRAINTS = ("-c", "requirements/constraints.txt")

nox.options.sessions = ["docs"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True


def _install(session: nox.Session, requirements: str) -> None:
    session.install("-r", requirements, *CONSTRAINTS)
    session.install("--no-deps", "-e", ".")


def _sphinx(session: nox.Session, builder: str, lang: str, *extra: str, env=None) -> float:
    """Run one sphinx-build for one language; return its wall time in seconds."""
    out = HTML / lang if builder == "html" else BUILD / builder / lang
    start = time.perf_counter()
    session.run(
        "sphinx-build", "-b", builder, "-c", ".", "-W", "--keep-going", "-q",
        *extra, f"docs/{lang}", str(out),
        env={"POSENC_LANG": lang, "PYTHONHASHSEED": "0", **(env or {})},
    )
    return time.perf_counter() - start


def _build_site(session: nox.Session, *extra: str, env=None) -> None:
    # One language after the other: jupyter-cache's SQLite does not like -j.
    times = {lang: _sphinx(session, "html", lang, *extra, env=env) for lang in LANGS}
    if not (HTML / "en" / "404.html").exists():  # nox --install-only: nothing was built
        return
    shutil.copyfile(ROOT / "docs" / "chooser" / "index.html", HTML / "index.html")
    # GitHub Pages answers every missing URL of a project site with its root 404.html;
    # the English one works from any path (its links are site-absolute) and links zh.
    shutil.copyfile(HTML / "en" / "404.html", HTML / "404.html")
    summary = ", ".join(f"{lang} {t:.1f} s" for lang, t in times.items())
    session.log(f"Sphinx time: {summary}; total {sum(times.values()):.1f} s")
    session.log(f"Site: {HTML / 'index.html'}")


@nox.session(python="3.11")
def docs(session: nox.Session) -> None:
    """Build the site, both languages; the execution cache keeps warm builds quick."""
    _install(session, "requirements/docs.txt")
    _build_site(session, *session.posargs)


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """Everything CI checks: unit/property/parity tests, a forced build, doctests, browser."""
    _install(session, "requirements/test.txt")
    session.run("pytest", "-m", "not build and not browser", "--doctest-modules", "posenc", "tests")
    # A fresh build that executes every page: the execution cache is emptied first (the
    # doctest builder after it then reuses those fresh outputs instead of executing again).
    shutil.rmtree(BUILD / ".jupyter_cache", ignore_errors=True)
    _build_site(session, "-E")
    for lang in LANGS:
        _sphinx(session, "doctest", lang)
    session.run("pytest", "-m", "build or browser", "tests")


@nox.session(python="3.11")
def doctest(session: nox.Session) -> None:
    """The {doctest} examples in the pages and the Examples in posenc's docstrings."""
    _install(session, "requirements/test.txt")
    session.run("pytest", "--doctest-modules", "posenc", "-q")
    for lang in LANGS:
        _sphinx(session, "doctest", lang)


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Library and build benchmarks; writes benchmarks/results.{json,md}.

    ``nox -s bench`` runs everything (``--build``); arguments after ``--`` replace that,
    e.g. ``nox -s bench -- --quick`` or ``nox -s bench -- --build-only``.
    """
    _install(session, "requirements/bench.txt")
    session.run("python", "benchmarks/run.py", *(session.posargs or ["--build"]))


@nox.session(python="3.11")
def serve(session: nox.Session) -> None:
    """Live preview while writing: nox -s serve -- zh  (default en)."""
    _install(session, "requirements/docs.txt")
    session.install("sphinx-autobuild", *CONSTRAINTS)
    lang = session.posargs[0] if session.posargs else "en"
    if lang not in LANGS:
        session.error(f"language must be one of {LANGS}, got {lang!r}")
    session.run(
        "sphinx-autobuild", "-c", ".", f"docs/{lang}", str(HTML / lang),
        "--watch", "posenc", "--port", "8000",
        env={"POSENC_LANG": lang},
    )


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """Static checks."""
    session.install("ruff==0.14.0")
    session.run("ruff", "check", "posenc", "tests", "conf.py", "noxfile.py", "docs/_ext")
