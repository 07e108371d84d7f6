"""Sessions for the book and the library.

    nox -s docs     build both languages, in parallel, into _build/html (execution cache on)
    nox -s tests    pytest + `nox -s docs` in a fresh environment + doctests + browser tests
    nox -s doctest  the {doctest} blocks of both languages and posenc's docstrings
    nox -s bench    library and build benchmarks -> benchmarks/results.json and results.md
    nox -s experiments  small models trained per encoding -> experiments/results.json and .md
    nox -s serve    live preview of one language (nox -s serve -- zh)
    nox -s lint     ruff and mypy (pinned)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
BUILD = ROOT / "_build"
HTML = BUILD / "html"
LANGS = ("en", "zh")
CONSTRAINTS = ("-c", "requirements/constraints.txt")
# What ruff checks (nox -s lint, and tests/package/test_lint.py in nox -s tests).
LINT_PATHS = ("posenc", "tests", "conf.py", "noxfile.py", "docs/_ext", "tools", "benchmarks",
              "experiments")

nox.options.sessions = ["docs"]
# Reusing an environment keeps a second `nox -s docs` quick; tools/env_sync.py then
# removes whatever the requirements no longer ask for, so a reused environment holds what a
# fresh one would (CI always starts from fresh ones).
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True


def _install(session: nox.Session, requirements: str) -> None:
    session.install("-r", requirements, *CONSTRAINTS)
    session.install("--no-deps", "-e", ".")
    session.run("python", "tools/env_sync.py", requirements)


def _run_outside(session: nox.Session, *cmd: str) -> None:
    """Run ``cmd`` with the environment nox was started in (session.run would put this
    session's virtualenv first on PATH, and a kernel or a nested nox would find it)."""
    session.log(" ".join(cmd))
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    if subprocess.run(cmd, cwd=ROOT, env=env).returncode != 0:
        session.error(f"failed: {' '.join(cmd)}")


def _nox_docs_fresh(session: nox.Session, *posargs: str) -> Path:
    """Run the README's `nox -s docs` in a freshly created environment; its python.

    The environment is made from requirements/docs.txt alone, next to this session's own
    (the same --envdir), so a page that imports a test-only package fails here as it
    would on a reader's machine.  The nested nox runs with the outer environment, not with
    this session's virtualenv on PATH.
    """
    envdir = Path(session.virtualenv.location).parent
    _run_outside(session, sys.executable, "-m", "nox", "--envdir", str(envdir),
                 "--reuse-venv=no", "-s", "docs", "--", *posargs)
    python = envdir / "docs" / "bin" / "python"
    if not python.exists():
        session.error(f"nox -s docs left no environment at {python.parent.parent}")
    return python


def _build_site(session: nox.Session, *extra: str, builder: str = "html") -> None:
    """Both languages at once (tools/build_site.py): two sphinx-build processes, each with
    its own environment and execution cache, sharing the memo in _build/.memo.  Output is
    prefixed with the language; a failure in either fails the session and prints that
    language's whole output again.  Logs the Sphinx time per language, the wall time and
    the CPU time; after an html build, copies the chooser and the 404 page to the root.
    """
    session.run("python", "tools/build_site.py", "-b", builder, "--", *extra)


@nox.session(python="3.11")
def docs(session: nox.Session) -> None:
    """Build the site, both languages; the execution cache keeps warm builds quick."""
    _install(session, "requirements/docs.txt")
    _build_site(session, *session.posargs)


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """Everything CI checks: unit/property/parity tests, the README's docs build in a fresh
    environment, doctests, built-site and browser tests."""
    _install(session, "requirements/test.txt")
    # one pytest process per core (pytest-xdist): these tests are CPU-bound.  Each file's
    # tests stay in one process, in order (--dist loadfile): a module's fixture, such as
    # test_distribution's build in the working tree, then runs once, not once per process
    session.run("pytest", "-n", "auto", "--dist", "loadfile", "-m", "not build and not browser",
                "--doctest-modules", "posenc", "experiments", "tests")
    # The site, built the way the README builds it: `nox -s docs`, in an environment
    # created afresh from requirements/docs.txt alone, executing every page (the execution
    # cache and the memo are emptied first; the doctest builder after it then reuses those
    # fresh outputs instead of executing again).
    shutil.rmtree(BUILD / ".jupyter_cache", ignore_errors=True)
    shutil.rmtree(BUILD / ".memo", ignore_errors=True)
    docs_python = _nox_docs_fresh(session, "-E")
    _run_outside(session, str(docs_python), "tools/build_site.py", "-b", "doctest")
    # the whole-book PDFs the site links to (Chromium prints the built pages)
    session.run("python", "tools/build_pdf.py")
    # axe-core for the accessibility check (tests/book/test_a11y.py): npm's package at the
    # version tests/a11y/package-lock.json pins, into tests/a11y/node_modules.
    if shutil.which("npm"):
        session.run("npm", "ci", "--prefix", "tests/a11y", "--no-audit", "--no-fund",
                    external=True)
    else:
        session.warn("npm is not installed: the accessibility test cannot run axe-core")
    # The built-site tests execute downloaded notebooks with that environment's kernel.
    # (in one process per core too: Chromium's rendering shares the cores with them)
    session.run("pytest", "-n", "auto", "-m", "build or browser", "tests",
                env={"POSENC_DOCS_PYTHON": str(docs_python)})


@nox.session(python="3.11")
def pdf(session: nox.Session) -> None:
    """The whole book as one PDF per language, _build/html/<lang>/posenc-<lang>.pdf,
    printed by Chromium (/usr/bin/chromium, through Playwright) from the site that
    ``nox -s docs`` built; then every page's download menu links to it."""
    _install(session, "requirements/test.txt")
    session.run("python", "tools/build_pdf.py", *session.posargs)


@nox.session(python="3.11")
def doctest(session: nox.Session) -> None:
    """The {doctest} examples in the pages and the Examples in posenc's docstrings."""
    _install(session, "requirements/test.txt")
    session.run("pytest", "--doctest-modules", "posenc", "-q")
    _build_site(session, builder="doctest")


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Library and build benchmarks; writes benchmarks/results.{json,md}.

    ``nox -s bench`` runs everything (``--build``); arguments after ``--`` replace that,
    e.g. ``nox -s bench -- --quick`` or ``nox -s bench -- --build-only``.  On a GPU
    machine ``nox -s bench -- --device cuda`` runs the GPU tier instead (benchmarks/gpu.py:
    the fused kernel against copy_, the compiled rotate_half formula, transformers and
    Liger; about 5 minutes on one H100).
    """
    _install(session, "requirements/bench.txt")
    if "--device" in session.posargs:
        # the GPU tier: benchmarks/gpu.py -> benchmarks/results-gpu.{json,md}
        session.install("triton", *CONSTRAINTS)
        session.run("python", "benchmarks/gpu.py", *session.posargs)
        return
    session.run("python", "benchmarks/run.py", *(session.posargs or ["--build"]))


@nox.session(python="3.11")
def experiments(session: nox.Session) -> None:
    """Train and evaluate the small models; writes experiments/results.{json,md}.

    ``nox -s experiments`` runs the CPU tier (hours of one-thread compute on the 2-core
    machine; processes can split it: ``-- --encodings rope,alibi --tasks ""`` (the
    fine-tuning), ``-- --tasks copy,passkey --no-finetune --no-more-seeds``, then one plain
    run that finds every unit done and writes the results); every finished unit is a file
    under experiments/units/<tier>, keyed on its configuration and on its stage's code
    (experiments/stage_*.py and what they import) and recording its commit, so an
    interrupted run, or a run on another machine from the committed files, resumes instead
    of training again (``python experiments/rekey.py --from CODE`` carries units across a
    change that moves code without changing a number, after re-running a sample bit for
    bit).  ``nox -s experiments -- --quick`` checks the harness in about a minute;
    ``nox -s experiments -- --tier gpu --device cuda --time-budget SECONDS`` runs the GPU
    tier as one budgeted call (``--corpus-file`` reads a corpus prepared with
    ``--save-corpus``, for a machine whose SymPy differs or is absent).
    """
    _install(session, "requirements/experiments.txt")
    session.run("python", "experiments/run.py", *session.posargs)


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
    """Static checks: ruff, and mypy on posenc/ (pinned; also in requirements/test.txt,
    so that nox -s tests runs it too: tests/package/test_typing.py)."""
    session.install("ruff==0.14.0")
    session.run("ruff", "check", *LINT_PATHS)
    # mypy reads the pinned numpy and torch of the test environment for their types
    _install(session, "requirements/test.txt")
    session.install("mypy==2.4.1", *CONSTRAINTS)
    session.run("mypy")  # [tool.mypy] in pyproject.toml: files = posenc
