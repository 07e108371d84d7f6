r"""Relative positions in attention: T5's buckets and Shaw et al.'s clipping.

A relative scheme gives attention the offset between a query at position :math:`i` and a
key at position :math:`j` instead of (or as well as) the two positions themselves.  This
module holds the index arithmetic that such schemes share; the learned tables that the
indices select live in :mod:`posenc.torch.relative`.

Offsets (:func:`relative_positions`) follow the convention of T5 and of Shaw et al.:
``key position - query position``, so ``j - i``, negative for keys in the past.

Shaw, Uszkoreit and Vaswani (2018) clip the offset to :math:`[-k, k]` and learn one
vector per clipped offset, :math:`2k + 1` in all (:func:`shaw_relative_index`).

T5 (Raffel et al. 2020) learns one scalar per *bucket* and head and adds it to the score
(:func:`t5_relative_position_bucket`).  With ``num_buckets`` :math:`B` and
``max_distance`` :math:`D`: the bidirectional form (T5's encoder) spends half the
buckets on keys after the query and half on the rest, so each side has :math:`b = B/2`;
the causal form (T5's decoder) maps every key after the query to bucket 0 and has
:math:`b = B` buckets for the distance :math:`r = i - j \ge 0`.  Of the :math:`b`
buckets, the first :math:`b/2` hold the distances :math:`0, 1, \dots, b/2 - 1` exactly;
the others cover logarithmically wider ranges up to :math:`D`,

.. math:: \text{bucket}(r) = \frac{b}{2} + \left\lfloor
   \frac{\ln(2r/b)}{\ln(2D/b)} \left(b - \frac{b}{2}\right) \right\rfloor,
   \qquad r \ge b/2,

capped at :math:`b - 1`.  :math:`D` is where the uncapped formula would reach :math:`b`;
the last bucket starts earlier, where it reaches :math:`b - 1` (distance 91 with T5's
defaults :math:`B = 32`, :math:`D = 128`, bidirectional), and holds every larger distance
(:func:`t5_bucket_layout` lists the ranges).  The logarithm is taken in float32, exactly
as T5's code does, so the buckets are those of Hugging Face ``transformers`` at every
offset (the tests compare them).
"""

from __future__ import annotations

import math

import numpy as np

from ._typing import ArrayLike, IntArray
from ._validation import _is_integer, check_bool, check_count

__all__ = [
    "relative_positions",
    "shaw_relative_index",
    "t5_relative_position_bucket",
    "t5_bucket_layout",
]


def _check_offset(value, name="offset"):
    if not _is_integer(value):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    return int(value)


