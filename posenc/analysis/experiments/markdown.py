"""The results files' Markdown summaries (``experiments/results.md`` and the GPU tier's
``results.md``).  Presentation only: nothing here decides a number a unit stores, so the
unit store's code hash leaves this file out (:func:`.units.code_files`) and the summaries can
change without retraining anything.
"""

from __future__ import annotations

import numpy as np

from . import stats
from .models import ENCODINGS


def gpu_markdown(results: dict) -> str:
    """A summary of a GPU-tier results file: mean (sd) over the seeds done."""
    units = results["units"]
    lines = ["# Experiments, GPU tier: results", "",
             f"Commit `{results['provenance']['commit']}`, code `{results['provenance']['code']}`"
             f", {results['provenance']['date']}, device "
             f"{results['provenance']['machine']['gpu'] or results['provenance']['machine']['device']}"
             f"; {results['steps']} steps per language model; far targets: "
             f"{results['far_targets']['bytes']} of {results['far_targets']['of']} target bytes.",
             "", "Loss on the fixed targets (nats/byte), mean (sd) over seeds; far: the "
             "far-identifier targets.", ""]

    def cell(vals):
        vals = [v for v in vals if v is not None]
        if not vals:
            return "n/a"
        m = float(np.mean(vals))
        return f"{m:.3f}" + (f" ({np.std(vals, ddof=1):.3f}, n={len(vals)})" if len(vals) > 1
                             else " (n=1)")

    lm = [u for u in units if u["key"].startswith("lm-")]
    lengths = sorted({int(n) for u in lm for n in u["test"]})
    lines += ["| model | metric | " + " | ".join(map(str, lengths)) + " |",
              "|---|---|" + "---:|" * len(lengths)]
    groups = sorted({(u["encoding"], u["train_length"]) for u in lm})
    for enc, tl in groups:
        us = [u for u in lm if u["encoding"] == enc and u["train_length"] == tl]
        for metric in ("target", "far"):
            row = [cell([(u["test"].get(str(n)) or {}).get(metric) for u in us])
                   if any(str(n) in u["test"] for u in us) else "" for n in lengths]
            lines.append(f"| {enc} @ {tl} | {metric} | " + " | ".join(row) + " |")
    sc = [u for u in units if u["key"].startswith("scale-")]
    if sc:
        lines += ["", "RoPE scaling without training (the models trained at "
                  f"{results['config']['lm']['train_length']}):", "",
                  "| rule | factor | metric | " + " | ".join(map(str, lengths)) + " |",
                  "|---|---|---|" + "---:|" * len(lengths)]
        for kind, mode in sorted({(u["kind"], u["mode"]) for u in sc}):
            us = [u for u in sc if u["kind"] == kind and u["mode"] == mode]
            for metric in ("target", "far"):
                row = [cell([(u["test"].get(str(n)) or {}).get(metric) for u in us])
                       for n in lengths]
                lines.append(f"| {kind} | {mode} | {metric} | " + " | ".join(row) + " |")
    for err in results.get("errors", []):
        lines += ["", f"Failed: {err['group']}: {err['error'][:300]}"]
    if results["skipped"]:
        lines += ["", "Not run (the budget did not fit them): "
                  + ", ".join(results["skipped"]) + "."]
    return "\n".join(lines) + "\n"


def _by_seed(runs, where, metric):
    return [metric(x) for x in sorted((x for x in runs if where(x)), key=lambda x: x["seed"])]


def _further_seeds(cfg: dict) -> str:
    """`` (and [5, ...] for ...)``: the seeds beyond the protocol's own, and what has them
    (the language models of ``lm_more_seeds``, the references, the fine-tuning arms of
    ``finetune_more_seeds``); empty where nothing does."""
    own = set(cfg["seeds"])
    parts = []
    lm = cfg.get("lm_more_seeds") or {}
    if lm.get("seeds") and lm.get("encodings"):
        parts.append(f"{lm['seeds']} for {', '.join(lm['encodings'])}")
    ref = [s for s in (cfg.get("references") or {}).get("seeds", []) if s not in own]
    if ref:
        parts.append(f"{ref} for the references")
    ft = cfg.get("finetune_more_seeds") or {}
    if ft.get("seeds") and ft.get("arms"):
        parts.append(f"{ft['seeds']} for the fine-tuning arms {', '.join(ft['arms'])}")
    return f" (and {'; '.join(parts)})" if parts else ""


