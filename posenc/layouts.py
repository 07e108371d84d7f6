r"""The permutation between the two RoPE layouts.

``"interleaved"`` pairs features ``(2i, 2i+1)``; ``"half"`` pairs ``(i, i + h)`` with
``h = d/2``.  Both rotate pair ``i`` by the same angle :math:`m\theta_i`, so they are the
same map once the features are reordered.  Let

.. math:: \pi = (0, h, 1, h+1, 2, h+2, \ldots, h-1, d-1),

i.e. ``perm[2i] = i`` and ``perm[2i+1] = i + h``.  Then ``y = x[..., perm]`` puts the
half-layout pair ``(x_i, x_{i+h})`` at positions ``(2i, 2i+1)`` of ``y``, where the
interleaved layout rotates it by the same angle, so

.. code-block:: python

   apply_rope(x[..., perm], layout="interleaved") == apply_rope(x, layout="half")[..., perm]

and with the inverse permutation ``inv = argsort(perm) = (0, 2, 4, ..., 1, 3, 5, ...)``

.. code-block:: python

   apply_rope(x[..., inv], layout="half") == apply_rope(x, layout="interleaved")[..., inv]

This is how checkpoints are converted between the layouts: Hugging Face's Llama
conversion script permutes the rows of the query and key projection weights so that
``rotate_half`` code reproduces Meta's interleaved model (a permutation applied to both
``q`` and ``k`` leaves every dot product ``q . k`` unchanged).
"""

from __future__ import annotations

import numpy as np

from ._typing import ArrayLike, IntArray, Layout
from ._validation import check_d_model, check_layout

__all__ = ["layout_permutation", "invert_permutation"]


def layout_permutation(d_model: int, source: Layout = "half",
                       target: Layout = "interleaved") -> IntArray:
    """The index array ``perm`` that turns a ``source``-layout RoPE into a ``target`` one.

    For every ``x`` of shape ``(..., seq, d_model)`` and any positions:

    .. code-block:: python

       apply_rope(x[..., perm], layout=target) == apply_rope(x, layout=source)[..., perm]

    ``source="half", target="interleaved"`` gives ``perm[2i] = i, perm[2i+1] = i + d/2``;
    the opposite direction gives its inverse ``(0, 2, 4, ..., 1, 3, 5, ...)``; equal
    layouts give the identity.

    Parameters
    ----------
    d_model : int
        Number of rotated features, a positive even number.
    source, target : {"interleaved", "half"}
        The layouts to convert from and to.

    Returns
    -------
    numpy.ndarray
        int64, shape ``(d_model,)``, a permutation of ``0 .. d_model - 1``.

    Raises
    ------
    TypeError
        If ``d_model`` is not an integer.
    ValueError
        If ``d_model`` is odd or ``< 2``, or a layout is unknown.

    Examples
    --------
    >>> layout_permutation(8)
    array([0, 4, 1, 5, 2, 6, 3, 7])
    >>> layout_permutation(8, "interleaved", "half")
    array([0, 2, 4, 6, 1, 3, 5, 7])
    >>> import numpy as np
    >>> from posenc import apply_rope
    >>> x = np.random.default_rng(0).normal(size=(5, 8))
    >>> perm = layout_permutation(8)
    >>> bool(np.allclose(apply_rope(x[:, perm], layout="interleaved"),
    ...                  apply_rope(x, layout="half")[:, perm]))
    True
    """
    d = check_d_model(d_model, even=True)
    source = check_layout(source, "source")
    target = check_layout(target, "target")
    h = d // 2
    if source == target:
        return np.arange(d, dtype=np.int64)
    half_to_interleaved = np.stack([np.arange(h), np.arange(h) + h], axis=1).ravel()
    if source == "half":
        return half_to_interleaved.astype(np.int64)
    return invert_permutation(half_to_interleaved)


def invert_permutation(perm: ArrayLike) -> IntArray:
    """The inverse of a permutation: ``inv[perm[j]] = j``, so ``x[perm][inv] == x``.

    Parameters
    ----------
    perm : array_like of int
        A permutation of ``0 .. n - 1``, shape ``(n,)``.

    Returns
    -------
    numpy.ndarray
        int64, shape ``(n,)``.

    Raises
    ------
    TypeError
        If ``perm`` does not hold integers.
    ValueError
        If ``perm`` is not 1-D or not a permutation of ``0 .. n - 1``.

    Examples
    --------
    >>> invert_permutation([0, 4, 1, 5, 2, 6, 3, 7])
    array([0, 2, 4, 6, 1, 3, 5, 7])
    """
    p = np.asarray(perm)
    if p.size and (p.dtype == np.bool_ or not np.issubdtype(p.dtype, np.integer)):
        raise TypeError(f"perm must hold integers, got dtype {p.dtype}")
    if p.ndim != 1:
        raise ValueError(f"perm must be 1-D, got shape {p.shape}")
    n = p.shape[0]
    if not np.array_equal(np.sort(p), np.arange(n)):
        raise ValueError(f"perm must be a permutation of 0 .. {n - 1}")
    inv = np.empty(n, dtype=np.int64)
    inv[p] = np.arange(n, dtype=np.int64)
    return inv
