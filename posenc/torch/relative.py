r"""Learned and relative position schemes as PyTorch modules.

- :class:`LearnedPositionalEmbedding`: a trainable table of absolute positions, added to
  the token embeddings (BERT, GPT-2, ViT).  Asked for a position past its last row it
  raises a ``ValueError`` that says so, where ``nn.Embedding`` raises
  ``IndexError: index out of range in self``.
- :class:`ShawRelativeAttention`: multi-head self-attention with Shaw et al.'s clipped
  relative embeddings in the keys and in the values.
- :class:`T5RelativePositionBias`: T5's bucketed, learned per-head bias on the scores;
  the same numbers as ``transformers``' ``T5Attention.compute_bias``.
- :class:`ALiBiBias`: Press et al.'s fixed linear bias on the scores.

The index arithmetic (buckets, clipping) is that of :mod:`posenc.relative`, written here
in torch so that it runs on the module's device.  No module keeps a table that grows
with the largest position: offsets are computed per call, from the lengths.  ALiBi's
slopes are rebuilt per call from :func:`posenc.alibi_slopes`; its one (non-persistent)
buffer, ``slopes``, only carries the module's device and dtype, so that its output
follows ``.to(...)``, ``.half()`` and ``torch.set_default_dtype`` as a module with
parameters does.  A module initialised on the ``meta`` device and materialised with
``to_empty`` computes the same thing as one built on the CPU once its parameters are
loaded.
"""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import nn

from .._validation import _is_integer, check_bool, check_count
from ..alibi import alibi_slopes
from ..relative import check_t5_buckets

__all__ = [
    "LearnedPositionalEmbedding",
    "ShawRelativeAttention",
    "T5RelativePositionBias",
    "ALiBiBias",
    "t5_relative_position_bucket_torch",
]


def _check_offset(value):
    if not _is_integer(value):
        raise TypeError(f"offset must be an integer, got {type(value).__name__} {value!r}")
    return int(value)


def _check_sequence(x, d_model, name="x"):
    """``x`` must be a floating tensor of shape ``(batch, seq, d_model)``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must have a floating dtype, got {x.dtype}")
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(
            f"{name} must have shape (batch, seq, d_model={d_model}), got {tuple(x.shape)}"
        )


def _relative_positions(query_length, key_length, offset, device):
    """``j - (i + offset)`` as an int64 tensor of shape ``(query_length, key_length)``."""
    q = torch.arange(query_length, dtype=torch.long, device=device)[:, None] + offset
    k = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
    return k - q


def t5_relative_position_bucket_torch(
    relative_position: torch.Tensor, *, bidirectional: bool = True, num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """:func:`posenc.t5_relative_position_bucket` for an integer tensor, on its device.

    Parameters
    ----------
    relative_position : torch.Tensor
        Integer offsets ``key position - query position``, any shape.
    bidirectional, num_buckets, max_distance
        As for :func:`posenc.t5_relative_position_bucket`.

    Returns
    -------
    torch.Tensor
        int64, the shape of ``relative_position``.

    Raises
    ------
    TypeError
        If ``relative_position`` is not an integer tensor, or a setting has the wrong type.
    ValueError
        For bad settings (see :func:`posenc.relative.check_t5_buckets`).

    Examples
    --------
    >>> t5_relative_position_bucket_torch(torch.tensor([-100, -8, -1, 0, 1, 100]))
    tensor([15,  8,  1,  0, 17, 31])
    """
    num_buckets, max_distance, bidirectional = check_t5_buckets(
        num_buckets, max_distance, bidirectional
    )
    if not isinstance(relative_position, torch.Tensor):
        raise TypeError(
            f"relative_position must be a torch.Tensor, got {type(relative_position).__name__}"
        )
    r = relative_position
    if r.dtype == torch.bool or r.is_floating_point() or r.is_complex():
        raise TypeError(f"relative_position must have an integer dtype, got {r.dtype}")
    r = r.to(torch.long)
    buckets = torch.zeros_like(r)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (r > 0).to(torch.long) * num_buckets
        distance = r.abs()
    else:
        distance = -torch.clamp(r, max=0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    safe = torch.where(is_small, torch.full_like(distance, max_exact), distance)
    large = max_exact + (
        torch.log(safe.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    large = torch.clamp(large, max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, large)


class LearnedPositionalEmbedding(nn.Module):
    """A trainable table of absolute positions, added to the token embeddings.

    Row ``p`` of ``embedding.weight`` (shape ``(max_len, d_model)``) is the vector of
    position ``p``, learned like any other weight, as in BERT, GPT-2 and ViT.  The table
    has ``max_len`` rows and no rule for making more: a position ``>= max_len`` has no
    vector, and this module says so with a ``ValueError`` instead of the ``IndexError``
    (or, on a GPU, the device-side assertion) of a bare ``nn.Embedding``.

    Parameters
    ----------
    max_len : int
        Number of rows (positions ``0 .. max_len - 1``), ``>= 1``.
    d_model : int
        Width of each row, ``>= 1``.
    init_std : float, keyword-only, default 0.02
        Standard deviation of the normal initialisation (BERT's and GPT-2's
        ``initializer_range``).

    Raises
    ------
    TypeError, ValueError
        For bad arguments; in :meth:`forward` and :meth:`lookup`, for bad shapes or dtypes
        and for positions outside ``0 .. max_len - 1``.

    Examples
    --------
    >>> torch.manual_seed(0) is not None
    True
    >>> pos = LearnedPositionalEmbedding(8, 4)
    >>> pos(torch.zeros(2, 8, 4)).shape
    torch.Size([2, 8, 4])
    >>> pos(torch.zeros(2, 9, 4))
    Traceback (most recent call last):
        ...
    ValueError: positions 0..8 do not fit a learned table of max_len=8 rows (positions 0..7): \
