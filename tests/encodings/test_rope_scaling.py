"""rope_frequencies against transformers 5.23.0's ROPE_INIT_FUNCTIONS, and its bad inputs.

transformers builds a config (here a ``LlamaConfig`` carrying ``rope_parameters``,
``head_dim`` and ``max_position_embeddings``), standardizes it (``rope_type`` from the
old ``type``; ``original_max_position_embeddings`` defaulted to
``max_position_embeddings`` for llama3/yarn/longrope) and calls
``ROPE_INIT_FUNCTIONS[rope_type](config, seq_len=...)``, which reads
``dim = int(head_dim * partial_rotary_factor)``.  Its arithmetic is float32; ours is
float64, so the frequencies agree to float32 rounding (relative error a few 1e-7 times
ln(base)) and the attention factors (Python floats there too) agree exactly.
"""

import copy
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding

import posenc
from posenc import rope_frequencies
from posenc.analysis.long_context import PUBLISHED_ROPE_PARAMETERS
from posenc.rope_scaling import ROPE_FREQUENCY_FUNCTIONS, ROPE_TYPES

RTOL = 3e-6  # float32 rounding of base ** (2i/d): ~6e-8 * (1 + ln base)
HEADS = 2


def hf_frequencies(head_dim, rope_parameters, max_position_embeddings, seq_len=None):
    """transformers 5.23.0's (inv_freq, attention_factor) for one config."""
    params = copy.deepcopy(rope_parameters)
    config = LlamaConfig(
        hidden_size=head_dim * HEADS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        head_dim=head_dim,
        max_position_embeddings=max_position_embeddings,
        rope_parameters=params,
    )
    rope_type = config.rope_parameters["rope_type"]
    if rope_type == "default":
        # LlamaRotaryEmbedding's default ignores partial_rotary_factor; GPT-NeoX's reads it.
        inv, att = GPTNeoXRotaryEmbedding.compute_default_rope_parameters(config)
    else:
        inv, att = ROPE_INIT_FUNCTIONS[rope_type](config, seq_len=seq_len)
    assert inv.dtype == torch.float32
    return inv.double().numpy(), att


