"""Read numbers out of ``experiments/results.json`` (schema 3): per-seed values, summaries with
95 % intervals, and paired comparisons.  Pure Python: the chapter and its tests use these
without importing PyTorch.

Every accessor returns one value per seed, in seed order, so two methods can be compared
seed by seed (:func:`stats.paired`).  Losses are nats per byte on the fixed test targets
unless ``metric`` says otherwise (``"window"``: the mean over every position of the window).
"""

from __future__ import annotations

import numpy as np

from . import stats
from .units import unit_kind

SCHEMA = 3

#: the sections every results file has (a section not finished is named in ``pending``)
SECTIONS = ("provenance", "config", "corpus", "chunks", "lm", "scaling", "scaling_matched",
            "references", "references_context", "ablation", "budget", "finetune",
            "finetune_grid", "finetune_rates", "probes", "copy", "passkey", "lm_more_seeds", "far_targets", "pending")
METRICS = ("target", "far", "window")


def check(results) -> None:
    """Raise ``ValueError`` unless ``results`` is a schema-3 results dict."""
    if not isinstance(results, dict) or results.get("schema") != SCHEMA:
        got = results.get("schema") if isinstance(results, dict) else type(results).__name__
        raise ValueError(f"results must be an experiments/results.json dict with schema "
                         f"{SCHEMA}, got schema {got!r}")
    for key in SECTIONS:
        if key not in results:
            raise ValueError(f"results must have a {key!r} entry")


def lengths(results) -> list[int]:
    lm = results["config"]["lm"]
    return [lm["train_length"] * f for f in lm["eval_factors"]]


def _metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    return metric


def _by_seed(rows, metric: str, n: int) -> dict:
    """``{seed: value}`` of ``rows`` at length ``n`` (``None`` where a model cannot read
    ``n`` positions)."""
    _metric(metric)
    out = {}
    for r in sorted(rows, key=lambda r: r["seed"]):
        v = r["test"].get(str(n))
        out[r["seed"]] = None if v is None else v[metric]
    return out


def _values(by_seed: dict, seeds) -> list:
    if seeds is None:
        return list(by_seed.values())
    missing = [s for s in seeds if s not in by_seed]
    if missing:
        raise ValueError(f"seeds must be seeds the file has ({sorted(by_seed)}), got "
                         f"{missing}")
    return [by_seed[s] for s in seeds]


def lm_rows(results, encoding: str) -> list[dict]:
    """Every trained language model of ``encoding`` at its tuned setting: seed 0 and the
    protocol's seeds, and the extra seeds of ``lm_more_seeds``."""
    rows = [r for r in results["lm"]["runs"] + results["lm_more_seeds"]
            if r["encoding"] == encoding]
    if not rows:
        raise ValueError(f"encoding must be one of the trained encodings "
                         f"{sorted(results['lm']['chosen'])}, got {encoding!r}")
    return sorted(rows, key=lambda r: r["seed"])


def lm_seeds(results, encoding: str) -> list[int]:
    return [r["seed"] for r in lm_rows(results, encoding)]


def lm_values(results, encoding: str, n: int, metric: str = "target", *,
              seeds=None) -> list:
    """Per-seed loss of ``encoding`` (trained, tuned setting) at length ``n``, in seed
    order (every seed the file has, or ``seeds``); ``None`` where the model cannot read
    ``n`` positions."""
    return _values(_by_seed(lm_rows(results, encoding), metric, n), seeds)


def scaling_values(results, kind: str, n: int, metric: str = "target", *,
                   mode: str = "fixed") -> list:
    """Per-seed loss of the trained RoPE models with scaling ``kind`` applied without
    training at length ``n``: ``mode`` "fixed" (one factor for every length) or "matched"
    (factor n / L; up to L nothing changes, so the value is RoPE's own)."""
    rows = _series_rows(results, ("scale", kind, mode))
    if mode == "matched" and n <= results["config"]["lm"]["train_length"]:
        seeds = [r["seed"] for r in rows]
        return lm_values(results, "rope", n, metric, seeds=sorted(seeds))
    return list(_by_seed(rows, metric, n).values())


def reference_values(results, encoding: str, train_length: int, n: int,
                     metric: str = "target", *, rate: str = "chosen") -> list:
    """Per-seed loss of the reference ``encoding`` model trained at ``train_length``: at the
    rate its check chose (``rate="chosen"``, what the claims read), or at the first rate,
    the one tuned for ``L`` (``rate="first"``; the same runs where the check kept it)."""
    if rate == "chosen":
        return _series_values(results, ("ref", encoding, train_length), n, metric)
    if rate != "first":
        raise ValueError(f"rate must be 'chosen' or 'first', got {rate!r}")
    rows = [r for r in results["references"]
            if (r["encoding"], r["train_length"]) == (encoding, train_length)]
    if not rows:
        raise ValueError(f"encoding and train_length must name a reference model, got "
                         f"{(encoding, train_length)!r}")
    return list(_by_seed(rows, metric, n).values())


def reference_context_values(results, encoding: str, train_length: int, n: int,
                             metric: str = "target") -> list:
    """Per-seed loss of the reference ``encoding`` model trained at ``train_length`` reading
    ``n`` bytes (``n`` up to ``train_length``), every length from one load of its weights
    (``experiments/stage_context.py``)."""
    rows = _series_rows(results, ("refctx", encoding, train_length))
    read = sorted({int(k) for r in rows for k in r["test"]})
    if n not in read:
        raise ValueError(f"n must be a length the reference was read at, {read}, got {n!r}")
    return list(_by_seed(rows, metric, n).values())


def reference_rate_check(results) -> list[dict]:
    """The references' rate check (``experiments/stage_refrates.py``), one dict per
    reference encoding and length: ``encoding``, ``train_length``, ``own_lr`` (the rate the
    references trained at), ``lr`` (the grid's best on seed 0, by validation loss at the
    reference's own length) and ``valid`` (that loss by rate), in the file's order.  A file
    without the check is a ValueError.

    >>> r = {**dict.fromkeys(SECTIONS, []), "schema": 3, "references_rates": {"chosen": [
    ...      {"encoding": "rope",
    ...      "train_length": 256, "lr": 0.01, "own_lr": 0.01, "grid": [0.003, 0.01]}],
    ...      "grid": [{"encoding": "rope", "train_length": 256, "lr": 0.003, "valid": 1.9},
    ...               {"encoding": "rope", "train_length": 256, "lr": 0.01, "valid": 1.7}]}}
    >>> reference_rate_check(r)[0]["valid"]
    {0.003: 1.9, 0.01: 1.7}
    >>> reference_rate_check({**r, "references_rates": {}})
    Traceback (most recent call last):
    ValueError: results must hold the references' rate check (references_rates, experiments/stage_refrates.py)
    """
    return _rate_check(results, "references_rates", ("encoding", "train_length"),
                       "the references' rate check (references_rates, "
                       "experiments/stage_refrates.py)")


