"""What must be identical between the English and the Chinese page of a pair.

Prose is free to differ (it is written natively in each language); everything that
is computed, numbered or referenced is not:

* code cells, in order, after removing comments, blank lines and the page's language
  setup cell (the ``remove-cell`` cell that calls ``set_language``);
* display math (``$$…$$``, ``{math}`` blocks, bare amsmath environments);
* glue keys used in the prose, labels defined, labels referenced, figure names and
  citation keys.

:func:`compare_trees` returns a list of human-readable differences, each naming the
page and the first thing that differs.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})\s*(?P<info>.*)$")
DIRECTIVE = re.compile(r"^\{(?P<name>[^}]+)\}\s*(?P<arg>.*)$")
OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*)$")
LABEL_TARGET = re.compile(r"^\((?P<label>[^()\s]+)\)=\s*$")
ROLE = re.compile(r"\{(?P<role>[\w:-]+)\}`(?P<body>[^`]*)`")
DOLLAR_CLOSE = re.compile(r"^(?P<math>.*)\$\$\s*(?:\((?P<label>[^()\s]+)\))?\s*$")
AMS_ENV = re.compile(r"^\\begin\{(equation|align|gather|multline|eqnarray)\*?\}")

SETUP_CALL = "set_language("
CITE_ROLES = {"cite", "cite:p", "cite:t", "cite:ps", "cite:ts", "cite:ct", "cite:cp",
              "cite:year", "cite:author", "footcite"}
REF_ROLES = {"ref", "numref", "eq", "doc", "term"}


@dataclass
class Page:
    """The parts of a MyST-NB page that parity compares."""

    code_cells: list[str] = field(default_factory=list)
    math: list[str] = field(default_factory=list)
    glue_keys: set[str] = field(default_factory=set)
    labels: set[str] = field(default_factory=set)
    references: set[str] = field(default_factory=set)
    figures: set[str] = field(default_factory=set)
    citations: set[str] = field(default_factory=set)
    setup_cells: int = 0


def strip_comments(code: str) -> str:
    """Code without comments, trailing spaces and blank lines (tokenize-aware)."""
    try:
        tokens = [
            tok for tok in tokenize.generate_tokens(io.StringIO(code).readline)
            if tok.type != tokenize.COMMENT
        ]
        code = tokenize.untokenize(tokens)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        # IPython magics or half-written code: fall back to dropping whole-line comments.
        code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("#"))
    lines = [line.rstrip() for line in code.splitlines()]
    return "\n".join(line for line in lines if line.strip())


def _normalise_math(text: str) -> str:
    return " ".join(text.split())


def _split_options(body: list[str]) -> tuple[dict[str, str], list[str]]:
    """Directive options (``:key: value`` lines or a ``---`` YAML block) and the content."""
    options: dict[str, str] = {}
    i = 0
    if body and body[0].strip() == "---":
        i = 1
        while i < len(body) and body[i].strip() != "---":
            key, _, value = body[i].partition(":")
            options[key.strip()] = value.strip()
            i += 1
        i += 1
    else:
        while i < len(body) and (m := OPTION.match(body[i].strip())):
            options[m["key"]] = m["value"]
            i += 1
    return options, body[i:]


def _scan_prose(line: str, page: Page) -> None:
    for m in ROLE.finditer(line):
        role, body = m["role"], m["body"].strip()
        if role.startswith("glue"):
            page.glue_keys.add(body.split(":", 1)[0].strip())
        elif role in CITE_ROLES:
            page.citations.update(k.strip() for k in body.split(",") if k.strip())
        elif role in REF_ROLES:
            target = re.search(r"<([^>]+)>\s*$", body)
            page.references.add((target[1] if target else body).strip())


def parse_page(text: str) -> Page:
    """Parse a MyST-NB Markdown page into the parts parity compares."""
    page = Page()
    lines = text.splitlines()
    i = 0
    if lines and lines[0].strip() == "---":  # front matter
        i = 1
        while i < len(lines) and lines[i].strip() != "---":
            i += 1
        i += 1
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        fence = FENCE.match(stripped)
        if fence:
            marker = fence["fence"]
            body = []
            i += 1
            # A fence closes on the same character repeated at least as often.
            while i < len(lines) and not (
                lines[i].strip().startswith(marker[0] * len(marker))
                and set(lines[i].strip()) == {marker[0]}
            ):
                body.append(lines[i])
                i += 1
            i += 1
            _handle_block(fence["info"].strip(), body, page)
            continue
        if stripped.startswith("$$"):
            # $$ ... $$ on one line or many; MyST allows a label after the closing $$.
            chunk = [stripped[2:]]
            close = DOLLAR_CLOSE.match(stripped[2:])
            while not close:
                i += 1
                if i >= len(lines):
                    break
                chunk.append(lines[i])
                close = DOLLAR_CLOSE.match(lines[i].strip())
            if close:
                chunk[-1] = close["math"]
                if close["label"]:
                    page.labels.add(close["label"])
            page.math.append(_normalise_math("\n".join(chunk)))
            i += 1
            continue
        if AMS_ENV.match(stripped):
            env = AMS_ENV.match(stripped)[1]
            math = [stripped]
            i += 1
            while i < len(lines) and not re.match(rf"^\\end\{{{env}\*?\}}", lines[i].strip()):
                math.append(lines[i])
                i += 1
            if i < len(lines):
                math.append(lines[i].strip())
            i += 1
            page.math.append(_normalise_math("\n".join(math)))
            continue
        target = LABEL_TARGET.match(stripped)
        if target:
            page.labels.add(target["label"])
        else:
            _scan_prose(line, page)
        i += 1
    return page


def _handle_block(info: str, body: list[str], page: Page) -> None:
    directive = DIRECTIVE.match(info)
    if not directive:
        return  # a plain code listing: not executed, free to differ
    name, arg = directive["name"].strip(), directive["arg"].strip()
    options, content = _split_options(body)
    for key in ("label", "name"):
        if key in options:
            page.labels.add(options[key])
    if name == "code-cell":
        tags = options.get("tags", "")
        code = "\n".join(content)
        if SETUP_CALL in code and "remove-cell" in tags:
            page.setup_cells += 1
            return
        page.code_cells.append(strip_comments(code))
    elif name == "math":
        page.math.append(_normalise_math("\n".join(content)))
    elif name in ("glue:figure", "glue:math", "glue:any", "glue"):
        page.glue_keys.add(arg)
        if name == "glue:figure":
            page.figures.add(arg)
        _scan_block_prose(content, page)
    elif name == "figure":
        page.figures.add(arg)
        _scan_block_prose(content, page)
    elif name in ("doctest", "testcode", "testoutput", "code-block", "code", "raw"):
        return
    else:
        # Admonitions, tables and the like hold prose (and maybe math) of their own.
        sub = parse_page("\n".join(content))
        for attr in ("math", "code_cells"):
            getattr(page, attr).extend(getattr(sub, attr))
        for attr in ("glue_keys", "labels", "references", "figures", "citations"):
            getattr(page, attr).update(getattr(sub, attr))


def _scan_block_prose(content: list[str], page: Page) -> None:
    for line in content:
        _scan_prose(line, page)


def _first_difference(a: list[str], b: list[str]) -> str:
    for n, (x, y) in enumerate(zip(a, b), start=1):
        if x != y:
            return f"#{n} differs:\n    en: {x[:300]!r}\n    zh: {y[:300]!r}"
    if len(a) != len(b):
        n = min(len(a), len(b)) + 1
        extra, where = (a, "en") if len(a) > len(b) else (b, "zh")
        return f"#{n} is only in {where}: {extra[n - 1][:300]!r} (en has {len(a)}, zh has {len(b)})"
    return ""


def compare_pages(name: str, en_text: str, zh_text: str) -> list[str]:
    """Differences between the two language versions of one page, each naming the page."""
    en, zh = parse_page(en_text), parse_page(zh_text)
    problems = []
    if en.setup_cells != zh.setup_cells:
        problems.append(
            f"{name}: language setup cells: en has {en.setup_cells}, zh has {zh.setup_cells}"
        )
    for attr, what in (("code_cells", "code cell"), ("math", "display equation")):
        diff = _first_difference(getattr(en, attr), getattr(zh, attr))
        if diff:
            problems.append(f"{name}: {what} {diff}")
    for attr, what in (("glue_keys", "glue keys"), ("labels", "labels"),
                       ("references", "cross-references"), ("figures", "figures"),
                       ("citations", "citations")):
        a, b = getattr(en, attr), getattr(zh, attr)
        if a != b:
            problems.append(
                f"{name}: {what} differ: only in en {sorted(a - b)}, only in zh {sorted(b - a)}"
            )
    return problems


def compare_trees(en_root: Path, zh_root: Path) -> list[str]:
    """Every difference between two page trees: missing pages first, then each pair."""
    en_pages = {p.relative_to(en_root).as_posix() for p in en_root.rglob("*.md")}
    zh_pages = {p.relative_to(zh_root).as_posix() for p in zh_root.rglob("*.md")}
    problems = [f"{p}: page only in en (docs/zh/{p} is missing)" for p in sorted(en_pages - zh_pages)]
    problems += [f"{p}: page only in zh (docs/en/{p} is missing)" for p in sorted(zh_pages - en_pages)]
    for page in sorted(en_pages & zh_pages):
        problems += compare_pages(
            page,
            (en_root / page).read_text(encoding="utf-8"),
            (zh_root / page).read_text(encoding="utf-8"),
        )
    return problems
