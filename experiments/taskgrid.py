"""The tasks' rate grid refined where seed 0 learned at no rate.  Not a stage: it has no
units of its own.  The runs it asks for are the tasks' stage's own kinds, trained by
:func:`experiments.stage_tasks.task_unit` under that stage's key, so adding it left every
stored unit as it was.

The rule, fixed before its runs: for each task named in the tier's ``task_refine`` and
each encoding whose seed 0 reached the target at no rate of the task's grid, seed 0 is also
trained at the log-midpoints between the best of those rates and each of its grid
neighbours (:func:`midpoints`), once.  The choice is then made again over all of them by
the stage's own ranking (:func:`experiments.stage_tasks.rank`); where a midpoint wins, the
encoding's other seeds train at it (the stage's own kind of unit, keyed on the rate as well,
``{task}-{encoding}-lr{rate}-s{seed}``, so they never take the place of the stage's seeds
at its own choice, which the stage still trains and the result keeps as ``replaced``).
So "learned at no rate" means at no rate of a grid fine enough to find a narrow optimum
next to the best one tried, not only at the grid's points.
"""

from __future__ import annotations

import math

from experiments.stage_tasks import rank, task_unit


def midpoints(lrs, lr: float) -> list[float]:
    """The log-midpoints (geometric means, to three significant digits) between rate ``lr``
    of grid ``lrs`` and each of its neighbours in the grid (one where ``lr`` is at an edge).

    >>> midpoints([1e-3, 3e-3, 1e-2, 3e-2, 1e-1], 3e-2)
    [0.0173, 0.0548]
    >>> midpoints([1e-3, 3e-3], 1e-3)
    [0.00173]
    """
    grid = sorted(float(x) for x in lrs)
    if float(lr) not in grid:
        raise ValueError(f"lr must be a rate of the grid {grid}, got {lr!r}")
    i = grid.index(float(lr))
    return [float(f"{math.sqrt(grid[j] * grid[i]):.3g}") for j in (i - 1, i + 1)
            if 0 <= j < len(grid)]


def refine(runner, name: str, lm_chosen: dict, res: dict) -> dict:
    """The tasks' stage result ``res`` for task ``name`` with its grid refined (see the
    module's docstring) where the tier's ``task_refine`` names the task; ``res`` itself
    where it does not.  Each refined encoding records ``refined``: the midpoints trained;
    ``replaced`` holds the stage's runs of an encoding whose choice moved."""
    if name not in (runner.config.get("task_refine") or []):
        return res
    lrs = runner.config[name]["lrs"]
    grid, chosen, runs = list(res["grid"]), dict(res["chosen"]), list(res["runs"])
    replaced: list[dict] = []
    for enc, pick in res["chosen"].items():
        if pick["learned"]:
            continue
        mids = midpoints(lrs, pick["lr"])
        cands = [g for g in grid if g["encoding"] == enc]
        extra = [task_unit(runner, name, f"{name}grid-{enc}-lr{lr:g}", enc, 0, lr, lm_chosen)
                 for lr in mids]
        grid += extra
        best = min(cands + extra, key=rank)
        chosen[enc] = {"lr": best["lr"], "learned": best["learned"], "refined": mids}
        if best["lr"] == pick["lr"]:
            continue
        replaced += [r for r in runs if r["encoding"] == enc]
        runs = [r for r in runs if r["encoding"] != enc] + [best] + [
            task_unit(runner, name, f"{name}-{enc}-lr{best['lr']:g}-s{seed}", enc, seed,
                      best["lr"], lm_chosen)
            for seed in runner.config["seeds"][1:]]
    return {**res, "grid": grid, "chosen": chosen, "runs": runs, "replaced": replaced}
