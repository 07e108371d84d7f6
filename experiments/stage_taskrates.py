"""The synthetic tasks' checks: does how many seeds learn a task depend on the rate the
protocol chose, or on its cap of steps?  Keyed on its own import closure (this module and
the tasks' stage it reads), so adding it left the tasks' units as they were.

Both checks follow rules fixed before their runs, and train through the same code as every
task run (:func:`~experiments.stage_tasks.task_unit`):

* **rates**: the tasks' stage chooses each encoding's rate on seed 0 alone, the rate at
  which seed 0 reaches the target in the fewest steps (:func:`~experiments.stage_tasks.rank`).
  A rate that is fast for one seed need not be one at which most seeds learn, so for every
  task and encoding where some seeds did not learn at the chosen rate, seeds 1-4 are
  trained at each *other* rate of the grid at which seed 0 learned (seed 0's run at that
  rate is its grid unit).  An encoding where every seed learned, or where seed 0 learned at
  no other rate, has nothing to check;
* **caps**: "did not learn" means "not within the cap", so every seed that stopped at the
  cap without learning at its encoding's chosen rate trains again from the start, at that
  rate, with :data:`CAP_FACTOR` times the cap (the schedule stretched to the new length);
* **warm-ups**: a longer cap changes three things at once: more steps, a longer warm-up
  (a tenth of the cap) and a slower decay.  So every seed that the cap check turned into
  one that learned trains once more, at the first cap, with the longer cap's warm-up:
  if it learns, the warm-up made the difference; if not, the slower decay or the steps.
"""

from __future__ import annotations

from experiments.stage_tasks import task_unit

#: how many times the task's cap of steps the cap check trains for
CAP_FACTOR = 2


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


def task_caps(runner, name: str, lm_chosen: dict, res: dict) -> list[dict]:
    """The cap check's runs for task ``name``: each seed that stopped at the cap without
    learning, at its encoding's chosen rate, trained again with :data:`CAP_FACTOR` times
    the steps (a unit of the rate check's kind, keyed on its cap)."""
    steps = CAP_FACTOR * runner.config[name]["steps"]
    return [task_unit(runner, name, f"{name}rate-{r['encoding']}-lr{r['lr']:g}-cap{steps}"
                      f"-s{r['seed']}", r["encoding"], r["seed"], r["lr"], lm_chosen,
                      steps=steps)
            for r in res["runs"] if not r["learned"]]


def task_warmups(runner, name: str, lm_chosen: dict, res: dict) -> list[dict]:
    """The warm-up check's runs for task ``name``: each seed of the cap check
    (``res["caps"]``) that learned there, trained again at the task's own cap with the
    longer cap's warm-up (a unit of the rate check's kind, keyed on its warm-up)."""
    steps = runner.config[name]["steps"]
    warmup = max(1, CAP_FACTOR * steps // 10)
    return [task_unit(runner, name, f"{name}rate-{r['encoding']}-lr{r['lr']:g}-warm{warmup}"
                      f"-s{r['seed']}", r["encoding"], r["seed"], r["lr"], lm_chosen,
                      warmup=warmup)
            for r in res["caps"] if r["learned"]]
