"""What transformers 5.23 itself reads from a config.json: the reference for the zoo tests.

``transformers_reading(directory)`` loads the file with ``AutoConfig.from_pretrained``
(no weights), takes the text config, and asks transformers' own code for each layer type
that rotates: the family's ``RotaryEmbedding.compute_default_rope_parameters`` for the
default rule, ``ROPE_INIT_FUNCTIONS`` for the others (at ``seq_len`` =
``max_position_embeddings``, as posenc describes the configured length), which layers use
RoPE (``no_rope_layers``; Cohere2's global layers rotate nothing), and the window or chunk
of each layer type.
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from collections import Counter

import numpy as np


def _rotary_class(config):
    module = importlib.import_module(type(config).__module__.replace(".configuration_", ".modeling_"))
    names = [n for n, obj in vars(module).items()
             if n.endswith("RotaryEmbedding") and inspect.isclass(obj) and "Vision" not in n]
    text = [n for n in names if "Text" in n]
    return getattr(module, (text or sorted(names, key=len))[0])


def transformers_reading(directory):
    """A dict per layer type that rotates, and the NoPE count, as transformers reads them."""
    import torch
    from transformers import AutoConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = AutoConfig.from_pretrained(str(directory))
    text = config.get_text_config(decoder=True)
    n = text.num_hidden_layers
    types = list(getattr(text, "layer_types", None) or ["all"] * n)
    flags = getattr(text, "no_rope_layers", None)
    if flags is None:
        flags = [1] * n
    if text.model_type == "cohere2":  # Cohere2Attention rotates only its sliding layers
        flags = [int(t == "sliding_attention") for t in types]
    params = text.rope_parameters
    nested = bool(text.nested_rope_parameter_keys(params)) if hasattr(
        text, "nested_rope_parameter_keys") else False
    rotary = _rotary_class(text)
    counts = Counter(t for t, f in zip(types, flags) if f)
    out = {"nope": sum(1 for f in flags if not f), "layers": {}, "model_type": text.model_type,
           "max_position_embeddings": text.max_position_embeddings}
    # M-RoPE: the sections (and Qwen3-VL's interleaving) the text model's rotary reads
    flat = params if not nested else {}
    section = flat.get("mrope_section")
    out["mrope_section"] = None if section is None else tuple(int(v) for v in section)
    out["mrope_interleaved"] = flat.get("mrope_interleaved") if section is not None else None
    for t, count in counts.items():
        p = params[t] if nested else params
        layer_type = t if nested else None
        rope_type = p["rope_type"]
        with torch.no_grad():
            if rope_type == "default":
                fn = rotary.compute_default_rope_parameters
                sig = inspect.signature(fn).parameters
                kwargs = {"layer_type": layer_type} if "layer_type" in sig else {}
                if "device" in sig:
                    kwargs["device"] = "cpu"
                inv, att = fn(text, **kwargs)
            else:
                inv, att = ROPE_INIT_FUNCTIONS[rope_type](
                    text, "cpu", seq_len=text.max_position_embeddings, layer_type=layer_type)
        if t == "sliding_attention" or (t == "all" and getattr(text, "sliding_window", None)):
            window = text.sliding_window
        elif t == "chunked_attention":
            window = getattr(text, "attention_chunk_size", None)
        else:
            window = None
        out["layers"][t] = {"count": count, "rope_type": rope_type,
                            "rope_theta": float(p["rope_theta"]),
                            "inv_freq": inv.double().numpy(), "attention_factor": float(att),
                            "window": window}
    return out


def assert_same_reading(description, reference, *, rtol=2e-6):
    """posenc's ModelDescription against transformers_reading, layer type by layer type."""
    got = {layer.layer_type: layer for layer in description.layers}
    assert set(got) == set(reference["layers"]), (sorted(got), sorted(reference["layers"]))
    assert description.nope_layers == reference["nope"]
    assert description.max_position_embeddings == reference["max_position_embeddings"]
    assert description.mrope_section == reference.get("mrope_section"), (
        description.mrope_section, reference.get("mrope_section"))
    assert description.mrope_interleaved == reference.get("mrope_interleaved")
    for t, ref in reference["layers"].items():
        layer = got[t]
        assert layer.layers in (ref["count"], None), (t, layer.layers, ref["count"])
        assert layer.rope_theta == ref["rope_theta"], t
        turning = layer.inv_freq[layer.inv_freq > 0]
        ref_inv = ref["inv_freq"][ref["inv_freq"] > 0]
        assert turning.shape == ref_inv.shape, (t, turning.shape, ref_inv.shape)
        np.testing.assert_allclose(turning, ref_inv, rtol=rtol, err_msg=t)
        assert layer.attention_factor == np.float64(ref["attention_factor"]) or abs(
            layer.attention_factor - ref["attention_factor"]) <= 1e-6 * ref["attention_factor"], t
        assert layer.window == ref["window"], (t, layer.window, ref["window"])
