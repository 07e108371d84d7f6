r"""RoPE past its training length: the frequency rules of every ``rope_type`` in transformers.

A model trained with RoPE on sequences of ``L`` tokens has only ever seen angles
:math:`m\theta_i` with :math:`0 \le m < L`.  To read longer sequences, the published
long-context methods change the inverse frequencies :math:`\theta_i` (and sometimes
multiply cos and sin by an *attention factor*).  Each method is a rule

.. math:: \theta_i' = \theta_i / s_i, \qquad \theta_i = \mathrm{base}^{-2i/d},

where :math:`s_i` is the scale applied to pair :math:`i` (1: untouched, ``factor``:
positions squeezed by ``factor``).  :func:`rope_frequencies` computes the rule named by
a Hugging Face ``rope_parameters`` dict (``config.rope_parameters``), so a model's config
can be passed straight in; it matches transformers 5.23.0's ``ROPE_INIT_FUNCTIONS``
within float32 rounding (transformers computes in float32, this module in float64).

The rules, one function each in :data:`ROPE_FREQUENCY_FUNCTIONS`:

.. table:: The frequency rule of each ``rope_type``
   :name: tbl-rope-scaling-rules

   ============ ===========================================================================
   rope_type    rule
   ============ ===========================================================================
   default      :math:`\theta_i = \mathrm{base}^{-2i/d}` (Su et al. 2021)
   linear       position interpolation, :math:`s_i = s` (Chen et al. 2023)
   dynamic      NTK-aware base change for the current length (bloc97, emozilla 2023)
   yarn         ramp between extrapolation and interpolation + temperature (Peng et al. 2023)
   longrope     one searched factor per pair, short/long sets (Ding et al. 2024)
   llama3       piecewise by wavelength: untouched / smooth / divided (Meta Llama 3.1)
   proportional partial rotary with the full head's spacing, zeros for the rest (Gemma 4)
   ============ ===========================================================================

``dim`` is the number of *rotated* features (``int(head_dim * partial_rotary_factor)``
in transformers' terms) for every type but ``"proportional"``: there the
``partial_rotary_factor`` key is accepted so that a config can be passed as is, and is
not applied again.  ``"proportional"`` is the exception, as in transformers: ``dim`` is
the whole head, and ``partial_rotary_factor`` picks how many of its pairs turn.

A config whose ``rope_parameters`` is keyed by layer type (Gemma 3 and 4:
``{"sliding_attention": {...}, "full_attention": {...}}``) is passed as is with
``layer_type=`` naming the entry to use.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from ._typing import FloatArray
from ._validation import check_base, check_bool, check_count, check_d_model, check_real
from .sinusoidal import inverse_frequencies

__all__ = ["rope_frequencies", "is_per_layer_type", "axial_frequencies", "ROPE_FREQUENCY_FUNCTIONS",
           "ROPE_TYPES"]

#: Keys every rope_type accepts (``type`` is the old name of ``rope_type``).
_COMMON_KEYS = frozenset({"rope_type", "type", "rope_theta", "partial_rotary_factor"})

#: The keys each rope_type reads, besides the common ones.
_TYPE_KEYS = {
    "default": frozenset(),
    "linear": frozenset({"factor"}),
    "dynamic": frozenset({"factor"}),
    "yarn": frozenset(
        {
            "factor",
            "original_max_position_embeddings",
            "attention_factor",
            "beta_fast",
            "beta_slow",
            "mscale",
            "mscale_all_dim",
            "truncate",
        }
    ),
    "longrope": frozenset(
        {
            "factor",
            "original_max_position_embeddings",
            "attention_factor",
            "short_factor",
            "long_factor",
        }
    ),
    "llama3": frozenset(
        {"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"}
    ),
    "proportional": frozenset({"factor"}),
}


# --------------------------------------------------------------------------------------
# Checks of single values (messages name the key)
# --------------------------------------------------------------------------------------


def _key(name):
    return f"rope_parameters[{name!r}]"


def _positive(params, name, default=None):
    """A finite real ``> 0`` from ``params[name]``; ``default`` when absent or None."""
    value = params.get(name)
    if value is None:
        return default
    value = check_real(value, _key(name))
    if value <= 0:
        raise ValueError(f"{_key(name)} must be > 0, got {value}")
    return value


def _nonnegative(params, name):
    value = params.get(name)
    if value is None:
        return None
    value = check_real(value, _key(name))
    if value < 0:
        raise ValueError(f"{_key(name)} must be >= 0, got {value}")
    return value


#: The longest context a ``factor`` may scale to: float64 counts positions exactly up to
#: :math:`2^{53}`, the bound ``posenc inspect`` puts on ``max_position_embeddings`` too.
_MAX_CONTEXT = 2 ** 53


def _bounded(factor, original):
    """``factor`` if the context it scales to (``factor * original``) is at most 2**53."""
    if factor * (1 if original is None else original) > _MAX_CONTEXT:
        length = "at least 1 token" if original is None else f"the original {original:,} tokens"
        raise ValueError(
            f"the context {_key('factor')} scales to (factor x {length}) must be at most "
            f"2**53 = {_MAX_CONTEXT:,} tokens, the longest whose positions float64 counts "
            f"exactly, got factor {factor:g}. "
            "Set factor to the extended context length over the original one."
        )
    return factor


def _required_factor(params, original=None):
    if params.get("factor") is None:
        raise ValueError(f"{_key('factor')} is required for rope_type {params['rope_type']!r}")
    return _bounded(_positive(params, "factor"), original)


def _original_length(params, max_position_embeddings):
    """``original_max_position_embeddings``, or ``max_position_embeddings`` as transformers."""
    value = params.get("original_max_position_embeddings")
    if value is None:
        if max_position_embeddings is None:
            raise ValueError(
                f"{_key('original_max_position_embeddings')} is required for rope_type "
                f"{params['rope_type']!r} (or pass max_position_embeddings, which "
                "transformers uses in its place)"
            )
        return max_position_embeddings
    return check_count(value, _key("original_max_position_embeddings"), minimum=1)


def _derived_factor(params, original, max_position_embeddings):
    """``factor``, or ``max_position_embeddings / original`` when absent (yarn, longrope)."""
    if params.get("factor") is not None:
        return _bounded(_positive(params, "factor"), original)
    if max_position_embeddings is None:
        raise ValueError(
            f"{_key('factor')} is required for rope_type {params['rope_type']!r} unless "
            "max_position_embeddings is given (factor = max_position_embeddings / "
            "original_max_position_embeddings)"
        )
    return max_position_embeddings / original


def _factor_list(params, name, dim):
    """``short_factor`` / ``long_factor``: ``dim // 2`` finite numbers ``> 0``."""
    value = params.get(name)
    if value is None:
        raise ValueError(f"{_key(name)} is required for rope_type 'longrope'")
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__"):
        raise TypeError(f"{_key(name)} must be a list of numbers, got {type(value).__name__}")
    if len(value) != dim // 2:
        raise ValueError(
            f"{_key(name)} must have dim // 2 = {dim // 2} entries (one per pair), "
            f"got {len(value)}"
        )
    for item in value:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (numbers.Real, np.number)):
            raise TypeError(f"{_key(name)} must contain real numbers, got {item!r}")
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{_key(name)} must contain finite numbers > 0")
    return arr


