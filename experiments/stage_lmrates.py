"""Does seed 0's choice of setting hold on the other seeds?  Each language model's rate and
embedding scale are chosen on seed 0 alone (:meth:`experiments.stage_lm.Runner.grid`), and
a grid point that lost on seed 0 by less than one seed's spread could win on the others.
The check, fixed before its results were seen, uses the protocol's own yardstick for a
ranking too close to call (the one ``lm_more_seeds`` applies):

1. for each encoding, the standard deviation over the protocol's seeds of the validation
   loss at the chosen setting (the seeds' own units);
2. every other grid point whose seed-0 validation loss is within that of the chosen one's
   is a *rival*; each rival is trained on the other seeds as well (``lmrival`` units, the
   same steps and batch) and evaluated on the test chunks, seed 0 being its grid unit.

Nothing is retrained at a rival's setting: the check reports, seed by seed, whether the
chosen setting also wins on the other seeds and what the rival scores on the test chunks.
Keyed on its own import closure (with the language models' stage that trains its units),
so adding it left every other unit as it was.
"""

from __future__ import annotations

import statistics

from experiments.stage_lm import Runner


def rivals(runner: Runner, lm: dict) -> dict:
    """The check (steps 1-2 of the module's docstring) on ``lm`` (:meth:`Runner.lm`'s
    result).  Returns ``{"rivals": [...], "runs": [...]}``: for each rival its encoding,
    rate, scale, the chosen setting's, the seed spread it was held to and its seed-0 gap;
    and every rival run, each seed with its validation loss and test losses."""
    seeds = [int(s) for s in runner.config["seeds"]]
    if 0 not in seeds or len(seeds) < 2:
        raise ValueError(f"seeds must include seed 0 and at least one other, got {seeds}")
    steps = runner.config["lm"]["steps"]
    out: dict = {"rivals": [], "runs": []}
    for enc, pick in lm["chosen"].items():
        own = [r for r in lm["runs"] if r["encoding"] == enc and r["seed"] in seeds]
        grid = [g for g in lm["grid"] if g["encoding"] == enc]
        best = next(g for g in grid if (g["lr"], g["embed_scale"])
                    == (pick["lr"], pick["embed_scale"]))
        spread = statistics.stdev(r["valid"] for r in own)
        for g in sorted(grid, key=lambda g: (g["lr"], g["embed_scale"])):
            gap = g["valid"] - best["valid"]
            if g is best or gap > spread:
                continue
            out["rivals"].append({"encoding": enc, "lr": g["lr"],
                                  "embed_scale": g["embed_scale"], "chosen": dict(pick),
                                  "spread": spread, "gap": gap})
            cfg = runner.cfg(enc, g["embed_scale"])
            for seed in seeds:
                key = (g["key"] if seed == 0 else
                       f"lmrival-{enc}-lr{g['lr']:g}-x{g['embed_scale']:g}-s{seed}")
                run = runner.lm_train(key, cfg, seed, g["lr"], steps)
                out["runs"].append(runner.lm_test(run, cfg))
    return out
