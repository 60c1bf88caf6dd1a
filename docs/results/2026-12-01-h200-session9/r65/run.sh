#!/usr/bin/env bash
# Session 9, run 5: GPU tests of the final tree after the review (4d40b08).
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r65; mkdir -p $R
cd gpu-bundle
timeout 150 tests/gpu/mosaic_gpu_test --gtest_brief=1 > $R/gpu-test.txt 2>&1; echo "gpu rc=$?" >> $R/summary.txt
timeout 120 src/backend/cuda/mosaic_backend_cuda_test --gtest_brief=1 > $R/backend-test.txt 2>&1; echo "backend rc=$?" >> $R/summary.txt
timeout 60 src/mem/mosaic_mem_test --gtest_brief=1 > $R/mem-test.txt 2>&1; echo "mem rc=$?" >> $R/summary.txt
cd $OUT && tar czf r65.tgz r65 && rm -rf r65
