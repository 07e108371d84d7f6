"""Every RoPE family of the pinned transformers, read by posenc as transformers reads it.

Two checks.  The list: the model types of the installed transformers whose configuration
class carries RoPE keys are exactly the families posenc reads (``FAMILIES``) or refuses
with a reason (``REFUSED``), so a family added to the pin fails here until it is one or
the other.  The proof: for each family read, a config built from the class defaults and
from variants that exercise its keys is saved as a published file may hold it (only
``model_type`` and the keys the variant sets) and as transformers saves it
(``to_json_string``, ``to_dict``), read with ``describe_config``, and
compared with transformers' own rotary module built from the same config object: the
frequencies of each layer type, its attention factor and rotated width, and which layers
rotate, which attend without rotating and which do not attend at all.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import re
import tempfile
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from posenc.atlas import describe_config
from posenc.atlas._families import FAMILIES, REFUSED

transformers = pytest.importorskip("transformers")

#: A configuration class field that makes a model type a RoPE candidate.
ROPE_KEYS = ("rope_parameters", "rope_theta", "rotary_dim", "rope_scaling", "rotary_emb_base",
             "rotary_pct", "partial_rotary_factor")


def rope_model_types():
    """The model types of the installed transformers whose config class has a RoPE key."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES

    out = []
    for model_type in CONFIG_MAPPING_NAMES:
        fields = getattr(CONFIG_MAPPING[model_type], "__dataclass_fields__", {})
        if any(key in fields for key in ROPE_KEYS):
            out.append(model_type)
    return sorted(out)


def multimodal_model_types():
    """Model types of the installed transformers with a ``text_config`` whose class-default
    text part is a family posenc reads: posenc reads them through that text part."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES

    out = []
    for model_type in CONFIG_MAPPING_NAMES:
        cls = CONFIG_MAPPING[model_type]
        if model_type in FAMILIES or "text_config" not in (getattr(cls, "sub_configs", None) or {}):
            continue
        try:
            text = _build(model_type, {}).get_text_config(decoder=True)
        except Exception:  # a class transformers cannot build from its defaults
            continue
        if text.model_type in FAMILIES:
            out.append(model_type)
    return sorted(out)


def test_every_rope_family_of_the_pin_is_read_or_refused():
    found = set(rope_model_types())
    listed = set(FAMILIES) | set(REFUSED) | set(MULTIMODAL)
    assert not found - listed, ("families of the pinned transformers that posenc neither "
                                f"reads nor refuses: {sorted(found - listed)}")
    assert not set(FAMILIES) & set(REFUSED), sorted(set(FAMILIES) & set(REFUSED))
    for model_type, reason in REFUSED.items():
        assert isinstance(reason, str) and len(reason) > 10, model_type
    for model_type, family in FAMILIES.items():
        assert family["_source"].startswith("models/"), model_type


def test_partial_rotation_is_read_where_the_rotary_class_reads_it():
    """PARTIAL_DEFAULT lists the families whose rotary class's default rule reads
    partial_rotary_factor: the others turn the whole head under that rule."""
    from posenc.atlas._families import PARTIAL_DEFAULT

    reads = {"gptj", "codegen"}  # their attention reads rotary_dim; no rotary class
    for model_type in set(FAMILIES) - reads:
        config = _build(model_type, {})
        source = inspect.getsource(_rotary_class(config).compute_default_rope_parameters)
        if "partial_rotary_factor" in source:
            reads.add(model_type)
    assert reads == set(PARTIAL_DEFAULT)


# -- the reference: transformers' own rotary module ------------------------------------


def _rotary_class(config):
    module = importlib.import_module(type(config).__module__.replace(".configuration_", ".modeling_"))
    names = [n for n, obj in vars(module).items()
             if n.endswith("RotaryEmbedding") and inspect.isclass(obj)
             and not re.search(r"(Vision|Audio|DiT|Talker|SaProt)RotaryEmbedding$", n)]
    text = [n for n in names if "Text" in n]
    return getattr(module, (text or sorted(names, key=len))[0])


#: Layer types whose layers have no attention (a recurrence, a convolution): transformers'
#: model files build no attention for them.
NO_ATTENTION_TYPES = {"linear_attention", "conv", "mamba", "mamba2", "recurrent",
                      "short_conv", "minimax_linear"}


def _per_layer(text):
    """Per layer: its layer type if it rotates, "nope" if it attends without RoPE, None
    if it does not attend, as the family's model file decides (see RULES)."""
    n = text.num_hidden_layers
    types = list(getattr(text, "layer_types", None) or ["all"] * n)
    flags = getattr(text, "no_rope_layers", None) or [1] * n
    rule = RULES.get(text.model_type)
    params = getattr(text, "rope_parameters", None) or {}
    out = []
    for i, (t, f) in enumerate(zip(types, flags)):
        if t in NO_ATTENTION_TYPES:
            out.append(None)
        elif t in params and params[t] is None:  # a rope dict per layer type, None: no RoPE
            out.append("nope")
        elif rule is not None:
            out.append(rule(text, i, t, f))
        else:
            out.append(t if f else "nope")
    return out