# --------------------------------------------------------------------------------------
# One function per rope_type: (dim, params, seq_len, max_position_embeddings) ->
# (inv_freq, attention_factor).  ``params`` has been checked for its keys by
# rope_frequencies; each function checks the values it reads.
# --------------------------------------------------------------------------------------


def _default(dim, params, seq_len, max_position_embeddings):
    r"""Plain RoPE: :math:`\theta_i = \mathrm{base}^{-2i/d}`, attention factor 1."""
    return inverse_frequencies(dim, params["rope_theta"]), 1.0


def _linear(dim, params, seq_len, max_position_embeddings):
    r"""Position interpolation: every pair divided by ``factor`` :math:`s`.

    .. math:: \theta_i' = \theta_i / s

    Rotating position :math:`m` by :math:`\theta_i / s` is rotating position :math:`m/s`
    by :math:`\theta_i`: positions ``0 .. sL`` are squeezed into the trained ``0 .. L``.
    """
    factor = _required_factor(params)
    return inverse_frequencies(dim, params["rope_theta"]) / factor, 1.0


def _dynamic(dim, params, seq_len, max_position_embeddings):
    r"""Dynamic NTK: a larger base, chosen for the current length.

    With :math:`L` = ``max_position_embeddings``, :math:`n = \max(\text{seq\_len}, L)`:

    .. math::

       b' = b\,\left(\frac{s\,n}{L} - (s - 1)\right)^{d/(d-2)}

    The exponent :math:`d/(d-2)` makes the lowest frequency
    :math:`b'^{-(d-2)/d} = b^{-(d-2)/d} / (sn/L - s + 1)` exactly interpolated, while pair
    0 (frequency 1) is not touched.  For :math:`n \le L` this is the default RoPE.
    """
    factor = _required_factor(params, max_position_embeddings)
    if max_position_embeddings is None:
        raise ValueError(
            "rope_type 'dynamic' needs max_position_embeddings (the length it rescales from)"
        )
    if dim < 4:
        raise ValueError(
            f"dim must be >= 4 for rope_type 'dynamic' (its exponent is dim / (dim - 2)), got {dim}"
        )
    n = max_position_embeddings if seq_len is None else max(seq_len, max_position_embeddings)
    ratio = factor * n / max_position_embeddings - (factor - 1)
    base = params["rope_theta"] * ratio ** (dim / (dim - 2))
    return inverse_frequencies(dim, base), 1.0


