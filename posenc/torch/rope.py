r"""RoPE as a PyTorch module, and the opt-in compiled kernel."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .._validation import check_base, check_count, check_d_model, check_layout
from ..rope import _compute_dtype, _rotate_tensor, _tensor_tables
from ..sinusoidal import inverse_frequencies

__all__ = ["RotaryEmbedding", "compiled_apply_rope"]


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
    compiled : bool, default False
        Rotate through :func:`compiled_apply_rope`'s ``torch.compile`` kernel: one pass
        over memory instead of one to three eager kernels (and no float32 copy for
        float16/bfloat16), at the price of compiling on first use.

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

    def __init__(self, dim, base=10000.0, layout="interleaved", max_seq_len=4096,
                 compiled=False):
        super().__init__()
        if not isinstance(compiled, bool):
            raise TypeError(f"compiled must be True or False, got {compiled!r}")
        self.compiled = compiled
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
            f"max_seq_len={self.cos.shape[0]}" + (", compiled=True" if self.compiled else "")
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
        compute = _compute_dtype(x.dtype)
        cos, sin = cos.to(device=x.device, dtype=compute), sin.to(device=x.device, dtype=compute)
        if self.compiled:
            return _compiled_kernel(self.layout)(x, cos, sin, self.dim)
        tables = torch.complex(cos, sin) if self.layout == "interleaved" else (cos, sin)
        return _rotate_tensor(x, tables, self.dim, self.layout)

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


# -- the opt-in compiled kernel ------------------------------------------------------------


def _rope_kernel_half(x, cos, sin, r: int):
    """The half layout as one expression, which ``torch.compile`` fuses into one loop.

    ``cos`` and ``sin`` have shape ``(seq, r/2)`` in the compute dtype (float32 for
    float16/bfloat16 input): the loop reads ``x`` once, computes in that precision and
    writes the output once, rounding once.
    """
    h = r // 2
    xr = x[..., :r].to(cos.dtype)
    x1, x2 = xr[..., :h], xr[..., h:]
    rot = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)
    return rot if r == x.shape[-1] else torch.cat((rot, x[..., r:]), dim=-1)


def _rope_kernel_interleaved(x, cos, sin, r: int):
    """The interleaved layout as one expression (see :func:`_rope_kernel_half`)."""
    h = r // 2
    x1, x2 = x[..., :r].to(cos.dtype).unflatten(-1, (h, 2)).unbind(-1)
    rot = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    rot = rot.to(x.dtype)
    return rot if r == x.shape[-1] else torch.cat((rot, x[..., r:]), dim=-1)


# One compiled function per layout, so that each keeps its own (small) set of compiled
# variants: dtypes, rotated widths, and static then dynamic sequence lengths.
_COMPILED = {}


def _compiled_kernel(layout):
    fn = _COMPILED.get(layout)
    if fn is None:
        body = _rope_kernel_half if layout == "half" else _rope_kernel_interleaved
        fn = _COMPILED[layout] = torch.compile(body, fullgraph=True)
    return fn


def compiled_apply_rope(x, positions=None, *, base=10000.0, layout="interleaved",
                        rotary_dim=None):
    """:func:`posenc.apply_rope` for tensors, as one kernel compiled by ``torch.compile``.

    Opt-in speed.  Eager PyTorch runs one kernel per operation: the interleaved layout
    is already one pass over memory (a complex multiply), but the half layout takes
    three, and float16/bfloat16 need conversions to float32 and back.  Compiled, every
    case is one loop that reads ``x`` once and writes the result once (see the book's
    *Benchmarks* appendix for the measured difference).  The results are those of
    :func:`posenc.apply_rope`: the same float64-accurate tables, float32 arithmetic for
    float16/bfloat16, one rounding at the end (the compiler may contract a multiply and
    an add into one fused operation, so float32 results can differ in the last bit).

    The price is compilation: the first call, and the first with a new dtype, layout,
    rotated width or (once) sequence length, compiles for a few seconds (longer for the
    first compilation in a process), and it needs what ``torch.compile`` needs (a C++
    compiler on the CPU, Triton on a GPU).  A model that is compiled anyway gets the
    same fusion by calling :func:`posenc.apply_rope` inside it.

    Parameters
    ----------
    x : torch.Tensor
        Floating-point, shape ``(..., seq, d)``, ``d`` even.
    positions, base, layout, rotary_dim
        As for :func:`posenc.apply_rope`.

    Returns
    -------
    torch.Tensor
        Same shape, dtype and device as ``x``.

    Raises
    ------
    TypeError
        If ``x`` is not a floating-point tensor, or as :func:`posenc.apply_rope`.
    ValueError
        As :func:`posenc.apply_rope`.

    Examples
    --------
    >>> import torch, posenc
    >>> x = torch.randn(1, 2, 6, 8)
    >>> y = compiled_apply_rope(x, layout="half")              # compiles on first use
    >>> bool(torch.allclose(y, posenc.apply_rope(x, layout="half"), atol=1e-6))
    True
    """
    b = check_base(base)
    layout = check_layout(layout)
    if not torch.is_tensor(x) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch.Tensor, got "
                        f"{x.dtype if torch.is_tensor(x) else type(x).__name__}")
    # real cos/sin tables for both layouts: the compiler fuses them, no complex numbers
    r, (cos, sin) = _tensor_tables(x, positions, b, rotary_dim, "half")
    return _compiled_kernel(layout)(x, cos, sin, r)
