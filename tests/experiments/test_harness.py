"""The experiments harness: corpus, model, tasks, and ``experiments/run.py --quick`` end to end.

These tests check that the harness works and records what it must (provenance, seeds, the
corpus hash, every encoding), not the numbers of the full run.
"""

import json
import math
import os
import re
import shutil
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
from posenc.analysis.experiments.probe import MIN_LENGTH

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus():
    return C.load_corpus()


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One ``run.py --quick`` into a folder of its own, run once for the tests that read
    a whole quick run (a test that changes the folder works on its own copy)."""
    out = tmp_path_factory.mktemp("quick")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "run.py"), "--quick", "--no-progress",
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_corpus_is_split_by_file_cleaned_and_reproducible(corpus):
    train, valid, test = corpus.train, corpus.valid, corpus.test
    # the floor: at least 1 MB of evaluation text over at least 50 files
    assert test.tokens.size >= 1_000_000 and test.n_files >= 50
    assert valid.n_files >= 50 and train.n_files > 6 * test.n_files
    assert not set(train.names) & set(test.names) and not set(valid.names) & set(test.names)
    for split in (train, valid, test):
        assert split.bounds[0] == 0 and split.bounds[-1] == split.tokens.size
        assert (np.diff(split.bounds) >= C.MIN_BYTES).all()
    # no test file is a near-duplicate of a training file (the rule the cleaning applies)
    def lines(s, j):
        return C._line_set(s.tokens[s.bounds[j]:s.bounds[j + 1]].tobytes())
    train_sets = [lines(train, j) for j in range(train.n_files)]
    for j in range(0, test.n_files, 7):
        t = lines(test, j)
        assert max(len(t & u) / len(t | u) for u in train_sets) < C.NEAR_DUP
    # reproducible from the pinned package: the same bytes in a fresh process
    code = ("from posenc.analysis.experiments import corpus as C; c = C.load_corpus(); "
            "print(c.train.sha256(), c.test.sha256())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONHASHSEED": "123"}).stdout.split()
    assert out == [train.sha256(), test.sha256()]


def test_deduplication_drops_exact_and_near_copies():
    base = b"\n".join(b"line %d = value(%d)" % (i, i * i) for i in range(200))
    edited = base.replace(b"line 7 =", b"line 7  =").replace(b"value(9)", b"value(10)")
    other = b"\n".join(b"other %d" % i for i in range(200))
    keep, exact, near = C._deduplicate([base, b"  " + base, edited, other])
    assert keep == [0, 3] and exact == 1 and near == 1


def test_eval_chunks_predict_the_same_targets_at_every_length(corpus):
    ch = C.eval_chunks(corpus.test, max_length=256, target=32, n_chunks=40)
    assert len(set(ch.files.tolist())) >= 25  # spread over many files (29 of 71 here)
    windows = {n: ch.windows(corpus.test, n) for n in (32, 64, 256)}
    for n, w in windows.items():
        assert w.shape == (40, n + 1)
        # the scored targets (the last `target` tokens) are the same bytes at every length
        np.testing.assert_array_equal(w[:, -32:], windows[256][:, -32:])
        # a shorter window is the tail of the longer one: longer only adds history
        np.testing.assert_array_equal(w, windows[256][:, -(n + 1):])
    # every longest window lies inside one file and no two overlap
    for e, f in zip(ch.ends, ch.files, strict=True):
        assert corpus.test.bounds[f] <= e - 257 and e <= corpus.test.bounds[f + 1]
    assert (np.diff(np.sort(ch.ends)) >= 257).all()
    with pytest.raises(ValueError, match=r"length must be in \[target, max_length\]"):
        ch.windows(corpus.test, 512)
    with pytest.raises(ValueError, match="n_chunks=100000"):
        C.eval_chunks(corpus.test, max_length=256, target=32, n_chunks=100_000)


def test_training_windows_stay_inside_files(corpus):
    batch = C.lm_batch(corpus.valid, 64, 100, np.random.default_rng(1))
    text = corpus.valid.tokens.tobytes()
    files = [text[a:b] for a, b in zip(corpus.valid.bounds[:-1], corpus.valid.bounds[1:],
                                        strict=True)]
    for row in batch:
        assert any(bytes(row.astype(np.uint8)) in f for f in files)


def test_model_config_rejects_bad_input():
    with pytest.raises(ValueError, match="encoding must be one of"):
        ModelConfig("xpos")
    with pytest.raises(ValueError, match="n_heads"):
        ModelConfig("rope", d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="embed_scale must be a finite number > 0"):
        ModelConfig("rope", embed_scale=0.0)


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
    a = T.train_lm(cfg, corpus.train, steps=3, batch=2, lr=1e-3, seed=5, log_every=1)
    b = T.train_lm(cfg, corpus.train, steps=3, batch=2, lr=1e-3, seed=5, log_every=1)
    assert a.losses == b.losses and len(a.losses) == 3
    with pytest.raises(ValueError, match="lr must be a finite number > 0"):
        T.train_lm(cfg, corpus.train, steps=3, batch=2, lr=-1.0, seed=5)
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        T.train_lm(cfg, corpus.train, steps=0, batch=2, lr=1e-3, seed=5)


@pytest.mark.parametrize("encoding", ["alibi", "t5"])
def test_blocked_bias_attention_equals_the_full_one(encoding, monkeypatch):
    from posenc.analysis.experiments import models as M

    torch.manual_seed(0)
    model = TinyDecoder(ModelConfig(encoding, d_model=32, n_heads=2, n_layers=2)).eval()
    x = torch.randint(0, 256, (2, 3 * M._BLOCK + 17))
    blocked = model(x)
    monkeypatch.setattr(M, "_BLOCK", 10**9)
    torch.testing.assert_close(blocked, model(x), rtol=1e-5, atol=1e-5)


def test_learned_table_reports_lengths_it_cannot_read(corpus):
    cfg = ModelConfig("learned", d_model=32, n_heads=2, n_layers=1, train_length=16)
    model = TinyDecoder(cfg).eval()
    ch = C.eval_chunks(corpus.test, max_length=32, target=8, n_chunks=4)
    out = T.eval_lm(model, corpus.test, ch, [16, 32], bucket=8)
    assert out[32] is None
    assert out[16]["target"] > 0 and len(out[16]["buckets"]) == 2
    # the window mean is the mean of the equal-sized buckets
    assert out[16]["window"] == pytest.approx(np.mean(out[16]["buckets"]))


def test_copy_task_varies_lengths_and_scores_only_the_second_copy():
    seq, scored = tasks.copy_batch(64, (3, 9), np.random.default_rng(0))
    assert seq.shape == (64, 20)
    lengths = scored.sum(1)
    assert set(lengths.tolist()) == set(range(3, 10))  # every length in the range occurs
    for row, sc, m in zip(seq, scored, lengths.tolist(), strict=True):
        assert row[0] == tasks.BOS and row[m + 1] == tasks.SEP
        torch.testing.assert_close(row[1:m + 1], row[m + 2:2 * m + 2])
        assert sc[m + 2:2 * m + 2].all() and sc.sum() == m
        assert (row[1:m + 1] < tasks.SYMBOLS).all()
    with pytest.raises(ValueError, match="m must be an integer >= 1"):
        tasks.copy_batch(1, 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="low <= high"):
        tasks.copy_batch(1, (5, 3), np.random.default_rng(0))


@pytest.mark.parametrize("depth", [0.0, 0.5, 1.0])
def test_passkey_hides_the_key_once_and_asks_for_it_at_the_end(depth):
    seq, scored = tasks.passkey_batch(8, 40, depth, np.random.default_rng(3))
    k = tasks.KEY_LEN
    for row, sc in zip(seq, scored, strict=True):
        at = (row == tasks.KEY).nonzero().flatten().tolist()
        assert len(at) == 2 and at[1] == 40 - k - 1
        torch.testing.assert_close(row[at[0] + 1:at[0] + 1 + k], row[-k:])
        assert sc[-k:].all() and sc.sum() == k
        filler = 40 - 1 - 2 * (k + 1)
        assert at[0] == 1 + round(depth * filler)
    with pytest.raises(ValueError, match="depth must be in"):
        tasks.passkey_batch(1, 40, 1.5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="total must be >= 12"):
        tasks.passkey_batch(1, 8, 0.5, np.random.default_rng(0))


def test_task_scores_count_exact_matches():
    class Oracle(torch.nn.Module):
        """Predicts the true next token everywhere except where told to fail."""

        def __init__(self, seq, wrong):
            super().__init__()
            self.seq, self.wrong, self.w = seq, wrong, torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):
            logits = torch.zeros(*x.shape, 256)
            logits.scatter_(2, self.seq[:, 1:, None], 1.0)
            for b, t in self.wrong:
                logits[b, t] = 0
                logits[b, t, (self.seq[b, t + 1] + 1) % 256] = 1.0
            return logits

    seq, scored = tasks.copy_batch(4, 5, np.random.default_rng(0))
    oracle = Oracle(seq, [(1, 8)])  # one wrong symbol in the second sequence's copy
    s = tasks.score(oracle, lambda b: (seq[:b], scored[:b]), 4, batch=4)
    assert s == {"symbol": 19 / 20, "exact": 3 / 4}


class _Copier(torch.nn.Module):
    """Free-running copy by rule: at the end of ``[BOS] x_1..x_m [SEP] y_1..y_k`` it
    predicts ``x_{k+1+shift}`` (``shift`` 0: a perfect copier)."""

    def __init__(self, m, shift=0):
        super().__init__()
        self.m, self.shift, self.w = m, shift, torch.nn.Parameter(torch.zeros(1))

    def forward(self, x):
        k = x.shape[1] - (self.m + 2)
        src = min(k + 1 + self.shift, self.m)
        logits = torch.zeros(*x.shape, 256)
        logits[:, -1].scatter_(1, x[:, src, None], 1.0)
        return logits


def test_free_running_copy_writes_from_its_own_output():
    rng = lambda: np.random.default_rng(3)  # noqa: E731
    assert tasks.generate_copy(_Copier(6), 6, 5, rng()) == {"symbol": 1.0, "exact": 1.0}
    # one step ahead: each token is the next one's, the last repeats (1 of 6 right)
    got = tasks.generate_copy(_Copier(6, shift=1), 6, 5, rng())
    assert got["exact"] == 0.0 and got["symbol"] == pytest.approx(1 / 6, abs=0.1)
    with pytest.raises(ValueError, match="m must be an integer >= 1"):
        tasks.generate_copy(_Copier(6), 0, 5, rng())


def test_task_training_stops_at_the_target_and_says_when():
    cfg = ModelConfig("rope", d_model=32, n_heads=2, n_layers=1, train_length=9)
    maker = tasks.copy_maker((2, 4))
    asked = []

    def stop(model):
        asked.append(model.training)
        return len(asked) == 2

    res = tasks.train_task(cfg, maker, steps=50, batch=4, lr=1e-3, seed=0, stop=stop,
                           check_every=5)
    # asked after 5 and 10 steps, in eval mode; stopped at 10 of the 50 steps
    assert asked == [False, False] and res.steps == 10 and res.losses[-1][0] == 9
    full = tasks.train_task(cfg, maker, steps=10, batch=4, lr=1e-3, seed=0)
    assert full.steps == 10
    with pytest.raises(ValueError, match="check_every must be an integer >= 1"):
        tasks.train_task(cfg, maker, steps=5, batch=4, lr=1e-3, seed=0, stop=stop,
                         check_every=0)


def test_passkey_probe_hides_a_number_in_real_text_and_scores_only_its_digits(corpus):
    from posenc.analysis.experiments import probe as P

    w, k = P.passkey_text(corpus.test, 256, 0.25, 6, seed=3)
    again, _ = P.passkey_text(corpus.test, 256, 0.25, 6, seed=3)
    assert np.array_equal(w, again) and w.shape == (6, 256) and k == P.DIGITS
    for row in w:
        text = bytes(row.astype(np.uint8))
        key = text[-(len(P.MARK) + k):]
        assert key.startswith(P.MARK) and key[len(P.MARK):].isdigit()
        assert text.count(P.MARK) == 2 and text.index(key) == round(0.25 * (256 - 2 * len(key)))
    assert not np.array_equal(w, P.passkey_text(corpus.test, 256, 0.25, 6, seed=4)[0])

    class Knows(torch.nn.Module):
        """Predicts the true next byte of the probe's windows (``wrong``: digit 0 off)."""

        def __init__(self, wrong=False):
            super().__init__()
            self.wrong, self.w = wrong, torch.nn.Parameter(torch.zeros(1))
            self.position = None  # no table: reads any length

        def forward(self, x):
            rows = {bytes(r.astype(np.uint8))[:200]: r for r in w}
            logits = torch.zeros(*x.shape, 256)
            for b in range(x.shape[0]):
                full = torch.from_numpy(rows[bytes(x[b, :200].numpy().astype(np.uint8))])
                logits[b].scatter_(1, full[1:, None], 1.0)
                if self.wrong:
                    t = x.shape[1] - k
                    logits[b, t] = 0
                    logits[b, t, (int(full[t + 1]) + 1) % 256] = 1.0
            return logits

    got = P.passkey_scores(Knows(), corpus.test, [256], [0.25], n=6, seed=3)
    assert got == {256: {"0.25": {"digit": 1.0, "exact": 1.0}}}
    got = P.passkey_scores(Knows(wrong=True), corpus.test, [256], [0.25], n=6, seed=3)
    assert got[256]["0.25"] == {"digit": pytest.approx(1 - 1 / k), "exact": 0.0}
    with pytest.raises(ValueError, match="length must be an integer >= 33"):
        P.passkey_text(corpus.test, 32, 0.5, 1, seed=0)
    with pytest.raises(ValueError, match=r"depth must be in \[0, 1\]"):
        P.passkey_text(corpus.test, 64, 1.5, 1, seed=0)


