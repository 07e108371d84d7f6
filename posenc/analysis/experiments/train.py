"""Training and evaluation loops, shared by the chapter's live demo and ``nox -s experiments``.

Everything is seeded: :func:`train_lm` and :func:`train_copy` seed PyTorch and NumPy from
their ``seed`` argument, so a run repeats bit for bit on the same machine and thread count.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ...torch.relative import LearnedPositionalEmbedding
from .corpus import Corpus, eval_windows, lm_batch
from .models import ModelConfig, TinyDecoder, sequence_loss
from .tasks import copy_accuracy, copy_batch


@dataclass
class TrainResult:
    """A trained model and how its training went."""

    model: TinyDecoder
    losses: list = field(default_factory=list)  # (step, training loss)
    seconds: float = 0.0


def _progress(total, desc, enabled):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, leave=False, mininterval=1.0)


def _schedule(step: int, steps: int, warmup: int) -> float:
    """Linear warm-up, then cosine decay to 10 % of the peak learning rate."""
    if step < warmup:
        return (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t))


def _optimise(model, steps, lr, batch_fn, desc, progress, log_every, warmup=None):
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    warmup = warmup if warmup is not None else max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _schedule(s, steps, warmup))
    losses, bar, start = [], _progress(steps, desc, progress), time.perf_counter()
    model.train()
    for step in range(steps):
        loss = batch_fn(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == steps - 1:
            losses.append((step, loss.detach().item()))
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss.detach().item():.3f}", refresh=False)
    if bar is not None:
        bar.close()
    model.eval()
    return losses, time.perf_counter() - start


def train_lm(cfg: ModelConfig, corpus: Corpus, *, steps: int, batch: int, lr: float,
             seed: int, progress: bool = False, log_every: int = 10,
             model: TinyDecoder | None = None, length: int | None = None) -> TrainResult:
    """Train (or, given ``model``, continue training) on windows of ``length`` tokens.

    ``length`` defaults to ``cfg.train_length``; fine-tuning at a longer length (position
    interpolation) passes the model and the new length.
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = model if model is not None else TinyDecoder(cfg)
    length = length or cfg.train_length

    def batch_fn(_step):
        return sequence_loss(model, torch.from_numpy(lm_batch(corpus.train, batch, length, rng)))

    losses, seconds = _optimise(model, steps, lr, batch_fn, f"lm {cfg.encoding} s{seed}",
                                progress, log_every)
    return TrainResult(model, losses, seconds)


def _can_read(model: TinyDecoder, length: int) -> bool:
    """Whether the model has a position for every one of ``length`` input tokens: a learned
    table has no row past its last (its module would raise), every other encoding does."""
    position = model.position
    if isinstance(position, LearnedPositionalEmbedding):
        return length <= position.max_len
    return True


@torch.no_grad()
def eval_lm(model: TinyDecoder, corpus: Corpus, lengths, *, tokens_per_length: int,
            max_batch: int = 8) -> dict:
    """Perplexity of the held-out text at each evaluation length.

    At each length ``L`` the evaluation text is cut into ``tokens_per_length // L``
    non-overlapping windows (the same windows for every model) and the loss is averaged over
    every predicted token.  A learned table cannot be read past its last row: that length
    gets ``None``, not a number (any error raised while evaluating propagates).
    """
    out: dict[int, float | None] = {}
    for length in lengths:
        windows = eval_windows(corpus.eval, length, max(1, tokens_per_length // length))
        if not _can_read(model, length):
            out[int(length)] = None
            continue
        total = count = 0.0
        for i in range(0, len(windows), max_batch):
            chunk = torch.from_numpy(windows[i:i + max_batch])
            loss = sequence_loss(model, chunk)
            total += float(loss) * chunk.shape[0]
            count += chunk.shape[0]
        out[int(length)] = float(math.exp(total / count))
    return out


def train_copy(cfg: ModelConfig, *, m: int, steps: int, batch: int, lr: float, seed: int,
               progress: bool = False, log_every: int = 10) -> TrainResult:
    """Train on the copy task with strings of ``m`` symbols (sequences of ``2 m + 2``)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = TinyDecoder(cfg)

    def batch_fn(_step):
        seq, scored = copy_batch(batch, m, rng)
        return sequence_loss(model, seq, scored)

    losses, seconds = _optimise(model, steps, lr, batch_fn, f"copy {cfg.encoding} s{seed}",
                                progress, log_every)
    return TrainResult(model, losses, seconds)


def eval_copy(model: TinyDecoder, ms, *, n: int, seed: int) -> dict:
    """Copy accuracy for each string length ``m`` (``None`` where the model cannot run)."""
    out = {}
    for m in ms:
        rng = np.random.default_rng(10_000 + seed * 1000 + m)  # same strings for every model
        # the model reads the 2 m + 1 tokens before the last one
        out[int(m)] = copy_accuracy(model, m, n, rng) if _can_read(model, 2 * m + 1) else None
    return out
