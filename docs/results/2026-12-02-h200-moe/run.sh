#!/usr/bin/env bash
# Session 15 on the H200: LLaDA-MoE on CUDA. The MoE kernels against the CPU's, the step suite on
# the tiny LLaDA-MoE (GPU against the CPU reference: logits, lock-step decisions, chunked bits,
# caches), a greedy generation on both, then LLaDA-MoE-7B-A1B's configuration with random bf16
# weights: step latency and memory at 4k, 16k and 32k (L/2 masked).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64
B=gpu-bundle/build-gpu
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
M=$B/src/cli/mosaic
echo "== backend: MoE kernels"
$B/src/backend/cuda/mosaic_backend_cuda_test --gtest_filter='CudaMoe*' 2>&1 | grep -E "OK|FAILED|Failure|error|Expected|Which|PASSED" | head -40
echo "== step suite on the tiny LLaDA-MoE"
timeout 200 $B/tests/gpu/mosaic_gpu_test --gtest_filter='Models/CudaStep.*llada_moe*' 2>&1 | grep -E "OK \]|FAILED|Failure|worst|steps,|prefix|dual|block|Expected|Which|error" | head -60
echo "== greedy generation, CPU and CUDA"
$M make-test-model --family llada-moe --seed 3 --out /tmp/moe --quiet
for d in cpu cuda; do $M generate --model /tmp/moe --ids 5,9,13 --gen-length 16 --steps 16 --block-length 8 --device $d --json --quiet | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["device"], [r["output_ids"] for r in d["results"]])'; done
echo "== LLaDA-MoE-7B-A1B configuration, random weights: steps"
timeout 150 $M make-test-model --family llada-moe --preset llada-moe-7b --seed 1 --out /tmp/moe7b --quiet && \
  timeout 200 $M bench step --model /tmp/moe7b --seq-len 4096,16384,32768 --device cuda --json-out "$OUT/moe7b-steps.json"
echo "== the same configuration, the PyTorch-native reference step (bench/reference/torch_step.py)"
timeout 240 python3 bench/reference/torch_step.py --model /tmp/moe7b --seq-len 4096,16384,32768 --warmup 1 --repeats 3 \
  --json "$OUT/moe7b-torch.json" 2>&1 | grep -v -i warning
