"""The interactive figures and drawn diagrams of the built site, in Chromium.

For each chapter with interactive figures, in both languages, at a phone's and a laptop's
width: every figure builds (its data is in the page: no request leaves the site), each
control is reached with Tab from the figure's title, moving it with the keyboard redraws
the figure, each control has a <label> in the page's language, words are drawn at 11 px
or more, nothing overflows the column, and dark mode turns the ink light.  The RoPE
pair figure's one browser-side formula (the dot product of the two shown 2-vectors) is
compared with posenc at sampled settings.  Screenshots of each figure go to
``<screenshots>/interactive/<width>/<mode>/<lang>/``.
"""

from __future__ import annotations

from urllib.parse import urlparse

import numpy as np
import pytest

from browser_site import LOCAL_HOSTS, new_context, screenshot_dir

pytestmark = pytest.mark.browser

#: page -> the kinds of interactive figure on it, in order
FIGURES = {
    "sinusoidal-reading": ["sinusoidal"],
    "rope-scores": ["rope_pair", "decay"],
    "lc-ramps": ["long_context"],
    "other-tables": ["t5"],
    "other-biases": ["alibi"],
    "multidim-video": ["mrope"],
}
#: page -> number of drawn diagrams on it
DIAGRAMS = {"naive-encodings": 1, "rope-rotation": 1, "lc-ramps": 1, "other-tables": 1}
WIDTHS = (390, 1280)
MIN_PX = 11.0

FONT_JS = """
(root) => {
  // the smallest word as drawn: font size times the SVG's scale on the page
  let least = Infinity;
  for (const svg of root.querySelectorAll("svg")) {
    const vb = svg.viewBox.baseVal, shown = svg.getBoundingClientRect().width;
    const k = vb && vb.width ? shown / vb.width : 1;
    for (const t of svg.querySelectorAll("text")) {
      if (!t.textContent.trim()) continue;
      least = Math.min(least, parseFloat(getComputedStyle(t).fontSize) * k);
    }
  }
  return least;
}
"""

INK_JS = """
(root) => {
  const lum = (css) => {
    const m = css.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const [r, g, b] = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
  };
  const t = root.querySelector("svg text.pi-tick") || root.querySelector("svg text");
  let bg = null;
  for (let e = root; e && bg === null; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor;
    if (!/rgba\\(0, 0, 0, 0\\)|transparent/.test(c)) bg = lum(c);
  }
  return {ink: lum(getComputedStyle(t).fill), paper: bg};
}
"""


def _open(browser, base, lang, page, width):
    context = new_context(browser)
    tab = context.new_page()
    tab.set_viewport_size({"width": width, "height": 900})
    external, errors = [], []

    def route(r):
        if urlparse(r.request.url).hostname not in LOCAL_HOSTS:
            external.append(r.request.url)
            r.abort()
        else:
            r.continue_()

    tab.route("**/*", route)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("console", lambda m: m.type == "error" and errors.append(m.text))
    tab.on("requestfailed", lambda r: errors.append(f"failed {r.url}"))
    tab.goto(f"{base}/{lang}/{page}.html", wait_until="load")
    return context, tab, external, errors


