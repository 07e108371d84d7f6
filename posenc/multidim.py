r"""Positions in two dimensions and more: image grids, resized tables and M-RoPE.

A Vision Transformer cuts an image into a grid of patches; a multimodal model puts those
patches between text tokens.  A patch has a row and a column (and, in a video, a frame),
and this module gives it positions that say so:

* :func:`grid_positions` -- the (row, column) of each patch of a grid in raster
  (row-major) order, the order in which ViT feeds the patches to the Transformer;
* :func:`sinusoidal_encoding_2d` -- the fixed 2-D sine-cosine table of MAE
  (``get_2d_sincos_pos_embed``): half the features encode the column, half the row;
* :func:`resample_position_grid` -- a learned ViT position table resized to another
  grid by bicubic interpolation, as timm's ``resample_abs_pos_embed`` does;
* :func:`apply_rope_2d` -- axial 2-D RoPE: half the pairs rotate by the column, half by
  the row, so an attention score depends only on the (row, column) offset;
* :func:`mrope_pair_components`, :func:`mrope_position_ids` and :func:`apply_mrope` --
  the multimodal RoPE (M-RoPE) of Qwen2-VL, with three position components (time,
  height, width), and the interleaved split of Qwen3-VL.

NumPy functions compute in float64.  :func:`resample_position_grid` and
:func:`apply_mrope` need PyTorch, which they import when called, so ``import posenc``
does not import it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ._typing import FloatArray, IntArray, Layout, Positions
from ._validation import (
    check_base,
    check_bool,
    check_count,
    check_d_model,
    check_layout,
    check_positions,
    check_positions_tensor,
)
from .rope import ArrayT, _is_tensor, rotate_pairs
from .sinusoidal import inverse_frequencies

if TYPE_CHECKING:
    import torch

__all__ = [
    "grid_positions",
    "sinusoidal_encoding_2d",
    "resample_position_grid",
    "apply_rope_2d",
    "rope_mixed_frequencies",
    "apply_rope_mixed",
    "mrope_pair_components",
    "mrope_position_ids",
    "apply_mrope",
]


def _check_multiple_of_4(value, name):
    d = check_d_model(value, name, even=True)
    if d % 4:
        raise ValueError(
            f"{name} must be a multiple of 4 (two axes, each a sine and a cosine or a "
            f"number of pairs), got {d}"
        )
    return d


def grid_positions(height: int, width: int) -> tuple[IntArray, IntArray]:
    """The (row, column) of every cell of a ``height x width`` grid, in raster order.

    Raster (row-major) order is the order of ViT's patch sequence: row 0 from left to
    right, then row 1, and so on, so the cell at sequence index ``s`` is at row
    ``s // width`` and column ``s % width``.

    Parameters
    ----------
    height, width : int
        Grid size, ``>= 0``.

    Returns
    -------
    rows, cols : numpy.ndarray
        int64, shape ``(height * width,)`` each.

    Raises
    ------
    TypeError
        If ``height`` or ``width`` is not an integer.
    ValueError
        If ``height`` or ``width`` is negative.

    Examples
    --------
    >>> rows, cols = grid_positions(2, 3)
    >>> rows.tolist(), cols.tolist()
    ([0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2])
    """
    h = check_count(height, "height")
    w = check_count(width, "width")
    s = np.arange(h * w, dtype=np.int64)
    return s // max(w, 1), s % max(w, 1)


def sinusoidal_encoding_2d(height: int, width: int, d_model: int,
                           base: float = 10000.0) -> FloatArray:
    r"""The fixed 2-D sine-cosine position table of MAE, for a ``height x width`` grid.

    Row ``s`` of the result encodes the patch at row ``r = s // width`` and column
    ``c = s % width`` (raster order, as :func:`grid_positions`).  With ``q = d_model / 4``
    and the frequencies :math:`\omega_i = \mathrm{base}^{-i/q}` (``i = 0 .. q - 1``):

    .. math::

       \mathrm{PE}[s] = \big(\sin c\,\omega,\ \cos c\,\omega,\
                             \sin r\,\omega,\ \cos r\,\omega\big)

    i.e. features ``[0, d/4)`` are the sines of the column, ``[d/4, d/2)`` its cosines,
    ``[d/2, 3d/4)`` the sines of the row and ``[3d/4, d)`` its cosines.  This is the
    layout of ``get_2d_sincos_pos_embed`` in the MAE code (He et al. 2022): there the
    first half is built from ``grid[0]`` of ``np.meshgrid(grid_w, grid_h)``, which holds
    the *column* index, although the variable is called ``emb_h``.

    The dot product of two rows depends only on the offset ``(dr, dc)``:
    :math:`\sum_i \cos(dc\,\omega_i) + \sum_i \cos(dr\,\omega_i)`.

    Parameters
    ----------
    height, width : int
        Grid size in patches, ``>= 0``.
    d_model : int
        Number of features, a positive multiple of 4.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(height * width, d_model)``.

    Raises
    ------
    TypeError
        If a size is not an integer or ``base`` is not real.
    ValueError
        If a size is negative, ``d_model`` is not a positive multiple of 4, or
        ``base <= 1``.

    Examples
    --------
    >>> pe = sinusoidal_encoding_2d(2, 3, 4)          # one frequency per axis
    >>> pe[5].round(4)                                # row 1, column 2
    array([ 0.9093, -0.4161,  0.8415,  0.5403])
    """
    h = check_count(height, "height")
    w = check_count(width, "width")
    d = _check_multiple_of_4(d_model, "d_model")
    b = check_base(base)
    rows, cols = grid_positions(h, w)
    omega = inverse_frequencies(d // 2, b)  # base ** (-i / (d / 4))
    col_angles = cols.astype(np.float64)[:, None] * omega[None, :]
    row_angles = rows.astype(np.float64)[:, None] * omega[None, :]
    return np.concatenate(
        [np.sin(col_angles), np.cos(col_angles), np.sin(row_angles), np.cos(row_angles)],
        axis=1,
    )


def _check_size(value, name):
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or not all(isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, bool)
                   for v in value)
        or min(value) < 1
    ):
        raise ValueError(f"{name} must be a pair (height, width) of positive integers, "
                         f"got {value!r}")
    return int(value[0]), int(value[1])


def resample_position_grid(table: ArrayT, old_size: tuple[int, int], new_size: tuple[int, int], *,
                           num_prefix_tokens: int = 0, antialias: bool = True) -> ArrayT:
    """Resize a learned ViT position table to another grid, by bicubic interpolation.

    This is what timm's ``resample_abs_pos_embed`` does when a ViT is fine-tuned at a
    new resolution: the first ``num_prefix_tokens`` rows (a class token, ...) are kept,
    the other ``H * W`` rows are read as an ``H x W`` image with ``d`` channels (raster
    order), resized with ``torch.nn.functional.interpolate(mode="bicubic",
    antialias=True)`` (``align_corners=False``: cell centres are mapped onto cell
    centres) and flattened back in raster order.  Unlike timm, which interpolates in
    float32, the interpolation here runs in float64 for NumPy input and float64 tensors.

    Parameters
    ----------
    table : numpy.ndarray or torch.Tensor
        Shape ``(num_prefix_tokens + H * W, d)``, real floating point values.
    old_size, new_size : tuple of int
        ``(H, W)`` and ``(H', W')``, positive.
    num_prefix_tokens : int, keyword-only, default 0
        Rows at the start that are not part of the grid; copied unchanged.
    antialias : bool, keyword-only, default True
        Passed to ``interpolate`` (as in timm).  It matters when enlarging too: ``True``
        selects PyTorch's antialiasing kernel (the bicubic of PIL, ``a = -0.5``, whose
        taps outside the grid are dropped and the rest rescaled to sum to one), ``False``
        the plain bicubic kernel (``a = -0.75``, edge values repeated).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Shape ``(num_prefix_tokens + H' * W', d)``; a NumPy table gives a float64 array,
        a tensor a tensor of its own dtype and device.

    Raises
    ------
    TypeError
        If ``table`` does not hold floating-point numbers (NumPy integer tables are
        accepted and converted).
    ValueError
        If ``table`` is not 2-D, a size is not a pair of positive integers, or the table
        does not have ``num_prefix_tokens + H * W`` rows.

    Examples
    --------
    >>> import numpy as np
    >>> table = np.arange(4.0).reshape(4, 1)          # a 2 x 2 grid, one feature
    >>> resample_position_grid(table, (2, 2), (2, 2)).ravel().tolist()   # same size
    [0.0, 1.0, 2.0, 3.0]
    >>> resample_position_grid(np.ones((4, 3)), (2, 2), (3, 5)).shape
    (15, 3)
    """
    import torch
    import torch.nn.functional as F

    h, w = _check_size(old_size, "old_size")
    h2, w2 = _check_size(new_size, "new_size")
    n_prefix = check_count(num_prefix_tokens, "num_prefix_tokens")
    antialias = check_bool(antialias, "antialias")
    is_tensor = _is_tensor(table)
    if is_tensor:
        t: torch.Tensor = cast(Any, table)
        if not t.is_floating_point():
            raise TypeError(f"table must be a floating-point tensor, got dtype {t.dtype}")
    else:
        arr = np.asarray(table)
        if arr.dtype == np.bool_ or arr.dtype.kind not in "fiu":
            raise TypeError(f"table must hold real numbers, got dtype {arr.dtype}")
        t = torch.from_numpy(arr.astype(np.float64))
    if t.ndim != 2:
        raise ValueError(f"table must be 2-D (tokens, d), got shape {tuple(t.shape)}")
    if t.shape[0] != n_prefix + h * w:
        raise ValueError(
            f"table must have num_prefix_tokens + H * W = {n_prefix} + {h} * {w} = "
            f"{n_prefix + h * w} rows for old_size {(h, w)}, got {t.shape[0]}"
        )
    d = t.shape[1]
    prefix, grid = t[:n_prefix], t[n_prefix:]
    compute = grid if grid.dtype == torch.float64 else grid.float()
    image = compute.reshape(1, h, w, d).permute(0, 3, 1, 2)  # (1, d, H, W)
    resized = F.interpolate(image, size=(h2, w2), mode="bicubic", align_corners=False,
                            antialias=antialias)
    out = resized.permute(0, 2, 3, 1).reshape(h2 * w2, d).to(t.dtype)
    out = torch.cat([prefix, out], dim=0)
    return cast(ArrayT, out if is_tensor else out.numpy())


def _axial_angles(rows, cols, d, base):
    """Angles ``(seq, d/2)``: pairs ``[0, d/4)`` by the column, ``[d/4, d/2)`` by the row."""
    omega = inverse_frequencies(d // 2, base)
    return np.concatenate(
        [cols.astype(np.float64)[:, None] * omega, rows.astype(np.float64)[:, None] * omega],
        axis=1,
    )


def apply_rope_2d(x: ArrayT, rows: Positions, cols: Positions, *, base: float = 10000.0,
                  layout: Layout = "interleaved") -> ArrayT:
    r"""Axial 2-D RoPE: rotate half the pairs by the column and half by the row.

    ``x`` has ``d`` features, ``d / 2`` pairs (which features form pair ``j`` is the
    ``layout``, exactly as in :func:`posenc.apply_rope`).  With ``q = d / 4`` and
    :math:`\omega_i = \mathrm{base}^{-i/q}`, the token at row ``r`` and column ``c`` has
    pair ``j < q`` rotated by :math:`c\,\omega_j` and pair ``q + j`` by
    :math:`r\,\omega_j`.  This is the axial RoPE of Heo et al. (2024) (their
    ``compute_axial_cis``: the first quarter of the complex pairs follows ``x``, the
    column, the second ``y``, the row, with ``layout="interleaved"``; their default
    base is 100).  Each rotation is a 1-D RoPE along one axis, so the score of a query
    at ``(r, c)`` and a key at ``(r', c')`` depends only on ``(r' - r, c' - c)``.

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor
        Shape ``(..., seq, d)``, ``d`` a positive multiple of 4.
    rows, cols : array_like of int or torch.Tensor
        Shape ``(seq,)``: the row and column of each token (see :func:`grid_positions`).
    base : float, keyword-only, default 10000.0
        Finite and ``> 1``.
    layout : {"interleaved", "half"}, keyword-only
        Pairs ``(2j, 2j+1)`` or ``(j, j + d/2)``.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Same shape as ``x``.  NumPy input gives float64 (or its own float dtype); a
        tensor keeps its dtype and device (angles formed in float64, as in
        :func:`posenc.apply_rope`).

    Raises
    ------
    TypeError
        If ``x`` is not real, ``rows`` or ``cols`` are not integers, ``base`` not real.
    ValueError
        If ``x`` has fewer than 2 dimensions or its last dimension is not a multiple of
        4, ``rows`` or ``cols`` do not have shape ``(seq,)``, ``base <= 1`` or
        ``layout`` is unknown.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(2, 1, 8))
    >>> def score(r, c, r2, c2):
    ...     qr = apply_rope_2d(q, [r], [c])
    ...     kr = apply_rope_2d(k, [r2], [c2])
    ...     return float((qr @ kr.T)[0, 0])
    >>> bool(np.isclose(score(1, 2, 4, 0), score(11, 7, 14, 5)))    # offset (3, -2)
    True
    """
    b = check_base(base)
    layout = check_layout(layout)
    tensor = _is_tensor(x)
    if tensor:
        xt: torch.Tensor = cast(Any, x)
        if not xt.is_floating_point():
            raise TypeError(f"x must be a floating-point tensor, got dtype {xt.dtype}")
        shape = tuple(xt.shape)
    else:
        arr = np.asarray(x)
        if arr.dtype == np.bool_ or arr.dtype.kind not in "fiu":
            raise TypeError(f"x must hold real numbers, got dtype {arr.dtype}")
        shape = arr.shape
    if len(shape) < 2:
        raise ValueError(f"x must have at least 2 dimensions (..., seq, d), got shape {shape}")
    d = shape[-1]
    if d < 4 or d % 4:
        raise ValueError(
            f"the last dimension of x must be a positive multiple of 4 (half the pairs for "
            f"the rows, half for the columns), got {d}"
        )
    seq = shape[-2]
    if tensor:
        return cast(ArrayT, _apply_rope_2d_torch(xt, rows, cols, seq, d, b, layout))
    r = check_positions(rows, seq, "rows")
    c = check_positions(cols, seq, "cols")
    out = rotate_pairs(arr, _axial_angles(r, c, d, b), layout=layout)
    return cast(ArrayT, out.astype(arr.dtype if arr.dtype.kind == "f" else np.float64,
                                   copy=False))


def _positions_tensor(pos, seq, name, device):
    """Positions as a float64 tensor ``(seq,)`` on ``device``, by tensor operations only
    for a tensor (checked by dtype and shape: traced and vmapped values are not read)."""
    import torch

    if isinstance(pos, torch.Tensor):
        check_positions_tensor(pos, seq, name)
        if pos.is_meta and device.type != "meta":
            raise ValueError(f"{name} is a meta tensor (it has no values) but x is not; pass "
                             f"real {name}, or meta x for a shape-only pass")
        return pos.to(device=device, dtype=torch.float64)
    return torch.from_numpy(check_positions(pos, seq, name).astype(np.float64)).to(device)


def _apply_rope_2d_torch(x, rows, cols, seq, d, base, layout):
    """The tensor path of :func:`apply_rope_2d`: tensor operations only (no NumPy, no
    value read), so that ``torch.compile(fullgraph=True)``, ``torch.export`` and
    ``torch.func`` transforms (``vmap`` over per-sample rows and columns included) see
    the whole computation; the eager fast kernels when no transform is active."""
    import torch

    from .torch._apply import rotate_tables
    from .torch._eager import compute_dtype
    from .torch._tables import inv_freq_tensor

    r = _positions_tensor(rows, seq, "rows", x.device)
    c = _positions_tensor(cols, seq, "cols", x.device)
    omega = inv_freq_tensor(d // 2, base).to(x.device)  # base ** (-i / (d / 4))
    angles = torch.cat((c[:, None] * omega, r[:, None] * omega), dim=-1)  # float64
    compute = compute_dtype(x.dtype)
    return rotate_tables(x, (angles.cos().to(compute), angles.sin().to(compute)), d, layout)


# --------------------------------------------------------------------------------------
# RoPE-Mixed (Heo et al. 2024): learnable frequencies that mix the two axes
# --------------------------------------------------------------------------------------


def rope_mixed_frequencies(d_head: int, num_heads: int = 1, *, base: float = 10.0,
                           rotate: bool = True, seed: int | None = None) -> FloatArray:
    r"""RoPE-Mixed's initial frequencies: one 2-D frequency vector per pair and head.

    Heo et al. (2024) give pair :math:`t` of a head the angle
    :math:`\theta^x_t\,x + \theta^y_t\,y` at column :math:`x` and row :math:`y`, with
    :math:`(\theta^x_t, \theta^y_t)` learned.  Their code (``init_2d_freqs``) starts from
    the magnitudes :math:`m_j = \mathrm{base}^{-4j/d}` of axial RoPE, :math:`j < d/4`, and
    for each head draws an angle :math:`\phi` uniformly in :math:`[0, 2\pi)`: pair
    :math:`j` points along :math:`\phi` and pair :math:`d/4 + j` along
    :math:`\phi + \pi/2`,

    .. math:: (\theta^x_j, \theta^y_j) = m_j(\cos\phi, \sin\phi), \qquad
              (\theta^x_{d/4+j}, \theta^y_{d/4+j}) = m_j(-\sin\phi, \cos\phi).

    With ``rotate=False``, :math:`\phi = 0`: the first quarter of the pairs follows the
    column, the second the row, which is axial RoPE.  Their RoPE-Mixed models use base
    10 (100 for RoPE-Axial).

    Parameters
    ----------
    d_head : int
        Features per head, a positive multiple of 4.
    num_heads : int, default 1
        Heads, ``>= 1``; each gets its own angle.
    base : float, keyword-only, default 10.0
        Finite and ``> 1``.
    rotate : bool, keyword-only, default True
        Draw a random angle per head (``False``: angle 0, axial RoPE).
    seed : int or None, keyword-only
        Seed of ``numpy.random.default_rng`` for the angles.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(2, num_heads, d_head // 2)``: ``[0]`` the frequencies along the
        column (x), ``[1]`` along the row (y).

    Raises
    ------
    TypeError
        If ``d_head`` or ``num_heads`` are not integers, ``base`` not real or ``rotate``
        not a bool.
    ValueError
        If ``d_head`` is not a positive multiple of 4, ``num_heads < 1`` or ``base <= 1``.

    Examples
    --------
    >>> f = rope_mixed_frequencies(8, rotate=False)
    >>> f.round(6).tolist()
    [[[1.0, 0.316228, 0.0, 0.0]], [[0.0, 0.0, 1.0, 0.316228]]]
    """
    d = _check_multiple_of_4(d_head, "d_head")
    h = check_count(num_heads, "num_heads", minimum=1)
    b = check_base(base)
    rotate = check_bool(rotate, "rotate")
    mag = b ** (-np.arange(0, d, 4, dtype=np.float64)[: d // 4] / d)
    phi = (np.random.default_rng(seed).random(h) * 2 * np.pi if rotate
           else np.zeros(h))[:, None]
    fx = np.concatenate([mag * np.cos(phi), 0.0 - mag * np.sin(phi)], axis=1)
    fy = np.concatenate([mag * np.sin(phi), mag * np.cos(phi)], axis=1)
    return np.stack([fx, fy])


def _apply_rope_mixed_torch(xt, rows, cols, frequencies, seq):
    """The tensor path of :func:`apply_rope_mixed` (angles in float64, gradients reach
    ``frequencies``)."""
    import torch

    from .torch._eager import compute_dtype, rotate

    f = frequencies if isinstance(frequencies, torch.Tensor) else torch.as_tensor(
        np.asarray(frequencies, dtype=np.float64))
    if not f.is_floating_point():
        raise TypeError(f"frequencies must be floating point, got dtype {f.dtype}")
    f = f.to(device=xt.device, dtype=torch.float64)
    r = _positions_tensor(rows, seq, "rows", xt.device)
    c = _positions_tensor(cols, seq, "cols", xt.device)
    angles = c[:, None] * f[0].unsqueeze(-2) + r[:, None] * f[1].unsqueeze(-2)
    compute = compute_dtype(xt.dtype)
    cos, sin = angles.cos().to(compute), angles.sin().to(compute)
    return rotate(xt, cos, sin, xt.shape[-1], "interleaved")


def apply_rope_mixed(x: ArrayT, rows: Positions, cols: Positions, frequencies: Any) -> ArrayT:
    r"""RoPE-Mixed: rotate pair ``t`` by :math:`\theta^x_t\,c + \theta^y_t\,r`.

    The 2-D RoPE of Heo et al. (2024, §3) with frequencies that mix the two axes
    (``frequencies``, learned in their models; :func:`rope_mixed_frequencies` gives
    their initial values).  Pairs are consecutive features ``(2t, 2t + 1)``, as in their
    code.  Angles are linear in the position, so the score of a query at ``(r, c)`` and a
    key at ``(r', c')`` depends only on ``(r' - r, c' - c)`` for fixed frequencies.
    Frequencies with :math:`\theta^y = 0` on the first quarter of the pairs,
    :math:`\theta^x = 0` on the second, and :math:`\mathrm{base}^{-4j/d}` otherwise are
    axial RoPE (:func:`apply_rope_2d`).

    With tensors, the angles are formed in float64 from ``frequencies`` (which may be an
    ``nn.Parameter``: gradients reach it) and the result has the dtype of ``x``.

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor
        Shape ``(..., seq, d)`` for frequencies of one head, or ``(..., heads, seq, d)``
        for frequencies of shape ``(2, heads, d / 2)``.
    rows, cols : array_like of int or torch.Tensor
        Shape ``(seq,)``: the row (y) and column (x) of each token.
    frequencies : numpy.ndarray or torch.Tensor
        Shape ``(2, d / 2)`` or ``(2, heads, d / 2)``: along the column, then the row.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Same shape as ``x`` (NumPy: float64 or its own float dtype).

    Raises
    ------
    TypeError
        If ``x`` or ``frequencies`` are not real, or ``rows`` / ``cols`` not integers.
    ValueError
        If ``x`` has fewer than 2 dimensions, an odd last dimension, or ``frequencies``
        a shape that does not match it.

    Examples
    --------
    >>> import numpy as np
    >>> f = rope_mixed_frequencies(8, seed=0)[:, 0]
    >>> q, k = np.random.default_rng(1).normal(size=(2, 1, 8))
    >>> def score(r, c, r2, c2):
    ...     qr = apply_rope_mixed(q, [r], [c], f)
    ...     return float((qr @ apply_rope_mixed(k, [r2], [c2], f).T)[0, 0])
    >>> bool(np.isclose(score(1, 2, 4, 0), score(11, 7, 14, 5)))    # offset (3, -2)
    True
    """
    tensor = _is_tensor(x)
    if tensor:
        xt: torch.Tensor = cast(Any, x)
        if not xt.is_floating_point():
            raise TypeError(f"x must be a floating-point tensor, got dtype {xt.dtype}")
        shape = tuple(xt.shape)
    else:
        arr = np.asarray(x)
        if arr.dtype == np.bool_ or arr.dtype.kind not in "fiu":
            raise TypeError(f"x must hold real numbers, got dtype {arr.dtype}")
        shape = arr.shape
    if len(shape) < 2:
        raise ValueError(f"x must have at least 2 dimensions (..., seq, d), got shape {shape}")
    d, seq = shape[-1], shape[-2]
    if d < 2 or d % 2:
        raise ValueError(f"the last dimension of x must be even (pairs), got {d}")
    fshape = tuple(frequencies.shape) if hasattr(frequencies, "shape") else np.shape(
        frequencies)
    if len(fshape) == 2:
        ok = fshape == (2, d // 2)
    elif len(fshape) == 3:
        ok = (fshape[0] == 2 and fshape[2] == d // 2 and len(shape) >= 3
              and shape[-3] == fshape[1])
    else:
        ok = False
    if not ok:
        raise ValueError(
            f"frequencies must have shape (2, d/2) = (2, {d // 2}), or (2, heads, {d // 2}) "
            f"with x of shape (..., heads, seq, {d}); got frequencies {fshape} for x {shape}"
        )
    if tensor:
        return cast(ArrayT, _apply_rope_mixed_torch(xt, rows, cols, frequencies, seq))
    fr = np.asarray(frequencies)
    if fr.dtype == np.bool_ or fr.dtype.kind not in "fiu":
        raise TypeError(f"frequencies must hold real numbers, got dtype {fr.dtype}")
    fr = fr.astype(np.float64)
    r = check_positions(rows, seq, "rows").astype(np.float64)
    c = check_positions(cols, seq, "cols").astype(np.float64)
    angles = c[:, None] * fr[0][..., None, :] + r[:, None] * fr[1][..., None, :]
    cos, sin = np.cos(angles), np.sin(angles)
    xf = arr.astype(np.float64)
    x1, x2 = xf[..., 0::2], xf[..., 1::2]
    out = np.empty(xf.shape, dtype=np.float64)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x2 * cos + x1 * sin
    return cast(ArrayT, out.astype(arr.dtype if arr.dtype.kind == "f" else np.float64,
                                   copy=False))


# --------------------------------------------------------------------------------------
# M-RoPE (Qwen2-VL) and its interleaved variant (Qwen3-VL)
# --------------------------------------------------------------------------------------


def _check_sections(mrope_section, n_pairs=None, *, interleaved=False):
    ok = isinstance(mrope_section, (tuple, list, np.ndarray)) and len(mrope_section) == 3
    if ok:
        ok = all(isinstance(s, (numbers.Integral, np.integer)) and not isinstance(s, bool)
                 and s >= 0 for s in mrope_section)
    if not ok:
        raise ValueError(
            f"mrope_section must be 3 non-negative integers (pairs for time, height, width), "
            f"got {mrope_section!r}"
        )
    sec = tuple(int(s) for s in mrope_section)
    total = sum(sec)
    if total < 1:
        raise ValueError(f"mrope_section must sum to at least 1, got {sec}")
    if n_pairs is not None and total != n_pairs:
        raise ValueError(
            f"mrope_section must sum to dim // 2 = {n_pairs} (one entry per pair), got "
            f"{sec} with sum {total}"
        )
    if interleaved and (3 * sec[1] - 1 > total or 3 * sec[2] > total):
        raise ValueError(
            f"mrope_section {sec}: the interleaved split gives pair j to height if "
            f"j % 3 == 1 and j < 3 * {sec[1]}, to width if j % 3 == 2 and j < 3 * {sec[2]}; "
            f"it needs 3 * height - 1 <= {total} and 3 * width <= {total} so that each "
            f"component gets the number of pairs its section names"
        )
    return sec


def mrope_pair_components(mrope_section: Sequence[int], *, interleaved: bool = False) -> IntArray:
    """Which position component (0 time, 1 height, 2 width) rotates each pair in M-RoPE.

    Qwen2-VL (``interleaved=False``) gives the pairs out in contiguous blocks: the first
    ``mrope_section[0]`` pairs (the highest frequencies) follow the time id, the next
    ``mrope_section[1]`` the height id, the last ``mrope_section[2]`` the width id
    (transformers' ``Qwen2VLRotaryEmbedding``).  Qwen3-VL (``interleaved=True``) deals
    them out in turn: pair ``j`` follows height if ``j % 3 == 1`` and
    ``j < 3 * mrope_section[1]``, width if ``j % 3 == 2`` and ``j < 3 * mrope_section[2]``,
    time otherwise (transformers' ``Qwen3VLTextRotaryEmbedding``), so every component
    gets high and low frequencies.

    Parameters
    ----------
    mrope_section : sequence of 3 int
        Pairs for time, height and width, e.g. ``[16, 24, 24]`` (Qwen2-VL,
        ``head_dim = 128``) or ``[24, 20, 20]`` (Qwen3-VL).
    interleaved : bool, keyword-only, default False

    Returns
    -------
    numpy.ndarray
        int64, shape ``(sum(mrope_section),)``, values in ``{0, 1, 2}``.

    Raises
    ------
    ValueError
        If ``mrope_section`` is not 3 non-negative integers with a positive sum, or
        (interleaved) a height or width section is too large for the split to give it
        that many pairs.

    Examples
    --------
    >>> mrope_pair_components([2, 3, 3]).tolist()
    [0, 0, 1, 1, 1, 2, 2, 2]
    >>> mrope_pair_components([4, 2, 2], interleaved=True).tolist()
    [0, 1, 2, 0, 1, 2, 0, 0]
    """
    interleaved = check_bool(interleaved, "interleaved")
    sec = _check_sections(mrope_section, interleaved=interleaved)
    n = sum(sec)
    if not interleaved:
        return np.repeat(np.arange(3, dtype=np.int64), sec)
    j = np.arange(n, dtype=np.int64)
    comp = np.zeros(n, dtype=np.int64)
    comp[(j % 3 == 1) & (j < 3 * sec[1])] = 1
    comp[(j % 3 == 2) & (j < 3 * sec[2])] = 2
    return comp


def _is_real(v):
    return isinstance(v, (numbers.Real, np.floating, np.integer)) and not isinstance(
        v, (bool, np.bool_))


def _time_step(v):
    """One video's step held as transformers' ``torch.arange(t) * time_interval`` holds it:
    an int or Fraction exactly, a NumPy or torch float in its own dtype, a Python float
    in float32 (torch's default dtype, which an integer tensor times a Python float gets)."""
    if isinstance(v, (numbers.Rational, np.integer)):
        return Fraction(int(v)) if isinstance(v, np.integer) else Fraction(v)
    step = v if isinstance(v, np.floating) else np.float32(v)
    if not np.isfinite(step):
        raise ValueError(f"time_step must be finite in {step.dtype}, got {v!r}. Pass a "
                         "smaller step, or a numpy.float64.")
    return step


def _scalar(v):
    """A 0-d array-like (a torch or NumPy scalar) as a NumPy scalar of its dtype."""
    if _is_real(v) or not hasattr(v, "__array__"):
        return v
    try:
        arr = np.asarray(v)
    except TypeError:  # e.g. a bfloat16 tensor, which NumPy has no dtype for
        raise TypeError(f"time_step must be an int, a Fraction or a float16/32/64 number, "
                        f"got {v!r}. Convert it with .float() or .double().") from None
    return arr[()] if arr.ndim == 0 else arr


def _time_steps(time_step, n_videos):
    """One positive finite time step per video, from a number or a sequence (see _time_step)."""
    time_step = _scalar(time_step)
    if _is_real(time_step):
        given = [time_step]
        values = given * n_videos
    elif isinstance(time_step, (list, tuple, np.ndarray)):
        given = [_scalar(v) for v in (time_step.reshape(-1) if isinstance(time_step, np.ndarray)
                                      else time_step)]
        if not all(_is_real(v) for v in given):
            raise TypeError(f"time_step must hold real numbers, got {time_step!r}")
        if len(given) != n_videos:
            raise ValueError(f"time_step must give one value per video ({n_videos}), "
                             f"got {len(given)}")
        values = given
    else:
        raise TypeError(f"time_step must be a number or a sequence of numbers, "
                        f"got {type(time_step).__name__} {time_step!r}")
    for v in given:
        if not math.isfinite(float(v)) or v <= 0:
            raise ValueError(f"time_step must be finite and > 0, got {v}")
    return [_time_step(v) for v in values]


def mrope_position_ids(segments: Sequence[int | tuple[int, ...]], *, start: int = 0,
                       time_step: float | Sequence[float] = 1.0) -> IntArray:
    """M-RoPE position ids ``(time, height, width)`` for a prompt of text and images.

    ``segments`` lists the parts of the prompt in order: an int ``n`` is a run of ``n``
    text tokens, a pair ``(h, w)`` an image of ``h x w`` tokens (the grid the language
    model sees, after the vision encoder's patch merging), in raster order.  The rule of
    Qwen2-VL (Wang et al. 2024; transformers' ``Qwen2VLModel.get_rope_index``):

    * a text token gets the same id in all three components, one more than the token
      before it;
    * an image starting at id ``p`` gives its token at row ``i``, column ``j`` the ids
      ``(p, p + i, p + j)``;
    * the text after an image continues at ``p + max(h, w)``, one past the image's
      largest id.

    A triple ``(t, h, w)`` is a video of ``t`` temporal groups of ``h x w`` tokens.  Its
    token in group ``k`` gets the time id ``p + floor(k * time_step)``: ``time_step`` 1
    is Qwen2-VL, which counts groups; Qwen2.5-VL aligns the time id with absolute time,
    ``time_step = tokens_per_second * second_per_grid`` (transformers'
    ``get_rope_index``, with ``second_per_grid_ts`` the seconds one group spans).  What
    follows a video starts one past its largest id, as the reference code of both models
    does.

    The time id is computed as transformers' ``get_rope_index`` computes it,
    ``(torch.arange(t) * time_interval).long()``, so it follows the precision of
    ``time_step``: a Python float in float32 (what torch gives an integer tensor times a
    Python float), a NumPy or torch float in its own dtype, an int or a
    :class:`fractions.Fraction` exactly.  The processor passes ``second_per_grid_ts`` as a
    float32 tensor: ``time_step=tokens_per_second * second_per_grid_ts[i]`` then gives
    the model's ids.  Where ``k * time_step`` is an integer that the float product misses,
    the float ids are one below or above the exact ones: for a group of 2/3 s at 25 ids
    per second, group 3 gets 49 with a float64 ``second_per_grid_ts`` and 50 with a
    float32 one or with ``Fraction(50, 3)``.

    Parameters
    ----------
    segments : sequence
        Ints ``>= 0`` (text runs), pairs ``(h, w)`` of positive ints (images) and
        triples ``(t, h, w)`` of positive ints (videos).
    start : int, keyword-only, default 0
        The id of the first token.
    time_step : number, 0-d tensor or a sequence of them, keyword-only, default 1.0
        Time ids per temporal group, ``> 0``: one number for every video, or one per
        video in order (a 1-d tensor is such a sequence).

    Returns
    -------
    numpy.ndarray
        int64, shape ``(3, seq)`` with ``seq`` the total number of tokens.

    Raises
    ------
    TypeError
        If ``start`` is not an integer.
    ValueError
        If ``segments`` is not a sequence, one of its entries is neither a non-negative
        int nor a pair or triple of positive ints, or ``time_step`` is not positive or
        does not give one value per video.

    Examples
    --------
    >>> mrope_position_ids([2, (2, 3), 1]).tolist()
    [[0, 1, 2, 2, 2, 2, 2, 2, 5], [0, 1, 2, 2, 2, 3, 3, 3, 5], [0, 1, 2, 3, 4, 2, 3, 4, 5]]

    A video of three groups of 1 x 2 tokens, each group 2 s long, at 2 time ids per
    second (Qwen2.5-VL's rule):

    >>> mrope_position_ids([1, (3, 1, 2), 1], time_step=2 * 2.0)[0].tolist()
    [0, 1, 1, 5, 5, 9, 9, 10]

    Where the float64 product falls a hair short of an integer, as transformers' own:

    >>> import numpy as np
    >>> from fractions import Fraction
    >>> mrope_position_ids([(4, 1, 1)], time_step=25 * np.float64(2 / 3))[0].tolist()
    [0, 16, 33, 49]
    >>> mrope_position_ids([(4, 1, 1)], time_step=Fraction(50, 3))[0].tolist()
    [0, 16, 33, 50]
    """
    p = int(start) if isinstance(start, (numbers.Integral, np.integer)) and not isinstance(
        start, bool) else None
    if p is None:
        raise TypeError(f"start must be an integer, got {type(start).__name__} {start!r}")
    if isinstance(segments, (str, bytes)) or not isinstance(segments, (list, tuple)):
        raise ValueError(f"segments must be a list of ints (text) and (h, w) pairs (images), "
                         f"got {segments!r}")
    n_videos = sum(isinstance(seg, (tuple, list)) and len(seg) == 3 for seg in segments)
    steps = _time_steps(time_step, n_videos)
    video = 0
    parts = []
    for k, seg in enumerate(segments):
        if isinstance(seg, (numbers.Integral, np.integer)) and not isinstance(seg, bool):
            if seg < 0:
                raise ValueError(f"segments[{k}]: a text run must be >= 0 tokens, got {seg}")
            parts.append(np.broadcast_to(p + np.arange(int(seg), dtype=np.int64), (3, int(seg))))
            p += int(seg)
        elif (isinstance(seg, (tuple, list)) and len(seg) == 2
              and all(isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, bool)
                      and v >= 1 for v in seg)):
            h, w = int(seg[0]), int(seg[1])
            rows, cols = grid_positions(h, w)
            parts.append(np.stack([np.full(h * w, p, dtype=np.int64), p + rows, p + cols]))
            p += max(h, w)
        elif (isinstance(seg, (tuple, list)) and len(seg) == 3
              and all(isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, bool)
                      and v >= 1 for v in seg)):
            t, h, w = int(seg[0]), int(seg[1]), int(seg[2])
            rows, cols = grid_positions(h, w)
            step = steps[video]
            if isinstance(step, Fraction):
                times = np.array([math.floor(k * step) for k in range(t)], dtype=np.int64)
            else:  # transformers: (torch.arange(t) * time_interval).long(), in step's dtype
                times = (np.arange(t, dtype=step.dtype) * step).astype(np.int64)
            video += 1
            ids = np.stack([np.repeat(times, h * w), np.tile(rows, t), np.tile(cols, t)]) + p
            parts.append(ids)
            p = int(ids.max()) + 1
        else:
            raise ValueError(
                f"segments[{k}] must be an int >= 0 (text tokens), a pair (h, w) of "
                f"positive ints (an image) or a triple (t, h, w) of positive ints (a video), "
                f"got {seg!r}"
            )
    if not parts:
        return np.zeros((3, 0), dtype=np.int64)
    return np.concatenate(parts, axis=1)


def apply_mrope(x: torch.Tensor, position_ids: Positions, *, mrope_section: Sequence[int],
                base: float = 10000.0, interleaved: bool = False) -> torch.Tensor:
    r"""Multimodal RoPE (M-RoPE) of Qwen2-VL, for queries or keys in the half layout.

    ``x`` has ``dim`` features and ``dim / 2`` pairs ``(i, i + dim/2)`` (the half layout
    of transformers' ``rotate_half``), pair ``i`` with the frequency
    :math:`\theta_i = \mathrm{base}^{-2i/\mathrm{dim}}` of ordinary RoPE.  Each token has
    three position ids (time, height, width; see :func:`mrope_position_ids`), and pair
    ``i`` is rotated by :math:`p_{c(i)}\,\theta_i`, where the component ``c(i)`` comes
    from ``mrope_section`` (:func:`mrope_pair_components`).

    With ``interleaved=False`` this equals transformers 5.23.0's
    ``Qwen2VLRotaryEmbedding`` (its ``recomposition_frequencies`` splits the ``dim / 2``
    angles into the three sections and concatenates the result twice, once per half)
    followed by ``apply_rotary_pos_emb``; with ``interleaved=True`` it equals
    ``Qwen3VLTextRotaryEmbedding``.  Angles are formed in float64 (transformers forms
    them in float32); float16 and bfloat16 are computed in float32 and rounded once.

    Parameters
    ----------
    x : torch.Tensor
        Shape ``(batch, heads, seq, dim)``, floating point, ``dim`` even.
    position_ids : torch.Tensor or array_like of int
        Shape ``(3, batch, seq)``: time, height and width id of every token.
    mrope_section : sequence of 3 int, keyword-only
        Pairs per component, summing to ``dim // 2`` (e.g. ``[16, 24, 24]`` for
        ``dim = 128``).
    base : float, keyword-only, default 10000.0
        ``rope_theta``; finite and ``> 1``.
    interleaved : bool, keyword-only, default False
        Qwen3-VL's interleaved split instead of Qwen2-VL's contiguous one.

    Returns
    -------
    torch.Tensor
        Same shape, dtype and device as ``x``.

    Raises
    ------
    TypeError
        If ``x`` is not a floating-point tensor, ``position_ids`` not integers or
        ``base`` not real.
    ValueError
        If ``x`` is not 4-D or ``dim`` is odd, ``position_ids`` does not have shape
        ``(3, batch, seq)``, or ``mrope_section`` is not 3 non-negative integers summing
        to ``dim // 2``.

    Examples
    --------
    >>> import torch
    >>> x = torch.ones(1, 1, 3, 4, dtype=torch.float64)
    >>> ids = torch.tensor([[[0, 1, 2]], [[0, 1, 2]], [[0, 1, 2]]])    # text only
    >>> import posenc
    >>> same = posenc.apply_rope(x, [0, 1, 2], layout="half")       # = 1-D RoPE
    >>> bool(torch.allclose(apply_mrope(x, ids, mrope_section=[1, 0, 1]), same))
    True
    """
    import torch

    from .torch._apply import rotate_tables
    from .torch._eager import compute_dtype
    from .torch._tables import inv_freq_tensor

    b = check_base(base)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    if x.ndim != 4:
        raise ValueError(f"x must be 4-D (batch, heads, seq, dim), got shape {tuple(x.shape)}")
    batch, _, seq, dim = x.shape
    if dim < 2 or dim % 2:
        raise ValueError(f"the last dimension of x (dim) must be a positive even number, "
                         f"got {dim}")
    interleaved = check_bool(interleaved, "interleaved")
    sec = _check_sections(mrope_section, dim // 2, interleaved=interleaved)
    if isinstance(position_ids, torch.Tensor):
        if position_ids.dtype == torch.bool or position_ids.is_floating_point() \
                or position_ids.is_complex():
            raise TypeError(f"position_ids must be integers, got dtype {position_ids.dtype}")
        ids = position_ids
    else:
        arr = np.asarray(position_ids)
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"position_ids must be integers, got dtype {arr.dtype}")
        if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.size \
                and arr.max() > np.iinfo(np.int64).max:
            raise ValueError("position_ids must fit in int64 (-2**63 <= m < 2**63), got "
                             f"{int(arr.max())}")
        ids = torch.from_numpy(arr.astype(np.int64, copy=False))
    if tuple(ids.shape) != (3, batch, seq):
        raise ValueError(
            f"position_ids must have shape (3, batch, seq) = (3, {batch}, {seq}) (time, "
            f"height, width ids of every token of x), got {tuple(ids.shape)}"
        )
    if ids.is_meta and not x.is_meta:
        raise ValueError("position_ids is a meta tensor (it has no values) but x is not; "
                         "pass real position_ids, or meta x for a shape-only pass")
    # Tensor operations only from here (no NumPy, no value read): compile, export and
    # vmap over per-sample ids see the whole computation.
    comp = _pair_components_tensor(sec, interleaved, x.device)  # (dim/2,)
    theta = inv_freq_tensor(dim, b).to(x.device)
    # ids[comp[i], b, s] for every pair i: (batch, seq, dim/2), angles in float64
    chosen = ids.to(device=x.device, dtype=torch.float64).index_select(0, comp)
    angles = chosen.movedim(0, -1) * theta
    compute = compute_dtype(x.dtype)
    cos = angles.cos().to(compute).unsqueeze(1)
    sin = angles.sin().to(compute).unsqueeze(1)
    return rotate_tables(x, (cos, sin), dim, "half")


def _pair_components_tensor(sec, interleaved, device):
    """:func:`mrope_pair_components` with tensor operations (int64, on ``device``)."""
    import torch

    j = torch.arange(sum(sec), device=device)
    if not interleaved:
        return (j >= sec[0]).long() + (j >= sec[0] + sec[1]).long()
    height = (j % 3 == 1) & (j < 3 * sec[1])
    width = (j % 3 == 2) & (j < 3 * sec[2])
    return height.long() + 2 * width.long()
