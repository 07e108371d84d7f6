"""How transformers 5.23 reads the position keys of each model family's ``config.json``.

A published ``config.json`` leaves out every key whose value is its class's default, and
older files keep names transformers has since renamed (``rope_scaling``,
``rope_local_base_freq``, ``sliding_window_pattern``, ``rotary_pct``, an empty
``no_rope_layers``).  :func:`standardize` turns such a file into the explicit form that
:func:`posenc.atlas.describe_config` reads (``layer_types``, ``no_rope_layers``,
``rope_parameters`` per layer type, ``head_dim``), following, family by family, what the
``__post_init__`` and ``convert_rope_params_to_dict`` of transformers 5.23's configuration
classes do.  The defaults below are those classes' field defaults
(``tests/atlas/test_zoo.py`` checks them against transformers itself).

A file whose ``model_type`` is not listed here is refused (the reading rules of an
unknown family cannot be guessed); a dict without ``model_type`` is read as written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["FAMILIES", "TEXT_MODEL_TYPES", "standardize"]

#: The defaults transformers 5.23 gives the keys posenc reads, per text ``model_type``.
#: ``rope_theta`` is the class's ``default_theta``; ``partial_rotary_factor`` the value
#: its ``convert_rope_params_to_dict`` sets when the file has none.
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {"head_dim": None, "hidden_size": 4096, "num_attention_heads": 32,
              "num_hidden_layers": 32, "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "mistral": {"head_dim": None, "hidden_size": 4096, "num_attention_heads": 32,
                "num_hidden_layers": 32, "max_position_embeddings": 131072,
                "sliding_window": 4096, "rope_theta": 10000.0},
    "ministral3": {"head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
                   "num_hidden_layers": 34, "max_position_embeddings": 262144,
                   "sliding_window": None, "rope_theta": 10000.0,
                   "_default_rope": {"type": "yarn", "rope_theta": 1000000.0, "factor": 16.0,
                                     "original_max_position_embeddings": 16384,
                                     "beta_fast": 32.0, "beta_slow": 1.0,
                                     "mscale_all_dim": 1.0, "mscale": 1.0,
                                     "llama_4_scaling_beta": 0.1}},
    "starcoder2": {"hidden_size": 3072, "num_attention_heads": 24, "num_hidden_layers": 30,
                   "max_position_embeddings": 4096, "sliding_window": None,
                   "rope_theta": 10000.0},
    "mixtral": {"head_dim": None, "hidden_size": 4096, "num_attention_heads": 32,
                "num_hidden_layers": 32, "max_position_embeddings": 131072,
                "sliding_window": None, "rope_theta": 1000000.0},
    "qwen2": {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
              "max_position_embeddings": 32768, "sliding_window": 4096,
              "use_sliding_window": False, "max_window_layers": 28, "rope_theta": 10000.0},
    "qwen2_moe": {"hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 24,
                  "max_position_embeddings": 32768, "sliding_window": 4096,
                  "use_sliding_window": False, "max_window_layers": 28, "rope_theta": 10000.0},
    "qwen3": {"head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
              "num_hidden_layers": 32, "max_position_embeddings": 32768, "sliding_window": 4096,
              "use_sliding_window": False, "max_window_layers": 28, "rope_theta": 10000.0},
    "qwen3_moe": {"hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 24,
                  "max_position_embeddings": 32768, "sliding_window": 4096,
                  "use_sliding_window": False, "rope_theta": 10000.0},
    "qwen2_vl_text": {"hidden_size": 8192, "num_attention_heads": 64, "num_hidden_layers": 80,
                      "max_position_embeddings": 32768, "sliding_window": 4096,
                      "use_sliding_window": False, "max_window_layers": 80,
                      "rope_theta": 1000000.0},
    "qwen2_5_vl_text": {"hidden_size": 8192, "num_attention_heads": 64, "num_hidden_layers": 80,
                        "max_position_embeddings": 32768, "sliding_window": 4096,
                        "use_sliding_window": False, "max_window_layers": 80,
                        "rope_theta": 1000000.0},
    "qwen3_vl_text": {"head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
                      "num_hidden_layers": 32, "max_position_embeddings": 128000,
                      "rope_theta": 500000.0},
    "gemma": {"head_dim": 256, "hidden_size": 3072, "num_attention_heads": 16,
              "num_hidden_layers": 28, "max_position_embeddings": 8192, "rope_theta": 10000.0},
    "gemma2": {"head_dim": 256, "hidden_size": 2304, "num_attention_heads": 8,
               "num_hidden_layers": 26, "max_position_embeddings": 8192, "sliding_window": 4096,
               "rope_theta": 10000.0},
    "gemma3_text": {"head_dim": 256, "hidden_size": 2304, "num_attention_heads": 8,
                    "num_hidden_layers": 26, "max_position_embeddings": 131072,
                    "sliding_window": 4096, "rope_theta": 1000000.0,
                    "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6},
    "phi3": {"hidden_size": 3072, "num_attention_heads": 32, "num_hidden_layers": 32,
             "max_position_embeddings": 4096, "sliding_window": None,
             "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
             "partial_rotary_factor": 1.0},
    "deepseek_v2": {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
                    "max_position_embeddings": 2048, "qk_rope_head_dim": 64,
                    "qk_nope_head_dim": 128, "rope_theta": 10000.0},
    "deepseek_v3": {"hidden_size": 7168, "num_attention_heads": 128, "num_hidden_layers": 61,
                    "max_position_embeddings": 4096, "qk_rope_head_dim": 64,
                    "qk_nope_head_dim": 128, "rope_interleave": True, "rope_theta": 10000.0},
    "gpt_oss": {"head_dim": 64, "hidden_size": 2880, "num_attention_heads": 64,
                "num_hidden_layers": 36, "max_position_embeddings": 131072,
                "sliding_window": 128, "rope_theta": 150000.0,
                "_default_rope": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                                  "beta_slow": 1.0, "truncate": False,
                                  "original_max_position_embeddings": 4096}},
    "smollm3": {"hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 36,
                "max_position_embeddings": 32768, "sliding_window": None,
                "use_sliding_window": False, "no_rope_layer_interval": 4,
                "rope_theta": 2000000.0},
    "olmo2": {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
              "max_position_embeddings": 2048, "rope_theta": 10000.0},
    "olmo3": {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
              "max_position_embeddings": 2048, "sliding_window": 4096, "rope_theta": 500000.0},
    "cohere": {"hidden_size": 8192, "num_attention_heads": 64, "num_hidden_layers": 40,
               "max_position_embeddings": 8192, "rope_theta": 500000.0},
    "cohere2": {"hidden_size": 8192, "num_attention_heads": 64, "num_hidden_layers": 40,
                "max_position_embeddings": 8192, "sliding_window": 4096,
                "sliding_window_pattern": 4, "rope_theta": 10000.0},
    "glm": {"head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
            "num_hidden_layers": 40, "max_position_embeddings": 131072, "rope_theta": 10000.0,
            "partial_rotary_factor": 0.5},
    "glm4": {"head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
             "num_hidden_layers": 40, "max_position_embeddings": 131072, "rope_theta": 10000.0,
             "partial_rotary_factor": 0.5},
    "stablelm": {"hidden_size": 2560, "num_attention_heads": 32, "num_hidden_layers": 32,
                 "max_position_embeddings": 4096, "rope_theta": 10000.0,
                 "partial_rotary_factor": 0.25},
    "gpt_neox": {"hidden_size": 6144, "num_attention_heads": 64, "num_hidden_layers": 44,
                 "max_position_embeddings": 2048, "rope_theta": 10000.0,
                 "partial_rotary_factor": 0.25},
    "phi": {"hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 24,
            "max_position_embeddings": 2048, "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    "falcon": {"hidden_size": 4544, "num_attention_heads": 71, "num_hidden_layers": 32,
               "max_position_embeddings": 2048, "rope_theta": 10000.0, "alibi": False},
    "llama4_text": {"head_dim": 128, "hidden_size": 5120, "num_attention_heads": 40,
                    "num_hidden_layers": 48, "max_position_embeddings": 131072,
                    "attention_chunk_size": 8192, "no_rope_layer_interval": 4,
                    "rope_theta": 500000.0},
}

#: A multimodal ``model_type`` -> the ``model_type`` of its text part.
TEXT_MODEL_TYPES = {
    "qwen2_vl": "qwen2_vl_text",
    "qwen2_5_vl": "qwen2_5_vl_text",
    "qwen3_vl": "qwen3_vl_text",
    "gemma3": "gemma3_text",
    "llama4": "llama4_text",
}

#: Families without RoPE: what they use instead.
NOT_ROPE_FAMILIES = {
    "bloom": "ALiBi (linear biases, no rotation)",
    "mpt": "ALiBi (linear biases, no rotation)",
    "gpt2": "learned absolute positions",
    "bert": "learned absolute positions",
}

#: The most layers a config may declare (lists are built per layer).
MAX_LAYERS = 100_000


def _pattern(n, period):
    """transformers' ``sliding_window_pattern``: layer i global when (i + 1) % period == 0."""
    return ["sliding_attention" if (i + 1) % period else "full_attention" for i in range(n)]