def write_markdown(results: dict) -> str:
    p = results["provenance"]
    c = results["corpus"]
    lines = [
        "# Experiments: results",
        "",
        f"Commit `{p['commit']}`{' (with uncommitted changes)' if p['dirty'] else ''}, "
        f"{p['date']}; {p['machine']['cpu']}, {p['machine']['threads']} thread(s), device "
        f"{p['machine']['device']}; torch {p['versions']['torch']}. Units of work: "
        f"{results['unit_seconds'] / 60:.0f} min recorded in all (each unit's time as it ran, "
        "often beside other work; experiments/recheck-cpu.json re-times a run from nothing). "
        f"Corpus: {c['package']} {c['version']}, test "
        f"{c['test']['files']} files / {c['test']['bytes']} bytes (sha256 "
        f"{c['test']['sha256'][:12]}...). Seeds {results['config']['seeds']}"
        f"{_further_seeds(results['config'])}; "
        "mean and 95 % t interval over seeds. Not finished: "
        f"{', '.join(sorted(results.get('pending') or {})) or 'nothing'}.",
        "",
        "## Language modelling: loss on the fixed target bytes (nats/byte)",
        "",
    ]
    lm = results["lm"]
    lengths = sorted({int(k) for r in lm["runs"] for k in r["test"]})
    lines += ["| encoding | lr | scale | " + " | ".join(str(n) for n in lengths) + " |",
              "|---|---|---|" + "---:|" * len(lengths)]
    for enc in ENCODINGS:
        cells = []
        for n in lengths:
            vals = _by_seed(lm["runs"] + results.get("lm_more_seeds", []),
                            lambda x, e=enc: x["encoding"] == e,
                            lambda x, n=n: x["test"][str(n)])
            if any(v is None for v in vals):
                cells.append("n/a")
                continue
            s = stats.summary([v["target"] for v in vals])
            cells.append(f"{s['mean']:.3f} [{s['lo']:.3f}, {s['hi']:.3f}]")
        ch = lm["chosen"][enc]
        lines.append(f"| {enc} | {ch['lr']:g} | {ch['embed_scale']:g} | " + " | ".join(cells)
                     + " |")
    lines += (_rival_lines(results) + _context_lines(results) + _ablation_rate_lines(results)
              + _task_lines(results) + _claim_lines(results))
    return "\n".join(lines) + "\n"


def _context_lines(results: dict) -> list[str]:
    """Each reference read at every length up to its own (one load of its weights): loss
    on the far-identifier targets and on all the targets, mean [95 % t interval]."""
    from . import report

    rows = results.get("references_context") or []
    if not rows:
        return []
    lengths = sorted({int(k) for r in rows for k in r["test"]})
    lines = ["", "## References read at shorter lengths (the same weights at every length)",
             "", "| reference | targets | " + " | ".join(str(n) for n in lengths) + " |",
             "|---|---|" + "---:|" * len(lengths)]
    for enc, n_ref in sorted({(r["encoding"], r["train_length"]) for r in rows}):
        for metric in ("far", "target"):
            cells = []
            for n in lengths:
                if n > n_ref:  # read only up to its own length
                    cells.append("n/a")
                    continue
                sm = stats.summary(report.reference_context_values(results, enc, n_ref, n,
                                                                   metric))
                cells.append(f"{sm['mean']:.4f} [{sm['lo']:.4f}, {sm['hi']:.4f}]")
            lines.append(f"| {enc} trained at {n_ref} | {metric} | " + " | ".join(cells) + " |")
    if (results.get("references_rates") or {}).get("chosen"):
        checks = report.reference_rate_check(results)
        lines += _rate_lines(
            checks, "## The references' rate check (seed 0, validation loss at the "
            "reference's own length; * the best; where it is not the rate the references "
            "trained at, every seed was retrained at it and the tables and claims read "
            "those)", "reference", lambda c: f"{c['encoding']} trained at {c['train_length']}")
    return lines


