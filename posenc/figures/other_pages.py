"""Figures and tables of the chapter ``other-encodings``.

Each function draws what the page has just computed; words go through
:func:`posenc.figures._style.label`, so the page's ``set_language`` call picks English or
Chinese.
"""

from __future__ import annotations

import numpy as np

from ._style import add_labels, label, new_figure
from ._tables import BookTable

__all__ = ["t5_bucket_figure", "nope_readout_figure", "other_taxonomy_table"]

add_labels({
    "oth_offset": {"en": "offset $j - i$ (key position − query position)",
                   "zh": "偏移 $j - i$（键位置 − 查询位置）"},
    "oth_bucket": {"en": "bucket", "zh": "桶编号"},
    "oth_bidirectional": {"en": "bidirectional (encoder)", "zh": "双向（编码器）"},
    "oth_causal": {"en": "causal (decoder)", "zh": "因果（解码器）"},
    "oth_t5_title": {"en": "T5 buckets: {b} buckets, max_distance = {d}",
                     "zh": "T5 分桶：{b} 个桶，max_distance = {d}"},
    "oth_max_distance": {"en": "±max_distance", "zh": "±max_distance"},
    "oth_position": {"en": "query position $i$", "zh": "查询位置 $i$"},
    "oth_readout": {"en": "value read by the head", "zh": "注意力头读出的值"},
    "oth_one_over": {"en": "$1/(i+1)$", "zh": "$1/(i+1)$"},
    "oth_nope_title": {"en": "Uniform causal attention to a start marker",
                       "zh": "因果掩码下的均匀注意力读取起始标记"},
    # the taxonomy table
    "oth_col_scheme": {"en": "scheme", "zh": "方案"},
    "oth_col_where": {"en": "where position enters", "zh": "位置从哪里进入"},
    "oth_col_kind": {"en": "absolute / relative", "zh": "绝对 / 相对"},
    "oth_col_params": {"en": "parameters", "zh": "参数量"},
    "oth_col_extra": {"en": "extra numbers per layer", "zh": "每层额外数值"},
    "oth_col_beyond": {"en": "past the training length", "zh": "超出训练长度时"},
    "oth_col_models": {"en": "used by", "zh": "使用者"},
    "oth_name_learned": {"en": "learned absolute", "zh": "可学习位置嵌入"},
    "oth_name_sinusoidal": {"en": "sinusoidal", "zh": "正弦"},
    "oth_name_shaw": {"en": "Shaw et al.", "zh": "Shaw 等"},
    "oth_name_transformer_xl": {"en": "Transformer-XL", "zh": "Transformer-XL"},
    "oth_name_t5": {"en": "T5 bias", "zh": "T5 偏置"},
    "oth_name_alibi": {"en": "ALiBi", "zh": "ALiBi"},
    "oth_name_rope": {"en": "RoPE", "zh": "RoPE"},
    "oth_name_nope": {"en": "NoPE", "zh": "NoPE"},
    "oth_where_input": {"en": "added to the input", "zh": "加在输入上"},
    "oth_where_keys": {"en": "keys and values, every layer", "zh": "每层的键和值"},
    "oth_where_scores": {"en": "score terms, every layer", "zh": "每层的分数项"},
    "oth_where_bias": {"en": "bias on the scores", "zh": "分数上的偏置"},
    "oth_where_rotation": {"en": "rotation of q and k, every layer",
                           "zh": "每层旋转 q 和 k"},
    "oth_where_none": {"en": "nowhere (causal mask only)", "zh": "无（只有因果掩码）"},
    "oth_absolute": {"en": "absolute", "zh": "绝对"},
    "oth_relative": {"en": "relative", "zh": "相对"},
    "oth_implicit": {"en": "implicit", "zh": "隐式"},
    "oth_beyond_learned": {"en": "no row: cannot run", "zh": "没有对应行：无法运行"},
    "oth_beyond_formula": {"en": "defined, unseen values", "zh": "有定义，但取值未见过"},
    "oth_beyond_clipped": {"en": "offsets > {k} share one vector",
                           "zh": "偏移 > {k} 共用一个向量"},
    "oth_beyond_buckets": {"en": "distances ≥ {r} share one bucket",
                           "zh": "距离 ≥ {r} 共用一个桶"},
    "oth_beyond_linear": {"en": "defined, same penalty rule", "zh": "有定义，惩罚规则不变"},
    "oth_beyond_nope": {"en": "nothing to extrapolate", "zh": "没有需要外推的编码"},
    "oth_table_note": {"en": "Counts for n = {n} tokens, d_model = {d}, {h} heads, {l} layers, "
                             "a learned table of {L} rows, Shaw's k = {k}, T5's {b} buckets.",
                       "zh": "计数条件：n = {n} 个词元，d_model = {d}，{h} 个头，{l} 层，可学习位置嵌入 {L} "
                             "行，Shaw 的 k = {k}，T5 的 {b} 个桶。"},
})

