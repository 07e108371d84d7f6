"""Sphinx glue for the bilingual book.

What it does, each piece small:

* **Fresh execution cache.**  MyST-NB's jupyter-cache keys a notebook on its code cells
  only, so a change inside ``posenc`` would otherwise be served the old outputs.  The
  cache folder is named after a hash of every file under ``posenc_watch_paths``; a
  changed library (or a changed data file the pages read, such as the benchmark
  results) gets an empty cache.  Sphinx's own environment would also skip
  unchanged pages, so when the hash moves every notebook page is marked outdated.
* **Language switch and hreflang.**  Every page links to the same page in the other
  language and carries ``<link rel="alternate" hreflang>`` for both.
* **Offline MathJax.**  The MathJax copy inside the ``sphinx-mathjax-offline`` wheel is
  added to the static files, so the site never asks a CDN for it.
* **Chinese lines joined.**  A line break inside a Chinese paragraph of the source
  becomes a space in HTML, and browsers show it between two Chinese characters.  In the
  Chinese build, a break with a CJK character (or full-width punctuation) on both sides
  is removed from the text; a break next to Latin text, code or math stays a space.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import shutil
from pathlib import Path

from docutils import nodes

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.environment import BuildEnvironment
from sphinx.util import logging

logger = logging.getLogger(__name__)

HREFLANG = {"en": "en", "zh": "zh-CN"}


def source_hash(paths: list[str]) -> str:
    """Hash of the contents (and relative names) of every ``.py`` file under ``paths``.

    A path that is a file (such as ``benchmarks/results.json``, which pages read) is
    hashed itself, whatever its suffix.
    """
    digest = hashlib.sha256()
    for root in sorted(Path(p) for p in paths):
        files = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for file in files:
            if "__pycache__" in file.parts:
                continue
            digest.update(str(file.relative_to(root.parent)).encode())
            digest.update(b"\0")
            digest.update(file.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()[:16]


def _configure_cache(app: Sphinx, config: Config) -> None:
    if not config.posenc_watch_paths:
        return
    key = source_hash(config.posenc_watch_paths)
    root = Path(config.posenc_cache_root or Path(app.outdir).parent / ".jupyter_cache")
    cache = root / key
    # Older caches belong to library versions that no longer exist: drop them.
    if root.is_dir():
        for old in root.iterdir():
            if old.is_dir() and old.name != key:
                shutil.rmtree(old, ignore_errors=True)
    config.nb_execution_cache_path = str(cache)
    app.posenc_source_hash = key  # type: ignore[attr-defined]


def _outdated_when_library_changes(
    app: Sphinx, env: BuildEnvironment, added: set, changed: set, removed: set
) -> list[str]:
    key = getattr(app, "posenc_source_hash", None)
    previous = getattr(env, "posenc_source_hash", None)
    env.posenc_source_hash = key  # type: ignore[attr-defined]
    if key is None or previous is None or previous == key:
        return []
    stale = [doc for doc in env.found_docs if doc not in added and doc not in changed]
    if stale:
        logger.info("posenc sources changed: re-reading %d pages", len(stale))
    return stale


def _add_mathjax(app: Sphinx, config: Config) -> None:
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "MathJax is served locally from the 'sphinx-mathjax-offline' package; "
            "install it (it is in requirements/docs.txt)"
        )
    static = Path(next(iter(spec.submodule_search_locations))) / "static"
    if not (static / "mathjax" / "tex-chtml.js").is_file():
        raise RuntimeError(f"no MathJax found under {static}")
    config.html_static_path = [*config.html_static_path, str(static)]


_CJK = "\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_CJK_BREAK = re.compile(f"(?<=[{_CJK}])[ \\t]*\\n[ \\t]*(?=[{_CJK}])")
_VERBATIM = (nodes.literal, nodes.literal_block, nodes.math, nodes.math_block, nodes.raw,
             nodes.comment, nodes.doctest_block)


def join_cjk_lines(doctree: nodes.Node) -> int:
    """Remove line breaks between two CJK characters in the text of ``doctree``.

    MyST turns a soft line break into a text node of its own (``"\\n"``), so the
    characters on either side may sit in the neighbouring nodes (text, emphasis, a
    link); code and math next to a break keep their space, and code, math and raw
    content themselves are left alone.  Returns how many breaks were removed.
    """
    removed = 0
    for text in list(doctree.findall(nodes.Text)):
        if "\n" not in text or any(isinstance(a, _VERBATIM) for a in _ancestors(text)):
            continue
        parent = text.parent
        # By identity: Text nodes are strings and compare equal by value, so
        # parent.index() would find the first "\n" of the paragraph, not this one.
        i = next(k for k, child in enumerate(parent.children) if child is text)
        before = _edge_text(parent[i - 1], last=True) if i > 0 else ""
        after = _edge_text(parent[i + 1], last=False) if i + 1 < len(parent) else ""
        new, n = _CJK_BREAK.subn("", before + str(text) + after)
        if not n:
            continue
        new = new[len(before): len(new) - len(after)]
        if new:
            parent.children[i] = nodes.Text(new)
            parent.children[i].parent = parent
        else:
            del parent.children[i]
        removed += n
    return removed


def _edge_text(node: nodes.Node, last: bool) -> str:
    """The character of ``node`` next to a neighbouring break ("" for code or math)."""
    if isinstance(node, _VERBATIM) or (isinstance(node, nodes.Element)
                                       and any(True for _ in node.findall(_verbatim_node))):
        return ""
    text = node.astext()
    return text[-1:] if last else text[:1]


def _verbatim_node(node: nodes.Node) -> bool:
    return isinstance(node, _VERBATIM)


def _ancestors(node: nodes.Node):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _join_cjk_lines(app: Sphinx, doctree: nodes.document) -> None:
    if app.config.posenc_book_lang == "zh":
        join_cjk_lines(doctree)


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    lang = app.config.posenc_book_lang
    site = app.config.posenc_site_url
    depth = pagename.count("/") + 1
    up = "../" * depth
    others = []
    tags = []
    for code, label in app.config.posenc_languages.items():
        href_abs = f"{site}{code}/{pagename}.html"
        tags.append(f'<link rel="alternate" hreflang="{HREFLANG[code]}" href="{href_abs}" />')
        if code != lang:
            href = f"{up}{code}/{pagename}.html"
            prefix = getattr(app.config, "notfound_urls_prefix", None)
            if prefix and pagename == getattr(app.config, "notfound_pagename", None):
                # The 404 page is served at whatever URL was missing, so a relative link
                # would miss too: use the site path (/posenc/en/ -> /posenc/zh/404.html).
                href = f"{prefix.rstrip('/').rsplit('/', 1)[0]}/{code}/{pagename}.html"
            others.append(
                {"code": code, "hreflang": HREFLANG[code], "label": label, "href": href}
            )
    context["posenc_other_languages"] = others
    context["metatags"] = context.get("metatags", "") + "\n" + "\n".join(tags)


def setup(app: Sphinx) -> dict:
    app.add_config_value("posenc_watch_paths", [], "env")
    app.add_config_value("posenc_cache_root", "", "env")
    app.add_config_value("posenc_languages", {}, "html")
    app.add_config_value("posenc_book_lang", "en", "html")
    app.add_config_value("posenc_site_url", "", "html")
    app.connect("config-inited", _configure_cache, priority=400)
    app.connect("config-inited", _add_mathjax)
    app.connect("env-get-outdated", _outdated_when_library_changes)
    app.connect("html-page-context", _page_context)
    app.connect("doctree-read", _join_cjk_lines)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