def _yarn_mscale(scale, mscale=1.0):
    """YaRN's ``0.1 * mscale * ln(scale) + 1`` (1 for ``scale <= 1``)."""
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def _yarn(dim, params, seq_len, max_position_embeddings):
    r"""YaRN: interpolate the long wavelengths, keep the short ones, ramp in between.

    With :math:`L` = ``original_max_position_embeddings`` and :math:`s` = ``factor``, the
    pair index at which the wavelength fits :math:`r` times into :math:`L` is

    .. math:: j(r) = \frac{d\,\ln\bigl(L / (2\pi r)\bigr)}{2\ln b},

    ``low = j(beta_fast)``, ``high = j(beta_slow)`` (floored / ceiled when ``truncate``,
    clipped to ``[0, d - 1]``), and with the ramp
    :math:`\gamma_i = \mathrm{clip}\bigl((i - \mathrm{low}) / (\mathrm{high} -
    \mathrm{low}), 0, 1\bigr)`:

    .. math:: \theta_i' = (1 - \gamma_i)\,\theta_i + \gamma_i\,\theta_i / s

    (pairs that turn more than ``beta_fast`` times in :math:`L` are kept, pairs that turn
    less than ``beta_slow`` times are divided by :math:`s`).  The attention factor is
    ``attention_factor`` if given, else :math:`0.1\ln s + 1`, or with DeepSeek's
    ``mscale`` and ``mscale_all_dim`` the ratio
    :math:`(0.1\,m\ln s + 1) / (0.1\,m_{all}\ln s + 1)`.
    """
    original = _original_length(params, max_position_embeddings)
    factor = _derived_factor(params, original, max_position_embeddings)
    beta_fast = _positive(params, "beta_fast", 32.0)
    beta_slow = _positive(params, "beta_slow", 1.0)
    if beta_fast < beta_slow:
        raise ValueError(
            f"{_key('beta_fast')} must be >= {_key('beta_slow')}, got {beta_fast} < {beta_slow}"
        )
    truncate = params.get("truncate", True)
    if truncate is None:
        truncate = True
    truncate = check_bool(truncate, _key("truncate"))
    attention_factor = _positive(params, "attention_factor")
    mscale = _nonnegative(params, "mscale")
    mscale_all_dim = _nonnegative(params, "mscale_all_dim")
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _yarn_mscale(factor)

    base = params["rope_theta"]

    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as transformers: avoid a zero-width ramp
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    theta = inverse_frequencies(dim, base)
    return (1.0 - ramp) * theta + ramp * theta / factor, float(attention_factor)


