"""Figures of the chapter ``pitfalls`` (a gallery of implementation bugs).

Each function draws data that the page computes next to it (the buggy table, the
correct one, the error), so that the figure shows exactly what the code beside it
measured.  Words come from :func:`posenc.figures._style.label`.
"""

from __future__ import annotations

import numpy as np

from ._style import add_labels, label, new_figure

__all__ = [
    "double_step_wavelength_figure",
    "shift_residual_figure",
    "layout_probe_figure",
    "low_precision_figure",
    "buggy_tables_figure",
]

add_labels({
    "pit_pair": {"en": "pair index $i$", "zh": "维度对编号 $i$"},
    "pit_wavelength": {"en": "wavelength (positions)", "zh": "波长（位置数）"},
    "pit_correct": {"en": "correct: $2\\pi\\,\\mathrm{base}^{2i/d}$",
                    "zh": "正确：$2\\pi\\,\\mathrm{base}^{2i/d}$"},
    "pit_double": {"en": "bug: $2\\pi\\,\\mathrm{base}^{4i/d}$ (step of 2 counted twice)",
                   "zh": "错误：$2\\pi\\,\\mathrm{base}^{4i/d}$（步长 2 被算了两次）"},
    "pit_seq_len": {"en": "sequence length {n:,}", "zh": "序列长度 {n:,}"},
    "pit_base_line": {"en": "$2\\pi\\cdot\\mathrm{{base}}$", "zh": "$2\\pi\\cdot\\mathrm{{base}}$"},
    "pit_column": {"en": "column $j$", "zh": "第 $j$ 列"},
    "pit_residual": {"en": "relative residual of the best linear $T_1$",
                     "zh": "最佳线性 $T_1$ 的相对残差"},
    "pit_res_correct": {"en": "correct encoding", "zh": "正确的编码"},
    "pit_res_cos": {"en": "cos with its own frequency", "zh": "余弦列频率与正弦不同"},
    "pit_true_pos": {"en": "true position", "zh": "真实位置"},
    "pit_decoded": {"en": "decoded position", "zh": "解码出的位置"},
    "pit_matched": {"en": "interleaved input (as trained)", "zh": "交错布局输入（与训练一致）"},
    "pit_mismatched": {"en": "[sin | cos] input (layout mismatch)", "zh": "[sin | cos] 输入（布局不一致）"},
    "pit_stored": {"en": "stored position $-$ true position", "zh": "存储的位置 $-$ 真实位置"},
    "pit_pe_error": {"en": "largest error in the row", "zh": "该行的最大误差"},
    "pit_bf16": {"en": "bfloat16", "zh": "bfloat16"},
    "pit_fp16": {"en": "float16", "zh": "float16"},
    "pit_dim": {"en": "dimension $j$", "zh": "维度 $j$"},
    "pit_pos": {"en": "position $p$", "zh": "位置 $p$"},
    "pit_title_correct": {"en": "correct (posenc)", "zh": "正确（posenc）"},
    "pit_title_tutorial": {"en": "the tutorial's loop", "zh": "教程里的循环"},
    "pit_title_square": {"en": "all four bugs (base 1000)", "zh": "四处错误齐犯（基数 1000）"},
})


def double_step_wavelength_figure(correct, buggy, seq_len, base=10000.0):
    """Wavelength of every pair: correct versus the doubled exponent, log scale.

    Parameters
    ----------
    correct, buggy : array_like, shape (d/2,)
        Wavelengths (in positions) of each pair.
    seq_len : int
        A sequence length to draw for reference.
    base : float, default 10000.0

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> import numpy as np
    >>> fig = double_step_wavelength_figure(np.arange(1, 5), np.arange(1, 5) ** 2, 10)
    >>> fig.axes[0].get_yscale()
    'log'
    """
    correct = np.asarray(correct, dtype=float)
    buggy = np.asarray(buggy, dtype=float)
    i = np.arange(correct.shape[0])
    fig, ax = new_figure(figsize=(7.0, 3.8))
    ax.semilogy(i, correct, lw=2, label=label("pit_correct"))
    ax.semilogy(i, buggy, lw=2, ls="--", color="C3", label=label("pit_double"))
    ax.axhline(seq_len, color="0.4", ls=":", label=label("pit_seq_len").format(n=seq_len))
    ax.axhline(2 * np.pi * base, color="0.6", ls="-.", label=label("pit_base_line"))
    ax.set_xlabel(label("pit_pair"))
    ax.set_ylabel(label("pit_wavelength"))
    ax.legend(fontsize=9, frameon=False, loc="upper left")
    return fig