def lm_rival_check(results) -> list[dict]:
    """The check of seed 0's choice of setting (``experiments/stage_lmrates.py``), one dict
    per rival (a grid point within one seed standard deviation of the chosen one on seed 0):
    ``encoding``, ``lr``, ``embed_scale``, ``chosen`` (the chosen setting), ``spread`` and
    ``gap`` (the yardstick and the rival's seed-0 gap), ``seeds``, and the rival minus the
    chosen setting seed by seed (:func:`stats.paired`): ``valid`` on the validation text and
    ``test`` at each test length both read (a learned table none past its rows).  A file
    without the check is a ValueError; a file whose check found no rival gives ``[]``."""
    check(results)
    lv = results.get("lm_rivals")
    if not isinstance(lv, dict) or "rivals" not in lv:
        raise ValueError("results must hold the check of seed 0's choice "
                         "(lm_rivals, experiments/stage_lmrates.py)")
    out = []
    for rv in lv["rivals"]:
        setting = (rv["encoding"], rv["lr"], rv["embed_scale"])
        mine = {r["seed"]: r for r in lv["runs"]
                if (r["encoding"], r["lr"], r["embed_scale"]) == setting}
        chosen = {r["seed"]: r for r in lm_rows(results, rv["encoding"]) if r["seed"] in mine}
        seeds = sorted(set(mine) & set(chosen))
        # the lengths both sides read (a learned table reads none past its rows)
        ns = sorted(int(n) for n in {n for r in mine.values() for n in r["test"]}
                    if all((side[s]["test"].get(n) is not None)
                           for side in (mine, chosen) for s in seeds))
        out.append({**{k: rv[k] for k in ("encoding", "lr", "embed_scale", "chosen",
                                          "spread", "gap")},
                    "seeds": seeds,
                    "valid": stats.paired([mine[s]["valid"] for s in seeds],
                                          [chosen[s]["valid"] for s in seeds]),
                    "test": {n: stats.paired([mine[s]["test"][str(n)]["target"] for s in seeds],
                                             [chosen[s]["test"][str(n)]["target"]
                                              for s in seeds]) for n in ns}})
    return out


def ablation_values(results, base: float, head_dim: int, n: int,
                    metric: str = "target", *, rate: str = "chosen") -> list:
    """Per-seed loss of RoPE with ``base`` and head width ``head_dim`` (the protocol's own
    base and head width are the main runs, over the ablation's seeds): at the rate the
    arm's check chose (``rate="chosen"``, what the claims read), or at the first rate, the
    one tuned for the protocol's own RoPE (``rate="first"``; the same runs where the check
    kept it)."""
    if rate == "chosen":
        return _series_values(results, ("abl", base, head_dim), n, metric)
    if rate != "first":
        raise ValueError(f"rate must be 'chosen' or 'first', got {rate!r}")
    if _is_main(results, ("abl", base, head_dim)):
        return _series_values(results, ("abl", base, head_dim), n, metric)
    rows = [r for r in results["ablation"]
            if (r["rope_base"], r["head_dim"]) == (float(base), head_dim)]
    if not rows:
        raise ValueError(f"base and head_dim must name an ablation arm, got "
                         f"{(base, head_dim)!r}")
    return list(_by_seed(rows, metric, n).values())


def ablation_rate_check(results) -> list[dict]:
    """The ablation's rate check (``experiments/stage_ablrates.py``), one dict per arm other
    than the protocol's own model: ``rope_base``, ``head_dim``, ``own_lr`` (the rate the
    arm trained at, tuned for the protocol's own RoPE), ``lr`` (the grid's best on seed 0,
    by validation loss at the training length) and ``valid`` (that loss by rate), in the
    file's order.  A file without the check is a ValueError.

    >>> r = {**dict.fromkeys(SECTIONS, []), "schema": 3, "ablation_rates": {"chosen": [
    ...      {"rope_base": 500.0, "head_dim": 16, "lr": 0.01, "own_lr": 0.01,
    ...       "grid": [0.003, 0.01]}],
    ...      "grid": [{"rope_base": 500.0, "head_dim": 16, "lr": 0.003, "valid": 1.9},
    ...               {"rope_base": 500.0, "head_dim": 16, "lr": 0.01, "valid": 1.7}]}}
    >>> ablation_rate_check(r)[0]["valid"]
    {0.003: 1.9, 0.01: 1.7}
    >>> ablation_rate_check({**r, "ablation_rates": {}})
    Traceback (most recent call last):
    ValueError: results must hold the ablation's rate check (ablation_rates, experiments/stage_ablrates.py)
    """
    return _rate_check(results, "ablation_rates", ("rope_base", "head_dim"),
                       "the ablation's rate check (ablation_rates, "
                       "experiments/stage_ablrates.py)")


def _rate_check(results, section: str, fields: tuple, what: str) -> list[dict]:
    """A rate check's choices (``section``), one dict per checked model named by
    ``fields``, with its own rate, the chosen one and the validation loss by rate."""
    check(results)
    rc = results.get(section)
    if not rc or not rc.get("chosen"):
        raise ValueError(f"results must hold {what}")
    out = []
    for c in rc["chosen"]:
        name = {f: c[f] for f in fields}
        valid = {g["lr"]: g["valid"] for g in rc["grid"]
                 if all(g[f] == v for f, v in name.items())}
        out.append({**name, "own_lr": c["own_lr"], "lr": c["lr"], "valid": valid})
    return out


def budget_values(results, encoding: str, steps: int, n: int,
                  metric: str = "target") -> list:
    """Per-seed loss of ``encoding`` trained for ``steps`` (the protocol's own steps are
    the main runs, over the budget study's seeds)."""
    return _series_values(results, ("budget", encoding, steps), n, metric)


def budget_steps(results) -> list[int]:
    return sorted({r["steps"] for r in results["budget"]} | {results["config"]["lm"]["steps"]})


def finetune_arms(results) -> list[str]:
    """The fine-tuning arms whose every seed is finished (in the protocol's order)."""
    done = {r["arm"] for r in results["finetune"]}
    return [a for a in results["config"]["finetune"]["arms"] if a in done]


def finetune_rate_margin(results) -> list[dict]:
    """Seed 0's choice of each fine-tuning arm's rate held to the yardstick of the language
    models' check (:func:`lm_rival_check`): one dict per finished arm with ``arm``, ``lr``
    (the chosen rate), ``spread`` (the standard deviation of the validation loss at that
    rate over the protocol's seeds, ``config["seeds"]``), ``runner_up`` and ``gap`` (the
    grid's next-best rate on seed 0 and how much worse its validation loss is) and
    ``rivals`` (the grid's other rates within ``spread`` of the chosen one on seed 0, which
    seed 0 alone could not separate from it).  ``ValueError`` if the file holds no finished
    arm, or an arm's grid has a single rate or fewer than two of the protocol's seeds.

    >>> res = {"schema": SCHEMA, **{k: {} for k in SECTIONS},
    ...        "config": {"seeds": [0, 1, 2], "finetune": {"arms": ["plain"]}},
    ...        "finetune_rates": {"plain": 0.01},
    ...        "finetune_grid": [{"arm": "plain", "lr": 0.01, "valid": 2.00},
    ...                          {"arm": "plain", "lr": 0.03, "valid": 2.05}],
    ...        "finetune": [{"arm": "plain", "seed": s, "valid": v}
    ...                     for s, v in [(0, 2.00), (1, 2.02), (2, 2.04), (5, 3.0)]]}
    >>> m = finetune_rate_margin(res)[0]
    >>> m["runner_up"], round(m["gap"], 3), round(m["spread"], 3), m["rivals"]
    (0.03, 0.05, 0.02, [])
    """
    check(results)
    arms = finetune_arms(results)
    if not arms:
        raise ValueError("results must hold a finished fine-tuning arm (finetune)")
    seeds = set(results["config"]["seeds"])
    out = []
    for arm in arms:
        lr = results["finetune_rates"][arm]
        grid = {g["lr"]: g["valid"] for g in results["finetune_grid"] if g["arm"] == arm}
        own = [r["valid"] for r in results["finetune"] if r["arm"] == arm and r["seed"] in seeds]
        if len(grid) < 2 or lr not in grid or len(own) < 2:
            raise ValueError(f"finetune_grid must hold the chosen rate and another for arm "
                             f"{arm!r}, and finetune two of the protocol's seeds; got rates "
                             f"{sorted(grid)} and {len(own)} seeds")
        spread = float(np.std(own, ddof=1))
        others = sorted((v - grid[lr], r) for r, v in grid.items() if r != lr)
        out.append({"arm": arm, "lr": lr, "spread": spread, "runner_up": others[0][1],
                    "gap": float(others[0][0]),
                    "rivals": sorted(r for g, r in others if g <= spread)})
    return out


