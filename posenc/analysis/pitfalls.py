"""Deliberately WRONG positional-encoding code, kept for the book's gallery of bugs.

Every function here reproduces one mistake that appears in public code and tutorials
(the chapter ``pitfalls`` of the book shows where).  They are wrong on purpose: do not
use them to encode anything.  They exist so that the book can show each bug next to the
correct :mod:`posenc` result, measure the size of the error, and so that
``tests/book/test_chapter_pitfalls.py`` can pin those measurements.

The module is not imported by :mod:`posenc` and nothing in :mod:`posenc` calls it.
Unlike the rest of the package, the functions do not validate their arguments: feeding
them the inputs that break them is the point.  The book's page defines the same
functions in its code cells; a test checks that page and module agree, statement for
statement (comments and docstrings aside).

All NumPy functions return float64 arrays of shape ``(n_positions, d_model)`` with the
sine in the even columns and the cosine in the odd columns (the "interleaved" layout of
the Transformer paper), like :func:`posenc.sinusoidal_encoding`.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "pe_double_step",
    "pe_cos_own_index",
    "pe_floor_exponent",
    "pe_concatenated",
    "pe_in_dtype",
    "pe_pair_loop",
    "pe_half_loop",
    "pe_broadcast",
    "pe_square_base1000",
    "pe_base1000_rows",
    "pe_tutorial_loop",
    "HalfRenamedEncoder",
]


def pe_double_step(n_positions, d_model, base=10000.0):
    """WRONG: the exponent counts the step of 2 twice.

    The even column index ``2i`` is already the numerator of the paper's ``2i/d``;
    multiplying it by 2 again gives the exponent ``4i/d``, so the frequencies run from 1
    down to ``base**-2`` instead of ``base**-1``: every other frequency of the correct
    spectrum, then ``d/4`` frequencies so low that they are nearly constant.

    Examples
    --------
    >>> import numpy as np
    >>> pe = pe_double_step(3, 8)
    >>> pe.shape
    (3, 8)
    >>> bool(np.isclose(pe[1, 2], np.sin(1 / 10000 ** 0.5)))   # paper: sin(1 / 10000**0.25)
    True
    """
    col = np.arange(0, d_model, 2)          # 0, 2, 4, ...: already "2i"
    pos = np.arange(n_positions)[:, None]
    angle = pos / base ** (2 * col / d_model)    # BUG: 2 * (2i) / d
    pe = np.zeros((n_positions, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe


def pe_cos_own_index(n_positions, d_model, base=10000.0):
    """WRONG: each cosine column uses its own (odd) index in the exponent.

    Column ``2i+1`` should share the frequency of its sine partner ``2i``; here it gets
    ``base**-((2i+1)/d)``, so no pair of columns is a (sin, cos) pair of one frequency and
    a shift of position is no longer a rotation.

    Examples
    --------
    >>> import numpy as np
    >>> pe = pe_cos_own_index(2, 4)
    >>> bool(np.isclose(pe[1, 1], np.cos(1 / 10000 ** 0.25)))  # paper: cos(1)
    True
    """
    pos = np.arange(n_positions)[:, None]
    sin_exp = np.arange(0, d_model, 2) / d_model     # 0, 2, 4, ... over d
    cos_exp = np.arange(1, d_model, 2) / d_model     # BUG: 1, 3, 5, ...
    pe = np.zeros((n_positions, d_model))
    pe[:, 0::2] = np.sin(pos / base ** sin_exp)
    pe[:, 1::2] = np.cos(pos / base ** cos_exp)
    return pe


def pe_floor_exponent(n_positions, d_model, base=10000.0):
    """WRONG: floor division makes every exponent 0, so every frequency is 1.

    ``2 * i // d_model`` is 0 for every pair index ``i < d_model / 2``.  Python 2's ``/``
    on two integers, and PyTorch's ``/`` on two integer tensors before version 1.7, did
    the same floor division.

    Examples
    --------
    >>> import numpy as np
    >>> pe = pe_floor_exponent(5, 8)
    >>> bool(np.allclose(pe[:, 0::2], pe[:, [0]]))  # every sine column is sin(p)
    True
    """
    i = np.arange(d_model // 2)
    pos = np.arange(n_positions)[:, None]
    angle = pos / base ** (2 * i // d_model)     # BUG: // floors 2i/d to 0
    pe = np.zeros((n_positions, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe


def pe_concatenated(n_positions, d_model, base=10000.0):
    """Not wrong by itself: all sines first, then all cosines (``[sin | cos]``).

    This is the layout of tensor2tensor and several libraries.  It holds exactly the
    numbers of the interleaved layout, in another column order; the bug is to load
    weights trained with one layout into code that builds the other.

    Examples
    --------
    >>> import numpy as np
    >>> pe = pe_concatenated(3, 4)
    >>> bool(np.isclose(pe[1, 2], np.cos(1.0)))
    True
    """
    pos = np.arange(n_positions)[:, None]
    angle = pos / base ** (np.arange(0, d_model, 2) / d_model)
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)


def pe_in_dtype(n_positions, d_model, dtype, base=10000.0):
    """WRONG for long sequences: positions and frequencies held in a low-precision dtype.

    This is what happens when the whole model, buffers included, is cast to
    ``torch.bfloat16`` or ``torch.float16`` and the position indices are made in the
    model's dtype: bfloat16 holds every integer only up to 256, float16 up to 2048, and
    the rounded inverse frequencies multiply the position into an angle error of
    several radians.

    Examples
    --------
    >>> import torch
    >>> pe = pe_in_dtype(300, 8, torch.bfloat16)
    >>> bool(torch.equal(pe[256], pe[257]))     # two positions, one encoding
    True
    """
    import torch

    inv_freq = 1.0 / base ** (torch.arange(0, d_model, 2) / d_model)
    inv_freq = inv_freq.to(dtype)      # BUG: the buffer follows model.to()
    pos = torch.arange(n_positions).to(dtype)    # BUG: positions too
    angle = pos[:, None] * inv_freq
    pe = torch.zeros(n_positions, d_model, dtype=dtype)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def pe_pair_loop(n_positions, d_model, base=10000.0):
    """Correct for even ``d_model``; an ``IndexError`` for odd ``d_model``.

    The loop writes columns ``i`` and ``i + 1``; for odd ``d_model`` the last ``i + 1``
    is one past the end.

    Examples
    --------
    >>> pe_pair_loop(2, 5)
    Traceback (most recent call last):
    ...
    IndexError: index 5 is out of bounds for axis 1 with size 5
    """
    pos = np.arange(n_positions)
    pe = np.zeros((n_positions, d_model))
    for i in range(0, d_model, 2):
        angle = pos / base ** (i / d_model)
        pe[:, i] = np.sin(angle)
        pe[:, i + 1] = np.cos(angle)    # BUG if d_model is odd: out of range
    return pe


def pe_half_loop(n_positions, d_model, base=10000.0):
    """Correct for even ``d_model``; silently leaves the last column 0 for odd ``d_model``.

    Examples
    --------
    >>> import numpy as np
    >>> pe = pe_half_loop(4, 5)
    >>> bool(np.all(pe[:, -1] == 0))
    True
    """
    pos = np.arange(n_positions)
    pe = np.zeros((n_positions, d_model))
    for i in range(d_model // 2):       # BUG if d_model is odd: last col 0
        angle = pos / base ** (2 * i / d_model)
        pe[:, 2 * i] = np.sin(angle)
        pe[:, 2 * i + 1] = np.cos(angle)
    return pe


def pe_broadcast(n_positions, d_model, base=10000.0):
    """Correct for even ``d_model``; a broadcasting ``ValueError`` for odd ``d_model``.

    Examples
    --------
    >>> pe_broadcast(2, 5)
    Traceback (most recent call last):
    ...
    ValueError: could not broadcast input array from shape (2,3) into shape (2,2)
    """
    pos = np.arange(n_positions)[:, None]
    angle = pos / base ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((n_positions, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)         # BUG if d_model is odd: one too many
    return pe


def pe_square_base1000(d_model=512):
    """WRONG in four ways: base 1000, a square table, a doubled and a mismatched exponent.

    The table has ``d_model`` rows (the number of positions is tied to the width), the
    base is 1000, the sine exponent is ``4i/d`` (the step of 2 counted twice) and the
    cosine exponent is ``(4i+2)/d`` (not its sine partner's frequency).

    Examples
    --------
    >>> pe_square_base1000(8).shape
    (8, 8)
    """
    table = np.zeros((d_model, d_model))     # BUG: d_model positions
    for pos in range(d_model):
        for i in range(d_model // 2):
            sin_exp = 2 * 2 * i / d_model          # BUG: 2 * (2i)
            cos_exp = 2 * (2 * i + 1) / d_model    # BUG: not the sine's
            table[pos, 2 * i] = np.sin(pos / 1000 ** sin_exp)  # BUG: 1000
            table[pos, 2 * i + 1] = np.cos(pos / 1000 ** cos_exp)
    return table


def pe_base1000_rows(n_positions, d_model):
    """WRONG: the frequencies of :func:`pe_square_base1000`, for any number of positions.

    The same base 1000, sine exponent ``4i/d`` and cosine exponent ``(4i+2)/d``, without
    the table-size bug, so that the shift from one row to the next can be measured over
    more positions than there are columns.  On its first ``d_model`` rows it is the
    table of :func:`pe_square_base1000`.

    Examples
    --------
    >>> import numpy as np
    >>> bool(np.allclose(pe_base1000_rows(8, 8), pe_square_base1000(8), rtol=0, atol=1e-12))
    True
    >>> pe_base1000_rows(100, 8).shape
    (100, 8)
    """
    pos = np.arange(n_positions)[:, None]
    i = np.arange(d_model // 2)
    table = np.zeros((n_positions, d_model))
    table[:, 0::2] = np.sin(pos / 1000 ** (2 * 2 * i / d_model))      # BUG: 4i/d, 1000
    table[:, 1::2] = np.cos(pos / 1000 ** (2 * (2 * i + 1) / d_model))  # BUG: own exponent
    return table


def pe_tutorial_loop(max_len, d_model):
    """WRONG in two ways: the loop of a widely copied PyTorch tutorial.

    The column index ``i`` steps by 2 and is doubled again in the exponent, and the
    cosine column uses ``2(i+1)/d``, the exponent of the next pair (the code of
    ``Embed.py`` in the SamLynnEvans/Transformer repository, reported in its issues #7
    and #25).

    Examples
    --------
    >>> pe_tutorial_loop(4, 8).shape
    (4, 8)
    """
    table = np.zeros((max_len, d_model))
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            sin_exp = 2 * i / d_model              # BUG: i is already 2i
            cos_exp = 2 * (i + 1) / d_model        # BUG: the next pair's
            table[pos, i] = np.sin(pos / 10000 ** sin_exp)
            table[pos, i + 1] = np.cos(pos / 10000 ** cos_exp)
    return table


class HalfRenamedEncoder:
    """WRONG: the constructor refers to a name that is defined nowhere.

    The dropout layer is built from ``dropout_prob``, which is neither an argument nor
    a global (a parameter renamed in the signature but not in the body), so the class
    cannot even be instantiated.

    Examples
    --------
    >>> HalfRenamedEncoder(8)
    Traceback (most recent call last):
    ...
    NameError: name 'dropout_prob' is not defined
    """

    def __init__(self, d_model, max_len=100):
        self.dropout_p = dropout_prob   # noqa: F821  BUG: undefined
        self.table = pe_tutorial_loop(max_len, d_model)
