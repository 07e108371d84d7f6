"""The GPU benchmark pages' functions (posenc.figures.gpu_bench_pages)."""

from __future__ import annotations

import json

import pytest

import posenc.figures as pf
from posenc.figures import gpu_bench_pages


def test_committed_results_render_in_both_languages():
    results = pf.load_gpu_results()
    assert results is not None and results["device"] == "cuda"
    for lang in ("en", "zh"):
        pf.set_language(lang)
        try:
            for case in results["cases"]:
                table = pf.gpu_bench_table(results, case)
                assert "copy_" in str(table) and "tiles " not in str(table)
            line = pf.gpu_machine_line(results)
            assert results["machine"]["device_name"] in line
        finally:
            pf.set_language("en")
    h = pf.gpu_headlines(results)
    assert all(type(v) is float for v in h.values())
    assert h["gpu_qk_prefill_bf16_posenc"] == pytest.approx(
        results["cases"]["qk_prefill_bf16"]["ratios"]["posenc RotaryEmbedding"])


def test_no_results_is_said_not_raised():
    assert gpu_bench_pages.gpu_headlines(None) == {}
    assert "results-gpu.json" in str(gpu_bench_pages.gpu_bench_table(None, "qk_prefill_bf16"))
    assert "nox -s bench" in gpu_bench_pages.gpu_machine_line(None)


def test_bad_files_are_refused(tmp_path):
    quick = tmp_path / "quick.json"
    quick.write_text(json.dumps({"schema": 1, "device": "cuda", "quick": True}))
    with pytest.raises(ValueError, match="--quick"):
        gpu_bench_pages.load_gpu_results(quick)
    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps({"schema": 1, "device": "cpu"}))
    with pytest.raises(ValueError, match="not a GPU results file"):
        gpu_bench_pages.load_gpu_results(cpu)
    with pytest.raises(KeyError, match="no case"):
        pf.gpu_bench_table(pf.load_gpu_results(), "nope")
