r"""Training-free position remapping: Self-Extend's grouped offsets (Jin et al. 2024).

Self-Extend keeps the exact relative position :math:`r = p - j` of a query at
:math:`p` and a key at :math:`j` inside a neighbour window of :math:`W` tokens, and
uses floor-divided positions beyond it, shifted so that the two parts meet:

.. math:: r'(p, j) = \begin{cases} p - j, & p - j < W,\\
          \lfloor p/G\rfloor - \lfloor j/G\rfloor + W - \lfloor W/G\rfloor,
          & p - j \ge W, \end{cases}

with :math:`G` the group size.  This is the decoding path of the authors' patch
(``self_extend_patch/Llama.py``: ``neighbor_key_position`` for the last
``group_size_2`` keys, ``group_key_position`` for the others, ``group_size_1`` =
:math:`G`, ``group_size_2`` = :math:`W`); the prefill path rotates queries and keys
with the same two sets of positions and picks per key the same way.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._typing import ArrayLike, IntArray

__all__ = ["self_extend_offsets"]


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


def self_extend_offsets(query_positions: ArrayLike, key_positions: ArrayLike, *,
                        group_size: int, window: int) -> IntArray:
    r"""The relative positions Self-Extend gives each (query, key) pair.

    Parameters
    ----------
    query_positions, key_positions : array_like of int
        Positions :math:`p` and :math:`j` (``>= 0``), broadcast against each other;
        pairs with :math:`j > p` (masked in a causal model) are rejected.
    group_size : int, keyword-only
        :math:`G` (``group_size_1`` in the authors' code), ``>= 1``.
    window : int, keyword-only
        :math:`W`, the neighbour window (``group_size_2``), ``>= 1``.

    Returns
    -------
    numpy.ndarray
        int64, the broadcast shape: :math:`r'(p, j)` of the module docstring.

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
    p = np.asarray(query_positions)
    j = np.asarray(key_positions)
    for name, a in (("query_positions", p), ("key_positions", j)):
        if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"{name} must be integers, got dtype {a.dtype}")
        if a.size and a.min() < 0:
            raise ValueError(f"{name} must be >= 0, got {int(a.min())}")
    g = _positive_int(group_size, "group_size")
    w = _positive_int(window, "window")
    p, j = np.broadcast_arrays(p.astype(np.int64), j.astype(np.int64))
    r = p - j
    if r.size and r.min() < 0:
        raise ValueError("every key must lie at or before its query (key_positions <= "
                         "query_positions)")
    grouped = p // g - j // g + (w - w // g)
    return np.where(r < w, r, grouped)
