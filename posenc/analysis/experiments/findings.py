"""What the experiments found, read from the study's units (``experiments/study.json``).

Every number the experiments chapter prints comes through these functions, from the
units ``python experiments/study.py report`` assembles.  A value is per seed wherever
the study has seeds, so a comparison can be paired by seed and given an interval
(:func:`paired`).  Losses are nats per byte on the fixed test targets; ``metric`` is
``"target"`` (every target byte) or ``"far"`` (the bytes whose previous occurrence lies
more than 128 bytes back).
"""

from __future__ import annotations

import json
from pathlib import Path

from . import stats

#: the committed study, read by the chapter
STUDY = Path(__file__).resolve().parents[3] / "experiments" / "study.json"


def load_study(path: Path | str | None = None) -> dict:
    """The assembled study (``experiments/study.json`` by default)."""
    path = Path(path) if path is not None else STUDY
    if not path.is_file():
        raise ValueError(f"the study file {str(path)!r} does not exist: run "
                         "`python experiments/study.py report`")
    return json.loads(path.read_text())


def _unit(study: dict, key: str) -> dict:
    unit = study["units"].get(key)
    if unit is None:
        raise KeyError(f"the study has no unit {key!r}: run its stage "
                       "(python experiments/study.py --help)")
    return unit


def seeds(study: dict, encoding: str) -> list[int]:
    """The seeds the study trained ``encoding``'s language model with."""
    return study["protocol"]["seeds"]["rope" if encoding == "rope" else "other"]


def lengths(study: dict) -> list[int]:
    """The evaluation lengths, the training length first."""
    return list(study["protocol"]["eval"]["lengths"])


def train_length(study: dict) -> int:
    return int(study["protocol"]["model"]["train_length"])


def lm(study: dict, encoding: str, n: int, metric: str = "target") -> list[float] | None:
    """The language model's loss at length ``n``, one value per seed (``None`` where the
    model cannot read ``n`` bytes: the learned table past its rows).

    >>> s = {"protocol": {"seeds": {"rope": [0, 1], "other": [0]}}, "units": {
    ...     "lm-rope-s0": {"eval": {"128": {"target": 1.3}}},
    ...     "lm-rope-s1": {"eval": {"128": {"target": 1.2}}}}}
    >>> lm(s, "rope", 128)
    [1.3, 1.2]
    """
    out = []
    for seed in seeds(study, encoding):
        ev = _unit(study, f"lm-{encoding}-s{seed}")["eval"][str(n)]
        if ev is None:
            return None
        out.append(ev[metric])
    return out


def baseline(study: dict, kind: str, n: int | None = None, metric: str = "target", *,
             on: str = "seen", encoding: str = "rope") -> list[float]:
    """A baseline's loss: ``kind`` ``"ngram"`` (the 5-gram) or ``"cache"`` (the 5-gram with
    the copy cache over the last ``n`` bytes).  ``on="seen"``: counted on the windows each
    seed's models saw, one value per seed of ``encoding``; ``on="split"``: on the whole
    training split, one value."""
    field = "ngram" if kind == "ngram" else f"cache{n}"
    if kind not in ("ngram", "cache") or (kind == "cache") != (n is not None):
        raise ValueError(f"kind must be 'ngram' (no n) or 'cache' (with n), got {kind!r}, "
                         f"n={n!r}")
    names = [f"s{s}" for s in seeds(study, encoding)] if on == "seen" else ["split"]
    return [_unit(study, f"baseline-{name}")[field][metric] for name in names]


def paired(a: list[float], b: list[float]) -> dict:
    """``a - b`` paired by seed: :func:`.stats.paired` (the mean, its 95 % interval
    ``lo``/``hi``, ``separated``) and ``below``, the number of seeds with ``a < b``.

    >>> r = paired([1.0, 1.1, 1.2], [1.5, 1.5, 1.6])
    >>> round(r["mean"], 3), r["below"], r["separated"]
    (-0.433, 3, True)
    """
    return {**stats.paired(a, b), "below": sum(x < y for x, y in zip(a, b, strict=True))}


