"""Index, normalised index and binary encodings."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc

SETTINGS = settings(max_examples=40, deadline=None)


def test_index_encoding_values():
    pe = posenc.index_encoding(5, 3)
    assert pe.dtype == np.float64 and pe.shape == (5, 3)
    np.testing.assert_array_equal(pe, np.repeat(np.arange(5.0)[:, None], 3, axis=1))
    pe[0, 0] = 99  # a real, writable array, not a broadcast view
    assert posenc.index_encoding(5, 3)[0, 0] == 0


def test_index_encoding_unbounded():
    assert posenc.index_encoding(1001, 4).max() == 1000


def test_normalized_index_range_and_length_dependence():
    a = posenc.normalized_index_encoding(5, 2)
    b = posenc.normalized_index_encoding(9, 2)
    assert a[0, 0] == 0 and a[-1, 0] == 1 and b[-1, 0] == 1
    assert a[2, 0] == 0.5 and b[2, 0] == 0.25  # same position, different code


def test_normalized_index_single_position_is_zero():
    out = posenc.normalized_index_encoding(1, 3)
    np.testing.assert_array_equal(out, np.zeros((1, 3)))


@SETTINGS
@given(st.integers(1, 2000), st.integers(1, 12))
def test_binary_encoding_reconstructs_position(n, d):
    bits = posenc.binary_encoding(n, d)
    assert set(np.unique(bits)) <= {0.0, 1.0}
    value = bits @ (2.0 ** np.arange(d))
    np.testing.assert_array_equal(value, np.arange(n) % 2**d)


def test_binary_column_zero_fastest():
    bits = posenc.binary_encoding(8, 3)
    np.testing.assert_array_equal(bits[:, 0], [0, 1, 0, 1, 0, 1, 0, 1])
    np.testing.assert_array_equal(bits[:, 2], [0, 0, 0, 0, 1, 1, 1, 1])


def test_binary_wraps_after_2_to_the_d():
    bits = posenc.binary_encoding(20, 4)
    np.testing.assert_array_equal(bits[16], bits[0])
    assert posenc.min_pairwise_distance(bits) == 0.0


def test_binary_wide_d_model_no_overflow():
    bits = posenc.binary_encoding(5, 80)
    assert bits.shape == (5, 80)
    assert bits[:, 3:].sum() == 0
    np.testing.assert_array_equal(bits[4, :3], [0, 0, 1])


def test_binary_adjacent_positions_can_differ_in_every_bit():
    bits = posenc.binary_encoding(16, 4)
    assert np.abs(bits[7] - bits[8]).sum() == 4  # 0111 -> 1000


@pytest.mark.parametrize("fn", [posenc.index_encoding, posenc.normalized_index_encoding,
                                posenc.binary_encoding])
def test_shapes(fn):
    assert fn(7, 5).shape == (7, 5)
