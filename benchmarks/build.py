"""How long the book takes to build: cold, warm, and after small edits.

Run by ``python benchmarks/run.py --build``.  It never touches the working tree: the
committed tree (``git archive HEAD``) is unpacked into a temporary folder and built
there, with its own ``_build`` (``POSENC_BUILD_DIR``) and the project's docs
environment: ``$POSENC_SPHINX_BUILD``, else ``.venv/bin/sphinx-build`` of the checkout,
else the ``sphinx-build`` next to the running interpreter (the ``bench`` nox session
has no Sphinx of its own).  The copy's root
comes first on ``PYTHONPATH``, so the notebook kernels import the copy's ``posenc`` --
the one the edit below changes.  Four builds of both languages, one language after
the other as ``nox -s docs`` does:

1. cold: empty build folder and execution cache;
2. warm: nothing changed;
3. prose: one sentence added to one page (English ``PROSE_PAGE``);
4. library: one line added to the docstring of one ``posenc`` function.

For each build it records the wall time per language and which pages Sphinx re-read
and MyST-NB executed (its "Executing notebook" / "Executed notebook in" log lines) or
served from the execution cache ("Using cached notebook").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LANGS = ("en", "zh")
PROSE_PAGE = "rope"  # docs/en/rope.md gets one sentence more
LIBRARY_FILE = "posenc/sinusoidal.py"  # one function's docstring gets one line more

_EXEC = re.compile(r"(?P<doc>[\w\-/]+)\.(?:md|ipynb)(?::\d+)?: (?:WARNING: )?"
                   r"(?P<what>Executing notebook|Executed notebook in (?P<s>[\d.]+) seconds"
                   r"|Using cached notebook)")
_READ = re.compile(r"reading sources\.\.\. \[\s*\d+%\] (?P<doc>[\w\-/]+)")


def parse_log(text: str) -> dict:
    """Pages re-read, executed (with seconds) and served from cache, from a sphinx log."""
    executed: dict[str, float] = {}
    cached: set[str] = set()
    for m in _EXEC.finditer(text):
        doc = m.group("doc").rsplit("/", 1)[-1]
        if m.group("s") is not None:
            executed[doc] = float(m.group("s"))
        elif m.group("what") == "Executing notebook":
            executed.setdefault(doc, float("nan"))
        else:
            cached.add(doc)
    read = sorted({m.group("doc") for m in _READ.finditer(text)})
    return {"read": read, "executed": dict(sorted(executed.items())), "cached": sorted(cached)}


def _sphinx_build() -> str:
    if os.environ.get("POSENC_SPHINX_BUILD"):
        return os.environ["POSENC_SPHINX_BUILD"]
    for exe in (ROOT / ".venv" / "bin" / "sphinx-build",
                Path(sys.executable).with_name("sphinx-build")):
        if exe.exists():
            return str(exe)
    raise RuntimeError("no sphinx-build found: set POSENC_SPHINX_BUILD or create .venv")


def build_once(copy: Path, label: str, log) -> dict:
    """Build both languages in ``copy``; return times and page lists per language."""
    out = {"step": label, "languages": {}}
    total = 0.0
    for lang in LANGS:
        env = {**os.environ, "POSENC_LANG": lang, "PYTHONHASHSEED": "0",
               "POSENC_BUILD_DIR": str(copy / "_build"),
               "PYTHONPATH": os.pathsep.join([str(copy), os.environ.get("PYTHONPATH", "")])}
        cmd = [_sphinx_build(), "-b", "html", "-c", ".", "-W", "--keep-going",
               f"docs/{lang}", str(copy / "_build" / "html" / lang)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        text = proc.stdout + proc.stderr
        (copy / f"build-{label}-{lang}.log").write_text(text)
        if proc.returncode != 0:
            raise RuntimeError(f"{label} build of {lang} failed:\n{text[-4000:]}")
        pages = parse_log(text)
        out["languages"][lang] = {"seconds": seconds, **pages}
        total += seconds
        log(f"  {label:8s} {lang}: {seconds:6.1f} s, executed {len(pages['executed'])}, "
            f"re-read {len(pages['read'])}")
    out["seconds"] = total
    return out


def _edit_prose(copy: Path) -> str:
    page = copy / "docs" / "en" / f"{PROSE_PAGE}.md"
    text = page.read_text(encoding="utf-8")
    # Append a sentence to the first prose paragraph after the title.
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if i > 0 and line.strip() and not line.startswith(("#", "`", ":", "-", "(", "$", "{")) \
                and lines[i - 1].strip() == "" and i + 1 < len(lines) \
                and any(lines[j].startswith("# ") for j in range(i)):
            lines[i] = line.rstrip("\n") + " (An edited sentence.)\n"
            page.write_text("".join(lines), encoding="utf-8")
            return f"docs/en/{PROSE_PAGE}.md"
    page.write_text(text + "\nAn edited sentence.\n", encoding="utf-8")
    return f"docs/en/{PROSE_PAGE}.md"


def _edit_library(copy: Path) -> str:
    path = copy / LIBRARY_FILE
    text = path.read_text(encoding="utf-8")
    m = re.search(r'(\ndef (\w+)\(.*?\n(\s+)""")', text, flags=re.S)
    if m is None:
        raise RuntimeError(f"no documented function found in {LIBRARY_FILE}")
    indent = m.group(3)
    new = text[: m.end()] + "Edited by the build benchmark.\n\n" + indent + text[m.end():]
    path.write_text(new, encoding="utf-8")
    return f"{LIBRARY_FILE}:{m.group(2)}"


def run_build_benchmark(log=print, keep: bool = False) -> dict:
    """Cold, warm, prose-edit and library-edit builds of a copy of HEAD."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix="posenc-buildbench-"))
    copy = tmp / "repo"
    copy.mkdir()
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(copy)], input=archive, check=True)
    log(f"build benchmark: HEAD {commit} unpacked in {copy}; {_sphinx_build()}")
    pages = sorted(p.stem for p in (copy / "docs" / "en").glob("*.md"))
    try:
        steps = [build_once(copy, "cold", log), build_once(copy, "warm", log)]
        edited_page = _edit_prose(copy)
        steps.append({**build_once(copy, "prose", log), "edited": edited_page})
        edited_fn = _edit_library(copy)
        steps.append({**build_once(copy, "library", log), "edited": edited_fn})
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return {"commit": commit, "languages": list(LANGS), "steps": steps,
            "pages": pages, "sphinx_build": "sphinx-build -b html -c . -W --keep-going"}
