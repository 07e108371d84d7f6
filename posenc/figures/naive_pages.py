"""Figures of the chapters *naive-encodings* and *sinusoidal* (beyond those in
:mod:`posenc.figures.naive` and :mod:`posenc.figures.sinusoidal`).

The functions draw; the numbers they draw are computed in the page cells next to them
where the computation is the point (the norms of the raw index, the float32 errors),
and inside the function where they are a plain property of an encoding (binary
distances, wavelengths of two spectra that are not the paper's).
"""

from __future__ import annotations

import numpy as np

from .._validation import check_base, check_count, check_d_model
from ..naive import binary_encoding, normalized_index_encoding
from ..sinusoidal import inverse_frequencies, wavelengths
from ._style import add_labels, label, new_figure

__all__ = [
    "index_magnitude_figure",
    "normalized_gap_figure",
    "binary_distance_figure",
    "counter_waves_figure",
    "one_frequency_circles_figure",
    "frequency_variants_figure",
    "log_space_error_figure",
    "turns_within_figure",
]

add_labels({
    "np_norm": {"en": "Euclidean norm", "zh": "欧氏范数"},
    "np_pos_norm": {"en": r"position vector $\|\mathrm{PE}(p)\|$",
                    "zh": r"位置向量 $\|\mathrm{PE}(p)\|$"},
    "np_tok_norm": {"en": "token embeddings (min to max)", "zh": "词元嵌入（最小到最大）"},
    "np_cos": {"en": "cosine of two different tokens", "zh": "两个不同词元的余弦相似度"},
    "np_cos_title": {"en": "after adding the index", "zh": "加上索引之后"},
    "np_norm_title": {"en": "the index outgrows the embedding", "zh": "索引很快盖过词嵌入"},
    "np_len": {"en": "{n} tokens", "zh": "{n} 个词元"},
    "np_code": {"en": "code $p/(n-1)$", "zh": "编码 $p/(n-1)$"},
    "np_gap_title": {"en": "the same positions, two lengths", "zh": "同样的位置，两种长度"},
    "np_gap_k": {"en": "code difference for {k} tokens apart",
                 "zh": "相隔 {k} 个词元的编码差"},
    "np_length_n": {"en": "sequence length $n$", "zh": "序列长度 $n$"},
    "np_gap_curve_title": {"en": "{k} tokens apart, any length", "zh": "相隔 {k} 个词元，各种长度"},
    "np_step": {"en": r"$\|\mathrm{PE}(p+1)-\mathrm{PE}(p)\|$",
                "zh": r"$\|\mathrm{PE}(p+1)-\mathrm{PE}(p)\|$"},
    "np_step_title": {"en": "neighbours: distance jumps", "zh": "相邻位置：距离忽大忽小"},
    "np_from_ref": {"en": r"$\|\mathrm{{PE}}(q)-\mathrm{{PE}}({r})\|$",
                    "zh": r"$\|\mathrm{{PE}}(q)-\mathrm{{PE}}({r})\|$"},
    "np_from_ref_title": {"en": "distance from position {r}", "zh": "到位置 {r} 的距离"},
    "np_other_q": {"en": "position $q$", "zh": "位置 $q$"},
    "np_bit": {"en": "bit {j} (period {t})", "zh": "第 {j} 位（周期 {t}）"},
    "np_wave": {"en": "sinusoid of the same period", "zh": "同周期的正弦波"},
    "np_counter_title": {"en": "counter bits are square waves", "zh": "计数器的每一位都是方波"},
    "np_circle_title": {"en": r"$\omega = {w:g}$: positions 0 to {n}",
                        "zh": r"$\omega = {w:g}$：位置 0 到 {n}"},
    "np_column": {"en": "column (sine or cosine)", "zh": "列（正弦或余弦）"},
    "np_variants_title": {"en": "wavelength of every column, $d = {d}$",
                          "zh": "每一列的波长，$d = {d}$"},
    "np_paper": {"en": r"paper: $10000^{2i/d}$, sin/cos pairs",
                 "zh": r"论文：$10000^{2i/d}$，sin/cos 成对"},
    "np_halving": {"en": r"halving per column: $\omega_j = 1/2^j$, sines only",
                        "zh": r"逐列减半：$\omega_j = 1/2^j$，只用正弦"},
    "np_base_1000": {"en": r"base 1000: $\omega_j = 1/1000^{j/(d-1)}$",
                     "zh": r"基数 1000：$\omega_j = 1/1000^{j/(d-1)}$"},
    "np_rel_err": {"en": "relative error of $\\omega_i$", "zh": "$\\omega_i$ 的相对误差"},
    "np_exp_way": {"en": r"float32 $\exp(-2i\ln b/d)$", "zh": r"float32 $\exp(-2i\ln b/d)$"},
    "np_pow_way": {"en": r"float32 $b^{-2i/d}$", "zh": r"float32 $b^{-2i/d}$"},
    "np_half_ulp": {"en": r"half a float32 step, $\epsilon/2$",
                    "zh": r"float32 步长的一半，$\epsilon/2$"},
    "np_err_title": {"en": "inverse frequencies in float32, $d = {d}$",
                     "zh": "float32 下的逆频率，$d = {d}$"},
    "np_turns": {"en": "turns over the sequence", "zh": "整个序列内转过的圈数"},
    "np_one_turn": {"en": "one full turn", "zh": "恰好一整圈"},
    "np_turns_title": {"en": "{n} positions, $d = {d}$", "zh": "{n} 个位置，$d = {d}$"},
})


