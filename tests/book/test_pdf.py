"""The whole-book PDFs (tools/build_pdf.py, run by ``nox -s pdf`` and by CI after the site
build): one per language beside the pages, linked from every page's download menu,
holding every chapter of the table of contents under its own title.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from html import unescape
from pathlib import Path

import pytest

from browser_site import LANGS, ROOT, require_site, skip_or_fail

pytestmark = pytest.mark.build

sys.path.insert(0, str(ROOT / "tools"))
from build_pdf import cover, outline_pages, pdf_name, respace_outline, splice_pages  # noqa: E402


def _words(text: str) -> str:
    """Text with every run of white space removed (PDF text breaks lines anywhere, and
    Chinese has no spaces to keep) and ligatures undone (the PDF's "ﬁ" is "fi")."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def _found(title: str, text: str) -> bool:
    """Whether ``title`` is in the PDF's ``text``.  pypdf reads some CJK glyphs of the
    embedded fonts as their radical code points (见 as U+2EC5, 长 as U+2ED3), which
    Unicode normalisation does not map back, so a CJK character of the title also matches
    a radical."""
    pattern = "".join(f"[{ch}\u2e80-\u2fdf]" if "\u4e00" <= ch <= "\u9fff" else re.escape(ch)
                      for ch in title)
    return re.search(pattern, text) is not None


def _toc_pages(site: Path, lang: str) -> list[str]:
    """The chapters of the sidebar's table of contents, in order, from the index page."""
    html = (site / lang / "index.html").read_text(encoding="utf-8")
    nav = html.split('bd-docs-nav', 1)[1].split("</nav>", 1)[0]
    out = []
    for href in re.findall(r'<a class="reference internal" href="([^"#]+\.html)', nav):
        if href not in out:
            out.append(href)
    return out


def _title(path: Path) -> str:
    h1 = re.search(r"<h1[^>]*>(.*?)</h1>", path.read_text(encoding="utf-8"), re.S).group(1)
    return unescape(re.sub(r"<[^>]+>", "", h1)).replace("#", "").strip()


@pytest.mark.parametrize("lang", LANGS)
def test_whole_book_pdf_holds_every_chapter(lang):
    pypdf = pytest.importorskip("pypdf")
    site = require_site()
    pdf = site / lang / pdf_name(lang)
    if not pdf.is_file():
        skip_or_fail(f"{pdf} is missing: run nox -s pdf after nox -s docs")
    reader = pypdf.PdfReader(str(pdf))
    titles = _words(" ".join(_outline_titles(reader.outline)))
    chapters = _toc_pages(site, lang)
    assert len(chapters) >= 15, chapters
    missing = [c for c in chapters if not _found(_words(_title(site / lang / c)), titles)]
    assert not missing, f"chapters whose title is not in {pdf.name}'s outline: {missing}"
    # every chapter starts a page: at least as many pages as chapters, and the book's
    # length is that of the site (hundreds of pages), not of one screen
    assert len(reader.pages) >= 4 * len(chapters), len(reader.pages)
    # the pages hold the text, not only the outline: the last chapter's title is printed
    # on one of the last pages
    tail = _words("".join(p.extract_text() or "" for p in reader.pages[-40:]))
    assert _found(_words(_title(site / lang / chapters[-1])), tail)
    # a cover with the title in both languages and the commit; then the contents, each
    # chapter with the page it starts on; nothing that only the site shows
    first = _words(reader.pages[0].extract_text() or "")
    for other in LANGS:
        assert _found(_words(_title(site / other / "index.html")), first), (other, first)
    assert re.search(r"[0-9a-f]{12}", first), first
    toc = reader.pages[1].extract_text() or ""
    second = _title(site / lang / chapters[1])
    line = next((ln for ln in toc.splitlines() if _found(_words(second)[-8:], _words(ln))), "")
    assert re.search(r"\d+\s*$", line), toc[:400]
    text = _words(" ".join(p.extract_text() or "" for p in reader.pages[:6]))
    assert "buttonatthetop" not in text and "顶部的按钮" not in text


def _outline_titles(outline) -> list[str]:
    out = []
    for item in outline:
        if isinstance(item, list):
            out += _outline_titles(item)
        else:
            out.append(item.title)
    return out


@pytest.mark.parametrize("lang", LANGS)
def test_every_page_links_the_pdf_only_where_it_is(lang):
    """Every page's download menu links the whole book's PDF once it is printed, and no
    page links it before (``nox -s docs`` alone: a link would be a 404)."""
    site = require_site()
    there = (site / lang / pdf_name(lang)).is_file()
    for page in sorted((site / lang).glob("*.html")):
        html = page.read_text(encoding="utf-8")
        if "download-buttons" not in html:  # special pages (search, 404) have no menu
            continue
        assert (f'href="{pdf_name(lang)}"' in html) == there, (page.name, there)


def test_bookmarks_get_their_headings_spaces(tmp_path):
    """Chromium joins a wrapped heading's lines without a space in the PDF's outline
    ("the outputshuffles"), and may write a heading twice over: the bookmark takes its
    heading's text; one that matches no heading stays as it is."""
    pypdf = pytest.importorskip("pypdf")
    writer = pypdf.PdfWriter()
    writer.add_blank_page(200, 200)
    parent = writer.add_outline_item(title="1. Attention cannot see order", page_number=0)
    writer.add_outline_item(title="1.1. Shuffle the input, and the outputshuffles", page_number=0,
                            parent=parent)
    writer.add_outline_item(title="Cover", page_number=0)
    pdf = tmp_path / "book.pdf"
    writer.write(str(pdf))
    headings = ["1. Attention cannot see order",
                "1.1. Shuffle the input, and the output shuffles"]
    assert respace_outline(pdf, headings) == 1
    titles = _outline_titles(pypdf.PdfReader(str(pdf)).outline)
    assert titles == ["1. Attention cannot see order",
                      "1.1. Shuffle the input, and the output shuffles", "Cover"]
    # one bookmark per heading shown: each takes its heading's text, even one that
    # Chromium wrote twice over
    writer = pypdf.PdfWriter()
    writer.add_blank_page(200, 200)
    writer.add_outline_item(title="1. 1. Attention cannot see orderAttention cannot see order",
                            page_number=0)
    writer.add_outline_item(title="In a PyTorch modelIn a PyTorch model", page_number=0)
    writer.write(str(pdf))
    assert respace_outline(pdf, ["1. Attention cannot see order", "In a PyTorch model"]) == 2
    assert _outline_titles(pypdf.PdfReader(str(pdf)).outline) == [
        "1. Attention cannot see order", "In a PyTorch model"]


def test_cover_names_both_titles_the_version_and_the_commit(tmp_path):
    html = cover(tmp_path, "zh")  # no site there: the titles of build_pdf.TITLES
    assert html.index("可执行的位置编码") < html.index("Positional encoding, executed")
    assert re.search(r"版本 \d+\.\d+\.\d+ · 提交 [0-9a-f]{12} · \d{4}-\d{2}-\d{2}", html), html


def test_contents_pages_are_found_and_spliced_in(tmp_path):
    """The contents' numbers come from the bookmarks (white space ignored); the contents
    printed alone take the place of as many pages; a splice past the end changes nothing."""
    pypdf = pytest.importorskip("pypdf")
    writer = pypdf.PdfWriter()
    for size in (100, 200, 300, 400):
        writer.add_blank_page(size, size)
    writer.add_outline_item(title="1. Attention cannot see order", page_number=2)
    writer.add_outline_item(title="2. Index, normalised and binary", page_number=3)
    book = tmp_path / "book.pdf"
    writer.write(str(book))
    assert outline_pages(book, ["1. Attention  cannot see order",
                                "2. Index, normalised and\nbinary", "3. Missing"]) == ["3", "4", ""]
    insert = pypdf.PdfWriter()
    insert.add_blank_page(555, 555)
    toc = tmp_path / "toc.pdf"
    insert.write(str(toc))
    assert splice_pages(book, toc, at=1)
    reader = pypdf.PdfReader(str(book))
    assert [round(float(p.mediabox.width)) for p in reader.pages] == [100, 555, 300, 400]
    assert [reader.get_destination_page_number(o) for o in reader.outline] == [2, 3]
    assert not splice_pages(book, toc, at=4)
