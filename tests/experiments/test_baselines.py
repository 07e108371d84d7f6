"""The n-gram and copy-cache baselines against direct computations of their definitions."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from posenc.analysis.experiments import baselines as B
from posenc.analysis.experiments.corpus import EvalChunks, Split

RNG = np.random.default_rng(0)
TEXT = np.frombuffer(b"the cat sat on the mat; the cat ate the rat. " * 7
                     + bytes(RNG.integers(97, 123, 300).astype(np.uint8)), np.uint8).copy()


def witten_bell(seqs, order, context: bytes, x: int) -> float:
    """p(x | context) by the recursion itself, counting with Counters."""
    if order == 0:
        return 1 / 256
    shorter = witten_bell(seqs, order - 1, context[1:] if order > 1 else b"", x)
    c = context[len(context) - (order - 1):] if order > 1 else b""
    grams: Counter = Counter()
    for s in seqs:
        b = bytes(s)
        for i in range(len(b) - order + 1):
            if b[i:i + order - 1] == c:
                grams[b[i + order - 1]] += 1
    n, t = sum(grams.values()), len(grams)
    return shorter if n == 0 else (grams[x] + t * shorter) / (n + t)


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_ngram_is_witten_bell(order):
    seqs = [TEXT[:200], TEXT[200:]]
    lm = B.NGram(order, seqs)
    positions = np.arange(order - 1 + 3, TEXT.size, 37)
    got = lm.prob(TEXT, positions)
    want = [witten_bell(seqs, order, bytes(TEXT[t - order + 1:t]), int(TEXT[t]))
            for t in positions]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_ngram_is_a_distribution():
    lm = B.NGram(4, [TEXT])
    tokens = np.concatenate([np.tile(TEXT[100:103], (256, 1)),
                             np.arange(256)[:, None]], axis=1).ravel()
    p = lm.prob(tokens, np.arange(3, tokens.size, 4))
    assert p.sum() == pytest.approx(1.0, abs=1e-12)


def test_ngram_counts_no_gram_across_sequences():
    joined = B.NGram(2, [np.frombuffer(b"ab", np.uint8)])
    split = B.NGram(2, [np.frombuffer(b"a", np.uint8), np.frombuffer(b"b", np.uint8)])
    tokens = np.frombuffer(b"ab", np.uint8)
    assert joined.prob(tokens, np.array([1]))[0] > split.prob(tokens, np.array([1]))[0]


def test_ngram_rejects_bad_order():
    with pytest.raises(ValueError, match="order must be an integer in"):
        B.NGram(0, [TEXT])


def test_match_lengths_by_brute_force():
    t, start = 330, 10
    got, nxt = B.match_lengths(TEXT, t, start, max_match=8)
    for i, j in enumerate(range(start + 1, t)):
        k = 0
        while k < 8 and j - k - 1 >= start and TEXT[j - k - 1] == TEXT[t - k - 1]:
            k += 1
        assert got[i] == k
        assert nxt[i] == TEXT[j]


def test_copy_cache_predicts_a_repeat_and_fitting_uses_it():
    # a random string, then the same string again: the cache predicts its second half
    s = RNG.integers(0, 256, 64).astype(np.uint8)
    tokens = np.concatenate([s, s])
    targets = np.arange(80, 128)
    m, q = B.copy_probs(tokens, targets, np.zeros_like(targets))
    assert (m == B.MAX_MATCH).all() and (q == 1).all()
    w = B.fit_weights(np.full(targets.size, 1 / 256), m, q)
    assert w[B.MAX_MATCH] == B.WEIGHTS.max() and w[0] == 0


def test_losses_read_the_fixed_targets():
    split = Split(TEXT, np.array([0, TEXT.size]), ("f",))
    chunks = EvalChunks(np.array([300, 500]), np.array([0, 0]), target=16, max_length=128)
    lm = B.NGram(3, [TEXT[:250]])
    plain = B.losses(split, chunks, lm)
    assert plain.shape == (2, 16)
    want = -np.log(lm.prob(TEXT, np.arange(284, 300)))
    np.testing.assert_allclose(plain[0], want)
    with pytest.raises(ValueError, match="weights are needed"):
        B.losses(split, chunks, lm, history=64)
    none = B.losses(split, chunks, lm, history=64, weights=np.zeros(B.MAX_MATCH + 1))
    np.testing.assert_allclose(none, plain)
