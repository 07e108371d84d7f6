r"""Float32 angles versus float64 angles: what the usual RoPE code loses.

Most RoPE code forms the angles in float32:

.. code-block:: python

   inv_freq = 1.0 / (base ** (torch.arange(0, d, 2).float() / d))
   angles = positions.float()[:, None] * inv_freq[None, :]

Near position :math:`m` a float32 number is only known to half its spacing,
:math:`2^{\lfloor\log_2 m\rfloor - 24}`: 0.03 radians near :math:`m = 10^6`, so
:math:`\cos` and :math:`\sin` of the highest-frequency pairs are wrong in the second
decimal.  In addition ``inv_freq`` itself is rounded to float32 (relative error
:math:`\approx 6\times10^{-8}`), which :math:`m` magnifies into an angle error of
:math:`\approx 0.06\,m\,\theta_i \cdot 10^{-6}`.  :mod:`posenc` forms angles in float64
(:func:`posenc.rope_angles`, spacing :math:`\approx 10^{-10}` at :math:`10^6`) and casts
only the cosines and sines.

:func:`rope_angles_float32` reproduces the usual computation (in NumPy float32, which
rounds like PyTorch's CPU float32 arithmetic) so that the book can measure its error with
:func:`angle_error` and :func:`posenc.rotate_pairs`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .._typing import FloatArray, Positions
from .._validation import check_base, check_count, check_d_model, check_positions

__all__ = ["rope_angles_float32", "angle_error", "INVERSE_FREQUENCY_FORMS",
           "inverse_frequency_errors"]

#: The three float32 spellings of ``omega_i = base ** (-2i / d)`` that
#: :func:`inverse_frequency_errors` measures, with ``k = arange(0, d, 2)`` in float32:
#: ``"exp-log"`` is ``exp(k * (-ln(base) / d))`` (The Annotated Transformer and the
#: tutorials that copy it), ``"power"`` is ``base ** (-k / d)``, and ``"inverse power"``
#: is ``1 / base ** (k / d)`` (Hugging Face transformers and Meta's Llama code).
INVERSE_FREQUENCY_FORMS = ("exp-log", "power", "inverse power")


def _positions_array(positions):
    if isinstance(positions, (int, np.integer)) and not isinstance(positions, bool):
        return np.arange(check_count(positions, "positions"), dtype=np.int64)
    arr = np.asarray(positions)
    if arr.ndim != 1:
        raise ValueError(f"positions must be an int or 1-D, got shape {arr.shape}")
    return check_positions(arr, arr.shape[0])


def rope_angles_float32(positions: int | Positions, d_model: int,
                        base: float = 10000.0) -> npt.NDArray[np.float32]:
    """RoPE angles formed the usual float32 way (for precision studies only).

    Computes, entirely in float32,
    ``inv_freq = 1 / base ** (arange(0, d, 2) / d)`` and
    ``angles = positions[:, None] * inv_freq[None, :]``, like
    ``positions.float() * inv_freq.float()`` in PyTorch.

    Parameters
    ----------
    positions : int or array_like of int
        Positions (an int ``n`` means ``0 .. n - 1``).
    d_model : int
        Number of rotated features, a positive even number.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        **float32**, shape ``(len(positions), d_model // 2)``.

    Raises
    ------
    TypeError
        If positions are not integers, ``d_model`` not an integer or ``base`` not real.
    ValueError
        If ``d_model`` is odd or ``< 2`` or ``base <= 1``.

    Examples
    --------
    >>> import numpy as np
    >>> from posenc import rope_angles
    >>> a32 = rope_angles_float32([1_000_001], 128)
    >>> a64 = rope_angles([1_000_001], 128)
    >>> float(a32[0, 0])                     # theta_0 = 1 and 1000001 < 2**24: exact
    1000001.0
    >>> bool(np.abs(a32 - a64).max() > 1e-3)  # the other angles are off by > 1 mrad
    True
    """
    pos = _positions_array(positions)
    d = check_d_model(d_model, even=True)
    b = np.float32(check_base(base))
    two_i = np.arange(0, d, 2).astype(np.float32)
    inv_freq = np.float32(1.0) / (b ** (two_i / np.float32(d)))
    return pos.astype(np.float32)[:, None] * inv_freq[None, :]


def angle_error(positions: int | Positions, d_model: int, base: float = 10000.0) -> FloatArray:
    """Absolute error of the float32 angles against float64 ones, in radians.

    ``|rope_angles_float32(...) - rope_angles(...)|`` with the float32 values converted
    exactly to float64 before subtracting.

    Parameters
    ----------
    positions : int or array_like of int
        Positions (an int ``n`` means ``0 .. n - 1``).
    d_model : int
        A positive even number.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(len(positions), d_model // 2)``.

    Raises
    ------
    TypeError, ValueError
        As :func:`rope_angles_float32`.

    Examples
    --------
    >>> err = angle_error([10, 1_000_000], 64)
    >>> bool(err[0].max() < 1e-5), bool(err[1].max() > 1e-2)
    (True, True)
    """
    from ..rope import rope_angles

    pos = _positions_array(positions)
    return np.abs(rope_angles_float32(pos, d_model, base).astype(np.float64)
                  - rope_angles(pos, d_model, base))


def inverse_frequency_errors(d_model, base=10000.0):
    """Relative error of each float32 spelling of the inverse frequencies.

    Computes ``omega_i = base ** (-2i / d)``, ``i = 0 .. d/2 - 1``, in PyTorch float32 in
    each of the :data:`INVERSE_FREQUENCY_FORMS` and compares it with a float64 reference
    (itself within about ``1e-15`` relative, far below float32's half step
    ``2 ** -24 ~ 6e-8``).

    Parameters
    ----------
    d_model : int
        Width (number of features that the frequencies serve), a positive even number.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    dict of str to numpy.ndarray
        For each form, ``|omega_float32 / omega_reference - 1|``, float64, shape
        ``(d_model // 2,)``.

    Raises
    ------
    TypeError
        If ``d_model`` is not an integer or ``base`` not a real number.
    ValueError
        If ``d_model`` is odd or ``< 2``, or ``base`` is not finite and ``> 1``.

    Examples
    --------
    >>> err = inverse_frequency_errors(64)
    >>> sorted(err) == sorted(INVERSE_FREQUENCY_FORMS), err["power"].shape
    (True, (32,))
    >>> bool(err["exp-log"].max() > err["power"].max())
    True
    """
    import math

    import torch

    d = check_d_model(d_model, even=True)
    b = check_base(base)
    two_i = np.arange(0, d, 2)
    reference = b ** (-two_i / d)
    k = torch.arange(0, d, 2, dtype=torch.int64).to(torch.float32)
    values = {
        "exp-log": torch.exp(k * (-math.log(b) / d)),
        "power": b ** (-k / d),
        "inverse power": 1.0 / (b ** (k / d)),
    }
    return {name: np.abs(v.to(torch.float64).numpy() / reference - 1.0)
            for name, v in values.items()}
