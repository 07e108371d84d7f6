r"""The sinusoidal encoding as a PyTorch module (Vaswani et al., 2017, §3.5)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .._validation import check_base, check_count, check_d_model
from ..sinusoidal import _sinusoid_rows, inverse_frequencies

__all__ = ["SinusoidalPositionalEncoding"]


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the sinusoidal encoding to a batch of token embeddings, then dropout.

    ``forward(x) = dropout(x + PE[:seq])`` with ``PE`` from
    :func:`posenc.sinusoidal_encoding` (float64, cast to ``x.dtype``).

    The table ``pe`` (shape ``(max_len, d_model)``, float32) is a non-persistent buffer:
    it follows ``.to(device)`` but is not saved in ``state_dict``.  A sequence longer
    than the table **extends it on the fly**: the table is rebuilt (from float64) to the
    next power of two that covers the sequence, and kept.  The encoding is defined for
    every position, so there is no reason to fail; ``max_len`` is only the size
    allocated up front.

    Parameters
    ----------
    d_model : int
        Model width, a positive even number.
    max_len : int, default 5000
        Positions allocated at construction, ``>= 0``.
    base : float, default 10000.0
        Finite and ``> 1``.
    dropout : float, default 0.0
        Dropout probability applied after the addition, in ``[0, 1)``.

    Raises
    ------
    TypeError, ValueError
        For bad arguments (see :mod:`posenc._validation`), and in ``forward`` if ``x``
        is not ``(batch, seq, d_model)``.

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

    def __init__(self, d_model, max_len=5000, base=10000.0, dropout=0.0):
        super().__init__()
        self.d_model = check_d_model(d_model, even=True)
        self.base = check_base(base)
        max_len = check_count(max_len, "max_len")
        p = float(dropout)
        if isinstance(dropout, bool) or not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}")
        self.dropout = nn.Dropout(p)
        self.register_buffer("pe", self._table(max_len), persistent=False)

    def _table(self, n, device=None):
        pe = _sinusoid_rows(np.arange(n), self.d_model, self.base)  # float64
        return torch.from_numpy(pe).to(device=device, dtype=torch.float32)

    @property
    def max_len(self):
        """Number of positions currently in the table."""
        return self.pe.shape[0]

    def extra_repr(self):
        return f"d_model={self.d_model}, max_len={self.max_len}, base={self.base:g}"

    def forward(self, x):
        """``dropout(x + PE[:seq])`` for ``x`` of shape ``(batch, seq, d_model)``."""
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (batch, seq, d_model={self.d_model}), got {tuple(x.shape)}"
            )
        seq = x.shape[1]
        if seq > self.pe.shape[0] or self.pe.dtype != torch.float32:
            n = max(seq, self.pe.shape[0])
            n = 1 << max(n - 1, 0).bit_length()  # next power of two >= n
            self.pe = self._table(n, self.pe.device)
        return self.dropout(x + self.pe[:seq].to(x.dtype))
