r"""posenc's torch kernels for RoPE: the eager fast path, the ``out=``/in-place path, and
the functional formula.

* eager (:func:`_rotate_eager`): the interleaved layout is one complex multiply, the half
  layout three kernels into one preallocated output; float16/bfloat16 on the CPU are
  rotated block by block in a float32 scratch and rounded once
  (:func:`_rotate_lowp_blocked`);
* into a given tensor (:func:`_rotate_into`): ``apply_rope(x, out=...)`` and
  :func:`posenc.apply_rope_`, blocked on the CPU so that each block stays in cache;
* functional (:func:`_rotate_functional`): one out-of-place expression per layout, which
  ``torch.compile`` fuses into one loop and ``torch.func`` transforms can batch and
  differentiate; :mod:`posenc.torch._fused` computes its reference formula with it too.

Tables come from :mod:`posenc.torch._tables`; which path a call takes is decided in
:mod:`posenc.torch._apply`.
"""

from __future__ import annotations

import threading

import torch

from ._tables import _compute_dtype


def _functional_mode(x):
    """Whether ``x`` must take the functional formula instead of the cached, ``out=`` path.

    True while ``torch.compile`` or ``torch.export`` traces (no Python cache, no lock, no
    data-dependent branch in a graph), under a ``torch.func`` transform (``vmap``,
    ``jvp``, ``grad``: no batching rule or forward derivative for ``out=`` kernels and
    in-place updates of fresh buffers), under forward-mode AD (dual tensors), under a
    ``TorchDispatchMode`` (fake tensors must not enter the cache), and for meta tensors
    (no values).  In plain eager code it costs a few attribute reads.
    """
    return torch.compiler.is_compiling() or x.is_meta or _transformed()


def _transformed():
    """Whether a ``torch.func`` transform, forward-mode AD or a ``TorchDispatchMode`` is
    active: the calls whose tensors may not be read, written in place or cached."""
    return (torch._C._are_functorch_transforms_active()
            or torch.autograd.forward_ad._current_level >= 0
            or torch._C._len_torch_dispatch_stack() > 0)


def _as_complex_pairs(t, r):
    """View ``t[..., :r]`` as ``(..., r/2)`` complex numbers (interleaved pairs), no copy."""
    return torch.view_as_complex(t[..., :r].unflatten(-1, (r // 2, 2)))


def _rotate_interleaved_torch(x, cis, r):
    """Interleaved layout: one complex multiply, ``(x1 + i x2) * e^{i m theta}``."""
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
    ``tables`` (:class:`posenc.torch._tables._HalfTables`), two kernels over the whole width after swapping
    the halves into a scratch; given a bare ``(cos, sin)``, two per half.  Elsewhere
    ``out = x * cos`` over both halves at once, then the two ``addcmul_`` in place.
    """
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

#: Elements per block of the blocked float16/bfloat16 path (2 MiB of float32 scratch;
#: smaller blocks pay PyTorch's per-operation overhead more often; the bench chose it).
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
    seq, d = x.shape[-2], x.shape[-1]
    rows = x.reshape(-1, seq, d)  # a view, or one copy for strides no view expresses
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    _rotate_into(rows, out, tables, r, layout, False, block=_LOWP_BLOCK)
    return out.view(x.shape)


def _rotate_eager(x, tables, r, layout):
    """Rotate the first ``r`` features of ``x`` with ready tables, keeping its dtype: the
    fast eager kernels (the caller has ruled out :func:`_functional_mode`).

    ``tables`` are in ``_compute_dtype(x.dtype)`` on ``x.device``: the complex
    ``e^{i m theta}`` of shape ``(seq, r/2)`` for the interleaved layout, ``(cos, sin)``
    for the half layout.  float16/bfloat16 are rotated in float32 and rounded once (on
    the CPU block by block, see :func:`_rotate_lowp_blocked`).
    """
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


def _rotate_functional(x, cos, sin, r, layout, rot_off=0):
    """Rotate with one out-of-place expression per layout (no ``out=``, no in-place).

    What ``torch.compile`` fuses into one loop, and what ``vmap``, ``jvp`` and forward-mode
    AD can batch and differentiate.  The features ``x[..., rot_off:rot_off + r]`` are
    rotated and the others pass through.  ``cos`` and ``sin`` broadcast against
    ``x[..., :r/2]`` and are in the compute dtype; ``x`` is converted to it, and the result
    rounded once to ``x.dtype``.  The one formula of the torch paths: the traced and
    transformed :func:`posenc.apply_rope`, :class:`posenc.torch.RotaryEmbedding`, and the
    reference of the custom operators (:func:`posenc.torch._fused._reference`).
    """
    h = r // 2
    xr = x[..., rot_off:rot_off + r].to(cos.dtype)
    if layout == "half":
        x1, x2 = xr[..., :h], xr[..., h:]
        rot = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    else:
        x1, x2 = xr.unflatten(-1, (h, 2)).unbind(-1)
        rot = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    rot = rot.to(x.dtype)
    if r == x.shape[-1]:
        return rot
    if not rot_off:
        return torch.cat((rot, x[..., r:]), dim=-1)
    parts = (x[..., :rot_off], rot, x[..., rot_off + r:])
    return torch.cat([t for t in parts if t.shape[-1]], dim=-1)


#: Elements per block of the in-place/``out=`` paths: a block of ``x``, of ``out`` and of
#: the scratch (about 6 MiB for float32) stays in a last-level cache while the three or
#: four kernels of the block run over it; fewer, larger blocks pay PyTorch's
#: per-operation overhead less often, as for ``_LOWP_BLOCK``.
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
      rotated while it is in cache.  With the cached tables (:class:`~posenc.torch._tables._HalfTables`): the
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

