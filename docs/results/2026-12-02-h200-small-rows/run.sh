#!/usr/bin/env bash
# The small-rows product on the H200 (docs/design/small-rows-gemm.md): its GPU tests, the kernel
# workbench, then D2F at batch 1 and the 32-row cached step with the kernel off and on
# (MOSAIC_SMALL_ROWS_GEMM=0 / default), D2F's own code beside them, all in one command.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
M=$PWD/gpu-bundle/build-gpu/src/cli/mosaic
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee $OUT/gpu.txt
timeout 200 gpu-bundle/build-gpu/src/backend/cuda/mosaic_backend_cuda_test --gtest_filter='SmallRows*:CudaGemm*' > $OUT/tests.txt 2>&1
echo "tests rc $?"; grep -E "^\[  (PASSED|FAILED)|FAILED|OK \]" $OUT/tests.txt | tail -15
timeout 60 gpu-bundle/small_rows > $OUT/workbench.txt 2>&1; echo "workbench rc $?"
model=/tmp/mosaic-bench-llada-8b adapter=/tmp/mosaic-bench-llada-8b-d2f-lora
export MOSAIC_BENCH_MODEL_DIR=$model MOSAIC_BENCH_ADAPTER_DIR=$adapter
timeout 300 bench/d2f_characterization.sh $M $OUT/char reference > $OUT/reference.txt 2>&1; echo "reference rc $?"; tail -5 $OUT/reference.txt
settings=(--block-add-threshold 0.5 --decoded-token-threshold 0.9 --skip-threshold 1.0)
for round in 1 2; do
  for sr in 0 1; do
    MOSAIC_SMALL_ROWS_GEMM=$sr MOSAIC_LOG=info timeout 120 $M bench generate --model $model --adapter $adapter --prompt-len 256 --gen-length 512 \
      --block-length 32 --d2f "${settings[@]}" --cache auto --batch 1 --json-out $OUT/d2f-b1-sr$sr-r$round.json > $OUT/d2f-b1-sr$sr-r$round.txt 2>&1
    echo "d2f b1 small-rows=$sr round $round rc $?"; grep -v "gemm:" $OUT/d2f-b1-sr$sr-r$round.txt | tail -4
  done
done
for sr in 0 1; do
  MOSAIC_SMALL_ROWS_GEMM=$sr timeout 150 $M bench step --model $model --seq-len 4096 --masked 32 --cache dual > $OUT/step-sr$sr.txt 2>&1
  echo "cached step small-rows=$sr rc $?"; tail -6 $OUT/step-sr$sr.txt
done
