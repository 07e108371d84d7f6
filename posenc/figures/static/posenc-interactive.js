// Interactive figures of the book (posenc.figures.interactive).
//
// Each div.posenc-ifig holds a JSON spec whose numbers posenc computed when the page was
// built, for every setting the controls span; this script only builds the labelled
// controls, draws SVG and switches between the precomputed data.  The one formula it
// evaluates is the dot product of the two 2-vectors in the RoPE pair figure (a browser
// test compares it with posenc).
//
// Why hand-written SVG and not Plotly (~3.5 MB) or Bokeh (~1 MB): the book draws lines,
// heat maps and arrows; this file is a few KB, loads nothing else, inherits the page's
// fonts (CJK included) and follows the theme's dark mode through CSS variables
// (posenc-interactive.css).  The drawing is sized in CSS pixels for the width it gets,
// so its words stay 12 px on a phone.
(() => {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const FONT = 12;

  const el = (tag, attrs = {}, parent = null, text = null) => {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) node.setAttribute(k, v);
    if (text !== null) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  };
  const fmt = (x) => {
    if (x === 0) return "0";
    const a = Math.abs(x);
    if (a >= 1e5 || a < 1e-3) {
      const e = Math.floor(Math.log10(a)), m = x / 10 ** e;
      return (Math.abs(m - Math.round(m)) < 1e-9 ? String(Math.round(m)) : m.toFixed(1)) + "e" + e;
    }
    return String(+x.toPrecision(3));
  };

  // -- colour maps (data colours: the same in light and dark mode, like the PNGs) ----
  const lerp = (stops, t) => {
    t = Math.min(1, Math.max(0, isFinite(t) ? t : 0));
    const x = t * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(x)), f = x - i;
    const c = stops[i].map((v, k) => Math.round(v + f * (stops[i + 1][k] - v)));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  };
  const DIVERGING = [[5, 48, 97], [67, 147, 195], [247, 247, 247], [214, 96, 77], [103, 0, 31]];
  const SEQUENTIAL = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];

  // -- scales and axes ------------------------------------------------------------
  const scale = (d0, d1, r0, r1, log) => {
    if (log) {
      const a = Math.log10(d0), b = Math.log10(d1);
      return (v) => r0 + (Math.log10(v) - a) / (b - a || 1) * (r1 - r0);
    }
    return (v) => r0 + (v - d0) / (d1 - d0 || 1) * (r1 - r0);
  };
  const ticks = (d0, d1, log, count) => {
    if (log) {
      const out = [];
      const lo = Math.floor(Math.log10(d0)), hi = Math.ceil(Math.log10(d1));
      const step = Math.max(1, Math.ceil((hi - lo) / count));
      for (let e = lo; e <= hi; e += step) { const v = 10 ** e; if (v >= d0 * 0.999 && v <= d1 * 1.001) out.push(v); }
      return out;
    }
    const raw = (d1 - d0) / Math.max(1, count);
    const mag = 10 ** Math.floor(Math.log10(raw || 1));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
    const out = [];
    for (let v = Math.ceil(d0 / step) * step; v <= d1 + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  };
  // A plot area with axes; returns {x, y, g} scales and the group to draw in.
  const axes = (svg, box, o) => {
    const g = el("g", {}, svg);
    const x = scale(o.x[0], o.x[1], box.x, box.x + box.w, o.xlog);
    const y = scale(o.y[0], o.y[1], box.y + box.h, box.y, o.ylog);
    const grid = el("g", {class: "pi-grid", visibility: o.nogrid ? "hidden" : null}, g);
    const nx = Math.max(2, Math.floor(box.w / 70)), ny = Math.max(2, Math.floor(box.h / 40));
    for (const v of ticks(o.x[0], o.x[1], o.xlog, nx)) {
      el("line", {x1: x(v), x2: x(v), y1: box.y, y2: box.y + box.h}, grid);
      el("text", {x: x(v), y: box.y + box.h + FONT + 4, "text-anchor": "middle", class: "pi-tick"}, g, fmt(v));
    }
    for (const v of ticks(o.y[0], o.y[1], o.ylog, ny)) {
      el("line", {x1: box.x, x2: box.x + box.w, y1: y(v), y2: y(v)}, grid);
      el("text", {x: box.x - 5, y: y(v) + FONT / 3, "text-anchor": "end", class: "pi-tick"}, g, fmt(v));
    }
    el("rect", {x: box.x, y: box.y, width: box.w, height: box.h, class: "pi-frame"}, g);
    if (o.xlabel) el("text", {x: box.x + box.w / 2, y: box.y + box.h + 2 * FONT + 10, "text-anchor": "middle", class: "pi-label"}, g, o.xlabel);
    if (o.ylabel) el("text", {x: 0, y: 0, "text-anchor": "middle", class: "pi-label",
                            transform: `translate(${Math.max(FONT + 1, box.x - 44)},${box.y + box.h / 2}) rotate(-90)`}, g, o.ylabel);
    return {x, y, g};
  };
  const path = (xs, ys, x, y) => {
    let d = "";
    xs.forEach((v, i) => {
      if (ys[i] === null || !isFinite(ys[i])) return;
      d += (d ? "L" : "M") + x(v).toFixed(1) + "," + y(ys[i]).toFixed(1);
    });
    return d;
  };
  // Legend entries in rows that wrap at the drawing's width; returns its height.
  const legend = (svg, entries, x0, y0, width) => {
    let x = x0, y = y0 + FONT;
    const g = el("g", {class: "pi-legend"}, svg);
    for (const e of entries) {
      const w = 26 + e.text.length * (FONT * (/[\u3000-\u9fff]/.test(e.text) ? 1.0 : 0.6)) + 14;
      if (x > x0 && x + w > x0 + width) { x = x0; y += FONT + 8; }
      el("line", {x1: x, x2: x + 20, y1: y - FONT / 3, y2: y - FONT / 3, class: `pi-line ${e.cls}`}, g);
      el("text", {x: x + 26, y, class: "pi-tick"}, g, e.text);
      x += w;
    }
    return y - y0 + 8;
  };
  const heatmap = (svg, box, matrix, color, o) => {
    const rows = matrix.length, cols = matrix[0].length;
    const a = axes(svg, box, {x: [0, cols], y: [rows, 0], xlabel: o.xlabel, ylabel: o.ylabel, nogrid: true});
    const cw = box.w / cols, ch = box.h / rows;
    const cells = el("g", {class: "pi-cells"}, a.g);
    a.g.insertBefore(cells, a.g.firstChild);
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) {
        const v = matrix[i][j];
        el("rect", {x: (box.x + j * cw).toFixed(2), y: (box.y + i * ch).toFixed(2),
                    width: (cw + 0.6).toFixed(2), height: (ch + 0.6).toFixed(2),
                    fill: v === null ? "var(--pi-masked)" : color(v)}, cells);
      }
    }
    return a;
  };
  // A colour bar under a heat map: low ... high.
  const colorbar = (svg, x0, y0, width, color, lo, hi, label) => {
    const g = el("g", {}, svg);
    const n = 40, w = Math.min(220, width * 0.5);
    for (let i = 0; i < n; i++) {
      el("rect", {x: x0 + i * w / n, y: y0, width: w / n + 0.5, height: 10, fill: color(lo + (hi - lo) * i / (n - 1))}, g);
    }
    el("text", {x: x0, y: y0 + 10 + FONT + 2, class: "pi-tick"}, g, fmt(lo));
    el("text", {x: x0 + w, y: y0 + 10 + FONT + 2, "text-anchor": "end", class: "pi-tick"}, g, fmt(hi));
    el("text", {x: x0 + w + 10, y: y0 + 10, class: "pi-label"}, g, label);
    return 10 + FONT + 8;
  };

  // -- the figures ----------------------------------------------------------------
  const DRAW = {
    sinusoidal(svg, W, spec, d) {
      const t = spec.text, pe = d.pe;
      const h1 = Math.round(Math.min(260, Math.max(180, W * 0.45)));
      const box = {x: 46, y: 8, w: W - 58, h: h1};
      const div = (v) => lerp(DIVERGING, (v + 1) / 2);
      heatmap(svg, box, pe, div, {xlabel: t.x, ylabel: t.y});
      let y = box.y + box.h + 2 * FONT + 22;
      y += colorbar(svg, box.x, y, box.w, div, -1, 1, "sin / cos");
      const wl = d.wl, idx = wl.map((_, i) => i);
      const box2 = {x: 58, y: y + 8, w: W - 70, h: 150};
      const a = axes(svg, box2, {x: [0, Math.max(1, wl.length - 1)], y: [Math.min(...wl) * 0.8, Math.max(...wl) * 1.25],
                                 ylog: true, xlabel: t.pair, ylabel: t.wl});
      el("path", {d: path(idx, wl, a.x, a.y), class: "pi-line pi-c1"}, a.g);
      for (const i of idx) el("circle", {cx: a.x(i), cy: a.y(wl[i]), r: 2.5, class: "pi-dot pi-c1"}, a.g);
      return box2.y + box2.h + 2 * FONT + 16;
    },
    rope_pair(svg, W, spec, d, state) {
      const t = spec.text, i = state.pair, m = state.m, n = state.n;
      const q = [d.q[m][2 * i], d.q[m][2 * i + 1]], k = [d.k[n][2 * i], d.k[n][2 * i + 1]];
      const dot = q[0] * k[0] + q[1] * k[1];  // the one formula evaluated here (tested)
      svg.parentNode.dataset.score = String(dot);
      const wide = W >= 640;
      const size = wide ? Math.min(300, W * 0.42) : Math.min(300, W - 16);
      const cx = size / 2 + 8, cy = size / 2 + 24, R = size / 2 - 34;
      const lim = Math.max(...d.q.map((r) => Math.hypot(r[2 * i], r[2 * i + 1])),
                           ...d.k.map((r) => Math.hypot(r[2 * i], r[2 * i + 1])), 1e-9);
      const g = el("g", {}, svg);
      el("circle", {cx, cy, r: R, class: "pi-frame"}, g);
      el("line", {x1: cx - R - 6, x2: cx + R + 6, y1: cy, y2: cy, class: "pi-axis"}, g);
      el("line", {x1: cx, x2: cx, y1: cy - R - 6, y2: cy + R + 6, class: "pi-axis"}, g);
      const defs = el("defs", {}, svg);
      for (const c of ["pi-c1", "pi-c2"]) {
        const mk = el("marker", {id: `${svg.id}-${c}`, viewBox: "0 0 10 10", refX: 9, refY: 5,
                                 markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse"}, defs);
        el("path", {d: "M0,0L10,5L0,10z", class: `pi-fill ${c}`}, mk);
      }
      const arrow = (v, c) => {
        const ex = cx + v[0] / lim * R, ey = cy - v[1] / lim * R;
        el("line", {x1: cx, y1: cy, x2: ex, y2: ey, class: `pi-arrow ${c}`, "marker-end": `url(#${svg.id}-${c})`}, g);
      };
      arrow(k, "pi-c2");
      arrow(q, "pi-c1");
      // which arrow is which: a legend above the circle (labels at the tips would leave it)
      el("text", {x: 8, y: FONT, class: "pi-label pi-text-pi-c1"}, g, `— ${t.q}`);
      el("text", {x: 8 + size / 2, y: FONT, class: "pi-label pi-text-pi-c2"}, g, `— ${t.k}`);
      // the score against the offset: posenc's values, the dot above marked on them
      const sc = d.score[i], P = d.q.length, offs = sc.map((_, j) => j - (P - 1));
      const bx = wide ? size + 70 : 58, by = wide ? 16 : size + 40;
      const box = {x: bx, y: by, w: W - bx - 12, h: wide ? size - 70 : 170};
      const lo = Math.min(...sc), hi = Math.max(...sc), pad = (hi - lo) * 0.1 + 1e-6;
      const a = axes(svg, box, {x: [offs[0], offs[offs.length - 1]], y: [lo - pad, hi + pad], xlabel: t.offset, ylabel: t.score});
      el("path", {d: path(offs, sc, a.x, a.y), class: "pi-line pi-c3"}, a.g);
      el("circle", {cx: a.x(m - n), cy: a.y(dot), r: 5, class: "pi-dot pi-c1 pi-marker"}, a.g);
      const ty = box.y + box.h + 2 * FONT + 30;
      el("text", {x: box.x, y: ty, class: "pi-label pi-readout"}, svg, `${t.now} = ${dot.toFixed(3)}   (m − n = ${m - n})`);
      return Math.max(size + 32, ty + 10);
    },
    decay(svg, W, spec, d) {
      const t = spec.text, r = d.bound.map((_, j) => j);
      const lh = legend(svg, [{text: t.bound, cls: "pi-c1"}, {text: t.ones, cls: "pi-c2"}], 58, 0, W - 60);
      const all = d.bound.concat(d.ones);
      const box = {x: 58, y: lh + 8, w: W - 70, h: Math.round(Math.min(300, Math.max(200, W * 0.4)))};
      const a = axes(svg, box, {x: [0, r.length - 1], y: [Math.min(0, ...all) - 0.05, 1.05], xlabel: t.x, ylabel: t.y});
      el("path", {d: path(r, d.ones, a.x, a.y), class: "pi-line pi-c2"}, a.g);
      el("path", {d: path(r, d.bound, a.x, a.y), class: "pi-line pi-c1"}, a.g);
      return box.y + box.h + 2 * FONT + 16;
    },
    long_context(svg, W, spec, d, state) {
      const t = spec.text, wl = spec.wavelengths, rules = spec.rules;
      const cls = ["pi-c1", "pi-c2", "pi-c3", "pi-c4"];
      const lh = legend(svg, rules.map((name, j) => ({text: name, cls: cls[j]})), 58, 0, W - 60);
      const L = spec.controls.find((c) => c.id === "length").options[state.length].value;
      const all = rules.flatMap((name) => d[name]);
      const box = {x: 58, y: lh + 8, w: W - 70, h: Math.round(Math.min(300, Math.max(200, W * 0.4)))};
      const a = axes(svg, box, {x: [Math.min(...wl), Math.max(...wl)], y: [0.8, Math.max(...all) * 1.3],
                                xlog: true, ylog: true, xlabel: t.x, ylabel: t.y});
      const xl = a.x(L);
      el("line", {x1: xl, x2: xl, y1: box.y, y2: box.y + box.h, class: "pi-axis pi-dash"}, a.g);
      el("text", {x: xl + 4, y: box.y + FONT + 2, class: "pi-tick"}, a.g, `${t.L} = ${L}`);
      rules.forEach((name, j) => el("path", {d: path(wl, d[name], a.x, a.y), class: `pi-line ${cls[j]}`,
                                              "stroke-dasharray": j === 0 ? "6 3" : null}, a.g));
      return box.y + box.h + 2 * FONT + 16;
    },
    alibi(svg, W, spec, d, state) {
      const t = spec.text, m = d.bias[state.head];
      const n = m.length, side = Math.min(W - 60, 360);
      const vals = m.flat().filter((v) => v !== null), lo = Math.min(...vals);
      const col = (v) => lerp(SEQUENTIAL, lo === 0 ? 1 : 1 - v / lo);
      const box = {x: 48, y: 8, w: side, h: side};
      heatmap(svg, box, m, col, {xlabel: t.x, ylabel: t.y});
      let y = box.y + box.h + 2 * FONT + 22;
      y += colorbar(svg, box.x, y, W - 60, col, lo, 0, t.bias);
      el("text", {x: box.x, y: y + FONT + 4, class: "pi-label pi-readout"}, svg,
         `${t.slope} = ${fmt(spec.slopes[state.head])}   (n = ${n})`);
      return y + FONT + 14;
    },
    t5(svg, W, spec, d) {
      const t = spec.text, m = d.b, side = Math.min(W - 60, 360);
      const hi = Math.max(...m.flat());
      const col = (v) => lerp(SEQUENTIAL, v / (hi || 1));
      const box = {x: 48, y: 8, w: side, h: side};
      heatmap(svg, box, m, col, {xlabel: t.x, ylabel: t.y});
      const y = box.y + box.h + 2 * FONT + 22;
      return y + colorbar(svg, box.x, y, W - 60, col, 0, hi, t.bucket);
    },
    mrope(svg, W, spec, d, state) {
      const t = spec.text, ids = d.ids, before = spec.before;
      const h = spec.controls[0].options[state.h].value, w = spec.controls[1].options[state.w].value;
      const nImg = h * w, total = ids[0].length;
      const cell = Math.max(52, Math.min(74, Math.floor((W - 16) / Math.max(w, 5))));
      const cellH = 46;
      const token = (x, y, j, cls) => {
        el("rect", {x, y, width: cell - 6, height: cellH - 6, rx: 4, class: `pi-token ${cls}`}, svg);
        el("text", {x: x + (cell - 6) / 2, y: y + (cellH - 6) / 2 + FONT / 3, "text-anchor": "middle", class: "pi-tick pi-ids"},
           svg, `${ids[0][j]},${ids[1][j]},${ids[2][j]}`);
      };
      const perRow = Math.max(1, Math.floor((W - 16) / cell));
      let y = 4;
      el("text", {x: 8, y: y + FONT, class: "pi-label"}, svg, `${t.ids}`);
      y += FONT + 10;
      const strip = (from, to, label) => {
        el("text", {x: 8, y: y + FONT, class: "pi-label"}, svg, label);
        y += FONT + 6;
        for (let j = from; j < to; j++) {
          const c = (j - from) % perRow;
          if (c === 0 && j > from) y += cellH;
          token(8 + c * cell, y, j, "pi-text-token");
        }
        y += cellH + 4;
      };
      strip(0, before, t.text);
      el("text", {x: 8, y: y + FONT, class: "pi-label"}, svg, `${t.image} ${h} × ${w}`);
      y += FONT + 6;
      for (let r = 0; r < h; r++) {
        for (let c = 0; c < w; c++) token(8 + c * cell, y + r * cellH, before + r * w + c, "pi-image-token");
      }
      y += h * cellH + 4;
      strip(before + nImg, total, t.text);
      return y + 4;
    },
  };

  let counter = 0;
  const build = (root) => {
    const script = root.querySelector("script.posenc-ifig-data");
    if (!script || root.dataset.ready) return;
    const spec = JSON.parse(script.textContent);
    const uid = `posenc-ifig-${++counter}`;
    root.dataset.ready = "1";
    root.querySelector(".posenc-ifig-nojs")?.remove();
    const title = document.createElement("p");
    title.className = "posenc-ifig-title";
    title.id = `${uid}-title`;
    title.textContent = spec.title;
    const controls = document.createElement("div");
    controls.className = "posenc-ifig-controls";
    const plot = document.createElement("div");
    plot.className = "posenc-ifig-plot";
    plot.setAttribute("role", "img");
    plot.setAttribute("aria-labelledby", `${uid}-title`);
    const live = document.createElement("p");
    live.className = "posenc-ifig-live";
    live.setAttribute("aria-live", "polite");
    root.append(title, controls, plot, live);
    const state = {};
    for (const c of spec.controls) {
      state[c.id] = c.value;
      const wrap = document.createElement("div");
      wrap.className = "posenc-ifig-control";
      const id = `${uid}-${c.id}`;
      const lab = document.createElement("label");
      lab.htmlFor = id;
      lab.textContent = c.label;
      let input;
      const out = document.createElement("output");
      out.htmlFor = id;
      if (c.kind === "select") {
        input = document.createElement("select");
        c.options.forEach((o, j) => input.add(new Option(o.text, String(j), false, j === c.value)));
      } else {
        input = document.createElement("input");
        input.type = "range";
        input.min = "0";
        input.max = String(c.options.length - 1);
        input.step = "1";
        input.value = String(c.value);
      }
      input.id = id;
      input.dataset.control = c.id;
      const show = () => {
        const o = c.options[state[c.id]];
        // A slider reads its step's meaning aloud through aria-valuetext; a <select>
        // names its chosen option itself and may not carry the attribute (ARIA).
        if (c.kind === "select") {
          out.textContent = "";
        } else {
          out.textContent = o.text;
          input.setAttribute("aria-valuetext", o.text);
        }
      };
      show();
      input.addEventListener("input", () => {
        state[c.id] = Number(input.value);
        show();
        draw();
      });
      wrap.append(lab, input, out);
      controls.append(wrap);
    }
    let lastWidth = 0;
    const draw = () => {
      const W = Math.max(260, Math.floor(plot.clientWidth || root.clientWidth || 600));
      lastWidth = W;
      const key = spec.keys.map((k) => state[k]).join(",");
      const svg = el("svg", {id: `${uid}-svg`, width: W, class: "pi-svg", "aria-hidden": "true"});
      plot.replaceChildren(svg);
      const height = DRAW[spec.kind](svg, W, spec, spec.data[key], state);
      svg.setAttribute("height", Math.ceil(height));
      svg.setAttribute("viewBox", `0 0 ${W} ${Math.ceil(height)}`);
      plot.dataset.key = key;
      live.textContent = spec.controls.map((c) => `${c.label}${spec.colon || ": "}${c.options[state[c.id]].text}`).join(" · ");
    };
    draw();
    if (window.ResizeObserver) {
      new ResizeObserver(() => {
        const W = Math.max(260, Math.floor(plot.clientWidth || 0));
        if (W && Math.abs(W - lastWidth) > 2) draw();
      }).observe(plot);
    }
  };
  const start = () => document.querySelectorAll("div.posenc-ifig").forEach(build);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