there is no row for position 8
    """

    def __init__(self, max_len: int, d_model: int, *, init_std: float = 0.02) -> None:
        super().__init__()
        self.max_len = check_count(max_len, "max_len", minimum=1)
        self.d_model = check_count(d_model, "d_model", minimum=1)
        if isinstance(init_std, bool) or not isinstance(init_std, (int, float)) or not (
            init_std > 0 and math.isfinite(init_std)
        ):
            raise ValueError(f"init_std must be a finite number > 0, got {init_std!r}")
        self.init_std = float(init_std)
        self.embedding = nn.Embedding(self.max_len, self.d_model)
        self.reset_parameters()

    def reset_parameters(self):
        """Draw the table from ``N(0, init_std**2)``."""
        nn.init.normal_(self.embedding.weight, mean=0.0, std=self.init_std)

    def extra_repr(self):
        return f"max_len={self.max_len}, d_model={self.d_model}"

    def _range_error(self, lo, hi, bad):
        return ValueError(
            f"positions {lo}..{hi} do not fit a learned table of max_len={self.max_len} rows "
            f"(positions 0..{self.max_len - 1}): there is no row for position {bad}"
        )

    def lookup(self, positions):
        """The rows of ``positions`` (an integer tensor of any shape): ``(*shape, d_model)``.

        Raises
        ------
        TypeError
            If ``positions`` is not an integer tensor.
        ValueError
            If a position is negative or ``>= max_len`` (checked on every device except
            ``meta``, where there are no values to check).
        """
        if not isinstance(positions, torch.Tensor):
            raise TypeError(f"positions must be a torch.Tensor, got {type(positions).__name__}")
        if positions.dtype == torch.bool or positions.is_floating_point() or positions.is_complex():
            raise TypeError(f"positions must have an integer dtype, got {positions.dtype}")
        if positions.numel() and positions.device.type != "meta":
            lo, hi = int(positions.min()), int(positions.max())
            if lo < 0 or hi >= self.max_len:
                raise self._range_error(lo, hi, lo if lo < 0 else hi)
        return self.embedding(positions.to(torch.long))

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``x + table[offset : offset + seq]`` for ``x`` of shape ``(..., seq, d_model)``.

        ``offset`` is the position of the first token (the number of tokens already
        cached when decoding).
        """
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if not x.is_floating_point():
            raise TypeError(f"x must have a floating dtype, got {x.dtype}")
        if x.dim() < 2 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (..., seq, d_model={self.d_model}), got {tuple(x.shape)}"
            )
        offset = _check_offset(offset)
        n = x.shape[-2]
        if n == 0:
            return x + self.embedding.weight[:0].to(x.dtype)
        if offset < 0 or offset + n > self.max_len:
            # name the first position of the range that has no row
            bad = offset if offset < 0 else max(offset, self.max_len)
            raise self._range_error(offset, offset + n - 1, bad)
        return x + self.embedding.weight[offset:offset + n].to(x.dtype)


