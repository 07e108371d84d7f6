"""The English and Chinese trees hold the same book: same pages, code, math and labels."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from book_parity import (
    DIRECTIVE,
    FENCE,
    _split_options,
    compare_pages,
    compare_trees,
    parse_page,
    strip_comments,
)

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(p.relative_to(DOCS / "en").as_posix() for p in (DOCS / "en").rglob("*.md"))


def test_the_two_trees_have_the_same_pages():
    en = set(PAGES)
    zh = {p.relative_to(DOCS / "zh").as_posix() for p in (DOCS / "zh").rglob("*.md")}
    assert en == zh, f"only in en: {sorted(en - zh)}; only in zh: {sorted(zh - en)}"
    assert "index.md" in en


@pytest.mark.parametrize("page", PAGES)
def test_page_pair_is_identical_where_it_must_be(page):
    problems = compare_pages(
        page,
        (DOCS / "en" / page).read_text(encoding="utf-8"),
        (DOCS / "zh" / page).read_text(encoding="utf-8"),
    )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", [p for p in PAGES if p not in {"references.md"}])
def test_every_executable_page_sets_its_language(page):
    """Figures get their labels from the page's language, so each notebook page sets it."""
    for lang in ("en", "zh"):
        text = (DOCS / lang / page).read_text(encoding="utf-8")
        parsed = parse_page(text)
        if parsed.code_cells:
            assert parsed.setup_cells == 1, f"docs/{lang}/{page}: needs one language setup cell"
            assert f'set_language("{lang}")' in text, f"docs/{lang}/{page}: wrong language"



# -- Code cells fit the page's code column without horizontal scrolling. --------------

CODE_COLUMNS = 79
NOT_PROSE = {"code-cell", "math", "doctest", "testcode", "testoutput", "code-block",
             "code", "raw"}


def display_width(line: str) -> int:
    """Columns a line takes in a monospace font: wide and full-width characters take 2."""
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in line)


def code_cell_lines(text: str, first_line: int = 1) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for every line of every code cell, options left out.

    Fences are read as :func:`book_parity.parse_page` reads them, and code cells nested
    in an admonition or another directive are found too.
    """
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i].strip())
        if not fence:
            i += 1
            continue
        marker = fence["fence"]
        start = i + 1
        i = start
        while i < len(lines) and not (
            lines[i].strip().startswith(marker[0] * len(marker))
            and set(lines[i].strip()) == {marker[0]}
        ):
            i += 1
        body = lines[start:i]
        i += 1
        directive = DIRECTIVE.match(fence["info"].strip())
        if not directive:
            continue
        name = directive["name"].strip()
        if name == "code-cell":
            content = _split_options(body)[1]
            skipped = len(body) - len(content)
            for n, line in enumerate(content, start=first_line + start + skipped):
                yield n, line
        elif name not in NOT_PROSE:
            yield from code_cell_lines("\n".join(body), first_line + start)


def too_wide_code_lines(path: str, text: str) -> list[str]:
    """One message per code-cell line wider than :data:`CODE_COLUMNS`."""
    return [
        f"{path}:{n}: {display_width(line)} columns > {CODE_COLUMNS}: {line}"
        for n, line in code_cell_lines(text)
        if display_width(line) > CODE_COLUMNS
    ]


@pytest.mark.parametrize("page", PAGES)
def test_code_cell_lines_fit_in_79_columns(page):
    """The book shows code in a column about 80 characters wide; longer lines scroll."""
    problems = []
    for lang in ("en", "zh"):
        text = (DOCS / lang / page).read_text(encoding="utf-8")
        problems += too_wide_code_lines(f"docs/{lang}/{page}", text)
    assert not problems, "\n".join(problems)


def test_width_check_counts_wide_characters_twice_and_names_the_line():
    ok_ascii = "x = 1  # " + "a" * (CODE_COLUMNS - 9)
    ok_cjk = "x = 1  # " + "中" * 35  # 9 + 70 = 79 columns
    wide_cjk = "x = 1  # " + "中" * 35 + "。"  # full-width full stop: 81 columns
    assert display_width(ok_ascii) == display_width(ok_cjk) == CODE_COLUMNS
    page = (
        "---\nfile_format: mystnb\n---\n\n"
        "```{code-cell} ipython3\n:tags: [remove-cell]\n" + ok_ascii + "\n```\n\n"
        "Prose may be as long as it likes: " + "word " * 30 + "\n\n"
        "```python\n" + "not_a_cell = 1" + " " * 80 + "\n```\n\n"
        "```{code-cell} ipython3\n" + ok_cjk + "\n" + ok_ascii + "a\n```\n\n"
        "````{note}\n```{code-cell} ipython3\n" + wide_cjk + "\n```\n````\n"
    )
    assert too_wide_code_lines("docs/zh/demo.md", page) == [
        f"docs/zh/demo.md:18: 80 columns > 79: {ok_ascii}a",
        f"docs/zh/demo.md:23: 81 columns > 79: {wide_cjk}",
    ]


# -- The checker itself, shown failing on deliberately broken pairs. -------------------

HEADER = "---\nfile_format: mystnb\nkernelspec:\n  name: python3\n---\n\n"
SETUP = '```{{code-cell}} ipython3\n:tags: [remove-cell]\nimport posenc.figures as pf\npf.set_language("{lang}")\n```\n\n'
EN = HEADER + SETUP.format(lang="en") + """# Title

