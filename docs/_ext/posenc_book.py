"""Sphinx glue for the bilingual book.

What it does, each piece small:

* **Per-page execution cache, keyed on what the page really used.**  MyST-NB's
  jupyter-cache keys a notebook on its code cells only, so a change inside ``posenc``
  would otherwise be served the old outputs.  Every execution therefore records what the
  kernel used: two cells are added around the page's own (and removed again before
  anything is cached or rendered), the first installs an audit hook that notes every
  watched file the kernel opens (``benchmarks/results.json``, ...) other than Python
  sources, the last lists the watched modules in ``sys.modules`` (every ``posenc``
  module the page imported, directly or not).  A module counts when it is imported, not
  when its source is read as text: :mod:`posenc.figures` reads every figure module's
  ``__all__`` from its source so that it can import only the modules a page calls.  The hashes those files had when the build started are stored per
  page, in ``deps.json`` next to the cache and in Sphinx's environment.  A later build
  re-reads and re-executes exactly the pages one of whose files changed; a cached
  notebook whose files changed, or whose files are unknown, is dropped from the cache
  instead of served.  ``posenc_watch_paths`` lists what can be a dependency: folders
  (their ``.py`` files) and single files of any kind.
* **Read order.**  ``posenc_read_order = "reversed"`` reads (and so executes) the pages
  in reverse order.  The two languages build in parallel and share the disk memo of
  :mod:`posenc.analysis._memo`; running the pages in opposite orders means one language
  mostly finds the other's results instead of computing them at the same moment.
* **Parallel languages.**  ``_build/html/jupyter_execute`` (MyST-NB's working folder;
  the book theme reads it at that fixed place) is shared by the two languages building at
  once.  That is safe as long as no page pastes a glue value from *another* page
  (a ``page::key`` glue reference), which would read ``<page>.glue.json`` there: images are
  named by their content and never rewritten, and the ``<page>.ipynb`` the theme copies
  for downloads is replaced by posenc_site's own conversion.
* **Language switch and hreflang.**  Every page links to the same page in the other
  language and carries ``<link rel="alternate" hreflang>`` for both.
* **Chinese lines joined.**  A line break inside a Chinese paragraph of the source
  becomes a space in HTML, and browsers show it between two Chinese characters.  In the
  Chinese build, a break with a CJK character (or full-width punctuation) on both sides
  is removed from the text; a break next to Latin text, code or math stays a space.
"""

from __future__ import annotations

import hashlib
import json
import os
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


def watched_files(paths: list[str]) -> dict[str, str]:
    """Hash (SHA-256, hex) of every file that can be a page's dependency, by real path.

    A folder in ``paths`` contributes its ``.py`` files (``__pycache__`` left out); a
    file is hashed whatever its suffix, and a listed file that does not exist (yet) is
    recorded as ``"absent"``, so that its appearance counts as a change.
    """
    hashes: dict[str, str] = {}
    for entry in paths:
        root = Path(entry).resolve()
        if root.is_dir():
            files = sorted(f for f in root.rglob("*.py") if "__pycache__" not in f.parts)
        else:
            files = [root]
        for file in files:
            try:
                hashes[str(file)] = hashlib.sha256(file.read_bytes()).hexdigest()
            except FileNotFoundError:
                hashes[str(file)] = "absent"
    return hashes


_DEPS_MARK = "__posenc_deps__ "
_DEPS_FORMAT = 3  # bump to invalidate every page's recorded dependencies

_HOOK_CELL = """\
def _posenc_deps_hook(watched, prefixes):
    import os
    import sys

    opened = set()

    def hook(event, args):
        if event != "open" or not args:
            return
        try:
            path = os.path.abspath(os.fsdecode(args[0]))
            if path.startswith(prefixes) and not path.endswith(".py"):
                path = os.path.realpath(path)
                if path in watched:
                    opened.add(path)
        except Exception:
            pass

    sys.addaudithook(hook)
    return opened


_posenc_deps_opened = _posenc_deps_hook(frozenset({watched!r}), {prefixes!r})
del _posenc_deps_hook
"""

_RECORD_CELL = """\
def _posenc_deps_record(watched, opened):
    import json
    import os
    import sys

    modules = {{}}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str):
            path = os.path.realpath(file)
            if path in watched:
                modules[name] = path
    print({mark!r} + json.dumps({{"modules": modules, "opened": sorted(opened)}}))


_posenc_deps_record(frozenset({watched!r}), _posenc_deps_opened)
"""


