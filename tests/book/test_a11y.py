"""Accessibility of every built page, checked by axe-core in Chromium.

axe-core is npm's package, pinned in ``tests/a11y/package.json`` (its lock file beside
it) and installed by ``npm ci --prefix tests/a11y`` (``nox -s tests`` runs that); the
test injects ``axe.min.js`` from that folder into each page, so nothing is fetched from
another host.  Each page of both languages is checked at 1280 px in light mode; the pages
of :data:`BOTH_MODES` (a chapter of each kind: prose and figures, interactive figures,
long tables, results, the index and search) are checked again in dark mode (the theme's
own menu) and at 390 px in dark mode (the phone's header), which keeps CI's time in
bounds (axe takes seconds a page); a critical or serious violation fails the page.  Moderate and minor ones are listed in
``<screenshots>/a11y.txt`` but do not fail it.

``test_axe_finds_what_it_should`` runs the same check on a page with the markup this
site had before (a nameless ``<summary>``, a button whose label leaves out its visible
text, ``aria-valuetext`` on a ``<select>``) and requires axe to report each.
"""

from __future__ import annotations

import os
import re
import shutil

import pytest

from browser_site import (
    ROOT,
    _switch_to_dark,
    discover_pages,
    new_context,
    per_process,
    screenshot_dir,
    serve,
    site_dir,
    skip_or_fail,
)

pytestmark = pytest.mark.browser

AXE = ROOT / "tests" / "a11y" / "node_modules" / "axe-core" / "axe.min.js"
#: What fails a page.
FAILING = {"critical", "serious"}
PAGES = discover_pages(site_dir()) or [("en", "index")]
#: Pages checked in dark mode at 1280 and 390 px too (both languages).
BOTH_MODES = {"index", "rope", "long-context", "models", "experiments", "search"}
#: The site's own pages besides the chapters.
EXTRA = [(lang, name) for lang in ("en", "zh") for name in ("genindex", "search")]

RUN_JS = """
async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({target: n.target.join(" "), html: n.html.slice(0, 160),
                              why: (n.failureSummary || "").replace(/\\s+/g, " ").slice(0, 240)}))
  }));
}
"""


def axe_source() -> str:
    if not AXE.is_file():
        skip_or_fail(f"{AXE} is missing: npm ci --prefix tests/a11y")
    return AXE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def axe() -> str:
    return axe_source()


@pytest.fixture(scope="module")
def log(site):
    lines: list[str] = []
    yield lines
    if lines:
        out = screenshot_dir(site)
        out.mkdir(parents=True, exist_ok=True)
        (out / per_process("a11y.txt")).write_text("\n".join(lines) + "\n", encoding="utf-8")


def audit(page, axe: str) -> list[dict]:
    """axe-core's violations on the page as it is now."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.add_script_tag(content=axe)
    # the colour mode's transitions end before colours are measured
    page.wait_for_timeout(400)
    return page.evaluate(RUN_JS)


def check_a11y(context, base: str, lang: str, name: str, axe: str) -> dict[str, list[dict]]:
    """The violations of one page: light at 1280 px; for :data:`BOTH_MODES`, also dark
    at 1280 px and dark at 390 px."""
    found = {}
    page = context.new_page()
    try:
        page.goto(f"{base}/{lang}/{name}.html", wait_until="load")
        found["light 1280"] = audit(page, axe)
        if name not in BOTH_MODES:
            return found
        if not _switch_to_dark(page):
            raise AssertionError(f"{lang}/{name}: the colour-mode menu does not switch to dark")
        found["dark 1280"] = audit(page, axe)
        page.set_viewport_size({"width": 390, "height": 844})
        found["dark 390"] = audit(page, axe)
    finally:
        page.close()
    return found


def failures(found: dict[str, list[dict]]) -> list[str]:
    return [f"{where}: {v['impact']} {v['id']} ({v['help']}) at "
            + "; ".join(f"{n['target']}: {n['why']}" for n in v["nodes"][:3])
            for where, violations in found.items() for v in violations
            if v["impact"] in FAILING]


@pytest.mark.parametrize(("lang", "name"), PAGES + EXTRA,
                         ids=[f"{lang}/{name}" for lang, name in PAGES + EXTRA])
def test_no_serious_accessibility_violation(lang, name, base, context, axe, log):
    found = check_a11y(context, base, lang, name, axe)
    for where, violations in found.items():
        log.append(f"{lang}/{name} {where}: " + (", ".join(
            f"{v['impact']} {v['id']} x{len(v['nodes'])}" for v in violations) or "none"))
    bad = failures(found)
    assert not bad, f"{lang}/{name}:\n" + "\n".join(bad)


BEFORE = """
<div id="as-it-was">
  <ul><li><a href="api.html">API reference</a><details><summary><span class="toctree-toggle"
  role="presentation"><i class="fa-solid fa-chevron-down"></i></span></summary>
  <ul><li><a href="api-torch.html">API: torch</a></li></ul></details></li></ul>
  <button class="btn" aria-label="Search"><span>Search</span> <kbd>Ctrl</kbd>+<kbd>K</kbd></button>
  <label for="as-it-was-base">base</label>
  <select id="as-it-was-base" aria-valuetext="10000"><option>100</option><option>10000</option></select>
</div>
"""


def test_axe_finds_what_it_should(site, browser, axe, tmp_path):
    """The check bites: the markup axe reported on this site before its fixes fails."""
    (tmp_path / "en").mkdir()
    os.symlink(site / "en" / "_static", tmp_path / "en" / "_static")
    shutil.copy(site / "en" / "searchindex.js", tmp_path / "en" / "searchindex.js")
    html = (site / "en" / "index.html").read_text(encoding="utf-8")
    html, n = re.subn(r"(<article[^>]*>)", r"\1" + BEFORE, html, count=1)
    assert n == 1, "no <article> in en/index.html"
    (tmp_path / "en" / "before.html").write_text(html, encoding="utf-8")
    ctx = new_context(browser)
    try:
        with serve(tmp_path) as url:
            text = "\n".join(failures(check_a11y(ctx, url, "en", "before", axe)))
    finally:
        ctx.close()
    for rule in ("summary-name", "label-content-name-mismatch", "aria-allowed-attr"):
        assert rule in text, f"axe did not report {rule}:\n{text}"
