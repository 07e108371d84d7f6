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


def test_sweep_table_and_the_shipped_configuration():
    """The committed run swept the kernel's configurations, ran its cases with the fastest
    one that keeps the accuracy goal, and that configuration is the one the code ships
    (posenc.torch._triton.CONFIG): the book's GPU numbers are the shipped kernel's."""
    from posenc.torch import _triton

    results = pf.load_gpu_results()
    assert {int(k): v for k, v in results["kernel_config"].items()} == _triton.CONFIG
    goal = {"bfloat16": 1e-2, "float32": 2e-7}
    for dtype, sw in results["sweep"].items():
        ok = [r for r in sw["rows"] if r["relerr"] <= goal[dtype]]
        assert sw["chosen"] == min(ok, key=lambda r: r["ms"])["config"]
        size = 2 if dtype == "bfloat16" else 4
        assert sw["chosen"] == _triton.CONFIG[size]
        table = str(pf.gpu_sweep_table(results, dtype))
        assert table.count("\n") == len(sw["rows"]) + 1  # header, rule, one line each
    h = pf.gpu_headlines(results)
    assert h["gpu_cfg_bf16_tile"] == _triton.CONFIG[2]["tile"]
    assert h["gpu_sweep_fp32_err_trig32"] <= 2e-7
    with pytest.raises(KeyError, match="no sweep"):
        pf.gpu_sweep_table(results, "float16")


def test_what_the_pages_say_of_the_committed_run():
    """The sentences of rope-in-practice and the benchmarks appendix, as the committed run
    must bear them out (a rerun that changes one fails here)."""
    h = pf.gpu_headlines(pf.load_gpu_results())
    # "the rotation costs what moving the data costs" (prefill and training batch)
    for case in ("qk_prefill_bf16", "qk_prefill_fp32", "qk_train_bf16", "qk_train_fp32"):
        assert h[f"gpu_{case}_posenc"] <= 1.05
        assert h[f"gpu_{case}_posenc_compiled"] <= 1.05  # inside torch.compile too
    # "the eager formula is an order of magnitude away"
    assert h["gpu_qk_prefill_bf16_rh_eager"] >= 5
    # float64 cosines "slower": in both dtypes, for at most the float32 error's gain
    for d in ("bf16", "fp32"):
        assert h[f"gpu_sweep_{d}_trig64"] > 1.5 * h[f"gpu_sweep_{d}_trig32"]
    assert h["gpu_sweep_fp32_err_trig64"] <= h["gpu_sweep_fp32_err_trig32"] <= 2e-7
    # "one launch for queries and keys can beat the copy's two" (a decoding step)
    assert h["gpu_decode_bf16_posenc_inplace_ms"] < h["gpu_decode_bf16_copy_ms"]
    # "rounding once pays in bfloat16"
    assert h["gpu_qk_prefill_bf16_err_posenc"] < h["gpu_qk_prefill_bf16_err_liger"] \
        < h["gpu_qk_prefill_bf16_err_rh_eager"]
