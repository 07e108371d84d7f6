"""The atlas of real configurations (posenc/atlas/data/*.json), describe_config, and the CLI.

Each atlas file records, for every position-related value in its ``config``, a *fact*:
the source (repository, 40-hex revision, path, URL) and the verbatim line(s) it was read
from.  These tests check each value against its recorded quote (the number is in the
quote, or is the stated product/quotient/pattern of numbers in it), that every value is
covered by a fact, and that the description posenc computes from each config equals
transformers' for the model classes transformers has.  The quotes themselves are looked
up in each source file at its recorded revision by ``tools/check_atlas_sources.py``, run
by hand with git mirrors of the sources (CI has no network); its logic is tested here.
"""

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from posenc import rope_frequencies
from posenc.__main__ import main
from posenc.atlas import (ATLAS_DIR, atlas, atlas_entry, atlas_names, describe_config,
                          format_description)

NAMES = atlas_names()


def test_at_least_fifteen_models():
    assert len(NAMES) >= 15
    assert len({atlas_entry(n)["name"] for n in NAMES}) == len(NAMES)


def leaves(config, prefix=""):
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from leaves(value, path + ".")
        else:
            yield path, value


def numbers(quotes):
    out = []
    for q in quotes:
        for tok in re.findall(r"\d[\d_]*\.?\d*(?:e[+-]?\d+)?", q):
            out.append(float(tok.replace("_", "").rstrip(".")))
    return out


