#!/usr/bin/env bash
# Why the tightest budget at 32k (15.5 GiB: 161 query-side and 215 attention chunks) spends its
# step on the host: the same step with CUDA graphs off (MOSAIC_CUDA_GRAPHS=0), and 20 MiB more
# budget (15.52 GiB: 36 and 48 chunks), every line the bench prints (graph notes included).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p $OUT/bench
M=gpu-bundle/mosaic
model=/tmp/mosaic-bench-llada-8b
[ -f $model/config.json ] || $M make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
for b in 15.5GiB 15.52GiB; do
  echo "== $b, graphs on"
  timeout 60 $M bench step --model $model --seq-len 32768 --budget $b --warmup 2 --repeats 3 --json-out $OUT/bench/32k-$b-graphs.json 2>&1 | grep -v "^mosaic bench step"
done
echo "== 15.5GiB, graphs off"
MOSAIC_CUDA_GRAPHS=0 timeout 60 $M bench step --model $model --seq-len 32768 --budget 15.5GiB --warmup 1 --repeats 3 --json-out $OUT/bench/32k-15.5GiB-nographs.json 2>&1 | grep -v "^mosaic bench step"
