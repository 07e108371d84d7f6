r"""The one route of posenc's torch RoPE: which code rotates a call.

:func:`posenc.apply_rope`, :func:`posenc.apply_rope_`,
:func:`posenc.torch.compiled_apply_rope` and :class:`posenc.torch.RotaryEmbedding` all
call :func:`rope`, which picks one of three implementations:

1. the Triton kernel (:mod:`posenc.torch._fused`): float16, bfloat16 and float32 CUDA
   tensors with Triton installed, eagerly and traced (not under ``torch.func``
   transforms, whose batching the kernel does not have);
2. the formula :func:`posenc.torch._eager.rotate`: traced, transformed and meta calls
   (tables from the positions by tensor operations), autograd, small tensors (a
   decoding step), other devices, and ``compiled=True`` (the formula compiled);
3. the CPU kernel :func:`posenc.torch._eager.rotate_into`: everything else, out of
   place, in place and ``out=`` alike.

Where the tables come from is the caller's: a *source* object with ``eager_tables``,
``traced_tables``, ``kernel_args`` and ``static`` (``posenc.torch._tables.PlainRope``
for :func:`posenc.apply_rope`; the module itself for :class:`RotaryEmbedding`).
"""

from __future__ import annotations

import torch

from .._validation import check_rotary_dim
from . import _fused
from ._eager import (
    Tables,
    check_out_tensor,
    compute_dtype,
    functional_mode,
    rotate,
    rotate_into,
    transformed,
)
from ._tables import PlainRope

__all__ = ["apply_rope_tensor", "rope", "rotate_tables"]

#: Below this many elements (a decoding step) the formula's few kernels are quicker than
#: the blocked kernel's Python.
_SMALL = 1 << 15

#: The compiled formula, one per layout (``compiled=True``).
_COMPILED: dict = {}


def _compiled(layout):
    fn = _COMPILED.get(layout)
    if fn is None:
        fn = _COMPILED[layout] = torch.compile(rotate, dynamic=True)
    return fn


def _uses_kernel(xs, backend, compiled, static):
    """Whether the Triton kernel rotates this call."""
    if backend == "torch" or compiled:
        return False
    if backend == "auto" and not (_fused.available() and all(x.is_cuda for x in xs)):
        return False
    if any(x.dtype not in _fused.KERNEL_DTYPES for x in xs):
        return False  # float64: the torch formula in float64
    if backend == "triton" and not all(_fused.runs_here(x) for x in xs):
        raise ValueError(
            "backend='triton' runs on CUDA tensors (or on CPU tensors under Triton's "
            f"interpreter, TRITON_INTERPRET=1), got tensors on {[str(x.device) for x in xs]}")
    if torch.compiler.is_compiling():
        return static
    return not transformed()


def rope(xs, offs, positions, src, r, layout, *, outs=None, backend="auto",
         compiled=False):
    """Rotate each tensor of ``xs`` at ``positions``; the one dispatcher.

    Parameters
    ----------
    xs : tuple of torch.Tensor
        Checked floating tensors ``(..., seq, d)`` of one sequence length (``q`` and
        ``k``, or one ``x``).
    offs : tuple of int
        The first rotated feature of each.
    positions
        None, ``(seq,)`` or ``(batch, seq)`` (shapes checked), read by ``src``.
    src
        The tables' source (see the module docstring).
    r : int
        The rotated width.
    layout : {"half", "interleaved"}
    outs : tuple of torch.Tensor, optional
        Checked outputs, each its ``x`` itself (in place) or sharing no memory with it.
    backend : {"auto", "triton", "torch"}
    compiled : bool
        Rotate eager calls with the compiled formula.

    Returns
    -------
    tuple of torch.Tensor
        The rotated tensors (``outs`` where given).
    """
    x0 = xs[0]
    seq = x0.shape[-2]
    if _uses_kernel(xs, backend, compiled, src.static):
        pos, start, freqs = src.kernel_args(positions, seq, x0.device)
        return _fused.launch(xs, offs, outs, pos, start, freqs, layout == "half")
    dtype = torch.float64 if any(x.dtype == torch.float64 for x in xs) else torch.float32
    traced = functional_mode(*xs, *(outs or ()))
    if traced:
        tables = Tables(*src.traced_tables(positions, seq, x0.device, dtype))
    else:
        tables = src.eager_tables(positions, seq, x0.device, dtype, layout)
    return tuple(rotate_tables(x, tables, r, layout, off, None if outs is None else outs[i],
                               traced=traced, compiled=compiled)
                 for i, (x, off) in enumerate(zip(xs, offs)))