def tile(local, n):
    pattern = ["sliding_attention"] * local + ["full_attention"]
    out = pattern * (n // len(pattern))
    return out + pattern[: n % len(pattern)]


@pytest.mark.parametrize("slug", NAMES)
def test_sources_are_pinned(slug):
    entry = atlas_entry(slug)
    assert entry["sources"]
    for s in entry["sources"]:
        assert re.fullmatch(r"[0-9a-f]{40}", s["revision"]), s
        assert s["url"] == f"https://github.com/{s['repository']}/blob/{s['revision']}/{s['path']}"


@pytest.mark.parametrize("slug", NAMES)
def test_every_value_has_a_fact_and_matches_its_quote(slug):
    entry = atlas_entry(slug)
    facts = {f["key"]: f for f in entry["facts"]}
    assert len(facts) == len(entry["facts"]), "one fact per key"
    config_leaves = dict(leaves(entry["config"]))
    assert set(facts) == set(config_leaves), set(facts) ^ set(config_leaves)
    for key, fact in facts.items():
        value = config_leaves[key]
        assert fact["value"] == value, key
        assert 0 <= fact["source"] < len(entry["sources"])
        quotes = [fact["quote"]] if isinstance(fact["quote"], str) else fact["quote"]
        assert all(q.strip() for q in quotes)
        nums, text = numbers(quotes), " ".join(quotes).lower()
        rule = fact.get("rule")
        if rule == "quotient":
            a, b = fact["inputs"]
            assert a in nums and b in nums and a / b == value, key
        elif rule == "product":
            a, b = fact["inputs"]
            assert a in nums and b in nums and a * b == value, key
        elif rule == "nope_interval":
            n, k = fact["inputs"]
            assert n in nums and k in nums
            assert value == [int((i + 1) % k != 0) for i in range(n)], key
        elif rule == "alternate":
            (n,) = fact["inputs"]
            assert n in nums
            assert value == ["sliding_attention", "full_attention"] * (n // 2), key
        elif rule == "pattern":
            local, glob, n = fact["inputs"]
            assert glob == 1 and n in nums and value == tile(local, n), key
        elif rule == "same_as":
            assert value == config_leaves[fact["other"]]
        elif rule == "absent":
            assert fact["absent"] and fact["absent"].lower() not in text
        elif isinstance(value, bool):
            if key == "rope_interleave":
                assert ("view_as_complex" in text) if value else ("chunk" in text or "false" in text)
            else:
                assert key.split(".")[-1] in text
        elif isinstance(value, (int, float)):
            assert float(value) in nums, (key, value, quotes)
        elif value == "default":
            pass  # the source names no scaling: checked by the absence of scaling keys below
        elif value == "linear":
            assert "scale_factor" in text
        elif value == "proportional":
            assert "rope_proportion" in text
        else:
            assert value.lower() in text, (key, value)
    for path, value in config_leaves.items():
        if path.endswith("rope_type") and value == "default":
            parent = path.rsplit(".", 1)[0]
            assert not any(p.startswith(parent + ".factor") for p in config_leaves)


def test_source_checker_finds_a_quote_and_misses_a_changed_one(tmp_path, monkeypatch):
    """tools/check_atlas_sources.py (run by hand with mirrors of the sources; CI has no
    network) reads each quote at its recorded revision: shown on a one-file repository."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    import check_atlas_sources as checker

    repo = tmp_path / "acme+model" / "repo"
    repo.mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "config.py").write_text("rope_theta = 500000.0\n", encoding="utf-8")
    subprocess.run([*git, "add", "config.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    rev = subprocess.check_output([*git, "rev-parse", "HEAD"], text=True).strip()
    entry = {"facts": [{"key": "rope_theta", "source": 0, "quote": "rope_theta = 500000.0"}],
             "sources": [{"repository": "acme/model", "revision": rev, "path": "config.py"}]}
    monkeypatch.setattr(checker, "atlas_entry", lambda slug: entry)
    assert checker.missing_quotes(tmp_path, ["x"]) == []
    entry["facts"][0]["quote"] = "rope_theta = 10000.0"
    assert checker.missing_quotes(tmp_path, ["x"]) == ["x: rope_theta: 'rope_theta = 10000.0'"]
    entry["sources"][0]["revision"] = "0" * 40
    assert "cannot read config.py" in checker.missing_quotes(tmp_path, ["x"])[0]


# -- descriptions against rope_frequencies and transformers ------------------------------


@pytest.mark.parametrize("slug", NAMES)
def test_descriptions_use_rope_frequencies(slug):
    entry = atlas_entry(slug)
    d = describe_config(entry["config"], name=entry["name"])
    config = entry["config"]
    params = config["rope_parameters"]
    nested = all(isinstance(v, dict) for v in params.values())
    for layer in d.layers:
        p = params[layer.layer_type] if nested else params
        dim = config.get("qk_rope_head_dim") or (
            layer.head_dim if p.get("rope_type") == "proportional"
            else int(layer.head_dim * p.get("partial_rotary_factor", 1.0)))
        inv, att = rope_frequencies(dim, p, max_position_embeddings=config.get("max_position_embeddings"),
                                    seq_len=config.get("max_position_embeddings"))
        np.testing.assert_array_equal(layer.inv_freq, inv)
        assert layer.attention_factor == att
    total = sum(layer.layers or 0 for layer in d.layers) + d.nope_layers
    if d.num_layers is not None:
        assert total == d.num_layers
    row = d.row()
    g = d.reach
    if row["pairs_turning"] is not None:
        wavelengths = 2 * np.pi / g.plain_inv_freq[g.plain_inv_freq > 0]
        assert row["pairs_turning"] == int(np.sum(wavelengths <= row["span"]))
        assert row["largest_offset"] == row["span"] - 1
        assert row["longest_wavelength_over_span"] == pytest.approx(wavelengths.max() / row["span"])


# -- the span each layer type sees -------------------------------------------------------


def offsets_seen(mask):
    """Query-key offsets i - j over the True entries of a (query, key) mask."""
    i, j = np.nonzero(mask)
    return i - j


def test_span_is_the_window_the_chunk_or_the_training_length():
    import torch
    from transformers.masking_utils import chunked_overlay, sliding_window_overlay

    n = 40
    idx = np.arange(n)
    for window in (1, 4, 7):
        # transformers' sliding-window rule and Llama 4's chunk rule, on every (query, key)
        slide = sliding_window_overlay(window)
        chunk = chunked_overlay(window, torch.tensor([0]))
        s = np.array([[bool(slide(0, 0, q, k)) and k <= q for k in idx] for q in idx])
        c = np.array([[bool(chunk(0, 0, q, k)) and k <= q for k in idx] for q in idx])
        llama4 = (idx[None, :] // window == idx[:, None] // window) & (idx[None, :] <= idx[:, None])
        np.testing.assert_array_equal(c, llama4)
        for mask in (s, c):
            assert offsets_seen(mask).max() == window - 1
        d = describe_config({"head_dim": 8, "rope_theta": 100.0, "sliding_window": window,
                             "max_position_embeddings": n})
        assert d.span(d.layers[0]) == window and d.row()["largest_offset"] == window - 1
        assert d.span_kind(d.layers[0]) == "window"


def test_a_window_longer_than_the_training_length_does_not_bound_the_span():
    zoo = Path(__file__).resolve().parents[1] / "zoo"
    phi = describe_config(json.loads((zoo / "phi-3.5-mini" / "config.json").read_text()))
    row = phi.row()
    assert phi.layers[0].window == 262_144 and phi.training_length == 4096
    assert (row["span"], row["largest_offset"], row["span_kind"]) == (4096, 4095, "training length")
    assert row["pairs_turning"] == phi.layers[0].pairs_turning_within(4096)
    assert "bounded by the training length" in format_description(phi, "en")
    d = describe_config({"head_dim": 8, "rope_theta": 1e4, "sliding_window": 100,
                         "max_position_embeddings": 64})
    assert d.span(d.layers[0]) == 64 and d.span_kind(d.layers[0]) == "training length"


def test_longest_wavelength_is_labelled_and_the_scaled_one_printed_beside_it(capsys):
    zoo = Path(__file__).resolve().parents[1] / "zoo"
    assert main(["inspect", str(zoo / "llama-3.1-8b" / "config.json"), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    pretrained = 2 * np.pi * 500_000.0 ** (126 / 128)
    assert row["longest_wavelength_pretrained"] == pytest.approx(pretrained, rel=1e-12)
    assert row["longest_wavelength_scaled"] == pytest.approx(8 * pretrained, rel=1e-12)
    d = describe_config(json.loads((zoo / "llama-3.1-8b" / "config.json").read_text()))
    scaled = f"{8 * pretrained:,.0f}"
    assert (f"longest wavelength {pretrained:,.0f} tokens as pretrained, {scaled} with the "
            "llama3 x8 rule") in format_description(d, "en")
    assert f"预训练时 {pretrained:,.0f} 个词元，按 llama3 x8 规则缩放后 {scaled} 个" in (
        format_description(d, "zh"))
    plain = describe_config({"head_dim": 8, "rope_theta": 100.0})
    lines = format_description(plain, "en").splitlines()
    assert "  longest wavelength 199 tokens as pretrained" in lines


def test_mistral_sees_4095_and_llama4_8191():
    mistral = describe_config(atlas_entry("mistral-7b")["config"])
    row = mistral.row()
    assert mistral.pattern() == "sliding(4096)"
    assert (row["span"], row["largest_offset"], row["span_kind"]) == (4096, 4095, "window")
    for slug in ("llama-4-maverick", "llama-4-scout"):
        d = describe_config(atlas_entry(slug)["config"])
        row = d.row()
        assert (row["largest_offset"], row["span_kind"]) == (8191, "chunk")
        # 2 pi 500000^(63/64) / 8192, not / 1,048,576 (the configured length)
        ratio = 2 * np.pi * 500_000.0 ** (126 / 128) / 8192
        assert row["longest_wavelength_over_span"] == pytest.approx(ratio)
        assert 312 < ratio < 313


def test_each_layer_type_has_its_own_span():
    d = describe_config(atlas_entry("gpt-oss")["config"])
    spans = {layer.layer_type: d.span(layer) for layer in d.layers}
    assert spans == {"sliding_attention": 128, "full_attention": 4096}
    assert d.reach.layer_type == "full_attention"
    g3 = describe_config(atlas_entry("gemma-3-27b")["config"])
    local, glob = g3.layers
    assert g3.span(local) == 1024 and g3.span(glob) is None  # no length in the config
    assert g3.wavelength_over_span(glob) is None and g3.row()["largest_offset"] is None
    assert g3.wavelength_over_span(local) == pytest.approx(local.longest_wavelength(False) / 1024)
    with pytest.raises(TypeError, match="layer must be a LayerRope"):
        d.span("full_attention")


def test_deepseek_v3_equals_transformers_rotary_module():
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3RotaryEmbedding

    entry = atlas_entry("deepseek-v3")
    c = entry["config"]
    hf = DeepseekV3Config(qk_rope_head_dim=c["qk_rope_head_dim"], qk_nope_head_dim=c["qk_nope_head_dim"],
                          max_position_embeddings=c["max_position_embeddings"],
                          rope_parameters=dict(c["rope_parameters"]), rope_interleave=True,
                          hidden_size=256, num_attention_heads=2, num_hidden_layers=1, vocab_size=32)
    module = DeepseekV3RotaryEmbedding(hf)
    d = describe_config(c)
    np.testing.assert_allclose(d.layers[0].inv_freq, module.inv_freq.double().numpy(), rtol=3e-6)
    assert d.layers[0].attention_factor == pytest.approx(module.attention_scaling, rel=1e-12)


def test_gpt_oss_equals_transformers_rotary_module():
    from transformers import GptOssConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssRotaryEmbedding

    c = atlas_entry("gpt-oss")["config"]
    hf = GptOssConfig(head_dim=c["head_dim"], max_position_embeddings=c["max_position_embeddings"],
                      rope_parameters=dict(c["rope_parameters"]), hidden_size=128, num_attention_heads=2,
                      num_key_value_heads=1, num_hidden_layers=2, vocab_size=32, num_local_experts=2)
    module = GptOssRotaryEmbedding(hf)
    d = describe_config(c)
    np.testing.assert_allclose(d.global_rope.inv_freq, module.inv_freq.double().numpy(), rtol=3e-6)
    assert d.global_rope.attention_factor == pytest.approx(module.attention_scaling, rel=1e-12)


def test_gemma4_global_layers_turn_only_their_fastest_quarter():
    d = describe_config(atlas_entry("gemma-4-31b")["config"])
    g = d.global_rope
    assert g.layer_type == "full_attention" and g.head_dim == 512
    assert g.rotated_pairs == 64 and np.all(g.inv_freq[64:] == 0)
    assert g.longest_wavelength() < 200  # 2 pi * 1e6 ** (126 / 512)


def test_legacy_rope_scaling_and_text_config():
    """Older configs: rope_scaling + top-level rope_theta/partial_rotary_factor; VLM text_config."""
    legacy = {"text_config": {"hidden_size": 256, "num_attention_heads": 2, "rope_theta": 1e4,
                              "partial_rotary_factor": 0.5, "max_position_embeddings": 8192,
                              "rope_scaling": {"type": "yarn", "factor": 4.0,
                                               "original_max_position_embeddings": 2048,
                                               "mrope_section": [16, 24, 24]}}}
    d = describe_config(legacy)
    inv, att = rope_frequencies(64, {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4,
                                     "original_max_position_embeddings": 2048},
                                max_position_embeddings=8192)
    np.testing.assert_array_equal(d.layers[0].inv_freq, inv)
    assert d.row()["scaling"] == "yarn x4" and d.row()["rotated"] == "64/128"


BAD = [
    ([1, 2], TypeError, "config must be a mapping"),
    ({"position_embedding_type": "alibi", "hidden_size": 64}, ValueError, "RoPE models only"),
    ({"alibi": True, "hidden_size": 64}, ValueError, "ALiBi"),
    ({"hidden_size": 64, "num_attention_heads": 2}, ValueError, "no RoPE keys"),
    ({"rope_theta": 1e4}, ValueError, "needs head_dim"),
    ({"rope_theta": 1e4, "hidden_size": 100, "num_attention_heads": 3}, ValueError, "divisible"),
    ({"rope_theta": 1e4, "head_dim": 64, "num_hidden_layers": 3, "layer_types": ["full_attention"]},
     ValueError, "layer_types"),
    ({"head_dim": 64, "layer_types": ["full_attention", "chunked_attention"],
      "rope_parameters": {"full_attention": {"rope_type": "default"}}}, ValueError, "no entry"),
    ({"rope_theta": 1e4, "head_dim": 64, "no_rope_layers": [1, 2]}, ValueError, "0/1"),
    ({"rope_theta": 1e4, "head_dim": 64, "rope_interleave": "yes"}, TypeError, "rope_interleave"),
    ({"rope_theta": 1e4, "head_dim": 64, "partial_rotary_factor": 0.3}, ValueError, "must be even"),
    ({"rope_scaling": {"rope_type": "ntk-by-parts"}, "head_dim": 64}, ValueError, "rope_type"),
    ({"rope_theta": 1e4, "head_dim": "64"}, TypeError, "config['head_dim']"),
    ({"rope_scaling": "yarn", "head_dim": 64}, TypeError, "rope_scaling"),
    ({"head_dim": 64, "layer_types": ["full_attention"],
      "rope_parameters": {"full_attention": None, "sliding_attention": {"rope_type": "default"}}},
     ValueError, "no layer that uses RoPE"),
    ({"head_dim": 128, "rope_scaling": {"type": "mrope", "mrope_section": "16,24,24"}},
     TypeError, "config['rope_scaling']['mrope_section'] must be a non-empty list"),
    ({"head_dim": 128, "rope_scaling": {"type": "mrope", "mrope_section": [16.0, 24, 24]}},
     TypeError, "['mrope_section'] entries must be non-negative int"),
    ({"head_dim": 128, "rope_parameters": {"rope_type": "default", "mrope_section": [1] * 9}},
     ValueError, "config['rope_parameters']['mrope_section'] has 9 entries"),
    ({"head_dim": 128, "rope_parameters": {"rope_type": "default", "mrope_section": [24, 20, 20],
                                           "mrope_interleaved": "yes"}},
     TypeError, "config['rope_parameters']['mrope_interleaved'] must be true/false"),
]


def test_mrope_sections_are_kept_and_named():
    """M-RoPE's split of the pairs over time, height and width is part of the description
    (a note in both languages), not dropped with the frequencies."""
    from posenc.atlas import format_description

    d = describe_config({"head_dim": 128, "rope_parameters": {
        "rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20],
        "mrope_interleaved": True}})
    assert (d.mrope_section, d.mrope_interleaved) == ((24, 20, 20), True)
    assert "M-RoPE: pairs split [24, 20, 20] across time, height, width (interleaved)" in (
        format_description(d, "en"))
    assert "维度对按 [24, 20, 20] 分给时间、高、宽三个轴（交错排列）" in format_description(d, "zh")
    blocks = describe_config({"head_dim": 128, "rope_theta": 1e6,
                              "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}})
    assert (blocks.mrope_section, blocks.mrope_interleaved) == ((16, 24, 24), None)
    assert "(in blocks)" in format_description(blocks, "en")
    assert describe_config({"head_dim": 128, "rope_theta": 1e6}).mrope_section is None


@pytest.mark.parametrize("config, error, fragment", BAD)
def test_bad_configs(config, error, fragment):
    with pytest.raises(error) as info:
        describe_config(config)
    assert fragment in str(info.value)


# -- the command line ---------------------------------------------------------------------


def test_cli_prints_a_config(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"_name_or_path": "tiny", "head_dim": 64, "rope_theta": 1e4,
                                "max_position_embeddings": 2048}))
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    pairs = describe_config(json.loads(path.read_text())).row()["pairs_turning"]
    assert out.startswith("tiny") and f"{pairs} of the 32 rotating pairs complete a turn within 2,048" in out


def test_cli_json_and_plot(tmp_path, capsys):
    png = tmp_path / "spectrum.png"
    assert main(["inspect", str(ATLAS_DIR / "gemma-4-e2b.json"), "--json", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    row = json.loads(out[: out.rindex("}") + 1])
    assert row["model"] == "Gemma 4 E2B" and row["rope_type"] == "default / proportional"
    assert png.stat().st_size > 1000


@pytest.mark.parametrize("content, fragment", [
    (None, "does not exist"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "must hold a JSON object"),
    ('{"position_embedding_type": "absolute"}', "RoPE models only"),
])
def test_cli_bad_input_exits_2_with_a_message(tmp_path, capsys, content, fragment):
    path = tmp_path / "config.json"
    if content is not None:
        path.write_text(content)
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("posenc inspect: ") and fragment in err


def test_cli_runs_as_a_module(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"head_dim": 8, "rope_theta": 100.0}')
    done = subprocess.run([os.sys.executable, "-m", "posenc", "inspect", str(path)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "rope type" in done.stdout


def test_cli_help_is_plain_text(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0 and "python -m posenc inspect config.json: what" in out
    assert "``" not in out and ":func:" not in out


def test_cli_ends_quietly_when_the_reader_stops_early(tmp_path):
    """``python -m posenc inspect X | head -2``: no BrokenPipeError traceback."""
    read, write = os.pipe()
    os.close(read)  # a reader that has gone: every write fails with EPIPE
    try:
        done = subprocess.run([os.sys.executable, "-m", "posenc", "inspect",
                               str(ATLAS_DIR / "llama-3.1-8b.json")],
                              stdout=write, stderr=subprocess.PIPE, text=True, check=False)
    finally:
        os.close(write)
    assert done.returncode == 1 and done.stderr == ""


def test_atlas_returns_every_entry():
    assert [d.name for d in atlas()] == [atlas_entry(n)["name"] for n in NAMES]