class _DepsState:
    """The dependency bookkeeping of one Sphinx process (one language)."""

    def __init__(self, app: Sphinx, root: Path, watched: dict[str, str]):
        self.app = app
        self.manifest_path = root / "deps.json"
        self.watched = watched
        self.base = Path(app.confdir).resolve()
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if data.get("format") != _DEPS_FORMAT:
            data = {"format": _DEPS_FORMAT, "pages": {}}
        self.manifest = data
        self.recorded: dict | None = None

    # Paths are stored relative to the folder of conf.py, so a moved tree keeps its cache.
    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.base)

    def current(self, rel: str) -> str | None:
        return self.watched.get(str((self.base / rel).resolve()))

    def deps_fresh(self, deps: dict[str, str]) -> bool:
        return all(self.current(rel) == sha for rel, sha in deps.items())

    def changed(self, deps: dict[str, str]) -> list[str]:
        return sorted(rel for rel, sha in deps.items() if self.current(rel) != sha)

    def save(self) -> None:
        self.manifest_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest_path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.manifest, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.manifest_path)


_STATE: _DepsState | None = None
_PATCHED = False


def _configure_cache(app: Sphinx, config: Config) -> None:
    global _STATE
    if not config.posenc_watch_paths:
        return
    root = Path(config.posenc_cache_root or Path(app.outdir).parent / ".jupyter_cache")
    # Earlier versions kept one cache per hash of all of posenc (root/<16 hex digits>).
    if root.is_dir():
        for old in root.iterdir():
            if old.is_dir() and re.fullmatch(r"[0-9a-f]{16}", old.name):
                shutil.rmtree(old, ignore_errors=True)
    config.nb_execution_cache_path = str(root / "notebooks")
    _STATE = _DepsState(app, root, watched_files(config.posenc_watch_paths))
    _patch_myst_nb()


def _patch_myst_nb() -> None:
    """Wrap MyST-NB's cached execution so that every execution records its files.

    MyST-NB has no hook around execution; its ``NotebookClientCache.start_client`` and
    the ``single_nb_execution`` it calls are wrapped (myst-nb is pinned in
    requirements/constraints.txt; a version without them fails here, loudly).
    """
    global _PATCHED
    if _PATCHED:
        return
    from myst_nb.core.execute import cache as nb_cache

    if not (hasattr(nb_cache, "single_nb_execution")
            and hasattr(nb_cache.NotebookClientCache, "start_client")):
        raise RuntimeError("posenc_book: this myst-nb has no NotebookClientCache.start_client "
                           "calling single_nb_execution; update the dependency recording")
    original_start = nb_cache.NotebookClientCache.start_client
    original_execute = nb_cache.single_nb_execution

    def start_client(self):
        state = _STATE
        if state is None or self.path is None:
            return original_start(self)
        return _start_client(state, self, original_start, nb_cache.get_cache)

    def single_nb_execution(nb, *args, **kwargs):
        state = _STATE
        if state is None:
            return original_execute(nb, *args, **kwargs)
        return _execute_recording(state, nb, original_execute, args, kwargs)

    nb_cache.NotebookClientCache.start_client = start_client
    nb_cache.single_nb_execution = single_nb_execution
    _PATCHED = True


def _start_client(state: _DepsState, client, original_start, get_cache) -> None:
    env = state.app.env
    doc = env.docname
    pages = state.manifest["pages"]
    cache = get_cache(client.nb_config.execution_cache_path)
    try:
        record = cache.match_cache_notebook(client.notebook)
    except KeyError:
        record = None
    entry = pages.get(doc)
    if record is not None and not (
        entry and entry["hashkey"] == record.hashkey and state.deps_fresh(entry["deps"])
    ):
        why = (f"changed: {', '.join(state.changed(entry['deps']))}"
               if entry and entry["hashkey"] == record.hashkey else "its files are unknown")
        logger.info("%s: cached outputs dropped (%s)", doc, why)
        cache.remove_cache(record.pk)
        record = None
    state.recorded = None
    try:
        original_start(client)
        recorded = state.recorded
    finally:
        state.recorded = None
    if recorded is not None:  # executed just now
        record = cache.match_cache_notebook(client.notebook)
        pages[doc] = {"hashkey": record.hashkey, "deps": recorded}
        state.save()
    if record is not None or recorded is not None:
        env.posenc_deps[doc] = pages[doc]["deps"]  # type: ignore[attr-defined]


