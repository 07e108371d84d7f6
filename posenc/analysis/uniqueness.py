r"""Distances, collisions, extrapolation and learned projections of the sinusoidal encoding.

The analysis behind the book's chapter *What the sinusoids buy*.  Everything rests on
one identity: pair :math:`i` of :math:`\mathrm{PE}(p)` is the point
:math:`(\sin p\omega_i, \cos p\omega_i)` on the unit circle, so

.. math::

   \begin{aligned}
   \mathrm{PE}(p)\cdot\mathrm{PE}(p+k) &= \sum_i \cos k\omega_i, \\
   \lVert \mathrm{PE}(p) - \mathrm{PE}(p+k) \rVert
   &= 2\Big(\sum_i \sin^2 \tfrac{k\omega_i}{2}\Big)^{1/2},
   \end{aligned}

both functions of the offset :math:`k` alone
(:func:`posenc.analysis.similarity.sinusoidal_dot_product`, :func:`offset_distance`).  The closest pair among :math:`n` positions is therefore
found by scanning the :math:`n-1` offsets instead of the :math:`n^2/2` pairs
(:func:`collision_summary`).

With learned projections the score :math:`(W_q\mathrm{PE}(p))\cdot(W_k\mathrm{PE}(p+k))`
depends on :math:`p` as well (:func:`projected_scores`); the part of
:math:`W_q^\top W_k` that commutes with every shift (:func:`commuting_part`) gives the
part of the score that depends on :math:`k` alone (:func:`stationary_score`), and that
part has a component odd in :math:`k`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._validation import check_base, check_count, check_d_model
from ..sinusoidal import _sinusoid_rows, inverse_frequencies
from ._memo import memoize

__all__ = [
    "offset_distance",
    "CollisionSummary",
    "collision_summary",
    "phase_coverage",
    "unseen_pair_fraction",
    "projected_scores",
    "commuting_part",
    "stationary_score",
    "ShiftFit",
    "fit_shift",
]

_BLOCK = 1 << 21  # entries per block of the (offsets x pairs) angle matrix: 16 MiB


def _real_array(values, name):
    arr = np.asarray(values)
    if arr.dtype == np.bool_ or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a number or 1-D, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def _blocked(offsets, w, fn):
    """``fn(angles).sum(axis=1)`` for ``angles = offsets[:, None] * w``, in blocks."""
    flat = np.atleast_1d(offsets)
    out = np.empty(flat.shape[0], dtype=np.float64)
    step = max(1, _BLOCK // max(1, w.shape[0]))
    for start in range(0, flat.shape[0], step):  # blocks bound the memory, not a per-item loop
        stop = start + step
        out[start:stop] = fn(flat[start:stop, None] * w[None, :]).sum(axis=1)
    return out.reshape(np.shape(offsets))


@memoize
def offset_distance(offsets, d_model, base=10000.0):
    r"""Euclidean distance between the encodings of two positions ``k`` apart.

    .. math::

       \lVert\mathrm{PE}(p+k) - \mathrm{PE}(p)\rVert
       = 2\Big(\sum_{i} \sin^2\tfrac{k\omega_i}{2}\Big)^{1/2}

    for every ``p`` (each pair contributes the chord :math:`2|\sin(k\omega_i/2)|` of its
    unit circle).  The half-angle form stays accurate for tiny ``k``.

    Parameters
    ----------
    offsets : float or array_like of float
        The offsets ``k`` (any finite reals; the distance is even in ``k``), scalar or 1-D.
    d_model : int
        Model width, a positive even number.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        float64, the shape of ``offsets``; values in ``[0, sqrt(2 * d_model)]``.

    Raises
    ------
    TypeError
        If ``offsets`` are not real numbers, ``d_model`` not an integer or ``base`` not real.
    ValueError
        If ``offsets`` is not scalar or 1-D or not finite, ``d_model`` is odd or ``< 2``,
        or ``base <= 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from posenc import sinusoidal_encoding
    >>> pe = sinusoidal_encoding(600, 512)
    >>> d = offset_distance([1, 512], 512)
    >>> bool(np.allclose(d, [np.linalg.norm(pe[1] - pe[0]), np.linalg.norm(pe[512] - pe[0])]))
    True
    """
    k = _real_array(offsets, "offsets")
    w = inverse_frequencies(check_d_model(d_model, even=True), check_base(base))
    return 2.0 * np.sqrt(_blocked(k, w, lambda a: np.sin(0.5 * a) ** 2))


class CollisionSummary(NamedTuple):
    """How close two different positions among ``0 .. n_positions - 1`` come.

    Attributes
    ----------
    neighbour_distance : float
        ``||PE(p+1) - PE(p)||``, the same for every ``p``.
    closest_offset : int
        The offset ``k >= 2`` whose encodings are closest (``0`` if ``n_positions < 3``).
    closest_distance : float
        Their distance (``nan`` if ``n_positions < 3``).
    first_closer_offset : int or None
        The smallest ``k >= 2`` with a distance below ``neighbour_distance``: a position
        that far away looks more like ``p`` than ``p``'s own neighbour.  ``None`` if no
        offset below ``n_positions`` does.
    """

    neighbour_distance: float
    closest_offset: int
    closest_distance: float
    first_closer_offset: int | None


@memoize
def collision_summary(n_positions, d_model, base=10000.0):
    """Nearest-neighbour and near-collision distances among ``n_positions`` positions.

    Because the distance depends only on the offset (:func:`offset_distance`), the
    closest pair among positions ``0 .. n - 1`` is found by scanning the ``n - 1``
    offsets, in ``O(n d)`` time instead of ``O(n^2 d)``.

    Parameters
    ----------
    n_positions : int
        Number of positions, ``>= 2``.
    d_model : int
        Model width, a positive even number.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    CollisionSummary

    Raises
    ------
    TypeError
        If ``n_positions`` or ``d_model`` is not an integer, or ``base`` not real.
    ValueError
        If ``n_positions < 2``, ``d_model`` is odd or ``< 2``, or ``base <= 1``.

    Examples
    --------
    With four dimensions, position 6 is almost a full turn of the fast pair and barely
    moves the slow one, so it lands closer to position 0 than position 1 does:

    >>> s = collision_summary(1000, 4)
    >>> s.first_closer_offset
    6
    >>> collision_summary(10_000, 64).first_closer_offset is None
    True
    """
    n = check_count(n_positions, "n_positions", minimum=2)
    d = check_d_model(d_model, even=True)
    b = check_base(base)
    dist = offset_distance(np.arange(1, n, dtype=np.float64), d, b)
    neighbour = float(dist[0])
    if n < 3:
        return CollisionSummary(neighbour, 0, float("nan"), None)
    far = dist[1:]
    j = int(np.argmin(far))
    closer = np.flatnonzero(far < neighbour)
    first = int(closer[0]) + 2 if closer.size else None
    return CollisionSummary(neighbour, j + 2, float(far[j]), first)


def phase_coverage(length, d_model, base=10000.0):
    r"""Fraction of its circle each pair sweeps over positions ``0 .. length - 1``.

    Pair ``i`` turns through the angle :math:`(L-1)\omega_i`; the coverage is
    :math:`\min\big(1, (L-1)\omega_i / 2\pi\big)`.  A pair with coverage ``< 1`` has
    shown a model only an arc of its circle; positions beyond ``length`` take it onto
    the part of the circle it has never shown.

    Parameters
    ----------
    length : int
        Sequence length ``L >= 1``.
    d_model : int
        Model width, a positive even number.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(d_model // 2,)``, values in ``[0, 1]``, non-increasing.

    Raises
    ------
    TypeError
        If ``length`` or ``d_model`` is not an integer, or ``base`` not real.
    ValueError
        If ``length < 1``, ``d_model`` is odd or ``< 2``, or ``base <= 1``.

    Examples
    --------
    >>> phase_coverage(100, 4)   # wavelengths 2*pi and 200*pi: 99 positions sweep 16%
    array([1.        , 0.15756339])
    """
    L = check_count(length, "length", minimum=1)
    w = inverse_frequencies(check_d_model(d_model, even=True), check_base(base))
    return np.minimum(1.0, (L - 1) * w / (2.0 * np.pi))


def unseen_pair_fraction(train_length, test_length, d_model, base=10000.0):
    """Fraction of pairs that reach angles at ``test_length`` never reached in training.

    A pair whose circle was not swept completely by positions ``0 .. train_length - 1``
    (:func:`phase_coverage` ``< 1``) is taken onto an unseen arc by any longer
    sequence.

    Parameters
    ----------
    train_length, test_length : int
        Lengths, ``1 <= train_length <= test_length``.
    d_model : int
        Model width, a positive even number.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    float
        In ``[0, 1]``; 0 when ``test_length == train_length``.

    Raises
    ------
    TypeError
        If a length or ``d_model`` is not an integer, or ``base`` not real.
    ValueError
        If a length is ``< 1``, ``test_length < train_length``, ``d_model`` is odd or
        ``< 2``, or ``base <= 1``.

    Examples
    --------
    >>> round(unseen_pair_fraction(512, 2048, 512), 3)
    0.52
    """
    L = check_count(train_length, "train_length", minimum=1)
    T = check_count(test_length, "test_length", minimum=1)
    if T < L:
        raise ValueError(f"test_length must be >= train_length ({L}), got {T}")
    seen = phase_coverage(L, d_model, base)
    later = phase_coverage(T, d_model, base)
    return float(np.mean(later > seen))


def _check_projection(w, name, d=None):
    arr = np.asarray(w)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise TypeError(f"{name} must be a real matrix, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (d_head, d_model), got shape {arr.shape}")
    if d is not None and arr.shape[1] != d:
        raise ValueError(f"{name} must have {d} columns (d_model), got shape {arr.shape}")
    return arr.astype(np.float64)


def _check_pair(w_q, w_k):
    q = _check_projection(w_q, "w_q")
    k = _check_projection(w_k, "w_k", q.shape[1])
    if k.shape[0] != q.shape[0]:
        raise ValueError(f"w_q and w_k must have the same number of rows, got "
                         f"{q.shape[0]} and {k.shape[0]}")
    check_d_model(q.shape[1], "d_model (columns of w_q)", even=True)
    return q, k


def projected_scores(w_q, w_k, positions, offsets, base=10000.0):
    r"""Attention logits of pure position vectors through projections ``w_q``, ``w_k``.

    .. math:: S[a, b] = (W_q\,\mathrm{PE}(p_a)) \cdot (W_k\,\mathrm{PE}(p_a + k_b))

    With ``w_q = w_k = I`` every row is :func:`posenc.analysis.similarity.sinusoidal_dot_product`
    of the offsets; with general projections the score depends on ``p`` as well and is
    no longer even in ``k``.

    Parameters
    ----------
    w_q, w_k : array_like
        Real matrices of the same shape ``(d_head, d_model)``, ``d_model`` even.
    positions : array_like of float
        Query positions ``p_a``, scalar or 1-D, finite.
    offsets : array_like of float
        Offsets ``k_b``, scalar or 1-D, finite (the key sits at ``p_a + k_b``).
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(len(positions), len(offsets))``.  Memory: about
        ``8 * len(positions) * len(offsets) * d_model`` bytes.

    Raises
    ------
    TypeError
        If a matrix, the positions or the offsets are not real, or ``base`` not real.
    ValueError
        If the matrices are not 2-D with equal shapes and an even number of columns,
        positions or offsets are not scalar or 1-D and finite, or ``base <= 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from posenc.analysis.similarity import sinusoidal_dot_product
    >>> eye = np.eye(8)
    >>> s = projected_scores(eye, eye, [0, 100], [-3, 3])
    >>> bool(np.allclose(s, sinusoidal_dot_product([-3, 3], 8)))
    True
    """
    q, k = _check_pair(w_q, w_k)
    d = q.shape[1]
    b = check_base(base)
    p = np.atleast_1d(_real_array(positions, "positions"))
    off = np.atleast_1d(_real_array(offsets, "offsets"))
    left = _sinusoid_rows(p, d, b) @ (q.T @ k)                             # PE(p)^T M, (P, d)
    keys = _sinusoid_rows((p[:, None] + off[None, :]).ravel(), d, b)
    return np.einsum("ad,abd->ab", left, keys.reshape(p.shape[0], off.shape[0], d))


def commuting_part(matrix):
    r"""The part of a ``(d, d)`` matrix that commutes with every shift :math:`T_k`.

    Keeps, in each 2x2 diagonal block :math:`\begin{pmatrix} a & b \\ c & e
    \end{pmatrix}` (pair ``i``: rows and columns ``2i, 2i+1``), the combination
    :math:`\alpha I + \beta J` with :math:`\alpha = (a+e)/2`, :math:`\beta = (c-b)/2`,
    :math:`J = \begin{pmatrix} 0 & -1 \\ 1 & 0 \end{pmatrix}`, and sets every other
    entry to 0.  This is the orthogonal (Frobenius) projection onto the matrices that
    commute with all :func:`posenc.shift_matrix` when the frequencies are distinct.

    Parameters
    ----------
    matrix : array_like
        Real, shape ``(d, d)`` with ``d`` even (e.g. ``w_q.T @ w_k``).

    Returns
    -------
    numpy.ndarray
        float64, shape ``(d, d)``, block diagonal.

    Raises
    ------
    TypeError
        If ``matrix`` is not real.
    ValueError
        If ``matrix`` is not square with an even side.

    Examples
    --------
    >>> import numpy as np
    >>> from posenc import shift_matrix
    >>> m = np.random.default_rng(0).normal(size=(6, 6))
    >>> c = commuting_part(m)
    >>> T = shift_matrix(3, 6)
    >>> bool(np.allclose(c @ T, T @ c))
    True
    """
    m = _check_projection(matrix, "matrix")
    if m.shape[0] != m.shape[1]:
        raise ValueError(f"matrix must be square, got shape {m.shape}")
    d = check_d_model(m.shape[0], "the side of matrix", even=True)
    ev, od = np.arange(0, d, 2), np.arange(1, d, 2)
    alpha = 0.5 * (m[ev, ev] + m[od, od])
    beta = 0.5 * (m[od, ev] - m[ev, od])
    out = np.zeros((d, d))
    out[ev, ev] = out[od, od] = alpha
    out[od, ev] = beta
    out[ev, od] = -beta
    return out


def stationary_score(w_q, w_k, offsets, base=10000.0):
    r"""The part of :func:`projected_scores` that depends on the offset only, split in two.

    Write :math:`M = W_q^\top W_k` as :func:`commuting_part` plus the rest.  The
    commuting part scores every pair of positions by their offset alone:

    .. math::

       \begin{aligned}
       &\sum_i \mathrm{PE}_i(p)^\top (\alpha_i I + \beta_i J)\,\mathrm{PE}_i(p+k) \\
       &\quad= \underbrace{\sum_i \alpha_i\cos k\omega_i}_{\text{even in } k}
       + \underbrace{\sum_i \beta_i\sin k\omega_i}_{\text{odd in } k}
       \end{aligned}

    for every ``p`` (:math:`\mathrm{PE}_i(p)` is pair :math:`i` of :math:`\mathrm{PE}(p)`).
    The rest averages to zero over ``p`` (over spans long compared
    with every wavelength), so this is also the ``p``-average of the full score.  The
    odd part is what lets a learned projection tell "before" from "after"; the
    identity projection has none.

    Parameters
    ----------
    w_q, w_k : array_like
        Real matrices of the same shape ``(d_head, d_model)``, ``d_model`` even.
    offsets : array_like of float
        Offsets ``k``, scalar or 1-D, finite.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The even and the odd part, each float64 with the shape of ``offsets``.

    Raises
    ------
    TypeError, ValueError
        As :func:`projected_scores`.

    Examples
    --------
    >>> import numpy as np
    >>> even, odd = stationary_score(np.eye(8), np.eye(8), [1.0, -1.0])
    >>> bool(np.allclose(odd, 0)), bool(np.isclose(even[0], even[1]))
    (True, True)
    """
    q, k = _check_pair(w_q, w_k)
    d = q.shape[1]
    w = inverse_frequencies(d, check_base(base))
    off = _real_array(offsets, "offsets")
    c = commuting_part(q.T @ k)
    ev, od = np.arange(0, d, 2), np.arange(1, d, 2)
    alpha, beta = c[ev, ev], c[od, ev]
    ang = np.atleast_1d(off)[:, None] * w[None, :]
    even = (np.cos(ang) @ alpha).reshape(off.shape)
    odd = (np.sin(ang) @ beta).reshape(off.shape)
    return even, odd


class ShiftFit(NamedTuple):
    """The best linear map from the rows of a table to the rows ``offset`` further on.

    Attributes
    ----------
    matrix : numpy.ndarray
        ``T`` of shape ``(d, d)`` minimising ``||table[:-k] @ T.T - table[k:]||``.
    relative_residual : float
        ``||table[:-k] @ T.T - table[k:]|| / ||table[k:]||`` (Frobenius norms).
    column_residuals : numpy.ndarray
        The same ratio for each output column, shape ``(d,)``.
    """

    matrix: np.ndarray
    relative_residual: float
    column_residuals: np.ndarray


def fit_shift(table, offset):
    """Least-squares fit of ``table[p + offset] ≈ T @ table[p]`` over every row ``p``.

    For the sinusoidal encoding an exact ``T`` exists (:func:`posenc.shift_matrix`) and
    the residual is at rounding level; for a table whose columns are not (sin, cos)
    pairs of one frequency no linear map does the job, and the residual says by how
    much it fails.

    Parameters
    ----------
    table : array_like
        Real, shape ``(n, d)`` with ``n > offset``.
    offset : int
        The shift ``k >= 1``.

    Returns
    -------
    ShiftFit

    Raises
    ------
    TypeError
        If ``table`` is not real or ``offset`` not an integer.
    ValueError
        If ``table`` is not 2-D, ``offset < 1`` or ``offset >= len(table)``.

    Examples
    --------
    >>> from posenc import sinusoidal_encoding
    >>> fit = fit_shift(sinusoidal_encoding(200, 16), 3)
    >>> bool(fit.relative_residual < 1e-10)
    True
    """
    x = np.asarray(table)
    if x.dtype == np.bool_ or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise TypeError(f"table must hold real numbers, got dtype {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"table must be 2-D (positions, d), got shape {x.shape}")
    k = check_count(offset, "offset", minimum=1)
    if k >= x.shape[0]:
        raise ValueError(f"offset must be < the number of rows ({x.shape[0]}), got {k}")
    x = x.astype(np.float64)
    src, dst = x[:-k], x[k:]
    sol, *_ = np.linalg.lstsq(src, dst, rcond=None)   # dst ≈ src @ sol, so T = sol.T
    res = src @ sol - dst
    col = np.linalg.norm(res, axis=0) / np.maximum(np.linalg.norm(dst, axis=0), 1e-300)
    rel = float(np.linalg.norm(res) / np.linalg.norm(dst))
    return ShiftFit(sol.T, rel, col)
