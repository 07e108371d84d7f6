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
  nothing of the checkout but the installed posenc can help them; then one argument of a
  figure cell is changed and the cell run again, which must draw a different figure.
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
    # no frozen image: the figure is the output of the cell that draws it
    assert att == {} and "![" not in text and "attachment:" not in text
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
    hidden = nbformat.v4.new_code_cell("import math\nfrom myst_nb import glue")
    hidden.metadata["tags"] = ["remove-cell"]
    nb.cells = [*nb.cells, hidden]
    out = pn.convert(nb, GLUE, FakeResolver(), "print('install')")
    # the setup cell that only imported glue is gone; the other hidden one is collapsed
    assert [c.cell_type for c in out.cells] == ["markdown", "code", "code", "code"]
    assert out.cells[0].source == "# T\n\nText 0.123."
    assert out.cells[1].source == "print('install')"
    assert out.cells[1].metadata["tags"] == [pn.INSTALL_TAG]
    assert [o.output_type for o in out.cells[2].outputs] == ["execute_result"]
    assert out.cells[3].source == "import math"
    assert out.cells[3].metadata["jupyter"] == {"source_hidden": True}
    assert [c.id for c in out.cells] == [f"cell-{i}" for i in range(4)]


def _figure_page(draw: str, glue_cell: str):
    import nbformat

    nb = nbformat.v4.new_notebook()
    setup = nbformat.v4.new_code_cell("from myst_nb import glue\nimport posenc.figures as pf")
    setup.metadata["tags"] = ["remove-cell"]
    cell = nbformat.v4.new_code_cell(draw)
    cell.execution_count = 2
    hidden = nbformat.v4.new_code_cell(glue_cell)
    hidden.metadata["tags"] = ["remove-cell"]
    hidden.outputs = [nbformat.v4.new_output(
        "display_data", {"application/papermill.record/image/png": "iVBORw0KGgo="},
        metadata={"scrapbook": {"name": "fig"}})]
    nb.cells = [setup, cell, hidden, nbformat.v4.new_markdown_cell(
        "```{glue:figure} fig\n:name: fig-one\n\nThe caption.\n```")]
    glue = {**GLUE, "fig": {"data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"},
                            "metadata": {"image/png": {"posenc_phone": {"png": "AAAA"},
                                                       "width": 672}}}}
    return pn.convert(nb, glue, FakeResolver(), "print('install')")


def test_a_figure_cell_shows_its_figure_and_the_glue_cell_is_gone():
    out = _figure_page("fig = pf.rope_scores_figure(S, base=10)",
                       'glue("rope_x", 1.0, display=False)\n'
                       'glue("fig", fig, display=False)')
    code = [c for c in out.cells if c.cell_type == "code"]
    assert [c.source for c in code[1:]] == [
        "import posenc.figures as pf", "fig = pf.rope_scores_figure(S, base=10)\nfig"]
    (result,) = code[2].outputs
    assert result.output_type == "execute_result" and result.execution_count == 2
    assert result.data == {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}
    assert result.metadata == {"image/png": {"width": 672}}  # no phone variant
    assert out.cells[-1].source == "*Fig. 3 The caption.*" and not out.cells[-1].get(
        "attachments")
    assert "glue" not in "".join(c.source for c in code)


