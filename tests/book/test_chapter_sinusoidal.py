"""The chapter sinusoidal: the statements the page makes, and the common errors it shows.

Each test pins one finding of ``docs/*/sinusoidal.md`` independently of the page's cells,
so that a change to the library (or to the page) that breaks the argument fails here.
Each error is named in the test's docstring as the page states it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
import posenc.figures as pf
from posenc.analysis import requirements as R
from posenc.torch import SinusoidalPositionalEncoding

evens = st.integers(1, 512).map(lambda h: 2 * h)
bases = st.floats(1.5, 1e6)


# -- the formula and its index ranges ----------------------------------------------

def test_i_am_a_robot_table_is_sin_cos_of_p_and_p_over_10():
    pe = posenc.sinusoidal_encoding(4, 4, base=100)
    p = np.arange(4)
    expected = np.stack([np.sin(p), np.cos(p), np.sin(0.1 * p), np.cos(0.1 * p)], axis=1)
    np.testing.assert_allclose(pe, expected, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(pe[0], [0, 1, 0, 1])


@given(d=evens, base=bases)
def test_pair_index_runs_to_d_over_2_minus_1(d, base):
    """A table row "i = d/2" would need columns d and d+1, which do not exist."""
    w = posenc.inverse_frequencies(d, base)
    assert w.shape == (d // 2,)
    assert w[-1] == pytest.approx(base ** (-(d - 2) / d), rel=1e-12)
    # the last pair, i = d/2 - 1, fills the last two columns of the table
    row = posenc.sinusoidal_encoding(2, d, base)[1]
    assert row[-2:] == pytest.approx([math.sin(w[-1]), math.cos(w[-1])], abs=1e-15)
    # the phantom pair i = d/2 would turn at 1/base, one factor base**(2/d) slower
    assert w[-1] * base ** (-2 / d) == pytest.approx(1 / base, rel=1e-12)
    with pytest.raises(IndexError):
        posenc.sinusoidal_encoding(1, d, base)[:, 2 * (d // 2)]


@settings(max_examples=50, deadline=None)
@given(d=evens, p=st.integers(0, 1000))
def test_sine_goes_to_the_even_columns_of_every_position(d, p):
    """"Even" and "odd" are columns, not positions: every row has sines and cosines."""
    w = posenc.inverse_frequencies(d)
    row = posenc.sinusoidal_encoding(p + 1, d)[p]
    np.testing.assert_allclose(row[0::2], np.sin(p * w), rtol=0, atol=1e-12)
    np.testing.assert_allclose(row[1::2], np.cos(p * w), rtol=0, atol=1e-12)
    np.testing.assert_allclose(row[0::2] ** 2 + row[1::2] ** 2, 1.0, rtol=0, atol=1e-12)


def test_page_odd_position_3_has_its_sines_in_the_even_columns():
    pe8 = posenc.sinusoidal_encoding(4, 8)
    w8 = posenc.inverse_frequencies(8)
    np.testing.assert_allclose(pe8[3, 0::2], np.sin(3 * w8), atol=1e-15)
    assert not np.allclose(pe8[3, 0::2], np.cos(3 * w8), atol=1e-3)


@given(d=evens.filter(lambda d: d >= 4), base=bases)
def test_i_is_the_pair_index_not_the_dimension(d, base):
    """The paper calls i "the dimension"; in its formula columns 2i and 2i+1 share omega_i."""
    w = posenc.inverse_frequencies(d, base)
    row = posenc.sinusoidal_encoding(2, d, base)[1]      # angles 1 * omega_i <= 1 rad
    np.testing.assert_allclose(np.arcsin(row[0::2]), w, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(np.arccos(np.clip(row[1::2], -1, 1)), w, rtol=1e-6, atol=1e-7)
    # reading i as the column: column j = 1 would get omega_1, but it carries omega_0
    assert np.arccos(row[1]) == pytest.approx(w[0]) and w[1] < w[0]


@given(d=evens)
def test_a_listing_omega_0_to_omega_d_is_one_column_too_wide(d):
    """A d x 1 vector listed as omega_0 ... omega_d would have d + 1 entries."""
    n = 3
    pe = posenc.sinusoidal_encoding(n, d)
    listed = np.sin(np.arange(n)[:, None] * np.exp2(-np.arange(d + 1.0)))  # omega_0 .. omega_d
    assert listed.shape[1] == pe.shape[1] + 1
    with pytest.raises(ValueError):
        pe + listed                          # cannot be added to a d-wide embedding


@given(d=evens)
def test_range_one_short_leaves_the_last_two_columns_unwritten(d):
    """The range "0 <= i < d_model/2 - 1" skips pair d/2 - 1."""
    one_short = np.arange(d // 2 - 1)
    filled = set(2 * one_short) | set(2 * one_short + 1)
    assert len(filled) == d - 2
    assert sorted(set(range(d)) - filled) == [d - 2, d - 1]


@settings(max_examples=50)
@given(L=st.integers(2, 500))
def test_half_range_of_positions_misses_half_the_tokens(L):
    """A range "0 <= k < L/2" for the positions; every one of the L positions has a row."""
    full = posenc.sinusoidal_encoding(L, 8)
    half = posenc.sinusoidal_encoding(L // 2, 8)
    assert full.shape[0] == L and half.shape[0] == L // 2
    np.testing.assert_array_equal(full[: L // 2], half)   # the same rows, as far as they go
    missing = full[L // 2:]
    assert missing.shape[0] == L - L // 2 >= L / 2
    # the rows the half range leaves out are new codes, not repeats of the ones it keeps
    gaps = np.linalg.norm(missing[:, None, :] - half[None, :, :], axis=2) if half.size else None
    assert gaps is None or gaps.min() > 0.5


def test_page_robot_sentence_has_twelve_characters_and_four_rows():
    """The table has one row per token, not per character."""
    sentence = "I am a robot"
    tokens = sentence.split()
    assert len(sentence) == 12 and len(tokens) == 4
    full = posenc.sinusoidal_encoding(len(tokens), 4, base=100)
    half = posenc.sinusoidal_encoding(len(tokens) // 2, 4, base=100)
    assert full.shape == (4, 4) and half.shape == (2, 4)
    assert tokens[half.shape[0]:] == ["a", "robot"]
    np.testing.assert_array_equal(posenc.inverse_frequencies(4, base=100), [1.0, 0.1])


# -- one frequency versus many ------------------------------------------------------

def _one_pair(omega, n):
    a = np.arange(n)[:, None] * omega
    return np.concatenate([np.sin(a), np.cos(a)], axis=1)


def test_large_omega_separates_neighbours_but_aliases_far_positions():
    """Not the other way round (large omega: neighbours alike; small: collisions)."""
    fast, slow = _one_pair(1.0, 1000), _one_pair(1e-4, 1000)
    assert np.linalg.norm(fast[1] - fast[0]) == pytest.approx(2 * math.sin(0.5))
    close = posenc.closest_pair(fast)
    assert close.j - close.i == 710 and close.distance < 1e-4     # 710 ~ 113 * 2 pi
    assert np.linalg.norm(slow[1] - slow[0]) == pytest.approx(1e-4, rel=1e-6)
    assert posenc.closest_pair(slow).j - posenc.closest_pair(slow).i == 1
    assert posenc.closest_pair(posenc.sinusoidal_encoding(1000, 16)).distance > 1.0


def test_page_lone_sine_twins_at_omega_1e_minus_4():
    """The page's numbers for the small-omega conclusion (a lone sine, omega = 1e-4)."""
    w, p = 1e-4, 10_000
    mirror = round(math.pi / w) - p
    assert mirror == 21416
    pe = posenc.sinusoidal_encoding(mirror + 1, 4, base=1e8)   # pair 1 turns at 1e-4
    assert posenc.inverse_frequencies(4, base=1e8)[1] == pytest.approx(w, rel=1e-15)
    sin_p, sin_m = pe[p, 2], pe[mirror, 2]
    assert round(sin_p, 5) == round(sin_m, 5) == 0.84147
    assert abs(sin_p - sin_m) < abs(pe[p + 1, 2] - pe[p, 2]) / 10     # closer than neighbours
    assert pe[p, 3] == pytest.approx(-pe[mirror, 3], abs=1e-5)        # cos: +0.540 / -0.540
    assert np.linalg.norm(pe[p, 2:] - pe[mirror, 2:]) == pytest.approx(1.0806, abs=1e-4)


