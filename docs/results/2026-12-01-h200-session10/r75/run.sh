#!/usr/bin/env bash
# Session 10, run 4: GPU tests of the tree to commit (fused SwiGLU opt-in, siblings reverted), and
# every kernel of one LLaDA-8B step at 4k and 32k under ncu (durations only, clocks left alone):
# where the LM head's time goes (cuBLASLt chunks against the fold), and the memory-bound ops.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r75; mkdir -p $R
cd gpu-bundle
timeout 150 tests/gpu/mosaic_gpu_test --gtest_brief=1 > $R/gpu-test.txt 2>&1; echo "gpu rc=$?" >> $R/summary.txt
timeout 120 src/backend/cuda/mosaic_backend_cuda_test --gtest_brief=1 > $R/backend-test.txt 2>&1; echo "backend rc=$?" >> $R/summary.txt
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" >> $R/summary.txt
for L in 4096 32768; do
  MOSAIC_CUDA_GRAPHS=0 timeout 200 $NCU --clock-control none --metrics gpu__time_duration.sum --csv \
    src/cli/mosaic bench step --model $M --seq-len $L --repeats 1 --warmup 0 > $R/ncu-$L.csv 2> $R/ncu-$L.err
  echo "ncu $L rc=$?" >> $R/summary.txt
done
gzip $R/ncu-*.csv
