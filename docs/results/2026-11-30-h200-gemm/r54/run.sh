#!/usr/bin/env bash
# Session 8, run 4: why tuned GEMMs made LLaDA's 16k/32k steps slower: op profiles, tuned and not.
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r54; mkdir -p $R
cd gpu-bundle
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
for v in off on off on; do
  if [ $v = off ]; then export MOSAIC_GEMM_TUNING=0; else unset MOSAIC_GEMM_TUNING; fi
  echo "== $v" >> $R/profile.txt
  MOSAIC_PROFILE_OPS=1 timeout 100 src/cli/mosaic bench step --model $M --seq-len 32768 --warmup 1 --repeats 2 >> $R/profile.txt 2>&1
done
unset MOSAIC_GEMM_TUNING
cd $OUT && tar czf r54.tgz r54 && rm -rf r54
