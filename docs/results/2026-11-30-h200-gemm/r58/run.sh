#!/usr/bin/env bash
# Session 8, run 8: the reference algorithm at 4096 rows (gemm.h) instead of the first m seen:
# GPU tests; A/B against b9b2b25 with MOSAIC_GEMM_TUNING=0 (= the first-m reference of e4271d2),
# 32k first (twice each), then the benchmark's order.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r58; mkdir -p $R
cd gpu-bundle
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet &
mk=$!
( timeout 150 src/backend/cuda/mosaic_backend_cuda_test 2>&1 | grep -E "^\[ *(FAILED|PASSED|SKIPPED) |Failure|CudaGemm" | head -40
  timeout 200 tests/gpu/mosaic_gpu_test 2>&1 | grep -E "^\[ *(FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|note" | head -40 ) > $R/tests.txt 2>&1
wait $mk
export MOSAIC_GEMM_TUNING=0
for v in new old new old; do
  echo "== 32k first, $v" >> $R/ab.txt
  B=src/cli/mosaic; [ $v = old ] && B=b9b2b25/mosaic
  MOSAIC_LOG=info timeout 60 $B bench step --model $M --seq-len 32768 --json-out $R/l32-$v-$RANDOM.json 2>>$R/log-l32-$v.txt | tail -1 >> $R/ab.txt
done
for v in new old; do
  echo "== 4k first, $v" >> $R/ab.txt
  B=src/cli/mosaic; [ $v = old ] && B=b9b2b25/mosaic
  MOSAIC_LOG=info timeout 80 $B bench step --model $M --seq-len 4096,16384,32768 --json-out $R/l4-$v-$RANDOM.json 2>>$R/log-l4-$v.txt | tail -3 >> $R/ab.txt
done
cd $OUT && tar czf r58.tgz r58 && rm -rf r58
