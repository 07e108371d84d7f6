"""The claims of the chapter ``long-context``, pinned.

Each test quotes the sentence of the page it protects.  Also the rules of
:mod:`posenc.analysis.long_context` and of the figures in
:mod:`posenc.figures.long_context_pages`.  (The agreement of ``rope_frequencies`` with
transformers is tested in ``tests/encodings/test_rope_scaling.py``.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import rope_frequencies
from posenc.analysis import long_context as lc
from posenc.figures import long_context_pages as lcf
from posenc.figures._style import set_language

FAST = settings(max_examples=40, deadline=None)
D, BASE, L, S = 128, 10_000.0, 4096, 8  # the page's setting
THETA = posenc.inverse_frequencies(D, BASE)
LAM = posenc.wavelengths(D, BASE)
even_d = st.integers(2, 128).map(lambda h: 2 * h)
bases = st.sampled_from([100.0, 1e4, 5e5, 1e6, 1e7])


# -- reading rope_parameters ------------------------------------------------------


def test_published_configs_named_on_the_page_are_kept():
    """'the published ones of Llama 3.1, Qwen2.5, DeepSeek-V3, gpt-oss, Kimi K2 and Phi-3'."""
    names = set(lc.PUBLISHED_ROPE_PARAMETERS)
    assert {"Llama 3.1", "Qwen2.5 (yarn)", "DeepSeek-V3", "gpt-oss", "Kimi K2",
            "Phi-3 128k"} <= names
    for dim, max_pos, params in lc.PUBLISHED_ROPE_PARAMETERS.values():
        inv, att = rope_frequencies(dim, params, max_position_embeddings=max_pos)
        assert inv.shape == (dim // 2,) and att >= 1.0


# -- the failure ---------------------------------------------------------------------


@FAST
@given(even_d, bases, st.integers(16, 1 << 20))
def test_critical_dimension_counts_the_pairs_that_turn_fully(d, base, length):
    """'call the number of features in the first group the critical dimension'."""
    lam = posenc.wavelengths(d, base)
    ratio = d / 2 * math.log(length / (2 * math.pi)) / math.log(base)
    if abs(ratio - round(ratio)) < 1e-9:  # a wavelength exactly at the length
        return
    assert lc.critical_dimension(d, base, length) == 2 * int((lam <= length).sum())


def test_page_numbers_of_the_failure():
    """'46 of the 64 pairs turn fully within 4096 tokens, so d_extra = 92'."""
    assert int((LAM <= L).sum()) == 46
    assert lc.critical_dimension(D, BASE, L) == 92


@FAST
@given(even_d, bases, st.integers(64, 1 << 16), st.integers(2, 64))
def test_unseen_pairs_are_the_slow_ones_at_every_multiple(d, base, length, n):
    """'At 2L, 4L and 32L the same pairs meet unseen angles ... how far grows'."""
    theta = posenc.inverse_frequencies(d, base)
    lam = 2 * np.pi / theta
    reach = lc.angle_reach(theta, theta, length, n * length)
    np.testing.assert_array_equal(reach > 1, lam > length - 1)
    slow = lam > length - 1
    if slow.any():
        assert reach.max() == pytest.approx((n * length - 1) / (length - 1))
    assert np.all(reach[~slow] == 1.0)


def test_page_unseen_pairs_are_past_the_critical_dimension():
    for n in (2, 4, 32):
        reach = lc.angle_reach(THETA, THETA, L, n * L)
        assert int((reach > 1).sum()) == 64 - 46


def test_slow_part_of_the_self_score_drops_below_its_trained_floor():
    """'never goes below 0.077; by 2L it reaches -0.131 and by 32L -0.353'."""
    part = lc.aligned_score_curve(THETA[LAM > L], np.arange(32 * L))
    trained = part[:L].min()
    assert trained > 0.07
    assert part[:2 * L].min() < -0.1 < trained
    assert part.min() < part[:2 * L].min()


def test_random_queries_and_keys_score_alike_at_every_offset():
    """'For random, unrelated queries and keys ... the same at every offset'."""
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(2, 20_000, D))
    spread = []
    for r in (0, L // 2, 5 * L, 32 * L):
        kr = lc.rotate_with(k, np.full(k.shape[0], r), THETA)
        qr = lc.rotate_with(q, np.zeros(q.shape[0], dtype=np.int64), THETA)
        spread.append(np.std(np.sum(qr * kr, axis=-1)))
    assert max(spread) / min(spread) < 1.05


@pytest.mark.parametrize("rcond", [1e-12, 1e-8, 1e-4])
@pytest.mark.parametrize("seed", [0, 1])
def test_fitted_score_runs_away_beyond_L_and_not_when_interpolated(rcond, seed):
    """'coefficients that keep it small on [0, L) can make it huge beyond' + 'r/2 stays'."""
    out = lc.fitted_score_extrapolation(D, BASE, 2048, 2, seed=seed, rcond=rcond)
    assert out["trained"] < 1.0
    assert out["extrapolated"] > 20 * out["trained"]
    assert out["interpolated"] < 1.5 * out["trained"]


def test_fit_page_numbers():
    out = lc.fitted_score_extrapolation(D, BASE, 2048, 2)
    assert out["trained"] < 0.6 and out["interpolated"] < 0.6
    assert out["extrapolated"] > 1e5


# -- position interpolation ------------------------------------------------------


@FAST
@given(even_d, bases, st.floats(1.0, 64.0))
def test_linear_is_every_frequency_divided(d, base, s):
    """'dividing every position by s ... is the same as dividing every frequency'."""
    inv, att = rope_frequencies(d, {"rope_type": "linear", "factor": s, "rope_theta": base})
    np.testing.assert_allclose(inv, posenc.inverse_frequencies(d, base) / s, rtol=1e-15)
    assert att == 1.0
    pos = np.arange(0, 1000, 7)
    np.testing.assert_allclose(pos[:, None] * inv, (pos / s)[:, None] * (inv * s))


@pytest.mark.parametrize("s", [2, 4, 8, 16])
def test_pi_keeps_angles_and_costs_neighbour_resolution(s):
    """'no pair goes further than 1.0002 times' and 'neighbours are 7.8 times closer'."""
    inv = THETA / s
    reach = lc.angle_reach(inv, THETA, L, s * L)
    assert reach.max() <= (s * L - 1) / (s * (L - 1)) + 1e-12
    ratio = lc.neighbour_score_step(THETA, L) / lc.neighbour_score_step(inv, L)
    assert 0.85 * s < ratio < 1.05 * s


# -- NTK-aware and dynamic -------------------------------------------------------


@FAST
@given(st.integers(2, 64).map(lambda h: 2 * h), bases, st.floats(1.0, 64.0))
def test_ntk_exponent(d, base, s):
    """'b' = b s^{d/(d-2)}, s_i = s^{2i/(d-2)}': pair 0 kept, the last one exactly s."""
    inv, _ = rope_frequencies(d, {"rope_theta": base * s ** (d / (d - 2))})
    scale = posenc.inverse_frequencies(d, base) / inv
    np.testing.assert_allclose(scale, s ** (2 * np.arange(d // 2) / (d - 2)), rtol=1e-9)
    assert scale[0] == 1.0 and scale[-1] == pytest.approx(s, rel=1e-12)


def test_ntk_leaves_some_pairs_out_of_range():
    """'17 pairs still go beyond their trained angle, by up to 1.75 times'."""
    inv, _ = rope_frequencies(D, {"rope_theta": BASE * S ** (D / (D - 2))})
    reach = lc.angle_reach(inv, THETA, L, S * L)
    assert int((reach > 1.001).sum()) == 17
    assert 1.7 < reach.max() < 1.8


@FAST
@given(st.integers(2, 64).map(lambda h: 2 * h), bases, st.floats(1.0, 16.0),
       st.integers(64, 8192), st.floats(1.0, 20.0))
def test_dynamic_is_ntk_with_alpha(d, base, s, length, mult):
    """'b'(n) = b (s n / L - (s - 1))^{d/(d-2)}'; with factor 1 the ratio is n / L."""
    n = int(length * mult)
    inv, _ = rope_frequencies(d, {"rope_type": "dynamic", "factor": s, "rope_theta": base},
                              seq_len=n, max_position_embeddings=length)
    alpha = s * max(n, length) / length - (s - 1)
    expected = posenc.inverse_frequencies(d, base * alpha ** (d / (d - 2)))
    np.testing.assert_allclose(inv, expected, rtol=1e-12)
    one, _ = rope_frequencies(d, {"rope_type": "dynamic", "factor": 1.0, "rope_theta": base},
                              seq_len=n, max_position_embeddings=length)
    ratio = max(n, length) / length
    np.testing.assert_allclose(
        one, posenc.inverse_frequencies(d, base * ratio ** (d / (d - 2))), rtol=1e-12)


def test_dynamic_at_2L_is_ratio_9():
    """'At n = 2L the base is that of a static NTK scaling with ratio 9, not 2'."""
    inv, _ = rope_frequencies(D, {"rope_type": "dynamic", "factor": float(S)},
                              seq_len=2 * L, max_position_embeddings=L)
    for ratio, same in ((9, True), (2, False)):
        ntk = posenc.inverse_frequencies(D, BASE * ratio ** (D / (D - 2)))
        assert np.allclose(inv, ntk, rtol=1e-12) is same


# -- YaRN ----------------------------------------------------------------------------


def _page_yarn():
    return rope_frequencies(D, {"rope_type": "yarn", "factor": float(S),
                                "original_max_position_embeddings": L})


def test_yarn_ends_agree_with_the_paper_and_the_middle_differs():
    """'21 pairs kept, 18 divided by 8 ... differ by up to 3.39'."""
    inv, _ = _page_yarn()
    turns = L / LAM
    kept, squeezed = turns > 32, turns < 1
    assert (int(kept.sum()), int(squeezed.sum())) == (21, 18)
    np.testing.assert_allclose(inv[kept], THETA[kept], rtol=1e-15)
    np.testing.assert_allclose(inv[squeezed], THETA[squeezed] / S, rtol=1e-15)
    gamma = np.clip((turns - 1) / 31, 0, 1)
    paper = (1 - gamma) * THETA / S + gamma * THETA
    gap = np.abs(THETA / inv - THETA / paper).max()
    assert 3.3 < gap < 3.5


def test_yarn_keeps_angles_and_neighbour_resolution():
    """'no pair goes beyond 1.0002 ... neighbours move the score ... like plain RoPE'."""
    inv, _ = _page_yarn()
    assert lc.angle_reach(inv, THETA, L, S * L).max() <= (S * L - 1) / (S * (L - 1)) + 1e-12
    plain = lc.neighbour_score_step(THETA, L)
    assert lc.neighbour_score_step(inv, L) == pytest.approx(plain, rel=0.01)


@FAST
@given(st.floats(1.0001, 128.0))
def test_yarn_attention_factor_is_the_temperature(s):
    """'sqrt(1/t) = 0.1 ln s + 1 ... the attention factor that multiplies cos and sin'."""
    _, att = rope_frequencies(16, {"rope_type": "yarn", "factor": s,
                                   "original_max_position_embeddings": 1024})
    assert att == pytest.approx(0.1 * math.log(s) + 1)
    x = np.random.default_rng(0).normal(size=(2, 16))
    inv = posenc.inverse_frequencies(16)
    q = lc.rotate_with(x[:1], [3], inv, att)
    k = lc.rotate_with(x[1:], [1], inv, att)
    plain = lc.rotate_with(x[:1], [3], inv) @ lc.rotate_with(x[1:], [1], inv).T
    assert (q @ k.T).item() == pytest.approx(att**2 * plain.item())


def test_entropy_approximation_and_sigma_star():
    """'the entropy is close to ln n - sigma^2/2' and the factor cancels the rise at σ*."""
    rng = np.random.default_rng(0)
    for sigma in (0.5, 1.0, 1.5):
        z = rng.normal(scale=sigma, size=(64, 1 << 15))
        assert lc.softmax_entropy(z).mean() == pytest.approx(
            math.log(z.shape[1]) - sigma**2 / 2, abs=0.1 * sigma**2 + 0.02)
    c2 = (0.1 * math.log(S) + 1) ** 2
    sigma_star = math.sqrt(2 * math.log(S) / (c2**2 - 1))
    removed = {}
    for name, sigma in (("1", 1.0), ("star", sigma_star), ("3", 3.0)):
        z = rng.normal(scale=sigma, size=(256, S * L))
        h_L = lc.softmax_entropy(z[:, :L]).mean()
        h_sL = lc.softmax_entropy(z).mean()
        h_t = lc.softmax_entropy(z * c2).mean()
        if sigma < 2:  # 'adds ln s' (the approximation holds for moderate spreads)
            assert h_sL - h_L == pytest.approx(math.log(S), rel=0.1)
        removed[name] = (h_sL - h_t) / (h_sL - h_L)
    assert removed["1"] < 0.5                    # 'removes 27% of the increase'
    assert 0.85 < removed["star"] < 1.15         # 'brings it back'
    assert removed["3"] > 1.2                    # 'overshooting'


# -- why YaRN's ramp and temperature take their form (lc-yarn-why) --------------------


@FAST
@given(st.floats(1e-3, 3.0), st.integers(2, 3000))
def test_a_pair_that_turned_fully_saw_every_angle_within_one_step(theta, length):
    """'once (L - 1) theta_i >= 2 pi every angle lies within one step theta_i of an angle
    the pair saw in training; short of a turn, an arc of 2 pi - (L - 1) theta_i was
    never seen'."""
    angles = np.sort(np.arange(length) * theta % (2 * np.pi))
    gaps = np.diff(np.concatenate([angles, [angles[0] + 2 * np.pi]]))
    arc = (length - 1) * theta
    if arc >= 2 * np.pi:
        assert gaps.max() <= theta + 1e-9
    else:
        assert gaps.max() == pytest.approx(max(theta, 2 * np.pi - arc), abs=1e-9)


def test_interpolating_by_s_maps_sL_back_onto_the_trained_arc():
    """'dividing by s brings offset sL - 1 back to within one step of the end of the
    trained arc': (sL - 1) theta / s - (L - 1) theta = (1 - 1/s) theta."""
    slow = L / LAM < 1
    reach = (S * L - 1) * THETA[slow] / S
    trained = (L - 1) * THETA[slow]
    np.testing.assert_allclose(reach - trained, (1 - 1 / S) * THETA[slow], rtol=1e-9)
    assert np.all(reach - trained < THETA[slow])


def test_dividing_slow_pairs_by_less_than_s_leaves_unseen_angles_by_more_wastes_them():
    """'a smaller divisor leaves unseen angles, a larger one costs resolution for
    nothing': at sL, slow pairs divided by s/2 go past their trained arc; divided by 2s
    they stay on half of it (the other half of the trained arc goes unused)."""
    slow = L / LAM < 1
    less = lc.angle_reach(THETA[slow] / (S / 2), THETA[slow], L, S * L)
    exact = lc.angle_reach(THETA[slow] / S, THETA[slow], L, S * L)
    more = lc.angle_reach(THETA[slow] / (2 * S), THETA[slow], L, S * L)
    assert np.all(less > 1.9) and np.all(exact < 1.001) and np.all(more < 0.501)


def test_yarn_regions_page_numbers_and_the_papers_thresholds():
    """'21 pairs extrapolated, 25 blended, 18 interpolated, factor 1.2079': the code's
    ramp (pair index) and the paper's thresholds (r > 32, r < 1) count the same here."""
    r = lc.yarn_regions(D, {"rope_type": "yarn", "factor": float(S),
                            "original_max_position_embeddings": L})
    turns = L / LAM
    assert (r["extrapolated"], r["blended"], r["interpolated"]) == (21, 25, 18)
    assert r["extrapolated"] == int((turns > 32).sum())
    assert r["interpolated"] == int((turns < 1).sum())
    assert r["attention_factor"] == pytest.approx(0.1 * math.log(S) + 1, rel=1e-15)


@FAST
@given(even_d.filter(lambda d: d >= 8), bases, st.sampled_from([256, 2048, 4096, 32768]),
       st.floats(1.5, 64.0), st.sampled_from([(32.0, 1.0), (16.0, 2.0), (8.0, 8.0)]))
def test_yarn_regions_partition_the_pairs(d, base, length, s, betas):
    fast, slow = betas
    params = {"rope_type": "yarn", "factor": s, "rope_theta": base,
              "original_max_position_embeddings": length,
              "beta_fast": fast, "beta_slow": slow}
    r = lc.yarn_regions(d, params)
    assert r["extrapolated"] + r["blended"] + r["interpolated"] == d // 2
    lam = posenc.wavelengths(d, base)
    turns = length / lam
    inv, _ = rope_frequencies(d, params)
    scale = posenc.inverse_frequencies(d, base) / inv
    kept = np.isclose(scale, 1.0, rtol=1e-12, atol=0)
    divided = np.isclose(scale, s, rtol=1e-12, atol=0)
    assert kept.sum() == r["extrapolated"] and divided.sum() == r["interpolated"]
    # pairs left alone turned at least beta_fast times (pair 0 is kept even below: the
    # authors' code clips the ramp's start at pair 0); pairs divided by s turned < beta_slow
    assert np.all(turns[1:][kept[1:]] >= fast * (1 - 1e-12))
    assert np.all(turns[divided] <= slow * (1 + 1e-12))


@pytest.mark.parametrize("params, error, fragment", [
    ({"rope_type": "linear", "factor": 2.0}, ValueError, "must be 'yarn'"),
    ({"rope_type": "yarn"}, ValueError, "'factor'\\] is required"),
    ([("rope_type", "yarn")], TypeError, "rope_parameters must be a dict"),
    ({"rope_type": "yarn", "factor": 2.0, "beta_fast": 1.0, "beta_slow": 2.0,
      "original_max_position_embeddings": 64},
     ValueError, "beta_fast"),
])
def test_yarn_regions_bad_input(params, error, fragment):
    with pytest.raises(error, match=fragment):
        lc.yarn_regions(16, params)


def test_entropy_matching_spread():
    """'sigma_* tends to sqrt 5 as s -> 1 and moves only to 1.92 at s = 8 and 1.74 at
    s = 32', and at sigma_*(s) the factor brings the entropy at sL back to that at L."""
    assert lc.entropy_matching_spread(1 + 1e-9) == pytest.approx(math.sqrt(5), rel=1e-6)
    stars = [lc.entropy_matching_spread(s) for s in (2, 8, 32)]
    assert stars == sorted(stars, reverse=True)
    assert [round(x, 2) for x in stars] == [2.12, 1.92, 1.74]
    c2 = (0.1 * math.log(S) + 1) ** 2
    assert lc.entropy_matching_spread(S) == pytest.approx(
        math.sqrt(2 * math.log(S) / (c2**2 - 1)), rel=1e-15)
    assert lc.entropy_matching_spread(4.0, 1.5) == pytest.approx(
        math.sqrt(2 * math.log(4) / (1.5**4 - 1)), rel=1e-15)
    rng = np.random.default_rng(1)
    n, s = 2048, 4
    sigma = lc.entropy_matching_spread(s)
    z = rng.normal(scale=sigma, size=(128, s * n))
    scale = (0.1 * math.log(s) + 1) ** 2
    h_n = lc.softmax_entropy(z[:, :n]).mean()
    h_sn = lc.softmax_entropy(z).mean()
    h_back = lc.softmax_entropy(z * scale).mean()
    assert h_sn - h_n > 0.9 * math.log(s)
    assert abs(h_back - h_n) < 0.15 * (h_sn - h_n)


@pytest.mark.parametrize("args, error, fragment", [
    ((1.0,), ValueError, "factor must be > 1"),
    ((0.5,), ValueError, "factor must be > 1"),
    (("8",), TypeError, "factor must be a real number"),
    ((8.0, 1.0), ValueError, "attention_factor must be > 1"),
    ((8.0, True), TypeError, "attention_factor must be a real number"),
])
def test_entropy_matching_spread_bad_input(args, error, fragment):
    with pytest.raises(error, match=fragment):
        lc.entropy_matching_spread(*args)


def test_deepseek_moves_the_temperature_into_the_softmax_scale():
    """'the factor on cos and sin is exactly 1; ... multiplies its softmax scale'."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_apply_mscale

    dim, max_pos, params = lc.PUBLISHED_ROPE_PARAMETERS["DeepSeek-V3"]
    assert params["mscale"] == params["mscale_all_dim"]
    assert rope_frequencies(dim, params, max_position_embeddings=max_pos)[1] == 1.0
    hf = dict(params, rope_type="yarn")
    factor = 0.1 * params["mscale_all_dim"] * math.log(params["factor"]) + 1
    assert yarn_apply_mscale(hf, 1.0) == pytest.approx(factor**2)


# -- Llama 3.1 ---------------------------------------------------------------------


@FAST
@given(bases, st.floats(1.0, 64.0), st.sampled_from([0.5, 1.0, 2.0]),
       st.sampled_from([1.5, 4.0, 16.0]), st.sampled_from([1024, 8192, 32768]))
def test_llama3_is_a_ramp_linear_in_turns(base, s, low, mult, length):
    """'It is YaRN's ramp with alpha = 1, beta = 4, linear in r = L / lambda'."""
    high = low * mult
    p = {"rope_type": "llama3", "rope_theta": base, "factor": s, "low_freq_factor": low,
         "high_freq_factor": high, "original_max_position_embeddings": length}
    inv, att = rope_frequencies(64, p)
    theta = posenc.inverse_frequencies(64, base)
    r = length * theta / (2 * np.pi)
    gamma = np.clip((r - low) / (high - low), 0, 1)
    np.testing.assert_allclose(inv, (1 - gamma) * theta / s + gamma * theta, rtol=1e-12)
    assert att == 1.0


def test_llama31_page_numbers():
    """'29 pairs are kept, 29 divided by 8 and 6 blended ... 16.0 ... 2.0 times'."""
    dim, max_pos, params = lc.PUBLISHED_ROPE_PARAMETERS["Llama 3.1"]
    _, scale = lc.pair_scales(dim, params)
    kept, divided = int(np.isclose(scale, 1).sum()), int(np.isclose(scale, 8).sum())
    assert (kept, divided, 64 - kept - divided) == (29, 29, 6)
    theta = posenc.inverse_frequencies(dim, 500_000.0)
    inv, _ = rope_frequencies(dim, params)
    assert lc.angle_reach(theta, theta, 8192, max_pos).max() == pytest.approx(16.0, abs=0.01)
    assert lc.angle_reach(inv, theta, 8192, max_pos).max() == pytest.approx(2.0, abs=0.01)
    # 'a factor of 8 on 8192 tokens covers 65,536 positions, not 131072': the rule keeps
    # the slowest pairs in range up to factor * original length and no further
    covered = int(params["factor"] * params["original_max_position_embeddings"])
    assert covered == 65536 < max_pos
    assert lc.angle_reach(inv, theta, 8192, covered).max() < 1.001
    assert lc.angle_reach(inv, theta, 8192, covered + 8192).max() > 1.1


# -- LongRoPE ----------------------------------------------------------------------


def test_longrope_scales_are_the_factors_and_switch_everything():
    """'The scales are the factors themselves' ... 'jumps by 183 radians'."""
    dim, max_pos, params = lc.PUBLISHED_ROPE_PARAMETERS["Phi-3 128k"]
    theta = posenc.inverse_frequencies(dim, 10_000.0)
    short, att = rope_frequencies(dim, params, seq_len=4096, max_position_embeddings=max_pos)
    long, _ = rope_frequencies(dim, params, seq_len=4097, max_position_embeddings=max_pos)
    np.testing.assert_allclose(theta / short, params["short_factor"], rtol=1e-14)
    np.testing.assert_allclose(theta / long, params["long_factor"], rtol=1e-14)
    assert max_pos // params["original_max_position_embeddings"] == 32  # 's = 32'
    assert att == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)))
    differs = ~np.isclose(params["short_factor"], params["long_factor"])
    assert np.all(long[differs] != short[differs])
    assert 150 < np.abs(4095 * (long - short)).max() < 200