(sec-intro)=
Some prose with {glue:text}`max_err:.2e` and a citation {cite}`vaswani2017attention`,
see {ref}`the intro <sec-intro>`.

```{code-cell} ipython3
# a comment in English
x = 1 + 1  # trailing comment
glue("max_err", x)
```

$$
PE(p, 2i) = \\sin(p\\,\\omega_i)
$$ (eq-pe)

```{glue:figure} fig_heatmap
:name: fig-heatmap

The heatmap.
```
"""
ZH = HEADER + SETUP.format(lang="zh") + """# 标题

(sec-intro)=
一段文字，包含 {glue:text}`max_err:.2e`，引用 {cite}`vaswani2017attention`，
见{ref}`引言 <sec-intro>`。

```{code-cell} ipython3
# 中文注释

x = 1 + 1
glue("max_err", x)
```

$$
PE(p, 2i) = \\sin(p\\,\\omega_i)
$$ (eq-pe)

```{glue:figure} fig_heatmap
:name: fig-heatmap

热力图。
```
"""


def test_checker_accepts_a_faithful_pair():
    assert compare_pages("demo.md", EN, ZH) == []


def test_checker_parses_what_it_compares():
    page = parse_page(EN)
    assert page.setup_cells == 1
    assert page.code_cells == ['x = 1 + 1\nglue("max_err", x)']
    assert page.math == [r"PE(p, 2i) = \sin(p\,\omega_i)"]
    assert page.glue_keys == {"max_err", "fig_heatmap"}
    assert page.labels == {"sec-intro", "eq-pe", "fig-heatmap"}
    assert page.references == {"sec-intro"}
    assert page.figures == {"fig_heatmap"}
    assert page.citations == {"vaswani2017attention"}


def test_comments_do_not_count_but_strings_do():
    assert strip_comments("a = '# not a comment'  # a comment") == "a = '# not a comment'"


BROKEN = {
    "a changed code cell": (ZH.replace("x = 1 + 1", "x = 1 + 2"), "code cell #1 differs"),
    "a missing code cell": (ZH.replace('glue("max_err", x)\n```', 'glue("max_err", x)\n```\n\n```{code-cell} ipython3\ny = 2\n```'), "code cell #2 is only in zh"),
    "a missing equation": (ZH.replace("$$\nPE(p, 2i) = \\sin(p\\,\\omega_i)\n$$ (eq-pe)", ""), "display equation #1 is only in en"),
    "an edited equation": (ZH.replace("\\sin(p", "\\cos(p"), "display equation #1 differs"),
    "a different glue key": (ZH.replace("{glue:text}`max_err:.2e`", "{glue:text}`max_error:.2e`"), "glue keys differ"),
    "a missing label": (ZH.replace("(sec-intro)=\n", ""), "labels differ"),
    "a different citation": (ZH.replace("vaswani2017attention", "su2021roformer"), "citations differ"),
    "a different figure": (ZH.replace("fig_heatmap", "fig_other"), "figures differ"),
    "a missing setup cell": (ZH.replace(SETUP.format(lang="zh"), ""), "language setup cells"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_checker_names_the_page_and_the_first_difference(case):
    zh, expected = BROKEN[case]
    problems = compare_pages("broken.md", EN, zh)
    assert problems, f"{case} was not detected"
    assert problems[0].startswith("broken.md: "), problems[0]
    assert any(expected in p for p in problems), problems


def test_checker_reports_a_page_missing_from_one_tree(tmp_path):
    for lang, text in (("en", EN), ("zh", ZH)):
        (tmp_path / lang).mkdir()
        (tmp_path / lang / "demo.md").write_text(text, encoding="utf-8")
    (tmp_path / "en" / "extra.md").write_text(EN, encoding="utf-8")
    assert compare_trees(tmp_path / "en", tmp_path / "zh") == [
        "extra.md: page only in en (docs/zh/extra.md is missing)"
    ]
