"""Baselines without a Transformer: an interpolated byte n-gram and a copy cache.

A trained model's loss means little alone.  The experiments put two references beside
every model, on the same fixed targets (:class:`~.corpus.EvalChunks`):

* :class:`NGram`, an interpolated byte n-gram (Witten–Bell), counted on the bytes a model
  saw in training or on the whole training split: what local statistics alone reach;
* :func:`copy_cache`, that n-gram mixed with a *copy cache*: where the last bytes before a
  target occurred earlier in the history the model is given, the bytes that followed them
  there are predicted.  What it gains from a longer history is what copying from further
  back is worth on these targets.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .corpus import EvalChunks, Split

#: the copy cache's longest match, in bytes
MAX_MATCH = 16
#: the mixing weights the copy cache may take (one per match length, fitted on validation)
WEIGHTS = np.round(np.arange(0.0, 1.0, 0.05), 2)


def _codes(seqs: Iterable[np.ndarray], k: int) -> np.ndarray:
    """Every k-gram inside each sequence (none across two), as an integer: byte i of the
    k-gram in bits ``8 (k - 1 - i)``."""
    out = []
    for s in seqs:
        s = np.asarray(s, dtype=np.int64)
        m = s.size - k + 1
        if m <= 0:
            continue
        c = np.zeros(m, dtype=np.int64)
        for i in range(k):
            c = (c << 8) | s[i:i + m]
        out.append(c)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


class NGram:
    """An interpolated byte n-gram with Witten–Bell smoothing.

    .. math::

        p_k(x \\mid c) = \\frac{N(c x) + T(c)\\, p_{k-1}(x \\mid c')}{N(c) + T(c)}

    where ``c`` is the last ``k - 1`` bytes, ``c'`` the last ``k - 2``, ``N`` counts and
    ``T(c)`` is the number of distinct bytes seen after ``c``; a context never seen falls
    back to the shorter one, and :math:`p_0 = 1/256`.

    Parameters
    ----------
    order:
        the longest n-gram (5: four bytes of context).
    sequences:
        the byte sequences to count (``uint8`` arrays); no n-gram crosses from one into the
        next.

    >>> text = np.frombuffer(b"abcabcabcabd", np.uint8)
    >>> lm = NGram(3, [text])
    >>> p = lm.prob(text, np.arange(2, 12))
    >>> bool(p[-2] > 0.7), bool(p[-1] < 0.3)   # 'c' after 'ab' is likely, 'd' is not
    (True, True)
    """

    def __init__(self, order: int, sequences: Sequence[np.ndarray]):
        if not (isinstance(order, int) and 1 <= order <= 7):
            raise ValueError(f"order must be an integer in [1, 7], got {order!r}")
        self.order = order
        self.grams: list[tuple[np.ndarray, np.ndarray]] = []  # (codes, counts) per k
        self.contexts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (ctx, N, T)
        for k in range(1, order + 1):
            codes, counts = np.unique(_codes(sequences, k), return_counts=True)
            ctx = codes >> 8
            starts = np.flatnonzero(np.r_[True, ctx[1:] != ctx[:-1]]) if ctx.size else ctx
            self.grams.append((codes, counts))
            self.contexts.append((ctx[starts], np.add.reduceat(counts, starts)
                                  if ctx.size else counts, np.diff(np.r_[starts, ctx.size])))

    @staticmethod
    def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
        i = np.searchsorted(keys, query).clip(0, max(keys.size - 1, 0))
        found = keys[i] == query if keys.size else np.zeros(query.shape, bool)
        return np.where(found, values[i] if keys.size else 0, 0)

    def prob(self, tokens: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The probability of ``tokens[t]`` given the bytes before it, for each ``t`` in
        ``positions`` (each at least ``order - 1``)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and positions.min() < self.order - 1:
            raise ValueError(f"positions must be >= order - 1 = {self.order - 1}")
        p = np.full(positions.shape, 1.0 / 256)
        code = np.zeros(positions.shape, dtype=np.int64)  # the context, built up
        for k in range(1, self.order + 1):
            gram = (code << 8) | tokens[positions]
            codes, counts = self.grams[k - 1]
            ctx, n_ctx, t_ctx = self.contexts[k - 1]
            n = self._lookup(ctx, n_ctx, code)
            t = self._lookup(ctx, t_ctx, code)
            c = self._lookup(codes, counts, gram)
            p = np.where(n > 0, (c + t * p) / np.maximum(n + t, 1), p)
            if k < self.order:
                code = code | (tokens[positions - k] << (8 * (k - 1)))
        return p


def match_lengths(tokens: np.ndarray, t: int, start: int, max_match: int = MAX_MATCH
                  ) -> tuple[np.ndarray, np.ndarray]:
    """For target position ``t`` with history ``tokens[start:t]``: the length of the match
    between the bytes before each earlier position ``j`` and the bytes before ``t``
    (capped at ``max_match``, never reaching before ``start``), and the byte at each ``j``."""
    j = np.arange(start + 1, t)
    length = np.zeros(j.size, dtype=np.int64)
    alive = np.ones(j.size, dtype=bool)
    for k in range(1, max_match + 1):
        ok = (j - k >= start) & (tokens[np.maximum(j - k, 0)] == tokens[t - k]) & alive
        length += ok
        alive = ok
    return length, tokens[j]


def copy_probs(tokens: np.ndarray, targets: np.ndarray, starts: np.ndarray,
               max_match: int = MAX_MATCH) -> tuple[np.ndarray, np.ndarray]:
    """The copy cache's prediction for each target position: ``(m, q)`` with ``m`` the
    longest match in its history (0: none) and ``q`` the share of the positions with that
    longest match that are followed by the target byte."""
    m = np.zeros(targets.size, dtype=np.int64)
    q = np.zeros(targets.size)
    for i, (t, s) in enumerate(zip(targets, starts, strict=True)):
        length, nxt = match_lengths(tokens, int(t), int(s), max_match)
        if length.size == 0 or length.max() == 0:
            continue
        best = length == length.max()
        m[i] = length.max()
        q[i] = np.mean(nxt[best] == tokens[t])
    return m, q


def fit_weights(p: np.ndarray, m: np.ndarray, q: np.ndarray,
                max_match: int = MAX_MATCH) -> np.ndarray:
    """The mixing weight of the copy cache for each longest-match length ``0..max_match``
    that maximises the likelihood of ``(1 - w) p + w q`` (``w = 0`` where no match)."""
    w = np.zeros(max_match + 1)
    for length in range(1, max_match + 1):
        sel = m == length
        if sel.any():
            ll = [np.log((1 - a) * p[sel] + a * q[sel]).sum() for a in WEIGHTS]
            w[length] = WEIGHTS[int(np.argmax(ll))]
    return w


def target_positions(chunks: EvalChunks, length: int) -> tuple[np.ndarray, np.ndarray]:
    """The fixed target positions, chunk by chunk (``(n_chunks, target)``), and where the
    history of each begins when the model reads ``length`` bytes (as
    :meth:`~.corpus.EvalChunks.windows` gives them)."""
    targets = np.stack([np.arange(e - chunks.target, e) for e in chunks.ends])
    starts = np.broadcast_to((chunks.ends - length - 1)[:, None], targets.shape)
    return targets, starts


def losses(split: Split, chunks: EvalChunks, lm: NGram, *, history: int | None = None,
           weights: np.ndarray | None = None) -> np.ndarray:
    """Per-target losses ``(n_chunks, target)`` in nats: the n-gram alone, or mixed with
    the copy cache over a history of ``history`` bytes with ``weights`` (:func:`fit_weights`)."""
    targets, starts = target_positions(chunks, history or chunks.max_length)
    p = lm.prob(split.tokens, targets.ravel())
    if history is not None:
        if weights is None:
            raise ValueError("weights are needed with history: fit them with fit_weights")
        m, q = copy_probs(split.tokens, targets.ravel(), starts.ravel())
        w = weights[m]
        p = (1 - w) * p + w * q
    return -np.log(p).reshape(targets.shape)
