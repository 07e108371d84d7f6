r"""The sinusoidal encoding as a PyTorch module (Vaswani et al., 2017, §3.5).

:class:`SinusoidalPositionalEncoding` keeps the guarantees of :mod:`posenc.torch.rope`
that apply to it: meta-device init (the non-persistent table is rebuilt whenever a
conversion such as ``to_empty`` replaces it), float64 input with a float64 encoding,
memory bounded by the input (the table grows to the next power of two of the longest
sequence), tables built outside inference mode, thread-safe growth, and
``torch.compile(fullgraph=True)`` (while traced, the rows are computed with tensor
operations).
"""

from __future__ import annotations

import threading

import numpy as np
import torch
from torch import nn

from .._validation import check_base, check_count, check_d_model, check_real
from ..sinusoidal import _sinusoid_rows, inverse_frequencies

__all__ = ["SinusoidalPositionalEncoding"]

#: Growth of every module's table takes this lock (see :mod:`posenc.torch.rope`).
_GROW_LOCK = threading.Lock()


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the sinusoidal encoding to a batch of token embeddings, then dropout.

    ``forward(x) = dropout(x + PE[:seq])`` with ``PE`` from
    :func:`posenc.sinusoidal_encoding` (float64, cast to ``x.dtype``; for float64 ``x``
    the rows are computed for the call in float64).

    The table ``pe`` (shape ``(max_len, d_model)``, float32) is a non-persistent buffer:
    it follows ``.to(device)`` but is not saved in ``state_dict``, and it is rebuilt from
    float64 whenever a conversion replaces it (so ``.to("meta").to_empty(device=...)``,
    the meta-device recipe of large models and FSDP, gives a valid table).  A sequence
    longer than the table **extends it on the fly**: the table is rebuilt (from float64)
    to the next power of two that covers the sequence, and kept (growth is thread-safe:
    one lock, never shrunk).  The encoding is defined for every position, so there is no
    reason to fail; ``max_len`` is only the size allocated up front.

    Parameters
    ----------
    d_model : int
        Model width, a positive even number.
    max_len : int, default 5000
        Positions allocated at construction, ``>= 0``.
    base : float, default 10000.0
        Finite and ``> 1``.
    dropout : float, default 0.0
        Dropout probability applied after the addition, a real number in ``[0, 1)``.

    Raises
    ------
    TypeError, ValueError
        For bad arguments (see :mod:`posenc._validation`; ``dropout`` must be a real
        number, not a string or None), and in ``forward`` if ``x`` is not a
        floating-point ``torch.Tensor`` (integer token ids, booleans and NumPy arrays
        are refused: add the encoding to embeddings) of shape ``(batch, seq, d_model)``.

    Examples
    --------
    >>> import torch
    >>> enc = SinusoidalPositionalEncoding(8, max_len=16)
    >>> x = torch.zeros(2, 5, 8)
    >>> y = enc(x)
    >>> y.shape, bool(torch.allclose(y[0, 1, :2], torch.tensor([0.8415, 0.5403]), atol=1e-4))
    (torch.Size([2, 5, 8]), True)
    >>> enc(torch.zeros(1, 40, 8)).shape, enc.pe.shape[0]     # extended to 64 rows
    (torch.Size([1, 40, 8]), 64)
    """

    def __init__(self, d_model: int, max_len: int = 5000, base: float = 10000.0,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = check_d_model(d_model, even=True)
        self.base = check_base(base)
        max_len = check_count(max_len, "max_len")
        p = check_real(dropout, "dropout")
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}")
        self.dropout = nn.Dropout(p)
        with torch.inference_mode(False):  # float64 frequencies, a constant of traced graphs
            self._inv_freq = torch.from_numpy(inverse_frequencies(self.d_model, self.base))
        self.register_buffer("pe", self._table(max_len), persistent=False)

    def _table(self, n, device=None, dtype=torch.float32):
        with torch.inference_mode(False):  # never an inference tensor
            if device is not None and torch.device(device).type == "meta":
                return torch.empty((n, self.d_model), dtype=dtype, device="meta")
            pe = _sinusoid_rows(np.arange(n), self.d_model, self.base)  # float64
            return torch.from_numpy(pe).to(device=device, dtype=dtype)

    @property
    def max_len(self):
        """Number of positions currently in the table."""
        return self.pe.shape[0]

    def extra_repr(self):
        return f"d_model={self.d_model}, max_len={self.max_len}, base={self.base:g}"

    def _apply(self, fn, recurse=True):
        # see RotaryEmbedding._apply: a replaced table is rebuilt, not trusted
        before = self._buffers.get("pe")
        super()._apply(fn, recurse)
        pe = self._buffers.get("pe")
        if pe is not None and (pe is not before or pe.dtype != torch.float32):
            with _GROW_LOCK:
                self.pe = self._table(pe.shape[0], pe.device)
        return self

    def _rows(self, seq, device):
        """``PE[:seq]`` (float32) from the table, grown to a power of two if needed."""
        pe = self.pe  # one snapshot: never shrunk
        if seq <= pe.shape[0] and pe.device.type != "meta":
            return pe[:seq]
        with _GROW_LOCK:
            pe = self.pe
            if seq > pe.shape[0] or pe.device.type == "meta":
                n = 1 << max(max(seq, pe.shape[0]) - 1, 0).bit_length()  # next power of two
                pe = self.pe = self._table(n, device if pe.device.type == "meta" else pe.device)
        return pe[:seq]

    def _rows_traced(self, seq, device):
        """``PE[:seq]`` in float64 with tensor operations (inside a compiled graph)."""
        angles = torch.arange(seq, dtype=torch.float64, device=device)[:, None] * (
            self._inv_freq.to(device)[None, :])
        return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``dropout(x + PE[:seq])`` for ``x`` of shape ``(batch, seq, d_model)``."""
        if not torch.is_tensor(x):
            raise TypeError(
                f"x must be a floating-point torch.Tensor of embeddings, got "
                f"{type(x).__module__}.{type(x).__name__}"
            )
        if not x.is_floating_point():
            raise TypeError(
                f"x must be a floating-point tensor of embeddings, got dtype {x.dtype} "
                f"(integer token ids go through an embedding first; adding the encoding "
                f"to an integer tensor would truncate it)"
            )
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (batch, seq, d_model={self.d_model}), got {tuple(x.shape)}"
            )
        seq = x.shape[1]
        if torch.compiler.is_compiling():
            pe = self._rows_traced(seq, x.device)
        elif x.dtype == torch.float64:
            pe = torch.from_numpy(_sinusoid_rows(np.arange(seq), self.d_model, self.base))
        else:
            pe = self._rows(seq, x.device)
        return self.dropout(x + pe.to(device=x.device, dtype=x.dtype))