#: Families whose attention decides per layer whether to rotate: the rule each model file
#: applies (the file is the family's ``_source`` in posenc/atlas/_families.py).
RULES = {
    # Cohere2Attention rotates only its sliding layers
    "cohere2": lambda c, i, t, f: t if t == "sliding_attention" else "nope",
    # Exaone4Attention: "if self.sliding_window is None or self.is_sliding" it rotates
    "exaone4": lambda c, i, t, f: t if (c.sliding_window is None or t == "sliding_attention") else "nope",
    # AfmoeAttention rotates "if self.is_local_attention" (its sliding layers)
    "afmoe": lambda c, i, t, f: t if t == "sliding_attention" else "nope",
    # FlintAttention rotates "if self.sliding_window is not None": its sliding layers
    "flint": lambda c, i, t, f: t if t == "sliding_attention" else "nope",
    # OlmoHybridModel passes position embeddings to full_attention layers only
    "olmo_hybrid": lambda c, i, t, f: t if t == "full_attention" else "nope",
    # MuseGlimmerTextModel: "position_embeddings if self.config.layer_rope_theta[i] else None"
    "muse_glimmer_text": lambda c, i, t, f: t if c.layer_rope_theta[i] else "nope",
    "muse_spark_text": lambda c, i, t, f: t if c.layer_rope_theta[i] else "nope",
    # Zamba2Attention rotates "if self.config.use_mem_rope"
    "zamba2": lambda c, i, t, f: t if c.use_mem_rope else "nope",
    # GraniteSWAModel passes no position embeddings where layer_rope_theta is 0
    "granite_swa": lambda c, i, t, f: t if c.layer_rope_theta[i] else "nope",
    "granitemoe_swa": lambda c, i, t, f: t if c.layer_rope_theta[i] else "nope",
    # Cohere2MoeAttention: "if self.sliding_window is not None or self.force_rope"
    "cohere2_moe": lambda c, i, t, f: t if (t == "sliding_attention" or (
        c.mlp_layer_types[i] == "dense" and c.prefix_dense_sliding_window_pattern == 1)) else "nope",
    # GraniteMoeHybridModel builds no rotary module unless position_embedding_type == "rope"
    "granitemoehybrid": lambda c, i, t, f: t if c.position_embedding_type == "rope" else "nope",
}


def transformers_reading(config):
    """What transformers builds for the text model of ``config``: per layer what it does,
    and per rotating layer type the rotary module's frequencies and attention factor."""
    import torch

    text = config.get_text_config(decoder=True)
    per_layer = _per_layer(text)
    if text.model_type in ("gptj", "codegen"):
        return _gptj_reading(text, per_layer)
    rotary = _rotary_class(text)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = rotary(config=text)
    layers = {}
    for t in {t for t in per_layer if t not in (None, "nope")}:
        if text.model_type in ("granite_swa", "granitemoe_swa"):
            # GraniteSWAModel: one rotary module per base of layer_rope_theta, built from
            # a copy of the config with that base
            base = text.layer_rope_theta[text.layer_types.index(t)]
            copied = copy.deepcopy(text)
            copied.rope_parameters = {**text.rope_parameters, "rope_theta": base}
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = rotary(config=copied)
        if hasattr(module, f"{t}_inv_freq"):
            inv, att = getattr(module, f"{t}_inv_freq"), getattr(module, f"{t}_attention_scaling")
        else:
            inv, att = module.inv_freq, module.attention_scaling
        layers[t] = (inv.double().numpy(), float(att))
    return {"per_layer": per_layer, "layers": layers, "windows": _windows(text),
            "max_position_embeddings": getattr(text, "max_position_embeddings", None)}


