"""Were the RoPE ablation's arms trained at a fair rate?  Each arm
(:meth:`experiments.stage_lm.Runner.ablation`: RoPE with another base or head width) trains
at the rate tuned for the protocol's own RoPE (base 10^4 at the model's head width).  An
arm worse than that model may then be worse for its rate, not for its wavelengths.  The
check, fixed before its results were seen, is the references' check
(:mod:`experiments.stage_refrates`) applied to the arms:

1. on seed 0, for each arm other than the protocol's own, train at every rate of the
   language models' grid (``lm.lrs``), the arm's own rate read from its stored unit
   rather than trained again, and score each by its validation loss at the training
   length (the score the language models' tuning uses, stored with each trained unit);
2. where the best rate lies on an edge of the grid, extend the grid past that edge, at most
   ``max_extensions`` times (:func:`experiments.rategrid.search`);
3. where the best rate is not the arm's own, train the other seeds at it (``abltuned``
   units) and evaluate them on the test chunks.

The embedding scale stays RoPE's chosen one: the check asks whether the rate handicapped
an arm, as the references' check does.  Keyed on its own import closure, so adding it
left every other unit as it was; a grid or retrained unit is keyed on its full training
settings, as every trained model is, and the stage imports the language models' stage
that trains them, so its key covers their training code too.
"""

from __future__ import annotations

from experiments.rategrid import search
from experiments.stage_lm import Runner
from posenc.analysis.experiments.models import ModelConfig


def _arms(runner: Runner) -> list[tuple[float, int]]:
    """The ablation's ``(base, head_dim)`` arms other than the protocol's own model."""
    ab, model = runner.config["ablation"], runner.config["model"]
    main_head = model["d_model"] // model["n_heads"]
    return [(float(base), int(hd)) for hd in ab["head_dims"] for base in ab["bases"]
            if not (int(hd) == main_head and float(base) == ModelConfig.rope_base)]


def ablation_rates(runner: Runner, chosen: dict, ablation: list[dict]) -> dict:
    """The rate check of every ablation arm (steps 1-3 of the module's docstring).
    Returns ``{"grid": [...], "chosen": [...], "tuned": [...]}``: every grid point with its
    validation loss, the chosen rate of each ``(rope_base, head_dim)`` beside the arm's
    own, and the retrained seeds, evaluated (empty where the arm's own rate won)."""
    ab, lm = runner.config["ablation"], runner.config["lm"]
    if 0 not in ab["seeds"]:
        raise ValueError(f"ablation.seeds must include seed 0 (the rate check tunes on "
                         f"it), got {ab['seeds']}")
    out = {"grid": [], "chosen": [], "tuned": []}
    if "rope" not in chosen:
        return out
    max_ext = int(runner.config["tuning_grid"]["max_extensions"])
    own_lr, scale = chosen["rope"]["lr"], chosen["rope"]["embed_scale"]
    d = runner.config["model"]["d_model"]
    for base, hd in _arms(runner):
        cfg = runner.cfg("rope", scale, rope_base=base, n_heads=d // hd)
        own = [r for r in ablation
               if (r["rope_base"], r["head_dim"], r["seed"]) == (base, hd, 0)]
        if len(own) != 1:
            raise ValueError(f"ablation must hold seed 0 of the arm base {base:g}, head "
                             f"width {hd} once, got {len(own)}")
        own = own[0]

        def score(lr, base=base, hd=hd, cfg=cfg, own=own):
            run = own if lr == own_lr else runner.lm_train(
                f"ablgrid-rope-b{base:g}-h{hd}-lr{lr:g}", cfg, 0, lr, lm["steps"])
            return {"rope_base": base, "head_dim": hd, "lr": lr, "key": run["key"],
                    "valid": run["valid"]}
        runs, best = search(lm["lrs"], own_lr, score, max_ext, runner._beyond)
        out["grid"] += [runs[lr] for lr in sorted(runs)]
        out["chosen"].append({"rope_base": base, "head_dim": hd, "lr": best,
                              "own_lr": own_lr, "grid": sorted(runs)})
        if best == own_lr:
            continue
        for seed in ab["seeds"]:
            key = (runs[best]["key"] if seed == 0
                   else f"abltuned-rope-b{base:g}-h{hd}-lr{best:g}-s{seed}")
            run = runner.lm_train(key, cfg, seed, best, lm["steps"])
            out["tuned"].append(runner.lm_test(run, cfg))
    return out