def _count(c, key, minimum=1, maximum=None):
    """A required integer (the family's rules need it): errors name the key."""
    from . import _int  # one reader of integers for every key (bounds named)

    value = _int(c, key, minimum=minimum, maximum=maximum)
    if value is None:
        raise TypeError(f"config[{key!r}] must be an integer (this family's rules need it), "
                        "got None")
    return value


def _short(value):
    from . import _short as short

    return short(value)


def _check_top_reals(c, *keys):
    """Top-level numbers that end up in a rope dict: checked (and named) where they are."""
    from . import _real

    for key in keys:
        if key in c:
            if c[key] is None:
                raise TypeError(f"config[{key!r}] must be a number, got None")
            _real(c[key], f"config[{key!r}]")


def _flat_rope(c, family, *, partial=True):
    """transformers' ``convert_rope_params_to_dict`` + ``standardize_rope_params``, flat."""
    _check_top_reals(c, "rope_theta")
    scaling = c.pop("rope_scaling", None)
    params = c.get("rope_parameters")
    if scaling is not None and not isinstance(scaling, Mapping):
        raise TypeError(f"config['rope_scaling'] must be a dict or null, got {_short(scaling)}")
    if params is not None and not isinstance(params, Mapping):
        raise TypeError(f"config['rope_parameters'] must be a dict or null, got {_short(params)}")
    params = dict(scaling or params or family.get("_default_rope") or {})
    params.setdefault("rope_theta", c.get("rope_theta", family.get("rope_theta", 10000.0)))
    prf = c.get("partial_rotary_factor", family.get("partial_rotary_factor"))
    if partial and prf is not None:
        params.setdefault("partial_rotary_factor", prf)
    rope_type = params.get("rope_type", params.get("type", "default"))
    params["rope_type"] = rope_type
    params.pop("type", None)
    c["rope_parameters"] = params
    c.pop("partial_rotary_factor", None)
    return params


