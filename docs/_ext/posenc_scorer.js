/*
 * The book's search (conf.py: html_search_scorer; Sphinx puts this file into
 * language_data.js, which the search page loads after searchtools.js).
 *
 * Ranking: Sphinx's own weights, plus two rules.  A chapter whose title names what the
 * reader typed comes first, before the glossary's entry for the term (an index entry,
 * which Sphinx scores 100), the API reference and the other appendices -- "rotary" finds
 * the RoPE chapter, "正弦" the sinusoidal one, "YaRN" the long-context one; among such
 * chapters the shorter title (the one more about the query) comes first.  Next come the
 * chapters with a section heading that names it, before pages that only mention it.
 *
 * One hit per page: Sphinx lists a page once for its title, once per heading and once
 * for its text; the page's best hit stands for it (its anchor leads to that place).
 *
 * Snippets: Sphinx cuts them from the page's text, which held the TeX source that each
 * MathML formula carries as an annotation ("m - n" read "m−nm - n"), each long
 * equation's second (phone) form, and table cells run together ("modelrope type...");
 * htmlToText below drops the first two and keeps cells apart.
 *
 * tests/book/test_browser.py checks the order, the single hits and the snippets on the
 * built search page.
 */
var Scorer = {
  score: (result) => {
    const [docname, title, , , score, , kind] = result;
    const query = (new URLSearchParams(window.location.search).get("q") || "")
      .trim().toLowerCase();
    const page = docname.split("/").pop();
    if (!query || Scorer.appendices.has(page) || /^(api|benchmarks|references)/.test(page)) return score;
    const [pageTitle, heading] = (title || "").toLowerCase().split(" > ");
    if (pageTitle.includes(query)) {
      return score + 200 + Math.round((100 * query.length) / pageTitle.length);
    }
    if (kind === "title" && heading && heading.includes(query)) {
      // a heading whose subject is the query ("YaRN: interpolate ...") before one that
      // mentions it ("Qwen3: static YaRN")
      const subject = heading === query || [":", "：", " ("].some((s) => heading.startsWith(query + s));
      return score + 100 + (subject ? 50 : 0) + Math.round((50 * query.length) / heading.length);
    }
    return score;
  },
  // Pages that are not chapters (and the API, benchmark and reference pages, api*,
  // benchmarks-*, references-*).
  appendices: new Set(["index", "glossary", "references", "api", "benchmarks", "genindex",
                       "py-modindex", "search"]),

  // Sphinx 9's defaults (sphinx/themes/basic/static/searchtools.js).
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {
    0: 15,
    1: 5,
    2: -5,
  },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};

if (typeof Search !== "undefined" && Search._performSearch) {
  const performSearch = Search._performSearch;
  Search._performSearch = (query, ...rest) => {
    const results = performSearch(query, ...rest);
    // Headings weigh more than text: Sphinx lists a heading only when the query is at
    // least half of it, so "YaRN" never met "YaRN: interpolate the long wavelengths
    // only".  Every heading that names the query is a hit of its own here.
    const q = query.toLowerCase().trim();
    const index = Search._index;
    if (q && index) {
      for (const [title, found] of Object.entries(index.alltitles)) {
        const lower = title.toLowerCase();
        if (!lower.includes(q) || q.length >= title.length / 2) continue;  // Sphinx's own
        for (const [file, id] of found) {
          const page = index.titles[file];
          const hit = [index.docnames[file], page !== title ? `${page} > ${title}` : title,
                       id !== null ? "#" + id : "", null,
                       Math.round((Scorer.title * q.length) / title.length),
                       index.filenames[file], "title"];
          hit[4] = Scorer.score(hit);
          results.push(hit);
        }
      }
      results.sort((a, b) => a[4] - b[4]);  // stable: equal scores keep Sphinx's order
    }
    // One hit per page.  The list is shown from its end (the best result last), so the
    // first of a page's hits met from the end is its best.
    const seen = new Set();
    const kept = [];
    for (let i = results.length - 1; i >= 0; i--) {
      if (seen.has(results[i][0])) continue;
      seen.add(results[i][0]);
      kept.push(results[i]);
    }
    return kept.reverse();
  };

  // The page's words as a reader sees them.
  Search.htmlToText = (htmlString, anchor) => {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    const drop = [".headerlink", "script", "style", "annotation", "annotation-xml",
                  "math.posenc-math-narrow", ".copybtn"];
    doc.querySelectorAll(drop.join(", ")).forEach((el) => el.remove());
    doc.querySelectorAll("td, th, li, dt, dd").forEach((el) => el.append(" "));
    const main = doc.querySelector('[role="main"]');
    let inMain = null;
    try {
      inMain = anchor && main ? main.querySelector(anchor) : null;
    } catch (e) {}  // an anchor that is not a valid selector: the whole page
    const text = (inMain || main)?.textContent;
    return text === undefined ? "" : text.replace(/\s+/g, " ");
  };
}