def _execute_recording(state: _DepsState, nb, original_execute, args, kwargs):
    import nbformat

    watched = sorted(state.watched)
    prefixes = tuple(sorted({str(Path(p).parent) + os.sep for p in watched}))
    first = nbformat.v4.new_code_cell(_HOOK_CELL.format(watched=watched, prefixes=prefixes))
    last = nbformat.v4.new_code_cell(_RECORD_CELL.format(watched=watched, mark=_DEPS_MARK))
    nb.cells.insert(0, first)
    nb.cells.append(last)
    try:
        result = original_execute(nb, *args, **kwargs)
    finally:
        nb.cells.remove(first)
        nb.cells.remove(last)
        for cell in nb.cells:  # the added first cell took execution count 1
            if cell.get("cell_type") == "code" and cell.get("execution_count"):
                cell["execution_count"] -= 1
                for out in cell.get("outputs", ()):
                    if out.get("execution_count"):
                        out["execution_count"] -= 1
    if result.err is None:
        report = None
        for out in last.get("outputs", ()):
            for line in str(out.get("text", "")).splitlines():
                if line.startswith(_DEPS_MARK):
                    report = json.loads(line[len(_DEPS_MARK):])
        if report is None:
            raise RuntimeError(f"posenc_book: the dependency report of {state.app.env.docname} "
                               f"is missing; outputs of the recorder: {last.get('outputs')}")
        files = set(report["modules"].values()) | set(report["opened"])
        state.recorded = {state.rel(f): state.watched[f] for f in sorted(files)}
    return result


def _outdated_when_dependencies_change(
    app: Sphinx, env: BuildEnvironment, added: set, changed: set, removed: set
) -> list[str]:
    state = _STATE
    if state is None:
        return []
    if getattr(env, "posenc_deps_format", None) != _DEPS_FORMAT:
        # Built by an older version of this extension: what each page used is unknown.
        env.posenc_deps_format = _DEPS_FORMAT  # type: ignore[attr-defined]
        env.posenc_deps = {}  # type: ignore[attr-defined]
        stale = sorted(env.found_docs - added - changed)
        if stale:
            logger.info("no recorded page dependencies yet: re-reading %d pages", len(stale))
        return stale
    stale = []
    for doc, deps in sorted(env.posenc_deps.items()):  # type: ignore[attr-defined]
        if doc in env.found_docs and doc not in added and doc not in changed:
            moved = state.changed(deps)
            if moved:
                logger.info("%s: re-reading, it used %s", doc, ", ".join(moved))
                stale.append(doc)
    return stale


def _purge_deps(app: Sphinx, env: BuildEnvironment, docname: str) -> None:
    getattr(env, "posenc_deps", {}).pop(docname, None)


def _merge_deps(app: Sphinx, env: BuildEnvironment, docnames, other: BuildEnvironment) -> None:
    deps = getattr(other, "posenc_deps", {})
    if hasattr(env, "posenc_deps"):
        env.posenc_deps.update({d: deps[d] for d in docnames if d in deps})


def _read_order(app: Sphinx, env: BuildEnvironment, docnames: list[str]) -> None:
    if app.config.posenc_read_order == "reversed":
        docnames.reverse()
    elif app.config.posenc_read_order != "sorted":
        raise ValueError(f"posenc_read_order must be 'sorted' or 'reversed', "
                         f"got {app.config.posenc_read_order!r}")


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


#: Chinese punctuation that may not start a line (a closing mark, a full stop, a comma).
_NO_LINE_START = "。，、；：？！）」』”’》〉】"


def keep_punctuation_with_math(doctree: nodes.Node) -> int:
    """Keep the Chinese punctuation that follows inline math on the math's line: the
    browser may break between a formula and the text after it, which put a full stop at
    the start of a line ("… b^{2/d}" / "。最长的…").  The formula and that mark go into
    an inline of class ``posenc-nowrap`` (posenc.css); returns how many."""
    kept = 0
    for math in list(doctree.findall(nodes.math)):
        parent = math.parent
        if parent is None or "posenc-nowrap" in parent.get("classes", []):
            continue
        i = next(k for k, child in enumerate(parent.children) if child is math)
        after = parent[i + 1] if i + 1 < len(parent) else None
        if not isinstance(after, nodes.Text) or not after[:1] or after[0] not in _NO_LINE_START:
            continue
        n = len(after) - len(after.lstrip(_NO_LINE_START))
        group = nodes.inline("", classes=["posenc-nowrap"])
        parent.remove(math)
        group += math
        group += nodes.Text(str(after)[:n])
        rest = str(after)[n:]
        parent.insert(i, group)
        if rest:
            parent.children[i + 1] = nodes.Text(rest)
            parent.children[i + 1].parent = parent
        else:
            del parent.children[i + 1]
        kept += 1
    return kept


def _join_cjk_lines(app: Sphinx, doctree: nodes.document) -> None:
    if app.config.posenc_book_lang == "zh":
        join_cjk_lines(doctree)
        keep_punctuation_with_math(doctree)


