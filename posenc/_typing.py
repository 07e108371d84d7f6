"""Type aliases for the annotations of the public API (no runtime cost: PyTorch is only
imported by the type checker, so ``import posenc`` still does not import it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import torch

__all__ = ["ArrayLike", "FloatArray", "IntArray", "Layout", "Array", "Positions", "Device",
           "DType"]

#: Anything NumPy turns into an array (lists, tuples, scalars, arrays).
ArrayLike: TypeAlias = npt.ArrayLike
#: A float64 NumPy array.
FloatArray: TypeAlias = npt.NDArray[np.float64]
#: An int64 NumPy array.
IntArray: TypeAlias = npt.NDArray[np.int64]
#: Which features form a RoPE pair.
Layout: TypeAlias = Literal["interleaved", "half"]
#: A NumPy array or a torch tensor (functions that take both return the same kind).
Array: TypeAlias = "npt.NDArray[np.floating] | torch.Tensor"
#: Integer positions: a sequence, a NumPy array or a torch tensor.
Positions: TypeAlias = "npt.ArrayLike | torch.Tensor"
#: A torch device or its name.
Device: TypeAlias = "torch.device | str | int | None"
#: A torch dtype.
DType: TypeAlias = "torch.dtype"
