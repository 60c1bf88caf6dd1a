set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
M=gpu-bundle/mosaic
model=/tmp/mosaic-bench-llada-8b
[ -f $model/config.json ] || $M make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
b() { timeout 60 $M bench step --model $model --seq-len 32768 --warmup 2 --repeats 2 "$@" 2>&1 | tail -n 1; }
echo "15.95 resident"; b --budget 15.95GiB --streamed-layers 0
echo "15.95 resident tail off"; MOSAIC_ATTENTION_TAIL_STREAM=0 b --budget 15.95GiB --streamed-layers 0
echo "15.52 auto tail off"; MOSAIC_ATTENTION_TAIL_STREAM=0 b --budget 15.52GiB
