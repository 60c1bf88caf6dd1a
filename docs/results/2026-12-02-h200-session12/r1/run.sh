#!/usr/bin/env bash
# Session 12, run 1: GPU tests (cached steps, paged attention, the KV cache), then the cached step
# and the 32k generation benchmarks.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=/tmp/r1; mkdir -p $R
B=gpu-bundle
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt
for t in src/backend/cuda/mosaic_backend_cuda_test src/mem/mosaic_mem_test tests/gpu/mosaic_gpu_test; do
  echo "== $t" | tee -a $R/tests.txt
  timeout 200 $B/$t --gtest_brief=1 >> $R/tests.txt 2>&1; echo "exit $?" | tee -a $R/tests.txt
done
grep -E "FAILED|exit|PASSED|prefix|dual|block:" $R/tests.txt | head -40
echo "== memcheck of the new paths"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 $B/src/backend/cuda/mosaic_backend_cuda_test \
  --gtest_filter='*Paged*:*Scatter*' --gtest_brief=1 > $R/memcheck.txt 2>&1; echo "memcheck kernels exit $?" | tee -a $R/memcheck.txt
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 $B/tests/gpu/mosaic_gpu_test \
  --gtest_filter='*Cached*' --gtest_brief=1 >> $R/memcheck.txt 2>&1; echo "memcheck steps exit $?" | tee -a $R/memcheck.txt
grep -E "ERROR SUMMARY|exit" $R/memcheck.txt
timeout 300 bench/cached_decoding.sh $B/src/cli/mosaic $R step,generate 2>&1 | tee $R/bench.txt
tar czf $OUT/r1.tgz -C /tmp r1
