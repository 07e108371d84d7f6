"""Figures of the chapter ``models`` and of ``python -m posenc inspect --plot``.

Each function draws a :class:`posenc.atlas.ModelDescription` (or several); nothing about
the model is recomputed here.  Words go through :func:`posenc.figures._style.label`.
"""

from __future__ import annotations

import numpy as np

from ._style import add_labels, label, new_figure
from ._tables import BookTable

__all__ = ["model_spectrum_figure", "atlas_wavelength_figure", "atlas_table",
           "temperature_figure", "logit_scale_figure"]

add_labels({
    "models_pair": {"en": "pair $i$", "zh": "维度对 $i$"},
    "models_wavelength": {"en": "wavelength $2\\pi/\\theta_i$ (tokens)",
                          "zh": "波长 $2\\pi/\\theta_i$（词元）"},
    "models_pretrained": {"en": "as pretrained", "zh": "预训练时"},
    "models_scaled": {"en": "after the long-context rule", "zh": "经长上下文规则缩放后"},
    "models_training_length": {"en": "training length", "zh": "训练长度"},
    "models_no_turn": {"en": "frequency 0 (never turns)", "zh": "频率为 0（不旋转）"},
    "models_longest_over_span": {"en": "longest wavelength / span the layer sees",
                                 "zh": "最长波长 / 该层看到的跨度"},
    "models_col_model": {"en": "model", "zh": "模型"},
    "models_col_type": {"en": "rope type", "zh": "类型"},
    "models_col_base": {"en": "base", "zh": "基数"},
    "models_col_rotated": {"en": "rotated", "zh": "参与旋转的维数"},
    "models_col_scaling": {"en": "scaling", "zh": "缩放"},
    "models_col_lengths": {"en": "original / configured", "zh": "原始 / 配置长度"},
    "models_col_layers": {"en": "layers", "zh": "层"},
    "models_col_offset": {"en": "largest offset", "zh": "最大偏移"},
    "models_col_longest": {"en": "longest λ / W", "zh": "最长波长 λ / W"},
    "models_col_turning": {"en": "pairs turning in W", "zh": "W 内转满一圈的维度对"},
    "models_table_note": {
        "en": "W: the span of the RoPE layers that see furthest, a sliding window, a chunk "
              "or the original length; the largest offset RoPE meets is W − 1. "
              "λ: wavelength of those layers' slowest pair as pretrained. Original: "
              "original_max_position_embeddings, else max_position_embeddings. "
              "-: the config does not say.",
        "zh": "W：看得最远的 RoPE 层的跨度，即滑动窗口、分块或原始长度；RoPE 遇到的最大偏移为 "
              "W − 1。λ：这些层最慢维度对在预训练时的波长。原始长度：original_max_position_embeddings，"
              "没有时取 max_position_embeddings。-：配置中没有这一项。"},
    "models_sliding": {"en": "sliding", "zh": "滑动窗口"},
    "models_chunked": {"en": "chunked", "zh": "分块"},
    "models_global": {"en": "global", "zh": "全局"},
    "models_nope_global": {"en": "NoPE global", "zh": "NoPE 全局"},
    "models_none": {"en": "none", "zh": "无"},
    "models_position": {"en": "position $p$ + 1 (tokens)", "zh": "位置 $p$ + 1（词元）"},
    "models_temperature": {"en": "query multiplier $\\tau(p)$", "zh": "查询的乘数 $\\tau(p)$"},
    "models_layer_full": {"en": "global layers", "zh": "全局层"},
    "models_layer_sliding": {"en": "sliding-window layers", "zh": "滑动窗口层"},
    "models_layer_all": {"en": "all layers", "zh": "所有层"},
    "models_layer_chunked": {"en": "chunked layers", "zh": "分块注意力层"},
    "models_tokens_seen": {"en": "tokens the query sees, $n$", "zh": "查询看到的词元数 $n$"},
    "models_logit_factor": {"en": "factor on the logits", "zh": "logits 的放大倍数"},
    "models_logn": {"en": "Qwen log-n, $\\log_L n$", "zh": "Qwen：$\\log_L n$"},
    "models_yarn": {"en": "YaRN, $(0.1\\ln s + 1)^2$, $s = n/L$",
                    "zh": "YaRN：$(0.1\\ln s + 1)^2$，$s = n/L$"},
    "models_llama4": {"en": "Llama 4, $\\tau(n - 1)$", "zh": "Llama 4：$\\tau(n - 1)$"},
})

#: The words of an atlas name's qualifier (its part in parentheses) in each language: a
#: row whose config is not the one a checkpoint ships says so.
_QUALIFIERS = {
    "671B": {"en": "671B", "zh": "671B"},
    "with the YaRN the Qwen3 docs prescribe": {"en": "+ YaRN, as the Qwen3 docs recommend",
                                               "zh": "加上 Qwen3 文档推荐的 YaRN"},
    "reference ModelConfig": {"en": "120b reference config", "zh": "120b 的参考配置"},
    "final long-context training stage": {"en": "final long-context stage",
                                          "zh": "最后的长上下文训练阶段"},
}


