"""Helpers for the book's RoPE chapters that the core library does not need.

:func:`memory_traffic` runs an eager PyTorch function once and lists the kernels it
launches with the bytes each one reads and writes.  The chapter *RoPE in real models*
uses it to count how many times the complex-number form and the ``rotate_half`` form
of RoPE pass over a query tensor, from the operations themselves rather than by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KernelTraffic", "Traffic", "memory_traffic"]

# Operators that only look at a tensor's shape: they allocate, they move no data.
_METADATA_ONLY = frozenset({
    "aten::empty", "aten::empty_like", "aten::empty_strided",
    "aten::new_empty", "aten::new_empty_strided",
})


@dataclass(frozen=True)
class KernelTraffic:
    """One non-view ATen operator and the bytes it read and wrote."""

    op: str
    read_bytes: int
    written_bytes: int


@dataclass(frozen=True)
class Traffic:
    """The kernels of one call, in launch order, and their totals."""

    kernels: tuple[KernelTraffic, ...]

    @property
    def read_bytes(self) -> int:
        """Bytes read by all kernels together."""
        return sum(k.read_bytes for k in self.kernels)

    @property
    def written_bytes(self) -> int:
        """Bytes written by all kernels together."""
        return sum(k.written_bytes for k in self.kernels)


def _touched_bytes(t) -> int:
    """Bytes a tensor really covers in memory: a broadcast (stride-0) dim counts once."""
    n = t.element_size()
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= size
    return int(n)


def memory_traffic(fn, *args, **kwargs) -> Traffic:
    """Run ``fn(*args, **kwargs)`` once and count the memory traffic of its kernels.

    Every ATen operator that PyTorch dispatches during the call is recorded, except
    views (``reshape`` of a contiguous tensor, slicing, ``view_as_complex``, ...) and
    pure allocations, which move no data.  For each recorded operator the bytes read
    are the sizes of its tensor arguments (a table broadcast over batch and heads
    counts once, at its real size; the ``self`` of an in-place operator is read) and
    the bytes written are the sizes of the tensors it returns or writes in place.
    Caches, fusion and the hardware are ignored: this is the traffic an eager,
    kernel-by-kernel execution of the formula asks for.

    Parameters
    ----------
    fn : callable
        The function to run.  It is run exactly once, eagerly.
    *args, **kwargs
        Its arguments; at least one of the positional ones must be a ``torch.Tensor``.

    Returns
    -------
    Traffic
        ``kernels`` (operator name, bytes read, bytes written, in launch order) and the
        totals ``read_bytes`` and ``written_bytes``.

    Raises
    ------
    TypeError
        If ``fn`` is not callable, or no positional argument is a ``torch.Tensor``.

    Examples
    --------
    >>> import torch
    >>> x = torch.zeros(4, 8)                   # 128 bytes of float32
    >>> t = memory_traffic(lambda a: a * 2 + 1, x)
    >>> [(k.op, k.read_bytes, k.written_bytes) for k in t.kernels]
    [('mul.Tensor', 128, 128), ('add.Tensor', 128, 128)]
    >>> memory_traffic(lambda a: a.reshape(2, 16), x).kernels   # a view moves nothing
    ()
    >>> memory_traffic(lambda a: a[:, :4].reshape(-1), x).kernels   # this reshape copies
    (KernelTraffic(op='clone.default', read_bytes=64, written_bytes=64),)
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    if not any(isinstance(a, torch.Tensor) for a in args):
        raise TypeError("memory_traffic needs at least one torch.Tensor positional argument")

    kernels: list[KernelTraffic] = []

    class _Counter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            schema = func._schema
            aliases = [r.alias_info for r in schema.returns]
            if schema.name in _METADATA_ONLY or any(
                a is not None and not a.is_write for a in aliases
            ):
                return out  # a view or an allocation: no data moves
            bound = dict(zip((a.name for a in schema.arguments), args))
            bound.update(kwargs)
            inputs = [v for v in tree_flatten((args, kwargs))[0] if isinstance(v, torch.Tensor)]
            outputs = [v for v in tree_flatten(out)[0] if isinstance(v, torch.Tensor)]
            storages = {t.untyped_storage().data_ptr() for t in inputs}
            if outputs and not any(a is not None for a in aliases) and all(
                t.untyped_storage().data_ptr() in storages for t in outputs
            ):
                return out  # unannotated views such as _unsafe_view share their input
            read = written = 0
            inplace = False
            for arg in schema.arguments:
                tensors = [v for v in tree_flatten(bound.get(arg.name))[0]
                           if isinstance(v, torch.Tensor)]
                is_target = arg.alias_info is not None and arg.alias_info.is_write
                for t in tensors:
                    if is_target:
                        inplace = True
                        written += _touched_bytes(t)
                        if arg.name != "out":  # the self of an in-place op is read too
                            read += _touched_bytes(t)
                    else:
                        read += _touched_bytes(t)
            if not inplace:
                written += sum(_touched_bytes(t) for t in tree_flatten(out)[0]
                               if isinstance(t, torch.Tensor))
            if read or written:
                kernels.append(KernelTraffic(func.__name__, read, written))
            return out

    with _Counter():
        fn(*args, **kwargs)
    return Traffic(tuple(kernels))
