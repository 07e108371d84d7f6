"""experiments/recheck.py: which units it samples, how it measures a difference, and its
refusals.  (The re-run itself is the committed experiments/recheck-cpu.json, which
tests/book/test_chapter_experiments.py reads.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from experiments.recheck import (  # noqa: E402
    choose,
    largest_difference,
    outcome,
    split,
    task_seeds,
    write,
)
from posenc.analysis.experiments.report import rerun_seconds  # noqa: E402
from posenc.analysis.experiments.units import work_group  # noqa: E402


def unit(key, seconds, model=None, digest=None, steps=100):
    params = {"unit": key} if model is None else {"unit": key, "model": model}
    if model is None and not key.startswith(("copy", "passkey")):
        params["trained"] = {"batch": 4, "cfg": {"encoding": key.split("-")[1],
                                                 "n_heads": 2, "train_length": 32}}
    enc = key.split("-")[1] if not key.startswith("test-") else key.split("-")[2]
    return {"key": key, "seconds": seconds, "params": params, "digest": digest or key,
            "steps": steps, "encoding": enc}


def test_largest_difference_over_nested_numbers():
    a = {"128": {"target": 2.5, "chunks": [1.0, 2.0]}, "256": None}
    b = {"128": {"target": 2.25, "chunks": [1.0, 2.5]}, "256": None}
    assert largest_difference(a, b) == 0.5
    assert largest_difference(a, a) == 0.0
    assert largest_difference([1, 2], [1, 2, 3]) == float("inf")


def test_choose_takes_the_cheapest_of_every_kind_and_work_group_that_can_run():
    units = [
        unit("lm-rope-lr0.01-x7.07-s1", 50, digest="m1"),
        unit("lm-rope-lr0.01-x7.07-s2", 40, digest="m2"),
        unit("lm-alibi-lr0.01-x1-s1", 60, digest="a1"),   # its own work group
        unit("budget-rope-x0.5-s1", 45, digest="b1"),     # another kind, the group of m2
        unit("copy-rope-s1", 9),
        unit("copy-rope-s2", 7),
        unit("copy-t5-s2", 8),
        # evaluations: of the sampled model, of a model with cached weights, of neither
        unit("test-lm-rope-lr0.01-x7.07-s2", 30, model="m2"),
        unit("test-lm-rope-lr0.01-x7.07-s1", 5, model="m1"),
        # an evaluation of a group no runnable unit covers: it is taken with its model
        unit("test-lm-alibi-lr0.03-x1-s1", 5, model="a3"),
        unit("lm-alibi-lr0.03-x1-s1", 90, digest="a3"),
    ]
    got = choose(units, weights={"m9"})
    assert got == sorted(["lm-rope-lr0.01-x7.07-s2", "lm-alibi-lr0.01-x1-s1",
                          "budget-rope-x0.5-s1", "copy-rope-s2", "copy-t5-s2",
                          "test-lm-rope-lr0.01-x7.07-s2", "test-lm-alibi-lr0.03-x1-s1",
                          "lm-alibi-lr0.03-x1-s1"])


def test_split_balances_the_parts_and_keeps_a_model_with_its_readers():
    units = [unit("lm-rope-s1", 50, digest="m1"), unit("test-lm-rope-s1", 30, model="m1"),
             unit("lm-t5-s1", 70, digest="t1"), unit("copy-rope-s2", 20),
             unit("test-lm-t5-s9", 10, model="cached")]
    parts = split(units, 2)
    assert len(parts) == 2
    assert any({"lm-rope-s1", "test-lm-rope-s1"} <= set(p) for p in parts)
    assert sorted(k for p in parts for k in p) == sorted(u["key"] for u in units)
    assert split(units[:1], 3) == [["lm-rope-s1"]]  # no empty part


def test_recheck_refuses_bad_input(tmp_path):
    script = str(ROOT / "experiments" / "recheck.py")
    empty = subprocess.run([sys.executable, script, "--units", str(tmp_path)],
                           capture_output=True, text=True, timeout=120)
    assert empty.returncode == 2 and "no unit files there" in empty.stderr
    bad = subprocess.run([sys.executable, script, "--keys", "lm-xpos-s0"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--keys must name stored units" in bad.stderr
    jobs = subprocess.run([sys.executable, script, "--jobs", "0"],
                          capture_output=True, text=True, timeout=300)
    assert jobs.returncode == 2 and "--jobs must be >= 1, got 0" in jobs.stderr
    section = subprocess.run([sys.executable, script, "--section", "x"],
                             capture_output=True, text=True, timeout=300)
    assert section.returncode == 2 and "give --json too" in section.stderr
    both = subprocess.run([sys.executable, script, "--task-seeds", "--keys", "copy-rope-s1"],
                          capture_output=True, text=True, timeout=300)
    assert both.returncode == 2 and "give one of them" in both.stderr
    (tmp_path / "r.json").write_text("{}")
    nores = subprocess.run([sys.executable, script, "--task-seeds", "--results",
                            str(tmp_path / "r.json")], capture_output=True, text=True,
                           timeout=300)
    assert nores.returncode == 2 and "must have a 'copy' section" in nores.stderr


def test_task_seeds_are_the_runs_and_the_replaced_seeds_of_both_tasks():
    results = json.loads((ROOT / "experiments" / "results.json").read_text())
    keys = task_seeds(results)
    runs = [u["key"] for t in ("copy", "passkey") for u in results[t]["runs"]]
    assert set(runs) <= set(keys) and len(runs) == 60  # 6 encodings x 5 seeds x 2 tasks
    assert set(keys) - set(runs) == {u["key"] for u in results["passkey"]["replaced"]}
    with pytest.raises(ValueError, match="results must have a 'passkey' section"):
        task_seeds({"copy": {"runs": []}})
    u = json.loads((ROOT / "experiments" / "units" / "cpu" / "copy-rope-s1.json").read_text())
    assert outcome(u) == {"learned": u["learned"], "steps": u["steps"], "valid": u["valid"],
                          "test": u["test"]}


def test_write_keeps_the_other_sections_of_a_file(tmp_path):
    f = tmp_path / "rc.json"
    write(f, {"units": {"a": 1}}, None)
    write(f, {"units": {"b": 2}}, "second")
    assert json.loads(f.read_text()) == {"units": {"a": 1}, "second": {"units": {"b": 2}}}
    write(f, {"units": {"c": 3}}, "second")
    assert json.loads(f.read_text())["second"] == {"units": {"c": 3}}
    write(f, {"provenance": {"p": 1}, "units": {"d": 4}}, None)  # the top level again
    assert json.loads(f.read_text()) == {"provenance": {"p": 1}, "units": {"d": 4},
                                         "second": {"units": {"c": 3}}}


def test_work_group_refuses_an_evaluation_of_an_unknown_model_and_an_unknown_kind():
    with pytest.raises(ValueError, match=r"test-lm-rope-s1: the model it reads \('m9'\) must "
                                         "be among the stored units"):
        work_group({"key": "test-lm-rope-s1", "params": {"model": "m9"}}, {})
    with pytest.raises(ValueError, match="unit key must be of a kind with a known work group"):
        work_group({"key": "lmedge-rope-s1", "params": {}}, {})


@pytest.mark.parametrize("field", ["provenance", "units"])
def test_the_committed_recheck_has_its_sections(field):
    data = json.loads((ROOT / "experiments" / "recheck-cpu.json").read_text())
    assert data[field]


def test_rerun_seconds_times_each_unit_by_its_group_and_refuses_what_it_cannot_time():
    work = {"lm-a-s1": ["train-a", 800], "lm-a-s2": ["train-a", 1600],
            "copy-a-s1": ["copy-a", 300], "test-lm-a-s1": ["test-a", None]}
    rc = {"units": {
        "lm-a-s1": {"group": "train-a", "steps": 800, "seconds": 31.0, "train_seconds": 30.0},
        "copy-a-s1": {"group": "copy-a", "steps": 100, "seconds": 12.0, "train_seconds": 4.0},
        "copy-a-s2": {"group": "copy-a", "steps": 200, "seconds": 16.0, "train_seconds": 8.0},
        "test-lm-a-s1": {"group": "test-a", "steps": None, "seconds": 5.0},
    }}
    got = rerun_seconds({"unit_seconds": 999.0, "unit_work": work}, rc)
    # train-a: 30/800 s a step and 1 s besides; copy-a: 0.04 s a step and 8 s besides
    assert got["groups"] == pytest.approx({"copy-a": 20.0, "test-a": 5.0, "train-a": 92.0})
    assert got["kinds"] == pytest.approx({"copy": 20.0, "lm": 92.0, "test-lm": 5.0})
    assert got["rerun"] == pytest.approx(117.0) and got["stored"] == 999.0
    with pytest.raises(ValueError, match="unit_work"):
        rerun_seconds({"unit_seconds": 140.0}, rc)
    with pytest.raises(ValueError, match=r"a unit of every work group.*'passkey-a'"):
        rerun_seconds({"unit_work": {**work, "passkey-a-s1": ["passkey-a", 5]}}, rc)


def test_stacking_speed_rejects_bad_input(capsys):
    from experiments import stacking_speed as SS

    with pytest.raises(ValueError, match=r"steps must be an integer >= 1, got 0"):
        SS.measure(0)
    with pytest.raises(SystemExit):
        SS.main(["--steps", "0"])
    assert "--steps and --threads must be >= 1, got 0, 1" in capsys.readouterr().err


def _fake_rerun(results, flip=None):
    """A recheck report of every task seed whose re-run equals the stored one, except that
    unit ``flip`` learned the other way round."""
    units = {}
    for t in ("copy", "passkey"):
        for r in [*results[t]["runs"], *results[t]["replaced"]]:
            now = outcome(r)
            if r["key"] == flip:
                now = {**now, "learned": not r["learned"]}
            units[r["key"]] = {"outcome": {"stored": outcome(r), "now": now}}
    return {"units": units}


def test_task_rerun_puts_the_rerun_outcome_in_place_and_refuses_a_partial_one():
    from posenc.analysis.experiments import report as R
    from posenc.figures import experiments_pages as pf

    results = json.loads((ROOT / "experiments" / "results.json").read_text())
    flip = next(r for r in results["passkey"]["runs"]
                if r["encoding"] == "sinusoidal" and not r["learned"])
    again = R.task_rerun(results, _fake_rerun(results, flip["key"]))
    before = R.task_learned(results, "passkey", "sinusoidal")["k"]
    assert R.task_learned(again, "passkey", "sinusoidal")["k"] == before + 1
    assert R.task_learned(results, "passkey", "sinusoidal")["k"] == before  # not changed
    # the table shows the one changed count as "stored -> re-run", every other cell once
    table = pf.experiment_task_rerun_table(results, _fake_rerun(results, flip["key"]),
                                           "passkey")
    changed = [c for row in table.rows for c in row if "→" in c]
    assert changed[0] == f"{before}/5 → {before + 1}/5"
    same = pf.experiment_task_rerun_table(results, _fake_rerun(results), "copy")
    assert not any("→" in c for row in same.rows for c in row)
    partial = _fake_rerun(results)
    del partial["units"][flip["key"]]
    with pytest.raises(ValueError, match=f"{flip['key']} is not in it"):
        R.task_rerun(results, partial)
    other = _fake_rerun(results)
    other["units"][flip["key"]]["outcome"]["stored"]["steps"] += 1
    with pytest.raises(ValueError, match="not the one in these results"):
        R.task_rerun(results, other)
    with pytest.raises(ValueError, match="rerun must be a recheck report"):
        R.task_rerun(results, {"provenance": {}})
