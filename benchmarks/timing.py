"""Interleaved timing with ``torch.utils.benchmark.Timer``.

Every candidate is warmed up first (calls whose time is thrown away: lazy
initialisation, first-touch page faults of its allocations, caches).  Then the
candidates take turns: in each *round* every candidate runs one
``Timer.blocked_autorange`` of about ``block_s`` seconds, and the order of the
candidates rotates from round to round.  A slow drift of the machine (another process
starting, the CPU clock changing) therefore lands on all candidates alike instead of on
whichever happened to run last.  The per-call times of all blocks of all rounds are
pooled; we report their median and inter-quartile range (IQR).

Ratios between two candidates are *paired*: each round gives one ratio (of the two
candidates' median block times in that round, measured seconds apart), and the ratio
reported is the median over rounds (:func:`paired_ratio`).  On a shared machine whose
load changes from minute to minute this is much steadier than a ratio of two pooled
medians.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable


@dataclass
class Stats:
    """Summary of per-call times, in seconds."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    n_blocks: int
    calls: int
    rounds: list  # per round: the median per-call time of that round's blocks

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    def as_dict(self) -> dict:
        return {**asdict(self), "iqr": self.iqr}


def summarize(times: list[float], calls: int, rounds: list | None = None) -> Stats:
    """Median, quartiles (inclusive method), extremes of per-call block times."""
    if not times:
        raise ValueError("times must not be empty")
    if len(times) == 1:
        q1 = q3 = times[0]
    else:
        q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return Stats(
        median=statistics.median(times), q1=q1, q3=q3, min=min(times), max=max(times),
        n_blocks=len(times), calls=calls, rounds=list(rounds or []),
    )


def paired_ratio(a: list[float], b: list[float]) -> float:
    """Median over rounds of ``a[r] / b[r]`` (per-round times of two candidates)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"a and b must be per-round times of equal, non-zero length, "
                         f"got {len(a)} and {len(b)}")
    return statistics.median(x / y for x, y in zip(a, b))


def time_interleaved(
    fns: dict[str, Callable],
    arg,
    *,
    rounds: int = 7,
    block_s: float = 0.3,
    warmup_s: float = 0.3,
    num_threads: int = 1,
    log: Callable[[str], None] = lambda s: None,
) -> dict[str, Stats]:
    """Time ``fn(arg)`` for every ``fn`` in ``fns``, taking turns; return per-call stats."""
    from torch.utils.benchmark import Timer

    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    names = list(fns)
    timers = {
        name: Timer("fn(x)", globals={"fn": fn, "x": arg}, num_threads=num_threads,
                    label=name)
        for name, fn in fns.items()
    }
    for name in names:  # warm-up, thrown away
        fns[name](arg)
        timers[name].blocked_autorange(min_run_time=warmup_s)
    samples: dict[str, list[float]] = {name: [] for name in names}
    per_round: dict[str, list[float]] = {name: [] for name in names}
    calls: dict[str, int] = {name: 0 for name in names}
    for r in range(rounds):
        k = r % len(names)
        order = names[k:] + names[:k]
        if r % 2:
            order.reverse()
        start = time.perf_counter()
        for name in order:
            m = timers[name].blocked_autorange(min_run_time=block_s)
            samples[name].extend(m.times)
            per_round[name].append(statistics.median(m.times))
            calls[name] += m.number_per_run * len(m.times)
        log(f"    round {r + 1}/{rounds}: {time.perf_counter() - start:.1f} s")
    return {name: summarize(samples[name], calls[name], per_round[name]) for name in names}
