"""The experiments chapter's figures, on a complete study whose values are made up."""

from __future__ import annotations

import numpy as np
import pytest

import posenc.figures as pf
from posenc.figures.study_pages import ENCODINGS

LENGTHS = [128, 256, 512, 1024, 2048]
ARMS = ["plain", "pi", "ntk", "yarn"]
STEPS = [0, 10, 25, 50, 100, 200]


def study():
    rng = np.random.default_rng(0)
    units = {}
    for i, enc in enumerate(ENCODINGS):
        for seed in range(5):
            units[f"lm-{enc}-s{seed}"] = {"eval": {str(n): None if enc == "learned" and n > 128
                                                   else {"target": 1.3 + 0.05 * i + 0.2 *
                                                         np.log2(n / 128) * (i % 2)
                                                         + 0.01 * rng.random()}
                                                   for n in LENGTHS}}
    for seed in range(5):
        units[f"baseline-s{seed}"] = {"ngram": {"target": 1.49 + 0.01 * rng.random()}, **{
            f"cache{n}": {"target": 1.3 - 0.08 * np.log2(n / 128) + 0.01 * rng.random()}
            for n in LENGTHS}}
        for j, arm in enumerate(ARMS):
            units[f"finetune-{arm}-s{seed}"] = {"curve": {
                str(s): {"512": {"target": 1.3 + (2.0 - 0.4 * j) / (1 + s / 10)
                                 + 0.01 * rng.random()}} for s in STEPS}}
    protocol = {"seeds": {"rope": list(range(5)), "other": list(range(5))},
                "eval": {"lengths": LENGTHS}, "model": {"train_length": 128},
                "finetune": {"factor": 4, "arms": ARMS, "checkpoints": STEPS}}
    return {"protocol": protocol, "units": units}


@pytest.fixture(autouse=True)
def english_afterwards():
    yield
    pf.set_language("en")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("make", [pf.study_length_figure, pf.study_finetune_figure])
def test_study_figures_draw_readably(make, lang):
    pf.set_language(lang)
    fig = make(study())
    for kind, var in pf.figure_variants(fig).items():
        assert pf.text_problems(var) == [], kind
        assert pf.min_font_size(var) >= 8


def test_length_figure_draws_every_model_and_the_baselines():
    fig = pf.study_length_figure(study())
    names = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert names[:6] == ["NoPE", "learned table", "sinusoidal", "RoPE", "ALiBi", "T5 bias"]
    assert names[6:] == ["5-gram (bytes the model saw)",
                         "5-gram + copy cache over the same history"]
