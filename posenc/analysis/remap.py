r"""Training-free position remapping: Self-Extend's grouped offsets (Jin et al. 2024) and
STRING's shifted offsets (An et al. 2024).

Self-Extend keeps the exact relative position ``r = p - j`` of a query at
``p`` and a key at ``j`` inside a neighbour window of ``W`` tokens, and
uses floor-divided positions beyond it, shifted so that the two parts meet:

.. math:: r'(p, j) = \begin{cases} p - j, & p - j < W,\\
          \lfloor p/G\rfloor - \lfloor j/G\rfloor + W - \lfloor W/G\rfloor,
          & p - j \ge W, \end{cases}

with ``G`` the group size.  This is the decoding path of the authors' patch
(``self_extend_patch/Llama.py``: ``neighbor_key_position`` for the last
``group_size_2`` keys, ``group_key_position`` for the others, ``group_size_1`` =
``G``, ``group_size_2`` = ``W``); the prefill path rotates queries and keys
with the same two sets of positions and picks per key the same way.

STRING keeps the offsets below a shift ``S`` and moves every larger one down by
``S - W``, so that offset ``S`` becomes the small local value ``W``:

.. math:: r'(p, j) = \begin{cases} p - j, & p - j < S,\\
          p - j - S + W, & p - j \ge S. \end{cases}

This is the decoding path of the authors' ``string_for_llama.py`` (``diag_size`` =
``S``, ``local_window`` = ``W``): the last ``S`` cached keys are attended
with the query at its own position, the others with the query rotated at
``p - S + W``, and the two halves merged by their log-sum-exp.  The offsets used
within a sequence of ``n`` tokens are therefore at most
:math:`\max(S - 1,\; n - 1 - S + W)`.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._typing import ArrayLike, IntArray

__all__ = ["self_extend_offsets", "string_offsets", "offset_counts"]


def _int_at_least(value, name, least):
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < least:
        raise ValueError(f"{name} must be >= {least}, got {value}")
    return int(value)


def _positive_int(value, name):
    return _int_at_least(value, name, 1)


def _nonnegative_int(value, name):
    return _int_at_least(value, name, 0)


def _causal_offsets(query_positions, key_positions):
    """p - j as int64, broadcast, after checking both are integers >= 0 and j <= p."""
    p = np.asarray(query_positions)
    j = np.asarray(key_positions)
    for name, a in (("query_positions", p), ("key_positions", j)):
        if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"{name} must be integers, got dtype {a.dtype}")
        if a.size and a.min() < 0:
            raise ValueError(f"{name} must be >= 0, got {int(a.min())}")
    p, j = np.broadcast_arrays(p.astype(np.int64), j.astype(np.int64))
    r = p - j
    if r.size and r.min() < 0:
        raise ValueError("every key must lie at or before its query (key_positions <= "
                         "query_positions)")
    return p, j, r


def self_extend_offsets(query_positions: ArrayLike, key_positions: ArrayLike, *,
                        group_size: int, window: int) -> IntArray:
    r"""The relative positions Self-Extend gives each (query, key) pair.

    Parameters
    ----------
    query_positions, key_positions : array_like of int
        Positions ``p`` and ``j`` (``>= 0``), broadcast against each other;
        pairs with ``j > p`` (masked in a causal model) are rejected.
    group_size : int, keyword-only
        ``G`` (``group_size_1`` in the authors' code), ``>= 1``.
    window : int, keyword-only
        ``W``, the neighbour window (``group_size_2``), ``>= 1``.

    Returns
    -------
    numpy.ndarray
        int64, the broadcast shape: ``r'(p, j)`` of the module docstring.

    Raises
    ------
    TypeError
        If positions are not integers, or ``group_size`` / ``window`` not integers.
    ValueError
        If a position is negative, a key lies after its query, or ``group_size`` /
        ``window`` is < 1.

    Examples
    --------
    >>> self_extend_offsets(16_383, [16_383, 15_360, 15_359, 0],
    ...                     group_size=8, window=1024).tolist()
    [0, 1023, 1024, 2943]
    """
    p, j, r = _causal_offsets(query_positions, key_positions)
    g = _positive_int(group_size, "group_size")
    w = _positive_int(window, "window")
    grouped = p // g - j // g + (w - w // g)
    return np.where(r < w, r, grouped)


def string_offsets(query_positions: ArrayLike, key_positions: ArrayLike, *,
                   shift: int, window: int) -> IntArray:
    r"""The relative positions STRING gives each (query, key) pair.

    Parameters
    ----------
    query_positions, key_positions : array_like of int
        Positions ``p`` and ``j`` (``>= 0``), broadcast against each other;
        pairs with ``j > p`` (masked in a causal model) are rejected.
    shift : int, keyword-only
        ``S`` (``shifted_offset`` in the authors' code), ``>= 1``: offsets below it
        are kept.
    window : int, keyword-only
        ``W`` (``small_local_value``), ``0 <= W <= S``: the offset that ``S``
        becomes.  ``W = S`` changes nothing.

    Returns
    -------
    numpy.ndarray
        int64, the broadcast shape: ``r'(p, j)`` of the module docstring.

    Raises
    ------
    TypeError
        If positions, ``shift`` or ``window`` are not integers.
    ValueError
        If a position is negative, a key lies after its query, ``shift`` < 1, ``window``
        < 0 or ``window`` > ``shift``.

    Examples
    --------
    >>> string_offsets(9, range(9, -1, -1), shift=4, window=1).tolist()
    [0, 1, 2, 3, 1, 2, 3, 4, 5, 6]
    """
    _, _, r = _causal_offsets(query_positions, key_positions)
    s = _positive_int(shift, "shift")
    w = _nonnegative_int(window, "window")
    if w > s:
        raise ValueError(f"window must be <= shift (STRING moves offsets down by "
                         f"shift - window), got window={w} > shift={s}")
    return np.where(r < s, r, r - s + w)


def offset_counts(length: int) -> IntArray:
    r"""How many (query, key) pairs of one causal sequence of ``length`` tokens lie at
    each offset: ``c_r = n - r`` for :math:`r = 0, \dots, n - 1`.

    Training on sequences packed to ``n`` tokens sees offset ``r`` this often
    per sequence: the left-skewed distribution An et al. blame for the effective
    context falling short of the training length.

    Raises
    ------
    TypeError, ValueError
        If ``length`` is not an integer >= 1.

    Examples
    --------
    >>> offset_counts(4).tolist()
    [4, 3, 2, 1]
    """
    n = _positive_int(length, "length")
    return np.arange(n, 0, -1, dtype=np.int64)
