#!/usr/bin/env bash
# Session 10, run 2: why the fused gate / up / SwiGLU step ran slower than the three ops (r72):
# op profiles of both paths in one run, and both with CUDA graphs off (direct launches).
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r73; mkdir -p $R
cd gpu-bundle
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
for v in separate fused; do
  if [ $v = separate ]; then export MOSAIC_FUSED_SWIGLU=0; else unset MOSAIC_FUSED_SWIGLU; fi
  echo "== profile $v" >> $R/profile.txt
  MOSAIC_PROFILE_OPS=1 timeout 60 src/cli/mosaic bench step --model $M --seq-len 4096,32768 --repeats 2 --warmup 1 >> $R/profile.txt 2>&1
done
for round in 1 2; do
  for v in separate fused; do
    if [ $v = separate ]; then export MOSAIC_FUSED_SWIGLU=0; else unset MOSAIC_FUSED_SWIGLU; fi
    echo "== graphs off, $v round $round" >> $R/ab.txt
    MOSAIC_CUDA_GRAPHS=0 timeout 60 src/cli/mosaic bench step --model $M --seq-len 4096,32768 >> $R/ab.txt 2>&1
    echo "== graphs on, $v round $round" >> $R/ab.txt
    timeout 60 src/cli/mosaic bench step --model $M --seq-len 4096,32768 >> $R/ab.txt 2>&1
  done
done
rm -rf $M
