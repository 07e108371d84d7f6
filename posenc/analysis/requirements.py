r"""Score a positional encoding against the six requirements of the book, numerically.

The chapter ``why-position`` lists what a positional encoding must provide; the chapter
``naive-encodings`` scores the raw index, the normalised index, the binary code and the
sinusoidal encoding against that list.  The verdicts in its table are not typed by hand:
each comes from one checker below, which *computes* the property on the encoding's table.

An encoding is given to a checker as a **table function**: ``table(n) -> array`` that
returns the codes of the positions ``0, 1, ..., n - 1`` as an array of shape ``(n, d)``,
``d`` fixed.  The functions of :mod:`posenc` fit with the width bound, for example
``functools.partial(posenc.binary_encoding, d_model=16)`` or :func:`standard_encodings`.
A table function may depend on ``n`` in any way (the normalised index does: it divides by
``n - 1``), which is exactly what :func:`check_same_across_lengths` detects.

The checkers, each with its score (what is computed) and when it passes:

* :func:`check_unique`: the smallest distance between the codes of two positions;
  passes if ``> tol``.
* :func:`check_bounded`: ``max|PE|`` over ``growth * n`` positions divided by ``max|PE|``
  over ``n`` positions; passes if ``<= 1 + tol``.
* :func:`check_same_across_lengths`: the largest change of the code of a position when
  the table is built for a longer sequence; passes if ``<= tol``.
* :func:`check_smooth`: the largest step between neighbours divided by the median
  distance between two positions; passes if ``<= max_ratio``.
* :func:`check_relative_shift`: the relative residual of the best (least-squares) linear
  map ``T_k`` with ``PE[p + k] ~ T_k PE[p]`` for all ``p``; passes if ``<= tol``.
* :func:`check_extrapolates`: how far the table built for ``factor * L`` positions departs
  from what a model trained on ``L`` positions saw; passes if ``<= tol`` and no two
  positions share a code.

Each checker returns a :class:`Verdict`.  :func:`score_requirements` runs all six on
several encodings, and :func:`requirements_table` renders the result as a Markdown table
in English or Chinese.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .. import _language
from .._validation import check_bool, check_count, check_d_model, check_real
from .closest import closest_pair
from ..naive import binary_encoding, index_encoding, normalized_index_encoding
from ..sinusoidal import sinusoidal_encoding

__all__ = [
    "Verdict",
    "REQUIREMENTS",
    "check_unique",
    "check_bounded",
    "check_same_across_lengths",
    "check_smooth",
    "check_relative_shift",
    "check_extrapolates",
    "standard_encodings",
    "score_requirements",
    "requirements_table",
]


@dataclass(frozen=True)
class Verdict:
    """The outcome of one requirement check.

    Attributes
    ----------
    passed : bool
        Whether the encoding meets the requirement.
    score : float
        The number the verdict was decided on (see each checker for its meaning).
    limit : float
        The threshold the score was compared with.
    reason : str
        One short English phrase saying what was found.
    """

    passed: bool
    score: float
    limit: float
    reason: str

    def __post_init__(self) -> None:
        # a NumPy bool_ from a comparison is stored as a Python bool; "no" is refused
        object.__setattr__(self, "passed", check_bool(self.passed, "passed"))

    def __bool__(self) -> bool:
        return self.passed


# -- helpers ------------------------------------------------------------------------


def _table(table, n: int, name: str = "table") -> np.ndarray:
    """Call ``table(n)`` and check that it returned a finite 2-D array with ``n`` rows."""
    if not callable(table):
        raise TypeError(f"{name} must be a callable table(n) -> array of shape (n, d), "
                        f"got {type(table).__name__}")
    out = np.asarray(table(n), dtype=np.float64)
    if out.ndim != 2 or out.shape[0] != n:
        raise ValueError(f"{name}(n) must return an array of shape (n, d) with n = {n} rows, "
                         f"got shape {out.shape}")
    return out


def _pairwise_distances(codes: np.ndarray) -> np.ndarray:
    """Euclidean distances between all pairs of rows (upper triangle, no diagonal).

    The Gram-matrix form loses digits for nearly equal rows; it is used here only for
    the median distance, never to decide whether two codes collide (see
    :func:`posenc.closest_pair`).
    """
    sq = np.einsum("ij,ij->i", codes, codes)
    d2 = sq[:, None] + sq[None, :] - 2.0 * codes @ codes.T
    iu = np.triu_indices(codes.shape[0], k=1)
    return np.sqrt(np.maximum(d2[iu], 0.0))


def _check_tol(tol, name: str = "tol") -> float:
    value = check_real(tol, name)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


# -- the six checkers ---------------------------------------------------------------


def check_unique(table, n_positions=1024, tol=1e-9):
    """Requirement 1: different positions get different codes.

    Score: the smallest Euclidean distance between the codes of two different positions
    among ``0 .. n_positions - 1``.  Passes if it is ``> tol``.

    Parameters
    ----------
    table : callable
        ``table(n)`` returns the codes of positions ``0 .. n - 1``, shape ``(n, d)``.
    n_positions : int, default 1024
        How many positions to compare (all pairs), ``>= 2``.
    tol : float, default 1e-9
        Distances at or below this count as a collision, ``>= 0``.

    Returns
    -------
    Verdict

    Raises
    ------
    TypeError
        If ``table`` is not callable, or ``n_positions`` not an integer.
    ValueError
        If ``n_positions < 2``, ``tol < 0``, or ``table`` returns the wrong shape.

    Examples
    --------
    >>> import functools
    >>> from posenc.naive import binary_encoding
    >>> check_unique(functools.partial(binary_encoding, d_model=4), 16).passed
    True
    >>> check_unique(functools.partial(binary_encoding, d_model=4), 17).passed  # 16 wraps to 0
    False
    """
    n = check_count(n_positions, "n_positions", minimum=2)
    tol = _check_tol(tol)
    dmin = closest_pair(_table(table, n)).distance
    passed = dmin > tol
    return Verdict(passed, dmin, tol,
                   "every position has its own code" if passed else "two positions share a code")


def check_bounded(table, n_positions=1024, growth=10, tol=1e-9):
    """Requirement 2: the values stay on the same scale however long the sequence.

    Score: ``max|PE|`` over ``growth * n_positions`` positions divided by ``max|PE|`` over
    ``n_positions`` positions.  Passes if it is ``<= 1 + tol`` (a bounded encoding has
    reached its bound long before; one that grows with ``p`` grows by ``growth``).

    Parameters
    ----------
    table : callable
        ``table(n)`` returns the codes of positions ``0 .. n - 1``, shape ``(n, d)``.
    n_positions : int, default 1024
        The shorter length, ``>= 2``.
    growth : int, default 10
        How many times longer the second table is, ``>= 2``.
    tol : float, default 1e-9
        Allowed relative growth, ``>= 0``.

    Returns
    -------
    Verdict

    Raises
    ------
    TypeError
        If ``table`` is not callable, or a count is not an integer.
    ValueError
        If ``n_positions < 2``, ``growth < 2``, ``tol < 0``, or ``table`` returns the
        wrong shape.

    Examples
    --------
    >>> import functools
    >>> from posenc.naive import index_encoding
    >>> v = check_bounded(functools.partial(index_encoding, d_model=2), 100)
    >>> v.passed, round(v.score, 2)      # 999 / 99
    (False, 10.09)
    """
    n = check_count(n_positions, "n_positions", minimum=2)
    g = check_count(growth, "growth", minimum=2)
    tol = _check_tol(tol)
    short = np.max(np.abs(_table(table, n)))
    long = np.max(np.abs(_table(table, g * n)))
    if short == 0.0:
        ratio = 1.0 if long == 0.0 else math.inf
    else:
        ratio = float(long / short)
    passed = ratio <= 1.0 + tol
    return Verdict(passed, ratio, 1.0 + tol,
                   "values stay within the same bound" if passed
                   else "values grow with the sequence length")


def check_same_across_lengths(table, short_length=10, long_length=1000, tol=1e-12):
    """Requirement 3: a position means the same thing in a short and in a long sequence.

    Score: ``max |table(long_length)[:short_length] - table(short_length)|``, the largest
    change of the code of any of the first ``short_length`` positions when the table is
    built for the longer sequence.  Passes if it is ``<= tol``.  Equal codes for each
    position imply equal differences, so "three tokens apart" then means the same too.

    Parameters
    ----------
    table : callable
        ``table(n)`` returns the codes of positions ``0 .. n - 1``, shape ``(n, d)``.
    short_length : int, default 10
        Length of the short sequence, ``>= 2``.
    long_length : int, default 1000
        Length of the long sequence, ``> short_length``.
    tol : float, default 1e-12
        Allowed change, ``>= 0``.

    Returns
    -------
    Verdict

    Raises
    ------
    TypeError
        If ``table`` is not callable, or a length is not an integer.
    ValueError
        If ``short_length < 2``, ``long_length <= short_length``, ``tol < 0``, or
        ``table`` returns the wrong shape.

    Examples
    --------
    >>> import functools
    >>> from posenc.naive import normalized_index_encoding
    >>> v = check_same_across_lengths(functools.partial(normalized_index_encoding, d_model=1))
    >>> v.passed, round(v.score, 3)      # position 9: 9/9 = 1 in 10 tokens, 9/999 in 1000
    (False, 0.991)
    """
    n_short = check_count(short_length, "short_length", minimum=2)
    n_long = check_count(long_length, "long_length", minimum=n_short + 1)
    tol = _check_tol(tol)
    a = _table(table, n_short)
    b = _table(table, n_long)[:n_short]
    if a.shape != b.shape:
        raise ValueError(f"table(n) must return the same width d for every n, got "
                         f"{a.shape[1]} and {b.shape[1]}")
    change = float(np.max(np.abs(a - b)))
    passed = change <= tol
    return Verdict(passed, change, tol,
                   "a position keeps its code" if passed
                   else "the code of a position depends on the sequence length")


def check_smooth(table, n_positions=1024, max_ratio=0.5):
    """Requirement 4: neighbouring positions get nearby codes, with no jumps.

    Score: the largest distance between the codes of two neighbours, ``max_p
    ||PE[p+1] - PE[p]||``, divided by the median distance between the codes of two
    positions (all pairs).  A smooth encoding moves a little at every step, so no single
    step is comparable to a typical distance; a jumpy one (the binary code: 7 -> 8 flips
    every bit) has steps larger than a typical distance.  Passes if ``<= max_ratio``.

    Parameters
    ----------
    table : callable
        ``table(n)`` returns the codes of positions ``0 .. n - 1``, shape ``(n, d)``.
    n_positions : int, default 1024
        How many positions, ``>= 3``.
    max_ratio : float, default 0.5
        Largest allowed ratio, ``> 0``.

    Returns
    -------
    Verdict

    Raises
    ------
    TypeError
        If ``table`` is not callable, ``n_positions`` not an integer or ``max_ratio`` not
        a real number.
    ValueError
        If ``n_positions < 3``, ``max_ratio <= 0``, or ``table`` returns the wrong shape.

    Examples
    --------
    >>> import functools
    >>> from posenc.naive import binary_encoding
    >>> from posenc.sinusoidal import sinusoidal_encoding
    >>> check_smooth(functools.partial(sinusoidal_encoding, d_model=16)).passed
    True
    >>> v = check_smooth(functools.partial(binary_encoding, d_model=10))
    >>> v.passed, round(v.score, 3)      # sqrt(10) / sqrt(5): one step, all ten bits
    (False, 1.414)
    """
    n = check_count(n_positions, "n_positions", minimum=3)
    limit = check_real(max_ratio, "max_ratio")
    if limit <= 0:
        raise ValueError(f"max_ratio must be > 0, got {limit}")
    codes = _table(table, n)
    steps = np.linalg.norm(np.diff(codes, axis=0), axis=1)
    typical = float(np.median(_pairwise_distances(codes)))
    ratio = math.inf if typical == 0.0 else float(steps.max() / typical)
    passed = ratio <= limit
    return Verdict(passed, ratio, limit,
                   "neighbours are close, no jumps" if passed
                   else "one step between neighbours is as large as a typical distance")


def check_relative_shift(table, n_positions=512, shifts=(1, 2, 3, 5, 10, 50), tol=1e-9):
    """Requirement 5: a shift by ``k`` positions is one linear map, whatever ``p`` is.

    For each ``k`` in ``shifts``, fit the single matrix ``T_k`` that best maps ``PE[p]``
    to ``PE[p + k]`` for all ``p = 0 .. n_positions - 1 - k`` (least squares), and
    measure the relative residual ``||PE[:-k] T_k^T - PE[k:]||_F / ||PE[k:]||_F``.
    Score: the largest residual over ``shifts``.  Passes if it is ``<= tol``: then
    ``PE[p + k] = T_k PE[p]`` holds for every ``p`` to rounding, as Vaswani et al. (2017)
    require ("for any fixed offset k, PE_{pos+k} can be represented as a linear function
    of PE_{pos}").  An affine shift (``PE[p + k] = PE[p] + k``, the raw index) is not
    linear and fails.

    Parameters
    ----------
    table : callable
        ``table(n)`` returns the codes of positions ``0 .. n - 1``, shape ``(n, d)``.
    n_positions : int, default 512
        How many positions; every ``k`` must leave more than ``2 d`` pairs
        ``(p, p + k)`` so that the fit is overdetermined.
    shifts : sequence of int, default (1, 2, 3, 5, 10, 50)
        The offsets ``k``, each ``>= 1``.
    tol : float, default 1e-9
        Largest allowed relative residual, ``>= 0``.

    Returns
    -------
    Verdict

    Raises
    ------
    TypeError
        If ``table`` is not callable, or ``n_positions`` or a shift is not an integer.
    ValueError
        If ``shifts`` is empty, a shift is ``< 1``, too few pairs are left for a shift,
        ``tol < 0``, or ``table`` returns the wrong shape.

    Examples
    --------
    >>> import functools
    >>> from posenc.naive import index_encoding
    >>> from posenc.sinusoidal import sinusoidal_encoding
    >>> check_relative_shift(functools.partial(sinusoidal_encoding, d_model=16)).passed
    True
    >>> check_relative_shift(functools.partial(index_encoding, d_model=1)).passed
    False
    """
    n = check_count(n_positions, "n_positions", minimum=2)
    if isinstance(shifts, (int, np.integer)):
        shifts = (shifts,)
    ks = [check_count(k, "shifts", minimum=1) for k in shifts]
    if not ks:
        raise ValueError("shifts must name at least one offset k >= 1")
    tol = _check_tol(tol)
    codes = _table(table, n)
    d = codes.shape[1]
    worst = 0.0
    for k in ks:  # a handful of offsets, not a loop over positions
        if n - k <= 2 * d:
            raise ValueError(f"n_positions - k must be > 2 * d = {2 * d} for the fit to be "
                             f"overdetermined, got n_positions = {n}, k = {k}")
        src, dst = codes[:-k], codes[k:]
        sol, *_ = np.linalg.lstsq(src, dst, rcond=None)  # dst ~ src @ sol: T_k = sol.T
        norm = np.linalg.norm(dst)
        resid = np.linalg.norm(src @ sol - dst)
        rel = float(resid / norm) if norm > 0 else (math.inf if resid > 0 else 0.0)
        worst = max(worst, rel)
    passed = worst <= tol
    return Verdict(passed, worst, tol,
                   "one linear map per offset" if passed
                   else "no single linear map shifts every position")


def check_extrapolates(table, train_length=256, factor=4, tol=1e-9):
    """Requirement 6: defined by a formula beyond the training length, and consistent.

    A model trained on sequences of ``L = train_length`` tokens has seen
    ``table(L)``.  Build ``table(factor * L)`` twice and measure its *departure* from what
    training saw, the largest of

    * ``max |table(f L) - table(f L)|`` (two calls must agree: deterministic),
    * ``max |table(f L)[:L] - table(L)|`` (the trained positions keep their codes),
    * ``max|table(f L)| - max|table(L)|`` if positive (the new codes stay in the range of
      values the model was trained on).

    Score: that departure.  Passes if it is ``<= tol`` *and* no two of the
    ``factor * L`` positions share a code (a wrap-around counter would).

    Parameters
    ----------
    table : callable
        ``table(n)`` returns the codes of positions ``0 .. n - 1``, shape ``(n, d)``.
    train_length : int, default 256
        The training length ``L``, ``>= 2``.
    factor : int, default 4
        How many times longer the test sequences are, ``>= 2``.
    tol : float, default 1e-9
        Allowed departure, ``>= 0``.

    Returns
    -------
    Verdict

    Raises
    ------
    TypeError
        If ``table`` is not callable, or a count is not an integer.
    ValueError
        If ``train_length < 2``, ``factor < 2``, ``tol < 0``, or ``table`` returns the
        wrong shape.

    Examples
    --------
    >>> import functools
    >>> from posenc.naive import index_encoding
    >>> from posenc.sinusoidal import sinusoidal_encoding
    >>> check_extrapolates(functools.partial(sinusoidal_encoding, d_model=16)).passed
    True
    >>> v = check_extrapolates(functools.partial(index_encoding, d_model=1))
    >>> v.passed, v.score                # position 1023 against a largest trained value 255
    (False, 768.0)
    """
    L = check_count(train_length, "train_length", minimum=2)
    f = check_count(factor, "factor", minimum=2)
    tol = _check_tol(tol)
    train = _table(table, L)
    ext = _table(table, f * L)
    again = _table(table, f * L)
    if ext.shape[1] != train.shape[1]:
        raise ValueError(f"table(n) must return the same width d for every n, got "
                         f"{train.shape[1]} and {ext.shape[1]}")
    departures = {
        "two calls give different codes": float(np.max(np.abs(ext - again))),
        "the trained positions change their codes": float(np.max(np.abs(ext[:L] - train))),
        "new codes leave the trained range of values":
            max(0.0, float(np.max(np.abs(ext)) - np.max(np.abs(train)))),
    }
    worst_reason = max(departures, key=departures.get)
    score = departures[worst_reason]
    if score > tol:
        return Verdict(False, score, tol, worst_reason)
    if closest_pair(ext).distance <= tol:
        return Verdict(False, score, tol, "new positions reuse the codes of old ones")
    return Verdict(True, score, tol, "defined, consistent and in range beyond training")


# -- scoring several encodings ------------------------------------------------------

#: The six requirements in the order of the book (``why-position``), each with its
#: checker and its name in English and Chinese.
REQUIREMENTS = {
    "unique": (check_unique, "Unique", "唯一"),
    "bounded": (check_bounded, "Bounded", "有界"),
    "same_across_lengths": (check_same_across_lengths, "Same across lengths", "长度无关"),
    "smooth": (check_smooth, "Smooth", "平滑"),
    "relative_shift": (check_relative_shift, "Relative shifts are linear", "相对偏移是线性映射"),
    "extrapolates": (check_extrapolates, "Deterministic, extrapolates", "确定且可外推"),
}

_ENCODING_NAMES = {
    "index": ("Index", "索引"),
    "normalized": ("Normalised", "归一化"),
    "binary": ("Binary", "二进制"),
    "sinusoidal": ("Sinusoidal", "正弦"),
}


def standard_encodings(d_model=16):
    """The four encodings the book scores, as table functions of width ``d_model``.

    Parameters
    ----------
    d_model : int, default 16
        Width of every encoding, a positive even number (the sinusoid needs pairs).  The
        binary code then has ``d_model`` bits and is unique up to ``2**d_model``
        positions.

    Returns
    -------
    dict
        ``{"index", "normalized", "binary", "sinusoidal"}`` to callables ``table(n)``.

    Raises
    ------
    TypeError
        If ``d_model`` is not an integer.
    ValueError
        If ``d_model`` is odd or ``< 2``.

    Examples
    --------
    >>> enc = standard_encodings(8)
    >>> list(enc)
    ['index', 'normalized', 'binary', 'sinusoidal']
    >>> enc["binary"](3).shape
    (3, 8)
    """
    d = check_d_model(d_model, even=True)
    return {
        "index": functools.partial(index_encoding, d_model=d),
        "normalized": functools.partial(normalized_index_encoding, d_model=d),
        "binary": functools.partial(binary_encoding, d_model=d),
        "sinusoidal": functools.partial(sinusoidal_encoding, d_model=d),
    }


def score_requirements(encodings):
    """Run the six checkers on every encoding.

    Parameters
    ----------
    encodings : dict
        Name to table function ``table(n)``, e.g. :func:`standard_encodings`.

    Returns
    -------
    dict
        ``{requirement: {encoding name: Verdict}}``, requirements in the order of
        :data:`REQUIREMENTS`.

    Raises
    ------
    TypeError
        If ``encodings`` is not a dict of callables.
    ValueError
        If ``encodings`` is empty.

    Examples
    --------
    >>> scores = score_requirements(standard_encodings(8))
    >>> [name for name, v in scores["bounded"].items() if not v.passed]
    ['index']
    """
    if not isinstance(encodings, dict):
        raise TypeError(f"encodings must be a dict of name -> table(n), got {type(encodings).__name__}")
    if not encodings:
        raise ValueError("encodings must name at least one encoding")
    for name, table in encodings.items():
        if not callable(table):
            raise TypeError(f"encodings[{name!r}] must be callable, got {type(table).__name__}")
    return {req: {name: check(table) for name, table in encodings.items()}
            for req, (check, _en, _zh) in REQUIREMENTS.items()}


def requirements_table(scores, language=None, show_scores=True):
    """Render :func:`score_requirements` output as a Markdown table.

    Rows are requirements, columns encodings; a cell is ✓ or ✗, followed by the score
    the verdict was decided on (3 significant digits) if ``show_scores``.

    Parameters
    ----------
    scores : dict
        The output of :func:`score_requirements`.
    language : {"en", "zh"}, optional
        Language of the row and column names; by default the book's current language,
        which :func:`posenc.figures.set_language` sets (so a page's one
        ``set_language`` call sets both; the setting lives in ``posenc._language``,
        below both packages, and needs no matplotlib).
    show_scores : bool, default True
        Whether to print the score after each mark.

    Returns
    -------
    str
        A Markdown (GFM) table; display it with ``IPython.display.Markdown``.

    Raises
    ------
    ValueError
        If ``language`` is not ``"en"`` or ``"zh"``, or ``scores`` names an unknown
        requirement.

    Examples
    --------
    >>> scores = score_requirements({"index": standard_encodings(4)["index"]})
    >>> print(requirements_table(scores, "en", show_scores=False).splitlines()[2])
    | Unique | ✓ |
    """
    language = _language.get_language() if language is None else _language.check_language(
        language)
    show_scores = check_bool(show_scores, "show_scores")
    col = 1 if language == "en" else 2
    unknown = [r for r in scores if r not in REQUIREMENTS]
    if unknown:
        raise ValueError(f"scores names unknown requirements {unknown}; known: {list(REQUIREMENTS)}")
    names = list(next(iter(scores.values())))
    head_req = "Requirement" if language == "en" else "要求"
    header = [head_req] + [_ENCODING_NAMES.get(n, (n, n))[col - 1] for n in names]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" + ":---:|" * len(names)]
    for req, row in scores.items():
        cells = []
        for name in names:
            v = row[name]
            mark = "✓" if v.passed else "✗"
            cells.append(f"{mark} <small>{v.score:.3g}</small>" if show_scores else mark)
        lines.append("| " + " | ".join([REQUIREMENTS[req][col]] + cells) + " |")
    return "\n".join(lines)
