#!/usr/bin/env bash
# The full 32-layer LLaDA-8B step at L = 524,288 under 24 GiB with every layer's weights streamed
# from pinned host memory (the all-resident engine's L_max at 24 GiB is 393,216).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p $OUT/bench
model=/tmp/mosaic-bench-llada-8b
gpu-bundle/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
timeout 540 gpu-bundle/mosaic bench step --model $model --seq-len 524288 --streamed-layers 32 --budget 24GiB --warmup 0 --repeats 1 --json-out $OUT/bench/l32-524288-24GiB.json 2>&1
