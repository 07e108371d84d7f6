#!/usr/bin/env bash
# One call on a borrowed GPU machine for the experiments' GPU tier alone (the kernel tests
# and the benchmarks: tools/device_call.sh):
#   the plan in WORKERS processes (experiments/gpu_parallel.py) for BUDGET seconds, into
#   $OUT/exp; if that stores nothing because its processes failed, the plan in one process
#   for what is left of the budget.  nvidia-smi samples the device's use meanwhile.
# It needs the prepared corpus, carried: python experiments/run.py --save-corpus
# experiments/.corpus/sympy.npz; and the commit in .device_commit (git rev-parse HEAD).
# Usage there: OUT=/some/dir [STEPS=N] bash tools/device_experiments.sh [BUDGET, default 480]
# (TIER, DEVICE, CORPUS and PYTHON replace gpu, cuda, that corpus and python3: the tests
# rehearse the call on a CPU, TIER=gpuquick DEVICE=cpu, where there is no nvidia-smi)
# The whole plan is more than one call holds (python experiments/run.py --tier gpu --cost):
# a later call goes on where the earlier ones stopped once their units are committed
# (experiments/units/gpu/units.jsonl, read by every call; units of other code are not
# reused) if it trains the same steps: STEPS set to the first call's (its log's
# "language models: N steps each").
# Files back (6): machine.txt, dmon.txt, exp/{log.txt,results.json,results.md,units.jsonl}
# Read first in the log: each encoding's vmap checks ("vmap attending 'fused' does not
# agree", then 'written', or "looping over the seeds"; a group's line says "vmap fused"),
# the step times of the calibration, ALiBi's and T5's ways to attend where they loop over
# seeds ("attention 'flex' does not agree", "step time ... attends 'flex'"), and each
# group's peak memory.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT/exp"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_INTERPRET=${TRITON_INTERPRET:-0}
# several processes share the device: memory freed by one group is reusable by the next
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export POSENC_COMMIT=${POSENC_COMMIT:-$(cat .device_commit 2>/dev/null || echo unknown)}
BUDGET=${1:-480}
WORKERS=${WORKERS:-8}
STEPS=${STEPS:-}
TIER=${TIER:-gpu}
DEVICE=${DEVICE:-cuda}
CORPUS=${CORPUS:-experiments/.corpus/sympy.npz}
PYTHON=${PYTHON:-python3}
# what both runs of the plan below share
PLAN=(experiments/run.py --tier "$TIER" --device "$DEVICE" --no-progress
      --corpus-file "$CORPUS" --out "$OUT/exp" --reserve 20 ${STEPS:+--steps "$STEPS"})
smi=$(command -v nvidia-smi || true)
t0=$(date +%s)
{
  if [ -n "$smi" ]; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  else
    echo "no nvidia-smi"
  fi
  nproc
  "$PYTHON" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"
} > "$OUT/machine.txt" 2>&1
dmon=""
if [ -n "$smi" ]; then
  nvidia-smi dmon -s um -d 5 > "$OUT/dmon.txt" 2>&1 &
  dmon=$!
fi
"$PYTHON" "${PLAN[@]}" --time-budget "$BUDGET" --workers "$WORKERS" \
  > "$OUT/exp/log.txt" 2>&1
rc=$?
echo "parallel plan exit $rc after $(( $(date +%s) - t0 )) s" | tee -a "$OUT/exp/log.txt"
left=$(( BUDGET - ($(date +%s) - t0) ))
if [ "$rc" -ne 0 ] && [ "$left" -gt 120 ]; then
  echo "== the plan in one process, $left s" | tee -a "$OUT/exp/log.txt"
  "$PYTHON" "${PLAN[@]}" --time-budget "$left" >> "$OUT/exp/log.txt" 2>&1
  echo "one-process plan exit $?" | tee -a "$OUT/exp/log.txt"
fi
[ -n "$dmon" ] && kill "$dmon" 2>/dev/null
grep -v "UserWarning\|^  a = F\." "$OUT/exp/log.txt" | tail -80
echo "== done in $(( $(date +%s) - t0 )) s"
