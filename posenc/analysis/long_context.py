r"""Measurements for the long-context chapter: what each RoPE scaling rule does to each pair.

Everything is computed from :func:`posenc.rope_frequencies` (the frequencies a model
uses) and the RoPE functions of :mod:`posenc`; nothing here is needed by a model.

:data:`PUBLISHED_ROPE_PARAMETERS` holds the ``rope_parameters`` of released models, as
their ``config.json`` files on the Hugging Face Hub give them (with the model's rotated
width and configured length), for the chapter and the tests.
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_base, check_count, check_d_model, check_real
from ..rope import rotate_pairs
from ..rope_scaling import rope_frequencies
from ..sinusoidal import inverse_frequencies
from .attention import softmax
from ._memo import memoize


__all__ = [
    "PUBLISHED_ROPE_PARAMETERS",
    "pair_scales",
    "critical_dimension",
    "angle_reach",
    "rotate_with",
    "aligned_score_curve",
    "fitted_score_extrapolation",
    "neighbour_score_step",
    "softmax_entropy",
    "yarn_regions",
    "entropy_matching_spread",
    "dsa_index_scores",
]

# Phi-3 128k (the longrope factors of microsoft/Phi-3-vision-128k-instruct, whose language
# model is a Phi-3 128k: 32 heads of 96, original 4096, max 131072).
_PHI3_128K_LONG = [
    1.0299999713897705, 1.0499999523162842, 1.0499999523162842, 1.0799999237060547,
    1.2299998998641968, 1.2299998998641968, 1.2999999523162842, 1.4499999284744263,
    1.5999999046325684, 1.6499998569488525, 1.8999998569488525, 2.859999895095825,
    3.68999981880188, 5.419999599456787, 5.489999771118164, 5.489999771118164,
    9.09000015258789, 11.579999923706055, 15.65999984741211, 15.769999504089355,
    15.789999961853027, 18.360000610351562, 21.989999771118164, 23.079999923706055,
    30.009998321533203, 32.35000228881836, 32.590003967285156, 35.56000518798828,
    39.95000457763672, 53.840003967285156, 56.20000457763672, 57.95000457763672,
    59.29000473022461, 59.77000427246094, 59.920005798339844, 61.190006256103516,
    61.96000671386719, 62.50000762939453, 63.3700065612793, 63.48000717163086,
    63.48000717163086, 63.66000747680664, 63.850006103515625, 64.08000946044922,
    64.760009765625, 64.80001068115234, 64.81001281738281, 64.81001281738281,
]
_PHI3_128K_SHORT = [
    1.05, 1.05, 1.05, 1.1, 1.1, 1.1, 1.2500000000000002, 1.2500000000000002,
    1.4000000000000004, 1.4500000000000004, 1.5500000000000005, 1.8500000000000008,
    1.9000000000000008, 2.000000000000001, 2.000000000000001, 2.000000000000001,
    2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
    2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
    2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
    2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
    2.1000000000000005, 2.1000000000000005, 2.2, 2.3499999999999996,
    2.3499999999999996, 2.3499999999999996, 2.3499999999999996, 2.3999999999999995,
    2.3999999999999995, 2.6499999999999986, 2.6999999999999984, 2.8999999999999977,
    2.9499999999999975, 3.049999999999997, 3.049999999999997, 3.049999999999997,
]
_PHI35_MINI_LONG = [
    1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601,
    1.5899999141693115, 1.600000023841858, 1.6200000047683716, 2.620000123977661,
    3.2300000190734863, 3.2300000190734863, 4.789999961853027, 7.400000095367432,
    7.700000286102295, 9.09000015258789, 12.199999809265137, 17.670000076293945,
    24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523,
    32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992,
    50.340003967285156, 50.45000457763672, 57.55000305175781, 57.93000411987305,
    58.21000289916992, 60.1400032043457, 62.61000442504883, 62.62000274658203,
    62.71000289916992, 63.1400032043457, 63.1400032043457, 63.77000427246094,
    63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688,
    64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938,
    64.4800033569336, 64.51000213623047, 64.52999877929688, 64.83999633789062,
]
_PHI35_MINI_SHORT = [
    1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842,
    1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842,
    1.0699999332427979, 1.0999999046325684, 1.1099998950958252, 1.1599998474121094,
    1.1599998474121094, 1.1699998378753662, 1.2899998426437378, 1.339999794960022,
    1.679999828338623, 1.7899998426437378, 1.8199998140335083, 1.8499997854232788,
    1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745,
    2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346,
    2.0199997425079346, 2.0199997425079346, 2.0299997329711914, 2.0299997329711914,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914,
    2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0799996852874756,
    2.0899996757507324, 2.189999580383301, 2.2199995517730713, 2.5899994373321533,
    2.729999542236328, 2.749999523162842, 2.8399994373321533,
]

#: ``rope_parameters`` of released models: ``name -> (dim, max_position_embeddings,
#: rope_parameters)``, with ``dim`` the rotated width of one head.  Keys as in the
#: models' ``config.json`` (old configs say ``type``; top-level ``rope_theta`` and
#: ``original_max_position_embeddings`` moved in, as transformers' config does).
PUBLISHED_ROPE_PARAMETERS = {
    "Llama 3.1": (
        128,
        131072,
        {
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    ),
    "Llama 3.2": (
        64,
        131072,
        {
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    ),
    "Qwen2.5 (yarn)": (
        128,
        32768,
        {
            "type": "yarn",
            "rope_theta": 1000000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
        },
    ),
    "DeepSeek-V3": (
        64,
        163840,
        {
            "type": "yarn",
            "rope_theta": 10000.0,
            "factor": 40,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "beta_fast": 32,
            "beta_slow": 1,
            "original_max_position_embeddings": 4096,
        },
    ),
    "gpt-oss": (
        64,
        131072,
        {
            "rope_type": "yarn",
            "rope_theta": 150000.0,
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
        },
    ),
    "Kimi K2": (
        64,
        131072,
        {
            "type": "yarn",
            "rope_theta": 50000.0,
            "factor": 32.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "beta_fast": 1.0,
            "beta_slow": 1.0,
            "original_max_position_embeddings": 4096,
        },
    ),
    "Phi-3 128k": (
        96,
        131072,
        {
            "type": "longrope",
            "rope_theta": 10000.0,
            "long_factor": _PHI3_128K_LONG,
            "short_factor": _PHI3_128K_SHORT,
            "original_max_position_embeddings": 4096,
        },
    ),
    "Phi-3.5-mini": (
        96,
        131072,
        {
            "type": "longrope",
            "rope_theta": 10000.0,
            "long_factor": _PHI35_MINI_LONG,
            "short_factor": _PHI35_MINI_SHORT,
            "original_max_position_embeddings": 4096,
        },
    ),
}


def _inv_freq(inv_freq, name="inv_freq"):
    arr = np.asarray(inv_freq, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must hold finite numbers > 0")
    return arr


def pair_scales(dim, rope_parameters=None, **kwargs):
    r"""Wavelength of each pair before scaling, and the scale a rule applies to it.

    .. math:: \lambda_i = 2\pi / \theta_i, \qquad s_i = \theta_i / \theta_i'

    with :math:`\theta_i` plain RoPE at the same ``rope_theta`` and :math:`\theta_i'` from
    :func:`posenc.rope_frequencies` (``kwargs`` are passed on to it).

    Returns
    -------
    wavelength, scale : numpy.ndarray
        float64, shape ``(dim // 2,)``.

    Raises
    ------
    TypeError, ValueError
        As :func:`posenc.rope_frequencies`.

    Examples
    --------
    >>> lam, s = pair_scales(4, {"rope_type": "linear", "factor": 4.0})
    >>> s
    array([4., 4.])
    """
    inv, _ = rope_frequencies(dim, rope_parameters, **kwargs)
    base = (rope_parameters or {}).get("rope_theta") or 10000.0
    plain = inverse_frequencies(dim, base)
    return 2 * np.pi / plain, plain / inv


def critical_dimension(dim, base, length):
    r"""Liu et al.'s critical dimension: the features whose pairs turn fully within ``length``.

    .. math:: d_{\mathrm{extra}} = 2\left\lceil \frac{d}{2}\log_b \frac{L}{2\pi}\right\rceil

    (clipped to ``[0, d]``): pairs ``0 .. d_extra/2 - 1`` have a wavelength of at most
    ``length`` and see every angle in training; the pairs beyond do not.

    Examples
    --------
    >>> critical_dimension(128, 10000.0, 4096)     # LLaMA 2: 46 of 64 pairs
    92
    """
    d = check_d_model(dim, "dim", even=True)
    b = check_base(base)
    n = check_count(length, "length", minimum=1)
    value = 2 * math.ceil(d / 2 * math.log(n / (2 * math.pi)) / math.log(b))
    return int(min(max(value, 0), d))


def angle_reach(inv_freq, trained_inv_freq, trained_length, length):
    r"""Largest angle of each pair at ``length``, relative to the largest angle trained.

    .. math:: \rho_i = \frac{(n - 1)\,\theta_i'}{(L - 1)\,\theta_i}

    for the pairs whose trained arc :math:`(L-1)\theta_i` is shorter than a full turn;
    pairs that turned fully in training have seen every angle and get 1.  :math:`\rho_i
    > 1` means pair ``i`` meets angles it never saw.

    Examples
    --------
    >>> theta = np.array([1.0, 1e-3])
    >>> angle_reach(theta, theta, 1001, 4001)       # fast pair: seen all; slow: 4x
    array([1., 4.])
    >>> angle_reach(theta / 4, theta, 1001, 4001)   # position interpolation
    array([1., 1.])
    """
    new = _inv_freq(inv_freq)
    old = _inv_freq(trained_inv_freq, "trained_inv_freq")
    if new.shape != old.shape:
        raise ValueError("inv_freq and trained_inv_freq must have the same shape")
    L = check_count(trained_length, "trained_length", minimum=2)
    n = check_count(length, "length", minimum=1)
    trained = (L - 1) * old
    reach = (n - 1) * new / trained
    return np.where(trained >= 2 * np.pi, np.minimum(reach, 1.0), reach)


def rotate_with(x, positions, inv_freq, attention_factor=1.0, *, layout="interleaved"):
    r"""Rotate ``x`` like RoPE with given inverse frequencies, times the attention factor.

    .. math:: x_m' = a\,R(m\boldsymbol\theta')\,x_m

    (:func:`posenc.rotate_pairs` with angles :math:`m\theta_i'` formed in float64); this is
    what a model with ``rope_parameters`` does to its queries and keys.

    Examples
    --------
    >>> rotate_with(np.array([[1.0, 0.0]]), [2], [np.pi / 4]).round(12)
    array([[0., 1.]])
    """
    inv = _inv_freq(inv_freq)
    a = check_real(attention_factor, "attention_factor")
    pos = np.asarray(positions)
    if pos.ndim != 1 or (pos.size and not np.issubdtype(pos.dtype, np.integer)):
        raise ValueError("positions must be a 1-D array of integers")
    angles = pos.astype(np.float64)[:, None] * inv[None, :]
    return a * rotate_pairs(x, angles, layout=layout)


@memoize
def aligned_score_curve(inv_freq, offsets, attention_factor=1.0):
    r"""Score of a query with itself at each offset, pairs of equal weight, score(0) = 1.

    .. math:: c(r) = \frac{a^2}{d/2}\sum_i \cos(r\,\theta_i')

    the expected score of a random query :math:`q` against the key :math:`k = q` placed
    ``r`` positions away (each pair contributes :math:`|q_i|^2\cos(r\theta_i')`).

    Examples
    --------
    >>> aligned_score_curve([1.0, 0.5], [0, 2]).round(4)
    array([1.    , 0.0621])
    """
    inv = _inv_freq(inv_freq)
    a = check_real(attention_factor, "attention_factor")
    r = np.asarray(offsets, dtype=np.float64)
    return a * a * np.cos(r[:, None] * inv[None, :]).mean(axis=1)


def fitted_score_extrapolation(dim, base, length, factor, *, seed=0, rcond=1e-8):
    r"""Chen et al.'s argument, measured: a score fitted on ``[0, L)`` beyond ``L``.

    A RoPE score as a function of the offset is :math:`a(r) = \sum_i (u_i\cos r\theta_i
    + v_i \sin r\theta_i)`.  Fit :math:`u, v` by least squares to random targets in
    ``[-1, 1]`` at the integer offsets ``0 .. L-1`` (singular values below ``rcond``
    times the largest are dropped; the slow pairs make the problem ill-conditioned, and
    how far the curve runs away beyond ``L`` depends on this choice, not whether it
    does), then evaluate it at ``factor * L`` integer offsets (extrapolation) and at the
    offsets ``r / factor`` (interpolation).

    Returns
    -------
    dict
        ``"trained"``, ``"extrapolated"``, ``"interpolated"``: the largest ``|a|`` on each
        range; ``"offsets"``, ``"extrapolated_curve"``, ``"interpolated_curve"``: the
        curves at ``0 .. factor * L - 1``.

    Examples
    --------
    >>> out = fitted_score_extrapolation(16, 10000.0, 64, 2)
    >>> bool(out["extrapolated"] > out["interpolated"])
    True
    """
    d = check_d_model(dim, "dim", even=True)
    b = check_base(base)
    L = check_count(length, "length", minimum=2)
    s = check_count(factor, "factor", minimum=1)
    theta = inverse_frequencies(d, b)
    rng = np.random.default_rng(seed)
    target = rng.uniform(-1.0, 1.0, size=L)

    def design(r):
        ang = np.asarray(r, dtype=np.float64)[:, None] * theta[None, :]
        return np.concatenate([np.cos(ang), np.sin(ang)], axis=1)

    rc = check_real(rcond, "rcond")
    coef, *_ = np.linalg.lstsq(design(np.arange(L)), target, rcond=rc)
    offsets = np.arange(s * L)
    extra = design(offsets) @ coef
    inter = design(offsets / s) @ coef
    return {
        "trained": float(np.abs(extra[:L]).max()),
        "extrapolated": float(np.abs(extra[L:]).max()) if s > 1 else 0.0,
        "interpolated": float(np.abs(inter).max()),
        "offsets": offsets,
        "extrapolated_curve": extra,
        "interpolated_curve": inter,
    }


def neighbour_score_step(inv_freq, length, *, n_vectors=64, seed=0, attention_factor=1.0):
    r"""Mean change of a score when the offset changes by one token, over ``0 .. L-1``.

    .. math:: \Delta = \operatorname{mean}_{q, r}\,
       \bigl|\,q^\top R_{r+1} q - q^\top R_r q\,\bigr| / \|q\|^2

    for random Gaussian queries :math:`q` of width ``2 * len(inv_freq)``: how sharply
    scores tell neighbours apart (position interpolation divides it by about the factor).

    Examples
    --------
    >>> a = neighbour_score_step([1.0, 0.1], 100)
    >>> b = neighbour_score_step([0.25, 0.025], 100)
    >>> bool(3 < a / b < 5)
    True
    """
    inv = _inv_freq(inv_freq)
    L = check_count(length, "length", minimum=2)
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n_vectors, 2 * inv.size))
    weight = (q[:, 0::2] ** 2 + q[:, 1::2] ** 2) / (q**2).sum(axis=1, keepdims=True)
    c = np.cos(np.arange(L + 1, dtype=np.float64)[:, None] * inv[None, :])  # (L+1, d/2)
    scores = weight @ c.T  # q^T R_r q / |q|^2 = sum_i w_i cos(r theta_i)
    a = check_real(attention_factor, "attention_factor")
    return float(a * a * np.abs(np.diff(scores, axis=1)).mean())


@memoize
def softmax_entropy(logits, axis=-1):
    r"""Entropy (nats) of ``softmax(logits)``: :math:`H = -\sum_j p_j \ln p_j`.

    Examples
    --------
    >>> round(softmax_entropy(np.zeros(8)), 6)        # uniform over 8: ln 8
    2.079442
    """
    p = softmax(logits, axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log(p), 0.0)
    out = terms.sum(axis=axis)
    return float(out) if np.ndim(out) == 0 else out


def yarn_regions(dim, rope_parameters, **kwargs):
    r"""How many pairs a YaRN rule extrapolates, interpolates and blends.

    From the frequencies :func:`posenc.rope_frequencies` computes (the authors' code, as
    `transformers` runs it): a pair is *extrapolated* when its scale
    :math:`s_i = \theta_i / \theta_i'` is 1 (left alone), *interpolated* when it is the
    full ``factor`` (divided like position interpolation), and *blended* otherwise (on
    the ramp).

    Parameters
    ----------
    dim : int
        Rotated width (even).
    rope_parameters : dict
        A ``yarn`` rule with its ``factor``; ``kwargs`` are passed on to
        :func:`posenc.rope_frequencies`.

    Returns
    -------
    dict
        ``extrapolated``, ``blended``, ``interpolated`` (ints summing to ``dim // 2``)
        and ``attention_factor`` (float).

    Raises
    ------
    TypeError
        If ``rope_parameters`` is not a dict.
    ValueError
        If its ``rope_type`` is not ``yarn`` or it has no ``factor``; otherwise as
        :func:`posenc.rope_frequencies`.

    Examples
    --------
    >>> r = yarn_regions(128, {"rope_type": "yarn", "factor": 8.0,
    ...                        "original_max_position_embeddings": 4096})
    >>> r["extrapolated"], r["blended"], r["interpolated"], round(r["attention_factor"], 4)
    (21, 25, 18, 1.2079)
    """
    if not isinstance(rope_parameters, dict):
        raise TypeError(f"rope_parameters must be a dict, got {type(rope_parameters).__name__}")
    rope_type = rope_parameters.get("rope_type", rope_parameters.get("type"))
    if rope_type != "yarn":
        raise ValueError(f"rope_parameters['rope_type'] must be 'yarn', got {rope_type!r}")
    if rope_parameters.get("factor") is None:
        raise ValueError("rope_parameters['factor'] is required")
    _, attention_factor = rope_frequencies(dim, rope_parameters, **kwargs)
    _, scale = pair_scales(dim, rope_parameters, **kwargs)
    factor = float(rope_parameters["factor"])
    kept = np.isclose(scale, 1.0, rtol=1e-12, atol=0.0)
    divided = np.isclose(scale, factor, rtol=1e-12, atol=0.0) & ~kept
    return {"extrapolated": int(kept.sum()),
            "blended": int((~kept & ~divided).sum()),
            "interpolated": int(divided.sum()),
            "attention_factor": float(attention_factor)}


def entropy_matching_spread(factor, attention_factor=None):
    """The logit spread at which YaRN's factor cancels the entropy rise from ``L`` to
    ``s * L`` keys.

    For ``n`` Gaussian logits of spread ``sigma`` the entropy of the softmax tends to
    ``ln(n) - sigma**2 / 2`` as ``n`` grows.  Going from ``L`` to ``s * L`` keys adds
    ``ln(s)``; multiplying the logits by ``a**2`` (the factor ``a`` on query and key)
    removes ``(a**4 - 1) * sigma**2 / 2``.  The two cancel at
    ``sigma* = sqrt(2 * ln(s) / (a**4 - 1))``, with ``a = 0.1 * ln(s) + 1`` by default,
    which tends to ``sqrt(5)`` as ``s`` tends to 1 (the long-context chapter derives
    it with typeset mathematics).

    Raises
    ------
    TypeError
        If ``factor`` or ``attention_factor`` is not a real number.
    ValueError
        If ``factor`` <= 1 or ``attention_factor`` <= 1.

    Examples
    --------
    >>> round(entropy_matching_spread(8.0), 4)
    1.9192
    """
    s = check_real(factor, "factor")
    if s <= 1:
        raise ValueError(f"factor must be > 1, got {factor!r}")
    if attention_factor is None:
        a = 0.1 * math.log(s) + 1.0
    else:
        a = check_real(attention_factor, "attention_factor")
        if a <= 1:
            raise ValueError(f"attention_factor must be > 1, got {attention_factor!r}")
    return math.sqrt(2 * math.log(s) / (a**4 - 1))


def dsa_index_scores(queries, keys, weights, inv_freq, *, layout="half"):
    r"""The lightning indexer of DeepSeek Sparse Attention: how much query :math:`t`
    wants key :math:`s`,

    .. math:: I_{t,s} = \sum_h w_{t,h}\,\mathrm{ReLU}\!\left(
              \frac{\mathbf q_{t,h}^\top \mathbf k_s}{\sqrt D}\right),

    after RoPE turns the first ``2 * len(inv_freq)`` features of each indexer query and
    key (positions ``0, 1, ...``; the rest stay unrotated). ``-inf`` for ``s > t``: the
    indexer is causal. Attention then keeps, per query, the keys of the largest scores.

    Parameters
    ----------
    queries : array, shape (heads, n, D)
        The indexer's queries, one per head and token.
    keys : array, shape (n, D)
        Its keys: one per token, shared by every head.
    weights : array, shape (n, heads)
        The per-token weight of each head.
    inv_freq : array
        Frequencies of the rotated pairs (:func:`posenc.rope_frequencies`).
    layout : {"half", "interleaved"}
        How the rotated features form pairs (DeepSeek-V3.2: ``"half"``).

    Examples
    --------
    >>> q, k = np.ones((1, 2, 4)), np.ones((2, 4))
    >>> dsa_index_scores(q, k, np.ones((2, 1)), [1.0]).round(3)
    array([[2.  , -inf],
           [1.54, 2.  ]])
    """
    inv = _inv_freq(inv_freq)
    q, k, w = (np.asarray(a, dtype=np.float64) for a in (queries, keys, weights))
    if q.ndim != 3 or k.ndim != 2 or w.ndim != 2:
        raise ValueError("queries, keys and weights must have shapes (heads, n, D), (n, D) "
                         f"and (n, heads), got {q.shape}, {k.shape} and {w.shape}. Pass "
                         "one query per head and token, one key and one weight row per token.")
    heads, n, dim = q.shape
    if k.shape != (n, dim) or w.shape != (n, heads):
        raise ValueError(f"keys must have shape (n, D) = {(n, dim)} and weights (n, heads) = "
                         f"{(n, heads)} for queries of shape {q.shape}, got {k.shape} and "
                         f"{w.shape}. Give them the queries' heads, tokens and width.")
    rotated = 2 * inv.size
    if rotated > dim:
        raise ValueError(f"inv_freq must have at most D/2 = {dim // 2} frequencies, "
                         f"got {inv.size}. Pass the frequencies of the rotated slice only.")
    pos = np.arange(n)
    q = np.concatenate([rotate_with(q[..., :rotated], pos, inv, layout=layout),
                        q[..., rotated:]], axis=-1)
    k = np.concatenate([rotate_with(k[:, :rotated], pos, inv, layout=layout),
                        k[:, rotated:]], axis=-1)
    per_head = np.maximum(q @ k.T / math.sqrt(dim), 0.0)
    scores = np.einsum("th,hts->ts", w, per_head)
    return np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)
