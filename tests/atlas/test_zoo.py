"""The zoo: published config.json files (tests/zoo/*/config.json, sources in manifest.json).

For each file, ``describe_config`` must read what transformers 5.23 itself reads from the
same file (``AutoConfig.from_pretrained`` on the directory, then transformers' own
frequency code per layer type: tests/zoo/reference.py), or the command line must refuse
the file with exit status 2 and one line that names the key; never a different answer
with exit status 0.
"""

import json
import re
from pathlib import Path

import pytest

from posenc.__main__ import main
from posenc.atlas import describe_config, load_config

ZOO = Path(__file__).resolve().parents[1] / "zoo"
MANIFEST = json.loads((ZOO / "manifest.json").read_text(encoding="utf-8"))
SLUGS = [e["slug"] for e in MANIFEST]

#: Files posenc refuses, and the key its one-line message must name.
REFUSED = {
    "gpt2": "model_type",  # learned absolute positions: no RoPE to describe
    "bloom": "model_type",  # ALiBi: a bias on the scores, no rotation to describe
    "falcon-7b-instruct-first-upload": "model_type",  # RefinedWebModel: remote code only
    "snowflake-arctic-embed-m": "model_type",
    "phi-3.5-vision": "model_type",
    "ministral-3-3b-2512": "model_type",  # outer model_type is the text-only class: transformers ignores text_config  # remote code (phi3_v): transformers 5.23 has no class for it
}


def test_zoo_size_and_manifest():
    assert len(SLUGS) >= 40 and len(set(SLUGS)) == len(SLUGS)
    dirs = {p.parent.name for p in ZOO.glob("*/config.json")}
    assert dirs == set(SLUGS)
    for e in MANIFEST:
        assert re.fullmatch(r"[0-9a-f]{40}", e["commit"]), e["slug"]
        assert e["url"] == f"https://github.com/{e['repository']}/blob/{e['commit']}/{e['path']}"
        assert e["model"] and e["model_licence"] and e["form"] in ("preset", "quoted", "file")
    styles = {"rope_scaling" if "rope_scaling" in json.dumps(load_config(ZOO / s / "config.json"))
              else "rope_parameters" for s in SLUGS}
    assert styles == {"rope_scaling", "rope_parameters"}


@pytest.mark.parametrize("slug", SLUGS)
def test_zoo_file_reads_as_transformers_does(slug, capsys):
    from zoo.reference import assert_same_reading, transformers_reading

    path = ZOO / slug / "config.json"
    status = main(["inspect", str(path)])
    out, err = capsys.readouterr()
    if slug in REFUSED:
        assert status == 2 and out == "", (status, out)
        assert err.count("\n") == 1 and f"config[{REFUSED[slug]!r}]" in err, err
        return
    assert status == 0, err
    reference = transformers_reading(path.parent)
    assert_same_reading(describe_config(load_config(path)), reference)


# -- every family's rules, from its class defaults and from variations -------------------

from posenc.atlas._families import FAMILIES  # noqa: E402

#: Position keys of families without a published file in the zoo (their values as the
#: families' model cards and configs use them), and variations of the rules.
VARIANTS = [
    {"model_type": "qwen2", "use_sliding_window": True, "sliding_window": 4096,
     "max_window_layers": 20, "num_hidden_layers": 28},
    {"model_type": "gemma3", "text_config": {
        "model_type": "gemma3_text", "num_hidden_layers": 34, "sliding_window": 1024,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0}}},
    {"model_type": "olmo3", "max_position_embeddings": 65536, "rope_theta": 500000,
     "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192}},
    {"model_type": "smollm3", "num_hidden_layers": 36, "rope_theta": 5000000.0,
     "no_rope_layer_interval": 4},
    {"model_type": "smollm3", "num_hidden_layers": 8, "no_rope_layers": [1, 1, 1, 0, 1, 0, 1, 1]},
    {"model_type": "cohere2", "num_hidden_layers": 32, "rope_theta": 50000.0,
     "sliding_window": 4096, "sliding_window_pattern": 4},
    {"model_type": "deepseek_v3", "max_position_embeddings": 163840, "rope_scaling": {
        "type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
        "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}},
    {"model_type": "gpt_oss", "rope_theta": 150000, "rope_scaling": {
        "rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
        "truncate": False, "original_max_position_embeddings": 4096}},
    {"model_type": "glm4", "partial_rotary_factor": 0.5, "head_dim": 128},
    {"model_type": "gpt_neox", "rotary_pct": 0.25, "rotary_emb_base": 10000},
    {"model_type": "qwen2_vl", "rope_theta": 1000000.0,
     "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}},
    {"model_type": "qwen3_vl", "text_config": {
        "model_type": "qwen3_vl_text", "rope_theta": 5000000,
        "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20],
                         "mrope_interleaved": True}}},
    {"model_type": "llama4", "text_config": {"model_type": "llama4_text",
                                             "no_rope_layers": [1, 1, 0, 0] * 12}},
    {"model_type": "phi3", "max_position_embeddings": 131072,
     "original_max_position_embeddings": 4096, "rope_scaling": {
         "type": "su", "short_factor": [1.0] * 48, "long_factor": [2.0] * 48}},
    {"model_type": "mistral", "sliding_window": 4096},
    {"model_type": "phi3", "max_position_embeddings": 131072,
     "original_max_position_embeddings": 4096, "rope_scaling": {
         "type": "longrope", "short_factor": [1.0] * 48, "long_factor": [2.0] * 48}},
]


@pytest.mark.parametrize("config", VARIANTS,
                         ids=[f"variant{i}-{v['model_type']}" for i, v in enumerate(VARIANTS)])
def test_family_rules_read_as_transformers(tmp_path, config):
    """Variations of the families' keys (a file with only model_type, every key at its
    class default, is read for every family in tests/atlas/test_families.py)."""
    from zoo.reference import assert_same_reading, transformers_reading

    (tmp_path / "config.json").write_text(json.dumps(config))
    try:
        reference = transformers_reading(tmp_path)
    except (KeyError, ValueError, TypeError) as exc:  # transformers refuses the file
        with pytest.raises((ValueError, TypeError)):
            describe_config(config)
        assert str(exc)
        return
    assert_same_reading(describe_config(config), reference)


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_family_defaults_are_transformers_class_defaults(model_type):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    cls = CONFIG_MAPPING[model_type]
    fields = cls.__dataclass_fields__
    for key, value in FAMILIES[model_type].items():
        if key == "rope_theta":
            # convert_rope_params_to_dict: the class's rope_theta field, else default_theta
            theta = fields["rope_theta"].default if "rope_theta" in fields else cls.default_theta
            assert value == (theta["global"] if isinstance(theta, dict) else theta), key
        elif key in fields:
            assert fields[key].default == value, (model_type, key)


def test_falcon_with_alibi_is_refused(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "falcon", "alibi": True}))
    assert main(["inspect", str(path)]) == 2
    assert "config['alibi']" in capsys.readouterr().err


