"""Two synthetic tasks that test length generalisation, scored on exactly what they ask.

**Copy** (induction): ``[BOS] x_1 … x_m [SEP] x_1 … x_m``, the ``x_i`` drawn uniformly from
:data:`SYMBOLS` symbols, ``m`` varying from sequence to sequence.  Only the second copy is
scored.  With a large alphabet a symbol rarely repeats inside a string, so predicting ``x_i``
means finding the earlier occurrence of ``x_{i-1}`` and reading the token after it (an
induction head); a model that learned a fixed offset ``m + 1`` back cannot do it, because
``m`` changes.  Models train on ``m`` in a range and are tested on longer strings.

**Passkey** (retrieval): ``[BOS]`` filler … ``[KEY] k_1 … k_K`` … filler … ``[KEY] k_1 … k_K``:
a key of :data:`KEY_LEN` symbols is hidden at a chosen depth in random filler and asked for
at the end by repeating the marker.  Only the key's second occurrence is scored.  The filler
never contains the marker, so the only way to the key is to attend to the earlier marker,
however far back it is.  Models train on short totals and are tested at many lengths and
depths.

Both are scored teacher-forced: *per-symbol accuracy* (greedy prediction of each scored
token given the true prefix) and *exact match* (every scored token of a sequence right).
Copy is also scored *free-running* (:func:`generate_copy`): the model writes the whole
second copy from ``[BOS] x [SEP]`` alone, each token after its own earlier guesses, as it
would be used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from .models import ModelConfig, TinyDecoder, sequence_loss
from .train import TrainResult, can_read, train

SYMBOLS = 200  # token ids 0..199 are symbols; 250..255 are reserved markers
KEY_LEN = 4
BOS, SEP, KEY = 254, 255, 253


def _check_positive(name: str, value: Any) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _bounds(value) -> tuple[Any, Any]:
    """``(value, value)`` for one number, the pair itself for a ``(low, high)`` range."""
    return (value, value) if np.isscalar(value) else (value[0], value[1])


def copy_batch(batch: int, m, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of copy sequences and the 0/1 mask of the scored tokens.

    ``m`` is one string length, or a ``(low, high)`` range from which each sequence draws
    its own (inclusive); shorter sequences are right-padded with :data:`SEP` and unscored.
    """
    _check_positive("batch", batch)
    lo, hi = _bounds(m)
    _check_positive("m", lo)
    _check_positive("m", hi)
    if lo > hi:
        raise ValueError(f"m range must have low <= high, got {m!r}")
    ms = rng.integers(lo, hi + 1, size=batch)
    width = 2 * hi + 2
    seq = np.full((batch, width), SEP, dtype=np.int64)
    scored = np.zeros((batch, width), dtype=np.int64)
    for b, mb in enumerate(ms):
        x = rng.integers(0, SYMBOLS, size=mb)
        seq[b, 0] = BOS
        seq[b, 1:mb + 1] = x
        seq[b, mb + 2:2 * mb + 2] = x
        scored[b, mb + 2:2 * mb + 2] = 1
    return torch.from_numpy(seq), torch.from_numpy(scored)


