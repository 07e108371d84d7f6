"""The synthetic tasks' rate check: does how many seeds learn a task depend on the rate the
protocol chose?  Keyed on its own import closure (this module and the tasks' stage it
reads), so adding it left the tasks' units as they were.

The tasks' stage chooses each encoding's rate on seed 0 alone: the rate at which seed 0
reaches the target in the fewest steps (:func:`~experiments.stage_tasks.rank`).  A rate
that is fast for one seed need not be one at which most seeds learn, so, by a rule fixed
before these runs, for every task and encoding where some seeds did not learn at the chosen
rate, seeds 1-4 are trained at each *other* rate of the grid at which seed 0 learned
(seed 0's run at that rate is its grid unit), through the same code as every task run
(:func:`~experiments.stage_tasks.task_unit`).  An encoding where every seed learned, or
where seed 0 learned at no other rate, has nothing to check.
"""

from __future__ import annotations

from experiments.stage_tasks import task_unit


def task_rates(runner, name: str, lm_chosen: dict, res: dict) -> list[dict]:
    """The rate check's runs for task ``name`` (``res``: the tasks' stage results for it):
    for each checked encoding and rate, seed 0's grid unit and seeds 1-4, in grid order."""
    out: list[dict] = []
    for enc, chosen in res["chosen"].items():
        runs = [r for r in res["runs"] if r["encoding"] == enc]
        if all(r["learned"] for r in runs):
            continue
        for g in res["grid"]:
            if g["encoding"] != enc or g["lr"] == chosen["lr"] or not g["learned"]:
                continue
            out.append(g)
            for seed in runner.config["seeds"][1:]:
                out.append(task_unit(runner, name, f"{name}rate-{enc}-lr{g['lr']:g}-s{seed}",
                                     enc, seed, g["lr"], lm_chosen))
    return out
