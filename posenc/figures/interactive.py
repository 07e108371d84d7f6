"""Interactive figures: a control (slider or menu) and a figure that redraws.

Every number a reader sees moving was computed here, by ``posenc``, when the page was
built: each function evaluates the library over the small set of settings its controls
span and returns an :class:`InteractiveFigure`, whose HTML output carries those values as
JSON.  The browser only draws and switches between them
(``posenc/figures/static/posenc-interactive.js``).  The output carries that renderer and
its stylesheet inline as well, so the figure works wherever HTML outputs run scripts
(Jupyter, Colab) without the network; the book's site, which loads them once per page,
removes the inline copies (``docs/_ext/posenc_figures.py``).  The one piece of arithmetic done in the
browser is the dot product of the two 2-vectors that :func:`interactive_rope_pair`
shows; a browser test compares it with ``posenc``.

Why a hand-written renderer rather than Plotly (about 3.5 MB of JavaScript) or Bokeh
(about 1 MB): the book needs lines, heat maps and a few arrows, which a ~15 KB SVG
renderer draws; it inherits the page's fonts (CJK included), follows the theme's dark
mode through CSS variables, and every page stays light enough for a phone.

The words follow :func:`posenc.figures.set_language`.  Values are rounded (the
``digits`` recorded with each figure) to keep the pages light; tests check them against
``posenc`` to that precision.

Examples
--------
>>> import posenc.figures as pf
>>> pf.set_language("en")
>>> fig = interactive_alibi(n_heads=4, lengths=(4, 8))
>>> fig.spec["kind"], [c["id"] for c in fig.spec["controls"]]
('alibi', ['head', 'length'])
>>> 'class="posenc-ifig"' in fig._repr_html_()
True
"""

from __future__ import annotations

import functools
import html
import json
import math
from importlib import resources
from typing import Any

import numpy as np

from .. import alibi, multidim, relative, rope, rope_scaling, sinusoidal
from .._validation import check_base, check_count, check_d_model
from ..analysis.decay import rope_decay_bound
from ._style import add_labels, get_language, label

__all__ = [
    "InteractiveFigure",
    "interactive_sinusoidal",
    "interactive_rope_pair",
    "interactive_rope_decay",
    "interactive_long_context",
    "interactive_alibi",
    "interactive_t5_buckets",
    "interactive_mrope",
]