# -- the base ----------------------------------------------------------------------


def test_larger_base_keeps_scores_positive_further_and_costs_turns():
    """'first turns negative at offset 1,707 ... 144,660' and '128 to 98, 94 and 80'."""
    firsts, dextra = [], []
    for b in (1e4, 5e5, 1e6, 1e7):
        th = posenc.inverse_frequencies(D, b)
        curve = lc.aligned_score_curve(th, np.arange(200_000))
        firsts.append(int(np.argmax(curve < 0)))
        dextra.append(lc.critical_dimension(D, b, 131_072))
    assert firsts == sorted(firsts) and firsts[0] > 0
    assert dextra == [128, 98, 94, 80]


@FAST
@given(even_d.filter(lambda d: d >= 16), st.floats(1e4, 1e8), st.integers(1 << 10, 1 << 20))
def test_a_larger_base_shrinks_the_slowest_pairs_arc(d, base, length):
    """'even over all 131072 positions it turns through only 0.017 radians': the arc of
    the slowest pair over a context shrinks as the base grows."""
    arc = (length - 1) * posenc.inverse_frequencies(d, base)[-1]
    bigger = (length - 1) * posenc.inverse_frequencies(d, 10 * base)[-1]
    assert bigger < arc
    page = 131_071 * posenc.inverse_frequencies(D, 1e7)[-1]
    assert 0.016 < page < 0.018