def _change_with_keyboard(tab, control):
    """Move a control one step with the keyboard; return True if the figure redrew."""
    fig = control.locator("xpath=ancestor::div[contains(@class,'posenc-ifig')]")
    plot = fig.locator(".posenc-ifig-plot")
    before = plot.inner_html()
    control.focus()
    tag = control.evaluate("e => e.tagName")
    at_end = control.evaluate(
        "e => e.tagName === 'SELECT' ? e.selectedIndex === e.options.length - 1"
        " : Number(e.value) === Number(e.max)")
    tab.keyboard.press("ArrowLeft" if at_end and tag == "INPUT" else
                       "ArrowUp" if at_end else "ArrowRight" if tag == "INPUT" else "ArrowDown")
    tab.wait_for_timeout(50)
    return plot.inner_html() != before


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("page", sorted(FIGURES))
def test_interactive_figures(page, lang, width, site, base, browser):
    context, tab, external, errors = _open(browser, base, lang, page, width)
    problems = []
    shots = screenshot_dir(site) / "interactive" / str(width)
    try:
        tab.wait_for_function(
            f"document.querySelectorAll('div.posenc-ifig[data-ready]').length"
            f" === {len(FIGURES[page])}", timeout=10000)
        figs = tab.locator("div.posenc-ifig")
        kinds = [figs.nth(i).get_attribute("data-kind") for i in range(figs.count())]
        assert kinds == FIGURES[page]
        for i, kind in enumerate(kinds):
            fig = figs.nth(i)
            fig.scroll_into_view_if_needed()
            name = f"{kind}@{width}"
            if fig.locator(".posenc-ifig-nojs").count():
                problems.append(f"{name}: the no-JS note is still shown")
            svg = fig.locator(".posenc-ifig-plot svg")
            if svg.count() != 1 or svg.bounding_box()["height"] < 100:
                problems.append(f"{name}: no drawing")
                continue
            over = fig.evaluate("e => [...e.querySelectorAll('*')].some(c =>"
                                " c.getBoundingClientRect().right > e.getBoundingClientRect().right + 1)")
            if over:
                problems.append(f"{name}: something is wider than the figure")
            least = fig.evaluate(FONT_JS)
            if least < MIN_PX - 0.05:
                problems.append(f"{name}: words drawn at {least:.1f} px (minimum {MIN_PX:g})")
            # labels, in the page's language
            controls = fig.locator("input, select")
            texts = []
            for j in range(controls.count()):
                labels = controls.nth(j).evaluate(
                    "e => [...e.labels].map(l => l.textContent.trim())")
                if not labels or not labels[0]:
                    problems.append(f"{name}: control {j} has no <label>")
                texts += labels
                box = controls.nth(j).bounding_box()
                if box["height"] < 24 or box["width"] < 24:  # WCAG 2.2 target size
                    problems.append(f"{name}: control {j} is {box['width']:.0f} x "
                                    f"{box['height']:.0f} px, under 24 px")
            if lang == "zh" and not any(any("\u4e00" <= ch <= "\u9fff" for ch in t)
                                        for t in texts):
                problems.append(f"{name}: no Chinese label on a zh page: {texts}")
            # Tab from the title reaches each control in turn
            fig.locator(".posenc-ifig-title").click()
            for j in range(controls.count()):
                tab.keyboard.press("Tab")
                focused = tab.evaluate("document.activeElement && document.activeElement.id")
                if focused != controls.nth(j).get_attribute("id"):
                    problems.append(f"{name}: Tab reached {focused!r}, not control {j}")
                    break
            # every control moved with the keyboard redraws the figure (last control
            # first: RoPE's pair 0 turns by one radian per position whatever the base, so
            # the base changes the drawing once the pair has moved)
            for j in reversed(range(controls.count())):
                if not _change_with_keyboard(tab, controls.nth(j)):
                    problems.append(f"{name}: control "
                                    f"{controls.nth(j).get_attribute('data-control')} "
                                    f"does not change the figure")
            for mode in ("light", "dark"):
                tab.evaluate(f"document.documentElement.dataset.theme = '{mode}';"
                             f"document.documentElement.dataset.mode = '{mode}'")
                ink = fig.evaluate(INK_JS)
                if mode == "dark" and not (ink["ink"] > 0.6 and (ink["paper"] or 0) < 0.3):
                    problems.append(f"{name}: dark mode ink {ink}")
                if mode == "light" and not (ink["ink"] < 0.4 and (ink["paper"] or 1) > 0.7):
                    problems.append(f"{name}: light mode ink {ink}")
                target = shots / mode / lang / f"{page}-{i}-{kind}.png"
                target.parent.mkdir(parents=True, exist_ok=True)
                fig.screenshot(path=str(target))
            tab.evaluate("document.documentElement.dataset.theme = 'light'")
        over = tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if over > 0:
            problems.append(f"the page scrolls sideways by {over} px")
    finally:
        context.close()
    if external:
        problems.append(f"requests off the site: {external[:3]}")
    if errors:
        problems.append(f"errors: {errors[:3]}")
    assert not problems, problems


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_rope_pair_dot_product_equals_posenc(lang, base, browser):
    """The one formula the browser evaluates: q_m . k_n of the chosen pair, against
    posenc's apply_rope on the vectors the page's call used (interactive_rope_pair's
    defaults: seed 0, 32 positions; the page passes bases [100, 10000] and d = 16)."""
    import posenc

    context, tab, external, errors = _open(browser, base, lang, "rope-scores", 1280)
    try:
        tab.wait_for_selector("div.posenc-ifig[data-kind='rope_pair'][data-ready]")
        fig = tab.locator("div.posenc-ifig[data-kind='rope_pair']")
        q, k = np.random.default_rng(0).normal(size=(2, 16))
        rng = np.random.default_rng(1)
        for _ in range(12):
            b_idx, pair, m, n = int(rng.integers(2)), int(rng.integers(8)), \
                int(rng.integers(32)), int(rng.integers(32))
            for cid, value in (("base", b_idx), ("pair", pair), ("m", m), ("n", n)):
                fig.locator(f"[data-control='{cid}']").evaluate(
                    "(e, v) => { e.value = String(v); e.dispatchEvent(new Event('input')); }",
                    value)
            shown = float(fig.locator(".posenc-ifig-plot").get_attribute("data-score"))
            b = [100.0, 10_000.0][b_idx]
            qm = posenc.apply_rope(q[None], np.array([m]), base=b)[0]
            kn = posenc.apply_rope(k[None], np.array([n]), base=b)[0]
            exact = qm[2 * pair] * kn[2 * pair] + qm[2 * pair + 1] * kn[2 * pair + 1]
            assert abs(shown - exact) < 1e-3, (b, pair, m, n, shown, exact)
    finally:
        context.close()
    assert not external and not errors, (external, errors)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("page", sorted(DIAGRAMS))
