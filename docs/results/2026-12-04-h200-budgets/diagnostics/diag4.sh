set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
M=gpu-bundle/mosaic
model=/tmp/mosaic-bench-llada-8b
[ -f $model/config.json ] || $M make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
b() { timeout 60 $M bench step --model $model --seq-len 32768 --warmup 1 --repeats 1 "$@" 2>&1 | grep -E "profile|^ +32768" | tail -n 2; }
echo "15.95 graphs off"; MOSAIC_CUDA_GRAPHS=0 b --budget 15.95GiB --streamed-layers 0
echo "15.75 graphs off"; MOSAIC_CUDA_GRAPHS=0 b --budget 15.75GiB
echo "15.95 profile"; MOSAIC_PROFILE_OPS=1 b --budget 15.95GiB --streamed-layers 0
echo "16 profile"; MOSAIC_PROFILE_OPS=1 b --budget 16GiB --streamed-layers 0
