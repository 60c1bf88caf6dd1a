#!/usr/bin/env bash
# LLaDA2.0-mini on one GPU (issue 25): the released configuration with random bf16 weights,
# written once per machine. Measures, in one run:
#   1. how fast the GPU reads memory (the floor of a step that reads weights: read_bandwidth.py);
#   2. a cached step of one 32-token block against 4,096 positions, with its op profile (time per
#      op kind and how many experts the 32 rows chose per layer: the bytes the step must read);
#   3. full steps at 4,096 and 32,768 tokens;
#   4. whole generations (prompt 512, 256 tokens, blocks of 32, the exact block cache) at batch 1
#      and 16.
#
#   bench/llada2_mini.sh [OUT_DIR]        (MOSAIC: the mosaic binary; default build/src/cli/mosaic)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mosaic=${MOSAIC:-$here/../build/src/cli/mosaic}
out=${1:-/tmp/llada2-mini-bench}
model=${MOSAIC_BENCH_MODEL_DIR:-/tmp/mosaic-bench-llada2-mini}
mkdir -p "$out"
if [ ! -f "$model/config.json" ]; then
  echo "== writing a random llada2-mini checkpoint to $model"
  start=$(date +%s)
  "$mosaic" make-test-model --family llada2 --preset llada2-mini --seed 1 --shards 8 --out "$model" --quiet
  echo "   written in $(( $(date +%s) - start )) s"
fi
"$mosaic" info --model "$model" --json > "$out/info.json"

echo "== 1. reading device memory"
python3 "$here/reference/read_bandwidth.py" --gib 16 --json "$out/bandwidth.json"

echo "== 2. a cached step: 32 rows against 4,096 positions"
"$mosaic" bench step --model "$model" --device cuda --seq-len 4096 --masked 32 --cache dual --repeats 20 \
  --json-out "$out/cached_step.json"
MOSAIC_PROFILE_OPS=1 "$mosaic" bench step --model "$model" --device cuda --seq-len 4096 --masked 32 --cache dual \
  --warmup 1 --repeats 1 2> "$out/cached_step_profile.txt" > /dev/null || true
grep "mosaic profile" "$out/cached_step_profile.txt" | tail -1

echo "== 3. full steps"
"$mosaic" bench step --model "$model" --device cuda --seq-len 4096,32768 --json-out "$out/full_step.json"

echo "== 4. generations with the block cache"
for batch in 1 16; do
  "$mosaic" bench generate --model "$model" --device cuda --prompt-len 512 --cache auto --batch "$batch" \
    --gen-length 256 --steps 32 --block-length 32 --json-out "$out/generate_b$batch.json"
done
