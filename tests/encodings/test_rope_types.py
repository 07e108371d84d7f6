"""The rope types and layouts of 2025-2026 models against transformers 5.23.0.

- ``"proportional"`` (Gemma 4's full-attention layers) against
  ``ROPE_INIT_FUNCTIONS["proportional"]``, hypothesis over head size, rotated fraction,
  base and factor;
- ``rope_parameters`` keyed by layer type against the rotary modules of tiny random
  Gemma 3 and Gemma 4 text models (``Gemma3RotaryEmbedding``,
  ``Gemma4TextRotaryEmbedding``: one ``inv_freq`` buffer and attention factor per layer
  type, each computed from the config resolved for that layer type), hypothesis over
  the rope type and parameters of each layer type;
- the bad inputs of the per-layer form.
"""

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import Gemma3TextConfig, Gemma4TextConfig, LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding

from posenc import rope_frequencies
from posenc.rope_scaling import ROPE_TYPES, is_per_layer_type

RTOL = 3e-6  # float32 rounding of base ** (2i/d) (see test_rope_scaling.py)


def assert_close_to_float32(ours, theirs):
    """Equal zeros where transformers has zeros, float32 rounding elsewhere."""
    theirs = theirs.double().numpy()
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(ours == 0, theirs == 0)
    nz = theirs != 0
    np.testing.assert_allclose(ours[nz], theirs[nz], rtol=RTOL, atol=0)


# -- proportional ---------------------------------------------------------------------


def hf_proportional(head_dim, params):
    config = LlamaConfig(hidden_size=head_dim * 2, num_attention_heads=2, num_key_value_heads=2,
                         head_dim=head_dim, rope_parameters=copy.deepcopy(params))
    return ROPE_INIT_FUNCTIONS["proportional"](config)


