#!/usr/bin/env bash
# The engine with the wider small-rows stages (mosaic) against the engine before them
# (mosaic-base: main's kernels), in one command: GPU tests of the product, the 32-row cached step
# at 4k and 32k (split keys off and on), and D2F at batch 1 with the host's share; GPU tests of
# split-keys attention (parts of >= 4,096 keys).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=gpu-bundle
timeout 120 $B/mosaic_backend_cuda_test --gtest_filter='SmallRows*:*Gemm*' > $OUT/tests-gemm.txt 2>&1
echo "gemm tests rc $?"; grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" $OUT/tests-gemm.txt | head
timeout 60 $B/mosaic_backend_cuda_test --gtest_filter='SplitKeys*' > $OUT/tests-split.txt 2>&1
echo "split-keys tests rc $?"; grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" $OUT/tests-split.txt | head
timeout 150 $B/mosaic_gpu_test --gtest_filter='*Cached*:*d128*' > $OUT/tests-step.txt 2>&1
echo "step tests rc $?"; grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" $OUT/tests-step.txt | head
model=/tmp/mosaic-bench-llada-8b adapter=/tmp/mosaic-bench-llada-8b-d2f-lora
[ -f $model/config.json ] || $B/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $model --quiet
[ -f $adapter/adapter_config.json ] || python3 tests/reference/make_lora_adapter.py --base $model --out $adapter \
  --rank 32 --alpha 32 --targets q_proj,k_proj,v_proj,attn_out --dtype BF16 --seed 2 > /dev/null
for run in base:mosaic-base:0 new:mosaic:0 new-split:mosaic:1 base2:mosaic-base:0 new2:mosaic:0; do
  IFS=: read name bin sk <<< "$run"
  MOSAIC_SPLIT_KEYS=$sk MOSAIC_LOG=info timeout 100 $B/$bin bench step --model $model --seq-len 4096,32768 --masked 32 \
    --cache dual --json-out $OUT/step-$name.json > $OUT/step-$name.txt 2> $OUT/step-$name.log
  echo "cached step $name rc $?"; tail -2 $OUT/step-$name.txt
done
grep -i "small-rows\|choice" $OUT/step-new.log | sort | uniq -c | head -12
for run in base:mosaic-base new:mosaic; do
  IFS=: read name bin <<< "$run"
  timeout 60 $B/$bin bench generate --model $model --adapter $adapter --prompt-len 256 --gen-length 512 --block-length 32 \
    --d2f --block-add-threshold 0.5 --decoded-token-threshold 0.9 --skip-threshold 1.0 --cache auto --batch 1 \
    --json-out $OUT/d2f-$name.json > $OUT/d2f-$name.txt 2>&1
  echo "d2f $name rc $?"; tail -2 $OUT/d2f-$name.txt
done
