r"""Rotary position embedding (RoPE), Su et al. (2021), "RoFormer".

RoPE does not add anything to the token vectors.  It rotates the query and the key of
the token at position :math:`m`: the ``d`` features are split into ``d/2`` pairs, and
pair :math:`i` is rotated by the angle :math:`m\theta_i` with

.. math:: \theta_i = \mathrm{base}^{-2i/d}, \qquad i = 0, \ldots, d/2 - 1

(the same frequencies as the sinusoidal encoding, :func:`posenc.inverse_frequencies`).
For one pair :math:`(x_1, x_2)`:

.. math::

   \begin{pmatrix} x_1' \\ x_2' \end{pmatrix} =
   \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\
                   \sin m\theta_i & \cos m\theta_i \end{pmatrix}
   \begin{pmatrix} x_1 \\ x_2 \end{pmatrix},
   \qquad\text{i.e.}\qquad x_1' + i x_2' = (x_1 + i x_2)\, e^{i m\theta_i}.

Written as one block-diagonal matrix :math:`R_m` (:func:`rope_rotation_matrix`), the
attention score of a query at :math:`m` and a key at :math:`n` is

.. math:: \langle R_m q, R_n k \rangle = q^\top R_m^\top R_n k = q^\top R_{n-m} k,

which depends on the positions only through :math:`n - m`.

Which features form a pair is a convention, the *layout*:

* ``"interleaved"``: pairs ``(2i, 2i+1)`` -- the RoFormer paper, Meta's Llama code
  (``torch.view_as_complex``), GPT-J, ``rotary-embedding-torch``;
* ``"half"``: pairs ``(i, i + d/2)`` -- GPT-NeoX and Hugging Face ``transformers``
  (``rotate_half``).

The two layouts are the same rotation after a fixed permutation of the features (see
:func:`posenc.layout_permutation`); mixing them up (weights trained in one, code in the
other) silently gives a different model.

Precision: angles :math:`m\theta_i` are always formed in float64 and cast only after the
cosine and sine are taken, so a float32 result at position 1,000,000 is as accurate as
float32 allows.  The common ``positions.float() * inv_freq.float()`` loses the angle
itself (float32 has a spacing of 0.0625 near 10^6); see :mod:`posenc.analysis.precision`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from ._typing import ArrayLike, FloatArray, Layout, Positions
from ._validation import (
    check_base,
    check_d_model,
    check_layout,
    check_positions,
    check_real,
    check_rotary_dim,
)
from .sinusoidal import inverse_frequencies

if TYPE_CHECKING:
    import torch

#: The kind of ``x`` (NumPy array or torch tensor) is the kind of the result.
ArrayT = TypeVar("ArrayT", "npt.NDArray[np.floating]", "torch.Tensor")

__all__ = [
    "rope_angles",
    "rope_rotation_matrix",
    "rotate_pairs",
    "apply_rope",
    "apply_rope_",
    "clear_rope_cache",
]


def rope_angles(positions: int | Positions, d_model: int, base: float = 10000.0) -> FloatArray:
    """The rotation angles ``m * theta_i`` of RoPE, formed in float64.

    .. math:: \\phi[m, i] = m\\,\\theta_i, \\qquad \\theta_i = \\mathrm{base}^{-2i/d}

    Parameters
    ----------
    positions : int or array_like of int
        Positions ``m`` (any integers, negative allowed); an int ``n`` means
        ``0 .. n - 1``.
    d_model : int
        Number of rotated features, a positive even number.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(len(positions), d_model // 2)``.

    Raises
    ------
    TypeError
        If positions are not integers, ``d_model`` is not an integer or ``base`` not
        real.
    ValueError
        If ``positions`` is not 1-D, ``d_model`` is odd or ``< 2``, or ``base <= 1``.

    Examples
    --------
    >>> rope_angles(3, 4, base=100)
    array([[0. , 0. ],
           [1. , 0.1],
           [2. , 0.2]])
    >>> rope_angles([1_000_000], 2)
    array([[1000000.]])
    """
    from ._validation import check_count

    d = check_d_model(d_model, even=True)
    b = check_base(base)
    if isinstance(positions, (int, np.integer)) and not isinstance(positions, bool):
        pos = np.arange(check_count(positions, "positions"), dtype=np.int64)
    else:
        arr: Any = np.asarray(positions) if not _is_tensor(positions) else positions
        length = arr.shape[0] if getattr(arr, "ndim", 0) >= 1 else -1
        if length < 0:
            raise ValueError("positions must be an int or a 1-D array of integers")
        pos = check_positions(positions, length)
    return pos.astype(np.float64)[:, None] * inverse_frequencies(d, b)[None, :]


def rope_rotation_matrix(position: int, d_model: int, base: float = 10000.0) -> FloatArray:
    """The ``d x d`` block-diagonal rotation ``R_m`` of RoPE (interleaved pairs).

    Block ``i`` (rows and columns ``2i, 2i+1``) is the rotation by ``m * theta_i``:

    .. math::

       R_m = \\mathrm{diag}\\left(
       \\begin{pmatrix} \\cos m\\theta_i & -\\sin m\\theta_i \\\\
                        \\sin m\\theta_i & \\cos m\\theta_i \\end{pmatrix}
       \\right)_{i=0}^{d/2-1}

    ``apply_rope(x, [m])`` equals ``x @ R_m.T`` (for ``layout="interleaved"``).  The
    matrix is orthogonal, ``R_m^T R_n = R_{n-m}`` and ``R_0 = I``.  It is mostly
    useful to read and test; :func:`apply_rope` never builds it.

    Parameters
    ----------
    position : int or float
        The position ``m``; any finite real number (negative allowed).
    d_model : int
        Model width, a positive even number.
    base : float, default 10000.0
        Finite and ``> 1``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(d_model, d_model)``.

    Raises
    ------
    TypeError
        If ``position`` is not a real number, ``d_model`` not an integer or ``base`` not
        real.
    ValueError
        If ``position`` is not finite, ``d_model`` is odd or ``< 2``, or ``base <= 1``.

    Examples
    --------
    >>> import numpy as np
    >>> R = rope_rotation_matrix(1, 2)                 # theta_0 = 1: rotate by 1 radian
    >>> bool(np.allclose(R, [[np.cos(1), -np.sin(1)], [np.sin(1), np.cos(1)]]))
    True
    >>> R3, R5 = rope_rotation_matrix(3, 8), rope_rotation_matrix(5, 8)
    >>> bool(np.allclose(R3.T @ R5, rope_rotation_matrix(2, 8)))   # only 5 - 3 matters
    True
    """
    m = check_real(position, "position")
    d = check_d_model(d_model, even=True)
    b = check_base(base)
    angle = m * inverse_frequencies(d, b)
    c, s = np.cos(angle), np.sin(angle)
    R = np.zeros((d, d), dtype=np.float64)
    even = np.arange(0, d, 2)
    odd = even + 1
    R[even, even] = c  # x1' = cos * x1 - sin * x2
    R[even, odd] = -s
    R[odd, even] = s  # x2' = sin * x1 + cos * x2
    R[odd, odd] = c
    return R


# --------------------------------------------------------------------------------------
# NumPy path
# --------------------------------------------------------------------------------------


def _pair_slices(layout, r):
    """Index expressions of the first and second member of every pair, among ``x[..., :r]``."""
    if layout == "interleaved":
        return np.s_[..., 0:r:2], np.s_[..., 1:r:2]
    h = r // 2
    return np.s_[..., 0:h], np.s_[..., h:r]


def rotate_pairs(x: ArrayLike, angles: ArrayLike, *,
                 layout: Layout = "interleaved") -> npt.NDArray[np.floating]:
    """Rotate the pairs of features of ``x`` by given angles (NumPy, float64).

    The primitive under :func:`apply_rope`, exposed so that the book can rotate by
    angles computed some other way (for example the float32 angles of
    :func:`posenc.rope_angles_float32`) and measure what that costs.  For pair
    ``(x1, x2)`` and angle ``phi``:

    .. math:: x_1' = x_1\\cos\\phi - x_2\\sin\\phi, \\qquad x_2' = x_2\\cos\\phi + x_1\\sin\\phi

    Parameters
    ----------
    x : array_like
        Shape ``(..., seq, d)``; only the first ``2 * angles.shape[-1]`` features are
        rotated, the rest pass through.
    angles : array_like
        Shape ``(seq, r // 2)``; cos and sin are taken in float64 (cos and sin of the given
        values, whatever their dtype).
    layout : {"interleaved", "half"}, keyword-only
        Pairs ``(2i, 2i+1)`` or ``(i, i + r/2)`` among the first ``r`` features.

    Returns
    -------
    numpy.ndarray
        Same shape as ``x``; float64 (the caller casts), whatever the input dtype:
        ``numpy.longdouble`` input is computed and returned in float64.

    Raises
    ------
    TypeError
        If ``x`` or ``angles`` do not hold real numbers (complex input is refused rather
        than silently losing its imaginary part).
    ValueError
        If the shapes do not match or ``layout`` is unknown.

    Examples
    --------
    >>> import numpy as np
    >>> rotate_pairs(np.array([[1.0, 0.0]]), np.array([[np.pi / 2]])).round(12)
    array([[0., 1.]])
    """
    layout = check_layout(layout)
    for name, value in (("x", x), ("angles", angles)):
        kind = np.asarray(value).dtype.kind
        if kind not in "fiu":  # complex would lose its imaginary part, objects fail later
            raise TypeError(f"{name} must hold real numbers, got dtype {np.asarray(value).dtype}")
    xf = np.array(x, dtype=np.float64)
    ang = np.asarray(angles, dtype=np.float64)
    if xf.ndim < 2:
        raise ValueError(f"x must have at least 2 dimensions (..., seq, d), got shape {xf.shape}")
    if ang.ndim != 2 or ang.shape[0] != xf.shape[-2] or 2 * ang.shape[1] > xf.shape[-1]:
        raise ValueError(
            f"angles must have shape (seq, r/2) with seq = x.shape[-2] = {xf.shape[-2]} and "
            f"r <= x.shape[-1] = {xf.shape[-1]}, got {ang.shape}"
        )
    r = 2 * ang.shape[1]
    cos, sin = np.cos(ang), np.sin(ang)
    first, second = _pair_slices(layout, r)
    x1, x2 = xf[first].copy(), xf[second].copy()
    xf[first] = x1 * cos - x2 * sin  # x1' = x1 cos - x2 sin
    xf[second] = x2 * cos + x1 * sin  # x2' = x2 cos + x1 sin
    return xf


def _apply_rope_numpy(x, pos, base, layout, rotary_dim):
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "fiu":
        raise TypeError(f"x must hold real numbers (a float or integer dtype), got {arr.dtype}")
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:
        raise TypeError(
            f"x has dtype {arr.dtype} (numpy.longdouble), but RoPE is computed in float64: "
            f"returning {arr.dtype} would claim precision it does not have; pass "
            f"x.astype(np.float64)"
        )
    _check_x_shape(arr.shape)
    d = arr.shape[-1]
    r = check_rotary_dim(rotary_dim, d)
    seq = arr.shape[-2]
    pos = np.arange(seq, dtype=np.int64) if pos is None else check_positions(pos, seq)
    angles = pos.astype(np.float64)[:, None] * inverse_frequencies(r, base)[None, :]
    out = rotate_pairs(arr, angles, layout=layout)
    out_dtype = arr.dtype if arr.dtype.kind == "f" else np.float64
    return out.astype(out_dtype, copy=False)


def _check_x_shape(shape):
    if len(shape) < 2:
        raise ValueError(
            f"x must have at least 2 dimensions (..., seq, d), got shape {tuple(shape)}"
        )
    d = shape[-1]
    if d < 2 or d % 2:
        raise ValueError(
            f"the last dimension of x (d) must be a positive even number (RoPE rotates "
            f"pairs of features), got {d}"
        )


# --------------------------------------------------------------------------------------
# Tensors: the torch paths live in posenc.torch (posenc.torch._apply routes a call to the
# fused kernel, the functional formula or the eager kernels on cached tables); this module
# hands a tensor over after the checks it shares with NumPy.
# --------------------------------------------------------------------------------------


def clear_rope_cache() -> None:
    """Empty the small LRU cache of cos/sin tables that :func:`apply_rope` keeps for tensors.

    :func:`apply_rope` caches, for each (positions, rotated width, base, dtype, device,
    layout), the tables it builds on first use, least recently used evicted first, so
    that repeated calls do not recompute trigonometric functions.  The cache is bounded
    both in entries (at most 64) and in bytes (at most 64 MiB of tables and keys
    together, on all devices); a table larger than that is used for its call and not
    kept.  Clear it to measure a first call, or to free device memory.

    Examples
    --------
    >>> clear_rope_cache()
    """
    tables = sys.modules.get("posenc.torch._tables")
    if tables is not None:  # nothing is cached before the first tensor call
        tables.clear()


def _is_tensor(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


_TORCH_ROUTE = None


def _torch_route():
    """:func:`posenc.torch._apply.apply_rope_tensor`, imported on the first tensor call
    (``import posenc`` does not import torch)."""
    global _TORCH_ROUTE
    if _TORCH_ROUTE is None:
        from .torch._apply import apply_rope_tensor

        _TORCH_ROUTE = apply_rope_tensor
    return _TORCH_ROUTE


def _apply_rope_numpy_into(x, pos, base, layout, rotary_dim, out, name):
    """NumPy: check ``out``, compute in float64 as :func:`apply_rope` does, write ``out``."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray when x is not a tensor, got "
                        f"{type(out).__name__}")
    arr = np.asarray(x)
    want = arr.dtype if arr.dtype.kind == "f" else np.dtype(np.float64)
    if arr.dtype.kind in "fiu" and arr.dtype != np.bool_ and out.dtype != want:
        raise TypeError(f"{name} must have dtype {want} (the dtype of the result), got "
                        f"{out.dtype}" + ("; integer x cannot be rotated in place"
                                          if name == "x" else ""))
    if arr.dtype.kind in "fiu" and out.shape != arr.shape:
        raise ValueError(f"out must have the shape of x {arr.shape}, got {out.shape}")
    if not out.flags.writeable:
        raise ValueError(f"{name} is a read-only array and cannot be written; pass "
                         f"{name}.copy()")
    same = out is arr or (
        out.__array_interface__["data"][0] == arr.__array_interface__["data"][0]
        and out.strides == arr.strides and out.shape == arr.shape)
    if not same and np.may_share_memory(out, arr):
        raise ValueError("out shares memory with x without being x itself (the same "
                         "elements in the same order); pass a separate out, or out=x to "
                         "rotate in place")
    result = _apply_rope_numpy(arr, pos, base, layout, rotary_dim)  # checks x fully
    out[...] = result
    return out


