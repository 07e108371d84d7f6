// The language switch keeps the reader's place, and remembers the choice so the chooser
// page at the site root honours it.
//
// The switch lists the ids that the page in the other language has too
// (data-posenc-anchors: section, figure and equation labels, API names).  The place is
// the URL's #anchor while its target is on screen (or the nearest labelled section
// around it), else the labelled section the reader has scrolled into.
(() => {
  const placeFor = (link) => {
    const shared = new Set((link.dataset.posencAnchors || "").split(" ").filter(Boolean));
    if (!shared.size) return "";
    const top = 90;  // the sticky article header
    const hash = decodeURIComponent(location.hash.slice(1));
    const target = hash && document.getElementById(hash);
    if (target) {
      const r = target.getBoundingClientRect();
      if (r.bottom > 0 && r.top < innerHeight) {
        for (let el = target; el; el = el.parentElement) {
          if (el.id && shared.has(el.id)) return el.id;
        }
      }
    }
    let place = "";
    for (const section of document.querySelectorAll("article section[id]")) {
      // The page's own section (its title) is the top of the page, not a place.
      if (!shared.has(section.id) || section.querySelector(":scope > h1")) continue;
      if (section.getBoundingClientRect().top <= top) place = section.id;
      else break;
    }
    return place;
  };
  const aim = (link) => {
    const base = link.getAttribute("href").split("#")[0];
    const place = placeFor(link);
    link.setAttribute("href", place ? `${base}#${encodeURIComponent(place)}` : base);
  };
  document.addEventListener("DOMContentLoaded", () => {
    for (const link of document.querySelectorAll("a.posenc-lang-switch")) {
      // Before anything follows or copies the link: a click, a middle click, a touch,
      // the keyboard, a right click for "copy link".
      for (const event of ["pointerdown", "focus", "mouseenter", "contextmenu"]) {
        link.addEventListener(event, () => aim(link));
      }
      link.addEventListener("click", () => {
        aim(link);
        try { localStorage.setItem("posenc-lang", link.dataset.posencLang); } catch (e) {}
      });
    }
  });
})();

