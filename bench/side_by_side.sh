#!/usr/bin/env bash
# Mosaic and the PyTorch-native reference in the same run on one GPU (ARCHITECTURE.md,
# "Measuring"): step latency, activation peak, PAR and inflation at each length, and L_max under
# a budget. Prints both tables and writes JSON to OUT_DIR for bench/plot_side_by_side.py.
#
#   bench/side_by_side.sh MOSAIC_BINARY OUT_DIR [FAMILY] [LENGTHS] [BUDGET] [LMAX_LENGTH]
#
# FAMILY llada (LLaDA-8B) or dream (Dream-7B) with random bf16 weights from make-test-model;
# LENGTHS default 4096,16384,32768; BUDGET default 24GiB, or "none" to measure latency and memory
# only (no L_max search on either side). LMAX_LENGTH: run Mosaic's L_max step at
# this length instead of the planned L_max (a step at 393k tokens takes minutes). Needs torch
# and safetensors for the reference (bench/reference/torch_step.py).
set -euo pipefail
mosaic=$1 out=$2 family=${3:-llada} lengths=${4:-4096,16384,32768} budget=${5:-24GiB} lmax_length=${6:-}
preset=$([ "$family" = llada ] && echo llada-8b || echo dream-7b)
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
model=${MOSAIC_BENCH_MODEL_DIR:-/tmp/mosaic-bench-$preset}
if [ ! -f "$model/config.json" ]; then
  echo "== writing a random $preset checkpoint to $model"
  "$mosaic" make-test-model --family "$family" --preset "$preset" --seed 1 --out "$model" --quiet
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
# The SM clock and power every 100 ms while both systems run: the card's power limit lowers the
# clock under sustained load (docs/design/cuda-kernels.md, "How the kernels are checked").
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 100 > "$out/clocks-$family.csv" &
sampler=$!
trap 'kill $sampler 2>/dev/null || true' EXIT

echo "== Mosaic: step latency and memory"
"$mosaic" bench step --model "$model" --seq-len "$lengths" --json-out "$out/mosaic-step-$family.json"
if [ "$budget" = none ]; then
  echo "== PyTorch reference: step latency and memory"
  python3 "$here/reference/torch_step.py" --model "$model" --seq-len "$lengths" --json "$out/torch-$family.json"
  exit 0
fi
echo "== PyTorch reference: step latency, memory, L_max under $budget"
python3 "$here/reference/torch_step.py" --model "$model" --seq-len "$lengths" --lmax-budget "$budget" \
  --json "$out/torch-$family.json"
for t in 0 1; do
  echo "== Mosaic: L_max under $budget, temperature $t"
  "$mosaic" bench lmax --model "$model" --budget "$budget" --temperature $t ${lmax_length:+--length $lmax_length} \
    --json-out "$out/mosaic-lmax-t$t-$family.json"
done
