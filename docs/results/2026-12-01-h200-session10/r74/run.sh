#!/usr/bin/env bash
# Session 10, run 3: sibling products on two streams. GPU tests, then steps with the siblings side
# by side against MOSAIC_SIBLING_PRODUCTS=0 (same binary), alternating: LLaDA-8B two rounds,
# Dream-7B one.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r74; mkdir -p $R
cd gpu-bundle
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt
timeout 150 tests/gpu/mosaic_gpu_test --gtest_brief=1 > $R/gpu-test.txt 2>&1; echo "gpu rc=$?" >> $R/summary.txt
timeout 120 src/backend/cuda/mosaic_backend_cuda_test --gtest_brief=1 > $R/backend-test.txt 2>&1; echo "backend rc=$?" >> $R/summary.txt
timeout 60 src/mem/mosaic_mem_test --gtest_brief=1 > $R/mem-test.txt 2>&1; echo "mem rc=$?" >> $R/summary.txt
ab() {  # family model rounds lengths
  for round in $(seq $3); do
    for v in siblings one-stream; do
      if [ $v = one-stream ]; then export MOSAIC_SIBLING_PRODUCTS=0; else unset MOSAIC_SIBLING_PRODUCTS; fi
      echo "== $1 $v round $round" >> $R/ab.txt
      timeout 100 src/cli/mosaic bench step --model $2 --seq-len $4 >> $R/ab.txt 2>&1
    done
  done
  unset MOSAIC_SIBLING_PRODUCTS
}
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
ab llada $M 2 4096,16384,32768
rm -rf $M
D=/tmp/mosaic-bench-dream-7b
src/cli/mosaic make-test-model --family dream --preset dream-7b --seed 1 --out $D --quiet
ab dream $D 1 4096,32768
