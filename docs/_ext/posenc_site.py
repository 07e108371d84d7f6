"""Reader features of the built site: alt text, notebook downloads, launch links.

* **Alt text for every image.**  Docutils writes an image's *file name* as its ``alt``
  when none was given, which is what a screen reader would read for every figure that
  MyST-NB pastes from a cell.  After the references are resolved, an image without
  ``alt`` takes the text of its figure's caption (``{glue:figure}`` with a caption, or
  a cell with ``mystnb: figure: caption:``).  An image with neither (a bare cell
  output) is reported as a warning, so ``-W`` fails the build at the line to fix:
  give it a caption, or ``:alt:`` on the ``{glue:figure}``.
* **Each chapter as a notebook.**  The book theme offers ``_sources/<page>.ipynb`` in
  its download menu for notebook pages (it copies MyST-NB's *executed* notebook there,
  from a folder both languages share).  Here that file is replaced by the page's MyST
  source converted with jupytext (nothing re-executed), with one cell in front that
  installs ``posenc`` where it is missing (Colab, Binder, a fresh kernel).
* **Launch on Colab / Binder.**  Colab opens only ``.ipynb`` files from GitHub, and the
  pages are MyST Markdown, so the launch links point at the converted notebooks, which
  the Pages workflow (.github/workflows/pages.yml) publishes to the branch
  ``posenc_notebooks_branch`` as ``<lang>/<page>.ipynb`` with a ``requirements.txt``
  for Binder.
* **Chinese search** works in the browser: Sphinx 9.0 names a stemmer it does not ship.
* **A complete sitemap** after incremental builds too, in a stable order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

INSTALL_CELL = {
    "en": (
        "# This notebook is a chapter of the book \"{title}\" ({site}).\n"
        "# Outside the book's own environment (Colab, Binder, a fresh kernel), install\n"
        "# what the chapter imports first.  Glued numbers and figures ({{glue:...}} in the\n"
        "# text cells) are shown only in the book; the code cells compute them here.\n"
    ),
    "zh": (
        "# 本笔记本是《{title}》（{site}）中的一章。\n"
        "# 如果不在本书自己的环境里运行（Colab、Binder 或新的内核），先安装本章用到的包。\n"
        "# 文字单元里的 {{glue:...}} 数字和图只在书中显示；这里的代码单元会把它们算出来。\n"
    ),
}
INSTALL_CODE = (
    "import importlib.util\n"
    "if importlib.util.find_spec(\"posenc\") is None or importlib.util.find_spec(\"myst_nb\") is None:\n"
    "    %pip install --quiet \"posenc[figures,torch] @ git+{repo}@{ref}\" myst-nb\n"
)


# -- Alt text ------------------------------------------------------------------------

def _caption_text(figure: nodes.figure) -> str:
    for child in figure.children:
        if isinstance(child, nodes.caption):
            return " ".join(child.astext().split())
    return ""


def _has_real_alt(image: nodes.image) -> bool:
    alt = (image.get("alt") or "").strip()
    return bool(alt) and alt != image.get("uri")


def set_image_alt(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Give every image an alt text: its own, else its figure's caption, else warn."""
    for image in doctree.findall(nodes.image):
        if _has_real_alt(image):
            continue
        parent = image.parent
        while parent is not None and not isinstance(parent, nodes.figure):
            parent = parent.parent
        caption = _caption_text(parent) if parent is not None else ""
        if caption:
            image["alt"] = caption
            continue
        where = image
        while where is not None and not where.line:  # cell outputs carry no line: the cell does
            where = where.parent
        logger.warning(
            "image without alt text (%s): show it with {glue:figure} and a caption, or give "
            "it :alt: (or the cell metadata mystnb: image: alt:)",
            Path(image.get("uri", "?")).name,
            location=where if where is not None else (docname, None),
            type="posenc", subtype="alt",
        )


# -- Notebooks -----------------------------------------------------------------------

def is_notebook_page(app: Sphinx, pagename: str) -> bool:
    """A MyST-NB page: it has a kernelspec in its front matter."""
    return "kernelspec" in app.env.metadata.get(pagename, {})


