"""ALiBi (posenc.alibi) and its section in the chapter other-encodings (moved from why-position)."""

from __future__ import annotations

import io
import logging
import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
import posenc.figures as pf

SETTINGS = settings(max_examples=40, deadline=None)
CJK = re.compile(r"[\u3400-\u9fff\uff00-\uffef]")


def reference_slopes(n):
    """The rule of the authors' reference code, written out independently of posenc."""
    def power_of_two(p):
        return [2.0 ** (-8.0 * h / p) for h in range(1, p + 1)]

    if math.log2(n).is_integer():
        return power_of_two(n)
    p = 2 ** math.floor(math.log2(n))
    return power_of_two(p) + reference_slopes(2 * p)[0::2][: n - p]


# -- slopes ------------------------------------------------------------------------------------


def test_slopes_for_eight_heads_halve_from_one_half_to_1_256():
    """'the slopes fall from 0.5 for head 1 to 0.00390625 for head 8, halving'."""
    slopes = posenc.alibi_slopes(8)
    np.testing.assert_allclose(slopes, [1 / 2 ** h for h in range(1, 9)], rtol=1e-15, atol=0)
    np.testing.assert_allclose(slopes[1:] / slopes[:-1], 0.5, rtol=1e-15)
    assert slopes.dtype == np.float64 and slopes.shape == (8,)


@given(st.integers(0, 9))
def test_power_of_two_slopes_are_the_geometric_sequence(exponent):
    """m_h = 2^(-8h/n): starts at 2^(-8/n), ratio 2^(-8/n), ends at 2^-8."""
    n = 2 ** exponent
    slopes = posenc.alibi_slopes(n)
    first = 2.0 ** (-8.0 / n)
    np.testing.assert_allclose(slopes, first ** np.arange(1, n + 1), rtol=1e-13)
    assert slopes[-1] == pytest.approx(2.0 ** -8, rel=1e-13)


@pytest.mark.parametrize("n", range(1, 70))
def test_slopes_follow_the_reference_code_for_every_head_count(n):
    np.testing.assert_allclose(posenc.alibi_slopes(n), reference_slopes(n), rtol=1e-14)


@given(st.integers(1, 300))
def test_extra_slopes_sit_halfway_between_the_power_of_two_slopes(n):
    """Non-power-of-two counts: p slopes of p heads, then the geometric midpoints, appended."""
    slopes = posenc.alibi_slopes(n)
    p = 2 ** int(math.floor(math.log2(n)))
    np.testing.assert_allclose(slopes[:p], posenc.alibi_slopes(p), rtol=0)
    with_one = np.concatenate([[1.0], slopes[:p]])
    midpoints = np.sqrt(with_one[:-1] * with_one[1:])
    np.testing.assert_allclose(slopes[p:], midpoints[: n - p], rtol=1e-14)
    assert np.all((slopes > 0) & (slopes < 1))
    assert len(set(slopes.tolist())) == n          # every head has its own slope


def test_six_heads_example():
    np.testing.assert_allclose(posenc.alibi_slopes(6), [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8])


# -- the bias ---------------------------------------------------------------------------------------


@SETTINGS
@given(n=st.integers(0, 24), heads=st.integers(1, 20), causal=st.booleans(), data=st.data())
def test_bias_depends_on_positions_only_through_i_minus_j(n, heads, causal, data):
    bias = posenc.alibi_bias(n, heads, causal=causal)
    assert bias.shape == (heads, n, n) and bias.dtype == np.float64
    if n < 2:
        return
    shift = data.draw(st.integers(1, n - 1))
    np.testing.assert_array_equal(bias[:, shift:, shift:], bias[:, :-shift, :-shift])
    i, j = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
    slopes = posenc.alibi_slopes(heads)
    if causal and j > i:
        assert np.all(bias[:, i, j] == -np.inf)
    else:
        np.testing.assert_allclose(bias[:, i, j], -slopes * abs(i - j), rtol=1e-15)