def shared_anchors(env, pagename: str) -> list[str]:
    """The ids on ``pagename`` that its page in the other language has too.

    Those are the ids that come from names the parity test keeps equal in both trees:
    cross-reference labels (sections, figures), equation labels and the API's objects.
    A heading without a label gets an id from its own words, which differ by language.
    The language switch carries them (``data-posenc-anchors``), so posenc.js can keep
    the reader's place: the section in the URL or on the screen.
    """
    ids = {labelid for doc, labelid in env.domaindata["std"]["anonlabels"].values()
           if doc == pagename and labelid}
    ids |= {f"equation-{name}" for name, (doc, _number)
            in env.domaindata["math"]["objects"].items() if doc == pagename}
    ids |= {entry.node_id for entry in env.domaindata["py"]["objects"].values()
            if entry.docname == pagename and entry.node_id}
    return sorted(ids)


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
    context["posenc_anchors"] = shared_anchors(app.env, pagename) if doctree is not None else []
    context["metatags"] = context.get("metatags", "") + "\n" + "\n".join(tags)


def continue_chapter_numbers(app: Sphinx, env) -> list[str]:
    """Chapter numbers that run on across the book's parts.

    The contents page has one toctree per part (its caption is the part's title in the
    sidebar), each ``:numbered: 1``; Sphinx numbers every numbered toctree from 1, so
    each part would start again at chapter 1.  After Sphinx has numbered them, each
    part's chapters, with their section pages (3.1, 3.2, ...), are shifted by the
    chapters of the parts before it (in the section
    numbers, the contents' and the titles' numbers), and the figures, tables and
    equations are numbered again from the shifted chapters: Fig. 7.3, equation (7.1),
    the same numbers the notebooks print (posenc_notebook).  Returns the pages to write
    again."""
    from sphinx import addnodes
    from sphinx.environment.collectors.toctree import TocTreeCollector

    root = env.config.root_doc
    if root not in env.numbered_toctrees:
        return []
    offset, shifted = 0, []
    for toctree in env.get_doctree(root).findall(addnodes.toctree):
        if not toctree.get("numbered"):
            continue
        chapters = [ref for _title, ref in toctree["entries"] if ref in env.toc_secnumbers]
        if offset:
            for ref in chapters:
                for doc in _chapter_pages(env, ref):
                    _shift_chapter(env, doc, offset)
                    shifted.append(doc)
        offset += len(chapters)
    if not shifted:
        return []
    TocTreeCollector().assign_figure_numbers(env)
    return sorted(set(env.toc_secnumbers) | set(env.toc_fignumbers))


def _chapter_pages(env, docname: str) -> list[str]:
    """A chapter's first page and its section pages (its own toctree's entries, which
    Sphinx numbers chapter.section), in order."""
    from sphinx import addnodes

    pages = [docname]
    for toctree in env.get_doctree(docname).findall(addnodes.toctree):
        for _title, ref in toctree["entries"]:
            if ref in env.toc_secnumbers and ref not in pages:
                pages += _chapter_pages(env, ref)
    return pages


def _shift_chapter(env, docname: str, offset: int) -> None:
    env.toc_secnumbers[docname] = {
        anchor: ((number[0] + offset, *number[1:]) if number else number)
        for anchor, number in env.toc_secnumbers[docname].items()}
    for ref in env.tocs[docname].findall(nodes.reference):
        if ref.get("secnumber"):
            ref["secnumber"] = [ref["secnumber"][0] + offset, *ref["secnumber"][1:]]
    title = env.titles.get(docname)
    if title is not None and title.get("secnumber"):
        title["secnumber"] = [title["secnumber"][0] + offset, *title["secnumber"][1:]]


def setup(app: Sphinx) -> dict:
    app.connect("env-get-updated", continue_chapter_numbers, priority=900)
    app.add_config_value("posenc_watch_paths", [], "env")
    app.add_config_value("posenc_cache_root", "", "env")
    app.add_config_value("posenc_languages", {}, "html")
    app.add_config_value("posenc_book_lang", "en", "html")
    app.add_config_value("posenc_site_url", "", "html")
    app.add_config_value("posenc_read_order", "sorted", "")
    app.connect("config-inited", _configure_cache, priority=400)
    app.connect("env-get-outdated", _outdated_when_dependencies_change)
    app.connect("env-purge-doc", _purge_deps)
    app.connect("env-merge-info", _merge_deps)
    app.connect("env-before-read-docs", _read_order)
    app.connect("html-page-context", _page_context)
    app.connect("doctree-read", _join_cjk_lines)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