def rtol(dim, rope_parameters):
    """Per-pair relative tolerance: float32 rounding, times the rule's condition number.

    Only llama3's smooth band amplifies the rounding of theta: out = theta * g with
    g = 1/s + mu (1 - 1/s), mu = (L theta / 2 pi - a) / (b - a), so
    d ln(out) / d ln(theta) = 1 + (L theta / 2 pi) (1 - 1/s) / ((b - a) g).
    """
    tol = np.full(dim // 2, RTOL)
    p = rope_parameters
    if p.get("rope_type", p.get("type")) != "llama3":
        return tol
    theta = posenc.inverse_frequencies(dim, p.get("rope_theta", 10000.0))
    s, a, b = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
    ratio = p["original_max_position_embeddings"] * theta / (2 * np.pi)
    mu = np.clip((ratio - a) / (b - a), 0, 1)
    g = 1 / s + mu * (1 - 1 / s)
    medium = (ratio >= a) & (ratio <= b)
    tol[medium] *= 1 + ratio[medium] * (1 - 1 / s) / ((b - a) * g[medium])
    return tol


def rotated_dim(head_dim, rope_parameters):
    return int(head_dim * rope_parameters.get("partial_rotary_factor", 1.0))


def assert_matches_transformers(head_dim, rope_parameters, max_pos, seq_len=None):
    ref_inv, ref_att = hf_frequencies(head_dim, rope_parameters, max_pos, seq_len)
    dim = rotated_dim(head_dim, rope_parameters)
    inv, att = rope_frequencies(
        dim, rope_parameters, seq_len=seq_len, max_position_embeddings=max_pos
    )
    assert inv.dtype == np.float64 and inv.shape == (dim // 2,)
    err = np.abs(inv - ref_inv) / ref_inv
    assert np.all(err <= rtol(dim, rope_parameters)), (err.max(), rope_parameters)
    assert isinstance(att, float)
    assert att == pytest.approx(ref_att, rel=1e-12)
    return inv, att


# -- published configs of real models ----------------------------------------------


@pytest.mark.parametrize("name", sorted(PUBLISHED_ROPE_PARAMETERS))
@pytest.mark.parametrize("seq_len", [None, 1, 4096, 4097, 8192, 32768, 131072, 200000])
def test_published_configs_match_transformers(name, seq_len):
    dim, max_pos, params = PUBLISHED_ROPE_PARAMETERS[name]
    assert_matches_transformers(dim, params, max_pos, seq_len)


def test_llama31_published_values():
    """Llama 3.1: pairs with wavelength < 8192/4 kept, > 8192 divided by 8, smooth between."""
    dim, _, params = PUBLISHED_ROPE_PARAMETERS["Llama 3.1"]
    inv, att = rope_frequencies(dim, params)
    plain = posenc.inverse_frequencies(dim, 500000.0)
    wavelength = 2 * np.pi / plain
    scale = plain / inv
    np.testing.assert_allclose(scale[wavelength < 2048], 1.0, rtol=1e-15)
    np.testing.assert_allclose(scale[wavelength > 8192], 8.0, rtol=1e-15)
    mid = (wavelength >= 2048) & (wavelength <= 8192)
    assert mid.sum() > 0 and np.all((scale[mid] >= 1) & (scale[mid] <= 8))
    assert att == 1.0


def test_deepseek_v3_attention_factor_is_one():
    """mscale == mscale_all_dim: the cos/sin factor cancels to exactly 1."""
    dim, max_pos, params = PUBLISHED_ROPE_PARAMETERS["DeepSeek-V3"]
    assert rope_frequencies(dim, params, max_position_embeddings=max_pos)[1] == 1.0


def test_phi3_long_and_short_switch_at_original_length():
    dim, max_pos, params = PUBLISHED_ROPE_PARAMETERS["Phi-3 128k"]
    plain = posenc.inverse_frequencies(dim, 10000.0)
    short, att = rope_frequencies(dim, params, seq_len=4096, max_position_embeddings=max_pos)
    long, att2 = rope_frequencies(dim, params, seq_len=4097, max_position_embeddings=max_pos)
    np.testing.assert_allclose(plain / short, params["short_factor"], rtol=1e-14)
    np.testing.assert_allclose(plain / long, params["long_factor"], rtol=1e-14)
    assert att == att2 == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)))


# -- many configurations per type -------------------------------------------------------

