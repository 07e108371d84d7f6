"""The whole book as one PDF per language, printed by Chromium from the built site.

    python tools/build_pdf.py                 _build/html/<lang>/posenc-<lang>.pdf for en, zh
    python tools/build_pdf.py --lang zh       one language
    nox -s pdf                                the same, after the html build

The chapters are taken in the order of the book's table of contents (the site's
navigation), each page's article as the browser shows it once its scripts have run (the
interactive figures drawn, MathML laid out), joined into one print page beside the
site's own pages (``print-book.html``, so that images and styles resolve as on the site),
and printed with the site's print style sheet: the same fonts, MathML and CJK text as on
screen, each chapter on a new page, page numbers in the footer, and the headings as
the PDF's outline (its bookmarks, with the spaces of the headings: ``respace_outline``).
A cover comes first: the title in both languages, the version, the commit and its date.
What only the site shows (the start button, the language switch's sentence) is left out
by the print style sheet.  Scripts are left out of the joined page (what they drew is
already in the articles).  No network is used.

Then every page's download menu links the PDF ("The whole book (PDF)"): the html build
links it only where the file already is, so that no build links a missing file.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from html import escape as html_escape
from html import unescape as html_unescape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LANGS = ("en", "zh")
#: Debian's Chromium (what the tests use), else a Chromium or Chrome on the PATH (GitHub's
#: runners have Google Chrome).
CHROMIUM = next((p for p in ("/usr/bin/chromium", *map(shutil.which, (
    "chromium", "chromium-browser", "google-chrome"))) if p and Path(p).exists()),
    "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]
#: The book's title (its front page's), where a language's site is not built.
TITLES = {"en": "Positional encoding, executed", "zh": "可执行的位置编码"}
FOOTER = ('<div style="font-size:8px;width:100%;text-align:center;color:#555">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')


def pdf_name(lang: str) -> str:
    """The PDF's file name inside ``_build/html/<lang>/`` (the site links to it)."""
    return f"posenc-{lang}.pdf"


#: The page's download menu, and in it the entry for the page's MyST source, whose markup
#: (the theme's) the entry for the book copies.
_MENU = re.compile(r'<div class="dropdown dropdown-download-buttons">.*?(?=</ul>)', re.S)
_SOURCE_ENTRY = re.compile(r"<li>\s*<a [^>]*btn-download-source-button.*?</li>", re.S)


def link_book_pdf(site: Path, lang: str) -> int:
    """Add "The whole book (PDF)" to the download menu of every page of ``site`` (one
    language's folder) that lacks it, now that the PDF is there (the html build links it
    only where it already is); returns how many pages were changed."""
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    from posenc_site import DOWNLOAD_TEXTS

    texts = DOWNLOAD_TEXTS[lang]
    changed = 0
    for page in sorted(site.rglob("*.html")):
        html = page.read_text(encoding="utf-8")
        menu = _MENU.search(html)
        source = _SOURCE_ENTRY.search(menu.group(0)) if menu else None
        if source is None or "btn-download-book-pdf-button" in menu.group(0):
            continue
        href = Path(os.path.relpath(site / pdf_name(lang), page.parent)).as_posix()
        book = texts["download-book-pdf-button"]
        entry = re.sub(r'href="[^"]*"', f'href="{href}"', source.group(0), count=1)
        entry = re.sub(r'title="[^"]*"', f'title="{book}"', entry, count=1)
        entry = (entry.replace("btn-download-source-button", "btn-download-book-pdf-button")
                 .replace("fas fa-file", "fas fa-book")
                 .replace(texts["download-source-button"], book))
        page.write_text(html[:menu.end()] + entry + html[menu.end():], encoding="utf-8")
        changed += 1
    return changed


#: The cover's line under the titles, in each language.
COVER_LINE = {"en": "Version {version} · commit {commit} · {date}",
              "zh": "版本 {version} · 提交 {commit} · {date}"}


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _book_title(html_root: Path, lang: str) -> str:
    index = html_root / lang / "index.html"
    if not index.is_file():
        return TITLES[lang]
    h1 = re.search(r"<h1[^>]*>(.*?)</h1>", index.read_text(encoding="utf-8"), re.S)
    return html_unescape(re.sub(r"<[^>]+>", "", h1.group(1))).replace("#", "").strip()


