r"""Scaled dot-product attention in NumPy (float64), and a seeded toy self-attention.

.. math::

   \mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V

Self-attention computes :math:`Q = XW_Q`, :math:`K = XW_K`, :math:`V = XW_V` from the same
token vectors :math:`X`.  Nothing in it looks at the row index of :math:`X`: permuting the
tokens (:math:`X \to PX`) permutes the outputs the same way,

.. math:: \mathrm{Attention}(PXW_Q, PXW_K, PXW_V) = P\,\mathrm{Attention}(XW_Q, XW_K, XW_V),

(*permutation equivariance*), so "dog bites man" and "man bites dog" give each word the
same output vector.  That is why a Transformer needs positional information.

:class:`SelfAttention` draws :math:`W_Q, W_K, W_V` from a seed so that the book's numbers
are reproducible; :func:`token_embeddings` gives each word a fixed random vector.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from .._typing import ArrayLike, FloatArray
from .._validation import check_bool, check_count, check_d_model

__all__ = ["softmax", "scaled_dot_product_attention", "SelfAttention", "token_embeddings"]


def softmax(scores: ArrayLike, axis: int = -1) -> FloatArray:
    """Numerically stable softmax along ``axis`` (float64).

    Parameters
    ----------
    scores : array_like
        Any shape; ``-inf`` entries get weight 0.
    axis : int, default -1

    Returns
    -------
    numpy.ndarray
        float64, same shape, non-negative, summing to 1 along ``axis``.

    Examples
    --------
    >>> softmax([0.0, 0.0, np.log(2.0)])
    array([0.25, 0.25, 0.5 ])
    """
    s = np.asarray(scores, dtype=np.float64)
    s = s - np.max(s, axis=axis, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=True)


def scaled_dot_product_attention(
    q: ArrayLike, k: ArrayLike, v: ArrayLike, mask: ArrayLike | None = None, *,
    causal: bool = False, bias: ArrayLike | None = None,
) -> tuple[FloatArray, FloatArray]:
    """``softmax(q k^T / sqrt(d_k) + bias) v``, returning the outputs and the weights.

    Parameters
    ----------
    q : array_like
        Queries, shape ``(..., n, d_k)``.
    k : array_like
        Keys, shape ``(..., m, d_k)``.
    v : array_like
        Values, shape ``(..., m, d_v)``.
    mask : array_like of bool, optional
        Broadcastable to ``(..., n, m)``; ``True`` where query ``i`` may attend to key
        ``j``.  Every query must be allowed at least one key.
    causal : bool, keyword-only, default False
        If ``True``, query ``i`` may attend only to keys ``j <= i`` (the causal mask of
        decoder models; combined with ``mask`` if both are given).  Needs as many
        queries as keys (``n == m``).  The mask depends on the row order, so with
        ``causal=True`` attention is no longer permutation equivariant.
    bias : array_like of float, optional
        Broadcastable to ``(..., n, m)``; added to the scaled scores before the softmax
        (an additive position bias such as :func:`posenc.alibi_bias`).  ``-inf`` entries
        act as a mask; ``nan`` and ``+inf`` are not allowed.

    Returns
    -------
    outputs : numpy.ndarray
        float64, shape ``(..., n, d_v)``.
    weights : numpy.ndarray
        float64, shape ``(..., n, m)``; each row sums to 1.

    Raises
    ------
    TypeError
        If ``causal`` is not a bool.
    ValueError
        If the shapes do not match, ``causal=True`` with ``n != m``, ``bias`` holds
        ``nan`` or ``+inf``, or a query is left with no key (by ``mask``, ``causal`` and
        ``-inf`` bias entries together).

    Examples
    --------
    >>> q = np.array([[1.0, 0.0]]); k = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> v = np.array([[1.0], [0.0]])
    >>> out, w = scaled_dot_product_attention(q, k, v)
    >>> w.round(4)
    array([[0.6698, 0.3302]])
    >>> out.round(4)
    array([[0.6698]])

    With ``causal=True`` the first query sees only the first key:

    >>> x = np.eye(3)
    >>> _, w = scaled_dot_product_attention(x, x, x, causal=True)
    >>> bool(np.all(w[np.triu_indices(3, 1)] == 0)), float(w[0, 0])
    (True, 1.0)

    A bias of ``log 2`` on one key doubles its weight relative to an equal score:

    >>> _, w = scaled_dot_product_attention(np.zeros((1, 2)), np.zeros((2, 2)), np.eye(2),
    ...                                     bias=[[np.log(2.0), 0.0]])
    >>> w.round(4)
    array([[0.6667, 0.3333]])
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError("q, k and v must have at least 2 dimensions (..., tokens, features)")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dimension d_k, got {q.shape[-1]} and {k.shape[-1]}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of tokens, got {k.shape[-2]} and {v.shape[-2]}"
        )
    causal = check_bool(causal, "causal")
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"causal=True needs as many queries as keys, got {q.shape[-2]} queries and "
            f"{k.shape[-2]} keys"
        )
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (..., n, m)
    if bias is not None:
        b = np.asarray(bias, dtype=np.float64)
        try:
            b = np.broadcast_to(b, scores.shape)
        except ValueError:
            raise ValueError(
                f"bias must broadcast to the score shape {scores.shape}, got {b.shape}"
            ) from None
        if np.any(np.isnan(b)) or np.any(b == np.inf):
            raise ValueError("bias must not contain nan or +inf (-inf masks a key)")
        scores = scores + b
    allowed = None
    if mask is not None:
        m = np.asarray(mask, dtype=bool)
        try:
            allowed = np.broadcast_to(m, scores.shape)
        except ValueError:
            raise ValueError(
                f"mask must broadcast to the score shape {scores.shape}, got {m.shape}"
            ) from None
        if not np.all(allowed.any(axis=-1)):
            raise ValueError("mask must allow every query at least one key")
    if causal:
        n = scores.shape[-1]
        lower = np.tril(np.ones((n, n), dtype=bool))  # key j <= query i
        allowed = lower if allowed is None else allowed & lower
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    if scores.size and not np.all((scores != -np.inf).any(axis=-1)):
        raise ValueError("mask, causal and bias together must leave every query at least one key")
    weights = softmax(scores, axis=-1)
    return weights @ v, weights