add_labels({
    "ix_base": {"en": "base", "zh": "基数"},
    "ix_width": {"en": "width d", "zh": "维度 d"},
    "ix_position": {"en": "position p", "zh": "位置 p"},
    "ix_dimension": {"en": "dimension j", "zh": "维度 j"},
    "ix_pair_index": {"en": "pair i", "zh": "维度对 i"},
    "ix_wavelength": {"en": "wavelength (tokens)", "zh": "波长（词元）"},
    "ix_pair": {"en": "pair i", "zh": "维度对 i"},
    "ix_query_pos": {"en": "query position m", "zh": "查询位置 m"},
    "ix_key_pos": {"en": "key position n", "zh": "键位置 n"},
    "ix_offset": {"en": "offset m − n", "zh": "偏移 m − n"},
    "ix_score": {"en": "score of the pair", "zh": "该维度对的得分"},
    "ix_score_now": {"en": "q·k of this pair", "zh": "该维度对的 q·k"},
    "ix_query": {"en": "q at m", "zh": "位置 m 的 q"},
    "ix_key": {"en": "k at n", "zh": "位置 n 的 k"},
    "ix_distance": {"en": "relative distance r", "zh": "相对距离 r"},
    "ix_relative": {"en": "relative to r = 0", "zh": "相对于 r = 0"},
    "ix_bound": {"en": "decay bound B(r)", "zh": "衰减上界 B(r)"},
    "ix_ones": {"en": "score of q = k = 1", "zh": "q = k = 1 时的得分"},
    "ix_factor": {"en": "factor s", "zh": "倍数 s"},
    "ix_orig_len": {"en": "training length L", "zh": "训练长度 L"},
    "ix_scale": {"en": "scale of the pair", "zh": "该维度对的缩放"},
    "ix_train_len": {"en": "L", "zh": "L"},
    "ix_head": {"en": "head", "zh": "注意力头"},
    "ix_length": {"en": "length", "zh": "长度"},
    "ix_query_i": {"en": "query i", "zh": "查询 i"},
    "ix_key_j": {"en": "key j", "zh": "键 j"},
    "ix_slope": {"en": "slope", "zh": "斜率"},
    "ix_bias": {"en": "bias", "zh": "偏置"},
    "ix_buckets": {"en": "buckets", "zh": "桶数"},
    "ix_max_distance": {"en": "max distance", "zh": "最大距离"},
    "ix_direction": {"en": "attention", "zh": "注意力"},
    "ix_bidirectional": {"en": "bidirectional (encoder)", "zh": "双向（编码器）"},
    "ix_causal": {"en": "causal (decoder)", "zh": "因果（解码器）"},
    "ix_bucket": {"en": "bucket", "zh": "桶"},
    "ix_img_h": {"en": "image rows", "zh": "图像行数"},
    "ix_img_w": {"en": "image columns", "zh": "图像列数"},
    "ix_text_after": {"en": "text after", "zh": "后续文本"},
    "ix_text": {"en": "text", "zh": "文本"},
    "ix_image": {"en": "image", "zh": "图像"},
    "ix_ids": {"en": "(time, row, column)", "zh": "（时间，行，列）"},
    "ix_nojs": {"en": "This interactive figure needs JavaScript; the static figure on this "
                      "page shows the same quantity for one setting.",
                "zh": "这张交互图需要浏览器运行脚本；本页的静态图给出了同一个量在某一种设置下的样子。"},
    "ix_t_sin": {"en": "Sinusoidal encoding: the matrix and its wavelengths",
                 "zh": "正弦位置编码：矩阵与波长"},
    "ix_t_pair": {"en": "One RoPE pair: q at m, k at n", "zh": "一个 RoPE 维度对：q 在 m，k 在 n"},
    "ix_t_decay": {"en": "RoPE score against distance", "zh": "RoPE 得分随距离的变化"},
    "ix_t_long": {"en": "Scale of each pair under each long-context rule",
                  "zh": "各长上下文规则下每个维度对的缩放"},
    "ix_t_alibi": {"en": "ALiBi bias matrix", "zh": "ALiBi 偏置矩阵"},
    "ix_t_t5": {"en": "T5 bucket of each query–key pair", "zh": "T5：每对查询与键所在的桶"},
    "ix_t_mrope": {"en": "M-RoPE position ids of text and an image",
                   "zh": "文本与图像的 M-RoPE 位置编号"},
})


def _r(values, digits: int) -> Any:
    """``values`` rounded to ``digits`` decimals, as nested lists of Python floats."""
    a = np.round(np.asarray(values, dtype=np.float64), digits)
    a = a + 0.0  # no negative zeros in the JSON
    return a.tolist()


def _fmt(x: float) -> str:
    """A setting as a reader writes it: 10000, 1e+06 -> 1000000, 0.5."""
    x = float(x)
    return str(int(x)) if x.is_integer() else f"{x:g}"


