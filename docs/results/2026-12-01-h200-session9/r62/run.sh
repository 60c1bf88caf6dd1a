#!/usr/bin/env bash
# Session 9, run 2: long attention ops' tail rows on a low-priority side stream beside the
# o-projection (exec/attention_tail_split.h): GPU tests, LLaDA-8B step A/B against e7cdf69
# (base/mosaic) and against the same binary with MOSAIC_ATTENTION_TAIL_STREAM=0, alternating.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r62; mkdir -p $R
cd gpu-bundle
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt
timeout 150 tests/gpu/mosaic_gpu_test --gtest_brief=1 > $R/gpu-test.txt 2>&1; echo "gpu rc=$?" >> $R/summary.txt
timeout 120 src/backend/cuda/mosaic_backend_cuda_test --gtest_brief=1 > $R/backend-test.txt 2>&1; echo "backend rc=$?" >> $R/summary.txt
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
for round in 1 2; do
  for v in base split one; do
    bin=src/cli/mosaic; [ $v = base ] && bin=base/mosaic
    echo "== $v round $round" >> $R/ab.txt
    if [ $v = one ]; then export MOSAIC_ATTENTION_TAIL_STREAM=0; else unset MOSAIC_ATTENTION_TAIL_STREAM; fi
    timeout 100 $bin bench step --model $M --seq-len 4096,16384,32768 >> $R/ab.txt 2>&1
  done
done
unset MOSAIC_ATTENTION_TAIL_STREAM
echo "== split, graphs off" >> $R/ab.txt
MOSAIC_CUDA_GRAPHS=0 timeout 100 src/cli/mosaic bench step --model $M --seq-len 16384,32768 >> $R/ab.txt 2>&1
cd $OUT && tar czf r62.tgz r62 && rm -rf r62
