r"""The long-term decay bound of RoPE (Su et al. 2021, RoFormer, section 3.4.3).

Write a query/key pair of dimension :math:`d` as :math:`d/2` complex numbers.  With
RoPE the score of a query at :math:`m` and a key at :math:`n` is

.. math:: s = \mathrm{Re}\sum_{l=0}^{d/2-1} h_l\, e^{i(m-n)\theta_l}, \qquad
          h_l = q_{[2l:2l+1]}\, k^{*}_{[2l:2l+1]}.

Abel summation with partial sums :math:`S_j = \sum_{l<j} e^{i(m-n)\theta_l}`
(:math:`S_0 = 0`) gives

.. math:: |s| \le \Big(\max_l |h_{l+1} - h_l|\Big) \sum_{j=1}^{d/2} |S_j|,

and the paper plots the relative size of the second factor,

.. math:: B(r) = \frac{1}{d/2}\sum_{j=1}^{d/2} |S_j|, \qquad
          S_j = \sum_{l=0}^{j-1} e^{i r \theta_l},\quad r = m - n,

as a function of the relative distance :math:`r`.  :math:`B(0) = (d/2 + 1)/2` and
:math:`B` decays as :math:`|r|` grows, but *not monotonically*: it oscillates on its way
down.  It bounds the score only together with the first factor, for one pair of vectors;
it is not the expected score.
"""

from __future__ import annotations

import numpy as np

from .._typing import ArrayLike, FloatArray
from .._validation import check_base, check_d_model

__all__ = ["rope_decay_bound"]


def rope_decay_bound(distances: ArrayLike, d_model: int, base: float = 10000.0) -> FloatArray:
    """The RoFormer long-term decay curve ``B(r) = (1/(d/2)) sum_j |S_j|``.

    .. math:: B(r) = \\frac{2}{d}\\sum_{j=1}^{d/2}\\Big|\\sum_{l=0}^{j-1} e^{i r\\theta_l}\\Big|,
              \\qquad \\theta_l = \\mathrm{base}^{-2l/d}

    Vectorised: the partial sums :math:`S_j` are a cumulative sum over ``l`` of a
    ``(len(distances), d/2)`` complex array.

    Parameters
    ----------
    distances : array_like of float
        Relative distances ``r = m - n`` (any real numbers), any shape.
    d_model : int
        A positive even number (the paper plots ``d = 128``).
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        float64, the shape of ``distances``; symmetric in ``r``, ``B(0) = (d/2 + 1)/2``.

    Raises
    ------
    TypeError
        If ``d_model`` is not an integer or ``base`` not real.
    ValueError
        If ``d_model`` is odd or ``< 2``, ``base <= 1`` or a distance is not finite.

    Examples
    --------
    >>> import numpy as np
    >>> b = rope_decay_bound(np.arange(0, 250), 128)
    >>> float(b[0])                                   # (64 + 1) / 2
    32.5
    >>> bool(b[200] < b[20] < b[0])                   # it decays ...
    True
    >>> bool(np.any(np.diff(b) > 0))                  # ... but not monotonically
    True
    """
    from ..sinusoidal import inverse_frequencies

    d = check_d_model(d_model, even=True)
    b = check_base(base)
    r = np.asarray(distances, dtype=np.float64)
    if not np.all(np.isfinite(r)):
        raise ValueError("distances must be finite")
    phases = np.exp(1j * r[..., None] * inverse_frequencies(d, b))  # e^{i r theta_l}
    partial = np.cumsum(phases, axis=-1)  # S_1 .. S_{d/2}
    return np.abs(partial).mean(axis=-1)
