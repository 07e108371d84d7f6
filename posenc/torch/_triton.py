r"""The fused RoPE kernel (Triton): queries and keys in one launch.

One program rotates a tile of a few heads (of ``q``, or of ``k``) at a block of tokens of
one sample; the programs of one block of tokens cover every head of both tensors, so one
launch rotates ``q`` and ``k``.  A program reads its tokens' positions and forms the
angles ``position * inv_freq`` in float64 from posenc's float64 frequencies.  Their cosine
and sine are taken either in float64 (``trig`` 64), multiplied by the attention factor
and rounded once to float32 (exactly the values of posenc's float64-built tables), or
(``trig`` 32, the default) from the angle reduced modulo 2 pi in float64, whose float32
part goes through float32 cosine and sine and whose remainder enters as a first-order
correction: a few float64 operations per angle instead of some eighty, within a few
float32 roundings of the float64 values.  No table is read or cached, so any position that
fits in int64 works, no host synchronisation is needed to check positions against a
table, and memory is that of the input.

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

try:  # the precise cosine and sine on NVIDIA GPUs (float64 and float32)
    # imported as functions, not as a module: Inductor, which copies the kernel's source
    # into its generated code, re-imports the triton functions a kernel names but not
    # modules (a module global is undefined there)
    from triton.language.extra.libdevice import cos as _dev_cos, sin as _dev_sin
    _LIBDEVICE = True
except ImportError:  # pragma: no cover - older Triton
    _dev_cos = _dev_sin = None
    _LIBDEVICE = False

__all__ = ["interpreting", "launch_rope"]

#: The launch configuration for each element size (bytes): ``tile``, the bytes of ``x`` one
#: program rotates (its rotated columns); ``heads``, the most heads a tile spans (the rest
#: of the tile is tokens, so that the angles one program computes serve ``heads`` heads);
#: ``trig``, 64 for the cosine and sine in float64 (libdevice), 32 for the angle reduced
#: modulo 2 pi in float64 and its cosine and sine taken in float32 with the reduction's
#: remainder as a first-order correction (a few float64 operations per angle instead of
#: some eighty); ``warps``, the warps of a program (None: 4, or 8 for tiles of 8,192
#: elements and more).  Chosen by benchmarks/gpu.py's sweep (benchmarks/results-gpu.json
#: records the configuration and the device it measured, and a test checks that it is
#: this one).
CONFIG: dict[int, dict] = {
    2: {"tile": 4096, "heads": 8, "trig": 32, "warps": 2},
    4: {"tile": 8192, "heads": 16, "trig": 32, "warps": 2},
}

#: The configurations benchmarks/gpu.py's sweep times before it chooses :data:`CONFIG`
#: (tests/torch/test_fused.py runs every one of them against the float64 reference).
SWEEP = tuple(
    [{"tile": tile, "heads": heads, "trig": 32, "warps": None}
     for tile in (4096, 8192, 16384) for heads in (4, 8, 16)]
    + [{"tile": 8192, "heads": 8, "trig": 64, "warps": None},
       {"tile": 8192, "heads": 8, "trig": 64, "warps": 2}]
    + [{"tile": 8192, "heads": 8, "trig": 32, "warps": w} for w in (1, 2, 8)]
    + [{"tile": 4096, "heads": 8, "trig": 32, "warps": w} for w in (1, 2)]
    + [{"tile": 16384, "heads": 8, "trig": 32, "warps": 2},
       {"tile": 8192, "heads": 16, "trig": 32, "warps": 2}])


def interpreting() -> bool:
    """Whether Triton runs kernels in its interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@triton.jit
