"""Claims of the *Experiments* chapter, checked against the committed results file.

The page renders ``experiments/results.json`` (written by ``nox -s experiments``) and its
prose states comparisons between the numbers in it.  These tests check that the file is a
complete, clean full run (schema, provenance, every encoding and variant with every seed,
finite metrics where they must be, the time budget), and that each comparison the prose
states holds in the committed file.  If a new run changes an outcome, a test here fails
and the prose must be rewritten.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

import posenc.figures as pf
from posenc.analysis.experiments.models import ENCODINGS, ModelConfig, TinyDecoder
from posenc.analysis.experiments.tasks import SYMBOLS

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "results.json"
VARIANTS = ("pi zero-shot", "ntk zero-shot", "yarn zero-shot", "llama3 zero-shot",
            "pi fine-tuned")


@pytest.fixture(scope="module")
def results():
    return pf.load_experiment_results(RESULTS)


@pytest.fixture(scope="module")
def lengths(results):
    lm = results["config"]["lm"]
    return [lm["train_length"] * f for f in lm["eval_factors"]]


def mean(results, task, enc, var, length):
    s = results["summary"][f"{task}|{enc}|{var}"][str(length)]
    return None if s is None else s["mean"]


# -- the file ----------------------------------------------------------------------------


def test_results_are_a_clean_full_run(results):
    assert results["schema"] == 1 and results["quick"] is False
    prov = results["provenance"]
    assert re.fullmatch(r"[0-9a-f]{40}", prov["commit"])
    assert prov["dirty"] is False
    assert prov["machine"]["threads"] >= 1 and prov["versions"]["torch"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", prov["date"])
    corpus = results["corpus"]
    assert re.fullmatch(r"[0-9a-f]{64}", corpus["sha256_train"])
    assert re.fullmatch(r"[0-9a-f]{64}", corpus["sha256_eval"])
    assert corpus["files_train"] > 5 * corpus["files_eval"] > 0
    # The whole run fits the budget the harness promises.
    assert 0 < results["seconds"] < 30 * 60


def test_every_encoding_and_variant_has_every_seed(results, lengths):
    seeds = results["config"]["seeds"]
    assert len(seeds) == 3
    runs = results["runs"]
    expected = {("lm", e, "trained") for e in ENCODINGS}
    expected |= {("lm", "rope", v) for v in VARIANTS}
    expected |= {("copy", e, "trained") for e in ENCODINGS}
    for key in expected:
        got = sorted(r["seed"] for r in runs if (r["task"], r["encoding"], r["variant"]) == key)
        assert got == sorted(seeds), key
    assert {tuple(k.split("|")) for k in results["summary"]} == expected
    cp = results["config"]["copy"]
    ms = [cp["m"] * f for f in cp["eval_factors"]]
    for r in runs:
        if r["task"] == "lm":
            assert sorted(map(int, r["perplexity"])) == lengths
            metric, limit = r["perplexity"], results["config"]["lm"]["train_length"]
            seq = {n: n for n in lengths}
        else:
            assert sorted(map(int, r["accuracy"])) == ms
            metric, limit = r["accuracy"], 2 * cp["m"] + 1
            seq = {m: 2 * m + 1 for m in ms}
        for length, v in metric.items():
            if r["encoding"] == "learned" and seq[int(length)] > limit:
                assert v is None, (r["task"], length)
            else:
                assert v is not None and math.isfinite(v), (r["task"], r["encoding"], length)
                assert v >= 1 if r["task"] == "lm" else 0 <= v <= 1


def test_summary_is_the_mean_of_the_runs(results):
    for key, by_length in results["summary"].items():
        task, enc, var = key.split("|")
        runs = [r for r in results["runs"]
                if (r["task"], r["encoding"], r["variant"]) == (task, enc, var)]
        for length, s in by_length.items():
            vals = [(r.get("perplexity") or r.get("accuracy"))[length] for r in runs]
            if s is None:
                assert None in vals
                continue
            assert s["n"] == len(vals) and s["min"] <= s["mean"] <= s["max"]
            assert s["mean"] == pytest.approx(sum(vals) / len(vals))


def test_results_markdown_matches_the_json(results):
    md = (ROOT / "experiments" / "results.md").read_text()
    assert results["provenance"]["commit"] in md
    s = results["summary"]["lm|alibi|trained"]
    top = max(s, key=int)
    assert f"{s[top]['mean']:.2f} ± {s[top]['std']:.2f}" in md


# -- the findings the prose states -------------------------------------------------------


def test_alibi_stays_flat_and_beats_sinusoidal_past_the_training_length(results, lengths):
    L, top, past = lengths[0], lengths[-1], lengths[1:]
    ratio = {e: mean(results, "lm", e, "trained", top) / mean(results, "lm", e, "trained", L)
             for e in ("sinusoidal", "alibi")}
    assert ratio["sinusoidal"] > 5 and ratio["alibi"] < 1.1
    assert all(mean(results, "lm", "alibi", "trained", n)
               < mean(results, "lm", "sinusoidal", "trained", n) for n in past)


def test_order_at_the_longest_length_is_the_one_press_et_al_show(results, lengths):
    top = lengths[-1]
    order = [mean(results, "lm", e, "trained", top) for e in ("alibi", "t5", "rope",
                                                               "sinusoidal")]
    assert order == sorted(order)


def test_rope_is_best_and_sinusoidal_worst_at_the_training_length(results, lengths):
    at_l = {e: mean(results, "lm", e, "trained", lengths[0]) for e in ENCODINGS}
    assert min(at_l, key=at_l.get) == "rope"
    assert max(at_l, key=at_l.get) == "sinusoidal"
    assert at_l["rope"] < at_l["alibi"]


def test_nope_extrapolates_better_than_rope_from_a_worse_start(results, lengths):
    L, top = lengths[0], lengths[-1]

    def ratio(e):
        return mean(results, "lm", e, "trained", top) / mean(results, "lm", e, "trained", L)

    assert ratio("nope") < ratio("rope")
    assert mean(results, "lm", "nope", "trained", L) > mean(results, "lm", "rope", "trained", L)
    wins = [mean(results, "lm", "nope", "trained", n) < mean(results, "lm", "rope", "trained", n)
            for n in lengths[1:]]
    # "from the first win on": once NoPE is ahead of RoPE it stays ahead.
    first = wins.index(True)
    assert all(wins[first:]) and not any(wins[:first])


def test_pi_zero_shot_hurts_and_fine_tuning_fixes_its_length(results, lengths):
    L, top = lengths[0], lengths[-1]
    ft_len = L * results["config"]["pi_finetune"]["factor"]
    assert all(mean(results, "lm", "rope", "pi zero-shot", n)
               > mean(results, "lm", "rope", "trained", n) for n in lengths[1:])
    tuned = mean(results, "lm", "rope", "pi fine-tuned", ft_len)
    others = [mean(results, "lm", "rope", v, ft_len) for v in ("trained",) + VARIANTS[:-1]]
    assert tuned < min(others)
    # a cost at the original length, and a rise again past the fine-tuned length
    assert mean(results, "lm", "rope", "pi fine-tuned", L) > mean(results, "lm", "rope",
                                                                  "trained", L)
    assert mean(results, "lm", "rope", "pi fine-tuned", top) > tuned


def test_ntk_and_yarn_beat_plain_rope_and_pi_zero_shot(results, lengths):
    top = lengths[-1]
    for n in lengths[1:]:  # "at every length past the training length"
        plain = mean(results, "lm", "rope", "trained", n)
        pi = mean(results, "lm", "rope", "pi zero-shot", n)
        for v in ("ntk zero-shot", "yarn zero-shot"):
            assert mean(results, "lm", "rope", v, n) < min(plain, pi), (v, n)
    llama = mean(results, "lm", "rope", "llama3 zero-shot", top)
    worst_of_two = max(mean(results, "lm", "rope", v, top) for v in ("ntk zero-shot",
                                                                       "yarn zero-shot"))
    assert worst_of_two < llama < mean(results, "lm", "rope", "trained", top)
    # "no zero-shot rule keeps the perplexity of the training length far past it"
    base = mean(results, "lm", "rope", "trained", lengths[0])
    assert all(mean(results, "lm", "rope", v, top) > 1.5 * base for v in VARIANTS[:-1])


def test_copy_is_learned_only_by_learned_and_rope_and_nobody_generalises(results):
    cp = results["config"]["copy"]
    ms = [cp["m"] * f for f in cp["eval_factors"]]
    at_m = {e: mean(results, "copy", e, "trained", cp["m"]) for e in ENCODINGS}
    assert {e for e, v in at_m.items() if v > 0.99} == {"learned", "rope"}
    assert at_m["nope"] < 0.2  # NoPE does not learn to copy in this budget
    past = [mean(results, "copy", e, "trained", m) for e in ENCODINGS for m in ms[1:]]
    best = max(v for v in past if v is not None)
    chance = 1 / SYMBOLS
    assert best < 2 * chance  # "close to the chance level"


def test_parameter_count_is_what_the_page_says(results):
    model = TinyDecoder(ModelConfig("rope", **results["config"]["model"]))
    n = sum(p.numel() for p in model.parameters())
    assert 50_000 < n < 500_000


# -- the figures the page draws ----------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_scaling_figure_draws_only_the_chosen_encodings(results, lang):
    variants = ("trained",) + VARIANTS
    pf.set_language(lang)
    try:
        fig = pf.experiment_perplexity_figure(results, variants=variants,
                                              encodings=("rope",))
        ax = fig.axes[0]
        assert len(ax.get_legend().get_texts()) == len(variants)
        # every curve is a RoPE run: its legend text starts with the RoPE label
        assert all(t.get_text().startswith("RoPE") for t in ax.get_legend().get_texts())
        # plain numbers on the log axis, no 10^x
        assert all("10^" not in t.get_text() for t in ax.get_yticklabels())
        everything = pf.experiment_perplexity_figure(results, variants=variants)
        assert len(everything.axes[0].get_legend().get_texts()) == len(ENCODINGS) + len(VARIANTS)
    finally:
        pf.set_language("en")


def test_copy_figure_marks_chance(results):
    fig = pf.experiment_copy_figure(results)
    ys = [line.get_ydata()[0] for line in fig.axes[0].get_lines()
          if len(line.get_ydata()) == 2 and line.get_ydata()[0] == line.get_ydata()[1]]
    assert 1 / SYMBOLS in ys