def _original_length(c, params):
    """Move the pretraining length into the rope dict as ``standardize_rope_params`` does.

    A top-level ``original_max_position_embeddings`` (Phi-3's files) wins over the
    rope dict's own value; otherwise the dict's value, else ``max_position_embeddings``.
    """
    if params.get("rope_type") in ("llama3", "yarn", "longrope"):
        if c.get("original_max_position_embeddings") is not None:
            params["original_max_position_embeddings"] = c["original_max_position_embeddings"]
        elif c.get("max_position_embeddings") is not None:
            params.setdefault("original_max_position_embeddings", c["max_position_embeddings"])


def _qwen_layers(c):
    if not c.get("use_sliding_window"):
        c["sliding_window"] = None
    if c.get("layer_types") is None and "max_window_layers" in c:
        n = _count(c, "num_hidden_layers", maximum=MAX_LAYERS)
        mwl = _count(c, "max_window_layers", minimum=0)
        c["layer_types"] = [
            "sliding_attention" if c["sliding_window"] is not None and i >= mwl
            else "full_attention" for i in range(n)
        ]


def standardize(config: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The text config in explicit form, and its ``model_type`` (None when absent).

    Raises ValueError naming ``model_type`` for a family posenc has no rules for, and
    for families without RoPE.
    """
    outer_type = config.get("model_type")
    text = config.get("text_config")
    if outer_type is not None and not isinstance(outer_type, str):
        raise TypeError(f"config['model_type'] must be a str, got {_short(outer_type)}")
    if isinstance(text, Mapping):
        c = dict(text)
        model_type = c.get("model_type") or TEXT_MODEL_TYPES.get(outer_type or "", outer_type)
        if model_type is not None and not isinstance(model_type, str):
            raise TypeError(f"config['text_config']['model_type'] must be a str, got {_short(model_type)}")
    elif text is not None:
        raise TypeError(f"config['text_config'] must be a dict, got {type(text).__name__}")
    else:
        c = dict(config)
        model_type = TEXT_MODEL_TYPES.get(outer_type or "", outer_type)
    if (isinstance(text, Mapping) and outer_type in FAMILIES
            and outer_type not in TEXT_MODEL_TYPES):
        # AutoConfig builds the text-only class of outer_type from the top-level keys
        # (class defaults where absent) and leaves text_config unused
        raise ValueError(
            f"config['model_type'] {_short(outer_type)} is a text-only class in transformers 5.23, "
            "which ignores config['text_config'] and reads the top-level keys (class "
            "defaults where absent): fix model_type (the multimodal class) or read "
            "text_config alone"
        )
    if model_type is None:
        return c, None
    if model_type in NOT_ROPE_FAMILIES:
        raise ValueError(
            f"config['model_type'] is {model_type!r} ({NOT_ROPE_FAMILIES[model_type]}): "
            "this reads RoPE models only"
        )
    family = FAMILIES.get(model_type)
    if family is None:
        raise ValueError(
            f"config['model_type'] {_short(model_type)} is not a family posenc reads as "
            f"transformers 5.23 does (known: {', '.join(sorted(FAMILIES))}); remove "
            "model_type to read the file's keys as written"
        )
    for key, value in family.items():
        if key not in ("rope_theta", "partial_rotary_factor", "rope_local_base_freq",
                       "sliding_window_pattern", "_default_rope"):
            c.setdefault(key, value)
    if model_type == "falcon":
        if c.get("alibi"):
            raise ValueError("config['alibi'] is true (ALiBi, no rotation): this reads RoPE models only")
        if c.get("rotary") is False or (c.get("rotary") is None and c.get("alibi")):
            raise ValueError("config['rotary'] is false: this reads RoPE models only")
    if model_type == "gpt_neox":
        params = c.get("rope_scaling") or c.get("rope_parameters")
        if not params or "rope_theta" not in params:
            c.setdefault("rope_theta", c.pop("rotary_emb_base", family["rope_theta"]))
        c.setdefault("partial_rotary_factor", c.pop("rotary_pct", 0.25))
    if model_type in ("gemma3_text", "olmo3"):
        _nested_rope(c, family, model_type)
    else:
        params = _flat_rope(c, family)
        if model_type in ("qwen2_vl_text", "qwen2_5_vl_text", "qwen3_vl_text"):
            if params["rope_type"] == "mrope":
                params["rope_type"] = "default"
        if model_type == "ministral3":
            beta = params.pop("llama_4_scaling_beta", None)
            params.pop("max_position_embeddings", None)
            if beta is not None:
                c["_query_scaling"] = beta
        _original_length(c, params)
        if model_type == "phi3" and params["rope_type"] in ("su", "yarn"):
            # Phi3Config renames the old names after standardize_rope_params, which
            # moved no original length into the dict for them: its validation then fails
            if params.get("original_max_position_embeddings") is None:
                raise ValueError(
                    f"config['rope_scaling']['type'] is {params['rope_type']!r}: transformers "
                    "5.23 renames it 'longrope' but finds no "
                    "rope_scaling['original_max_position_embeddings'] and refuses the file"
                )
            params["rope_type"] = "longrope"
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen2_vl_text", "qwen2_5_vl_text"):
        _qwen_layers(c)
    elif model_type == "qwen3_moe":
        if not c.get("use_sliding_window"):
            c["sliding_window"] = None
    elif model_type in ("gemma2", "gpt_oss"):
        if c.get("layer_types") is None:
            c["layer_types"] = _pattern(_count(c, "num_hidden_layers", maximum=MAX_LAYERS), 2)
    elif model_type == "gemma3_text":
        if c.get("layer_types") is None:
            period = _count(dict(c, sliding_window_pattern=c.get("sliding_window_pattern", 6)),
                            "sliding_window_pattern")
            c["layer_types"] = _pattern(_count(c, "num_hidden_layers", maximum=MAX_LAYERS), period)
    elif model_type == "olmo3":
        if c.get("layer_types") is None:
            c["layer_types"] = _pattern(_count(c, "num_hidden_layers", maximum=MAX_LAYERS), 4)
    elif model_type == "cohere2":
        heads = _count(c, "num_attention_heads")
        c["head_dim"] = _count(c, "hidden_size") // heads  # Cohere2Config sets it so
        if c.get("layer_types") is None:
            period = _count(dict(c, sliding_window_pattern=c.get("sliding_window_pattern", 4)),
                            "sliding_window_pattern")
            c["layer_types"] = _pattern(_count(c, "num_hidden_layers", maximum=MAX_LAYERS), period)
        # its global layers apply no rotation (Cohere2Attention rotates sliding layers only)
        c["no_rope_layers"] = [int(t == "sliding_attention") for t in c["layer_types"]]
    elif model_type in ("llama4_text", "smollm3"):
        n = _count(c, "num_hidden_layers", maximum=MAX_LAYERS)
        flags = c.get("no_rope_layers")
        interval = _count(c, "no_rope_layer_interval")
        default = [int((i + 1) % interval != 0) for i in range(n)]
        if model_type == "llama4_text":
            # Llama4TextConfig: an empty (or absent) list means the default interval
            c["no_rope_layers"] = flags if flags else default
        else:
            c["no_rope_layers"] = default if flags is None else flags
        if c.get("layer_types") is None and isinstance(c["no_rope_layers"], list):
            if model_type == "llama4_text":
                c["layer_types"] = ["chunked_attention" if f else "full_attention"
                                    for f in c["no_rope_layers"]]
            else:
                sliding = c.get("use_sliding_window") and c.get("sliding_window") is not None
                c["layer_types"] = ["sliding_attention" if sliding and not f else "full_attention"
                                    for f in c["no_rope_layers"]]
        c.pop("no_rope_layer_interval", None)
    elif model_type in ("deepseek_v2", "deepseek_v3"):
        c.pop("head_dim", None)
    c["_model_type"] = model_type
    return c, model_type


def _nested_rope(c, family, model_type):
    """Gemma 3 / OLMo 3: a rope dict per layer type, rope_scaling for the global layers."""
    _check_top_reals(c, "rope_theta", "rope_local_base_freq")
    scaling = c.pop("rope_scaling", None)
    if scaling is not None and not isinstance(scaling, Mapping):
        raise TypeError(f"config['rope_scaling'] must be a dict or null, got {_short(scaling)}")
    params = c.get("rope_parameters")
    if params is not None and not isinstance(params, Mapping):
        raise TypeError(f"config['rope_parameters'] must be a dict or null, got {_short(params)}")
    params = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in (params or {
        "sliding_attention": {"rope_type": "default"},
        "full_attention": {"rope_type": "default"}}).items()}
    if scaling is not None:
        params.setdefault("full_attention", {"rope_type": "default"})
        if params["full_attention"] is None:
            params["full_attention"] = {}
        params["full_attention"].update(scaling)
    if params.get("full_attention") is None:
        params["full_attention"] = {"rope_type": "default"}
    if params.get("sliding_attention") is None:
        params["sliding_attention"] = {"rope_type": "default"}
    default = family["rope_theta"]
    if model_type == "gemma3_text":
        params["full_attention"].setdefault("rope_theta", c.get("rope_theta", default))
        params["sliding_attention"].setdefault(
            "rope_theta", c.get("rope_local_base_freq", family["rope_local_base_freq"]))
    else:  # OLMo 3: the sliding layers take the class default (rope_theta is popped once)
        params["full_attention"].setdefault("rope_theta", c.get("rope_theta", default))
        params["sliding_attention"].setdefault("rope_theta", default)
    for p in params.values():
        if isinstance(p, dict):
            p.setdefault("rope_type", p.get("type", "default"))
            p.pop("type", None)
            if p["rope_type"] in ("llama3", "yarn", "longrope"):
                if c.get("max_position_embeddings") is not None:
                    p.setdefault("original_max_position_embeddings", c["max_position_embeddings"])
    c["rope_parameters"] = params
    c.pop("rope_theta", None)
