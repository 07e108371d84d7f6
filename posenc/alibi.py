r"""ALiBi: attention with linear biases (Press, Smith and Lewis, ICLR 2022).

ALiBi adds nothing to the token embeddings.  Each attention head :math:`h` adds a fixed
penalty to its (scaled) attention scores, proportional to how far the key lies behind
the query:

.. math:: s_{h,ij} = \frac{q_i \cdot k_j}{\sqrt{d_k}} - m_h\,(i - j), \qquad j \le i,

in a causal (decoder) model, where query :math:`i` never sees a key :math:`j > i`.  The
bias depends on the two positions only through :math:`i - j`, and the slopes
:math:`m_h > 0` are fixed, not learned.

Slopes (:func:`alibi_slopes`).  For :math:`n` heads, :math:`n` a power of two, the paper
uses the geometric sequence that starts at :math:`2^{-8/n}` and has that same ratio,

.. math:: m_h = 2^{-8h/n}, \qquad h = 1, \dots, n,

so 8 heads get :math:`1/2, 1/4, \dots, 1/256`.  The paper trains only models whose head
count is a power of two; for any other :math:`n` this module follows the authors'
reference code: with :math:`p = 2^{\lfloor \log_2 n \rfloor}` (the largest power of two
below :math:`n`), the first :math:`p` slopes are those of :math:`p` heads, and the
remaining :math:`n - p` are :math:`2^{-8(k - 1/2)/p}`, :math:`k = 1, \dots, n - p`:
every other slope of :math:`2p` heads, starting with its first, each lying (on a log
scale) halfway between two neighbours of the first group.  They are *appended* after the
first :math:`p` slopes, not sorted into them, so the head order matches the reference
code (and checkpoints trained with it).

Bias (:func:`alibi_bias`).  ``causal=True`` (the default, the paper's form) gives
:math:`-m_h (i - j)` on and below the diagonal and :math:`-\infty` above it, so adding
the bias to the scores also applies the causal mask.  ``causal=False`` gives the
symmetric :math:`-m_h\,|i - j|`, a common variant for models without a causal mask
(encoders); it is *not* in the paper.  Note that the symmetric variant cannot tell a
sequence from its reversal: reversing the tokens keeps every distance :math:`|i - j|`.
"""

from __future__ import annotations

import numpy as np

from ._typing import FloatArray
from ._validation import check_bool, check_count

__all__ = ["alibi_slopes", "alibi_bias"]


def _power_of_two_slopes(n):
    """``2**(-8h/n)`` for ``h = 1..n`` (``n`` a power of two)."""
    return np.exp2(-8.0 * np.arange(1, n + 1, dtype=np.float64) / n)


def alibi_slopes(n_heads: int) -> FloatArray:
    """The ALiBi slope :math:`m_h` of every head, in head order.

    For ``n_heads`` a power of two, :math:`m_h = 2^{-8h/n}` for ``h = 1..n_heads``.
    Otherwise, with ``p`` the largest power of two below ``n_heads``: the ``p`` slopes
    of ``p`` heads, followed by the first ``n_heads - p`` of every other slope of ``2p``
    heads (``2**(-8 (k - 1/2) / p)``, ``k = 1, 2, ...``), as in the authors' reference
    code (the paper itself only uses powers of two).

    Parameters
    ----------
    n_heads : int
        Number of attention heads, ``>= 1``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(n_heads,)``, every entry in ``(0, 1)``.

    Raises
    ------
    TypeError
        If ``n_heads`` is not an integer.
    ValueError
        If ``n_heads < 1``.

    Examples
    --------
    >>> alibi_slopes(8) * 256          # 1/2, 1/4, ..., 1/256
    array([128.,  64.,  32.,  16.,   8.,   4.,   2.,   1.])
    >>> alibi_slopes(4)                # 2^(-8h/4) = 1/4, 1/16, 1/64, 1/256
    array([0.25      , 0.0625    , 0.015625  , 0.00390625])

    Six heads: the four slopes of 4 heads, then two slopes of 8 heads that fall
    halfway between them (1/2 between 1 and 1/4, 1/8 between 1/4 and 1/16):

    >>> alibi_slopes(6)
    array([0.25      , 0.0625    , 0.015625  , 0.00390625, 0.5       ,
           0.125     ])
    """
    n = check_count(n_heads, "n_heads", minimum=1)
    p = 1 << (n.bit_length() - 1)  # the largest power of two <= n
    slopes = _power_of_two_slopes(p)
    if p == n:
        return slopes
    extra = _power_of_two_slopes(2 * p)[0::2][: n - p]
    return np.concatenate([slopes, extra])


def alibi_bias(n_positions: int, n_heads: int, *, causal: bool = True) -> FloatArray:
    """The ALiBi bias of every head, to be added to the scaled attention scores.

    ``bias[h, i, j] = -m_h * (i - j)`` for a query at ``i`` and a key at ``j <= i``, with
    :math:`m_h` from :func:`alibi_slopes`.  Add it to ``q k^T / sqrt(d_k)`` before the
    softmax (for example through the ``bias`` argument of
    :func:`posenc.scaled_dot_product_attention`); nothing is added to the embeddings.

    Parameters
    ----------
    n_positions : int
        Sequence length ``n``, ``>= 0``.
    n_heads : int
        Number of heads, ``>= 1``.
    causal : bool, keyword-only, default True
        ``True``: the paper's causal bias, with ``-inf`` above the diagonal (keys in the
        future), so that adding it also applies the causal mask.  ``False``: the
        symmetric variant ``-m_h * |i - j|`` used without a causal mask; a common
        variant, not the paper's.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(n_heads, n, n)``; 0 on the diagonal, negative below it (and
        above it when ``causal=False``).  Each entry depends on ``i`` and ``j`` only
        through ``i - j``.

    Raises
    ------
    TypeError
        If ``n_positions`` or ``n_heads`` is not an integer, or ``causal`` is not a bool.
    ValueError
        If ``n_positions < 0`` or ``n_heads < 1``.

    Examples
    --------
    >>> alibi_bias(4, 8)[0]            # head 1, slope 1/2
    array([[ 0. , -inf, -inf, -inf],
           [-0.5,  0. , -inf, -inf],
           [-1. , -0.5,  0. , -inf],
           [-1.5, -1. , -0.5,  0. ]])
    >>> alibi_bias(3, 8, causal=False)[0]
    array([[ 0. , -0.5, -1. ],
           [-0.5,  0. , -0.5],
           [-1. , -0.5,  0. ]])
    >>> alibi_bias(5, 12).shape
    (12, 5, 5)
    """
    n = check_count(n_positions, "n_positions")
    slopes = alibi_slopes(n_heads)
    causal = check_bool(causal, "causal")
    pos = np.arange(n)
    behind = pos[:, None] - pos[None, :]  # i - j: how far key j lies behind query i
    if causal:
        distance = np.where(behind >= 0, behind, 0).astype(np.float64)
    else:
        distance = np.abs(behind).astype(np.float64)
    bias = 0.0 - slopes[:, None, None] * distance[None, :, :]  # 0.0 - 0.0 is +0.0, not -0.0
    if causal:
        bias = np.where((behind >= 0)[None, :, :], bias, -np.inf)
    return bias
