#!/usr/bin/env bash
# One call on a borrowed GPU machine (one H100; nothing there reaches the network):
#   1. the fused kernel's tests compiled on CUDA (tests/encodings/test_fused.py, TRITON_INTERPRET=0)
#   2. the GPU tier of the benchmarks, its kernel-configuration sweep first
#      (benchmarks/gpu.py -> $OUT/results-gpu.{json,md})
#   3. a profile of the compiled decoding step (tools/gpu_profile.py -> $OUT/profile.txt)
#   4. optionally the GPU tier of the experiments, for the seconds given (experiments/run.py;
#      it needs the prepared corpus, carried: python experiments/run.py --save-corpus
#      experiments/.corpus/sympy.npz), into $OUT/exp
# Everything lands in $OUT as it finishes, so a call cut short keeps what it did.
# Usage there: OUT=/some/dir bash tools/device_call.sh [experiments seconds, default 0]
# Optional: .whl/*.whl (e.g. liger-kernel, a peer of the benchmarks) installed first.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_INTERPRET=0
export POSENC_COMMIT=${POSENC_COMMIT:-$(cat .device_commit 2>/dev/null || echo unknown)}
EXP_S=${1:-0}
t0=$(date +%s)
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"
} > "$OUT/machine.txt" 2>&1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
echo "== 1. fused kernel tests on CUDA" | tee "$OUT/log.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/encodings/test_fused.py 2>&1 | tail -25 | tee -a "$OUT/log.txt"
echo "== 2. GPU benchmarks ($(( $(date +%s) - t0 )) s in)" | tee -a "$OUT/log.txt"
timeout 330 python3 benchmarks/gpu.py --out "$OUT" --budget 250 2>&1 | tee -a "$OUT/log.txt" | tail -120
echo "== 3. profile of the compiled decoding step ($(( $(date +%s) - t0 )) s in)" | tee -a "$OUT/log.txt"
timeout 90 python3 tools/gpu_profile.py > "$OUT/profile.txt" 2>&1; tail -40 "$OUT/profile.txt"
echo "== 4. experiments, ${EXP_S} s budget ($(( $(date +%s) - t0 )) s in)" | tee -a "$OUT/log.txt"
if [ "$EXP_S" -gt 0 ] && [ -f experiments/.corpus/sympy.npz ]; then
  mkdir -p "$OUT/exp"
  timeout $(( EXP_S + 60 )) python3 experiments/run.py --tier gpu --device cuda \
    --corpus-file experiments/.corpus/sympy.npz --out "$OUT/exp" --time-budget "$EXP_S" \
    --no-progress > "$OUT/exp/log.txt" 2>&1
  echo "experiments exit $?" | tee -a "$OUT/log.txt"
  tail -30 "$OUT/exp/log.txt"
fi
echo "== done in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/log.txt"
