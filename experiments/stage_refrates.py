"""Were the references trained at a fair rate?  A reference (:meth:`experiments.stage_lm.
Runner.references`) trains at ``f`` times the training length with the same bytes per step
(``f`` times fewer windows per batch) at the rate tuned for the models of length ``L``.  A
reference worse than those models may then be worse for its rate, not for its windows.  The
check, fixed before its results were seen:

1. on seed 0, for each reference's encoding and length, train at every rate of the
   language models' grid (``lm.lrs``), the reference's own rate read from its stored unit
   rather than trained again, and score each on the validation text at the reference's own
   length (a ``refvalid`` unit per model);
2. where the best rate lies on an edge of the grid, extend the grid past that edge, at most
   ``max_extensions`` times (as the language models' tuning does);
3. where the best rate is not the reference's own, train the other seeds at it
   (``reftuned`` units), evaluate them on the test chunks and read each again at every
   length up to its own (as :mod:`experiments.stage_context` reads the references).

Keyed on its own import closure, so adding it left every other unit as it was; that
closure includes the language models' stage, whose ``Runner.lm_train`` trains the grid and
the retrained units.  A grid
or retrained unit is keyed on its full training settings (as every trained model is); the
validation unit on the model it reads and the validation settings.
"""

from __future__ import annotations

from experiments.rategrid import search
from experiments.stage_context import reference_context, weights_digest
from experiments.stage_lm import Runner
from posenc.analysis.experiments import corpus as C
from posenc.analysis.experiments import train as T


def _valid(runner: Runner, key: str, cfg, n: int) -> dict:
    """Unit ``refvalid-<key>``: the model ``key`` scored on the validation text's chunks at
    length ``n`` (its own training length), the same target bytes as every other rate."""
    lm = runner.config["lm"]

    def fn():
        model = runner.load(cfg, key)
        chunks = C.eval_chunks(runner.corpus.valid, max_length=n, target=lm["target"],
                               n_chunks=lm["valid_chunks"])
        return {"reads": key, "encoding": cfg.encoding, "length": n,
                "weights": weights_digest(model),
                "valid": T.eval_lm(model, runner.corpus.valid, chunks, [n],
                                   bucket=lm["bucket"])[n]["target"]}
    return runner.unit(f"refvalid-{key}", fn,
                       {"model": runner._digests[key],
                        "valid": {"length": n, "target": lm["target"],
                                  "n_chunks": lm["valid_chunks"], "bucket": lm["bucket"]}})


def reference_rates(runner: Runner, chosen: dict, references: list[dict]) -> dict:
    """The rate check of every reference length and encoding (steps 1-3 of the module's
    docstring).  Returns ``{"grid": [...], "chosen": [...], "tuned": [...],
    "tuned_context": [...]}``: every grid point with its validation loss at the reference's
    length, the chosen rate of each ``(encoding, train_length)`` beside the reference's
    own, and the retrained seeds (empty where the reference's own rate won)."""
    rf, lm = runner.config["references"], runner.config["lm"]
    if 0 not in rf["seeds"]:
        raise ValueError(f"references.seeds must include seed 0 (the rate check tunes on "
                         f"it), got {rf['seeds']}")
    max_ext = int(runner.config["tuning_grid"]["max_extensions"])
    out = {"grid": [], "chosen": [], "tuned": [], "tuned_context": []}
    for enc in rf["encodings"]:
        if enc not in chosen:
            continue
        own_lr, scale = chosen[enc]["lr"], chosen[enc]["embed_scale"]
        for f in rf["factors"]:
            n, batch = runner.L * int(f), max(1, lm["batch"] // int(f))
            cfg = runner.cfg(enc, scale, train_length=n)
            own = next(r for r in references
                       if r["encoding"] == enc and r["train_length"] == n and r["seed"] == 0)

            def score(lr, enc=enc, n=n, batch=batch, cfg=cfg, own=own, own_lr=own_lr):
                key = own["key"] if lr == own_lr else f"refgrid-{enc}-L{n}-lr{lr:g}"
                if key != own["key"]:
                    runner.lm_train(key, cfg, 0, lr, lm["steps"], batch=batch)
                return {"encoding": enc, "train_length": n, "lr": lr, "key": key,
                        "valid": _valid(runner, key, cfg, n)["valid"]}
            runs, best = search(lm["lrs"], own_lr, score, max_ext, runner._beyond)
            out["grid"] += sorted(runs.values(), key=lambda g: g["lr"])
            out["chosen"].append({"encoding": enc, "train_length": n, "lr": best,
                                  "own_lr": own_lr, "grid": sorted(runs)})
            if best == own_lr:
                continue
            for seed in rf["seeds"]:
                key = (runs[best]["key"] if seed == 0
                       else f"reftuned-{enc}-L{n}-lr{best:g}-s{seed}")
                run = runner.lm_train(key, cfg, seed, best, lm["steps"], batch=batch)
                out["tuned"].append(runner.lm_test(run, cfg))
    out["tuned_context"] = reference_context(runner, out["tuned"])
    return out
