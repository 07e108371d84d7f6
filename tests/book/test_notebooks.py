"""The downloadable notebooks: converted correctly, complete, and runnable as notebooks.

Three layers:

* the converter (docs/_ext/posenc_notebook.py) on small inputs with a resolver of the
  test's own: every role and block the book uses, and an error for one it does not know;
* every built notebook of both languages (``build`` marker): outputs and figures in place,
  no MyST syntax left, every glue value substituted, every link to the site pointing at a
  page and an anchor that exist in the build, the install cell first and pinned;
* two downloaded notebooks, one per language, executed top to bottom in a fresh kernel of
  the environment ``nox -s docs`` created from requirements/docs.txt alone (the tests
  session passes its python as ``POSENC_DOCS_PYTHON``), in an empty folder, so that
  nothing of the checkout but the installed posenc can help them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from browser_site import LANGS, ROOT, in_ci, require_site, skip_or_fail

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import posenc_notebook as pn  # noqa: E402
from posenc_urls import site_urls  # noqa: E402

REPO_URL, SITE_URL = site_urls(os.environ)
MYST_LEFT = [
    re.compile(r"\{[\w:.-]+\}`"),            # a role
    re.compile(r"^\s*\([^()\s]+\)=\s*$", re.M),  # a label target
    re.compile(r"^(`{3,}|:{3,})\{", re.M),   # a directive
    re.compile(r"\$\$\s*\([\w-]+\)"),         # an equation label
]


# -- The converter -----------------------------------------------------------------------

class FakeResolver(pn.Resolver):
    base = "https://example.org/book/en/"

    def ref(self, label, title):
        return pn.Link(title or f"Section {label}", f"{self.base}p.html#{label}")

    def numref(self, label, title):
        return pn.Link((title or "Fig. %s").replace("%s", "3"), f"{self.base}p.html#{label}")

    def eq(self, label):
        return pn.Link("(2)", f"{self.base}p.html#equation-{label}")

    def equation_number(self, label):
        return {"e-one": "2"}.get(label)

    def doc(self, docname, title):
        return pn.Link(title or docname.title(), f"{self.base}{docname}.html")

    def term(self, term, title):
        return pn.Link(title or term, f"{self.base}glossary.html#term-{term}")

    def api(self, name, title, role):
        return pn.Link(name.lstrip("~") + "()", f"{self.base}api.html#{name.lstrip('~')}")

    def cite(self, keys, textual):
        return " & ".join(f"[{k} (2021)]({self.base}references.html#{k})" for k in keys)

    def figure_caption_prefix(self, label):
        return "Fig. 3 " if label else ""


GLUE = {
    "ratio": {"data": {"text/plain": "0.123456"}},
    "count": {"data": {"text/plain": "1234567"}},
    "name": {"data": {"text/plain": "'RoPE'"}},
    "table": {"data": {"text/markdown": "| a |\n|---|\n| 1 |", "text/plain": "x"}},
    "fig": {"data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}},
}


def md(source: str) -> tuple[str, dict]:
    return pn.convert_markdown(source, GLUE, FakeResolver())


def test_glue_values_are_substituted_with_their_formats():
    text, _ = md("r = {glue:text}`ratio:.2f`, n = {glue:text}`count:,d`, "
                 "{glue:text}`name`, {glue}`ratio`")
    assert text == "r = 0.12, n = 1,234,567, RoPE, 0.123456"


def test_references_become_links_to_the_published_pages():
    text, _ = md("See {ref}`the shift <props-shift>`, {ref}`rope-where`, {numref}`fig-a`, "
                 "{numref}`Figure %s <fig-b>`, {eq}`e-one`, {doc}`rope`, "
                 "{term}`positional encoding`, {func}`~posenc.apply_rope`.")
    b = FakeResolver.base
    assert text == (
        f"See [the shift]({b}p.html#props-shift), [Section rope-where]({b}p.html#rope-where), "
        f"[Fig. 3]({b}p.html#fig-a), [Figure 3]({b}p.html#fig-b), "
        f"[(2)]({b}p.html#equation-e-one), [Rope]({b}rope.html), "
        f"[positional encoding]({b}glossary.html#term-positional encoding), "
        f"[`posenc.apply_rope()`]({b}api.html#posenc.apply_rope)."
    )


def test_a_role_may_span_a_line_break():
    text, _ = md("See {ref}`the end of\nthe chapter <lc-summary>` and {glue:text}`ratio:.1f`.")
    b = FakeResolver.base
    assert text == f"See [the end of\nthe chapter]({b}p.html#lc-summary) and 0.1."


def test_citations_textual_and_parenthetical():
    text, _ = md("{cite:t}`su2021` and {cite}`a2020,b2022`")
    assert "[su2021 (2021)]" in text and "[a2020 (2021)]" in text and "[b2022 (2021)]" in text
    assert "{cite" not in text


def test_labels_comments_and_equation_numbers():
    text, _ = md("(sec-x)=\n## Title\n% a comment\n\n$$\na = b\n$$ (e-one)\n\n"
                 "$$ c = d $$ (e-other)\n\n$$\ne = f\n$$")
    assert "(sec-x)=" not in text and "comment" not in text
    assert "a = b\n \\tag{2} $$" in text
    assert "$$ c = d $$" in text and "(e-other)" not in text
    assert "$$\ne = f\n$$" in text


def test_display_math_is_left_verbatim_and_roles_inside_it_are_caught():
    text, _ = md("$$\nx^{2} + \\mathrm{PE}(p)\n$$")
    assert text == "$$\nx^{2} + \\mathrm{PE}(p)\n$$"
    with pytest.raises(pn.ConversionError, match="MyST role left"):
        md("$$\n{glue:text}`ratio`\n$$ (e-one)")


def test_blocks_figures_tables_doctests_admonitions():
    text, att = md("```{glue:figure} fig\n:name: fig-one\n:alt: A rising line\n\n"
                   "The caption, with {glue:text}`ratio:.1f`.\n```\n\n"
                   "```{glue:md} table\n:format: myst\n```\n\n"
                   "```{doctest}\n>>> 1 + 1\n2\n```\n\n"
                   "```{note}\nMind {doc}`rope`.\n```\n\n```python\nx = {1: 2}\n```")
    assert att == {"fig.png": {"image/png": "iVBORw0KGgo="}}
    assert "![A rising line](attachment:fig.png)" in text
    assert "*Fig. 3 The caption, with 0.1.*" in text
    assert "| a |\n|---|\n| 1 |" in text
    assert "```python\n>>> 1 + 1\n2\n```" in text
    assert "> **Note**" in text and "> Mind [Rope]" in text
    assert "```python\nx = {1: 2}\n```" in text


@pytest.mark.parametrize("source, what", [
    ("{unknownrole}`x`", "unknownrole"),
    ("```{unknown-directive}\nx\n```", "unknown-directive"),
    ("{glue:text}`nokey`", "nokey"),
    ("```{glue:figure} ratio\n```", "no image"),
])
def test_what_it_cannot_render_is_an_error(source, what):
    with pytest.raises(pn.ConversionError, match=re.escape(what)):
        md(source)


def test_convert_keeps_code_and_outputs_and_puts_the_install_cell_first():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    setup = nbformat.v4.new_code_cell("from myst_nb import glue")
    setup.metadata["tags"] = ["remove-cell"]
    cell = nbformat.v4.new_code_cell("1 + 1")
    cell.outputs = [
        nbformat.v4.new_output("execute_result", {"text/plain": "2"}, execution_count=1),
        nbformat.v4.new_output("display_data", {"application/papermill.record/text/plain":
                                                "3"}, metadata={"scrapbook": {"name": "k"}}),
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("# T\n\n(lab)=\nText {glue:text}`ratio:.3f`."),
                setup, cell]
    out = pn.convert(nb, GLUE, FakeResolver(), "print('install')")
    assert [c.cell_type for c in out.cells] == ["markdown", "code", "code", "code"]
    assert out.cells[0].source == "# T\n\nText 0.123."
    assert out.cells[1].source == "print('install')"
    assert out.cells[1].metadata["tags"] == [pn.INSTALL_TAG]
    assert out.cells[2].metadata["jupyter"] == {"source_hidden": True}
    assert [o.output_type for o in out.cells[3].outputs] == ["execute_result"]
    assert [c.id for c in out.cells] == [f"cell-{i}" for i in range(4)]


def test_install_source_pins_the_commit_and_fetches_data_files():
    src = pn.install_source("en", page="P", title="T", url="https://x/en/p.html",
                            repo="https://github.com/o/r", ref="abc123",
                            data_files=["benchmarks/results.json"])
    raw = "https://raw.githubusercontent.com/o/r/abc123"
    assert f"-r {raw}/requirements/docs.txt -c {raw}/requirements/constraints.txt" in src
    assert '"posenc @ git+https://github.com/o/r@abc123"' in src
    assert "['benchmarks/results.json']" in src and f'"{raw}/" + rel' in src
    zh = pn.install_source("zh", page="P", title="T", url="u", repo="https://github.com/o/r",
                           ref="abc123", data_files=[])
    assert "安装" in zh and "urlretrieve" not in zh


# -- The built notebooks -----------------------------------------------------------------

def _built_notebooks(site: Path) -> list[tuple[str, str, Path]]:
    out = []
    for lang in LANGS:
        for path in sorted((site / lang / "_sources").glob("*.ipynb")):
            out.append((lang, path.stem, path))
    return out


def _ids(html: Path) -> set[str]:
    text = html.read_text(encoding="utf-8")
    return set(re.findall(r'\bid="([^"]+)"', text))


@pytest.mark.build
def test_every_built_notebook_is_executed_and_has_no_myst_left():
    import nbformat

    site = require_site()
    notebooks = _built_notebooks(site)
    if not notebooks:
        skip_or_fail("no notebooks in this build")
    ids: dict[Path, set[str]] = {}
    for lang, name, path in notebooks:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        where = f"{lang}/{name}.ipynb"
        source = (site / lang / "_sources" / f"{name}.md").read_text(encoding="utf-8")
        code = [c for c in nb.cells if c.cell_type == "code"]
        # Every code cell of the page, in order, after the install cell.
        assert pn.INSTALL_TAG in code[0].metadata.get("tags", []), where
        assert len(code) == source.count("```{code-cell}") + 1, f"{where}: cells lost"
        assert all(c.source.strip() in source for c in code[1:]), where
        # Executed: outputs where the page has them, execution counts in order.
        assert any(c.outputs for c in code), f"{where}: no outputs"
        counts = [c.execution_count for c in code[1:] if c.execution_count]
        assert counts == sorted(counts) and counts, f"{where}: not executed in order"
        markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        for pattern in MYST_LEFT:
            left = pattern.search(markdown)
            assert not left, f"{where}: MyST left: {left.group(0)!r}"
        # Every {glue:figure} of the page is an attached image.
        figures = re.findall(r"```\{glue:figure\}\s*(\S+)", source)
        attached = {k for c in nb.cells for k in c.get("attachments", {})}
        assert {f.split(".")[0] for f in attached} >= set(figures), where
        for fig in attached:
            assert f"attachment:{fig}" in markdown, f"{where}: {fig} attached but not shown"
        # Every link into the site reaches a page and an anchor of this build.
        for url in re.findall(r"\]\((https?://[^)\s]+)\)", markdown):
            if not url.startswith(SITE_URL):
                continue
            parts = urlsplit(url)
            page = site / parts.path[len(urlsplit(SITE_URL).path):]
            assert page.is_file(), f"{where}: link to a missing page {url}"
            if parts.fragment:
                found = ids.setdefault(page, _ids(page))
                assert parts.fragment in found, f"{where}: no #{parts.fragment} in {page.name}"


@pytest.mark.build
def test_glued_numbers_reach_the_notebook_text():
    """A number glued into the page's prose is in the notebook's prose, as on the page."""
    import nbformat
    from bs4 import BeautifulSoup

    site = require_site()
    for lang in LANGS:
        nb = nbformat.read(site / lang / "_sources" / "rope.ipynb", as_version=4)
        markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        soup = BeautifulSoup((site / lang / "rope.html").read_text(encoding="utf-8"),
                             "html.parser")
        pasted = [s.get_text() for s in soup.select("article span.pasted-text")]
        assert len(pasted) > 10, f"{lang}: the page pastes few values ({len(pasted)})"
        missing = [t for t in pasted if t not in markdown]
        assert not missing, f"{lang}/rope: glued values not in the notebook text: {missing[:5]}"


# -- Running a downloaded notebook ---------------------------------------------------------

RUNNER = r"""
import json, sys
import nbformat
from nbclient import NotebookClient

nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=False).execute()
nbformat.write(nb, sys.argv[2])
"""

#: Pages executed afresh, one per language (no committed data files, quick to run).
RUN_PAGES = [("en", "rope"), ("zh", "sinusoidal")]


def _docs_python() -> str:
    python = os.environ.get("POSENC_DOCS_PYTHON")
    if python:
        return python
    if in_ci():
        pytest.fail("POSENC_DOCS_PYTHON is not set: nox -s tests passes the python of the "
                    "fresh docs environment (CI=true: not using the test environment)")
    return sys.executable  # a workstation: the environment pytest runs in


def _text_outputs(nb) -> list[list[str]]:
    return [[o["data"]["text/plain"] for o in c.outputs if o.output_type == "execute_result"]
            for c in nb.cells if c.cell_type == "code"]


@pytest.mark.build
@pytest.mark.parametrize("lang, name", RUN_PAGES)
def test_a_downloaded_notebook_runs_in_a_fresh_kernel(tmp_path, lang, name):
    import nbformat

    site = require_site()
    downloaded = site / lang / "_sources" / f"{name}.ipynb"
    if not downloaded.is_file():
        skip_or_fail(f"no {lang}/{name}.ipynb in this build")
    work = tmp_path / "reader"  # an empty folder: no checkout, no results files
    work.mkdir()
    nb_in = work / f"{name}.ipynb"
    nb_in.write_bytes(downloaded.read_bytes())
    runner = tmp_path / "run.py"
    runner.write_text(RUNNER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "POSENC_MEMO_DIR", "VIRTUAL_ENV")}
    result = subprocess.run(
        [_docs_python(), str(runner), str(nb_in), str(work / "out.ipynb")],
        cwd=work, env=env, capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ran = nbformat.read(work / "out.ipynb", as_version=4)
    published = nbformat.read(downloaded, as_version=4)
    # The same numbers as the published notebook: the pages are deterministic.
    assert _text_outputs(ran) == _text_outputs(published)
    install = ran.cells[[c.cell_type for c in ran.cells].index("code")]
    assert pn.INSTALL_TAG in install.metadata["tags"]
    # These pages read no committed data file (the empty folder has none, and fetching
    # one would need the network): their install cell fetches nothing.
    assert "urlretrieve" not in install.source
