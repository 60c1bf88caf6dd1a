#!/usr/bin/env bash
# Session 9, run 4: the final tree (attention tail of 512 rows on the side stream): GPU tests,
# then Mosaic and the PyTorch reference side by side (LLaDA-8B, Dream-7B; no L_max search).
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r64; mkdir -p $R
timeout 150 gpu-bundle/tests/gpu/mosaic_gpu_test --gtest_brief=1 > $R/gpu-test.txt 2>&1; echo "gpu rc=$?" >> $R/summary.txt
timeout 120 gpu-bundle/src/backend/cuda/mosaic_backend_cuda_test --gtest_brief=1 > $R/backend-test.txt 2>&1; echo "backend rc=$?" >> $R/summary.txt
timeout 60 gpu-bundle/src/mem/mosaic_mem_test --gtest_brief=1 > $R/mem-test.txt 2>&1; echo "mem rc=$?" >> $R/summary.txt
for family in llada dream; do
  timeout 270 bash bench/side_by_side.sh $PWD/gpu-bundle/src/cli/mosaic $R/$family $family 4096,16384,32768 none > $R/side-$family.txt 2>&1
  echo "$family rc=$?" >> $R/summary.txt
  rm -rf /tmp/mosaic-bench-*
done
cd $OUT && tar czf r64.tgz r64 && rm -rf r64
