"""How long the book takes to build, now and in the configuration before its rework.

Run by ``python benchmarks/run.py --build``.  It never touches the working tree: the
committed tree (``git archive HEAD``) is unpacked twice into a temporary folder and built
there, each copy with its own ``_build`` (``POSENC_BUILD_DIR``), using the project's docs
environment: the Python next to ``$POSENC_SPHINX_BUILD``, else ``.venv/bin/python`` of the
checkout, else the running interpreter.  Each copy's root comes first on
``PYTHONPATH``, so the notebook kernels import the copy's ``posenc`` -- the one the edits
below change.  Both copies are built by their ``tools/build_site.py``, as ``nox -s docs``
builds:

* **current**: HEAD as it is -- both languages at once, the disk memo on, each page
  re-executed only when a module it imported (or a file it read) changed;
* **previous**: HEAD's pages and ``posenc`` with the build configuration of
  ``BASELINE_COMMIT`` (its ``conf.py`` and ``docs/_ext/posenc_book.py``: one execution
  cache per hash of all of ``posenc``, no memo), one language after the other
  (``--sequential``), as that commit's ``nox -s docs`` built.

The builds alternate between the two copies so that a change in the machine's load
affects both alike:

1. cold: empty build folder, execution cache and memo (previous, then current);
2. warm: nothing changed (current, then previous);
3. analysis: one line added to the docstring of one function of ``ANALYSIS_FILE``, a
   module of ``posenc.analysis`` (both copies);
4. prose (current only): one sentence added to one page (English ``PROSE_PAGE``);
5. library (current only, with ``library_step=True``): one line added to the docstring
   of a function of ``LIBRARY_FILE``, which every page imports (the module-to-pages map
   below says the same without building).

For each build it records the wall time and the CPU time (user + system of sphinx-build
and its notebook kernels) per language and for the step, and which pages Sphinx re-read
and MyST-NB executed (its "Executing notebook" / "Executed notebook in" log lines) or
served from the execution cache ("Using cached notebook").  From the current copy it also
records the memo's hits and misses in the cold build, and for every ``posenc`` module the
pages whose execution imported it (what an edit to that module re-executes).  The goals
of the rework are evaluated from the same run: cold <= 0.6 x previous, warm <= 10 s,
analysis edit <= 0.5 x previous.

``results["build"]["steps"]`` keeps the current copy's cold, warm and prose (and
library) steps, which the benchmarks page renders; the analysis step, the previous
copy's steps, the goals, the memo counts and the module-to-pages map are stored beside
them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LANGS = ("en", "zh")
PROSE_PAGE = "rope-scores"  # docs/en/rope-scores.md gets one sentence more
LIBRARY_FILE = "posenc/sinusoidal.py"  # one function's docstring gets one line more
ANALYSIS_FILE = "posenc/analysis/uniqueness.py"  # the "edit one analysis module" step
#: The last commit before the build's rework; its build configuration files.
BASELINE_COMMIT = "60762bb"
BASELINE_FILES = ("conf.py", "docs/_ext/posenc_book.py")
#: Issue 16's goals: (step, kind, limit).  "ratio": current / previous wall time.
GOALS = (("cold", "ratio", 0.6), ("warm", "seconds", 10.0), ("analysis", "ratio", 0.5))

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


def _python() -> str:
    """The interpreter of the docs environment (it runs tools/build_site.py)."""
    if os.environ.get("POSENC_SPHINX_BUILD"):
        return str(Path(os.environ["POSENC_SPHINX_BUILD"]).with_name("python"))
    for exe in (ROOT / ".venv" / "bin" / "python", Path(sys.executable)):
        if exe.exists() and subprocess.run([str(exe), "-c", "import sphinx, myst_nb"],
                                           capture_output=True).returncode == 0:
            return str(exe)
    raise RuntimeError("no Python with Sphinx found: set POSENC_SPHINX_BUILD or create .venv")


def build_once(copy: Path, label: str, log, *, sequential: bool = False) -> dict:
    """Build both languages in ``copy`` with its tools/build_site.py; times and pages."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "POSENC_BUILD_DIR": str(copy / "_build"),
           "PYTHONPATH": os.pathsep.join([str(copy), os.environ.get("PYTHONPATH", "")])}
    env.pop("POSENC_MEMO_DIR", None)  # conf.py decides (the previous one has no memo)
    env.pop("POSENC_LANG", None)
    report = copy / f"build-{label}.json"
    cmd = [_python(), "tools/build_site.py", "--no-quiet", "--json", str(report)]
    if sequential:
        cmd.append("--sequential")
    load = os.getloadavg()[0]
    proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True)
    if not report.exists():
        raise RuntimeError(f"{label}: tools/build_site.py failed:\n{proc.stdout[-4000:]}"
                           f"{proc.stderr[-4000:]}")
    result = json.loads(report.read_text(encoding="utf-8"))
    out = {"step": label, "languages": {}, "parallel": result["parallel"],
           "load_average": [round(load, 2), round(os.getloadavg()[0], 2)]}
    for lang, r in result["languages"].items():
        (copy / f"build-{label}-{lang}.log").write_text(r["output"], encoding="utf-8")
        if r["returncode"] != 0:
            raise RuntimeError(f"{label} build of {lang} failed:\n{r['output'][-4000:]}")
        pages = parse_log(r["output"])
        out["languages"][lang] = {"seconds": r["seconds"], "cpu_seconds": r["cpu_seconds"],
                                  **pages}
    out["seconds"] = result["wall_seconds"]
    out["cpu_seconds"] = sum(v["cpu_seconds"] for v in out["languages"].values())
    log(f"  {label:9s} {'sequential' if sequential else 'parallel':10s} "
        f"wall {out['seconds']:6.1f} s, CPU {out['cpu_seconds']:6.1f} s, executed "
        + ", ".join(f"{lang} {len(v['executed'])}" for lang, v in out["languages"].items())
        + f" (load {out['load_average'][0]:.1f})")
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


