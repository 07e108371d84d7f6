"""Static checks of the built site (``_build/html``, or ``POSENC_SITE_DIR``).

Offline reading (no resource from another host), hreflang and the language switch on
every page, the jieba-segmented Chinese search index, the chooser, the 404 pages, the
sitemaps, Open Graph tags, copy buttons, notebook downloads and launch links, the
glossary.  ``test_reader_features_on_a_tiny_book`` builds a one-chapter book with the
real conf.py to check the mechanisms themselves (alt text from captions, the warning for
an image without one, the converted notebook) whatever the chapters hold today.

A literal URL inside a JavaScript file is not a request: MathJax's bundle, for example,
names a CDN for its speech-rule data, used only if a reader turns the speech explorer
on.  What a page really loads is checked in the browser (tests/book/test_browser.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from browser_site import LANGS, ROOT, discover_pages, require_site, skip_or_fail

pytestmark = pytest.mark.build


sys.path.insert(0, str(ROOT / "docs" / "_ext"))
from posenc_urls import site_urls  # noqa: E402  (what conf.py uses)

# The URLs the build used: the same environment variables, the same function.
REPO_URL, SITE_URL = site_urls(os.environ)
SITE_PATH = urlparse(SITE_URL).path  # /posenc/


@pytest.fixture(scope="module")
def site() -> Path:
    return require_site()


_SOUPS: dict[tuple[str, int, int], object] = {}


def _soup(path: Path):
    """The parsed page, parsed once per test process (the checks only read it; the 52
    pages of the site take about 250 MB parsed and six seconds to parse)."""
    from bs4 import BeautifulSoup

    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _SOUPS:
        _SOUPS[key] = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    return _SOUPS[key]


def _all_html(site: Path) -> list[tuple[str, Path]]:
    """(lang, file) for every top-level page of each language, special pages included."""
    out = []
    for lang in LANGS:
        out += [(lang, p) for p in sorted((site / lang).glob("*.html"))]
    return out


def _local_target(site: Path, page: Path, href: str) -> Path:
    """The file a relative (or site-absolute, /posenc/...) href points at."""
    path = unquote(urlparse(href).path)
    if path.startswith(SITE_PATH):
        return site / path[len(SITE_PATH):]
    return Path(os.path.normpath(page.parent / path))


# -- Offline -------------------------------------------------------------------------

ABSOLUTE = r"(?:https?:)?//"
RESOURCE_LINK_RELS = {"stylesheet", "icon", "shortcut", "apple-touch-icon", "preload",
                      "modulepreload", "prefetch", "prerender", "preconnect", "dns-prefetch",
                      "manifest", "mask-icon"}
CSS_URL = re.compile(rf"""url\(\s*['"]?({ABSOLUTE}[^'")\s]+)|@import\s+(?:url\()?\s*['"]?({ABSOLUTE}[^'")\s;]+)""")
QUOTED_URL = re.compile(rf"""(['"`])({ABSOLUTE}[^'"`\s]+)\1""")
LOADS_WHAT_FOLLOWS = re.compile(
    r"""(?:(?:\bfetch|\bimport|\bimportScripts|new\s+(?:Shared)?Worker|\.open)\s*\(\s*"""
    r"""(?:["'][A-Z]+["']\s*,\s*)?|\bfrom\s*|\.(?:src|href)\s*=\s*)$"""
)


def js_loads(text: str) -> list[str]:
    """Absolute URLs that JavaScript fetches, imports or assigns to a src/href."""
    return [m[2] for m in QUOTED_URL.finditer(text)
            if LOADS_WHAT_FOLLOWS.search(text[max(0, m.start() - 60):m.start()])]


def _is_external(url: str | None) -> bool:
    return bool(url) and re.match(ABSOLUTE, url.strip(), re.I) is not None


def external_resources_in_html(text: str) -> list[str]:
    """Absolute URLs an HTML page would *load* (links to click are fine)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(text, "html.parser")
    found = []
    for tag in soup.find_all(["script", "img", "iframe", "embed", "source", "video", "audio",
                              "track", "input", "image", "use"]):
        for attr in ("src", "data-src", "poster", "href", "xlink:href"):
            if tag.name in {"image", "use"} or attr != "href":
                if _is_external(tag.get(attr)):
                    found.append(f"<{tag.name} {attr}={tag.get(attr)}>")
        for candidate in (tag.get("srcset") or "").split(","):
            url = candidate.strip().split(" ")[0]
            if _is_external(url):
                found.append(f"<{tag.name} srcset={url}>")
    for tag in soup.find_all("object"):
        if _is_external(tag.get("data")):
            found.append(f"<object data={tag['data']}>")
    for tag in soup.find_all("link"):
        rels = {r.lower() for r in (tag.get("rel") or [])}
        if rels & RESOURCE_LINK_RELS and _is_external(tag.get("href")):
            found.append(f"<link rel={' '.join(sorted(rels))} href={tag['href']}>")
    for tag in soup.find_all(style=True):
        found += [f"style url({a or b})" for a, b in CSS_URL.findall(tag["style"])]
    for tag in soup.find_all("style"):
        found += [f"<style> {a or b}" for a, b in CSS_URL.findall(tag.get_text())]
    for tag in soup.find_all("script", src=False):
        found += [f"<script> {u}" for u in js_loads(tag.get_text())]
    for tag in soup.find_all("meta", attrs={"http-equiv": re.compile("refresh", re.I)}):
        if re.search(ABSOLUTE, tag.get("content", "")):
            found.append(f"<meta refresh {tag['content']}>")
    return found


def external_resources_in_file(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    suffix = path.suffix.lower()
    if suffix == ".html":
        return external_resources_in_html(text)
    if suffix == ".css":
        return [a or b for a, b in CSS_URL.findall(text)]
    if suffix in {".js", ".mjs"}:
        return js_loads(text)
    if suffix == ".svg":
        return re.findall(rf"""(?:href|src)\s*=\s*['"]({ABSOLUTE}[^'"]+)""", text) + [
            a or b for a, b in CSS_URL.findall(text)]
    return []


def _site_files(site: Path):
    for path in sorted(site.rglob("*")):
        rel = path.relative_to(site)
        # jupyter_execute holds MyST-NB's working copies; it is not part of the published site.
        if path.is_file() and rel.parts[0] != "jupyter_execute" and "_sources" not in rel.parts:
            yield path


def test_no_resource_from_another_host(site):
    problems = []
    checked = 0
    for path in _site_files(site):
        if path.suffix.lower() in {".html", ".css", ".js", ".mjs", ".svg"}:
            checked += 1
            problems += [f"{path.relative_to(site)}: {u}" for u in external_resources_in_file(path)]
    assert checked > 50
    assert not problems, "resources loaded from other hosts:\n" + "\n".join(problems[:20])


def test_bib_year_suffixes_go_past_z():
    """More than 26 works of one author and year ("Hugging Face, 2025") get aa, ab, ...
    after z, instead of stopping the build."""
    from posenc_bib import year_suffix

    assert [year_suffix(k) for k in (0, 1, 25, 26, 27, 51, 52, 701, 702)] == [
        "a", "b", "z", "aa", "ab", "az", "ba", "zz", "aaa"]


def test_the_offline_scan_catches_external_resources():
    bad = """<html><head>
      <script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"></script>
      <link rel="stylesheet" href="//fonts.googleapis.com/css?family=Roboto">
      <link rel="preconnect" href="https://fonts.gstatic.com">
      <style>@import url("https://example.com/x.css"); body { background: url(https://e.com/b.png) }</style>
      <script>fetch("https://api.example.com/data.json"); import("https://esm.sh/x")</script>
      </head><body><img src="https://example.com/fig.png" alt="x">
      <img srcset="a.png 1x, https://example.com/b.png 2x" src="a.png" alt="y">
      <div style="background-image: url('https://example.com/bg.png')"></div>
      <a href="https://github.com/posenc/posenc">a link is fine</a>
      <link rel="canonical" href="https://posenc.github.io/posenc/en/index.html">
      </body></html>"""
    found = external_resources_in_html(bad)
    assert len(found) == 10, found
    assert not any("github.com/posenc" in f or "canonical" in f for f in found)


def test_site_serves_its_trimmed_assets(site):
    """Every page's math is in the site's math font (subset to the characters drawn, its
    MATH table kept, the license beside it); the icon fonts are subsets; no page loads
    Bootstrap's bundle, each loads posenc-bootstrap.js in its place."""
    import posenc_assets
    from fontTools.ttLib import TTFont

    source = TTFont(posenc_assets.MATH_FONT).getBestCmap()
    for lang in LANGS:
        static = site / lang / "_static"
        font = TTFont(static / posenc_assets.MATH_FONT_OUT)
        assert "MATH" in font and (static / "fonts" / "OFL.txt").exists()
        cmap = font.getBestCmap()
        drawn: set[str] = set()
        for page in sorted((site / lang).glob("*.html")):
            text = page.read_text(encoding="utf-8")
            drawn |= posenc_assets.math_characters(text)
            assert "scripts/bootstrap.js" not in text, page
            assert "_static/posenc-bootstrap.js" in text, page
        # a character STIX Two Math has is in the subset (one it lacks, a Chinese word
        # in \text, comes from the page's font)
        missing = sorted(c for c in drawn if ord(c) in source and ord(c) not in cmap)
        assert len(drawn) > 100 and not missing, missing
        assert "\u221a" in drawn  # square roots are on the pages, so their sign is kept
        for name in ("fa-solid-900", "fa-brands-400"):
            size = (static / "vendor" / "fontawesome" / "webfonts" / f"{name}.woff2").stat()
            assert size.st_size < 20_000, (name, size.st_size)


def test_print_style_sheet_keeps_the_whole_book_rules(site):
    """The style sheets are trimmed to the classes the pages use; the print page that
    tools/build_pdf.py writes after the build uses its own (chapters, cover, contents),
    and their rules stay: each chapter on a new page, the cover and the contents."""
    for lang in LANGS:
        css = (site / lang / "_static" / "posenc-print.css").read_text(encoding="utf-8")
        for rule in (".posenc-print-chapter", ".posenc-print-cover", ".posenc-print-contents",
                     ".posenc-toc-page"):
            assert rule in css, (lang, rule)


def test_math_is_mathml_written_at_build_time(site):
    """Every formula of both languages is MathML in the page (posenc_math), and no page
    loads MathJax: the browser draws the math itself, offline too."""
    pages_with_math, problems = 0, []
    for lang, page in _all_html(site):
        soup = _soup(page)
        scripts = [s["src"] for s in soup.find_all("script", src=True)
                   if "mathjax" in s["src"].lower()]
        if scripts:
            problems.append(f"{lang}/{page.name} loads {scripts}")
        math = soup.select(".math")
        if not math:
            continue
        pages_with_math += 1
        for el in math:
            if not el.find("math") or el.select(".posenc-math-error"):
                problems.append(f"{lang}/{page.name}: not MathML: {el.get_text()[:60]!r}")
        # as the page holds it (html.parser would drop MathML's own spelling)
        for mathml in re.findall(r"<math\b.*?</math>", page.read_text(encoding="utf-8"),
                                 re.S):
            problems += [f"{lang}/{page.name}: {g}" for g in glued_functions(mathml)]
    assert pages_with_math >= 10, f"only {pages_with_math} pages with math"
    assert not problems, problems[:10]


def _table_captions(soup) -> tuple[list[str], list[str]]:
    """The numbers of the page's tables (Table 3.1 ...), and what each table without one
    begins with.  A table is a Markdown table (``{table}``: its <caption>) or one a cell
    computed (posenc_site.computed_table: the paragraph over it); the API reference's
    summaries of a module's members and the general index are lists, not tables."""
    numbers, bare = [], []
    for table in soup.select("article.bd-article table"):
        if {"autosummary", "genindextable", "indextable"} & set(table.get("class", [])):
            continue
        holder = table.find_parent("div", class_="posenc-computed-table")
        number = (holder.select_one(":scope > p .caption-number") if holder
                  else table.select_one(":scope > caption .caption-number"))
        text = (holder or table).select_one(".caption-text") if number else None
        if number is None or not text.get_text(strip=True):
            bare.append(table.get_text(" ", strip=True)[:60])
        else:
            numbers.append(number.get_text(strip=True))
    return numbers, bare


def test_every_table_is_numbered_and_captioned(site):
    """Every table of the book (written in the page or computed by a cell) has a number
    and a caption, and each page numbers the same tables in both languages."""
    problems, counted = [], {}
    for lang, page in _all_html(site):
        numbers, bare = _table_captions(_soup(page))
        problems += [f"{lang}/{page.name}: a table without a caption: {b!r}" for b in bare]
        counted[lang, page.name] = [re.sub(r"^\D+", "", n) for n in numbers]
    for (lang, name), numbers in counted.items():
        if lang == "en" and counted.get(("zh", name)) != numbers:
            problems.append(f"{name}: tables {numbers} in en, {counted.get(('zh', name))} in zh")
    assert sum(len(n) for n in counted.values()) >= 80, counted
    assert not problems, problems[:10]


#: TeX's named functions; the converter writes them as one multi-letter <mi>, and \max,
#: \operatorname{...} and the like as a multi-letter <mo>.
TEX_FUNCTIONS = set("arccos arcsin arctan arg cos cosh cot coth csc deg det dim exp gcd hom "
                    "inf ker lg lim liminf limsup ln log max min Pr sec sin sinh sup tan "
                    "tanh".split())


def glued_functions(mathml: str) -> list[str]:
    """Each named function in ``mathml`` that is glued to what follows it: not applied
    with ApplyFunction (U+2061), or applied without space before an argument that is not
    in brackets (TeX's thin space: "cos mθ", never "cosmθ")."""
    root = ET.fromstring(re.sub(r' xmlns="[^"]*"', "", mathml, count=1))
    glued = []
    for row in root.iter():
        if row.tag not in ("math", "mrow", "msqrt", "mstyle", "mtd", "mpadded", "menclose"):
            continue
        kids = list(row)
        for i, kid in enumerate(kids[:-1]):
            core = kid
            while core.tag in ("msub", "msup", "msubsup", "munder", "mover", "munderover"):
                core = core[0]
            text = (core.text or "").strip()
            if len(core) or not (core.tag == "mi" and text in TEX_FUNCTIONS or core.tag == "mo"
                                 and len(text) > 1 and text.isalpha() and text != "mod"):
                continue
            after = kids[i + 1]
            if after.tag != "mo" or after.text != "\u2061":
                glued.append(f"{text} without ApplyFunction")
                continue
            first = kids[i + 2] if i + 2 < len(kids) else None
            while first is not None and len(first) and first.tag != "mo":
                first = first[0]
            bracket = first is not None and (first.text or "").strip() in ("(", "[", "{")
            if not bracket and after.get("rspace", "0").strip("em0.") == "":
                glued.append(f"{text} applied without space")
    return glued


def test_function_names_are_applied_and_spaced():
    """cos mθ, ln s, max_i, softmax(x): each name applied to its argument (ApplyFunction)
    with TeX's thin space after it, none before a bracket, a thin space between an
    ordinary symbol and a name; "mod" stays the binary operator it is."""
    import posenc_math

    apply = '<mo lspace="0" rspace="{}">&#x2061;</mo>'
    out = posenc_math.tex_to_mathml(r"x_{2j}\cos m\theta_j", False)
    assert '<mspace width="0.1667em" /><mi>cos</mi>' + apply.format("0.1667em") + "<mi>m</mi>" in out
    out = posenc_math.tex_to_mathml(r"\sin(m\theta) + \operatorname{softmax}\left(x\right)", True)
    assert "<mi>sin</mi>" + apply.format("0") + '<mo stretchy="false">(</mo>' in out
    assert '<mo lspace="0" rspace="0">softmax</mo>' + apply.format("0") in out
    out = posenc_math.tex_to_mathml(r"\max_i \log^2 n + a \bmod b", False)
    assert "</msub>" + apply.format("0.1667em") + "<msup>" in out
    assert "</msup>" + apply.format("0.1667em") + "<mi>n</mi>" in out
    assert "<mi>a</mi><mo>mod</mo><mi>b</mi>" in out
    # the check of the built pages finds what the converter wrote before (cos glued to m)
    assert glued_functions('<math><mrow><mi>cos</mi><mi>m</mi><mi>θ</mi></mrow></math>') \
        == ["cos without ApplyFunction"]
    assert glued_functions('<math><mrow><msub><mo>max</mo><mi>i</mi></msub><mi>x</mi>'
                           '</mrow></math>') == ["max without ApplyFunction"]
    assert glued_functions('<math><mi>ln</mi><mo rspace="0">\u2061</mo><mi>s</mi></math>') \
        == ["ln applied without space"]


def test_every_formula_of_the_book_converts(tmp_path):
    """The converter reads every formula the pages have, both languages (the build would
    warn otherwise; this names them all at once, without a build), and writes no named
    function glued to its argument."""
    from docutils import nodes

    import posenc_math  # docs/_ext is on the path (above)

    failures, count = [], 0
    for page in sorted((ROOT / "docs").glob("*/*.md")):
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        displays = re.findall(r"\$\$(.+?)\$\$", text, flags=re.S)
        inline = re.findall(r"(?<![\\$])\$([^$\n]+?)\$", re.sub(r"\$\$.+?\$\$", "", text, flags=re.S))
        cases = ([(posenc_math.display_tex(nodes.math_block(d, d.strip())), True)
                  for d in displays] + [(i, False) for i in inline])
        narrow = [(posenc_math.narrow_tex(d.strip()), True) for d in displays]
        cases = [(posenc_math.strip_comments(tex), display) for tex, display in cases]
        for tex, display in cases + [(tex, d) for tex, d in narrow if tex is not None]:
            count += 1
            try:
                mathml = posenc_math.tex_to_mathml(tex, display)
            except Exception as exc:  # noqa: BLE001
                failures.append(f"{page.parent.name}/{page.name}: {tex[:60]!r}: {exc}")
                continue
            failures += [f"{page.parent.name}/{page.name}: {tex[:60]!r}: {g}"
                         for g in glued_functions(mathml)]
    assert count > 500, count
    assert not failures, failures
    # and the check bites: TeX the converter does not know is reported, not passed on
    with pytest.raises(ValueError, match="left unconverted"):
        posenc_math.tex_to_mathml(r"a = \unknowncommand x", True)


def test_narrow_math_forms():
    """``%|`` breaks a display's narrow form (a chain one step per line; a new row in an
    aligned display); ``%narrow:`` gives it outright; comments never reach the MathML."""
    import posenc_math

    assert posenc_math.narrow_tex("a = b") is None
    assert posenc_math.narrow_tex(r"a = b \% c") is None  # an escaped percent
    chain = posenc_math.narrow_tex("a = b %|\n= c %| here\n= d")
    assert chain == r"\begin{split}&a = b\\&\quad = c\\&\quad = d\end{split}"
    rows = posenc_math.narrow_tex("\\begin{aligned}\nx &= a + b %|\n+ c\n\\end{aligned}")
    assert r"a + b \\ &\qquad" in rows and "%" not in rows
    gathered = posenc_math.narrow_tex("\\begin{gathered}\nx = 1, \\qquad %|\ny = 2\n"
                                      "\\end{gathered}")
    assert gathered == r"\begin{split}&x = 1, \qquad\\&y = 2\end{split}"
    assert posenc_math.narrow_tex("R = M\n%narrow: R = \\operatorname{diag}(A, B)") == \
        r"R = \operatorname{diag}(A, B)"
    assert posenc_math.strip_comments("a = b %|\n%narrow: x\n= c\n\nd") == "a = b \n= c\n\nd"
    for tex in (chain, rows, gathered):
        assert "<mtable" in posenc_math.tex_to_mathml(tex, True)


def test_styled_letters_are_unicode_math_letters():
    """MathML Core draws no ``mathvariant`` but ``normal``: bold, double-struck and
    monospace letters are written as Unicode's mathematical letters, and a bold <mi>
    says ``normal`` so the browser does not slant it again."""
    import posenc_math

    cases = {("q", "bold"): "\U0001d42a", ("\u03b8", "bold-italic"): "\U0001d73d",
             ("\u03f5", "bold-italic"): "\U0001d750", ("E", "double-struck"): "\U0001d53c",
             ("R", "double-struck"): "\u211d", ("h", "italic"): "\u210e",
             ("0", "bold"): "\U0001d7ce", ("n", "monospace"): "\U0001d697",
             ("_", "monospace"): "_", ("\u00e9", "bold"): "\u00e9"}
    for (char, variant), want in cases.items():
        assert posenc_math.styled_char(char, variant) == want, (char, variant)
    mathml = posenc_math.unicode_styles('<mi mathvariant="bold-italic">&#x003B8;</mi>'
                                        '<mtext mathvariant="monospace">n_a</mtext>'
                                        '<mi mathvariant="bold">\u00e9</mi>')
    assert mathml == ('<mi mathvariant="normal">\U0001d73d</mi>'
                      '<mtext>\U0001d697_\U0001d68a</mtext><mi mathvariant="bold">\u00e9</mi>')
    # what the converter writes for the book's bold vectors reaches the page as Unicode
    out = posenc_math.tex_to_mathml(r"\mathbf{q}^\top \boldsymbol{\theta}", False)
    assert 'mathvariant="bold' not in out and "\U0001d73d" in out


def test_primes_follow_their_letter():
    """A prime is written after its letter, not raised as a superscript (the math font's
    prime is already high: raised again it floats), a subscript after both."""
    import posenc_math

    out = posenc_math.tex_to_mathml(r"\theta_i' = f'(x)", False)
    prime = '<mo lspace="0" rspace="0">\u2032</mo>'
    assert f"<msub><mrow><mi>\u03b8</mi>{prime}</mrow><mi>i</mi></msub>" in out
    assert f"<mrow><mi>f</mi>{prime}</mrow>" in out
    assert "<msup>" not in out and "<msubsup>" not in out
    # a superscript that is not a bare prime stays one
    assert "<msup>" in posenc_math.tex_to_mathml(r"r^2", False)


def test_purge_css_keeps_what_a_page_can_match():
    """A rule stays when one of its selectors needs only classes the site's words have;
    ``:not()``, ``:is()`` and attribute selectors need nothing; license comments,
    ``@font-face`` and ``@keyframes`` stay; emptied ``@media`` blocks go."""
    import posenc_assets

    css = ('@charset "UTF-8";/*! MIT */ /* plain */:root{--x:1}.used{a:1}.unused{b:2}'
           '.used,.gone .used{c:3}.used:not(.absent){d:4}.x:is(.absent,.also){e:5}'
           'a[href$=".pdf"]{f:6}@media (min-width:1px){.gone{g:7}}'
           '@media print{.used{h:8}}@font-face{font-family:x}@keyframes k{0%{i:9}}'
           '.gone::after{content:"}"}.esc\\:x{j:10}')
    out = posenc_assets.purge_css(css, {"used", "x"})
    for kept in ('@charset "UTF-8";', "/*! MIT */", ":root{--x:1}", ".used{a:1}",
                 ".used{c:3}", ".used:not(.absent){d:4}", ".x:is(.absent,.also){e:5}",
                 'a[href$=".pdf"]{f:6}', "@media print{.used{h:8}", "@font-face{",
                 "@keyframes k{0%{i:9}}", ".esc\\:x{j:10}"):
        assert kept in out, kept
    for gone in ("plain", ".unused", ".gone", "g:7", 'content:"}"'):
        assert gone not in out, gone
    for up in ("", "../", "/posenc/en/"):  # a page, a page one folder down, the 404 page
        tag = f'<script defer src="{up}_static/scripts/bootstrap.js?digest=9a0f"></script>'
        assert posenc_assets.swap_bootstrap(tag) == (
            f'<script defer src="{up}_static/posenc-bootstrap.js"></script>')
    assert posenc_assets.icon_codepoints('.a{--fa:"\\f002"}.b{content:"\uf00d"}'
                                         '.c{content:"\\2014"}') == {0xF002, 0xF00D}


def test_figures_are_served_as_webp_with_their_font_sizes(tmp_path):
    """A page's figures (src and srcset under _images/) become lossless WebP with the
    PNG's text chunks and dpi in their XMP; links to the PNG and other images stay."""
    import posenc_assets
    from PIL import Image, PngImagePlugin

    (tmp_path / "_images").mkdir()
    meta = PngImagePlugin.PngInfo()
    meta.add_text("posenc-min-font-pt", "7.5")
    Image.new("RGB", (40, 20), (10, 200, 30)).save(tmp_path / "_images" / "a.png",
                                                   pnginfo=meta, dpi=(220, 220))
    Image.new("RGB", (20, 20)).save(tmp_path / "_images" / "b.png")
    page = ('<picture><source media="(max-width: 600px)" srcset="_images/b.png">'
            '<img src="_images/a.png" alt="x"></picture><a href="_images/a.png">big</a>'
            '<img src="_static/logo.png"><img src="_images/missing.png">')
    out = posenc_assets.webp_figures(tmp_path, page)
    assert out == ('<picture><source media="(max-width: 600px)" srcset="_images/b.webp">'
                   '<img src="_images/a.webp" alt="x"></picture><a href="_images/a.png">big'
                   '</a><img src="_static/logo.png"><img src="_images/missing.png">')
    with Image.open(tmp_path / "_images" / "a.webp") as webp:
        assert webp.format == "WEBP" and webp.size == (40, 20)
        assert webp.convert("RGB").getpixel((3, 3)) == (10, 200, 30)  # lossless
        info = posenc_assets.read_figure_xmp(webp.info["xmp"])
    with Image.open(tmp_path / "_images" / "a.png") as png:
        dpi = png.info["dpi"][0]  # 220 dpi as a PNG stores it (per metre): 219.9894...
    assert info == {"posenc-min-font-pt": "7.5", "dpi": repr(dpi)}
    # the browser test reads the same numbers from the served file
    from browser_site import png_font_info

    data = (tmp_path / "_images" / "a.webp").read_bytes()
    assert png_font_info(data) == (7.5, dpi)
    # and a page in a folder below reaches the same files
    sub = tmp_path / "api"
    sub.mkdir()
    assert "../_images/b.webp" in posenc_assets.webp_figures(sub, '<img src="../_images/b.png">')


def test_unread_custom_properties_go():
    """A custom property goes when no sheet reads it with var() and no page or script
    names it; one read only by a property that went goes next; url(...;...) values and
    other declarations stay."""
    import posenc_assets

    sheets = {"a.css": ':root{--a:1;--b:var(--c);--c:2;--gone:3;--pst-x:4}'
                       '.x{color:var(--a);background:url(data:x;base64,AA==)}',
              "b.css": ".y{--only:1}@media print{.z{--c2:var(--a)}}"}
    out = posenc_assets.drop_unused_properties(sheets, {"pst-x"})
    assert out == {"a.css": ":root{--a:1;--pst-x:4}\n"
                            ".x{color:var(--a);background:url(data:x;base64,AA==)}\n",
                   "b.css": "\n"}


def test_math_characters_include_the_italic_letters_drawn():
    """The math font is subset to what the MathML draws: a single-letter <mi> is drawn
    as the italic letter, annotations (the TeX) are not drawn."""
    import posenc_assets

    page = ('<p>x</p><math><semantics><mrow><mi>x</mi><mi>&#x003B8;</mi><mi>sin</mi>'
            '<mo>&#x02211;</mo></mrow><annotation encoding="application/x-tex">\\zeta'
            '</annotation></semantics></math>')
    assert posenc_assets.math_characters(page) == {
        "\U0001d465", "\U0001d703", "s", "i", "n", "\u2211", "x", "\u03b8"}
    # the radical sign is drawn by <msqrt> and <mroot>, not by any text inside them
    root = ('<math><msqrt><mi>d</mi></msqrt><mroot><mi>x</mi><mn>3</mn></mroot></math>')
    assert posenc_assets.math_characters(root) == {"\u221a", "\U0001d451", "d",
                                                   "\U0001d465", "x", "3"}


# -- Languages -----------------------------------------------------------------------

def test_hreflang_and_language_switch_on_every_page(site):
    problems = []
    for lang, page in _all_html(site):
        soup = _soup(page)
        name = page.stem
        want_lang = LANGS[lang]
        if soup.html.get("lang") != want_lang:
            problems.append(f"{lang}/{name}: <html lang={soup.html.get('lang')}>")
        alternates = {link.get("hreflang"): link.get("href")
                      for link in soup.find_all("link", rel="alternate") if link.get("hreflang")}
        for code, tag in LANGS.items():
            want = f"{SITE_URL}{code}/{name}.html"
            if alternates.get(tag) != want:
                problems.append(f"{lang}/{name}: hreflang={tag} is {alternates.get(tag)}, not {want}")
        switches = soup.select("a.posenc-lang-switch")
        if not switches:
            problems.append(f"{lang}/{name}: no language switch")
        for a in switches:
            other = a.get("data-posenc-lang")
            target = _local_target(site, page, a["href"])
            if target != site / other / f"{name}.html" or not target.is_file():
                problems.append(f"{lang}/{name}: switch -> {a['href']} ({target})")
    assert not problems, "\n".join(problems[:20])


def test_chooser_links_both_languages(site):
    chooser = site / "index.html"
    assert chooser.is_file(), "no chooser at the site root"
    soup = _soup(chooser)
    hrefs = {a["href"] for a in soup.find_all("a", href=True)}
    for lang in LANGS:
        assert f"{lang}/index.html" in hrefs, f"the chooser does not link {lang}/index.html"
        assert (site / lang / "index.html").is_file()


def _search_index(site: Path, lang: str) -> dict:
    text = (site / lang / "searchindex.js").read_text(encoding="utf-8")
    match = re.fullmatch(r"\s*Search\.setIndex\((.*)\)\s*;?\s*", text, re.S)
    assert match, f"{lang}/searchindex.js is not Search.setIndex(...)"
    return json.loads(match[1])


def test_chinese_search_index_is_segmented_with_the_book_terms(site):
    terms = _search_index(site, "zh")["terms"]
    # 旋转位置编码 is one word only with docs/jieba_terms.txt loaded; jieba alone splits it.
    for word in ["位置编码", "旋转位置编码", "正弦", "波长"]:
        assert word in terms, f"{word} is not a term of the zh search index"
    book_terms = [line.split()[0] for line in
                  (ROOT / "docs" / "jieba_terms.txt").read_text(encoding="utf-8").splitlines()
                  if line.strip()]
    assert book_terms and "旋转位置编码" in book_terms


def test_chinese_search_runs_with_a_stemmer_that_exists(site):
    # Sphinx 9.0 named ChineseStemmer, which it does not ship (posenc_site fixes it).
    data = (site / "zh" / "_static" / "language_data.js").read_text(encoding="utf-8")
    stemmer = re.search(r"window\.Stemmer\s*=\s*(\w+)", data)
    assert stemmer, "language_data.js sets no Stemmer"
    assert re.search(rf"\b(?:var|let|const|function)\s+{stemmer[1]}\b|\b{stemmer[1]}\s*=", data[
        :stemmer.start()]), f"{stemmer[1]} is not defined in zh language_data.js"


def test_english_search_index(site):
    import snowballstemmer

    terms = _search_index(site, "en")["terms"]
    stem = snowballstemmer.stemmer("english").stemWord("rotary")
    assert stem in terms or "rotary" in terms


#: Words that only TeX has (formulas' sources, which the index once took as text), and
#: words that only adjacent cells of a computed table make when run together.
TEX_WORDS = {"mathrm", "frac", "mathbf", "operatorname", "cdot", "ldots", "bmatrix"}
#: ("modelrope typebaserotated...", and a number cell before a dtype cell: "00bfloat16").
RUN_TOGETHER = re.compile(r"typebase|modelrope|\d(?:bfloat16|float16|float32|float64)")


@pytest.mark.parametrize("lang", list(LANGS))
def test_search_index_holds_the_words_a_reader_reads(site, lang):
    """The index has no TeX from the formulas and keeps table cells apart (issue 35), and
    still has the words of the computed tables (the models table's column "rotated")."""
    index = _search_index(site, lang)
    # (an incremental build keeps a term no page has any more, with no pages)
    terms = {t for part in ("terms", "titleterms") for t, pages in index[part].items()
             if pages != []}
    assert not terms & TEX_WORDS, sorted(terms & TEX_WORDS)
    joined = [t for t in terms if RUN_TOGETHER.search(t)]
    assert not joined, joined[:10]
    # the models table's column headings ("rotated" in English, 旋转 in Chinese)
    word = {"en": "rotat", "zh": "旋转"}[lang]
    models = index["docnames"].index("models-reading")
    # (a page's word that is also in one of its headings is listed under titleterms)
    found = [index[part].get(word) for part in ("terms", "titleterms")]
    pages = {p for f in found if f is not None for p in ([f] if isinstance(f, int) else f)}
    assert models in pages, f"{word!r} of the models table is not indexed for the models page"


# -- 404, sitemap, Open Graph --------------------------------------------------------

def test_not_found_pages(site):
    for lang in LANGS:
        page = site / lang / "404.html"
        assert page.is_file(), f"no {lang}/404.html"
        soup = _soup(page)
        # Served at any missing URL: its assets are site-absolute (/posenc/<lang>/_static/...).
        css = [link["href"] for link in soup.find_all("link", rel="stylesheet")]
        assert css and all(h.startswith(f"{SITE_PATH}{lang}/") for h in css), css[:3]
        assert all(_local_target(site, page, h).is_file() for h in css)
    # GitHub Pages serves the root 404.html of a project site for every missing URL.
    assert (site / "404.html").is_file(), "no 404.html at the site root"


def test_sitemaps_list_every_page(site):
    pages = discover_pages(site)
    for lang in LANGS:
        tree = ET.parse(site / lang / "sitemap.xml")
        locs = [el.text for el in tree.iter("{http://www.sitemaps.org/schemas/sitemap/0.9}loc")]
        want = {f"{SITE_URL}{lang}/{name}.html" for code, name in pages if code == lang}
        assert set(locs) == want, (f"{lang}/sitemap.xml: missing {sorted(want - set(locs))}, "
                                   f"extra {sorted(set(locs) - want)}")
        assert locs == sorted(locs), "sitemap order is not stable"


def test_open_graph_tags(site):
    problems = []
    for lang, name in discover_pages(site):
        soup = _soup(site / lang / f"{name}.html")
        og = {m.get("property"): m.get("content") for m in soup.find_all("meta", property=True)}
        want = {"og:title": None, "og:type": None, "og:site_name": None, "og:description": None,
                "og:url": f"{SITE_URL}{lang}/{name}.html",
                "og:locale": {"en": "en_US", "zh": "zh_CN"}[lang]}
        for key, value in want.items():
            if not og.get(key) or (value and og[key] != value):
                problems.append(f"{lang}/{name}: {key}={og.get(key)!r}")
    assert not problems, "\n".join(problems[:20])


# -- Code, notebooks, launch links ---------------------------------------------------

def test_copy_button_script_on_pages_with_code(site):
    for lang, page in _all_html(site):
        soup = _soup(page)
        if soup.select("article div.highlight pre"):
            scripts = [s["src"] for s in soup.find_all("script", src=True)]
            src = next((s for s in scripts if "copybutton.js" in s), None)
            assert src, f"{lang}/{page.name} has code but no copybutton.js"
            assert _local_target(site, page, src).is_file()


def _front_matter(text: str) -> str:
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    return match[1] if match else ""


def _notebook_pages(site: Path) -> list[tuple[str, str]]:
    out = []
    for lang in LANGS:
        for src in sorted((site / lang / "_sources").rglob("*.md")):
            if "kernelspec:" in _front_matter(src.read_text(encoding="utf-8")):
                name = src.relative_to(site / lang / "_sources").with_suffix("").as_posix()
                out.append((lang, name))
    return out


def test_source_download_on_every_page(site):
    for lang, name in discover_pages(site):
        soup = _soup(site / lang / f"{name}.html")
        links = [a["href"] for a in soup.select(".dropdown-download-buttons a[href]")]
        assert f"_sources/{name}.md" in links, f"{lang}/{name}: no .md download ({links})"
        assert (site / lang / "_sources" / f"{name}.md").is_file()


def test_notebook_download_for_every_chapter(site):
    """The download menu offers the notebook (its contents: tests/book/test_notebooks.py)."""
    pages = _notebook_pages(site)
    if not pages:
        skip_or_fail("no notebook pages (with a kernelspec) in this build")
    for lang, name in pages:
        soup = _soup(site / lang / f"{name}.html")
        links = [a["href"] for a in soup.select(".dropdown-download-buttons a[href]")]
        assert f"_sources/{name}.ipynb" in links, f"{lang}/{name}: no .ipynb in the download menu"
        assert (site / lang / "_sources" / f"{name}.ipynb").is_file(), f"{lang}/{name}"


def test_download_menu_says_what_each_entry_is(site):
    """Not the theme's bare ".ipynb / .md / .pdf": executed notebook, MyST source, print,
    and the whole book as a PDF (tests/book/test_pdf.py)."""
    want = {
        "en": ["Notebook, executed (.ipynb)", "MyST source (.md)", "Print or save as PDF",
               "The whole book (PDF)"],
        "zh": ["已执行的笔记本（.ipynb）", "MyST 源文件（.md）", "打印或存为 PDF", "整本书（PDF）"],
    }
    notebooks = set(_notebook_pages(site))
    for lang, name in discover_pages(site):
        soup = _soup(site / lang / f"{name}.html")
        texts = [" ".join(item.get_text().split())
                 for item in soup.select(".dropdown-download-buttons .dropdown-item")]
        expected = want[lang] if (lang, name) in notebooks else want[lang][1:]
        assert texts == expected, f"{lang}/{name}: {texts}"


def test_launch_links_for_every_chapter(site):
    pages = _notebook_pages(site)
    if not pages:
        skip_or_fail("no notebook pages (with a kernelspec) in this build")
    org_repo = REPO_URL.split("github.com/", 1)[1].strip("/")
    for lang, name in pages:
        soup = _soup(site / lang / f"{name}.html")
        colab = soup.select_one("a.btn-launch-colab")
        binder = soup.select_one("a.btn-launch-binder")
        assert colab and binder, f"{lang}/{name}: launch links missing"
        assert colab["href"] == (f"https://colab.research.google.com/github/{org_repo}/blob/"
                                 f"notebooks/{lang}/{name}.ipynb")
        assert binder["href"] == (f"https://mybinder.org/v2/gh/{org_repo}/notebooks"
                                  f"?urlpath=lab/tree/{lang}/{name}.ipynb")


# -- Glossary ------------------------------------------------------------------------

CJK = re.compile(r"[\u4e00-\u9fff]")


#: Method names that Chinese writing uses untranslated (a glossary entry of only these
#: needs no Chinese term).
KEPT_NAMES = {"YaRN", "LongRoPE", "xPos", "RoPE-Mixed",
              # and one term of art Chinese writing keeps as it is
              "logits"}


def _term_groups(dl):
    """The terms of each glossary entry: the <dt>s before each <dd>."""
    groups, current = [], []
    for child in dl.find_all(["dt", "dd"], recursive=False):
        if child.name == "dt":
            current.append(child.get_text(" ", strip=True).rstrip("#").strip())
        else:
            groups.append(current)
            current = []
    return groups


def test_glossary_is_bilingual_and_points_to_chapters(site):
    english = {}
    for lang in LANGS:
        soup = _soup(site / lang / "glossary.html")
        dl = soup.select_one("dl.glossary")
        assert dl, f"{lang}/glossary.html has no glossary list"
        entries = dl.find_all("dd")
        assert len(entries) >= 15, f"{lang}: only {len(entries)} glossary entries"
        terms = [dt.get_text(" ", strip=True).rstrip("#").strip() for dt in dl.find_all("dt")]
        english[lang] = {t.lower() for t in terms if not CJK.search(t)}
        # Every entry has a Chinese term, except names that Chinese writing keeps as they are.
        untranslated = sum(all(t in KEPT_NAMES for t in group) for group in _term_groups(dl))
        assert sum(bool(CJK.search(t)) for t in terms) + untranslated >= len(entries), (
            f"{lang}: Chinese terms")
        for dd in entries:
            chapters = [a["href"] for a in dd.select("a.reference.internal[href$='.html']")]
            assert chapters, f"{lang}: entry without a chapter link: {dd.get_text()[:60]}"
    assert english["en"] == english["zh"], "the two glossaries define different English terms"
    # ... and the chapters point back to it, as the glossary says they do.
    for lang in LANGS:
        linking = [page.stem for page in sorted((site / lang).glob("*.html"))
                   if page.stem != "glossary"
                   and _soup(page).select("article a[href*='glossary.html#term-']")]
        assert len(linking) >= 4, f"{lang}: only {linking} link terms to the glossary"


# -- Chinese typography of the rendered pages ----------------------------------------

def test_zh_links_sit_flush_against_chinese_text(site):
    """No space between a Chinese character and a link whose text is Chinese at that end
    (按“长上下文：让 RoPE 越过训练长度”一章, not 按 长上下文：让 RoPE 越过训练长度 一章):
    what the reader sees, so the rule reads the built HTML (tests/zh_links.py)."""
    from zh_links import link_space_hits

    problems = []
    for lang, name in discover_pages(site):   # the chapters, not the index or search
        if lang != "zh":
            continue
        page = site / lang / f"{name}.html"
        problems += [f"{page.name}: {hit}"
                     for hit in link_space_hits(page.read_text(encoding="utf-8"))]
    assert not problems, ("spaces around links with Chinese text (quote a chapter or "
                          "section title with “ ”, drop the space):\n" + "\n".join(problems))


def test_zh_special_pages_and_buttons_are_chinese(site):
    """The 404 page and the launch buttons' tooltips are Chinese on the Chinese site."""
    page = _soup(site / "zh" / "404.html")
    text = page.select_one("article, main, body").get_text(" ", strip=True)
    assert "Page not found" not in text and "Unfortunately" not in text, text[:200]
    assert "找不到" in text, text[:200]
    soup = _soup(site / "zh" / "rope-rotation.html")
    binder = soup.select_one("a.btn-launch-binder")
    tips = " ".join(filter(None, [binder.get("title"), binder.get("data-bs-title"),
                                  binder.get("aria-label"), binder.get_text(" ", strip=True)]))
    assert "在 Binder 中运行" in tips, str(binder)[:300]
    assert "运行于" not in str(soup.select_one(".dropdown-launch-buttons") or binder)


# -- The mechanisms, on a tiny book --------------------------------------------------

TINY_PAGE = textwrap.dedent(
    """\
    ---
    file_format: mystnb
    kernelspec:
      name: python3
      display_name: Python 3
    ---

    # Tiny

    ```{code-cell} ipython3
    :tags: [remove-cell]
    from myst_nb import glue
    import matplotlib.pyplot as plt
    LANG = "LANGCODE"  # set_language("LANGCODE") stands here in the book
    ```

    Some math $x^2$.

    ```{code-cell} ipython3
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [0, 1])
    glue("fig_line", fig, display=False)
    plt.close(fig)
    ```

    ```{glue:figure} fig_line
    :name: fig-line

    A rising line, from the caption.
    ```

    ```{code-cell} ipython3
    fig2, ax2 = plt.subplots(figsize=(2, 1))
    plt.close(fig2)
    fig2
    ```

    ```{code-cell} ipython3
    ---
    mystnb:
      figure:
        caption: Two rows a cell computed.
        name: tbl-rows
    ---
    from IPython.display import HTML
    HTML("<table><tr><th>a</th><th>b</th></tr><tr><td>x</td><td>1</td></tr></table>")
    ```

    :::{table} A table of the page's own.
    :name: tbl-own

    | a | b |
    | --- | --- |
    | y | 2 |
    :::

    See {numref}`tbl-rows` and {numref}`tbl-own`.
    """
)


def test_reader_features_on_a_tiny_book(tmp_path):
    import nbformat

    lang = "en"
    src = tmp_path / "docs" / lang
    src.mkdir(parents=True)
    (src / "index.md").write_text("# Tiny book\n\n```{toctree}\ntiny\n```\n", encoding="utf-8")
    (src / "tiny.md").write_text(TINY_PAGE.replace("LANGCODE", lang), encoding="utf-8")
    out = tmp_path / "html" / lang
    env = {**os.environ, "POSENC_LANG": lang, "POSENC_BUILD_DIR": str(tmp_path / "build"),
           "PYTHONHASHSEED": "0"}
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(ROOT), "-q", str(src), str(out)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    # The bare figure has no caption and no alt: a warning names the page.
    alt_warnings = [line for line in result.stderr.splitlines() if "image without alt text" in line]
    assert len(alt_warnings) == 1 and "tiny.md" in alt_warnings[0], result.stderr[-2000:]
    soup = _soup(out / "tiny.html")
    alts = [img.get("alt") for img in soup.select("article img")]
    assert "A rising line, from the caption." in alts, alts
    # The notebook: executed, glue filled in, install cell right under the title.
    nb = nbformat.read(out / "_sources" / "tiny.ipynb", as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# Tiny")
    assert "posenc-install" in nb.cells[1].metadata.get("tags", [])
    assert "%pip install" in nb.cells[1].source
    assert [c.cell_type for c in nb.cells].count("code") == 5
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "{glue" not in markdown and "*Fig. 1 A rising line, from the caption.*" in markdown
    assert "*Table 1 Two rows a cell computed.*" in markdown
    assert "*Table 2 A table of the page's own.*\n\n| a | b |" in markdown
    # The figure is the output of the cell that draws it, which shows it when run; no
    # frozen copy in the text, no glue in the code.
    assert "attachment:" not in markdown and not any(c.get("attachments") for c in nb.cells)
    drawn = next(c for c in nb.cells if "ax.plot" in c.source)
    assert "display(fig)" in drawn.source and "glue" not in drawn.source
    assert [o.output_type for o in drawn.outputs if "image/png" in o.get("data", {})] == [
        "display_data"]
    assert not any("glue" in c.source or "myst_nb" in c.source
                   for c in nb.cells if c.cell_type == "code")
    assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert soup.select_one("a.btn-launch-colab")["href"].endswith(f"/notebooks/{lang}/tiny.ipynb")
    assert soup.select_one(".dropdown-download-buttons a[href='_sources/tiny.ipynb']")
    from bs4 import BeautifulSoup

    # A table a cell computed is numbered and captioned with the page's own tables, its
    # caption above it, and {numref} names it by its number
    computed = soup.select_one("div.posenc-computed-table#tbl-rows")
    assert [c.name for c in computed.find_all(["p", "table"])][:2] == ["p", "table"]
    assert computed.select_one(":scope > p").get_text(" ", strip=True) == \
        "Table 1 Two rows a cell computed."
    own = soup.select_one("table#tbl-own caption").get_text(" ", strip=True)
    assert own.startswith("Table 2 A table of the page"), own
    refs = [a.get_text(strip=True) for a in soup.select("a.reference.internal")
            if a.get("href", "").endswith(("#tbl-rows", "#tbl-own"))]
    assert refs == ["Table 1", "Table 2"], refs
    # The whole book's PDF: not linked while it is missing (a 404), linked from every
    # page's download menu once tools/build_pdf.py has printed it, once
    sys.path.insert(0, str(ROOT / "tools"))
    from build_pdf import link_book_pdf, pdf_name

    pages = [out / "index.html", out / "tiny.html"]
    assert not any("posenc-en.pdf" in p.read_text(encoding="utf-8") for p in pages)
    (out / pdf_name(lang)).write_bytes(b"%PDF-1.7\n")
    assert link_book_pdf(out, lang) == 2 and link_book_pdf(out, lang) == 0
    for page in pages:
        entry = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser").select_one(
            ".dropdown-download-buttons a.btn-download-book-pdf-button")
        assert entry["href"] == "posenc-en.pdf" and "fa-book" in str(entry), page
        assert entry.get_text(strip=True) == "The whole book (PDF)" == entry["title"]


# -- Chinese text: no spaces where the source had a line break ---------------------------


def test_chinese_punctuation_stays_on_the_line_of_the_math_before_it():
    from docutils import nodes

    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    from posenc_book import keep_punctuation_with_math

    para = nodes.paragraph("", "", nodes.Text("公比为 "), nodes.math("", "b^{2/d}"),
                           nodes.Text("。最长的波长"), nodes.math("", "x"), nodes.Text(" 和"))
    assert keep_punctuation_with_math(para) == 1
    group = para[1]
    assert group["classes"] == ["posenc-nowrap"] and group.astext() == "b^{2/d}。"
    assert para.astext() == "公比为 b^{2/d}。最长的波长x 和"


def test_no_chinese_punctuation_can_start_a_line_after_math(site):
    """In the built Chinese pages, every inline formula followed by a full stop, comma or
    closing mark sits with that mark in a posenc-nowrap inline (posenc_book)."""
    from bs4 import NavigableString

    loose, kept = [], 0
    for page in sorted((site / "zh").glob("*.html")):
        for math in _soup(page).select("article span.math"):
            after = math.next_sibling
            if isinstance(after, NavigableString) and after[:1] and after[0] in "。，、；：？！）」”":
                if "posenc-nowrap" in (math.parent.get("class") or []):
                    kept += 1
                else:
                    loose.append(f"{page.name}: {math.get_text()[:30]!r}{after[:3]!r}")
    assert kept >= 50 and not loose, (kept, loose[:5])


def test_join_cjk_lines_removes_breaks_between_chinese_characters_only():
    from docutils import nodes
    from docutils.core import publish_doctree

    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    from posenc_book import join_cjk_lines

    doc = publish_doctree("位置编码是\n一种方法，\n它用 ``甲\n乙`` 和\nLatin 词。\n\n::\n\n   代码\n   代码\n")
    assert join_cjk_lines(doc) == 2
    para = doc.next_node(lambda n: n.tagname == "paragraph").astext()
    assert para.startswith("位置编码是一种方法，它用 甲\n乙 和\nLatin")  # code and Latin kept
    assert "代码\n代码" in doc.astext()  # literal blocks untouched

    # MyST's soft breaks are text nodes of their own, between text, emphasis and code.
    para = nodes.paragraph("", "", nodes.Text("交错"), nodes.Text("\n"),
                           nodes.emphasis("", "布局"), nodes.Text("\n"), nodes.Text("把"),
                           nodes.Text("\n"), nodes.literal("", "x"), nodes.Text("\n"),
                           nodes.Text("中"))
    assert join_cjk_lines(para) == 2
    assert para.astext() == "交错布局把\nx\n中"
    # A kept break earlier in the paragraph must not be mistaken for a later one (text
    # nodes are equal by value).
    para = nodes.paragraph("", "", nodes.literal("", "x"), nodes.Text("\n"), nodes.Text("也。"),
                           nodes.Text("\n"), nodes.Text("下"))
    assert join_cjk_lines(para) == 1
    assert para.astext() == "x\n也。下"


def test_no_line_break_between_chinese_characters_in_the_zh_site(site):
    cjk = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef"
    pattern = re.compile(f"[{cjk}]\\n[{cjk}]")
    bad = []
    for lang, page in _all_html(site):
        if lang != "zh":
            continue
        soup = _soup(page)
        for p in soup.select("article p, article li:not(:has(ul, ol)), figcaption"):
            if pattern.search(p.get_text()):
                bad.append(f"{page.name}: {p.get_text()[:40]!r}")
    assert not bad, bad[:5]


# -- Outputs a reader can read ---------------------------------------------------------

#: A decimal number as Python or NumPy prints it ("0.07729924603301705", "6.2e-05").
_NUMBER = re.compile(r"(?<![\w.])-?(\d+)\.(\d+)(?:e[-+]?\d+)?")
#: NumPy's type wrappers around a scalar (NumPy 2's repr).
_NUMPY_REPR = re.compile(r"\bnp\.(?:float|int|uint|bool|complex|str)\w*\(")
MAX_SIGNIFICANT_DIGITS = 8


def unreadable_numbers(text: str) -> list[str]:
    """The ``np.float64(...)`` wrappers and the floats with more than
    MAX_SIGNIFICANT_DIGITS significant digits in an output's text."""
    long = [m.group(0) for m in _NUMBER.finditer(text)
            if m.group(0).rpartition(".")[2] != "0"  # a whole number, 48843300.0
            and len((m.group(1) + m.group(2)).lstrip("0")) > MAX_SIGNIFICANT_DIGITS]
    return _NUMPY_REPR.findall(text) + long


def test_unreadable_numbers_finds_what_it_should():
    assert unreadable_numbers("(np.float64(0.07729924603301705), np.int64(3))") == [
        "np.float64(", "np.int64(", "0.07729924603301705"]
    assert unreadable_numbers("ClosestPair(distance=6.028870671898084e-05, i=1)") == [
        "6.028870671898084e-05"]
    assert unreadable_numbers("array([6.28318531e+00, 1.29e+01])") == ["6.28318531e+00"]
    # rounded numbers, integers, version strings and names pass
    assert not unreadable_numbers("(0.0772992, 1.00021, 1.11022e-16, 18438.0, 123456789, "
                                  "48843300.0, torch 2.13.0, x1.000213)")


def test_cell_outputs_print_readable_numbers(site):
    """Every cell output a reader sees, in both languages: numbers rounded, no NumPy
    wrappers (posenc.figures.readable_output, called in each page's setup cell)."""
    found = []
    for lang, page in _all_html(site):
        soup = _soup(page)
        for out in soup.select("article div.cell_output pre"):
            bad = unreadable_numbers(out.get_text())
            if bad:
                found.append(f"{lang}/{page.name}: {bad[:3]}")
    assert not found, f"cell outputs with unreadable numbers: {found}"


# -- One citation style -----------------------------------------------------------------

REFERENCE_PAGES = ("references.html", "references-sources.html")


def _reference_labels(site: Path, lang: str) -> dict[str, str]:
    """page#id -> label ("Su et al., 2021") of each entry of the references pages."""
    labels = {}
    for name in REFERENCE_PAGES:
        for entry in _soup(site / lang / name).select("div.citation[id]"):
            label = entry.select_one("span.label")
            labels[f"{name}#{entry['id']}"] = label.get_text().strip().strip("[]") if label else ""
    return labels


def test_references_page_is_labelled_as_the_text_cites(site):
    """Author-year in the text and on the references page, both languages: every entry's
    label is "names, year" (never a number), labels are unique, and every citation in
    the text reads as its entry's label -- "[Su et al., 2021]" in brackets, or
    "Su et al. [2021]" with the names before the bracket."""
    for lang in LANGS:
        labels = _reference_labels(site, lang)
        assert len(labels) > 50, f"{lang}: {len(labels)} references"
        numeric = [label for label in labels.values() if not re.fullmatch(r".+, \d{4}[a-z]*", label)]
        assert not numeric, f"{lang}: labels not author-year: {numeric[:5]}"
        assert len(set(labels.values())) == len(labels), f"{lang}: two entries share a label"
        wrong, count = [], 0
        for page in sorted((site / lang).glob("*.html")):
            for cite in _soup(page).select("span.bibtex-citation"):
                for link in cite.select('a[href*="references"][href*=".html#"]'):
                    count += 1
                    label = labels.get(link["href"].rsplit("/", 1)[-1])
                    text = link.get_text().strip()
                    names = cite.get_text().split("[", 1)[0].strip()
                    if label is None:
                        wrong.append(f"{page.name}: {text!r} points at no entry")
                    elif text != label and f"{names}, {text}" != label:
                        wrong.append(f"{page.name}: cited as {names!r} [{text!r}], "
                                     f"listed as {label!r}")
        assert count > 100, f"{lang}: only {count} citations"
        assert not wrong, f"{lang}: {wrong[:5]}"


def test_chapters_figures_and_equations_carry_chapter_numbers(site):
    """Chapters are numbered 1, 2, ... across the book's parts (one numbered toctree per
    part; posenc_book.continue_chapter_numbers), a chapter's section pages chapter.section
    (7.1, 7.2, ...), figures and equations by chapter (Fig. 7.3, (7.1)) and in order across
    its section pages, and a section's notebook prints the same equation and figure
    numbers as its page."""
    import json

    for lang in LANGS:
        root = site / lang
        nav = _soup(root / "rope.html").select("nav.bd-docs-nav li.toctree-l1 > a")
        numbered = [a.get_text(strip=True) for a in nav
                    if re.match(r"\d+\. ", a.get_text(strip=True))]
        assert [int(t.split(".")[0]) for t in numbered] == list(range(1, len(numbered) + 1))
        assert len(numbered) >= 12, numbered
        chapter = int(_soup(root / "rope.html").select_one("h1 .section-number")
                      .get_text().strip(". "))
        sections = [a["href"] for a in _soup(root / "rope.html").select(
            "nav.bd-docs-nav li.toctree-l1.current li.toctree-l2 > a")]
        assert sections[0] == "rope-rotation.html" and len(sections) >= 2, sections
        eqnos, figs, notebooks = [], [], ""
        fig = "Fig." if lang == "en" else "图"
        for number, href in enumerate(sections, start=1):
            soup = _soup(root / href)
            assert (soup.select_one("h1 .section-number").get_text().strip(". ")
                    == f"{chapter}.{number}"), href
            page = (root / href).read_text(encoding="utf-8")
            page_eqnos = re.findall(r'<span class="eqno">\((\d+)\.(\d+)\)', page)
            eqnos += page_eqnos
            figs += [n for c, n in re.findall(rf"{fig} (\d+)\.(\d+)", page)
                     if int(c) == chapter and n not in figs]
            notebook = json.loads((root / "_sources" / href.replace(".html", ".ipynb"))
                                  .read_text(encoding="utf-8"))
            text = "".join("".join(c["source"]) for c in notebook["cells"])
            tags = re.findall(r"\\tag\{(\d+\.\d+)\}", text)
            assert tags == [f"{c}.{n}" for c, n in page_eqnos], (href, tags, page_eqnos)
            notebooks += text
        assert eqnos and {int(c) for c, _ in eqnos} == {chapter}, eqnos
        assert [int(n) for _, n in eqnos] == list(range(1, len(eqnos) + 1))
        figs = sorted({int(n) for n in figs})
        assert figs and figs == list(range(1, len(figs) + 1)), figs
        assert f"{fig} {chapter}.1" in notebooks
