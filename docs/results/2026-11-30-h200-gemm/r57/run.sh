#!/usr/bin/env bash
# Session 8, run 7: the tree's GPU tests with GEMM tuning (products of >= 1 ms, sustained timing,
# 2 rounds), and A/B: 32k first (twice each), then the benchmark's order 4k, 16k, 32k.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r57; mkdir -p $R
cd gpu-bundle
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet &
mk=$!
( timeout 150 src/backend/cuda/mosaic_backend_cuda_test 2>&1 | grep -E "^\[ *(FAILED|PASSED|SKIPPED) |Failure|CudaGemm" | head -40
  timeout 240 tests/gpu/mosaic_gpu_test 2>&1 | grep -E "^\[ *(FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|note" | head -40
  timeout 40 src/mem/mosaic_mem_test 2>&1 | tail -1 ) > $R/tests.txt 2>&1
wait $mk
for v in on off on off; do
  echo "== llada 32k first, $v" >> $R/ab.txt
  if [ $v = off ]; then export MOSAIC_GEMM_TUNING=0; else unset MOSAIC_GEMM_TUNING; fi
  MOSAIC_LOG=info timeout 100 src/cli/mosaic bench step --model $M --seq-len 32768 --json-out $R/l32-$v-$RANDOM.json 2>>$R/tuning-l32-$v.log | tail -1 >> $R/ab.txt
done
for v in on off; do
  echo "== llada 4k first, $v" >> $R/ab.txt
  if [ $v = off ]; then export MOSAIC_GEMM_TUNING=0; else unset MOSAIC_GEMM_TUNING; fi
  MOSAIC_LOG=info timeout 100 src/cli/mosaic bench step --model $M --seq-len 4096,16384,32768 --json-out $R/l4-$v-$RANDOM.json 2>>$R/tuning-l4-$v.log | tail -3 >> $R/ab.txt
done
unset MOSAIC_GEMM_TUNING
cd $OUT && tar czf r57.tgz r57 && rm -rf r57