class SelfAttention:
    """Single-head self-attention with random projections drawn from a seed.

    ``W_q, W_k`` have shape ``(d_model, d_k)`` and ``W_v`` ``(d_model, d_v)``, entries
    drawn from ``N(0, 1/d_model)`` by ``numpy.random.default_rng(seed)`` (in that
    order), so the same seed gives the same layer everywhere.

    Parameters
    ----------
    d_model : int
        Width of the input vectors, ``>= 1``.
    d_k : int, optional
        Width of queries and keys (default ``d_model``).
    d_v : int, optional
        Width of values and outputs (default ``d_model``).
    seed : int, default 0
        Seed of the random projections, ``>= 0``.

    Raises
    ------
    TypeError, ValueError
        If a width or the seed is not a non-negative integer (widths ``>= 1``).

    Examples
    --------
    Permuting the tokens permutes the outputs (permutation equivariance):

    >>> x = np.random.default_rng(1).normal(size=(3, 8))
    >>> attn = SelfAttention(8, seed=0)
    >>> out, _ = attn(x)
    >>> out_rev, _ = attn(x[::-1])
    >>> bool(np.allclose(out_rev, out[::-1]))
    True
    """

    def __init__(self, d_model: int, d_k: int | None = None, d_v: int | None = None, *,
                 seed: int = 0) -> None:
        self.d_model = check_d_model(d_model)
        self.d_k = self.d_model if d_k is None else check_d_model(d_k, "d_k")
        self.d_v = self.d_model if d_v is None else check_d_model(d_v, "d_v")
        self.seed = check_count(seed, "seed")
        rng = np.random.default_rng(self.seed)
        scale = 1.0 / np.sqrt(self.d_model)
        self.w_q = rng.normal(scale=scale, size=(self.d_model, self.d_k))
        self.w_k = rng.normal(scale=scale, size=(self.d_model, self.d_k))
        self.w_v = rng.normal(scale=scale, size=(self.d_model, self.d_v))

    def __repr__(self):
        return (
            f"SelfAttention(d_model={self.d_model}, d_k={self.d_k}, d_v={self.d_v}, "
            f"seed={self.seed})"
        )

    def __call__(self, x: ArrayLike, mask: ArrayLike | None = None, *,
                 causal: bool = False) -> tuple[FloatArray, FloatArray]:
        """Attend over the rows of ``x``.

        Parameters
        ----------
        x : array_like
            Shape ``(..., n_tokens, d_model)``.
        mask : array_like of bool, optional
            As in :func:`scaled_dot_product_attention`.
        causal : bool, keyword-only, default False
            As in :func:`scaled_dot_product_attention`: token ``i`` attends only to
            tokens ``j <= i``.

        Returns
        -------
        outputs : numpy.ndarray
            float64, ``(..., n_tokens, d_v)``.
        weights : numpy.ndarray
            float64, ``(..., n_tokens, n_tokens)``.

        Raises
        ------
        TypeError
            If ``causal`` is not a bool.
        ValueError
            If the last dimension of ``x`` is not ``d_model`` or ``x`` has fewer than 2
            dimensions.
        """
        x = np.asarray(x, dtype=np.float64)
        if x.ndim < 2 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (..., n_tokens, d_model={self.d_model}), got {x.shape}"
            )
        return scaled_dot_product_attention(x @ self.w_q, x @ self.w_k, x @ self.w_v, mask,
                                            causal=causal)


def token_embeddings(tokens: Sequence[str], d_model: int, *, seed: int = 0) -> FloatArray:
    """A fixed random vector per token string: the same word always gets the same vector.

    Each vector is drawn from ``N(0, 1)`` by a generator seeded with ``seed`` and the
    CRC-32 of the token's UTF-8 bytes, so it does not depend on the other tokens, their
    order, or Python's hash randomisation.

    Parameters
    ----------
    tokens : sequence of str
        The tokens, in order.
    d_model : int
        Width of each vector, ``>= 1``.
    seed : int, keyword-only, default 0
        ``>= 0``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(len(tokens), d_model)``.

    Raises
    ------
    TypeError
        If a token is not a string, or ``d_model`` or ``seed`` is not an integer.
    ValueError
        If ``d_model < 1`` or ``seed < 0``.

    Examples
    --------
    >>> a = token_embeddings(["dog", "bites", "man"], 4)
    >>> b = token_embeddings(["man", "bites", "dog"], 4)
    >>> bool(np.array_equal(a[::-1], b))
    True
    """
    d = check_d_model(d_model)
    s = check_count(seed, "seed")
    if isinstance(tokens, str):
        raise TypeError("tokens must be a sequence of strings, not one string")
    rows = []
    for tok in tokens:  # one vector per token (not per position or dimension)
        if not isinstance(tok, str):
            raise TypeError(f"every token must be a str, got {type(tok).__name__} {tok!r}")
        rng = np.random.default_rng([s, zlib.crc32(tok.encode("utf-8"))])
        rows.append(rng.normal(size=d))
    return np.array(rows, dtype=np.float64).reshape(len(rows), d)
