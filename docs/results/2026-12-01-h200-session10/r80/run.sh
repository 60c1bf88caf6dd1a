#!/usr/bin/env bash
# Session 10, run 9: GPU tests after the second review (one head summary for greedy and noisy
# rows, shared shared-memory access helpers, one random-bf16 test helper).
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r80; mkdir -p $R
cd gpu-bundle
timeout 150 tests/gpu/mosaic_gpu_test --gtest_brief=1 > $R/gpu-test.txt 2>&1; echo "gpu rc=$?" >> $R/summary.txt
timeout 120 src/backend/cuda/mosaic_backend_cuda_test --gtest_brief=1 > $R/backend-test.txt 2>&1; echo "backend rc=$?" >> $R/summary.txt
