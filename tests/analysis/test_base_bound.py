"""Men et al. (2024), 'Base of RoPE Bounds Context Length': posenc.analysis.base_bound."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.analysis.base_bound import (
    _BaseCheck,
    base_lower_bound,
    similarity_margin,
    usable_context,
)


def test_theorem_1_by_monte_carlo():
    # E[q^T R_m k*] - E[q^T R_m k] = 2 sigma^2 B_m for k* = q + eps, k independent
    rng = np.random.default_rng(0)
    d, n, sigma = 16, 200_000, 0.7
    theta = posenc.inverse_frequencies(d, 100.0)
    q = rng.normal(0, sigma, (n, d))
    similar = q + rng.normal(0, 0.1, (n, d))
    random_k = rng.normal(0, sigma, (n, d))
    for m in (0, 3, 17, 40):
        rq = posenc.apply_rope(q, np.full(n, m), base=100.0, layout="interleaved")
        rs = posenc.apply_rope(similar, np.zeros(n, dtype=int), base=100.0, layout="interleaved")
        rk = posenc.apply_rope(random_k, np.zeros(n, dtype=int), base=100.0, layout="interleaved")
        gap = (rq * rs).sum(1).mean() - (rq * rk).sum(1).mean()
        assert gap / (2 * sigma**2) == pytest.approx(float(similarity_margin(theta, m)), abs=0.08)


def test_margin_shape_and_zero_frequencies():
    theta = np.array([1.0, 0.5, 0.0])
    b = similarity_margin(theta, [[0, np.pi]])
    assert b.shape == (1, 2) and b[0, 0] == 3.0
    assert b[0, 1] == pytest.approx(np.cos(np.pi) + np.cos(np.pi / 2) + 1.0)


@settings(max_examples=25, deadline=None)
@given(st.floats(20.0, 5e4), st.sampled_from([8, 16, 64, 128]))
def test_usable_context_is_the_last_offset_before_the_first_negative(base, d):
    theta = posenc.inverse_frequencies(d, base)
    limit = 20_000
    length = usable_context(theta, limit)
    b = similarity_margin(theta, np.arange(limit + 1))
    if length is None:
        assert np.all(b >= 0)
    else:
        assert np.all(b[: length + 1] >= 0) and b[length + 1] < 0


def test_llama2_base_serves_fewer_than_its_4096_tokens():
    assert usable_context(posenc.inverse_frequencies(128, 10_000.0), 100_000) == 1706


@pytest.mark.parametrize("length, paper", [(1000, 4.3e3), (4000, 2.7e4), (8000, 8.4e4)])
def test_lower_bound_matches_the_papers_table_2(length, paper):
    b = base_lower_bound(length, 128)
    assert b == pytest.approx(paper, rel=0.03)
    exponents = 2 * np.arange(64) / 128
    assert usable_context(b ** -exponents, length) is None          # b passes
    assert usable_context((b / 1.01) ** -exponents, length) is not None  # just below fails


@pytest.mark.parametrize("length, dim", [(50, 4), (300, 16), (1000, 64), (3000, 128)])
def test_lower_bound_is_what_scanning_every_offset_finds(length, dim):
    """base_lower_bound tries a base first near offsets where earlier bases failed; its
    answer is the one the documented search gives with every offset scanned for every
    base (written out here: the 1.01 grid from 2, then bisection to rtol)."""
    exponents = 2 * np.arange(dim // 2) / dim
    offsets = np.arange(length + 1)

    def passes(base):
        return bool(np.all(similarity_margin(base ** -exponents, offsets) >= 0))

    lower = None
    for upper in np.exp(np.arange(math.log(2.0), math.log(1e12), math.log(1.01))):
        if passes(float(upper)):
            break
        lower = float(upper)
    upper = float(upper)
    while lower is not None and upper / lower - 1.0 > 1e-4:
        middle = math.sqrt(lower * upper)
        lower, upper = (lower, middle) if passes(middle) else (middle, upper)
    assert base_lower_bound(length, dim) == upper


def test_base_check_is_a_full_scan_whatever_came_before():
    """The check base_lower_bound uses looks first near offsets where earlier bases
    failed; asked about bases in random order (so that those offsets are often far from
    where this base fails, or it does not fail), it answers as a scan of every offset."""
    rng = np.random.default_rng(0)
    exponents = 2 * np.arange(64) / 128
    offsets = np.arange(3001)
    check = _BaseCheck(exponents, 3000)
    verdicts = []
    for base in np.exp(rng.uniform(math.log(2.0), math.log(1e6), 300)):
        want = bool(np.all(similarity_margin(base ** -exponents, offsets) >= 0))
        assert check(float(base)) == want, base
        verdicts.append(want)
    assert 30 < sum(verdicts) < 270  # both verdicts, many times each


def test_admissible_bases_are_not_an_interval():
    # the infimum passes, yet a somewhat larger base fails again
    b = base_lower_bound(4096, 128)
    exponents = 2 * np.arange(64) / 128
    assert usable_context((1.05 * b) ** -exponents, 4096) is not None
    assert usable_context(1e6 ** -exponents, 4096) is None


@pytest.mark.parametrize("call, error, fragment", [
    (lambda: similarity_margin([], 1), ValueError, "non-empty 1-D"),
    (lambda: similarity_margin([1.0, -1.0], 1), ValueError, ">= 0"),
    (lambda: usable_context([1.0], 0), ValueError, "limit must be >= 1"),
    (lambda: usable_context([1.0], 2.5), TypeError, "limit must be an integer"),
    (lambda: base_lower_bound(0, 128), ValueError, "length must be >= 1"),
    (lambda: base_lower_bound(100, 127), ValueError, "dim"),
    (lambda: base_lower_bound(100, 8, low=5.0, high=3.0), ValueError, "1 < low < high"),
    (lambda: base_lower_bound(100, 8, rtol=0.0), ValueError, "rtol must be > 0"),
    (lambda: base_lower_bound(10**6, 4, high=10.0), ValueError, "no base in"),
])
def test_bad_input(call, error, fragment):
    with pytest.raises(error, match=fragment):
        call()
