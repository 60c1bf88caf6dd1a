#!/usr/bin/env bash
# Issue 26's host-time target: LLaDA-8B's configuration (random bf16 weights) at L = 32,768 under
# every budget from none down to the tightest the plan allows (15.5 GiB with every weight
# resident; 12 and 8 GiB with the layers `mosaic plan --weights auto` names streamed), median of
# 3 after 2 warm-up steps (a CUDA graph is captured at a shape's second step, so the timed ones
# replay it). Then the planned L_max steps at 8 and 16 GiB on the 2-layer model with every layer
# streamed (the device peak does not depend on the layer count then).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p $OUT/bench
M=gpu-bundle/mosaic
model=/tmp/mosaic-bench-llada-8b
$M make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
step() {  # name, then bench step's arguments
  local name=$1; shift
  echo "== $name"
  timeout 120 $M bench step --model $model --seq-len 32768 --warmup 2 --repeats 3 --json-out $OUT/bench/$name.json "$@" 2>&1 | tail -n 2
}
step 32k-nobudget
step 32k-40GiB --budget 40GiB
step 32k-24GiB --budget 24GiB
step 32k-16GiB --budget 16GiB
step 32k-15.75GiB --budget 15.75GiB
step 32k-15.5GiB --budget 15.5GiB
step 32k-12GiB-12streamed --budget 12GiB --streamed-layers 12
step 32k-8GiB-22streamed --budget 8GiB --streamed-layers 22
model2=/tmp/mosaic-bench-llada-8b-2layers
$M make-test-model --family llada --preset llada-8b --layers 2 --seed 1 --out $model2 --quiet
echo "== L_max at 8 GiB (327,680), 2 layers, both streamed"
timeout 100 $M bench step --model $model2 --seq-len 327680 --streamed-layers 2 --budget 8GiB --warmup 0 --repeats 1 --json-out $OUT/bench/l2-327680-8GiB.json 2>&1 | tail -n 2
echo "== L_max at 16 GiB (851,968), 2 layers, both streamed"
timeout 150 $M bench step --model $model2 --seq-len 851968 --streamed-layers 2 --budget 16GiB --warmup 0 --repeats 1 --json-out $OUT/bench/l2-851968-16GiB.json 2>&1 | tail -n 2
