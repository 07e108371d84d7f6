r"""Naive positional encodings: the raw index, the normalised index, the binary code.

Each one is a natural first idea, and each one fails in a way the book shows:

* :func:`index_encoding` puts the position ``p`` itself in every column.  Its values grow
  without bound (position 500 adds 500 to every feature, while token embeddings are of
  order 1), so the position drowns the meaning of the token.
* :func:`normalized_index_encoding` divides by ``n_positions - 1`` to stay in
  ``[0, 1]``; but then the same position gets a different code in sequences of
  different lengths, and the step between neighbours shrinks as sequences grow.
* :func:`binary_encoding` writes ``p`` in base 2, one bit per column (column 0 is the
  least significant bit and flips at every step, column 1 every 2 steps, column ``j``
  every ``2**j`` steps, like the wheels of a counter).  Bounded and unique up to
  ``2**d_model`` positions, but the values jump between 0 and 1, and the distance between
  two codes says little about the distance between positions (7 = 0111 and 8 = 1000
  differ in every bit).

All three return float64 arrays of shape ``(n_positions, d_model)``, row ``p`` being the
code of position ``p = 0, 1, ..., n_positions - 1``.
"""

from __future__ import annotations

import numpy as np

from ._typing import FloatArray
from ._validation import check_count, check_d_model

__all__ = ["index_encoding", "normalized_index_encoding", "binary_encoding"]


def index_encoding(n_positions: int, d_model: int) -> FloatArray:
    """The raw index: every column of row ``p`` holds ``p``.

    .. math:: \\mathrm{PE}[p, j] = p

    Parameters
    ----------
    n_positions : int
        Number of positions (rows), ``>= 0``.
    d_model : int
        Width of the encoding (columns), ``>= 1``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(n_positions, d_model)``.

    Raises
    ------
    TypeError
        If ``n_positions`` or ``d_model`` is not an integer.
    ValueError
        If ``n_positions < 0`` or ``d_model < 1``.

    Examples
    --------
    >>> index_encoding(3, 2)
    array([[0., 0.],
           [1., 1.],
           [2., 2.]])
    """
    n = check_count(n_positions, "n_positions")
    d = check_d_model(d_model)
    return np.broadcast_to(np.arange(n, dtype=np.float64)[:, None], (n, d)).copy()


def normalized_index_encoding(n_positions: int, d_model: int) -> FloatArray:
    """The index divided by the last index: every column of row ``p`` holds ``p / (n - 1)``.

    .. math:: \\mathrm{PE}[p, j] = \\frac{p}{n - 1}, \\qquad n = \\texttt{n\\_positions}

    Values run from 0 (first position) to 1 (last position).  With a single position
    there is nothing to divide by (``n - 1 = 0``); that position is the first *and* the
    last, and this function returns zeros for it (the "first position" reading), not a
    division by zero.

    Parameters
    ----------
    n_positions : int
        Number of positions, ``>= 0``.
    d_model : int
        Width of the encoding, ``>= 1``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(n_positions, d_model)``, values in ``[0, 1]``.

    Raises
    ------
    TypeError
        If ``n_positions`` or ``d_model`` is not an integer.
    ValueError
        If ``n_positions < 0`` or ``d_model < 1``.

    Examples
    --------
    >>> normalized_index_encoding(5, 1).ravel()
    array([0.  , 0.25, 0.5 , 0.75, 1.  ])
    >>> normalized_index_encoding(1, 2)
    array([[0., 0.]])

    The same position 2 gets different codes in sequences of different lengths:

    >>> float(normalized_index_encoding(5, 1)[2, 0]), float(normalized_index_encoding(9, 1)[2, 0])
    (0.5, 0.25)
    """
    n = check_count(n_positions, "n_positions")
    d = check_d_model(d_model)
    column = np.arange(n, dtype=np.float64) / max(n - 1, 1)
    return np.broadcast_to(column[:, None], (n, d)).copy()


def binary_encoding(n_positions: int, d_model: int) -> FloatArray:
    """Bit ``j`` of ``p`` in column ``j``, least significant bit first.

    .. math:: \\mathrm{PE}[p, j] = \\left\\lfloor p / 2^{j} \\right\\rfloor \\bmod 2

    Column 0 varies fastest (0, 1, 0, 1, ...), column ``j`` has period ``2**(j + 1)``.
    Positions ``p >= 2**d_model`` need more bits than there are columns: their high bits
    are dropped, so position ``p`` and ``p - 2**d_model`` collide (the counter wraps).

    Parameters
    ----------
    n_positions : int
        Number of positions, ``>= 0``.
    d_model : int
        Number of bits (columns), ``>= 1``.

    Returns
    -------
    numpy.ndarray
        float64 of 0s and 1s, shape ``(n_positions, d_model)``.

    Raises
    ------
    TypeError
        If ``n_positions`` or ``d_model`` is not an integer.
    ValueError
        If ``n_positions < 0`` or ``d_model < 1``.

    Examples
    --------
    >>> binary_encoding(6, 3)
    array([[0., 0., 0.],
           [1., 0., 0.],
           [0., 1., 0.],
           [1., 1., 0.],
           [0., 0., 1.],
           [1., 0., 1.]])
    """
    n = check_count(n_positions, "n_positions")
    d = check_d_model(d_model)
    p = np.arange(n, dtype=np.int64)[:, None]
    j = np.arange(d, dtype=np.int64)[None, :]
    # p < 2**63, so bit j of p is 0 for j >= 63; shifting an int64 by >= 64 is undefined,
    # so shift by at most 62 and mask the rest.
    bits = (p >> np.minimum(j, 62)) & 1
    bits = np.where(j < 63, bits, 0)
    return bits.astype(np.float64)
