"""Helpers for the site tests: find the built site, serve it, drive Chromium over it.

The site is ``_build/html`` (``nox -s docs``) or the folder named by ``POSENC_SITE_DIR``.
When it is missing, or Chromium is, the tests are skipped on a workstation and fail in
CI (``CI=true``): CI must never pass by skipping.

:func:`check_page` is the whole browser check of one page; the broken-page test runs the
same function on a page made to fail, so the checks are known to bite.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
LANGS = {"en": "en", "zh": "zh-CN"}  # folder -> <html lang>
NOT_CHAPTERS = {"genindex", "search", "404", "py-modindex"}
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run",
    # no host name resolves (localhost neither): the browser reaches the test's server at
    # 127.0.0.1 and nothing else, so no check hangs on or depends on the network
    # (check_page and the interactive-figure tests still route every request, to count
    # those to other hosts)
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def skip_or_fail(reason: str) -> None:
    """Skip on a workstation; in CI a missing prerequisite is a failure."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: not skipping)")
    pytest.skip(reason)


def site_dir() -> Path:
    return Path(os.environ.get("POSENC_SITE_DIR") or ROOT / "_build" / "html").resolve()


def require_site() -> Path:
    site = site_dir()
    missing = [f"{lang}/index.html" for lang in LANGS if not (site / lang / "index.html").is_file()]
    if missing:
        skip_or_fail(f"no built site at {site} (missing {', '.join(missing)}): run nox -s docs")
    return site


def screenshot_dir(site: Path) -> Path:
    env = os.environ.get("POSENC_SCREENSHOT_DIR")
    return Path(env) if env else site.parent / "screenshots"


def full_page_shots() -> bool:
    """Whether a page's screenshot shows the whole page or only the screen: the whole
    page where a person looks at the screenshots, the screen in CI, which throws them
    away (the whole of a long page costs Chromium about two seconds).  Set
    ``POSENC_FULL_SCREENSHOTS`` to 1 or 0 to choose."""
    choice = os.environ.get("POSENC_FULL_SCREENSHOTS", "").strip()
    if choice in {"0", "1"}:
        return choice == "1"
    return not in_ci()


def per_process(filename: str) -> str:
    """``filename`` as one pytest process's own: ``report.txt`` becomes ``report-gw0.txt``
    in pytest-xdist's first worker, so that processes do not overwrite each other's log."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return filename
    stem, dot, ext = filename.rpartition(".")
    return f"{stem}-{worker}{dot}{ext}" if dot else f"{filename}-{worker}"


def discover_pages(site: Path) -> list[tuple[str, str]]:
    """(lang, pagename) of every page of both languages, from the built HTML files."""
    pages = []
    for lang in LANGS:
        root = site / lang
        if not root.is_dir():
            continue
        for html in sorted(root.rglob("*.html")):
            rel = html.relative_to(root)
            if rel.parts[0].startswith("_"):  # _static, _sources, _images, _modules
                continue
            name = rel.with_suffix("").as_posix()
            if name not in NOT_CHAPTERS:
                pages.append((lang, name))
    return pages


# -- Serving -------------------------------------------------------------------------

class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript", ".mjs": "text/javascript", ".woff2": "font/woff2",
        ".woff": "font/woff", ".svg": "image/svg+xml", ".ipynb": "application/json",
    }

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):  # a browser hanging up early
        pass


@contextlib.contextmanager
def serve(directory: Path):
    """Serve ``directory`` on an ephemeral localhost port; yield the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# -- The browser ---------------------------------------------------------------------