def _rotate_tile(x_ptr, o_ptr, H, h0, sh, st, sd, soh, sot, sod, tt, tm, cos, sin, jj, jm,
                 ROT_OFF, N_REST, H2: tl.constexpr, BLOCK_H: tl.constexpr,
                 BLOCK_T: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_REST: tl.constexpr,
                 HALF: tl.constexpr, COPY_REST: tl.constexpr):
    """Rotate heads ``h0 .. h0 + BLOCK_H - 1`` (those below ``H``) at the tokens ``tt``
    by ``cos`` and ``sin`` (``(BLOCK_T, BLOCK_P)``, float32).

    (Only ``tl`` is used here: a helper that reads module globals fails to build when
    Inductor copies the kernel into its generated code.)
    """
    hh = h0 + tl.arange(0, BLOCK_H)
    h3 = hh[:, None, None].to(tl.int64)
    hm3 = (hh < H)[:, None, None]
    t3 = tt[:, None][None, :, :]
    tm3 = tm[:, None][None, :, :]
    xrow = x_ptr + h3 * sh + t3 * st
    orow = o_ptr + h3 * soh + t3 * sot
    if HALF:
        j3 = jj[None, None, :]
        m = hm3 & tm3 & jm[None, None, :]
        c1 = ROT_OFF + j3
        x1 = tl.load(xrow + c1 * sd, mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(xrow + (c1 + H2) * sd, mask=m, other=0.0).to(tl.float32)
        cos = cos[None, :, :]
        sin = sin[None, :, :]
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
        cos = cos[None, :, :]
        sin = sin[None, :, :]
        x1, x2 = tl.split(tl.reshape(x, (BLOCK_H, BLOCK_T, BLOCK_P, 2)))
        y1 = x1 * cos - x2 * sin
        y2 = x2 * cos + x1 * sin
        y = tl.reshape(tl.join(y1, y2), (BLOCK_H, BLOCK_T, 2 * BLOCK_P))
        tl.store(orow + (ROT_OFF + c3) * sod, y.to(o_ptr.dtype.element_ty), mask=m)
    if COPY_REST:
        ri = tl.arange(0, BLOCK_REST)
        rc = tl.where(ri < ROT_OFF, ri, ri + 2 * H2)[None, None, :]
        mr = hm3 & tm3 & (ri < N_REST)[None, None, :]
        v = tl.load(xrow + rc * sd, mask=mr, other=0.0)
        tl.store(orow + rc * sod, v, mask=mr)


@triton.jit
def _rope_kernel(
    q_ptr, k_ptr, oq_ptr, ok_ptr, pos_ptr, inv_ptr,
    start, T, N_TB, N_GQ, N_G, HQ, HK, ROT_OFF, N_REST,
    sqb, sqh, sqt, sqd, skb, skh, skt, skd,
    soqb, soqh, soqt, soqd, sokb, sokh, sokt, sokd,
    spb, spt,
    H2: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_T: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_REST: tl.constexpr,
    HAS_POS: tl.constexpr, HALF: tl.constexpr,
    INVERSE: tl.constexpr, COPY_REST: tl.constexpr, TRIG: tl.constexpr,
    LIBDEVICE: tl.constexpr,
):
    # one program: a block of BLOCK_T tokens of one sample and a group of BLOCK_H heads of
    # q (groups 0 .. N_GQ - 1) or of k (the groups after); consecutive programs take the
    # groups of one block of tokens
    pid = tl.program_id(0).to(tl.int64)
    g = pid % N_G
    bt = pid // N_G
    b = bt // N_TB
    tt = (bt % N_TB) * BLOCK_T + tl.arange(0, BLOCK_T)
    tm = tt < T
    if HAS_POS:
        p = tl.load(pos_ptr + b * spb + tt * spt, mask=tm, other=0).to(tl.float64)
    else:
        p = (start + tt).to(tl.float64)
    jj = tl.arange(0, BLOCK_P)
    jm = jj < H2
    angle = p[:, None] * tl.load(inv_ptr + jj, mask=jm, other=0.0)[None, :]  # float64
    scale = tl.load(inv_ptr + H2)  # the attention factor, float64, after the frequencies
    if TRIG == 64:
        if LIBDEVICE:
            c64 = _dev_cos(angle)
            s64 = _dev_sin(angle)
        else:
            c64 = tl.cos(angle)
            s64 = tl.sin(angle)
        cos = (c64 * scale).to(tl.float32)
        sin = (s64 * scale).to(tl.float32)
    else:
        # r = angle - 2 pi k in float64, 2 pi as 6.283185307179586 + 2.4492935982947064e-16
        # (float64 constants made by tl.full: a bare Python float would be float32), twice:
        # the second round takes back what k times the low part adds for angles past 2**53.
        # r is then exact to about 1e-16 rad at any int64 position, and
        # cos r = cos rh - sin rh * rl, sin r = sin rh + cos rh * rl with rh = float32(r)
        two_pi_hi = tl.full([], 6.283185307179586, tl.float64)
        two_pi_lo = tl.full([], 2.4492935982947064e-16, tl.float64)
        inv_two_pi = tl.full([], 0.15915494309189535, tl.float64)
        half64 = tl.full([], 0.5, tl.float64)
        kk = tl.floor(angle * inv_two_pi + half64)
        r = tl.fma(-kk, two_pi_hi, angle) - kk * two_pi_lo
        kk = tl.floor(r * inv_two_pi + half64)
        r = tl.fma(-kk, two_pi_hi, r)
        rh = r.to(tl.float32)
        rl = (r - rh.to(tl.float64)).to(tl.float32)
        if LIBDEVICE:
            c = _dev_cos(rh)
            s = _dev_sin(rh)
        else:
            c = tl.cos(rh)
            s = tl.sin(rh)
        sc = scale.to(tl.float32)
        cos = (c - s * rl) * sc
        sin = (s + c * rl) * sc
    if INVERSE:
        sin = -sin
    if g < N_GQ:
        _rotate_tile(q_ptr + b * sqb, oq_ptr + b * soqb, HQ, g * BLOCK_H, sqh, sqt, sqd,
                     soqh, soqt, soqd, tt, tm, cos, sin, jj, jm, ROT_OFF, N_REST, H2,
                     BLOCK_H, BLOCK_T, BLOCK_P, BLOCK_REST, HALF, COPY_REST)
    else:
        _rotate_tile(k_ptr + b * skb, ok_ptr + b * sokb, HK, (g - N_GQ) * BLOCK_H, skh, skt,
                     skd, sokh, sokt, sokd, tt, tm, cos, sin, jj, jm, ROT_OFF, N_REST, H2,
                     BLOCK_H, BLOCK_T, BLOCK_P, BLOCK_REST, HALF, COPY_REST)


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


def plan(hq, hk, t, block_p, element_size, cfg=None):
    """``(BLOCK_T, BLOCK_H, token blocks, q head groups, all head groups, warps)`` of a
    launch: ``hq`` and ``hk`` heads (``hk`` 0 without k), ``t`` tokens (an int, or a
    symbolic size: the largest tile of tokens), ``block_p`` pairs (a power of two),
    ``element_size`` bytes; ``cfg`` defaults to :data:`CONFIG` for the element size."""
    cfg = cfg or CONFIG.get(element_size, CONFIG[4])
    tile: int = cfg["tile"]
    most_heads: int = cfg["heads"]
    # a tile of about ``tile`` bytes: up to ``most_heads`` heads (all of them for a
    # decoding step's single token), the rest tokens
    rows = max(1, tile // (2 * block_p * element_size))
    heads = _block(max(hq, hk))
    block_t = max(1, rows // min(most_heads, heads))
    if isinstance(t, int):  # a shorter sequence takes a smaller tile (a decoding step: 1)
        block_t = min(block_t, _block(t))
    block_h = min(heads, max(1, rows // block_t))
    n_tb = (t + block_t - 1) // block_t
    n_gq = (hq + block_h - 1) // block_h
    n_g = n_gq + (hk + block_h - 1) // block_h
    warps = cfg["warps"] or (8 if block_p * block_t * block_h >= 8192 else 4)
    return block_t, block_h, n_tb, n_gq, n_g, warps


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
    block_t, block_h, n_tb, n_gq, n_g, warps = plan(hq, hk, t, block_p, q.element_size())
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
    libdevice = q.device.type == "cuda" and _LIBDEVICE and not interpreting()
    kernel = torch.library.wrap_triton(_rope_kernel) if traceable else _rope_kernel
    # tensors the kernel does not touch (no k, no positions) are stood in for by freqs,
    # never by q or oq: a traced graph must not see q twice among the kernel's arguments
    kernel[(bq * n_tb * n_g,)](
        q, k if k is not None else freqs, oq, ok if ok is not None else freqs,
        positions if positions is not None else freqs, freqs,
        int(start), t, n_tb, n_gq, n_g, hq, hk, rot_off, max(n_rest, 0),
        *sq, *sk, *soq, *sok, spb, spt,
        H2=h2, BLOCK_P=block_p, BLOCK_T=block_t, BLOCK_H=block_h,
        BLOCK_REST=_block(max(n_rest, 1)), HAS_POS=has_pos, HALF=half, INVERSE=inverse,
        COPY_REST=copy_rest, TRIG=CONFIG.get(q.element_size(), CONFIG[4])["trig"], LIBDEVICE=libdevice, num_warps=warps,
    )
    return True
