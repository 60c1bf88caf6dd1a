#!/usr/bin/env bash
# Session 12, run 5: row buckets of cuBLASLt choices down to 16 rows (was 256): the GEMM and step
# tests, the cached 4k step, Mosaic's dual generation (prompt 1024) and Fast-dLLM's at batch 1.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=/tmp/r5; mkdir -p $R
B=$PWD/gpu-bundle/src/cli/mosaic
for t in src/backend/cuda/mosaic_backend_cuda_test tests/gpu/mosaic_gpu_test; do
  echo "== $t" >> $R/tests.txt
  timeout 100 gpu-bundle/$t --gtest_brief=1 >> $R/tests.txt 2>&1; echo "exit $?" >> $R/tests.txt
done
grep -E "PASSED|FAILED|exit" $R/tests.txt
M=/tmp/mosaic-bench-llada-8b
$B make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
MOSAIC_LOG=info timeout 60 $B bench step --model $M --seq-len 4096 --masked 32 --cache dual 2>&1 | grep -v "^$" | tee $R/step.txt | tail -12
timeout 60 $B bench generate --model $M --prompt-len 1024 --cache dual 2>&1 | tee $R/generate.txt
timeout 150 python3 bench/reference/fast_dllm_dual.py --fast-dllm .fastdllm/v1/llada --model $M --prompt-len 1024 \
  --batch 1 --json $R/fast-dllm.json 2>&1 | grep "Fast-dLLM dual" | tee $R/fast-dllm.txt
timeout 60 $B bench generate --model $M --prompt-len 1024 --cache dual 2>&1 | tee -a $R/generate.txt
tar czf $OUT/r5.tgz -C /tmp r5
