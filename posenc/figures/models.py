"""Figures of the chapter ``models`` and of ``python -m posenc inspect --plot``.

Each function draws a :class:`posenc.atlas.ModelDescription` (or several); nothing about
the model is recomputed here.  Words go through :func:`posenc.figures._style.label`.
"""

from __future__ import annotations

import numpy as np

from ._style import add_labels, label, new_figure

__all__ = ["model_spectrum_figure", "atlas_wavelength_figure"]

add_labels({
    "models_pair": {"en": "pair $i$", "zh": "维度对 $i$"},
    "models_wavelength": {"en": "wavelength $2\\pi/\\theta_i$ (tokens)",
                          "zh": "波长 $2\\pi/\\theta_i$（词元）"},
    "models_pretrained": {"en": "as pretrained", "zh": "预训练时"},
    "models_scaled": {"en": "after the long-context rule", "zh": "经长上下文规则缩放后"},
    "models_training_length": {"en": "training length", "zh": "训练长度"},
    "models_no_turn": {"en": "frequency 0 (never turns)", "zh": "频率为 0（不旋转）"},
    "models_longest_over_length": {"en": "longest wavelength / training length",
                                   "zh": "最长波长 / 训练长度"},
    "models_rotated_fraction": {"en": "rotated fraction of the head",
                                "zh": "被旋转的特征占比"},
})


def _check_description(d, name="description"):
    from ..atlas import ModelDescription

    if not isinstance(d, ModelDescription):
        raise TypeError(f"{name} must be a posenc.atlas.ModelDescription, got {type(d).__name__}")


def model_spectrum_figure(description):
    """Wavelength of every pair of each RoPE layer type, before and after scaling.

    One panel per layer type that uses RoPE: the wavelength :math:`2\\pi/\\theta_i`
    as pretrained and with the long-context rule (log scale), the training length as
    a line, and the pairs with frequency 0 (proportional RoPE) marked along the top.
    """
    _check_description(description)
    layers = description.layers
    fig, axes = new_figure(1, len(layers), figsize=(6.4 if len(layers) == 1 else 9.6, 3.6),
                           squeeze=False)
    length = description.training_length
    for ax, layer in zip(axes[0], layers):
        i = np.arange(layer.inv_freq.size)
        for inv, key, style in ((layer.plain_inv_freq, "models_pretrained", "o"),
                                (layer.inv_freq, "models_scaled", "x")):
            turning = inv > 0
            ax.semilogy(i[turning], 2 * np.pi / inv[turning], style, ms=3, label=label(key))
        if np.any(layer.inv_freq == 0):
            top = 2 * np.pi / layer.plain_inv_freq[layer.plain_inv_freq > 0].min()
            zero = i[layer.inv_freq == 0]
            ax.plot(zero, np.full(zero.size, top * 4), "|", color="0.5", label=label("models_no_turn"))
        if length is not None:
            ax.axhline(length, color="0.3", lw=1, ls="--", label=label("models_training_length"))
        ax.set_title(f"{description.name}: {layer.layer_type}", fontsize=9)
        ax.set_xlabel(label("models_pair"))
        ax.set_ylabel(label("models_wavelength"))
    axes[0][0].legend(fontsize=7, loc="upper left")
    return fig


def atlas_wavelength_figure(descriptions):
    """Each model's longest wavelength over its training length, and its rotated fraction."""
    descriptions = list(descriptions)
    if not descriptions:
        raise ValueError("descriptions must not be empty")
    for k, d in enumerate(descriptions):
        _check_description(d, f"descriptions[{k}]")
    known = [d for d in descriptions if d.training_length is not None]
    if not known:
        raise ValueError("descriptions must include a model with a known training length")
    fig, ax = new_figure(figsize=(6.4, 4.2))
    x = [d.global_rope.longest_wavelength(scaled=False) / d.training_length for d in known]
    y = [d.global_rope.rotated_fraction for d in known]
    ax.semilogx(x, y, "o")
    for xi, yi, d in zip(x, y, known):
        ax.annotate(d.name.split(" (")[0], (xi, yi), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    ax.axvline(1.0, color="0.5", lw=1, ls="--")
    ax.set_xlabel(label("models_longest_over_length"))
    ax.set_ylabel(label("models_rotated_fraction"))
    return fig
