#!/usr/bin/env bash
# LLaDA-8B (32 layers, every weight resident) at L = 393,216 under 24 GiB: x in host memory with
# 4/5/4 chunks (the runner's choice since chunks of fewer than 8,192 rows send x to host memory),
# then x forced onto the device (MOSAIC_RESIDUAL_IN_HOST=0: 827/1,653/4 chunks, the placement of
# session 20), which run2 saw run past 200 s.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p $OUT/bench
model=/tmp/mosaic-bench-llada-8b
gpu-bundle/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
timeout 200 gpu-bundle/mosaic bench step --model $model --seq-len 393216 --budget 24GiB --warmup 0 --repeats 1 --json-out $OUT/bench/l32-393216-24GiB-auto.json 2>&1
MOSAIC_RESIDUAL_IN_HOST=0 timeout 330 gpu-bundle/mosaic bench step --model $model --seq-len 393216 --budget 24GiB --warmup 0 --repeats 1 --json-out $OUT/bench/l32-393216-24GiB-device.json 2>&1
echo "device-x rc $?"
