"""The chapter naive-encodings: the requirement checkers and the findings the page states.

Every verdict in the page's requirements table comes from a checker in
:mod:`posenc.analysis.requirements`; these tests pin each verdict for each encoding, show each
checker failing on a deliberately broken encoding (and passing on the sinusoid), check
the argument validation, and pin the numbers the page builds its argument on.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.analysis import requirements as R

ENC = R.standard_encodings(16)

# The table of the page: True = ✓.
EXPECTED = {
    "unique": dict(index=True, normalized=True, binary=True, sinusoidal=True),
    "bounded": dict(index=False, normalized=True, binary=True, sinusoidal=True),
    "same_across_lengths": dict(index=True, normalized=False, binary=True, sinusoidal=True),
    "smooth": dict(index=True, normalized=True, binary=False, sinusoidal=True),
    "relative_shift": dict(index=False, normalized=False, binary=False, sinusoidal=True),
    "extrapolates": dict(index=False, normalized=False, binary=True, sinusoidal=True),
}


@pytest.fixture(scope="module")
def scores():
    return R.score_requirements(ENC)


@pytest.mark.parametrize("req", list(EXPECTED))
@pytest.mark.parametrize("enc", list(ENC))
def test_each_checker_gives_the_expected_verdict(scores, req, enc):
    verdict = scores[req][enc]
    assert verdict.passed is EXPECTED[req][enc], (req, enc, verdict)
    assert bool(verdict) is verdict.passed


def test_only_the_sinusoid_meets_every_requirement(scores):
    full = [e for e in ENC if all(scores[r][e].passed for r in scores)]
    assert full == ["sinusoidal"]


# -- deliberately broken encodings: each checker must catch its own failure -----------

def _sin_at(positions, d=16, base=10000.0):
    """Sinusoid rows at arbitrary (real) positions."""
    w = posenc.inverse_frequencies(d, base)
    a = np.asarray(positions, dtype=np.float64)[:, None] * w
    out = np.empty((a.shape[0], d))
    out[:, 0::2], out[:, 1::2] = np.sin(a), np.cos(a)
    return out


def periodic(n):          # every pair turns with period 8: position p and p + 8 collide
    a = 2 * np.pi * np.arange(n)[:, None] / 8 * np.ones(8)
    return np.concatenate([np.sin(a), np.cos(a)], axis=1)


def growing(n):           # a sinusoid whose amplitude grows with the position
    return _sin_at(np.arange(n)) * np.sqrt(1 + np.arange(n))[:, None]


def length_dependent(n):  # a sinusoid of the normalised position: depends on n
    return _sin_at(1000 * np.arange(n) / max(n - 1, 1))


def strided(n):           # the sinusoid at positions 0, 97, 194, ...: neighbours far apart
    return _sin_at(97 * np.arange(n))


def sines_only(n):        # the counter made smooth: only sines, no cosine partners
    return np.sin(np.arange(n)[:, None] * 10000.0 ** (-np.arange(16) / 16))


def noisy(n):             # a fresh random table on every call: not deterministic
    return _sin_at(np.arange(n)) + np.random.default_rng().normal(0, 1e-3, (n, 16))


def wrapping(n):          # an 8-bit counter: positions 256 and up reuse codes
    return posenc.binary_encoding(n, 8)


BROKEN = {
    R.check_unique: periodic,
    R.check_bounded: growing,
    R.check_same_across_lengths: length_dependent,
    R.check_smooth: strided,
    R.check_relative_shift: sines_only,
    R.check_extrapolates: noisy,
}


@pytest.mark.parametrize("check", list(BROKEN), ids=lambda c: c.__name__)
def test_each_checker_fails_a_broken_encoding_and_passes_the_sinusoid(check):
    assert not check(BROKEN[check]).passed
    assert check(ENC["sinusoidal"]).passed


def test_the_strided_sinusoid_breaks_only_smoothness():
    results = {name: check(strided).passed for name, (check, *_l) in R.REQUIREMENTS.items()}
    assert results == {name: name != "smooth" for name in R.REQUIREMENTS}


def test_extrapolation_catches_a_wrapping_counter():
    v = R.check_extrapolates(wrapping, train_length=128, factor=4)
    assert not v.passed and v.reason == "new positions reuse the codes of old ones"
    assert R.check_extrapolates(wrapping, train_length=32, factor=4).passed


def test_sines_only_with_halving_frequencies_has_no_linear_shift():
    # omega_i = 1 / 2**i, sines only
    halving = lambda n: np.sin(np.arange(n)[:, None] / 2.0 ** np.arange(16))  # noqa: E731
    v = R.check_relative_shift(halving)
    assert not v.passed and v.score > 0.1


# -- properties over inputs -------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(d=st.integers(1, 12).map(lambda h: 2 * h),
       base=st.floats(2.0, 1e5),
       k=st.integers(1, 60))
def test_sinusoid_shift_is_linear_for_any_width_base_and_offset(d, base, k):
    table = functools.partial(posenc.sinusoidal_encoding, d_model=d, base=base)
    assert R.check_relative_shift(table, n_positions=200, shifts=(k,)).passed


@settings(max_examples=20, deadline=None)
@given(bits=st.integers(2, 9), extra=st.integers(0, 40))
def test_binary_is_unique_exactly_up_to_two_to_the_bits(bits, extra):
    table = functools.partial(posenc.binary_encoding, d_model=bits)
    assert R.check_unique(table, 2 ** bits).passed
    assert not R.check_unique(table, 2 ** bits + 1 + extra).passed


@settings(max_examples=20, deadline=None)
@given(short=st.integers(2, 50), extra=st.integers(1, 500))
def test_normalised_index_always_changes_with_the_length(short, extra):
    v = R.check_same_across_lengths(ENC["normalized"], short, short + extra)
    assert not v.passed
    # the last short position: 1 in the short sequence, (short-1)/(long-1) in the long one
    assert v.score == pytest.approx(1 - (short - 1) / (short + extra - 1))


@settings(max_examples=20, deadline=None)
@given(n=st.integers(2, 300), growth=st.integers(2, 12))
def test_index_grows_exactly_with_the_length(n, growth):
    v = R.check_bounded(ENC["index"], n, growth)
    assert v.score == pytest.approx((growth * n - 1) / (n - 1))


# -- argument validation ----------------------------------------------------------------

T = ENC["sinusoidal"]


@pytest.mark.parametrize("call, exc, match", [
    (lambda: R.check_unique(42), TypeError, "table must be a callable"),
    (lambda: R.check_unique(T, 1), ValueError, "n_positions must be >= 2"),
    (lambda: R.check_unique(T, 2.5), TypeError, "n_positions must be an integer"),
    (lambda: R.check_unique(T, tol=-1), ValueError, "tol must be >= 0"),
    (lambda: R.check_unique(lambda n: np.zeros(n)), ValueError, r"shape \(n, d\)"),
    (lambda: R.check_unique(lambda n: np.zeros((n + 1, 2))), ValueError, r"shape \(n, d\)"),
    (lambda: R.check_bounded(T, growth=1), ValueError, "growth must be >= 2"),
    (lambda: R.check_same_across_lengths(T, 10, 10), ValueError, "long_length must be >= 11"),
    (lambda: R.check_same_across_lengths(lambda n: np.zeros((n, n))), ValueError, "same width"),
    (lambda: R.check_smooth(T, 2), ValueError, "n_positions must be >= 3"),
    (lambda: R.check_smooth(T, max_ratio=0), ValueError, "max_ratio must be > 0"),
    (lambda: R.check_smooth(T, max_ratio="1"), TypeError, "max_ratio must be a real number"),
    (lambda: R.check_relative_shift(T, shifts=()), ValueError, "at least one offset"),
    (lambda: R.check_relative_shift(T, shifts=(0,)), ValueError, "shifts must be >= 1"),
    (lambda: R.check_relative_shift(T, n_positions=40), ValueError, "overdetermined"),
    (lambda: R.check_extrapolates(T, train_length=1), ValueError, "train_length must be >= 2"),
    (lambda: R.check_extrapolates(T, factor=1), ValueError, "factor must be >= 2"),
    (lambda: R.standard_encodings(7), ValueError, "positive even number"),
    (lambda: R.score_requirements([T]), TypeError, "encodings must be a dict"),
    (lambda: R.score_requirements({}), ValueError, "at least one encoding"),
    (lambda: R.score_requirements({"x": 1}), TypeError, r"encodings\['x'\] must be callable"),
    (lambda: R.requirements_table({}, language="fr"), ValueError, "language must be"),
    (lambda: R.requirements_table({"fast": {}}), ValueError, "unknown requirements"),
])
def test_bad_arguments_are_rejected_with_a_clear_message(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_table_renders_in_both_languages(scores):
    en = R.requirements_table(scores, "en")
    zh = R.requirements_table(scores, "zh")
    assert en.splitlines()[0] == "| Requirement | Index | Normalised | Binary | Sinusoidal |"
    assert zh.splitlines()[0] == "| 要求 | 索引 | 归一化 | 二进制 | 正弦 |"
    for table in (en, zh):
        rows = table.splitlines()[2:]
        assert len(rows) == 6
        assert [r.count("✓") for r in rows] == [sum(EXPECTED[q].values()) for q in EXPECTED]


def test_table_follows_the_figure_language_by_default(scores):
    import posenc.figures as pf

    before = pf.get_language()
    try:
        pf.set_language("zh")
        assert R.requirements_table(scores) == R.requirements_table(scores, "zh")
        pf.set_language("en")
        assert R.requirements_table(scores) == R.requirements_table(scores, "en")
    finally:
        pf.set_language(before)


# -- the page's findings -------------------------------------------------------------

def test_raw_index_drowns_the_token_embeddings():
    d, vocab = 64, 1000
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    table = torch.nn.Embedding(vocab, d).weight.detach().double().numpy()
    norms = np.linalg.norm(table, axis=1)
    pe = posenc.index_encoding(1001, d)
    np.testing.assert_allclose(np.linalg.norm(pe, axis=1), np.arange(1001) * np.sqrt(d))
    assert int(np.argmax(np.linalg.norm(pe, axis=1) > norms.max())) == 2
    x = table + pe[100]
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    assert (unit @ unit.T)[np.triu_indices(vocab, 1)].min() > 0.999
    assert posenc.index_encoding(1000, 1)[-1, 0] == 999       # not 1000


def test_normalised_three_apart_and_same_code():
    short = posenc.normalized_index_encoding(10, 1)[:, 0]
    long = posenc.normalized_index_encoding(1000, 1)[:, 0]
    assert short[5] - short[2] == pytest.approx(1 / 3)
    assert long[5] - long[2] == pytest.approx(3 / 999)
    assert int(np.flatnonzero(np.isclose(long, short[3]))[0]) == 333


@given(short=st.integers(2, 100), extra=st.integers(1, 1000))
def test_normalised_step_is_larger_in_short_sequences(short, extra):
    """Neighbours do not differ *less* in a short sequence. They differ more."""
    a = posenc.normalized_index_encoding(short, 1)[:, 0]
    b = posenc.normalized_index_encoding(short + extra, 1)[:, 0]
    assert a[1] - a[0] > b[1] - b[0]


def test_binary_neighbours_can_differ_in_every_bit():
    codes = posenc.binary_encoding(64, 6)
    diff = lambda p, q: int(np.sum(codes[p] != codes[q]))  # noqa: E731
    assert (diff(7, 8), diff(8, 9), diff(0, 8)) == (4, 1, 1)
    steps = np.linalg.norm(np.diff(codes, axis=0), axis=1)
    # p -> p + 1 flips the trailing ones of p and one more bit
    p = np.arange(63)
    trailing_ones = np.array([len(bin(q)) - len(bin(q).rstrip("1")) for q in p])
    np.testing.assert_allclose(steps, np.sqrt(trailing_ones + 1))


@given(bits=st.integers(1, 10))
def test_rows_read_backwards_are_numerals_and_the_low_bits_flip_fastest(bits):
    """Column 0 is the least significant bit, so a row read right to left is p in binary
    (left to right it is the numeral reversed). Column j flips every 2**j steps: the low
    bits are the fast ones, not the slow ones."""
    n = 2 ** (bits + 1)                      # two rounds of the counter
    codes = posenc.binary_encoding(n, bits).astype(int)
    numerals = ["".join(map(str, row[::-1])) for row in codes]
    assert numerals == [format(p % 2 ** bits, f"0{bits}b") for p in range(n)]
    changes = np.diff(codes, axis=0) != 0
    every = [np.unique(np.diff(np.flatnonzero(changes[:, j]))).tolist() for j in range(bits)]
    assert every == [[2 ** j] for j in range(bits)]
    flips_per_column = changes.sum(axis=0)
    assert np.all(np.diff(flips_per_column) < 0)       # fewer flips towards the high bits


def test_page_row_5_is_0101_backwards_and_the_flip_periods():
    bits = posenc.binary_encoding(32, 4).astype(int)
    assert bits[5].tolist() == [1, 0, 1, 0]
    assert "".join(map(str, bits[5][::-1])) == "0101" == format(5, "04b")
    assert "".join(map(str, bits[5])) != format(5, "04b")    # left to right: reversed
    changes = np.diff(bits, axis=0) != 0
    every = [np.unique(np.diff(np.flatnonzero(changes[:, j]))).tolist() for j in range(4)]
    assert every == [[1], [2], [4], [8]]


@given(bits=st.integers(1, 12))
def test_each_bit_is_the_sign_of_a_sine_of_the_same_period(bits):
    n = 2 ** bits
    codes = posenc.binary_encoding(n, bits).astype(bool)
    p = np.arange(n)[:, None]
    j = np.arange(bits)[None, :]
    np.testing.assert_array_equal(codes, np.sin(np.pi * (p + 0.5) / 2.0 ** j) < 0)


# -- the figure functions of posenc.figures.naive_pages --------------------------------

import posenc.figures as pf  # noqa: E402
from posenc.figures import naive_pages as nf  # noqa: E402


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_figure_draws_in_both_languages_without_warnings(lang):
    """Rendered to PNG in Chinese (a missing glyph would warn); built only in English."""
    import warnings

    before = pf.get_language()
    pf.set_language(lang)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            p = np.arange(50)
            figs = [
                nf.index_magnitude_figure(p, 8.0 * p, [7.0, 9.0], np.linspace(0, 1, 50)),
                nf.normalized_gap_figure(10, 1000, 3),
                nf.binary_distance_figure(6, 8),
                nf.counter_waves_figure(32, 4),
                nf.one_frequency_circles_figure((1.0, 0.05), 50),
                nf.frequency_variants_figure(512),
                nf.log_space_error_figure(np.full(8, 3e-7), np.full(8, 3e-8), 16),
                nf.turns_within_figure(196, 1024),
            ]
            if lang == "zh":
                for fig in figs:
                    assert pf.figure_to_png(fig)[:4] == b"\x89PNG"
    finally:
        pf.set_language(before)
    titles = " ".join(ax.get_title() for ax in figs[2].axes)
    assert ("距离" in titles) == (lang == "zh")


@pytest.mark.parametrize("call, exc, match", [
    (lambda: nf.index_magnitude_figure([0, 1], [0, 1, 2], [1.0], [0, 1]), ValueError, "one shape"),
    (lambda: nf.normalized_gap_figure(10, 1000, 0), ValueError, "gap must be >= 1"),
    (lambda: nf.normalized_gap_figure(3, 1000, 3), ValueError, "short must be >= 4"),
    (lambda: nf.normalized_gap_figure(10, 10, 3), ValueError, "long must be >= 11"),
    (lambda: nf.normalized_gap_figure(10.0, 100, 3), TypeError, "short must be an integer"),
    (lambda: nf.binary_distance_figure(13, 8), ValueError, "n_bits must be <= 12"),
    (lambda: nf.binary_distance_figure(0, 0), ValueError, "n_bits must be >= 1"),
    (lambda: nf.binary_distance_figure(3, 8), ValueError, "reference must be < 2"),
    (lambda: nf.counter_waves_figure(1, 2), ValueError, "n_positions must be >= 2"),
    (lambda: nf.counter_waves_figure(16, 9), ValueError, "n_bits must be <= 8"),
    (lambda: nf.one_frequency_circles_figure((), 10), ValueError, "omegas must be"),
    (lambda: nf.one_frequency_circles_figure((1.0, -1.0), 10), ValueError, "omegas must be"),
    (lambda: nf.one_frequency_circles_figure((1.0,), 1), ValueError, "n_positions must be >= 2"),
    (lambda: nf.frequency_variants_figure(7), ValueError, "positive even number"),
    (lambda: nf.frequency_variants_figure(8, top=5.0), ValueError, "top must be > 2 pi"),
    (lambda: nf.log_space_error_figure(np.zeros(3), np.zeros(4), 8), ValueError, r"shape \(4,\)"),
    (lambda: nf.turns_within_figure(1, 8), ValueError, "n_positions must be >= 2"),
    (lambda: nf.turns_within_figure(10, 8, base=1.0), ValueError, "base must be > 1"),
])
def test_figure_arguments_are_validated(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
