"""Explanatory diagrams: pictures of a mechanism, drawn as SVG from code.

Each function returns a :class:`Diagram`, whose notebook output is the SVG inline in
HTML, so that it scales with the column, its words are real text in the page's font
(CJK included) and its colours follow the theme's dark mode (CSS variables of
``posenc/figures/static/posenc-interactive.css``, with light fallbacks so that the SVG reads
anywhere).  The drawings are 480 units wide with words of at least 15 units, so on a
390 px phone (a column of about 350 px) the words are drawn at 11 px or more.  The
numbers a diagram shows (bits, rotated vectors, YaRN's blend of each pair) come from
``posenc``; the words follow :func:`posenc.figures.set_language`.

Examples
--------
>>> import posenc.figures as pf
>>> pf.set_language("en")
>>> d = rotated_pair_diagram()
>>> d.svg.startswith("<svg") and "</svg>" in d.svg
True
"""

from __future__ import annotations

import html
import math

import numpy as np

from .. import naive, rope, rope_scaling
from .._validation import check_base, check_count, check_d_model, check_real
from ._style import add_labels, label

__all__ = [
    "Diagram",
    "attention_pipeline_diagram",
    "rotated_pair_diagram",
    "binary_sinusoid_diagram",
    "yarn_ramp_diagram",
]

WIDTH = 480
FONT = 15  # the smallest words: 15 units -> 11 px in a 352 px column

add_labels({
    "dg_lane_add": {"en": "Added to the input: sinusoidal, learned",
                    "zh": "加在输入上：正弦、可学习"},
    "dg_lane_rot": {"en": "Rotates q and k: RoPE", "zh": "旋转 q 与 k：RoPE"},
    "dg_lane_bias": {"en": "A bias on the scores: ALiBi, T5", "zh": "加在得分上：ALiBi、T5"},
    "dg_token": {"en": "token x", "zh": "词元 x"},
    "dg_proj": {"en": "Wq, Wk", "zh": "q、k 投影"},
    "dg_score": {"en": "q·k", "zh": "q·k"},
    "dg_softmax": {"en": "softmax", "zh": "softmax"},
    "dg_plus_p": {"en": "+ p(m)", "zh": "+ p(m)"},
    "dg_rotate": {"en": "R(m)q, R(n)k", "zh": "R(m)q, R(n)k"},
    "dg_plus_b": {"en": "+ b(m−n)", "zh": "+ b(m−n)"},
    "dg_pipe_title": {"en": "Where the position enters attention",
                      "zh": "位置从哪里进入注意力"},
    "dg_pair_title": {"en": "One pair of features, turned by the angle mθ",
                      "zh": "一个维度对，转过角度 mθ"},
    "dg_before": {"en": "x (position 0)", "zh": "x（位置 0）"},
    "dg_after": {"en": "R(mθ) x (position m)", "zh": "R(mθ) x（位置 m）"},
    "dg_same_length": {"en": "same length, only the angle changes",
                       "zh": "长度不变，只改变角度"},
    "dg_bin_title": {"en": "Bits of a counter and waves of the same period",
                     "zh": "计数器的各位与同周期的波"},
    "dg_bit": {"en": "bit", "zh": "位"},
    "dg_period": {"en": "period", "zh": "周期"},
    "dg_positions": {"en": "position p = 0 … {n}", "zh": "位置 p = 0 … {n}"},
    "dg_yarn_title": {"en": "YaRN: which pairs keep, blend or interpolate",
                      "zh": "YaRN：哪些维度对保持、混合或插值"},
    "dg_keep": {"en": "kept (many turns in L)", "zh": "保持（L 内转很多圈）"},
    "dg_blend": {"en": "blended", "zh": "混合"},
    "dg_interp": {"en": "divided by s (under one turn)", "zh": "除以 s（不到一圈）"},
    "dg_pair_axis": {"en": "pair i = 0 … {n}", "zh": "维度对 i = 0 … {n}"},
    "dg_kept_share": {"en": "share of the original frequency kept",
                      "zh": "保留原频率的比例"},
    "dg_turns": {"en": "turns in L", "zh": "L 内圈数"},
})


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _style(var: str, fallback: str) -> str:
    return f"var({var}, {fallback})"


