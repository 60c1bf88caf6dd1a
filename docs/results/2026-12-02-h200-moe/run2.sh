#!/usr/bin/env bash
# The grouped expert product with 128 x 128 tiles (was 64 x 64): kernel tests, the step suite on
# the tiny LLaDA-MoE, and the LLaDA-MoE-7B-A1B steps again beside the PyTorch-native step.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64
B=gpu-bundle/build-gpu
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log2.txt") 2>&1
M=$B/src/cli/mosaic
$B/src/backend/cuda/mosaic_backend_cuda_test --gtest_filter='CudaMoe*' 2>&1 | grep -E "OK|FAILED|Failure|PASSED" | head -20
timeout 120 $B/tests/gpu/mosaic_gpu_test --gtest_filter='Models/CudaStep.*llada_moe*' --gtest_brief=1 2>&1 | grep -E "FAILED|Failure|worst|PASSED|tests ran" | head -20
timeout 150 $M make-test-model --family llada-moe --preset llada-moe-7b --seed 1 --out /tmp/moe7b --quiet && \
  timeout 150 $M bench step --model /tmp/moe7b --seq-len 4096,16384,32768 --device cuda --json-out "$OUT/moe7b-steps-128.json"
timeout 150 python3 bench/reference/torch_step.py --model /tmp/moe7b --seq-len 4096,32768 --warmup 1 --repeats 3 \
  --json "$OUT/moe7b-torch-2.json" 2>&1 | grep -v -i warning