def finetune_values(results, arm: str, n: int, metric: str = "target") -> list:
    """Per-seed loss after fine-tuning at the longer length with ``arm``."""
    return _series_values(results, ("ft", arm), n, metric)


def buckets(results, encoding: str, n: int) -> list[list[float]]:
    """Per-seed losses per block of positions at length ``n`` (each a list over blocks)."""
    return [r["test"][str(n)]["buckets"] for r in lm_rows(results, encoding)]


def task_values(results, task: str, encoding: str, key: int, metric: str = "exact",
                depth: float | None = None, *, learned_only: bool = False) -> list:
    """Per-seed accuracy on ``task`` ("copy": ``key`` is the string length m; "passkey":
    ``key`` is the total length, averaged over the depths unless ``depth`` is given), in
    seed order; ``learned_only``: the seeds that learned the task only."""
    if task not in ("copy", "passkey"):
        raise ValueError(f"task must be 'copy' or 'passkey', got {task!r}")
    if metric not in ("exact", "symbol"):
        raise ValueError(f"metric must be 'exact' or 'symbol', got {metric!r}")
    if results[task] is None:
        raise ValueError(f"task {task!r} is not finished in this file (pending: "
                         f"{results['pending'].get(task)})")
    rows = sorted((r for r in results[task]["runs"] if r["encoding"] == encoding
                   and (r["learned"] or not learned_only)), key=lambda r: r["seed"])
    if depth is not None and (task != "passkey" or str(depth) not in
                              map(str, results["config"]["passkey"]["depths"])):
        raise ValueError(f"depth must be one of the passkey's depths "
                         f"{results['config']['passkey']['depths']}, got {depth!r}")
    out: list = []
    for r in rows:
        v = r["test"][str(key)]
        if v is None:
            out.append(None)
        elif task == "copy":
            out.append(v[metric])
        elif depth is None:
            out.append(sum(d[metric] for d in v.values()) / len(v))
        else:
            out.append(v[str(depth)][metric])
    return out


def task_learned(results, task: str, encoding: str) -> dict:
    """How many seeds of ``encoding`` learned ``task`` (reached the in-distribution target
    within the step cap): ``stats.wilson`` of k of n, with the seeds that did."""
    if results[task] is None:
        raise ValueError(f"task {task!r} is not finished in this file (pending: "
                         f"{results['pending'].get(task)})")
    rows = [r for r in results[task]["runs"] if r["encoding"] == encoding]
    if not rows:
        raise ValueError(f"encoding must be one of the trained encodings, got {encoding!r}")
    learned = sorted(r["seed"] for r in rows if r["learned"])
    return {**stats.wilson(len(learned), len(rows)), "seeds": learned}


def _checked_task(results, task: str, part: str, what: str) -> dict:
    """``results[task]``, which must hold its finished ``part`` (the tasks' checks,
    ``experiments/stage_taskrates.py``); ``ValueError`` naming what is pending if not."""
    section = results.get(task)
    if section is None or section.get(part) is None:
        raise ValueError(f"task {task!r} has no finished {what} in this file "
                         f"(pending: {results.get('pending', {}).get(f'{task}_{part}')})")
    return section


def task_rate_check(results, task: str) -> list[dict]:
    """The tasks' rate check (``experiments/stage_taskrates.py``): for each encoding it
    covers, one row per rate, the chosen rate first, each ``stats.wilson`` of the seeds
    that learned at that rate, with ``"encoding"``, ``"lr"``, ``"chosen"`` and the
    learning ``"seeds"``.  Empty where every encoding learned in every seed, or seed 0
    learned at no other rate.

    >>> run = lambda enc, s, lr, ok: {"encoding": enc, "seed": s, "lr": lr, "learned": ok}
    >>> res = {"passkey": {"chosen": {"a": {"lr": 0.01}},
    ...        "runs": [run("a", 0, 0.01, True), run("a", 1, 0.01, False)],
    ...        "rates": [run("a", 0, 0.003, True), run("a", 1, 0.003, True)]}}
    >>> [(r["lr"], r["chosen"], f"{r['k']}/{r['n']}") for r in task_rate_check(res, "passkey")]
    [(0.01, True, '1/2'), (0.003, False, '2/2')]
    """
    section = _checked_task(results, task, "rates", "rate check")
    out: list[dict] = []
    for enc in dict.fromkeys(r["encoding"] for r in section["rates"]):
        lr0 = section["chosen"][enc]["lr"]
        arms = {lr0: [r for r in section["runs"] if r["encoding"] == enc]}
        for r in section["rates"]:
            if r["encoding"] == enc:
                arms.setdefault(r["lr"], []).append(r)
        for lr, rows in arms.items():
            learned = sorted(r["seed"] for r in rows if r["learned"])
            out.append({"encoding": enc, "lr": lr, "chosen": lr == lr0,
                        **stats.wilson(len(learned), len(rows)), "seeds": learned})
    return out


def task_cap_check(results, task: str) -> list[dict]:
    """The tasks' cap check (``experiments/stage_taskrates.py``): for each encoding with
    seeds that did not learn within the cap at its chosen rate, how many of all its seeds
    learn once those train again with a longer cap: ``stats.wilson`` of k of n (a seed
    that learned within the first cap counts as learned), with ``"encoding"``, ``"lr"``,
    ``"steps"`` (the longer cap), ``"rerun"`` (the seeds trained again), ``"seeds"`` (the
    seeds that learned within either cap) and ``"within"`` (those within the first).

    >>> run = lambda s, ok, cap: {"encoding": "a", "seed": s, "lr": 0.01, "learned": ok,
    ...                           "params": {"copy": {"steps": cap}}}
    >>> res = {"copy": {"runs": [run(0, True, 30), run(1, False, 30), run(2, False, 30)],
    ...                 "caps": [run(1, True, 60), run(2, False, 60)]}}
    >>> got = task_cap_check(res, "copy")[0]
    >>> got["steps"], got["rerun"], got["within"], got["seeds"], f"{got['k']}/{got['n']}"
    (60, [1, 2], [0], [0, 1], '2/3')
    """
    section = _checked_task(results, task, "caps", "cap check")
    out: list[dict] = []
    for enc in dict.fromkeys(r["encoding"] for r in section["caps"]):
        runs = [r for r in section["runs"] if r["encoding"] == enc]
        again = {r["seed"]: r for r in section["caps"] if r["encoding"] == enc}
        within = sorted(r["seed"] for r in runs if r["learned"])
        later = sorted(s for s, r in again.items() if r["learned"])
        steps = max(r["params"][task]["steps"] for r in again.values())
        out.append({"encoding": enc, "lr": runs[0]["lr"], "steps": steps,
                    "rerun": sorted(again), "within": within,
                    **stats.wilson(len(within) + len(later), len(runs)),
                    "seeds": sorted(within + later)})
    return out