def _integer_array(value, name):
    """``value`` as an int64 array; floats, booleans and non-numbers are a TypeError."""
    if type(value).__module__.startswith("torch"):
        raise TypeError(
            f"{name} must be a NumPy array or Python integers, got a torch tensor "
            "(use posenc.torch.T5RelativePositionBias for tensors, or call .numpy())"
        )
    arr = np.asarray(value)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must have an integer dtype, got {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def check_t5_buckets(num_buckets, max_distance, bidirectional):
    """Check T5's bucket settings; return ``(num_buckets, max_distance, bidirectional)``.

    ``num_buckets`` must be even (the bidirectional form splits it in two halves, each
    split again into exact and logarithmic buckets) and leave at least one exact bucket:
    ``>= 2`` for the causal form, ``>= 4`` for the bidirectional one.  ``max_distance``
    must exceed the number of exact buckets per side, ``max_exact`` (``num_buckets // 2``
    causal, ``num_buckets // 4`` bidirectional), or the logarithm's scale
    ``log(max_distance / max_exact)`` is zero or negative.

    Raises
    ------
    TypeError
        If a count is not an integer or ``bidirectional`` is not a bool.
    ValueError
        If a rule above is broken.
    """
    bidirectional = check_bool(bidirectional, "bidirectional")
    num_buckets = check_count(num_buckets, "num_buckets", minimum=4 if bidirectional else 2)
    if num_buckets % 2:
        raise ValueError(f"num_buckets must be even, got {num_buckets}")
    max_distance = check_count(max_distance, "max_distance", minimum=1)
    per_side = num_buckets // 2 if bidirectional else num_buckets
    max_exact = per_side // 2
    if max_distance <= max_exact:
        form = "num_buckets // 4, bidirectional" if bidirectional else "num_buckets // 2, causal"
        raise ValueError(
            f"max_distance must be > the number of exact buckets, {max_exact} ({form}), "
            f"got {max_distance}"
        )
    return num_buckets, max_distance, bidirectional


def relative_positions(query_length: int, key_length: int, *, offset: int = 0) -> IntArray:
    """The offset ``j - (i + offset)`` of key ``j`` from query ``i``, for every pair.

    This is T5's ``memory_position - context_position``: queries sit at positions
    ``offset, offset + 1, ...`` (``offset`` is the number of tokens already cached when
    decoding), keys at ``0, 1, ...``.

    Parameters
    ----------
    query_length, key_length : int
        Number of queries and keys, ``>= 0``.
    offset : int, keyword-only, default 0
        Position of the first query.

    Returns
    -------
    numpy.ndarray
        int64, shape ``(query_length, key_length)``.

    Raises
    ------
    TypeError
        If an argument is not an integer.
    ValueError
        If a length is negative.

    Examples
    --------
    >>> relative_positions(3, 3)
    array([[ 0,  1,  2],
           [-1,  0,  1],
           [-2, -1,  0]])
    >>> relative_positions(1, 4, offset=3)        # one new query after 3 cached tokens
    array([[-3, -2, -1,  0]])
    """
    q = check_count(query_length, "query_length")
    k = check_count(key_length, "key_length")
    offset = _check_offset(offset)
    return np.arange(k, dtype=np.int64)[None, :] - (np.arange(q, dtype=np.int64)[:, None] + offset)


def shaw_relative_index(relative_position: ArrayLike, max_relative_position: int) -> IntArray:
    """Row of Shaw et al.'s relative table for each offset: ``clip(r, -k, k) + k``.

    Shaw et al. (2018) learn :math:`2k + 1` vectors :math:`w_{-k}, \\dots, w_k` and give
    the pair (query ``i``, key ``j``) the vector :math:`w_{\\mathrm{clip}(j - i, -k, k)}`:
    every offset beyond :math:`k` in either direction shares the outermost vector.

    Parameters
    ----------
    relative_position : array_like of int
        Offsets ``j - i`` (for example from :func:`relative_positions`), any shape.
    max_relative_position : int
        The clipping distance :math:`k`, ``>= 1``.

    Returns
    -------
    numpy.ndarray
        int64, the shape of ``relative_position``, entries in ``[0, 2k]``.

    Raises
    ------
    TypeError
        If the offsets are not integers or ``max_relative_position`` is not an integer.
    ValueError
        If ``max_relative_position < 1``.

    Examples
    --------
    >>> shaw_relative_index([-5, -2, -1, 0, 1, 2, 5], 2)
    array([0, 0, 1, 2, 3, 4, 4])
    """
    k = check_count(max_relative_position, "max_relative_position", minimum=1)
    r = _integer_array(relative_position, "relative_position")
    return np.clip(r, -k, k) + k


def t5_relative_position_bucket(relative_position: ArrayLike, *, bidirectional: bool = True,
                                num_buckets: int = 32, max_distance: int = 128) -> IntArray:
    """T5's bucket index for each offset ``j - i``.

    Equal to ``transformers``' ``T5Attention._relative_position_bucket`` (itself
    adapted from Mesh TensorFlow): the logarithm is computed in float32 as there.

    Parameters
    ----------
    relative_position : array_like of int
        Offsets ``key position - query position``, any shape.
    bidirectional : bool, keyword-only, default True
        ``True``: T5's encoder form; buckets ``0 .. num_buckets/2 - 1`` for keys at or
        before the query, ``num_buckets/2 ..`` for keys after it.  ``False``: the causal
        (decoder) form; every key after the query gets bucket 0, the same as the key at
        the query's own position.
    num_buckets : int, keyword-only, default 32
        Even; ``>= 4`` bidirectional, ``>= 2`` causal.
    max_distance : int, keyword-only, default 128
        Scale of the logarithmic buckets: every distance ``>= max_distance`` is in the
        last bucket of its side (which starts before it); ``>`` the number of exact
        buckets per side.

    Returns
    -------
    numpy.ndarray
        int64, the shape of ``relative_position``, entries in ``[0, num_buckets)``.

    Raises
    ------
    TypeError
        If the offsets or counts are not integers, or ``bidirectional`` is not a bool.
    ValueError
        If ``num_buckets`` is odd or too small, or ``max_distance`` is not larger than
        the number of exact buckets (see :func:`check_t5_buckets`).

    Examples
    --------
    >>> r = [-200, -128, -127, -16, -9, -8, -7, -1, 0, 1, 7, 8, 200]
    >>> t5_relative_position_bucket(r)
    array([15, 15, 15, 10,  8,  8,  7,  1,  0, 17, 23, 24, 31])
    >>> t5_relative_position_bucket(r, bidirectional=False)
    array([31, 31, 31, 16,  9,  8,  7,  1,  0,  0,  0,  0,  0])
    """
    num_buckets, max_distance, bidirectional = check_t5_buckets(
        num_buckets, max_distance, bidirectional
    )
    r = _integer_array(relative_position, "relative_position")
    buckets = np.zeros(r.shape, dtype=np.int64)
    if bidirectional:
        num_buckets //= 2
        buckets += (r > 0).astype(np.int64) * num_buckets
        distance = np.abs(r)
    else:
        distance = -np.minimum(r, 0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # float32, as in T5: log(distance / max_exact) / log(max_distance / max_exact) * n_log
    safe = np.where(is_small, max_exact, distance).astype(np.float32)
    scaled = (
        np.log(safe / np.float32(max_exact))
        / np.float32(math.log(max_distance / max_exact))
        * np.float32(num_buckets - max_exact)
    )
    large = np.minimum(max_exact + scaled.astype(np.int64), num_buckets - 1)
    return buckets + np.where(is_small, distance, large)


def t5_bucket_layout(*, bidirectional: bool = True, num_buckets: int = 32,
                     max_distance: int = 128) -> IntArray:
    """Which distances each bucket of one side holds: ``(first, last)`` per bucket.

    For the side of keys at or before the query (distances ``r = i - j >= 0``), row ``b``
    gives the smallest and largest distance in bucket ``b``.  The last bucket is
    open-ended: its ``last`` is ``-1`` ("and every larger distance").  A bucket that no
    distance reaches (when ``max_distance`` is barely above the exact range, the
    logarithmic step can jump over buckets) is ``(-1, -1)``.

    Parameters
    ----------
    bidirectional, num_buckets, max_distance
        As for :func:`t5_relative_position_bucket`.

    Returns
    -------
    numpy.ndarray
        int64, shape ``(b, 2)`` with ``b = num_buckets / 2`` (bidirectional) or
        ``num_buckets`` (causal).

    Raises
    ------
    TypeError, ValueError
        As :func:`t5_relative_position_bucket`.

    Examples
    --------
    >>> t5_bucket_layout()[[0, 7, 8, 14, 15]]
    array([[ 0,  0],
           [ 7,  7],
           [ 8, 11],
           [64, 90],
           [91, -1]])
    """
    num_buckets, max_distance, bidirectional = check_t5_buckets(
        num_buckets, max_distance, bidirectional
    )
    per_side = num_buckets // 2 if bidirectional else num_buckets
    # the buckets are monotone in the distance and saturate before 2 * max_distance
    distance = np.arange(2 * max_distance + 1, dtype=np.int64)
    b = t5_relative_position_bucket(
        -distance, bidirectional=bidirectional, num_buckets=num_buckets,
        max_distance=max_distance,
    )
    ids = np.arange(per_side)
    first = np.searchsorted(b, ids, side="left")
    last = np.searchsorted(b, ids, side="right") - 1
    empty = last < first  # no distance lands there (possible when max_distance is small)
    last[-1] = -1
    out = np.stack([first, last], axis=1)
    out[empty] = -1
    return out