def truncated(study: dict, encoding: str, metric: str = "target") -> list[float]:
    """The model reading only its last L bytes, per seed: its loss at the training length
    (the same targets, the history cut to L)."""
    values = lm(study, encoding, train_length(study), metric)
    if values is None:  # every model reads its training length
        raise ValueError(f"the {encoding} model cannot read its training length")
    return values


def history_gain(study: dict, encoding: str, n: int, metric: str = "target") -> list[float]:
    """Loss at ``n`` minus loss at the training length, per seed: below zero where the
    longer history helped, above where reading it cost (truncating to the last L bytes
    would have scored the loss at L)."""
    at_n, at_L = lm(study, encoding, n, metric), truncated(study, encoding, metric)
    if at_n is None:
        raise ValueError(f"the {encoding} model cannot read {n} bytes")
    return [x - y for x, y in zip(at_n, at_L, strict=True)]


def scaled(study: dict, kind: str, n: int | str, metric: str = "target") -> list[float]:
    """The RoPE models read at ``n`` with scaling rule ``kind`` at the matched factor
    ``n / L``, per seed (``n="fixed"``: at L with the fixed factor)."""
    return [_unit(study, f"scale-s{seed}")[kind][str(n)][metric]
            for seed in seeds(study, "rope")]


def finetune_curve(study: dict, arm: str, metric: str = "target") -> dict[int, list[float]]:
    """The fine-tuning arm's loss at its length after each number of steps, per seed."""
    n = str(study["protocol"]["finetune"]["factor"] * train_length(study))
    out: dict[int, list[float]] = {}
    for seed in seeds(study, "rope"):
        for step, ev in _unit(study, f"finetune-{arm}-s{seed}")["curve"].items():
            out.setdefault(int(step), []).append(ev[n][metric])
    return dict(sorted(out.items()))


def share_recovered(study: dict, arm: str, step: int = 0) -> list[float]:
    """The share of the fine-tuned control's gain that ``arm`` has after ``step`` steps,
    per seed: ``(plain₀ − arm_step) / (plain₀ − plain_last)``, where ``plain_last`` is the
    unscaled model after the longest fine-tuning (the reference)."""
    plain, mine = finetune_curve(study, "plain"), finetune_curve(study, arm)
    last = max(plain)
    return [(p0 - a) / (p0 - ref) for p0, a, ref in
            zip(plain[0], mine[step], plain[last], strict=True)]


def task_runs(study: dict, task: str, encoding: str) -> list[dict]:
    """The runs of ``task`` with ``encoding`` at its chosen rate, one per seed."""
    tp = study["protocol"]["tasks"]
    grid = [_unit(study, f"{task}-{encoding}-s0-lr{lr:g}") for lr in tp[task]["lrs"]]
    best = min(grid, key=lambda u: (not u["learned"], u["steps"], -u["valid"]))
    lr = best["params"]["lr"]
    return [_unit(study, f"{task}-{encoding}-s{seed}-lr{lr:g}") for seed in tp["seeds"]]


def task_solved(study: dict, task: str, encoding: str, length: int, *,
                threshold: float = 0.9) -> dict:
    """Of the seeds that learned ``task`` in training, how many solve it at ``length``
    (exact match on at least ``threshold`` of the sequences; for passkey at every
    depth): ``{"k", "n", "lo", "hi"}`` with a 95 % Wilson interval on k / n."""
    runs = [u for u in task_runs(study, task, encoding) if u["learned"]]
    k = 0
    for u in runs:
        got = u["test"][str(length)]
        if got is None:
            continue
        scores = [got["exact"]] if task == "copy" else [d["exact"] for d in got.values()]
        k += min(scores) >= threshold
    if not runs:
        return {"k": 0, "n": 0, "lo": 0.0, "hi": 1.0}
    w = stats.wilson(k, len(runs))
    return {"k": k, "n": len(runs), "lo": w["lo"], "hi": w["hi"]}