def index_magnitude_figure(positions, position_norms, token_norms, cosines):
    """The raw index next to the token embeddings it is added to, in two panels.

    Left: ``||PE(p)||`` against ``p`` with the band of token-embedding norms; right: the
    cosine between the inputs of two different tokens at the same position, which goes to
    1 as the index takes over.

    Parameters
    ----------
    positions : array_like, shape (n,)
    position_norms : array_like, shape (n,)
        ``||PE(p)||`` at ``positions``.
    token_norms : array_like
        Norms of the rows of an embedding table (the band spans their min and max).
    cosines : array_like, shape (n,)
        Cosine between ``e_a + PE(p)`` and ``e_b + PE(p)`` at ``positions``.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If ``positions``, ``position_norms`` and ``cosines`` differ in length.

    Examples
    --------
    >>> import numpy as np
    >>> p = np.arange(10)
    >>> fig = index_magnitude_figure(p, 8.0 * p, [7.5, 8.5], np.linspace(0, 1, 10))
    >>> len(fig.axes)
    2
    """
    p = np.asarray(positions, dtype=float)
    pn = np.asarray(position_norms, dtype=float)
    cs = np.asarray(cosines, dtype=float)
    tn = np.asarray(token_norms, dtype=float)
    if not p.shape == pn.shape == cs.shape:
        raise ValueError(f"positions, position_norms and cosines must have one shape, got "
                         f"{p.shape}, {pn.shape}, {cs.shape}")
    fig, (ax_a, ax_b) = new_figure(1, 2, figsize=(8.0, 3.3))
    ax_a.axhspan(tn.min(), tn.max(), color="C1", alpha=0.35, lw=0, label=label("np_tok_norm"))
    ax_a.plot(p, pn, color="C0", lw=1.6, label=label("np_pos_norm"))
    ax_a.set_yscale("symlog", linthresh=1.0)
    ax_a.set(xlabel=label("position"), ylabel=label("np_norm"), title=label("np_norm_title"))
    ax_a.legend(loc="lower right", frameon=False, fontsize=9)
    ax_b.plot(p, cs, color="C3", lw=1.6)
    ax_b.axhline(1.0, color="0.6", lw=0.8, ls=":")
    ax_b.set(xlabel=label("position"), ylabel=label("np_cos"), title=label("np_cos_title"),
             ylim=(min(-0.05, float(cs.min()) - 0.05), 1.05))
    return fig