INK = _style("--pi-fg", "#222")
MUTED = _style("--pi-muted", "#555")
BOX = _style("--pi-box", "#eef3fa")
BOX_POS = _style("--pi-box2", "#fbeee6")
C1 = _style("--pi-c1", "#1f6fb4")
C2 = _style("--pi-c2", "#d1495b")
C3 = _style("--pi-c3", "#2a9d55")


def _text(x, y, text, *, size=FONT, anchor="start", weight="normal", fill=INK):
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'font-weight="{weight}" style="fill:{fill}">{_e(text)}</text>')


def _rect(x, y, w, h, fill, *, stroke=MUTED, rx=5):
    return (f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="{rx}" '
            f'style="fill:{fill};stroke:{stroke};stroke-width:1"/>')


def _line(x1, y1, x2, y2, *, stroke=MUTED, width=1.5, marker=None, dash=None):
    extra = f' marker-end="url(#{marker})"' if marker else ""
    extra += f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
            f'style="stroke:{stroke};stroke-width:{width}"{extra}/>')


class Diagram:
    """An SVG diagram; its notebook output is ``<div class="posenc-diagram">`` + the SVG.

    Attributes
    ----------
    svg : str
        A complete ``<svg>`` element (``role="img"``, a ``<title>`` in the page's language).
    title : str
    """

    def __init__(self, svg: str, title: str):
        self.svg = svg
        self.title = title

    def _repr_html_(self) -> str:
        return f'<div class="posenc-diagram">{self.svg}</div>'

    def __repr__(self) -> str:
        return f"<Diagram: {self.title}>"


_counter = {"n": 0}


def _svg(body: list[str], height: float, title: str, desc: str = "") -> Diagram:
    _counter["n"] += 1
    uid = f"pdg{_counter['n']}"
    arrow = (f'<defs><marker id="{uid}-a" viewBox="0 0 10 10" refX="9" refY="5" '
             f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
             f'<path d="M0,0L10,5L0,10z" style="fill:{MUTED}"/></marker></defs>')
    inner = "".join(body).replace("@ARROW@", f"{uid}-a")
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {math.ceil(height)}" '
           f'role="img" aria-labelledby="{uid}-t" font-family="inherit">'
           f'<title id="{uid}-t">{_e(title)}{(": " + _e(desc)) if desc else ""}</title>'
           f'{arrow}{inner}</svg>')
    return Diagram(svg, title)


# -- 1. where positions enter attention ----------------------------------------------

def attention_pipeline_diagram():
    """Three lanes of one attention score: a position vector added to the input
    (sinusoidal, learned), a rotation of q and k (RoPE), a bias added to the score
    (ALiBi, T5); the step where the position enters is highlighted.

    Returns
    -------
    Diagram
    """
    lanes = [
        ("dg_lane_add", ["dg_token", "dg_plus_p", "dg_proj", "dg_score", "dg_softmax"], 1),
        ("dg_lane_rot", ["dg_token", "dg_proj", "dg_rotate", "dg_score", "dg_softmax"], 2),
        ("dg_lane_bias", ["dg_token", "dg_proj", "dg_score", "dg_plus_b", "dg_softmax"], 3),
    ]
    body = [_text(0, FONT + 2, label("dg_pipe_title"), size=FONT + 2, weight="bold")]
    y = 34
    gap, box_h = 12, 36
    box_w = {"dg_token": 70, "dg_proj": 84, "dg_score": 60, "dg_softmax": 76,
             "dg_plus_p": 74, "dg_rotate": 124, "dg_plus_b": 100}
    for title_key, steps, hot in lanes:
        body.append(_text(0, y + FONT, label(title_key), weight="bold"))
        y += FONT + 10
        ws = [box_w[k] for k in steps]
        total = sum(ws) + gap * (len(ws) - 1)
        x = (WIDTH - total) / 2
        for i, (key, w) in enumerate(zip(steps, ws)):
            fill = BOX_POS if i == hot else BOX
            stroke = C2 if i == hot else MUTED
            body.append(_rect(x, y, w, box_h, fill, stroke=stroke))
            body.append(_text(x + w / 2, y + box_h / 2 + FONT / 3, label(key), anchor="middle",
                              weight="bold" if i == hot else "normal"))
            if i < len(steps) - 1:
                body.append(_line(x + w + 1, y + box_h / 2, x + w + gap - 1, y + box_h / 2,
                                  marker="@ARROW@"))
            x += w + gap
        y += box_h + 18
    desc = "; ".join(label(k) for k, _, _ in lanes)
    return _svg(body, y, label("dg_pipe_title"), desc)


