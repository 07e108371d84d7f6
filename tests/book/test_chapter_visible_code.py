"""The code a reader sees is code a reader would type (issue 21).

Bookkeeping for the text -- ``glue(...)`` that hands a number or a figure to the prose
-- lives in hidden cells (``:tags: [remove-cell]``) right after the cell that computed
the value, so a visible cell shows the computation and its output, not the plumbing.
And every name a visible cell uses from the page's hidden setup cell is imported in a
visible cell too (``pf``), so a reader who copies the cells in order can run them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
PAGES = sorted(p for lang in ("en", "zh") for p in (DOCS / lang).glob("*.md"))


def visible_cells(path: Path) -> list[str]:
    cells = []
    for m in CELL.finditer(path.read_text(encoding="utf-8")):
        lines = m.group(1).split("\n")
        if lines and lines[0].strip() == "---":  # options as a YAML block
            end = lines.index("---", 1)
            lines = [f":{line}" for line in lines[1:end]] + lines[end + 1:]
        options = [line for line in lines if line.startswith(":")]
        if any("remove-cell" in o or "remove-input" in o for o in options):
            continue
        cells.append("\n".join(line for line in lines if not line.startswith(":")))
    return cells


def _is_glue(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == "glue")


@pytest.mark.parametrize("path", PAGES, ids=[f"{p.parent.name}/{p.name}" for p in PAGES])
def test_no_glue_statement_in_visible_cells(path):
    found = []
    for source in visible_cells(path):
        for stmt in ast.parse(source).body:
            if _is_glue(stmt) or (isinstance(stmt, ast.For) and all(map(_is_glue, stmt.body))):
                found.append(ast.get_source_segment(source, stmt).splitlines()[0])
    assert not found, f"glue bookkeeping shown to the reader (move it to a remove-cell): {found}"


@pytest.mark.parametrize("path", PAGES, ids=[f"{p.parent.name}/{p.name}" for p in PAGES])
def test_visible_cells_import_what_they_use_from_the_setup_cell(path):
    cells = visible_cells(path)
    uses_pf = [c for c in cells if re.search(r"\bpf\.", c)]
    if not uses_pf:
        return
    first_use = cells.index(uses_pf[0])
    imported = any("import posenc.figures as pf" in c for c in cells[: first_use + 1])
    assert imported, "a visible cell uses pf before any visible cell imports it"


def test_the_checks_bite(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```{code-cell} ipython3\n:tags: [remove-cell]\nimport posenc.figures as pf\n```\n\n"
        "```{code-cell} ipython3\nx = 1\nglue(\"x\", x, display=False)\nfig = pf.f()\n```\n",
        encoding="utf-8")
    with pytest.raises(AssertionError, match="glue bookkeeping"):
        test_no_glue_statement_in_visible_cells(page)
    with pytest.raises(AssertionError, match="uses pf before"):
        test_visible_cells_import_what_they_use_from_the_setup_cell(page)
