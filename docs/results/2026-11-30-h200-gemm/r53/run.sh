#!/usr/bin/env bash
# Session 8, run 3: GEMM tuning per row bucket (timed cuBLASLt candidates, bit-identical only): GPU tests, then
# A/B steps (default = tuned, off = MOSAIC_GEMM_TUNING=0) in alternation; the first tuned run logs
# its tuning lines (MOSAIC_LOG=info).
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r53; mkdir -p $R
cd gpu-bundle
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet &
mk=$!
( timeout 120 src/backend/cuda/mosaic_backend_cuda_test 2>&1 | grep -E "^\[ *(FAILED|PASSED|SKIPPED) |Failure|CudaGemm" | head -40
  timeout 240 tests/gpu/mosaic_gpu_test 2>&1 | grep -E "^\[ *(FAILED|PASSED|SKIPPED) |Failure|Expected|Which is|note" | head -40 ) > $R/tests.txt 2>&1
wait $mk
MOSAIC_LOG=info timeout 120 src/cli/mosaic bench step --model $M --seq-len 4096,16384,32768 --json-out $R/ab-on-log.json > $R/ab-on-log.txt 2>&1
for v in off on off on; do
  echo "== $v" >> $R/ab.txt
  if [ $v = off ]; then export MOSAIC_GEMM_TUNING=0; else unset MOSAIC_GEMM_TUNING; fi
  timeout 100 src/cli/mosaic bench step --model $M --seq-len 4096,16384,32768 --json-out $R/ab-$v-$RANDOM.json 2>&1 | tail -4 >> $R/ab.txt
done
unset MOSAIC_GEMM_TUNING
D=/tmp/mosaic-bench-dream-7b
src/cli/mosaic make-test-model --family dream --preset dream-7b --seed 1 --out $D --quiet
for v in off on; do
  echo "== dream $v" >> $R/ab.txt
  if [ $v = off ]; then export MOSAIC_GEMM_TUNING=0; else unset MOSAIC_GEMM_TUNING; fi
  MOSAIC_LOG=info timeout 100 src/cli/mosaic bench step --model $D --seq-len 4096,16384,32768 --json-out $R/dream-$v.json 2>$R/dream-$v.log | tail -4 >> $R/ab.txt
done
unset MOSAIC_GEMM_TUNING
cd $OUT && tar czf r53.tgz r53 && rm -rf r53
