"""Bad input: one test per rule, each naming the argument and the rule in its message."""

import numpy as np
import pytest

import posenc


# -- counts --------------------------------------------------------------------------


def test_negative_n_positions():
    with pytest.raises(ValueError, match=r"n_positions must be non-negative, got -1"):
        posenc.sinusoidal_encoding(-1, 8)


@pytest.mark.parametrize("bad", [3.0, "3", None, 2.5])
def test_non_integer_n_positions(bad):
    with pytest.raises(TypeError, match=r"n_positions must be an integer"):
        posenc.index_encoding(bad, 4)


@pytest.mark.parametrize("fn", [posenc.index_encoding, posenc.binary_encoding,
                                posenc.normalized_index_encoding, posenc.sinusoidal_encoding])
def test_bool_is_not_an_integer(fn):
    with pytest.raises(TypeError, match=r"n_positions must be an integer, got bool"):
        fn(True, 4)


def test_numpy_integer_counts_accepted():
    assert posenc.sinusoidal_encoding(np.int32(3), np.int64(4)).shape == (3, 4)


@pytest.mark.parametrize("fn", [posenc.index_encoding, posenc.binary_encoding,
                                posenc.normalized_index_encoding, posenc.sinusoidal_encoding])
def test_zero_positions_gives_empty(fn):
    out = fn(0, 6)
    assert out.shape == (0, 6) and out.dtype == np.float64


# -- d_model -------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [posenc.sinusoidal_encoding, lambda n, d: posenc.shift_matrix(1, d),
                                lambda n, d: posenc.inverse_frequencies(d),
                                lambda n, d: posenc.rope_rotation_matrix(1, d)])
def test_odd_d_model_where_pairs_are_needed(fn):
    with pytest.raises(ValueError, match=r"d_model must be a positive even number .*pairs.*got 7"):
        fn(4, 7)


def test_d_model_zero_for_naive():
    with pytest.raises(ValueError, match=r"d_model must be >= 1, got 0"):
        posenc.binary_encoding(4, 0)


def test_odd_d_model_fine_for_naive():
    assert posenc.index_encoding(2, 3).shape == (2, 3)


def test_d_model_non_integer():
    with pytest.raises(TypeError, match=r"d_model must be an integer"):
        posenc.sinusoidal_encoding(4, 8.0)


# -- base ----------------------------------------------------------------------------


@pytest.mark.parametrize("base", [1, 1.0, 0.5, 0, -10])
def test_base_at_most_one(base):
    with pytest.raises(ValueError, match=r"base must be > 1"):
        posenc.sinusoidal_encoding(4, 8, base=base)


@pytest.mark.parametrize("base", [float("inf"), float("nan")])
def test_base_not_finite(base):
    with pytest.raises(ValueError, match=r"base must be finite"):
        posenc.inverse_frequencies(8, base=base)


@pytest.mark.parametrize("base", ["10000", None, True, 1j])
def test_base_not_real(base):
    with pytest.raises(TypeError, match=r"base must be a real number"):
        posenc.wavelengths(8, base=base)


def test_apply_rope_checks_base():
    with pytest.raises(ValueError, match=r"base must be > 1"):
        posenc.apply_rope(np.ones((2, 4)), base=1.0)


# -- layout --------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["neox", "Half", None, 2])
def test_unknown_layout_lists_allowed(layout):
    with pytest.raises(ValueError, match=r"layout must be one of 'interleaved', 'half'"):
        posenc.apply_rope(np.ones((2, 4)), layout=layout)


def test_unknown_layout_in_permutation():
    with pytest.raises(ValueError, match=r"target must be one of 'interleaved', 'half'"):
        posenc.layout_permutation(4, "half", "neox")


# -- x and positions -----------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (4,)])
def test_x_needs_two_dimensions(shape):
    with pytest.raises(ValueError, match=r"x must have at least 2 dimensions"):
        posenc.apply_rope(np.ones(shape))


def test_x_last_dimension_odd():
    with pytest.raises(ValueError, match=r"last dimension of x \(d\) must be a positive even"):
        posenc.apply_rope(np.ones((3, 5)))


