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
   Code cells keep their source and outputs; the other cells hidden on the page stay
   (the notebook must run top to bottom) but are collapsed.
   Glue is bookkeeping of the site: every ``glue(...)`` call, the ``myst_nb`` import and
   the page's glue-only helpers are taken out of the code (:func:`strip_glue`), cells
   left empty are dropped, and a glued figure is shown by the cell that draws it (the
   figure as its last expression, or ``display(...)``), with the executed image as that
   cell's output; the markdown keeps the caption.  Edited and run again, the cell draws
   the new figure.  The phone variants of figures (for the site's ``<picture>``) are
   left out.
3. **Install cell.**  A first code cell installs ``requirements/notebooks.txt`` (what
   the chapters import, pinned) and posenc at the commit that built the site where posenc
   is missing (Colab, a bare kernel), and fetches the committed data files the chapter
   reads (benchmark and experiment results) unless they are beside the notebook.

:func:`write_notebook` is what ``posenc_site`` calls for the download menu.
"""

from __future__ import annotations

import ast
import json
import pathlib
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
    "    %pip install --quiet -r {raw}/requirements/notebooks.txt -c {raw}/requirements/constraints.txt"
    " \"posenc @ git+{repo}@{ref}\"\n"
)
FETCH_INTRO = {
    "en": ("# The committed results this chapter reads: {files_text} beside the notebook\n"
           "# (or at that path in a folder above it) is read as it is; else it is downloaded.\n"),
    "zh": ("# 本章读取仓库里提交的结果文件：笔记本旁边有 {files_text}（或上层目录里有同样路径的\n"
           "# 文件）时直接读取，不联网；没有时才下载。\n"),
}
FETCH_CODE = (
    "\n"
    "{intro}"
    "import os\n"
    "import pathlib\n"
    "import urllib.request\n"
    "\n"
    "here = pathlib.Path.cwd()\n"
    "for rel, variable in {files!r}.items():\n"
    "    beside = here / pathlib.PurePosixPath(rel).name\n"
    "    if any((d / rel).is_file() for d in (here, *here.parents)):\n"
    "        continue\n"
    "    if beside.is_file() and variable:\n"
    "        os.environ[variable] = str(beside)\n"
    "        continue\n"
    "    (here / rel).parent.mkdir(parents=True, exist_ok=True)\n"
    "    urllib.request.urlretrieve(\"{raw}/\" + rel, here / rel)\n"
)
#: The environment variable through which posenc.figures reads each results file from
#: any path (posenc/figures/bench_pages.py, gpu_bench_pages.py, experiments_pages.py).
RESULTS_VARIABLES = {
    "benchmarks/results.json": "POSENC_BENCH_RESULTS",
    "benchmarks/results-gpu.json": "POSENC_GPU_RESULTS",
    "experiments/results.json": "POSENC_EXPERIMENT_RESULTS",
    "experiments/results-gpu.json": "POSENC_EXPERIMENT_RESULTS_GPU",
    "experiments/recheck-cpu.json": "POSENC_EXPERIMENT_RECHECK",
}
INSTALL_TAG = "posenc-install"
FIGURE_MIMES = ("image/png", "image/jpeg", "image/svg+xml")
#: posenc.figures._style.PHONE_KEY: the phone variant of a figure, for the site only
PHONE_KEY = "posenc_phone"
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
        # The figure itself is the output of the cell that draws it (see _strip_glue):
        # run again, that cell shows the new figure.  Here only its caption.
        data = _glue_data(glue, block.arg)
        if not any(m in data for m in FIGURE_MIMES):
            raise ConversionError(f"glue figure {block.arg!r} has no image")
        caption = render_inline(" ".join(ln.strip() for ln in block.body if ln.strip()),
                                glue, resolver)
        prefix = resolver.figure_caption_prefix(block.options.get("name"))
        if caption or prefix:
            return [f"*{prefix}{caption}*".replace("**", "")]
        return []
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
        body = [ln for ln in map(_without_phone_marks, block.body) if ln is not None]
        inner = "\n".join(body).strip()
        return ["$$", inner + (f" \\tag{{{tag}}}" if tag else ""), "$$"]
    if name in ("note", "tip", "warning", "important", "caution", "attention", "hint",
                "seealso", "admonition"):
        title = block.arg if name == "admonition" else name.capitalize()
        inner = _render_lines(block.body, glue, resolver, attachments)
        return [f"> **{render_inline(title, glue, resolver)}**", ">",
                *(("> " + ln).rstrip() for ln in inner)]
    if name == "table":
        # its number and caption over it, as the page shows them
        prefix = resolver.figure_caption_prefix(block.options.get("name"))
        caption = render_inline(block.arg, glue, resolver)
        lines = _render_lines(block.body, glue, resolver, attachments)
        return [f"*{prefix}{caption}*".replace("**", ""), "", *lines] if caption or prefix \
            else lines
    if name == "container":
        # a styled block of the site (the front page's start link): its text, but not
        # what only the site shows (class posenc-web-only: the language switch)
        if "posenc-web-only" in block.arg.split():
            return []
        return _render_lines(block.body, glue, resolver, attachments)
    if name in ("toctree", "bibliography", "contents"):
        return []
    raise ConversionError(f"the MyST directive {{{name}}} has no notebook rendering")


def _without_phone_marks(line: str) -> str | None:
    """A line of display TeX without the site's phone marks (posenc_math: ``%|`` where
    the narrow form breaks, a ``%narrow:`` line), which a notebook's reader would only
    trip over; None for a line that was nothing but a mark."""
    if re.match(r"^\s*%narrow:", line):
        return None
    kept = re.sub(r"(?<!\\)\s*%\|[^\n]*", "", line)
    return None if kept.strip() == "" and line.strip() else kept


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
            line = _without_phone_marks(line)
            if line is not None:
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


# -- Glue out of the code -----------------------------------------------------------------

def _is_call_to(stmt: ast.stmt, names: set[str]) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in names)


def _is_glue_import(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.ImportFrom) and stmt.module == "myst_nb":
        if [a.name for a in stmt.names] != ["glue"]:
            raise ConversionError(f"import from myst_nb other than glue: {ast.unparse(stmt)}")
        return True
    return False


def _bodies(stmt: ast.stmt) -> list[list[ast.stmt]]:
    return [b for b in (getattr(stmt, f, None) for f in ("body", "orelse", "finalbody"))
            if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]


def _glue_only(stmts: list[ast.stmt], aliases: set[str]) -> bool:
    """Every statement is a glue call, or a block of nothing but glue calls."""
    return all(_is_call_to(s, aliases) or _is_glue_import(s)
               or (not isinstance(s, ast.ClassDef) and _bodies(s)
                   and all(_glue_only(b, aliases) for b in _bodies(s)))
               for s in stmts)


def glue_aliases(sources: list[str]) -> set[str]:
    """``glue`` and the functions of the page that only call it (``record(key, value)``)."""
    aliases = {"glue"}
    trees = [ast.parse(src) for src in sources]
    grew = True
    while grew:
        grew = False
        for tree in trees:
            for stmt in tree.body:
                if (isinstance(stmt, ast.FunctionDef) and stmt.name not in aliases
                        and _glue_only(stmt.body, aliases)):
                    aliases.add(stmt.name)
                    grew = True
    return aliases


@dataclass
class Stripped:
    """A code cell without its glue: ``source`` ("" when nothing is left) and the glued
    figures it now shows, as (key, "result" for its last expression or "display")."""

    source: str
    figures: list[tuple[str, str]]
    figure_name: str | None = None  # the source is only this name, showing a figure


def strip_glue(source: str, aliases: set[str], figure_keys: set[str]) -> Stripped:
    """``source`` with every glue call, glue import and glue-only function removed; a
    glued figure is shown instead (its value as the cell's last expression, else
    ``display(value)``), so that running the cell draws it."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ConversionError(f"a code cell is not Python: {exc}") from None
    lines = source.split("\n")
    drop: list[tuple[int, int]] = []
    shows: list[tuple[ast.stmt, str, str]] = []  # (statement, key, value source)

    def visit(stmts: list[ast.stmt], top: bool) -> bool:
        """Mark what goes; True when every statement of ``stmts`` goes."""
        gone = 0
        for stmt in stmts:
            key = None
            if _is_call_to(stmt, aliases):
                call = stmt.value  # type: ignore[attr-defined]
                if call.args and isinstance(call.args[0], ast.Constant):
                    key = call.args[0].value
                if key in figure_keys:
                    if not top or len(call.args) < 2:
                        raise ConversionError(f"glue figure {key!r} is glued inside a block")
                    shows.append((stmt, key, ast.get_source_segment(source, call.args[1])))
                    continue
                drop.append((stmt.lineno, stmt.end_lineno or stmt.lineno))
                gone += 1
            elif _is_glue_import(stmt) or (isinstance(stmt, ast.FunctionDef)
                                           and stmt.name in aliases):
                drop.append((stmt.lineno, stmt.end_lineno or stmt.lineno))
                gone += 1
            elif _bodies(stmt) and not isinstance(stmt, ast.ClassDef):
                start = len(drop)
                emptied = [visit(b, False) for b in _bodies(stmt)]
                if all(emptied):
                    del drop[start:]
                    drop.append((stmt.lineno, stmt.end_lineno or stmt.lineno))
                    gone += 1
                elif any(emptied):
                    raise ConversionError("a block left empty without its glue calls: "
                                          + ast.unparse(stmt)[:80])
        return gone == len(stmts)

    visit(tree.body, True)
    kept = [s for s in tree.body
            if not any(a <= s.lineno and (s.end_lineno or s.lineno) <= b for a, b in drop)]
    figures = []
    replace: dict[int, tuple[int, str]] = {}
    for stmt, key, value in shows:
        last = stmt is kept[-1]
        replace[stmt.lineno] = (stmt.end_lineno or stmt.lineno,
                                value if last else f"display({value})")
        figures.append((key, "result" if last else "display"))
    out: list[str] = []
    i = 1
    while i <= len(lines):
        if i in replace:
            end, text = replace[i]
            indent = lines[i - 1][:len(lines[i - 1]) - len(lines[i - 1].lstrip())]
            out += [indent + ln if j == 0 else ln for j, ln in enumerate(text.split("\n"))]
            i = end + 1
            continue
        span = next(((a, b) for a, b in drop if a <= i <= b), None)
        if span:
            i = span[1] + 1
            continue
        out.append(lines[i - 1])
        i += 1
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n")
    if not any(ln.strip() and not ln.lstrip().startswith("#") for ln in text.split("\n")):
        text = ""
    new = ast.parse(text)  # still Python
    left = sorted({n.id for n in ast.walk(new) if isinstance(n, ast.Name) and n.id in aliases})
    if left:
        raise ConversionError(f"glue left in a code cell: {left} in {text[:80]!r}")
    only = (len(new.body) == 1 and isinstance(new.body[0], ast.Expr)
            and isinstance(new.body[0].value, ast.Name) and len(figures) == 1
            and figures[0][1] == "result")
    return Stripped(text, figures, new.body[0].value.id if only else None)  # type: ignore