// Boxes that scroll sideways -- a display equation, a table or a code line wider than a
// phone's column -- get a cue (posenc.css fades the side with more to see) and keyboard
// focus, so they can be scrolled without a mouse.
(() => {
  const SCROLLERS = "article div.math, .pst-scrollable-table-container, " +
                    ".cell_output .output.text_html, div.highlight pre";
  const update = (el) => {
    const scrolls = el.scrollWidth > el.clientWidth + 1;
    el.classList.toggle("posenc-scrolls", scrolls);
    el.classList.toggle("posenc-more-left", scrolls && el.scrollLeft > 1);
    el.classList.toggle("posenc-more-right",
                        scrolls && el.scrollLeft + el.clientWidth < el.scrollWidth - 1);
    if (scrolls && el.tabIndex < 0) el.tabIndex = 0;
    // an equation or a table that stays wider than the column says so in words under it
    const kind = el.matches("div.math") ? "math" : el.querySelector("table") ? "table" : null;
    if (kind) {
      let hint = el.nextElementSibling;
      if (!hint || !hint.classList.contains("posenc-scroll-hint")) {
        if (!scrolls) return;
        hint = document.createElement("p");
        hint.className = "posenc-scroll-hint";
        hint.setAttribute("aria-hidden", "true");
        hint.textContent = (HINT[document.documentElement.lang] || HINT.en)[kind];
        el.after(hint);
      }
      hint.hidden = !scrolls;
    }
  };
  const HINT = {
    "zh-CN": {math: "公式较宽，可左右滑动查看 ⟷", table: "表格较宽，可左右滑动查看 ⟷"},
    en: {math: "Wide equation: scroll sideways ⟷", table: "Wide table: scroll sideways ⟷"},
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
    // The colour mode restyles boxes (borders, padding) without resizing the window:
    // re-measure as soon as it changes, before anything reads the marks.
    new MutationObserver(markAll).observe(document.documentElement, {
      attributes: true, attributeFilter: ["data-theme", "data-mode"]});
    window.addEventListener("load", markAll);
    if (document.fonts && document.fonts.ready) document.fonts.ready.then(markAll);
    // a font that starts loading later (a code face first used after a mode switch) widens
    // lines without resizing their box, which no ResizeObserver reports
    if (document.fonts) document.fonts.addEventListener("loadingdone", markAll);
    let pending = null;
    window.addEventListener("resize", () => {
      clearTimeout(pending);
      pending = setTimeout(markAll, 100);
    });
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

// A figure shown smaller than it was drawn (a wide figure in a narrow column), or shown
// as its phone variant (panels stacked; posenc_figures serves it through <picture>),
// offers its full desktop version: a visible "Enlarge" button under it, a tap or click
// on it, or Enter/Space on it open a dialog that scrolls both ways, closed with Escape,
// the close button or a tap outside the figure.
(() => {
  const CLOSE = {"zh-CN": "关闭", en: "Close"};
  const ENLARGE = {"zh-CN": "放大查看", en: "Enlarge"};
  const words = (table) => table[document.documentElement.lang] || table.en;
  let dialog = null;
  const open = (img) => {
    if (!dialog) {
      dialog = document.createElement("dialog");
      dialog.className = "posenc-zoom";
      dialog.innerHTML = '<button type="button" class="posenc-zoom__close"></button>' +
                         '<div class="posenc-zoom__scroll"><img alt=""></div>';
      const close = dialog.querySelector(".posenc-zoom__close");
      close.textContent = "×";
      close.setAttribute("aria-label", words(CLOSE));
      close.addEventListener("click", () => dialog.close());
      dialog.addEventListener("click", (e) => { if (e.target === dialog) dialog.close(); });
      document.body.append(dialog);
    }
    const big = dialog.querySelector("img");
    big.src = img.src;  // the <img>'s own file: the desktop version, never the phone one
    big.alt = img.alt;
    big.style.width = `${img.getAttribute("width")}px`;
    dialog.showModal();
  };
  // the width the shown file was drawn for: the <source> chosen, else the <img>'s
  const drawnWidth = (img) => {
    const picture = img.closest("picture");
    if (picture && img.currentSrc && img.currentSrc !== img.src) {
      for (const source of picture.querySelectorAll("source")) {
        if (img.currentSrc.endsWith(source.getAttribute("srcset"))) {
          return {width: Number(source.getAttribute("width")), phone: true};
        }
      }
    }
    return {width: Number(img.getAttribute("width")), phone: false};
  };
  const mark = () => {
    for (const img of document.querySelectorAll("article img[width]")) {
      const drawn = drawnWidth(img);
      const shown = img.getBoundingClientRect().width;
      const desktop = Number(img.getAttribute("width"));
      const zoomable = shown > 0 && (shown < 0.9 * drawn.width ||
                                     (drawn.phone && shown < 0.9 * desktop));
      img.classList.toggle("posenc-zoomable", zoomable);
      const link = img.closest("a.image-reference");
      const target = link || img;
      if (zoomable && !img.dataset.posencZoom) {
        img.dataset.posencZoom = "1";
        // Sphinx links a scaled image to its file: that link stays the fallback without
        // JavaScript; with it, the link opens the enlarged view instead.
        if (!link) {
          img.tabIndex = 0;
          img.setAttribute("role", "button");
        }
        img.title = words(ENLARGE);
        target.addEventListener("click", (e) => {
          if (!img.classList.contains("posenc-zoomable")) return;
          e.preventDefault();
          open(img);
        });
        if (!link) {
          img.addEventListener("keydown", (e) => {
            if ((e.key === "Enter" || e.key === " ") && img.classList.contains("posenc-zoomable")) {
              e.preventDefault();
              open(img);
            }
          });
        }
        const button = document.createElement("button");
        button.type = "button";
        button.className = "posenc-enlarge";
        button.textContent = words(ENLARGE);
        button.addEventListener("click", () => open(img));
        target.after(button);
      }
      const button = target.nextElementSibling;
      if (button && button.classList.contains("posenc-enlarge")) button.hidden = !zoomable;
    }
  };
  window.posencMarkZoomable = mark;
  window.addEventListener("load", mark);
  if (window.ResizeObserver) {
    const seen = new ResizeObserver(() => mark());
    document.addEventListener("DOMContentLoaded", () => {
      const article = document.querySelector("article");
      if (article) seen.observe(article);
    });
  }
  let pending = null;
  window.addEventListener("resize", () => { clearTimeout(pending); pending = setTimeout(mark, 100); });
})();

// Search snippets come from the page's text.  Sphinx's searchtools.js cuts each result's
// snippet from the fetched page's [role="main"], which in pydata-sphinx-theme is the whole
// <main>: the article header's buttons ("Repository", the language switch), the colour
// menu and the contents sidebar came before the text.  Hand it the article alone.
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined" || !Search.htmlToText) return;  // not the search page
  const toText = Search.htmlToText;
  Search.htmlToText = (html, anchor) => {
    const article = new DOMParser().parseFromString(html, "text/html")
      .querySelector("article.bd-article");
    return toText(article ? `<div role="main">${article.outerHTML}</div>` : html, anchor);
  };
});
