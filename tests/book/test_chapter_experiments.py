"""The *Experiments* chapter: its protocol pinned on the committed results, and each claim the
prose makes checked against them.

The page renders ``experiments/results.json``, assembled from the committed units of
``experiments/units/cpu`` (``python experiments/run.py --assemble-only``).  The tests here
check that the file is exactly what the committed units assemble to under the current code,
that it is the protocol the page describes (the same target bytes at every length, the joint
tuning grid with its optimum inside, the scaling arms as the papers define them, the
fine-tuning control), and that every statement of the prose holds in the file: the family
of claims (:func:`report.claims`) with the outcome the page states for each, and the
descriptive statements beside them.  If a rerun changes an outcome, a test here fails and
the prose must be rewritten.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import posenc.figures as pf
from posenc.analysis.experiments import report as R
from posenc.analysis.experiments import stats
from posenc.analysis.experiments.models import ENCODINGS

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "results.json"
PAGES = {lang: ROOT / "docs" / lang / "experiments.md" for lang in ("en", "zh")}

#: the claims the page states as holding (bootstrap interval below zero and Holm-adjusted p
#: below 0.05); every other claim of the family the page states as not separated
HOLDS = {
    "L_t5_alibi", "L_alibi_learned", "L_learned_sin", "L_sin_nope",
    "2L_t5_alibi", "2L_nope_rope", "top_sin_rope", "top_alibi_nope",
    # NoPE ahead of RoPE and the sinusoidal model at every length past L
    "2L_nope_sin", "4L_nope_rope", "4L_nope_sin", "8L_nope_rope", "8L_nope_sin",
    "16L_nope_rope", "16L_nope_sin",
    "2L_pi_matched_fixed", "2L_yarn_matched_fixed", "2L_llama3_matched_fixed",
    "2L_llama3_matched_alibi", "4L_alibi_yarn_matched",
    "L_rope_ntk_fixed", "L_rope_yarn_fixed", "ctx_rope_ref", "ctx_alibi_ref",
    "abl_500_1e4_h16", "abl_1e4_1e6_h16", "budget_rope_L", "budget_t5_top", "budget_t5_nope_top",
    "ft_plain_rope", "ft_plain_rope_L", "ft_plain_pi", "ft_plain_pi_2x", "ft_plain_ntk_2x",
    "ft_plain_yarn_2x", "2L_ntk_fixed_matched", "budget_t5_alibi_4L",
    # separated since the close calls got ten seeds (report.close_calls): the ALiBi
    # reference's own reading of four times the history
    "ctx_alibi_self",
}
#: claims the page states as not separated although every seed, or all but one, points
#: their way: once every ranking sentence of the page joined the family, Holm's multiplier
#: carried them over the line (their raw p-values are as before)
EDGE = {"4L_alibi_t5", "2L_yarn_matched_alibi", "ctx_rope_self"}
#: the fine-tuning arms the page reports as finished
FINISHED_ARMS = ["plain", "pi", "ntk", "yarn"]


@pytest.fixture(scope="module")
def results():
    return pf.load_experiment_results(RESULTS)


@pytest.fixture(scope="module")
def lengths(results):
    return R.lengths(results)


@pytest.fixture(scope="module")
def claims(results):
    return {c["name"]: c for c in R.claims(results)}


def mean(values):
    return stats.summary(values)["mean"]


def lm(results, enc, n, metric="target"):
    return R.lm_values(results, enc, n, metric)


# -- the file and the protocol -----------------------------------------------------------


def test_results_are_what_the_committed_units_assemble_to(results, tmp_path):
    assert results["schema"] == R.SCHEMA == 3 and results["tier"] == "cpu"
    assert results["quick"] is False
    prov = results["provenance"]
    assert re.fullmatch(r"[0-9a-f]{40}", prov["commit"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", prov["date"])
    for split in ("train", "valid", "test"):
        assert re.fullmatch(r"[0-9a-f]{64}", results["corpus"][split]["sha256"])
    assert results["corpus"]["test"]["bytes"] >= 1_000_000
    assert results["corpus"]["test"]["files"] >= 50
    lm_cfg = results["config"]["lm"]
    assert lm_cfg["steps"] * lm_cfg["batch"] * lm_cfg["train_length"] < \
        results["corpus"]["train"]["bytes"]
    # assembled again now, from the committed units and this code: the same file
    proc = subprocess.run([sys.executable, str(ROOT / "experiments" / "run.py"),
                           "--assemble-only", "--no-progress", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = json.loads((tmp_path / "results.json").read_text())
    for key in (*R.SECTIONS, "references_rates", "ablation_rates", "lm_rivals"):
        if key != "provenance":
            assert again[key] == results[key], key
    assert again["config"] == results["config"]
    # every stage whose units the CPU tier reads keeps its code (the GPU tier's own stage
    # may change without touching this file's numbers)
    cpu_stages = set(prov["stage_code"]) - {"gpu"}
    assert {k: again["provenance"]["stage_code"][k] for k in cpu_stages} == \
        {k: prov["stage_code"][k] for k in cpu_stages}


def test_results_md_is_the_summary_of_results_json(results):
    from posenc.analysis.experiments.markdown import write_markdown

    md = (ROOT / "experiments" / "results.md").read_text()
    assert md == write_markdown(results)
    assert "## Copy task" in md and "## Passkey task" in md
    assert f"{len(HOLDS)} of {len(R.claim_family(results))} claims hold" in md


def test_the_recheck_as_the_page_states_it():
    rc = pf.load_experiment_recheck()
    units = rc["units"]
    assert rc["provenance"]["dirty"] is False and rc["provenance"]["machine"]["isa"]
    # the sample: one unit of every kind and of every work group the results use
    stored = {p.stem: json.loads(p.read_text())
              for p in (ROOT / "experiments" / "units" / "cpu").glob("*.json")}
    results = pf.load_experiment_results()
    assert {R.unit_kind(k) for k in results["unit_work"]} <= {R.unit_kind(k) for k in units}
    assert {g for g, _ in results["unit_work"].values()} <= {u["group"] for u in units.values()}
    assert rc["provenance"]["jobs"] == 2  # two processes side by side, as the tier runs
    # what differs is the oldest of the sample, stored before units recorded their machine
    for key, u in units.items():
        assert u["equal"] == (not u["differs"])
        if not u["equal"]:
            assert "machine" not in stored[key], key
    assert 0 < sum(not u["equal"] for u in units.values()) < len(units)

    differ = {u["stored_commit"] for u in units.values() if not u["equal"]}
    equal = {u["stored_commit"] for u in units.values() if u["equal"]}
    assert not differ & equal

    def when(commit):  # the commit's time, where the clone holds it (not a shallow one)
        out = subprocess.run(["git", "show", "-s", "--format=%ct", commit], cwd=ROOT,
                             capture_output=True, text=True)
        return int(out.stdout) if out.returncode == 0 else None

    times = {c: when(c) for c in differ | equal}
    if None not in times.values():
        assert max(times[c] for c in differ) < min(times[c] for c in equal)
    # the re-timed estimate the page gives: a unit's training time is its steps times its
    # group's time per step (two re-run language models of one group, trained for
    # different steps, agree on it within 10 %), and a run from nothing takes under half
    # the stored seconds, yet more than three hours of one core; the tasks are the
    # largest part of it
    rates: dict = {}
    for u in units.values():
        if u["group"].startswith("train-"):
            rates.setdefault(u["group"], []).append((u["steps"], u["train_seconds"] / u["steps"]))
    pairs = [r for r in rates.values() if len({s for s, _ in r}) > 1]
    assert len(pairs) >= 2
    for r in pairs:
        per_step = [v for _, v in r]
        assert max(per_step) < 1.1 * min(per_step), r
    # five seeds stacked into one model save little on this machine, as the page says
    st = rc["stacking"]
    assert st["provenance"]["dirty"] is False and st["steps"] >= 20
    rows = st["ms_per_step_of_five_seeds"]
    assert set(rows) == {"rope", "alibi", "t5"}
    assert max(max(v["speedup_vmap"], v["speedup_loop"]) for v in rows.values()) < 1.25
    assert min(v["speedup_vmap"] for v in rows.values()) < 1.0
    # compiling: slower for RoPE and ALiBi, faster only for the T5 bias, and nowhere near
    # the factor three core-hours would need
    assert {e for e, v in rows.items() if v["speedup_compiled"] > 1} == {"t5"}
    assert max(v["speedup_compiled"] for v in rows.values()) < 1.5
    rerun = R.rerun_seconds(results, rc)
    assert set(rerun["kinds"]) == set(results["kind_seconds"])
    assert 2 * 3 * 3600 < rerun["rerun"] < rerun["stored"] / 2
    tasks = sum(v for k, v in rerun["kinds"].items() if k.startswith(("copy", "passkey")))
    assert tasks > rerun["rerun"] / 2


def test_every_unit_records_its_code_and_commit(results):
    from posenc.analysis.experiments.units import stage_code, stage_of

    files = sorted((ROOT / "experiments" / "units" / "cpu").glob("*.json"))
    codes = {s: stage_code(s) for s in ("lm", "finetune", "tasks")}
    used = {r["key"] for r in results["lm"]["runs"] + results["lm"]["grid"]}
    seen = set()
    for f in files:
        u = json.loads(f.read_text())
        assert re.fullmatch(r"[0-9a-f]{40}", u["commit"]), f.name
        seen.add(u["key"])
        if u["key"] in used:
            assert u["code"] == codes[stage_of(u["key"])], f.name
    assert used <= seen


def test_the_corpus_is_the_one_recorded(results):
    from posenc.analysis.experiments import corpus as C

    corpus = C.load_corpus()
    for split in ("train", "valid", "test"):
        assert getattr(corpus, split).sha256() == results["corpus"][split]["sha256"]


def test_every_length_predicts_the_same_targets(results, lengths):
    from posenc.analysis.experiments import corpus as C

    corpus = C.load_corpus()
    lm_cfg = results["config"]["lm"]
    chunks = C.eval_chunks(corpus.test, max_length=max(lengths), target=lm_cfg["target"],
                           n_chunks=lm_cfg["n_chunks"])
    assert results["chunks"] == {
        "n": lm_cfg["n_chunks"], "files": int(np.unique(chunks.files).size),
        "target": lm_cfg["target"], "max_length": max(lengths),
        "target_bytes": lm_cfg["n_chunks"] * lm_cfg["target"],
        "files_of_chunks": [int(f) for f in chunks.files]}
    longest = chunks.windows(corpus.test, max(lengths))
    for n in lengths:
        w = chunks.windows(corpus.test, n)
        np.testing.assert_array_equal(w[:, -lm_cfg["target"]:], longest[:, -lm_cfg["target"]:])


def test_the_joint_grid_has_every_optimum_inside(results):
    """Every encoding's chosen pair is the grid's lowest validation loss, and neither its
    rate nor its scale is an edge of the rates and scales tried for that encoding."""
    seeds = results["config"]["seeds"]
    lm_ = results["lm"]
    for enc in ENCODINGS:
        grid = [g for g in lm_["grid"] if g["encoding"] == enc]
        pick = min(grid, key=lambda g: g["valid"])
        assert lm_["chosen"][enc] == {"lr": pick["lr"], "embed_scale": pick["embed_scale"]}
        lrs = sorted({g["lr"] for g in grid})
        scales = sorted({g["embed_scale"] for g in grid})
        assert lrs[0] < pick["lr"] < lrs[-1], enc
        assert scales[0] < pick["embed_scale"] < scales[-1], enc
        # the full product of the axes was trained
        assert len(grid) == len(lrs) * len(scales)
        runs = [r for r in lm_["runs"] if r["encoding"] == enc]
        assert sorted(r["seed"] for r in runs) == seeds
        assert {(r["lr"], r["embed_scale"]) for r in runs} == {(pick["lr"], pick["embed_scale"])}
    # ten seeds where the first five left a ranking within one standard deviation
    more = results["config"]["lm_more_seeds"]
    for enc in more["encodings"]:
        assert R.lm_seeds(results, enc) == seeds + more["seeds"]


def test_scaling_arms_are_the_papers_rules(results, lengths):
    sc = results["config"]["scaling"]
    s = sc["factor"]
    model = results["config"]["model"]
    d = model["d_model"] // model["n_heads"]
    L = results["config"]["lm"]["train_length"]
    by_kind = {r["kind"]: r["rope_parameters"] for r in results["scaling"]}
    assert by_kind["ntk"]["rope_type"] == "default"
    assert by_kind["ntk"]["rope_theta"] == pytest.approx(10000.0 * s ** (d / (d - 2)))
    assert by_kind["dynamic"] == {"rope_type": "dynamic", "factor": 1.0}
    assert by_kind["pi"] == {"rope_type": "linear", "factor": float(s)}
    assert by_kind["yarn"]["factor"] == s
    assert by_kind["yarn"]["original_max_position_embeddings"] == L
    assert by_kind["llama3"]["factor"] == s
    # the matched arms: the factor is n / L at every length past L
    for r in results["scaling_matched"]:
        assert sorted(map(int, r["rope_parameters"])) == [n for n in lengths if n > L]
        for n, p in r["rope_parameters"].items():
            if r["kind"] != "ntk":
                assert p["factor"] == pytest.approx(int(n) / L)
    # "NTK with a matched factor is exactly transformers' dynamic NTK"
    for n in lengths[1:]:
        assert R.scaling_values(results, "ntk", n, mode="matched") == pytest.approx(
            R.scaling_values(results, "dynamic", n), abs=1e-6)


def test_fine_tuning_arms_and_their_rates(results):
    seeds = results["config"]["seeds"]
    ft = results["config"]["finetune"]
    assert R.finetune_arms(results) == FINISHED_ARMS
    more = results["config"]["finetune_more_seeds"]
    assert {(r["arm"], r["seed"]) for r in results["finetune"]} == {
        (a, x) for a in FINISHED_ARMS for x in seeds} | {
        (a, x) for a in more["arms"] for x in more["seeds"]}
    for arm in FINISHED_ARMS:
        tried = sorted(g["lr"] for g in results["finetune_grid"] if g["arm"] == arm)
        rate = results["finetune_rates"][arm]
        assert rate == min((g for g in results["finetune_grid"] if g["arm"] == arm),
                           key=lambda g: g["valid"])["lr"]
        assert tried[0] < rate < tried[-1]
        assert set(ft["lrs"]) <= set(tried)
    for r in results["finetune"]:
        assert r["lr"] == results["finetune_rates"][r["arm"]]
        assert [s for s, _ in r["losses"]][-1] == ft["steps"] - 1
    pending = {k for k in results["pending"] if k.startswith("finetune-")}
    assert pending == {f"finetune-{a}" for a in ft["arms"] if a not in FINISHED_ARMS} | (
        {"finetune-probes"} if not results["probes"] else set())


def test_the_page_shows_only_finished_stages(results):
    en = PAGES["en"].read_text()
    assert results["copy"] is not None and "experiment_task_table(results, \"copy\")" in en
    assert results["passkey"] is not None and "experiment_task_table(results, \"passkey\")" in en
    # every stage finished: the page says so, and the file names nothing pending
    assert results["pending"] == {} and "here every stage\nhas finished" in en
    assert "experiment_task_figure" not in en
    assert ("Only the control has finished every seed so far" in en) == (
        R.finetune_arms(results) == ["plain"])


def _learned_as_stated(results, task, stated):
    """The seeds that learned ``task``, per encoding, are the page's ``stated`` counts;
    every seed (the rate grid's too) trained to the target or to the cap; and, as the page
    says, no encoding chose the largest rate of the task's grid (nor the smallest); the grid
    refined (experiments/taskgrid.py) exactly where seed 0 learned at no rate, and no
    refined run learned."""
    sys.path.insert(0, str(ROOT))
    from experiments.taskgrid import midpoints

    tc = results["config"][task]
    learned = {e: R.task_learned(results, task, e)["k"] for e in ENCODINGS}
    assert learned == stated
    assert task in results["config"]["task_refine"]
    for enc, chosen in results[task]["chosen"].items():
        assert min(tc["lrs"]) < chosen["lr"] < max(tc["lrs"]), (task, enc)
        grid = [g for g in results[task]["grid"] if g["encoding"] == enc]
        on_grid = [g for g in grid if g["lr"] in tc["lrs"]]
        assert {g["lr"] for g in on_grid} == set(tc["lrs"])
        if any(g["learned"] for g in on_grid):
            assert "refined" not in chosen and len(grid) == len(on_grid)
        else:
            best = max(on_grid, key=lambda g: g["valid"])["lr"]
            assert chosen["refined"] == midpoints(tc["lrs"], best)
            assert sorted(g["lr"] for g in grid) == sorted(tc["lrs"] + chosen["refined"])
            assert not any(g["learned"] for g in grid)
        assert {r["lr"] for r in results[task]["runs"] if r["encoding"] == enc} \
            == {chosen["lr"]}
    for r in results[task]["runs"] + results[task]["grid"]:
        assert r["learned"] == (r["valid"] >= tc["target"])
        assert r["learned"] or r["steps"] == tc["steps"]
    # the cap check trained every seed that did not learn again, at its chosen rate, with
    # twice the cap, and each of those too stopped at the target or at its cap
    caps = results[task]["caps"]
    assert sorted((r["encoding"], r["seed"], r["lr"]) for r in caps) == sorted(
        (r["encoding"], r["seed"], r["lr"]) for r in results[task]["runs"] if not r["learned"])
    for r in caps:
        assert r["params"][task]["steps"] == 2 * tc["steps"]
        assert r["learned"] == (r["valid"] >= tc["target"])
        assert r["learned"] or r["steps"] == 2 * tc["steps"]
    return tc, learned


def test_the_copy_task_as_the_page_states_it(results):
    cp, learned = _learned_as_stated(results, "copy", {
        "nope": 0, "learned": 5, "sinusoidal": 5, "rope": 5, "alibi": 5, "t5": 5})
    # only NoPE's grid was refined, and its choice stayed
    assert {e for e, c in results["copy"]["chosen"].items() if "refined" in c} == {"nope"}
    assert results["copy"]["chosen"]["nope"]["lr"] == 0.03
    assert results["copy"]["replaced"] == []
    # nothing for the rate check: NoPE's seed 0 learned at no rate, the others all learned
    assert results["copy"]["rates"] == []
    # and NoPE does not learn with twice the cap either
    assert [(r["encoding"], r["k"]) for r in R.task_cap_check(results, "copy")] == [("nope", 0)]
    # NoPE's seeds part ways: one far ahead of the other four, none at the target
    nope = sorted(r["valid"] for r in results["copy"]["runs"] if r["encoding"] == "nope")
    assert len(nope) == 5 and nope[-1] > 0.5 and nope[-2] < 0.2
    # the T5 bias learns only at the rate it chose: one step down the grid it stops short
    t5 = results["copy"]["chosen"]["t5"]["lr"]
    below = max((g for g in results["copy"]["grid"] if g["encoding"] == "t5"
                 and g["lr"] < t5), key=lambda g: g["lr"])
    assert not below["learned"] and below["valid"] < cp["target"]
    twice = 2 * cp["m"][1]
    for enc in ENCODINGS:
        if learned[enc] == 0:
            assert R.task_extrapolation(results, "copy", enc, twice) is None
            continue
        # past the trained lengths no learned seed gets half the strings whole
        for m in cp["eval_m"]:
            ext = R.task_extrapolation(results, "copy", enc, m)
            if m > cp["m"][1] and ext is not None:
                assert ext["k"] == 0, (enc, m)

    def learned_mean(enc, m, key):
        runs = [r for r in results["copy"]["runs"] if r["encoding"] == enc and r["learned"]]
        vals = [r["test"][str(m)] for r in runs if r["test"][str(m)] is not None]
        return mean([v["free"]["symbol"] if key == "free" else v[key] for v in vals])

    exact = {e: learned_mean(e, twice, "exact") for e in ("sinusoidal", "rope", "alibi", "t5")}
    assert max(exact, key=exact.get) == "alibi"
    symbol = {e: learned_mean(e, twice, "symbol") for e in exact}
    assert sorted(symbol, key=symbol.get, reverse=True) == ["alibi", "t5", "rope",
                                                           "sinusoidal"]
    # teacher forcing flatters: free-running per-symbol accuracy well below it
    assert learned_mean("alibi", twice, "free") < learned_mean("alibi", twice, "symbol") - 0.2
    assert learned_mean("alibi", cp["m"][1], "free") < learned_mean(
        "alibi", cp["m"][1], "symbol")
    # exact match is the same teacher-forced and free-running
    for r in results["copy"]["runs"]:
        for v in r["test"].values():
            if v is not None:
                assert v["exact"] == v["free"]["exact"]


def test_the_passkey_task_as_the_page_states_it(results):
    from posenc.analysis.experiments.tasks import KEY, passkey_batch

    pk, _ = _learned_as_stated(results, "passkey", {
        "nope": 0, "learned": 2, "sinusoidal": 1, "rope": 5, "alibi": 5, "t5": 5})
    # NoPE's and the sinusoidal model's grids were refined; NoPE kept its rate, the
    # sinusoidal model's moved to the midpoint above it, and its seeds there replaced the
    # stage's seeds at the old rate
    chosen = results["passkey"]["chosen"]
    assert {e for e, c in chosen.items() if "refined" in c} == {"nope", "sinusoidal"}
    assert chosen["nope"]["lr"] == 0.003
    assert chosen["sinusoidal"]["lr"] == 0.00548 == chosen["sinusoidal"]["refined"][-1]
    assert {(r["encoding"], r["lr"]) for r in results["passkey"]["replaced"]} == {
        ("sinusoidal", 0.003)}
    # at the old rate 2 of 5 had learned within the cap, at the new one 1 of 5: each count
    # inside the other's Wilson interval ("a difference five seeds cannot separate")
    old = [r["learned"] for r in results["passkey"]["replaced"]]
    new = [r["learned"] for r in results["passkey"]["runs"] if r["encoding"] == "sinusoidal"]
    assert (sum(old), len(old), sum(new), len(new)) == (2, 5, 1, 5)
    w_old, w_new = R.stats.wilson(sum(old), len(old)), R.stats.wilson(sum(new), len(new))
    assert w_old["lo"] <= sum(new) / len(new) <= w_old["hi"]
    assert w_new["lo"] <= sum(old) / len(old) <= w_new["hi"]
    hi = pk["total"][1]

    def ext(enc, n):
        return R.task_extrapolation(results, "passkey", enc, n)

    # the learned table cannot read past its rows; nothing to extrapolate without a seed
    assert ext("learned", 2 * hi) is None and ext("nope", 2 * hi) is None
    # the sinusoidal seed that learned (one, "it") retrieves no key past the trained lengths
    assert ext("sinusoidal", 2 * hi)["k"] == 0
    sin_learned = [r for r in results["passkey"]["runs"]
                   if r["encoding"] == "sinusoidal" and r["learned"]]
    assert len(sin_learned) == 1
    assert all(d["exact"] == 0.0 for r in sin_learned for n, v in r["test"].items()
               if int(n) > hi for d in v.values())
    assert max(r["valid"] for r in results["passkey"]["runs"] if r["encoding"] == "nope") < 0.9
    # the rate check: only the learned table had another rate at which seed 0 learned,
    # and there it learns in more seeds than at the chosen rate, at one of them in all
    rc = R.task_rate_check(results, "passkey")
    assert {r["encoding"] for r in rc} == {"learned"}
    assert rc[0]["chosen"] and rc[0]["k"] == 2 and len(rc) == 3
    assert [r["lr"] for r in rc[1:]] == [g["lr"] for g in results["passkey"]["grid"]
                                         if g["encoding"] == "learned" and g["learned"]
                                         and g["lr"] != rc[0]["lr"]]
    assert max(r["k"] for r in rc[1:]) == rc[0]["n"] > rc[0]["k"]
    assert not any(g["learned"] for g in results["passkey"]["grid"]
                   if g["encoding"] == "sinusoidal")
    # the cap check (twice the cap, the same cap for both tasks): the learned table then
    # learns in every seed, its new ones inside the first cap; the sinusoidal model in
    # more seeds than within the cap but not in all; NoPE in none
    assert results["config"]["copy"]["steps"] == pk["steps"]
    caps = {r["encoding"]: r for r in R.task_cap_check(results, "passkey")}
    assert set(caps) == {"nope", "learned", "sinusoidal"}
    assert caps["learned"]["k"] == caps["learned"]["n"] and len(caps["learned"]["rerun"]) == 3
    assert max(r["steps"] for r in results["passkey"]["caps"]
               if r["encoding"] == "learned") < pk["steps"]
    assert len(caps["sinusoidal"]["within"]) < caps["sinusoidal"]["k"] == caps["sinusoidal"]["n"]
    assert len(caps["sinusoidal"]["within"]) == 1  # "like the first"
    assert caps["nope"]["k"] == 0
    # the sinusoidal seeds that learn with the longer cap retrieve no key past the trained
    # lengths either
    new_sin = [r for r in results["passkey"]["caps"]
               if r["encoding"] == "sinusoidal" and r["learned"]]
    assert new_sin and all(d["exact"] == 0.0 for r in new_sin for n, v in r["test"].items()
                           if int(n) > hi for d in v.values())
    # ... and all past the first cap
    assert min(r["steps"] for r in new_sin) > pk["steps"]
    # the warm-up check: every seed the longer cap turned, at the first cap with only the
    # longer warm-up: the learned table's all learn (inside the first cap), the sinusoidal
    # model's some but not all
    warm = {r["encoding"]: r for r in R.task_warmup_check(results, "passkey")}
    assert set(warm) == {"learned", "sinusoidal"}
    for enc, row in warm.items():
        assert row["rerun"] == sorted(set(caps[enc]["seeds"]) - set(caps[enc]["within"]))
        assert row["warmup"] == 2 * pk["steps"] // 10
    assert warm["learned"]["k"] == warm["learned"]["n"] == 3
    assert max(warm["learned"]["steps"]) < pk["steps"]
    assert 0 < warm["sinusoidal"]["k"] < warm["sinusoidal"]["n"] == 4
    assert all(r["params"]["passkey"]["steps"] == pk["steps"]
               for r in results["passkey"]["warmups"])
    assert results["copy"]["warmups"] == []  # no copy seed learned only with the longer cap
    # every seed at a checked rate trained to the target or to the cap, as the others
    for r in results["passkey"]["rates"]:
        assert r["learned"] == (r["valid"] >= pk["target"])
        assert r["learned"] or r["steps"] == pk["steps"]
    # at twice the length ALiBi retrieves in the most seeds; at four times only ALiBi
    assert ext("alibi", 2 * hi)["k"] > max(ext("rope", 2 * hi)["k"], ext("t5", 2 * hi)["k"])
    assert ext("alibi", 4 * hi)["k"] > 0 == ext("rope", 4 * hi)["k"] == ext("t5", 4 * hi)["k"]
    assert all(ext(e, max(pk["eval_totals"]))["k"] == 0
               for e in ("rope", "alibi", "t5", "sinusoidal"))

    # the depth table: the distances it names, and the pattern the prose reads from it
    def distance(total, depth):
        seq, _ = passkey_batch(1, total, depth, np.random.default_rng(0))
        at = np.flatnonzero(seq[0].numpy() == KEY)
        return int(at[1] - at[0])

    far_in_training = distance(hi, 0.0)
    near, middle, far = sorted(pk["depths"], reverse=True)
    assert distance(2 * hi, near) <= far_in_training < distance(2 * hi, middle)
    assert distance(2 * hi, middle) < distance(2 * hi, far)
    # the training sequences contain every distance up to the furthest one
    assert all(distance(t, d) <= far_in_training for t in range(pk["total"][0], hi + 1)
               for d in (0.0, 0.37, 1.0))

    def depth_mean(enc, n, d):
        vals = R.task_values(results, "passkey", enc, n, depth=d, learned_only=True)
        return float(np.mean(vals))

    rope = [depth_mean("rope", 2 * hi, d) for d in (near, middle, far)]
    assert rope[0] > rope[1] > rope[2] and rope[2] < 0.05
    assert depth_mean("rope", 4 * hi, near) < rope[0]
    assert depth_mean("alibi", 2 * hi, far) > 0.5
    assert depth_mean("t5", 2 * hi, far) > depth_mean("t5", 2 * hi, near)
    # the sinusoidal model's best seed-0 run ended at the cap short of the target, and is
    # the run at its chosen rate, which learned with twice the cap
    sin = max((r for r in results["passkey"]["grid"] if r["encoding"] == "sinusoidal"),
              key=lambda r: r["valid"])
    assert sin["steps"] == pk["steps"] and sin["valid"] < pk["target"]
    assert sin["lr"] == chosen["sinusoidal"]["lr"] and 0 in caps["sinusoidal"]["seeds"]


# -- the claims --------------------------------------------------------------------------


def test_the_family_of_claims_has_the_outcomes_the_page_states(results, claims):
    names = {c[0] for c in R.claim_family(results)}
    assert HOLDS <= names and set(claims) == names
    assert {n for n, c in claims.items() if c["holds"]} == HOLDS
    for c in claims.values():
        # the bootstrap interval and the seed-level test agree on the sign where it holds
        if c["holds"]:
            assert c["hi"] < 0 and c["p_holm"] < 0.05
    # Holm over the whole family: adjusted p-values at least the raw ones
    assert all(c["p_holm"] >= c["p"] for c in claims.values())
    # the claims every seed points to that the correction leaves not separated
    for name in EDGE:
        c = claims[name]
        assert not c["holds"] and c["hi"] < 0 and c["p"] < 0.01 < c["p_holm"], name
    # every ranking sentence is in the family: NoPE against RoPE and the sinusoidal model
    # at every length past L, the fine-tuned control at L, the budget's RoPE far out, the
    # ablation's head width 64 and NoPE against its best base
    L = results["config"]["lm"]["train_length"]
    assert {f"{n // L}L_nope_{e}" for n in R.lengths(results)[1:] for e in ("rope", "sin")} \
        <= names
    assert {"ft_plain_rope_L", "budget_rope_top", "abl_500_1e4_h64", "abl_1e4_1e6_h64",
            "abl_nope_500_h16"} <= names
    # every claim's name appears in the page's glue (the prose reads them by name)
    en = PAGES["en"].read_text()
    stated = set(re.findall(r"`c_([A-Za-z0-9_]+?)(?:_lo|_hi|_pt|_p|_v)?(?::[^`]*)?`", en))
    assert len(stated) > 30 and stated <= names, stated - names


def test_a_sign_flip_test_cannot_separate_the_family(results, claims):
    """The statistics paragraph: an exact sign-flip test over n paired seeds cannot give a
    two-sided p below 2 / 2**n (reached when every difference has one sign), and Holm's
    correction multiplies the family's smallest p by the family's size, so even on ten
    seeds no claim could pass 0.05 under such a test."""
    import itertools

    def sign_flip_p(diffs):
        observed = abs(sum(diffs))
        flips = list(itertools.product((1, -1), repeat=len(diffs)))
        return sum(abs(sum(f * d for f, d in zip(fl, diffs, strict=True))) >= observed - 1e-12
                   for fl in flips) / len(flips)

    for n in (5, 10):
        assert sign_flip_p([0.3, 0.1, 0.2, 0.5, 0.4, 0.6, 0.9, 0.7, 0.8, 1.0][:n]) == 2 / 2**n
    # the smallest p any claim could have under it, times the family's size
    assert len(claims) * 2 / 2**10 > 0.05
    # ... while the t test the page uses does separate most claims on the same seeds
    assert sum(c["holds"] for c in claims.values()) > len(claims) / 2


def test_no_verdict_moves_with_the_bootstrap_seed(results, claims):
    """With report.N_BOOT replicates a claim's verdict does not depend on the bootstrap's
    own seed (with 2,000 one did: an interval's end within 1e-4 of zero)."""
    held = {n: c["holds"] for n, c in claims.items()}
    for seed in (1, 2):
        assert {c["name"]: c["holds"] for c in R.claims(results, seed=seed)} == held, seed


def test_every_close_call_is_read_on_ten_seeds(results):
    """The protocol's rule (report.close_calls): a claim whose sides are within one seed
    standard deviation on the first five seeds is read on ten; these are the ones it names,
    as the statistics paragraph lists them."""
    close = R.close_calls(results)
    assert {c["name"] for c in close} == {
        "ctx_rope_self", "ctx_alibi_self", "ctx_rope_self_2L", "ctx_alibi_self_2L",
        "ft_ntk_plain", "ft_yarn_plain", "abl_500_1e4_h64", "abl_1e4_1e6_h64"}
    assert all(c["seeds"] == list(range(10)) and c["gap"] <= c["sd"] for c in close)
    # the rule reads the first five seeds only, whatever was added since
    first = results["config"]["seeds"]
    for c in close:
        claim = next(x for x in R.claim_family(results) if x[0] == c["name"])
        n_a = claim[3][0] if isinstance(claim[3], tuple) else claim[3]
        rows = [r for r in R._series_rows(results, claim[1]) if r["seed"] in first]
        assert len(rows) == len(first) and all(str(n_a) in r["test"] for r in rows)


def test_the_claims_table_renders_in_both_languages(results):
    for lang in ("en", "zh"):
        pf.set_language(lang)
        table = pf.experiment_claims_table(results, n_boot=200)
        assert len(table.rows) == len(R.claim_family(results))
    pf.set_language("en")


def test_statements_beside_the_claims(results, lengths, claims):
    L, top = lengths[0], lengths[-1]
    chosen = results["lm"]["chosen"]
    # tuning: every encoding at the middle rate; scale 1 for learned, ALiBi and T5
    assert {c["lr"] for c in chosen.values()} == {sorted(results["config"]["lm"]["lrs"])[1]}
    assert {e for e, c in chosen.items() if c["embed_scale"] == 1.0} == {
        "learned", "alibi", "t5"}
    grid = {(g["encoding"], g["lr"], g["embed_scale"]): g["valid"]
            for g in results["lm"]["grid"]}
    lr = chosen["sinusoidal"]["lr"]
    assert grid[("sinusoidal", lr, 7.07)] < grid[("sinusoidal", lr, 50.0)] < \
        grid[("sinusoidal", lr, 1.0)]
    assert abs(grid[("rope", lr, 1.0)] - grid[("rope", lr, 7.07)]) < 0.01
    # not converged: twice the steps lowers every encoding's loss at the training length
    main, more = results["config"]["lm"]["steps"], max(R.budget_steps(results))
    for enc in ENCODINGS:
        assert mean(R.budget_values(results, enc, more, L)) < mean(
            R.budget_values(results, enc, main, L)), enc
    # ALiBi flat on the fixed targets and on the far ones
    for metric in ("target", "far"):
        al = [mean(lm(results, "alibi", n, metric)) for n in lengths]
        assert max(al) - min(al) < 0.01, metric
    # the T5 bias degrades gradually; RoPE and the sinusoidal model at once
    t5 = [mean(lm(results, "t5", n)) for n in lengths]
    assert all(0 < b - a < 0.6 for a, b in zip(t5, t5[1:]))
    for enc in ("rope", "sinusoidal"):
        assert mean(lm(results, enc, 2 * L)) - mean(lm(results, enc, L)) > 1.0
    # the table's seeds: ten for RoPE, the T5 bias and the sinusoidal model, five for the rest
    assert set(results["config"]["lm_more_seeds"]["encodings"]) == {"rope", "t5", "sinusoidal"}
    for enc in ENCODINGS:
        assert len(R.lm_values(results, enc, L)) == (10 if enc in ("rope", "t5", "sinusoidal")
                                                     else 5), enc
    # NoPE ahead of RoPE and the sinusoidal model at every longer length
    for n in lengths[1:]:
        for enc in ("rope", "sinusoidal"):
            assert mean(lm(results, "nope", n)) < mean(lm(results, enc, n)), (n, enc)
    # NoPE below T5 far out in the means, not separated
    assert mean(lm(results, "nope", top)) < mean(lm(results, "t5", top))
    # the references are worse on the far targets than the L models (no gain to share),
    # those trained at 2L between the L models and those trained at 4L
    rf = results["config"]["references"]
    assert sorted(rf["factors"]) == [2, 4]
    for enc in rf["encodings"]:
        far = [mean(lm(results, enc, L, "far"))] + [
            mean(R.reference_values(results, enc, L * f, L * f, "far"))
            for f in sorted(rf["factors"])]
        assert far == sorted(far), (enc, far)
    # the references' rate check: the rate tuned for L is the best for every reference but
    # ALiBi at 4L, which a lower rate trains better; its retrained seeds are the ones the
    # page reads, better on the far targets than at the first rate, still worse than ALiBi
    # trained at L
    checks = R.reference_rate_check(results)
    assert {(c["encoding"], c["train_length"]) for c in checks
            if c["lr"] != c["own_lr"]} == {("alibi", 4 * L)}
    for c in checks:
        assert len(c["valid"]) >= 3 and c["lr"] == min(c["valid"], key=c["valid"].get)
        assert min(c["valid"]) < c["lr"] < max(c["valid"])  # the optimum inside its grid
    c = next(c for c in checks if c["encoding"] == "alibi" and c["train_length"] == 4 * L)
    assert c["lr"] < c["own_lr"] and c["valid"][c["lr"]] < c["valid"][c["own_lr"]]
    first = mean(R.reference_values(results, "alibi", 4 * L, 4 * L, "far", rate="first"))
    tuned = mean(R.reference_values(results, "alibi", 4 * L, 4 * L, "far"))
    assert mean(lm(results, "alibi", L, "far")) < tuned < first
    tuned_keys = {r["key"] for r in results["references_rates"]["tuned"]}
    assert {r["key"] for r in R._series_rows(results, ("ref", "alibi", 4 * L))} == tuned_keys
    assert len(tuned_keys) == len(results["config"]["references"]["seeds"])
    # two orders lower in every seed on five seeds each, with raw p below 0.01, yet not
    # separated after the correction over the whole family (Holm's multiplier is one per
    # claim ranked at or after it, and the family holds every ranking sentence)
    for name, a, b, n in (("4L_alibi_t5", ("lm", "alibi"), ("lm", "t5"), 4 * L),
                          ("2L_yarn_matched_alibi", ("scale", "yarn", "matched"),
                           ("lm", "alibi"), 2 * L)):
        x, _, seeds = R.paired_chunks(results, a, b, n, "target")
        assert (x.mean(axis=1) < 0).all() and len(seeds) == 5, name
        assert claims[name]["hi"] < 0 and claims[name]["p"] < 0.01, name
        assert not claims[name]["holds"] and 0.05 < claims[name]["p_holm"] < 0.1, name
        below = sum(c["p"] < claims[name]["p"] for c in claims.values())
        assert claims[name]["p_holm"] >= (len(claims) - below) * claims[name]["p"] - 1e-12
    # within one reference (one load of its weights), reading 4L instead of L on ten seeds:
    # RoPE lower on the far targets in all but one seed but not separated, on all the
    # targets not better; ALiBi lower in every seed and separated; each within-model gain
    # tens of times smaller than the between-model gap
    ref = ("refctx", "rope", 4 * L)
    x, _, seeds = R.paired_chunks(results, ref, ref, (4 * L, L), "far")
    assert (x.mean(axis=1) < 0).sum() == 9 and len(seeds) == 10
    by = claims
    assert by["ctx_rope_self"]["hi"] < 0 and not by["ctx_rope_self"]["holds"]
    assert 0.05 < by["ctx_rope_self"]["p_holm"] < 0.1
    ctl = R.difference(results, ref, ref, (4 * L, L), "target")
    assert ctl["mean"] > 0 and ctl["hi"] > 0
    ref_a = ("refctx", "alibi", 4 * L)
    x, _, _ = R.paired_chunks(results, ref_a, ref_a, (4 * L, L), "far")
    assert (x.mean(axis=1) < 0).all() and by["ctx_alibi_self"]["holds"]
    assert -0.001 < by["ctx_alibi_self"]["hi"] < 0  # why no share of it is given
    for enc in ("rope", "alibi"):
        assert by[f"ctx_{enc}_ref"]["mean"] / by[f"ctx_{enc}_self"]["mean"] > 20, enc
    # the share of the reference's gain the model trained at L recovers: ALiBi's interval
    # from below 0 to above 1 (no useful interval), RoPE's over a hundred times the wrong way
    share = {e: R.context_share(results, e, 4 * L) for e in ("alibi", "rope")}
    assert share["alibi"]["lo"] < 0 < share["alibi"]["share"] < 1 < share["alibi"]["hi"]
    assert share["rope"]["share"] < share["rope"]["hi"] < -100
    # ... and the same resampling gives the same interval (a fixed bootstrap seed)
    assert R.context_share(results, "alibi", 4 * L) == share["alibi"]
    # the references trained at 2L, reading 2L instead of L: both lower in the mean, both
    # intervals holding zero ("all four changes point the way ..., only the ALiBi reference
    # at 4L is separated")
    for enc in ("rope", "alibi"):
        c = by[f"ctx_{enc}_self_2L"]
        assert -0.005 < c["mean"] < 0 and c["lo"] < 0 < c["hi"] and not c["holds"], enc
    assert [n for n in by if n.startswith("ctx_") and "self" in n and by[n]["holds"]] == [
        "ctx_alibi_self"]
    # ... the ALiBi reference at 2L by its interval alone: its adjusted p is below 0.05
    assert by["ctx_alibi_self_2L"]["p_holm"] < 0.05 <= by["ctx_rope_self_2L"]["p_holm"]
    # the models trained at L: ALiBi's change on the far targets not separated from zero,
    # the T5 bias and NoPE worse
    own = {e: R.difference(results, ("lm", e), ("lm", e), (4 * L, L), "far")
           for e in ("alibi", "t5", "nope")}
    assert own["alibi"]["lo"] < 0 < own["alibi"]["hi"]
    assert own["t5"]["lo"] > 0 and own["nope"]["lo"] > 0
    # scaling with one factor: static NTK the best fixed rule at 2L and 4L, PI the worst
    for n in (2 * L, 4 * L):
        fixed = {k: mean(R.scaling_values(results, k, n)) for k in ("pi", "ntk", "yarn",
                                                                    "llama3")}
        assert min(fixed, key=fixed.get) == "ntk" and max(fixed, key=fixed.get) == "pi"
    # matched: at the longest length the best rule is worse than NoPE
    best = min(mean(R.scaling_values(results, k, top, mode="matched"))
               for k in ("pi", "ntk", "yarn", "llama3"))
    assert best > mean(lm(results, "nope", top))
    # the ablation (ten seeds): at 2L and head width 16 the means order by base, both steps
    # separated; at head width 64 the largest base has the lowest mean, neither step
    # separated either way, and head 64 spreads less; NoPE ahead of base 500 in the means
    ab = results["config"]["ablation"]
    assert ab["seeds"] == list(range(10))
    h16 = [mean(R.ablation_values(results, b, 16, 2 * L)) for b in ab["bases"]]
    h64 = [mean(R.ablation_values(results, b, 64, 2 * L)) for b in ab["bases"]]
    assert h16 == sorted(h16) and max(h64) - min(h64) < max(h16) - min(h16)
    assert min(h64) == h64[-1] and h64 != sorted(h64)
    assert min(h16) > mean(lm(results, "nope", 2 * L))
    assert not claims["abl_nope_500_h16"]["holds"] and claims["abl_nope_500_h16"]["mean"] < 0
    for name in ("abl_500_1e4_h64", "abl_1e4_1e6_h64"):
        assert claims[name]["lo"] < 0 < claims[name]["hi"], name
        assert len(claims[name]["seeds"]) == 10, name
    assert claims["abl_1e4_1e6_h64"]["mean"] > 0
    # seed 0's choice against its close rivals: RoPE's scale 1 and ALiBi's scale 7.07 came
    # within one seed standard deviation on seed 0; on every seed the chosen setting is not
    # worse in the mean, on validation or at L; RoPE's rival is level (intervals hold 0 at
    # every length), ALiBi's worse at every length
    rivals = {c["encoding"]: c for c in R.lm_rival_check(results)}
    assert {(e, c["lr"], c["embed_scale"]) for e, c in rivals.items()} == {
        ("rope", 0.01, 1.0), ("alibi", 0.01, 7.07)}
    for c in rivals.values():
        assert c["seeds"] == [0, 1, 2, 3, 4] and 0 < c["gap"] <= c["spread"]
        assert c["valid"]["mean"] > 0 and c["test"][L]["mean"] > 0
    assert all(d["lo"] < 0 < d["hi"] for d in [rivals["rope"]["valid"],
                                                *rivals["rope"]["test"].values()])
    assert all(d["lo"] > 0 for d in [rivals["alibi"]["valid"],
                                     *rivals["alibi"]["test"].values()])
    # ... and no other grid point came that close on seed 0
    for enc, pick in results["lm"]["chosen"].items():
        grid = {(g["lr"], g["embed_scale"]): g["valid"] for g in results["lm"]["grid"]
                if g["encoding"] == enc}
        sd = R.summarise([r["valid"] for r in R.lm_rows(results, enc) if r["seed"] < 5])["sd"]
        best = grid[(pick["lr"], pick["embed_scale"])]
        assert sum(v - best <= sd for v in grid.values()) == 1 + (enc in rivals), enc
    # the fine-tuning's rates by the same yardstick: no arm has a rival, and the closest
    # call (the one the chapter names) is static NTK's next rate up, 0.027
    margins = {m["arm"]: m for m in R.finetune_rate_margin(results)}
    assert list(margins) == ["plain", "pi", "ntk", "yarn"]
    assert all(m["rivals"] == [] and m["gap"] > m["spread"] for m in margins.values())
    closest = min(margins.values(), key=lambda m: m["gap"] / m["spread"])
    assert (closest["arm"], closest["lr"], closest["runner_up"]) == ("ntk", 0.009, 0.027)
    # the ablation's rate check: the first rate is the best for every arm but base 10^6 at
    # head width 64, which a higher rate trains better on seed 0 by less than the seeds'
    # spread; its retrained seeds, the ones the page reads, are worse at L in most seeds
    # and the mean, yet move at 2L by more than the three bases differ at the first rate
    checks = R.ablation_rate_check(results)
    assert len(checks) == 5
    assert {(c["rope_base"], c["head_dim"]) for c in checks
            if c["lr"] != c["own_lr"]} == {(1e6, 64)}
    for c in checks:
        assert len(c["valid"]) >= 3 and c["lr"] == min(c["valid"], key=c["valid"].get)
        assert min(c["valid"]) < c["lr"] < max(c["valid"])  # the optimum inside its grid
    c = next(c for c in checks if c["lr"] != c["own_lr"])
    assert c["lr"] > c["own_lr"]
    now, first = (R.ablation_values(results, 1e6, 64, L, rate=r) for r in ("chosen", "first"))
    margin = c["valid"][c["own_lr"]] - c["valid"][c["lr"]]
    assert 0 < margin < R.summarise(first)["sd"]
    assert sum(a > b for a, b in zip(now, first)) >= 3 and mean(now) > mean(first)
    shift = (mean(R.ablation_values(results, 1e6, 64, 2 * L))
             - mean(R.ablation_values(results, 1e6, 64, 2 * L, rate="first")))
    first_2L = [mean(R.ablation_values(results, b, 64, 2 * L, rate="first"))
                for b in ab["bases"]]
    assert abs(shift) > max(first_2L) - min(first_2L)
    tuned_keys = {r["key"] for r in results["ablation_rates"]["tuned"]}
    assert {r["key"] for r in R._series_rows(results, ("abl", 1e6, 64))} == tuned_keys
    assert len(tuned_keys) == len(ab["seeds"])
    # at head width 64 no difference between bases separates at 2L, at either rate
    for b in (500.0, 1e6):
        d = R.difference(results, ("abl", b, 64), ("abl", 1e4, 64), 2 * L, n_boot=500)
        assert d["lo"] < 0 < d["hi"], b
    # the budget: what holds at every budget, and what does not
    steps = R.budget_steps(results)
    for st in steps:
        at_L = {e: mean(R.budget_values(results, e, st, L)) for e in ENCODINGS}
        assert sorted(at_L, key=at_L.get)[:2] in (["rope", "t5"], ["t5", "rope"]), st
        far = {e: mean(R.budget_values(results, e, st, top)) for e in ENCODINGS
               if e != "learned"}
        assert min(far, key=far.get) == "alibi"
        assert set(sorted(far, key=far.get)[-2:]) == {"rope", "sinusoidal"}
        assert max(at_L, key=at_L.get) == ("nope" if st >= results["config"]["lm"]["steps"]
                                           else "sinusoidal")
        flat = [mean(R.budget_values(results, "alibi", st, n)) for n in lengths]
        assert max(flat) - min(flat) < 0.01, st
    rope_top = [mean(R.budget_values(results, "rope", st, top)) for st in steps]
    assert rope_top == sorted(rope_top)
    assert claims["budget_rope_top"]["mean"] < 0 and not claims["budget_rope_top"]["holds"]
    lo = steps[0]
    assert mean(R.budget_values(results, "nope", lo, L)) < min(
        mean(R.budget_values(results, e, lo, L)) for e in ("learned", "sinusoidal"))
    assert mean(R.budget_values(results, "t5", steps[-1], top)) < mean(
        R.budget_values(results, "nope", steps[-1], top))
    # the fine-tuned control: better than RoPE at L too, worse again past the tuned length
    n_ft = L * results["config"]["finetune"]["factor"]
    assert mean(R.finetune_values(results, "plain", L)) < mean(lm(results, "rope", L))
    assert mean(R.finetune_values(results, "plain", 2 * n_ft)) > mean(
        R.finetune_values(results, "plain", n_ft)) + 0.3
    # every arm chose the same rate; NTK and YaRN level with the control at the tuned
    # length, the control lowest of all at twice that length
    assert len(set(results["finetune_rates"].values())) == 1
    ft = {a: {n: mean(R.finetune_values(results, a, n)) for n in lengths}
          for a in FINISHED_ARMS}
    for arm in ("ntk", "yarn"):
        assert abs(ft[arm][n_ft] - ft["plain"][n_ft]) < 0.01
        # on ten seeds, an interval that holds zero and excludes a difference past 0.01
        c = R.difference(results, ("ft", arm), ("ft", "plain"), n_ft)
        assert len(c["seeds"]) == 10 and -0.01 < c["lo"] < 0 < c["hi"] < 0.01, arm
    assert ft["pi"][n_ft] > ft["plain"][n_ft]
    assert min(ft, key=lambda a: ft[a][2 * n_ft]) == "plain"
    # no model, fine-tuned or not, retrieves a passkey from the text
    assert results["probes"] and max(
        d["exact"] for r in results["finetune"] + results["probes"]
        for v in r["probe"].values() for d in v.values()) == 0.0
    # the larger model agrees on the order at twice the length (GPU tier: only the
    # Llama 3.1 rule separated; test_gpu_claims_as_the_prose_states_them pins it)


def test_p_values_in_prose_are_never_a_zero():
    assert [pf.p_text(p) for p in (0.0493, 0.0005, 0.000499, 0.0, 1.0)] == [
        "0.049", "0.001", "< 0.001", "< 0.001", "1.000"]
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="p must be a probability in"):
            pf.p_text(bad)


def test_accessors_reject_bad_input(results):
    with pytest.raises(ValueError, match="encoding must be one of"):
        R.lm_values(results, "xpos", 128)
    with pytest.raises(ValueError, match="metric must be one of"):
        R.lm_values(results, "rope", 128, "bytes")
    with pytest.raises(ValueError, match="mode must be"):
        R.scaling_values(results, "yarn", 256, mode="dynamic")
    with pytest.raises(ValueError, match="seeds must be seeds the file has"):
        R.lm_values(results, "alibi", 128, seeds=[0, 9])
    with pytest.raises(ValueError, match="base and head_dim must name"):
        R.ablation_values(results, 123.0, 16, 128)
    with pytest.raises(ValueError, match="must name a budget run"):
        R.budget_values(results, "rope", 7, 128)
    with pytest.raises(ValueError, match="arm must be a finished"):
        R.finetune_values(results, "longrope", 128)
    with pytest.raises(ValueError, match="schema 3"):
        R.check({"schema": 2})
    with pytest.raises(ValueError, match=r"n must be the length of a reference of 't5'"):
        R.context_share(results, "t5", 512)
    with pytest.raises(ValueError, match=r"n must be the length of a reference of 'alibi' "
                                         r"\(\[256, 512\]\), got 1024"):
        R.context_share(results, "alibi", 1024)
    with pytest.raises(ValueError, match="n_boot must be an integer >= 100"):
        R.context_share(results, "alibi", 512, n_boot=10)
    with pytest.raises(ValueError, match="a recheck file must have 'provenance' and 'units'"):
        pf.load_experiment_recheck(ROOT / "experiments" / "results.json")
    assert results["passkey"] is not None
    with pytest.raises(ValueError, match="task must be 'copy' or 'passkey'"):
        R.task_values(results, "sort", "rope", 48)
    with pytest.raises(ValueError, match="depth must be one of the passkey's depths"):
        R.task_values(results, "passkey", "rope", 96, depth=0.3)
    with pytest.raises(ValueError, match="depth must be one of the passkey's depths"):
        R.task_values(results, "copy", "rope", 24, depth=0.5)
    with pytest.raises(ValueError, match="total must be one of the passkey's test lengths"):
        pf.experiment_passkey_depth_table(results, 100)
    unfinished = {**results, "passkey": None, "pending": {"passkey": "passkey-t5-s4"}}
    with pytest.raises(ValueError, match="is not finished.*passkey-t5-s4"):
        R.task_values(unfinished, "passkey", "rope", 48)
    with pytest.raises(ValueError, match=r"encoding and train_length must name a "
                       r"reference model, got \('rope', 1024\); the file has"):
        R.reference_context_values(results, "rope", 1024, 128)
    with pytest.raises(ValueError, match=r"encoding and train_length must name a "
                       r"reference model, got \('t5', 512\)"):
        R.reference_values(results, "t5", 512, 512, rate="first")
    with pytest.raises(ValueError, match="rate must be 'chosen' or 'first', got 'best'"):
        R.reference_values(results, "rope", 512, 512, rate="best")
    with pytest.raises(ValueError, match="rate must be 'chosen' or 'first', got 'best'"):
        R.ablation_values(results, 500.0, 16, 128, rate="best")
    with pytest.raises(ValueError, match=r"base and head_dim must name an ablation arm, "
                       r"got \(123\.0, 16\)"):
        R.ablation_values(results, 123.0, 16, 128, rate="first")
    # the protocol's own model stands in for its arm at either rate
    assert (R.ablation_values(results, 1e4, 16, 128, rate="first")
            == R.ablation_values(results, 1e4, 16, 128))
    with pytest.raises(ValueError, match=r"results must hold the check of seed 0's choice"):
        R.lm_rival_check({**results, "lm_rivals": None})
    assert R.lm_rival_check({**results, "lm_rivals": {"rivals": [], "runs": []}}) == []
    with pytest.raises(ValueError, match=r"results must hold a finished fine-tuning arm"):
        R.finetune_rate_margin({**results, "finetune": []})
    one_rate = [g for g in results["finetune_grid"] if g["arm"] != "pi" or g["lr"] == 0.009]
    with pytest.raises(ValueError, match=r"finetune_grid must hold the chosen rate and "
                       r"another for arm 'pi'.*got rates \[0\.009\]"):
        R.finetune_rate_margin({**results, "finetune_grid": one_rate})
    with pytest.raises(ValueError, match=r"results must hold the ablation's rate check"):
        R.ablation_rate_check({**results, "ablation_rates": {"grid": [], "chosen": []}})
    with pytest.raises(ValueError, match=r"n must be a length the reference was read at, "
                       r"\[128, 256, 512\], got 1024"):
        R.reference_context_values(results, "rope", 512, 1024)


def test_every_figure_and_table_renders(results, recwarn):
    import matplotlib.pyplot as plt

    for lang in ("en", "zh"):
        pf.set_language(lang)
        for fn in (pf.experiment_length_figure, pf.experiment_scaling_figure,
                   pf.experiment_ablation_figure, pf.experiment_budget_figure,
                   pf.experiment_finetune_figure, pf.experiment_curves_figure):
            plt.close(fn(results))
        for fn in (pf.experiment_table, pf.experiment_tuning_table,
                   pf.experiment_context_table, pf.experiment_reference_rates_table,
                   pf.experiment_ablation_rates_table, pf.experiment_rivals_table):
            assert fn(results).rows
        for task in ("copy", "passkey"):
            assert pf.experiment_task_table(results, task).rows
        assert pf.experiment_passkey_depth_table(results, 96).rows
    pf.set_language("en")
    assert not [w for w in recwarn if "Glyph" in str(w.message)]



GPU_RESULTS = ROOT / "experiments" / "results-gpu.json"


@pytest.fixture(scope="module")
def gpu():
    return pf.load_experiment_results_gpu(GPU_RESULTS)


def test_gpu_file_is_the_tier_the_section_describes(gpu):
    cfg = gpu["config"]
    assert gpu["tier"] == "gpu" and gpu["provenance"]["machine"]["gpu"]
    assert cfg["model"]["d_model"] == 256 and cfg["model"]["n_layers"] == 7
    L = cfg["lm"]["train_length"]
    assert R.gpu_lengths(gpu) == [L * f for f in cfg["lm"]["eval_factors"]]
    # every encoding at the training length with the same seeds (three at least)
    seeds = None
    for enc in ENCODINGS:
        rows = sorted(u["seed"] for u in gpu["units"] if u["key"].startswith("lm-")
                      and u["encoding"] == enc and u["train_length"] == L)
        assert len(rows) >= 3 and (seeds is None or rows == seeds), enc
        seeds = rows
    # the reference model the prose reads, trained at 4 L on the same seeds
    assert len(R.gpu_lm_values(gpu, "rope", 4 * L, train_length=4 * L)) == len(seeds)
    # every rule both ways; a matched factor is n / L and leaves L untouched
    for u in gpu["units"]:
        if u["key"].startswith("scale-") and u["mode"] == "matched":
            assert str(L) not in u["test"]
            for n, p in u["rope_parameters"].items():
                if u["kind"] != "ntk":
                    assert p["factor"] == pytest.approx(int(n) / L)
        elif u["key"].startswith("scale-"):
            assert all(p.get("factor", cfg["scaling"]["factor"]) == cfg["scaling"]["factor"]
                       for p in u["rope_parameters"].values()
                       if p["rope_type"] not in ("default", "dynamic"))


def test_gpu_matched_ntk_is_dynamic_ntk(gpu):
    """The prose says NTK with a matched factor is transformers' dynamic NTK: the two arms
    are different code paths and must give the same losses."""
    L = gpu["config"]["lm"]["train_length"]
    for n in R.gpu_lengths(gpu):
        if n > L:
            np.testing.assert_allclose(R.gpu_scaling_values(gpu, "ntk", "matched", n),
                                       R.gpu_scaling_values(gpu, "dynamic", "fixed", n),
                                       atol=1e-4)


def test_gpu_claims_as_the_prose_states_them(gpu, results, claims):
    gclaims = {c["name"]: c for c in R.gpu_claims(gpu)}
    # every claim of the section's family holds (the table shows nineteen checks)
    assert len(gclaims) == 19 and all(c["holds"] for c in gclaims.values())
    # "where else the tiers disagree": at L, ALiBi below RoPE and the sinusoidal model below
    # the learned table; at 2 L, RoPE ahead of NoPE; each the other way on the CPU tier
    L_cpu = results["config"]["lm"]["train_length"]
    assert mean(lm(results, "rope", L_cpu)) < mean(lm(results, "alibi", L_cpu))
    assert claims["L_learned_sin"]["holds"] and claims["2L_nope_rope"]["holds"]
    # the T5 bias fifth at L, and RoPE failing more slowly than the sinusoidal model
    Lg = gpu["config"]["lm"]["train_length"]
    at_L = {e: mean(R.gpu_lm_values(gpu, e, Lg)) for e in ENCODINGS}
    assert sorted(at_L, key=at_L.get).index("t5") == 4
    rise = {e: mean(R.gpu_lm_values(gpu, e, 2 * Lg)) - at_L[e] for e in ("rope", "sinusoidal")}
    assert 0 < rise["rope"] < rise["sinusoidal"] / 2
    # the tier's rate is one, untuned
    assert isinstance(gpu["config"]["plan"]["lr"], float)
    # Holm never lowers a p-value, and the family is adjusted as one
    assert all(c["p_holm"] >= c["p"] for c in gclaims.values())
    # "ALiBi is the lowest of every model and rule at every length past the training length"
    L = gpu["config"]["lm"]["train_length"]
    for n in R.gpu_lengths(gpu):
        if n <= L:
            continue
        alibi = mean(R.gpu_lm_values(gpu, "alibi", n))
        others = [R.gpu_lm_values(gpu, e, n) for e in ENCODINGS if e != "alibi"]
        others += [R.gpu_scaling_values(gpu, k, m, n) for k in ("pi", "ntk", "yarn", "llama3")
                   for m in ("fixed", "matched")]
        others += [R.gpu_scaling_values(gpu, "dynamic", "fixed", n)]
        others += [R.gpu_lm_values(gpu, e, n, train_length=4 * L) for e in ("rope", "alibi")]
        assert all(alibi < mean(v) for v in others if None not in v), n
    # "every rule does better than with one factor" at twice the length, NTK included,
    # which on the CPU tier did worse with its factor matched
    for k in ("pi", "ntk", "yarn", "llama3"):
        assert mean(R.gpu_scaling_values(gpu, k, "matched", 2 * L)) < \
            mean(R.gpu_scaling_values(gpu, k, "fixed", 2 * L))
    assert claims["2L_ntk_fixed_matched"]["holds"]
    # "here the two tiers disagree": the CPU tier's Llama 3.1 rule (matched) below ALiBi
    # at twice the length, the GPU tier's ALiBi below it
    assert claims["2L_llama3_matched_alibi"]["holds"]
    assert gclaims["alibi_llama3_matched_2L"]["holds"]


def test_gpu_history_as_the_prose_states_it(gpu, results):
    """"What the longer history is worth here": ALiBi trained at L gains a little from
    twice the history, mostly on the far targets, in every seed, and nothing from more;
    the models trained at 4 L gain less from theirs and are worse than those trained at L;
    the probe finds nothing; the models are still learning (not converged)."""
    g = {c["name"]: c for c in R.gpu_claims(gpu)}
    L = gpu["config"]["lm"]["train_length"]
    assert g["alibi_history"]["holds"] and g["alibi_history_far"]["holds"]
    for metric in ("target", "far"):
        short = R.gpu_lm_values(gpu, "alibi", L, metric)
        long = R.gpu_lm_values(gpu, "alibi", 2 * L, metric)
        assert all(b < a for a, b in zip(short, long, strict=True)), metric
    assert g["alibi_history_far"]["mean"] / g["alibi_history"]["mean"] > 3
    past = [mean(R.gpu_lm_values(gpu, "alibi", n)) for n in R.gpu_lengths(gpu) if n >= 2 * L]
    assert max(past) - min(past) < 0.002
    for e in ("rope", "alibi"):
        assert g[f"ref_{e}_history_far"]["holds"]
        assert g[f"ref_{e}_history_far"]["mean"] > g["alibi_history_far"]["mean"]
        assert g[f"{e}_ref"]["holds"]
    assert R.gpu_probe_best(gpu) == 0.0
    # what the design can show: the targets are each window's last bytes, so read at L a
    # target has from L - target to L - 1 bytes in front of it, and the far rule's gap is
    # the CPU tier's, shorter than L (no far target needs history beyond the training length)
    target = gpu["chunks"]["target"]
    assert gpu["config"]["lm"]["target"] == target and 0 < target < L
    gap = results["far_targets"]["gap"]
    assert f"> {gap} bytes back" in gpu["far_targets"]["rule"] and gap < L
    # "further back than about 2 L - target bytes" adds nothing: flat from 2 L on (above)
    # "fell by at least" the glued value (rounded down to two places)
    assert min(R.gpu_loss_drop(gpu).values()) >= 0.08
    # "on the CPU tier's smaller model ALiBi's own change was not separated from zero"
    L_cpu = results["config"]["lm"]["train_length"]
    d = R.difference(results, ("lm", "alibi"), ("lm", "alibi"), (4 * L_cpu, L_cpu), "far")
    assert d["lo"] < 0 < d["hi"]
    # the call's record: two calls, the plan in several processes, the groups it skipped
    calls = gpu["provenance"]["calls"]
    assert len(calls) == 2 and gpu["parallel"]["workers"] >= len(ENCODINGS)
    assert {"finetune-plain", "probe-alibi-L512"} <= set(gpu["skipped"])
    assert not any(s.startswith("lm-alibi-L2048") for s in gpu["skipped"])


def test_gpu_cost_as_the_prose_states_it(gpu):
    """"What one call can hold": the parts in the order the prose names them, the calls'
    work and pace, and a whole protocol that one call of nine minutes cannot hold at that
    pace (the prose rounds the factor; it must be well above one)."""
    from posenc.analysis.experiments import cost

    c = cost.gpu_compute(gpu, budget_s=9 * 60)
    parts = c["parts"]
    rest = parts["fine-tuning"] + parts["scaling"] + parts["probes"]
    assert parts["tasks"] > parts["references"] > parts["language models"] > rest
    assert c["seeds"] == len(gpu["first_seeds"]) and c["steps"] > gpu["steps"]
    assert 0 < c["done"] < parts["total"] / 10
    assert c["needed"] / c["rate"] > 10 and c["whole_seconds"] > 3600
    with pytest.raises(ValueError, match="budget_s must be a number > 0"):
        cost.gpu_compute(gpu, budget_s=0)


def test_gpu_accessors_reject_bad_input(gpu):
    with pytest.raises(ValueError, match="results must be an experiments/results-gpu.json"):
        R.check_gpu({"schema": 2})
    with pytest.raises(ValueError, match="encoding and train_length must name"):
        R.gpu_lm_values(gpu, "rope", 512, train_length=333)
    with pytest.raises(ValueError, match="mode must be 'fixed' or 'matched'"):
        R.gpu_scaling_values(gpu, "yarn", "dynamic", 1024)
    with pytest.raises(ValueError, match="kind must be one of"):
        R.gpu_scaling_values(gpu, "rerope", "fixed", 1024)
    with pytest.raises(ValueError, match="metric must be"):
        R.gpu_lm_values(gpu, "rope", 512, "window2")


def test_gpu_figure_and_tables_render(gpu):
    fig = pf.experiment_gpu_scaling_figure(gpu)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == 8 and "YaRN, factor n/L" in labels
    table = pf.experiment_gpu_table(gpu)
    md = str(table)
    # six encodings, one reference, four rules two ways
    assert md.count("\n") - 1 == 6 + 1 + 8
    claims = str(pf.experiment_gpu_claims_table(gpu))
    assert claims.count("✓") == 19 and claims.count("✗") == 0


def test_the_task_seeds_on_a_second_machine_as_the_page_states_them(results):
    """experiments-machine: every task seed trained again on another processor.  The seeds
    trained on that kind of processor reproduce, no other does, and what the page draws
    from the re-run holds; a new re-run that changes any of it fails here."""
    rc = pf.load_experiment_recheck()
    first, second = rc["provenance"], rc["second_machine"]["provenance"]
    units = rc["second_machine"]["units"]
    assert second["dirty"] is False and second["jobs"] == 2
    # two processors, the same code path: library versions and instruction set
    assert first["machine"]["cpu"] == "AMD EPYC" != second["machine"]["cpu"]
    assert first["machine"]["isa"] == second["machine"]["isa"] == "AVX512"
    for lib in ("torch", "numpy", "python"):
        assert first["versions"][lib] == second["versions"][lib], lib
    # the first re-run reproduced every task unit it sampled, on its machine
    assert all(u["equal"] for k, u in rc["units"].items()
               if k.startswith(("copy", "passkey")))
    every = {r["key"]: r for t in ("copy", "passkey")
             for r in results[t]["runs"] + results[t]["replaced"]}
    assert set(units) == set(every) and len(units) == 65
    native = {k for k in units
              if (every[k].get("machine") or {}).get("cpu") == second["machine"]["cpu"]}
    assert len(native) == 5 and all(units[k]["equal"] for k in native)
    assert not any(units[k]["equal"] for k in set(units) - native)
    again = R.task_rerun(results, rc["second_machine"])
    # copying: the same seeds learn, none past the trained lengths, the same order
    m2 = 2 * results["config"]["copy"]["m"][1]
    for enc in results["copy"]["chosen"]:
        assert R.task_learned(again, "copy", enc)["seeds"] == \
            R.task_learned(results, "copy", enc)["seeds"]
        for m in results["config"]["copy"]["eval_m"]:
            if m > results["config"]["copy"]["m"][1]:
                for res in (results, again):
                    ext = R.task_extrapolation(res, "copy", enc, m)
                    assert ext is None or ext["k"] == 0, (enc, m)

    def sym(res, enc):
        return np.mean([r["test"][str(m2)]["symbol"] for r in res["copy"]["runs"]
                        if r["encoding"] == enc and r["learned"]])
    for res in (results, again):
        assert sym(res, "alibi") > sym(res, "t5") > sym(res, "rope") > sym(res, "sinusoidal")
    # retrieval: the slow learners' counts move, the others' do not
    k = {enc: (R.task_learned(results, "passkey", enc)["k"],
               R.task_learned(again, "passkey", enc)["k"])
         for enc in results["passkey"]["chosen"]}
    assert k == {"nope": (0, 0), "learned": (2, 4), "sinusoidal": (1, 1), "rope": (5, 5),
                 "alibi": (5, 5), "t5": (5, 5)}
    old = {r["seed"]: r["learned"] for r in again["passkey"]["replaced"]}
    old_stored = {r["seed"]: r["learned"] for r in results["passkey"]["replaced"]}
    assert sum(old.values()) == 3 and sum(old_stored.values()) == 2
    assert old[0] and not old_stored[0]  # on the second machine seed 0 learns: no refinement
    # what the page draws from the extrapolation holds on both machines
    pk = results["config"]["passkey"]
    n2, n4, top = 2 * pk["total"][1], 4 * pk["total"][1], max(pk["eval_totals"])
    for res in (results, again):
        ext = {e: R.task_extrapolation(res, "passkey", e, n2)["k"]
               for e in ("alibi", "rope", "t5")}
        assert ext["alibi"] > max(ext["rope"], ext["t5"])
        # ... in the counts only: five seeds do not separate them, not even with Holm's
        # correction over just these two comparisons
        x = {e: R.task_extrapolation(res, "passkey", e, n2) for e in ("alibi", "rope", "t5")}
        ps = [stats.fisher_exact(x["alibi"]["k"], x["alibi"]["n"], x[e]["k"], x[e]["n"])
              for e in ("rope", "t5")]
        assert min(stats.holm(ps)) > 0.05 and max(ps) > 0.05
        if res is again:
            assert min(ps) > 0.05
        at4 = {e: R.task_extrapolation(res, "passkey", e, n4) for e in ("alibi", "rope", "t5")}
        assert at4["alibi"]["k"] > 0 and at4["rope"]["k"] == at4["t5"]["k"] == 0
        for e in results["passkey"]["chosen"]:
            top_e = R.task_extrapolation(res, "passkey", e, top)
            assert top_e is None or top_e["k"] == 0

        def depth(e, d):
            return np.mean(R.task_values(res, "passkey", e, n2, depth=d, learned_only=True))
        assert depth("rope", 0.9) > depth("rope", 0.5) > depth("rope", 0.1) == 0.0
        assert depth("alibi", 0.1) > 0.5
        assert depth("t5", 0.1) > depth("t5", 0.9)