class ShawRelativeAttention(nn.Module):
    r"""Multi-head self-attention with relative position representations (Shaw et al. 2018).

    For a query at ``i`` and a key at ``j``, with :math:`r = \mathrm{clip}(j - i, -k, k)`,

    .. math::
       e_{ij} = \frac{q_i \cdot (k_j + a^K_r)}{\sqrt{d_h}}, \qquad
       z_i = \sum_j \operatorname{softmax}_j(e_{ij})\,(v_j + a^V_r),

    where :math:`a^K` and :math:`a^V` are two learned tables of :math:`2k + 1` rows of
    width :math:`d_h` (``relative_keys``, ``relative_values``), shared by the heads, as in
    the paper.  The gathered tables take ``2 * seq**2 * d_h`` numbers per call.

    Parameters
    ----------
    d_model : int
        Model width, ``>= 1`` and divisible by ``num_heads``.
    num_heads : int
        Number of heads, ``>= 1``.
    max_relative_position : int
        The clipping distance :math:`k`, ``>= 1``.
    bias : bool, keyword-only, default True
        Whether the four projections have a bias.

    Raises
    ------
    TypeError, ValueError
        For bad arguments, and in :meth:`forward` for inputs of the wrong shape or dtype.

    Examples
    --------
    >>> torch.manual_seed(0) is not None
    True
    >>> attn = ShawRelativeAttention(16, 4, max_relative_position=3)
    >>> attn(torch.randn(2, 5, 16)).shape
    torch.Size([2, 5, 16])
    >>> attn.relative_keys.weight.shape          # 2k + 1 rows of d_h = 16 / 4
    torch.Size([7, 4])
    """

    def __init__(self, d_model: int, num_heads: int, max_relative_position: int, *,
                 bias: bool = True) -> None:
        super().__init__()
        self.d_model = check_count(d_model, "d_model", minimum=1)
        self.num_heads = check_count(num_heads, "num_heads", minimum=1)
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model must be divisible by num_heads, got d_model={self.d_model} and "
                f"num_heads={self.num_heads}"
            )
        self.max_relative_position = check_count(
            max_relative_position, "max_relative_position", minimum=1
        )
        bias = check_bool(bias, "bias")
        self.head_dim = self.d_model // self.num_heads
        self.q_proj = nn.Linear(self.d_model, self.d_model, bias=bias)
        self.k_proj = nn.Linear(self.d_model, self.d_model, bias=bias)
        self.v_proj = nn.Linear(self.d_model, self.d_model, bias=bias)
        self.out_proj = nn.Linear(self.d_model, self.d_model, bias=bias)
        rows = 2 * self.max_relative_position + 1
        self.relative_keys = nn.Embedding(rows, self.head_dim)
        self.relative_values = nn.Embedding(rows, self.head_dim)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-initialise every weight (Xavier-uniform tables, PyTorch's default linears)."""
        for lin in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            lin.reset_parameters()
        nn.init.xavier_uniform_(self.relative_keys.weight)
        nn.init.xavier_uniform_(self.relative_values.weight)

    def extra_repr(self):
        return (f"d_model={self.d_model}, num_heads={self.num_heads}, "
                f"max_relative_position={self.max_relative_position}")

    def relative_index(self, seq_len, device=None):
        """``clip(j - i, -k, k) + k`` for every query ``i`` and key ``j``: ``(seq, seq)``."""
        rel = _relative_positions(seq_len, seq_len, 0, device)
        k = self.max_relative_position
        return torch.clamp(rel, -k, k) + k

    def _heads(self, t):
        b, n, _ = t.shape
        return t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

    def scores(self, x, *, causal=False, attn_mask=None):
        """The logits ``e_ij`` before the softmax: ``(batch, heads, seq, seq)``.

        Masked pairs (``causal`` keys after the query, or ``attn_mask`` False) are
        ``-inf``.
        """
        _check_sequence(x, self.d_model)
        causal = check_bool(causal, "causal")
        b, n, _ = x.shape
        q = self._heads(self.q_proj(x))
        k = self._heads(self.k_proj(x))
        idx = self.relative_index(n, device=x.device)
        a_k = self.relative_keys(idx).to(q.dtype)                   # (n, n, d_h)
        logits = q @ k.transpose(-1, -2) + torch.einsum("bhid,ijd->bhij", q, a_k)
        logits = logits / math.sqrt(self.head_dim)
        allowed = self._allowed(n, causal, attn_mask, x.device, b)
        if allowed is not None:
            logits = logits.masked_fill(~allowed, float("-inf"))
        return logits

    def _allowed(self, n, causal, attn_mask, device, batch):
        allowed = None
        if causal:
            allowed = torch.ones(n, n, dtype=torch.bool, device=device).tril()
        if attn_mask is not None:
            if not isinstance(attn_mask, torch.Tensor) or attn_mask.dtype != torch.bool:
                raise TypeError(
                    "attn_mask must be a bool tensor (True where a query may attend), got "
                    f"{getattr(attn_mask, 'dtype', type(attn_mask).__name__)}"
                )
            try:
                torch.broadcast_shapes(attn_mask.shape, (batch, self.num_heads, n, n))
            except RuntimeError:
                raise ValueError(
                    "attn_mask must broadcast to (batch, heads, seq, seq) = "
                    f"{(batch, self.num_heads, n, n)}, got {tuple(attn_mask.shape)}"
                ) from None
            if len(torch.broadcast_shapes(attn_mask.shape, (batch, self.num_heads, n, n))) != 4:
                raise ValueError(f"attn_mask must have at most 4 dimensions, got {attn_mask.dim()}")
            allowed = attn_mask if allowed is None else allowed & attn_mask
        return allowed

    def forward(self, x: torch.Tensor, *, causal: bool = False,
                attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Attend: ``x`` of shape ``(batch, seq, d_model)`` to the same shape.

        Parameters
        ----------
        x : torch.Tensor
            Floating, ``(batch, seq, d_model)``.
        causal : bool, keyword-only, default False
            Let query ``i`` see only keys ``j <= i``.
        attn_mask : torch.Tensor of bool, optional
            Broadcastable to ``(batch, heads, seq, seq)``; ``True`` where a query may
            attend.  A query that may attend to nothing gets NaN, as in PyTorch's own
            attention.
        """
        logits = self.scores(x, causal=causal, attn_mask=attn_mask)
        weights = torch.softmax(logits, dim=-1)
        n = x.shape[1]
        v = self._heads(self.v_proj(x))
        a_v = self.relative_values(self.relative_index(n, device=x.device)).to(v.dtype)
        z = weights @ v + torch.einsum("bhij,ijd->bhid", weights, a_v)
        z = z.transpose(1, 2).reshape(x.shape[0], n, self.d_model)
        return self.out_proj(z)


class T5RelativePositionBias(nn.Module):
    """T5's relative position bias: one learned scalar per bucket and head.

    ``relative_attention_bias`` is an ``nn.Embedding(num_buckets, num_heads)``, the name
    and shape of ``transformers``' T5 layer, so its weight loads from a T5 checkpoint.
    :meth:`forward` returns the bias that T5 adds to its attention logits (T5 does not
    divide the logits by :math:`\\sqrt{d_h}`; the bias is added as is).

    Parameters
    ----------
    num_heads : int
        Number of heads, ``>= 1``.
    num_buckets : int, keyword-only, default 32
    max_distance : int, keyword-only, default 128
    bidirectional : bool, keyword-only, default True
        ``True`` for T5's encoder, ``False`` for its (causal) decoder.  See
        :func:`posenc.t5_relative_position_bucket` for the rules.

    Raises
    ------
    TypeError, ValueError
        For bad arguments.

    Examples
    --------
    >>> bias = T5RelativePositionBias(8)
    >>> bias(5, 7).shape
    torch.Size([1, 8, 5, 7])
    >>> bias(1, 12, offset=11).shape            # one new query after 11 cached tokens
    torch.Size([1, 8, 1, 12])
    """

    def __init__(self, num_heads: int, *, num_buckets: int = 32, max_distance: int = 128,
                 bidirectional: bool = True) -> None:
        super().__init__()
        self.num_heads = check_count(num_heads, "num_heads", minimum=1)
        self.num_buckets, self.max_distance, self.bidirectional = check_t5_buckets(
            num_buckets, max_distance, bidirectional
        )
        self.relative_attention_bias = nn.Embedding(self.num_buckets, self.num_heads)
        self.reset_parameters()

    def reset_parameters(self, std=1.0):
        """Draw the table from ``N(0, std**2)``.

        ``std=1.0`` is ``nn.Embedding``'s default; ``transformers`` draws T5's table with
        ``std = initializer_factor * d_model**-0.5``.
        """
        nn.init.normal_(self.relative_attention_bias.weight, mean=0.0, std=std)

    def extra_repr(self):
        return (f"num_heads={self.num_heads}, num_buckets={self.num_buckets}, "
                f"max_distance={self.max_distance}, bidirectional={self.bidirectional}")

    def buckets(self, query_length, key_length, offset=0):
        """The bucket of every (query, key) pair: int64, ``(query_length, key_length)``."""
        q = check_count(query_length, "query_length")
        k = check_count(key_length, "key_length")
        offset = _check_offset(offset)
        rel = _relative_positions(q, k, offset, self.relative_attention_bias.weight.device)
        return t5_relative_position_bucket_torch(
            rel, bidirectional=self.bidirectional, num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )

    def forward(self, query_length: int, key_length: int, offset: int = 0) -> torch.Tensor:
        """The bias, ``(1, num_heads, query_length, key_length)``.

        Queries sit at positions ``offset, offset + 1, ...`` (``offset`` = tokens already
        cached, T5's ``past_seen_tokens``), keys at ``0, 1, ...``.
        """
        values = self.relative_attention_bias(self.buckets(query_length, key_length, offset))
        return values.permute(2, 0, 1).unsqueeze(0)


class ALiBiBias(nn.Module):
    """ALiBi's bias for attention logits, ``(1, num_heads, query_length, key_length)``.

    Head ``h`` adds ``-m_h * (i - j)`` for a query at ``i`` and a key at ``j`` (slopes from
    :func:`posenc.alibi_slopes`); with ``causal=True`` keys after the query get ``-inf``;
    with ``causal=False`` the bias is the symmetric ``-m_h * |i - j|`` (not in the paper).
    The module has no parameters; its non-persistent buffer ``slopes`` (the slopes in the
    module's dtype, not saved in ``state_dict``) gives the output its device and dtype:
    after ``.to(torch.float64)``, ``.half()``, ``.to("meta")`` or under
    ``torch.set_default_dtype`` at construction the bias comes out on that device in that
    dtype.  The values are computed in float64 from :func:`posenc.alibi_slopes` whatever
    the buffer holds (a ``to_empty`` buffer is fine), then cast once.

    Parameters
    ----------
    num_heads : int
        ``>= 1``.
    causal : bool, keyword-only, default True

    Raises
    ------
    TypeError, ValueError
        For bad arguments.

    Examples
    --------
    >>> ALiBiBias(8)(3, 3)[0, 0]                 # head 1 of 8: slope 1/2
    tensor([[ 0.0000,    -inf,    -inf],
            [-0.5000,  0.0000,    -inf],
            [-1.0000, -0.5000,  0.0000]])
    """

    def __init__(self, num_heads: int, *, causal: bool = True) -> None:
        super().__init__()
        self.num_heads = check_count(num_heads, "num_heads", minimum=1)
        self.causal = check_bool(causal, "causal")
        self.register_buffer(
            "slopes", torch.as_tensor(alibi_slopes(self.num_heads)).to(torch.get_default_dtype()),
            persistent=False)

    def extra_repr(self):
        return f"num_heads={self.num_heads}, causal={self.causal}"

    def forward(self, query_length: int, key_length: int, offset: int = 0, *,
                device: torch.device | str | None = None,
                dtype: torch.dtype | None = None) -> torch.Tensor:
        """The bias for queries at ``offset, offset + 1, ...`` and keys at ``0, 1, ...``.

        ``device`` and ``dtype`` default to the module's (those of its ``slopes`` buffer).
        """
        q = check_count(query_length, "query_length")
        k = check_count(key_length, "key_length")
        offset = _check_offset(offset)
        anchor = cast(torch.Tensor, self.slopes)
        if dtype is None:
            dtype = anchor.dtype
        if device is None:
            device = anchor.device
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        # as_tensor: inside torch.compile the NumPy slopes are traced into a tensor, which
        # torch.tensor would copy-construct (a UserWarning there)
        slopes = torch.as_tensor(alibi_slopes(self.num_heads), dtype=torch.float64,
                                 device=device)
        behind = -_relative_positions(q, k, offset, device)      # i - j
        if self.causal:
            bias = -slopes[:, None, None] * behind.clamp(min=0).to(torch.float64)
            bias = bias.masked_fill((behind < 0)[None], float("-inf"))
        else:
            bias = -slopes[:, None, None] * behind.abs().to(torch.float64)
        return (bias + 0.0).to(dtype).unsqueeze(0)
