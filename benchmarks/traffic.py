"""Count the memory traffic of an eager PyTorch function, kernel by kernel.

A RoPE on a tensor of tens of megabytes does a few flops per byte, so on a CPU its time
is set by how many bytes its kernels read and write, not by arithmetic.  This module
runs a function once under a ``TorchDispatchMode`` and, for every ATen operator that is
not a view, adds up

* bytes read: every tensor argument (a broadcast table counts once, at its real size;
  an ``out=`` argument is not read, the ``self`` of an in-place op is), and
* bytes written: every tensor the operator returns (or the ``out=`` / in-place target).

Divided by the bandwidth ``x.clone()`` achieves (it moves ``2 * x.nbytes``), that
gives the time a formula would take if every kernel ran at copy speed: a floor that no
eager implementation of the same formula can beat, and that explains the measured
ratios.

It also adds up the bytes of the fresh tensors the function allocates (every output of
a non-view, non-in-place operator, and ``empty_like``).  On Linux a large fresh block
is a new ``mmap``, and the first write to each of its 4 KiB pages is a page fault that
the kernel serves by zeroing the page; on a small machine that costs as much as the
copy itself, so an eager formula pays per byte it *allocates* as well as per byte it
moves.  ``copy_`` into a preallocated tensor measures the second cost alone and
``clone()`` both, which gives the two-term model of :func:`predict_seconds`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def touched_bytes(t) -> int:
    """Bytes of memory a tensor view actually covers: dims with stride 0 count once."""
    n = t.element_size()
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= size
    return int(n)


# Operators that only look at a tensor's shape: allocation, not traffic.
METADATA_ONLY = frozenset({"aten::empty_like", "aten::empty", "aten::empty_strided",
                           "aten::new_empty", "aten::new_empty_strided"})
# In-place operators that overwrite ``self`` without reading it.
WRITE_ONLY = frozenset({"aten::copy_", "aten::fill_", "aten::zero_"})


@dataclass
class Traffic:
    """Bytes read and written, and the kernels that moved them."""

    read: int = 0
    written: int = 0
    allocated: int = 0  # bytes of fresh tensors the function allocated (outputs, temporaries)
    kernels: list = field(default_factory=list)  # (op name, bytes read, bytes written)

    @property
    def total(self) -> int:
        return self.read + self.written


def measure_traffic(fn, *args) -> Traffic:
    """Run ``fn(*args)`` once and count the bytes its non-view ATen kernels move."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    traffic = Traffic()

    class Counter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            schema = func._schema
            returns_alias = [r.alias_info for r in schema.returns]
            is_view = any(a is not None and not a.is_write for a in returns_alias)
            if schema.name in METADATA_ONLY:
                traffic.allocated += sum(touched_bytes(t) for t in tree_flatten(out)[0]
                                         if isinstance(t, torch.Tensor))
                return out
            if is_view:
                return out
            inplace = schema.name.endswith("_") or any(
                a is not None and a.is_write for a in returns_alias
            )
            read = written = 0
            names = [a.name for a in schema.arguments]
            bound = dict(zip(names, args))
            bound.update(kwargs)
            for arg in schema.arguments:
                value = bound.get(arg.name)
                tensors = [v for v in tree_flatten(value)[0] if isinstance(v, torch.Tensor)]
                writes = arg.alias_info is not None and arg.alias_info.is_write
                for t in tensors:
                    if writes:
                        written += touched_bytes(t)
                        if not arg.kwarg_only and schema.name not in WRITE_ONLY:
                            read += touched_bytes(t)  # in-place: self is read too
                    else:
                        read += touched_bytes(t)
            if not inplace:
                for t in tree_flatten(out)[0]:
                    if isinstance(t, torch.Tensor):
                        written += touched_bytes(t)
                        traffic.allocated += touched_bytes(t)
            if read or written:
                traffic.read += read
                traffic.written += written
                traffic.kernels.append((str(func.__name__), read, written))
            return out

    with Counter():
        fn(*args)
    return traffic


def predict_seconds(t: Traffic, bandwidth: float, fault_cost: float) -> float:
    """Time a formula needs at a given streaming bandwidth and page-fault cost per byte.

    ``bandwidth`` (bytes/s) comes from ``out.copy_(x)``: ``2 * x.nbytes / time``.
    ``fault_cost`` (s/byte) from ``(time(x.clone()) - time(out.copy_(x))) / x.nbytes``.
    """
    return t.total / bandwidth + t.allocated * fault_cost
