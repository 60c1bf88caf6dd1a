#!/usr/bin/env bash
# Session 10, run 1: the fused gate / up / SwiGLU product. GPU tests (backend, steps, memory),
# then LLaDA-8B steps fused against MOSAIC_FUSED_SWIGLU=0 (same binary), alternating, two rounds,
# a 32k op profile, and Dream-7B one round.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r72; mkdir -p $R
cd gpu-bundle
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt
timeout 60 src/backend/cuda/mosaic_backend_cuda_test --gtest_filter='GateUp*' > $R/gate-up-test.txt 2>&1; echo "gate-up rc=$?" >> $R/summary.txt
timeout 120 src/backend/cuda/mosaic_backend_cuda_test --gtest_brief=1 > $R/backend-test.txt 2>&1; echo "backend rc=$?" >> $R/summary.txt
timeout 150 tests/gpu/mosaic_gpu_test --gtest_brief=1 > $R/gpu-test.txt 2>&1; echo "gpu rc=$?" >> $R/summary.txt
timeout 60 src/mem/mosaic_mem_test --gtest_brief=1 > $R/mem-test.txt 2>&1; echo "mem rc=$?" >> $R/summary.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 1000 > $R/clocks.csv 2>&1 &
SMI=$!
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
for round in 1 2; do
  for v in fused separate; do
    echo "== llada $v round $round" >> $R/ab.txt
    if [ $v = separate ]; then export MOSAIC_FUSED_SWIGLU=0; else unset MOSAIC_FUSED_SWIGLU; fi
    timeout 100 src/cli/mosaic bench step --model $M --seq-len 4096,16384,32768 >> $R/ab.txt 2>&1
  done
done
unset MOSAIC_FUSED_SWIGLU
MOSAIC_PROFILE_OPS=1 timeout 60 src/cli/mosaic bench step --model $M --seq-len 32768 --repeats 1 --warmup 1 > $R/profile-32k.txt 2>&1
rm -rf $M
D=/tmp/mosaic-bench-dream-7b
src/cli/mosaic make-test-model --family dream --preset dream-7b --seed 1 --out $D --quiet
for v in fused separate; do
  echo "== dream $v" >> $R/ab.txt
  if [ $v = separate ]; then export MOSAIC_FUSED_SWIGLU=0; else unset MOSAIC_FUSED_SWIGLU; fi
  timeout 80 src/cli/mosaic bench step --model $D --seq-len 4096,32768 >> $R/ab.txt 2>&1
done
kill $SMI
cd $OUT && tar czf r72.tgz r72 && rm -rf r72