# -- the atlas against the published files ------------------------------------------------

#: Atlas entries (built from reference code with quoted values) and the zoo file published
#: for the same model; True where the zoo file is another size of the same design (the
#: atlas's gpt-oss is the reference ModelConfig's 36 layers, the zoo's gpt-oss-20b has 24),
#: so that only the per-layer-type rules must agree, not the layer counts.
ATLAS_ZOO = {
    "deepseek-v3": ("deepseek-r1", False),  # DeepSeek-R1 is the DeepSeek-V3 design
    "gemma-2-2b": ("gemma-2-2b", False),
    "gemma-3-27b": ("medgemma-27b-it", False),  # MedGemma 27B is the Gemma 3 27B design
    "gpt-oss": ("gpt-oss-20b", True),
    "llama-3.1-8b": ("llama-3.1-8b", False),
    "llama-3.2-1b": ("llama-3.2-1b", False),
    "mistral-7b": ("mistral-7b-v0.1", False),
    "olmo-2-7b": ("olmo-2-7b", False),
    "smollm3-3b": ("smollm3-3b", False),
}


#: Atlas entries whose reference code states no length (Gemma's gm.nn configs carry none):
#: their lengths are not compared, every per-layer rule still is.
ATLAS_WITHOUT_LENGTHS = {"gemma-3-27b"}


@pytest.mark.parametrize("slug", sorted(ATLAS_ZOO))
def test_atlas_row_agrees_with_the_published_file(slug):
    """An atlas entry and the published config.json of its model give the same positions:
    per layer type the rule, base, frequencies, attention factor and window; the NoPE
    layers and the lengths; the layer counts where the atlas states them."""
    import numpy as np

    from posenc.atlas import atlas_entry

    zoo_slug, other_size = ATLAS_ZOO[slug]
    entry = atlas_entry(slug)
    ours = describe_config(entry["config"], name=entry["name"])
    published = describe_config(load_config(ZOO / zoo_slug / "config.json"))
    def kind(t):  # a config without layer_types has one type, "all": global attention
        return "full_attention" if t == "all" else t

    got = {kind(layer.layer_type): layer for layer in ours.layers}
    want = {kind(layer.layer_type): layer for layer in published.layers}
    assert set(got) == set(want), (sorted(got), sorted(want))
    for t, layer in got.items():
        other = want[t]
        assert (layer.rope_type, layer.rope_theta, layer.head_dim, layer.window,
                layer.window_kind) == (other.rope_type, other.rope_theta, other.head_dim,
                                       other.window, other.window_kind), t
        np.testing.assert_allclose(layer.inv_freq, other.inv_freq, rtol=1e-12, err_msg=t)
        assert layer.attention_factor == pytest.approx(other.attention_factor, rel=1e-12)
        if not other_size and layer.layers is not None:
            assert layer.layers == other.layers, t
    if slug in ATLAS_WITHOUT_LENGTHS:
        assert ours.max_position_embeddings is None and ours.training_length is None
    else:
        assert ours.max_position_embeddings == published.max_position_embeddings
        assert ours.training_length == published.training_length
    assert (ours.scaling, ours.factor) == (published.scaling, published.factor)
    if not other_size:
        assert ours.nope_layers == published.nope_layers
    else:
        assert (ours.nope_layers == 0) == (published.nope_layers == 0)


def test_published_files_in_the_package_are_the_zoo_files():
    """The book reads published configs from the package (so a downloaded notebook runs
    without the repository): each must be byte for byte the zoo's file."""
    import posenc

    shipped = sorted((Path(posenc.__file__).parent / "atlas" / "data" / "published")
                     .glob("*.json"))
    assert shipped
    for path in shipped:
        assert path.read_bytes() == (ZOO / path.stem / "config.json").read_bytes(), path.name
