#!/usr/bin/env bash
# After `--streamed-layers auto` and the plan's rule (stream rather than cut the step into chunks
# that cannot fill the GPU): the GPU tests of streaming, then LLaDA-8B's configuration at
# L = 32,768 under the budgets where run1/run3 measured the most host time, and under 8 GiB, each
# with the engine choosing what to stream (no --streamed-layers given), median of 3 after 2
# warm-up steps; then PyTorch native's L_max under 8 GiB again (the cap now applied to an empty
# allocator cache).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p $OUT/bench
M=gpu-bundle/mosaic
timeout 150 gpu-bundle/mosaic_gpu_test --gtest_filter='*AutoStreaming*:*StreamedLayerWeights*:*ResidualInHost*' 2>&1 | grep -E "^\[  FAILED|^\[  PASSED|Failure|Expected|Which is|exception" | head -30
model=/tmp/mosaic-bench-llada-8b
[ -f $model/config.json ] || $M make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
for b in 15.5GiB 15.52GiB 15.75GiB 8GiB; do
  echo "== 32k, $b, auto"
  timeout 90 $M bench step --model $model --seq-len 32768 --budget $b --warmup 2 --repeats 3 --json-out $OUT/bench/32k-$b-auto.json 2>&1 | grep -v "^mosaic bench step"
done
timeout 200 python3 bench/reference/torch_step.py --model $model --seq-len 4096 --warmup 0 --repeats 1 \
  --lmax-budget 8GiB --json $OUT/bench/torch-lmax-8GiB.json 2>&1 | tail -n 3
