"""Shared argument checks.

Every public function of :mod:`posenc` checks its arguments with these helpers before it
touches NumPy, so bad input fails early with a ``TypeError`` (wrong kind of value) or a
``ValueError`` (right kind, wrong value) whose message names the argument and the rule,
never with an ``IndexError`` or a silent wrong answer from deep inside NumPy.

Rules, in one place:

* counts (``n_positions``, ``max_len``, ...) are integers (Python ``int`` or a NumPy
  integer; ``bool`` is *not* an integer here) and ``>= 0``; zero is allowed and gives
  empty results;
* model widths (``d_model``, ``dim``) are integers ``>= 1``, and even wherever the
  encoding works on pairs of dimensions (every sinusoidal and rotary function);
* ``base`` is a real, finite number ``> 1`` (with ``base <= 1`` every "frequency" would
  be ``>= 1`` and the wavelengths would not spread out; ``base == 1`` makes every pair
  identical);
* ``layout`` is one of :data:`LAYOUTS`;
* flags (``causal``, ``interleaved``, ``antialias``, ...) are ``True`` or ``False``: a
  Python ``bool`` or a NumPy ``bool_``, never a truthy stand-in (``"false"`` is a
  non-empty string, so ``bool("false")`` is ``True``; ``0``/``1`` are refused too);
* ``positions`` are integers (any integer dtype; negative values are allowed, since a
  rotation by a negative angle is as well defined as by a positive one) that fit in
  int64 (larger ones are refused, not wrapped), with one entry per sequence position.
"""

from __future__ import annotations

import math
import numbers
from typing import cast

import numpy as np

from ._typing import Layout

#: The two ways of pairing the dimensions of a vector for RoPE.
#: ``"interleaved"``: pairs ``(2i, 2i+1)`` (RoFormer paper, Meta Llama, GPT-J);
#: ``"half"``: pairs ``(i, i + d/2)`` (GPT-NeoX, Hugging Face ``rotate_half``).
LAYOUTS = ("interleaved", "half")


def _is_integer(value) -> bool:
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(
        value, (bool, np.bool_)
    )


def check_bool(value: object, name: str) -> bool:
    """Return ``value`` as a ``bool`` if it is a Python ``bool`` or a NumPy ``bool_``.

    Raises
    ------
    TypeError
        For anything else (strings such as ``"false"``, integers, None, tensors), naming
        the argument.

    Examples
    --------
    >>> check_bool(np.bool_(True), "causal")
    True
    >>> check_bool("false", "interleaved")
    Traceback (most recent call last):
    ...
    TypeError: interleaved must be True or False, got str 'false'
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(
            f"{name} must be True or False, got {type(value).__name__} {value!r}"
        )
    return bool(value)


def check_count(value, name: str, *, minimum: int = 0) -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= minimum``.

    Raises
    ------
    TypeError
        If ``value`` is not an integer (``bool`` and floats such as ``3.0`` included).
    ValueError
        If ``value < minimum``.
    """
    if not _is_integer(value):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if value < minimum:
        rule = "non-negative" if minimum == 0 else f">= {minimum}"
        raise ValueError(f"{name} must be {rule}, got {value}")
    return value


def check_d_model(value, name: str = "d_model", *, even: bool = False) -> int:
    """Return a model width as an ``int``: an integer ``>= 1``, and even if ``even``.

    Raises
    ------
    TypeError
        If ``value`` is not an integer.
    ValueError
        If ``value < 1``, or ``even`` and ``value`` is odd.
    """
    if not _is_integer(value):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if even:
        if value < 2 or value % 2:
            raise ValueError(
                f"{name} must be a positive even number (the encoding works on pairs of "
                f"dimensions), got {value}"
            )
    elif value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def check_real(value, name: str) -> float:
    """Return ``value`` as a finite ``float``; ``bool`` is rejected.

    Raises
    ------
    TypeError
        If ``value`` is not a real number.
    ValueError
        If ``value`` is NaN or infinite.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.number)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    if isinstance(value, (complex, np.complexfloating)):
        raise TypeError(f"{name} must be a real number, got complex {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def check_base(value, name: str = "base") -> float:
    """Return ``base`` as a ``float`` if it is a finite real number ``> 1``.

    Raises
    ------
    TypeError
        If ``base`` is not a real number.
    ValueError
        If ``base`` is not finite or ``base <= 1``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.number)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if value <= 1.0:
        raise ValueError(f"{name} must be > 1, got {value}")
    return value