@contextlib.contextmanager
def chromium():
    """One headless Chromium (Debian's, driven by Playwright)."""
    if not Path(CHROMIUM).exists():
        skip_or_fail(f"{CHROMIUM} is missing: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - requirements/test.txt has it
        skip_or_fail("playwright is not installed")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def new_context(browser):
    """A browser context that starts every page in light mode, 1280x900."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    context.add_init_script(
        "try { localStorage.setItem('mode', 'light'); localStorage.setItem('theme', 'light'); }"
        " catch (e) {}"
    )
    return context


# -- Checking one page ---------------------------------------------------------------

SETTLE_JS = """
async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  // figures load lazily (as the reader scrolls to them): a check measures them all
  for (const img of document.images) if (!img.complete && img.loading === "lazy") img.loading = "eager";
  await Promise.all([...document.images].map(img => img.complete ? null :
    new Promise(done => { img.addEventListener("load", done); img.addEventListener("error", done); })));
  if (document.fonts) await document.fonts.ready;
}
"""

INSPECT_JS = r"""
() => {
  const out = {};
  // Math is MathML written at build time (docs/_ext/posenc_math.py): each formula is a
  // <math> element the browser lays out, with a size (a browser without MathML, or TeX
  // left as text, has none).
  const math = [...document.querySelectorAll(".math")];
  out.math = math.length;
  const drawn = (el) => {
    const m = el.querySelector("math");
    if (!m) return false;
    const r = m.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && m.constructor.name === "MathMLElement";
  };
  // (a formula in a part of the page that is not shown, such as the contents' collapsed
  // entries, has no size and is not counted)
  const shown = math.filter(el => el.getClientRects().length > 0);
  out.mjx = shown.filter(drawn).length;
  out.unrendered = shown.filter(el => !drawn(el)).map(el => el.textContent.trim().slice(0, 60));
  // Raw TeX left in the text a reader sees (code is allowed to contain dollars).
  const SKIP = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "PRE", "CODE", "TEXTAREA", "KBD",
                        "SAMP", "TEMPLATE", "MATH"]);
  const RAW = /\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{|\$[^$\s][^$\n]*?\$/;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode(node) {
      for (let el = node.parentElement; el; el = el.parentElement) {
        if (SKIP.has(el.tagName.toUpperCase()) || el.classList?.contains("highlight")) {
          return NodeFilter.FILTER_REJECT;  // MathML elements keep lower-case tag names
        }
      }
      return NodeFilter.FILTER_ACCEPT;
    }
  });
  out.rawMath = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const m = n.textContent.match(RAW);
    if (m) {
      const i = Math.max(0, m.index - 20);
      out.rawMath.push(n.textContent.slice(i, m.index + m[0].length + 20).replace(/\s+/g, " "));
    }
  }
  out.images = [...document.images].map(img => ({
    src: img.getAttribute("src") || "", alt: img.getAttribute("alt"),
    width: img.naturalWidth, complete: img.complete,
    content: !!img.closest("article"),
  }));
  // Display equations wider than the text column (they would scroll or be clipped).
  out.wideMath = [...document.querySelectorAll("article div.math")]
    .filter(el => el.scrollWidth > el.clientWidth + 2)
    .map(el => (el.id || "") + " " +
               (el.querySelector("annotation")?.textContent || "").trim().slice(0, 50));
  // Tables the pages compute, wider than the text column.
  out.wideTables = [...document.querySelectorAll("article .cell_output table")]
    .filter(t => t.scrollWidth > t.parentElement.clientWidth + 2)
    .map(t => (t.querySelector("th")?.textContent || "").trim().slice(0, 40));
  out.codeBlocks = document.querySelectorAll("article div.highlight pre").length;
  out.copyButtons = document.querySelectorAll("article button.copybtn").length;
  out.lang = document.documentElement.lang;
  out.launch = [...document.querySelectorAll(".dropdown-launch-buttons a")].map(a => a.href);
  out.downloads = [...document.querySelectorAll(".dropdown-download-buttons a")].map(a => a.getAttribute("href"));
  return out;
}
"""

DARK_JS = r"""
async () => {
  // How legible each content image is on the dark page: an opaque image carries its own
  // background; a transparent one shows whatever is behind it.
  const lum = (css) => {
    const m = css.match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const [r, g, b, a = 1] = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return a === 0 ? null : (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
  };
  const backdrop = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const l = lum(getComputedStyle(e).backgroundColor);
      if (l !== null) return l;
    }
    return lum(getComputedStyle(document.body).backgroundColor) ?? 1;
  };
  const results = [];
  for (const img of document.querySelectorAll("article img")) {
    if (!img.naturalWidth) continue;
    const w = Math.min(img.naturalWidth, 800), h = Math.max(1, Math.round(img.naturalHeight * w / img.naturalWidth));
    const canvas = document.createElement("canvas");
    canvas.width = w; canvas.height = h;
    const ctx = canvas.getContext("2d");
    let transparent = 0, total = 0;
    try {
      ctx.drawImage(img, 0, 0, w, h);
      const data = ctx.getImageData(0, 0, w, h).data;
      for (let i = 3; i < data.length; i += 16) { total++; if (data[i] < 250) transparent++; }
    } catch (e) { results.push({src: img.getAttribute("src"), error: String(e)}); continue; }
    results.push({src: img.getAttribute("src"), transparent: transparent / Math.max(total, 1),
                  backdrop: backdrop(img)});
  }
  return {theme: document.documentElement.dataset.theme,
          page: lum(getComputedStyle(document.body).backgroundColor), images: results};
}
"""

UNOBSTRUCTED_JS = """
(el) => {
  // Visible, and what the reader sees at its centre and corners is the link itself.
  const r = el.getBoundingClientRect();
  if (r.width < 2 || r.height < 2) return false;
  const pts = [[r.left + r.width / 2, r.top + r.height / 2], [r.left + 2, r.top + 2],
               [r.right - 2, r.top + 2], [r.left + 2, r.bottom - 2], [r.right - 2, r.bottom - 2]];
  return pts.every(([x, y]) => { const hit = document.elementFromPoint(x, y); return hit && el.contains(hit); });
}
"""

FILE_NAME_ALT = re.compile(r"(^|/)[^/\s]+\.(png|jpe?g|gif|svg|webp)$", re.I)

#: What a page's first load may weigh before images (issue 35): HTML, CSS, scripts, fonts
#: (the math font included) and data fetched, as sent (the local server does not
#: compress).  The theme's stylesheet, icon fonts and Bootstrap bundle were 790 KB of it;
#: docs/_ext/posenc_assets.py trims them to what the pages use.
PAGE_WEIGHT_MAX = 600_000
#: ... and with every image the page shows (lazy ones loaded too).
PAGE_WEIGHT_ALL_MAX = 1_200_000
WEIGHED = {"document", "stylesheet", "script", "font", "fetch", "xhr"}

#: The theme's English words that a Chinese page must not show (pydata-sphinx-theme and
#: sphinx-book-theme leave them untranslated; docs/locale translates them).
THEME_ENGLISH = [
    "System Settings", "Color mode", "Light", "Dark", "Toggle primary sidebar",
    "Toggle secondary sidebar", "Repository", "Source repositories", "Show source",
    "Suggest edit", "Open an issue", "Launch on", "Launch interactive content",
    "Print to PDF", "Download this page", "Search...", "Search", "Skip to main content",
    "Back to top", "Copyright", "By the", "Main", "Page", "Contents", "previous", "next",
    "logo", "Link to this heading", "Link to this equation", "On this page",
    "Fullscreen mode", "The posenc authors",
]
#: Words a Chinese page may show outside its text: names, and what is not English.
CHROME_ALLOWED = {"English", "Binder", "Colab", "Ctrl", "K", "PDF", "ipynb", "md", "pdf", "MyST",
                  "posenc", "RoPE", "API", "ALiBi", "NTK", "YaRN", "LongRoPE", "PI"}

CHROME_WORDS_JS = """
() => {
  // The page's chrome: everything but the article's own text and the chapter titles in
  // the navigation; the words a reader sees and the tooltips and labels read aloud.
  const skip = "article.bd-article, nav.bd-docs-nav, .bd-links__title, script, style, " +
               "title, .onlyprint, #jb-print-docs-body, .bd-header-article .headerlink, " +
               "nav.page-toc, .prev-next-title";  // the book's own titles
  const found = new Set();
  const attrs = ["title", "aria-label", "placeholder", "alt", "data-bs-original-title"];
  const visit = (el) => {
    if (el.matches(skip)) return;
    for (const a of attrs) {
      const v = el.getAttribute(a);
      if (v) found.add(v.trim());
    }
    for (const n of el.childNodes) {
      if (n.nodeType === Node.TEXT_NODE && n.textContent.trim()) found.add(n.textContent.trim());
      else if (n.nodeType === Node.ELEMENT_NODE) visit(n);
    }
  };
  visit(document.body);
  // inside the article: the tooltips the theme adds to headings and equations
  for (const el of document.querySelectorAll("article a.headerlink[title]")) found.add(el.title);
  return [...found];
}
"""


def english_chrome(strings: list[str]) -> list[str]:
    """The strings of a Chinese page's chrome that are the theme's English: one of
    THEME_ENGLISH, or any Latin word outside CHROME_ALLOWED."""
    return [s for s in strings if s in THEME_ENGLISH
            or any(w not in CHROME_ALLOWED for w in re.findall(r"[A-Za-z]{2,}", s))]


@dataclass
class PageReport:
    """What the browser saw on one page; ``problems`` is empty when it passes."""

    lang: str
    page: str
    problems: list[str] = field(default_factory=list)
    info: dict = field(default_factory=dict)
    seconds: float = 0.0

    def summary(self) -> str:
        i = self.info
        if self.problems:
            return f"{self.lang}/{self.page}: FAIL " + "; ".join(self.problems)
        return (f"{self.lang}/{self.page}: ok ({self.seconds:.1f} s): "
                f"math {i.get('mjx', 0)} rendered/{i.get('math', 0)}, "
                f"images {i.get('images', 0)} loaded with alt, "
                f"dark-mode figures {i.get('dark_images', 0)} legible, "
                f"code blocks {i.get('code', 0)} with {i.get('copy', 0)} copy buttons, "
                f"launch links {len(i.get('launch', []))}, downloads {len(i.get('downloads', []))}, "
                f"switch -> {i.get('switch', '?')}")


def _switch_to_dark(page) -> bool:
    """Use the theme's own colour-mode menu to choose dark."""
    button = page.locator(".theme-switch-button:visible").first
    if button.count() == 0:
        return False
    button.click()
    choice = page.locator(".theme-change-button[data-mode='dark']:visible").first
    if choice.count() == 0:
        return False
    choice.click()
    # Move the pointer away, as a reader would: the theme opens its header menus on hover,
    # and a menu left open overlaps the article header.
    page.keyboard.press("Escape")
    page.mouse.move(5, 600)
    return page.evaluate("document.documentElement.dataset.theme") == "dark"