def normalized_gap_figure(short=10, long=1000, gap=3):
    """The normalised index in a short and a long sequence, and the code of "``gap`` apart".

    Left: the codes ``p / (n - 1)`` of the first ``short`` positions in both sequences,
    with the difference for positions ``gap`` apart marked in each.  Right: that
    difference, ``gap / (n - 1)``, against the sequence length ``n`` (log-log).

    Parameters
    ----------
    short : int, default 10
        The short length, ``>= gap + 1``.
    long : int, default 1000
        The long length, ``> short``.
    gap : int, default 3
        The distance marked, ``>= 1``.

    Returns
    -------
    BookFigure

    Raises
    ------
    TypeError
        If an argument is not an integer.
    ValueError
        If ``gap < 1``, ``short <= gap`` or ``long <= short``.

    Examples
    --------
    >>> fig = normalized_gap_figure(10, 100, 3)
    >>> len(fig.axes)
    2
    """
    k = check_count(gap, "gap", minimum=1)
    s = check_count(short, "short", minimum=k + 1)
    n_long = check_count(long, "long", minimum=s + 1)
    fig, (ax_a, ax_b) = new_figure(1, 2, figsize=(8.0, 3.4))
    p = np.arange(s)
    for c, n in enumerate((s, n_long)):
        code = normalized_index_encoding(n, 1)[:s, 0]
        ax_a.plot(p, code, marker="o", ms=4, lw=1.2, color=f"C{c}",
                  label=label("np_len").format(n=n))
        x = 2 + 0.25 * c
        ax_a.annotate("", xy=(x + k, code[2 + k]), xytext=(x + k, code[2]),
                      arrowprops=dict(arrowstyle="<->", color=f"C{c}", lw=1.2))
        ax_a.plot([2, 2 + k], [code[2], code[2]], color=f"C{c}", lw=0.8, ls=":")
        ax_a.annotate(f"{code[2 + k] - code[2]:.3g}", (x + k, (code[2] + code[2 + k]) / 2),
                      textcoords="offset points", xytext=(5, 8 if c else 0), color=f"C{c}",
                      fontsize=9)
    ax_a.set(xlabel=label("position"), ylabel=label("np_code"), title=label("np_gap_title"))
    ax_a.legend(loc="upper left", frameon=False)
    n = np.unique(np.geomspace(k + 1, 10 * n_long, 200).astype(int))
    ax_b.loglog(n, k / (n - 1), color="0.3", lw=1.2)
    for c, m in enumerate((s, n_long)):
        ax_b.plot([m], [k / (m - 1)], "o", color=f"C{c}", ms=7, label=label("np_len").format(n=m))
    ax_b.set(xlabel=label("np_length_n"), ylabel=label("np_gap_k").format(k=k),
             title=label("np_gap_curve_title").format(k=k))
    ax_b.legend(frameon=False)
    return fig


def binary_distance_figure(n_bits=6, reference=8):
    """Distances between binary codes: they jump between neighbours and ignore ``|p - q|``.

    Left: ``||PE(p + 1) - PE(p)||`` for every ``p`` (the square root of the number of
    bits that flip: 1 at even ``p``, up to ``sqrt(n_bits)`` before a power of two).
    Right: ``||PE(q) - PE(reference)||`` against ``q``: far positions can be closer than
    neighbours.

    Parameters
    ----------
    n_bits : int, default 6
        Bits (columns); ``2**n_bits`` positions are drawn. ``1 <= n_bits <= 12``.
    reference : int, default 8
        The position distances are measured from, in ``0 .. 2**n_bits - 1``.

    Returns
    -------
    BookFigure

    Raises
    ------
    TypeError
        If an argument is not an integer.
    ValueError
        If ``n_bits`` is not in ``1 .. 12`` or ``reference`` is out of range.

    Examples
    --------
    >>> fig = binary_distance_figure(4, 8)
    >>> fig.axes[1].get_title()
    'distance from position 8'
    """
    b = check_count(n_bits, "n_bits", minimum=1)
    if b > 12:
        raise ValueError(f"n_bits must be <= 12 (4096 positions), got {b}")
    n = 2 ** b
    r = check_count(reference, "reference")
    if r >= n:
        raise ValueError(f"reference must be < 2**n_bits = {n}, got {r}")
    codes = binary_encoding(n, b)
    steps = np.linalg.norm(np.diff(codes, axis=0), axis=1)
    dist = np.linalg.norm(codes - codes[r], axis=1)
    fig, (ax_a, ax_b) = new_figure(1, 2, figsize=(8.0, 3.3))
    ax_a.vlines(np.arange(n - 1), 0, steps, color="C0", lw=1.4)
    ax_a.set(xlabel=label("position"), ylabel=label("np_step"), title=label("np_step_title"),
             ylim=(0, np.sqrt(b) * 1.08))
    ax_b.plot(np.arange(n), dist, ".-", color="C3", lw=0.8, ms=5)
    ax_b.axvline(r, color="0.6", lw=0.8, ls=":")
    ax_b.set(xlabel=label("np_other_q"), ylabel=label("np_from_ref").format(r=r),
             title=label("np_from_ref_title").format(r=r))
    return fig