@given(n=st.integers(1, 30), heads=st.integers(1, 16))
def test_causal_bias_is_zero_on_the_diagonal_negative_below_and_masks_the_future(n, heads):
    bias = posenc.alibi_bias(n, heads)
    diag = np.diagonal(bias, axis1=1, axis2=2)
    assert np.all(diag == 0) and not np.any(np.signbit(diag))     # +0.0, not -0.0
    below = np.tril_indices(n, -1)
    assert np.all(bias[:, below[0], below[1]] < 0)
    above = np.triu_indices(n, 1)
    assert np.all(bias[:, above[0], above[1]] == -np.inf)
    # each row decreases by m_h per step back
    if n > 1:
        np.testing.assert_allclose(bias[:, 1:, 0] - bias[:, :-1, 0],
                                   -np.broadcast_to(posenc.alibi_slopes(heads)[:, None],
                                                    (heads, n - 1)), rtol=1e-12)


@given(n=st.integers(1, 30), heads=st.integers(1, 16))
def test_symmetric_variant_is_minus_m_times_abs_distance(n, heads):
    sym = posenc.alibi_bias(n, heads, causal=False)
    causal = posenc.alibi_bias(n, heads)
    np.testing.assert_array_equal(sym, np.swapaxes(sym, 1, 2))
    below = np.tril_indices(n)
    np.testing.assert_array_equal(sym[:, below[0], below[1]], causal[:, below[0], below[1]])
    assert np.all(np.isfinite(sym))


def test_empty_sequence():
    assert posenc.alibi_bias(0, 4).shape == (4, 0, 0)


def test_bad_arguments_raise_with_named_messages():
    with pytest.raises(ValueError, match=r"n_heads must be >= 1, got 0"):
        posenc.alibi_slopes(0)
    with pytest.raises(TypeError, match=r"n_heads must be an integer, got float 8.0"):
        posenc.alibi_slopes(8.0)
    with pytest.raises(TypeError, match=r"n_heads must be an integer, got bool True"):
        posenc.alibi_slopes(True)
    with pytest.raises(ValueError, match=r"n_positions must be non-negative, got -1"):
        posenc.alibi_bias(-1, 8)
    with pytest.raises(TypeError, match=r"n_positions must be an integer, got float 4.5"):
        posenc.alibi_bias(4.5, 8)
    with pytest.raises(ValueError, match=r"n_heads must be >= 1, got -2"):
        posenc.alibi_bias(4, -2)
    with pytest.raises(TypeError, match=r"causal must be True or False, got str 'no'"):
        posenc.alibi_bias(4, 8, causal="no")
    with pytest.raises(TypeError, match=r"causal must be True or False, got int 0"):
        posenc.alibi_bias(4, 8, causal=0)


# -- ALiBi and the chapter: the bias ties attention to positions ---------------------------------


def _attend(x, attn, bias=None, causal=False):
    out, _ = posenc.scaled_dot_product_attention(x @ attn.w_q, x @ attn.w_k, x @ attn.w_v,
                                                 causal=causal, bias=bias)
    return out


def _keeps_distances(perm):
    p = np.asarray(perm)
    return np.array_equal(np.abs(np.subtract.outer(p, p)),
                          np.abs(np.subtract.outer(np.arange(len(p)), np.arange(len(p)))))


@SETTINGS
@given(st.permutations(list(range(5))), st.integers(0, 2**31 - 1))
def test_adding_the_bias_breaks_permutation_equivariance(perm, seed):
    """Without a bias attention is equivariant; with the (symmetric) ALiBi bias it is not,
    except for the permutations that keep every distance |i - j|: the identity and the
    reversal (which is why the symmetric variant cannot tell a sentence from its reverse)."""
    x = np.random.default_rng(seed).normal(size=(5, 8))
    attn = posenc.SelfAttention(8, seed=seed % 1000)
    bias = posenc.alibi_bias(5, 4, causal=False)[0]          # slope 1/4
    np.testing.assert_allclose(_attend(x[perm], attn), _attend(x, attn)[perm], atol=1e-12)
    gap = np.abs(_attend(x[perm], attn, bias) - _attend(x, attn, bias)[perm]).max()
    if _keeps_distances(perm):
        assert gap < 1e-12
    else:
        assert gap > 1e-6