def _assigns(source: str, name: str) -> bool:
    tree = ast.parse(source)
    return any(isinstance(t, ast.Name) and t.id == name
               for s in tree.body if isinstance(s, (ast.Assign, ast.AnnAssign))
               for t in (s.targets if isinstance(s, ast.Assign) else [s.target]))


def _display_after_assignment(source: str, name: str) -> str:
    """``source`` with ``display(name)`` after the last top-level assignment of ``name``."""
    tree = ast.parse(source)
    end = max(s.end_lineno or s.lineno for s in tree.body
              if isinstance(s, (ast.Assign, ast.AnnAssign)) and _assigns(ast.unparse(s), name))
    lines = source.split("\n")
    return "\n".join([*lines[:end], f"display({name})", *lines[end:]])


def _ends_with_expression(source: str) -> bool:
    tree = ast.parse(source)
    return bool(tree.body) and isinstance(tree.body[-1], ast.Expr)


def _figure_output(glued: dict[str, Any], kind: str, count: int | None) -> Any:
    import nbformat

    data = {k: v for k, v in glued.get("data", {}).items()
            if k in FIGURE_MIMES or k == "text/plain"}
    metadata = {k: v for k, v in glued.get("metadata", {}).items()
                if k in FIGURE_MIMES}
    if kind == "result":
        return nbformat.v4.new_output("execute_result", data, metadata=metadata,
                                      execution_count=count)
    return nbformat.v4.new_output("display_data", data, metadata=metadata)