def counter_waves_figure(n_positions=32, n_bits=4):
    """The bits of a binary counter as square waves, each with the sinusoid of its period.

    Bit ``j`` of ``p`` is 1 on the second half of every period of ``2**(j + 1)``
    positions, exactly where ``sin(pi (p + 1/2) / 2**j)`` is negative; the smooth curve
    drawn with it is ``(1 - sin(pi (p + 1/2) / 2**j)) / 2``, which agrees with the bit in
    sign about 1/2 and, for bit 0, passes through every bit exactly.

    Parameters
    ----------
    n_positions : int, default 32
        Positions drawn, ``>= 2``.
    n_bits : int, default 4
        Bits drawn (one panel each), ``1 .. 8``.

    Returns
    -------
    BookFigure

    Raises
    ------
    TypeError
        If an argument is not an integer.
    ValueError
        If ``n_positions < 2`` or ``n_bits`` is not in ``1 .. 8``.

    Examples
    --------
    >>> len(counter_waves_figure(16, 3).axes)
    3
    """
    n = check_count(n_positions, "n_positions", minimum=2)
    b = check_count(n_bits, "n_bits", minimum=1)
    if b > 8:
        raise ValueError(f"n_bits must be <= 8, got {b}")
    bits = binary_encoding(n, b)
    x = np.linspace(-0.5, n - 0.5, 40 * n)
    fig, axes = new_figure(b, 1, figsize=(7.2, 1.05 * b + 0.9), sharex=True, squeeze=False)
    for j, ax in enumerate(axes[:, 0]):
        ax.step(np.arange(n), bits[:, j], where="mid", color="C0", lw=1.8,
                label=label("np_bit").format(j=j, t=2 ** (j + 1)))
        ax.plot(x, (1 - np.sin(np.pi * (x + 0.5) / 2 ** j)) / 2, color="C1", lw=1.2,
                label=label("np_wave") if j == 0 else None)
        ax.set_ylim(-0.15, 1.15)
        ax.set_yticks([0, 1])
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=9)
    axes[0, 0].set_title(label("np_counter_title"))
    axes[-1, 0].set_xlabel(label("position"))
    return fig


def one_frequency_circles_figure(omegas=(1.0, 0.01), n_positions=50):
    """One (sin, cos) pair is a point on the unit circle; how far it moves per step.

    One panel per angular frequency ``omega``: the points ``(sin p omega, cos p omega)``
    for ``p = 0 .. n_positions - 1``, coloured by ``p``.  A large ``omega`` spreads
    neighbours far apart but comes back round (far positions land close together); a
    small one never comes back within the sequence but barely moves per step.

    Parameters
    ----------
    omegas : sequence of float, default (1.0, 0.01)
        Angular frequencies in radians per position, each ``> 0``.
    n_positions : int, default 50
        ``>= 2``.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If ``omegas`` is empty or holds a value ``<= 0`` or not finite, or
        ``n_positions < 2``.

    Examples
    --------
    >>> len(one_frequency_circles_figure((1.0, 0.1), 20).axes)   # two panels + colour bar
    3
    """
    n = check_count(n_positions, "n_positions", minimum=2)
    ws = np.asarray(omegas, dtype=float).ravel()
    if ws.size == 0 or not np.all(np.isfinite(ws)) or np.any(ws <= 0):
        raise ValueError(f"omegas must be finite numbers > 0, got {list(ws)}")
    p = np.arange(n)
    fig, axes = new_figure(1, ws.size, figsize=(3.3 * ws.size + 0.8, 3.4), squeeze=False)
    t = np.linspace(0, 2 * np.pi, 400)
    for w, ax in zip(ws, axes[0]):
        ax.plot(np.sin(t), np.cos(t), color="0.85", lw=1)
        sc = ax.scatter(np.sin(p * w), np.cos(p * w), c=p, cmap="viridis", s=18, zorder=3)
        for q in (0, 1):
            ax.annotate(str(q), (np.sin(q * w), np.cos(q * w)), textcoords="offset points",
                        xytext=(6, 4), fontsize=9)
        ax.set_aspect("equal")
        ax.set(xlim=(-1.25, 1.25), ylim=(-1.25, 1.25), xlabel=r"$\sin p\omega$",
               ylabel=r"$\cos p\omega$", title=label("np_circle_title").format(w=w, n=n - 1))
    fig.colorbar(sc, ax=list(axes[0]), label=label("position"), shrink=0.8)
    return fig


