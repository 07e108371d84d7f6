"""Each chapter as a notebook that reads like the page: executed, with the text filled in.

A chapter is a MyST-NB page; its raw form as ``.ipynb`` is full of MyST syntax that only
Sphinx understands (``{glue:text}`` placeholders where the numbers go, ``{ref}`` and
``{cite}`` roles, ``(label)=`` targets) and has no outputs.  This module makes the
download a real notebook instead:

1. **Capture.**  When MyST-NB has executed a page (or taken its outputs from the execution
   cache), the executed notebook and its glue values are saved per language
   (``posenc_executed_root``/<page>.ipynb).  MyST-NB's own copy in ``jupyter_execute`` is
   shared by the two languages, which build at the same time, so it is not used.
2. **Convert** (:func:`convert`, pure, tested on its own).  Markdown cells get every glued
   value substituted, cross-references, equation and figure numbers, glossary terms, API
   names and citations rendered as text with links to the published page, numbered
   display equations tagged with their numbers, ``{glue:figure}`` blocks turned into
   images attached to the cell with their captions, ``{doctest}`` blocks into Python code
   blocks, and label targets and comments dropped.  Anything MyST left that the converter
   does not know is an error, so a new role cannot leak into the downloads unnoticed.
   Code cells keep their source and outputs; the bookkeeping cells hidden on the page stay
   (the notebook must run top to bottom) but are collapsed.
3. **Install cell.**  A first code cell installs the book's pinned requirements and
   posenc at the commit that built the site where posenc is missing (Colab, a bare
   kernel), and fetches the committed data files the chapter reads (benchmark and
   experiment results) when they are not beside the notebook.

:func:`write_notebook` is what ``posenc_site`` calls for the download menu.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,}|:{3,})\s*(?P<info>.*)$")
ROLE = re.compile(r"\{(?P<role>[\w:.-]+)\}`(?P<body>[^`]*)`")
LABEL_TARGET = re.compile(r"^\s*\([^()\s]+\)=\s*$")
DOLLAR_LABEL = re.compile(r"^(?P<math>.*)\$\$\s*\((?P<label>[^()\s]+)\)\s*$")
OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*)$")
TITLED = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$", re.S)

INSTALL_INTRO = {
    "en": (
        "# This notebook is the chapter \"{page}\" of the book \"{title}\" ({url}),\n"
        "# executed when the site was built.  Where posenc is not installed (Colab, Binder\n"
        "# without the book's image, a bare kernel), this cell installs the book's pinned\n"
        "# requirements and posenc at the commit {short} that built it.\n"
    ),
    "zh": (
        "# 本笔记本是《{title}》中的“{page}”一章（{url}），输出是构建网站时执行的结果。\n"
        "# 在没有装 posenc 的环境里（Colab、未用本书镜像的 Binder、新的内核），这个单元会安装\n"
        "# 本书固定版本的依赖，以及构建本书的那次提交（{short}）上的 posenc。\n"
    ),
}
INSTALL_CODE = (
    "import importlib.util\n"
    "\n"
    "if importlib.util.find_spec(\"posenc\") is None:\n"
    "    %pip install --quiet -r {raw}/requirements/docs.txt -c {raw}/requirements/constraints.txt"
    " \"posenc @ git+{repo}@{ref}\"\n"
)
FETCH_CODE = (
    "\n"
    "# The committed results this chapter reads, when they are not beside the notebook.\n"
    "import pathlib\n"
    "import urllib.request\n"
    "\n"
    "for rel in {files!r}:\n"
    "    here = pathlib.Path.cwd()\n"
    "    if not any((d / rel).is_file() for d in (here, *here.parents)):\n"
    "        (here / rel).parent.mkdir(parents=True, exist_ok=True)\n"
    "        urllib.request.urlretrieve(\"{raw}/\" + rel, here / rel)\n"
)
INSTALL_TAG = "posenc-install"
HIDDEN_TAGS = {"remove-cell", "remove-input", "hide-cell", "hide-input"}


class ConversionError(ValueError):
    """A MyST construct the notebook conversion does not know how to render."""


@dataclass
class Link:
    """Rendered text of a reference and the URL it points to (None: plain text)."""

    text: str
    url: str | None = None

    def markdown(self, code: bool = False) -> str:
        text = f"`{self.text}`" if code else _escape(self.text)
        return f"[{text}]({self.url})" if self.url else text


def _escape(text: str) -> str:
    return text.replace("[", "\\[").replace("]", "\\]")


class Resolver:
    """What a reference means.  The Sphinx resolver (:class:`SphinxResolver`) looks in the
    build environment; tests pass a small one of their own."""

    def ref(self, label: str, title: str | None) -> Link:
        raise NotImplementedError

    def numref(self, label: str, title: str | None) -> Link:
        raise NotImplementedError

    def eq(self, label: str) -> Link:
        raise NotImplementedError

    def equation_number(self, label: str) -> str | None:
        raise NotImplementedError

    def doc(self, docname: str, title: str | None) -> Link:
        raise NotImplementedError

    def term(self, term: str, title: str | None) -> Link:
        raise NotImplementedError

    def api(self, name: str, title: str | None, role: str) -> Link:
        raise NotImplementedError

    def cite(self, keys: list[str], textual: bool) -> str:
        raise NotImplementedError

    def figure_caption_prefix(self, label: str | None) -> str:
        raise NotImplementedError


# -- Glue values -------------------------------------------------------------------------

def _plain(glue: dict[str, Any], key: str, fmt: str) -> str:
    from myst_nb.core.variables import format_plain_text

    data = _glue_data(glue, key)
    if "text/plain" not in data:
        raise ConversionError(f"glue {key!r} has no text/plain value")
    return format_plain_text(data["text/plain"], fmt)


def _glue_data(glue: dict[str, Any], key: str) -> dict[str, Any]:
    if key not in glue:
        raise ConversionError(f"glue key {key!r} is not set by any cell of the page")
    return glue[key].get("data", {})


# -- Inline roles ------------------------------------------------------------------------

def _split_title(body: str) -> tuple[str | None, str]:
    m = TITLED.match(body.strip())
    if m and m["title"]:
        return m["title"], m["target"].strip()
    return None, body.strip()


def render_inline(text: str, glue: dict[str, Any], resolver: Resolver) -> str:
    """``text`` with every MyST role replaced by Markdown."""

    def one(m: re.Match) -> str:
        role, body = m["role"], m["body"]
        if role in ("glue:text", "glue"):
            key, _, fmt = body.rpartition(":") if ":" in body else (body, "", "s")
            return _plain(glue, key, fmt or "s")
        if role == "glue:md":
            key, _, _fmt = body.partition(":")
            return _glue_data(glue, key).get("text/markdown", "")
        if role == "glue:math":
            key, _, _fmt = body.partition(":")
            return "$" + _plain(glue, key, "s").strip("$") + "$"
        title, target = _split_title(body)
        if role == "ref":
            return resolver.ref(target, title).markdown()
        if role == "numref":
            return resolver.numref(target, title).markdown()
        if role == "eq":
            return resolver.eq(target).markdown()
        if role == "doc":
            return resolver.doc(target, title).markdown()
        if role == "term":
            return resolver.term(target, title).markdown()
        if role in ("func", "mod", "class", "meth", "attr", "data", "obj", "py:func",
                    "py:mod", "py:class", "py:meth"):
            return resolver.api(target, title, role.split(":")[-1]).markdown(code=True)
        if role in ("cite", "cite:p", "cite:t"):
            keys = [k.strip() for k in body.split(",") if k.strip()]
            return resolver.cite(keys, textual=role == "cite:t")
        if role == "math":
            return f"${body}$"
        raise ConversionError(f"the MyST role {{{role}}} has no notebook rendering")

    return ROLE.sub(one, text)


# -- Blocks ------------------------------------------------------------------------------

@dataclass
class _Block:
    name: str
    arg: str
    options: dict[str, str]
    body: list[str]


def _parse_directive(info: str, body: list[str]) -> _Block | None:
    m = re.match(r"^\{(?P<name>[^}]+)\}\s*(?P<arg>.*)$", info.strip())
    if not m:
        return None
    options: dict[str, str] = {}
    rest = list(body)
    if rest and rest[0].strip() == "---":  # YAML options
        end = next((i for i in range(1, len(rest)) if rest[i].strip() == "---"), None)
        if end is None:
            raise ConversionError(f"unterminated options of {{{m['name']}}}")
        for line in rest[1:end]:
            key, _, value = line.partition(":")
            options[key.strip()] = value.strip()
        rest = rest[end + 1:]
    else:
        while rest and OPTION.match(rest[0]):
            o = OPTION.match(rest[0])
            assert o is not None
            options[o["key"]] = o["value"]
            rest = rest[1:]
    return _Block(m["name"], m["arg"].strip(), options, rest)


def _render_block(block: _Block, glue: dict[str, Any], resolver: Resolver,
                  attachments: dict[str, dict[str, str]]) -> list[str]:
    name = block.name
    if name == "glue:figure":
        data = _glue_data(glue, block.arg)
        mime = next((m for m in ("image/png", "image/jpeg", "image/svg+xml") if m in data), None)
        if mime is None:
            raise ConversionError(f"glue figure {block.arg!r} has no image")
        ext = {"image/png": "png", "image/jpeg": "jpg", "image/svg+xml": "svg"}[mime]
        fname = f"{block.arg}.{ext}"
        payload = data[mime]
        if mime == "image/svg+xml":
            payload = base64.b64encode(payload.encode("utf-8")).decode("ascii")
        attachments[fname] = {mime: payload}
        caption = render_inline(" ".join(ln.strip() for ln in block.body if ln.strip()),
                                glue, resolver)
        alt = block.options.get("alt") or caption or block.arg
        out = [f"![{_escape(render_inline(alt, glue, resolver))}](attachment:{fname})"]
        prefix = resolver.figure_caption_prefix(block.options.get("name"))
        if caption or prefix:
            out += ["", f"*{prefix}{caption}*".replace("**", "")]
        return out
    if name == "glue:md":
        return _glue_data(glue, block.arg).get("text/markdown", "").splitlines()
    if name in ("glue", "glue:any"):
        data = _glue_data(glue, block.arg)
        if "text/markdown" in data:
            return data["text/markdown"].splitlines()
        return ["```", *str(data.get("text/plain", "")).splitlines(), "```"]
    if name in ("doctest", "testcode", "code-block", "code", "sourcecode"):
        lang = "python" if name in ("doctest", "testcode") else (block.arg or "")
        return [f"```{lang}", *block.body, "```"]
    if name == "math":
        label = block.options.get("label") or block.options.get("name")
        tag = resolver.equation_number(label) if label else None
        inner = "\n".join(block.body).strip()
        return ["$$", inner + (f" \\tag{{{tag}}}" if tag else ""), "$$"]
    if name in ("note", "tip", "warning", "important", "caution", "attention", "hint",
                "seealso", "admonition"):
        title = block.arg if name == "admonition" else name.capitalize()
        inner = _render_lines(block.body, glue, resolver, attachments)
        return [f"> **{render_inline(title, glue, resolver)}**", ">",
                *(("> " + ln).rstrip() for ln in inner)]
    if name in ("toctree", "bibliography", "contents"):
        return []
    raise ConversionError(f"the MyST directive {{{name}}} has no notebook rendering")


def _tag_closing(line: str, resolver: Resolver) -> str:
    """``... $$ (label)`` as ``... \\tag{n} $$`` (Jupyter's MathJax numbers it)."""
    m = DOLLAR_LABEL.match(line)
    if not m:
        return line
    tag = resolver.equation_number(m["label"])
    return m["math"].rstrip() + (f" \\tag{{{tag}}}" if tag else "") + " $$"


def _render_lines(lines: list[str], glue: dict[str, Any], resolver: Resolver,
                  attachments: dict[str, dict[str, str]]) -> list[str]:
    out: list[str] = []
    prose: list[str] = []  # a run of prose lines: a role may span a line break

    def flush() -> None:
        if prose:
            out.extend(render_inline("\n".join(prose), glue, resolver).split("\n"))
            prose.clear()

    i = 0
    in_math = False
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        m = FENCE.match(line)
        if in_math:
            if "$$" in stripped:  # the closing $$, perhaps with (label)
                in_math = False
                line = _tag_closing(line, resolver)
            out.append(line)
        elif m:
            flush()
            fence = m["fence"]
            j = i + 1
            while j < len(lines) and lines[j].strip() != fence:
                j += 1
            if j >= len(lines):
                raise ConversionError(f"unclosed fence {fence} at {line!r}")
            block = _parse_directive(m["info"], lines[i + 1:j])
            if block is None:  # an ordinary code fence: kept as it is
                out += lines[i:j + 1]
            else:
                out += _render_block(block, glue, resolver, attachments)
            i = j
        elif LABEL_TARGET.match(line) or stripped.startswith("%"):
            flush()
        elif stripped.startswith("$$"):
            flush()
            if "$$" in stripped[2:]:  # $$ ... $$ on one line, perhaps with (label)
                out.append(_tag_closing(line, resolver))
            else:
                in_math = True
                out.append(line)
        else:
            prose.append(line)
        i += 1
    flush()
    return out


def convert_markdown(source: str, glue: dict[str, Any], resolver: Resolver
                     ) -> tuple[str, dict[str, dict[str, str]]]:
    """A markdown cell's MyST source as plain (Jupyter) Markdown, and its attachments."""
    attachments: dict[str, dict[str, str]] = {}
    lines = _render_lines(source.splitlines(), glue, resolver, attachments)
    text = "\n".join(lines).strip("\n")
    text = re.sub(r"\n{3,}", "\n\n", text)
    left = ROLE.search(text)
    if left:
        raise ConversionError(f"MyST role left after conversion: {left.group(0)!r}")
    return text, attachments


def convert(nb: Any, glue: dict[str, Any], resolver: Resolver, install: str) -> Any:
    """The executed MyST-NB notebook ``nb`` as a plain Jupyter notebook (a new object).

    ``glue`` maps each glue key to its output bundle (``{"data": {mime: value}}``);
    ``install`` is the source of the first code cell.
    """
    import copy

    import nbformat

    out = nbformat.v4.new_notebook()
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            text, attachments = convert_markdown(cell.source, glue, resolver)
            if not text.strip():
                continue
            new = nbformat.v4.new_markdown_cell(text)
            if attachments:
                new["attachments"] = attachments
            out.cells.append(new)
        elif cell.cell_type == "code":
            new = nbformat.v4.new_code_cell(cell.source)
            new.outputs = [copy.deepcopy(o) for o in cell.get("outputs", [])
                           if "scrapbook" not in o.get("metadata", {})]
            new.execution_count = cell.get("execution_count")
            tags = list(cell.metadata.get("tags", []))
            if tags:
                new.metadata["tags"] = tags
            if HIDDEN_TAGS & set(tags):
                new.metadata["jupyter"] = {"source_hidden": True}
            out.cells.append(new)
        # raw cells (none in the book) are dropped
    install_cell = nbformat.v4.new_code_cell(install)
    install_cell.metadata["tags"] = [INSTALL_TAG]
    first = out.cells[0] if out.cells else None
    title_first = (first is not None and first.cell_type == "markdown"
                   and first.source.lstrip().startswith("# "))
    out.cells.insert(1 if title_first else 0, install_cell)
    kernelspec = dict(nb.metadata.get("kernelspec") or {})
    kernelspec.setdefault("name", "python3")
    kernelspec.setdefault("display_name", "Python 3")
    kernelspec.setdefault("language", "python")
    out.metadata = {"kernelspec": kernelspec,
                    "language_info": {"name": "python"}}
    for i, cell in enumerate(out.cells):  # stable ids: same input, same bytes
        cell["id"] = f"cell-{i}"
    nbformat.validate(out)
    return out


def install_source(lang: str, *, page: str, title: str, url: str, repo: str, ref: str,
                   data_files: list[str]) -> str:
    """The first cell: install where posenc is missing, fetch the data files read."""
    repo = repo.rstrip("/")
    org_repo = repo.split("github.com/", 1)[-1]
    raw = f"https://raw.githubusercontent.com/{org_repo}/{ref}"
    text = INSTALL_INTRO.get(lang, INSTALL_INTRO["en"]).format(
        page=page, title=title, url=url, short=ref[:12]) + "\n"
    text += INSTALL_CODE.format(raw=raw, repo=repo, ref=ref)
    if data_files:
        text += FETCH_CODE.format(files=sorted(data_files), raw=raw)
    return text


# -- Capture (Sphinx side) -------------------------------------------------------------

_APP = None
_PATCHED = False


def _executed_path(app, docname: str) -> Path:
    return Path(app.config.posenc_executed_root) / f"{docname}.ipynb"


def _patch_client() -> None:
    """Save every executed notebook with its glue values as MyST-NB closes its client."""
    global _PATCHED
    if _PATCHED:
        return
    from myst_nb.core.execute.base import NotebookClientBase

    original_exit = NotebookClientBase.__exit__

    def __exit__(self, exc_type, exc_val, exc_tb):
        result = original_exit(self, exc_type, exc_val, exc_tb)
        app = _APP
        if exc_type is None and app is not None and self.path is not None:
            try:
                docname = app.env.path2doc(str(self.path))
            except Exception:  # noqa: BLE001 - a path outside the source tree
                docname = None
            if docname:
                save_executed(app, docname, self.notebook, self.glue_data)
        return result

    NotebookClientBase.__exit__ = __exit__  # type: ignore[method-assign]
    _PATCHED = True


def save_executed(app, docname: str, notebook: Any, glue_data: dict[str, Any]) -> None:
    import nbformat

    nb = nbformat.from_dict(json.loads(json.dumps(notebook)))
    nb.metadata["posenc_glue"] = json.loads(json.dumps(glue_data, default=str))
    path = _executed_path(app, docname)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(nb), encoding="utf-8")


