"""Figures of the chapter ``long-context``.

Each function draws arrays the page has just computed (with :func:`posenc.rope_frequencies`
and :mod:`posenc.analysis.long_context`); nothing is recomputed here.  Words go through
:func:`posenc.figures._style.label`, so the page's ``set_language`` call picks the language.
"""

from __future__ import annotations

import numpy as np

from ._style import add_labels, label, new_figure

__all__ = [
    "long_context_scales_figure",
    "long_context_reach_figure",
    "long_context_score_figure",
    "long_context_entropy_figure",
]

add_labels({
    "lc_wavelength": {"en": "wavelength before scaling $\\lambda_i$ (tokens)",
                      "zh": "缩放前的波长 $\\lambda_i$（词元）"},
    "lc_scale": {"en": "scale $s_i = \\theta_i / \\theta_i'$",
                 "zh": "缩放倍数 $s_i = \\theta_i / \\theta_i'$"},
    "lc_trained_length": {"en": "training length $L$", "zh": "训练长度 $L$"},
    "lc_reach": {"en": "largest angle / largest trained angle",
                 "zh": "最大角度 / 训练中见过的最大角度"},
    "lc_seen": {"en": "seen in training", "zh": "训练中见过"},
    "lc_offset": {"en": "offset $r$ (tokens)", "zh": "偏移 $r$（词元）"},
    "lc_score": {"en": "score $a(r)$", "zh": "分数 $a(r)$"},
    "lc_fit_extrapolated": {"en": "fitted on $[0, L)$, evaluated beyond",
                            "zh": "在 $[0, L)$ 上拟合，向外求值"},
    "lc_fit_interpolated": {"en": "same fit, positions divided by $s$",
                            "zh": "同一拟合，位置除以 $s$"},
    "lc_keys": {"en": "number of keys $n$", "zh": "键的个数 $n$"},
    "lc_entropy": {"en": "attention entropy (nats)", "zh": "注意力的熵（奈特）"},
    "lc_plain": {"en": "plain", "zh": "不缩放"},
    "lc_with_temperature": {"en": "with YaRN's factor", "zh": "乘上 YaRN 的因子"},
})

_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def _check_curves(curves):
    if not curves:
        raise ValueError("curves must not be empty")
    out = []
    for name, x, y in curves:
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        if x.shape != y.shape or x.ndim != 1:
            raise ValueError(f"curve {name!r}: x and y must be 1-D of the same length")
        out.append((str(name), x, y))
    return out


def long_context_scales_figure(curves, trained_length):
    """The scale each rule applies to each pair, against the pair's wavelength (log-log).

    Parameters
    ----------
    curves : sequence of (name, wavelength, scale)
        One curve per rule, e.g. from :func:`posenc.analysis.long_context.pair_scales`.
    trained_length : float
        Drawn as a vertical line.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If ``curves`` is empty or a curve's arrays differ in shape.

    Examples
    --------
    >>> fig = long_context_scales_figure([("PI", [6.3, 100.0], [4.0, 4.0])], 50)
    >>> fig.axes[0].get_xscale(), fig.axes[0].get_yscale()
    ('log', 'log')
    """
    curves = _check_curves(curves)
    fig, ax = new_figure(figsize=(7.0, 4.2))
    for k, (name, lam, s) in enumerate(curves):
        ax.plot(lam, s, marker=_MARKERS[k % len(_MARKERS)], ms=3, lw=1.2, color=f"C{k}",
                label=name)
    ax.axvline(trained_length, color="0.4", lw=0.9, ls="--")
    ax.annotate(label("lc_trained_length"), (trained_length, 1.0), xytext=(4, 4),
                textcoords="offset points", fontsize=9, color="0.3")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(label("lc_wavelength"))
    ax.set_ylabel(label("lc_scale"))
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    return fig


