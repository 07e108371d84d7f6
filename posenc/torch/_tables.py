r"""posenc's cos/sin tables for tensors: the eager path's LRU cache, and the traced path's tables.

:func:`posenc.apply_rope` of a tensor, on the eager path, reads its tables from a small
LRU cache shared by every call (:func:`posenc.clear_rope_cache` empties it): for each
(positions, rotated width, base, compute dtype, device, layout), the complex
``e^{i m theta}`` (interleaved) or the pair ``(cos, sin)`` (half), built once from float64
angles (NumPy) and cast to the compute dtype.  Where the cache cannot be used (a graph
traced by ``torch.compile``/``torch.export``, ``torch.func`` transforms, forward-mode AD,
meta tensors), :func:`_functional_tables` builds ``(cos, sin)`` of shape
``(seq, r/2)`` with tensor operations, from the same float64 angles, per (position, pair)
and never per element of ``x``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import torch

from .._validation import check_positions, check_positions_tensor, check_rotary_dim
from ..rope import _check_x_shape
from ..sinusoidal import inverse_frequencies

#: At most this many cached tables ...
_CACHE_SIZE = 64
#: ... holding at most this many bytes together (tables and keys).  A table larger than
#: this is used for its call and not kept.
_CACHE_BYTES = 64 << 20
_cache: OrderedDict = OrderedDict()  # key -> (tables, nbytes)
_cache_nbytes = 0
_cache_lock = threading.Lock()


def clear() -> None:
    """Empty the cache (:func:`posenc.clear_rope_cache`)."""
    global _cache_nbytes
    with _cache_lock:
        _cache.clear()
        _cache_nbytes = 0


def _compute_dtype(dtype):
    """float32 and float64 are computed in their own precision, float16/bfloat16 in float32."""
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


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
    width instead of four over half of it (see :func:`posenc.torch._eager._rotate_into`).  Unpacks as the
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


def _inv_freq_tensor(r, base):
    """``inverse_frequencies(r, base)`` as a float64 CPU tensor.

    Eagerly (``torch.func``, forward AD, meta) and under ``torch.export`` these are the
    NumPy frequencies of the cached path, bit for bit; inside ``torch.compile`` Dynamo
    traces the NumPy code into tensor operations, which may differ in the last float64
    bit (an angle error of about ``m * 1e-16``, invisible below float64 at any practical
    position).  :class:`posenc.torch.RotaryEmbedding` passes its own copy instead.
    """
    return torch.from_numpy(inverse_frequencies(r, base))


def _positions_float64(pos, seq, device):
    """Positions as a float64 tensor ``(seq,)`` on ``device``, read by tensor operations.

    Checks dtype and shape only (a traced graph must not branch on the values).
    """
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

