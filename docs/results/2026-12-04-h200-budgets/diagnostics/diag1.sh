set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p $OUT
M=gpu-bundle/mosaic
model=/tmp/mosaic-bench-llada-8b
[ -f $model/config.json ] || $M make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
for b in 15.52GiB 15.75GiB; do
  echo "== $b"; timeout 60 $M bench step --model $model --seq-len 32768 --budget $b --warmup 2 --repeats 3 --json-out $OUT/$b.json 2>&1 | tail -n 1
  python3 -c "import json; j=json.load(open('$OUT/$b.json')); s=j['steps'][0]; print(s['graph_replayed'], [round(h) for h in s['host_ms']])"
done
echo "== 15.52GiB graphs off"; MOSAIC_CUDA_GRAPHS=0 timeout 60 $M bench step --model $model --seq-len 32768 --budget 15.52GiB --warmup 1 --repeats 3 2>&1 | tail -n 1
echo "== 15.52GiB --streamed-layers 3, residual device"; MOSAIC_RESIDUAL_IN_HOST=0 timeout 60 $M bench step --model $model --seq-len 32768 --budget 15.52GiB --streamed-layers 3 --warmup 2 --repeats 3 2>&1 | tail -n 1