def long_context_reach_figure(curves, trained_length):
    """Largest angle of each pair at the target length over the largest angle trained.

    Parameters
    ----------
    curves : sequence of (name, wavelength, reach)
        From :func:`posenc.analysis.long_context.angle_reach`.
    trained_length : float
        Drawn as a vertical line.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        As :func:`long_context_scales_figure`.

    Examples
    --------
    >>> fig = long_context_reach_figure([("plain", [6.3, 1e5], [1.0, 8.0])], 4096)
    >>> fig.axes[0].get_yscale()
    'log'
    """
    curves = _check_curves(curves)
    fig, ax = new_figure(figsize=(7.0, 4.0))
    ax.axhspan(0, 1.0, color="0.92", zorder=0)
    ax.annotate(label("lc_seen"), (0.01, 0.04), xycoords="axes fraction", fontsize=9,
                color="0.3")
    # Methods whose reach is the same at every pair (PI, YaRN and Llama 3.1 all keep
    # every angle inside the trained range) are one curve with one legend entry naming
    # them all: drawn one by one they hid each other.
    groups: list[tuple[int, list[str], np.ndarray, np.ndarray]] = []
    for k, (name, lam, reach) in enumerate(curves):
        lam, reach = np.asarray(lam, dtype=np.float64), np.asarray(reach, dtype=np.float64)
        for _, names, lam0, reach0 in groups:
            if lam0.shape == lam.shape and np.allclose(lam0, lam) and np.allclose(
                    reach0, reach, rtol=1e-9, atol=0, equal_nan=True):
                names.append(name)
                break
        else:
            groups.append((k, [name], lam, reach))
    for k, names, lam, reach in groups:
        ax.plot(lam, reach, marker=_MARKERS[k % len(_MARKERS)], ms=3, lw=1.2,
                color=f"C{k}", label=" = ".join(names))
    ax.axvline(trained_length, color="0.4", lw=0.9, ls="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    top = max(float(np.nanmax(r)) for _, _, r in curves)
    ax.set_ylim(0.5, max(2.0, top * 1.5))
    ax.set_xlabel(label("lc_wavelength"))
    ax.set_ylabel(label("lc_reach"))
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    return fig


def long_context_score_figure(offsets, extrapolated, interpolated, trained_length):
    """A score fitted on the trained offsets, evaluated beyond them and interpolated.

    Parameters
    ----------
    offsets, extrapolated, interpolated : array_like
        From :func:`posenc.analysis.long_context.fitted_score_extrapolation`.
    trained_length : float
        Drawn as a vertical line.

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> fig = long_context_score_figure([0, 1, 2, 3], [0.1, 0.2, 5.0, 50.0],
    ...                                 [0.1, 0.1, 0.2, 0.2], 2)
    >>> fig.axes[0].get_yscale()
    'symlog'
    """
    r = np.asarray(offsets, dtype=np.float64)
    fig, ax = new_figure(figsize=(7.0, 3.8))
    ax.plot(r, np.asarray(extrapolated, dtype=np.float64), lw=0.8, color="C3",
            label=label("lc_fit_extrapolated"))
    ax.plot(r, np.asarray(interpolated, dtype=np.float64), lw=0.8, color="C0",
            label=label("lc_fit_interpolated"))
    ax.axvline(trained_length, color="0.4", lw=0.9, ls="--")
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_xlabel(label("lc_offset"))
    ax.set_ylabel(label("lc_score"))
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    return fig


def long_context_entropy_figure(n_keys, entropy_plain, entropy_scaled, trained_length):
    """Attention entropy against the number of keys, without and with a temperature.

    Parameters
    ----------
    n_keys, entropy_plain, entropy_scaled : array_like
        Same length.
    trained_length : float
        Drawn as a vertical line; where ``n_keys`` contains it, the plain entropy there
        is drawn as a dotted horizontal line.

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> fig = long_context_entropy_figure([10, 100], [2.0, 4.0], [1.9, 3.5], 10)
    >>> fig.axes[0].get_xscale()
    'log'
    """
    n = np.asarray(n_keys, dtype=np.float64)
    fig, ax = new_figure(figsize=(6.4, 3.6))
    ax.plot(n, np.asarray(entropy_plain, dtype=np.float64), marker="o", ms=3, color="C0",
            label=label("lc_plain"))
    ax.plot(n, np.asarray(entropy_scaled, dtype=np.float64), marker="s", ms=3, color="C2",
            label=label("lc_with_temperature"))
    ax.axvline(trained_length, color="0.4", lw=0.9, ls="--")
    at_length = np.flatnonzero(n == trained_length)
    if at_length.size:  # the plain entropy at the training length, for reference
        ax.axhline(float(np.asarray(entropy_plain)[at_length[0]]), color="0.55", lw=0.8,
                   ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(label("lc_keys"))
    ax.set_ylabel(label("lc_entropy"))
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    return fig
