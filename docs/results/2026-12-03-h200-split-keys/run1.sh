#!/usr/bin/env bash
# Split-keys attention on the H200 (docs/design/split-keys-attention.md), first command: its GPU
# tests, then LLaDA-8B's 32-row cached step at 4k and 32k with the split off
# (MOSAIC_SPLIT_KEYS=0) and on, alternating, and one op profile of each.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
M=$PWD/gpu-bundle/mosaic
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee $OUT/gpu.txt
timeout 120 gpu-bundle/mosaic_backend_cuda_test --gtest_filter='SplitKeys*:CudaAttention*' > $OUT/tests-attention.txt 2>&1
echo "attention tests rc $?"; grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|Expected|Which is|error" $OUT/tests-attention.txt | head -30
timeout 240 gpu-bundle/mosaic_gpu_test --gtest_filter='*Cached*:*d128*' > $OUT/tests-step.txt 2>&1
echo "step tests rc $?"; grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|Expected|Which is|error" $OUT/tests-step.txt | head -30
model=/tmp/mosaic-bench-llada-8b
start=$(date +%s)
[ -f $model/config.json ] || $M make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
echo "model written in $(( $(date +%s) - start )) s"
for round in 1 2; do
  for sk in 0 1; do
    MOSAIC_SPLIT_KEYS=$sk timeout 120 $M bench step --model $model --seq-len 4096,32768 --masked 32 --cache dual \
      --json-out $OUT/step-sk$sk-r$round.json > $OUT/step-sk$sk-r$round.txt 2>&1
    echo "cached step split=$sk round $round rc $?"; tail -4 $OUT/step-sk$sk-r$round.txt
  done
done
for sk in 0 1; do
  MOSAIC_SPLIT_KEYS=$sk MOSAIC_PROFILE_OPS=1 timeout 60 $M bench step --model $model --seq-len 4096 --masked 32 --cache dual \
    --warmup 1 --repeats 1 > /dev/null 2> $OUT/profile-sk$sk.txt
  echo "profile split=$sk"; grep "mosaic profile" $OUT/profile-sk$sk.txt | tail -1
done
