r"""The fused path: the Triton kernel as PyTorch custom operators, and when to use it.

Operators registered with :func:`torch.library.triton_op` (with
:func:`torch.library.custom_op` and a fake kernel where Triton is not installed): one
call for autograd, Dynamo and ``torch.export`` (which keeps them in the exported
program), never a trace of the float64 angle arithmetic into the compiler's loops.  When
AOTAutograd functionalises a compiled graph, a ``triton_op`` is replaced by its body, in
which the kernel is launched through :func:`torch.library.wrap_triton`: Inductor receives
the kernel itself and launches it from its generated code, with no call back into
Python.  Under Triton's interpreter (``TRITON_INTERPRET=1``: CPU tensors in the tests) a
kernel cannot be traced, and a trace records the reference formula instead.

``posenc::rope(x, positions, start, freqs, half, rot_off, inverse) -> y``
    one tensor, out of place;
``posenc::rope_qk(q, k, positions, start, freqs, half, rot_off, inverse) -> (q', k')``
    queries and keys at the same positions in one launch, out of place;
``posenc::rope_(x, ...)``, ``posenc::rope_qk_(q, k, ...)``
    the same, in place (no autograd: PyTorch's rule for in-place custom operators).

``freqs`` is the float64 buffer of :func:`freq_buffer` (posenc's
frequencies, then the attention factor).  The backward of a rotation is the rotation by the
opposite angle: the same kernel with ``inverse`` flipped, so training runs it too.  On a
device the kernel cannot run on (a CPU without Triton's interpreter) the operators compute
the same formula with tensor operations, so a program that holds them stays valid anywhere.

Eager calls that need no autograd skip the dispatcher and launch the kernel directly
(:func:`rope_qk`), which keeps a decoding step's Python overhead to a few microseconds.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np
import torch

from ._eager import compute_dtype, rotate

__all__ = ["KERNEL_DTYPES", "available", "freq_buffer", "launch", "runs_here"]

#: The dtypes the kernel rotates (in float32); float64 takes the torch formula.
KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


#: Whether Triton can be imported (the ``posenc[triton]`` extra); looked up once.
_AVAILABLE = importlib.util.find_spec("triton") is not None

#: Triton's interpreter (``TRITON_INTERPRET=1``, read once): kernels run on CPU tensors.
_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def available() -> bool:
    """Whether Triton can be imported (the ``posenc[triton]`` extra)."""
    return _AVAILABLE


@functools.cache
def _kernels():
    from . import _triton

    return _triton


def freq_buffer(inv_freq: torch.Tensor, attention_factor: float,
                device: torch.device | str = "cpu") -> torch.Tensor:
    """The operators' float64 frequency buffer: ``inv_freq`` (``(r/2,)``) then the
    attention factor, on ``device`` (the factor stays float64: a Python float reaches a
    Triton kernel rounded to float32)."""
    buf = torch.empty(inv_freq.shape[0] + 1, dtype=torch.float64, device="cpu")
    buf[:-1] = inv_freq
    buf[-1] = attention_factor
    return buf.to(device)


def runs_here(t: torch.Tensor) -> bool:
    """Whether the kernel can run on ``t``'s device: CUDA, or any device under Triton's
    interpreter (``TRITON_INTERPRET=1``)."""
    if not available():
        return False
    if t.device.type == "cuda":
        return True
    return t.device.type == "cpu" and _INTERPRET


def _reference(x, positions, start, freqs, half, rot_off, inverse):
    """The operators' formula with tensor operations, for devices the kernel cannot run on:
    cos and sin per (position, pair) from float64 angles times the attention factor, then
    the rotation of :func:`posenc.torch._eager.rotate` (float32 arithmetic for
    float16/bfloat16/float32, one rounding)."""
    from ._tables import cos_sin64

    h = freqs.shape[0] - 1
    seq = x.shape[-2]
    if positions is None:
        p = torch.arange(start, start + seq, dtype=torch.float64, device=x.device)
    else:
        p = positions.to(device=x.device, dtype=torch.float64)
    freqs = freqs.to(x.device)
    cos, sin = cos_sin64(p, freqs[:h], freqs[h], compute_dtype(x.dtype))
    if inverse:
        sin = -sin
    if positions is not None and positions.ndim == 2 and x.ndim >= 3:
        cos, sin = cos.unsqueeze(-3), sin.unsqueeze(-3)  # (B, 1, T, h) against (B, H, T, h)
    return rotate(x, cos, sin, 2 * h, "half" if half else "interleaved", rot_off)


def _launch(q, oq, k, ok, positions, start, freqs, half, rot_off, inverse, traceable=False):
    """Run the kernel; False where it cannot (strides, device).

    ``traceable``: through :func:`torch.library.wrap_triton` (the operators' bodies).
    Under Triton's interpreter a kernel cannot be traced (it reads memory): tensors that
    are not plain tensors (the fake and functional tensors of a trace)
    take the reference formula there.
    """
    if not (runs_here(q) and q.dtype in KERNEL_DTYPES
            and (k is None or k.dtype in KERNEL_DTYPES)):
        return False
    if _INTERPRET and type(q) is not torch.Tensor:  # noqa: E721 - subclasses: traced
        return False
    return _kernels().launch_rope(q, oq, k, ok, freqs, positions, start, half, rot_off,
                                  inverse, traceable)


# -- the operators ------------------------------------------------------------------------


def _operator(name, mutates_args, fake):
    """Register ``name`` as a :func:`torch.library.triton_op` where Triton is installed, a
    :func:`torch.library.custom_op` with the fake kernel ``fake`` where it is not.

    A ``triton_op`` is one opaque operator for autograd, ``torch.export`` (which keeps it
    in the exported program) and Dynamo; when AOTAutograd functionalises a compiled graph
    it is replaced by its body, so the graph Inductor receives holds the Triton kernel
    itself (a ``triton_kernel_wrapper_functional`` node) and Inductor launches it from its
    own generated code, without a call back into this module's Python.  Its body is also
    its fake kernel: with fake tensors the launch records shapes only.
    """
    def register(fn):
        if _AVAILABLE:
            return torch.library.triton_op(name, mutates_args=mutates_args)(fn)
        op = torch.library.custom_op(name, mutates_args=mutates_args)(fn)
        op.register_fake(fake)
        return op

    return register


def _fake_one(x, *args):
    return torch.empty_like(x)


def _fake_qk(q, k, *args):
    return torch.empty_like(q), torch.empty_like(k)


def _fake_inplace(*args):
    return None


@_operator("posenc::rope", (), _fake_one)
def _rope_op(x: torch.Tensor, positions: torch.Tensor | None, start: int,
             freqs: torch.Tensor, half: bool, rot_off: int,
             inverse: bool) -> torch.Tensor:
    out = torch.empty_like(x)
    if _launch(x, out, None, None, positions, start, freqs, half, rot_off, inverse, True):
        return out
    return _reference(x, positions, start, freqs, half, rot_off, inverse)


@_operator("posenc::rope_qk", (), _fake_qk)
def _rope_qk_op(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None, start: int,
                freqs: torch.Tensor, half: bool, rot_off: int,
                inverse: bool) -> tuple[torch.Tensor, torch.Tensor]:
    oq, ok = torch.empty_like(q), torch.empty_like(k)
    if _launch(q, oq, k, ok, positions, start, freqs, half, rot_off, inverse, True):
        return oq, ok
    return (_reference(q, positions, start, freqs, half, rot_off, inverse),
            _reference(k, positions, start, freqs, half, rot_off, inverse))


@_operator("posenc::rope_qk_", ("q", "k"), _fake_inplace)
def _rope_qk_inplace_op(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None,
                        start: int, freqs: torch.Tensor, half: bool, rot_off: int,
                        inverse: bool) -> None:
    if not _launch(q, q, k, k, positions, start, freqs, half, rot_off, inverse, True):
        q.copy_(_reference(q, positions, start, freqs, half, rot_off, inverse))
        k.copy_(_reference(k, positions, start, freqs, half, rot_off, inverse))


@_operator("posenc::rope_", ("x",), _fake_inplace)
def _rope_inplace_op(x: torch.Tensor, positions: torch.Tensor | None, start: int,
                     freqs: torch.Tensor, half: bool, rot_off: int, inverse: bool) -> None:
    if not _launch(x, x, None, None, positions, start, freqs, half, rot_off, inverse, True):
        x.copy_(_reference(x, positions, start, freqs, half, rot_off, inverse))


def _setup(ctx, inputs, output):
    positions, start, freqs, half, rot_off, inverse = inputs[-6:]
    ctx.save_for_backward(positions, freqs)  # integer positions carry no gradient
    ctx.args = (start, half, rot_off, inverse)


def _backward_one(ctx, grad):
    positions, freqs = ctx.saved_tensors
    start, half, rot_off, inverse = ctx.args
    return (_rope_op(grad, positions, start, freqs, half, rot_off, not inverse),
            None, None, None, None, None, None)


def _backward_qk(ctx, gq, gk):
    positions, freqs = ctx.saved_tensors
    start, half, rot_off, inverse = ctx.args
    dq, dk = _rope_qk_op(gq, gk, positions, start, freqs, half, rot_off, not inverse)
    return dq, dk, None, None, None, None, None, None


_rope_op.register_autograd(_backward_one, setup_context=_setup)
_rope_qk_op.register_autograd(_backward_qk, setup_context=_setup)


# -- calls --------------------------------------------------------------------------------


def _needs_op(*tensors) -> bool:
    """Whether the call must go through the dispatcher: traced by torch.compile/export, or
    recorded by autograd (a plain eager call without gradients launches directly)."""
    if torch.compiler.is_compiling():
        return True
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def rope_one(x, positions, start, freqs, half, rot_off):
    """``x`` rotated, out of place."""
    if not _needs_op(x):
        out = torch.empty_like(x)
        if _launch(x, out, None, None, positions, start, freqs, half, rot_off, False):
            return out
    return _rope_op(x, positions, start, freqs, half, rot_off, False)


def rope_qk(q, k, positions, start, freqs, half, rot_off):
    """``(q, k)`` rotated at the same positions, out of place, one launch."""
    if not _needs_op(q, k):
        oq, ok = torch.empty_like(q), torch.empty_like(k)
        if _launch(q, oq, k, ok, positions, start, freqs, half, rot_off, False):
            return oq, ok
    return _rope_qk_op(q, k, positions, start, freqs, half, rot_off, False)


def rope_one_inplace(x, positions, start, freqs, half, rot_off):
    """``x`` rotated in place; returns it."""
    if torch.compiler.is_compiling() or not _launch(x, x, None, None, positions, start,
                                                    freqs, half, rot_off, False):
        _rope_inplace_op(x, positions, start, freqs, half, rot_off, False)
    return x


def rope_qk_inplace(q, k, positions, start, freqs, half, rot_off):
    """``q`` and ``k`` rotated in place, one launch; returns them."""
    if torch.compiler.is_compiling() or not _launch(q, q, k, k, positions, start, freqs,
                                                    half, rot_off, False):
        _rope_qk_inplace_op(q, k, positions, start, freqs, half, rot_off, False)
    return q, k


def launch(xs, offs, outs, positions, start, freqs, half):
    """Rotate ``xs`` (one tensor, or ``(q, k)``) with the kernel; the route's entry.

    ``outs`` as for :func:`posenc.torch._apply.rope`: None (fresh outputs) or each
    tensor's output, the tensor itself in place.  ``q`` and ``k`` with their rotated
    features at the same column go in one launch.
    """
    if outs is not None and any(o is not x for o, x in zip(outs, xs)):  # out=: a copy
        return tuple(o.copy_(y) for o, y in zip(outs, launch(xs, offs, None, positions,
                                                                start, freqs, half)))
    if len(xs) == 2 and offs[0] == offs[1]:
        q, k = xs
        if outs is not None:
            return rope_qk_inplace(q, k, positions, start, freqs, half, offs[0])
        return rope_qk(q, k, positions, start, freqs, half, offs[0])
    one = rope_one_inplace if outs is not None else rope_one
    return tuple(one(x, positions, start, freqs, half, off) for x, off in zip(xs, offs))


_FREQ_CACHE: dict = {}
_FREQ_CACHE_SIZE = 32


def plain_freqs(r, base, device):
    """The float64 buffer of ``inverse_frequencies(r, base)`` and factor 1 on ``device``,
    cached (at most 32 entries; each is ``r/2 + 1`` numbers)."""
    key = (r, base, device)
    buf = _FREQ_CACHE.get(key)
    if buf is None:
        from ..sinusoidal import inverse_frequencies

        with torch.inference_mode(False):
            buf = freq_buffer(torch.from_numpy(inverse_frequencies(r, base)), 1.0, device)
        if torch.compiler.is_compiling():
            return buf
        if len(_FREQ_CACHE) >= _FREQ_CACHE_SIZE:
            _FREQ_CACHE.pop(next(iter(_FREQ_CACHE)))
        _FREQ_CACHE[key] = buf
    return buf


def kernel_positions(positions, seq, device):
    """``(positions tensor on device or None, start, largest position or None)``.

    Integer tensors go to the device as they are (no host read: a CUDA tensor's values are
    never synchronised to the host); lists and arrays are checked, and a run
    ``start .. start + seq - 1`` becomes ``start`` alone (no copy to the device).  The
    largest position is returned where it was seen on the host (None for tensors).
    """
    from .._validation import check_positions

    if positions is None:
        return None, 0, seq - 1
    if torch.is_tensor(positions) and not positions.is_floating_point() \
            and positions.dtype not in (torch.bool, torch.uint64, torch.uint32, torch.uint16):
        if positions.device.type == "meta":
            raise ValueError(
                "positions is a meta tensor (it has no values) but the input is not; pass "
                "real positions, or meta tensors for a shape-only pass")
        return positions.to(device), 0, None
    arr = positions.cpu().numpy() if torch.is_tensor(positions) else np.asarray(positions)
    flat = check_positions(arr.reshape(-1), arr.size)
    hi = int(flat.max()) if flat.size else None
    if (arr.ndim == 1 and flat.size and abs(int(flat[0])) < 2**62 and abs(int(flat[-1])) < 2**62
            and np.array_equal(flat, flat[0] + np.arange(flat.size))):
        return None, int(flat[0]), hi
    return torch.from_numpy(flat.reshape(arr.shape)).to(device), 0, hi