def _values(values, name: str, check) -> list:
    """A non-empty list of distinct settings, each passed through ``check``."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a sequence of settings, got {values!r}")
    out = [check(v) for v in values]
    if not out:
        raise ValueError(f"{name} must not be empty")
    if len(set(out)) != len(out):
        raise ValueError(f"{name} must not repeat a setting, got {list(values)!r}")
    return out


def _control(cid: str, text: str, options, *, kind: str = "range", value: int = 0,
             texts=None) -> dict:
    opts = [{"value": o, "text": t} for o, t in
            zip(options, texts if texts is not None else [_fmt(o) for o in options])]
    return {"id": cid, "label": text, "kind": kind, "options": opts,
            "value": int(min(max(value, 0), len(opts) - 1))}


class InteractiveFigure:
    """A figure whose data ``posenc`` computed, drawn and switched in the browser.

    ``spec`` is a JSON-able dict: ``kind`` (which drawing), ``title``, ``controls`` (each
    with ``id``, ``label``, ``kind`` ``"range"`` or ``"select"``, ``options`` and the
    index of the initial ``value``), ``keys`` (the ids of the controls whose choice picks
    the data), ``data`` (one entry per combination of those controls, keyed by their
    option indices joined with ``","``), ``text`` (the figure's words) and ``digits``.
    The notebook output is HTML: a ``div.posenc-ifig`` holding the spec as JSON, which
    ``posenc-interactive.js`` turns into labelled controls and an SVG drawing; the
    renderer and its stylesheet follow inline (marked ``class="posenc-ifig-inline"``).
    """

    def __init__(self, spec: dict):
        self.spec = spec

    def to_json(self) -> str:
        # "</" cannot end the script element early; non-ASCII stays readable
        return json.dumps(self.spec, ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False).replace("</", "<\\/")

    def _repr_html_(self) -> str:
        lang = self.spec.get("lang", "en")
        return (f'<div class="posenc-ifig" data-kind="{html.escape(self.spec["kind"])}" '
                f'lang="{"zh-CN" if lang == "zh" else "en"}">'
                f'<p class="posenc-ifig-nojs">{html.escape(label("ix_nojs", lang))}</p>'
                f'<script type="application/json" class="posenc-ifig-data">{self.to_json()}'
                f'</script></div>{_inline_renderer()}')

    def __repr__(self) -> str:
        return f"<InteractiveFigure {self.spec['kind']!r}: {self.spec['title']}>"


#: The class of the inline ``<style>`` and ``<script>`` that :meth:`InteractiveFigure.
#: _repr_html_` appends; the book's site strips them (it loads both files once per page).
INLINE_CLASS = "posenc-ifig-inline"


@functools.cache
def _inline_renderer() -> str:
    """The renderer and its stylesheet, shipped with the package, as inline HTML."""
    static = resources.files(__package__) / "static"
    css = (static / "posenc-interactive.css").read_text(encoding="utf-8")
    js = (static / "posenc-interactive.js").read_text(encoding="utf-8")
    if "</" in css or "</script" in js.lower():
        raise ValueError("the inline renderer must not contain '</' (it would end its element)")
    return (f'<style class="{INLINE_CLASS}">{css}</style>'
            f'<script class="{INLINE_CLASS}">{js}</script>')


def _figure(kind: str, title_key: str, controls: list[dict], keys: list[str], data: dict,
            text: dict, digits: int) -> InteractiveFigure:
    lang = get_language()
    return InteractiveFigure({
        "kind": kind, "lang": lang, "title": label(title_key), "controls": controls,
        "keys": keys, "data": data, "text": {k: label(v) for k, v in text.items()},
        "digits": digits, "colon": label("colon"),  # 步长：2 in Chinese, step: 2 in English
    })


def _grid(*lists):
    """Every combination of option indices, with its data key."""
    for idx in np.ndindex(*[len(x) for x in lists]):
        yield ",".join(map(str, idx)), [lst[i] for lst, i in zip(lists, idx)]


# -- the figures ------------------------------------------------------------------

def interactive_sinusoidal(bases=(100.0, 10000.0, 1000000.0), widths=(16, 32, 64), *,
                           n_positions=48, digits=2):
    """The sinusoidal matrix and its wavelengths, for each base and width.

    Data: :func:`posenc.sinusoidal_encoding` ``(n_positions, d)`` and
    :func:`posenc.sinusoidal.wavelengths` for every ``(base, d)``.

    Raises
    ------
    ValueError, TypeError
        For an empty or repeated list, a base ``<= 1``, an odd width, a count below 1.
    """
    bases = _values(bases, "bases", lambda b: check_base(b, "bases"))
    widths = _values(widths, "widths", lambda w: check_d_model(w, "widths", even=True))
    n = check_count(n_positions, "n_positions", minimum=2)
    data = {}
    for key, (b, d) in _grid(bases, widths):
        data[key] = {"pe": _r(sinusoidal.sinusoidal_encoding(n, d, b), digits),
                     "wl": _r(sinusoidal.wavelengths(d, b), 3)}
    controls = [_control("base", label("ix_base"), bases, value=len(bases) // 2),
                _control("width", label("ix_width"), widths, value=len(widths) - 1)]
    return _figure("sinusoidal", "ix_t_sin", controls, ["base", "width"], data,
                   {"x": "ix_dimension", "y": "ix_position", "pair": "ix_pair_index",
                    "wl": "ix_wavelength"}, digits)


def interactive_rope_pair(bases=(100.0, 10000.0), d_model=16, *, n_positions=32, seed=0,
                          digits=4):
    """One RoPE pair: the query turned to position ``m``, the key to ``n``.

    Data, for each base: a fixed random query and key rotated by :func:`posenc.apply_rope`
    to every position ``0 .. n_positions-1`` (``(n_positions, d_model)`` each), and, for
    every pair, its score ``q_m . k_n`` against the offset ``m - n`` computed from the
    rotated vectors with ``n = 0``.  The browser draws the pair chosen by the slider and
    multiplies the two shown 2-vectors (the one formula it evaluates; tested).
    """
    bases = _values(bases, "bases", lambda b: check_base(b, "bases"))
    d = check_d_model(d_model, even=True)
    n = check_count(n_positions, "n_positions", minimum=2)
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, d))
    positions = np.arange(n)
    data = {}
    for key, (b,) in _grid(bases):
        qs = rope.apply_rope(np.tile(q, (n, 1)), positions, base=b)
        ks = rope.apply_rope(np.tile(k, (n, 1)), positions, base=b)
        # score of pair i at offset r = m - n, r in -(n-1) .. n-1: q at r (or 0), k at 0 (or -r)
        prod = np.concatenate([(qs[0] * ks[:0:-1]), qs * ks[0]])  # (2n-1, d)
        pair_scores = prod[:, 0::2] + prod[:, 1::2]                # (2n-1, d/2)
        data[key] = {"q": _r(qs, digits), "k": _r(ks, digits),
                     "score": _r(pair_scores.T, digits)}
    controls = [_control("base", label("ix_base"), bases, kind="select",
                         value=len(bases) - 1),
                _control("pair", label("ix_pair"), list(range(d // 2))),
                _control("m", label("ix_query_pos"), list(range(n)), value=5),
                _control("n", label("ix_key_pos"), list(range(n)), value=2)]
    return _figure("rope_pair", "ix_t_pair", controls, ["base"], data,
                   {"q": "ix_query", "k": "ix_key", "offset": "ix_offset",
                    "score": "ix_score", "now": "ix_score_now"}, digits)


def interactive_rope_decay(bases=(500.0, 10000.0, 500000.0), widths=(32, 64, 128), *,
                           max_distance=512, digits=4):
    """RoPE's decay bound and a real score against the relative distance.

    Data, for each ``(base, d)``: :func:`posenc.analysis.decay.rope_decay_bound` over
    ``r = 0 .. max_distance-1`` and the score of the all-ones query and key, the query
    rotated by :func:`posenc.apply_rope` to ``r`` and the key left at 0; both divided by
    their value at ``r = 0``.
    """
    bases = _values(bases, "bases", lambda b: check_base(b, "bases"))
    widths = _values(widths, "widths", lambda w: check_d_model(w, "widths", even=True))
    n = check_count(max_distance, "max_distance", minimum=2)
    r = np.arange(n)
    data = {}
    for key, (b, d) in _grid(bases, widths):
        bound = rope_decay_bound(r, d, b)
        ones = np.ones((n, d))
        score = rope.apply_rope(ones, r, base=b) @ np.ones(d)
        data[key] = {"bound": _r(bound / bound[0], digits), "ones": _r(score / score[0], digits)}
    controls = [_control("base", label("ix_base"), bases, value=1),
                _control("width", label("ix_width"), widths, value=len(widths) - 1)]
    return _figure("decay", "ix_t_decay", controls, ["base", "width"], data,
                   {"x": "ix_distance", "y": "ix_relative", "bound": "ix_bound",
                    "ones": "ix_ones"}, digits)


def _long_context_rules(factor: float, length: int, dim: int, base: float) -> dict:
    return {
        "PI": {"rope_type": "linear", "factor": factor, "rope_theta": base},
        "NTK-aware": {"rope_type": "default", "rope_theta": base * factor ** (dim / (dim - 2))},
        "YaRN": {"rope_type": "yarn", "factor": factor, "rope_theta": base,
                 "original_max_position_embeddings": length},
        "llama3": {"rope_type": "llama3", "factor": factor, "rope_theta": base,
                   "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": length},
    }


def interactive_long_context(factors=(2.0, 4.0, 8.0, 16.0, 32.0), lengths=(2048, 4096, 8192),
                             *, dim=128, base=500000.0, digits=4):
    """The scale ``theta_i / theta_i'`` of each pair against its wavelength under PI,
    NTK-aware scaling, YaRN and Llama 3.1's rule, for each factor and training length.

    Data: :func:`posenc.rope_scaling.rope_frequencies` of each rule (NTK-aware as plain
    RoPE with the base ``base * s ** (d / (d - 2))``) divided into the unscaled
    frequencies, and the unscaled wavelengths ``2 pi / theta_i``.
    """
    factors = _values(factors, "factors", lambda s: _check_factor(s))
    lengths = _values(lengths, "lengths", lambda n: check_count(n, "lengths", minimum=1))
    d = check_d_model(dim, "dim", even=True)
    if d < 4:
        raise ValueError(f"dim must be at least 4 (NTK-aware divides by d - 2), got {dim!r}")
    b = check_base(base)
    theta, _ = rope_scaling.rope_frequencies(d, {"rope_theta": b})
    data = {}
    for key, (s, length) in _grid(factors, lengths):
        rules = _long_context_rules(s, length, d, b)
        data[key] = {name: _r(theta / rope_scaling.rope_frequencies(d, p)[0], digits)
                     for name, p in rules.items()}
    controls = [_control("factor", label("ix_factor"), factors, value=2),
                _control("length", label("ix_orig_len"), lengths, value=1)]
    spec = _figure("long_context", "ix_t_long", controls, ["factor", "length"], data,
                   {"x": "ix_wavelength", "y": "ix_scale", "L": "ix_train_len"}, digits)
    spec.spec["wavelengths"] = _r(2 * np.pi / theta, 3)
    spec.spec["rules"] = list(_long_context_rules(2.0, 2, d, b))
    return spec


def _check_factor(s):
    if isinstance(s, bool) or not isinstance(s, (int, float, np.integer, np.floating)):
        raise TypeError(f"factors must be real numbers, got {s!r}")
    if not math.isfinite(s) or s <= 1:
        raise ValueError(f"factors must be finite and > 1, got {s!r}")
    return float(s)


def interactive_alibi(n_heads=8, lengths=(8, 16, 32), *, digits=3):
    """ALiBi's causal bias matrix of each head, for each length.

    Data: :func:`posenc.alibi.alibi_bias` ``(n_heads, length, length)`` (masked entries,
    minus infinity, become ``null``) and :func:`posenc.alibi.alibi_slopes`.
    """
    h = check_count(n_heads, "n_heads", minimum=1)
    lengths = _values(lengths, "lengths", lambda n: check_count(n, "lengths", minimum=1))
    data = {}
    for key, (n,) in _grid(lengths):
        bias = alibi.alibi_bias(n, h)
        rounded = _r(np.where(np.isfinite(bias), bias, 0.0), digits)
        finite = np.isfinite(bias)
        for hh in range(h):
            for i in range(n):
                for j in range(n):
                    if not finite[hh, i, j]:
                        rounded[hh][i][j] = None
        data[key] = {"bias": rounded}
    controls = [_control("head", label("ix_head"), list(range(h))),
                _control("length", label("ix_length"), lengths, value=1)]
    fig = _figure("alibi", "ix_t_alibi", controls, ["length"], data,
                  {"x": "ix_key_j", "y": "ix_query_i", "slope": "ix_slope",
                   "bias": "ix_bias"}, digits)
    fig.spec["slopes"] = _r(alibi.alibi_slopes(h), 6)
    return fig


def interactive_t5_buckets(num_buckets=(8, 16, 32), max_distances=(32, 64, 128), *,
                           length=40):
    """T5's bucket index of every query–key pair (``j - i``), bidirectional or causal.

    Data: :func:`posenc.relative.t5_relative_position_bucket` of
    :func:`posenc.relative.relative_positions` for each setting.
    """
    nbs = _values(num_buckets, "num_buckets",
                  lambda v: check_count(v, "num_buckets", minimum=2))
    mds = _values(max_distances, "max_distances",
                  lambda v: check_count(v, "max_distances", minimum=1))
    n = check_count(length, "length", minimum=2)
    rel = relative.relative_positions(n, n)
    data = {}
    directions = [True, False]
    for key, (bidi, nb, md) in _grid(directions, nbs, mds):
        buckets = relative.t5_relative_position_bucket(rel, bidirectional=bidi,
                                                       num_buckets=nb, max_distance=md)
        data[key] = {"b": np.asarray(buckets).astype(int).tolist()}
    controls = [_control("bidi", label("ix_direction"), directions, kind="select",
                         texts=[label("ix_bidirectional"), label("ix_causal")]),
                _control("buckets", label("ix_buckets"), nbs, value=len(nbs) - 1),
                _control("maxdist", label("ix_max_distance"), mds, value=len(mds) - 1)]
    return _figure("t5", "ix_t_t5", controls, ["bidi", "buckets", "maxdist"], data,
                   {"x": "ix_key_j", "y": "ix_query_i", "bucket": "ix_bucket"}, 0)


def interactive_mrope(heights=(1, 2, 3, 4, 5, 6), widths=(1, 2, 3, 4, 5, 6),
                      text_after=(1, 2, 3, 4), *, text_before=3):
    """M-RoPE ids ``(time, row, column)`` of a prompt: text, one image, text.

    Data: :func:`posenc.multidim.mrope_position_ids` of
    ``[text_before, (h, w), t]`` for every height, width and trailing text length.
    """
    hs = _values(heights, "heights", lambda v: check_count(v, "heights", minimum=1))
    ws = _values(widths, "widths", lambda v: check_count(v, "widths", minimum=1))
    ts = _values(text_after, "text_after", lambda v: check_count(v, "text_after"))
    before = check_count(text_before, "text_before")
    data = {}
    for key, (h, w, t) in _grid(hs, ws, ts):
        ids = multidim.mrope_position_ids([before, (h, w), t])
        data[key] = {"ids": np.asarray(ids).astype(int).tolist()}
    controls = [_control("h", label("ix_img_h"), hs, value=min(2, len(hs) - 1)),
                _control("w", label("ix_img_w"), ws, value=min(3, len(ws) - 1)),
                _control("t", label("ix_text_after"), ts, value=min(1, len(ts) - 1))]
    fig = _figure("mrope", "ix_t_mrope", controls, ["h", "w", "t"], data,
                  {"text": "ix_text", "image": "ix_image", "ids": "ix_ids"}, 0)
    fig.spec["before"] = before
    return fig
