r"""The route of :func:`posenc.apply_rope` and :func:`posenc.apply_rope_` for tensors.

:func:`posenc.apply_rope` checks what NumPy and torch share (``base``, ``layout``) and
hands a tensor to :func:`apply_rope_tensor`, which picks one of three paths:

1. **fused** (:mod:`posenc.torch._fused`, the Triton kernel of
   :mod:`posenc.torch._triton`): CUDA tensors of float16, bfloat16 or float32 with
   Triton installed, eagerly and inside graphs traced by ``torch.compile`` or
   ``torch.export`` (where it is the operator ``posenc::rope`` / ``posenc::rope_``);
2. **functional** (:func:`posenc.torch._eager._rotate_functional` on
   :func:`posenc.torch._tables._functional_tables`): other tensors while traced, under
   ``torch.func`` transforms and forward-mode AD, and meta tensors;
3. **eager** (:func:`posenc.torch._eager._rotate_eager`, or
   :func:`posenc.torch._eager._rotate_into` for ``out=`` and in place) on the cached
   tables of :mod:`posenc.torch._tables`: everything else.
"""

from __future__ import annotations

import numpy as np
import torch

from .._validation import _check_positions_shape, check_rotary_dim
from ..rope import _check_x_shape
from . import _fused
from ._eager import (
    _check_out_tensor,
    _functional_mode,
    _rotate_eager,
    _rotate_functional,
    _rotate_into,
)
from ._tables import _functional_tables, _tensor_tables

__all__ = ["apply_rope_tensor"]


def apply_rope_tensor(x, pos, base, layout, rotary_dim, out=None, name="out"):
    """:func:`posenc.apply_rope` of tensor ``x`` (``base`` and ``layout`` checked), into
    ``out`` if given (``name`` is ``"x"`` for :func:`posenc.apply_rope_`, where ``out``
    is ``x``)."""
    if out is None:
        return _apply_rope_torch(x, pos, base, layout, rotary_dim)
    return _apply_rope_torch_into(x, pos, base, layout, rotary_dim, out, name)


def _fused_call(x, pos, base, layout, rotary_dim, inplace):
    """The fused Triton kernel for CUDA tensors (:mod:`posenc.torch._fused`), or None
    where it does not apply (CPU, float64, Triton missing, torch.func transforms)."""
    if x.device.type != "cuda":
        return None
    if not _fused.fused_eligible(x):
        return None
    _check_x_shape(tuple(x.shape))
    if pos is not None:
        shape = tuple(pos.shape) if torch.is_tensor(pos) else np.shape(pos)
        _check_positions_shape(shape, x.shape[-2], "positions")
    r = check_rotary_dim(rotary_dim, x.shape[-1])
    return _fused.apply_rope_fused(x, pos, base, layout, r, inplace)


def _apply_rope_torch(x, pos, base, layout, rotary_dim):
    fused = _fused_call(x, pos, base, layout, rotary_dim, False)
    if fused is not None:
        return fused
    if _functional_mode(x):
        r, cos, sin = _functional_tables(x, pos, base, rotary_dim)
        return _rotate_functional(x, cos, sin, r, layout)
    r, tables = _tensor_tables(x, pos, base, rotary_dim, layout)
    return _rotate_eager(x, tables, r, layout)


def _apply_rope_torch_into(x, pos, base, layout, rotary_dim, out, name):
    """``apply_rope`` of a tensor written into ``out`` (which may be ``x``); returns ``out``."""
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor when x is one, got {type(out).__name__}")
    functional = _functional_mode(x) or _functional_mode(out)
    inplace = _check_out_tensor(x, out, name, eager=not functional)
    if inplace and not (torch.is_grad_enabled() and x.requires_grad):
        if _fused_call(x, pos, base, layout, rotary_dim, True) is not None:
            return out  # x rotated in place: the elements of out
    if functional:  # traced, transformed, meta: compute, then one copy into out
        r, cos, sin = _functional_tables(x, pos, base, rotary_dim)
        return out.copy_(_rotate_functional(x, cos, sin, r, layout))
    if torch.is_grad_enabled() and (x.requires_grad or out.requires_grad):
        # autograd: the differentiable formula, then a recorded copy into out
        return out.copy_(_apply_rope_torch(x, pos, base, layout, rotary_dim))
    r, tables = _tensor_tables(x, pos, base, rotary_dim, layout)
    _rotate_into(out if inplace else x, out, tables, r, layout, inplace)
    return out

