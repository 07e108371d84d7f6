"""The sinusoidal encoding, its frequencies, wavelengths and shift matrices."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc

SETTINGS = settings(max_examples=40, deadline=None)
even_d = st.integers(1, 64).map(lambda h: 2 * h)
bases = st.floats(1.5, 1e5)


def reference(n, d, base=10000.0):
    """The textbook double loop (Vaswani et al. 2017, section 3.5), for comparison."""
    pe = np.zeros((n, d))
    for p in range(n):
        for i in range(d // 2):
            pe[p, 2 * i] = math.sin(p / base ** (2 * i / d))
            pe[p, 2 * i + 1] = math.cos(p / base ** (2 * i / d))
    return pe


def test_matches_textbook_loop():
    np.testing.assert_allclose(posenc.sinusoidal_encoding(50, 16), reference(50, 16),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(posenc.sinusoidal_encoding(20, 6, base=100),
                               reference(20, 6, base=100), rtol=0, atol=1e-12)


def test_robot_example():
    pe = posenc.sinusoidal_encoding(4, 4, base=100)
    np.testing.assert_allclose(pe[1], [math.sin(1), math.cos(1), math.sin(0.1), math.cos(0.1)])
    np.testing.assert_allclose(pe[3], [math.sin(3), math.cos(3), math.sin(0.3), math.cos(0.3)])


def test_inverse_frequencies_and_wavelengths():
    w = posenc.inverse_frequencies(512)
    assert w.shape == (256,) and w[0] == 1.0
    np.testing.assert_allclose(w[-1], 10000.0 ** (-510 / 512))
    assert np.all(np.diff(w) < 0)
    lam = posenc.wavelengths(512)
    np.testing.assert_allclose(lam[0], 2 * np.pi)
    np.testing.assert_allclose(lam[-1], 2 * np.pi * 10000 ** (510 / 512))
    assert lam[-1] < 2 * np.pi * 10000  # the often-quoted maximum is never reached


def test_pairs_share_one_frequency():
    pe = posenc.sinusoidal_encoding(100, 16)
    np.testing.assert_allclose(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, 1.0, atol=1e-12)


@SETTINGS
@given(st.integers(-200, 200), even_d, bases, st.integers(0, 300))
def test_shift_matrix_shifts(k, d, base, p):
    T = posenc.shift_matrix(k, d, base)
    pe_p = posenc.sinusoidal_encoding(p + 1, d, base)[p]
    q = p + k
    # PE at q (possibly negative) by the formula:
    angles = q * posenc.inverse_frequencies(d, base)
    expected = np.empty(d)
    expected[0::2], expected[1::2] = np.sin(angles), np.cos(angles)
    np.testing.assert_allclose(T @ pe_p, expected, atol=1e-9)


@SETTINGS
@given(st.integers(-50, 50), st.integers(-50, 50), even_d)
def test_shift_matrix_group_and_orthogonal(j, k, d):
    Tj, Tk = posenc.shift_matrix(j, d), posenc.shift_matrix(k, d)
    np.testing.assert_allclose(Tj @ Tk, posenc.shift_matrix(j + k, d), atol=1e-10)
    np.testing.assert_allclose(Tk.T @ Tk, np.eye(d), atol=1e-12)
    np.testing.assert_allclose(posenc.shift_matrix(-k, d), Tk.T, atol=1e-12)


def test_shift_matrix_all_positions_at_once():
    pe = posenc.sinusoidal_encoding(300, 32)
    T = posenc.shift_matrix(37, 32)
    np.testing.assert_allclose(pe[:-37] @ T.T, pe[37:], atol=1e-10)


@SETTINGS
@given(st.integers(0, 500), st.integers(0, 500), st.integers(0, 200), even_d)
def test_dot_product_depends_only_on_offset(p1, p2, k, d):
    pe = posenc.sinusoidal_encoding(max(p1, p2) + k + 1, d)
    a = pe[p1] @ pe[p1 + k]
    b = pe[p2] @ pe[p2 + k]
    assert math.isclose(a, b, abs_tol=1e-9)
    assert math.isclose(a, float(posenc.sinusoidal_dot_product(k, d)), abs_tol=1e-9)


def test_values_float64_and_bounded():
    pe = posenc.sinusoidal_encoding(1000, 64)
    assert pe.dtype == np.float64
    assert np.abs(pe).max() <= 1.0