def myst_to_notebook(source: Path, lang: str, title: str, site: str, repo: str, ref: str):
    """The MyST-NB page ``source`` as an nbformat v4 notebook, with an install cell first."""
    import jupytext
    import nbformat

    nb = jupytext.read(source, fmt="md:myst")
    install = nbformat.v4.new_code_cell(
        INSTALL_CELL.get(lang, INSTALL_CELL["en"]).format(title=title, site=site)
        + INSTALL_CODE.format(repo=repo, ref=ref)
    )
    install.metadata["tags"] = ["posenc-install"]
    # Right under the title, when the page opens with one.
    first = nb.cells[0] if nb.cells else None
    title_first = first is not None and first.cell_type == "markdown" and (
        first.source.lstrip().startswith("# ")
    )
    nb.cells.insert(1 if title_first else 0, install)
    kernelspec = dict(nb.metadata.get("kernelspec") or {})
    kernelspec.setdefault("name", "python3")
    kernelspec.setdefault("display_name", "Python 3")
    kernelspec.setdefault("language", "python")
    nb.metadata = {"kernelspec": kernelspec, "language_info": {"name": "python"}}
    # Stable cell ids: the same source gives the same notebook, byte for byte.
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"
    nbformat.validate(nb)
    return nb


def _write_notebook(app: Sphinx, pagename: str) -> str:
    import nbformat

    cfg = app.config
    source = Path(app.env.doc2path(pagename))
    nb = myst_to_notebook(
        source, cfg.posenc_book_lang, cfg.html_title or cfg.project, cfg.posenc_site_url,
        cfg.posenc_repo_url, cfg.posenc_repo_ref,
    )
    target = Path(app.outdir, "_sources", pagename + ".ipynb")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    return pagename + ".ipynb"


def launch_urls(app: Sphinx, pagename: str) -> dict[str, str]:
    """Colab and Binder links for a page's notebook on the notebooks branch."""
    cfg = app.config
    repo = cfg.posenc_repo_url.rstrip("/")
    org_repo = repo.split("github.com/", 1)[-1]
    branch = cfg.posenc_notebooks_branch
    path = f"{cfg.posenc_book_lang}/{pagename}.ipynb"
    return {
        "Colab": f"https://colab.research.google.com/github/{org_repo}/blob/{branch}/{path}",
        "Binder": f"https://mybinder.org/v2/gh/{org_repo}/{branch}?urlpath=lab/tree/{path}",
    }


def notebook_page_context(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree
) -> None:
    """After the theme's buttons (priority 501): our notebook, our launch links."""
    if doctree is None or not is_notebook_page(app, pagename):
        return
    context["ipynb_source"] = _write_notebook(app, pagename)
    urls = launch_urls(app, pagename)
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            text = button.get("text")
            if text in urls:
                button["url"] = urls[text]
                button["label"] = f"launch-{text.lower()}"


# -- Chinese search ------------------------------------------------------------------

def _chinese_search_language():
    """Sphinx's Chinese search, with the JavaScript stemmer it actually ships.

    Sphinx 9.0 writes ``window.Stemmer = ChineseStemmer;`` into ``language_data.js``
    (the class name comes from ``language_name``) but ships the *English* stemmer for
    Chinese, so every search on the zh site died with "ChineseStemmer is not defined"
    (sphinx-doc/sphinx#14229, fixed upstream by #14416).  Naming the language after
    its stemmer makes the two agree; segmentation (jieba) is unchanged.
    """
    from sphinx.search.zh import SearchChinese

    class SearchChineseFixed(SearchChinese):
        language_name = "English"  # the stemmer class name: EnglishStemmer

    return SearchChineseFixed


# -- Sitemap -------------------------------------------------------------------------

def complete_sitemap(app: Sphinx, exception: Exception | None) -> None:
    """Every page in the sitemap, in a stable order, also after an incremental build.

    sphinx-sitemap lists the pages *written in this run* (it collects them in
    html-page-context), so a warm ``nox -s docs`` that rewrote one page published a
    sitemap with one page.  Before it writes the file (build-finished, priority 500),
    the queue is refilled with every document, sorted, minus ``sitemap_excludes``.
    """
    links = getattr(app, "sitemap_links", None)
    if exception is not None or links is None or app.builder.format != "html":
        return
    import fnmatch
    import queue

    seen: dict[str, Any] = {}
    while True:
        try:
            link, last_updated = links.get_nowait()
        except queue.Empty:
            break
        seen[link] = last_updated
    suffix = app.config.html_file_suffix or ".html"
    for doc in app.env.found_docs:
        seen.setdefault(doc + suffix, None)
    for extra in ("genindex", "search"):
        seen.setdefault(extra + suffix, None)
    for link in sorted(seen):
        if not any(fnmatch.fnmatch(link, pat) for pat in app.config.sitemap_excludes):
            links.put((link, seen[link]))


def setup(app: Sphinx) -> dict:
    app.add_config_value("posenc_repo_url", "", "html")
    app.add_config_value("posenc_repo_ref", "main", "html")
    app.add_config_value("posenc_notebooks_branch", "notebooks", "html")
    app.add_search_language(_chinese_search_language())
    app.connect("doctree-resolved", set_image_alt)
    app.connect("html-page-context", notebook_page_context, priority=502)
    app.connect("build-finished", complete_sitemap, priority=450)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