def _longrope(dim, params, seq_len, max_position_embeddings):
    r"""LongRoPE: one searched factor per pair, a short and a long set.

    .. math:: \theta_i' = \theta_i / \lambda_i

    with :math:`\lambda` = ``long_factor`` when ``seq_len`` exceeds
    ``original_max_position_embeddings`` :math:`L`, else ``short_factor``.  The attention
    factor is ``attention_factor`` if given, else
    :math:`\sqrt{1 + \ln s / \ln L}` for :math:`s` = ``factor`` :math:`> 1` (1 otherwise).
    """
    original = _original_length(params, max_position_embeddings)
    factor = _derived_factor(params, original, max_position_embeddings)
    short = _factor_list(params, "short_factor", dim)
    long = _factor_list(params, "long_factor", dim)
    attention_factor = _positive(params, "attention_factor")
    if attention_factor is None:
        if factor <= 1.0:
            attention_factor = 1.0
        elif original < 2:
            raise ValueError(
                f"{_key('original_max_position_embeddings')} must be >= 2 to derive the "
                f"attention factor sqrt(1 + ln(factor) / ln(original)), got {original}"
            )
        else:
            attention_factor = math.sqrt(1 + math.log(factor) / math.log(original))
    ext = long if seq_len is not None and seq_len > original else short
    return inverse_frequencies(dim, params["rope_theta"]) / ext, float(attention_factor)


