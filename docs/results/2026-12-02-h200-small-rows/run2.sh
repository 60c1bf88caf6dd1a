#!/usr/bin/env bash
# D2F's own decoder beside Mosaic (small-rows kernel on, then off) in one command; run.sh's
# reference part ran out of its time while writing the checkpoint.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
M=$PWD/gpu-bundle/build-gpu/src/cli/mosaic
model=/tmp/mosaic-bench-llada-8b adapter=/tmp/mosaic-bench-llada-8b-d2f-lora
export MOSAIC_BENCH_MODEL_DIR=$model MOSAIC_BENCH_ADAPTER_DIR=$adapter
mkdir -p /tmp/char
date +%T; timeout 420 bench/d2f_characterization.sh $M /tmp/char reference 2>&1 | grep -v -i warning | tail -25; date +%T
cp /tmp/char/d2f-reference.json $OUT/ 2>/dev/null
settings=(--block-add-threshold 0.5 --decoded-token-threshold 0.9 --skip-threshold 1.0)
for sr in 1 0; do
  MOSAIC_SMALL_ROWS_GEMM=$sr timeout 90 $M bench generate --model $model --adapter $adapter --prompt-len 256 --gen-length 512 \
    --block-length 32 --d2f "${settings[@]}" --cache auto --batch 1 --json-out $OUT/mosaic-sr$sr.json 2>&1 | tail -3
done
