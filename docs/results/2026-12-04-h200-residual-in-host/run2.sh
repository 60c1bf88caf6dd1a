#!/usr/bin/env bash
# run1's failing GPU test again (its chunked runner now searches for a budget that fits), with the
# exceptions' messages; then the full 32-layer LLaDA-8B step under 24 GiB with every weight
# resident at L = 393,216 (x fits on the device: the all-resident L_max of session 20) and at the
# new planned L_max with resident weights, 557,056 (x in host memory, chosen by the runner).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p $OUT/bench
timeout 120 gpu-bundle/mosaic_gpu_test --gtest_filter='*ResidualInHost*' 2>&1 | grep -E "^\[  FAILED|^\[  PASSED|^\[       OK|Failure|Expected|Which is|exception" | head -40
model=/tmp/mosaic-bench-llada-8b
gpu-bundle/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
timeout 200 gpu-bundle/mosaic bench step --model $model --seq-len 393216 --budget 24GiB --warmup 0 --repeats 1 --json-out $OUT/bench/l32-393216-24GiB.json 2>&1
timeout 330 gpu-bundle/mosaic bench step --model $model --seq-len 557056 --budget 24GiB --warmup 0 --repeats 1 --json-out $OUT/bench/l32-557056-24GiB.json 2>&1
