"""Figures of the chapter *why-position* (attention ignores order; where PE enters) and the
ALiBi figure of the chapter *other-encodings*."""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from .._validation import check_bool
from ._style import add_labels, label, new_figure

__all__ = ["permuted_attention_outputs", "encoding_pipeline", "alibi_bias_figure"]

add_labels({
    "attn_output_feature": {"en": "output feature", "zh": "输出维度"},
    "attn_token": {"en": "token", "zh": "词元"},
    "attn_sentence": {"en": "“{s}”", "zh": "“{s}”"},
    "attn_value": {"en": "output value", "zh": "输出值"},
    "pipe_title": {"en": "where an additive positional encoding enters",
                   "zh": "加性位置编码进入模型的位置"},
    "pipe_ids": {"en": "token ids", "zh": "词元编号"},
    "pipe_embed": {"en": "embedding\nlookup", "zh": "词嵌入\n查表"},
    "pipe_scale": {"en": r"$\times\sqrt{d_\mathrm{model}}$", "zh": r"$\times\sqrt{d_\mathrm{model}}$"},
    "pipe_add": {"en": "+", "zh": "+"},
    "pipe_pe": {"en": "positional\nencoding PE($p$)", "zh": "位置编码\nPE($p$)"},
    "pipe_dropout": {"en": "dropout", "zh": "dropout"},
    "pipe_block": {"en": "Transformer\nblock 1", "zh": "第 1 个\nTransformer 块"},
    "pipe_more": {"en": "blocks 2 … N", "zh": "第 2 … N 个块"},
    "alibi_matrix_title": {"en": "head 1 ($m_1$ = {m:g}): bias by query and key",
                           "zh": "第 1 个头（$m_1$ = {m:g}）：各查询与键的偏置"},
    "alibi_query": {"en": "query position $i$", "zh": "查询位置 $i$"},
    "alibi_key": {"en": "key position $j$", "zh": "键位置 $j$"},
    "alibi_bias": {"en": "bias", "zh": "偏置"},
    "alibi_distance": {"en": "distance $i - j$", "zh": "距离 $i - j$"},
    "alibi_lines_title": {"en": "all {n} heads: bias $-m_h\\,(i - j)$",
                          "zh": "全部 {n} 个头：偏置 $-m_h\\,(i - j)$"},
    "alibi_head": {"en": "head {h}: $m$ = {m:.3g}", "zh": "第 {h} 个头：$m$ = {m:.3g}"},
})


def permuted_attention_outputs(out_a, tokens_a, out_b, tokens_b):
    """Two attention outputs as heatmaps, rows labelled by token, on one colour scale.

    For "dog bites man" and "man bites dog" the rows are the same vectors in another
    order: self-attention is permutation equivariant.

    Parameters
    ----------
    out_a, out_b : array_like
        Outputs of shape ``(n_tokens, d)`` for the two sentences.
    tokens_a, tokens_b : sequence of str
        The tokens of each sentence (row labels), ``n_tokens`` each.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If an output is not 2-D or its rows do not match its tokens, or the two outputs
        have different widths.

    Examples
    --------
    >>> import numpy as np
    >>> import posenc
    >>> attn = posenc.SelfAttention(8, seed=0)
    >>> a, b = ["dog", "bites", "man"], ["man", "bites", "dog"]
    >>> out_a, _ = attn(posenc.token_embeddings(a, 8))
    >>> out_b, _ = attn(posenc.token_embeddings(b, 8))
    >>> fig = permuted_attention_outputs(out_a, a, out_b, b)
    >>> [t.get_text() for t in fig.axes[1].get_yticklabels()]
    ['man', 'bites', 'dog']
    """
    a = np.asarray(out_a, dtype=np.float64)
    b = np.asarray(out_b, dtype=np.float64)
    for name, out, toks in (("out_a", a, tokens_a), ("out_b", b, tokens_b)):
        if out.ndim != 2 or out.shape[0] != len(toks):
            raise ValueError(f"{name} must have shape (len(tokens), d) = ({len(toks)}, d), "
                             f"got {out.shape}")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"out_a and out_b must have the same width, got {a.shape[1]} and {b.shape[1]}")
    vmax = float(max(np.abs(a).max(initial=0), np.abs(b).max(initial=0))) or 1.0
    fig, axes = new_figure(1, 2, figsize=(8.0, 2.6))
    sep = "" if all(len(t) == 1 and ord(t) > 0x2E80 for t in list(tokens_a)) else " "
    for ax, out, toks in ((axes[0], a, tokens_a), (axes[1], b, tokens_b)):
        im = ax.imshow(out, aspect="auto", cmap="RdBu_r", vmin=-vmax, vmax=vmax,
                       interpolation="nearest")
        ax.set_yticks(range(len(toks)), list(toks))
        ax.set(xlabel=label("attn_output_feature"), ylabel=label("attn_token"),
               title=label("attn_sentence").format(s=sep.join(toks)))
    fig.colorbar(im, ax=list(axes), shrink=0.9, label=label("attn_value"))
    return fig


