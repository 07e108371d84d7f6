"""The built site in a real browser (Debian's Chromium, driven by Playwright).

Every page of both languages is loaded from a local HTTP server with every request to
another host blocked and counted, and must show: no console errors or failed requests,
rendered math and no raw TeX, loaded images with real alt text, copy buttons on code,
legible figures in dark mode (chosen with the theme's own menu), and a language switch
that lands on the same page in the other language.  Search is driven through the
site's search page.  A screenshot of each page goes to
``_build/screenshots/<lang>/<page>.png`` (the whole page, or in CI only the screen:
``browser_site.full_page_shots``) with a one-line summary per page in
``_build/screenshots/report.txt`` (``report-gw0.txt`` and so on, one per pytest-xdist
worker, where the tests run in several processes).

``test_broken_page_fails`` runs the same checks on a page broken on purpose (a missing
image, raw TeX, an external script, ...) and requires each check to report it.

Point ``POSENC_SITE_DIR`` at another build to test that one instead of ``_build/html``.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from browser_site import (
    OVERFLOW_JS,
    SECTION_ANCHORS_JS,
    PAGE_WEIGHT_MAX,
    SETTLE_JS,
    _switch_to_dark,
    WIDTHS,
    check_page,
    check_reading,
    check_switch_keeps_place,
    section_anchors,
    discover_pages,
    full_page_shots,
    new_context,
    per_process,
    screenshot_dir,
    search,
    search_results,
    serve,
    site_dir,
)

pytestmark = pytest.mark.browser

PAGES = discover_pages(site_dir()) or [("en", "index")]


@pytest.fixture(scope="module")
def reports(site):
    collected = []
    start = time.perf_counter()
    yield collected
    if collected:
        out = screenshot_dir(site)
        out.mkdir(parents=True, exist_ok=True)
        lines = [r.summary() for r in collected]
        lines.append(f"{len(collected)} pages in {time.perf_counter() - start:.1f} s")
        (out / per_process("report.txt")).write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_each_test_process_names_its_own_log(monkeypatch):
    """Under pytest-xdist every worker writes its own report and a11y log."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert per_process("report.txt") == "report.txt"
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert per_process("report.txt") == "report-gw1.txt"
    assert per_process("a11y.log.txt") == "a11y.log-gw1.txt"
    assert per_process("report") == "report-gw1"


def test_screenshots_are_whole_pages_unless_ci_or_told(monkeypatch):
    monkeypatch.delenv("POSENC_FULL_SCREENSHOTS", raising=False)
    monkeypatch.setenv("CI", "true")
    assert not full_page_shots()
    monkeypatch.setenv("POSENC_FULL_SCREENSHOTS", "1")
    assert full_page_shots()
    monkeypatch.delenv("CI")
    monkeypatch.setenv("POSENC_FULL_SCREENSHOTS", "0")
    assert not full_page_shots()
    monkeypatch.delenv("POSENC_FULL_SCREENSHOTS")
    assert full_page_shots()


@pytest.mark.parametrize(("lang", "name"), PAGES, ids=[f"{lang}/{name}" for lang, name in PAGES])
def test_page(lang, name, site, base, context, reports):
    report = check_page(context, base, lang, name, shots=screenshot_dir(site))
    reports.append(report)
    if report.problems:
        pytest.fail(report.summary(), pytrace=False)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(("lang", "name"), PAGES, ids=[f"{lang}/{name}" for lang, name in PAGES])
def test_reading(lang, name, width, site, base, context, reports):
    """At a phone's, a tablet's and a laptop's width, light and dark: the chapter list and
    the page contents open (sidebar dialogs below 992 px), the page never scrolls sideways."""
    report = check_reading(context, base, lang, name, width, shots=screenshot_dir(site))
    reports.append(report)
    if report.problems:
        pytest.fail(report.summary(), pytrace=False)


def _pages_with_sections() -> list[tuple[str, str]]:
    site = site_dir()
    return [(lang, name) for lang, name in PAGES
            if (site / lang / f"{name}.html").is_file()
            and len(section_anchors((site / lang / f"{name}.html").read_text("utf-8"))) >= 2]


SECTIONED = _pages_with_sections() or [("en", "rope")]


@pytest.mark.parametrize(("lang", "name"), SECTIONED,
                         ids=[f"{lang}/{name}" for lang, name in SECTIONED])
def test_language_switch_keeps_place(lang, name, base, context):
    """From a section in the URL or on screen, the switch lands on that section of the
    other language's page (every chapter with labelled sections)."""
    report = check_switch_keeps_place(context, base, lang, name)
    if report.problems:
        pytest.fail(report.summary(), pytrace=False)


