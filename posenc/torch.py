r"""PyTorch modules: the sinusoidal encoding and RoPE, for use inside models.

This module imports the real :mod:`torch` (``import posenc`` does not).  Tables are built
from float64 angles (NumPy) and stored as float32 buffers with
``register_buffer(..., persistent=False)``: they are deterministic functions of the
constructor arguments, so they are left out of ``state_dict`` (checkpoints stay small,
and a model saved with one ``max_len`` loads into one built with another).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ._validation import check_base, check_count, check_d_model, check_layout
from .rope import _rotate_half_torch, _rotate_interleaved_torch
from .sinusoidal import _sinusoid_rows, inverse_frequencies

__all__ = ["SinusoidalPositionalEncoding", "RotaryEmbedding"]


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


class RotaryEmbedding(nn.Module):
    """RoPE for queries and keys, with a cached cos/sin table.

    ``forward(q, k, positions=None)`` returns ``(apply_rope(q), apply_rope(k))`` with
    the same positions, layout and base (see :func:`posenc.apply_rope`), reading cos and
    sin from buffers ``cos`` and ``sin`` of shape ``(max_seq_len, dim/2)`` (float32,
    computed from float64 angles, non-persistent).  Positions past the table extend it
    (to the next power of two, from float64 again); negative positions are computed
    directly, without the table.  float16/bfloat16 inputs are rotated in float32 and
    cast back.  If the module itself is cast (``.half()``), the table is rebuilt in
    float32 on the next call rather than used in low precision.

    Parameters
    ----------
    dim : int
        Number of features per head (the last dimension of ``q`` and ``k``), even.
    base : float, default 10000.0
        Finite and ``> 1``.
    layout : {"interleaved", "half"}, default "interleaved"
        Which features form a pair (see :mod:`posenc.rope`).
    max_seq_len : int, default 4096
        Positions cached at construction, ``>= 0``.

    Raises
    ------
    TypeError, ValueError
        For bad arguments, and in ``forward`` for tensors whose last dimension is not
        ``dim`` or positions of the wrong length or dtype.

    Examples
    --------
    >>> import torch
    >>> from posenc import apply_rope
    >>> rope = RotaryEmbedding(8, layout="half", max_seq_len=16)
    >>> q, k = torch.randn(2, 1, 4, 5, 8).unbind(0)          # (batch, heads, seq, dim)
    >>> q2, k2 = rope(q, k)
    >>> bool(torch.allclose(q2, apply_rope(q, layout="half"), atol=1e-6))
    True
    >>> q3, _ = rope(q, k, positions=torch.arange(100, 105))  # past the table: extended
    >>> rope.cos.shape
    torch.Size([128, 4])
    """

    def __init__(self, dim, base=10000.0, layout="interleaved", max_seq_len=4096):
        super().__init__()
        self.dim = check_d_model(dim, "dim", even=True)
        self.base = check_base(base)
        self.layout = check_layout(layout)
        n = check_count(max_seq_len, "max_seq_len")
        cos, sin = self._tables(np.arange(n))
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def _tables(self, positions, device=None):
        angles = positions.astype(np.float64)[:, None] * inverse_frequencies(self.dim, self.base)
        cos = torch.from_numpy(np.cos(angles)).to(device=device, dtype=torch.float32)
        sin = torch.from_numpy(np.sin(angles)).to(device=device, dtype=torch.float32)
        return cos, sin

    def extra_repr(self):
        return (
            f"dim={self.dim}, base={self.base:g}, layout={self.layout!r}, "
            f"max_seq_len={self.cos.shape[0]}"
        )

    def _extend(self, n):
        n = 1 << max(n - 1, 0).bit_length()
        self.cos, self.sin = self._tables(np.arange(n), self.cos.device)

    def _cos_sin(self, positions, seq, device):
        """cos and sin of shape (seq, dim/2), float32, on ``device``."""
        if self.cos.dtype != torch.float32:  # the module was cast: rebuild in float32
            self._extend(self.cos.shape[0])
        if positions is None:
            if seq > self.cos.shape[0]:
                self._extend(seq)
            return self.cos[:seq], self.sin[:seq]
        if not torch.is_tensor(positions):
            positions = torch.as_tensor(np.asarray(positions))
        if positions.dtype == torch.bool or positions.is_floating_point() or positions.is_complex():
            raise TypeError(f"positions must have an integer dtype, got {positions.dtype}")
        if positions.ndim != 1 or positions.shape[0] != seq:
            raise ValueError(
                f"positions must have shape ({seq},) (the sequence length, q.shape[-2]), "
                f"got {tuple(positions.shape)}"
            )
        if seq == 0:
            return self.cos[:0], self.sin[:0]
        lo, hi = int(positions.min()), int(positions.max())
        if lo < 0:  # negative positions: compute directly (a table index would wrap)
            return self._tables(positions.cpu().numpy().astype(np.int64), device)
        if hi >= self.cos.shape[0]:
            self._extend(hi + 1)
        idx = positions.to(device=self.cos.device, dtype=torch.long)
        return self.cos[idx], self.sin[idx]

    def _rotate(self, x, cos, sin):
        dtype = x.dtype
        compute = dtype if dtype in (torch.float32, torch.float64) else torch.float32
        xc = x.to(compute)
        cos, sin = cos.to(device=x.device, dtype=compute), sin.to(device=x.device, dtype=compute)
        if self.layout == "interleaved":
            out = _rotate_interleaved_torch(xc, torch.complex(cos, sin), self.dim)
        else:
            out = _rotate_half_torch(xc, cos, sin, self.dim)
        return out.to(dtype)

    def forward(self, q, k, positions=None):
        """Rotate ``q`` and ``k`` (shape ``(..., seq, dim)``) at the same positions.

        Parameters
        ----------
        q, k : torch.Tensor
            Floating-point, shape ``(..., seq, dim)`` (the leading dimensions may
            differ, e.g. grouped-query attention).
        positions : torch.Tensor or array_like of int, optional
            Shape ``(seq,)``; default ``0 .. seq - 1``.

        Returns
        -------
        tuple of torch.Tensor
            The rotated ``(q, k)``, same shapes, dtypes and devices.
        """
        for name, t in (("q", q), ("k", k)):
            if not torch.is_tensor(t) or not t.is_floating_point():
                raise TypeError(f"{name} must be a floating-point tensor")
            if t.ndim < 2 or t.shape[-1] != self.dim:
                raise ValueError(
                    f"{name} must have shape (..., seq, dim={self.dim}), got {tuple(t.shape)}"
                )
        if q.shape[-2] != k.shape[-2]:
            raise ValueError(
                f"q and k must have the same sequence length, got {q.shape[-2]} and {k.shape[-2]}"
            )
        cos, sin = self._cos_sin(positions, q.shape[-2], q.device)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin)