class SphinxResolver(Resolver):
    """References resolved in the Sphinx environment, linked to the published page."""

    def __init__(self, app, pagename: str):
        self.app = app
        self.env = app.env
        self.page = pagename
        self.base = app.config.posenc_site_url.rstrip("/") + "/" + app.config.posenc_book_lang + "/"
        self.std = self.env.get_domain("std")
        self.math = self.env.get_domain("math")
        self.numfig = app.config.numfig_format

    def _url(self, docname: str, anchor: str | None = None) -> str:
        return self.base + docname + ".html" + (f"#{anchor}" if anchor else "")

    def _missing(self, what: str, text: str) -> Link:
        """A reference this build cannot resolve: a warning (an error under -W, as in every
        full build) and plain text, so a one-page preview still gets its notebook."""
        from sphinx.util import logging

        logging.getLogger(__name__).warning(
            "notebook of %s: %s is not defined in this build", self.page, what,
            location=(self.page, None), type="posenc", subtype="notebook")
        return Link(text)

    def ref(self, label: str, title: str | None) -> Link:
        label = label.lower()
        if label in self.std.labels:
            doc, anchor, name = self.std.labels[label]
            return Link(title or name, self._url(doc, anchor))
        if label in self.std.anonlabels and title:
            doc, anchor = self.std.anonlabels[label]
            return Link(title, self._url(doc, anchor))
        return self._missing(f"the label {label!r}", title or label)

    def _fignumber(self, doc: str, anchor: str) -> tuple[str, str] | None:
        for figtype, numbers in self.env.toc_fignumbers.get(doc, {}).items():
            if anchor in numbers:
                return figtype, ".".join(map(str, numbers[anchor]))
        return None

    def numref(self, label: str, title: str | None) -> Link:
        label = label.lower()
        found = self._fignumber(*self.std.anonlabels[label]) if (
            label in self.std.anonlabels) else None
        if found is None:
            return self._missing(f"a numbered target {label!r}", title or label)
        doc, anchor = self.std.anonlabels[label]
        figtype, number = found
        fmt = title or self.numfig.get(figtype, "%s")
        text = fmt.replace("%s", number).replace("{number}", number)
        return Link(text, self._url(doc, anchor))

    def equation_number(self, label: str) -> str | None:
        entry = self.math.equations.get(label)
        return str(entry[1]) if entry else None

    def eq(self, label: str) -> Link:
        entry = self.math.equations.get(label)
        if entry is None:
            return self._missing(f"the equation {label!r}", f"({label})")
        doc, number = entry
        return Link(f"({number})", self._url(doc, f"equation-{label}"))

    def doc(self, docname: str, title: str | None) -> Link:
        docname = docname.lstrip("/").removesuffix(".md")
        if docname not in self.env.titles:
            return self._missing(f"the page {docname!r}", title or docname)
        return Link(title or self.env.titles[docname].astext(), self._url(docname))

    def term(self, term: str, title: str | None) -> Link:
        entry = self.std.objects.get(("term", term)) or self.std._terms.get(term.lower())
        if entry is None:
            return self._missing(f"the glossary term {term!r}", title or term)
        doc, anchor = entry[0], entry[1]
        return Link(title or term, self._url(doc, anchor))

    def api(self, name: str, title: str | None, role: str) -> Link:
        short = name.startswith("~")
        name = name.lstrip("~")
        text = title or (name.rsplit(".", 1)[-1] if short else name)
        if role in ("func", "meth") and not title:
            text += "()"
        py = self.env.get_domain("py")
        entry = py.objects.get(name)
        if entry is None:
            return Link(text)  # not documented on the API page: plain code text
        return Link(text, self._url(entry.docname, entry.node_id))

    def cite(self, keys: list[str], textual: bool) -> str:
        domain = self.env.get_domain("cite")
        by_key = {c.key: c for c in domain.citations}
        parts = []
        for key in keys:
            citation = by_key.get(key)
            if citation is None:
                parts.append(self._missing(f"the citation {key!r}", key).markdown())
                continue
            author, year = _author_year(citation.entry)
            url = self._url(citation.bibliography_key.docname, citation.citation_id)
            if textual:
                parts.append(f"[{_escape(author)} ({year})]({url})")
            else:
                parts.append(f"[{_escape(author)}, {year}]({url})")
        if textual:
            return ", ".join(parts)
        return "(" + "; ".join(parts) + ")"

    def figure_caption_prefix(self, label: str | None) -> str:
        if not label:
            return ""
        label = label.lower()
        if label not in self.std.anonlabels:
            return ""
        doc, anchor = self.std.anonlabels[label]
        found = self._fignumber(doc, anchor)
        if found is None:
            return ""
        figtype, number = found
        return self.numfig.get(figtype, "%s").replace("%s", number) + " "