def test_scaling_arms_are_the_papers_rules():
    sys.path.insert(0, str(ROOT))
    from experiments.run import scaling_parameters

    d, base, L = 16, 10000.0, 128
    ntk = scaling_parameters("ntk", 16, L, d, base)
    # static NTK-aware: the base times s^(d/(d-2)), once (not s^2 - s + 1 times)
    assert ntk == {"rope_type": "default", "rope_theta": pytest.approx(base * 16 ** (16 / 14))}
    assert scaling_parameters("pi", 16, L, d, base) == {"rope_type": "linear", "factor": 16.0}
    # dynamic with factor 1 reads n positions with the static rule's base for s = n / L
    import posenc.torch as pt

    dyn = pt.RotaryEmbedding(d, rope_parameters={"rope_theta": base,
                                                 **scaling_parameters("dynamic", 16, L, d, base)},
                             max_position_embeddings=L)
    static = pt.RotaryEmbedding(d, rope_parameters=scaling_parameters("ntk", 4, L, d, base))
    q = torch.randn(1, 1, 4 * L, d)
    torch.testing.assert_close(dyn(q, q)[0], static(q, q)[0], rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="kind must be one of"):
        scaling_parameters("ntk-by-parts", 2, L, d, base)


def test_quick_run_end_to_end(quick, tmp_path):
    sys.path.insert(0, str(ROOT))
    from experiments.stage_tasks import rank

    tmp_path = tmp_path / "run"
    shutil.copytree(quick, tmp_path)
    r = json.loads((tmp_path / "results.json").read_text())
    assert r["quick"] is True and r["schema"] == 3 and r["tier"] == "quick"
    prov = r["provenance"]
    assert prov["commit"] and prov["versions"]["torch"] == torch.__version__
    assert prov["machine"]["threads"] == 1 and prov["versions"]["sympy"]
    assert len(r["corpus"]["test"]["sha256"]) == 64
    seeds = r["config"]["seeds"]
    lengths = {str(r["config"]["lm"]["train_length"] * f) for f in
               r["config"]["lm"]["eval_factors"]}
    lm = r["lm"]
    assert set(lm["chosen"]) == set(ENCODINGS)
    for enc in ENCODINGS:
        runs = [x for x in lm["runs"] if x["encoding"] == enc]
        assert sorted(x["seed"] for x in runs) == seeds
        # every seed of an encoding uses the setting tuned on seed 0
        assert {(x["lr"], x["embed_scale"]) for x in runs} == {
            (lm["chosen"][enc]["lr"], lm["chosen"][enc]["embed_scale"])}
        # the learning-rate grid ran on seed 0 and the tuned rate has the lowest
        # validation loss at embedding scale 1
        grid = [g for g in lm["grid"] if g["encoding"] == enc and g["embed_scale"] == 1.0]
        assert sorted(g["lr"] for g in grid) == sorted(r["config"]["lm"]["lrs"])
        for x in runs:
            assert set(x["test"]) == lengths
            for n, v in x["test"].items():
                if enc == "learned" and int(n) > r["config"]["lm"]["train_length"]:
                    assert v is None
                else:
                    assert np.isfinite(v["target"]) and np.isfinite(v["window"])
    arms = {(x["kind"], x["seed"]) for x in r["scaling"]}
    assert arms == {(k, s) for k in r["config"]["scaling"]["types"] for s in seeds}
    # every rule also with its factor matched to the length: s = n / L past L
    L = r["config"]["lm"]["train_length"]
    assert {(x["kind"], x["seed"]) for x in r["scaling_matched"]} == {
        (k, s) for k in ("pi", "ntk", "yarn", "llama3") for s in seeds}
    for x in r["scaling_matched"]:
        assert x["test"] and all(int(n) > L for n in x["test"])
        for n, p in x["rope_parameters"].items():
            if x["kind"] != "ntk":
                assert p["factor"] == pytest.approx(int(n) / L)
    # every unit is a file of its own, with the commit and its stage's code hash
    from posenc.analysis.experiments.units import stage_code, stage_of

    files = list((tmp_path / "units").glob("*.json"))
    assert len(files) > 50
    for f in files:
        unit = json.loads(f.read_text())
        assert unit["code"] == stage_code(stage_of(unit["key"]))
        assert unit["commit"] == prov["commit"]
    assert prov["stage_code"] == {s: stage_code(s) for s in
                                  ("lm", "finetune", "tasks", "taskrates", "context", "refrates",
                                   "ablrates", "lmrates", "gpu")}
    # every reference read again at each length up to its own (stage_context), from one
    # load of its weights: trained in this run, so at its own length it gives exactly the
    # reference's own evaluation
    refs = {x["key"]: x for x in r["references"]}
    ctx = r["references_context"]
    assert sorted(x["reads"] for x in ctx) == sorted(refs)
    for x in ctx:
        ref = refs[x["reads"]]
        n_ref = ref["train_length"]
        assert x["key"] == "refctx-" + ref["key"].removeprefix("ref-")
        assert (x["encoding"], x["seed"], x["train_length"]) == (
            ref["encoding"], ref["seed"], n_ref)
        assert sorted(map(int, x["test"])) == [int(n) for n in sorted(lengths, key=int)
                                               if int(n) <= n_ref]
        assert x["test"][str(n_ref)] == ref["test"][str(n_ref)]
        assert len(x["weights"]) == 12
    # the references' rate check (stage_refrates): on seed 0, every rate of the language
    # models' grid at each reference's encoding and length, scored on the validation text
    # at the reference's own length; the reference's own rate is its stored unit, not a
    # retrained one; the chosen rate is the grid's best
    rr = r["references_rates"]
    lm_lrs = sorted(r["config"]["lm"]["lrs"])
    assert {(c["encoding"], c["train_length"]) for c in rr["chosen"]} == {
        (x["encoding"], x["train_length"]) for x in r["references"]}
    for c in rr["chosen"]:
        pts = [g for g in rr["grid"]
               if (g["encoding"], g["train_length"]) == (c["encoding"], c["train_length"])]
        assert [g["lr"] for g in pts] == c["grid"] and set(lm_lrs) <= set(c["grid"])
        assert c["lr"] == min(pts, key=lambda g: g["valid"])["lr"]
        own = next(g for g in pts if g["lr"] == c["own_lr"])
        assert own["key"] == f"ref-{c['encoding']}-L{c['train_length']}-s0"
        assert all(g["key"].startswith("refgrid-") for g in pts if g is not own)
        assert all(math.isfinite(g["valid"]) for g in pts)
    n_tuned = sum(c["lr"] != c["own_lr"] for c in rr["chosen"])
    assert len(rr["tuned"]) == n_tuned * len(r["config"]["references"]["seeds"])
    assert len(rr["tuned_context"]) == len(rr["tuned"])
    # the ablation's rate check (stage_ablrates): on seed 0, every rate of the language
    # models' grid for each arm but the protocol's own model, scored by the validation loss
    # the arm's training stored; the arm's own rate is its stored unit
    ar, ab = r["ablation_rates"], r["config"]["ablation"]
    head = r["config"]["model"]["d_model"] // r["config"]["model"]["n_heads"]
    assert {(c["rope_base"], c["head_dim"]) for c in ar["chosen"]} == {
        (float(b), h) for b in ab["bases"] for h in ab["head_dims"]} - {(1e4, head)}
    for c in ar["chosen"]:
        pts = [g for g in ar["grid"]
               if (g["rope_base"], g["head_dim"]) == (c["rope_base"], c["head_dim"])]
        assert [g["lr"] for g in pts] == c["grid"] and set(lm_lrs) <= set(c["grid"])
        assert c["lr"] == min(pts, key=lambda g: g["valid"])["lr"]
        own = next(g for g in pts if g["lr"] == c["own_lr"])
        assert own["key"] == f"abl-rope-b{c['rope_base']:g}-h{c['head_dim']}-s0"
        arm = next(x for x in r["ablation"] if x["key"] == own["key"])
        assert own["valid"] == arm["valid"]
        assert all(g["key"].startswith("ablgrid-") for g in pts if g is not own)
    n_tuned = sum(c["lr"] != c["own_lr"] for c in ar["chosen"])
    assert len(ar["tuned"]) == n_tuned * len(ab["seeds"])
    assert all(str(r["config"]["lm"]["train_length"]) in t["test"] for t in ar["tuned"])
    # the rivals of seed 0's choice (stage_lmrates): every grid point within one seed
    # standard deviation of the chosen one on seed 0, trained and tested on every seed
    lv = r["lm_rivals"]
    for rv in lv["rivals"]:
        assert 0 <= rv["gap"] <= rv["spread"]
        got = [x for x in lv["runs"] if (x["encoding"], x["lr"], x["embed_scale"])
               == (rv["encoding"], rv["lr"], rv["embed_scale"])]
        assert sorted(x["seed"] for x in got) == seeds and all(x["test"] for x in got)
    for enc, pick in r["lm"]["chosen"].items():
        grid = {(g["lr"], g["embed_scale"]): g["valid"] for g in r["lm"]["grid"]
                if g["encoding"] == enc}
        own = [x["valid"] for x in r["lm"]["runs"] if x["encoding"] == enc]
        near = {k for k, v in grid.items()
                if v - grid[(pick["lr"], pick["embed_scale"])] <= np.std(own, ddof=1)}
        assert near - {(pick["lr"], pick["embed_scale"])} == {
            (rv["lr"], rv["embed_scale"]) for rv in lv["rivals"] if rv["encoding"] == enc}
    ft = r["config"]["finetune"]
    # every arm on the protocol's seeds, and the arms finetune_more_seeds names on its
    # further seeds too, each from that seed's RoPE model (the one lm_more_seeds trains)
    ft_more = r["config"]["finetune_more_seeds"]
    assert ft_more["arms"] and ft_more["seeds"]
    assert {(x["arm"], x["seed"]) for x in r["finetune"]} == {
        (a, s) for a in ft["arms"] for s in seeds} | {
        (a, s) for a in ft_more["arms"] for s in ft_more["seeds"]}
    rope_more = {x["seed"]: x["digest"] for x in r["lm_more_seeds"]
                 if x["encoding"] == "rope"}
    for x in r["finetune"]:
        if x["seed"] in ft_more["seeds"]:
            assert x["params"]["model"] == rope_more[x["seed"]]
    assert set(ft["arms"]) == {"plain", "pi", "ntk", "yarn"}
    # a rate grid on seed 0 per arm, extended past an edge where the best lands; the other
    # seeds at the arm's best rate
    for a in ft["arms"]:
        tried = sorted(g["lr"] for g in r["finetune_grid"] if g["arm"] == a)
        assert set(ft["lrs"]) <= set(tried)
        assert len(tried) <= len(ft["lrs"]) + ft["max_extensions"]
        if len(tried) < len(ft["lrs"]) + ft["max_extensions"]:
            assert tried[0] < r["finetune_rates"][a] < tried[-1]
    for x in r["finetune"]:
        assert x["lr"] == r["finetune_rates"][x["arm"]]
        assert (x["rope_parameters"] is None) == (x["arm"] == "plain")
        assert set(x["probe"]) == {str(n) for n in map(int, lengths) if n >= MIN_LENGTH}
    best = {a: min((g for g in r["finetune_grid"] if g["arm"] == a),
                   key=lambda g: g["valid"])["lr"] for a in ft["arms"]}
    assert best == r["finetune_rates"]
    # the probe also reads the models not fine-tuned: RoPE and ALiBi at L, the references
    labels = {x["label"] for x in r["probes"]}
    assert {f"{e}-L{L}-s{s}" for e in ("rope", "alibi") for s in seeds} <= labels
    assert {f"{e}-L{n}-s{s}" for e, n in [("rope", 2 * L), ("alibi", 2 * L)]
            for s in r["config"]["references"]["seeds"]} <= labels
    for task in ("copy", "passkey"):
        assert {(x["encoding"], x["seed"]) for x in r[task]["runs"]} == {
            (e, s) for e in ENCODINGS for s in seeds}
        tc = r["config"][task]
        for x in r[task]["runs"] + r[task]["grid"]:
            # trained to the target or the cap, checked on schedule, marked learned or not
            assert 1 <= x["steps"] <= tc["steps"]
            assert x["learned"] == (x["valid"] >= tc["target"])
            assert [c[0] for c in x["checks"]] == list(
                range(tc["check_every"], x["steps"] + 1, tc["check_every"]))
        # the rate grid ran on seed 0 for every encoding, refined (taskgrid) where the tier
        # names the task and seed 0 learned at no rate: the log-midpoints around its best
        refined = {e: c["refined"] for e, c in r[task]["chosen"].items() if "refined" in c}
        if task in r["config"].get("task_refine", []):
            assert set(refined) == {e for e in ENCODINGS
                                    if not any(g["learned"] for g in r[task]["grid"]
                                               if g["encoding"] == e)}
            assert refined, "the quick run should exercise the refinement"
        else:
            assert refined == {}
        for e in ENCODINGS:
            lrs = [g["lr"] for g in r[task]["grid"] if g["encoding"] == e]
            assert sorted(lrs) == sorted(tc["lrs"] + refined.get(e, [])), e
            best = min((g for g in r[task]["grid"] if g["encoding"] == e), key=rank)
            assert r[task]["chosen"][e]["lr"] == best["lr"]
            assert {x["lr"] for x in r[task]["runs"] if x["encoding"] == e} == {best["lr"]}
        # the checks (stage_taskrates): other rates seed 0 learned at, for an encoding
        # with seeds that did not learn; and every such seed again with twice the cap
        for x in r[task]["rates"]:
            assert x["lr"] != r[task]["chosen"][x["encoding"]]["lr"]
            assert not all(y["learned"] for y in r[task]["runs"]
                           if y["encoding"] == x["encoding"])
        assert sorted((x["encoding"], x["seed"], x["lr"]) for x in r[task]["caps"]) == sorted(
            (x["encoding"], x["seed"], x["lr"]) for x in r[task]["runs"] if not x["learned"])
        for x in r[task]["caps"]:
            assert x["params"][task]["steps"] == 2 * tc["steps"]
            assert 1 <= x["steps"] <= 2 * tc["steps"]
        # the warm-up check: each seed that learned only with the longer cap, at the first
        # cap with the longer cap's warm-up
        assert sorted((x["encoding"], x["seed"]) for x in r[task]["warmups"]) == sorted(
            (x["encoding"], x["seed"]) for x in r[task]["caps"] if x["learned"])
        for x in r[task]["warmups"]:
            assert x["params"][task]["steps"] == tc["steps"]
            assert x["params"][task]["warmup"] == max(1, 2 * tc["steps"] // 10)
    # more seeds where a ranking is close: trained and tested as the first seeds are
    more = r["config"]["lm_more_seeds"]
    assert sorted((x["encoding"], x["seed"]) for x in r["lm_more_seeds"]) == sorted(
        (e, s) for e in more["encodings"] for s in more["seeds"])
    for x in r["lm_more_seeds"]:
        assert (x["lr"], x["embed_scale"]) == (lm["chosen"][x["encoding"]]["lr"],
                                               lm["chosen"][x["encoding"]]["embed_scale"])
        assert set(x["test"]) == lengths
    free = r["copy"]["runs"][0]["test"]
    assert all(set(v["free"]) == {"symbol", "exact"} for v in free.values() if v)
    md = (tmp_path / "results.md").read_text()
    assert prov["commit"] in md and "95 %" in md
    assert "## Copy task" in md and "## Passkey task" in md and "## Claims" in md
    # a second run finds every unit done and reproduces the file's numbers
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "run.py"), "--quick", "--no-progress",
         "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "lmgrid" not in proc.stdout
    again = json.loads((tmp_path / "results.json").read_text())
    assert again["lm"] == r["lm"] and again["copy"] == r["copy"]


