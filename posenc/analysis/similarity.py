r"""How similar two positions' encodings are, as a function of their offset.

For the sinusoidal encoding the dot product of two rows depends only on the offset
:math:`k` between them, not on where they are:

.. math::

   \begin{aligned}
   \mathrm{PE}(p)\cdot\mathrm{PE}(p+k)
   &= \sum_{i} \left[\sin p\omega_i \sin (p+k)\omega_i
                     + \cos p\omega_i \cos (p+k)\omega_i\right] \\
   &= \sum_{i=0}^{d/2-1} \cos(k\,\omega_i),
   \end{aligned}

(:math:`\cos(a-b) = \cos a\cos b + \sin a \sin b`), an even function of :math:`k` that
starts at :math:`d/2` for :math:`k = 0` and decays, with ripples, as :math:`|k|` grows.
It is the same for :math:`+k` and :math:`-k`: the dot product alone cannot tell "before"
from "after".

:func:`dot_products_by_offset` measures it on any encoding matrix (also the naive ones,
whose dot products grow with :math:`p`), :func:`sinusoidal_dot_product` is the closed
form.
"""

from __future__ import annotations

import numpy as np

from .._typing import ArrayLike, FloatArray
from .._validation import check_base, check_count, check_d_model

__all__ = ["dot_products_by_offset", "sinusoidal_dot_product"]


def dot_products_by_offset(encoding: ArrayLike, position: int = 0) -> FloatArray:
    """``encoding[p] . encoding[p + k]`` for ``k = 0, 1, ..., n - 1 - p``.

    Parameters
    ----------
    encoding : array_like
        Shape ``(n_positions, d_model)``, row ``p`` the code of position ``p`` (any
        encoding, e.g. :func:`posenc.sinusoidal_encoding` or
        :func:`posenc.index_encoding`).
    position : int, default 0
        The reference position ``p``, ``0 <= p < n_positions``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(n_positions - position,)``; entry ``k`` is the dot product at
        offset ``k``.

    Raises
    ------
    TypeError
        If ``position`` is not an integer.
    ValueError
        If ``encoding`` is not 2-D or ``position`` is not a row of it.

    Examples
    --------
    >>> import numpy as np
    >>> from posenc import sinusoidal_encoding, index_encoding
    >>> pe = sinusoidal_encoding(200, 64)
    >>> bool(np.allclose(dot_products_by_offset(pe, 0)[:50], dot_products_by_offset(pe, 100)[:50]))
    True
    >>> dot_products_by_offset(index_encoding(4, 2), 1)   # grows with p: 2 * p * (p + k)
    array([2., 4., 6.])
    """
    enc = np.asarray(encoding, dtype=np.float64)
    if enc.ndim != 2:
        raise ValueError(f"encoding must be 2-D (n_positions, d_model), got shape {enc.shape}")
    p = check_count(position, "position")
    if p >= enc.shape[0]:
        raise ValueError(
            f"position must be < n_positions = {enc.shape[0]} (a row of encoding), got {p}"
        )
    return enc[p:] @ enc[p]


def sinusoidal_dot_product(offsets: ArrayLike, d_model: int, base: float = 10000.0) -> FloatArray:
    """Closed form of ``PE(p) . PE(p + k)`` for the sinusoidal encoding: ``sum_i cos(k w_i)``.

    .. math:: \\mathrm{PE}(p)\\cdot\\mathrm{PE}(p+k) = \\sum_{i=0}^{d/2-1}\\cos(k\\,\\omega_i)

    Parameters
    ----------
    offsets : array_like of float
        Offsets ``k`` (any real numbers, negative allowed), any shape.
    d_model : int
        A positive even number.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        float64, the shape of ``offsets``.

    Raises
    ------
    TypeError
        If ``d_model`` is not an integer or ``base`` not real.
    ValueError
        If ``d_model`` is odd or ``< 2``, ``base <= 1`` or an offset is not finite.

    Examples
    --------
    >>> sinusoidal_dot_product([0, 5, -5], 64)[0]
    np.float64(32.0)
    >>> import numpy as np
    >>> v = sinusoidal_dot_product([5, -5], 64)
    >>> bool(v[0] == v[1])                       # symmetric: no sense of direction
    True
    """
    from ..sinusoidal import inverse_frequencies

    d = check_d_model(d_model, even=True)
    b = check_base(base)
    k = np.asarray(offsets, dtype=np.float64)
    if not np.all(np.isfinite(k)):
        raise ValueError("offsets must be finite")
    return np.cos(k[..., None] * inverse_frequencies(d, b)).sum(axis=-1)