def _edit_analysis(copy: Path) -> str:
    path = copy / ANALYSIS_FILE
    text = path.read_text(encoding="utf-8")
    m = re.search(r'\ndef (\w+)\([^)]*\)[^\n]*:\n(\s+)r?"""', text)
    if m is None:
        raise RuntimeError(f"no documented function found in {ANALYSIS_FILE}")
    new = text[: m.end()] + "Edited by the build benchmark.\n\n" + m.group(2) + text[m.end():]
    path.write_text(new, encoding="utf-8")
    return f"{ANALYSIS_FILE}:{m.group(1)}"


def evaluate_goals(current: dict, previous: dict) -> list[dict]:
    """Issue 16's goals from the steps of one run (``{step: step result}`` per copy)."""
    out = []
    for step, kind, limit in GOALS:
        cur = current[step]
        prev = previous.get(step)
        if kind == "ratio":
            value = cur["seconds"] / prev["seconds"]
            cpu = cur["cpu_seconds"] / prev["cpu_seconds"]
            rule = f"{step}: wall time <= {limit} x previous configuration"
        else:
            value, cpu = cur["seconds"], None
            rule = f"{step}: wall time <= {limit} s"
        out.append({"step": step, "rule": rule, "value": value, "limit": limit,
                    "cpu_ratio": cpu, "current_seconds": cur["seconds"],
                    "previous_seconds": prev["seconds"] if prev else None,
                    "passed": value <= limit})
    return out


def memo_summary(folder: Path) -> dict:
    """Hits, misses and the seconds the hits saved, from the memo's events.jsonl."""
    hits = misses = 0
    saved = computed = 0.0
    path = folder / "events.jsonl"
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event["event"] == "hit":
                hits += 1
                saved += event["seconds"]
            else:
                misses += 1
                computed += event["seconds"]
    return {"hits": hits, "misses": misses, "seconds_saved": saved,
            "seconds_computed": computed}


def module_dependents(manifest: Path) -> dict[str, list[str]]:
    """For each watched file, the pages whose execution used it (from a deps.json)."""
    pages = json.loads(manifest.read_text(encoding="utf-8"))["pages"]
    out: dict[str, list[str]] = {}
    for page, entry in pages.items():
        for file in entry["deps"]:
            out.setdefault(file, []).append(page)
    return {f: sorted(p) for f, p in sorted(out.items())}


def _unpack(dest: Path) -> None:
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def _baseline(dest: Path) -> None:
    """Put BASELINE_COMMIT's build configuration files into the copy ``dest``."""
    for rel in BASELINE_FILES:
        text = subprocess.run(["git", "show", f"{BASELINE_COMMIT}:{rel}"], cwd=ROOT,
                              capture_output=True, check=True).stdout
        (dest / rel).write_bytes(text)


