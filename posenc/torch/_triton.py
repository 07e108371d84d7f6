r"""The fused RoPE kernel (Triton): queries and keys of one token per program, one launch.

One program rotates every head of ``q`` (and of ``k``, when given) at a block of tokens
of one sample.  It reads the tokens' positions, forms the angles
``position * inv_freq`` in float64 from posenc's float64 frequencies, takes their cosine and
sine in float64, multiplies them by the attention factor and rounds them once to float32:
exactly the values of posenc's float64-built tables, so the output is as accurate as those
tables make the torch path (float32 arithmetic, one rounding into the output's dtype).  No
table is read or cached, so any position that fits in int64 works, no host synchronisation
is needed to check positions against a table, and memory is that of the input.

For each pair ``i`` (columns ``c1 = off + i`` and ``c2 = off + i + r/2`` in the half
layout, ``c1 = off + 2i`` and ``c2 = c1 + 1`` in the interleaved one)::

    y[c1] = x[c1] cos - x[c2] sin
    y[c2] = x[c2] cos + x[c1] sin

with ``sin`` negated for ``inverse=True`` (the backward pass: the gradient of a rotation is
the rotation by the opposite angle).  Columns outside ``[off, off + r)`` are copied when the
output is not the input, and left alone in place.

Tensors are seen as ``(B, H, T, D)`` with any strides (a ``(B, T, H, D)`` storage seen as
``(B, H, T, D)`` is read where it lies); positions as ``(B, T)`` with a batch stride of 0
when shared.  The kernel runs on CUDA tensors, and on CPU tensors under Triton's
interpreter (``TRITON_INTERPRET=1``), which is how the tests run it on machines without a
GPU.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

try:  # the precise float64 cosine and sine on NVIDIA GPUs
    from triton.language.extra import libdevice as _libdevice
except ImportError:  # pragma: no cover - older Triton
    _libdevice = None

__all__ = ["interpreting", "launch_rope"]

#: Bytes of ``x`` one step of a program loads (both halves of a tile), and the most tokens
#: a tile holds.  Measured (benchmarks/gpu.py's sweep, bfloat16 prefill of q and k, 16,384
#: tokens): 8 KiB x 32 tokens ran at 1.47x copy_ on an H200 where 16 KiB x 16 tokens ran
#: at 2.12x and 32 KiB tiles at 4.4-7.5x (register spills); float32 1.15x against 1.26x.
#: 8 KiB x 32 tokens was also the configuration of an earlier H100 run (1.30x).
TILE_BYTES = 8192
BLOCK_T_MAX = 32


def interpreting() -> bool:
    """Whether Triton runs kernels in its interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@triton.jit
def _rotate_heads(x_ptr, o_ptr, H, sh, st, sd, soh, sot, sod, tt, tm, jj, jm, cos, sin,
                  ROT_OFF, N_REST, H2: tl.constexpr, BLOCK_H: tl.constexpr,
                  BLOCK_T: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_REST: tl.constexpr, HALF: tl.constexpr,
                  COPY_REST: tl.constexpr):
    """Rotate ``H`` heads at the tokens ``tt`` (``BLOCK_T`` of them), ``BLOCK_H`` at a time.

    Tiles are ``(BLOCK_H, BLOCK_T, pairs)``: for a prefill, one head's tokens are one
    contiguous run of memory; for a decoding step (one token), the heads are.
    """
    t3 = tt[None, :, None]
    tm3 = tm[None, :, None]
    for h0 in range(0, H, BLOCK_H):
        hh = h0 + tl.arange(0, BLOCK_H)
        h3 = hh[:, None, None].to(tl.int64)
        hm3 = (hh < H)[:, None, None]
        xrow = x_ptr + h3 * sh + t3 * st
        orow = o_ptr + h3 * soh + t3 * sot
        if HALF:
            j3 = jj[None, None, :]
            m = hm3 & tm3 & jm[None, None, :]
            c1 = ROT_OFF + j3
            x1 = tl.load(xrow + c1 * sd, mask=m, other=0.0).to(tl.float32)
            x2 = tl.load(xrow + (c1 + H2) * sd, mask=m, other=0.0).to(tl.float32)
            y1 = x1 * cos - x2 * sin
            y2 = x2 * cos + x1 * sin
            tl.store(orow + c1 * sod, y1.to(o_ptr.dtype.element_ty), mask=m)
            tl.store(orow + (c1 + H2) * sod, y2.to(o_ptr.dtype.element_ty), mask=m)
        else:
            # one contiguous load of the pairs, split into (x1, x2) in registers
            cc = tl.arange(0, 2 * BLOCK_P)
            c3 = cc[None, None, :]
            m = hm3 & tm3 & (c3 < 2 * H2)
            x = tl.load(xrow + (ROT_OFF + c3) * sd, mask=m, other=0.0).to(tl.float32)
            x1, x2 = tl.split(tl.reshape(x, (BLOCK_H, BLOCK_T, BLOCK_P, 2)))
            y1 = x1 * cos - x2 * sin
            y2 = x2 * cos + x1 * sin
            y = tl.reshape(tl.join(y1, y2), (BLOCK_H, BLOCK_T, 2 * BLOCK_P))
            tl.store(orow + (ROT_OFF + c3) * sod, y.to(o_ptr.dtype.element_ty), mask=m)
        if COPY_REST:
            ri = tl.arange(0, BLOCK_REST)
            rc = tl.where(ri < ROT_OFF, ri, ri + 2 * H2)[None, None, :]
            mr = hm3 & tm3 & (ri < N_REST)[None, None, :]
            v = tl.load(x_ptr + h3 * sh + t3 * st + rc * sd, mask=mr, other=0.0)
            tl.store(o_ptr + h3 * soh + t3 * sot + rc * sod, v, mask=mr)