@pytest.mark.parametrize(("lang", "name"), [("en", "rope-scores"), ("zh", "experiments")])
def test_sections_read_from_the_file_are_those_the_browser_finds(lang, name, site, base,
                                                                 context):
    """The switch test picks its sections from the served HTML (section_anchors); in the
    browser the page has the same shared sections, in the same order."""
    page = context.new_page()
    try:
        page.goto(f"{base}/{lang}/{name}.html", wait_until="load")
        seen = page.evaluate(SECTION_ANCHORS_JS)
    finally:
        page.close()
    html = (site / lang / f"{name}.html").read_text(encoding="utf-8")
    assert len(seen) >= 2 and section_anchors(html) == seen


def test_the_browser_reaches_no_host_but_the_test_server(base, context):
    """Chromium resolves no host name (CHROMIUM_ARGS): the page reaches the server at
    127.0.0.1, and the same server under the name localhost is out of its reach."""
    page = context.new_page()
    try:
        page.goto(f"{base}/en/index.html", wait_until="load")
        reached = page.evaluate("""async (port) => {
          const reach = async (url) => {
            try { await fetch(url, {mode: "no-cors"}); return true; }
            catch (e) { return false; }
          };
          return [await reach(`http://127.0.0.1:${port}/en/index.html`),
                  await reach(`http://localhost:${port}/en/index.html`)];
        }""", urlparse(base).port)
    finally:
        page.close()
    assert reached == [True, False]


def _has_sections(site, lang: str, name: str) -> bool:
    """The page has sections under its title (a chapter's first page, which lists its
    section pages, has none)."""
    html = (site / lang / f"{name}.html").read_text(encoding="utf-8")
    return len(re.findall(r"<section\b", html)) > 1


def test_chapters_have_shared_sections(site):
    """Every chapter page labels its sections, so the language switch can keep a place."""
    unlabelled = sorted({name for lang, name in PAGES if _has_sections(site, lang, name)}
                        - {name for lang, name in SECTIONED}
                        - {"index", "references", "glossary", "api"})
    assert not unlabelled, f"chapters whose switch carries no section anchors: {unlabelled}"


@pytest.mark.parametrize(
    ("lang", "query"),
    [("zh", "位置编码"), ("zh", "旋转"), ("en", "rotary")],
)
def test_search_finds(lang, query, base, context):
    hits = search(context, base, lang, query)
    assert hits, f"the {lang} site's search for {query!r} found nothing"


#: A chapter's topic words, and the chapter that must come first for them.
TOPICS = [
    ("en", "rotary", "rope.html"),
    ("en", "rotary position embedding", "rope.html"),
    ("en", "sinusoidal", "sinusoidal.html"),
    ("zh", "旋转位置编码", "rope.html"),
    ("zh", "正弦", "sinusoidal.html"),
    ("zh", "正弦位置编码", "sinusoidal.html"),
    # the glossary's entry for the term once came first (and two or three times)
    ("en", "YaRN", "lc-ramps.html"),
    ("zh", "YaRN", "lc-ramps.html"),
]
#: Page chrome that a search snippet showed before (issue 21): the article header's
#: buttons, the language switch, the colour menu.
CHROME_IN_SNIPPETS = ["Repository", "Suggest edit", "Show source", "System Settings",
                      "代码仓库", "中文", "English", "亮色", "暗色", "浅色", "深色", ".ipynb"]


@pytest.mark.parametrize(("lang", "query", "chapter"), TOPICS,
                         ids=[f"{lang}-{query}" for lang, query, _ in TOPICS])
def test_search_ranks_the_chapter_first_with_page_text_snippets(lang, query, chapter, base,
                                                                 context):
    results = search_results(context, base, lang, query)
    hrefs = [r["href"].split("#")[0].split("?")[0] for r in results]
    assert hrefs and hrefs[0] == chapter, (
        f"{lang} search for {query!r}: first {hrefs[:5]}, expected {chapter}")
    chrome = [(r["href"], word) for r in results[:5] for word in CHROME_IN_SNIPPETS
              if word in r["snippet"]]
    assert not chrome, f"search snippets show page chrome: {chrome}"
    assert all(r["snippet"] for r in results[:5] if not r["href"].startswith("api")), results[:5]


#: Queries whose results listed a page two or three times (its title, a heading, its
#: text), or whose snippets showed formulas' TeX ("m−nm - n") or a table's cells run
#: together ("modelrope typebaserotated").
SNIPPET_QUERIES = [("en", "YaRN"), ("zh", "YaRN"), ("en", "query"), ("zh", "查询"),
                   ("en", "rotated"), ("zh", "旋转"), ("en", "relative position")]
TEX_IN_TEXT = re.compile(r"\\[A-Za-z]{2,}|[_^]\{|(\w)[−-](\w)\1 ?- ?\2")
TABLE_RUN = re.compile(r"typebase|modelrope|\d(?:bfloat16|float16|float32|float64)")


