#!/usr/bin/env bash
# The whole GPU suite (the executor now times each step's span on the device), then LLaDA-8B's
# configuration at L = 32,768 under every budget from none to the tightest, the engine choosing
# what to stream (`--streamed-layers auto`, the default), median of 3 after 2 warm-up steps. The
# table's "exposed" column: the step's wall time less the device's span from its first upload to
# its last copy back (docs/design/host-time.md).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p $OUT/bench
M=gpu-bundle/mosaic
timeout 280 gpu-bundle/mosaic_gpu_test --gtest_brief=1 2>&1 | grep -E "^\[  FAILED|^\[  PASSED|^\[==========\]|Failure" | head -20
model=/tmp/mosaic-bench-llada-8b
[ -f $model/config.json ] || $M make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
for b in none 24GiB 16GiB 15.95GiB 15.75GiB 15.52GiB 15.5GiB 12GiB 8GiB; do
  echo "== 32k, budget $b"
  args=(); [ $b = none ] || args=(--budget $b)
  timeout 60 $M bench step --model $model --seq-len 32768 --warmup 2 --repeats 3 "${args[@]}" --json-out $OUT/bench/32k-$b.json 2>&1 | grep -v "^mosaic bench step" | grep -v "^ *L  *step"
done
