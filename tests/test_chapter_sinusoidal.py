"""The chapter sinusoidal: the statements the page makes, and the seed-note errors it shows.

Each test pins one finding of ``docs/*/sinusoidal.md`` independently of the page's cells,
so that a change to the library (or to the page) that breaks the argument fails here.
The seed notes are the study notes in ``shared/seeds``; their numbers are given in the
test names' docstrings.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import requirements as R
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
    """Seed 004's table row "i = d/2": that pair's columns d, d+1 do not exist."""
    w = posenc.inverse_frequencies(d, base)
    assert w.shape == (d // 2,)
    last = d // 2 - 1
    assert 2 * last + 1 == d - 1             # the last pair fills the last column
    assert 2 * (d // 2) >= d                 # "i = d/2" would start past the end
    with pytest.raises(IndexError):
        posenc.sinusoidal_encoding(1, d, base)[:, 2 * (d // 2)]


@given(d=evens)
def test_seed002_range_leaves_the_last_two_columns_unwritten(d):
    """Seed 002: "0 <= i < d_model/2 - 1" skips pair d/2 - 1."""
    one_short = np.arange(d // 2 - 1)
    filled = set(2 * one_short) | set(2 * one_short + 1)
    assert len(filled) == d - 2
    assert sorted(set(range(d)) - filled) == [d - 2, d - 1]


@given(L=st.integers(2, 500))
def test_seed000_half_range_of_positions_misses_half_the_tokens(L):
    """Seed 000: "0 <= k < L/2" for the positions; every one of the L positions has a row."""
    assert posenc.sinusoidal_encoding(L, 8).shape[0] == L
    assert len(range(L // 2)) < L


# -- one frequency versus many ------------------------------------------------------

def _one_pair(omega, n):
    a = np.arange(n)[:, None] * omega
    return np.concatenate([np.sin(a), np.cos(a)], axis=1)


def test_large_omega_separates_neighbours_but_aliases_far_positions():
    """Seed 001 says the opposite (large omega: neighbours alike; small: collisions)."""
    fast, slow = _one_pair(1.0, 1000), _one_pair(1e-4, 1000)
    assert np.linalg.norm(fast[1] - fast[0]) == pytest.approx(2 * math.sin(0.5))
    close = posenc.closest_pair(fast)
    assert close.j - close.i == 710 and close.distance < 1e-4     # 710 ~ 113 * 2 pi
    assert np.linalg.norm(slow[1] - slow[0]) == pytest.approx(1e-4, rel=1e-6)
    assert posenc.closest_pair(slow).j - posenc.closest_pair(slow).i == 1
    assert posenc.closest_pair(posenc.sinusoidal_encoding(1000, 16)).distance > 1.0


# -- wavelengths -------------------------------------------------------------------

@settings(max_examples=50)
@given(d=evens, base=bases)
def test_largest_wavelength_is_one_factor_short_of_two_pi_base(d, base):
    """Seeds 002 and 004: "from 2 pi to 10000 * 2 pi". The last pair is i = d/2 - 1."""
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


# -- seed 001's spectra -------------------------------------------------------------

def test_seed001_halving_frequencies_leave_most_columns_flat():
    d = 512
    j = np.arange(d)
    assert 2 * math.pi * 2.0 ** j[-1] == pytest.approx(4.2121870893e154, rel=1e-9)
    flat = int(np.sum(10_000 / 2.0 ** j < 1e-3))
    assert flat == 488
    p = np.arange(10_000)[:, None]
    assert np.abs(np.sin(p / 2.0 ** j[-flat:])).max() < 1e-3


def test_seed001_base_1000_shortens_the_longest_wavelength_tenfold():
    d = 512
    thousand = 2 * math.pi * 1000.0 ** (np.arange(d) / (d - 1))
    assert thousand[-1] == pytest.approx(2 * math.pi * 1000)
    assert posenc.wavelengths(d)[-1] / thousand[-1] == pytest.approx(9.6466, abs=1e-4)


def test_seed001_sines_only_has_no_linear_shift_but_pairs_do():
    def sines_only(n):
        return np.sin(np.arange(n)[:, None] / 2.0 ** np.arange(16))

    no_cos = R.check_relative_shift(sines_only)
    assert not no_cos.passed and no_cos.score > 0.3
    assert R.check_relative_shift(R.standard_encodings(16)["sinusoidal"]).score < 1e-12


def test_seed001_last_frequency_is_1e_minus_4_not_1e_minus_3():
    """Seed 001 writes the last pair for d = 512 as sin(0.0010 * pos)."""
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

    k = torch.arange(0, d, 2, dtype=torch.float32)
    return {
        "f64_power": err(base ** (-two_i / d)),
        "f64_log": err(np.exp(two_i * (-math.log(base) / d))),
        "f32_power": err((base ** (-k / d)).numpy()),
        "f32_log": err(torch.exp(k * (-math.log(base) / d)).numpy()),
    }


def test_log_trick_is_not_more_accurate(log_vs_power):
    """Seed 004: "Log Trick ... 提高数值稳定性". Measured: it is the less accurate form."""
    eps32 = float(np.finfo(np.float32).eps)
    assert log_vs_power["f64_power"].max() < 1e-15
    assert log_vs_power["f64_log"].max() < 1e-14
    assert log_vs_power["f32_power"].max() <= eps32          # within one float32 step
    assert log_vs_power["f32_log"].max() > 2 * eps32          # several steps off
    assert log_vs_power["f32_log"].max() > 3 * log_vs_power["f32_power"].max()
    assert log_vs_power["f32_log"].max() < 1e-6               # but still tiny


def test_frequency_errors_are_below_float32_angle_rounding_at_5000(log_vs_power):
    p = 4999
    w = posenc.inverse_frequencies(512)
    half_spacing = float(np.spacing(np.float32(p))) / 2
    for key in ("f32_log", "f32_power"):
        assert np.max(p * w * log_vs_power[key]) < half_spacing


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
    patches = (224 // 16) ** 2
    assert patches == 196
    enc = SinusoidalPositionalEncoding(d_model=1024, max_len=patches).eval()
    assert enc(torch.zeros(8, patches, 1024)).shape == (8, 196, 1024)
    turns = (patches - 1) * posenc.inverse_frequencies(1024) / (2 * math.pi)
    assert int(np.sum(turns >= 1)) == 191
    assert np.all(np.diff(turns) < 0)          # the ones that do are pairs 0 .. 190
    lam = posenc.wavelengths(1024)
    assert lam[190] <= 195 < lam[191]
