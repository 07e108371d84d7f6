"""The study's stages on a tiny protocol: each unit is stored once, read back, consistent
with the others, and the report keeps only the units today's code and protocol made."""

from __future__ import annotations

import copy

import pytest
import torch

from experiments import study as S

TINY = copy.deepcopy(S.PROTOCOL)
TINY.update({
    "model": {"d_model": 16, "n_heads": 2, "n_layers": 1, "train_length": 32},
    "lm": {"steps": 3, "batch": 2, "lr": 3e-3, "log_every": 1},
    "seeds": {"rope": [0], "other": [0]},
    "eval": {"lengths": [32, 64, 128], "n_chunks": 4, "target": 16, "bucket": 32},
    "scale": {"kinds": ["pi", "yarn"], "lengths": [64, 128], "fixed": 4},
})
TINY["finetune"].update({"checkpoints": [0, 1, 2], "lrs": [1e-3, 3e-3], "batch": 1})
TINY["tasks"] = {
    "model": {"d_model": 16, "n_heads": 2, "n_layers": 1}, "encodings": ["rope"], "seeds": [0],
    "copy": {"train": [2, 4], "test": [4, 8], "steps": 3, "batch": 4, "lrs": [1e-3],
             "target": 0.99, "check_every": 2, "n_valid": 8, "n_test": 4},
    "passkey": {"train": [12, 16], "test": [16, 32], "depths": [0.5], "steps": 3, "batch": 4,
                "lrs": [1e-3], "target": 0.99, "check_every": 2, "n_valid": 8, "n_test": 4},
}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("study")
    return S.Study(units=root / "units", cache=root / "cache", protocol=TINY)


def test_every_stage_stores_its_unit_once(study):
    lm = study.lm("rope", 0)
    assert lm["code"] == S.code_of("lm")
    assert set(lm["eval"]) == {"32", "64", "128"}
    assert study.lm("rope", 0) is lm  # read back, not trained again
    learned = study.lm("learned", 0)
    assert learned["eval"]["64"] is None  # a learned table cannot read past its rows
    base = study.baselines("s0")
    assert base["bytes"] == 3 * 2 * 33
    assert base["ngram"]["target"] > base["cache128"]["target"] - 1.0
    scale = study.scale(0)
    rate = study.finetune_rate()
    assert rate in TINY["finetune"]["lrs"]
    ft = study.finetune("pi", 0, rate)
    assert set(ft["curve"]) == {"0", "1", "2"} and len(ft["train_loss"]) == 2
    # before any step, the fine-tuning arm is the zero-shot rule at its factor
    assert ft["curve"]["0"]["128"]["target"] == pytest.approx(scale["pi"]["128"]["target"],
                                                            abs=1e-9)
    copy_unit = study.task("copy", "rope", 0, 1e-3)
    assert copy_unit["steps"] <= 3 and set(copy_unit["test"]) == {"4", "8"}
    assert study.task_rate("passkey", "rope") == 1e-3


def test_report_keeps_only_current_units(study):
    study.lm("rope", 0)
    report = study.report()
    assert "lm-rope-s0" in report["units"]
    assert report["corpus"]["package"] == "sympy"
    changed = copy.deepcopy(study.p)
    changed["lm"] = {**changed["lm"], "steps": 4}
    stale = S.Study.__new__(S.Study)
    stale.__dict__.update(study.__dict__, p=changed)
    assert "lm-rope-s0" not in stale.report()["units"]


def test_band_keeps_each_regions_share_of_the_pairs():
    # same base: the thresholds scale with the training length
    assert S.band("yarn", 4096, 1e4) == {"beta_fast": 32.0, "beta_slow": 1.0}
    assert S.band("llama3", 8192, 5e5) == {"high_freq_factor": 4.0, "low_freq_factor": 1.0}
    b = S.band("llama3", 128, 1e4)
    assert 0 < b["low_freq_factor"] < b["high_freq_factor"] < 1


def test_scaling_rejects_an_unknown_rule():
    with pytest.raises(ValueError, match="kind must be one of"):
        S.scaling("dynamic", 2.0, 128, 1e4, 32)
    with pytest.raises(ValueError, match="kind must be a unit kind"):
        S.code_of("gpu")