def check_page(context, base: str, lang: str, name: str, shots: Path | None = None,
               other_lang: str | None = None) -> PageReport:
    """Load ``base/lang/name.html`` in ``context`` and run every reader-facing check."""
    report = PageReport(lang, name)
    start = time.perf_counter()
    problems = report.problems
    console, failed, bad_status, external = [], [], [], []
    page = context.new_page()

    def route(r):
        url = r.request.url
        parsed = urlparse(url)
        if parsed.scheme in {"http", "https", "ws", "wss"} and parsed.hostname not in LOCAL_HOSTS:
            external.append(url)
            r.abort()
        else:
            r.continue_()

    page.route("**/*", route)
    # Events count until the language switch is clicked; the page it leads to is checked
    # in its own right (and leaving early aborts its pending requests).
    live = [True]
    page.on("console", lambda m: live[0] and m.type == "error" and console.append(m.text))
    page.on("pageerror", lambda e: live[0] and console.append(f"uncaught: {e}"))
    # A lazy image the page had begun to fetch when the check moved on is aborted by the
    # browser (net::ERR_ABORTED), not missing: one such image failed zh/sinusoidal once
    # under load while the file was there and the rerun passed.  Other failures count.
    page.on("requestfailed", lambda r: live[0] and not (
        r.resource_type == "image" and "ERR_ABORTED" in (r.failure or ""))
        and failed.append(r.url))
    page.on("response", lambda r: live[0] and r.status >= 400
            and bad_status.append(f"{r.status} {r.url}"))
    weights: dict[str, int] = {}

    images: dict[str, int] = {}

    def weigh(r):
        kind = r.request.resource_type
        if live[0] and (kind in WEIGHED or kind == "image") and r.status < 400:
            size = r.headers.get("content-length")
            try:
                (weights if kind in WEIGHED else images)[r.url] = (
                    int(size) if size else len(r.body()))
            except Exception:  # a response the page dropped before it was read
                pass

    page.on("response", weigh)
    try:
        url = f"{base}/{lang}/{name}.html"
        page.goto(url, wait_until="load")
        page.evaluate(SETTLE_JS)
        if page.locator("article div.highlight pre").count():
            try:
                page.wait_for_selector("article button.copybtn", state="attached", timeout=3000)
            except Exception:
                pass
        seen = page.evaluate(INSPECT_JS)
        info = report.info
        info.update(math=seen["math"], mjx=seen["mjx"], code=seen["codeBlocks"],
                    copy=seen["copyButtons"], images=len(seen["images"]),
                    launch=seen["launch"], downloads=seen["downloads"])

        expected_lang = LANGS[lang]
        if seen["lang"] != expected_lang:
            problems.append(f"<html lang> is {seen['lang']!r}, expected {expected_lang!r}")
        # Math rendered, no raw TeX visible.
        if seen["math"] and not seen["mjx"]:
            problems.append(f"{seen['math']} math elements but none drawn as MathML")
        elif seen["unrendered"]:
            problems.append(f"unrendered math: {seen['unrendered'][:3]}")
        if seen["wideMath"]:
            problems.append(f"display math wider than the text column: {seen['wideMath'][:3]}")
        if seen["wideTables"]:
            problems.append(f"computed table wider than the text column: {seen['wideTables'][:3]}")
        if seen["rawMath"]:
            problems.append(f"raw TeX in the text: {seen['rawMath'][:3]}")
        # Images loaded, with real alt text.
        for img in seen["images"]:
            if not img["complete"] or img["width"] == 0:
                problems.append(f"image not loaded: {img['src']}")
            alt = (img["alt"] or "").strip()
            if not alt:
                problems.append(f"image without alt text: {img['src']}")
            elif alt == img["src"] or FILE_NAME_ALT.search(alt):
                problems.append(f"image alt is a file name: {alt}")
        # Copy buttons on code.
        if seen["codeBlocks"] and not seen["copyButtons"]:
            problems.append(f"{seen['codeBlocks']} code blocks but no copy button")
        # First load: everything but the images, as the server sent it (uncompressed).
        total = sum(weights.values())
        info["weight"] = total
        if total > PAGE_WEIGHT_MAX:
            heaviest = sorted(weights.items(), key=lambda kv: -kv[1])[:3]
            problems.append(
                f"first load {total / 1e6:.2f} MB before images (limit "
                f"{PAGE_WEIGHT_MAX / 1e6:g} MB): "
                + ", ".join(f"{url.rsplit('/', 1)[-1].split('?')[0]} {n // 1000} KB"
                            for url, n in heaviest))
        info["weight_all"] = total + sum(images.values())
        if info["weight_all"] > PAGE_WEIGHT_ALL_MAX:
            heaviest = sorted(images.items(), key=lambda kv: -kv[1])[:3]
            problems.append(
                f"{info['weight_all'] / 1e6:.2f} MB with its images (limit "
                f"{PAGE_WEIGHT_ALL_MAX / 1e6:g} MB): "
                + ", ".join(f"{url.rsplit('/', 1)[-1]} {n // 1000} KB" for url, n in heaviest))
        # A favicon the site serves (else every page asks for /favicon.ico: a 404).
        icon = page.evaluate("document.querySelector('link[rel~=\"icon\"]')?.href || null")
        if not icon:
            problems.append("no favicon link")
        elif page.request.get(icon).status != 200:
            problems.append(f"favicon {icon} is not served")
        # The theme's own words speak the page's language.
        if lang == "zh":
            english = english_chrome(page.evaluate(CHROME_WORDS_JS))
            if english:
                problems.append(f"English theme words on a Chinese page: {english[:6]}")

        if shots is not None:
            target = shots / lang / f"{name}.png"
            target.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(target), full_page=full_page_shots())

        # Dark mode: the theme's switch works and figures stay legible.
        if not _switch_to_dark(page):
            problems.append("the colour-mode menu does not switch to dark")
        else:
            dark = page.evaluate(DARK_JS)
            if dark["page"] is not None and dark["page"] > 0.5:
                problems.append("dark mode left the page background light")
            for img in dark["images"]:
                if "error" in img:
                    problems.append(f"cannot read image pixels {img['src']}: {img['error']}")
                elif img["transparent"] > 0.01 and img["backdrop"] < 0.5:
                    problems.append(
                        f"figure {img['src']} is {img['transparent']:.0%} transparent on a "
                        f"dark background in dark mode")
            info["dark_images"] = len(dark["images"])

        # The language switch leads to the same page in the other language.
        other = other_lang or next(code for code in LANGS if code != lang)
        link = page.locator("a.posenc-lang-switch").first
        if link.count() == 0:
            problems.append("no language switch link")
        else:
            page.evaluate("window.scrollTo(0, 0)")
            if not link.evaluate(UNOBSTRUCTED_JS):
                problems.append("the language switch is hidden or covered by another element")
            live[0] = False
            with page.expect_navigation(wait_until="domcontentloaded"):
                link.evaluate("el => el.click()")  # where it leads, even if covered
            landed = urlparse(page.url).path
            want = f"/{other}/{name}.html"
            got_lang = page.evaluate("document.documentElement.lang")
            info["switch"] = landed
            if landed != want:
                problems.append(f"language switch went to {landed}, expected {want}")
            if got_lang != LANGS[other]:
                problems.append(f"language switch landed on <html lang={got_lang!r}>")
    except Exception as exc:  # a timeout or a crash is a failed check, with the reason
        problems.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    finally:
        page.close()

    if external:
        problems.append(f"{len(external)} request(s) to other hosts: {sorted(set(external))[:3]}")
    blocked = set(external)
    failed = [u for u in failed if u not in blocked]
    if failed:
        problems.append(f"failed requests: {failed[:3]}")
    if bad_status:
        problems.append(f"HTTP errors: {bad_status[:3]}")
    # Chromium logs each blocked or missing resource as a console error too; those are
    # already reported above.
    console = [c for c in console if "Failed to load resource" not in c]
    if console:
        problems.append(f"console errors: {console[:3]}")
    report.seconds = time.perf_counter() - start
    return report


