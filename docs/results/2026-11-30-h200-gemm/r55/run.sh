#!/usr/bin/env bash
# Session 8, run 5: GEMM tuning measured under sustained load (50 ms warm-up, ~20 calls per
# measurement): A/B steps in the order that made burst-tuned steps slower (4k, 16k, 32k).
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r55; mkdir -p $R
cd gpu-bundle
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
( timeout 120 src/backend/cuda/mosaic_backend_cuda_test --gtest_filter='CudaGemm*' 2>&1 | grep -E "^\[ *(FAILED|PASSED|SKIPPED) |Failure" ) > $R/tests.txt 2>&1
for v in on off on off on off; do
  echo "== $v" >> $R/ab.txt
  if [ $v = off ]; then export MOSAIC_GEMM_TUNING=0; else unset MOSAIC_GEMM_TUNING; fi
  MOSAIC_LOG=info timeout 100 src/cli/mosaic bench step --model $M --seq-len 4096,16384,32768 --json-out $R/ab-$v-$RANDOM.json 2>>$R/tuning-$v.log | tail -4 >> $R/ab.txt
done
unset MOSAIC_GEMM_TUNING
cd $OUT && tar czf r55.tgz r55 && rm -rf r55
