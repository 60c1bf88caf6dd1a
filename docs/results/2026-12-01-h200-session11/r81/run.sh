#!/usr/bin/env bash
# Session 11, run 1: how much could fusing the memory-bound ops buy at 32k? The same engine with
# RoPE, SwiGLU and RMSNorm launches skipped (wrong outputs, timing only; skip/skip-ops.patch),
# alternating with the real step; PyTorch's 32k step in the same run; cluster occupancy by size.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r81; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt
gpu-bundle/skip/clusters > $R/clusters.txt 2>&1
M=/tmp/mosaic-bench-llada-8b
gpu-bundle/src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 100 > $R/clocks.csv &
sampler=$!
for round in 1 2; do
  for v in none rope swiglu rms_norm rope,swiglu,rms_norm; do
    echo "== skip $v round $round" >> $R/ab.txt
    MOSAIC_SKIP_OPS=$v timeout 90 gpu-bundle/skip/mosaic bench step --model $M --seq-len 4096,32768 >> $R/ab.txt 2>&1
  done
done
for v in none rope,swiglu,rms_norm; do
  echo "== profile, skip $v" >> $R/profile.txt
  MOSAIC_SKIP_OPS=$v MOSAIC_PROFILE_OPS=1 timeout 60 gpu-bundle/skip/mosaic bench step --model $M --seq-len 32768 --repeats 2 --warmup 1 >> $R/profile.txt 2>&1
done
echo "== PyTorch" >> $R/torch.txt
timeout 150 python3 bench/reference/torch_step.py --model $M --seq-len 4096,32768 --json $R/torch.json >> $R/torch.txt 2>&1
echo "== Mosaic (the engine's binary)" >> $R/torch.txt
timeout 60 gpu-bundle/src/cli/mosaic bench step --model $M --seq-len 4096,32768 >> $R/torch.txt 2>&1
kill $sampler
rm -rf $M
