# Does cudaGraphLaunch wait when one serial chain of the graph is long? Graphs with x on the
# device (one chain) against graphs with x in host memory (its copies on the copy stream cut the
# chain), every weight resident, 2 warm-up steps and 2 timed (replayed).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
M=gpu-bundle/mosaic
model=/tmp/mosaic-bench-llada-8b
[ -f $model/config.json ] || $M make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
b() { timeout 60 $M bench step --model $model --seq-len 32768 --warmup 2 --repeats 2 --streamed-layers 0 "$@" 2>&1 | tail -n 1; }
echo "15.8GiB x on the device (5/9/4, 2,723 ops)"; MOSAIC_RESIDUAL_IN_HOST=0 b --budget 15.8GiB
echo "15.8GiB x where it fits (host: 3/4/3, 2,039 ops)"; b --budget 15.8GiB
echo "15.85GiB x on the device (the plan says 3/5/3, 1,667 ops)"; MOSAIC_RESIDUAL_IN_HOST=0 b --budget 15.85GiB