def test_diagrams(page, lang, width, site, base, browser):
    context, tab, external, errors = _open(browser, base, lang, page, width)
    problems = []
    shots = screenshot_dir(site) / "interactive" / str(width)
    try:
        diagrams = tab.locator("div.posenc-diagram")
        assert diagrams.count() == DIAGRAMS[page]
        for i in range(diagrams.count()):
            d = diagrams.nth(i)
            d.scroll_into_view_if_needed()
            least = d.evaluate(FONT_JS)
            if least < MIN_PX - 0.05:
                problems.append(f"diagram {i}: words drawn at {least:.1f} px at {width} px")
            box = d.locator("svg").bounding_box()
            col = d.bounding_box()
            if box["width"] > col["width"] + 1:
                problems.append(f"diagram {i} is wider than its column")
            title = d.locator("svg > title").text_content()
            if lang == "zh" and not any("\u4e00" <= ch <= "\u9fff" for ch in title):
                problems.append(f"diagram {i}: title not in Chinese: {title!r}")
            for mode in ("light", "dark"):
                tab.evaluate(f"document.documentElement.dataset.theme = '{mode}'")
                ink = d.evaluate(INK_JS)
                if (mode == "dark") != (ink["ink"] > 0.6 and (ink["paper"] or 1) < 0.3):
                    problems.append(f"diagram {i}: {mode} mode ink {ink}")
                target = shots / mode / lang / f"{page}-diagram-{i}.png"
                target.parent.mkdir(parents=True, exist_ok=True)
                d.screenshot(path=str(target))
    finally:
        context.close()
    if external or errors:
        problems.append(f"requests off the site {external[:3]}, errors {errors[:3]}")
    assert not problems, problems


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_interactive_output_draws_itself_outside_the_site(lang, browser):
    """As Jupyter and Colab show it: the cell's HTML output alone, in a page with nothing
    else loaded and every request refused, builds its controls and draws its SVG (the
    renderer and stylesheet come inline with the data), and a control redraws it."""
    import posenc.figures as pf

    requests: list[str] = []
    try:
        pf.set_language(lang)
        figs = [pf.interactive_sinusoidal(bases=[100, 10_000], widths=[16, 32]),
                pf.interactive_rope_pair(bases=[100, 10_000], d_model=8),
                pf.interactive_alibi(n_heads=4, lengths=[4, 8]),
                pf.interactive_mrope(heights=[1, 2], widths=[1, 2], text_after=[1, 2])]
    finally:
        pf.set_language("en")
    context = new_context(browser)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    def refuse(route):
        requests.append(route.request.url)
        route.abort()

    page.route("**/*", refuse)
    for fig in figs:
        page.set_content(f"<!doctype html><html><body>{fig._repr_html_()}</body></html>")
        root = page.locator("div.posenc-ifig")
        root.locator("svg.pi-svg").wait_for(timeout=10_000)
        assert root.locator(".posenc-ifig-nojs").count() == 0, fig
        inputs = root.locator("input, select")
        assert inputs.count() == len(fig.spec["controls"]), fig
        plot = root.locator(".posenc-ifig-plot")
        drawn = plot.inner_html()
        for i in range(inputs.count()):  # some settings draw alike (RoPE's pair 0
            control = inputs.nth(i)       # turns at 1 for any base): try each control
            if control.evaluate("e => e.tagName") == "SELECT":
                n = control.evaluate("e => e.options.length")
                control.select_option(index=(int(control.input_value()) + 1) % n)
            else:
                control.focus()
                page.keyboard.press("Home")  # or End, whichever end it is not at
                if plot.inner_html() == drawn:
                    page.keyboard.press("End")
            if plot.inner_html() != drawn:
                break
        assert plot.inner_html() != drawn, f"{fig}: no control redrew it"
    context.close()
    assert not errors, errors
    assert not requests, requests