@settings(max_examples=200, deadline=None)
@given(
    head_dim=st.integers(1, 160).map(lambda n: 2 * n),
    fraction=st.sampled_from([0.1, 0.125, 0.25, 0.3, 0.5, 0.75, 1.0]) | st.floats(0.01, 1.0),
    base=st.sampled_from([10.0, 1e4, 1e6, 5e6]) | st.floats(1.5, 1e7),
    factor=st.none() | st.sampled_from([1.0, 2.0, 8.0]) | st.floats(0.25, 64.0),
)
def test_proportional_matches_transformers(head_dim, fraction, base, factor):
    params = {"rope_type": "proportional", "rope_theta": base, "partial_rotary_factor": fraction}
    if factor is not None:
        params["factor"] = factor
    inv, att = rope_frequencies(head_dim, params)
    ref, ref_att = hf_proportional(head_dim, params)
    assert inv.shape == (head_dim // 2,)  # always the whole head
    assert_close_to_float32(inv, ref)
    assert att == ref_att == 1.0


def test_proportional_is_the_fast_end_of_a_full_rope():
    """Gemma 4's full layers (head 512, 1/4 rotated): the 64 fastest pairs of base-1e6 RoPE.

    Not a RoPE of width 128 (which would spread the base over 64 pairs: its slowest pair
    would be as slow as the full head's slowest, not the full head's 64th).
    """
    params = {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.25}
    inv, _ = rope_frequencies(512, params)
    full, _ = rope_frequencies(512, {"rope_theta": 1e6})
    narrow, _ = rope_frequencies(128, {"rope_theta": 1e6})
    np.testing.assert_array_equal(inv[:64], full[:64])
    assert np.all(inv[64:] == 0)
    assert inv[63] > 100 * narrow[63]  # the narrow rope reaches far slower frequencies


def test_proportional_without_fraction_is_linear():
    """transformers warns: no partial_rotary_factor makes it linear scaling (all pairs turn)."""
    inv, _ = rope_frequencies(64, {"rope_type": "proportional", "rope_theta": 1e4, "factor": 4.0})
    lin, _ = rope_frequencies(64, {"rope_type": "linear", "rope_theta": 1e4, "factor": 4.0})
    np.testing.assert_allclose(inv, lin, rtol=1e-15)


# -- rope_parameters keyed by layer type, against real model modules ------------------


def gemma4_config(rope_parameters=None, head_dim=16, global_head_dim=32):
    return Gemma4TextConfig(
        hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=head_dim,
        global_head_dim=global_head_dim, num_hidden_layers=6, max_position_embeddings=4096,
        vocab_size=64, vocab_size_per_layer_input=64,
        rope_parameters=copy.deepcopy(rope_parameters),
    )


def gemma3_config(rope_parameters, head_dim=16):
    return Gemma3TextConfig(
        hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=head_dim,
        num_hidden_layers=6, max_position_embeddings=8192, vocab_size=64,
        rope_parameters=copy.deepcopy(rope_parameters),
    )


def module_frequencies(module, layer_type):
    return getattr(module, f"{layer_type}_inv_freq"), getattr(module, f"{layer_type}_attention_scaling")


def rotated(head_dim, params):
    if params.get("rope_type") == "proportional":
        return head_dim
    return int(head_dim * params.get("partial_rotary_factor", 1.0))


def test_gemma4_default_config_per_layer_type():
    """Gemma4TextConfig's own defaults: local base 1e4 on head 16, global proportional on 32."""
    config = gemma4_config(None)
    module = Gemma4TextRotaryEmbedding(config)
    params = config.rope_parameters
    assert is_per_layer_type(params)
    dims = {"sliding_attention": 16, "full_attention": 32}  # head_dim, global_head_dim
    for layer_type, head_dim in dims.items():
        ref, ref_att = module_frequencies(module, layer_type)
        inv, att = rope_frequencies(rotated(head_dim, params[layer_type]), params,
                                    layer_type=layer_type, max_position_embeddings=4096)
        assert_close_to_float32(inv, ref)
        assert att == ref_att
    # the two layer types really differ: different widths, and zeros only in the global one
    assert module.full_attention_inv_freq.shape != module.sliding_attention_inv_freq.shape
    assert (module.full_attention_inv_freq == 0).sum() == 12


def _layer_params(draw, head_dim):
    """A random flat rope_parameters for one layer type (types transformers can nest)."""
    rope_type = draw(st.sampled_from(["default", "linear", "yarn", "llama3", "proportional"]))
    p = {"rope_type": rope_type, "rope_theta": draw(st.sampled_from([10.0, 1e4, 1e6]))}
    factor = draw(st.sampled_from([2.0, 4.0, 8.0, 32.0]))
    if rope_type == "linear":
        p["factor"] = factor
    elif rope_type == "yarn":
        # truncate is left out: transformers reads it from the top level (see below)
        p.update(factor=factor, original_max_position_embeddings=draw(st.sampled_from([512, 2048])),
                 beta_fast=draw(st.sampled_from([8.0, 32.0])), beta_slow=1.0)
    elif rope_type == "llama3":
        p.update(factor=factor, low_freq_factor=1.0, high_freq_factor=4.0,
                 original_max_position_embeddings=draw(st.sampled_from([512, 2048])))
    elif rope_type == "proportional":
        p["partial_rotary_factor"] = draw(st.sampled_from([0.25, 0.5, 1.0]))
        if draw(st.booleans()):
            p["factor"] = factor
    elif draw(st.booleans()):
        p["partial_rotary_factor"] = 0.5
    return p


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_per_layer_configs_match_gemma3_module(data):
    head_dim = data.draw(st.sampled_from([8, 16, 32]))
    params = {lt: _layer_params(data.draw, head_dim) for lt in ("sliding_attention", "full_attention")}
    # partial rotary of the default type is read by Gemma3's own default function only if
    # non-default: Gemma3RotaryEmbedding.compute_default_rope_parameters ignores it
    for p in params.values():
        if p["rope_type"] == "default":
            p.pop("partial_rotary_factor", None)
    module = Gemma3RotaryEmbedding(gemma3_config(params, head_dim))
    for layer_type, p in params.items():
        ref, ref_att = module_frequencies(module, layer_type)
        inv, att = rope_frequencies(rotated(head_dim, p), params, layer_type=layer_type,
                                    max_position_embeddings=8192)
        assert_close_to_float32(inv, ref)
        assert att == pytest.approx(ref_att, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_per_layer_configs_match_gemma4_module(data):
    head_dim, global_head_dim = data.draw(st.sampled_from([(8, 16), (16, 32), (32, 32)]))
    params = {lt: _layer_params(data.draw, head_dim) for lt in ("sliding_attention", "full_attention")}
    for p in params.values():
        if p["rope_type"] == "default":
            p.pop("partial_rotary_factor", None)
    module = Gemma4TextRotaryEmbedding(gemma4_config(params, head_dim, global_head_dim))
    dims = {"sliding_attention": head_dim, "full_attention": global_head_dim}
    for layer_type, p in params.items():
        ref, ref_att = module_frequencies(module, layer_type)
        inv, att = rope_frequencies(rotated(dims[layer_type], p), params, layer_type=layer_type,
                                    max_position_embeddings=4096)
        assert_close_to_float32(inv, ref)
        assert att == pytest.approx(ref_att, rel=1e-12)


def test_transformers_reads_yarn_truncate_from_the_top_level():
    """Where posenc and transformers 5.23.0 differ, on purpose.

    ``_compute_yarn_parameters`` reads ``truncate`` from ``config.rope_parameters`` -- the
    dict keyed by layer type when there is one -- so a layer type's own
    ``"truncate": False`` is not seen and that layer is computed with truncation.  posenc
    reads each layer type's own key.  This pins both behaviours, so that a transformers
    that fixes it fails here and the note can go.
    """
    yarn = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 8.0,
            "original_max_position_embeddings": 512, "truncate": False}
    params = {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
              "full_attention": yarn}
    module = Gemma3RotaryEmbedding(gemma3_config(params, 32))
    ref, _ = module_frequencies(module, "full_attention")
    ours, _ = rope_frequencies(32, params, layer_type="full_attention")
    truncated, _ = rope_frequencies(32, dict(yarn, truncate=True))
    assert not np.allclose(ours, truncated, rtol=1e-4)  # the flag matters for this config
    assert_close_to_float32(truncated, ref)  # transformers: truncated regardless
    flat, _ = rope_frequencies(32, yarn)
    np.testing.assert_array_equal(ours, flat)  # posenc: the layer's own flag


def test_flat_parameters_ignore_layer_type():
    flat = {"rope_type": "linear", "factor": 2.0}
    np.testing.assert_array_equal(
        rope_frequencies(8, flat, layer_type="full_attention")[0], rope_frequencies(8, flat)[0]
    )


def test_registry_has_every_transformers_type():
    assert set(ROPE_TYPES) == {"default"} | set(ROPE_INIT_FUNCTIONS)


NESTED = {"sliding_attention": {"rope_type": "default"},
          "full_attention": {"rope_type": "linear", "factor": 2.0},
          "nope_attention": None}


@pytest.mark.parametrize(
    "params, kwargs, error, fragment",
    [
        (NESTED, {}, ValueError, "pass layer_type="),
        (NESTED, {"layer_type": "chunked_attention"}, ValueError, "layer_type must be one of"),
        (NESTED, {"layer_type": "nope_attention"}, ValueError, "has no RoPE"),
        (NESTED, {"layer_type": 0}, TypeError, "layer_type must be a str"),
        ({"rope_type": "default", "full_attention": {"rope_type": "default"}}, {}, ValueError,
         "mixes per-layer-type entries"),
        ({"full_attention": {1: 2}}, {"layer_type": "full_attention"}, TypeError, "keys must be str"),
        ({"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.0}},
         {"layer_type": "full_attention"}, ValueError, "partial_rotary_factor"),
        ({"rope_type": "proportional", "factor": 0.0}, {}, ValueError, "'factor'] must be > 0"),
        ({"rope_type": "proportional", "beta_fast": 4.0}, {}, ValueError, "not read by rope_type"),
    ],
)
def test_bad_per_layer_input(params, kwargs, error, fragment):
    with pytest.raises(error, match=None) as info:
        rope_frequencies(8, params, **kwargs)
    assert fragment in str(info.value)


def test_is_per_layer_type_rejects_non_mappings():
    with pytest.raises(TypeError, match="rope_parameters must be a mapping"):
        is_per_layer_type([("rope_type", "default")])


@pytest.mark.parametrize("factor, band", [(16.0, 1.0), (8.0, 2.0), (32.0, 0.5)])
@pytest.mark.filterwarnings("ignore")
def test_llama3_rule_with_an_empty_band_matches_transformers(factor, band):
    """low_freq_factor == high_freq_factor (Llama 4 Scout: 16, 1, 1): a step, as transformers.

    transformers warns and computes it (its smooth branch is 0/0 only where it is unused).
    """
    params = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": factor,
              "low_freq_factor": band, "high_freq_factor": band,
              "original_max_position_embeddings": 8192}
    config = LlamaConfig(hidden_size=256, num_attention_heads=2, num_key_value_heads=2,
                         head_dim=128, max_position_embeddings=131072,
                         rope_parameters=copy.deepcopy(params))
    ref, att = ROPE_INIT_FUNCTIONS["llama3"](config)
    inv, ours_att = rope_frequencies(128, params)
    assert np.all(np.isfinite(inv)) and att == ours_att == 1.0
    assert_close_to_float32(inv, ref)
    plain, _ = rope_frequencies(128, {"rope_theta": 500000.0})
    long = 2 * np.pi / plain > 8192 / band
    np.testing.assert_allclose(inv, np.where(long, plain / factor, plain), rtol=1e-15)
