#!/usr/bin/env bash
# Session 10, run 8: GPU tests of the final tree after the review (05332f2), and the fused
# SwiGLU path's step test again (it is opt-in now).
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r79; mkdir -p $R
cd gpu-bundle
timeout 150 tests/gpu/mosaic_gpu_test --gtest_brief=1 > $R/gpu-test.txt 2>&1; echo "gpu rc=$?" >> $R/summary.txt
timeout 120 src/backend/cuda/mosaic_backend_cuda_test --gtest_brief=1 > $R/backend-test.txt 2>&1; echo "backend rc=$?" >> $R/summary.txt
