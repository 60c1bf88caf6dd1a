#!/usr/bin/env bash
# The two device-commit failures of run1 (Dream), with replay padding on and off; then the long
# step: LLaDA-8B's configuration with 2 decoder layers (streamed weights: the device peak does
# not depend on the layer count), every layer streamed, under 24 GiB at the planned L_max.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p $OUT/bench
for pad in 1 0; do
  echo "== MOSAIC_REPLAY_PADDING=$pad"
  MOSAIC_REPLAY_PADDING=$pad timeout 60 gpu-bundle/mosaic_gpu_test --gtest_filter='Families/DeviceCommitGeneration.*' 2>&1 | grep -E "Failure|Expected|Which is|at index|^\[  FAILED|^\[  PASSED|differ" | head -20
done
echo "== MOSAIC_CUDA_GRAPHS=0"
MOSAIC_CUDA_GRAPHS=0 timeout 60 gpu-bundle/mosaic_gpu_test --gtest_filter='Families/DeviceCommitGeneration.*' 2>&1 | grep -E "^\[  FAILED|^\[  PASSED" | head -5
model=/tmp/mosaic-bench-llada-8b-2layers
gpu-bundle/mosaic make-test-model --family llada --preset llada-8b --layers 2 --seed 1 --out $model --quiet
timeout 400 gpu-bundle/mosaic bench step --model $model --seq-len 917504 --streamed-layers 2 --budget 24GiB --warmup 0 --repeats 1 --json-out $OUT/bench/l2-917504-24GiB.json 2>&1
nvidia-smi --query-gpu=memory.used --format=csv,noheader