def task_warmup_check(results, task: str) -> list[dict]:
    """The tasks' warm-up check (``experiments/stage_taskrates.py``): for each encoding
    with seeds that learned only with the cap check's longer cap, how many of those learn
    at the first cap with only the warm-up lengthened: ``stats.wilson`` of k of n, with
    ``"encoding"``, ``"lr"``, ``"warmup"`` (its steps), ``"rerun"`` (the seeds trained
    again), ``"seeds"`` (those that learned), ``"steps"`` (each rerun seed's steps, in
    seed order) and ``"best"`` (the highest in-distribution accuracy among them).

    >>> run = lambda s, ok, st, v: {"encoding": "a", "seed": s, "lr": 0.01, "learned": ok,
    ...                             "steps": st, "valid": v, "params": {"copy": {"warmup": 6}}}
    >>> res = {"copy": {"warmups": [run(1, True, 20, 0.99), run(3, False, 30, 0.9)]}}
    >>> got = task_warmup_check(res, "copy")[0]
    >>> got["warmup"], got["rerun"], got["seeds"], got["steps"], f"{got['k']}/{got['n']}"
    (6, [1, 3], [1], [20, 30], '1/2')
    """
    section = _checked_task(results, task, "warmups", "warm-up check")
    out: list[dict] = []
    for enc in dict.fromkeys(r["encoding"] for r in section["warmups"]):
        rows = sorted((r for r in section["warmups"] if r["encoding"] == enc),
                      key=lambda r: r["seed"])
        learned = [r["seed"] for r in rows if r["learned"]]
        out.append({"encoding": enc, "lr": rows[0]["lr"],
                    "warmup": rows[0]["params"][task]["warmup"],
                    "rerun": [r["seed"] for r in rows], "seeds": learned,
                    "steps": [r["steps"] for r in rows],
                    "best": max(r["valid"] for r in rows),
                    **stats.wilson(len(learned), len(rows))})
    return out


#: the fields of a task unit that its k/n counts and accuracies read
TASK_OUTCOME = ("learned", "steps", "valid", "test")


def task_rerun(results, rerun) -> dict:
    """``results`` with every task seed given its outcome in ``rerun`` instead of the stored
    one, so that every task statistic of this module can be computed again from a re-run.

    ``rerun`` is a recheck report of the task seeds (``experiments/recheck.py
    --task-seeds``): per unit key, its ``outcome`` stored and now.  Every run and replaced
    run of both tasks must be in it with the stored outcome that ``results`` holds
    (``ValueError`` otherwise, naming the unit); ``results`` itself is not changed.

    >>> run = {"key": "copy-a-s1", "encoding": "a", "seed": 1, "learned": True,
    ...        "steps": 300, "valid": 0.99, "test": {"8": None}}
    >>> res = {"copy": {"runs": [run]}, "passkey": {"runs": []}}
    >>> now = {**{f: run[f] for f in TASK_OUTCOME}, "learned": False, "steps": 600}
    >>> rc = {"units": {"copy-a-s1": {"outcome": {
    ...     "stored": {f: run[f] for f in TASK_OUTCOME}, "now": now}}}}
    >>> task_rerun(res, rc)["copy"]["runs"][0]["learned"], run["learned"]
    (False, True)
    """
    units = rerun.get("units") if isinstance(rerun, dict) else None
    if not isinstance(units, dict):
        raise ValueError("rerun must be a recheck report with its 'units' "
                         "(experiments/recheck.py --task-seeds --json)")
    out = dict(results)
    for task in ("copy", "passkey"):
        if results.get(task) is None:
            raise ValueError(f"task {task!r} is not finished in these results")
        sec = dict(results[task])
        for part in ("runs", "replaced"):
            rows = []
            for r in sec.get(part, []):
                row = units.get(r["key"])
                if not (isinstance(row, dict) and "outcome" in row):
                    raise ValueError(f"rerun must hold every task seed of the results, with "
                                     f"its outcome; {r['key']} is not in it")
                if any(row["outcome"]["stored"][f] != r[f] for f in TASK_OUTCOME):
                    raise ValueError(f"{r['key']}: the rerun's stored outcome is not the one "
                                     "in these results (a recheck of other units)")
                rows.append({**r, **{f: row["outcome"]["now"][f] for f in TASK_OUTCOME}})
            if part in sec:
                sec[part] = rows
        out[task] = sec
    return out


def task_extrapolation(results, task: str, encoding: str, key: int, *,
                       threshold: float = 0.5, free: bool = False) -> dict | None:
    """Past the trained lengths, over the seeds that learned only: how many of them get at
    least ``threshold`` of the sequences at ``key`` exactly right (teacher-forced, or
    written from the model's own output with ``free``, copy only), as ``stats.wilson`` of
    k of n; ``None`` where no seed learned (there is nothing to extrapolate) or where the
    model cannot read sequences of that length (a learned table shorter than them)."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    if free and task != "copy":
        raise ValueError("free-running scores exist for the copy task only")
    learned = set(task_learned(results, task, encoding)["seeds"])
    if not learned:
        return None
    hits = read = 0
    for r in results[task]["runs"]:
        if r["encoding"] != encoding or r["seed"] not in learned:
            continue
        v = r["test"][str(key)]
        if v is None:
            continue
        read += 1
        if task == "copy":
            exact = (v["free"] if free else v)["exact"]
        else:
            exact = sum(d["exact"] for d in v.values()) / len(v)
        hits += exact >= threshold
    if read == 0:
        return None
    if read != len(learned):
        raise ValueError(f"the learned seeds of {encoding!r} must all read length {key} or "
                         f"none, got {read} of {len(learned)}")
    return {**stats.wilson(hits, read), "threshold": threshold}


# -- the chapter's family of claims -------------------------------------------------------

def _is_main(results, spec) -> bool:
    """Whether an ablation or budget side names the protocol's own setting (base 10^4 at
    the model's head width, or the protocol's steps): the main runs stand in for it."""
    model, lm = results["config"]["model"], results["config"]["lm"]
    if spec[0] == "abl":
        return float(spec[1]) == 1e4 and spec[2] == model["d_model"] // model["n_heads"]
    return spec[0] == "budget" and spec[2] == lm["steps"]


def _series_rows(results, spec) -> list[dict]:
    """The stored runs a claim's side names: ``("lm", enc)``, ``("scale", kind, mode)``,
    ``("ref", enc, train_length)``, ``("refctx", enc, train_length)`` (a reference read at
    every length up to its own), ``("abl", base, head_dim)``, ``("budget", enc, steps)``
    or ``("ft", arm)``.  Every accessor selects through here, so the figures, the tables
    and the claims read the same runs; a side the file does not have is a ValueError that
    names what it has."""
    kind = spec[0]
    if kind == "lm":
        return lm_rows(results, spec[1])
    if kind == "scale":
        if spec[2] not in ("fixed", "matched"):
            raise ValueError(f"mode must be 'fixed' or 'matched', got {spec[2]!r}")
        section = results["scaling" if spec[2] == "fixed" else "scaling_matched"]
        rows = [r for r in section if r["kind"] == spec[1]]
        if not rows:
            raise ValueError(f"kind must be one of {sorted({r['kind'] for r in section})} "
                             f"(mode {spec[2]!r}), got {spec[1]!r}")
        return rows
    if kind in ("abl", "budget") and _is_main(results, spec):
        enc = "rope" if kind == "abl" else spec[1]
        seeds = set(results["config"]["ablation" if kind == "abl" else "budget"]["seeds"])
        return [r for r in lm_rows(results, enc) if r["seed"] in seeds]
    if kind in ("ref", "refctx"):
        section, pick, want = _references(results, kind), \
            (lambda r: (r["encoding"], r["train_length"])), (spec[1], spec[2])
        what = "encoding and train_length must name a reference model"
    elif kind == "abl":
        section, pick, want = _ablation(results), \
            (lambda r: (r["rope_base"], r["head_dim"])), (float(spec[1]), spec[2])
        what = "base and head_dim must name an ablation arm"
    elif kind == "budget":
        section, pick, want = results["budget"], \
            (lambda r: (r["encoding"], r["steps"])), (spec[1], spec[2])
        what = "encoding and steps must name a budget run"
    elif kind == "ft":
        section, pick, want = results["finetune"], (lambda r: r["arm"]), spec[1]
        what = "arm must be a finished fine-tuning arm"
    else:
        raise ValueError(f"spec must start with lm, scale, ref, refctx, abl, budget or ft, "
                         f"got {spec!r}")
    rows = [r for r in section if pick(r) == want]
    if not rows:
        raise ValueError(f"{what}, got {want!r}; the file has "
                         f"{sorted({pick(r) for r in section})}")
    return rows


def _references(results, kind: str) -> list[dict]:
    """The reference runs (``kind`` ``"ref"``) or their re-readings (``"refctx"``), each
    encoding and length at the rate its check chose: where the rate check
    (``experiments/stage_refrates.py``) retrained a reference at a better rate, those
    seeds replace the ones trained at the rate tuned for ``L``."""
    section = results["references" if kind == "ref" else "references_context"]
    rr = results.get("references_rates") or {}
    tuned = rr.get("tuned" if kind == "ref" else "tuned_context") or []
    retrained = {(r["encoding"], r["train_length"]) for r in tuned}
    return [r for r in section if (r["encoding"], r["train_length"]) not in retrained] + tuned


def _ablation(results) -> list[dict]:
    """The ablation's runs, each arm at the rate its check chose: where the rate check
    (``experiments/stage_ablrates.py``) retrained an arm at a better rate, those seeds
    replace the ones trained at the rate tuned for the protocol's own RoPE."""
    tuned = (results.get("ablation_rates") or {}).get("tuned") or []
    retrained = {(r["rope_base"], r["head_dim"]) for r in tuned}
    return [r for r in results["ablation"]
            if (r["rope_base"], r["head_dim"]) not in retrained] + tuned