def _rate_lines(checks: list[dict], title: str, what: str, name) -> list[str]:
    """A rate check as a table: one row per checked model (``name(check)``), its own rate,
    and its validation loss at every rate tried, the best starred."""
    rates = sorted({lr for c in checks for lr in c["valid"]})
    lines = ["", title, "", f"| {what} | trained at rate | "
             + " | ".join(f"{lr:g}" for lr in rates) + " |", "|---|---:|" + "---:|" * len(rates)]
    for c in checks:
        cells = ["n/a" if lr not in c["valid"] else
                 f"{c['valid'][lr]:.4f}" + ("*" if lr == c["lr"] else "") for lr in rates]
        lines.append(f"| {name(c)} | {c['own_lr']:g} | " + " | ".join(cells) + " |")
    return lines


def _rival_lines(results: dict) -> list[str]:
    """The check of seed 0's choice of setting, where the file has it."""
    from . import report

    if not isinstance(results.get("lm_rivals"), dict):
        return []
    L = results["config"]["lm"]["train_length"]
    lines = ["", "## Seed 0's choice against its close rivals (grid points within one seed "
             "standard deviation of the chosen setting on seed 0, trained on every seed; "
             "rival minus chosen, mean [95 % t interval])", "",
             "| encoding | chosen | rival | seed 0 | validation | test at "
             f"{L} |", "|---|---|---|---:|---:|---:|"]
    for c in report.lm_rival_check(results):
        cells = [f"{d['mean']:+.4f} [{d['lo']:+.4f}, {d['hi']:+.4f}]"
                 for d in (c["valid"], c["test"][L])]
        lines.append(f"| {c['encoding']} | rate {c['chosen']['lr']:g}, scale "
                     f"{c['chosen']['embed_scale']:g} | rate {c['lr']:g}, scale "
                     f"{c['embed_scale']:g} | {c['gap']:+.4f} | " + " | ".join(cells) + " |")
    return lines


def _ablation_rate_lines(results: dict) -> list[str]:
    """The RoPE ablation's rate check, where the file has it."""
    from . import report

    if not (results.get("ablation_rates") or {}).get("chosen"):
        return []
    return _rate_lines(
        report.ablation_rate_check(results), "## The RoPE ablation's rate check (seed 0, "
        "validation loss at the training length; * the best; where it is not the rate the "
        "arm trained at, every seed was retrained at it and the tables and claims read "
        "those)", "arm", lambda c: f"base {c['rope_base']:g}, head width {c['head_dim']}")


