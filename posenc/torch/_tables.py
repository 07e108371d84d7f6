r"""posenc's cos/sin tables for tensors: the eager path's LRU cache, and the traced path's tables.

:func:`posenc.apply_rope` of a tensor, on the eager path, reads its tables from a small
LRU cache shared by every call (:func:`posenc.clear_rope_cache` empties it): for each
(positions, rotated width, base, compute dtype, device, layout), the complex
``e^{i m theta}`` (interleaved) or the pair ``(cos, sin)`` (half), built once from float64
angles (NumPy) and cast to the compute dtype.  Where the cache cannot be used (a graph
traced by ``torch.compile``/``torch.export``, ``torch.func`` transforms, forward-mode AD,
meta tensors), :meth:`PlainRope.traced_tables` builds ``(cos, sin)`` of shape
``(seq, r/2)`` with tensor operations (:func:`cos_sin64`), from the same float64 angles.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import torch

from .._validation import check_positions, check_positions_tensor
from ..sinusoidal import inverse_frequencies
from ._eager import Tables

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


def _positions_key(pos, seq):
    """A hashable key for the positions, and the positions as an int64 array (or None)."""
    if pos is None:
        return ("range", 0, seq), None
    arr = check_positions(pos, seq)
    if seq and np.array_equal(arr, arr[0] + np.arange(seq, dtype=np.int64)):
        return ("range", int(arr[0]), seq), arr  # a contiguous run, e.g. a KV-cache offset
    return ("array", arr.tobytes()), arr


def _tables_nbytes(key, value):
    tensors = (value.cos, value.sin) if value.cis is None else (value.cis,)
    key_bytes = len(key[0][1]) if key[0][0] == "array" else 0
    return sum(t.numel() * t.element_size() for t in tensors) + key_bytes + 256


def _torch_tables(pos_key, pos, seq, r, base, compute_dtype, device, layout):
    """Cached :class:`~posenc.torch._eager.Tables` of shape ``(seq, r/2)``: for the
    interleaved layout ``cis`` with ``cos`` and ``sin`` its real and imaginary views.

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
            cis = cis.to(device=device, dtype=cdtype)
            value = Tables(cis.real, cis.imag, cis)
        else:
            value = Tables(*(torch.from_numpy(t).to(device=device, dtype=compute_dtype)
                             for t in (np.cos(angles), np.sin(angles))))
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


def inv_freq_tensor(r, base):
    """``inverse_frequencies(r, base)`` as a float64 CPU tensor.

    Eagerly and under ``torch.export`` these are the NumPy frequencies of the cached
    path, bit for bit; inside ``torch.compile`` Dynamo traces the NumPy code into tensor
    operations, which may differ in the last float64 bit (an angle error of about
    ``m * 1e-16``).
    """
    return torch.from_numpy(inverse_frequencies(r, base))


def positions_float64(pos, seq, device):
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
                "positions, or meta x for a shape-only pass")
        return pos.to(device=device, dtype=torch.float64)
    arr = check_positions(pos, seq)
    return torch.from_numpy(arr.astype(np.float64)).to(device)


def cos_sin64(p, inv_freq, factor, dtype):
    """``factor * cos(p theta)`` and ``factor * sin(p theta)`` from float64 angles, rounded
    once to ``dtype``: ``p`` float64 ``(...)``, ``inv_freq`` float64 broadcasting against
    ``(..., r/2)``; the result is ``(..., r/2)``."""
    angles = p[..., None] * inv_freq.to(p.device)
    cos, sin = angles.cos(), angles.sin()
    if not isinstance(factor, float) or factor != 1.0:
        cos, sin = cos * factor, sin * factor
    return cos.to(dtype), sin.to(dtype)


class PlainRope:
    """Where :func:`posenc.apply_rope` takes its tables: frequencies
    ``inverse_frequencies(r, base)``, attention factor 1, the LRU cache eagerly."""

    static = True

    def __init__(self, r, base):
        self.r, self.base = r, base

    def eager_tables(self, positions, seq, device, dtype, layout):
        pos_key, pos_arr = _positions_key(positions, seq)
        return _torch_tables(pos_key, pos_arr, seq, self.r, self.base, dtype, device, layout)

    def traced_tables(self, positions, seq, device, dtype):
        p = positions_float64(positions, seq, device)
        return cos_sin64(p, inv_freq_tensor(self.r, self.base), 1.0, dtype)

    def kernel_args(self, positions, seq, device):
        from . import _fused

        pos, start, _ = _fused.kernel_positions(positions, seq, device)
        return pos, start, _fused.plain_freqs(self.r, self.base, device)
