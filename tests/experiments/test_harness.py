"""The experiments harness: corpus, model, tasks, and ``experiments/run.py --quick`` end to end.

These tests check that the harness works and records what it must (provenance, seeds, the
corpus hash, every encoding), not the numbers of the full run.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from posenc.analysis.experiments import corpus as C
from posenc.analysis.experiments import tasks
from posenc.analysis.experiments import train as T
from posenc.analysis.experiments.models import ENCODINGS, ModelConfig, TinyDecoder

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus():
    return C.load_corpus()


def test_corpus_is_split_by_file_without_overlap(corpus):
    assert corpus.n_files_eval >= 5 and corpus.n_files_train > 5 * corpus.n_files_eval
    # Few evaluation lines (of real length) appear in the training text.
    train = corpus.train.tobytes()
    lines = [ln for ln in corpus.eval.tobytes().split(b"\n") if len(ln.strip()) > 60]
    unique = [ln for ln in lines if lines.count(ln) == 1][:200]
    leaked = sum(ln in train for ln in unique)
    # Boilerplate repeats across files (license headers, the comments of docutils' language
    # modules): 17 of these 200 lines, 8.5 %, when this was written.
    assert leaked / len(unique) < 0.15
    again = C.load_corpus()
    assert again.sha256_train == corpus.sha256_train and again.sha256_eval == corpus.sha256_eval


def test_eval_windows_are_fixed_and_disjoint(corpus):
    w = C.eval_windows(corpus.eval, 64, 10)
    assert w.shape == (10, 65)
    np.testing.assert_array_equal(w, C.eval_windows(corpus.eval, 64, 10))
    with pytest.raises(ValueError, match="shorter than one window"):
        C.eval_windows(corpus.eval[:10], 64, 1)


def test_model_config_rejects_bad_input():
    with pytest.raises(ValueError, match="encoding must be one of"):
        ModelConfig("xpos")
    with pytest.raises(ValueError, match="n_heads"):
        ModelConfig("rope", d_model=30, n_heads=4)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_encoding_trains_and_is_causal(encoding):
    cfg = ModelConfig(encoding, d_model=32, n_heads=2, n_layers=1, train_length=16)
    torch.manual_seed(0)
    model = TinyDecoder(cfg).eval()
    x = torch.randint(0, 256, (2, 16))
    y = model(x)
    assert y.shape == (2, 16, 256) and torch.isfinite(y).all()
    # Changing a later token never changes an earlier prediction.
    x2 = x.clone()
    x2[:, 10] = (x2[:, 10] + 1) % 256
    torch.testing.assert_close(model(x2)[:, :10], y[:, :10])


def test_training_is_deterministic(corpus):
    cfg = ModelConfig("rope", d_model=32, n_heads=2, n_layers=1, train_length=16)
    a = T.train_lm(cfg, corpus, steps=3, batch=2, lr=1e-3, seed=5, log_every=1)
    b = T.train_lm(cfg, corpus, steps=3, batch=2, lr=1e-3, seed=5, log_every=1)
    assert a.losses == b.losses and len(a.losses) == 3


def test_learned_table_reports_lengths_it_cannot_read(corpus):
    cfg = ModelConfig("learned", d_model=32, n_heads=2, n_layers=1, train_length=16)
    model = TinyDecoder(cfg).eval()
    ppl = T.eval_lm(model, corpus, [16, 32], tokens_per_length=64)
    assert ppl[16] is not None and ppl[16] > 1 and ppl[32] is None


def test_copy_task_scores_only_the_second_copy():
    seq, scored = tasks.copy_batch(3, 5, np.random.default_rng(0))
    assert seq.shape == (3, 12) and scored.sum() == 3 * 5
    torch.testing.assert_close(seq[:, 1:6], seq[:, 7:])
    assert (seq[:, 0] == tasks.BOS).all() and (seq[:, 6] == tasks.SEP).all()
    with pytest.raises(ValueError, match="m must be >= 1"):
        tasks.copy_batch(1, 0, np.random.default_rng(0))


def test_quick_run_end_to_end(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "run.py"), "--quick", "--no-progress",
         "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads((tmp_path / "results.json").read_text())
    assert r["quick"] is True and r["schema"] == 1
    prov = r["provenance"]
    assert prov["commit"] and prov["versions"]["torch"] == torch.__version__
    assert len(r["corpus"]["sha256_train"]) == 64
    lm = {(x["encoding"], x["variant"]) for x in r["runs"] if x["task"] == "lm"}
    assert {(e, "trained") for e in ENCODINGS} <= lm
    assert {("rope", v) for v in ("pi zero-shot", "ntk zero-shot", "yarn zero-shot",
                                  "llama3 zero-shot", "pi fine-tuned")} <= lm
    copy = {x["encoding"] for x in r["runs"] if x["task"] == "copy"}
    assert copy == set(ENCODINGS)
    for x in r["runs"]:
        metric = x.get("perplexity") or x.get("accuracy")
        assert metric, x
        for length, v in metric.items():
            # copy is keyed by the string length m; the model then reads 2 m + 1 tokens
            seq = int(length) if x["task"] == "lm" else 2 * int(length) + 1
            if x["encoding"] == "learned" and seq > x["config"]["train_length"]:
                assert v is None
            else:
                assert v is not None and np.isfinite(v)
        assert x["seed"] in r["config"]["seeds"]
    md = (tmp_path / "results.md").read_text()
    assert "Perplexity" in md and "Copy accuracy" in md and prov["commit"] in md


def test_chapter_figures_render_the_quick_results(tmp_path, recwarn):
    import posenc.figures as pf

    subprocess.run([sys.executable, str(ROOT / "experiments" / "run.py"), "--quick",
                    "--no-progress", "--out", str(tmp_path)], cwd=ROOT, check=True,
                   capture_output=True, timeout=300)
    r = pf.load_experiment_results(tmp_path / "results.json")
    for lang in ("en", "zh"):
        pf.set_language(lang)
        try:
            figs = [pf.experiment_perplexity_figure(r),
                    pf.experiment_perplexity_figure(r, variants=("pi zero-shot",
                                                                 "yarn zero-shot")),
                    pf.experiment_copy_figure(r), pf.experiment_curves_figure(r)]
            for fig in figs:
                assert fig._repr_png_()[0][:4] == b"\x89PNG"
                assert fig.axes[0].get_legend() is not None
            table = str(pf.experiment_table(r))
            assert table.count("\n") == 2 + len(ENCODINGS) + 5  # header, rule, runs
        finally:
            pf.set_language("en")
    assert not [w for w in recwarn if "Glyph" in str(w.message)]
    bad = dict(r, schema=99)
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="schema"):
        pf.load_experiment_results(tmp_path / "bad.json")
