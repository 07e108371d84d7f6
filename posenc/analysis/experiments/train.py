"""Training and evaluation loops, shared by the chapter's live demo and ``nox -s experiments``.

Everything is seeded: :func:`train` seeds PyTorch and NumPy from its ``seed`` argument, so a
run repeats bit for bit on the same machine and thread count.  The data order depends on the
seed only, so two encodings trained with the same seed see the same batches: comparisons
between encodings are paired by seed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.nn import functional as F

from ...torch.relative import LearnedPositionalEmbedding
from .corpus import EvalChunks, Split, lm_batch
from .models import ModelConfig, TinyDecoder, sequence_loss


@dataclass
class TrainResult:
    """A trained model and how its training went."""

    model: TinyDecoder
    losses: list = field(default_factory=list)  # (step, training loss)
    seconds: float = 0.0
    steps: int = 0  # the steps taken (fewer than asked where ``stop`` ended training)


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


def train(model: TinyDecoder, batch_fn: Callable[[int], torch.Tensor], *, steps: int,
          lr: float, desc: str = "", progress: bool = False, log_every: int = 10,
          warmup: int | None = None, stop: Callable[[int], bool] | None = None,
          check_every: int = 100) -> TrainResult:
    """AdamW (weight decay 0.01, betas 0.9/0.98, gradient clipping at 1) with warm-up and
    cosine decay; ``batch_fn(step)`` returns the loss of one batch.

    ``stop(steps_taken)``, where given, is asked after every ``check_every`` steps; when it
    returns true, training ends there (the schedule stays the one of ``steps``, so a run
    that stops early is the same run as one that goes on, cut short)."""
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    if not (isinstance(check_every, int) and check_every >= 1):
        raise ValueError(f"check_every must be an integer >= 1, got {check_every!r}")
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
        if stop is not None and (step + 1) % check_every == 0:
            model.eval()
            done = stop(step + 1)
            model.train()
            if done:
                if losses[-1][0] != step:
                    losses.append((step, loss.detach().item()))
                break
    if bar is not None:
        bar.close()
    model.eval()
    return TrainResult(model, losses, time.perf_counter() - start, step + 1)


def _device(model) -> torch.device:
    return next(model.parameters()).device


def train_lm(cfg: ModelConfig, split: Split, *, steps: int, batch: int, lr: float,
             seed: int, progress: bool = False, log_every: int = 10,
             model: TinyDecoder | None = None, length: int | None = None,
             device: str = "cpu") -> TrainResult:
    """Train (or, given ``model``, continue training) on random windows of ``length`` tokens
    of the training split, each inside one file.  ``length`` defaults to
    ``cfg.train_length``; fine-tuning at a longer length passes the model and the length."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = model if model is not None else TinyDecoder(cfg).to(device)
    length = length or cfg.train_length
    dev = _device(model)

    def batch_fn(_step):
        return sequence_loss(model, torch.from_numpy(lm_batch(split, batch, length, rng)).to(dev))

    return train(model, batch_fn, steps=steps, lr=lr, desc=f"lm {cfg.encoding} s{seed}",
                 progress=progress, log_every=log_every)


def can_read(model: TinyDecoder, length: int) -> bool:
    """Whether the model has a position for every one of ``length`` input tokens: a learned
    table has no row past its last (its module would raise), every other encoding does."""
    position = model.position
    if isinstance(position, LearnedPositionalEmbedding):
        return length <= position.max_len
    return True


@torch.no_grad()
def eval_lm(model: TinyDecoder, split: Split, chunks: EvalChunks, lengths: Sequence[int], *,
            bucket: int, max_batch: int = 8, far: np.ndarray | None = None) -> dict:
    """Losses (nats per byte) on the fixed chunks at each evaluation length.

    For each length ``n`` returns ``{"target": mean loss on the chunks' fixed target bytes,
    "window": mean loss over every position of the windows (Press et al.'s non-overlapping
    protocol), "buckets": mean loss per block of ``bucket`` positions, "chunks": the loss
    on each chunk's targets}``, or ``None`` where the model cannot read ``n`` positions.
    With ``far`` (a boolean mask over ``split.tokens``, see
    :func:`.corpus.far_identifier_mask`) also ``"far"``, the mean loss over the target
    bytes it selects, and ``"far_chunks"``, each chunk's ``[sum, count]`` of them.  Any
    error raised while evaluating propagates.
    """
    out: dict[int, dict | None] = {}
    dev = _device(model)
    for n in lengths:
        n = int(n)
        if not can_read(model, n):
            out[n] = None
            continue
        windows = chunks.windows(split, n)
        per = torch.zeros(len(windows), n, dtype=torch.float64)
        for i in range(0, len(windows), max_batch):
            w = torch.from_numpy(windows[i:i + max_batch]).to(dev)
            logits = model(w[:, :-1])
            loss = F.cross_entropy(logits.float().transpose(1, 2), w[:, 1:], reduction="none")
            per[i:i + len(w)] = loss.double().cpu()
        out[n] = summarise(per, chunks, bucket, far)
    return out


def summarise(per: torch.Tensor, chunks: EvalChunks, bucket: int,
              far: np.ndarray | None) -> dict:
    """The evaluation record of one length from its ``(chunks, n)`` per-position losses."""
    per_pos = per.mean(0)
    n = per.shape[1]
    tgt = per[:, -chunks.target:]
    res = {
        "target": float(per_pos[-chunks.target:].mean()),
        "window": float(per_pos.mean()),
        "buckets": [float(per_pos[b * bucket:(b + 1) * bucket].mean())
                    for b in range(-(-n // bucket))],
        "chunks": [round(float(v), 5) for v in tgt.mean(1)],
    }
    if far is not None:
        mask = torch.from_numpy(np.stack([far[e - chunks.target:e] for e in chunks.ends]))
        sums, counts = (tgt * mask).sum(1), mask.sum(1)
        res["far"] = float(sums.sum() / max(1, int(counts.sum())))
        res["far_chunks"] = [[round(float(a), 4), int(c)]
                             for a, c in zip(sums, counts, strict=True)]
    return res
