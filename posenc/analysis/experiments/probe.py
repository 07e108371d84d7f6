"""A passkey probe for the byte-level language models: can a model fetch a number it read
far back in real text?

A line ``PASSKEY = ddddd`` is hidden at a chosen depth in a window of the test split's
text, and the window ends by asking for it again (``PASSKEY = `` followed by the same
digits).  Only the digits of the question are scored, teacher-forced: each digit given the
true prefix, so the first digit tests retrieval and the rest can follow it by copying.
The text around the key is ordinary code, which never contains the marker, so the only
way to the digits is to attend back to the hidden line, however far it is.  Chance is
about 0.1 per digit.

The sequences depend on the split, the seed, the length and the depth only: every model
is asked the same questions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .corpus import Split
from .train import can_read

MARK = b"\nPASSKEY = "
DIGITS = 5
#: the shortest window with room for the key twice and one byte of text
MIN_LENGTH = 2 * (len(MARK) + DIGITS) + 1


def _check(name: str, value, low: int) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def passkey_text(split: Split, length: int, depth: float, n: int, seed: int
                 ) -> tuple[np.ndarray, int]:
    """``n`` windows of ``length`` bytes with the key hidden at ``depth`` (a fraction of
    the text before the question), and the number of scored bytes at each window's end.

    >>> from posenc.analysis.experiments.corpus import Split
    >>> s = Split(np.frombuffer(b"x = 1\\n" * 200, np.uint8).copy(), np.array([0, 1200]), ("f",))
    >>> w, k = passkey_text(s, 64, 0.5, 2, seed=0)
    >>> text = bytes(w[0].astype(np.uint8))
    >>> w.shape, k, text[-k - len(MARK):-k] == MARK, text.count(text[-k - len(MARK):])
    ((2, 64), 5, True, 2)
    """
    _check("length", length, MIN_LENGTH)
    _check("n", n, 1)
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth must be in [0, 1], got {depth!r}")
    rng = np.random.default_rng([seed, length, int(round(depth * 1000))])
    needle = len(MARK) + DIGITS
    filler = length - 2 * needle
    starts = split.bounds[:-1]
    sizes = np.diff(split.bounds)
    ok = np.flatnonzero(sizes >= filler)
    if ok.size == 0:
        raise ValueError(f"length {length}: no file of the split is long enough")
    out = np.empty((n, length), dtype=np.int64)
    for i in range(n):
        f = rng.choice(ok)
        a = int(starts[f]) + int(rng.integers(0, sizes[f] - filler + 1))
        text = split.tokens[a:a + filler].astype(np.int64)
        key = np.frombuffer(MARK + bytes(str(int(rng.integers(10 ** (DIGITS - 1),
                                                                10 ** DIGITS))), "ascii"),
                            np.uint8).astype(np.int64)
        at = int(round(depth * filler))
        out[i] = np.concatenate([text[:at], key, text[at:], key])
    return out, DIGITS


@torch.no_grad()
def passkey_scores(model, split: Split, lengths: Sequence[int], depths: Sequence[float], *,
                   n: int, seed: int, batch: int = 8) -> dict:
    """``{length: {depth: {"digit": per-digit accuracy, "exact": share of keys all
    right}}}`` (``None`` at a length the model cannot read)."""
    dev = next(model.parameters()).device
    out: dict[int, dict | None] = {}
    for length in lengths:
        length = int(length)
        if not can_read(model, length):
            out[length] = None
            continue
        by_depth = {}
        for depth in depths:
            w, k = passkey_text(split, length, float(depth), n, seed)
            right = exact = 0
            for i in range(0, n, batch):
                x = torch.from_numpy(w[i:i + batch]).to(dev)
                pred = model(x[:, :-1]).argmax(-1)[:, -k:]
                hit = pred == x[:, -k:]
                right += int(hit.sum())
                exact += int(hit.all(1).sum())
            by_depth[str(depth)] = {"digit": right / (n * k), "exact": exact / n}
        out[length] = by_depth
    return out
