"""The two table types the book's pages display, shared by the figure modules.

They live here, not in one chapter's module, so that a figure module using them does
not import (and make its pages depend on) another chapter's module.
"""

from __future__ import annotations

from .._validation import check_bool


class MarkdownTable(str):
    """A Markdown table that notebooks (and MyST-NB) display as a table.

    Examples
    --------
    >>> t = MarkdownTable("| a |\\n| --- |\\n| 1 |\\n")
    >>> t._repr_markdown_() == t
    True
    """

    def _repr_markdown_(self):
        return str(self)


class BookTable:
    """A small table that notebooks display as HTML (and ``str`` gives as Markdown).

    Parameters
    ----------
    header : sequence of str
        Column titles.
    rows : sequence of sequence
        Cells; each row as long as ``header``.  Cells are shown with ``str``.
    align : str, optional
        One letter per column, ``"l"`` or ``"r"``; default left for the first column,
        right for the others.
    note : str, optional
        A line shown under the table.
    code_columns : sequence of int, optional
        Columns whose cells are code (``<code>`` in HTML, backticks in Markdown).
    wide : bool, optional
        A table with more columns than a phone's width holds (HTML class
        ``posenc-wide``; ``docs/_static/posenc.css`` draws it): on a narrow screen it
        stays a table to compare across, scrolling sideways under its first column,
        which stays in view; on a wide screen its header stays in view.

    Raises
    ------
    ValueError
        If a row or ``align`` does not match the header.

    Examples
    --------
    >>> t = BookTable(["name", "value"], [["a", 1], ["b", 2]])
    >>> print(t)
    | name | value |
    | :--- | ---: |
    | a | 1 |
    | b | 2 |
    >>> "<table" in t._repr_html_()
    True
    """

    def __init__(self, header, rows, align=None, note=None, code_columns=(), wide=False):
        self.header = [str(h) for h in header]
        self.rows = [[str(c) for c in row] for row in rows]
        n = len(self.header)
        self.align = align or "l" + "r" * (n - 1)
        if len(self.align) != n or set(self.align) - {"l", "r"}:
            raise ValueError(f"align must be {n} letters 'l' or 'r', got {self.align!r}")
        for row in self.rows:
            if len(row) != n:
                raise ValueError(f"every row must have {n} cells, got {len(row)}: {row!r}")
        self.note = note
        self.code_columns = set(code_columns)
        self.wide = check_bool(wide, "wide")

    def __str__(self):
        sep = ["---:" if a == "r" else ":---" for a in self.align]
        cell = lambda j, c: f"`{c}`" if j in self.code_columns else c  # noqa: E731
        lines = ["| " + " | ".join(self.header) + " |", "| " + " | ".join(sep) + " |"]
        lines += ["| " + " | ".join(cell(j, c) for j, c in enumerate(r)) + " |" for r in self.rows]
        if self.note:
            lines += ["", self.note]
        return "\n".join(lines)

    def _repr_markdown_(self):
        return str(self)

    def _repr_html_(self):
        from html import escape

        style = {"l": "text-align: left", "r": "text-align: right"}

        def td(tag, j, c):
            c = escape(c)
            if tag == "td" and j in self.code_columns:
                c = f"<code>{c}</code>"
            return f'<{tag} style="{style[self.align[j]]}">{c}</{tag}>'

        head = "".join(td("th", j, h) for j, h in enumerate(self.header))
        body = "".join("<tr>" + "".join(td("td", j, c) for j, c in enumerate(r)) + "</tr>"
                       for r in self.rows)
        note = f"<p>{escape(self.note)}</p>" if self.note else ""
        cls = "table posenc-table posenc-wide" if self.wide else "table posenc-table"
        return (f'<table class="{cls}"><thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table>{note}")
