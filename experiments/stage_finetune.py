"""The fine-tuning stage: RoPE models trained at the training length ``L``, trained further
at ``factor * L``, and the passkey probe that asks whether any model fetches a number from
far back.  Keyed on its own import closure (with the language models' stage, whose
``Runner`` loads every model a unit reads), so its protocol can change without making the
language models stale.

* **Arms**: ``plain`` (no scaling: the control), ``pi`` (position interpolation, Chen et
  al.), ``ntk`` (the static NTK-aware base) and ``yarn`` (Peng et al.), each scaled for
  the factor, then trained for ``steps`` at the longer length with the same bytes per step
  as the pre-training (the batch divided by the factor).
* **Rates**: seed 0 of every arm at each rate of ``lrs`` (extended past an edge where the
  best lands, ``max_extensions`` times at most); the one with the lowest validation loss
  at the longer length is the arm's rate for the other seeds.  ``finetune_more_seeds`` names
  arms that are fine-tuned from further seeds' models as well (ten seeds where the
  protocol's rule asks for them: a comparison within one seed standard deviation).
* **Evaluation**: the test losses at every length (fixed targets, far-identifier targets),
  and the passkey probe (:mod:`posenc.analysis.experiments.probe`) at every length.
* **Probe of the models not fine-tuned**: the RoPE and ALiBi models at ``L`` and the
  references trained at ``factor * L``, so the fine-tuned arms have a floor and a ceiling.
"""

from __future__ import annotations

from experiments.stage_lm import Runner
from posenc.analysis.experiments import corpus as C
from posenc.analysis.experiments import probe as P
from posenc.analysis.experiments import train as T
from posenc.analysis.experiments.rules import scaling_parameters

ARMS = ("plain", "pi", "ntk", "yarn")


def arm_parameters(arm: str, factor: float, L: int, head_dim: int, base: float) -> dict | None:
    """The ``rope_parameters`` an arm trains with (``None``: the model's own).

    >>> arm_parameters("plain", 4, 128, 16, 1e4) is None
    True
    >>> arm_parameters("pi", 4, 128, 16, 1e4)
    {'rope_type': 'linear', 'factor': 4.0}
    """
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
    return None if arm == "plain" else scaling_parameters(arm, factor, L, head_dim, base)


def probe_lengths(runner: Runner) -> list[int]:
    return [n for n in runner.lengths if n >= P.MIN_LENGTH]


def probe(runner: Runner, label: str, enc: str, key: str, cfg) -> dict:
    """The passkey probe of trained model ``key`` (not trained further)."""
    pr = runner.config["finetune"]["probe"]

    def fn():
        model = runner.load(cfg, key)
        return {"label": label, "encoding": enc, "train_length": cfg.train_length,
                "probe": P.passkey_scores(model, runner.corpus.test, probe_lengths(runner),
                                          pr["depths"], n=pr["n"], seed=pr["seed"])}
    return runner.unit(f"probe-{label}", fn, {"model": runner._digests[key]})


def more_models(runner: Runner, chosen: dict, arm: str) -> list:
    """The further seeds ``finetune_more_seeds`` names for ``arm`` (none if it does not
    name the arm): ``(seed, key, cfg)`` of each seed's RoPE model at ``L``, trained by the
    language-model stage's own unit (the one ``lm_more_seeds`` also asks for), so a
    further seed is fine-tuned exactly as seeds 1-4 are."""
    extra = runner.config.get("finetune_more_seeds") or {}
    if arm not in extra.get("arms", []):
        return []
    if not set(extra.get("seeds", [])).isdisjoint(runner.config["seeds"]):
        raise ValueError(f"finetune_more_seeds.seeds must be seeds beyond the protocol's "
                         f"{runner.config['seeds']}, got {extra['seeds']}")
    setting = chosen["rope"]
    cfg = runner.cfg("rope", setting["embed_scale"])
    out = []
    for seed in extra["seeds"]:
        key = runner.lm_key("rope", seed, setting)
        runner.lm_train(key, cfg, seed, setting["lr"], runner.config["lm"]["steps"])
        out.append((seed, key, cfg))
    return out