def _windows(text):
    """The window of the layer types that name one (a config with one kind of layer,
    "all", is left out: its window depends on the family's attention)."""
    windows = {"sliding_attention": getattr(text, "sliding_window", None),
               "chunked_attention": getattr(text, "attention_chunk_size", None),
               "full_attention": None}
    for t in SLIDING_TYPES.get(text.model_type, ()):
        windows[t] = text.sliding_window
    return windows


#: Layer types other than "sliding_attention" that the family's attention gives
#: ``config.sliding_window``.
SLIDING_TYPES = {
    "zaya": ("hybrid_sliding",),  # ZayaAttention: sliding_window if layer_type == "hybrid_sliding"
}


def _gptj_reading(text, per_layer):
    """GPT-J and CodeGen have no rotary module: their attention turns the first
    ``rotary_dim`` features of each head with ``create_sinusoidal_positions``'s table."""
    import torch

    module = importlib.import_module(type(text).__module__.replace(".configuration_", ".modeling_"))
    table = module.create_sinusoidal_positions(2, text.rotary_dim)  # positions 0 and 1
    half = text.rotary_dim // 2
    inv = torch.atan2(table[1, :half].double(), table[1, half:].double())  # angle at position 1
    return {"per_layer": per_layer, "layers": {"all": (inv.numpy(), 1.0)}, "windows": {},
            "max_position_embeddings": getattr(text, "max_position_embeddings", None)}


def assert_reads_as_transformers(description, reference):
    per_layer = reference["per_layer"]
    counts = Counter(t for t in per_layer if t not in (None, "nope"))
    got = {layer.layer_type: layer for layer in description.layers}
    assert {t: got[t].layers for t in got} == dict(counts), (
        {t: got[t].layers for t in got}, dict(counts))
    assert description.nope_layers == per_layer.count("nope")
    assert description.no_attention_layers == per_layer.count(None)
    assert description.max_position_embeddings == reference["max_position_embeddings"]
    for t, (inv, att) in reference["layers"].items():
        layer = got[t]
        assert layer.inv_freq.shape == inv.shape, (t, layer.inv_freq.shape, inv.shape)
        np.testing.assert_allclose(layer.inv_freq, inv, rtol=1e-6, atol=0, err_msg=t)
        assert layer.attention_factor == pytest.approx(att, rel=1e-6), t
        if t in reference["windows"]:
            assert layer.window == reference["windows"][t], (t, layer.window)


# -- the proof, family by family ----------------------------------------------------------


#: Families whose class defaults make no model transformers can run: posenc must refuse
#: them, with a message matching the pattern; their variants give what published files give.
BROKEN_DEFAULTS = {
    "glm4_moe": {"head_dim": 128},  # 4096 / 96 heads: no whole head width
    "glm4v_moe_text": {"head_dim": 128},  # 4096 / 96 heads
    "qwen3_omni_moe_text": {"head_dim": 128},  # 2048 / 28 heads
    # Lfm2MoeConfig has no default layer_types, which its model reads per layer
    "lfm2_moe": {"layer_types": ["conv", "full_attention"] * 3, "num_hidden_layers": 6},
}
BROKEN_MESSAGE = {"lfm2_moe": r"config\['layer_types'\]"}


def _build(model_type, kwargs):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CONFIG_MAPPING[model_type](**kwargs)