def test_a_figure_cell_keeps_its_own_result():
    """A figure cell that ends with another value still shows that value as its result;
    the figure is displayed where it is drawn, and its output comes first."""
    import nbformat

    out = _figure_page("fig = pf.g(1)\nlam = f(2)\nlam", 'glue("fig", fig, display=False)')
    code = [c for c in out.cells if c.cell_type == "code"][-1]
    assert code.source == "fig = pf.g(1)\ndisplay(fig)\nlam = f(2)\nlam"
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("fig = pf.g(1)\nlam = f(2)\nlam")
    cell.outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "3"},
                                           execution_count=4)]
    hidden = nbformat.v4.new_code_cell('glue("fig", fig, display=False)')
    nb.cells = [cell, hidden, nbformat.v4.new_markdown_cell("```{glue:figure} fig\nC.\n```")]
    glue = {"fig": {"data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}}}
    code = [c for c in pn.convert(nb, glue, FakeResolver(), "").cells
            if c.cell_type == "code"][-1]
    assert [o.output_type for o in code.outputs] == ["display_data", "execute_result"]


def test_a_figure_drawn_in_a_hidden_cell_is_shown_there():
    out = _figure_page("x = 1", 'record = 0\nglue("fig", pf.f(x,\n     y=2), display=False)\n'
                                'z = 3')
    hidden = [c for c in out.cells if c.cell_type == "code"][-1]
    assert hidden.source == "record = 0\ndisplay(pf.f(x,\n     y=2))\nz = 3"
    assert [o.output_type for o in hidden.outputs] == ["display_data"]


@pytest.mark.parametrize("source, expected", [
    ('glue("a", 1, display=False)', ""),
    ('for k, v in d.items():\n    glue(k, v, display=False)\nx = 1', "x = 1"),
    ('def record(key, value):\n    # keep it\n    glue(key, value, display=False)\n\n\n'
     'record("a", 2)\ny = 2', "y = 2"),
    ('def summary(key, v):\n    s = f(v)\n    glue(key, s, display=False)\n    return s',
     "def summary(key, v):\n    s = f(v)\n    return s"),
    ("for i in range(2):\n    for j in range(2):\n        glue(f'k{i}{j}', i)\n"
     "    glue('m', i)", ""),
])
def test_strip_glue(source, expected):
    aliases = pn.glue_aliases([source])
    assert pn.strip_glue(source, aliases, set()).source == expected


def test_strip_glue_refuses_what_it_would_break():
    with pytest.raises(pn.ConversionError, match="glue left"):
        pn.strip_glue("x = glue", {"glue"}, set())
    with pytest.raises(pn.ConversionError, match="empty"):
        pn.strip_glue("if a:\n    glue('k', 1)\nelse:\n    b = 2", {"glue"}, set())
    with pytest.raises(pn.ConversionError, match="myst_nb"):
        pn.strip_glue("from myst_nb import glue, glue_figure", {"glue"}, set())


def test_the_install_cell_reads_results_beside_the_notebook(tmp_path, monkeypatch):
    """experiments/results.json saved as results.json beside the notebook is read from
    there: no download (urlretrieve fails the test), and posenc is told where it is."""
    import urllib.request

    src = pn.install_source("en", page="P", title="T", url="u", repo="https://github.com/o/r",
                            ref="abc", data_files=["experiments/results.json"])
    fetch = src[src.index("# The committed results"):]
    (tmp_path / "results.json").write_text("{}", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    # set, then removed: monkeypatch records the variable, so what the install cell sets
    # is undone after the test (it leaked into later tests' result lookups)
    monkeypatch.setenv("POSENC_EXPERIMENT_RESULTS", "")
    monkeypatch.delenv("POSENC_EXPERIMENT_RESULTS")

    def no_network(*args, **kwargs):
        raise AssertionError(f"downloaded {args}")

    monkeypatch.setattr(urllib.request, "urlretrieve", no_network)
    exec(compile(fetch, "install", "exec"), {})
    import os

    assert os.environ["POSENC_EXPERIMENT_RESULTS"] == str(tmp_path / "results.json")
    (tmp_path / "results.json").unlink()  # not there: it would be downloaded
    with pytest.raises(AssertionError, match="downloaded"):
        exec(compile(fetch, "install", "exec"), {})


def test_install_source_pins_the_commit_and_fetches_data_files():
    src = pn.install_source("en", page="P", title="T", url="https://x/en/p.html",
                            repo="https://github.com/o/r", ref="abc123",
                            data_files=["benchmarks/results.json"])
    raw = "https://raw.githubusercontent.com/o/r/abc123"
    assert f"-r {raw}/requirements/notebooks.txt -c {raw}/requirements/constraints.txt" in src
    assert '"posenc @ git+https://github.com/o/r@abc123"' in src
    assert "{'benchmarks/results.json': 'POSENC_BENCH_RESULTS'}" in src
    assert f'"{raw}/" + rel' in src
    zh = pn.install_source("zh", page="P", title="T", url="u", repo="https://github.com/o/r",
                           ref="abc123", data_files=[])
    assert "安装" in zh and "urlretrieve" not in zh


# -- The built notebooks -----------------------------------------------------------------

#: glue calls or the myst_nb import left in a notebook's code
GLUE_LEFT = re.compile(r"(?<![\w.])glue\(|myst_nb|(?<![\w.])record\(")
#: A notebook's bytes besides its figures' images: text, code, tables and the interactive
#: figures' data and renderers (235 KB at most when written, other-encodings).
MAX_TEXT_BYTES = 300_000


def _assert_small(path: Path, where: str) -> None:
    """Each figure's image once (no frozen copy, no phone variant), little else."""
    import json

    nb = json.loads(path.read_text(encoding="utf-8"))
    images = [v for c in nb["cells"] for o in c.get("outputs", [])
              for k, v in o.get("data", {}).items() if k.startswith("image/")]
    images = ["".join(v) if isinstance(v, list) else v for v in images]
    assert len(set(images)) == len(images), f"{where}: an image stored twice"
    text = path.stat().st_size - sum(len(v) for v in images)
    assert text < MAX_TEXT_BYTES, f"{where}: {text} bytes besides the images"


def _page_cells(source: str) -> list[str]:
    cells = re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```$", source, re.S | re.M)
    return [re.sub(r"^:[\w-]+:.*\n", "", c, flags=re.M) for c in cells]


def _assert_page_cells_in_order(code, page: list[str], where: str) -> None:
    """Each notebook cell is the next page cell with lines taken out (glue) and a figure
    shown (a bare name, or ``display(...)`` in place of a glue call)."""
    i = 0
    for cell in code:
        lines = [ln for ln in cell.source.splitlines()
                 if ln.strip() and not re.fullmatch(r"\w+", ln.strip())
                 and not ln.lstrip().startswith("display(")]
        while i < len(page) and not all(ln in page[i] for ln in lines):
            i += 1
        assert i < len(page), f"{where}: a cell not on the page, or out of order:\n{cell.source}"
        i += 1

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
        # The page's code cells, in order, after the install cell, without glue.
        assert pn.INSTALL_TAG in code[0].metadata.get("tags", []), where
        _assert_page_cells_in_order(code[1:], _page_cells(source), where)
        python = "\n".join(c.source for c in code)
        assert not GLUE_LEFT.search(python), f"{where}: glue left: {GLUE_LEFT.search(python)}"
        _assert_small(path, where)
        # Executed: outputs where the page has them (a chapter's first page, its prose and
        # the list of its sections, has no cell but the install cell), counts in order.
        assert len(code) == 1 or any(c.outputs for c in code), f"{where}: no outputs"
        counts = [c.execution_count for c in code[1:] if c.execution_count]
        assert counts == sorted(counts) and (counts or len(code) == 1), (
            f"{where}: not executed in order")
        markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        for pattern in MYST_LEFT:
            left = pattern.search(markdown)
            assert not left, f"{where}: MyST left: {left.group(0)!r}"
        # Every {glue:figure} of the page is the output of a code cell, not a frozen
        # image in the text; no phone variant (the site's <picture>) rides along.
        figures = re.findall(r"```\{glue:figure\}\s*(\S+)", source)
        images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
        assert len(images) >= len(figures), f"{where}: {len(images)} < {len(figures)}"
        assert not any(c.get("attachments") for c in nb.cells), f"{where}: attachments"
        assert "attachment:" not in markdown, where
        assert "posenc_phone" not in path.read_text(encoding="utf-8"), where
        # An interactive figure carries its renderer (Jupyter and Colab run it).
        for c in code:
            for o in c.outputs:
                html = o.get("data", {}).get("text/html", "")
                if 'class="posenc-ifig"' in html:
                    assert '<script class="posenc-ifig-inline">' in html, where
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
        nb = nbformat.read(site / lang / "_sources" / "rope-scores.ipynb", as_version=4)
        markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        soup = BeautifulSoup((site / lang / "rope-scores.html").read_text(encoding="utf-8"),
                             "html.parser")
        pasted = [s.get_text() for s in soup.select("article span.pasted-text")]
        assert len(pasted) > 10, f"{lang}: the page pastes few values ({len(pasted)})"
        missing = [t for t in pasted if t not in markdown]
        assert not missing, f"{lang}/rope-scores: glued values not in the notebook text: {missing[:5]}"


# -- Running a downloaded notebook ---------------------------------------------------------

RUNNER = r"""
import json, sys
import nbformat
from nbclient import NotebookClient

nb = nbformat.read(sys.argv[1], as_version=4)
old, new = sys.argv[3], sys.argv[4]
client = NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=False)
with client.setup_kernel():
    for index, cell in enumerate(nb.cells):
        client.execute_cell(cell, index)
    nbformat.write(nb, sys.argv[2])
    # A reader changes one argument of a figure cell and runs that cell again.
    (index,) = [i for i, c in enumerate(nb.cells) if old in c.source]
    cell = nb.cells[index]
    before = json.loads(json.dumps(cell.outputs))
    cell.source = cell.source.replace(old, new)
    client.execute_cell(cell, index)
    after = json.loads(json.dumps(cell.outputs))
json.dump({"source": cell.source, "before": before, "after": after},
          open(sys.argv[5], "w"))
"""

#: Pages executed afresh, one per language (no committed data files, quick to run), and
#: the argument of a figure cell that the test changes afterwards.
RUN_PAGES = [
    ("en", "rope-scores", "pf.rope_scores_figure(S)", "pf.rope_scores_figure(S[:20, :20])"),
    ("zh", "sinusoidal-reading", "pf.sinusoid_heatmap(100, 128)", "pf.sinusoid_heatmap(50, 128)"),
]


def _docs_python() -> str:
    python = os.environ.get("POSENC_DOCS_PYTHON")
    if python:
        return python
    if in_ci():
        pytest.fail("POSENC_DOCS_PYTHON is not set: nox -s tests passes the python of the "
                    "fresh docs environment (CI=true: not using the test environment)")
    return sys.executable  # a workstation: the environment pytest runs in


def _image_cells(nb) -> list[int]:
    """The indices of the code cells whose outputs hold an image."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    return [i for i, c in enumerate(code)
            if any("image/png" in o.get("data", {}) for o in c.outputs)]


def _text_outputs(nb) -> list[list[str]]:
    return [[o["data"]["text/plain"] for o in c.outputs if o.output_type == "execute_result"]
            for c in nb.cells if c.cell_type == "code"]


@pytest.mark.build
@pytest.mark.parametrize("lang, name, old, new", RUN_PAGES)
def test_a_downloaded_notebook_runs_in_a_fresh_kernel(tmp_path, lang, name, old, new):
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
           if k not in ("PYTHONPATH", "POSENC_MEMO_DIR", "VIRTUAL_ENV",
                        "POSENC_PHONE_FIGURES")}  # a reader's kernel: none of the build's
    if not in_ci() and "POSENC_DOCS_PYTHON" not in os.environ:
        # a workstation's environment may hold another checkout's posenc: this one's
        env["PYTHONPATH"] = str(ROOT)
    edited = work / "edited.json"
    result = subprocess.run(
        [_docs_python(), str(runner), str(nb_in), str(work / "out.ipynb"), old, new,
         str(edited)],
        cwd=work, env=env, capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ran = nbformat.read(work / "out.ipynb", as_version=4)
    published = nbformat.read(downloaded, as_version=4)
    # The same numbers as the published notebook: the pages are deterministic.
    assert _text_outputs(ran) == _text_outputs(published)
    # Nothing of the site's bookkeeping is left to run or to add invisible outputs, and
    # running the notebook does not make it grow.
    assert not GLUE_LEFT.search("\n".join(c.source for c in ran.cells
                                          if c.cell_type == "code"))
    assert not any(o.get("metadata", {}).get("scrapbook") for c in ran.cells
                   if c.cell_type == "code" for o in c.outputs)
    assert (work / "out.ipynb").stat().st_size < 1.1 * downloaded.stat().st_size
    _assert_small(work / "out.ipynb", f"{lang}/{name}.ipynb run again")
    # Every figure cell shows its figure when run, as in the published notebook ...
    assert _image_cells(ran) == _image_cells(published) and _image_cells(ran)
    # ... and the interactive figures carry their renderer.
    assert any('<script class="posenc-ifig-inline">' in o.get("data", {}).get("text/html", "")
               for c in ran.cells if c.cell_type == "code" for o in c.outputs)
    # The figure cell, changed and run again, shows a different figure.
    import json

    change = json.loads(edited.read_text(encoding="utf-8"))
    assert new in change["source"]
    before = [o["data"]["image/png"] for o in change["before"] if "image/png" in o["data"]]
    after = [o["data"]["image/png"] for o in change["after"] if "image/png" in o["data"]]
    assert len(before) == len(after) == 1, (change["before"], change["after"])
    assert before != after, "the changed figure cell drew the same figure"
    install = ran.cells[[c.cell_type for c in ran.cells].index("code")]
    assert pn.INSTALL_TAG in install.metadata["tags"]
    # These pages read no committed data file (the empty folder has none, and fetching
    # one would need the network): their install cell fetches nothing.
    assert "urlretrieve" not in install.source


def test_display_math_loses_the_sites_phone_marks():
    """``%|`` (where the phone's narrow form breaks) and ``%narrow:`` lines are the site's
    bookkeeping (posenc_math): not in a notebook's TeX; an escaped percent stays."""
    text, _ = md("$$\na = b %|\n= c \\% d %| here\n%narrow: a = c\n$$ (e-one)\n\n"
                 "```{math}\n:label: e-two\nx = y %|\n+ z\n```")
    assert "%|" not in text and "narrow" not in text, text
    assert "$$\na = b\n= c \\% d\n \\tag{2} $$" in text, text
    assert "x = y\n+ z" in text, text