def _drop_phone_variants(output: Any) -> None:
    """The phone variants of figures are for the site's <picture>; not in a notebook."""
    for meta in output.get("metadata", {}).values():
        if isinstance(meta, dict):
            meta.pop(PHONE_KEY, None)


def convert(nb: Any, glue: dict[str, Any], resolver: Resolver, install: str) -> Any:
    """The executed MyST-NB notebook ``nb`` as a plain Jupyter notebook (a new object).

    ``glue`` maps each glue key to its output bundle (``{"data": {mime: value}}``);
    ``install`` is the source of the first code cell.
    """
    import copy

    import nbformat

    out = nbformat.v4.new_notebook()
    figure_keys = {k for k, v in glue.items()
                   if any(m in v.get("data", {}) for m in FIGURE_MIMES)}
    aliases = glue_aliases([c.source for c in nb.cells if c.cell_type == "code"])
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
            stripped = strip_glue(cell.source, aliases, figure_keys)
            outputs = [copy.deepcopy(o) for o in cell.get("outputs", [])
                       if "scrapbook" not in o.get("metadata", {})]
            count = cell.get("execution_count")
            previous = next((c for c in reversed(out.cells) if c.cell_type == "code"), None)
            name = stripped.figure_name
            if name and previous is not None and _assigns(previous.source, name):
                # The hidden cell only glued the figure the cell above drew: that cell
                # now ends with the figure, and shows it when run.
                key = stripped.figures[0][0]
                if _ends_with_expression(previous.source):
                    # its last expression stays its result: the figure is shown right
                    # after it is drawn, and its output comes before that result
                    previous.source = _display_after_assignment(previous.source, name)
                    shown = _figure_output(glue[key], "display", None)
                    at = next((i for i, o in enumerate(previous.outputs)
                               if o.output_type == "execute_result"), len(previous.outputs))
                    previous.outputs.insert(at, shown)
                else:
                    previous.source += f"\n{name}"
                    previous.outputs.append(_figure_output(
                        glue[key], "result", previous.execution_count))
                continue
            if not stripped.source:
                continue  # bookkeeping only
            outputs += [_figure_output(glue[key], kind, count)
                        for key, kind in stripped.figures]
            new = nbformat.v4.new_code_cell(stripped.source)
            new.outputs = outputs
            new.execution_count = count
            tags = list(cell.metadata.get("tags", []))
            if tags:
                new.metadata["tags"] = tags
            if HIDDEN_TAGS & set(tags):
                new.metadata["jupyter"] = {"source_hidden": True}
            shown = (cell.metadata.get("mystnb") or {}).get("figure") or {}
            if shown.get("caption"):
                # the number and caption the page gives what the cell shows (a table it
                # computes: posenc_site.computed_table), over the cell
                prefix = resolver.figure_caption_prefix(shown.get("name"))
                caption = render_inline(str(shown["caption"]), glue, resolver)
                out.cells.append(nbformat.v4.new_markdown_cell(
                    f"*{prefix}{caption}*".replace("**", "")))
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
        for output in cell.get("outputs", []):
            _drop_phone_variants(output)
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
        files = {f: RESULTS_VARIABLES.get(f) for f in sorted(data_files)}
        names = ", ".join(pathlib.PurePosixPath(f).name for f in files)
        intro = FETCH_INTRO.get(lang, FETCH_INTRO["en"]).format(files_text=names)
        text += FETCH_CODE.format(files=files, raw=raw, intro=intro)
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
        """The number the page prints for equation ``label``: chapter-qualified ("7.1")
        where the chapter is numbered, as Sphinx numbers it (numfig, math_numfig), else
        the math domain's running number."""
        entry = self.math.equations.get(label)
        if entry is None:
            return None
        doc, number = entry
        numbers = self.env.toc_fignumbers.get(doc, {}).get("displaymath", {})
        qualified = numbers.get(f"equation-{label}")
        sep = self.app.config.math_numsep
        return sep.join(map(str, qualified)) if qualified else str(number)

    def eq(self, label: str) -> Link:
        entry = self.math.equations.get(label)
        if entry is None:
            return self._missing(f"the equation {label!r}", f"({label})")
        return Link(f"({self.equation_number(label)})",
                    self._url(entry[0], f"equation-{label}"))

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