def search(context, base: str, lang: str, query: str, timeout_ms: int = 20000) -> list[str]:
    """Run the site's own search page for ``query``; return the result links."""
    from urllib.parse import quote

    page = context.new_page()
    try:
        page.goto(f"{base}/{lang}/search.html?q={quote(query)}", wait_until="load")
        try:
            page.wait_for_selector("#search-results ul.search li", timeout=timeout_ms)
        except Exception:
            # Finished with no results (the summary is there) or never finished.
            page.wait_for_selector("#search-results p.search-summary", timeout=timeout_ms)
        return page.eval_on_selector_all(
            "#search-results ul.search li a", "as => as.map(a => a.getAttribute('href'))")
    finally:
        page.close()


SNIPPETS_JS = """
() => [...document.querySelectorAll("#search-results ul.search li")].map(li => ({
  href: li.querySelector("a")?.getAttribute("href") || "",
  snippet: (li.querySelector("p.context")?.textContent || "").trim(),
}))
"""


def search_results(context, base: str, lang: str, query: str,
                   timeout_ms: int = 20000) -> list[dict]:
    """The site's search page for ``query``: each result's link and snippet, in order,
    once the snippets of the first results have arrived."""
    from urllib.parse import quote

    page = context.new_page()
    try:
        page.goto(f"{base}/{lang}/search.html?q={quote(query)}", wait_until="load")
        page.wait_for_selector("#search-results ul.search li", timeout=timeout_ms)
        # Snippets are cut from each result's fetched page; wait for the first few.
        page.wait_for_function(
            "() => { const li = [...document.querySelectorAll('#search-results ul.search li')]"
            ".slice(0, 5); return li.length && li.every(x => x.querySelector('p.context, a ~ span')); }",
            timeout=timeout_ms)
        return page.evaluate(SNIPPETS_JS)
    finally:
        page.close()


