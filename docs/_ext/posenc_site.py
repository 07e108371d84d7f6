"""Reader features of the built site: alt text, notebook downloads, launch links.

* **Alt text for every image.**  Docutils writes an image's *file name* as its ``alt``
  when none was given, which is what a screen reader would read for every figure that
  MyST-NB pastes from a cell.  After the references are resolved, an image without
  ``alt`` takes the text of its figure's caption (``{glue:figure}`` with a caption, or
  a cell with ``mystnb: figure: caption:``).  An image with neither (a bare cell
  output) is reported as a warning, so ``-W`` fails the build at the line to fix:
  give it a caption, or ``:alt:`` on the ``{glue:figure}``.
* **Each chapter as a notebook.**  The book theme offers ``_sources/<page>.ipynb`` in
  its download menu for notebook pages (it copies MyST-NB's executed notebook there, from
  a folder both languages share, with the MyST markup left in).  Here that file is
  replaced by this language's executed notebook converted by ``posenc_notebook``: glued
  numbers filled in, references and citations as links to the published pages, outputs
  and figures in place, and an install cell first.
* **The download menu says what each entry is** (executed notebook, MyST source, print),
  in the page's language.
* **A table a cell computes is a numbered table**: captioned and labelled in the cell's
  metadata (``mystnb: figure: {caption, name}``), numbered with the page's own tables.
* **Launch on Colab / Binder.**  Colab opens only ``.ipynb`` files from GitHub, and the
  pages are MyST Markdown, so the launch links point at the converted notebooks, which
  the Pages workflow (.github/workflows/pages.yml) publishes to the branch
  ``posenc_notebooks_branch`` as ``<lang>/<page>.ipynb`` with a ``requirements.txt``
  for Binder.
* **Figures on phones**: each figure's phone variant is served through ``<picture>``
  (``posenc_figures``).
* **Chinese search** works in the browser: Sphinx 9.0 names a stemmer it does not ship.
* **A complete sitemap** after incremental builds too, in a stable order.
* **The theme speaks the page's language.**  The words pydata-sphinx-theme and
  sphinx-book-theme put around a Chinese page that their catalogs leave in English
  ("System Settings", "Color mode", "Repository", the sidebar buttons' tooltips, ...)
  are translated in ``docs/locale/<language>/LC_MESSAGES/{sphinx,booktheme}.po``,
  compiled here at build time and registered before the themes' own catalogs, so they
  take precedence over them.
"""

from __future__ import annotations

import os
import re
from html import escape as html_escape
from html import unescape as html_unescape
from pathlib import Path
from typing import Any

from docutils import nodes
from markupsafe import Markup
from sphinx.application import Sphinx
from sphinx.util import logging

import posenc_bib
import posenc_figures
import posenc_notebook

logger = logging.getLogger(__name__)

# -- Alt text ------------------------------------------------------------------------

def _caption_text(figure: nodes.Element) -> str:
    """The caption of ``figure`` (or of a :class:`computed_table`), on one line."""
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


def _data_files(app: Sphinx, pagename: str) -> list[str]:
    """The committed data files (not Python sources) the page's execution read; those
    inside the package (the atlas's configs, the interactive figures' renderer) come with
    the installed posenc."""
    deps = getattr(app.env, "posenc_deps", {}).get(pagename, {})
    return sorted(f for f in deps if not f.endswith(".py") and not f.startswith("posenc/"))


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
    context["ipynb_source"] = posenc_notebook.write_notebook(
        app, pagename, _data_files(app, pagename))
    urls = launch_urls(app, pagename)
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            text = button.get("text")
            if text in urls:
                button["url"] = urls[text]
                button["label"] = f"launch-{text.lower()}"
                # the theme joins "Launch on" + " Binder": 运行于 Binder reads as a
                # translation; a Chinese sentence puts the service in the middle
                if app.config.posenc_book_lang == "zh":
                    button["tooltip"] = f"在 {text} 中运行"


#: What each entry of the theme's download menu is, in the page's language (the theme
#: says only ".ipynb", ".md" and ".pdf").
DOWNLOAD_TEXTS = {
    "en": {
        "download-notebook-button": "Notebook, executed (.ipynb)",
        "download-source-button": "MyST source (.md)",
        "download-pdf-button": "Print or save as PDF",
        "download-book-pdf-button": "The whole book (PDF)",
    },
    "zh": {
        "download-notebook-button": "已执行的笔记本（.ipynb）",
        "download-source-button": "MyST 源文件（.md）",
        "download-pdf-button": "打印或存为 PDF",
        "download-book-pdf-button": "整本书（PDF）",
    },
}