CASES = [
    # default, full and partial rotary (head 128 * 0.75 = 96)
    (64, {"rope_type": "default"}, 2048, None),
    (128, {"rope_type": "default", "rope_theta": 500000.0}, 8192, None),
    (128, {"rope_type": "default", "partial_rotary_factor": 0.75}, 2048, None),
    (96, {}, 4096, None),
    # linear (position interpolation)
    (128, {"rope_type": "linear", "factor": 2.0}, 4096, None),
    (128, {"rope_type": "linear", "factor": 8}, 4096, None),
    (128, {"rope_type": "linear", "factor": 4.0, "partial_rotary_factor": 0.75}, 4096, None),
    (64, {"rope_type": "linear", "factor": 0.5, "rope_theta": 1e6}, 4096, None),
    # dynamic NTK, below, at and above the configured length
    (128, {"rope_type": "dynamic", "factor": 2.0}, 4096, None),
    (128, {"rope_type": "dynamic", "factor": 2.0}, 4096, 2048),
    (128, {"rope_type": "dynamic", "factor": 2.0}, 4096, 4096),
    (128, {"rope_type": "dynamic", "factor": 2.0}, 4096, 8192),
    (128, {"rope_type": "dynamic", "factor": 4.0}, 4096, 50000),
    (128, {"type": "dynamic", "factor": 2.0, "partial_rotary_factor": 0.75}, 2048, 9000),
    (4, {"rope_type": "dynamic", "factor": 3.0, "rope_theta": 500.0}, 16, 100),
    # yarn: truncate on and off, derived factor, explicit attention factor, mscale pairs
    (128, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
     16384, None),
    (128, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096,
           "truncate": False}, 16384, None),
    (64, {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 2048,
          "truncate": False, "beta_fast": 16, "beta_slow": 2}, 32768, None),
    (128, {"rope_type": "yarn", "factor": None, "original_max_position_embeddings": 4096},
     32768, None),
    (128, {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096,
           "attention_factor": 1.25}, 32768, None),
    (64, {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
          "mscale": 0.707, "mscale_all_dim": 0.707}, 163840, None),
    (64, {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
          "mscale": 0.707, "mscale_all_dim": 1.0}, 163840, None),
    (64, {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
          "mscale": 1.0}, 163840, None),
    (128, {"rope_type": "yarn", "factor": 4.0, "partial_rotary_factor": 0.75,
           "original_max_position_embeddings": 4096}, 16384, None),
    (128, {"rope_type": "yarn", "factor": 0.5, "original_max_position_embeddings": 4096},
     2048, None),
    # longrope: factors from max/original, explicit factor and attention factor, partial
    (32, {"rope_type": "longrope", "short_factor": list(np.linspace(1, 2, 16)),
          "long_factor": list(np.linspace(1, 30, 16)),
          "original_max_position_embeddings": 1024}, 32768, None),
    (32, {"rope_type": "longrope", "short_factor": list(np.linspace(1, 2, 16)),
          "long_factor": list(np.linspace(1, 30, 16)),
          "original_max_position_embeddings": 1024}, 32768, 5000),
    (32, {"rope_type": "longrope", "short_factor": [1.0] * 16, "long_factor": [4.0] * 16,
          "factor": 16.0, "attention_factor": 1.1,
          "original_max_position_embeddings": 1024}, 32768, 2000),
    (32, {"rope_type": "longrope", "short_factor": [1.0] * 12, "long_factor": [3.0] * 12,
          "partial_rotary_factor": 0.75, "original_max_position_embeddings": 512},
     4096, 4096),
    # llama3: published shape, other bands, partial
    (128, {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 2.0,
           "high_freq_factor": 8.0, "original_max_position_embeddings": 4096,
           "rope_theta": 10000.0}, 65536, None),
    (128, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
           "rope_theta": 500000.0, "partial_rotary_factor": 0.75}, 131072, None),
]


@pytest.mark.parametrize("head_dim, params, max_pos, seq_len", CASES)
def test_cases_match_transformers(head_dim, params, max_pos, seq_len):
    assert_matches_transformers(head_dim, params, max_pos, seq_len)


def _params(draw, rope_type, dim, original):
    """Random rope_parameters of one type (hypothesis)."""
    base = draw(st.sampled_from([10.0, 500.0, 1e4, 5e5, 1e6, 1e7]))
    factor = draw(st.sampled_from([1.0, 1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]))
    p = {"rope_type": rope_type, "rope_theta": base}
    if rope_type in ("linear", "dynamic"):
        p["factor"] = factor
    elif rope_type == "yarn":
        p.update(factor=factor, original_max_position_embeddings=original)
        p["truncate"] = draw(st.booleans())
        slow = draw(st.sampled_from([0.5, 1.0, 2.0]))
        p.update(beta_slow=slow, beta_fast=slow * draw(st.sampled_from([1.0, 8.0, 32.0])))
        if draw(st.booleans()):
            p.update(mscale=draw(st.sampled_from([0.707, 1.0])), mscale_all_dim=1.0)
    elif rope_type == "longrope":
        n = dim // 2
        p["short_factor"] = draw(st.lists(st.floats(1.0, 4.0), min_size=n, max_size=n))
        p["long_factor"] = draw(st.lists(st.floats(1.0, 64.0), min_size=n, max_size=n))
        p["original_max_position_embeddings"] = original
    elif rope_type == "llama3":
        low = draw(st.sampled_from([0.5, 1.0, 2.0]))
        p.update(factor=factor, low_freq_factor=low, original_max_position_embeddings=original,
                 high_freq_factor=low * draw(st.sampled_from([1.5, 4.0, 16.0])))
    return p


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_random_configs_match_transformers(data):
    # proportional reads dim as the whole head: tested in test_rope_types.py
    rope_type = data.draw(st.sampled_from([t for t in ROPE_TYPES if t != "proportional"]))
    head_dim = 2 * data.draw(st.integers(2, 80))
    original = data.draw(st.sampled_from([64, 1000, 2048, 4096, 32768]))
    max_pos = original * data.draw(st.sampled_from([1, 2, 4, 16]))
    params = _params(data.draw, rope_type, head_dim, original)
    seq_len = data.draw(st.none() | st.integers(1, 4 * max_pos))
    assert_matches_transformers(head_dim, params, max_pos, seq_len)


