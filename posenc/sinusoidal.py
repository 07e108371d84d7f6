r"""The sinusoidal positional encoding of Vaswani et al. (2017), section 3.5.

For a model width :math:`d` (even) and pair index :math:`i = 0, 1, \ldots, d/2 - 1`,
pair :math:`i` turns at the angular frequency

.. math:: \omega_i = \mathrm{base}^{-2i/d}

(:func:`inverse_frequencies`; ``base = 10000`` in the paper), and position :math:`p` is
encoded as

.. math::

   \mathrm{PE}[p, 2i] = \sin(p\,\omega_i), \qquad \mathrm{PE}[p, 2i + 1] = \cos(p\,\omega_i).

The exponent is :math:`2i/d` where :math:`2i` is the *even column index*: looping over
even columns ``c = 0, 2, 4, ...`` the exponent is ``c / d``, not ``2c / d`` (a common bug,
see :mod:`posenc.analysis.pitfalls`).  Both columns of a pair share one frequency.

Pair :math:`i` has wavelength :math:`\lambda_i = 2\pi / \omega_i = 2\pi\,\mathrm{base}^{2i/d}`
(:func:`wavelengths`): from :math:`2\pi` for :math:`i = 0` up to
:math:`2\pi\,\mathrm{base}^{(d-2)/d}` for the last pair :math:`i = d/2 - 1`, which is
*less* than the :math:`2\pi \cdot \mathrm{base}` often quoted (that would need
:math:`i = d/2`, one pair past the end).

Because each pair is a point on a circle turning at a fixed speed, a shift by :math:`k`
positions is a rotation of every pair by the angle :math:`k\omega_i`, a linear map that
does not depend on :math:`p` (:func:`shift_matrix`).
"""

from __future__ import annotations

import numpy as np

from ._typing import FloatArray
from ._validation import check_base, check_count, check_d_model, check_real

__all__ = ["inverse_frequencies", "wavelengths", "sinusoidal_encoding", "shift_matrix"]


def inverse_frequencies(d_model: int, base: float = 10000.0) -> FloatArray:
    """Angular frequency of each pair of dimensions: ``base ** (-2i / d_model)``.

    .. math:: \\omega_i = \\mathrm{base}^{-2i/d}, \\qquad i = 0, 1, \\ldots, d/2 - 1

    Also the ``inv_freq`` / ``theta_i`` of RoPE.

    Parameters
    ----------
    d_model : int
        Model width, a positive even number.
    base : float, default 10000.0
        The base of the geometric progression, finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(d_model // 2,)``, decreasing from 1 to ``base ** (-(d-2)/d)``.

    Raises
    ------
    TypeError
        If ``d_model`` is not an integer or ``base`` not a real number.
    ValueError
        If ``d_model`` is odd or ``< 2``, or ``base`` is not finite or ``<= 1``.

    Examples
    --------
    >>> inverse_frequencies(4, base=100)
    array([1. , 0.1])
    >>> inverse_frequencies(8)
    array([1.   , 0.1  , 0.01 , 0.001])
    """
    d = check_d_model(d_model, even=True)
    b = check_base(base)
    two_i = np.arange(0, d, 2, dtype=np.float64)  # 2i = 0, 2, ..., d-2 (the even columns)
    return b ** (-two_i / d)


def wavelengths(d_model: int, base: float = 10000.0) -> FloatArray:
    """Wavelength (in positions) of each pair: ``2 * pi / inverse_frequencies(...)``.

    .. math:: \\lambda_i = 2\\pi\\,\\mathrm{base}^{2i/d}

    The shortest is ``2 * pi`` (pair 0); the longest is ``2 * pi * base ** ((d-2)/d)``
    (pair ``d/2 - 1``), short of the ``2 * pi * base`` often quoted.

    Parameters
    ----------
    d_model : int
        Model width, a positive even number.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(d_model // 2,)``, increasing.

    Raises
    ------
    TypeError
        If ``d_model`` is not an integer or ``base`` not a real number.
    ValueError
        If ``d_model`` is odd or ``< 2``, or ``base`` is not finite or ``<= 1``.

    Examples
    --------
    >>> import numpy as np
    >>> lam = wavelengths(512)
    >>> bool(np.isclose(lam[0], 2 * np.pi))
    True
    >>> round(float(lam[-1]))                      # 2*pi * 10000**(510/512), not 62832
    60611
    """
    return 2.0 * np.pi / inverse_frequencies(d_model, base)


def _sinusoid_rows(positions, d, base):
    """Rows of the encoding for arbitrary (real) positions, shape ``(len(positions), d)``.

    No validation: callers have checked ``d`` (even) and ``base``.
    """
    angles = np.asarray(positions, dtype=np.float64)[:, None] * inverse_frequencies(d, base)
    out = np.empty((angles.shape[0], d), dtype=np.float64)
    out[:, 0::2] = np.sin(angles)  # PE[p, 2i]   = sin(p * w_i)
    out[:, 1::2] = np.cos(angles)  # PE[p, 2i+1] = cos(p * w_i)
    return out


