"""The GPU tier of the benchmarks (benchmarks/gpu.py) works before it meets a GPU.

On a machine without one it runs at tiny sizes on the CPU (the fused kernel under Triton's
interpreter where a case asks for it), and must write a results file whose every case has
its copy_ yardstick, its ratios and posenc's accuracy against float64.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_harness_runs_on_cpu_at_tiny_sizes(tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu.py", "--device", "cpu", "--quick", "--out",
         str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((tmp_path / "results-gpu-cpu.json").read_text())
    assert data["schema"] == 1 and data["device"] == "cpu" and data["quick"]
    assert set(data["cases"]) == {c[0] for c in __import__("benchmarks.gpu").gpu.CASES}
    for cid, case in data["cases"].items():
        rows = case["rows"]
        assert case["ratios"]["copy_"] == 1.0
        posenc_rows = [n for n in rows if n.startswith("posenc") and "relerr" in rows[n]]
        assert posenc_rows, cid
        tol = 1e-6 if case["dtype"] == "float32" else 1e-2
        for n in posenc_rows:
            assert rows[n]["relerr"] < tol, (cid, n, rows[n])
    md = (tmp_path / "results-gpu-cpu.md").read_text()
    assert "x copy_" in md and "qk_prefill_bf16" in md
