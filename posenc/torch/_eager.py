r"""The rotation of RoPE in PyTorch: one formula, and one blocked CPU kernel.

For each pair :math:`(x_1, x_2)` at angle :math:`\theta`, with :math:`c = a\cos\theta`
and :math:`s = a\sin\theta` (:math:`a` the attention factor, 1 for plain RoPE)::

    x1' = x1 c - x2 s
    x2' = x2 c + x1 s

The ``half`` layout pairs feature ``i`` with ``i + r/2``, the ``interleaved`` one ``2i``
with ``2i + 1``.

* :func:`rotate` writes it once, out of place, for both layouts: autograd,
  ``torch.compile``, ``torch.export``, ``torch.func`` transforms, meta tensors, small
  tensors and every device without the Triton kernel;
* :func:`rotate_into` is the CPU kernel without autograd: out of place, in place and
  ``out=``, block by block while a block is in cache, float16/bfloat16 in a float32
  scratch rounded once.

Which of them (or the Triton kernel) rotates a call is decided in
:mod:`posenc.torch._apply`.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import torch


class Tables(NamedTuple):
    """cos and sin of a call, in the compute dtype: ``(seq, r/2)``, or
    ``(batch, 1, seq, r/2)`` for one row of positions per sample; ``cis`` is
    ``cos + i sin`` where a cache holds it (the interleaved layout's CPU kernel)."""

    cos: torch.Tensor
    sin: torch.Tensor
    cis: torch.Tensor | None = None


def compute_dtype(dtype):
    """float32 and float64 are computed in their own precision, float16/bfloat16 in float32."""
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


def functional_mode(*tensors):
    """Whether the call must take :func:`rotate` on tables built by tensor operations.

    True while ``torch.compile`` or ``torch.export`` traces, under a ``torch.func``
    transform or forward-mode AD, under a ``TorchDispatchMode`` and for meta tensors:
    no cache, no ``out=`` kernel, no value read.
    """
    return (torch.compiler.is_compiling() or any(t.is_meta for t in tensors)
            or transformed())


def transformed():
    """Whether a ``torch.func`` transform, forward-mode AD or a ``TorchDispatchMode`` is
    active: the calls whose tensors may not be read, written in place or cached."""
    return (torch._C._are_functorch_transforms_active()
            or torch.autograd.forward_ad._current_level >= 0
            or torch._C._len_torch_dispatch_stack() > 0)


def rotate(x, cos, sin, r, layout, rot_off=0):
    """RoPE of ``x[..., rot_off:rot_off + r]``, out of place; other features pass through.

    Parameters
    ----------
    x : torch.Tensor
        ``(..., seq, d)``, any floating dtype.
    cos, sin : torch.Tensor
        Broadcasting against ``(..., seq, r/2)``, in the compute dtype (float32 for
        float16/bfloat16 ``x``).
    r : int
        The rotated width, even.
    layout : {"half", "interleaved"}
    rot_off : int
        The first rotated feature.

    Returns
    -------
    torch.Tensor
        ``x``'s shape and dtype, rounded once from the compute dtype.
    """
    whole = rot_off == 0 and r == x.shape[-1]
    xr = x if whole else x[..., rot_off:rot_off + r]
    if xr.dtype != cos.dtype:
        xr = xr.to(cos.dtype)
    if layout == "half":
        x1, x2 = xr.chunk(2, dim=-1)
    else:
        x1, x2 = xr.unflatten(-1, (r // 2, 2)).unbind(-1)
    y1 = torch.addcmul(x1 * cos, x2, sin, value=-1)  # x1 c - x2 s
    y2 = torch.addcmul(x2 * cos, x1, sin)  # x2 c + x1 s
    if layout == "half":
        rot = torch.cat((y1, y2), dim=-1)
    else:
        rot = torch.stack((y1, y2), dim=-1).flatten(-2)
    if rot.dtype != x.dtype:
        rot = rot.to(x.dtype)
    if whole:
        return rot
    parts = (x[..., :rot_off], rot, x[..., rot_off + r:])
    return torch.cat([t for t in parts if t.shape[-1]], dim=-1)


# -- the blocked CPU kernel ------------------------------------------------------------------

#: Elements per block: a block of ``x``, of the output and of the scratch stays in a
#: last-level cache while the kernels of the block run over it; larger blocks pay
#: PyTorch's per-operation overhead less often.
_BLOCK = 1 << 19

#: Per-thread scratch, keyed by dtype: allocated once per thread, so that a call makes no
#: fresh allocation (on a CPU each fresh page costs a page fault).
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
            t = torch.empty(max(numel, 3 * _BLOCK // 2), dtype=dtype)
        store[dtype] = t
    return t


def _blocks(n_rows, seq, d):
    """Blocks ``(rows, positions)`` of about ``_BLOCK`` elements covering ``(n_rows, seq)``.

    Whole ``(seq, d)`` slices are grouped while they fit; a longer slice is cut along the
    sequence.
    """
    per_row = seq * d
    if per_row <= _BLOCK:
        step = max(1, _BLOCK // per_row)
        return [(slice(b, b + step), slice(0, seq)) for b in range(0, n_rows, step)]
    step = max(1, _BLOCK // d)
    return [(slice(b, b + 1), slice(s, s + step))
            for b in range(n_rows) for s in range(0, seq, step)]


def _rows(t, seq, d):
    """``t`` viewed as ``(rows, seq, d)`` without a copy, or ``None`` if no view exists."""
    try:
        return t.view(-1, seq, d)
    except RuntimeError:
        return None


def _as_complex_pairs(t):
    """View ``t`` (``(..., r)``, interleaved pairs) as ``(..., r/2)`` complex numbers."""
    return torch.view_as_complex(t.unflatten(-1, (t.shape[-1] // 2, 2)))


def _complex_ok(t):
    try:
        _as_complex_pairs(t)
    except RuntimeError:  # strides or an odd storage offset a complex view cannot express
        return False
    return True


def _pairs_into(x, o, cos, sin, cis, layout, spare):
    """The kernels of one block: rotate ``x`` (``(..., seq, r)``) into ``o``.

    ``o`` is ``x`` or shares no memory with it; ``spare`` is scratch for ``x1`` in place.
    """
    if layout == "interleaved":  # (x1 + i x2) (c + i s): one complex multiply
        xc = _as_complex_pairs(x)
        oc = xc if o is x else _as_complex_pairs(o)
        if o is x and x.shape[-1] == 2:
            # one pair per row: PyTorch's strided complex multiply in place takes another
            # loop than out of place, which can differ in the last bit
            oc.copy_(xc * cis)
        else:
            torch.mul(xc, cis, out=oc)
        return
    h = x.shape[-1] // 2
    x1, x2, o1, o2 = x[..., :h], x[..., h:], o[..., :h], o[..., h:]
    if o is x:  # o1 overwrites x1, which o2 still needs
        x1 = spare[: x1.numel()].view(x1.shape).copy_(x1)
    torch.mul(x1, cos, out=o1)
    o1.addcmul_(x2, sin, value=-1)  # x1 c - x2 s
    torch.mul(x2, cos, out=o2)
    o2.addcmul_(x1, sin)  # x2 c + x1 s


def rotate_into(x, out, tables, r, layout, rot_off=0):
    """Rotate ``x`` into ``out`` on the CPU without autograd; False if it cannot.

    ``out`` is ``x`` itself (in place) or shares no memory with it, and has ``x``'s shape
    and dtype.  Each block of about ``_BLOCK`` elements is rotated while it is in cache:
    float32/float64 directly into ``out``; float16/bfloat16 converted into a float32
    scratch, rotated there and written back with one rounding.  Returns False, having
    written nothing, where ``x`` or ``out`` has strides no ``(rows, seq, d)`` view (or,
    interleaved, no complex view) expresses.
    """
    seq, h = x.shape[-2], r // 2
    if tables.cos.shape != tables.sin.shape or tables.cos.shape[-2:] != (seq, h):
        return False
    if x.numel() == 0:
        return True
    if tables.cos.ndim == 4:  # one row of positions per sample: a sample at a time
        if x.ndim != 4 or out.ndim != 4 or tables.cos.shape[:2] != (x.shape[0], 1):
            return False
        views = [(x[i], out[i], Tables(tables.cos[i, 0], tables.sin[i, 0],
                                       None if tables.cis is None else tables.cis[i, 0]))
                 for i in range(x.shape[0])]
        if not all(_blocked_ok(a, o, r, layout, rot_off) for a, o, _ in views):
            return False
        for a, o, t in views:
            rotate_into(a, o, t, r, layout, rot_off)
        return True
    if tables.cos.ndim != 2 or not _blocked_ok(x, out, r, layout, rot_off):
        return False
    d = x.shape[-1]
    rx, ro = x.view(-1, seq, d), out.view(-1, seq, d)
    inplace = out is x or (out.data_ptr() == x.data_ptr() and out.stride() == x.stride())
    lowp = x.dtype != compute_dtype(x.dtype)
    cos, sin, cis = tables
    if layout == "interleaved" and cis is None:
        cis = torch.complex(cos, sin)
    if layout == "interleaved" and not lowp:  # one kernel, one pass: nothing to block
        blocks, scratch = [(slice(None), slice(None))], None
    else:
        blocks = _blocks(rx.shape[0], seq, d)
        most = rx[blocks[0]].numel()  # the first block is the largest
        scratch = _scratch_tensor(most + most // 2 + 1, compute_dtype(x.dtype))
    cols = slice(rot_off, rot_off + r)
    for b, s in blocks:
        xb, ob = rx[b, s], ro[b, s]
        c, sn = cos[s], sin[s]
        ci = None if cis is None else cis[s]
        if lowp:  # in float32 in place, then the one rounding (the whole width)
            t = scratch[: xb.numel()].view(xb.shape).copy_(xb)
            tr = t[..., cols]
            _pairs_into(tr, tr, c, sn, ci, layout, scratch[t.numel():])
            ob.copy_(t)
            continue
        xr = xb[..., cols]
        _pairs_into(xr, xr if inplace else ob[..., cols], c, sn, ci, layout, scratch)
        if r < d and not inplace:
            if rot_off:
                ob[..., :rot_off].copy_(xb[..., :rot_off])
            if rot_off + r < d:
                ob[..., rot_off + r:].copy_(xb[..., rot_off + r:])
    return True


def _blocked_ok(x, out, r, layout, rot_off):
    """Whether :func:`rotate_into` can view ``x`` and ``out`` block by block."""
    seq, d = x.shape[-2], x.shape[-1]
    rx, ro = _rows(x, seq, d), _rows(out, seq, d)
    if rx is None or ro is None:
        return False
    if layout != "interleaved":
        return True
    if x.dtype != compute_dtype(x.dtype):  # rotated in a contiguous float32 scratch
        return d % 2 == 0 and rot_off % 2 == 0
    cols = slice(rot_off, rot_off + r)
    return _complex_ok(rx[..., cols]) and _complex_ok(ro[..., cols])


# -- out= and in place: what may be written --------------------------------------------------


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


def check_out_tensor(x, out, name, eager):
    """Validate ``out`` for ``x``; return whether ``out`` is ``x`` itself (in place).

    ``name`` is ``"out"`` for ``apply_rope(..., out=)`` and ``"x"`` for
    :func:`apply_rope_`.  The memory and autograd checks need real storage and run only
    eagerly (``eager``); traced and transformed calls compute the whole result before
    it is copied, so no overlap can corrupt it.

    Raises
    ------
    TypeError
        If ``out`` is not a tensor, ``x`` is not floating point, or the dtypes differ.
    ValueError
        If shapes or devices differ, ``out`` has self-overlapping elements, is an
        inference tensor outside inference mode, is a leaf (or a view of one) that
        requires grad, or partially overlaps ``x``.
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
                         "elements in the same order); pass a separate out, or out=x to "
                         "rotate in place")
    return relation == "same"
