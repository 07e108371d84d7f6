"""Figures of the chapter *naive-encodings*: raw, normalised and binary codes."""

from __future__ import annotations

import numpy as np

from .. import naive as _naive
from ..sinusoidal import sinusoidal_encoding
from ._style import add_labels, label, new_figure

__all__ = ["naive_encodings_figure", "binary_vs_sinusoid"]

add_labels({
    "naive_index_title": {"en": "raw index: grows without bound", "zh": "原始索引：无界增长"},
    "naive_norm_title": {"en": "normalised index: depends on length",
                         "zh": "归一化索引：随序列长度而变"},
    "naive_code_value": {"en": "code value", "zh": "编码取值"},
    "naive_embedding_scale": {"en": "typical embedding entry", "zh": "典型词嵌入分量"},
    "naive_length": {"en": "length {n}", "zh": "长度 {n}"},
    "binary_title": {"en": "binary code", "zh": "二进制编码"},
    "sinusoid_title": {"en": "sinusoidal encoding", "zh": "正弦位置编码"},
    "bit_j": {"en": "bit $j$", "zh": "第 $j$ 位"},
})


def naive_encodings_figure(n_positions=100, lengths=(5, 10, 50)):
    """Why the raw and the normalised index fail, in two panels.

    Left: the raw index value against position, next to the size of a typical
    embedding entry (about 1): the position soon dominates.  Right: the normalised
    index for sequences of several lengths: position 2 has a different code in each,
    and the step between neighbours shrinks as the sequence grows.

    Parameters
    ----------
    n_positions : int, default 100
        Positions on the left panel, ``>= 2``.
    lengths : sequence of int, default (5, 10, 50)
        Sequence lengths on the right panel, each ``>= 2``.

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> fig = naive_encodings_figure()
    >>> len(fig.axes)
    2
    """
    fig, (ax_a, ax_b) = new_figure(1, 2, figsize=(8.0, 3.4))
    idx = _naive.index_encoding(n_positions, 1)[:, 0]
    ax_a.plot(np.arange(n_positions), idx, color="C0", label=label("naive_code_value"))
    ax_a.axhspan(-1, 1, color="0.8", label=label("naive_embedding_scale"))
    ax_a.set(xlabel=label("position"), ylabel=label("naive_code_value"),
             title=label("naive_index_title"))
    ax_a.legend(loc="upper left", frameon=False)
    for c, n in enumerate(lengths):
        values = _naive.normalized_index_encoding(n, 1)[:, 0]
        ax_b.plot(np.arange(n), values, marker="o", ms=3, color=f"C{c}",
                  label=label("naive_length").format(n=n))
    ax_b.axvline(2, color="0.5", lw=0.8, ls=":")
    ax_b.set(xlabel=label("position"), ylabel=label("naive_code_value"),
             title=label("naive_norm_title"))
    ax_b.legend(frameon=False)
    return fig


def binary_vs_sinusoid(n_positions=64, d_model=16, base=10000.0):
    """The binary code and the sinusoidal encoding side by side, as heatmaps.

    Both are ``(n_positions, d_model)`` tables with position down and dimension across;
    the binary columns flip between 0 and 1 (column ``j`` with period ``2**(j+1)``,
    columns past ``log2(n_positions)`` stay 0), the sinusoidal columns vary smoothly with
    the same "fast to slow" order.  Both panels share one colour scale, [-1, 1].

    Parameters
    ----------
    n_positions : int, default 64
    d_model : int, default 16
        Even.
    base : float, default 10000.0

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> fig = binary_vs_sinusoid(32, 8)
    >>> [ax.get_title() for ax in fig.axes[:2]]
    ['binary code', 'sinusoidal encoding']
    """
    fig, (ax_a, ax_b) = new_figure(1, 2, figsize=(8.0, 4.0))
    tables = [
        (ax_a, _naive.binary_encoding(n_positions, d_model), "binary_title", "bit_j"),
        (ax_b, sinusoidal_encoding(n_positions, d_model, base), "sinusoid_title", "dimension"),
    ]
    for ax, table, title, xlabel in tables:
        im = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1,
                       interpolation="nearest", origin="upper")
        ax.set(title=label(title), xlabel=label(xlabel), ylabel=label("position"))
    fig.colorbar(im, ax=[ax_a, ax_b], shrink=0.85, label=label("value"))
    return fig
