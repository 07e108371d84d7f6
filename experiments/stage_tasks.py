"""The synthetic tasks' stage (copy and passkey).  Keyed on its own import closure (with the
language models' stage, whose ``Runner`` builds each task model's configuration), so its
protocol can change without making the language models stale.

The protocol, for each task and encoding (the embedding scale is the one tuned on the
language model):

* **rates**: seed 0 is trained at every rate of the task's ``lrs`` (log-spaced); the
  chosen rate is the one that reaches the target accuracy in the fewest steps, or, where
  none reaches it, the one with the best in-distribution accuracy at the cap.  A unit is
  keyed on its own rate, not on the grid, so widening the grid trains only the new rates
  (and the seeds of an encoding whose choice moves);
* **training to a target**: every ``check_every`` steps the in-distribution validation
  accuracy (per symbol, teacher-forced, on sequences drawn like the training ones from a
  stream no training batch uses) is measured, and training stops once it reaches
  ``target``; ``steps`` is the cap.  Each unit records whether it ``learned`` (reached
  the target) and after how many steps, so extrapolation can be reported over the seeds
  that learned, as k of n;
* **evaluation**: at every test length, teacher-forced per-symbol accuracy and exact
  match, and for copy the same strings written free-running.
"""

from __future__ import annotations

import numpy as np

from experiments.stage_lm import Runner
from posenc.analysis.experiments import tasks as K


def task_unit(runner: Runner, name: str, key: str, enc: str, seed: int, lr: float,
              lm_chosen: dict, steps: int | None = None, warmup: int | None = None) -> dict:
    """One run of task ``name`` (see the module's docstring): encoding ``enc``, ``seed``
    and rate ``lr``, trained to the target or the cap (the task's ``steps``, or
    ``steps`` where given) and tested, stored as unit ``key``.  ``warmup`` replaces the
    schedule's warm-up (a tenth of the cap) with that many steps."""
    tc = runner.config[name]
    if steps is not None:
        tc = {**tc, "steps": steps}
    if warmup is not None:
        tc = {**tc, "warmup": warmup}
    if name == "copy":
        maker = K.copy_maker(tuple(tc["m"]))
        train_length = 2 * tc["m"][1] + 1
    else:
        maker = K.passkey_maker(tuple(tc["total"]))
        train_length = tc["total"][1] - 1

    def evaluate(model):
        if name == "copy":
            return K.eval_copy(model, tc["eval_m"], n=tc["n_eval"], seed=seed, free=True)
        return K.eval_passkey(model, tc["eval_totals"], tc["depths"], n=tc["n_eval"],
                              seed=seed)

    def valid(model):
        # sequences drawn like the training ones, from a stream no training batch uses
        rng = np.random.default_rng(99_999)
        return K.score(model, lambda b: maker(b, rng), tc["n_valid"])["symbol"]

    def fn():
        cfg = runner.cfg(enc, lm_chosen[enc]["embed_scale"], train_length)
        checks = []

        def stop(model):
            checks.append(valid(model))
            return checks[-1] >= tc["target"]

        res = K.train_task(cfg, maker, steps=tc["steps"], batch=tc["batch"], lr=lr,
                           seed=seed, progress=runner.progress, device=runner.device,
                           desc=name, stop=stop, check_every=tc["check_every"],
                           warmup=tc.get("warmup"))
        acc = checks[-1] if checks and res.steps % tc["check_every"] == 0 else \
            valid(res.model)
        return {"encoding": enc, "seed": seed, "lr": lr, "losses": res.losses,
                "train_seconds": res.seconds, "steps": res.steps, "valid": acc,
                "learned": acc >= tc["target"],
                "checks": [[tc["check_every"] * (i + 1), a] for i, a in enumerate(checks)],
                "test": evaluate(res.model)}
    # keyed on the unit's own rate and the section less its grid, so a grid that grows
    # leaves the units it already holds valid (the section passed here replaces the
    # whole one the runner would add)
    section = {k: v for k, v in tc.items() if k != "lrs"}
    return runner.unit(key, fn, {name: section, "lr": lr,
                                 "embed_scale": lm_chosen[enc]["embed_scale"]})


def task(runner: Runner, name: str, lm_chosen: dict) -> dict:
    """Train and test one synthetic task (see the module's docstring)."""
    tc = runner.config[name]
    grid, chosen, runs = [], {}, []
    for enc in runner.encodings:
        cands = [task_unit(runner, name, f"{name}grid-{enc}-lr{lr:g}", enc, 0, lr,
                           lm_chosen) for lr in tc["lrs"]]
        grid += cands
        best = min(cands, key=rank)
        chosen[enc] = {"lr": best["lr"], "learned": best["learned"]}
        runs.append(best)
        for seed in runner.config["seeds"][1:]:
            runs.append(task_unit(runner, name, f"{name}-{enc}-s{seed}", enc, seed,
                                  best["lr"], lm_chosen))
    return {"grid": grid, "chosen": chosen, "runs": runs}


def rank(unit: dict) -> tuple:
    """How a rate's seed-0 run ranks (lower is better): reaching the target, then fewer
    steps, then higher in-distribution accuracy.

    >>> a = {"learned": True, "steps": 800, "valid": 0.99}
    >>> b = {"learned": True, "steps": 500, "valid": 0.991}
    >>> c = {"learned": False, "steps": 3000, "valid": 0.98}
    >>> sorted([a, b, c], key=rank) == [b, a, c]
    True
    """
    return (not unit["learned"], unit["steps"], -unit["valid"])
