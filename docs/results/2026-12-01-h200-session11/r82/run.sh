#!/usr/bin/env bash
# Session 11, run 2: GPU tests after the review's mends (the fused product's arguments built once
# per step; its pair count cached by the shared per-device helper).
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r82; mkdir -p $R
cd gpu-bundle
timeout 200 tests/gpu/mosaic_gpu_test --gtest_brief=1 > $R/gpu-test.txt 2>&1; echo "gpu rc=$?" >> $R/summary.txt
timeout 150 src/backend/cuda/mosaic_backend_cuda_test --gtest_brief=1 > $R/backend-test.txt 2>&1; echo "backend rc=$?" >> $R/summary.txt
MOSAIC_FUSED_SWIGLU=1 timeout 150 tests/gpu/mosaic_gpu_test --gtest_brief=1 --gtest_filter='CudaStep*' > $R/gpu-test-fused-default.txt 2>&1; echo "gpu fused-by-default rc=$?" >> $R/summary.txt
