#!/usr/bin/env bash
# Split-keys attention, second version (parts of >= 1,024 keys, one launch per part count):
# workbench, GPU tests, LLaDA-8B's 32-row cached step with the split off and on, alternating.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
M=$PWD/gpu-bundle/mosaic
timeout 60 gpu-bundle/split_keys_bench > $OUT/workbench.txt 2>&1; echo "workbench rc $?"; cat $OUT/workbench.txt
timeout 120 gpu-bundle/mosaic_backend_cuda_test --gtest_filter='SplitKeys*:*CudaAttention*' > $OUT/tests-attention.txt 2>&1
echo "attention tests rc $?"; grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|Expected|Which is" $OUT/tests-attention.txt | head -20
timeout 240 gpu-bundle/mosaic_gpu_test --gtest_filter='*Cached*:*d128*' > $OUT/tests-step.txt 2>&1
echo "step tests rc $?"; grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|Expected|Which is" $OUT/tests-step.txt | head -20
model=/tmp/mosaic-bench-llada-8b
[ -f $model/config.json ] || $M make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
for round in 1 2; do
  for sk in 0 1; do
    MOSAIC_SPLIT_KEYS=$sk timeout 120 $M bench step --model $model --seq-len 4096,32768 --masked 32 --cache dual \
      --json-out $OUT/step-sk$sk-r$round.json > $OUT/step-sk$sk-r$round.txt 2>&1
    echo "cached step split=$sk round $round rc $?"; tail -2 $OUT/step-sk$sk-r$round.txt
  done
done