def apply_rope(x: ArrayT, positions: Positions | None = None, *, base: float = 10000.0,
               layout: Layout = "interleaved", rotary_dim: int | None = None,
               out: ArrayT | None = None) -> ArrayT:
    """Rotate the last dimension of ``x`` by RoPE, position by position.

    For every pair ``i`` of features and every sequence position ``s`` with position
    ``m = positions[s]``:

    .. math::

       \\begin{aligned}
       x_1' &= x_1\\cos m\\theta_i - x_2\\sin m\\theta_i, \\\\
       x_2' &= x_2\\cos m\\theta_i + x_1\\sin m\\theta_i, \\qquad
       \\theta_i = \\mathrm{base}^{-2i/r}
       \\end{aligned}

    where ``(x_1, x_2)`` is ``(x[..., 2i], x[..., 2i+1])`` for ``layout="interleaved"``
    and ``(x[..., i], x[..., i + r/2])`` for ``layout="half"``, and ``r`` is the number
    of rotated features (``d`` unless ``rotary_dim`` is given).

    Angles are formed in float64 and cast at the end.  NumPy input is computed in
    float64 and returned in its own float dtype (integer input gives float64).  Tensor
    input is returned as a tensor of the same dtype and device: float32 and float64 are
    computed in their own precision from float64-accurate tables; float16 and bfloat16
    are computed in float32 and rounded once into the output (on the CPU block by block,
    so that no float32 copy of the whole tensor is made).  For tensors the cos/sin (or
    complex) tables are cached per (positions, r, base, dtype, device, layout) in a small
    LRU cache (:func:`clear_rope_cache`); the interleaved layout is one complex multiply,
    the half layout three kernels into one preallocated output.  Autograd works (a
    differentiable formula is used when ``x`` requires grad).  ``x`` is never modified,
    whatever its strides and storage offset (views that a complex view cannot express are
    copied first).

    Guarantees for tensors, for use in real training and serving stacks:

    * **memory bounded by the input**: tables have the size of the call's positions,
      and the cache holds at most 64 entries and 64 MiB (a larger table is not kept);
    * **thread-safe**: the cache is shared under one lock;
    * **inference mode**: cached tables are built outside ``torch.inference_mode()``,
      so an evaluation pass never leaves a table that a training step cannot save for
      backward;
    * **torch.compile and torch.export**: while a graph is traced (``fullgraph=True``
      included), the cache is bypassed and the tables are computed from the positions
      with tensor operations (float64 angles), in one expression per layout that the
      compiler fuses into one loop, so a compiled model on the CPU gets the fusion of
      :func:`posenc.torch.compiled_apply_rope` by calling this function;
    * **GPU**: CUDA tensors of float16, bfloat16 or float32 are rotated by posenc's fused
      Triton kernel when Triton is installed (cos and sin formed in the kernel from
      float64 angles, no table, no host synchronisation), eagerly and inside compiled
      or exported graphs, where it is the operator ``posenc::rope`` (``posenc::rope_``
      for :func:`apply_rope_`), registered with ``torch.library.triton_op`` and its
      backward: ``torch.export`` keeps the operator, and ``torch.compile`` hands
      Inductor the Triton kernel itself, which Inductor launches from its generated
      code;
    * **torch.func**: under ``vmap``, ``jvp``, ``grad`` and forward-mode AD the same
      functional formula is used, so ``jvp`` gives the rotation of the tangent (RoPE is
      linear in ``x``) and ``vmap`` equals a loop, also over positions;
    * **meta tensors**: meta ``x`` gives a meta result (a shape-only pass).

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor
        Shape ``(..., seq, d)`` with ``d`` even (queries or keys, e.g.
        ``(batch, heads, seq, head_dim)``).
    positions : array_like of int or torch.Tensor, optional
        Shape ``(seq,)``: the position of each row.  Default ``0 .. seq - 1``.  Any
        integers that fit in int64: an offset run ``start .. start + seq - 1`` rotates
        the new tokens of a KV cache exactly as in the full sequence; negative positions
        are allowed (a rotation by a negative angle).
    base : float, keyword-only, default 10000.0
        Finite and ``> 1``.
    layout : {"interleaved", "half"}, keyword-only
        ``"interleaved"``: pairs ``(2i, 2i+1)`` (Meta Llama, GPT-J);
        ``"half"``: pairs ``(i, i + r/2)`` (GPT-NeoX, Hugging Face ``rotate_half``).
    rotary_dim : int, keyword-only, optional
        Partial rotary (GPT-NeoX, GPT-J, Phi): rotate only the first ``rotary_dim``
        features (even, ``<= d``), with frequencies ``base ** (-2i / rotary_dim)``, and
        pass the rest through unchanged.  Default: all ``d``.
    out : numpy.ndarray or torch.Tensor, keyword-only, optional
        Write the result here instead of into a fresh array: the same kind, shape and
        dtype as the result (for tensors also the device), writable, without elements
        that share memory, and either ``x`` itself (in place, see :func:`apply_rope_`)
        or not sharing memory with ``x`` at all (a partial overlap is refused: it would
        overwrite inputs before they are read).  Autograd rules are PyTorch's: ``out``
        may not be a leaf that requires grad; gradients flow through ``out`` to ``x``.
        A preallocated ``out`` saves the page faults of a fresh output, which on a CPU
        cost several times the rotation itself.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Same shape as ``x``; same kind, dtype and device for tensors; ``out`` if given.

    Raises
    ------
    TypeError
        If ``x`` does not hold real numbers (complex included) or is a
        ``numpy.longdouble`` array (computed in float64, it would claim precision it
        does not have), ``positions`` are not integers, or ``base`` is not real.
    ValueError
        If ``x`` has fewer than 2 dimensions or an odd last dimension, ``positions``
        does not have shape ``(seq,)``, does not fit in int64 (``>= 2**63``, which would
        wrap to negative positions) or is a meta tensor for a real ``x``, ``base <= 1``,
        ``layout`` is unknown, or ``rotary_dim`` is not an even number in ``[2, d]``;
        for ``out``: TypeError if it is not of the kind or dtype of the result,
        ValueError if its shape or device differ, it is read-only, expanded, partially
        overlaps ``x``, or is a leaf tensor that requires grad while autograd is on.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.ones((3, 4))
    >>> y = apply_rope(x, base=100)
    >>> bool(np.allclose(y[0], x[0]))                   # position 0: no rotation
    True
    >>> bool(np.allclose(y[2], rope_rotation_matrix(2, 4, 100) @ x[2]))
    True

    Rotations keep lengths, and scores depend only on the offset:

    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(2, 1, 8))
    >>> def score(m, n):
    ...     return float((apply_rope(q, [m]) @ apply_rope(k, [n]).T)[0, 0])
    >>> bool(np.isclose(score(3, 1), score(103, 101)))
    True

    A KV cache: rotating the last 2 tokens at positions 4, 5 equals slicing the full
    sequence:

    >>> x = rng.normal(size=(6, 8))
    >>> bool(np.allclose(apply_rope(x[4:], [4, 5]), apply_rope(x)[4:]))
    True

    Into a preallocated output (reused from call to call):

    >>> buf = np.empty_like(x)
    >>> apply_rope(x, out=buf) is buf
    True
    >>> bool(np.array_equal(buf, apply_rope(x)))
    True
    """
    b = check_base(base)
    layout = check_layout(layout)
    if _is_tensor(x):
        return _torch_route()(x, positions, b, layout, rotary_dim, out, "out")
    if out is not None:
        return _apply_rope_numpy_into(x, positions, b, layout, rotary_dim, out, "out")
    return _apply_rope_numpy(x, positions, b, layout, rotary_dim)