# -- Reading at every width ------------------------------------------------------------

WIDTHS = (390, 900, 1280)  # a phone, a tablet, a laptop
#: A page reads on a phone in at most this many screens (390 x 844 px): a longer chapter
#: is split into section pages, each its own page and notebook.
PHONE = {"width": 390, "height": 844}
PHONE_SCREENS_MAX = 25
#: Pages measured but not held to PHONE_SCREENS_MAX, each with the reason.
LONG_PAGES = {
    "experiments": "the chapter is being rebuilt from scratch, in section pages",
}
#: Assets a page must not load: Font Awesome's 1.56 MB script draws icons that the
#: theme's stylesheet already draws from the icon web fonts; Bootstrap's 81 KB bundle is
#: replaced by docs/_static/posenc-bootstrap.js (docs/_ext/posenc_assets.py).
HEAVY_ASSETS = ("fontawesome.js", "scripts/bootstrap.js")
NARROW = 992  # below this the theme shows the sidebars as dialogs

OVERFLOW_JS = r"""
() => {
  // The page itself scrolls sideways when the document is wider than the viewport.
  const doc = document.documentElement;
  const extra = doc.scrollWidth - doc.clientWidth;
  if (extra <= 0) return null;
  // Name the culprits: the outermost elements whose right edge passes the viewport,
  // leaving out what sits inside a box that scrolls or clips (a code block, a wide
  // equation's scroll box): those do not move the page.
  const w = doc.clientWidth, out = [];
  const clipped = (el) => {
    for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
      const o = getComputedStyle(e).overflowX;
      if (o !== "visible" && o !== "clip" || o === "clip") return true;
    }
    return false;
  };
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (!r.width || r.right <= w + 1) continue;
    const p = el.parentElement.getBoundingClientRect();
    if (p.right > w + 1 || clipped(el)) continue;
    const text = (el.textContent || "").trim().replace(/\s+/g, " ").slice(0, 40);
    out.push(`${el.tagName.toLowerCase()}.${[...el.classList].join(".")} "${text}" ` +
             `(${Math.round(r.right)} px)`);
  }
  return {extra, culprits: out.slice(0, 4)};
}
"""


SCROLL_CUE_JS = r"""
() => {
  // Every box in the article that scrolls sideways (a display equation, a table, a code
  // line) shows the reader that it does: posenc.js marks it, posenc.css fades its edge.
  const SCROLLERS = "div.math, .pst-scrollable-table-container, " +
                    ".cell_output .output.text_html, div.highlight pre";
  const missing = [];
  let scrolling = 0;
  for (const el of document.querySelectorAll(`article :is(${SCROLLERS})`)) {
    if (el.scrollWidth <= el.clientWidth + 1) continue;
    scrolling++;
    const style = getComputedStyle(el);
    const mask = style.maskImage || style.webkitMaskImage || "none";
    // an equation also says so in words under it
    const hint = el.matches("div.math") ? el.nextElementSibling : null;
    const said = !el.matches("div.math") || (hint && hint.matches("p.posenc-scroll-hint")
                                              && hint.getClientRects().length > 0);
    const cue = el.classList.contains("posenc-scrolls") && mask !== "none" && said;
    const focusable = el.tabIndex >= 0;
    if (!cue || !focusable) {
      const what = (el.querySelector("annotation")?.textContent || el.textContent || "")
        .trim().replace(/\s+/g, " ").slice(0, 40);
      missing.push(`${el.tagName.toLowerCase()} "${what}"` + (cue ? " (not focusable)" : ""));
    }
  }
  return {scrolling, missing};
}
"""


