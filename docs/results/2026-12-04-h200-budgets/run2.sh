#!/usr/bin/env bash
# PyTorch native's L_max (bench/reference/torch_step.py: the reference forward, full logits,
# every allocation capped by torch.cuda.set_per_process_memory_fraction) under 8, 16, 24 and
# 40 GiB at temperatures 0 and 1, on the same random LLaDA-8B checkpoint as run1.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p $OUT/bench
model=/tmp/mosaic-bench-llada-8b
[ -f $model/config.json ] || gpu-bundle/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
timeout 450 python3 bench/reference/torch_step.py --model $model --seq-len 4096 --warmup 0 --repeats 1 \
  --lmax-budget 8GiB,16GiB,24GiB,40GiB --json $OUT/bench/torch-lmax.json 2>&1 | tail -n 12