def _box(ax, xy, text, color, width=1.5, height=0.9):
    x, y = xy
    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height,
                                boxstyle="round,pad=0.04,rounding_size=0.12",
                                fc=color, ec="0.25", lw=1.0))
    ax.text(x, y, text, ha="center", va="center", fontsize=9)


def _arrow(ax, start, end):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12,
                                 color="0.25", lw=1.0, shrinkA=0, shrinkB=0))


def encoding_pipeline(*, column=False):
    """A diagram: token ids -> embedding lookup -> x sqrt(d) -> + PE -> dropout -> block 1.

    The additive positional encoding (sinusoidal or learned) enters once, between the
    embedding layer and the first Transformer block.  Drawn with matplotlib patches;
    the words follow :func:`~posenc.figures.set_language`.  The stages run left to
    right, or top to bottom with ``column`` (the phone variant of the row).

    Parameters
    ----------
    column : bool, keyword-only
        Stack the stages top to bottom.

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> fig = encoding_pipeline()
    >>> any("block" in t.get_text() for t in fig.axes[0].texts)
    True
    >>> from posenc.figures import figure_variants, text_problems
    >>> [text_problems(shown) for shown in figure_variants(fig).values()]  # desktop, phone
    [[], []]
    """
    from functools import partial

    column = check_bool(column, "column")
    stages = [(label("pipe_ids"), "#e8eef7"), (label("pipe_embed"), "#dbe8f5"),
              (label("pipe_scale"), "#eeeeee"), None,
              (label("pipe_dropout"), "#eeeeee"), (label("pipe_block"), "#f6e3cf")]
    r = 0.32  # the addition node's radius
    if column:
        fig, ax = new_figure(figsize=(3.3, 5.9))
        ax.set_xlim(0, 4.6)
        ax.set_ylim(-0.4, 9.6)
        h = 0.95
        widths = [2.3 if stage else 2 * r for stage in stages]
        where = [(1.5, 8.6 - 1.5 * i) for i in range(len(stages))]
        pe_at, pe_w = (3.75, where[3][1] + 1.25), 1.6
    else:
        fig, ax = new_figure(figsize=(6.1, 2.5))
        h = 1.0
        widths = [1.9, 2.1, 1.6, 2 * r, 1.7, 2.3]
        edges = np.cumsum([0.0] + [w + 0.5 for w in widths])
        where = [(e + w / 2, 1.0) for e, w in zip(edges, widths, strict=False)]
        ax.set_xlim(-0.1, edges[-1] + 2.2)
        ax.set_ylim(-0.1, 3.3)
        pe_at, pe_w = (where[3][0], 2.6), 2.5
    ax.set_axis_off()
    for (xy, w, stage) in zip(where, widths, stages, strict=True):
        if stage is not None:
            _box(ax, xy, stage[0], stage[1], width=w, height=h)
    # the addition node and the positional encoding feeding it
    add = where[3]
    ax.add_patch(FancyBboxPatch((add[0] - r, add[1] - r), 2 * r, 2 * r,
                                boxstyle="circle,pad=0", fc="#fff4c2", ec="0.25", lw=1.0))
    ax.text(add[0], add[1], label("pipe_add"), ha="center", va="center", fontsize=14)
    _box(ax, pe_at, label("pipe_pe"), "#fff4c2", width=pe_w, height=1.1)
    if column:
        _arrow(ax, (pe_at[0], pe_at[1] - 0.55), (add[0] + r, add[1]))
    else:
        _arrow(ax, (pe_at[0], pe_at[1] - 0.55), (add[0], add[1] + r))
    for i in range(len(stages)):
        a, b = where[i], where[i + 1] if i + 1 < len(stages) else None
        ra = h / 2 if column and stages[i] else widths[i] / 2
        if b is None:  # the last block leads on to the rest
            end = (a[0], a[1] - ra - 0.45) if column else (a[0] + ra + 0.5, a[1])
            _arrow(ax, (a[0], a[1] - ra) if column else (a[0] + ra, a[1]), end)
            more = (end[0], end[1] - 0.1) if column else (end[0] + 0.05, end[1])
            ax.text(*more, label("pipe_more"), ha="center" if column else "left",
                    va="top" if column else "center", fontsize=9, color="0.3")
            break
        rb = h / 2 if column and stages[i + 1] else widths[i + 1] / 2
        if column:
            _arrow(ax, (a[0], a[1] - ra), (b[0], b[1] + rb))
        else:
            _arrow(ax, (a[0] + ra, a[1]), (b[0] - rb, b[1]))
    ax.set_title(label("pipe_title"))
    if not column:
        fig.phone_figure = partial(encoding_pipeline, column=True)
    return fig