def _llama3(dim, params, seq_len, max_position_embeddings):
    r"""Llama 3.1: piecewise by wavelength :math:`\lambda_i = 2\pi/\theta_i`.

    With :math:`L` = ``original_max_position_embeddings``, :math:`s` = ``factor``,
    :math:`\alpha` = ``low_freq_factor``, :math:`\beta` = ``high_freq_factor``:

    .. math::

       \theta_i' = \begin{cases}
       \theta_i & \lambda_i < L/\beta \\
       \theta_i / s & \lambda_i > L/\alpha \\
       (1 - \mu_i)\,\theta_i / s + \mu_i\,\theta_i,\;
       \mu_i = \dfrac{L/\lambda_i - \alpha}{\beta - \alpha} & \text{otherwise}
       \end{cases}

    The rule is continuous: :math:`\mu = 0` at :math:`\lambda = L/\alpha` and 1 at
    :math:`\lambda = L/\beta`.  With :math:`\alpha = \beta` the smooth band is empty
    and the rule is a step at :math:`\lambda = L/\alpha`: Llama 4 Scout ships
    ``factor`` 16 with both factors 1 (``models/llama4/args.py`` in meta-llama/llama-models),
    which transformers accepts with a warning.
    """
    original = _original_length(params, max_position_embeddings)
    factor = _required_factor(params, original)
    low_freq_factor = _positive(params, "low_freq_factor")
    high_freq_factor = _positive(params, "high_freq_factor")
    for name, value in (
        ("low_freq_factor", low_freq_factor),
        ("high_freq_factor", high_freq_factor),
    ):
        if value is None:
            raise ValueError(f"{_key(name)} is required for rope_type 'llama3'")
    if high_freq_factor < low_freq_factor:
        raise ValueError(
            f"{_key('high_freq_factor')} must be >= {_key('low_freq_factor')}, got "
            f"{high_freq_factor} < {low_freq_factor}"
        )
    theta = inverse_frequencies(dim, params["rope_theta"])
    wavelength = 2 * np.pi / theta
    out = np.where(wavelength > original / low_freq_factor, theta / factor, theta)
    if high_freq_factor == low_freq_factor:  # an empty band: a step (Llama 4 Scout)
        return out, 1.0
    mu = (original / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smooth = (1 - mu) * theta / factor + mu * theta
    medium = (wavelength >= original / high_freq_factor) & (
        wavelength <= original / low_freq_factor
    )
    return np.where(medium, smooth, out), 1.0


def _proportional(dim, params, seq_len, max_position_embeddings):
    r"""Proportional RoPE (Gemma 4's full-attention layers): a partial rotary that keeps
    the whole head's frequency spacing.

    With :math:`d` = ``dim`` the *whole* head, :math:`p` = ``partial_rotary_factor``
    (default 1) and :math:`r = \lfloor p d / 2 \rfloor` rotated pairs:

    .. math::

       \theta_i' = \begin{cases}
       \mathrm{base}^{-2i/d} / s & i < r \\
       0 & r \le i < d/2
       \end{cases}

    with :math:`s` = ``factor`` (default 1).  Unlike a partial rotary of width
    :math:`pd` (exponent :math:`2i/(pd)`, which spreads the same base over fewer pairs),
    the rotated pairs are the *fastest* :math:`r` pairs of a full-width RoPE, and the
    remaining pairs have frequency 0: they do not turn at all (no position information),
    while keeping cos/sin tables the width of the head.
    """
    factor = _bounded(_positive(params, "factor", 1.0), None)
    fraction = params.get("partial_rotary_factor")
    fraction = 1.0 if fraction is None else fraction
    rotated = int(fraction * dim // 2)  # transformers' int(rope_proportion * head_dim // 2)
    theta = params["rope_theta"] ** (-np.arange(0, 2 * rotated, 2, dtype=np.float64) / dim)
    inv_freq = np.zeros(dim // 2, dtype=np.float64)
    inv_freq[:rotated] = theta
    return inv_freq / factor, 1.0


class _Registry(Mapping):
    """A read-only mapping with a stable repr (no function addresses in the docs)."""

    def __init__(self, functions):
        self._functions = MappingProxyType(dict(functions))

    def __getitem__(self, key):
        return self._functions[key]

    def __iter__(self):
        return iter(self._functions)

    def __len__(self):
        return len(self._functions)

    def __repr__(self):
        return "{" + ", ".join(f"{k!r}: {v.__name__}" for k, v in self.items()) + "}"


#: The rule of each ``rope_type``, keyed like transformers' ``ROPE_INIT_FUNCTIONS``
#: (plus ``"default"``): ``f(dim, params, seq_len, max_position_embeddings) ->
#: (inv_freq, attention_factor)``.  Read-only.
ROPE_FREQUENCY_FUNCTIONS = _Registry(
    {
        "default": _default,
        "linear": _linear,
        "dynamic": _dynamic,
        "yarn": _yarn,
        "longrope": _longrope,
        "llama3": _llama3,
        "proportional": _proportional,
    }
)

#: The ``rope_type`` names :func:`rope_frequencies` accepts.
ROPE_TYPES = tuple(ROPE_FREQUENCY_FUNCTIONS)


def _rope_type(params):
    rope_type = params.get("rope_type")
    old = params.get("type")
    if rope_type is None:
        rope_type = "default" if old is None else old
    elif old is not None and old != rope_type:
        raise ValueError(
            f"rope_parameters['type'] ({old!r}) and rope_parameters['rope_type'] "
            f"({rope_type!r}) disagree"
        )
    if not isinstance(rope_type, str):
        raise TypeError(f"{_key('rope_type')} must be a str, got {type(rope_type).__name__}")
    if rope_type not in ROPE_FREQUENCY_FUNCTIONS:
        allowed = ", ".join(repr(t) for t in ROPE_TYPES)
        raise ValueError(f"{_key('rope_type')} must be one of {allowed}, got {rope_type!r}")
    return rope_type


def is_per_layer_type(rope_parameters: Mapping[str, Any]) -> bool:
    """Whether ``rope_parameters`` is keyed by layer type (every value a mapping or None).

    transformers writes Gemma 3/4-style configs as ``{"sliding_attention": {...},
    "full_attention": {...}}``; a flat dict has scalars (``rope_type``, ``rope_theta``)
    among its values.

    >>> is_per_layer_type({"rope_type": "default", "rope_theta": 1e4})
    False
    >>> is_per_layer_type({"full_attention": {"rope_type": "default"}, "sliding_attention": None})
    True
    """
    if not isinstance(rope_parameters, Mapping):
        raise TypeError(
            f"rope_parameters must be a mapping, got {type(rope_parameters).__name__}"
        )
    values = list(rope_parameters.values())
    return bool(values) and all(v is None or isinstance(v, Mapping) for v in values) and any(
        isinstance(v, Mapping) for v in values
    )


def _layer_entry(rope_parameters, layer_type):
    """The flat dict for ``layer_type`` from a (possibly per-layer-type) rope_parameters."""
    if layer_type is not None and not isinstance(layer_type, str):
        raise TypeError(f"layer_type must be a str or None, got {type(layer_type).__name__}")
    nested = is_per_layer_type(rope_parameters)
    if not nested:
        mixed = [k for k, v in rope_parameters.items() if isinstance(v, Mapping)]
        if mixed:
            raise ValueError(
                f"rope_parameters mixes per-layer-type entries ({', '.join(map(repr, mixed))}) "
                "with flat keys: either every value is a dict (keyed by layer type) or none is"
            )
        return rope_parameters
    types = ", ".join(repr(k) for k in rope_parameters)
    if layer_type is None:
        raise ValueError(
            f"rope_parameters is keyed by layer type ({types}): pass layer_type= one of them"
        )
    if layer_type not in rope_parameters:
        raise ValueError(f"layer_type must be one of {types}, got {layer_type!r}")
    entry = rope_parameters[layer_type]
    if entry is None:
        raise ValueError(
            f"rope_parameters[{layer_type!r}] is None: layer type {layer_type!r} has no RoPE"
        )
    for key in entry:
        if not isinstance(key, str):
            raise TypeError(f"rope_parameters[{layer_type!r}] keys must be str, got {key!r}")
    return entry


def rope_frequencies(dim: int, rope_parameters: Mapping[str, Any] | None = None, *,
                     seq_len: int | None = None, max_position_embeddings: int | None = None,
                     layer_type: str | None = None) -> tuple[FloatArray, float]:
    r"""Inverse frequencies and attention factor of RoPE for a transformers ``rope_parameters``.

    .. math::

       \theta_i' = \theta_i / s_i, \qquad \theta_i = \mathrm{base}^{-2i/d},
       \qquad i = 0, \ldots, d/2 - 1

    with the scale :math:`s_i` of each pair given by the rule of ``rope_type`` (see
    :data:`ROPE_FREQUENCY_FUNCTIONS` and the module docstring).  A model applies
    them like plain RoPE (pair :math:`i` at position :math:`m` turns by :math:`m\theta_i'`)
    and multiplies cos and sin by the attention factor, as transformers'
    ``LlamaRotaryEmbedding`` does.  Equal to transformers 5.23.0's
    ``ROPE_INIT_FUNCTIONS[rope_type]`` (``compute_default_rope_parameters`` for
    ``"default"``) within float32 rounding.

    Parameters
    ----------
    dim : int
        Number of rotated features (``int(head_dim * partial_rotary_factor)``), a positive
        even number; the result has ``dim // 2`` entries.  For ``"proportional"`` the
        whole head dimension (its pairs past ``partial_rotary_factor`` get frequency 0).
    rope_parameters : mapping or None, default None
        A dict in the format of transformers' ``config.rope_parameters``: ``rope_type``
        (or its old name ``type``; default ``"default"``) one of :data:`ROPE_TYPES`,
        ``rope_theta`` (default 10000.0) and that type's keys with transformers' names
        and defaults: ``factor``, ``original_max_position_embeddings``,
        ``attention_factor``, ``beta_fast`` (32), ``beta_slow`` (1), ``mscale``,
        ``mscale_all_dim``, ``truncate`` (True), ``low_freq_factor``,
        ``high_freq_factor``, ``short_factor``, ``long_factor``.  ``partial_rotary_factor``
        is accepted and ignored (``dim`` is already the rotated width), except by
        ``"proportional"``, which reads it (default 1).  ``None`` means default RoPE with
        base 10000.  A dict keyed by layer type (each value such a dict, or ``None`` for
        a layer type without RoPE) is accepted with ``layer_type``.
    seq_len : int or None, default None
        Current sequence length: ``"dynamic"`` rescales for it, ``"longrope"`` uses the
        long factors when it exceeds ``original_max_position_embeddings``.  Others ignore
        it.
    max_position_embeddings : int or None, default None
        The model's configured length (``config.max_position_embeddings``): required by
        ``"dynamic"``; ``"yarn"`` and ``"longrope"`` derive ``factor`` from it when
        ``factor`` is absent, and every scaled type uses it when
        ``original_max_position_embeddings`` is absent, as transformers does.
    layer_type : str or None, default None
        For ``rope_parameters`` keyed by layer type (``config.layer_types`` names such as
        ``"full_attention"``, ``"sliding_attention"``): the entry to use.  Required for
        such a dict; ignored for a flat one, which applies to every layer.

    Returns
    -------
    inv_freq : numpy.ndarray
        float64, shape ``(dim // 2,)``.
    attention_factor : float
        The multiplier for cos and sin (1.0 for types without one).

    Raises
    ------
    TypeError
        If ``dim``, ``seq_len`` or ``max_position_embeddings`` is not an integer,
        ``rope_parameters`` is not a mapping, or a value has the wrong type (the message
        names the key).
    ValueError
        If ``dim`` is odd or ``< 2``; ``rope_type`` is unknown; a key is not read by that
        ``rope_type``; a required key is missing; ``factor`` (or another scale) is
        ``<= 0`` or not finite; ``factor`` times the original length (1 for
        ``"linear"`` and ``"proportional"``) exceeds :math:`2^{53}`; ``rope_theta <= 1``; ``high_freq_factor <
        low_freq_factor``; ``beta_fast < beta_slow``; ``short_factor``/``long_factor``
        do not have ``dim // 2`` entries; ``"dynamic"`` without
        ``max_position_embeddings``; ``rope_parameters`` keyed by layer type without
        ``layer_type``, with a ``layer_type`` it lacks, or whose entry is ``None``.

    Examples
    --------
    >>> import numpy as np
    >>> inv, att = rope_frequencies(8)                     # plain RoPE, base 10000
    >>> inv
    array([1.   , 0.1  , 0.01 , 0.001])
    >>> inv, att = rope_frequencies(8, {"rope_type": "linear", "factor": 4.0})
    >>> inv, att
    (array([0.25   , 0.025  , 0.0025 , 0.00025]), 1.0)
    >>> llama31 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
    ...            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    ...            "original_max_position_embeddings": 8192}
    >>> inv, att = rope_frequencies(128, llama31)
    >>> scale = rope_frequencies(128, {"rope_theta": 500000.0})[0] / inv
    >>> float(scale[0]), float(scale[-1])                  # first pair kept, last one / 8
    (1.0, 8.0)
    >>> yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    >>> round(rope_frequencies(64, yarn)[1], 6)            # 0.1 ln 4 + 1
    1.138629
    >>> gemma4 = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    ...           "full_attention": {"rope_type": "proportional", "rope_theta": 1e6,
    ...                              "partial_rotary_factor": 0.25}}
    >>> inv, att = rope_frequencies(16, gemma4, layer_type="full_attention")
    >>> inv                              # 2 of 8 pairs turn, at 1e6 ** (-2i/16)
    array([1.        , 0.17782794, 0.        , 0.        , 0.        ,
           0.        , 0.        , 0.        ])
    """
    d = check_d_model(dim, "dim", even=True)
    if seq_len is not None:
        seq_len = check_count(seq_len, "seq_len", minimum=1)
    if max_position_embeddings is not None:
        max_position_embeddings = check_count(
            max_position_embeddings, "max_position_embeddings", minimum=1
        )
    if rope_parameters is None:
        rope_parameters = {}
    if not isinstance(rope_parameters, Mapping):
        raise TypeError(
            "rope_parameters must be a mapping (a transformers config.rope_parameters dict) "
            f"or None, got {type(rope_parameters).__name__}"
        )
    for key in rope_parameters:
        if not isinstance(key, str):
            raise TypeError(f"rope_parameters keys must be str, got {key!r}")
    rope_parameters = _layer_entry(rope_parameters, layer_type)
    rope_type = _rope_type(rope_parameters)
    unknown = set(rope_parameters) - _COMMON_KEYS - _TYPE_KEYS[rope_type]
    if unknown:
        allowed = ", ".join(sorted(_TYPE_KEYS[rope_type] | {"rope_type", "rope_theta"}))
        raise ValueError(
            f"rope_parameters key(s) {', '.join(repr(k) for k in sorted(unknown))} are not "
            f"read by rope_type {rope_type!r} (its keys: {allowed})"
        )
    params = dict(rope_parameters)
    params["rope_type"] = rope_type
    theta = params.get("rope_theta")
    params["rope_theta"] = 10000.0 if theta is None else check_base(theta, _key("rope_theta"))
    prf = params.get("partial_rotary_factor")
    if prf is not None:
        prf = check_real(prf, _key("partial_rotary_factor"))
        if not 0 < prf <= 1:
            raise ValueError(f"{_key('partial_rotary_factor')} must be in (0, 1], got {prf}")
    inv_freq, attention_factor = ROPE_FREQUENCY_FUNCTIONS[rope_type](
        d, params, seq_len, max_position_embeddings
    )
    return np.asarray(inv_freq, dtype=np.float64), float(attention_factor)


def axial_frequencies(head_dim: int, rope_parameters: Mapping[str, Any] | None = None
                      ) -> tuple[FloatArray, float]:
    r"""The frequencies of transformers' ``"axial"`` rope type (2-D RoPE of vision towers).

    transformers 5.23 lists ``"axial"`` among the rope types of ``RopeParameters`` but not
    in ``ROPE_INIT_FUNCTIONS``: the vision towers that use it (Qwen3-VL, GLM-4V and
    others, whose vision configs default to it) compute it in their own rotary module.
    With :math:`q = d/4` pairs per axis and base :math:`b`,

    .. math:: \omega_j = b^{-2j/(d/2)} = b^{-j/q}, \qquad j = 0, \dots, q - 1,

    the spatial RoPE of a head of :math:`d/2` features.  A patch at row :math:`h` and
    column :math:`w` turns the pairs :math:`(j, j + d/2)` of the head (the ``"half"``
    layout) by :math:`h\,\omega_j` for :math:`j < q` and by :math:`w\,\omega_{j-q}` for
    :math:`q \le j < 2q`; the whole head turns, no feature is left out.  This is
    :func:`posenc.apply_rope_2d` with ``layout="half"``, its ``cols`` argument given the
    rows :math:`h` and its ``rows`` argument the columns :math:`w` (posenc puts the
    column on the first quarter of the pairs).  The attention factor is 1.

    Parameters
    ----------
    head_dim : int
        The head width :math:`d`, a positive multiple of 4.
    rope_parameters : mapping, optional
        ``{"rope_type": "axial", "rope_theta": b}`` (``rope_theta`` defaults to 10000).

    Returns
    -------
    (numpy.ndarray, float)
        :math:`\omega` (float64, ``head_dim // 4`` values) and the attention factor 1.0.

    Raises
    ------
    TypeError
        If ``head_dim`` is not an integer or ``rope_parameters`` not a mapping.
    ValueError
        If ``head_dim`` is not a positive multiple of 4, ``rope_type`` is not
        ``"axial"``, or the base is not finite and > 1.

    Examples
    --------
    >>> omega, factor = axial_frequencies(16, {"rope_type": "axial", "rope_theta": 1e4})
    >>> omega.tolist(), factor
    ([1.0, 0.1, 0.01, 0.001], 1.0)
    """
    d = check_d_model(head_dim, "head_dim")
    if d % 4:
        raise ValueError(f"head_dim must be a positive multiple of 4 (half the head "
                         f"turns with the rows, half with the columns), got {d}")
    params: Mapping[str, Any] = {} if rope_parameters is None else rope_parameters
    if not isinstance(params, Mapping):
        raise TypeError(f"rope_parameters must be a mapping, got {type(params).__name__}")
    rope_type = params.get("rope_type", "axial")
    if rope_type != "axial":
        raise ValueError(f"rope_parameters['rope_type'] must be 'axial', got {rope_type!r}")
    base = check_base(params.get("rope_theta", 10000.0))
    return inverse_frequencies(d // 2, base), 1.0
