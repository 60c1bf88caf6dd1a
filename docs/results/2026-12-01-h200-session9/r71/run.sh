#!/usr/bin/env bash
# Session 9, run 11: does the tail split's priority survive CUDA graphs? LLaDA-8B 16k / 32k with
# graphs on and off (MOSAIC_CUDA_GRAPHS=0), split and not (MOSAIC_ATTENTION_TAIL_STREAM=0).
export LD_LIBRARY_PATH=$PWD/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
R=$OUT/r71; mkdir -p $R
cd gpu-bundle
M=/tmp/mosaic-bench-llada-8b
src/cli/mosaic make-test-model --family llada --preset llada-8b --seed 1 --out $M --quiet
for v in graphs-split nographs-split nographs-one graphs-split nographs-split; do
  g=1; t=1
  case $v in nographs-*) g=0;; esac
  case $v in *-one) t=0;; esac
  echo "== $v" >> $R/ab.txt
  MOSAIC_CUDA_GRAPHS=$g MOSAIC_ATTENTION_TAIL_STREAM=$t timeout 60 src/cli/mosaic bench step --model $M --seq-len 16384,32768 >> $R/ab.txt 2>&1
done
cd $OUT && tar czf r71.tgz r71 && rm -rf r71