# -- properties of the rules -----------------------------------------------------


def test_registry_lists_every_transformers_type_we_promise():
    # every type of transformers 5.23.0 (proportional: tests/encodings/test_rope_types.py)
    assert set(ROPE_TYPES) == {"default"} | set(ROPE_INIT_FUNCTIONS)
    with pytest.raises(TypeError):
        ROPE_FREQUENCY_FUNCTIONS["mine"] = None  # read-only


def test_none_is_default_rope():
    inv, att = rope_frequencies(16)
    np.testing.assert_array_equal(inv, posenc.inverse_frequencies(16))
    assert att == 1.0
    np.testing.assert_array_equal(rope_frequencies(16, {})[0], inv)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 64).map(lambda h: 2 * h), st.floats(1.0, 64.0), st.integers(64, 8192))
def test_dynamic_interpolates_lowest_frequency_exactly(dim, factor, length):
    """d/(d-2): the last pair is divided by exactly (s n / L - s + 1), the first not at all."""
    n = 3 * length
    p = {"rope_type": "dynamic", "factor": factor}
    inv, _ = rope_frequencies(dim, p, seq_len=n, max_position_embeddings=length)
    plain = posenc.inverse_frequencies(dim)
    assert inv[0] == 1.0
    assert plain[-1] / inv[-1] == pytest.approx(factor * n / length - factor + 1, rel=1e-12)


def test_dynamic_below_length_is_default():
    p = {"rope_type": "dynamic", "factor": 4.0}
    for n in (None, 1, 100, 4096):
        inv, _ = rope_frequencies(64, p, seq_len=n, max_position_embeddings=4096)
        np.testing.assert_allclose(inv, posenc.inverse_frequencies(64), rtol=1e-15)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([1.5, 2.0, 4.0, 16.0, 40.0]), st.sampled_from([2048, 4096, 32768]),
       st.booleans())
def test_yarn_keeps_fast_pairs_and_interpolates_slow_pairs(factor, original, truncate):
    dim = 128
    p = {"rope_type": "yarn", "factor": factor, "truncate": truncate,
         "original_max_position_embeddings": original}
    inv, att = rope_frequencies(dim, p)
    plain = posenc.inverse_frequencies(dim)
    rotations = original * plain / (2 * np.pi)
    scale = plain / inv
    np.testing.assert_allclose(scale[rotations > 32], 1.0, rtol=1e-12)
    np.testing.assert_allclose(scale[rotations < 1], factor, rtol=1e-12)
    assert np.all(np.diff(scale) >= -1e-12)  # monotone from 1 to factor
    assert att == pytest.approx(0.1 * math.log(factor) + 1)


def test_yarn_factor_and_original_from_max_position_embeddings():
    p = {"rope_type": "yarn", "original_max_position_embeddings": 4096}
    a = rope_frequencies(64, p, max_position_embeddings=16384)
    b = rope_frequencies(64, dict(p, factor=4.0))
    np.testing.assert_array_equal(a[0], b[0])
    assert a[1] == b[1]
    c = rope_frequencies(64, {"rope_type": "yarn", "factor": 4.0}, max_position_embeddings=4096)
    np.testing.assert_array_equal(c[0], b[0])


def test_frequencies_are_float64_and_fresh():
    a, _ = rope_frequencies(8, {"rope_type": "linear", "factor": 2.0})
    a[:] = 0
    b, _ = rope_frequencies(8, {"rope_type": "linear", "factor": 2.0})
    assert b.dtype == np.float64 and b[0] == 0.5


def test_input_dict_not_modified():
    p = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    before = copy.deepcopy(p)
    rope_frequencies(32, p)
    assert p == before


def test_numpy_scalars_accepted():
    p = {"rope_type": "linear", "factor": np.float32(2.0), "rope_theta": np.int64(10000)}
    inv, _ = rope_frequencies(np.int64(8), p, seq_len=np.int32(5))
    np.testing.assert_allclose(inv, posenc.inverse_frequencies(8) / 2)


