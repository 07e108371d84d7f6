"""What the chapter 'models' (docs/*/models.md) states, pinned against posenc.

Each test is one sentence of the chapter: the atlas's counts, the designs of DeepSeek-V3,
Llama 4, Gemma 3/4, SmolLM3 and Qwen3, and for every reproduced bug from a public issue
thread what the buggy code computed and what the correct code computes.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import rope_frequencies
from posenc.analysis import long_context as lc
from posenc.atlas import (atlas, atlas_entry, describe_config, llama4_attention_temperature,
                          logn_attention_scale)


def model(slug):
    entry = atlas_entry(slug)
    return entry["config"], describe_config(entry["config"], name=entry["name"])


# -- the atlas -----------------------------------------------------------------------------


def test_atlas_counts_and_the_exception():
    models = atlas()
    assert len(models) >= 15
    assert sum(d.nope_layers > 0 for d in models) == 3          # Llama 4 x2, SmolLM3
    assert sum(any(layer.window for layer in d.layers) for d in models) >= 8
    assert sum(d.global_rope.rotated_fraction < 1 for d in models) == 3  # DeepSeek, Gemma 4 x2


def test_seven_models_apply_one_rope_the_same_way_in_every_layer():
    models = atlas()
    single = [d.name for d in models if len(d.layers) == 1 and d.nope_layers == 0]
    assert len(single) == 7, single
    mixing = [d.name for d in models if any(layer.window for layer in d.layers)
              and (d.nope_layers > 0 or any(layer.window is None for layer in d.layers))]
    assert "Mistral 7B" not in mixing and "Mistral 7B" in single  # a window in every layer
    assert len(mixing) == 8, mixing


def test_every_layer_type_with_a_span_has_a_pair_that_never_turns_within_it():
    seen = 0
    for d in atlas():
        for layer in d.layers:
            ratio = d.wavelength_over_span(layer)
            if ratio is not None:
                seen += 1
                assert ratio > 1, (d.name, layer.layer_type)
    assert seen >= 16


def test_the_span_not_the_configured_length_bounds_rope_offsets():
    rows = {d.name.split(" (")[0]: d.row() for d in atlas()}
    mistral, maverick = rows["Mistral 7B"], rows["Llama 4 Maverick 17B-128E"]
    assert mistral["largest_offset"] == 4095 and mistral["max_length"] == 32768
    assert maverick["largest_offset"] == 8191
    assert maverick["longest_wavelength_over_span"] == pytest.approx(312.4, abs=0.05)
    assert maverick["longest_wavelength_pretrained"] / maverick["max_length"] == pytest.approx(2.44, abs=0.005)


def test_gemma3_global_layers_are_scaled_8x_and_gemma4_patterns():
    _, g3 = model("gemma-3-27b")
    local, glob = g3.layers
    assert g3.factor == 8 and glob.rope_type == "linear" and local.rope_type == "default"
    assert glob.longest_wavelength() == pytest.approx(8 * glob.longest_wavelength(scaled=False))
    assert 40.4e6 < glob.longest_wavelength() < 40.6e6
    np.testing.assert_array_equal(local.inv_freq, local.plain_inv_freq)  # local untouched
    for slug, ratio, window in (("gemma-4-31b", 5, 1024), ("gemma-4-e2b", 4, 512)):
        _, d = model(slug)
        loc, gl = d.layers
        assert (loc.layers // gl.layers, loc.layers % gl.layers, loc.window) == (ratio, 0, window)


def test_olmo3_config_scales_only_the_full_attention_layers():
    from transformers import Olmo3Config

    c = Olmo3Config(num_hidden_layers=4, rope_scaling={
        "rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192})
    assert c.rope_parameters["full_attention"]["rope_type"] == "yarn"
    assert c.rope_parameters["sliding_attention"]["rope_type"] == "default"


def test_olmo3_yarn_reaches_only_the_full_attention_layers_in_the_model():
    """'its model builds one set of frequencies per layer type', with the released
    script's YaRN (factor 8, beta_fast 32, beta_slow 1, from 8,192 tokens): the
    full-attention frequencies are posenc's yarn rule (19 pairs left alone, 29 divided
    by 8, 16 blended, factor 1.2079), the sliding-window ones plain RoPE."""
    from transformers import Olmo3Config
    from transformers.models.olmo3.modeling_olmo3 import Olmo3RotaryEmbedding

    from posenc.analysis.long_context import yarn_regions

    params = {"rope_type": "yarn", "factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0,
              "original_max_position_embeddings": 8192}
    c = Olmo3Config(num_hidden_layers=4, hidden_size=4096, num_attention_heads=32,
                    max_position_embeddings=65_536, rope_theta=500_000.0,
                    rope_scaling=dict(params))
    rotary = Olmo3RotaryEmbedding(config=c)
    ours = dict(params, rope_theta=500_000.0)
    inv, att = rope_frequencies(128, ours)
    np.testing.assert_allclose(rotary.full_attention_inv_freq.double().numpy(), inv, rtol=1e-6)
    assert rotary.full_attention_attention_scaling == pytest.approx(att)
    np.testing.assert_allclose(rotary.sliding_attention_inv_freq.double().numpy(),
                               posenc.inverse_frequencies(128, 500_000.0), rtol=1e-6)
    assert rotary.sliding_attention_attention_scaling == 1.0
    r = yarn_regions(128, ours)
    assert (r["extrapolated"], r["interpolated"], r["blended"]) == (19, 29, 16)
    assert r["attention_factor"] == pytest.approx(0.1 * math.log(8) + 1)


def test_every_model_with_a_length_has_a_slow_pair_that_never_turned():
    for d in atlas():
        if d.training_length is not None:
            assert d.global_rope.longest_wavelength(scaled=False) > d.training_length, d.name


def test_atlas_table_and_figures_in_both_languages():
    import posenc.figures as pf

    for lang in ("en", "zh"):
        pf.set_language(lang)
        table = pf.atlas_table(atlas())
        assert len(table.rows) == len(atlas()) and "<table" in table._repr_html_()
        assert pf.atlas_wavelength_figure(atlas()).axes
    pf.set_language("en")
    with pytest.raises(ValueError, match="must not be empty"):
        pf.atlas_table([])
    with pytest.raises(TypeError, match="ModelDescription"):
        pf.atlas_table([{"name": "x"}])


def test_atlas_rows_keep_their_qualifier():
    """A row whose config is not what a checkpoint ships says so in both languages: the
    Qwen3 row adds the YaRN of the Qwen3 docs (the published config has none), gpt-oss is
    the 120b reference config, SmolLM3 its final long-context stage."""
    import posenc.figures as pf
    from posenc.figures.models import _QUALIFIERS

    expected = {
        "en": ["Qwen3 8B (+ YaRN, as the Qwen3 docs recommend)",
               "gpt-oss (120b reference config)", "SmolLM3 3B (final long-context stage)"],
        "zh": ["Qwen3 8B（加上 Qwen3 文档推荐的 YaRN）", "gpt-oss（120b 的参考配置）",
               "SmolLM3 3B（最后的长上下文训练阶段）"],
    }
    for lang, names in expected.items():
        pf.set_language(lang)
        rows = [row[0] for row in pf.atlas_table(atlas()).rows]
        assert set(names) <= set(rows), rows
    pf.set_language("en")
    for d in atlas():
        model, _, qualifier = d.name.partition(" (")
        if qualifier:
            assert qualifier.removesuffix(")") in _QUALIFIERS, (
                f"{d.name}: add its qualifier's words in both languages to _QUALIFIERS "
                "in posenc/figures/models.py")


# -- DeepSeek-V3 ---------------------------------------------------------------------------


def test_deepseek_rotates_64_of_192_and_moves_mscale_to_the_softmax():
    config, d = model("deepseek-v3")
    layer = d.layers[0]
    assert (2 * layer.rotated_pairs, layer.head_dim) == (64, 192)
    assert layer.attention_factor == 1.0
    plain = {k: v for k, v in config["rope_parameters"].items()
             if k not in ("mscale", "mscale_all_dim")}
    _, yarn = rope_frequencies(64, plain)
    assert yarn == pytest.approx(0.1 * math.log(40) + 1)
    # the reference code: softmax_scale * mscale * mscale with mscale = 0.1 ln 40 + 1
    assert yarn ** 2 == pytest.approx(1.8738542070926265)


# -- Llama 4 -------------------------------------------------------------------------------


def test_scout_layers_and_its_llama3_step():
    _, scout = model("llama-4-scout")
    chunked = scout.layers[0]
    assert (chunked.layers, scout.nope_layers) == (36, 12)
    assert chunked.window == 8192 and chunked.window_kind == "chunked"
    step = chunked.plain_inv_freq / chunked.inv_freq
    assert set(np.round(step, 9)) == {1.0, 16.0}
    assert int((step == 1).sum()) == 35 and int((step > 1).sum()) == 29
    # a step: the slowed pairs are exactly those whose wavelength exceeds 8192
    lam = 2 * np.pi / chunked.plain_inv_freq
    np.testing.assert_array_equal(step > 1, lam > 8192)


def llama_models_reference(start_pos, seqlen, floor_scale=8192.0, attn_scale=0.1):
    """The line of meta-llama/llama-models models/llama4/model.py (a9c89c4), verbatim."""
    seq_positions = torch.arange(start_pos, start_pos + seqlen, dtype=torch.float32)
    attn_scales = torch.log(torch.floor((seq_positions + 1.0) / floor_scale) + 1.0) * attn_scale + 1.0
    return attn_scales


@given(start=st.integers(0, 12_000_000), n=st.integers(1, 64),
       floor=st.sampled_from([8192.0, 1024.0, 4096.0]), scale=st.sampled_from([0.1, 0.05, 0.2]))
def test_llama4_temperature_equals_llama_models(start, n, floor, scale):
    ours = llama4_attention_temperature(np.arange(start, start + n), floor, scale)
    ref = llama_models_reference(start, n, floor, scale).double().numpy()
    # the reference forms positions in float32: equal where float32 holds them exactly
    np.testing.assert_allclose(ours, ref, rtol=2e-7)


def test_llama4_temperature_values_in_the_chapter():
    tau = llama4_attention_temperature([0, 8190, 8191, 131_071, 1_048_575, 10_485_759])
    assert tau[0] == tau[1] == 1.0
    np.testing.assert_allclose(tau[2:], [1 + 0.1 * math.log(2), 1 + 0.1 * math.log(17),
                                         1 + 0.1 * math.log(129), 1 + 0.1 * math.log(1281)])
    assert np.all(llama4_attention_temperature(np.arange(8191)) == 1.0)


@pytest.mark.parametrize("kwargs, error, fragment", [
    ({"positions": [0.5]}, TypeError, "integers"),
    ({"positions": [-1]}, ValueError, ">= 0"),
    ({"positions": [1], "floor_scale": 0}, ValueError, "floor_scale"),
    ({"positions": [1], "attn_scale": -0.1}, ValueError, "attn_scale"),
    ({"positions": [1], "attn_scale": "0.1"}, TypeError, "attn_scale"),
])
def test_llama4_temperature_bad_input(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        llama4_attention_temperature(**kwargs)


def qwen_logn_reference(seq_length, n):
    """The list Qwen-7B's modeling_qwen.py builds (logn_list), for positions 0 .. n-1."""
    return [(math.log(i, seq_length) if i > seq_length else 1) for i in range(1, n + 1)]


