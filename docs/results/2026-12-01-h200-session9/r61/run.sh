#!/usr/bin/env bash
# Session 9, run 1: the normaliser on the tensor cores (v8): workbench (checks, engine variants),
# GPU tests, LLaDA-8B step A/B against e7cdf69 (base/mosaic), alternating.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r61; mkdir -p $R
cd gpu-bundle
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > $R/clocks.csv &
sampler=$!
timeout 60 dev/attention_bench check > $R/bench-check.txt 2>&1
timeout 150 dev/attention_bench engine fused > $R/bench-engine.txt 2>&1
timeout 120 src/backend/cuda/mosaic_backend_cuda_test --gtest_brief=1 > $R/backend-test.txt 2>&1; echo "backend rc=$?" >> $R/summary.txt
timeout 150 tests/gpu/mosaic_gpu_test --gtest_brief=1 > $R/gpu-test.txt 2>&1; echo "gpu rc=$?" >> $R/summary.txt
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
for round in 1 2; do
  for v in base new; do
    bin=src/cli/mosaic; [ $v = base ] && bin=base/mosaic
    echo "== $v round $round" >> $R/ab.txt
    timeout 100 $bin bench step --model $M --seq-len 4096,16384,32768 >> $R/ab.txt 2>&1
  done
done
kill $sampler
cd $OUT && tar czf r61.tgz r61 && rm -rf r61