def _author_year(entry) -> tuple[str, str]:
    """"Su et al." / "Press and Smith" / an organisation's name, and the year."""
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [" ".join(p.last_names) or " ".join(p.first_names) for p in persons]
    names = [re.sub(r"[{}]", "", n) for n in names]
    if not names:
        names = [re.sub(r"[{}]", "", entry.fields.get("organization", "")
                        or entry.fields.get("publisher", "") or entry.key)]
    if len(names) >= 3:
        author = f"{names[0]} et al."
    elif len(names) == 2:
        author = f"{names[0]} and {names[1]}"
    else:
        author = names[0]
    return author, str(entry.fields.get("year", "n.d."))


def write_notebook(app, pagename: str, data_files: list[str]) -> str:
    """Convert the page's executed notebook into ``_sources/<page>.ipynb``; its name."""
    import nbformat

    cfg = app.config
    executed = _executed_path(app, pagename)
    if not executed.is_file():
        from sphinx.util import logging

        logging.getLogger(__name__).warning(
            "no notebook for %s: no executed notebook at %s (it is saved when the page is "
            "executed or read from the execution cache; rebuild with -E)", pagename, executed,
            location=(pagename, None), type="posenc", subtype="notebook")
        return pagename + ".ipynb"
    nb = nbformat.read(executed, as_version=4)
    glue = dict(nb.metadata.pop("posenc_glue", {}) or {})
    title = app.env.titles[pagename].astext() if pagename in app.env.titles else pagename
    site = cfg.posenc_site_url.rstrip("/") + "/" + cfg.posenc_book_lang + "/"
    install = install_source(
        cfg.posenc_book_lang, page=title, title=cfg.html_title or cfg.project,
        url=site + pagename + ".html", repo=cfg.posenc_repo_url, ref=cfg.posenc_repo_ref,
        data_files=data_files,
    )
    target = Path(app.outdir, "_sources", pagename + ".ipynb")
    try:
        out = convert(nb, glue, SphinxResolver(app, pagename), install)
    except ConversionError as exc:  # a warning: -W fails the build, a preview goes on
        from sphinx.util import logging

        logging.getLogger(__name__).warning(
            "no notebook for %s: %s", pagename, exc, location=(pagename, None),
            type="posenc", subtype="notebook")
        target.unlink(missing_ok=True)
        return pagename + ".ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(nbformat.writes(out) + "\n", encoding="utf-8")
    return pagename + ".ipynb"


def setup(app) -> None:
    """Called from posenc_site.setup."""
    global _APP
    _APP = app
    app.add_config_value("posenc_executed_root", "", "env")
    _patch_client()

