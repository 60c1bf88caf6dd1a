set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
M=gpu-bundle/mosaic
model=/tmp/mosaic-bench-llada-8b
[ -f $model/config.json ] || $M make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
MOSAIC_DEBUG_HOST=1 timeout 60 $M bench step --model $model --seq-len 32768 --budget 15.52GiB --warmup 2 --repeats 2 2>&1 | tail -n 30
