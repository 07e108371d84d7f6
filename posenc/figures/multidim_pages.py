"""Figures of the chapter ``multidim`` (positions in two dimensions and more).

Each function takes the arrays the page has just computed and draws them; nothing is
recomputed here.  Words go through :func:`posenc.figures._style.label`, so the page's
``set_language`` call picks English or Chinese.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap

from ._style import add_labels, label, new_figure

__all__ = [
    "patch_similarity_figure",
    "resample_error_figure",
    "mrope_ids_figure",
    "mrope_sections_figure",
]

add_labels({
    "md_raster_1d": {"en": "1-D sinusoid, raster order", "zh": "一维正弦，光栅顺序"},
    "md_sincos_2d": {"en": "2-D sine-cosine (MAE)", "zh": "二维正弦-余弦（MAE）"},
    "md_rope_2d": {"en": "axial 2-D RoPE", "zh": "轴向二维 RoPE"},
    "md_column": {"en": "column", "zh": "列"},
    "md_row": {"en": "row", "zh": "行"},
    "md_cosine": {"en": "cosine similarity", "zh": "余弦相似度"},
    "md_score": {"en": "score", "zh": "分数"},
    "md_wavelength_patches": {"en": "wavelength (patches)", "zh": "波长（图块数）"},
    "md_max_error": {"en": "largest error after resizing", "zh": "插值后的最大误差"},
    "md_all_cells": {"en": "all cells", "zh": "全部格子"},
    "md_interior_cells": {"en": "cells inside the old grid", "zh": "旧网格内部的格子"},
    "md_token": {"en": "token", "zh": "词元"},
    "md_time": {"en": "time", "zh": "时间"},
    "md_height": {"en": "height", "zh": "高度"},
    "md_width": {"en": "width", "zh": "宽度"},
    "md_image": {"en": "image", "zh": "图像"},
    "md_pair": {"en": "pair $j$ (frequency falls to the right)",
                "zh": "维度对 $j$（越往右频率越低）"},
    "md_contiguous": {"en": "Qwen2-VL (contiguous)", "zh": "Qwen2-VL（连续分段）"},
    "md_interleaved": {"en": "Qwen3-VL (interleaved)", "zh": "Qwen3-VL（交错）"},
})

#: Colours of the three M-RoPE components (time, height, width).
_COMPONENT_COLOURS = ("#4c72b0", "#dd8452", "#55a868")


def _check_map(a, name):
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array (rows, columns), got shape "
                         f"{a.shape}")
    return a


def patch_similarity_figure(raster_1d, sincos_2d, rope_2d, patch):
    """One patch against every patch of the grid, for three encodings side by side.

    Parameters
    ----------
    raster_1d, sincos_2d : array_like
        ``(H, W)``: cosine similarity of the chosen patch's encoding with every patch's,
        for a 1-D encoding of the raster index and for the 2-D sine-cosine table.
    rope_2d : array_like
        ``(H, W)``: attention score of a query at the chosen patch with a key at every
        patch, under axial 2-D RoPE.
    patch : tuple of int
        ``(row, column)`` of the chosen patch, marked on every panel.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If a map is not 2-D, the maps differ in shape, or ``patch`` is outside them.

    Examples
    --------
    >>> import numpy as np
    >>> fig = patch_similarity_figure(np.eye(3), np.eye(3), np.eye(3), (1, 1))
    >>> len(fig.axes)                      # three panels and their colour bars
    6
    """
    maps = [_check_map(m, n) for m, n in ((raster_1d, "raster_1d"), (sincos_2d, "sincos_2d"),
                                          (rope_2d, "rope_2d"))]
    if len({m.shape for m in maps}) != 1:
        raise ValueError(f"the three maps must have the same shape, got "
                         f"{[m.shape for m in maps]}")
    h, w = maps[0].shape
    r, c = (int(v) for v in patch)
    if not (0 <= r < h and 0 <= c < w):
        raise ValueError(f"patch must be inside the {h} x {w} grid, got {patch!r}")
    fig, axes = new_figure(1, 3, figsize=(10.5, 3.6))
    keys = ("md_raster_1d", "md_sincos_2d", "md_rope_2d")
    bars = ("md_cosine", "md_cosine", "md_score")
    for ax, m, key, bar in zip(axes, maps, keys, bars):
        im = ax.imshow(m, cmap="viridis", origin="upper", interpolation="nearest")
        ax.plot([c], [r], marker="s", markersize=7, markerfacecolor="none",
                markeredgecolor="red", markeredgewidth=1.6)
        ax.set_title(label(key))
        ax.set_xlabel(label("md_column"))
        ax.set_ylabel(label("md_row"))
        cb = fig.colorbar(im, ax=ax, shrink=0.85)
        cb.set_label(label(bar))
    return fig


def resample_error_figure(wavelengths, error_all, error_interior):
    """Largest interpolation error of each frequency of a resized 2-D sine-cosine table.

    Parameters
    ----------
    wavelengths : array_like
        ``(n,)``: wavelength of each frequency, in patches of the old grid.
    error_all, error_interior : array_like
        ``(n,)``: largest absolute error over all new cells, and over the cells whose
        centres lie inside the old grid's interior.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If the arrays are not 1-D of one length, or a wavelength is not positive.

    Examples
    --------
    >>> fig = resample_error_figure([6.3, 60.0], [0.1, 0.01], [0.02, 0.001])
    >>> fig.axes[0].get_xscale()
    'log'
    """
    wl = np.asarray(wavelengths, dtype=np.float64)
    ea = np.asarray(error_all, dtype=np.float64)
    ei = np.asarray(error_interior, dtype=np.float64)
    if wl.ndim != 1 or ea.shape != wl.shape or ei.shape != wl.shape or wl.size == 0:
        raise ValueError(f"wavelengths, error_all and error_interior must be 1-D of one "
                         f"length, got {wl.shape}, {ea.shape}, {ei.shape}")
    if not (wl > 0).all():
        raise ValueError("wavelengths must be positive")
    fig, ax = new_figure(figsize=(6.4, 3.6))
    tiny = np.finfo(np.float64).tiny
    ax.loglog(wl, np.maximum(ea, tiny), label=label("md_all_cells"))
    ax.loglog(wl, np.maximum(ei, tiny), label=label("md_interior_cells"), linestyle="--")
    ax.set_xlabel(label("md_wavelength_patches"))
    ax.set_ylabel(label("md_max_error"))
    ax.legend()
    return fig


def mrope_ids_figure(position_ids, is_image):
    """The three M-RoPE position ids of every token of a prompt, as a table of numbers.

    Parameters
    ----------
    position_ids : array_like of int
        ``(3, seq)``: time, height and width id of each token.
    is_image : array_like of bool
        ``(seq,)``: which tokens are image tokens (shaded).

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If the shapes do not match.

    Examples
    --------
    >>> import numpy as np
    >>> ids = np.array([[0, 1, 1, 2], [0, 1, 1, 2], [0, 1, 2, 3]])
    >>> fig = mrope_ids_figure(ids, [False, True, True, False])
    >>> [t.get_text() for t in fig.axes[0].texts][:4]
    ['0', '1', '1', '2']
    """
    ids = np.asarray(position_ids)
    img = np.asarray(is_image, dtype=bool)
    if ids.ndim != 2 or ids.shape[0] != 3 or img.shape != (ids.shape[1],):
        raise ValueError(f"position_ids must be (3, seq) and is_image (seq,), got "
                         f"{ids.shape} and {img.shape}")
    seq = ids.shape[1]
    fig, ax = new_figure(figsize=(max(6.4, 0.36 * seq + 1.5), 1.9))
    shade = np.broadcast_to(img.astype(float), (3, seq))
    ax.imshow(shade, cmap=ListedColormap(["#ffffff", "#fde3c8"]), vmin=0, vmax=1,
              aspect="auto", interpolation="nearest")
    for i in range(3):
        for s in range(seq):
            ax.text(s, i, str(int(ids[i, s])), ha="center", va="center", fontsize=9)
    ax.set_yticks([0, 1, 2], [label("md_time"), label("md_height"), label("md_width")])
    ax.set_xticks(np.arange(seq))
    ax.tick_params(axis="x", labelsize=9)
    ax.set_xlabel(label("md_token"))
    ax.set_xticks(np.arange(seq + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(4) - 0.5, minor=True)
    ax.grid(which="minor", color="#bbbbbb", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    if img.any():
        first = int(np.argmax(img))
        ax.set_title(label("md_image"), fontsize=9, loc="left",
                     x=(first + 0.5) / seq)
    return fig


def mrope_sections_figure(contiguous, interleaved):
    """Which component rotates each pair: Qwen2-VL's blocks against Qwen3-VL's interleaving.

    Parameters
    ----------
    contiguous, interleaved : array_like of int
        ``(n_pairs,)`` with values 0 (time), 1 (height), 2 (width), as returned by
        :func:`posenc.mrope_pair_components`.

    Returns
    -------
    BookFigure

    Raises
    ------
    ValueError
        If the arrays differ in shape or hold values outside ``{0, 1, 2}``.

    Examples
    --------
    >>> import posenc
    >>> fig = mrope_sections_figure(posenc.mrope_pair_components([2, 1, 1]),
    ...                             posenc.mrope_pair_components([2, 1, 1], interleaved=True))
    >>> len(fig.axes[0].get_legend().get_texts())
    3
    """
    a = np.asarray(contiguous)
    b = np.asarray(interleaved)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError(f"contiguous and interleaved must be 1-D of one length, got "
                         f"{a.shape} and {b.shape}")
    if not (np.isin(a, (0, 1, 2)).all() and np.isin(b, (0, 1, 2)).all()):
        raise ValueError("components must be 0 (time), 1 (height) or 2 (width)")
    fig, ax = new_figure(figsize=(8.2, 1.9))
    ax.imshow(np.stack([a, b]), cmap=ListedColormap(_COMPONENT_COLOURS), vmin=-0.5, vmax=2.5,
              aspect="auto", interpolation="nearest")
    ax.set_yticks([0, 1], [label("md_contiguous"), label("md_interleaved")])
    ax.set_xlabel(label("md_pair"))
    from matplotlib.patches import Patch

    handles = [Patch(color=col, label=label(k))
               for col, k in zip(_COMPONENT_COLOURS, ("md_time", "md_height", "md_width"))]
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return fig