def _model_label(description, language=None):
    """The name an atlas row shows: the model and, in the book's language, its qualifier.

    >>> from posenc.atlas import atlas_entry, describe_config
    >>> entry = atlas_entry("qwen3-8b")
    >>> _model_label(describe_config(entry["config"], name=entry["name"]), "zh")
    'Qwen3 8B（加上 Qwen3 文档推荐的 YaRN）'
    """
    from .._language import check_language, get_language

    _check_description(description)
    lang = get_language() if language is None else check_language(language)
    model, _, qualifier = description.name.partition(" (")
    if not qualifier:
        return model
    qualifier = qualifier.removesuffix(")")
    words = _QUALIFIERS.get(qualifier, {}).get(lang, qualifier)
    return f"{model}（{words}）" if lang == "zh" else f"{model} ({words})"


_LAYER_TITLE = {"full_attention": "models_layer_full", "sliding_attention": "models_layer_sliding",
                "chunked_attention": "models_layer_chunked", "all": "models_layer_all"}


def _check_description(d, name="description"):
    from ..atlas import ModelDescription

    if not isinstance(d, ModelDescription):
        raise TypeError(f"{name} must be a posenc.atlas.ModelDescription, got {type(d).__name__}")


def model_spectrum_figure(description):
    """Wavelength of every pair of each RoPE layer type, before and after scaling.

    One panel per layer type that uses RoPE, stacked (so that the figure stays legible
    on a phone): the wavelength :math:`2\\pi/\\theta_i` as pretrained and with the
    long-context rule (log scale), the training length as a line, and the pairs with
    frequency 0 (proportional RoPE) marked along the top.
    """
    _check_description(description)
    layers = description.layers
    fig, axes = new_figure(len(layers), 1, figsize=(5.2, 0.6 + 2.9 * len(layers)), squeeze=False)
    length = description.training_length
    for ax, layer in zip(axes[:, 0], layers):
        i = np.arange(layer.inv_freq.size)
        for inv, key, style in ((layer.plain_inv_freq, "models_pretrained", "o"),
                                (layer.inv_freq, "models_scaled", "x")):
            turning = inv > 0
            ax.semilogy(i[turning], 2 * np.pi / inv[turning], style, ms=3.5, label=label(key))
        if np.any(layer.inv_freq == 0):
            top = 2 * np.pi / layer.plain_inv_freq[layer.plain_inv_freq > 0].min()
            zero = i[layer.inv_freq == 0]
            ax.plot(zero, np.full(zero.size, top * 4), "|", color="0.5", label=label("models_no_turn"))
        if length is not None:
            ax.axhline(length, color="0.3", lw=1, ls="--", label=label("models_training_length"))
        title = label(_LAYER_TITLE[layer.layer_type]) if layer.layer_type in _LAYER_TITLE else layer.layer_type
        ax.set_title(_model_label(description) + label("colon") + title, fontsize=10)
        ax.set_xlabel(label("models_pair"))
        ax.set_ylabel(label("models_wavelength"))
    # one legend for every panel, under them, where it covers no point
    named = {}
    for ax in axes[:, 0]:
        for handle, word in zip(*ax.get_legend_handles_labels(), strict=True):
            named.setdefault(word, handle)
    fig.legend(list(named.values()), list(named), loc="outside lower center", ncols=2,
               fontsize=9, frameon=False)
    return fig


_SPAN_MARKERS = (("sliding", "s", "models_sliding"), ("chunked", "D", "models_chunked"),
                 (None, "o", "models_global"))


def atlas_wavelength_figure(descriptions):
    """Each RoPE layer type's longest wavelength over the span it sees, one row per model.

    The span is :meth:`posenc.atlas.ModelDescription.span`: the sliding window, the chunk,
    or for global layers the training length.  A layer type whose span is unknown (a
    global layer in a config without a length) is left out, and so is a model with no
    known span.  Markers tell sliding-window, chunked and global layers apart.  A marker
    right of the dashed line (ratio 1) means that the layer's slowest pair never
    completes a turn within the offsets the layer can see.
    """
    descriptions = list(descriptions)
    if not descriptions:
        raise ValueError("descriptions must not be empty")
    for k, d in enumerate(descriptions):
        _check_description(d, f"descriptions[{k}]")
    known = []
    for d in descriptions:
        points = [(layer.window_kind, d.wavelength_over_span(layer)) for layer in d.layers]
        points = [(kind, x) for kind, x in points if x is not None]
        if points:
            known.append((d, points))
    if not known:
        raise ValueError("descriptions must include a model with a known span")
    known.sort(key=lambda item: min(x for _, x in item[1]))
    fig, ax = new_figure(figsize=(5.2, 1.2 + 0.36 * len(known)))
    for y, (_, points) in enumerate(known):
        xs = [x for _, x in points]
        ax.hlines(y, min(1.0, *xs), max(1.0, *xs), color="0.8", lw=1.5)
    for kind, marker, key in _SPAN_MARKERS:
        xs = [x for _, points in known for k, x in points if k == kind]
        ys = [y for y, (_, points) in enumerate(known) for k, _x in points if k == kind]
        if xs:
            ax.semilogx(xs, ys, marker, ms=6, ls="none", label=label(key))
    ax.set_yticks(np.arange(len(known)), [_model_label(d) for d, _ in known], fontsize=9)
    ax.axvline(1.0, color="0.4", lw=1, ls="--")
    ax.set_xlabel(label("models_longest_over_span"))
    ax.legend(fontsize=9, loc="lower right")
    return fig


