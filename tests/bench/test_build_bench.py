"""The build benchmark's bookkeeping (benchmarks/build.py) and the parallel build driver
(tools/build_site.py): goals from numbers, memo and dependency summaries, the edit the
benchmark makes, and a failing language failing the build with its output shown."""

from __future__ import annotations

import ast
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tools"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from benchmarks import build  # noqa: E402

import build_site  # noqa: E402


def _step(name, seconds, cpu, executed=("a",)):
    return {"step": name, "seconds": seconds, "cpu_seconds": cpu,
            "languages": {lang: {"seconds": seconds, "cpu_seconds": cpu / 2,
                                 "executed": {p: 1.0 for p in executed}, "read": [],
                                 "cached": []} for lang in ("en", "zh")}}


def test_goals_follow_from_the_numbers():
    previous = {"cold": _step("cold", 100.0, 90.0), "warm": _step("warm", 9.0, 8.0),
                "analysis": _step("analysis", 100.0, 90.0)}
    current = {"cold": _step("cold", 60.0, 80.0), "warm": _step("warm", 10.5, 7.0),
               "analysis": _step("analysis", 49.0, 20.0)}
    goals = {g["step"]: g for g in build.evaluate_goals(current, previous)}
    assert goals["cold"]["value"] == pytest.approx(0.6) and goals["cold"]["passed"]
    assert goals["cold"]["cpu_ratio"] == pytest.approx(80 / 90)
    assert goals["warm"]["value"] == 10.5 and not goals["warm"]["passed"]
    assert goals["analysis"]["value"] == pytest.approx(0.49) and goals["analysis"]["passed"]
    current["cold"] = _step("cold", 60.5, 80.0)
    assert not {g["step"]: g for g in build.evaluate_goals(current, previous)}["cold"]["passed"]


def test_memo_summary_and_module_dependents(tmp_path):
    memo = tmp_path / "memo"
    memo.mkdir()
    assert build.memo_summary(memo)["hits"] == 0
    events = [{"function": "f", "event": "miss", "seconds": 2.0},
              {"function": "f", "event": "hit", "seconds": 2.0},
              {"function": "g", "event": "hit", "seconds": 0.5}]
    (memo / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert build.memo_summary(memo) == {"hits": 2, "misses": 1, "seconds_saved": 2.5,
                                        "seconds_computed": 2.0}
    deps = tmp_path / "deps.json"
    deps.write_text(json.dumps({"format": 2, "pages": {
        "p1": {"hashkey": "x", "deps": {"posenc/a.py": "1", "posenc/b.py": "2"}},
        "p2": {"hashkey": "y", "deps": {"posenc/a.py": "1"}}}}))
    assert build.module_dependents(deps) == {"posenc/a.py": ["p1", "p2"], "posenc/b.py": ["p1"]}


def test_comparison_markdown_has_the_three_steps_and_the_goals():
    prev = [_step("cold", 100.0, 90.0, "abcd"), _step("warm", 9.0, 8.0, ""),
            _step("analysis", 100.0, 90.0, "abcd")]
    cur = {"cold": _step("cold", 55.0, 80.0, "abcd"), "warm": _step("warm", 5.0, 6.0, ""),
           "analysis": _step("analysis", 20.0, 15.0, "ab")}
    b = {"previous": {"commit": "60762bb", "configuration": "sequential", "steps": prev},
         "steps": [cur["cold"], cur["warm"]], "analysis_step": cur["analysis"],
         "goals": build.evaluate_goals(cur, {s["step"]: s for s in prev}),
         "memo_cold": {"hits": 3, "misses": 3, "seconds_saved": 4.0, "seconds_computed": 4.5},
         "module_dependents": {"posenc/a.py": ["a", "b", "c", "d"], "posenc/u.py": ["a"]}}
    md = build.comparison_markdown(b)
    assert "| cold | 100.0 | 55.0 | 0.55 |" in md
    assert "| analysis | 100.0 | 20.0 | 0.20 |" in md and "8 / 4" in md
    assert md.count("PASS") == 3 and "3 hits saved 4.0 s" in md
    assert "| `posenc/a.py` | 4: all |" in md and "| `posenc/u.py` | 1: a |" in md


def test_the_analysis_edit_changes_one_docstring_only(tmp_path):
    target = tmp_path / build.ANALYSIS_FILE
    target.parent.mkdir(parents=True)
    shutil.copy(ROOT / build.ANALYSIS_FILE, target)
    before = ast.parse(target.read_text())
    edited = build._edit_analysis(tmp_path)
    after = ast.parse(target.read_text())
    name = edited.rsplit(":", 1)[1]
    docs = {n.name: ast.get_docstring(n) for n in ast.walk(after)
            if isinstance(n, ast.FunctionDef)}
    assert docs[name].startswith("Edited by the build benchmark.")
    strip = [ast.dump(n) for n in ast.walk(before) if isinstance(n, ast.FunctionDef)
             and n.name != name]
    assert strip == [ast.dump(n) for n in ast.walk(after) if isinstance(n, ast.FunctionDef)
                     and n.name != name]


def test_a_failing_language_fails_the_build_and_shows_its_output(monkeypatch, capsys):
    def fake_build(builder, extra, **kw):
        return {"builder": builder, "parallel": True, "wall_seconds": 2.0, "languages": {
            "en": {"seconds": 1.0, "cpu_seconds": 1.0, "returncode": 0, "output": "fine\n"},
            "zh": {"seconds": 2.0, "cpu_seconds": 1.0, "returncode": 2,
                   "output": "docs/zh/x.md:3: WARNING: something broke\n"}}}

    monkeypatch.setattr(build_site, "build", fake_build)
    assert build_site.main(["-b", "doctest"]) == 1
    out = capsys.readouterr()
    assert "for zh failed (exit 2)" in out.out and "something broke" in out.out
    assert "build failed: zh" in out.err


def test_parallel_runs_overlap_and_report_exit_status_and_cpu(monkeypatch):
    """Two real processes: one fails, both outputs are kept, the two ran at once."""
    code = ("import sys, time; t = time.time(); print('start', t, flush=True); "
            "time.sleep(1.0); print('end', sys.argv[-1]); sys.exit(3 if 'zh' in sys.argv[-1] "
            "else 0)")
    monkeypatch.setattr(build_site, "_command",
                        lambda builder, lang, out, extra, quiet: [sys.executable, "-c", code,
                                                                   f"docs/{lang}"])
    result = build_site.build("html", echo=False)
    langs = result["languages"]
    assert langs["en"]["returncode"] == 0 and langs["zh"]["returncode"] == 3
    assert "end docs/zh" in langs["zh"]["output"]
    assert result["wall_seconds"] < langs["en"]["seconds"] + langs["zh"]["seconds"] - 0.5
    assert all(r["cpu_seconds"] >= 0 for r in langs.values())
    seq = build_site.build("html", echo=False, sequential=True)
    assert seq["wall_seconds"] >= 2.0