@pytest.mark.parametrize(("lang", "query"), SNIPPET_QUERIES,
                         ids=[f"{lang}-{query}" for lang, query in SNIPPET_QUERIES])
def test_search_lists_each_page_once_with_readable_snippets(lang, query, base, context):
    results = search_results(context, base, lang, query)
    pages = [r["href"].split("#")[0].split("?")[0] for r in results]
    twice = sorted({p for p in pages if pages.count(p) > 1})
    assert not twice, f"{lang} search for {query!r} lists these pages more than once: {twice}"
    tex = [(r["href"], r["snippet"]) for r in results if TEX_IN_TEXT.search(r["snippet"])]
    assert not tex, f"search snippets show TeX: {tex[:3]}"
    run = [(r["href"], r["snippet"]) for r in results if TABLE_RUN.search(r["snippet"])]
    assert not run, f"search snippets run table cells together: {run[:3]}"


SEARCH_FIELD_JS = """
() => [...document.querySelectorAll("form.bd-search, form.search")].filter(
    f => f.getClientRects().length).map(form => {
  const input = form.querySelector("input[type=search], input[name=q]");
  const icon = form.querySelector("i, svg");
  if (!input) return null;
  const r = input.getBoundingClientRect(), s = getComputedStyle(input);
  const textLeft = r.left + parseFloat(s.paddingLeft) + parseFloat(s.borderLeftWidth);
  const ir = icon ? icon.getBoundingClientRect() : null;
  return {textLeft, iconRight: ir && ir.width ? ir.right : null,
          padding: parseFloat(s.paddingLeft), id: input.id || input.className};
}).filter(Boolean)
"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_search_field_text_is_clear_of_its_icon(lang, base, context):
    """The first letter a reader types is not under the magnifying glass: on the search
    page and in the search dialog (the sidebar's Search button, or Ctrl+K), the field's
    text starts right of the icon and has padding."""
    page = context.new_page()
    try:
        page.goto(f"{base}/{lang}/search.html", wait_until="load")
        fields = page.evaluate(SEARCH_FIELD_JS)
        page.goto(f"{base}/{lang}/rope.html", wait_until="load")
        page.locator("button.search-button-field:visible").first.click()
        page.wait_for_selector("form.bd-search input", state="visible", timeout=5000)
        fields += page.evaluate(SEARCH_FIELD_JS)
    finally:
        page.close()
    assert len(fields) >= 2, fields
    bad = [f for f in fields if f["padding"] < 4
           or (f["iconRight"] is not None and f["textLeft"] < f["iconRight"] + 2)]
    assert not bad, bad


DARK_FRAMES_JS = r"""
() => {
  const lum = (css) => {
    const m = css.match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const [r, g, b, a = 1] = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return a === 0 ? null : (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
  };
  const behind = (el) => {  // the first opaque background at or above el
    for (let e = el; e; e = e.parentElement) {
      const l = lum(getComputedStyle(e).backgroundColor);
      if (l !== null) return l;
    }
    return null;
  };
  const frames = [...document.querySelectorAll("article .cell_output .output.text_html")]
    .filter(o => o.querySelector(".posenc-ifig, .posenc-diagram, table"))
    .map(o => ({what: o.querySelector(".posenc-ifig, .posenc-diagram, table").className,
                backdrop: behind(o), padding: parseFloat(getComputedStyle(o).paddingLeft)}));
  const rasters = [...document.querySelectorAll("article img")].filter(i => i.getClientRects().length)
    .map(i => { const s = getComputedStyle(i);
      return {src: i.getAttribute("src"), card: lum(s.backgroundColor),
              radius: parseFloat(s.borderTopLeftRadius), rim: parseFloat(s.paddingLeft),
              edge: s.boxShadow !== "none", around: behind(i.parentElement)}; });
  return {frames, rasters};
}
"""


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", ["rope-rotation", "lc-ramps", "pitfalls", "models-reading"])
def test_dark_mode_frames(name, lang, site, base, context):
    """In dark mode the interactive figures, diagrams and computed tables sit on the dark
    page (the theme put a light rgb(206, 214, 221) backdrop with 8 px of padding behind
    every HTML output), and raster figures on a deliberate paper card: white, a rim of
    paper, rounded, with a hairline edge, on the dark page.  Screenshots go to
    ``<screenshots>/dark/<lang>/<page>.png``."""
    page = context.new_page()
    try:
        page.goto(f"{base}/{lang}/{name}.html", wait_until="load")
        page.evaluate(SETTLE_JS)
        assert _switch_to_dark(page), "the colour-mode menu does not switch to dark"
        page.wait_for_timeout(300)
        seen = page.evaluate(DARK_FRAMES_JS)
        shot = screenshot_dir(site) / "dark" / lang / f"{name}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=full_page_shots())
    finally:
        page.close()
    assert seen["frames"] or seen["rasters"], f"{lang}/{name}: nothing to check"
    light = [f for f in seen["frames"] if (f["backdrop"] or 0) > 0.5 or f["padding"] > 1]
    assert not light, f"{lang}/{name}: outputs on a light backdrop in dark mode: {light[:3]}"
    cards = [r for r in seen["rasters"]
             if not (r["card"] is not None and r["card"] > 0.97 and r["radius"] >= 3
                     and r["rim"] >= 3 and r["edge"] and (r["around"] or 0) < 0.5)]
    assert not cards, f"{lang}/{name}: raster figures without a paper card: {cards[:3]}"


@pytest.mark.parametrize(("locale", "lang"), [("zh-CN", "zh"), ("en-US", "en"), ("fr-FR", "en")])
def test_chooser_follows_the_browser_language(locale, lang, base, browser):
    ctx = browser.new_context(locale=locale)
    try:
        page = ctx.new_page()
        page.goto(f"{base}/index.html")
        page.wait_for_url(f"{base}/{lang}/index.html", timeout=10000)
    finally:
        ctx.close()


# -- The checks bite -----------------------------------------------------------------

def _png(path: Path, rgba: tuple[int, int, int, int]) -> None:
    from PIL import Image

    Image.new("RGBA", (64, 40), rgba).save(path)


BREAKAGE = """
<div id="broken-on-purpose">
  <p>The angle $\\theta_i$ was never converted to MathML.</p>
  <p><span class="math notranslate nohighlight">\\(x^2\\)</span></p>
  <img src="_images/missing.png" alt="a figure whose file is gone">
  <img src="_images/opaque.png">
  <img src="_images/opaque.png" alt="_images/opaque.png">
  <p><img class="dark-light" src="_images/clear.png" alt="a figure with a transparent background"></p>
  <div class="highlight"><pre>x = 1</pre></div>
  <div style="width: 2000px">a line that does not wrap</div>
  <script src="_static/scripts/fontawesome.js"></script>
  <img src="_images/tiny.png" alt="a figure whose words are 3 pt">
  <table style="width: 60px"><tr><td style="overflow-wrap: anywhere">interleaved</td><td><code style="white-space: normal; overflow-wrap: anywhere">attention_factor</code></td></tr></table>
  <img id="no-enlarge" src="_images/shrunk.png" width="700" alt="a shrunk figure whose Enlarge button is hidden">
  <style>#no-enlarge + button.posenc-enlarge { display: none !important; }</style>
  <div class="highlight"><pre class="posenc-no-cue">x = "a code line far wider than a phone's screen, scrolling in its box with no cue"</pre></div>
  <style>.posenc-no-cue { -webkit-mask-image: none !important; mask-image: none !important; }</style>
  <div style="height: 30000px">a chapter far too long for a phone, not split into sections</div>
  <script src="https://cdn.example.com/analytics.js"></script>
  <script>console.error("broken on purpose");</script>
  <script>
    addEventListener("load", () => {  // a banner lying over the language switch
      const r = document.querySelector("a.posenc-lang-switch").getBoundingClientRect();
      const cover = document.createElement("div");
      Object.assign(cover.style, {position: "fixed", left: r.left + "px", top: r.top + "px",
        width: r.width + "px", height: r.height + "px", zIndex: 9999, background: "#fff"});
      document.body.append(cover);
    });
  </script>
</div>
"""


DEAD_TOGGLES = """
<header style="display: none"><button class="sidebar-toggle primary-toggle"></button>
<button class="sidebar-toggle secondary-toggle"></button></header>
"""


def _tiny_text_figure(path: Path) -> None:
    """A PNG that says its smallest words are 3 pt at 220 dpi: unreadable on any screen."""
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("posenc-min-font-pt", "3")
    Image.new("RGB", (1400, 600), (255, 255, 255)).save(path, pnginfo=info, dpi=(220, 220))


def _broken_site(site: Path, tmp: Path) -> Path:
    """A copy of en/index.html as en/broken.html, with one breakage per check."""
    for lang in ("en", "zh"):
        (tmp / lang).mkdir(parents=True)
        os.symlink(site / lang / "_static", tmp / lang / "_static")
        for name in ("index.html", "searchindex.js"):
            shutil.copy(site / lang / name, tmp / lang / name)
    images = tmp / "en" / "_images"
    images.mkdir()
    _png(images / "opaque.png", (255, 255, 255, 255))
    _png(images / "clear.png", (0, 0, 0, 0))
    _tiny_text_figure(images / "tiny.png")
    _tiny_text_figure(images / "shrunk.png")
    html = (site / "en" / "index.html").read_text(encoding="utf-8")
    # No copy buttons: drop copybutton.js.  The language switch still says index.html.
    # The transparent image opts out of the theme's white backing (class dark-light).
    html = re.sub(r'<script src="_static/copybutton\.js[^"]*"></script>', "", html)
    html, n = re.subn(r"(<article[^>]*>)", r"\1" + BREAKAGE.replace("\\", "\\\\"), html, count=1)
    assert n == 1, "no <article> in en/index.html"
    # The bug of issue 21: a hidden header whose toggles come first, so the theme binds
    # those and the visible ones do nothing.
    html, n = re.subn(r"(<body[^>]*>)", r"\1" + DEAD_TOGGLES, html, count=1)
    assert n == 1, "no <body> in en/index.html"
    (tmp / "en" / "broken.html").write_text(html, encoding="utf-8")
    # The same bug on a chapter that has a contents list (the index has none).
    html = (site / "en" / "rope-scores.html").read_text(encoding="utf-8")
    html = re.sub(r"(<body[^>]*>)", r"\1" + DEAD_TOGGLES, html, count=1)
    (tmp / "en" / "broken-toc.html").write_text(html, encoding="utf-8")
    # A Chinese page with the theme's English left in its header.
    html = (site / "zh" / "index.html").read_text(encoding="utf-8")
    html, n = re.subn(r"(<body[^>]*>)", r'\1<div><button title="Color mode">System Settings'
                      r"</button></div>", html, count=1)
    assert n == 1, "no <body> in zh/index.html"
    (tmp / "zh" / "broken.html").write_text(html, encoding="utf-8")
    return tmp


EXPECTED_FAILURES = {
    "raw TeX": "raw TeX in the text",
    "math not rendered": "math elements but none drawn as MathML",
    "missing image": "image not loaded: _images/missing.png",
    "missing image (HTTP)": "HTTP errors: ['404",
    "no alt": "image without alt text: _images/opaque.png",
    "file name as alt": "image alt is a file name",
    "external request": "request(s) to other hosts: ['https://cdn.example.com/analytics.js']",
    "console error": "console errors: ['broken on purpose'",
    "no copy button": "code blocks but no copy button",
    "transparent figure in dark mode": "transparent on a dark background",
    "language switch target": "language switch went to /zh/index.html, expected /zh/broken.html",
    "language switch covered": "the language switch is hidden or covered",
    "heavy first load": f"before images (limit {PAGE_WEIGHT_MAX / 1e6:g} MB)",
}
def test_switch_without_posenc_js_loses_the_place(site, browser, tmp_path):
    """The place-keeping check bites: without posenc.js the switch drops the section."""
    for lang in ("en", "zh"):
        (tmp_path / lang).mkdir()
        os.symlink(site / lang / "_static", tmp_path / lang / "_static")
        html = (site / lang / "lc-rules.html").read_text(encoding="utf-8")
        html, n = re.subn(r'<script src="_static/posenc\.js[^"]*"></script>', "", html)
        assert n == 1, "posenc.js is not loaded by lc-rules.html"
        (tmp_path / lang / "lc-rules.html").write_text(html, encoding="utf-8")
    ctx = new_context(browser)
    try:
        with serve(tmp_path) as url:
            report = check_switch_keeps_place(ctx, url, "en", "lc-rules")
    finally:
        ctx.close()
    text = "\n".join(report.problems)
    assert "the switch went to /zh/lc-rules.html#" in text, text


EXPECTED_NARROW_FAILURES = {
    "sideways scroll": "the page scrolls sideways by",
    "scroll box without a cue": "box(es) scroll sideways at 390 px with no cue",
    "heavy asset": "loads ['fontawesome.js'] (the book does without)",
    "figure without a font record": "figure opaque.png carries no font size",
    "figure words too small": "draws words at 2.3 px at 390 px (minimum 11)",
    "table word broken": "word(s) in tables broken across lines at 390 px",
    "figure without an Enlarge button": "shown smaller than drawn at 390 px with no visible",
    "dead chapter-list button": "chapter list at 390 px: clicking .primary-toggle does not open",
    "dead contents button": "page contents at 390 px: clicking .secondary-toggle does not open",
    "page too long": "phone screens long at 390 px (at most 25",
}


def test_broken_page_fails(site, browser, tmp_path):
    broken = _broken_site(site, tmp_path / "site")
    ctx = new_context(browser)
    try:
        with serve(broken) as url:
            report = check_page(ctx, url, "en", "broken", shots=tmp_path / "shots")
            narrow = check_reading(ctx, url, "en", "broken", 390)
            narrow_toc = check_reading(ctx, url, "en", "broken-toc", 390)
            chinese = check_page(ctx, url, "zh", "broken")
    finally:
        ctx.close()
    english = [p for p in chinese.problems if p.startswith("English theme words")]
    assert english and "'System Settings'" in english[0] and "'Color mode'" in english[0], (
        chinese.problems)
    text = "\n".join(report.problems)
    missed = [what for what, needle in EXPECTED_FAILURES.items() if needle not in text]
    narrow_text = "\n".join(narrow.problems + narrow_toc.problems)
    missed += [what for what, needle in EXPECTED_NARROW_FAILURES.items()
               if needle not in narrow_text]
    text += "\n" + narrow_text
    assert not missed, f"checks that did not fire: {missed}\nreported:\n{text}"


WIDE_MATH_JS = """
() => [...document.querySelectorAll("article div.math")]
  .filter(box => box.getClientRects().length)
  .map(box => {
    const shown = [...box.querySelectorAll("math")].find(m => getComputedStyle(m).display !== "none");
    return {narrow: !!shown && shown.classList.contains("posenc-math-narrow"),
            forms: box.querySelectorAll("math").length,
            width: shown ? Math.round(shown.getBoundingClientRect().width) : 0,
            room: box.clientWidth,
            tex: (box.querySelector("annotation")?.textContent || "").slice(0, 50)};
  })
"""


#: The section pages of the RoPE chapter, in order.
ROPE_SECTIONS = ["rope-rotation", "rope-scores", "rope-base-variants"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_rope_equations_fit_a_phone(lang, base, browser):
    """On a 390 px phone every display equation of the RoPE chapter fits its column: the
    long ones show their narrow form (broken lines, the matrix by blocks); from 600 px up
    the wide form is back, and the same equations have a narrow form in both languages."""
    ctx = new_context(browser)
    try:
        page = ctx.new_page()
        narrow, wide = [], []
        for name in ROPE_SECTIONS:
            page.set_viewport_size({"width": 390, "height": 844})
            page.goto(f"{base}/{lang}/{name}.html", wait_until="load")
            narrow += page.evaluate(WIDE_MATH_JS)
            page.set_viewport_size({"width": 1280, "height": 900})
            wide += page.evaluate(WIDE_MATH_JS)
    finally:
        ctx.close()
    assert narrow, "no display math on the rope page"
    too_wide = [m for m in narrow if m["width"] > m["room"] + 1]
    assert not too_wide, too_wide
    with_forms = [m for m in narrow if m["forms"] == 2]
    assert len(with_forms) >= 10 and all(m["narrow"] for m in with_forms), narrow
    assert not any(m["narrow"] for m in wide), wide


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_general_index_fits_a_phone(lang, base, browser):
    """The general index (two table columns of entries) does not scroll sideways at 390 px."""
    ctx = new_context(browser)
    try:
        page = ctx.new_page()
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{base}/{lang}/genindex.html", wait_until="load")
        over = page.evaluate(OVERFLOW_JS)
    finally:
        ctx.close()
    assert not over, over


MENU_JS = r"""
() => {
  const menu = document.querySelector(".dropdown-download-buttons .dropdown-menu");
  const toggle = document.querySelector(".dropdown-download-buttons [data-bs-toggle]");
  const r = menu.getBoundingClientRect();
  return {shown: getComputedStyle(menu).display !== "none" && r.height > 0,
          left: r.left, right: r.right, room: document.documentElement.clientWidth,
          expanded: toggle.getAttribute("aria-expanded"),
          focus: document.activeElement ? document.activeElement.textContent.trim().slice(0, 80)
                                        : null,
          items: [...menu.querySelectorAll(".dropdown-item")].map(a => a.textContent.trim())};
}
"""


@pytest.mark.parametrize("width", [390, 1280])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_download_menu_by_mouse_and_keyboard(lang, width, base, browser):
    """The header's download menu (Bootstrap's dropdown, done by posenc-bootstrap.js):
    a click opens it inside the window, Escape closes it and gives the toggle back its
    focus, ArrowDown opens it on the first item and walks the items, a click elsewhere
    or on an item closes it; no script errors on the way."""
    ctx = new_context(browser)
    errors: list[str] = []
    try:
        page = ctx.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.set_viewport_size({"width": width, "height": 844})
        page.goto(f"{base}/{lang}/rope.html", wait_until="load")
        toggle = page.locator(".dropdown-download-buttons [data-bs-toggle='dropdown']")
        assert page.evaluate(MENU_JS)["shown"] is False
        toggle.click()
        opened = page.evaluate(MENU_JS)
        page.keyboard.press("Escape")
        # the theme also shows the menu while the pointer is over its toggle: move away
        page.mouse.move(5, 600)
        closed = page.evaluate(MENU_JS)
        focused_toggle = page.evaluate(
            "document.activeElement.matches('.dropdown-download-buttons [data-bs-toggle]')")
        page.keyboard.press("ArrowDown")
        by_keys = page.evaluate(MENU_JS)
        page.keyboard.press("ArrowDown")
        second = page.evaluate(MENU_JS)
        page.mouse.click(5, 400)
        outside = page.evaluate(MENU_JS)
        toggle.click()
        with ctx.expect_page():  # the source opens in a new tab
            page.locator(".dropdown-download-buttons .dropdown-item[href$='.md']").click()
        page.mouse.move(5, 600)
        after_item = page.evaluate(MENU_JS)
    finally:
        ctx.close()
    assert opened["shown"] and opened["expanded"] == "true", opened
    assert opened["left"] >= 0 and opened["right"] <= opened["room"] + 0.5, opened
    # notebook, source, print, and the whole book's PDF where it has been printed
    book_pdf = (site_dir() / lang / f"posenc-{lang}.pdf").is_file()
    assert len(opened["items"]) >= (4 if book_pdf else 3), opened
    assert not closed["shown"] and closed["expanded"] == "false" and focused_toggle, closed
    assert by_keys["shown"] and by_keys["focus"] == by_keys["items"][0], by_keys
    assert second["focus"] == second["items"][1], second
    assert not outside["shown"], outside
    assert not after_item["shown"] and after_item["expanded"] == "false", after_item
    assert not errors, errors


FRONT_JS = r"""
() => {
  const start = document.querySelector("article .posenc-start a");
  const r = start ? start.getBoundingClientRect() : null;
  const svg = document.querySelector("article .posenc-diagram svg");
  return {start: start && {href: start.getAttribute("href"), bottom: r.bottom,
                           height: r.height, text: start.textContent.trim()},
          screen: window.innerHeight,
          h1: parseFloat(getComputedStyle(document.querySelector("article h1")).fontSize),
          figure: svg ? svg.getBoundingClientRect().width : 0,
          bold: [...document.querySelectorAll("article p > strong")].map(b => b.textContent)};
}
"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_front_page_says_where_to_start_on_a_phone(lang, base, browser):
    """The front page at 390 x 844: a "Start reading" button to chapter 1 in the first
    screen, who the book is for and what a reader needs, one figure, a title of a phone's
    size; the chooser is styled (its links are buttons, not browser-default underlined
    text)."""
    ctx = new_context(browser)
    try:
        page = ctx.new_page()
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{base}/{lang}/index.html", wait_until="load")
        front = page.evaluate(FRONT_JS)
        page.goto(f"{base}/index.html?choose", wait_until="load")
        chooser = page.evaluate(
            "[...document.querySelectorAll('a[hreflang]')].map(a => {"
            " const s = getComputedStyle(a), r = a.getBoundingClientRect();"
            " return {bottom: r.bottom, height: r.height, line: s.textDecorationLine,"
            " background: s.backgroundColor}; })")
    finally:
        ctx.close()
    start = front["start"]
    assert start and start["href"] == "why-position.html", front
    assert start["bottom"] <= front["screen"] and start["height"] >= 24, front
    assert len(front["bold"]) >= 2 and front["figure"] > 300, front
    assert front["h1"] <= 32, front  # the theme's 42 px title took three lines of a phone
    assert len(chooser) == 2, chooser
    for link in chooser:
        assert link["bottom"] <= 844 and link["height"] >= 44, chooser
        assert link["line"] == "none" and link["background"] != "rgba(0, 0, 0, 0)", chooser


ATLAS_JS = r"""
() => {
  const box = document.querySelector("#tbl-models-atlas .output.text_html");
  const table = box.querySelector("table");
  const rows = [...table.querySelectorAll("tbody tr")];
  // a row of a table lays its cells out side by side: their tops agree
  const stacked = rows.filter(r => {
    const tops = [...r.cells].map(c => Math.round(c.getBoundingClientRect().top));
    return Math.max(...tops) - Math.min(...tops) > 1;
  }).length;
  const first = rows[0].cells[0], second = rows[0].cells[1];
  const before = {first: first.getBoundingClientRect().left,
                  second: second.getBoundingClientRect().left};
  box.scrollLeft = 300;
  box.dispatchEvent(new Event("scroll"));
  const after = {first: first.getBoundingClientRect().left,
                 second: second.getBoundingClientRect().left};
  const mask = getComputedStyle(box).maskImage || getComputedStyle(box).webkitMaskImage;
  const hint = box.nextElementSibling;
  const caption = document.querySelector("#tbl-models-atlas > p .caption-number");
  return {rows: rows.length, columns: table.querySelectorAll("thead th").length,
          cells: rows[0].cells.length, stacked, display: getComputedStyle(rows[0]).display,
          height: table.getBoundingClientRect().height, screen: window.innerHeight,
          scrolls: box.scrollWidth > box.clientWidth, cue: box.classList.contains("posenc-scrolls"),
          hint: hint && hint.matches("p.posenc-scroll-hint") && !hint.hidden
                ? hint.textContent : null,
          caption: caption ? caption.textContent.trim() : null, before, after, mask};
}
"""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_atlas_table_stays_a_comparison_on_a_phone(lang, base, browser):
    """At 390 px the atlas of models is still a table to compare across, not a card per
    model: every row on one line with all its columns, the rows' names in a first column
    that stays in view while the others scroll sideways under it, with the fading cue and
    a line under the table that says so; numbered and captioned."""
    ctx = new_context(browser)
    try:
        page = ctx.new_page()
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{base}/{lang}/models-reading.html", wait_until="load")
        page.wait_for_timeout(300)  # posenc.js marks the scrollers after the fonts
        atlas = page.evaluate(ATLAS_JS)
    finally:
        ctx.close()
    assert atlas["display"] == "table-row" and atlas["stacked"] == 0, atlas
    assert atlas["rows"] >= 10 and atlas["cells"] == atlas["columns"] >= 8, atlas
    # a row per line: the table is shorter than two screens (16 cards took 5.3)
    assert atlas["height"] < 2 * atlas["screen"], atlas
    assert atlas["scrolls"] and atlas["cue"] and atlas["hint"], atlas
    assert atlas["after"]["second"] < atlas["before"]["second"] - 100, atlas  # scrolled
    assert abs(atlas["after"]["first"] - atlas["before"]["first"]) < 1, atlas  # stays
    # scrolled, the first column is not faded: the cue is on the right edge only
    assert atlas["mask"] in ("none", "") or atlas["mask"].startswith(
        "linear-gradient(to right, rgb(0, 0, 0)"), atlas
    assert atlas["caption"] and atlas["caption"].startswith("Table" if lang == "en" else "表"), atlas


MATH_FONT_JS = r"""
async () => {
  await document.fonts.ready;
  const math = document.querySelector("article math");
  const loaded = [...document.fonts].filter(f => f.family.replace(/"/g, "") === "posenc math"
                                               && f.status === "loaded").length;
  // the brackets drawn around a matrix (the visible form) stretch to its height: the
  // font's MATH table at work
  const fences = "()[]{}|\u2016\u27e8\u27e9";
  const stretched = [...document.querySelectorAll("article math mtable")].flatMap(t => {
    const size = parseFloat(getComputedStyle(t).fontSize);
    const around = [t.previousElementSibling, t.nextElementSibling];
    return around.filter(mo => mo && mo.localName === "mo" && fences.includes(mo.textContent.trim())
                               && mo.getBoundingClientRect().height > 0)
                 .map(mo => ({fence: mo.textContent.trim(),
                              ratio: mo.getBoundingClientRect().height / size,
                              rows: t.querySelectorAll(":scope > mtr").length}));
  });
  // a square root is wider than what is under it: the radical sign is drawn
  const radicals = [...document.querySelectorAll("article math msqrt")].filter(
    r => r.getBoundingClientRect().height > 0).map(
    r => r.getBoundingClientRect().width - r.firstElementChild.getBoundingClientRect().width);
  return {family: getComputedStyle(math).fontFamily, loaded, stretched, radicals};
}
"""


@pytest.mark.parametrize("name", ["rope-rotation", "lc-ramps"])
@pytest.mark.parametrize("width", [390, 1280])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_math_is_set_in_the_site_math_font(lang, width, name, site, base, browser):
    """Math is drawn from the site's own math font (STIX Two Math, subset;
    docs/_ext/posenc_assets.py), on the Chinese pages too, and the brackets around the
    RoPE page's matrices stretch over them, and square roots show their radical sign
    (the long-context page).  The displays are saved as screenshots to
    look at (``_build/screenshots/math/``): matrices and cases on the RoPE page, primes
    and fractions on the long-context page."""
    ctx = new_context(browser)
    try:
        page = ctx.new_page()
        page.set_viewport_size({"width": width, "height": 844})
        page.goto(f"{base}/{lang}/{name}.html", wait_until="load")
        seen = page.evaluate(MATH_FONT_JS)
        out = screenshot_dir(site) / "math"
        out.mkdir(parents=True, exist_ok=True)
        displays = page.locator("article div.math:visible")
        for i in range(min(displays.count(), 12)):
            displays.nth(i).screenshot(path=str(out / f"{lang}-{name}-{width}-{i:02d}.png"))
    finally:
        ctx.close()
    assert seen["family"].startswith('"posenc math"'), seen["family"]
    assert seen["loaded"] == 1, seen
    # a bracket around a matrix of two rows or more is taller than two lines of text
    brackets = [b for b in seen["stretched"] if b["rows"] >= 2]
    assert all(b["ratio"] > 2.0 for b in brackets), seen["stretched"]
    if name == "rope-rotation":
        assert brackets, seen["stretched"]
    if name == "lc-ramps":
        assert seen["radicals"] and min(seen["radicals"]) > 3.0, seen["radicals"]