def rotate_tables(x, tables, r, layout, rot_off=0, out=None, *, traced=None,
                  compiled=False):
    """Rotate ``x`` by ready tables: the blocked CPU kernel or the formula.

    ``tables`` are :class:`~posenc.torch._eager.Tables` (or a ``(cos, sin)`` pair) in
    float32 or float64; ``out`` as for :func:`rope`.  Returns the result (``out`` if
    given).
    """
    if traced is None:
        traced = functional_mode(x) or (out is not None and functional_mode(out))
    if not isinstance(tables, Tables):
        tables = Tables(*tables)
    if (x.numel() >= _SMALL and not (traced or compiled) and x.device.type == "cpu"
            and not (torch.is_grad_enabled() and (
                x.requires_grad or tables.cos.requires_grad or tables.sin.requires_grad
                or (out is not None and out.requires_grad)))):
        tables = _in_compute(tables, x.dtype)
        fresh = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        if rotate_into(x, fresh if out is None else out, tables, r, layout, rot_off):
            return fresh if out is None else out
        # strides or an odd offset no view expresses: the same kernel on a fresh copy
        if rotate_into(x.clone(memory_format=torch.contiguous_format), fresh, tables, r,
                       layout, rot_off):
            return fresh if out is None else out.copy_(fresh)
    cos, sin, _ = _in_compute(tables, x.dtype, x.device)
    fn = _compiled(layout) if compiled and not traced else rotate
    y = fn(x, cos, sin, r, layout, rot_off)
    return y if out is None else out.copy_(y)


def _in_compute(tables, dtype, device=None):
    """``tables`` in the compute dtype of ``dtype`` (a no-op where they are)."""
    want = compute_dtype(dtype)
    cos, sin, cis = tables
    if cos.dtype == want and (device is None or cos.device == device):
        return tables
    cis = None if cis is None else cis.to(device=device, dtype=cis.dtype if want ==
                                          torch.float64 else torch.complex64)
    return Tables(cos.to(device=device, dtype=want), sin.to(device=device, dtype=want), cis)


def apply_rope_tensor(x, pos, base, layout, rotary_dim, out=None, name="out",
                      compiled=False):
    """:func:`posenc.apply_rope` of tensor ``x`` (``base`` and ``layout`` checked), into
    ``out`` if given (``name`` is ``"x"`` for :func:`posenc.apply_rope_`, where ``out``
    is ``x``)."""
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    from ..rope import _check_x_shape

    _check_x_shape(tuple(x.shape))
    r = check_rotary_dim(rotary_dim, x.shape[-1])
    outs = None
    if out is not None:
        eager = not (functional_mode(x) or (torch.is_tensor(out) and functional_mode(out)))
        inplace = check_out_tensor(x, out, name, eager)
        outs = (x if inplace else out,)
        if inplace and torch.is_grad_enabled() and x.requires_grad:
            # autograd: the formula out of place, then a recorded copy into x
            return x.copy_(rope((x,), (0,), pos, PlainRope(r, base), r, layout,
                                compiled=compiled)[0])
    return rope((x,), (0,), pos, PlainRope(r, base), r, layout, outs=outs,
                compiled=compiled)[0]