def test_causal_alibi_tells_dog_bites_man_from_man_bites_dog_and_changes_the_weights():
    """The paper's causal form separates the chapter's two sentences, and its bias adds to
    what the causal mask alone does; the symmetric variant cannot separate a reversal."""
    attn = posenc.SelfAttention(16, seed=0)
    a = posenc.token_embeddings(["dog", "bites", "man"], 16)
    b = a[::-1]
    swap = [2, 1, 0]
    head_1 = posenc.alibi_bias(3, 8)[0]
    assert np.abs(_attend(b, attn, head_1)[swap] - _attend(a, attn, head_1)).max() > 1e-3
    assert np.abs(_attend(a, attn, head_1) - _attend(a, attn, causal=True)).max() > 1e-3
    sym = posenc.alibi_bias(3, 8, causal=False)[0]
    np.testing.assert_allclose(_attend(b, attn, sym), _attend(a, attn, sym)[swap], atol=1e-12)


def test_causal_bias_includes_the_causal_mask():
    """'the bias has -inf above the diagonal, so adding it also applies the causal mask'."""
    r = np.random.default_rng(7)
    q, k, v = r.normal(size=(3, 6, 4))
    bias = posenc.alibi_bias(6, 8)[2]
    masked, w = posenc.scaled_dot_product_attention(q, k, v, bias=bias)
    finite = np.where(np.isfinite(bias), bias, 0.0)
    ref, w_ref = posenc.scaled_dot_product_attention(q, k, v, causal=True, bias=finite)
    np.testing.assert_allclose(w, w_ref, atol=1e-15)
    np.testing.assert_allclose(masked, ref, atol=1e-15)
    assert np.all(w[np.triu_indices(6, 1)] == 0)


# -- the figure -----------------------------------------------------------------------------------


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_figure_draws_in_both_languages(lang):
    handler = _Collect()
    logger = logging.getLogger("matplotlib")
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            pf.set_language(lang)
            fig = pf.alibi_bias_figure(12, 8)
            buf = io.BytesIO()
            pf.save_figure(fig, buf)      # draws every glyph
    finally:
        logger.removeHandler(handler)
        pf.set_language("en")
    assert handler.records == []
    assert buf.getvalue()[:4] == b"\x89PNG"
    assert fig.get_facecolor() == (1.0, 1.0, 1.0, 1.0)
    matrix, lines = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    words = []
    for ax in (matrix, lines):
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
        words += [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
    words += [t.get_text() for t in lines.get_legend().get_texts()]
    assert bool(CJK.search(" ".join(words))) == (lang == "zh")
    # the heatmap is head 1 of the causal bias, the future left blank; one line per head
    shown = matrix.images[0].get_array()
    bias = posenc.alibi_bias(12, 8)[0]
    np.testing.assert_array_equal(np.ma.getmaskarray(shown) | np.isnan(shown.data),
                                  ~np.isfinite(bias))
    assert len(lines.get_lines()) == 8 + 1                     # 8 heads and the zero line
    for line, m in zip(lines.get_lines(), posenc.alibi_slopes(8)):
        np.testing.assert_allclose(line.get_ydata(), -m * line.get_xdata())


def test_figure_is_deterministic_and_validates():
    pf.set_language("zh")
    try:
        assert pf.figure_to_png(pf.alibi_bias_figure(6, 4)) == pf.figure_to_png(pf.alibi_bias_figure(6, 4))
    finally:
        pf.set_language("en")
    with pytest.raises(ValueError, match=r"n_positions must be >= 2, got 1"):
        pf.alibi_bias_figure(1, 8)
    with pytest.raises(ValueError, match=r"n_heads must be >= 1, got 0"):
        pf.alibi_bias_figure(6, 0)
