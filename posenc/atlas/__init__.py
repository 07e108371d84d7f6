r"""What real models do with positions: read a Hugging Face config, and an atlas of them.

:func:`describe_config` reads the position-related keys of a model's ``config.json``
(transformers' names: ``rope_parameters`` or the older ``rope_scaling`` / ``rope_theta``,
``head_dim``, ``partial_rotary_factor``, ``layer_types``, ``sliding_window``,
``no_rope_layers``, ``attention_chunk_size``, DeepSeek's ``qk_rope_head_dim``, Gemma 4's
``global_head_dim``, a vision-language model's ``text_config``) and computes, with
:func:`posenc.rope_frequencies`, what the model does per layer type: which pairs turn,
how fast, how the long-context rule rescales them, and which layers have no RoPE at all.

:func:`atlas` is that description for each model in ``posenc/atlas/data/*.json``: the
position-related keys of open models of 2023-2026, each value with the source file,
revision and the verbatim line it was read from (``facts``), checked by
``tests/atlas/test_atlas.py``.

The command line prints the same for any config::

    python -m posenc inspect config.json
"""

from __future__ import annotations

import json
import math
import numbers
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..rope_scaling import is_per_layer_type, rope_frequencies
from ._families import standardize

__all__ = [
    "LayerRope",
    "ModelDescription",
    "describe_config",
    "load_config",
    "atlas",
    "atlas_entry",
    "atlas_names",
    "format_description",
    "llama4_attention_temperature",
    "logn_attention_scale",
    "ATLAS_DIR",
]

#: Where the atlas's JSON files live (shipped with the package).
ATLAS_DIR = Path(__file__).with_name("data")

#: Keys a config uses for a position scheme posenc does not model.
_NOT_ROPE = {
    "alibi": "ALiBi (linear biases, no rotation)",
    "absolute": "learned absolute positions",
    "relative_key": "relative position embeddings",
    "relative_key_query": "relative position embeddings",
}


@dataclass(frozen=True)
class LayerRope:
    """The RoPE of one layer type of a model.

    Attributes
    ----------
    layer_type : str
        transformers' name (``"full_attention"``, ``"sliding_attention"``, ...), or
        ``"all"`` for a model with one kind of layer.
    layers : int or None
        How many layers are of this type (None when the config does not say).
    head_dim : int
        Width of a query/key head in these layers (for MLA: RoPE part + no-RoPE part).
    rope_type : str
        The rule (:data:`posenc.ROPE_TYPES`).
    rope_theta : float
        The base.
    inv_freq : numpy.ndarray
        The frequencies the model uses at its configured length (``seq_len`` =
        ``max_position_embeddings``), one per rotated pair (0 for pairs that do not turn).
    plain_inv_freq : numpy.ndarray
        The same pairs without the long-context rule (what pretraining used).
    attention_factor : float
        The rule's multiplier of cos and sin.
    rotated_pairs : int
        Pairs with a non-zero frequency.
    window : int or None
        Sliding-window or chunk size of these layers (None: global attention).
    window_kind : str or None
        ``"sliding"`` or ``"chunked"``.
    rope_parameters : dict
        This layer type's parameters, flat (``rope_type``, ``rope_theta`` and the type's
        keys; no ``partial_rotary_factor`` except for ``"proportional"``): what
        :class:`posenc.torch.RotaryEmbedding` takes.
    rotary_dim : int
        Features rotated per head (the width the frequencies are computed for).
    rotary_slice : {"all", "first", "last"}
        Which features of a head rotate: all, the first ``rotary_dim`` (partial rotary)
        or the last (multi-head latent attention's RoPE part).
    """

    layer_type: str
    layers: int | None
    head_dim: int
    rope_type: str
    rope_theta: float
    inv_freq: np.ndarray = field(repr=False)
    plain_inv_freq: np.ndarray = field(repr=False)
    attention_factor: float
    rotated_pairs: int
    window: int | None = None
    window_kind: str | None = None
    rope_parameters: dict[str, Any] = field(default_factory=dict, repr=False)
    rotary_dim: int = 0
    rotary_slice: str = "all"

    @property
    def rotated_fraction(self) -> float:
        """Rotated features over the head width."""
        return 2 * self.rotated_pairs / self.head_dim

    def longest_wavelength(self, scaled: bool = True) -> float:
        """:math:`2\\pi/\\theta_{min}` over the pairs that turn (scaled or as pretrained)."""
        inv = self.inv_freq if scaled else self.plain_inv_freq
        return float(2 * np.pi / inv[inv > 0].min())

    def pairs_turning_within(self, length: int, scaled: bool = False) -> int:
        """Pairs whose wavelength :math:`2\\pi/\\theta_i` is at most ``length``."""
        inv = self.inv_freq if scaled else self.plain_inv_freq
        turning = inv[inv > 0]
        return int(np.count_nonzero(2 * np.pi / turning <= length))


