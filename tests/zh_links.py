"""Spaces around links in rendered Chinese text (issue 34).

MyST renders ``按 {doc}`long-context` 一章`` as 按 <a>长上下文：让 RoPE 越过训练长度</a> 一章:
the spaces of the source survive around the link's text, and a reader sees a title
floating between two gaps.  The prose checks of tests/book/test_rigor.py replace every
role with a placeholder and cannot see this, so the rule reads the *rendered* HTML: no
space between a Chinese character (or full-width punctuation) and the text of an
adjacent link whose text starts (or ends) with one.  A link whose text is Latin next to
Chinese keeps its space (“见 RoPE 一章” style spacing is the book's).
"""

from __future__ import annotations

import re

CJK = "\u4e00-\u9fff，。、；：？！（）“”《》"
OPEN, CLOSE = "\ue001", "\ue002"   # stand for a link's start and end in the page's text
BLOCK = "\ue003"                    # a block's edge: text in two blocks is not adjacent
BLOCKS = ("p", "li", "dd", "dt", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "div",
          "figcaption", "caption", "table", "tr", "ul", "ol", "dl", "section", "blockquote",
          "nav", "aside", "header", "footer")
_BEFORE = re.compile(f"[{CJK}][ \\t\\n\\u3000]+{OPEN}[{CJK}]")
_AFTER = re.compile(f"[{CJK}]{CLOSE}[ \\t\\n\\u3000]+[{CJK}]")


def link_space_hits(html: str) -> list[str]:
    """The places in ``html`` (a page, or a part of one) where a space stands between a
    Chinese character and a link's Chinese text: each as the text around it, the link
    in ‹ ›."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    root = soup.select_one("article") or soup
    for skip in root.select("a.headerlink, pre, code, script, style, math"):
        skip.decompose()
    for block in root.find_all(BLOCKS):
        block.insert(0, BLOCK)
        block.append(BLOCK)
    for a in root.find_all("a"):
        a.insert_before(OPEN)
        a.insert_after(CLOSE)
    text = root.get_text()
    hits = []
    for pattern in (_BEFORE, _AFTER):
        for m in pattern.finditer(text):
            around = text[max(m.start() - 10, 0):m.end() + 10]
            around = around.replace(OPEN, "‹").replace(CLOSE, "›").replace(BLOCK, "")
            hits.append(around.replace("\n", " "))
    return hits