def _task_lines(results: dict) -> list[str]:
    """Each finished synthetic task: the seeds that learned it (k/n, Wilson 95 %) and, at
    each test length, how many of those get at least half of the sequences whole."""
    from . import report

    lines: list[str] = []
    for task, keys in (("copy", "eval_m"), ("passkey", "eval_totals")):
        if results.get(task) is None:
            continue
        ks = results["config"][task][keys]
        what = "string length m" if task == "copy" else "total length n"
        lines += ["", f"## {task.capitalize()} task: seeds that learned, and at each {what} "
                  "the learned seeds with at least half the sequences whole", "",
                  "| encoding | learned [95 %] | " + " | ".join(str(k) for k in ks) + " |",
                  "|---|---|" + "---:|" * len(ks)]
        for enc in results[task]["chosen"]:
            got = report.task_learned(results, task, enc)
            cells = []
            for k in ks:
                ext = report.task_extrapolation(results, task, enc, k)
                cells.append("–" if ext is None else f"{ext['k']}/{ext['n']}")
            lines.append(f"| {enc} | {got['k']}/{got['n']} [{got['lo']:.2f}, "
                         f"{got['hi']:.2f}] | " + " | ".join(cells) + " |")
        refined = {e: c for e, c in results[task]["chosen"].items() if "refined" in c}
        if refined:
            lines += ["", f"Refined grid ({task}): where seed 0 learned at no rate of the "
                      "grid, seed 0 also at the log-midpoints around its best rate "
                      "(experiments/taskgrid.py)", "",
                      "| encoding | midpoints | chosen rate | seed 0 learned |",
                      "|---|---|---|---|"]
            for enc, c in refined.items():
                mids = ", ".join(f"{x:g}" for x in c["refined"])
                lines.append(f"| {enc} | {mids} | {c['lr']:g} | "
                             f"{'yes' if c['learned'] else 'no'} |")
        if results[task].get("rates"):
            lines += ["", f"Rate check ({task}): where some seeds did not learn at the rate "
                      "chosen on seed 0, the seeds that learn at each other rate seed 0 "
                      "learned at", "", "| encoding | rate | learned [95 %] |", "|---|---|---|"]
            for row in report.task_rate_check(results, task):
                mark = " (chosen)" if row["chosen"] else ""
                lines.append(f"| {row['encoding']} | {row['lr']:g}{mark} | {row['k']}/"
                             f"{row['n']} [{row['lo']:.2f}, {row['hi']:.2f}] |")
        if results[task].get("caps"):
            cap = results["config"][task]["steps"]
            lines += ["", f"Cap check ({task}): every seed that did not learn within {cap} "
                      "steps at the chosen rate, trained again with a longer cap", "",
                      "| encoding | rate | longer cap | seeds trained again | "
                      "learned, either cap [95 %] |", "|---|---|---|---|---|"]
            for row in report.task_cap_check(results, task):
                lines.append(f"| {row['encoding']} | {row['lr']:g} | {row['steps']} | "
                             f"{len(row['rerun'])} | {row['k']}/{row['n']} "
                             f"[{row['lo']:.2f}, {row['hi']:.2f}] |")
        if results[task].get("warmups"):
            lines += ["", f"Warm-up check ({task}): every seed that learned only with the "
                      f"longer cap, trained again within {cap} steps with only the longer "
                      "cap's warm-up", "", "| encoding | rate | warm-up | seeds trained "
                      "again | learned [95 %] |", "|---|---|---|---|---|"]
            for row in report.task_warmup_check(results, task):
                lines.append(f"| {row['encoding']} | {row['lr']:g} | {row['warmup']} | "
                             f"{len(row['rerun'])} | {row['k']}/{row['n']} "
                             f"[{row['lo']:.2f}, {row['hi']:.2f}] |")
    return lines


def _claim_lines(results: dict) -> list[str]:
    """The chapter's family of claims (``report.claims``): mean difference a - b with its
    two-level bootstrap interval, paired t test, Holm-adjusted p, and whether it holds."""
    from . import report

    if results.get("pending"):
        return ["", "Claims: computed once every stage has finished."]
    claims = report.claims(results)
    lines = ["", "## Claims: a below b (nats/byte), Holm-adjusted over the family", "",
             "| claim | a | b | length | mean a - b [95 %] | seeds | p | Holm p | holds |",
             "|---|---|---|---|---:|---:|---:|---:|---|"]
    for c in claims:
        n = c["length"]
        length = f"{n[0]} vs {n[1]}" if isinstance(n, tuple) else str(n)
        a, b = (" ".join(str(x) for x in side) for side in (c["a"], c["b"]))
        lines.append(f"| {c['name']} | {a} | {b} | {length}{' (far)' if c['metric'] == 'far' else ''} | "
                     f"{c['mean']:.3f} [{c['lo']:.3f}, "
                     f"{c['hi']:.3f}] | {len(c['seeds'])} | {c['p']:.4f} | "
                     f"{c['p_holm']:.4f} | {'yes' if c['holds'] else 'no'} |")
    held = sum(c["holds"] for c in claims)
    lines += ["", f"{held} of {len(claims)} claims hold (interval below zero and Holm "
              "p < 0.05)."]
    return lines