@settings(max_examples=40, deadline=None)
@given(w=st.floats(1e-4, 0.5), frac=st.floats(0.05, 0.9))
def test_small_omega_lone_sine_collides_and_its_cosine_separates(w, frac):
    """The small-omega conclusion: true for a lone sine (p and pi/w - p share a value); false for
    a (sin, cos) pair until a whole turn."""
    p = int(frac * math.pi / (4 * w))            # before the peak, where cos > 0.7
    mirror = round(math.pi / w) - p
    assert mirror > p + 1
    pe = posenc.sinusoidal_encoding(mirror + 1, 4, base=w ** -2.0)   # pair 1: omega = w
    sines, pair = pe[:, 2], pe[:, 2:]
    assert abs(sines[p] - sines[mirror]) <= w / 2 + 1e-12      # a twin far away
    assert np.linalg.norm(pair[p] - pair[mirror]) > 1.4 - w    # the cosine tells them apart
    # the pair does not come back within one turn: nothing is as close as a neighbour
    steps = np.linalg.norm(pair[p] - pair[:mirror + 1], axis=1)
    assert np.sort(steps)[1] == pytest.approx(2 * math.sin(w / 2), rel=1e-6)


# -- wavelengths -------------------------------------------------------------------

@settings(max_examples=50)
@given(d=evens, base=bases)
def test_largest_wavelength_is_one_factor_short_of_two_pi_base(d, base):
    """The paper: "from 2 pi to 10000 * 2 pi". Its formula's last pair is i = d/2 - 1."""
    lam = posenc.wavelengths(d, base)
    assert lam[0] == pytest.approx(2 * math.pi)
    assert lam[-1] == pytest.approx(2 * math.pi * base ** ((d - 2) / d), rel=1e-12)
    assert lam[-1] < 2 * math.pi * base
    assert lam[-1] * base ** (2 / d) == pytest.approx(2 * math.pi * base, rel=1e-12)
    if d > 2:
        np.testing.assert_allclose(lam[1:] / lam[:-1], base ** (2 / d), rtol=1e-12)


