"""Analysis helpers: dot products by offset, closest pairs, decay bound, layouts, precision."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc

SETTINGS = settings(max_examples=30, deadline=None)


# -- dot products by offset ------------------------------------------------------------


def test_dot_products_independent_of_position_for_sinusoids():
    pe = posenc.sinusoidal_encoding(600, 64)
    ref = posenc.dot_products_by_offset(pe, 0)[:300]
    for p in (1, 77, 299):
        np.testing.assert_allclose(posenc.dot_products_by_offset(pe, p)[:300], ref, atol=1e-9)
    np.testing.assert_allclose(ref, posenc.sinusoidal_dot_product(np.arange(300), 64), atol=1e-9)
    assert ref[0] == pytest.approx(32.0)


def test_dot_products_grow_for_index_encoding():
    pe = posenc.index_encoding(50, 4)
    a = posenc.dot_products_by_offset(pe, 1)
    b = posenc.dot_products_by_offset(pe, 10)
    assert b[5] > a[5]
    np.testing.assert_allclose(a, 4 * 1 * np.arange(1, 50))


@SETTINGS
@given(st.floats(-1e4, 1e4), st.integers(1, 32).map(lambda h: 2 * h))
def test_sinusoidal_dot_product_even(k, d):
    v = posenc.sinusoidal_dot_product([k, -k], d)
    assert v[0] == v[1]
    assert v[0] <= d / 2 + 1e-12


# -- closest pair ------------------------------------------------------------------------


def brute_force(enc):
    diff = enc[:, None, :] - enc[None, :, :]
    dist = np.sqrt((diff ** 2).sum(-1))
    dist[np.tril_indices(len(enc))] = np.inf
    i, j = np.unravel_index(np.argmin(dist), dist.shape)
    return dist[i, j], i, j


@SETTINGS
@given(st.integers(2, 60), st.integers(1, 6), st.integers(1, 70), st.integers(0, 1000))
def test_closest_pair_matches_brute_force(n, d, chunk, seed):
    enc = np.random.default_rng(seed).normal(size=(n, d))
    got = posenc.closest_pair(enc, chunk_size=chunk)
    dist, i, j = brute_force(enc)
    assert got.distance == pytest.approx(dist, rel=1e-9)
    assert (got.i, got.j) == (i, j)


def test_closest_pair_finds_exact_collision():
    cp = posenc.closest_pair(posenc.binary_encoding(300, 8), chunk_size=64)
    assert cp == (0.0, 0, 256)


def test_closest_pair_ten_thousand_positions():
    pe = posenc.sinusoidal_encoding(10_000, 32)
    cp = posenc.closest_pair(pe, chunk_size=512)
    assert 0 < cp.distance < np.linalg.norm(pe[0] - pe[1])
    assert cp.distance == pytest.approx(np.linalg.norm(pe[cp.i] - pe[cp.j]))
    # low-dimensional, low base: positions nearly collide far apart
    small = posenc.sinusoidal_encoding(10_000, 2, base=10.0)
    assert posenc.min_pairwise_distance(small) < 1e-3


# -- decay bound -------------------------------------------------------------------------


def test_decay_bound_values():
    d = 128
    r = np.arange(0, 1001)
    b = posenc.rope_decay_bound(r, d)
    assert b[0] == pytest.approx((d / 2 + 1) / 2)
    np.testing.assert_allclose(posenc.rope_decay_bound(-r, d), b)
    assert b[1000] < b[100] < b[10] < b[0]
    assert np.any(np.diff(b) > 0.1)  # not monotone


def test_decay_bound_against_loop():
    d, r = 16, 37.0
    theta = posenc.inverse_frequencies(d)
    total = 0.0
    for j in range(1, d // 2 + 1):
        total += abs(sum(np.exp(1j * r * theta[i]) for i in range(j)))
    assert posenc.rope_decay_bound(r, d) == pytest.approx(total / (d / 2))


# -- layout permutations -----------------------------------------------------------------


@SETTINGS
@given(st.integers(1, 64).map(lambda h: 2 * h))
def test_layout_permutations_are_inverse(d):
    a = posenc.layout_permutation(d, "half", "interleaved")
    b = posenc.layout_permutation(d, "interleaved", "half")
    np.testing.assert_array_equal(a[b], np.arange(d))
    np.testing.assert_array_equal(posenc.invert_permutation(a), b)
    np.testing.assert_array_equal(posenc.layout_permutation(d, "half", "half"), np.arange(d))
    assert sorted(a) == list(range(d))


def test_layout_permutation_explicit():
    np.testing.assert_array_equal(posenc.layout_permutation(6), [0, 3, 1, 4, 2, 5])


def test_permutation_of_weights_preserves_scores():
    """Permuting the rows of W_q and W_k converts a checkpoint between layouts."""
    r = np.random.default_rng(0)
    d, n = 16, 7
    x = r.normal(size=(n, 32))
    wq, wk = r.normal(size=(32, d)), r.normal(size=(32, d))
    perm = posenc.layout_permutation(d, "interleaved", "half")
    q_i, k_i = posenc.apply_rope(x @ wq), posenc.apply_rope(x @ wk)
    q_h = posenc.apply_rope(x @ wq[:, perm], layout="half")
    k_h = posenc.apply_rope(x @ wk[:, perm], layout="half")
    np.testing.assert_allclose(q_i @ k_i.T, q_h @ k_h.T, atol=1e-10)


# -- float32 angles ------------------------------------------------------------------------


def test_float32_angles_dtype_and_shape():
    a = posenc.rope_angles_float32(10, 8)
    assert a.dtype == np.float32 and a.shape == (10, 4)
    np.testing.assert_allclose(a, posenc.rope_angles(10, 8), rtol=1e-6)