_MODELS = {
    "learned": "BERT, GPT-2, ViT",
    "sinusoidal": "Transformer (2017)",
    "shaw": "—",
    "transformer_xl": "Transformer-XL",
    "t5": "T5",
    "alibi": "BLOOM, MPT",
    "rope": "LLaMA, GPT-NeoX",
    "nope": "SmolLM3, Llama 4 (some layers)",
}
_MODELS_ZH = {"nope": "SmolLM3、Llama 4（部分层）"}


def t5_bucket_figure(offsets, bidirectional, causal, *, num_buckets=32, max_distance=128):
    """T5's bucket index against the offset ``j - i``, bidirectional and causal.

    Parameters
    ----------
    offsets : array_like of int, shape (n,)
        The offsets on the x axis.
    bidirectional, causal : array_like of int, shape (n,)
        The bucket of each offset in each form (from
        :func:`posenc.t5_relative_position_bucket`).
    num_buckets, max_distance : int, keyword-only
        The settings, for the title and the ``±max_distance`` marks.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If the three arrays do not have the same 1-D shape.

    Examples
    --------
    >>> import posenc
    >>> r = np.arange(-40, 41)
    >>> fig = t5_bucket_figure(r, posenc.t5_relative_position_bucket(r),
    ...                        posenc.t5_relative_position_bucket(r, bidirectional=False))
    >>> len(fig.axes)
    2
    """
    offsets = np.asarray(offsets)
    bi, ca = np.asarray(bidirectional), np.asarray(causal)
    if offsets.ndim != 1 or bi.shape != offsets.shape or ca.shape != offsets.shape:
        raise ValueError(
            "offsets, bidirectional and causal must be 1-D arrays of one length, got shapes "
            f"{offsets.shape}, {bi.shape}, {ca.shape}"
        )
    fig, axes = new_figure(1, 2, figsize=(9.6, 3.6), sharey=True)
    for ax, buckets, key, color in ((axes[0], bi, "oth_bidirectional", "C0"),
                                    (axes[1], ca, "oth_causal", "C3")):
        ax.step(offsets, buckets, where="mid", color=color, lw=1.4)
        for edge in (-max_distance, max_distance):
            if offsets.min() <= edge <= offsets.max():
                ax.axvline(edge, color="0.55", lw=0.8, ls="--")
        ax.axvline(0, color="0.8", lw=0.8)
        ax.set(xlabel=label("oth_offset"), title=label(key))
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel(label("oth_bucket"))
    fig.suptitle(label("oth_t5_title").format(b=num_buckets, d=max_distance), fontsize=11)
    return fig