def run_build_benchmark(log=print, keep: bool = False, library_step: bool = False) -> dict:
    """Cold, warm and edit builds of a copy of HEAD, now and in the previous configuration.

    ``library_step`` adds step 5 (about two more minutes: every page re-executes); it is
    off by default so that ``nox -s bench`` stays near ten minutes.
    """
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix="posenc-buildbench-"))
    cur, prev = tmp / "current", tmp / "previous"
    _unpack(cur)
    _unpack(prev)
    _baseline(prev)
    log(f"build benchmark: HEAD {commit} in {cur}, with {BASELINE_COMMIT}'s "
        f"{' and '.join(BASELINE_FILES)} in {prev}; {_python()}")
    pages = sorted(p.stem for p in (cur / "docs" / "en").glob("*.md"))
    steps: dict[str, dict] = {}
    previous: dict[str, dict] = {}
    try:
        previous["cold"] = build_once(prev, "cold", log, sequential=True)
        steps["cold"] = build_once(cur, "cold", log)
        memo = memo_summary(cur / "_build" / ".memo")
        dependents = module_dependents(cur / "_build" / ".jupyter_cache" / "en" / "deps.json")
        steps["warm"] = build_once(cur, "warm", log)
        previous["warm"] = build_once(prev, "warm", log, sequential=True)
        edited = _edit_analysis(cur)
        _edit_analysis(prev)
        steps["analysis"] = {**build_once(cur, "analysis", log), "edited": edited}
        previous["analysis"] = {**build_once(prev, "analysis", log, sequential=True),
                                "edited": edited}
        edited_page = _edit_prose(cur)
        steps["prose"] = {**build_once(cur, "prose", log), "edited": edited_page}
        if library_step:
            edited_fn = _edit_library(cur)
            steps["library"] = {**build_once(cur, "library", log), "edited": edited_fn}
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    goals = evaluate_goals(steps, previous)
    for g in goals:
        log(f"  goal {g['rule']}: {g['value']:.2f} -> {'PASS' if g['passed'] else 'FAIL'}")
    return {"commit": commit, "languages": list(LANGS),
            "steps": [steps[k] for k in ("cold", "warm", "prose", "library") if k in steps],
            "analysis_step": steps["analysis"],
            "previous": {"commit": BASELINE_COMMIT, "files": list(BASELINE_FILES),
                         "configuration": "one language after the other, one execution "
                                          "cache per hash of all of posenc, no memo",
                         "steps": [previous[k] for k in ("cold", "warm", "analysis")]},
            "goals": goals, "memo_cold": memo, "module_dependents": dependents,
            "pages": pages,
            "sphinx_build": "python tools/build_site.py (sphinx-build -b html -c . -W "
                            "--keep-going per language)"}


def comparison_markdown(build: dict) -> str:
    """The side-by-side table, the goals and the module-to-pages map, as Markdown."""
    prev = {s["step"]: s for s in build["previous"]["steps"]}
    cur = {s["step"]: s for s in build["steps"]}
    cur["analysis"] = build["analysis_step"]
    lines = [f"### Against the previous build configuration ({build['previous']['commit']}: "
             f"{build['previous']['configuration']})\n",
             "| build | previous wall s | current wall s | ratio | previous CPU s "
             "| current CPU s | pages executed (previous / current, both languages) |",
             "|---|--:|--:|--:|--:|--:|---|"]
    for step in ("cold", "warm", "analysis"):
        p, c = prev[step], cur[step]
        n = [sum(len(v["executed"]) for v in s["languages"].values()) for s in (p, c)]
        lines.append(f"| {step} | {p['seconds']:.1f} | {c['seconds']:.1f} "
                     f"| {c['seconds'] / p['seconds']:.2f} | {p['cpu_seconds']:.1f} "
                     f"| {c['cpu_seconds']:.1f} | {n[0]} / {n[1]} |")
    lines.append("")
    for g in build["goals"]:
        lines.append(f"- {g['rule']}: {g['value']:.2f} -> {'PASS' if g['passed'] else 'FAIL'}")
    memo = build.get("memo_cold") or {}
    if memo:
        lines.append(f"- memo in the cold build: {memo['hits']} hits saved "
                     f"{memo['seconds_saved']:.1f} s; {memo['misses']} computed "
                     f"({memo['seconds_computed']:.1f} s)")
    dependents = build.get("module_dependents") or {}
    if dependents:
        n_pages = len({p for pages in dependents.values() for p in pages})
        lines += ["", "Pages an edit re-executes (per language), from the recorded imports:", "",
                  "| file | pages |", "|---|---|"]
        for file, pages in dependents.items():
            shown = "all" if len(pages) == n_pages else ", ".join(pages)
            lines.append(f"| `{file}` | {len(pages)}: {shown} |")
    return "\n".join(lines) + "\n"