def cover(html_root: Path, lang: str) -> str:
    """The cover page: the book's title in this language and the other, the version of
    ``posenc``, the commit the book was built from and that commit's date (so that two
    prints of one commit are the same)."""
    version = re.search(r'^__version__ = "([^"]+)"',
                        (ROOT / "posenc" / "__init__.py").read_text(encoding="utf-8"), re.M)
    commit, date = _git("rev-parse", "--short=12", "HEAD"), _git("log", "-1", "--format=%cs")
    titles = [_book_title(html_root, lang)] + [_book_title(html_root, other)
                                               for other in LANGS if other != lang]
    html_lang = {"en": "en", "zh": "zh-CN"}
    lines = "".join(f'<p class="posenc-cover-title" lang="{html_lang[code]}">'
                    f"{html_escape(title)}</p>"
                    for code, title in zip([lang] + [o for o in LANGS if o != lang], titles))
    line = COVER_LINE[lang].format(version=version.group(1) if version else "?",
                                   commit=commit or "?", date=date or "?")
    return (f'<section class="posenc-print-cover">{lines}'
            f'<p class="posenc-cover-line">{html_escape(line)}</p></section>')


#: The contents' heading, in each language.
CONTENTS = {"en": "Contents", "zh": "目录"}


def contents(lang: str, titles: list[str], numbers: list[str] | None = None) -> str:
    """The contents page: each chapter's title and the page it starts on (``numbers``;
    without them a blank of the same width, for the first print, which finds them)."""
    numbers = numbers or [""] * len(titles)
    rows = "".join(f'<li><span class="posenc-toc-title">{html_escape(t)}</span>'
                   f'<span class="posenc-toc-page">{html_escape(n)}</span></li>'
                   for t, n in zip(titles, numbers))
    return (f'<section class="posenc-print-contents"><p class="posenc-toc-heading">'
            f"{CONTENTS[lang]}</p><ol>{rows}</ol></section>")


def outline_pages(pdf: Path, titles: list[str]) -> list[str]:
    """The page (from 1) each of ``titles`` starts on, from the PDF's bookmarks (white
    space ignored); "" for a title no bookmark has."""
    from pypdf import PdfReader

    reader = PdfReader(str(pdf))
    found: dict[str, int] = {}

    def walk(items) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item)
            else:
                found.setdefault(re.sub(r"\s+", "", str(item.title)),
                                 reader.get_destination_page_number(item) + 1)

    walk(reader.outline)
    return [str(found.get(re.sub(r"\s+", "", t), "")) for t in titles]


def splice_pages(pdf: Path, insert: Path, at: int) -> bool:
    """Put the pages of ``insert`` in place of as many pages of ``pdf`` from page index
    ``at``; False (and nothing changed) where ``pdf`` is too short."""
    from pypdf import PdfReader, PdfWriter

    new = PdfReader(str(insert)).pages
    writer = PdfWriter(clone_from=str(pdf))
    if at + len(new) > len(writer.pages):
        return False
    for k, page in enumerate(new):
        writer.insert_page(page, at + k)
        writer.remove_page(at + k + 1)
    writer.write(str(pdf))
    return True


def respace_outline(pdf: Path, headings: list[str]) -> int:
    """Give the PDF's bookmarks their headings' text.  Chromium builds a bookmark's title
    from the heading's lines and text runs: a wrapped heading loses the space at the
    break ("the outputshuffles"), and a heading of several runs can come out twice over
    ("1. 1. Attention cannot see orderAttention cannot see order").  Chromium makes one
    bookmark per heading shown, in order: where there are as many bookmarks as
    ``headings``, each takes its heading's text; else a bookmark takes the text of the
    next heading equal to it once white space is ignored.  Returns how many changed."""
    from pypdf import PdfWriter
    from pypdf.generic import NameObject, TextStringObject

    squeeze = lambda text: re.sub(r"\s+", "", text)  # noqa: E731
    writer = PdfWriter(clone_from=str(pdf))
    outlines = writer._root_object.get("/Outlines")
    items, stack = [], [outlines.get_object().get("/First")] if outlines else []
    while stack:  # depth first, in the document's order
        node = stack.pop()
        if node is None:
            continue
        node = node.get_object()
        items.append(node)
        stack += [node.get("/Next"), node.get("/First")]
    if len(items) == len(headings):
        pairs = list(zip(items, headings))
    else:
        pairs, at = [], 0
        for node in items:
            title = squeeze(str(node.get("/Title", "")))
            match = next((i for i in range(at, len(headings)) if squeeze(headings[i]) == title),
                         None)
            if match is not None:
                pairs.append((node, headings[match]))
                at = match + 1
    changed = 0
    for node, heading in pairs:
        if str(node.get("/Title", "")) != heading:
            node[NameObject("/Title")] = TextStringObject(heading)
            changed += 1
    if changed:
        writer.write(str(pdf))
    return changed