# -- 2. one rotated pair ---------------------------------------------------------

def rotated_pair_diagram(x=(1.0, 0.35), angle=1.0):
    """A 2-D pair ``x`` and the same pair rotated by ``angle`` (RoPE's ``m θ``),
    rotated with :func:`posenc.rope.rotate_pairs`; an arc marks the angle.

    Raises
    ------
    ValueError
        If ``x`` is not two finite numbers, not both zero, or ``angle`` is not in
        ``(0, 2π)``.
    """
    v = np.asarray(x, dtype=np.float64)
    if v.shape != (2,) or not np.all(np.isfinite(v)) or not np.any(v):
        raise ValueError(f"x must be two finite numbers, not both zero, got {x!r}")
    a = check_real(angle, "angle")
    if not 0 < a < 2 * math.pi:
        raise ValueError(f"angle must be in (0, 2*pi), got {angle!r}")
    w = rope.rotate_pairs(v[None, :], np.array([[a]]))[0]
    cx, cy, R = 150.0, 175.0, 120.0
    scale = R / float(np.hypot(*v))
    p0 = (cx + v[0] * scale, cy - v[1] * scale)
    p1 = (cx + w[0] * scale, cy - w[1] * scale)
    body = [_text(0, FONT + 2, label("dg_pair_title"), size=FONT + 2, weight="bold")]
    body.append(f'<circle cx="{cx}" cy="{cy}" r="{R}" style="fill:none;stroke:{MUTED};'
                f'stroke-width:1" stroke-dasharray="3 4"/>')
    body.append(_line(cx - R - 14, cy, cx + R + 14, cy, marker="@ARROW@"))
    body.append(_line(cx, cy + R + 14, cx, cy - R - 14, marker="@ARROW@"))
    body.append(_text(cx + R + 8, cy + FONT + 4, "x₂ᵢ", size=FONT))
    body.append(_text(cx + 8, cy - R - 2, "x₂ᵢ₊₁", size=FONT))
    a0 = math.atan2(v[1], v[0])
    r_arc = 46
    arc_end = (cx + r_arc * math.cos(a0 + a), cy - r_arc * math.sin(a0 + a))
    arc_start = (cx + r_arc * math.cos(a0), cy - r_arc * math.sin(a0))
    large = 1 if a > math.pi else 0
    body.append(f'<path d="M{arc_start[0]:.1f},{arc_start[1]:.1f} A{r_arc},{r_arc} 0 {large} 0 '
                f'{arc_end[0]:.1f},{arc_end[1]:.1f}" style="fill:none;stroke:{C2};'
                f'stroke-width:2"/>')
    mid = a0 + a / 2
    body.append(_text(cx + (r_arc + 16) * math.cos(mid), cy - (r_arc + 16) * math.sin(mid) + 5,
                      "mθ", anchor="middle", weight="bold", fill=C2))
    body.append(f'<line x1="{cx}" y1="{cy}" x2="{p0[0]:.1f}" y2="{p0[1]:.1f}" '
                f'style="stroke:{C1};stroke-width:3"/>')
    body.append(f'<line x1="{cx}" y1="{cy}" x2="{p1[0]:.1f}" y2="{p1[1]:.1f}" '
                f'style="stroke:{C2};stroke-width:3"/>')
    for (px, py), color in ((p0, C1), (p1, C2)):
        body.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="5" style="fill:{color}"/>')
    tx = 300
    body.append(f'<line x1="{tx}" y1="120" x2="{tx + 26}" y2="120" style="stroke:{C1};'
                f'stroke-width:3"/>')
    body.append(_text(tx + 32, 125, label("dg_before")))
    body.append(f'<line x1="{tx}" y1="150" x2="{tx + 26}" y2="150" style="stroke:{C2};'
                f'stroke-width:3"/>')
    body.append(_text(tx + 32, 155, label("dg_after")))
    words = label("dg_same_length")
    for i, line in enumerate(_wrap(words, 170)):
        body.append(_text(tx, 200 + i * (FONT + 5), line, fill=MUTED))
    return _svg(body, 310, label("dg_pair_title"), words)


