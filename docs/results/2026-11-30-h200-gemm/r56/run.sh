#!/usr/bin/env bash
# Session 8, run 6: sustained GEMM tuning where the first step is long (32k only: the reference is
# cuBLASLt's first choice at 32k), and Dream-7B in the benchmark's order; A/B alternating.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r56; mkdir -p $R
cd gpu-bundle
M=/tmp/mosaic-bench-llada-8b
D=/tmp/mosaic-bench-dream-7b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet &
src/cli/mosaic make-test-model --family dream --preset dream-7b --seed 1 --out $D --quiet &
wait
for v in on off on off; do
  echo "== llada 32k first, $v" >> $R/ab.txt
  if [ $v = off ]; then export MOSAIC_GEMM_TUNING=0; else unset MOSAIC_GEMM_TUNING; fi
  MOSAIC_LOG=info timeout 100 src/cli/mosaic bench step --model $M --seq-len 32768 --json-out $R/l32-$v-$RANDOM.json 2>>$R/tuning-l32-$v.log | tail -1 >> $R/ab.txt
done
for v in on off on off; do
  echo "== dream $v" >> $R/ab.txt
  if [ $v = off ]; then export MOSAIC_GEMM_TUNING=0; else unset MOSAIC_GEMM_TUNING; fi
  MOSAIC_LOG=info timeout 100 src/cli/mosaic bench step --model $D --seq-len 4096,16384,32768 --json-out $R/dream-$v-$RANDOM.json 2>>$R/tuning-dream-$v.log | tail -3 >> $R/ab.txt
done
unset MOSAIC_GEMM_TUNING
cd $OUT && tar czf r56.tgz r56 && rm -rf r56
