// Remember the reader's language choice so the chooser page at the site root honours it.
document.addEventListener("DOMContentLoaded", () => {
  for (const link of document.querySelectorAll("a.posenc-lang-switch")) {
    link.addEventListener("click", () => {
      try { localStorage.setItem("posenc-lang", link.dataset.posencLang); } catch (e) {}
    });
  }
});

// Boxes that scroll sideways -- a display equation, a table or a code line wider than a
// phone's column -- get a cue (posenc.css fades the side with more to see) and keyboard
// focus, so they can be scrolled without a mouse.
(() => {
  const SCROLLERS = "mjx-container[display='true'], .pst-scrollable-table-container, " +
                    ".cell_output .output.text_html, div.highlight pre";
  const update = (el) => {
    const scrolls = el.scrollWidth > el.clientWidth + 1;
    el.classList.toggle("posenc-scrolls", scrolls);
    el.classList.toggle("posenc-more-left", scrolls && el.scrollLeft > 1);
    el.classList.toggle("posenc-more-right",
                        scrolls && el.scrollLeft + el.clientWidth < el.scrollWidth - 1);
    if (scrolls && el.tabIndex < 0) el.tabIndex = 0;
  };
  const seen = new WeakSet();
  // A box's content can grow after it was marked (a web font arrives, an image loads).
  const resized = window.ResizeObserver
    ? new ResizeObserver((entries) => {
        for (const e of entries) update(e.target.closest(SCROLLERS) || e.target);
      })
    : null;
  const markAll = () => {
    for (const el of document.querySelectorAll(SCROLLERS)) {
      if (!seen.has(el)) {
        seen.add(el);
        el.addEventListener("scroll", () => update(el), {passive: true});
        if (resized) {
          resized.observe(el);
          if (el.firstElementChild) resized.observe(el.firstElementChild);
        }
      }
      update(el);
    }
  };
  window.posencMarkScrollers = markAll;
  const start = () => {
    markAll();
    // MathJax typesets after the page loads; mark its equations when it is done.
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(markAll);
    }
    window.addEventListener("load", markAll);
    if (document.fonts && document.fonts.ready) document.fonts.ready.then(markAll);
    let pending = null;
    window.addEventListener("resize", () => {
      clearTimeout(pending);
      pending = setTimeout(markAll, 100);
    });
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
