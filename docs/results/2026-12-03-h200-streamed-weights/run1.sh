#!/usr/bin/env bash
# Streamed layer weights on CUDA (issue 26), first run: the GPU test that streamed steps give the
# resident bits, the rest of the GPU suite, then LLaDA-8B (random bf16 weights) steps at 4k and
# 32k with every weight resident and with the last 32 / 22 layers streamed from pinned host
# memory, alternating in one command; 22 layers under an 8 GiB budget (mosaic plan --weights auto).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p $OUT/bench
timeout 120 gpu-bundle/mosaic_gpu_test --gtest_filter='*StreamedLayer*' 2>&1 | grep -E "^\[  (PASSED|FAILED) |^\[       OK|FAILED|Failure|Expected|Which|error" | head -40
timeout 240 gpu-bundle/mosaic_gpu_test 2>&1 | grep -E "^\[  (PASSED|FAILED) |FAILED" | tail -20
model=/tmp/mosaic-bench-llada-8b
t0=$(date +%s); gpu-bundle/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet; echo "model written in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
b() { local name=$1; shift; timeout 150 gpu-bundle/mosaic bench step --model $model --warmup 1 --repeats 3 --json-out $OUT/bench/$name.json "$@" 2>&1 | grep -v "^mosaic bench" ; }
for round in 1 2; do
  b resident-$round --seq-len 4096,32768
  b streamed32-$round --seq-len 4096,32768 --streamed-layers 32
done
b streamed22-8GiB --seq-len 32768 --streamed-layers 22 --budget 8GiB
b resident-8GiB --seq-len 32768 --budget 8GiB