def finetune(runner: Runner, chosen: dict) -> dict:
    ft, lm = runner.config["finetune"], runner.config["lm"]
    pr = ft["probe"]
    n_ft = runner.L * int(ft["factor"])
    valid = C.eval_chunks(runner.corpus.valid, max_length=n_ft, target=lm["target"],
                          n_chunks=lm["valid_chunks"])
    batch = max(1, lm["batch"] // int(ft["factor"]))
    models = runner._rope_models(chosen)

    def one(name, arm, seed, key, cfg, lr):
        def fn():
            model = runner.load(cfg, key)
            params = arm_parameters(arm, ft["factor"], runner.L, cfg.d_model // cfg.n_heads,
                                    cfg.rope_base)
            if params is not None:
                model.set_rope(params)
            res = T.train_lm(cfg, runner.corpus.train, steps=ft["steps"], batch=batch, lr=lr,
                             seed=1000 + seed, progress=runner.progress, model=model,
                             length=n_ft)
            v = T.eval_lm(res.model, runner.corpus.valid, valid, [n_ft],
                          bucket=lm["bucket"])[n_ft]["target"]
            return {"arm": arm, "seed": seed, "lr": lr, "rope_parameters": params,
                    "losses": res.losses, "train_seconds": res.seconds, "valid": v,
                    "test": T.eval_lm(res.model, runner.corpus.test, runner.chunks,
                                      runner.lengths, bucket=lm["bucket"], far=runner.far),
                    "probe": P.passkey_scores(res.model, runner.corpus.test,
                                              probe_lengths(runner), pr["depths"], n=pr["n"],
                                              seed=pr["seed"])}
        return runner.unit(name, fn, {"model": runner._digests[key], "lr": lr, "arm": arm})

    grid, rates, runs = [], {}, []
    seed0, key0, cfg0 = models[0]
    for arm in ft["arms"]:
        # the rate grid, extended by one log-spaced point past an edge where the best rate
        # lands (at most ``max_extensions`` times), so the chosen rate is inside it
        lrs, cands = sorted(ft["lrs"]), {}
        for round_ in range(1 + int(ft["max_extensions"])):
            for lr in lrs:
                if lr not in cands:
                    cands[lr] = one(f"finetunegrid-{arm}-lr{lr:g}", arm, seed0, key0, cfg0, lr)
            best = min(cands.values(), key=lambda u: u["valid"])
            if len(lrs) < 2 or lrs[0] < best["lr"] < lrs[-1]:
                break
            if round_ < int(ft["max_extensions"]):
                up = best["lr"] == lrs[-1]
                nxt = runner._beyond(lrs, best["lr"], up)
                lrs = lrs + [nxt] if up else [nxt] + lrs
        grid += list(cands.values())
        rates[arm] = best["lr"]
        runs.append(best)
        for seed, key, cfg in models[1:] + more_models(runner, chosen, arm):
            runs.append(one(f"finetune-{arm}-s{seed}", arm, seed, key, cfg, best["lr"]))
    probes = []
    for seed, key, cfg in models:
        probes.append(probe(runner, f"rope-L{runner.L}-s{seed}", "rope", key, cfg))
    if "alibi" in chosen:
        cfg = runner.cfg("alibi", chosen["alibi"]["embed_scale"])
        for seed in runner.config["seeds"]:
            key = runner.lm_key("alibi", seed, chosen["alibi"])
            if key in runner._digests:
                probes.append(probe(runner, f"alibi-L{runner.L}-s{seed}", "alibi", key, cfg))
    for key in sorted(runner._digests):
        if key.startswith("ref-") and key.split("-")[1] in chosen:
            enc, length = key.split("-")[1], int(key.split("-")[2][1:])
            cfg = runner.cfg(enc, chosen[enc]["embed_scale"], train_length=length)
            probes.append(probe(runner, key[len("ref-"):], enc, key, cfg))
    return {"grid": grid, "rates": rates, "runs": runs, "probes": probes}