def _opens(page, toggle_selector: str, dialog_id: str, link_selector: str) -> str | None:
    """Click the visible toggle; the dialog must open showing links; Escape closes it.

    Returns a problem or None.
    """
    toggle = page.locator(f"{toggle_selector}:visible")
    if toggle.count() == 0:
        return f"no visible {toggle_selector} button"
    toggle.first.click()
    try:
        page.wait_for_function(f"document.getElementById('{dialog_id}')?.open === true",
                               timeout=3000)
    except Exception:
        return f"clicking {toggle_selector} does not open #{dialog_id}"
    links = page.locator(f"#{dialog_id} {link_selector}:visible").count()
    if links == 0:
        return f"#{dialog_id} opened without visible links ({link_selector})"
    page.keyboard.press("Escape")
    try:
        page.wait_for_function(f"!document.getElementById('{dialog_id}').open", timeout=3000)
    except Exception:
        return f"Escape does not close #{dialog_id}"
    return None


def check_navigation(page, width: int) -> list[str]:
    """The chapter list and the page contents open at this width."""
    problems = []
    if width < NARROW:
        problem = _opens(page, ".primary-toggle", "pst-primary-sidebar-modal",
                         "nav.bd-docs-nav a.reference")
        if problem:
            problems.append(f"chapter list at {width} px: {problem}")
        has_toc = page.locator("#pst-secondary-sidebar nav.page-toc a").count() > 0
        if has_toc:
            problem = _opens(page, ".secondary-toggle", "pst-secondary-sidebar-modal",
                             "nav.page-toc a")
            if problem:
                problems.append(f"page contents at {width} px: {problem}")
    else:
        # Wide: the chapter list is on screen, and the toggle hides and shows it again.
        sidebar = page.locator("#pst-primary-sidebar nav.bd-docs-nav")
        if not sidebar.is_visible():
            problems.append(f"chapter list not shown at {width} px")
        toggle = page.locator(".primary-toggle:visible")
        if toggle.count() == 0:
            problems.append(f"no visible sidebar toggle at {width} px")
        else:
            # Wait for the sidebar to slide out and back, no longer than that takes.
            toggle.first.click()
            try:
                sidebar.wait_for(state="hidden", timeout=2000)
                hidden = True
            except Exception:
                hidden = False
            toggle.first.click()
            try:
                sidebar.wait_for(state="visible", timeout=2000)
            except Exception:
                pass
            if not hidden or not sidebar.is_visible():
                problems.append(f"the sidebar toggle does not hide and show the chapter list "
                                f"at {width} px")
    return problems


#: Words (and code) in a table cell that the browser broke across lines: a word in one
#: piece spans a single line box, so its range's rectangles share one top.  A break
#: after a hyphen or a slash ("NTK-|aware") is a break between words.
TABLE_WORDS_JS = r"""
() => {
  const broken = [];
  for (const cell of document.querySelectorAll("article table td, article table th")) {
    if (!cell.getClientRects().length) continue;
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/[^\s\u3000-\u9fff\uff00-\uffef\-\/]+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width > 0)
                             .map(r => Math.round(r.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
    for (const code of cell.querySelectorAll("code")) {
      const tops = new Set([...code.getClientRects()].filter(r => r.width > 0)
                           .map(r => Math.round(r.top)));
      if (tops.size > 1) broken.push(code.textContent);
    }
  }
  return [...new Set(broken)];
}
"""


def check_page_length(page, name: str, report: PageReport) -> list[str]:
    """At a phone's size, once its figures are in, the page is at most
    :data:`PHONE_SCREENS_MAX` screens long (its height over the screen's)."""
    screens = page.evaluate("document.documentElement.scrollHeight") / PHONE["height"]
    report.info["phone_screens"] = round(screens, 1)
    if screens <= PHONE_SCREENS_MAX or name in LONG_PAGES:
        return []
    return [f"{screens:.1f} phone screens long at {PHONE['width']} px (at most "
            f"{PHONE_SCREENS_MAX}: split the chapter into section pages)"]