@triton.jit
def _rope_kernel(
    q_ptr, k_ptr, oq_ptr, ok_ptr, pos_ptr, inv_ptr,
    start, T, N_TB, HQ, HK, ROT_OFF, N_REST,
    sqb, sqh, sqt, sqd, skb, skh, skt, skd,
    soqb, soqh, soqt, soqd, sokb, sokh, sokt, sokd,
    spb, spt,
    H2: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_T: tl.constexpr,
    BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_REST: tl.constexpr,
    HAS_K: tl.constexpr, HAS_POS: tl.constexpr, HALF: tl.constexpr,
    INVERSE: tl.constexpr, COPY_REST: tl.constexpr, LIBDEVICE: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    b = pid // N_TB
    tt = (pid % N_TB) * BLOCK_T + tl.arange(0, BLOCK_T)
    tm = tt < T
    if HAS_POS:
        p = tl.load(pos_ptr + b * spb + tt * spt, mask=tm, other=0).to(tl.float64)
    else:
        p = (start + tt).to(tl.float64)
    jj = tl.arange(0, BLOCK_P)
    jm = jj < H2
    angle = p[:, None] * tl.load(inv_ptr + jj, mask=jm, other=0.0)[None, :]  # float64
    if LIBDEVICE:
        cos64 = _libdevice.cos(angle)
        sin64 = _libdevice.sin(angle)
    else:
        cos64 = tl.cos(angle)
        sin64 = tl.sin(angle)
    scale = tl.load(inv_ptr + H2)  # the attention factor, float64, after the frequencies
    cos = (cos64 * scale).to(tl.float32)[None, :, :]
    sin = (sin64 * scale).to(tl.float32)[None, :, :]
    if INVERSE:
        sin = -sin
    _rotate_heads(q_ptr + b * sqb, oq_ptr + b * soqb, HQ, sqh, sqt, sqd, soqh, soqt, soqd,
                  tt, tm, jj, jm, cos, sin, ROT_OFF, N_REST, H2, BLOCK_HQ, BLOCK_T, BLOCK_P,
                  BLOCK_REST, HALF, COPY_REST)
    if HAS_K:
        _rotate_heads(k_ptr + b * skb, ok_ptr + b * sokb, HK, skh, skt, skd, sokh, sokt, sokd,
                      tt, tm, jj, jm, cos, sin, ROT_OFF, N_REST, H2, BLOCK_HK, BLOCK_T, BLOCK_P,
                      BLOCK_REST, HALF, COPY_REST)


def _as4d(x: torch.Tensor):
    """``(B, H, T, D)`` sizes and strides of ``x`` (``(..., T, D)``), or None.

    Two and three dimensions gain leading dimensions of size 1; more than four are merged
    into ``B`` where the strides allow it without a copy.
    """
    n = x.ndim
    if n == 4:
        return tuple(x.shape), tuple(x.stride())
    if n == 3:
        (h, t, d), (sh, st, sd) = x.shape, x.stride()
        return (1, h, t, d), (0, sh, st, sd)
    if n == 2:
        (t, d), (st, sd) = x.shape, x.stride()
        return (1, 1, t, d), (0, 0, st, sd)
    try:
        v = x.view(-1, *x.shape[-3:])
    except RuntimeError:
        return None
    return tuple(v.shape), tuple(v.stride())


def _block(n: int) -> int:
    """The power of two ``>= n`` (a symbolic size is specialised to its value)."""
    return 1 << max(int(n) - 1, 0).bit_length()


def launch_rope(q: torch.Tensor, oq: torch.Tensor, k: torch.Tensor | None,
                ok: torch.Tensor | None, freqs: torch.Tensor,
                positions: torch.Tensor | None, start: int, half: bool, rot_off: int,
                inverse: bool = False, traceable: bool = False) -> bool:
    """Rotate ``q`` into ``oq`` (and ``k`` into ``ok``) in one launch; False if the
    strides cannot be expressed (the caller then takes the torch path).

    ``traceable``: launch through :func:`torch.library.wrap_triton`, as the body of the
    ``triton_op`` operators does, so that a graph traced by ``torch.compile`` records the
    kernel itself (Inductor then launches it from its generated code) and
    fake tensors pass through it (no data pointer is read).  Shapes may then be
    symbolic (``torch.compile`` with dynamic shapes): a symbolic sequence length takes
    the largest tile of tokens, whose mask covers a shorter sequence.

    ``freqs`` is float64 of shape ``(r/2 + 1,)`` on the tensors' device: the inverse
    frequencies, then the attention factor (see :func:`posenc.torch._fused.freq_buffer`); ``positions``
    an integer tensor ``(T,)`` (shared) or ``(B, T)`` (per sample) on that device, or
    None for ``start .. start + T - 1``.  ``oq`` may be ``q`` (in place: the columns that
    are not rotated are then left alone).  Shapes are the caller's to check.
    """
    g = _as4d(q)
    go = _as4d(oq)
    if g is None or go is None:
        return False
    (bq, hq, t, d), sq = g
    soq = go[1]
    if k is not None:
        if ok is None:
            raise ValueError("ok (the output for k) must be given with k")
        gk, gko = _as4d(k), _as4d(ok)
        if gk is None or gko is None:
            return False
        (bk, hk, _, _), sk = gk
        sok = gko[1]
        if bk != bq:
            return False
    else:
        hk, sk, sok = 0, (0, 0, 0, 0), (0, 0, 0, 0)
    if bq * t == 0:
        return True
    h2 = freqs.shape[0] - 1
    block_p = _block(h2)
    # tiles of about TILE_BYTES: tokens first (a head's tokens are contiguous), then heads
    # (all of them at once for a decoding step's single token)
    half_elems = max(block_p, TILE_BYTES // (2 * q.element_size()))
    block_t = max(1, min(BLOCK_T_MAX, half_elems // block_p))
    if isinstance(t, int):  # a shorter sequence takes a smaller tile (a decoding step: 1)
        block_t = min(block_t, _block(t))
    per = max(1, half_elems // (block_p * block_t))
    n_tb = (t + block_t - 1) // block_t
    n_rest = d - 2 * h2
    copy_rest = n_rest > 0 and oq is not q  # in place, the other columns stay
    if positions is None:
        spb = spt = 0
        has_pos = False
    else:
        has_pos = True
        if positions.ndim == 1:
            spb, spt = 0, positions.stride(0)
        else:
            spb, spt = positions.stride()
            if positions.shape[0] == 1:
                spb = 0
    libdevice = q.device.type == "cuda" and _libdevice is not None and not interpreting()
    kernel = torch.library.wrap_triton(_rope_kernel) if traceable else _rope_kernel
    # tensors the kernel does not touch (no k, no positions) are stood in for by freqs,
    # never by q or oq: a traced graph must not see q twice among the kernel's arguments
    kernel[(bq * n_tb,)](
        q, k if k is not None else freqs, oq, ok if ok is not None else freqs,
        positions if positions is not None else freqs, freqs,
        int(start), t, n_tb, hq, hk, rot_off, max(n_rest, 0),
        *sq, *sk, *soq, *sok, spb, spt,
        H2=h2, BLOCK_P=block_p, BLOCK_T=block_t, BLOCK_HQ=min(_block(hq), per),
        BLOCK_HK=min(_block(max(hk, 1)), per), BLOCK_REST=_block(max(n_rest, 1)),
        HAS_K=k is not None, HAS_POS=has_pos, HALF=half, INVERSE=inverse,
        COPY_REST=copy_rest, LIBDEVICE=libdevice,
        num_warps=8 if block_p * block_t * min(_block(max(hq, hk)), per) >= 4096 else 4,
    )
    return True