def _series_values(results, spec, n: int, metric: str) -> list:
    """Per-seed values (seed order) of :func:`_series_rows` at length ``n``."""
    return list(_by_seed(_series_rows(results, spec), metric, n).values())


def _chunk(v) -> float:
    """A chunk's loss: a number, or a far-identifier ``[sum, count]`` (NaN for no bytes)."""
    if isinstance(v, list):
        return v[0] / v[1] if v[1] else float("nan")
    return float("nan") if v is None else float(v)


def paired_chunks(results, a, b, n, metric: str = "target"):
    """The per-chunk differences ``a - b`` at length ``n`` (or ``(n_a, n_b)``: each side
    reading its own length, the same target bytes), seed by seed over the seeds both sides
    have: a ``(seeds, chunks)`` array (chunks where either side has no value, e.g. a chunk
    without far-identifier bytes, dropped), the file of each chunk kept, and the seeds."""
    n_a, n_b = n if isinstance(n, tuple) else (n, n)
    key = {"target": "chunks", "far": "far_chunks"}.get(_metric(metric))
    if key is None:
        raise ValueError("paired chunks exist for the 'target' and 'far' metrics only")
    ra = {r["seed"]: r for r in _series_rows(results, a)}
    rb = {r["seed"]: r for r in _series_rows(results, b)}
    seeds = sorted(set(ra) & set(rb))
    if len(seeds) < 2:
        raise ValueError(f"a and b must share at least two seeds, got {seeds} for {a}, {b}")
    rows = []
    for s in seeds:
        va, vb = ra[s]["test"].get(str(n_a)), rb[s]["test"].get(str(n_b))
        if va is None or vb is None:
            raise ValueError(f"both sides must read their length {n}: {a} or {b} cannot")
        rows.append([_chunk(x) - _chunk(y) for x, y in zip(va[key], vb[key], strict=True)])
    x = np.asarray(rows, dtype=float)
    keep = np.isfinite(x).all(axis=0)
    files = np.asarray(results["chunks"]["files_of_chunks"])[keep]
    return x[:, keep], files, seeds