def check_reading(context, base: str, lang: str, name: str, width: int,
                  shots: Path | None = None) -> PageReport:
    """Load a page at ``width`` px: no sideways scroll, light then dark; then the
    navigation (last: opening the sidebars starts transitions that move what the
    measurements read, and the colour mode does not change how the sidebars open)."""
    report = PageReport(lang, f"{name}@{width}")
    start = time.perf_counter()
    problems = report.problems
    console = []
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": 844 if width < NARROW else 900})
    page.on("console", lambda m: m.type == "error" and console.append(m.text))
    page.on("pageerror", lambda e: console.append(f"uncaught: {e}"))
    heavy = []
    page.on("request", lambda r: any(name in r.url for name in HEAVY_ASSETS)
            and heavy.append(r.url.rsplit("/", 1)[-1]))
    try:
        page.goto(f"{base}/{lang}/{name}.html", wait_until="load")
        page.evaluate(SETTLE_JS)
        if heavy:
            problems.append(f"loads {sorted(set(heavy))} (the book does without)")
        if width == PHONE["width"]:
            problems.extend(check_page_length(page, name, report))
        for mode in ("light", "dark"):
            if mode == "dark":
                page.evaluate("document.documentElement.dataset.theme = 'dark';"
                              "document.documentElement.dataset.mode = 'dark'")
                # measure the page a reader sees after the switch: fonts in and two
                # frames drawn (ResizeObservers have run)
                page.evaluate(SETTLE_JS)
                page.evaluate("() => new Promise(done => requestAnimationFrame("
                              "() => requestAnimationFrame(done)))")
            over = page.evaluate(OVERFLOW_JS)
            if over:
                problems.append(f"the page scrolls sideways by {over['extra']} px at {width} px "
                                f"({mode}): {', '.join(over['culprits'])}")
            if mode == "light":
                split = page.evaluate(TABLE_WORDS_JS)
                if split:
                    problems.append(f"{len(split)} word(s) in tables broken across lines at "
                                    f"{width} px: {split[:5]}")
            cue = page.evaluate(SCROLL_CUE_JS)
            report.info["scrollers"] = cue["scrolling"]
            if cue["missing"]:
                problems.append(f"{len(cue['missing'])} box(es) scroll sideways at {width} px "
                                f"with no cue ({mode}): {cue['missing'][:3]}")
            if shots is not None:
                target = shots / str(width) / mode / lang / f"{name}.png"
                target.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(target), full_page=False)
            if mode == "light":
                fonts, seen = check_figure_fonts(page, width)
                problems.extend(fonts)
                report.info["figures"] = seen
        problems.extend(check_navigation(page, width))
    except Exception as exc:
        problems.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    finally:
        page.close()
    console = [c for c in console if "Failed to load resource" not in c]
    if console:
        problems.append(f"console errors at {width} px: {console[:3]}")
    report.seconds = time.perf_counter() - start
    return report


# -- The language switch keeps the reader's place --------------------------------------

SECTION_ANCHORS_JS = """
() => {
  const link = document.querySelector("a.posenc-lang-switch");
  const shared = new Set((link?.dataset.posencAnchors || "").split(" ").filter(Boolean));
  return [...document.querySelectorAll("article section[id]")]
    .map(s => s.id).filter(id => shared.has(id));
}
"""


def section_anchors(html: str) -> list[str]:
    """The shared section anchors a built page's language switch carries."""
    m = re.search(r'data-posenc-anchors="([^"]*)"', html)
    shared = set(m.group(1).split()) if m else set()
    return [i for i in re.findall(r'<section\b[^>]*?\sid="([^"]+)"', html) if i in shared]


def _follow_switch(page) -> None:
    # A click as the browser delivers it, without Playwright's scrolling the link into
    # view first (which moved the page under a sticky header and so changed the place).
    link = page.locator("a.posenc-lang-switch").first
    with page.expect_navigation(wait_until="load"):
        link.evaluate("el => el.click()")


