"""The protocol's foundations: reproducible units, stacked seeds, the GPU tier's budgeted
plan (run here on the CPU at a tiny size), the far-identifier targets and the statistics."""

import importlib.metadata
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from posenc.analysis.experiments import corpus as C
from posenc.analysis.experiments import stacked as S
from posenc.analysis.experiments import stats
from posenc.analysis.experiments import tasks as K
from posenc.analysis.experiments import train as T
from posenc.analysis.experiments import units as U
from posenc.analysis.experiments.cost import group_of, gpu_work
from posenc.analysis.experiments.models import ENCODINGS, ModelConfig, TinyDecoder

ROOT = Path(__file__).resolve().parents[2]
RUN = [sys.executable, str(ROOT / "experiments" / "run.py")]


@pytest.fixture(scope="module")
def corpus():
    return C.load_corpus()


def _tiny(enc, length=32):
    return ModelConfig(enc, d_model=32, n_heads=2, n_layers=2, train_length=length)


# -- reproducibility ---------------------------------------------------------------------

def test_every_encoding_gets_the_same_shared_initial_weights():
    """The learned table and the T5 bias have their own generator: the same seed gives
    every encoding the same token embeddings and blocks, and leaves the global generator
    in the same state."""
    models, after = {}, {}
    for enc in ENCODINGS:
        torch.manual_seed(7)
        models[enc] = dict(TinyDecoder(_tiny(enc)).named_parameters())
        after[enc] = torch.rand(3)
    ref = models["nope"]
    for enc, params in models.items():
        assert set(ref) <= set(params)
        for name in ref:
            assert torch.equal(params[name], ref[name]), (enc, name)
        torch.testing.assert_close(after[enc], after["nope"])
    own = set(models["t5"]) - set(ref)
    assert own == {"t5.relative_attention_bias.weight"}
    assert set(models["learned"]) - set(ref) == {"position.embedding.weight"}
    # the initialisation itself: N(0, 0.02^2) weights, zero biases, unit LayerNorms
    w = models["rope"]["blocks.0.qkv.weight"]
    assert abs(float(w.std()) - 0.02) < 0.002
    assert float(models["rope"]["blocks.0.mlp.0.bias"].abs().sum()) == 0.0
    assert torch.equal(models["rope"]["ln_f.weight"], torch.ones(32))
    # a different seed gives different weights
    torch.manual_seed(8)
    other = dict(TinyDecoder(_tiny("nope")).named_parameters())
    assert not torch.equal(other["embed.weight"], ref["embed.weight"])


def test_code_hash_covers_the_harness_and_the_script(tmp_path):
    for rel in ("posenc/analysis/experiments/a.py", "experiments/run.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    h0 = U.code_hash(tmp_path)
    assert [p.name for p in U.code_files(tmp_path)] == ["a.py", "run.py"]
    (tmp_path / "experiments/run.py").write_text("x = 2\n")
    h1 = U.code_hash(tmp_path)
    (tmp_path / "posenc/analysis/experiments/a.py").write_text("x = 2\n")
    h2 = U.code_hash(tmp_path)
    assert len({h0, h1, h2}) == 3
    # this repository's hash covers the real files
    names = {p.relative_to(ROOT).as_posix() for p in U.code_files()}
    assert {"experiments/run.py", "posenc/analysis/experiments/stacked.py"} <= names
    # the presentation modules read stored units and decide no number: editing them
    # must not make every stored unit stale
    for name in U.PRESENTATION:
        assert f"posenc/analysis/experiments/{name}" not in names
    (tmp_path / "posenc/analysis/experiments/report.py").write_text("x = 3\n")
    assert U.code_hash(tmp_path) == h2


def test_each_stage_is_keyed_on_its_own_import_closure(tmp_path):
    def write(rel, text):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)

    write("experiments/stage_lm.py", "from posenc.analysis.experiments import a\n")
    write("experiments/stage_tasks.py",
          "def f():\n    from posenc.analysis.experiments.t import g\n")
    write("experiments/stage_taskrates.py", "from experiments.stage_tasks import f\n")
    write("experiments/stage_finetune.py", "import posenc.analysis.experiments.b\n")
    write("experiments/stage_gpu.py", "from experiments.stage_lm import x\n")
    write("experiments/stage_context.py", "from posenc.analysis.experiments import b\n")
    write("experiments/stage_refrates.py",
          "from experiments.stage_context import w\nfrom experiments.rategrid import s\n")
    write("experiments/rategrid.py", "s = 1\n")
    write("experiments/stage_lmrates.py", "from experiments.stage_lm import x\n")
    write("experiments/stage_ablrates.py",
          "from experiments.rategrid import s\nfrom experiments.stage_lm import x\n")
    write("posenc/analysis/experiments/a.py", "from .b import y\nfrom . import report\n")
    write("posenc/analysis/experiments/b.py", "y = 1\n")
    write("posenc/analysis/experiments/t.py", "from ...torch import z\n")
    write("posenc/analysis/experiments/report.py", "r = 1\n")
    write("posenc/analysis/experiments/units.py", "u = 1\n")
    names = {s: [p.relative_to(tmp_path).as_posix() for p in U.stage_files(s, tmp_path)]
             for s in U.STAGES}
    pkg = "posenc/analysis/experiments/"
    assert names["lm"] == ["experiments/stage_lm.py", pkg + "a.py", pkg + "b.py"]
    # an import inside a function counts; one leaving the harness (the library) does not
    assert names["tasks"] == ["experiments/stage_tasks.py", pkg + "t.py"]
    # the tasks' rate check reads the tasks' stage, so its key covers that code too
    assert names["taskrates"] == ["experiments/stage_taskrates.py",
                                  "experiments/stage_tasks.py", pkg + "t.py"]
    assert names["finetune"] == ["experiments/stage_finetune.py", pkg + "b.py"]
    assert names["context"] == ["experiments/stage_context.py", pkg + "b.py"]
    # the references' rate check reads them as stage_context does, so its key covers that
    assert names["refrates"] == ["experiments/rategrid.py", "experiments/stage_context.py",
                                 "experiments/stage_refrates.py", pkg + "b.py"]
    # the ablation's rate check trains through the language models' stage, so its key
    # covers that stage's code, and the grid search it shares with the references' check
    assert names["ablrates"] == ["experiments/rategrid.py", "experiments/stage_ablrates.py",
                                 "experiments/stage_lm.py", pkg + "a.py", pkg + "b.py"]
    assert names["gpu"] == ["experiments/stage_gpu.py", "experiments/stage_lm.py",
                            pkg + "a.py", pkg + "b.py"]
    before = {s: U.stage_code(s, tmp_path) for s in U.STAGES}
    write("posenc/analysis/experiments/b.py", "y = 2\n")
    after = {s: U.stage_code(s, tmp_path) for s in U.STAGES}
    assert [s for s in U.STAGES if before[s] != after[s]] == [
        "lm", "finetune", "context", "refrates", "ablrates", "lmrates", "gpu"]
    # presentation and bookkeeping modules key nothing
    write("posenc/analysis/experiments/report.py", "r = 2\n")
    write("posenc/analysis/experiments/units.py", "u = 2\n")
    assert {s: U.stage_code(s, tmp_path) for s in U.STAGES} == after
    with pytest.raises(ValueError, match="stage must be one of"):
        U.stage_files("copy", tmp_path)
    with pytest.raises(ValueError, match="key must start with one of"):
        U.stage_of("bogus-rope-s0")
    # in this repository the tasks' and the fine-tuning's code is outside the language
    # models' key, and the training loop they share is inside every key
    real = {s: {p.relative_to(ROOT).as_posix() for p in U.stage_files(s)} for s in U.STAGES}
    assert not real["lm"] & {"experiments/stage_tasks.py", "experiments/stage_finetune.py",
                             pkg + "tasks.py", pkg + "stacked.py", "experiments/run.py"}
    assert all(pkg + "train.py" in files for files in real.values())
    assert pkg + "tasks.py" in real["tasks"] and pkg + "stacked.py" in real["gpu"]
    # the rate check is outside the tasks' own key: adding it left their units valid
    assert "experiments/stage_taskrates.py" not in real["tasks"]
    assert real["tasks"] < real["taskrates"]
    # so is the references' re-reading: adding it left the language models' units valid
    assert "experiments/stage_context.py" not in real["lm"]
    assert pkg + "train.py" in real["context"]
    # and the rate check of the references left both valid
    assert "experiments/stage_refrates.py" not in real["lm"] | real["context"]
    assert real["context"] < real["refrates"]
    # and the ablation's rate check every other stage's units
    assert not any("experiments/stage_ablrates.py" in real[s] for s in U.STAGES
                   if s != "ablrates")
    assert real["lm"] < real["ablrates"]
    # and the check of seed 0's choice (its rivals on every seed) every other stage's units
    assert not any("experiments/stage_lmrates.py" in real[s] for s in U.STAGES
                   if s != "lmrates")
    assert real["lm"] < real["lmrates"]
    # every stage builds, trains or loads its models through the language models' Runner
    # (the references' check trains with Runner.lm_train), so every key covers that code
    assert all(real["lm"] < real[s] for s in U.STAGES if s != "lm")


def _age(units_dir: Path, cache: Path, old: str, seeds) -> dict:
    """Rewrite a run's units as an older layout would have stored them (the seed list in
    every unit's parameters) under code hash ``old``; returns the new digest of each
    unit by its old one."""
    back: dict[str, str] = {}
    units = [json.loads(p.read_text()) for p in sorted(units_dir.glob("*.json"))]
    units.sort(key=lambda u: isinstance(u["params"].get("model"), str))
    moved = {}
    for u in units:
        params = {**u["params"], "seeds": seeds}
        if isinstance(params.get("model"), str):
            params["model"] = moved[params["model"]]
        new = {**u, "params": params, "code": old, "digest": U.digest(params, old)}
        moved[u["digest"]] = new["digest"]
        back[new["digest"]] = u["digest"]
        (units_dir / f"{u['key']}.json").write_text(json.dumps(new))
        for w in cache.glob(f"{u['key']}-{u['digest']}.pt"):
            w.rename(cache / f"{u['key']}-{new['digest']}.pt")
    return back