def shift_residual_figure(correct_residuals, buggy_residuals):
    """Per-column residual of the best linear shift map, correct versus buggy table.

    Parameters
    ----------
    correct_residuals, buggy_residuals : array_like, shape (d,)
        :attr:`posenc.analysis.uniqueness.ShiftFit.column_residuals` of the two tables.

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> import numpy as np
    >>> fig = shift_residual_figure(np.full(8, 1e-14), np.linspace(0.01, 0.8, 8))
    >>> fig.axes[0].get_yscale()
    'log'
    """
    good = np.maximum(np.asarray(correct_residuals, dtype=float), 1e-17)
    bad = np.maximum(np.asarray(buggy_residuals, dtype=float), 1e-17)
    j = np.arange(good.shape[0])
    fig, ax = new_figure(figsize=(7.0, 3.4))
    ax.semilogy(j, bad, ".", ms=4, color="C3", label=label("pit_res_cos"))
    ax.semilogy(j, good, ".", ms=4, color="C0", label=label("pit_res_correct"))
    ax.set_xlabel(label("pit_column"))
    ax.set_ylabel(label("pit_residual"), fontsize=9)
    ax.set_ylim(1e-17, 10)
    ax.legend(fontsize=9, frameon=False, loc="center right")
    return fig


def layout_probe_figure(positions, matched, mismatched):
    """Positions decoded by a linear probe, with the layout it was fit on and the other.

    Parameters
    ----------
    positions : array_like, shape (n,)
        True positions.
    matched, mismatched : array_like, shape (n,)
        Decoded positions with the training layout and with the other layout.

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> import numpy as np
    >>> p = np.arange(10.0)
    >>> len(layout_probe_figure(p, p, p[::-1]).axes)
    1
    """
    p = np.asarray(positions, dtype=float)
    fig, ax = new_figure(figsize=(6.0, 3.8))
    ax.plot(p, mismatched, ".", ms=2, color="C3", alpha=0.6, label=label("pit_mismatched"))
    ax.plot(p, matched, lw=2.5, color="C0", label=label("pit_matched"))
    ax.set_xlabel(label("pit_true_pos"))
    ax.set_ylabel(label("pit_decoded"))
    ax.legend(fontsize=9, frameon=False, loc="upper left")
    return fig


def low_precision_figure(positions, stored, errors):
    """What low-precision positions do: the stored index and the error of each row.

    Parameters
    ----------
    positions : array_like, shape (n,)
        True positions ``0 .. n - 1``.
    stored : dict of str to array_like
        ``{"bf16": ..., "fp16": ...}``: the positions as the dtype holds them.
    errors : dict of str to array_like
        Same keys: largest absolute error of each row of the encoding.

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> import numpy as np
    >>> p = np.arange(8.0)
    >>> fig = low_precision_figure(p, {"bf16": p, "fp16": p}, {"bf16": p, "fp16": p})
    >>> len(fig.axes)
    2
    """
    p = np.asarray(positions, dtype=float)
    names = {"bf16": ("pit_bf16", "C3"), "fp16": ("pit_fp16", "C0")}
    fig, (ax0, ax1) = new_figure(1, 2, figsize=(10.0, 3.6))
    for key, (lab, color) in names.items():
        ax0.plot(p, np.asarray(stored[key], dtype=float) - p, lw=0.4, color=color,
                 label=label(lab))
        ax1.plot(p, errors[key], lw=0.6, color=color, alpha=0.8, label=label(lab))
    ax0.set_xlabel(label("pit_true_pos"))
    ax0.set_ylabel(label("pit_stored"))
    ax1.set_xlabel(label("pit_true_pos"))
    ax1.set_ylabel(label("pit_pe_error"))
    ax0.legend(fontsize=9, frameon=False)
    ax1.legend(fontsize=9, frameon=False, loc="upper left")
    return fig


def buggy_tables_figure(tables, titles):
    """Encoding tables side by side as heatmaps (position down, dimension across).

    Parameters
    ----------
    tables : sequence of array_like, each shape (n, d)
    titles : sequence of str
        One label key per table (see the ``pit_title_*`` keys), so the title follows
        the page's language.

    Returns
    -------
    BookFigure

    Examples
    --------
    >>> import numpy as np
    >>> keys = ["pit_title_correct", "pit_title_tutorial"]
    >>> len(buggy_tables_figure([np.zeros((4, 4))] * 2, keys).axes)
    3
    """
    fig, axes = new_figure(1, len(tables), figsize=(3.4 * len(tables) + 0.8, 3.6), squeeze=False)
    im = None
    for ax, table, title in zip(axes[0], tables, titles):
        im = ax.imshow(np.asarray(table), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1,
                       interpolation="nearest")
        ax.set_title(label(title), fontsize=9)
        ax.set_xlabel(label("pit_dim"))
    axes[0][0].set_ylabel(label("pit_pos"))
    fig.colorbar(im, ax=list(axes[0]), shrink=0.85)
    return fig