def _load(saved):
    """What transformers reads from a saved config dict (as from a config.json)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    cls = CONFIG_MAPPING[saved["model_type"]]
    with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp:
        warnings.simplefilter("ignore")
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(saved), encoding="utf-8")
        return cls.from_dict(cls._dict_from_json_file(path))


def _accepted(model_type, kwargs):
    """Whether transformers builds this config and its rotary module."""
    try:
        transformers_reading(_build(model_type, kwargs))
    except Exception:
        return False
    return True


def _global_attr(config, name):
    """A config attribute, 0 where it is set per layer (Gemma 4's head_dim)."""
    try:
        return getattr(config, name, 0)
    except RuntimeError:  # transformers' AmbiguousGlobalPerLayerAttributeError
        return 0


def _variants(model_type):
    """Class defaults, then the first variants transformers accepts among: a long-context
    rule (yarn, else linear), another layer count (the layer pattern), a partial rotation,
    and the family's own (``VARIANTS``)."""
    base = dict(BROKEN_DEFAULTS.get(model_type, {}))
    defaults = _build(model_type, base)
    params = getattr(defaults, "rope_parameters", None) or {}
    nested = bool(params) and all(isinstance(v, dict) or v is None for v in params.values())
    theta = (params.get("rope_theta") if not nested else None) or 10000.0
    scaled = []
    for rule in ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
                 {"rope_type": "linear", "factor": 4.0}):
        if nested:
            p = {k: v and dict(v) for k, v in params.items()}
            rotating = sorted(k for k, v in p.items() if v)
            p["full_attention" if p.get("full_attention") else rotating[0]].update(rule)
        else:
            p = dict(rule, rope_theta=theta * 2)
            if "partial_rotary_factor" in params:
                p["partial_rotary_factor"] = params["partial_rotary_factor"]
        if _global_attr(defaults, "head_dim") is None:  # transformers' yarn needs it then
            scaled.append(("scaled", dict(base, rope_parameters=p, head_dim=defaults.hidden_size
                                          // defaults.num_attention_heads)))
        scaled.append(("scaled", dict(base, rope_parameters=p)))
    layers = [("layers", dict(base, num_hidden_layers=n)) for n in (6, 8)]
    partial = []
    if not nested:
        partial.append(("partial", dict(base, rope_parameters=dict(
            params or {"rope_type": "default"}, rope_theta=theta, partial_rotary_factor=0.5))))
    cases = [("defaults", {})]
    for group in (scaled, layers, partial, VARIANTS.get(model_type, [])):
        for name, kwargs in group:
            if _accepted(model_type, kwargs):
                cases.append((name, kwargs))
                break
    return [(model_type, name, kwargs) for name, kwargs in cases]


def _mistral4_cannot_run(c):
    """Mistral4Attention applies the rotary table to its qk_rope_head_dim slice and scales
    queries with rope_parameters' llama_4_scaling_beta and original_max_position_embeddings."""
    module = _rotary_class(c)(config=c)
    if 2 * module.inv_freq.shape[-1] != c.qk_rope_head_dim:
        return r"config\['qk_rope_head_dim'\]"
    if None in (c.rope_parameters.get("llama_4_scaling_beta"),
                c.rope_parameters.get("original_max_position_embeddings")):
        return "llama_4_scaling_beta"
    return None


#: Families whose model cannot run some configs its rotary module accepts: the message
#: posenc's refusal must match (None where the model runs).
CANNOT_RUN = {"mistral4": _mistral4_cannot_run}


#: Variants of keys only some families have.
VARIANTS = {
    "gptj": [("rotary_dim", {"rotary_dim": 32, "n_embd": 1024, "n_head": 8})],
    "codegen": [("rotary_dim", {"rotary_dim": 16, "n_embd": 1024, "n_head": 16})],
    "qwen3_next": [("interval", {"full_attention_interval": 3, "num_hidden_layers": 9})],
    "olmo_hybrid": [("layer_types", {"num_hidden_layers": 3})],
    "lfm2": [("full_attn_idxs", {"full_attn_idxs": [2, 5], "num_hidden_layers": 6})],
    "bamba": [("attn_layer_indices", {"attn_layer_indices": [1, 4], "num_hidden_layers": 6})],
    "granitemoehybrid": [("rope", {"position_embedding_type": "rope", "layer_types": [
        "linear_attention", "full_attention", "linear_attention", "full_attention"],
        "num_hidden_layers": 4})],
    "exaone4": [("no_window", {"sliding_window": None, "layer_types": ["full_attention"] * 4,
                               "num_hidden_layers": 4})],
    "minimax_m2": [("rotary_dim", {"rotary_dim": 64})],
    "mimo_v2_flash": [("sliding_window_size", {"sliding_window_size": 64})],
    "granite_swa": [("layer_rope_theta", {"num_hidden_layers": 8, "layer_rope_theta": [
        0, 10000.0, 10000.0, 10000.0, 0, 10000.0, 10000.0, 10000.0]})],
    "granitemoe_swa": [("layer_rope_theta", {"num_hidden_layers": 8, "layer_rope_theta": [
        1000000.0, 50000.0, 0, 50000.0, 1000000.0, 50000.0, 50000.0, 0]})],
    "gemma4_text": [("global_head_dim", {"global_head_dim": 384, "num_hidden_layers": 8,
                                         "layer_types": ["sliding_attention", "full_attention"] * 4,
                                         "rope_parameters": {
                                             "sliding_attention": {"rope_type": "default",
                                                                   "rope_theta": 20000.0},
                                             "full_attention": {"rope_type": "proportional",
                                                                "partial_rotary_factor": 0.5,
                                                                "rope_theta": 500000.0}}})],
    "bailing_hybrid": [("layer_group_size", {"layer_group_size": 4, "num_hidden_layers": 8,
                                             "model_max_length": 32768})],
    "zamba2": [("mem_rope", {"use_mem_rope": True, "num_hidden_layers": 6, "layers_block_type": [
        "mamba", "hybrid", "mamba", "mamba", "hybrid", "mamba"]})],
    "unlimited_ocr_text": [("no_window", {"sliding_window": None, "head_dim": 64})],
    "muse_glimmer_text": [("layer_rope_theta", {"num_hidden_layers": 6, "rope_theta": 40000.0,
                                                "layer_rope_theta": [40000.0, 0, 40000.0, 0,
                                                                     40000.0, 40000.0]})],
    "muse_spark_text": [("layer_rope_theta", {"num_hidden_layers": 5,
                                              "layer_rope_theta": [0, 0, 500000.0, 500000.0, 0]})],
    "recurrent_gemma": [("block_types", {"block_types": ["attention", "recurrent"],
                                         "num_hidden_layers": 5, "attention_window_size": 512})],
    "gemma3n_text": [("rope_local_base_freq", {"rope_local_base_freq": 20000.0, "rope_theta": 5e5,
                                               "num_hidden_layers": 10})],
    "modernbert-decoder": [("bases", {"global_rope_theta": 80000.0, "local_rope_theta": 20000.0,
                                      "local_attention": 256, "global_attn_every_n_layers": 4,
                                      "num_hidden_layers": 8})],
    "qwen4_exp_text": [("layer_types", {"num_hidden_layers": 6, "layer_types": [
        "linear_attention", "full_attention", "linear_attention", "linear_attention",
        "full_attention", "linear_attention"]})],
    "step3p5": [("per_layer_lists", {
        "num_hidden_layers": 4, "num_nextn_predict_layers": 1, "sliding_window": 512,
        "layer_types": ["full_attention", "sliding_attention", "sliding_attention",
                        "full_attention", "full_attention"],
        "rope_theta": [5e6, 1e4, 1e4, 5e6, 7.0], "partial_rotary_factors": [0.5, 1.0, 1.0, 0.5, 1.0],
        "rope_scaling": {"rope_type": "yarn", "factor": 2.0,
                         "original_max_position_embeddings": 65536}})],
    "dbrx": [("attn_config", {"attn_config": {"rope_theta": 500000.0, "kv_n_heads": 8},
                              "rope_theta": 500000.0})],
    "cohere2_moe": [("dense_prefix", {"first_k_dense_replace": 3, "num_hidden_layers": 8,
                                      "rope_theta": 50000.0,
                                      "rope_parameters": {"rope_type": "linear", "factor": 2.0}})],
    "mistral4": [("yarn", {"qk_rope_head_dim": 32, "qk_nope_head_dim": 96, "rope_parameters": {
        "rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "llama_4_scaling_beta": 0.2,
        "original_max_position_embeddings": 65536, "partial_rotary_factor": 0.25}})],
    "laguna": [("layer_types", {"layer_types": ["sliding_attention", "full_attention"] * 3,
                                "num_hidden_layers": 6})],
    "mellum": [("layer_types", {"layer_types": ["full_attention", "sliding_attention"] * 3,
                                "num_hidden_layers": 6})],
    "zaya": [("layer_types", {"layer_types": ["hybrid_sliding", "hybrid"] * 3,
                              "num_hidden_layers": 6, "sliding_window": 256})],
}


CASES = [case for model_type in sorted(FAMILIES) for case in _variants(model_type)]


def test_every_family_has_two_variants():
    count = Counter(m for m, _, _ in CASES)
    assert all(count[m] >= 3 for m in FAMILIES), sorted(m for m in FAMILIES if count[m] < 3)


@pytest.mark.parametrize("model_type,name,kwargs", CASES,
                         ids=[f"{m}-{n}" for m, n, _ in CASES])
def test_family_reads_as_transformers(model_type, name, kwargs):
    config = _build(model_type, kwargs)
    # a published file may hold only the keys that differ from the class defaults
    saved_forms = (dict(kwargs, model_type=model_type), json.loads(config.to_json_string()),
                   config.to_dict())
    if model_type in BROKEN_DEFAULTS and name == "defaults":
        for saved in saved_forms:
            with pytest.raises(ValueError, match=BROKEN_MESSAGE.get(model_type, "divisible")):
                describe_config(saved)
        return
    for saved in saved_forms:
        loaded = _load(saved)
        reference = transformers_reading(loaded)
        refusal = CANNOT_RUN.get(model_type, lambda c: None)(loaded.get_text_config(decoder=True))
        if refusal is not None:  # the rotary module builds, the attention cannot use it
            with pytest.raises(ValueError, match=refusal):
                describe_config(saved)
            continue
        if all(t in (None, "nope") for t in reference["per_layer"]):
            with pytest.raises(ValueError, match="no layer that uses RoPE"):
                describe_config(saved)
            continue
        assert_reads_as_transformers(describe_config(saved), reference)


MULTIMODAL = multimodal_model_types()


@pytest.mark.parametrize("model_type", MULTIMODAL)
def test_multimodal_text_part_reads_as_transformers(model_type):
    """The class defaults of a multimodal model, saved with its nested text_config."""
    config = _build(model_type, {})
    text_type = config.get_text_config(decoder=True).model_type
    saved_forms = ({"model_type": model_type, "text_config": {"model_type": text_type}},
                   json.loads(config.to_json_string()), config.to_dict())
    if text_type in BROKEN_DEFAULTS:
        for saved in saved_forms:
            with pytest.raises(ValueError, match=BROKEN_MESSAGE.get(text_type, "divisible")):
                describe_config(saved)
        return
    for saved in saved_forms:
        try:
            loaded = _load(saved)
        except Exception:  # transformers refuses the file (a validator): nothing to compare with
            continue
        assert_reads_as_transformers(describe_config(saved), transformers_reading(loaded))


@pytest.mark.parametrize("model_type", sorted(REFUSED))
def test_refused_family_says_why(model_type):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            config = CONFIG_MAPPING[model_type]()
        except Exception:  # a class transformers cannot build from its defaults
            config = None
    saved = {"model_type": model_type} if config is None else json.loads(config.to_json_string())
    with pytest.raises(ValueError, match=r"config\['model_type'\]") as info:
        describe_config(saved)
    assert REFUSED[model_type] in str(info.value)


def test_text_config_defaults_are_the_multimodal_classes_own():
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from posenc.atlas._families import TEXT_CONFIG_DEFAULTS

    for model_type, defaults in TEXT_CONFIG_DEFAULTS.items():
        cls = CONFIG_MAPPING[model_type]
        assert "init_kwargs" in inspect.getsource(cls.__post_init__), model_type
        init = cls.sub_configs_defaults["text_config"].init_kwargs
        assert defaults == {k: init[k] for k in defaults}, model_type


def test_a_hybrid_says_which_layers_have_no_attention():
    """Qwen3-Next's class defaults: 36 of 48 layers are linear attention (no positions)."""
    from posenc.atlas import format_description

    d = describe_config({"model_type": "qwen3_next"})
    assert (d.no_attention_layers, d.nope_layers, d.layers[0].layers) == (36, 0, 12)
    assert d.pattern() == "12 global + 36 without attention"
    assert "36 of 48 layers have no attention (linear_attention)" in format_description(d, "en")
    zh = format_description(d, "zh")
    assert "48 层里有 36 层没有注意力（linear_attention）" in zh and "36 个无注意力层" in zh
    with pytest.raises(ValueError, match=r"no layer that uses RoPE \(0 attention layers without "
                                         r"it, 32 layers without attention\)"):
        describe_config({"model_type": "granitemoehybrid"})


@pytest.mark.parametrize("config,match", [
    # DBRX's published files keep the base in attn_config, which transformers never reads
    ({"model_type": "dbrx", "attn_config": {"rope_theta": 500000}}, r"config\['attn_config'\]"),
    # Cohere2MoeConfig keeps rope_scaling as a field and rotates without it
    ({"model_type": "cohere2_moe", "rope_scaling": {"rope_type": "linear", "factor": 2.0}},
     r"config\['rope_scaling'\]"),
    ({"model_type": "cohere2_moe", "rope_parameters": {"rope_type": "default"}},
     "must give rope_theta"),
    # Mistral4's default rule turns the whole 128-wide head; its attention rotates 64
    ({"model_type": "mistral4", "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}},
     r"config\['qk_rope_head_dim'\] is 64 but .* turns 128 features"),
    ({"model_type": "gemma4_text", "use_bidirectional_attention": "all"},
     r"config\['use_bidirectional_attention'\] is 'all'"),
    ({"model_type": "gemma4_text", "num_hidden_layers": 6,
      "per_layer_config": {"1": {"head_dim": 128}}}, "sliding_attention layers 2 head widths"),
    ({"model_type": "zamba2", "use_mem_rope": True, "use_long_context": True},
     r"config\['use_long_context'\] is true"),
    ({"model_type": "muse_glimmer_text", "num_hidden_layers": 4,
      "layer_rope_theta": [10000.0, 20000.0, 10000.0, 0]}, "bases 20000 but"),
    ({"model_type": "step3p5", "num_hidden_layers": 2, "rope_theta": [1e4, 2e4]},
     r"config\['rope_theta'\] gives the full_attention layers 2 values"),
    # one base per layer type
    ({"model_type": "granite_swa", "num_hidden_layers": 4,
      "layer_rope_theta": [10000.0, 10000.0, 20000.0, 0]}, "sliding_attention layers 2 bases"),
    ({"model_type": "laguna", "rope_parameters": {"full_attention": {"rope_type": "default"}}},
     r"config\['rope_parameters'\]\['full_attention'\] must give rope_theta"),
])
def test_a_config_its_model_cannot_run_is_refused(config, match):
    with pytest.raises(ValueError, match=match):
        describe_config(config)


def test_an_odd_rope_slice_is_refused_naming_its_key():
    config = {"model_type": "deepseek_v3", "qk_rope_head_dim": 1}
    with pytest.raises(ValueError, match=r"config\['qk_rope_head_dim'\]"):
        describe_config(config)


@pytest.mark.parametrize("model_type,name,kwargs", CASES,
                         ids=[f"{m}-{n}" for m, n, _ in CASES])
def test_from_config_builds_what_the_reader_reads(model_type, name, kwargs):
    """RotaryEmbedding.from_config of every family's saved config rotates the features
    the reader names, with its pairing, frequencies and attention factor (the reader is
    held to transformers above)."""
    torch = pytest.importorskip("torch")
    from posenc.torch import RotaryEmbedding

    saved = json.loads(_build(model_type, kwargs).to_json_string())
    try:
        description = describe_config(saved)
    except ValueError:
        return  # refused: test_family_reads_as_transformers holds the reason
    for layer in description.layers:
        if description.mrope_section is not None:
            with pytest.raises(ValueError, match="M-RoPE"):
                RotaryEmbedding.from_config(saved, layer.layer_type)
            continue
        rope = RotaryEmbedding.from_config(saved, layer.layer_type)
        assert (rope.dim, rope.rotary_slice) == (layer.rotary_dim, layer.rotary_slice)
        assert rope.layout == ("interleaved" if description.interleaved else "half")
        length = description.max_position_embeddings or 4096
        inv = rope._functional_frequencies(torch.tensor([length - 1]), 1).numpy()
        np.testing.assert_allclose(inv, layer.inv_freq, rtol=1e-12, atol=0)
        assert rope.attention_factor == pytest.approx(layer.attention_factor, rel=1e-12)
