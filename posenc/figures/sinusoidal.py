"""Figures of the chapters *sinusoidal* and *sinusoidal-properties*."""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import MaxNLocator

from .._validation import _is_integer, check_base, check_d_model
from ..analysis.similarity import dot_products_by_offset
from ..sinusoidal import sinusoidal_encoding, wavelengths
from ._style import add_labels, label, new_figure

__all__ = ["sinusoid_heatmap", "sinusoid_waveforms", "wavelength_spectrum",
           "dot_product_by_offset_figure", "row_across_columns_figure"]

add_labels({
    "heatmap_title": {"en": "sinusoidal encoding, $d = {d}$", "zh": "正弦位置编码，$d = {d}$"},
    "waveforms_title": {"en": "one column per curve", "zh": "每条曲线是一列"},
    "column_j": {"en": "column {j}", "zh": "第 {j} 列"},
    "pair_i": {"en": "pair index $i$", "zh": "维度对编号 $i$"},
    "wavelength": {"en": "wavelength (positions)", "zh": "波长（位置数）"},
    "spectrum_title": {"en": "wavelengths, $d = {d}$, base $= {base:g}$",
                       "zh": "波长谱，$d = {d}$，基数 $= {base:g}$"},
    "shortest": {"en": r"shortest: $2\pi$", "zh": r"最短：$2\pi$"},
    "longest": {"en": r"longest: $2\pi\cdot\mathrm{{base}}^{{(d-2)/d}}$ = {v:,.0f}",
                "zh": r"最长：$2\pi\cdot\mathrm{{base}}^{{(d-2)/d}}$ = {v:,.0f}"},
    "quoted": {"en": r"the paper's upper end: $2\pi\cdot\mathrm{{base}}$ = {v:,.0f} "
                     r"(never reached)",
               "zh": r"论文给出的上端：$2\pi\cdot\mathrm{{base}}$ = {v:,.0f}（取不到）"},
    "dot_product": {"en": r"$\mathrm{PE}(p)\cdot\mathrm{PE}(p+k)$",
                    "zh": r"$\mathrm{PE}(p)\cdot\mathrm{PE}(p+k)$"},
    "dot_title": {"en": "dot product depends only on the offset",
                  "zh": "点积只取决于偏移"},
    "from_p": {"en": "$p = {p}$", "zh": "$p = {p}$"},
    "row_title": {"en": "one row against the column index, $d = {d}$",
                  "zh": "一行编码随列号的变化，$d = {d}$"},
    "row_position": {"en": "position $p = {p}$", "zh": "位置 $p = {p}$"},
    "row_sines": {"en": "sine columns $2i$", "zh": "正弦列 $2i$"},
    "row_cosines": {"en": "cosine columns $2i+1$", "zh": "余弦列 $2i+1$"},
})


