"""The Pages workflow and CI run what the README says, so the three cannot drift apart.

The README gives two commands; ``.github/workflows/pages.yml`` must build the site with
the first, in the Python the noxfile's docs session asks for, publish what that build
writes (the site and the executed notebooks) and tell the build where it is published;
``.ci/run`` must run the second.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"
# the build's extensions (posenc_urls, posenc_notebook), for every test here: each test
# may run alone, in a process of its own (pytest-xdist)
sys.path.insert(0, str(ROOT / "docs" / "_ext"))


def readme_commands() -> dict[str, str]:
    """session -> the README's command line for it (``python3 -m pip install nox && ...``)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "README has no bash block with the commands"
    out = {}
    for line in block[1].splitlines():
        command = line.split("#", 1)[0].strip()
        m = re.search(r"nox -s (\w+)$", command)
        if m:
            out[m[1]] = command
    return out


def nox_session_python(name: str) -> str:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call):
                    for kw in dec.keywords:
                        if kw.arg == "python":
                            return ast.literal_eval(kw.value)
    raise LookupError(f"noxfile has no session {name!r} with a python")


def steps() -> list[dict]:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return workflow["jobs"]["build"]["steps"]


def _step(predicate) -> tuple[int, dict]:
    found = [(i, s) for i, s in enumerate(steps()) if predicate(s)]
    assert len(found) == 1, f"expected one such step, found {len(found)}"
    return found[0]


def test_the_readme_names_both_commands():
    commands = readme_commands()
    assert commands == {
        "docs": "python3 -m pip install nox && nox -s docs",
        "tests": "python3 -m pip install nox && nox -s tests",
    }


def test_the_workflow_builds_with_the_readme_command_in_the_docs_python():
    _, build = _step(lambda s: "nox -s docs" in str(s.get("run", "")))
    assert build["run"].strip() == readme_commands()["docs"]
    _, setup = _step(lambda s: str(s.get("uses", "")).startswith("actions/setup-python"))
    assert str(setup["with"]["python-version"]) == nox_session_python("docs")


def test_the_build_is_told_where_it_is_published():
    import posenc_urls

    source = Path(posenc_urls.__file__).read_text(encoding="utf-8")
    pages_i, pages = _step(lambda s: str(s.get("uses", "")).startswith("actions/configure-pages"))
    build_i, build = _step(lambda s: "nox -s docs" in str(s.get("run", "")))
    assert pages_i < build_i, "configure-pages must run before the build that uses its URL"
    env = build.get("env", {})
    assert set(env) == {"POSENC_REPO", "POSENC_SITE_URL"}
    assert all(f'"{name}"' in source for name in env), "posenc_urls reads other names"
    assert env["POSENC_REPO"] == "${{ github.repository }}"
    assert env["POSENC_SITE_URL"] == "${{ steps.%s.outputs.base_url }}" % pages["id"]
    text = WORKFLOW.read_text(encoding="utf-8")
    assert not re.search(r"github\.com/(?!\$\{)", text.split("jobs:", 1)[1]), \
        "the workflow names a repository owner"


def test_the_workflow_publishes_what_the_build_writes():
    _, publish = _step(lambda s: "_sources" in str(s.get("run", "")))
    run = publish["run"]
    langs = re.search(r"for lang in ([\w ]+); do", run)[1].split()
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert f'LANGS = {tuple(langs)!r}'.replace("'", '"') in noxfile
    assert "_build/html/\"$lang\"/_sources -name '*.ipynb'" in run
    for rel in re.findall(r"cp (requirements/\S+)", run):
        assert (ROOT / rel).is_file(), rel
    # Binder gets what the notebooks import (the slim file their first cell installs)
    assert "requirements/notebooks.txt" in run and "requirements/constraints.txt" in run
    # and the results files, where the notebooks' first cell looks before downloading
    import posenc_notebook as pn

    for rel in pn.RESULTS_VARIABLES:
        assert rel in run and (ROOT / rel).is_file(), rel
    assert "posenc @ git+https://github.com/${GITHUB_REPOSITORY}@${GITHUB_SHA}" in run
    _, upload = _step(lambda s: str(s.get("uses", "")).startswith("actions/upload-pages"))
    assert upload["with"]["path"] == "_build/html"
    assert 'HTML = BUILD / "html"' in noxfile and 'BUILD = ROOT / "_build"' in noxfile


def test_the_workflow_publishes_the_book_pdfs_the_pages_link():
    """The PDFs are printed from the built site (nox -s pdf, which then links them from
    every page) before the site is uploaded: the published download menu's "The whole
    book (PDF)" is never a 404."""
    build_i, _ = _step(lambda s: "nox -s docs" in str(s.get("run", "")))
    pdf_i, pdf = _step(lambda s: "nox -s pdf" in str(s.get("run", "")))
    upload_i, _ = _step(lambda s: str(s.get("uses", "")).startswith("actions/upload-pages"))
    assert build_i < pdf_i < upload_i
    assert pdf["run"].strip() == "nox -s pdf"


def test_ci_runs_the_readme_test_command():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lines = [ln.strip() for ln in script.splitlines() if not ln.strip().startswith("#")]
    assert readme_commands()["tests"] in lines


def test_every_results_file_a_page_reads_is_watched_and_downloadable():
    """A committed results file read by a page must be a watched dependency (its change
    re-executes the page, and the downloaded notebook fetches or finds it) and have the
    variable through which posenc.figures reads it from beside the notebook."""
    import posenc_notebook as pn

    conf = (ROOT / "conf.py").read_text(encoding="utf-8")
    read = set()
    for page in (ROOT / "docs" / "en").glob("*.md"):
        text = page.read_text(encoding="utf-8")
        if "load_experiment_results_gpu(" in text:
            read.add("experiments/results-gpu.json")
        if "load_experiment_results(" in text:
            read.add("experiments/results.json")
        if "load_experiment_recheck(" in text:
            read.add("experiments/recheck-cpu.json")
    assert read == {"experiments/results.json", "experiments/results-gpu.json",
                    "experiments/recheck-cpu.json"}
    for rel in read:
        assert rel in pn.RESULTS_VARIABLES, rel
        a, b = rel.split("/")
        assert f'ROOT / "{a}" / "{b}"' in conf, rel