def claim_family(results) -> list[tuple]:
    """The chapter's claims, each ``(name, a, b, length, metric)``: "``a`` is lower than
    ``b`` at ``length``" (a pair of lengths: each side reads its own).  Every sentence of
    the chapter that ranks two models on the CPU tier is one of these, or says that it
    reads the means (or counts) alone, untested; a claim whose data is not finished yet (a
    fine-tuning arm) is left out.  The GPU tier's claims are a family of their own
    (:func:`gpu_claims`)."""
    cfg = results["config"]
    L = cfg["lm"]["train_length"]
    top = max(lengths(results))
    steps = cfg["lm"]["steps"]
    more = max(budget_steps(results))
    head = cfg["model"]["d_model"] // cfg["model"]["n_heads"]
    fam = [
        # the order at the training length
        ("L_rope_t5", ("lm", "rope"), ("lm", "t5"), L, "target"),
        ("L_t5_alibi", ("lm", "t5"), ("lm", "alibi"), L, "target"),
        ("L_alibi_learned", ("lm", "alibi"), ("lm", "learned"), L, "target"),
        ("L_learned_sin", ("lm", "learned"), ("lm", "sinusoidal"), L, "target"),
        ("L_sin_nope", ("lm", "sinusoidal"), ("lm", "nope"), L, "target"),
        # past it
        ("2L_t5_alibi", ("lm", "t5"), ("lm", "alibi"), 2 * L, "target"),
        ("4L_alibi_t5", ("lm", "alibi"), ("lm", "t5"), 4 * L, "target"),
        ("2L_nope_rope", ("lm", "nope"), ("lm", "rope"), 2 * L, "target"),
        ("top_sin_rope", ("lm", "sinusoidal"), ("lm", "rope"), top, "target"),
        ("top_nope_t5", ("lm", "nope"), ("lm", "t5"), top, "target"),
        ("top_alibi_nope", ("lm", "alibi"), ("lm", "nope"), top, "target"),
        # NoPE ahead of RoPE and the sinusoidal model at every length past L
        *[(f"{n // L}L_nope_{short}", ("lm", "nope"), ("lm", e), n, "target")
          for n in lengths(results) if n > L
          for short, e in (("rope", "rope"), ("sin", "sinusoidal"))
          if (n, e) != (2 * L, "rope")],
        # scaling without training: a factor matched to the length against one factor
        *[(f"2L_{k}_matched_fixed", ("scale", k, "matched"), ("scale", k, "fixed"), 2 * L,
           "target") for k in ("pi", "yarn", "llama3")],
        ("2L_yarn_matched_alibi", ("scale", "yarn", "matched"), ("lm", "alibi"), 2 * L,
         "target"),
        ("2L_llama3_matched_alibi", ("scale", "llama3", "matched"), ("lm", "alibi"), 2 * L,
         "target"),
        ("4L_alibi_yarn_matched", ("lm", "alibi"), ("scale", "yarn", "matched"), 4 * L,
         "target"),
        # ... and the one rule the matched factor makes worse: NTK (transformers' dynamic NTK)
        ("2L_ntk_fixed_matched", ("scale", "ntk", "fixed"), ("scale", "ntk", "matched"),
         2 * L, "target"),
        ("L_rope_ntk_fixed", ("lm", "rope"), ("scale", "ntk", "fixed"), L, "target"),
        ("L_rope_yarn_fixed", ("lm", "rope"), ("scale", "yarn", "fixed"), L, "target"),
        # context: the models trained at L reading L bytes against models trained at 4L
        # reading 4L, on the same far-identifier targets (is the longer history worth
        # anything to a model trained to use it?)
        ("ctx_rope_ref", ("lm", "rope"), ("ref", "rope", 4 * L), (L, 4 * L), "far"),
        ("ctx_alibi_ref", ("lm", "alibi"), ("ref", "alibi", 4 * L), (L, 4 * L), "far"),
        # ... and within one reference: reading 4L against reading L, the same weights and
        # the same far-identifier targets (the longer history alone)
        ("ctx_rope_self", ("refctx", "rope", 4 * L), ("refctx", "rope", 4 * L), (4 * L, L),
         "far"),
        ("ctx_alibi_self", ("refctx", "alibi", 4 * L), ("refctx", "alibi", 4 * L), (4 * L, L),
         "far"),
        # ... and the same within the reference trained at 2L: reading 2L against reading L
        ("ctx_rope_self_2L", ("refctx", "rope", 2 * L), ("refctx", "rope", 2 * L),
         (2 * L, L), "far"),
        ("ctx_alibi_self_2L", ("refctx", "alibi", 2 * L), ("refctx", "alibi", 2 * L),
         (2 * L, L), "far"),
        # the RoPE ablation: a shorter base fails less at twice the length
        ("abl_500_1e4_h16", ("abl", 500.0, 16), ("abl", 1e4, 16), 2 * L, "target"),
        ("abl_1e4_1e6_h16", ("abl", 1e4, 16), ("abl", 1e6, 16), 2 * L, "target"),
        # ... the same prediction at head width 64, and no base rescuing RoPE: NoPE ahead of
        # the base that fails least
        ("abl_500_1e4_h64", ("abl", 500.0, 64), ("abl", 1e4, 64), 2 * L, "target"),
        ("abl_1e4_1e6_h64", ("abl", 1e4, 64), ("abl", 1e6, 64), 2 * L, "target"),
        ("abl_nope_500_h16", ("lm", "nope"), ("abl", 500.0, 16), 2 * L, "target"),
        # the budget: what more training changes
        ("budget_rope_L", ("budget", "rope", more), ("budget", "rope", steps), L, "target"),
        ("budget_t5_top", ("budget", "t5", more), ("budget", "t5", steps), top, "target"),
        # RoPE worse far out the longer it trains
        ("budget_rope_top", ("budget", "rope", steps), ("budget", "rope", more), top,
         "target"),
        ("budget_t5_nope_top", ("budget", "t5", more), ("budget", "nope", more), top,
         "target"),
        # the T5 bias behind ALiBi at 4 L (4L_alibi_t5) is an order of the main budget only
        ("budget_t5_alibi_4L", ("budget", "t5", more), ("budget", "alibi", more), 4 * L,
         "target"),
    ]
    arms = finetune_arms(results)
    fam = [c for c in fam if _testable(results, c, head)]
    n_ft = L * int(cfg["finetune"]["factor"])
    if "plain" in arms:
        fam.append(("ft_plain_rope", ("ft", "plain"), ("lm", "rope"), n_ft, "target"))
        # fine-tuning is more training too: the control below RoPE at the training length
        fam.append(("ft_plain_rope_L", ("ft", "plain"), ("lm", "rope"), L, "target"))
    # each scaled arm against the control: at the fine-tuned length (PI behind it, NTK and
    # YaRN level with it) and at twice that length (the control ahead of every arm)
    for arm in ("pi", "ntk", "yarn"):
        if arm in arms and "plain" in arms:
            if arm == "pi":
                fam.append(("ft_plain_pi", ("ft", "plain"), ("ft", "pi"), n_ft, "target"))
            else:
                fam.append((f"ft_{arm}_plain", ("ft", arm), ("ft", "plain"), n_ft, "target"))
            fam.append((f"ft_plain_{arm}_2x", ("ft", "plain"), ("ft", arm), 2 * n_ft,
                        "target"))
    return [c for c in fam if _testable(results, c, head)]


def context_share(results, encoding: str, n: int, *, n_boot: int = 2000,
                  seed: int = 0) -> dict:
    """The share of a reference's gain from the longer history that the model trained at
    the training length ``L`` recovers, on the far-identifier targets: (the ``encoding``
    model trained at ``L`` reading ``n`` bytes minus reading ``L``) over (the reference
    trained at ``n`` reading ``n`` minus reading ``L``), the protocol's measure of context
    that pays.  The two are different models, so a bootstrap replicate resamples each
    side's seeds on its own and the test files once for both (a file's chunks together,
    as :func:`stats.bootstrap` does), and takes the ratio of the means.  Returns
    ``{"share", "lo", "hi"}`` (a 95 % percentile interval) and each side's seeds."""
    cfg = results["config"]
    L = cfg["lm"]["train_length"]
    if not isinstance(n_boot, int) or n_boot < 100:
        raise ValueError(f"n_boot must be an integer >= 100, got {n_boot!r}")
    refs = {r["train_length"] for r in _references(results, "refctx")
            if r["encoding"] == encoding}
    if n not in refs:
        raise ValueError(f"n must be the length of a reference of {encoding!r} "
                         f"({sorted(refs)}), got {n!r}")
    own, own_files, own_seeds = paired_chunks(results, ("lm", encoding), ("lm", encoding),
                                              (n, L), "far")
    ref, ref_files, ref_seeds = paired_chunks(results, ("refctx", encoding, n),
                                              ("refctx", encoding, n), (n, L), "far")
    if not np.array_equal(own_files, ref_files):
        raise ValueError("the model and its reference must be read on the same chunks")
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(own_files == f) for f in np.unique(own_files)]
    shares = np.empty(n_boot)
    for i in range(n_boot):
        cols = np.concatenate([members[j] for j in rng.integers(0, len(members),
                                                                  len(members))])
        a = own[rng.integers(0, len(own_seeds), len(own_seeds))][:, cols].mean()
        b = ref[rng.integers(0, len(ref_seeds), len(ref_seeds))][:, cols].mean()
        shares[i] = a / b
    lo, hi = np.percentile(shares, [2.5, 97.5])
    return {"share": float(own.mean() / ref.mean()), "lo": float(lo), "hi": float(hi),
            "seeds": own_seeds, "ref_seeds": ref_seeds}


def close_calls(results) -> list[dict]:
    """The claims of :func:`claim_family` too close to rank on the protocol's own seeds
    (``config["seeds"]``, five in the full tier): the two sides' means at the claim's
    length (each side at its own) differ by no more than the larger of the two sides'
    standard deviations over those seeds.  The protocol's rule gives every such
    comparison ten seeds (``lm_more_seeds``, ``references.seeds``,
    ``finetune_more_seeds``); the chapter's tests hold the results to it.  Each:
    ``name``, ``gap`` (the absolute difference of the means), ``sd`` (the larger standard
    deviation) and ``seeds`` (the seeds both sides have now)."""
    first = list(results["config"]["seeds"])
    out = []
    for name, a, b, n, metric in claim_family(results):
        n_a, n_b = n if isinstance(n, tuple) else (n, n)
        ra, rb = _series_rows(results, a), _series_rows(results, b)
        va = [float(v) for v in _values(_by_seed(ra, metric, n_a), first)]
        vb = [float(v) for v in _values(_by_seed(rb, metric, n_b), first)]
        gap = abs(float(np.mean(va)) - float(np.mean(vb)))
        sd = max(stats.summary(va)["sd"], stats.summary(vb)["sd"])
        if gap <= sd:
            out.append({"name": name, "gap": gap, "sd": sd,
                        "seeds": sorted({r["seed"] for r in ra} & {r["seed"] for r in rb})})
    return out