def alibi_bias_figure(n_positions=12, n_heads=8):
    """ALiBi: the causal bias matrix of head 1, and the bias against distance for every head.

    Left, ``posenc.alibi_bias(n_positions, n_heads)[0]`` as a heatmap (the future keys,
    ``-inf``, left blank): every diagonal is constant, because the bias depends on the
    positions only through ``i - j``.  Right, the bias ``-m_h (i - j)`` against the
    distance ``i - j`` for every head: straight lines with the geometric slopes of
    :func:`posenc.alibi_slopes`.

    Parameters
    ----------
    n_positions : int, default 12
        Sequence length, ``>= 2``.
    n_heads : int, default 8
        Number of heads, ``>= 1``.

    Returns
    -------
    BookFigure

    Raises
    ------
    TypeError
        If an argument is not an integer.
    ValueError
        If ``n_positions < 2`` or ``n_heads < 1``.

    Examples
    --------
    >>> fig = alibi_bias_figure(6, 4)
    >>> len(fig.axes[1].get_lines())       # one line per head, and the zero line
    5
    """
    from .._validation import check_count
    from ..alibi import alibi_bias, alibi_slopes

    n = check_count(n_positions, "n_positions", minimum=2)
    slopes = alibi_slopes(n_heads)
    bias = alibi_bias(n, len(slopes))
    fig, (ax_m, ax_l) = new_figure(1, 2, figsize=(9.0, 3.6), gridspec_kw={"width_ratios": [1, 1.15]})
    head = np.where(np.isfinite(bias[0]), bias[0], np.nan)
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="white")  # 0 bright, future blank
    im = ax_m.imshow(head, cmap=cmap, interpolation="nearest", vmax=0.0)
    ax_m.set(xlabel=label("alibi_key"), ylabel=label("alibi_query"),
             title=label("alibi_matrix_title").format(m=float(slopes[0])))
    fig.colorbar(im, ax=ax_m, shrink=0.9, label=label("alibi_bias"))
    distance = np.arange(n)
    colors = matplotlib.colormaps["viridis"](np.linspace(0.0, 0.9, len(slopes)))
    for h, (m, color) in enumerate(zip(slopes, colors), start=1):
        ax_l.plot(distance, -m * distance, marker=".", color=color,
                  label=label("alibi_head").format(h=h, m=float(m)))
    ax_l.axhline(0.0, color="0.6", lw=0.8)
    ax_l.set(xlabel=label("alibi_distance"), ylabel=label("alibi_bias"),
             title=label("alibi_lines_title").format(n=len(slopes)))
    ax_l.legend(fontsize=9, loc="lower left", ncol=2 if len(slopes) > 4 else 1)
    fig.get_layout_engine().set(wspace=0.12)
    return fig