def sinusoid_heatmap(n_positions=100, d_model=64, base=10000.0):
    """The sinusoidal encoding as a heatmap: position down, dimension across.

    Parameters
    ----------
    n_positions : int, default 100
    d_model : int, default 64
        Even.
    base : float, default 10000.0

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> sinusoid_heatmap(10, 8).axes[0].get_ylabel()
    'position $p$'
    """
    pe = sinusoidal_encoding(n_positions, d_model, base)
    fig, ax = new_figure(figsize=(6.4, 4.2))
    im = ax.imshow(pe, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set(xlabel=label("dimension"), ylabel=label("position"),
           title=label("heatmap_title").format(d=d_model))
    fig.colorbar(im, ax=ax, label=label("value"))
    return fig


def sinusoid_waveforms(n_positions=100, d_model=64, columns=(0, 2, 8, 16), base=10000.0):
    """A few columns of the encoding against position: the wavelengths grow with ``j``.

    Parameters
    ----------
    n_positions : int, default 100
    d_model : int, default 64
        Even.
    columns : sequence of int, default (0, 2, 8, 16)
        Columns to draw (each ``< d_model``); even columns are sines, odd ones cosines.
    base : float, default 10000.0

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If a column is not in ``0 .. d_model - 1``.

    Examples
    --------
    >>> len(sinusoid_waveforms(50, 16, columns=(0, 1)).axes[0].lines)
    2
    """
    pe = sinusoidal_encoding(n_positions, d_model, base)
    cols = [int(c) for c in columns]
    if any(not 0 <= c < d_model for c in cols):
        raise ValueError(f"columns must be in 0 .. {d_model - 1}, got {cols}")
    fig, ax = new_figure(figsize=(6.4, 3.4))
    p = np.arange(n_positions)
    for n, c in enumerate(cols):
        ax.plot(p, pe[:, c], color=f"C{n}", lw=1.4, label=label("column_j").format(j=c))
    ax.set(xlabel=label("position"), ylabel=label("value"), title=label("waveforms_title"),
           ylim=(-1.15, 1.15))
    # Below the axes, not inside: every part of the plot has a curve in it.
    fig.legend(loc="outside lower center", ncols=min(len(cols), 4), frameon=False,
               fontsize=9)
    return fig


def wavelength_spectrum(d_model=512, base=10000.0):
    """Wavelength of every pair on a log scale, with the shortest, the longest and the paper's.

    The wavelengths ``2 pi base**(2i/d)`` form a straight line on a log scale, from
    ``2 pi`` to ``2 pi base**((d-2)/d)``; the ``2 pi base`` that the paper gives as the
    longest wavelength is drawn for comparison, above the last pair.

    Parameters
    ----------
    d_model : int, default 512
        Even.
    base : float, default 10000.0

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> wavelength_spectrum(64).axes[0].get_yscale()
    'log'
    """
    lam = wavelengths(d_model, base)
    i = np.arange(lam.size)
    longest, quoted = float(lam[-1]), 2 * np.pi * float(base)
    fig, ax = new_figure(figsize=(6.4, 3.8))
    ax.plot(i, lam, ".", ms=3, color="C0")
    ax.axhline(2 * np.pi, color="C2", lw=1, ls="--", label=label("shortest"))
    ax.axhline(longest, color="C1", lw=1, ls="--", label=label("longest").format(v=longest))
    ax.axhline(quoted, color="C3", lw=1, ls=":", label=label("quoted").format(v=quoted))
    ax.set_yscale("log")
    ax.set(xlabel=label("pair_i"), ylabel=label("wavelength"),
           title=label("spectrum_title").format(d=d_model, base=float(base)))
    ax.legend(loc="lower right", frameon=False, fontsize=9)
    return fig


def dot_product_by_offset_figure(d_model=64, n_offsets=200, positions=(0, 100, 300),
                                 base=10000.0):
    """``PE(p) . PE(p + k)`` against ``k`` from several ``p``: the curves coincide.

    Parameters
    ----------
    d_model : int, default 64
        Even.
    n_offsets : int, default 200
        Offsets ``k = 0 .. n_offsets - 1``.
    positions : sequence of int, default (0, 100, 300)
        Starting positions ``p``.
    base : float, default 10000.0

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> len(dot_product_by_offset_figure(16, 50, (0, 10)).axes[0].lines)
    2
    """
    ps = [int(p) for p in positions]
    pe = sinusoidal_encoding(max(ps) + n_offsets, d_model, base)
    fig, ax = new_figure(figsize=(6.4, 3.6))
    k = np.arange(n_offsets)
    styles = ["-", "--", ":", "-."]
    for n, p in enumerate(ps):
        ax.plot(k, dot_products_by_offset(pe, p)[:n_offsets], color=f"C{n}",
                ls=styles[n % 4], lw=2.2 - 0.5 * (n % 3), label=label("from_p").format(p=p))
    ax.set(xlabel=label("offset"), ylabel=label("dot_product"), title=label("dot_title"))
    ax.legend(frameon=False)
    return fig


def row_across_columns_figure(positions=(0, 4, 12, 40), d_model=512, base=10000.0):
    """Rows ``PE(p, .)`` drawn against the column index, one panel per position.

    A row is not a sine wave of the column index: along the row the angle ``p * omega_i``
    falls geometrically with the pair index ``i``, so the sine columns oscillate quickly
    on the left and ever more slowly to the right (a chirp), and end near 0 where the
    cosine columns end near 1.  Row 0 is flat: every sine is 0 and every cosine is 1.

    Parameters
    ----------
    positions : sequence of int, default (0, 4, 12, 40)
        One to six positions ``>= 0``, one panel each.
    d_model : int, default 512
        Even.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    BookFigure

    Raises
    ------
    TypeError
        If a position is not an integer.
    ValueError
        If ``positions`` is empty, has more than six entries or a negative one, or if
        ``d_model`` or ``base`` is invalid.

    Examples
    --------
    Row 0 is flat: every sine is 0, every cosine 1.

    >>> fig = row_across_columns_figure((0, 12), 64)
    >>> len(fig.axes)
    2
    >>> sines, cosines = fig.axes[0].lines[:2]
    >>> float(abs(sines.get_ydata()).max()), float(cosines.get_ydata().min())
    (0.0, 1.0)
    """
    ps = list(positions)
    if not 1 <= len(ps) <= 6:
        raise ValueError(f"positions must have 1 to 6 entries, got {len(ps)}")
    if not all(_is_integer(p) for p in ps):
        raise TypeError(f"positions must be integers, got {ps!r}")
    ps = [int(p) for p in ps]
    if min(ps) < 0:
        raise ValueError(f"positions must be >= 0, got {ps}")
    d = check_d_model(d_model, even=True)
    b = check_base(base)
    pe = sinusoidal_encoding(max(ps) + 1, d, b)
    j = np.arange(d)
    ncols = min(len(ps), 2)
    nrows = -(-len(ps) // ncols)
    fig, axes = new_figure(nrows, ncols, figsize=(6.4, 0.5 + 2.3 * nrows), squeeze=False)
    flat = axes.ravel()
    for ax in flat[len(ps):]:
        fig.delaxes(ax)
    for ax, p in zip(flat, ps):
        ax.plot(j[0::2], pe[p, 0::2], color="C0", lw=1.3, label=label("row_sines"))
        ax.plot(j[1::2], pe[p, 1::2], color="C1", lw=0.9, ls="--", label=label("row_cosines"))
        ax.axhline(0.0, color="0.75", lw=0.6, zorder=0)
        ax.set(xlim=(0, d - 1), ylim=(-1.2, 1.45), xlabel=label("dimension"),
               ylabel=label("value"))
        ax.set_title(label("row_position").format(p=p), fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(5, prune="upper"))  # no label past the edge
    fig.legend(*flat[0].get_legend_handles_labels(), loc="outside lower center", ncols=2,
               frameon=False, fontsize=9)
    fig.suptitle(label("row_title").format(d=d), fontsize=10)
    return fig
