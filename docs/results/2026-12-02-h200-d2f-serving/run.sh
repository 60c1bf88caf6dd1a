#!/usr/bin/env bash
# Session 15 on the H200: the step tests after the MoE graph changes (the dense models' graphs must
# be unchanged), LLaDA-MoE refused on CUDA / run on the CPU under auto, then D2F served under
# Poisson arrivals, continuous against fixed batching (bench/d2f_serving.sh).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64
B=gpu-bundle/build-gpu
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
echo "== step tests"
timeout 120 $B/tests/gpu/mosaic_gpu_test --gtest_brief=1 2>&1 | grep -vE "steps,|worst row|prefix:|dual:|block:" | tail -n 8
echo "== LLaDA-MoE (tiny) on a GPU machine"
M=$B/src/cli/mosaic
$M make-test-model --family llada-moe --seed 1 --out /tmp/moe --quiet
$M generate --model /tmp/moe --ids 5,9,13 --gen-length 8 --steps 8 --device cuda --quiet; echo "rc $? (cuda)"
$M generate --model /tmp/moe --ids 5,9,13 --gen-length 8 --steps 8 --device auto --quiet; echo "rc $? (auto)"
echo "== D2F served"
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader
timeout 430 bench/d2f_serving.sh $M "$OUT/serving"
ls "$OUT/serving"
