"""Summaries over seeds: mean, sample standard deviation and Student-t 95 % intervals.

Seeds are few (five), so intervals use Student's t with ``n - 1`` degrees of freedom, and a
comparison of two methods is *paired*: both were trained with the same seeds (the same
initial draws and the same batches), so the interval is taken over the per-seed differences.
A claim that one method beats another is made only where that interval excludes zero.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence


def _t_cdf_upper_half(x: float, df: int) -> float:
    """P(0 <= T <= x) for Student's t with an integer ``df`` (x >= 0), in closed form.

    With theta = atan(x / sqrt(df)), P(|T| <= x) is a finite sum in powers of
    cos(theta) (Abramowitz and Stegun, 26.7.3 and 26.7.4): for odd ``df``,
    (2 / pi) (theta + sin(theta) (c + 2/3 c^3 + 2*4/(3*5) c^5 + ... + c^(df-2) term));
    for even ``df``, sin(theta) (1 + 1/2 c^2 + 1*3/(2*4) c^4 + ... + c^(df-2) term).
    ``df`` terms at most, exact to rounding.

    >>> round(_t_cdf_upper_half(1.0, 1), 12)  # atan(1) / pi
    0.25
    >>> round(_t_cdf_upper_half(2.7764451, 4), 6)
    0.475
    """
    theta = math.atan2(x, math.sqrt(df))
    c2, sine = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:
        term, total = math.cos(theta), 0.0
        for k in range(1, df - 1, 2):
            total += term
            term *= c2 * (k + 1) / (k + 2)
        both = 2.0 / math.pi * (theta + sine * total)
    else:
        term, total = 1.0, 0.0
        for k in range(0, df - 1, 2):
            total += term
            term *= c2 * (k + 1) / (k + 2)
        both = sine * total
    return 0.5 * both


@functools.lru_cache(maxsize=256, typed=True)  # a few (p, df) pairs, asked for often
def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom, for ``p`` in (0.5, 1).

    >>> round(t_quantile(0.975, 4), 4)
    2.7764
    >>> round(t_quantile(0.975, 1), 3)
    12.706
    """
    if not (isinstance(df, int) and df >= 1):
        raise ValueError(f"df must be an integer >= 1, got {df!r}")
    if not 0.5 < p < 1:
        raise ValueError(f"p must be in (0.5, 1), got {p!r}")
    lo, hi = 0.0, 1.0
    while 0.5 + _t_cdf_upper_half(hi, df) < p:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 0.5 + _t_cdf_upper_half(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def summary(values: Sequence[float]) -> dict:
    """``{"mean", "sd" (ddof = 1), "lo", "hi" (95 % t interval of the mean), "n"}``.

    >>> s = summary([1.0, 2.0, 3.0, 4.0, 5.0])
    >>> s["mean"], round(s["sd"], 4), round(s["lo"], 3), round(s["hi"], 3)
    (3.0, 1.5811, 1.037, 4.963)
    """
    vals = [float(v) for v in values]
    if len(vals) < 2:
        raise ValueError(f"values must hold at least 2 numbers for an interval, got {len(vals)}")
    if not all(math.isfinite(v) for v in vals):
        raise ValueError(f"values must be finite, got {vals}")
    n = len(vals)
    mean = sum(vals) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
    half = t_quantile(0.975, n - 1) * sd / math.sqrt(n)
    return {"mean": mean, "sd": sd, "lo": mean - half, "hi": mean + half, "n": n}


def paired(a: Sequence[float], b: Sequence[float]) -> dict:
    """The summary of the per-seed differences ``a - b``, with ``"separated"``: whether the
    95 % interval excludes zero.

    >>> d = paired([3.0, 3.1, 3.2, 3.0, 3.1], [2.0, 2.2, 2.1, 2.0, 2.1])
    >>> round(d["mean"], 2), d["separated"]
    (1.0, True)
    """
    if len(a) != len(b):
        raise ValueError(f"a and b must pair up seed by seed, got {len(a)} and {len(b)} values")
    s = summary([x - y for x, y in zip(a, b, strict=True)])
    s["separated"] = s["lo"] > 0 or s["hi"] < 0
    return s


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values for a family of tests, in the input order.

    The smallest of ``m`` p-values is multiplied by ``m``, the next by ``m - 1``, and so on,
    each adjusted value kept at least as large as the one before it and capped at 1; a
    claim is made where its adjusted p-value is below the level (family-wise error rate).

    >>> [round(p, 3) for p in holm([0.01, 0.04, 0.03, 0.005])]
    [0.03, 0.06, 0.06, 0.02]
    >>> holm([])
    []
    """
    ps = [float(p) for p in pvalues]
    if not all(0.0 <= p <= 1.0 for p in ps):
        raise ValueError(f"pvalues must lie in [0, 1], got {ps}")
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def paired_t_pvalue(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the paired t test of ``a - b`` (seed by seed).

    >>> round(paired_t_pvalue([3.0, 3.1, 3.2, 3.0, 3.1], [2.0, 2.2, 2.1, 2.0, 2.1]), 6)
    6e-06
    """
    s = paired(a, b)
    if s["sd"] == 0.0:
        return 0.0 if s["mean"] != 0.0 else 1.0
    t = abs(s["mean"]) / (s["sd"] / math.sqrt(s["n"]))
    return max(0.0, min(1.0, 1.0 - 2.0 * _t_cdf_upper_half(t, s["n"] - 1)))


def _normal_quantile(p: float) -> float:
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 0.5 * math.erfc(-mid / math.sqrt(2)) < p else (lo, mid)
    return (lo + hi) / 2


def wilson(k: int, n: int, level: float = 0.95) -> dict:
    """Wilson score interval for a proportion ``k / n`` (e.g. seeds that learned a task).

    Unlike a t interval over 0/1 outcomes it never leaves [0, 1], and it is not empty at
    ``k = 0`` or ``k = n``.

    >>> w = wilson(3, 5)
    >>> w["p"], round(w["lo"], 3), round(w["hi"], 3)
    (0.6, 0.231, 0.882)
    >>> w = wilson(0, 5)
    >>> w["lo"], round(w["hi"], 3)
    (0.0, 0.434)
    """
    for name, v in (("k", k), ("n", n)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{name} must be an int, got {v!r}")
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    z = _normal_quantile(0.5 + level / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return {"p": p, "lo": max(0.0, centre - half), "hi": min(1.0, centre + half), "k": k,
            "n": n}


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test that ``k1`` of ``n1`` and ``k2`` of ``n2``
    come from one proportion (e.g. seeds that retrieve, for two encodings): the
    probability, given the margins, of every table no more likely than the one observed.

    >>> round(fisher_exact(5, 5, 2, 5), 4)   # 42 / 252
    0.1667
    >>> round(fisher_exact(5, 5, 0, 5), 4), fisher_exact(3, 5, 3, 5)
    (0.0079, 1.0)
    """
    for name, v in (("k1", k1), ("n1", n1), ("k2", k2), ("n2", n2)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{name} must be an int, got {v!r}")
    if n1 < 1 or n2 < 1 or not (0 <= k1 <= n1 and 0 <= k2 <= n2):
        raise ValueError(f"need 0 <= k1 <= n1, 0 <= k2 <= n2 and n1, n2 >= 1, got "
                         f"k1={k1}, n1={n1}, k2={k2}, n2={n2}")
    k, n = k1 + k2, n1 + n2

    def ways(x: int) -> int:  # tables with x successes among the first group's n1
        return math.comb(k, x) * math.comb(n - k, n1 - x)

    seen = ways(k1)  # whole numbers: ties between tables are exact
    xs = range(max(0, k - n2), min(k, n1) + 1)
    return sum(w for w in map(ways, xs) if w <= seen) / math.comb(n, n1)


def bootstrap(values, *, n_boot: int = 2000, level: float = 0.95, seed: int = 0,
              groups=None) -> dict:
    """A percentile bootstrap interval of the mean over seeds and chunks (two levels).

    ``values`` is a ``(seeds, chunks)`` array (a per-chunk loss of each seed, or a per-chunk
    difference of two paired methods).  Each replicate resamples seeds with replacement,
    then chunks (the text) with replacement, and takes the mean; so the interval counts both
    the spread between trained models and the spread between evaluation texts.  ``"p"`` is
    the two-sided bootstrap p-value of the mean being zero (twice the smaller tail share).

    ``groups`` (one label per chunk: the file each chunk comes from) resamples whole
    groups instead of single chunks, since chunks of one file are not independent: a
    replicate draws files with replacement and keeps every chunk of each file drawn.

    >>> import numpy as np
    >>> x = np.random.default_rng(1).normal(0.5, 0.1, size=(5, 40))
    >>> b = bootstrap(x)
    >>> round(b["mean"], 3), b["lo"] < 0.493 < b["hi"], b["p"] < 0.01
    (0.493, True, True)
    """
    import numpy as np

    x = np.asarray(values, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 1:
        raise ValueError(f"values must be a (seeds >= 2, chunks >= 1) array, got shape "
                         f"{x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("values must be finite")
    if not (isinstance(n_boot, int) and n_boot >= 100):
        raise ValueError(f"n_boot must be an integer >= 100, got {n_boot!r}")
    rng = np.random.default_rng(seed)
    s, c = x.shape
    rows = rng.integers(0, s, size=(n_boot, s))
    if groups is None:
        picks = rng.integers(0, c, size=(n_boot, c))
        n_groups, of = c, np.arange(c)
    else:
        g = np.asarray(groups)
        if g.shape != (c,):
            raise ValueError(f"groups must have one label per chunk ({c}), got shape "
                             f"{g.shape}")
        labels, of = np.unique(g, return_inverse=True)
        n_groups = labels.size
        picks = rng.integers(0, n_groups, size=(n_boot, n_groups))
    # a replicate's mean, from how often it drew each seed and each group (a group's
    # chunks summed once): memory n_boot x (seeds + groups), not a copy per draw
    sums = np.stack([np.bincount(of, weights=row, minlength=n_groups) for row in x])
    sizes = np.bincount(of, minlength=n_groups).astype(float)
    seed_n = _counts(rows, s)
    group_n = _counts(picks, n_groups)
    means = ((seed_n @ sums) * group_n).sum(axis=1) / (s * (group_n @ sizes))
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    p = min(1.0, 2 * min((means <= 0).mean(), (means >= 0).mean()))
    return {"mean": float(x.mean()), "lo": float(lo), "hi": float(hi), "p": float(p),
            "n_seeds": s, "n_chunks": c, "n_groups": int(n_groups), "n_boot": n_boot}


def _counts(draws, n: int):
    """How many times each of ``0 .. n - 1`` occurs in each row of ``draws``."""
    import numpy as np

    b = draws.shape[0]
    flat = (draws + n * np.arange(b)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n).astype(float)