def download_menu_texts(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree
) -> None:
    """After the theme's buttons: each download entry says what it gives."""
    lang = app.config.posenc_book_lang
    texts = DOWNLOAD_TEXTS.get(lang, DOWNLOAD_TEXTS["en"])
    for group in context.get("header_buttons", []):
        if group.get("label") != "download-buttons":
            continue
        for button in group.get("buttons", []):
            text = texts.get(button.get("label", ""))
            if text:
                button["text"] = text
        # the whole book, printed by tools/build_pdf.py (nox -s pdf) beside the pages
        # after they are built, which links it from every page then: linked here only
        # where it is already there (a later build), never to a file that is missing
        if not (Path(app.outdir) / f"posenc-{lang}.pdf").is_file():
            continue
        group.setdefault("buttons", []).append({
            "type": "link", "url": context["pathto"](f"posenc-{lang}.pdf", 1),
            "text": texts["download-book-pdf-button"], "tooltip":
            texts["download-book-pdf-button"], "icon": "fas fa-book",
            "label": "download-book-pdf-button"})


# -- Tables a cell computes: numbered and captioned as tables ---------------------------

class computed_table(nodes.General, nodes.Element):
    """A table that a cell computed (its output), with its caption above it, numbered in
    the sequence of the page's tables (Table 11.1) and a target of ``{numref}``."""


def _holds_table(node: nodes.Element) -> bool:
    return any(isinstance(n, nodes.table) or (isinstance(n, nodes.raw) and "<table" in n.astext())
               for n in node.findall())


def number_computed_tables(app: Sphinx, doctree: nodes.document) -> None:
    """A cell whose output is a table gets its caption and label as any cell output does
    (``mystnb: figure: {caption: ..., name: tbl-...}`` in its metadata), which MyST-NB
    makes a figure: that figure becomes a :class:`computed_table`, caption first."""
    for figure in list(doctree.findall(nodes.figure)):
        if next(iter(figure.findall(nodes.image)), None) is not None:
            continue
        if not _holds_table(figure):
            continue
        table = computed_table("", ids=figure["ids"], names=figure["names"],
                               classes=["posenc-computed-table"])
        children = list(figure.children)
        del figure[:]
        table.extend(c for c in children if isinstance(c, nodes.caption))
        table.extend(c for c in children if not isinstance(c, nodes.caption))
        figure.replace_self(table)
        for anchor in table["ids"]:
            doctree.ids[anchor] = table


def _visit_computed_table(self, node: computed_table) -> None:
    self.body.append(self.starttag(node, "div"))


def _depart_computed_table(self, node: computed_table) -> None:
    self.body.append("</div>\n")


# -- Accessibility ------------------------------------------------------------------

#: The name of a chapter list's expander (<summary>), which shows only a chevron: what it
#: opens, in the page's language (axe-core's summary-name: a nameless expander).
EXPANDER_NAMES = {"en": "Pages under {title}", "zh": "「{title}」下的页面"}
_EXPANDER = re.compile(
    r'(<a class="[^"]*reference internal[^"]*" href="[^"]*">)((?:(?!</?a[\s>]).)*)(</a>\s*<details[^>]*>\s*)<summary>',
    re.S)


def name_expanders(html: str, lang: str) -> str:
    """Give each chapter-list ``<summary>`` after a link an ``aria-label`` naming the pages
    it opens (the link's text)."""
    template = EXPANDER_NAMES.get(lang, EXPANDER_NAMES["en"])

    def label(m: re.Match) -> str:
        title = re.sub(r"<[^>]+>", "", m.group(2)).strip()
        name = html_escape(template.format(title=html_unescape(title)), quote=True)
        return f'{m.group(1)}{m.group(2)}{m.group(3)}<summary aria-label="{name}">'

    return _EXPANDER.sub(label, html)


def accessible_page(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree
) -> None:
    """What axe-core found wrong in the theme's and Sphinx's markup, put right per page:
    the chapter list's expanders get names, and citations are list items of the
    references' list (Sphinx marks them doc-biblioentry, a deprecated role that is not
    a list item, so the list held no items and their links counted as its children)."""
    lang = app.config.posenc_book_lang
    make = context.get("generate_toctree_html")
    if callable(make) and not getattr(make, "posenc_named", False):
        def named(*args, **kwargs):
            return Markup(name_expanders(str(make(*args, **kwargs)), lang))

        named.posenc_named = True  # type: ignore[attr-defined]
        context["generate_toctree_html"] = named
    body = context.get("body")
    if isinstance(body, str) and 'role="doc-biblioentry"' in body:
        context["body"] = body.replace('role="doc-biblioentry"', 'role="listitem"')


# -- The search index ---------------------------------------------------------------

