"""Scaled dot-product attention and the toy self-attention layer."""

import numpy as np
import pytest
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


# -- why-position: equivariant, not invariant -----------------------------------------------


def _dog_bites_man():
    attn = posenc.SelfAttention(16, seed=0)
    a, b = ["dog", "bites", "man"], ["man", "bites", "dog"]
    out_a, _ = attn(posenc.token_embeddings(a, 16))
    out_b, _ = attn(posenc.token_embeddings(b, 16))
    return out_a, out_b, [2, 1, 0]


def test_swapped_sentence_gives_permuted_not_identical_outputs():
    """'out_b differs from out_a ... and equals out_a[swap]'; seeds 003/004 say identical."""
    out_a, out_b, swap = _dog_bites_man()
    assert np.abs(out_b - out_a).max() > 0.1                   # not invariant
    np.testing.assert_allclose(out_b, out_a[swap], atol=1e-12)  # equivariant
    np.testing.assert_allclose(out_b.mean(axis=0), out_a.mean(axis=0), atol=1e-12)  # pooled


@SETTINGS
@given(st.permutations(list(range(5))), st.integers(0, 2**31 - 1))
def test_outputs_move_with_the_tokens_and_only_pooled_outputs_stay(perm, seed):
    """Equivariant, not invariant: any non-identity permutation changes the output array,
    un-permuting restores it, and mean pooling is invariant."""
    x = np.random.default_rng(seed).normal(size=(5, 8))
    attn = posenc.SelfAttention(8, seed=seed % 1000)
    out, _ = attn(x)
    out_p, _ = attn(x[perm])
    np.testing.assert_allclose(out_p, out[perm], atol=1e-12)
    np.testing.assert_allclose(out_p.mean(axis=0), out.mean(axis=0), atol=1e-12)
    if list(perm) != sorted(perm):
        assert np.abs(out_p - out).max() > 1e-6


# -- why-position: a causal mask breaks equivariance ----------------------------------------


@SETTINGS
@given(st.permutations(list(range(5))), st.integers(0, 2**31 - 1))
def test_causal_mask_breaks_equivariance(perm, seed):
    """'With the mask, equivariance breaks': for every permutation but the identity."""
    x = np.random.default_rng(seed).normal(size=(5, 8))
    attn = posenc.SelfAttention(8, seed=seed % 1000)
    free, _ = attn(x)
    free_p, _ = attn(x[perm])
    np.testing.assert_allclose(free_p, free[perm], atol=1e-12)
    causal, _ = attn(x, causal=True)
    causal_p, _ = attn(x[perm], causal=True)
    if list(perm) == sorted(perm):
        np.testing.assert_array_equal(causal_p, causal)
    else:
        assert np.abs(causal_p - causal[perm]).max() > 1e-6


def test_causal_option_is_the_lower_triangular_mask():
    r = np.random.default_rng(2)
    q, k, v = r.normal(size=(3, 2, 6, 4))
    tril = np.tril(np.ones((6, 6), dtype=bool))
    out, w = posenc.scaled_dot_product_attention(q, k, v, causal=True)
    out_ref, w_ref = posenc.scaled_dot_product_attention(q, k, v, tril)
    np.testing.assert_array_equal(w, w_ref)
    np.testing.assert_array_equal(out, out_ref)
    assert np.all(w[:, np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] == 0)
    # combined with a mask: both must allow the key
    band = np.abs(np.subtract.outer(np.arange(6), np.arange(6))) <= 1
    _, w_both = posenc.scaled_dot_product_attention(q, k, v, band, causal=True)
    assert np.all(w_both[:, ~(band & tril)] == 0)
    assert np.all(w_both[:, band & tril] > 0)


def test_causal_option_rejects_bad_arguments():
    x = np.ones((3, 2))
    with pytest.raises(TypeError, match=r"causal must be True or False, got str 'yes'"):
        posenc.scaled_dot_product_attention(x, x, x, causal="yes")
    with pytest.raises(TypeError, match=r"causal must be True or False, got int 1"):
        posenc.SelfAttention(2)(x, causal=1)
    with pytest.raises(ValueError, match=r"causal=True needs as many queries as keys, got 2 queries and 3 keys"):
        posenc.scaled_dot_product_attention(x[:2], x, x, causal=True)
    first_only = np.zeros((3, 3), dtype=bool)
    first_only[:, 2] = True           # every row allows only the last key ...
    with pytest.raises(ValueError, match="leave every query at least one key"):
        posenc.scaled_dot_product_attention(x, x, x, first_only, causal=True)  # ... the future


# -- the bias option (used by ALiBi) -----------------------------------------------------------


def test_bias_is_added_to_the_scaled_scores():
    r = np.random.default_rng(4)
    q, k, v = r.normal(size=(4, 3)), r.normal(size=(5, 3)), r.normal(size=(5, 2))
    bias = r.normal(size=(4, 5))
    out, w = posenc.scaled_dot_product_attention(q, k, v, bias=bias)
    e = np.exp(q @ k.T / np.sqrt(3) + bias)
    w_ref = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(w, w_ref)
    np.testing.assert_allclose(out, w_ref @ v)
    # -inf in the bias masks that key, like mask=False
    bias[:, 0] = -np.inf
    _, w_inf = posenc.scaled_dot_product_attention(q, k, v, bias=bias)
    assert np.all(w_inf[:, 0] == 0)
    np.testing.assert_allclose(w_inf.sum(-1), 1.0)


def test_bias_option_rejects_bad_values():
    x = np.ones((3, 2))
    with pytest.raises(ValueError, match=r"bias must broadcast to the score shape \(3, 3\), got \(2,\)"):
        posenc.scaled_dot_product_attention(x, x, x, bias=[0.0, 1.0])
    for bad in (np.nan, np.inf):
        b = np.zeros((3, 3))
        b[1, 1] = bad
        with pytest.raises(ValueError, match=r"bias must not contain nan or \+inf"):
            posenc.scaled_dot_product_attention(x, x, x, bias=b)
    b = np.zeros((3, 3))
    b[0] = -np.inf
    with pytest.raises(ValueError, match="leave every query at least one key"):
        posenc.scaled_dot_product_attention(x, x, x, bias=b)


# -- why-position: the page's bare attention function ---------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_page_attention_has_five_lines_and_matches_posenc(lang):
    """'the body of the function is five lines' (zh: 五行), and it computes what posenc does."""
    import ast
    from pathlib import Path

    from book_parity import parse_page

    page = parse_page((Path(__file__).resolve().parents[2] / "docs" / lang / "why-position.md")
                      .read_text(encoding="utf-8"))
    cell = next(c for c in page.code_cells if "def attention(" in c)
    fn = next(n for n in ast.parse(cell).body
              if isinstance(n, ast.FunctionDef) and n.name == "attention")
    assert len(fn.body) == 5
    assert all(fn.body[i].lineno < fn.body[i + 1].lineno for i in range(4))  # one per line
    namespace = {}
    exec(cell, namespace)
    r = np.random.default_rng(5)
    x, w_q, w_k, w_v = r.normal(size=(6, 4)), *r.normal(size=(3, 4, 4))
    out, _ = posenc.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)
    np.testing.assert_allclose(namespace["attention"](x, w_q, w_k, w_v), out, atol=1e-12)