@dataclass(frozen=True)
class ModelDescription:
    """What a config says about positions (see :func:`describe_config`)."""

    name: str
    layers: tuple[LayerRope, ...]
    nope_layers: int
    num_layers: int | None
    max_position_embeddings: int | None
    original_max_position_embeddings: int | None
    interleaved: bool | None
    scaling: str
    factor: float | None
    notes: tuple[str, ...] = ()
    #: M-RoPE (vision-language configs): how the rotating pairs are split across the
    #: time, height and width position ids (``mrope_section``), and whether the three
    #: axes interleave pair by pair (``mrope_interleaved``, Qwen3-VL) or take blocks
    mrope_section: tuple[int, ...] | None = None
    mrope_interleaved: bool | None = None
    #: Layers with no attention at all (a recurrence or a convolution in a hybrid model):
    #: no positions to encode; not counted in ``layers`` or ``nope_layers``
    no_attention_layers: int = 0

    @property
    def global_rope(self) -> LayerRope:
        """The layer type that reaches furthest: global attention if any, else the first."""
        for layer in self.layers:
            if layer.window is None:
                return layer
        return self.layers[0]

    @property
    def training_length(self) -> int | None:
        """The config's training length: ``original_max_position_embeddings`` (the length
        the long-context rule starts from) if set, else ``max_position_embeddings``.

        This is what the config says, not always the pre-training context: Llama 4 Scout's
        8,192 is the ``llama3`` rule's original length, while Meta pre-trained it on longer
        sequences.
        """
        return self.original_max_position_embeddings or self.max_position_embeddings

    @property
    def reach(self) -> LayerRope:
        """The RoPE layer type that sees the furthest: a global one if any, else the one
        with the largest window or chunk."""
        for layer in self.layers:
            if layer.window is None:
                return layer
        return max(self.layers, key=lambda layer: layer.window or 0)

    def span(self, layer: LayerRope) -> int | None:
        """How many positions a query of ``layer`` can see: its sliding window or chunk,
        or the training length where that is shorter or the layer is global (None when
        the config gives neither).

        A causal sliding window of :math:`W` tokens (transformers: key :math:`j` is seen by
        query :math:`i` when :math:`i - W < j \\le i`) and a chunk of :math:`W` tokens
        (Llama 4: query and key in the same chunk) both bound the query-key offset by
        :math:`W - 1`; every layer's offsets are also bounded by the context, here the
        training length (Phi-3.5-mini's window of 262,144 tokens is longer than its 4,096).
        So the largest offset RoPE meets in this layer is ``span(layer) - 1``.
        """
        if self._bounded_by_window(layer):
            return layer.window
        return self.training_length

    def _bounded_by_window(self, layer: LayerRope) -> bool:
        if not isinstance(layer, LayerRope):
            raise TypeError(f"layer must be a LayerRope, got {type(layer).__name__}")
        length = self.training_length
        return layer.window is not None and (length is None or layer.window <= length)

    def span_kind(self, layer: LayerRope) -> str:
        """What bounds :meth:`span`: ``"window"``, ``"chunk"`` or ``"training length"``."""
        if not self._bounded_by_window(layer):
            return "training length"
        return "chunk" if layer.window_kind == "chunked" else "window"

    def wavelength_over_span(self, layer: LayerRope) -> float | None:
        """The slowest pair's wavelength as pretrained over :meth:`span` (None if unknown):
        above 1, that pair never completes a turn within the offsets the layer sees."""
        span = self.span(layer)
        return None if span is None else layer.longest_wavelength(scaled=False) / span

    def pattern(self) -> str:
        """The layers in words, e.g. ``"50 sliding(1024) + 10 global"``, ``"36 chunked(8192) + 12 NoPE"``."""
        parts = []
        for layer in self.layers:
            n = "" if layer.layers is None else f"{layer.layers} "
            kind = "global" if layer.window is None else f"{layer.window_kind}({layer.window})"
            parts.append(n + kind)
        if self.nope_layers:
            parts.append(f"{self.nope_layers} NoPE global")
        if self.no_attention_layers:
            parts.append(f"{self.no_attention_layers} without attention")
        return " + ".join(parts)

    def row(self) -> dict[str, Any]:
        """The atlas's columns for this model (plain Python values).

        ``span``, ``largest_offset``, ``longest_wavelength_over_span`` and
        ``pairs_turning`` are those of :attr:`reach`, the RoPE layer type that sees the
        furthest, measured against :meth:`span`: a sliding window, a chunk, or the training
        length.  ``longest_wavelength_pretrained`` is that layer type's slowest wavelength
        without the long-context rule, ``longest_wavelength_scaled`` with it (at the
        configured length).
        """
        g = self.global_rope
        length = self.training_length
        reach = self.reach
        span = self.span(reach)
        bases = " / ".join(f"{layer.rope_theta:g}" for layer in self.layers)
        return {
            "model": self.name,
            "rope_type": " / ".join(layer.rope_type for layer in self.layers),
            "base": bases,
            "rotated": f"{2 * g.rotated_pairs}/{g.head_dim}",
            "rotated_fraction": g.rotated_fraction,
            "layout": {True: "interleaved", False: "half", None: "-"}[self.interleaved],
            "scaling": self.scaling if self.factor is None else f"{self.scaling} x{self.factor:g}",
            "original_length": length,
            "max_length": self.max_position_embeddings,
            "layers": self.pattern(),
            "longest_wavelength_pretrained": reach.longest_wavelength(scaled=False),
            "longest_wavelength_scaled": reach.longest_wavelength(scaled=True),
            "span": span,
            "span_kind": self.span_kind(reach),
            "largest_offset": None if span is None else span - 1,
            "longest_wavelength_over_span": self.wavelength_over_span(reach),
            "pairs_turning": None if span is None else reach.pairs_turning_within(span),
            "pairs": reach.rotated_pairs,
            "head_pairs": reach.head_dim // 2,
            "attention_factor": g.attention_factor,
        }


# --------------------------------------------------------------------------------------
# Reading a config
# --------------------------------------------------------------------------------------


#: The largest value each integer key may take (larger ones are refused, named).
_INT_MAX = {
    "num_hidden_layers": 100_000, "head_dim": 1 << 16, "global_head_dim": 1 << 16,
    "qk_rope_head_dim": 1 << 16, "qk_nope_head_dim": 1 << 16, "hidden_size": 1 << 24,
    "num_attention_heads": 1 << 16, "no_rope_layer_interval": 100_000,
    "max_window_layers": 100_000, "sliding_window_pattern": 100_000,
}
_INT_MAX_DEFAULT = 1 << 53  # lengths: max_position_embeddings, sliding_window, ...


def _int(config, key, *, minimum=1, maximum=None):
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"config[{key!r}] must be an integer, got {_short(value)}")
    if value < minimum:
        raise ValueError(f"config[{key!r}] must be >= {minimum}, got {_short(value)}")
    top = maximum if maximum is not None else _INT_MAX.get(key, _INT_MAX_DEFAULT)
    if value > top:
        raise ValueError(f"config[{key!r}] must be <= {top:,}, got {_short(value)}")
    return int(value)