def passkey_batch(batch: int, total, depth, rng: np.random.Generator
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of passkey sequences of ``total`` tokens and the mask of the scored tokens.

    ``total`` is a length or a ``(low, high)`` range (each sequence draws its own, padded on
    the right); ``depth`` in [0, 1] places the key at that fraction of the filler, or is
    ``None`` for a uniformly random depth per sequence.
    """
    _check_positive("batch", batch)
    lo, hi = _bounds(total)
    need = 2 * (KEY_LEN + 1) + 2
    if not (isinstance(lo, (int, np.integer)) and lo >= need and hi >= lo):
        raise ValueError(f"total must be >= {need} (room for the key twice), got {total!r}")
    if depth is not None and not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth must be in [0, 1] or None, got {depth!r}")
    totals = rng.integers(lo, hi + 1, size=batch)
    seq = np.full((batch, hi), SEP, dtype=np.int64)
    scored = np.zeros((batch, hi), dtype=np.int64)
    for b, n in enumerate(totals):
        filler = n - 1 - 2 * (KEY_LEN + 1)
        d = rng.random() if depth is None else depth
        at = 1 + int(round(d * filler))
        key = rng.integers(0, SYMBOLS, size=KEY_LEN)
        row = rng.integers(0, SYMBOLS, size=n)
        row[0] = BOS
        row[at] = KEY
        row[at + 1:at + 1 + KEY_LEN] = key
        row[n - KEY_LEN - 1] = KEY
        row[n - KEY_LEN:n] = key
        seq[b, :n] = row
        scored[b, n - KEY_LEN:n] = 1
    return torch.from_numpy(seq), torch.from_numpy(scored)


@torch.no_grad()
def score(model, make_batch, n: int, batch: int = 32) -> dict:
    """Teacher-forced accuracy of ``model`` on ``n`` sequences from ``make_batch(size)``:
    ``{"symbol": per-symbol accuracy, "exact": fraction of sequences all right}``."""
    right = total = exact = seqs = 0
    for start in range(0, n, batch):
        seq, scored = make_batch(min(batch, n - start))
        seq, scored = seq.to(_device(model)), scored.to(_device(model))
        pred = model(seq[:, :-1]).argmax(-1)
        mask = scored[:, 1:].bool()
        hit = (pred == seq[:, 1:]) & mask
        right += int(hit.sum())
        total += int(mask.sum())
        exact += int((hit.sum(1) == mask.sum(1)).sum())
        seqs += seq.shape[0]
    return {"symbol": right / total, "exact": exact / seqs}


def _device(model) -> torch.device:
    return next(model.parameters()).device


def train_task(cfg: ModelConfig, make_batch: Callable[[int, np.random.Generator], tuple],
               *, steps: int, batch: int, lr: float, seed: int, progress: bool = False,
               log_every: int = 10, device: str = "cpu", desc: str = "task",
               stop: Callable[[TinyDecoder], bool] | None = None,
               check_every: int = 100, warmup: int | None = None) -> TrainResult:
    """Train on a synthetic task: ``make_batch(batch, rng)`` gives ``(tokens, scored)``.
    ``stop(model)``, where given, is asked every ``check_every`` steps and ends training
    when true (for example: in-distribution accuracy reached; see :func:`train`, which
    also takes ``warmup``)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = TinyDecoder(cfg).to(device)

    def batch_fn(_step):
        seq, scored = make_batch(batch, rng)
        return sequence_loss(model, seq.to(device), scored.to(device))

    return train(model, batch_fn, steps=steps, lr=lr, desc=f"{desc} {cfg.encoding} s{seed}",
                 progress=progress, log_every=log_every, check_every=check_every,
                 warmup=warmup, stop=None if stop is None else (lambda _steps: stop(model)))


@torch.no_grad()
def generate_copy(model, m: int, n: int, rng: np.random.Generator, batch: int = 32) -> dict:
    """Free-running copy of ``n`` strings of length ``m``: from ``[BOS] x [SEP]`` the model
    writes ``m`` tokens greedily, each after its own earlier output.  Returns
    ``{"symbol": share of written tokens equal to the string's, "exact": share of strings
    written entirely right}``."""
    _check_positive("m", m)
    _check_positive("n", n)
    right = exact = 0
    dev = _device(model)
    for start in range(0, n, batch):
        seq, _ = copy_batch(min(batch, n - start), m, rng)
        seq = seq.to(dev)
        out = seq[:, :m + 2]
        for _ in range(m):
            nxt = model(out)[:, -1].argmax(-1, keepdim=True)
            out = torch.cat([out, nxt], dim=1)
        hit = out[:, m + 2:] == seq[:, 1:m + 1]
        right += int(hit.sum())
        exact += int(hit.all(1).sum())
    return {"symbol": right / (n * m), "exact": exact / n}


def copy_maker(m) -> Callable:
    return lambda b, rng: copy_batch(b, m, rng)


def passkey_maker(total, depth=None) -> Callable:
    return lambda b, rng: passkey_batch(b, total, depth, rng)


def eval_copy(model: TinyDecoder, ms: Sequence[int], *, n: int, seed: int,
              free: bool = False) -> dict:
    """Copy scores for each string length ``m`` (``None`` where the model cannot read the
    sequence).  The strings depend on ``seed`` and ``m`` only: the same for every model.
    With ``free``, each also has ``"free"``: the free-running scores on the same strings
    (:func:`generate_copy`)."""
    out: dict[int, dict | None] = {}
    for m in ms:
        if not can_read(model, 2 * int(m) + 1):
            out[int(m)] = None
            continue
        rng = np.random.default_rng(10_000 + 1000 * seed + int(m))
        got = score(model, lambda b, rng=rng, m=m: copy_batch(b, int(m), rng), n)
        if free:
            rng = np.random.default_rng(10_000 + 1000 * seed + int(m))
            got["free"] = generate_copy(model, int(m), n, rng)
        out[int(m)] = got
    return out


def eval_passkey(model: TinyDecoder, totals: Sequence[int], depths: Sequence[float], *,
                 n: int, seed: int) -> dict:
    """Passkey scores ``{total: {depth: scores}}`` (``None`` where the model cannot read)."""
    out: dict[int, dict | None] = {}
    for total in totals:
        if not can_read(model, int(total) - 1):
            out[int(total)] = None
            continue
        by_depth: dict[str, dict] = {}
        for j, depth in enumerate(depths):
            rng = np.random.default_rng(20_000 + 1000 * seed + 10 * int(total) + j)
            by_depth[str(depth)] = score(
                model, lambda b, rng=rng, t=total, d=depth: passkey_batch(b, int(t), d, rng), n)
        out[int(total)] = by_depth
    return out