def chapter_pages(page) -> list[str]:
    """The pages of the table of contents, in order, from the open index page."""
    hrefs = page.evaluate(
        "Array.from(document.querySelectorAll('nav.bd-docs-nav a.reference.internal'))"
        ".map(a => a.getAttribute('href'))")
    out = ["index.html"]
    for h in hrefs:
        h = h.split("#")[0]
        if h and h.endswith(".html") and h not in out:
            out.append(h)
    return out


def _head(index_html: str) -> str:
    head = index_html.split("<head>", 1)[1].split("</head>", 1)[0]
    head = re.sub(r"<script\b.*?</script>", "", head, flags=re.S)
    head = re.sub(r"<link[^>]+rel=\"(?:preload|prefetch|modulepreload)\"[^>]*>", "", head)
    return head


def build(html_root: Path, lang: str) -> Path:
    from playwright.sync_api import sync_playwright

    site = html_root / lang
    index = site / "index.html"
    if not index.is_file():
        raise SystemExit(f"{index} is missing: build the site first (nox -s docs)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1000, "height": 1400})
        page.goto(index.as_uri(), wait_until="load")
        pages = chapter_pages(page)
        parts, titles = [], []
        for name in pages:
            page.goto((site / name).as_uri(), wait_until="load")
            if name != "index.html":
                titles.append(page.evaluate(
                    "document.querySelector('article.bd-article h1').innerText")
                    .replace("#", "").strip())
            article = page.evaluate(
                "(() => { const a = document.querySelector('article.bd-article');"
                " a.querySelectorAll('script').forEach(s => s.remove());"
                " return a.innerHTML; })()")
            slug = name[:-len(".html")]
            parts.append(f'<section class="posenc-print-chapter" id="print-{slug}">'
                         f"{article}</section>")
        head = _head(index.read_text(encoding="utf-8"))

        def html_page(path: Path, sections: list[str]) -> Path:
            path.write_text(f'<!DOCTYPE html><html lang="{"zh-CN" if lang == "zh" else "en"}">'
                            f"<head>{head}</head><body class=\"posenc-print-book\"><main>"
                            + "\n".join(sections) + "</main></body></html>", encoding="utf-8")
            return path

        def print_pdf(path: Path, out: Path, footer: bool) -> None:
            page.goto(path.as_uri(), wait_until="load")
            page.emulate_media(media="print")
            page.pdf(path=str(out), format="A4", print_background=True,
                     margin={"top": "16mm", "bottom": "16mm", "left": "14mm", "right": "14mm"},
                     display_header_footer=footer, header_template="<span></span>",
                     footer_template=FOOTER, outline=True, tagged=True)

        joined_path = html_page(site / "print-book.html",
                                [cover(html_root, lang), contents(lang, titles)] + parts)
        page.goto(joined_path.as_uri(), wait_until="load")
        page.emulate_media(media="print")
        headings = page.evaluate(  # those shown, each a bookmark of the PDF
            "[...document.querySelectorAll('main :is(h1, h2, h3, h4, h5, h6)')]"
            ".filter(h => h.getClientRects().length).map(h => h.innerText.trim())")
        out = site / pdf_name(lang)
        print_pdf(joined_path, out, footer=True)
        respace_outline(out, headings)
        # the contents with their page numbers, printed alone (they take as many pages:
        # the numbers had a blank of their width), in place of the blank ones
        toc_path = html_page(site / "print-contents.html",
                             [contents(lang, titles, outline_pages(out, titles))])
        toc_pdf = site / "print-contents.pdf"
        print_pdf(toc_path, toc_pdf, footer=False)
        browser.close()
    if not splice_pages(out, toc_pdf, at=1):
        print(f"{lang}: the contents' page numbers could not be put in", file=sys.stderr)
    for path in (joined_path, toc_path, toc_pdf):
        path.unlink()
    link_book_pdf(site, lang)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--html", type=Path, default=ROOT / "_build" / "html",
                    help="the built site (default _build/html)")
    ap.add_argument("--lang", choices=LANGS, action="append",
                    help="a language (repeatable; default both)")
    a = ap.parse_args(argv)
    for lang in a.lang or LANGS:
        t0 = time.perf_counter()
        out = build(a.html, lang)
        print(f"{lang}: {out} ({out.stat().st_size / 1e6:.1f} MB, "
              f"{time.perf_counter() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