def nope_readout_figure(readout):
    """What a causal head with equal scores reads from a start marker, per position.

    Parameters
    ----------
    readout : array_like of float, shape (n,)
        The value read at each query position ``i = 0 .. n-1``.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If ``readout`` is not 1-D and non-empty.

    Examples
    --------
    >>> fig = nope_readout_figure(1 / np.arange(1, 9))
    >>> len(fig.axes[0].get_lines())
    2
    """
    readout = np.asarray(readout, dtype=np.float64)
    if readout.ndim != 1 or readout.size == 0:
        raise ValueError(f"readout must be a non-empty 1-D array, got shape {readout.shape}")
    i = np.arange(readout.size)
    fig, ax = new_figure(figsize=(6.4, 3.4))
    dense = np.linspace(0, readout.size - 1, 200)
    ax.plot(dense, 1.0 / (dense + 1.0), color="0.6", lw=1.0, label=label("oth_one_over"))
    ax.plot(i, readout, "o", color="C0", label=label("oth_readout"))
    ax.set(xlabel=label("oth_position"), ylabel=label("oth_readout"),
           title=label("oth_nope_title"))
    ax.legend()
    ax.grid(True, alpha=0.3)
    return fig


def _count(value):
    return f"{int(value):,}"


def other_taxonomy_table(costs, *, seq_len, d_model, n_heads, n_layers, max_len,
                         max_relative_position, num_buckets, last_bucket_start):
    """The chapter's taxonomy: where position enters, kind, costs, and length behaviour.

    Parameters
    ----------
    costs : dict
        The result of :func:`posenc.analysis.other_encodings.scheme_costs` for the same
        settings.
    seq_len, d_model, n_heads, n_layers, max_len, max_relative_position, num_buckets : int
        The settings (for the note and the cells that name them).
    last_bucket_start : int
        Smallest distance in T5's last bucket (:func:`posenc.t5_bucket_layout`).

    Returns
    -------
    BookTable

    Raises
    ------
    ValueError
        If ``costs`` lacks a scheme.

    Examples
    --------
    >>> from posenc.analysis.other_encodings import scheme_costs
    >>> kw = dict(seq_len=8, d_model=16, n_heads=2, n_layers=2, max_len=8,
    ...           max_relative_position=2, num_buckets=32)
    >>> t = other_taxonomy_table(scheme_costs(**kw), last_bucket_start=91, **kw)
    >>> len(t.rows)
    8
    """
    from ..analysis.other_encodings import SCHEMES

    missing = [s for s in SCHEMES if s not in costs]
    if missing:
        raise ValueError(f"costs lacks the schemes {missing}")
    where = {"learned": "oth_where_input", "sinusoidal": "oth_where_input",
             "shaw": "oth_where_keys", "transformer_xl": "oth_where_scores",
             "t5": "oth_where_bias", "alibi": "oth_where_bias",
             "rope": "oth_where_rotation", "nope": "oth_where_none"}
    kind = {"learned": "oth_absolute", "sinusoidal": "oth_absolute", "nope": "oth_implicit"}
    beyond = {
        "learned": label("oth_beyond_learned"),
        "sinusoidal": label("oth_beyond_formula"),
        "shaw": label("oth_beyond_clipped").format(k=max_relative_position),
        "transformer_xl": label("oth_beyond_formula"),
        "t5": label("oth_beyond_buckets").format(r=last_bucket_start),
        "alibi": label("oth_beyond_linear"),
        "rope": label("oth_beyond_formula"),
        "nope": label("oth_beyond_nope"),
    }
    zh = label("oth_col_scheme") != "scheme"
    rows = []
    for s in SCHEMES:
        models = _MODELS_ZH.get(s, _MODELS[s]) if zh else _MODELS[s]
        rows.append([label(f"oth_name_{s}"), label(where[s]), label(kind.get(s, "oth_relative")),
                     _count(costs[s]["parameters"]), _count(costs[s]["extra_per_layer"]),
                     beyond[s], models])
    header = [label(k) for k in ("oth_col_scheme", "oth_col_where", "oth_col_kind",
                                 "oth_col_params", "oth_col_extra", "oth_col_beyond",
                                 "oth_col_models")]
    note = label("oth_table_note").format(n=seq_len, d=d_model, h=n_heads, l=n_layers,
                                          L=max_len, k=max_relative_position, b=num_buckets)
    return BookTable(header, rows, align="lllrrll", note=note)