def _testable(results, claim, head: int) -> bool:
    """Whether the configuration has both sides of ``claim`` at its lengths, with at least
    two seeds each (a smaller tier, such as ``--quick``, has fewer arms and lengths)."""
    cfg = results["config"]
    n = claim[3] if isinstance(claim[3], tuple) else (claim[3],)
    if not set(n) <= set(lengths(results)):
        return False
    for spec in claim[1:3]:
        if spec[0] == "abl":
            ab = cfg["ablation"]
            base_ok = float(spec[1]) in map(float, ab["bases"])
            main = float(spec[1]) == 1e4 and spec[2] == head
            if not (main or (base_ok and spec[2] in ab["head_dims"])) or len(ab["seeds"]) < 2:
                return False
        if spec[0] == "budget" and (len(cfg["budget"].get("seeds", [0])) < 2
                                    or spec[1] not in cfg["budget"]["encodings"]):
            return False
        rf = cfg["references"]
        if spec[0] in ("ref", "refctx") and (
                len(rf["seeds"]) < 2 or spec[1] not in rf["encodings"]
                or spec[2] not in {cfg["lm"]["train_length"] * int(f) for f in rf["factors"]}):
            return False
    return True


#: bootstrap replicates per claim: with 2,000, a bound within 1e-4 of zero fell on either
#: side of it as the bootstrap's own seed changed; with 20,000 no claim's verdict moves over
#: bootstrap seeds 0 to 9 (tests/book/test_chapter_experiments.py checks three)
N_BOOT = 20_000


def difference(results, a, b, n, metric: str = "target", *, n_boot: int = N_BOOT,
               seed: int = 0) -> dict:
    """The mean difference ``a - b`` (nats per byte; sides and lengths as in
    :func:`paired_chunks`) over the seeds both sides have, with the two-level bootstrap
    interval over seeds and test files (:func:`stats.bootstrap` with ``n_boot`` replicates
    drawn from ``seed``, chunks of one file resampled together), the paired t test's p over
    seeds (not adjusted) and the standard deviation over seeds."""
    x, files, seeds = paired_chunks(results, a, b, n, metric)
    va = [float(v) for v in x.mean(axis=1)]
    boot = stats.bootstrap(x, n_boot=n_boot, groups=files, seed=seed)
    return {"seeds": seeds, "mean": boot["mean"], "lo": boot["lo"], "hi": boot["hi"],
            "p": stats.paired_t_pvalue(va, [0.0] * len(va)),
            "sd_seeds": stats.summary(va)["sd"]}


def claims(results, *, n_boot: int = N_BOOT, seed: int = 0) -> list[dict]:
    """Every claim of :func:`claim_family`, tested: the mean difference ``a - b`` (nats per
    byte) over the seeds both sides have, the two-level bootstrap interval over seeds and
    test files (:func:`stats.bootstrap`, chunks of one file resampled together), the paired
    t test over seeds and its Holm-adjusted p over the whole family (:func:`stats.holm`).
    ``holds``: the difference is negative, its bootstrap interval excludes zero and the
    adjusted p is below 0.05.  ``n_boot`` and ``seed``: the bootstrap's replicates and the
    seed they are drawn from."""
    check(results)
    out = [{"name": name, "a": a, "b": b, "length": n, "metric": metric,
            **difference(results, a, b, n, metric, n_boot=n_boot, seed=seed)}
           for name, a, b, n, metric in claim_family(results)]
    for c, q in zip(out, stats.holm([c["p"] for c in out]), strict=True):
        c["p_holm"] = q
        c["holds"] = c["mean"] < 0 and c["hi"] < 0 and q < 0.05
    return out


def rerun_seconds(results, recheck) -> dict:
    """What re-running every unit of ``results`` would cost on the machine of ``recheck``
    (``experiments/recheck.py``, which re-ran at least one unit of every work group,
    :func:`units.work_group`): each unit is timed by its group's re-run units, a unit that
    trains as the re-run's seconds per training step times its own steps plus the re-run's
    seconds outside training, any other as the re-run's seconds (a mean where a group has
    several).  The stored seconds cannot serve: many units ran while other work shared the
    machine.  ``ValueError`` if ``results`` records no work per unit
    (``results["unit_work"]``) or a group has no re-run unit.

    >>> res = {"unit_seconds": 400.0, "unit_work": {"lm-a-s1": ["train-a", 800],
    ...        "lm-a-s2": ["train-a", 400], "test-lm-a-s1": ["test-a", None]}}
    >>> rc = {"units": {"lm-a-s1": {"group": "train-a", "steps": 800, "seconds": 30.0,
    ...                             "train_seconds": 28.0},
    ...                 "test-lm-a-s1": {"group": "test-a", "steps": None, "seconds": 5.0}}}
    >>> got = rerun_seconds(res, rc)
    >>> got["rerun"], got["groups"], got["kinds"]
    (51.0, {'test-a': 5.0, 'train-a': 46.0}, {'lm': 46.0, 'test-lm': 5.0})
    """
    work = results.get("unit_work") if isinstance(results, dict) else None
    if not isinstance(work, dict) or not work:
        raise ValueError("results must record 'unit_work' (experiments/run.py writes it)")
    samples: dict[str, list[dict]] = {}
    for key, u in recheck["units"].items():
        if u.get("group") is not None:
            samples.setdefault(u["group"], []).append(u)
    missing = sorted({g for g, _ in work.values()} - set(samples))
    if missing:
        raise ValueError(f"recheck must re-run a unit of every work group results has; "
                         f"none of {missing}")
    fit: dict[str, tuple[float, float]] = {}  # group: (seconds per step, seconds besides)
    for g, us in samples.items():
        if all(u["steps"] is not None and u.get("train_seconds") for u in us):
            fit[g] = (float(np.mean([u["train_seconds"] / u["steps"] for u in us])),
                      float(np.mean([u["seconds"] - u["train_seconds"] for u in us])))
        else:
            fit[g] = (0.0, float(np.mean([u["seconds"] for u in us])))
    groups: dict[str, float] = {}
    kinds: dict[str, float] = {}
    for key, (g, steps) in work.items():
        per_step, rest = fit[g]
        sec = per_step * (steps or 0) + rest
        groups[g] = groups.get(g, 0.0) + sec
        kinds[unit_kind(key)] = kinds.get(unit_kind(key), 0.0) + sec
    return {"stored": float(results.get("unit_seconds", float("nan"))),
            "rerun": float(sum(groups.values())),
            "groups": dict(sorted(groups.items())), "kinds": dict(sorted(kinds.items()))}


def summarise(values: list) -> dict | None:
    """:func:`stats.summary` of per-seed values, or ``None`` if any is ``None``."""
    if any(v is None for v in values):
        return None
    return stats.summary(values)


def compare(a: list, b: list) -> dict:
    """The paired comparison ``a - b`` over seeds (:func:`stats.paired`)."""
    return stats.paired(a, b)


# -- the GPU tier's results file (experiments/results-gpu.json, schema 3) -------------------

GPU_SCHEMA = 3


def check_gpu(results) -> None:
    """Raise ``ValueError`` unless ``results`` is a GPU-tier results dict (schema 3)."""
    if not isinstance(results, dict) or results.get("schema") != GPU_SCHEMA \
            or results.get("tier") != "gpu":
        got = (results.get("schema"), results.get("tier")) if isinstance(results, dict) \
            else type(results).__name__
        raise ValueError("results must be an experiments/results-gpu.json dict (schema "
                         f"{GPU_SCHEMA}, tier 'gpu'), got {got!r}")
    for key in ("provenance", "config", "units"):
        if key not in results:
            raise ValueError(f"results must have a {key!r} entry")