def frequency_variants_figure(d_model=512, top=1e8):
    """Wavelength of every column: the paper's spectrum and two that are not the paper's.

    The paper: pairs of columns share ``lambda_i = 2 pi 10000**(2i/d)``.  The binary
    counter made smooth: one sine per column with ``omega_j = 1 / 2**j``, so ``lambda_j = 2 pi
    2**j`` (the curve leaves the plot; its last value is about ``1e154`` for ``d = 512``).
    The same note's "authors' definition": ``omega_j = 1 / 1000**(j / (d - 1))``.

    Parameters
    ----------
    d_model : int, default 512
        Even.
    top : float, default 1e8
        Upper limit of the (log) y axis, ``> 2 pi``.

    Returns
    -------
    BookFigure

    Raises
    ------
    TypeError
        If ``d_model`` is not an integer or ``top`` not a real number.
    ValueError
        If ``d_model`` is odd or ``< 2``, or ``top <= 2 pi``.

    Examples
    --------
    >>> len(frequency_variants_figure(64).axes[0].lines)
    3
    """
    d = check_d_model(d_model, even=True)
    top = check_base(top, "top")
    if top <= 2 * np.pi:
        raise ValueError(f"top must be > 2 pi, got {top}")
    j = np.arange(d)
    paper = np.repeat(wavelengths(d, 10000.0), 2)
    halving = 2 * np.pi * 2.0 ** j
    thousand = 2 * np.pi * 1000.0 ** (j / (d - 1))
    fig, ax = new_figure(figsize=(6.4, 3.8))
    ax.plot(j, paper, color="C0", lw=2.0, label=label("np_paper"))
    ax.plot(j, thousand, color="C1", lw=1.4, ls="--", label=label("np_base_1000"))
    ax.plot(j, halving, color="C3", lw=1.4, ls=":", label=label("np_halving"))
    ax.set_yscale("log")
    ax.set(xlabel=label("np_column"), ylabel=label("wavelength"), ylim=(1.0, top),
           title=label("np_variants_title").format(d=d))
    ax.legend(loc="lower right", frameon=False, fontsize=9)
    return fig


def log_space_error_figure(err_exp, err_pow, d_model):
    """Relative error of each float32 inverse frequency, computed two ways.

    Parameters
    ----------
    err_exp, err_pow : array_like, shape (d_model // 2,)
        ``|omega32 - omega| / omega`` for the ``exp(-2i ln b / d)`` form and the
        ``b ** (-2i / d)`` form.
    d_model : int
        Even; ``d_model // 2`` must equal the length of the errors.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If the shapes do not match ``(d_model // 2,)``.

    Examples
    --------
    >>> import numpy as np
    >>> fig = log_space_error_figure(np.full(4, 3e-7), np.full(4, 3e-8), 8)
    >>> len(fig.axes[0].lines)
    3
    """
    d = check_d_model(d_model, even=True)
    e1 = np.asarray(err_exp, dtype=float)
    e2 = np.asarray(err_pow, dtype=float)
    if e1.shape != (d // 2,) or e2.shape != (d // 2,):
        raise ValueError(f"err_exp and err_pow must have shape ({d // 2},), got "
                         f"{e1.shape} and {e2.shape}")
    i = np.arange(d // 2)
    floor = 1e-10
    fig, ax = new_figure(figsize=(6.4, 3.5))
    ax.plot(i, np.maximum(e1, floor), ".", ms=3.5, color="C3", label=label("np_exp_way"))
    ax.plot(i, np.maximum(e2, floor), ".", ms=3.5, color="C0", label=label("np_pow_way"))
    ax.axhline(np.finfo(np.float32).eps / 2, color="0.4", lw=1, ls="--",
               label=label("np_half_ulp"))
    ax.set_yscale("log")
    ax.set(xlabel=label("pair_i"), ylabel=label("np_rel_err"), ylim=(floor / 2, 3e-6),
           title=label("np_err_title").format(d=d))
    ax.legend(loc="lower right", frameon=False, fontsize=9)
    return fig


def turns_within_figure(n_positions=196, d_model=1024, base=10000.0):
    """How many turns each pair makes over a sequence of ``n_positions`` positions.

    Over positions ``0 .. n - 1`` pair ``i`` turns by ``(n - 1) omega_i`` radians, i.e.
    ``(n - 1) / lambda_i`` full turns; the pairs above the line complete at least one.

    Parameters
    ----------
    n_positions : int, default 196
        ``>= 2``.
    d_model : int, default 1024
        Even.
    base : float, default 10000.0

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> turns_within_figure(50, 64).axes[0].get_yscale()
    'log'
    """
    n = check_count(n_positions, "n_positions", minimum=2)
    d = check_d_model(d_model, even=True)
    b = check_base(base)
    turns = (n - 1) * inverse_frequencies(d, b) / (2 * np.pi)
    i = np.arange(d // 2)
    full = turns >= 1
    fig, ax = new_figure(figsize=(6.4, 3.4))
    ax.plot(i[full], turns[full], ".", ms=3, color="C0")
    ax.plot(i[~full], turns[~full], ".", ms=3, color="C3")
    ax.axhline(1.0, color="0.4", lw=1, ls="--", label=label("np_one_turn"))
    ax.set_yscale("log")
    ax.set(xlabel=label("pair_i"), ylabel=label("np_turns"),
           title=label("np_turns_title").format(n=n, d=d))
    ax.legend(frameon=False)
    return fig