def test_x_complex_rejected():
    with pytest.raises(TypeError, match=r"x must hold real numbers"):
        posenc.apply_rope(np.ones((3, 4), dtype=complex))


def test_positions_wrong_length():
    with pytest.raises(ValueError, match=r"positions must have length 3 .*got length 2"):
        posenc.apply_rope(np.ones((3, 4)), [0, 1])


def test_positions_wrong_ndim():
    with pytest.raises(ValueError, match=r"positions must be 1-D"):
        posenc.apply_rope(np.ones((3, 4)), np.zeros((3, 1), dtype=int))


@pytest.mark.parametrize("positions", [[0.0, 1.0, 2.0], np.array([True, False, True])])
def test_positions_non_integer_dtype(positions):
    with pytest.raises(TypeError, match=r"positions must have an integer dtype"):
        posenc.apply_rope(np.ones((3, 4)), positions)


def test_positions_non_integer_torch():
    import torch

    with pytest.raises(TypeError, match=r"positions must have an integer dtype, got torch.float32"):
        posenc.apply_rope(torch.ones(3, 4), torch.arange(3.0))


def test_negative_positions_allowed():
    x = np.random.default_rng(0).normal(size=(3, 4))
    y = posenc.apply_rope(x, [-1, 0, 1])
    np.testing.assert_allclose(y[0], posenc.rope_rotation_matrix(-1, 4) @ x[0])


@pytest.mark.parametrize("rotary_dim, exc, msg", [
    (3, ValueError, r"rotary_dim must be a positive even number"),
    (0, ValueError, r"rotary_dim must be a positive even number"),
    (10, ValueError, r"rotary_dim must be <= the last dimension of x \(8\)"),
    (4.0, TypeError, r"rotary_dim must be an integer"),
])
def test_rotary_dim_rules(rotary_dim, exc, msg):
    with pytest.raises(exc, match=msg):
        posenc.apply_rope(np.ones((2, 8)), rotary_dim=rotary_dim)


def test_empty_sequence_is_fine():
    assert posenc.apply_rope(np.ones((0, 4))).shape == (0, 4)
    assert posenc.apply_rope(np.ones((2, 0, 4)), []).shape == (2, 0, 4)


# -- other helpers -------------------------------------------------------------------


def test_shift_k_must_be_finite_real():
    with pytest.raises(ValueError, match=r"k must be finite"):
        posenc.shift_matrix(float("inf"), 4)
    with pytest.raises(TypeError, match=r"k must be a real number"):
        posenc.shift_matrix("1", 4)


def test_rotation_position_must_be_real():
    with pytest.raises(TypeError, match=r"position must be a real number, got bool"):
        posenc.rope_rotation_matrix(True, 4)


def test_closest_pair_needs_two_rows():
    with pytest.raises(ValueError, match=r"encoding must be 2-D with at least 2 rows"):
        posenc.closest_pair(np.ones((1, 4)))


def test_closest_pair_chunk_size():
    with pytest.raises(ValueError, match=r"chunk_size must be >= 1"):
        posenc.closest_pair(np.ones((3, 4)), chunk_size=0)


def test_dot_products_position_out_of_range():
    with pytest.raises(ValueError, match=r"position must be < n_positions = 4"):
        posenc.dot_products_by_offset(np.ones((4, 2)), 4)


def test_invert_permutation_rejects_non_permutation():
    with pytest.raises(ValueError, match=r"perm must be a permutation of 0 .. 2"):
        posenc.invert_permutation([0, 0, 1])


def test_attention_shape_mismatch():
    with pytest.raises(ValueError, match=r"q and k must have the same last dimension d_k"):
        posenc.scaled_dot_product_attention(np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 4)))


def test_token_embeddings_needs_strings():
    with pytest.raises(TypeError, match=r"every token must be a str"):
        posenc.token_embeddings(["a", 1], 4)
    with pytest.raises(TypeError, match=r"tokens must be a sequence of strings"):
        posenc.token_embeddings("dog", 4)


def test_decay_distances_finite():
    with pytest.raises(ValueError, match=r"distances must be finite"):
        posenc.rope_decay_bound([0.0, np.nan], 8)