def _short(value, limit=60):
    """``repr`` cut to ``limit`` characters (a 400-digit number is not printed whole)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10 ** 40:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value) if not isinstance(value, (list, dict)) else type(value).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: Numeric keys of a rope dict and the rule each must follow.
_ROPE_REALS = ("rope_theta", "factor", "attention_factor", "beta_fast", "beta_slow", "mscale",
               "mscale_all_dim", "low_freq_factor", "high_freq_factor", "partial_rotary_factor")
_ROPE_LISTS = ("short_factor", "long_factor", "mrope_section")


def _real(value, where):
    """A finite float from a JSON number, errors naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where} must be a number, got {_short(value)}")
    try:
        out = float(value)
    except OverflowError:
        raise ValueError(f"{where} is too large to be a float: {_short(value)}") from None
    if not math.isfinite(out):
        raise ValueError(f"{where} must be finite, got {_short(value)}")
    return out


def _check_rope_dict(p, where):
    """Types and sizes of the values of one rope dict, before any arithmetic on them."""
    if "rope_theta" in p and p["rope_theta"] is None:
        raise TypeError(f"{where}['rope_theta'] must be a number, got None")
    for key in _ROPE_REALS:
        if p.get(key) is not None:
            _real(p[key], f"{where}[{key!r}]")
    prf = p.get("partial_rotary_factor")
    if prf is not None and not 0 < float(prf) <= 1:
        raise ValueError(f"{where}['partial_rotary_factor'] must be in (0, 1], got {_short(prf)}")
    omp = p.get("original_max_position_embeddings")
    if omp is not None:
        _int({"original_max_position_embeddings": omp}, "original_max_position_embeddings")
    for key in _ROPE_LISTS:
        value = p.get(key)
        if value is None:
            continue
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where}[{key!r}] must be a list of numbers, got {_short(value)}")
        if len(value) > 1 << 16:
            raise ValueError(f"{where}[{key!r}] has {len(value):,} entries (at most 65,536)")
        for v in value:
            _real(v, f"{where}[{key!r}] entries")
    if "rope_type" in p and not isinstance(p["rope_type"], str):
        raise TypeError(f"{where}['rope_type'] must be a str, got {_short(p['rope_type'])}")
    if p.get("type") is not None and not isinstance(p["type"], str):
        raise TypeError(f"{where}['type'] must be a str, got {_short(p['type'])}")


def _rope_parameters(config):
    """``rope_parameters`` (transformers 5) or the older ``rope_scaling`` + ``rope_theta``."""
    params = config.get("rope_parameters")
    if params is None:
        scaling = config.get("rope_scaling")
        if scaling is not None and not isinstance(scaling, Mapping):
            raise TypeError(f"config['rope_scaling'] must be a dict or null, got {_short(scaling)}")
        params = dict(scaling or {})
        if "rope_theta" not in params and config.get("rope_theta") is not None:
            params["rope_theta"] = config["rope_theta"]
        if not params:
            if config.get("rope_theta") is None:
                raise ValueError(
                    "config has no RoPE keys (rope_parameters, rope_scaling or rope_theta): "
                    "this reads RoPE models only"
                )
    elif not isinstance(params, Mapping):
        raise TypeError(f"config['rope_parameters'] must be a dict, got {type(params).__name__}")
    params = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in params.items()}
    prf = config.get("partial_rotary_factor")
    if prf is not None:  # a top-level partial_rotary_factor (GPT-NeoX, GLM, Phi)
        targets = params.values() if is_per_layer_type(params) else [params]
        for p in targets:
            if isinstance(p, dict):
                p.setdefault("partial_rotary_factor", prf)
    if prf is not None:
        _real(prf, "config['partial_rotary_factor']")
    nested = is_per_layer_type(params)
    for k, p in (params.items() if nested else [(None, params)]):
        if not isinstance(p, dict):
            continue
        where = "config['rope_parameters']" + ("" if k is None else f"[{k!r}]")
        _check_rope_dict(p, where)
        # transformers: rope_type wins over the old name type; M-RoPE ("mrope") is the
        # default rule with sections across time/height/width (VL configs)
        rope_type = p.get("rope_type", p.get("type", "default"))
        p.pop("type", None)
        p["rope_type"] = "default" if rope_type == "mrope" else rope_type
        # Multimodal keys that ride along in rope_parameters (M-RoPE sections): not frequencies
        for key in ("mrope_section", "mrope_interleaved"):
            p.pop(key, None)
    return params


def _mrope(config):
    """``mrope_section`` and ``mrope_interleaved`` from the rope dict, as transformers keeps
    them in ``rope_parameters`` (None, None when the config has no M-RoPE)."""
    params = config.get("rope_parameters")
    key = "rope_parameters"
    if params is None:
        params, key = config.get("rope_scaling"), "rope_scaling"
    if not isinstance(params, Mapping) or params.get("mrope_section") is None:
        return None, None
    section = params["mrope_section"]
    where = f"config[{key!r}]['mrope_section']"
    if not isinstance(section, (list, tuple)) or not section:
        raise TypeError(f"{where} must be a non-empty list of int, got {_short(section)}")
    if len(section) > 8:
        raise ValueError(f"{where} has {len(section):,} entries (one per position axis: at most 8)")
    for v in section:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise TypeError(f"{where} entries must be non-negative int, got {_short(v)}")
    inter = params.get("mrope_interleaved")
    if inter is not None and not isinstance(inter, bool):
        raise TypeError(f"config[{key!r}]['mrope_interleaved'] must be true/false, "
                        f"got {_short(inter)}")
    return tuple(int(v) for v in section), inter


