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

from experiments.recheck import choose, largest_difference  # noqa: E402
from posenc.analysis.experiments.report import rerun_seconds  # noqa: E402


def unit(key, seconds, model=None, digest=None):
    params = {"unit": key} if model is None else {"unit": key, "model": model}
    return {"key": key, "seconds": seconds, "params": params, "digest": digest or key}


def test_largest_difference_over_nested_numbers():
    a = {"128": {"target": 2.5, "chunks": [1.0, 2.0]}, "256": None}
    b = {"128": {"target": 2.25, "chunks": [1.0, 2.5]}, "256": None}
    assert largest_difference(a, b) == 0.5
    assert largest_difference(a, a) == 0.0
    assert largest_difference([1, 2], [1, 2, 3]) == float("inf")


def test_choose_takes_the_cheapest_of_every_kind_that_can_run():
    units = [
        unit("lm-rope-lr0.01-x7.07-s1", 50, digest="m1"),
        unit("lm-rope-lr0.01-x7.07-s2", 40, digest="m2"),
        unit("copy-rope-s1", 9),
        unit("copy-rope-s2", 7),
        # evaluations: of the sampled model, of a model with cached weights, of neither
        unit("test-lm-rope-lr0.01-x7.07-s2", 30, model="m2"),
        unit("test-lm-rope-lr0.01-x7.07-s1", 5, model="m1"),
        unit("scale-yarn-s1", 1, model="m1"),
        unit("scale-yarn-s3", 2, model="m3"),
    ]
    got = choose(units, weights={"m3"})
    assert got == sorted(["lm-rope-lr0.01-x7.07-s2", "copy-rope-s2",
                          "test-lm-rope-lr0.01-x7.07-s2", "scale-yarn-s3"])


def test_recheck_refuses_bad_input(tmp_path):
    script = str(ROOT / "experiments" / "recheck.py")
    empty = subprocess.run([sys.executable, script, "--units", str(tmp_path)],
                           capture_output=True, text=True, timeout=120)
    assert empty.returncode == 2 and "no unit files there" in empty.stderr
    bad = subprocess.run([sys.executable, script, "--keys", "lm-xpos-s0"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--keys must name stored units" in bad.stderr


@pytest.mark.parametrize("field", ["provenance", "units"])
def test_the_committed_recheck_has_its_sections(field):
    data = json.loads((ROOT / "experiments" / "recheck-cpu.json").read_text())
    assert data[field]


def test_rerun_seconds_scales_each_kind_and_refuses_what_it_cannot_scale():
    rc = {"units": {"lm-a-s1": {"stored_seconds": 20.0, "seconds": 10.0},
                    "test-lm-a-s1": {"stored_seconds": 4.0, "seconds": 1.0}}}
    got = rerun_seconds({"kind_seconds": {"lm": 100.0, "test-lm": 40.0}}, rc)
    assert got == {"stored": 140.0, "rerun": 60.0, "ratios": {"lm": 0.5, "test-lm": 0.25}}
    with pytest.raises(ValueError, match="kind_seconds"):
        rerun_seconds({"unit_seconds": 140.0}, rc)
    with pytest.raises(ValueError, match=r"a unit of every kind.*'copy'"):
        rerun_seconds({"kind_seconds": {"lm": 1.0, "copy": 1.0}}, rc)
    zero = {"units": {"lm-a-s1": {"stored_seconds": 0.0, "seconds": 1.0}}}
    with pytest.raises(ValueError, match="stored_seconds > 0"):
        rerun_seconds({"kind_seconds": {"lm": 1.0}}, zero)