def _wrap(text: str, width: float, size: int = FONT) -> list[str]:
    """Lines of ``text`` no wider than ``width`` units (CJK characters 1 em, others 0.55)."""
    def w(s):
        return sum(size if "\u2e80" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef"
                   else 0.55 * size for ch in s)
    tokens = text.split(" ") if " " in text else list(text)
    sep = " " if " " in text else ""
    lines, cur = [], ""
    for tok in tokens:
        cand = f"{cur}{sep}{tok}" if cur else tok
        if cur and w(cand) > width:
            lines.append(cur)
            cur = tok
        else:
            cur = cand
    if cur:
        lines.append(cur)
    return lines


# -- 3. the binary counter and the sinusoids -------------------------------------------

def binary_sinusoid_diagram(n_positions=16, n_bits=4):
    """Each bit of a counter (:func:`posenc.naive.binary_encoding`) as a row of squares,
    and over it a wave of the same period ``2^(b+1)``: bit ``b`` flips every ``2^b``
    positions, like a sinusoid of wavelength ``2^(b+1)``; the fast bits are the high
    frequencies.

    Raises
    ------
    ValueError
        If ``n_positions < 2``, ``n_bits < 1`` or ``n_positions > 32`` (the squares would
        be too small to read).
    """
    n = check_count(n_positions, "n_positions", minimum=2)
    nb = check_count(n_bits, "n_bits", minimum=1)
    if n > 32:
        raise ValueError(f"n_positions must be at most 32 to stay legible, got {n_positions!r}")
    bits = naive.binary_encoding(n, nb)  # column b = bit b, least significant first
    body = [_text(0, FONT + 2, label("dg_bin_title"), size=FONT + 2, weight="bold")]
    left, top = 118, 36
    cell = (WIDTH - left - 6) / n
    row_h = 48
    p = np.arange(n)
    for b in range(nb):
        y = top + b * row_h
        body.append(_text(0, y + row_h / 2, f"{label('dg_bit')} {b}", weight="bold"))
        body.append(_text(0, y + row_h / 2 + FONT + 2, f"{label('dg_period')} {2 ** (b + 1)}",
                          fill=MUTED))
        for j in range(n):
            on = bits[j, b] > 0.5
            body.append(_rect(left + j * cell + 1, y + 8, cell - 2, row_h - 16,
                              C1 if on else BOX, rx=2))
        # the wave of the same period, through the middle of each square: 1 on, 0 off
        xs = np.linspace(-0.5, n - 0.5, 8 * n + 1)
        wave = 0.5 - 0.5 * np.sin(np.pi * (xs + 0.5) / 2 ** b)
        pts = " ".join(f"{left + (xv + 0.5) * cell:.1f},{y + row_h - 10 - wv * (row_h - 20):.1f}"
                       for xv, wv in zip(xs, wave))
        body.append(f'<polyline points="{pts}" style="fill:none;stroke:{C2};stroke-width:2"/>')
    y = top + nb * row_h + 6
    for j in p[:: max(1, n // 8)]:
        body.append(_text(left + (j + 0.5) * cell, y + FONT, str(int(j)), anchor="middle",
                          fill=MUTED))
    body.append(_text(left, y + 2 * FONT + 10, label("dg_positions").format(n=n - 1),
                      fill=MUTED))
    return _svg(body, y + 2 * FONT + 18, label("dg_bin_title"))


# -- 4. the YaRN ramp over the pairs -------------------------------------------------

def yarn_ramp_diagram(dim=128, base=10000.0, factor=8.0, original_length=4096, *,
                      beta_fast=32.0, beta_slow=1.0):
    """YaRN's treatment of each pair: the share ``γ_i`` of the original frequency it
    keeps, from :func:`posenc.rope_scaling.rope_frequencies` (``θ'_i = θ_i (γ_i + (1 -
    γ_i)/s)``), drawn as a strip of the pairs coloured kept / blended / divided by ``s``
    and a curve of ``γ_i``, with each region's number of turns within ``L``.

    Raises
    ------
    ValueError, TypeError
        As :func:`posenc.rope_scaling.rope_frequencies` for the YaRN parameters.
    """
    d = check_d_model(dim, "dim", even=True)
    b = check_base(base)
    s = check_real(factor, "factor")
    if s <= 1:
        raise ValueError(f"factor must be > 1, got {factor!r}")
    L = check_count(original_length, "original_length", minimum=1)
    theta, _ = rope_scaling.rope_frequencies(d, {"rope_theta": b})
    inv, _ = rope_scaling.rope_frequencies(d, {
        "rope_type": "yarn", "rope_theta": b, "factor": s, "original_max_position_embeddings": L,
        "beta_fast": beta_fast, "beta_slow": beta_slow})
    gamma = np.clip((inv / theta - 1 / s) / (1 - 1 / s), 0.0, 1.0)
    turns = L * theta / (2 * np.pi)
    half = d // 2
    body = [_text(0, FONT + 2, label("dg_yarn_title"), size=FONT + 2, weight="bold")]
    left, right = 52, WIDTH - 8
    cell = (right - left) / half
    # the curve of gamma
    top, h = 40, 110
    body.append(_rect(left, top, right - left, h, "none", rx=0))
    for gv in (0.0, 0.5, 1.0):
        yy = top + h - gv * h
        body.append(_text(left - 6, yy + 5, f"{gv:g}", anchor="end", fill=MUTED))
    pts = " ".join(f"{left + (i + 0.5) * cell:.1f},{top + h - g * h:.1f}"
                   for i, g in enumerate(gamma))
    body.append(f'<polyline points="{pts}" style="fill:none;stroke:{C1};stroke-width:2.5"/>')
    body.append(_text(left + 6, top + h + FONT + 6, label("dg_kept_share"), fill=MUTED))
    # the strip of pairs
    y = top + h + FONT + 18
    colors = []
    for g in gamma:
        colors.append(C1 if g >= 1 - 1e-9 else (C2 if g <= 1e-9 else C3))
    for i, c in enumerate(colors):
        body.append(f'<rect x="{left + i * cell:.1f}" y="{y}" width="{cell + 0.3:.1f}" '
                    f'height="26" style="fill:{c}"/>')
    body.append(_text(left, y + 26 + FONT + 4, label("dg_pair_axis").format(n=half - 1),
                      fill=MUTED))
    # legend: each region with its range of turns in L
    y += 26 + FONT + 20
    regions = [(C1, "dg_keep", gamma >= 1 - 1e-9), (C3, "dg_blend", (gamma > 1e-9) &
                                                   (gamma < 1 - 1e-9)),
               (C2, "dg_interp", gamma <= 1e-9)]
    for color, key, mask in regions:
        if not mask.any():
            continue
        lo, hi = float(turns[mask].min()), float(turns[mask].max())
        body.append(_rect(0, y, 18, 18, color, rx=2))
        body.append(_text(26, y + 14, label(key)))
        span = label("dg_turns") + label("colon") + f"{_num(lo)} – {_num(hi)}"
        body.append(_text(WIDTH - 4, y + 14, span,
                          anchor="end", fill=MUTED))
        y += 26
    return _svg(body, y + 4, label("dg_yarn_title"))


def _num(x: float) -> str:
    return f"{x:.2g}" if x < 10 else f"{x:,.0f}"
