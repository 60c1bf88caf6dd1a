#!/usr/bin/env bash
# Session 34 on the H200: CUDA attention at head dims 64/80/96/128/256 and the element-wise path,
# the GPU tests (attention at every width, whole tiny models at head dims 32..256 against the CPU),
# the kernel beside PyTorch's SDPA at the same shapes, and the CLI's refusal of head_dim 512.
# Run from the repository root with the carried gpu-bundle/ (binaries built by scripts/build-gpu.sh).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64
B=gpu-bundle/build-gpu
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
log="$OUT/log.txt"
exec > >(tee "$log") 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
echo "== backend tests (attention, small rows, gemm)"
$B/src/backend/cuda/mosaic_backend_cuda_test --gtest_brief=1 2>&1 | tail -n 15
echo "== step tests (tiny models, every head dim)"
timeout 400 $B/tests/gpu/mosaic_gpu_test --gtest_brief=1 --gtest_filter='Models/CudaStep.*' 2>&1 | grep -E "worst row|steps,|FAILED|PASSED|Failure|error" | head -n 80
echo "== workbench: every tile width, then PyTorch SDPA at the same shapes"
gpu-bundle/attention_bench dims 4096 16384
python3 dev/cuda/sdpa_backends.py --head-dims 64,80,96,128,256 --lengths 4096,16384 --json-out "$OUT/sdpa.json" 2>&1 | grep -v Warning
echo "== CLI: head_dim 512 (hidden 1024, 2 heads) refused on cuda, run on the CPU under auto; head_dim 80 on both"
M=$B/src/cli/mosaic
$M make-test-model --family llada --hidden 1024 --heads 2 --kv-heads 2 --seed 3 --out /tmp/d512 --quiet
$M generate --model /tmp/d512 --ids 5,9,13 --gen-length 8 --steps 8 --device cuda; echo "rc $?"
$M generate --model /tmp/d512 --ids 5,9,13 --gen-length 8 --steps 8 --device auto; echo "rc $?"
$M make-test-model --family llada --hidden 320 --heads 4 --kv-heads 4 --seed 3 --out /tmp/d80 --quiet
for d in cpu cuda; do $M generate --model /tmp/d80 --ids 5,9,13 --gen-length 16 --steps 16 --block-length 8 --device $d --json --quiet | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["device"], [r["output_ids"] for r in d["results"]])'; done