def check_layout(value: object, name: str = "layout") -> Layout:
    """Return ``layout`` if it is one of :data:`LAYOUTS`.

    Raises
    ------
    ValueError
        If ``layout`` is not ``"interleaved"`` or ``"half"`` (the message lists both).
    """
    if not isinstance(value, str) or value not in LAYOUTS:
        allowed = ", ".join(repr(v) for v in LAYOUTS)
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return cast(Layout, value)


def check_positions_tensor(positions, length: int, name: str = "positions") -> None:
    """Check a torch tensor of positions without reading its values.

    Its dtype must be an integer one and its shape ``(length,)``; usable while
    ``torch.compile`` or ``torch.export`` traces, where the values are unknown.

    Raises
    ------
    TypeError
        If the dtype is not an integer one (floats, complex and ``bool`` included).
    ValueError
        If ``positions`` is not 1-D or its length is not ``length``.
    """
    import torch

    dtype = positions.dtype
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        raise TypeError(f"{name} must have an integer dtype, got {positions.dtype}")
    _check_positions_shape(tuple(positions.shape), length, name)


def _check_positions_shape(shape, length, name):
    if len(shape) != 1:
        raise ValueError(f"{name} must be 1-D with one entry per position, got shape {shape}")
    if shape[0] != length:
        raise ValueError(
            f"{name} must have length {length} (the sequence length, x.shape[-2]), "
            f"got length {shape[0]}"
        )


#: Positions are int64: ``-2**63 <= m < 2**63``.
_INT64_MAX = np.iinfo(np.int64).max


def check_positions(positions, length: int, name: str = "positions") -> np.ndarray:
    """Return ``positions`` as a 1-D ``int64`` NumPy array of length ``length``.

    Accepts a sequence of integers, a NumPy integer array or a torch integer tensor (on
    any device but ``meta``; it is copied to the CPU).  Negative positions are allowed;
    positions must fit in int64 (``-2**63 <= m < 2**63``): larger ones (unsigned 64-bit
    arrays, big Python ints) are refused rather than wrapped to negative values.  An
    empty list is a valid zero-length sequence.

    Raises
    ------
    TypeError
        If the entries are not integers (floats and booleans included).
    ValueError
        If ``positions`` is not 1-D, its length is not ``length``, a value does not fit in
        int64, or it is a meta tensor (which has no values).
    """
    if type(positions).__module__.startswith("torch"):
        import torch

        if positions.dtype == torch.bool or positions.is_floating_point() or positions.is_complex():
            raise TypeError(f"{name} must have an integer dtype, got {positions.dtype}")
        if positions.is_meta:
            raise ValueError(
                f"{name} is a meta tensor: it has a shape but no values to rotate by"
            )
        arr = positions.detach().to("cpu").numpy()
    else:
        arr = np.asarray(positions)
        if arr.size == 0 and arr.dtype == np.float64:  # np.asarray([]) is float64
            arr = arr.astype(np.int64)
        if arr.dtype == object and arr.size and all(_is_integer(v) for v in arr.ravel()):
            # Python ints (NumPy makes an object array of those beyond int64 and uint64)
            lo, hi = int(min(arr.ravel())), int(max(arr.ravel()))
            if lo < -_INT64_MAX - 1 or hi > _INT64_MAX:
                raise ValueError(
                    f"{name} must fit in int64 (-2**63 <= m < 2**63), got values from "
                    f"{lo} to {hi}"
                )
            arr = arr.astype(np.int64)
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"{name} must have an integer dtype, got {arr.dtype}")
    _check_positions_shape(arr.shape, length, name)
    if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.size and arr.max() > _INT64_MAX:
        raise ValueError(
            f"{name} must fit in int64 (-2**63 <= m < 2**63), got {int(arr.max())} "
            f"(as int64 it would wrap to a negative position)"
        )
    return arr.astype(np.int64, copy=False)


def check_rotary_dim(value, d: int, name: str = "rotary_dim") -> int:
    """Return the number of rotated dimensions: ``d`` if ``value`` is None.

    Raises
    ------
    TypeError
        If ``value`` is not an integer.
    ValueError
        If ``value`` is not a positive even number ``<= d``.
    """
    if value is None:
        return d
    value = check_d_model(value, name, even=True)
    if value > d:
        raise ValueError(f"{name} must be <= the last dimension of x ({d}), got {value}")
    return value