@settings(deadline=None)  # the reference loops in Python: slow on a loaded machine
@given(length=st.integers(2, 70_000), start=st.integers(0, 200_000), n=st.integers(1, 64))
def test_logn_scale_equals_qwen_reference(length, start, n):
    ours = logn_attention_scale(np.arange(start, start + n), length)
    ref = qwen_logn_reference(length, start + n)[start:]
    np.testing.assert_allclose(ours, ref, rtol=1e-15)


def test_logn_scale_is_one_inside_the_training_length_and_grows_like_log():
    scale = logn_attention_scale(np.arange(8192), 8192)
    assert np.all(scale == 1.0)
    # past L, doubling the tokens seen adds ln 2 / ln L
    s = logn_attention_scale([16_383, 32_767], 8192)
    np.testing.assert_allclose(s, [14 / 13, 15 / 13], rtol=1e-15)


@pytest.mark.parametrize("kwargs, error, fragment", [
    ({"positions": [0.5], "training_length": 8}, TypeError, "integers"),
    ({"positions": [-1], "training_length": 8}, ValueError, ">= 0"),
    ({"positions": [1], "training_length": 1}, ValueError, "training_length"),
    ({"positions": [1], "training_length": 8.0}, TypeError, "training_length"),
    ({"positions": [1], "training_length": True}, TypeError, "training_length"),
])
def test_logn_scale_bad_input(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        logn_attention_scale(**kwargs)


# -- Gemma, SmolLM3, Qwen3 -----------------------------------------------------------------


def test_gemma_bases_and_gemma4_global_longest_wavelength():
    _, g3 = model("gemma-3-27b")
    local, glob = g3.layers
    assert (local.rope_theta, glob.rope_theta, local.window) == (1e4, 1e6, 1024)
    assert (local.layers, glob.layers) == (52, 10)
    assert local.longest_wavelength() == pytest.approx(2 * np.pi * 1e4 ** (126 / 128))
    _, g4 = model("gemma-4-31b")
    g = g4.global_rope
    assert (g.rotated_pairs, g.head_dim // 2) == (64, 256)
    assert g.longest_wavelength() == pytest.approx(2 * np.pi * 1e6 ** (126 / 512))
    assert 188 < g.longest_wavelength() < 189


def test_smollm3_every_fourth_layer_is_nope():
    _, smol = model("smollm3-3b")
    assert (smol.layers[0].layers, smol.nope_layers) == (27, 9)


def test_qwen3_static_yarn_moves_pairs_for_any_length():
    _, q3 = model("qwen3-8b")
    layer = q3.layers[0]
    assert int((layer.inv_freq != layer.plain_inv_freq).sum()) == 40
    assert layer.attention_factor == pytest.approx(0.1 * math.log(4) + 1)
    params = atlas_entry("qwen3-8b")["config"]["rope_parameters"]
    short, _ = rope_frequencies(128, params, seq_len=10)
    np.testing.assert_array_equal(short, layer.inv_freq)  # static: the length does not matter


# -- the bugs ------------------------------------------------------------------------------


def test_25306_dynamic_ntk_stale_cache_before_and_after():
    dyn = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10_000.0}
    fresh, _ = rope_frequencies(128, dyn, max_position_embeddings=4096, seq_len=100)
    stale, _ = rope_frequencies(128, dyn, max_position_embeddings=4096, seq_len=16_384)
    np.testing.assert_array_equal(fresh, posenc.inverse_frequencies(128, 10_000.0))
    assert int((stale != fresh).sum()) == 63
    assert 7.0 < np.abs(99 * (stale - fresh)).max() < 7.1
    # transformers 5.23 resets to the original frequencies for the short prompt (the fix)
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = LlamaConfig(hidden_size=256, num_attention_heads=2, max_position_embeddings=4096,
                         rope_parameters={"rope_type": "dynamic", "factor": 2.0,
                                          "rope_theta": 10_000.0})
    rotary = LlamaRotaryEmbedding(config)
    x = torch.zeros(1, 1, 128)
    rotary(x, torch.arange(16_384)[None])
    np.testing.assert_allclose(rotary.inv_freq.double().numpy(), stale, rtol=1e-6)
    rotary(x, torch.arange(100)[None])
    np.testing.assert_allclose(rotary.inv_freq.double().numpy(), fresh, rtol=1e-6)


def test_27722_gpt_oss_unrounded_ramp_is_the_pull_requests_range():
    params = atlas_entry("gpt-oss")["config"]["rope_parameters"]
    unrounded, _ = rope_frequencies(64, params)
    rounded, _ = rope_frequencies(64, {**params, "truncate": True})
    theta = posenc.inverse_frequencies(64, params["rope_theta"])
    ramp = (theta - unrounded) / (theta - theta / params["factor"])
    inside = np.flatnonzero((ramp > 0) & (ramp < 1))
    slope = (ramp[inside[-1]] - ramp[inside[0]]) / (inside[-1] - inside[0])
    low = inside[0] - ramp[inside[0]] / slope
    # vllm-project/vllm#28244, "Test Result": low=8.092779115512402, high=17.39802450158856
    assert low == pytest.approx(8.092779115512402, rel=1e-12)
    assert low + 1 / slope == pytest.approx(17.39802450158856, rel=1e-12)
    assert int((unrounded != rounded).sum()) == 9
    assert np.abs(131_071 * (unrounded - rounded)).max() > 20


def test_38224_yarn_factor_replaced_by_the_length_ratio():
    asked = {"rope_type": "yarn", "rope_theta": 1e6, "factor": 2.0,
             "original_max_position_embeddings": 32_768}
    asked_freq, asked_att = rope_frequencies(128, asked)
    used_freq, used_att = rope_frequencies(128, {**asked, "factor": 131_072 / 32_768})
    base = posenc.inverse_frequencies(128, 1e6)
    assert (base / asked_freq).max() == pytest.approx(2.0)
    assert (base / used_freq).max() == pytest.approx(4.0)
    assert asked_att == pytest.approx(1 + 0.1 * math.log(2))
    assert used_att == pytest.approx(1 + 0.1 * math.log(4))
    # posenc honours the given factor even when max_position_embeddings says otherwise
    honoured, _ = rope_frequencies(128, asked, max_position_embeddings=131_072)
    np.testing.assert_array_equal(honoured, asked_freq)


def test_33129_longrope_stale_keys_break_relative_scores():
    dim, max_pos, phi3 = lc.PUBLISHED_ROPE_PARAMETERS["Phi-3 128k"]
    short, _ = rope_frequencies(dim, phi3, max_position_embeddings=max_pos, seq_len=4096)
    long, _ = rope_frequencies(dim, phi3, max_position_embeddings=max_pos, seq_len=4097)
    assert not np.array_equal(short, long)
    keys, query = np.arange(4096), 4096
    stale = query * long - keys[:, None] * short
    fresh = (query - keys)[:, None] * long
    gap = np.abs(np.cos(stale).mean(1) - np.cos(fresh).mean(1)).max()
    assert gap > 0.5
    # recomputing the cache (the fix) gives scores that depend on the offset only
    shifted = (query + 7 - (keys + 7))[:, None] * long
    np.testing.assert_allclose(np.cos(shifted), np.cos(fresh))


def test_felafax_59_llama31_without_its_rule():
    dim, _, params = lc.PUBLISHED_ROPE_PARAMETERS["Llama 3.1"]
    with_rule, _ = rope_frequencies(dim, params)
    without = posenc.inverse_frequencies(dim, params["rope_theta"])
    assert int((with_rule != without).sum()) == 35
    assert (without / with_rule).max() == pytest.approx(8.0)
    assert 100_000 * (without - with_rule).max() > 80


def test_maxtext_4616_partial_rotary_ignored_turns_the_whole_head():
    head = np.random.default_rng(0).standard_normal((2, 256))
    at = np.array([0, 1000])
    right = posenc.apply_rope(head.copy(), at, layout="half", rotary_dim=64)
    wrong = posenc.apply_rope(head.copy(), at, layout="half")
    assert int((~np.isclose(right[1], head[1])).sum()) == 64
    np.testing.assert_array_equal(right[1, 64:], head[1, 64:])
    assert int((~np.isclose(wrong[1], head[1])).sum()) == 256


def test_atlas_table_is_a_wide_table():
    """The atlas is marked as a wide table (posenc.css: on a phone it scrolls sideways
    under a first column that stays in view, instead of becoming a card per model, which
    tests/book/test_browser.py checks in the browser); a plain table is not."""
    from posenc.figures._tables import BookTable

    import posenc.figures as pf

    pf.set_language("en")
    html = pf.atlas_table(atlas())._repr_html_()
    assert 'class="table posenc-table posenc-wide"' in html and "data-label" not in html
    plain = BookTable(["a", "b"], [["x", "1"]])._repr_html_()
    assert "posenc-wide" not in plain
    with pytest.raises(TypeError, match="wide"):
        BookTable(["a"], [["x"]], wide="yes")
    css = (Path(__file__).resolve().parents[2] / "docs/_static/posenc.css").read_text()
    assert "table.posenc-wide" in css and "position: sticky" in css


# -- the printouts follow the page's language (issue 34) -------------------------------------


def test_format_description_speaks_the_page_language():
    """The zh page prints format_description under a translated table: its lines are
    Chinese (the values -- rope types, layouts, numbers -- are the config's own); the
    language follows posenc.figures.set_language unless given."""
    import re

    import posenc.figures as pf
    from posenc.atlas import format_description

    for d in atlas():
        en = format_description(d, "en").splitlines()
        zh = format_description(d, "zh").splitlines()
        assert len(en) == len(zh) and en[0] == zh[0] == d.name
        for line in zh[1:]:
            name = line.strip().split()[0]
            assert re.search(r"[\u4e00-\u9fff]", line.strip().split("  ")[0]), line
            assert not re.search(r"\b(features|tokens|of|within|trained|configured|"
                                 r"layers?|global|sliding|chunked|note|factor)\b", line), line
            assert name
    try:
        pf.set_language("zh")
        assert format_description(atlas()[0]) == format_description(atlas()[0], "zh")
    finally:
        pf.set_language("en")
    assert format_description(atlas()[0]) == format_description(atlas()[0], "en")
    with pytest.raises(ValueError, match="language"):
        format_description(atlas()[0], "fr")
    with pytest.raises(TypeError, match="ModelDescription"):
        format_description({"rope_theta": 1.0})


# -- hybrids and sinks (section models-hybrids) ----------------------------------------------


def _calls_rotary(cls):
    import inspect

    return "apply_rotary_pos_emb(" in inspect.getsource(cls.forward)


def test_which_attention_layers_rotate_in_transformers():
    import inspect

    from transformers import Cohere2Config, Qwen3NextConfig
    from transformers.models.cohere2.modeling_cohere2 import Cohere2Attention
    from transformers.models.falcon_h1.modeling_falcon_h1 import FalconH1Attention
    from transformers.models.jamba.modeling_jamba import JambaAttention
    from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearAttention

    assert not _calls_rotary(KimiLinearAttention) and not _calls_rotary(JambaAttention)
    assert _calls_rotary(FalconH1Attention)
    src = inspect.getsource(Cohere2Attention.forward)
    guard = src.index("if self.sliding_window is not None:")
    assert src.index("apply_rotary_pos_emb(") > guard and src.count("apply_rotary_pos_emb(") == 1
    types = Cohere2Config(num_hidden_layers=8).layer_types
    assert types == (["sliding_attention"] * 3 + ["full_attention"]) * 2
    nxt = Qwen3NextConfig(num_hidden_layers=8, head_dim=256)
    assert nxt.layer_types == (["linear_attention"] * 3 + ["full_attention"]) * 2
    assert int(nxt.head_dim * nxt.rope_parameters["partial_rotary_factor"]) == 64


@pytest.mark.parametrize("n_keys", [16, 1024])
def test_sink_share_equals_gpt_oss_attention(n_keys):
    from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

    class Stub(torch.nn.Module):
        num_key_value_groups = 1

        def __init__(self):
            super().__init__()
            self.sinks = torch.nn.Parameter(torch.tensor([3.0], dtype=torch.float64))

    q = torch.zeros(1, 1, 1, 8, dtype=torch.float64)        # equal logits for every key
    k = torch.randn(1, 1, n_keys, 8, dtype=torch.float64)
    v = torch.randn(1, 1, n_keys, 8, dtype=torch.float64)
    _, weights = eager_attention_forward(Stub(), q, k, v, None, scaling=1.0)
    share = 1 - float(weights.sum())
    assert share == pytest.approx(np.exp(3.0) / (n_keys + np.exp(3.0)), rel=1e-9)


def test_deepseek_v32_indexer_in_the_wrong_layout_loses_its_top_keys():
    rng = np.random.default_rng(0)
    q_pe = rng.standard_normal((1, 64))
    k_pe = rng.standard_normal((4096, 64))
    pos, qpos = np.arange(4096), np.array([4095])

    def scores(layout):
        q = posenc.apply_rope(q_pe.copy(), qpos, layout=layout)
        k = posenc.apply_rope(k_pe.copy(), pos, layout=layout)
        return (k @ q.T)[:, 0]

    trained, buggy = scores("half"), scores("interleaved")
    kept = len(set(np.argsort(trained)[-256:]) & set(np.argsort(buggy)[-256:])) / 256
    assert kept < 0.15 and abs(np.corrcoef(trained, buggy)[0, 1]) < 0.2
    assert trained[-1] == pytest.approx(buggy[-1])  # offset 0: no rotation left
    # the interleaved rotation of the half-layout features is a different rotation:
    # permuting the features into the other layout makes the two agree again
    perm = np.concatenate([np.arange(0, 64, 2), np.arange(1, 64, 2)])  # interleaved -> half
    k_half = posenc.apply_rope(k_pe[:, perm].copy(), pos, layout="half")
    k_inter = posenc.apply_rope(k_pe.copy(), pos, layout="interleaved")
    np.testing.assert_allclose(k_half, k_inter[:, perm], atol=1e-12)


@settings(deadline=None)
@given(st.integers(8192, 10**8))
def test_qwen_logn_is_scalable_softmax_with_s_one_over_ln_l(n):
    L = 8192
    assert logn_attention_scale(np.array([n - 1]), L)[0] == pytest.approx(np.log(n) / np.log(L))


def test_streaming_llm_cache_positions_bound_the_offset():
    # StreamingLLM (4 sinks + 1020 recent): positions within the cache, not in the text
    n_sink, n_recent = 4, 1020
    for n_seen in (10, 1024, 1025, 1_000_000):
        kept = np.r_[0:min(n_sink, n_seen), max(n_sink, n_seen - n_recent):n_seen]
        assert kept.size == min(n_seen, n_sink + n_recent)
        assert np.all(np.diff(kept) > 0) and kept[-1] == n_seen - 1
        assert kept.size - 1 <= 1023 and (n_seen < 1025 or kept[-1] - kept[0] == n_seen - 1)


# -- STRING (models-longer) ----------------------------------------------------------------


def test_string_drops_the_rarest_offsets_of_llama31s_training_length():
    """The chapter's STRING paragraph: with the README's S = int(0.33 L) and W = 128 at
    L = 131,072, the largest offset is below L, the offsets above it are about a tenth
    of a full-length sequence's pairs (close to ((S - W)/L)^2), the rarest offset kept
    occurs L - far times and the largest dropped one once."""
    from posenc.analysis.remap import offset_counts, string_offsets

    L = 131_072
    S = int(0.33 * L)
    far = int(string_offsets(L - 1, np.arange(L), shift=S, window=128).max())
    counts = offset_counts(L)
    dropped = counts[far + 1:].sum() / counts.sum()
    assert far == L - 1 - S + 128 < L
    assert 0.10 < dropped < 0.11 and abs(dropped - ((S - 128) / L) ** 2) < 1e-4
    assert counts[far] == L - far == 43_126 and counts[-1] == 1


# -- published files beside the atlas rows -------------------------------------------------

PUBLISHED = Path(posenc.__file__).parent / "atlas" / "data" / "published"


def test_deepseek_r1_file_names_the_split_and_matches_the_atlas_row():
    """'DeepSeek-R1 is built as a DeepSeek-V3 model, and its config.json names the two
    parts qk_nope_head_dim and qk_rope_head_dim and keeps YaRN's settings in
    rope_scaling; read from that file, the rotated slice, its frequencies and the scaling
    factor match the atlas row.'"""
    from posenc.atlas import load_config

    raw = load_config(PUBLISHED / "deepseek-r1.json")
    assert raw["architectures"] == ["DeepseekV3ForCausalLM"]
    assert {"qk_nope_head_dim", "qk_rope_head_dim"} <= set(raw)
    assert raw["rope_scaling"]["type"] == "yarn"
    _, ds = model("deepseek-v3")
    r1 = describe_config(raw)
    got, want = r1.layers[0], ds.layers[0]
    assert (got.rotated_pairs, got.head_dim, r1.factor) == (
        want.rotated_pairs, want.head_dim, ds.factor)
    np.testing.assert_allclose(got.inv_freq, want.inv_freq, rtol=1e-12, atol=0)


def test_medgemma_file_writes_gemma3_bases_scaling_and_window():
    """'MedGemma 27B is a Gemma 3 27B model, and its config.json writes the two bases as
    rope_local_base_freq and rope_theta, the linear scaling of the global layers as
    rope_scaling and the window as sliding_window.'"""
    from posenc.atlas import load_config

    raw = load_config(PUBLISHED / "medgemma-27b-it.json")
    text = raw["text_config"]
    assert {"rope_local_base_freq", "rope_theta", "rope_scaling", "sliding_window"} <= set(text)
    assert text["rope_scaling"]["rope_type"] == "linear"
    _, g3 = model("gemma-3-27b")
    med = describe_config(raw)
    assert [(la.layer_type, la.layers, la.rope_theta, la.rope_type, la.window)
            for la in med.layers] == [
        (la.layer_type, la.layers, la.rope_theta, la.rope_type, la.window) for la in g3.layers]
    assert med.factor == g3.factor