def test_rekey_carries_units_across_a_layout_change_only_if_a_rerun_agrees(tmp_path):
    out = tmp_path / "run"
    subprocess.run([*RUN, "--quick", "--no-progress", "--out", str(out)], cwd=ROOT,
                   check=True, capture_output=True, timeout=900)
    units, cache = out / "units", out / ".cache"
    fresh = {p.name: json.loads(p.read_text()) for p in units.glob("*.json")}
    seeds = json.loads((out / "results.json").read_text())["config"]["seeds"]
    _age(units, cache, "0ld0ld0ld0ld", seeds)
    aged = {p.name: p.read_text() for p in units.glob("*.json")}
    rekey = [sys.executable, str(ROOT / "experiments" / "rekey.py"), "--from", "0ld0ld0ld0ld",
             "--tier", "quick", "--units", str(units), "--cache", str(cache)]
    # stored results the current code does not reproduce (by 1e-9): nothing is re-keyed
    grid = [n for n in aged if n.startswith("lmgrid-")]
    for name in grid:
        bad = json.loads(aged[name])
        bad["valid"] += 1e-9
        (units / name).write_text(json.dumps(bad))
    proc = subprocess.run(rekey, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "differing" in proc.stdout and "'valid'" in proc.stdout
    assert {p.name: p.read_text() for p in units.glob("*.json") if p.name not in grid} == {
        n: t for n, t in aged.items() if n not in grid}
    # the real stored results: re-keyed back to exactly what the current code writes
    for name in grid:
        (units / name).write_text(aged[name])
    proc = subprocess.run(rekey, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for fname, unit in fresh.items():
        got = json.loads((units / fname).read_text())
        assert got["rekeyed"]["from_code"] == "0ld0ld0ld0ld" and got["rekeyed"]["checked"]
        assert {k: v for k, v in got.items() if k != "rekeyed"} == unit
    weights = {p.name for p in cache.glob("*.pt")}
    assert weights and weights <= {f"{u['key']}-{u['digest']}.pt" for u in fresh.values()}
    # and a run of the current code finds every unit done
    proc = subprocess.run([*RUN, "--quick", "--no-progress", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and ": " not in "".join(
        line for line in proc.stdout.splitlines() if line.startswith("  ")), proc.stdout
    # one stage's units alone under an older code and layout (task units keyed on their
    # section's whole rate grid, not on their own rate): the re-key reads the other
    # stages' units as stored and carries the tasks' units only
    config = json.loads((out / "results.json").read_text())["config"]
    tasks = {n: u for n, u in fresh.items() if U.stage_of(u["key"]) == "tasks"}
    assert tasks and all("lr" in u["params"] and "lrs" not in u["params"][sec]
                         for u in tasks.values()
                         for sec in [u["key"].split("-")[0].removesuffix("grid")])
    for name, u in tasks.items():
        sec = u["key"].split("-")[0].removesuffix("grid")
        params = {k: v for k, v in u["params"].items() if k != "lr"}
        params[sec] = {**params[sec], "lrs": config[sec]["lrs"]}
        aged_unit = {**u, "params": params, "code": "0ldtasks0ld0",
                     "digest": U.digest(params, "0ldtasks0ld0")}
        (units / name).write_text(json.dumps(aged_unit))
    proc = subprocess.run([*rekey[:3], "0ldtasks0ld0", *rekey[4:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"{len(tasks)} units under code 0ldtasks0ld0" in proc.stdout
    for fname, unit in fresh.items():
        got = json.loads((units / fname).read_text())
        assert {k: v for k, v in got.items() if k != "rekeyed"} == unit, fname
        assert (got["rekeyed"]["from_code"] == "0ldtasks0ld0") == (fname in tasks)
    # two stages at once, each under an older code of its own (the references'
    # re-reading and their rate check, which imports it, change together): one run with
    # --from twice carries both and the evaluations that read their models; a code that no
    # unit has is an error naming it, and nothing is written
    old_codes = {"context": "0ldctx0ldctx", "refrates": "0ldref0ldref"}
    assert {U.stage_of(u["key"]) for u in fresh.values()} >= set(old_codes)
    moved: dict[str, str] = {}
    current = {p.name: json.loads(p.read_text()) for p in units.glob("*.json")}
    for name, u in sorted(current.items(),
                          key=lambda kv: isinstance(kv[1]["params"].get("model"), str)):
        params = {**u["params"]}
        read = params.get("model")  # a digest where the unit reads a trained model
        if isinstance(read, str) and read in moved:
            params["model"] = moved[read]
        code = old_codes.get(U.stage_of(u["key"]), u["code"])
        if (code, params) == (u["code"], u["params"]):
            continue
        new = {**u, "params": params, "code": code, "digest": U.digest(params, code)}
        moved[u["digest"]] = new["digest"]
        (units / name).write_text(json.dumps(new))
        for w in cache.glob(f"{u['key']}-{u['digest']}.pt"):
            w.rename(cache / f"{u['key']}-{new['digest']}.pt")
    aged = {p.name: p.read_text() for p in units.glob("*.json")}
    both = [*rekey[:2], "--from", old_codes["context"], "--from", old_codes["refrates"],
            *rekey[4:]]
    proc = subprocess.run([*both[:6], "--from", "n0suchc0de00", *both[6:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 2 and "--from n0suchc0de00: no unit in" in proc.stderr
    assert {p.name: p.read_text() for p in units.glob("*.json")} == aged
    proc = subprocess.run(both, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "under code 0ldctx0ldctx, 0ldref0ldref or reading their models" in proc.stdout
    for fname, unit in fresh.items():
        got = json.loads((units / fname).read_text())
        assert {k: v for k, v in got.items() if k != "rekeyed"} == unit, fname
        assert (got["rekeyed"]["from_code"] in old_codes.values()) == (
            U.stage_of(unit["key"]) in old_codes), fname


def test_rekey_maps_a_task_unit_to_its_own_rate_and_needs_that_rate():
    from experiments.rekey import new_params

    old = {"unit": "copygrid-rope-lr0.003", "model": {"d_model": 64}, "seeds": [0, 1],
           "copy": {"steps": 3000, "lrs": [1e-3, 3e-3]}, "embed_scale": 1.0}
    got = new_params(old, {}, 3e-3)
    assert got == {"unit": "copygrid-rope-lr0.003", "model": {"d_model": 64},
                   "copy": {"steps": 3000}, "embed_scale": 1.0, "lr": 3e-3}
    assert "lrs" in old["copy"]  # the stored parameters are not changed in place
    with pytest.raises(ValueError, match="a task unit needs its rate"):
        new_params(old, {})


def test_unit_store_keys_on_parameters_and_code_and_survives_a_torn_line(tmp_path):
    store = U.UnitStore(tmp_path / "a", jsonl=True, code="c1")
    u = store.put("lm-rope-s0", {"lr": 1e-3}, {"loss": 1.5})
    assert u["commit"] == U.git_commit()[0] and u["code"] == "c1" and u["loss"] == 1.5
    # where it ran: the CPU, the instruction set torch's kernels use, torch's version
    assert u["machine"] == U.machine() and set(u["machine"]) == {"cpu", "isa", "torch"}
    assert store.get("lm-rope-s0", {"lr": 1e-3})["loss"] == 1.5
    assert store.get("lm-rope-s0", {"lr": 2e-3}) is None
    # a new store reads the file back; another code hash makes the unit stale
    assert U.UnitStore(tmp_path / "a", code="c1").get("lm-rope-s0", {"lr": 1e-3}) is not None
    assert U.UnitStore(tmp_path / "a", code="c2").get("lm-rope-s0", {"lr": 1e-3}) is None
    # a run killed while writing leaves a torn last line: the finished units still count
    with open(tmp_path / "a" / "units.jsonl", "a") as f:
        f.write('{"key": "lm-alibi-s0", "dig')
    again = U.UnitStore(tmp_path / "b", [tmp_path / "a"], code="c1")
    assert again.get("lm-rope-s0", {"lr": 1e-3})["loss"] == 1.5
    # one file per unit (the committed form) reads back the same way
    one = U.UnitStore(tmp_path / "c", code="c1")
    one.put("scale-pi-s1", {"f": 2}, {"loss": 2.0})
    assert (tmp_path / "c" / "scale-pi-s1.json").is_file()
    assert U.UnitStore(tmp_path / "d", [tmp_path / "c"], code="c1").get(
        "scale-pi-s1", {"f": 2})["loss"] == 2.0


def test_budget_fits_and_deadline():
    clock = iter([0.0, 50.0, 50.0, 50.0]).__next__
    b = U.Budget(100.0, reserve=10.0, clock=clock)
    assert b.fits(40.0) and not b.fits(40.5) and b.deadline() == 90.0
    assert U.Budget(None).fits(1e9) and U.Budget(None).deadline() is None
    with pytest.raises(ValueError, match="seconds must be > 0"):
        U.Budget(0.0)


def test_provenance_falls_back_to_the_package_version(monkeypatch):
    """posenc importable but not installed as a distribution (a copied tree on
    PYTHONPATH): the version comes from posenc.__version__ instead of raising."""
    sys.path.insert(0, str(ROOT))
    import posenc
    from experiments import run

    real = importlib.metadata.version

    def version(name):
        if name == "posenc":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    assert run.package_version("posenc") == posenc.__version__
    prov = run.provenance(1, "cpu")
    assert prov["versions"]["posenc"] == posenc.__version__
    assert prov["code"] == U.code_hash()
    assert run.package_version("no_such_package_here") is None


# -- seeds trained together ----------------------------------------------------------------

@pytest.mark.parametrize("enc", ENCODINGS)
@pytest.mark.parametrize("use_vmap", [True, False])
def test_stacked_seeds_train_as_separate_runs_would(corpus, enc, use_vmap):
    cfg = _tiny(enc)
    stack = S.build(cfg, [3, 5], "cpu")
    S.train_lm(stack, corpus.train, steps=3, batch=2, lr=1e-3, log_every=1,
               use_vmap=use_vmap)
    ch = C.eval_chunks(corpus.test, max_length=64, target=16, n_chunks=6)
    far = C.far_identifier_mask(corpus.test)
    ev = S.eval_lm(stack, corpus.test, ch, [32, 64], bucket=32, far=far, use_vmap=use_vmap)
    for i, seed in enumerate((3, 5)):
        single = T.train_lm(cfg, corpus.train, steps=3, batch=2, lr=1e-3, seed=seed,
                            log_every=1)
        np.testing.assert_allclose([ls[i] for _, ls in stack.losses],
                                   [loss for _, loss in single.losses], rtol=1e-4)
        ref = T.eval_lm(single.model, corpus.test, ch, [32, 64], bucket=32, far=far)
        for n in (32, 64):
            if ref[n] is None:
                assert enc == "learned" and n == 64 and ev[i][n] is None
                continue
            assert ev[i][n]["target"] == pytest.approx(ref[n]["target"], rel=1e-4)
            assert ev[i][n]["far"] == pytest.approx(ref[n]["far"], rel=1e-4)
            np.testing.assert_allclose(ev[i][n]["chunks"], ref[n]["chunks"], rtol=1e-3)
            assert [c for _, c in ev[i][n]["far_chunks"]] == [c for _, c in
                                                              ref[n]["far_chunks"]]
        # the stacked seed as a plain model scores the same
        alone = T.eval_lm(stack.model(i), corpus.test, ch, [32], bucket=32)
        assert alone[32]["target"] == pytest.approx(ev[i][32]["target"], rel=1e-5)


@pytest.mark.parametrize("use_vmap", [True, False])
def test_stacked_task_training_matches_single_runs_and_stops_per_seed(use_vmap):
    from posenc.analysis.experiments import tasks as K

    cfg = ModelConfig("rope", d_model=32, n_heads=2, n_layers=1, train_length=9)
    maker = K.copy_maker((2, 4))
    stack = S.build(cfg, [3, 5], "cpu")
    asked = []

    def stop(model):
        # seed 5's model is the second asked; it is done at the first check, seed 3 never
        asked.append(model.training)
        return len(asked) == 2

    got = S.train_task(stack, maker, steps=6, batch=4, lr=1e-3, log_every=1, stop=stop,
                       check_every=2, use_vmap=use_vmap)
    assert [g["steps"] for g in got] == [6, 2] and [g["done"] for g in got] == [False, True]
    assert asked == [False] * 4  # seeds 3 and 5 at step 2, seed 3 at steps 4 and 6
    # each seed's losses are its single run's; seed 5 left the stack after step 2, and
    # seed 3, training on alone, is not moved by that
    for i, (seed, last) in enumerate(((3, 6), (5, 2))):
        single = K.train_task(cfg, maker, steps=6, batch=4, lr=1e-3, seed=seed, log_every=1)
        mine = [ls[i] for _, ls in stack.losses]
        assert all(v is None for v in mine[last:])
        np.testing.assert_allclose(mine[:last], [loss for _, loss in single.losses][:last],
                                   rtol=1e-4)
    # the seed that was done keeps its weights of step 2, returned and in the stack: a run
    # stopped there equals it
    early = K.train_task(cfg, maker, steps=6, batch=4, lr=1e-3, seed=5,
                         stop=lambda m: True, check_every=2)
    seq, _ = K.copy_batch(4, 3, np.random.default_rng(0))
    torch.testing.assert_close(got[1]["model"](seq), early.model(seq), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(stack.model(1)(seq), early.model(seq), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(stack.model(0)(seq), got[0]["model"](seq))
    # three seeds, leaving one by one: each is its single run stopped where it left
    stack = S.build(cfg, [3, 5, 7], "cpu")
    checks = iter(range(100))
    order = []

    def stop_some(model):
        order.append(next(checks))
        return order[-1] in (1, 3)  # seed 5 at step 2; then seed 3 at step 4

    got = S.train_task(stack, maker, steps=8, batch=4, lr=1e-3, log_every=1, stop=stop_some,
                       check_every=2, use_vmap=use_vmap)
    assert [g["steps"] for g in got] == [4, 2, 8] and len(order) == 3 + 2 + 1 + 1
    for i, seed in enumerate((3, 5, 7)):
        n = got[i]["steps"]
        ref = K.train_task(cfg, maker, steps=8, batch=4, lr=1e-3, seed=seed, log_every=1,
                           stop=(lambda m, n=n, c=iter(range(100)): 2 * (next(c) + 1) >= n),
                           check_every=2)
        torch.testing.assert_close(got[i]["model"](seq), ref.model(seq), rtol=1e-4,
                                   atol=1e-5)
        torch.testing.assert_close(stack.model(i)(seq), got[i]["model"](seq))
    # the same answers given for the seeds still training at once (stop_all): the same
    # seeds leave at the same steps with the same weights
    answers = iter([[False, True, False], [True, False], [False], [False]])
    asked_all = []

    def stop_all(sub):
        asked_all.append((sub.seeds, sub.template.training))
        return next(answers)

    again = S.build(cfg, [3, 5, 7], "cpu")
    got_all = S.train_task(again, maker, steps=8, batch=4, lr=1e-3, log_every=1,
                           stop_all=stop_all, check_every=2, use_vmap=use_vmap)
    assert asked_all == [((3, 5, 7), False), ((3, 7), False), ((7,), False), ((7,), False)]
    assert [g["steps"] for g in got_all] == [4, 2, 8]
    for i in range(3):
        torch.testing.assert_close(got_all[i]["model"](seq), got[i]["model"](seq))
        torch.testing.assert_close(again.model(i)(seq), stack.model(i)(seq))
    with pytest.raises(ValueError, match="check_every must be an integer >= 1"):
        S.train_task(stack, maker, steps=2, batch=4, lr=1e-3, check_every=0)
    with pytest.raises(ValueError, match="stop and stop_all are alternatives"):
        S.train_task(stack, maker, steps=2, batch=4, lr=1e-3, stop=stop, stop_all=stop_all)
    with pytest.raises(ValueError, match="stop_all must answer for each of the 3 seeds"):
        S.train_task(S.build(cfg, [3, 5, 7], "cpu"), maker, steps=2, batch=4, lr=1e-3,
                     stop_all=lambda sub: [True], check_every=2)


@pytest.mark.parametrize("use_vmap", [True, False])
def test_stacked_passkey_probe_is_each_seeds_probe(corpus, monkeypatch, use_vmap):
    """stacked.passkey_scores gives each seed what probe.passkey_scores gives its model.
    The questions are made so that the answer repeats the byte before it in every other
    window, and seeds 0 and 2 have blocks that pass the residual stream through (the
    prediction is the byte read): they get those right, seed 1 fewer, so a seed read in
    another's place would show."""
    from posenc.analysis.experiments import probe as P

    def questions(split, length, depth, n, seed):
        w = np.random.default_rng([seed, length, int(depth * 10)]).integers(0, 256, (n, length))
        w[::2, -6:] = w[::2, -7:-6]
        return w, 5

    monkeypatch.setattr(P, "passkey_text", questions)
    for enc in ("rope", "learned"):
        stack = S.build(_tiny(enc, 64), [0, 1, 2], "cpu")
        with torch.no_grad():
            for k, v in stack.params.items():
                if k.startswith("blocks."):
                    v[[0, 2]] = 0
        got = S.passkey_scores(stack, corpus.test, [64, 128], [0.1, 0.9], n=12, seed=0,
                               batch=5, use_vmap=use_vmap)
        assert got == [P.passkey_scores(stack.model(i), corpus.test, [64, 128], [0.1, 0.9],
                                        n=12, seed=0, batch=5) for i in range(3)]
        d = [g[64]["0.1"]["digit"] for g in got]
        assert min(d[0], d[2]) > 0.4 and d[1] < min(d[0], d[2])
        assert (got[0][128] is None) == (enc == "learned")


@pytest.mark.parametrize("enc", ENCODINGS)
def test_cached_decoding_reads_what_the_whole_sequence_reads(enc):
    """stacked._Cached, reading tokens after cached keys and values (the first ten, then
    seven at a time, then one), gives every seed the logits its model gives the whole
    sequence, under vmap and looping; RoPE with a scaling rule too."""
    cfg = ModelConfig(enc, d_model=32, n_heads=2, n_layers=2, train_length=40,
                      embed_scale=2.0)
    stack = S.build(cfg, [0, 1, 2], "cpu")
    with torch.no_grad():  # far from the initial weights, different for every seed
        gen = torch.Generator().manual_seed(1)
        for v in stack.params.values():
            v.add_(0.2 * torch.randn(v.shape, generator=gen))
    if enc == "rope":
        S.set_rope(stack, {"rope_type": "yarn", "factor": 2.0,
                           "original_max_position_embeddings": 20})
    x = torch.randint(0, 256, (3, 4, 31), generator=torch.Generator().manual_seed(2))
    for use_vmap in (True, False):
        full = S._per_seed(lambda p, w: S._forward(stack.template, p, w), 3, True,
                           use_vmap)(stack.params, x)
        step = S._cached_step(stack, use_vmap)
        with torch.no_grad():
            logits, keys, values = step(stack.params, x[:, :, :10], [], [], 0)
            parts = [logits]
            for t, u in ((10, 17), (17, 24), (24, 30), (30, 31)):
                logits, keys, values = step(stack.params, x[:, :, t:u], keys, values, t)
                parts.append(logits)
        torch.testing.assert_close(torch.cat(parts, dim=2), full, rtol=1e-4, atol=1e-5)
        assert keys[0].shape == (3, 4, 2, 31, 16)


@pytest.mark.parametrize("use_vmap,tokens", [(True, 2**15), (False, 2**15), (True, 60)])
def test_stacked_task_tests_are_each_seeds_tests(monkeypatch, use_vmap, tokens):
    """stacked.eval_copy (free-running too) and stacked.eval_passkey give each seed what
    tasks.eval_copy and tasks.eval_passkey give its model: the same strings, drawn from
    the same generators (recorded), and the same scores; the copy models, trained a
    little, score differently, so a seed read in another's place would show.  A small
    ``tokens`` reads the strings a few at a time: the same scores."""
    stack = S.build(_tiny("rope", 15), [0, 1, 2], "cpu")
    S.train_task(stack, K.copy_maker((1, 4)), steps=60, batch=16, lr=3e-3)
    got = S.eval_copy(stack, [2, 4, 8], n=40, free=True, use_vmap=use_vmap, tokens=tokens)
    assert got == [K.eval_copy(stack.model(i), [2, 4, 8], n=40, seed=s, free=True)
                   for i, s in enumerate(stack.seeds)]
    assert len({g[2]["symbol"] for g in got}) > 1
    assert len({g[4]["free"]["symbol"] for g in got}) > 1
    # written with the cache (the default) and by reading every sequence again: the same
    rngs = [np.random.default_rng(s) for s in stack.seeds]
    again = [np.random.default_rng(s) for s in stack.seeds]
    assert S.generate_copy(stack, 6, 20, rngs, use_vmap=use_vmap) == S.generate_copy(
        stack, 6, 20, again, use_vmap=use_vmap, cache=False)
    drawn = []
    real = K.passkey_batch

    def recorded(batch, total, depth, rng):
        drawn.append((total, depth, str(rng.bit_generator.state["state"])))
        return real(batch, total, depth, rng)

    monkeypatch.setattr(K, "passkey_batch", recorded)
    learned = S.build(_tiny("learned", 15), [0, 1, 2], "cpu")
    for st in (stack, learned):
        drawn.clear()
        got = S.eval_passkey(st, [12, 16, 24], [0.1, 0.9], n=20, use_vmap=use_vmap,
                             tokens=tokens)
        ours = sorted(drawn)
        drawn.clear()
        assert got == [K.eval_passkey(st.model(i), [12, 16, 24], [0.1, 0.9], n=20, seed=s)
                       for i, s in enumerate(st.seeds)]
        readable = 2 if st is learned else 3
        assert ours == sorted(drawn) and len(ours) == 3 * 2 * readable
        assert (got[0][24] is None) == (st is learned)
    with pytest.raises(ValueError, match="makers must have one entry per seed"):
        S.task_scores(stack, [K.copy_maker(2)], 4)


def test_vmapped_training_attends_without_the_fused_kernels_batching_rules(corpus,
                                                                           monkeypatch):
    """Under vmap, training attends either with the fused kernel called on plain tensors,
    the seeds joined to the batch (``"fused"``: stacked._SeedsAttention; one call per seed
    where the bias is each seed's own, T5's), or written out (``"written"``:
    stacked._attend): the fused kernel's own batching rules gave NaN gradients or refused
    a float bias on CUDA, so neither way lets vmap reach them.  Both agree with the
    per-seed loop; the loop calls the kernel as before; evaluation under vmap (no
    gradients) attends the fused way too, or, written, as the block does; the fused way
    keeps memory linear in the length, the written way every score."""
    from posenc.analysis.experiments import models as M

    for enc in ("nope", "alibi", "t5"):
        stack = S.build(_tiny(enc), [0, 1], "cpu")
        for way in S.VMAP_ATTENTION:
            S.set_vmap_attention(stack, way)
            for bf16 in (False, True):
                ok, why = S.vmap_agrees(stack, corpus.train, batch=2, bf16=bf16)
                assert ok, (enc, way, bf16, why)
    with pytest.raises(ValueError, match="how must be one of"):
        S.set_vmap_attention(stack, "flex")
    calls = []
    real = M.F.scaled_dot_product_attention

    def counted(*a, **kw):
        calls.append((torch._C._functorch.is_batchedtensor(a[0]), a[0].shape[0]))
        return real(*a, **kw)

    monkeypatch.setattr(M.F, "scaled_dot_product_attention", counted)
    layers = _tiny("nope").n_layers
    for enc, per_call, n_calls in (("alibi", 3 * 2, 1), ("t5", 2, 3)):
        stack = S.build(_tiny(enc), [0, 1, 2], "cpu")
        calls.clear()
        S.train_lm(stack, corpus.train, steps=1, batch=2, lr=1e-3, use_vmap=True)
        # plain tensors: the three seeds' batches of two in one call, or a call per seed
        # (T5); forward, then again in backward, in every layer
        assert calls == [(False, per_call)] * (2 * n_calls * layers), (enc, calls)
        # evaluation under vmap (no gradients) the same way, forward only
        ch = C.eval_chunks(corpus.test, max_length=32, target=16, n_chunks=2)
        calls.clear()
        S.eval_lm(stack, corpus.test, ch, [32], bucket=32, use_vmap=True)
        assert calls and not any(batched for batched, _ in calls)
        assert len(calls) % (n_calls * layers) == 0  # a call per seed for T5
        assert enc != "alibi" or all(n % 3 == 0 for _, n in calls)  # the seeds joined
        S.set_vmap_attention(stack, "written")
        calls.clear()
        S.train_lm(stack, corpus.train, steps=2, batch=2, lr=1e-3, use_vmap=True)
        assert calls == []
        S.train_lm(stack, corpus.train, steps=1, batch=2, lr=1e-3, use_vmap=False)
        assert calls and not any(batched for batched, _ in calls)
        # written out, evaluation under vmap calls the kernel as the block does
        calls.clear()
        S.eval_lm(stack, corpus.test, ch, [32], bucket=32, use_vmap=True)
        assert calls and all(batched for batched, _ in calls)
    # written out, the attention is the fused kernel's: causal, or the additive bias
    q, k, v = torch.randn(3, 2, 2, 7, 4).unbind(0)
    bias = torch.randn(2, 7, 7) + torch.full((7, 7), float("-inf")).triu(1)
    torch.testing.assert_close(S._attend(q, k, v, None),
                               real(q, k, v, is_causal=True), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(S._attend(q, k, v, bias), real(q, k, v, attn_mask=bias),
                               rtol=1e-5, atol=1e-6)
    # under bfloat16 autocast, backward keeps: written out, one float32 copy of the
    # probabilities (4 bytes a score) beside the inputs and the causal mask, not a
    # bfloat16 copy as well; fused, the inputs and the bias only, no score at all
    b, h, t, d = 2, 4, 128, 16
    q, k, v = (torch.randn(b, h, t, d, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    for bias in (None, torch.randn(h, t, t) + torch.full((t, t), float("-inf")).triu(1)):
        for attend in (S._attend, S._fused):
            kept: dict = {}

            def pack(x, kept=kept):
                kept[x.untyped_storage().data_ptr()] = x.untyped_storage().nbytes()
                return x

            with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    attend(q, k, v, bias)
            if attend is S._attend:
                inputs = 2 * q.numel() * 2 + v.numel() * 4 + t * t  # q, k; v float32; mask
                assert sum(kept.values()) <= 4 * b * h * t * t + inputs
            else:
                mask = 0 if bias is None else bias.numel() * 4
                assert sum(kept.values()) == 3 * q.numel() * 2 + mask


@pytest.mark.parametrize("enc", ["alibi", "t5"])
def test_vmapped_evaluation_past_the_models_blocks_is_each_seeds(corpus, enc):
    """Evaluation under vmap attends the fused way, the whole bias in one call, where a
    single model past 128 positions attends a block of queries at a time: the same
    losses, seed by seed."""
    stack = S.build(_tiny(enc), [0, 1], "cpu")
    S.train_lm(stack, corpus.train, steps=2, batch=2, lr=1e-3)
    ch = C.eval_chunks(corpus.test, max_length=300, target=16, n_chunks=3)
    ev = S.eval_lm(stack, corpus.test, ch, [300], bucket=32, use_vmap=True)
    for i in range(2):
        ref = T.eval_lm(stack.model(i), corpus.test, ch, [300], bucket=32)
        assert ev[i][300]["target"] == pytest.approx(ref[300]["target"], rel=1e-5)
        np.testing.assert_allclose(ev[i][300]["chunks"], ref[300]["chunks"], rtol=1e-4)


def test_the_ways_to_attend_with_a_bias_are_the_models_attention(corpus):
    """ALiBi's and T5's per-seed training may attend in one fused call or with
    FlexAttention (stacked.BIAS_ATTENTION): each gives the model's own attention, FlexAttention
    from the bias by distance (both biases depend only on i - j), compiled once for every
    bias of one shape; the check that picks a way on a device says no, and why, where a
    way fails (FlexAttention has no gradients on a CPU), and leaves the stack as it was."""
    from torch._dynamo.utils import counters

    from posenc.analysis.experiments import models as M

    t = 300  # past the model's query block (128), not a multiple of it
    for enc in ("alibi", "t5"):
        torch.manual_seed(1)
        model = M.TinyDecoder(_tiny(enc, t))
        if model.t5 is not None:  # the learned bias starts at zero: make it informative
            for p in model.t5.parameters():
                p.data.normal_()
        bias = model._bias(t, "cpu")
        i, j = torch.meshgrid(torch.arange(t), torch.arange(t), indexing="ij")
        seen = i >= j
        assert torch.equal(bias[:, :, 0][:, (i - j).clamp(min=0)][:, seen], bias[:, seen])
        assert torch.isinf(bias[:, ~seen]).all()
        q, k, v = torch.randn(3, 2, 2, t, 16).unbind(0)
        own = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        for how in ("full", "flex"):
            with torch.no_grad():  # (FlexAttention's gradients need CUDA)
                got = S._bias_attention(q, k, v, bias, how)
            torch.testing.assert_close(got, own, rtol=1e-5, atol=1e-5)
    graphs = counters["stats"]["unique_graphs"]
    with torch.no_grad():
        for _ in range(2):  # a new bias each time (T5 learns it): no new compilation
            S._bias_attention(q, k, v, bias + torch.randn(()), "flex")
    assert counters["stats"]["unique_graphs"] == graphs
    # the block uses the way set, in training only
    stack = S.build(_tiny("t5", 160), [0, 1], "cpu")
    ok, why = S.attention_agrees(stack, corpus.train, "full", batch=2, length=160)
    assert ok, why
    ok, why = S.attention_agrees(stack, corpus.train, "flex", batch=2, length=160)
    assert not ok and "NotImplementedError" in why and "backward on CPU" in why
    assert all(b.attention == "blocked" for b in stack.template.blocks)
    S.set_attention(stack, "flex")
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        S.train_lm(stack, corpus.train, steps=1, batch=2, lr=1e-3, use_vmap=False)
    ch = C.eval_chunks(corpus.test, max_length=160, target=16, n_chunks=2)
    S.eval_lm(stack, corpus.test, ch, [160], bucket=32, use_vmap=False)  # no gradients
    with pytest.raises(ValueError, match="how must be one of"):
        S.set_attention(stack, "fused")
    with pytest.raises(ValueError, match="how must be one of"):
        S.attention_agrees(stack, corpus.train, "fused", batch=2)


def test_stacked_training_honours_the_deadline_and_checks_vmap(corpus):
    stack = S.build(_tiny("rope"), [0, 1], "cpu")
    with pytest.raises(TimeoutError, match="time budget ran out at step 0"):
        S.train_lm(stack, corpus.train, steps=5, batch=2, lr=1e-3, deadline=0.0)
    ok, why = S.vmap_agrees(stack, corpus.train, batch=2)
    assert ok, why
    with pytest.raises(ValueError, match="seeds must be distinct"):
        S.build(_tiny("rope"), [1, 1])
    with pytest.raises(ValueError, match="lr must be a finite number"):
        S.train_lm(stack, corpus.train, steps=1, batch=2, lr=0.0)


def test_bfloat16_autocast_runs_and_stays_close(corpus):
    cfg = _tiny("alibi")
    a, b = S.build(cfg, [0, 1]), S.build(cfg, [0, 1])
    S.train_lm(a, corpus.train, steps=2, batch=2, lr=1e-3, log_every=1)
    S.train_lm(b, corpus.train, steps=2, batch=2, lr=1e-3, log_every=1, bf16=True)
    np.testing.assert_allclose(a.losses[0][1], b.losses[0][1], rtol=2e-2)


# -- the far-identifier targets and the corpus file ----------------------------------------------

def test_far_identifier_targets_follow_the_fixed_rule():
    text = (b"def long_name(x):\n    return x\n" + b"# " + b"." * 150 + b"\n"
            + b"y = long_name(2)\nz = long_name(3)\nfor i in x: pass\n" + b"." * 150
            + b"\nfor i in x: pass\n")
    split = C.Split(np.frombuffer(text, np.uint8).copy(), np.array([0, len(text)]), ("f",))
    m = C.far_identifier_mask(split)
    picked = bytes(split.tokens[m])
    # the second long_name is far from the first (> 128 bytes): its bytes after the first;
    # the third is near the second; 'for' is a keyword; 'i' and 'x' are too short
    assert picked == b"ong_name"
    assert m.sum() == len("ong_name")
    with pytest.raises(ValueError, match="gap must be an integer >= 1"):
        C.far_identifier_mask(split, gap=0)
    with pytest.raises(ValueError, match="min_len must be an integer >= 2"):
        C.far_identifier_mask(split, min_len=1)
    # files are separate: an identifier's first occurrence in a file is never a target
    two = C.Split(np.frombuffer(text * 2, np.uint8).copy(),
                  np.array([0, len(text), 2 * len(text)]), ("f", "g"))
    assert C.far_identifier_mask(two).sum() == 2 * len("ong_name")


def test_corpus_file_round_trip_and_tamper_check(corpus, tmp_path):
    path = C.save_corpus(corpus, tmp_path / "c.npz")
    back = C.load_corpus_file(path)
    assert back.provenance() == corpus.provenance()
    assert back.test.names == corpus.test.names
    np.testing.assert_array_equal(back.train.bounds, corpus.train.bounds)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["test_tokens"] = arrays["test_tokens"].copy()
    arrays["test_tokens"][0] ^= 1
    np.savez_compressed(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match="test split does not match its recorded SHA-256"):
        C.load_corpus_file(tmp_path / "bad.npz")
    with pytest.raises(ValueError, match="does not exist"):
        C.load_corpus_file(tmp_path / "none.npz")


# -- the GPU tier's plan, on the CPU at a tiny size ---------------------------------------

def _gpuquick(out, *extra):
    return subprocess.run([*RUN, "--tier", "gpuquick", "--no-progress", "--out", str(out),
                           *extra], cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def gpuquick_one(corpus, tmp_path_factory):
    """The gpuquick plan at 3 steps in one process, run once for the tests that read it
    (none writes into its folder): ``(corpus file, out folder, the finished process)``."""
    tmp = tmp_path_factory.mktemp("gpuquick")
    corpus_file = C.save_corpus(corpus, tmp / "corpus.npz")
    proc = _gpuquick(tmp / "out", "--corpus-file", str(corpus_file), "--steps", "3")
    return corpus_file, tmp / "out", proc


def test_gpu_plan_trains_in_priority_order_writes_units_and_resumes(corpus, gpuquick_one,
                                                                     tmp_path):
    sys.path.insert(0, str(ROOT))
    from experiments.run import TIERS

    cfg = TIERS["gpuquick"]
    corpus_file, out, proc = gpuquick_one
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["results.json", "results.md",
                                                     "units.jsonl"]
    lines = (out / "units.jsonl").read_text().splitlines()
    keys = [json.loads(x)["key"] for x in lines]
    first, more = cfg["plan"]["first_seeds"], cfg["plan"]["more_seeds"]
    L = cfg["lm"]["train_length"]
    expect = [f"lm-{e}-L{L}-s{s}" for e in ENCODINGS for s in first]
    assert keys[:len(expect)] == expect  # priority 1 first, in order
    arms = [("pi", "fixed"), ("ntk", "fixed"), ("yarn", "fixed"), ("llama3", "fixed"),
            ("dynamic", "fixed"), ("pi", "matched"), ("ntk", "matched"),
            ("yarn", "matched"), ("llama3", "matched")]
    scale = [f"scale-{k}-{m}-s{s}" for k, m in arms for s in first]
    assert keys[len(expect):len(expect) + len(scale)] == scale
    probes = [f"probe-{e}-L{L}-s{s}" for e in ("rope", "alibi") for s in first]
    refs = [f"{kind}-{e}-L{n}-s{s}" for e, n in cfg["plan"]["references"]
            for kind in ("lm", "probe") for s in first]
    ft = [f"finetune-{a}-s{s}" for a in ("plain", "pi", "ntk", "yarn") for s in first]
    tasks = [f"{t}-{e}-lr{lr:g}-s{s}" for t in ("copy", "passkey") for lr in cfg[t]["lrs"]
             for e in ENCODINGS for s in first]
    rest = [f"lm-{e}-L{L}-s{s}" for e in ENCODINGS for s in more]
    assert keys[len(expect) + len(scale):] == probes + refs + ft + tasks + rest
    # the cost model (posenc.analysis.experiments.cost) counts exactly the plan's groups
    assert {group_of(k) for k in keys} == set(gpu_work(cfg, 3))
    # and the call's log gives what its units cost against the whole plan
    assert f"this call stored {len(keys)} units, " in proc.stdout
    assert "TFLOP/s); the whole plan at 3 steps is " in proc.stdout
    r = json.loads((out / "results.json").read_text())
    assert r["schema"] == 3 and r["steps"] == 3 and not r["skipped"]
    # far targets: previous occurrence beyond the training length (the plan's far_gap), so
    # only a read longer than L can see it; the GPU tier's plan says the same of its own L
    from experiments.run import TIERS
    L_quick = TIERS["gpuquick"]["lm"]["train_length"]
    assert r["far_targets"]["gap"] == L_quick and f"> {L_quick} bytes back" in \
        r["far_targets"]["rule"]
    assert TIERS["gpu"]["plan"]["far_gap"] == TIERS["gpu"]["lm"]["train_length"]
    far = C.far_identifier_mask(corpus.test, gap=L_quick)
    ends = C.eval_chunks(corpus.test, max_length=max(TIERS["gpuquick"]["lm"]["eval_factors"])
                         * L_quick, target=TIERS["gpuquick"]["lm"]["target"],
                         n_chunks=TIERS["gpuquick"]["lm"]["n_chunks"])
    t = TIERS["gpuquick"]["lm"]["target"]
    assert r["far_targets"]["bytes"] == sum(int(far[e - t:e].sum()) for e in ends.ends)
    assert len(r["units"]) == len(keys)
    assert r["provenance"]["code"] == U.code_hash()
    assert r["corpus"]["test"]["sha256"] == corpus.test.sha256()
    units = {u["key"]: u for u in r["units"]}
    lengths = [L * f for f in cfg["lm"]["eval_factors"]]
    # a reference is read at every length, its shorter ones too (the same weights reading
    # less history before the same targets)
    for e, n in cfg["plan"]["references"]:
        for s in first:
            assert sorted(int(k) for k in units[f"lm-{e}-L{n}-s{s}"]["test"]) == lengths
    for key in expect:
        u = units[key]
        assert u["commit"] and u["steps"] == 3 and [s for s, _ in u["losses"]] == [0, 2]
        assert sorted(int(n) for n in u["test"]) == lengths
        for n, v in u["test"].items():
            if u["encoding"] == "learned" and int(n) > L:
                assert v is None
            else:
                assert math.isfinite(v["target"]) and math.isfinite(v["far"])
                assert len(v["chunks"]) == cfg["lm"]["n_chunks"]
    # matched factors: s = n / L at each length past L, through posenc's rope_parameters
    yarn = units[f"scale-yarn-matched-s{first[0]}"]
    assert sorted(int(n) for n in yarn["test"]) == [n for n in lengths if n > L]
    for n, p in yarn["rope_parameters"].items():
        assert p["factor"] == pytest.approx(int(n) / L) and p["rope_type"] == "yarn"
    pi = units[f"scale-pi-fixed-s{first[0]}"]
    assert {p["factor"] for p in pi["rope_parameters"].values()} == {cfg["scaling"]["factor"]}
    # references: trained at a longer length with the same bytes per step
    e_ref, n_ref = cfg["plan"]["references"][-1]
    ref = units[f"lm-{e_ref}-L{n_ref}-s{first[-1]}"]
    assert ref["train_length"] == n_ref and sorted(map(int, ref["test"])) == lengths
    assert ref["params"]["batch"] * n_ref == cfg["lm"]["batch"] * L
    # vmapped, every encoding attends with the fused kernel (its memory linear in the
    # length), so the ALiBi reference past vmap_max_length, which bounds only the
    # attention written out, trains vmapped too, and no way to attend is timed
    assert cfg["plan"]["vmap_max_length"] < n_ref and e_ref == "alibi"
    assert r["vmap"] == {e: "fused" for e in ENCODINGS}
    assert ref["vmap"] == "fused" and r["attention"] == {}
    assert units[f"lm-alibi-L{L}-s{first[0]}"]["attention"] == "blocked"
    assert "| rope @ 32 | far |" in (out / "results.md").read_text()
    # the fine-tuning arms: trained at factor * L from the RoPE models, probed
    n_ft = L * cfg["finetune"]["factor"]
    for a in ("plain", "pi", "ntk", "yarn"):
        u = units[f"finetune-{a}-s{first[0]}"]
        assert u["ft_steps"] == cfg["plan"]["ft_steps"] and u["losses"]
        assert (u["rope_parameters"] is None) == (a == "plain")
        assert sorted(int(n) for n in u["test"]) == lengths and u["test"][str(n_ft)]
        assert sorted(map(int, u["probe"])) == [n for n in lengths if n >= 33]
    assert units[f"finetune-pi-s{first[0]}"]["rope_parameters"] == {
        "rope_type": "linear", "factor": float(cfg["finetune"]["factor"])}
    # the tasks: trained to the target or the cap, tested at every length; copy free-running
    for t in ("copy", "passkey"):
        tc = cfg[t]
        for e in ENCODINGS:
            u = units[f"{t}-{e}-lr{tc['lrs'][0]:g}-s{first[0]}"]
            assert 1 <= u["task_steps"] <= tc["steps"] and u["task_steps"] % 2 == 0
            assert u["learned"] == (u["valid"] >= tc["target"])
            sizes = tc["eval_m"] if t == "copy" else tc["eval_totals"]
            assert sorted(map(int, u["test"])) == sorted(sizes)
    assert "free" in units[f"copy-rope-lr{cfg['copy']['lrs'][0]:g}-s{first[0]}"]["test"]["8"]
    # fine-tuning changed a copy: the plain arm's loss differs from the model it started from
    assert units[f"finetune-plain-s{first[0]}"]["test"][str(L)]["target"] != units[
        f"lm-rope-L{L}-s{first[0]}"]["test"][str(L)]["target"]

    # a second call resumes from the committed form of the units: nothing is trained
    committed = tmp_path / "committed"
    committed.mkdir()
    (committed / "units.jsonl").write_text((out / "units.jsonl").read_text())
    proc = _gpuquick(tmp_path / "again", "--corpus-file", str(corpus_file), "--steps", "3",
                     "--resume-from", str(committed))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert " steps in " not in proc.stdout and "scale pi" not in proc.stdout
    assert "this call stored" not in proc.stdout
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert [u["key"] for u in again["units"]] == [u["key"] for u in r["units"]]
    assert not (tmp_path / "again" / "units.jsonl").exists()
    # the files a call brings back assemble again without the plan or any training
    proc = _gpuquick(tmp_path / "asm", "--corpus-file", str(corpus_file), "--assemble-only",
                     "--resume-from", str(committed))
    assert proc.returncode == 0, proc.stderr[-3000:]
    asm = json.loads((tmp_path / "asm" / "results.json").read_text())
    assert sorted(u["key"] for u in asm["units"]) == sorted(keys) and asm["steps"] == 3


def test_gpu_plan_in_several_processes_stores_what_one_process_does(gpuquick_one, tmp_path):
    """``--workers``: the plan's groups spread over processes give the units one process
    gives (the same keys, and the same numbers up to summation order), every seed stacked
    in priority 1 so that the later groups have all of them, and nothing the budget did
    not reach is lost from the record.  The processes are started the way a device call
    starts them, by tools/device_experiments.sh (its GPU tier and device replaced), so a
    call does not find the script broken."""
    sys.path.insert(0, str(ROOT))
    from experiments.gpu_parallel import items, steps_for
    from experiments.run import TIERS

    cfg = TIERS["gpuquick"]
    corpus_file, one_out, one = gpuquick_one
    assert one.returncode == 0, one.stderr[-3000:]
    call = tmp_path / "call"
    env = {**os.environ, "OUT": str(call), "TIER": "gpuquick", "DEVICE": "cpu",
           "CORPUS": str(corpus_file), "PYTHON": sys.executable, "STEPS": "3",
           "WORKERS": "7"}
    many = subprocess.run(["bash", str(ROOT / "tools" / "device_experiments.sh"), "600"],
                          cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert many.returncode == 0, many.stderr[-3000:]
    log = (call / "exp" / "log.txt").read_text()
    assert "parallel plan exit 0" in many.stdout and "one process" not in log, log[-3000:]
    assert "worker exit codes [0, 0, 0, 0, 0, 0, 0]" in many.stdout
    assert "this call stored " in many.stdout
    # what a call brings back: the machine, and the results with their log; the workers'
    # records and stacks stay out of it
    assert {"exp", "machine.txt"} <= {p.name for p in call.iterdir()}
    assert f"torch {torch.__version__}" in (call / "machine.txt").read_text()
    assert sorted(p.name for p in (call / "exp").iterdir()) == [
        "log.txt", "results.json", "results.md", "units.jsonl"]
    a = {u["key"]: u for u in json.loads((one_out / "results.json").read_text())["units"]}
    r = json.loads((call / "exp" / "results.json").read_text())
    b = {u["key"]: u for u in r["units"]}
    seeds = cfg["plan"]["first_seeds"] + cfg["plan"]["more_seeds"]
    assert r["first_seeds"] == seeds and r["parallel"]["workers"] == 7
    assert not r["errors"] and not r["skipped"] and set(a) <= set(b)
    # the extra seeds reach every group, not only the language models
    first = cfg["plan"]["first_seeds"]
    extra = {k for k in b if not k.startswith("lm-") and not any(
        k.endswith(f"-s{s}") for s in first)}
    assert extra and all(k.endswith(f"-s{seeds[-1]}") for k in extra)
    lines = (call / "exp" / "units.jsonl").read_text().splitlines()
    assert len(lines) == len(b) and all(json.loads(x)["key"] in b for x in lines)
    for key, u in a.items():
        v = b[key]
        assert v["digest"] == u["digest"], key
        for n, t in u.get("test", {}).items():
            if t is not None and "target" in t:
                # bfloat16 products: summation order moves a rounding now and then
                assert v["test"][n]["target"] == pytest.approx(t["target"], rel=1e-4), key
    # the groups after priority 1 in priority order, each naming the stack it needs
    its = items(cfg)
    assert [it[0] for it in its[:3]] == ["scaling", "probe", "probe"]
    assert {it[1] for it in its} == {"rope", "alibi", None}
    assert steps_for([0.1, 0.2], 500.0, {"first_share": 0.5, "min_steps": 200,
                                         "max_steps": 4000}) == 1100
    bad = _gpuquick(tmp_path / "bad", "--corpus-file", str(corpus_file), "--workers", "3")
    assert bad.returncode != 0 and "--workers must be 1 or at least 6" in bad.stderr
    bad = _gpuquick(tmp_path / "bad", "--workers", "7")
    assert bad.returncode == 2 and "--workers needs --corpus-file" in bad.stderr
    bad = _gpuquick(tmp_path / "bad", "--corpus-file", str(corpus_file), "--groups",
                    "lm-alibi-L128,lm-alibi-L999")
    assert bad.returncode != 0 and "--groups must name groups of the plan" in bad.stderr
    assert "lm-alibi-L999" in bad.stderr and not (tmp_path / "bad" / "units.jsonl").exists()


def test_gpu_plan_skips_units_that_do_not_fit_the_budget(tmp_path):
    """With a budget that fits nothing, nothing starts and the results still say why."""
    out = tmp_path / "out"
    proc = _gpuquick(out, "--steps", "3", "--time-budget", "2", "--reserve", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads((out / "results.json").read_text())
    assert r["units"] == [] and r["skipped"]
    assert "skip lm-nope" in proc.stdout
    assert "Not run" in (out / "results.md").read_text()


def test_gpu_plan_loops_when_the_shared_device_runs_out_of_memory(corpus, tmp_path,
                                                                  monkeypatch):
    """Several processes share the device: where vmapped training runs out of memory
    after its measurement fitted, the group is trained again looping over the seeds (and
    the encoding loops from then on), stored once, not lost."""
    sys.path.insert(0, str(ROOT))
    from experiments.run import TIERS, GpuPlan

    plan = GpuPlan(TIERS["gpuquick"], corpus, U.UnitStore(tmp_path), device="cpu",
                   budget=U.Budget(None), steps=3, log=lambda *a: None)
    def scarce(real, calls):
        # vmapped: the measurement's two calls (2 and 3 steps) fit, the group's does not
        def train(stack, data, **kw):
            calls.append(kw["use_vmap"])
            if kw["use_vmap"] and calls.count(True) == 3:
                raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
            return real(stack, data, **kw)
        return train

    calls: list[bool] = []
    monkeypatch.setattr(S, "train_lm", scarce(S.train_lm, calls))
    stack = plan.lm_group("rope", plan.L, [0, 1], 3)
    assert stack is not None and plan.vmap_ok["rope"] is False
    assert calls == [True, True, True, False, False, False]
    assert [k for k, _ in plan.keys] == [f"lm-rope-L{plan.L}-s0", f"lm-rope-L{plan.L}-s1"]
    # a task group the same way
    task_calls: list[bool] = []
    monkeypatch.setattr(S, "train_task", scarce(S.train_task, task_calls))
    lr = TIERS["gpuquick"]["copy"]["lrs"][0]
    plan.task_group("copy", "nope", [0, 1], lr)
    assert task_calls == [True, True, True, False, False, False]
    assert plan.vmap_ok["nope"] is False
    assert [k for k, _ in plan.keys][2:] == [f"copy-nope-lr{lr:g}-s0", f"copy-nope-lr{lr:g}-s1"]
    units = plan.results()["units"]
    assert [u["key"] for u in units] == [k for k, _ in plan.keys]
    assert all(u["vmap"] is False for u in units[:2])


def test_gpu_plan_sizes_steps_to_the_budget(corpus):
    sys.path.insert(0, str(ROOT))
    from experiments.run import TIERS, GpuPlan

    cfg = json.loads(json.dumps(TIERS["gpuquick"]))
    cfg["plan"]["max_steps"] = 10**6
    plan = GpuPlan(cfg, corpus, U.UnitStore(Path("/nonexistent-dir-for-test")),
                   device="cpu", budget=U.Budget(1000.0, clock=lambda: 0.0, start=0.0),
                   steps=None, log=lambda *a: None)
    plan.step_time = {(e, plan.L, len(plan.first)): 0.1 for e in ENCODINGS}
    # half the budget over six encodings at 0.1 s a step, less an evaluation allowance
    steps = plan.choose_steps()
    assert steps % 50 == 0 and 700 <= steps <= 500 / 0.6
    plan.budget = U.Budget(10.0, clock=lambda: 0.0, start=0.0)
    assert plan.choose_steps() == cfg["plan"]["min_steps"]


def test_the_gpu_tier_model_has_at_least_five_million_parameters():
    sys.path.insert(0, str(ROOT))
    from experiments.run import GPU

    for enc in ENCODINGS:
        m = TinyDecoder(ModelConfig(enc, train_length=GPU["lm"]["train_length"],
                                    **GPU["model"]))
        assert m.n_parameters() >= 5_000_000
    assert GPU["lm"]["train_length"] * max(GPU["lm"]["eval_factors"]) == 8192
    assert len(GPU["plan"]["first_seeds"]) >= 3


# -- statistics ------------------------------------------------------------------------------

def test_holm_controls_the_family():
    p = [0.01, 0.04, 0.03, 0.005]
    adj = stats.holm(p)
    # monotone in the raw p-values, never below them, capped at 1
    order = np.argsort(p)
    assert all(np.diff(np.array(adj)[order]) >= 0)
    assert all(a >= r for a, r in zip(adj, p, strict=True))
    assert stats.holm([0.9, 0.8]) == [1.0, 1.0]
    # the issue's case: of five neighbouring pairs at 0.05, Holm can reject fewer
    raw = [0.001, 0.012, 0.02, 0.03, 0.04]
    assert sum(a < 0.05 for a in stats.holm(raw)) == 2
    with pytest.raises(ValueError, match=r"pvalues must lie in \[0, 1\]"):
        stats.holm([1.5])


def test_wilson_interval_stays_in_the_unit_interval():
    for k in range(6):
        w = stats.wilson(k, 5)
        assert 0.0 <= w["lo"] <= w["p"] <= w["hi"] <= 1.0
    assert stats.wilson(5, 5)["hi"] == 1.0 and stats.wilson(5, 5)["lo"] < 1.0
    # against the closed form at k = n / 2
    w = stats.wilson(50, 100)
    assert w["lo"] == pytest.approx(0.4038, abs=1e-4) and w["hi"] == pytest.approx(0.5962,
                                                                                   abs=1e-4)
    with pytest.raises(ValueError, match="need 0 <= k <= n"):
        stats.wilson(6, 5)
    with pytest.raises(TypeError, match="k must be an int"):
        stats.wilson(1.0, 5)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 8, 9, 19, 49])
def test_student_t_is_exact_far_into_the_tails(df):
    """The t distribution the intervals and p-values use, against the regularized
    incomplete beta function (mpmath, at 30 digits): P(|T| > x) = I_{df/(df+x^2)}(df/2,
    1/2).  A numerical integral it once used was off by 7e-5 at x = 1000 with 4 degrees
    of freedom (a p-value of 7e-5 where the true one is 6e-12)."""
    import mpmath

    def tail(x):  # P(|T| > x), at 30 digits
        return mpmath.betainc(mpmath.mpf(df) / 2, mpmath.mpf(1) / 2, 0,
                              mpmath.mpf(df) / (df + mpmath.mpf(x) ** 2), regularized=True)

    with mpmath.workdps(30):  # not the process's setting, which other tests share
        for x in [0.0, 1e-6, 0.3, 1.0, 2.0, 2.7764, 5.0, 30.0, 300.0, 1e3, 1e5]:
            assert stats._t_cdf_upper_half(x, df) == pytest.approx(
                float((1 - tail(x)) / 2), rel=1e-12, abs=1e-15)
        for p in (0.9, 0.975, 0.995):
            assert float(1 - tail(stats.t_quantile(p, df)) / 2) == pytest.approx(p, abs=1e-12)
    with pytest.raises(ValueError, match="df must be an integer >= 1"):
        stats.t_quantile(0.975, float(df))


def test_paired_t_pvalue_and_bootstrap():
    # t = 0.4188 with 4 degrees of freedom: two-sided p = 0.6968
    assert stats.paired_t_pvalue([1, 2, 3, 4, 5], [1.5, 1.2, 3.1, 3.5, 5.2]) == pytest.approx(
        0.6968, abs=1e-3)
    rng = np.random.default_rng(0)
    null = rng.normal(0.0, 1.0, size=(5, 50))
    b = stats.bootstrap(null)
    assert b["lo"] < 0 < b["hi"] and b["p"] > 0.05
    # more seed-to-seed spread widens the interval (seeds are resampled, not only chunks)
    spread = null + rng.normal(0.0, 2.0, size=(5, 1))
    assert (stats.bootstrap(spread)["hi"] - stats.bootstrap(spread)["lo"]) > 2 * (
        b["hi"] - b["lo"])
    assert stats.bootstrap(null, seed=1)["mean"] == b["mean"]
    with pytest.raises(ValueError, match="seeds >= 2"):
        stats.bootstrap([[1.0, 2.0]])
    with pytest.raises(ValueError, match="n_boot must be an integer >= 100"):
        stats.bootstrap(null, n_boot=10)
    # chunks that share a file share its offset: resampling files (not chunks) widens the
    # interval, as it should; one chunk per file gives the chunk bootstrap's width
    files = np.repeat(np.arange(10), 5)
    shared = null + rng.normal(0.0, 2.0, size=10)[files][None, :]
    by_chunk = stats.bootstrap(shared)
    by_file = stats.bootstrap(shared, groups=files)
    assert by_file["n_groups"] == 10 and by_chunk["n_groups"] == 50
    assert (by_file["hi"] - by_file["lo"]) > 1.8 * (by_chunk["hi"] - by_chunk["lo"])
    alone = stats.bootstrap(null, groups=np.arange(50))
    assert alone["hi"] - alone["lo"] == pytest.approx(b["hi"] - b["lo"], rel=0.2)
    with pytest.raises(ValueError, match="groups must have one label per chunk"):
        stats.bootstrap(null, groups=files[:10])


def test_bootstrap_is_the_written_out_resampling():
    """The bootstrap counts draws instead of copying each replicate; its replicates are
    the means a written-out loop over the same draws gives, with and without files."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 30))
    files = rng.integers(0, 7, size=30)
    for groups in (None, files):
        got = stats.bootstrap(x, n_boot=300, groups=groups, seed=5)
        draw = np.random.default_rng(5)
        rows = draw.integers(0, 4, size=(300, 4))
        if groups is None:
            cols = list(draw.integers(0, 30, size=(300, 30)))
        else:
            members = [np.flatnonzero(files == f) for f in np.unique(files)]
            cols = [np.concatenate([members[i] for i in pick])
                    for pick in draw.integers(0, len(members), size=(300, len(members)))]
        means = np.array([x[r][:, k].mean() for r, k in zip(rows, cols, strict=True)])
        lo, hi = np.quantile(means, [0.025, 0.975])
        assert got["lo"] == pytest.approx(lo, abs=1e-12)
        assert got["hi"] == pytest.approx(hi, abs=1e-12)
        assert got["p"] == min(1.0, 2 * min((means <= 0).mean(), (means >= 0).mean()))


def test_fisher_exact_is_the_sum_over_every_labelling():
    """Fisher's exact test against its definition: over every way of choosing which n1 of
    the pooled outcomes form the first group, the share of tables no more likely than the
    one observed (counted by brute force, not by the hypergeometric formula)."""
    import itertools
    from collections import Counter

    for k1, n1, k2, n2 in [(5, 5, 2, 5), (5, 5, 1, 5), (4, 5, 1, 5), (0, 3, 3, 4),
                           (2, 6, 2, 6), (1, 2, 7, 9)]:
        pooled = [1] * (k1 + k2) + [0] * (n1 + n2 - k1 - k2)
        counts = Counter(sum(pooled[i] for i in pick)
                         for pick in itertools.combinations(range(n1 + n2), n1))
        total = sum(counts.values())
        want = sum(c for x, c in counts.items() if c <= counts[k1]) / total
        assert stats.fisher_exact(k1, n1, k2, n2) == pytest.approx(want, abs=1e-12)
        assert stats.fisher_exact(k2, n2, k1, n1) == pytest.approx(want, abs=1e-12)
    with pytest.raises(ValueError, match="need 0 <= k1 <= n1"):
        stats.fisher_exact(6, 5, 2, 5)
    with pytest.raises(ValueError, match="n1, n2 >= 1"):
        stats.fisher_exact(0, 0, 2, 5)
    with pytest.raises(TypeError, match="k2 must be an int"):
        stats.fisher_exact(1, 5, 2.0, 5)


def test_vmap_check_catches_mixed_seeds_and_errors(corpus, monkeypatch):
    stack = S.build(_tiny("t5"), [0, 1], "cpu")
    real = S._per_seed

    def mixed(fn, n, batched, use_vmap):
        if not use_vmap:
            return real(fn, n, batched, False)
        # a wrong batching rule: every seed gets the next seed's T5 bias
        def wrong(params, x):
            p = dict(params)
            key = "t5.relative_attention_bias.weight"
            p[key] = p[key].roll(1, 0)
            return real(fn, n, batched, True)(p, x)
        return wrong

    monkeypatch.setattr(S, "_per_seed", mixed)
    ok, why = S.vmap_agrees(stack, corpus.train, batch=2)
    assert not ok and "losses differ" in why

    def broken(fn, n, batched, use_vmap):
        if not use_vmap:
            return real(fn, n, batched, False)
        def fail(params, x):
            raise RuntimeError("no batching rule")
        return fail

    monkeypatch.setattr(S, "_per_seed", broken)
    ok, why = S.vmap_agrees(stack, corpus.train, batch=2)
    assert not ok and why == "RuntimeError: no batching rule"


def test_gpu_plan_evaluation_falls_back_to_the_loop(corpus, monkeypatch):
    sys.path.insert(0, str(ROOT))
    from experiments.run import TIERS, GpuPlan

    logs = []
    plan = GpuPlan(TIERS["gpuquick"], corpus, U.UnitStore(Path("/nonexistent-dir-for-test")),
                   device="cpu", budget=U.Budget(None), steps=2, log=logs.append)
    stack = S.build(plan.cfg("alibi"), [0, 1])
    want = S.eval_lm(stack, corpus.test, plan.chunks, [64], bucket=32, use_vmap=False,
                     bf16=plan.bf16)

    def refusing_vmap(real, why):
        def fn(*args, use_vmap=True, **kw):
            if use_vmap:
                raise RuntimeError(why)
            return real(*args, use_vmap=use_vmap, **kw)
        return fn

    monkeypatch.setattr(S, "eval_lm", refusing_vmap(S.eval_lm, "no kernel for this mask"))
    got = plan.evaluate("alibi", stack, corpus.test, plan.chunks, [64], None)
    assert [g[64]["target"] for g in got] == [w[64]["target"] for w in want]
    assert any("evaluation under vmap failed" in line for line in logs)
    assert plan.vmap_ok["alibi"]
    # the task checks too: the same accuracies as each seed's own tasks.score
    tc = plan.config["copy"]
    maker = K.copy_maker(tuple(tc["m"]))
    monkeypatch.setattr(S, "task_scores", refusing_vmap(S.task_scores, "no batching rule"))
    accs = plan.task_valid("alibi", stack, maker, tc)
    assert accs == [K.score(stack.model(i), lambda b, r=np.random.default_rng(99_999):
                            maker(b, r), tc["n_valid"])["symbol"] for i in range(2)]
    assert any("the task check under vmap failed" in line for line in logs)
    # once vmap failed there, the plan loops without trying again
    n_logs = len(logs)
    assert plan.task_valid("alibi", stack, maker, tc) == accs and len(logs) == n_logs


def test_the_references_rate_check_extends_its_grid_and_retrains_at_a_better_rate(
        monkeypatch):
    """stage_refrates' rule with the training stubbed: a validation loss whose optimum lies
    below the grid makes it extend the grid downwards (at most max_extensions times), reuse
    the reference's own unit at its own rate, and retrain every seed at the rate chosen;
    where the reference's own rate wins, nothing is retrained."""
    sys.path.insert(0, str(ROOT))
    from experiments import stage_refrates as RR
    from experiments.stage_lm import Runner

    calls = []

    class Fake:
        L = 16
        _beyond = staticmethod(Runner._beyond)
        config = {"lm": {"lrs": [1e-3, 1e-2], "batch": 8, "steps": 5},
                  "references": {"encodings": ["rope"], "factors": [2],
                                 "seeds": [0, 1, 2]},
                  "tuning_grid": {"max_extensions": 2}}

        def cfg(self, enc, scale, train_length):
            return (enc, scale, train_length)

        def lm_train(self, key, cfg, seed, lr, steps, batch=None):
            calls.append((key, seed, lr, batch))
            return {"key": key, "encoding": cfg[0], "seed": seed, "lr": lr,
                    "train_length": cfg[2], "embed_scale": cfg[1]}

        def lm_test(self, run, cfg):
            return {**run, "test": {}}

    def valid_at(best):
        def fake_valid(runner, key, cfg, n):
            lr = next(c[2] for c in calls if c[0] == key) if key != own["key"] else 1e-2
            return {"valid": (math.log10(lr) - math.log10(best)) ** 2}
        return fake_valid
    own = {"key": "ref-rope-L32-s0", "encoding": "rope", "train_length": 32, "seed": 0}
    chosen = {"rope": {"lr": 1e-2, "embed_scale": 1.0}}
    monkeypatch.setattr(RR, "reference_context", lambda runner, refs: [r["key"] for r in refs])
    # the optimum far below the grid: two extensions down (1e-4, 1e-5), then the cap
    monkeypatch.setattr(RR, "_valid", valid_at(1e-6))
    out = RR.reference_rates(Fake(), chosen, [own])
    grid_lrs = [g["lr"] for g in out["grid"]]
    assert grid_lrs == [1e-5, 1e-4, 1e-3, 1e-2]
    assert [g["key"] for g in out["grid"]][-1] == own["key"]  # its own rate: not retrained
    assert own["key"] not in [c[0] for c in calls]
    assert out["chosen"] == [{"encoding": "rope", "train_length": 32, "lr": 1e-5,
                              "own_lr": 1e-2, "grid": grid_lrs}]
    # every seed at the chosen rate, seed 0 being the grid's unit, at the reference's batch
    assert [t["key"] for t in out["tuned"]] == [
        "refgrid-rope-L32-lr1e-05", "reftuned-rope-L32-lr1e-05-s1",
        "reftuned-rope-L32-lr1e-05-s2"]
    assert all(c[3] == 4 for c in calls)
    assert out["tuned_context"] == [t["key"] for t in out["tuned"]]
    # the optimum inside the grid, at the reference's own rate: nothing retrained
    calls.clear()
    monkeypatch.setattr(RR, "_valid", valid_at(1e-2))
    out = RR.reference_rates(Fake(), chosen, [own])
    assert [g["lr"] for g in out["grid"]] == [1e-3, 1e-2, 1e-1]
    assert out["chosen"][0]["lr"] == 1e-2 and out["tuned"] == []
    assert [c[0] for c in calls] == ["refgrid-rope-L32-lr0.001", "refgrid-rope-L32-lr0.1"]
    # the check tunes on seed 0: a configuration without it is refused by name
    Fake.config = {**Fake.config, "references": {**Fake.config["references"],
                                                 "seeds": [1, 2]}}
    with pytest.raises(ValueError, match=r"references\.seeds must include seed 0"):
        RR.reference_rates(Fake(), chosen, [own])


def test_the_ablation_rate_check_extends_its_grid_and_retrains_at_a_better_rate(
        monkeypatch):
    """stage_ablrates' rule with the training stubbed: every arm but the protocol's own
    model gets a grid on seed 0 (its own rate read from its stored unit, the score its
    validation loss); an arm whose optimum lies below the grid extends it downwards at most
    max_extensions times and retrains every seed at the rate chosen; an arm whose own rate
    wins retrains nothing; a configuration without seed 0 is refused by name."""
    sys.path.insert(0, str(ROOT))
    from experiments import stage_ablrates as AR
    from experiments.stage_lm import Runner

    calls = []
    best_of = {500.0: 1e-6, 1e6: 1e-2}  # each arm's optimum rate

    def loss(base, lr):
        return (math.log10(lr) - math.log10(best_of[base])) ** 2

    class Fake:
        _beyond = staticmethod(Runner._beyond)
        config = {"lm": {"lrs": [1e-3, 1e-2], "batch": 8, "steps": 5},
                  "model": {"d_model": 32, "n_heads": 2},
                  "ablation": {"bases": [500.0, 1e4, 1e6], "head_dims": [16],
                               "seeds": [0, 1, 2]},
                  "tuning_grid": {"max_extensions": 2}}

        def cfg(self, enc, scale, rope_base, n_heads):
            return (enc, scale, rope_base, n_heads)

        def lm_train(self, key, cfg, seed, lr, steps, batch=None):
            calls.append((key, seed, lr))
            return {"key": key, "rope_base": cfg[2], "head_dim": 32 // cfg[3], "seed": seed,
                    "lr": lr, "valid": loss(cfg[2], lr)}

        def lm_test(self, run, cfg):
            return {**run, "test": {}}

    chosen = {"rope": {"lr": 1e-2, "embed_scale": 1.0}}
    own = [{"key": f"abl-rope-b{b:g}-h16-s0", "rope_base": b, "head_dim": 16, "seed": 0,
            "lr": 1e-2, "valid": loss(b, 1e-2)} for b in (500.0, 1e6)]
    out = AR.ablation_rates(Fake(), chosen, own)
    # the protocol's own model (base 10^4 at head width 16) is not an arm of the check
    assert [(c["rope_base"], c["lr"], c["grid"]) for c in out["chosen"]] == [
        (500.0, 1e-5, [1e-5, 1e-4, 1e-3, 1e-2]), (1e6, 1e-2, [1e-3, 1e-2, 1e-1])]
    assert [g["key"] for g in out["grid"] if g["lr"] == 1e-2] == [o["key"] for o in own]
    assert not {o["key"] for o in own} & {c[0] for c in calls}
    # every seed of the arm that moved, seed 0 being its grid unit; none of the other
    assert [t["key"] for t in out["tuned"]] == [
        "ablgrid-rope-b500-h16-lr1e-05", "abltuned-rope-b500-h16-lr1e-05-s1",
        "abltuned-rope-b500-h16-lr1e-05-s2"]
    assert all(t["lr"] == 1e-5 and "test" in t for t in out["tuned"])
    # an arm whose seed 0 is missing from the ablation's runs is named
    with pytest.raises(ValueError, match=r"ablation must hold seed 0 of the arm base 1e\+06, "
                       r"head width 16 once, got 0"):
        AR.ablation_rates(Fake(), chosen, own[:1])
    Fake.config = {**Fake.config, "ablation": {**Fake.config["ablation"], "seeds": [1, 2]}}
    with pytest.raises(ValueError, match=r"ablation\.seeds must include seed 0"):
        AR.ablation_rates(Fake(), chosen, own)


def test_the_rivals_of_seed_0s_choice_are_trained_on_every_seed():
    """stage_lmrates' rule with the training stubbed: a grid point within one seed standard
    deviation (of the chosen setting's validation loss over the seeds) of the chosen one on
    seed 0 is a rival, trained on every seed (seed 0 its grid unit) and tested; a point
    further off is not; a configuration without seed 0 is refused by name."""
    sys.path.insert(0, str(ROOT))
    from experiments import stage_lmrates as LR

    calls = []

    class Fake:
        config = {"seeds": [0, 1, 2], "lm": {"steps": 5}}

        def cfg(self, enc, scale):
            return (enc, scale)

        def lm_train(self, key, cfg, seed, lr, steps, batch=None):
            calls.append(key)
            return {"key": key, "encoding": cfg[0], "seed": seed, "lr": lr,
                    "embed_scale": cfg[1]}

        def lm_test(self, run, cfg):
            return {**run, "test": {}}

    def point(lr, sc, valid):
        return {"key": f"lmgrid-rope-lr{lr:g}-x{sc:g}", "encoding": "rope", "lr": lr,
                "embed_scale": sc, "valid": valid}
    # seeds' validation at the chosen setting: 1.60, 1.62, 1.64 (sd 0.02)
    lm = {"chosen": {"rope": {"lr": 0.01, "embed_scale": 1.0}},
          "grid": [point(0.01, 1.0, 1.60), point(0.01, 8.0, 1.615), point(0.03, 1.0, 1.63),
                   point(0.003, 1.0, 1.619)],
          "runs": [{"encoding": "rope", "seed": s, "valid": v}
                   for s, v in ((0, 1.60), (1, 1.62), (2, 1.64))]}
    out = LR.rivals(Fake(), lm)
    assert [(r["lr"], r["embed_scale"]) for r in out["rivals"]] == [(0.003, 1.0), (0.01, 8.0)]
    assert all(math.isclose(r["spread"], 0.02) for r in out["rivals"])
    assert math.isclose(out["rivals"][1]["gap"], 0.015)
    assert [r["key"] for r in out["runs"]] == [
        "lmgrid-rope-lr0.003-x1", "lmrival-rope-lr0.003-x1-s1", "lmrival-rope-lr0.003-x1-s2",
        "lmgrid-rope-lr0.01-x8", "lmrival-rope-lr0.01-x8-s1", "lmrival-rope-lr0.01-x8-s2"]
    assert all("test" in r for r in out["runs"])
    Fake.config = {"seeds": [1, 2], "lm": {"steps": 5}}
    with pytest.raises(ValueError, match=r"seeds must include seed 0"):
        LR.rivals(Fake(), lm)


def test_finetune_more_seeds_trains_further_seeds_models_and_rejects_the_protocols_own():
    """stage_finetune.more_models with the training stubbed: an arm finetune_more_seeds
    names gets each further seed's RoPE model (trained by the language-model stage's own
    unit, at RoPE's tuned setting); an arm it does not name gets none; a further seed that
    is one of the protocol's seeds is a clear error."""
    sys.path.insert(0, str(ROOT))
    from experiments import stage_finetune as F
    from experiments.stage_lm import Runner

    calls = []

    class Fake:
        lm_key = staticmethod(Runner.lm_key)
        config = {"seeds": [0, 1], "lm": {"steps": 7},
                  "finetune_more_seeds": {"arms": ["plain", "ntk"], "seeds": [2, 3]}}

        def cfg(self, enc, scale):
            return (enc, scale)

        def lm_train(self, key, cfg, seed, lr, steps, batch=None):
            calls.append((key, cfg, seed, lr, steps))

    chosen = {"rope": {"lr": 0.01, "embed_scale": 7.07}}
    got = F.more_models(Fake(), chosen, "ntk")
    assert [(s, k) for s, k, _ in got] == [(2, "lm-rope-lr0.01-x7.07-s2"),
                                           (3, "lm-rope-lr0.01-x7.07-s3")]
    assert calls == [(k, ("rope", 7.07), s, 0.01, 7) for s, k, _ in got]
    assert F.more_models(Fake(), chosen, "pi") == []
    Fake.config = {**Fake.config, "finetune_more_seeds": {"arms": ["plain"], "seeds": [1, 2]}}
    with pytest.raises(ValueError, match=r"finetune_more_seeds.seeds must be seeds beyond "
                                         r"the protocol's \[0, 1\], got \[1, 2\]"):
        F.more_models(Fake(), chosen, "plain")
    # without the section, no arm has further seeds
    Fake.config = {"seeds": [0, 1], "lm": {"steps": 7}}
    assert F.more_models(Fake(), chosen, "plain") == []


def test_a_task_grid_is_refined_where_seed_0_learned_at_no_rate(monkeypatch):
    """taskgrid.refine with the training stubbed: an encoding whose seed 0 learned at no
    rate of the grid gets the log-midpoints around its best rate as well (when the tier's
    task_refine names the task), the choice is made again over all of them, and where a
    midpoint wins the other seeds train at it; an encoding that learned, one whose best
    stays, or a task task_refine does not name, keeps the stage's result."""
    sys.path.insert(0, str(ROOT))
    from experiments import stage_tasks as ST
    from experiments import taskgrid as TG

    # nope learns only at 0.0173 (a midpoint); t5 learns nowhere, best at 0.01 on the grid
    outcome = {("nope", 0.0173): (True, 900, 0.991), ("rope", 0.01): (True, 400, 0.995),
               ("nope", 0.03): (False, 300, 0.8), ("t5", 0.01): (False, 300, 0.9)}
    calls = []

    def fake_unit(runner, name, key, enc, seed, lr, lm_chosen, steps=None, warmup=None):
        calls.append(key)
        learned, st, valid = outcome.get((enc, lr), (False, 300, 0.1))
        return {"encoding": enc, "seed": seed, "lr": lr, "learned": learned, "steps": st,
                "valid": valid}

    monkeypatch.setattr(ST, "task_unit", fake_unit)
    monkeypatch.setattr(TG, "task_unit", fake_unit)

    class Fake:
        encodings = ("rope", "nope", "t5")
        config = {"seeds": [0, 1], "task_refine": ["copy"],
                  "copy": {"lrs": [1e-3, 1e-2, 3e-2, 1e-1]}}

    res = ST.task(Fake(), "copy", {})
    assert res["chosen"]["nope"] == {"lr": 0.03, "learned": False}
    calls.clear()
    out = TG.refine(Fake(), "copy", {}, res)
    assert calls == ["copygrid-nope-lr0.0173", "copygrid-nope-lr0.0548",
                     "copy-nope-lr0.0173-s1", "copygrid-t5-lr0.00316", "copygrid-t5-lr0.0173"]
    # the stage's own runs of nope, at its own choice, are kept as replaced
    assert [(r["seed"], r["lr"]) for r in out["replaced"]] == [(0, 0.03), (1, 0.03)]
    assert out["chosen"] == {"rope": {"lr": 0.01, "learned": True},
                             "nope": {"lr": 0.0173, "learned": True,
                                      "refined": [0.0173, 0.0548]},
                             "t5": {"lr": 0.01, "learned": False,
                                    "refined": [0.00316, 0.0173]}}
    assert len(out["grid"]) == len(res["grid"]) + 4
    # nope's runs are now its winning midpoint and seed 1 at it; the others' are unchanged
    assert [(r["seed"], r["lr"]) for r in out["runs"] if r["encoding"] == "nope"] == [
        (0, 0.0173), (1, 0.0173)]
    assert ([r for r in out["runs"] if r["encoding"] != "nope"]
            == [r for r in res["runs"] if r["encoding"] != "nope"])
    # a task task_refine does not name keeps the stage's result; so does a task where the
    # refinement moved no choice, bar the empty record of what it replaced
    assert TG.refine(Fake(), "passkey", {}, res) is res
    outcome[("nope", 0.0173)] = (False, 300, 0.5)
    again = TG.refine(Fake(), "copy", {}, res)
    assert again["runs"] == res["runs"] and again["replaced"] == []
    with pytest.raises(ValueError, match=r"lr must be a rate of the grid"):
        TG.midpoints([1e-3, 1e-2], 5e-3)


@pytest.mark.parametrize("module", ["gpu_parallel", "merge_gpu_calls"])
def test_gpu_call_scripts_examples(module):
    """The examples in the GPU tier's scripts (the steps rule, the merge of calls) hold."""
    import doctest
    import importlib

    sys.path.insert(0, str(ROOT))
    mod = importlib.import_module(f"experiments.{module}")
    result = doctest.testmod(mod)
    assert result.attempted >= 2 and result.failed == 0


def test_committed_gpu_results_are_the_merge_of_their_calls():
    """experiments/results-gpu.json is what merge_gpu_calls.py makes of the calls it
    records: every unit stored once in units/gpu/units.jsonl, one code for all."""
    r = json.loads((ROOT / "experiments" / "results-gpu.json").read_text())
    calls = r["provenance"]["calls"]
    assert sum(c["units"] for c in calls) == len(r["units"])
    stored = [json.loads(x) for x in
              (ROOT / "experiments" / "units" / "gpu" / "units.jsonl").read_text().splitlines()]
    assert [u["key"] for u in stored] == [u["key"] for u in r["units"]]
    assert len({u["code"] for u in stored}) == 1
    assert {u["commit"] for u in stored} == {c["commit"] for c in calls}
    sys.path.insert(0, str(ROOT))
    from experiments.merge_gpu_calls import _group

    assert not {_group(u["key"]) for u in r["units"]} & {_group(s) for s in r["skipped"]}


def test_gpu_plan_times_the_ways_to_attend_where_a_bias_encoding_loops(corpus, tmp_path):
    """ALiBi and T5 looping over their seeds: of the plan's ways to attend, those that
    agree with the model's own are timed and the fastest kept, recorded with the group's
    units (FlexAttention has no gradients on a CPU, so it is checked and refused here)."""
    sys.path.insert(0, str(ROOT))
    from experiments.run import TIERS, GpuPlan

    logs: list[str] = []
    plan = GpuPlan(TIERS["gpuquick"], corpus, U.UnitStore(tmp_path), device="cpu",
                   budget=U.Budget(None), steps=2, log=logs.append, use_vmap=False)
    assert plan.lm_group("alibi", 128, [0, 1], 2) is not None
    assert any(m.startswith("  alibi: attention 'flex' does not agree") for m in logs)
    way = plan.attention_for("alibi", 128)
    assert way in ("full", "blocked") and any(f"attends {way!r}" in m for m in logs)
    assert plan.record()["attention"] == {"alibi@128": way}
    units = plan.results()["units"]
    assert len(units) == 2 and all(u["attention"] == way and u["vmap"] is False
                                   for u in units)


def test_gpu_plan_picks_the_vmapped_attention_and_loops_when_memory_runs_out(corpus,
                                                                             monkeypatch):
    """The plan tries the ways vmapped training attends in order and keeps the first that
    agrees with the per-seed loop on the device; the fused kernel's memory is linear in
    the length, the attention written out keeps every score, so that way serves only up
    to ``vmap_max_length``.  No way agreeing, the encoding loops over its seeds; and where
    vmapped training does not fit the device (measured on the real batch before a group
    trains) it loops instead of losing the group."""
    sys.path.insert(0, str(ROOT))
    from experiments.run import TIERS, GpuPlan

    cfg = json.loads(json.dumps(TIERS["gpuquick"]))
    cfg["plan"]["vmap_max_length"] = 32
    logs = []
    plan = GpuPlan(cfg, corpus, U.UnitStore(Path("/nonexistent-dir-for-test")),
                   device="cpu", budget=U.Budget(None), steps=2, log=logs.append)
    assert plan.vmap_for("rope", 32) and plan.vmap_for("rope", 4096)
    assert plan.vmap_way["rope"] == "fused" and not logs
    stack = plan.build("rope", [0, 1])
    assert {b.vmap_attention for b in stack.template.blocks} == {"fused"}

    def refused(*a, **kw):
        raise RuntimeError("no kernel here (simulated)")

    monkeypatch.setattr(S, "_fused", refused)
    assert plan.vmap_for("alibi", 32) and not plan.vmap_for("alibi", 64)
    assert plan.vmap_for("alibi")  # evaluation: no length, the fused kernel's forward
    assert plan.vmap_way["alibi"] == "written"
    assert any("alibi: vmap attending 'fused' does not agree" in m and "simulated" in m
               for m in logs)
    stack = plan.build("alibi", [0, 1])
    assert {b.vmap_attention for b in stack.template.blocks} == {"written"}
    monkeypatch.setattr(S, "_attend", refused)
    assert not plan.vmap_for("t5", 32) and "t5" not in plan.vmap_way
    assert logs[-1] == "  t5: looping over the seeds"
    assert plan.record()["vmap"] == {"rope": "fused", "alibi": "written", "t5": False}
    real = S.train_lm
    asked = []

    def no_room_under_vmap(*args, use_vmap=True, **kw):
        asked.append(use_vmap)
        if use_vmap:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return real(*args, use_vmap=use_vmap, **kw)

    monkeypatch.setattr(S, "train_lm", no_room_under_vmap)
    assert plan.measure("rope", 32, [0, 1]) > 0
    assert asked[0] is True and not any(asked[1:]) and plan.vmap_ok["rope"] is False
    assert any("out of memory under vmap" in m for m in logs)
