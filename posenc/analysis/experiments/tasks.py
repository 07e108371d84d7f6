"""The two tasks: language modelling on real text, and copying a random string.

Copying is the synthetic task: ``[BOS] x_1 ... x_m [SEP] x_1 ... x_m`` with the ``x_i``
drawn uniformly from ``SYMBOLS`` symbols.  Only the second copy is scored: to predict
``x_i`` there, a head must find the token after the earlier occurrence of the previous
symbol (an induction head), which needs positions to break the ties between repeated
symbols.  Models train with one string length and are tested on longer ones.
"""

from __future__ import annotations

import numpy as np
import torch

SYMBOLS = 16
BOS, SEP = 254, 255  # byte values that the symbols (0..SYMBOLS-1) never take


def copy_batch(batch: int, m: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Token sequences of length ``2 m + 2`` and a 0/1 mask of the scored positions."""
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    x = rng.integers(0, SYMBOLS, size=(batch, m))
    seq = np.concatenate(
        [np.full((batch, 1), BOS), x, np.full((batch, 1), SEP), x], axis=1
    ).astype(np.int64)
    scored = np.zeros_like(seq)
    scored[:, m + 2:] = 1  # the second copy, each predicted from everything before it
    return torch.from_numpy(seq), torch.from_numpy(scored)


@torch.no_grad()
def copy_accuracy(model, m: int, n: int, rng: np.random.Generator, batch: int = 64) -> float:
    """Fraction of second-copy symbols predicted exactly (greedy, teacher-forced)."""
    correct = total = 0
    for start in range(0, n, batch):
        seq, scored = copy_batch(min(batch, n - start), m, rng)
        pred = model(seq[:, :-1]).argmax(-1)
        hit = (pred == seq[:, 1:]) & scored[:, 1:].bool()
        correct += int(hit.sum())
        total += int(scored[:, 1:].sum())
    return correct / total
