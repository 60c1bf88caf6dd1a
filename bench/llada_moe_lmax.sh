#!/usr/bin/env bash
# LLaDA-MoE-7B-A1B's memory targets (issue 25), in one run on one GPU, with random bf16 weights:
#   1. the step at L = 32,768 under the tightest budget it fits (PAR and time; 14.15 GiB planned:
#      `mosaic plan --model llada-moe-7b --seq-len 32768 --budget 14.15GiB`);
#   2. PyTorch native's L_max under 24 GiB at temperature 0 and 1 (bench/reference/torch_step.py:
#      the reference's forward, every allocation capped);
#   3. Mosaic's L_max under 24 GiB: planned, then one full step run there (temperature 0; the
#      Gumbel-max is fused in the head, so temperature 1 plans the same L_max).
#
#   bench/llada_moe_lmax.sh [OUT_DIR]     (MOSAIC: the mosaic binary; default build/src/cli/mosaic)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mosaic=${MOSAIC:-$here/../build/src/cli/mosaic}
out=${1:-/tmp/llada-moe-lmax}
model=${MOSAIC_BENCH_MODEL_DIR:-/tmp/mosaic-bench-llada-moe-7b}
tight=${TIGHT_BUDGET:-14.15GiB}
mkdir -p "$out"
if [ ! -f "$model/config.json" ]; then
  echo "== writing a random llada-moe-7b checkpoint to $model"
  "$mosaic" make-test-model --family llada-moe --preset llada-moe-7b --seed 1 --shards 4 --out "$model" --quiet
fi

echo "== 1. L = 32,768 under $tight"
"$mosaic" bench step --model "$model" --device cuda --seq-len 32768 --budget "$tight" --repeats 3 \
  --json-out "$out/tight_32k.json"

echo "== 2. PyTorch native: L_max under 24 GiB"
python3 "$here/reference/torch_step.py" --model "$model" --seq-len 4096 --warmup 0 --repeats 1 \
  --lmax-budget 24GiB --json "$out/torch_lmax.json"

echo "== 3. Mosaic: L_max under 24 GiB, one step there"
"$mosaic" plan --model "$model" --find-lmax --budget 24GiB --temperature 1 --json > "$out/plan_lmax_t1.json"
"$mosaic" bench lmax --model "$model" --device cuda --budget 24GiB --temperature 0 --json-out "$out/lmax_t0.json"