def apply_rope_(x: ArrayT, positions: Positions | None = None, *, base: float = 10000.0,
                layout: Layout = "interleaved", rotary_dim: int | None = None) -> ArrayT:
    """Rotate ``x`` by RoPE in place and return it: ``apply_rope(x, ..., out=x)``.

    The same rotation as :func:`apply_rope`, written into ``x`` itself, so that no
    output of the size of ``x`` is allocated (on a CPU every fresh page of such an
    output costs a page fault; a rotation in place moves about the bytes of
    ``out.copy_(x)``).  float16/bfloat16 are still rotated in float32 and rounded once:
    block by block through a small per-thread float32 scratch written back into ``x``.

    Rules, as for PyTorch's own in-place operations:

    * ``x`` must be a floating-point ``torch.Tensor`` or a writable float
      ``numpy.ndarray`` (an integer array cannot hold the result; a read-only array
      is refused);
    * with autograd on, a leaf tensor that requires grad (or a view of one) is refused;
      a non-leaf is rotated and its gradient flows as through :func:`apply_rope`;
    * an expanded tensor (elements sharing memory) is refused; any other strides and
      storage offsets work (views that no fast kernel can express are rotated out of
      place and copied back);
    * an inference tensor can be rotated only inside ``torch.inference_mode()``;
    * under ``torch.compile``, ``torch.func`` transforms, forward-mode AD and for meta
      tensors the functional formula computes the result, which is copied into ``x``.

    Parameters
    ----------
    x : torch.Tensor or numpy.ndarray
        Shape ``(..., seq, d)`` with ``d`` even; overwritten.
    positions : array_like of int or torch.Tensor, optional
        Shape ``(seq,)``, as for :func:`apply_rope`.  Default ``0 .. seq - 1``.
    base : float, keyword-only, default 10000.0
        Finite and ``> 1``.
    layout : {"interleaved", "half"}, keyword-only
        Pairs ``(2i, 2i+1)`` or ``(i, i + r/2)``.
    rotary_dim : int, keyword-only, optional
        Rotate only the first ``rotary_dim`` features; the rest are left untouched.

    Returns
    -------
    torch.Tensor or numpy.ndarray
        ``x`` itself, rotated.

    Raises
    ------
    TypeError
        If ``x`` is neither a ``numpy.ndarray`` nor a ``torch.Tensor``, has an integer,
        bool or complex dtype, or for the argument errors of :func:`apply_rope`.
    ValueError
        If ``x`` is read-only, expanded, an inference tensor outside inference mode, a
        leaf that requires grad (or a view of one) while autograd is on, or for the
        shape, position and argument errors of :func:`apply_rope`.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1.0, 0.0], [1.0, 0.0]])
    >>> y = apply_rope_(x, base=100)
    >>> y is x
    True
    >>> x.round(6)                          # position 1 rotated by 1 radian
    array([[1.      , 0.      ],
           [0.540302, 0.841471]])

    With tensors it gives what :func:`apply_rope` gives, without allocating the output:

    >>> import torch
    >>> q = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(0))
    >>> want = apply_rope(q, layout="half")
    >>> torch.equal(apply_rope_(q, layout="half"), want)
    True
    >>> leaf = torch.zeros(3, 4, requires_grad=True)
    >>> try:
    ...     apply_rope_(leaf)
    ... except ValueError as e:
    ...     print(str(e)[:45])
    x is a leaf tensor that requires grad; PyTorc
    >>> with torch.no_grad():                # as an optimizer would, autograd off
    ...     _ = apply_rope_(leaf)
    """
    b = check_base(base)
    layout = check_layout(layout)
    if _is_tensor(x):
        return _torch_route()(x, positions, b, layout, rotary_dim, x, "x")
    if not isinstance(x, np.ndarray):
        raise TypeError(f"x must be a numpy.ndarray or a torch.Tensor to be rotated in "
                        f"place, got {type(x).__name__}")
    return _apply_rope_numpy_into(x, positions, b, layout, rotary_dim, x, "x")