def _layer_types(config, num_layers):
    types = config.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, (list, tuple)) or not all(isinstance(t, str) for t in types):
        raise TypeError("config['layer_types'] must be a list of str")
    types = list(types)
    if num_layers is not None and len(types) != num_layers:
        raise ValueError(
            f"config['layer_types'] has {len(types)} entries but num_hidden_layers is {num_layers}"
        )
    return types


def _rope_flags(config, num_layers):
    """Per layer: True if it uses RoPE (``no_rope_layers``: 1 = RoPE, as transformers)."""
    flags = config.get("no_rope_layers")
    if flags is None:
        interval = _int(config, "no_rope_layer_interval")
        if interval is None or num_layers is None:
            return None
        return [(i + 1) % interval != 0 for i in range(num_layers)]
    if not isinstance(flags, (list, tuple)) or not all(
        isinstance(f, (bool, int)) and f in (0, 1) for f in flags
    ):
        raise ValueError("config['no_rope_layers'] must be a list of 0/1 (1: the layer uses RoPE)")
    if num_layers is not None and len(flags) != num_layers:
        raise ValueError(
            f"config['no_rope_layers'] has {len(flags)} entries but num_hidden_layers is {num_layers}"
        )
    return [bool(f) for f in flags]


def describe_config(config: Mapping[str, Any], name: str | None = None) -> ModelDescription:
    """Describe the positions of a model from its Hugging Face ``config.json`` dict.

    Parameters
    ----------
    config : mapping
        The parsed ``config.json`` (a vision-language model's ``text_config`` is used
        when present).  Read: ``rope_parameters`` (or ``rope_scaling`` and
        ``rope_theta``), ``head_dim`` (or ``hidden_size / num_attention_heads``),
        ``partial_rotary_factor``, ``qk_rope_head_dim`` / ``qk_nope_head_dim`` (MLA),
        ``global_head_dim`` (Gemma 4's full layers), ``max_position_embeddings``,
        ``num_hidden_layers``, ``layer_types``, ``sliding_window``,
        ``attention_chunk_size``, ``no_rope_layers`` / ``no_rope_layer_interval``,
        ``rope_interleave``.
    name : str, optional
        A name for the model (default: ``config["_name_or_path"]``, else ``"model"``).

    Returns
    -------
    ModelDescription
        One :class:`LayerRope` per layer type that uses RoPE, the count of NoPE layers,
        the scaling rule and lengths; ``.row()`` gives the atlas's columns.

    Raises
    ------
    TypeError
        If ``config`` is not a mapping or a key has the wrong type (named).
    ValueError
        If the config is not a RoPE model (``position_embedding_type`` alibi/absolute,
        no RoPE keys), has no head width, its ``layer_types`` or ``no_rope_layers``
        do not match ``num_hidden_layers``, a layer type has no entry in per-layer-type
        ``rope_parameters``, or :func:`posenc.rope_frequencies` rejects its parameters.

    Examples
    --------
    >>> d = describe_config({"head_dim": 128, "max_position_embeddings": 32768,
    ...                      "rope_theta": 1e6}, name="Qwen2.5-like")
    >>> d.row()["pairs_turning"], d.row()["pairs"]   # pairs that turn within 32,768
    (40, 64)
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping (a parsed config.json), got {type(config).__name__}")
    if name is None:
        raw = config.get("_name_or_path")
        name = raw if isinstance(raw, str) and raw else "model"
    config, model_type = standardize(config)
    kind = config.get("position_embedding_type")
    if isinstance(kind, str) and kind in _NOT_ROPE:
        raise ValueError(
            f"config['position_embedding_type'] is {kind!r} ({_NOT_ROPE[kind]}): "
            "this reads RoPE models only"
        )
    if config.get("alibi") is True:
        raise ValueError("config['alibi'] is true (ALiBi, no rotation): this reads RoPE models only")

    num_layers = _int(config, "num_hidden_layers")
    if num_layers is None:  # the per-layer lists say how many layers there are
        for key in ("layer_types", "no_rope_layers"):
            value = config.get(key)
            if isinstance(value, (list, tuple)):
                num_layers = len(value)
                break
    max_len = _int(config, "max_position_embeddings")
    mrope_section, mrope_interleaved = _mrope(config)
    params = _rope_parameters(config)

    rope_head = _int(config, "qk_rope_head_dim")
    if rope_head is not None:  # MLA: a RoPE slice beside a no-RoPE slice
        nope_head = _int(config, "qk_nope_head_dim", minimum=0) or 0
        head_dim, rotated_width = rope_head + nope_head, rope_head
        head_key = "qk_rope_head_dim + qk_nope_head_dim"
    else:
        head_dim, head_key = _int(config, "head_dim"), "head_dim"
        if head_dim is None:
            hidden, heads = _int(config, "hidden_size"), _int(config, "num_attention_heads")
            if hidden is None or heads is None:
                raise ValueError(
                    "config needs head_dim, or hidden_size and num_attention_heads, "
                    "(or qk_rope_head_dim for MLA) to know the rotated width"
                )
            if hidden % heads:
                raise ValueError(
                    f"config['hidden_size'] ({hidden}) must be divisible by "
                    f"config['num_attention_heads'] ({heads}) when head_dim is absent"
                )
            head_dim, head_key = hidden // heads, "hidden_size // num_attention_heads"
        rotated_width = None
    global_head = _int(config, "global_head_dim")

    types = _layer_types(config, num_layers)
    rope_flags = _rope_flags(config, num_layers)
    nested = is_per_layer_type(params)
    if types is None:
        types = list(params) if nested and num_layers is None else None
    # count layers per (type, uses rope)
    n = num_layers if num_layers is not None else (len(types) if types else None)
    if types is None:
        types_per_layer = None if n is None else ["all"] * n
    else:
        types_per_layer = types
    nope = no_attention = 0
    counts: Counter[str] = Counter()
    attention_free = set(config.get("_no_attention") or ())
    if types_per_layer is not None:
        for i, t in enumerate(types_per_layer):
            if t in attention_free:
                no_attention += 1
            elif rope_flags is not None and not rope_flags[i]:
                nope += 1
            else:
                counts[t] += 1
    order = ([t for t in dict.fromkeys(types_per_layer) if t not in attention_free]
             if types_per_layer else (list(params) if nested else ["all"]))
    window = _int(config, "sliding_window")
    if config.get("use_sliding_window") is False:  # Qwen configs carry an unused window
        window = None
    chunk = _int(config, "attention_chunk_size")
    layers = []
    for t in order:
        if types_per_layer is not None and counts[t] == 0:
            continue
        if nested and t not in params:
            raise ValueError(
                f"layer type {t!r} (config['layer_types']) has no entry in config['rope_parameters'] "
                f"(its keys: {', '.join(map(repr, params))})"
            )
        p = params[t] if nested else params
        if p is None:
            nope += counts[t]
            continue
        use_global = global_head is not None and t == "full_attention"
        h, h_key = (global_head, "global_head_dim") if use_global else (head_dim, head_key)
        rope_type = p.get("rope_type", p.get("type", "default"))
        if rotated_width is not None:  # MLA: the factor applies to the RoPE slice
            dim = int(rotated_width * _real(p.get("partial_rotary_factor", 1.0),
                                            "config['partial_rotary_factor']"))
            if dim % 2:
                raise ValueError(
                    f"the rotated width int(qk_rope_head_dim * partial_rotary_factor) = {dim} "
                    f"must be even (qk_rope_head_dim {rotated_width}): RoPE turns pairs of "
                    "features; fix config['qk_rope_head_dim']"
                )
        elif rope_type == "proportional":
            dim = h
        else:
            dim = int(h * _real(p.get("partial_rotary_factor", 1.0),
                                "config['partial_rotary_factor']"))
            if dim % 2:
                raise ValueError(
                    f"the rotated width int({h_key} * partial_rotary_factor) = {dim} must be "
                    f"even ({h_key} {h})"
                )
        kwargs = {"max_position_embeddings": max_len, "seq_len": max_len}
        if nested:
            kwargs["layer_type"] = t
        try:
            inv, att = rope_frequencies(dim, params, **kwargs)
        except OverflowError as exc:
            raise ValueError(f"config['rope_parameters'] gives frequencies out of range: {exc}") from None
        theta = float(p.get("rope_theta", 10000.0))
        plain_params: dict[str, Any] = {"rope_theta": theta}
        if rope_type == "proportional":
            plain_params = {"rope_type": "proportional", "rope_theta": theta,
                            "partial_rotary_factor": p.get("partial_rotary_factor", 1.0)}
        plain, _ = rope_frequencies(dim, plain_params)
        sliding = t == "sliding_attention" or t in config.get("_sliding_types", ())
        if sliding or (t == "all" and window is not None and chunk is None):
            w, wk = window, "sliding" if window is not None else None
        elif chunk is not None and (t == "chunked_attention" or (
                t == "all" and rope_flags is not None)):
            w, wk = chunk, "chunked"
        else:
            w, wk = None, None
        flat = {k: v for k, v in p.items() if k != "type"}
        flat.update(rope_type=rope_type, rope_theta=theta)
        if rope_type != "proportional":
            flat.pop("partial_rotary_factor", None)  # the rotated width says it
        layers.append(LayerRope(
            layer_type=t, layers=counts[t] if types_per_layer is not None else None,
            head_dim=h, rope_type=rope_type, rope_theta=theta, inv_freq=inv,
            plain_inv_freq=plain, attention_factor=att,
            rotated_pairs=int(np.count_nonzero(inv)), window=w, window_kind=wk,
            rope_parameters=flat, rotary_dim=dim,
            rotary_slice="last" if rope_head is not None else "first" if dim < h else "all",
        ))
    if not layers:
        raise ValueError(f"config has no layer that uses RoPE ({nope} attention layers without "
                         f"it, {no_attention} layers without attention)")

    g_params = params[layers[0].layer_type] if nested else params
    for layer in layers:
        if layer.window is None and nested:
            g_params = params[layer.layer_type]
    rule = g_params.get("rope_type", g_params.get("type", "default"))
    factor = g_params.get("factor")
    if rule == "proportional" and factor is None:
        factor = None
    original = g_params.get("original_max_position_embeddings")
    interleave = config.get("rope_interleave", config.get("rope_interleaved"))
    if interleave is not None and not isinstance(interleave, bool):
        raise TypeError(f"config['rope_interleave'] must be true/false, got {_short(interleave)}")
    if interleave is None and model_type is not None:
        interleave = False  # the family's model file rotates halves (_families sets the others)
    notes: list[str] = []
    if model_type is not None:
        notes.insert(0, f"read as transformers 5.23 reads model_type {model_type!r}")
    else:
        notes.insert(0, "no model_type: keys read as written (absent rope_theta 10000, no "
                        "window); transformers 5.23's AutoConfig refuses such a file")
    for p in ([params[layer.layer_type] for layer in layers] if nested else [params]):
        if p["rope_type"] == "llama3" and p["low_freq_factor"] == p["high_freq_factor"]:
            step = (p.get("original_max_position_embeddings") or max_len) / p["low_freq_factor"]
            notes.append(f"llama3 with low_freq_factor = high_freq_factor: a step, pairs of "
                         f"wavelength above {step:,.0f} divided by the factor (transformers "
                         f"warns and computes the same)")
    if config.get("_query_scaling") is not None:
        notes.append(f"queries are scaled with position past the original length "
                     f"(rope_parameters['llama_4_scaling_beta'] = {config['_query_scaling']:g})")
    notes.extend(config.get("_notes") or ())
    if rope_head is not None:
        notes.append(f"MLA: {rope_head} of {head_dim} query/key features rotated")
    if any(layer.rope_type == "proportional" for layer in layers):
        notes.append("proportional: the unrotated pairs have frequency 0")
    if no_attention:
        notes.append(f"{no_attention} of {n} layers have no attention "
                     f"({', '.join(sorted(attention_free & set(types_per_layer or ())))}): "
                     "no positions")
    if mrope_section is not None:
        notes.append(f"M-RoPE: pairs split {list(mrope_section)} across time, height, width "
                     + ("(interleaved)" if mrope_interleaved else "(in blocks)"))
    return ModelDescription(
        name=name, layers=tuple(layers), nope_layers=nope, num_layers=n,
        max_position_embeddings=max_len,
        original_max_position_embeddings=None if original is None else int(original),
        interleaved=interleave, scaling="none" if rule in ("default", "proportional") else rule,
        factor=None if rule in ("default",) or factor is None else float(factor),
        notes=tuple(notes), mrope_section=mrope_section, mrope_interleaved=mrope_interleaved,
        no_attention_layers=no_attention,
    )


def llama4_attention_temperature(positions, floor_scale: float = 8192.0,
                                 attn_scale: float = 0.1) -> np.ndarray:
    r"""Llama 4's query temperature in its NoPE layers, one value per position.

    Meta's reference code (llama-models, ``models/llama4/model.py``) multiplies the
    query of each NoPE layer at position :math:`p` (counted from 0) by

    .. math:: \tau(p) = 1 + s\,\ln\bigl(\lfloor (p + 1) / F \rfloor + 1\bigr)

    with :math:`F` = ``floor_scale`` (8192) and :math:`s` = ``attn_scale`` (0.1), when
    ``attn_temperature_tuning`` is on.  It is exactly 1 for the first :math:`F - 1`
    positions and grows by steps of :math:`F` tokens, logarithmically.

    Parameters
    ----------
    positions : int or array_like of int
        Positions, ``>= 0``.
    floor_scale : float, optional
        :math:`F`, ``> 0``.
    attn_scale : float, optional
        :math:`s`, ``>= 0``.

    Returns
    -------
    numpy.ndarray
        float64, the shape of ``positions``.

    Raises
    ------
    TypeError
        If ``positions`` are not integers.
    ValueError
        If a position is negative, ``floor_scale <= 0`` or ``attn_scale < 0``.

    Examples
    --------
    >>> llama4_attention_temperature([0, 8190, 8191, 16382]).tolist()
    [1.0, 1.0, 1.0693147180559945, 1.0693147180559945]
    """
    p = np.asarray(positions)
    if p.dtype == bool or not np.issubdtype(p.dtype, np.integer):
        raise TypeError(f"positions must be integers, got dtype {p.dtype}")
    if p.size and p.min() < 0:
        raise ValueError(f"positions must be >= 0, got {int(p.min())}")
    for name, value, low in (("floor_scale", floor_scale, None), ("attn_scale", attn_scale, 0.0)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise TypeError(f"{name} must be a finite real number, got {value!r}")
    if floor_scale <= 0:
        raise ValueError(f"floor_scale must be > 0, got {floor_scale}")
    if attn_scale < 0:
        raise ValueError(f"attn_scale must be >= 0, got {attn_scale}")
    p = p.astype(np.float64)
    return np.log(np.floor((p + 1.0) / float(floor_scale)) + 1.0) * float(attn_scale) + 1.0


def logn_attention_scale(positions, training_length: int) -> np.ndarray:
    r"""Qwen's log-n query scale (``use_logn_attn``), one value per position.

    Qwen-7B's ``modeling_qwen.py`` multiplies the query at position :math:`p` (counted
    from 0) by

    .. math:: \lambda(p) = \max\bigl(1,\ \log_{L}(p + 1)\bigr)
              = \max\Bigl(1,\ \frac{\ln (p + 1)}{\ln L}\Bigr)

    with :math:`L` its ``seq_length``, the training length: 1 for the first :math:`L`
    positions, then growing like the logarithm of the number of tokens the query sees.
    The line it computes this with is
    ``math.log(i, self.seq_length) if i > self.seq_length else 1`` for ``i = p + 1``.

    Parameters
    ----------
    positions : int or array_like of int
        Positions, ``>= 0``.
    training_length : int
        :math:`L`, ``>= 2`` (the logarithm's base must exceed 1).

    Returns
    -------
    numpy.ndarray
        float64, the shape of ``positions``.

    Raises
    ------
    TypeError
        If ``positions`` or ``training_length`` are not integers.
    ValueError
        If a position is negative or ``training_length < 2``.

    Examples
    --------
    >>> logn_attention_scale([0, 2047, 2048, 4095, 8191], 2048).tolist()
    [1.0, 1.0, 1.0000640244555679, 1.0909090909090908, 1.1818181818181817]
    """
    p = np.asarray(positions)
    if p.dtype == bool or not np.issubdtype(p.dtype, np.integer):
        raise TypeError(f"positions must be integers, got dtype {p.dtype}")
    if p.size and p.min() < 0:
        raise ValueError(f"positions must be >= 0, got {int(p.min())}")
    if isinstance(training_length, bool) or not isinstance(training_length,
                                                           (numbers.Integral, np.integer)):
        raise TypeError(f"training_length must be an integer, got {training_length!r}")
    if training_length < 2:
        raise ValueError(f"training_length must be >= 2 (the base of a logarithm), "
                         f"got {training_length}")
    n = p.astype(np.float64) + 1.0
    return np.where(n > training_length, np.log(n) / math.log(int(training_length)), 1.0)


#: Limits of what load_config reads (published configs are a few kB, nested 3-4 deep).
_MAX_CONFIG_BYTES = 16 << 20
_MAX_DEPTH = 64


def _one_line(exc):
    return " ".join(str(exc).split())[:200]


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _depth(text):
    """How deep brackets nest in JSON text (outside strings), without recursion."""
    depth = top = 0
    for m in _JSON_TOKENS.finditer(text):
        ch = m.group()
        if ch in "[{":
            depth += 1
            if depth > top:
                top = depth
                if top > _MAX_DEPTH:
                    return top
        elif ch in "]}":
            depth -= 1
    return top


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a ``config.json`` file (or the one in a model's folder) into a dict, with
    errors that name the file."""
    path = Path(path)
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    try:
        with path.open("rb") as f:
            raw = f.read(_MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ValueError(f"config file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise ValueError(f"config path {str(path)!r} is a directory without a config.json; "
                         "pass the config.json or the model folder that holds it") from None
    if len(raw) > _MAX_CONFIG_BYTES:
        raise ValueError(f"config file {str(path)!r} is larger than {_MAX_CONFIG_BYTES:,} bytes "
                         "(a config.json is a few kilobytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"config file {str(path)!r} is not UTF-8 text: {exc}") from None
    if _depth(text) > _MAX_DEPTH:
        raise ValueError(f"config file {str(path)!r} nests JSON deeper than {_MAX_DEPTH} levels")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"config file {str(path)!r} is not valid JSON: {exc}") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more than 4,300 digits
        raise ValueError(f"config file {str(path)!r} cannot be read: {_one_line(exc)}") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"config file {str(path)!r} must hold a JSON object, got {type(data).__name__}"
        )
    return data


# --------------------------------------------------------------------------------------
# The atlas
# --------------------------------------------------------------------------------------


def atlas_names() -> list[str]:
    """The atlas's entries (file stems), sorted."""
    return sorted(p.stem for p in ATLAS_DIR.glob("*.json"))


def atlas_entry(slug: str) -> dict[str, Any]:
    """One atlas file as a dict: ``name``, ``config``, ``facts``, ``sources``, ``notes``."""
    if not isinstance(slug, str):
        raise TypeError(f"slug must be a str, got {type(slug).__name__}")
    path = ATLAS_DIR / f"{slug}.json"
    if not path.is_file():
        raise ValueError(f"slug must be one of {', '.join(atlas_names())}, got {slug!r}")
    return json.loads(path.read_text(encoding="utf-8"))


def atlas() -> list[ModelDescription]:
    """:func:`describe_config` of every atlas entry, in :func:`atlas_names` order."""
    out = []
    for slug in atlas_names():
        entry = atlas_entry(slug)
        out.append(describe_config(entry["config"], name=entry["name"]))
    return out


def _fmt_len(n):
    return "-" if n is None else f"{n:,}"


def _same_length(r):
    """Whether the scaled and the pretrained longest wavelength print alike."""
    return round(r["longest_wavelength_scaled"]) == round(r["longest_wavelength_pretrained"])


def _reach_kind(d: ModelDescription) -> str:
    """Which layers the "rotated" line counts (:attr:`ModelDescription.global_rope`): the
    global ones, else, where no global layer rotates, the first windowed type."""
    g = d.global_rope
    return "global" if g.window is None else str(g.window_kind)


def _reach_kind_zh(d: ModelDescription) -> str:
    """:func:`_reach_kind` in Chinese."""
    g = d.global_rope
    return "全局层" if g.window is None else _KINDS_ZH.get(str(g.window_kind), ("窗口层",))[0]


def format_description(d: ModelDescription, language: str | None = None) -> str:
    """A few lines of text for the terminal (what ``python -m posenc inspect`` prints).

    ``language`` (``"en"`` or ``"zh"``) defaults to the book's current language
    (:func:`posenc.figures.set_language`), so a Chinese page prints Chinese lines; the
    values (rope types, layouts, numbers) are the config's own and stay as they are.
    """
    from .._language import check_language, get_language

    lang = get_language() if language is None else check_language(language)
    if not isinstance(d, ModelDescription):
        raise TypeError(f"d must be a posenc.atlas.ModelDescription, got {type(d).__name__}")
    r = d.row()
    if lang == "zh":
        return _format_description_zh(d, r)
    lines = [
        f"{d.name}",
        f"  rope type         {r['rope_type']}    base {r['base']}",
        f"  rotated           {r['rotated']} features of the {_reach_kind(d)} layers "
        f"({r['rotated_fraction']:.0%}), layout {r['layout']}",
        f"  scaling           {r['scaling']}, attention factor {r['attention_factor']:.4g}",
        f"  lengths           original {_fmt_len(r['original_length'])}, "
        f"configured {_fmt_len(r['max_length'])}",
        f"  layers            {r['layers']}",
        f"  longest wavelength {r['longest_wavelength_pretrained']:,.0f} tokens as pretrained"
        + ("" if _same_length(r) else
           f", {r['longest_wavelength_scaled']:,.0f} with the {r['scaling']} rule"),
    ]
    if r["span"] is not None:
        lines.append(
            f"  largest offset    {r['largest_offset']:,} (bounded by the {r['span_kind']})"
        )
    if r["pairs_turning"] is not None:
        lines.append(
            f"  pairs turning     {r['pairs_turning']} of the {r['pairs']} rotating pairs complete "
            f"a turn within {r['span']:,} tokens"
        )
        if r["pairs"] < r["head_pairs"]:
            lines.append(
                f"  pairs rotating    {r['pairs']} of the head's {r['head_pairs']} pairs "
                f"({r['head_pairs'] - r['pairs']} carry no position)"
            )
    lines += [f"  note              {n}" for n in d.notes]
    return "\n".join(lines)


# The notes describe_config writes, in Chinese (a note not listed stays as written).
_NOTES_ZH = (
    (re.compile(r"no model_type: keys read as written \(absent rope_theta 10000, no window\); "
                r"transformers 5\.23's AutoConfig refuses such a file"),
     "没有 model_type：各键按原样读取（缺省的 rope_theta 取 10000，无窗口）；"
     "transformers 5.23 的 AutoConfig 拒绝读取这样的文件"),
    (re.compile(r"llama3 with low_freq_factor = high_freq_factor: a step, pairs of wavelength "
                r"above ([\d,]+) divided by the factor \(transformers warns and computes the "
                r"same\)"),
     r"llama3 的 low_freq_factor 与 high_freq_factor 相等：缩放是一个阶跃，波长超过 \1 的"
     r"维度对除以缩放倍数（transformers 会警告，算出的结果相同）"),
    (re.compile(r"read as transformers 5\.23 reads model_type ('[^']*')"),
     r"按 transformers 5.23 读 model_type \1 的规则读取"),
    (re.compile(r"MLA: (\d+) of (\d+) query/key features rotated"),
     r"MLA：查询和键的 \2 维里有 \1 维参与旋转"),
    (re.compile(r"proportional: the unrotated pairs have frequency 0"),
     "proportional：不旋转的维度对频率为 0"),
    (re.compile(r"(\d+) of (\d+) layers have no attention \(([^)]*)\): no positions"),
     r"\2 层里有 \1 层没有注意力（\3）：不编码位置"),
    (re.compile(r"the indexer that picks each query's keys scores blocks of keys, mean-pooled "
                r"and rotated at each block's first position"),
     "为每个查询挑选键的索引器给键块打分：块内的键取平均，再按块首的位置旋转"),
    (re.compile(r"queries are scaled with position past the original length "
                r"\(rope_parameters\['llama_4_scaling_beta'\] = ([^)]*)\)"),
     r"超过原始长度后，查询按位置放大（rope_parameters['llama_4_scaling_beta'] = \1）"),
    (re.compile(r"the gated cross-attention blocks to the image features rotate nothing"),
     "对图像特征做门控交叉注意力的那些块不做任何旋转"),
    (re.compile(r"reference_sliding_attention layers keep every prompt token visible and "
                r"slide over the generated ones"),
     "reference_sliding_attention 层始终看得见提示里的每个词元，只对生成的词元滑动窗口"),
    (re.compile(r"the indexer that picks each query's keys rotates its features in halves; "
                r"the attention in neighbour pairs"),
     "为每个查询挑选键的索引器按前后两半旋转它的特征，注意力本身按相邻两维成对旋转"),
    (re.compile(r"queries and keys come from a causal convolution over the tokens \(CCA\) "
                r"before they are rotated"),
     "查询和键先经过一次沿词元的因果卷积（CCA）再旋转"),
    (re.compile(r"the layers without RoPE scale their queries by \(1 \+ \(position \+ 1\) / "
                r"(\d+)\) \*\* ([\d.]+)"),
     r"不用 RoPE 的层把查询乘以 (1 + (位置 + 1) / \1) ** \2"),
    (re.compile(r"M-RoPE: pairs split (\[[\d, ]*\]) across time, height, width \(interleaved\)"),
     r"M-RoPE：维度对按 \1 分给时间、高、宽三个轴（交错排列）"),
    (re.compile(r"M-RoPE: pairs split (\[[\d, ]*\]) across time, height, width \(in blocks\)"),
     r"M-RoPE：维度对按 \1 分给时间、高、宽三个轴（分段排列）"),
)
_KINDS_ZH = {"sliding": ("滑动窗口层", "窗口"), "chunked": ("分块注意力层", "块长")}
_SPAN_KIND_ZH = {"window": "滑动窗口", "chunk": "分块长度", "training length": "训练长度"}


def _layers_zh(d: ModelDescription) -> str:
    parts = []
    for layer in d.layers:
        n = "" if layer.layers is None else f"{layer.layers} 个"
        if layer.window is None:
            parts.append(n + "全局层")
        else:
            kind, size = _KINDS_ZH.get(str(layer.window_kind), (str(layer.window_kind), "窗口"))
            parts.append(f"{n}{kind}（{size} {layer.window}）")
    if d.nope_layers:
        parts.append(f"{d.nope_layers} 个 NoPE 全局层")
    if d.no_attention_layers:
        parts.append(f"{d.no_attention_layers} 个无注意力层")
    return " + ".join(parts)


def _format_description_zh(d: ModelDescription, r: dict[str, Any]) -> str:
    def line(name: str, value: str) -> str:
        width = sum(2 if "\u4e00" <= ch <= "\u9fff" else 1 for ch in name)
        return f"  {name}{' ' * (14 - width)}{value}"

    lines = [
        f"{d.name}",
        line("RoPE 类型", f"{r['rope_type']}    基数 {r['base']}"),
        line("参与旋转", f"{_reach_kind_zh(d)}每头 {r['rotated']} 维（{r['rotated_fraction']:.0%}），"
                     f"布局 {r['layout']}"),
        line("缩放", f"{r['scaling']}，注意力因子 {r['attention_factor']:.4g}"),
        line("长度", f"原始 {_fmt_len(r['original_length'])}，"
                   f"配置 {_fmt_len(r['max_length'])}"),
        line("层", _layers_zh(d)),
        line("最长波长", f"预训练时 {r['longest_wavelength_pretrained']:,.0f} 个词元"
                     + ("" if _same_length(r) else
                        f"，按 {r['scaling']} 规则缩放后 {r['longest_wavelength_scaled']:,.0f} 个")),
    ]
    if r["span"] is not None:
        bound = _SPAN_KIND_ZH.get(str(r["span_kind"]), str(r["span_kind"]))
        lines.append(line("最大偏移", f"{r['largest_offset']:,}（受{bound}限制）"))
    if r["pairs_turning"] is not None:
        lines.append(line("转满一圈", f"{r['span']:,} 个词元内，旋转的 {r['pairs']} 个维度对"
                                   f"里有 {r['pairs_turning']} 个转满一圈"))
        if r["pairs"] < r["head_pairs"]:
            lines.append(line("旋转的维度对", f"每头 {r['head_pairs']} 个维度对里有 {r['pairs']} 个"
                                         f"旋转（{r['head_pairs'] - r['pairs']} 个不带位置）"))
    for note in d.notes:
        for pattern, words in _NOTES_ZH:
            note = pattern.sub(words, note)
        lines.append(line("备注", note))
    return "\n".join(lines)