def gpu_lengths(results) -> list[int]:
    """The evaluation lengths of the GPU tier."""
    return lengths(results)


def _gpu_pick(rows, metric, n) -> list:
    if metric not in ("target", "far", "window"):
        raise ValueError(f"metric must be 'target', 'far' or 'window', got {metric!r}")
    out = []
    for r in sorted(rows, key=lambda r: r["seed"]):
        v = r["test"].get(str(n))
        out.append(None if v is None else v[metric])
    return out


def gpu_lm_values(results, encoding: str, n: int, metric: str = "target", *,
                  train_length: int | None = None) -> list:
    """Per-seed loss of the GPU tier's ``encoding`` model trained at ``train_length`` (the
    tier's training length by default), at length ``n``; ``None`` where it has no value."""
    tl = train_length or results["config"]["lm"]["train_length"]
    rows = [u for u in results["units"] if u["key"].startswith("lm-")
            and u["encoding"] == encoding and u["train_length"] == tl]
    if not rows:
        have = sorted({(u["encoding"], u["train_length"]) for u in results["units"]
                       if u["key"].startswith("lm-")})
        raise ValueError(f"encoding and train_length must name a trained model, got "
                         f"{(encoding, tl)!r}; the file has {have}")
    return _gpu_pick(rows, metric, n)


def gpu_scaling_values(results, kind: str, mode: str, n: int,
                       metric: str = "target") -> list:
    """Per-seed loss of the GPU tier's RoPE models with scaling ``kind`` applied without
    training, ``mode`` "fixed" (one factor for every length) or "matched" (s = n / L)."""
    if mode not in ("fixed", "matched"):
        raise ValueError(f"mode must be 'fixed' or 'matched', got {mode!r}")
    rows = [u for u in results["units"] if u["key"].startswith("scale-")
            and u["kind"] == kind and u["mode"] == mode]
    if not rows:
        kinds = sorted({u["kind"] for u in results["units"] if u["key"].startswith("scale-")})
        raise ValueError(f"kind must be one of {kinds} (mode {mode!r}), got {kind!r}")
    return _gpu_pick(rows, metric, n)


def gpu_loss_drop(results, share: float = 0.2) -> dict:
    """How much each GPU-tier language model's training loss still fell at the end: per
    model (``"encoding@train_length"``), the mean over seeds of the mean logged loss in
    the second-last ``share`` of its steps minus that in the last ``share``.  Positive:
    still falling, so not converged.

    >>> r = {"schema": 3, "tier": "gpu", "provenance": {}, "config": {}, "units": [
    ...     {"key": "lm-rope-L8-s0", "encoding": "rope", "train_length": 8, "steps": 10,
    ...      "losses": [[0, 3.0], [6, 2.0], [7, 2.0], [8, 1.5], [9, 1.5]]}]}
    >>> gpu_loss_drop(r)
    {'rope@8': 0.5}
    """
    check_gpu(results)
    if not 0 < share <= 0.5:
        raise ValueError(f"share must be in (0, 0.5], got {share!r}")
    per: dict[str, list[float]] = {}
    for u in results["units"]:
        if not u["key"].startswith("lm-") or not u.get("losses"):
            continue
        steps = int(u["steps"])
        last = [v for st, v in u["losses"] if st >= (1 - share) * steps]
        before = [v for st, v in u["losses"] if (1 - 2 * share) * steps <= st
                  < (1 - share) * steps]
        if last and before:
            per.setdefault(f"{u['encoding']}@{u['train_length']}", []).append(
                float(np.mean(before) - np.mean(last)))
    return {k: float(np.mean(v)) for k, v in per.items()}


def gpu_probe_best(results) -> float:
    """The highest exact-match rate of any passkey probe in the GPU-tier results (every
    probed model, length and depth); ``nan`` where nothing was probed."""
    check_gpu(results)
    rates = [d["exact"] for u in results["units"] if u["key"].startswith("probe-")
             for by_depth in u["probe"].values() for d in by_depth.values()]
    return float(max(rates)) if rates else float("nan")


def gpu_claims(results) -> list[dict]:
    """The GPU-tier section's family of claims, each a paired comparison over seeds.

    Each claim reads "``a`` is lower than ``b``" for two per-seed series of losses (``a``
    and ``b`` name them: ``("lm", encoding)`` for a model trained at the tier's length,
    ``("ref", encoding, train_length)`` for a reference trained longer, ``("scale", kind,
    mode)`` for RoPE with a scaling rule), at ``length`` (or at ``(length of a, length of
    b)``, the same model read with more and less history), on ``metric`` (the fixed
    targets, or the far-identifier ones).  Returned with the mean difference ``a - b`` and
    its 95 % interval, the two-sided paired t p-value and the Holm-adjusted p over the
    whole family (:func:`stats.holm`); ``holds`` is whether the difference is negative and
    the adjusted p below 0.05.
    """
    check_gpu(results)
    L = results["config"]["lm"]["train_length"]

    def series(spec, n, metric):
        if spec[0] == "lm":
            return gpu_lm_values(results, spec[1], n, metric)
        if spec[0] == "ref":
            return gpu_lm_values(results, spec[1], n, metric, train_length=spec[2])
        return gpu_scaling_values(results, spec[1], spec[2], n, metric)

    alibi: tuple = ("lm", "alibi")
    family: list[tuple] = [(f"alibi_{k}_matched_{f}L", alibi, ("scale", k, "matched"), f * L, "target")
              for f in (2, 4) for k in ("llama3", "yarn")]
    family += [(f"{k}_matched_fixed", ("scale", k, "matched"), ("scale", k, "fixed"), 2 * L,
                "target") for k in ("pi", "ntk", "yarn", "llama3")]
    family += [(f"rope_{k}_fixed", ("lm", "rope"), ("scale", k, "fixed"), L, "target")
               for k in ("yarn", "llama3")]
    # where this tier's order differs from the CPU tier's: at the training length, and
    # RoPE against NoPE at twice it
    family += [("alibi_rope_L", alibi, ("lm", "rope"), L, "target"),
               ("sin_learned_L", ("lm", "sinusoidal"), ("lm", "learned"), L, "target"),
               ("rope_nope_2L", ("lm", "rope"), ("lm", "nope"), 2 * L, "target")]
    # the longer history: the same model reading 2 L bytes against L before the same
    # targets; a reference trained at 4 L reading 4 L against L (far targets, the ones
    # chosen as needing distant context); and the model trained at L against its reference
    family += [("alibi_history", alibi, alibi, (2 * L, L), "target"),
               ("alibi_history_far", alibi, alibi, (2 * L, L), "far")]
    family += [(f"ref_{e}_history_far", ("ref", e, 4 * L), ("ref", e, 4 * L), (4 * L, L),
                "far") for e in ("rope", "alibi")]
    family += [(f"{e}_ref", ("lm", e), ("ref", e, 4 * L), (L, 4 * L), "target")
               for e in ("rope", "alibi")]
    out = []
    for name, a, b, n, metric in family:
        na, nb = n if isinstance(n, tuple) else (n, n)
        va, vb = series(a, na, metric), series(b, nb, metric)
        d = stats.paired(va, vb)
        out.append({"name": name, "a": a, "b": b, "length": n, "metric": metric,
                    "mean": d["mean"], "lo": d["lo"], "hi": d["hi"],
                    "p": stats.paired_t_pvalue(va, vb), "n": len(va)})
    for c, q in zip(out, stats.holm([c["p"] for c in out]), strict=True):
        c["p_holm"] = q
        c["holds"] = c["mean"] < 0 and q < 0.05
    return out
