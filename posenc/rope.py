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
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from ._typing import ArrayLike, FloatArray, Layout, Positions
from ._validation import (
    check_base,
    check_d_model,
    check_layout,
    _check_positions_shape,
    check_positions,
    check_positions_tensor,
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
# torch path: cached tables, one or three kernels; a functional formula where those
# cannot run (torch.compile/export, torch.func transforms, forward-mode AD, meta tensors)
# --------------------------------------------------------------------------------------

#: At most this many cached tables ...
_CACHE_SIZE = 64
#: ... holding at most this many bytes together (tables and keys).  A table larger than
#: this is used for its call and not kept.
_CACHE_BYTES = 64 << 20
_cache: OrderedDict = OrderedDict()  # key -> (tables, nbytes)
_cache_nbytes = 0
_cache_lock = threading.Lock()


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
    global _cache_nbytes
    with _cache_lock:
        _cache.clear()
        _cache_nbytes = 0


def _is_tensor(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _functional_mode(x):
    """Whether ``x`` must take the functional formula instead of the cached, ``out=`` path.

    True while ``torch.compile`` or ``torch.export`` traces (no Python cache, no lock, no
    data-dependent branch in a graph), under a ``torch.func`` transform (``vmap``,
    ``jvp``, ``grad``: no batching rule or forward derivative for ``out=`` kernels and
    in-place updates of fresh buffers), under forward-mode AD (dual tensors), under a
    ``TorchDispatchMode`` (fake tensors must not enter the cache), and for meta tensors
    (no values).  In plain eager code it costs a few attribute reads.
    """
    import torch

    if torch.compiler.is_compiling():
        return True
    return (
        x.is_meta
        or torch._C._are_functorch_transforms_active()
        or torch.autograd.forward_ad._current_level >= 0
        or torch._C._len_torch_dispatch_stack() > 0
    )


def _positions_key(pos, seq):
    """A hashable key for the positions, and the positions as an int64 array (or None)."""
    if pos is None:
        return ("range", 0, seq), None
    arr = check_positions(pos, seq)
    if seq and np.array_equal(arr, arr[0] + np.arange(seq, dtype=np.int64)):
        return ("range", int(arr[0]), seq), arr  # a contiguous run, e.g. a KV-cache offset
    return ("array", arr.tobytes()), arr


class _HalfTables(tuple):
    """The half layout's ``(cos, sin)``, each ``(seq, r/2)``, as views of full-width tables.

    ``wide`` is ``([cos, cos], [-sin, sin])``, each ``(seq, r)``: with them a block is
    rotated as ``x * [cos, cos] + [x2, x1] * [-sin, sin]``, two kernels over the whole
    width instead of four over half of it (see :func:`_rotate_into`).  Unpacks as the
    pair ``(cos, sin)`` wherever a pair is expected.
    """

    def __new__(cls, cos_wide, sin_wide):
        h = cos_wide.shape[-1] // 2
        self = super().__new__(cls, (cos_wide[..., :h], sin_wide[..., h:]))
        self.wide = (cos_wide, sin_wide)
        return self


def _tables_nbytes(key, value):
    if isinstance(value, _HalfTables):
        value = value.wide  # the storage the two views share
    tensors = value if isinstance(value, tuple) else (value,)
    key_bytes = len(key[0][1]) if key[0][0] == "array" else 0
    return sum(t.numel() * t.element_size() for t in tensors) + key_bytes + 256


def _torch_tables(pos_key, pos, seq, r, base, compute_dtype, device, layout):
    """Cached tables: complex ``(seq, r/2)`` for interleaved, ``(cos, sin)`` for half.

    The tables are built outside inference mode (so that a table first built during an
    evaluation pass can be saved for backward by a later training step) and cached under
    one lock; the cache never holds more than ``_CACHE_BYTES``.
    """
    global _cache_nbytes
    import torch

    key = (pos_key, r, base, compute_dtype, str(device), layout)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit[0]
    if pos is None:
        pos = np.arange(seq, dtype=np.int64)
    angles = pos.astype(np.float64)[:, None] * inverse_frequencies(r, base)[None, :]  # float64
    with torch.inference_mode(False):  # normal tensors, even inside torch.inference_mode()
        if layout == "interleaved":
            # e^{i m theta} in complex128, cast once to the compute precision.
            cdtype = torch.complex64 if compute_dtype == torch.float32 else torch.complex128
            cis = torch.from_numpy(np.cos(angles) + 1j * np.sin(angles))
            value = cis.to(device=device, dtype=cdtype)
        else:
            cos, sin = np.cos(angles), np.sin(angles)
            value = _HalfTables(*(
                torch.from_numpy(t).to(device=device, dtype=compute_dtype)
                for t in (np.concatenate((cos, cos), axis=1),
                          np.concatenate((-sin, sin), axis=1))))
    nbytes = _tables_nbytes(key, value)
    if nbytes > _CACHE_BYTES:
        return value  # too large to keep: used for this call only
    with _cache_lock:
        old = _cache.pop(key, None)  # another thread may have built it meanwhile
        if old is not None:
            _cache_nbytes -= old[1]
        _cache[key] = (value, nbytes)
        _cache_nbytes += nbytes
        while len(_cache) > _CACHE_SIZE or _cache_nbytes > _CACHE_BYTES:
            _cache_nbytes -= _cache.popitem(last=False)[1][1]
    return value


def _as_complex_pairs(t, r):
    """View ``t[..., :r]`` as ``(..., r/2)`` complex numbers (interleaved pairs), no copy."""
    import torch

    return torch.view_as_complex(t[..., :r].unflatten(-1, (r // 2, 2)))


def _rotate_interleaved_torch(x, cis, r):
    """Interleaved layout: one complex multiply, ``(x1 + i x2) * e^{i m theta}``."""
    import torch

    d = x.shape[-1]
    try:
        xc = _as_complex_pairs(x, r)
    except RuntimeError:
        # Strides or a storage offset that a complex view cannot express (an odd offset,
        # e.g. a slice of a flat buffer, survives .contiguous()): rotate a fresh copy.
        x = x.clone(memory_format=torch.contiguous_format)
        xc = _as_complex_pairs(x, r)
    if r == d:
        return torch.view_as_real(xc * cis).flatten(-2)
    if torch.is_grad_enabled() and (x.requires_grad or cis.requires_grad):
        return torch.cat((torch.view_as_real(xc * cis).flatten(-2), x[..., r:]), dim=-1)
    out = torch.empty_like(x)
    torch.mul(xc, cis, out=_as_complex_pairs(out, r))
    out[..., r:] = x[..., r:]
    return out


def _rotate_half_torch(x, cos, sin, r, tables=None):
    """Half layout: ``x1' = x1 cos - x2 sin``, ``x2' = x2 cos + x1 sin`` with ``x1 = x[..., :h]``.

    Below ``_SMALL`` elements (a decoding step), two ``addcmul`` and a ``cat``: the fewest
    kernel launches.  Otherwise, without autograd the kernels write into one preallocated
    output (no ``cat`` and no ``rotate_half`` temporaries).  On the CPU they are those of the ``out=`` path
    (:func:`_rotate_into`), block by block while the block is in cache: given the cached
    ``tables`` (:class:`_HalfTables`), two kernels over the whole width after swapping
    the halves into a scratch; given a bare ``(cos, sin)``, two per half.  Elsewhere
    ``out = x * cos`` over both halves at once, then the two ``addcmul_`` in place.
    """
    import torch

    d = x.shape[-1]
    h = r // 2
    if torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad):
        x1, x2 = x[..., :h], x[..., h:r]
        parts = [x1 * cos - x2 * sin, x2 * cos + x1 * sin]
        if r < d:
            parts.append(x[..., r:])
        return torch.cat(parts, dim=-1)
    if x.numel() < _SMALL:  # a decoding step: the fewest kernels, the least Python
        x1, x2 = x[..., :h], x[..., h:r]
        parts = (torch.addcmul(x1 * cos, x2, sin, value=-1), torch.addcmul(x2 * cos, x1, sin))
        return torch.cat(parts if r == d else (*parts, x[..., r:]), dim=-1)
    seq = x.shape[-2]
    out = torch.empty_like(x)
    if (x.device.type == "cpu" and cos.shape == (seq, h) and sin.shape == (seq, h)
            and _rows(x, seq, d) is not None and _rows(out, seq, d) is not None):
        # the blocked kernels of the out= path: the same products and sums
        _rotate_into(x, out, (cos, sin) if tables is None else tables, r, "half", False)
        return out
    xv = x[..., :r].unflatten(-1, (2, h))  # (..., seq, 2, h): [x1; x2]
    ov = out[..., :r].unflatten(-1, (2, h))
    torch.mul(xv, cos.unsqueeze(-2), out=ov)  # [x1 cos; x2 cos]
    ov[..., 0, :].addcmul_(xv[..., 1, :], sin, value=-1)  # x1 cos - x2 sin
    ov[..., 1, :].addcmul_(xv[..., 0, :], sin)  # x2 cos + x1 sin
    if r < d:
        out[..., r:] = x[..., r:]
    return out


#: Below this many elements (a decoding step's few heads) the CPU's blocked kernels are not
#: worth their Python: three kernels over the whole tensor are quicker.
_SMALL = 1 << 15

#: Elements per block of the blocked float16/bfloat16 path (2 MiB of float32 scratch: on
#: the 2-core AMD EPYC the benchmarks ran on, 2**19 was fastest of 2**15 .. 2**20; smaller
#: blocks pay PyTorch's per-operation overhead more often).
_LOWP_BLOCK = 1 << 19


def _lowp_blocks(n_rows, seq, d, block=None):
    """Blocks ``(rows, positions)`` of about ``_LOWP_BLOCK`` elements covering ``(n_rows, seq)``.

    (``block`` elements instead, if given.)

    Whole ``(seq, d)`` slices are grouped while they fit; a longer slice is cut along the
    sequence.  The loop that walks them is cache blocking: its trip count is the tensor's
    size over the block size (one trip for a decoding step), not the number of positions.
    """
    block = _LOWP_BLOCK if block is None else block
    per_row = seq * d
    if per_row <= block:
        step = max(1, block // per_row)
        return [(slice(b, b + step), slice(0, seq)) for b in range(0, n_rows, step)]
    step = max(1, block // d)
    return [(slice(b, b + 1), slice(s, s + step))
            for b in range(n_rows) for s in range(0, seq, step)]


def _rotate_lowp_blocked(x, tables, r, layout):
    """float16/bfloat16 on the CPU: one rounding at the end, no tensor-sized float32 copies.

    Upcasting the whole tensor would allocate two float32 tensors of twice its size; on a
    CPU every fresh page of them costs a page fault, which made this path five times
    slower than rounding after every operation in the input's own dtype.  Instead each
    block of about ``_LOWP_BLOCK`` elements is converted into a per-thread float32
    scratch allocated once (no page faults after the first call), rotated there, and
    written to a fresh output with a single rounding: the ``out=`` kernels of
    :func:`_rotate_into`.
    """
    import torch

    seq, d = x.shape[-2], x.shape[-1]
    rows = x.reshape(-1, seq, d)  # a view, or one copy for strides no view expresses
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    _rotate_into(rows, out, tables, r, layout, False, block=_LOWP_BLOCK)
    return out.view(x.shape)


def _tensor_tables(x, pos, base, rotary_dim, table_layout):
    """Check a tensor ``x`` and its positions; return ``r`` and the cached tables.

    ``table_layout`` picks the table kind (see :func:`_torch_tables`): ``"interleaved"``
    gives the complex ``e^{i m theta}``, ``"half"`` the pair ``(cos, sin)``.
    """
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    _check_x_shape(tuple(x.shape))
    r = check_rotary_dim(rotary_dim, x.shape[-1])
    seq = x.shape[-2]
    pos_key, pos_arr = _positions_key(pos, seq)
    tables = _torch_tables(pos_key, pos_arr, seq, r, base, _compute_dtype(x.dtype), x.device,
                           table_layout)
    return r, tables


def _fused_call(x, pos, base, layout, rotary_dim, inplace):
    """The fused Triton kernel for CUDA tensors (:mod:`posenc.torch._fused`), or None
    where it does not apply (CPU, float64, Triton missing, torch.func transforms)."""
    if x.device.type != "cuda":
        return None
    from .torch import _fused

    if not _fused.fused_eligible(x):
        return None
    _check_x_shape(tuple(x.shape))
    if pos is not None:
        shape = tuple(pos.shape) if _is_tensor(pos) else np.shape(pos)
        _check_positions_shape(shape, x.shape[-2], "positions")
    r = check_rotary_dim(rotary_dim, x.shape[-1])
    return _fused.apply_rope_fused(x, pos, base, layout, r, inplace)


def _apply_rope_torch(x, pos, base, layout, rotary_dim):
    fused = _fused_call(x, pos, base, layout, rotary_dim, False)
    if fused is not None:
        return fused
    if _functional_mode(x):
        r, cos, sin = _functional_tables(x, pos, base, rotary_dim)
        return _rotate_functional(x, cos, sin, r, layout)
    r, tables = _tensor_tables(x, pos, base, rotary_dim, layout)
    return _rotate_eager(x, tables, r, layout)


def _compute_dtype(dtype):
    """float32 and float64 are computed in their own precision, float16/bfloat16 in float32."""
    import torch

    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


def _rotate_tensor(x, tables, r, layout):
    """Rotate the first ``r`` features of ``x`` with ready tables, keeping its dtype.

    ``tables`` are in ``_compute_dtype(x.dtype)`` on ``x.device``: the complex
    ``e^{i m theta}`` of shape ``(seq, r/2)`` for the interleaved layout, ``(cos, sin)``
    for the half layout.  float16/bfloat16 are rotated in float32 and rounded once (on
    the CPU block by block, see :func:`_rotate_lowp_blocked`).  Under tracing, ``torch.func``
    transforms and forward-mode AD the functional formula is used (see
    :func:`_functional_mode`).
    """
    if _functional_mode(x):
        if layout == "interleaved":
            return _rotate_functional(x, tables.real, tables.imag, r, layout)
        return _rotate_functional(x, tables[0], tables[1], r, layout)
    return _rotate_eager(x, tables, r, layout)


def _rotate_eager(x, tables, r, layout):
    """:func:`_rotate_tensor` without the mode check: the fast eager kernels."""
    import torch

    dtype = x.dtype
    compute = _compute_dtype(dtype)
    differentiable = torch.is_grad_enabled() and x.requires_grad
    if dtype != compute and x.device.type == "cpu" and not differentiable and x.numel():
        return _rotate_lowp_blocked(x, tables, r, layout)
    xc = x if dtype == compute else x.to(compute)
    if layout == "interleaved":
        out = _rotate_interleaved_torch(xc, tables, r)
    else:
        out = _rotate_half_torch(xc, *tables, r, tables)
    return out if dtype == compute else out.to(dtype)


def _inv_freq_tensor(r, base):
    """``inverse_frequencies(r, base)`` as a float64 CPU tensor.

    Eagerly (``torch.func``, forward AD, meta) and under ``torch.export`` these are the
    NumPy frequencies of the cached path, bit for bit; inside ``torch.compile`` Dynamo
    traces the NumPy code into tensor operations, which may differ in the last float64
    bit (an angle error of about ``m * 1e-16``, invisible below float64 at any practical
    position).  :class:`posenc.torch.RotaryEmbedding` passes its own copy instead.
    """
    import torch

    return torch.from_numpy(inverse_frequencies(r, base))


def _positions_float64(pos, seq, device):
    """Positions as a float64 tensor ``(seq,)`` on ``device``, read by tensor operations.

    Checks dtype and shape only (a traced graph must not branch on the values).
    """
    import torch

    if pos is None:
        return torch.arange(seq, dtype=torch.float64, device=device)
    if isinstance(pos, torch.Tensor):
        check_positions_tensor(pos, seq)
        if pos.device.type == "meta" and device.type != "meta":
            raise ValueError(
                "positions is a meta tensor (it has no values) but x is not; pass real "
                "positions, or meta x for a shape-only pass"
            )
        return pos.to(device=device, dtype=torch.float64)
    arr = check_positions(pos, seq)
    return torch.from_numpy(arr.astype(np.float64)).to(device)


def _functional_tables(x, pos, base, rotary_dim, inv_freq=None):
    """``r`` and ``(cos, sin)`` of shape ``(seq, r/2)``, built with tensor operations only.

    The angles are formed in float64 from the same frequencies as the cached tables, and
    cast to the compute dtype after ``cos`` and ``sin``; nothing is cached.
    """
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    _check_x_shape(tuple(x.shape))
    r = check_rotary_dim(rotary_dim, int(x.shape[-1]))
    p = _positions_float64(pos, x.shape[-2], x.device)
    if inv_freq is None:
        inv_freq = _inv_freq_tensor(r, base)
    angles = p[:, None] * inv_freq.to(x.device)[None, :]
    compute = _compute_dtype(x.dtype)
    return r, angles.cos().to(compute), angles.sin().to(compute)


def _rotate_functional(x, cos, sin, r, layout):
    """Rotate with one out-of-place expression per layout (no ``out=``, no in-place).

    What ``torch.compile`` fuses into one loop, and what ``vmap``, ``jvp`` and forward-mode
    AD can batch and differentiate.  ``cos`` and ``sin`` broadcast against
    ``x[..., :r/2]`` and are in the compute dtype; ``x`` is converted to it, and the result
    rounded once to ``x.dtype``.
    """
    import torch

    h = r // 2
    xr = x[..., :r].to(cos.dtype)
    if layout == "half":
        x1, x2 = xr[..., :h], xr[..., h:]
        rot = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    else:
        x1, x2 = xr.unflatten(-1, (h, 2)).unbind(-1)
        rot = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    rot = rot.to(x.dtype)
    return rot if r == x.shape[-1] else torch.cat((rot, x[..., r:]), dim=-1)


# --------------------------------------------------------------------------------------
# Writing into a given tensor or array: apply_rope(x, out=...) and apply_rope_(x)
# --------------------------------------------------------------------------------------

#: Elements per block of the in-place/``out=`` paths: a block of ``x``, of ``out`` and of
#: the scratch (about 6 MiB for float32) stays in the 32 MiB L3 cache of the AMD EPYC the
#: benchmarks ran on while the three or four kernels of the block run over it.  On that
#: shared 2-core machine, timings of 2**15 .. 2**19 did not separate beyond the noise;
#: fewer, larger blocks pay PyTorch's per-operation overhead (and the wait for a busy
#: second thread at the end of every operation) less often, as for ``_LOWP_BLOCK``.
_INTO_BLOCK = 1 << 19

#: Per-thread scratch of the blocked in-place/``out=`` paths, keyed by dtype: at most
#: ``1.5 * max(_INTO_BLOCK, d)`` elements each (3 MiB of float32 for the usual widths),
#: allocated once per thread so that a call makes no fresh allocation.
_scratch = threading.local()


def _scratch_tensor(numel, dtype):
    """A 1-D CPU scratch tensor of at least ``numel`` elements, reused by this thread.

    Built outside inference mode, so that a scratch first made during an evaluation pass
    can still be written by in-place operations of a training step.
    """
    import torch

    store = _scratch.__dict__.setdefault("tensors", {})
    t = store.get(dtype)
    if t is None or t.numel() < numel:
        with torch.inference_mode(False):
            t = torch.empty(max(numel, 3 * _INTO_BLOCK // 2), dtype=dtype)
        store[dtype] = t
    return t


def _memory_relation(x, out):
    """``"same"`` if ``out`` views exactly the elements of ``x`` in the same order,
    ``"none"`` if the two cannot share an element, ``"partial"`` otherwise.

    Compares the storage and the byte range each tensor can reach from its offset and
    strides (conservative: two disjoint but interleaved views, such as ``t[..., ::2]``
    and ``t[..., 1::2]``, count as overlapping).
    """
    if out is x:
        return "same"
    if x.numel() == 0 or out.numel() == 0:
        return "none"
    if x.untyped_storage().data_ptr() != out.untyped_storage().data_ptr():
        return "none"
    if x.storage_offset() == out.storage_offset() and x.stride() == out.stride():
        return "same"  # shapes were checked equal

    def span(t):
        lo = hi = t.storage_offset()
        for n, st in zip(t.shape, t.stride()):
            lo, hi = lo + min(0, (n - 1) * st), hi + max(0, (n - 1) * st)
        return lo * t.element_size(), (hi + 1) * t.element_size()

    (a0, a1), (b0, b1) = span(x), span(out)
    return "none" if a1 <= b0 or b1 <= a0 else "partial"


def _check_out_tensor(x, out, name, eager):
    """Validate ``out`` for ``x``; return whether ``out`` is ``x`` itself (in place).

    ``name`` is ``"out"`` for ``apply_rope(..., out=)`` and ``"x"`` for
    :func:`apply_rope_`.  The memory and autograd checks need real storage and run only
    eagerly (``eager``); under tracing and ``torch.func`` transforms the functional
    formula computes the whole result before it is copied, so no overlap can corrupt it.
    """
    import torch

    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor when x is one, got {type(out).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    if out.dtype != x.dtype:
        raise TypeError(f"out must have the dtype of x ({x.dtype}), got {out.dtype}: the "
                        f"result is rounded once to x.dtype; cast it afterwards if needed")
    if out.shape != x.shape:
        raise ValueError(f"out must have the shape of x {tuple(x.shape)}, got "
                         f"{tuple(out.shape)}")
    if out.device != x.device:
        raise ValueError(f"out must be on the device of x ({x.device}), got {out.device}")
    if not eager:
        return out is x
    if out.numel() and torch._debug_has_internal_overlap(out) == 1:
        raise ValueError(f"{name} has elements that share memory (e.g. an expanded tensor "
                         f"with a stride of 0), so it cannot be written element by "
                         f"element; pass {name}.clone() or a fresh tensor")
    if out.is_inference() and not torch.is_inference_mode_enabled():
        raise ValueError(f"{name} is an inference tensor (made under "
                         f"torch.inference_mode()) and cannot be written outside "
                         f"inference mode; pass {name}.clone()")
    if torch.is_grad_enabled() and out.requires_grad:
        base = out._base if out._is_view() else None
        if out.is_leaf or (base is not None and base.is_leaf and base.requires_grad):
            what = "a leaf tensor" if out.is_leaf else "a view of a leaf tensor"
            raise ValueError(
                f"{name} is {what} that requires grad; PyTorch forbids writing into it in "
                f"place (autograd would lose its value); use apply_rope(x) out of place, "
                f"or write under torch.no_grad()")
    relation = "same" if x.is_meta else _memory_relation(x, out)
    if relation == "partial":
        raise ValueError("out shares memory with x without being x itself (the same "
                         "elements in the same order): a partial overlap would overwrite "
                         "inputs before they are read; pass a separate out, or out=x to "
                         "rotate in place")
    return relation == "same"


def _apply_rope_torch_into(x, pos, base, layout, rotary_dim, out, name):
    """``apply_rope`` of a tensor written into ``out`` (which may be ``x``); returns ``out``."""
    import torch

    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor when x is one, got {type(out).__name__}")
    functional = _functional_mode(x) or _functional_mode(out)
    inplace = _check_out_tensor(x, out, name, eager=not functional)
    if inplace and not (torch.is_grad_enabled() and x.requires_grad):
        fused = _fused_call(x, pos, base, layout, rotary_dim, True)
        if fused is not None:
            return fused
    if functional:  # traced, transformed, meta: compute, then one copy into out
        r, cos, sin = _functional_tables(x, pos, base, rotary_dim)
        return out.copy_(_rotate_functional(x, cos, sin, r, layout))
    if torch.is_grad_enabled() and (x.requires_grad or out.requires_grad):
        # autograd: the differentiable formula, then a recorded copy into out
        return out.copy_(_apply_rope_torch(x, pos, base, layout, rotary_dim))
    r, tables = _tensor_tables(x, pos, base, rotary_dim, layout)
    _rotate_into(out if inplace else x, out, tables, r, layout, inplace)
    return out


def _rows(t, seq, d):
    """``t`` viewed as ``(rows, seq, d)`` without a copy, or ``None`` if no view exists."""
    try:
        return t.view(-1, seq, d)
    except RuntimeError:
        return None


def _rotate_into(x, out, tables, r, layout, inplace, block=None):
    """The eager kernels writing into ``out`` (``out is x`` when ``inplace``).

    * float32/float64, interleaved: one complex multiply ``torch.mul(x, cis, out=out)``;
    * float32/float64, half, on the CPU: blocks of about ``_INTO_BLOCK`` elements, each
      rotated while it is in cache.  With the cached tables (:class:`_HalfTables`): the
      halves swapped into a per-thread scratch, then ``out = x * [cos, cos]`` and
      ``out += [x2, x1] * [-sin, sin]`` over the whole width.  With a bare ``(cos, sin)``
      pair (the :class:`posenc.torch.RotaryEmbedding` tables): a product with ``cos``,
      then ``addcmul_``, per half (in place: the first half is copied into the scratch
      first, since the second half's result needs it).  Both give the bits of
      ``x1 cos - x2 sin`` and ``x2 cos + x1 sin`` computed as two roundings each
      (a negation is exact);
    * float16/bfloat16 on the CPU: each block converted into a float32 scratch, rotated
      there, and written back with the one rounding.

    Anything else (another device, strides that no view or complex view expresses) is
    rotated out of place by :func:`_rotate_eager` and copied into ``out``.  ``block``
    overrides ``_INTO_BLOCK`` (:func:`_rotate_lowp_blocked` passes ``_LOWP_BLOCK``).
    """
    import torch

    if not x.numel():
        return
    seq, d = x.shape[-2], x.shape[-1]
    h = r // 2
    lowp = x.dtype != _compute_dtype(x.dtype)
    if not lowp and layout == "interleaved":
        try:
            xc = _as_complex_pairs(x, r)
            oc = xc if inplace else _as_complex_pairs(out, r)
        except RuntimeError:  # an odd storage offset, say: no complex view
            pass
        else:
            if inplace and r == 2 < d:
                # one pair per row: in place, PyTorch's strided complex multiply takes
                # another loop than out of place, which can differ in the last bit; the
                # product goes through a temporary of 2/d of x instead
                oc.copy_(xc * tables)
            else:
                torch.mul(xc, tables, out=oc)  # (x1 + i x2) e^{i m theta}
            if r < d and not inplace:
                out[..., r:].copy_(x[..., r:])
            return
    rx, ro = _rows(x, seq, d), _rows(out, seq, d)
    if (x.device.type != "cpu" or rx is None or ro is None
            or (not lowp and layout == "interleaved")):  # (no complex view, see above)
        out.copy_(_rotate_eager(x, tables, r, layout))
        return
    wide = getattr(tables, "wide", None) if layout == "half" and not lowp else None
    blocks = _lowp_blocks(rx.shape[0], seq, d, _INTO_BLOCK if block is None else block)
    most = rx[blocks[0]].numel()  # the first block is the largest
    scratch = _scratch_tensor(most + most // 2, _compute_dtype(x.dtype))
    for b, s in blocks:
        xb, ob = rx[b, s], ro[b, s]
        if layout == "half":
            cos, sin = tables[0][s], tables[1][s]
        if lowp:  # convert the block into float32 scratch, rotate there, round once
            # (the whole width; out of place, in place and out= share this code, so
            # they give the same bits; features past r go through float32 and back
            # unchanged)
            t = scratch[: xb.numel()].view(xb.shape)
            t.copy_(xb)
            if layout == "interleaved":
                _as_complex_pairs(t, r).mul_(tables[s])
            else:
                t1, t2 = t[..., :h], t[..., h:r]
                tmp = scratch[t.numel(): t.numel() + t1.numel()].view(t1.shape)
                torch.mul(t1, sin, out=tmp)
                t1.mul_(cos).addcmul_(t2, sin, value=-1)  # x1' = x1 cos - x2 sin
                t2.mul_(cos).add_(tmp)  # x2' = x2 cos + x1 sin
            ob.copy_(t)  # the one rounding
            continue
        if wide is not None:  # x * [cos, cos] + [x2, x1] * [-sin, sin], full width
            xr, orr = xb[..., :r], ob[..., :r]
            u = scratch[: xr.numel()].view(xr.shape)  # [x2, x1]
            u[..., :h].copy_(xr[..., h:])
            u[..., h:].copy_(xr[..., :h])
            torch.mul(xr, wide[0][s], out=orr)  # [x1 cos, x2 cos]
            orr.addcmul_(u, wide[1][s])  # + [-x2 sin, x1 sin]: the same bits as below
            if r < d and not inplace:
                ob[..., r:].copy_(xb[..., r:])
            continue
        x1, x2, o1, o2 = xb[..., :h], xb[..., h:r], ob[..., :h], ob[..., h:r]
        if inplace:  # o1 overwrites x1, which o2 still needs: keep a copy of x1 only
            x1 = scratch[: x1.numel()].view(x1.shape).copy_(x1)
        # one multiply per half: the same products as a (2, h) broadcast over both
        # halves at once, whose inner loop over h is slower on the CPU
        torch.mul(x1, cos, out=o1)
        o1.addcmul_(x2, sin, value=-1)  # x1 cos - x2 sin
        torch.mul(x2, cos, out=o2)
        o2.addcmul_(x1, sin)  # x2 cos + x1 sin
        if r < d and not inplace:
            ob[..., r:].copy_(xb[..., r:])


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
      or exported graphs, where it is the opaque custom operator ``posenc::rope``
      (``posenc::rope_`` for :func:`apply_rope_`) with its backward registered;
    * **torch.func**: under ``vmap``, ``jvp``, ``grad`` and forward-mode AD the same
      functional formula is used, so ``jvp`` gives the rotation of the tangent (RoPE is
      linear in ``x``) and ``vmap`` equals a loop, also over positions;
    * **meta tensors**: meta ``x`` gives a meta result (a shape-only pass).

    Transforms (tensors; each tested, see the API page's table): ``vmap`` (per-sample
    positions included), ``grad``, ``jvp``, ``torch.compile(fullgraph=True)``,
    ``torch.export`` and ``meta`` tensors.

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
        if out is not None:
            return _apply_rope_torch_into(x, positions, b, layout, rotary_dim, out, "out")
        return _apply_rope_torch(x, positions, b, layout, rotary_dim)
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

    Transforms (tensors; each tested, see the API page's table): ``vmap`` (per-sample
    positions included), ``grad``, ``jvp``, ``torch.compile(fullgraph=True)``,
    ``torch.export`` and ``meta`` tensors. Under a transform the rotation is computed
    out of place and copied back into ``x``.

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
        return _apply_rope_torch_into(x, positions, b, layout, rotary_dim, x, "x")
    if not isinstance(x, np.ndarray):
        raise TypeError(f"x must be a numpy.ndarray or a torch.Tensor to be rotated in "
                        f"place, got {type(x).__name__}")
    return _apply_rope_numpy_into(x, positions, b, layout, rotary_dim, x, "x")
