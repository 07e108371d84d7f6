"""The chapter's readings of the study, on a study whose every value is known."""

from __future__ import annotations

import json

import pytest

from posenc.analysis.experiments import findings as F


def _study():
    units = {}
    for enc, base in (("rope", 1.2), ("learned", 1.4)):
        for seed in (0, 1, 2):
            units[f"lm-{enc}-s{seed}"] = {"eval": {
                "128": {"target": base + seed / 100, "far": base + 0.3},
                "512": None if enc == "learned" else {"target": base + 1 + seed / 100,
                                                      "far": base + 2}}}
    for name, v in (("s0", 1.5), ("s1", 1.6), ("s2", 1.55), ("split", 1.4)):
        units[f"baseline-{name}"] = {"ngram": {"target": v},
                                     "cache128": {"target": v - 0.2, "far": v - 0.3}}
    for seed in (0, 1, 2):
        units[f"scale-s{seed}"] = {"yarn": {"512": {"target": 1.3}, "fixed": {"target": 1.25}}}
        for arm, drop in (("plain", 0.1), ("yarn", 0.3)):
            units[f"finetune-{arm}-s{seed}"] = {"curve": {
                "0": {"512": {"target": 3.0 - 10 * drop + 1.0 * (arm == "plain")}},
                "200": {"512": {"target": 1.4}}}}
        for lr in (0.001, 0.003):
            learned = lr == 0.003
            units[f"copy-rope-s{seed}-lr{lr:g}"] = {
                "learned": learned, "steps": 500, "valid": 0.995 if learned else 0.5,
                "params": {"lr": lr},
                "test": {"24": {"exact": 0.95}, "48": {"exact": 0.95 if seed else 0.2}}}
    protocol = {"seeds": {"rope": [0, 1, 2], "other": [0, 1, 2]},
                "eval": {"lengths": [128, 512]}, "model": {"train_length": 128},
                "finetune": {"factor": 4},
                "tasks": {"seeds": [0, 1, 2], "copy": {"lrs": [0.001, 0.003]}}}
    return {"protocol": protocol, "units": units}


def test_lm_and_baselines_pair_by_seed():
    s = _study()
    assert F.lm(s, "rope", 128) == pytest.approx([1.2, 1.21, 1.22])
    assert F.lm(s, "learned", 512) is None
    assert F.baseline(s, "ngram") == [1.5, 1.6, 1.55]
    assert F.baseline(s, "cache", 128, on="split") == pytest.approx([1.2])
    d = F.paired(F.lm(s, "rope", 128), F.baseline(s, "cache", 128))
    assert d["below"] == 3 and d["separated"]
    with pytest.raises(ValueError, match="kind must be 'ngram'"):
        F.baseline(s, "cache")


def test_history_gain_is_loss_at_n_minus_loss_at_L():
    s = _study()
    assert F.history_gain(s, "rope", 512) == pytest.approx([1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="cannot read 512"):
        F.history_gain(s, "learned", 512)


def test_scaling_and_fine_tuning_curves():
    s = _study()
    assert F.scaled(s, "yarn", 512) == [1.3] * 3 and F.scaled(s, "yarn", "fixed") == [1.25] * 3
    assert F.finetune_curve(s, "yarn") == {0: [0.0] * 3, 200: [1.4] * 3}
    # plain: 3.0 at step 0, 1.4 at 200 (a gain of 1.6); yarn at step 0: 0.0
    assert F.share_recovered(s, "yarn") == pytest.approx([3.0 / 1.6] * 3)


def test_tasks_read_at_the_chosen_rate_over_the_seeds_that_learned():
    s = _study()
    assert [u["params"]["lr"] for u in F.task_runs(s, "copy", "rope")] == [0.003] * 3
    assert F.task_solved(s, "copy", "rope", 24) | {"lo": 0, "hi": 0} == \
        {"k": 3, "n": 3, "lo": 0, "hi": 0}
    solved = F.task_solved(s, "copy", "rope", 48)
    assert (solved["k"], solved["n"]) == (2, 3) and solved["lo"] < 2 / 3 < solved["hi"]


def test_a_missing_unit_or_file_is_named(tmp_path):
    s = _study()
    with pytest.raises(KeyError, match="lm-t5-s0"):
        F.lm(s, "t5", 128)
    with pytest.raises(ValueError, match="does not exist"):
        F.load_study(tmp_path / "none.json")
    path = tmp_path / "study.json"
    path.write_text(json.dumps(s))
    assert F.load_study(path) == s