def check_switch_keeps_place(context, base: str, lang: str, name: str) -> PageReport:
    """From a section in the URL, and from a section scrolled to, the switch lands on the
    same section of the other language's page."""
    report = PageReport(lang, f"{name} (switch keeps the place)")
    problems = report.problems
    other = next(code for code in LANGS if code != lang)
    page = context.new_page()
    try:
        # the sections to start from, read from the page as served (the browser finds the
        # same ones on it: SECTION_ANCHORS_JS, test_browser.py holds the two together)
        anchors = section_anchors(context.request.get(f"{base}/{lang}/{name}.html").text())
        if len(anchors) < 2:
            problems.append(f"the switch carries {len(anchors)} shared section anchor(s)")
            return report
        by_url, by_scroll = anchors[len(anchors) // 2], anchors[len(anchors) // 3]
        # 1. The section named in the URL.
        page.goto(f"{base}/{lang}/{name}.html#{by_url}", wait_until="load")
        page.evaluate(SETTLE_JS)
        _follow_switch(page)
        landed = urlparse(page.url)
        if landed.path != f"/{other}/{name}.html" or landed.fragment != by_url:
            problems.append(f"from #{by_url} the switch went to {landed.path}#{landed.fragment}")
        elif not page.evaluate(f"!!document.getElementById({by_url!r})"):
            problems.append(f"#{by_url} is missing on /{other}/{name}.html")
        # 2. The section the reader scrolled to (no anchor in the URL).
        page.goto(f"{base}/{lang}/{name}.html", wait_until="load")
        page.evaluate(SETTLE_JS)
        page.evaluate(f"document.getElementById({by_scroll!r}).scrollIntoView()")
        page.wait_for_timeout(100)
        _follow_switch(page)
        landed = urlparse(page.url)
        if landed.fragment != by_scroll:
            problems.append(f"scrolled to #{by_scroll}, the switch went to "
                            f"{landed.path}#{landed.fragment}")
        # 3. At the top of the page, the switch leads to the top of the other page.
        page.goto(f"{base}/{lang}/{name}.html", wait_until="load")
        _follow_switch(page)
        if urlparse(page.url).fragment:
            problems.append(f"from the top the switch went to {page.url}")
    except Exception as exc:
        problems.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    finally:
        page.close()
    return report


# -- Words in figures ------------------------------------------------------------------

#: The smallest size, in CSS pixels, at which a figure may draw a word in the page, at
#: every width (a phone gets the figure's phone variant, posenc_figures) ...
FIGURE_FONT_MIN_PX = 11.0
#: ... and in the enlarged view the "Enlarge" button opens (posenc.js).
FIGURE_FONT_MIN_PX_ENLARGED = 11.0
MIN_FONT_KEY = "posenc-min-font-pt"  # posenc.figures._style.MIN_FONT_KEY

FIGURE_IMAGES_JS = """
() => [...document.querySelectorAll("article img")].filter(img => img.naturalWidth)
  .map(img => ({src: img.currentSrc, alt: (img.alt || "").slice(0, 50),
                shown: img.getBoundingClientRect().width, natural: img.naturalWidth}))
"""


def png_font_info(data: bytes) -> tuple[float, float] | None:
    """(smallest font in points, pixels per inch) that a book figure carries (a PNG's text
    chunk, or the XMP of the WebP the site serves), else None."""
    import io

    from PIL import Image

    try:
        image = Image.open(io.BytesIO(data))
    except Exception:
        return None
    text = getattr(image, "text", {}) or {}
    if image.format == "WEBP" and image.info.get("xmp"):
        # the site serves figures as WebP, the PNG's text chunks and dpi in its XMP
        # (docs/_ext/posenc_assets.py: figure_xmp)
        xmp = image.info["xmp"]
        xmp = xmp.decode() if isinstance(xmp, bytes) else xmp
        text = dict(re.findall(r'posenc:([\w-]+)="([^"]*)"', xmp))
        if MIN_FONT_KEY in text and "dpi" in text:
            return float(text[MIN_FONT_KEY]), float(text["dpi"])
        return None
    if MIN_FONT_KEY not in text or "dpi" not in image.info:
        return None
    return float(text[MIN_FONT_KEY]), float(image.info["dpi"][0])


def rendered_font_px(min_pt: float, dpi: float, shown: float, natural: float) -> float:
    """CSS pixels of a ``min_pt`` font in a ``dpi`` PNG drawn ``shown`` px wide."""
    return min_pt / 72.0 * dpi * shown / natural


ZOOM_JS = """
async (src) => {
  const img = [...document.querySelectorAll("article img")].find(i => i.currentSrc === src);
  if (!img || !img.classList.contains("posenc-zoomable")) return null;
  const target = img.closest("a.image-reference") || img;
  const button = target.nextElementSibling;
  if (!button || !button.matches("button.posenc-enlarge")) return {button: false};
  const box = button.getBoundingClientRect();
  const style = getComputedStyle(button);
  if (button.hidden || box.width < 24 || box.height < 24 || style.visibility !== "visible"
      || Number(style.opacity) === 0) return {button: false};
  button.click();
  const dialog = document.querySelector("dialog.posenc-zoom");
  if (!dialog || !dialog.open) return {button: true, open: false};
  const big = dialog.querySelector("img");
  try { await big.decode(); } catch (e) { /* measured as it is */ }
  return {button: true, open: true, shown: big.getBoundingClientRect().width,
          natural: big.naturalWidth, src: big.currentSrc || big.src};
}
"""


#: URL -> png_font_info of the figure there (the served files do not change in a run).
_FONT_INFO: dict[str, tuple[float, float] | None] = {}


def _font_info(page, src: str) -> tuple[float, float] | None:
    if src not in _FONT_INFO:  # each figure read once for all widths
        _FONT_INFO[src] = png_font_info(page.request.get(src).body())
    return _FONT_INFO[src]


def check_figure_fonts(page, width: int) -> tuple[list[str], list[dict]]:
    """Each figure's smallest word as drawn at this width, from the figure's own record
    of its smallest font (a PNG text chunk) and the width the browser drew it at.

    Every figure draws its words at FIGURE_FONT_MIN_PX or more, at every width.  A
    figure shown smaller than drawn, or as its phone variant, has a visible "Enlarge"
    button whose view draws them at FIGURE_FONT_MIN_PX_ENLARGED or more.
    """
    problems, seen = [], []
    for img in page.evaluate(FIGURE_IMAGES_JS):
        info = _font_info(page, img["src"])
        name = img["src"].rsplit("/", 1)[-1][:12]
        if info is None:
            problems.append(f"figure {name} carries no font size (not drawn by posenc.figures?)")
            continue
        px = rendered_font_px(*info, img["shown"], img["natural"])
        row = {**img, "font_px": px, "min_pt": info[0], "dpi": info[1]}
        seen.append(row)
        if px < FIGURE_FONT_MIN_PX - 0.05:
            problems.append(f"figure {name} (\"{img['alt'][:40]}\") draws words at {px:.1f} px "
                            f"at {width} px (minimum {FIGURE_FONT_MIN_PX:g})")
        zoom = page.evaluate(ZOOM_JS, img["src"])
        if zoom is None:  # shown as drawn: nothing to enlarge
            continue
        if not zoom["button"]:
            problems.append(f"figure {name} is shown smaller than drawn at {width} px with no "
                            f"visible Enlarge button")
            continue
        if not zoom["open"]:
            problems.append(f"the Enlarge button of figure {name} at {width} px opens nothing")
            continue
        page.keyboard.press("Escape")
        big_info = _font_info(page, zoom["src"])
        big = rendered_font_px(*big_info, zoom["shown"], zoom["natural"]) if big_info else 0.0
        row["enlarged_px"] = big
        if big < FIGURE_FONT_MIN_PX_ENLARGED - 0.05:
            problems.append(f"figure {name} enlarged at {width} px draws words at {big:.1f} px "
                            f"(minimum {FIGURE_FONT_MIN_PX_ENLARGED:g})")
        if page.evaluate("document.querySelector('dialog.posenc-zoom')?.open"):
            problems.append(f"Escape does not close the enlarged figure {name}")
    return problems, seen
