"""The benchmark harness: its reference implementations, its counters, its results file.

The benchmarks compare posenc with other people's formulas; the comparison means
something only if those formulas compute the same rotation.  These tests check that
(against posenc and against a float64 reference), that the memory-traffic counter and
the interleaved timer do what their docstrings say, that the committed
``benchmarks/results.json`` has the schema the page and ``results.md`` read, that the
floors' PASS/FAIL follows from the numbers, and that the page's tables and figure
render from the committed file in both languages.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import posenc  # noqa: E402
from benchmarks import build, peers, report, run, timing, traffic  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results.json"
ROPE_PEERS = [c for c in peers.CANDIDATES if c.kind in ("peer", "prototype")]


# -- the reference implementations agree with posenc ------------------------------------

shapes = st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 40),
                   st.integers(2, 8).map(lambda k: 2 * k))  # d >= 4: rotary-embedding-torch divides by d - 2


@pytest.mark.parametrize("cand", ROPE_PEERS, ids=lambda c: c.name)
@settings(max_examples=15, deadline=None)
@given(shape=shapes, base=st.sampled_from([100.0, 10000.0, 500000.0]))
def test_rope_peers_match_posenc_and_float64(cand, shape, base):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1), dtype=torch.float32)
    got = cand.factory(shape, torch.float32, base)(x)
    ref = peers.reference_rope(x, cand.layout, base)
    ours = posenc.apply_rope(x, base=base, layout=cand.layout)
    assert got.shape == x.shape and got.dtype == x.dtype
    # rotary-embedding-torch forms its angles in float32, the others in float64.
    tol = 5e-5 if cand.name == "rotary_embedding_torch" else 2e-6
    torch.testing.assert_close(got.double(), ref, atol=tol, rtol=0)
    torch.testing.assert_close(got, ours, atol=tol, rtol=0)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_posenc_and_prototypes_agree_in_each_dtype(layout, dtype):
    shape = (1, 2, 33, 16)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2)).to(dtype)
    ref = peers.reference_rope(x, layout)
    tol = 2e-6 if dtype == torch.float32 else 2e-2
    for name in (f"posenc_{layout}", f"fused_{layout}"):
        got = peers.BY_NAME[name].factory(shape, dtype)(x)
        assert got.dtype == dtype, name
        torch.testing.assert_close(got.double(), ref, atol=tol, rtol=tol, msg=name)


def test_the_two_layouts_are_a_permutation_of_each_other():
    """The half layout of x is the interleaved layout of x with its features reordered."""
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    perm = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7])  # interleaved index -> half index
    half = peers.reference_rope(x, "half")
    inter = peers.reference_rope(x[..., perm], "interleaved")
    torch.testing.assert_close(inter, half[..., perm])


def test_rotate_half_formula_is_hugging_faces():
    transformers = pytest.importorskip("transformers.models.llama.modeling_llama")
    x = torch.randn(1, 2, 9, 8)
    fn = peers.rotate_half_factory(x.shape, x.dtype)
    ang = peers._angles(9, 8, 10000.0)
    emb = torch.cat((ang, ang), -1)
    q, _ = transformers.apply_rotary_pos_emb(x, x, emb.cos().float()[None], emb.sin().float()[None])
    torch.testing.assert_close(fn(x), q)


@settings(max_examples=10, deadline=None)
@given(length=st.integers(1, 12), half_d=st.integers(1, 6))
def test_sinusoidal_loop_matches_posenc(length, half_d):
    d = 2 * half_d
    np.testing.assert_allclose(peers.sinusoidal_loop(length, d),
                               posenc.sinusoidal_encoding(length, d), atol=1e-12, rtol=0)


def test_reference_rope_rejects_unknown_layout():
    with pytest.raises(ValueError, match="layout"):
        peers.reference_rope(torch.zeros(1, 2, 4), "diagonal")


# -- the memory-traffic counter -----------------------------------------------------------


def test_traffic_of_clone_is_one_read_and_one_write():
    x = torch.randn(4, 64, 32)
    t = traffic.measure_traffic(lambda x: x.clone(), x)
    assert (t.read, t.written) == (x.nbytes, x.nbytes)


def test_traffic_counts_views_as_free_and_broadcast_tables_once():
    x = torch.randn(4, 64, 32)
    table = torch.randn(64, 32)
    t = traffic.measure_traffic(lambda x: x.unflatten(-1, (16, 2)).flatten(-2) * table, x)
    assert [k[0] for k in t.kernels] == ["mul.Tensor"]
    assert t.read == x.nbytes + table.nbytes and t.written == x.nbytes


def test_traffic_of_in_place_and_out_ops():
    x = torch.randn(1000)
    out = torch.empty(1000)

    def fn(x):
        torch.mul(x, 2.0, out=out)  # reads x, writes out
        out.add_(x)  # reads out and x, writes out
        return out

    t = traffic.measure_traffic(fn, x)
    n = x.nbytes
    assert t.written == 2 * n and t.read == 3 * n  # Python scalars are not tensors


def test_traffic_of_the_rotate_half_formula_is_ten_passes():
    shape = (1, 4, 128, 64)
    x = torch.randn(shape)
    t = traffic.measure_traffic(peers.rotate_half_factory(shape, x.dtype), x)
    tables = 2 * 128 * 64 * 4
    assert t.total == 10 * x.nbytes + tables


# -- timing ----------------------------------------------------------------------------------


def test_paired_ratio_is_the_median_of_per_round_ratios():
    assert timing.paired_ratio([2.0, 30.0, 4.0], [1.0, 10.0, 1.0]) == 3.0
    with pytest.raises(ValueError, match="equal"):
        timing.paired_ratio([1.0], [1.0, 2.0])


def test_summarize_quartiles():
    s = timing.summarize([1.0, 2.0, 3.0, 4.0, 5.0], calls=5)
    assert (s.median, s.q1, s.q3, s.iqr, s.n_blocks) == (3.0, 2.0, 4.0, 2.0, 5)
    with pytest.raises(ValueError, match="times"):
        timing.summarize([], calls=0)


def test_time_interleaved_runs_every_candidate_in_every_round():
    seen = []
    fns = {name: (lambda x, name=name: seen.append(name)) for name in "abc"}
    out = timing.time_interleaved(fns, None, rounds=3, block_s=1e-4, warmup_s=1e-4)
    assert set(out) == set("abc") and all(s.median > 0 for s in out.values())
    assert {seen.count(n) > 3 for n in "abc"} == {True}
    with pytest.raises(ValueError, match="rounds"):
        timing.time_interleaved(fns, None, rounds=0)


# -- floors ----------------------------------------------------------------------------------


def _case(times: dict, traffic_per_input: dict | None = None) -> dict:
    cands = []
    for name, t in times.items():
        c = {"name": name, "layout": peers.BY_NAME[name].layout,
             "kind": peers.BY_NAME[name].kind,
             "time": {"median": t, "rounds": [t, 1.1 * t, 0.9 * t]}}
        if traffic_per_input and name in traffic_per_input:
            c["bytes_moved_per_input_byte"] = traffic_per_input[name]
        cands.append(c)
    return {"id": "c", "candidates": cands}


def test_floors_pass_and_fail_as_the_numbers_say():
    good = _case({"clone": 1.0, "posenc_interleaved": 1.2, "posenc_half": 1.3,
                  "rotate_half": 4.0, "complex": 1.3, "rotary_embedding_torch": 6.0})
    floors = {f["id"]: f for f in run.evaluate_floors([good])}
    assert all(f["passed"] for f in floors.values())
    assert math.isclose(floors["half_vs_rotate_half"]["value"], 4.0 / 1.3)
    # Within the tie tolerance of a peer is not slower; the rule compares every posenc
    # layout with every peer, whatever the peer's layout.
    tie = _case({"clone": 1.0, "posenc_interleaved": 1.3, "posenc_half": 1.3,
                 "rotate_half": 4.0, "complex": 1.25, "rotary_embedding_torch": 6.0})
    assert {f["id"]: f for f in run.evaluate_floors([tie])}["posenc_vs_peers"]["passed"]
    cross = _case({"clone": 1.0, "posenc_interleaved": 1.0, "posenc_half": 2.0,
                   "rotate_half": 4.0, "complex": 1.0, "rotary_embedding_torch": 6.0})
    f = {f["id"]: f for f in run.evaluate_floors([cross])}["posenc_vs_peers"]
    assert not f["passed"] and f["worst_pair"] == ["posenc_half", "complex"]
    assert f["same_layout_worst"][0] <= 1.0
    bad = _case({"clone": 1.0, "posenc_interleaved": 1.4, "posenc_half": 3.0,
                 "rotate_half": 4.0, "complex": 1.3, "rotary_embedding_torch": 6.0})
    floors = {f["id"]: f for f in run.evaluate_floors([bad])}
    assert not any(f["passed"] for f in floors.values())
    assert floors["posenc_vs_peers"]["worst_pair"] == ["posenc_half", "complex"]


def test_in_place_and_out_floors_take_the_better_of_the_two_against_copy():
    times = {"clone": 4.0, "copy_into": 1.0, "posenc_interleaved": 4.2, "posenc_half": 5.0,
             "rotate_half": 9.0, "complex": 4.2, "rotary_embedding_torch": 20.0,
             "posenc_interleaved_out": 1.6, "posenc_interleaved_inplace": 1.2,
             "posenc_half_out": 2.4, "posenc_half_inplace": 2.7}
    case = {**_case(times), "dtype": "float32"}
    floors = {f["id"]: f for f in run.evaluate_floors([case])}
    inter, half = floors["interleaved_into_vs_copy"], floors["half_into_vs_copy"]
    assert inter["measured_by"] == "posenc_interleaved_inplace" and inter["passed"]
    assert math.isclose(inter["value"], 1.2) and inter["threshold"] == 1.5
    assert inter["best_alternative"] == "posenc_interleaved_out"
    assert half["measured_by"] == "posenc_half_out" and half["passed"]
    assert math.isclose(half["value"], 2.4) and half["threshold"] == 2.5
    # bfloat16 has its own limit (3x for both layouts)
    times.update(posenc_interleaved_out=3.5, posenc_interleaved_inplace=3.1)
    floors = {f["id"]: f for f in run.evaluate_floors([{**_case(times), "dtype": "bfloat16"}])}
    assert not floors["interleaved_into_vs_copy"]["passed"]
    assert floors["half_into_vs_copy"]["passed"] and floors["half_into_vs_copy"]["threshold"] == 3
    # results without those candidates (written before the in-place floors) get no such floor
    old = {k: v for k, v in times.items() if "_out" not in k and "inplace" not in k}
    assert len(run.evaluate_floors([{**_case(old), "dtype": "float32"}])) == 3


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_in_place_and_out_candidates_compute_rope_and_leave_x_alone(layout, dtype):
    shape = (1, 2, 33, 16)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2)).to(dtype)
    before = x.clone()
    want = posenc.apply_rope(x, layout=layout)
    for name in (f"posenc_{layout}_out", f"posenc_{layout}_inplace"):
        fn = peers.BY_NAME[name].factory(shape, dtype)
        assert torch.equal(fn(x), want), name
        assert torch.equal(x, before), name
    # the in-place candidate rotates its private copy again on every later call
    fn = peers.BY_NAME[f"posenc_{layout}_inplace"].factory(shape, dtype)
    fn(x)
    torch.testing.assert_close(fn(x), posenc.apply_rope(want, layout=layout))


# -- the build log parser ------------------------------------------------------------------


def test_parse_log_finds_executed_and_cached_pages():
    log = (
        "reading sources... [ 50%] rope\n"
        "/tmp/x/docs/en/rope.md: Executing notebook using local CWD [mystnb]\n"
        "/tmp/x/docs/en/rope.md: Executed notebook in 3.25 seconds [mystnb]\n"
        "reading sources... [100%] sinusoidal\n"
        "/tmp/x/docs/en/sinusoidal.md: Using cached notebook: ID=2 [mystnb]\n"
    )
    out = build.parse_log(log)
    assert out == {"read": ["rope", "sinusoidal"], "executed": {"rope": 3.25},
                   "cached": ["sinusoidal"]}


# -- the committed results -------------------------------------------------------------------


@pytest.fixture(scope="module")
def results() -> dict:
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def test_results_schema(results):
    assert results["schema"] == run.SCHEMA and not results.get("quick")
    m = results["machine"]
    for key in ("cpu_model", "logical_cpus", "torch_threads", "versions", "load_average_start"):
        assert key in m, key
    assert m["torch_threads"] == run.THREADS
    assert m["versions"]["torch"].startswith("2.13.0")
    assert {c["id"] for c in results["rope"]} == {c["id"] for c in run.ROPE_CASES}
    for case in results["rope"]:
        names = {c["name"] for c in case["candidates"]}
        required = {c.name for c in peers.CANDIDATES if c.kind != "compiled"}
        if not any("vs_copy" in c for c in case["candidates"]):
            # written by the harness before the in-place floors (no copy_ ratios, no in-place/out=
            # candidates); results from the current harness must have them all
            required -= {c.name for c in peers.CANDIDATES if c.kind == "posenc_into"}
        assert required <= names
        for c in case["candidates"]:
            if "time" not in c:
                assert c["kind"] == "compiled" and "error" in c
                continue
            t = c["time"]
            assert 0 < t["min"] <= t["q1"] <= t["median"] <= t["q3"] <= t["max"]
            assert math.isclose(t["iqr"], t["q3"] - t["q1"])
            clone_rounds = _cand(case, "clone")["time"]["rounds"]
            assert len(t["rounds"]) == case["rounds"]
            assert math.isclose(c["vs_clone"], timing.paired_ratio(t["rounds"], clone_rounds))
            if c["layout"] != "-":
                assert c["max_abs_error"] < (1e-2 if case["dtype"] == "float32" else 0.1)
    assert [(s["seq_len"], s["d_model"]) for s in results["sinusoidal"]] == [
        (L, d) for L, d, _ in run.SIN_CASES]
    for s in results["sinusoidal"]:
        assert s["max_abs_difference"] < 1e-9
        assert math.isclose(s["speedup"], s["loop"]["median"] / s["posenc"]["median"])


def _cand(case, name):
    return next(c for c in case["candidates"] if c["name"] == name)


def test_committed_floors_follow_from_the_committed_times(results):
    assert run.evaluate_floors(results["rope"]) == results["floors"]
    # three per case, and two more (in place or out= against copy_) for each
    # case that timed those candidates
    into = sum(any(c["kind"] == "posenc_into" for c in case["candidates"])
               and case["dtype"] in run.FLOOR_INTO_VS_COPY for case in results["rope"])
    assert len(results["floors"]) == 3 * len(results["rope"]) + 2 * into


def test_results_md_is_rendered_from_results_json(results):
    md = (ROOT / "benchmarks" / "results.md").read_text(encoding="utf-8")
    assert md == report.write_markdown(results)
    assert md.count("PASS") + md.count("FAIL") >= len(results["floors"])


def test_the_harness_runs_end_to_end(tmp_path):
    """A tiny run (small shapes, one round, no compiler, no subprocesses) writes both files."""
    assert run.main(["--quick", "--out", str(tmp_path)]) == 0
    out = json.loads((tmp_path / "results.json").read_text())
    assert out["quick"] and out["rope"][0]["candidates"][0]["name"] == "clone"
    assert "| posenc, half |" in (tmp_path / "results.md").read_text()
    # both yardsticks for every path, and the in-place/out= floors
    for c in out["rope"][0]["candidates"]:
        assert c["vs_clone"] > 0 and c["vs_copy"] > 0
    ids = {f["id"] for f in out["floors"]}
    assert {"interleaved_into_vs_copy", "half_into_vs_copy"} <= ids
    md = (tmp_path / "results.md").read_text()
    assert "| posenc, half, in place |" in md and "time ÷ copy_" in md


# -- the appendix page renders from the committed file ---------------------------------------

pf = pytest.importorskip("posenc.figures")
from posenc.figures import bench_pages  # noqa: E402


def _prose_glue_keys(page: Path) -> set[str]:
    import re

    return set(re.findall(r"\{glue:text\}`([\w]+)", page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_page_renders_from_the_committed_results(lang, results):
    pf.set_language(lang)
    try:
        headlines = bench_pages.bench_headlines(results)
        from posenc.figures import gpu_bench_pages

        gpu = gpu_bench_pages.gpu_headlines(gpu_bench_pages.load_gpu_results())
        missing = (_prose_glue_keys(ROOT / "docs" / lang / "benchmarks.md") - set(headlines)
                   - set(gpu))
        assert not missing, f"glued in the prose but not computed: {sorted(missing)}"
        for key, value in headlines.items():
            assert type(value) in (int, float), key  # plain Python numbers for glue
        fig = bench_pages.bench_ratio_figure(results)
        assert len(fig.axes) == len(results["rope"])
        tables = [bench_pages.bench_machine_table(results), bench_pages.bench_floor_table(results),
                  bench_pages.bench_sinusoidal_table(results),
                  bench_pages.bench_cold_table(results, "fp32_2048"),
                  bench_pages.bench_arithmetic_table(results, "fp32_2048")]
        tables += [bench_pages.bench_rope_table(results, c["id"]) for c in results["rope"]]
        # The page shows the build table, so the committed results must hold a build run.
        assert results.get("build"), "results.json has no build benchmark: run.py --build"
        tables.append(bench_pages.bench_build_table(results))
        assert results["build"].get("previous"), "no side-by-side build comparison"
        tables.append(bench_pages.bench_yardstick_table(results))
        tables.append(bench_pages.bench_build_comparison_table(results))
        fig = bench_pages.bench_ratio_figure(results, yardstick="copy_into")
        assert len(fig.axes) == len(results["rope"])
        for table in tables:
            assert table._repr_markdown_().startswith("| ")
            assert results["date"][:10] not in table  # no date on the page
        floor_md = bench_pages.bench_floor_table(results)
        status = ("PASS", "FAIL") if lang == "en" else ("通过", "未通过")
        n_status = sum(floor_md.count(f"**{s}**") for s in status)  # 通过 is inside 未通过
        assert n_status == len(results["floors"])
        # the in-place goals: one status per case and layout that timed them
        into = [f for f in results["floors"] if f["id"].endswith("_into_vs_copy")]
        assert into, "results.json has no in-place/out= floors"
        yard = bench_pages.bench_yardstick_table(results)
        assert sum(yard.count(f"**{s}**") for s in status) == len(into)
        comparison = bench_pages.bench_build_comparison_table(results)
        assert sum(comparison.count(f"**{s}**") for s in status) == len(
            results["build"]["goals"])
        if lang == "zh":
            assert "实现" in tables[-1] or "构建" in tables[-1]
    finally:
        pf.set_language("en")


def test_load_bench_results_finds_the_file_from_a_page_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("POSENC_BENCH_RESULTS", raising=False)
    monkeypatch.chdir(ROOT / "docs" / "zh")  # where a page executes
    assert bench_pages.load_bench_results()["schema"] == 1
    monkeypatch.chdir(tmp_path)  # elsewhere: the file next to the posenc package
    assert bench_pages.load_bench_results()["schema"] == 1
    other = tmp_path / "r.json"
    other.write_text(json.dumps({"schema": 99}))
    monkeypatch.setenv("POSENC_BENCH_RESULTS", str(other))
    with pytest.raises(ValueError, match="schema"):
        bench_pages.load_bench_results()
    with pytest.raises(FileNotFoundError):
        bench_pages.load_bench_results(tmp_path / "missing.json")


def test_bench_pages_reject_bad_arguments(results):
    with pytest.raises(ValueError, match="case_id"):
        bench_pages.bench_rope_table(results, "fp64_1")
    with pytest.raises(ValueError, match="case_ids"):
        bench_pages.bench_ratio_figure(results, [])
    with pytest.raises(ValueError, match="yardstick must be 'clone' or 'copy_into'"):
        bench_pages.bench_ratio_figure(results, yardstick="copy")
    with pytest.raises(ValueError, match="case_id"):
        bench_pages.bench_yardstick_table(results, ["fp64_1"])
    assert "nox -s bench" in bench_pages.bench_build_comparison_table({**results, "build": None})
    assert "nox -s bench" in bench_pages.bench_build_table({**results, "build": None})
    with pytest.raises(ValueError, match="first-call"):
        bench_pages.bench_cold_table(results, "fp32_16384")
    with pytest.raises(ValueError, match="results"):
        bench_pages.bench_headlines({"schema": 1})