# -- the summary table -------------------------------------------------------------


@pytest.mark.parametrize("d", [64, 96, 128])
def test_summary_table_rows(d):
    """The table of 'What to take away': scales and attention factors of every type."""
    theta = posenc.inverse_frequencies(d, BASE)
    lam = 2 * np.pi / theta
    r = L / lam

    def scales(params, **kw):
        inv, att = rope_frequencies(d, params, **kw)
        return theta / inv, att

    s, att = scales({"rope_type": "default"})
    assert np.all(s == 1) and att == 1.0
    s, att = scales({"rope_type": "linear", "factor": 4.0})
    np.testing.assert_allclose(s, 4.0)
    assert att == 1.0
    # dynamic: 1 up to L tokens
    s, att = scales({"rope_type": "dynamic", "factor": 4.0}, seq_len=L,
                    max_position_embeddings=L)
    np.testing.assert_allclose(s, 1.0, rtol=1e-12)
    assert att == 1.0
    # yarn with the defaults beta_fast 32, beta_slow 1: 1 above, s below, a ramp between
    s, att = scales({"rope_type": "yarn", "factor": 4.0,
                     "original_max_position_embeddings": L})
    np.testing.assert_allclose(s[r > 32], 1.0, rtol=1e-12)
    np.testing.assert_allclose(s[r < 1], 4.0, rtol=1e-12)
    assert np.all(np.diff(s) >= -1e-12)
    assert att == pytest.approx(0.1 * math.log(4.0) + 1)
    _, att = scales({"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.5,
                     "original_max_position_embeddings": L})
    assert att == 1.5
    # llama3: 1 above high_freq_factor, s below low_freq_factor, no attention factor
    s, att = scales({"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": L})
    np.testing.assert_allclose(s[r > 4], 1.0, rtol=1e-12)
    np.testing.assert_allclose(s[r < 1], 4.0, rtol=1e-12)
    assert att == 1.0
    # longrope: the listed factors, short up to L tokens, long beyond
    short = list(np.linspace(1.0, 2.0, d // 2))
    long = list(np.linspace(1.0, 30.0, d // 2))
    p = {"rope_type": "longrope", "short_factor": short, "long_factor": long,
         "original_max_position_embeddings": L}
    s, att = scales(p, seq_len=L, max_position_embeddings=8 * L)
    np.testing.assert_allclose(s, short, rtol=1e-12)
    assert att == pytest.approx(math.sqrt(1 + math.log(8) / math.log(L)))
    s, _ = scales(p, seq_len=L + 1, max_position_embeddings=8 * L)
    np.testing.assert_allclose(s, long, rtol=1e-12)
    _, att = scales(dict(p, attention_factor=1.25), seq_len=L, max_position_embeddings=8 * L)
    assert att == 1.25
    # llama3 with low_freq_factor == high_freq_factor: a step at r = that factor
    s, att = scales({"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 1.0, "original_max_position_embeddings": L})
    np.testing.assert_allclose(s, np.where(r < 1, 16.0, 1.0), rtol=1e-12)
    assert att == 1.0
    # proportional: factor for the first floor(p d / 2) pairs (whole-head spacing), 0 after
    inv, att = rope_frequencies(d, {"rope_type": "proportional", "rope_theta": BASE,
                                    "partial_rotary_factor": 0.25, "factor": 2.0})
    k = int(0.25 * d // 2)
    np.testing.assert_allclose(theta[:k] / inv[:k], 2.0, rtol=1e-12)
    assert np.all(inv[k:] == 0) and att == 1.0


# -- side by side ------------------------------------------------------------------


def test_only_plain_and_ntk_leave_the_trained_angles():
    """'everything but plain RoPE and NTK-aware scaling keeps every pair within'."""
    rules = {
        "PI": {"rope_type": "linear", "factor": 8.0},
        "YaRN": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": L},
        "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": L},
    }
    for params in rules.values():
        inv, _ = rope_frequencies(D, params)
        assert lc.angle_reach(inv, THETA, L, S * L).max() < 1.001
    ntk, _ = rope_frequencies(D, {"rope_theta": BASE * S ** (D / (D - 2))})
    assert lc.angle_reach(ntk, THETA, L, S * L).max() > 1.5
    assert lc.angle_reach(THETA, THETA, L, S * L).max() > 7.9


# -- the analysis functions: rules and bad input ------------------------------------


def test_pair_scales_of_default_are_one():
    lam, scale = lc.pair_scales(16)
    np.testing.assert_array_equal(scale, np.ones(8))
    np.testing.assert_allclose(lam, posenc.wavelengths(16))


@pytest.mark.parametrize("call, error", [
    (lambda: lc.angle_reach([1.0, 0.1], [1.0], 10, 20), ValueError),
    (lambda: lc.angle_reach([1.0, -0.1], [1.0, 0.1], 10, 20), ValueError),
    (lambda: lc.angle_reach([1.0], [1.0], 1, 20), ValueError),
    (lambda: lc.angle_reach([1.0], [1.0], 10.0, 20), TypeError),
    (lambda: lc.critical_dimension(7, 1e4, 100), ValueError),
    (lambda: lc.critical_dimension(8, 1.0, 100), ValueError),
    (lambda: lc.critical_dimension(8, 1e4, 0), ValueError),
    (lambda: lc.rotate_with(np.ones((2, 4)), [0.5, 1.5], [1.0, 0.1]), ValueError),
    (lambda: lc.aligned_score_curve([], [0, 1]), ValueError),
    (lambda: lc.fitted_score_extrapolation(8, 1e4, 1, 2), ValueError),
    (lambda: lc.neighbour_score_step([np.nan], 10), ValueError),
    (lambda: lc.pair_scales(8, {"rope_type": "nope"}), ValueError),
])
def test_bad_input(call, error):
    with pytest.raises(error):
        call()


def test_softmax_entropy_uniform_and_peaked():
    assert lc.softmax_entropy(np.zeros(16)) == pytest.approx(math.log(16))
    assert lc.softmax_entropy(np.array([0.0, -np.inf, -np.inf])) == 0.0
    np.testing.assert_allclose(lc.softmax_entropy(np.zeros((3, 4))), np.log(4) * np.ones(3))


# -- figures -----------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_figures_draw_in_both_languages(lang):
    set_language(lang)
    try:
        lam = posenc.wavelengths(16)
        figs = [
            lcf.long_context_scales_figure([("PI", lam, np.full(8, 4.0))], 100),
            lcf.long_context_reach_figure([("plain", lam, np.linspace(1, 4, 8))], 100),
            lcf.long_context_score_figure(np.arange(4), [0, 1, 50, 500], [0, 1, 0, 1], 2),
            lcf.long_context_entropy_figure([8, 16, 32], [2.0, 2.7, 3.4], [1.8, 2.4, 2.0], 16),
        ]
        for fig in figs:
            assert fig.get_facecolor() == (1.0, 1.0, 1.0, 1.0)
            assert fig.axes[0].get_xlabel()
    finally:
        set_language("en")


def test_entropy_figure_marks_the_plain_entropy_at_L():
    fig = lcf.long_context_entropy_figure([8, 16, 32], [2.0, 2.7, 3.4], [1.8, 2.4, 2.7], 16)
    ys = [line.get_ydata()[0] for line in fig.axes[0].get_lines()
          if line.get_linestyle() == ":"]
    assert ys == [2.7]


@pytest.mark.parametrize("curves", [[], [("a", [1.0, 2.0], [1.0])], [("a", [[1.0]], [[1.0]])]])
def test_figure_bad_curves(curves):
    with pytest.raises(ValueError):
        lcf.long_context_scales_figure(curves, 10)


def test_llama31_file_layout_reads_into_the_rope_parameters_shown():
    """The page shows Llama 3.1's settings as a transformers-4 file stores them (rope_scaling
    beside a top-level rope_theta) and as transformers 5 reads them (rope_parameters)."""
    import copy

    from transformers import LlamaConfig

    dim, max_pos, llama31 = lc.PUBLISHED_ROPE_PARAMETERS["Llama 3.1"]
    published = {
        "max_position_embeddings": max_pos,
        "rope_theta": llama31["rope_theta"],
        "rope_scaling": {k: v for k, v in llama31.items() if k != "rope_theta"},
    }
    before = copy.deepcopy(published)
    loaded = LlamaConfig(**copy.deepcopy(published)).rope_parameters
    assert loaded == llama31
    assert "rope_theta" not in before["rope_scaling"]
    # transformers edits the dict it is given (why the page passes a copy)
    LlamaConfig(**published)
    assert published != before
    # an old file's "type" is read as "rope_type"
    old = copy.deepcopy(before)
    old["rope_scaling"]["type"] = old["rope_scaling"].pop("rope_type")
    assert LlamaConfig(**old).rope_parameters["rope_type"] == "llama3"
    inv_a, att_a = rope_frequencies(dim, loaded)
    inv_b, att_b = rope_frequencies(dim, llama31)
    assert np.array_equal(inv_a, inv_b) and att_a == att_b


def test_men_et_al_criterion_against_the_atlas_spans():
    # the section 'The smallest base for a length': what each atlas model's base serves
    from posenc.analysis.base_bound import usable_context
    from posenc.atlas import atlas

    served = {}
    for m in atlas():
        layer, span = m.reach, m.row()["span"]
        if span is not None:
            turning = layer.plain_inv_freq[layer.plain_inv_freq > 0]
            served[m.name.split(" (")[0]] = (span, usable_context(turning, 4 * span))
    assert len(served) == 12
    assert served["Llama 3.1 8B"] == (8192, 18437)
    assert served["Qwen2.5 7B Instruct"] == (32768, 27114)
    assert served["Mistral 7B"] == (4096, 1706)
    # the lengths of the published configs (OLMo 2 7B, Gemma 2 2B): base 500,000 serves
    # past 4 x 4096 (None: B_m stays positive), base 10,000 falls short of 8192
    assert served["OLMo 2 7B"] == (4096, None)
    assert served["Gemma 2 2B"] == (8192, 2652)
    assert sum(n is not None and n < w for w, n in served.values()) == 6


@pytest.mark.parametrize("d, s", [(64, 4.0), (128, 8.0), (256, 32.0)])
def test_ntk_base_from_the_beta_base_reading(d, s):
    # the highest 'digit' (slowest pair) spans s times more, the lowest is untouched,
    # and the pair halfway is interpolated by s ** (1/2 + 1/(d - 2))
    base = 10_000.0
    beta = base ** (2 / d)
    beta_new = beta * s ** (2 / (d - 2))
    assert beta_new ** (d / 2) == pytest.approx(base * s ** (d / (d - 2)))
    theta = posenc.inverse_frequencies(d, base)
    theta_new = posenc.inverse_frequencies(d, base * s ** (d / (d - 2)))
    scale = theta / theta_new
    assert scale[0] == pytest.approx(1.0) and scale[-1] == pytest.approx(s)
    assert scale[d // 4] == pytest.approx(s ** (0.5 + 1 / (d - 2)))


def test_ntk_keeps_the_fastest_pair_and_pi_slows_it_by_s():
    """The NTK paragraph: position interpolation divides the fastest pair's angle per
    token by s; the NTK-aware base leaves it as trained (pair 0's exponent is 0)."""
    import numpy as np

    import posenc

    d, base, s = 128, 10000.0, 8
    theta = posenc.inverse_frequencies(d, base)
    pi, _ = posenc.rope_frequencies(d, {"rope_type": "linear", "factor": float(s)})
    ntk = posenc.inverse_frequencies(d, base * s ** (d / (d - 2)))
    assert pi[0] == theta[0] / s and ntk[0] == theta[0] == 1.0
    assert np.all(ntk[1:] < theta[1:]) and np.isclose(ntk[-1], theta[-1] / s)


# -- sparse attention: DeepSeek's indexer ---------------------------------------------


@pytest.mark.parametrize("model, layout", [("deepseek_v32", "half"), ("glm_moe_dsa", "interleaved")])
def test_dsa_index_scores_pick_the_keys_transformers_picks(model, layout):
    """'the package's tests check its choice of keys against both transformers indexers':
    DeepSeek-V3.2's indexer in the half layout, GLM-5's in the interleaved one; the other
    layout picks other keys."""
    import importlib

    import torch

    mod = importlib.import_module(f"transformers.models.{model}.modeling_{model}")
    prefix = {"deepseek_v32": "DeepseekV32", "glm_moe_dsa": "GlmMoeDsa"}[model]
    config_cls = getattr(importlib.import_module(f"transformers.models.{model}"), f"{prefix}Config")
    heads, dim, rot, n, top = 8, 16, 8, 24, 5
    config = config_cls(hidden_size=32, q_lora_rank=16, index_n_heads=heads, index_head_dim=dim,
                        qk_rope_head_dim=rot, qk_nope_head_dim=8, index_topk=top,
                        num_attention_heads=2, num_key_value_heads=2, kv_lora_rank=8,
                        v_head_dim=8, num_hidden_layers=1)
    torch.manual_seed(0)
    indexer = getattr(mod, f"{prefix}Indexer")(config, 0).double()
    for p in indexer.parameters():
        torch.nn.init.normal_(p)
    x = torch.randn(1, n, 32, dtype=torch.float64)
    q_resid = torch.randn(1, n, 16, dtype=torch.float64)
    pos = torch.arange(n)[None]
    cos, sin = getattr(mod, f"{prefix}RotaryEmbedding")(config)(x.float(), pos)
    mask = torch.full((n, n), float("-inf")).triu(1)[None]
    with torch.no_grad():
        picked = indexer(x, q_resid, (cos.double(), sin.double()), mask, pos).reshape(n, top)
        q = indexer.wq_b(q_resid)[0].reshape(n, heads, dim).permute(1, 0, 2).numpy()
        k = indexer.k_norm(indexer.wk(x))[0].numpy()
        w = (indexer.weights_proj(x)[0] * heads**-0.5).numpy()
    inv = posenc.inverse_frequencies(rot)

    def agrees(scores, t):   # the same scores as the best `top` (ties may swap keys)
        return np.allclose(np.sort(scores[t, picked[t].numpy()]), np.sort(scores[t])[-top:])

    ours = lc.dsa_index_scores(q, k, w, inv, layout=layout)
    assert all(agrees(ours, t) for t in range(top, n))
    other = lc.dsa_index_scores(q, k, w, inv, layout={"half": "interleaved"}.get(layout, "half"))
    assert not all(agrees(other, t) for t in range(top, n))


def test_dsa_index_scores_is_causal_and_rejects_bad_shapes():
    rng = np.random.default_rng(0)
    q, k, w = rng.standard_normal((2, 5, 8)), rng.standard_normal((5, 8)), np.ones((5, 2))
    scores = lc.dsa_index_scores(q, k, w, posenc.inverse_frequencies(4))
    assert np.isneginf(scores[np.triu_indices(5, 1)]).all()
    assert np.isfinite(scores[np.tril_indices(5)]).all() and (scores[np.tril_indices(5)] >= 0).all()
    with pytest.raises(ValueError, match="queries, keys and weights must have shapes"):
        lc.dsa_index_scores(q[0], k, w, [1.0])
    with pytest.raises(ValueError, match="keys must have shape"):
        lc.dsa_index_scores(q, k[:4], w, [1.0])
    with pytest.raises(ValueError, match="inv_freq must have at most D/2 = 4"):
        lc.dsa_index_scores(q, k, w, posenc.inverse_frequencies(10))


def test_page_dsa_picks_the_far_key():
    """'among 1024 tokens the indexer picks it first' ... 'the key it picks lies 1,023
    positions back'."""
    rng = np.random.default_rng(0)
    heads, n_tok, d_idx, d_rot = 4, 1024, 128, 64
    q_idx = rng.standard_normal((heads, n_tok, d_idx))
    k_idx = rng.standard_normal((n_tok, d_idx))
    k_idx[0, d_rot:] = 4 * q_idx[:, -1, d_rot:].mean(axis=0)
    scores = lc.dsa_index_scores(q_idx, k_idx, np.ones((n_tok, heads)),
                                 posenc.inverse_frequencies(d_rot))
    assert int(np.argmax(scores[-1])) == 0
