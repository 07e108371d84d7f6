"""Scaled dot-product attention and the toy self-attention layer."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc

SETTINGS = settings(max_examples=30, deadline=None)


def test_attention_matches_explicit_formula():
    r = np.random.default_rng(0)
    q, k, v = r.normal(size=(4, 3)), r.normal(size=(5, 3)), r.normal(size=(5, 2))
    out, w = posenc.scaled_dot_product_attention(q, k, v)
    s = q @ k.T / np.sqrt(3)
    e = np.exp(s)
    w_ref = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(w, w_ref)
    np.testing.assert_allclose(out, w_ref @ v)
    np.testing.assert_allclose(w.sum(-1), 1.0)


def test_attention_mask_causal():
    r = np.random.default_rng(1)
    x = r.normal(size=(4, 3))
    mask = np.tril(np.ones((4, 4), dtype=bool))
    out, w = posenc.scaled_dot_product_attention(x, x, x, mask)
    assert np.all(w[np.triu_indices(4, 1)] == 0)
    np.testing.assert_allclose(out[0], x[0])


def test_softmax_stable_for_large_scores():
    p = posenc.softmax(np.array([1000.0, 1000.0]))
    np.testing.assert_allclose(p, [0.5, 0.5])


@SETTINGS
@given(st.permutations(list(range(5))), st.integers(0, 2**31 - 1))
def test_self_attention_permutation_equivariant(perm, seed):
    x = np.random.default_rng(seed).normal(size=(5, 8))
    attn = posenc.SelfAttention(8, seed=seed % 1000)
    out, w = attn(x)
    out_p, w_p = attn(x[perm])
    np.testing.assert_allclose(out_p, out[perm], atol=1e-12)
    np.testing.assert_allclose(w_p, w[np.ix_(perm, perm)], atol=1e-12)


def test_positional_encoding_breaks_equivariance():
    tokens = ["dog", "bites", "man"]
    x = posenc.token_embeddings(tokens, 8)
    pe = posenc.sinusoidal_encoding(3, 8)
    attn = posenc.SelfAttention(8, seed=0)
    out, _ = attn(x + pe)
    out_rev, _ = attn(x[::-1] + pe)
    assert not np.allclose(out_rev, out[::-1])


def test_self_attention_is_seeded():
    a, b, c = posenc.SelfAttention(6, seed=3), posenc.SelfAttention(6, seed=3), posenc.SelfAttention(6, seed=4)
    np.testing.assert_array_equal(a.w_q, b.w_q)
    assert not np.array_equal(a.w_q, c.w_q)
    assert posenc.SelfAttention(6, d_k=2, d_v=3).w_v.shape == (6, 3)


def test_token_embeddings_depend_on_token_only():
    a = posenc.token_embeddings(["我", "爱", "你"], 5)
    b = posenc.token_embeddings(["你", "爱", "我"], 5)
    np.testing.assert_array_equal(a[::-1], b)
    assert posenc.token_embeddings([], 5).shape == (0, 5)
    assert not np.array_equal(posenc.token_embeddings(["a"], 5, seed=1),
                              posenc.token_embeddings(["a"], 5, seed=2))