#: Where one table cell, row or list item of raw HTML (a computed table) ends and the next
#: begins: a space there, so that cells are words of their own in the index.
_CELL_EDGE = re.compile(r"<(?:/?(?:td|th|tr|li|dt|dd|p|br)\b)[^>]*>", re.I)
_ANNOTATION = re.compile(r"<annotation(?:-xml)?\b.*?</annotation(?:-xml)?>", re.I | re.S)


def index_words_as_read() -> None:
    """Sphinx's index takes the words of the text as a reader reads them: formulas are left
    out (their text is TeX: "frac", "theta", "mathrm"), and the cells of a raw HTML table
    stay apart (Sphinx strips the tags of raw HTML, which ran adjacent cells together:
    "modelrope typebaserotated")."""
    from sphinx import search

    # Sphinx 9 walks each doctree with this function, which calls itself by its module
    # name for the children: replacing it covers every node.
    original = search._feed_visit_nodes
    if getattr(original, "posenc", False):
        return

    def visit(node, **kwargs) -> None:
        if isinstance(node, (nodes.math, nodes.math_block)):
            return
        if isinstance(node, nodes.raw) and "html" in node.get("format", "").split():
            text = _CELL_EDGE.sub(lambda m: " " + m.group(0), _ANNOTATION.sub("", node.astext()))
            node = nodes.raw(node.rawsource, text, format=node.get("format"))
        original(node, **kwargs)

    visit.posenc = True  # type: ignore[attr-defined]
    search._feed_visit_nodes = visit  # type: ignore[attr-defined]


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


# -- The theme's words in the page's language ---------------------------------------

LOCALE_DIR = Path(__file__).resolve().parents[1] / "locale"
#: The message catalogs the book translates: Sphinx's and the themes' ("sphinx", which
#: pydata-sphinx-theme uses too), and sphinx-book-theme's ("booktheme").
CATALOGS = ("sphinx", "booktheme")


def compile_catalogs(source: Path, target: Path) -> list[Path]:
    """Compile every ``<lang>/LC_MESSAGES/<catalog>.po`` below ``source`` into the
    same place below ``target``; return the .mo files written or already fresh."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    written = []
    for po in sorted(source.glob("*/LC_MESSAGES/*.po")):
        mo = target / po.relative_to(source).with_suffix(".mo")
        if not mo.exists() or mo.stat().st_mtime < po.stat().st_mtime:
            with po.open("rb") as f:
                catalog = read_po(f)
            untranslated = [m.id for m in catalog if m.id and not m.string]
            if untranslated:
                raise ValueError(f"{po}: untranslated messages {untranslated}")
            mo.parent.mkdir(parents=True, exist_ok=True)
            tmp = mo.with_suffix(f".{os.getpid()}.tmp")
            with tmp.open("wb") as f:
                write_mo(f, catalog)
            tmp.replace(mo)  # both languages build at once: never a half-written file
        written.append(mo)
    return written


def register_catalogs(app: Sphinx) -> None:
    target = Path(app.doctreedir) / "posenc-locale"
    compile_catalogs(LOCALE_DIR, target)
    for catalog in CATALOGS:
        app.add_message_catalog(catalog, str(target))


def localise_search_field(app: Sphinx, config) -> None:
    """The search field's placeholder is a theme option, not a template word: give it
    in the page's language unless conf.py chose one."""
    from sphinx.locale import get_translation

    options = config.html_theme_options
    if "search_bar_text" not in options:
        options["search_bar_text"] = str(get_translation("sphinx")("Search..."))


def setup(app: Sphinx) -> dict:
    app.add_config_value("posenc_repo_url", "", "html")
    # Not a rebuild reason: the published site is always built afresh (pages.yml).
    app.add_config_value("posenc_repo_ref", "main", "")
    app.add_config_value("posenc_notebooks_branch", "notebooks", "html")
    posenc_notebook.setup(app)
    posenc_figures.setup(app)  # figures' phone variants through <picture>
    posenc_bib.register()  # the references page labelled as the text cites
    app.add_search_language(_chinese_search_language())
    # Before the themes are loaded (when the builder starts), so these come first.
    register_catalogs(app)
    index_words_as_read()
    app.connect("config-inited", localise_search_field)
    app.add_enumerable_node(computed_table, "table", _caption_text,
                            html=(_visit_computed_table, _depart_computed_table))
    app.connect("doctree-read", number_computed_tables)
    app.connect("doctree-resolved", set_image_alt)
    app.connect("html-page-context", notebook_page_context, priority=502)
    app.connect("html-page-context", download_menu_texts, priority=503)
    app.connect("html-page-context", accessible_page, priority=504)
    app.connect("build-finished", complete_sitemap, priority=450)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