def test_split_processes_key_units_as_a_whole_run_and_assembly_names_what_is_pending(
        tmp_path):
    """Two processes may split the fine-tuning stage by arm (``--finetune-arms``, and
    ``--no-probes``); their units are the ones a whole run finds, and ``--assemble-only``
    writes every finished section and names the first missing unit of each other one."""
    RUN = [sys.executable, str(ROOT / "experiments" / "run.py")]

    def run(*args):
        proc = subprocess.run([*RUN, "--quick", "--no-progress", "--out", str(tmp_path),
                               *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    bad = subprocess.run([*RUN, "--quick", "--out", str(tmp_path), "--finetune-arms", "nope"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "--finetune-arms must name arms of" in bad.stderr
    empty = subprocess.run([*RUN, "--quick", "--out", str(tmp_path), "--assemble-only"],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert empty.returncode == 2 and "the first missing is lmgrid-" in empty.stderr
    out = run("--tasks", "", "--no-more-seeds", "--finetune-arms", "pi", "--no-probes")
    assert "finetunegrid-pi" in out and "finetunegrid-plain" not in out
    assert "probe-" not in out and not (tmp_path / "results.json").exists()
    run("--assemble-only")
    part = json.loads((tmp_path / "results.json").read_text())
    pending = part["pending"]
    assert set(pending) == {"finetune-plain", "finetune-ntk", "finetune-yarn",
                            "finetune-probes", "copy", "passkey", "lm_more_seeds"}
    assert pending["finetune-plain"].startswith("finetunegrid-plain-")
    seeds = part["config"]["seeds"]
    assert sorted((x["arm"], x["seed"]) for x in part["finetune"]) == [
        ("pi", s) for s in seeds]
    assert part["copy"] is None and part["probes"] == []
    # the whole run trains what is missing and nothing else
    out = run()
    assert "finetunegrid-pi" not in out and "finetune-pi-" not in out
    assert "finetunegrid-plain" in out
    whole = json.loads((tmp_path / "results.json").read_text())
    assert whole["pending"] == {}
    assert [x for x in whole["finetune"] if x["arm"] == "pi"] == part["finetune"]
    assert whole["lm"] == part["lm"] and whole["scaling_matched"] == part["scaling_matched"]


def test_chapter_figures_render_the_quick_results(quick, tmp_path, recwarn):
    import posenc.figures as pf
    from posenc.analysis.experiments import report as R

    r = pf.load_experiment_results(quick / "results.json")
    for lang in ("en", "zh"):
        pf.set_language(lang)
        try:
            figs = [pf.experiment_length_figure(r), pf.experiment_length_figure(r, metric="window"),
                    pf.experiment_scaling_figure(r), pf.experiment_ablation_figure(r),
                    pf.experiment_finetune_figure(r), pf.experiment_task_figure(r, "copy"),
                    pf.experiment_task_figure(r, "passkey"), pf.experiment_curves_figure(r),
                    pf.experiment_budget_figure(r)]
            for fig in figs:
                png = fig._repr_png_()
                assert (png[0] if isinstance(png, tuple) else png)[:4] == b"\x89PNG"
                assert fig.legends or fig.axes[0].get_legend() is not None
            assert len(figs[2].axes) == 2 and len(figs[-1].axes) == 2
            assert str(pf.experiment_context_table(r)).count(" ± ") > 0
            assert str(pf.experiment_reference_rates_table(r)).count("✓") == len(
                r["references_rates"]["chosen"])
            assert str(pf.experiment_ablation_rates_table(r)).count("✓") == len(
                r["ablation_rates"]["chosen"])
            assert len(pf.experiment_rivals_table(r).rows) == len(r["lm_rivals"]["rivals"])
            for task in ("copy", "passkey"):
                table = pf.experiment_task_table(r, task)
                assert len(table.rows) == len(ENCODINGS)
                assert all(re.fullmatch(r"\d+/\d+ \[[\d.]+, [\d.]+\]", row[1])
                           for row in table.rows)
            pk = r["config"]["passkey"]
            depth = pf.experiment_passkey_depth_table(r, pk["eval_totals"][0])
            assert len(depth.rows) == len(ENCODINGS)
            assert len(depth.header) == 1 + len(pk["depths"])
            for row, enc in zip(depth.rows, r["passkey"]["chosen"], strict=True):
                learned = [x for x in r["passkey"]["runs"]
                           if x["encoding"] == enc and x["learned"]]
                for cell, d in zip(row[1:], pk["depths"], strict=True):
                    want = [x["test"][str(pk["eval_totals"][0])][str(d)]["exact"]
                            for x in learned]
                    assert cell == (f"{sum(want) / len(want):.2f}" if want else "–")
            claims = pf.experiment_claims_table(r, n_boot=100)
            assert len(claims.rows) == len(R.claim_family(r)) > 0
            table = str(pf.experiment_table(r))
            assert table.count("\n") == 1 + len(ENCODINGS)  # header, rule, one row each
            assert " ± " in table
            tuning = str(pf.experiment_tuning_table(r))
            assert tuning.count("✓") == len(ENCODINGS)
        finally:
            pf.set_language("en")
    assert not [w for w in recwarn if "Glyph" in str(w.message)]
    # the tasks' summaries: seeds that learned as k of n, extrapolation over those only
    for task, key in (("copy", r["config"]["copy"]["eval_m"][-1]),
                      ("passkey", r["config"]["passkey"]["eval_totals"][-1])):
        for enc in ENCODINGS:
            got = R.task_learned(r, task, enc)
            runs = [x for x in r[task]["runs"] if x["encoding"] == enc]
            assert got["n"] == len(runs) and got["k"] == sum(x["learned"] for x in runs)
            assert 0.0 <= got["lo"] <= got["p"] <= got["hi"] <= 1.0
            ext = R.task_extrapolation(r, task, enc, key, free=task == "copy")
            assert (ext is None) == (got["k"] == 0)
            if ext is not None:
                assert ext["n"] == got["k"] and 0 <= ext["k"] <= ext["n"]
            if enc == "learned" and got["k"]:
                assert ext is None  # past its table: nothing to count
    with pytest.raises(ValueError, match="threshold must be"):
        R.task_extrapolation(r, "copy", "rope", 4, threshold=0.0)
    with pytest.raises(ValueError, match="copy task only"):
        R.task_extrapolation(r, "passkey", "rope", 16, free=True)
    bad = dict(r, schema=99)
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="schema"):
        pf.load_experiment_results(tmp_path / "bad.json")
    bad = {k: v for k, v in r.items() if k != "finetune"}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="'finetune'"):
        pf.load_experiment_results(tmp_path / "bad.json")


@pytest.mark.parametrize("tier", ["cpu", "gpu", "quick"])
def test_every_tier_fits_the_corpus(tier, tmp_path):
    """Each tier's evaluation chunks fit the test split and its validation chunks the
    validation split (the GPU tier cannot be run here; this is what can be checked)."""
    sys.path.insert(0, str(ROOT))
    from experiments.run import TIERS, Runner

    config = TIERS[tier]
    r = Runner(config, tmp_path, "cpu", progress=False)
    assert r.chunks.ends.size == config["lm"]["n_chunks"]
    assert r.valid_chunks.ends.size == config["lm"]["valid_chunks"]
    assert max(r.lengths) == config["lm"]["train_length"] * max(config["lm"]["eval_factors"])
    assert len(config["seeds"]) >= (5 if tier != "quick" else 2)
    # the model shape is valid for every encoding
    for enc in ENCODINGS:
        ModelConfig(enc, train_length=r.L, **config["model"])


def test_task_extrapolation_counts_only_the_seeds_that_learned():
    from posenc.analysis.experiments import report as R

    def run(seed, learned, exact, free):
        return {"encoding": "rope", "seed": seed, "learned": learned,
                "test": {"48": {"exact": exact, "symbol": exact,
                                "free": {"exact": free, "symbol": free}}}}

    results = {"pending": {}, "copy": {"runs": [
        run(0, True, 0.9, 0.6), run(1, True, 0.2, 0.1), run(2, False, 1.0, 1.0),
        run(3, True, 0.7, 0.3), run(4, False, 0.0, 0.0)]}}
    learned = R.task_learned(results, "copy", "rope")
    assert (learned["k"], learned["n"], learned["seeds"]) == (3, 5, [0, 1, 3])
    # seed 2 scores 1.0 but did not learn: it does not count
    ext = R.task_extrapolation(results, "copy", "rope", 48)
    assert (ext["k"], ext["n"]) == (2, 3)
    assert R.task_extrapolation(results, "copy", "rope", 48, free=True)["k"] == 1
    assert R.task_extrapolation(results, "copy", "rope", 48, threshold=0.95)["k"] == 0
    results["copy"]["runs"] = [run(0, False, 1.0, 1.0)]
    assert R.task_extrapolation(results, "copy", "rope", 48) is None
    # a model that cannot read the length (a learned table): nothing to count, not 0 of n
    unread = run(0, True, 0.0, 0.0)
    unread["test"]["48"] = None
    results["copy"]["runs"] = [unread]
    assert R.task_extrapolation(results, "copy", "rope", 48) is None
    with pytest.raises(ValueError, match="not finished"):
        R.task_learned({"pending": {"passkey": "x"}, "passkey": None}, "passkey", "rope")
    # the tasks' checks: a file without them (older, or a run with --no-checks) says so,
    # naming what is pending
    older = {"pending": {"copy_caps": "copyrate-rope-lr0.01-cap12-s1"},
             "copy": {"runs": [unread], "chosen": {"rope": {"lr": 0.01}}}}
    with pytest.raises(ValueError, match="no finished rate check.*pending: None"):
        R.task_rate_check(older, "copy")
    with pytest.raises(ValueError, match="no finished cap check.*copyrate-rope"):
        R.task_cap_check(older, "copy")
    with pytest.raises(ValueError, match="task 'passkey' has no finished cap check"):
        R.task_cap_check({"passkey": None}, "passkey")
    with pytest.raises(ValueError, match="no finished warm-up check.*pending: None"):
        R.task_warmup_check(older, "copy")


def test_run_rejects_unknown_checks_before_training(tmp_path):
    """``with_checks`` names the tasks' checks to run; an unknown one is refused at once,
    before any unit trains."""
    from experiments import run as R

    with pytest.raises(ValueError, match=r"with_checks must be a bool or name checks of "
                       r"rates, caps and warmups, got \['cap'\]"):
        R.run(R.QUICK, cache=tmp_path, device="cpu", progress=False, with_checks={"cap"})
    assert not list(tmp_path.glob("**/*.json"))