def _layers_words(d):
    parts = []
    for layer in d.layers:
        n = "" if layer.layers is None else f"{layer.layers} "
        if layer.window is None:
            parts.append(n + label("models_global"))
        else:
            parts.append(n + label(f"models_{layer.window_kind}") + f" {layer.window:,}")
    if d.nope_layers:
        parts.append(f"{d.nope_layers} " + label("models_nope_global"))
    return " + ".join(parts)


def _grouped(text):
    """Whole numbers in ``text`` written as the table writes lengths: ``1e+06`` and
    ``500000`` as ``1,000,000`` and ``500,000``.

    >>> _grouped("10000 / 1e+06")
    '10,000 / 1,000,000'
    """
    import re

    def one(m):
        value = float(m.group(0))
        return f"{value:,.0f}" if value.is_integer() else m.group(0)

    return re.sub(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?", one, str(text))


def atlas_table(descriptions):
    """The atlas as a table: one row per model, the columns of ``ModelDescription.row``.

    Examples
    --------
    >>> from posenc.atlas import atlas
    >>> t = atlas_table(atlas())
    >>> len(t.rows) == len(atlas())
    True
    """
    descriptions = list(descriptions)
    if not descriptions:
        raise ValueError("descriptions must not be empty")
    for k, d in enumerate(descriptions):
        _check_description(d, f"descriptions[{k}]")

    def length(n):
        return "-" if n is None else f"{n:,}"

    rows = []
    for d in descriptions:
        r = d.row()
        scaling = label("models_none") if r["scaling"] == "none" else r["scaling"]
        ratio = r["longest_wavelength_over_span"]
        turning = "-" if r["pairs_turning"] is None else f"{r['pairs_turning']} / {r['pairs']}"
        rows.append([
            _model_label(d), r["rope_type"], _grouped(r["base"]), r["rotated"], scaling,
            f"{length(r['original_length'])} / {length(r['max_length'])}",
            _layers_words(d), length(r["largest_offset"]),
            "-" if ratio is None else f"{ratio:.3g}", turning,
        ])
    header = [label(k) for k in ("models_col_model", "models_col_type", "models_col_base",
                                 "models_col_rotated", "models_col_scaling", "models_col_lengths",
                                 "models_col_layers", "models_col_offset", "models_col_longest",
                                 "models_col_turning")]
    return BookTable(header, rows, align="lllrlrlrrr", note=label("models_table_note"),
                     wide=True)


def temperature_figure(positions, temperature, chunk=None):
    """Llama 4's NoPE-layer query multiplier against position (log x axis)."""
    positions = np.asarray(positions)
    temperature = np.asarray(temperature, dtype=float)
    if positions.shape != temperature.shape or positions.ndim != 1 or positions.size == 0:
        raise ValueError("positions and temperature must be 1-D arrays of the same non-zero length")
    fig, ax = new_figure(figsize=(5.2, 3.4))
    ax.semilogx(positions + 1, temperature, "-", lw=1.5)
    if chunk is not None:
        ax.axvline(chunk, color="0.5", lw=1, ls="--")
    ax.set_xlabel(label("models_position"))
    ax.set_ylabel(label("models_temperature"))
    return fig


_SCALE_CURVES = ("models_logn", "models_yarn", "models_llama4")


def logit_scale_figure(tokens, logn, yarn, llama4, training_length):
    """Three factors on the attention logits against the number of tokens (log x axis):
    Qwen's log-n, YaRN's squared attention factor, Llama 4's temperature."""
    tokens = np.asarray(tokens, dtype=float)
    curves = [np.asarray(c, dtype=float) for c in (logn, yarn, llama4)]
    if tokens.ndim != 1 or tokens.size == 0 or any(c.shape != tokens.shape for c in curves):
        raise ValueError("tokens and the three curves must be 1-D arrays of the same "
                         "non-zero length")
    fig, ax = new_figure(figsize=(4.8, 3.4))
    for key, curve, style in zip(_SCALE_CURVES, curves, ("-", "--", "-.")):
        ax.semilogx(tokens, curve, style, lw=1.6, label=label(key))
    ax.axvline(training_length, color="0.5", lw=1, ls=":")
    ax.set_xlabel(label("models_tokens_seen"))
    ax.set_ylabel(label("models_logit_factor"))
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    return fig