# -- bad input: ValueError / TypeError naming the argument or key ---------------------

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
LONG = {"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4,
        "original_max_position_embeddings": 1024, "factor": 8.0}

BAD = [
    # (dim, rope_parameters, kwargs, error, message fragment)
    (7, None, {}, ValueError, "dim"),
    (0, None, {}, ValueError, "dim"),
    (8.0, None, {}, TypeError, "dim"),
    (True, None, {}, TypeError, "dim"),
    (8, "linear", {}, TypeError, "rope_parameters must be a mapping"),
    (8, [("factor", 2.0)], {}, TypeError, "rope_parameters must be a mapping"),
    (8, {"rope_type": "ntk"}, {}, ValueError, "'ntk'"),
    (8, {"rope_type": "su"}, {}, ValueError, "must be one of"),
    (8, {"rope_type": 3}, {}, TypeError, "rope_type"),
    (8, {"type": "linear", "rope_type": "yarn", "factor": 2.0}, {}, ValueError, "disagree"),
    (8, {"rope_type": "linear"}, {}, ValueError, "'factor'] is required"),
    (8, {"rope_type": "linear", "factor": None}, {}, ValueError, "'factor'] is required"),
    (8, {"rope_type": "linear", "factor": 0.0}, {}, ValueError, "'factor'] must be > 0"),
    (8, {"rope_type": "linear", "factor": -2.0}, {}, ValueError, "'factor'] must be > 0"),
    (8, {"rope_type": "linear", "factor": math.inf}, {}, ValueError, "'factor'] must be fin"),
    (8, {"rope_type": "linear", "factor": math.nan}, {}, ValueError, "'factor'] must be fin"),
    (8, {"rope_type": "linear", "factor": "2"}, {}, TypeError, "'factor']"),
    (8, {"rope_type": "linear", "factor": True}, {}, TypeError, "'factor']"),
    (8, {"rope_type": "linear", "factor": 2.0, "beta_fast": 4}, {}, ValueError, "'beta_fast'"),
    (8, {"rope_type": "default", "factor": 2.0}, {}, ValueError, "not read by rope_type"),
    (8, {"rope_type": "linear", "factr": 2.0}, {}, ValueError, "'factr'"),
    (8, {"rope_theta": 1.0}, {}, ValueError, "'rope_theta'] must be > 1"),
    (8, {"rope_theta": "1e4"}, {}, TypeError, "'rope_theta']"),
    (8, {"partial_rotary_factor": 1.5}, {}, ValueError, "partial_rotary_factor"),
    (8, {1: 2}, {}, TypeError, "keys must be str"),
    (8, {"rope_type": "dynamic", "factor": 2.0}, {}, ValueError, "max_position_embeddings"),
    (2, {"rope_type": "dynamic", "factor": 2.0}, {"max_position_embeddings": 16},
     ValueError, "dim must be >= 4"),
    (8, {"rope_type": "dynamic"}, {"max_position_embeddings": 16}, ValueError, "'factor'"),
    (8, {"rope_type": "yarn", "factor": 4.0}, {}, ValueError,
     "'original_max_position_embeddings'] is required"),
    (8, {"rope_type": "yarn", "original_max_position_embeddings": 4096}, {}, ValueError,
     "'factor'] is required"),
    (8, dict(YARN, factor=0), {}, ValueError, "'factor'] must be > 0"),
    (8, dict(YARN, original_max_position_embeddings=4096.0), {}, TypeError,
     "'original_max_position_embeddings']"),
    (8, dict(YARN, original_max_position_embeddings=0), {}, ValueError,
     "'original_max_position_embeddings']"),
    (8, dict(YARN, beta_fast=1.0, beta_slow=2.0), {}, ValueError, "'beta_fast'] must be >="),
    (8, dict(YARN, beta_slow=0.0), {}, ValueError, "'beta_slow'] must be > 0"),
    (8, dict(YARN, truncate="no"), {}, TypeError, "'truncate']"),
    (8, dict(YARN, attention_factor=0.0), {}, ValueError, "'attention_factor']"),
    (8, dict(YARN, mscale=-1.0, mscale_all_dim=1.0), {}, ValueError, "'mscale']"),
    (8, dict(YARN, low_freq_factor=1.0), {}, ValueError, "'low_freq_factor'"),
    (8, {k: v for k, v in LLAMA3.items() if k != "factor"}, {}, ValueError, "'factor']"),
    (8, {k: v for k, v in LLAMA3.items() if k != "low_freq_factor"}, {}, ValueError,
     "'low_freq_factor'] is required"),
    (8, {k: v for k, v in LLAMA3.items() if k != "high_freq_factor"}, {}, ValueError,
     "'high_freq_factor'] is required"),
    (8, dict(LLAMA3, high_freq_factor=0.5), {}, ValueError,
     "'high_freq_factor'] must be >= rope_parameters['low_freq_factor']"),
    (8, dict(LLAMA3, factor=-1.0), {}, ValueError, "'factor'] must be > 0"),
    (8, {k: v for k, v in LLAMA3.items() if k != "original_max_position_embeddings"}, {},
     ValueError, "'original_max_position_embeddings'] is required"),
    (8, dict(LONG, short_factor=[1.0] * 3), {}, ValueError, "'short_factor'] must have dim"),
    (8, dict(LONG, long_factor=[1.0] * 8), {}, ValueError, "'long_factor'] must have dim"),
    (8, {k: v for k, v in LONG.items() if k != "long_factor"}, {}, ValueError,
     "'long_factor'] is required"),
    (8, dict(LONG, short_factor=2.0), {}, TypeError, "'short_factor'] must be a list"),
    (8, dict(LONG, short_factor="1234"), {}, TypeError, "'short_factor'] must be a list"),
    (8, dict(LONG, short_factor=[1.0, 1.0, "x", 1.0]), {}, TypeError, "'short_factor']"),
    (8, dict(LONG, long_factor=[1.0, 0.0, 1.0, 1.0]), {}, ValueError, "'long_factor']"),
    (8, dict(LONG, long_factor=[1.0, math.nan, 1.0, 1.0]), {}, ValueError, "'long_factor']"),
    (8, {k: v for k, v in LONG.items() if k != "factor"}, {}, ValueError, "'factor'"),
    (8, dict(LONG, original_max_position_embeddings=1), {}, ValueError, ">= 2"),
    (8, {"rope_type": "linear", "factor": 1e308}, {}, ValueError, "2**53"),
    (8, {"rope_type": "dynamic", "factor": 1e308}, {"max_position_embeddings": 16},
     ValueError, "(factor x the original 16 tokens) must be at most 2**53"),
    (8, dict(YARN, factor=1e308), {}, ValueError, "(factor x the original 4,096 tokens)"),
    (8, dict(LONG, factor=1e308), {}, ValueError, "(factor x the original 1,024 tokens)"),
    (8, dict(LLAMA3, factor=1e308), {}, ValueError, "(factor x the original 8,192 tokens)"),
    (8, {"rope_type": "proportional", "factor": 1e308}, {}, ValueError, "2**53"),
    (8, None, {"seq_len": 0}, ValueError, "seq_len"),
    (8, None, {"seq_len": 3.0}, TypeError, "seq_len"),
    (8, None, {"max_position_embeddings": -5}, ValueError, "max_position_embeddings"),
    (8, None, {"max_position_embeddings": "4096"}, TypeError, "max_position_embeddings"),
]


@pytest.mark.parametrize("dim, params, kwargs, error, fragment", BAD)
def test_bad_input_names_the_key(dim, params, kwargs, error, fragment):
    with pytest.raises(error) as info:
        rope_frequencies(dim, params, **kwargs)
    assert fragment in str(info.value)


def test_factor_may_scale_the_context_to_2_to_the_53_and_no_further():
    top = 2.0 ** 53 / 4096  # the largest context whose positions float64 counts exactly
    inv, att = rope_frequencies(128, dict(YARN, factor=top))
    assert np.all(inv >= np.finfo(np.float32).tiny) and att == pytest.approx(0.1 * math.log(top) + 1)
    assert att < 4
    with pytest.raises(ValueError, match=r"got factor 2\.19902e\+12\. Set factor to"):
        rope_frequencies(128, dict(YARN, factor=math.nextafter(top, math.inf)))