def test_the_numbers_for_d_512():
    lam = posenc.wavelengths(512)
    quoted = 2 * math.pi * 10000
    assert lam[-1] == pytest.approx(60611.477, abs=1e-3)
    assert quoted - lam[-1] == pytest.approx(2220.376, abs=1e-3)
    assert quoted / lam[-1] == pytest.approx(1.036633, abs=1e-6)


def test_tensor2tensor_spacing_reaches_exactly_two_pi_times_10000():
    i = np.arange(256)
    t2t = 2 * math.pi * 10000.0 ** (i / 255)
    assert t2t[-1] == pytest.approx(2 * math.pi * 10000, rel=1e-14)
    assert t2t[-1] > posenc.wavelengths(512)[-1]


# -- one row across the columns ---------------------------------------------------

@given(d=evens)
def test_row_of_position_0_is_flat_zero_one(d):
    """A row is not "a different sine wave" per position; row 0 is 0, 1, 0, 1, ..."""
    np.testing.assert_array_equal(posenc.sinusoidal_encoding(1, d)[0],
                                  np.tile([0.0, 1.0], d // 2))


@settings(max_examples=50)
@given(d=st.integers(8, 512).map(lambda h: 2 * h), base=st.floats(10.0, 1e5), data=st.data())
def test_a_row_is_a_chirp_not_a_sine_of_the_column_index(d, base, data):
    """Along row p the angle step from pair to pair shrinks by base**(2/d) at every pair."""
    r = base ** (-2 / d)
    p = data.draw(st.integers(1, max(1, int(math.pi / (1 - r)) - 1)))   # steps < pi
    row = posenc.sinusoidal_encoding(p + 1, d, base)[p]
    phase = np.unwrap(np.arctan2(row[0::2], row[1::2]))
    steps = -np.diff(phase)
    w = posenc.inverse_frequencies(d, base)
    np.testing.assert_allclose(steps, p * (w[:-1] - w[1:]), rtol=1e-6, atol=1e-12)
    assert steps[0] / steps[-1] == pytest.approx(r ** -(d // 2 - 2), rel=1e-6)
    assert steps[0] > 2 * steps[-1]          # a sine of the column index: constant step


@given(p=st.integers(4, 300))
def test_row_sign_changes_crowd_on_the_left(p):
    """For p < pi * 100 the sines of a d = 512 row change sign only in the left half."""
    s = posenc.sinusoidal_encoding(p + 1, 512)[p, 0::2]
    flips = np.flatnonzero(np.diff(np.sign(s)))
    assert flips.size >= 1 and flips.max() < 128


def test_page_row_12_sign_changes_and_half_waves():
    s = posenc.sinusoidal_encoding(13, 512)[12, 0::2]
    flips = 2 * (np.flatnonzero(np.diff(np.sign(s))) + 1)
    assert flips.tolist() == [14, 36, 76]
    assert np.diff(flips).tolist() == [22, 40]


@pytest.mark.parametrize("call, exc, match", [
    (lambda: pf.row_across_columns_figure(()), ValueError, "positions must have 1 to 6"),
    (lambda: pf.row_across_columns_figure(range(7)), ValueError, "positions must have 1 to 6"),
    (lambda: pf.row_across_columns_figure((0, 1.5)), TypeError, "positions must be integers"),
    (lambda: pf.row_across_columns_figure((0, -1)), ValueError, "positions must be >= 0"),
    (lambda: pf.row_across_columns_figure((0,), d_model=7), ValueError, "positive even"),
    (lambda: pf.row_across_columns_figure((0,), base=1.0), ValueError, "base must be > 1"),
])
def test_row_figure_arguments_are_validated(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_row_figure_draws_the_rows_it_is_asked_for():
    fig = pf.row_across_columns_figure((0, 12), d_model=64)
    pe = posenc.sinusoidal_encoding(13, 64)
    assert len(fig.axes) == 2
    np.testing.assert_array_equal(fig.axes[1].lines[0].get_ydata(), pe[12, 0::2])
    np.testing.assert_array_equal(fig.axes[1].lines[1].get_ydata(), pe[12, 1::2])
    np.testing.assert_array_equal(fig.axes[1].lines[0].get_xdata(), np.arange(0, 64, 2))
    assert len(pf.row_across_columns_figure((1, 2, 3)).axes) == 3


# -- two spectra that are not the paper's ------------------------------------------

def test_halving_frequencies_leave_most_columns_flat():
    d = 512
    j = np.arange(d)
    assert 2 * math.pi * 2.0 ** j[-1] == pytest.approx(4.2121870893e154, rel=1e-9)
    flat = int(np.sum(10_000 / 2.0 ** j < 1e-3))
    assert flat == 488
    p = np.arange(10_000)[:, None]
    assert np.abs(np.sin(p / 2.0 ** j[-flat:])).max() < 1e-3


def test_base_1000_shortens_the_longest_wavelength_tenfold():
    d = 512
    thousand = 2 * math.pi * 1000.0 ** (np.arange(d) / (d - 1))
    assert thousand[-1] == pytest.approx(2 * math.pi * 1000)
    assert posenc.wavelengths(d)[-1] / thousand[-1] == pytest.approx(9.6466, abs=1e-4)


def test_sines_only_has_no_linear_shift_but_pairs_do():
    def sines_only(n):
        return np.sin(np.arange(n)[:, None] / 2.0 ** np.arange(16))

    no_cos = R.check_relative_shift(sines_only)
    assert not no_cos.passed and no_cos.score > 0.3
    assert R.check_relative_shift(R.standard_encodings(16)["sinusoidal"]).score < 1e-12


def test_last_frequency_is_1e_minus_4_not_1e_minus_3():
    """The last pair for d = 512 is not sin(0.001 * p); 0.001 belongs to base 1000."""
    w = posenc.inverse_frequencies(512)
    assert w[-1] == pytest.approx(1.0366329284e-4, rel=1e-9)
    assert 0.001 / w[-1] == pytest.approx(9.6466, abs=1e-4)
    assert 1000.0 ** (-510 / 512) == pytest.approx(0.001, rel=0.03)   # base 1000's value


# -- the "log trick" ----------------------------------------------------------------

@pytest.fixture(scope="module")
def log_vs_power():
    from decimal import Decimal, getcontext

    d, base = 512, 10000.0
    two_i = np.arange(0, d, 2)
    getcontext().prec = 50
    exact = [Decimal(10000) ** (Decimal(-int(k)) / d) for k in two_i]

    def err(values):
        return np.array([float(abs(Decimal(float(v)) - e) / e) for v, e in zip(values, exact)])

    def ulps(values):
        return np.array([float(abs(Decimal(float(v)) - e) / Decimal(float(np.spacing(v))))
                         for v, e in zip(values, exact)])

    k = torch.arange(0, d, 2, dtype=torch.float32)
    f32_power = (base ** (-k / d)).numpy()
    f32_log = torch.exp(k * (-math.log(base) / d)).numpy()
    return {
        "f64_power": err(base ** (-two_i / d)),
        "f64_log": err(np.exp(two_i * (-math.log(base) / d))),
        "f32_power": err(f32_power),
        "f32_log": err(f32_log),
        "f32_power_ulps": ulps(f32_power),
        "f32_log_ulps": ulps(f32_log),
    }


def test_log_trick_is_not_more_accurate(log_vs_power):
    """Is the exp-of-log form more accurate or more stable? Measured: it is the less
    accurate form."""
    eps32 = float(np.finfo(np.float32).eps)
    assert log_vs_power["f64_power"].max() < 1e-15
    assert log_vs_power["f64_log"].max() < 1e-14
    assert log_vs_power["f32_power"].max() <= eps32 / 2      # within half a float32 step
    assert log_vs_power["f32_log"].max() > 4 * eps32          # several steps off
    assert log_vs_power["f32_log"].max() > 8 * log_vs_power["f32_power"].max()
    assert log_vs_power["f32_log"].max() < 1e-6               # but still tiny


def test_float32_power_is_nearly_but_not_always_correctly_rounded(log_vs_power):
    """The page says "nearly correctly rounded": most values are the nearest float32, the
    rest miss by a hair over half an ulp; the log form misses most of them."""
    power, log = log_vs_power["f32_power_ulps"], log_vs_power["f32_log_ulps"]
    assert power.size == log.size == 256
    assert 240 <= int(np.sum(power <= 0.5)) < 256
    assert 0.5 < power.max() < 0.6
    assert int(np.sum(log <= 0.5)) < 128 and log.max() > 2
    # not because of the exponent: -2i/d is exact in float32 for d = 512
    k = torch.arange(0, 512, 2, dtype=torch.float32)
    np.testing.assert_array_equal((-k / 512).double().numpy(), -np.arange(0, 512, 2) / 512)


def test_frequency_errors_are_below_float32_angle_rounding_at_5000(log_vs_power):
    p = 4999
    w = posenc.inverse_frequencies(512)
    half_spacing = float(np.spacing(np.float32(p))) / 2
    for key in ("f32_log", "f32_power"):
        assert np.max(p * w * log_vs_power[key]) < half_spacing


def test_4999_is_exact_and_the_page_bound_is_half_the_spacing_there():
    """4999 itself is a float32 number; half the spacing near it bounds the rounding of
    any other angle of that size."""
    assert float(np.float32(4999)) == 4999.0
    half = float(np.spacing(np.float32(4999))) / 2
    assert half == 2.0 ** -12
    angles = np.float32(4999) * posenc.inverse_frequencies(8).astype(np.float32)[:1]
    assert float(abs(np.float64(angles[0]) - 4999.0)) <= half
    between = np.linspace(4096.5, 8191.5, 1001)           # same binade as 4999
    assert np.max(np.abs(between.astype(np.float32).astype(np.float64) - between)) <= half


HEAD_WIDTHS = (64, 80, 96, 128, 256, 512)


def test_inverse_frequency_errors_agree_with_the_50_digit_reference(log_vs_power):
    from posenc.analysis.precision import inverse_frequency_errors

    err = inverse_frequency_errors(512)
    np.testing.assert_allclose(err["exp-log"], log_vs_power["f32_log"], rtol=0, atol=1e-13)
    np.testing.assert_allclose(err["power"], log_vs_power["f32_power"], rtol=0, atol=1e-13)


@pytest.mark.parametrize("d", HEAD_WIDTHS)
def test_exp_log_is_the_least_accurate_form_at_every_head_width(d):
    from posenc.analysis.precision import inverse_frequency_errors

    err = {name: float(e.max()) for name, e in inverse_frequency_errors(d).items()}
    assert err["exp-log"] > err["power"] and err["exp-log"] > err["inverse power"]
    assert err["exp-log"] < 1e-6                               # still tiny
    eps32 = float(np.finfo(np.float32).eps)
    if d & (d - 1) == 0:      # k / d exact: the power forms are within ~1.5 half-steps
        assert err["power"] <= eps32 / 2 and err["inverse power"] < 0.75 * eps32
        assert err["exp-log"] > 5 * max(err["power"], err["inverse power"])
    else:                     # k / d rounds in float32: every form errs by several half-steps
        assert min(err.values()) > 1.5 * eps32
        assert err["exp-log"] < 2 * min(err["power"], err["inverse power"])


@pytest.mark.parametrize("call, exc, match", [
    (lambda f: f(63), ValueError, "d_model"),
    (lambda f: f(64.0), TypeError, "d_model"),
    (lambda f: f(64, base=1.0), ValueError, "base"),
])
def test_inverse_frequency_errors_rejects_bad_arguments(call, exc, match):
    from posenc.analysis.precision import inverse_frequency_errors

    with pytest.raises(exc, match=match):
        call(inverse_frequency_errors)


# -- the PyTorch module -------------------------------------------------------------

def test_module_keeps_the_table_as_a_non_persistent_buffer():
    enc = SinusoidalPositionalEncoding(d_model=512, max_len=100, dropout=0.1)
    assert [n for n, _ in enc.named_buffers()] == ["pe"]
    assert list(enc.parameters()) == []
    assert list(enc.state_dict()) == []
    assert tuple(enc.pe.shape) == (100, 512)


def test_module_adds_the_table_in_eval_and_drops_out_in_train():
    torch.manual_seed(0)
    enc = SinusoidalPositionalEncoding(d_model=64, max_len=100, dropout=0.1)
    x = torch.randn(4, 50, 64)
    y = enc.eval()(x)
    ref = torch.from_numpy(posenc.sinusoidal_encoding(50, 64)).float()
    torch.testing.assert_close(y - x, ref.expand(4, -1, -1), atol=1e-6, rtol=0)
    zeroed = (enc.train()(x) == 0).float().mean().item()
    assert 0.08 < zeroed < 0.12


def test_module_extends_its_table_to_the_next_power_of_two():
    enc = SinusoidalPositionalEncoding(d_model=512, max_len=100).eval()
    out = enc(torch.zeros(1, 300, 512))
    assert out.shape == (1, 300, 512) and enc.pe.shape[0] == 512
    torch.testing.assert_close(out[0], torch.from_numpy(
        posenc.sinusoidal_encoding(300, 512)).float(), atol=1e-6, rtol=0)


def test_vit_large_shapes_and_pairs_completing_a_period():
    """Counting patches alone gives 0-195; ViT-L/16 also has a [CLS] token: 197 positions."""
    patches = (224 // 16) ** 2
    tokens = patches + 1
    assert (patches, tokens) == (196, 197)
    enc = SinusoidalPositionalEncoding(d_model=1024, max_len=tokens).eval()
    assert enc(torch.zeros(8, tokens, 1024)).shape == (8, 197, 1024)
    assert tuple(enc.pe.shape) == (197, 1024)             # positions 0 .. 196, columns 0 .. 1023
    assert posenc.inverse_frequencies(1024).size == 512
    turns = (patches - 1) * posenc.inverse_frequencies(1024) / (2 * math.pi)
    assert int(np.sum(turns >= 1)) == 191
    assert np.all(np.diff(turns) < 0)          # the ones that do are pairs 0 .. 190
    lam = posenc.wavelengths(1024)
    assert lam[190] <= 195 < lam[191]