def sinusoidal_encoding(n_positions: int, d_model: int, base: float = 10000.0) -> FloatArray:
    """The sinusoidal encoding: ``sin`` in the even columns, ``cos`` in the odd ones.

    .. math::

       \\mathrm{PE}[p, 2i] = \\sin(p\\,\\omega_i), \\quad
       \\mathrm{PE}[p, 2i+1] = \\cos(p\\,\\omega_i), \\quad
       \\omega_i = \\mathrm{base}^{-2i/d}

    Angles are formed in float64 (an outer product of positions and frequencies, no
    Python loop).

    Parameters
    ----------
    n_positions : int
        Number of positions ``p = 0 .. n_positions - 1``, ``>= 0`` (0 gives a ``(0, d)``
        array).
    d_model : int
        Model width, a positive even number.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(n_positions, d_model)``, values in ``[-1, 1]``.

    Raises
    ------
    TypeError
        If ``n_positions`` or ``d_model`` is not an integer, or ``base`` not a real
        number.
    ValueError
        If ``n_positions < 0``, ``d_model`` is odd or ``< 2``, or ``base`` is not finite
        or ``<= 1``.

    Examples
    --------
    The classic small example: the sentence "I am a robot" (4 positions), ``d = 4``,
    ``base = 100``, so the frequencies are 1 and 0.1.

    >>> import numpy as np
    >>> print(np.round(sinusoidal_encoding(4, 4, base=100), 3))
    [[ 0.     1.     0.     1.   ]
     [ 0.841  0.54   0.1    0.995]
     [ 0.909 -0.416  0.199  0.98 ]
     [ 0.141 -0.99   0.296  0.955]]
    >>> sinusoidal_encoding(0, 8).shape
    (0, 8)
    """
    n = check_count(n_positions, "n_positions")
    d = check_d_model(d_model, even=True)
    b = check_base(base)
    return _sinusoid_rows(np.arange(n), d, b)


def shift_matrix(k: int, d_model: int, base: float = 10000.0) -> FloatArray:
    """The linear map ``T_k`` that shifts the encoding by ``k`` positions.

    For every position ``p``: ``PE[p + k] == T_k @ PE[p]``.  Pair ``i`` of ``PE[p]`` is
    ``(sin a, cos a)`` with ``a = p * w_i``; the angle-addition formulas

    .. math::

       \\begin{aligned}
       \\sin(a + b) &= \\sin a \\cos b + \\cos a \\sin b, \\\\
       \\cos(a + b) &= \\cos a \\cos b - \\sin a \\sin b, \\qquad b = k\\,\\omega_i
       \\end{aligned}

    give the 2x2 block

    .. math::

       \\begin{pmatrix} \\cos k\\omega_i & \\sin k\\omega_i \\\\
                        -\\sin k\\omega_i & \\cos k\\omega_i \\end{pmatrix}

    on the diagonal of ``T_k`` (a rotation by ``-k * w_i``, since the pair is stored as
    (sin, cos), i.e. (y, x)).  ``T_k`` depends on ``k`` but not on ``p``; it is
    orthogonal, ``T_{-k} = T_k^T`` and ``T_j T_k = T_{j+k}``.

    Parameters
    ----------
    k : int or float
        The shift, any finite real number (negative shifts go back; the identity holds
        for real ``k`` too, with ``PE`` extended to real positions).
    d_model : int
        Model width, a positive even number.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(d_model, d_model)``, block diagonal.

    Raises
    ------
    TypeError
        If ``k`` is not a real number, ``d_model`` not an integer, or ``base`` not a
        real number.
    ValueError
        If ``k`` is not finite, ``d_model`` is odd or ``< 2``, or ``base`` is not finite
        or ``<= 1``.

    Examples
    --------
    >>> import numpy as np
    >>> pe = sinusoidal_encoding(50, 8)
    >>> T = shift_matrix(7, 8)
    >>> bool(np.allclose(T @ pe[3], pe[10]))
    True
    >>> bool(np.allclose(pe[:-7] @ T.T, pe[7:]))     # every p at once
    True
    """
    kk = check_real(k, "k")
    d = check_d_model(d_model, even=True)
    b = check_base(base)
    angle = kk * inverse_frequencies(d, b)  # k * w_i, float64
    c, s = np.cos(angle), np.sin(angle)
    T = np.zeros((d, d), dtype=np.float64)
    even = np.arange(0, d, 2)
    odd = even + 1
    T[even, even] = c  # sin' = cos(kw) sin + sin(kw) cos
    T[even, odd] = s
    T[odd, even] = -s  # cos' = -sin(kw) sin + cos(kw) cos
    T[odd, odd] = c
    return T
