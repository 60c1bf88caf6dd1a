#!/usr/bin/env bash
# The residual stream in pinned host memory (graph/residual_staging.h): the GPU tests that compare
# its bits with the resident step's; then LLaDA-8B's configuration with 2 decoder layers (every
# layer's weights streamed: the device peak does not depend on the layer count) at L = 1,048,576
# under 24 GiB, temperatures 0 and 1 (the runner puts x in host memory by itself); then the full
# 32-layer model at 32k, x on the device against x forced to host memory (MOSAIC_RESIDUAL_IN_HOST=1).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p $OUT/bench
timeout 150 gpu-bundle/mosaic_gpu_test --gtest_filter='*ResidualInHost*:*ChunkedStepIsBitIdentical*:*StreamedLayerWeights*:*LastLayerOverCandidates*' 2>&1 | grep -E "^\[  FAILED|^\[  PASSED|^\[       OK|Failure|Expected|Which is" | head -60
model2=/tmp/mosaic-bench-llada-8b-2layers
gpu-bundle/mosaic make-test-model --family llada --preset llada-8b --layers 2 --seed 1 --out $model2 --quiet
for t in 0 1; do
  timeout 170 gpu-bundle/mosaic bench step --model $model2 --seq-len 1048576 --streamed-layers 2 --budget 24GiB --temperature $t --warmup 0 --repeats 1 --json-out $OUT/bench/l2-1048576-24GiB-t$t.json 2>&1
done
model=/tmp/mosaic-bench-llada-8b
gpu-bundle/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
timeout 60 gpu-bundle/mosaic bench step --model $model --seq-len 32768 --warmup 1 --repeats 3 --json-out $OUT/bench/l32-32768-resident.json 2>&1
MOSAIC_RESIDUAL_IN_HOST=1 timeout 60 gpu-bundle/mosaic bench step --model $model --seq-len 32768 --warmup 1 --repeats 3 --json-out $OUT/bench/l32-32768-residual-host.json 2>&1
